package gpu

// fp8_matmul_test.go: MatmulFP8 against pkg/device/cpu's MatmulFP8, its
// arguments and architecture refusals (on any machine), and its speed
// against the bf16 Matmul at GPT-2 124M's training shapes.

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/druto/druto/internal/testreq"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
)

// TestLaunchMatmulFP8 (any machine): MatmulFP8 refuses, returns and records
// ErrFP8Args for arguments outside its contract and cuBLASLt's FP8 rules,
// ErrArch below sm_90 (a context-less device that reports sm_89), accepts
// a valid call, and zeroes out for C = 0 (one memset of out's bytes).
func TestLaunchMatmulFP8(t *testing.T) {
	F, BF := tensor.F32, tensor.BF16
	a, b := cuda.DevicePtr(dev(F, 1).Dev), cuda.DevicePtr(dev(F, 1).Dev)
	const N, C, OC = 16, 64, 24
	for _, c := range []struct {
		name string
		call func(d *Device) error
	}{
		{"format 0", func(d *Device) error {
			return d.matmulFP8P(dev(BF, N, OC), a, b, 0, tensor.E4M3, dev(F, 1), dev(F, 1), N, C, OC)
		}},
		{"format 3", func(d *Device) error {
			return d.matmulFP8P(dev(BF, N, OC), a, b, tensor.E4M3, 3, dev(F, 1), dev(F, 1), N, C, OC)
		}},
		{"C 40", func(d *Device) error {
			return d.matmulFP8P(dev(BF, N, OC), a, b, tensor.E4M3, tensor.E4M3, dev(F, 1), dev(F, 1), N, 40, OC)
		}},
		{"OC 20", func(d *Device) error {
			return d.matmulFP8P(dev(BF, N, 20), a, b, tensor.E4M3, tensor.E4M3, dev(F, 1), dev(F, 1), N, C, 20)
		}},
		{"N -1", func(d *Device) error {
			return d.matmulFP8P(dev(BF, 0, OC), a, b, tensor.E4M3, tensor.E4M3, dev(F, 1), dev(F, 1), -1, C, OC)
		}},
		{"out f16", func(d *Device) error {
			return d.matmulFP8P(dev(tensor.F16, N, OC), a, b, tensor.E4M3, tensor.E4M3, dev(F, 1), dev(F, 1), N, C, OC)
		}},
		{"f32 out, OC 22", func(d *Device) error {
			return d.matmulFP8P(dev(F, N, 22), a, b, tensor.E4M3, tensor.E4M3, dev(F, 1), dev(F, 1), N, C, 22)
		}},
		{"Add into bf16", func(d *Device) error {
			return d.matmulFP8AddP(dev(BF, N, OC), a, b, tensor.E5M2, tensor.E4M3, dev(F, 1), dev(F, 1), N, C, OC)
		}},
		{"Add with C 40", func(d *Device) error {
			return d.matmulFP8AddP(dev(F, N, OC), a, b, tensor.E5M2, tensor.E4M3, dev(F, 1), dev(F, 1), N, 40, OC)
		}},
		{"out short", func(d *Device) error {
			return d.matmulFP8P(dev(BF, N, OC-1), a, b, tensor.E4M3, tensor.E4M3, dev(F, 1), dev(F, 1), N, C, OC)
		}},
		{"nil out", func(d *Device) error {
			return d.matmulFP8P(nil, a, b, tensor.E4M3, tensor.E4M3, dev(F, 1), dev(F, 1), N, C, OC)
		}},
		{"invA bf16", func(d *Device) error {
			return d.matmulFP8P(dev(BF, N, OC), a, b, tensor.E4M3, tensor.E4M3, dev(BF, 1), dev(F, 1), N, C, OC)
		}},
		{"invB 2", func(d *Device) error {
			return d.matmulFP8P(dev(BF, N, OC), a, b, tensor.E4M3, tensor.E4M3, dev(F, 1), dev(F, 2), N, C, OC)
		}},
		{"nil invA", func(d *Device) error {
			return d.matmulFP8P(dev(BF, N, OC), a, b, tensor.E4M3, tensor.E4M3, nil, dev(F, 1), N, C, OC)
		}},
		{"host invB", func(d *Device) error {
			return d.matmulFP8P(dev(BF, N, OC), a, b, tensor.E4M3, tensor.E4M3, dev(F, 1), tensor.New(F, 1), N, C, OC)
		}},
		{"nil a", func(d *Device) error {
			return d.matmulFP8P(dev(BF, N, OC), 0, b, tensor.E4M3, tensor.E4M3, dev(F, 1), dev(F, 1), N, C, OC)
		}},
		{"nil b", func(d *Device) error {
			return d.matmulFP8P(dev(BF, N, OC), a, 0, tensor.E5M2, tensor.E4M3, dev(F, 1), dev(F, 1), N, C, OC)
		}},
		{"a misaligned", func(d *Device) error {
			return d.matmulFP8P(dev(BF, N, OC), a+16, b, tensor.E4M3, tensor.E4M3, dev(F, 1), dev(F, 1), N, C, OC)
		}},
		{"out misaligned", func(d *Device) error {
			o := dev(BF, N*OC+8)
			return d.matmulFP8P(o.MustView(8, N, OC), a, b, tensor.E4M3, tensor.E4M3, dev(F, 1), dev(F, 1), N, C, OC)
		}},
	} {
		var ret error
		got, err := hooked(t, true, func(d *Device) { ret = c.call(d) })
		if !errors.Is(ret, ErrFP8Args) || !errors.Is(err, ErrFP8Args) || len(got) != 0 {
			t.Errorf("%s: returned %v, recorded %v, %d launches; want ErrFP8Args and none", c.name, ret, err, len(got))
		}
	}

	// Below sm_90: ErrArch, returned and recorded, whatever the arguments.
	old := &Device{ctx: &cuda.Context{Device: cuda.DeviceInfo{Major: 8, Minor: 9}}}
	if err := old.matmulFP8P(dev(BF, N, OC), a, b, tensor.E4M3, tensor.E4M3, dev(F, 1), dev(F, 1), N, C, OC); !errors.Is(err, ErrArch) || !errors.Is(old.err, ErrArch) {
		t.Errorf("sm_89: returned %v, recorded %v; want ErrArch", err, old.err)
	}

	// Valid calls: none refused; C = 0 zeroes out and nothing else.
	var zeroed []int
	memsetHook = func(p cuda.DevicePtr, n int) { zeroed = append(zeroed, n) }
	got, err := hooked(t, true, func(d *Device) {
		for _, f := range [][2]tensor.FP8Format{{tensor.E4M3, tensor.E4M3}, {tensor.E5M2, tensor.E4M3}, {tensor.E4M3, tensor.E5M2}} {
			if err := d.matmulFP8P(dev(BF, N, OC), a, b, f[0], f[1], dev(F, 1), dev(F, 1), N, C, OC); err != nil {
				t.Errorf("%s·%s: %v", f[0], f[1], err)
			}
		}
		if err := d.matmulFP8P(dev(BF, 0, OC), 0, 0, tensor.E4M3, tensor.E4M3, dev(F, 1), dev(F, 1), 0, C, OC); err != nil {
			t.Errorf("N 0: %v", err)
		}
		if err := d.matmulFP8P(dev(BF, N, OC), 0, 0, tensor.E4M3, tensor.E4M3, dev(F, 1), dev(F, 1), N, 0, OC); err != nil {
			t.Errorf("C 0: %v", err)
		}
		if err := d.matmulFP8P(dev(F, N, 20), a, b, tensor.E4M3, tensor.E4M3, dev(F, 1), dev(F, 1), N, C, 20); err != nil {
			t.Errorf("f32 out, OC 20: %v", err)
		}
		if err := d.matmulFP8AddP(dev(F, N, OC), a, b, tensor.E5M2, tensor.E4M3, dev(F, 1), dev(F, 1), N, C, OC); err != nil {
			t.Errorf("Add: %v", err)
		}
		if err := d.matmulFP8AddP(dev(F, N, OC), 0, 0, tensor.E5M2, tensor.E4M3, dev(F, 1), dev(F, 1), N, 0, OC); err != nil {
			t.Errorf("Add, C 0: %v", err)
		}
	})
	memsetHook = nil
	if err != nil || len(got) != 0 {
		t.Errorf("valid calls: recorded %v, %d launches", err, len(got))
	}
	if len(zeroed) != 1 || zeroed[0] != N*OC*2 {
		t.Errorf("memsets %v, want one of %d bytes (out, for C 0; Add leaves out as it is)", zeroed, N*OC*2)
	}
}

