package gpt

import (
	"math"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
)

// flopCounter is a device that counts the FLOPs of the products a training
// step calls (each multiply-add 2 FLOPs), as the model calls them, and
// runs them on the device it wraps. Attention counts QKᵀ and PV over the
// full T×T (no causal discount: the PaLM convention, which the formula
// follows), its backward twice that. It hides GradStorer and Stepper, so
// the model calls the ops counted here.
type flopCounter struct {
	device.Device
	flops float64
}

func (f *flopCounter) Matmul(out, pre, inp, weight, bias *tensor.Tensor, N, C, OC int, act device.Activation) {
	f.flops += 2 * float64(N*C*OC)
	f.Device.Matmul(out, pre, inp, weight, bias, N, C, OC, act)
}

func (f *flopCounter) MatmulBackward(dinp, dweight, dbias, dout, inp, weight *tensor.Tensor, N, C, OC int) {
	if dinp != nil {
		f.flops += 2 * float64(N*C*OC)
	}
	f.flops += 2 * float64(N*C*OC) // dweight
	f.Device.MatmulBackward(dinp, dweight, dbias, dout, inp, weight, N, C, OC)
}

func (f *flopCounter) MatmulBackwardGELU(dpre, dpreBias, dweight, dbias, dout, inp, pre, weight *tensor.Tensor, N, C, OC int) {
	f.flops += 4 * float64(N*C*OC) // dinp (through GELU) and dweight
	f.Device.MatmulBackwardGELU(dpre, dpreBias, dweight, dbias, dout, inp, pre, weight, N, C, OC)
}

func (f *flopCounter) Attention(out, att, qkv *tensor.Tensor, B, T, C, NH int) {
	f.flops += 2 * 2 * float64(B*T*T*C) // QKᵀ and PV, every head: hs·NH = C
	f.Device.Attention(out, att, qkv, B, T, C, NH)
}

func (f *flopCounter) AttentionBackward(dqkv, dout, qkv, out, att *tensor.Tensor, B, T, C, NH int) {
	f.flops += 4 * 2 * float64(B*T*T*C) // dP and dV, dQ and dK
	f.Device.AttentionBackward(dqkv, dout, qkv, out, att, B, T, C, NH)
}

// TestFLOPsPerTokenCounted checks FLOPsPerToken against a count of the
// products one forward and backward runs (flopCounter). The formula's 6N
// counts every parameter as a weight of a product; the step multiplies by
// all but the position table, the biases and the layernorms' parameters
// (added or scaled, not multiplied through a product), so the count is
// the formula less 6 times those, exactly; they are under 1% of N at
// GPT-2's sizes, a few percent in the small configurations here.
func TestFLOPsPerTokenCounted(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		B, T int
	}{
		{Config{Vocab: 64, MaxSeq: 16, Layers: 2, Heads: 2, Channels: 32}, 2, 16},
		{Config{Vocab: 50, MaxSeq: 32, Layers: 3, Heads: 4, Channels: 48}, 3, 9},
	} {
		cfg, B, T := tc.cfg, tc.B, tc.T
		fc := &flopCounter{Device: cpu.New(device.Options{Fused: true, Threads: 2})}
		m, err := New(fc, cfg, amp.FP32)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Init(1); err != nil {
			t.Fatal(err)
		}
		in, tg := randomTokens(tensor.NewRNG(2), B*T, cfg.Vocab)
		fc.flops = 0
		if _, err := m.Gradients(in, tg, B, T, 1); err != nil {
			t.Fatal(err)
		}
		m.Close()
		counted := fc.flops / float64(B*T)
		// parameters outside the products: wpe; a layer's ln1, qkv bias,
		// attention projection bias, ln2, fc bias, fc projection bias; ln_f
		L, C := cfg.Layers, cfg.Channels
		outside := cfg.MaxSeq*C + L*(2*C+3*C+C+2*C+4*C+C) + 2*C
		want := cfg.FLOPsPerToken(T) - 6*float64(outside)
		if math.Abs(counted-want) > 1e-9*want {
			t.Errorf("%+v B=%d T=%d: counted %.0f FLOPs a token, FLOPsPerToken less the %d parameters outside the products gives %.0f (formula %.0f)",
				cfg, B, T, counted, outside, want, cfg.FLOPsPerToken(T))
		}
		if counted <= 0 || counted >= cfg.FLOPsPerToken(T) {
			t.Errorf("counted %.0f, formula %.0f: the count must be positive and below the formula", counted, cfg.FLOPsPerToken(T))
		}
	}
	// At GPT-2 124M's sizes the parameters outside the products are under
	// 1% of N: the formula's MFU overstates by that share at most.
	cfg, err := Preset("gpt2-124M")
	if err != nil {
		t.Fatal(err)
	}
	L, C := cfg.Layers, cfg.Channels
	outside := cfg.MaxSeq*C + L*(2*C+3*C+C+2*C+4*C+C) + 2*C
	if share := float64(outside) / float64(cfg.NumParams()); share > 0.01 || share <= 0 {
		t.Errorf("gpt2-124M: %d of %d parameters outside the products (%.2g)", outside, cfg.NumParams(), share)
	}
}
