package gpu

// step.go: the device-resident training step (device.Stepper: the loss
// scale, skip decision, clip factor and AdamW's per-step constants decided
// by kernels/step.cu's step_update, and adamw_fused_state2 reading them),
// state snapshots into pinned host memory (device.StateSnap), CUDA graph
// capture of queued work (device.Grapher), one-hop batches of ops
// (device.Batcher), and the count of queued launches.
//
// Nothing here synchronises with the host: a step queued with these ops
// from zero-grad to the optimizer update can be captured and replayed.
// While capturing, an op that would allocate (a scratch buffer growing, a
// first cuBLASLt algorithm choice, an AdamW chunk table upload) records an
// error instead, so the capture fails and the caller falls back to plain
// launches: run the step once before capturing it.

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

var (
	_ device.Stepper   = (*Device)(nil)
	_ device.StateSnap = (*Device)(nil)
	_ device.Grapher   = (*Device)(nil)
	_ device.Batcher   = (*Device)(nil)
)

// Launches returns how many kernels, cuBLAS(Lt) calls and memsets the
// device has queued so far (graph replays not included): the difference
// over a step is its launch count.
func (d *Device) Launches() int64 { return d.launches.Load() }

// checkState records an error unless state is a device F32 tensor of
// device.StateLen elements (Snapshot's argument; the ops' contracts
// check theirs).
func (d *Device) checkState(op string, state *tensor.Tensor) bool {
	if state == nil || state.Dev == 0 || state.Numel() != device.StateLen || state.DType != tensor.F32 {
		d.fail(fmt.Errorf("gpu: %s: the state is %s, want a device f32 tensor of %d: %w", op, desc(state), device.StateLen, tensor.ErrShape))
		return false
	}
	return true
}

// CrossEntropyScaled is CrossEntropy with dscale·state[SlotScale], the
// multiply done by the kernel on the device.
func (d *Device) CrossEntropyScaled(losses, logits, targets, state *tensor.Tensor, N, V int, dscale float32) {
	if !d.check(&device.Ops.CrossEntropyScaled, []int{N, V}, losses, logits, targets, state) {
		return
	}
	d.crossEntropy(losses, logits, targets, N, V, dscale, d.ptr(state).Add(4*device.SlotScale))
}

// StepUpdate queues gradnorm_partial2 over grads and step_update, which
// takes the mean loss, the norm and the finite check, and updates state as
// device.StepScalars does.
// state (StateLen) F32, losses (N) F32, grads F32
func (d *Device) StepUpdate(state, losses, grads *tensor.Tensor, cfg device.StepConfig, hp device.AdamW) {
	const op = "step update"
	if !d.check(&device.Ops.StepUpdate, []int{device.Numel(losses), device.Numel(grads)}, state, losses, grads) {
		return
	}
	n, nl := grads.Numel(), losses.Numel()
	if n == 0 || nl == 0 || nl >= 1<<31 {
		d.fail(fmt.Errorf("gpu: %s: %d gradients and %d losses, want both in [1, 2^31): %w", op, n, nl, tensor.ErrShape))
		return
	}
	part, nb := d.gnPartials(n)
	if part == 0 {
		return
	}
	d.batch(func() {
		_ = d.kGradNormPartial(part, nb, grads, n) && d.run("step_update", tensor.F32, cuda.D1(1), cuda.D1(stepBlock), 0, d.ptr(state), d.ptr(losses), nl, part, nb,
			b2i(cfg.Scaler), cfg.GrowthFactor, cfg.BackoffFactor, cfg.GrowthInterval, cfg.ClipNorm,
			hp.Beta1, hp.Beta2, hp.WeightDecay)
	})
}

// AdamWState queues adamw_fused_state2: AdamW with the per-step constants
// of state, a no-op on the device when the step was not finite. The
// decomposed form has no such kernel: the optimizer step of the
// device-resident step is the fused one on either device.
// master, grads, m, v (layout.Total) F32; work (layout.Total) 16-bit, F32 or nil; state (StateLen) F32
func (d *Device) AdamWState(master, work, grads, m, v *tensor.Tensor, layout *tensor.Layout, hp device.AdamW, state *tensor.Tensor) {
	wdt, spans, ok := d.adamArgs(&device.Ops.AdamWState, master, work, grads, m, v, layout, hp, state)
	if !ok {
		return
	}
	table, chunks := d.adamTable(layout, spans)
	if table == 0 || chunks == 0 {
		return
	}
	c := hp.Consts() // the fixed parts: w1, small, b2, w2, eps
	vec := vec4(d.ptr(master), 4, d.ptr(grads), 4, d.ptr(m), 4, d.ptr(v), 4, d.ptr(work), wdt.Size())
	d.run("adamw_fused_state2", wdt, cuda.D1(chunks), cuda.D1(adamwBlock), 0,
		d.ptr(master), d.ptr(work), d.ptr(grads), d.ptr(m), d.ptr(v), table, d.ptr(state),
		c.W1, b2i(c.Small), c.B2, c.W2, c.Eps, vec)
}

