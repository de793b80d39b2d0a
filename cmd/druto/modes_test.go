package main

import (
	"strings"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/train"
)

// TestParseModesFP8: fused+fp8 and fused+fp8+graph parse (the CLI checks
// the GPU before running them); decomposed+fp8 is refused with the
// reason, since FP8's casts live in the fused kernels.
func TestParseModesFP8(t *testing.T) {
	ms, err := parseModes("fused+fp8,fused+fp8+graph")
	if err != nil || len(ms) != 2 || ms[0].Policy != amp.FP8 || !ms[0].Fused || ms[1].Step != train.StepGraph {
		t.Fatalf("fused+fp8,fused+fp8+graph: %+v, %v", ms, err)
	}
	if _, err := parseModes("decomposed+fp8"); err == nil || !strings.Contains(err.Error(), "fused kernels only") {
		t.Errorf("decomposed+fp8: %v", err)
	}
}
