package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/druto/druto/internal/testreq"
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/tensor"
)

// simdInputs returns n float32 values for the kernel tests: normal values
// at several scales with the special ones (±0, ±Inf, NaN, the exp cut-off,
// the tanh branch point 1/8, subnormals, huge values) mixed in.
func simdInputs(r *rand.Rand, n int) []float32 {
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), -87.33654, -87.4, -88, 0.125, -0.125, 0.12499999, 1e-40, -1e-40, 3e38, -3e38, 9, -9, 40, -40}
	x := make([]float32, n)
	for i := range x {
		switch r.IntN(4) {
		case 0:
			x[i] = special[r.IntN(len(special))]
		case 1:
			x[i] = float32(r.NormFloat64() * 0.1)
		case 2:
			x[i] = float32(r.NormFloat64() * 3)
		default:
			x[i] = float32(r.NormFloat64() * 30)
		}
	}
	return x
}

// simdLengths are slice lengths around the kernels' 8- and 16-element steps.
var simdLengths = []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 64, 127, 1000}

// withISA runs fn with the AVX2 kernels selected (avx2) or not (it skips where the CPU
// lacks them) and restores the selection.
func withISA(t *testing.T, avx2 bool, fn func()) {
	t.Helper()
	if avx2 && !haveAVX2 {
		testreq.Skip(t, "DRUTO_CPU_TESTS", "the CPU has no AVX2+FMA: only the pure-Go kernels run here")
	}
	if goContractsFMA {
		testreq.Skip(t, "DRUTO_CPU_TESTS", "built with GOAMD64=v3 or later: the Go reference loops may be contracted to FMA, so their bits are not the kernels'")
	}
	old := useAVX2
	useAVX2 = avx2
	defer func() { useAVX2 = old }()
	fn()
}

// sameBits fails unless got and want hold the same float32 bits (all NaNs
// count as equal).
func sameBits(t *testing.T, what string, x, got, want []float32) {
	t.Helper()
	for i := range want {
		g, w := got[i], want[i]
		if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
			t.Fatalf("%s: element %d of %d (x=%v): kernel %v (%#x), reference %v (%#x)",
				what, i, len(want), x[i], g, math.Float32bits(g), w, math.Float32bits(w))
		}
	}
}

// nanSlice returns n NaNs: outputs start poisoned.
func nanSlice(n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(math.NaN())
	}
	return s
}

// TestSIMDElementwise checks the vectorised GELU, tanh and GELU backward
// against their pure-Go references bit for bit, on every length around the
// vector width and on special values; in place too.
func TestSIMDElementwise(t *testing.T) {
	withISA(t, true, func() {
		r := ntRNG(11)
		for _, n := range simdLengths {
			x, g := simdInputs(r, n), simdInputs(r, n)
			want, got := make([]float32, n), nanSlice(n)
			geluForwardGo(want, x)
			geluForward(got, x)
			sameBits(t, "geluForward", x, got, want)
			in := append([]float32(nil), x...)
			geluForward(in, in)
			sameBits(t, "geluForward in place", x, in, want)

			for i := range want {
				want[i] = tanh32(x[i])
			}
			got = nanSlice(n)
			tanhSlice(got, x)
			sameBits(t, "tanhSlice", x, got, want)

			geluBackwardGo(want, x, g)
			got = nanSlice(n)
			geluBackwardSlice(got, x, g)
			sameBits(t, "geluBackwardSlice", x, got, want)
		}
	})
}

