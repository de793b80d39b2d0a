package lab

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/tensor"
)

func TestSolutionsPass(t *testing.T) {
	for _, ex := range []Exercise{Softmax(solSoftmax), CrossEntropy(solCrossEntropy), LayerNorm(solLayerNorm),
		LayerNormBackward(solLayerNormBackward), AdamW(solAdamW), ScalerUpdate(solScalerUpdate), Attention(solAttention), AttentionBackward(solAttentionBackward),
		BiasGELU(solBiasGELU), CountPairs(solBPE.countPairs), MergePair(solBPE.merge), TrainBPE(solBPE.train), EncodeBPE(solBPE.encode)} {
		res := Run(ex, time.Minute)
		if !res.Passed || res.Points != res.Max || res.Max == 0 {
			t.Errorf("%s: %d of %d, %s", ex.Name, res.Points, res.Max, Feedback("en", res))
		}
	}
}

// planted is a mistake a student may make, and the hint it must get.
type planted struct {
	name, hint string
	ex         Exercise
}

// softmaxWith is the solution's softmax with pieces replaced.
func softmaxWith(at func(i, j, N, V int) int, subMax, normalise, perRow, logOut bool) SoftmaxFunc {
	return func(probs, logits []float32, N, V int) {
		var total float32
		for i := range N {
			mx := float32(0)
			if subMax {
				mx = float32(math.Inf(-1))
				for j := range V {
					mx = max(mx, logits[at(i, j, N, V)])
				}
			}
			var sum float32
			for j := range V {
				e := float32(math.Exp(float64(logits[at(i, j, N, V)] - mx)))
				probs[at(i, j, N, V)] = e
				sum += e
			}
			total += sum
			for j := range V {
				if normalise && perRow {
					probs[at(i, j, N, V)] /= sum
				}
				if logOut {
					probs[at(i, j, N, V)] = float32(math.Log(float64(probs[at(i, j, N, V)])))
				}
			}
		}
		if normalise && !perRow {
			for k := range probs {
				probs[k] /= total
			}
		}
	}
}

func rowMajor(i, j, N, V int) int { return i*V + j }

func lab1Mistakes() []planted {
	ce := func(f func(losses, dlogits []float32, logits []float32, targets []int32, N, V int)) Exercise {
		return CrossEntropy(f)
	}
	return []planted{
		{"softmax without max-subtraction", "maxsub", Softmax(softmaxWith(rowMajor, false, true, true, false))},
		{"softmax transposed", "transposed", Softmax(softmaxWith(func(i, j, N, V int) int { return j*N + i }, true, true, true, false))},
		{"softmax returns log-probabilities", "logsoftmax", Softmax(softmaxWith(rowMajor, true, true, true, true))},
		{"softmax not normalised", "normalise", Softmax(softmaxWith(rowMajor, true, false, true, false))},
		{"softmax normalised over the batch", "globalsum", Softmax(softmaxWith(rowMajor, true, true, false, false))},
		{"softmax stub", "empty", Softmax(func(probs, logits []float32, N, V int) {})},
		{"cross-entropy gradient without one-hot", "onehot", ce(func(l, d, x []float32, tg []int32, N, V int) {
			solSoftmax(d, x, N, V)
			for i, t := range tg {
				l[i] = -float32(math.Log(float64(d[i*V+int(t)])))
			}
		})},
		{"cross-entropy gradient of the mean", "mean", ce(func(l, d, x []float32, tg []int32, N, V int) {
			solCrossEntropy(l, d, x, tg, N, V)
			for k := range d {
				d[k] /= float32(N)
			}
		})},
		{"cross-entropy target without the row offset", "rowoffset", ce(func(l, d, x []float32, tg []int32, N, V int) {
			solCrossEntropy(l, d, x, tg, N, V)
			for i, t := range tg {
				l[i] = -float32(math.Log(float64(d[int(t)] + b2f32(i == 0))))
				if i > 0 { // row i's softmax at column t of row 0
					mx, s := x[i*V], float32(0)
					for j := range V {
						mx = max(mx, x[i*V+j])
					}
					for j := range V {
						s += float32(math.Exp(float64(x[i*V+j] - mx)))
					}
					l[i] = -float32(math.Log(math.Exp(float64(x[t]-mx)) / float64(s)))
				}
			}
		})},
		{"cross-entropy with the sign flipped", "sign", ce(func(l, d, x []float32, tg []int32, N, V int) {
			solCrossEntropy(l, d, x, tg, N, V)
			for i := range l {
				l[i] = -l[i]
			}
			for k := range d {
				d[k] = -d[k]
			}
		})},
		{"cross-entropy without max-subtraction", "maxsub", ce(func(l, d, x []float32, tg []int32, N, V int) {
			softmaxWith(rowMajor, false, true, true, false)(d, x, N, V)
			for i, t := range tg {
				l[i] = -float32(math.Log(float64(d[i*V+int(t)])))
				d[i*V+int(t)]--
			}
		})},
	}
}

