package train

// plan.go: the memory planner of druto train --fit. For a requested total
// batch (tokens a step) it picks the micro-batch B, the accumulation steps
// and the recomputation level that reach it fastest within a memory
// budget: from gpt's memory model, the largest B that fits at each level;
// the levels whose B is no larger than a cheaper level's are dropped (more
// recomputation at the same B only adds work); the rest are timed by a
// short probe (or, without one, compared by their FLOPs) and the fastest
// step wins.

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/tensor"
)

// ErrNoPlan is returned (wrapped, with what the smallest plan needs) when
// no plan fits the budget.
var ErrNoPlan = errors.New("train: no plan fits the memory budget")

// PlanRequest is what the planner plans for.
type PlanRequest struct {
	Config     gpt.Config
	Policy     amp.Policy
	Seq        int   // T: tokens per sequence
	TotalBatch int   // tokens per step, a multiple of Seq
	Budget     int64 // bytes a step may hold on the device; 0: no limit
	// BudgetFrom says where Budget comes from (e.g. "DRUTO_GPU_MEMORY",
	// "free on NVIDIA H200"), for the table's caption.
	BudgetFrom string
	// Reserve is kept free beside the memory model's count (workspaces and
	// scratch the model does not count: GPUReserve on a GPU).
	Reserve int64
	// Fused counts the fused ops' memory (the LM head in chunks); false:
	// the decomposed baseline's.
	Fused bool
	// AttState is the attention state the device saves at micro-batch B;
	// nil: the softmax probabilities (the CPU's).
	AttState func(B int) device.AttnState
	// AdamState is the dtype of AdamW's moments (Options.AdamState; 0:
	// F32): bf16 moments count half the optimizer state.
	AdamState tensor.DType
	// Levels are the recomputation levels to consider (nil: all).
	Levels []gpt.Recompute
	// Probe, when set, times one micro-step (forward and backward) at
	// micro-batch B and level r; the planner calls it only where the
	// memory model leaves more than one candidate. nil: candidates are
	// compared by their FLOPs.
	Probe func(B int, r gpt.Recompute) (time.Duration, error)
}

// PlanRow is one recomputation level's best plan.
type PlanRow struct {
	Recompute gpt.Recompute
	Batch     int   // micro-batch B: the largest that fits (1 when none does)
	Accum     int   // micro-steps a step: TotalBatch / (Batch·Seq)
	Memory    int64 // bytes the step holds (gpt's memory model, the loss sum included)
	Fits      bool  // Memory + Reserve <= Budget
	Candidate bool  // fits, and no cheaper level fits as large a micro-batch
	FLOPs     float64
	Micro     time.Duration // the probe's micro-step (0: not probed)
}

// Step returns the row's step time from its probe (0 when not probed).
func (r PlanRow) Step() time.Duration { return time.Duration(r.Accum) * r.Micro }

// Plan is the planner's choice among its rows, and why.
type Plan struct {
	Req    PlanRequest
	Rows   []PlanRow
	Choice int // index of the chosen row
	Probed bool
	// why is the reason's English format and its arguments (Why).
	why  string
	args []any
}

// Chosen returns the chosen row.
func (p *Plan) Chosen() PlanRow { return p.Rows[p.Choice] }

// Why returns the reason for the choice as an English format and its
// arguments (nbui translates the format; WhyText formats it in English).
func (p *Plan) Why() (format string, args []any) { return p.why, p.args }

// WhyText is the reason for the choice, in English.
func (p *Plan) WhyText() string { return fmt.Sprintf(p.why, p.args...) }

// Need is the bytes a step holds at micro-batch B, level r and accum
// micro-steps under q: gpt's memory model for q's ops (fused: the LM head
// in chunks; the attention state q.AttState reports, flash attention's
// log-sum-exp on a GPU) with AdamW's moments at q.AdamState, plus the loss
// sum with accum > 1. The planner sizes its rows by it and Check refuses a
// step by it: one count, so a plan the planner accepts is never refused.
func (q PlanRequest) Need(B, accum int, r gpt.Recompute) int64 {
	var m gpt.Memory
	switch {
	case !q.Fused:
		m = gpt.MemoryDecomposed(q.Config, B, q.Seq, q.Policy, r)
	case q.AttState != nil:
		m = gpt.MemoryWith(q.Config, B, q.Seq, q.Policy, q.AttState(B), r)
	default:
		m = gpt.MemoryFor(q.Config, B, q.Seq, q.Policy, r)
	}
	if q.AdamState != 0 {
		m = m.WithMoments(q.Config, q.AdamState)
	}
	t := m.Total()
	if accum > 1 {
		t += int64(4 * B * q.Seq)
	}
	return t
}

