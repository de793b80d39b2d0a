package train

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/data"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/optim"
	"github.com/druto/druto/pkg/tensor"
)

var testCfg = gpt.Config{Vocab: 256, MaxSeq: 32, Layers: 2, Heads: 4, Channels: 32}

func testOptions(steps int, p amp.Policy) Options {
	oc := optim.Defaults(steps)
	oc.LR, oc.Warmup = 3e-3, 2
	return Options{Config: testCfg, Policy: p, Batch: 2, Seq: 32, Optim: oc, Seed: 7}
}

func testTokens(t *testing.T) (trainT, valT []int32) {
	toks, err := data.Encode(data.Corpus(1, 64<<10))
	if err != nil {
		t.Fatal(err)
	}
	return data.Split(toks, 0.1)
}

func newTrainer(t *testing.T, o Options) *Trainer {
	tr, va := testTokens(t)
	tt, err := New(cpu.New(device.Options{Fused: true}), o, tr, va)
	if err != nil {
		t.Fatal(err)
	}
	return tt
}

func TestCheckpointRoundTrip(t *testing.T) {
	params := gpt.InitParams(testCfg, 3)
	path := filepath.Join(t.TempDir(), ModelFile)
	if _, err := SaveModel(path, testCfg, params); err != nil {
		t.Fatal(err)
	}
	cfg, got, err := LoadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg != testCfg {
		t.Fatalf("config %v, want %v", cfg, testCfg)
	}
	if len(got) != len(params) {
		t.Fatalf("loaded %d parameters, saved %d", len(got), len(params))
	}
	for i := range got {
		if got[i] != params[i] {
			t.Fatalf("param %d: %v != %v", i, got[i], params[i])
		}
	}
	// Hugging Face names and the Conv1D layout.
	ts, meta, err := readSafetensors(path, 4*maxParams)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]stTensor{}
	for _, x := range ts {
		by[x.Name] = x
	}
	qkv, ok := by["transformer.h.0.attn.c_attn.weight"]
	if !ok || qkv.Shape[0] != 32 || qkv.Shape[1] != 96 {
		t.Fatalf("c_attn.weight missing or not (C, 3C): %v", qkv.Shape)
	}
	seg, _ := testCfg.Layout().Find("h.0.attn.c_attn.weight")
	// druto (3C, C) row r col c == HF (C, 3C) row c col r.
	if qkv.Data[5*96+17] != params[seg.Offset+17*32+5] {
		t.Error("c_attn.weight is not transposed into Conv1D layout")
	}
	if _, ok := by["lm_head.weight"]; ok {
		t.Error("lm_head must not be stored: it is tied to wte")
	}
	if meta["n_embd"] != "32" || meta["n_layer"] != "2" || meta["format"] != "pt" {
		t.Errorf("metadata %v", meta)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("temp files left behind: %v", entries)
	}
}

func TestCorruptCheckpoint(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ModelFile)
	if _, err := SaveModel(path, testCfg, gpt.InitParams(testCfg, 3)); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(path)
	cases := map[string][]byte{
		"empty":       {},
		"short":       good[:5],
		"header only": good[:200],
		"truncated":   good[:len(good)-100],
		"flipped":     append(append([]byte(nil), good[:len(good)-1]...), good[len(good)-1]^0x40),
		"bad json":    append(append([]byte(nil), good[:8]...), bytes.Repeat([]byte{'x'}, len(good)-8)...),
	}
	for name, b := range cases {
		p := filepath.Join(dir, name+".safetensors")
		os.WriteFile(p, b, 0o644)
		if _, _, err := LoadModel(p); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", name, err)
		}
	}
	if _, _, err := LoadModel(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file accepted")
	}
}

func runSteps(t *testing.T, tr *Trainer, n int) []float32 {
	var out []float32
	for i := 0; i < n; i++ {
		m, err := tr.Step()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m.Loss)
	}
	return out
}

