//go:build cgo && linux

package cuda

// driver.go: libcuda through dlsym'd function pointers. The types below are
// declared here (no cuda.h at build time) with the ABI of CUDA 11.8's
// cuda.h, and the versioned names (_v2) are the ones its macros select, all
// still exported by the 13.x drivers.

/*
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
// Handles are opaque pointers; declared as uintptr_t (the same size and
// argument class on x86-64 and arm64) so that Go passes them as integers.
typedef uintptr_t CUcontext;
typedef uintptr_t CUstream;
typedef uintptr_t CUevent;
typedef uintptr_t CUmodule;
typedef uintptr_t CUfunction;
typedef uintptr_t CUgraph;
typedef uintptr_t CUgraphExec;

#define T(name) ((name##_t)fn)

typedef CUresult (*cuDriverGetVersion_t)(int*);
static CUresult c_cuDriverGetVersion(void* fn, int* v) { return T(cuDriverGetVersion)(v); }
typedef CUresult (*cuInit_t)(unsigned int);
static CUresult c_cuInit(void* fn, unsigned int f) { return T(cuInit)(f); }
typedef CUresult (*cuGetErrorName_t)(CUresult, const char**);
static CUresult c_cuGetErrorName(void* fn, CUresult r, const char** s) { return T(cuGetErrorName)(r, s); }
typedef CUresult (*cuDeviceGetCount_t)(int*);
static CUresult c_cuDeviceGetCount(void* fn, int* n) { return T(cuDeviceGetCount)(n); }
typedef CUresult (*cuDeviceGet_t)(CUdevice*, int);
static CUresult c_cuDeviceGet(void* fn, CUdevice* d, int o) { return T(cuDeviceGet)(d, o); }
typedef CUresult (*cuDeviceGetName_t)(char*, int, CUdevice);
static CUresult c_cuDeviceGetName(void* fn, char* s, int n, CUdevice d) { return T(cuDeviceGetName)(s, n, d); }
typedef CUresult (*cuDeviceGetAttribute_t)(int*, int, CUdevice);
static CUresult c_cuDeviceGetAttribute(void* fn, int* v, int a, CUdevice d) { return T(cuDeviceGetAttribute)(v, a, d); }
typedef CUresult (*cuDeviceTotalMem_v2_t)(size_t*, CUdevice);
static CUresult c_cuDeviceTotalMem_v2(void* fn, size_t* b, CUdevice d) { return T(cuDeviceTotalMem_v2)(b, d); }
typedef CUresult (*cuDevicePrimaryCtxRetain_t)(CUcontext*, CUdevice);
static CUresult c_cuDevicePrimaryCtxRetain(void* fn, CUcontext* c, CUdevice d) { return T(cuDevicePrimaryCtxRetain)(c, d); }
typedef CUresult (*cuDevicePrimaryCtxRelease_v2_t)(CUdevice);
static CUresult c_cuDevicePrimaryCtxRelease_v2(void* fn, CUdevice d) { return T(cuDevicePrimaryCtxRelease_v2)(d); }
typedef CUresult (*cuCtxSetCurrent_t)(CUcontext);
static CUresult c_cuCtxSetCurrent(void* fn, CUcontext c) { return T(cuCtxSetCurrent)(c); }
typedef CUresult (*cuCtxSynchronize_t)(void);
static CUresult c_cuCtxSynchronize(void* fn) { return T(cuCtxSynchronize)(); }
typedef CUresult (*cuMemAlloc_v2_t)(CUdeviceptr*, size_t);
static CUresult c_cuMemAlloc_v2(void* fn, CUdeviceptr* p, size_t n) { return T(cuMemAlloc_v2)(p, n); }
typedef CUresult (*cuMemFree_v2_t)(CUdeviceptr);
static CUresult c_cuMemFree_v2(void* fn, CUdeviceptr p) { return T(cuMemFree_v2)(p); }
typedef CUresult (*cuMemGetInfo_v2_t)(size_t*, size_t*);
static CUresult c_cuMemGetInfo_v2(void* fn, size_t* f, size_t* t) { return T(cuMemGetInfo_v2)(f, t); }
typedef CUresult (*cuMemcpyHtoDAsync_v2_t)(CUdeviceptr, const void*, size_t, CUstream);
static CUresult c_cuMemcpyHtoDAsync_v2(void* fn, CUdeviceptr d, const void* s, size_t n, CUstream st) { return T(cuMemcpyHtoDAsync_v2)(d, s, n, st); }
typedef CUresult (*cuMemcpyDtoHAsync_v2_t)(void*, CUdeviceptr, size_t, CUstream);
static CUresult c_cuMemcpyDtoHAsync_v2(void* fn, void* d, CUdeviceptr s, size_t n, CUstream st) { return T(cuMemcpyDtoHAsync_v2)(d, s, n, st); }
typedef CUresult (*cuMemcpyDtoDAsync_v2_t)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
static CUresult c_cuMemcpyDtoDAsync_v2(void* fn, CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { return T(cuMemcpyDtoDAsync_v2)(d, s, n, st); }
typedef CUresult (*cuMemsetD8Async_t)(CUdeviceptr, unsigned char, size_t, CUstream);
static CUresult c_cuMemsetD8Async(void* fn, CUdeviceptr d, unsigned char v, size_t n, CUstream st) { return T(cuMemsetD8Async)(d, v, n, st); }
typedef CUresult (*cuMemsetD32Async_t)(CUdeviceptr, unsigned int, size_t, CUstream);
static CUresult c_cuMemsetD32Async(void* fn, CUdeviceptr d, unsigned int v, size_t n, CUstream st) { return T(cuMemsetD32Async)(d, v, n, st); }
typedef CUresult (*cuStreamCreate_t)(CUstream*, unsigned int);
static CUresult c_cuStreamCreate(void* fn, CUstream* s, unsigned int f) { return T(cuStreamCreate)(s, f); }
typedef CUresult (*cuStreamDestroy_v2_t)(CUstream);
static CUresult c_cuStreamDestroy_v2(void* fn, CUstream s) { return T(cuStreamDestroy_v2)(s); }
typedef CUresult (*cuStreamSynchronize_t)(CUstream);
static CUresult c_cuStreamSynchronize(void* fn, CUstream s) { return T(cuStreamSynchronize)(s); }
typedef CUresult (*cuStreamWaitEvent_t)(CUstream, CUevent, unsigned int);
static CUresult c_cuStreamWaitEvent(void* fn, CUstream s, CUevent e) { return T(cuStreamWaitEvent)(s, e, 0); }
typedef CUresult (*cuEventCreate_t)(CUevent*, unsigned int);
static CUresult c_cuEventCreate(void* fn, CUevent* e, unsigned int f) { return T(cuEventCreate)(e, f); }
typedef CUresult (*cuEventDestroy_v2_t)(CUevent);
static CUresult c_cuEventDestroy_v2(void* fn, CUevent e) { return T(cuEventDestroy_v2)(e); }
typedef CUresult (*cuEventRecord_t)(CUevent, CUstream);
static CUresult c_cuEventRecord(void* fn, CUevent e, CUstream s) { return T(cuEventRecord)(e, s); }
typedef CUresult (*cuEventSynchronize_t)(CUevent);
static CUresult c_cuEventSynchronize(void* fn, CUevent e) { return T(cuEventSynchronize)(e); }
typedef CUresult (*cuEventElapsedTime_t)(float*, CUevent, CUevent);
static CUresult c_cuEventElapsedTime(void* fn, float* ms, CUevent a, CUevent b) { return T(cuEventElapsedTime)(ms, a, b); }
typedef CUresult (*cuStreamBeginCapture_v2_t)(CUstream, int);
static CUresult c_cuStreamBeginCapture_v2(void* fn, CUstream s, int mode) { return T(cuStreamBeginCapture_v2)(s, mode); }
typedef CUresult (*cuStreamEndCapture_t)(CUstream, CUgraph*);
static CUresult c_cuStreamEndCapture(void* fn, CUstream s, CUgraph* g) { return T(cuStreamEndCapture)(s, g); }
typedef CUresult (*cuGraphInstantiateWithFlags_t)(CUgraphExec*, CUgraph, unsigned long long);
static CUresult c_cuGraphInstantiateWithFlags(void* fn, CUgraphExec* x, CUgraph g) { return T(cuGraphInstantiateWithFlags)(x, g, 0); }
typedef CUresult (*cuGraphLaunch_t)(CUgraphExec, CUstream);
static CUresult c_cuGraphLaunch(void* fn, CUgraphExec x, CUstream s) { return T(cuGraphLaunch)(x, s); }
typedef CUresult (*cuGraphExecDestroy_t)(CUgraphExec);
static CUresult c_cuGraphExecDestroy(void* fn, CUgraphExec x) { return T(cuGraphExecDestroy)(x); }
typedef CUresult (*cuGraphDestroy_t)(CUgraph);
static CUresult c_cuGraphDestroy(void* fn, CUgraph g) { return T(cuGraphDestroy)(g); }
typedef CUresult (*cuMemHostAlloc_t)(void**, size_t, unsigned int);
static CUresult c_cuMemHostAlloc(void* fn, void** p, size_t n) { return T(cuMemHostAlloc)(p, n, 0); }
typedef CUresult (*cuMemFreeHost_t)(void*);
static CUresult c_cuMemFreeHost(void* fn, void* p) { return T(cuMemFreeHost)(p); }
typedef CUresult (*cuModuleUnload_t)(CUmodule);
static CUresult c_cuModuleUnload(void* fn, CUmodule m) { return T(cuModuleUnload)(m); }
typedef CUresult (*cuModuleGetFunction_t)(CUfunction*, CUmodule, const char*);
static CUresult c_cuModuleGetFunction(void* fn, CUfunction* f, CUmodule m, const char* n) { return T(cuModuleGetFunction)(f, m, n); }
typedef CUresult (*cuFuncGetAttribute_t)(int*, int, CUfunction);
static CUresult c_cuFuncGetAttribute(void* fn, int* v, int a, CUfunction f) { return T(cuFuncGetAttribute)(v, a, f); }
typedef CUresult (*cuFuncSetAttribute_t)(CUfunction, int, int);
static CUresult c_cuFuncSetAttribute(void* fn, CUfunction f, int a, int v) { return T(cuFuncSetAttribute)(f, a, v); }

// cuModuleLoadDataEx with the JIT's info and error logs (options 3..6:
// CU_JIT_INFO_LOG_BUFFER, _SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER, _SIZE_BYTES).
typedef CUresult (*cuModuleLoadDataEx_t)(CUmodule*, const void*, unsigned int, int*, void**);
static CUresult c_cuModuleLoadDataEx(void* fn, CUmodule* m, const void* image, char* info, char* err, size_t n) {
	int opts[4] = {3, 4, 5, 6};
	void* vals[4] = {info, (void*)(uintptr_t)n, err, (void*)(uintptr_t)n};
	return T(cuModuleLoadDataEx)(m, image, 4, opts, vals);
}

// cuLaunchKernel with the arguments copied into C memory (this frame) first:
// packed holds each argument's bytes at offs[i]; params[i] points at them.
typedef CUresult (*cuLaunchKernel_t)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
	unsigned, CUstream, void**, void**);
static CUresult c_cuLaunchKernel(void* fn, CUfunction f, unsigned gx, unsigned gy, unsigned gz,
	unsigned bx, unsigned by, unsigned bz, unsigned shmem, CUstream s,
	const unsigned char* packed, size_t size, const int* offs, int nargs) {
	unsigned char buf[4096] __attribute__((aligned(16)));
	void* params[1024];
	if (size > sizeof buf || nargs > 1024) return 1; // CUDA_ERROR_INVALID_VALUE
	if (size > 0) memcpy(buf, packed, size);
	for (int i = 0; i < nargs; i++) params[i] = buf + offs[i];
	return T(cuLaunchKernel)(f, gx, gy, gz, bx, by, bz, shmem, s, nargs > 0 ? params : NULL, NULL);
}

// cuLaunchKernelEx (CUDA 12.0) with one attribute,
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION (6) allowed: the
// kernel may start while the previous kernel of the stream drains, and
// waits for it with griddepcontrol.wait (programmatic dependent launch).
// The structs as CUDA 12's cuda.h lays them out: CUlaunchAttribute is the
// id, 4 bytes of padding and a 64-byte value union.
typedef struct {
	unsigned int id;
	char pad[4];
	union {
		char pad[64];
		int programmaticStreamSerializationAllowed;
	} value;
} druto_CUlaunchAttribute;
typedef struct {
	unsigned int gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
	CUstream hStream;
	druto_CUlaunchAttribute* attrs;
	unsigned int numAttrs;
} druto_CUlaunchConfig;
typedef CUresult (*cuLaunchKernelEx_t)(const druto_CUlaunchConfig*, CUfunction, void**, void**);
static CUresult c_cuLaunchKernelPDL(void* fn, CUfunction f, unsigned gx, unsigned gy, unsigned gz,
	unsigned bx, unsigned by, unsigned bz, unsigned shmem, CUstream s,
	const unsigned char* packed, size_t size, const int* offs, int nargs) {
	unsigned char buf[4096] __attribute__((aligned(16)));
	void* params[1024];
	if (size > sizeof buf || nargs > 1024) return 1; // CUDA_ERROR_INVALID_VALUE
	if (size > 0) memcpy(buf, packed, size);
	for (int i = 0; i < nargs; i++) params[i] = buf + offs[i];
	druto_CUlaunchAttribute attr;
	memset(&attr, 0, sizeof attr);
	attr.id = 6; // CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
	attr.value.programmaticStreamSerializationAllowed = 1;
	druto_CUlaunchConfig cfg = {gx, gy, gz, bx, by, bz, shmem, s, &attr, 1};
	return T(cuLaunchKernelEx)(&cfg, f, nargs > 0 ? params : NULL, NULL);
}
*/
import "C"

