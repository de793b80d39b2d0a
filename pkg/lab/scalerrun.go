package lab

// scalerrun.go: lab 3's figure data: the student's GradScaler update and
// druto's side by side over a simulated fp16 run.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/druto/druto/pkg/amp"
)

// The simulated run: ScalerSteps steps whose largest gradient is about
// 2^-4 (log-normal, σ 0.35), with a loss spike of 2^7 times that over
// steps 281 to 290; a step overflows when its largest gradient times the
// scale in use passes fp16's largest value. GrowthInterval is 25 instead of
// torch's 2000, so that growth shows within the run.
const (
	ScalerSteps          = 600
	scalerRunInterval    = 25
	fp16Max              = 65504
	spikeFirst, spikeEnd = 281, 290
)

// ScalerTrace is one scaler's simulated run: the loss scale in use at each
// step (Scale[k] is step k+1's) and the steps it skipped (1-based).
type ScalerTrace struct {
	Label   string // in the notebook's language
	Scale   []float64
	Skipped []int
}

// SimulateScaler runs fn and amp.GradScaler.Update side by side over the
// simulated run, each scaler seeing the overflows its own scale causes, and
// returns both traces (druto's first) and a one-line summary in lang: how
// many steps each skipped and the first step where they differ. A panic
// in fn or a call that does not return within the check's timeout ends
// the student's trace there, and the summary says so.
func SimulateScaler(lang string, fn ScalerUpdateFunc) (ref, yours ScalerTrace, summary string) {
	rng := rand.New(rand.NewPCG(3, 36))
	grads := make([]float64, ScalerSteps)
	for k := range grads {
		grads[k] = math.Exp2(-4) * math.Exp(0.35*rng.NormFloat64())
		if k+1 >= spikeFirst && k+1 <= spikeEnd {
			grads[k] *= 128
		}
	}
	runScaler(&ref, grads, func(s *amp.GradScaler, finite bool) bool { return s.Update(finite) })
	ref.Label = msg(lang, "druto's GradScaler")
	defer func() { yours.Label = msg(lang, "your ScalerUpdate") }()
	type outcome struct {
		tr    ScalerTrace
		panic string
	}
	done := make(chan outcome, 1)
	var tr ScalerTrace
	go func() {
		o := outcome{}
		defer func() {
			if r := recover(); r != nil {
				o.panic = fmt.Sprint(r) + panicSite()
			}
			o.tr = tr
			done <- o
		}()
		runScaler(&tr, grads, fn)
	}()
	select {
	case o := <-done:
		yours = o.tr
		if o.panic != "" {
			what := label{format: "step %d (finite gradients)", args: []any{len(yours.Scale)}}
			return ref, yours, msg(lang, "Your function panicked (%s): %s.", what.in(lang), o.panic)
		}
	case <-time.After(timeout()):
		return ref, ScalerTrace{}, msg(lang, "Your function did not return within %.0f s: is there a loop that never ends?", timeout().Seconds())
	}
	first := 0
	for k := range ref.Scale {
		if k >= len(yours.Scale) || yours.Scale[k] != ref.Scale[k] {
			first = k + 1
			break
		}
	}
	if first == 0 && len(yours.Skipped) != len(ref.Skipped) {
		first = len(ref.Scale) // the same scales but a skip more or less: the last step's
	}
	if first == 0 {
		return ref, yours, msg(lang, "Your scaler skipped %d of %d steps, as druto's did; the two agree at every step.", len(yours.Skipped), ScalerSteps)
	}
	got := math.NaN()
	if first <= len(yours.Scale) {
		got = yours.Scale[first-1]
	}
	return ref, yours, msg(lang, "Your scaler skipped %d of %d steps, druto's %d; they first differ at step %d, where your scale is %g and druto's %g.",
		len(yours.Skipped), ScalerSteps, len(ref.Skipped), first, got, ref.Scale[first-1])
}

// runScaler steps a GradScaler (torch's defaults, GrowthInterval
// scalerRunInterval) through the run with update, appending to *tr as it
// goes so that a panic in update leaves the steps done so far.
func runScaler(tr *ScalerTrace, grads []float64, update ScalerUpdateFunc) {
	s := amp.NewGradScaler(true)
	s.GrowthInterval = scalerRunInterval
	for k, g := range grads {
		scale := float64(s.Scale)
		tr.Scale = append(tr.Scale, scale)
		finite := g*scale <= fp16Max
		if update(s, finite) {
			tr.Skipped = append(tr.Skipped, k+1)
		}
		if !(s.Scale > 0) || math.IsInf(float64(s.Scale), 0) {
			break // a scale of 0, a negative one or ±Inf: nothing more to draw
		}
	}
}
