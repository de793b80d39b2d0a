package cpu

// adamw.go: the AdamW optimizer step over the flat parameter buffer, with
// torch.optim.AdamW's (single-tensor, decoupled weight decay) arithmetic:
//
//	g  = grad·GradScale                       (GradScale 0 means 1)
//	p  = p·(1 - lr·wd)                        (param.mul_; only where Decay is set)
//	m  = lerp(m, g, 1-β1) = m + (1-β1)(g - m) (exp_avg.lerp_)
//	v  = v·β2 + (1-β2)·g·g                    (exp_avg_sq.mul_.addcmul_)
//	p += -(lr/(1-β1ᵗ)) · m / (sqrt(v)/sqrt(1-β2ᵗ) + eps)   (param.addcdiv_)
//
// The scalars (1 - lr·wd, lr/bc1, sqrt(bc2), 1-β1, 1-β2) are computed in
// float64 and rounded to float32 as torch's Python scalars are; all tensor
// arithmetic is float32 in torch's order, the same in both forms, so for the
// same inputs fused and decomposed give the same bits.
//
// Fused (apex FusedAdam / llm.c adamw_kernel): one pass over the whole flat
// buffer in parallel chunks; a chunk walks the small table of segment
// boundaries and flags, and writes the rounded working copy as it goes.
// Decomposed (torch's for-loop AdamW): per tensor, a pass per step above
// (scale grad, decay, m, v·β2, v += ..., sqrt, /sqrt(bc2), +eps, update),
// then a cast pass into the working copy.

