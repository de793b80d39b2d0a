package cpu

// matmul.go: the linear layers, Matmul and MatmulBackward, on pkg/blas's
// row-major Sgemm (OpenBLAS when installed, else gonum).
//
// Operands of any float dtype are multiplied as fp32: products of two
// 16-bit numbers are exact in fp32, so an fp32 GEMM of widened operands is
// what a GPU's 16-bit matmul with fp32 accumulation computes. bf16 operands
// are widened into pooled fp32 copies for Sgemm (OpenBLAS has no bf16
// product here), or, without a native library, on CPUs where druto's kernel
// is AVX-512, or with DRUTO_CPU_BF16_GEMM=fused, go to blas.SgemmBF16 as
// they are, which widens them inside the packing of druto's assembly SGEMM
// (no fp32 copy).
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
// threads. An fp32 dout (the residual gradient) against bf16 weights is
// rounded to bf16 for the GEMMs (gradMat: the AMP policy's 16-bit matmul,
// as on the GPU), which also lets two bf16 operands run blas.SgemmBF16's
// AVX512_BF16 pair kernel where the CPU has one.

import (
	"fmt"
	"math"
	"math/bits"
	"os"
	"sync"
	"unsafe"

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
	if !d.check(&device.Ops.Matmul, []int{N, C, OC, int(act)}, out, pre, inp, weight, bias) {
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
	y := outF32(target) // (N,OC) fp32: target's memory when F32, else scratch
	defer releaseF32(target, y)
	if d.gemvOK(N, weight) { // a few rows (decoding): each weight read once
		xb := scratch32(inp, N*C)
		d.gemv(y, in32(inp, 0, N*C, xb), weight, N, C, OC)
		putScratch(xb)
	} else {
		blas.SetThreads(d.threads)
		w := d.gemmMat(weight)
		defer releaseMat(weight, w)
		x := d.gemmMat(inp)
		defer releaseMat(inp, x)
		if err := blas.SgemmBF16(false, true, N, OC, C, 1, x, C, w, C, 0, y, OC); err != nil {
			d.fail(fmt.Errorf("cpu: %s: %w", op, err))
			return
		}
	}
	if d.fused {
		d.matmulEpilogue(out, target, y, b, N, OC, act)
	} else {
		d.matmulDecomposed(out, target, y, b, N, OC, act)
	}
}

// matmulEpilogue is the fused form's single pass over the GEMM output y
// (N,OC): y += bias, target ← y rounded (when y is scratch), and under GELU
// out ← gelu(y), one cache-sized block of rows at a time.
func (d *Device) matmulEpilogue(out, target *tensor.Tensor, y, b []float32, N, OC int, act device.Activation) {
	if act == device.None && b == nil && target.DType == tensor.F32 {
		return // the GEMM wrote out in place
	}
	sub := rowGrain(OC)
	d.parallel(N, sub, func(lo, hi int) {
		var ob []float32
		if act == device.GELU && out.DType != tensor.F32 {
			ob = getScratch(min(sub, hi-lo) * OC)
			defer putScratch(ob)
		}
		for r0 := lo; r0 < hi; r0 += sub {
			d.matmulEpilogueRows(out, target, y, b, r0, min(r0+sub, hi), OC, act, ob)
		}
	})
}

// matmulEpilogueRows is the epilogue of rows [r0,r1) of y: += bias, round
// into target (when y is scratch), and under GELU out ← gelu(y) through ob
// (scratch of at least (r1-r0)·OC elements when out is 16-bit).
func (d *Device) matmulEpilogueRows(out, target *tensor.Tensor, y, b []float32, r0, r1, OC int, act device.Activation, ob []float32) {
	blk := y[r0*OC : r1*OC]
	if b != nil && target.DType == tensor.BF16 && (act == device.None || out.DType == tensor.BF16) {
		// One pass per row: bias, rounding store (and GELU rounded into out).
		for r := r0; r < r1; r++ {
			row, t := blk[(r-r0)*OC:(r-r0+1)*OC], target.U16()[r*OC:(r+1)*OC]
			if act == device.GELU {
				biasGeluBF16(t, out.U16()[r*OC:(r+1)*OC], row, b)
			} else {
				biasRoundBF16(t, row, b)
			}
		}
		return
	}
	if b != nil {
		for r := range r1 - r0 {
			add32(blk[r*OC:(r+1)*OC], b)
		}
	}
	flush32(target, r0*OC, blk)
	if act == device.GELU && out.DType == tensor.BF16 && useAVX2 { // gelu rounded on store
		base, k := r0*OC, len(blk)&^7
		if k > 0 {
			geluForwardBF16AVX2(&out.U16()[base], &blk[0], k)
		}
		if k < len(blk) {
			o := ob[:len(blk)-k]
			geluForward(o, blk[k:])
			store(out, base+k, o)
		}
		return
	}
	if act == device.GELU {
		o := out32(out, r0*OC, len(blk), ob)
		geluForward(o, blk)
		flush32(out, r0*OC, o)
	}
}

// matmulDecomposed runs the eager sequence after the GEMM: round y into
// target, then a bias-add pass over target, then (GELU, target being pre) a
// GELU pass from pre into out, each a separate parallel sweep over the whole
// (N,OC) tensor.
func (d *Device) matmulDecomposed(out, target *tensor.Tensor, y, b []float32, N, OC int, act device.Activation) {
	n := N * OC
	if target.DType != tensor.F32 { // the matmul's output tensor, rounded
		d.parallel(n, 1<<14, func(lo, hi int) { store(target, lo, y[lo:hi]) })
	}
	if b != nil { // target += bias, read back from target, rounded again
		d.parallel(N, rowGrain(OC), func(lo, hi int) {
			buf := getScratch(OC)
			defer putScratch(buf)
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
			xb, ob := getScratch(hi-lo), getScratch(hi-lo)
			defer putScratch(xb)
			defer putScratch(ob)
			x := in32(target, lo, hi-lo, xb)
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
	d.matmulBackward(&device.Ops.MatmulBackward, false, dinp, dweight, dbias, dout, inp, weight, N, C, OC)
}

// MatmulBackwardStore is MatmulBackward with dinp stored, not accumulated:
// dinp = dout·weight, its old contents never read (device.GradStorer);
// dweight and dbias accumulate. The values are Zero + MatmulBackward's.
func (d *Device) MatmulBackwardStore(dinp, dweight, dbias, dout, inp, weight *tensor.Tensor, N, C, OC int) {
	d.matmulBackward(&device.Ops.MatmulBackwardStore, true, dinp, dweight, dbias, dout, inp, weight, N, C, OC)
}

// matmulBackward is MatmulBackward (store false) or MatmulBackwardStore
// under contract c.
func (d *Device) matmulBackward(c *device.Contract, store bool, dinp, dweight, dbias, dout, inp, weight *tensor.Tensor, N, C, OC int) {
	op := c.Op
	if !d.check(c, []int{N, C, OC}, dinp, dweight, dbias, dout, inp, weight) {
		return
	}
	blas.SetThreads(d.threads)
	g, rounded := d.gradMat(dout, weight.DType) // (N,OC)
	defer releaseGrad(dout, g, rounded)
	if dinp != nil {
		// dinp (N,C) += (or, store, =) dout (N,OC) · weight (OC,C)
		w := d.gemmMat(weight)
		err := d.gemmInto(dinp, store, false, false, N, C, OC, g, OC, w, C)
		releaseMat(weight, w)
		if err != nil {
			d.fail(fmt.Errorf("cpu: %s: dinp: %w", op, err))
			return
		}
	}
	if rounded && !d.fused && dbias != nil {
		// Decomposed, as on the GPU: dbias sums the fp32 dout itself.
		if d.weightGrads(op, dweight, nil, g, inp, N, C, OC) {
			d.columnSumInto(dbias, dout.F32(), N, OC)
		}
		return
	}
	d.weightGrads(op, dweight, dbias, g, inp, N, C, OC)
}

// gradMat returns a linear layer's output gradient dout as a GEMM operand
// against weights of dtype h: gemmMat's, except for an fp32 dout (the
// residual gradient) against BF16 weights, which is rounded to bf16 first
// (rounded true; pooled scratch, give it back with releaseGrad). The AMP
// policy runs matmuls in the 16-bit type: PyTorch's autocast has a bf16
// output gradient there, and the GPU casts dout the same way (gpu's
// gemmOperand); it also makes both operands bf16 for blas.SgemmBF16's
// AVX512_BF16 pair kernel. The fused form's dbias then sums the rounded
// values, as the GPU's does.
func (d *Device) gradMat(dout *tensor.Tensor, h tensor.DType) (blas.Mat, bool) {
	if dout.DType != tensor.F32 || h != tensor.BF16 {
		return d.gemmMat(dout), false
	}
	n := dout.Numel()
	u := getScratch16(n)
	src := dout.F32()
	d.parallel(n, 1<<14, func(lo, hi int) { f32ToBF16s(u[lo:hi], src[lo:hi]) })
	if fusedBF16 {
		return blas.Mat{BF16: u}, true
	}
	v := getScratch(n) // fp32 copies for Sgemm: the rounded values widened
	d.parallel(n, 1<<14, func(lo, hi int) { bf16ToF32s(v[lo:hi], u[lo:hi]) })
	putScratch16(u)
	return blas.Mat{F32: v}, true
}

// releaseGrad gives back an operand from gradMat.
func releaseGrad(dout *tensor.Tensor, m blas.Mat, rounded bool) {
	switch {
	case !rounded:
		releaseMat(dout, m)
	case m.BF16 != nil:
		putScratch16(m.BF16)
	default:
		putScratch(m.F32)
	}
}

// getScratch16 returns a uint16 slice of length n and undefined contents,
// from getScratch's pools.
func getScratch16(n int) []uint16 {
	f := getScratch((n + 1) / 2)
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(f))), 2*cap(f))[:n]
}

// putScratch16 gives u, from getScratch16, back to its pool.
func putScratch16(u []uint16) {
	putScratch(unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(u))), cap(u)/2))
}

