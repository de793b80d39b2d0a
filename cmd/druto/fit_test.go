package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/gpt"
)

// TestFitErrors: a total batch not divisible by B·T, a memory cap below
// the smallest plan (the line says what it needs), an unknown recompute
// level, a bad DRUTO_GPU_MEMORY, an unknown moment dtype and an unknown
// FP8 scaling each give one line and exit 1, and write nothing.
func TestFitErrors(t *testing.T) {
	bin := buildDruto(t)
	out := filepath.Join(t.TempDir(), "out")
	cases := []struct {
		name, cap string
		args      []string
		want      []string // words the one line must contain
	}{
		{"total batch not divisible", "", []string{"--batch", "4", "--total-batch", "1000"}, []string{"--total-batch 1000", "512"}},
		{"total batch not whole sequences", "", []string{"--fit", "--total-batch", "1000"}, []string{"--total-batch 1000", "multiple of 128"}},
		{"cap below the smallest plan", "10MiB", []string{"--backend", "cpu", "--total-batch", "8192"}, []string{"needs 15.0 MiB", "budget is 10.0 MiB", "DRUTO_GPU_MEMORY"}},
		{"unknown recompute level", "", []string{"--recompute", "full"}, []string{"--recompute", "none, gelu or layer"}},
		{"bad cap", "lots", []string{"--dry-run"}, []string{"DRUTO_GPU_MEMORY", "16GiB"}},
		{"fit with batch", "", []string{"--fit", "--batch", "4"}, []string{"--fit"}},
		{"unknown moment dtype", "", []string{"--adam-state", "fp16"}, []string{"--adam-state", "fp32 or bf16"}},
		{"unknown fp8 scaling", "", []string{"--fp8-scaling", "just-in-time"}, []string{"--fp8-scaling", "delayed or current"}},
	}
	for _, c := range cases {
		cmd := exec.Command(bin, append([]string{"train", "--preset", "tiny", "--steps", "2", "--out", out}, c.args...)...)
		cmd.Env = append(os.Environ(), "DRUTO_GPU_MEMORY="+c.cap)
		b, err := cmd.CombinedOutput()
		msg := strings.TrimSpace(string(b))
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("%s: %v, want exit 1; output %q", c.name, err, msg)
			continue
		}
		if strings.Count(msg, "\n") != 0 || strings.Contains(msg, "panic") {
			t.Errorf("%s: want one line, got %q", c.name, msg)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q does not mention %q", c.name, msg, w)
			}
		}
	}
	if entries, _ := os.ReadDir(out); len(entries) > 0 {
		t.Errorf("failed runs left files in %s: %v", out, entries)
	}
}

// TestFitDryRun: under a faked 40 MiB budget the planner's table shows
// each level and its choice (no recomputation at micro-batch 4, 16
// micro-steps, by FLOPs), and the dry run's breakdown follows the choice;
// a given --recompute layer reports its saving.
func TestFitDryRun(t *testing.T) {
	bin := buildDruto(t)
	cmd := exec.Command(bin, "train", "--preset", "tiny", "--backend", "cpu", "--total-batch", "8192", "--dry-run")
	cmd.Env = append(os.Environ(), "DRUTO_GPU_MEMORY=40MiB")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	s := string(b)
	for _, w := range []string{"Plan for V256 T128 L4 H4 C128", "budget 40.0 MiB (DRUTO_GPU_MEMORY)", "<- chosen", "why: recompute none at micro-batch 4",
		"B 4 T 128", "accumulation: 16 micro-batches of 4 x 128, 8192 tokens a step"} {
		if !strings.Contains(s, w) {
			t.Errorf("dry run output lacks %q:\n%s", w, s)
		}
	}
	b, err = exec.Command(bin, "train", "--preset", "tiny", "--backend", "cpu", "--batch", "4", "--accum", "2", "--recompute", "layer", "--dry-run").CombinedOutput()
	if s := string(b); err != nil || !strings.Contains(s, "recompute layer saves") || strings.Contains(s, "Plan for") || !strings.Contains(s, "accumulation: 2 micro-batches") {
		t.Errorf("--batch 4 --accum 2 --recompute layer --dry-run: %v\n%s", err, s)
	}
	// bf16 moments: the dry run shows the saving (4 bytes a parameter of
	// tiny's 842,496), and the planner counts it: under a budget that the
	// smallest fp32-moment plan misses, bf16 moments fit.
	b, err = exec.Command(bin, "train", "--preset", "tiny", "--backend", "cpu", "--batch", "4", "--adam-state", "bf16", "--dry-run").CombinedOutput()
	if s := string(b); err != nil || !strings.Contains(s, "AdamW moments bf16") || !strings.Contains(s, "bf16 moments save 3369984 bytes") {
		t.Errorf("--adam-state bf16 --dry-run: %v\n%s", err, s)
	}
	for _, c := range []struct {
		moments string
		fits    bool
	}{{"fp32", false}, {"bf16", true}} {
		cmd := exec.Command(bin, "train", "--preset", "tiny", "--backend", "cpu", "--total-batch", "8192", "--adam-state", c.moments, "--dry-run")
		cmd.Env = append(os.Environ(), "DRUTO_GPU_MEMORY=14MiB")
		b, err := cmd.CombinedOutput()
		if (err == nil) != c.fits || c.fits != strings.Contains(string(b), "<- chosen") {
			t.Errorf("%s moments under 14 MiB: fits %v, want %v: %v\n%s", c.moments, err == nil, c.fits, err, b)
		}
	}
}

// TestAccumTrain: a short run with --accum and --recompute trains and says
// how its step is laid out.
func TestAccumTrain(t *testing.T) {
	if testing.Short() {
		t.Skip("trains for a few seconds") // skip: -short
	}
	bin := buildDruto(t)
	out := filepath.Join(t.TempDir(), "run")
	b, err := exec.Command(bin, "train", "--preset", "tiny", "--backend", "cpu", "--steps", "2", "--batch", "2", "--seq", "32", "--total-batch", "256",
		"--recompute", "gelu", "--out", out, "--eval-every", "0", "--sample-tokens", "0").CombinedOutput()
	if s := string(b); err != nil || !strings.Contains(s, "B 2 T 32 x 4 micro-batches, recompute gelu") || !strings.Contains(s, "done, step 2") {
		t.Errorf("druto train --total-batch 256 --batch 2 --seq 32: %v\n%s", err, s)
	}
}

// TestModelLabel: messages name a preset, a checkpoint of a preset's shape
// by that preset, and any other checkpoint by its shape (gpt2-xl's, not
// the --preset default "tiny" that --init overrides).
func TestModelLabel(t *testing.T) {
	g124, _ := gpt.Preset("gpt2-124M")
	xl := gpt.Config{Vocab: 50304, MaxSeq: 1024, Layers: 48, Heads: 25, Channels: 1600}
	for _, c := range []struct {
		cfg      gpt.Config
		preset   string
		fromInit bool
		want     string
	}{
		{g124, "gpt2-124M", false, "gpt2-124M"},
		{g124, "tiny", true, "gpt2-124M"},
		{xl, "tiny", true, "V50304 T1024 L48 H25 C1600"},
	} {
		if got := modelLabel(c.cfg, c.preset, c.fromInit); got != c.want {
			t.Errorf("modelLabel(%s, %q, %v) = %q, want %q", c.cfg, c.preset, c.fromInit, got, c.want)
		}
	}
}
