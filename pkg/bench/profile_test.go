package bench

import (
	"math"
	"strings"
	"testing"

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