// weightGrads accumulates dweight (OC,C) += doutᵀ·inp and, when dbias is
// not nil, dbias (OC) += Σ_rows dout, from g, dout (N,OC) as a GEMM operand
// (gemmMat), so that a caller that needs dout widened for another product
// widens it once; it reports whether the GEMM ran.
func (d *Device) weightGrads(op string, dweight, dbias *tensor.Tensor, g blas.Mat, inp *tensor.Tensor, N, C, OC int) bool {
	// dweight (OC,C) += doutᵀ (OC,N) · inp (N,C)
	x := d.gemmMat(inp)
	defer releaseMat(inp, x)
	if err := d.gemmInto(dweight, false, true, false, OC, C, N, g, OC, x, C); err != nil {
		d.fail(fmt.Errorf("cpu: %s: dweight: %w", op, err))
		return false
	}
	if dbias != nil {
		d.columnSumMat(dbias, g, N, OC)
	}
	return true
}

// gemmInto computes t (m,n) += op(A)·op(B), or t = op(A)·op(B) when store:
// one GEMM (beta 1 or 0) into t's memory when t is F32, else a GEMM into
// fp32 scratch that accumulateF32 adds into t or storeF32 rounds into it.
func (d *Device) gemmInto(t *tensor.Tensor, store, transA, transB bool, m, n, k int, a blas.Mat, lda int, b blas.Mat, ldb int) error {
	if t.DType == tensor.F32 {
		beta := float32(1)
		if store {
			beta = 0
		}
		return blas.SgemmBF16(transA, transB, m, n, k, 1, a, lda, b, ldb, beta, t.F32(), n)
	}
	s := getScratch(m * n)
	defer putScratch(s)
	if err := blas.SgemmBF16(transA, transB, m, n, k, 1, a, lda, b, ldb, 0, s, n); err != nil {
		return err
	}
	if store {
		d.storeF32(t, s)
	} else {
		d.accumulateF32(t, s)
	}
	return nil
}

