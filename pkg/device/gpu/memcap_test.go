package gpu

import (
	"errors"
	"testing"

	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/tensor"
)

// TestGPUMemoryCap: under a cap (what DRUTO_GPU_MEMORY sets at New), an
// Alloc past it fails as out of memory, naming the cap, and FreeMemory
// reports the cap's budget; without the cap the same Alloc succeeds.
func TestGPUMemoryCap(t *testing.T) {
	g := gpuDev(t, true)
	pool := g.ctx.Pool()
	old := pool.Limit()
	defer pool.SetLimit(old)
	if err := pool.Release(); err != nil {
		t.Fatal(err)
	}
	used := pool.Stats().InUse
	pool.SetLimit(used + 64<<20)
	_, total, err := g.FreeMemory()
	if err != nil || total != used+64<<20 {
		t.Fatalf("FreeMemory under the cap: total %d, %v; want %d", total, err, used+64<<20)
	}
	_, err = g.Alloc(tensor.F32, 32<<20) // 128 MiB
	if !errors.Is(err, cuda.ErrOutOfMemory) || !errors.Is(err, cuda.ErrMemoryCap) {
		t.Fatalf("128 MiB under a 64 MiB cap: %v, want the cap's out-of-memory error", err)
	}
	pool.SetLimit(old)
	x, err := g.Alloc(tensor.F32, 32<<20)
	if err != nil {
		t.Fatalf("128 MiB without the cap: %v", err)
	}
	g.Free(x)
}
