package train

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
)

// cpuMetrics trains o on the CPU reference for steps steps and returns the
// metrics of every step.
func cpuMetrics(t *testing.T, o Options, steps int) []Metric {
	t.Helper()
	trT, vaT := testTokens(t)
	tr, err := New(cpu.New(device.Options{Fused: true, Threads: 2}), o, trT, vaT)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	return runMetrics(t, tr, steps)
}

// TestFP8TrainingTracksBF16: on the CPU reference, training under amp.FP8
// (one batch; two micro-batches of half the size, the amaxes spanning the
// micro-steps; a 16-step history with a margin of 1; current scaling, also
// with two micro-batches and the LM head in FP8) follows bf16's loss curve: the mean loss of the last 10 of
// 60 steps and the final validation loss within 0.5% of bf16's (the same
// batches and accumulation), after it
// fell by at least a third; no step skipped and no FP8 overflow logged;
// the underflows logged, their share of the values cast under 1%.
func TestFP8TrainingTracksBF16(t *testing.T) {
	const steps = 60
	run := func(p amp.Policy, B, accum int, r amp.FP8Recipe) (last, val float32, overflows int64) {
		o := testOptions(steps, p)
		o.Batch, o.Accum, o.EvalEvery, o.EvalBatches, o.FP8 = B, accum, steps, 4, r
		ms := cpuMetrics(t, o, steps)
		var sum float32
		for _, m := range ms[steps-10:] {
			sum += m.Loss
			if m.StepSkipped {
				t.Errorf("%s: step %d skipped", p, m.Step)
			}
		}
		if ms[steps-1].Loss > 0.67*ms[0].Loss {
			t.Errorf("%s: loss %.3f at step 1, %.3f at %d: it did not learn", p, ms[0].Loss, ms[steps-1].Loss, steps)
		}
		if m := ms[steps-1]; p == amp.FP8 {
			t.Logf("fp8 B %d accum %d: %d underflows, %.3g%% of the values cast", B, accum, m.FP8Underflows, 100*m.FP8UnderflowShare)
			if m.FP8Underflows < 0 || m.FP8UnderflowShare >= 0.01 || (m.FP8Underflows > 0) != (m.FP8UnderflowShare > 0) {
				t.Errorf("fp8 B %d accum %d: %d underflows logged, share %g", B, accum, m.FP8Underflows, m.FP8UnderflowShare)
			}
		}
		return sum / 10, ms[steps-1].ValLoss, ms[steps-1].FP8Overflows
	}
	for _, c := range []struct {
		B, accum int
		r        amp.FP8Recipe
	}{{4, 0, amp.FP8Recipe{}}, {2, 2, amp.FP8Recipe{}}, {4, 0, amp.FP8Recipe{History: 16, Margin: 1}},
		{4, 0, amp.FP8Recipe{Current: true}}, {2, 2, amp.FP8Recipe{Current: true, Head: true}}} {
		lb, vb, _ := run(amp.BF16, c.B, c.accum, amp.FP8Recipe{})
		l8, v8, of := run(amp.FP8, c.B, c.accum, c.r)
		t.Logf("B %d accum %d: last-10 loss fp8 %.4f bf16 %.4f; val fp8 %.4f bf16 %.4f", c.B, c.accum, l8, lb, v8, vb)
		if math.Abs(float64(l8-lb)) > 0.005*float64(lb) || math.Abs(float64(v8-vb)) > 0.005*float64(vb) || of != 0 {
			t.Errorf("B %d accum %d: fp8 loss %.4f val %.4f (%d overflows), bf16 %.4f val %.4f", c.B, c.accum, l8, v8, of, lb, vb)
		}
	}
}

