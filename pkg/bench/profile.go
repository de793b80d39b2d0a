package bench

// profile.go: where the time of one training step goes. ProfileStep runs
// the step through a device wrapper that times every op (CUDA events on
// the GPU's stream, the wall clock on the CPU, whose ops run synchronously)
// and sorts it into classes: each GEMM shape (forward and backward
// together), attention, layernorm, GELU/bias, classifier + loss,
// optimizer, encoder, zero, cast and copies, and the gaps between ops (launch and host overhead).
// Each class has its work counted, FLOPs for the products and bytes for the
// rest (every tensor an op reads counted once, every one it writes once, an
// accumulated output twice), and the achieved rate as a percentage of the
// ceiling measured in the same run: the matmul peak (Peak) or the copy
// bandwidth (CopyBandwidth). Every performance claim starts from this table.
//
// A graph mode (train.StepGraph) is profiled differently (profileGraph):
// events around every op inflate a step whose ops are a few microseconds
// each (the GPU waits for the host between them; a graph does not), so
// each op of one device-resident step is captured graphReps times in a row
// into a graph of its own, and that graph's replay, timed with two events,
// over graphReps is the op's GPU time with no launch or event overhead (its
// own inputs warm in L2). The sum over the ops is shown beside the real
// graph step's time, measured in the same call (StepTimes), and their
// difference is a row of its own (dependencies and kernel boundaries inside
// the graph, cold caches, the batch upload outside it).

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/gpu"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/optim"
	"github.com/druto/druto/pkg/record"
	"github.com/druto/druto/pkg/tensor"
	"github.com/druto/druto/pkg/train"
)

// ProfileRow is one op class of a step.
type ProfileRow = record.ProfileRow

// Profile is ProfileStep's result: the mean over the profiled steps.
type Profile = record.Profile

// Ceilings are the rates a profile's percentages are taken against.
type Ceilings struct {
	PeakFLOPs    float64 // FLOP/s (Peak)
	PeakFP8FLOPs float64 // FLOP/s of FP8 products (PeakFP8): the " fp8" GEMM rows' ceiling, none where 0
	CopyGBps     float64 // GB/s (CopyBandwidth)
}

// ProfileStep trains c in mode m on dev for o.Warmup untimed steps, then
// o.Steps profiled ones, and returns the time per op class.
func ProfileStep(dev device.Device, c Case, m Mode, o Options, ceil Ceilings) (*Profile, error) {
	if o.Warmup <= 0 {
		o.Warmup = 2
	}
	if o.Steps <= 0 {
		o.Steps = 5
	}
	if dev.Fused() != m.Fused {
		return nil, fmt.Errorf("bench: profile of mode %s on a device with fused=%v", m, dev.Fused())
	}
	if g, ok := dev.(*gpu.Device); ok && m.Step == train.StepGraph {
		return profileGraph(g, c, m, o, ceil)
	}
	p := &profiler{Device: dev, cfg: c.Config, acc: map[string]*ProfileRow{}}
	if g, ok := dev.(*gpu.Device); ok {
		p.gpu = g
	}
	tr, err := benchTrainer(p, c, m, train.StepHost, o.Warmup+o.Steps, o.FP8)
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	defer p.release()
	for range o.Warmup {
		if _, err := tr.Step(); err != nil {
			return nil, err
		}
	}
	var total time.Duration
	for range o.Steps {
		p.on = true
		if err := p.stepMark(); err != nil {
			return nil, err
		}
		_, err := tr.Step()
		if err == nil {
			err = p.stepMark()
		}
		p.on = false
		if err != nil {
			return nil, err
		}
		d, err := p.collect()
		if err != nil {
			return nil, err
		}
		total += d
	}
	return p.result(c, m, o.Steps, total, ceil), nil
}

// graphReps is how many copies of an op profileGraph captures into the
// op's graph: enough that one replay of the graph is well above the
// events' resolution (about 0.5 µs) for a microsecond kernel.
const graphReps = 20

