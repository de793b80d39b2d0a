package cuda

import (
	"fmt"
	"unsafe"
)

// Pinned is page-locked host memory (cuMemHostAlloc). Copies between it
// and the device are truly asynchronous and may be captured in a graph, so
// the host must not touch bytes a queued copy still reads or writes: order
// that with an event or a Sync.
type Pinned struct {
	c *Context
	p unsafe.Pointer
	n int
}

// AllocPinned returns n bytes of page-locked host memory (zeroed). A
// driver without cuMemHostAlloc returns an Error named
// CUDA_ERROR_NOT_SUPPORTED.
func (c *Context) AllocPinned(n int) (*Pinned, error) {
	if n <= 0 {
		return nil, fmt.Errorf("cuda: pinned allocation of %d bytes, want at least 1", n)
	}
	m := &Pinned{c: c, n: n}
	err := c.Do(func() error {
		var err error
		m.p, err = c.api.hostAlloc(uint64(n))
		return err
	})
	if err != nil {
		return nil, err
	}
	clear(m.Bytes())
	return m, nil
}

// Bytes returns the memory as a slice (valid until Free).
func (m *Pinned) Bytes() []byte { return unsafe.Slice((*byte)(m.p), m.n) }

// Len returns the size in bytes.
func (m *Pinned) Len() int { return m.n }

// Free releases the memory; no queued copy may still use it.
func (m *Pinned) Free() error {
	if m == nil || m.p == nil {
		return nil
	}
	err := m.c.Do(func() error { return m.c.api.hostFree(m.p) })
	m.p, m.n = nil, 0
	return err
}

func (m *Pinned) span(off, n int) error {
	if m.p == nil || off < 0 || n < 0 || off+n > m.n {
		return fmt.Errorf("cuda: pinned bytes [%d,%d) outside the %d-byte buffer", off, off+n, m.n)
	}
	return nil
}

// CopyFromPinned queues copying n bytes at src[off:] to dst; it returns at
// once, and src must keep those bytes until the copy has run.
func (s *Stream) CopyFromPinned(dst DevicePtr, src *Pinned, off, n int) error {
	if err := src.span(off, n); err != nil || n == 0 {
		return err
	}
	return s.c.Do(func() error {
		return s.c.api.memcpyHtoD(dst, unsafe.Add(src.p, off), uint64(n), s.h)
	})
}

// CopyToPinned queues copying n bytes at src to dst[off:]; they are there
// once the stream has reached the copy (a Sync or an event).
func (s *Stream) CopyToPinned(dst *Pinned, off int, src DevicePtr, n int) error {
	if err := dst.span(off, n); err != nil || n == 0 {
		return err
	}
	return s.c.Do(func() error {
		return s.c.api.memcpyDtoH(unsafe.Add(dst.p, off), src, uint64(n), s.h)
	})
}
