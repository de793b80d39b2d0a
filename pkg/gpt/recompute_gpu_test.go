package gpt

import (
	"fmt"
	"testing"

	"github.com/druto/druto/internal/gputest/gpudev"
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/tensor"
)

// TestGPURecomputeMatchesNone: on the GPU, gelu and layer recomputation
// give the gradients of no recomputation within the policy's tolerance for
// sums (the same ops run again; flash attention and cuBLASLt are
// deterministic for a fixed shape, so most come out equal). It skips
// where no GPU is usable (saying why).
func TestGPURecomputeMatchesNone(t *testing.T) {
	dev := gpudev.Fused(t)
	cfg := Config{Vocab: 256, MaxSeq: 64, Layers: 3, Heads: 4, Channels: 128}
	const B, T = 4, 64
	for _, p := range []amp.Policy{amp.FP32, amp.BF16} {
		_, want := gradsAt(t, dev, cfg, p, RecomputeNone, B, T)
		for _, r := range []Recompute{RecomputeGELU, RecomputeLayer} {
			t.Run(fmt.Sprintf("%s/%s", p, r), func(t *testing.T) {
				_, got := gradsAt(t, dev, cfg, p, r, B, T)
				for s := range 2 {
					if err := tensor.CloseSumF32(got[s], want[s], p.DType(amp.Activation), 2, 1); err != nil {
						t.Fatalf("step %d: gradients against no recomputation: %v", s, err)
					}
				}
			})
		}
	}
}
