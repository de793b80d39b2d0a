package train

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

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

func TestAutoPolicy(t *testing.T) {
	dev := cpu.New(device.Options{Fused: true})
	for _, c := range []struct {
		dev  device.Device
		want amp.Policy
	}{{dev, amp.FP32}, {capDev{dev, 7}, amp.FP16}, {capDev{dev, 8}, amp.BF16}, {capDev{dev, 9}, amp.BF16}} {
		if got := AutoPolicy(c.dev); got != c.want {
			t.Errorf("AutoPolicy(%T major %v) = %s, want %s", c.dev, c.dev, got, c.want)
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
	if run.Policy != amp.FP32 || run.Source != "built-in bilingual corpus" || run.Train+run.Val != run.Tokens || run.Val == 0 {
		t.Fatalf("run: policy %s source %q tokens %d = %d + %d", run.Policy, run.Source, run.Tokens, run.Train, run.Val)
	}
	var last Metric
	if err := run.Run(context.Background(), 2, func(m Metric) { last = m }); err != nil {
		t.Fatal(err)
	}
	run.Close()
	if last.Step != 2 || !(last.ValLoss > 0) {
		t.Fatalf("after 2 steps: %+v", last)
	}
	if _, err := Start(dev, r); err == nil || !strings.Contains(err.Error(), "already holds a checkpoint") {
		t.Fatalf("a fresh run into %s: %v, want an error naming the checkpoint there", dir, err)
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
	fresh, err := gpt.New(dev, ck.Config, run.Policy)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if err := fresh.Init(o.Seed + 1); err != nil {
		t.Fatal(err)
	}
	if fl, err := EvalLoss(fresh, l, o.Batch, o.Seq, o.EvalBatches); err != nil || tensor.CloseF32([]float32{fl}, []float32{last.ValLoss}, dt, 1) == nil {
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
