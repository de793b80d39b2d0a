package cpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// mtAttnRef is the float64 causal attention: out (B,T,C) and the
// probabilities att (B,NH,T,T), zero above the diagonal, from qkv (B,T,3C).
// With a 16-bit attDT the probabilities are rounded to it before att·v, as
// the device does.
func mtAttnRef(qkv []float64, B, T, C, NH int, attDT tensor.DType) (out, att []float64) {
	hs := C / NH
	scale := 1 / math.Sqrt(float64(hs))
	out, att = make([]float64, B*T*C), make([]float64, B*NH*T*T)
	for b := range B {
		for h := range NH {
			for t := range T {
				q := qkv[(b*T+t)*3*C+h*hs:]
				row := att[((b*NH+h)*T+t)*T : ((b*NH+h)*T+t+1)*T]
				m := math.Inf(-1)
				for t2 := 0; t2 <= t; t2++ {
					k := qkv[(b*T+t2)*3*C+C+h*hs:]
					var s float64
					for i := range hs {
						s += q[i] * k[i]
					}
					row[t2] = s * scale
					m = math.Max(m, row[t2])
				}
				var sum float64
				for t2 := 0; t2 <= t; t2++ {
					row[t2] = math.Exp(row[t2] - m)
					sum += row[t2]
				}
				for t2 := 0; t2 <= t; t2++ {
					row[t2] /= sum
				}
				copy(row, mtRound(attDT, row))
				o := out[(b*T+t)*C+h*hs : (b*T+t)*C+(h+1)*hs]
				for t2 := 0; t2 <= t; t2++ {
					v := qkv[(b*T+t2)*3*C+2*C+h*hs:]
					for i := range o {
						o[i] += row[t2] * v[i]
					}
				}
			}
		}
	}
	return out, att
}

// mtAttnTol is the scale of the F32 tolerance for attention results: dot
// products of hs terms and sums of up to T terms, rounding errors growing
// like the square root of their length.
func mtAttnTol(T, hs int) float64 { return math.Sqrt(float64(T + hs)) }

// TestAttentionBackwardFD checks AttentionBackward (both forms, from zero
// gradients) against central differences of a random linear loss of the
// float64 forward, and the float32 forward against the float64 one, below
// and above attnGemmMin (the loop and the blas paths).
func TestAttentionBackwardFD(t *testing.T) {
	for _, s := range [][4]int{{2, 5, 6, 2}, {1, 70, 6, 2}} {
		B, T, C, NH := s[0], s[1], s[2], s[3]
		t.Run(ntName(B, T, C, NH), func(t *testing.T) {
			r := ntRNG(uint64(T))
			x64 := ntNormal(r, B*T*3*C, 1, 0)
			wl := ntNormal(r, B*T*C, 1, 0) // dL/dout
			loss := func() float64 {
				out, _ := mtAttnRef(x64, B, T, C, NH, tensor.F32)
				return ntDot(wl, out)
			}
			fd := ntFD(x64, loss)
			wantOut, wantAtt := mtAttnRef(x64, B, T, C, NH, tensor.F32)
			sc := mtAttnTol(T, C/NH)
			for _, f := range ntForms {
				d := ntDev(f.fused, 2)
				qkv, _ := ntTensor(t, tensor.F32, x64, B, T, 3*C)
				dout, _ := ntTensor(t, tensor.F32, wl, B, T, C)
				out, att := tensor.New(tensor.F32, B, T, C), tensor.New(tensor.F32, B, NH, T, T)
				ntPoison(out)
				ntPoison(att)
				d.Attention(out, att, qkv, B, T, C, NH)
				dqkv := tensor.New(tensor.F32, B, T, 3*C)
				d.AttentionBackward(dqkv, dout, qkv, nil, att, B, T, C, NH)
				ntSync(t, d)
				ntClose(t, f.name+" out", ntF64(out), wantOut, tensor.F32, sc)
				ntClose(t, f.name+" att", ntF64(att), wantAtt, tensor.F32, sc)
				ntClose(t, f.name+" dqkv", ntF64(dqkv), fd, tensor.F32, sc)
			}
		})
	}
}

// mtAttnCase is one attention parity case.
type mtAttnCase struct {
	B, T, C, NH int
	dt, attDT   tensor.DType
	qkv, dout   *tensor.Tensor
	x           []float64      // qkv as the op sees it
	prior       []float64      // dqkv before backward
	att         *tensor.Tensor // probabilities both backwards read
}

// run runs forward (outputs poisoned) and backward (from c.prior, on the
// shared probabilities c.att, so both forms see the same values) on d.
func (c *mtAttnCase) run(t *testing.T, d *Device) (out, att, dqkv *tensor.Tensor) {
	t.Helper()
	B, T, C, NH := c.B, c.T, c.C, c.NH
	out, att = tensor.New(c.dt, B, T, C), tensor.New(c.attDT, B, NH, T, T)
	ntPoison(out)
	ntPoison(att)
	d.Attention(out, att, c.qkv, B, T, C, NH)
	dqkv, _ = ntTensor(t, c.dt, c.prior, B, T, 3*C)
	d.AttentionBackward(dqkv, c.dout, c.qkv, nil, c.att, B, T, C, NH)
	ntSync(t, d)
	return out, att, dqkv
}

