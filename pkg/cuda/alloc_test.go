//go:build linux

package cuda

import (
	"errors"
	"strings"
	"testing"
)

// fakeRaw adapts a fake driver to rawMemory with no thread.
type fakeRaw struct{ f *fakeDriver }

func (r fakeRaw) do(fn func() error) error          { return fn() }
func (r fakeRaw) alloc(n uint64) (DevicePtr, error) { return r.f.memAlloc(n) }
func (r fakeRaw) free(p DevicePtr) error            { return r.f.memFree(p) }
func (r fakeRaw) info() (uint64, uint64, error)     { return r.f.memGetInfo() }

// TestPoolSteadyState: after the first step, a step that allocates and
// frees the same sizes never reaches the driver.
func TestPoolSteadyState(t *testing.T) {
	f := newFakeDriver()
	p := newPool(fakeRaw{f})
	sizes := []uint64{1, 512, 513, 1000, 1 << 20, 1<<20 + 1, 3 << 20, 77777}
	var after1 int64
	for step := range 5 {
		var ptrs []DevicePtr
		for _, n := range sizes {
			ptr, err := p.Alloc(n)
			if err != nil {
				t.Fatal(err)
			}
			if ptr%512 != 0 {
				t.Fatalf("block %#x not 512-byte aligned", uint64(ptr))
			}
			ptrs = append(ptrs, ptr)
		}
		for _, ptr := range ptrs {
			if err := p.Free(ptr); err != nil {
				t.Fatal(err)
			}
		}
		if step == 0 {
			after1 = p.Stats().Mallocs
		}
	}
	st := p.Stats()
	if st.Mallocs != after1 || st.Mallocs != int64(len(sizes)) {
		t.Fatalf("driver allocations %d after step 1, %d after 5, want %d both", after1, st.Mallocs, len(sizes))
	}
	if st.Hits != int64(4*len(sizes)) || st.InUse != 0 || st.Cached == 0 {
		t.Fatalf("stats %+v", st)
	}
	if err := p.Free(0x1234); err == nil || !strings.Contains(err.Error(), "did not hand out") {
		t.Fatalf("free of a foreign pointer: %v", err)
	}
	if ptr, err := p.Alloc(0); ptr != 0 || err != nil || p.Free(0) != nil {
		t.Fatalf("zero-size alloc: %#x %v", uint64(ptr), err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if len(f.blocks) != 0 {
		t.Fatalf("%d blocks left with the driver after Close", len(f.blocks))
	}
}

// TestSizeClass checks the rounding rule.
func TestSizeClass(t *testing.T) {
	for _, c := range [][2]uint64{{1, 512}, {512, 512}, {513, 1024}, {1 << 20, 1 << 20}, {1<<20 + 1, 2 << 20}, {5 << 20, 6 << 20}} {
		if got := sizeClass(c[0]); got != c[1] {
			t.Errorf("sizeClass(%d) = %d, want %d", c[0], got, c[1])
		}
	}
}

// TestArena: bump allocation, alignment, the full-arena error and Reset.
func TestArena(t *testing.T) {
	f := newFakeDriver()
	p := newPool(fakeRaw{f})
	a, err := NewArena(p, 4096)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := a.Alloc(10)
	y, err := a.Alloc(300)
	if err != nil || y-x != ArenaAlign || a.Used() != ArenaAlign+300 {
		t.Fatalf("x %#x y %#x used %d err %v", uint64(x), uint64(y), a.Used(), err)
	}
	if _, err := a.Alloc(4096); err == nil || !strings.Contains(err.Error(), "asked 4096") {
		t.Fatalf("overfull arena: %v", err)
	}
	a.Reset()
	if z, _ := a.Alloc(1); z != x {
		t.Fatal("Reset did not rewind")
	}
	mallocs := p.Stats().Mallocs
	if err := a.Close(); err != nil || p.Stats().Mallocs != mallocs || p.Stats().InUse != 0 {
		t.Fatalf("close: %v, stats %+v", err, p.Stats())
	}
}

// TestPoolPeak: PeakInUse is the high-water mark of the bytes in use (by
// size class), also when blocks come from the cache, and ResetPeak starts
// it again from what is in use now.
func TestPoolPeak(t *testing.T) {
	p := newPool(fakeRaw{newFakeDriver()})
	defer p.Close()
	a, _ := p.Alloc(3 << 20) // 4 MiB class
	b, _ := p.Alloc(1000)    // 1024
	if st := p.Stats(); st.PeakInUse != 4<<20+1024 || st.Peak != st.PeakInUse {
		t.Fatalf("after two allocations: %+v", st)
	}
	if err := p.Free(a); err != nil {
		t.Fatal(err)
	}
	p.ResetPeak()
	if st := p.Stats(); st.PeakInUse != 1024 || st.Peak != 4<<20+1024 {
		t.Fatalf("after ResetPeak: in use peak %d (want 1024), held peak %d (want %d)", st.PeakInUse, st.Peak, 4<<20+1024)
	}
	c, _ := p.Alloc(4 << 20) // a cache hit
	if st := p.Stats(); st.PeakInUse != 4<<20+1024 || st.Hits != 1 {
		t.Fatalf("after a cache hit: %+v", st)
	}
	for _, x := range []DevicePtr{b, c} {
		if err := p.Free(x); err != nil {
			t.Fatal(err)
		}
	}
	p.ResetPeak()
	if st := p.Stats(); st.PeakInUse != 0 || st.InUse != 0 {
		t.Fatalf("all freed, after ResetPeak: %+v", st)
	}
}

// TestPoolLimit: a capped pool hands out blocks up to the cap, gives its
// cache back before refusing, and refuses past the cap with an
// *OutOfMemoryError that is ErrOutOfMemory and ErrMemoryCap, whatever the
// driver has free.
func TestPoolLimit(t *testing.T) {
	f := newFakeDriver()
	p := newPool(fakeRaw{f})
	defer p.Close()
	p.SetLimit(8 << 20)
	a, err := p.Alloc(4 << 20)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Alloc(2 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Free(b); err != nil { // 2 MiB cached
		t.Fatal(err)
	}
	c, err := p.Alloc(4 << 20) // 4 in use + 2 cached + 4 > 8: the cache goes back first
	if err != nil {
		t.Fatalf("4 MiB more under an 8 MiB cap with 4 in use and 2 cached: %v", err)
	}
	if st := p.Stats(); st.Cached != 0 || st.InUse != 8<<20 {
		t.Fatalf("stats after the release: %+v", st)
	}
	_, err = p.Alloc(1)
	var oom *OutOfMemoryError
	if !errors.As(err, &oom) || !errors.Is(err, ErrOutOfMemory) || !errors.Is(oom.Err, ErrMemoryCap) || oom.Total != 8<<20 || oom.Free != 0 {
		t.Fatalf("past the cap: %v (%+v)", err, oom)
	}
	for _, x := range []DevicePtr{a, c} {
		if err := p.Free(x); err != nil {
			t.Fatal(err)
		}
	}
	if p.Limit() != 8<<20 {
		t.Fatalf("Limit %d", p.Limit())
	}
	p.SetLimit(0)
	if _, err := p.Alloc(16 << 20); err != nil {
		t.Fatalf("no cap: %v", err)
	}
}
