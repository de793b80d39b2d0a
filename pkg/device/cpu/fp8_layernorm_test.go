package cpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/tensor"
)

// lnFP8Rows returns rows (N,C) spread over 2^-4 .. 2^4 times N(0,1) and
// weights over 2^-9 .. 2^5, so that y·scale both saturates and flushes to
// zero in either format; biases N(0, 0.01).
func lnFP8Rows(seed uint64, N, C int) (x, w, b []float32) {
	r := ntRNG(seed)
	x, w, b = make([]float32, N*C), make([]float32, C), make([]float32, C)
	for i := range x {
		x[i] = float32(r.NormFloat64() * math.Ldexp(1, r.IntN(9)-4))
	}
	for c := range w {
		w[c] = float32(r.NormFloat64() * math.Ldexp(1, r.IntN(15)-9))
		b[c] = float32(r.NormFloat64() * 0.01)
	}
	return x, w, b
}

// runLNFP8 runs LayerNormFP8, or ResidualLayerNormFP8 of (a, b = a/3) with
// residual, and returns its outputs and the rows it normalised.
func runLNFP8(a, w, bias []float32, scale float32, f tensor.FP8Format, N, C int, residual bool) (q, qt []uint8, mean, rstd, rows []float32, amax float32) {
	q, qt = make([]uint8, N*C), make([]uint8, N*C)
	mean, rstd = make([]float32, N), make([]float32, N)
	if !residual {
		amax, _ = LayerNormFP8(q, qt, mean, rstd, a, w, bias, scale, f, N, C)
		return q, qt, mean, rstd, a, amax
	}
	b, res := make([]float32, N*C), make([]float32, N*C)
	for i := range b {
		b[i] = a[i] / 3
	}
	amax, _ = ResidualLayerNormFP8(res, q, qt, mean, rstd, a, b, w, bias, scale, f, N, C)
	return q, qt, mean, rstd, res, amax
}

// TestLayerNormFP8: mean, rstd and (residual) res are the bits of the
// fused LayerNorm / ResidualLayerNorm with fp32 outputs; q is
// tensor.QuantizeFP8 of that fp32 output times the scale, qt its
// transpose, amax amp.Amax of the output; both formats, odd shapes and
// GPT-2's widths.
func TestLayerNormFP8(t *testing.T) {
	d := ntDev(true, 2)
	F := tensor.F32
	for _, f := range []tensor.FP8Format{tensor.E4M3, tensor.E5M2} {
		scale := float32(37.5)
		if f == tensor.E5M2 {
			scale = 1536
		}
		for _, sh := range [][2]int{{1, 1}, {3, 100}, {17, 33}, {65, 768}, {5, 1600}} {
			N, C := sh[0], sh[1]
			for _, residual := range []bool{false, true} {
				name := fmt.Sprintf("%s N %d C %d residual %v", f, N, C, residual)
				x, w, b := lnFP8Rows(uint64(N*C), N, C)
				q, qt, mean, rstd, rows, amax := runLNFP8(x, w, b, scale, f, N, C, residual)
				// the reference: LayerNorm (ResidualLayerNorm) with every output fp32
				tx, _ := tensor.FromF32(x, N, C)
				tw, _ := tensor.FromF32(w, C)
				tb, _ := tensor.FromF32(b, C)
				out, tm, ts := tensor.New(F, N, C), tensor.New(F, N), tensor.New(F, N)
				res := tensor.New(F, N, C)
				if residual {
					b3 := make([]float32, N*C)
					for i := range b3 {
						b3[i] = x[i] / 3
					}
					tb3, _ := tensor.FromF32(b3, N, C)
					d.ResidualLayerNorm(res, out, tm, ts, tx, tb3, tw, tb, N, C)
				} else {
					d.LayerNorm(out, tm, ts, tx, tw, tb, N, C)
				}
				ntSync(t, d)
				sameF32(t, name+" mean", mean, tm.F32())
				sameF32(t, name+" rstd", rstd, ts.F32())
				if residual {
					sameF32(t, name+" res", rows, res.F32())
				}
				y := out.F32()
				want := make([]uint8, N*C)
				counts := tensor.QuantizeFP8(want, y, scale, f)
				for r := range N {
					for c := range C {
						if q[r*C+c] != want[r*C+c] || qt[c*N+r] != want[r*C+c] {
							t.Fatalf("%s at (%d,%d): q %#x qt %#x, want %#x (y %g)", name, r, c, q[r*C+c], qt[c*N+r], want[r*C+c], y[r*C+c])
						}
					}
				}
				if ref := amp.Amax(y); amax != ref {
					t.Errorf("%s: amax %v, amp.Amax of LayerNorm's output %v", name, amax, ref)
				}
				t.Logf("%s: amax %.3g, %+v", name, amax, counts)
			}
		}
	}
}

