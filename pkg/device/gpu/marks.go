package gpu

// marks.go: device.Marker, CUDA events recorded on the device's stream, so
// that a caller times each queued step on the device (the training step's
// per-step timing) without waiting between steps.

import (
	"errors"
	"fmt"

	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
)

// Marks keeps n timing events (creating more when fewer exist; call it
// before any Mark is queued, or after a Sync).
func (d *Device) Marks(n int) error {
	if n < 1 {
		return fmt.Errorf("gpu: %d timing marks, want at least 1", n)
	}
	for len(d.marks) < n {
		e, err := d.ctx.NewEvent()
		if err != nil {
			return fmt.Errorf("gpu: timing marks: %w", err)
		}
		d.marks = append(d.marks, e)
	}
	return nil
}

// Mark queues timestamp i (of those Marks keeps) at the current end of the
// stream; a failure is recorded and returned by the next Sync.
func (d *Device) Mark(i int) {
	if i < 0 || i >= len(d.marks) {
		d.fail(fmt.Errorf("gpu: timing mark %d of %d (call Marks first)", i, len(d.marks)))
		return
	}
	if err := d.marks[i].Record(d.stream); err != nil {
		d.fail(fmt.Errorf("gpu: timing mark: %w", err))
	}
}

// Between returns the device time in milliseconds from mark a to mark b
// (waiting for b).
func (d *Device) Between(a, b int) (float64, error) {
	if a < 0 || b < 0 || a >= len(d.marks) || b >= len(d.marks) {
		return 0, fmt.Errorf("gpu: timing marks %d, %d of %d", a, b, len(d.marks))
	}
	el, err := cuda.Elapsed(d.marks[a], d.marks[b])
	if err != nil {
		return 0, fmt.Errorf("gpu: timing marks: %w", err)
	}
	return float64(el.Nanoseconds()) / 1e6, nil
}

// closeMarks destroys the timing events (the stream is idle).
func (d *Device) closeMarks() error {
	var errs []error
	for _, e := range d.marks {
		errs = append(errs, e.Destroy())
	}
	d.marks = nil
	return errors.Join(errs...)
}

var _ device.Marker = (*Device)(nil)
