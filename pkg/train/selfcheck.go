package train

import (
	"context"
	"fmt"
	"strings"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/optim"
)

// The training part of detect's self-test (druto.Detect): one step of a
// small model per precision policy against the CPU reference (StepChecks),
// and the step as a CUDA graph (GraphCheck). They live here, beside the
// step they check; package druto runs them and reports the verdicts.

// StepCheck is gpt.CompareStep's verdict on one policy. Error is set when
// the step could not run at all under the policy (e.g. no bf16 GEMM on an
// sm_75 GPU): the policy is unavailable on this GPU, which is reported but,
// except for fp32, does not make the GPU unusable for the other policies.
type StepCheck struct {
	gpt.StepDiff
	Pass  bool   `json:"pass"`
	Error string `json:"error,omitempty"`
}

// StepChecks runs gpt.CompareStep of dev against ref on gpt.CheckConfig
// under FP32, BF16 and FP16. dev is usable when every step that ran agrees
// with ref and the fp32 step ran; a 16-bit policy whose step cannot run on
// dev (an error, not a disagreement) is reported as unavailable in the
// check and in notes, and leaves dev usable for the others.
func StepChecks(dev, ref device.Device, seed uint64) (checks []StepCheck, usable bool, notes []string) {
	c := gpt.CheckConfig
	usable = true
	for _, p := range []amp.Policy{amp.FP32, amp.BF16, amp.FP16} {
		d, err := gpt.CompareStep(dev, ref, c.Config, p, c.B, c.T, seed)
		if err != nil {
			_ = dev.Sync() // clear what the failed step recorded; the error is err
			_ = ref.Sync()
			checks = append(checks, StepCheck{StepDiff: gpt.StepDiff{Policy: p.String(), Limit: gpt.StepLimit(p)}, Error: err.Error()})
			if p == amp.FP32 {
				return checks, false, nil // no policy works without the fp32 path
			}
			notes = append(notes, fmt.Sprintf("--amp %s is unavailable on this GPU: a training step under it failed: %v", p, err))
			continue
		}
		checks = append(checks, StepCheck{StepDiff: d, Pass: d.Pass()})
		usable = usable && d.Pass()
	}
	return checks, usable, notes
}

// GraphCheck trains the check model (gpt.CheckConfig) for three steps as a
// CUDA graph (a plain warm-up, the capture, a replay) and says whether the
// graph ran: "available", or "unavailable: why".
func GraphCheck(dev device.Device) string {
	if !dev.Fused() {
		return "unavailable: the decomposed form keeps the host-driven step"
	}
	c := gpt.CheckConfig
	toks := make([]int32, 4*c.B*c.T)
	for i := range toks {
		toks[i] = int32(i * 7 % c.Config.Vocab)
	}
	var why string
	o := Options{Config: c.Config, Policy: amp.FP32, Batch: c.B, Seq: c.T, Optim: optim.Defaults(3), Seed: 1,
		Step: StepGraph, LogEvery: 3, Notice: func(s string) { why = s }}
	tr, err := New(dev, o, toks, nil)
	if err != nil {
		return "unavailable: " + firstLine(err.Error())
	}
	defer tr.Close()
	if err := tr.Run(context.Background(), 3, nil); err != nil {
		_ = dev.Sync()
		return "unavailable: " + firstLine(err.Error())
	}
	if tr.GraphStatus() == "graph" && tr.GraphBuilds() == 1 {
		return "available"
	}
	if why == "" {
		why = tr.GraphStatus()
	}
	return "unavailable: " + firstLine(why)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
