package cpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// ntCrossEntropyRef is the float64 forward: losses[i] = log Σ_j exp(x_ij) - x_it.
func ntCrossEntropyRef(x []float64, targets []int32, N, V int) []float64 {
	loss := make([]float64, N)
	for i := range N {
		row := x[i*V : (i+1)*V]
		mx := math.Inf(-1)
		for _, v := range row {
			mx = math.Max(mx, v)
		}
		var s float64
		for _, v := range row {
			s += math.Exp(v - mx)
		}
		loss[i] = math.Log(s) + mx - row[targets[i]]
	}
	return loss
}

// TestExpNeg32 checks the softmax's float32 exp against math.Exp rounded
// to float32, in ulps of the result, over a dense sweep of (-88, 0] and the
// special values.
func TestExpNeg32(t *testing.T) {
	maxULP := 0.0
	const steps = 1 << 21
	for i := 0; i <= steps; i++ {
		x := float32(-88 * float64(i) / steps)
		got, want := expNeg32(x), float32(math.Exp(float64(x)))
		if want < 0x1p-126 { // subnormal or zero: flushing to 0 is allowed
			if got > 0x1p-126 || got < 0 {
				t.Fatalf("expNeg32(%v) = %v, want %v (subnormal)", x, got, want)
			}
			continue
		}
		ulp := float64(math.Nextafter32(want, 2) - want)
		e := math.Abs(float64(got)-float64(want)) / ulp
		if math.IsNaN(e) {
			t.Fatalf("expNeg32(%v) = %v, want %v", x, got, want)
		}
		maxULP = math.Max(maxULP, e)
	}
	if maxULP > 2 {
		t.Errorf("expNeg32: max error %.2f ulp, want <= 2", maxULP)
	}
	t.Logf("expNeg32: max error %.2f ulp over %d points", maxULP, steps+1)
	if expNeg32(0) != 1 || expNeg32(float32(math.Inf(-1))) != 0 || !math.IsNaN(float64(expNeg32(float32(math.NaN())))) {
		t.Errorf("expNeg32: e^0 = %v, e^-Inf = %v, e^NaN = %v", expNeg32(0), expNeg32(float32(math.Inf(-1))), expNeg32(float32(math.NaN())))
	}
}

// TestCrossEntropyGradFD checks the losses against the float64 loop and the
// overwritten logits against central differences of dscale·Σ losses (the
// op's own definition of its gradient, which fixes the linear loss to
// w = dscale on every row), for F32 logits.
func TestCrossEntropyGradFD(t *testing.T) {
	const dscale = 0.37
	for _, f := range ntForms {
		for _, sz := range [][2]int{{3, 7}, {2, 1}, {4, 40}} {
			N, V := sz[0], sz[1]
			t.Run(ntName(f.name, N, V), func(t *testing.T) {
				r := ntRNG(uint64(N*V + 1))
				d := ntDev(f.fused, 2)
				logits, x64 := ntTensor(t, tensor.F32, ntNormal(r, N*V, 3, 1), N, V)
				targets := ntTokens(t, r, N, V, N)
				losses := tensor.New(tensor.F32, N)
				ntPoison(losses)
				d.CrossEntropy(losses, logits, targets, N, V, dscale)
				ntSync(t, d)
				// log of a float64 sum of float32 exps: the F32 tolerance as is.
				ntClose(t, "losses", ntF64(losses), ntCrossEntropyRef(x64, targets.I32(), N, V), tensor.F32, 1)
				loss := func() float64 {
					var s float64
					for _, l := range ntCrossEntropyRef(x64, targets.I32(), N, V) {
						s += dscale * l
					}
					return s
				}
				// (p - onehot)·dscale: a few roundings of O(dscale) values.
				ntClose(t, "dlogits", ntF64(logits), ntFD(x64, loss), tensor.F32, 1)
			})
		}
	}
}

// TestCrossEntropyNoGrad checks that dscale = 0 leaves the logits alone.
func TestCrossEntropyNoGrad(t *testing.T) {
	const N, V = 5, 13
	for _, dt := range ntDTypes {
		for _, f := range ntForms {
			r := ntRNG(6)
			d := ntDev(f.fused, 2)
			logits, x64 := ntTensor(t, dt, ntNormal(r, N*V, 2, 0), N, V)
			keep := ntClone(logits)
			targets := ntTokens(t, r, N, V, N)
			losses := tensor.New(tensor.F32, N)
			ntPoison(losses)
			d.CrossEntropy(losses, logits, targets, N, V, 0)
			ntSync(t, d)
			if !ntSameBits(logits, keep) {
				t.Errorf("%s %s: dscale 0 modified the logits", dt, f.name)
			}
			ntClose(t, fmt.Sprint(dt, " ", f.name, " losses"), ntF64(losses), ntCrossEntropyRef(x64, targets.I32(), N, V), tensor.F32, 1)
		}
	}
}

