package druto

import (
	"strings"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device/gpu"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/train"
)

// TestReportStepChecks: how the report reads the step checks
// (train.StepChecks, tested in package train) — a 16-bit policy that could
// not run is not a failed step, PolicyError names it and the GPU; a
// disagreement names its policy.
func TestReportStepChecks(t *testing.T) {
	check := func(p string, pass bool, err string) train.StepCheck {
		return train.StepCheck{StepDiff: gpt.StepDiff{Policy: p}, Pass: pass, Error: err}
	}
	checks := []train.StepCheck{check("fp32", true, ""), check("bf16", false, "cublasGemmEx: CUBLAS_STATUS_NOT_SUPPORTED"), check("fp16", true, "")}
	r := Report{Backend: BackendGPU, StepChecks: checks, Devices: []Device{{DeviceInfo: gpu.DeviceInfo{Name: "NVIDIA T4"}}}}
	if f := r.failedStep(); f != "" {
		t.Errorf("an unavailable bf16 counted as a failed step: %q", f)
	}
	if err := r.PolicyError(amp.BF16); err == nil || !strings.Contains(err.Error(), "--amp bf16 is unavailable on NVIDIA T4") {
		t.Errorf("PolicyError(bf16) = %v", err)
	}
	if err := r.PolicyError(amp.FP16); err != nil {
		t.Errorf("PolicyError(fp16) = %v", err)
	}

	r = Report{StepChecks: []train.StepCheck{check("fp32", false, ""), check("bf16", false, ""), check("fp16", false, "")}}
	if r.failedStep() != "fp32" {
		t.Fatalf("every step disagrees: failed %q, checks %+v", r.failedStep(), r.StepChecks)
	}
	r = Report{StepChecks: []train.StepCheck{check("fp32", false, "no fp32 GEMM")}}
	if r.failedStep() != "fp32" {
		t.Fatalf("fp32 step could not run: failed %q", r.failedStep())
	}
}
