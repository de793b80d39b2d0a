package train

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/tensor"
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
			if S%b == 0 && q.Need(b, S/b, r.Recompute)+q.Reserve <= q.Budget {
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
	q.Budget = q.Need(4, 16, gpt.RecomputeNone) + 1
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
	need := q.Need(1, 8, gpt.RecomputeLayer)
	if !errors.Is(err, ErrNoPlan) || !strings.Contains(err.Error(), GiB(need)) {
		t.Errorf("1 MiB budget: %v; want ErrNoPlan saying it needs %s", err, GiB(need))
	}
}

// shrinkingGPU is a device with a GPU's FreeMemory whose free memory drops
// by what each probe leaves allocated (a real GPU keeps a probe's scratch
// buffers until Close), and whose attention saves a log-sum-exp per row
// (the GPU's flash kernels).
type shrinkingGPU struct {
	device.Device
	free int64
}

func (g *shrinkingGPU) AttentionState(dt tensor.DType, B, T, C, NH int) device.AttnState {
	return device.LSEState(B, T, NH)
}

func (g *shrinkingGPU) FreeMemory() (free, total uint64, err error) {
	return uint64(g.free), uint64(g.free), nil
}

// TestPlanPassesCheck: for several models, policies, moment dtypes and
// budgets, the step the planner chooses passes Check against the plan's
// request, as druto train's pre-flight runs it, although the probes have
// left 400 MiB of scratch allocated since the budget was read (what
// refused gpt2-xl's plan on the H200: the free memory read again after
// the probes, the reserve counted again on top). Reading the budget again
// would refuse a plan chosen within the reserve of its budget.
func TestPlanPassesCheck(t *testing.T) {
	t.Setenv(device.MemoryCapEnv, "") // the budget is shrinkingGPU's free memory
	tiny, _ := gpt.Preset("tiny")
	g124, _ := gpt.Preset("gpt2-124M")
	xl := gpt.Config{Vocab: 50304, MaxSeq: 1024, Layers: 48, Heads: 25, Channels: 1600}
	cases := []struct {
		cfg          gpt.Config
		p            amp.Policy
		moments      tensor.DType
		fused        bool
		seq, total   int
		budgets      []int64
		wantRefusals bool // some budget's plan would be refused by a second read
	}{
		{tiny, amp.FP32, 0, true, 128, 64 * 128, []int64{20 << 20, 40 << 20, 64 << 20, 1 << 30}, false},
		{tiny, amp.BF16, tensor.BF16, false, 128, 16 * 128, []int64{14 << 20, 30 << 20}, false},
		{g124, amp.BF16, 0, true, 1024, 524288, []int64{8 << 30, 16 << 30, 24 << 30, 80 << 30}, false},
		{g124, amp.FP16, tensor.BF16, true, 1024, 16 * 1024, []int64{6 << 30, 12 << 30}, false},
		{xl, amp.BF16, tensor.BF16, true, 1024, 16384, []int64{24<<30 - 30<<20, 32 << 30}, true},
	}
	cpuDev := cpu.New(device.Options{Fused: true})
	for _, c := range cases {
		refusals := 0
		for _, budget := range c.budgets {
			g := &shrinkingGPU{Device: cpuDev, free: budget}
			q := PlanRequest{Config: c.cfg, Policy: c.p, Seq: c.seq, TotalBatch: c.total, Fused: c.fused, AdamState: c.moments}
			calls := 0
			cost := costProbe(q, 20*time.Millisecond, 300e12, &calls)
			q.Probe = func(B int, r gpt.Recompute) (time.Duration, error) {
				g.free -= 400 << 20
				return cost(B, r)
			}
			p, err := PlanOn(g, q, false)
			if errors.Is(err, ErrNoPlan) {
				continue
			}
			if err != nil {
				t.Fatalf("%s %s budget %s: %v", c.cfg, c.p, GiB(budget), err)
			}
			checkPlan(t, p)
			ch := p.Chosen()
			if err := p.Req.Check(ch.Batch, ch.Accum, ch.Recompute); err != nil {
				t.Errorf("%s %s budget %s: the plan's step (B %d, accum %d, recompute %s) is refused: %v\n%s",
					c.cfg, c.p, GiB(budget), ch.Batch, ch.Accum, ch.Recompute, err, p.Table())
			}
			if again, _ := RequestOn(g, PlanRequest{Config: c.cfg, Policy: c.p, Seq: c.seq, TotalBatch: c.total, Fused: c.fused, AdamState: c.moments}); calls > 0 &&
				again.Check(ch.Batch, ch.Accum, ch.Recompute) != nil {
				refusals++
				t.Logf("a second read of the free memory (%s after the probes) would refuse this plan:\n%s", GiB(g.free), p.Table())
			}
		}
		if c.wantRefusals && refusals == 0 {
			t.Errorf("%s: no budget where a second read of the free memory would refuse the plan; the test no longer shows the bug", c.cfg)
		}
	}
	// Check refuses one micro-batch more than fits, saying both figures.
	q := PlanRequest{Config: tiny, Policy: amp.FP32, Seq: 128, TotalBatch: 8 * 128, Fused: true, Reserve: 1 << 20, BudgetFrom: "DRUTO_GPU_MEMORY"}
	q.Budget = q.Need(4, 2, gpt.RecomputeNone) + q.Reserve
	var fe *FitError
	if err := q.Check(4, 2, gpt.RecomputeNone); err != nil {
		t.Errorf("B 4 at its own budget: %v", err)
	}
	if err := q.Check(8, 1, gpt.RecomputeNone); !errors.As(err, &fe) || !strings.Contains(err.Error(), GiB(q.Budget)) || !strings.Contains(err.Error(), "DRUTO_GPU_MEMORY") {
		t.Errorf("B 8 past the budget: %v", err)
	}
}
