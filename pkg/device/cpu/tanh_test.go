package cpu

import (
	"math"
	"testing"
)

func TestTanh32Accuracy(t *testing.T) {
	worst := 0.0
	for i := -200000; i <= 200000; i++ {
		x := float32(i) * 1e-4
		got, want := float64(tanh32(x)), math.Tanh(float64(x))
		if want == 0 {
			continue
		}
		e := math.Abs(got-want) / math.Abs(want)
		if e > worst {
			worst = e
		}
	}
	t.Logf("worst relative error %.3g", worst)
	if worst > 1e-6 {
		t.Errorf("tanh32 relative error %.3g > 1e-6", worst)
	}
}
