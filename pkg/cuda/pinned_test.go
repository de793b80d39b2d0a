package cuda

import (
	"strings"
	"testing"
)

// TestPinned: pinned memory is allocated and freed on the context's
// thread, copies check their span before calling the driver, and a failed
// cuMemHostAlloc (a driver without it) is an error naming the call.
func TestPinned(t *testing.T) {
	f := newFakeDriver()
	c, err := fakeContext(f)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.AllocPinned(0); err == nil {
		t.Fatal("a pinned allocation of 0 bytes was accepted")
	}
	p, err := c.AllocPinned(64)
	if err != nil {
		t.Fatal(err)
	}
	if p.Len() != 64 || len(p.Bytes()) != 64 {
		t.Fatalf("pinned buffer of %d bytes (%d in Bytes), want 64", p.Len(), len(p.Bytes()))
	}
	s, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CopyFromPinned(0x1000, p, 60, 8); err == nil || !strings.Contains(err.Error(), "outside the 64-byte buffer") {
		t.Fatalf("copy past the end: %v", err)
	}
	if err := s.CopyToPinned(p, 8, 0x1000, 16); err != nil {
		t.Fatal(err)
	}
	if err := s.CopyFromPinned(0x1000, p, 0, 16); err != nil {
		t.Fatal(err)
	}
	if err := p.Free(); err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(f.calls, " ")
	for _, call := range []string{"cuMemHostAlloc", "cuMemcpyDtoHAsync_v2", "cuMemcpyHtoDAsync_v2", "cuMemFreeHost"} {
		if !strings.Contains(joined, call) {
			t.Errorf("no %s among the driver calls %q", call, joined)
		}
	}
	f.failCall = "cuMemHostAlloc"
	if _, err := c.AllocPinned(64); err == nil || !strings.Contains(err.Error(), "cuMemHostAlloc") {
		t.Fatalf("failed cuMemHostAlloc: %v", err)
	}
}
