package gpu

// adamw_fp8.go: AdamWStateFP8, the optimizer step that writes the FP8
// copies of the weights the FP8 GEMMs read (issue 38): kernels/adamw.cu's
// adamw_fused_state2 over every element outside those weights, then
// kernels/adamw_fp8.cu's adamw_fp8_e4m3 over the weights' 64×64 tiles,
// which updates them with the same arithmetic and casts the updated
// working copy into q and its transpose qt, as cast_transpose_e4m3 would.

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

var (
	af8Block = kernels.MustBlock("adamw_fp8.cu", "AF8_BLOCK")  // adamw_fp8_e4m3
	af8Tile  = kernels.MustDefine("adamw_fp8.cu", "AF8_TILE")  // a block's tile side
	af8Words = kernels.MustDefine("adamw_fp8.cu", "AF8_WORDS") // 64-bit words of a weight's record
)

// AdamWStateFP8 is AdamWState writing the FP8 copies of the weights in w
// (device.FP8): one adamw_fused_state2 launch over the chunks of the
// segments' elements outside every weight, then one adamw_fp8_e4m3 launch,
// a block per 64×64 tile of every weight. Both read the step's scalars
// from state; the second casts even when the step was skipped. The tables
// (chunks, and the weights' records with their device addresses) are
// uploaded once per layout and weights, as AdamWState's chunks are.
// master, grads, m, v (layout.Total) F32, work (layout.Total) F32, BF16 or F16, state (StateLen) F32
func (d *Device) AdamWStateFP8(master, work, grads, m, v *tensor.Tensor, layout *tensor.Layout, hp device.AdamW, state *tensor.Tensor, w []device.FP8Weight) {
	d.record(d.adamWStateFP8(master, work, grads, m, v, layout, hp, state, w))
}

func (d *Device) adamWStateFP8(master, work, grads, m, v *tensor.Tensor, layout *tensor.Layout, hp device.AdamW, state *tensor.Tensor, w []device.FP8Weight) error {
	wdt, spans, ok := d.adamArgs(&device.Ops.AdamWState, master, work, grads, m, v, layout, hp, state)
	if !ok {
		return nil // recorded
	}
	if work == nil {
		return fmt.Errorf("%w: AdamWStateFP8: no working copy to cast: %w", ErrFP8Args, tensor.ErrShape)
	}
	dec, err := device.FP8WeightSpans(spans, w)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFP8Args, err)
	}
	for _, x := range w {
		for _, t := range []*tensor.Tensor{x.Q, x.QT, x.Amax, x.Scale} {
			if t.Dev == 0 {
				return fmt.Errorf("%w: AdamWStateFP8: %s is a host tensor", ErrFP8Args, desc(t))
			}
		}
	}
	c := hp.Consts() // the fixed parts: w1, small, b2, w2, eps
	if rest := spansWithout(spans, w); len(rest) > 0 {
		table := adamChunks(rest)
		p := d.layoutTable(tableKey{layout, "adamw_fp8.chunks"}, u32Bytes(table))
		if p == 0 {
			return nil // recorded
		}
		vec := vec4(d.ptr(master), 4, d.ptr(grads), 4, d.ptr(m), 4, d.ptr(v), 4, d.ptr(work), wdt.Size())
		if !d.run("adamw_fused_state2", wdt, cuda.D1(len(table)/2), cuda.D1(adamwBlock), 0,
			d.ptr(master), d.ptr(work), d.ptr(grads), d.ptr(m), d.ptr(v), p, d.ptr(state),
			c.W1, b2i(c.Small), c.B2, c.W2, c.Eps, vec) {
			return nil // recorded
		}
	}
	if len(w) == 0 {
		return nil
	}
	recs, tiles := d.af8Records(master, work, grads, m, v, wdt, w, dec)
	p := d.layoutTable(tableKey{layout, "adamw_fp8.weights"}, recs)
	if p == 0 {
		return nil // recorded
	}
	if tiles > maxGridX {
		return fmt.Errorf("%w: AdamWStateFP8: %d tiles, at most %d", ErrFP8Args, tiles, maxGridX)
	}
	d.run("adamw_fp8_e4m3", wdt, cuda.D1(tiles), cuda.D1(af8Block), 0,
		d.ptr(master), d.ptr(work), d.ptr(grads), d.ptr(m), d.ptr(v), p, len(w), d.ptr(state),
		c.W1, b2i(c.Small), c.B2, c.W2, c.Eps)
	return nil
}

// af8Records returns the weights' AF8W records (adamw_fp8.cu), af8Words
// little-endian 64-bit words each, and the tiles of them all:
//
//	off; rows | cols<<32; q; qt; amax; scale; tile0 | dec<<32; vec_row | vec_col<<32
func (d *Device) af8Records(master, work, grads, m, v *tensor.Tensor, wdt tensor.DType, w []device.FP8Weight, dec []bool) ([]byte, int) {
	base := vec4(d.ptr(master), 4, d.ptr(grads), 4, d.ptr(m), 4, d.ptr(v), 4, d.ptr(work), wdt.Size())
	b := make([]byte, 0, 8*af8Words*len(w))
	put := func(v uint64) { b = binary.LittleEndian.AppendUint64(b, v) }
	pair := func(lo, hi int) uint64 { return uint64(uint32(lo)) | uint64(uint32(hi))<<32 }
	tiles := 0
	for i, x := range w {
		vr := base
		if x.Offset%4 != 0 || x.Cols%4 != 0 || uint64(d.ptr(x.Q))%4 != 0 {
			vr = 0
		}
		vc := 0
		if x.Rows%16 == 0 && uint64(d.ptr(x.QT))%16 == 0 {
			vc = 1
		}
		put(uint64(x.Offset))
		put(pair(x.Rows, x.Cols))
		put(uint64(d.ptr(x.Q)))
		put(uint64(d.ptr(x.QT)))
		put(uint64(d.ptr(x.Amax)))
		put(uint64(d.ptr(x.Scale)))
		put(pair(tiles, b2i(dec[i])))
		put(pair(vr, vc))
		tiles += blocks(x.Rows, af8Tile) * blocks(x.Cols, af8Tile)
	}
	return b, tiles
}

// spansWithout returns the parts of spans outside every weight of w (each
// inside one span: device.FP8WeightSpans), in order, with their span's
// decay.
func spansWithout(spans []adamSpan, w []device.FP8Weight) []adamSpan {
	cut := make([][2]int, len(w))
	for i, x := range w {
		cut[i] = [2]int{x.Offset, x.Offset + x.Rows*x.Cols}
	}
	sort.Slice(cut, func(i, j int) bool { return cut[i][0] < cut[j][0] })
	var out []adamSpan
	for _, s := range spans {
		lo := s.Lo
		for _, c := range cut {
			if c[1] <= lo || c[0] >= s.Hi {
				continue
			}
			if c[0] > lo {
				out = append(out, adamSpan{Lo: lo, Hi: c[0], Decay: s.Decay})
			}
			lo = c[1]
		}
		if lo < s.Hi {
			out = append(out, adamSpan{Lo: lo, Hi: s.Hi, Decay: s.Decay})
		}
	}
	return out
}
