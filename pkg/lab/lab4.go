package lab

// Lab 4: causal self-attention, forward and backward.

import (
	"math"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// AttentionFunc is causal multi-head self-attention over a packed qkv, as
// druto's Attention: head h of q, k and v is columns [h·hs, (h+1)·hs) of
// the first, second and third C columns of qkv (hs = C/NH); row t of each
// head attends to positions t2 <= t with softmax(q·k/√hs); att keeps the
// probabilities (0 above the diagonal). out and att are zero when called.
// out (B,T,C), att (B,NH,T,T), qkv (B,T,3C)
type AttentionFunc func(out, att, qkv []float32, B, T, C, NH int)

// AttentionBackwardFunc adds attention's gradient into dqkv (zero when
// called), from the probabilities att Attention saved.
// dqkv (B,T,3C), dout (B,T,C), qkv (B,T,3C), att (B,NH,T,T)
type AttentionBackwardFunc func(dqkv, dout, qkv, att []float32, B, T, C, NH int)

// attnSizes are lab 4's (B, T, C, NH): several heads first (a scale by
// √C is then not √hs), an odd head size, one head, and T = 1 last.
var attnSizes = [][4]int{{2, 5, 8, 2}, {1, 7, 15, 3}, {3, 4, 6, 1}, {1, 1, 4, 2}}

// attnLarge is the (B, T, C, NH) of the large-scores case: hs = 4, so
// that the scale 1/2 and the dyadic q·k are exact in any order.
var attnLarge = [4]int{1, 6, 8, 2}

type attnCase struct {
	B, T, C, NH int
	large       bool
	qkv, dout   []float32
	out, att    []float64 // the reference's forward
	dqkv        []float64 // and backward
}

// newAttnCase draws qkv (standard normal; with large, q and k near 30 in
// steps of 1/8, for scores near 1800 that overflow exp) and dout, and runs
// the reference.
func newAttnCase(s [4]int, large bool, seed uint64) *attnCase {
	B, T, C, NH := s[0], s[1], s[2], s[3]
	rng := tensor.NewRNG(seed)
	c := &attnCase{B: B, T: T, C: C, NH: NH, large: large, qkv: randn(rng, B*T*3*C, 1, 0), dout: randn(rng, B*T*C, 1, 0)}
	if large {
		for i := range c.qkv {
			if i%(3*C) < 2*C {
				c.qkv[i] = 30 + float32(rng.Intn(9)-4)/8
			}
		}
	}
	d := ref()
	out, qkv := tensor.New(tensor.F32, B, T, C), mustF32(c.qkv, B, T, 3*C)
	st := d.AttentionState(tensor.F32, B, T, C, NH)
	att := tensor.New(st.DType, st.Shape...)
	d.Attention(out, att, qkv, B, T, C, NH)
	dqkv := tensor.New(tensor.F32, B, T, 3*C)
	d.AttentionBackward(dqkv, mustF32(c.dout, B, T, C), qkv, out, att, B, T, C, NH)
	refSync()
	c.out, c.att, c.dqkv = f64(out.F32()), f64(att.F32()), f64(dqkv.F32())
	return c
}

func attnCases(large bool, run func(c *attnCase) *Failure) []testCase {
	var cs []testCase
	for k, s := range attnSizes {
		cs = append(cs, testCase{what: sizes(device.Ops.Attention.Sizes, s[0], s[1], s[2], s[3]),
			run: func() *Failure { return run(newAttnCase(s, false, uint64(60+k))) }})
	}
	if large {
		cs = append(cs, testCase{what: label{format: "large scores (about 1800)"},
			run: func() *Failure { return run(newAttnCase(attnLarge, true, 69)) }})
	}
	return cs
}

// Attention is the exercise of fn: att and out against the reference's
// Attention, on the contract's sizes and on scores large enough to
// overflow exp.
func Attention(fn AttentionFunc) Exercise {
	return Exercise{Name: "attention", cases: attnCases(true, func(c *attnCase) *Failure {
		B, T, C, NH := c.B, c.T, c.C, c.NH
		out, att := make([]float32, B*T*C), make([]float32, B*NH*T*T)
		fn(out, att, append([]float32(nil), c.qkv...), B, T, C, NH)
		s := tol(&device.Ops.Attention, B, T, C, NH)
		f := aboveDiagonal(att, B, NH, T, s)
		unmasked := f != nil
		if f == nil {
			f = compare("att", att, c.att, []int{B, NH, T, T}, s)
		}
		if f == nil {
			f = compare("out", out, c.out, []int{B, T, C}, s)
		}
		if f != nil {
			offset := 0.0
			if c.large {
				offset = 1
			}
			got := append(append([]float32(nil), att...), out...)
			f.Hint = diagnose(got, append(append([]float64(nil), c.att...), c.out...), offset, attnMistakes(c))
			if f.Hint == "" && unmasked {
				f.Hint = "nomask"
			}
		}
		return f
	})}
}

// aboveDiagonal is the first probability of a masked position, att[b,h,t,t2]
// with t2 > t, that is not 0 (a position attending to a later one) beyond
// compare's tolerance at 0 under scale, nil when there is none.
func aboveDiagonal(att []float32, B, NH, T int, scale float64) *Failure {
	atol, _ := tensor.Tolerance(tensor.F32)
	for bht := range B * NH * T {
		t := bht % T
		for t2 := t + 1; t2 < T; t2++ {
			if g := float64(att[bht*T+t2]); math.Abs(g) > scale*atol {
				return &Failure{Output: "att", Index: index(bht*T+t2, []int{B, NH, T, T}), Got: g, Err: math.Abs(g), Tol: scale * atol}
			}
		}
	}
	return nil
}

// attnModel is attention in float64 with a mistake: "nomask", "maskoff"
// (variant 0 one later position let in, 1 the position itself left out),
// "scale" (variant 0 none, 1 by 1/hs), "headsize" (by 1/√C), "layout" (q,
// k, v of a head side by side, (B,T,NH,3,hs)), "outlayout" (out written
// (B,NH,T,hs)); it returns att then out.
func attnModel(c *attnCase, mistake string, variant int) []float64 {
	B, T, C, NH := c.B, c.T, c.C, c.NH
	hs := C / NH
	scale := 1 / math.Sqrt(float64(hs))
	switch {
	case mistake == "scale" && variant == 0:
		scale = 1
	case mistake == "scale":
		scale = 1 / float64(hs)
	case mistake == "headsize":
		scale = 1 / math.Sqrt(float64(C))
	}
	at := func(b, t, part, h, i int) float64 {
		if mistake == "layout" {
			return float64(c.qkv[(b*T+t)*3*C+(3*h+part)*hs+i])
		}
		return float64(c.qkv[(b*T+t)*3*C+part*C+h*hs+i])
	}
	att, out := make([]float64, B*NH*T*T), make([]float64, B*T*C)
	for b := range B {
		for h := range NH {
			for t := range T {
				lo, hi := 0, t // the keys row t attends to
				switch {
				case mistake == "nomask":
					hi = T - 1
				case mistake == "maskoff" && variant == 0:
					hi = min(t+1, T-1)
				case mistake == "maskoff":
					hi = t - 1
				}
				row := att[((b*NH+h)*T+t)*T:][:T]
				mx := math.Inf(-1)
				for t2 := lo; t2 <= hi; t2++ {
					s := 0.0
					for i := range hs {
						s += at(b, t, 0, h, i) * at(b, t2, 1, h, i)
					}
					row[t2] = s * scale
					mx = max(mx, row[t2])
				}
				sum := 0.0
				for t2 := lo; t2 <= hi; t2++ {
					row[t2] = math.Exp(row[t2] - mx)
					sum += row[t2]
				}
				o := out[(b*T+t)*C+h*hs:]
				if mistake == "outlayout" {
					o = out[((b*NH+h)*T+t)*hs:]
				}
				for t2 := lo; t2 <= hi; t2++ {
					row[t2] /= sum
					for i := range hs {
						o[i] += row[t2] * at(b, t2, 2, h, i)
					}
				}
			}
		}
	}
	return append(att, out...)
}

func attnMistakes(c *attnCase) []mistake {
	var ms []mistake
	for _, m := range []struct {
		hint     string
		variants int
	}{{"nomask", 1}, {"maskoff", 2}, {"scale", 2}, {"headsize", 1}, {"layout", 1}, {"outlayout", 1}} {
		for v := range m.variants {
			ms = append(ms, mistake{m.hint, func() []float64 { return attnModel(c, m.hint, v) }})
		}
	}
	return ms
}

// AttentionBackward is the exercise of fn: dv, dk and dq against the
// reference's AttentionBackward (given the reference's att), then dqkv
// against finite differences of Σ out·dout.
func AttentionBackward(fn AttentionBackwardFunc) Exercise {
	call := func(c *attnCase) []float32 {
		dqkv := make([]float32, c.B*c.T*3*c.C)
		fn(dqkv, append([]float32(nil), c.dout...), append([]float32(nil), c.qkv...), toF32(c.att), c.B, c.T, c.C, c.NH)
		return dqkv
	}
	ex := Exercise{Name: "attention-backward", cases: attnCases(false, func(c *attnCase) *Failure {
		B, T, C, NH := c.B, c.T, c.C, c.NH
		dqkv := call(c)
		s := tol(&device.Ops.AttentionBackward, B, T, C, NH)
		// dqkv sums terms that cancel (the contract's RelNorm): each
		// element's absolute tolerance is at the scale of the whole.
		abs := max(1, rms(c.dqkv))
		var f *Failure
		for _, part := range []struct {
			name string
			k    int
		}{{"dv", 2}, {"dk", 1}, {"dq", 0}} {
			if f = compareAbs(part.name, qkvPart(dqkv, part.k, C), qkvPart(c.dqkv, part.k, C), []int{B, T, C}, s, abs); f != nil {
				break
			}
		}
		if f != nil {
			f.Hint = diagnose(dqkv, c.dqkv, 0, attnBwdMistakes(c))
		}
		return f
	})}
	ex.cases = append(ex.cases, testCase{what: label{format: "the gradient against finite differences"}, run: func() *Failure {
		c := newAttnCase([4]int{1, 4, 6, 2}, false, 71)
		dqkv := call(c)
		loss := func(x []float64) float64 {
			s := 0.0
			for i, o := range attnForward64(x, c.B, c.T, c.C, c.NH) {
				s += o * float64(c.dout[i])
			}
			return s
		}
		return finiteDiff("dqkv", dqkv, f64(c.qkv), loss, 12)
	}})
	return ex
}

// qkvPart is part k (0 q, 1 k, 2 v) of v (B,T,3C), as (B,T,C).
func qkvPart[E float32 | float64](v []E, k, C int) []E {
	out := make([]E, 0, len(v)/3)
	for r := 0; r < len(v); r += 3 * C {
		out = append(out, v[r+k*C:r+(k+1)*C]...)
	}
	return out
}

// attnForward64 is attention's out (B,T,C) in float64 from qkv (B,T,3C).
func attnForward64(qkv []float64, B, T, C, NH int) []float64 {
	hs := C / NH
	scale := 1 / math.Sqrt(float64(hs))
	out := make([]float64, B*T*C)
	for b := range B {
		for h := range NH {
			for t := range T {
				p := make([]float64, t+1)
				for t2 := range t + 1 {
					for i := range hs {
						p[t2] += qkv[(b*T+t)*3*C+h*hs+i] * qkv[(b*T+t2)*3*C+C+h*hs+i]
					}
					p[t2] *= scale
				}
				_, p = ceRow(p, 0)
				for t2, w := range p {
					for i := range hs {
						out[(b*T+t)*C+h*hs+i] += w * qkv[(b*T+t2)*3*C+2*C+h*hs+i]
					}
				}
			}
		}
	}
	return out
}

// attnBwdModel is attention's backward in float64 from the reference's
// probabilities with a mistake: "softmaxbwd" (ds = p·dp, without the
// row's Σ p·dp), "bwdscale" (dq and dk not scaled by 1/√hs), "accumulate"
// (every gradient overwritten, not added), "dk" (dk left out); it returns
// dqkv (B,T,3C).
func attnBwdModel(c *attnCase, mistake string) []float64 {
	B, T, C, NH := c.B, c.T, c.C, c.NH
	hs := C / NH
	scale := 1 / math.Sqrt(float64(hs))
	if mistake == "bwdscale" {
		scale = 1
	}
	x := func(b, t, part, h int) int { return (b*T+t)*3*C + part*C + h*hs }
	dqkv := make([]float64, B*T*3*C)
	// add adds a·src[off:off+hs] into dqkv at dst (stores it, for
	// "accumulate": the last writer in the loops' order wins).
	add := func(dst int, a float64, src []float64, off int) {
		for i := range hs {
			if mistake == "accumulate" {
				dqkv[dst+i] = 0
			}
			dqkv[dst+i] += a * src[off+i]
		}
	}
	qkv, dout := f64(c.qkv), f64(c.dout)
	for b := range B {
		for h := range NH {
			for t := range T {
				p, g := c.att[((b*NH+h)*T+t)*T:][:t+1], (b*T+t)*C+h*hs
				ds, sum := make([]float64, t+1), 0.0
				for t2 := range t + 1 {
					for i := range hs {
						ds[t2] += dout[g+i] * qkv[x(b, t2, 2, h)+i]
					}
					add(x(b, t2, 2, h), p[t2], dout, g)
					sum += p[t2] * ds[t2]
				}
				for t2 := range t + 1 {
					if mistake != "softmaxbwd" {
						ds[t2] -= sum
					}
					ds[t2] *= p[t2] * scale
				}
				for t2 := range t + 1 {
					add(x(b, t, 0, h), ds[t2], qkv, x(b, t2, 1, h))
					if mistake != "dk" {
						add(x(b, t2, 1, h), ds[t2], qkv, x(b, t, 0, h))
					}
				}
			}
		}
	}
	return dqkv
}

func attnBwdMistakes(c *attnCase) []mistake {
	var ms []mistake
	for _, h := range []string{"softmaxbwd", "bwdscale", "accumulate", "dk"} {
		ms = append(ms, mistake{h, func() []float64 { return attnBwdModel(c, h) }})
	}
	return ms
}

// rms is the root mean square of v.
func rms(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s / float64(max(1, len(v))))
}
