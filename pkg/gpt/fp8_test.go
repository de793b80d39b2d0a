package gpt

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
)

// fp8Cfg is small enough for the CPU's reference FP8 GEMMs, with
// channels and B·T multiples of 16.
var fp8Cfg = Config{Vocab: 96, MaxSeq: 32, Layers: 2, Heads: 2, Channels: 32}

// cosine returns a·b/(|a||b|) and |a-b|/|b|.
func cosine(a, b []float32) (cos, rel float64) {
	var ab, aa, bb, dd float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		ab += x * y
		aa += x * x
		bb += y * y
		dd += (x - y) * (x - y)
	}
	return ab / math.Sqrt(aa*bb), math.Sqrt(dd / bb)
}

// gradientsAlike fails t unless every parameter's gradient in g points
// ref's way (cosine ≥ minCos) and differs from it by at most maxRel of
// its norm; the messages name g by what and ref by of.
func gradientsAlike(t *testing.T, m *Model, g, ref []float32, minCos, maxRel float64, what, of string) {
	t.Helper()
	for _, s := range m.layout.Segments {
		cos, rel := cosine(g[s.Offset:s.Offset+s.Numel()], ref[s.Offset:s.Offset+s.Numel()])
		t.Logf("%-28s cos %.5f rel %.4f", s.Name, cos, rel)
		if cos < minCos || rel > maxRel || math.IsNaN(cos) {
			t.Errorf("%s: %s cos %.4f, rel %.3f against %s", s.Name, what, cos, rel, of)
		}
	}
}

// fp8Steps runs steps Gradients calls on one batch (the scales settle
// from the first's amaxes) under policy p and returns the last loss and
// gradients, with the model.
func fp8Steps(t *testing.T, p amp.Policy, steps, B, T int) (float32, []float32, *Model) {
	t.Helper()
	return fp8StepsOn(t, cpu.New(device.Options{Fused: true, Threads: 2}), fp8Cfg, p, steps, B, T)
}

