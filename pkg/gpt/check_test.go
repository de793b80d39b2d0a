package gpt

import (
	"strings"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
)

// TestCompareStepCPU: the fused and the decomposed CPU devices agree under
// every policy (they are both references, so far inside the limit).
func TestCompareStepCPU(t *testing.T) {
	c := CheckConfig
	for _, p := range []amp.Policy{amp.FP32, amp.BF16, amp.FP16} {
		d, err := CompareStep(cpu.New(device.Options{Fused: true, Threads: 2}), cpu.New(device.Options{Threads: 2}),
			c.Config, p, 2, 32, 7)
		if err != nil {
			t.Fatal(err)
		}
		t.Log(d)
		if !d.Pass() || d.Worst == "" || d.Loss == 0 || d.Limit != StepLimit(p) {
			t.Errorf("%s: %v", p, d)
		}
	}
}

// skewed is a CPU device whose GELU backward leaves the last sixteenth of
// its output zero: the kind of kernel bug (a tail block not written) the
// step check exists to catch. A single wrong element is diluted in a whole
// step's gradient (2% in one element moves it by 4e-5): catching those is
// the job of the op tests, which compare every element.
type skewed struct{ *cpu.Device }

func (s skewed) GELUBackward(dinp, inp, dout *tensor.Tensor, n int) {
	s.Device.GELUBackward(dinp, inp, dout, n)
	v := dinp.ToF32()
	clear(v[n-n/16 : n])
	_ = dinp.SetF32(v)
}

// MatmulBackwardGELU carries the same bug: the model's GELU backward runs
// folded into the MLP projection's backward.
func (s skewed) MatmulBackwardGELU(dpre, dpreBias, dweight, dbias, dout, inp, pre, weight *tensor.Tensor, N, C, OC int) {
	s.Device.MatmulBackwardGELU(dpre, dpreBias, dweight, dbias, dout, inp, pre, weight, N, C, OC)
	n := N * C
	v := dpre.ToF32()
	clear(v[n-n/16 : n])
	_ = dpre.SetF32(v)
}

// TestCompareStepCatchesABug: an op that leaves part of its output unwritten
// fails the check, and the worst tensor is one whose gradient flows through
// that op.
func TestCompareStepCatchesABug(t *testing.T) {
	c := CheckConfig
	for _, p := range []amp.Policy{amp.FP32, amp.BF16} {
		d, err := CompareStep(skewed{cpu.New(device.Options{Fused: true, Threads: 2})}, cpu.New(device.Options{Fused: true, Threads: 2}),
			c.Config, p, 2, 32, 7)
		if err != nil {
			t.Fatal(err)
		}
		t.Log(d)
		if d.Pass() || !strings.HasPrefix(d.Worst, "h.") {
			t.Errorf("%s: a GELU backward with an unwritten tail passed, or was not placed in a block: %v", p, d)
		}
		if d.Loss != d.RefLoss {
			t.Errorf("%s: the forward is unchanged, yet the losses differ: %v", p, d)
		}
	}
}

func TestCompareStepBadShape(t *testing.T) {
	dev := cpu.New(device.Options{Threads: 1})
	if _, err := CompareStep(dev, dev, CheckConfig.Config, amp.FP32, 1, 1000, 1); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Fatalf("T beyond MaxSeq: %v", err)
	}
}

// offAdam is a CPU device whose AdamW step moves the last sixteenth of the
// master weights 0.1% too far.
type offAdam struct{ *cpu.Device }

func (o offAdam) AdamWStep(master, work, grads, m, v *tensor.Tensor, l *tensor.Layout, hp device.AdamW) {
	o.Device.AdamWStep(master, work, grads, m, v, l, hp)
	p := master.F32()
	for i := len(p) - len(p)/16; i < len(p); i++ {
		p[i] *= 1.001
	}
}

// TestCompareStepCatchesAdamW: an optimizer step off by 0.1% on a part of
// the weights fails the check although the gradients agree.
func TestCompareStepCatchesAdamW(t *testing.T) {
	d, err := CompareStep(offAdam{cpu.New(device.Options{Fused: true, Threads: 2})}, cpu.New(device.Options{Fused: true, Threads: 2}),
		CheckConfig.Config, amp.BF16, 2, 32, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(d)
	// The gradients differ only by the chunked LM head's summation order.
	if d.Pass() || d.GradRelErr > 1e-6 || !(d.OptimRelErr > OptimLimit) {
		t.Errorf("a skewed AdamW step: %v", d)
	}
}
