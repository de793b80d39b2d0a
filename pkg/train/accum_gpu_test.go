package train

import (
	"math"
	"testing"

	"github.com/druto/druto/internal/gputest/gpudev"
	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/gpt"
	"github.com/druto/druto/pkg/tensor"
)

// TestGPUAccumMatchesOneBatch is TestAccumMatchesOneBatch on the GPU, in
// the graph step (a micro graph replayed 4 times a step, then the update
// graph) with layer recomputation: 4 micro-batches of 2 sequences against
// one batch of 8, the losses and gradient norms within the policy's
// tolerance, the parameters in relative norm.
func TestGPUAccumMatchesOneBatch(t *testing.T) {
	dev := gpudev.Fused(t)
	const steps, B, n = 6, 2, 4
	for _, p := range []amp.Policy{amp.FP32, amp.BF16} {
		t.Run(p.String(), func(t *testing.T) {
			trT, vaT := testTokens(t)
			o := testOptions(steps, p)
			o.Step, o.Recompute = StepGraph, gpt.RecomputeLayer
			o.Batch, o.Accum = B, n
			acc, err := New(dev, o, trT, vaT)
			if err != nil {
				t.Fatal(err)
			}
			defer acc.Close()
			o.Batch, o.Accum, o.Recompute = n*B, 0, gpt.RecomputeNone
			one, err := New(dev, o, trT, vaT)
			if err != nil {
				t.Fatal(err)
			}
			defer one.Close()
			am, om := runMetrics(t, acc, steps), runMetrics(t, one, steps)
			if acc.GraphStatus() != "graph" || acc.GraphBuilds() != 2 {
				t.Errorf("accumulated step: %q, %d graphs; want graph, 2 (micro and update)", acc.GraphStatus(), acc.GraphBuilds())
			}
			dt := p.DType(amp.Activation)
			for i := range am {
				if err := closeRel(am[i].Loss, om[i].Loss, dt); err != nil {
					t.Errorf("step %d loss: %v", i+1, err)
				}
				if err := closeRel(am[i].GradNorm, om[i].GradNorm, dt); err != nil {
					t.Errorf("step %d gradient norm: %v", i+1, err)
				}
			}
			as, os := snapshot(t, acc), snapshot(t, one)
			var d2, w2 float64
			for i := range as[0] {
				d := float64(as[0][i] - os[0][i])
				d2, w2 = d2+d*d, w2+float64(os[0][i])*float64(os[0][i])
			}
			if _, rtol := tensor.Tolerance(dt); math.Sqrt(d2) > rtol*math.Sqrt(w2) {
				t.Errorf("parameters after %d steps: relative difference %.3g, more than %.3g", steps, math.Sqrt(d2/w2), rtol)
			}
		})
	}
}
