package train

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
)

// infAt injects +Inf into the first gradient at the given 1-based steps.
func infAt(steps ...int) func(int) float32 {
	return func(s int) float32 {
		for _, x := range steps {
			if s == x {
				return float32(math.Inf(1))
			}
		}
		return 0
	}
}

// sameMetrics fails unless host and dev agree bit for bit on every decided
// field of every step.
func sameMetrics(t *testing.T, host, dev []Metric) {
	t.Helper()
	if len(host) != len(dev) {
		t.Fatalf("%d host metrics, %d device metrics", len(host), len(dev))
	}
	bits := math.Float32bits
	for i := range host {
		h, d := host[i], dev[i]
		if h.Step != d.Step || bits(h.Loss) != bits(d.Loss) || bits(h.LR) != bits(d.LR) ||
			bits(h.GradNorm) != bits(d.GradNorm) || bits(h.LossScale) != bits(d.LossScale) || h.Skipped != d.Skipped {
			t.Fatalf("step %d: host step (loss %v lr %v norm %v scale %v skipped %d) != device step (loss %v lr %v norm %v scale %v skipped %d)",
				h.Step, h.Loss, h.LR, h.GradNorm, h.LossScale, h.Skipped, d.Loss, d.LR, d.GradNorm, d.LossScale, d.Skipped)
		}
	}
}

func runMetrics(t *testing.T, tr *Trainer, n int) []Metric {
	t.Helper()
	var out []Metric
	if err := tr.Run(t.Context(), n, func(m Metric) { out = append(out, m) }); err != nil {
		t.Fatal(err)
	}
	return out
}

// spanMetrics runs tr to step n in the spans Run takes (steps), without
// Run's divergence policy: under bf16 and fp32, Run stops at the first
// non-finite step (see checkStep and TestNonFiniteGradsDevice), while the
// step decisions compared here go on past it.
func spanMetrics(t *testing.T, tr *Trainer, n int) []Metric {
	t.Helper()
	var out []Metric
	for tr.StepsDone() < n {
		ms, err := tr.steps(n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ms...)
	}
	return out
}

// TestDeviceStepMatchesHost: the device-resident step on the CPU reference
// makes the host path's decisions step for step: fp16 with Inf gradients
// injected at steps 3, 4 and 9 (skipped, scale halved each time), the scale
// doubling after 3 clean steps (growth interval 3 through the scaler), the
// clip factor and the learning-rate schedule; losses, norms, parameters
// and both moments end bit-identical, and so do the scaler's and the
// optimizer's counts. LogEvery 4 reads the results in spans. With bf16
// moments (fp16 policy) too: the host step rounds them at its step count,
// the device step at the state's, which agree.
func TestDeviceStepMatchesHost(t *testing.T) {
	for _, c := range []struct {
		pol amp.Policy
		mom tensor.DType
	}{{amp.FP16, tensor.F32}, {amp.BF16, tensor.F32}, {amp.FP32, tensor.F32}, {amp.FP16, tensor.BF16}} {
		pol, name := c.pol, c.pol.String()
		if c.mom == tensor.BF16 {
			name += "/bf16 moments"
		}
		t.Run(name, func(t *testing.T) {
			const n = 14
			mk := func(mode StepMode) *Trainer {
				o := testOptions(n, pol)
				o.AdamState = c.mom
				o.Optim.ClipNorm = 0.5 // clipping active on most steps
				o.Step, o.LogEvery, o.InjectGrad = mode, 4, infAt(3, 4, 9)
				tr := newTrainer(t, o)
				tr.Scaler.GrowthInterval = 3
				return tr
			}
			host, dev := mk(StepHost), mk(StepDevice)
			defer host.Close()
			defer dev.Close()
			if dev.GraphStatus() != "device" || host.GraphStatus() != "host" {
				t.Fatalf("modes: host trainer %q, device trainer %q", host.GraphStatus(), dev.GraphStatus())
			}
			hm, dm := spanMetrics(t, host, n), spanMetrics(t, dev, n)
			sameMetrics(t, hm, dm)
			if pol == amp.FP16 {
				// 65536, skip 3 -> 32768, skip 4 -> 16384, clean 5,6,7 -> 32768, 8, skip 9 -> 16384, 10,11,12 -> 32768
				want := map[int]float32{3: 65536, 4: 32768, 5: 16384, 8: 32768, 9: 32768, 10: 16384, 13: 32768}
				for s, w := range want {
					if dm[s-1].LossScale != w {
						t.Errorf("step %d: device loss scale %g, want %g", s, dm[s-1].LossScale, w)
					}
				}
			}
			if dm[n-1].Skipped != 3 {
				t.Errorf("skipped %d steps, want 3 (steps 3, 4 and 9)", dm[n-1].Skipped)
			}
			if host.Opt.Steps != dev.Opt.Steps || host.Opt.Steps != n-3 {
				t.Errorf("optimizer steps: host %d, device %d, want %d", host.Opt.Steps, dev.Opt.Steps, n-3)
			}
			if *host.Scaler != *dev.Scaler {
				t.Errorf("scaler: host %+v, device %+v", *host.Scaler, *dev.Scaler)
			}
			hs, ds := snapshot(t, host), snapshot(t, dev)
			for k, name := range []string{"parameters", "m", "v"} {
				for i := range hs[k] {
					if math.Float32bits(hs[k][i]) != math.Float32bits(ds[k][i]) {
						t.Fatalf("%s[%d]: host %v, device %v", name, i, hs[k][i], ds[k][i])
					}
				}
			}
		})
	}
}

