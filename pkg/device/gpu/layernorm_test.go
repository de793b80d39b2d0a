package gpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// lnShapes are (N, C): one element, odd widths that miss the vector path
// (C 3, 1601 over the register limit), a GPT-2 row count and width, and
// C 1000 (a multiple of 4 but not of the warp's 128 elements).
//
// 8192 and 4099 rows: more rows than the backward's persistent grid holds
// warps (resident blocks × SMs × 4 warps, at most 2112 on an H200 at 4 blocks
// per SM), so warps do second rows (sums carried in shared memory); 772 =
// 4·193: a vector row whose float4 groups do not fill the last pass of the
// warp. 1×768 and 3×1024: fewer rows than one block's warps (1024: the
// widest row the forward and backward fast paths hold); 7×1028: a vector
// width just over it (the general path); 20000×768: several rows per warp
// of the backward's persistent grid.
var lnShapes = [][2]int{{1, 1}, {64, 3}, {1, 768}, {3, 1024}, {7, 1028}, {17, 1000}, {1024, 768}, {5, 1601}, {4099, 772}, {8192, 768}, {20000, 768}}

// lnTypes are the (working, row input) dtype pairs tested: every policy's
// (half, F32 residual stream), and the uniform 16-bit pairs.
var lnTypePairs = [][2]tensor.DType{
	{tensor.F32, tensor.F32}, {tensor.BF16, tensor.F32}, {tensor.F16, tensor.F32},
	{tensor.BF16, tensor.BF16}, {tensor.F16, tensor.F16},
}

// trim drops the largest size under -test.short (the compute-sanitizer
// run, where every access is checked).
func trim[S any](sizes []S) []S {
	if testing.Short() && len(sizes) > 2 {
		return sizes[:len(sizes)-1]
	}
	return sizes
}

// shortTo keeps the first n sizes under -test.short: racecheck and
// synccheck instrument every shared-memory access, and at the largest
// sizes of these tables they run for tens of minutes. The sizes kept still
// take every kernel and every code path (tails, several tiles, several
// blocks a row); the full tables run without -test.short.
func shortTo[S any](sizes []S, n int) []S {
	if testing.Short() && len(sizes) > n {
		return sizes[:n]
	}
	return sizes
}

// lnCond is the tolerance scale of a layernorm's output: x − mean is
// rounded at an ulp of the row's largest |x| in fp32 (float64 on the CPU),
// and the normalisation multiplies that by rstd. Rows drawn with a small
// spread (C = 3 gives some) have rstd·max|x| far above its usual 2-4, and
// their outputs are that much less determined by fp32 arithmetic: 1 for
// the usual rows, the row's condition over 4 beyond them.
func lnCond(x, rstd *tensor.Tensor, N, C int) float64 {
	xs, rs := x.ToF32(), rstd.ToF32()
	cond := 0.0
	for r := range N {
		m := 0.0
		for _, v := range xs[r*C : (r+1)*C] {
			m = max(m, math.Abs(float64(v)))
		}
		cond = max(cond, m*float64(rs[r]))
	}
	return max(1, cond/4)
}

// sumScale is the tolerance scale of fp32 results that add up k terms of
// unit size, summed in a different order on the two devices (a tree of
// per-block partials on the GPU, sequential runs on the CPU): each rounding
// is an ulp of a partial sum, whose size grows like √k, and there are k of
// them adding up like √k, so the difference grows like k ulps of a term;
// k/16 keeps k <= 16 at scale 1.
func sumScale(k int) float64 { return max(1, float64(k)/16) }

// checkRel also bounds ||got-want||/||want|| by the dtype's rtol: the
// element-wise test, scaled for long sums, cannot miss a wholesale error.
func checkRel(t *testing.T, name string, got, want *tensor.Tensor, dt tensor.DType) {
	t.Helper()
	_, rtol := tensor.Tolerance(dt)
	if e := relErr(got.ToF32(), want.ToF32()); e > rtol {
		t.Errorf("%s: relative error %.3g over %.3g", name, e, rtol)
	}
}

