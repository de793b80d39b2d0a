package gpu

import (
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// TestGPUMemoryPeak: the peak follows an allocation of 64 MiB and, after
// the tensor is freed, ResetMemoryPeak brings it back to what is in use.
func TestGPUMemoryPeak(t *testing.T) {
	g := gpuDev(t, true)
	g.ResetMemoryPeak()
	base := g.MemoryPeak()
	x, err := g.Alloc(tensor.F32, 16<<20)
	if err != nil {
		t.Fatal(err)
	}
	if got := g.MemoryPeak() - base; got != 64<<20 {
		t.Errorf("peak grew by %d bytes for a 64 MiB tensor", got)
	}
	g.Free(x)
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
	if g.MemoryPeak()-base != 64<<20 {
		t.Errorf("the peak fell after the free: %d", g.MemoryPeak()-base)
	}
	g.ResetMemoryPeak()
	if got := g.MemoryPeak(); got != base {
		t.Errorf("after ResetMemoryPeak the peak is %d, want the %d in use", got, base)
	}
}
