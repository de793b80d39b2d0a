// Package gpu implements device.Device with the CUDA kernels of package
// kernels and cuBLAS, through package cuda.
package gpu
