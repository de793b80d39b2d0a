package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/train"
)

// TestOutProtected: an --out folder holding any file a run writes (the
// model, its state, config.json, metrics, a token cache) is refused without
// --resume or --overwrite, and left byte for byte as it was.
func TestOutProtected(t *testing.T) {
	bin := buildDruto(t)
	root := t.TempDir()
	cfg := gpt.Config{Vocab: 256, MaxSeq: 32, Layers: 1, Heads: 2, Channels: 16}
	model := filepath.Join(root, "model.safetensors")
	if _, err := train.SaveModel(model, cfg, gpt.InitParams(cfg, 1)); err != nil {
		t.Fatal(err)
	}
	modelBytes, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	quick := []string{"--steps", "2", "--batch", "2", "--seq", "16", "--eval-every", "0", "--sample-tokens", "0", "--backend", "cpu"}
	for _, c := range []struct {
		name  string
		files map[string][]byte
		held  string // the names the message lists
	}{
		{"transformers model and config, no state", map[string][]byte{"model.safetensors": modelBytes, "config.json": []byte(`{"model_type":"gpt2"}`)}, "(model.safetensors, config.json)"},
		{"only metrics", map[string][]byte{"metrics.jsonl": []byte(`{"step":1,"loss":5}` + "\n")}, "(metrics.jsonl)"},
		{"only state", map[string][]byte{"state.safetensors": []byte("state")}, "(state.safetensors)"},
		{"only a token cache", map[string][]byte{"tokens-bytes-0123456789abcdef.bin": []byte("tokens")}, "(tokens-bytes-0123456789abcdef.bin)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(root, strings.ReplaceAll(c.name, " ", "-"))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for n, b := range c.files {
				if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err, _, last := drutoRun(t, bin, append([]string{"train", "--out", dir}, quick...)...)
			if err == nil || !strings.Contains(last, "already holds a run's files "+c.held) || !strings.Contains(last, "--overwrite") {
				t.Fatalf("exit %v, last line %q: want a refusal naming %s and --overwrite", err, last, c.held)
			}
			if code := exitCode(err); code != 1 {
				t.Errorf("exit status %d, want 1", code)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != len(c.files) {
				t.Errorf("the refused run changed the folder: %v", entries)
			}
			for n, b := range c.files {
				if got, err := os.ReadFile(filepath.Join(dir, n)); err != nil || !bytes.Equal(got, b) {
					t.Errorf("%s changed by a refused run (%v)", n, err)
				}
			}
		})
	}
	// --overwrite replaces them; it does not go with --resume.
	dir := filepath.Join(root, "overwrite")
	os.MkdirAll(dir, 0o755)
	oldLog := []byte(`{"step":99,"loss":5}` + "\n")
	os.WriteFile(filepath.Join(dir, "metrics.jsonl"), oldLog, 0o644)
	// A run that fails before its first checkpoint leaves the old files as
	// they were: missing data, and data too short for one batch.
	tiny := filepath.Join(root, "tiny.txt")
	os.WriteFile(tiny, []byte("ab"), 0o644)
	for _, data := range []string{filepath.Join(root, "missing.txt"), tiny} {
		if err, _, last := drutoRun(t, bin, append([]string{"train", "--out", dir, "--overwrite", "--data", data}, quick...)...); exitCode(err) != 1 {
			t.Fatalf("--overwrite --data %s: exit %v (%s), want 1", data, err, last)
		}
		if got, err := os.ReadFile(filepath.Join(dir, "metrics.jsonl")); err != nil || !bytes.Equal(got, oldLog) {
			t.Errorf("--overwrite --data %s failed before its first checkpoint, yet changed the old metrics (%q, %v)", data, got, err)
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				t.Errorf("--overwrite --data %s left %s", data, e.Name())
			}
		}
	}
	if err, _, last := drutoRun(t, bin, append([]string{"train", "--out", dir, "--overwrite"}, quick...)...); err != nil {
		t.Fatalf("--overwrite: %v: %s", err, last)
	}
	if m, err := train.ReadMetricsFile(filepath.Join(dir, "metrics.jsonl")); err != nil || len(m) == 0 || m[len(m)-1].Step != 2 {
		t.Errorf("after --overwrite the metrics are %v (%v), want the new run's 2 steps", m, err)
	}
	for _, c := range []cliCase{
		{"overwrite and resume", []string{"train", "--out", dir, "--overwrite", "--resume"}, "give one of them"},
		{"empty out", []string{"train", "--out", ""}, "--out is empty"},
	} {
		if err, _, last := drutoRun(t, bin, c.args...); err == nil || !strings.Contains(last, c.want) {
			t.Errorf("%s: exit %v, last line %q, want %q", c.name, err, last, c.want)
		}
	}
}

