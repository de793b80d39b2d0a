package gpu

// matmul_gelu.go: MatmulBackwardGELU, the MLP projection's backward with
// the GELU's backward and the fc layer's bias gradient folded into its dgrad
// GEMM (cuBLASLt's DGELU_BGRAD epilogue).
//
// Fused, 16-bit operands: one cublasLtMatmul computes
// dpre = gelu'(pre)·(dout·weight) with pre read as the aux matrix (the
// pre-activation Matmul's GELU_AUX_BIAS epilogue stored, in the storage
// dtype) and writes Σ_rows dpre into an fp32 scratch vector (the bias
// vector's type set to fp32), which one small kernel adds into dpreBias.
// Where the library has no such algorithm (an fp32 bias-gradient vector
// beside a 16-bit D is newer than some versions), the DGELU epilogue runs
// alone and matmul.cu's column-sum kernel sums dpre. The weight gradient
// is weightGrad's, as in MatmulBackward.
//
// cuBLASLt's GELU is its own approximation of the tanh form, fine to a
// 16-bit ulp but not to fp32 (see matmul.go): fp32 operands, the decomposed
// form and configurations cuBLASLt cannot run take the sequence the op
// replaces: dpre zeroed, MatmulBackward into it, GELUBackward, column sums.

import (
	"fmt"

	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/tensor"
)

// MatmulBackwardGELU accumulates dweight += doutᵀ·inp and dbias += Σ_rows
// dout, overwrites dpre = gelu'(pre)·(dout·weight) and accumulates
// dpreBias += Σ_rows dpre (dbias and dpreBias may be nil).
// dpre (N,C), dpreBias (C) F32, dweight (OC,C), dbias (OC) F32, dout (N,OC), inp (N,C), pre (N,C), weight (OC,C)
func (d *Device) MatmulBackwardGELU(dpre, dpreBias, dweight, dbias, dout, inp, pre, weight *tensor.Tensor, N, C, OC int) {
	const op = "matmul backward gelu"
	if N < 0 || C <= 0 || OC <= 0 {
		d.fail(fmt.Errorf("gpu: %s: sizes N=%d C=%d OC=%d: %w", op, N, C, OC, tensor.ErrShape))
		return
	}
	if dpre == nil || pre == nil {
		d.fail(fmt.Errorf("gpu: %s: dpre and pre are required", op))
		return
	}
	if !d.checkN(op, N*C, dpre, pre) || !d.checkN(op, C, dpreBias) {
		return
	}
	if dpreBias != nil && dpreBias.DType != tensor.F32 {
		d.unsupported(op+" (dpreBias F32)", dpreBias.DType)
		return
	}
	if d.fused && weight != nil && dout != nil && N > 0 && dpre.DType == weight.DType && pre.DType == weight.DType &&
		weight.DType != tensor.F32 && d.matmulDGELU(op, dpre, dpreBias, dweight, dbias, dout, inp, pre, weight, N, C, OC) {
		return
	}
	if err := d.memset(d.ptr(dpre), dpre.Bytes()); err != nil {
		d.fail(fmt.Errorf("gpu: %s: zero dpre: %w", op, err))
		return
	}
	d.MatmulBackward(dpre, dweight, dbias, dout, inp, weight, N, C, OC)
	d.GELUBackward(dpre, pre, dpre, N*C)
	if dpreBias != nil && N > 0 {
		d.biasGrad(dpreBias, dpre, N, C)
	}
}

// matmulDGELU runs the fused form; it reports false (nothing queued) when
// the operands do not fit it or cuBLASLt has no algorithm for it.
func (d *Device) matmulDGELU(op string, dpre, dpreBias, dweight, dbias, dout, inp, pre, weight *tensor.Tensor, N, C, OC int) bool {
	h := weight.DType
	ht, ok := dataType(h)
	if !ok || inp == nil || dweight == nil || inp.DType != h || (dout.DType != h && dout.DType != tensor.F32) ||
		(dbias != nil && dbias.DType != tensor.F32) {
		return false // MatmulBackward reports what is wrong
	}
	if _, ok := dataType(dweight.DType); !ok {
		return false
	}
	if !d.checkN(op, N*C, inp) || !d.checkN(op, OC*C, dweight, weight) || !d.checkN(op, N*OC, dout) || !d.checkN(op, OC, dbias) {
		return true // the error is recorded
	}
	// dpre (N,C) = dout (N,OC)·weight (OC,C): M=C, N=N, K=OC, A=weight (ld C), B=dout (ld OC), D=dpre (ld C).
	p := cuda.LtParams{
		M: C, N: N, K: OC, AType: ht, BType: ht, CType: ht, LDA: C, LDB: OC, LDC: C,
		Compute: cuda.Compute32F, Epilogue: cuda.EpilogueDGELU, AuxLD: C,
	}
	if !ltAligned(d.ptr(weight), d.ptr(dpre), d.ptr(pre)) || (dout.DType == h && !ltAligned(d.ptr(dout))) {
		return false
	}
	var m *cuda.LtMatmul
	if dpreBias != nil {
		q := p
		q.Epilogue, q.BiasF32 = cuda.EpilogueDGELUBGrad, true
		m = d.ltMatmul(q)
	}
	withBias := m != nil
	if m == nil {
		if m = d.ltMatmul(p); m == nil {
			return false
		}
	}
	g := d.gemmOperand(dout, h, N*OC)
	if g == 0 {
		return true
	}
	args := cuda.LtArgs{
		Alpha: 1, A: d.ptr(weight), B: g, D: d.ptr(dpre), Aux: d.ptr(pre),
		Workspace: d.ws, WorkspaceBytes: WorkspaceBytes,
	}
	if withBias {
		if args.Bias = d.scratch("matmul.dgelu.dbias", C*4); args.Bias == 0 {
			return true
		}
	}
	d.launches.Add(1)
	if err := m.Run(d.stream, args); err != nil {
		d.fail(fmt.Errorf("gpu: %s: dpre (cuBLASLt): %w", op, err))
		return true
	}
	switch {
	case withBias:
		d.launch(kernAddF32, tensor.F32, d.ewGrid(int64(C), 1), cuda.D1(ewThreads), 0, d.ptr(dpreBias), args.Bias, int64(C))
	case dpreBias != nil:
		d.biasGrad(dpreBias, dpre, N, C)
	}
	d.weightGrad(op, dweight, dbias, dout, g, inp, N, C, OC, ht)
	return true
}
