package lab

// Lab 1: softmax, cross-entropy and its gradient.

import (
	"math"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// SoftmaxFunc writes probs = softmax(logits) row by row.
// probs (N,V), logits (N,V)
type SoftmaxFunc func(probs, logits []float32, N, V int)

// CrossEntropyFunc writes losses[i] = -log softmax(logits[i])[targets[i]]
// and dlogits, the gradient of the sum of the losses: softmax - onehot.
// losses (N), dlogits (N,V), logits (N,V), targets (N)
type CrossEntropyFunc func(losses, dlogits, logits []float32, targets []int32, N, V int)

// ceSizes are the (N, V) cases of lab 1: the contract's N, V+ with odd
// sizes and a single column.
var ceSizes = [][2]int{{3, 5}, {7, 33}, {4, 50}, {1, 1}}

// ceInputs are a case's logits (standard normal plus offset) and targets.
func ceInputs(N, V int, offset float64, seed uint64) ([]float32, []int32) {
	rng := tensor.NewRNG(seed)
	logits := randn(rng, N*V, 1, offset)
	targets := make([]int32, N)
	for i := range targets {
		targets[i] = int32(rng.Intn(V))
	}
	return logits, targets
}

// refCE is the reference's losses and probabilities (from its gradient
// softmax - onehot, with the one-hot added back).
func refCE(logits []float32, targets []int32, N, V int) (losses, probs, grad []float64) {
	l, g := tensor.New(tensor.F32, N), mustF32(logits, N, V)
	tg, _ := tensor.FromI32(append([]int32(nil), targets...), N)
	ref().CrossEntropy(l, g, tg, N, V, 1)
	refSync()
	losses, grad = f64(l.F32()), f64(g.F32())
	probs = append([]float64(nil), grad...)
	for i, t := range targets {
		probs[i*V+int(t)]++
	}
	return losses, probs, grad
}

// ceCases are the cases of an exercise of lab 1: the sizes of ceSizes,
// then large logits (a missing max-subtraction overflows exp).
func ceCases(run func(N, V int, offset float64, seed uint64) *Failure) []testCase {
	var cs []testCase
	for k, s := range ceSizes {
		cs = append(cs, testCase{what: sizes(device.Ops.CrossEntropy.Sizes, s[0], s[1]),
			run: func() *Failure { return run(s[0], s[1], 0, uint64(k+1)) }})
	}
	cs = append(cs, testCase{what: label{format: "large logits (about 100)"},
		run: func() *Failure { return run(5, 17, 100, 9) }})
	return cs
}

// Softmax is the exercise of fn: probs against the reference's softmax.
func Softmax(fn SoftmaxFunc) Exercise {
	return Exercise{Name: "softmax", cases: ceCases(func(N, V int, offset float64, seed uint64) *Failure {
		logits, targets := ceInputs(N, V, offset, seed)
		_, want, _ := refCE(logits, targets, N, V)
		probs := make([]float32, N*V)
		fn(probs, append([]float32(nil), logits...), N, V)
		f := compare("probs", probs, want, []int{N, V}, tol(&device.Ops.CrossEntropy, N, V))
		if f != nil {
			f.Hint = diagnose(probs, want, offset, softmaxMistakes(f64(logits), N, V))
		}
		return f
	})}
}

// CrossEntropy is the exercise of fn: losses and dlogits against the
// reference, then dlogits against finite differences of the loss.
func CrossEntropy(fn CrossEntropyFunc) Exercise {
	ex := Exercise{Name: "cross-entropy", cases: ceCases(func(N, V int, offset float64, seed uint64) *Failure {
		logits, targets := ceInputs(N, V, offset, seed)
		wantL, probs, wantG := refCE(logits, targets, N, V)
		losses, dlogits := make([]float32, N), make([]float32, N*V)
		fn(losses, dlogits, append([]float32(nil), logits...), append([]int32(nil), targets...), N, V)
		c := &device.Ops.CrossEntropy
		f := compare("losses", losses, wantL, []int{N}, c.Params[0].Tol(tensor.F32, []int{N, V})*labSlack)
		if f == nil {
			f = compare("dlogits", dlogits, wantG, []int{N, V}, tol(c, N, V))
		}
		if f != nil {
			both := append(append([]float32(nil), losses...), dlogits...)
			f.Hint = diagnose(both, append(wantL, wantG...), offset, ceMistakes(f64(logits), probs, targets, N, V))
		}
		return f
	})}
	ex.cases = append(ex.cases, testCase{what: label{format: "the gradient against finite differences"}, run: func() *Failure {
		const N, V = 3, 7
		logits, targets := ceInputs(N, V, 0, 11)
		losses, dlogits := make([]float32, N), make([]float32, N*V)
		fn(losses, dlogits, append([]float32(nil), logits...), targets, N, V)
		loss := func(x []float64) float64 {
			s := 0.0
			for i := range N {
				l, _ := ceRow(x[i*V:(i+1)*V], int(targets[i]))
				s += l
			}
			return s
		}
		return finiteDiff("dlogits", dlogits, f64(logits), loss, 12)
	}})
	return ex
}

// ceRow is one row's loss and probabilities in float64, max subtracted.
func ceRow(x []float64, t int) (float64, []float64) {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = max(mx, v)
	}
	p := make([]float64, len(x))
	sum := 0.0
	for j, v := range x {
		p[j] = math.Exp(v - mx)
		sum += p[j]
	}
	for j := range p {
		p[j] /= sum
	}
	return math.Log(sum) - (x[t] - mx), p
}

