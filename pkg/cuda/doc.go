// Package cuda loads the CUDA driver, NVRTC, cuBLAS(Lt) and NVML at run time
// with dlopen; no CUDA headers or toolkit are needed to build.
package cuda
