package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/tensor"
)

// TestCastTransposeFP8: q is tensor.QuantizeFP8 of x·scale, qt its
// transpose, amax is amp.Amax (the same NaN-ness, the same value when
// finite), on odd shapes with ±0, ±Inf, NaN, subnormals and values past
// max.
func TestCastTransposeFP8(t *testing.T) {
	rng := rand.New(rand.NewPCG(38, 1))
	specials := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), 1e-40, -3e-6, 6e4, -1e5}
	for _, f := range []tensor.FP8Format{tensor.E4M3, tensor.E5M2} {
		for _, sh := range [][2]int{{1, 1}, {1, 17}, {17, 1}, {33, 100}, {64, 64}} {
			N, C := sh[0], sh[1]
			for _, withNaN := range []bool{false, true} {
				x := make([]float32, N*C)
				for i := range x {
					x[i] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(9)-4))
				}
				for _, v := range specials {
					x[rng.IntN(len(x))] = v
				}
				if withNaN {
					x[rng.IntN(len(x))] = float32(math.NaN())
				}
				scale := float32(37.5)
				q, qt := make([]uint8, N*C), make([]uint8, N*C)
				amax := CastTransposeFP8(q, qt, x, scale, f, N, C)
				want := make([]uint8, N*C)
				tensor.QuantizeFP8(want, x, scale, f)
				for r := range N {
					for c := range C {
						if q[r*C+c] != want[r*C+c] || qt[c*N+r] != want[r*C+c] {
							t.Fatalf("%s (%d,%d) at (%d,%d): q %#x qt %#x, want %#x", f, N, C, r, c, q[r*C+c], qt[c*N+r], want[r*C+c])
						}
					}
				}
				ref := amp.Amax(x)
				if (amax != amax) != (ref != ref) || ref == ref && amax != ref {
					t.Errorf("%s (%d,%d) NaN %v: amax %v, amp.Amax %v", f, N, C, withNaN, amax, ref)
				}
			}
		}
	}
	if !SameFP8(0x7f, 0xfe, tensor.E5M2) || SameFP8(0x7c, 0x7d, tensor.E5M2) || !SameFP8(0xff, 0x7f, tensor.E4M3) || SameFP8(0x7e, 0x7f, tensor.E4M3) {
		t.Error("SameFP8: NaNs must match any NaN of the format, and nothing else")
	}
}
