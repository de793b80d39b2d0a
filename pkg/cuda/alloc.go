package cuda

import (
	"errors"
	"fmt"
	"sync"
)

// rawMemory is what a Pool allocates from: the driver under a Context, or a
// fake in tests. The pool runs each of its operations inside do, and calls
// alloc, free and info only from there.
type rawMemory interface {
	do(fn func() error) error
	alloc(n uint64) (DevicePtr, error)
	free(p DevicePtr) error
	info() (free, total uint64, err error)
}

// Pool is a caching device allocator. A block freed to the pool is kept in
// a free list by its size class and handed out again for the next request
// of that class, so a training step that allocates and frees the same sizes
// every step calls cuMemAlloc only in its first step. Sizes round up to
// 512 bytes up to 1 MiB and to 2 MiB above, and every block is 512-byte
// aligned (the driver's allocations are at least 256-byte aligned; the
// classes keep that). When the driver runs out of memory the pool gives its
// cached blocks back and tries once more; if that fails too, Alloc returns
// an *OutOfMemoryError. Pool is safe for use by several goroutines.
type Pool struct {
	raw   rawMemory
	mu    sync.Mutex
	free  map[uint64][]DevicePtr // size class -> cached blocks
	live  map[DevicePtr]uint64   // handed out -> size class
	stats PoolStats
	limit uint64 // the most bytes held from the driver, in use plus cached (0: no cap)
}

// ErrMemoryCap is the cause of an *OutOfMemoryError that a pool's cap
// (SetLimit), not the driver, refused.
var ErrMemoryCap = errors.New("cuda: the memory cap is reached")

// SetLimit caps the bytes the pool holds from the driver, in use plus
// cached, at limit (0: no cap), so that a budget smaller than the GPU (a
// T4's 16 GiB on an H200) can be tried: a request past it first gives the
// cached blocks back, as the driver's out-of-memory does, then fails with
// an *OutOfMemoryError whose Free and Total are the cap's and whose Err is
// ErrMemoryCap. Blocks already handed out stay.
func (p *Pool) SetLimit(limit uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.limit = limit
}

// Limit returns the pool's cap (0: none).
func (p *Pool) Limit() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.limit
}

// PoolStats counts a pool's work. Mallocs and Frees are calls into the
// driver; Allocs and Hits are requests to the pool and those it served from
// its cache.
type PoolStats struct {
	Mallocs, Frees int64
	Allocs, Hits   int64
	InUse          uint64 // bytes handed out (by size class)
	Cached         uint64 // bytes held in free lists
	Peak           uint64 // largest InUse+Cached seen (since ResetPeak)
	// PeakInUse is the largest InUse seen since ResetPeak: the high-water
	// mark of the memory in use, torch.cuda.max_memory_allocated's measure.
	PeakInUse uint64
}

func newPool(raw rawMemory) *Pool {
	return &Pool{raw: raw, free: map[uint64][]DevicePtr{}, live: map[DevicePtr]uint64{}}
}

// sizeClass rounds a request up to the pool's block size for it.
func sizeClass(n uint64) uint64 {
	const small, large = 512, 2 << 20
	if n <= 1<<20 {
		return (n + small - 1) / small * small
	}
	return (n + large - 1) / large * large
}

// Alloc returns a block of at least n bytes. A request of 0 bytes returns
// address 0, which Free accepts.
func (p *Pool) Alloc(n uint64) (DevicePtr, error) {
	if n == 0 {
		return 0, nil
	}
	var ptr DevicePtr
	err := p.raw.do(func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		var err error
		ptr, err = p.allocLocked(n)
		return err
	})
	return ptr, err
}

