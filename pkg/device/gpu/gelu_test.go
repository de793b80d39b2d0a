package gpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// geluSizes: one element, odd sizes (the scalar tail), a GPT-2 MLP
// activation of 1024 rows (3·2^20), and 8·2^20 + 5: several vectors per
// thread of gelu_backward2's persistent grid (its next-vector loads), with
// a 5-element tail.
var geluSizes = []int{1, 17, 4099, 1024 * 3072, 8<<20 + 5}

// TestGPUGELUBackward checks GELUBackward, both forms, against the CPU
// reference, into a poisoned dinp and in place (dinp = dout, as the model
// calls it). tanh is a few ulps from exact on both devices (Go's float32
// tanh32 and CUDA's tanhf differ), and where tanh is within a few ulps of
// ±1 (|x| near 4.5) the derivative's sech² term multiplies its absolute
// error by 2|x|·0.5·√(2/π)·(1 + 3·0.044715·x²) ≈ 13: F32 results then
// differ by up to ~5e-6 absolute, so F32 is checked at scale 8; in the
// 16-bit types the rounding of the result dominates (scale 2).
//
// The fused form, gelu_backward2, makes 16-byte accesses and, for 16-bit
// types, takes tanh from the fast exp2 and reciprocal (~1e-7 absolute, far
// inside their rounding). A view one element into its buffer (not 16-byte
// aligned) checks its scalar path.
func TestGPUGELUBackward(t *testing.T) {
	rng := testRNG(t)
	for _, fused := range []bool{true, false} {
		g, ref := gpuDev(t, fused), cpuRef(fused)
		for _, dt := range floatDTypes {
			for _, n := range trim(geluSizes) {
				inp, dout := randHost(rng, dt, 0, 2, n), randHost(rng, dt, 0, 1, n)
				want := tensor.New(dt, n)
				ref.GELUBackward(want, inp, dout, n)
				if err := ref.Sync(); err != nil {
					t.Fatal(err)
				}
				ginp := toGPU(t, g, inp)
				dinp := poisoned(t, g, dt, n)
				g.GELUBackward(dinp, ginp, toGPU(t, g, dout), n)
				scale := 2.0
				if dt == tensor.F32 {
					scale = 8
				}
				check(t, "gelu_backward", dt, fused, fmt.Sprintf("n%d", n), "dinp", toHost(t, g, dinp), want, dt, scale)
				inplace := toGPU(t, g, dout)
				g.GELUBackward(inplace, ginp, inplace, n)
				check(t, "gelu_backward", dt, fused, fmt.Sprintf("n%d_inplace", n), "dinp", toHost(t, g, inplace), want, dt, scale)
				if n == 4099 { // views one element in: the scalar path
					pin, pout := randHost(rng, dt, 0, 2, n+1), randHost(rng, dt, 0, 1, n+1)
					ref.GELUBackward(want, pin.MustView(1, n), pout.MustView(1, n), n)
					if err := ref.Sync(); err != nil {
						t.Fatal(err)
					}
					od := poisoned(t, g, dt, n+1)
					g.GELUBackward(od.MustView(1, n), toGPU(t, g, pin).MustView(1, n), toGPU(t, g, pout).MustView(1, n), n)
					check(t, "gelu_backward", dt, fused, fmt.Sprintf("n%d_off1", n), "dinp", toHost(t, g, od).MustView(1, n), want, dt, scale)
				}
			}
		}
	}
}

// geluRef is the tanh-form GELU in float64.
func geluRef(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

// TestGPUGELUForward checks matmul.go's GELU and bias-add helpers, one pass
// and the eight-pass composite, against float64 (rounded to the dtype).
// Scale 2: a handful of fp32 roundings and tanhf's ulps against an exact
// reference.
func TestGPUGELUForward(t *testing.T) {
	rng := testRNG(t)
	for _, fused := range forms {
		g := gpuDev(t, fused)
		for _, dt := range floatDTypes {
			for _, sh := range [][2]int{{1, 1}, {17, 33}, {1024, 3072}} {
				N, OC := sh[0], sh[1]
				n := N * OC
				pre, bias := randHost(rng, dt, 0, 2, N, OC), randHost(rng, dt, 0, 0.5, OC)
				// pre + bias, rounded as the stored pre-activation is
				x, b := pre.ToF32(), bias.ToF32()
				sum := make([]float32, n)
				for i := range sum {
					sum[i] = x[i] + b[i%OC]
				}
				wantPre := tensor.New(dt, N, OC)
				if err := wantPre.SetF32(sum); err != nil {
					t.Fatal(err)
				}
				ys := wantPre.ToF32()
				for i := range ys {
					ys[i] = float32(geluRef(float64(ys[i])))
				}
				want := tensor.New(dt, N, OC)
				if err := want.SetF32(ys); err != nil {
					t.Fatal(err)
				}
				gpre := toGPU(t, g, pre)
				if !g.biasAdd(gpre, toGPU(t, g, bias), N, OC) {
					t.Fatal(g.Sync())
				}
				name := fmt.Sprintf("N%d_OC%d", N, OC)
				check(t, "bias_add", dt, fused, name, "out", toHost(t, g, gpre), wantPre, dt, 1)
				out := poisoned(t, g, dt, N, OC)
				ok := g.geluForward(out, gpre, n)
				form := "gelu_forward"
				if !fused {
					ok, form = g.geluForwardDecomposed(out, gpre, n), "gelu_forward_decomposed"
				}
				if !ok {
					t.Fatal(g.Sync())
				}
				check(t, form, dt, fused, name, "out", toHost(t, g, out), want, dt, 2)
			}
		}
	}
}
