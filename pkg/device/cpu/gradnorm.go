package cpu

// gradnorm.go: the global L2 norm of the gradient buffer, sqrt(Σ (g·scale)²),
// with the inf/NaN check folded into the same pass.
//
// One pass in parallel: the buffer is cut into fixed chunks of gnChunk
// elements (independent of the thread count), each chunk's Σ g² is taken in
// float64 in a fixed order, and the partials are added in chunk order, so the
// result has the same bits for any thread count. In float64 the square of any
// finite float32 is finite and so is their sum, so the sum is non-finite
// exactly when some element is Inf or NaN: no per-element test is needed.
// There is a single form: the norm is one reduction either way.

import (
	"math"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// gnChunk is the number of elements of one partial sum.
const gnChunk = 1 << 15

// GradNorm returns sqrt(Σ (g·scale)²) over every element of grads, rounded
// to float32, and whether every element was finite (when not, norm is Inf
// or NaN). On invalid arguments it records an error and returns NaN, false.
func (d *Device) GradNorm(grads *tensor.Tensor, scale float32) (norm float32, finite bool) {
	if !d.check(&device.Ops.GradNorm, []int{device.Numel(grads)}, grads) {
		return float32(math.NaN()), false
	}
	s := d.sumSqGrads(grads)
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return float32(s), false
	}
	return float32(math.Sqrt(s) * math.Abs(float64(scale))), true
}

// sumSqGrads returns Σ g² over grads in float64, in chunk order.
func (d *Device) sumSqGrads(grads *tensor.Tensor) float64 {
	n := grads.Numel()
	chunks := (n + gnChunk - 1) / gnChunk
	part := make([]float64, chunks) // (chunks) Σ g² per chunk
	d.parallel(chunks, 1, func(lo, hi int) {
		var buf []float32
		if grads.DType != tensor.F32 {
			buf = make([]float32, gnChunk)
		}
		for c := lo; c < hi; c++ {
			off := c * gnChunk
			part[c] = sumSq64(in32(grads, off, min(gnChunk, n-off), buf))
		}
	})
	var s float64
	for _, p := range part {
		s += p
	}
	return s
}

// sumSq64 returns Σ x² in float64 with four accumulators in a fixed order.
func sumSq64(x []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		a, b, c, e := float64(x[i]), float64(x[i+1]), float64(x[i+2]), float64(x[i+3])
		s0 += a * a
		s1 += b * b
		s2 += c * c
		s3 += e * e
	}
	for ; i < len(x); i++ {
		a := float64(x[i])
		s0 += a * a
	}
	return (s0 + s1) + (s2 + s3)
}
