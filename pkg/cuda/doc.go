// Package cuda loads the CUDA driver, NVRTC, cuBLAS, cuBLASLt and NVML at
// run time with dlopen; no CUDA headers or toolkit are needed to build, and
// one binary runs on drivers for CUDA 11.8 through 13.x. It is druto's only
// cgo package for CUDA, and it builds without cgo too: then every loader
// returns ErrNoGPUSupport ("no GPU support in this build").
//
// # Libraries and search order
//
// Each library is looked for under its sonames, newest first:
//
//	driver    libcuda.so.1
//	NVRTC     libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so.11.2
//	cuBLAS    libcublas.so.13, libcublas.so.12, libcublas.so.11
//	cuBLASLt  libcublasLt.so.13, libcublasLt.so.12, libcublasLt.so.11
//	NVML      libnvidia-ml.so.1
//
// in these places, in this order, the first that loads winning:
//
//  1. the directory named by DRUTO_CUDA_LIB_DIR, when set;
//  2. the bare soname, so the system loader searches LD_LIBRARY_PATH, the
//     ld.so cache and its default directories;
//  3. /usr/local/cuda/targets/x86_64-linux/lib, /usr/local/cuda/lib64,
//     /usr/local/nvidia/lib64 and /usr/lib/x86_64-linux-gnu (on arm64:
//     targets/sbsa-linux/lib and /usr/lib/aarch64-linux-gnu instead of the
//     x86_64 ones).
//
// A file that exists but fails to load (wrong architecture, a missing
// dependency) is reported with the loader's message, never skipped in
// silence. Setting DRUTO_NO_NVRTC=1 hides NVRTC, so that druto falls back to
// the driver's JIT compilation of the embedded PTX. Probe reports, for every
// library, where it was found, its version, and what was tried.
//
// # Threads
//
// Every call that needs a CUDA context runs on the one OS thread that the
// Context owns; see Context for the rule. NVRTC needs no context and may be
// called from any goroutine.
//
// # Errors
//
// A failed call returns Error{Call, Code, Name}, e.g.
// Error{Call: "cuMemAlloc_v2", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY"}, the
// same type for every library (NVRTC and cuBLAS codes carry their own names).
// Loading fails with errors wrapping ErrNoDriver, ErrNoDevice,
// ErrDriverTooOld, ErrLibraryNotFound, ErrSymbol or ErrNoGPUSupport; an
// allocation that does not fit returns an *OutOfMemoryError naming the bytes
// asked and free, which matches ErrOutOfMemory under errors.Is.
//
// # Memory
//
// Pool is a caching allocator: blocks freed by the training step are kept and
// handed out again, so that after the first step no step calls cuMemAlloc.
// Arena carves many short-lived buffers out of one Pool block.
package cuda
