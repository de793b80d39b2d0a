package gpu

// graph_test.go: the device-resident step and its CUDA graph on the GPU
// (TestGPUGraph*), and the launch signatures of step.go's kernels checked
// against the PTX on any machine (TestLaunchSignaturesStep).

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/optim"
	"github.com/druto/druto/pkg/tensor"
	"github.com/druto/druto/pkg/train"
)

func TestLaunchSignaturesStep(t *testing.T) {
	sigs := signatures(t)
	F := tensor.F32
	const N, V, total = 34, 50, 3000
	layout := &tensor.Layout{Total: total, Segments: []tensor.Segment{{Name: "w", Offset: 0, Shape: tensor.Shape{total}, Decay: true}}}
	for _, h := range floatDTypes {
		cases := []struct {
			name, want string
			call       func(d *Device)
		}{
			{"CrossEntropyScaled", "crossentropy_fused_l3", func(d *Device) {
				d.CrossEntropyScaled(dev(F, N), dev(h, N, V), dev(tensor.I32, N), dev(F, device.StateLen), N, V, 0.5)
			}},
			{"StepUpdate", "gradnorm_partial2 step_update", func(d *Device) {
				d.StepUpdate(dev(F, device.StateLen), dev(F, N), dev(F, total), device.StepConfig{Scaler: true, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 2000, ClipNorm: 1},
					device.AdamW{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1})
			}},
			{"AdamWState", "adamw_fused_state2", func(d *Device) {
				d.AdamWState(dev(F, total), dev(h, total), dev(F, total), dev(F, total), dev(F, total), layout,
					device.AdamW{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1}, dev(F, device.StateLen))
			}},
		}
		for _, c := range cases {
			got, err := hooked(t, true, c.call)
			name := c.name + " " + h.String()
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if seq := strings.Join(checkSigs(t, name, sigs, got), " "); seq != c.want {
				t.Errorf("%s: launches %q, want %q", name, seq, c.want)
			}
		}
	}
}

// graphTrainer builds a trainer of the tiny preset on the fused GPU device.
func graphTrainer(t *testing.T, pol amp.Policy, mode train.StepMode, B, T, steps int, inject func(int) float32, notices *[]string) *train.Trainer {
	t.Helper()
	return presetTrainer(t, "tiny", pol, mode, B, T, steps, inject, notices)
}

