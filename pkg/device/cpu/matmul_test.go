package cpu

import (
	"context"
	"fmt"
	"math"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/druto/druto/internal/cputime"
	"github.com/druto/druto/internal/testreq"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/blas"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/tensor"
)

// init poisons the pooled scratch of matmul and attention for every test of
// the package: a read of scratch before it is written then shows as NaN.
func init() { poisonScratch = true }

// mtRound rounds float64 values to dt through float32, as the device
// stores them; for F32 it returns v as is, keeping the reference exact.
func mtRound(dt tensor.DType, v []float64) []float64 {
	if dt == tensor.F32 {
		return v
	}
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(tensor.Round(dt, float32(x)))
	}
	return out
}

// mtMatmulRef is the float64 linear layer: pre = x·wᵀ + b, out = pre or
// gelu(pre). With round set it rounds where the form under test rounds
// into a 16-bit tensor: the fused form once at the end (pre and out), the
// decomposed form after the GEMM, after the bias and after GELU.
// x (N,C), w (OC,C), b (OC) or nil
func mtMatmulRef(x, w, b []float64, N, C, OC int, gelu bool, dt tensor.DType, fused bool) (out, pre []float64) {
	pre = make([]float64, N*OC)
	for i := range N {
		for o := range OC {
			var s float64
			for c := range C {
				s += x[i*C+c] * w[o*C+c]
			}
			pre[i*OC+o] = s
		}
	}
	if !fused {
		pre = mtRound(dt, pre)
	}
	if b != nil {
		for i := range N {
			for o := range OC {
				pre[i*OC+o] += b[o]
			}
		}
	}
	out = pre
	if gelu {
		g := pre
		if !fused {
			g = mtRound(dt, pre)
		}
		out = ntGELURef(g)
	}
	return mtRound(dt, out), mtRound(dt, pre)
}

// mtMatmulCase is one Matmul forward case; ref* are float64 inputs as the
// op sees them (rounded to dt).
type mtMatmulCase struct {
	N, C, OC  int
	dt        tensor.DType
	gelu      bool
	inp, w, b *tensor.Tensor // b may be nil
	x, wr, br []float64
}

func mtNewMatmulCase(t *testing.T, seed uint64, dt tensor.DType, N, C, OC int, gelu, bias bool) *mtMatmulCase {
	r := ntRNG(seed)
	c := &mtMatmulCase{N: N, C: C, OC: OC, dt: dt, gelu: gelu}
	c.inp, c.x = ntTensor(t, dt, ntNormal(r, N*C, 1, 0), N, C)
	c.w, c.wr = ntTensor(t, dt, ntNormal(r, OC*C, 1/math.Sqrt(float64(C)), 0), OC, C)
	if bias {
		c.b, c.br = ntTensor(t, dt, ntNormal(r, OC, 0.5, 0), OC)
	}
	return c
}

// run runs Matmul on d with poisoned outputs and returns out and pre (nil
// without GELU).
func (c *mtMatmulCase) run(t *testing.T, d *Device) (out, pre *tensor.Tensor) {
	t.Helper()
	out = tensor.New(c.dt, c.N, c.OC)
	ntPoison(out)
	act := device.None
	if c.gelu {
		act = device.GELU
		pre = tensor.New(c.dt, c.N, c.OC)
		ntPoison(pre)
	}
	d.Matmul(out, pre, c.inp, c.w, c.b, c.N, c.C, c.OC, act)
	ntSync(t, d)
	return out, pre
}

