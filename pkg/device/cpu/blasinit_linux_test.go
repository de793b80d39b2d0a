package cpu

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/druto/druto/internal/testreq"
)

// TestBLASNotLoadedAtInit checks, in a fresh test process, that importing
// the package does not load the BLAS library: it must be loaded by New
// (loadBLAS), with OPENBLAS_NUM_THREADS=1, or OpenBLAS starts a thread pool
// that spins beside the step's goroutines. A package-level variable that
// asks pkg/blas about the library (as fusedBF16's policy does) would load
// it during package initialisation.
func TestBLASNotLoadedAtInit(t *testing.T) {
	if os.Getenv("DRUTO_TEST_BLAS_INIT_CHILD") == "1" {
		maps, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			testreq.Skip(t, "DRUTO_OS_TESTS", "no /proc/self/maps: %v", err)
		}
		if strings.Contains(string(maps), "blas") {
			t.Fatalf("a BLAS library is mapped before New was called:\n%s", grepLines(string(maps), "blas"))
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestBLASNotLoadedAtInit$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DRUTO_TEST_BLAS_INIT_CHILD=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child process: %v\n%s", err, out)
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}
