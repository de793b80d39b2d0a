package hostmem

import (
	"strings"
	"testing"

	"github.com/druto/druto/internal/testreq"
)

func TestAvailable(t *testing.T) {
	free, src, err := Available()
	if err != nil {
		testreq.Skip(t, "DRUTO_OS_TESTS", "no memory figure on this system: %v", err)
	}
	if free <= 0 || src == "" {
		t.Fatalf("free %d from %q", free, src)
	}
	if err := Check("a byte", 1); err != nil {
		t.Errorf("one byte does not fit: %v", err)
	}
	err = Check("the test", 1<<62)
	if err == nil || !strings.Contains(err.Error(), "needs") || !strings.Contains(err.Error(), "free") {
		t.Errorf("4 EiB fit: %v", err)
	}
}

// TestEnv: DRUTO_HOST_MEMORY stands for the free memory (a faked small
// host), and one that is not a size is an error, not ignored.
func TestEnv(t *testing.T) {
	t.Setenv(Env, "1GiB")
	if free, src, err := Available(); err != nil || free != 1<<30 || src != Env {
		t.Fatalf("Available() = %d, %q, %v; want 1 GiB from %s", free, src, err, Env)
	}
	if err := Check("a step", 1<<30); err != nil {
		t.Errorf("1 GiB in 1 GiB: %v", err)
	}
	if err := Check("a step", 1<<30+1); err == nil || !strings.Contains(err.Error(), "a step needs 1024.0 MiB but this machine has 1024.0 MiB free (DRUTO_HOST_MEMORY)") {
		t.Errorf("1 GiB + 1 byte in 1 GiB: %v", err)
	}
	t.Setenv(Env, "lots")
	if err := Check("a step", 1); err == nil || !strings.Contains(err.Error(), "16GiB") {
		t.Errorf("%s=lots: %v, want an error saying how to write a size", Env, err)
	}
}
