// Package aheadtest is a device.Fetcher for tests of generation running
// ahead (gpt.KVCache.Launch), made to work as the GPU's does: a fetch takes
// its source's values when it is queued and puts them into the host tensor
// only at Wait, which holds -7s until then, so a caller that reads ids
// before their Wait reads wrong ones. Embed it in a fake device beside the
// CPU device.
package aheadtest

import (
	"slices"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// Fetcher counts the fetches waiting (Out), the most at once (Most) and
// those queued while another waited (Overlapped).
type Fetcher struct {
	Out, Most, Overlapped int
}

type fetched struct {
	f    *Fetcher
	dst  *tensor.Tensor
	data []int32
}

// Fetch takes src's I32 values now and poisons dst until Wait.
func (f *Fetcher) Fetch(dst, src *tensor.Tensor) device.Fetched {
	if f.Out > 0 {
		f.Overlapped++
	}
	f.Out++
	f.Most = max(f.Most, f.Out)
	for i := range dst.I32() {
		dst.I32()[i] = -7
	}
	return &fetched{f: f, dst: dst, data: slices.Clone(src.I32())}
}

func (w *fetched) Wait() error {
	w.f.Out--
	copy(w.dst.I32(), w.data)
	return nil
}