// TestSIMDSoftmax checks the kernel softmax row against the pure-Go one bit
// for bit (the kernel keeps its four partial sums), the masked tail too.
func TestSIMDSoftmax(t *testing.T) {
	withISA(t, true, func() {
		r := ntRNG(12)
		for _, T := range []int{1, 5, 8, 9, 17, 64, 100, 128, 257} {
			for _, tt := range []int{0, T / 3, T / 2, T - 1} {
				row := make([]float32, T)
				for i := range row {
					row[i] = float32(r.NormFloat64() * 4)
				}
				want := append([]float32(nil), row...)
				softmaxCausalRowGo(want, tt)
				got := append([]float32(nil), row...)
				softmaxCausalRow(got, tt)
				sameBits(t, fmt.Sprintf("softmax T=%d t=%d", T, tt), row, got, want)
			}
		}
		// exp of the kernel lanes is bit-exact; only the sum's order differs.
		for _, n := range simdLengths {
			x := make([]float32, n)
			for i := range x {
				x[i] = -float32(math.Abs(r.NormFloat64() * 30))
			}
			x = append(x, simdInputs(r, n)...)
			want, got := append([]float32(nil), x...), append([]float32(nil), x...)
			var ws float64
			for i := range want {
				want[i] = expNeg32(want[i] - 0.5)
				ws += float64(want[i])
			}
			gs := expSubSum(got, 0.5)
			sameBits(t, "expSubSum", x, got, want)
			if d := math.Abs(float64(gs) - ws); d > 1e-6*math.Abs(ws) && !(math.IsNaN(ws) && gs != gs) {
				t.Fatalf("expSubSum n=%d: sum %v, float64 sum %v", len(x), gs, ws)
			}
			useAVX2 = false
			ref := append([]float32(nil), x...)
			rs := expSubSum(ref, 0.5)
			useAVX2 = true
			sameBits(t, "expSubSum's sum", []float32{0.5}, []float32{gs}, []float32{rs})
		}
	})
}

// TestSIMDBF16 checks the vectorised bf16 conversions against the scalar
// tensor.BF16FromF32 / BF16ToF32, bit for bit, ties and NaNs included, and
// load/store through a BF16 tensor.
func TestSIMDBF16(t *testing.T) {
	withISA(t, true, func() {
		r := ntRNG(13)
		for _, n := range append(simdLengths, 4099) {
			x := simdInputs(r, n)
			for i := range x { // exact ties and odd/even neighbours of bit 16
				if r.IntN(3) == 0 {
					x[i] = math.Float32frombits(uint32(r.Uint32())&0xffff0000 | []uint32{0x8000, 0x7fff, 0x8001, 0xffff}[r.IntN(4)])
				}
			}
			got := make([]uint16, n)
			for i := range got {
				got[i] = 0xdead
			}
			f32ToBF16s(got, x)
			for i, v := range x {
				if w := tensor.BF16FromF32(v); got[i] != w {
					t.Fatalf("f32ToBF16s n=%d: element %d (%#x): %#x, scalar %#x", n, i, math.Float32bits(v), got[i], w)
				}
			}
			back := nanSlice(n)
			bf16ToF32s(back, got)
			for i, h := range got {
				if math.Float32bits(back[i]) != uint32(h)<<16 {
					t.Fatalf("bf16ToF32s n=%d: element %d: %#x from %#x", n, i, math.Float32bits(back[i]), h)
				}
			}
			bt := tensor.New(tensor.BF16, n+3)
			store(bt, 3, x)
			for i, v := range x {
				if w := tensor.BF16FromF32(v); bt.U16()[i+3] != w {
					t.Fatalf("store n=%d: element %d: %#x, scalar %#x", n, i, bt.U16()[i+3], w)
				}
			}
		}
	})
}

// TestISA checks that ISA names the path in use.
func TestISA(t *testing.T) {
	withISA(t, false, func() {
		if s := ISA(); len(s) < 7 || s[:7] != "generic" {
			t.Fatalf("ISA() = %q with the kernels off", s)
		}
	})
	withISA(t, true, func() {
		if s := ISA(); len(s) < 4 || s[:4] != "avx2" {
			t.Fatalf("ISA() = %q with the AVX2 kernels on", s)
		}
	})
}

// normals returns n float32 normal values times scale plus shift.
func normals(r *rand.Rand, n int, scale, shift float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64()*scale + shift)
	}
	return x
}

// closeRel fails unless |got - want| <= tol·|want| (or both are NaN).
func closeRel(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*math.Abs(want) && !(math.IsNaN(got) && math.IsNaN(want)) {
		t.Fatalf("%s: kernel %v, reference %v", what, got, want)
	}
}

