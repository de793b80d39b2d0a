package cpu

// layernorm.go: LayerNorm, ResidualLayerNorm, LayerNormBackward and Add.
//
// Statistics are accumulated in float64 (sum64, sumSqDev64) in both forms and
// stored as fp32 mean and rstd = 1/sqrt(var + 1e-5), var the biased variance.
//
// Forward, fused: one visit per row (llm.c layernorm_forward): the row is
// read once into cache, its mean and variance computed from it, and the
// normalise + affine loop writes the output; ResidualLayerNorm adds the two
// residual branches in the same row visit and normalises the rounded sum.
// Decomposed (what plain PyTorch runs for mean/var/normalise/affine, and
// Add then LayerNorm for the residual): a mean kernel, a variance kernel,
// a normalise kernel into an (N,C) fp32 scratch buffer, and an affine
// kernel, each a full pass over the (N,C) buffer.
//
// Backward, fused: one visit per row (llm.c layernorm_backward): the two row
// means of dnorm = weight·dout, then one loop that accumulates dinp and the
// row's share of dweight and dbias. The dweight/dbias shares are summed per
// block of lnBlock rows and the blocks combined in block order, so the result
// does not depend on the thread count. Decomposed: separate passes for dbias
// and dweight (column reductions over a materialised xhat and dout·xhat),
// dnorm, the two row means, and dinp.

import (
	"math"

	"github.com/druto/druto/pkg/blas"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// lnEps is the variance epsilon of every layernorm (GPT-2's 1e-5).
const lnEps = 1e-5

// lnBlock is the number of rows whose dweight/dbias contributions the fused
// backward sums into one partial; fixed so results are thread-count free.
const lnBlock = 32

// LayerNorm normalises each row with fp32 statistics and applies weight and
// bias; mean and rstd receive the statistics for backward.
// out (N,C), mean (N) F32, rstd (N) F32, inp (N,C), weight (C), bias (C)
func (d *Device) LayerNorm(out, mean, rstd, inp, weight, bias *tensor.Tensor, N, C int) {
	const op = "LayerNorm"
	if !d.check(&device.Ops.LayerNorm, []int{N, C}, out, mean, rstd, inp, weight, bias) {
		return
	}
	if d.fused {
		d.layerNormFused(nil, out, mean, rstd, inp, nil, weight, bias, N, C)
	} else {
		d.layerNormDecomposed(out, mean, rstd, inp, weight, bias, N, C)
	}
}

// ResidualLayerNorm computes res = a + b (rounded to res's dtype) and
// out = LayerNorm(res).
// res (N,C), out (N,C), mean (N), rstd (N), a (N,C), b (N,C), weight (C), bias (C)
func (d *Device) ResidualLayerNorm(res, out, mean, rstd, a, b, weight, bias *tensor.Tensor, N, C int) {
	const op = "ResidualLayerNorm"
	if !d.check(&device.Ops.ResidualLayerNorm, []int{N, C}, res, out, mean, rstd, a, b, weight, bias) {
		return
	}
	if d.fused {
		d.layerNormFused(res, out, mean, rstd, a, b, weight, bias, N, C)
	} else {
		device.ResidualLayerNormDecomposed(d, res, out, mean, rstd, a, b, weight, bias, N, C)
	}
}

// Add computes out = a + b elementwise over n elements. It is a single pass
// in both forms (there is nothing to fuse).
func (d *Device) Add(out, a, b *tensor.Tensor, n int) {
	const op = "Add"
	if !d.check(&device.Ops.Add, []int{n}, out, a, b) {
		return
	}
	d.addPass(out, a, b, n)
}

// addPass: out = a + b, parallel chunks.
func (d *Device) addPass(out, a, b *tensor.Tensor, n int) {
	d.parallel(n, 1<<14, func(lo, hi int) {
		ab, bb, ob := scratch32(a, hi-lo), scratch32(b, hi-lo), scratch32(out, hi-lo)
		defer func() { putScratch(ab); putScratch(bb); putScratch(ob) }()
		x, y, o := in32(a, lo, hi-lo, ab), in32(b, lo, hi-lo, bb), out32(out, lo, hi-lo, ob)
		for i := range o {
			o[i] = x[i] + y[i]
		}
		flush32(out, lo, o)
	})
}

// layerNormFused: one visit per row. With res != nil the row is inp + b,
// stored rounded into res and normalised as stored (ResidualLayerNorm).
func (d *Device) layerNormFused(res, out, mean, rstd, inp, b, weight, bias *tensor.Tensor, N, C int) {
	w, bs := f32(weight), f32(bias) // (C)
	mu, rs := mean.F32(), rstd.F32()
	d.parallel(N, rowGrain(C), func(lo, hi int) {
		xb, yb, rb, ob := scratch32(inp, C), getScratch(C), getScratch(C), scratch32(out, C)
		defer func() { putScratch(xb); putScratch(yb); putScratch(rb); putScratch(ob) }()
		for i := lo; i < hi; i++ {
			off := i * C
			x := in32(inp, off, C, xb) // the row (C)
			if res != nil {
				y := in32(b, off, C, yb)
				r := out32(res, off, C, rb)
				for j := range r {
					r[j] = x[j] + y[j]
				}
				if res.DType != tensor.F32 { // normalise what was stored
					store(res, off, r)
					load(r, res, off)
				}
				x = r
			}
			mf, sf := lnStats(x)
			o := out32(out, off, C, ob)
			lnNorm(o, x, w, bs, mf, sf)
			flush32(out, off, o)
			mu[i], rs[i] = mf, sf
		}
	})
}

// lnStats returns a row's mean and rstd = 1/sqrt(var + eps) in fp32, both
// from float64 sums (var the biased variance about the float64 mean).
func lnStats(x []float32) (mean, rstd float32) {
	m := sum64(x) / float64(len(x))
	v := sumSqDev64(x, m) / float64(len(x))
	return float32(m), float32(1 / math.Sqrt(v+lnEps))
}

// layerNormDecomposed: mean, variance, normalise and affine kernels, each a
// full pass, with the normalised rows materialised in fp32 scratch.
func (d *Device) layerNormDecomposed(out, mean, rstd, inp, weight, bias *tensor.Tensor, N, C int) {
	x := f32(inp) // (N,C), a cast pass when inp is 16-bit
	w, bs := f32(weight), f32(bias)
	mu, rs := mean.F32(), rstd.F32()
	g := rowGrain(C)
	// pass 1: mean (N) = Σ_j x / C
	d.parallel(N, g, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			mu[i] = float32(sum64(x[i*C:(i+1)*C]) / float64(C))
		}
	})
	// pass 2: variance (N) = Σ_j (x - mean)² / C, then rstd (N) = 1/sqrt(var + eps).
	// The variance is taken about the fp32 mean as a separate kernel sees it.
	variance := make([]float64, N)
	d.parallel(N, g, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			variance[i] = sumSqDev64(x[i*C:(i+1)*C], float64(mu[i])) / float64(C)
		}
	})
	for i, v := range variance {
		rs[i] = float32(1 / math.Sqrt(v+lnEps))
	}
	// pass 3: xhat (N,C) = (x - mean) * rstd
	xhat := make([]float32, N*C)
	d.parallel(N, g, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			m, s := mu[i], rs[i]
			for j, v := range x[i*C : (i+1)*C] {
				xhat[i*C+j] = s * (v - m)
			}
		}
	})
	// pass 4: out (N,C) = xhat * weight + bias
	d.parallel(N, g, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			r := xhat[i*C : (i+1)*C]
			for j := range r {
				r[j] = r[j]*w[j] + bs[j]
			}
		}
		store(out, lo*C, xhat[lo*C:hi*C])
	})
}

