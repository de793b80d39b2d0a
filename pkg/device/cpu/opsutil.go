package cpu

// opsutil.go: helpers shared by the row-wise ops (encoder, layernorm, gelu,
// crossentropy, adamw, gradnorm): the contract check at the op boundary, fp32 views
// of rows of tensors of any float dtype, the float64 row sums used for
// statistics, and the float32 exp of the softmax.

import (
	"fmt"
	"math"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// check records the first rule of op's contract (device.Ops) that the
// arguments break, or a tensor that is not in host memory; it reports
// whether the arguments hold.
func (d *Device) check(c *device.Contract, s []int, ts ...*tensor.Tensor) bool {
	if err := c.Check(s, ts...); err != nil {
		d.fail(fmt.Errorf("cpu: %w", err))
		return false
	}
	for i, t := range ts {
		if t != nil && !t.IsHost() {
			d.fail(fmt.Errorf("cpu: %s: %s is not a host tensor", c.Op, c.Params[i].Name))
			return false
		}
	}
	return true
}

// in32 returns the n elements of t starting at off as float32: t's own
// memory when t is F32, else a widened copy in buf[:n]. Ops read rows with it.
func in32(t *tensor.Tensor, off, n int, buf []float32) []float32 {
	if t.DType == tensor.F32 {
		return t.F32()[off : off+n : off+n]
	}
	load(buf[:n], t, off)
	return buf[:n]
}

// scratch32 returns a pooled buffer of n elements (contents undefined) for
// in32 or out32 over t, or nil when t is F32 and they use t's own memory;
// give it back with putScratch (a no-op on nil).
func scratch32(t *tensor.Tensor, n int) []float32 {
	if t.DType == tensor.F32 {
		return nil
	}
	return getScratch(n)
}

// out32 returns where to compute the n elements of t starting at off: t's
// own memory when t is F32, else buf[:n], which flush32 then rounds into t.
func out32(t *tensor.Tensor, off, n int, buf []float32) []float32 {
	if t.DType == tensor.F32 {
		return t.F32()[off : off+n : off+n]
	}
	return buf[:n]
}

// flush32 stores v (from out32 or in32) into t at off; a no-op for F32,
// whose slice was t's memory already.
func flush32(t *tensor.Tensor, off int, v []float32) {
	if t.DType != tensor.F32 {
		store(t, off, v)
	}
}

// sum64Go returns Σ x in float64 with four independent accumulators (a fixed
// order, so the same row always gives the same bits): sum64's reference.
func sum64Go(x []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += float64(x[i])
		s1 += float64(x[i+1])
		s2 += float64(x[i+2])
		s3 += float64(x[i+3])
	}
	for ; i < len(x); i++ {
		s0 += float64(x[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// sumSqDev64Go returns Σ (x-m)² in float64, accumulated like sum64Go.
func sumSqDev64Go(x []float32, m float64) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		d0 := float64(x[i]) - m
		d1 := float64(x[i+1]) - m
		d2 := float64(x[i+2]) - m
		d3 := float64(x[i+3]) - m
		s0 += d0 * d0
		s1 += d1 * d1
		s2 += d2 * d2
		s3 += d3 * d3
	}
	for ; i < len(x); i++ {
		d0 := float64(x[i]) - m
		s0 += d0 * d0
	}
	return (s0 + s1) + (s2 + s3)
}

// rowGrain returns a parallel grain (rows per worker at least) so that a
// worker gets about 16k elements of rows of width c, and at least one row.
func rowGrain(c int) int {
	return max(1, (1<<14)/max(c, 1))
}

// expNeg32 returns e^x in float32 for x <= 0 (the softmax's exp(x - max)),
// within 2 ulp of the correctly rounded value; results below the smallest
// normal float32 (x < -87.34) flush to 0, -Inf gives 0 and NaN gives NaN.
// It is several times faster than math.Exp, which both forms of the softmax
// ops share so that their comparison stays fair.
//
// Range reduction x = n·ln2 + r, |r| <= ln2/2, with ln2 split in two
// (Cody-Waite) so that n·ln2hi is exact; e^r by its Taylor polynomial of
// degree 7 (truncation < 5e-9 relative); then the exponent bits of 2^n.
func expNeg32(x float32) float32 {
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375    // 8 significant bits: n·ln2hi is exact
		ln2lo = -2.12194440e-4 // ln2 - ln2hi
		lo    = -87.33654      // ln(2^-126)
	)
	if x < lo {
		return 0
	}
	n := float32(int32(x*log2e - 0.5)) // round(x/ln2), x <= 0
	r := x - n*ln2hi - n*ln2lo
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040)))))))
	return p * math.Float32frombits(uint32(int32(n)+127)<<23)
}
