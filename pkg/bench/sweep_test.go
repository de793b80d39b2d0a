package bench

import (
	"fmt"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/gpt"
)

func TestSweep(t *testing.T) {
	cfg := gpt.Config{Vocab: 256, MaxSeq: 16, Layers: 1, Heads: 2, Channels: 16}
	opened := 0
	open := func(fused bool) (device.Device, error) {
		opened++
		return cpu.New(device.Options{Fused: fused}), nil
	}
	cases := []Case{{Name: "t", Config: cfg, Batch: 1, Seq: 16}, {Name: "t", Config: cfg, Batch: 2, Seq: 16}}
	modes := []Mode{Baseline, {Fused: true, Policy: amp.FP32}}
	rep, err := Sweep(open, cases, modes, Options{Warmup: 1, Steps: 2})
	if err != nil {
		t.Fatal(err)
	}
	if opened != 2 || len(rep.Records) != 4 || !(rep.PeakFLOPs > 0) {
		t.Fatalf("opened %d devices, %d records, peak %g", opened, len(rep.Records), rep.PeakFLOPs)
	}
	var baselines []int
	for _, r := range rep.Records {
		if !(r.StepMs > 0) {
			t.Errorf("%s B%d %s: step %g ms", r.Config, r.Batch, r.Mode, r.StepMs)
		}
		if r.Baseline {
			baselines = append(baselines, r.Batch)
		}
	}
	if fmt.Sprint(baselines) != "[2]" {
		t.Fatalf("baselines at batches %v, want the largest batch's only", baselines)
	}
	if _, err := Sweep(open, cases, nil, Options{}); err == nil {
		t.Fatal("no modes gave a report")
	}
}
