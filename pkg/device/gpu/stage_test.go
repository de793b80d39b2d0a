package gpu

import (
	"errors"
	"slices"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// TestGPUFetch: a fetch copies what its source held when it was queued,
// work queued after it does not change that, its Wait returns the copy
// whichever order the waits come in, a slot reused by later fetches is an
// error and not wrong data, and a copy larger than a slot or of the wrong
// size takes the plain path.
func TestGPUFetch(t *testing.T) {
	g := gpuDev(t, true)
	up := func(d *tensor.Tensor, v int32) {
		h := tensor.New(tensor.I32, d.Numel())
		for i := range h.I32() {
			h.I32()[i] = v + int32(i)
		}
		g.Upload(d, h)
	}
	d, err := g.Alloc(tensor.I32, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Free(d)
	want := func(v int32, n int) []int32 {
		w := make([]int32, n)
		for i := range w {
			w[i] = v + int32(i)
		}
		return w
	}
	up(d, 100)
	ha, hb := tensor.New(tensor.I32, 64), tensor.New(tensor.I32, 64)
	fa := g.Fetch(ha, d)
	up(d, 200)
	fb := g.Fetch(hb, d)
	if err := fb.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := fa.Wait(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ha.I32(), want(100, 64)) || !slices.Equal(hb.I32(), want(200, 64)) {
		t.Fatalf("fetches before and after an upload: %v..., %v...; want 100..., 200...", ha.I32()[:2], hb.I32()[:2])
	}
	// stageSlots + 1 fetches: the first one's slot is reused.
	first := g.Fetch(ha, d)
	for range stageSlots {
		if err := g.Fetch(hb, d).Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if err := first.Wait(); err == nil {
		t.Error("a fetch whose slot later fetches reused: no error")
	}
	big, err := g.Alloc(tensor.I32, fetchSlotBytes/4+1)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Free(big)
	up(big, 7)
	hbig := tensor.New(tensor.I32, big.Numel())
	if err := g.Fetch(hbig, big).Wait(); err != nil || !slices.Equal(hbig.I32(), want(7, big.Numel())) {
		t.Fatalf("a fetch larger than a slot: %v, %v...", err, hbig.I32()[:2])
	}
	if err := g.Fetch(tensor.New(tensor.I32, 3), d).Wait(); !errors.Is(err, tensor.ErrShape) {
		t.Fatalf("a fetch of 64 elements into 3: %v, want ErrShape", err)
	}
}