func b2f32(b bool) float32 {
	if b {
		return 1
	}
	return 0
}

// layerNormWith is the solution's layernorm with one mistake.
func layerNormWith(mistake string) LayerNormFunc {
	return func(out, mean, rstd, inp, weight, bias []float32, N, C int) {
		at := func(i, j int) int { return i*C + j }
		if mistake == "transposed" {
			at = func(i, j int) int { return j*N + i }
		}
		for i := range N {
			var m, v float32
			for j := range C {
				m += inp[at(i, j)]
			}
			m /= float32(C)
			for j := range C {
				v += (inp[at(i, j)] - m) * (inp[at(i, j)] - m)
			}
			switch mistake {
			case "variance":
				v /= float32(C - 1)
			default:
				v /= float32(C)
			}
			r := float32(1 / math.Sqrt(float64(v)+LayerNormEps))
			if mistake == "eps" {
				r = float32(1 / (math.Sqrt(float64(v)) + LayerNormEps))
			}
			mean[i], rstd[i] = m, r
			if mistake == "rstd" {
				rstd[i] = 1 / r
			}
			for j := range C {
				n := (inp[at(i, j)] - m) * r
				if mistake != "affine" {
					n = n*weight[j] + bias[j]
				}
				out[at(i, j)] = n
			}
		}
	}
}

func layerNormBackwardWith(mistake string) LayerNormBackwardFunc {
	return func(dinp, dweight, dbias, dout, inp, weight, mean, rstd []float32, N, C int) {
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
				switch mistake {
				case "rowsum": // each row overwrites the last one's
					dbias[j] = dout[i*C+j]
					dweight[j] = dout[i*C+j] * nm
				case "dweight":
					dbias[j] += dout[i*C+j]
					dweight[j] += dout[i*C+j]
				default:
					dbias[j] += dout[i*C+j]
					dweight[j] += dout[i*C+j] * nm
				}
				if mistake == "dinp" {
					dinp[i*C+j] += dn * rstd[i]
				} else {
					dinp[i*C+j] += (dn - a - nm*b) * rstd[i]
				}
			}
		}
	}
}

func lab2Mistakes() []planted {
	var ps []planted
	for _, m := range []string{"variance", "eps", "affine", "rstd", "transposed"} {
		ps = append(ps, planted{"layernorm " + m, m, LayerNorm(layerNormWith(m))})
	}
	for _, m := range []string{"rowsum", "dweight", "dinp"} {
		ps = append(ps, planted{"layernorm backward " + m, m, LayerNormBackward(layerNormBackwardWith(m))})
	}
	return append(ps, planted{"layernorm stub", "empty", LayerNorm(func(out, mean, rstd, inp, weight, bias []float32, N, C int) {})})
}

// adamWWith is the solution's AdamW with one mistake.
func adamWWith(mistake string) AdamWFunc {
	return func(p, g, m, v []float32, hp Hyper) {
		c1 := 1 - float32(math.Pow(float64(hp.Beta1), float64(hp.Step)))
		c2 := 1 - float32(math.Pow(float64(hp.Beta2), float64(hp.Step)))
		if mistake == "biascorr" {
			c1, c2 = 1, 1
		}
		for i := range p {
			gi := g[i]
			if mistake == "l2" {
				gi += hp.WeightDecay * p[i]
			}
			m[i] = hp.Beta1*m[i] + (1-hp.Beta1)*gi
			sq := gi * gi
			if mistake == "square" {
				sq = float32(math.Abs(float64(gi)))
			}
			v[i] = hp.Beta2*v[i] + (1-hp.Beta2)*sq
			switch mistake {
			case "l2":
			case "decaylr":
				p[i] -= hp.WeightDecay * p[i]
			default:
				p[i] -= hp.LR * hp.WeightDecay * p[i]
			}
			den := float32(math.Sqrt(float64(v[i]/c2))) + hp.Eps
			if mistake == "epssqrt" {
				den = float32(math.Sqrt(float64(v[i]/c2 + hp.Eps)))
			}
			p[i] -= hp.LR * (m[i] / c1) / den
		}
	}
}