// TestMatmulForward checks both forms against the float64 layer and against
// each other on odd shapes, with and without bias and GELU, in every dtype.
func TestMatmulForward(t *testing.T) {
	for _, dt := range ntDTypes {
		for _, N := range []int{1, 17, 64} {
			for _, C := range []int{1, 7, 96} {
				for _, OC := range []int{1, 5, 384} {
					for _, gelu := range []bool{false, true} {
						for _, bias := range []bool{false, true} {
							name := ntName(dt, N, C, OC, map[bool]string{false: "none", true: "gelu"}[gelu], map[bool]string{false: "nobias", true: "bias"}[bias])
							t.Run(name, func(t *testing.T) {
								c := mtNewMatmulCase(t, uint64(N*1000+C*10+OC), dt, N, C, OC, gelu, bias)
								// fp32 accumulation of C terms: error ~ sqrt(C) roundings;
								// in 16-bit the final rounding dominates (scale 1).
								sc := math.Sqrt(float64(C))
								if dt != tensor.F32 {
									sc = 1
								}
								outs := map[bool][2]*tensor.Tensor{}
								for _, f := range ntForms {
									out, pre := c.run(t, ntDev(f.fused, 2))
									outs[f.fused] = [2]*tensor.Tensor{out, pre}
									wantOut, wantPre := mtMatmulRef(c.x, c.wr, c.br, N, C, OC, gelu, dt, f.fused)
									ntClose(t, f.name+" out", ntF64(out), wantOut, dt, sc)
									if gelu {
										ntClose(t, f.name+" pre", ntF64(pre), wantPre, dt, sc)
									}
								}
								// Fused vs decomposed: in F32 the same GEMM, bias and
								// GELU steps, so the same values; in 16-bit the decomposed
								// form rounds up to three times, the fused form once.
								sc = 1
								if dt != tensor.F32 {
									sc = 3
								}
								ntCloseT(t, "fused vs decomposed out", outs[true][0], outs[false][0], dt, sc)
								if gelu {
									ntCloseT(t, "fused vs decomposed pre", outs[true][1], outs[false][1], dt, sc)
								}
							})
						}
					}
				}
			}
		}
	}
}

// mtMatmulBackRef returns the float64 gradients of L = Σ dout ⊙ (x·wᵀ + b).
func mtMatmulBackRef(dout, x, w []float64, N, C, OC int) (dx, dw, db []float64) {
	dx, dw, db = make([]float64, N*C), make([]float64, OC*C), make([]float64, OC)
	for i := range N {
		for o := range OC {
			g := dout[i*OC+o]
			db[o] += g
			for c := range C {
				dx[i*C+c] += g * w[o*C+c]
				dw[o*C+c] += g * x[i*C+c]
			}
		}
	}
	return dx, dw, db
}

// TestMatmulBackwardFD checks MatmulBackward (from zero gradients) against
// central differences of a random linear loss of the float64 forward, and the
// float32 forward against the float64 one.
func TestMatmulBackwardFD(t *testing.T) {
	const N, C, OC = 5, 7, 3
	r := ntRNG(42)
	x64, w64, b64 := ntNormal(r, N*C, 1, 0), ntNormal(r, OC*C, 1, 0), ntNormal(r, OC, 1, 0)
	wl := ntNormal(r, N*OC, 1, 0) // the loss weights, = dL/dout
	loss := func() float64 {
		out, _ := mtMatmulRef(x64, w64, b64, N, C, OC, false, tensor.F32, true)
		return ntDot(wl, out)
	}
	fdX, fdW, fdB := ntFD(x64, loss), ntFD(w64, loss), ntFD(b64, loss)
	for _, f := range ntForms {
		d := ntDev(f.fused, 2)
		inp, _ := ntTensor(t, tensor.F32, x64, N, C)
		w, _ := ntTensor(t, tensor.F32, w64, OC, C)
		b, _ := ntTensor(t, tensor.F32, b64, OC)
		dout, _ := ntTensor(t, tensor.F32, wl, N, OC)
		out := tensor.New(tensor.F32, N, OC)
		ntPoison(out)
		d.Matmul(out, nil, inp, w, b, N, C, OC, device.None)
		want, _ := mtMatmulRef(x64, w64, b64, N, C, OC, false, tensor.F32, true)
		ntClose(t, f.name+" forward", ntF64(out), want, tensor.F32, math.Sqrt(C))
		dinp, dw, db := tensor.New(tensor.F32, N, C), tensor.New(tensor.F32, OC, C), tensor.New(tensor.F32, OC)
		d.MatmulBackward(dinp, dw, db, dout, inp, w, N, C, OC)
		ntSync(t, d)
		ntClose(t, f.name+" dinp", ntF64(dinp), fdX, tensor.F32, math.Sqrt(OC))
		ntClose(t, f.name+" dweight", ntF64(dw), fdW, tensor.F32, math.Sqrt(N))
		ntClose(t, f.name+" dbias", ntF64(db), fdB, tensor.F32, math.Sqrt(N))
	}
}