// TestSIMDLayerNorm checks the layernorm kernels against the pure-Go loops
// bit for bit, the float64 row sums included.
func TestSIMDLayerNorm(t *testing.T) {
	withISA(t, true, func() {
		r := ntRNG(14)
		for _, n := range simdLengths {
			x, w, b, g := normals(r, n, 2, 0.5), normals(r, n, 1, 1), normals(r, n, 1, 0), normals(r, n, 1, 0)
			if a, b := sum64(x), sum64Go(x); math.Float64bits(a) != math.Float64bits(b) {
				t.Fatalf("sum64 n=%d: %v, reference %v", n, a, b)
			}
			m := sum64Go(x) / float64(max(n, 1))
			if a, b := sumSqDev64(x, m), sumSqDev64Go(x, m); math.Float64bits(a) != math.Float64bits(b) {
				t.Fatalf("sumSqDev64 n=%d: %v, reference %v", n, a, b)
			}
			mf, sf := float32(m), float32(0.7)
			want, got := make([]float32, n), nanSlice(n)
			for j := range x {
				want[j] = (sf*(x[j]-mf))*w[j] + b[j]
			}
			lnNorm(got, x, w, b, mf, sf)
			sameBits(t, "lnNorm", x, got, want)

			var dm, dnm float64
			for j := range x {
				dn := w[j] * g[j]
				dm += float64(dn)
				dnm += float64(dn * (sf * (x[j] - mf)))
			}
			gm, gnm := lnBwdSums(x, w, g, mf, sf)
			if rm, rnm := lnBwdSumsGo(x, w, g, mf, sf); math.Float64bits(gm) != math.Float64bits(rm) || math.Float64bits(gnm) != math.Float64bits(rnm) {
				t.Fatalf("lnBwdSums n=%d: (%v, %v), its Go reference (%v, %v) (the same partial sums)", n, gm, gnm, rm, rnm)
			}
			// sums of signed terms: compare against the sum of magnitudes
			var scale float64
			for j := range x {
				scale += math.Abs(float64(w[j] * g[j]))
			}
			if math.Abs(gm-dm) > 1e-13*scale || math.Abs(gnm-dnm) > 1e-13*scale*10 {
				t.Fatalf("lnBwdSums n=%d: (%v, %v), reference (%v, %v)", n, gm, gnm, dm, dnm)
			}
			di, dw, db := normals(r, n, 1, 0), normals(r, n, 1, 0), normals(r, n, 1, 0)
			wdi, wdw, wdb := append([]float32(nil), di...), append([]float32(nil), dw...), append([]float32(nil), db...)
			dmf, dnmf := float32(0.3), float32(-0.2)
			for j := range x {
				nn := sf * (x[j] - mf)
				dn := w[j] * g[j]
				wdb[j] += g[j]
				wdw[j] += nn * g[j]
				wdi[j] += sf * (dn - dmf - nn*dnmf)
			}
			lnBwdRow(di, dw, db, x, w, g, mf, sf, dmf, dnmf)
			sameBits(t, "lnBwdRow dinp", x, di, wdi)
			sameBits(t, "lnBwdRow dweight", x, dw, wdw)
			sameBits(t, "lnBwdRow dbias", x, db, wdb)
		}
	})
}

// TestSIMDAdamW checks the AdamW kernel against adamWMasterGo bit for bit,
// for both forms of the m update, with and without gradient scale and decay.
func TestSIMDAdamW(t *testing.T) {
	withISA(t, true, func() {
		r := ntRNG(15)
		for _, n := range simdLengths {
			for k, hp := range []device.AdamW{
				{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Step: 3},
				{LR: 3e-4, Beta1: 0.3, Beta2: 0.999, Eps: 1e-6, Step: 1, GradScale: 1.0 / 1024},
			} {
				c := hp.Consts()
				for _, decay := range []bool{false, true} {
					p, g, m := normals(r, n, 1, 0), normals(r, n, 1e-2, 0), normals(r, n, 1e-3, 0)
					v := normals(r, n, 1e-5, 0)
					for i := range v {
						v[i] = float32(math.Abs(float64(v[i])))
					}
					wp, wm, wv := append([]float32(nil), p...), append([]float32(nil), m...), append([]float32(nil), v...)
					adamWMasterGo(wp, g, wm, wv, decay && c.DoDecay, c)
					adamWMaster(p, g, m, v, decay && c.DoDecay, c)
					what := fmt.Sprintf("adamW n=%d hp=%d decay=%v", n, k, decay)
					sameBits(t, what+" p", g, p, wp)
					sameBits(t, what+" m", g, m, wm)
					sameBits(t, what+" v", g, v, wv)
				}
			}
		}
	})
}

