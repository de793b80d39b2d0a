package cpu

// crossentropy.go: softmax cross-entropy over the vocabulary ("fused
// classifier"), losses[i] = -log softmax(logits[i])[targets[i]], and, when
// dscale != 0, the gradient of dscale·Σ losses written over the logits.
//
// Fused (llm.c's fused classifier): one visit per row, parallel over rows:
// the row's max, then exp(x - max) written over the row itself (the logits
// are about to be overwritten by the gradient anyway) while summing, then the
// loss from log(sum) - (x[t] - max) and (exp/sum - onehot)·dscale rounded
// back into the logits. No (N,V) probability buffer exists; for 16-bit logits
// the row lives in a (V) fp32 buffer per worker. With dscale == 0 the logits
// are only read.
//
// Decomposed (log_softmax + nll_loss as separate kernels): widen the logits
// to fp32 (for 16-bit), a max pass, a subtract + exp pass into a materialised
// (N,V) fp32 probs buffer, a sum pass, a divide pass, the NLL gather, and the
// gradient pass. The NLL gather is in log-sum-exp form, log(sum) - (x[t] -
// max), like the fused form: a target far below the max gives a finite loss.
//
// Sums are accumulated in float64; exp is expNeg32 (float32, within 2 ulp)
// in both forms. A row of NaN gives a NaN loss (the max skips NaN, the
// exp and sum carry it).

import (
	"fmt"
	"math"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// CrossEntropy computes the per-row loss in fp32 and, when dscale != 0,
// overwrites logits with (softmax(logits) - onehot(targets))·dscale. Targets
// outside [0,V) record an error and leave every output untouched.
// losses (N) F32, logits (N,V), targets (N) I32
func (d *Device) CrossEntropy(losses, logits, targets *tensor.Tensor, N, V int, dscale float32) {
	const op = "CrossEntropy"
	if !d.check(&device.Ops.CrossEntropy, []int{N, V}, losses, logits, targets) {
		return
	}
	for i, t := range targets.I32() {
		if t < 0 || int(t) >= V {
			d.fail(fmt.Errorf("cpu: %s: target %d of row %d outside [0,%d)", op, t, i, V))
			return
		}
	}
	if d.fused {
		d.crossEntropyFused(losses, logits, targets, N, V, dscale)
	} else {
		d.crossEntropyDecomposed(losses, logits, targets, N, V, dscale)
	}
}

// crossEntropyFused: one visit per row.
func (d *Device) crossEntropyFused(losses, logits, targets *tensor.Tensor, N, V int, dscale float32) {
	loss, tg := losses.F32(), targets.I32()
	d.parallel(N, rowGrain(V), func(lo, hi int) {
		buf := make([]float32, V)
		for i := lo; i < hi; i++ {
			x := buf
			if dscale != 0 { // the gradient overwrites the logits
				x = in32(logits, i*V, V, buf) // the row (V), logits' memory when F32
			} else {
				load(x, logits, i*V)
			}
			t := tg[i]
			mx := float32(math.Inf(-1))
			if V > 0 {
				mx = max(mx, max32(x))
			}
			zt := float64(x[t] - mx)
			expSubSum(x, mx) // x := exp(x - max), in place
			var sum float64  // in order of j, as the scalar form sums
			for _, e := range x {
				sum += float64(e)
			}
			loss[i] = float32(math.Log(sum) - zt)
			if dscale == 0 {
				continue
			}
			inv := 1 / sum
			pt := float32(float64(x[t]) * inv)
			ceGrad(x, inv, dscale) // x := (p - onehot)·dscale
			x[t] = (pt - 1) * dscale
			flush32(logits, i*V, x)
		}
	})
}

// crossEntropyDecomposed: softmax, NLL and gradient as separate passes over
// a materialised (N,V) fp32 probability buffer.
func (d *Device) crossEntropyDecomposed(losses, logits, targets *tensor.Tensor, N, V int, dscale float32) {
	loss, tg := losses.F32(), targets.I32()
	x := f32(logits) // (N,V) fp32; a cast pass when logits are 16-bit
	g := rowGrain(V)
	// pass 1: mx (N) = max_j x
	mx := make([]float32, N)
	d.parallel(N, g, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			m := float32(math.Inf(-1))
			for _, v := range x[i*V : (i+1)*V] {
				if v > m {
					m = v
				}
			}
			mx[i] = m
		}
	})
	// pass 2: probs (N,V) = exp(x - mx)
	probs := make([]float32, N*V)
	d.parallel(N, g, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			for j, v := range x[i*V : (i+1)*V] {
				probs[i*V+j] = expNeg32(v - mx[i])
			}
		}
	})
	// pass 3: sum (N) = Σ_j probs
	sum := make([]float64, N)
	d.parallel(N, g, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			var s float64
			for _, p := range probs[i*V : (i+1)*V] {
				s += float64(p)
			}
			sum[i] = s
		}
	})
	// pass 4: probs /= sum
	d.parallel(N, g, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			inv := 1 / sum[i]
			r := probs[i*V : (i+1)*V]
			for j, p := range r {
				r[j] = float32(float64(p) * inv)
			}
		}
	})
	// pass 5: losses (N) = log(sum) - (x[target] - max), the NLL gather in
	// log-sum-exp form: never -log of a materialised probability, which
	// underflows to 0 (a loss of +inf) for a target far below the max.
	for i := range N {
		loss[i] = float32(math.Log(sum[i]) - float64(x[i*V+int(tg[i])]-mx[i]))
	}
	if dscale == 0 {
		return
	}
	// pass 6: logits (N,V) = (probs - onehot)·dscale
	d.parallel(N, g, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			r := probs[i*V : (i+1)*V]
			t := int(tg[i])
			pt := r[t]
			for j, p := range r {
				r[j] = p * dscale
			}
			r[t] = (pt - 1) * dscale
		}
		store(logits, lo*V, probs[lo*V:hi*V])
	})
}
