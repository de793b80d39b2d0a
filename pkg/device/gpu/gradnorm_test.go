package gpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// TestGPUGradNorm checks GradNorm against the CPU reference (both sum in
// float64, so the fp32 norms agree to the last bit or one ulp: scale 1),
// that the same buffer gives the same bits twice, and that an Inf or a NaN
// anywhere is reported, as the CPU reports it. gradnorm_partial2 sums
// chunks of 4096: sizes of one chunk, one more element, a partial last
// chunk; an offset view takes the scalar path.
func TestGPUGradNorm(t *testing.T) {
	rng := testRNG(t)
	for _, fused := range []bool{true, false} {
		g, ref := gpuDev(t, fused), cpuRef(fused)
		for _, n := range trim([]int{1, 17, 1000, 4096, 4097, 30*4096 + 5, 1<<20 + 3, 9 << 20}) {
			grads := randHost(rng, tensor.F32, 0, 1e-2, n)
			gg := toGPU(t, g, grads)
			if n == 4097 { // a view one element in: not 16-byte aligned
				h := randHost(rng, tensor.F32, 0, 1e-2, n+1)
				gg = toGPU(t, g, h).MustView(1, n)
				if err := grads.SetF32(h.MustView(1, n).ToF32()); err != nil {
					t.Fatal(err)
				}
			}
			for _, scale := range []float32{1, 1.0 / 1024, -0.5} {
				want, wantOK := ref.GradNorm(grads, scale)
				got, ok := g.GradNorm(gg, scale)
				again, ok2 := g.GradNorm(gg, scale)
				if err := g.Sync(); err != nil {
					t.Fatal(err)
				}
				name := fmt.Sprintf("n%d_scale%g", n, scale)
				t.Logf("RESULT gradnorm f32 %s %s norm relerr %.3g", formName(fused), name, math.Abs(float64(got-want))/float64(want))
				if ok != wantOK || !ok {
					t.Fatalf("gradnorm %s: finite %v, want %v", name, ok, wantOK)
				}
				if err := tensor.CloseF32([]float32{got}, []float32{want}, tensor.F32, 1); err != nil {
					t.Errorf("gradnorm %s: %v", name, err)
				}
				if math.Float32bits(again) != math.Float32bits(got) || ok2 != ok {
					t.Errorf("gradnorm %s: %g then %g: not deterministic", name, got, again)
				}
			}
			for _, bad := range []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())} {
				h := clone(grads)
				h.F32()[rng.Intn(n)] = bad
				want, wantOK := ref.GradNorm(h, 1)
				got, ok := g.GradNorm(toGPU(t, g, h), 1)
				if err := g.Sync(); err != nil {
					t.Fatal(err)
				}
				if ok || wantOK || math.IsNaN(float64(got)) != math.IsNaN(float64(want)) || math.IsInf(float64(got), 1) != math.IsInf(float64(want), 1) {
					t.Errorf("gradnorm n%d with %g: %g %v, CPU %g %v", n, bad, got, ok, want, wantOK)
				}
			}
		}
	}
}