func lab3Mistakes() []planted {
	var ps []planted
	for _, m := range []string{"biascorr", "l2", "epssqrt", "square", "decaylr"} {
		ps = append(ps, planted{"adamw " + m, m, AdamW(adamWWith(m))})
	}
	return append(ps,
		planted{"scaler never skips", "noskip", ScalerUpdate(func(s *amp.GradScaler, finite bool) bool {
			solScalerUpdate(s, finite)
			return false
		})},
		planted{"scaler without back-off", "nobackoff", ScalerUpdate(func(s *amp.GradScaler, finite bool) bool {
			if !finite {
				s.GoodSteps = 0
				return true
			}
			return solScalerUpdate(s, finite)
		})},
		planted{"scaler grows one step late", "growth", ScalerUpdate(func(s *amp.GradScaler, finite bool) bool {
			if !finite {
				return solScalerUpdate(s, finite)
			}
			s.GoodSteps++
			if s.GoodSteps > s.GrowthInterval {
				s.Scale *= s.GrowthFactor
				s.GoodSteps = 0
			}
			return false
		})},
		planted{"scaler keeps counting after an overflow", "resetgood", ScalerUpdate(func(s *amp.GradScaler, finite bool) bool {
			if !finite {
				s.Scale *= s.BackoffFactor
				return true
			}
			return solScalerUpdate(s, finite)
		})},
		planted{"adamw stub", "empty", AdamW(func(p, g, m, v []float32, hp Hyper) {})},
	)
}

// TestPlantedMistakes checks that each planted mistake fails its check
// with the hint for its kind, in both languages' feedback.
func TestPlantedMistakes(t *testing.T) {
	for lab, ps := range map[string][]planted{"lab 1": lab1Mistakes(), "lab 2": lab2Mistakes(), "lab 3": lab3Mistakes(), "lab 4": lab4Mistakes(), "lab 5": lab5Mistakes(), "lab 6": lab6Mistakes()} {
		if len(ps) < 5 {
			t.Errorf("%s: %d planted mistakes, want at least 5", lab, len(ps))
		}
		for _, p := range ps {
			res := Run(p.ex, time.Minute)
			if res.Passed || res.Failure == nil {
				t.Errorf("%s: %s passed its check", lab, p.name)
				continue
			}
			if res.Failure.Hint != p.hint {
				t.Errorf("%s: %s got hint %q, want %q:\n%s", lab, p.name, res.Failure.Hint, p.hint, Feedback("en", res))
			}
			en, bn := Feedback("en", res), Feedback("bn", res)
			if !strings.Contains(en, hints[p.hint]) || !strings.Contains(bn, bangla[hints[p.hint]]) {
				t.Errorf("%s: %s: feedback without its hint:\n%s\n%s", lab, p.name, en, bn)
			}
		}
	}
}

func TestPanicAndEndlessLoop(t *testing.T) {
	res := Run(Softmax(func(probs, logits []float32, N, V int) { probs[N*V] = 1 }), time.Minute)
	if res.Failure == nil || res.Failure.Hint != "panic" || !strings.Contains(res.Failure.Panic, "index out of range") {
		t.Errorf("a panicking softmax: %+v", res.Failure)
	}
	if fb := Feedback("bn", res); !strings.Contains(fb, "প্যানিক") || !strings.Contains(fb, "lab_test.go:") {
		t.Errorf("Bangla feedback of a panic, without its line: %s", fb)
	}
	t.Log(Feedback("en", res))
	start := time.Now()
	res = Run(Softmax(func(probs, logits []float32, N, V int) {
		for i := 0; i < N; i *= 1 {
		}
	}), 300*time.Millisecond)
	if res.Failure == nil || !res.Failure.TimedOut || res.Failure.Hint != "timeout" || time.Since(start) > 5*time.Second {
		t.Errorf("an endless softmax: %+v after %v", res.Failure, time.Since(start))
	}
}

// TestFeedback checks the paragraph and the score line of a failure.
func TestFeedback(t *testing.T) {
	res := Run(LayerNorm(layerNormWith("variance")), time.Minute)
	en := Feedback("en", res)
	for _, want := range []string{"N=3, C=8", "mean", "rstd[", "reference", "tolerance", "C-1"} {
		if !strings.Contains(en, want) && !(want == "mean" && strings.Contains(en, "rstd")) {
			t.Errorf("feedback lacks %q: %s", want, en)
		}
	}
	if s := ScoreLine("bn", res); !strings.Contains(s, "✗ layernorm: 4টি কেসের মধ্যে 0টি") {
		t.Errorf("Bangla score line %q", s)
	}
	if s := ScoreLine("en", Run(LayerNorm(solLayerNorm), time.Minute)); s != "✓ layernorm: 4 of 4 cases" {
		t.Errorf("score line %q", s)
	}
}

