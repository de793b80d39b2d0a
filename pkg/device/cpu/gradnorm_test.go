package cpu

import (
	"math"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// TestGradNorm checks the norm against a float64 sum in every dtype, for
// sizes below, at and above the chunk, with a scale.
func TestGradNorm(t *testing.T) {
	for _, dt := range ntDTypes {
		for _, n := range []int{1, 7, gnChunk, 3*gnChunk + 11} {
			r := ntRNG(uint64(n))
			g, g64 := ntTensor(t, dt, ntNormal(r, n, 2, 0.1), n)
			const scale = 0.25
			var s float64
			for _, x := range g64 {
				s += (x * scale) * (x * scale)
			}
			d := ntDev(true, 2)
			norm, finite := d.GradNorm(g, scale)
			ntSync(t, d)
			if !finite {
				t.Errorf("%s n=%d: finite gradients reported non-finite", dt, n)
			}
			// The float64 sum of squares is exact to ~1e-16; what remains is
			// the final rounding to float32.
			ntClose(t, ntName(dt, n), []float64{float64(norm)}, []float64{math.Sqrt(s)}, tensor.F32, 1)
		}
	}
}

// TestGradNormNonFinite checks the finite flag with one Inf or NaN injected.
func TestGradNormNonFinite(t *testing.T) {
	const n = 2*gnChunk + 5
	for _, dt := range ntDTypes {
		for _, bad := range []float64{math.Inf(1), math.Inf(-1), math.NaN()} {
			for _, at := range []int{0, gnChunk + 3, n - 1} {
				r := ntRNG(1)
				v := ntNormal(r, n, 1, 0)
				v[at] = bad
				g, _ := ntTensor(t, dt, v, n)
				d := ntDev(true, 2)
				norm, finite := d.GradNorm(g, 1)
				ntSync(t, d)
				if finite {
					t.Errorf("%s: %v at %d: reported finite (norm %v)", dt, bad, at, norm)
				}
				if !math.IsInf(float64(norm), 0) && !math.IsNaN(float64(norm)) {
					t.Errorf("%s: %v at %d: norm %v is finite", dt, bad, at, norm)
				}
			}
		}
	}
	// Large but finite values must not be taken for Inf (their squares
	// overflow float32, not float64).
	g, _ := ntTensor(t, tensor.F32, []float64{3e38, -3e38, 1}, 3)
	d := ntDev(true, 2)
	norm, finite := d.GradNorm(g, 1e-3)
	ntSync(t, d)
	ntClose(t, "large", []float64{float64(norm)}, []float64{math.Sqrt(2) * 3e35}, tensor.F32, 1)
	if !finite {
		t.Errorf("3e38: reported non-finite")
	}
}

// TestGradNormDeterministic checks the same bits across runs and thread counts.
func TestGradNormDeterministic(t *testing.T) {
	const n = 1<<20 + 7
	r := ntRNG(3)
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
		g, _ := ntTensor(t, dt, ntNormal(r, n, 1, 0), n)
		var first float32
		for run, threads := range []int{1, 2, 2, 1, 3} {
			d := ntDev(true, threads)
			norm, _ := d.GradNorm(g, 0.5)
			ntSync(t, d)
			if run == 0 {
				first = norm
			} else if math.Float32bits(norm) != math.Float32bits(first) {
				t.Errorf("%s: run %d with %d threads: %v, run 0: %v", dt, run, threads, norm, first)
			}
		}
	}
}