// TestMatmulBackwardAccumulates checks dinp, dweight, dbias += (prior values
// kept) on odd shapes and every dtype, with dinp and dbias optional, against
// the float64 gradients; dbias must not depend on the thread count.
func TestMatmulBackwardAccumulates(t *testing.T) {
	for _, dt := range ntDTypes {
		for _, s := range [][3]int{{1, 1, 1}, {17, 7, 5}, {64, 96, 384}, {33, 65, 17}} {
			N, C, OC := s[0], s[1], s[2]
			t.Run(ntName(dt, N, C, OC), func(t *testing.T) {
				r := ntRNG(uint64(N + C + OC))
				inp, x := ntTensor(t, dt, ntNormal(r, N*C, 1, 0), N, C)
				w, wr := ntTensor(t, dt, ntNormal(r, OC*C, 1, 0), OC, C)
				dout, g := ntTensor(t, dt, ntNormal(r, N*OC, 1, 0), N, OC)
				priorX, priorW, priorB := ntNormal(r, N*C, 1, 0), ntNormal(r, OC*C, 1, 0), ntNormal(r, OC, 1, 0)
				dx, dw, db := mtMatmulBackRef(g, x, wr, N, C, OC)
				var dbBits *tensor.Tensor
				for _, threads := range []int{1, 2, 3} {
					dinp, px := ntTensor(t, dt, priorX, N, C)
					dweight, pw := ntTensor(t, dt, priorW, OC, C)
					dbias, pb := ntTensor(t, dt, priorB, OC)
					d := ntDev(true, threads)
					d.MatmulBackward(dinp, dweight, dbias, dout, inp, w, N, C, OC)
					// and with the optional gradients absent
					d.MatmulBackward(nil, dweight, nil, dout, inp, w, N, C, OC)
					ntSync(t, d)
					add := func(a, b []float64, k float64) []float64 {
						o := make([]float64, len(a))
						for i := range a {
							o[i] = a[i] + k*b[i]
						}
						return o
					}
					// one rounding of a sum of K fp32 terms into dt; in 16-bit the
					// second accumulation of dweight rounds once more.
					sc := func(K int) float64 {
						if dt == tensor.F32 {
							return math.Sqrt(float64(K))
						}
						return 2
					}
					ntClose(t, fmt.Sprint("dinp threads ", threads), ntF64(dinp), add(px, dx, 1), dt, sc(OC))
					ntClose(t, fmt.Sprint("dweight threads ", threads), ntF64(dweight), add(pw, dw, 2), dt, sc(N))
					ntClose(t, fmt.Sprint("dbias threads ", threads), ntF64(dbias), add(pb, db, 1), dt, sc(N))
					if dbBits == nil {
						dbBits = dbias
					} else if !ntSameBits(dbBits, dbias) {
						t.Errorf("dbias bits differ between 1 and %d threads", threads)
					}
				}
			})
		}
	}
}

// TestMatmulName checks that the device names the GEMM library.
func TestMatmulName(t *testing.T) {
	name := ntDev(true, 2).Name()
	t.Log(name)
	if name != fmt.Sprintf("cpu (2 threads, %s)", gemmName()) || gemmName() == "" {
		t.Errorf("Name() = %q", name)
	}
}

// tinyLinears are the tiny preset's linear layers, as the benchmarks time
// them.
var tinyLinears = []struct {
	name  string
	C, OC int
	act   device.Activation
}{{"qkv", 128, 384, device.None}, {"attproj", 128, 128, device.None}, {"fc_gelu", 128, 512, device.GELU}, {"proj", 512, 128, device.None}}