// TestCatalogue checks that every message and hint has its Bangla.
func TestCatalogue(t *testing.T) {
	for k, h := range hints {
		if _, ok := bangla[h]; !ok {
			t.Errorf("hint %s has no Bangla", k)
		}
	}
	for _, f := range []string{"All %d cases match the reference. Well done!", "Hint: %s", "%d of %d cases", "%d steps", "n=%d, step %d",
		"step %d (finite gradients)", "step %d (an overflow)", "the gradient against finite differences", "large logits (about 100)",
		"large scores (about 1800)", "With %s, %s%s is %s where the reference has %s.", "random byte sequences", "random bytes 0-255",
		"%d lines of Bangla", "empty and one-token sequences", "overlapping pairs (aaa)", "random byte sequences, %d merges",
		"ties between equal counts", "%d lines of Bangla, %d merges", "a pair seen once, and no sequences", "random text",
		"empty text and one byte", "merge order", "chunk boundaries", "%s: %d characters, %d bytes in UTF-8:",
		"No merges yet: train returned none.", "Your encode returned no tokens yet.", "The first line in tokens:",
		"%d of the %d new tokens are whole characters or more (valid UTF-8); the rest are pieces of a character's bytes.",
		"%d characters, %d bytes: the byte tokenizer needs %.2f tokens a character; your BPE with %d merges needs %.2f (%d tokens).",
		"Decoded, your tokens are not the text again: check encode.", "With %s, the kernel failed on the GPU:",
		"Your kernel could not be built or loaded on this GPU:", "Your kernel does not compile (%s). NVRTC says:", "building the kernel",
		"Timing it at N=%d, C=%d failed: %v"} {
		if _, ok := bangla[f]; !ok {
			t.Errorf("%q has no Bangla", f)
		}
	}
}

// attnHead is head h of sequence b in lab 4's tensors, as the notebook's
// head type: row is the head's hs values at position t of q, k or v
// (part 0, 1, 2) in qkv (B,T,3C), or, with layout set, in a (B,T,NH,3,hs)
// qkv (the planted layout mistake).
type attnHead struct {
	b, h, T, C, NH int
	layout         bool
}

func (x attnHead) row(qkv []float32, t, part int) []float32 {
	hs := x.C / x.NH
	i := (x.b*x.T+t)*3*x.C + part*x.C + x.h*hs
	if x.layout {
		i = (x.b*x.T+t)*3*x.C + (3*x.h+part)*hs
	}
	return qkv[i : i+hs]
}

func dot32(x, y []float32) (s float32) {
	for i := range x {
		s += x[i] * y[i]
	}
	return s
}

// axpyOrSet adds a·x into y, or stores it with set.
func axpyOrSet(a float32, x, y []float32, set bool) {
	for i := range x {
		if set {
			y[i] = 0
		}
		y[i] += a * x[i]
	}
}

// attentionWith is the notebook's solution of lab 4's forward with one
// mistake: "nomask", "maskoff" (one later key let in), "scale" (none),
// "headsize" (1/√C), "maxsub" (no max subtracted), "layout", "outlayout".
func attentionWith(mistake string) AttentionFunc {
	return func(out, att, qkv []float32, B, T, C, NH int) {
		hs := C / NH
		scale := float32(1 / math.Sqrt(float64(hs)))
		switch mistake {
		case "scale":
			scale = 1
		case "headsize":
			scale = float32(1 / math.Sqrt(float64(C)))
		}
		for bh := range B * NH {
			x := attnHead{bh / NH, bh % NH, T, C, NH, mistake == "layout"}
			for t := range T {
				last := t
				switch mistake {
				case "nomask":
					last = T - 1
				case "maskoff":
					last = min(t+1, T-1)
				}
				row := att[(bh*T+t)*T:][:T]
				for t2 := range last + 1 {
					row[t2] = dot32(x.row(qkv, t, 0), x.row(qkv, t2, 1)) * scale
				}
				live, mx, sum := row[:last+1], row[0], float32(0)
				for _, v := range live {
					mx = max(mx, v)
				}
				if mistake == "maxsub" {
					mx = 0
				}
				for j, v := range live {
					live[j] = float32(math.Exp(float64(v - mx)))
					sum += live[j]
				}
				o := out[(x.b*T+t)*C+x.h*hs:]
				if mistake == "outlayout" {
					o = out[(bh*T+t)*hs:]
				}
				for t2 := range live {
					live[t2] /= sum
					axpyOrSet(live[t2], x.row(qkv, t2, 2), o, false)
				}
			}
		}
	}
}