// storeF32 rounds v into t (t = v) in parallel chunks.
func (d *Device) storeF32(t *tensor.Tensor, v []float32) {
	d.parallel(len(v), 1<<14, func(lo, hi int) { store(t, lo, v[lo:hi]) })
}

// accumulateF32 adds v into t (t += v), rounding to t's dtype, in parallel
// chunks (addInto): the accumulate helper's arithmetic without its
// allocation per call.
func (d *Device) accumulateF32(t *tensor.Tensor, v []float32) {
	d.parallel(len(v), 1<<14, func(lo, hi int) { addInto(t, lo, v[lo:hi]) })
}

// gemmF32 returns t's elements as an fp32 GEMM operand: t's own memory when
// t is F32, else pooled scratch widened in parallel (give it back with
// releaseF32).
func (d *Device) gemmF32(t *tensor.Tensor) []float32 {
	if t.DType == tensor.F32 {
		return t.F32()
	}
	v := getScratch(t.Numel())
	d.parallel(len(v), 1<<14, func(lo, hi int) { load(v[lo:hi], t, lo) })
	return v
}

// EnvBF16GEMM names the environment variable that picks how the linear
// layers multiply bf16 tensors: "fused" hands them to blas.SgemmBF16, which
// widens them inside the packing of druto's assembly SGEMM (where the CPU
// has it, blas.FusedBF16), with no fp32 copy; "widen" makes pooled fp32
// copies of them for pkg/blas's Sgemm (OpenBLAS when installed); anything
// else, or none, picks by the CPU and the library: "fused" where druto's
// kernel is the AVX-512 one (blas.PreferFusedBF16) or no native library is
// loaded (both paths then run druto's kernel, and "fused" saves the
// copies); the copies on AVX2-only CPUs with a native library, where
// OpenBLAS's fp32 kernels make up for the copying
// (BenchmarkStepBF16Paths compares the two). On CPUs with AVX512_BF16,
// "fused" runs two bf16 operands on blas.SgemmBF16's pair kernel
// (VDPBF16PS), two k steps an instruction, which makes the bf16 step
// cheaper than fp32's.
const EnvBF16GEMM = "DRUTO_CPU_BF16_GEMM"

