package lab

// Lab 3: AdamW and a GradScaler step.

import (
	"math"

	"github.com/druto/druto/pkg/amp"
	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/tensor"
)

// Hyper are one AdamW step's hyper-parameters: LR, Beta1, Beta2, Eps,
// WeightDecay and Step (1-based, for the bias correction).
type Hyper = device.AdamW

// AdamWFunc updates p, m and v in place by one AdamW step with gradient g.
// p, g, m, v (n)
type AdamWFunc func(p, g, m, v []float32, hp Hyper)

// ScalerUpdateFunc records whether a step's gradients were all finite in
// s (Scale, GoodSteps) and returns true when the step must be skipped.
type ScalerUpdateFunc func(s *amp.GradScaler, finite bool) (skip bool)

// adamSteps is how many steps each AdamW case runs (the bias correction
// changes with the step).
const adamSteps = 3

// AdamW is the exercise of fn: three steps on tensors of odd sizes,
// p, m and v after each against the reference's AdamWStep.
func AdamW(fn AdamWFunc) Exercise {
	var cs []testCase
	// The last case's gradients are tiny, as fp16's often are: there eps
	// is not negligible beside sqrt(v).
	for k, c := range []struct {
		n  int
		sd float64
	}{{7, 0.5}, {33, 0.5}, {1, 0.5}, {5, 1e-4}} {
		cs = append(cs, testCase{what: sizes(device.Ops.AdamWState.Sizes, c.n), run: func() *Failure { return adamCase(fn, c.n, c.sd, uint64(40+k)) }})
	}
	return Exercise{Name: "adamw", cases: cs}
}

func adamHyper(step int) Hyper {
	return Hyper{LR: 0.01, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Step: step}
}

func adamCase(fn AdamWFunc, n int, sd float64, seed uint64) *Failure {
	rng := tensor.NewRNG(seed)
	p := randn(rng, n, 1, 0)
	var lay tensor.Layout
	lay.Add("w", true, n)
	master, m, v := mustF32(p, n), tensor.New(tensor.F32, n), tensor.New(tensor.F32, n)
	sp, sm, sv := append([]float32(nil), p...), make([]float32, n), make([]float32, n)
	for step := 1; step <= adamSteps; step++ {
		g := randn(rng, n, sd, 0)
		hp := adamHyper(step)
		before := [3][]float64{f64(master.F32()), f64(m.F32()), f64(v.F32())}
		ref().AdamWStep(master, nil, mustF32(g, n), m, v, &lay, hp)
		refSync()
		fn(sp, append([]float32(nil), g...), sm, sv, hp)
		s := tol(&device.Ops.AdamWState, n)
		var f *Failure
		for _, o := range []struct {
			name string
			got  []float32
			want []float64
		}{{"m", sm, f64(m.F32())}, {"v", sv, f64(v.F32())}, {"p", sp, f64(master.F32())}} {
			if f = compare(o.name, o.got, o.want, nil, s); f != nil {
				f.label = label{format: "n=%d, step %d", args: []any{n, step}}
				break
			}
		}
		if f != nil {
			got := append(append(append([]float32(nil), sm...), sv...), sp...)
			want := append(append(f64(m.F32()), f64(v.F32())...), f64(master.F32())...)
			f.Hint = diagnose(got, want, 0, append(adamMistakes(before, f64(g), hp),
				mistake{"empty", func() []float64 { return append(append(before[1], before[2]...), before[0]...) }}))
			// sm, sv, sp were updated from the student's own previous
			// state; from step 2 on the models start from the reference's.
			return f
		}
		copy(sp, master.F32())
		copy(sm, m.F32())
		copy(sv, v.F32())
	}
	return nil
}

// adamModel is one AdamW step in float64 from state (p, m, v) with a
// mistake: "biascorr", "l2", "epssqrt", "square" (|g| for g·g), "decaylr"
// (decay not scaled by lr); it returns m, v, p.
func adamModel(st [3][]float64, g []float64, hp Hyper, mistake string) []float64 {
	n := len(g)
	p, m, v := append([]float64(nil), st[0]...), append([]float64(nil), st[1]...), append([]float64(nil), st[2]...)
	b1, b2, lr, wd, eps := float64(hp.Beta1), float64(hp.Beta2), float64(hp.LR), float64(hp.WeightDecay), float64(hp.Eps)
	for i := range n {
		gi := g[i]
		if mistake == "l2" {
			gi += wd * p[i]
		}
		m[i] = b1*m[i] + (1-b1)*gi
		sq := gi * gi
		if mistake == "square" {
			sq = math.Abs(gi)
		}
		v[i] = b2*v[i] + (1-b2)*sq
		mh, vh := m[i]/(1-math.Pow(b1, float64(hp.Step))), v[i]/(1-math.Pow(b2, float64(hp.Step)))
		if mistake == "biascorr" {
			mh, vh = m[i], v[i]
		}
		den := math.Sqrt(vh) + eps
		if mistake == "epssqrt" {
			den = math.Sqrt(vh + eps)
		}
		switch mistake {
		case "l2":
		case "decaylr":
			p[i] -= wd * p[i]
		default:
			p[i] -= lr * wd * p[i]
		}
		p[i] -= lr * mh / den
	}
	return append(append(m, v...), p...)
}

