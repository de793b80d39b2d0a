package cpu

import (
	"math"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/tensor"
)

// fp8Case quantizes a (N,C) and b (OC,C) to E4M3 with current scaling
// (each scale from its tensor's amax; scale 1 when unscaled) and runs
// MatmulFP8. It returns the output, the dequantized operands and the
// scales, and what the casts lost.
func fp8Case(t *testing.T, a, b []float32, N, C, OC int, scaled bool) (out, da, db []float32, sa, sb float32, lost tensor.FP8Counts) {
	t.Helper()
	sa, sb = 1, 1
	if scaled {
		sa, _ = amp.FP8ScaleFor(tensor.E4M3, amp.Amax(a), 0, 1)
		sb, _ = amp.FP8ScaleFor(tensor.E4M3, amp.Amax(b), 0, 1)
	}
	qa, qb := make([]uint8, len(a)), make([]uint8, len(b))
	ca := tensor.QuantizeFP8(qa, a, sa, tensor.E4M3)
	cb := tensor.QuantizeFP8(qb, b, sb, tensor.E4M3)
	lost = tensor.FP8Counts{Saturated: ca.Saturated + cb.Saturated, Flushed: ca.Flushed + cb.Flushed}
	out = make([]float32, N*OC)
	MatmulFP8(out, qa, qb, tensor.E4M3, tensor.E4M3, 1/sa, 1/sb, N, C, OC)
	da, db = make([]float32, len(a)), make([]float32, len(b))
	tensor.DequantizeFP8(da, qa, 1/sa, tensor.E4M3)
	tensor.DequantizeFP8(db, qb, 1/sb, tensor.E4M3)
	return out, da, db, sa, sb, lost
}

// fp8Bound is the error one E4M3 rounding of each operand explains, for
// out[n][o] against the exact Σ_c a·b:
//
//	a' = fp8(a·sa)/sa differs from a by e_a <= max(u·|a|, η/sa) + 2^-24·|a|
//
// with u = 2^-4 (half an ulp of a 3-bit mantissa, relative), η = 2^-10
// (half the smallest subnormal, 2^-9, absolute: below 2^-6 the spacing is
// fixed), and 2^-24 for a·sa's own float32 rounding. Then
//
//	|a'b' - ab| <= e_a·|b| + |a|·e_b + e_a·e_b
//
// summed over c, plus fp32 accumulation, γ_C·Σ|a'b'| with γ_C = C·2^-24
// (1 - C·2^-24)⁻¹ (Higham's bound for recursive summation; the products
// are exact), plus the two roundings of the final scaling, 2·2^-24·|out|.
func fp8Bound(a, b []float32, sa, sb float32, n, o, C int, out float32) float64 {
	const u, eta, e32 = 1.0 / 16, 1.0 / 1024, 1.0 / (1 << 24)
	gamma := float64(C) * e32 / (1 - float64(C)*e32)
	var sum, abs float64
	for c := range C {
		x, y := math.Abs(float64(a[n*C+c])), math.Abs(float64(b[o*C+c]))
		ex := max(u*x, eta/float64(sa)) + e32*x
		ey := max(u*y, eta/float64(sb)) + e32*y
		sum += ex*y + x*ey + ex*ey
		abs += (x + ex) * (y + ey)
	}
	return sum + gamma*abs + 2*e32*math.Abs(float64(out))
}

func fp8Normal(seed uint64, n int, scale float64) []float32 {
	r := ntRNG(seed)
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * scale)
	}
	return v
}

// TestMatmulFP8: on random data the emulated FP8 GEMM is (1) the fp32 sum
// of the dequantized operands' products, within fp32 accumulation, and (2)
// within fp8Bound of the fp32 (here float64) matmul of the originals.
func TestMatmulFP8(t *testing.T) {
	const N, C, OC = 17, 300, 23
	a := fp8Normal(1, N*C, 1)     // activations
	b := fp8Normal(2, OC*C, 0.02) // weights
	out, da, db, sa, sb, lost := fp8Case(t, a, b, N, C, OC, true)
	if lost.Saturated != 0 {
		t.Errorf("current scaling saturated %d values", lost.Saturated)
	}
	worst := 0.0
	for n := range N {
		for o := range OC {
			var exact, deq, absDeq float64
			for c := range C {
				exact += float64(a[n*C+c]) * float64(b[o*C+c])
				p := float64(da[n*C+c]) * float64(db[o*C+c])
				deq += p
				absDeq += math.Abs(p)
			}
			got := float64(out[n*OC+o])
			if d := math.Abs(got - deq); d > float64(C)*absDeq/(1<<24)*1.01+4*math.Abs(deq)/(1<<24) {
				t.Fatalf("out[%d][%d] = %g, the dequantized operands' sum is %g: more than fp32 accumulation apart", n, o, got, deq)
			}
			bound := fp8Bound(a, b, sa, sb, n, o, C, out[n*OC+o])
			if d := math.Abs(got - exact); d > bound {
				t.Errorf("out[%d][%d] = %g, fp32 matmul %g: error %g past the one-rounding bound %g", n, o, got, exact, d, bound)
			}
			worst = max(worst, math.Abs(got-exact)/bound)
		}
	}
	t.Logf("worst error is %.2f of the one-rounding bound", worst)
}

// TestMatmulFP8Scales: values of magnitude 1e-4 lie below half the smallest
// E4M3 subnormal (2^-10): cast unscaled they all flush to zero and the
// product is 0; with their amax scales they keep E4M3's precision.
func TestMatmulFP8Scales(t *testing.T) {
	const N, C, OC = 8, 64, 8
	a, b := fp8Normal(3, N*C, 1e-4), fp8Normal(4, OC*C, 1e-4)
	out, _, _, _, _, lost := fp8Case(t, a, b, N, C, OC, false)
	if lost.Flushed != N*C+OC*C {
		t.Errorf("unscaled: %d of %d values flushed, want all", lost.Flushed, N*C+OC*C)
	}
	for i, v := range out {
		if v != 0 {
			t.Fatalf("unscaled: out[%d] = %g, want 0", i, v)
		}
	}
	out, _, _, sa, sb, lost := fp8Case(t, a, b, N, C, OC, true)
	if lost != (tensor.FP8Counts{}) {
		t.Errorf("scaled: lost %+v", lost)
	}
	var num, den float64
	for n := range N {
		for o := range OC {
			var exact float64
			for c := range C {
				exact += float64(a[n*C+c]) * float64(b[o*C+c])
			}
			got := float64(out[n*OC+o])
			if d, bound := math.Abs(got-exact), fp8Bound(a, b, sa, sb, n, o, C, out[n*OC+o]); d > bound {
				t.Errorf("scaled: out[%d][%d] = %g, want %g within %g", n, o, got, exact, bound)
			}
			num += (got - exact) * (got - exact)
			den += exact * exact
		}
	}
	if rel := math.Sqrt(num / den); rel > 0.05 {
		t.Errorf("scaled: relative error %.3f of the whole output, want E4M3's few percent", rel)
	}
}
