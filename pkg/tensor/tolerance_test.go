package tensor

import "testing"

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