// sameF32 fails unless got and want hold the same bits.
func sameF32(t *testing.T, name string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d]: %v (%#08x), want %v (%#08x)", name, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// TestLayerNormFP8Specials: a NaN or an Inf in a row makes that row's
// statistics and every q of it NaN (Inf - Inf in the variance) and amax
// NaN, other rows untouched; an infinite weight makes y ±Inf in its
// column, q ±max there (the conversion saturates) and amax +Inf; a large
// weight saturates q to ±max where |y·s| rounds past max, and
// NormCastTransposeFP8 with LayerNormFP8's own statistics is LayerNormFP8.
func TestLayerNormFP8Specials(t *testing.T) {
	const N, C = 4, 64
	f := tensor.E4M3
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, bad := range []float32{nan, inf, -inf} {
		x, w, b := lnFP8Rows(7, N, C)
		x[1*C+5] = bad
		q, _, mean, rstd, _, amax := runLNFP8(x, w, b, 37.5, f, N, C, false)
		if amax == amax || mean[1] == mean[1] && rstd[1] == rstd[1] {
			t.Errorf("x %v in row 1: amax %v, mean %v, rstd %v; want NaN amax and NaN statistics", bad, amax, mean[1], rstd[1])
		}
		for c := range C {
			if !IsNaNFP8(q[1*C+c], f) || IsNaNFP8(q[2*C+c], f) {
				t.Fatalf("x %v in row 1: q[1,%d] %#x, q[2,%d] %#x; want row 1 NaN, row 2 not", bad, c, q[1*C+c], c, q[2*C+c])
			}
		}
	}

	x, w, b := lnFP8Rows(8, N, C)
	w[3], w[9] = inf, -inf
	q, qt, mean, rstd, _, amax := runLNFP8(x, w, b, 37.5, f, N, C, false)
	if !math.IsInf(float64(amax), 1) {
		t.Errorf("infinite weights: amax %v, want +Inf", amax)
	}
	for r := range N {
		for _, c := range []int{3, 9} {
			n := rstd[r] * (x[r*C+c] - mean[r])
			want := uint8(0x7e) // +448
			if (n > 0) != (w[c] > 0) {
				want = 0xfe
			}
			if q[r*C+c] != want || qt[c*N+r] != want {
				t.Errorf("weight %v, row %d: q %#x, qt %#x, want %#x (±max)", w[c], r, q[r*C+c], qt[c*N+r], want)
			}
		}
	}

	x, w, b = lnFP8Rows(9, N, C)
	w[0] = 1e3
	y := make([]float32, N*C)
	q, _, mean, rstd, _, _ = runLNFP8(x, w, b, 1, f, N, C, false)
	q2, qt2 := make([]uint8, N*C), make([]uint8, N*C)
	NormCastTransposeFP8(q2, qt2, x, mean, rstd, w, b, 1, f, N, C)
	saturated := 0
	for r := range N {
		lnNorm(y[r*C:(r+1)*C], x[r*C:(r+1)*C], w, b, mean[r], rstd[r])
		if v := y[r*C]; math.Abs(float64(v)) > 464 {
			saturated++
			if want := map[bool]uint8{false: 0x7e, true: 0xfe}[v < 0]; q[r*C] != want {
				t.Errorf("row %d: y %v, q %#x, want %#x (±max)", r, v, q[r*C], want)
			}
		}
		for c := range C {
			if q2[r*C+c] != q[r*C+c] || qt2[c*N+r] != q[r*C+c] {
				t.Fatalf("NormCastTransposeFP8 with LayerNormFP8's statistics at (%d,%d): %#x/%#x, want %#x", r, c, q2[r*C+c], qt2[c*N+r], q[r*C+c])
			}
		}
	}
	if saturated == 0 {
		t.Error("weight 1e3: no |y| past 464, the saturation case did not run")
	}
}
