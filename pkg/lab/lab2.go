package lab

// Lab 2: layernorm forward and backward.

import (
	"math"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// LayerNormEps is the eps of layernorm's variance (as the reference).
const LayerNormEps = 1e-5

// LayerNormFunc normalises each row of inp and applies weight and bias,
// keeping mean and rstd = 1/sqrt(var + eps) for the backward pass.
// out (N,C), mean (N), rstd (N), inp (N,C), weight (C), bias (C)
type LayerNormFunc func(out, mean, rstd, inp, weight, bias []float32, N, C int)

// LayerNormBackwardFunc adds layernorm's gradients into dinp, dweight and
// dbias (zero when called). dinp (N,C), dweight (C), dbias (C),
// dout (N,C), inp (N,C), weight (C), mean (N), rstd (N)
type LayerNormBackwardFunc func(dinp, dweight, dbias, dout, inp, weight, mean, rstd []float32, N, C int)

// lnSizes are lab 2's (N, C): odd sizes, and C = 1 (variance 0) last.
var lnSizes = [][2]int{{3, 8}, {5, 33}, {7, 64}, {2, 1}}

type lnCase struct {
	N, C                    int
	inp, weight, bias, dout []float32
	out, mean, rstd         []float64 // the reference's forward
	dinp, dweight, dbias    []float64 // and backward
}

func newLNCase(N, C int, seed uint64) *lnCase {
	rng := tensor.NewRNG(seed)
	c := &lnCase{N: N, C: C, inp: randn(rng, N*C, 1.5, 0.5), weight: randn(rng, C, 0.5, 1), bias: randn(rng, C, 0.5, 0),
		dout: randn(rng, N*C, 1, 0)}
	d := ref()
	out, mean, rstd := tensor.New(tensor.F32, N, C), tensor.New(tensor.F32, N), tensor.New(tensor.F32, N)
	inp, w := mustF32(c.inp, N, C), mustF32(c.weight, C)
	d.LayerNorm(out, mean, rstd, inp, w, mustF32(c.bias, C), N, C)
	dinp, dw, db := tensor.New(tensor.F32, N, C), tensor.New(tensor.F32, C), tensor.New(tensor.F32, C)
	d.LayerNormBackward(dinp, dw, db, mustF32(c.dout, N, C), inp, w, mean, rstd, N, C)
	refSync()
	c.out, c.mean, c.rstd = f64(out.F32()), f64(mean.F32()), f64(rstd.F32())
	c.dinp, c.dweight, c.dbias = f64(dinp.F32()), f64(dw.F32()), f64(db.F32())
	return c
}

func lnCases(run func(c *lnCase) *Failure) []testCase {
	var cs []testCase
	for k, s := range lnSizes {
		cs = append(cs, testCase{what: sizes(device.Ops.LayerNorm.Sizes, s[0], s[1]),
			run: func() *Failure { return run(newLNCase(s[0], s[1], uint64(20+k))) }})
	}
	return cs
}

// LayerNorm is the exercise of fn: mean, rstd and out against the reference.
func LayerNorm(fn LayerNormFunc) Exercise {
	return Exercise{Name: "layernorm", cases: lnCases(func(c *lnCase) *Failure {
		N, C := c.N, c.C
		out, mean, rstd := make([]float32, N*C), make([]float32, N), make([]float32, N)
		fn(out, mean, rstd, append([]float32(nil), c.inp...), append([]float32(nil), c.weight...), append([]float32(nil), c.bias...), N, C)
		s := tol(&device.Ops.LayerNorm, N, C)
		f := compare("mean", mean, c.mean, []int{N}, s)
		if f == nil {
			f = compare("rstd", rstd, c.rstd, []int{N}, s)
		}
		if f == nil {
			f = compare("out", out, c.out, []int{N, C}, s)
		}
		if f != nil {
			got := append(append(append([]float32(nil), mean...), rstd...), out...)
			f.Hint = diagnose(got, lnModel(c, ""), 0, lnMistakes(c))
		}
		return f
	})}
}

// lnModel is layernorm in float64 with a mistake: "variance" (C-1), "eps"
// (outside the root), "affine" (no weight and bias), "rstd" (the deviation
// kept), "transposed" (columns of a (C,N) layout); it returns mean, rstd,
// out.
func lnModel(c *lnCase, mistake string) []float64 {
	N, C := c.N, c.C
	at := func(i, j int) int { return i*C + j }
	if mistake == "transposed" {
		at = func(i, j int) int { return j*N + i }
	}
	mean, rstd, out := make([]float64, N), make([]float64, N), make([]float64, N*C)
	for i := range N {
		m, v := 0.0, 0.0
		for j := range C {
			m += float64(c.inp[at(i, j)])
		}
		m /= float64(C)
		for j := range C {
			d := float64(c.inp[at(i, j)]) - m
			v += d * d
		}
		div := float64(C)
		if mistake == "variance" {
			div = float64(C - 1)
		}
		v /= div
		r := 1 / math.Sqrt(v+LayerNormEps)
		if mistake == "eps" {
			r = 1 / (math.Sqrt(v) + LayerNormEps)
		}
		mean[i], rstd[i] = m, r
		if mistake == "rstd" {
			rstd[i] = 1 / r
		}
		for j := range C {
			n := (float64(c.inp[at(i, j)]) - m) * r
			if mistake != "affine" {
				n = n*float64(c.weight[j]) + float64(c.bias[j])
			}
			out[at(i, j)] = n
		}
	}
	return append(append(mean, rstd...), out...)
}

func lnMistakes(c *lnCase) []mistake {
	var ms []mistake
	for _, h := range []string{"variance", "eps", "affine", "rstd", "transposed"} {
		ms = append(ms, mistake{h, func() []float64 { return lnModel(c, h) }})
	}
	return ms
}

// LayerNormBackward is the exercise of fn: dinp, dweight and dbias against
// the reference, then against finite differences of Σ out·dout.
func LayerNormBackward(fn LayerNormBackwardFunc) Exercise {
	call := func(c *lnCase) (dinp, dw, db []float32) {
		N, C := c.N, c.C
		dinp, dw, db = make([]float32, N*C), make([]float32, C), make([]float32, C)
		fn(dinp, dw, db, append([]float32(nil), c.dout...), append([]float32(nil), c.inp...), append([]float32(nil), c.weight...),
			toF32(c.mean), toF32(c.rstd), N, C)
		return dinp, dw, db
	}
	ex := Exercise{Name: "layernorm-backward", cases: lnCases(func(c *lnCase) *Failure {
		N, C := c.N, c.C
		dinp, dw, db := call(c)
		s := tol(&device.Ops.LayerNormBackward, N, C) * math.Sqrt(float64(N))
		f := compare("dbias", db, c.dbias, []int{C}, s)
		if f == nil {
			f = compare("dweight", dw, c.dweight, []int{C}, s)
		}
		if f == nil {
			// rstd at C = 1 is 1/sqrt(eps): the row's terms cancel, leaving
			// fp32 rounding times 316 (the contract's lnBwdFloor).
			f = compare("dinp", dinp, c.dinp, []int{N, C}, s*max(1, c.rstd[0]/10))
		}
		if f != nil {
			got := append(append(append([]float32(nil), db...), dw...), dinp...)
			f.Hint = diagnose(got, append(append(append([]float64(nil), c.dbias...), c.dweight...), c.dinp...), 0, lnBwdMistakes(c))
		}
		return f
	})}
	ex.cases = append(ex.cases, testCase{what: label{format: "the gradient against finite differences"}, run: func() *Failure {
		c := newLNCase(3, 6, 31)
		dinp, _, _ := call(c)
		loss := func(x []float64) float64 {
			s := 0.0
			for i := range c.N {
				row := x[i*c.C : (i+1)*c.C]
				m, v := 0.0, 0.0
				for _, a := range row {
					m += a
				}
				m /= float64(c.C)
				for _, a := range row {
					v += (a - m) * (a - m)
				}
				r := 1 / math.Sqrt(v/float64(c.C)+LayerNormEps)
				for j, a := range row {
					s += ((a-m)*r*float64(c.weight[j]) + float64(c.bias[j])) * float64(c.dout[i*c.C+j])
				}
			}
			return s
		}
		return finiteDiff("dinp", dinp, f64(c.inp), loss, 9)
	}})
	return ex
}

// lnBwdModel is layernorm's backward in float64 with a mistake: "rowsum"
// (dweight and dbias of the last row only), "dweight" (dweight summing
// dout alone), "dinp" (dinp = dout·weight·rstd, or missing the last term);
// it returns dbias, dweight, dinp.
func lnBwdModel(c *lnCase, mistake string, variant int) []float64 {
	N, C := c.N, c.C
	db, dw, dinp := make([]float64, C), make([]float64, C), make([]float64, N*C)
	for i := range N {
		m, r := c.mean[i], c.rstd[i]
		a, b := 0.0, 0.0 // mean(dnorm), mean(dnorm·norm)
		for j := range C {
			dn := float64(c.dout[i*C+j]) * float64(c.weight[j])
			nm := (float64(c.inp[i*C+j]) - m) * r
			a += dn
			b += dn * nm
		}
		a /= float64(C)
		b /= float64(C)
		for j := range C {
			g, nm := float64(c.dout[i*C+j]), (float64(c.inp[i*C+j])-m)*r
			if mistake == "rowsum" && i < N-1 {
				g = 0
			}
			db[j] += g
			if mistake == "dweight" {
				dw[j] += g
			} else {
				dw[j] += g * nm
			}
			dn := float64(c.dout[i*C+j]) * float64(c.weight[j])
			switch {
			case mistake == "dinp" && variant == 0:
				dinp[i*C+j] = dn * r
			case mistake == "dinp":
				dinp[i*C+j] = (dn - a) * r
			default:
				dinp[i*C+j] = (dn - a - nm*b) * r
			}
		}
	}
	return append(append(db, dw...), dinp...)
}

func lnBwdMistakes(c *lnCase) []mistake {
	return []mistake{
		{"rowsum", func() []float64 { return lnBwdModel(c, "rowsum", 0) }},
		{"dweight", func() []float64 { return lnBwdModel(c, "dweight", 0) }},
		{"dinp", func() []float64 { return lnBwdModel(c, "dinp", 0) }},
		{"dinp", func() []float64 { return lnBwdModel(c, "dinp", 1) }},
	}
}

func toF32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}