// TestStepScalarsMatchGradScaler drives device.StepScalars alone against
// amp.GradScaler and optim.Config over a long random sequence of finite
// and non-finite steps (growth interval 5), comparing every decision.
func TestStepScalarsMatchGradScaler(t *testing.T) {
	rng := tensor.NewRNG(11)
	oc := testOptions(400, amp.FP16).Optim
	oc.ClipNorm = 1
	sc := amp.NewGradScaler(true)
	sc.GrowthInterval = 5
	cfg := device.StepConfig{Scaler: true, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 5, ClipNorm: oc.ClipNorm}
	hp := device.AdamW{Beta1: oc.Beta1, Beta2: oc.Beta2, Eps: oc.Eps, WeightDecay: oc.WeightDecay}
	st := make([]float32, device.StateLen)
	st[device.SlotScale] = sc.LossScale()
	optSteps, skipped := 0, 0
	for step := 1; step <= 400; step++ {
		scale := sc.LossScale()
		sumSq := rng.Float64() * 4 * float64(scale) * float64(scale)
		if rng.Float64() < 0.1 {
			sumSq = math.Inf(1)
		}
		if rng.Float64() < 0.05 {
			sumSq = math.NaN()
		}
		lr := oc.LRAt(step)
		st[device.SlotLR] = lr
		device.StepScalars(st, 2.5, sumSq, cfg, hp)
		// the host path
		norm, finite := float32(sumSq), false
		if !math.IsInf(sumSq, 0) && !math.IsNaN(sumSq) {
			norm, finite = float32(math.Sqrt(sumSq)*math.Abs(float64(1/scale))), true
		}
		skip := sc.Update(finite)
		if skip {
			skipped++
		} else {
			optSteps++
		}
		if st[device.SlotUsedScale] != scale || st[device.SlotScale] != sc.Scale || int(st[device.SlotGood]) != sc.GoodSteps ||
			int(st[device.SlotSkipped]) != skipped || int(st[device.SlotOptSteps]) != optSteps || (st[device.SlotFinite] == 1) != finite {
			t.Fatalf("step %d: state %v; host scale used %g, next %g, good %d, skipped %d, optimizer steps %d, finite %v",
				step, st, scale, sc.Scale, sc.GoodSteps, skipped, optSteps, finite)
		}
		if finite && math.Float32bits(st[device.SlotNorm]) != math.Float32bits(norm) {
			t.Fatalf("step %d: norm %v, host %v", step, st[device.SlotNorm], norm)
		}
		if skip {
			continue
		}
		want := device.AdamW{LR: lr, Beta1: hp.Beta1, Beta2: hp.Beta2, Eps: hp.Eps, WeightDecay: hp.WeightDecay,
			Step: optSteps, GradScale: oc.ClipFactor(norm) / scale}.Consts()
		if got := hp.ConstsFromState(st); got != want {
			t.Fatalf("step %d: AdamW constants from the state %+v, host %+v", step, got, want)
		}
	}
	if sc.Scale == 65536 || skipped == 0 {
		t.Fatalf("the sequence never changed the scale (%g) or skipped (%d): the test proves nothing", sc.Scale, skipped)
	}
}

