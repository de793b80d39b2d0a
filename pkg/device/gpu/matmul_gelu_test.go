package gpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// TestGPUMatmulBackwardGELU checks MatmulBackwardGELU against the CPU
// reference of the same form for every dtype, with dout in the operands'
// dtype and in fp32 (the residual gradient), dpre poisoned first (it is
// overwritten) and the other gradients random (they accumulate). Operands
// are dyadic (see dyadic) so the GEMMs are exact; what differs is GELU's
// derivative: cuBLASLt's approximation in the fused 16-bit form, the
// kernels' elsewhere (scale 2 in 16-bit as for Matmul's GELU, 8 in fp32 as
// in TestGPUGELUBackward). dpreBias sums N terms of dpre: the GPU may sum
// the rounded dpre (the DGELU epilogue without BGRAD, the sequence), the
// fused CPU sums fp32 terms, so it is held to the dtype's tolerance scaled
// by 4·√N. dweight is exact; dbias is exact where dout is dyadic (the
// 16-bit copy of an fp32 dout is exact too).
func TestGPUMatmulBackwardGELU(t *testing.T) {
	rng := testRNG(t)
	shapes := [][3]int{{1, 1, 1}, {17, 1000, 17}, {1024, 3072, 768}, {33, 1000, 768}}
	for _, fused := range forms {
		g, ref := gpuDev(t, fused), cpuRef(fused)
		for _, dt := range floatDTypes {
			douts := []tensor.DType{dt}
			if dt != tensor.F32 {
				douts = append(douts, tensor.F32)
			}
			for _, sh := range shapes {
				N, C, OC := sh[0], sh[1], sh[2]
				for _, doutDT := range douts {
					name := fmt.Sprintf("N%d_C%d_OC%d_dout%s", N, C, OC, doutDT)
					dout := dyadic(rng, doutDT, 8, 16, N, OC)
					inp := dyadic(rng, dt, 8, 16, N, C)
					pre := dyadic(rng, dt, 8, 4, N, C) // |pre| <= 2: GELU's curved part
					w := dyadic(rng, dt, 8, 64, OC, C)
					dw0 := dyadic(rng, tensor.F32, 8, 16, OC, C)
					db0 := dyadic(rng, tensor.F32, 8, 16, OC)
					dpb0 := dyadic(rng, tensor.F32, 8, 16, C)
					wantPre, wantDw, wantDb, wantDpb := tensor.New(dt, N, C), clone(dw0), clone(db0), clone(dpb0)
					ref.MatmulBackwardGELU(wantPre, wantDpb, wantDw, wantDb, dout, inp, pre, w, N, C, OC)
					if err := ref.Sync(); err != nil {
						t.Fatal(err)
					}
					dpre := poisoned(t, g, dt, N, C)
					dw, db, dpb := toGPU(t, g, dw0), toGPU(t, g, db0), toGPU(t, g, dpb0)
					g.MatmulBackwardGELU(dpre, dpb, dw, db, toGPU(t, g, dout), toGPU(t, g, inp), toGPU(t, g, pre), toGPU(t, g, w), N, C, OC)
					scale := 2.0
					if dt == tensor.F32 {
						scale = 8
					}
					check(t, "matmul_backward_gelu", dt, fused, name, "dpre", toHost(t, g, dpre), wantPre, dt, scale)
					check(t, "matmul_backward_gelu", dt, fused, name, "dpre_bias", toHost(t, g, dpb), wantDpb, dt, 4*math.Sqrt(float64(N)))
					check(t, "matmul_backward_gelu", dt, fused, name, "dweight", toHost(t, g, dw), wantDw, dt, 1)
					check(t, "matmul_backward_gelu", dt, fused, name, "dbias", toHost(t, g, db), wantDb, dt, 1)
				}
			}
		}
	}
	if fb := gpuDev(t, true).LtFallbacks(); len(fb) > 0 {
		t.Logf("cuBLASLt configurations that ran the decomposed sequence: %q", fb)
	}
}
