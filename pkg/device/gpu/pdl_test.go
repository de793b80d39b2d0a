package gpu

// pdl_test.go: programmatic dependent launch (PDLEnv, kernels/common.cuh
// pdl_enter) on the GPU: which kernels use it, and that results do not
// change with it, in a chain of dependent launches captured as a graph
// and in the device-resident training step.

import (
	"math"
	"testing"

	"github.com/druto/druto/internal/testreq"
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/tensor"
	"github.com/druto/druto/pkg/train"
)

// withoutPDL runs fn with every launch of g a plain one.
func withoutPDL(g *Device, fn func()) {
	saved := g.pdl
	g.pdl = map[kernelKey]bool{}
	defer func() { g.pdl = saved }()
	fn()
}

// pdlDev returns the fused device, skipping where it launches nothing as a
// programmatic dependent launch (before sm_90, without NVRTC, or
// DRUTO_PDL=off), and checks that the kernels it does are all the ones
// that begin with pdl_enter.
func pdlDev(t *testing.T) *Device {
	t.Helper()
	g := gpuDev(t, true)
	if g.PDLKernels() == 0 {
		testreq.Skip(t, "DRUTO_GPU_FEATURE_TESTS", "no programmatic dependent launch on %s (it needs sm_90 or newer, the kernels compiled by NVRTC, and %s not off)", g.Name(), PDLEnv)
	}
	for _, k := range g.built {
		key := kernelKey{k.Kernel, k.dtype()}
		if want := k.Err == nil && pdlOK(k, g.ctx.Device.Major, true); g.pdl[key] != want {
			t.Errorf("%s: launched as a programmatic dependent launch: %v, want %v (PDL line %v, from %s)", k.Variant, g.pdl[key], want, k.PDL, k.From)
		}
	}
	if p := gpuDev(t, false); p.PDLKernels() != 0 {
		t.Errorf("the decomposed device launches %d kernels as programmatic dependent launches, want none", p.PDLKernels())
	}
	return g
}

// TestGPUPDLChain: 96 launches of add, each reading what the one before it
// wrote (x += y in place, fp32), captured as one CUDA graph: with
// programmatic dependent launch, each launch's blocks start while the
// previous one drains and must wait for its last write. x must equal the
// host's 96 fp32 additions bit for bit, and the same graph without PDL.
func TestGPUPDLChain(t *testing.T) {
	g := pdlDev(t)
	rng := testRNG(t)
	const n, k = 1<<22 + 5, 96
	x0, y := randHost(rng, tensor.F32, 0, 1, n), randHost(rng, tensor.BF16, 0, 1, n)
	want := clone(x0)
	yv := y.ToF32()
	for range k {
		w := want.F32()
		for i := range w {
			w[i] += yv[i]
		}
	}
	run := func() []float32 {
		x, yd := toGPU(t, g, x0), toGPU(t, g, y)
		gr, err := g.Capture(func() error {
			for range k {
				g.Add(x, x, yd, n)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("capture: %v", err)
		}
		defer gr.Close()
		if err := gr.Launch(); err != nil {
			t.Fatal(err)
		}
		return toHost(t, g, x).F32()
	}
	got := run()
	var plain []float32
	withoutPDL(g, func() { plain = run() })
	w := want.F32()
	for i := range w {
		if math.Float32bits(got[i]) != math.Float32bits(w[i]) || math.Float32bits(plain[i]) != math.Float32bits(w[i]) {
			t.Fatalf("x[%d] after %d dependent adds: PDL graph %v, plain graph %v, host %v", i, k, got[i], plain[i], w[i])
		}
	}
	t.Logf("RESULT %d dependent launches in one graph, %d kernels PDL-launched: equal to the host bit for bit, with and without PDL", k, g.PDLKernels())
}

// TestGPUPDLStep: 30 graph steps of the tiny model in bf16, with and
// without programmatic dependent launch, give bit-identical losses, norms
// and parameters (the own attention kernels: cuDNN's dq order varies).
func TestGPUPDLStep(t *testing.T) {
	g := pdlDev(t)
	ownAttention(t, g)
	const B, T, n = 8, 128, 30
	run := func() ([]train.Metric, []float32) {
		tr := graphTrainer(t, amp.BF16, train.StepGraph, B, T, n, nil, nil)
		defer tr.Close()
		m := runGraphSteps(t, tr, n)
		if tr.GraphStatus() != "graph" {
			t.Fatalf("graph status %q", tr.GraphStatus())
		}
		return m, params(t, tr)
	}
	pm, pp := run()
	var qm []train.Metric
	var qp []float32
	withoutPDL(g, func() { qm, qp = run() })
	for i := range pm {
		if math.Float32bits(pm[i].Loss) != math.Float32bits(qm[i].Loss) || math.Float32bits(pm[i].GradNorm) != math.Float32bits(qm[i].GradNorm) {
			t.Fatalf("step %d: with PDL loss %v norm %v, without %v %v: not bit-identical", i+1, pm[i].Loss, pm[i].GradNorm, qm[i].Loss, qm[i].GradNorm)
		}
	}
	for i := range pp {
		if math.Float32bits(pp[i]) != math.Float32bits(qp[i]) {
			t.Fatalf("parameter %d after %d steps: with PDL %v, without %v", i, n, pp[i], qp[i])
		}
	}
	t.Logf("RESULT %d graph steps tiny bf16 B%d_T%d: with PDL == without bit for bit (loss %.6f -> %.6f)", n, B, T, pm[0].Loss, pm[n-1].Loss)
}
