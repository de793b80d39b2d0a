package device

// fp8.go: the ops of FP8 linear layers (amp.FP8, issue 38).

import (
	"fmt"

	"github.com/druto/druto/pkg/tensor"
)

// FP8 is the optional interface of a device that runs the linear layers
// of a training step with FP8 operands (amp.FP8): each operand comes out
// of the op that produces it already cast, with its transposed copy
// (Hopper's FP8 GEMMs take only both operands K-major) and its amax, so
// that FP8 costs no pass of its own. FP8 tensors have dtype
// tensor.F8E4M3 or tensor.F8E5M2, and a scale, an inverse scale and an
// amax are one-element f32 views into an amp.FP8Scales state on the
// device, read and written there (no host round trip, so a step stays
// one CUDA graph).
//
// The casts round x·scale in fp32 to nearest even and saturate at the
// format's ±max (tensor.QuantizeFP8), and add to their amax, a pair of
// f32 words (amp.FP8Scales' amax[k]): amax[0] = max(amax[0], max |x|) of
// the values before scaling, NaN when any is NaN; amax[1], read as a
// uint32, += the number of nonzero finite x whose cast is ±0
// (underflows); so that both span the micro-steps of a step until
// FP8ScaleUpdate takes and clears them. pkg/device/cpu's functions of the same names are
// the references, and its Device implements FP8 with them. Errors
// surface at Sync, as Device's do.
type FP8 interface {
	// LayerNormFP8 is LayerNorm whose output y (fp32) is written as
	// q = e4m3(y·scale), its transpose qt and amax (the input of the qkv
	// and fc layers); mean and rstd are stored as LayerNorm stores them.
	// inp is the residual stream, f32.
	// q (N,C) F8E4M3, qt (C,N) F8E4M3, amax (2), mean (N), rstd (N), inp (N,C) F32, weight (C), bias (C), scale (1)
	LayerNormFP8(q, qt, amax, mean, rstd, inp, weight, bias, scale *T, N, C int)
	// ResidualLayerNormFP8 is LayerNormFP8 of res = a + b, rounded to
	// fp32 and stored (ResidualLayerNorm with an f32 res).
	// res (N,C) F32, q, qt, amax, mean, rstd as LayerNormFP8's, a (N,C) F32, b (N,C), weight (C), bias (C), scale (1)
	ResidualLayerNormFP8(res, q, qt, amax, mean, rstd, a, b, weight, bias, scale *T, N, C int)
	// CastTransposeFP8 writes q = fp8(x·scale) in q's format, qt = qᵀ and
	// amax (the attention output, and the weights where the optimizer
	// does not write their copies: AdamWStateFP8).
	// q (N,C), qt (C,N) of one FP8 dtype, amax (2), x (N,C) float, scale (1)
	CastTransposeFP8(q, qt, amax, x, scale *T, N, C int)
	// GELUCastTransposeFP8 is CastTransposeFP8 of gelu(pre) (tanh form)
	// in E4M3: the input of the MLP projection from the fc layer's stored
	// pre-activation.
	// q (N,C) F8E4M3, qt (C,N) F8E4M3, amax (2), pre (N,C) float, scale (1)
	GELUCastTransposeFP8(q, qt, amax, pre, scale *T, N, C int)
	// CastTransposeDBiasFP8 is CastTransposeFP8 of an output gradient dy
	// in E5M2 that also adds dy's column sums (unscaled) into dbias, in a
	// fixed order (deterministic).
	// q (N,C) F8E5M2, qt (C,N) F8E5M2, amax (2), dbias (C) F32, dy (N,C) float, scale (1)
	CastTransposeDBiasFP8(q, qt, amax, dbias, dy, scale *T, N, C int)
	// DGELUCastTransposeDBiasFP8 is CastTransposeDBiasFP8 of
	// v = dy·gelu'(pre) (tanh form, in fp32 of the stored pre-activation,
	// not rounded to dy's dtype): the fc layer's output gradient from the
	// MLP projection's dx, in one pass in place of GELUBackward and the
	// cast; amax and dbias are of v.
	// q (N,C) F8E5M2, qt (C,N) F8E5M2, amax (2), dbias (C) F32, dy (N,C) float, pre (N,C) dy's dtype, scale (1)
	DGELUCastTransposeDBiasFP8(q, qt, amax, dbias, dy, pre, scale *T, N, C int)
	// LayerNormBackwardCastFP8 is LayerNormBackward with dinp f32 (the
	// residual gradient, accumulated) followed by CastTransposeDBiasFP8
	// of the updated dinp v into q, qt, amax and dbiasNext (the bias
	// gradient of the linear layer whose output gradient v is), in one
	// pass that reads v nowhere again: dinp, dweight and dbias as
	// LayerNormBackward's, q = e5m2(v·scale), qt = qᵀ, amax as the casts
	// add it, dbiasNext += v's column sums (unscaled, fp32, in a fixed
	// order).
	// dinp (N,C) F32, dweight (C) F32, dbias (C) F32, q (N,C) F8E5M2, qt (C,N) F8E5M2, amax (2), dbiasNext (C) F32, dout (N,C), inp (N,C) F32, weight (C), mean (N), rstd (N), scale (1)
	LayerNormBackwardCastFP8(dinp, dweight, dbias, q, qt, amax, dbiasNext, dout, inp, weight, mean, rstd, scale *T, N, C int)
	// MatmulFP8 computes out = (a·bᵀ)·invA·invB + bias with fp32
	// accumulation, rounded once to out's dtype (f32 or bf16); a and b are
	// K-major (rows of C), each of either FP8 dtype, invA and invB the
	// inverses of the scales they were cast with; bias (out's dtype) may
	// be nil.
	// out (N,OC) F32 or BF16, a (N,C) FP8, b (OC,C) FP8, bias (OC) or nil, invA (1), invB (1)
	MatmulFP8(out, a, b, bias, invA, invB *T, N, C, OC int)
	// MatmulFP8Add is MatmulFP8 added into an f32 out (the weight
	// gradient dW += dyᵀ·x, accumulated over micro-steps).
	// out (N,OC) F32, a (N,C) FP8, b (OC,C) FP8, invA (1), invB (1)
	MatmulFP8Add(out, a, b, invA, invB *T, N, C, OC int)
	// CrossEntropyFP8 is CrossEntropy (CrossEntropyScaled with state
	// not nil: dscale·state[SlotScale]) whose gradient g, with dscale !=
	// 0, is also cast: q = e5m2(g·scale) of g in fp32 before its rounding
	// to the logits' dtype (one rounding each), and amax added as the
	// casts add (max |g|, and the nonzero finite g whose code is ±0). The
	// losses, and with storeGrad the gradient over the logits, are
	// CrossEntropy's values; with storeGrad false the logits are left as
	// they were (the caller reads g only from q: the device skips writing
	// it in the logits' dtype), and the losses, q and amax are those
	// storeGrad true gives, bit for bit. q is the LM head's FP8 dlogits,
	// the K-major operand of its dx product (K = V) under
	// amp.FP8Recipe.Head; its weight gradient's (K = N) is qᵀ, which
	// TransposeFP8 makes from q. With dscale == 0 it is CrossEntropy, q
	// and amax untouched (storeGrad changes nothing). V must be a multiple
	// of 16 (rows of q are FP8 GEMM operands).
	// losses (N) F32, logits (N,V) float, q (N,V) F8E5M2, amax (2), targets (N) I32, scale (1), state (StateLen) F32 or nil
	CrossEntropyFP8(losses, logits, q, amax, targets, scale, state *T, N, V int, dscale float32, storeGrad bool)
	// TransposeFP8 writes out = inᵀ, the same codes (a copy of the bytes,
	// no amax: in's were counted where it was cast): the K-major copy of
	// an FP8 operand made apart from the op that cast it (the LM head's
	// e5m2 gradient, which CrossEntropyFP8 writes by rows, for its weight
	// gradient's FP8 GEMM: a bandwidth-bound pass after the classifier).
	// out (C,N), in (N,C) of one FP8 dtype
	TransposeFP8(out, in *T, N, C int)
	// FP8ScaleUpdate is amp.UpdateFP8Scales on the device state: every
	// tensor's amax into its history, its scale and inverse scale from
	// the history, non-finite amaxes counted, the amaxes cleared; with
	// recs not nil only the records it lists, each at most once
	// (amp.UpdateFP8ScalesOf): the weights' just before the optimizer
	// casts them (AdamWStateFP8), the others where the step begins.
	// st (amp.FP8Scales.St) F32, meta (amp.FP8Scales.Meta) I32, recs (n) I32 or nil
	FP8ScaleUpdate(st, meta, recs *T, K, H, margin int)
	// AdamWStateFP8 is AdamWState (Stepper's) that also writes the FP8
	// copies of the weights in w as it updates them: for each, the value
	// the working copy work holds after the step is cast as
	// CastTransposeFP8 casts it, into Q (e4m3) and its transpose QT with
	// Scale, adding to Amax; so the weights' FP8 operands come out of the
	// optimizer and need no cast of their own. When state[SlotFinite] is 0
	// the parameters stay as they are and the working copy is cast all
	// the same (the scales may have changed since it was). work must not
	// be nil; each w lies inside one segment of layout, and no two
	// overlap (FP8WeightSpans).
	// master, grads, m, v (layout.Total) F32, work (layout.Total) float, state (StateLen) F32
	AdamWStateFP8(master, work, grads, m, v *T, layout *tensor.Layout, hp AdamW, state *T, w []FP8Weight)
}