import (
	"unsafe"
)

// cgoDriver holds libcuda's function pointers, named as the C functions.
type cgoDriver struct{ f driverFns }

type driverFns struct {
	cuDriverGetVersion, cuInit, cuGetErrorName, cuDeviceGetCount, cuDeviceGet, cuDeviceGetName, cuDeviceGetAttribute, cuDeviceTotalMem_v2, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease_v2, cuCtxSetCurrent, cuCtxSynchronize, cuMemAlloc_v2, cuMemFree_v2, cuMemGetInfo_v2, cuMemcpyHtoDAsync_v2, cuMemcpyDtoHAsync_v2, cuMemcpyDtoDAsync_v2, cuMemsetD8Async, cuMemsetD32Async, cuStreamCreate, cuStreamDestroy_v2, cuStreamSynchronize, cuStreamWaitEvent, cuEventCreate, cuEventDestroy_v2, cuEventRecord, cuEventSynchronize, cuEventElapsedTime, cuStreamBeginCapture_v2, cuStreamEndCapture, cuGraphInstantiateWithFlags, cuGraphLaunch, cuGraphExecDestroy, cuGraphDestroy, cuMemHostAlloc, cuMemFreeHost, cuModuleLoadDataEx, cuModuleUnload, cuModuleGetFunction, cuFuncGetAttribute, cuFuncSetAttribute, cuLaunchKernel, cuLaunchKernelEx unsafe.Pointer
}

