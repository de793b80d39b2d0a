// Package testreq is the tests' one rule for something a test needs that a
// machine may lack (a library, a tool, test data, a CPU feature): skip with
// the reason or, when the reason's switch says require, fail, so that a
// skip cannot pass for a pass where the thing should be there. Every
// reason has a switch in Switches; CI (.ci/run) sets those it can install
// to require, and TestEverySkipHasASwitch fails on a skip in a test file
// that names no switch.
package testreq

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Switch is one reason a test may skip and the environment variable that
// turns the skip into a failure.
type Switch struct {
	Env     string // the variable
	Require string // its value that requires the thing ("require", or "1"/"2" for the GPU switches)
	What    string // what a test skips without
	// CI says CI can install it: .ci/run sets Env to Require. False for
	// hardware a CI machine does not have (GPUs, CPU features).
	CI bool
}

// Switches lists every reason for a skip that depends on the machine.
var Switches = []Switch{
	{"DRUTO_REQUIRE_GPU", "1", "an NVIDIA GPU with its driver and CUDA libraries (internal/gputest)", false},
	{"DRUTO_REQUIRE_GPUS", "2", "two NVIDIA GPUs (pkg/dist)", false},
	{"DRUTO_GPU_FEATURE_TESTS", "require", "a GPU feature: flash kernels (sm_75/sm_80), TMA and programmatic dependent launch (sm_90, NVRTC 12)", false},
	{"DRUTO_CPU_TESTS", "require", "a CPU feature (AVX2+FMA, AVX512_BF16) or a build without GOAMD64=v3", false},
	{"DRUTO_NVRTC_TESTS", "require", "the NVRTC library (Debian non-free: libnvrtc11.2, libnvrtc-builtins11.8)", true},
	{"DRUTO_BLAS_TESTS", "require", "OpenBLAS (libopenblas0-pthread)", true},
	{"DRUTO_TORCH_TESTS", "require", "PyTorch (python3-torch)", true},
	{"DRUTO_NOTEBOOK_TESTS", "require", "Jupyter and the GoNB kernel", true},
	{"DRUTO_BROWSER_TESTS", "require", "Chromium and the Jupyter Notebook server", true},
	{"DRUTO_CC_TESTS", "require", "a C compiler for cgo (gcc), and g++ for the kernel emulators", true},
	{"DRUTO_BINUTILS_TESTS", "require", "GNU as and objdump that know AVX512_BF16 (binutils)", true},
	{"DRUTO_TESTDATA_TESTS", "require", "test data committed to the repository", true},
	{"DRUTO_OS_TESTS", "require", "Linux's /proc, mmap and a POSIX sh", true},
}

// Lookup returns the switch of env, or nil.
func Lookup(env string) *Switch {
	for i := range Switches {
		if Switches[i].Env == env {
			return &Switches[i]
		}
	}
	return nil
}

// Required reports whether env's switch is set to require.
func Required(env string) bool {
	s := Lookup(env)
	return s != nil && os.Getenv(env) == s.Require
}

// Skip skips tb for the reason of switch env (what is missing, formatted)
// or, when the switch requires it, fails it. An env with no switch fails:
// a new reason needs its switch in Switches first.
func Skip(tb testing.TB, env, format string, args ...any) {
	tb.Helper()
	s := Lookup(env)
	if s == nil {
		tb.Fatalf("testreq: no switch %s (add it to testreq.Switches): "+format, append([]any{env}, args...)...)
		return
	}
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(env) == s.Require {
		tb.Fatalf("%s=%s but %s", env, s.Require, msg)
		return
	}
	tb.Skipf("%s (set %s=%s to make this a failure)", msg, env, s.Require)
}

// ModuleDeps returns the packages of this module (github.com/druto/druto
// and below) that the package pkg (a path or pattern go list takes,
// relative to the test's folder) depends on, pkg itself included, as `go
// list -deps` gives them. The test is skipped where Go is not installed: a
// test binary built elsewhere (scripts/gpu-build.sh) runs without it.
func ModuleDeps(t testing.TB, pkg string) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH: cannot list the imports") // skip: a test binary built elsewhere runs without Go; go test always has it
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	var deps []string
	for _, p := range strings.Fields(string(out)) {
		if p == "github.com/druto/druto" || strings.HasPrefix(p, "github.com/druto/druto/") {
			deps = append(deps, p)
		}
	}
	return deps
}
