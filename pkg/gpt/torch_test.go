package gpt

import (
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/optim"
	"github.com/druto/druto/pkg/tensor"
)

// TestTorchParity runs the model on the PyTorch reference state (see
// scripts/torch_reference.py) and compares logits, loss, every gradient and
// the parameters after one AdamW step, for the fused and the decomposed CPU
// device. Relative errors are Euclidean, ||got-want||/||want||, with the
// limits the issue sets: 1e-5 for logits and loss, 1e-4 for gradients and
// updated parameters.
func TestTorchParity(t *testing.T) {
	ref, err := readRefState(refStatePath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Vocab: ref.V, MaxSeq: ref.MaxT, Layers: ref.L, Heads: ref.NH, Channels: ref.C}
	for _, fused := range []bool{true, false} {
		dev := cpu.New(device.Options{Fused: fused})
		m, err := New(dev, cfg, amp.FP32)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.SetParams(ref.Params); err != nil {
			t.Fatal(err)
		}
		loss, err := m.Forward(ref.Tokens, ref.Targets, ref.B, ref.T)
		if err != nil {
			t.Fatal(err)
		}
		logits, err := m.Logits()
		if err != nil {
			t.Fatal(err)
		}
		check := func(what string, got, want []float32, limit float64) {
			t.Helper()
			if e := tensor.RelErr(got, want); e > limit || e != e {
				t.Errorf("fused=%v %s: relative error %.3g > %.0e", fused, what, e, limit)
			} else {
				t.Logf("fused=%v %s: relative error %.3g", fused, what, e)
			}
		}
		check("logits", logits, ref.Logits, 1e-5)
		check("loss", []float32{loss}, []float32{ref.Loss}, 1e-5)

		m.ZeroGrad()
		loss2, err := m.Gradients(ref.Tokens, ref.Targets, ref.B, ref.T, 1)
		if err != nil {
			t.Fatal(err)
		}
		if loss2 != loss {
			t.Errorf("Gradients loss %v != Forward loss %v", loss2, loss)
		}
		grads, err := m.GradValues()
		if err != nil {
			t.Fatal(err)
		}
		check("gradients (all)", grads, ref.Grads, 1e-4)
		for _, s := range m.Layout().Segments { // per tensor, so a failure names it
			lo, hi := s.Offset, s.Offset+s.Numel()
			if e := tensor.RelErr(grads[lo:hi], ref.Grads[lo:hi]); e > 1e-4 {
				t.Errorf("fused=%v gradient of %s: relative error %.3g", fused, s.Name, e)
			}
		}

		oc := optim.Config{LR: ref.LR, Beta1: ref.Beta1, Beta2: ref.Beta2, Eps: ref.Eps, WeightDecay: ref.WeightDecay, Steps: 1}
		opt, err := optim.NewAdamW(dev, m.Layout(), oc)
		if err != nil {
			t.Fatal(err)
		}
		// The step runs on torch's own gradients: some gradients are zero in
		// exact arithmetic (the key bias) and AdamW's g/(|g|+eps) would turn
		// their rounding noise into full-size updates.
		hg, _ := tensor.FromF32(ref.Grads, len(ref.Grads))
		dev.Upload(m.Grads(), hg)
		opt.Update(m.Master(), m.Work(), m.Grads(), ref.LR, 1)
		after, err := m.Params()
		if err != nil {
			t.Fatal(err)
		}
		check("parameters after AdamW", after, ref.ParamsAfter, 1e-4)
		// The update itself (after - before) must match too, not only the
		// parameters it is small against.
		du, dw := make([]float32, len(after)), make([]float32, len(after))
		for i := range after {
			du[i] = after[i] - ref.Params[i]
			dw[i] = ref.ParamsAfter[i] - ref.Params[i]
		}
		check("AdamW update", du, dw, 1e-4)
	}
}
