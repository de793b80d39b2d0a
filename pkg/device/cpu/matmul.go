package cpu

// matmul.go: the linear layers, Matmul and MatmulBackward, on pkg/blas's
// row-major Sgemm (OpenBLAS when installed, else gonum).
//
// Operands of any float dtype are widened to fp32 first: products of two
// 16-bit numbers are exact in fp32, so an fp32 GEMM of widened operands is
// what a GPU's 16-bit matmul with fp32 accumulation computes.
//
// Matmul, fused form: one GEMM, then one epilogue pass over each block of
// output rows that adds the bias, stores the pre-activation (GELU) and
// applies geluForward while the block is in cache, rounding once into out.
// Decomposed form (the eager-PyTorch sequence): the GEMM rounded into its
// output tensor, a separate bias-add pass, then a separate GELU pass
// (geluForwardDecomposed) over the stored pre-activation.
//
// MatmulBackward: dinp += dout·weight and dweight += doutᵀ·inp as beta=1
// GEMMs straight into fp32 gradients (16-bit ones get an fp32 GEMM that is
// then accumulated), and dbias += the column sums of dout, parallel over
// columns and summed in row order, so the bits do not depend on the number of
// threads.

import (
	"fmt"

	"github.com/druto/druto/pkg/blas"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// gemmName names the GEMM implementation for Device.Name.
func gemmName() string { return blas.Name() }

// Matmul computes out = inp·weightᵀ + bias with fp32 accumulation, then the
// epilogue act (with GELU, pre receives inp·weightᵀ + bias).
// out (N,OC), pre (N,OC) or nil, inp (N,C), weight (OC,C), bias (OC) or nil
func (d *Device) Matmul(out, pre, inp, weight, bias *tensor.Tensor, N, C, OC int, act device.Activation) {
	const op = "Matmul"
	if !d.needSizes(op, N, C, OC) || !d.needFloat(op, out, inp, weight) ||
		!d.checkN(op, N*OC, out) || !d.checkN(op, N*C, inp) || !d.checkN(op, OC*C, weight) {
		return
	}
	if bias != nil && (!d.needFloat(op, bias) || !d.checkN(op, OC, bias)) {
		return
	}
	switch act {
	case device.None:
		if pre != nil {
			d.fail(fmt.Errorf("cpu: %s: pre must be nil without GELU", op))
			return
		}
	case device.GELU:
		if pre == nil {
			d.fail(fmt.Errorf("cpu: %s: GELU needs pre for the pre-activation", op))
			return
		}
		if !d.needFloat(op, pre) || !d.checkN(op, N*OC, pre) {
			return
		}
	default:
		d.fail(fmt.Errorf("cpu: %s: activation %d: %w", op, act, device.ErrUnsupported))
		return
	}
	// The GEMM's result lands in target: out, or pre under GELU.
	target := out
	if act == device.GELU {
		target = pre
	}
	var b []float32
	if bias != nil {
		b = f32(bias)
	}
	blas.SetThreads(d.threads)
	x, w := d.gemmF32(inp), d.gemmF32(weight)
	var y []float32 // (N,OC) fp32: target's memory when F32, else scratch
	if target.DType == tensor.F32 {
		y = target.F32()
	} else {
		y = make([]float32, N*OC)
	}
	if err := blas.Sgemm(false, true, N, OC, C, 1, x, C, w, C, 0, y, OC); err != nil {
		d.fail(fmt.Errorf("cpu: %s: %w", op, err))
		return
	}
	if d.fused {
		d.matmulEpilogue(out, pre, target, y, b, N, OC, act)
	} else {
		d.matmulDecomposed(out, pre, target, y, b, N, OC, act)
	}
}

// matmulEpilogue is the fused form's single pass over the GEMM output y
// (N,OC): y += bias, target ← y rounded (when y is scratch), and under GELU
// out ← gelu(y), one cache-sized block of rows at a time.
func (d *Device) matmulEpilogue(out, pre, target *tensor.Tensor, y, b []float32, N, OC int, act device.Activation) {
	if act == device.None && b == nil && target.DType == tensor.F32 {
		return // the GEMM wrote out in place
	}
	sub := rowGrain(OC)
	d.parallel(N, sub, func(lo, hi int) {
		var ob []float32
		if act == device.GELU && out.DType != tensor.F32 {
			ob = make([]float32, min(sub, hi-lo)*OC)
		}
		for r0 := lo; r0 < hi; r0 += sub {
			r1 := min(r0+sub, hi)
			blk := y[r0*OC : r1*OC]
			if b != nil {
				for r := range r1 - r0 {
					row := blk[r*OC : (r+1)*OC]
					for j, v := range b {
						row[j] += v
					}
				}
			}
			flush32(target, r0*OC, blk)
			if act == device.GELU {
				o := out32(out, r0*OC, len(blk), ob)
				geluForward(o, blk)
				flush32(out, r0*OC, o)
			}
		}
	})
}

// matmulDecomposed runs the eager sequence after the GEMM: round y into
// target, then a bias-add pass over target, then a GELU pass from pre into
// out, each a separate parallel sweep over the whole (N,OC) tensor.
func (d *Device) matmulDecomposed(out, pre, target *tensor.Tensor, y, b []float32, N, OC int, act device.Activation) {
	n := N * OC
	if target.DType != tensor.F32 { // the matmul's output tensor, rounded
		d.parallel(n, 1<<14, func(lo, hi int) { store(target, lo, y[lo:hi]) })
	}
	if b != nil { // target += bias, read back from target, rounded again
		d.parallel(N, rowGrain(OC), func(lo, hi int) {
			buf := make([]float32, OC)
			for r := lo; r < hi; r++ {
				row := in32(target, r*OC, OC, buf)
				for j, v := range b {
					row[j] += v
				}
				flush32(target, r*OC, row)
			}
		})
	}
	if act == device.GELU { // out = gelu(pre), the composite's passes
		d.parallel(n, 1<<14, func(lo, hi int) {
			xb, ob := make([]float32, hi-lo), make([]float32, hi-lo)
			x := in32(pre, lo, hi-lo, xb)
			o := out32(out, lo, hi-lo, ob)
			geluForwardDecomposed(o, x)
			flush32(out, lo, o)
		})
	}
}

// MatmulBackward accumulates dinp += dout·weight (when dinp is not nil),
// dweight += doutᵀ·inp and dbias += Σ_rows dout (when dbias is not nil).
// dinp (N,C), dweight (OC,C), dbias (OC), dout (N,OC), inp (N,C), weight (OC,C)
func (d *Device) MatmulBackward(dinp, dweight, dbias, dout, inp, weight *tensor.Tensor, N, C, OC int) {
	const op = "MatmulBackward"
	if !d.needSizes(op, N, C, OC) || !d.needFloat(op, dweight, dout, inp, weight) ||
		!d.checkN(op, OC*C, dweight, weight) || !d.checkN(op, N*OC, dout) || !d.checkN(op, N*C, inp) {
		return
	}
	if dinp != nil && (!d.needFloat(op, dinp) || !d.checkN(op, N*C, dinp)) {
		return
	}
	if dbias != nil && (!d.needFloat(op, dbias) || !d.checkN(op, OC, dbias)) {
		return
	}
	blas.SetThreads(d.threads)
	g := d.gemmF32(dout) // (N,OC)
	if dinp != nil {
		// dinp (N,C) += dout (N,OC) · weight (OC,C)
		w := d.gemmF32(weight)
		if err := d.gemmAccumulate(dinp, false, false, N, C, OC, g, OC, w, C); err != nil {
			d.fail(fmt.Errorf("cpu: %s: dinp: %w", op, err))
			return
		}
	}
	// dweight (OC,C) += doutᵀ (OC,N) · inp (N,C)
	x := d.gemmF32(inp)
	if err := d.gemmAccumulate(dweight, true, false, OC, C, N, g, OC, x, C); err != nil {
		d.fail(fmt.Errorf("cpu: %s: dweight: %w", op, err))
		return
	}
	if dbias != nil {
		d.columnSumInto(dbias, g, N, OC)
	}
}

// gemmAccumulate computes t (m,n) += op(A)·op(B): one beta=1 GEMM into t's
// memory when t is F32, else a GEMM into fp32 scratch that is then added
// into t with the accumulate helper, in parallel chunks.
func (d *Device) gemmAccumulate(t *tensor.Tensor, transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int) error {
	if t.DType == tensor.F32 {
		return blas.Sgemm(transA, transB, m, n, k, 1, a, lda, b, ldb, 1, t.F32(), n)
	}
	s := make([]float32, m*n)
	if err := blas.Sgemm(transA, transB, m, n, k, 1, a, lda, b, ldb, 0, s, n); err != nil {
		return err
	}
	d.parallel(m*n, 1<<14, func(lo, hi int) { accumulate(t.MustView(lo, hi-lo), s[lo:hi]) })
	return nil
}

// gemmF32 returns t's elements as an fp32 GEMM operand: t's own memory when
// t is F32, else a copy widened in parallel.
func (d *Device) gemmF32(t *tensor.Tensor) []float32 {
	if t.DType == tensor.F32 {
		return t.F32()
	}
	v := make([]float32, t.Numel())
	d.parallel(len(v), 1<<14, func(lo, hi int) { load(v[lo:hi], t, lo) })
	return v
}
