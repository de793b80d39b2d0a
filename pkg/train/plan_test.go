package train

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/gpt"
)

// checkPlan asserts what every plan must satisfy: each row covers the
// total batch; a row that fits is within the budget and its micro-batch
// is the largest divisor that fits; the chosen row fits and is a
// candidate.
func checkPlan(t *testing.T, p *Plan) {
	t.Helper()
	q := p.Req
	S := q.TotalBatch / q.Seq
	for _, r := range p.Rows {
		if r.Batch*r.Accum != S {
			t.Errorf("%s: micro-batch %d x %d micro-steps != %d sequences", r.Recompute, r.Batch, r.Accum, S)
		}
		if !r.Fits {
			continue
		}
		if q.Budget > 0 && r.Memory+q.Reserve > q.Budget {
			t.Errorf("%s: %d bytes + reserve %d over the budget %d", r.Recompute, r.Memory, q.Reserve, q.Budget)
		}
		for b := r.Batch + 1; b <= S; b++ {
			if S%b == 0 && planMemory(q, b, S/b, r.Recompute)+q.Reserve <= q.Budget {
				t.Errorf("%s: micro-batch %d chosen, but %d fits too", r.Recompute, r.Batch, b)
			}
		}
	}
	if c := p.Chosen(); !c.Fits || !c.Candidate {
		t.Errorf("chosen row %+v does not fit or is no candidate", c)
	}
}

// costProbe is a synthetic probe: each micro-step costs overhead plus its
// FLOPs at rate FLOP/s, as a GPU whose launches cost the same whatever the
// micro-batch would.
func costProbe(q PlanRequest, overhead time.Duration, rate float64, calls *int) func(int, gpt.Recompute) (time.Duration, error) {
	return func(B int, r gpt.Recompute) (time.Duration, error) {
		*calls++
		f := float64(B*q.Seq) * (q.Config.FLOPsPerToken(q.Seq) + q.Config.RecomputeFLOPsPerToken(q.Seq, r))
		return overhead + time.Duration(f/rate*1e9), nil
	}
}

// TestPlanTiny: the tiny preset, a total batch of 64 sequences of 128
// tokens, under a faked budget that fits 4 sequences without
// recomputation: every level's micro-batch is the largest that fits, more
// recomputation fits larger ones; a probe whose micro-steps cost mostly
// launch overhead picks the fewest micro-steps (layer), one whose cost is
// all FLOPs picks none; without a probe the FLOPs decide (none); without a
// limit the whole batch runs at once with no probe.
func TestPlanTiny(t *testing.T) {
	cfg, _ := gpt.Preset("tiny")
	q := PlanRequest{Config: cfg, Policy: amp.FP32, Seq: 128, TotalBatch: 64 * 128, Fused: true, BudgetFrom: "DRUTO_GPU_MEMORY"}
	q.Budget = planMemory(q, 4, 16, gpt.RecomputeNone) + 1
	calls := 0
	q.Probe = costProbe(q, 50*time.Millisecond, 1e12, &calls)
	p, err := PlanFor(q)
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, p)
	t.Logf("\n%s", p.Table())
	none, layer := p.Rows[0], p.Rows[2]
	if none.Batch != 4 || !(layer.Batch > none.Batch) {
		t.Fatalf("micro-batches: none %d (want 4), layer %d (want more)", none.Batch, layer.Batch)
	}
	if p.Chosen().Recompute != gpt.RecomputeLayer || !p.Probed || calls < 2 {
		t.Errorf("launch-bound probe: chose %s (probed %v, %d probes), want layer", p.Chosen().Recompute, p.Probed, calls)
	}
	if !strings.Contains(p.WhyText(), "timed probe") || !strings.Contains(p.Table(), "<- chosen") {
		t.Errorf("table without the probe's reason or the choice:\n%s", p.Table())
	}
	q.Probe = costProbe(q, 0, 1e12, &calls)
	if p, err = PlanFor(q); err != nil || p.Chosen().Recompute != gpt.RecomputeNone {
		t.Errorf("FLOP-bound probe: chose %v, %v; want none", p.Chosen().Recompute, err)
	}
	q.Probe = nil
	if p, err = PlanFor(q); err != nil || p.Chosen().Recompute != gpt.RecomputeNone || p.Probed || !strings.Contains(p.WhyText(), "FLOPs") {
		t.Errorf("no probe: chose %v (%q), %v; want none by FLOPs", p.Chosen().Recompute, p.WhyText(), err)
	}
	q.Budget, calls = 0, 0
	q.Probe = costProbe(q, 0, 1e12, &calls)
	if p, err = PlanFor(q); err != nil || p.Chosen().Batch != 64 || p.Chosen().Accum != 1 || calls != 0 || !strings.Contains(p.WhyText(), "whole batch") {
		t.Errorf("no limit: %+v (%d probes), %v; want the whole batch at once, unprobed", p.Chosen(), calls, err)
	}
}

// TestPlanGPT2UnderT4: gpt2-124M at bf16, the GPT-2 recipe's total batch
// of 524,288 tokens (512 x 1024) under a faked 16 GiB budget with the
// GPU's flash-attention state and 512 MiB of reserve: the plan fits, needs
// accumulation, and layer recomputation fits a larger micro-batch than
// none.
func TestPlanGPT2UnderT4(t *testing.T) {
	cfg, _ := gpt.Preset("gpt2-124M")
	q := PlanRequest{Config: cfg, Policy: amp.BF16, Seq: 1024, TotalBatch: 524288, Budget: 16 << 30, BudgetFrom: "DRUTO_GPU_MEMORY",
		Reserve: 512 << 20, Fused: true, AttState: func(B int) device.AttnState { return device.LSEState(B, 1024, cfg.Heads) }}
	calls := 0
	q.Probe = costProbe(q, 20*time.Millisecond, 300e12, &calls)
	p, err := PlanFor(q)
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, p)
	t.Logf("\n%s", p.Table())
	if c := p.Chosen(); c.Accum < 2 || !(p.Rows[2].Batch > p.Rows[0].Batch) {
		t.Errorf("chosen %+v; layer micro-batch %d, none %d", c, p.Rows[2].Batch, p.Rows[0].Batch)
	}
}

// TestPlanErrors: a total batch that is not whole sequences, and a budget
// below the smallest plan (the error says what that plan needs).
func TestPlanErrors(t *testing.T) {
	cfg, _ := gpt.Preset("tiny")
	q := PlanRequest{Config: cfg, Policy: amp.FP32, Seq: 128, TotalBatch: 1000, Fused: true}
	if _, err := PlanFor(q); err == nil || !strings.Contains(err.Error(), "multiple of 128") {
		t.Errorf("total batch 1000 at T 128: %v", err)
	}
	q.TotalBatch, q.Budget = 8*128, 1<<20
	_, err := PlanFor(q)
	need := planMemory(q, 1, 8, gpt.RecomputeLayer)
	if !errors.Is(err, ErrNoPlan) || !strings.Contains(err.Error(), GiB(need)) {
		t.Errorf("1 MiB budget: %v; want ErrNoPlan saying it needs %s", err, GiB(need))
	}
}
