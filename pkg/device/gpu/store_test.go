package gpu

import (
	"fmt"
	"testing"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

var _ device.GradStorer = (*Device)(nil)

// TestGPUMatmulBackwardStore: MatmulBackwardStore into a NaN-poisoned dinp
// gives the CPU's dinp = dout·weight (zeroed, then accumulated) and the
// same values as the GPU's own Zero + MatmulBackward (what the model queued
// before: a product added to zero is the product), with dweight and dbias
// accumulated as MatmulBackward does, for every dtype and form.
func TestGPUMatmulBackwardStore(t *testing.T) {
	rng := testRNG(t)
	for _, fused := range forms {
		g, ref := gpuDev(t, fused), cpuRef(fused)
		for _, dt := range floatDTypes {
			for _, sh := range matmulShapes {
				N, C, OC := sh[0], sh[1], sh[2]
				name := fmt.Sprintf("N%d_C%d_OC%d", N, C, OC)
				dout, inp, w := dyadic(rng, dt, 8, 16, N, OC), dyadic(rng, dt, 8, 16, N, C), dyadic(rng, dt, 8, 64, OC, C)
				dw0, db0 := dyadic(rng, tensor.F32, 8, 16, OC, C), dyadic(rng, tensor.F32, 8, 16, OC)
				wantDinp, wantDw, wantDb := tensor.New(dt, N, C), clone(dw0), clone(db0)
				ref.MatmulBackward(wantDinp, wantDw, wantDb, dout, inp, w, N, C, OC)
				if err := ref.Sync(); err != nil {
					t.Fatal(err)
				}
				gdout, ginp, gw := toGPU(t, g, dout), toGPU(t, g, inp), toGPU(t, g, w)
				dinp, dw, db := poisoned(t, g, dt, N, C), toGPU(t, g, dw0), toGPU(t, g, db0)
				g.MatmulBackwardStore(dinp, dw, db, gdout, ginp, gw, N, C, OC)
				got := toHost(t, g, dinp)
				check(t, "matmul_backward_store", dt, fused, name, "dinp", got, wantDinp, dt, 1)
				check(t, "matmul_backward_store", dt, fused, name, "dweight", toHost(t, g, dw), wantDw, dt, 1)
				check(t, "matmul_backward_store", dt, fused, name, "dbias", toHost(t, g, db), wantDb, dt, 1)
				acc := poisoned(t, g, dt, N, C)
				g.Zero(acc)
				g.MatmulBackward(acc, toGPU(t, g, dw0), toGPU(t, g, db0), gdout, ginp, gw, N, C, OC)
				// Equal values (a -0 product stored is +0 once added to zero).
				a, b := toHost(t, g, acc).ToF32(), got.ToF32()
				for i := range a {
					if a[i] != b[i] {
						t.Errorf("matmul_backward_store %s %s %s: dinp[%d] = %g, Zero + MatmulBackward gives %g", dt, formName(fused), name, i, b[i], a[i])
						break
					}
				}
			}
		}
	}
}
