package gpu

// fp8.go: the FP8 operations of issue 38 (FP8 training on Hopper):
//
//   - CastTransposeFP8, the launcher of kernels/fp8.cu: x to FP8 with a
//     device-side scale, row-major and transposed, and amax.
//   - MatmulFP8, the FP8 GEMM on cuBLASLt: out (N,OC) bf16 =
//     a (N,C)·b (OC,C)ᵀ · invA·invB, with per-tensor dequantisation
//     factors read on the device, the contract of pkg/device/cpu's
//     MatmulFP8 (its reference).
//
// They are methods of *Device only, not ops of device.Device: the FP8 step
// that will call them is not written yet, and pkg/tensor has no byte dtype,
// so FP8 operands are device pointers (N·C bytes, row-major). Both need
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
// working type (cuBLASLt would also write fp32 with an fp32 C). The compute
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
)

// fp8MinArch is the compute capability ×10 that the FP8 conversion
// instructions need in the embedded PTX (fp8.cu's druto:arch line).
const fp8MinArch = 90

// ErrFP8Args is wrapped by the errors of CastTransposeFP8 and MatmulFP8
// about their arguments.
var ErrFP8Args = errors.New("gpu: bad arguments to an FP8 operation")

// CastTransposeFP8 queues one kernel that writes q (N,C) = fp8(x·s) in
// format f, qt (C,N) = qᵀ (the K-major copy of the backward's "TN" FP8
// GEMMs) and amax = max |x| (before scaling; NaN when any x is NaN), with
// s = scale[0] read on the device (the FP8 scaler's scale, no host round
// trip). It zeroes amax first (one 4-byte memset).
//
//	q (N,C) bytes, qt (C,N) bytes, amax (1) f32, x (N,C) f32/bf16/f16, scale (1) f32
//
// The conversion rounds x·s (in fp32) to nearest even and saturates to
// ±max, as tensor.QuantizeFP8; pkg/device/cpu's CastTransposeFP8 is the
// reference (NaN codes may differ, see cpu.SameFP8). It needs sm_90 or
// newer and returns an error wrapping ErrArch on older GPUs, ErrFP8Args
// for arguments that do not fit; both are also recorded for Sync, as a
// launch failure is.
func (d *Device) CastTransposeFP8(q, qt cuda.DevicePtr, amax, x, scale *tensor.Tensor, f tensor.FP8Format, N, C int) error {
	if err := d.castTransposeFP8(q, qt, amax, x, scale, f, N, C); err != nil {
		d.fail(err)
		return err
	}
	return nil
}

