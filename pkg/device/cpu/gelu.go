package cpu

// gelu.go: the tanh-form GELU, gelu(x) = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
//
// geluForward (fused: one loop) and geluForwardDecomposed (eight elementwise
// passes, as eager PyTorch runs the composite) are the epilogue of Matmul's
// GELU activation; matmul.go calls them on fp32 slices. GELUBackward's fused
// form computes gelu'(x)·dout in one loop; the decomposed form runs the
// derivative's elementwise steps as separate passes over the buffer, the way
// autograd of the composite would.
//
// tanh is evaluated in float64 and rounded (Go has no float32 tanh); every
// other step is float32, in the same order in both forms, so for F32 the
// fused and decomposed forwards give the same bits.

import (
	"math"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// geluScale is √(2/π), geluCoef the cubic coefficient of the tanh form.
const (
	geluScale = float32(0.7978845608028654) // math.Sqrt(2 / math.Pi)
	geluCoef  = float32(0.044715)
)

// tanh32 is tanh in float32, a few ulp from the correctly rounded value and
// about 5x faster than math.Tanh (the GELU epilogue's hot spot): an odd
// Taylor polynomial near zero, where 1-e^(-2|x|) would cancel, and
// (1-e)/(1+e) with e = e^(-2|x|) from expNeg32 elsewhere. Both are computed
// and one is picked by a bit mask, and the sign is copied by bits: GELU's
// inputs fall on either side of 0 and of ±1/8 at random, and the two
// mispredicted branches per element cost more than the extra arithmetic
// (BenchmarkGELUBackward compares: the branchless form takes about half the
// time of the branchy one). The
// result is bit-identical to the branchy form, -0 aside (now -0).
func tanh32(x float32) float32 {
	xb := math.Float32bits(x)
	a := math.Float32frombits(xb & 0x7fffffff)
	// tanh a = a - a³/3 + 2a⁵/15 - 17a⁷/315 + 62a⁹/2835; the next term is
	// below 2e-11·a at a < 1/8.
	a2 := a * a
	small := a * (1 + a2*(-1.0/3+a2*(2.0/15+a2*(-17.0/315+a2*(62.0/2835)))))
	e := expNeg32(-2 * a)
	big := (1 - e) / (1 + e)
	m := uint32(int32(math.Float32bits(a-0.125)) >> 31) // all ones when a < 1/8
	t := math.Float32bits(small)&m | math.Float32bits(big)&^m
	return math.Float32frombits(t | xb&0x80000000)
}

// geluForwardGo computes out = gelu(inp) in one loop over len(inp) elements
// (out may be inp): the pure-Go reference of geluForward (simd.go).
// out (n), inp (n)
func geluForwardGo(out, inp []float32) {
	out = out[:len(inp)]
	for i, x := range inp {
		u := x*x*x*geluCoef + x
		t := tanh32(u * geluScale)
		out[i] = (t + 1) * x * 0.5
	}
}

// geluForwardDecomposed computes out = gelu(inp) as eight elementwise passes
// over the buffer (x³, ×0.044715, +x, ×√(2/π), tanh, +1, ×x, ×0.5) through an
// fp32 scratch buffer; out is written by the last pass only, so it may be inp.
// out (n), inp (n)
func geluForwardDecomposed(out, inp []float32) {
	out = out[:len(inp)]
	t := make([]float32, len(inp))
	for i, x := range inp { // x³
		t[i] = x * x * x
	}
	for i := range t { // ×0.044715
		t[i] *= geluCoef
	}
	for i, x := range inp { // +x
		t[i] += x
	}
	for i := range t { // ×√(2/π)
		t[i] *= geluScale
	}
	tanhSlice(t, t)    // tanh
	for i := range t { // +1
		t[i]++
	}
	for i, x := range inp { // ×x
		t[i] *= x
	}
	for i, v := range t { // ×0.5
		out[i] = v * 0.5
	}
}

// GELUBackward computes dinp = gelu'(inp)·dout elementwise over n elements,
// overwriting dinp.
// dinp (n), inp (n), dout (n)
func (d *Device) GELUBackward(dinp, inp, dout *tensor.Tensor, n int) {
	const op = "GELUBackward"
	if !d.check(&device.Ops.GELUBackward, []int{n}, dinp, inp, dout) {
		return
	}
	if d.fused {
		d.geluBackwardFused(dinp, inp, dout, n)
	} else {
		d.geluBackwardDecomposed(dinp, inp, dout, n)
	}
}

// geluBackwardFused: one loop, parallel chunks.
//
//	gelu'(x) = 0.5·(1 + tanh(a)) + 0.5·x·sech²(a)·√(2/π)·(1 + 3·0.044715·x²),
//	a = √(2/π)·(x + 0.044715·x³), sech² = 1 - tanh².
func (d *Device) geluBackwardFused(dinp, inp, dout *tensor.Tensor, n int) {
	bf := useAVX2 && dinp.DType == tensor.BF16 && inp.DType == tensor.BF16 && dout.DType == tensor.BF16
	d.parallel(n, 1<<13, func(lo, hi int) {
		if bf { // bf16 in and out: one kernel pass, no fp32 buffers
			if k := (hi - lo) &^ 7; k > 0 {
				geluBackwardBF16AVX2(&dinp.U16()[lo], &inp.U16()[lo], &dout.U16()[lo], k)
				lo += k
			}
			if lo == hi {
				return
			}
		}
		xb, gb, ob := scratch32(inp, hi-lo), scratch32(dout, hi-lo), scratch32(dinp, hi-lo)
		defer func() { putScratch(xb); putScratch(gb); putScratch(ob) }()
		x, g, o := in32(inp, lo, hi-lo, xb), in32(dout, lo, hi-lo, gb), out32(dinp, lo, hi-lo, ob)
		geluBackwardSlice(o, x, g)
		flush32(dinp, lo, o)
	})
}

// geluBackwardGo sets o = gelu'(x)·g elementwise: the pure-Go reference of
// geluBackwardSlice (simd.go).
func geluBackwardGo(o, x, g []float32) {
	o, g = o[:len(x)], g[:len(x)]
	for i, v := range x {
		v2 := v * v
		t := tanh32((v2*v*geluCoef + v) * geluScale)
		left := (t + 1) * 0.5
		right := v * 0.5 * (1 - t*t) * geluScale * (v2*(3*geluCoef) + 1)
		o[i] = (left + right) * g[i]
	}
}

// geluBackwardDecomposed: the derivative's steps as separate passes over
// materialised fp32 buffers.
func (d *Device) geluBackwardDecomposed(dinp, inp, dout *tensor.Tensor, n int) {
	x, g := f32(inp), f32(dout) // (n)
	x2, t, r := make([]float32, n), make([]float32, n), make([]float32, n)
	pass := func(fn func(lo, hi int)) { d.parallel(n, 1<<14, fn) }
	pass(func(lo, hi int) { // x2 = x²
		for i := lo; i < hi; i++ {
			x2[i] = x[i] * x[i]
		}
	})
	pass(func(lo, hi int) { // t = x³·0.044715 + x
		for i := lo; i < hi; i++ {
			t[i] = x2[i]*x[i]*geluCoef + x[i]
		}
	})
	pass(func(lo, hi int) { // t = tanh(√(2/π)·t)
		for i := lo; i < hi; i++ {
			t[i] = tanh32(t[i] * geluScale)
		}
	})
	pass(func(lo, hi int) { // r = 1 - t² (sech²)
		for i := lo; i < hi; i++ {
			r[i] = 1 - t[i]*t[i]
		}
	})
	pass(func(lo, hi int) { // r = 0.5·x·r·√(2/π)
		for i := lo; i < hi; i++ {
			r[i] = x[i] * 0.5 * r[i] * geluScale
		}
	})
	pass(func(lo, hi int) { // x2 = 3·0.044715·x² + 1
		for i := lo; i < hi; i++ {
			x2[i] = x2[i]*(3*geluCoef) + 1
		}
	})
	pass(func(lo, hi int) { // r = r·x2 (right term)
		for i := lo; i < hi; i++ {
			r[i] *= x2[i]
		}
	})
	pass(func(lo, hi int) { // t = 0.5·(1 + t) (left term)
		for i := lo; i < hi; i++ {
			t[i] = (t[i] + 1) * 0.5
		}
	})
	pass(func(lo, hi int) { // dinp = (left + right)·dout
		for i := lo; i < hi; i++ {
			t[i] = (t[i] + r[i]) * g[i]
		}
		store(dinp, lo, t[lo:hi])
	})
}

var _ device.GELUer = (*Device)(nil)

// GELU computes out = gelu(inp) over n elements (out may be inp): the fused
// form is Matmul's GELU epilogue (geluForward), the decomposed form the
// composite's passes (geluForwardDecomposed), so in fp32 the result has
// the bits the epilogue gave the same pre-activation.
// out (n), inp (n)
func (d *Device) GELU(out, inp *tensor.Tensor, n int) {
	if !d.check(&device.GELUForward, []int{n}, out, inp) {
		return
	}
	d.parallel(n, 1<<14, func(lo, hi int) {
		xb, ob := scratch32(inp, hi-lo), scratch32(out, hi-lo)
		defer func() { putScratch(xb); putScratch(ob) }()
		x, o := in32(inp, lo, hi-lo, xb), out32(out, lo, hi-lo, ob)
		if d.fused {
			geluForward(o, x)
		} else {
			geluForwardDecomposed(o, x)
		}
		flush32(out, lo, o)
	})
}
