package gpu

// flash_test.go: the flash-attention kernels (kernels/flash_attention.cu)
// against the CPU reference: forward out and lse, backward dq, dk, dv.

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/druto/druto/internal/testreq"
	"github.com/druto/druto/pkg/tensor"
)

// flashShapes are the (B, NH) pairs of TestGPUFlash: one head, and 48
// heads as GPT-2 small at B 4.
var flashShapes = [][2]int{{1, 1}, {4, 12}}

// flashTs are its sequence lengths: one row, a tail shorter than a tile, a
// whole number of tiles, a tail of 40 after 15 tiles, 16 tiles.
var flashTs = []int{1, 17, 128, 1000, 1024}

// flashInputs returns n normal values that bf16 and f16 both hold exactly
// (rounded to bf16, magnitudes below f16's normal range set to 0), so that
// one fp32 CPU reference serves both dtypes.
func flashInputs(rng *tensor.RNG, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		x := tensor.BF16ToF32(tensor.BF16FromF32(float32(rng.Norm())))
		if math.Abs(float64(x)) < 1.0/16384 {
			x = 0
		}
		v[i] = x
	}
	return v
}

// hostOf returns a host tensor of dtype dt holding v.
func hostOf(t *testing.T, dt tensor.DType, v []float32, shape ...int) *tensor.Tensor {
	t.Helper()
	h := tensor.New(dt, shape...)
	if err := h.SetF32(v); err != nil {
		t.Fatal(err)
	}
	if got := h.ToF32(); dt != tensor.F32 {
		for i := range v {
			if got[i] != v[i] {
				t.Fatalf("input %d: %g is not exact in %s (%g)", i, v[i], dt, got[i])
			}
		}
	}
	return h
}

// lseRef returns the log-sum-exp (B,NH,T) of each query row's causal
// scaled scores, in float64 from the fp32 qkv (B,T,3C), heads in parallel.
func lseRef(qkv []float32, B, T, C, NH int) []float32 {
	hs := C / NH
	scale := 1 / math.Sqrt(float64(hs))
	out := make([]float32, B*NH*T)
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for bh := 0; bh < B*NH; bh++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			b, h := bh/NH, bh%NH
			s := make([]float64, T)
			for t := 0; t < T; t++ {
				q := qkv[(b*T+t)*3*C+h*hs:][:hs]
				m := math.Inf(-1)
				for j := 0; j <= t; j++ {
					k := qkv[(b*T+j)*3*C+C+h*hs:][:hs]
					var d float64
					for i := range q {
						d += float64(q[i]) * float64(k[i])
					}
					s[j] = d * scale
					m = math.Max(m, s[j])
				}
				var sum float64
				for j := 0; j <= t; j++ {
					sum += math.Exp(s[j] - m)
				}
				out[bh*T+t] = float32(m + math.Log(sum))
			}
		}()
	}
	wg.Wait()
	return out
}

// flashCheck compares got with want under dt's tolerance times scale and
// fails naming the case, the output and the worst element's position,
// decoded by where (e.g. "b=0 t=17 h=3 d=5"); it also fails when the
// relative error ||got-want||/||want|| exceeds 2·rtol of dt (the host
// emulator of the kernels measured a quarter of that or less).
func flashCheck(t *testing.T, name, output string, got, want []float32, dt tensor.DType, scale float64, where func(i int) string) {
	t.Helper()
	e := relErr(got, want)
	t.Logf("RESULT flash %s %s relerr %.3g", name, output, e)
	if _, rtol := tensor.Tolerance(dt); e > 2*rtol {
		t.Errorf("flash %s: %s: relative error %.3g > 2·rtol(%s) = %.3g", name, output, e, dt, 2*rtol)
	}
	err := tensor.CloseF32(got, want, dt, scale)
	if err == nil {
		return
	}
	var m *tensor.Mismatch
	if errors.As(err, &m) {
		t.Errorf("flash %s: %s: %v; worst element %s (relative error %.3g)", name, output, err, where(m.Index), e)
		return
	}
	t.Errorf("flash %s: %s: %v", name, output, err)
}

