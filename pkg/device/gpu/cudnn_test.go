package gpu

// cudnn_test.go: the cuDNN attention backend (cudnn.go): its settings on
// any machine; on a GPU with libcudnn.so.9, cuDNN's forward, log-sum-exp
// and gradients against the CPU reference, its state fed to the own
// backward, the model's step with it against the own kernels', and the
// step captured as a CUDA graph with it.

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/druto/druto/internal/gputest"
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/tensor"
	"github.com/druto/druto/pkg/train"
)

// TestAttentionEnv: DRUTO_ATTENTION takes own, cudnn, auto or nothing, and
// anything else is one line naming the variable.
func TestAttentionEnv(t *testing.T) {
	for v, want := range map[string]string{"": AttentionAuto, "auto": AttentionAuto, "own": AttentionOwn, "cudnn": AttentionCuDNN} {
		t.Setenv(AttentionEnv, v)
		if got, err := attentionEnv(); err != nil || got != want {
			t.Errorf("%s=%q: %q, %v; want %q", AttentionEnv, v, got, err, want)
		}
	}
	t.Setenv(AttentionEnv, "CUDNN")
	if _, err := attentionEnv(); err == nil || !strings.Contains(err.Error(), AttentionEnv) || strings.Contains(err.Error(), "\n") {
		t.Errorf("a bad value: %v", err)
	}
}

// TestDNNOff: DRUTO_ATTENTION=own and the decomposed form never load cuDNN,
// say why, and leave every attention shape to the own kernels.
func TestDNNOff(t *testing.T) {
	s := attnShape{B: 1, T: 8, C: 64, NH: 1, hs: 64, dt: tensor.BF16, flash: true}
	for _, c := range []struct {
		fused bool
		mode  string
		why   string
	}{{true, AttentionOwn, "DRUTO_ATTENTION=own"}, {false, AttentionAuto, "decomposed"}, {false, AttentionCuDNN, "decomposed"}} {
		d := &Device{fused: c.fused}
		d.initDNN(Config{}, c.mode)
		if got := d.AttentionBackend(); !strings.HasPrefix(got, "own (") || !strings.Contains(got, c.why) {
			t.Errorf("fused %v %s: backend %q, want own naming %q", c.fused, c.mode, got, c.why)
		}
		if d.dnnPlan(s, false) != nil || d.dnnPlan(s, true) != nil || d.dnn.lib != nil {
			t.Errorf("fused %v %s: a cuDNN plan without cuDNN", c.fused, c.mode)
		}
		if err := d.closeDNN(); err != nil {
			t.Error(err)
		}
	}
}

// cudnnDev returns the fused GPU device with cuDNN attention forced on
// (mode cudnn: no check against the own kernels) until the test ends; it
// skips (DRUTO_REQUIRE_GPU=1: fails) where cuDNN did not load.
func cudnnDev(t *testing.T) *Device {
	t.Helper()
	g := gpuDev(t, true)
	if g.dnn.h == nil {
		gputest.Skip(t, fmt.Errorf("cuDNN attention unavailable: %s", g.AttentionBackend()))
	}
	on, mode := g.dnn.on, g.dnn.mode
	g.dnn.on, g.dnn.mode = true, AttentionCuDNN
	t.Cleanup(func() { g.dnn.on, g.dnn.mode = on, mode })
	t.Logf("%s: attention %s", g.Name(), g.AttentionBackend())
	return g
}

// ownAttention keeps g's fused attention on the own flash kernels until
// the test ends (the tests of those kernels).
func ownAttention(t *testing.T, g *Device) {
	on := g.dnn.on
	g.dnn.on = false
	t.Cleanup(func() { g.dnn.on = on })
}

