package gpu

// fp8.go: the FP8 operations of issue 38 (FP8 training on Hopper):
//
//   - CastTransposeFP8, the launcher of kernels/fp8.cu: x to FP8 with a
//     device-side scale, row-major and transposed, and amax.
//   - LayerNormFP8 and ResidualLayerNormFP8, the FP8 producers of
//     kernels/fp8.cu: LayerNorm (ResidualLayerNorm) of the fp32 residual
//     stream whose output, instead of being stored in T, is cast to E4M3
//     as CastTransposeFP8 casts it, in the same kernel: the input of the
//     qkv and fc GEMMs and its transposed copy, with no cast pass.
//   - GELUCastTransposeFP8, CastTransposeDBiasFP8 and
//     DGELUCastTransposeDBiasFP8: the input of the MLP projection from the
//     fc layer's pre-activation, an output gradient in E5M2 with its bias
//     gradient, and the fc layer's output gradient through the GELU
//     backward (dy·gelu'(pre)) cast the same way.
//   - LayerNormBackwardCastFP8: the layernorm backward of the fp32
//     residual stream whose updated dinp (the residual gradient) is cast
//     as CastTransposeDBiasFP8 casts an output gradient, in the same
//     kernel: the FP8 backward's dy of the projection before it, with no
//     pass that reads the gradient again.
//   - MatmulFP8 (MatmulFP8Add), the FP8 GEMM on cuBLASLt: out (N,OC) =
//     a (N,C)·b (OC,C)ᵀ · invA·invB, with per-tensor dequantisation
//     factors read on the device, the contract of pkg/device/cpu's
//     MatmulFP8 (its reference).
//
// With FP8ScaleUpdate (fp8scale.go) they implement device.FP8, whose FP8
// operands are tensors of dtype tensor.F8E4M3 or F8E5M2. They need
// sm_90 or newer (one rule for every FP8 operation: cuBLASLt has FP8 on
// sm_89 too, the conversion kernels need sm_90's PTX) and return errors
// wrapping ErrArch below it, ErrFP8Args for arguments that do not fit; both
// are also recorded for Sync, as a launch failure is.
//
// MatmulFP8 runs the row-major product as druto's bf16 forward (matmul.go)
// runs out = inp·Wᵀ: in cuBLASLt's column-major terms TransA, M=OC, N=N,
// K=C, A = b (ld C), B = a (ld C), D = out (ld OC). That is the "TN"
// layout, both operands K-major, the only one Hopper's FP8 kernels take;
// a (N,C) and b (OC,C) with rows of C contiguous are the linear layer's
// input and weight as druto stores them. The output is bf16, the training's
// working type, or fp32 (MatmulFP8Add: the weight gradient, accumulated
// into the fp32 gradient buffer with cuBLASLt's beta = 1). The compute
// type is CUBLAS_COMPUTE_32F without cuBLASLt's fast-accumulation mode
// (its default): partial sums are promoted to fp32 registers, though the
// FP8 tensor-core instruction itself accumulates with fewer bits than fp32
// (TestGPUMatmulFP8's bound allows for that). The algorithm is chosen once per shape
// and format pair through matmul.go's cache (ltMatmul); the scale pointers
// are per call, so that every layer shares that choice. Nothing is
// configured during graph capture.

import (
	"errors"
	"fmt"

	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/tensor"
)

var (
	ctBlock = kernels.MustBlock("fp8.cu", "CT_BLOCK") // cast_transpose_e4m3/e5m2
	ctTile  = kernels.MustDefine("fp8.cu", "CT_TILE") // the side of a block's square tile

	lnf8Block = kernels.MustBlock("fp8.cu", "LNF8_BLOCK")  // (residual_)layernorm_fp8_e4m3
	lnf8Rows  = kernels.MustDefine("fp8.cu", "LNF8_ROWS")  // the rows (tokens) a block owns
	lnf8MaxC  = kernels.MustDefine("fp8.cu", "LNF8_MAX_C") // the widest row: LNF8_ROWS·C bytes of shared memory

	lnb8Block = kernels.MustBlock("fp8.cu", "LNB8_BLOCK")  // layernorm_backward_cast_e5m2
	lnb8Rows  = kernels.MustDefine("fp8.cu", "LNB8_ROWS")  // the rows (tokens) a block owns
	lnb8MaxC  = kernels.MustDefine("fp8.cu", "LNB8_MAX_C") // the widest row: its columns a thread in registers
)

// lnBwdFP8Kernel is the layernorm backward that casts the updated dinp.
const lnBwdFP8Kernel = "layernorm_backward_cast_e5m2"

// lnb8Smem is layernorm_backward_cast_e5m2's dynamic shared memory for
// rows of C at rows a block: on the fast path (vec) the four warps' sums
// (3C floats each) and the block's rows·C bytes of E5M2 tile, else the
// tile alone.
func lnb8Smem(C int, vec bool, rows int) int {
	if vec {
		return lnb8Block/32*3*4*C + rows*C
	}
	return rows * C
}

// lnb8RowsFor is layernorm_backward_cast_e5m2's rows a block for rows of
// C: lnb8Rows (64) up to GPT-2 small's 768, half that for wider rows,
// where the smaller tile lets a third block onto an SM (on the H100 at
// 1024 the fused kernel was slower than the two ops it replaces with 64
// rows and faster with 32; at 768, the other way round).
func lnb8RowsFor(C int) int {
	if C <= 768 {
		return lnb8Rows
	}
	return lnb8Rows / 2
}

// The FP8 producers' kernels.
const (
	lnFP8Kernel    = "layernorm_fp8_e4m3"
	resLNFP8Kernel = "residual_layernorm_fp8_e4m3"
)

