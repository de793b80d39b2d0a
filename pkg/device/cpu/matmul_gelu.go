package cpu

// matmul_gelu.go: MatmulBackwardGELU, the backward of the MLP's projection
// with the GELU's backward folded in (cuBLASLt's DGELU_BGRAD epilogue on the
// GPU).
//
// Fused form: dweight and dbias as MatmulBackward; then one fp32 GEMM
// y = dout·weight, one pass y ← gelu'(pre)·y, the bias gradient summed from
// y (fp32, before any rounding), and y rounded once into dpre. Decomposed
// form: the sequence the model ran before the op existed,
// device.MatmulBackwardGELUDecomposed (shared with the GPU): dpre zeroed,
// MatmulBackward accumulating into it (one rounding), GELUBackward over it
// (a second), and the column sums of the rounded dpre (BiasGrad).

import (
	"fmt"

	"github.com/druto/druto/pkg/blas"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// MatmulBackwardGELU accumulates dweight += doutᵀ·inp and dbias += Σ_rows
// dout, overwrites dpre = gelu'(pre)·(dout·weight) and accumulates
// dpreBias += Σ_rows dpre (dbias and dpreBias may be nil).
// dpre (N,C), dpreBias (C), dweight (OC,C), dbias (OC), dout (N,OC), inp (N,C), pre (N,C), weight (OC,C)
func (d *Device) MatmulBackwardGELU(dpre, dpreBias, dweight, dbias, dout, inp, pre, weight *tensor.Tensor, N, C, OC int) {
	const op = "MatmulBackwardGELU"
	if !d.check(&device.Ops.MatmulBackwardGELU, []int{N, C, OC}, dpre, dpreBias, dweight, dbias, dout, inp, pre, weight) {
		return
	}
	if !d.fused {
		device.MatmulBackwardGELUDecomposed(d, dpre, dpreBias, dweight, dbias, dout, inp, pre, weight, N, C, OC)
		return
	}
	blas.SetThreads(d.threads)
	g, rounded := d.gradMat(dout, weight.DType) // once for dweight, dbias and dpre
	defer releaseGrad(dout, g, rounded)
	if !d.weightGrads(op, dweight, dbias, g, inp, N, C, OC) {
		return
	}
	w := d.gemmMat(weight)
	defer releaseMat(weight, w)
	y := outF32(dpre) // (N,C) fp32: dpre's memory when F32, else scratch
	defer releaseF32(dpre, y)
	// y (N,C) = dout (N,OC) · weight (OC,C)
	if err := blas.SgemmBF16(false, false, N, C, OC, 1, g, OC, w, C, 0, y, C); err != nil {
		d.fail(fmt.Errorf("cpu: %s: %w", op, err))
		return
	}
	if pre.DType == tensor.BF16 && dpre.DType == tensor.BF16 {
		// One pass: widen pre, y = gelu'(pre)·y, round y into dpre.
		d.parallel(N*C, 1<<13, func(lo, hi int) {
			geluBackwardMix(dpre.U16()[lo:hi], y[lo:hi], pre.U16()[lo:hi])
		})
		if dpreBias != nil {
			d.columnSumInto(dpreBias, y, N, C)
		}
		return
	}
	d.parallel(N*C, 1<<13, func(lo, hi int) {
		xb := scratch32(pre, hi-lo)
		defer putScratch(xb)
		x := in32(pre, lo, hi-lo, xb)
		geluBackwardSlice(y[lo:hi], x, y[lo:hi]) // y = gelu'(pre)·y
	})
	if dpreBias != nil {
		d.columnSumInto(dpreBias, y, N, C)
	}
	if dpre.DType != tensor.F32 {
		d.parallel(N*C, 1<<14, func(lo, hi int) { store(dpre, lo, y[lo:hi]) })
	}
}

// BiasGrad accumulates dbias += Σ_rows dout in fp32 (column sums of dout
// widened to fp32).
// dbias (OC) F32, dout (N,OC)
func (d *Device) BiasGrad(dbias, dout *tensor.Tensor, N, OC int) {
	if !d.check(&device.Ops.BiasGrad, []int{N, OC}, dbias, dout) {
		return
	}
	g := d.gemmF32(dout)
	d.columnSumInto(dbias, g, N, OC)
	releaseF32(dout, g)
}
