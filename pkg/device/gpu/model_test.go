package gpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/tensor"
)

// modelLimit is the largest relative error ||gpu-cpu||/||cpu|| allowed for
// the whole gradient and the loss of a training step under a policy. A step
// is some forty ops deep and every op rounds to the policy's type, with
// different (all correct) rounding points on the GPU (cuBLAS sum orders, a
// 16-bit copy of an fp32 dout, a 16-bit score gradient): 8 epsilons of the
// half type; for fp32, the 1e-4 the PyTorch parity test allows gradients.
func modelLimit(p amp.Policy) float64 {
	if p == amp.FP32 {
		return 1e-4
	}
	return 8 * p.Half().Eps()
}

// TestGPUModel runs one training step's Gradients of the gpt model on the
// GPU and on the CPU from the same parameters and batch, for the tiny
// preset and a one-layer GPT-2-shaped model, every policy and form, and
// compares the loss and the gradients (all, and per tensor at 4× the limit).
func TestGPUModel(t *testing.T) {
	configs := []struct {
		name string
		cfg  gpt.Config
		B, T int
	}{
		{"tiny", gpt.Config{Vocab: 256, MaxSeq: 128, Layers: 4, Heads: 4, Channels: 128}, 4, 64},
		{"gpt2-1layer", gpt.Config{Vocab: 50304, MaxSeq: 1024, Layers: 1, Heads: 12, Channels: 768}, 2, 128},
	}
	rng := testRNG(t)
	for _, c := range configs {
		N := c.B * c.T
		inputs, targets := make([]int32, N), make([]int32, N)
		for i := range inputs {
			inputs[i], targets[i] = int32(rng.Intn(c.cfg.Vocab)), int32(rng.Intn(c.cfg.Vocab))
		}
		seed := rng.Uint64()
		for _, pol := range []amp.Policy{amp.FP32, amp.BF16, amp.FP16} {
			scale := float32(1)
			if pol.NeedsScaler() {
				scale = 1024 // keeps fp16 gradients above the subnormals, as the GradScaler does
			}
			for _, fused := range forms {
				name := fmt.Sprintf("%s_%s_%s", c.name, pol, formName(fused))
				loss := map[bool]float32{}
				grads := map[bool][]float32{}
				var layout *tensor.Layout
				for _, onGPU := range []bool{false, true} {
					var m *gpt.Model
					var err error
					if onGPU {
						m, err = gpt.New(gpuDev(t, fused), c.cfg, pol)
					} else {
						m, err = gpt.New(cpuRef(fused), c.cfg, pol)
					}
					if err != nil {
						t.Fatal(err)
					}
					if err := m.Init(seed); err != nil {
						t.Fatalf("%s gpu=%v: %v", name, onGPU, err)
					}
					m.ZeroGrad()
					l, err := m.Gradients(inputs, targets, c.B, c.T, scale)
					if err != nil {
						t.Fatalf("%s gpu=%v: %v", name, onGPU, err)
					}
					gv, err := m.GradValues()
					if err != nil {
						t.Fatalf("%s gpu=%v: %v", name, onGPU, err)
					}
					loss[onGPU], grads[onGPU], layout = l, gv, m.Layout()
					m.Close()
				}
				limit := modelLimit(pol)
				le := math.Abs(float64(loss[true]-loss[false])) / math.Abs(float64(loss[false]))
				ge := relErr(grads[true], grads[false])
				t.Logf("RESULT model %s %s %s B%d_T%d loss gpu %.6f cpu %.6f relerr %.3g grads relerr %.3g (limit %.3g)",
					c.name, pol, formName(fused), c.B, c.T, loss[true], loss[false], le, ge, limit)
				if !(le <= limit) || !(ge <= limit) {
					t.Errorf("%s: loss relative error %.3g, gradient relative error %.3g, limit %.3g", name, le, ge, limit)
				}
				for _, s := range layout.Segments {
					lo, hi := s.Offset, s.Offset+s.Numel()
					if e := relErr(grads[true][lo:hi], grads[false][lo:hi]); !(e <= 4*limit) {
						t.Errorf("%s: gradient of %s: relative error %.3g > %.3g", name, s.Name, e, 4*limit)
					}
				}
			}
		}
	}
}
