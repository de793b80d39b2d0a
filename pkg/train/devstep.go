package train

// devstep.go: the device-resident step and its CUDA graph.
//
// In StepDevice and StepGraph modes, the loss scale, the skip decision, the
// clip factor and AdamW's per-step constants live in a state tensor on the
// device (device.Stepper): a step queues the batch and learning-rate
// uploads, then zero-grad, forward, backward, the step update and AdamW
// with no host synchronisation, then an asynchronous copy of the state into
// a host record (device.StateSnap). The host waits only when it collects
// the records (every LogEvery steps, and before eval, samples and
// checkpoints), so ms/step is the wall time of the collected span over its
// steps, measured after the device finished it.
//
// StepGraph captures the queued part (zero-grad to AdamW) as one graph per
// (B, T, activation buffers), after one plain step that makes every
// allocation, cuBLASLt algorithm choice and table upload happen outside
// the capture. A capture or launch that fails is a one-line notice
// (Options.Notice) and plain launches from then on.
//
// With gradient accumulation (Options.Accum = n > 1) a step is the zeroing
// of the gradients and of the loss sum (two memsets, plain), then per
// micro-batch its token upload and the micro graph (forward and backward
// of B sequences into the gradient sum, and its per-token losses added to
// the loss sum), replayed n times, then the update graph (the step's
// scalars from the whole sum, and AdamW). Each graph has its own warm-up,
// key and capture, by the same rules as the one graph of a step.