// driverSymbols lists every function druto needs from libcuda, in the
// order of driverFns's fields.
var driverSymbols = []string{
	"cuDriverGetVersion",
	"cuInit",
	"cuGetErrorName",
	"cuDeviceGetCount",
	"cuDeviceGet",
	"cuDeviceGetName",
	"cuDeviceGetAttribute",
	"cuDeviceTotalMem_v2",
	"cuDevicePrimaryCtxRetain",
	"cuDevicePrimaryCtxRelease_v2",
	"cuCtxSetCurrent",
	"cuCtxSynchronize",
	"cuMemAlloc_v2",
	"cuMemFree_v2",
	"cuMemGetInfo_v2",
	"cuMemcpyHtoDAsync_v2",
	"cuMemcpyDtoHAsync_v2",
	"cuMemcpyDtoDAsync_v2",
	"cuMemsetD8Async",
	"cuMemsetD32Async",
	"cuStreamCreate",
	"cuStreamDestroy_v2",
	"cuStreamSynchronize",
	"cuStreamWaitEvent",
	"cuEventCreate",
	"cuEventDestroy_v2",
	"cuEventRecord",
	"cuEventSynchronize",
	"cuEventElapsedTime",
	"cuStreamBeginCapture_v2",
	"cuStreamEndCapture",
	"cuGraphInstantiateWithFlags",
	"cuGraphLaunch",
	"cuGraphExecDestroy",
	"cuGraphDestroy",
	"cuMemHostAlloc",
	"cuMemFreeHost",
	"cuModuleLoadDataEx",
	"cuModuleUnload",
	"cuModuleGetFunction",
	"cuFuncGetAttribute",
	"cuFuncSetAttribute",
	"cuLaunchKernel",
	"cuLaunchKernelEx",
}