func init() {
	// The block's rows as FP8 bytes (lnf8Rows·C) pass the 48 KB a block
	// gets without asking from C = 769 on: the limit is raised at load to
	// the widest row's.
	for _, k := range []string{lnFP8Kernel, resLNFP8Kernel} {
		dynamicSmem[k] = lnf8Rows * lnf8MaxC
	}
	dynamicSmem[lnBwdFP8Kernel] = max(lnb8Smem(lnFastMaxC, true, lnb8Rows), lnb8Smem(lnb8MaxC, false, lnb8Rows))
}

// fp8MinArch is the compute capability ×10 that the FP8 conversion
// instructions need in the embedded PTX (fp8.cu's druto:arch line).
const fp8MinArch = 90

// ErrFP8Args is wrapped by the errors of CastTransposeFP8 and MatmulFP8
// about their arguments.
var ErrFP8Args = errors.New("gpu: bad arguments to an FP8 operation")

// CastTransposeFP8 queues one kernel that writes q (N,C) = fp8(x·s) in
// q's format, qt (C,N) = qᵀ (the K-major copy of the backward's "TN" FP8
// GEMMs) and amax = max(amax, max |x|) (before scaling; NaN when any x is
// NaN), with s = scale[0] read on the device (the FP8 scaler's scale, no
// host round trip); it implements device.FP8.
//
//	q (N,C), qt (C,N) F8E4M3 or F8E5M2, amax (2) f32, x (N,C) f32/bf16/f16, scale (1) f32
//
// The conversion rounds x·s (in fp32) to nearest even and saturates to
// ±max, as tensor.QuantizeFP8; pkg/device/cpu's CastTransposeFP8 is the
// reference (NaN codes may differ, see cpu.SameFP8). It needs sm_90 or
// newer and returns an error wrapping ErrArch on older GPUs, ErrFP8Args
// for arguments that do not fit; both are also recorded for Sync, as a
// launch failure is.
func (d *Device) CastTransposeFP8(q, qt, amax, x, scale *tensor.Tensor, N, C int) {
	const op = "CastTransposeFP8"
	f, err := d.fp8Pair(op, q, qt, 0, N*C)
	if err == nil {
		err = d.castTransposeFP8(op, "", d.ptr(q), d.ptr(qt), amax, x, nil, scale, f, N, C, 0)
	}
	d.record(err)
}

// GELUCastTransposeFP8 is CastTransposeFP8 of gelu(pre) (the tanh form, in
// fp32 of the stored pre-activation) in E4M3: the input of the MLP
// projection, its transposed copy and amax = max |gelu(pre)|, made from
// the fc layer's pre-activation in one pass (kernels/fp8.cu's
// gelu_cast_transpose_e4m3; pkg/device/cpu's GELUCastTransposeFP8 is the
// reference, equal within one E4M3 rounding: the two GELUs' tanh may
// differ in the last bit). Errors as CastTransposeFP8's.
//
//	q (N,C) F8E4M3, qt (C,N) F8E4M3, amax (2) f32, pre (N,C) f32/bf16/f16, scale (1) f32
func (d *Device) GELUCastTransposeFP8(q, qt, amax, pre, scale *tensor.Tensor, N, C int) {
	const op = "GELUCastTransposeFP8"
	f, err := d.fp8Pair(op, q, qt, tensor.E4M3, N*C)
	if err == nil {
		err = d.castTransposeFP8(op, "gelu_", d.ptr(q), d.ptr(qt), amax, pre, nil, scale, f, N, C, 0)
	}
	d.record(err)
}

// fp8Pair checks an FP8 cast's q and qt: on the device, of one FP8 dtype
// (want's, when not 0) and n elements each; it returns their format.
func (d *Device) fp8Pair(op string, q, qt *tensor.Tensor, want tensor.FP8Format, n int) (tensor.FP8Format, error) {
	if q == nil || qt == nil {
		return 0, fmt.Errorf("%w: %s: a nil q or qt", ErrFP8Args, op)
	}
	f, ok := q.DType.FP8()
	switch {
	case !ok || q.DType != qt.DType || (want != 0 && f != want):
		w := "one FP8 dtype"
		if want != 0 {
			w = want.DType().String()
		}
		return 0, fmt.Errorf("%w: %s: q %s, qt %s, want %s", ErrFP8Args, op, desc(q), desc(qt), w)
	case q.Numel() != n || qt.Numel() != n:
		return 0, fmt.Errorf("%w: %s: q %s, qt %s, want %d elements: %w", ErrFP8Args, op, desc(q), desc(qt), n, tensor.ErrShape)
	case n > 0 && (q.Dev == 0 || qt.Dev == 0):
		return 0, fmt.Errorf("%w: %s: q or qt is a host tensor", ErrFP8Args, op)
	}
	return f, nil
}

// fp8Arch returns an error wrapping ErrArch when the device is older than
// sm_90, for op, an FP8 operation (one rule for all, see the file's
// comment).
func (d *Device) fp8Arch(op string) error {
	if d.ctx != nil {
		if major, minor := d.Capability(); major*10+minor < fp8MinArch {
			return fmt.Errorf("gpu: %s needs sm_%d or newer (druto's FP8 operations share one rule; the FP8 cvt is sm_90's in PTX ISA 7.8), this device is sm_%d%d: %w", op, fp8MinArch, major, minor, ErrArch)
		}
	}
	return nil
}

// CastTransposeDBiasFP8 is CastTransposeFP8 of a linear layer's output
// gradient dy in E5M2 with the bias gradient on the way: q, qt and amax as
// CastTransposeFP8's, and dbias (C) += the column sums of dy, unscaled, in
// fp32 (kernels/fp8.cu's cast_transpose_dbias_e5m2 writes each 64-row
// tile's sums, matmul.cu's matmul_bias_grad adds them in tile order:
// deterministic). dy is read once for the dx and dW GEMMs' operands, amax
// and dbias. pkg/device/cpu's CastTransposeDBiasFP8 is the reference.
//
//	q (N,C) F8E5M2, qt (C,N) F8E5M2, amax (2) f32, dbias (C) f32, dy (N,C) f32/bf16/f16, scale (1) f32
func (d *Device) CastTransposeDBiasFP8(q, qt, amax, dbias, dy, scale *tensor.Tensor, N, C int) {
	_, err := d.fp8Pair("CastTransposeDBiasFP8", q, qt, tensor.E5M2, N*C)
	if err == nil {
		err = d.castTransposeDBiasFP8(d.ptr(q), d.ptr(qt), amax, dbias, dy, nil, scale, N, C)
	}
	d.record(err)
}

