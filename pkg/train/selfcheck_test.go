package train

import (
	"strings"
	"testing"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
)

// noBF16 is a CPU device whose bf16 matmuls fail, as they may on an sm_75
// GPU without bf16 GEMMs: after the op it records an error on the device (a
// size-mismatched Cast, standing in for cuBLAS's NOT_SUPPORTED), which the
// step's Sync returns.
type noBF16 struct{ *cpu.Device }

func (n noBF16) Matmul(out, pre, inp, weight, bias *tensor.Tensor, N, C, OC int, act device.Activation) {
	if weight.DType == tensor.BF16 {
		n.Device.Matmul(out, pre, inp, weight, bias, N, C, OC, act)
		n.Device.Cast(weight, tensor.New(tensor.F32, 1))
		return
	}
	n.Device.Matmul(out, pre, inp, weight, bias, N, C, OC, act)
}

// zeroGELU is a CPU device whose GELU backward writes zeros: a wrong kernel.
type zeroGELU struct{ *cpu.Device }

func (z zeroGELU) GELUBackward(dinp, inp, dout *tensor.Tensor, n int) {
	z.Device.Zero(dinp)
}

// MatmulBackwardGELU carries the GELU backward in the model's step: the
// same bug there.
func (z zeroGELU) MatmulBackwardGELU(dpre, dpreBias, dweight, dbias, dout, inp, pre, weight *tensor.Tensor, N, C, OC int) {
	z.Device.MatmulBackwardGELU(dpre, dpreBias, dweight, dbias, dout, inp, pre, weight, N, C, OC)
	z.Device.Zero(dpre)
}

// TestStepChecks: detect's gate over the step checks — every policy
// agreeing makes the device usable; a 16-bit policy that cannot run is
// reported unavailable without rejecting the device; a disagreement rejects
// it (package druto's TestReportStepChecks: how the report names it).
func TestStepChecks(t *testing.T) {
	dev := func() *cpu.Device { return cpu.New(device.Options{Fused: true, Threads: 2}) }

	checks, usable, notes := StepChecks(dev(), dev(), 1)
	if !usable || len(checks) != 3 || len(notes) != 0 {
		t.Fatalf("reference vs itself: usable %v, %d checks, notes %q", usable, len(checks), notes)
	}
	// The device under test runs its LM head in chunks (gpt.CompareStep):
	// wte's gradient sums its rows in another order, and a native BLAS may
	// compute a row of a chunk's product with another micro-kernel than the
	// same row of the whole (OpenBLAS 0.3.21 on an AMD EPYC: its edge
	// kernels add k in another order), an ulp of fp32 in dx. Under fp32
	// that stays below 1e-6; under a 16-bit policy it can flip the rounding
	// of the 16-bit activation gradients, one ulp of the working type
	// (fp16 gave 1.2e-4 here, 4.9e-4 the worst tensor). A bug in the chunks
	// is far larger: each policy gets one ulp of its working type.
	ulp := map[string]float64{"fp32": 1e-6, "bf16": 0x1p-7, "fp16": 0x1p-10}
	for _, c := range checks {
		lim, ok := ulp[c.Policy]
		if !ok || !c.Pass || c.Error != "" || c.GradRelErr > lim {
			t.Errorf("%+v (limit %g)", c, lim)
		}
	}

	checks, usable, notes = StepChecks(noBF16{dev()}, dev(), 1)
	if !usable || len(checks) != 3 || checks[1].Error == "" || checks[1].Pass || !checks[2].Pass ||
		len(notes) != 1 || !strings.Contains(notes[0], "--amp bf16 is unavailable") {
		t.Fatalf("no bf16 matmul: usable %v, checks %+v, notes %q", usable, checks, notes)
	}

	checks, usable, _ = StepChecks(zeroGELU{dev()}, dev(), 1)
	if usable || len(checks) != 3 || checks[0].Pass || checks[0].Error != "" {
		t.Fatalf("zero GELU backward: usable %v, checks %+v", usable, checks)
	}
}