// fakeGrapher is the CPU device with a Capture that always fails, as a
// driver without graph support does.
type fakeGrapher struct {
	*cpu.Device
	calls int
}

func (f *fakeGrapher) Capture(func() error) (device.Graph, error) {
	f.calls++
	return nil, errors.New("cuda: graph capture: cuStreamBeginCapture_v2: CUDA_ERROR_NOT_SUPPORTED")
}

// TestGraphCaptureFailureFallsBack: a capture that fails is one notice,
// naming the cause, and plain launches with the same results as the plain
// device step; capture is not retried every step.
func TestGraphCaptureFailureFallsBack(t *testing.T) {
	const n = 6
	trT, vaT := testTokens(t)
	var notices []string
	o := testOptions(n, amp.BF16)
	o.Step, o.Notice = StepGraph, func(s string) { notices = append(notices, s) }
	fg := &fakeGrapher{Device: cpu.New(device.Options{Fused: true})}
	g, err := New(fg, o, trT, vaT)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	o.Step, o.Notice = StepDevice, nil
	p, err := New(cpu.New(device.Options{Fused: true}), o, trT, vaT)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	gm, pm := runMetrics(t, g, n), runMetrics(t, p, n)
	sameMetrics(t, pm, gm)
	if fg.calls != 1 {
		t.Errorf("capture tried %d times, want once (after the warm-up step)", fg.calls)
	}
	if len(notices) != 1 || strings.Contains(notices[0], "\n") ||
		!strings.Contains(notices[0], "plain launches") || !strings.Contains(notices[0], "CUDA_ERROR_NOT_SUPPORTED") {
		t.Fatalf("notices %q, want one line naming the fallback and its cause", notices)
	}
	if st := g.GraphStatus(); !strings.HasPrefix(st, "device (graph unavailable: capture failed") {
		t.Errorf("GraphStatus %q", st)
	}
}

// TestGraphModeWithoutGrapher: a device without graphs says so at New and
// runs the device step.
func TestGraphModeWithoutGrapher(t *testing.T) {
	var notices []string
	o := testOptions(3, amp.FP32)
	o.Step, o.Notice = StepGraph, func(s string) { notices = append(notices, s) }
	tr := newTrainer(t, o)
	defer tr.Close()
	runMetrics(t, tr, 3)
	if len(notices) != 1 || !strings.Contains(notices[0], "has no graphs") {
		t.Fatalf("notices %q, want one saying the device has no graphs", notices)
	}
}

// TestDeviceStepDecomposedKeepsHost: the decomposed form runs the host
// step, with a notice.
func TestDeviceStepDecomposedKeepsHost(t *testing.T) {
	trT, vaT := testTokens(t)
	var notices []string
	o := testOptions(2, amp.FP32)
	o.Step, o.Notice = StepDevice, func(s string) { notices = append(notices, s) }
	tr, err := New(cpu.New(device.Options{Fused: false}), o, trT, vaT)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if tr.GraphStatus() != "host" || len(notices) != 1 || !strings.Contains(notices[0], "decomposed") {
		t.Fatalf("status %q, notices %q", tr.GraphStatus(), notices)
	}
}

// replayGrapher emulates graphs on the CPU: Capture keeps fn, Launch runs
// it again (what a replay does), so the trainer's graph bookkeeping runs
// without a GPU.
type replayGrapher struct {
	*cpu.Device
	captures int
	stale    bool // the next Launch reports device.ErrGraphStale
}

type replayGraph struct {
	r      *replayGrapher
	fn     func() error
	closed *bool
}

func (g replayGraph) Launch() error {
	if *g.closed {
		return errors.New("launch of a closed graph")
	}
	if g.r.stale {
		g.r.stale = false
		return fmt.Errorf("fake: %w", device.ErrGraphStale)
	}
	return g.fn()
}
func (g replayGraph) Close() error { *g.closed = true; return nil }

func (r *replayGrapher) Capture(fn func() error) (device.Graph, error) {
	r.captures++
	return replayGraph{r: r, fn: fn, closed: new(bool)}, nil
}

