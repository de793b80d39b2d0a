package cpu

import (
	"math"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// ntGELURef is the float64 tanh-form GELU.
func ntGELURef(x []float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v)))
	}
	return out
}

// TestGELUForward checks both forward helpers against the float64 loop on
// a wide range of inputs (the tails included), in place too.
func TestGELUForward(t *testing.T) {
	r := ntRNG(2)
	x64 := append(ntNormal(r, 999, 3, 0), 0, -12, 12, 1e-20, -5.5)
	x := make([]float32, len(x64))
	for i, v := range x64 {
		x[i] = float32(v)
		x64[i] = float64(x[i])
	}
	want := ntGELURef(x64)
	for _, fn := range []struct {
		name string
		f    func(out, inp []float32)
	}{{"fused", geluForward}, {"decomposed", geluForwardDecomposed}} {
		out := make([]float32, len(x))
		for i := range out {
			out[i] = float32(math.NaN())
		}
		fn.f(out, x)
		got := make([]float64, len(out))
		for i, v := range out {
			got[i] = float64(v)
		}
		// A handful of float32 steps on O(1) values: the F32 tolerance as is
		// (where 1 + tanh cancels the result is small and atol covers it).
		ntClose(t, fn.name, got, want, tensor.F32, 1)
		inPlace := append([]float32(nil), x...)
		fn.f(inPlace, inPlace)
		for i := range inPlace {
			if math.Float32bits(inPlace[i]) != math.Float32bits(out[i]) {
				t.Fatalf("%s in place: element %d is %v, out of place %v", fn.name, i, inPlace[i], out[i])
			}
		}
	}
	// The two forms run the same float32 steps in the same order.
	a, b := make([]float32, len(x)), make([]float32, len(x))
	geluForward(a, x)
	geluForwardDecomposed(b, x)
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("element %d (x=%v): fused %v, decomposed %v", i, x[i], a[i], b[i])
		}
	}
}

// TestGELUBackwardFD checks GELUBackward against central differences of
// L = Σ w·gelu(x), whose gradient is w·gelu'(x), which is dinp for dout = w.
func TestGELUBackwardFD(t *testing.T) {
	const n = 301
	for _, f := range ntForms {
		r := ntRNG(4)
		d := ntDev(f.fused, 2)
		inp, x64 := ntTensor(t, tensor.F32, append(ntNormal(r, n-3, 2, 0), -8, 0, 8), n)
		dout, w64 := ntTensor(t, tensor.F32, ntNormal(r, n, 1, 0), n)
		dinp := tensor.New(tensor.F32, n)
		ntPoison(dinp)
		d.GELUBackward(dinp, inp, dout, n)
		ntSync(t, d)
		loss := func() float64 { return ntDot(w64, ntGELURef(x64)) }
		// gelu' is a sum of two O(1) terms of about ten float32 steps, plus
		// the float64 tanh: scale 2.
		ntClose(t, f.name, ntF64(dinp), ntFD(x64, loss), tensor.F32, 2)

		// In place over dout, as the model's backward calls it.
		g := ntClone(dout)
		d.GELUBackward(g, inp, g, n)
		ntSync(t, d)
		if !ntSameBits(g, dinp) {
			t.Errorf("%s: GELUBackward in place over dout differs from out of place", f.name)
		}
	}
}

// TestGELUBackwardParity compares the two forms on several sizes and dtypes,
// dinp poisoned first (it is overwritten, not accumulated).
func TestGELUBackwardParity(t *testing.T) {
	for _, dt := range ntDTypes {
		for _, N := range ntRowCounts {
			for _, C := range ntWidths {
				n := N * C
				t.Run(ntName(dt, N, C), func(t *testing.T) {
					r := ntRNG(uint64(n))
					inp, _ := ntTensor(t, dt, ntNormal(r, n, 2, 0), n)
					dout, _ := ntTensor(t, dt, ntNormal(r, n, 1, 0), n)
					var got [2]*tensor.Tensor
					for k, f := range ntForms {
						d := ntDev(f.fused, 2)
						got[k] = tensor.New(dt, n)
						ntPoison(got[k])
						d.GELUBackward(got[k], inp, dout, n)
						ntSync(t, d)
					}
					// Same float32 steps in the same order: one rounding of dt.
					ntCloseT(t, "dinp", got[0], got[1], dt, 1)
				})
			}
		}
	}
}

// BenchmarkGELUBackward times the fused GELU backward over the tiny preset's
// MLP activations (B·T·4C = 1024·512 elements, F32); ns/element is reported.
func BenchmarkGELUBackward(b *testing.B) {
	const n = 1024 * 512
	r := ntRNG(1)
	inp, _ := ntTensor(b, tensor.F32, ntNormal(r, n, 1, 0), n)
	dout, _ := ntTensor(b, tensor.F32, ntNormal(r, n, 1, 0), n)
	dinp := tensor.New(tensor.F32, n)
	d := ntDev(true, 2)
	b.ResetTimer()
	for range b.N {
		d.GELUBackward(dinp, inp, dout, n)
	}
	ntSync(b, d)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/element")
}
