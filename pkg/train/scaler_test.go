package train

import (
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/tensor"
)

// gradsAt returns the fp32 parameter gradients of one batch under policy p
// with the given loss scale, divided back by the scale.
func gradsAt(t *testing.T, cfg gpt.Config, p amp.Policy, scale float32, in, tg []int32, B, T int) []float32 {
	m, err := gpt.New(cpu.New(device.Options{Fused: true}), cfg, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Init(7); err != nil {
		t.Fatal(err)
	}
	m.ZeroGrad()
	if _, err := m.Gradients(in, tg, B, T, scale); err != nil {
		t.Fatal(err)
	}
	g, err := m.GradValues()
	if err != nil {
		t.Fatal(err)
	}
	for i := range g {
		g[i] /= scale
	}
	return g
}

// underflowCfg has GPT-2's vocabulary on a very small body. At B·T = 1024
// tokens the gradient of a non-target logit, p/(B·T) ~ 1/(50304·1024) ~
// 2e-8, is below half of fp16's smallest subnormal (6e-8), as it is in a
// real GPT-2 step: without loss scaling it flushes to zero.
var underflowCfg = gpt.Config{Vocab: 50304, MaxSeq: 64, Layers: 1, Heads: 2, Channels: 16}

// TestFP16NeedsScaler shows what the GradScaler is for: with fp16 activation
// gradients and no loss scaling, the small gradients underflow to zero (most
// of the embedding's gradient is lost), while at the default scale fp16's
// gradients match fp32's. Then it trains both ways: the scaled run learns
// faster, because it can push down the logits of the tokens that never occur.
func TestFP16NeedsScaler(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model with a 50304-token vocabulary (~20 s)") // skip: -short
	}
	const B, T = 16, 64
	trainT, _ := testTokens(t)
	in, tg := trainT[:B*T], trainT[1:B*T+1]
	ref := gradsAt(t, underflowCfg, amp.FP32, 1, in, tg, B, T)
	unscaled := gradsAt(t, underflowCfg, amp.FP16, 1, in, tg, B, T)
	scaled := gradsAt(t, underflowCfg, amp.FP16, 65536, in, tg, B, T)
	lost := func(g []float32) float64 {
		n, z := 0, 0
		for i := range g {
			if ref[i] != 0 {
				n++
				if g[i] == 0 {
					z++
				}
			}
		}
		return float64(z) / float64(n)
	}
	eu, es := tensor.RelErr(unscaled, ref), tensor.RelErr(scaled, ref)
	lu, ls := lost(unscaled), lost(scaled)
	t.Logf("fp16 without scaling: rel err %.3g, %.1f%% of gradients lost to underflow", eu, 100*lu)
	t.Logf("fp16 at scale 65536:  rel err %.3g, %.2f%% lost", es, 100*ls)
	if !(es < 0.01) || ls > 0.001 {
		t.Errorf("scaled fp16 gradients should match fp32: rel err %.3g, lost %.3g", es, ls)
	}
	if lu < 0.5 {
		t.Errorf("unscaled fp16 gradients should underflow: only %.3g lost", lu)
	}

	final := func(scaler bool) float32 {
		o := testOptions(10, amp.FP16)
		o.Config, o.Batch, o.Seq = underflowCfg, B, T
		o.Optim.LR = 1e-2
		tr := newTrainer(t, o)
		tr.Scaler.Enabled = scaler
		ls := runSteps(t, tr, 10)
		return ls[len(ls)-1]
	}
	withS, without := final(true), final(false)
	t.Logf("loss after 10 steps: fp16 with the scaler %.4f, without %.4f", withS, without)
	if !(without > withS+0.5) {
		t.Errorf("without the scaler fp16 should train visibly worse: %.4f vs %.4f", without, withS)
	}
}
