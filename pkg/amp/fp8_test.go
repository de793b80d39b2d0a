package amp

import (
	"math"
	"strings"
	"testing"

	"github.com/druto/druto/pkg/tensor"
)

func TestFP8ScaleFor(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, c := range []struct {
		f      tensor.FP8Format
		amax   float32
		margin int
		want   float32
		ok     bool
	}{
		{tensor.E4M3, 448, 0, 1, true},
		{tensor.E4M3, 2, 0, 224, true},
		{tensor.E4M3, 2, 1, 112, true}, // 2^margin of headroom
		{tensor.E5M2, 57344e-3, 0, 1e3, true},
		{tensor.E4M3, 0, 0, 7, true},                   // an all-zero tensor keeps the scale
		{tensor.E4M3, inf, 0, 7, false},                // overflow upstream: keep, report
		{tensor.E4M3, nan, 0, 7, false},                //
		{tensor.E4M3, 1e-45, 0, math.MaxFloat32, true}, // clamped, not Inf
	} {
		got, ok := FP8ScaleFor(c.f, c.amax, c.margin, 7)
		if math.Abs(float64(got-c.want)) > 1e-6*float64(c.want) || ok != c.ok {
			t.Errorf("FP8ScaleFor(%s, %g, %d, 7) = %g %v, want %g %v", c.f, c.amax, c.margin, got, ok, c.want, c.ok)
		}
	}
}

// TestFP8Delayed: the scale follows the maximum of the last History
// amaxes, one step late, and a bad amax changes nothing but the count.
func TestFP8Delayed(t *testing.T) {
	s, err := NewFP8Scaler(tensor.E4M3, FP8Recipe{History: 3})
	if err != nil {
		t.Fatal(err)
	}
	q := make([]uint8, 2)
	// The first cast uses scale 1 (no history yet): 1000 saturates.
	if sc := s.Quantize(q, []float32{1000, 1}); sc != 1 || s.Stats.Saturated != 1 {
		t.Fatalf("first cast: scale %g, %+v", sc, s.Stats)
	}
	if s.Scale != 448.0/1000 {
		t.Fatalf("after amax 1000: scale %g", s.Scale)
	}
	for _, a := range []float32{10, 20, 5} { // the window is now 10, 20, 5: 1000 left it
		s.Update(a)
	}
	if s.Scale != 448.0/20 {
		t.Errorf("window 10,20,5: scale %g, want %g", s.Scale, 448.0/20)
	}
	s.Update(float32(math.Inf(1)))
	s.Update(float32(math.NaN()))
	if s.Scale != 448.0/20 || s.Stats.BadAmax != 2 || s.filled != 3 {
		t.Errorf("after Inf and NaN amaxes: scale %g, %+v, %d in history", s.Scale, s.Stats, s.filled)
	}
	s.Update(0)
	s.Update(0) // window 5, 0, 0
	if s.Scale != 448.0/5 {
		t.Errorf("window 5,0,0: scale %g", s.Scale)
	}
	s.Update(0) // all zero: the scale stays
	if s.Scale != 448.0/5 {
		t.Errorf("window 0,0,0: scale %g, want it kept", s.Scale)
	}
}

// TestFP8Current: current scaling casts each tensor with its own amax, so
// nothing saturates and small tensors keep their precision.
func TestFP8Current(t *testing.T) {
	s, err := NewFP8Scaler(tensor.E5M2, FP8Recipe{Current: true, Margin: 1})
	if err != nil {
		t.Fatal(err)
	}
	src := []float32{3e-7, -1e-6, 2e-8}
	q := make([]uint8, len(src))
	sc := s.Quantize(q, src)
	if want := float32(57344.0 / 2 / 1e-6); sc != want {
		t.Errorf("scale %g, want %g", sc, want)
	}
	if s.Stats != (FP8Stats{}) {
		t.Errorf("stats %+v, want none lost", s.Stats)
	}
	back := make([]float32, len(src))
	tensor.DequantizeFP8(back, q, 1/sc, tensor.E5M2)
	for i := range src { // E5M2: half an ulp is 2^-3 relative
		if math.Abs(float64(back[i]-src[i])) > math.Abs(float64(src[i]))/8*1.0001 {
			t.Errorf("%g came back as %g", src[i], back[i])
		}
	}
	// A NaN in the tensor: an overflow event, the scale kept, NaN cast as NaN.
	s.Quantize(q, []float32{1, float32(math.NaN()), 2})
	if s.Scale != sc || s.Stats.BadAmax != 1 || s.Stats.NaN != 1 {
		t.Errorf("NaN tensor: scale %g (was %g), %+v", s.Scale, sc, s.Stats)
	}
}

func TestFP8Recipe(t *testing.T) {
	if r := DefaultFP8Recipe(); r.Current || r.History != 1024 || r.Margin != 0 || r.Validate() != nil {
		t.Errorf("default %+v", r)
	}
	if _, err := NewFP8Scaler(tensor.E4M3, FP8Recipe{}); err == nil {
		t.Error("an empty history was accepted")
	}
	if _, err := NewFP8Scaler(tensor.E4M3, FP8Recipe{Current: true, Margin: -1}); err == nil {
		t.Error("a negative margin was accepted")
	}
}

func TestFP8Policy(t *testing.T) {
	if FP8.NeedsScaler() || FP8.DType(Activation) != tensor.BF16 || FP8.DType(Master) != tensor.F32 {
		t.Error("fp8 stores what is not an FP8 GEMM operand as bf16 does")
	}
	if FP8FormatOf(Activation) != tensor.E4M3 || FP8FormatOf(Working) != tensor.E4M3 || FP8FormatOf(ActGrad) != tensor.E5M2 {
		t.Error("hybrid recipe: e4m3 forward, e5m2 gradients")
	}
	var table strings.Builder
	for _, o := range FP8.Ops() {
		table.WriteString(o.Op + ": " + o.Compute + "\n")
	}
	for _, g := range FP8GEMMs {
		if !strings.Contains(table.String(), g) {
			t.Errorf("the op table does not name the FP8 GEMM %q", g)
		}
	}
	if !strings.Contains(table.String(), "LM head matmul: bf16 inputs") {
		t.Errorf("the LM head must stay bf16:\n%s", table.String())
	}
	for _, c := range []struct {
		major, minor int
		want         bool
	}{{7, 5, false}, {8, 0, false}, {8, 6, false}, {8, 9, true}, {9, 0, true}, {10, 0, true}} {
		if FP8Hardware(c.major, c.minor) != c.want {
			t.Errorf("FP8Hardware(%d, %d) != %v", c.major, c.minor, c.want)
		}
	}
}