// DGELUCastTransposeDBiasFP8 is CastTransposeDBiasFP8 of
// v = dy·gelu'(pre), the fc layer's output gradient in the FP8 backward
// from the MLP projection's dx (dy) and the stored pre-activation (pre):
// kernels/fp8.cu's dgelu_cast_transpose_dbias_e5m2 computes v in fp32
// (gelu.cuh's gelu_grad_lean, the derivative of the bf16 MLP backward's
// gelu_bias_backward; tanhf's form for f32) and casts it, transposes it,
// takes amax = max |v| and its column sums as cast_transpose_dbias_e5m2
// does, so that no GELU backward pass writes v in T for the cast to read
// again. pkg/device/cpu's DGELUCastTransposeDBiasFP8 is the reference
// (its gelu' is the CPU GELUBackward's, a few fp32 ulps from the
// kernel's: a code now and then one E5M2 rounding apart). pre has dy's
// dtype. Errors as CastTransposeDBiasFP8's.
//
//	q (N,C) F8E5M2, qt (C,N) F8E5M2, amax (2) f32, dbias (C) f32, dy (N,C) f32/bf16/f16, pre (N,C) dy's dtype, scale (1) f32
func (d *Device) DGELUCastTransposeDBiasFP8(q, qt, amax, dbias, dy, pre, scale *tensor.Tensor, N, C int) {
	_, err := d.fp8Pair("DGELUCastTransposeDBiasFP8", q, qt, tensor.E5M2, N*C)
	if err == nil && pre == nil {
		err = errFP8NilPre
	}
	if err == nil {
		err = d.castTransposeDBiasFP8(d.ptr(q), d.ptr(qt), amax, dbias, dy, pre, scale, N, C)
	}
	d.record(err)
}

// errFP8NilPre is DGELUCastTransposeDBiasFP8's error for a nil pre.
var errFP8NilPre = fmt.Errorf("%w: DGELUCastTransposeDBiasFP8: pre is nil", ErrFP8Args)

// castTransposeDBiasFP8 checks and launches the dbias cast-transpose of dy,
// or with pre (not nil) of dy·gelu'(pre), then matmul_bias_grad over the
// tiles' column sums into dbias.
func (d *Device) castTransposeDBiasFP8(q, qt cuda.DevicePtr, amax, dbias, dy, pre, scale *tensor.Tensor, N, C int) error {
	name, op := "CastTransposeDBiasFP8", ""
	if pre != nil {
		name, op = "DGELUCastTransposeDBiasFP8", "dgelu_"
	}
	switch {
	case dbias == nil || dbias.DType != tensor.F32 || dbias.Numel() != C:
		return fmt.Errorf("%w: dbias %s, want f32 (%d): %w", ErrFP8Args, desc(dbias), C, tensor.ErrShape)
	case dbias.Dev == 0 && C > 0:
		return fmt.Errorf("%w: %s is a host tensor", ErrFP8Args, desc(dbias))
	}
	if err := d.fp8Arch(name); err != nil {
		return err
	}
	if N < 0 || C < 0 {
		return fmt.Errorf("%w: N %d, C %d", ErrFP8Args, N, C)
	}
	chunks := blocks(N, ctTile)
	part := cuda.DevicePtr(0)
	if N > 0 && C > 0 {
		if part = d.buf("fp8.dbias.part", chunks*C*4); part == 0 {
			return fmt.Errorf("gpu: %s: no scratch for the column sums", name)
		}
	}
	if err := d.castTransposeFP8(name, op, q, qt, amax, dy, pre, scale, tensor.E5M2, N, C, part); err != nil {
		return err
	}
	if N > 0 && C > 0 && !d.run(kernBiasGrad, tensor.F32, grid1(blocks(C, 32)), cuda.D1(biasGradBlock), 0, d.ptr(dbias), part, chunks, C) {
		return fmt.Errorf("gpu: %s: %s did not launch (see Sync)", name, kernBiasGrad)
	}
	return nil
}

