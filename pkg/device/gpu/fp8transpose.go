package gpu

// fp8transpose.go: TransposeFP8 (kernels/fp8transpose.cu), the byte
// transpose of an FP8 tensor (issue 38).

import (
	"fmt"

	"github.com/druto/druto/kernels"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/tensor"
)

const kernTransposeFP8 = "transpose_fp8"

var (
	trBlock = kernels.MustBlock("fp8transpose.cu", "TR_BLOCK") // transpose_fp8
	trRows  = kernels.MustDefine("fp8transpose.cu", "TR_ROWS") // a block's tile: rows of in
	trCols  = kernels.MustDefine("fp8transpose.cu", "TR_COLS") // and its columns, in bytes
)

// TransposeFP8 queues one kernel that writes out (C,N) = inᵀ for in (N,C),
// of one FP8 dtype, bit for bit (kernels/fp8transpose.cu's transpose_fp8:
// 64×64-byte tiles through shared memory, 16-byte loads where C is a
// multiple of 16 and in is 16-byte aligned, 16-byte stores where N is and
// out is, bytes otherwise); it implements device.FP8. pkg/device/cpu's
// TransposeFP8 is the reference. The kernel is a copy and would run
// anywhere, but it is an FP8 operation: sm_90 or newer, as the rest
// (ErrArch otherwise); ErrFP8Args for arguments that do not fit; both are
// recorded for Sync.
//
//	out (C,N), in (N,C) F8E4M3 or F8E5M2
func (d *Device) TransposeFP8(out, in *tensor.Tensor, N, C int) {
	d.record(d.transposeFP8(out, in, N, C))
}

func (d *Device) transposeFP8(out, in *tensor.Tensor, N, C int) error {
	const op = "TransposeFP8"
	if err := d.fp8Arch(op); err != nil {
		return err
	}
	if N < 0 || C < 0 {
		return fmt.Errorf("%w: %s: N %d, C %d", ErrFP8Args, op, N, C)
	}
	if _, err := d.fp8Pair(op, in, out, 0, N*C); err != nil {
		return err
	}
	if N == 0 || C == 0 {
		return nil
	}
	if blocks(C, trCols) > maxGridYZ {
		return fmt.Errorf("%w: %s: C %d, at most %d (65535 tiles of %d columns in the grid's y dimension)", ErrFP8Args, op, C, maxGridYZ*trCols, trCols)
	}
	op8, ip := d.ptr(out), d.ptr(in)
	vecIn, vecOut := 0, 0
	if C%16 == 0 && uint64(ip)%16 == 0 {
		vecIn = 1
	}
	if N%16 == 0 && uint64(op8)%16 == 0 {
		vecOut = 1
	}
	grid := cuda.Dim3{X: uint32(blocks(N, trRows)), Y: uint32(blocks(C, trCols)), Z: 1}
	if !d.run(kernTransposeFP8, tensor.F32, grid, cuda.D1(trBlock), 0, op8, ip, N, C, vecIn, vecOut) {
		return fmt.Errorf("gpu: %s: %s did not launch (see Sync)", op, kernTransposeFP8)
	}
	return nil
}
