//go:build cgo && linux

package cuda

// cudnn.go: libcudnn.so.9 (cuDNN 9) through dlsym'd function pointers: the
// handle calls and the backend (graph) API. Descriptors are opaque
// pointers (cudnnBackendDescriptor_t), passed as uintptr.

/*
#include <stdint.h>
#include <stdlib.h>

typedef int cudnnStatus_t;
typedef uintptr_t h_t;   // cudnnHandle_t, cudnnBackendDescriptor_t
typedef uintptr_t CUstream;

#define T(name) ((name##_t)fn)

typedef size_t (*cudnnGetVersion_t)(void);
static size_t c_cudnnGetVersion(void* fn) { return T(cudnnGetVersion)(); }
typedef cudnnStatus_t (*cudnnCreate_t)(h_t*);
static cudnnStatus_t c_cudnnCreate(void* fn, h_t* h) { return T(cudnnCreate)(h); }
typedef cudnnStatus_t (*cudnnDestroy_t)(h_t);
static cudnnStatus_t c_cudnnDestroy(void* fn, h_t h) { return T(cudnnDestroy)(h); }
typedef cudnnStatus_t (*cudnnSetStream_t)(h_t, CUstream);
static cudnnStatus_t c_cudnnSetStream(void* fn, h_t h, CUstream s) { return T(cudnnSetStream)(h, s); }
typedef const char* (*cudnnGetErrorString_t)(cudnnStatus_t);
static const char* c_cudnnGetErrorString(void* fn, cudnnStatus_t s) { return T(cudnnGetErrorString)(s); }
typedef void (*cudnnGetLastErrorString_t)(char*, size_t);
static void c_cudnnGetLastErrorString(void* fn, char* buf, size_t n) { T(cudnnGetLastErrorString)(buf, n); }
typedef cudnnStatus_t (*cudnnBackendCreateDescriptor_t)(int, h_t*);
static cudnnStatus_t c_cudnnBackendCreateDescriptor(void* fn, int kind, h_t* d) { return T(cudnnBackendCreateDescriptor)(kind, d); }
typedef cudnnStatus_t (*cudnnBackendDestroyDescriptor_t)(h_t);
static cudnnStatus_t c_cudnnBackendDestroyDescriptor(void* fn, h_t d) { return T(cudnnBackendDestroyDescriptor)(d); }
typedef cudnnStatus_t (*cudnnBackendFinalize_t)(h_t);
static cudnnStatus_t c_cudnnBackendFinalize(void* fn, h_t d) { return T(cudnnBackendFinalize)(d); }
typedef cudnnStatus_t (*cudnnBackendSetAttribute_t)(h_t, int, int, int64_t, const void*);
static cudnnStatus_t c_cudnnBackendSetAttribute(void* fn, h_t d, int name, int typ, int64_t n, const void* v) {
	return T(cudnnBackendSetAttribute)(d, name, typ, n, v);
}
typedef cudnnStatus_t (*cudnnBackendGetAttribute_t)(h_t, int, int, int64_t, int64_t*, void*);
static cudnnStatus_t c_cudnnBackendGetAttribute(void* fn, h_t d, int name, int typ, int64_t req, int64_t* n, void* v) {
	return T(cudnnBackendGetAttribute)(d, name, typ, req, n, v);
}
typedef cudnnStatus_t (*cudnnBackendExecute_t)(h_t, h_t, h_t);
static cudnnStatus_t c_cudnnBackendExecute(void* fn, h_t h, h_t plan, h_t pack) { return T(cudnnBackendExecute)(h, plan, pack); }
*/
import "C"

import "unsafe"

// cgoDNN holds libcudnn's function pointers.
type cgoDNN struct {
	version_, create_, destroy_, setStream_, errorString_, createDesc, destroyDesc, finalize_,
	setAttr, getAttr, execute_ unsafe.Pointer
	lastError_ unsafe.Pointer // optional: cudnnGetLastErrorString (cuDNN 9.0+)
}