// castTransposeFP8 launches the cast-transpose kernel op+"cast_transpose_"+f
// for the method name; with part (the column sums' scratch, not 0) it is
// op+"cast_transpose_dbias_"+f, and with pre (not nil: op "dgelu_") it
// also reads the pre-activation pre, laid out and typed as x.
func (d *Device) castTransposeFP8(name, op string, q, qt cuda.DevicePtr, amax, x, pre, scale *tensor.Tensor, f tensor.FP8Format, N, C int, part cuda.DevicePtr) error {
	if err := d.fp8Arch(name); err != nil {
		return err
	}
	switch {
	case f != tensor.E4M3 && f != tensor.E5M2:
		return fmt.Errorf("%w: format %d (want tensor.E4M3 or tensor.E5M2)", ErrFP8Args, f)
	case N < 0 || C < 0:
		return fmt.Errorf("%w: N %d, C %d", ErrFP8Args, N, C)
	case x == nil || !x.DType.Float() || x.Numel() != N*C:
		return fmt.Errorf("%w: x %s, want %d elements of f32, bf16 or f16: %w", ErrFP8Args, desc(x), N*C, tensor.ErrShape)
	case pre != nil && (pre.DType != x.DType || pre.Numel() != N*C):
		return fmt.Errorf("%w: %s: pre %s, want %d elements of %s (dy's dtype): %w", ErrFP8Args, name, desc(pre), N*C, x.DType, tensor.ErrShape)
	case pre != nil && part == 0 && N > 0 && C > 0:
		return fmt.Errorf("%w: %s: the dGELU cast needs the column sums' scratch", ErrFP8Args, name)
	}
	ins := []*tensor.Tensor{x}
	if pre != nil {
		ins = append(ins, pre)
	}
	if err := d.fp8Outputs(name, q, qt, amax, scale, N*C, ins...); err != nil {
		return err
	}
	if N == 0 || C == 0 {
		return nil
	}
	kernel := op + "cast_transpose_" + f.String()
	args := []any{q, qt, d.ptr(amax)}
	if part != 0 {
		kernel = op + "cast_transpose_dbias_" + f.String()
		args = append(args, part)
	}
	// 16-byte rows: x (and pre) and q when every row starts aligned, qt
	// likewise.
	xp := d.ptr(x)
	ptrs := []any{xp}
	aligned := uint64(xp)%16 == 0 && uint64(q)%16 == 0
	if pre != nil {
		pp := d.ptr(pre)
		ptrs = append(ptrs, pp)
		aligned = aligned && uint64(pp)%16 == 0
	}
	vecRow, vecCol := 0, 0
	if C%16 == 0 && aligned {
		vecRow = 1
	}
	if N%16 == 0 && uint64(qt)%16 == 0 {
		vecCol = 1
	}
	if blocks(N, ctTile) > maxGridYZ {
		return fmt.Errorf("%w: N %d rows, at most %d (65535 tiles of 64 rows in the grid's y dimension)", ErrFP8Args, N, maxGridYZ*ctTile)
	}
	grid := cuda.Dim3{X: uint32(blocks(C, ctTile)), Y: uint32(blocks(N, ctTile)), Z: 1}
	args = append(append(args, ptrs...), d.ptr(scale), N, C, vecRow, vecCol)
	if !d.run(kernel, x.DType, grid, cuda.D1(ctBlock), 0, args...) {
		return fmt.Errorf("gpu: %s: %s/%s did not launch (see Sync)", name, kernel, x.DType)
	}
	return nil
}

// fp8Outputs checks what every FP8 cast takes: amax a pair of f32 and
// scale one, q and qt not null when n (their bytes) > 0, and amax, scale
// and ins on the device. The kernels add to amax (atomicMax on the bits
// of |x|, atomicAdd of their underflows on the second word's bits), so
// that it spans every cast into it until FP8ScaleUpdate clears it.
func (d *Device) fp8Outputs(op string, q, qt cuda.DevicePtr, amax, scale *tensor.Tensor, n int, ins ...*tensor.Tensor) error {
	switch {
	case amax == nil || amax.DType != tensor.F32 || amax.Numel() != 2:
		return fmt.Errorf("%w: amax %s, want f32 (2): the max and the underflows: %w", ErrFP8Args, desc(amax), tensor.ErrShape)
	case scale == nil || scale.DType != tensor.F32 || scale.Numel() != 1:
		return fmt.Errorf("%w: scale %s, want f32 (1): %w", ErrFP8Args, desc(scale), tensor.ErrShape)
	case n > 0 && (q == 0 || qt == 0):
		return fmt.Errorf("%w: a null q or qt", ErrFP8Args)
	}
	for _, t := range append([]*tensor.Tensor{amax, scale}, ins...) {
		if t.Dev == 0 && t.Numel() > 0 {
			return fmt.Errorf("%w: %s is a host tensor", ErrFP8Args, desc(t))
		}
	}
	return nil
}

// LayerNormFP8 queues one kernel that normalises each row of inp as
// LayerNorm does (the same row code, layernorm.cuh: mean and rstd are
// LayerNorm's bits, stored for the backward) and, instead of storing the
// output y in T, writes q (N,C) = e4m3(y·s), qt (C,N) = qᵀ (the K-major
// copy of the weight-gradient GEMM, K = tokens) and amax = max |y| (y in
// fp32, before scaling; NaN when any y is) added into amax as
// CastTransposeFP8 adds, s = scale[0] read on the device.
//
//	q (N,C) F8E4M3, qt (C,N) F8E4M3, amax (2) f32, mean (N) f32, rstd (N) f32,
//	inp (N,C) f32, weight (C) T, bias (C) T, scale (1) f32
//
// inp is the residual stream, fp32 under every precision policy; T is
// f32, bf16 or f16. The conversion is CastTransposeFP8's (nearest even,
// saturating to ±448); pkg/device/cpu's LayerNormFP8 is the reference, and
// given this kernel's mean and rstd its NormCastTransposeFP8 gives q, qt
// and amax bit for bit (NaN codes aside, see cpu.SameFP8). C may be at most
// 3584 (the kernel keeps a block's 64 rows of FP8 bytes in shared memory).
// It needs sm_90 (an error wrapping ErrArch below), and returns ErrFP8Args
// for arguments that do not fit; both are also recorded for Sync, as a
// launch failure is.
func (d *Device) LayerNormFP8(q, qt, amax, mean, rstd, inp, weight, bias, scale *tensor.Tensor, N, C int) {
	_, err := d.fp8Pair("LayerNormFP8", q, qt, tensor.E4M3, N*C)
	if err == nil {
		err = d.layerNormFP8(nil, d.ptr(q), d.ptr(qt), amax, mean, rstd, inp, nil, weight, bias, scale, N, C)
	}
	d.record(err)
}

// ResidualLayerNormFP8 is LayerNormFP8 of res = a + b, rounded to fp32 and
// stored, as ResidualLayerNorm with an fp32 res computes and stores it.
//
//	res (N,C) f32, q (N,C) F8E4M3, qt (C,N) F8E4M3, amax (2) f32, mean (N) f32,
//	rstd (N) f32, a (N,C) f32, b (N,C) T, weight (C) T, bias (C) T, scale (1) f32
func (d *Device) ResidualLayerNormFP8(res, q, qt, amax, mean, rstd, a, b, weight, bias, scale *tensor.Tensor, N, C int) {
	_, err := d.fp8Pair("ResidualLayerNormFP8", q, qt, tensor.E4M3, N*C)
	if err == nil && res == nil {
		err = errFP8NilRes
	}
	if err == nil {
		err = d.layerNormFP8(res, d.ptr(q), d.ptr(qt), amax, mean, rstd, a, b, weight, bias, scale, N, C)
	}
	d.record(err)
}