// optionalDriverSymbols may be missing: a driver without them has no
// graphs or pinned memory (the calls return CUDA_ERROR_NOT_SUPPORTED),
// not a load failure.
var optionalDriverSymbols = map[string]bool{
	"cuStreamBeginCapture_v2": true, "cuStreamEndCapture": true, "cuGraphInstantiateWithFlags": true,
	"cuGraphLaunch": true, "cuGraphExecDestroy": true, "cuGraphDestroy": true,
	"cuMemHostAlloc": true, "cuMemFreeHost": true,
	"cuLaunchKernelEx": true, // CUDA 12.0: without it, no programmatic dependent launch
}

// missing is the error of a call to an optional function the driver lacks.
func missing(call string) error {
	return Error{Call: call, Code: 801, Name: "CUDA_ERROR_NOT_SUPPORTED"}
}

// newDriverAPI resolves libcuda's functions, reporting every missing one.
func newDriverAPI(lib Library) (driverAPI, error) {
	s := &symbols{lib: lib}
	d := &cgoDriver{}
	// driverFns is a run of unsafe.Pointer fields in driverSymbols's order.
	fns := unsafe.Slice((*unsafe.Pointer)(unsafe.Pointer(&d.f)), len(driverSymbols))
	for i, name := range driverSymbols {
		if optionalDriverSymbols[name] {
			fns[i] = s.want(name)
		} else {
			fns[i] = s.need(name)
		}
	}
	if err := s.err(); err != nil {
		return nil, err
	}
	return d, nil
}

