package cuda

import (
	"errors"
	"fmt"
	"slices"
	"time"
	"unsafe"
)

// Stream is a queue of device work (CUstream). The zero handle is the
// legacy default stream, which graph capture cannot use.
type Stream struct {
	c *Context
	h uintptr
}

// streamNonBlocking is CU_STREAM_NON_BLOCKING: no implicit sync with stream 0.
const streamNonBlocking = 1

// NewStream creates a non-blocking stream.
func (c *Context) NewStream() (*Stream, error) {
	s := &Stream{c: c}
	err := c.Do(func() error {
		var e error
		s.h, e = c.api.streamCreate(streamNonBlocking)
		return e
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// DefaultStream returns the legacy default stream.
func (c *Context) DefaultStream() *Stream { return &Stream{c: c} }

// Handle returns the CUstream, for libraries that take one.
func (s *Stream) Handle() uintptr { return s.h }

// Context returns the stream's context.
func (s *Stream) Context() *Context { return s.c }

// Synchronize waits for the stream's work and returns the first error of
// any launch in it.
func (s *Stream) Synchronize() error {
	return s.c.Do(func() error { return s.c.api.streamSynchronize(s.h) })
}

// WaitEvent makes later work on s wait for e's last recorded point.
func (s *Stream) WaitEvent(e *Event) error {
	return s.c.Do(func() error { return s.c.api.streamWaitEvent(s.h, e.h) })
}

// Destroy destroys the stream (not the default one).
func (s *Stream) Destroy() error {
	if s.h == 0 {
		return nil
	}
	return s.c.Do(func() error { return s.c.api.streamDestroy(s.h) })
}

// Plain is the element types that copy to and from the device as raw bytes.
type Plain interface {
	~uint8 | ~int8 | ~uint16 | ~int16 | ~uint32 | ~int32 | ~uint64 | ~int64 | ~float32 | ~float64
}

// bytesOf views a slice of plain values as its bytes.
func bytesOf[T Plain](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*int(unsafe.Sizeof(v[0])))
}

// CopyHtoD copies host bytes to dst. Host memory is Go memory (pageable):
// the driver has read src when the call returns, so src may be reused at
// once, though the copy to the device may still be in flight.
func (s *Stream) CopyHtoD(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return s.c.Do(func() error {
		return s.c.api.memcpyHtoD(dst, unsafe.Pointer(&src[0]), uint64(len(src)), s.h)
	})
}

// CopyDtoH copies device bytes into dst; it returns when dst holds them
// (copies into pageable memory are synchronous for the host).
func (s *Stream) CopyDtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	return s.c.Do(func() error {
		return s.c.api.memcpyDtoH(unsafe.Pointer(&dst[0]), src, uint64(len(dst)), s.h)
	})
}

// CopyDtoD queues a device-to-device copy of n bytes.
func (s *Stream) CopyDtoD(dst, src DevicePtr, n uint64) error {
	if n == 0 {
		return nil
	}
	return s.c.Do(func() error { return s.c.api.memcpyDtoD(dst, src, n, s.h) })
}

// Memset8 queues setting n bytes at p to v.
func (s *Stream) Memset8(p DevicePtr, v uint8, n uint64) error {
	if n == 0 {
		return nil
	}
	return s.c.Do(func() error { return s.c.api.memsetD8(p, v, n, s.h) })
}

// Memset32 queues setting n 32-bit words at p (4-byte aligned) to v.
func (s *Stream) Memset32(p DevicePtr, v uint32, n uint64) error {
	if n == 0 {
		return nil
	}
	return s.c.Do(func() error { return s.c.api.memsetD32(p, v, n, s.h) })
}

// Upload copies a slice of plain values to dst on stream s.
func Upload[T Plain](s *Stream, dst DevicePtr, src []T) error { return s.CopyHtoD(dst, bytesOf(src)) }

// Download copies device memory into a slice of plain values.
func Download[T Plain](s *Stream, dst []T, src DevicePtr) error { return s.CopyDtoH(bytesOf(dst), src) }

// Event marks a point in a stream (CUevent), for ordering and timing.
type Event struct {
	c *Context
	h uintptr
}

// NewEvent creates an event that records timing.
func (c *Context) NewEvent() (*Event, error) {
	e := &Event{c: c}
	err := c.Do(func() error {
		var err error
		e.h, err = c.api.eventCreate(0)
		return err
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Record marks the current end of stream s.
func (e *Event) Record(s *Stream) error {
	return e.c.Do(func() error { return e.c.api.eventRecord(e.h, s.h) })
}

// Synchronize waits until the recorded point is reached.
func (e *Event) Synchronize() error {
	return e.c.Do(func() error { return e.c.api.eventSynchronize(e.h) })
}

// Destroy destroys the event.
func (e *Event) Destroy() error {
	return e.c.Do(func() error { return e.c.api.eventDestroy(e.h) })
}

// Elapsed returns the device time from start to end, both recorded and end
// reached (it waits for end). The driver's resolution is about 0.5 µs.
func Elapsed(start, end *Event) (time.Duration, error) {
	var ms float32
	err := end.c.Do(func() error {
		if err := end.c.api.eventSynchronize(end.h); err != nil {
			return err
		}
		var err error
		ms, err = end.c.api.eventElapsedTime(start.h, end.h)
		return err
	})
	return time.Duration(float64(ms) * float64(time.Millisecond)), err
}

// Median times op on stream s with two events: one untimed run, then the
// median device time of runs more. op enqueues its work on s.
func (c *Context) Median(s *Stream, runs int, op func() error) (time.Duration, error) {
	e0, err1 := c.NewEvent()
	e1, err2 := c.NewEvent()
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	defer func() { _ = e0.Destroy(); _ = e1.Destroy() }()
	ts := make([]time.Duration, 0, runs)
	for i := range runs + 1 {
		if err := errors.Join(e0.Record(s), op(), e1.Record(s)); err != nil {
			return 0, err
		}
		d, err := Elapsed(e0, e1)
		if err != nil {
			return 0, err
		}
		if i > 0 {
			ts = append(ts, d)
		}
	}
	slices.Sort(ts)
	return ts[len(ts)/2], nil
}

// Capture modes of BeginCapture (CUstreamCaptureMode).
const (
	CaptureGlobal      = 0 // unsafe calls from any thread fail during capture
	CaptureThreadLocal = 1 // only this thread's unsafe calls fail
	CaptureRelaxed     = 2 // nothing is checked
)

// Graph is captured stream work, instantiated for replay (CUgraphExec).
type Graph struct {
	c    *Context
	g    uintptr
	exec uintptr
}

// Capture records the work fn queues on s (a stream from NewStream) into a
// graph instead of running it, and instantiates the graph. fn runs on the
// bound thread; nothing it queues runs until Launch. If fn fails, capture
// is ended and its partial graph discarded.
func (s *Stream) Capture(fn func() error) (*Graph, error) {
	if s.h == 0 {
		return nil, errors.New("cuda: graph capture needs a stream from NewStream, not the default stream")
	}
	g := &Graph{c: s.c}
	err := s.c.Do(func() error {
		api := s.c.api
		if err := api.streamBeginCapture(s.h, CaptureThreadLocal); err != nil {
			return err
		}
		ferr := fn()
		h, eerr := api.streamEndCapture(s.h)
		if ferr != nil || eerr != nil {
			if h != 0 {
				_ = api.graphDestroy(h)
			}
			return errors.Join(ferr, eerr)
		}
		x, err := api.graphInstantiate(h)
		if err != nil {
			_ = api.graphDestroy(h)
			return err
		}
		g.g, g.exec = h, x
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: graph capture: %w", err)
	}
	return g, nil
}

// Launch queues one replay of the graph on s.
func (g *Graph) Launch(s *Stream) error {
	return g.c.Do(func() error { return g.c.api.graphLaunch(g.exec, s.h) })
}

// Destroy frees the graph and its instantiation.
func (g *Graph) Destroy() error {
	return g.c.Do(func() error {
		return errors.Join(g.c.api.graphExecDestroy(g.exec), g.c.api.graphDestroy(g.g))
	})
}
