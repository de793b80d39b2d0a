package cpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// ntLayerNormRef is the float64 forward: per row, mean, biased variance,
// rstd = 1/sqrt(var + 1e-5), out = (x - mean)·rstd·w + b.
func ntLayerNormRef(x, w, b []float64, N, C int) (out, mean, rstd []float64) {
	out, mean, rstd = make([]float64, N*C), make([]float64, N), make([]float64, N)
	for i := range N {
		row := x[i*C : (i+1)*C]
		var m, v float64
		for _, a := range row {
			m += a
		}
		m /= float64(C)
		for _, a := range row {
			v += (a - m) * (a - m)
		}
		v /= float64(C)
		s := 1 / math.Sqrt(v+1e-5)
		for j, a := range row {
			out[i*C+j] = (a-m)*s*w[j] + b[j]
		}
		mean[i], rstd[i] = m, s
	}
	return out, mean, rstd
}

// TestLayerNormGradFD checks LayerNorm against the float64 loop and
// LayerNormBackward against central differences of L = Σ w·out with respect
// to inp, weight and bias.
func TestLayerNormGradFD(t *testing.T) {
	for _, f := range ntForms {
		for _, sz := range [][2]int{{3, 7}, {2, 1}, {5, 16}, {1, 33}} {
			N, C := sz[0], sz[1]
			t.Run(ntName(f.name, N, C), func(t *testing.T) {
				r := ntRNG(uint64(11*N + C))
				d := ntDev(f.fused, 2)
				inp, x64 := ntTensor(t, tensor.F32, ntNormal(r, N*C, 1.5, 0.3), N, C)
				weight, w64 := ntTensor(t, tensor.F32, ntNormal(r, C, 1, 1), C)
				bias, b64 := ntTensor(t, tensor.F32, ntNormal(r, C, 1, 0), C)
				out, mean, rstd := tensor.New(tensor.F32, N, C), tensor.New(tensor.F32, N), tensor.New(tensor.F32, N)
				ntPoison(out)
				ntPoison(mean)
				ntPoison(rstd)
				d.LayerNorm(out, mean, rstd, inp, weight, bias, N, C)
				ntSync(t, d)
				wantOut, wantMean, wantRstd := ntLayerNormRef(x64, w64, b64, N, C)
				ntClose(t, "out", ntF64(out), wantOut, tensor.F32, 1)
				ntClose(t, "mean", ntF64(mean), wantMean, tensor.F32, 1)
				ntClose(t, "rstd", ntF64(rstd), wantRstd, tensor.F32, 1)

				dout, lw := ntTensor(t, tensor.F32, ntNormal(r, N*C, 1, 0), N, C)
				dinp, dweight, dbias := tensor.New(tensor.F32, N, C), tensor.New(tensor.F32, C), tensor.New(tensor.F32, C)
				d.LayerNormBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C)
				ntSync(t, d)
				loss := func() float64 {
					o, _, _ := ntLayerNormRef(x64, w64, b64, N, C)
					return ntDot(lw, o)
				}
				// dinp is rstd·(dnorm - two row means), a difference of O(1)
				// terms computed in float32: a few float32 roundings of the
				// terms, scale 2. dweight/dbias are N-row sums: scale 2 too.
				ntClose(t, "dinp", ntF64(dinp), ntFD(x64, loss), tensor.F32, 2)
				ntClose(t, "dweight", ntF64(dweight), ntFD(w64, loss), tensor.F32, 2)
				ntClose(t, "dbias", ntF64(dbias), ntFD(b64, loss), tensor.F32, 2)
			})
		}
	}
}

