package gpu

import (
	"fmt"
	"testing"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// matmulShapes are (N, C, OC): one element, odd sizes, GPT-2 sizes.
var matmulShapes = [][3]int{{1, 1, 1}, {17, 1000, 17}, {1024, 768, 3072}, {33, 768, 1000}}

// dyadic returns a host tensor of fresh random multiples of 1/den with
// |value| <= k/den (k <= 8, den a power of two): exact in every dtype.
// Products of two such values and sums of up to a few thousand of them are
// exact in fp32, so a GEMM of dyadic operands has one correct result
// whatever its summation order: the GPU's and the CPU's then differ only by
// the roundings the op is specified to make, and a wiring error (a wrong
// transpose or leading dimension) cannot hide in the tolerance.
func dyadic(rng *tensor.RNG, dt tensor.DType, k int, den float64, shape ...int) *tensor.Tensor {
	h := tensor.New(dt, shape...)
	v := make([]float32, h.Numel())
	for i := range v {
		v[i] = float32(float64(rng.Intn(2*k+1)-k) / den)
	}
	if err := h.SetF32(v); err != nil {
		panic(err)
	}
	return h
}

// TestGPUMatmul checks Matmul against the CPU reference for every dtype,
// form, epilogue and bias, outputs poisoned first, on dyadic operands (the
// GEMM exact in fp32: |inp| <= 1/2 in steps of 1/16, |w| <= 1/8 in steps of
// 1/64, so |sum| <= 192 in steps of 1/1024 for C <= 3072, within fp32's 24
// bits). Tolerance scale 1 (the same roundings on both sides), except GELU
// in 16-bit at scale 2: cuBLASLt's GELU is its own approximation of the
// tanh form (fine to a 16-bit ulp, not to fp32, see matmul.go).
func TestGPUMatmul(t *testing.T) {
	rng := testRNG(t)
	for _, fused := range forms {
		g, ref := gpuDev(t, fused), cpuRef(fused)
		for _, dt := range floatDTypes {
			for _, sh := range matmulShapes {
				N, C, OC := sh[0], sh[1], sh[2]
				inp := dyadic(rng, dt, 8, 16, N, C)
				w := dyadic(rng, dt, 8, 64, OC, C)
				bias := dyadic(rng, dt, 8, 16, OC)
				for _, act := range []device.Activation{device.None, device.GELU} {
					for _, withBias := range []bool{true, false} {
						name := fmt.Sprintf("N%d_C%d_OC%d_act%d_bias%v", N, C, OC, act, withBias)
						b := bias
						if !withBias {
							b = nil
						}
						wantOut := tensor.New(dt, N, OC)
						var wantPre, gotPre, pre *tensor.Tensor
						if act == device.GELU {
							wantPre = tensor.New(dt, N, OC)
							pre = poisoned(t, g, dt, N, OC)
						}
						ref.Matmul(wantOut, wantPre, inp, w, b, N, C, OC, act)
						if err := ref.Sync(); err != nil {
							t.Fatal(err)
						}
						out := poisoned(t, g, dt, N, OC)
						var gb *tensor.Tensor
						if b != nil {
							gb = toGPU(t, g, b)
						}
						g.Matmul(out, pre, toGPU(t, g, inp), toGPU(t, g, w), gb, N, C, OC, act)
						got := toHost(t, g, out)
						// 16-bit outputs: cuBLASLt may split a long K and
						// add the parts in the output type (a 17x1000x17
						// bf16 product once landed 1.25x the tolerance off).
						tol, scale := dt, 1.0
						if dt != tensor.F32 {
							scale = sqrtScale(C)
							if act == device.GELU {
								scale *= 2
							}
						}
						check(t, "matmul", dt, fused, name, "out", got, wantOut, tol, scale)
						if pre != nil {
							gotPre = toHost(t, g, pre)
							check(t, "matmul", dt, fused, name, "pre", gotPre, wantPre, tol, scale)
						}
					}
				}
			}
		}
	}
	if fb := gpuDev(t, true).LtFallbacks(); len(fb) > 0 {
		t.Logf("cuBLASLt configurations that ran the decomposed sequence: %q", fb)
	}
}

// TestGPUMatmulBackward checks MatmulBackward's accumulation into random
// gradients (not zeros) for every dtype and form, with dout in the
// operands' dtype and, under the 16-bit policies, in fp32 (the residual
// gradient the model passes, which the GPU casts to the operand type),
// on dyadic values (see dyadic: dout and the initial gradients in steps of
// 1/16 up to 1/2, so every GEMM, the bias sums and the accumulation are
// exact in fp32, and an fp32 dout is exact in the 16-bit type): tolerance
// scale 1, except a 16-bit dinp at scale 2: cuBLAS rounds α·A·B to the
// 16-bit output type before it adds β·C, so accumulating into a non-zero
// 16-bit dinp rounds twice (seen on the H200: differences of exactly half
// an ulp of the product term where the result is near zero); the CPU
// rounds once. (The model accumulates into zeroed buffers: one rounding.)
func TestGPUMatmulBackward(t *testing.T) {
	rng := testRNG(t)
	for _, fused := range forms {
		g, ref := gpuDev(t, fused), cpuRef(fused)
		for _, dt := range floatDTypes {
			douts := []tensor.DType{dt}
			if dt != tensor.F32 {
				douts = append(douts, tensor.F32)
			}
			for _, sh := range matmulShapes {
				N, C, OC := sh[0], sh[1], sh[2]
				for _, doutDT := range douts {
					name := fmt.Sprintf("N%d_C%d_OC%d_dout%s", N, C, OC, doutDT)
					dout := dyadic(rng, doutDT, 8, 16, N, OC)
					inp := dyadic(rng, dt, 8, 16, N, C)
					w := dyadic(rng, dt, 8, 64, OC, C)
					dinp0 := dyadic(rng, dt, 8, 16, N, C)
					dw0 := dyadic(rng, tensor.F32, 8, 16, OC, C)
					db0 := dyadic(rng, tensor.F32, 8, 16, OC)
					wantDinp, wantDw, wantDb := clone(dinp0), clone(dw0), clone(db0)
					ref.MatmulBackward(wantDinp, wantDw, wantDb, dout, inp, w, N, C, OC)
					if err := ref.Sync(); err != nil {
						t.Fatal(err)
					}
					dinp, dw, db := toGPU(t, g, dinp0), toGPU(t, g, dw0), toGPU(t, g, db0)
					g.MatmulBackward(dinp, dw, db, toGPU(t, g, dout), toGPU(t, g, inp), toGPU(t, g, w), N, C, OC)
					scaleI := 1.0
					if dt != tensor.F32 {
						scaleI = 2
					}
					check(t, "matmul_backward", dt, fused, name, "dinp", toHost(t, g, dinp), wantDinp, dt, scaleI)
					check(t, "matmul_backward", dt, fused, name, "dweight", toHost(t, g, dw), wantDw, dt, 1)
					check(t, "matmul_backward", dt, fused, name, "dbias", toHost(t, g, db), wantDb, dt, 1)
				}
			}
		}
	}
	// dinp nil and dbias nil are allowed.
	g := gpuDev(t, true)
	N, C, OC := 5, 8, 3
	dw := poisoned(t, g, tensor.F32, OC, C)
	g.Zero(dw)
	g.MatmulBackward(nil, dw, nil, toGPU(t, g, randHost(rng, tensor.F32, 0, 1, N, OC)),
		toGPU(t, g, randHost(rng, tensor.F32, 0, 1, N, C)), toGPU(t, g, randHost(rng, tensor.F32, 0, 1, OC, C)), N, C, OC)
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
}