// TestGPULayerNorm checks LayerNorm and ResidualLayerNorm, both forms,
// against the CPU reference (outputs poisoned first) at scale 1: each output
// is one normalisation of the same rounded inputs, with statistics summed
// over C in fp32 on the GPU and float64 on the CPU (a relative difference
// near 1e-7, under F32's 1e-5).
func TestGPULayerNorm(t *testing.T) {
	rng := testRNG(t)
	for _, f := range lnForms(t) {
		g, ref, fused := f.g, cpuRef(f.fused), f.fused
		restore := f.set()
		for _, tp := range lnTypePairs {
			h, r := tp[0], tp[1]
			dts := h.String() + "/" + r.String() + f.suffix
			for _, sh := range shortTo(lnShapes, 9) {
				N, C := sh[0], sh[1]
				name := fmt.Sprintf("N%d_C%d", N, C)
				inp, w, b := randHost(rng, r, 0.5, 2, N, C), randHost(rng, h, 1, 0.2, C), randHost(rng, h, 0, 0.1, C)
				want, wm, wr := tensor.New(h, N, C), tensor.New(tensor.F32, N), tensor.New(tensor.F32, N)
				ref.LayerNorm(want, wm, wr, inp, w, b, N, C)
				if err := ref.Sync(); err != nil {
					t.Fatal(err)
				}
				out, mean, rstd := poisoned(t, g, h, N, C), poisoned(t, g, tensor.F32, N), poisoned(t, g, tensor.F32, N)
				gw, gb := toGPU(t, g, w), toGPU(t, g, b)
				g.LayerNorm(out, mean, rstd, toGPU(t, g, inp), gw, gb, N, C)
				check(t, "layernorm", h, fused, name+"_"+dts, "out", toHost(t, g, out), want, h, lnCond(inp, wr, N, C))
				check(t, "layernorm", h, fused, name+"_"+dts, "mean", toHost(t, g, mean), wm, tensor.F32, 1)
				check(t, "layernorm", h, fused, name+"_"+dts, "rstd", toHost(t, g, rstd), wr, tensor.F32, 1)

				// ResidualLayerNorm: res = a + b (R), out = LayerNorm(res).
				a, bb := randHost(rng, r, 0.5, 1.5, N, C), randHost(rng, h, 0, 1, N, C)
				wantRes := tensor.New(r, N, C)
				ref.ResidualLayerNorm(wantRes, want, wm, wr, a, bb, w, b, N, C)
				if err := ref.Sync(); err != nil {
					t.Fatal(err)
				}
				res := poisoned(t, g, r, N, C)
				out, mean, rstd = poisoned(t, g, h, N, C), poisoned(t, g, tensor.F32, N), poisoned(t, g, tensor.F32, N)
				g.ResidualLayerNorm(res, out, mean, rstd, toGPU(t, g, a), toGPU(t, g, bb), gw, gb, N, C)
				check(t, "residual_layernorm", h, fused, name+"_"+dts, "res", toHost(t, g, res), wantRes, r, 1)
				check(t, "residual_layernorm", h, fused, name+"_"+dts, "out", toHost(t, g, out), want, h, lnCond(wantRes, wr, N, C))
				check(t, "residual_layernorm", h, fused, name+"_"+dts, "mean", toHost(t, g, mean), wm, tensor.F32, 1)
				check(t, "residual_layernorm", h, fused, name+"_"+dts, "rstd", toHost(t, g, rstd), wr, tensor.F32, 1)
			}
		}
		restore()
	}
}

