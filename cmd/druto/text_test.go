package main

import (
	"encoding/json"
	"github.com/druto/druto/pkg/gpt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestTokenizerTrainSampleEval: learn a BPE, train on it (the tokens are
// cached and reused), sample and eval without naming the tokenizer again
// (the checkpoint records it), stream the same text, and fine-tune from the
// checkpoint with --init.
func TestTokenizerTrainSampleEval(t *testing.T) {
	if testing.Short() {
		t.Skip("trains for a few seconds") // skip: -short
	}
	bin := buildDruto(t)
	dir := t.TempDir()
	run := func(args ...string) (stdout, stderr string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		var so, se strings.Builder
		cmd.Stdout, cmd.Stderr = &so, &se
		if err := cmd.Run(); err != nil {
			t.Fatalf("druto %v: %v\n%s%s", args, err, so.String(), se.String())
		}
		return so.String(), se.String()
	}
	fail := func(want string, args ...string) {
		t.Helper()
		b, err := exec.Command(bin, args...).CombinedOutput()
		msg := strings.TrimSpace(string(b))
		if err == nil || strings.Contains(msg, "\n") || !strings.Contains(msg, want) {
			t.Errorf("druto %v: %v, output %q; want one line naming %q", args, err, msg, want)
		}
	}
	bpe := filepath.Join(dir, "bn.bpe")
	table, _ := run("tokenizer", "train", "--vocab", "400", "--out", bpe)
	if !strings.Contains(table, "Bangla") || !strings.Contains(table, "bpe (vocab 400)") {
		t.Errorf("tokenizer train printed %q", table)
	}
	// A Bangla-only file has no English: its column says n/a, not 0.000.
	bnText := filepath.Join(dir, "bn.txt")
	if err := os.WriteFile(bnText, []byte(strings.Repeat("রিনার তিনটি বই আছে। গাছে একটি পাখি আছে।\n", 400)), 0o644); err != nil {
		t.Fatal(err)
	}
	bnTable, _ := run("tokenizer", "train", "--data", bnText, "--vocab", "300", "--out", filepath.Join(dir, "bnonly.bpe"))
	for _, l := range strings.Split(bnTable, "\n") {
		if f := strings.Fields(l); len(f) >= 4 && f[0] == "bytes" && (f[2] != "n/a" || f[3] == "n/a") {
			t.Errorf("tokenizer train on Bangla only: %q; want English n/a and a Bangla ratio", l)
		}
	}
	if !strings.Contains(bnTable, "n/a") {
		t.Errorf("tokenizer train on Bangla only printed no n/a:\n%s", bnTable)
	}
	out := filepath.Join(dir, "run")
	common := []string{"train", "--preset", "tiny", "--steps", "3", "--batch", "2", "--seq", "32", "--eval-every", "0", "--sample-tokens", "12", "--tokenizer", bpe}
	_, e1 := run(append(common, "--out", out)...)
	if strings.Contains(e1, "val ") {
		t.Errorf("a run with --eval-every 0 printed a validation loss: %s", e1)
	}
	if !strings.Contains(e1, "cached in") {
		t.Errorf("first run did not cache its tokens: %s", e1)
	}
	_, e2 := run(append(common, "--out", out, "--resume", "--steps", "3")...) // nothing to do, but reads the data
	if !strings.Contains(e2, "from the cache") {
		t.Errorf("second run did not reuse the cached tokens: %s", e2)
	}
	ckpt := filepath.Join(out, "model.safetensors")
	s, _ := run("sample", "--checkpoint", ckpt, "--prompt", "রিনা", "--tokens", "40", "--temperature", "1", "--seed", "3")
	st, _ := run("sample", "--checkpoint", ckpt, "--prompt", "রিনা", "--tokens", "40", "--temperature", "1", "--seed", "3", "--stream")
	if !utf8.ValidString(s) || strings.ContainsRune(s, utf8.RuneError) || !strings.HasPrefix(s, "রিনা") {
		t.Errorf("sample %q", s)
	}
	if s != st {
		t.Errorf("--stream printed %q, without it %q", st, s)
	}
	text := filepath.Join(dir, "eval.txt")
	os.WriteFile(text, []byte(strings.Repeat("Rina has 3 books.\nরিনার ৩টি বই আছে।\n", 60)), 0o644)
	ev, _ := run("eval", "--checkpoint", ckpt, "--data", text, "--batch", "2", "--seq", "32")
	var r struct {
		LossPerChar   float64 `json:"loss_per_char"`
		Tokenizer     string
		Chars, Tokens int
	}
	if err := json.Unmarshal([]byte(ev), &r); err != nil || r.Tokenizer != "bpe" || r.LossPerChar <= 0 || r.Chars <= r.Tokens {
		t.Errorf("eval printed %q (%v)", ev, err)
	}
	// Fine-tuning from the checkpoint: shape and tokenizer come from it.
	_, e3 := run("train", "--init", ckpt, "--steps", "2", "--batch", "2", "--seq", "32", "--eval-every", "0", "--sample-tokens", "0", "--out", filepath.Join(dir, "ft"))
	if !strings.Contains(e3, "(druto)") || !strings.Contains(e3, "bpe tokens") {
		t.Errorf("--init run said %q", e3)
	}
	fail("leave out --preset", "train", "--init", ckpt, "--preset", "tiny", "--out", filepath.Join(dir, "x"))
	fail("--resume", "train", "--init", ckpt, "--resume", "--out", out)
	fail("--top-p", "sample", "--checkpoint", ckpt, "--top-p", "2")
	fail("--temperature", "sample", "--checkpoint", ckpt, "--temperature", "NaN")
	fail("--vocab", "tokenizer", "train", "--vocab", "100", "--out", filepath.Join(dir, "y.bpe"))
	fail("neither bytes, gpt2", "train", "--tokenizer", filepath.Join(dir, "none.bpe"), "--out", filepath.Join(dir, "z"))
	fail("usage", "tokenizer")
}

// TestTrainGPT2Tokens trains the tiny model on a text file with GPT-2's
// tokenizer: the vocabulary grows to 50304 and the sample is text.
func TestTrainGPT2Tokens(t *testing.T) {
	if testing.Short() {
		t.Skip("trains for a few seconds") // skip: -short
	}
	bin := buildDruto(t)
	dir := t.TempDir()
	text := filepath.Join(dir, "in.txt")
	os.WriteFile(text, []byte(strings.Repeat("Hello world, this is Rina. রিনার ৩টি বই আছে।\n", 80)), 0o644)
	out := filepath.Join(dir, "run")
	b, err := exec.Command(bin, "train", "--preset", "tiny", "--steps", "2", "--batch", "2", "--seq", "32", "--eval-every", "0",
		"--sample-tokens", "8", "--tokenizer", "gpt2", "--data", text, "--out", out).CombinedOutput()
	if err != nil || !strings.Contains(string(b), "gpt2 tokens") {
		t.Fatalf("train --tokenizer gpt2: %v\n%s", err, b)
	}
	s, err := exec.Command(bin, "sample", "--checkpoint", filepath.Join(out, "model.safetensors"), "--prompt", "Hello", "--tokens", "10").Output()
	if err != nil || !utf8.Valid(s) || !strings.HasPrefix(string(s), "Hello") {
		t.Fatalf("sample: %v %q", err, s)
	}
}

func TestAutoSampleTokens(t *testing.T) {
	for preset, want := range map[string]int{"tiny": defaultSampleTokens, "small": defaultSampleTokens, "gpt2-124M": 0} {
		cfg, err := gpt.Preset(preset)
		if err != nil {
			t.Fatal(err)
		}
		if got := autoSampleTokens(cfg); got != want {
			t.Errorf("autoSampleTokens(%s) = %d, want %d", preset, got, want)
		}
	}
}
