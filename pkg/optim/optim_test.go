package optim

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/device"
	"github.com/druto/druto/pkg/device/cpu"
	"github.com/druto/druto/pkg/tensor"
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

// plainDevice hides the CPU device's optional interfaces (MomentsBF16).
type plainDevice struct{ device.Device }

// TestNewAdamWMoments: bf16 moments are allocated as BF16 on a device that
// keeps them, and refused (ErrMoments, saying what to use) on one that
// does not; f16 moments are refused.
func TestNewAdamWMoments(t *testing.T) {
	l := &tensor.Layout{}
	l.Add("w", true, 8)
	d := cpu.New(device.Options{Fused: true})
	o, err := NewAdamWMoments(d, l, Defaults(10), tensor.BF16, 3)
	if err != nil || o.M.DType != tensor.BF16 || o.V.DType != tensor.BF16 || o.Moments() != tensor.BF16 {
		t.Fatalf("bf16 moments on the CPU: %v, %+v", err, o)
	}
	o.Close()
	if _, err := NewAdamWMoments(plainDevice{d}, l, Defaults(10), tensor.BF16, 3); !errors.Is(err, ErrMoments) || !strings.Contains(err.Error(), "--adam-state fp32") {
		t.Errorf("bf16 moments on a device without MomentsBF16: %v", err)
	}
	if _, err := NewAdamWMoments(d, l, Defaults(10), tensor.F16, 3); !errors.Is(err, ErrMoments) {
		t.Errorf("f16 moments: %v", err)
	}
}