// TestSIMDReductions checks add32 and the softmax-backward kernel bit for
// bit, max32 exactly, and dot32 within float32 rounding of the float64 dot
// and bit for bit against dot32Go.
func TestSIMDReductions(t *testing.T) {
	withISA(t, true, func() {
		r := ntRNG(16)
		for _, n := range simdLengths[1:] {
			a, b := normals(r, n, 1, 0), normals(r, n, 1, 0)
			want := append([]float32(nil), a...)
			for i := range want {
				want[i] += b[i]
			}
			got := append([]float32(nil), a...)
			add32(got, b)
			sameBits(t, "add32", a, got, want)

			m := a[0]
			for _, v := range a {
				m = max(m, v)
			}
			if g := max32(a); g != m {
				t.Fatalf("max32 n=%d: %v, want %v", n, g, m)
			}
			var d, mag float64
			for i := range a {
				d += float64(a[i]) * float64(b[i])
				mag += math.Abs(float64(a[i]) * float64(b[i]))
			}
			if g := dot32(a, b); math.Abs(float64(g)-d) > 1e-6*mag {
				t.Fatalf("dot32 n=%d: %v, float64 %v", n, g, d)
			}
			if g, w := dot32(a, b), dot32Go(a, b); math.Float32bits(g) != math.Float32bits(w) {
				t.Fatalf("dot32 n=%d: %v, its Go reference %v (the same eight partial sums)", n, g, w)
			}

			p := normals(r, n, 0.1, 0.2)
			da := normals(r, n, 1, 0)
			wda, gda := append([]float32(nil), da...), append([]float32(nil), da...)
			softmaxBackwardRowGo(p, wda, n-1, 0.17)
			softmaxBackwardRow(p, gda, n-1, 0.17)
			var pmag float64 // the row sum's order differs: its error is below 1e-6·Σ|p·da|
			for i := range p {
				pmag += math.Abs(float64(p[i]) * float64(da[i]))
			}
			for i := range wda {
				if math.Abs(float64(gda[i]-wda[i])) > 1e-6*(math.Abs(float64(wda[i]))+0.17*math.Abs(float64(p[i]))*pmag) {
					t.Fatalf("softmaxBackwardRow n=%d: [%d] = %v, reference %v", n, i, gda[i], wda[i])
				}
			}
		}
	})
}

// TestSIMDCrossEntropyGrad checks ceGrad's kernel bit for bit against the
// float64 scaling it vectorises.
func TestSIMDCrossEntropyGrad(t *testing.T) {
	withISA(t, true, func() {
		r := ntRNG(17)
		for _, n := range simdLengths {
			x := simdInputs(r, n)
			want := append([]float32(nil), x...)
			for i := range want {
				want[i] = float32(float64(want[i])*(1/3.7)) * 0.25
			}
			got := append([]float32(nil), x...)
			ceGrad(got, 1/3.7, 0.25)
			sameBits(t, "ceGrad", x, got, want)
		}
	})
}

// TestSIMDAddInto checks addInto on F32, BF16 and F16 tensors against the
// scalar widen-add-round, bit for bit, at an offset and on every tail.
func TestSIMDAddInto(t *testing.T) {
	withISA(t, true, func() {
		r := ntRNG(18)
		for _, n := range simdLengths {
			for _, dt := range ntDTypes {
				base, v := simdInputs(r, n+5), normals(r, n, 1, 0)
				tt := tensor.New(dt, n+5)
				if err := tt.SetF32(base); err != nil {
					t.Fatal(err)
				}
				before := tt.ToF32()
				addInto(tt, 5, v)
				got := tt.ToF32()
				want := make([]float32, n+5)
				copy(want, before)
				for i, x := range v {
					w := tensor.New(dt, 1)
					if err := w.SetF32([]float32{before[5+i] + x}); err != nil {
						t.Fatal(err)
					}
					want[5+i] = w.ToF32()[0]
				}
				sameBits(t, fmt.Sprintf("addInto %s n=%d", dt, n), append(make([]float32, 5), v...), got, want)
			}
		}
	})
}

