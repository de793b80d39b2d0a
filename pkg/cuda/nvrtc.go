//go:build cgo && linux

package cuda

// nvrtc.go: libnvrtc (11.2 and newer) through dlsym'd function pointers.

/*
#include <stdint.h>
#include <stdlib.h>

typedef int nvrtcResult;
typedef uintptr_t nvrtcProgram;

#define T(name) ((name##_t)fn)

typedef nvrtcResult (*nvrtcVersion_t)(int*, int*);
static nvrtcResult c_nvrtcVersion(void* fn, int* a, int* b) { return T(nvrtcVersion)(a, b); }
typedef nvrtcResult (*nvrtcGetNumSupportedArchs_t)(int*);
static nvrtcResult c_nvrtcGetNumSupportedArchs(void* fn, int* n) { return T(nvrtcGetNumSupportedArchs)(n); }
typedef nvrtcResult (*nvrtcGetSupportedArchs_t)(int*);
static nvrtcResult c_nvrtcGetSupportedArchs(void* fn, int* a) { return T(nvrtcGetSupportedArchs)(a); }
typedef nvrtcResult (*nvrtcCreateProgram_t)(nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*);
static nvrtcResult c_nvrtcCreateProgram(void* fn, nvrtcProgram* p, const char* src, const char* name) {
	return T(nvrtcCreateProgram)(p, src, name, 0, NULL, NULL);
}
typedef nvrtcResult (*nvrtcCompileProgram_t)(nvrtcProgram, int, const char* const*);
static nvrtcResult c_nvrtcCompileProgram(void* fn, nvrtcProgram p, int n, char** opts) {
	return T(nvrtcCompileProgram)(p, n, (const char* const*)opts);
}
typedef nvrtcResult (*nvrtcGetSize_t)(nvrtcProgram, size_t*);
static nvrtcResult c_nvrtcGetSize(void* fn, nvrtcProgram p, size_t* n) { return ((nvrtcGetSize_t)fn)(p, n); }
typedef nvrtcResult (*nvrtcGetBytes_t)(nvrtcProgram, char*);
static nvrtcResult c_nvrtcGetBytes(void* fn, nvrtcProgram p, char* b) { return ((nvrtcGetBytes_t)fn)(p, b); }
typedef nvrtcResult (*nvrtcDestroyProgram_t)(nvrtcProgram*);
static nvrtcResult c_nvrtcDestroyProgram(void* fn, nvrtcProgram* p) { return T(nvrtcDestroyProgram)(p); }
typedef const char* (*nvrtcGetErrorString_t)(nvrtcResult);
static const char* c_nvrtcGetErrorString(void* fn, nvrtcResult r) { return T(nvrtcGetErrorString)(r); }
*/
import "C"

import "unsafe"

// cgoNVRTC holds libnvrtc's function pointers.
type cgoNVRTC struct {
	version_, numArchs, archs, create, compile_, logSize, log, ptxSize, ptx, cubinSize, cubin, destroy, errString unsafe.Pointer
}

// newNVRTCAPI resolves libnvrtc's functions.
func newNVRTCAPI(lib Library) (nvrtcAPI, error) {
	s := &symbols{lib: lib}
	n := &cgoNVRTC{
		version_: s.need("nvrtcVersion"), numArchs: s.need("nvrtcGetNumSupportedArchs"),
		archs: s.need("nvrtcGetSupportedArchs"), create: s.need("nvrtcCreateProgram"),
		compile_: s.need("nvrtcCompileProgram"), logSize: s.need("nvrtcGetProgramLogSize"),
		log: s.need("nvrtcGetProgramLog"), ptxSize: s.need("nvrtcGetPTXSize"), ptx: s.need("nvrtcGetPTX"),
		cubinSize: s.need("nvrtcGetCUBINSize"), cubin: s.need("nvrtcGetCUBIN"),
		destroy: s.need("nvrtcDestroyProgram"), errString: s.need("nvrtcGetErrorString"),
	}
	if err := s.err(); err != nil {
		return nil, err
	}
	return n, nil
}

