package gpu

// fp8.go: CastTransposeFP8, the launcher of kernels/fp8.cu (issue 38: FP8
// training on Hopper). It is a method of *Device only, not an op of
// device.Device: the FP8 step that will call it is not written yet, and
// pkg/tensor has no byte dtype, so the FP8 outputs are device pointers.

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

// ErrFP8Args is wrapped by CastTransposeFP8's errors about its arguments.
var ErrFP8Args = errors.New("gpu: bad arguments to CastTransposeFP8")

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
