package cuda

import "unsafe"

// The primitive calls of each library, one method per C function (or per
// short fixed sequence of them). The cgo files implement them over dlsym'd
// function pointers; the build without cgo has no implementation, and its
// newXxxAPI constructors return ErrNoGPUSupport. Tests implement them with
// fakes to drive error paths without a GPU. Every method returns an Error
// naming the C function on failure.

// driverAPI is libcuda. All methods except version, errorName and threadID
// are called on a Context's bound thread or before any context exists.
type driverAPI interface {
	version() (int, error)
	initialize() error
	errorName(code int) string
	deviceCount() (int, error)
	deviceGet(ordinal int) (int32, error)
	deviceName(dev int32) (string, error)
	deviceAttr(attr int, dev int32) (int, error)
	deviceTotalMem(dev int32) (uint64, error)
	primaryCtxRetain(dev int32) (uintptr, error)
	primaryCtxRelease(dev int32) error
	ctxSetCurrent(ctx uintptr) error
	ctxSynchronize() error
	memAlloc(n uint64) (DevicePtr, error)
	memFree(p DevicePtr) error
	memGetInfo() (free, total uint64, err error)
	memcpyHtoD(dst DevicePtr, src unsafe.Pointer, n uint64, stream uintptr) error
	memcpyDtoH(dst unsafe.Pointer, src DevicePtr, n uint64, stream uintptr) error
	memcpyDtoD(dst, src DevicePtr, n uint64, stream uintptr) error
	memsetD8(p DevicePtr, v uint8, n uint64, stream uintptr) error
	memsetD32(p DevicePtr, v uint32, n uint64, stream uintptr) error
	streamCreate(flags uint32) (uintptr, error)
	streamDestroy(s uintptr) error
	streamSynchronize(s uintptr) error
	streamWaitEvent(s, e uintptr) error
	eventCreate(flags uint32) (uintptr, error)
	eventDestroy(e uintptr) error
	eventRecord(e, s uintptr) error
	eventSynchronize(e uintptr) error
	eventElapsedTime(start, end uintptr) (float32, error)
	streamBeginCapture(s uintptr, mode int) error
	streamEndCapture(s uintptr) (uintptr, error)
	graphInstantiate(g uintptr) (uintptr, error)
	graphLaunch(exec, s uintptr) error
	graphExecDestroy(exec uintptr) error
	graphDestroy(g uintptr) error
	// hostAlloc and hostFree are cuMemHostAlloc (page-locked host memory,
	// flags 0) and cuMemFreeHost.
	hostAlloc(n uint64) (unsafe.Pointer, error)
	hostFree(p unsafe.Pointer) error
	// moduleLoad loads a cubin, or NUL-terminated PTX that the driver JIT
	// compiles, returning the JIT's info and error logs.
	moduleLoad(image []byte) (mod uintptr, info, errLog string, err error)
	moduleUnload(m uintptr) error
	moduleGetFunction(m uintptr, name string) (uintptr, error)
	funcGetAttribute(attr int, f uintptr) (int, error)
	funcSetAttribute(f uintptr, attr, value int) error
	// launchKernel copies the packed argument bytes into C memory and
	// passes pointers to each argument (at offs) as kernelParams; with pdl,
	// through cuLaunchKernelEx with programmatic stream serialization
	// allowed (CUDA_ERROR_NOT_SUPPORTED where the driver lacks it).
	launchKernel(f uintptr, grid, block Dim3, shmem uint32, s uintptr, packed []byte, offs []int32, pdl bool) error
	// hasLaunchEx reports whether the driver has cuLaunchKernelEx.
	hasLaunchEx() bool
	// threadID returns the calling OS thread's id.
	threadID() int
}

// nvrtcAPI is libnvrtc; it needs no context and is safe from any goroutine.
type nvrtcAPI interface {
	version() (major, minor int, err error)
	supportedArchs() ([]int, error)
	// compile runs create, compile, log, and get CUBIN (cubin true) or PTX,
	// and destroy. The log is returned on failure too.
	compile(src, name string, opts []string, cubin bool) (code []byte, log string, err error)
}

// blasAPI is libcublas; every call runs on the owning Context's thread.
type blasAPI interface {
	create() (uintptr, error)
	destroy(h uintptr) error
	setStream(h, s uintptr) error
	setMathMode(h uintptr, mode int) error
	setWorkspace(h uintptr, p DevicePtr, n uint64) error
	property(kind int) (int, error)
	gemmEx(h uintptr, g *Gemm) error
	gemmStridedBatchedEx(h uintptr, g *Gemm) error
}

// ltAPI is libcublasLt; every call runs on the owning Context's thread.
type ltAPI interface {
	create() (uintptr, error)
	destroy(h uintptr) error
	version() uint64
	matmulDescCreate(compute, scale int) (uintptr, error)
	matmulDescSetAttribute(d uintptr, attr int, buf unsafe.Pointer, n uintptr) error
	matmulDescDestroy(d uintptr) error
	matrixLayoutCreate(dtype int, rows, cols uint64, ld int64) (uintptr, error)
	matrixLayoutSetAttribute(l uintptr, attr int, buf unsafe.Pointer, n uintptr) error
	matrixLayoutDestroy(l uintptr) error
	preferenceCreate() (uintptr, error)
	preferenceSetAttribute(p uintptr, attr int, buf unsafe.Pointer, n uintptr) error
	preferenceDestroy(p uintptr) error
	// algoGetHeuristic fills out with up to len(out) results, best
	// first, and returns how many it wrote.
	algoGetHeuristic(h, desc, a, b, c, d, pref uintptr, out []ltHeuristic) (int, error)
	// algoConfig reads one attribute (cublasLtMatmulAlgoConfigAttributes_t)
	// of an algorithm as a uint32; ok is false where the library lacks the
	// call or the attribute.
	algoConfig(algo *[8]uint64, attr int) (v uint32, ok bool)
	// algoConfigSet sets one uint32 attribute of an algorithm; algoCheck
	// validates an algorithm for a matmul and fills out's workspace. Both
	// fail with ErrSymbol where the library lacks them.
	algoConfigSet(algo *[8]uint64, attr int, v uint32) error
	algoCheck(h, desc, a, b, c, d uintptr, algo *[8]uint64, out *ltHeuristic) error
	matmul(h, desc uintptr, alpha unsafe.Pointer, a DevicePtr, ad uintptr, b DevicePtr, bd uintptr,
		beta unsafe.Pointer, c DevicePtr, cd uintptr, d DevicePtr, dd uintptr,
		algo *[8]uint64, ws DevicePtr, wsSize uint64, stream uintptr) error
}

// ltHeuristic mirrors cublasLtMatmulHeuristicResult_t, 96 bytes in CUDA
// 11.x-13.x (an array of them is filled, so the size must match exactly).
type ltHeuristic struct {
	algo      [8]uint64 // cublasLtMatmulAlgo_t
	workspace uint64    // size_t workspaceSize
	state     int32     // cublasStatus_t
	waves     float32
	reserved  [4]int32
}

// nvmlAPI is libnvidia-ml.
type nvmlAPI interface {
	initialize() error
	shutdown() error
	driverVersion() (string, error)
	cudaDriverVersion() (int, error)
	deviceCount() (int, error)
	deviceHandle(i int) (uintptr, error)
	deviceName(h uintptr) (string, error)
	deviceMemory(h uintptr) (total, free, used uint64, err error)
	deviceUtilization(h uintptr) (gpu, memory uint32, err error) // percent of the last sample period
}