// graphMethod is the Profile.Method of profileGraph.
var graphMethod = fmt.Sprintf("graph-aware: each op of one device-resident step captured %d times into its own CUDA graph, "+
	"replayed after the step, time/%d (no launch or event overhead, its inputs warm in L2)", graphReps, graphReps)

// profileGraph profiles a graph mode on g (see the file comment): the real
// graph step's median time (StepTimes, the same warm-up and steps), then
// o.Steps device-resident steps whose every op is captured into its own
// graph of graphReps copies and replayed after the step.
func profileGraph(g *gpu.Device, c Case, m Mode, o Options, ceil Ceilings) (*Profile, error) {
	rec, err := stepTimes(g, c, m, Options{Warmup: max(3, o.Warmup), Steps: max(10, o.Steps)}, 0, false)
	if err != nil {
		return nil, err
	}
	if rec.StepPath != "graph" {
		return nil, fmt.Errorf("bench: graph profile of %s %s: the step ran as %q", c.Name, m, rec.StepPath)
	}
	p := &profiler{Device: g, gpu: g, cfg: c.Config, acc: map[string]*ProfileRow{}, reps: graphReps}
	tr, err := benchTrainer(graphProfiler{p}, c, m, train.StepDevice, o.Warmup+o.Steps, o.FP8)
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	defer p.release()
	for range o.Warmup {
		if _, err := tr.Step(); err != nil {
			return nil, err
		}
	}
	step := time.Duration(rec.StepMs * float64(time.Millisecond))
	for range o.Steps {
		p.on = true
		_, err := tr.Step()
		p.on = false
		if err == nil {
			err = p.replay(step)
		}
		if err != nil {
			p.closeGraphs()
			return nil, err
		}
	}
	out := p.result(c, m, o.Steps, time.Duration(o.Steps)*step, ceil)
	out.Method = graphMethod
	for _, r := range out.Rows {
		if r.Class != residualClass {
			out.OpsMs += r.Ms
		}
	}
	return out, nil
}

// residualClass is profileGraph's row of the graph step's time that the
// ops' replays do not account for (negative when they add up to more).
const residualClass = "graph step − Σ ops"

// opGraph is one op captured for profileGraph.
type opGraph struct {
	class        string
	flops, bytes float64
	g            device.Graph
}

// replay times every op graph of the step just run: each once untimed
// (queued first, so the GPU is busy while the timed replays are queued),
// then each between two events; it records the ops and the residual of
// step (the real graph step's time) and frees the graphs.
func (p *profiler) replay(step time.Duration) error {
	defer p.closeGraphs()
	if p.err != nil {
		return p.err
	}
	for _, x := range p.graphs {
		if err := x.g.Launch(); err != nil {
			return err
		}
	}
	idx := make([]int, len(p.graphs))
	for i, x := range p.graphs {
		var err error
		if idx[i], err = p.event(); err != nil {
			return err
		}
		if err := x.g.Launch(); err != nil {
			return err
		}
		if _, err := p.event(); err != nil {
			return err
		}
	}
	var sum time.Duration
	for i, x := range p.graphs {
		d, err := cuda.Elapsed(p.events[idx[i]], p.events[idx[i]+1])
		if err != nil {
			return err
		}
		d /= graphReps
		sum += d
		p.add(x.class, 1, d, x.flops, x.bytes)
	}
	p.add(residualClass, 0, step-sum, 0, 0)
	p.next = 0
	return p.Device.Sync()
}

func (p *profiler) closeGraphs() {
	for _, x := range p.graphs {
		_ = x.g.Close()
	}
	p.graphs = p.graphs[:0]
}

// graphProfiler is the profiler of a device-resident step on the GPU: the
// device.Stepper ops are timed too, the state snapshots and batches pass
// through.
type graphProfiler struct{ *profiler }

var (
	_ device.Stepper   = graphProfiler{}
	_ device.StateSnap = graphProfiler{}
	_ device.Batcher   = graphProfiler{}
)

func (g graphProfiler) CrossEntropyScaled(losses, logits, targets, state *device.T, N, V int, dscale float32) {
	g.timed(device.Ops.CrossEntropyScaled.Class, 0, bytesOf(losses, logits, targets, logits), func() {
		g.gpu.CrossEntropyScaled(losses, logits, targets, state, N, V, dscale)
	})
}

