package main

import (
	"strings"
	"testing"

	"github.com/druto/druto/nbui"
	"github.com/druto/druto/pkg/train"
)

// TestFP8ProgressNotes: an evaluation line carries the FP8 overflows and
// underflows when the step logged any (the logits' gradient's apart), and
// a step whose underflow share (the rest's) passes fp8UnderflowWarn gets
// a warning with the remedy.
func TestFP8ProgressNotes(t *testing.T) {
	var m train.Metric
	m.Step, m.ValLoss = 100, 1.5
	if s := fp8Line(m); s != "" {
		t.Errorf("no fp8 counts: %q", s)
	}
	m.FP8Underflows, m.FP8UnderflowShare = 92454, 0.000036
	if s := fp8Line(m); s != " fp8 overflows 0 underflows 92454 (0.0036%)" {
		t.Errorf("fp8 line %q", s)
	}
	if w := fp8Warning(m); w != "" {
		t.Errorf("a share of 0.0036%% warned: %q", w)
	}
	// The logits' gradient (the head's dx in FP8) flushes most of its
	// values by design: shown apart, and no warning.
	m.FP8LogitGradUnderflows, m.FP8LogitGradUnderflowShare = 829204400, 0.246
	if s := fp8Line(m); s != " fp8 overflows 0 underflows 92454 (0.0036%), logits' gradient 829204400 (24.60%)" {
		t.Errorf("fp8 line with the logits' gradient %q", s)
	}
	if w := fp8Warning(m); w != "" {
		t.Errorf("the logits' gradient's share warned: %q", w)
	}
	m.FP8UnderflowShare = 0.023
	w := fp8Warning(m)
	if !strings.Contains(w, "step 100") || !strings.Contains(w, "2.30%") || !strings.Contains(w, "--fp8-margin") || !strings.Contains(w, "--amp bf16") {
		t.Errorf("warning %q", w)
	}
	if n := strings.Count(w, "\n"); n > 3 {
		t.Errorf("warning of %d lines", n+1)
	}
	// in Bangla under DRUTO_LANG=bn, from nbui's catalogue
	t.Setenv(nbui.LangEnv, "bn")
	w = fp8Warning(m)
	if !strings.Contains(w, "100 নম্বর ধাপে") || !strings.Contains(w, "2.30%") || !strings.Contains(w, "--fp8-margin") || !strings.Contains(w, "--amp bf16") || strings.Contains(w, "too small") {
		t.Errorf("Bangla warning %q", w)
	}
}
