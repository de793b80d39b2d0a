package cpu

// step.go: the device-resident training step's scalars (device.Stepper)
// and its state snapshots (device.StateSnap). The arithmetic is
// device.StepScalars, the reference the GPU kernel mirrors.

import (
	"fmt"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

var (
	_ device.Stepper   = (*Device)(nil)
	_ device.StateSnap = (*Device)(nil)
)

// needState records an error unless state is a host F32 tensor of
// device.StateLen elements.
func (d *Device) needState(op string, state *tensor.Tensor) bool {
	return d.needF32(op, state) && d.checkN(op, device.StateLen, state)
}

// CrossEntropyScaled is CrossEntropy with dscale·state[SlotScale].
func (d *Device) CrossEntropyScaled(losses, logits, targets, state *tensor.Tensor, N, V int, dscale float32) {
	if !d.needState("CrossEntropyScaled", state) {
		return
	}
	d.CrossEntropy(losses, logits, targets, N, V, dscale*state.F32()[device.SlotScale])
}

// StepUpdate computes the mean loss and Σ g² (as GradNorm does) and
// updates state with device.StepScalars.
// state (StateLen) F32, losses (N) F32, grads F32
func (d *Device) StepUpdate(state, losses, grads *tensor.Tensor, cfg device.StepConfig, hp device.AdamW) {
	const op = "StepUpdate"
	if !d.needState(op, state) || !d.needF32(op, losses, grads) {
		return
	}
	if losses.Numel() == 0 {
		d.fail(fmt.Errorf("cpu: %s: no losses", op))
		return
	}
	var sum float64
	for _, v := range losses.F32() {
		sum += float64(v)
	}
	loss := float32(sum / float64(losses.Numel()))
	device.StepScalars(state.F32(), loss, d.sumSqGrads(grads), cfg, hp)
}

// AdamWState is AdamWStep with the constants of state; a no-op when the
// step's gradients were not finite.
func (d *Device) AdamWState(master, work, grads, m, v *tensor.Tensor, layout *tensor.Layout, hp device.AdamW, state *tensor.Tensor) {
	const op = "AdamWState"
	if !d.needState(op, state) || layout == nil {
		if layout == nil {
			d.fail(fmt.Errorf("cpu: %s: nil layout", op))
		}
		return
	}
	st := state.F32()
	if st[device.SlotFinite] == 0 {
		return
	}
	if !d.needF32(op, master, grads, m, v) || !d.checkN(op, layout.Total, master, grads, m, v, work) {
		return
	}
	if work != nil && !d.needFloat(op, work) {
		return
	}
	spans, ok := d.adamSpans(op, layout)
	if !ok {
		return
	}
	c := hp.ConstsFromState(st)
	if d.fused {
		d.adamWFused(master, work, grads, m, v, spans, c)
	} else {
		d.adamWDecomposed(master, work, grads, m, v, spans, c)
	}
}

// Records keeps n state snapshots (the CPU copies at once; see Snapshot).
func (d *Device) Records(n int) error {
	if n < 1 {
		return fmt.Errorf("cpu: %d state records, want at least 1", n)
	}
	d.records = make([][]float32, n)
	for i := range d.records {
		d.records[i] = make([]float32, device.StateLen)
	}
	return nil
}

// Snapshot copies state into record i.
func (d *Device) Snapshot(i int, state *tensor.Tensor) {
	if !d.needState("Snapshot", state) {
		return
	}
	if i < 0 || i >= len(d.records) {
		d.fail(fmt.Errorf("cpu: state record %d of %d (call Records first)", i, len(d.records)))
		return
	}
	copy(d.records[i], state.F32())
}

// Record returns record i as of the last Snapshot into it.
func (d *Device) Record(i int) []float32 {
	if i < 0 || i >= len(d.records) {
		return nil
	}
	return d.records[i]
}
