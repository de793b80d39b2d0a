package gpu

// stage.go: small uploads through a ring of pinned host buffers, so that
// Upload is asynchronous for the host (a copy from pageable memory may make
// the driver wait for the stream first) and the host can queue the next
// step's batch while the device still runs the current one. Each slot's
// event, recorded after its copy, is waited on before the slot is reused;
// uploads larger than a slot, or a driver without pinned memory, take the
// plain pageable copy.

import (
	"fmt"

	"github.com/druto/druto/pkg/cuda"
)

const (
	stageSlots     = 8       // uploads in flight at most
	stageSlotBytes = 1 << 20 // the largest staged upload
)

type stager struct {
	mem  *cuda.Pinned
	ev   [stageSlots]*cuda.Event
	used [stageSlots]bool
	next int
	off  bool // pinned memory unavailable: every upload is a plain copy
}

// stagedUpload copies src to dst through the next pinned slot; it reports
// false when the upload should take the plain path.
func (d *Device) stagedUpload(dst cuda.DevicePtr, src []byte) bool {
	s := &d.stage
	if s.off || len(src) > stageSlotBytes {
		return false
	}
	if s.mem == nil {
		mem, err := d.ctx.AllocPinned(stageSlots * stageSlotBytes)
		if err != nil {
			s.off = true
			return false
		}
		s.mem = mem
		for i := range s.ev {
			if s.ev[i], err = d.ctx.NewEvent(); err != nil {
				s.off = true
				return false
			}
		}
	}
	k := s.next
	s.next = (s.next + 1) % stageSlots
	if s.used[k] {
		if err := s.ev[k].Synchronize(); err != nil {
			d.fail(fmt.Errorf("gpu: upload: %w", err))
			return true
		}
	}
	copy(s.mem.Bytes()[k*stageSlotBytes:], src)
	if err := d.stream.CopyFromPinned(dst, s.mem, k*stageSlotBytes, len(src)); err != nil {
		d.fail(fmt.Errorf("gpu: upload: %w", err))
		return true
	}
	if err := s.ev[k].Record(d.stream); err != nil {
		d.fail(fmt.Errorf("gpu: upload: %w", err))
		return true
	}
	s.used[k] = true
	return true
}

// closeStage frees the ring (the stream is idle: Close synchronised it).
func (d *Device) closeStage() error {
	s := &d.stage
	var err error
	for i, e := range s.ev {
		if e != nil {
			if e2 := e.Destroy(); err == nil {
				err = e2
			}
			s.ev[i] = nil
		}
	}
	if s.mem != nil {
		if e2 := s.mem.Free(); err == nil {
			err = e2
		}
		s.mem = nil
	}
	return err
}