// resumedRun runs o in one trainer to step at (its checkpoint in
// o.OutDir), resumes a second trainer from there that runs to o's last
// step, and returns the first trainer and the metrics the two wrote.
func resumedRun(t *testing.T, o Options, at int) (*Trainer, []Metric) {
	t.Helper()
	a := newTrainer(t, o)
	if err := a.Run(context.Background(), at, nil); err != nil {
		t.Fatal(err)
	}
	b := newTrainer(t, o)
	if err := b.Resume(o.OutDir); err != nil {
		t.Fatal(err)
	}
	if err := b.Run(context.Background(), 0, nil); err != nil {
		t.Fatal(err)
	}
	ms, err := ReadMetricsFile(filepath.Join(o.OutDir, MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	return a, ms
}

// TestResumeExact: N steps, save, resume in a new trainer, N more steps
// (under fp8 the FP8 scaling state saved and restored with them),
// gives bit-identical losses to 2N straight steps; under fp8 also in the
// device-resident step, where the optimizer writes the weights' FP8 copies
// (the restored state holds the scales they were cast with), with the LM
// head in FP8 too.
func TestResumeExact(t *testing.T) {
	for _, p := range []amp.Policy{amp.FP32, amp.FP16, amp.FP8} {
		o := testOptions(12, p)
		straight := runSteps(t, newTrainer(t, o), 12)
		if p == amp.FP8 {
			d := o
			d.Step, d.FP8 = StepDevice, amp.FP8Recipe{History: 2, Head: true} // a short window: a history entry too many or too few changes a scale
			sd := runSteps(t, newTrainer(t, d), 12)
			d.OutDir = t.TempDir()
			if _, ms := resumedRun(t, d, 6); len(ms) != 12 {
				t.Errorf("fp8, device step: metrics has %d lines, want 12", len(ms))
			} else {
				for i, m := range ms {
					if m.Loss != sd[i] {
						t.Errorf("fp8, device step %d: resumed loss %v, straight %v", i+1, m.Loss, sd[i])
					}
				}
			}
		}
		dir := t.TempDir()
		o.OutDir = dir
		_, ms := resumedRun(t, o, 6)
		if len(ms) != 12 {
			t.Fatalf("%v: metrics has %d lines, want 12", p, len(ms))
		}
		for i, m := range ms {
			if m.Step != i+1 || m.Loss != straight[i] {
				t.Errorf("%v step %d: resumed loss %v (step %d), straight %v", p, i+1, m.Loss, m.Step, straight[i])
			}
		}
		// A resume with other options is refused.
		o2 := o
		o2.Seed++
		if err := newTrainer(t, o2).Resume(dir); err == nil {
			t.Errorf("%v: resume with another seed accepted", p)
		}
		if p == amp.FP8 {
			// So is one with another amax history, as other options.
			o3 := o
			o3.FP8 = amp.DefaultFP8Recipe()
			o3.FP8.History++
			err := newTrainer(t, o3).Resume(dir)
			if err == nil || !strings.Contains(err.Error(), "other options") || errors.Is(err, ErrCorrupt) {
				t.Errorf("fp8: resume with history %d: %v, want other options, not corrupt", o3.FP8.History, err)
			}
		}
	}
}

func snapshot(t *testing.T, tr *Trainer) [3][]float32 {
	var out [3][]float32
	for i, x := range []*tensor.Tensor{tr.Model.Master(), tr.Opt.M, tr.Opt.V} {
		h := tensor.New(x.DType, x.Shape...)
		tr.dev.Download(h, x)
		out[i] = h.ToF32()
	}
	return out
}

// setInf sets element i of tr's device gradients g to +Inf.
func setInf(tr *Trainer, g *tensor.Tensor, i int) {
	h := tensor.New(tensor.F32, g.Numel())
	tr.dev.Download(h, g)
	h.F32()[i] = float32(math.Inf(1))
	tr.dev.Upload(g, h)
}

// skippedStep takes tr's next step, which an Inf in its gradients must
// skip: it fails t if the step changed a bit of the parameters or of
// either moment, and returns the step's metrics and the snapshot after it.
func skippedStep(t *testing.T, tr *Trainer) (Metric, [3][]float32) {
	t.Helper()
	before := snapshot(t, tr)
	m, err := tr.Step()
	if err != nil {
		t.Fatal(err)
	}
	after := snapshot(t, tr)
	for k := range before {
		for i := range before[k] {
			if math.Float32bits(before[k][i]) != math.Float32bits(after[k][i]) {
				t.Fatalf("buffer %d element %d changed on a skipped step", k, i)
			}
		}
	}
	return m, after
}

// TestInfGradientSkipsStep: an Inf injected into one step's gradients skips
// exactly that step (parameters and both moments unchanged), halves the
// scale, and training goes on.
func TestInfGradientSkipsStep(t *testing.T) {
	tr := newTrainer(t, testOptions(10, amp.FP16))
	tr.gradHook = func(step int, g *tensor.Tensor) {
		if step == 3 {
			setInf(tr, g, 1234)
		}
	}
	runSteps(t, tr, 2)
	scale := tr.Scaler.Scale
	m, after := skippedStep(t, tr)
	if tr.Scaler.Scale != scale/2 || m.Skipped != 1 || tr.Opt.Steps != 2 {
		t.Fatalf("scale %g (was %g), skipped %d, optimizer steps %d", tr.Scaler.Scale, scale, m.Skipped, tr.Opt.Steps)
	}
	m, err := tr.Step()
	if err != nil || m.Skipped != 1 || tr.Opt.Steps != 3 {
		t.Fatalf("the step after the skip: %+v %v", m, err)
	}
	after2 := snapshot(t, tr)
	if after2[0][0] == after[0][0] && after2[0][100] == after[0][100] {
		t.Error("parameters did not move on the step after the skip")
	}
}

func TestScalerGrowsInTraining(t *testing.T) {
	tr := newTrainer(t, testOptions(10, amp.FP16))
	tr.Scaler.GrowthInterval = 3
	runSteps(t, tr, 3)
	if tr.Scaler.Scale != 131072 {
		t.Fatalf("scale after 3 clean steps %g, want 131072", tr.Scaler.Scale)
	}
}