// TestGraphRebuiltOnNewShape: a graph is captured after one plain step,
// replayed, and captured anew after SetBatchShape (never replayed for
// another shape); the results equal the plain device step's.
func TestGraphRebuiltOnNewShape(t *testing.T) {
	trT, vaT := testTokens(t)
	o := testOptions(12, amp.BF16)
	o.Step = StepGraph
	rg := &replayGrapher{Device: cpu.New(device.Options{Fused: true})}
	g, err := New(rg, o, trT, vaT)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	o.Step = StepDevice
	p, err := New(cpu.New(device.Options{Fused: true}), o, trT, vaT)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	gm, pm := runMetrics(t, g, 4), runMetrics(t, p, 4)
	if rg.captures != 1 || g.GraphBuilds() != 1 || g.GraphStatus() != "graph" {
		t.Fatalf("after 4 steps: %d captures, %d builds, status %q; want 1, 1, graph", rg.captures, g.GraphBuilds(), g.GraphStatus())
	}
	for _, tr := range []*Trainer{g, p} {
		if err := tr.SetBatchShape(1, 16); err != nil {
			t.Fatal(err)
		}
	}
	gm, pm = append(gm, runMetrics(t, g, 8)...), append(pm, runMetrics(t, p, 8)...)
	sameMetrics(t, pm, gm)
	if rg.captures != 2 || g.GraphBuilds() != 2 {
		t.Fatalf("after the shape change: %d captures, %d builds; want 2 (a new graph for B1 T16)", rg.captures, g.GraphBuilds())
	}
	// A stale graph (a buffer it uses moved) runs the step plainly and is
	// captured again at the next step; graphs stay on.
	rg.stale = true
	gm, pm = runMetrics(t, g, 12), runMetrics(t, p, 12)
	sameMetrics(t, pm, gm)
	if rg.captures != 3 || g.GraphStatus() != "graph" {
		t.Fatalf("after a stale launch: %d captures, status %q; want 3, graph", rg.captures, g.GraphStatus())
	}
}

// fakeMarker is the CPU device with device.Marker's calls recorded: Between
// returns a time made from the marks' indices, so the test can tell which
// marks timed which step.
type fakeMarker struct {
	*cpu.Device
	n     int
	marks []int
}

func (f *fakeMarker) Marks(n int) error { f.n = n; return nil }
func (f *fakeMarker) Mark(i int)        { f.marks = append(f.marks, i) }
func (f *fakeMarker) Between(a, b int) (float64, error) {
	if b != a+1 || a%2 != 0 || b >= f.n {
		return 0, fmt.Errorf("marks %d, %d of %d", a, b, f.n)
	}
	return 1 + float64(a)/10, nil
}

// TestDeviceStepMarks: in the device-resident step, a device with timing
// marks gets two a pending step (before its uploads, after its snapshot),
// and each step's DeviceMs is the time between its own two; the host step
// and a device without marks leave DeviceMs 0.
func TestDeviceStepMarks(t *testing.T) {
	const n = 6
	trT, vaT := testTokens(t)
	o := testOptions(n, amp.BF16)
	o.Step, o.LogEvery = StepDevice, 3
	fm := &fakeMarker{Device: cpu.New(device.Options{Fused: true})}
	tr, err := New(fm, o, trT, vaT)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ms := runMetrics(t, tr, n)
	if fm.n != 6 {
		t.Errorf("Marks(%d), want 2 x LogEvery = 6", fm.n)
	}
	if want := []int{0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}; fmt.Sprint(fm.marks) != fmt.Sprint(want) {
		t.Errorf("marks queued %v, want %v", fm.marks, want)
	}
	for i, m := range ms {
		if want := 1 + float64(2*(i%3))/10; m.DeviceMs != want {
			t.Errorf("step %d: DeviceMs %v, want %v (marks %d, %d)", m.Step, m.DeviceMs, want, 2*(i%3), 2*(i%3)+1)
		}
	}
	o.Step = StepHost
	host := newTrainer(t, o)
	defer host.Close()
	for _, m := range runMetrics(t, host, 2) {
		if m.DeviceMs != 0 {
			t.Errorf("host step %d: DeviceMs %v, want 0", m.Step, m.DeviceMs)
		}
	}
}
