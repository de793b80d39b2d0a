package device

// fp8.go: the ops of FP8 linear layers (amp.FP8, issue 38).

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
	// amax (the attention output, and the weights once a step).
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
	// the history, non-finite amaxes counted, the amaxes cleared.
	// st (amp.FP8Scales.St) F32, meta (amp.FP8Scales.Meta) I32
	FP8ScaleUpdate(st, meta *T, K, H, margin int)
}