// flashDTypes returns the 16-bit dtypes g runs the flash kernels for (bf16
// needs sm_80, f16 sm_75), logging why one is missing; it skips the test
// when there is none.
func flashDTypes(t *testing.T, g *Device) []tensor.DType {
	t.Helper()
	var dts []tensor.DType
	for _, dt := range []tensor.DType{tensor.BF16, tensor.F16} {
		if g.flash(dt, 32) && g.flash(dt, 64) && g.flash(dt, 128) {
			dts = append(dts, dt)
		} else {
			t.Logf("flash kernels for %s unavailable on %s: %v", dt, g.Name(), g.errs[kernelKey{"flash_fwd_hs64", dt}])
		}
	}
	if len(dts) == 0 {
		testreq.Skip(t, "DRUTO_GPU_FEATURE_TESTS", "no flash kernels on %s (bf16 needs sm_80, f16 sm_75)", g.Name())
	}
	return dts
}

// flashVariants returns the flash variants g runs for dt: 1, and 2
// (flash_fwd2_hsN, flash_bwd2_dot, flash_bwd2kv_hsN, flash_bwd2q_hsN:
// flashV2) where they are built; on sm_80 or newer a missing variant 2
// kernel is an error, except flash_bwd2kv_hs128 on GPUs with less than its
// 102.5 KB of shared memory a block (sm_86, sm_89: 99 KB; A100, H100 and
// H200 give it): there hs 128 keeps variant 1's backward, which variant
// 2's runs then test too.
func flashVariants(t *testing.T, g *Device, dt tensor.DType) []int {
	t.Helper()
	dev := g.Context().Device
	for _, k := range []string{"flash_fwd2_hs32", "flash_fwd2_hs64", "flash_fwd2_hs128", "flash_bwd2_dot",
		"flash_bwd2kv_hs32", "flash_bwd2kv_hs64", "flash_bwd2kv_hs128", "flash_bwd2q_hs32", "flash_bwd2q_hs64", "flash_bwd2q_hs128"} {
		if g.funcs[kernelKey{k, dt}] != nil {
			continue
		}
		err := g.errs[kernelKey{k, dt}]
		switch {
		case dev.Major < 8:
			t.Logf("flash variant 2 unavailable for %s on %s (sm_80+): %v", dt, g.Name(), err)
			return []int{1}
		case k == "flash_bwd2kv_hs128" && !(dev.Major == 8 && dev.Minor == 0) && dev.Major < 9:
			t.Logf("%s/%s unavailable on sm_%d%d (shared memory): hs 128 keeps the backward of variant 1: %v", k, dt, dev.Major, dev.Minor, err)
		default:
			t.Errorf("flash variant 2: %s/%s not built on sm_%d%d: %v", k, dt, dev.Major, dev.Minor, err)
			return []int{1}
		}
	}
	return []int{1, 2}
}

// setFlashVariant makes g run flash variant v (forward and backward) until
// the test ends.
func setFlashVariant(t *testing.T, g *Device, v int) {
	was := g.flashV2
	g.flashV2 = v == 2
	t.Cleanup(func() { g.flashV2 = was })
}

