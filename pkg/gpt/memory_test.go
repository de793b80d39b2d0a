package gpt

import (
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
)

// TestMemoryGPT2 checks MemoryFor against a count made by hand for
// gpt2-124M at B 16, T 1024 under each policy.
//
// Parameters: wte 50304·768 = 38,633,472; wpe 1024·768 = 786,432; per layer
// 2·2·768 (norms) + 3·768·768 + 3·768 (qkv) + 768·768 + 768 (attn proj) +
// 4·768·768 + 4·768 (fc) + 4·768·768 + 768 (mlp proj) = 7,087,872, times 12
// = 85,054,464; ln_f 1,536: 124,475,904 in all.
//
// Activations, per token (B·T = 16,384 tokens), C = 768, V = 50304:
//   - 16-bit (the policy's half type; 4 bytes under fp32): per layer ln1 C,
//     qkv 3C, atty C, attproj C, ln2 C, fch 4C, fch_gelu 4C, fcproj C = 16C,
//     and the attention probabilities NH·T = 12·1024; then ln_f C, logits V,
//     and the backward scratch dln C, datty C, dqkv 3C, dfch 4C = 9C.
//   - fp32 always: residuals (residual2, residual3) 2C per layer, encoded C,
//     dresidual C; statistics 4 per layer (ln1, ln2 mean and rstd), ln_f's 2,
//     losses 1; token ids and targets 2 (int32).
func TestMemoryGPT2(t *testing.T) {
	cfg, err := Preset("gpt2-124M")
	if err != nil {
		t.Fatal(err)
	}
	const n = 124475904
	if cfg.NumParams() != n {
		t.Fatalf("gpt2-124M has %d parameters, the hand count says %d", cfg.NumParams(), n)
	}
	const (
		tokens = 16 * 1024
		C, V   = 768, 50304
		L, NH  = 12, 12
		T      = 1024
	)
	half := int64(L*(16*C+NH*T) + C + V + 9*C)   // elements per token in the half type
	full := int64(L*(2*C+4) + C + C + 2 + 1 + 2) // fp32/int32 elements per token
	for _, c := range []struct {
		p          amp.Policy
		halfBytes  int64
		paramBytes int64
	}{
		{amp.FP32, 4, 4 * n},
		{amp.BF16, 2, 6 * n},
		{amp.FP16, 2, 6 * n},
	} {
		got := MemoryFor(cfg, 16, 1024, c.p)
		want := Memory{
			Params:      c.paramBytes,
			Grads:       4 * n,
			Optimizer:   8 * n,
			Activations: tokens * (half*c.halfBytes + full*4),
		}
		if got != want {
			t.Errorf("%v: MemoryFor = %+v, hand count %+v", c.p, got, want)
		}
		t.Logf("%v: %v", c.p, got)
	}
}

// TestMemoryWithLSE: with the flash kernels' state (a (B,NH,T) F32
// log-sum-exp per layer instead of the (B,NH,T,T) 16-bit probabilities)
// the activations shrink by exactly the difference, and MemoryOn follows
// the device's AttentionState (the CPU saves the probabilities).
func TestMemoryWithLSE(t *testing.T) {
	cfg, err := Preset("gpt2-124M")
	if err != nil {
		t.Fatal(err)
	}
	const B, T = 16, 1024
	L, NH := int64(cfg.Layers), int64(cfg.Heads)
	prob := MemoryFor(cfg, B, T, amp.BF16)
	lse := MemoryWith(cfg, B, T, amp.BF16, device.LSEState(B, T, cfg.Heads))
	if d, want := prob.Activations-lse.Activations, L*B*NH*(T*T*2-T*4); d != want {
		t.Fatalf("activations %d (probabilities) - %d (lse) = %d, want %d", prob.Activations, lse.Activations, d, want)
	}
	if lse.Params != prob.Params || lse.Grads != prob.Grads || lse.Optimizer != prob.Optimizer {
		t.Fatalf("only the activations may change: %+v vs %+v", lse, prob)
	}
	if got := MemoryOn(cpu.New(device.Options{}), cfg, B, T, amp.BF16); got != prob {
		t.Fatalf("MemoryOn(cpu) = %+v, want MemoryFor's %+v", got, prob)
	}
	t.Logf("gpt2-124M B16 T1024 bf16 activations: %.2f GB with probabilities, %.2f GB with the log-sum-exp", float64(prob.Activations)/1e9, float64(lse.Activations)/1e9)
}