// TestSIMDStepBits runs one forward and backward pass of the tiny GPT
// (fused and decomposed, fp32 and bf16, T = 32 on the attention loops and
// T = 128 on its GEMMs), then an AdamW step, with the kernels and without:
// loss, gradients and updated weights must be the same bits (the kernels
// keep the scalar code's operations and sum orders).
func TestSIMDStepBits(t *testing.T) {
	if !haveAVX2 || goContractsFMA {
		testreq.Skip(t, "DRUTO_CPU_TESTS", "no AVX2+FMA kernels here, or built with GOAMD64=v3+ (the Go loops may be contracted to FMA)")
	}
	cfg, err := gpt.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	run := func(avx2, fused bool, pol amp.Policy, B, T int) (loss float32, grads, params []float32) {
		old := useAVX2
		useAVX2 = avx2
		defer func() { useAVX2 = old }()
		m, err := gpt.New(New(device.Options{Fused: fused, Threads: 2}), cfg, pol)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if err := m.Init(3); err != nil {
			t.Fatal(err)
		}
		rng := tensor.NewRNG(4)
		in, tg := make([]int32, B*T), make([]int32, B*T)
		for i := range in {
			in[i], tg[i] = int32(rng.Intn(cfg.Vocab)), int32(rng.Intn(cfg.Vocab))
		}
		m.ZeroGrad()
		if loss, err = m.Gradients(in, tg, B, T, 1); err != nil {
			t.Fatal(err)
		}
		if grads, err = m.GradValues(); err != nil {
			t.Fatal(err)
		}
		d := m.Device()
		mm, _ := d.Alloc(tensor.F32, m.Layout().Total)
		vv, _ := d.Alloc(tensor.F32, m.Layout().Total)
		var work *tensor.Tensor
		if pol != amp.FP32 {
			work = m.Work()
		}
		d.AdamWStep(m.Master(), work, m.Grads(), mm, vv, m.Layout(),
			device.AdamW{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Step: 1})
		if err := d.Sync(); err != nil {
			t.Fatal(err)
		}
		if params, err = m.Params(); err != nil {
			t.Fatal(err)
		}
		return loss, grads, params
	}
	for _, pol := range []amp.Policy{amp.FP32, amp.BF16} {
		for _, fused := range []bool{true, false} {
			for _, T := range []int{32, 128} {
				what := fmt.Sprintf("%s fused=%v T=%d", pol, fused, T)
				l0, g0, p0 := run(false, fused, pol, 2, T)
				l1, g1, p1 := run(true, fused, pol, 2, T)
				if math.Float32bits(l0) != math.Float32bits(l1) {
					t.Fatalf("%s: loss %v with the kernels, %v without", what, l1, l0)
				}
				sameBits(t, what+" gradients", g0, g1, g0)
				sameBits(t, what+" weights after AdamW", p0, p1, p0)
			}
		}
	}
}

// TestSIMDGELUBackwardBF16 checks the bf16 GELU backward kernel through
// GELUBackward against the pure-Go path, bit for bit, on every tail.
func TestSIMDGELUBackwardBF16(t *testing.T) {
	withISA(t, true, func() {
		r := ntRNG(19)
		for _, n := range append(simdLengths, 8193) {
			x, g := simdInputs(r, n), normals(r, n, 1, 0)
			inp, dout := tensor.New(tensor.BF16, n), tensor.New(tensor.BF16, n)
			if err := inp.SetF32(x); err != nil {
				t.Fatal(err)
			}
			if err := dout.SetF32(g); err != nil {
				t.Fatal(err)
			}
			var outs [2][]float32
			for k, avx2 := range []bool{false, true} {
				useAVX2 = avx2
				d := New(device.Options{Fused: true, Threads: 2})
				dinp := tensor.New(tensor.BF16, n)
				ntPoison(dinp)
				d.GELUBackward(dinp, inp, dout, n)
				if err := d.Sync(); err != nil {
					t.Fatal(err)
				}
				outs[k] = dinp.ToF32()
			}
			sameBits(t, fmt.Sprintf("GELUBackward bf16 n=%d", n), inp.ToF32(), outs[1], outs[0])
		}
	})
}