// record records err (when not nil) for Sync, and returns it.
func (d *Device) record(err error) error {
	if err != nil {
		d.fail(err)
	}
	return err
}

// layerNormFP8 checks and launches the FP8 layernorm; res nil is the plain
// form (b unused).
func (d *Device) layerNormFP8(res *tensor.Tensor, q, qt cuda.DevicePtr, amax, mean, rstd, a, b, weight, bias, scale *tensor.Tensor, N, C int) error {
	op, kernel, rows := "LayerNormFP8", lnFP8Kernel, "inp"
	if res != nil {
		op, kernel, rows = "ResidualLayerNormFP8", resLNFP8Kernel, "a"
	}
	if err := d.fp8Arch(op); err != nil {
		return err
	}
	want := func(t *tensor.Tensor, name string, dt tensor.DType, n int) error { return fp8Want(op, t, name, dt, n) }
	switch {
	case N < 0 || C < 0:
		return fmt.Errorf("%w: %s: N %d, C %d", ErrFP8Args, op, N, C)
	case C > lnf8MaxC:
		return fmt.Errorf("%w: %s: C %d is wider than %d (a block keeps its %d rows of C FP8 bytes in shared memory)", ErrFP8Args, op, C, lnf8MaxC, lnf8Rows)
	case weight == nil || !weight.DType.Float():
		return fmt.Errorf("%w: %s: weight %s, want f32, bf16 or f16", ErrFP8Args, op, desc(weight))
	}
	T := weight.DType
	ins := []*tensor.Tensor{mean, rstd, a, weight, bias}
	checks := []error{want(weight, "weight", T, C), want(bias, "bias", T, C), want(mean, "mean", tensor.F32, N),
		want(rstd, "rstd", tensor.F32, N), want(a, rows, tensor.F32, N*C)}
	if res != nil {
		ins = append(ins, res, b)
		checks = append(checks, want(res, "res", tensor.F32, N*C), want(b, "b", T, N*C))
	}
	if err := errors.Join(checks...); err != nil {
		return err
	}
	if err := d.fp8Outputs(op, q, qt, amax, scale, N*C, ins...); err != nil {
		return err
	}
	if N == 0 || C == 0 {
		return nil
	}
	// vec: layernorm.cu's (rows of 4 aligned elements); vecQ: q's 16-byte
	// stores (a block's rows start at a multiple of 64·C bytes); vecCol:
	// qt's, as CastTransposeFP8's.
	vec, vecQ, vecCol := 0, 0, 0
	if C%4 == 0 {
		vec = vec4(d.ptr(a), 4, d.ptr(res), 4, d.ptr(b), T.Size(), d.ptr(weight), T.Size(), d.ptr(bias), T.Size())
	}
	if uint64(q)%16 == 0 {
		vecQ = 1
	}
	if N%16 == 0 && uint64(qt)%16 == 0 {
		vecCol = 1
	}
	args := []any{q, qt, d.ptr(amax), d.ptr(mean), d.ptr(rstd), d.ptr(a)}
	if res != nil {
		args = []any{d.ptr(res), q, qt, d.ptr(amax), d.ptr(mean), d.ptr(rstd), d.ptr(a), d.ptr(b)}
	}
	nr, threads := lnf8Shape()
	args = append(args, d.ptr(weight), d.ptr(bias), d.ptr(scale), N, C, nr, vec, vecQ, vecCol)
	if !d.run(kernel, T, grid1(blocks(N, nr)), cuda.D1(threads), nr*C, args...) {
		return fmt.Errorf("gpu: %s: %s/%s did not launch (see Sync)", op, kernel, T)
	}
	return nil
}

// lnf8RowsSet and lnf8ThreadsSet, when positive, set the FP8 layernorms'
// rows a block (a multiple of 16, at most lnf8Rows) and threads a block
// (a multiple of 32, at most lnf8Block); BenchmarkGPUFP8Producers sweeps
// them. 0 takes lnf8DefaultRows and lnf8Block.
var lnf8RowsSet, lnf8ThreadsSet = 0, 0

// lnf8DefaultRows is the FP8 layernorms' rows a block: half the most, so
// that the grid is two waves of blocks that each write half the bytes of
// qt after their barrier (at GPT-2's B·T 16384 × 768, faster than 64 or
// 16 rows in BenchmarkGPUFP8Producers).
const lnf8DefaultRows = 32

// lnf8Shape returns the FP8 layernorms' rows and threads a block.
func lnf8Shape() (rows, threads int) {
	rows, threads = lnf8DefaultRows, lnf8Block
	if lnf8RowsSet > 0 {
		rows = lnf8RowsSet
	}
	if lnf8ThreadsSet > 0 {
		threads = lnf8ThreadsSet
	}
	return rows, threads
}