// LayerNormBackward accumulates the layernorm gradients into dinp, dweight
// and dbias.
// dinp (N,C), dweight (C), dbias (C), dout (N,C), inp (N,C), weight (C), mean (N), rstd (N)
func (d *Device) LayerNormBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd *tensor.Tensor, N, C int) {
	const op = "LayerNormBackward"
	if !d.check(&device.Ops.LayerNormBackward, []int{N, C}, dinp, dweight, dbias, dout, inp, weight, mean, rstd) {
		return
	}
	if N == 0 || C == 0 {
		return
	}
	if d.fused {
		d.layerNormBackwardFused(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C)
	} else {
		d.layerNormBackwardDecomposed(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C)
	}
}

// layerNormBackwardFused: one visit per row, dweight/dbias per row block.
func (d *Device) layerNormBackwardFused(dinp, dweight, dbias, dout, inp, weight, mean, rstd *tensor.Tensor, N, C int) {
	w := f32(weight) // (C)
	mu, rs := mean.F32(), rstd.F32()
	nb := (N + lnBlock - 1) / lnBlock
	pw, pb := getScratch(nb*C), getScratch(nb*C) // (nb,C) partial dweight, dbias
	defer putScratch(pw)
	defer putScratch(pb)
	clear(pw)
	clear(pb)
	d.parallel(nb, max(1, rowGrain(C)/lnBlock), func(blo, bhi int) {
		xb, gb, db := scratch32(inp, C), scratch32(dout, C), scratch32(dinp, C)
		defer func() { putScratch(xb); putScratch(gb); putScratch(db) }()
		for blk := blo; blk < bhi; blk++ {
			dw, dbs := pw[blk*C:(blk+1)*C], pb[blk*C:(blk+1)*C]
			for i := blk * lnBlock; i < min(N, (blk+1)*lnBlock); i++ {
				off := i * C
				x, g := in32(inp, off, C, xb), in32(dout, off, C, gb)
				m, s := mu[i], rs[i]
				// the two row means: mean(dnorm) and mean(dnorm·norm)
				dm, dnm := lnBwdSums(x, w, g, m, s)
				dmf, dnmf := float32(dm/float64(C)), float32(dnm/float64(C))
				di := in32(dinp, off, C, db)
				lnBwdRow(di, dw, dbs, x, w, g, m, s, dmf, dnmf)
				flush32(dinp, off, di)
			}
		}
	})
	// combine the block partials in block order, parallel over channels
	d.parallel(C, 256, func(lo, hi int) {
		sw, sb := getScratch(hi-lo), getScratch(hi-lo)
		defer putScratch(sw)
		defer putScratch(sb)
		clear(sw)
		clear(sb)
		for blk := range nb {
			for j := lo; j < hi; j++ {
				sw[j-lo] += pw[blk*C+j]
				sb[j-lo] += pb[blk*C+j]
			}
		}
		accumulateRange(dweight, lo, sw)
		accumulateRange(dbias, lo, sb)
	})
}

