package bench

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/druto/druto/internal/gputest"
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/cuda"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/gpu"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/train"
)

// gpuBenchDev opens a fused GPU device, or skips (fails with
// DRUTO_REQUIRE_GPU=1) without one.
func gpuBenchDev(t *testing.T) *gpu.Device {
	t.Helper()
	libs := cuda.Load(cuda.LoadOptions{})
	err := libs.Err
	var n int
	if err == nil {
		if n, err = libs.Driver.DeviceCount(); err == nil && n == 0 {
			err = cuda.ErrNoDevice
		}
	}
	var ctx *cuda.Context
	if err == nil {
		ctx, err = libs.Driver.NewContext(0)
	}
	if err != nil {
		gputest.Skip(t, err)
	}
	d, err := gpu.NewWith(ctx, gpu.Config{Options: device.Options{Fused: true}, Libs: libs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// TestGPUProfileGraph: the graph-aware profile of the small preset's graph
// step names every op class, times each op at no more than the graph step
// (an op alone, without launch overhead), reports the real graph step and
// the sum of the ops, and its rows (with the residual row) add up to the
// step; the NVML sample of StepTimes, where NVML is present, is a
// percentage.
func TestGPUProfileGraph(t *testing.T) {
	d := gpuBenchDev(t)
	cfg, err := gpt.Preset("small")
	if err != nil {
		t.Fatal(err)
	}
	c := Case{Name: "small", Config: cfg, Batch: 32, Seq: 256}
	m := Mode{Fused: true, Policy: amp.BF16, Step: train.StepGraph}
	p, err := ProfileStep(d, c, m, Options{Warmup: 2, Steps: 2}, Ceilings{PeakFLOPs: 790e12, CopyGBps: 4270})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", p.Table())
	if p.Method == "" || p.StepMs <= 0 || p.OpsMs <= 0 {
		t.Fatalf("method %q, step %.3f ms, ops %.3f ms", p.Method, p.StepMs, p.OpsMs)
	}
	var sum float64
	rows := map[string]bool{}
	for _, r := range p.Rows {
		sum += r.Ms
		rows[r.Class] = true
		if r.Class != residualClass && (r.Ms <= 0 || r.Ms > p.StepMs || math.IsNaN(r.Ms)) {
			t.Errorf("%s: %.4f ms in a step of %.3f ms", r.Class, r.Ms, p.StepMs)
		}
	}
	if math.Abs(sum-p.StepMs) > 1e-6*p.StepMs {
		t.Errorf("rows add to %.4f ms, step %.4f ms", sum, p.StepMs)
	}
	for _, want := range []string{"encoder", "zero", "layernorm", "attention", "optimizer", "classifier + loss", residualClass} {
		if !rows[want] {
			t.Errorf("no %q row", want)
		}
	}
	if !strings.Contains(p.Table(), "graph-aware") {
		t.Errorf("the table does not say how it was measured")
	}
	r, err := StepTimes(d, c, m, Options{Warmup: 3, Steps: 10}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Timing != TimingEvents || !(0 < r.StepMsMin && r.StepMsMin <= r.StepMs && r.StepMs <= r.StepMsMax) {
		t.Errorf("graph step timing %q: min %v, median %v, max %v; want %q, ordered", r.Timing, r.StepMsMin, r.StepMs, r.StepMsMax, TimingEvents)
	}
	t.Logf("graph step %.3f ms (min %.3f, max %.3f, %s), NVML GPU utilisation %.1f%% over %d samples (%s)", r.StepMs, r.StepMsMin, r.StepMsMax, r.Timing, r.GPUUtil, len(r.Util), r.UtilNote)
	if r.UtilNote == "" && (r.GPUUtil <= 0 || r.GPUUtil > 100 || len(r.Util) < int(UtilSeconds*float64(time.Second)/float64(UtilEvery))/2) {
		t.Errorf("utilisation %.1f%% from %d samples", r.GPUUtil, len(r.Util))
	}
}
