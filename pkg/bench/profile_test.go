package bench

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/gpt"
)

// TestProfileStep profiles the tiny model's step on the CPU: every class of
// op appears, the GEMM shapes are named, the op times and the gaps add up
// to the step, the shares to one, the work counted is the model's (the
// forward+backward GEMM FLOPs are 6·N·params of the GEMMs, the fused
// epilogue products included), and rates are
// positive with percentages against the given ceilings.
func TestProfileStep(t *testing.T) {
	cfg, err := gpt.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	dev := cpu.New(device.Options{Fused: true, Threads: 2})
	c := Case{Name: "tiny", Config: cfg, Batch: 2, Seq: 32}
	ceil := Ceilings{PeakFLOPs: 50e9, CopyGBps: 20}
	p, err := ProfileStep(dev, c, Mode{Fused: true, Policy: amp.FP32}, Options{Warmup: 1, Steps: 2}, ceil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", p.Table())
	rows := map[string]ProfileRow{}
	var ms, share float64
	for _, r := range p.Rows {
		rows[r.Class] = r
		ms += r.Ms
		share += r.Share
		if r.Ms < 0 || math.IsNaN(r.Ms) {
			t.Errorf("%s: %v ms", r.Class, r.Ms)
		}
		if r.Unit != "" && (r.Rate <= 0 || r.Pct <= 0) {
			t.Errorf("%s: rate %v %s, %v%% of the ceiling", r.Class, r.Rate, r.Unit, r.Pct)
		}
	}
	C, N := cfg.Channels, float64(c.Batch*c.Seq)
	for _, want := range []string{"gemm qkv 384x128", "gemm attn proj 128x128", "gemm mlp fc 512x128", "gemm mlp proj 128x512",
		"gemm lm head 256x128", "attention", "layernorm", "classifier + loss", "optimizer", "encoder", "zero", "gaps between ops"} {
		if _, ok := rows[want]; !ok {
			t.Errorf("no %q row", want)
		}
	}
	if math.Abs(ms-p.StepMs) > 1e-6*p.StepMs+1e-9 || math.Abs(share-1) > 1e-6 {
		t.Errorf("rows add to %.4f ms (step %.4f), shares to %.6f", ms, p.StepMs, share)
	}
	// Forward 2·N·C·OC and backward 4·N·C·OC for every block's qkv product.
	if got, want := rows["gemm qkv 384x128"].FLOPs, 6*N*float64(C)*float64(3*C)*float64(cfg.Layers); got != want {
		t.Errorf("qkv FLOPs per step %g, want %g", got, want)
	}
	if got := rows["gemm qkv 384x128"].Calls; got != 2*cfg.Layers {
		t.Errorf("qkv calls per step %d, want %d (forward and backward per layer)", got, 2*cfg.Layers)
	}
	// The MLP projection's backward carries the GELU backward and the fc
	// bias gradient in its epilogues (MatmulBackwardGELU): its FLOPs are
	// still counted under its shape, and no separate GELU pass is left.
	if got, want := rows["gemm mlp proj 128x512"].FLOPs, 6*N*float64(C)*float64(4*C)*float64(cfg.Layers); got != want {
		t.Errorf("mlp proj FLOPs per step %g, want %g", got, want)
	}
	if got := rows["gemm mlp proj 128x512"].Calls; got != 2*cfg.Layers {
		t.Errorf("mlp proj calls per step %d, want %d", got, 2*cfg.Layers)
	}
	if r, ok := rows["gelu/bias"]; ok {
		t.Errorf("a separate GELU/bias pass in the fused step: %+v", r)
	}
	if r := rows["attention"]; r.FLOPs <= 0 || r.Unit != "TFLOP/s" {
		t.Errorf("attention row %+v", r)
	}
	if r := rows["layernorm"]; r.Bytes <= 0 || r.Unit != "GB/s" {
		t.Errorf("layernorm row %+v", r)
	}
	if !strings.Contains(p.Table(), "classifier + loss") {
		t.Errorf("table lacks the classifier row")
	}
	if bw, err := CopyBandwidth(dev); err != nil || bw <= 0 {
		t.Errorf("CPU copy bandwidth %v GB/s, %v", bw, err)
	}
	if _, err := ProfileStep(dev, c, Mode{Fused: false, Policy: amp.FP32}, Options{}, ceil); err == nil {
		t.Errorf("a decomposed mode on a fused device gave no error")
	}
}

// TestProfileFP8Ceiling: an FP8 product's row is taken against the FP8
// peak, the others against the bf16 peak, and without an FP8 peak the FP8
// rows have no percentage (not one against the bf16 peak, which FP8
// products pass) and the table says so.
func TestProfileFP8Ceiling(t *testing.T) {
	p := &profiler{acc: map[string]*ProfileRow{}}
	sec := time.Second / 1000 // 1 ms a row
	p.add("gemm qkv 384x128 fp8", 2, sec, 4e9, 0)
	p.add("gemm lm head 256x128", 1, sec, 1e9, 0)
	c := Case{Name: "tiny", Batch: 2, Seq: 32}
	rows := func(ceil Ceilings) (map[string]ProfileRow, string) {
		out := p.result(c, Mode{Fused: true, Policy: amp.FP8}, 1, 2*sec, ceil)
		m := map[string]ProfileRow{}
		for _, r := range out.Rows {
			m[r.Class] = r
		}
		return m, out.Table()
	}
	got, table := rows(Ceilings{PeakFLOPs: 2e12, PeakFP8FLOPs: 8e12})
	if f, b := got["gemm qkv 384x128 fp8"].Pct, got["gemm lm head 256x128"].Pct; math.Abs(f-50) > 1e-9 || math.Abs(b-50) > 1e-9 {
		t.Errorf("4 TFLOP/s of 8 FP8 and 1 of 2 bf16: %.2f%% and %.2f%%, want 50 and 50\n%s", f, b, table)
	}
	if !strings.Contains(table, "fp8 peak 8.0 TFLOP/s") {
		t.Errorf("the table does not give the FP8 peak:\n%s", table)
	}
	got, table = rows(Ceilings{PeakFLOPs: 2e12})
	if f := got["gemm qkv 384x128 fp8"].Pct; f != 0 {
		t.Errorf("no FP8 peak: the FP8 row at %.1f%% of a ceiling\n%s", f, table)
	}
	for _, l := range strings.Split(table, "\n") {
		if strings.Contains(l, "gemm qkv 384x128 fp8") && !strings.HasSuffix(strings.TrimSpace(l), "-") {
			t.Errorf("no FP8 peak: the FP8 row shows a percentage: %q", l)
		}
	}
}

// TestPeakFP8CPU: the FP8 ceiling is measured on the CPU reference (a
// small product), positive, and says what it measured.
func TestPeakFP8CPU(t *testing.T) {
	flops, note := PeakFP8(cpu.New(device.Options{Fused: true, Threads: 2}))
	if flops <= 0 || !strings.Contains(note, "e4m3 matmul 512^3") {
		t.Fatalf("PeakFP8 on the CPU: %g FLOP/s, %q", flops, note)
	}
}