// TestGPUCuDNNAttention checks cuDNN's fused attention against the fp32
// CPU reference, as TestGPUFlash checks the own kernels and at its
// tolerances: out and the log-sum-exp NaN-poisoned first, then the store
// form's dq, dk, dv into a NaN-poisoned dqkv; and the own backward run on
// cuDNN's saved state (the states are interchangeable). hs 32, 64, 128; T
// 1, 17, 128, 1000, 1024; B·NH 1 and 48; bf16 and f16. A shape cuDNN
// refuses must fall back to the own kernels (the results are checked all
// the same); that is allowed at hs 32 only.
func TestGPUCuDNNAttention(t *testing.T) {
	g := cudnnDev(t)
	dts := flashDTypes(t, g)
	ref := cpuRef(true)
	rng := testRNG(t)
	for _, hs := range []int{32, 64, 128} {
		for _, T := range shortTo(flashTs, 3) {
			for _, sh := range flashShapes {
				B, NH := sh[0], sh[1]
				C := NH * hs
				base := fmt.Sprintf("hs%d_T%d_B%d_NH%d", hs, T, B, NH)
				qv := flashInputs(rng, B*T*3*C)
				dov := flashInputs(rng, B*T*C)
				qkv := hostOf(t, tensor.F32, qv, B, T, 3*C)
				wantOut, att := tensor.New(tensor.F32, B, T, C), tensor.New(tensor.F32, B, NH, T, T)
				ref.Attention(wantOut, att, qkv, B, T, C, NH)
				want := tensor.New(tensor.F32, B, T, 3*C)
				ref.AttentionBackward(want, hostOf(t, tensor.F32, dov, B, T, C), qkv, nil, att, B, T, C, NH)
				if err := ref.Sync(); err != nil {
					t.Fatal(err)
				}
				wantLSE := lseRef(qv, B, T, C, NH)
				posOut := func(i int) string {
					return fmt.Sprintf("%d: b=%d t=%d h=%d d=%d", i, i/(T*C), i/C%T, i%C/hs, i%hs)
				}
				posLSE := func(i int) string { return fmt.Sprintf("%d: b=%d h=%d t=%d", i, i/(NH*T), i/T%NH, i%T) }
				for _, dt := range dts {
					name := fmt.Sprintf("cudnn_%s_%s", dt, base)
					gqkv := toGPU(t, g, hostOf(t, dt, qv, B, T, 3*C))
					out := poisoned(t, g, dt, B, T, C)
					lse := poisoned(t, g, tensor.F32, B, NH, T)
					runs := g.dnn.runs
					g.Attention(out, lse, gqkv, B, T, C, NH)
					cudnnRan(t, g, name+" forward", dnnKey{B, T, NH, hs, dt, false}, runs)
					flashCheck(t, name, "out", toHost(t, g, out).ToF32(), wantOut.F32(), dt, 16, posOut)
					flashCheck(t, name, "lse", toHost(t, g, lse).F32(), wantLSE, tensor.F32, 16, posLSE)

					gdout := toGPU(t, g, hostOf(t, dt, dov, B, T, C))
					for _, own := range []bool{false, true} {
						dqkv := poisoned(t, g, dt, B, T, 3*C)
						runs = g.dnn.runs
						g.dnn.on = !own
						g.AttentionBackwardStore(dqkv, gdout, gqkv, out, lse, B, T, C, NH)
						g.dnn.on = true
						bname := name
						if own {
							bname += "_own_backward_on_cudnn_state"
						} else {
							cudnnRan(t, g, name+" backward", dnnKey{B, T, NH, hs, dt, true}, runs)
						}
						got, wantD := toHost(t, g, dqkv).ToF32(), want.F32()
						for part, pname := range []string{"dq", "dk", "dv"} {
							gp, wp := make([]float32, B*T*C), make([]float32, B*T*C)
							for r := 0; r < B*T; r++ {
								copy(gp[r*C:(r+1)*C], got[r*3*C+part*C:])
								copy(wp[r*C:(r+1)*C], wantD[r*3*C+part*C:])
							}
							flashCheck(t, bname, pname, gp, wp, dt, 8, posOut)
						}
					}
				}
			}
		}
	}
	for _, n := range g.AttentionNotes() {
		t.Logf("note: %s", n)
	}
}

// cudnnRan checks that the call ran cuDNN (a plan for k, one more run
// since runs), or, at hs 32 only, that it fell back to the own kernels
// with the reason recorded.
func cudnnRan(t *testing.T, g *Device, name string, k dnnKey, runs int64) {
	t.Helper()
	e, ok := g.dnn.plans[k]
	switch {
	case ok && e.plan != nil && g.dnn.runs == runs+1:
	case ok && e.err != nil && k.hs == 32:
		t.Logf("%s: cuDNN refused hs 32, the own kernels ran: %v", name, e.err)
	case ok && e.err != nil:
		t.Errorf("%s: cuDNN refused the shape (the own kernels ran): %v", name, e.err)
	default:
		t.Errorf("%s: cuDNN did not run (plan cached %v, runs %d -> %d)", name, ok, runs, g.dnn.runs)
	}
}