// TestFP8HeadTraining: with amp.FP8Recipe.Head (the logits and the LM
// head's dx in FP8, the classifier casting the logits' gradient) training
// on the CPU reference follows bf16's curve as TestFP8TrainingTracksBF16
// requires, in the host step and in the device-resident step (where the
// classifier reads the loss scale from the step's state), with two
// micro-batches: the last-10 loss and the validation loss within 0.5% of
// bf16's, no overflow, the underflows under 1% of the values cast.
func TestFP8HeadTraining(t *testing.T) {
	const steps = 60
	run := func(p amp.Policy, mode StepMode, r amp.FP8Recipe) (last, val float32) {
		o := testOptions(steps, p)
		o.Batch, o.Accum, o.EvalEvery, o.EvalBatches, o.FP8, o.Step = 2, 2, steps, 4, r, mode
		ms := cpuMetrics(t, o, steps)
		var sum float32
		for _, m := range ms[steps-10:] {
			sum += m.Loss
		}
		if m := ms[steps-1]; p == amp.FP8 {
			t.Logf("fp8 head, step mode %v: %d underflows, %.3g%% of the values cast", mode, m.FP8Underflows, 100*m.FP8UnderflowShare)
			if m.FP8UnderflowShare >= 0.01 || m.FP8Overflows != 0 {
				t.Errorf("fp8 head, step mode %v: %d overflows, underflow share %g", mode, m.FP8Overflows, m.FP8UnderflowShare)
			}
			// the logits' gradient's, counted apart, logged with their share
			if u, f := m.FP8LogitGradUnderflows, m.FP8LogitGradUnderflowShare; u < 0 || (u > 0) != (f > 0) || f > 1 {
				t.Errorf("fp8 head, step mode %v: the logits' gradient's underflows %d, share %g", mode, u, f)
			}
		}
		return sum / 10, ms[steps-1].ValLoss
	}
	r := amp.DefaultFP8Recipe()
	r.Head = true
	lb, vb := run(amp.BF16, StepHost, amp.FP8Recipe{})
	for _, mode := range []StepMode{StepHost, StepDevice} {
		l8, v8 := run(amp.FP8, mode, r)
		t.Logf("step mode %v: last-10 loss fp8 head %.4f bf16 %.4f; val %.4f, %.4f", mode, l8, lb, v8, vb)
		if math.Abs(float64(l8-lb)) > 0.005*float64(lb) || math.Abs(float64(v8-vb)) > 0.005*float64(vb) {
			t.Errorf("step mode %v: fp8 head loss %.4f val %.4f, bf16 %.4f val %.4f", mode, l8, v8, lb, vb)
		}
	}
}

// TestResumeFP8StateBeforeHeadDy: a checkpoint whose FP8 scaling state
// was saved before the LM head's logits' gradient had a record (one
// record of four fewer: the state of an older druto) resumes: the record
// is added fresh, the others keep their values, and training goes on
// with the head in FP8 and finite losses.
func TestResumeFP8StateBeforeHeadDy(t *testing.T) {
	o := testOptions(8, amp.FP8)
	o.FP8 = amp.DefaultFP8Recipe()
	o.FP8.Head = true
	o.OutDir = t.TempDir()
	a := newTrainer(t, o)
	if err := a.Run(context.Background(), 4, nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(o.OutDir, StateFile)
	params, err := a.Model.Params()
	if err != nil {
		t.Fatal(err)
	}
	st, m, v, s, err := loadState(path, len(params))
	if err != nil || s == nil {
		t.Fatalf("the saved state: %v, fp8 %v", err, s)
	}
	// The state without its last record (f8Stride = 4 records a tensor).
	k := s.K - 4
	old := &amp.FP8Scales{K: k, H: s.H, Margin: s.Margin, Meta: append([]int32(nil), s.Meta[:k*amp.FP8MetaLen]...)}
	old.St = append(old.St, s.St[:2*k]...)
	old.St = append(old.St, s.St[2*s.K:2*s.K+k]...)
	old.St = append(old.St, s.St[3*s.K:3*s.K+k]...)
	old.St = append(old.St, s.St[4*s.K:4*s.K+k*s.H]...)
	if err := saveState(path, st, m, v, old); err != nil {
		t.Fatal(err)
	}
	b := newTrainer(t, o)
	if err := b.Resume(o.OutDir); err != nil {
		t.Fatalf("resume from a state without the head's dy record: %v", err)
	}
	ms := runMetrics(t, b, 0) // to the run's last step
	if len(ms) != 4 {
		t.Fatalf("%d steps after the resume, want 4", len(ms))
	}
	for _, mt := range ms {
		if math.IsNaN(float64(mt.Loss)) || math.IsInf(float64(mt.Loss), 0) || mt.FP8Overflows != 0 {
			t.Errorf("step %d after the resume: loss %v, %d overflows", mt.Step, mt.Loss, mt.FP8Overflows)
		}
	}
	got, err := b.Model.FP8Scales()
	if err != nil || got.K != s.K {
		t.Fatalf("after the resume: %v, K %d, want %d", err, got.K, s.K)
	}
	// The added record was seeded (the scale not 1) and updated from
	// the classifier's amaxes since (pending again after the last step).
	if r := s.K - 4; got.Scale(r) == 1 || !(got.Amax(r) > 0) {
		t.Errorf("the added record: scale %g, pending amax %g: the head's dy was not cast", got.Scale(r), got.Amax(r))
	}
}