// FP8Weight is a weight whose FP8 copies AdamWStateFP8 writes: the
// (Rows, Cols) row-major matrix at element Offset of the flat parameter
// buffers, its copies Q (Rows, Cols) and QT (Cols, Rows) F8E4M3, the amax
// pair Amax (2) its cast adds to and the Scale (1) it casts with, f32
// views of an amp.FP8Scales state.
type FP8Weight struct {
	Offset, Rows, Cols int
	Q, QT, Amax, Scale *T
}

// CastFP8Weights casts each weight's segment of work (the working copy)
// into its FP8 copies with CastTransposeFP8, adding to its Amax: what
// AdamWStateFP8 does after the update, and what a step whose optimizer
// does not cast (bf16 moments) runs after it.
func CastFP8Weights(f FP8, work *T, w []FP8Weight) {
	for _, x := range w {
		f.CastTransposeFP8(x.Q, x.QT, x.Amax, work.MustView(x.Offset, x.Rows, x.Cols), x.Scale, x.Rows, x.Cols)
	}
}

// FP8WeightSpans checks the weights of AdamWStateFP8 against the spans of
// its layout (AdamWArgs) and returns whether each one's segment decays:
// an error when one is empty, lies outside every span or across two, or
// overlaps another, or a tensor is nil or not of its size and dtype
// (Amax and Scale F32; where the tensors live is the device's to check).
func FP8WeightSpans(spans []Span, w []FP8Weight) ([]bool, error) {
	dec := make([]bool, len(w))
	type rng struct{ lo, hi int }
	var seen []rng
	for i, x := range w {
		lo, hi := x.Offset, x.Offset+x.Rows*x.Cols
		switch {
		case x.Rows <= 0 || x.Cols <= 0:
			return nil, fmt.Errorf("AdamWStateFP8: weight %d is (%d, %d): %w", i, x.Rows, x.Cols, tensor.ErrShape)
		case x.Q == nil || x.QT == nil || x.Amax == nil || x.Scale == nil:
			return nil, fmt.Errorf("AdamWStateFP8: weight %d has a nil tensor: %w", i, tensor.ErrShape)
		case x.Q.DType != tensor.F8E4M3 || x.QT.DType != tensor.F8E4M3:
			return nil, fmt.Errorf("AdamWStateFP8: weight %d's copies are %s and %s, want %s: %w", i, x.Q.DType, x.QT.DType, tensor.F8E4M3, ErrUnsupported)
		case x.Q.Numel() != x.Rows*x.Cols || x.QT.Numel() != x.Rows*x.Cols:
			return nil, fmt.Errorf("AdamWStateFP8: weight %d's copies hold %d and %d codes, want %d: %w", i, x.Q.Numel(), x.QT.Numel(), x.Rows*x.Cols, tensor.ErrShape)
		case x.Amax.DType != tensor.F32 || x.Amax.Numel() != 2 || x.Scale.DType != tensor.F32 || x.Scale.Numel() != 1:
			return nil, fmt.Errorf("AdamWStateFP8: weight %d's amax (%s) and scale (%s) must be 2 and 1 f32: %w", i, x.Amax.DType, x.Scale.DType, tensor.ErrShape)
		}
		in := -1
		for k, s := range spans {
			if lo >= s.Lo && hi <= s.Hi {
				in = k
				break
			}
		}
		if in < 0 {
			return nil, fmt.Errorf("AdamWStateFP8: weight %d, elements [%d,%d), is not inside one segment of the layout: %w", i, lo, hi, tensor.ErrShape)
		}
		for _, r := range seen {
			if lo < r.hi && r.lo < hi {
				return nil, fmt.Errorf("AdamWStateFP8: weight %d, elements [%d,%d), overlaps another: %w", i, lo, hi, tensor.ErrShape)
			}
		}
		seen = append(seen, rng{lo, hi})
		dec[i] = spans[in].Decay
	}
	return dec, nil
}
