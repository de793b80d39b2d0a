package boundedread

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	os.WriteFile(p, []byte("hello"), 0o644)
	if b, err := ReadFile(p, 5); err != nil || string(b) != "hello" {
		t.Fatalf("got %q, %v", b, err)
	}
	if _, err := ReadFile(p, 4); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the limit: %v", err)
	}
	if _, err := ReadFile(dir, 1<<20); !errors.Is(err, ErrNotRegular) {
		t.Errorf("folder: %v", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "none"), 1); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	special := []string{"/dev/zero"}
	fifo := filepath.Join(dir, "fifo")
	if exec.Command("mkfifo", fifo).Run() == nil {
		special = append(special, fifo)
	}
	for _, p := range special {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		done := make(chan error, 1)
		go func() { _, err := ReadFile(p, 1<<40); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) {
				t.Errorf("%s: %v", p, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: still blocked after 30 s", p)
		}
	}
}
