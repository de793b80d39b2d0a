package gpt

import (
	"fmt"
	"math"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
)

var recomputeCfg = Config{Vocab: 61, MaxSeq: 16, Layers: 3, Heads: 2, Channels: 16}

// microTokens returns n token ids in [0, V) from seed.
func microTokens(n, V int, seed uint64) []int32 {
	rng := tensor.NewRNG(seed)
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(rng.Uint64() % uint64(V))
	}
	return out
}

// gradsAt returns the loss and the gradients of one Gradients call on a
// fresh model of cfg at recomputation level r (two steps: the second after
// the parameters changed, so that nothing of the first is reused).
func gradsAt(t *testing.T, dev device.Device, cfg Config, p amp.Policy, r Recompute, B, T int) ([2]float32, [2][]float32) {
	t.Helper()
	m, err := New(dev, cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.SetRecompute(r); err != nil {
		t.Fatal(err)
	}
	var losses [2]float32
	var grads [2][]float32
	for s := range 2 {
		if err := m.Init(uint64(11 + s)); err != nil {
			t.Fatal(err)
		}
		in, tg := microTokens(B*T, cfg.Vocab, uint64(3+s)), microTokens(B*T, cfg.Vocab, uint64(5+s))
		m.ZeroGrad()
		if losses[s], err = m.Gradients(in, tg, B, T, 1); err != nil {
			t.Fatal(err)
		}
		if grads[s], err = m.GradValues(); err != nil {
			t.Fatal(err)
		}
	}
	return losses, grads
}

// TestRecomputeBitIdentical: in fp32 on the CPU (fused and decomposed
// forms), gelu and layer recomputation give the losses and every gradient
// of no recomputation bit for bit, over two steps; layer recomputation
// does so in bf16 too (it runs the same ops again), gelu recomputation in
// bf16 within the dtype's tolerance (gelu reads the rounded
// pre-activation there).
func TestRecomputeBitIdentical(t *testing.T) {
	const B, T = 3, 16
	for _, fused := range []bool{true, false} {
		for _, p := range []amp.Policy{amp.FP32, amp.BF16} {
			dev := cpu.New(device.Options{Fused: fused})
			wl, wg := gradsAt(t, dev, recomputeCfg, p, RecomputeNone, B, T)
			for _, r := range []Recompute{RecomputeGELU, RecomputeLayer} {
				t.Run(fmt.Sprintf("fused=%v/%s/%s", fused, p, r), func(t *testing.T) {
					gl, gg := gradsAt(t, dev, recomputeCfg, p, r, B, T)
					exact := p == amp.FP32 || r == RecomputeLayer || !fused
					for s := range 2 {
						if exact {
							if math.Float32bits(gl[s]) != math.Float32bits(wl[s]) {
								t.Fatalf("step %d: loss %v, without recomputation %v", s, gl[s], wl[s])
							}
							for i := range wg[s] {
								if math.Float32bits(gg[s][i]) != math.Float32bits(wg[s][i]) {
									t.Fatalf("step %d: gradient %d is %v, without recomputation %v", s, i, gg[s][i], wg[s][i])
								}
							}
							continue
						}
						if err := tensor.CloseSumF32(gg[s], wg[s], tensor.BF16, 2, 1); err != nil {
							t.Fatalf("step %d: gradients: %v", s, err)
						}
					}
				})
			}
		}
	}
}

// TestRecomputeMemory: the activations a model allocates at each level are
// what MemoryOn counts, and the savings are the hand count: gelu keeps one
// layer of fch_gelu instead of L; layer keeps one layer of every per-layer
// buffer but residual3.
func TestRecomputeMemory(t *testing.T) {
	const B, T = 2, 16
	cfg, p := recomputeCfg, amp.FP32
	dev := cpu.New(device.Options{Fused: true})
	var got [3]int64
	for i, r := range RecomputeLevels {
		m, err := New(dev, cfg, p)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.SetRecompute(r); err != nil {
			t.Fatal(err)
		}
		if err := m.ensure(B, T); err != nil {
			t.Fatal(err)
		}
		var bytes int64
		for _, x := range m.acts.all {
			bytes += int64(x.Numel() * x.DType.Size())
		}
		m.Close()
		if want := MemoryOn(dev, cfg, B, T, p, r).Activations; bytes != want {
			t.Errorf("%s: the model allocates %d activation bytes, MemoryOn counts %d", r, bytes, want)
		}
		got[i] = MemoryFor(cfg, B, T, p, r).Activations
	}
	N, C, L, NH := int64(B*T), int64(cfg.Channels), int64(cfg.Layers), int64(cfg.Heads)
	// per layer and token: ln1 C, mean and rstd 2, qkv 3C, atty C, att NH·T,
	// residual2 C, ln2 C, mean and rstd 2, fch 4C, fch_gelu 4C (fp32: 4 bytes)
	perLayer := 4 * N * (15*C + 4 + NH*T)
	if d := got[0] - got[1]; d != (L-1)*4*N*4*C {
		t.Errorf("gelu saves %d bytes, want %d", d, (L-1)*4*N*4*C)
	}
	if d := got[0] - got[2]; d != (L-1)*perLayer {
		t.Errorf("layer saves %d bytes, want %d", d, (L-1)*perLayer)
	}
	if MemoryFor(cfg, B, T, p) != MemoryFor(cfg, B, T, p, RecomputeNone) {
		t.Error("MemoryFor without a level differs from RecomputeNone")
	}
}

// TestGradientsMicroMatchesOneBatch: four micro-batches of 2 sequences
// accumulated into one zeroed gradient buffer give the gradient of one
// batch of 8 (the same sequences in the same order) within fp32's
// tolerance for sums, and the mean of their losses is the batch's loss.
func TestGradientsMicroMatchesOneBatch(t *testing.T) {
	const B, T, n = 2, 16, 4
	cfg := recomputeCfg
	dev := cpu.New(device.Options{Fused: true})
	in, tg := microTokens(n*B*T, cfg.Vocab, 21), microTokens(n*B*T, cfg.Vocab, 22)
	mk := func() *Model {
		m, err := New(dev, cfg, amp.FP32)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Init(5); err != nil {
			t.Fatal(err)
		}
		m.ZeroGrad()
		return m
	}
	one, acc := mk(), mk()
	defer one.Close()
	defer acc.Close()
	want, err := one.Gradients(in, tg, n*B, T, 1024)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for i := range n {
		lo, hi := i*B*T, (i+1)*B*T
		l, err := acc.GradientsMicro(in[lo:hi], tg[lo:hi], B, T, 1024, n)
		if err != nil {
			t.Fatal(err)
		}
		sum += float64(l)
	}
	if got := float32(sum / n); math.Abs(float64(got-want)) > 1e-6*math.Abs(float64(want)) {
		t.Errorf("mean micro-batch loss %v, one batch %v", got, want)
	}
	wg, err := one.GradValues()
	if err != nil {
		t.Fatal(err)
	}
	gg, err := acc.GradValues()
	if err != nil {
		t.Fatal(err)
	}
	if err := tensor.CloseSumF32(gg, wg, tensor.F32, 4, 1); err != nil {
		t.Fatalf("accumulated gradients against one batch: %v", err)
	}
	if _, err := acc.GradientsMicro(in[:B*T], tg[:B*T], B, T, 1, 0); err == nil {
		t.Error("GradientsMicro with 0 micro-batches: no error")
	}
}

// TestParseRecompute: the three names round-trip; anything else is an
// error naming the choices.
func TestParseRecompute(t *testing.T) {
	for _, r := range RecomputeLevels {
		got, err := ParseRecompute(r.String())
		if err != nil || got != r {
			t.Errorf("ParseRecompute(%q) = %v, %v", r.String(), got, err)
		}
	}
	if _, err := ParseRecompute("full"); err == nil {
		t.Error("ParseRecompute(\"full\"): no error")
	}
}
