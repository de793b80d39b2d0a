package gpt

import (
	"math"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
)

// noStore hides the CPU device's device.GradStorer: the model then zeroes
// the input gradients and accumulates into them, as it does on a device
// without the store forms.
type noStore struct{ device.Device }

var _ device.GradStorer = (*cpu.Device)(nil)

// TestBackwardStoreForms: a step on a device with the store forms
// (device.GradStorer: MatmulBackwardStore for the LM head's dln and the
// blocks' input gradients, AttentionBackwardStore for dqkv) gives the loss
// and every gradient of the step on the same device with them hidden
// (Zero + accumulate), value for value, on the fused and the decomposed CPU
// device under every policy, from NaN-poisoned work and dln buffers (the
// store forms must write every element they leave behind).
func TestBackwardStoreForms(t *testing.T) {
	cfg := CheckConfig.Config
	const B, T = 2, 20
	inputs, targets := randomTokens(tensor.NewRNG(5), B*T, cfg.Vocab)
	eachForm(func(fused bool, p amp.Policy, name string) {
		base := cpu.New(device.Options{Fused: fused, Threads: 2})
		scale := checkScale(p)
		var loss [2]float32
		var grads [2][]float32
		for k, dev := range []device.Device{base, noStore{base}} {
			m, err := New(dev, cfg, p)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if err := m.Init(9); err != nil {
				t.Fatal(err)
			}
			poisonWork(t, m, B, T)
			poison(m, m.acts.dln)
			m.ZeroGrad()
			if loss[k], err = m.Gradients(inputs, targets, B, T, scale); err != nil {
				t.Fatal(err)
			}
			if grads[k], err = m.GradValues(); err != nil {
				t.Fatal(err)
			}
		}
		if loss[0] != loss[1] {
			t.Errorf("%s: loss with the store forms %v, without %v", name, loss[0], loss[1])
		}
		if len(grads[0]) != len(grads[1]) || len(grads[0]) == 0 {
			t.Fatalf("%s: %d and %d gradients", name, len(grads[0]), len(grads[1]))
		}
		bad := 0
		for i, g := range grads[0] {
			if math.IsNaN(float64(g)) || math.IsInf(float64(g), 0) {
				t.Fatalf("%s: gradient %d is %v with the store forms: a poisoned buffer was read", name, i, g)
			}
			if g != grads[1][i] { // == : a -0 stored is a +0 accumulated
				if bad == 0 {
					t.Errorf("%s: gradient %d = %v with the store forms, %v without", name, i, g, grads[1][i])
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d gradients differ", name, bad, len(grads[0]))
		}
	})
}