// LayerNormBackwardCastFP8 queues LayerNormBackward of fp32 rows (dinp
// += the rows' gradient, dweight and dbias += their shares) and the cast
// of the updated dinp v as CastTransposeDBiasFP8 casts an output
// gradient: q (N,C) = e5m2(v·s), qt (C,N) = qᵀ, amax = max(amax, max |v|)
// with the underflows, and dbiasNext (C) += v's column sums (unscaled,
// fp32), s = scale[0] read on the device. kernels/fp8.cu's
// layernorm_backward_cast_e5m2 does it in one pass over the rows (v cast
// from the registers it is computed in, never read again), each block's
// dweight and dbias shares and column sums into partials that
// layernorm.cu's layernorm_reduce and matmul.cu's matmul_bias_grad then
// add in block order: deterministic. For aligned rows of C <= 1024 dinp
// is the fast layernorm backward's arithmetic (layernorm_backward_rf32's
// row sums in its order); past that its row sums run over the block, in
// another order. dweight, dbias and dbiasNext are summed in other fixed
// orders than LayerNormBackward's and CastTransposeDBiasFP8's, so they
// agree to fp32 rounding. pkg/device/cpu's LayerNormBackwardCastFP8 (the two ops one
// after the other) is the reference.
//
//	dinp (N,C) f32, dweight (C) f32, dbias (C) f32, q (N,C) F8E5M2, qt (C,N) F8E5M2,
//	amax (2) f32, dbiasNext (C) f32, dout (N,C) T, inp (N,C) f32, weight (C) T,
//	mean (N) f32, rstd (N) f32, scale (1) f32
//
// T is f32, bf16 or f16. C may be at most 2048 (past 1024, a thread keeps
// 16 columns of a row in registers). It needs sm_90 (an
// error wrapping ErrArch below), and returns ErrFP8Args for arguments that
// do not fit; both are also recorded for Sync, as a launch failure is.
func (d *Device) LayerNormBackwardCastFP8(dinp, dweight, dbias, q, qt, amax, dbiasNext, dout, inp, weight, mean, rstd, scale *tensor.Tensor, N, C int) {
	_, err := d.fp8Pair("LayerNormBackwardCastFP8", q, qt, tensor.E5M2, N*C)
	if err == nil {
		err = d.layerNormBackwardCastFP8(dinp, dweight, dbias, d.ptr(q), d.ptr(qt), amax, dbiasNext, dout, inp, weight, mean, rstd, scale, N, C)
	}
	d.record(err)
}

// layerNormBackwardCastFP8 checks and launches layernorm_backward_cast_e5m2,
// then layernorm_reduce over its [dweight | dbias] partials and
// matmul_bias_grad over its column sums.
func (d *Device) layerNormBackwardCastFP8(dinp, dweight, dbias *tensor.Tensor, q, qt cuda.DevicePtr, amax, dbiasNext, dout, inp, weight, mean, rstd, scale *tensor.Tensor, N, C int) error {
	const op = "LayerNormBackwardCastFP8"
	if err := d.fp8Arch(op); err != nil {
		return err
	}
	want := func(t *tensor.Tensor, name string, dt tensor.DType, n int) error { return fp8Want(op, t, name, dt, n) }
	switch {
	case N < 0 || C < 0:
		return fmt.Errorf("%w: %s: N %d, C %d", ErrFP8Args, op, N, C)
	case C > lnb8MaxC:
		return fmt.Errorf("%w: %s: C %d is wider than %d (a thread keeps its columns of a row in registers, a block its %d rows of C FP8 bytes in shared memory)", ErrFP8Args, op, C, lnb8MaxC, lnb8Rows)
	case dout == nil || !dout.DType.Float():
		return fmt.Errorf("%w: %s: dout %s, want f32, bf16 or f16", ErrFP8Args, op, desc(dout))
	}
	T := dout.DType
	if err := errors.Join(want(dinp, "dinp", tensor.F32, N*C), want(dweight, "dweight", tensor.F32, C),
		want(dbias, "dbias", tensor.F32, C), want(dbiasNext, "dbiasNext", tensor.F32, C),
		want(dout, "dout", T, N*C), want(inp, "inp", tensor.F32, N*C), want(weight, "weight", T, C),
		want(mean, "mean", tensor.F32, N), want(rstd, "rstd", tensor.F32, N)); err != nil {
		return err
	}
	if err := d.fp8Outputs(op, q, qt, amax, scale, N*C, dinp, dweight, dbias, dbiasNext, dout, inp, weight, mean, rstd); err != nil {
		return err
	}
	if N == 0 || C == 0 {
		return nil
	}
	// vec: layernorm.cu's fast path (rows of 4 aligned elements, C up to
	// 1024); vecQ, vecCol: as LayerNormFP8's.
	vec, vecQ, vecCol := 0, 0, 0
	if C%4 == 0 && C <= lnFastMaxC {
		vec = vec4(d.ptr(dinp), 4, d.ptr(inp), 4, d.ptr(dout), T.Size(), d.ptr(weight), T.Size())
	}
	if uint64(q)%16 == 0 {
		vecQ = 1
	}
	if N%16 == 0 && uint64(qt)%16 == 0 {
		vecCol = 1
	}
	rows := lnb8RowsFor(C)
	nb := blocks(N, rows)
	part := d.buf("fp8.lnbwd.part", nb*3*C*4) // [dweight | dbias] (nb, 2C), then the column sums (nb, C)
	if part == 0 {
		return fmt.Errorf("gpu: %s: no scratch for the partial sums", op)
	}
	dpart := part + cuda.DevicePtr(nb*2*C*4)
	if !d.run(lnBwdFP8Kernel, T, grid1(nb), cuda.D1(lnb8Block), lnb8Smem(C, vec == 1, rows),
		d.ptr(dinp), part, dpart, q, qt, d.ptr(amax), d.ptr(dout), d.ptr(inp), d.ptr(weight), d.ptr(mean), d.ptr(rstd),
		d.ptr(scale), N, C, rows, vec, vecQ, vecCol) {
		return fmt.Errorf("gpu: %s: %s/%s did not launch (see Sync)", op, lnBwdFP8Kernel, T)
	}
	if !d.kReduce(T, d.ptr(dweight), d.ptr(dbias), part, nb, C) {
		return fmt.Errorf("gpu: %s: layernorm_reduce did not launch (see Sync)", op)
	}
	if !d.run(kernBiasGrad, tensor.F32, grid1(blocks(C, 32)), cuda.D1(biasGradBlock), 0, d.ptr(dbiasNext), dpart, nb, C) {
		return fmt.Errorf("gpu: %s: %s did not launch (see Sync)", op, kernBiasGrad)
	}
	return nil
}

