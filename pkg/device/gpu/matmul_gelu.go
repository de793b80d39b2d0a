package gpu

// matmul_gelu.go: MatmulBackwardGELU, the MLP projection's backward with
// the GELU's backward and the fc layer's bias gradient folded into it, in
// one of two fused forms (DGELUEnv picks; `druto bench --kernels` times both
// as gemm_mlp_proj_bwd "fused" and "fused-epilogue" / "fused-kernel"):
//
//   - kernel (the default): a plain dgrad GEMM stores dpre = dout·weight in
//     dpre's dtype (β 0, as MatmulBackwardStore), then gelu.cu's
//     gelu_bias_backward overwrites dpre = gelu'(pre)·dpre in place and
//     writes the fp32 column sums of those products (before rounding) per
//     chunk of rows, which matmul.cu's matmul_bias_grad adds, in chunk
//     order, into dpreBias: deterministic, no atomics. One more rounding of
//     dpre than the epilogue's (the GEMM's output, then the product), both
//     far inside the 16-bit tolerances. Every float dtype (fp32 too: there
//     the kernel's derivative is the CPU reference's tanhf form). It moves
//     dpre once more than the epilogue (written by the GEMM, read and
//     written by the kernel: ~300 MB at GPT-2 124M's B16 T1024), and is
//     still the faster form: the plain GEMM runs cuBLASLt's fast Hopper
//     kernels, while the GEMMs that carry the DGELU epilogue took about
//     three times as long as a plain GEMM of the same FLOPs on an H200.
//   - epilogue: one cublasLtMatmul computes dpre = gelu'(pre)·(dout·weight)
//     with pre read as the aux matrix (the pre-activation Matmul's
//     GELU_AUX_BIAS epilogue stored, in the storage dtype) and writes
//     Σ_rows dpre into an fp32 scratch vector (the bias vector's type set to
//     fp32), which one small kernel adds into dpreBias. Where the library
//     has no such algorithm (cuBLASLt documents the bias-gradient vector in
//     D's type; an fp32 one beside a 16-bit D may be refused), the epilogue
//     writes a 16-bit vector, cast and added (the sum rounded once to 16
//     bits, as PyTorch autocast's bias gradient is); where it has none for
//     DGELU_BGRAD at all, the DGELU epilogue runs alone and matmul.cu's
//     column-sum kernel sums dpre. LtFallbacks names the refused
//     configurations. cuBLASLt's GELU is its own approximation of the tanh
//     form, fine to a 16-bit ulp but not to fp32 (see matmul.go): fp32
//     operands take the sequence below in this form.
//
// Both forms then run the weight gradient, weightGrad's, as in
// MatmulBackward. The decomposed form, and configurations neither fused
// form can run, take the sequence the op replaces, written once above the
// backends (device.MatmulBackwardGELUDecomposed): dpre zeroed,
// MatmulBackward into it, GELUBackward, BiasGrad.

import (
	"fmt"
	"os"

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
	if N == 0 {
		d.MatmulBackward(nil, dweight, dbias, dout, inp, weight, N, C, OC) // checks the arguments, queues nothing
		return
	}
	if d.fused && weight != nil && dout != nil && dpre.DType == weight.DType && pre.DType == weight.DType {
		if !d.dgeluEpi && d.matmulDGELUKernel(op, dpre, dpreBias, dweight, dbias, dout, inp, pre, weight, N, C, OC) {
			return
		}
		if d.dgeluEpi && weight.DType != tensor.F32 && d.matmulDGELU(op, dpre, dpreBias, dweight, dbias, dout, inp, pre, weight, N, C, OC) {
			return
		}
	}
	device.MatmulBackwardGELUDecomposed(d, dpre, dpreBias, dweight, dbias, dout, inp, pre, weight, N, C, OC)
}

// DGELUEnv names the environment variable that picks MatmulBackwardGELU's
// fused form (see the file comment): "kernel" or unset (the default), the
// stored dgrad GEMM and gelu_bias_backward; "epilogue", cuBLASLt's
// DGELU_BGRAD epilogue. (The DGELU epilogue alone with the bias gradient as
// column sums is not offered: it was slower than both, by half again
// against the kernel form at gpt2-124M's shape on an H200.)
const DGELUEnv = "DRUTO_DGELU"

// dgeluEnv reads DGELUEnv: whether the epilogue form is chosen.
func dgeluEnv() (bool, error) {
	switch v := os.Getenv(DGELUEnv); v {
	case "", "kernel":
		return false, nil
	case "epilogue":
		return true, nil
	default:
		return false, fmt.Errorf("gpu: %s=%q: want kernel or epilogue (MatmulBackwardGELU's fused form) or unset", DGELUEnv, v)
	}
}

