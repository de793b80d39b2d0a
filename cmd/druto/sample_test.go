package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/train"
)

// TestSampleCLI: batched prompts from a file, token ids in and out, the
// statistics line and the dry run; and every bad input gets one line and a
// non-zero exit: an empty or non-UTF-8 prompts file, --tokens 0 or past
// 2^20, a batch larger than memory (saying what it needs), bad ids.
func TestSampleCLI(t *testing.T) {
	bin := buildDruto(t)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	small := gpt.Config{Vocab: 256, MaxSeq: 32, Layers: 2, Heads: 2, Channels: 32}
	ck := filepath.Join(dir, "small.safetensors")
	if _, err := train.SaveModel(ck, small, gpt.InitParams(small, 1)); err != nil {
		t.Fatal(err)
	}
	// A model whose cache for 4096 sequences is 103 GB: under a host cap
	// of 1 GiB (DRUTO_HOST_MEMORY; the H200's host has 128 GiB, where the
	// batch fitted and generated for 95 s) it fits nowhere.
	wide := gpt.Config{Vocab: 256, MaxSeq: 1024, Layers: 12, Heads: 4, Channels: 256}
	big := filepath.Join(dir, "wide.safetensors")
	if _, err := train.SaveModel(big, wide, make([]float32, wide.NumParams())); err != nil {
		t.Fatal(err)
	}
	prompts := write("prompts.txt", []byte("Rahim\r\nকরিম বাজারে\n\nThe box\n"))
	run := func(args ...string) (string, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("druto %v: %v\n%s%s", args, err, out, stderr.String())
		}
		return string(out), stderr.String()
	}

	out, stats := run("sample", "--checkpoint", ck, "--prompts", prompts, "--tokens", "40", "--stats", "--seed", "3")
	parts := strings.Split(strings.TrimSpace(out), "\n----\n")
	if len(parts) != 3 || !strings.HasPrefix(parts[0], "Rahim") || !strings.HasPrefix(parts[1], "করিম বাজারে") || !strings.HasPrefix(parts[2], "The box") {
		t.Fatalf("three prompts, one batch: %q", out)
	}
	if !strings.Contains(stats, "time to first token") || !strings.Contains(stats, "key/value cache") || !strings.Contains(stats, "3 sequences × 40 tokens") {
		t.Errorf("--stats: %q", stats)
	}
	// --batch 1 takes them one at a time: sequence b of a batch draws with
	// seed+b, so the second prompt alone with seed 4 gives the same text.
	alone, _ := run("sample", "--checkpoint", ck, "--prompt", "করিম বাজারে", "--tokens", "40", "--seed", "4", "--stream=false")
	if strings.TrimSpace(alone) != parts[1] {
		t.Errorf("batched %q, alone %q", parts[1], strings.TrimSpace(alone))
	}
	ids, _ := run("sample", "--checkpoint", ck, "--prompt-ids", "1,2,3", "--ids", "--tokens", "70", "--temperature", "0")
	var res struct {
		Prompt    []int32 `json:"prompt_ids"`
		Generated []int32 `json:"generated_ids"`
	}
	if err := json.Unmarshal([]byte(ids), &res); err != nil || len(res.Generated) != 70 || len(res.Prompt) != 3 {
		t.Errorf("--ids (past the context of 32): %q, %v", ids, err)
	}
	dry, _ := run("sample", "--checkpoint", big, "--batch", "4", "--dry-run")
	if !strings.Contains(dry, "key/value cache 96.0 MiB") {
		t.Errorf("--dry-run: %q", dry)
	}

	empty := write("empty.txt", []byte("\n\n"))
	latin1 := write("latin1.txt", []byte("caf\xe9\n"))
	for _, c := range []struct {
		name string
		args []string
		want string
		env  []string
	}{
		{"empty prompts", []string{"--checkpoint", ck, "--prompts", empty}, "no prompt", nil},
		{"non-UTF-8 prompts", []string{"--checkpoint", ck, "--prompts", latin1}, "UTF-8", nil},
		{"non-UTF-8 prompt", []string{"--checkpoint", ck, "--prompt", "caf\xe9"}, "UTF-8", nil},
		{"zero tokens", []string{"--checkpoint", ck, "--tokens", "0"}, "--tokens", nil},
		{"too many tokens", []string{"--checkpoint", ck, "--tokens", "1048577"}, "--tokens", nil},
		{"negative batch", []string{"--checkpoint", ck, "--batch", "-1"}, "--batch", nil},
		{"batch past memory", []string{"--checkpoint", big, "--batch", "4096", "--backend", "cpu"}, "needs", []string{"DRUTO_HOST_MEMORY=1GiB"}},
		{"bad prompt id", []string{"--checkpoint", ck, "--prompt-ids", "1,x"}, "--prompt-ids", nil},
		{"prompt id past the vocabulary", []string{"--checkpoint", ck, "--prompt-ids", "1,256", "--ids"}, "vocabulary", nil},
	} {
		cmd := exec.Command(bin, append([]string{"sample"}, c.args...)...)
		cmd.Env = append(os.Environ(), c.env...)
		b, err := cmd.CombinedOutput()
		msg := strings.TrimSpace(string(b))
		last := msg[strings.LastIndex(msg, "\n")+1:]
		if err == nil || strings.Contains(msg, "goroutine ") || !strings.Contains(last, c.want) {
			t.Errorf("%s: exit %v, last line %q, want it to name %q", c.name, err, last, c.want)
		}
	}
}
