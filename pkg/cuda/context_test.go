//go:build linux

package cuda

import (
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestContextOneThread: every call that needs the context runs on one OS
// thread, whichever goroutine makes it, and calls inside Do do not hop.
func TestContextOneThread(t *testing.T) {
	f := newFakeDriver()
	c, err := fakeContext(f)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				p, err := c.Pool().Alloc(4096)
				if err == nil {
					err = c.Pool().Free(p)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	inner := -1
	err = c.Do(func() error {
		inner = syscall.Gettid()
		s, err := c.NewStream() // nested: must run directly, not deadlock
		if err != nil {
			return err
		}
		return s.Synchronize()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.threads) != 1 {
		t.Fatalf("CUDA calls ran on %d OS threads: %v", len(f.threads), f.threads)
	}
	for tid := range f.threads {
		if tid != inner {
			t.Fatalf("Do ran on thread %d, the driver calls on %d", inner, tid)
		}
	}
	if f.calls[0] != "cuDevicePrimaryCtxRetain" || f.calls[1] != "cuCtxSetCurrent" {
		t.Fatalf("context not made current first: %q", f.calls[:2])
	}
	if last := f.calls[len(f.calls)-1]; last != "cuDevicePrimaryCtxRelease_v2" {
		t.Fatalf("last call %q, want the primary context's release", last)
	}
	if err := c.Do(func() error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Do after Close: %v, want ErrClosed", err)
	}
}

// TestContextPanicAndErrors: a panic inside Do reaches the caller, and a
// failing call's Error comes back named.
func TestContextPanicAndErrors(t *testing.T) {
	f := newFakeDriver()
	c, err := fakeContext(f)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Errorf("recovered %v, want boom", p)
			}
		}()
		_ = c.Do(func() error { panic("boom") })
	}()
	f.failCall = "cuStreamCreate"
	_, err = c.NewStream()
	var ce Error
	if !errors.As(err, &ce) || ce.Call != "cuStreamCreate" || ce.Name != "CUDA_ERROR_INVALID_VALUE" {
		t.Fatalf("err = %v", err)
	}
	f.failCall = "cuModuleLoadDataEx"
	_, err = c.LoadModule([]byte(".version 7.8\n"))
	if err == nil || !strings.Contains(err.Error(), "fake JIT failure") {
		t.Fatalf("JIT log missing from %v", err)
	}
	f.failCall = ""
	m, err := c.LoadModule([]byte(".version 7.8\n"))
	if err != nil || !m.FromPTX {
		t.Fatalf("PTX load: %v, FromPTX %v", err, m != nil && m.FromPTX)
	}
	fn, err := m.Function("k")
	if err != nil {
		t.Fatal(err)
	}
	if err := fn.Launch(c.DefaultStream(), D1(0), D1(32), 0); err == nil {
		t.Fatal("launch with an empty grid accepted")
	}
	if err := fn.Launch(c.DefaultStream(), D1(1), D1(32), 0, "a string"); err == nil || !strings.Contains(err.Error(), "unsupported type string") {
		t.Fatalf("launch with a string argument: %v", err)
	}
	if err := fn.Launch(c.DefaultStream(), D1(1), D1(32), 0, DevicePtr(0x1000), 3, float32(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DefaultStream().Capture(func() error { return nil }); err == nil {
		t.Fatal("capture on the default stream accepted")
	}
	s, _ := c.NewStream()
	want := errors.New("fn failed")
	if _, err := s.Capture(func() error { return want }); !errors.Is(err, want) {
		t.Fatalf("capture error %v, want fn's", err)
	}
}

// TestContextOutOfMemory: the pool over a context reports the bytes asked
// and free, after giving its cache back and retrying once.
func TestContextOutOfMemory(t *testing.T) {
	f := newFakeDriver()
	f.capacity = 64 << 20
	c, err := fakeContext(f)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := c.Pool()
	a, err := p.Alloc(40 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Free(a); err != nil { // cached: the driver still counts it used
		t.Fatal(err)
	}
	b, err := p.Alloc(30 << 20) // another class: must release the cache, retry, succeed
	if err != nil {
		t.Fatalf("alloc after release: %v", err)
	}
	if st := p.Stats(); st.Frees != 1 || st.Cached != 0 {
		t.Fatalf("stats %+v, want the cached block given back", st)
	}
	_, err = p.Alloc(100 << 20)
	var oom *OutOfMemoryError
	if !errors.As(err, &oom) || !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("err = %v, want *OutOfMemoryError", err)
	}
	if oom.Asked != 100<<20 || oom.Free != (64<<20)-(30<<20) || oom.Total != 64<<20 {
		t.Fatalf("oom = %+v", oom)
	}
	for _, s := range []string{"asked 104857600 bytes", "35651584 bytes", "free of 64.0 MiB", "cuMemAlloc_v2"} {
		if !strings.Contains(err.Error()+" "+oom.Err.Error(), s) {
			t.Errorf("OOM text lacks %q: %v", s, err)
		}
	}
	_ = p.Free(b)
}

// TestMedian: Median leaves the first run out and returns the median of
// the others; an error of op comes back.
func TestMedian(t *testing.T) {
	f := newFakeDriver()
	f.elapsed = []float32{100, 5, 1, 4, 2, 3}
	c, err := fakeContext(f)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	runs := 0
	d, err := c.Median(c.DefaultStream(), 5, func() error { runs++; return nil })
	if err != nil || runs != 6 || d != 3*time.Millisecond {
		t.Errorf("Median: %v after %d runs, %v; want 3ms after 6 (the 100 ms warm-up left out)", d, runs, err)
	}
	boom := errors.New("boom")
	if _, err := c.Median(c.DefaultStream(), 5, func() error { return boom }); !errors.Is(err, boom) {
		t.Errorf("an op's error: %v", err)
	}
}
