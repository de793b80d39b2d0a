package gpt

import (
	"math"
	"testing"

	"github.com/druto/druto/internal/gputest/gpudev"
	"github.com/druto/druto/internal/testreq"
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/device/gpu"
)

// fp8Dev returns the fused GPU device, skipping where it has no FP8 step
// (druto's FP8 kernels need sm_90).
func fp8Dev(t *testing.T) *gpu.Device {
	t.Helper()
	dev := gpudev.Fused(t)
	if major, minor := dev.Capability(); major*10+minor < 90 {
		testreq.Skip(t, "DRUTO_GPU_FEATURE_TESTS", "no FP8 step on %s (sm_%d%d; druto's FP8 kernels need sm_90)", dev.Name(), major, minor)
	}
	return dev
}

// TestGPUFP8Step: the FP8 step on the GPU (the FP8 producers, cuBLASLt's
// FP8 GEMMs with the bias epilogue and beta = 1, the scales' update on the
// device) against the CPU reference of the same step: after three steps
// on one batch (the scales settled from the first two's amaxes) the loss
// within 0.5%; every parameter's gradient at cosine ≥ 0.98 and within 20%
// of the reference's norm (the two round some values to neighbouring FP8
// codes: the kernels' gelu' and sums differ from the reference's in the
// last fp32 bits, and the flipped codes add up towards the first block,
// whose ln_1 weight's gradient came out at cosine 0.989); and, per
// parameter, the GPU's FP8 gradient no further from the GPU's bf16
// gradient than twice the CPU reference's distance from the CPU's bf16
// gradient plus 0.005 (in 1 - cosine), so that the GPU's FP8 error is the
// reference's kind of error and size (a wrong derivative gives cosines
// near 0.4). Every tensor's scale within 5% of the reference's (the amaxes
// differ only by the order of fp32 sums), no overflow, and the GPU's FP8
// loss within 1% of its bf16 loss; with amp.FP8Recipe.Head (the logits
// and the head's dx in FP8), the loss within 0.5% of the reference's with
// that recipe, its gradients within the bounds above and the head's
// scales and the logits' gradient's amax near the reference's; under a scaling margin
// that flushes values to zero, the underflow count near the reference's.
// Needs sm_90.
func TestGPUFP8Step(t *testing.T) {
	dev := fp8Dev(t)
	cfg := Config{Vocab: 512, MaxSeq: 128, Layers: 2, Heads: 4, Channels: 128}
	const B, T = 4, 128
	ref := cpu.New(device.Options{Fused: true})
	lg, gg, mg := fp8StepsOn(t, dev, cfg, amp.FP8, 3, B, T)
	lc, gc, mc := fp8StepsOn(t, ref, cfg, amp.FP8, 3, B, T)
	lb, gb, _ := fp8StepsOn(t, dev, cfg, amp.BF16, 3, B, T)
	_, gcb, _ := fp8StepsOn(t, ref, cfg, amp.BF16, 3, B, T)
	t.Logf("loss: gpu fp8 %.6f, cpu fp8 %.6f, gpu bf16 %.6f", lg, lc, lb)
	if d := math.Abs(float64(lg-lc)) / float64(lc); d > 0.005 {
		t.Errorf("gpu fp8 loss %.6f, cpu reference %.6f: %.3f%% apart", lg, lc, 100*d)
	}
	if d := math.Abs(float64(lg-lb)) / float64(lb); d > 0.01 {
		t.Errorf("gpu fp8 loss %.6f, gpu bf16 %.6f: %.3f%% apart", lg, lb, 100*d)
	}
	gradientsAlike(t, mg, gg, gc, 0.98, 0.2, "gpu fp8 gradient", "the cpu reference's")
	for _, s := range mg.layout.Segments {
		seg := func(g []float32) []float32 { return g[s.Offset : s.Offset+s.Numel()] }
		cg, _ := cosine(seg(gg), seg(gb))
		cc, _ := cosine(seg(gc), seg(gcb))
		t.Logf("%-28s fp8 against bf16: gpu cos %.5f, cpu cos %.5f", s.Name, cg, cc)
		if 1-cg > 2*(1-cc)+0.005 || math.IsNaN(cg) {
			t.Errorf("%s: the gpu's fp8 gradient at cosine %.4f to its bf16 gradient, the cpu reference's at %.4f", s.Name, cg, cc)
		}
	}
	// The LM head's product in FP8 too (amp.FP8Recipe.Head): the loss
	// against the reference's with the same recipe.
	r := amp.DefaultFP8Recipe()
	r.Head = true
	lgh, ggh, mgh := fp8StepsOn(t, dev, cfg, amp.FP8, 3, B, T, r)
	lch, gch, mch := fp8StepsOn(t, ref, cfg, amp.FP8, 3, B, T, r)
	t.Logf("loss with the head in fp8: gpu %.6f, cpu %.6f", lgh, lch)
	if d := math.Abs(float64(lgh-lch)) / float64(lch); d > 0.005 || lgh == lg {
		t.Errorf("gpu fp8 head loss %.6f, cpu reference %.6f (%.3f%% apart), without the head %.6f", lgh, lch, 100*d, lg)
	}
	// Its gradients (the head's dx from the e5m2 logits' gradient,
	// CrossEntropyFP8 and the FP8 GEMM with K = V, and its dW from that
	// gradient's transpose, the default HeadDWEnv) against the reference's
	// with the head, with the bounds above; the head's three scales
	// within 5% of the reference's and the logits' gradient's pending
	// amax within 0.1% (the GPU's exp is ex2.approx).
	gradientsAlike(t, mgh, ggh, gch, 0.98, 0.2, "gpu fp8 head gradient", "the cpu reference's with the head")
	sgh := fp8ScalesOf(t, mgh)
	sch := fp8ScalesOf(t, mch)
	for i := range f8Head {
		k := FP8Record(cfg.Layers*f8PerLayer + i)
		g, c := sgh.Scale(k), sch.Scale(k)
		if math.Abs(float64(g-c)) > 0.05*float64(c) || sgh.Bad(k) != 0 || c == 1 {
			t.Errorf("head tensor %d: gpu scale %g (%d bad), cpu %g", i, g, sgh.Bad(k), c)
		}
	}
	dy := FP8Record(cfg.Layers*f8PerLayer + f8HeadDy)
	if g, c := sgh.Amax(dy), sch.Amax(dy); !(c > 0) || math.Abs(float64(g-c)) > 1e-3*float64(c) {
		t.Errorf("the logits' gradient's pending amax: gpu %g, cpu %g", g, c)
	}
	// Underflows under a margin that flushes some values (as in
	// TestFP8Underflows): the GPU's count near the reference's (the two
	// differ by the codes their fp32 sums round apart).
	r = amp.DefaultFP8Recipe()
	r.Margin = 12
	_, _, mgu := fp8StepsOn(t, dev, cfg, amp.FP8, 3, B, T, r)
	_, _, mcu := fp8StepsOn(t, ref, cfg, amp.FP8, 3, B, T, r)
	ug, nv, err := mgu.FP8Underflows(1)
	if err != nil {
		t.Fatal(err)
	}
	uc, _, err := mcu.FP8Underflows(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("underflows at margin 12: gpu %d, cpu %d of %d values cast", ug, uc, nv)
	if uc == 0 || math.Abs(float64(ug-uc)) > 0.02*float64(uc)+16 {
		t.Errorf("underflows at margin 12: gpu %d, cpu reference %d (of %d values)", ug, uc, nv)
	}
	sg := fp8ScalesOf(t, mg)
	sc := fp8ScalesOf(t, mc)
	for t8 := range cfg.Layers * f8PerLayer {
		k := FP8Record(t8)
		g, c := sg.Scale(k), sc.Scale(k)
		if math.Abs(float64(g-c)) > 0.05*float64(c) || sg.Bad(k) != 0 || !(sg.Inv(k)*g > 0.999 && sg.Inv(k)*g < 1.001) {
			t.Errorf("tensor %d: gpu scale %g (inv %g, %d bad), cpu %g", k, g, sg.Inv(k), sg.Bad(k), c)
		}
	}
}

// TestGPUFP8LayerNormBackwardCast: on the GPU, the FP8 step with the
// layernorm backwards casting the residual gradient
// (LayerNormBackwardCastFP8, kernels/fp8.cu's layernorm_backward_cast_e5m2)
// against the same step running LayerNormBackward and
// CastTransposeDBiasFP8 one after the other (fp8SplitLNCast). One step:
// the forward and its scales are the same, so the loss is the same bits;
// the gradients differ only by the fused kernel's sums of dweight, dbias
// and the next bias gradient in other fixed orders (and the E5M2 codes
// those roundings flip now and then): every parameter at cosine ≥ 0.9999
// within 1% of its norm; and the amaxes the casts recorded within a
// relative 1e-3 (a flipped code moves the gradients after it a little).
// Needs sm_90.
func TestGPUFP8LayerNormBackwardCast(t *testing.T) {
	dev := fp8Dev(t)
	cfg := Config{Vocab: 512, MaxSeq: 128, Layers: 2, Heads: 4, Channels: 128}
	const B, T = 4, 128
	fused := runLNCastSteps(t, dev, cfg, false, 1, B, T)
	split := runLNCastSteps(t, dev, cfg, true, 1, B, T)
	if math.Float32bits(fused.losses[0]) != math.Float32bits(split.losses[0]) {
		t.Errorf("loss %.7f, split %.7f: the forward differs", fused.losses[0], split.losses[0])
	}
	gradientsAlike(t, fused.m, fused.grads, split.grads, 0.9999, 0.01, "fused gradient", "the split step's")
	// the amaxes the step's casts added (no update has taken them yet)
	for t8 := range fp8Tensors(cfg.Layers) {
		i := 2 * FP8Record(t8)
		a, b := float64(fused.st[i]), float64(split.st[i])
		if math.Abs(a-b) > 1e-3*math.Abs(b) || a != a || b != b {
			t.Errorf("tensor %d: amax %g, split %g", t8, a, b)
		}
	}
}

// TestGPUFP8CurrentScaling: the FP8 step under current scaling
// (amp.FP8Recipe.Current, with the LM head in FP8) on the GPU against the
// CPU reference of the same step: after two steps the loss within 0.5%,
// every parameter's gradient within TestGPUFP8Step's bounds, and every
// tensor's scale within 5% of the reference's (each the scale of its
// tensor's own amax: the amaxes differ only by the order of fp32 sums).
// Needs sm_90.
func TestGPUFP8CurrentScaling(t *testing.T) {
	dev := fp8Dev(t)
	cfg := Config{Vocab: 512, MaxSeq: 128, Layers: 2, Heads: 4, Channels: 128}
	const B, T = 4, 128
	r := amp.FP8Recipe{Current: true, Head: true}
	lg, gg, mg := fp8StepsOn(t, dev, cfg, amp.FP8, 2, B, T, r)
	lc, gc, mc := fp8StepsOn(t, cpu.New(device.Options{Fused: true}), cfg, amp.FP8, 2, B, T, r)
	t.Logf("loss under current scaling: gpu %.6f, cpu %.6f", lg, lc)
	if d := math.Abs(float64(lg-lc)) / float64(lc); d > 0.005 {
		t.Errorf("gpu loss %.6f, cpu reference %.6f: %.3f%% apart", lg, lc, 100*d)
	}
	gradientsAlike(t, mg, gg, gc, 0.98, 0.2, "gpu fp8 gradient", "the cpu reference's")
	sg := fp8ScalesOf(t, mg)
	sc := fp8ScalesOf(t, mc)
	for t8 := range fp8Tensors(cfg.Layers) {
		k := FP8Record(t8)
		if g, c := sg.Scale(k), sc.Scale(k); math.Abs(float64(g-c)) > 0.05*float64(c) || sg.Bad(k) != 0 {
			t.Errorf("tensor %d: scale %g, reference %g (%d overflows)", t8, g, c, sg.Bad(k))
		}
	}
}

// fp8ScalesOf returns m's FP8 scaling state, failing t if it cannot be
// read.
func fp8ScalesOf(t *testing.T, m *Model) *amp.FP8Scales {
	t.Helper()
	s, err := m.FP8Scales()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
