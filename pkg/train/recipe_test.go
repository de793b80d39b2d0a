package train

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/tensor"
)

// capDev is a CPU device that reports a GPU's compute capability, for
// AutoPolicy.
type capDev struct {
	device.Device
	major int
}

func (d capDev) Capability() (int, int) { return d.major, 0 }

// fakeCPU is a CPU device whose bf16 dot products are faked through the
// switch druto detect reports (BF16Dot).
type fakeCPU struct {
	device.Device
	isa    string
	native bool
}

func (d fakeCPU) BF16Dot() (string, bool) { return d.isa, d.native }
func (d fakeCPU) Name() string            { return "fake " + d.isa + " " + d.Device.Name() }

func TestAutoPolicy(t *testing.T) {
	dev := cpu.New(device.Options{Fused: true})
	for _, c := range []struct {
		dev  device.Device
		want amp.Policy
	}{{capDev{dev, 7}, amp.FP16}, {capDev{dev, 8}, amp.BF16}, {capDev{dev, 9}, amp.BF16}} {
		if got := AutoPolicy(c.dev); got != c.want {
			t.Errorf("AutoPolicy(%T major %v) = %s, want %s", c.dev, c.dev, got, c.want)
		}
	}
	// The CPU: a fake speed for each dtype, so that both kinds of CPU are
	// tested on any machine.
	old, oldCache := matmulSeconds, policyCache
	t.Cleanup(func() { matmulSeconds, policyCache = old, oldCache })
	policyCache = "" // the faked timings stay in this process
	bf16Share := 0.0
	matmulSeconds = func(_ device.Device, dt tensor.DType, _ int) (time.Duration, error) {
		if dt == tensor.BF16 {
			return time.Duration(bf16Share * float64(time.Second)), nil
		}
		return time.Second, nil
	}
	for _, c := range []struct {
		native bool
		share  float64 // a bf16 matmul's time, of fp32's
		want   amp.Policy
		why    string
	}{
		{false, 0.5, amp.FP32, "no native bf16"},         // AVX2-only EPYC: not even measured
		{true, 0.6, amp.BF16, "took 60% of an fp32 one"}, // Zen 4 with AVX512_BF16
		{true, 0.95, amp.FP32, "not enough"},             // native but barely faster
	} {
		bf16Share = c.share
		f := fakeCPU{dev, fmt.Sprintf("AVX512_BF16-%v-%v", c.native, c.share), c.native}
		p, why := ChoosePolicy(f)
		if p != c.want || !strings.Contains(why, c.why) {
			t.Errorf("native %v, bf16 at %.0f%% of fp32: %s (%q), want %s (%q)", c.native, 100*c.share, p, why, c.want, c.why)
		}
	}
	// This machine: fp32 wherever the CPU has no native bf16 products.
	if _, native := dev.BF16Dot(); !native {
		matmulSeconds = old
		if p, why := ChoosePolicy(dev); p != amp.FP32 || !strings.Contains(why, "AVX512_BF16") {
			t.Errorf("this CPU has no AVX512_BF16 pair kernel, yet ChoosePolicy = %s (%q)", p, why)
		}
	}
}

