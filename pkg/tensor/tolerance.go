package tensor

import (
	"fmt"
	"math"
)

// Tolerance returns the absolute and relative tolerances druto uses for every
// comparison of values computed in (or stored as) dtype dt against a higher
// precision reference: |got-want| <= atol + rtol*|want|. rtol is tied to the
// dtype's epsilon (F32 ~1e-5, BF16 ~1.6e-2, F16 ~2e-3); atol is rtol/10 so that
// values near zero are judged on the scale of the data, not their own size.
// scale multiplies both, for results that pass through k rounding steps.
func Tolerance(dt DType) (atol, rtol float64) {
	var r float64
	switch dt {
	case F32:
		r = 1e-5
	case BF16:
		r = 2 * BF16.Eps() // 1.56e-2
	case F16:
		r = 2 * F16.Eps() // 1.95e-3
	default:
		r = 0
	}
	return r / 10, r
}

// Mismatch describes the worst element of a failed comparison.
type Mismatch struct {
	Index     int
	Got, Want float64
	Count     int // elements out of tolerance
	N         int // elements compared
	Atol      float64
	Rtol      float64
}

// Error formats the mismatch for a test log.
func (m *Mismatch) Error() string {
	return fmt.Sprintf("%d of %d elements out of tolerance (atol %.2g, rtol %.2g); worst at %d: got %.9g want %.9g",
		m.Count, m.N, m.Atol, m.Rtol, m.Index, m.Got, m.Want)
}

// Close compares got with want under the tolerance of dt scaled by scale
// (1 for a single op). It returns nil or a *Mismatch naming the worst element.
// NaN in got fails unless want is NaN there too; an infinite want is met
// only by the same infinity; NaN or Inf in got where want is finite fails.
// (Both NaN passes, for ops whose reference result is NaN: callers that
// poison outputs with NaN check separately that every element was written.)
func Close(got, want []float64, dt DType, scale float64) error {
	return closeScaled(got, want, dt, scale, 1, 0)
}

// CloseSum is Close for the elements of a long sum (a gradient summed over
// rows): its absolute tolerance is also scaled by absScale (at least 1),
// the magnitude of what was summed, since an element whose terms cancel
// keeps the rounding of its partial sums, not a share of its small value.
func CloseSum(got, want []float64, dt DType, scale, absScale float64) error {
	return closeScaled(got, want, dt, scale, max(1, absScale), 0)
}

// CloseFloor is CloseSum with an absolute floor added to every element's
// tolerance: |got-want| <= floor + scale·(atol·absScale + rtol·|want|). The
// floor is a bound on the absolute error an op's rounding steps can leave
// at the scale of its inputs (a weighted average of values rounded to dt,
// a cancellation multiplied by a large factor), where the output's own
// size says nothing about it.
func CloseFloor(got, want []float64, dt DType, scale, absScale, floor float64) error {
	return closeScaled(got, want, dt, scale, max(1, absScale), max(0, floor))
}

func closeScaled(got, want []float64, dt DType, scale, absScale, floor float64) error {
	atol, rtol := Tolerance(dt)
	atol = atol*scale*absScale + floor
	rtol *= scale
	if len(got) != len(want) {
		return fmt.Errorf("%w: %d values compared with %d", ErrShape, len(got), len(want))
	}
	var m *Mismatch
	worst := -1.0
	for i := range got {
		g, w := got[i], want[i]
		d := math.Abs(g - w)
		lim := atol + rtol*math.Abs(w)
		var bad bool
		switch {
		case math.IsNaN(w) || math.IsNaN(g):
			bad = !(math.IsNaN(w) && math.IsNaN(g))
		case math.IsInf(w, 0) || math.IsInf(g, 0):
			bad = g != w
		default:
			bad = d > lim
		}
		if !bad {
			continue
		}
		if m == nil {
			m = &Mismatch{N: len(got), Atol: atol, Rtol: rtol}
		}
		m.Count++
		excess := d / lim
		if math.IsNaN(excess) || excess > worst {
			worst = excess
			if math.IsNaN(excess) {
				worst = math.Inf(1)
			}
			m.Index, m.Got, m.Want = i, g, w
		}
	}
	if m != nil {
		return m
	}
	return nil
}

// CloseF32 is Close for float32 slices.
func CloseF32(got, want []float32, dt DType, scale float64) error {
	return Close(widen(got), widen(want), dt, scale)
}

// CloseSumF32 is CloseSum for float32 slices.
func CloseSumF32(got, want []float32, dt DType, scale, absScale float64) error {
	return CloseSum(widen(got), widen(want), dt, scale, absScale)
}

// CloseFloorF32 is CloseFloor for float32 slices.
func CloseFloorF32(got, want []float32, dt DType, scale, absScale, floor float64) error {
	return CloseFloor(widen(got), widen(want), dt, scale, absScale, floor)
}

// widen returns v as float64s.
func widen(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// RelErr returns ||got-want|| / ||want|| (Euclidean norms), the summary
// figure detect and the GPU tests print next to the element-wise verdict.
// Slices of different lengths, and any NaN, give +Inf, so that a check
// "RelErr(...) > limit" can never pass on them.
func RelErr(got, want []float32) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	var num, den float64
	for i := range got {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	r := math.Sqrt(num / den)
	if den == 0 {
		r = math.Sqrt(num)
	}
	if math.IsNaN(r) {
		return math.Inf(1)
	}
	return r
}
