// Package gputest is the GPU tests' one rule for a missing GPU or library:
// skip with the reason or, with DRUTO_REQUIRE_GPU=1 (set it on the GPU
// machine), fail, so that a skip cannot pass for a pass. Package gpudev
// opens the GPU device that the tests above pkg/device/gpu share.
package gputest

import (
	"os"
	"testing"
)

// Required says DRUTO_REQUIRE_GPU=1: a missing GPU is a failure.
func Required() bool { return os.Getenv("DRUTO_REQUIRE_GPU") == "1" }

// Skip skips tb for err (what is missing) or, when Required, fails it.
func Skip(tb testing.TB, err error) {
	tb.Helper()
	if Required() {
		tb.Fatalf("DRUTO_REQUIRE_GPU=1 but no usable GPU: %v", err)
	}
	tb.Skipf("no usable GPU, GPU test skipped: %v", err)
}