// TestResidualLayerNormRef checks res = a + b and out = LayerNorm(res)
// against the float64 loops, and Add against a + b.
func TestResidualLayerNormRef(t *testing.T) {
	const N, C = 4, 9
	for _, f := range ntForms {
		r := ntRNG(5)
		d := ntDev(f.fused, 2)
		a, a64 := ntTensor(t, tensor.F32, ntNormal(r, N*C, 1, 0), N, C)
		b, b64 := ntTensor(t, tensor.F32, ntNormal(r, N*C, 1, 0.5), N, C)
		weight, w64 := ntTensor(t, tensor.F32, ntNormal(r, C, 1, 1), C)
		bias, bs64 := ntTensor(t, tensor.F32, ntNormal(r, C, 1, 0), C)
		res, out := tensor.New(tensor.F32, N, C), tensor.New(tensor.F32, N, C)
		mean, rstd := tensor.New(tensor.F32, N), tensor.New(tensor.F32, N)
		sum := tensor.New(tensor.F32, N, C)
		for _, p := range []*tensor.Tensor{res, out, mean, rstd, sum} {
			ntPoison(p)
		}
		d.ResidualLayerNorm(res, out, mean, rstd, a, b, weight, bias, N, C)
		d.Add(sum, a, b, N*C)
		ntSync(t, d)
		r64 := make([]float64, N*C)
		for i := range r64 {
			r64[i] = a64[i] + b64[i]
		}
		wantOut, wantMean, wantRstd := ntLayerNormRef(r64, w64, bs64, N, C)
		ntClose(t, f.name+" res", ntF64(res), r64, tensor.F32, 1)
		ntClose(t, f.name+" add", ntF64(sum), r64, tensor.F32, 1)
		ntClose(t, f.name+" out", ntF64(out), wantOut, tensor.F32, 1)
		ntClose(t, f.name+" mean", ntF64(mean), wantMean, tensor.F32, 1)
		ntClose(t, f.name+" rstd", ntF64(rstd), wantRstd, tensor.F32, 1)
	}
}

// ntLNCase holds one parity case's inputs, shared by both forms.
type ntLNCase struct {
	dt                     tensor.DType
	N, C                   int
	inp, b, w, bias, dout  *tensor.Tensor // inputs
	meanRef, rstdRef       *tensor.Tensor // saved statistics both backwards read
	priorX, priorW, priorB []float64      // prior gradients (the backward accumulates)
	out, mean, rstd        *tensor.Tensor // LayerNorm outputs
	res, rout              *tensor.Tensor // ResidualLayerNorm outputs
	rmean, rrstd           *tensor.Tensor // ResidualLayerNorm statistics
	sum                    *tensor.Tensor // Add output
	dinp, dw, db           *tensor.Tensor // LayerNormBackward outputs
}

// run runs every layernorm op of the case on device d, outputs poisoned.
func (c *ntLNCase) run(t *testing.T, d *Device) *ntLNCase {
	N, C, dt := c.N, c.C, c.dt
	o := *c
	o.out, o.res, o.rout, o.sum = tensor.New(dt, N, C), tensor.New(dt, N, C), tensor.New(dt, N, C), tensor.New(dt, N, C)
	o.mean, o.rstd, o.rmean, o.rrstd = tensor.New(tensor.F32, N), tensor.New(tensor.F32, N), tensor.New(tensor.F32, N), tensor.New(tensor.F32, N)
	for _, p := range []*tensor.Tensor{o.out, o.res, o.rout, o.sum, o.mean, o.rstd, o.rmean, o.rrstd} {
		ntPoison(p)
	}
	d.LayerNorm(o.out, o.mean, o.rstd, c.inp, c.w, c.bias, N, C)
	d.ResidualLayerNorm(o.res, o.rout, o.rmean, o.rrstd, c.inp, c.b, c.w, c.bias, N, C)
	d.Add(o.sum, c.inp, c.b, N*C)
	o.dinp, _ = ntTensor(t, dt, c.priorX, N, C)
	o.dw, _ = ntTensor(t, dt, c.priorW, C)
	o.db, _ = ntTensor(t, dt, c.priorB, C)
	// Both forms' backward read the same saved statistics.
	d.LayerNormBackward(o.dinp, o.dw, o.db, c.dout, c.inp, c.w, c.meanRef, c.rstdRef, N, C)
	ntSync(t, d)
	return &o
}