// TestGPUFlash checks the flash kernels against the fp32 CPU reference on
// inputs exact in both 16-bit types: out (NaN-poisoned first) and the
// log-sum-exp (NaN-poisoned), then the gradients accumulated into a dqkv
// pre-filled with random values, each of dq, dk and dv compared separately.
// hs 32, 64, 128; T 1, 17, 128, 1000, 1024; B·NH 1 and 48; bf16 and f16
// (those of the two the GPU has flash kernels for); each variant, forward
// and backward (1, and 2 where built: flashVariants), the failures named
// v1_... / v2_...; the backward's scratch (dd, variant 1's fp32 dq
// accumulator) NaN-poisoned before each backward.
//
// Tolerances (the tolerance rule of dt times a scale): out at scale 16 (p
// is rounded to dt before p·v, as the cuBLAS path rounds the
// probabilities, but the fp32 reference does not, so an output that
// cancels to ~0 keeps an error of ~ulp(p)/2·Σ p·|v|: up to ~0.008 in bf16,
// ~0.001 in f16, against atol·16 = 0.025 and 0.0031; the normaliser stays
// fp32); the lse at fp32's rule times 16 (fp32 sums of
// exact products over hs, exp2f/log2f); the gradients at scale 8: each is
// added to a random 16-bit value and rounded (half an ulp of a term of
// size ~3), dS and P are rounded to dt for the dq, dk and dv products, and
// D = rowsum(dout∘out) uses the rounded out (see TestGPUAttention's scale
// 6 for the cuBLAS path's share of the same).
func TestGPUFlash(t *testing.T) {
	g := gpuDev(t, true)
	ownAttention(t, g) // the own kernels (cuDNN's: TestGPUCuDNNAttention)
	dts := flashDTypes(t, g)
	ref := cpuRef(true)
	rng := testRNG(t)
	type dtVariant struct {
		dt tensor.DType
		v  int
	}
	var flashDTV []dtVariant
	for _, dt := range dts {
		for _, v := range flashVariants(t, g, dt) {
			flashDTV = append(flashDTV, dtVariant{dt, v})
		}
	}
	start := time.Now()
	for _, hs := range []int{32, 64, 128} {
		for _, T := range shortTo(flashTs, 3) {
			for _, sh := range flashShapes {
				B, NH := sh[0], sh[1]
				C := NH * hs
				base := fmt.Sprintf("hs%d_T%d_B%d_NH%d", hs, T, B, NH)
				qv := flashInputs(rng, B*T*3*C)
				dov := flashInputs(rng, B*T*C)
				d0v := flashInputs(rng, B*T*3*C)
				// fp32 CPU reference: out, probabilities, dqkv = d0 + grad, lse
				qkv := hostOf(t, tensor.F32, qv, B, T, 3*C)
				wantOut, att := tensor.New(tensor.F32, B, T, C), tensor.New(tensor.F32, B, NH, T, T)
				ref.Attention(wantOut, att, qkv, B, T, C, NH)
				want := hostOf(t, tensor.F32, d0v, B, T, 3*C)
				ref.AttentionBackward(want, hostOf(t, tensor.F32, dov, B, T, C), qkv, nil, att, B, T, C, NH)
				if err := ref.Sync(); err != nil {
					t.Fatal(err)
				}
				wantLSE := lseRef(qv, B, T, C, NH)
				wantD := want.F32()
				posOut := func(i int) string {
					return fmt.Sprintf("%d: b=%d t=%d h=%d d=%d", i, i/(T*C), i/C%T, i%C/hs, i%hs)
				}
				posLSE := func(i int) string { return fmt.Sprintf("%d: b=%d h=%d t=%d", i, i/(NH*T), i/T%NH, i%T) }
				for _, dv := range flashDTV {
					dt, v := dv.dt, dv.v
					setFlashVariant(t, g, v)
					name := fmt.Sprintf("v%d_%s_%s", v, dt, base)
					if st := g.AttentionState(dt, B, T, C, NH); st.DType != tensor.F32 || st.Numel() != B*NH*T {
						t.Fatalf("flash %s: AttentionState = %v %v, want f32 (B,NH,T)", name, st.DType, st.Shape)
					}
					gqkv := toGPU(t, g, hostOf(t, dt, qv, B, T, 3*C))
					out := poisoned(t, g, dt, B, T, C)
					lse := poisoned(t, g, tensor.F32, B, NH, T)
					g.Attention(out, lse, gqkv, B, T, C, NH)
					flashCheck(t, name, "out", toHost(t, g, out).ToF32(), wantOut.F32(), dt, 16, posOut)
					flashCheck(t, name, "lse", toHost(t, g, lse).F32(), wantLSE, tensor.F32, 16, posLSE)

					dqkv := toGPU(t, g, hostOf(t, dt, d0v, B, T, 3*C))
					// the backward's scratch NaN-poisoned: dd and variant 1's
					// fp32 dq accumulator must be written (zeroed) before they
					// are read
					for _, sc := range []struct {
						name  string
						bytes int
					}{{"attn.dd", B * NH * T * 4}, {"attn.dqacc", B * T * C * 4}} {
						if err := g.Stream().Memset8(g.scratch(sc.name, sc.bytes), 0xff, uint64(sc.bytes)); err != nil {
							t.Fatal(err)
						}
					}
					g.AttentionBackward(dqkv, toGPU(t, g, hostOf(t, dt, dov, B, T, C)), gqkv, out, lse, B, T, C, NH)
					got := toHost(t, g, dqkv).ToF32()
					// split dqkv into dq, dk, dv (B,T,C) each
					for part, pname := range []string{"dq", "dk", "dv"} {
						gp, wp := make([]float32, B*T*C), make([]float32, B*T*C)
						for r := 0; r < B*T; r++ {
							copy(gp[r*C:(r+1)*C], got[r*3*C+part*C:])
							copy(wp[r*C:(r+1)*C], wantD[r*3*C+part*C:])
						}
						// scale 16 as the forward's: a gradient row of a short
						// causal row (t=1: two keys) is a sum dS·K whose two
						// terms cancel, each rounded to dt on both sides
						flashCheck(t, name, pname, gp, wp, dt, 16, posOut)
					}
				}
			}
		}
	}
	t.Logf("TestGPUFlash took %v", time.Since(start).Round(time.Millisecond))
}