import (
	"fmt"
	"math"
	"sort"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// adamSpan is one segment of the layout (device.AdamWArgs).
type adamSpan = device.Span

// adamConsts are the per-step scalars (shared with the other device).
type adamConsts = device.AdamWConsts

func newAdamConsts(hp device.AdamW) adamConsts { return hp.Consts() }

// AdamWStep updates master, m and v in place over every segment of layout
// and, when work is not nil, writes the updated parameters rounded to work's
// dtype. Elements outside every segment are left alone.
// master, grads, m, v (layout.Total) F32; work (layout.Total) or nil
func (d *Device) AdamWStep(master, work, grads, m, v *tensor.Tensor, layout *tensor.Layout, hp device.AdamW) {
	const op = "AdamWStep"
	spans, ok := d.adamArgs(&device.Ops.AdamWStep, master, work, grads, m, v, layout, hp, nil)
	if !ok {
		return
	}
	c := newAdamConsts(hp)
	if d.fused {
		d.adamWFused(master, work, grads, m, v, spans, c)
	} else {
		d.adamWDecomposed(master, work, grads, m, v, spans, c)
	}
}

// adamArgs checks AdamWStep's and AdamWState's arguments against c (the
// state, when not nil, is c's last tensor) and returns the layout's
// segments (device.AdamWArgs).
func (d *Device) adamArgs(c *device.Contract, master, work, grads, m, v *tensor.Tensor, layout *tensor.Layout, hp device.AdamW, state *tensor.Tensor) ([]device.Span, bool) {
	spans, sizes, err := device.AdamWArgs(c, layout, hp)
	if err != nil {
		d.fail(fmt.Errorf("cpu: %w", err))
		return nil, false
	}
	ts := []*tensor.Tensor{master, work, grads, m, v}
	if state != nil || len(c.Params) > len(ts) {
		ts = append(ts, state)
	}
	return spans, d.check(c, sizes, ts...)
}

// adamWFused: one pass over the flat buffer in parallel chunks.
func (d *Device) adamWFused(master, work, grads, m, v *tensor.Tensor, spans []adamSpan, c adamConsts) {
	p, g, mm, vv := master.F32(), grads.F32(), m.F32(), v.F32()
	d.parallel(master.Numel(), 1<<14, func(lo, hi int) {
		k := sort.Search(len(spans), func(i int) bool { return spans[i].Hi > lo })
		for ; k < len(spans) && spans[k].Lo < hi; k++ {
			a, b := max(lo, spans[k].Lo), min(hi, spans[k].Hi)
			adamWChunk(p[a:b], g[a:b], mm[a:b], vv[a:b], work, a, spans[k].Decay, c)
		}
	})
}

// adamWChunk updates one chunk of one segment; work (or nil) receives the
// rounded parameters at element off onwards, one cache-sized block after
// the block's update.
func adamWChunk(p, g, m, v []float32, work *tensor.Tensor, off int, decay bool, c adamConsts) {
	decay = decay && c.DoDecay
	const blk = 2048
	for lo := 0; lo < len(p); lo += blk {
		hi := min(lo+blk, len(p))
		adamWMaster(p[lo:hi], g[lo:hi], m[lo:hi], v[lo:hi], decay, c)
		if work == nil {
			continue
		}
		switch work.DType {
		case tensor.F32:
			copy(work.F32()[off+lo:off+hi], p[lo:hi])
		case tensor.BF16:
			f32ToBF16s(work.U16()[off+lo:off+hi], p[lo:hi])
		default:
			wu := work.U16()[off+lo : off+hi]
			for i, x := range p[lo:hi] {
				wu[i] = tensor.F16FromF32(x)
			}
		}
	}
}

// adamWMasterGo is adamWMaster's pure-Go reference: the update of p, m and
// v (decay already combined with c.DoDecay).
func adamWMasterGo(p, g, m, v []float32, decay bool, c adamConsts) {
	g, m, v = g[:len(p)], m[:len(p)], v[:len(p)]
	for i := range p {
		gi := g[i]
		if c.Scaled {
			gi *= c.GS
		}
		pi := p[i]
		if decay {
			pi *= c.Decay
		}
		mi := m[i]
		if c.Small {
			mi += c.W1 * (gi - mi)
		} else {
			mi = gi + (c.W1-1)*(gi-mi)
		}
		vi := v[i]*c.B2 + c.W2*gi*gi
		den := float32(math.Sqrt(float64(vi)))/c.BC2 + c.Eps
		pi += c.Step * (mi / den)
		p[i], m[i], v[i] = pi, mi, vi
	}
}

// adamWDecomposed: torch's for-loop AdamW, a pass per step per tensor.
func (d *Device) adamWDecomposed(master, work, grads, m, v *tensor.Tensor, spans []adamSpan, c adamConsts) {
	p, g, mm, vv := master.F32(), grads.F32(), m.F32(), v.F32()
	longest := 0
	for _, s := range spans {
		longest = max(longest, s.Hi-s.Lo)
	}
	gbuf, den := make([]float32, longest), make([]float32, longest) // scratch reused per tensor
	for _, s := range spans {
		n := s.Hi - s.Lo
		ps, ms, vs := p[s.Lo:s.Hi], mm[s.Lo:s.Hi], vv[s.Lo:s.Hi]
		gs, dn := g[s.Lo:s.Hi], den[:n]
		pass := func(fn func(lo, hi int)) { d.parallel(n, 1<<15, fn) }
		if c.Scaled { // g = grad·scale (out of place: grads are an input)
			src := gs
			gs = gbuf[:n]
			pass(func(lo, hi int) {
				for i := lo; i < hi; i++ {
					gs[i] = src[i] * c.GS
				}
			})
		}
		if s.Decay && c.DoDecay { // p.mul_(1 - lr·wd)
			pass(func(lo, hi int) {
				for i := lo; i < hi; i++ {
					ps[i] *= c.Decay
				}
			})
		}
		pass(func(lo, hi int) { // m.lerp_(g, 1-β1)
			for i := lo; i < hi; i++ {
				if c.Small {
					ms[i] += c.W1 * (gs[i] - ms[i])
				} else {
					ms[i] = gs[i] + (c.W1-1)*(gs[i]-ms[i])
				}
			}
		})
		pass(func(lo, hi int) { // v.mul_(β2)
			for i := lo; i < hi; i++ {
				vs[i] *= c.B2
			}
		})
		pass(func(lo, hi int) { // v.addcmul_(g, g, 1-β2)
			for i := lo; i < hi; i++ {
				vs[i] += c.W2 * gs[i] * gs[i]
			}
		})
		pass(func(lo, hi int) { // den = v.sqrt()
			for i := lo; i < hi; i++ {
				dn[i] = float32(math.Sqrt(float64(vs[i])))
			}
		})
		pass(func(lo, hi int) { // den /= sqrt(bc2)
			for i := lo; i < hi; i++ {
				dn[i] /= c.BC2
			}
		})
		pass(func(lo, hi int) { // den += eps
			for i := lo; i < hi; i++ {
				dn[i] += c.Eps
			}
		})
		pass(func(lo, hi int) { // p.addcdiv_(m, den, -lr/bc1)
			for i := lo; i < hi; i++ {
				ps[i] += c.Step * (ms[i] / dn[i])
			}
		})
		if work != nil { // work[seg].copy_(p)
			pass(func(lo, hi int) { store(work, s.Lo+lo, ps[lo:hi]) })
		}
	}
}

// AdamWBF16 is AdamWStep (state nil) or AdamWState (state given) with m
// and v stored in bf16 and rounded stochastically (device.MomentsBF16; the
// rule and its reasons are in pkg/device/adamw16.go). It has one form:
// there is no decomposed baseline of bf16 moments to compare with.
// master, grads (layout.Total) F32; work (layout.Total) or nil; m, v (layout.Total) BF16; state (StateLen) F32 or nil
func (d *Device) AdamWBF16(master, work, grads, m, v *tensor.Tensor, layout *tensor.Layout, hp device.AdamW, state *tensor.Tensor) {
	spans, ok := d.adamArgs(&device.AdamWBF16, master, work, grads, m, v, layout, hp, state)
	if !ok {
		return
	}
	c := newAdamConsts(hp)
	var st []float32
	if state != nil {
		if st = state.F32(); st[device.SlotFinite] == 0 {
			return
		}
		c = hp.ConstsFromState(st)
	}
	step := device.MomentsStep(hp, st)
	p, g, mm, vv := master.F32(), grads.F32(), m.U16(), v.U16()
	d.parallel(master.Numel(), 1<<14, func(lo, hi int) {
		k := sort.Search(len(spans), func(i int) bool { return spans[i].Hi > lo })
		mf, vf := make([]float32, 2048), make([]float32, 2048) // one block's moments widened
		for ; k < len(spans) && spans[k].Lo < hi; k++ {
			decay := spans[k].Decay && c.DoDecay
			a, b := max(lo, spans[k].Lo), min(hi, spans[k].Hi)
			for blo := a; blo < b; blo += len(mf) {
				bhi := min(blo+len(mf), b)
				n := bhi - blo
				for i := range n {
					mf[i], vf[i] = tensor.BF16ToF32(mm[blo+i]), tensor.BF16ToF32(vv[blo+i])
				}
				adamWMaster(p[blo:bhi], g[blo:bhi], mf[:n], vf[:n], decay, c)
				for i := range n {
					r := device.SRBits(hp.Seed, step, uint64(blo+i))
					mm[blo+i], vv[blo+i] = device.RoundBF16SR(mf[i], r), device.RoundBF16SR(vf[i], r>>16)
				}
				if work != nil {
					store(work, blo, p[blo:bhi])
				}
			}
		}
	})
}