// TestLayerNormParity compares the fused and decomposed forms of LayerNorm,
// ResidualLayerNorm, Add and LayerNormBackward on several shapes and dtypes.
func TestLayerNormParity(t *testing.T) {
	for _, dt := range ntDTypes {
		for _, N := range ntRowCounts {
			for _, C := range ntWidths {
				t.Run(ntName(dt, N, C), func(t *testing.T) {
					r := ntRNG(uint64(31*N + C))
					c := &ntLNCase{dt: dt, N: N, C: C}
					c.inp, _ = ntTensor(t, dt, ntNormal(r, N*C, 2, 0.5), N, C)
					c.b, _ = ntTensor(t, dt, ntNormal(r, N*C, 1, 0), N, C)
					c.w, _ = ntTensor(t, dt, ntNormal(r, C, 0.5, 1), C)
					c.bias, _ = ntTensor(t, dt, ntNormal(r, C, 0.5, 0), C)
					c.dout, _ = ntTensor(t, dt, ntNormal(r, N*C, 1, 0), N, C)
					c.priorX, c.priorW, c.priorB = ntNormal(r, N*C, 1, 0), ntNormal(r, C, 1, 0), ntNormal(r, C, 1, 0)
					c.meanRef, c.rstdRef = tensor.New(tensor.F32, N), tensor.New(tensor.F32, N)
					ntDev(true, 1).LayerNorm(tensor.New(dt, N, C), c.meanRef, c.rstdRef, c.inp, c.w, c.bias, N, C)
					fu, de := c.run(t, ntDev(true, 2)), c.run(t, ntDev(false, 2))
					// Forward: the same float64 statistics and float32 steps;
					// outputs may differ by the last bit of rstd, then by one
					// rounding of dt: tolerance of dt as is.
					ntCloseT(t, "out", fu.out, de.out, dt, 1)
					ntCloseT(t, "mean", fu.mean, de.mean, tensor.F32, 1)
					ntCloseT(t, "rstd", fu.rstd, de.rstd, tensor.F32, 1)
					ntCloseT(t, "res", fu.res, de.res, dt, 1)
					ntCloseT(t, "res out", fu.rout, de.rout, dt, 1)
					ntCloseT(t, "res mean", fu.rmean, de.rmean, tensor.F32, 1)
					ntCloseT(t, "res rstd", fu.rrstd, de.rrstd, tensor.F32, 1)
					ntCloseT(t, "add", fu.sum, de.sum, dt, 1)
					if !ntSameBits(fu.res, fu.sum) {
						t.Errorf("fused ResidualLayerNorm's res differs in bits from Add")
					}
					// Backward: dinp is per row, the same arithmetic up to the
					// float64 rounding of the row means: scale 1. dweight and
					// dbias are N-row sums of O(1) terms in another grouping
					// (row blocks vs one sweep): scale 1 + N/16.
					ntCloseT(t, "dinp", fu.dinp, de.dinp, dt, 1)
					sc := 1 + float64(N)/16
					ntCloseT(t, "dweight", fu.dw, de.dw, dt, sc)
					ntCloseT(t, "dbias", fu.db, de.db, dt, sc)
				})
			}
		}
	}
}