// attentionBackwardWith is the notebook's solution of lab 4's backward
// with one mistake: "softmaxbwd" (no Σ p·dp), "bwdscale" (none),
// "accumulate" (every gradient stored, not added), "dk" (dk left out).
func attentionBackwardWith(mistake string) AttentionBackwardFunc {
	return func(dqkv, dout, qkv, att []float32, B, T, C, NH int) {
		hs := C / NH
		scale := float32(1 / math.Sqrt(float64(hs)))
		if mistake == "bwdscale" {
			scale = 1
		}
		set := mistake == "accumulate"
		for bh := range B * NH {
			x := attnHead{bh / NH, bh % NH, T, C, NH, false}
			for t := range T {
				g, p := dout[(x.b*T+t)*C+x.h*hs:][:hs], att[(bh*T+t)*T:][:t+1]
				ds, s := make([]float32, t+1), float32(0)
				for t2 := range t + 1 {
					ds[t2] = dot32(g, x.row(qkv, t2, 2))
					axpyOrSet(p[t2], g, x.row(dqkv, t2, 2), set)
					s += p[t2] * ds[t2]
				}
				for t2 := range t + 1 {
					if mistake != "softmaxbwd" {
						ds[t2] -= s
					}
					ds[t2] *= p[t2]
				}
				for t2 := range t + 1 {
					axpyOrSet(ds[t2]*scale, x.row(qkv, t2, 1), x.row(dqkv, t, 0), set)
					if mistake != "dk" {
						axpyOrSet(ds[t2]*scale, x.row(qkv, t, 0), x.row(dqkv, t2, 1), set)
					}
				}
			}
		}
	}
}

func lab4Mistakes() []planted {
	var ps []planted
	for _, m := range []string{"nomask", "maskoff", "scale", "headsize", "maxsub", "layout", "outlayout"} {
		ps = append(ps, planted{"attention " + m, m, Attention(attentionWith(m))})
	}
	for _, m := range []string{"softmaxbwd", "bwdscale", "accumulate", "dk"} {
		ps = append(ps, planted{"attention backward " + m, m, AttentionBackward(attentionBackwardWith(m))})
	}
	return append(ps,
		planted{"attention stub", "empty", Attention(func(out, att, qkv []float32, B, T, C, NH int) {})},
		planted{"attention backward stub", "empty", AttentionBackward(func(dqkv, dout, qkv, att []float32, B, T, C, NH int) {})})
}

// bpeSol is the notebook's solution of lab 6 with one mistake (none for
// ""), each function calling the others as the notebook's do.
type bpeSol struct{ mistake string }

func (s bpeSol) toIDs(chunk string) []int32 {
	var ids []int32
	if s.mistake == "runes" {
		for _, r := range chunk {
			ids = append(ids, r)
		}
		return ids
	}
	for i := range len(chunk) {
		ids = append(ids, int32(chunk[i]))
	}
	return ids
}

func (s bpeSol) countPairs(seqs [][]int32) map[[2]int32]int {
	switch s.mistake {
	case "count stub":
		return nil
	case "crossseq":
		seqs = [][]int32{slices.Concat(seqs...)}
	}
	counts := map[[2]int32]int{}
	for _, ids := range seqs {
		last := len(ids) - 1
		if s.mistake == "lastpair" {
			last--
		}
		seen, prev, prevAt := map[[2]int32]bool{}, [2]int32{}, -2
		for i := 0; i < last; i++ {
			p := [2]int32{ids[i], ids[i+1]}
			switch {
			case s.mistake == "once" && seen[p]:
				continue
			case s.mistake == "overlap" && p == prev && i == prevAt+1: // the same pair again, overlapping
				continue
			}
			seen[p], prev, prevAt = true, p, i
			counts[p]++
		}
	}
	return counts
}

func (s bpeSol) merge(ids []int32, pair [2]int32, id int32) []int32 {
	if s.mistake == "merge stub" {
		return nil
	}
	if s.mistake == "swapped" {
		pair = [2]int32{pair[1], pair[0]}
	}
	if s.mistake == "fromright" {
		var out []int32
		for i := len(ids) - 1; i >= 0; i-- {
			if i > 0 && ids[i-1] == pair[0] && ids[i] == pair[1] {
				out = append([]int32{id}, out...)
				i--
			} else {
				out = append([]int32{ids[i]}, out...)
			}
		}
		return out
	}
	out, done := []int32{}, false
	for i := 0; i < len(ids); i++ {
		if !done && i+1 < len(ids) && ids[i] == pair[0] && ids[i+1] == pair[1] {
			out = append(out, id)
			done = s.mistake == "firstonly"
			if s.mistake != "overlapmerge" {
				i++
			}
		} else {
			out = append(out, ids[i])
		}
	}
	return out
}

func (s bpeSol) mostFrequent(counts map[[2]int32]int) (best [2]int32, n int) {
	for p, c := range counts {
		smaller := p[0] < best[0] || p[0] == best[0] && p[1] < best[1]
		switch s.mistake {
		case "largest":
			smaller = p[0] > best[0] || p[0] == best[0] && p[1] > best[1]
		case "second first":
			smaller = p[1] < best[1] || p[1] == best[1] && p[0] < best[0]
		}
		if c > n || c == n && smaller {
			best, n = p, c
		}
	}
	return best, n
}