// Fits reports whether need bytes and q's reserve fit q's budget (always,
// without a budget).
func (q PlanRequest) Fits(need int64) bool { return q.Budget <= 0 || need+q.Reserve <= q.Budget }

// FitError is Check's error: a step needs more than the budget.
type FitError struct {
	Need, Reserve, Budget int64  // bytes: the step's count (Need), the reserve beside it, the budget
	From                  string // where the budget comes from (PlanRequest.BudgetFrom)
}

// Error says both figures in one line.
func (e *FitError) Error() string {
	return fmt.Sprintf("train: the step needs %s (%s of reserve included), the budget is %s%s",
		GiB(e.Need+e.Reserve), GiB(e.Reserve), budgetText(e.Budget), from(e.From))
}

// Check returns a *FitError when a step at micro-batch B, accum
// micro-steps and level r does not fit q's budget (Need and Fits: the
// planner's count and test). Called with the request a plan was made from
// (the budget read once, before the probes: they leave the device's
// scratch allocated, which the run reuses and the reserve covers), it
// passes for the plan's chosen row.
func (q PlanRequest) Check(B, accum int, r gpt.Recompute) error {
	if need := q.Need(B, accum, r); !q.Fits(need) {
		return &FitError{Need: need, Reserve: q.Reserve, Budget: q.Budget, From: q.BudgetFrom}
	}
	return nil
}

// PlanFor plans q (see the file's comment). It fails when the total batch
// is not a whole number of sequences, and with ErrNoPlan (saying what the
// smallest plan needs) when nothing fits the budget.
func PlanFor(q PlanRequest) (*Plan, error) {
	switch {
	case q.Seq < 1 || q.TotalBatch < 1:
		return nil, fmt.Errorf("train: total batch %d and sequence %d must be positive", q.TotalBatch, q.Seq)
	case q.TotalBatch%q.Seq != 0:
		return nil, fmt.Errorf("train: the total batch of %d tokens is not a whole number of %d-token sequences; use a multiple of %d", q.TotalBatch, q.Seq, q.Seq)
	}
	S := q.TotalBatch / q.Seq
	var divs []int // micro-batches that divide the step's sequences, largest first
	for b := S; b >= 1; b-- {
		if S%b == 0 {
			divs = append(divs, b)
		}
	}
	levels := q.Levels
	if len(levels) == 0 {
		levels = gpt.RecomputeLevels
	}
	levels = append([]gpt.Recompute(nil), levels...)
	sort.Slice(levels, func(i, j int) bool { return levels[i] < levels[j] })
	p := &Plan{Req: q}
	best := 0 // the largest micro-batch a cheaper level fits
	for _, r := range levels {
		row := PlanRow{Recompute: r, Batch: 1, Accum: S}
		row.Memory = q.Need(1, S, r)
		for _, b := range divs {
			if m := q.Need(b, S/b, r); q.Fits(m) {
				row.Batch, row.Accum, row.Memory, row.Fits = b, S/b, m, true
				break
			}
		}
		row.FLOPs = float64(q.TotalBatch) * (q.Config.FLOPsPerToken(q.Seq) + q.Config.RecomputeFLOPsPerToken(q.Seq, r))
		if row.Fits && row.Batch > best {
			row.Candidate, best = true, row.Batch
		}
		p.Rows = append(p.Rows, row)
	}
	var cands []int
	for i, r := range p.Rows {
		if r.Candidate {
			cands = append(cands, i)
		}
	}
	if len(cands) == 0 {
		small := p.Rows[len(p.Rows)-1] // the most recomputation at B 1
		reserve := ""
		if q.Reserve > 0 {
			reserve = " (" + GiB(q.Reserve) + " of reserve included)"
		}
		return nil, fmt.Errorf("%w: the smallest plan (micro-batch 1 x %d tokens, recompute %s, %d micro-steps) needs %s%s, the budget is %s%s; raise the budget, or use a smaller --seq or model",
			ErrNoPlan, q.Seq, small.Recompute, small.Accum, GiB(small.Memory+q.Reserve), reserve, budgetText(q.Budget), from(q.BudgetFrom))
	}
	p.Choice = cands[0]
	switch {
	case len(cands) == 1 && p.Rows[cands[0]].Accum == 1 && p.Rows[cands[0]].Recompute == levels[0]:
		p.why, p.args = "the whole batch of %d sequences fits at once with recompute %s", []any{S, levels[0].String()}
	case len(cands) == 1:
		c := p.Rows[cands[0]]
		p.why, p.args = "recompute %s at micro-batch %d is the only candidate: less recomputation fits no micro-batch, more fits no larger one", []any{c.Recompute.String(), c.Batch}
	case q.Probe != nil:
		p.Probed = true
		for _, i := range cands {
			d, err := q.Probe(p.Rows[i].Batch, p.Rows[i].Recompute)
			if err != nil {
				return nil, fmt.Errorf("train: planner probe at micro-batch %d, recompute %s: %w", p.Rows[i].Batch, p.Rows[i].Recompute, err)
			}
			p.Rows[i].Micro = max(d, 1)
			if p.Rows[i].Step() < p.Rows[p.Choice].Step() {
				p.Choice = i
			}
		}
		c, next := p.Rows[p.Choice], nextBest(p, cands, func(r PlanRow) float64 { return float64(r.Step()) })
		p.why, p.args = "recompute %s at micro-batch %d is the fastest of %d candidates by a timed probe: %.1f ms a step, against %.1f ms for recompute %s",
			[]any{c.Recompute.String(), c.Batch, len(cands), ms(c.Step()), ms(next.Step()), next.Recompute.String()}
	default:
		for _, i := range cands {
			if p.Rows[i].FLOPs < p.Rows[p.Choice].FLOPs {
				p.Choice = i
			}
		}
		c, next := p.Rows[p.Choice], nextBest(p, cands, func(r PlanRow) float64 { return r.FLOPs })
		p.why, p.args = "recompute %s at micro-batch %d needs the fewest FLOPs of %d candidates (%.3g TFLOP a step, against %.3g for recompute %s); no probe ran, so the speed of a larger micro-batch is not counted",
			[]any{c.Recompute.String(), c.Batch, len(cands), c.FLOPs / 1e12, next.FLOPs / 1e12, next.Recompute.String()}
	}
	return p, nil
}