// check turns a CUresult into nil or an Error naming call.
func (d *cgoDriver) check(call string, r C.CUresult) error {
	if r == 0 {
		return nil
	}
	return Error{Call: call, Code: int(r), Name: d.errorName(int(r))}
}

func (d *cgoDriver) errorName(code int) string {
	var s *C.char
	if C.c_cuGetErrorName(d.f.cuGetErrorName, C.CUresult(code), &s) == 0 && s != nil {
		return C.GoString(s)
	}
	return codeName(driverErrorNames, "CUDA_ERROR", code)
}

func (d *cgoDriver) version() (int, error) {
	var v C.int
	return int(v), d.check("cuDriverGetVersion", C.c_cuDriverGetVersion(d.f.cuDriverGetVersion, &v))
}

func (d *cgoDriver) initialize() error { return d.check("cuInit", C.c_cuInit(d.f.cuInit, 0)) }

func (d *cgoDriver) deviceCount() (int, error) {
	var n C.int
	return int(n), d.check("cuDeviceGetCount", C.c_cuDeviceGetCount(d.f.cuDeviceGetCount, &n))
}

func (d *cgoDriver) deviceGet(ordinal int) (int32, error) {
	var dev C.CUdevice
	return int32(dev), d.check("cuDeviceGet", C.c_cuDeviceGet(d.f.cuDeviceGet, &dev, C.int(ordinal)))
}

