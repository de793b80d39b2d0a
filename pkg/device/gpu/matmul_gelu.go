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
// Where the library has no such algorithm (cuBLASLt documents the
// bias-gradient vector in D's type; an fp32 one beside a 16-bit D may be
// refused), the epilogue writes a 16-bit vector, cast and added (the sum
// rounded once to 16 bits, as PyTorch autocast's bias gradient is); where
// it has none for DGELU_BGRAD at all, the DGELU epilogue runs alone and
// matmul.cu's column-sum kernel sums dpre. LtFallbacks names the refused
// configurations. The weight gradient is weightGrad's, as in
// MatmulBackward.
//
// cuBLASLt's GELU is its own approximation of the tanh form, fine to a
// 16-bit ulp but not to fp32 (see matmul.go): fp32 operands, the decomposed
// form and configurations cuBLASLt cannot run take the sequence the op
// replaces: dpre zeroed, MatmulBackward into it, GELUBackward, column sums.

import (
	"fmt"

	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// MatmulBackwardGELU accumulates dweight += doutᵀ·inp and dbias += Σ_rows
// dout, overwrites dpre = gelu'(pre)·(dout·weight) and accumulates
// dpreBias += Σ_rows dpre (dbias and dpreBias may be nil).
// dpre (N,C), dpreBias (C) F32, dweight (OC,C), dbias (OC) F32, dout (N,OC), inp (N,C), pre (N,C), weight (OC,C)
func (d *Device) MatmulBackwardGELU(dpre, dpreBias, dweight, dbias, dout, inp, pre, weight *tensor.Tensor, N, C, OC int) {
	const op = "matmul backward gelu"
	if !d.check(&device.Ops.MatmulBackwardGELU, []int{N, C, OC}, dpre, dpreBias, dweight, dbias, dout, inp, pre, weight) {
		return
	}
	if dpreBias != nil && dpreBias.DType != tensor.F32 {
		d.unsupported(op+" (dpreBias F32)", dpreBias.DType)
		return
	}
	if N == 0 {
		d.MatmulBackward(nil, dweight, dbias, dout, inp, weight, N, C, OC) // checks the arguments, queues nothing
		return
	}
	if d.fused && weight != nil && dout != nil && dpre.DType == weight.DType && pre.DType == weight.DType &&
		weight.DType != tensor.F32 && d.matmulDGELU(op, dpre, dpreBias, dweight, dbias, dout, inp, pre, weight, N, C, OC) {
		return
	}
	if err := d.memset(d.ptr(dpre), dpre.Bytes()); err != nil {
		d.fail(fmt.Errorf("gpu: %s: zero dpre: %w", op, err))
		return
	}
	d.MatmulBackward(dpre, dweight, dbias, dout, inp, weight, N, C, OC)
	d.GELUBackward(dpre, pre, dpre, N*C)
	if dpreBias != nil {
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
	// dpre (N,C) = dout (N,OC)·weight (OC,C): M=C, N=N, K=OC, A=weight (ld C), B=dout (ld OC), D=dpre (ld C).
	p := cuda.LtParams{
		M: C, N: N, K: OC, AType: ht, BType: ht, CType: ht, LDA: C, LDB: OC, LDC: C,
		Compute: cuda.Compute32F, Epilogue: cuda.EpilogueDGELU, AuxLD: C,
	}
	if !ltAligned(d.ptr(weight), d.ptr(dpre), d.ptr(pre)) || (dout.DType == h && !ltAligned(d.ptr(dout))) {
		return false
	}
	// The bias gradient: an fp32 vector from the epilogue, else a vector of
	// D's type from it (the sum rounded once to 16 bits, as autocast's bias
	// gradient is), else matmul.cu's column sums of dpre.
	var m *cuda.LtMatmul
	bias16 := false
	if dpreBias != nil {
		q := p
		q.Epilogue, q.BiasF32 = cuda.EpilogueDGELUBGrad, true
		if m = d.ltMatmul(q); m == nil {
			q.BiasF32 = false
			m, bias16 = d.ltMatmul(q), true
		}
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
	var bias32 cuda.DevicePtr
	if withBias {
		if bias32 = d.scratch("matmul.dgelu.dbias", C*4); bias32 == 0 {
			return true
		}
		args.Bias = bias32
		if bias16 {
			if args.Bias = d.scratch("matmul.dgelu.dbias16", C*h.Size()); args.Bias == 0 {
				return true
			}
		}
	}
	d.launches.Add(1)
	if err := m.Run(d.stream, args); err != nil {
		d.fail(fmt.Errorf("gpu: %s: dpre (cuBLASLt): %w", op, err))
		return true
	}
	switch {
	case withBias:
		if bias16 {
			d.Cast(tensor.OnDevice(tensor.F32, uintptr(bias32), C), tensor.OnDevice(h, uintptr(args.Bias), C))
		}
		d.launch(kernAddF32, tensor.F32, d.ewGrid(int64(C), 1), cuda.D1(addF32Block), 0, d.ptr(dpreBias), bias32, int64(C))
	case dpreBias != nil:
		d.biasGrad(dpreBias, dpre, N, C)
	}
	d.weightGrad(op, dweight, dbias, dout, g, inp, N, C, OC, ht)
	return true
}