// fp8Upload copies the bytes q to a new device buffer (an I32 tensor of
// the pool, 256-byte aligned), freed when the test ends.
func fp8Upload(t testing.TB, g *Device, q []byte) cuda.DevicePtr {
	t.Helper()
	h := tensor.New(tensor.I32, (len(q)+3)/4)
	copy(h.Raw(), q)
	d, err := g.Alloc(tensor.I32, h.Numel())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Free(d) })
	g.Upload(d, h)
	return cuda.DevicePtr(d.Dev)
}

// fp8Operand returns n normal values of standard deviation std quantised to
// format f with the scale of the FP8 recipe, max/amax (not a power of two
// in general), and the dequantisation factor 1/scale.
func fp8Operand(rng *tensor.RNG, n int, std float64, f tensor.FP8Format) ([]byte, float32) {
	v := make([]float32, n)
	var amax float32
	for i := range v {
		v[i] = float32(std * rng.Norm())
		amax = max(amax, float32(math.Abs(float64(v[i]))))
	}
	s := f.Max() / amax
	q := make([]byte, n)
	tensor.QuantizeFP8(q, v, s, f)
	return q, 1 / s
}

// matmulFP8Ref runs cpu.MatmulFP8 on row blocks in parallel (its rows are
// independent, so the result is the same as one call's).
func matmulFP8Ref(out []float32, qa, qb []byte, fa, fb tensor.FP8Format, invA, invB float32, N, C, OC int) {
	rows := max(1, (N+runtime.GOMAXPROCS(0)-1)/runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for n0 := 0; n0 < N; n0 += rows {
		n1 := min(N, n0+rows)
		wg.Add(1)
		go func() {
			defer wg.Done()
			cpu.MatmulFP8(out[n0*OC:n1*OC], qa[n0*C:n1*C], qb, fa, fb, invA, invB, n1-n0, C, OC)
		}()
	}
	wg.Wait()
}

// absFP8 returns q with every sign bit cleared: |x| in either format.
func absFP8(q []byte) []byte {
	r := make([]byte, len(q))
	for i, x := range q {
		r[i] = x &^ 0x80
	}
	return r
}

// checkMatmulFP8 compares the GPU's bf16 out with the CPU reference r
// rounded to bf16, element by element, within
//
//	bound = 2^-7·(|r| + acc) + acc,   acc = (2^-10 + 2·C·2^-24)·S + 2^-22·|r|
//
// where S = Σ_c |a_c·b_c|·invA·invB (sabs, the same reference on |a|, |b|).
// The terms:
//
//   - 2^-7·(|r| + acc): two roundings to bf16 (8 significant bits, half an
//     ulp is at most 2^-8 of the value relative, so 2^-7 for the two): the
//     GPU's of its fp32 result, at most acc away from r, and the
//     reference's, which can fall on either side of a tie point.
//   - 2·C·2^-24·S: fp32 accumulation in two different orders. Each product
//     of two FP8 values is exact in fp32, so the only errors are the sums'
//     roundings: a recursive sum of C terms is within (C-1)·u·Σ|terms| of
//     the exact sum (u = 2^-24; Higham, Accuracy and Stability of Numerical
//     Algorithms, §4.2), for the CPU's order and for the GPU's alike.
//   - 2^-10·S: Hopper's FP8 tensor-core MMA adds its products into the
//     accumulator with fewer bits than fp32 (aligned to the largest
//     exponent, about 14 significant bits kept, as published measurements
//     of H800 report); cuBLASLt without fast accumulation adds those
//     partial sums into fp32 periodically. Taking each MMA k-step to be in
//     error by at most 2^-12 of the largest magnitude in flight (13 bits
//     kept: one fewer than measured, for margin), that magnitude to be at
//     most the sum of |terms| since the last promotion, and a promotion
//     every 4 k-steps or sooner, the error is at most 4·2^-12·S = 2^-10·S.
//   - 2^-22·|r|: the scales, applied by the reference as (sum·invA)·invB and
//     by cuBLASLt as sum·(alpha·invA·invB): a few fp32 roundings apart.
//
// The 2^-10 term rests on that model, not on documentation; the test logs
// the largest error in units of S·2^-24 (the accumulation term's scale) and
// of bf16 ulps of r, so that a failure shows which term it breaks.
func checkMatmulFP8(t *testing.T, name string, got, r, sabs []float32, C, OC int) {
	t.Helper()
	bad := 0
	var worst, worstAcc, worstULP float64
	exact := 0
	for i, g := range got {
		ref := float64(tensor.BF16ToF32(tensor.BF16FromF32(r[i])))
		ar, s := math.Abs(float64(r[i])), float64(sabs[i])
		acc := (math.Ldexp(1, -10)+2*float64(C)*math.Ldexp(1, -24))*s + math.Ldexp(1, -22)*ar
		bound := math.Ldexp(1, -7)*(ar+acc) + acc
		diff := math.Abs(float64(g) - ref)
		if !(diff <= bound) { // NaN too
			if bad++; bad <= 5 {
				t.Errorf("%s: out[%d,%d] = %g, want %g (fp32 %g) within %.3g (S %g)", name, i/OC, i%OC, g, ref, r[i], bound, s)
			}
		}
		if diff == 0 {
			exact++
		}
		if s > 0 {
			worstAcc = max(worstAcc, diff/(s*math.Ldexp(1, -24)))
		}
		if ar > 0 {
			_, e := math.Frexp(ar) // ar in [2^(e-1), 2^e): a bf16 ulp is 2^(e-8)
			worstULP = max(worstULP, diff/math.Ldexp(1, e-8))
		}
		worst = max(worst, diff/bound)
	}
	if bad > 5 {
		t.Errorf("%s: %d of %d elements outside the bound", name, bad, len(got))
	}
	t.Logf("%s: worst error %.3f of the bound, %.1f·S·2^-24, %.2f bf16 ulps; %.1f%% equal to bf16(reference)",
		name, worst, worstAcc, worstULP, 100*float64(exact)/float64(len(got)))
}

// TestGPUMatmulFP8: MatmulFP8 against cpu.MatmulFP8 rounded to bf16 (see
// checkMatmulFP8 for the bound) at GPT-2's training shape (8192 rows:
// c_attn 768→2304), a decode-sized and a c_proj-sized one, and small odd
// tiles; E4M3·E4M3 (the forward) and E5M2·E4M3 (the gradient times the
// weight of the backward), activations N(0,1), weights N(0,0.02),
// gradients N(0,1e-3), each cast with the scale max/amax; out poisoned
// before each run. Each shape but the largest runs again with a second
// invA tensor (three times the first, at another address) through the same
// configured matmul: the scale pointers are per call. Needs sm_90.
func TestGPUMatmulFP8(t *testing.T) {
	g := gpuDev(t, true)
	if major, minor := g.Capability(); major*10+minor < fp8MinArch {
		err := g.matmulFP8P(toGPU(t, g, tensor.New(tensor.BF16, 16, 16)), 1, 1, tensor.E4M3, tensor.E4M3,
			toGPU(t, g, tensor.New(tensor.F32, 1)), toGPU(t, g, tensor.New(tensor.F32, 1)), 16, 16, 16)
		if !errors.Is(err, ErrArch) {
			t.Errorf("on sm_%d%d: %v, want ErrArch", major, minor, err)
		}
		_ = g.Sync()
		testreq.Skip(t, "DRUTO_GPU_FEATURE_TESTS", "no FP8 GEMM on %s (druto's FP8 operations need sm_90)", g.Name())
	}
	rng := testRNG(t)
	for _, fs := range [][2]tensor.FP8Format{{tensor.E4M3, tensor.E4M3}, {tensor.E5M2, tensor.E4M3}} {
		fa, fb := fs[0], fs[1]
		stdA := 1.0
		if fa == tensor.E5M2 {
			stdA = 1e-3
		}
		for _, sh := range [][3]int{{8192, 768, 2304}, {16, 768, 3072}, {64, 3072, 768}, {1, 16, 8}, {37, 48, 40}} {
			N, C, OC := sh[0], sh[1], sh[2]
			name := fmt.Sprintf("%s·%s (%d,%d,%d)", fa, fb, N, C, OC)
			qa, invA := fp8Operand(rng, N*C, stdA, fa)
			qb, invB := fp8Operand(rng, OC*C, 0.02, fb)
			a, b := fp8Upload(t, g, qa), fp8Upload(t, g, qb)
			hA, _ := tensor.FromF32([]float32{invA}, 1)
			hA3, _ := tensor.FromF32([]float32{3 * invA}, 1)
			hB, _ := tensor.FromF32([]float32{invB}, 1)
			dA, dA3, dB := toGPU(t, g, hA), toGPU(t, g, hA3), toGPU(t, g, hB)

			r, sabs := make([]float32, N*OC), make([]float32, N*OC)
			matmulFP8Ref(r, qa, qb, fa, fb, invA, invB, N, C, OC)
			matmulFP8Ref(sabs, absFP8(qa), absFP8(qb), fa, fb, invA, invB, N, C, OC)
			lts := len(g.lts)
			invs := []*tensor.Tensor{dA, dA3}
			if N*C*OC > 1<<28 {
				invs = invs[:1] // the second reference would cost as much again on the CPU
			}
			for run, inv := range invs {
				out := poisoned(t, g, tensor.BF16, N, OC)
				if err := g.matmulFP8P(out, a, b, fa, fb, inv, dB, N, C, OC); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				got := toHost(t, g, out).ToF32()
				if run == 0 {
					checkMatmulFP8(t, name, got, r, sabs, C, OC)
					continue
				}
				r3, sabs3 := make([]float32, N*OC), make([]float32, N*OC)
				matmulFP8Ref(r3, qa, qb, fa, fb, 3*invA, invB, N, C, OC)
				matmulFP8Ref(sabs3, absFP8(qa), absFP8(qb), fa, fb, 3*invA, invB, N, C, OC)
				checkMatmulFP8(t, name+" invA·3", got, r3, sabs3, C, OC)
			}
			if n := len(g.lts) - lts; n > 1 {
				t.Errorf("%s: %d cuBLASLt configurations made for one shape, want at most 1", name, n)
			}
			if OC%4 == 0 && N*C*OC <= 1<<28 {
				// f32 out, then MatmulFP8Add onto it: the product once, then twice.
				out := poisoned(t, g, tensor.F32, N, OC)
				if err := g.matmulFP8P(out, a, b, fa, fb, dA, dB, N, C, OC); err != nil {
					t.Fatalf("%s f32: %v", name, err)
				}
				checkMatmulFP8(t, name+" f32", toHost(t, g, out).F32(), r, sabs, C, OC)
				if err := g.matmulFP8AddP(out, a, b, fa, fb, dA, dB, N, C, OC); err != nil {
					t.Fatalf("%s add: %v", name, err)
				}
				r2, sabs2 := make([]float32, N*OC), make([]float32, N*OC)
				for i := range r {
					r2[i], sabs2[i] = 2*r[i], 2*sabs[i]
				}
				checkMatmulFP8(t, name+" f32 + add", toHost(t, g, out).F32(), r2, sabs2, C, OC)
			}
		}
	}
	for _, s := range g.LtChoices() {
		t.Logf("cuBLASLt: %s", s)
	}
}

// BenchmarkGPUMatmulFP8 times MatmulFP8 (E4M3·E4M3 → bf16) against the bf16
// Matmul (no bias, no activation: the same product in the working type) at
// GPT-2 124M's training GEMMs at B16 T1024 (N = 16384 rows: c_attn
// 768→2304, attention c_proj 768→768, c_fc 768→3072, MLP c_proj 3072→768,
// the LM head 768→50304), each timed with CUDA events (2 warm-up runs,
// then cuda.Context.Median of 20), and reports µs, TFLOP/s (2·N·C·OC per
// product) and the speedup over bf16 per shape.
func BenchmarkGPUMatmulFP8(b *testing.B) {
	fx.once.Do(fx.setup)
	if fx.err != nil {
		testreq.Skip(b, "DRUTO_REQUIRE_GPU", "no usable GPU: %v", fx.err)
	}
	g := fx.fused
	if major, minor := g.Capability(); major*10+minor < fp8MinArch {
		testreq.Skip(b, "DRUTO_GPU_FEATURE_TESTS", "no FP8 GEMM on %s (druto's FP8 operations need sm_90)", g.Name())
	}
	const N = 16 * 1024
	median := func(op func() error) (time.Duration, error) {
		for range 2 {
			if err := op(); err != nil {
				return 0, err
			}
		}
		d, err := g.ctx.Median(g.stream, 20, op)
		if err == nil {
			err = g.Sync()
		}
		return d, err
	}
	for _, sh := range []struct {
		name  string
		C, OC int
	}{{"c_attn", 768, 2304}, {"attn_proj", 768, 768}, {"c_fc", 768, 3072}, {"mlp_proj", 3072, 768}, {"lm_head", 768, 50304}} {
		C, OC := sh.C, sh.OC
		var ts []*tensor.Tensor
		alloc := func(dt tensor.DType, shape ...int) *tensor.Tensor {
			x, err := g.Alloc(dt, shape...)
			if err != nil {
				b.Fatal(err)
			}
			ts = append(ts, x)
			// 0x38 is 1.0 in E4M3, 0x3838 about 4.4e-5 in bf16 and 0x38383838
			// about 4.4e-5 in f32: finite operands and scales, no NaN paths
			if err := g.Stream().Memset8(cuda.DevicePtr(x.Dev), 0x38, uint64(x.Bytes())); err != nil {
				b.Fatal(err)
			}
			return x
		}
		qa, qb := alloc(tensor.I32, N*C/4), alloc(tensor.I32, OC*C/4)
		invA, invB, out8 := alloc(tensor.F32, 1), alloc(tensor.F32, 1), alloc(tensor.BF16, N, OC)
		inp, w, out := alloc(tensor.BF16, N, C), alloc(tensor.BF16, OC, C), alloc(tensor.BF16, N, OC)
		flops := 2 * float64(N) * float64(C) * float64(OC)
		b.Run(fmt.Sprintf("%s_%dx%dx%d", sh.name, N, C, OC), func(b *testing.B) {
			for range b.N {
				t8, err := median(func() error {
					return g.matmulFP8P(out8, cuda.DevicePtr(qa.Dev), cuda.DevicePtr(qb.Dev), tensor.E4M3, tensor.E4M3, invA, invB, N, C, OC)
				})
				if err != nil {
					b.Fatal(err)
				}
				t16, err := median(func() error {
					g.Matmul(out, nil, inp, w, nil, N, C, OC, device.None)
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				us8, us16 := float64(t8.Nanoseconds())/1e3, float64(t16.Nanoseconds())/1e3
				tf8, tf16 := flops/us8/1e6, flops/us16/1e6
				b.ReportMetric(us8, "us")
				b.ReportMetric(tf8, "TFLOP/s")
				b.ReportMetric(us16, "bf16_us")
				b.ReportMetric(tf16, "bf16_TFLOP/s")
				b.ReportMetric(us16/us8, "x_bf16")
				b.Logf("%s (%d,%d,%d): fp8 %.1f µs, %.0f TFLOP/s; bf16 %.1f µs, %.0f TFLOP/s; fp8 %.2fx bf16",
					sh.name, N, C, OC, us8, tf8, us16, tf16, us16/us8)
			}
		})
		for _, x := range ts {
			g.Free(x)
		}
	}
	for _, s := range g.LtChoices() {
		b.Logf("cuBLASLt: %s", s)
	}
}

// TestGPUMatmulFP8Bias: MatmulFP8 through device.FP8's tensor form with a
// bf16 bias: the product plus the bias, as the reference plus the bias
// within the product's tolerance, at the FP8 step's shapes (forward qkv
// and fc, e4m3·e4m3); it logs whether cuBLASLt ran the bias epilogue or
// the product and bias_add ran instead. Needs sm_90.
func TestGPUMatmulFP8Bias(t *testing.T) {
	g := gpuDev(t, true)
	if major, minor := g.Capability(); major*10+minor < fp8MinArch {
		testreq.Skip(t, "DRUTO_GPU_FEATURE_TESTS", "no FP8 GEMM on %s (druto's FP8 operations need sm_90)", g.Name())
	}
	rng := testRNG(t)
	for _, sh := range [][3]int{{512, 128, 384}, {8192, 768, 3072}} {
		N, C, OC := sh[0], sh[1], sh[2]
		name := fmt.Sprintf("bias (%d,%d,%d)", N, C, OC)
		qa, invA := fp8Operand(rng, N*C, 1, tensor.E4M3)
		qb, invB := fp8Operand(rng, OC*C, 0.02, tensor.E4M3)
		a := tensor.OnDevice(tensor.F8E4M3, uintptr(fp8Upload(t, g, qa)), N, C)
		b := tensor.OnDevice(tensor.F8E4M3, uintptr(fp8Upload(t, g, qb)), OC, C)
		hb := tensor.New(tensor.BF16, OC)
		bias := make([]float32, OC)
		for i := range bias {
			bias[i] = tensor.BF16ToF32(tensor.BF16FromF32(float32(rng.Norm())))
		}
		if err := hb.SetF32(bias); err != nil {
			t.Fatal(err)
		}
		hA, _ := tensor.FromF32([]float32{invA}, 1)
		hB, _ := tensor.FromF32([]float32{invB}, 1)
		out := poisoned(t, g, tensor.BF16, N, OC)
		g.MatmulFP8(out, a, b, toGPU(t, g, hb), toGPU(t, g, hA), toGPU(t, g, hB), N, C, OC)
		got := toHost(t, g, out).ToF32()
		r, sabs := make([]float32, N*OC), make([]float32, N*OC)
		matmulFP8Ref(r, qa, qb, tensor.E4M3, tensor.E4M3, invA, invB, N, C, OC)
		matmulFP8Ref(sabs, absFP8(qa), absFP8(qb), tensor.E4M3, tensor.E4M3, invA, invB, N, C, OC)
		for i := range r {
			r[i] += bias[i%OC]
			sabs[i] += float32(math.Abs(float64(bias[i%OC])))
		}
		checkMatmulFP8(t, name, got, r, sabs, C, OC)
		t.Logf("%s: %d configurations with the bias epilogue refused so far", name, len(g.fp8NoBias))
	}
}

// TestGPUMatmulFP8ScaleOffsets: MatmulFP8 with its inverse scales at byte
// offsets 0, 4, 8 and 12 of an allocation: offset 0 runs and is right;
// the others are refused with ErrFP8Args before cuBLASLt sees them (it
// answers CUBLAS_STATUS_NOT_SUPPORTED at run time for each; the run that
// showed it is in bench/results). Needs sm_90.
func TestGPUMatmulFP8ScaleOffsets(t *testing.T) {
	g := gpuDev(t, true)
	if major, minor := g.Capability(); major*10+minor < fp8MinArch {
		testreq.Skip(t, "DRUTO_GPU_FEATURE_TESTS", "no FP8 GEMM on %s (druto's FP8 operations need sm_90)", g.Name())
	}
	rng := testRNG(t)
	const N, C, OC = 512, 128, 384
	qa, invA := fp8Operand(rng, N*C, 1, tensor.E4M3)
	qb, invB := fp8Operand(rng, OC*C, 0.02, tensor.E4M3)
	a, b := fp8Upload(t, g, qa), fp8Upload(t, g, qb)
	r, sabs := make([]float32, N*OC), make([]float32, N*OC)
	matmulFP8Ref(r, qa, qb, tensor.E4M3, tensor.E4M3, invA, invB, N, C, OC)
	matmulFP8Ref(sabs, absFP8(qa), absFP8(qb), tensor.E4M3, tensor.E4M3, invA, invB, N, C, OC)
	for _, off := range []int{0, 1, 2, 3} {
		h := tensor.New(tensor.F32, 8)
		h.F32()[off], h.F32()[4+off] = invA, invB
		sc := toGPU(t, g, h)
		out := poisoned(t, g, tensor.BF16, N, OC)
		err := g.matmulFP8P(out, a, b, tensor.E4M3, tensor.E4M3, sc.MustView(off, 1), sc.MustView(4+off, 1), N, C, OC)
		serr := g.Sync()
		switch {
		case off == 0 && (err != nil || serr != nil):
			t.Errorf("aligned scales: %v, %v", err, serr)
		case off == 0:
			checkMatmulFP8(t, "offset 0", toHost(t, g, out).ToF32(), r, sabs, C, OC)
		case !errors.Is(err, ErrFP8Args):
			t.Errorf("scales at byte offset %d: %v, want ErrFP8Args", 4*off, err)
		}
	}
}