func (d *Device) castTransposeFP8(q, qt cuda.DevicePtr, amax, x, scale *tensor.Tensor, f tensor.FP8Format, N, C int) error {
	if d.ctx != nil {
		if major, minor := d.Capability(); major*10+minor < fp8MinArch {
			return fmt.Errorf("gpu: CastTransposeFP8 needs sm_%d or newer (FP8 cvt in PTX ISA 7.8), this device is sm_%d%d: %w", fp8MinArch, major, minor, ErrArch)
		}
	}
	switch {
	case f != tensor.E4M3 && f != tensor.E5M2:
		return fmt.Errorf("%w: format %d (want tensor.E4M3 or tensor.E5M2)", ErrFP8Args, f)
	case N < 0 || C < 0:
		return fmt.Errorf("%w: N %d, C %d", ErrFP8Args, N, C)
	case x == nil || !x.DType.Float() || x.Numel() != N*C:
		return fmt.Errorf("%w: x %s, want %d elements of f32, bf16 or f16: %w", ErrFP8Args, desc(x), N*C, tensor.ErrShape)
	case amax == nil || amax.DType != tensor.F32 || amax.Numel() != 1:
		return fmt.Errorf("%w: amax %s, want f32 (1): %w", ErrFP8Args, desc(amax), tensor.ErrShape)
	case scale == nil || scale.DType != tensor.F32 || scale.Numel() != 1:
		return fmt.Errorf("%w: scale %s, want f32 (1): %w", ErrFP8Args, desc(scale), tensor.ErrShape)
	case N*C > 0 && (q == 0 || qt == 0):
		return fmt.Errorf("%w: a null q or qt", ErrFP8Args)
	}
	for _, t := range []*tensor.Tensor{amax, x, scale} {
		if t.Dev == 0 && t.Numel() > 0 {
			return fmt.Errorf("%w: %s is a host tensor", ErrFP8Args, desc(t))
		}
	}
	if err := d.memset(d.ptr(amax), 4); err != nil {
		return fmt.Errorf("gpu: CastTransposeFP8: zero amax: %w", err)
	}
	if N == 0 || C == 0 {
		return nil
	}
	kernel := "cast_transpose_" + f.String()
	// 16-byte rows: x and q when every row starts aligned, qt likewise.
	xp := d.ptr(x)
	vecRow, vecCol := 0, 0
	if C%16 == 0 && uint64(xp)%16 == 0 && uint64(q)%16 == 0 {
		vecRow = 1
	}
	if N%16 == 0 && uint64(qt)%16 == 0 {
		vecCol = 1
	}
	grid := cuda.Dim3{X: uint32(blocks(C, ctTile)), Y: uint32(min(blocks(N, ctTile), maxGridYZ+1)), Z: 1}
	if !d.run(kernel, x.DType, grid, cuda.D1(ctBlock), 0, q, qt, d.ptr(amax), xp, d.ptr(scale), N, C, vecRow, vecCol) {
		return fmt.Errorf("gpu: CastTransposeFP8: %s/%s did not launch (see Sync)", kernel, x.DType)
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
//	out[n][o] = (Σ_c fa(a[n][c])·fb(b[o][c])) · invA[0] · invB[0]
//
// on cuBLASLt (fp32 compute, see the file's comment), rounded to bf16 once
// at the end.
//
//	out (N,OC) bf16, a (N,C) bytes in format fa, b (OC,C) bytes in format fb,
//	invA (1) f32, invB (1) f32
//
// invA and invB are the dequantisation factors read on the device: 1/s for
// an operand cast with scale s (the inverse of CastTransposeFP8's scale).
// a is the activation (E4M3) or, in the backward, the gradient (E5M2), b
// the weight as druto stores it or a transposed copy (CastTransposeFP8's
// qt), both K-major. pkg/device/cpu's MatmulFP8 is the reference, in fp32.
//
// cuBLASLt's FP8 rules (see cuda.LtParams) and its heuristic's assumption
// of 256-byte aligned operands (Pool allocations are) make these arguments
// errors wrapping ErrFP8Args: C not a multiple of 16, OC not a multiple of
// 8 (16-byte rows of out), a null or misaligned a, b or out. A format pair
// cuBLASLt has no kernel for is an error from its heuristic. C = 0 zeroes
// out (an empty sum). It needs sm_90 (ErrArch below); every error is also
// recorded for Sync.
func (d *Device) MatmulFP8(out *tensor.Tensor, a, b cuda.DevicePtr, fa, fb tensor.FP8Format, invA, invB *tensor.Tensor, N, C, OC int) error {
	if err := d.matmulFP8(out, a, b, fa, fb, invA, invB, N, C, OC); err != nil {
		d.fail(err)
		return err
	}
	return nil
}

func (d *Device) matmulFP8(out *tensor.Tensor, a, b cuda.DevicePtr, fa, fb tensor.FP8Format, invA, invB *tensor.Tensor, N, C, OC int) error {
	if d.ctx != nil {
		if major, minor := d.Capability(); major*10+minor < fp8MinArch {
			return fmt.Errorf("gpu: MatmulFP8 needs sm_%d or newer (druto's FP8 operations share one rule), this device is sm_%d%d: %w", fp8MinArch, major, minor, ErrArch)
		}
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
	case OC%8 != 0:
		return fmt.Errorf("%w: OC %d is not a multiple of 8 (cuBLASLt's FP8 GEMMs need 16-byte rows of the bf16 out)", ErrFP8Args, OC)
	case out == nil || out.DType != tensor.BF16 || out.Numel() != N*OC:
		return fmt.Errorf("%w: out %s, want bf16 (%d,%d): %w", ErrFP8Args, desc(out), N, OC, tensor.ErrShape)
	case invA == nil || invA.DType != tensor.F32 || invA.Numel() != 1:
		return fmt.Errorf("%w: invA %s, want f32 (1): %w", ErrFP8Args, desc(invA), tensor.ErrShape)
	case invB == nil || invB.DType != tensor.F32 || invB.Numel() != 1:
		return fmt.Errorf("%w: invB %s, want f32 (1): %w", ErrFP8Args, desc(invB), tensor.ErrShape)
	}
	for _, t := range []*tensor.Tensor{out, invA, invB} {
		if t.Dev == 0 && t.Numel() > 0 {
			return fmt.Errorf("%w: %s is a host tensor", ErrFP8Args, desc(t))
		}
	}
	if N == 0 || OC == 0 {
		return nil
	}
	if C == 0 {
		if err := d.memset(d.ptr(out), N*OC*2); err != nil {
			return fmt.Errorf("gpu: MatmulFP8: zero out: %w", err)
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
	m := d.ltMatmul(p)
	if m == nil {
		if e, ok := d.lts[ltKey{p}]; ok && e.err != nil {
			return fmt.Errorf("gpu: MatmulFP8 %s·%s (%d,%d,%d): %w", fa, fb, N, C, OC, e.err)
		}
		return fmt.Errorf("gpu: MatmulFP8 %s·%s (%d,%d,%d): no cuBLASLt matmul (see Sync)", fa, fb, N, C, OC)
	}
	d.launches.Add(1)
	// cuBLASLt's A is b and its B is a: their scales go the same way.
	if err := m.Run(d.stream, cuda.LtArgs{Alpha: 1, A: b, B: a, D: d.ptr(out), AScale: d.ptr(invB), BScale: d.ptr(invA),
		Workspace: d.ws, WorkspaceBytes: WorkspaceBytes}); err != nil {
		return fmt.Errorf("gpu: MatmulFP8 (cuBLASLt): %w", err)
	}
	return nil
}
