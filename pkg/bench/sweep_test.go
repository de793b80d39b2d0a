package bench

import (
	"errors"
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
	if _, err := Sweep(open, cases, nil, Options{}); !errors.Is(err, ErrNoMode) {
		t.Fatalf("no modes: %v, want ErrNoMode", err)
	}
	// the hooks: the skipped mode's device is opened and times nothing,
	// Start sees the first timed device once, Each every record
	var starts, each int
	o := Options{Warmup: 1, Steps: 1,
		Skip:  func(m Mode) bool { return m == Baseline },
		Start: func(dev device.Device, rep *Report) error { starts++; return nil },
		Each: func(dev device.Device, c Case, m Mode, r *Record) error {
			each++
			if r.Mode != m.String() || r.Batch != c.Batch || !dev.Fused() {
				t.Errorf("Each: record %s B%d for mode %s B%d on fused=%v", r.Mode, r.Batch, m, c.Batch, dev.Fused())
			}
			return nil
		}}
	opened = 0
	if rep, err = Sweep(open, cases, modes, o); err != nil || opened != 2 || starts != 1 || each != 2 || len(rep.Records) != 2 {
		t.Fatalf("hooks: %v; opened %d, Start %d, Each %d", err, opened, starts, each)
	}
	if _, err := Sweep(open, cases, []Mode{Baseline}, o); !errors.Is(err, ErrNoMode) {
		t.Fatalf("every mode skipped: %v, want ErrNoMode", err)
	}
}
