package gpu

import (
	"fmt"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// The layernorm ops themselves are checked against the CPU by the
// conformance cases (devicetest), in both kernel sets (the self-test's
// "fused layernorm async/sync" mode runs the one the fused mode does not).

// lnTypePairs are the (storage, residual-stream) dtypes of the fused
// layernorm kernels.
var lnTypePairs = [][2]tensor.DType{
	{tensor.F32, tensor.F32}, {tensor.BF16, tensor.BF16}, {tensor.F16, tensor.F16},
	{tensor.BF16, tensor.F32}, {tensor.F16, tensor.F32},
}

// sumScale is the tolerance scale of a sum of k terms.
func sumScale(k int) float64 { return max(1, float64(k)/16) }

// TestGPULayerNormAsyncSameBits checks that layernorm_async.cu's kernels
// give the same bits as layernorm.cu's (the same arithmetic in the same
// order: out, mean, rstd and res; dinp too in the host emulator, here within
// one rounding, since ptxas may contract the two kernels' products into
// FMAs differently; dweight and dbias are summed over another grid, so only
// close), at GPT-2's width with rows that wrap every warp's slots several
// times, through each stage count, and in place (res = a).
func TestGPULayerNormAsyncSameBits(t *testing.T) {
	g := gpuDev(t, true)
	if !g.built2(tensor.BF16, "layernorm_forward_async_rf32") {
		t.Skipf("layernorm_async.cu is not built on %s (sm_80+)", g.Name())
	}
	defer func(a bool, s int) { g.lnAsync, g.lnStages = a, s }(g.lnAsync, g.lnStages)
	rng := testRNG(t)
	for _, tp := range lnTypePairs {
		h, r := tp[0], tp[1]
		for _, sh := range [][2]int{{20000, 768}, {4099, 1024}, {777, 100}} {
			N, C := sh[0], sh[1]
			inp, w, b := toGPU(t, g, randHost(rng, r, 0.5, 2, N, C)), toGPU(t, g, randHost(rng, h, 1, 0.2, C)), toGPU(t, g, randHost(rng, h, 0, 0.1, C))
			a, bb := randHost(rng, r, 0.5, 1.5, N, C), randHost(rng, h, 0, 1, N, C)
			dout, dinp0 := toGPU(t, g, randHost(rng, h, 0, 1, N, C)), randHost(rng, r, 0, 1, N, C)
			ga, gbb := toGPU(t, g, a), toGPU(t, g, bb)
			// outputs of one form: out, mean, rstd, res, out2, mean2, rstd2, res in place, dinp, dweight, dbias
			run := func(async bool, stages int) []*tensor.Tensor {
				g.lnAsync, g.lnStages = async, stages
				out, mean, rstd := poisoned(t, g, h, N, C), poisoned(t, g, tensor.F32, N), poisoned(t, g, tensor.F32, N)
				g.LayerNorm(out, mean, rstd, inp, w, b, N, C)
				res, out2, mean2, rstd2 := poisoned(t, g, r, N, C), poisoned(t, g, h, N, C), poisoned(t, g, tensor.F32, N), poisoned(t, g, tensor.F32, N)
				g.ResidualLayerNorm(res, out2, mean2, rstd2, ga, gbb, w, b, N, C)
				inplace := toGPU(t, g, a)
				g.ResidualLayerNorm(inplace, poisoned(t, g, h, N, C), poisoned(t, g, tensor.F32, N), poisoned(t, g, tensor.F32, N), inplace, gbb, w, b, N, C)
				dinp, dw, db := toGPU(t, g, dinp0), toGPU(t, g, tensor.New(tensor.F32, C)), toGPU(t, g, tensor.New(tensor.F32, C))
				g.LayerNormBackward(dinp, dw, db, dout, inp, w, mean, rstd, N, C)
				var hs []*tensor.Tensor
				for _, x := range []*tensor.Tensor{out, mean, rstd, res, out2, mean2, rstd2, inplace, dinp, dw, db} {
					hs = append(hs, toHost(t, g, x))
				}
				return hs
			}
			want := run(false, 0)
			names := []string{"out", "mean", "rstd", "res", "residual out", "residual mean", "residual rstd", "res in place", "dinp", "dweight", "dbias"}
			for _, stages := range []int{0, 2, 3, 4} {
				got := run(true, stages)
				for i, n := range names {
					name := fmt.Sprintf("N%d_C%d_%s/%s stages %d: %s", N, C, h, r, stages, n)
					if i == 8 {
						same := string(got[i].Raw()) == string(want[i].Raw())
						t.Logf("%s: same bits as layernorm.cu's: %v", name, same)
						check(t, "layernorm_backward_async", h, true, name, n, got[i], want[i], r, 1)
						continue
					}
					if i > 8 {
						check(t, "layernorm_backward_async", h, true, name, n, got[i], want[i], tensor.F32, sumScale(N))
						continue
					}
					if string(got[i].Raw()) != string(want[i].Raw()) {
						t.Errorf("%s: the async kernels' bits differ from layernorm.cu's (relative error %.3g)", name, relErr(got[i].ToF32(), want[i].ToF32()))
					}
				}
			}
		}
	}
}
