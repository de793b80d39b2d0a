package gpu

// tma_test.go: the kernels whose rows Hopper's bulk-copy engine brings into
// shared memory (tmaKernels, sm_90 with NVRTC 12+) against the kernels they
// replace, at GPT-2's shapes. crossentropy_fused_tma against
// crossentropy_fused_l3 at GPT-2's vocabulary: rows of 100 KB, three or
// more rows a block (both row buffers, each refilled), masked logits,
// targets at the row's ends and out of range. layernorm_backward_tma_rf32
// against layernorm_backward_rf32 (TestGPULayerNormBackwardTMA).

import (
	"math"
	"testing"

	"github.com/druto/druto/internal/testreq"
	"github.com/druto/druto/pkg/tensor"
)

func TestGPUCrossEntropyTMA(t *testing.T) {
	g := gpuDev(t, true)
	for _, k := range g.built {
		key := kernelKey{k.Kernel, k.dtype()}
		if k.Kernel == kernCETMA && k.Err == nil && g.nvrtc != nil && tmaOK(k, g.ctx.Device.Major, g.nvrtc.Major) != (g.tmaSmem[key] > 0) {
			t.Errorf("%s: shared memory granted %d, runs its TMA code: %v", k.Variant, g.tmaSmem[key], !(g.tmaSmem[key] > 0))
		}
	}
	if len(g.tmaSmem) == 0 {
		testreq.Skip(t, "DRUTO_GPU_FEATURE_TESTS", "%s has no crossentropy_fused_tma (it needs sm_90 or newer and the kernels compiled by NVRTC 12 or newer)", g.Name())
	}
	rng := testRNG(t)
	const V = 50304
	N := 3*g.sms() + 7
	for _, dt := range []tensor.DType{tensor.BF16, tensor.F16} {
		if g.tmaSmem[kernelKey{kernCETMA, dt}] < 2*V*dt.Size() {
			t.Errorf("%s: %d bytes of shared memory for crossentropy_fused_tma, want two rows of %d", dt, g.tmaSmem[kernelKey{kernCETMA, dt}], V*dt.Size())
			continue
		}
		x := randHost(rng, dt, 0, 2, N, V)
		xv := x.ToF32()
		inf := float32(math.Inf(-1))
		for j := 0; j < V; j += 3 {
			xv[j] = inf // row 0: a third of the vocabulary masked
		}
		tg := make([]int32, N)
		for i := range tg {
			tg[i] = int32(rng.Intn(V))
		}
		tg[0], tg[1], tg[2], tg[3] = 1, V-1, 0, V // row 3: out of range (NaN loss)
		if err := x.SetF32(xv); err != nil {
			t.Fatal(err)
		}
		targets, err := tensor.FromI32(tg, N)
		if err != nil {
			t.Fatal(err)
		}
		td := toGPU(t, g, targets)
		dscale := float32(1) / float32(N)
		run := func(noTMA bool, ds float32) (loss, grad []float32) {
			g.noTMA = noTMA
			defer func() { g.noTMA = false }()
			xd, ld := toGPU(t, g, x), poisoned(t, g, tensor.F32, N)
			g.CrossEntropy(ld, xd, td, N, V, ds)
			return toHost(t, g, ld).F32(), toHost(t, g, xd).ToF32()
		}
		lt, gt := run(false, dscale)
		l3, g3 := run(true, dscale)
		lo, xo := run(false, 0)
		for i := range N {
			if i == 3 {
				if !math.IsNaN(float64(lt[i])) || !math.IsNaN(float64(lo[i])) {
					t.Errorf("%s row %d (target out of range): loss %v and loss-only %v, want NaN", dt, i, lt[i], lo[i])
				}
				continue
			}
			if d := math.Abs(float64(lt[i] - l3[i])); d > 1e-5*math.Abs(float64(l3[i]))+1e-6 || lo[i] != lt[i] {
				t.Errorf("%s row %d: loss %v (loss only %v), crossentropy_fused_l3 %v", dt, i, lt[i], lo[i], l3[i])
			}
		}
		// The gradients come from the same formulas; only the sums' order
		// differs, so within an ulp of the 16-bit type.
		// (f16's subnormals: an ulp of 2^-24)
		ulp := map[tensor.DType]float64{tensor.BF16: 1.0 / 128, tensor.F16: 1.0 / 1024}[dt]
		tiny := map[tensor.DType]float64{tensor.BF16: 1e-38, tensor.F16: 0x1p-24}[dt]
		bad := 0
		for i, v := range gt {
			if d := math.Abs(float64(v - g3[i])); d > ulp*math.Abs(float64(g3[i]))+tiny || math.IsNaN(float64(v)) != math.IsNaN(float64(g3[i])) {
				if bad++; bad <= 5 {
					t.Errorf("%s gradient [%d, %d]: %v, crossentropy_fused_l3 %v", dt, i/V, i%V, v, g3[i])
				}
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d gradient elements differ by more than an ulp", dt, bad, len(gt))
		}
		for i, v := range xo {
			if v != xv[i] && !(math.IsNaN(float64(v)) && math.IsNaN(float64(xv[i]))) {
				t.Fatalf("%s: the loss-only launch changed logit [%d, %d]: %v, was %v", dt, i/V, i%V, v, xv[i])
			}
		}
	}
}

// TestGPULayerNormBackwardTMA: layernorm_backward_tma_rf32 against
// layernorm_backward_rf32 at GPT-2's width, with more chunks than a block's
// ring holds and a partial last chunk: dinp bit for bit (the same per-row
// arithmetic), dweight and dbias within fp32 rounding (the rows are summed
// in another order).
func TestGPULayerNormBackwardTMA(t *testing.T) {
	g := gpuDev(t, true)
	if g.tmaSmem[kernelKey{kernLNBackTMA, tensor.BF16}] == 0 {
		testreq.Skip(t, "DRUTO_GPU_FEATURE_TESTS", "%s has no layernorm_backward_tma_rf32 (it needs sm_90 or newer and the kernels compiled by NVRTC 12 or newer)", g.Name())
	}
	rng := testRNG(t)
	const C = 768
	N := 5*lnTMARows*g.sms() + 5
	dout, inp := randHost(rng, tensor.BF16, 0, 1, N, C), randHost(rng, tensor.F32, 0.5, 2, N, C)
	w, mean, rstd := randHost(rng, tensor.BF16, 1, 0.2, C), randHost(rng, tensor.F32, 0.5, 0.1, N), randHost(rng, tensor.F32, 1, 0.1, N)
	dinp0, dw0, db0 := randHost(rng, tensor.F32, 0, 1, N, C), randHost(rng, tensor.F32, 0, 1, C), randHost(rng, tensor.F32, 0, 1, C)
	run := func(noTMA bool) (dinp, dw, db []float32) {
		// the TMA kernel against layernorm_backward_rf32, not the
		// fixed-width kernel that C = 768 takes by default
		g.noTMA, g.noFixed = noTMA, true
		defer func() { g.noTMA, g.noFixed = false, false }()
		di, dwd, dbd := toGPU(t, g, dinp0), toGPU(t, g, dw0), toGPU(t, g, db0)
		g.LayerNormBackward(di, dwd, dbd, toGPU(t, g, dout), toGPU(t, g, inp), toGPU(t, g, w), toGPU(t, g, mean), toGPU(t, g, rstd), N, C)
		return toHost(t, g, di).F32(), toHost(t, g, dwd).F32(), toHost(t, g, dbd).F32()
	}
	ti, tw, tb := run(false)
	pi, pw, pb := run(true)
	bad := 0
	for i := range ti {
		if math.Float32bits(ti[i]) != math.Float32bits(pi[i]) {
			if bad++; bad <= 5 {
				t.Errorf("dinp[%d, %d]: %v, layernorm_backward_rf32 %v", i/C, i%C, ti[i], pi[i])
			}
		}
	}
	if bad > 0 {
		t.Errorf("dinp: %d of %d elements differ", bad, len(ti))
	}
	for _, p := range []struct {
		name      string
		got, want []float32
	}{{"dweight", tw, pw}, {"dbias", tb, pb}} {
		var rms float64
		for _, v := range p.want {
			rms += float64(v) * float64(v)
		}
		rms = math.Sqrt(rms / float64(len(p.want)))
		for i := range p.got {
			if d := math.Abs(float64(p.got[i] - p.want[i])); d > 1e-5*rms || math.IsNaN(float64(p.got[i])) {
				t.Errorf("%s[%d]: %v, layernorm_backward_rf32 %v (rms %.3g)", p.name, i, p.got[i], p.want[i], rms)
				break
			}
		}
	}
}