func (n *cgoNVRTC) check(call string, r C.nvrtcResult) error {
	if r == 0 {
		return nil
	}
	name := codeName(nvrtcErrorNames, "NVRTC_ERROR", int(r))
	if s := C.c_nvrtcGetErrorString(n.errString, r); s != nil {
		name = C.GoString(s) // the enum's name, e.g. "NVRTC_ERROR_COMPILATION"
	}
	return Error{Call: call, Code: int(r), Name: name}
}

func (n *cgoNVRTC) version() (int, int, error) {
	var a, b C.int
	err := n.check("nvrtcVersion", C.c_nvrtcVersion(n.version_, &a, &b))
	return int(a), int(b), err
}

func (n *cgoNVRTC) supportedArchs() ([]int, error) {
	var k C.int
	if err := n.check("nvrtcGetNumSupportedArchs", C.c_nvrtcGetNumSupportedArchs(n.numArchs, &k)); err != nil {
		return nil, err
	}
	if k <= 0 {
		return nil, nil
	}
	buf := make([]C.int, int(k))
	if err := n.check("nvrtcGetSupportedArchs", C.c_nvrtcGetSupportedArchs(n.archs, &buf[0])); err != nil {
		return nil, err
	}
	out := make([]int, len(buf))
	for i, v := range buf {
		out[i] = int(v)
	}
	return out, nil
}

func (n *cgoNVRTC) compile(src, name string, opts []string, cubin bool) ([]byte, string, error) {
	csrc, cname := C.CString(src), C.CString(name)
	defer C.free(unsafe.Pointer(csrc))
	defer C.free(unsafe.Pointer(cname))
	var prog C.nvrtcProgram
	if err := n.check("nvrtcCreateProgram", C.c_nvrtcCreateProgram(n.create, &prog, csrc, cname)); err != nil {
		return nil, "", err
	}
	defer C.c_nvrtcDestroyProgram(n.destroy, &prog)

	// Options as a C array of C strings.
	copts := (**C.char)(C.calloc(C.size_t(len(opts)+1), C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer C.free(unsafe.Pointer(copts))
	list := unsafe.Slice(copts, len(opts)+1)
	for i, o := range opts {
		list[i] = C.CString(o)
	}
	defer func() {
		for i := range opts {
			C.free(unsafe.Pointer(list[i]))
		}
	}()
	cerr := n.check("nvrtcCompileProgram", C.c_nvrtcCompileProgram(n.compile_, prog, C.int(len(opts)), copts))

	log := n.bytes(prog, n.logSize, n.log)
	if len(log) > 0 && log[len(log)-1] == 0 {
		log = log[:len(log)-1]
	}
	if cerr != nil {
		return nil, string(log), cerr
	}
	sizeFn, getFn, call := n.ptxSize, n.ptx, "nvrtcGetPTX"
	if cubin {
		sizeFn, getFn, call = n.cubinSize, n.cubin, "nvrtcGetCUBIN"
	}
	var size C.size_t
	if err := n.check(call+"Size", C.c_nvrtcGetSize(sizeFn, prog, &size)); err != nil {
		return nil, string(log), err
	}
	code := make([]byte, int(size))
	if size > 0 {
		buf := (*C.char)(C.malloc(size))
		defer C.free(unsafe.Pointer(buf))
		if err := n.check(call, C.c_nvrtcGetBytes(getFn, prog, buf)); err != nil {
			return nil, string(log), err
		}
		copy(code, unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(size)))
	}
	return code, string(log), nil
}

// bytes reads a size-then-contents pair (the program log); errors give nil.
func (n *cgoNVRTC) bytes(prog C.nvrtcProgram, sizeFn, getFn unsafe.Pointer) []byte {
	var size C.size_t
	if C.c_nvrtcGetSize(sizeFn, prog, &size) != 0 || size == 0 {
		return nil
	}
	buf := (*C.char)(C.malloc(size))
	defer C.free(unsafe.Pointer(buf))
	if C.c_nvrtcGetBytes(getFn, prog, buf) != 0 {
		return nil
	}
	return C.GoBytes(unsafe.Pointer(buf), C.int(size))
}
