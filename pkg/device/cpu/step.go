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

// CrossEntropyScaled is CrossEntropy with dscale·state[SlotScale].
func (d *Device) CrossEntropyScaled(losses, logits, targets, state *tensor.Tensor, N, V int, dscale float32) {
	if !d.check(&device.Ops.CrossEntropyScaled, []int{N, V}, losses, logits, targets, state) {
		return
	}
	d.CrossEntropy(losses, logits, targets, N, V, dscale*state.F32()[device.SlotScale])
}

// StepUpdate computes the mean loss and Σ g² (as GradNorm does) and
// updates state with device.StepScalars.
// state (StateLen) F32, losses (N) F32, grads F32
func (d *Device) StepUpdate(state, losses, grads *tensor.Tensor, cfg device.StepConfig, hp device.AdamW) {
	const op = "StepUpdate"
	if !d.check(&device.Ops.StepUpdate, []int{device.Numel(losses), device.Numel(grads)}, state, losses, grads) {
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
	spans, ok := d.adamArgs(&device.Ops.AdamWState, master, work, grads, m, v, layout, hp, state)
	if !ok {
		return
	}
	st := state.F32()
	if st[device.SlotFinite] == 0 {
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
	if state == nil || !state.IsHost() || state.DType != tensor.F32 || state.Numel() != device.StateLen {
		d.fail(fmt.Errorf("cpu: Snapshot: the state is %v, want a host f32 tensor of %d: %w", state, device.StateLen, tensor.ErrShape))
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
