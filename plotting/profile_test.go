package plotting

import (
	"bytes"
	"image/png"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/record"
)

func sampleProfile() *record.Profile {
	return &record.Profile{Config: "gpt2-124M", Mode: "fused+bf16", Batch: 16, Seq: 1024, Steps: 3, StepMs: 10,
		Rows: []record.ProfileRow{
			{Class: "gemm lm head 50304x768", Calls: 2, Ms: 4, Share: 0.4, Rate: 600, Unit: "TFLOP/s", Pct: 76},
			{Class: "attention", Calls: 24, Ms: 3, Share: 0.3, Rate: 150, Unit: "TFLOP/s", Pct: 19},
			{Class: "layernorm", Calls: 50, Ms: 2, Share: 0.2, Rate: 3000, Unit: "GB/s", Pct: 70},
			{Class: "gaps between ops", Ms: 1, Share: 0.1},
		}}
}

// TestStepProfile renders the profile in English and Bangla to PNG and
// checks the title names the run, every class is a tick, and empty or
// non-finite profiles are errors.
func TestStepProfile(t *testing.T) {
	for _, lang := range []string{"en", "bn"} {
		p, err := StepProfile(sampleProfile(), Lang(lang))
		if err != nil {
			t.Fatalf("%s: %v", lang, err)
		}
		if !strings.Contains(p.Title.Text, "gpt2-124M") || !strings.Contains(p.Title.Text, "fused+bf16") {
			t.Errorf("%s: title %q", lang, p.Title.Text)
		}
		ticks := p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max)
		labels := map[string]bool{}
		for _, tk := range ticks {
			labels[tk.Label] = true
		}
		for _, r := range sampleProfile().Rows {
			if !labels[r.Class] {
				t.Errorf("%s: no tick for %q (ticks %v)", lang, r.Class, ticks)
			}
		}
		b, err := Render(p, "png", 6*72, 4*72)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := png.Decode(bytes.NewReader(b)); err != nil {
			t.Fatalf("%s: %v", lang, err)
		}
	}
	if _, err := StepProfile(&record.Profile{}); err == nil {
		t.Error("an empty profile plotted")
	}
	bad := sampleProfile()
	bad.Rows[1].Ms = -1
	if _, err := StepProfile(bad); err == nil || !strings.Contains(err.Error(), "attention") {
		t.Errorf("a negative time: %v", err)
	}
}