// fp8Want is the FP8 launchers' check of an operand: t has n elements of
// dt, else an ErrFP8Args error that names op and the operand.
func fp8Want(op string, t *tensor.Tensor, name string, dt tensor.DType, n int) error {
	if t == nil || t.DType != dt || t.Numel() != n {
		return fmt.Errorf("%w: %s: %s %s, want %d elements of %s: %w", ErrFP8Args, op, name, desc(t), n, dt, tensor.ErrShape)
	}
	return nil
}

// fp8DataType maps an FP8 format to its cuBLASLt element type.
func fp8DataType(f tensor.FP8Format) (cuda.DataType, bool) {
	switch f {
	case tensor.E4M3:
		return cuda.R8FE4M3, true
	case tensor.E5M2:
		return cuda.R8FE5M2, true
	}
	return 0, false
}

// MatmulFP8 queues the FP8 GEMM
//
//	out[n][o] = (Σ_c fa(a[n][c])·fb(b[o][c])) · invA[0] · invB[0] + bias[o]
//
// on cuBLASLt (fp32 compute, see the file's comment), rounded once at the
// end to out's type, bf16 or f32.
//
//	out (N,OC) bf16 or f32, a (N,C) and b (OC,C) F8E4M3 or F8E5M2 (fa, fb: their formats),
//	bias (OC) out's dtype or nil (cuBLASLt's bias epilogue), invA (1) f32, invB (1) f32
//
// invA and invB are the dequantisation factors read on the device: 1/s for
// an operand cast with scale s (the inverse of CastTransposeFP8's scale),
// each at a 16-byte aligned address (cuBLASLt refuses others).
// a is the activation (E4M3) or, in the backward, the gradient (E5M2), b
// the weight as druto stores it or a transposed copy (CastTransposeFP8's
// qt), both K-major. pkg/device/cpu's MatmulFP8 is the reference, in fp32.
//
// cuBLASLt's FP8 rules (see cuda.LtParams) and its heuristic's assumption
// of 256-byte aligned operands (Pool allocations are) make these arguments
// errors wrapping ErrFP8Args: C not a multiple of 16, OC not a multiple of
// 8 (bf16) or 4 (f32) (16-byte rows of out), a null or misaligned a, b or
// out. A format pair
// cuBLASLt has no kernel for is an error from its heuristic. C = 0 zeroes
// out (an empty sum). It needs sm_90 (ErrArch below); every error is also
// recorded for Sync.
func (d *Device) MatmulFP8(out, a, b, bias, invA, invB *tensor.Tensor, N, C, OC int) {
	d.matmulFP8T("MatmulFP8", false, out, a, b, bias, invA, invB, N, C, OC)
}

// MatmulFP8Add is MatmulFP8 into an f32 out that it adds to:
// out[n][o] += (Σ_c fa(a[n][c])·fb(b[o][c]))·invA[0]·invB[0] (cuBLASLt's
// beta = 1, one fp32 rounding of the sum): the weight gradient of an FP8
// linear layer, dW (OC,C) += dyᵀ·x with a = dyᵀ (OC,N) in E5M2 and b = xᵀ
// (C,N) in E4M3, both K-major (K = tokens), accumulating over micro-steps
// as the bf16 backward's weight gradients do. Errors as MatmulFP8's; out
// must be f32, and C = 0 leaves it as it is.
//
//	out (N,OC) f32, a (N,C) and b (OC,C) F8E4M3 or F8E5M2, invA (1) f32, invB (1) f32
func (d *Device) MatmulFP8Add(out, a, b, invA, invB *tensor.Tensor, N, C, OC int) {
	d.matmulFP8T("MatmulFP8Add", true, out, a, b, nil, invA, invB, N, C, OC)
}

// matmulFP8T checks a and b (FP8 device tensors of N·C and OC·C
// elements) and runs matmulFP8 on their addresses and formats.
func (d *Device) matmulFP8T(name string, add bool, out, a, b, bias, invA, invB *tensor.Tensor, N, C, OC int) {
	for _, x := range []struct {
		name string
		t    *tensor.Tensor
		n    int
	}{{"a", a, N * C}, {"b", b, OC * C}} {
		if x.t == nil {
			d.record(fmt.Errorf("%w: %s: %s is nil", ErrFP8Args, name, x.name))
			return
		}
		if _, ok := x.t.DType.FP8(); !ok || x.t.Numel() != x.n || (x.n > 0 && x.t.Dev == 0) {
			d.record(fmt.Errorf("%w: %s: %s %s, want %d elements of an FP8 dtype on the device: %w", ErrFP8Args, name, x.name, desc(x.t), x.n, tensor.ErrShape))
			return
		}
	}
	fa, _ := a.DType.FP8()
	fb, _ := b.DType.FP8()
	d.record(d.matmulFP8(name, add, out, d.ptr(a), d.ptr(b), fa, fb, bias, invA, invB, N, C, OC))
}

