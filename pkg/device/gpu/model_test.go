package gpu

import (
	"fmt"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/gpt"
)

// TestGPUModel runs one training step's Gradients of the gpt model on the
// GPU and on the CPU from the same parameters and batch (gpt.CompareStep),
// for the tiny preset and a one-layer GPT-2-shaped model, every policy and
// form, and checks the loss and the gradients against gpt.StepLimit (all,
// and per tensor at 4× the limit).
func TestGPUModel(t *testing.T) {
	configs := []struct {
		name string
		cfg  gpt.Config
		B, T int
	}{
		{"tiny", gpt.CheckConfig.Config, gpt.CheckConfig.B, gpt.CheckConfig.T},
		{"gpt2-1layer", gpt.Config{Vocab: 50304, MaxSeq: 1024, Layers: 1, Heads: 12, Channels: 768}, 2, 128},
	}
	rng := testRNG(t)
	for _, c := range shortTo(configs, 1) {
		seed := rng.Uint64()
		for _, pol := range []amp.Policy{amp.FP32, amp.BF16, amp.FP16} {
			for _, fused := range forms {
				name := fmt.Sprintf("%s_%s_%s", c.name, pol, formName(fused))
				d, err := gpt.CompareStep(gpuDev(t, fused), cpuRef(fused), c.cfg, pol, c.B, c.T, seed)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				t.Logf("RESULT model %s %s %s B%d_T%d loss gpu %.6f cpu %.6f relerr %.3g grads relerr %.3g worst %s %.3g (limit %.3g)",
					c.name, pol, formName(fused), c.B, c.T, d.Loss, d.RefLoss, d.LossRelErr, d.GradRelErr, d.Worst, d.WorstErr, d.Limit)
				if !d.Pass() {
					t.Errorf("%s: %v", name, d)
				}
			}
		}
	}
}
