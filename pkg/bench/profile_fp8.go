package bench

// profile_fp8.go: the profiler's wrappers of the device.FP8 ops (issue
// 38), so that a step under amp.FP8 shows where its time goes: each FP8
// producer under a class of its own (the cast and amax cost that fusion
// should make ~0 beside the op that was there anyway), the FP8 GEMMs by
// shape with " fp8" after the name, and the scales' update.

import (
	"fmt"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

var _ device.FP8 = (*profiler)(nil)

// fp8 returns the profiled device's FP8 ops, or records that it has none.
func (p *profiler) fp8(op string) device.FP8 {
	f, ok := p.Device.(device.FP8)
	if !ok && p.err == nil {
		p.err = fmt.Errorf("bench: %s: %s has no FP8 operations: %w", op, p.Device.Name(), device.ErrUnsupported)
	}
	return f
}

// fp8Timed times one FP8 op when the device has them.
func (p *profiler) fp8Timed(op, class string, flops, bytes float64, run func(device.FP8)) {
	if f := p.fp8(op); f != nil {
		p.timed(class, flops, bytes, func() { run(f) })
	}
}

// LayerNormFP8 times the FP8 layernorm: its row reads, stats and FP8 q, qᵀ.
func (p *profiler) LayerNormFP8(q, qt, amax, mean, rstd, inp, weight, bias, scale *device.T, N, C int) {
	p.fp8Timed("LayerNormFP8", "layernorm → fp8", 0, bytesOf(q, qt, mean, rstd, inp, weight, bias), func(f device.FP8) {
		f.LayerNormFP8(q, qt, amax, mean, rstd, inp, weight, bias, scale, N, C)
	})
}

// ResidualLayerNormFP8 times the residual add and FP8 layernorm.
func (p *profiler) ResidualLayerNormFP8(res, q, qt, amax, mean, rstd, a, b, weight, bias, scale *device.T, N, C int) {
	p.fp8Timed("ResidualLayerNormFP8", "layernorm → fp8", 0, bytesOf(res, q, qt, mean, rstd, a, b, weight, bias), func(f device.FP8) {
		f.ResidualLayerNormFP8(res, q, qt, amax, mean, rstd, a, b, weight, bias, scale, N, C)
	})
}

// CastTransposeFP8 times a cast-transpose (attention output, weights).
func (p *profiler) CastTransposeFP8(q, qt, amax, x, scale *device.T, N, C int) {
	p.fp8Timed("CastTransposeFP8", "fp8 cast-transpose", 0, bytesOf(q, qt, x), func(f device.FP8) {
		f.CastTransposeFP8(q, qt, amax, x, scale, N, C)
	})
}

// GELUCastTransposeFP8 times the GELU written as FP8.
func (p *profiler) GELUCastTransposeFP8(q, qt, amax, pre, scale *device.T, N, C int) {
	p.fp8Timed("GELUCastTransposeFP8", "gelu → fp8", 0, bytesOf(q, qt, pre), func(f device.FP8) {
		f.GELUCastTransposeFP8(q, qt, amax, pre, scale, N, C)
	})
}

// CastTransposeDBiasFP8 times an output gradient's cast with its bias
// gradient (dbias read and written).
func (p *profiler) CastTransposeDBiasFP8(q, qt, amax, dbias, dy, scale *device.T, N, C int) {
	p.fp8Timed("CastTransposeDBiasFP8", "dy → fp8 + dbias", 0, bytesOf(q, qt, dy, dbias, dbias), func(f device.FP8) {
		f.CastTransposeDBiasFP8(q, qt, amax, dbias, dy, scale, N, C)
	})
}

// DGELUCastTransposeDBiasFP8 times the fc layer's output gradient: the
// GELU backward, cast and bias gradient in one pass (pre read besides dy,
// dbias read and written).
func (p *profiler) DGELUCastTransposeDBiasFP8(q, qt, amax, dbias, dy, pre, scale *device.T, N, C int) {
	p.fp8Timed("DGELUCastTransposeDBiasFP8", "dgelu → fp8 + dbias", 0, bytesOf(q, qt, dy, pre, dbias, dbias), func(f device.FP8) {
		f.DGELUCastTransposeDBiasFP8(q, qt, amax, dbias, dy, pre, scale, N, C)
	})
}

// LayerNormBackwardCastFP8 times the layernorm backward that casts the
// residual gradient it updates (dinp read and written, dout, inp read, q
// and qᵀ written; the parameter gradients read and written).
func (p *profiler) LayerNormBackwardCastFP8(dinp, dweight, dbias, q, qt, amax, dbiasNext, dout, inp, weight, mean, rstd, scale *device.T, N, C int) {
	p.fp8Timed("LayerNormBackwardCastFP8", "layernorm backward → fp8 + dbias", 0,
		bytesOf(dinp, dinp, dout, inp, q, qt, weight, mean, rstd, dweight, dweight, dbias, dbias, dbiasNext, dbiasNext), func(f device.FP8) {
			f.LayerNormBackwardCastFP8(dinp, dweight, dbias, q, qt, amax, dbiasNext, dout, inp, weight, mean, rstd, scale, N, C)
		})
}

// CrossEntropyFP8 times the FP8 classifier under the classifier's class:
// the logits read, and with dscale != 0 the gradient cast into q and,
// with storeGrad, written over the logits.
func (p *profiler) CrossEntropyFP8(losses, logits, q, amax, targets, scale, state *device.T, N, V int, dscale float32, storeGrad bool) {
	b := bytesOf(losses, logits, targets)
	if dscale != 0 {
		b += bytesOf(q)
		if storeGrad {
			b += bytesOf(logits)
		}
	}
	p.fp8Timed("CrossEntropyFP8", device.Ops.CrossEntropy.Class, 0, b, func(f device.FP8) {
		f.CrossEntropyFP8(losses, logits, q, amax, targets, scale, state, N, V, dscale, storeGrad)
	})
}

// fp8GEMMClass names an FP8 product (N, C, OC) by its layer, as
// gemmClass names the bf16 ones, forward and backward in one class: the
// forward is (tokens, in, out), the backward's dx (tokens, out, in).
func (p *profiler) fp8GEMMClass(C, OC int) string {
	c := p.cfg.Channels
	switch {
	case C == 3*c && OC == c, C == 4*c && OC == c, C == c && OC == 4*c, C == p.cfg.Vocab && OC == c:
		C, OC = OC, C // dx of qkv, fc, fc proj, the LM head
	}
	return p.gemmClass(C, OC) + " fp8"
}

// MatmulFP8 times an FP8 GEMM: 2·N·C·OC FLOPs.
func (p *profiler) MatmulFP8(out, a, b, bias, invA, invB *device.T, N, C, OC int) {
	p.fp8Timed("MatmulFP8", p.fp8GEMMClass(C, OC), 2*float64(N)*float64(C)*float64(OC), 0, func(f device.FP8) {
		f.MatmulFP8(out, a, b, bias, invA, invB, N, C, OC)
	})
}

// MatmulFP8Add times an FP8 weight gradient dW (out, in) += dyᵀ·x, K =
// tokens: 2·N·C·OC FLOPs, under its layer's class.
func (p *profiler) MatmulFP8Add(out, a, b, invA, invB *device.T, N, C, OC int) {
	p.fp8Timed("MatmulFP8Add", p.gemmClass(OC, N)+" fp8", 2*float64(N)*float64(C)*float64(OC), 0, func(f device.FP8) {
		f.MatmulFP8Add(out, a, b, invA, invB, N, C, OC)
	})
}

// TransposeFP8 times an FP8 byte transpose (the LM head's e5m2 gradient
// for its FP8 weight gradient), in a class of its own: in read, out
// written.
func (p *profiler) TransposeFP8(out, in *device.T, N, C int) {
	p.fp8Timed("TransposeFP8", "fp8 transpose", 0, bytesOf(out, in), func(f device.FP8) {
		f.TransposeFP8(out, in, N, C)
	})
}

// FP8ScaleUpdate times the scales' update (the state read and written).
func (p *profiler) FP8ScaleUpdate(st, meta, recs *device.T, K, H, margin int) {
	p.fp8Timed("FP8ScaleUpdate", "fp8 scales", 0, 2*bytesOf(st, meta), func(f device.FP8) {
		f.FP8ScaleUpdate(st, meta, recs, K, H, margin)
	})
}

// AdamWStateFP8 times the optimizer step that writes the weights' FP8
// copies, in the optimizer's class (beside bf16's AdamWState): its bytes
// and the copies'.
func (p *profiler) AdamWStateFP8(master, work, grads, m, v *device.T, layout *tensor.Layout, hp device.AdamW, state *device.T, w []device.FP8Weight) {
	b := 2*bytesOf(master, m, v) + bytesOf(work, grads)
	for _, x := range w {
		b += bytesOf(x.Q, x.QT)
	}
	p.fp8Timed("AdamWStateFP8", device.Ops.AdamWState.Class, 0, b, func(f device.FP8) {
		f.AdamWStateFP8(master, work, grads, m, v, layout, hp, state, w)
	})
}