// TestGPUFlashParity: one gpt-2-sized attention (B 2, T 256, hs 64) through
// the flash kernels and through the cuBLAS path (noFlash) of the same
// fused device, on the same 16-bit inputs, agree within the tolerance rule
// at scale 16 (two approximations, each rounding p and the score gradient
// to dt in its own way): the fused path and its twin compute the same
// function; for each flash variant (flashVariants: 1, 2).
func TestGPUFlashParity(t *testing.T) {
	g := gpuDev(t, true)
	ownAttention(t, g)
	dts := flashDTypes(t, g)
	rng := testRNG(t)
	const B, T, C, NH = 2, 256, 256, 4
	for _, dt := range dts {
		for _, v := range flashVariants(t, g, dt) {
			setFlashVariant(t, g, v)
			qkv := toGPU(t, g, randHost(rng, dt, 0, 1, B, T, 3*C))
			dout := toGPU(t, g, randHost(rng, dt, 0, 1, B, T, C))
			run := func(noFlash bool) (out, dqkv []float32) {
				g.noFlash = noFlash
				defer func() { g.noFlash = false }()
				st := g.AttentionState(dt, B, T, C, NH)
				if noFlash != (len(st.Shape) == 4) {
					t.Fatalf("%s noFlash=%v: AttentionState %v %v", dt, noFlash, st.DType, st.Shape)
				}
				o := poisoned(t, g, dt, B, T, C)
				a := poisoned(t, g, st.DType, st.Shape...)
				d, err := g.Alloc(dt, B, T, 3*C)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { g.Free(d) })
				g.Attention(o, a, qkv, B, T, C, NH)
				g.AttentionBackward(d, dout, qkv, o, a, B, T, C, NH)
				return toHost(t, g, o).ToF32(), toHost(t, g, d).ToF32()
			}
			fo, fd := run(false)
			co, cd := run(true)
			pos := func(i int) string { return fmt.Sprint(i) }
			name := fmt.Sprintf("v%d_%s_parity", v, dt)
			flashCheck(t, name, "out vs cuBLAS path", fo, co, dt, 16, pos)
			flashCheck(t, name, "dqkv vs cuBLAS path", fd, cd, dt, 16, pos)
		}
	}
}
