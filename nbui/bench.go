package nbui

import (
	"fmt"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/bench"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/train"
)

// BenchTable lists a benchmark report's records: configuration, batch
// shape, mode, median step time with its range, throughput, MFU, speed-up
// over the configuration's baseline, memory and last loss. The caption
// names the device, the date and the revision.
func BenchTable(lang string, rep *bench.Report) *Table {
	t := NewTable(lang, "config", "B", "T", "mode", "step ms", "min–max ms", "tokens/s", "MFU", "speed-up", "memory", "loss").
		WithCaption("%s, %s (git %s)", rep.Device, rep.Date, short(rep.Git))
	for _, r := range rep.Records {
		up := "-"
		if b, ok := baseline(rep, r.Config); ok && r.Batch == b.Batch && r.Seq == b.Seq && r.StepMs > 0 {
			up = fmt.Sprintf("%.2f×", b.StepMs/r.StepMs)
		}
		mode := Word(lang, r.Mode)
		if r.Baseline {
			mode += " (" + Sprintf(lang, "baseline") + ")"
		}
		mfu := "-"
		if r.MFU > 0 {
			mfu = fmt.Sprintf("%.2f%%", 100*r.MFU)
		}
		mem := r.Memory.Params + r.Memory.Grads + r.Memory.Optimizer + r.Memory.Activations
		t.Add(r.Config, r.Batch, r.Seq, mode, fmt.Sprintf("%.2f", r.StepMs), fmt.Sprintf("%.2f–%.2f", r.StepMsMin, r.StepMsMax),
			fmt.Sprintf("%.0f", r.TokensPerS), mfu, up, mib(uint64(max(mem, 0))), fmt.Sprintf("%.3f", r.Loss))
	}
	return t
}

// baseline returns config's baseline record: a speed-up compares steps of
// the baseline's batch shape only.
func baseline(rep *bench.Report, config string) (bench.Record, bool) {
	for _, r := range rep.Records {
		if r.Config == config && r.Baseline {
			return r, true
		}
	}
	return bench.Record{}, false
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// PolicyTable lists what each op of the training step computes and stores
// in under policy p (amp.Policy.Ops, the one place that says so).
func PolicyTable(lang string, p amp.Policy) *Table {
	t := NewTable(lang, "op", "computes in", "stores in").WithCaption("AMP policy %s", p)
	for _, o := range p.Ops() {
		t.Add(Word(lang, o.Op), Word(lang, o.Compute), Word(lang, o.Store))
	}
	return t
}

// PolicyReason is why training picks its precision on a device
// (train.Choose), in lang.
func PolicyReason(lang string, c train.PolicyChoice) string {
	f, args := c.Format()
	return Sprintf(lang, f, args...)
}

// ShowPolicy shows the device, the precision training picks on it
// (train.AutoPolicy) and why, and what each op computes and stores in.
func ShowPolicy(lang string, dev device.Device) {
	c := train.Choose(dev)
	Note(lang, "Device: %s. Precision: %s.", dev.Name(), c.Policy)
	Note(lang, "%s", PolicyReason(lang, c))
	PolicyTable(lang, c.Policy).Show()
}