func (g graphProfiler) StepUpdate(state, losses, grads *device.T, cfg device.StepConfig, hp device.AdamW) {
	g.timed(device.Ops.StepUpdate.Class, 0, bytesOf(losses, grads), func() { g.gpu.StepUpdate(state, losses, grads, cfg, hp) })
}

func (g graphProfiler) AdamWState(master, work, grads, m, v *device.T, layout *tensor.Layout, hp device.AdamW, state *device.T) {
	g.timed(device.Ops.AdamWState.Class, 0, 2*bytesOf(master, m, v)+bytesOf(work, grads), func() {
		g.gpu.AdamWState(master, work, grads, m, v, layout, hp, state)
	})
}

func (g graphProfiler) Records(n int) error             { return g.gpu.Records(n) }
func (g graphProfiler) Snapshot(i int, state *device.T) { g.gpu.Snapshot(i, state) }
func (g graphProfiler) Record(i int) []float32          { return g.gpu.Record(i) }
func (g graphProfiler) Batch(fn func() error) error     { return g.gpu.Batch(fn) }

// pending is one timed op whose device time is read after the step.
type pending struct {
	class        string
	flops, bytes float64
	i            int           // index of its start event; end is i+1 (GPU)
	d            time.Duration // measured directly (CPU)
}

// profiler is a device.Device that times the ops of a training step.
type profiler struct {
	device.Device
	cfg gpt.Config
	gpu *gpu.Device // nil on the CPU
	on  bool        // timing the current step

	events []*cuda.Event // GPU: reused across steps, two per op plus the step's
	next   int
	step   [2]int // the step's start and end event indices
	marks  int
	ops    []pending
	t0     time.Time // CPU: the step's start
	cpuDur time.Duration

	acc   map[string]*ProfileRow
	err   error
	order []string

	reps   int       // graph profile: capture each op this many times into its own graph (profileGraph)
	graphs []opGraph // the current step's op graphs
}

func (p *profiler) event() (int, error) {
	if p.next == len(p.events) {
		e, err := p.gpu.Context().NewEvent()
		if err != nil {
			return 0, err
		}
		p.events = append(p.events, e)
	}
	p.next++
	return p.next - 1, p.events[p.next-1].Record(p.gpu.Stream())
}

// stepMark records the start (first call) or the end (second) of a step.
func (p *profiler) stepMark() error {
	if p.gpu == nil {
		if p.marks == 0 {
			p.t0 = time.Now()
		} else {
			p.cpuDur = time.Since(p.t0)
		}
		p.marks++
		return nil
	}
	if p.marks == 0 { // nothing of an earlier step may run into this one
		if err := p.Device.Sync(); err != nil {
			return err
		}
	}
	i, err := p.event()
	p.step[min(p.marks, 1)] = i
	p.marks++
	return err
}

// timed runs op and, when profiling, records its time under class.
func (p *profiler) timed(class string, flops, bytes float64, op func()) {
	if !p.on || p.err != nil {
		op()
		return
	}
	if p.reps > 0 {
		g, err := p.gpu.Capture(func() error {
			for range p.reps {
				op()
			}
			return nil
		})
		if err != nil {
			p.err = fmt.Errorf("bench: graph profile: capture of a %q op: %w", class, err)
		} else {
			p.graphs = append(p.graphs, opGraph{class: class, flops: flops, bytes: bytes, g: g})
		}
		op() // the step itself
		return
	}
	if p.gpu == nil {
		start := time.Now()
		op()
		if err := p.Device.Sync(); err != nil && p.err == nil {
			p.err = err
		}
		p.ops = append(p.ops, pending{class: class, flops: flops, bytes: bytes, d: time.Since(start)})
		return
	}
	i, err := p.event()
	op()
	if _, err2 := p.event(); err == nil {
		err = err2
	}
	if err != nil && p.err == nil {
		p.err = err
	}
	p.ops = append(p.ops, pending{class: class, flops: flops, bytes: bytes, i: i})
}