// dgeluOperands returns the GEMM type of MatmulBackwardGELU's fused forms
// and whether the operands fit them (else MatmulBackward's sequence
// reports what is wrong).
func dgeluOperands(dweight, dbias, dout, inp, weight *tensor.Tensor) (cuda.DataType, bool) {
	h := weight.DType
	ht, ok := dataType(h)
	_, okW := dataType(dweight.DType)
	return ht, ok && okW && inp.DType == h && (dout.DType == h || dout.DType == tensor.F32) && (dbias == nil || dbias.DType == tensor.F32)
}

// matmulDGELUKernel runs the kernel form: dpre = dout·weight stored by a
// plain GEMM (cuBLASLt, else cuBLAS, β 0), gelu_bias_backward over it
// (geluBiasBackward), then the weight gradient. It reports false (nothing
// queued) when the operands do not fit it (MatmulBackward's sequence then
// reports what is wrong).
func (d *Device) matmulDGELUKernel(op string, dpre, dpreBias, dweight, dbias, dout, inp, pre, weight *tensor.Tensor, N, C, OC int) bool {
	h := weight.DType
	ht, ok := dgeluOperands(dweight, dbias, dout, inp, weight)
	if !ok {
		return false
	}
	g, dbias := d.gradOperand(dout, dbias, h, N, OC)
	if g == 0 {
		return true
	}
	// dpre (N,C) = dout (N,OC)·weight (OC,C), stored
	e := cuda.Gemm{
		M: C, N: N, K: OC, Alpha: 1, Beta: 0,
		A: d.ptr(weight), B: g, C: d.ptr(dpre),
		AType: ht, BType: ht, CType: ht, LDA: C, LDB: OC, LDC: C, Compute: cuda.Compute32F,
	}
	if !d.ltGemm(e) {
		if err := d.gemm(e); err != nil {
			d.fail(fmt.Errorf("gpu: %s: dpre (cuBLAS): %w", op, err))
			return true
		}
	}
	d.geluBiasBackward(dpre, pre, dpreBias, N, C)
	d.weightGrad(op, dweight, dbias, dout, g, inp, N, C, OC, ht)
	return true
}

// geluBiasChunks returns gelu_bias_backward's rows per chunk and chunk
// count for N rows, strips column strips and target blocks (the blocks
// resident at once): one wave of blocks, rows a multiple of 16 (each warp
// takes rows in pairs).
func geluBiasChunks(N, strips, target int) (rows, chunks int) {
	chunks = max(1, target/max(1, strips))
	rows = blocks(max(N, 1), chunks)
	rows = blocks(rows, 16) * 16
	return rows, blocks(max(N, 1), rows)
}

// geluBiasBackward queues gelu_bias_backward: dpre (N,C) = gelu'(pre)·dpre
// in place, and (dbias not nil) dbias (C) F32 += Σ_rows of those products
// in fp32, from per-chunk partial sums (scratch) added in chunk order by
// matmul_bias_grad. dpre and pre share a float dtype.
func (d *Device) geluBiasBackward(dpre, pre, dbias *tensor.Tensor, N, C int) {
	if N == 0 {
		return
	}
	dt := dpre.DType
	w := 16 / dt.Size() // elements of a 16-byte vector
	vec := 0
	if C%w == 0 && d.ptr(dpre)%16 == 0 && d.ptr(pre)%16 == 0 {
		vec = 1
	}
	strips := blocks(C, 32*w)
	rows, chunks := geluBiasChunks(N, strips, d.residentBlocks("gelu_bias_backward", dt, geluBlock, 0)*d.sms())
	var part cuda.DevicePtr
	if dbias != nil {
		if part = d.scratch("gelu.bias.part", chunks*C*4); part == 0 {
			return
		}
	}
	grid := cuda.Dim3{X: uint32(strips), Y: uint32(chunks), Z: 1}
	if !d.launch("gelu_bias_backward", dt, grid, cuda.D1(geluBlock), 0, d.ptr(dpre), d.ptr(pre), part, N, C, rows, vec) || dbias == nil {
		return
	}
	d.launch(kernBiasGrad, tensor.F32, grid1(blocks(C, 32)), cuda.D1(biasGradBlock), 0, d.ptr(dbias), part, chunks, C)
}

// matmulDGELU runs the epilogue form; it reports false (nothing queued) when
// the operands do not fit it or cuBLASLt has no algorithm for it.
func (d *Device) matmulDGELU(op string, dpre, dpreBias, dweight, dbias, dout, inp, pre, weight *tensor.Tensor, N, C, OC int) bool {
	h := weight.DType
	ht, ok := dgeluOperands(dweight, dbias, dout, inp, weight)
	if !ok {
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
	g, dbias := d.gradOperand(dout, dbias, h, N, OC)
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

// BiasGrad accumulates dbias += Σ_rows dout in fp32 (matmul.cu's
// matmul_bias_grad).
// dbias (OC) F32, dout (N,OC)
func (d *Device) BiasGrad(dbias, dout *tensor.Tensor, N, OC int) {
	if !d.check(&device.Ops.BiasGrad, []int{N, OC}, dbias, dout) || N == 0 {
		return
	}
	d.biasGrad(dbias, dout, N, OC)
}