// TestSIMDMatmulGELUBF16 checks the fused Matmul's bf16 GELU epilogue
// (rounded on store by the kernel) against the pure-Go path, bit for bit,
// with row widths that leave tails.
func TestSIMDMatmulGELUBF16(t *testing.T) {
	withISA(t, true, func() {
		r := ntRNG(20)
		for _, sh := range [][3]int{{5, 16, 13}, {33, 64, 100}, {64, 128, 512}} {
			N, C, OC := sh[0], sh[1], sh[2]
			inp, _ := ntTensor(t, tensor.BF16, ntNormal(r, N*C, 1, 0), N, C)
			w, _ := ntTensor(t, tensor.BF16, ntNormal(r, OC*C, 0.3, 0), OC, C)
			b, _ := ntTensor(t, tensor.BF16, ntNormal(r, OC, 0.3, 0), OC)
			var outs, pres [2][]float32
			for k, avx2 := range []bool{false, true} {
				useAVX2 = avx2
				d := New(device.Options{Fused: true, Threads: 2})
				out, pre := tensor.New(tensor.BF16, N, OC), tensor.New(tensor.BF16, N, OC)
				ntPoison(out)
				ntPoison(pre)
				d.Matmul(out, pre, inp, w, b, N, C, OC, device.GELU)
				if err := d.Sync(); err != nil {
					t.Fatal(err)
				}
				outs[k], pres[k] = out.ToF32(), pre.ToF32()
			}
			what := fmt.Sprintf("Matmul GELU bf16 %dx%dx%d", N, C, OC)
			sameBits(t, what+" pre", pres[0], pres[1], pres[0])
			sameBits(t, what+" out", pres[0], outs[1], outs[0])
		}
	})
}

// TestSIMDFusedBF16Epilogues checks the one-pass bf16 kernels of the fused
// linear layers (biasRoundBF16, biasGeluBF16, geluBackwardMix) and of the
// attention's probabilities (roundKeepBF16) against
// their pure-Go references bit for bit on every tail and on special values,
// the outputs NaN-poisoned, and the references against the passes they
// replace (add32, the rounding store, geluForward, geluBackwardSlice, the
// widening load).
func TestSIMDFusedBF16Epilogues(t *testing.T) {
	withISA(t, true, func() {
		r := ntRNG(23)
		poison16 := func(n int) []uint16 {
			s := make([]uint16, n)
			for i := range s {
				s[i] = 0x7fc1
			}
			return s
		}
		nan16 := func(h uint16) bool { return h&0x7f80 == 0x7f80 && h&0x7f != 0 }
		// same16 compares bf16 bits, all NaNs equal (as sameBits: which
		// operand's NaN an x86 multiply returns differs from Go's order).
		same16 := func(what string, got, want []uint16) {
			t.Helper()
			for i := range want {
				if got[i] != want[i] && !(nan16(got[i]) && nan16(want[i])) {
					t.Fatalf("%s: element %d of %d: %#x, want %#x", what, i, len(want), got[i], want[i])
				}
			}
		}
		for _, n := range append(simdLengths, 8193) {
			y, b := simdInputs(r, n), simdInputs(r, n)
			x16 := make([]uint16, n)
			for i, v := range simdInputs(r, n) {
				x16[i] = tensor.BF16FromF32(v)
			}
			// The passes each kernel replaces, in the pure-Go loops.
			v := append([]float32(nil), y...)
			useAVX2 = false
			add32(v, b)
			wantPre, wantOut := make([]uint16, n), make([]uint16, n)
			f32ToBF16s(wantPre, v)
			gv := make([]float32, n)
			geluForward(gv, v)
			f32ToBF16s(wantOut, gv)
			xw := make([]float32, n)
			bf16ToF32s(xw, x16)
			wantY := append([]float32(nil), y...)
			geluBackwardSlice(wantY, xw, wantY)
			wantD := make([]uint16, n)
			f32ToBF16s(wantD, wantY)
			wantR16 := make([]uint16, n)
			f32ToBF16s(wantR16, y)
			for _, avx2 := range []bool{false, true} {
				useAVX2 = avx2
				what := fmt.Sprintf("n=%d avx2=%v", n, avx2)
				dst := poison16(n)
				biasRoundBF16(dst, y, b)
				same16("biasRoundBF16 "+what, dst, wantPre)
				pre, out := poison16(n), poison16(n)
				biasGeluBF16(pre, out, y, b)
				same16("biasGeluBF16 pre "+what, pre, wantPre)
				same16("biasGeluBF16 out "+what, out, wantOut)
				rk, r16 := append([]float32(nil), y...), poison16(n)
				roundKeepBF16(r16, rk)
				wantRK := make([]float32, n)
				bf16ToF32s(wantRK, wantR16)
				same16("roundKeepBF16 dst "+what, r16, wantR16)
				sameBits(t, "roundKeepBF16 x "+what, y, rk, wantRK)
				yy, d16 := append([]float32(nil), y...), poison16(n)
				geluBackwardMix(d16, yy, x16)
				sameBits(t, "geluBackwardMix y "+what, y, yy, wantY)
				same16("geluBackwardMix dst "+what, d16, wantD)
			}
		}
	})
}