// collect reads the step's op times into the classes and returns the
// step's time.
func (p *profiler) collect() (time.Duration, error) {
	defer func() { p.ops, p.next, p.marks = p.ops[:0], 0, 0 }()
	if p.err != nil {
		return 0, p.err
	}
	var step, sum time.Duration
	if p.gpu == nil {
		step = p.cpuDur
	} else {
		var err error
		if step, err = cuda.Elapsed(p.events[p.step[0]], p.events[p.step[1]]); err != nil {
			return 0, err
		}
	}
	for _, o := range p.ops {
		d := o.d
		if p.gpu != nil {
			var err error
			if d, err = cuda.Elapsed(p.events[o.i], p.events[o.i+1]); err != nil {
				return 0, err
			}
		}
		sum += d
		p.add(o.class, 1, d, o.flops, o.bytes)
	}
	p.add("gaps between ops", 0, max(step-sum, 0), 0, 0)
	return step, nil
}

func (p *profiler) add(class string, calls int, d time.Duration, flops, bytes float64) {
	r, ok := p.acc[class]
	if !ok {
		r = &ProfileRow{Class: class}
		p.acc[class] = r
		p.order = append(p.order, class)
	}
	r.Calls += calls
	r.Ms += float64(d.Nanoseconds()) / 1e6
	r.FLOPs += flops
	r.Bytes += bytes
}

// result averages the classes over steps and derives rates and shares.
func (p *profiler) result(c Case, m Mode, steps int, total time.Duration, ceil Ceilings) *Profile {
	n := float64(steps)
	out := &Profile{Config: c.Name, Mode: m.String(), Batch: c.Batch, Seq: c.Seq, Steps: steps,
		StepMs: float64(total.Nanoseconds()) / 1e6 / n, PeakFLOPs: ceil.PeakFLOPs, PeakFP8FLOPs: ceil.PeakFP8FLOPs,
		CopyGBps: ceil.CopyGBps}
	for _, k := range p.order {
		r := *p.acc[k]
		r.Calls = int(float64(r.Calls)/n + 0.5)
		r.Ms /= n
		r.FLOPs /= n
		r.Bytes /= n
		if out.StepMs > 0 {
			r.Share = r.Ms / out.StepMs
		}
		if s := r.Ms / 1e3; s > 0 {
			switch {
			case r.FLOPs > 0:
				r.Rate, r.Unit = r.FLOPs/s/1e12, "TFLOP/s"
				peak := ceil.PeakFLOPs
				if strings.HasSuffix(r.Class, " fp8") { // an FP8 product: against the FP8 peak, or none
					peak = ceil.PeakFP8FLOPs
				}
				if peak > 0 {
					r.Pct = 100 * r.FLOPs / s / peak
				}
			case r.Bytes > 0:
				r.Rate, r.Unit = r.Bytes/s/1e9, "GB/s"
				if ceil.CopyGBps > 0 {
					r.Pct = 100 * r.Rate / ceil.CopyGBps
				}
			}
		}
		out.Rows = append(out.Rows, r)
	}
	sort.SliceStable(out.Rows, func(i, j int) bool { return out.Rows[i].Ms > out.Rows[j].Ms })
	return out
}

func (p *profiler) release() {
	for _, e := range p.events {
		_ = e.Destroy()
	}
	p.events = nil
}

// bytesOf sums the bytes of tensors (nil ones count nothing).
func bytesOf(ts ...*tensor.Tensor) float64 {
	var n float64
	for _, t := range ts {
		if t != nil {
			n += float64(t.Bytes())
		}
	}
	return n
}

// gemmClass names a product by its shape in the model.
func (p *profiler) gemmClass(C, OC int) string {
	c := p.cfg.Channels
	switch {
	case C == c && OC == 3*c:
		return fmt.Sprintf("gemm qkv %dx%d", OC, C)
	case C == c && OC == c:
		return fmt.Sprintf("gemm attn proj %dx%d", OC, C)
	case C == c && OC == 4*c:
		return fmt.Sprintf("gemm mlp fc %dx%d", OC, C)
	case C == 4*c && OC == c:
		return fmt.Sprintf("gemm mlp proj %dx%d", OC, C)
	case C == c && OC == p.cfg.Vocab:
		return fmt.Sprintf("gemm lm head %dx%d", OC, C)
	}
	return fmt.Sprintf("gemm %dx%d", OC, C)
}