// newDNNAPI resolves libcudnn's functions.
func newDNNAPI(lib Library) (dnnAPI, error) {
	s := &symbols{lib: lib}
	l := &cgoDNN{
		version_: s.need("cudnnGetVersion"), create_: s.need("cudnnCreate"), destroy_: s.need("cudnnDestroy"),
		setStream_: s.need("cudnnSetStream"), errorString_: s.need("cudnnGetErrorString"),
		createDesc: s.need("cudnnBackendCreateDescriptor"), destroyDesc: s.need("cudnnBackendDestroyDescriptor"),
		finalize_: s.need("cudnnBackendFinalize"), setAttr: s.need("cudnnBackendSetAttribute"),
		getAttr: s.need("cudnnBackendGetAttribute"), execute_: s.need("cudnnBackendExecute"),
		lastError_: s.want("cudnnGetLastErrorString"),
	}
	if err := s.err(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *cgoDNN) check(call string, r C.cudnnStatus_t) error {
	if r == 0 {
		return nil
	}
	return l.fail(call, int(r))
}

// fail builds the Error of a failed call with cuDNN's own words for it.
func (l *cgoDNN) fail(call string, code int) error {
	name := ""
	if p := C.c_cudnnGetErrorString(l.errorString_, C.cudnnStatus_t(code)); p != nil {
		name = C.GoString(p)
	}
	if name == "" {
		name = codeName(nil, "CUDNN_STATUS", code)
	}
	return dnnError(Error{Call: call, Code: code, Name: name}, l.lastError())
}

func (l *cgoDNN) lastError() string {
	if l.lastError_ == nil {
		return ""
	}
	buf := (*C.char)(C.calloc(1024, 1))
	defer C.free(unsafe.Pointer(buf))
	C.c_cudnnGetLastErrorString(l.lastError_, buf, 1024)
	return C.GoString(buf)
}

func (l *cgoDNN) version() uint64 { return uint64(C.c_cudnnGetVersion(l.version_)) }

func (l *cgoDNN) create() (uintptr, error) {
	var h C.h_t
	return uintptr(h), l.check("cudnnCreate", C.c_cudnnCreate(l.create_, &h))
}

func (l *cgoDNN) destroy(h uintptr) error {
	return l.check("cudnnDestroy", C.c_cudnnDestroy(l.destroy_, C.h_t(h)))
}

func (l *cgoDNN) setStream(h, s uintptr) error {
	return l.check("cudnnSetStream", C.c_cudnnSetStream(l.setStream_, C.h_t(h), C.CUstream(s)))
}

func (l *cgoDNN) createDescriptor(kind int) (uintptr, error) {
	var d C.h_t
	return uintptr(d), l.check("cudnnBackendCreateDescriptor", C.c_cudnnBackendCreateDescriptor(l.createDesc, C.int(kind), &d))
}

func (l *cgoDNN) destroyDescriptor(d uintptr) error {
	return l.check("cudnnBackendDestroyDescriptor", C.c_cudnnBackendDestroyDescriptor(l.destroyDesc, C.h_t(d)))
}

func (l *cgoDNN) finalize(d uintptr) error {
	return l.check("cudnnBackendFinalize", C.c_cudnnBackendFinalize(l.finalize_, C.h_t(d)))
}

func (l *cgoDNN) setAttribute(d uintptr, name, typ int, n int64, v unsafe.Pointer) error {
	return l.check("cudnnBackendSetAttribute", C.c_cudnnBackendSetAttribute(l.setAttr, C.h_t(d), C.int(name), C.int(typ), C.int64_t(n), v))
}

func (l *cgoDNN) getAttribute(d uintptr, name, typ int, req int64, v unsafe.Pointer) (int64, error) {
	var n C.int64_t
	err := l.check("cudnnBackendGetAttribute", C.c_cudnnBackendGetAttribute(l.getAttr, C.h_t(d), C.int(name), C.int(typ), C.int64_t(req), &n, v))
	return int64(n), err
}

func (l *cgoDNN) execute(h, plan, pack uintptr) error {
	return l.check("cudnnBackendExecute", C.c_cudnnBackendExecute(l.execute_, C.h_t(h), C.h_t(plan), C.h_t(pack)))
}
