package lab

import (
	"math"

	"github.com/druto/druto/pkg/amp"
)

// The solutions of labs 1-6, as the solution notebooks write them.

func solSoftmax(probs, logits []float32, N, V int) {
	for i := range N {
		row, out := logits[i*V:(i+1)*V], probs[i*V:(i+1)*V]
		mx := row[0]
		for _, x := range row {
			mx = max(mx, x)
		}
		var sum float32
		for j, x := range row {
			out[j] = float32(math.Exp(float64(x - mx)))
			sum += out[j]
		}
		for j := range out {
			out[j] /= sum
		}
	}
}

func solCrossEntropy(losses, dlogits, logits []float32, targets []int32, N, V int) {
	solSoftmax(dlogits, logits, N, V)
	for i, t := range targets {
		losses[i] = -float32(math.Log(float64(dlogits[i*V+int(t)])))
		dlogits[i*V+int(t)] -= 1
	}
}

// The layernorm, AdamW, attention, bias-GELU and BPE solutions are lab_test.go's
// builders of planted mistakes, with none planted.
var (
	solLayerNorm         = layerNormWith("")
	solLayerNormBackward = layerNormBackwardWith("")
	solAdamW             = adamWWith("")
	solAttention         = attentionWith("")
	solAttentionBackward = attentionBackwardWith("")
	solBiasGELU          = biasGELUWith("")
	solBPE               = bpeSol{}
)

func solScalerUpdate(s *amp.GradScaler, finite bool) bool {
	if !finite {
		s.Scale *= s.BackoffFactor
		s.GoodSteps = 0
		return true
	}
	s.GoodSteps++
	if s.GoodSteps >= s.GrowthInterval {
		s.Scale *= s.GrowthFactor
		s.GoodSteps = 0
	}
	return false
}
