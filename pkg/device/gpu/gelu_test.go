package gpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// geluRef is the tanh-form GELU in float64.
func geluRef(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

// TestGPUGELUForward checks matmul.go's GELU and bias-add helpers, one pass
// and the eight-pass composite, against float64 (rounded to the dtype).
// Scale 2: a handful of fp32 roundings and tanhf's ulps against an exact
// reference.
func TestGPUGELUForward(t *testing.T) {
	rng := testRNG(t)
	for _, fused := range forms {
		g := gpuDev(t, fused)
		for _, dt := range floatDTypes {
			for _, sh := range [][2]int{{1, 1}, {17, 33}, {1024, 3072}} {
				N, OC := sh[0], sh[1]
				n := N * OC
				pre, bias := randHost(rng, dt, 0, 2, N, OC), randHost(rng, dt, 0, 0.5, OC)
				// pre + bias, rounded as the stored pre-activation is
				x, b := pre.ToF32(), bias.ToF32()
				sum := make([]float32, n)
				for i := range sum {
					sum[i] = x[i] + b[i%OC]
				}
				wantPre := tensor.New(dt, N, OC)
				if err := wantPre.SetF32(sum); err != nil {
					t.Fatal(err)
				}
				ys := wantPre.ToF32()
				for i := range ys {
					ys[i] = float32(geluRef(float64(ys[i])))
				}
				want := tensor.New(dt, N, OC)
				if err := want.SetF32(ys); err != nil {
					t.Fatal(err)
				}
				gpre := toGPU(t, g, pre)
				if !g.biasAdd(gpre, toGPU(t, g, bias), N, OC) {
					t.Fatal(g.Sync())
				}
				name := fmt.Sprintf("N%d_OC%d", N, OC)
				check(t, "bias_add", dt, fused, name, "out", toHost(t, g, gpre), wantPre, dt, 1)
				out := poisoned(t, g, dt, N, OC)
				ok := g.geluForward(out, gpre, n)
				form := "gelu_forward"
				if !fused {
					ok, form = g.geluForwardDecomposed(out, gpre, n), "gelu_forward_decomposed"
				}
				if !ok {
					t.Fatal(g.Sync())
				}
				check(t, form, dt, fused, name, "out", toHost(t, g, out), want, dt, 2)
			}
		}
	}
}
