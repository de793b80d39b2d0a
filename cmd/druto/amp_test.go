package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAmpFP8Refused: `train --amp fp8` (with --dry-run too), `sample --amp
// fp8` and a bench mode fused+fp8 each give one line and exit 1 and write
// nothing; on this machine (no GPU of sm_89+, or --backend cpu) train's
// line names the hardware fp8 needs and suggests bf16.
func TestAmpFP8Refused(t *testing.T) {
	bin := buildDruto(t)
	out := filepath.Join(t.TempDir(), "out")
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"train cpu", []string{"train", "--amp", "fp8", "--backend", "cpu", "--out", out}, []string{"compute capability 8.9", "this is the CPU (--backend cpu)", "use --amp bf16"}},
		{"train dry run", []string{"train", "--amp", "fp8", "--backend", "cpu", "--dry-run", "--out", out}, []string{"--amp fp8", "compute capability 8.9"}},
		{"train auto", []string{"train", "--amp", "fp8", "--out", out}, []string{"--amp fp8"}},
		{"sample", []string{"sample", "--amp", "fp8"}, []string{"--amp fp8", "--amp bf16"}},
		{"bench", []string{"bench", "--modes", "fused+fp8", "--json", filepath.Join(out, "b.json")}, []string{"fused+fp8", "bf16"}},
	}
	for _, c := range cases {
		cmd := exec.Command(bin, c.args...)
		cmd.Dir = t.TempDir()
		b, err := cmd.CombinedOutput()
		msg := strings.TrimSpace(string(b))
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("%s: %v, want exit 1; output %q", c.name, err, msg)
			continue
		}
		if strings.Count(msg, "\n") != 0 {
			t.Errorf("%s: want one line, got %q", c.name, msg)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q does not mention %q", c.name, msg, w)
			}
		}
		if entries, _ := os.ReadDir(cmd.Dir); len(entries) > 0 {
			t.Errorf("%s: wrote %v", c.name, entries)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused run made %s", out)
	}
}