// exitCode is err's exit status (0 for nil, -1 when it is not an exit).
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(interface{ ExitCode() int }); ok {
		return ee.ExitCode()
	}
	return -1
}

// boundCase is a command line that must pass a bound (ok: its error, if
// any, is about something else: not) or be refused by it (want in the last
// line), with env added.
type boundCase struct {
	name string
	env  []string
	args []string
	want string // refused: a phrase of the last line
	not  string // passed: a phrase the last line must not hold ("" with exit 0)
}

// TestBounds: every numeric flag is bounded, with the reason in the
// message, and tested at the edge: the bound passes, the bound + 1 is
// refused with exit 1, one line, no trace. The host fit check refuses a
// step, an evaluation and a benchmark that do not fit a faked small host.
func TestBounds(t *testing.T) {
	bin := buildDruto(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	text := filepath.Join(dir, "text.txt")
	os.WriteFile(text, []byte(strings.Repeat("The box is big.\n", 200)), 0o644)
	cfg := gpt.Config{Vocab: 256, MaxSeq: 32, Layers: 1, Heads: 2, Channels: 16}
	good := filepath.Join(dir, "good.safetensors")
	if _, err := train.SaveModel(good, cfg, gpt.InitParams(cfg, 1)); err != nil {
		t.Fatal(err)
	}
	n := func(v int) string { return strconv.Itoa(v) }
	var bpe, metrics strings.Builder
	bpe.WriteString("druto bpe v1\n97 97\n")
	for k := 1; k < 40; k++ {
		fmt.Fprintf(&bpe, "%d %d\n", 255+k, 255+k)
	}
	for s := 1; s <= 40; s++ {
		fmt.Fprintf(&metrics, "{\"step\":%d,\"loss\":%s1e308}\n", s, map[bool]string{true: "-", false: ""}[s%2 == 0])
	}
	doublingBPE, huge := filepath.Join(dir, "doubling.bpe"), filepath.Join(dir, "huge.jsonl")
	os.WriteFile(doublingBPE, []byte(bpe.String()), 0o644)
	os.WriteFile(huge, []byte(metrics.String()), 0o644)
	dry := []string{"train", "--dry-run", "--batch", "2", "--seq", "16", "--out", out}
	ranks := maxRanks()
	small := []string{"DRUTO_HOST_MEMORY=200MiB"}
	quick := []string{"--batch", "2", "--seq", "16", "--eval-every", "0", "--sample-tokens", "0", "--backend", "cpu"}
	cases := []boundCase{
		{name: "steps at 2^24", args: append(dry, "--steps", n(maxSteps))},
		{name: "steps at 2^24+1", args: append(dry, "--steps", n(maxSteps+1)), want: "--steps 16777217 is more than 16777216: the step on the device counts optimizer steps in float32"},
		{name: "steps 2^40", args: append(dry, "--steps", n(1<<40)), want: "is more than 16777216"},
		{name: "warmup at 2^24", args: append(dry, "--warmup", n(maxSteps))},
		{name: "warmup at 2^24+1", args: append(dry, "--warmup", n(maxSteps+1)), want: "--warmup 16777217 is more than 16777216"},
		{name: "until at steps", args: append(dry, "--steps", "5", "--until", "5")},
		{name: "until beyond steps", args: append(dry, "--steps", "5", "--until", "6"), want: "--until 6 is more than 5: the run ends at --steps 5"},
		{name: "until 2^40", args: append(dry, "--until", n(1<<40)), want: "the run ends at --steps 300"},
		{name: "ranks at 4 a core", args: append(dry, "--ranks", n(ranks))},
		{name: "ranks beyond", args: append(dry, "--ranks", n(ranks+1)), want: fmt.Sprintf("--ranks %d is more than %d: each rank is a process", ranks+1, ranks)},
		{name: "ranks 2^40", args: append(dry, "--ranks", n(1<<40)), want: "each rank is a process"},
		{name: "batch x seq at 2^31", args: []string{"train", "--dry-run", "--batch", n(1 << 24), "--seq", "128", "--out", out}},
		{name: "batch x seq beyond 2^31", args: []string{"train", "--dry-run", "--batch", n(1<<24 + 1), "--seq", "128", "--out", out}, want: "int32"},
		{name: "bench steps at 10000", args: []string{"bench", "--backend", "cpu", "--steps", "10000", "--modes", "nope"}, not: "--steps"},
		{name: "bench steps beyond", args: []string{"bench", "--backend", "cpu", "--steps", "10001"}, want: "--steps 10001 is more than 10000: the median"},
		{name: "bench steps 2^40", args: []string{"bench", "--backend", "cpu", "--steps", n(1 << 40)}, want: "is more than 10000"},
		{name: "bench warmup at 10000", args: []string{"bench", "--backend", "cpu", "--warmup", "10000", "--modes", "nope"}, not: "--warmup"},
		{name: "bench warmup beyond", args: []string{"bench", "--backend", "cpu", "--warmup", "10001"}, want: "--warmup 10001 is more than 10000"},
		{name: "bench sample rounds beyond", args: []string{"bench", "--sample", "--backend", "cpu", "--steps", "10001"}, want: "--steps 10001 is more than 10000"},
		{name: "bench config beyond 2^31", args: []string{"bench", "--backend", "cpu", "--configs", "tiny:16777217x128"}, want: "int32"},
		{name: "eval batch beyond 2^31", args: []string{"eval", "--checkpoint", good, "--data", text, "--batch", n(1<<26 + 1), "--seq", "32"}, want: "int32"},

		// The host fit check (DRUTO_HOST_MEMORY fakes a small host).
		{name: "train fits", env: small, args: append([]string{"train", "--steps", "1", "--out", filepath.Join(dir, "fits")}, quick...)},
		{name: "train does not fit", env: small, args: []string{"train", "--backend", "cpu", "--batch", "8000", "--seq", "128", "--steps", "1", "--out", out}, want: "out of host memory: tiny at B 8000 T 128"},
		{name: "eval fits", env: small, args: []string{"eval", "--checkpoint", good, "--data", text, "--batch", "2", "--backend", "cpu"}},
		{name: "eval does not fit", env: small, args: []string{"eval", "--checkpoint", good, "--data", text, "--batch", "160000", "--backend", "cpu"}, want: "out of host memory: evaluating"},
		{name: "bench does not fit", env: small, args: []string{"bench", "--backend", "cpu", "--configs", "tiny:1000000x64", "--modes", "fused+fp32"}, want: "lower the batch in --configs"},
		{name: "host memory not a size", env: []string{"DRUTO_HOST_MEMORY=lots"}, args: append([]string{"train", "--steps", "1", "--out", out}, quick...), want: "DRUTO_HOST_MEMORY=\"lots\""},

		// Files: a tokenizer whose tokens double at each merge; plots of
		// losses at the ends of float64 (drutoRunEnv's deadline catches a hang).
		{name: "doubling tokenizer", args: append([]string{"train", "--tokenizer", doublingBPE, "--out", out}, quick...), want: "longer than 64 MiB together"},
		{name: "plot ±1e308", args: []string{"plot", "--metrics", huge, "--out", filepath.Join(dir, "huge.svg")}},
		{name: "plot ±1e308, log", args: []string{"plot", "--metrics", huge, "--log", "--out", filepath.Join(dir, "huge-log.svg")}, want: "a log axis needs positive losses"},

		// Messages said plainly.
		{name: "empty out", args: []string{"train", "--out", ""}, want: "--out is empty"},
	}
	for _, c := range cases {
		err, _, last := drutoRunEnv(t, bin, c.env, c.args...)
		t.Logf("%s: %s", c.name, last)
		switch {
		case c.want != "" && (err == nil || !strings.Contains(last, c.want)):
			t.Errorf("%s: exit %v, last line %q: want a refusal with %q", c.name, err, last, c.want)
		case c.want != "" && exitCode(err) != 1:
			t.Errorf("%s: exit status %d, want 1", c.name, exitCode(err))
		case c.want == "" && c.not == "" && err != nil:
			t.Errorf("%s: %v: %s (want it to pass)", c.name, err, last)
		case c.not != "" && (err == nil || strings.Contains(last, c.not)):
			t.Errorf("%s: exit %v, last line %q: want an error about something other than %s", c.name, err, last, c.not)
		}
	}
	if entries, _ := os.ReadDir(out); len(entries) > 0 {
		t.Errorf("refused runs left files in %s: %v", out, entries)
	}

	// A command line that does not parse exits 2, as flag's own errors do.
	for _, args := range [][]string{{"train", "--stepz", "3"}, {"train", "--steps", "x"}, {"train", "500"}} {
		if err, _, last := drutoRun(t, bin, args...); exitCode(err) != 2 || !strings.Contains(last, "--help") {
			t.Errorf("druto %v: exit %d, %q: want a usage error, exit 2", args, exitCode(err), last)
		}
	}

	// --backend gpu without a GPU stops, and does not say it uses the CPU.
	if err, _, last := drutoRun(t, bin, "train", "--backend", "gpu", "--steps", "1", "--out", filepath.Join(dir, "gpu")); err != nil {
		if !strings.Contains(last, "no usable GPU") || strings.Contains(last, "using the CPU") {
			t.Errorf("--backend gpu without a GPU: %q", last)
		}
	} else {
		t.Log("a GPU is here: --backend gpu trained") // the message case needs a machine without one
	}

	// --resume --until at or below the checkpoint's step is an error that
	// says so; resuming a finished run says there is nothing to train.
	run := filepath.Join(dir, "run")
	common := append([]string{"train", "--steps", "3", "--out", run}, quick...)
	if err, _, last := drutoRun(t, bin, append(common, "--until", "2")...); err != nil {
		t.Fatalf("train --until 2: %s", last)
	}
	for _, until := range []string{"1", "2"} {
		err, _, last := drutoRun(t, bin, append(common, "--resume", "--until", until)...)
		if err == nil || !strings.Contains(last, "--until "+until+": the run in "+run+" is already at step 2; give an --until between 3 and 3") {
			t.Errorf("--resume --until %s: exit %v, %q", until, err, last)
		}
	}
	if err, _, last := drutoRun(t, bin, append(common, "--resume", "--until", "3")...); err != nil || !strings.Contains(last, "done, step 3") {
		t.Errorf("--resume --until 3: exit %v, %q", err, last)
	}
	if err, _, last := drutoRun(t, bin, append(common, "--resume")...); err != nil || !strings.Contains(last, "has done all its 3 steps: nothing to train") {
		t.Errorf("resuming a finished run: exit %v, %q", err, last)
	}
	if err, _, last := drutoRun(t, bin, "train", "--resume", "--out", filepath.Join(dir, "none")); err == nil || !strings.Contains(last, "holds no checkpoint to continue") {
		t.Errorf("resuming nothing: exit %v, %q", err, last)
	}

	// Resume is as strict as sample: a model whose recorded tokenizer is
	// corrupt (edited, or in a file from before the metadata checksum)
	// stops it, and the model is left as it was.
	model := filepath.Join(run, train.ModelFile)
	for name, edit := range map[string]func(map[string]string){
		"edited": func(m map[string]string) { m["druto_tokenizer"], m["druto_tokenizer_bpe"] = "bpe", "not a bpe" },
		"older, no sum": func(m map[string]string) {
			delete(m, "druto_meta_sha256")
			m["druto_tokenizer"], m["druto_tokenizer_bpe"] = "bpe", "not a bpe"
		},
	} {
		withMeta(t, model, model+".bad", edit)
		os.Rename(model+".bad", model)
		before, _ := os.ReadFile(model)
		for _, args := range [][]string{append(common, "--resume", "--steps", "3"), {"sample", "--checkpoint", model}} {
			if err, _, last := drutoRun(t, bin, args...); err == nil || !strings.Contains(last, "corrupt checkpoint") {
				t.Errorf("%s tokenizer, %s: exit %v, %q", name, args[0], err, last)
			}
		}
		if after, _ := os.ReadFile(model); !bytes.Equal(before, after) {
			t.Errorf("%s tokenizer: the model was rewritten", name)
		}
	}
}