func fp8StepsOn(t *testing.T, dev device.Device, cfg Config, p amp.Policy, steps, B, T int, recipe ...amp.FP8Recipe) (float32, []float32, *Model) {
	t.Helper()
	m, err := New(dev, cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	for _, r := range recipe {
		if err := m.SetFP8Recipe(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Init(7); err != nil {
		t.Fatal(err)
	}
	in, tg := microTokens(B*T, cfg.Vocab, 3), microTokens(B*T, cfg.Vocab, 5)
	var loss float32
	for range steps {
		m.ZeroGrad()
		if loss, err = m.Gradients(in, tg, B, T, 1); err != nil {
			t.Fatal(err)
		}
	}
	g, err := m.GradValues()
	if err != nil {
		t.Fatal(err)
	}
	return loss, g, m
}

// TestFP8StepTracksBF16: on the CPU reference, the FP8 step's loss is the
// bf16 step's within 1% and, once the scales have settled (third step),
// every block weight's gradient points the bf16 gradient's way (cosine ≥
// 0.99) within 15% of its norm; the biases, layernorms and embeddings,
// whose gradients FP8 reaches only through dx, the same. The scaling state
// holds finite positive scales, no overflow, and amaxes in every history.
func TestFP8StepTracksBF16(t *testing.T) {
	const B, T = 2, 32
	lb, gb, _ := fp8Steps(t, amp.BF16, 1, B, T)
	if l1, _, _ := fp8Steps(t, amp.FP8, 1, B, T); math.Abs(float64(l1-lb)) > 0.01*float64(lb) {
		t.Errorf("first fp8 step: loss %.5f, bf16 %.5f (the weights cast before it?)", l1, lb)
	}
	l8, g8, m := fp8Steps(t, amp.FP8, 3, B, T)
	if d := math.Abs(float64(l8-lb)) / float64(lb); d > 0.01 {
		t.Errorf("fp8 loss %.5f, bf16 %.5f: %.2f%% apart", l8, lb, 100*d)
	}
	gradientsAlike(t, m, g8, gb, 0.99, 0.15, "fp8 gradient", "bf16's")
	sc, err := m.FP8Scales()
	if err != nil || sc == nil {
		t.Fatalf("FP8Scales: %v, %v", sc, err)
	}
	if sc.K != fp8Tensors(fp8Cfg.Layers)*f8Stride {
		t.Fatalf("K %d, want %d", sc.K, fp8Tensors(fp8Cfg.Layers)*f8Stride)
	}
	for t8 := range fp8Cfg.Layers * f8PerLayer {
		k := FP8Record(t8)
		s := sc.Scale(k)
		if !(s > 0) || math.IsInf(float64(s), 0) || sc.Bad(k) != 0 {
			t.Errorf("tensor %d: scale %g, %d bad amaxes", k, s, sc.Bad(k))
		}
		if s == 1 {
			t.Errorf("tensor %d: scale still 1 after 3 steps (no amax reached it)", k)
		}
	}
}

// newFP8Model returns fp8Cfg's model under amp.FP8 on the CPU reference,
// initialised with seed 1 and closed when the test ends.
func newFP8Model(t *testing.T) *Model {
	t.Helper()
	m, err := New(cpu.New(device.Options{Fused: true, Threads: 2}), fp8Cfg, amp.FP8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	if err := m.Init(1); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFP8Refusals: what the FP8 step does not run is refused by Gradients
// with the reason: B·T not a multiple of 16, recomputation; evaluation
// at any size still runs (it reads the bf16 weights).
func TestFP8Refusals(t *testing.T) {
	m := newFP8Model(t)
	in := microTokens(3*5, fp8Cfg.Vocab, 1)
	if _, err := m.Gradients(in, in, 3, 5, 1); err == nil || !strings.Contains(err.Error(), "multiples of 16") {
		t.Errorf("B·T 15: %v", err)
	}
	if _, err := m.Forward(in, in, 3, 5); err != nil {
		t.Errorf("evaluation at B·T 15: %v", err)
	}
	if err := m.SetRecompute(RecomputeLayer); err != nil {
		t.Fatal(err)
	}
	in = microTokens(32, fp8Cfg.Vocab, 1)
	if _, err := m.Gradients(in, in, 1, 32, 1); err == nil || !strings.Contains(err.Error(), "recompute") {
		t.Errorf("recompute layer: %v", err)
	}
	if err := m.SetFP8Recipe(amp.FP8Recipe{History: -1}); err == nil {
		t.Error("a negative history was accepted")
	}
	b, _ := New(cpu.New(device.Options{Fused: true, Threads: 2}), fp8Cfg, amp.BF16)
	defer b.Close()
	if err := b.SetFP8Recipe(amp.DefaultFP8Recipe()); err == nil {
		t.Error("an FP8 recipe for a bf16 model was accepted")
	}
}

// TestSetFP8RecipeDropsPendingRestore: a recipe set after SetFP8Scales
// (before the state exists) replaces the pending restore, which belonged
// to the old recipe: the first step builds the state of the new one.
func TestSetFP8RecipeDropsPendingRestore(t *testing.T) {
	m := newFP8Model(t)
	old, err := amp.NewFP8Scales(fp8Formats(fp8Cfg.Layers), amp.DefaultFP8Recipe())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetFP8Scales(old); err != nil {
		t.Fatal(err)
	}
	r := amp.DefaultFP8Recipe()
	r.History = 16
	if err := m.SetFP8Recipe(r); err != nil {
		t.Fatal(err)
	}
	in := microTokens(32, fp8Cfg.Vocab, 1)
	if _, err := m.Gradients(in, in, 1, 32, 1); err != nil {
		t.Fatal(err)
	}
	s, err := m.FP8Scales()
	if err != nil || s == nil {
		t.Fatalf("FP8Scales: %v, %v", s, err)
	}
	if s.H != 16 {
		t.Errorf("the state has history %d after SetFP8Recipe(history 16) (the old recipe's restore applied)", s.H)
	}
}

// TestFP8HeadTracksBF16: with amp.FP8Recipe.Head (the logits from e4m3
// copies of ln_f's output and wte, the head's dx and, by default, its dW
// from the e5m2 logits' gradient) the step on the CPU reference keeps
// TestFP8StepTracksBF16's bounds against bf16 (loss within 1%, every
// gradient at cosine ≥ 0.99 within 15% of its norm), differs from the
// recipe without it (the head's product really ran in FP8), and moves the
// head's two scales off 1.
func TestFP8HeadTracksBF16(t *testing.T) {
	const B, T = 2, 32
	dev := func() device.Device { return cpu.New(device.Options{Fused: true, Threads: 2}) }
	r := amp.DefaultFP8Recipe()
	r.Head = true
	lb, gb, _ := fp8StepsOn(t, dev(), fp8Cfg, amp.BF16, 3, B, T)
	l8, _, _ := fp8StepsOn(t, dev(), fp8Cfg, amp.FP8, 3, B, T)
	lh, gh, m := fp8StepsOn(t, dev(), fp8Cfg, amp.FP8, 3, B, T, r)
	t.Logf("loss: bf16 %.6f, fp8 %.6f, fp8 with the head %.6f", lb, l8, lh)
	if d := math.Abs(float64(lh-lb)) / float64(lb); d > 0.01 {
		t.Errorf("fp8 head loss %.5f, bf16 %.5f: %.2f%% apart", lh, lb, 100*d)
	}
	if lh == l8 {
		t.Errorf("the loss with the head in fp8 is the loss without it (%.6f): the head's product did not run in FP8", lh)
	}
	gradientsAlike(t, m, gh, gb, 0.99, 0.15, "fp8 head gradient", "bf16's")
	sc, err := m.FP8Scales()
	if err != nil {
		t.Fatal(err)
	}
	k := fp8Cfg.Layers * f8PerLayer
	for _, i := range []int{f8HeadX, f8HeadW, f8HeadDy} {
		if s := sc.Scale(FP8Record(k + i)); s == 1 || !(s > 0) || math.IsInf(float64(s), 0) || sc.Bad(FP8Record(k+i)) != 0 {
			t.Errorf("head tensor %d: scale %g, %d bad amaxes after three steps", i, s, sc.Bad(FP8Record(k+i)))
		}
	}
	// The logits' gradient was cast by the classifier (its amax is
	// pending: the steps' last update came before the last Gradients),
	// at most dscale = 1/(B·T), and almost nothing of it flushed.
	dy := FP8Record(k + f8HeadDy)
	if a := sc.Amax(dy); !(a > 0) || a > 1/float32(B*T) {
		t.Errorf("the logits' gradient's pending amax %g, want in (0, %g]", a, 1/float32(B*T))
	}
	if u, v := int64(sc.PendingUnder(dy)), m.fp8Values(k+f8HeadDy, 1); v != B*T*int64(fp8Cfg.Vocab) || float64(u) > 0.001*float64(v) {
		t.Errorf("the logits' gradient: %d underflows of %d values", u, v)
	}
}

// headCfg has a vocabulary wide enough that most of the logits' gradient
// (p·dscale, p about 1/V, dscale 1/(B·T)) lies below e5m2's smallest
// subnormal at the scale 1.
var headCfg = Config{Vocab: 4096, MaxSeq: 32, Layers: 1, Heads: 2, Channels: 32}

// TestFP8HeadFirstScale: the first step's cast of the logits' gradient
// uses the seeded scale (seedHeadDy: the bound 1/(B·T)), so that it
// flushes almost nothing; a restored state whose record has a history (no
// seed) at the scale 1 flushes most of it in the same step, which is what
// the seed avoids. Both keep the step's loss finite.
func TestFP8HeadFirstScale(t *testing.T) {
	const B, T = 2, 32
	r := amp.DefaultFP8Recipe()
	r.Head = true
	share := func(restore bool) float64 {
		m, err := New(cpu.New(device.Options{Fused: true, Threads: 2}), headCfg, amp.FP8)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if err := m.SetFP8Recipe(r); err != nil {
			t.Fatal(err)
		}
		if err := m.Init(3); err != nil {
			t.Fatal(err)
		}
		k := FP8Record(headCfg.Layers*f8PerLayer + f8HeadDy)
		if restore {
			s, err := amp.NewFP8Scales(fp8Formats(headCfg.Layers), r)
			if err != nil {
				t.Fatal(err)
			}
			s.Meta[k*amp.FP8MetaLen+amp.FP8MetaFilled], s.Meta[k*amp.FP8MetaLen+amp.FP8MetaNext] = 1, 1 // an amax of 0 recorded
			if err := m.SetFP8Scales(s); err != nil {
				t.Fatal(err)
			}
		}
		in, tg := microTokens(B*T, headCfg.Vocab, 3), microTokens(B*T, headCfg.Vocab, 5)
		m.ZeroGrad()
		loss, err := m.Gradients(in, tg, B, T, 1)
		if err != nil || math.IsNaN(float64(loss)) {
			t.Fatalf("restore %v: loss %v, %v", restore, loss, err)
		}
		sc, err := m.FP8Scales()
		if err != nil {
			t.Fatal(err)
		}
		want := float32(1)
		if !restore {
			want, _ = amp.FP8ScaleFor(tensor.E5M2, 1/float32(B*T), r.Margin, 1)
		}
		if s := sc.Scale(k); s != want {
			t.Errorf("restore %v: the first scale of the logits' gradient is %g, want %g", restore, s, want)
		}
		u, v := sc.PendingUnder(k), m.fp8Values(headCfg.Layers*f8PerLayer+f8HeadDy, 1)
		t.Logf("restore %v: %d of %d values of the logits' gradient flushed", restore, u, v)
		return float64(u) / float64(v)
	}
	if s := share(false); s > 0.001 {
		t.Errorf("the seeded first step flushed %.3g of the logits' gradient", s)
	}
	if s := share(true); s < 0.5 {
		t.Errorf("at the scale 1 the first step flushed only %.3g of the logits' gradient (the seed's case is not tested)", s)
	}
}

// TestFP8ScalesBeforeHeadDy: a scaling state saved before the logits'
// gradient had a record (f8HeadOld head records) is restored with that
// record added fresh, every other record kept (scales, histories,
// counters); the step then runs with the head in FP8 and the new record
// seeded. A state of any other size is refused.
func TestFP8ScalesBeforeHeadDy(t *testing.T) {
	const B, T = 2, 32
	r := amp.DefaultFP8Recipe()
	r.Head = true
	L := fp8Cfg.Layers
	old, err := amp.NewFP8Scales(fp8FormatsOf(L, f8HeadOld), r)
	if err != nil {
		t.Fatal(err)
	}
	for k := range old.K {
		old.SetPending(k, float32(k+1), 0)
	}
	old.Update()
	m := newFP8Model(t)
	if err := m.SetFP8Recipe(r); err != nil {
		t.Fatal(err)
	}
	bad := *old
	bad.K, bad.St, bad.Meta = old.K-f8Stride, old.St[:amp.FP8StLen(old.K-f8Stride, old.H)], old.Meta[:(old.K-f8Stride)*amp.FP8MetaLen]
	if err := m.SetFP8Scales(&bad); err == nil {
		t.Error("a state of one tensor too few was accepted")
	}
	if err := m.SetFP8Scales(old); err != nil {
		t.Fatal(err)
	}
	c := m.fp8Restore
	if c == nil || c.K != fp8Tensors(L)*f8Stride {
		t.Fatalf("the pending restore: %+v", c)
	}
	for k := range old.K {
		if c.Scale(k) != old.Scale(k) || c.Inv(k) != old.Inv(k) || c.Amax(k) != old.Amax(k) {
			t.Fatalf("record %d: scale %g inv %g amax %g, saved %g %g %g", k, c.Scale(k), c.Inv(k), c.Amax(k), old.Scale(k), old.Inv(k), old.Amax(k))
		}
		for i := range old.H {
			if c.St[4*c.K+k*c.H+i] != old.St[4*old.K+k*old.H+i] {
				t.Fatalf("record %d: history %d differs", k, i)
			}
		}
		for f := range amp.FP8MetaLen {
			if c.Meta[k*amp.FP8MetaLen+f] != old.Meta[k*amp.FP8MetaLen+f] {
				t.Fatalf("record %d: meta %d differs", k, f)
			}
		}
	}
	if err := c.Check(fp8Formats(L)); err != nil {
		t.Fatal(err)
	}
	in, tg := microTokens(B*T, fp8Cfg.Vocab, 3), microTokens(B*T, fp8Cfg.Vocab, 5)
	m.ZeroGrad()
	if _, err := m.Gradients(in, tg, B, T, 1); err != nil {
		t.Fatal(err)
	}
	s, err := m.FP8Scales()
	if err != nil {
		t.Fatal(err)
	}
	dy := FP8Record(L*f8PerLayer + f8HeadDy)
	if want, _ := amp.FP8ScaleFor(tensor.E5M2, 1/float32(B*T), r.Margin, 1); s.Scale(dy) != want || !(s.Amax(dy) > 0) {
		t.Errorf("the added record: scale %g (want the seed %g), pending amax %g", s.Scale(dy), want, s.Amax(dy))
	}
}

// TestFP8Underflows: FP8Underflows sums the underflows the last step's
// casts counted and says how many values they cast (16·N·C + 12·C² a
// block); with the default recipe almost nothing flushes, and with a
// margin of 12 (the scales 4096 times smaller) a share of the layernorm
// outputs does, though not most values; with a margin of 64 each
// tensor's count matches its values (fp8Values) whole.
func TestFP8Underflows(t *testing.T) {
	const B, T = 2, 32
	share := map[int]float64{}
	for _, margin := range []int{0, 12} {
		rc := amp.DefaultFP8Recipe()
		rc.Margin = margin
		_, _, m := fp8StepsOn(t, cpu.New(device.Options{Fused: true, Threads: 2}), fp8Cfg, amp.FP8, 3, B, T, rc)
		under, values, err := m.FP8Underflows(1)
		if err != nil {
			t.Fatal(err)
		}
		N, C, L := int64(B*T), int64(fp8Cfg.Channels), int64(fp8Cfg.Layers)
		if want := L * (16*N*C + 12*C*C); values != want {
			t.Errorf("margin %d: %d values cast, want %d", margin, values, want)
		}
		share[margin] = float64(under) / float64(values)
		t.Logf("margin %d: %d underflows of %d values (%.3g%%)", margin, under, values, 100*share[margin])
	}
	if share[0] > 0.001 || share[12] <= 0.001 || share[12] > 0.5 || share[12] <= share[0] {
		t.Errorf("underflow shares %.3g (margin 0) and %.3g (margin 12)", share[0], share[12])
	}
	// Under a margin of 64 every nonzero value of the second step is too
	// small for its scale (set from the first step's amax), so each
	// tensor's count is all of its values, or none where the flushed
	// products left it exactly zero (the attention's output and the
	// gradients behind flushed weights): a tensor whose count of values
	// in FP8Underflows is not what its casts took shows here. With the
	// head in FP8 too: its three tensors flush whole, and as the logits'
	// gradient flushes whole every gradient behind it is exactly zero, so
	// no block's dy counts (without the head, the attention projection's
	// and the MLP projection's do).
	for _, head := range []bool{false, true} {
		rc := amp.DefaultFP8Recipe()
		rc.Margin, rc.Head = 64, head
		_, _, m := fp8StepsOn(t, cpu.New(device.Options{Fused: true, Threads: 2}), fp8Cfg, amp.FP8, 2, B, T, rc)
		s, err := m.FP8Scales()
		if err != nil {
			t.Fatal(err)
		}
		full := 0
		for k := range fp8Tensors(fp8Cfg.Layers) {
			u, v := int64(s.PendingUnder(FP8Record(k))), m.fp8Values(k, 1)
			if u == v && v > 0 {
				full++
			} else if u != 0 {
				t.Errorf("margin 64, head %v: tensor %d: %d underflows, %d values cast", head, k, u, v)
			}
		}
		if want := fp8Cfg.Layers * 8; head && full != want-2*fp8Cfg.Layers+3 || !head && full != want {
			t.Errorf("margin 64, head %v: %d tensors flushed whole", head, full)
		}
		// The logits' gradient is counted apart from the rest.
		lu, lv, err := m.FP8LogitGradUnderflows(1)
		if err != nil {
			t.Fatal(err)
		}
		u, v, err := m.FP8Underflows(1)
		if err != nil {
			t.Fatal(err)
		}
		dy := FP8Record(fp8Cfg.Layers*f8PerLayer + f8HeadDy)
		if wv := int64(B * T * fp8Cfg.Vocab); head && (lv != wv || lu != wv) || !head && (lv != 0 || lu != 0) {
			t.Errorf("margin 64, head %v: the logits' gradient: %d underflows of %d values, want all of %d (none without the head)", head, lu, lv, wv)
		}
		var all int64
		for k := range fp8Tensors(fp8Cfg.Layers) {
			all += int64(s.PendingUnder(FP8Record(k)))
		}
		if u+lu != all || u+lu > 0 && int64(s.PendingUnder(dy)) != lu || v <= 0 {
			t.Errorf("margin 64, head %v: %d + %d underflows (the rest, the logits' gradient) of %d in all; %d values", head, u, lu, all, v)
		}
	}
}

// lnCastCounter is the CPU reference counting the FP8 backward's casts of
// output gradients: the fused layernorm backward and the plain cast.
type lnCastCounter struct {
	*cpu.Device
	fused, casts int
}

func (c *lnCastCounter) LayerNormBackwardCastFP8(dinp, dweight, dbias, q, qt, amax, dbiasNext, dout, inp, weight, mean, rstd, scale *device.T, N, C int) {
	c.fused++
	c.Device.LayerNormBackwardCastFP8(dinp, dweight, dbias, q, qt, amax, dbiasNext, dout, inp, weight, mean, rstd, scale, N, C)
}

func (c *lnCastCounter) CastTransposeDBiasFP8(q, qt, amax, dbias, dy, scale *device.T, N, C int) {
	c.casts++
	c.Device.CastTransposeDBiasFP8(q, qt, amax, dbias, dy, scale, N, C)
}

// TestFP8LayerNormBackwardCast: the FP8 backward casts the residual
// gradient for the attention and MLP projections in the layernorm
// backwards that update it (LayerNormBackwardCastFP8: ln_f's, every ln_2's
// and the ln_1's of blocks 1.., 2L a step; the one plain cast left is the
// qkv layer's, L a step), and on the CPU reference, whose fused op is the
// two ops it replaces, three steps give the losses, gradients and scaling
// state of the step that runs LayerNormBackward and CastTransposeDBiasFP8
// one after the other (fp8SplitLNCast) bit for bit: the same FP8 tensors,
// scales and bias gradients.
func TestFP8LayerNormBackwardCast(t *testing.T) {
	const B, T, steps = 2, 32, 3
	L := fp8Cfg.Layers
	run := func(split bool) lnCastSteps {
		dev := &lnCastCounter{Device: cpu.New(device.Options{Fused: true, Threads: 2})}
		r := runLNCastSteps(t, dev, fp8Cfg, split, steps, B, T)
		r.fused, r.ct = dev.fused, dev.casts
		return r
	}
	fused, split := run(false), run(true)
	if fused.fused != steps*2*L || fused.ct != steps*L {
		t.Errorf("fused: %d LayerNormBackwardCastFP8 and %d CastTransposeDBiasFP8 in %d steps, want %d and %d", fused.fused, fused.ct, steps, steps*2*L, steps*L)
	}
	if split.fused != 0 || split.ct != steps*3*L {
		t.Errorf("split: %d LayerNormBackwardCastFP8 and %d CastTransposeDBiasFP8 in %d steps, want 0 and %d", split.fused, split.ct, steps, steps*3*L)
	}
	for i := range fused.losses {
		if math.Float32bits(fused.losses[i]) != math.Float32bits(split.losses[i]) {
			t.Errorf("step %d: loss %.7f, split %.7f", i, fused.losses[i], split.losses[i])
		}
	}
	same := func(what string, a, b []float32) {
		if len(a) != len(b) {
			t.Fatalf("%s: %d values, split %d", what, len(a), len(b))
		}
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				t.Errorf("%s[%d] %g, split %g (and maybe more)", what, i, a[i], b[i])
				return
			}
		}
	}
	same("gradient", fused.grads, split.grads)
	same("scaling state", fused.st, split.st)
	for i := range fused.meta {
		if fused.meta[i] != split.meta[i] {
			t.Errorf("scaling meta[%d] %d, split %d", i, fused.meta[i], split.meta[i])
			break
		}
	}
}

// lnCastSteps is what runLNCastSteps returns: each step's loss, the last
// gradients and scaling state, and (filled by the caller) op counts.
type lnCastSteps struct {
	losses    []float32
	grads     []float32
	st        []float32
	meta      []int32
	m         *Model
	fused, ct int
}

// runLNCastSteps runs steps FP8 Gradients calls of cfg's model (seed 7) on
// dev, with the layernorm backward and the cast fused or split
// (fp8SplitLNCast); the model is closed when the test ends.
func runLNCastSteps(t *testing.T, dev device.Device, cfg Config, split bool, steps, B, T int) lnCastSteps {
	t.Helper()
	m, err := New(dev, cfg, amp.FP8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	m.fp8SplitLNCast = split
	if err := m.Init(7); err != nil {
		t.Fatal(err)
	}
	in, tg := microTokens(B*T, cfg.Vocab, 3), microTokens(B*T, cfg.Vocab, 5)
	r := lnCastSteps{m: m}
	for range steps {
		m.ZeroGrad()
		loss, err := m.Gradients(in, tg, B, T, 1)
		if err != nil {
			t.Fatal(err)
		}
		r.losses = append(r.losses, loss)
	}
	if r.grads, err = m.GradValues(); err != nil {
		t.Fatal(err)
	}
	sc, err := m.FP8Scales()
	if err != nil || sc == nil {
		t.Fatalf("FP8Scales: %v, %v", sc, err)
	}
	r.st, r.meta = sc.St, sc.Meta
	return r
}

// TestFP8HeadDW: under amp.FP8Recipe.Head the LM head's weight gradient
// runs by default (HeadDWEnv unset, or fp8) as the FP8 GEMM of the
// transpose of the classifier's e5m2 gradient and ln_f's transposed e4m3
// copy (headDWFP8): against the step with HeadDWEnv=bf16 (the bf16
// product of the bf16 gradient) the loss is the same, the gradients
// differ (wte's: the fp8 dW ran) and keep the bounds TestFP8HeadTracksBF16
// keeps against bf16, in one head chunk and in four (HeadRowsEnv: each
// chunk's block of ln_f's transpose); unset and fp8 give the same step,
// bit for bit. The classifier writes the bf16 gradient over the logits
// (storeGrad) only for the bf16 dW, its one reader: every chunk's
// CrossEntropyFP8 asks for it with bf16 and for none with the fp8 dW,
// whose transpose is one TransposeFP8 a chunk.
func TestFP8HeadDW(t *testing.T) {
	const B, T = 2, 32
	dev := func() *ceStores { return &ceStores{Device: cpu.New(device.Options{Fused: true, Threads: 2})} }
	r := amp.DefaultFP8Recipe()
	r.Head = true
	for _, rows := range []string{"", "16"} {
		t.Setenv(HeadRowsEnv, rows)
		t.Setenv(HeadDWEnv, "bf16")
		db := dev()
		lb, gb, mb := fp8StepsOn(t, db, fp8Cfg, amp.FP8, 3, B, T, r)
		if mb.headDWFP8() || mb.acts.f8.dlogitsT != nil {
			t.Fatalf("rows %q: the head's dW in fp8 with %s=bf16", rows, HeadDWEnv)
		}
		t.Setenv(HeadDWEnv, "") // the default
		d8 := dev()
		l8, g8, m8 := fp8StepsOn(t, d8, fp8Cfg, amp.FP8, 3, B, T, r)
		if !m8.headDWFP8() || m8.acts.f8.dlogitsT == nil {
			t.Fatalf("rows %q: the head's dW is not in fp8 by default", rows)
		}
		t.Setenv(HeadDWEnv, "fp8")
		lf, gf, _ := fp8StepsOn(t, dev(), fp8Cfg, amp.FP8, 3, B, T, r)
		if lf != l8 || !slices.Equal(gf, g8) {
			t.Errorf("rows %q: %s=fp8 gives loss %.6f and other gradients than the default's (loss %.6f)", rows, HeadDWEnv, lf, l8)
		}
		chunks := 3 * ((B*T + m8.acts.rows - 1) / m8.acts.rows) // calls in 3 steps
		for _, c := range []struct {
			d    *ceStores
			want bool
		}{{db, true}, {d8, false}} {
			if len(c.d.stores) != chunks {
				t.Errorf("rows %q: %d calls of CrossEntropyFP8, want %d", rows, len(c.d.stores), chunks)
			}
			if want := map[bool]int{true: 0, false: chunks}[c.want]; c.d.transposes != want {
				t.Errorf("rows %q, dW in fp8 %v: %d calls of TransposeFP8, want %d", rows, !c.want, c.d.transposes, want)
			}
			for i, s := range c.d.stores {
				if s != c.want {
					t.Errorf("rows %q, dW in fp8 %v: call %d asked storeGrad %v, want %v", rows, !c.want, i, s, c.want)
					break
				}
			}
		}
		t.Logf("rows %q: loss with the head's dW in bf16 %.6f, in fp8 %.6f", rows, lb, l8)
		if l8 != lb {
			t.Errorf("rows %q: loss %.6f with the head's dW in fp8, %.6f in bf16: the forward changed", rows, l8, lb)
		}
		same := true
		for i := range g8 {
			same = same && g8[i] == gb[i]
		}
		if same {
			t.Errorf("rows %q: the gradients with the head's dW in fp8 are bf16's: the fp8 dW did not run", rows)
		}
		gradientsAlike(t, m8, g8, gb, 0.99, 0.15, "fp8 dW gradient", "bf16 dW's")
	}
}

// TestHeadDWEnv: HeadDWFromEnv takes unset, fp8 and bf16, and refuses
// any other value with an error naming the variable; with such a value
// the FP8 step with the head returns that error from Gradients (no
// panic, nothing run), and the step without the head ignores it.
func TestHeadDWEnv(t *testing.T) {
	for _, c := range []struct {
		v       string
		fp8, ok bool
	}{{"", true, true}, {"fp8", true, true}, {"bf16", false, true}, {"FP8", false, false}, {"on", false, false}, {"1", false, false}} {
		t.Setenv(HeadDWEnv, c.v)
		fp8, err := HeadDWFromEnv()
		if fp8 != c.fp8 || (err == nil) != c.ok {
			t.Errorf("%s=%q: fp8 %v, error %v; want fp8 %v, an error %v", HeadDWEnv, c.v, fp8, err, c.fp8, !c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), HeadDWEnv) {
			t.Errorf("%s=%q: error %q does not name the variable", HeadDWEnv, c.v, err)
		}
	}
	t.Setenv(HeadDWEnv, "on")
	const B, T = 2, 32
	for _, head := range []bool{true, false} {
		m, err := New(cpu.New(device.Options{Fused: true, Threads: 2}), fp8Cfg, amp.FP8)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		r := amp.DefaultFP8Recipe()
		r.Head = head
		if err := m.SetFP8Recipe(r); err != nil {
			t.Fatal(err)
		}
		if err := m.Init(7); err != nil {
			t.Fatal(err)
		}
		m.ZeroGrad()
		_, err = m.Gradients(microTokens(B*T, fp8Cfg.Vocab, 3), microTokens(B*T, fp8Cfg.Vocab, 5), B, T, 1)
		switch {
		case head && (err == nil || !strings.Contains(err.Error(), HeadDWEnv)):
			t.Errorf("the fp8 head with %s=on: Gradients gave %v, want the variable's error", HeadDWEnv, err)
		case !head && err != nil:
			t.Errorf("fp8 without the head, %s=on: Gradients: %v", HeadDWEnv, err)
		}
	}
}

// ceStores is the CPU device with CrossEntropyFP8's storeGrad recorded,
// call by call, and TransposeFP8's calls counted.
type ceStores struct {
	*cpu.Device
	stores     []bool
	transposes int
}

func (d *ceStores) CrossEntropyFP8(losses, logits, q, amax, targets, scale, state *tensor.Tensor, N, V int, dscale float32, storeGrad bool) {
	d.stores = append(d.stores, storeGrad)
	d.Device.CrossEntropyFP8(losses, logits, q, amax, targets, scale, state, N, V, dscale, storeGrad)
}

func (d *ceStores) TransposeFP8(out, in *tensor.Tensor, N, C int) {
	d.transposes++
	d.Device.TransposeFP8(out, in, N, C)
}

// TestFP8WeightsFromOptimizer: where the optimizer writes the weights' FP8
// copies (FP8Weights, then AdamWStateFP8), training gives the same bits as
// where each step begins by casting them: the same loss at every step, the
// same parameters after, and, once each model has begun its next step,
// the same scales; a step whose gradients were not finite (the optimizer
// updates nothing but still casts, the weights' scales having moved)
// included, with and without the FP8 head.
func TestFP8WeightsFromOptimizer(t *testing.T) {
	const B, T, steps = 2, 32, 5
	for _, head := range []bool{false, true} {
		r := amp.DefaultFP8Recipe()
		r.Head = head
		in, tg := microTokens(B*T, fp8Cfg.Vocab, 3), microTokens(B*T, fp8Cfg.Vocab, 5)
		type run struct {
			m      *Model
			dev    *cpu.Device
			mo, vo *tensor.Tensor
		}
		var runs [2]run
		for i := range runs {
			d := cpu.New(device.Options{Fused: true, Threads: 2})
			m, err := New(d, fp8Cfg, amp.FP8)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(m.Close)
			if err := m.SetFP8Recipe(r); err != nil {
				t.Fatal(err)
			}
			if err := m.Init(7); err != nil {
				t.Fatal(err)
			}
			n := m.layout.Total
			runs[i] = run{m, d, tensor.New(tensor.F32, n), tensor.New(tensor.F32, n)}
		}
		hp := device.AdamW{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1}
		for s := 1; s <= steps; s++ {
			hp.Step = s
			c := hp.Consts()
			st := make([]float32, device.StateLen)
			st[device.SlotGradScale], st[device.SlotDecay], st[device.SlotStep], st[device.SlotBC2] = 1, c.Decay, c.Step, c.BC2
			st[device.SlotDoDecay], st[device.SlotFinite] = 1, 1
			if s == 3 {
				st[device.SlotFinite] = 0 // a skipped step
			}
			state, _ := tensor.FromF32(st, len(st))
			var loss [2]float32
			for i, x := range runs {
				x.m.ZeroGrad()
				l, err := x.m.Gradients(in, tg, B, T, 1)
				if err != nil {
					t.Fatal(err)
				}
				loss[i] = l
				if i == 0 {
					x.dev.AdamWState(x.m.master, x.m.work, x.m.grads, x.mo, x.vo, x.m.layout, hp, state)
				} else {
					w := x.m.FP8Weights()
					if want := 4*fp8Cfg.Layers + map[bool]int{false: 0, true: 1}[head]; len(w) != want {
						t.Fatalf("head %v: %d FP8 weights, want %d", head, len(w), want)
					}
					x.dev.AdamWStateFP8(x.m.master, x.m.work, x.m.grads, x.mo, x.vo, x.m.layout, hp, state, w)
				}
				if err := x.dev.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			if math.Float32bits(loss[0]) != math.Float32bits(loss[1]) {
				t.Fatalf("head %v step %d: loss %v with the weights cast as the step begins, %v cast by the optimizer", head, s, loss[0], loss[1])
			}
		}
		p0, _ := runs[0].m.Params()
		p1, _ := runs[1].m.Params()
		if !slices.EqualFunc(p0, p1, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
			t.Errorf("head %v: the parameters differ after %d steps", head, steps)
		}
		var sc [2]*amp.FP8Scales
		for i, x := range runs {
			x.m.ZeroGrad() // the next step begins: every scale updated
			var err error
			if sc[i], err = x.m.FP8Scales(); err != nil {
				t.Fatal(err)
			}
		}
		K := sc[0].K
		if !slices.Equal(sc[0].St[2*K:4*K], sc[1].St[2*K:4*K]) {
			t.Errorf("head %v: the scales differ once the next step began", head)
		}
	}
}

// TestFP8CurrentScaling: under current scaling (amp.FP8Recipe.Current)
// every FP8 tensor of the first step, the weights', the activations', the
// output gradients' and the LM head's with Head, is cast with the scale of
// its own amax (each record's scale is FP8ScaleFor of the amax its last
// cast added), so that the first step's loss is bf16's within 0.5%, where
// delayed scaling's first step casts with the scale 1; the weights' copies
// are not the optimizer's (FP8Weights is nil).
func TestFP8CurrentScaling(t *testing.T) {
	const B, T = 2, 32
	lb, _, _ := fp8Steps(t, amp.BF16, 1, B, T)
	for _, head := range []bool{false, true} {
		r := amp.FP8Recipe{Current: true, Margin: 1, Head: head}
		l8, _, m := fp8StepsOn(t, cpu.New(device.Options{Fused: true, Threads: 2}), fp8Cfg, amp.FP8, 1, B, T, r)
		if d := math.Abs(float64(l8-lb)) / float64(lb); d > 0.005 {
			t.Errorf("head %v: the first step's loss %.5f, bf16 %.5f: %.2f%% apart", head, l8, lb, 100*d)
		}
		if w := m.FP8Weights(); w != nil {
			t.Errorf("head %v: FP8Weights gave %d weights under current scaling", head, len(w))
		}
		sc, err := m.FP8Scales()
		if err != nil || sc == nil || sc.H != 0 {
			t.Fatalf("head %v: FP8Scales %v, %v", head, sc, err)
		}
		formats := fp8Formats(fp8Cfg.Layers)
		n := fp8Cfg.Layers * f8PerLayer
		if head {
			n += f8Head
		}
		for t8 := range n {
			k := FP8Record(t8)
			a := sc.Amax(k)
			want, _ := amp.FP8ScaleFor(formats[k], a, r.Margin, 1)
			if !(a > 0) || sc.Scale(k) != want || sc.Inv(k) != 1/want {
				t.Errorf("head %v: tensor %d: scale %g (inv %g) for its amax %g, want %g", head, t8, sc.Scale(k), sc.Inv(k), a, want)
			}
		}
	}
}
