package amp

import (
	"math"
	"testing"

	"github.com/druto/druto/pkg/device/devicetest"
	"github.com/druto/druto/pkg/tensor"
)

// TestFP8ScalesMatchScalers: UpdateFP8Scales on K tensors equals K
// FP8Scalers fed the same amaxes, bit for bit, every step, for delayed
// scaling with windows shorter and longer than the run (the ring wraps),
// current scaling, margins and both formats; amax is cleared each step and
// inv is 1/scale.
func TestFP8ScalesMatchScalers(t *testing.T) {
	formats := []tensor.FP8Format{tensor.E4M3, tensor.E5M2, tensor.E4M3, tensor.E5M2, tensor.E4M3}
	for _, r := range []FP8Recipe{
		{History: 1}, {History: 3}, {History: 16, Margin: 2},
		{History: 1024}, {Current: true}, {Current: true, Margin: 64},
	} {
		s, err := NewFP8Scales(formats, r)
		if err != nil {
			t.Fatal(err)
		}
		ref := make([]*FP8Scaler, len(formats))
		for k, f := range formats {
			if ref[k], err = NewFP8Scaler(f, r); err != nil {
				t.Fatal(err)
			}
		}
		const steps = 200
		seq := devicetest.FP8Amaxes(uint64(7+r.History+r.Margin), steps, len(formats))
		bad := 0
		for step := range steps {
			for k := range formats {
				s.SetPending(k, seq[step*len(formats)+k], uint32(step*1000+k)<<20)
			}
			s.Update()
			for k, sc := range ref {
				sc.Update(seq[step*len(formats)+k])
				under := min(int64(uint32(step*1000+k)<<20), math.MaxInt32)
				if s.Under(k) != under || s.PendingUnder(k) != 0 {
					t.Fatalf("%+v step %d tensor %d: underflows %d (pending %d), want %d", r, step, k, s.Under(k), s.PendingUnder(k), under)
				}
				if s.Scale(k) != sc.Scale || s.Bad(k) != sc.Stats.BadAmax || s.Amax(k) != 0 || s.Inv(k) != 1/sc.Scale {
					if bad++; bad <= 5 {
						t.Errorf("%+v step %d tensor %d: scale %g inv %g bad %d amax %g; scaler scale %g bad %d",
							r, step, k, s.Scale(k), s.Inv(k), s.Bad(k), s.Amax(k), sc.Scale, sc.Stats.BadAmax)
					}
				}
			}
		}
		var nbad int64
		for k := range formats {
			nbad += s.Bad(k)
		}
		if nbad == 0 {
			t.Errorf("%+v: no non-finite amax in the sequence; the test lost a branch", r)
		}
	}
	if _, err := NewFP8Scales([]tensor.FP8Format{9}, DefaultFP8Recipe()); err == nil {
		t.Error("an unknown format accepted")
	}
	if _, err := NewFP8Scales(nil, FP8Recipe{}); err == nil {
		t.Error("a delayed recipe with no history accepted")
	}
}