// TestGPULayerNormBackward checks LayerNormBackward, both forms, against
// the CPU reference, accumulating into random dinp, dweight and dbias.
// dinp is checked at scale 1 (per element it sums C products in fp32 on
// both devices, in different orders, with a relative difference near
// 1e-7); dweight and dbias sum N rows and are checked at sumScale(N) plus a
// relative-error bound. The fused form must give the same bits twice.
func TestGPULayerNormBackward(t *testing.T) {
	rng := testRNG(t)
	for _, f := range lnForms(t) {
		g, ref, fused := f.g, cpuRef(f.fused), f.fused
		restore := f.set()
		for _, tp := range lnTypePairs {
			h, r := tp[0], tp[1]
			dts := h.String() + "/" + r.String() + f.suffix
			for _, sh := range shortTo(lnShapes, 9) {
				N, C := sh[0], sh[1]
				name := fmt.Sprintf("N%d_C%d_%s", N, C, dts)
				inp, w := randHost(rng, r, 0.5, 2, N, C), randHost(rng, h, 1, 0.2, C)
				dout := randHost(rng, h, 0, 1, N, C)
				// the statistics of inp, as the forward stores them
				mean, rstd := tensor.New(tensor.F32, N), tensor.New(tensor.F32, N)
				ref.LayerNorm(tensor.New(h, N, C), mean, rstd, inp, w, randHost(rng, h, 0, 0.1, C), N, C)
				dinp0, dw0, db0 := randHost(rng, r, 0, 1, N, C), randHost(rng, tensor.F32, 0, 1, C), randHost(rng, tensor.F32, 0, 1, C)
				wantDinp, wantDw, wantDb := clone(dinp0), clone(dw0), clone(db0)
				ref.LayerNormBackward(wantDinp, wantDw, wantDb, dout, inp, w, mean, rstd, N, C)
				if err := ref.Sync(); err != nil {
					t.Fatal(err)
				}
				gdout, ginp, gw, gmean, grstd := toGPU(t, g, dout), toGPU(t, g, inp), toGPU(t, g, w), toGPU(t, g, mean), toGPU(t, g, rstd)
				var first [3]*tensor.Tensor
				for round := range 2 {
					dinp, dw, db := toGPU(t, g, dinp0), toGPU(t, g, dw0), toGPU(t, g, db0)
					g.LayerNormBackward(dinp, dw, db, gdout, ginp, gw, gmean, grstd, N, C)
					got := [3]*tensor.Tensor{toHost(t, g, dinp), toHost(t, g, dw), toHost(t, g, db)}
					if round == 1 {
						for i, out := range []string{"dinp", "dweight", "dbias"} {
							if string(got[i].Raw()) != string(first[i].Raw()) {
								t.Errorf("layernorm backward %s %s: %s differs between two runs", formName(fused), name, out)
							}
						}
						break
					}
					first = got
					// At C = 1 the row's variance is 0 and rstd = 1/√eps ≈ 316: the
					// gradient through the normalisation is exactly zero in real
					// arithmetic, and what both devices add is that factor times
					// the rounding of a cancellation (contracted into FMAs on the
					// GPU), so the tolerance scales with it (seen: 5e-6 on 0.07).
					dinpScale := 1.0
					if C == 1 {
						dinpScale = 1 / math.Sqrt(1e-5)
					}
					check(t, "layernorm_backward", h, fused, name, "dinp", got[0], wantDinp, r, dinpScale)
					check(t, "layernorm_backward", h, fused, name, "dweight", got[1], wantDw, tensor.F32, sumScale(N))
					check(t, "layernorm_backward", h, fused, name, "dbias", got[2], wantDb, tensor.F32, sumScale(N))
					checkRel(t, "layernorm backward dweight "+name, got[1], wantDw, tensor.F32)
					checkRel(t, "layernorm backward dbias "+name, got[2], wantDb, tensor.F32)
				}
			}
		}
		restore()
	}
}

// lnForm is one form the layernorm tests run: the fused device with
// layernorm.cu's kernels or (suffix "_async") layernorm_async.cu's, or the
// decomposed device. set switches the device to it and returns the undo.
type lnForm struct {
	g      *Device
	fused  bool
	async  bool
	suffix string
}

func (f lnForm) set() func() {
	was := f.g.lnAsync
	f.g.lnAsync = f.async
	return func() { f.g.lnAsync = was }
}

// lnForms are the fused form with each kernel set (the async one where
// layernorm_async.cu is built: sm_80+) and the decomposed form.
func lnForms(t *testing.T) []lnForm {
	t.Helper()
	g := gpuDev(t, true)
	forms := []lnForm{{g: g, fused: true}}
	if g.built2(tensor.BF16, "layernorm_forward_async_rf32") {
		forms = append(forms, lnForm{g: g, fused: true, async: true, suffix: "_async"})
	} else {
		t.Logf("layernorm_async.cu is not built on %s (sm_80+): its kernels are not tested", g.Name())
	}
	return append(forms, lnForm{g: gpuDev(t, false)})
}

// TestGPULayerNormAsyncSameBits checks that layernorm_async.cu's kernels
// give the same bits as layernorm.cu's (the same arithmetic in the same
// order: out, mean, rstd, res and dinp; dweight and dbias are summed over
// another grid, so only close), at GPT-2's width with rows that wrap every
// warp's slots several times, through each stage count, and in place
// (res = a).
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
					if i >= 9 {
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

// TestGPUAdd checks Add (out = a + b, one rounding, so scale 1) for the
// residual stream's types, at an odd size and through unaligned views.
func TestGPUAdd(t *testing.T) {
	rng := testRNG(t)
	g, ref := gpuDev(t, true), cpuRef(true)
	for _, tp := range lnTypePairs {
		h, r := tp[0], tp[1]
		for _, n := range []int{1, 4099, 1 << 20} {
			for _, off := range []int{0, 1} { // 1: views off the 4-element alignment (the scalar path)
				a, b := randHost(rng, r, 0, 1, n+off), randHost(rng, h, 0, 1, n+off)
				want := tensor.New(r, n)
				ref.Add(want, a.MustView(off, n), b.MustView(off, n), n)
				if err := ref.Sync(); err != nil {
					t.Fatal(err)
				}
				out := poisoned(t, g, r, n+off)
				g.Add(out.MustView(off, n), toGPU(t, g, a).MustView(off, n), toGPU(t, g, b).MustView(off, n), n)
				got := toHost(t, g, out)
				check(t, "add", h, true, fmt.Sprintf("n%d_off%d_%s/%s", n, off, h, r), "out", got.MustView(off, n), want, r, 1)
			}
		}
	}
}