import (
	"errors"
	"fmt"
	"time"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// StepMode says where the training step's decisions run.
type StepMode int

// Step modes.
const (
	StepHost   StepMode = iota // the GradScaler, clipping and the learning rate on the host; one readback per step
	StepDevice                 // on the device, plain launches, results read at the log interval
	StepGraph                  // on the device, captured once as a CUDA graph and replayed
)

// String names the mode: "host", "device" or "graph".
func (m StepMode) String() string {
	switch m {
	case StepDevice:
		return "device"
	case StepGraph:
		return "graph"
	}
	return "host"
}

// devStep is the trainer's device-step state.
type devStep struct {
	st     device.Stepper
	snap   device.StateSnap
	marker device.Marker  // per-step device timing (nil: none)
	state  *tensor.Tensor // (StateLen) F32 on the device
	lr     *tensor.Tensor // the SlotLR view of state
	cfg    device.StepConfig
	inited bool

	pending []pendingStep
	mark    time.Time // when the first pending step began queuing

	whole         graphSlot // the step without accumulation
	micro, update graphSlot // with accumulation: one micro-batch; the step's update
	noGraph       string    // why graphs are off (empty: not off)
	builds        int       // graphs captured
}

// graphSlot is one captured piece of the step and when it may be replayed.
type graphSlot struct {
	graph     device.Graph
	key       graphKey
	plainRuns int // plain runs since the key last changed (capture after one)
}

// reset closes the slot's graph and forgets its key.
func (g *graphSlot) reset() {
	if g.graph != nil {
		_ = g.graph.Close()
	}
	*g = graphSlot{}
}

// slots returns the device step's graph slots.
func (ds *devStep) slots() []*graphSlot { return []*graphSlot{&ds.whole, &ds.micro, &ds.update} }

type pendingStep struct {
	step int
	lr   float32
	rec  int
}

type graphKey struct {
	B, T int
	acts any
}

// DeviceStepWhy returns "" when dev can run the device-resident step with
// these options, else why not (one line).
func DeviceStepWhy(dev device.Device, o Options) string {
	if _, ok := dev.(device.Stepper); !ok {
		return dev.Name() + " has no device-resident step"
	}
	if _, ok := dev.(device.StateSnap); !ok {
		return dev.Name() + " cannot snapshot the step state"
	}
	if !dev.Fused() {
		return "the decomposed form keeps the host step (its AdamW is the per-tensor baseline)"
	}
	if o.Reducer != nil && o.Reducer.World() > 1 {
		return "data-parallel training averages the loss on the host"
	}
	return ""
}

// initDevStep sets up the device step when the mode asks for it and the
// device can; otherwise the host step runs, with a notice saying why.
func (t *Trainer) initDevStep() error {
	o := t.opts
	if o.Step == StepHost {
		return nil
	}
	if why := DeviceStepWhy(t.dev, o); why != "" {
		t.notice(fmt.Sprintf("train: %s step unavailable, host step: %s", o.Step, why))
		return nil
	}
	ds := &devStep{st: t.dev.(device.Stepper), snap: t.dev.(device.StateSnap)}
	var err error
	if ds.state, err = t.dev.Alloc(tensor.F32, device.StateLen); err != nil {
		return err
	}
	ds.lr = ds.state.MustView(device.SlotLR, 1)
	if err := ds.snap.Records(t.logEvery()); err != nil {
		t.dev.Free(ds.state)
		t.notice(fmt.Sprintf("train: %s step unavailable, host step: %s", o.Step, oneLine(err.Error())))
		return nil
	}
	// Two timing marks a pending step: before its uploads, after its snapshot.
	if mk, ok := t.dev.(device.Marker); ok && mk.Marks(2*t.logEvery()) == nil {
		ds.marker = mk
	}
	if o.Step == StepGraph {
		if _, ok := t.dev.(device.Grapher); !ok {
			ds.noGraph = "this device has no graphs"
			t.notice("train: CUDA graph unavailable, plain launches: " + ds.noGraph)
		}
	}
	t.ds = ds
	return nil
}

func (t *Trainer) logEvery() int { return max(1, t.opts.LogEvery) }

func (t *Trainer) notice(msg string) {
	if t.opts.Notice != nil {
		t.opts.Notice(msg)
	}
}

// GraphStatus says how the step runs: "host", "device", "graph" or
// "device (graph unavailable: why)".
func (t *Trainer) GraphStatus() string {
	switch {
	case t.ds == nil:
		return "host"
	case t.opts.Step == StepGraph && t.ds.noGraph == "":
		return "graph"
	case t.opts.Step == StepGraph:
		return "device (graph unavailable: " + t.ds.noGraph + ")"
	}
	return "device"
}

// GraphBuilds returns how many step graphs were captured.
func (t *Trainer) GraphBuilds() int {
	if t.ds == nil {
		return 0
	}
	return t.ds.builds
}

// writeState uploads the host's scaler and optimizer counts into the state
// (at the first device step, and after a resume).
func (t *Trainer) writeState() {
	ds, sc := t.ds, t.Scaler
	ds.cfg = device.StepConfig{Scaler: sc.Enabled, GrowthFactor: sc.GrowthFactor, BackoffFactor: sc.BackoffFactor,
		GrowthInterval: sc.GrowthInterval, ClipNorm: t.opts.Optim.ClipNorm}
	h := make([]float32, device.StateLen)
	h[device.SlotScale] = t.Scaler.LossScale()
	h[device.SlotGood] = float32(t.Scaler.GoodSteps)
	h[device.SlotSkipped] = float32(t.skipped)
	h[device.SlotOptSteps] = float32(t.Opt.Steps)
	ht, _ := tensor.FromF32(h, device.StateLen)
	t.dev.Upload(ds.state, ht)
	ds.inited = true
}

// hp is AdamW's fixed hyper-parameters (the per-step ones come from the state).
func (t *Trainer) hp() device.AdamW {
	c := t.Opt.Config
	return device.AdamW{Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps, WeightDecay: c.WeightDecay}
}

// microCore queues one micro-batch of an accumulated step: forward and
// backward into the gradient sum, Options.InjectGrad's value (uploaded as 0
// for every micro-batch but the first), and its per-token losses added to
// the loss sum.
func (t *Trainer) microCore() error {
	o, m := t.opts, t.Model
	if err := m.GradientsQueuedMicro(o.Batch, o.Seq, o.accum(), t.ds.state); err != nil {
		return err
	}
	if t.poison != nil {
		g := m.Grads().MustView(0, 1)
		t.dev.Add(g, g, t.poison, 1)
	}
	t.dev.Add(t.lossAcc, t.lossAcc, m.Losses(), o.Batch*o.Seq)
	return nil
}

// updateCore queues an accumulated step's update: the step's scalars from
// the loss sum and the summed gradients (norm, finite check, GradScaler,
// clip factor), then AdamW.
func (t *Trainer) updateCore() error {
	ds, m := t.ds, t.Model
	hp := t.hp()
	ds.st.StepUpdate(ds.state, t.lossAcc, m.Grads(), ds.cfg, hp)
	t.Opt.UpdateState(ds.st, m.Master(), m.Work(), m.Grads(), hp, ds.state, m.FP8Weights()...)
	return nil
}

// core queues the step from zero-grad to AdamW: the part a graph captures.
func (t *Trainer) core() error {
	ds, o, m := t.ds, t.opts, t.Model
	m.ZeroGrad()
	if err := m.GradientsQueued(o.Batch, o.Seq, ds.state); err != nil {
		return err
	}
	if t.poison != nil {
		g := m.Grads().MustView(0, 1)
		t.dev.Add(g, g, t.poison, 1)
	}
	hp := t.hp()
	ds.st.StepUpdate(ds.state, m.Losses(), m.Grads(), ds.cfg, hp)
	t.Opt.UpdateState(ds.st, m.Master(), m.Work(), m.Grads(), hp, ds.state, m.FP8Weights()...)
	return nil
}

// batch runs fn through the device's Batcher when it has one.
func (t *Trainer) batch(fn func() error) error { return device.Batch(t.dev, fn) }

// queueDevice queues one device-resident step and its state snapshot.
func (t *Trainer) queueDevice() error {
	ds, o := t.ds, t.opts
	if len(ds.pending) >= t.logEvery() {
		return errors.New("train: internal: more pending steps than state records")
	}
	if len(ds.pending) == 0 {
		ds.mark = time.Now()
	}
	if err := t.train.Next(t.in, t.tg); err != nil {
		return err
	}
	step := t.step + 1
	lr := o.Optim.LRAt(step)
	rec := len(ds.pending)
	err := t.batch(func() error {
		if ds.marker != nil {
			ds.marker.Mark(2 * rec)
		}
		if !ds.inited {
			t.writeState()
		}
		lrh, _ := tensor.FromF32([]float32{lr}, 1)
		t.dev.Upload(ds.lr, lrh)
		if o.accum() > 1 {
			if err := t.queueAccum(step); err != nil {
				return err
			}
		} else {
			if err := t.Model.SetBatch(t.in, t.tg, o.Batch, o.Seq); err != nil {
				return err
			}
			t.uploadPoison(step, 0)
			if err := t.runGraph(&ds.whole, t.core); err != nil {
				return err
			}
		}
		ds.snap.Snapshot(rec, ds.state)
		if ds.marker != nil {
			ds.marker.Mark(2*rec + 1)
		}
		return nil
	})
	if err != nil {
		return err
	}
	t.step = step
	ds.pending = append(ds.pending, pendingStep{step: step, lr: lr, rec: rec})
	return nil
}

// uploadPoison uploads Options.InjectGrad's value for micro-batch i of step
// (the value at i = 0, else 0: it is added once per step).
func (t *Trainer) uploadPoison(step, i int) {
	if t.poison == nil {
		return
	}
	v := float32(0)
	if i == 0 {
		v = t.opts.InjectGrad(step)
	}
	ph, _ := tensor.FromF32([]float32{v}, 1)
	t.dev.Upload(t.poison, ph)
}

// queueAccum queues an accumulated step: the gradients and the loss sum
// zeroed, then per micro-batch its upload and the micro graph, then the
// update graph.
func (t *Trainer) queueAccum(step int) error {
	ds, o, m := t.ds, t.opts, t.Model
	BT := o.Batch * o.Seq
	m.ZeroGrad()
	t.dev.Zero(t.lossAcc)
	for i := range o.accum() {
		if err := m.SetBatch(t.in[i*BT:(i+1)*BT], t.tg[i*BT:(i+1)*BT], o.Batch, o.Seq); err != nil {
			return err
		}
		t.uploadPoison(step, i)
		if err := t.runGraph(&ds.micro, t.microCore); err != nil {
			return err
		}
	}
	return t.runGraph(&ds.update, t.updateCore)
}

// runGraph queues fn plainly or as the replay of slot's graph, capturing
// the graph when the mode asks for one and the slot's key has had its
// plain warm-up run.
func (t *Trainer) runGraph(slot *graphSlot, fn func() error) error {
	ds, o := t.ds, t.opts
	if o.Step != StepGraph || ds.noGraph != "" {
		return fn()
	}
	key := graphKey{B: o.Batch, T: o.Seq, acts: t.Model.BatchKey()}
	if slot.key != key {
		slot.reset()
		slot.key = key
	}
	if slot.graph == nil {
		if slot.plainRuns < 1 { // warm-up: every lazy allocation happens here
			slot.plainRuns++
			return fn()
		}
		// The warm-up's errors surface before capturing, not inside it.
		if err := t.dev.Sync(); err != nil {
			return err
		}
		g, err := t.dev.(device.Grapher).Capture(fn)
		if err != nil {
			ds.noGraph = "capture failed: " + oneLine(err.Error())
			t.notice("train: CUDA graph unavailable, plain launches: " + ds.noGraph)
			return fn()
		}
		slot.graph = g
		ds.builds++
	}
	if err := slot.graph.Launch(); err != nil {
		_ = slot.graph.Close()
		slot.graph = nil
		if errors.Is(err, device.ErrGraphStale) {
			// A buffer moved (an eval or a sample at a larger shape grew a
			// scratch buffer): this plain run is the warm-up of a new capture.
			slot.plainRuns = 1
			return fn()
		}
		ds.noGraph = "launch failed: " + oneLine(err.Error())
		t.notice("train: CUDA graph unavailable, plain launches: " + ds.noGraph)
		return fn()
	}
	return nil
}

// oneLine keeps the first line of s.
func oneLine(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}

// collect waits for the pending steps and returns their metrics; ms/step is
// the span from the first one's queuing to the end of the wait, over the
// number of steps, and each step's DeviceMs its time between its own
// timing marks (where the device has them).
func (t *Trainer) collect() ([]Metric, error) {
	ds, o := t.ds, t.opts
	if len(ds.pending) == 0 {
		return nil, nil
	}
	if err := t.dev.Sync(); err != nil {
		ds.pending = ds.pending[:0]
		return nil, err
	}
	el := time.Since(ds.mark)
	per := el.Seconds() / float64(len(ds.pending))
	out := make([]Metric, 0, len(ds.pending))
	var last []float32
	skipped := t.skipped // the count before the first pending step
	for _, p := range ds.pending {
		r := ds.snap.Record(p.rec)
		n := int(r[device.SlotSkipped])
		loss := r[device.SlotLoss]
		if o.accum() > 1 { // StepUpdate took the mean of the loss sum
			loss = accumLoss(loss, o.accum())
		}
		var devMs float64
		if ds.marker != nil {
			var err error
			if devMs, err = ds.marker.Between(2*p.rec, 2*p.rec+1); err != nil {
				ds.pending = ds.pending[:0]
				return nil, err
			}
		}
		out = append(out, Metric{
			Step: p.step, Loss: loss, LR: p.lr, GradNorm: r[device.SlotNorm],
			LossScale: r[device.SlotUsedScale], StepSkipped: n > skipped, Skipped: n,
			MsPerStep: per * 1000, TokensPerS: float64(o.accum()*o.Batch*o.Seq) / per, DeviceMs: devMs,
		})
		skipped, last = n, r
	}
	ds.pending = ds.pending[:0]
	// Keep the host's copies current for Save, Metric and callers.
	t.skipped = int(last[device.SlotSkipped])
	t.Opt.Steps = int(last[device.SlotOptSteps])
	if t.Scaler.Enabled {
		t.Scaler.Scale, t.Scaler.GoodSteps, t.Scaler.Skipped = last[device.SlotScale], int(last[device.SlotGood]), t.skipped
	}
	return out, nil
}

// inject adds Options.InjectGrad(step) to the first gradient (host step).
func (t *Trainer) inject(step int) error {
	h, _ := tensor.FromF32([]float32{t.opts.InjectGrad(step)}, 1)
	t.dev.Upload(t.poison, h)
	g := t.Model.Grads().MustView(0, 1)
	t.dev.Add(g, g, t.poison, 1)
	return nil
}

// closeDevStep frees the graph and the state.
func (t *Trainer) closeDevStep() {
	if t.ds == nil {
		return
	}
	for _, s := range t.ds.slots() {
		s.reset()
	}
	t.dev.Free(t.ds.state)
	t.ds = nil
}
