package main

import (
	"bytes"
	"os"
	"path/filepath"
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
	os.WriteFile(filepath.Join(dir, "metrics.jsonl"), []byte(`{"step":99,"loss":5}`+"\n"), 0o644)
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