// TestCrossEntropyParity compares the two forms on several shapes and dtypes:
// losses poisoned first, logits overwritten by the gradient.
func TestCrossEntropyParity(t *testing.T) {
	for _, dt := range ntDTypes {
		for _, N := range ntRowCounts {
			for _, V := range ntWidths {
				t.Run(ntName(dt, N, V), func(t *testing.T) {
					r := ntRNG(uint64(97*N + V))
					logits, _ := ntTensor(t, dt, ntNormal(r, N*V, 4, 0), N, V)
					targets := ntTokens(t, r, N, V, N)
					dscale := float32(1) / float32(N)
					var losses, grads [2]*tensor.Tensor
					for k, f := range ntForms {
						d := ntDev(f.fused, 2)
						losses[k], grads[k] = tensor.New(tensor.F32, N), ntClone(logits)
						ntPoison(losses[k])
						d.CrossEntropy(losses[k], grads[k], targets, N, V, dscale)
						ntSync(t, d)
					}
					// Losses are fp32 from the same fp32 inputs; the decomposed
					// NLL takes -log of a rounded probability, whose relative
					// error 2^-24 is an absolute error of the loss within atol.
					ntCloseT(t, "losses", losses[0], losses[1], tensor.F32, 1)
					// Gradients: the same exp and sum, one rounding of dt.
					ntCloseT(t, "dlogits", grads[0], grads[1], dt, 1)
				})
			}
		}
	}
}

// TestCrossEntropyFarTarget: a target logit 200 below the row's max (its
// probability underflows fp32 to 0) gives a finite loss of about 200 in both
// forms, equal to the float64 reference and to each other (issue 14: the
// decomposed form once took -log of the materialised probability, +inf).
func TestCrossEntropyFarTarget(t *testing.T) {
	const N, V = 3, 37
	for _, dt := range ntDTypes {
		r := ntRNG(11)
		vals := ntNormal(r, N*V, 1, 0)
		for i := range N {
			vals[i*V+5] = 100        // the row's max
			vals[i*V+(i+7)%V] = -100 // the target, 200 below it
		}
		logits, x64 := ntTensor(t, dt, vals, N, V)
		tg := make([]int32, N)
		for i := range tg {
			tg[i] = int32((i + 7) % V)
		}
		targets, err := tensor.FromI32(tg, N)
		if err != nil {
			t.Fatal(err)
		}
		want := ntCrossEntropyRef(x64, tg, N, V)
		var got [2][]float64
		for k, f := range ntForms {
			d := ntDev(f.fused, 2)
			losses, x := tensor.New(tensor.F32, N), ntClone(logits)
			ntPoison(losses)
			d.CrossEntropy(losses, x, targets, N, V, 1/float32(N))
			ntSync(t, d)
			got[k] = ntF64(losses)
			for i, l := range got[k] {
				if math.IsInf(l, 0) || math.IsNaN(l) || math.Abs(l-want[i]) > 1e-4*want[i] {
					t.Errorf("%s %s: row %d: loss %v, want %v (finite, about 200)", dt, f.name, i, l, want[i])
				}
			}
		}
		for i := range N {
			if math.Abs(got[0][i]-got[1][i]) > 1e-5*math.Abs(got[0][i]) {
				t.Errorf("%s: row %d: fused loss %v, decomposed %v", dt, i, got[0][i], got[1][i])
			}
		}
	}
}

// TestCrossEntropyBadTarget checks that targets outside [0,V) record an
// error returned by Sync, leave the outputs alone, and do not panic.
func TestCrossEntropyBadTarget(t *testing.T) {
	const N, V = 3, 4
	for _, f := range ntForms {
		d := ntDev(f.fused, 2)
		for _, bad := range []int32{V, -1, 1 << 30} {
			logits := tensor.New(tensor.F32, N, V)
			losses := tensor.New(tensor.F32, N)
			ntPoison(losses)
			keep, keepLoss := ntClone(logits), ntClone(losses)
			targets, _ := tensor.FromI32([]int32{0, bad, 1}, N)
			d.CrossEntropy(losses, logits, targets, N, V, 1)
			if err := d.Sync(); err == nil {
				t.Errorf("%s: target %d: Sync returned no error", f.name, bad)
			}
			if !ntSameBits(logits, keep) || !ntSameBits(losses, keepLoss) {
				t.Errorf("%s: target %d: outputs were modified", f.name, bad)
			}
		}
		if err := d.Sync(); err != nil {
			t.Errorf("%s: Sync did not clear the error: %v", f.name, err)
		}
	}
}

// BenchmarkCrossEntropyFused and BenchmarkCrossEntropyDecomposed time the
// forward + gradient (dscale = 1/N) over F32 logits of a byte-level and a
// GPT-2-sized vocabulary; the logits are restored outside the timer.
func BenchmarkCrossEntropyFused(b *testing.B)      { ntBenchCrossEntropy(b, true) }
func BenchmarkCrossEntropyDecomposed(b *testing.B) { ntBenchCrossEntropy(b, false) }

func ntBenchCrossEntropy(b *testing.B, fused bool) {
	for _, V := range []int{256, 50304} {
		const N = 1024
		b.Run(fmt.Sprintf("N%d_V%d", N, V), func(b *testing.B) {
			r := ntRNG(1)
			d := ntDev(fused, 0)
			src, _ := ntTensor(b, tensor.F32, ntNormal(r, N*V, 2, 0), N, V)
			logits := ntClone(src)
			targets := ntTokens(b, r, N, V, N)
			losses := tensor.New(tensor.F32, N)
			b.SetBytes(int64(2 * N * V * 4)) // the minimum traffic: read logits, write the gradient
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				copy(logits.Raw(), src.Raw())
				b.StartTimer()
				d.CrossEntropy(losses, logits, targets, N, V, 1/float32(N))
			}
			b.StopTimer()
			if err := d.Sync(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
