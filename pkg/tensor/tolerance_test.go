package tensor

import (
	"math"
	"testing"
)

// TestCloseSum: an element of a long fp32 sum whose terms cancel (the
// H200's dweight of LayerNormBackward: -0.0605839 against -0.0605859, one
// ulp of the partial sums' 16) fails Close's element-wise atol and passes
// CloseSum at the output's scale; a wrong element still fails both.
func TestCloseSum(t *testing.T) {
	want := []float64{-0.0605858564, 12.5, -9.75, 3.0}
	got := []float64{-0.0605839491, 12.5, -9.75, 3.0}
	if Close(got, want, F32, 1.0625) == nil {
		t.Error("Close passed a 1.9e-6 error on -0.06 at scale 1.06 (atol 1.06e-6)")
	}
	if err := CloseSum(got, want, F32, 1.0625, 8.3); err != nil {
		t.Errorf("CloseSum at the output's RMS 8.3: %v", err)
	}
	got[0] = -0.0615
	if CloseSum(got, want, F32, 1.0625, 8.3) == nil {
		t.Error("CloseSum passed an error of 9e-4")
	}
	if err := CloseSum(want, want, F32, 1, 0); err != nil {
		t.Errorf("CloseSum of equal slices: %v", err)
	}
}

// TestCloseFloor: the floor is added to every element's tolerance,
// absolutely (an error of 0.02 on 0.001 passes a floor of 0.03 and fails
// one of 0.01); a negative floor counts as none; NaN still fails.
func TestCloseFloor(t *testing.T) {
	want := []float64{0.001, 1, -2}
	got := []float64{0.021, 1, -2}
	if err := CloseFloor(got, want, BF16, 1, 1, 0.03); err != nil {
		t.Errorf("floor 0.03: %v", err)
	}
	if CloseFloor(got, want, BF16, 1, 1, 0.01) == nil {
		t.Error("floor 0.01 passed an error of 0.02 (atol 1.6e-3)")
	}
	if CloseFloor(got, want, BF16, 1, 1, -5) == nil {
		t.Error("a negative floor widened the tolerance")
	}
	got[0] = math.NaN()
	if CloseFloor(got, want, BF16, 1, 1, 100) == nil {
		t.Error("a NaN passed under a floor")
	}
}