func (s bpeSol) train(seqs [][]int32, n int) (merges [][2]int32) {
	if s.mistake == "train stub" {
		return nil
	}
	counts := s.countPairs(seqs)
	for id := int32(256); id < int32(256+n); id++ {
		if s.mistake != "recount" {
			counts = s.countPairs(seqs)
		}
		pair, count := s.mostFrequent(counts)
		if count < 2 && s.mistake != "stop" || count < 1 {
			break
		}
		delete(counts, pair)
		merges = append(merges, pair)
		if s.mistake == "newid" {
			id = int32(256 + len(merges))
		}
		for i := range seqs {
			if s.mistake != "apply" {
				seqs[i] = s.merge(seqs[i], pair, id)
			}
		}
	}
	return merges
}

func (s bpeSol) firstLearned(ids []int32, rank map[[2]int32]int32) (best [2]int32, id int32) {
	id = -1
	for i := 0; i+1 < len(ids); i++ {
		p := [2]int32{ids[i], ids[i+1]}
		r, ok := rank[p]
		switch {
		case !ok:
		case s.mistake == "leftmost" && id < 0:
			return p, r
		case id < 0 || r < id && s.mistake != "reverse" || r > id && s.mistake == "reverse":
			best, id = p, r
		}
	}
	return best, id
}

func (s bpeSol) encode(text string, merges [][2]int32) (out []int32) {
	if s.mistake == "encode stub" {
		return nil
	}
	rank := map[[2]int32]int32{}
	for i, m := range merges {
		rank[m] = int32(256 + i)
	}
	chunks := Chunks(text)
	if s.mistake == "nosplit" {
		chunks = []string{text}
	}
	for _, c := range chunks {
		ids := s.toIDs(c)
		for p, id := s.firstLearned(ids, rank); id >= 0; p, id = s.firstLearned(ids, rank) {
			ids = s.merge(ids, p, id)
		}
		out = append(out, ids...)
	}
	return out
}

func lab6Mistakes() []planted {
	var ps []planted
	for _, m := range [][2]string{{"overlap", "overlap"}, {"crossseq", "crossseq"}, {"lastpair", "lastpair"}, {"once", "once"}, {"count stub", "nothing"}} {
		ps = append(ps, planted{"count pairs " + m[0], m[1], CountPairs(bpeSol{m[0]}.countPairs)})
	}
	for _, m := range [][2]string{{"overlapmerge", "overlapmerge"}, {"fromright", "fromright"}, {"firstonly", "firstonly"}, {"swapped", "swapped"}, {"merge stub", "nothing"}} {
		ps = append(ps, planted{"merge " + m[0], m[1], MergePair(bpeSol{m[0]}.merge)})
	}
	for _, m := range [][2]string{{"largest", "tie"}, {"second first", "tie"}, {"stop", "stop"}, {"newid", "newid"}, {"recount", "recount"},
		{"apply", "apply"}, {"overlapmerge", "overlapmerge"}, {"overlap", "overlap"}, {"train stub", "nothing"}} {
		ps = append(ps, planted{"train " + m[0], m[1], TrainBPE(bpeSol{m[0]}.train)})
	}
	for _, m := range [][2]string{{"runes", "runes"}, {"reverse", "order"}, {"leftmost", "order"}, {"nosplit", "nosplit"}, {"overlapmerge", "overlapmerge"}, {"encode stub", "nothing"}} {
		ps = append(ps, planted{"encode " + m[0], m[1], EncodeBPE(bpeSol{m[0]}.encode)})
	}
	return ps
}

// TestBPEModels checks lab 6's reference models against druto's own BPE
// (pkg/data) on the Bangla corpus and random text, and on the cases the
// exercises run.
func TestBPEModels(t *testing.T) {
	rng := tensor.NewRNG(7)
	for _, text := range []string{BanglaLines(0, 40), randText(rng, 500, "aab bc  ক া্"), "aaaaaaa aaa", ""} {
		seqs := chunkIDs(text)
		want := drutoMerges(text, 50)
		if got := trainModel(seqs, 50, "", 0); !slices.Equal(got, want) {
			t.Errorf("trainModel on %q: %v, data.TrainBPE %v", quoteText(text), got, want)
		}
		if got := (bpeSol{}).train(cloneSeqs(seqs), 50); !slices.Equal(got, want) {
			t.Errorf("the solution's train on %q: %v, data.TrainBPE %v", quoteText(text), got, want)
		}
		probe := BanglaLines(40, 45) + randText(rng, 100, "aab bc  ক া্")
		if got, w := encodeModel(probe, want, "", 0), drutoEncode(probe, want); !slices.Equal(got, w) {
			t.Errorf("encodeModel: %v, data %v", got, w)
		}
	}
	if s := strings.Join(Chunks("আমি  বাংলায় গান গাই।"), "|"); s != "আমি| | বাংলায়| গান| গাই|।" {
		t.Errorf("Chunks: %q", s)
	}
}

