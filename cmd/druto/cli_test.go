package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/data"
)

// buildDruto builds the command into a temp folder, or returns the one
// DRUTO_CLI names (a machine without Go, such as the GPU machine, runs the
// CLI tests against the binary scripts/gpu-build.sh made).
func buildDruto(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("DRUTO_CLI"); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	bin := filepath.Join(t.TempDir(), "druto")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestBadInput: each bad input gives one line naming the cause, a non-zero
// exit, no panic trace, and no partial file left behind.
func TestBadInput(t *testing.T) {
	bin := buildDruto(t)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty := write("empty.txt", nil)
	latin1 := write("latin1.txt", []byte("caf\xe9 au lait\n"))
	good := write("good.txt", []byte(strings.Repeat("The box is big.\n", 200)))
	shardHdr := make([]byte, 1024)
	badShard := write("bad.bin", append(shardHdr, 1, 2, 3, 4))
	trunc := write("trunc.safetensors", []byte{200, 0, 0, 0, 0, 0, 0, 0, '{'})
	out := filepath.Join(dir, "out")
	unbalanced := filepath.Join(dir, "labs")
	if err := os.MkdirAll(unbalanced, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(unbalanced, "lab.ipynb"), []byte(`{"cells": [{"cell_type": "code", "source": "// BEGIN SOLUTION\n"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name string
		args []string
		want string // a word the one-line message must contain
	}{
		{"unknown preset", []string{"train", "--preset", "huge", "--out", out}, "unknown preset"},
		{"negative steps", []string{"train", "--steps", "-3", "--out", out}, "--steps"},
		{"seq too long", []string{"train", "--seq", "4096", "--out", out}, "--seq"},
		{"bad amp", []string{"train", "--amp", "fp4", "--out", out}, "precision"},
		{"missing data", []string{"train", "--data", filepath.Join(dir, "nope.txt"), "--out", out}, "nope.txt"},
		{"empty data", []string{"train", "--data", empty, "--out", out}, "empty"},
		{"non-UTF-8 data", []string{"train", "--data", latin1, "--out", out}, "UTF-8"},
		{"bad shard", []string{"train", "--data", badShard, "--out", out}, "magic"},
		{"truncated checkpoint", []string{"sample", "--checkpoint", trunc}, "corrupt"},
		{"missing checkpoint", []string{"eval", "--checkpoint", filepath.Join(dir, "none.safetensors"), "--data", good}, "none.safetensors"},
		{"unknown command", []string{"fly"}, "unknown command"},
		{"bad flag", []string{"train", "--stepz", "3"}, "stepz"},
		{"bad bench mode", []string{"bench", "--backend", "cpu", "--modes", "fused"}, "--modes"},
		{"bad bench config", []string{"bench", "--backend", "cpu", "--configs", "tiny:0x8"}, "--configs"},
		{"ops without kernels", []string{"bench", "--backend", "cpu", "--ops", "layernorm_fwd"}, "--kernels"},
		{"unknown kernel op", []string{"bench", "--kernels", "--ops", "layernorm_fwd,softmax"}, "softmax"},
		{"bench data not a shard", []string{"bench", "--backend", "cpu", "--data", good}, ".bin"},
		{"bench data missing", []string{"bench", "--backend", "cpu", "--data", filepath.Join(dir, "nope.bin")}, "nope.bin"},
		{"shard without --out", []string{"tokenizer", "shard"}, "--out"},
		{"shard too few tokens", []string{"tokenizer", "shard", "--data", good, "--tokens", "100000", "--out", filepath.Join(out, "s.bin")}, "fewer than --tokens"},
		{"shard unknown tokenizer", []string{"tokenizer", "shard", "--tokenizer", "nope", "--out", filepath.Join(out, "s.bin")}, "nope"},
		{"lab without subcommand", []string{"lab"}, "release SRC DST"},
		{"lab release without DST", []string{"lab", "release", dir}, "want SRC and DST"},
		{"lab release of no folder", []string{"lab", "release", filepath.Join(dir, "none"), out}, "solution notebooks"},
		{"lab release in place", []string{"lab", "release", unbalanced, unbalanced}, "another DST"},
		{"lab release, unbalanced markers", []string{"lab", "release", unbalanced, out}, "END SOLUTION"},
		{"lab grade of no folder", []string{"lab", "grade", filepath.Join(dir, "none")}, "submitted notebooks"},
		{"lab grade, bad jobs", []string{"lab", "grade", "--jobs", "0", dir}, "--jobs"},
	}
	// Bad values of environment knobs, each named in the message.
	envCases := []struct {
		name, env string
		args      []string
	}{
		{"bad head dW for train", "DRUTO_FP8_HEAD_DW=on", []string{"train", "--out", out}},
		{"bad head dW for bench", "DRUTO_FP8_HEAD_DW=FP8", []string{"bench", "--backend", "cpu", "--modes", "fused+fp32"}},
	}
	run := func(name, want string, env []string, args ...string) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		b, err := cmd.CombinedOutput()
		msg := strings.TrimSpace(string(b))
		if err == nil {
			t.Errorf("%s: exit 0, want an error; output %q", name, msg)
			return
		}
		if strings.Contains(msg, "panic") || strings.Contains(msg, "goroutine ") {
			t.Errorf("%s: panic trace:\n%s", name, msg)
		}
		last := msg[strings.LastIndex(msg, "\n")+1:]
		if !strings.Contains(strings.ToLower(last), strings.ToLower(want)) {
			t.Errorf("%s: last line %q does not mention %q", name, last, want)
		}
	}
	for _, c := range cases {
		run(c.name, c.want, nil, c.args...)
	}
	for _, c := range envCases {
		run(c.name, "DRUTO_FP8_HEAD_DW", []string{c.env}, c.args...)
	}
	if entries, _ := os.ReadDir(out); len(entries) > 0 {
		t.Errorf("failed runs left files in %s: %v", out, entries)
	}
}

// TestTokenizerShard: druto tokenizer shard writes an llm.c shard of exactly
// --tokens GPT-2 tokens of the built-in corpus (the first tokens of that
// corpus under GPT-2's tokenizer), says so in one line, in Bangla under
// DRUTO_LANG=bn, and druto bench --data trains on it.
func TestTokenizerShard(t *testing.T) {
	bin := buildDruto(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens.bin")
	cmd := exec.Command(bin, "tokenizer", "shard", "--out", path, "--tokens", "5000")
	cmd.Env = append(os.Environ(), "DRUTO_LANG=bn")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tokenizer shard: %v\n%s", err, b)
	}
	if msg := strings.TrimSpace(string(b)); strings.Count(msg, "\n") != 0 || !strings.Contains(msg, "টোকেন") || !strings.Contains(msg, "5000") {
		t.Errorf("output %q, want one Bangla line with the count", msg)
	}
	toks, err := data.ReadShard(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := data.GPT2()
	if err != nil {
		t.Fatal(err)
	}
	want, err := g.Encode(data.Corpus(1337, 10000*2))
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != 5000 || !slices.Equal(toks[:4000], want[:4000]) {
		t.Errorf("%d tokens; the first differ from GPT-2's tokens of the corpus", len(toks))
	}
	rep := filepath.Join(dir, "bench.json")
	if b, err := exec.Command(bin, "bench", "--backend", "cpu", "--configs", "tiny:2x16", "--modes", "fused+fp32", "--steps", "2",
		"--warmup", "1", "--data", path, "--json", rep).CombinedOutput(); err != nil {
		t.Fatalf("bench --data: %v\n%s", err, b)
	}
	raw, err := os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"data": "`+path+`"`) || !strings.Contains(string(raw), `"timing": "host clock per step"`) {
		t.Errorf("the report does not name the shard and the timing:\n%s", raw)
	}
}

// TestTrainSampleEval runs the main job end to end at a small size: train,
// refuse to overwrite without --resume, resume to the end, sample and eval.
func TestTrainSampleEval(t *testing.T) {
	if testing.Short() {
		t.Skip("trains for a few seconds") // skip: -short
	}
	bin := buildDruto(t)
	out := filepath.Join(t.TempDir(), "run")
	run := func(args ...string) string {
		t.Helper()
		b, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("druto %v: %v\n%s", args, err, b)
		}
		return string(b)
	}
	common := []string{"train", "--preset", "tiny", "--steps", "6", "--batch", "2", "--seq", "32", "--out", out, "--eval-every", "3", "--sample-tokens", "16"}
	run(append(common, "--until", "3")...)
	if b, err := exec.Command(bin, common...).CombinedOutput(); err == nil || !strings.Contains(string(b), "--resume") {
		t.Errorf("a second run into the same --out must ask for --resume: %v %s", err, b)
	}
	run(append(common, "--resume")...)
	b, _ := os.ReadFile(filepath.Join(out, "metrics.jsonl"))
	if n := strings.Count(string(b), "\n"); n != 6 {
		t.Errorf("metrics.jsonl has %d lines after 3 + resume 3 steps, want 6", n)
	}
	s := run("sample", "--checkpoint", filepath.Join(out, "model.safetensors"), "--prompt", "Rahim", "--tokens", "20")
	if !strings.HasPrefix(s, "Rahim") || len(s) < len("Rahim")+20 {
		t.Errorf("sample output %q", s)
	}
	text := filepath.Join(t.TempDir(), "eval.txt")
	os.WriteFile(text, []byte(strings.Repeat("The box is big.\nবাক্সটি বড়।\n", 40)), 0o644)
	e := run("eval", "--checkpoint", filepath.Join(out, "model.safetensors"), "--data", text, "--batch", "2", "--seq", "32")
	if !strings.HasPrefix(e, "{\"loss\": ") {
		t.Errorf("eval output %q", e)
	}
}

// TestBench: druto bench times each mode on the CPU, prints a progress line
// per record and the table (the baseline's speed-up 1.00x), and writes the
// report.
func TestBench(t *testing.T) {
	bin := buildDruto(t)
	js := filepath.Join(t.TempDir(), "bench.json")
	cmd := exec.Command(bin, "bench", "--backend", "cpu", "--configs", "tiny:2x16", "--modes", "decomposed+fp32,fused+fp32",
		"--steps", "1", "--warmup", "0", "--json", js)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("druto bench: %v\n%s", err, stderr.String())
	}
	table := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(table) != 3 || !strings.Contains(table[0], "speed-up") || !strings.Contains(table[1], "decomposed+fp32") ||
		!strings.Contains(table[1], "1.00x") || !strings.Contains(table[2], "fused+fp32") {
		t.Errorf("table:\n%s", stdout.String())
	}
	if e := stderr.String(); !strings.HasPrefix(e, "druto bench on cpu") || strings.Count(e, " ms/step ") != 2 || !strings.Contains(e, "the highest of the peaks") {
		t.Errorf("progress lines:\n%s", e)
	}
	if b, err := os.ReadFile(js); err != nil || strings.Count(string(b), `"step_ms":`) != 2 {
		t.Errorf("report %s: %v\n%s", js, err, b)
	}
}
