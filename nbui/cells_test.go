package nbui

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/druto/druto/internal/testreq"
	"github.com/druto/druto/pkg/cuda"
)

func TestCheck(t *testing.T) {
	if os.Getenv("NBUI_CHECK_EXIT") == "1" {
		Check(os.ErrNotExist)
		return
	}
	Check(nil) // returns
	cmd := exec.Command(os.Args[0], "-test.run=^TestCheck$")
	cmd.Env = append(os.Environ(), "NBUI_CHECK_EXIT=1")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "error: file does not exist") {
		t.Fatalf("Check(err): %v, output %q; want exit 1 and one error line", err, out)
	}
}

func TestFormsTable(t *testing.T) {
	tb, err := FormsTable("en", "tiny", 2, 16)
	if err != nil {
		t.Fatal(err)
	}
	if len(tb.Rows) != 2 || tb.Rows[0][0] != "fused" || tb.Rows[1][0] != "decomposed" ||
		!strings.Contains(tb.Rows[1][4], "within the fp32 tolerance") {
		t.Fatalf("rows %q", tb.Rows)
	}
	if _, err := FormsTable("en", "no-such-preset", 2, 16); err == nil {
		t.Fatal("an unknown preset gave a table")
	}
}

// TestCompileTable skips only where NVRTC does not load (a failure with
// DRUTO_NVRTC_TESTS=require, as in CI); any other error fails.
func TestCompileTable(t *testing.T) {
	if _, err := cuda.LoadNVRTC(cuda.LoadOptions{}); err != nil {
		testreq.Skip(t, "DRUTO_NVRTC_TESTS", "NVRTC does not load here: %v", err)
	}
	tb, err := CompileTable("en", "sm_80")
	if err != nil {
		t.Fatal(err)
	}
	if len(tb.Rows) == 0 {
		t.Fatal("no kernel source compiled")
	}
	for _, r := range tb.Rows {
		if r[3] == "-" {
			t.Errorf("%s for %s: %s", r[0], r[2], r[4])
		}
	}
}

func TestShowFiles(t *testing.T) {
	if err := ShowBenchFile("bn", "../bench/results/bench-tiny-small-h200.json"); err != nil {
		t.Fatal(err)
	}
	if err := ShowKernelsFile("en", "../bench/results/kernels-h200.json"); err != nil {
		t.Fatal(err)
	}
	if err := ShowBenchFile("en", "../bench/results/none.json"); err == nil {
		t.Fatal("a missing report showed")
	}
}