// TestRecipeRunResumeAndOpen runs a recipe on the built-in corpus, refuses
// a second fresh run into the same folder, resumes the first to its end
// and opens the checkpoint it wrote.
func TestRecipeRunResumeAndOpen(t *testing.T) {
	dev := cpu.New(device.Options{Fused: true})
	dir := t.TempDir()
	o := testOptions(4, amp.BF16)
	o.OutDir, o.EvalEvery, o.EvalBatches = dir, 2, 1
	r := Recipe{Options: o, AutoPolicy: true}
	run, err := Start(dev, r)
	if err != nil {
		t.Fatal(err)
	}
	// AutoPolicy's choice on this CPU: fp32, or bf16 where it multiplies
	// bf16 natively and faster (AVX512_BF16; the machines vary).
	if want := AutoPolicy(dev); run.Policy != want || run.Source != "built-in bilingual corpus" || run.Train+run.Val != run.Tokens || run.Val == 0 {
		t.Fatalf("run: policy %s (AutoPolicy %s) source %q tokens %d = %d + %d", run.Policy, want, run.Source, run.Tokens, run.Train, run.Val)
	}
	var last Metric
	if err := run.Run(context.Background(), 2, func(m Metric) { last = m }); err != nil {
		t.Fatal(err)
	}
	run.Close()
	if last.Step != 2 || !(last.ValLoss > 0) {
		t.Fatalf("after 2 steps: %+v", last)
	}
	if _, err := Start(dev, r); !errors.Is(err, ErrRunExists) || !strings.Contains(err.Error(), "Recipe.Resume") || strings.Contains(err.Error(), "--") {
		t.Fatalf("a new run into %s: %v, want ErrRunExists in the library's words (no CLI flags)", dir, err)
	}
	// Fresh starts over: step 0, and a metrics log of this run only.
	fresh := r
	fresh.Fresh = true
	if _, err := Start(dev, func() Recipe { b := fresh; b.Resume = true; return b }()); err == nil {
		t.Fatal("Fresh with Resume started")
	}
	frun, err := Start(dev, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if frun.StepsDone() != 0 {
		t.Fatalf("a fresh run starts at step %d, want 0", frun.StepsDone())
	}
	if err := frun.Run(context.Background(), 2, func(Metric) {}); err != nil {
		t.Fatal(err)
	}
	frun.Close()
	if ms, err := ReadMetricsFile(filepath.Join(dir, MetricsFile)); err != nil || len(ms) != 2 {
		t.Fatalf("after a fresh 2-step run the log holds %d steps (%v), want 2", len(ms), err)
	}
	r.Resume = true
	run, err = Start(dev, r)
	if err != nil {
		t.Fatal(err)
	}
	if run.StepsDone() != 2 {
		t.Fatalf("resumed at step %d, want 2", run.StepsDone())
	}
	if err := run.Run(context.Background(), 0, func(m Metric) { last = m }); err != nil {
		t.Fatal(err)
	}
	run.Close()
	if last.Step != 4 || !(last.ValLoss > 0) {
		t.Fatalf("resumed run ended at step %d with validation loss %v, want step 4 and a loss", last.Step, last.ValLoss)
	}
	ck, err := LoadCheckpoint(filepath.Join(dir, ModelFile))
	if err != nil {
		t.Fatal(err)
	}
	m, err := ck.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// The reopened checkpoint's loss on the run's validation batches is
	// the loss the run recorded at its last step (the same weights, the
	// same forward), within the tolerance of the run's dtype; a fresh
	// model's is not.
	_, valT, _, _, err := Tokens(r.Data, r.Seed, data.Bytes{}, "", nil) // Start's default tokenizer
	if err != nil {
		t.Fatal(err)
	}
	l, err := data.NewLoader(valT, o.Batch, o.Seq)
	if err != nil {
		t.Fatal(err)
	}
	loss, err := EvalLoss(m, l, o.Batch, o.Seq, o.EvalBatches)
	if err != nil {
		t.Fatal(err)
	}
	dt := run.Policy.DType(amp.Activation)
	if err := tensor.CloseF32([]float32{loss}, []float32{last.ValLoss}, dt, 1); err != nil {
		t.Fatalf("the reopened checkpoint's validation loss %v, the run recorded %v (%s): %v", loss, last.ValLoss, dt, err)
	}
	untrained, err := gpt.New(dev, ck.Config, run.Policy)
	if err != nil {
		t.Fatal(err)
	}
	defer untrained.Close()
	if err := untrained.Init(o.Seed + 1); err != nil {
		t.Fatal(err)
	}
	if fl, err := EvalLoss(untrained, l, o.Batch, o.Seq, o.EvalBatches); err != nil || tensor.CloseF32([]float32{fl}, []float32{last.ValLoss}, dt, 1) == nil {
		t.Fatalf("a fresh model's loss %v (%v) passes for the run's %v", fl, err, last.ValLoss)
	}

	// Starting from its weights: the same model, any other shape refused.
	r2 := Recipe{Options: testOptions(2, amp.FP32), Init: ck}
	if run, err := Start(dev, r2); err != nil {
		t.Fatal(err)
	} else {
		run.Close()
	}
	r2.Config.Layers++
	if _, err := Start(dev, r2); err == nil || !strings.Contains(err.Error(), "checkpoint to start from") {
		t.Fatalf("a checkpoint of another shape: %v", err)
	}
}

func TestRecipeErrorsWriteNothing(t *testing.T) {
	dev := cpu.New(device.Options{Fused: true})
	dir := t.TempDir()
	text := filepath.Join(dir, "small.txt")
	if err := os.WriteFile(text, []byte(strings.Repeat("druto দ্রুত ", 10)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	o := testOptions(2, amp.FP32)
	o.OutDir, o.EvalEvery = out, 1
	_, err := Start(dev, Recipe{Options: o, Data: text})
	if err == nil || !strings.Contains(err.Error(), "validation split") || !strings.Contains(err.Error(), "--eval-every 0") {
		t.Fatalf("a validation split smaller than a batch: %v", err)
	}
	bad := o
	bad.Batch = 0
	if _, err := Start(dev, Recipe{Options: bad}); err == nil {
		t.Fatal("batch 0 started")
	}
	if _, err := Start(dev, Recipe{Options: o, Data: filepath.Join(dir, "missing.txt")}); err == nil {
		t.Fatal("a missing data file started")
	}
	if ents, _ := os.ReadDir(out); len(ents) > 1 {
		t.Fatalf("failed starts left %d files in %s", len(ents), out)
	}
}

func TestRecipeFill(t *testing.T) {
	r := Recipe{Preset: "tiny", Steps: 30, LR: 1e-3, Warmup: 5}
	if err := r.fill(); err != nil {
		t.Fatal(err)
	}
	if r.Config.Channels != 128 || r.Seq != 128 || r.Optim.Steps != 30 || r.Optim.LR != 1e-3 || r.Optim.Warmup != 5 || r.Optim.WeightDecay != 0.1 {
		t.Fatalf("filled: %+v %+v seq %d", r.Config, r.Optim, r.Seq)
	}
	for _, bad := range []Recipe{
		{Preset: "tiny", Options: Options{Config: testCfg}},
		{Steps: 3, Options: Options{Optim: testOptions(3, amp.FP32).Optim}},
		{Preset: "no-such-model"},
	} {
		if err := bad.fill(); err == nil {
			t.Errorf("%+v filled without an error", bad)
		}
	}
	dev := cpu.New(device.Options{Fused: true})
	if _, _, err := OpenCheckpoint(dev, filepath.Join(t.TempDir(), "none.safetensors")); err == nil {
		t.Fatal("a missing checkpoint opened")
	}
}

// TestPolicyCacheAcrossProcesses: the matmul timings ChoosePolicy decides
// by are kept in policyCache, so that a later process (a notebook run
// again) reads them instead of timing again under other load; a timing
// another process kept meanwhile wins over this one's; an unreadable
// cache is timed anew.
func TestPolicyCacheAcrossProcesses(t *testing.T) {
	oldM, oldC := matmulSeconds, policyCache
	t.Cleanup(func() { matmulSeconds, policyCache, measured = oldM, oldC, sync.Map{} })
	policyCache = filepath.Join(t.TempDir(), "druto", "cpu-policy.json")
	timing := time.Millisecond
	matmulSeconds = func(_ device.Device, dt tensor.DType, _ int) (time.Duration, error) {
		if dt == tensor.BF16 {
			return timing / 2, nil
		}
		return timing, nil
	}
	dev := fakeCPU{cpu.New(device.Options{Fused: true}), "cache-test", true}
	measured = sync.Map{}
	f1, b1, err := measuredMatmuls(dev)
	if err != nil || f1 != time.Millisecond || b1 != time.Millisecond/2 {
		t.Fatalf("first: %v %v %v", f1, b1, err)
	}
	measured = sync.Map{} // a new process
	timing = time.Second  // other load: the timings would now differ
	if f2, b2, err := measuredMatmuls(dev); err != nil || f2 != f1 || b2 != b1 {
		t.Errorf("second process: %v %v %v, want the cached %v %v", f2, b2, err, f1, b1)
	}
	// Another process kept its timing while this one timed: it is taken.
	other := fakeCPU{cpu.New(device.Options{Fused: true}), "cache-test-2", true}
	measured = sync.Map{}
	matmulSeconds = func(_ device.Device, dt tensor.DType, _ int) (time.Duration, error) {
		if err := os.WriteFile(policyCache, []byte(`{"`+other.Name()+`":[7,3]}`), 0o644); err != nil {
			return 0, err
		}
		return time.Minute, nil
	}
	if f, b, err := measuredMatmuls(other); err != nil || f != 7 || b != 3 {
		t.Errorf("a timing kept meanwhile: %v %v %v, want 7ns 3ns", f, b, err)
	}
	matmulSeconds = func(_ device.Device, dt tensor.DType, _ int) (time.Duration, error) { return timing, nil }
	if err := os.WriteFile(policyCache, []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	measured = sync.Map{}
	if f3, _, err := measuredMatmuls(dev); err != nil || f3 != time.Second {
		t.Errorf("after a broken cache: %v %v, want a new timing", f3, err)
	}
}