// mistake is a kind of mistake and the outputs it gives on a case's
// inputs; large restricts it to the large-logits case.
type mistake struct {
	hint string
	out  func() []float64
}

// diagnose returns the hint for got: "empty" when nothing was written,
// "maxsub" for a non-finite output on large inputs, else the first mistake
// whose outputs got matches, else "".
func diagnose(got []float32, want []float64, offset float64, ms []mistake) string {
	if allZero(got) {
		return "empty"
	}
	for _, x := range got {
		if offset != 0 && (math.IsNaN(float64(x)) || math.IsInf(float64(x), 0)) {
			return "maxsub"
		}
	}
	for _, m := range ms {
		if matches(got, m.out(), want) {
			return m.hint
		}
	}
	return ""
}

// softmaxRows applies f to each row of x (N,V) in the layout at(i, j).
func softmaxRows(x []float64, N, V int, at func(i, j int) int, f func(row []float64) []float64) []float64 {
	out := make([]float64, len(x))
	for i := range N {
		row := make([]float64, V)
		for j := range V {
			row[j] = x[at(i, j)]
		}
		for j, v := range f(row) {
			out[at(i, j)] = v
		}
	}
	return out
}

func softmaxMistakes(x []float64, N, V int) []mistake {
	rowMajor := func(i, j int) int { return i*V + j }
	soft := func(r []float64) []float64 { _, p := ceRow(r, 0); return p }
	return []mistake{
		{"transposed", func() []float64 { return softmaxRows(x, N, V, func(i, j int) int { return j*N + i }, soft) }},
		{"logsoftmax", func() []float64 {
			return softmaxRows(x, N, V, rowMajor, func(r []float64) []float64 {
				p := soft(r)
				for j := range p {
					p[j] = math.Log(p[j])
				}
				return p
			})
		}},
		{"normalise", func() []float64 { return softmaxRows(x, N, V, rowMajor, expSubMax) }},
		{"normalise", func() []float64 { return softmaxRows(x, N, V, rowMajor, expOnly) }},
		{"globalsum", func() []float64 { return globalSum(softmaxRows(x, N, V, rowMajor, expSubMax)) }},
		{"globalsum", func() []float64 { return globalSum(expOnly(x)) }},
	}
}

// globalSum divides e by its sum.
func globalSum(e []float64) []float64 {
	s := 0.0
	for _, v := range e {
		s += v
	}
	for j := range e {
		e[j] /= s
	}
	return e
}

// expSubMax is exp(r - max(r)), not normalised.
func expSubMax(r []float64) []float64 {
	mx, e := math.Inf(-1), make([]float64, len(r))
	for _, v := range r {
		mx = max(mx, v)
	}
	for j, v := range r {
		e[j] = math.Exp(v - mx)
	}
	return e
}

func expOnly(r []float64) []float64 {
	e := make([]float64, len(r))
	for j, v := range r {
		e[j] = math.Exp(v)
	}
	return e
}

// ceMistakes are the mistakes of cross-entropy, as losses then dlogits.
func ceMistakes(x, probs []float64, targets []int32, N, V int) []mistake {
	loss := func(rowOff bool, sign float64) []float64 {
		l := make([]float64, N)
		for i, t := range targets {
			k := int(t)
			if rowOff {
				k += i * V
			}
			l[i] = sign * -math.Log(softmaxAt(x, i, V, k))
		}
		return l
	}
	grad := func(onehot, scale float64) []float64 {
		g := append([]float64(nil), probs...)
		for i, t := range targets {
			g[i*V+int(t)] -= onehot
		}
		for j := range g {
			g[j] *= scale
		}
		return g
	}
	both := func(l, g []float64) []float64 { return append(l, g...) }
	return []mistake{
		{"onehot", func() []float64 { return both(loss(true, 1), grad(0, 1)) }},
		{"sign", func() []float64 { return both(loss(true, -1), grad(1, -1)) }},
		{"sign", func() []float64 { return both(loss(true, -1), grad(1, 1)) }},
		{"mean", func() []float64 { return both(loss(true, 1), grad(1, 1/float64(N))) }},
		{"rowoffset", func() []float64 { return both(loss(false, 1), grad(1, 1)) }},
	}
}

// softmaxAt is softmax of row i of x (N,V) at flat index k (which may lie
// in another row: the row-offset mistake reads logits[t] from row 0).
func softmaxAt(x []float64, i, V, k int) float64 {
	row := x[i*V : (i+1)*V]
	mx, s := math.Inf(-1), 0.0
	for _, v := range row {
		mx = max(mx, v)
	}
	for _, v := range row {
		s += math.Exp(v - mx)
	}
	return math.Exp(x[k]-mx) / s
}

// finiteDiff checks grad, the gradient of loss at x, against central
// differences along n coordinates spread over x (float64, step 1e-5).
func finiteDiff(output string, grad []float32, x []float64, loss func([]float64) float64, n int) *Failure {
	const h = 1e-5
	for k := range n {
		i := k * len(x) / n
		xp, xm := append([]float64(nil), x...), append([]float64(nil), x...)
		xp[i] += h
		xm[i] -= h
		fd := (loss(xp) - loss(xm)) / (2 * h)
		g := float64(grad[i])
		tl := 1e-4 * (1 + math.Abs(fd))
		if d := math.Abs(g - fd); !(d <= tl) {
			return &Failure{Output: output, Index: index(i, nil), Got: g, Want: fd, Err: d, Tol: tl, Hint: "fd"}
		}
	}
	return nil
}
