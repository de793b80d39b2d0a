// Package kernels embeds druto's CUDA C sources (one file per op) and their
// pre-built PTX, and builds them for the GPU at hand with NVRTC.
package kernels