func adamMistakes(st [3][]float64, g []float64, hp Hyper) []mistake {
	var ms []mistake
	for _, h := range []string{"biascorr", "l2", "epssqrt", "square", "decaylr"} {
		ms = append(ms, mistake{h, func() []float64 { return adamModel(st, g, hp, h) }})
	}
	return ms
}

// scalerSteps is the sequence of finite/overflow steps ScalerUpdate runs,
// with GrowthInterval 3: growth, an overflow mid-count, two in a row, and
// growth again.
var scalerSteps = []bool{true, true, true, true, false, true, true, false, false, true, true, true, true}

// ScalerUpdate is the exercise of fn: a GradScaler (GrowthInterval 3) over
// a sequence of finite and overflowing steps, its skip, Scale and
// GoodSteps after each against amp.GradScaler.Update.
func ScalerUpdate(fn ScalerUpdateFunc) Exercise {
	return Exercise{Name: "grad-scaler", cases: []testCase{{what: label{format: "%d steps", args: []any{len(scalerSteps)}}, run: func() *Failure {
		want, got := newScaler(), newScaler()
		for k, finite := range scalerSteps {
			before := *want
			ws := want.Update(finite)
			gs := fn(got, finite)
			var f *Failure
			switch {
			case gs != ws:
				f = &Failure{Output: "skip", Got: b2f(gs), Want: b2f(ws)}
			case got.Scale != want.Scale:
				f = &Failure{Output: "Scale", Got: float64(got.Scale), Want: float64(want.Scale)}
			case got.GoodSteps != want.GoodSteps:
				f = &Failure{Output: "GoodSteps", Got: float64(got.GoodSteps), Want: float64(want.GoodSteps)}
			}
			if f != nil {
				f.Err = math.Abs(f.Got - f.Want)
				f.label = label{format: "step %d (finite gradients)", args: []any{k + 1}}
				if !finite {
					f.label.format = "step %d (an overflow)"
				}
				f.Hint = scalerHint(before, finite, gs, got)
				return f
			}
			// The next step starts from the reference's state.
			*got = *want
		}
		return nil
	}}}}
}

// scalerModel is GradScaler.Update from state s with a mistake: "noskip",
// "nobackoff", "growth" (variant 0 one step late, 1 one step early),
// "resetgood" (variant 0 not after an overflow, 1 not after growth).
func scalerModel(s amp.GradScaler, finite bool, mistake string, variant int) (bool, amp.GradScaler) {
	if !finite {
		if mistake != "nobackoff" {
			s.Scale *= s.BackoffFactor
		}
		if mistake != "resetgood" || variant != 0 {
			s.GoodSteps = 0
		}
		return mistake != "noskip", s
	}
	s.GoodSteps++
	limit := s.GrowthInterval
	if mistake == "growth" {
		limit += 1 - 2*variant
	}
	if s.GoodSteps >= limit {
		s.Scale *= s.GrowthFactor
		if mistake != "resetgood" || variant != 1 {
			s.GoodSteps = 0
		}
	}
	return false, s
}

// scalerHint is the mistake whose update from before gives what the
// student's gave (skip and the scaler got), "" when none does.
func scalerHint(before amp.GradScaler, finite, skip bool, got *amp.GradScaler) string {
	if !skip && got.Scale == before.Scale && got.GoodSteps == before.GoodSteps {
		return "empty"
	}
	for _, h := range []string{"noskip", "nobackoff", "growth", "resetgood"} {
		for variant := range 2 {
			ms, m := scalerModel(before, finite, h, variant)
			if ms == skip && m.Scale == got.Scale && m.GoodSteps == got.GoodSteps {
				return h
			}
		}
	}
	return ""
}

func newScaler() *amp.GradScaler {
	s := amp.NewGradScaler(true)
	s.GrowthInterval = 3
	return s
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