func (d *Device) matmulFP8(name string, add bool, out *tensor.Tensor, a, b cuda.DevicePtr, fa, fb tensor.FP8Format, bias, invA, invB *tensor.Tensor, N, C, OC int) error {
	if err := d.fp8Arch(name); err != nil {
		return err
	}
	ta, okA := fp8DataType(fa)
	tb, okB := fp8DataType(fb)
	switch {
	case !okA || !okB:
		return fmt.Errorf("%w: formats %d, %d (want tensor.E4M3 or tensor.E5M2)", ErrFP8Args, fa, fb)
	case N < 0 || C < 0 || OC < 0:
		return fmt.Errorf("%w: N %d, C %d, OC %d", ErrFP8Args, N, C, OC)
	case C%16 != 0:
		return fmt.Errorf("%w: C %d is not a multiple of 16 (cuBLASLt's FP8 GEMMs need 16-byte rows of a and b)", ErrFP8Args, C)
	case out == nil || !(out.DType == tensor.F32 || out.DType == tensor.BF16 && !add) || out.Numel() != N*OC:
		want := "bf16 or f32"
		if add {
			want = "f32"
		}
		return fmt.Errorf("%w: out %s, want %s (%d,%d): %w", ErrFP8Args, desc(out), want, N, OC, tensor.ErrShape)
	case OC*out.DType.Size()%16 != 0:
		return fmt.Errorf("%w: OC %d is not a multiple of %d (cuBLASLt's FP8 GEMMs need 16-byte rows of the %s out)", ErrFP8Args, OC, 16/out.DType.Size(), out.DType)
	case invA == nil || invA.DType != tensor.F32 || invA.Numel() != 1:
		return fmt.Errorf("%w: invA %s, want f32 (1): %w", ErrFP8Args, desc(invA), tensor.ErrShape)
	case invB == nil || invB.DType != tensor.F32 || invB.Numel() != 1:
		return fmt.Errorf("%w: invB %s, want f32 (1): %w", ErrFP8Args, desc(invB), tensor.ErrShape)
	case bias != nil && (add || bias.DType != out.DType || bias.Numel() != OC):
		return fmt.Errorf("%w: bias %s, want %s (%d) (and no bias with Add): %w", ErrFP8Args, desc(bias), out.DType, OC, tensor.ErrShape)
	}
	ts := []*tensor.Tensor{out, invA, invB}
	if bias != nil {
		ts = append(ts, bias)
	}
	for _, t := range ts {
		if t.Dev == 0 && t.Numel() > 0 {
			return fmt.Errorf("%w: %s is a host tensor", ErrFP8Args, desc(t))
		}
	}
	if invA.Dev%16 != 0 || invB.Dev%16 != 0 {
		// cuBLASLt answers CUBLAS_STATUS_NOT_SUPPORTED at run time
		// (TestGPUMatmulFP8ScaleOffsets).
		return fmt.Errorf("%w: invA at %#x, invB at %#x: cuBLASLt's FP8 GEMMs read their scales from 16-byte aligned addresses", ErrFP8Args, invA.Dev, invB.Dev)
	}
	if N == 0 || OC == 0 {
		return nil
	}
	if C == 0 {
		if add {
			return nil
		}
		if err := d.memset(d.ptr(out), N*OC*out.DType.Size()); err != nil {
			return fmt.Errorf("gpu: %s: zero out: %w", name, err)
		}
		return nil
	}
	switch {
	case a == 0 || b == 0:
		return fmt.Errorf("%w: a null a or b", ErrFP8Args)
	case !ltAligned(a, b, d.ptr(out)):
		return fmt.Errorf("%w: a %#x, b %#x, out %#x: cuBLASLt's heuristic assumes 256-byte aligned operands", ErrFP8Args, a, b, d.ptr(out))
	}
	if launchHook != nil {
		return nil // no cuBLASLt in launch tests: the arguments are all they check
	}
	p := cuda.LtParams{
		TransA: true, M: OC, N: N, K: C,
		AType: tb, BType: ta, CType: cuda.R16BF, LDA: C, LDB: C, LDC: OC,
		Compute: cuda.Compute32F, Epilogue: cuda.EpilogueDefault, MaxWorkspace: WorkspaceBytes,
	}
	if out.DType == tensor.F32 {
		p.CType = cuda.R32F
	}
	if bias != nil {
		// The bias epilogue where cuBLASLt runs it, else the plain product
		// and gelu.cu's bias_add after it (a pass over out), remembered by
		// shape so that the refused configuration is not tried again.
		pb := p
		pb.Epilogue, pb.BiasBF16 = cuda.EpilogueBias, out.DType == tensor.BF16
		if !d.fp8NoBias[ltKey{pb}] {
			m := d.ltMatmul(pb)
			if m != nil {
				d.launches.Add(1)
				args := cuda.LtArgs{Alpha: 1, A: b, B: a, D: d.ptr(out), AScale: d.ptr(invB), BScale: d.ptr(invA),
					Bias: d.ptr(bias), Workspace: d.ws, WorkspaceBytes: WorkspaceBytes}
				err := m.Run(d.stream, args)
				if err == nil {
					return nil
				}
				if d.capturing {
					return fmt.Errorf("gpu: %s with bias (cuBLASLt): %w", name, err)
				}
			}
			if d.fp8NoBias == nil {
				d.fp8NoBias = map[ltKey]bool{}
			}
			d.fp8NoBias[ltKey{pb}] = true
		}
		if err := d.matmulFP8(name, add, out, a, b, fa, fb, nil, invA, invB, N, C, OC); err != nil {
			return err
		}
		if !d.biasAdd(out, bias, N, OC) {
			return fmt.Errorf("gpu: %s: bias_add did not launch (see Sync)", name)
		}
		return nil
	}
	m := d.ltMatmul(p)
	if m == nil {
		if e, ok := d.lts[ltKey{p}]; ok && e.err != nil {
			return fmt.Errorf("gpu: %s %s·%s (%d,%d,%d) to %s: %w", name, fa, fb, N, C, OC, out.DType, e.err)
		}
		return fmt.Errorf("gpu: %s %s·%s (%d,%d,%d) to %s: no cuBLASLt matmul (see Sync)", name, fa, fb, N, C, OC, out.DType)
	}
	d.launches.Add(1)
	// cuBLASLt's A is b and its B is a: their scales go the same way.
	args := cuda.LtArgs{Alpha: 1, A: b, B: a, D: d.ptr(out), AScale: d.ptr(invB), BScale: d.ptr(invA),
		Workspace: d.ws, WorkspaceBytes: WorkspaceBytes}
	if add {
		args.Beta, args.C = 1, d.ptr(out)
	}
	if err := m.Run(d.stream, args); err != nil {
		return fmt.Errorf("gpu: %s (cuBLASLt): %w", name, err)
	}
	return nil
}

var errFP8NilRes = fmt.Errorf("%w: ResidualLayerNormFP8: res is nil", ErrFP8Args)
