package lab

import (
	"math"

	"github.com/druto/druto/pkg/amp"
)

// The solutions of labs 1-3, as the solution notebooks write them.

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

func solLayerNorm(out, mean, rstd, inp, weight, bias []float32, N, C int) {
	for i := range N {
		x := inp[i*C : (i+1)*C]
		var m, v float32
		for _, a := range x {
			m += a
		}
		m /= float32(C)
		for _, a := range x {
			v += (a - m) * (a - m)
		}
		r := float32(1 / math.Sqrt(float64(v/float32(C))+LayerNormEps))
		mean[i], rstd[i] = m, r
		for j, a := range x {
			out[i*C+j] = (a-m)*r*weight[j] + bias[j]
		}
	}
}

func solLayerNormBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd []float32, N, C int) {
	for i := range N {
		var a, b float32
		for j := range C {
			dn, nm := dout[i*C+j]*weight[j], (inp[i*C+j]-mean[i])*rstd[i]
			a += dn
			b += dn * nm
		}
		a /= float32(C)
		b /= float32(C)
		for j := range C {
			dn, nm := dout[i*C+j]*weight[j], (inp[i*C+j]-mean[i])*rstd[i]
			dbias[j] += dout[i*C+j]
			dweight[j] += dout[i*C+j] * nm
			dinp[i*C+j] += (dn - a - nm*b) * rstd[i]
		}
	}
}

func solAdamW(p, g, m, v []float32, hp Hyper) {
	c1 := 1 - float32(math.Pow(float64(hp.Beta1), float64(hp.Step)))
	c2 := 1 - float32(math.Pow(float64(hp.Beta2), float64(hp.Step)))
	for i := range p {
		m[i] = hp.Beta1*m[i] + (1-hp.Beta1)*g[i]
		v[i] = hp.Beta2*v[i] + (1-hp.Beta2)*g[i]*g[i]
		p[i] -= hp.LR * hp.WeightDecay * p[i]
		p[i] -= hp.LR * (m[i] / c1) / (float32(math.Sqrt(float64(v[i]/c2))) + hp.Eps)
	}
}

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