// presetTrainer builds a trainer of a preset on the fused GPU device.
func presetTrainer(t *testing.T, preset string, pol amp.Policy, mode train.StepMode, B, T, steps int, inject func(int) float32, notices *[]string) *train.Trainer {
	t.Helper()
	d := gpuDev(t, true)
	cfg, err := gpt.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	toks, err := data.Encode(data.Corpus(1, 256<<10))
	if err != nil {
		t.Fatal(err)
	}
	oc := optim.Defaults(steps)
	oc.Warmup = 5
	o := train.Options{Config: cfg, Policy: pol, Batch: B, Seq: T, Optim: oc, Seed: 3, Step: mode, LogEvery: 10, InjectGrad: inject}
	if notices != nil {
		o.Notice = func(s string) { *notices = append(*notices, s) }
	}
	tr, err := train.New(d, o, toks, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func runGraphSteps(t *testing.T, tr *train.Trainer, n int) []train.Metric {
	t.Helper()
	var out []train.Metric
	if err := tr.Run(context.Background(), n, func(m train.Metric) { out = append(out, m) }); err != nil {
		t.Fatal(err)
	}
	return out
}

func params(t *testing.T, tr *train.Trainer) []float32 {
	t.Helper()
	p, err := tr.Model.Params()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGPUGraphBitIdentical: 50 steps of the tiny model (fused bf16, B8
// T128) as a replayed CUDA graph and with plain launches give bit-identical
// losses, norms and final parameters (same kernels, same order); the graph
// is captured once. The host step is logged beside them.
func TestGPUGraphBitIdentical(t *testing.T) {
	const B, T, n = 8, 128, 50
	// cuDNN's backward sums dq in an order that varies from run to run
	// (graph and plain steps differed in a last bit on the H200):
	// bit-identity holds for the own kernels
	ownAttention(t, gpuDev(t, true))
	var notices []string
	g := graphTrainer(t, amp.BF16, train.StepGraph, B, T, n, nil, &notices)
	defer g.Close()
	p := graphTrainer(t, amp.BF16, train.StepDevice, B, T, n, nil, nil)
	defer p.Close()
	h := graphTrainer(t, amp.BF16, train.StepHost, B, T, n, nil, nil)
	defer h.Close()
	gm, pm, hm := runGraphSteps(t, g, n), runGraphSteps(t, p, n), runGraphSteps(t, h, n)
	if g.GraphStatus() != "graph" || g.GraphBuilds() != 1 {
		t.Fatalf("graph trainer: status %q, %d graphs built, notices %q; want graph, 1", g.GraphStatus(), g.GraphBuilds(), notices)
	}
	for i := range gm {
		if math.Float32bits(gm[i].Loss) != math.Float32bits(pm[i].Loss) || math.Float32bits(gm[i].GradNorm) != math.Float32bits(pm[i].GradNorm) {
			t.Fatalf("step %d: graph loss %v norm %v, plain loss %v norm %v: not bit-identical", i+1, gm[i].Loss, gm[i].GradNorm, pm[i].Loss, pm[i].GradNorm)
		}
	}
	gp, pp := params(t, g), params(t, p)
	for i := range gp {
		if math.Float32bits(gp[i]) != math.Float32bits(pp[i]) {
			t.Fatalf("parameter %d after %d steps: graph %v, plain %v", i, n, gp[i], pp[i])
		}
	}
	worst := 0.0
	for i := range gm {
		worst = math.Max(worst, math.Abs(float64(gm[i].Loss-hm[i].Loss))/math.Abs(float64(hm[i].Loss)))
	}
	t.Logf("RESULT graph tiny bf16 B%d_T%d %d steps: graph == plain bit for bit; loss step 1 %.6f, step %d %.6f; host step's losses within relerr %.3g",
		B, T, n, gm[0].Loss, n, gm[n-1].Loss, worst)
	if worst > 1e-3 {
		t.Errorf("the device step's losses leave the host step's by relerr %.3g (> 1e-3)", worst)
	}
	if !(gm[n-1].Loss < gm[0].Loss) {
		t.Errorf("loss did not fall in %d steps: %v -> %v", n, gm[0].Loss, gm[n-1].Loss)
	}
	// Each device-resident step is timed between its own marks (CUDA
	// events); the host step is not.
	for i := range gm {
		if !(gm[i].DeviceMs > 0 && pm[i].DeviceMs > 0) || hm[i].DeviceMs != 0 {
			t.Fatalf("step %d: device ms graph %v, plain %v, host %v; want > 0, > 0, 0", i+1, gm[i].DeviceMs, pm[i].DeviceMs, hm[i].DeviceMs)
		}
	}
}

// TestGPUGraphFP16Skip: fp16 with +Inf injected into the gradients of
// steps 5, 6 and 17, which run as replays of the captured graph (the graph
// is captured at step 2): each is skipped and halves the scale, and the
// scale, the skip count and the optimizer's step count follow the host
// GradScaler's step for step (growth interval 8, so the scale also grows).
func TestGPUGraphFP16Skip(t *testing.T) {
	const B, T, n = 8, 128, 30
	inject := func(s int) float32 {
		if s == 5 || s == 6 || s == 17 {
			return float32(math.Inf(1))
		}
		return 0
	}
	g := graphTrainer(t, amp.FP16, train.StepGraph, B, T, n, inject, nil)
	defer g.Close()
	h := graphTrainer(t, amp.FP16, train.StepHost, B, T, n, inject, nil)
	defer h.Close()
	g.Scaler.GrowthInterval, h.Scaler.GrowthInterval = 8, 8
	gm, hm := runGraphSteps(t, g, n), runGraphSteps(t, h, n)
	if g.GraphStatus() != "graph" || g.GraphBuilds() != 1 {
		t.Fatalf("graph trainer: status %q, %d graphs built; want graph, 1", g.GraphStatus(), g.GraphBuilds())
	}
	for i := range gm {
		if gm[i].LossScale != hm[i].LossScale || gm[i].Skipped != hm[i].Skipped {
			t.Fatalf("step %d: graph scale %g skipped %d, host GradScaler scale %g skipped %d", i+1, gm[i].LossScale, gm[i].Skipped, hm[i].LossScale, hm[i].Skipped)
		}
	}
	// The injected steps are skipped whatever else overflows on its own
	// (the host run would show it too): each adds one skip and halves.
	for _, s := range []int{5, 6, 17} {
		if gm[s-1].Skipped != gm[s-2].Skipped+1 || gm[s].LossScale != gm[s-1].LossScale/2 {
			t.Fatalf("injected step %d: skipped %d -> %d, scale %g -> %g at the next step; want one more skip and the scale halved",
				s, gm[s-2].Skipped, gm[s-1].Skipped, gm[s-1].LossScale, gm[s].LossScale)
		}
	}
	if g.Opt.Steps != h.Opt.Steps || g.Opt.Steps != n-gm[n-1].Skipped || *g.Scaler != *h.Scaler {
		t.Fatalf("optimizer steps graph %d host %d (want %d); scaler graph %+v host %+v", g.Opt.Steps, h.Opt.Steps, n-gm[n-1].Skipped, *g.Scaler, *h.Scaler)
	}
	for i := range gm {
		if math.IsNaN(float64(hm[i].Loss)) && math.IsNaN(float64(gm[i].Loss)) {
			continue
		}
		if math.IsNaN(float64(gm[i].Loss)) || math.Abs(float64(gm[i].Loss-hm[i].Loss)) > 1e-3*math.Abs(float64(hm[i].Loss)) {
			t.Fatalf("step %d: graph loss %v, host loss %v", i+1, gm[i].Loss, hm[i].Loss)
		}
	}
	t.Logf("RESULT graph fp16 skip: scales %v", []float32{gm[3].LossScale, gm[4].LossScale, gm[5].LossScale, gm[6].LossScale, gm[n-1].LossScale})
}

// TestGPUGraphRebuild: changing B and T captures a new graph (never replays
// the old one), and the losses after the change equal the plain step's.
func TestGPUGraphRebuild(t *testing.T) {
	g := graphTrainer(t, amp.BF16, train.StepGraph, 8, 64, 20, nil, nil)
	defer g.Close()
	p := graphTrainer(t, amp.BF16, train.StepDevice, 8, 64, 20, nil, nil)
	defer p.Close()
	runGraphSteps(t, g, 5)
	runGraphSteps(t, p, 5)
	if g.GraphBuilds() != 1 {
		t.Fatalf("%d graphs after 5 steps, want 1", g.GraphBuilds())
	}
	for _, tr := range []*train.Trainer{g, p} {
		if err := tr.SetBatchShape(4, 128); err != nil {
			t.Fatal(err)
		}
	}
	gm, pm := runGraphSteps(t, g, 12), runGraphSteps(t, p, 12)
	if g.GraphBuilds() != 2 {
		t.Fatalf("%d graphs after changing B8 T64 to B4 T128, want 2", g.GraphBuilds())
	}
	for i := range gm {
		if math.Float32bits(gm[i].Loss) != math.Float32bits(pm[i].Loss) {
			t.Fatalf("step %d after the shape change: graph loss %v, plain %v", gm[i].Step, gm[i].Loss, pm[i].Loss)
		}
	}
}

// TestGPUStepUpdate runs StepUpdate and AdamWState on the GPU and on the
// CPU reference from the same state, losses and gradients, through
// scenarios of the scaler (finite and growing, finite and clipped, a NaN,
// an Inf, the scaler off), and requires the same state slot for slot (the
// loss within an ulp: the device adds in a tree order) and bit-identical
// parameters and moments after AdamW.
func TestGPUStepUpdate(t *testing.T) {
	g := gpuDev(t, true)
	ref := cpuRef(true)
	rng := testRNG(t)
	const n, nl = 70001, 257
	layout := &tensor.Layout{Total: n, Segments: []tensor.Segment{
		{Name: "a", Offset: 0, Shape: tensor.Shape{40000}, Decay: true}, {Name: "b", Offset: 40000, Shape: tensor.Shape{n - 40000}}}}
	hp := device.AdamW{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1}
	names := []string{"scale", "good", "skipped", "opt steps", "lr", "loss", "norm", "finite", "used scale", "grad scale", "decay", "do decay", "step", "bc2"}
	for _, sc := range []struct {
		name   string
		scaler bool
		poison float32
		good   float32
		clip   float32
	}{
		{"finite, grows", true, 0, 2, 0}, {"finite, clipped", true, 0, 0, 1e-3}, {"nan", true, float32(math.NaN()), 1, 1},
		{"inf", true, float32(math.Inf(-1)), 1, 1}, {"scaler off", false, 0, 0, 1}, {"scaler off, inf", false, float32(math.Inf(1)), 0, 1},
	} {
		cfg := device.StepConfig{Scaler: sc.scaler, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 3, ClipNorm: sc.clip}
		st := make([]float32, device.StateLen)
		st[device.SlotScale], st[device.SlotGood], st[device.SlotSkipped], st[device.SlotOptSteps], st[device.SlotLR] = 1024, sc.good, 4, 11, 3e-4
		if !sc.scaler {
			st[device.SlotScale] = 1
		}
		hst, _ := tensor.FromF32(st, device.StateLen)
		losses := randHost(rng, tensor.F32, 3, 1, nl)
		grads := randHost(rng, tensor.F32, 0, 1e-2, n)
		grads.F32()[n/2] += sc.poison
		master, m := randHost(rng, tensor.F32, 0, 0.1, n), randHost(rng, tensor.F32, 0, 1e-3, n)
		v := randHost(rng, tensor.F32, 0, 1e-3, n)
		for i, x := range v.F32() {
			v.F32()[i] = x * x
		}
		work := tensor.New(tensor.BF16, n)
		dst, dl, dg := toGPU(t, g, clone(hst)), toGPU(t, g, losses), toGPU(t, g, grads)
		dmaster, dm, dv, dwork := toGPU(t, g, clone(master)), toGPU(t, g, clone(m)), toGPU(t, g, clone(v)), poisoned(t, g, tensor.BF16, n)
		g.StepUpdate(dst, dl, dg, cfg, hp)
		g.AdamWState(dmaster, dwork, dg, dm, dv, layout, hp, dst)
		ref.StepUpdate(hst, losses, grads, cfg, hp)
		ref.AdamWState(master, work, grads, m, v, layout, hp, hst)
		if err := ref.Sync(); err != nil {
			t.Fatal(err)
		}
		got, want := toHost(t, g, dst).F32(), hst.F32()
		for i := 0; i < len(names); i++ {
			same := math.Float32bits(got[i]) == math.Float32bits(want[i]) || (got[i] != got[i] && want[i] != want[i])
			if i == device.SlotLoss {
				same = math.Abs(float64(got[i]-want[i])) <= 2e-7*math.Abs(float64(want[i]))
			}
			if !same {
				t.Errorf("%s: state slot %s: gpu %v, cpu %v (state gpu %v, cpu %v)", sc.name, names[i], got[i], want[i], got, want)
			}
		}
		for k, pair := range [][2]*tensor.Tensor{{dmaster, master}, {dm, m}, {dv, v}} {
			gh, ch := toHost(t, g, pair[0]).F32(), pair[1].F32()
			for i := range ch {
				if math.Float32bits(gh[i]) != math.Float32bits(ch[i]) {
					t.Fatalf("%s: after AdamWState buffer %d element %d: gpu %v, cpu %v", sc.name, k, i, gh[i], ch[i])
				}
			}
		}
		if want[device.SlotFinite] == 1 {
			if e := relErr(toHost(t, g, dwork).ToF32(), master.F32()); e > 1e-2 {
				t.Errorf("%s: bf16 working copy relerr %.3g from the master parameters", sc.name, e)
			}
		}
		t.Logf("RESULT step_update %s: scale %g -> %g, finite %g, norm %g, skipped %g", sc.name, st[0], got[device.SlotScale], got[device.SlotFinite], got[device.SlotNorm], got[device.SlotSkipped])
	}
}

// TestGPUMarks: timing marks time the work queued between them on the
// device: a 1 GiB memset between marks 0 and 1 takes a positive time, no
// longer than the host's clock around queuing it and the Sync; a mark out of
// range is the next Sync's error, and so is Between of marks out of range.
func TestGPUMarks(t *testing.T) {
	d := gpuDev(t, true)
	if err := d.Marks(2); err != nil {
		t.Fatal(err)
	}
	x, err := d.Alloc(tensor.F32, 256<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(x)
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	d.Mark(0)
	d.Zero(x)
	d.Mark(1)
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	host := float64(time.Since(start).Nanoseconds()) / 1e6
	ms, err := d.Between(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("1 GiB memset: %.3f ms between the marks, %.3f ms on the host's clock", ms, host)
	if !(ms > 0 && ms <= host) {
		t.Errorf("%.4f ms between the marks, %.4f ms on the host's clock around them", ms, host)
	}
	if n := len(d.marks); n < 2 {
		t.Fatalf("%d marks kept, want at least 2", n)
	}
	d.Mark(len(d.marks))
	if err := d.Sync(); err == nil || !strings.Contains(err.Error(), "timing mark") {
		t.Errorf("a mark out of range: Sync gave %v", err)
	}
	if _, err := d.Between(0, len(d.marks)); err == nil {
		t.Errorf("Between a mark out of range: no error")
	}
}
