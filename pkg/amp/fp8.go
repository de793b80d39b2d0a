package amp

// fp8.go: per-tensor scaling for FP8 GEMM operands (issue 38). A tensor x
// is stored as q = fp8(x·scale) and read back as q/scale; the scale puts
// the tensor's largest magnitude (its amax) just under the format's largest
// value, so that the 3 (E4M3) or 2 (E5M2) mantissa bits are spent on the
// tensor's own range instead of flushing small values to zero.

import (
	"fmt"
	"math"

	"github.com/druto/druto/pkg/tensor"
)

// FP8Recipe says how the scales of FP8 operands are chosen.
type FP8Recipe struct {
	// Current selects current scaling (Transformer Engine's
	// Float8CurrentScaling): the scale of a tensor's cast comes from its
	// own amax, which costs a pass over the tensor before the cast. false,
	// the zero value, is delayed scaling (Transformer Engine's
	// DelayedScaling): the scale comes from the amaxes of the previous
	// History steps, so the cast needs no pass over the tensor first and
	// happens in the kernel that produces it; the tensor's own amax is
	// computed on the way and enters the history afterwards.
	Current bool
	// History is the amax window of delayed scaling, in steps (Transformer
	// Engine's amax_history_len, default 1024; at least 1 unless Current);
	// the scale follows the window's maximum (amax_compute_algo "max").
	History int
	// Margin leaves 2^Margin of headroom: amax maps to max/2^Margin
	// (Transformer Engine's margin, default 0).
	Margin int
	// Head runs the LM head's forward product (the logits, ln_f's output
	// times wteᵀ) in FP8 as well, both operands e4m3, bf16 logits, and its
	// input gradient dx = dlogits·wte from an e5m2 copy of the logits'
	// gradient that the classifier writes in the same pass
	// (device.FP8's CrossEntropyFP8) and wte's transposed e4m3 copy, and
	// its weight gradient from that e5m2 gradient transposed
	// (device.FP8's TransposeFP8) and ln_f's transposed e4m3 output
	// (pkg/gpt's DRUTO_FP8_HEAD_DW=bf16 keeps that product in bf16, and
	// with it the classifier's bf16 gradient over the logits, which the
	// FP8 products do not read and the classifier then does not write).
	Head bool
}

// DefaultFP8Recipe is Transformer Engine's default: delayed scaling over a
// window of 1024 steps, margin 0.
func DefaultFP8Recipe() FP8Recipe { return FP8Recipe{History: 1024} }

// String describes the recipe, e.g. "delayed, history 1024, margin 0,
// head" (head: Head is set).
func (r FP8Recipe) String() string {
	s := "current"
	if !r.Current {
		s = fmt.Sprintf("delayed, history %d", r.History)
	}
	s += fmt.Sprintf(", margin %d", r.Margin)
	if r.Head {
		s += ", head"
	}
	return s
}

// Validate checks the recipe.
func (r FP8Recipe) Validate() error {
	switch {
	case !r.Current && r.History < 1:
		return fmt.Errorf("amp: fp8 amax history of %d steps must be at least 1", r.History)
	case r.Margin < 0 || r.Margin > 64:
		return fmt.Errorf("amp: fp8 scaling margin %d must be in [0, 64]", r.Margin)
	}
	return nil
}

// FP8ScaleFor returns the scale that maps amax to the format's max/2^margin,
// Transformer Engine's rule: scale = (max / 2^margin) / amax. The rule's
// edge cases keep prev: amax 0 (an all-zero tensor says nothing about the
// range) and a non-finite amax (an overflow upstream; ok is false so that
// the caller counts it). A scale that would overflow float32 (amax below
// max·2^-128) is clamped to the largest float32.
func FP8ScaleFor(f tensor.FP8Format, amax float32, margin int, prev float32) (scale float32, ok bool) {
	a := float64(amax)
	switch {
	case math.IsNaN(a) || math.IsInf(a, 0):
		return prev, false
	case a <= 0:
		return prev, true
	}
	s := float64(f.Max()) / math.Ldexp(1, margin) / a
	return float32(min(s, math.MaxFloat32)), true
}

// Amax returns max |x| over x; NaN if any element is NaN (so that a NaN is
// never hidden by a larger finite value).
func Amax(x []float32) float32 {
	var m float32
	for _, v := range x {
		if v != v {
			return v
		}
		m = max(m, float32(math.Abs(float64(v))))
	}
	return m
}

// FP8Stats counts what scaled casts lost, for the metrics log.
type FP8Stats struct {
	Saturated int64 // values clipped to ±max (they would have overflowed)
	Flushed   int64 // nonzero values that rounded to zero
	NaN       int64 // NaN values cast (kept NaN)
	// BadAmax counts amaxes that were Inf or NaN: overflow events, after
	// which the previous scale was kept (and, under delayed scaling, the
	// amax left out of the history).
	BadAmax int64
}

func (s *FP8Stats) add(c tensor.FP8Counts) {
	s.Saturated += int64(c.Saturated)
	s.Flushed += int64(c.Flushed)
	s.NaN += int64(c.NaN)
}

// FP8Scaler holds one tensor's scaling state: its format, the recipe, the
// scale its next cast uses, the amax history (delayed scaling) and the
// counts of what its casts lost. The zero value is not usable: use
// NewFP8Scaler.
type FP8Scaler struct {
	Format tensor.FP8Format
	Recipe FP8Recipe
	Scale  float32 // the scale the next cast uses (1 before any amax)
	Stats  FP8Stats

	history []float32 // ring of the last Recipe.History amaxes (delayed)
	next    int       // where the next amax goes
	filled  int       // how many slots hold an amax
}

// NewFP8Scaler returns the scaling state of a tensor cast to format f.
func NewFP8Scaler(f tensor.FP8Format, r FP8Recipe) (*FP8Scaler, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	s := &FP8Scaler{Format: f, Recipe: r, Scale: 1}
	if !r.Current {
		s.history = make([]float32, r.History)
	}
	return s, nil
}

// Update records a tensor's amax and sets the scale of the next cast: from
// the history's maximum under delayed scaling, from amax alone under
// current scaling. A non-finite amax counts in Stats.BadAmax and changes
// nothing else; an amax of 0 enters the history but alone keeps the scale.
func (s *FP8Scaler) Update(amax float32) {
	if amax != amax || math.IsInf(float64(amax), 0) {
		s.Stats.BadAmax++
		return
	}
	if !s.Recipe.Current {
		s.history[s.next] = amax
		s.next = (s.next + 1) % len(s.history)
		s.filled = min(s.filled+1, len(s.history))
		amax = 0
		for _, a := range s.history[:s.filled] {
			amax = max(amax, a)
		}
	}
	s.Scale, _ = FP8ScaleFor(s.Format, amax, s.Recipe.Margin, s.Scale)
}

// Quantize casts src·scale to dst in the scaler's format and returns the
// scale used (dequantize with its inverse). Under current scaling the scale
// comes from src's own amax first; under delayed scaling the cast uses the
// scale the history gave, and src's amax then enters the history, as a
// kernel that casts and reduces in one pass does. What the cast lost is
// added to Stats.
func (s *FP8Scaler) Quantize(dst []uint8, src []float32) (scale float32) {
	amax := Amax(src)
	if s.Recipe.Current {
		s.Update(amax)
	}
	scale = s.Scale
	s.Stats.add(tensor.QuantizeFP8(dst, src, scale, s.Format))
	if !s.Recipe.Current {
		s.Update(amax)
	}
	return scale
}
