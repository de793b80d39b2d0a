package nbui

import (
	"strings"
	"testing"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
)

// TestPlanTable: on the CPU without DRUTO_GPU_MEMORY, PlanOn plans
// gpt2-124M's GPT-2 batch for a T4's 16 GiB (by FLOPs, no probe); the
// table has a row per level, one chosen, and its caption and words in
// English and Bangla.
func TestPlanTable(t *testing.T) {
	t.Setenv(device.MemoryCapEnv, "")
	p, err := PlanOn(cpu.New(device.Options{Fused: true}), "gpt2-124M", 524288)
	if err != nil {
		t.Fatal(err)
	}
	if p.Req.Budget != t4Budget || p.Probed || p.Chosen().Accum < 2 {
		t.Fatalf("plan %+v: budget %d, probed %v", p.Chosen(), p.Req.Budget, p.Probed)
	}
	for lang, want := range map[string][]string{
		"en": {"Plan for V50304", "a T4's 16 GiB", "Why: recompute", "<- chosen"},
		"bn": {"পরিকল্পনা", "T4-এর ১৬ GiB", "কারণ: ", "<- বাছাই করা", "আবার হিসাব"},
	} {
		tb := PlanTable(lang, p)
		text := tb.Text()
		if len(tb.Rows) != 3 {
			t.Errorf("%s: %d rows, want 3", lang, len(tb.Rows))
		}
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: table lacks %q:\n%s", lang, w, text)
			}
		}
	}
}
