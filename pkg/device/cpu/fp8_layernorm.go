package cpu

// fp8_layernorm.go: the CPU reference of kernels/fp8.cu's FP8 producers,
// layernorm_fp8_e4m3 and residual_layernorm_fp8_e4m3 (issue 38), the twin
// of pkg/device/gpu's LayerNormFP8 and ResidualLayerNormFP8: the layernorm
// of LayerNorm's fused form, its output cast as CastTransposeFP8 casts.

import (
	"github.com/druto/druto/pkg/tensor"
)

// LayerNormFP8 normalises each row of x (N,C) as LayerNorm does (mean and
// rstd from float64 sums, stored in fp32; y = rstd·(x-mean)·weight + bias
// in fp32, rounded per operation) and, instead of storing y, writes
// q (N,C) = fp8(y·scale) in format f and qt (C,N) its transpose, and
// returns amax = max |y| (before scaling) and its underflows, as
// CastTransposeFP8 of y.
//
//	q (N,C), qt (C,N), mean (N), rstd (N), x (N,C), weight (C), bias (C)
//
// weight and bias hold the T parameters widened to float32 (exact).
func LayerNormFP8(q, qt []uint8, mean, rstd, x, weight, bias []float32, scale float32, f tensor.FP8Format, N, C int) (amax float32, under int) {
	for r := range N {
		mean[r], rstd[r] = lnStats(x[r*C : (r+1)*C])
	}
	return NormCastTransposeFP8(q, qt, x, mean, rstd, weight, bias, scale, f, N, C)
}

// ResidualLayerNormFP8 is LayerNormFP8 of res = a + b, rounded to float32
// and stored, as ResidualLayerNorm with an fp32 res (the residual stream).
//
//	res (N,C), q (N,C), qt (C,N), mean (N), rstd (N), a (N,C), b (N,C), weight (C), bias (C)
func ResidualLayerNormFP8(res []float32, q, qt []uint8, mean, rstd, a, b, weight, bias []float32, scale float32, f tensor.FP8Format, N, C int) (amax float32, under int) {
	res, a, b = res[:N*C], a[:N*C], b[:N*C]
	for i := range res {
		res[i] = a[i] + b[i]
	}
	return LayerNormFP8(q, qt, mean, rstd, res, weight, bias, scale, f, N, C)
}

// NormCastTransposeFP8 is LayerNormFP8 with the statistics given: y from
// x, mean and rstd (N) as LayerNorm's fused form computes it from its own,
// then q, qt and amax as CastTransposeFP8 of y. Given a GPU's mean and rstd
// it is the GPU kernel's q, qt and amax bit for bit (NaN codes aside, see
// SameFP8): the kernel computes y with the same operations in the same
// order, and only its sums for the statistics run in another order.
func NormCastTransposeFP8(q, qt []uint8, x, mean, rstd, weight, bias []float32, scale float32, f tensor.FP8Format, N, C int) (amax float32, under int) {
	y := make([]float32, N*C)
	for r := range N {
		lnNorm(y[r*C:(r+1)*C], x[r*C:(r+1)*C], weight, bias, mean[r], rstd[r])
	}
	return CastTransposeFP8(q, qt, y, scale, f, N, C)
}