// TestAttentionParity compares the fused and decomposed forms, forward and
// backward, and both forwards against the float64 reference, on odd shapes
// in every dtype (and F32 probabilities with 16-bit activations).
func TestAttentionParity(t *testing.T) {
	type dts struct{ act, att tensor.DType }
	dtypes := []dts{{tensor.F32, tensor.F32}, {tensor.BF16, tensor.BF16}, {tensor.F16, tensor.F16}, {tensor.BF16, tensor.F32}}
	for _, dd := range dtypes {
		for _, T := range []int{1, 17, 64, 70} {
			for _, NH := range []int{1, 3} {
				for _, hs := range []int{1, 8} {
					for _, B := range []int{1, 2} {
						C := NH * hs
						t.Run(ntName(dd.act, dd.att, B, T, C, NH), func(t *testing.T) {
							r := ntRNG(uint64(1000*T + 10*NH + hs + B))
							c := &mtAttnCase{B: B, T: T, C: C, NH: NH, dt: dd.act, attDT: dd.att}
							c.qkv, c.x = ntTensor(t, c.dt, ntNormal(r, B*T*3*C, 1, 0), B, T, 3*C)
							c.dout, _ = ntTensor(t, c.dt, ntNormal(r, B*T*C, 1, 0), B, T, C)
							c.prior = ntNormal(r, B*T*3*C, 1, 0)
							c.att = tensor.New(c.attDT, B, NH, T, T)
							ntDev(true, 1).Attention(tensor.New(c.dt, B, T, C), c.att, c.qkv, B, T, C, NH)
							wantOut, wantAtt := mtAttnRef(c.x, B, T, C, NH, c.attDT)
							res := map[bool][3]*tensor.Tensor{}
							for _, f := range ntForms {
								out, att, dqkv := c.run(t, ntDev(f.fused, 3))
								res[f.fused] = [3]*tensor.Tensor{out, att, dqkv}
								// 16-bit: the final rounding, and at most one flip of
								// a probability's rounding (scale 2).
								sc := mtAttnTol(T, hs)
								if c.dt != tensor.F32 {
									sc = 2
								}
								ntClose(t, f.name+" out", ntF64(out), wantOut, c.dt, sc)
								ntClose(t, f.name+" att", ntF64(att), wantAtt, c.attDT, sc)
							}
							fu, de := res[true], res[false]
							sc := mtAttnTol(T, hs)
							if c.dt != tensor.F32 {
								sc = 2
							}
							ntCloseT(t, "fused vs decomposed out", fu[0], de[0], c.dt, sc)
							ntCloseT(t, "fused vs decomposed att", fu[1], de[1], c.attDT, sc)
							ntCloseT(t, "fused vs decomposed dqkv", fu[2], de[2], c.dt, sc)
						})
					}
				}
			}
		}
	}
}

// TestAttentionBackwardAccumulates checks dqkv += (the prior kept) in both
// forms and dtypes: backward from a prior equals prior + backward from zero.
func TestAttentionBackwardAccumulates(t *testing.T) {
	const B, T, C, NH = 2, 65, 12, 3
	for _, dt := range ntDTypes {
		for _, f := range ntForms {
			r := ntRNG(5)
			d := ntDev(f.fused, 2)
			qkv, _ := ntTensor(t, dt, ntNormal(r, B*T*3*C, 1, 0), B, T, 3*C)
			dout, _ := ntTensor(t, dt, ntNormal(r, B*T*C, 1, 0), B, T, C)
			att := tensor.New(dt, B, NH, T, T)
			d.Attention(tensor.New(dt, B, T, C), att, qkv, B, T, C, NH)
			zero := tensor.New(tensor.F32, B, T, 3*C)
			d.AttentionBackward(zero, dout, qkv, nil, att, B, T, C, NH)
			prior := ntNormal(r, B*T*3*C, 1, 0)
			dqkv, p := ntTensor(t, dt, prior, B, T, 3*C)
			d.AttentionBackward(dqkv, dout, qkv, nil, att, B, T, C, NH)
			ntSync(t, d)
			want := ntF64(zero)
			for i := range want {
				want[i] += p[i]
			}
			ntClose(t, ntName(dt, f.name), ntF64(dqkv), want, dt, mtAttnTol(T, C/NH))
		}
	}
}

// BenchmarkAttention times forward + backward at the tiny preset's shape
// (B 8, NH 4, T 128, hs 32). GFLOP/s counts the dense products
// 12·B·NH·T²·hs (4 in forward, 8 in backward), as if nothing were skipped.
func BenchmarkAttention(b *testing.B) {
	defer func(p bool) { poisonScratch = p }(poisonScratch)
	poisonScratch = false // time the op, not the test poison
	const B, NH, T, hs = 8, 4, 128, 32
	const C = NH * hs
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
		for _, f := range ntForms {
			b.Run(fmt.Sprintf("%s/%s/B%d_NH%d_T%d_hs%d", dt, f.name, B, NH, T, hs), func(b *testing.B) {
				r := ntRNG(1)
				d := ntDev(f.fused, 0)
				qkv, _ := ntTensor(b, dt, ntNormal(r, B*T*3*C, 1, 0), B, T, 3*C)
				dout, _ := ntTensor(b, dt, ntNormal(r, B*T*C, 1, 0), B, T, C)
				out, att, dqkv := tensor.New(dt, B, T, C), tensor.New(dt, B, NH, T, T), tensor.New(dt, B, T, 3*C)
				for b.Loop() {
					d.Attention(out, att, qkv, B, T, C, NH)
					d.AttentionBackward(dqkv, dout, qkv, nil, att, B, T, C, NH)
				}
				if err := d.Sync(); err != nil {
					b.Fatal(err)
				}
				sec := b.Elapsed().Seconds() / float64(b.N)
				b.ReportMetric(sec*1e3, "ms")
				b.ReportMetric(12*float64(B*NH*T*T*hs)/sec/1e9, "GFLOP/s")
			})
		}
	}
}
