package device

// decomposed.go: the decomposed compositions, written once above the
// backends. An op whose decomposed form is a sequence of other Device ops
// is that sequence here, for any Device; both backends call it in their
// decomposed form (Options.Fused false) and where a fused form cannot run,
// and its descriptor's Decomposed points at it, so the conformance tests
// run the composition against the op itself.

// ResidualLayerNormDecomposed is ResidualLayerNorm as two ops: Add, then
// LayerNorm over the sum (res rounded to its dtype in between).
// res (N,C), out (N,C), mean (N), rstd (N), a (N,C), b (N,C), weight (C), bias (C)
func ResidualLayerNormDecomposed(d Device, res, out, mean, rstd, a, b, weight, bias *T, N, C int) {
	d.Add(res, a, b, N*C)
	d.LayerNorm(out, mean, rstd, res, weight, bias, N, C)
}

func residualLayerNorm(d Device, s []int, t []*T) {
	ResidualLayerNormDecomposed(d, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], s[0], s[1])
}

// MatmulBackwardGELUDecomposed is MatmulBackwardGELU as the sequence the op
// replaces: dpre zeroed, MatmulBackward accumulating dout·weight into it
// (one rounding to dpre's dtype) and the weight and bias gradients,
// GELUBackward over dpre in place (a second rounding), then the bias
// gradient of the rounded dpre (BiasGrad).
// dpre (N,C), dpreBias (C) F32 or nil, dweight (OC,C), dbias (OC) or nil,
// dout (N,OC), inp (N,C), pre (N,C), weight (OC,C)
func MatmulBackwardGELUDecomposed(d Device, dpre, dpreBias, dweight, dbias, dout, inp, pre, weight *T, N, C, OC int) {
	d.Zero(dpre)
	d.MatmulBackward(dpre, dweight, dbias, dout, inp, weight, N, C, OC)
	d.GELUBackward(dpre, pre, dpre, N*C)
	if dpreBias != nil {
		d.BiasGrad(dpreBias, dpre, N, C)
	}
}

func matmulBackwardGELU(d Device, s []int, t []*T) {
	MatmulBackwardGELUDecomposed(d, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], s[0], s[1], s[2])
}
