package cuda

import (
	"errors"
	"fmt"
)

// Error is a failed call into one of the CUDA libraries: the function called,
// the status code it returned and the code's name, e.g.
// Error{Call: "cuMemAlloc_v2", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY"}.
type Error struct {
	Call string // the C function, as exported by the library
	Code int    // its status code (CUresult, nvrtcResult, cublasStatus_t, nvmlReturn_t)
	Name string // the code's name, e.g. "CUDA_ERROR_INVALID_VALUE"
}

// Error formats the failure as "cuda: CALL: NAME (CODE)".
func (e Error) Error() string {
	return fmt.Sprintf("cuda: %s: %s (%d)", e.Call, e.Name, e.Code)
}

// Is reports whether the failure is the condition a sentinel stands for:
// CUDA_ERROR_OUT_OF_MEMORY is ErrOutOfMemory, CUDA_ERROR_NO_DEVICE is
// ErrNoDevice.
func (e Error) Is(target error) bool {
	switch target {
	case ErrOutOfMemory:
		return e.Name == "CUDA_ERROR_OUT_OF_MEMORY"
	case ErrNoDevice:
		return e.Name == "CUDA_ERROR_NO_DEVICE"
	}
	return false
}

// Sentinel errors; the errors returned wrap them with the details.
var (
	// ErrNoGPUSupport is returned by every loader of a build without cgo.
	ErrNoGPUSupport = errors.New("cuda: no GPU support in this build (built with CGO_ENABLED=0; rebuild with cgo for CUDA)")
	// ErrNoDriver means libcuda.so.1 was not found or did not load.
	ErrNoDriver = errors.New("cuda: no CUDA driver")
	// ErrNoDevice means the driver loaded but sees no usable device.
	ErrNoDevice = errors.New("cuda: no CUDA device")
	// ErrDriverTooOld means the driver is older than CUDA 11.8 (R520).
	ErrDriverTooOld = errors.New("cuda: driver too old")
	// ErrLibraryNotFound means no soname of a library loaded from any place searched.
	ErrLibraryNotFound = errors.New("cuda: library not found")
	// ErrSymbol means a library loaded but lacks a function druto needs.
	ErrSymbol = errors.New("cuda: symbol missing")
	// ErrOutOfMemory matches every out-of-memory failure under errors.Is.
	ErrOutOfMemory = errors.New("cuda: out of memory")
	// ErrClosed is returned by calls on a closed Context.
	ErrClosed = errors.New("cuda: context closed")
)

// MinDriverVersion is the oldest driver API version druto runs on, as
// cuDriverGetVersion reports it (1000·major + 10·minor): CUDA 11.8, the
// version whose PTX ISA (7.8) the embedded kernels are written in.
const MinDriverVersion = 11080

// OutOfMemoryError is an allocation that did not fit, even after the pool
// gave its cached blocks back to the driver.
type OutOfMemoryError struct {
	Asked  uint64 // bytes the caller asked for
	Free   uint64 // bytes the driver reported free at the failure
	Total  uint64 // bytes of device memory in all
	InUse  uint64 // bytes the pool had handed out and not taken back
	Cached uint64 // bytes the pool still held for reuse (0 after the retry)
	Err    error  // the driver's error, an Error naming cuMemAlloc_v2
}

// Error says how much was asked and how much was free.
func (e *OutOfMemoryError) Error() string {
	return fmt.Sprintf("cuda: out of memory: asked %d bytes (%s), %d bytes (%s) free of %s; this pool holds %s in use, %s cached",
		e.Asked, human(e.Asked), e.Free, human(e.Free), human(e.Total), human(e.InUse), human(e.Cached))
}

// Unwrap returns the driver's error.
func (e *OutOfMemoryError) Unwrap() error { return e.Err }

// Is matches ErrOutOfMemory.
func (e *OutOfMemoryError) Is(target error) bool { return target == ErrOutOfMemory }

