package gpu

import (
	"fmt"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// ceShapes are (N, V): one element, odd sizes (257: rows that are not a
// multiple of the 128-bit vector, so the scalar path), GPT-2's vocabulary
// (50304: the fp32 rows are longer than the register cache, so the re-read
// path too).
var ceShapes = [][2]int{{1, 1}, {17, 1000}, {33, 257}, {64, 50304}}

// TestGPUCrossEntropy checks CrossEntropy against the CPU reference with and
// without the gradient, losses poisoned first. Losses are fp32 from the
// same (rounded) logits: fp32 tolerance at sqrtScale(V), the length of the
// exp sum; gradients by the logits' dtype, fp32 ones at scale 2 (the fused
// kernel's exp is exp2f of an FMA, within 2e-6 relative; the CPU's within 2
// ulp).
func TestGPUCrossEntropy(t *testing.T) {
	rng := testRNG(t)
	for _, fused := range forms {
		g, ref := gpuDev(t, fused), cpuRef(fused)
		for _, dt := range floatDTypes {
			for _, sh := range ceShapes {
				N, V := sh[0], sh[1]
				for _, dscale := range []float32{0, 1 / float32(N)} {
					name := fmt.Sprintf("N%d_V%d_dscale%v", N, V, dscale != 0)
					logits := randHost(rng, dt, 0, 2, N, V)
					tg := randTokens(rng, N, V)
					want, wantLoss := clone(logits), tensor.New(tensor.F32, N)
					ref.CrossEntropy(wantLoss, want, tg, N, V, dscale)
					if err := ref.Sync(); err != nil {
						t.Fatal(err)
					}
					losses, x := poisoned(t, g, tensor.F32, N), toGPU(t, g, logits)
					g.CrossEntropy(losses, x, toGPU(t, g, tg), N, V, dscale)
					check(t, "crossentropy", dt, fused, name, "losses", toHost(t, g, losses), wantLoss, tensor.F32, sqrtScale(V))
					gscale := 1.0
					if dt == tensor.F32 {
						gscale = 2
					}
					check(t, "crossentropy", dt, fused, name, "dlogits", toHost(t, g, x), want, dt, gscale)
				}
			}
		}
	}
}