// The timed ops: one method per op of device.Device and GradStorer (and
// graphProfiler's of Stepper), each timed under its descriptor's class
// (device.Contract.Class) with the work its descriptor counts: FLOPs, else
// the bytes of its tensors (inputs once, outputs once, accumulated outputs
// twice: Contract.Traffic), or a count of its own where the op reads less
// than its tensors (the encoder's rows) or more (a gradient written over
// its input). TestProfilerWrapsEveryOp fails for an op without one: an op
// promoted from the embedded Device would run untimed.
//
// The wrappers of Device's ops of regular signature (tensors in Params
// order, then sizes) are generated into profile_ops.go from
// pkg/device/device.go; the ones below are those the generator leaves
// alone because they are declared here: their work or their signature is
// not the regular one. TestProfileOpsUpToDate fails when profile_ops.go is
// not what the generator writes now.

//go:generate go run ./internal/genprofile/cmd

// op times the op of descriptor c at sizes s on tensors ts (in its Params
// order), a product under its shape's class.
func (p *profiler) op(c *device.Contract, s []int, ts []*device.T, run func()) {
	class := c.Class
	if class == "gemm" {
		class = p.gemmClass(s[1], s[2])
	}
	var flops, bytes float64
	if c.FLOPs != nil {
		flops = c.FLOPs(s, ts)
	} else {
		bytes = c.Traffic(ts)
	}
	p.timed(class, flops, bytes, run)
}

// tensors lists an op's tensor arguments in its Params order.
type tensors = []*device.T

// Encoder reads B·T rows of each table, not the whole tables its
// descriptor's Traffic would count.
func (p *profiler) Encoder(out, wte, wpe, tokens *device.T, B, T, C int) {
	rows := float64(B*T*C) * float64(wte.DType.Size())
	p.timed(device.Ops.Encoder.Class, 0, bytesOf(out, tokens)+2*rows, func() { p.Device.Encoder(out, wte, wpe, tokens, B, T, C) })
}

// EncoderBackward accumulates into B·T rows of each table, not the whole
// tables.
func (p *profiler) EncoderBackward(dwte, dwpe, dout, tokens *device.T, B, T, C int) {
	rows := float64(B*T*C) * float64(dwte.DType.Size())
	p.timed(device.Ops.EncoderBackward.Class, 0, bytesOf(dout, tokens)+4*rows, func() { p.Device.EncoderBackward(dwte, dwpe, dout, tokens, B, T, C) })
}

// MatmulBackwardStore is GradStorer's: on a device without it, the zeroing
// and MatmulBackward that the model would queue instead.
func (p *profiler) MatmulBackwardStore(dinp, dweight, dbias, dout, inp, weight *device.T, N, C, OC int) {
	s, ok := p.Device.(device.GradStorer)
	if !ok {
		p.Zero(dinp)
		p.MatmulBackward(dinp, dweight, dbias, dout, inp, weight, N, C, OC)
		return
	}
	p.op(&device.Ops.MatmulBackwardStore, []int{N, C, OC}, tensors{dinp, dweight, dbias, dout, inp, weight}, func() {
		s.MatmulBackwardStore(dinp, dweight, dbias, dout, inp, weight, N, C, OC)
	})
}

// AttentionBackwardStore is GradStorer's, with AttentionBackward's
// fallback as MatmulBackwardStore's.
func (p *profiler) AttentionBackwardStore(dqkv, dout, qkv, out, att *device.T, B, T, C, NH int) {
	s, ok := p.Device.(device.GradStorer)
	if !ok {
		p.Zero(dqkv)
		p.AttentionBackward(dqkv, dout, qkv, out, att, B, T, C, NH)
		return
	}
	p.op(&device.Ops.AttentionBackwardStore, []int{B, T, C, NH}, tensors{dqkv, dout, qkv, out, att}, func() {
		s.AttentionBackwardStore(dqkv, dout, qkv, out, att, B, T, C, NH)
	})
}