// human formats a byte count with a binary unit, e.g. "1.5 GiB".
func human(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// driverErrorNames names the CUresult codes druto can meet, for use when the
// driver's own cuGetErrorName is unavailable (a fake library in tests, or
// the driver failed before it could be asked).
var driverErrorNames = map[int]string{
	0:   "CUDA_SUCCESS",
	1:   "CUDA_ERROR_INVALID_VALUE",
	2:   "CUDA_ERROR_OUT_OF_MEMORY",
	3:   "CUDA_ERROR_NOT_INITIALIZED",
	4:   "CUDA_ERROR_DEINITIALIZED",
	34:  "CUDA_ERROR_STUB_LIBRARY",
	35:  "CUDA_ERROR_INSUFFICIENT_DRIVER",
	46:  "CUDA_ERROR_DEVICE_UNAVAILABLE",
	100: "CUDA_ERROR_NO_DEVICE",
	101: "CUDA_ERROR_INVALID_DEVICE",
	102: "CUDA_ERROR_DEVICE_NOT_LICENSED",
	200: "CUDA_ERROR_INVALID_IMAGE",
	201: "CUDA_ERROR_INVALID_CONTEXT",
	209: "CUDA_ERROR_NO_BINARY_FOR_GPU",
	218: "CUDA_ERROR_INVALID_PTX",
	221: "CUDA_ERROR_JIT_COMPILER_NOT_FOUND",
	222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
	400: "CUDA_ERROR_INVALID_HANDLE",
	500: "CUDA_ERROR_NOT_FOUND",
	600: "CUDA_ERROR_NOT_READY",
	700: "CUDA_ERROR_ILLEGAL_ADDRESS",
	701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
	702: "CUDA_ERROR_LAUNCH_TIMEOUT",
	719: "CUDA_ERROR_LAUNCH_FAILED",
	900: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
	901: "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
	906: "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
	999: "CUDA_ERROR_UNKNOWN",
}

// nvrtcErrorNames names the nvrtcResult codes.
var nvrtcErrorNames = map[int]string{
	0:  "NVRTC_SUCCESS",
	1:  "NVRTC_ERROR_OUT_OF_MEMORY",
	2:  "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
	3:  "NVRTC_ERROR_INVALID_INPUT",
	4:  "NVRTC_ERROR_INVALID_PROGRAM",
	5:  "NVRTC_ERROR_INVALID_OPTION",
	6:  "NVRTC_ERROR_COMPILATION",
	7:  "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
	8:  "NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
	9:  "NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
	10: "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
	11: "NVRTC_ERROR_INTERNAL_ERROR",
}

// blasErrorNames names the cublasStatus_t codes (shared by cuBLASLt).
var blasErrorNames = map[int]string{
	0:  "CUBLAS_STATUS_SUCCESS",
	1:  "CUBLAS_STATUS_NOT_INITIALIZED",
	3:  "CUBLAS_STATUS_ALLOC_FAILED",
	7:  "CUBLAS_STATUS_INVALID_VALUE",
	8:  "CUBLAS_STATUS_ARCH_MISMATCH",
	11: "CUBLAS_STATUS_MAPPING_ERROR",
	13: "CUBLAS_STATUS_EXECUTION_FAILED",
	14: "CUBLAS_STATUS_INTERNAL_ERROR",
	15: "CUBLAS_STATUS_NOT_SUPPORTED",
	16: "CUBLAS_STATUS_LICENSE_ERROR",
}

// nvmlErrorNames names the nvmlReturn_t codes.
var nvmlErrorNames = map[int]string{
	0:   "NVML_SUCCESS",
	1:   "NVML_ERROR_UNINITIALIZED",
	2:   "NVML_ERROR_INVALID_ARGUMENT",
	3:   "NVML_ERROR_NOT_SUPPORTED",
	4:   "NVML_ERROR_NO_PERMISSION",
	6:   "NVML_ERROR_NOT_FOUND",
	7:   "NVML_ERROR_INSUFFICIENT_SIZE",
	9:   "NVML_ERROR_DRIVER_NOT_LOADED",
	12:  "NVML_ERROR_LIBRARY_NOT_FOUND",
	13:  "NVML_ERROR_FUNCTION_NOT_FOUND",
	15:  "NVML_ERROR_GPU_IS_LOST",
	18:  "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
	999: "NVML_ERROR_UNKNOWN",
}

// codeName looks a code up in a table, falling back to "PREFIX_<code>".
func codeName(table map[int]string, prefix string, code int) string {
	if n, ok := table[code]; ok {
		return n
	}
	return fmt.Sprintf("%s_%d", prefix, code)
}
