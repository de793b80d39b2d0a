package gpt

import (
	"fmt"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// GradientsQueued is Gradients on the batch of SetBatch with the loss scale
// taken on the device from state[device.SlotScale] (the device must be a
// device.Stepper): it queues forward and backward and returns without
// waiting or reading anything back, so it may be captured in a graph. The
// per-token losses stay on the device (Losses).
func (m *Model) GradientsQueued(B, T int, state *tensor.Tensor) error {
	return m.GradientsQueuedMicro(B, T, 1, state)
}

// GradientsQueuedMicro is GradientsQueued on one of micro equal
// micro-batches of a step: the gradient of scale × mean loss / micro is
// accumulated (see GradientsMicro).
func (m *Model) GradientsQueuedMicro(B, T, micro int, state *tensor.Tensor) error {
	if micro < 1 {
		return fmt.Errorf("gpt: %d micro-batches, want at least 1", micro)
	}
	if _, ok := m.dev.(device.Stepper); !ok {
		return fmt.Errorf("gpt: %s cannot keep the step's scalars on the device: %w", m.dev.Name(), device.ErrUnsupported)
	}
	if m.acts == nil || m.acts.B != B || m.acts.T != T {
		return fmt.Errorf("gpt: GradientsQueued for B %d x T %d without SetBatch of that size", B, T)
	}
	if m.trainsFP8() {
		if err := m.prepareFP8(); err != nil {
			return err
		}
	}
	m.run(B, T, true, 1/float32(micro*B*T), state)
	m.backward()
	return nil
}

// Losses returns the per-token losses (B·T, F32, on the device) of the
// last forward with targets.
func (m *Model) Losses() *tensor.Tensor {
	if m.acts == nil {
		return nil
	}
	return m.acts.losses
}

// BatchKey identifies the activation buffers a step at (B, T) uses now: a
// graph captured over them may be replayed only while BatchKey returns the
// same value (a new size, or buffers evicted and reallocated, change it).
func (m *Model) BatchKey() any { return m.acts }
