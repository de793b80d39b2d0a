package kernels

import (
	"fmt"

	"github.com/druto/druto/pkg/cuda"
)

// layernorm.go: the launchers of layernorm.cu.

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
	return k.Func.Launch(s, cuda.D1(grid), cuda.D1(32*lnWarps), 0, out, mean, rstd, inp, weight, bias, N, C)
}
