package kernels

import (
	"fmt"

	"github.com/druto/druto/pkg/cuda"
)

// layernorm.go: a stand-alone launcher of layernorm.cu's layernorm_forward
// for code that has no device (detect's self-test); pkg/device/gpu launches
// every layernorm kernel itself.

// lnWarps is the rows (warps) per block of layernorm_forward.
const lnWarps = 8

// LayerNormForward queues layernorm_forward on s: out = (inp-mean)·rstd·weight
// + bias per row, fp32 statistics, eps 1e-5. mean and rstd may be 0.
// out (N,C), mean (N) F32, rstd (N) F32, inp (N,C), weight (C), bias (C)
// in k's dtype except mean and rstd.
func LayerNormForward(k *Built, s *cuda.Stream, out, mean, rstd, inp, weight, bias cuda.DevicePtr, N, C int) error {
	if k == nil || k.Func == nil || k.Kernel != "layernorm_forward" {
		return fmt.Errorf("kernels: LayerNormForward needs a built layernorm_forward kernel")
	}
	if N < 0 || C <= 0 {
		return fmt.Errorf("kernels: layernorm_forward with N=%d C=%d", N, C)
	}
	if N == 0 {
		return nil
	}
	grid := (N + lnWarps - 1) / lnWarps
	return k.Func.Launch(s, cuda.D1(grid), cuda.D1(32*lnWarps), 0, out, mean, rstd, inp, weight, bias, N, C,
		VecFlag(C, k.DType.Size(), out, inp, weight, bias))
}

// VecFlag returns 1 when rows of C elements of size elem bytes at every
// pointer can be moved as 4-element vectors (ld4/st4 in common.cuh): C is a
// multiple of 4 and each pointer is aligned to 4 elements; else 0. Null
// pointers are ignored.
func VecFlag(C, elem int, ptrs ...cuda.DevicePtr) int {
	if C%4 != 0 {
		return 0
	}
	for _, p := range ptrs {
		if p != 0 && uint64(p)%uint64(4*elem) != 0 {
			return 0
		}
	}
	return 1
}