// Records keeps n state snapshots in pinned host memory (freeing earlier
// ones: call it before any Snapshot is queued, or after a Sync).
func (d *Device) Records(n int) error {
	if n < 1 {
		return fmt.Errorf("gpu: %d state records, want at least 1", n)
	}
	if d.records != nil && d.nrecords >= n {
		return nil
	}
	if d.records != nil {
		if err := d.stream.Synchronize(); err != nil {
			return fmt.Errorf("gpu: state records: %w", err)
		}
		if err := d.records.Free(); err != nil {
			return fmt.Errorf("gpu: state records: %w", err)
		}
		d.records, d.nrecords = nil, 0
	}
	p, err := d.ctx.AllocPinned(n * device.StateLen * 4)
	if err != nil {
		return fmt.Errorf("gpu: state records in pinned memory: %w", err)
	}
	d.records, d.nrecords = p, n
	return nil
}

// Snapshot queues an asynchronous copy of state into record i.
func (d *Device) Snapshot(i int, state *tensor.Tensor) {
	if !d.checkState("snapshot", state) {
		return
	}
	if i < 0 || i >= d.nrecords {
		d.fail(fmt.Errorf("gpu: state record %d of %d (call Records first)", i, d.nrecords))
		return
	}
	const size = device.StateLen * 4
	if err := d.stream.CopyToPinned(d.records, i*size, d.ptr(state), size); err != nil {
		d.fail(fmt.Errorf("gpu: snapshot: %w", err))
	}
}

// Record returns record i (valid after the Sync that follows its Snapshot,
// until the next Snapshot into it).
func (d *Device) Record(i int) []float32 {
	if i < 0 || i >= d.nrecords {
		return nil
	}
	b := d.records.Bytes()[i*device.StateLen*4:]
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), device.StateLen)
}

// Batch runs fn on the context's thread, so every op it queues is issued
// there directly (no hop per op); it returns fn's error. Op errors are
// recorded as always and returned by the next Sync.
func (d *Device) Batch(fn func() error) error {
	if launchHook != nil {
		return fn()
	}
	return d.ctx.Do(fn)
}

// graph is a captured, instantiated step.
type graph struct {
	d     *Device
	g     *cuda.Graph
	moves int // d.moves at capture
}

// Capture records the work fn queues on the device's stream into a CUDA
// graph (thread-local capture mode) and instantiates it; nothing runs
// until Launch. It fails, with the reason, when an earlier error is
// pending, when fn or an op inside it fails (an allocation, a synchronising
// call, a driver without graphs), or when instantiation fails; the error
// recorded inside the failed capture is cleared, so the caller can run the
// same work plainly.
func (d *Device) Capture(fn func() error) (device.Graph, error) {
	if d.failed() {
		return nil, errors.New("gpu: graph capture with an error pending (Sync first)")
	}
	d.capturing = true
	g, err := d.stream.Capture(func() error {
		if err := fn(); err != nil {
			return err
		}
		return d.takeErr()
	})
	d.capturing = false
	if err != nil {
		ferr := d.takeErr()
		return nil, fmt.Errorf("gpu: %w", errors.Join(err, ferr))
	}
	return &graph{d: d, g: g, moves: d.moves}, nil
}

// takeErr returns and clears the recorded error.
func (d *Device) takeErr() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	err := d.err
	d.err = nil
	return err
}

// Launch queues one replay of the graph on the device's stream, or returns
// device.ErrGraphStale when a scratch buffer or table it uses was
// reallocated since the capture (an op ran at a larger shape).
func (g *graph) Launch() error {
	if g.g == nil {
		return errors.New("gpu: launch of a closed graph")
	}
	if g.moves != g.d.moves {
		return fmt.Errorf("gpu: %w", device.ErrGraphStale)
	}
	g.d.launches.Add(1)
	if err := g.g.Launch(g.d.stream); err != nil {
		return fmt.Errorf("gpu: graph launch: %w", err)
	}
	return nil
}

// Close frees the graph (after the work queued on the stream).
func (g *graph) Close() error {
	if g.g == nil {
		return nil
	}
	err := g.d.stream.Synchronize()
	err = errors.Join(err, g.g.Destroy())
	g.g = nil
	return err
}
