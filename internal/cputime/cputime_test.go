package cputime

import (
	"runtime"
	"testing"
)

// TestNowAdvances: busy work adds CPU time on a system that reports it.
func TestNowAdvances(t *testing.T) {
	start := Now()
	x := 0.0
	for i := 0; i < 50_000_000; i++ {
		x += float64(i)
	}
	end := Now()
	if x == 0 {
		t.Fatal("no work done")
	}
	if runtime.GOOS == "linux" && end <= start {
		t.Errorf("CPU time did not advance: %v -> %v", start, end)
	}
}
