package devicetest

import (
	"math"

	"github.com/druto/druto/pkg/tensor"
)

// FP8Amaxes returns steps×K amaxes for the tests of the FP8 scale update
// (amp.UpdateFP8Scales and kernels/fp8scale.cu): magnitudes over
// 2^-30..2^20, tiny ones over 2^-140..2^-120 (their scale passes the
// largest float and is clamped), zeros, negative zero, NaN and ±Inf, so
// that every branch of the rule is taken.
func FP8Amaxes(seed uint64, steps, K int) []float32 {
	rng := tensor.NewRNG(seed)
	out := make([]float32, steps*K)
	for i := range out {
		switch u := rng.Float32(); {
		case u < 0.04:
			out[i] = float32(math.NaN())
		case u < 0.07:
			out[i] = float32(math.Inf(1))
		case u < 0.08:
			out[i] = float32(math.Inf(-1))
		case u < 0.12:
			out[i] = 0
		case u < 0.13:
			out[i] = float32(math.Copysign(0, -1))
		case u < 0.16:
			out[i] = float32(math.Ldexp(float64(1+rng.Float32()), -140+int(rng.Float32()*20)))
		default:
			out[i] = float32(math.Ldexp(float64(1+rng.Float32()), -30+int(rng.Float32()*50)))
		}
	}
	return out
}