// TestLayerNormBackwardAccumulates checks dinp, dweight, dbias += in both forms.
func TestLayerNormBackwardAccumulates(t *testing.T) {
	const N, C = 6, 10
	for _, f := range ntForms {
		r := ntRNG(9)
		d := ntDev(f.fused, 2)
		inp, _ := ntTensor(t, tensor.F32, ntNormal(r, N*C, 1, 0), N, C)
		w, _ := ntTensor(t, tensor.F32, ntNormal(r, C, 1, 1), C)
		bias, _ := ntTensor(t, tensor.F32, ntNormal(r, C, 1, 0), C)
		dout, _ := ntTensor(t, tensor.F32, ntNormal(r, N*C, 1, 0), N, C)
		out, mean, rstd := tensor.New(tensor.F32, N, C), tensor.New(tensor.F32, N), tensor.New(tensor.F32, N)
		d.LayerNorm(out, mean, rstd, inp, w, bias, N, C)
		grads := func(prior [3][]float64) [3]*tensor.Tensor {
			dx, _ := ntTensor(t, tensor.F32, prior[0], N, C)
			dw, _ := ntTensor(t, tensor.F32, prior[1], C)
			db, _ := ntTensor(t, tensor.F32, prior[2], C)
			d.LayerNormBackward(dx, dw, db, dout, inp, w, mean, rstd, N, C)
			ntSync(t, d)
			return [3]*tensor.Tensor{dx, dw, db}
		}
		prior := [3][]float64{ntNormal(r, N*C, 1, 0), ntNormal(r, C, 1, 0), ntNormal(r, C, 1, 0)}
		got := grads(prior)
		zero := grads([3][]float64{make([]float64, N*C), make([]float64, C), make([]float64, C)})
		for k, name := range []string{"dinp", "dweight", "dbias"} {
			want := ntF64(zero[k])
			for i := range want {
				want[i] += float64(float32(prior[k][i]))
			}
			ntClose(t, f.name+" "+name, ntF64(got[k]), want, tensor.F32, 1)
		}
	}
}

// BenchmarkLayerNormFused and BenchmarkLayerNormDecomposed time the forward
// at GPT-2 sizes (F32): 8·128 rows of 128 and 1024 rows of 768.
func BenchmarkLayerNormFused(b *testing.B)      { ntBenchLayerNorm(b, true) }
func BenchmarkLayerNormDecomposed(b *testing.B) { ntBenchLayerNorm(b, false) }

func ntBenchLayerNorm(b *testing.B, fused bool) {
	for _, sz := range [][2]int{{8 * 128, 128}, {1024, 768}} {
		N, C := sz[0], sz[1]
		b.Run(fmt.Sprintf("N%d_C%d", N, C), func(b *testing.B) {
			r := ntRNG(1)
			d := ntDev(fused, 0)
			inp, _ := ntTensor(b, tensor.F32, ntNormal(r, N*C, 1, 0), N, C)
			w, _ := ntTensor(b, tensor.F32, ntNormal(r, C, 1, 1), C)
			bias, _ := ntTensor(b, tensor.F32, ntNormal(r, C, 1, 0), C)
			out, mean, rstd := tensor.New(tensor.F32, N, C), tensor.New(tensor.F32, N), tensor.New(tensor.F32, N)
			b.SetBytes(int64(2 * N * C * 4)) // the minimum traffic: read inp, write out
			b.ResetTimer()
			for range b.N {
				d.LayerNorm(out, mean, rstd, inp, w, bias, N, C)
			}
			b.StopTimer()
			if err := d.Sync(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// TestLayerNormBackwardDeterministic checks that the fused backward's
// dweight/dbias (summed per fixed row block) have the same bits for any
// thread count.
func TestLayerNormBackwardDeterministic(t *testing.T) {
	const N, C = 200, 37
	r := ntRNG(10)
	inp, _ := ntTensor(t, tensor.F32, ntNormal(r, N*C, 1, 0), N, C)
	w, _ := ntTensor(t, tensor.F32, ntNormal(r, C, 1, 1), C)
	dout, _ := ntTensor(t, tensor.F32, ntNormal(r, N*C, 1, 0), N, C)
	mean, rstd := tensor.New(tensor.F32, N), tensor.New(tensor.F32, N)
	ntDev(true, 1).LayerNorm(tensor.New(tensor.F32, N, C), mean, rstd, inp, w, w, N, C)
	var first [3]*tensor.Tensor
	for run, threads := range []int{1, 2, 3} {
		got := [3]*tensor.Tensor{tensor.New(tensor.F32, N, C), tensor.New(tensor.F32, C), tensor.New(tensor.F32, C)}
		d := ntDev(true, threads)
		d.LayerNormBackward(got[0], got[1], got[2], dout, inp, w, mean, rstd, N, C)
		ntSync(t, d)
		if run == 0 {
			first = got
			continue
		}
		for k := range got {
			if !ntSameBits(got[k], first[k]) {
				t.Errorf("output %d with %d threads differs in bits from 1 thread", k, threads)
			}
		}
	}
}