// nextBest returns the candidate other than the choice with the least key.
func nextBest(p *Plan, cands []int, key func(PlanRow) float64) PlanRow {
	k, best := -1, math.Inf(1)
	for _, i := range cands {
		if i != p.Choice && key(p.Rows[i]) < best {
			k, best = i, key(p.Rows[i])
		}
	}
	return p.Rows[k]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func from(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// GiB formats bytes in GiB with two decimals, or in MiB with one below
// 1 GiB.
func GiB(b int64) string {
	if b < 1<<30 {
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
}

// budgetText formats a budget (0 or less: no limit).
func budgetText(b int64) string {
	if b <= 0 {
		return "no limit"
	}
	return GiB(b)
}

// Columns are the plan table's headers, in English (nbui translates them).
var PlanColumns = []string{"recompute", "micro-batch", "accum", "memory", "fits", "TFLOP/step", "probe ms/micro-step", "ms/step", "choice"}

// Cells returns row i's cells under PlanColumns; yes, no and the choice
// mark are English words (nbui translates them).
func (p *Plan) Cells(i int) []string {
	r := p.Rows[i]
	yn := map[bool]string{true: "yes", false: "no"}
	probe, step := "-", "-"
	if r.Micro > 0 {
		probe, step = fmt.Sprintf("%.1f", ms(r.Micro)), fmt.Sprintf("%.1f", ms(r.Step()))
	}
	mark := ""
	switch {
	case i == p.Choice:
		mark = "<- chosen"
	case r.Fits && !r.Candidate:
		mark = "dominated"
	}
	return []string{r.Recompute.String(), fmt.Sprint(r.Batch), fmt.Sprint(r.Accum), GiB(r.Memory), yn[r.Fits],
		fmt.Sprintf("%.3g", r.FLOPs/1e12), probe, step, mark}
}

// Caption returns the plan's caption as an English format and arguments.
func (p *Plan) Caption() (format string, args []any) {
	q := p.Req
	src := q.BudgetFrom
	if src == "" {
		src = "not set"
	}
	return "Plan for %s, %s, a total batch of %d tokens (%d x %d), budget %s (%s), reserve %s",
		[]any{q.Config.String(), q.Policy.String(), q.TotalBatch, q.TotalBatch / q.Seq, q.Seq, budgetText(q.Budget), src, GiB(q.Reserve)}
}

// Table formats the plan as one text table in English: the caption, a row
// per level, and the reason for the choice.
func (p *Plan) Table() string {
	rows := [][]string{PlanColumns}
	for i := range p.Rows {
		rows = append(rows, p.Cells(i))
	}
	w := make([]int, len(PlanColumns))
	for _, r := range rows {
		for j, c := range r {
			w[j] = max(w[j], len([]rune(c)))
		}
	}
	var b strings.Builder
	f, a := p.Caption()
	fmt.Fprintf(&b, f+":\n", a...)
	for _, r := range rows {
		b.WriteString(" ")
		for j, c := range r {
			fmt.Fprintf(&b, " %-*s", w[j], c)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "  why: %s\n", p.WhyText())
	return strings.TrimRight(b.String(), " ")
}

// ProbeStep times one micro-step (forward and backward) of cfg at B x T
// under p and recomputation r on dev: a model is built, one step warms it
// up, and the median of reps timed steps is returned; the model is freed.
func ProbeStep(dev device.Device, cfg gpt.Config, p amp.Policy, B, T int, r gpt.Recompute, reps int) (time.Duration, error) {
	m, err := gpt.New(dev, cfg, p)
	if err != nil {
		return 0, err
	}
	defer m.Close()
	if err := m.SetRecompute(r); err != nil {
		return 0, err
	}
	if err := m.Init(1); err != nil {
		return 0, err
	}
	toks, err := data.Encode(data.Corpus(1, max(1<<16, B*T+1)))
	if err != nil {
		return 0, err
	}
	for i := range toks {
		toks[i] %= int32(cfg.Vocab)
	}
	in, tg := toks[:B*T], toks[1:B*T+1]
	var times []time.Duration
	for i := range reps + 1 {
		start := time.Now()
		m.ZeroGrad()
		if _, err := m.Gradients(in, tg, B, T, 1); err != nil {
			return 0, err
		}
		if i > 0 {
			times = append(times, time.Since(start))
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	return times[len(times)/2], nil
}

// GPUReserve is the memory a GPU plan keeps free beside the memory model's
// count (workspaces, attention and classifier scratch); the CLI keeps it
// free too when it checks a need against the GPU's free memory.
const GPUReserve = 512 << 20

// RequestOn returns q with dev's budget and attention state. Where q has
// no budget, it is the memory free on a GPU now (a device with FreeMemory;
// DRUTO_GPU_MEMORY caps it there), with GPUReserve kept, or elsewhere the
// cap DRUTO_GPU_MEMORY sets (no limit without one). Read the budget once,
// before anything of the run (a probe included) is allocated, and plan
// and Check with the same request.
func RequestOn(dev device.Device, q PlanRequest) (PlanRequest, error) {
	memCap, err := device.MemoryCap()
	if err != nil {
		return q, err
	}
	if q.Budget <= 0 {
		q.Budget = memCap
		if memCap > 0 {
			q.BudgetFrom = device.MemoryCapEnv
		}
		if g, ok := dev.(interface {
			FreeMemory() (free, total uint64, err error)
		}); ok {
			if free, _, err := g.FreeMemory(); err == nil {
				q.Budget, q.Reserve = int64(free), GPUReserve
				if memCap == 0 {
					q.BudgetFrom = "free on the GPU"
				}
			}
		}
	}
	dt := q.Policy.DType(amp.Activation)
	q.AttState = func(B int) device.AttnState {
		return dev.AttentionState(dt, B, q.Seq, q.Config.Channels, q.Config.Heads)
	}
	return q, nil
}

// PlanOn plans q on dev (RequestOn: dev's budget and attention state).
// With probe, the candidates are timed on dev (ProbeStep: two micro-steps
// each, after a warm-up). The plan's Req is the request it was made from:
// Check the run's step against it.
func PlanOn(dev device.Device, q PlanRequest, probe bool) (*Plan, error) {
	q, err := RequestOn(dev, q)
	if err != nil {
		return nil, err
	}
	if probe {
		q.Probe = func(B int, r gpt.Recompute) (time.Duration, error) {
			return ProbeStep(dev, q.Config, q.Policy, B, q.Seq, r, 2)
		}
	}
	return PlanFor(q)
}
