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
