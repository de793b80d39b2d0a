package train

import (
	"math"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
)

// TestFP8TrainingTracksBF16: on the CPU reference, training under amp.FP8
// (one batch; two micro-batches of half the size, the amaxes spanning the
// micro-steps; a 16-step history with a margin of 1) follows bf16's loss curve: the mean loss of the last 10 of
// 60 steps and the final validation loss within 0.5% of bf16's (the same
// batches and accumulation), after it
// fell by at least a third; no step skipped and no FP8 overflow logged;
// the underflows logged, their share of the values cast under 1%.
func TestFP8TrainingTracksBF16(t *testing.T) {
	const steps = 60
	run := func(p amp.Policy, B, accum int, r amp.FP8Recipe) (last, val float32, overflows int64) {
		o := testOptions(steps, p)
		o.Batch, o.Accum, o.EvalEvery, o.EvalBatches, o.FP8 = B, accum, steps, 4, r
		trT, vaT := testTokens(t)
		tr, err := New(cpu.New(device.Options{Fused: true, Threads: 2}), o, trT, vaT)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		ms := runMetrics(t, tr, steps)
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
	}{{4, 0, amp.FP8Recipe{}}, {2, 2, amp.FP8Recipe{}}, {4, 0, amp.FP8Recipe{Delayed: true, History: 16, Margin: 1}}} {
		lb, vb, _ := run(amp.BF16, c.B, c.accum, amp.FP8Recipe{})
		l8, v8, of := run(amp.FP8, c.B, c.accum, c.r)
		t.Logf("B %d accum %d: last-10 loss fp8 %.4f bf16 %.4f; val fp8 %.4f bf16 %.4f", c.B, c.accum, l8, lb, v8, vb)
		if math.Abs(float64(l8-lb)) > 0.005*float64(lb) || math.Abs(float64(v8-vb)) > 0.005*float64(vb) || of != 0 {
			t.Errorf("B %d accum %d: fp8 loss %.4f val %.4f (%d overflows), bf16 %.4f val %.4f", c.B, c.accum, l8, v8, of, lb, vb)
		}
	}
}