// CrossEntropy takes a float argument, and its gradient (dscale != 0)
// writes the logits a second time.
func (p *profiler) CrossEntropy(losses, logits, targets *device.T, N, V int, dscale float32) {
	b := bytesOf(losses, logits, targets)
	if dscale != 0 {
		b += bytesOf(logits) // the gradient overwrites the logits
	}
	p.timed(device.Ops.CrossEntropy.Class, 0, b, func() { p.Device.CrossEntropy(losses, logits, targets, N, V, dscale) })
}

// AdamWStep takes a layout and hyper-parameters, not sizes.
func (p *profiler) AdamWStep(master, work, grads, m, v *device.T, layout *tensor.Layout, hp device.AdamW) {
	p.op(&device.Ops.AdamWStep, nil, tensors{master, work, grads, m, v}, func() { p.Device.AdamWStep(master, work, grads, m, v, layout, hp) })
}

// GradNorm takes a float argument and returns values.
func (p *profiler) GradNorm(grads *device.T, scale float32) (norm float32, finite bool) {
	p.op(&device.Ops.GradNorm, nil, tensors{grads}, func() { norm, finite = p.Device.GradNorm(grads, scale) })
	return norm, finite
}

// Plumbing that a step's time includes (device.Plumbing: no descriptor).

func (p *profiler) Zero(t *device.T) {
	p.timed("zero", 0, bytesOf(t), func() { p.Device.Zero(t) })
}

func (p *profiler) Upload(dst, src *device.T) {
	if p.reps > 0 { // host copies are outside the step's graph
		p.Device.Upload(dst, src)
		return
	}
	p.timed(device.Ops.Cast.Class, 0, bytesOf(dst), func() { p.Device.Upload(dst, src) })
}

func (p *profiler) Download(dst, src *device.T) {
	if p.reps > 0 {
		p.Device.Download(dst, src)
		return
	}
	p.timed(device.Ops.Cast.Class, 0, bytesOf(dst), func() { p.Device.Download(dst, src) })
}

// CopyBandwidth measures the device's copy bandwidth in GB/s, counting
// bytes read plus bytes written: a 1 GiB device-to-device copy on a GPU
// (median of 10 after one warm-up, CUDA events), a 256 MiB copy in memory
// on the CPU.
func CopyBandwidth(dev device.Device) (float64, error) {
	if g, ok := dev.(*gpu.Device); ok {
		return gpuCopy(g)
	}
	return HostCopyBandwidth(1), nil
}

func gpuCopy(g *gpu.Device) (float64, error) {
	const n = 1 << 30
	src, err1 := g.Alloc(tensor.F32, n/4)
	dst, err2 := g.Alloc(tensor.F32, n/4)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	defer func() { g.Free(src); g.Free(dst) }()
	s := g.Stream()
	d, err := g.Context().Median(s, 10, func() error {
		return s.CopyDtoD(cuda.DevicePtr(dst.Dev), cuda.DevicePtr(src.Dev), n)
	})
	if err != nil {
		return 0, err
	}
	return 2 * n / d.Seconds() / 1e9, nil
}

// benchTrainer returns a trainer of c in mode m on dev, fed enough of the
// built-in corpus (folded into the vocabulary) for steps steps, with
// the FP8 recipe r (Options.FP8).
func benchTrainer(dev device.Device, c Case, m Mode, step train.StepMode, steps int, r amp.FP8Recipe) (*train.Trainer, error) {
	need := c.Batch*c.Seq*(steps+1) + 1
	toks, err := data.Encode(data.Corpus(1, min(need, 64<<20)))
	if err != nil {
		return nil, err
	}
	for i := range toks {
		toks[i] %= int32(c.Config.Vocab)
	}
	oc := optim.Defaults(steps)
	oc.Warmup = 1
	return train.New(dev, train.Options{Config: c.Config, Policy: m.Policy, Batch: c.Batch, Seq: c.Seq, Optim: oc, Seed: 1, Step: step, FP8: r}, toks, nil)
}