// TestSimulateScaler: druto's own update agrees with itself at every step;
// the run backs off at the spike and grows again; a scaler that never
// backs off is told where it first differs; a panic is reported.
func TestSimulateScaler(t *testing.T) {
	ref, yours, sum := SimulateScaler("en", func(s *amp.GradScaler, finite bool) bool { return s.Update(finite) })
	if !strings.Contains(sum, "agree at every step") || len(yours.Scale) != ScalerSteps || len(ref.Skipped) != len(yours.Skipped) {
		t.Errorf("the reference against itself: %q, %d steps", sum, len(yours.Scale))
	}
	lo, hi := ref.Scale[0], ref.Scale[0]
	for _, s := range ref.Scale {
		lo, hi = min(lo, s), max(hi, s)
	}
	if len(ref.Skipped) < 10 || hi < 4*ref.Scale[0] || lo > ref.Scale[0]/16 || ref.Scale[ScalerSteps-1] < 8*lo {
		t.Errorf("the run should grow, back off at the spike and grow again: %d skipped, scale from %g to %g, last %g",
			len(ref.Skipped), lo, hi, ref.Scale[ScalerSteps-1])
	}
	_, _, sum = SimulateScaler("bn", func(s *amp.GradScaler, finite bool) bool {
		if finite {
			return s.Update(true)
		}
		return true
	})
	if !strings.Contains(sum, "প্রথম অমিল") {
		t.Errorf("a scaler without back-off: %q", sum)
	}
	_, yours, sum = SimulateScaler("en", func(s *amp.GradScaler, finite bool) bool {
		if !finite {
			panic("boom")
		}
		return s.Update(true)
	})
	if !strings.Contains(sum, "panicked") || len(yours.Scale) == 0 {
		t.Errorf("a panicking scaler: %q after %d steps", sum, len(yours.Scale))
	}
}

// biasGELUWith is lab 5's Go twin, as a student writes it in float32,
// with one mistake.
func biasGELUWith(mistake string) BiasGELUFunc {
	return func(out, inp, bias []float32, N, C int) {
		at := func(i, j int) int { return i*C + j }
		if mistake == "transposed" {
			at = func(i, j int) int { return j*N + i }
		}
		rows, cols := N, C
		switch mistake {
		case "lastcol":
			cols--
		case "lastrow":
			rows--
		}
		for i := range rows {
			for j := range cols {
				x := inp[at(i, j)] + bias[j]
				switch mistake {
				case "biasrow":
					x = inp[at(i, j)] + bias[i]
				case "biasafter":
					x = inp[at(i, j)]
				}
				s, coef, half := math.Sqrt(2/math.Pi), 0.044715, 0.5
				switch mistake {
				case "sqrt2pi":
					s = 2 / math.Pi
				case "cubic":
					coef = 0
				case "half":
					half = 1
				}
				xf := float64(x)
				y := float32(half * xf * (1 + math.Tanh(s*(xf+coef*xf*xf*xf))))
				switch mistake {
				case "erf":
					y = float32(0.5 * xf * (1 + math.Erf(xf/math.Sqrt2)))
				case "relu":
					y = max(0, x)
				case "biasafter":
					y += bias[j]
				}
				out[at(i, j)] = y
			}
		}
	}
}

func lab5Mistakes() []planted {
	var ps []planted
	for _, m := range [][2]string{{"biasrow", "biasrow"}, {"biasafter", "biasafter"}, {"erf", "erf"}, {"half", "half"}, {"cubic", "cubic"},
		{"sqrt2pi", "sqrt2pi"}, {"transposed", "transposed"}, {"lastcol", "bound"}, {"lastrow", "bound"}, {"relu", "relu"}} {
		ps = append(ps, planted{"bias-gelu " + m[0], m[1], BiasGELU(biasGELUWith(m[0]))})
	}
	return append(ps, planted{"bias-gelu stub", "empty", BiasGELU(func(out, inp, bias []float32, N, C int) {})})
}

// fakeRunner runs lab 5's kernel exercise without a GPU: fn stands for
// the compiled kernel.
type fakeRunner struct {
	gpuErr, compileErr error
	fn                 BiasGELUFunc
	kernel, copy       float64
}

func (f *fakeRunner) GPU() (string, error)           { return "Fake GPU", f.gpuErr }
func (f *fakeRunner) Compile(string) (string, error) { return "11.8", f.compileErr }
func (f *fakeRunner) Launch(out, inp, bias []float32, N, C int) error {
	f.fn(out, inp, bias, N, C)
	return nil
}
func (f *fakeRunner) Bandwidth(N, C int) (float64, float64, error) { return f.kernel, f.copy, nil }
func (f *fakeRunner) Close() error                                 { return nil }