// fusedBF16 selects blas.SgemmBF16 for bf16 operands: set by loadBLAS
// (New) once the library is loaded, which must not happen before (see
// loadBLAS); tests switch it after calling loadBLAS.
var fusedBF16 bool

// bf16Policy returns fusedBF16's setting: EnvBF16GEMM's choice, by default
// the fused packing without a native library or with druto's AVX-512 kernel.
func bf16Policy() bool {
	env := os.Getenv(EnvBF16GEMM)
	return blas.FusedBF16() && (env == "fused" || env != "widen" && (!blas.Native() || blas.PreferFusedBF16()))
}

// bf16GemmName says how the linear layers multiply bf16 tensors (after
// loadBLAS has set fusedBF16).
func bf16GemmName() string {
	if !fusedBF16 {
		return "on fp32 copies"
	}
	if isa, ok := blas.DotBF16(); ok {
		return isa + " pair kernel (VDPBF16PS)"
	}
	return "widened in the packing of druto's kernel"
}

// gemmMat returns t as a GEMM operand: its bf16 bits as they are when
// fusedBF16, else gemmF32's fp32 (give it back with releaseMat).
func (d *Device) gemmMat(t *tensor.Tensor) blas.Mat {
	if fusedBF16 && t.DType == tensor.BF16 {
		return blas.Mat{BF16: t.U16()}
	}
	return blas.Mat{F32: d.gemmF32(t)}
}

// releaseMat gives back an operand from gemmMat.
func releaseMat(t *tensor.Tensor, m blas.Mat) {
	if m.F32 != nil {
		releaseF32(t, m.F32)
	}
}

// outF32 returns where to compute all of t in fp32: t's own memory when t
// is F32, else pooled scratch of undefined contents (give it back with
// releaseF32).
func outF32(t *tensor.Tensor) []float32 {
	if t.DType == tensor.F32 {
		return t.F32()
	}
	return getScratch(t.Numel())
}

// releaseF32 gives v, from gemmF32 or outF32 for t, back to the pool unless
// it is t's own memory.
func releaseF32(t *tensor.Tensor, v []float32) {
	if t.DType != tensor.F32 {
		putScratch(v)
	}
}

// scratchPools recycle the fp32 scratch of matmul and attention (widened
// 16-bit operands, GEMM outputs, per-goroutine buffers), one pool per power
// of two of capacity: without them a training step would allocate
// megabytes per op and keep the garbage collector busy.
var scratchPools [64]sync.Pool // of *[]float32 with cap 1<<i

// poisonScratch makes getScratch fill its slices with NaN, so that tests
// catch a read of scratch that was not written first.
var poisonScratch = false

// getScratch returns a float32 slice of length n and undefined contents.
func getScratch(n int) []float32 {
	if n <= 0 {
		return nil
	}
	c := bits.Len(uint(n - 1)) // smallest class with 1<<c >= n
	var s []float32
	if p, ok := scratchPools[c].Get().(*[]float32); ok {
		s = (*p)[:n]
		*p = nil
		scratchBoxes.Put(p)
	} else {
		s = make([]float32, n, 1<<c)
	}
	if poisonScratch {
		nan := float32(math.NaN())
		for i := range s {
			s[i] = nan
		}
	}
	return s
}

// putScratch gives s, from getScratch, back to its pool.
func putScratch(s []float32) {
	c := cap(s)
	if c == 0 || c&(c-1) != 0 {
		return // not from getScratch
	}
	p, ok := scratchBoxes.Get().(*[]float32)
	if !ok {
		p = new([]float32)
	}
	*p = s[:c]
	scratchPools[bits.Len(uint(c-1))].Put(p)
}

// scratchBoxes recycle the boxes (*[]float32) the pools hold, so that a
// scratch buffer's return allocates nothing: a decode step takes and gives
// back a few buffers per op, a token every few hundred microseconds.
var scratchBoxes sync.Pool // of *[]float32, nil