func (p *Pool) allocLocked(n uint64) (DevicePtr, error) {
	size := sizeClass(n)
	p.stats.Allocs++
	if list := p.free[size]; len(list) > 0 {
		ptr := list[len(list)-1]
		p.free[size] = list[:len(list)-1]
		p.stats.Hits++
		p.stats.Cached -= size
		p.stats.InUse += size
		p.stats.PeakInUse = max(p.stats.PeakInUse, p.stats.InUse)
		p.live[ptr] = size
		return ptr, nil
	}
	if p.limit > 0 && p.stats.InUse+p.stats.Cached+size > p.limit {
		if p.stats.Cached > 0 {
			if err := p.releaseLocked(); err != nil {
				return 0, err
			}
		}
		if p.stats.InUse+size > p.limit {
			return 0, &OutOfMemoryError{Asked: n, Free: p.limit - min(p.limit, p.stats.InUse), Total: p.limit,
				InUse: p.stats.InUse, Cached: p.stats.Cached, Err: ErrMemoryCap}
		}
	}
	ptr, err := p.raw.alloc(size)
	if err != nil && errors.Is(err, ErrOutOfMemory) && p.stats.Cached > 0 {
		if rerr := p.releaseLocked(); rerr != nil {
			return 0, errors.Join(err, rerr)
		}
		ptr, err = p.raw.alloc(size)
	}
	if err != nil {
		if errors.Is(err, ErrOutOfMemory) {
			free, total, ierr := p.raw.info()
			if ierr != nil {
				return 0, errors.Join(err, ierr)
			}
			return 0, &OutOfMemoryError{Asked: n, Free: free, Total: total, InUse: p.stats.InUse, Cached: p.stats.Cached, Err: err}
		}
		return 0, err
	}
	p.stats.Mallocs++
	p.stats.InUse += size
	p.live[ptr] = size
	p.stats.Peak = max(p.stats.Peak, p.stats.InUse+p.stats.Cached)
	p.stats.PeakInUse = max(p.stats.PeakInUse, p.stats.InUse)
	return ptr, nil
}

// Free returns a block from Alloc to the pool's cache (not to the driver).
func (p *Pool) Free(ptr DevicePtr) error {
	if ptr == 0 {
		return nil
	}
	return p.raw.do(func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		size, ok := p.live[ptr]
		if !ok {
			return fmt.Errorf("cuda: Pool.Free of %#x, which this pool did not hand out (or freed twice)", uint64(ptr))
		}
		delete(p.live, ptr)
		p.free[size] = append(p.free[size], ptr)
		p.stats.InUse -= size
		p.stats.Cached += size
		return nil
	})
}

// Release gives every cached block back to the driver.
func (p *Pool) Release() error {
	return p.raw.do(func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.releaseLocked()
	})
}

func (p *Pool) releaseLocked() error {
	var errs []error
	for size, list := range p.free {
		for _, ptr := range list {
			if err := p.raw.free(ptr); err != nil {
				errs = append(errs, err)
				continue
			}
			p.stats.Frees++
			p.stats.Cached -= size
		}
		delete(p.free, size)
	}
	return errors.Join(errs...)
}

// Close gives every block back to the driver, cached or still handed out.
func (p *Pool) Close() error {
	return p.raw.do(func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		errs := []error{p.releaseLocked()}
		for ptr, size := range p.live {
			if err := p.raw.free(ptr); err != nil {
				errs = append(errs, err)
				continue
			}
			p.stats.Frees++
			p.stats.InUse -= size
			delete(p.live, ptr)
		}
		return errors.Join(errs...)
	})
}

// ResetPeak starts the high-water marks (Peak, PeakInUse) again from the
// memory held and in use now, so that a measurement sees only what comes
// after it.
func (p *Pool) ResetPeak() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Peak = p.stats.InUse + p.stats.Cached
	p.stats.PeakInUse = p.stats.InUse
}

// Stats returns a snapshot of the pool's counters.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// ArenaAlign is the alignment of every Arena allocation, enough for any
// vector access a kernel makes.
const ArenaAlign = 256

// Arena hands out many buffers from one Pool block with a bump pointer, for
// activations whose sizes are fixed for a given batch shape: Reset makes
// the whole block free again at once. An Arena is not safe for concurrent
// use.
type Arena struct {
	pool *Pool
	base DevicePtr
	size uint64
	off  uint64
}

// NewArena takes one block of size bytes from pool.
func NewArena(pool *Pool, size uint64) (*Arena, error) {
	base, err := pool.Alloc(size)
	if err != nil {
		return nil, err
	}
	return &Arena{pool: pool, base: base, size: size}, nil
}

// Alloc returns n bytes aligned to ArenaAlign, or an error when the arena
// has fewer left.
func (a *Arena) Alloc(n uint64) (DevicePtr, error) {
	off := (a.off + ArenaAlign - 1) / ArenaAlign * ArenaAlign
	if off+n > a.size || off+n < off {
		return 0, fmt.Errorf("cuda: arena of %d bytes: asked %d with %d left", a.size, n, a.size-min(off, a.size))
	}
	a.off = off + n
	return a.base.Add(off), nil
}

// Used returns the bytes handed out since the last Reset, with padding.
func (a *Arena) Used() uint64 { return a.off }

// Reset makes all of the arena free again.
func (a *Arena) Reset() { a.off = 0 }

// Close returns the arena's block to its pool.
func (a *Arena) Close() error {
	err := a.pool.Free(a.base)
	a.base, a.size, a.off = 0, 0, 0
	return err
}
