package gpu

// stage.go: small copies through rings of pinned host buffers. Uploads
// (stage) are asynchronous for the host (a copy from pageable memory may
// make the driver wait for the stream first), so the host can queue the
// next step's batch while the device still runs the current one. Fetches
// (device.Fetcher) copy device results into a slot without waiting, and
// Fetched.Wait waits for that slot's event alone, not for the work queued
// after it. Each slot's event, recorded after its copy, is waited on before
// the slot is reused; copies larger than a slot, or a driver without pinned
// memory, take the plain pageable path.

import (
	"fmt"

	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

var _ device.Fetcher = (*Device)(nil)

const (
	stageSlots     = 8       // copies in flight at most, a ring
	stageSlotBytes = 1 << 20 // the largest staged upload
	fetchSlotBytes = 64 << 10
)

type stager struct {
	mem  *cuda.Pinned
	ev   [stageSlots]*cuda.Event
	used [stageSlots]bool
	gen  [stageSlots]uint64 // fetches: the copies a slot has held (a Fetched checks its own is still there)
	next int
	off  bool // pinned memory unavailable: every copy is a plain one
}

// slot returns the next slot of a ring of slotBytes slots, allocating the
// ring at first use and waiting for the slot's last copy; ok is false when
// the copy should take the plain path.
func (s *stager) slot(d *Device, slotBytes int) (k int, ok bool) {
	if s.off {
		return 0, false
	}
	if s.mem == nil {
		mem, err := d.ctx.AllocPinned(stageSlots * slotBytes)
		if err != nil {
			s.off = true
			return 0, false
		}
		s.mem = mem
		for i := range s.ev {
			if s.ev[i], err = d.ctx.NewEvent(); err != nil {
				s.off = true
				return 0, false
			}
		}
	}
	k = s.next
	s.next = (s.next + 1) % stageSlots
	if s.used[k] {
		if err := s.ev[k].Synchronize(); err != nil {
			d.fail(fmt.Errorf("gpu: staged copy: %w", err))
		}
	}
	s.gen[k]++
	return k, true
}

// stagedUpload copies src to dst through the next pinned slot; it reports
// false when the upload should take the plain path.
func (d *Device) stagedUpload(dst cuda.DevicePtr, src []byte) bool {
	s := &d.stage
	if len(src) > stageSlotBytes {
		return false
	}
	k, ok := s.slot(d, stageSlotBytes)
	if !ok {
		return false
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

// Fetch queues the copy of src into the host tensor dst through the next
// slot of the fetch ring (device.Fetcher); a copy larger than a slot, or
// without pinned memory, is a plain Download, done when Fetch returns.
func (d *Device) Fetch(dst, src *tensor.Tensor) device.Fetched {
	if !d.sameRaw("fetch", dst, src) {
		return fetched{d: d, k: -1}
	}
	n := dst.Bytes()
	if !dst.IsHost() || src.IsHost() || d.capturing || n > fetchSlotBytes {
		d.Download(dst, src) // records why it cannot copy, if it cannot
		return fetched{d: d, k: -1}
	}
	s := &d.fetch
	k, ok := s.slot(d, fetchSlotBytes)
	if !ok {
		d.Download(dst, src)
		return fetched{d: d, k: -1}
	}
	if err := d.stream.CopyToPinned(s.mem, k*fetchSlotBytes, cuda.DevicePtr(src.Dev), n); err != nil {
		d.fail(fmt.Errorf("gpu: fetch: %w", err))
	} else if err := s.ev[k].Record(d.stream); err != nil {
		d.fail(fmt.Errorf("gpu: fetch: %w", err))
	}
	s.used[k] = true
	return fetched{d: d, k: k, gen: s.gen[k], dst: dst}
}

// fetched is a Fetch's copy: slot k of the fetch ring while its gen is
// unchanged (k -1: already in dst).
type fetched struct {
	d   *Device
	k   int
	gen uint64
	dst *tensor.Tensor
}

// Wait waits for the slot's event, fills dst from the slot and returns the
// first error recorded since the last Sync or Wait (then cleared).
func (f fetched) Wait() error {
	d := f.d
	if f.k >= 0 {
		s := &d.fetch
		if s.gen[f.k] != f.gen {
			return fmt.Errorf("gpu: fetch waited for after %d later fetches reused its slot", stageSlots)
		}
		if err := s.ev[f.k].Synchronize(); err != nil {
			d.fail(fmt.Errorf("gpu: fetch: %w", err))
		} else {
			copy(f.dst.Raw(), s.mem.Bytes()[f.k*fetchSlotBytes:])
		}
	}
	d.mu.Lock()
	err := d.err
	d.err = nil
	d.mu.Unlock()
	return err
}

// closeStage frees the rings (the stream is idle: Close synchronised it).
func (d *Device) closeStage() error {
	var err error
	for _, s := range []*stager{&d.stage, &d.fetch} {
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
	}
	return err
}
