package optim

import (
	"math"
	"testing"
)

func TestSchedule(t *testing.T) {
	c := Defaults(100)
	c.LR, c.Warmup = 1e-3, 10
	if got := c.LRAt(5); math.Abs(float64(got)-5e-4) > 1e-9 {
		t.Errorf("warm-up step 5: %g", got)
	}
	if got := c.LRAt(10); math.Abs(float64(got)-1e-3) > 1e-9 {
		t.Errorf("end of warm-up: %g", got)
	}
	if got := c.LRAt(100); math.Abs(float64(got)-1e-4) > 1e-9 {
		t.Errorf("end of cosine: %g, want LR·MinLRFrac", got)
	}
	mid := c.LRAt(55) // halfway through the cosine: the mean of max and min
	if math.Abs(float64(mid)-5.5e-4) > 1e-8 {
		t.Errorf("cosine midpoint %g", mid)
	}
	for s := 11; s < 100; s++ {
		if c.LRAt(s+1) > c.LRAt(s) {
			t.Fatalf("not decreasing at %d", s)
		}
	}
}

func TestClipAndValidate(t *testing.T) {
	c := Defaults(10)
	if c.ClipFactor(0.5) != 1 || c.ClipFactor(4) != 0.25 {
		t.Error("clip factor")
	}
	c.ClipNorm = 0
	if c.ClipFactor(100) != 1 {
		t.Error("clipping off must not scale")
	}
	for _, bad := range []Config{{LR: -1, Steps: 1}, {LR: 1, Steps: 0}, {LR: 1, Steps: 1, Beta1: 1}, {LR: 1, Steps: 1, Warmup: -1}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if Defaults(5).Validate() != nil {
		t.Error("defaults rejected")
	}
}