// BenchmarkMatmul times forward + backward of the tiny preset's linear
// layers (N = B·T = 1024): qkv 128→384, attention proj 128→128, MLP fc
// 128→512 with GELU, MLP proj 512→128; GFLOP/s counts 6·N·C·OC.
func BenchmarkMatmul(b *testing.B) {
	defer func(p bool) { poisonScratch = p }(poisonScratch)
	poisonScratch = false // time the op, not the test poison
	const N = 1024
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
		for _, f := range ntForms {
			for _, s := range tinyLinears {
				b.Run(fmt.Sprintf("%s/%s/%s_C%d_OC%d", dt, f.name, s.name, s.C, s.OC), func(b *testing.B) {
					r := ntRNG(1)
					d := ntDev(f.fused, 0)
					inp, _ := ntTensor(b, dt, ntNormal(r, N*s.C, 1, 0), N, s.C)
					w, _ := ntTensor(b, dt, ntNormal(r, s.OC*s.C, 0.1, 0), s.OC, s.C)
					bias, _ := ntTensor(b, dt, ntNormal(r, s.OC, 0.1, 0), s.OC)
					dout, _ := ntTensor(b, dt, ntNormal(r, N*s.OC, 1, 0), N, s.OC)
					out := tensor.New(dt, N, s.OC)
					var pre *tensor.Tensor
					if s.act == device.GELU {
						pre = tensor.New(dt, N, s.OC)
					}
					dinp, dw, db := tensor.New(dt, N, s.C), tensor.New(tensor.F32, s.OC, s.C), tensor.New(tensor.F32, s.OC)
					for b.Loop() {
						d.Matmul(out, pre, inp, w, bias, N, s.C, s.OC, s.act)
						d.MatmulBackward(dinp, dw, db, dout, inp, w, N, s.C, s.OC)
					}
					if err := d.Sync(); err != nil {
						b.Fatal(err)
					}
					sec := b.Elapsed().Seconds() / float64(b.N)
					b.ReportMetric(sec*1e3, "ms")
					b.ReportMetric(6*float64(N*s.C*s.OC)/sec/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// timeBF16Paths runs the three paths of the bf16 benchmarks in turn each
// iteration of b: f32 (on fp32 tensors), then bf (on bf16 tensors) with
// blas.SgemmBF16's fused packing and with the widened copies. It reports
// and returns each path's CPU time (all threads), labelled for
// -cpuprofile (go tool pprof -tagfocus path=bf16-fused).
func timeBF16Paths(b *testing.B, f32, bf func()) (cpu [3]time.Duration) {
	paths := []string{"fp32", "bf16-fused", "bf16-widen"}
	for b.Loop() {
		for i, run := range []func(){f32, func() { fusedBF16 = true; bf() }, func() { fusedBF16 = false; bf() }} {
			c0 := cputime.Now()
			pprof.Do(context.Background(), pprof.Labels("path", paths[i]), func(context.Context) { run() })
			cpu[i] += cputime.Now() - c0
		}
	}
	for i, name := range paths {
		b.ReportMetric(cpu[i].Seconds()*1e3/float64(b.N), name+"-cpu-ms")
	}
	return cpu
}

// BenchmarkMatmulBF16Paths times forward + backward of the tiny preset's
// linear layers (as BenchmarkMatmul, fused form) three ways, interleaved in
// rounds so that each sees the same load from other processes: fp32
// tensors, bf16 tensors through blas.SgemmBF16 (widened in the packing:
// "fused"), and bf16 tensors widened into fp32 copies for Sgemm ("widen",
// DRUTO_CPU_BF16_GEMM=widen). It reports the CPU time (all threads) per
// iteration of each, in ms.
func BenchmarkMatmulBF16Paths(b *testing.B) {
	loadBLAS() // sets fusedBF16 once: switch it after
	defer func(p, f bool) { poisonScratch, fusedBF16 = p, f }(poisonScratch, fusedBF16)
	poisonScratch = false
	if !blas.FusedBF16() {
		b.Skip("no assembly SGEMM on this CPU: SgemmBF16 widens into copies") // skip: a benchmark (CI runs none)
	}
	const N = 1024
	type set struct{ inp, w, bias, dout, out, pre, dinp, dw, db *tensor.Tensor }
	d := ntDev(true, 0)
	mk := func(b *testing.B, dt tensor.DType, C, OC int, act device.Activation) set {
		r := ntRNG(1)
		var s set
		s.inp, _ = ntTensor(b, dt, ntNormal(r, N*C, 1, 0), N, C)
		s.w, _ = ntTensor(b, dt, ntNormal(r, OC*C, 0.1, 0), OC, C)
		s.bias, _ = ntTensor(b, dt, ntNormal(r, OC, 0.1, 0), OC)
		s.dout, _ = ntTensor(b, dt, ntNormal(r, N*OC, 1, 0), N, OC)
		s.out = tensor.New(dt, N, OC)
		if act == device.GELU {
			s.pre = tensor.New(dt, N, OC)
		}
		s.dinp, s.dw, s.db = tensor.New(dt, N, C), tensor.New(tensor.F32, OC, C), tensor.New(tensor.F32, OC)
		return s
	}
	for _, sh := range tinyLinears {
		b.Run(fmt.Sprintf("%s_C%d_OC%d", sh.name, sh.C, sh.OC), func(b *testing.B) {
			f32s, bfs := mk(b, tensor.F32, sh.C, sh.OC, sh.act), mk(b, tensor.BF16, sh.C, sh.OC, sh.act)
			step := func(s set) {
				d.Matmul(s.out, s.pre, s.inp, s.w, s.bias, N, sh.C, sh.OC, sh.act)
				if sh.name == "proj" { // the model's MLP projection: GELU's backward folded in
					d.MatmulBackwardGELU(s.dinp, nil, s.dw, s.db, s.dout, s.inp, s.inp, s.w, N, sh.C, sh.OC)
				} else {
					d.MatmulBackward(s.dinp, s.dw, s.db, s.dout, s.inp, s.w, N, sh.C, sh.OC)
				}
			}
			timeBF16Paths(b, func() { step(f32s) }, func() { step(bfs) })
			if err := d.Sync(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// TestMatmulBF16GEMMPaths checks the linear layers on bf16 tensors with
// their operands handed to blas.SgemmBF16 (widened inside its packing)
// against the same layers with fp32 copies through Sgemm
// (DRUTO_CPU_BF16_GEMM=widen), on NaN-poisoned outputs: forward with bias
// and GELU, MatmulBackward (dinp, dweight, dbias) and MatmulBackwardGELU.
// The two paths differ only in the order of the fp32 GEMM's sums (a
// different library), so they agree within 16-bit rounding.
func TestMatmulBF16GEMMPaths(t *testing.T) {
	loadBLAS() // sets fusedBF16 once: switch it after
	defer func(f bool) { fusedBF16 = f }(fusedBF16)
	if !blas.FusedBF16() {
		testreq.Skip(t, "DRUTO_CPU_TESTS", "no assembly SGEMM on this CPU: both paths widen into copies")
	}
	const dt = tensor.BF16
	r := ntRNG(77)
	for _, sh := range [][3]int{{5, 7, 3}, {64, 96, 384}, {130, 512, 128}} {
		N, C, OC := sh[0], sh[1], sh[2]
		inp, _ := ntTensor(t, dt, ntNormal(r, N*C, 1, 0), N, C)
		pre, _ := ntTensor(t, dt, ntNormal(r, N*C, 1, 0), N, C)
		w, _ := ntTensor(t, dt, ntNormal(r, OC*C, 0.3, 0), OC, C)
		b, _ := ntTensor(t, dt, ntNormal(r, OC, 0.3, 0), OC)
		dout, _ := ntTensor(t, dt, ntNormal(r, N*OC, 1, 0), N, OC)
		type res struct{ out, gpre, dinp, dw, db, dpre, dpb, dw2, db2 *tensor.Tensor }
		var rs [2]res
		for k, fused := range []bool{true, false} {
			fusedBF16 = fused
			d := ntDev(true, 2)
			var s res
			s.out, s.gpre = tensor.New(dt, N, OC), tensor.New(dt, N, OC)
			s.dinp, s.dpre = tensor.New(dt, N, C), tensor.New(dt, N, C)
			for _, x := range []*tensor.Tensor{s.out, s.gpre, s.dinp, s.dpre} {
				ntPoison(x)
			}
			s.dw, s.db = tensor.New(tensor.F32, OC, C), tensor.New(tensor.F32, OC)
			s.dw2, s.db2, s.dpb = tensor.New(tensor.F32, OC, C), tensor.New(tensor.F32, OC), tensor.New(tensor.F32, C)
			d.Matmul(s.out, s.gpre, inp, w, b, N, C, OC, device.GELU)
			d.Zero(s.dinp)
			d.MatmulBackward(s.dinp, s.dw, s.db, dout, inp, w, N, C, OC)
			d.MatmulBackwardGELU(s.dpre, s.dpb, s.dw2, s.db2, dout, inp, pre, w, N, C, OC)
			ntSync(t, d)
			rs[k] = s
		}
		f, wd := rs[0], rs[1]
		name := fmt.Sprintf("N%d C%d OC%d", N, C, OC)
		sc := math.Sqrt(float64(C))
		ntCloseT(t, name+" out", f.out, wd.out, dt, 1)
		ntCloseT(t, name+" pre", f.gpre, wd.gpre, dt, 1)
		ntCloseT(t, name+" dinp", f.dinp, wd.dinp, dt, 1)
		ntCloseT(t, name+" dpre", f.dpre, wd.dpre, dt, 1)
		ntCloseT(t, name+" dweight", f.dw, wd.dw, tensor.F32, math.Sqrt(float64(N)))
		ntCloseT(t, name+" dbias", f.db, wd.db, tensor.F32, 1)
		ntCloseT(t, name+" dweight (GELU)", f.dw2, wd.dw2, tensor.F32, math.Sqrt(float64(N)))
		ntCloseT(t, name+" dbias (GELU)", f.db2, wd.db2, tensor.F32, 1)
		ntCloseT(t, name+" dpre bias", f.dpb, wd.dpb, tensor.F32, sc)
		if !ntSameBits(f.db, wd.db) {
			t.Errorf("%s: dbias differs between the paths (the same column sums of the same bf16 values)", name)
		}
	}
}

// BenchmarkStepBF16Paths times a forward and backward pass of the tiny GPT
// (B 8, T 128, fused) three ways, interleaved step by step so that each
// sees the same load from other processes: fp32, bf16 with the linear
// layers on blas.SgemmBF16 ("fused"), and bf16 with fp32 copies for Sgemm
// ("widen"). It reports the CPU time (all threads) per step of each, in ms.
func BenchmarkStepBF16Paths(b *testing.B) {
	loadBLAS() // sets fusedBF16 once: switch it after
	defer func(p, f bool) { poisonScratch, fusedBF16 = p, f }(poisonScratch, fusedBF16)
	poisonScratch = false // time the step, not the test poison
	cfg, err := gpt.Preset("tiny")
	if err != nil {
		b.Fatal(err)
	}
	const B, T = 8, 128
	rng := tensor.NewRNG(2)
	in, tg := make([]int32, B*T), make([]int32, B*T)
	for i := range in {
		in[i], tg[i] = int32(rng.Intn(cfg.Vocab)), int32(rng.Intn(cfg.Vocab))
	}
	model := func(pol amp.Policy) *gpt.Model {
		m, err := gpt.New(New(device.Options{Fused: true}), cfg, pol)
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Init(1); err != nil {
			b.Fatal(err)
		}
		return m
	}
	f32, bf := model(amp.FP32), model(amp.BF16)
	step := func(m *gpt.Model) {
		m.ZeroGrad()
		if _, err := m.Gradients(in, tg, B, T, 1); err != nil {
			b.Fatal(err)
		}
	}
	step(f32)
	step(bf)
	cpu := timeBF16Paths(b, func() { step(f32) }, func() { step(bf) })
	b.ReportMetric(cpu[1].Seconds()/cpu[0].Seconds(), "fused/fp32")
	b.ReportMetric(cpu[2].Seconds()/cpu[0].Seconds(), "widen/fp32")
}

// TestMatmulBackwardF32Dout checks the AMP rule for an fp32 residual
// gradient against bf16 weights (gradMat): dout is rounded to bf16 for the
// GEMMs, so dinp, dweight and dpre are bit for bit those of the same call
// with dout stored as a BF16 tensor, on both GEMM paths (fusedBF16) and in
// both forms; the fused form's bias gradients sum the rounded values too
// (as the GPU's cast_bias_grad), the decomposed form's the fp32 dout.
func TestMatmulBackwardF32Dout(t *testing.T) {
	loadBLAS() // sets fusedBF16 once: switch it after
	defer func(f bool) { fusedBF16 = f }(fusedBF16)
	const N, C, OC, bt = 37, 64, 48, tensor.BF16
	r := ntRNG(91)
	inp, _ := ntTensor(t, bt, ntNormal(r, N*C, 1, 0), N, C)
	pre, _ := ntTensor(t, bt, ntNormal(r, N*C, 1, 0), N, C)
	w, _ := ntTensor(t, bt, ntNormal(r, OC*C, 0.3, 0), OC, C)
	gv := ntNormal(r, N*OC, 1, 0)
	d32, g32 := ntTensor(t, tensor.F32, gv, N, OC)
	d16, _ := ntTensor(t, bt, gv, N, OC) // the same values rounded
	type res struct{ dinp, dw, db, dpre, dpb, dw2, db2 *tensor.Tensor }
	run := func(d *Device, dout *tensor.Tensor) res {
		s := res{dinp: tensor.New(bt, N, C), dpre: tensor.New(bt, N, C), dw: tensor.New(tensor.F32, OC, C), db: tensor.New(tensor.F32, OC),
			dw2: tensor.New(tensor.F32, OC, C), db2: tensor.New(tensor.F32, OC), dpb: tensor.New(tensor.F32, C)}
		ntPoison(s.dpre)
		d.MatmulBackward(s.dinp, s.dw, s.db, dout, inp, w, N, C, OC)
		d.MatmulBackwardGELU(s.dpre, s.dpb, s.dw2, s.db2, dout, inp, pre, w, N, C, OC)
		ntSync(t, d)
		return s
	}
	// The column sums of the fp32 dout (the decomposed form's dbias).
	sums := make([]float64, OC)
	for i := range N {
		for o := range OC {
			sums[o] += g32[i*OC+o]
		}
	}
	for _, fb := range []bool{false, true} {
		if fb && !blas.FusedBF16() {
			continue
		}
		fusedBF16 = fb
		for _, fused := range []bool{true, false} {
			d := ntDev(fused, 2)
			a, b := run(d, d32), run(d, d16)
			name := fmt.Sprintf("fusedBF16=%v fused=%v", fb, fused)
			for _, p := range []struct {
				what string
				x, y *tensor.Tensor
			}{{"dinp", a.dinp, b.dinp}, {"dweight", a.dw, b.dw}, {"dpre", a.dpre, b.dpre}, {"dweight (GELU)", a.dw2, b.dw2}, {"dpre bias", a.dpb, b.dpb}} {
				if !ntSameBits(p.x, p.y) {
					t.Errorf("%s: %s with an fp32 dout differs from the bf16-rounded dout's", name, p.what)
				}
			}
			if fused {
				if !ntSameBits(a.db, b.db) || !ntSameBits(a.db2, b.db2) {
					t.Errorf("%s: dbias does not sum the rounded dout", name)
				}
				continue
			}
			ntClose(t, name+" dbias", ntF64(a.db), sums, tensor.F32, math.Sqrt(N))
			ntClose(t, name+" dbias (GELU)", ntF64(a.db2), sums, tensor.F32, math.Sqrt(N))
		}
	}
}