// cudnnTrainer is a trainer of the small preset (hs 64) on the fused GPU
// device, bf16.
func cudnnTrainer(t *testing.T, mode train.StepMode, B, T, steps int, notices *[]string) *train.Trainer {
	t.Helper()
	return presetTrainer(t, "small", amp.BF16, mode, B, T, steps, nil, notices)
}

// TestGPUCuDNNStep: 20 steps of the small model (fused bf16, B4 T256, hs
// 64) with cuDNN attention follow the own kernels' losses within relerr
// 1e-2 (two approximations of the same attention), and cuDNN ran forward
// and backward.
func TestGPUCuDNNStep(t *testing.T) {
	const B, T, n = 4, 256, 20
	g := cudnnDev(t)
	g.dnn.on = false
	own := cudnnTrainer(t, train.StepDevice, B, T, n, nil)
	defer own.Close()
	om := runGraphSteps(t, own, n)
	g.dnn.on = true
	runs := g.dnn.runs
	dnn := cudnnTrainer(t, train.StepDevice, B, T, n, nil)
	defer dnn.Close()
	dm := runGraphSteps(t, dnn, n)
	if g.dnn.runs == runs {
		t.Fatalf("cuDNN never ran in the step: %s; notes %q", g.AttentionBackend(), g.AttentionNotes())
	}
	for _, bwd := range []bool{false, true} {
		if e := g.dnn.plans[dnnKey{B, T, 4, 64, tensor.BF16, bwd}]; e.plan == nil {
			t.Errorf("no cuDNN plan for the step's attention (backward %v): %v", bwd, e.err)
		}
	}
	worst := 0.0
	for i := range om {
		worst = math.Max(worst, math.Abs(float64(dm[i].Loss-om[i].Loss))/math.Abs(float64(om[i].Loss)))
	}
	t.Logf("RESULT cudnn step small bf16 B%d_T%d %d steps: loss step 1 own %.6f cudnn %.6f, step %d own %.6f cudnn %.6f; worst relerr %.3g",
		B, T, n, om[0].Loss, dm[0].Loss, n, om[n-1].Loss, dm[n-1].Loss, worst)
	if worst > 1e-2 {
		t.Errorf("cuDNN's step losses leave the own kernels' by relerr %.3g (> 1e-2)", worst)
	}
}

// TestGPUCuDNNGraph: the small model's step with cuDNN attention captured
// as a CUDA graph (captured once, cuDNN's execute inside it) replays to the
// losses of the same step with plain launches within relerr 1e-3 (cuDNN's
// backward may accumulate dq in a different order each run).
func TestGPUCuDNNGraph(t *testing.T) {
	const B, T, n = 4, 256, 20
	g := cudnnDev(t)
	var notices []string
	runs := g.dnn.runs
	gr := cudnnTrainer(t, train.StepGraph, B, T, n, &notices)
	defer gr.Close()
	gm := runGraphSteps(t, gr, n)
	if gr.GraphStatus() != "graph" || gr.GraphBuilds() != 1 {
		t.Fatalf("graph trainer with cuDNN: status %q, %d graphs built, notices %q; want graph, 1", gr.GraphStatus(), gr.GraphBuilds(), notices)
	}
	if g.dnn.runs == runs {
		t.Fatalf("cuDNN never ran: %s; notes %q", g.AttentionBackend(), g.AttentionNotes())
	}
	if g.dnn.runs-runs >= int64(2*4*n) {
		t.Errorf("%d cuDNN runs queued from the host in %d steps: the graph did not replay them", g.dnn.runs-runs, n)
	}
	pl := cudnnTrainer(t, train.StepDevice, B, T, n, nil)
	defer pl.Close()
	pm := runGraphSteps(t, pl, n)
	worst := 0.0
	for i := range gm {
		worst = math.Max(worst, math.Abs(float64(gm[i].Loss-pm[i].Loss))/math.Abs(float64(pm[i].Loss)))
	}
	t.Logf("RESULT cudnn graph small bf16 B%d_T%d %d steps: loss step %d graph %.6f plain %.6f; worst relerr %.3g",
		B, T, n, n, gm[n-1].Loss, pm[n-1].Loss, worst)
	if worst > 1e-3 {
		t.Errorf("the captured step's losses leave the plain step's by relerr %.3g (> 1e-3)", worst)
	}
}
