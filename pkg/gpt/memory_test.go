package gpt

import (
	"strings"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
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
//     qkv 3C, atty C, ln2 C, fch 4C, fch_gelu 4C = 14C, and the attention
//     probabilities NH·T = 12·1024; then ln_f C and the backward scratch
//     dln C.
//   - fp32 always: residuals (residual2, residual3) 2C per layer, encoded C,
//     dresidual C; statistics 4 per layer (ln1, ln2 mean and rstd), ln_f's 2,
//     losses 1; token ids and targets 2 (int32).
//
// and one work buffer in the half type, the largest of the backward scratch
// datty C + dqkv 3C + dfch 4C = 8C per token (100,663,296 elements; also
// the attention and MLP projections' output, C per token, in forward) and
// the LM head's chunk of logits: 2048 rows × V = 103,022,592 elements under
// 16-bit (206 MB, within the 256 MiB budget), 1024 rows under fp32.
func TestMemoryGPT2(t *testing.T) {
	t.Setenv(HeadRowsEnv, "") // the rule, not an override
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
	half := int64(L*(14*C+NH*T) + C + C)         // elements per token in the half type
	full := int64(L*(2*C+4) + C + C + 2 + 1 + 2) // fp32/int32 elements per token
	for _, c := range []struct {
		p          amp.Policy
		halfBytes  int64
		paramBytes int64
		work       int64 // elements
	}{
		{amp.FP32, 4, 4 * n, 8 * tokens * C},
		{amp.BF16, 2, 6 * n, 2048 * V},
		{amp.FP16, 2, 6 * n, 2048 * V},
	} {
		got := MemoryFor(cfg, 16, 1024, c.p)
		want := Memory{
			Params:      c.paramBytes,
			Grads:       4 * n,
			Optimizer:   8 * n,
			Activations: tokens*(half*c.halfBytes+full*4) + c.work*c.halfBytes,
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
	t.Setenv(HeadRowsEnv, "") // the rule, not an override
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
	if got := MemoryOn(cpu.New(device.Options{Fused: true}), cfg, B, T, amp.BF16); got != prob {
		t.Fatalf("MemoryOn(fused cpu) = %+v, want MemoryFor's %+v", got, prob)
	}
	t.Logf("gpt2-124M B16 T1024 bf16 activations: %.2f GB with probabilities, %.2f GB with the log-sum-exp", float64(prob.Activations)/1e9, float64(lse.Activations)/1e9)
}

// TestMemoryHead: the fused step's LM head keeps one chunk of logits,
// shared with the backward scratch, where the decomposed baseline keeps
// all B·T rows (and its scratch beside them: the work buffer is the larger
// of the two); MemoryOn follows the device's kind; and HeadRows keeps the
// chunk within its budget with GEMMs of at least 64 rows.
func TestMemoryHead(t *testing.T) {
	t.Setenv(HeadRowsEnv, "") // the rule, not an override
	cfg, err := Preset("gpt2-124M")
	if err != nil {
		t.Fatal(err)
	}
	const B, T = 16, 1024
	N, V := int64(B*T), int64(cfg.Vocab)
	fused, dec := MemoryFor(cfg, B, T, amp.BF16), MemoryDecomposed(cfg, B, T, amp.BF16)
	if d, want := dec.Activations-fused.Activations, 2*(N*V-2048*V); d != want {
		t.Fatalf("decomposed %d - fused %d activations = %d, want %d (all logits rows less one 2048-row chunk)", dec.Activations, fused.Activations, d, want)
	}
	if got := MemoryOn(cpu.New(device.Options{}), cfg, B, T, amp.BF16); got != dec {
		t.Fatalf("MemoryOn(decomposed cpu) = %+v, want MemoryDecomposed's %+v", got, dec)
	}
	for _, c := range []struct {
		V, n  int
		dt    tensor.DType
		fused bool
		want  int
	}{
		{50304, 16384, tensor.BF16, true, 2048},
		{50304, 16384, tensor.F32, true, 1024},
		{50304, 16384, tensor.BF16, false, 16384},
		{50304, 1000, tensor.BF16, true, 1000}, // 1000 rows fit: one chunk
		{256, 16384, tensor.F32, true, 16384},
		{1 << 24, 4096, tensor.BF16, true, 64}, // a huge vocabulary: the floor
	} {
		got := HeadRows(c.V, c.n, c.dt, c.fused)
		if got != c.want {
			t.Errorf("HeadRows(V %d, n %d, %v, fused %v) = %d, want %d", c.V, c.n, c.dt, c.fused, got, c.want)
		}
		if got < c.n && got > 64 && int64(got)*int64(c.V)*int64(c.dt.Size()) > headBudget {
			t.Errorf("HeadRows(V %d, n %d, %v) = %d rows exceed the budget", c.V, c.n, c.dt, got)
		}
	}
	lse := MemoryWith(cfg, B, T, amp.BF16, device.LSEState(B, T, cfg.Heads))
	var sum int64
	for _, b := range ActivationBreakdown(cfg, B, T, amp.BF16, device.LSEState(B, T, cfg.Heads), true) {
		sum += b.Bytes
		if b.Name == "work" && b.Bytes != 2*2048*V {
			t.Errorf("work buffer %d bytes, want the 2048-row chunk's %d", b.Bytes, 2*2048*V)
		}
		if b.Name == "logits" {
			t.Errorf("the fused breakdown lists a logits buffer of %d bytes", b.Bytes)
		}
	}
	if sum != lse.Activations {
		t.Fatalf("breakdown sums to %d bytes, MemoryWith says %d", sum, lse.Activations)
	}
	t.Logf("gpt2-124M B16 T1024 bf16 with flash attention: activations %.3f GB, total %.3f GB (%.2f GiB); decomposed head %.3f GB more",
		float64(lse.Activations)/1e9, float64(lse.Total())/1e9, float64(lse.Total())/(1<<30), float64(dec.Activations-fused.Activations)/1e9)
}

// counting is a CPU device that counts the bytes of the tensors it
// allocates and frees, and their high-water mark.
type counting struct {
	*cpu.Device
	live       map[*tensor.Tensor]int64
	inUse, top int64
}

func newCounting(fused bool) *counting {
	return &counting{Device: cpu.New(device.Options{Fused: fused, Threads: 1}), live: map[*tensor.Tensor]int64{}}
}

func (c *counting) Alloc(dt tensor.DType, shape ...int) (*tensor.Tensor, error) {
	t, err := c.Device.Alloc(dt, shape...)
	if err == nil {
		n := int64(t.Numel()) * int64(dt.Size())
		c.live[t] = n
		c.inUse += n
		c.top = max(c.top, c.inUse)
	}
	return t, err
}

func (c *counting) Free(t *tensor.Tensor) {
	c.inUse -= c.live[t]
	delete(c.live, t)
	c.Device.Free(t)
}

// TestMemoryAllocated: the bytes the model really allocates, its
// parameters and gradients in New and its activations on the first
// SetBatch (under fp8 also its FP8 weights, scales and saved inputs), are
// those MemoryOn counts, on the fused device (the LM head in
// 1024-row chunks: GPT-2's vocabulary, 2048 rows under fp32) and on the
// decomposed one (all 2048 rows of logits), and Close frees them all.
// Nothing is computed, so the tensors' pages are never touched.
func TestMemoryAllocated(t *testing.T) {
	t.Setenv(HeadRowsEnv, "") // the rule, not an override
	cfg := Config{Vocab: 50304, MaxSeq: 1024, Layers: 2, Heads: 2, Channels: 32}
	const B, T = 2, 1024
	for _, fused := range []bool{true, false} {
		for _, pc := range []struct {
			p    amp.Policy
			head bool   // amp.FP8Recipe.Head
			dw   string // HeadDWEnv: unset the head's weight gradient in FP8 (its transposed e5m2 gradient, the default), "bf16" in bf16
		}{{amp.FP32, false, ""}, {amp.BF16, false, ""}, {amp.FP8, false, ""}, {amp.FP8, true, ""}, {amp.FP8, true, "bf16"}} {
			t.Setenv(HeadDWEnv, pc.dw)
			p := pc.p
			dev := newCounting(fused)
			m, err := New(dev, cfg, p)
			if err != nil {
				t.Fatal(err)
			}
			want := MemoryOn(dev, cfg, B, T, p)
			if pc.head {
				r := amp.DefaultFP8Recipe()
				r.Head = true
				if err := m.SetFP8Recipe(r); err != nil {
					t.Fatal(err)
				}
				want = want.WithFP8Head(cfg, B, T, HeadRows(cfg.Vocab, B*T, p.DType(amp.Activation), fused))
			}
			// Under fp8 the FP8 weights and scales come with the first
			// batch: New holds what bf16's does.
			newWant := want.Params + want.Grads
			if p == amp.FP8 {
				bf := MemoryOn(dev, cfg, B, T, amp.BF16)
				newWant = bf.Params + bf.Grads
			}
			if dev.inUse != newWant {
				t.Errorf("fused %v %s: New allocated %d bytes, MemoryOn counts %d for parameters and gradients", fused, p, dev.inUse, newWant)
			}
			before := dev.inUse
			if err := m.SetBatch(make([]int32, B*T), nil, B, T); err != nil {
				t.Fatal(err)
			}
			if got := dev.inUse - before; got != want.Activations+want.Params+want.Grads-newWant {
				t.Errorf("fused %v %s (head %v, dW %q): the activations (and fp8 state) take %d bytes, MemoryOn counts %d", fused, p, pc.head, pc.dw, got, want.Activations+want.Params+want.Grads-newWant)
			}
			rows := HeadRows(cfg.Vocab, B*T, p.Half(), fused)
			if wantRows := map[bool]int{true: 1024, false: B * T}[fused]; p == amp.FP32 && rows != wantRows {
				t.Errorf("fused %v: head rows %d, want %d", fused, rows, wantRows)
			}
			if m.acts.rows != rows || m.acts.logits.Shape[0] != rows {
				t.Errorf("fused %v %s: the model's chunk is %d rows (%v), HeadRows says %d", fused, p, m.acts.rows, m.acts.logits.Shape, rows)
			}
			m.Close()
			if dev.inUse != 0 {
				t.Errorf("fused %v %s: %d bytes still allocated after Close", fused, p, dev.inUse)
			}
		}
	}
}

// TestHeadRowsOverride: DRUTO_HEAD_ROWS replaces the rule in fused modes
// (clamped to the rows there are), never in the decomposed one, and a
// value that is not a positive multiple of 8 is an error naming the
// variable while HeadRows keeps its rule.
func TestHeadRowsOverride(t *testing.T) {
	t.Setenv(HeadRowsEnv, "4096")
	if r, err := HeadRowsOverride(); r != 4096 || err != nil {
		t.Fatalf("HeadRowsOverride = %d, %v", r, err)
	}
	if got := HeadRows(50304, 16384, tensor.BF16, true); got != 4096 {
		t.Errorf("HeadRows with the override = %d, want 4096", got)
	}
	if got := HeadRows(50304, 1000, tensor.BF16, true); got != 1000 {
		t.Errorf("HeadRows of 1000 rows with the override = %d, want 1000", got)
	}
	if got := HeadRows(50304, 16384, tensor.BF16, false); got != 16384 {
		t.Errorf("decomposed HeadRows with the override = %d, want all 16384", got)
	}
	for _, bad := range []string{"0", "-8", "100", "x"} {
		t.Setenv(HeadRowsEnv, bad)
		if _, err := HeadRowsOverride(); err == nil || !strings.Contains(err.Error(), HeadRowsEnv) {
			t.Errorf("%s=%q: %v", HeadRowsEnv, bad, err)
		}
		if got := HeadRows(50304, 16384, tensor.BF16, true); got != 2048 {
			t.Errorf("%s=%q: HeadRows = %d, want the rule's 2048", HeadRowsEnv, bad, got)
		}
	}
}