// TestKernelExercise checks lab 5's kernel exercise through a fake
// runner: skipped in one line where there is no GPU (compiled, without
// NVRTC, not compiling), NVRTC's messages for a kernel that does not
// compile, the Go twin's diagnoses and the bandwidth line on a GPU.
func TestKernelExercise(t *testing.T) {
	noGPU := fmt.Errorf("%w: no CUDA driver", ErrNoGPU)
	log := "bias_gelu.cu(4): error: identifier \"y\" is undefined\n\n1 error detected in the compilation of \"bias_gelu.cu\".\n"
	compileErr := &CompileError{NVRTC: "11.8", Log: log}
	for _, c := range []struct {
		name string
		r    *fakeRunner
		want []string // in the English feedback
	}{
		{"no GPU, compiles", &fakeRunner{gpuErr: noGPU}, []string{"No GPU here: your kernel compiles (NVRTC 11.8)", "Go twin's grade above counts"}},
		{"no GPU, no NVRTC", &fakeRunner{gpuErr: noGPU, compileErr: fmt.Errorf("%w: libnvrtc not found", ErrNoNVRTC)}, []string{"no NVRTC"}},
		{"no GPU, does not compile", &fakeRunner{gpuErr: noGPU, compileErr: compileErr}, []string{"does not compile", "identifier \"y\" is undefined"}},
		{"no GPU, no kernel", &fakeRunner{gpuErr: noGPU, compileErr: fmt.Errorf("%w in the PTX", ErrKernelName)}, []string{"defines no kernel bias_gelu"}},
		{"no GPU, NVRTC fails", &fakeRunner{gpuErr: noGPU, compileErr: errors.New("nvrtc: out of memory")}, []string{"NVRTC failed: nvrtc: out of memory"}},
		{"a GPU, no NVRTC", &fakeRunner{compileErr: fmt.Errorf("%w: libnvrtc not found", ErrNoNVRTC)}, []string{"This GPU (Fake GPU) has no NVRTC"}},
	} {
		res := Run(BiasGELUKernel("", c.r), time.Minute)
		en, bn := Feedback("en", res), Feedback("bn", res)
		if !res.Skipped || res.Passed || res.Max != 0 || res.Failure != nil || res.Note == "" {
			t.Errorf("%s: want a skip, got %+v", c.name, res)
		}
		for _, w := range c.want {
			if !strings.Contains(en, w) {
				t.Errorf("%s: feedback lacks %q: %s", c.name, w, en)
			}
		}
		if first, _, _ := strings.Cut(en, "\n"); strings.Count(first, ". ") > 2 || !strings.Contains(bn, "জিপিইউ") || !hasBangla(bn) {
			t.Errorf("%s: not one line, or no Bangla: %q / %q", c.name, en, bn)
		}
	}
	res := Run(BiasGELUKernel("", &fakeRunner{compileErr: compileErr}), time.Minute)
	if en := Feedback("en", res); res.Failure == nil || res.Failure.Hint != "compile" || !strings.Contains(en, "(4): error: identifier") ||
		strings.Contains(en, "1 error detected\n\n") || !strings.Contains(Feedback("bn", res), "NVRTC বলছে") {
		t.Errorf("a kernel that does not compile on a GPU: %+v\n%s", res.Failure, en)
	}
	res = Run(BiasGELUKernel("", &fakeRunner{fn: biasGELUWith("biasrow")}), time.Minute)
	if res.Failure == nil || res.Failure.Hint != "biasrow" {
		t.Errorf("a kernel with bias indexed by the row: %+v", res.Failure)
	}
	for _, c := range []struct {
		kernel float64
		want   string
	}{{3400, "★ Bandwidth at N=16384, C=4096: 3400 GB/s, 85% of this GPU's copy bandwidth (4000 GB/s)"}, {2000, "the stretch goal is 80% (★)"}} {
		res = Run(BiasGELUKernel("", &fakeRunner{fn: solBiasGELU, kernel: c.kernel, copy: 4000}), time.Minute)
		if en := Feedback("en", res); !res.Passed || res.Points != len(bgSizes) || !strings.Contains(en, c.want) || !strings.Contains(res.Note, c.want) {
			t.Errorf("the solution kernel at %.0f GB/s: %+v\n%s", c.kernel, res, en)
		}
		if bn := Feedback("bn", res); !strings.Contains(bn, "ব্যান্ডউইথ") {
			t.Errorf("the bandwidth line in Bangla: %s", bn)
		}
	}
	res = Run(BiasGELUKernel("", &fakeRunner{compileErr: fmt.Errorf("%w: no such function", ErrKernelName)}), time.Minute)
	if res.Failure == nil || res.Failure.Hint != "kernelname" || !strings.Contains(Feedback("bn", res), "bias_gelu") {
		t.Errorf("a kernel of another name on a GPU: %+v", res.Failure)
	}
}

// hasBangla reports whether s has a letter of the Bengali block.
func hasBangla(s string) bool {
	for _, r := range s {
		if r >= 0x0980 && r <= 0x09FF {
			return true
		}
	}
	return false
}