func (d *cgoDriver) deviceName(dev int32) (string, error) {
	var buf [256]C.char
	if err := d.check("cuDeviceGetName", C.c_cuDeviceGetName(d.f.cuDeviceGetName, &buf[0], C.int(len(buf)), C.CUdevice(dev))); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

func (d *cgoDriver) deviceAttr(attr int, dev int32) (int, error) {
	var v C.int
	return int(v), d.check("cuDeviceGetAttribute", C.c_cuDeviceGetAttribute(d.f.cuDeviceGetAttribute, &v, C.int(attr), C.CUdevice(dev)))
}

func (d *cgoDriver) deviceTotalMem(dev int32) (uint64, error) {
	var n C.size_t
	return uint64(n), d.check("cuDeviceTotalMem_v2", C.c_cuDeviceTotalMem_v2(d.f.cuDeviceTotalMem_v2, &n, C.CUdevice(dev)))
}

func (d *cgoDriver) primaryCtxRetain(dev int32) (uintptr, error) {
	var c C.CUcontext
	return uintptr(c), d.check("cuDevicePrimaryCtxRetain", C.c_cuDevicePrimaryCtxRetain(d.f.cuDevicePrimaryCtxRetain, &c, C.CUdevice(dev)))
}

func (d *cgoDriver) primaryCtxRelease(dev int32) error {
	return d.check("cuDevicePrimaryCtxRelease_v2", C.c_cuDevicePrimaryCtxRelease_v2(d.f.cuDevicePrimaryCtxRelease_v2, C.CUdevice(dev)))
}

func (d *cgoDriver) ctxSetCurrent(ctx uintptr) error {
	return d.check("cuCtxSetCurrent", C.c_cuCtxSetCurrent(d.f.cuCtxSetCurrent, C.CUcontext(ctx)))
}

func (d *cgoDriver) ctxSynchronize() error {
	return d.check("cuCtxSynchronize", C.c_cuCtxSynchronize(d.f.cuCtxSynchronize))
}

func (d *cgoDriver) memAlloc(n uint64) (DevicePtr, error) {
	var p C.CUdeviceptr
	return DevicePtr(p), d.check("cuMemAlloc_v2", C.c_cuMemAlloc_v2(d.f.cuMemAlloc_v2, &p, C.size_t(n)))
}

func (d *cgoDriver) memFree(p DevicePtr) error {
	return d.check("cuMemFree_v2", C.c_cuMemFree_v2(d.f.cuMemFree_v2, C.CUdeviceptr(p)))
}

func (d *cgoDriver) memGetInfo() (free, total uint64, err error) {
	var f, t C.size_t
	err = d.check("cuMemGetInfo_v2", C.c_cuMemGetInfo_v2(d.f.cuMemGetInfo_v2, &f, &t))
	return uint64(f), uint64(t), err
}

func stream(s uintptr) C.CUstream { return C.CUstream(s) }

func (d *cgoDriver) memcpyHtoD(dst DevicePtr, src unsafe.Pointer, n uint64, s uintptr) error {
	return d.check("cuMemcpyHtoDAsync_v2", C.c_cuMemcpyHtoDAsync_v2(d.f.cuMemcpyHtoDAsync_v2, C.CUdeviceptr(dst), src, C.size_t(n), stream(s)))
}

func (d *cgoDriver) memcpyDtoH(dst unsafe.Pointer, src DevicePtr, n uint64, s uintptr) error {
	return d.check("cuMemcpyDtoHAsync_v2", C.c_cuMemcpyDtoHAsync_v2(d.f.cuMemcpyDtoHAsync_v2, dst, C.CUdeviceptr(src), C.size_t(n), stream(s)))
}

func (d *cgoDriver) memcpyDtoD(dst, src DevicePtr, n uint64, s uintptr) error {
	return d.check("cuMemcpyDtoDAsync_v2", C.c_cuMemcpyDtoDAsync_v2(d.f.cuMemcpyDtoDAsync_v2, C.CUdeviceptr(dst), C.CUdeviceptr(src), C.size_t(n), stream(s)))
}

func (d *cgoDriver) memsetD8(p DevicePtr, v uint8, n uint64, s uintptr) error {
	return d.check("cuMemsetD8Async", C.c_cuMemsetD8Async(d.f.cuMemsetD8Async, C.CUdeviceptr(p), C.uchar(v), C.size_t(n), stream(s)))
}

func (d *cgoDriver) memsetD32(p DevicePtr, v uint32, n uint64, s uintptr) error {
	return d.check("cuMemsetD32Async", C.c_cuMemsetD32Async(d.f.cuMemsetD32Async, C.CUdeviceptr(p), C.uint(v), C.size_t(n), stream(s)))
}

func (d *cgoDriver) streamCreate(flags uint32) (uintptr, error) {
	var s C.CUstream
	return uintptr(s), d.check("cuStreamCreate", C.c_cuStreamCreate(d.f.cuStreamCreate, &s, C.uint(flags)))
}

func (d *cgoDriver) streamDestroy(s uintptr) error {
	return d.check("cuStreamDestroy_v2", C.c_cuStreamDestroy_v2(d.f.cuStreamDestroy_v2, stream(s)))
}

func (d *cgoDriver) streamSynchronize(s uintptr) error {
	return d.check("cuStreamSynchronize", C.c_cuStreamSynchronize(d.f.cuStreamSynchronize, stream(s)))
}

func (d *cgoDriver) streamWaitEvent(s, e uintptr) error {
	return d.check("cuStreamWaitEvent", C.c_cuStreamWaitEvent(d.f.cuStreamWaitEvent, stream(s), C.CUevent(e)))
}

func (d *cgoDriver) eventCreate(flags uint32) (uintptr, error) {
	var e C.CUevent
	return uintptr(e), d.check("cuEventCreate", C.c_cuEventCreate(d.f.cuEventCreate, &e, C.uint(flags)))
}

func (d *cgoDriver) eventDestroy(e uintptr) error {
	return d.check("cuEventDestroy_v2", C.c_cuEventDestroy_v2(d.f.cuEventDestroy_v2, C.CUevent(e)))
}

func (d *cgoDriver) eventRecord(e, s uintptr) error {
	return d.check("cuEventRecord", C.c_cuEventRecord(d.f.cuEventRecord, C.CUevent(e), stream(s)))
}

func (d *cgoDriver) eventSynchronize(e uintptr) error {
	return d.check("cuEventSynchronize", C.c_cuEventSynchronize(d.f.cuEventSynchronize, C.CUevent(e)))
}

func (d *cgoDriver) eventElapsedTime(start, end uintptr) (float32, error) {
	var ms C.float
	err := d.check("cuEventElapsedTime", C.c_cuEventElapsedTime(d.f.cuEventElapsedTime, &ms,
		C.CUevent(start), C.CUevent(end)))
	return float32(ms), err
}

func (d *cgoDriver) streamBeginCapture(s uintptr, mode int) error {
	if d.f.cuStreamBeginCapture_v2 == nil {
		return missing("cuStreamBeginCapture_v2")
	}
	return d.check("cuStreamBeginCapture_v2", C.c_cuStreamBeginCapture_v2(d.f.cuStreamBeginCapture_v2, stream(s), C.int(mode)))
}

func (d *cgoDriver) streamEndCapture(s uintptr) (uintptr, error) {
	if d.f.cuStreamEndCapture == nil {
		return 0, missing("cuStreamEndCapture")
	}
	var g C.CUgraph
	return uintptr(g), d.check("cuStreamEndCapture", C.c_cuStreamEndCapture(d.f.cuStreamEndCapture, stream(s), &g))
}

func (d *cgoDriver) graphInstantiate(g uintptr) (uintptr, error) {
	if d.f.cuGraphInstantiateWithFlags == nil {
		return 0, missing("cuGraphInstantiateWithFlags")
	}
	var x C.CUgraphExec
	return uintptr(x), d.check("cuGraphInstantiateWithFlags",
		C.c_cuGraphInstantiateWithFlags(d.f.cuGraphInstantiateWithFlags, &x, C.CUgraph(g)))
}

func (d *cgoDriver) graphLaunch(exec, s uintptr) error {
	if d.f.cuGraphLaunch == nil {
		return missing("cuGraphLaunch")
	}
	return d.check("cuGraphLaunch", C.c_cuGraphLaunch(d.f.cuGraphLaunch, C.CUgraphExec(exec), stream(s)))
}

func (d *cgoDriver) graphExecDestroy(exec uintptr) error {
	if d.f.cuGraphExecDestroy == nil {
		return missing("cuGraphExecDestroy")
	}
	return d.check("cuGraphExecDestroy", C.c_cuGraphExecDestroy(d.f.cuGraphExecDestroy, C.CUgraphExec(exec)))
}

func (d *cgoDriver) graphDestroy(g uintptr) error {
	if d.f.cuGraphDestroy == nil {
		return missing("cuGraphDestroy")
	}
	return d.check("cuGraphDestroy", C.c_cuGraphDestroy(d.f.cuGraphDestroy, C.CUgraph(g)))
}

func (d *cgoDriver) hostAlloc(n uint64) (unsafe.Pointer, error) {
	if d.f.cuMemHostAlloc == nil {
		return nil, missing("cuMemHostAlloc")
	}
	var p unsafe.Pointer
	return p, d.check("cuMemHostAlloc", C.c_cuMemHostAlloc(d.f.cuMemHostAlloc, &p, C.size_t(n)))
}

func (d *cgoDriver) hostFree(p unsafe.Pointer) error {
	if d.f.cuMemFreeHost == nil {
		return missing("cuMemFreeHost")
	}
	return d.check("cuMemFreeHost", C.c_cuMemFreeHost(d.f.cuMemFreeHost, p))
}

func (d *cgoDriver) moduleLoad(image []byte) (uintptr, string, string, error) {
	const logSize = 16 << 10
	img := C.CBytes(image) // a C copy, so no Go memory is held across the JIT
	defer C.free(img)
	info := (*C.char)(C.calloc(logSize, 1))
	errLog := (*C.char)(C.calloc(logSize, 1))
	defer C.free(unsafe.Pointer(info))
	defer C.free(unsafe.Pointer(errLog))
	var m C.CUmodule
	err := d.check("cuModuleLoadDataEx", C.c_cuModuleLoadDataEx(d.f.cuModuleLoadDataEx, &m, img, info, errLog, logSize))
	return uintptr(m), C.GoString(info), C.GoString(errLog), err
}

func (d *cgoDriver) moduleUnload(m uintptr) error {
	return d.check("cuModuleUnload", C.c_cuModuleUnload(d.f.cuModuleUnload, C.CUmodule(m)))
}

func (d *cgoDriver) moduleGetFunction(m uintptr, name string) (uintptr, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var f C.CUfunction
	return uintptr(f), d.check("cuModuleGetFunction",
		C.c_cuModuleGetFunction(d.f.cuModuleGetFunction, &f, C.CUmodule(m), cname))
}

func (d *cgoDriver) funcGetAttribute(attr int, f uintptr) (int, error) {
	var v C.int
	return int(v), d.check("cuFuncGetAttribute", C.c_cuFuncGetAttribute(d.f.cuFuncGetAttribute, &v, C.int(attr), C.CUfunction(f)))
}

func (d *cgoDriver) funcSetAttribute(f uintptr, attr, value int) error {
	return d.check("cuFuncSetAttribute", C.c_cuFuncSetAttribute(d.f.cuFuncSetAttribute, C.CUfunction(f), C.int(attr), C.int(value)))
}

func (d *cgoDriver) launchKernel(f uintptr, grid, block Dim3, shmem uint32, s uintptr, packed []byte, offs []int32, pdl bool) error {
	var pp *C.uchar
	if len(packed) > 0 {
		pp = (*C.uchar)(unsafe.Pointer(&packed[0]))
	}
	var op *C.int
	if len(offs) > 0 {
		op = (*C.int)(unsafe.Pointer(&offs[0]))
	}
	if pdl {
		if d.f.cuLaunchKernelEx == nil {
			return missing("cuLaunchKernelEx")
		}
		return d.check("cuLaunchKernelEx", C.c_cuLaunchKernelPDL(d.f.cuLaunchKernelEx, C.CUfunction(f),
			C.uint(grid.X), C.uint(grid.Y), C.uint(grid.Z), C.uint(block.X), C.uint(block.Y), C.uint(block.Z),
			C.uint(shmem), stream(s), pp, C.size_t(len(packed)), op, C.int(len(offs))))
	}
	return d.check("cuLaunchKernel", C.c_cuLaunchKernel(d.f.cuLaunchKernel, C.CUfunction(f),
		C.uint(grid.X), C.uint(grid.Y), C.uint(grid.Z), C.uint(block.X), C.uint(block.Y), C.uint(block.Z),
		C.uint(shmem), stream(s), pp, C.size_t(len(packed)), op, C.int(len(offs))))
}

func (d *cgoDriver) hasLaunchEx() bool { return d.f.cuLaunchKernelEx != nil }

func (d *cgoDriver) threadID() int { return osThreadID() }