// layerNormBackwardDecomposed: each step a full pass, as autograd of the
// decomposed forward runs it.
func (d *Device) layerNormBackwardDecomposed(dinp, dweight, dbias, dout, inp, weight, mean, rstd *tensor.Tensor, N, C int) {
	g, x, w := f32(dout), f32(inp), f32(weight) // (N,C), (N,C), (C)
	mu, rs := mean.F32(), rstd.F32()
	rg := rowGrain(C)
	// pass 1: dbias += Σ_rows dout
	d.columnSumInto(dbias, g, N, C)
	// pass 2: xhat (N,C) = (x - mean) * rstd
	xhat := make([]float32, N*C)
	d.parallel(N, rg, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			m, s := mu[i], rs[i]
			for j, v := range x[i*C : (i+1)*C] {
				xhat[i*C+j] = s * (v - m)
			}
		}
	})
	// pass 3: gx (N,C) = dout * xhat; pass 4: dweight += Σ_rows gx
	tmp := make([]float32, N*C)
	d.parallel(N*C, 1<<14, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			tmp[i] = xhat[i] * g[i]
		}
	})
	d.columnSumInto(dweight, tmp, N, C)
	// pass 5: dnorm (N,C) = dout * weight
	dnorm := make([]float32, N*C)
	d.parallel(N, rg, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			for j := range C {
				dnorm[i*C+j] = w[j] * g[i*C+j]
			}
		}
	})
	// pass 6: m1 (N) = mean_j dnorm; pass 7: tmp = dnorm * xhat; pass 8: m2 (N) = mean_j tmp
	m1, m2 := make([]float32, N), make([]float32, N)
	d.parallel(N, rg, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			m1[i] = float32(sum64(dnorm[i*C:(i+1)*C]) / float64(C))
		}
	})
	d.parallel(N*C, 1<<14, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			tmp[i] = dnorm[i] * xhat[i]
		}
	})
	d.parallel(N, rg, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			m2[i] = float32(sum64(tmp[i*C:(i+1)*C]) / float64(C))
		}
	})
	// pass 9: dinp += rstd * (dnorm - m1 - xhat*m2)
	d.parallel(N, rg, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			s := rs[i]
			r := dnorm[i*C : (i+1)*C]
			for j := range r {
				r[j] = s * (r[j] - m1[i] - xhat[i*C+j]*m2[i])
			}
		}
		accumulateRange(dinp, lo*C, dnorm[lo*C:hi*C])
	})
}

// columnSumInto accumulates the column sums of src (N,C) into dst (C),
// parallel over channel ranges, each summing rows in order.
func (d *Device) columnSumInto(dst *tensor.Tensor, src []float32, N, C int) {
	d.columnSumMat(dst, blas.Mat{F32: src}, N, C)
}

// columnSumMat is columnSumInto over an fp32 or bf16 src (N,C): each bf16
// row block is widened (exactly) into a small buffer before its add, so the
// sums are those of the widened copy, without making one.
func (d *Device) columnSumMat(dst *tensor.Tensor, src blas.Mat, N, C int) {
	d.parallel(C, 64, func(lo, hi int) {
		acc := getScratch(hi - lo)
		defer putScratch(acc)
		clear(acc)
		var row []float32
		if src.F32 == nil {
			row = getScratch(hi - lo)
			defer putScratch(row)
		}
		for i := range N {
			if src.F32 != nil {
				add32(acc, src.F32[i*C+lo:i*C+hi])
				continue
			}
			bf16ToF32s(row, src.BF16[i*C+lo:i*C+hi])
			add32(acc, row)
		}
		accumulateRange(dst, lo, acc)
	})
}

// accumulateRange adds v into t's elements starting at off, rounding to t's
// dtype (the single-goroutine form of accumulateAt).
func accumulateRange(t *tensor.Tensor, off int, v []float32) { addInto(t, off, v) }
