package lab

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStrip(t *testing.T) {
	src := "func f() (int, error) {\n\t// BEGIN SOLUTION\n\t// STUB: return 0, nil\n\tx := 41\n\treturn x + 1, nil\n\t// END SOLUTION\n}\n"
	got, n, err := Strip(src)
	if err != nil || n != 1 || got != "func f() (int, error) {\n\treturn 0, nil\n}\n" {
		t.Errorf("Strip: %d blocks, %v:\n%s", n, err, got)
	}
	got, n, _ = Strip("func g() {\n\t// BEGIN SOLUTION\n\tprintln()\n\t// END SOLUTION\n}\n")
	if n != 1 || got != "func g() {\n\t// TODO: your code here.\n}\n" {
		t.Errorf("Strip without a stub line:\n%s", got)
	}
	for _, bad := range []string{"// BEGIN SOLUTION\n", "// END SOLUTION\n", "// BEGIN SOLUTION\n// BEGIN SOLUTION\n"} {
		if _, _, err := Strip(bad); err == nil {
			t.Errorf("Strip(%q) found no error", bad)
		}
	}
}

func TestRelease(t *testing.T) {
	src := filepath.Join("..", "..", "notebooks", "labs")
	dst := t.TempDir()
	files, err := Release(src, dst)
	if err != nil || len(files) != 12 {
		t.Fatalf("Release: %v, %d files", err, len(files))
	}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if strings.Contains(string(b), "BEGIN SOLUTION") || !strings.Contains(string(b), "lab.Check(") || !json.Valid(b) {
			t.Errorf("%s: solutions left, checks gone or not JSON", f)
		}
	}
	if _, err := Release(src, src); err == nil || !strings.Contains(err.Error(), "another DST") {
		t.Errorf("releasing in place: %v", err)
	}
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "x.ipynb"), []byte(`{"cells": [{"cell_type": "code", "source": "// BEGIN SOLUTION\n"}]}`), 0o644)
	out := filepath.Join(t.TempDir(), "out")
	if _, err := Release(bad, out); err == nil || !strings.Contains(err.Error(), "cell 1") {
		t.Errorf("unbalanced markers: %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed release wrote %s", out)
	}
}
