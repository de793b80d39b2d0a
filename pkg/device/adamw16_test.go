package device

import (
	"math"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

// TestRoundBF16SR: a value between two bf16 neighbours rounds to one of
// them, up about as often as its distance from the lower one says (the
// expectation is the value); bf16 values stay; NaN and ±Inf round as
// BF16FromF32; the same (seed, step, element) gives the same bits.
func TestRoundBF16SR(t *testing.T) {
	lo := tensor.BF16ToF32(tensor.BF16FromF32(1.5))
	for _, frac := range []float64{0.1, 0.5, 0.9} {
		x := math.Float32frombits(math.Float32bits(lo) + uint32(frac*0x10000))
		const n = 1 << 16
		up, sum := 0, 0.0
		for i := range uint64(n) {
			h := RoundBF16SR(x, SRBits(7, 3, i))
			switch h {
			case tensor.BF16FromF32(lo):
			case tensor.BF16FromF32(lo) + 1:
				up++
			default:
				t.Fatalf("%v rounded to %#x, not a neighbour", x, h)
			}
			sum += float64(tensor.BF16ToF32(h))
		}
		if got := float64(up) / n; math.Abs(got-frac) > 0.01 {
			t.Errorf("%v: rounded up %.3f of the time, want %.3f", x, got, frac)
		}
		if mean := sum / n; math.Abs(mean-float64(x)) > 1e-3*float64(x) {
			t.Errorf("%v: mean of the rounded values %v", x, mean)
		}
	}
	for _, x := range []float32{lo, 0, -2, float32(math.Inf(1)), float32(math.Inf(-1))} {
		if got := RoundBF16SR(x, 0xffff); got != tensor.BF16FromF32(x) {
			t.Errorf("RoundBF16SR(%v) = %#x, want %#x", x, got, tensor.BF16FromF32(x))
		}
	}
	if nan := tensor.BF16ToF32(RoundBF16SR(float32(math.NaN()), 0x1234)); !math.IsNaN(float64(nan)) {
		t.Errorf("NaN rounded to %v", nan)
	}
	if SRBits(1, 2, 3) != SRBits(1, 2, 3) || SRBits(1, 2, 3) == SRBits(1, 3, 3) || SRBits(1, 2, 3) == SRBits(2, 2, 3) {
		t.Errorf("SRBits is not a function of its three counters alone")
	}
}

// TestAdamWBF16Contract: a step count of 0 is refused without a state and
// taken with one; f32 moments are refused.
func TestAdamWBF16Contract(t *testing.T) {
	f, b := tensor.New(tensor.F32, 4), tensor.New(tensor.BF16, 4)
	st := tensor.New(tensor.F32, StateLen)
	if err := AdamWBF16.Check([]int{4, 0}, f, nil, f, b, b, nil); err == nil {
		t.Error("step 0 without a state passed")
	}
	if err := AdamWBF16.Check([]int{4, 0}, f, nil, f, b, b, st); err != nil {
		t.Error(err)
	}
	if err := AdamWBF16.Check([]int{4, 1}, f, nil, f, f, b, nil); err == nil {
		t.Error("f32 m passed")
	}
}
