package tensor

import (
	"math"
	"testing"
)

// f16Ref rounds f to binary16 by exhaustive search over the float64 values
// of all finite f16 bit patterns: slow, obviously correct, ties to even.
func f16Ref(f float32) uint16 {
	if f != f {
		return 0x7e00
	}
	x := float64(f)
	best, bestD := uint16(0), math.Inf(1)
	for h := 0; h < 0x7c00; h++ {
		v := float64(F16ToF32(uint16(h)))
		d := math.Abs(math.Abs(x) - v)
		if d < bestD || (d == bestD && h&1 == 0) {
			best, bestD = uint16(h), d
		}
	}
	// Beyond the largest finite value by half an ulp or more: infinity.
	if math.Abs(x) >= 65520 {
		best = 0x7c00
	}
	if math.Signbit(x) {
		best |= 0x8000
	}
	return best
}

func TestF16Edges(t *testing.T) {
	cases := []struct {
		in   float32
		want uint16
	}{
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3c00},
		{-2, 0xc000},
		{65504, 0x7bff},                  // largest finite
		{65519, 0x7bff},                  // rounds down, below the halfway point
		{65520, 0x7c00},                  // halfway to 2^16: ties to even -> overflow to inf
		{1e6, 0x7c00},                    // overflow
		{float32(math.Inf(1)), 0x7c00},   //
		{float32(math.Inf(-1)), 0xfc00},  //
		{6.103515625e-05, 0x0400},        // smallest normal 2^-14
		{5.960464477539063e-08, 0x0001},  // smallest subnormal 2^-24
		{2.9802322387695312e-08, 0x0000}, // 2^-25: halfway to the smallest subnormal, ties to even (0)
		{4.470348358154297e-08, 0x0001},  // 1.5·2^-25 rounds up
		{8.940696716308594e-08, 0x0002},  // 1.5·2^-24: tie between 1 and 2 -> even (2)
		{1e-10, 0x0000},                  // underflow
		{1.0009765625, 0x3c01},           // 1 + 2^-10
		{1.00048828125, 0x3c00},          // 1 + 2^-11: tie -> even (1.0)
		{1.00146484375, 0x3c02},          // 1 + 3·2^-11: tie -> even (1+2^-9)
		{6.097555160522461e-05, 0x03ff},  // largest subnormal, exact
		{6.100535392761230e-05, 0x0400},  // halfway between it and 2^-14: ties to even, into the normals
	}
	for _, c := range cases {
		if got := F16FromF32(c.in); got != c.want {
			t.Errorf("F16FromF32(%g) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
	if h := F16FromF32(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("NaN -> %#04x, want a NaN pattern", h)
	}
	if v := F16ToF32(0x7e00); !math.IsNaN(float64(v)) {
		t.Errorf("F16ToF32(NaN) = %g", v)
	}
}

// TestF16RoundTrip: every f16 pattern widens and narrows back to itself.
func TestF16RoundTrip(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := F16ToF32(uint16(h))
		if f != f {
			continue
		}
		if got := F16FromF32(f); got != uint16(h) {
			t.Fatalf("%#04x -> %g -> %#04x", h, f, got)
		}
	}
}

// TestF16AgainstReference compares with the exhaustive-search rounding on
// values spread over the whole range, including midpoints between patterns.
func TestF16AgainstReference(t *testing.T) {
	rng := NewRNG(7)
	var vals []float32
	for h := 0; h < 0x7c00; h += 97 { // patterns and the midpoints next to them
		a := float64(F16ToF32(uint16(h)))
		b := float64(F16ToF32(uint16(h + 1)))
		vals = append(vals, float32(a), float32((a+b)/2), float32(a+(b-a)*0.49), float32(a+(b-a)*0.51))
	}
	for i := 0; i < 300; i++ {
		vals = append(vals, float32((rng.Float64()*2-1)*math.Pow(2, float64(rng.Intn(44)-28))))
	}
	for _, v := range vals {
		if got, want := F16FromF32(v), f16Ref(v); got != want {
			t.Errorf("F16FromF32(%.10g) = %#04x, reference %#04x", v, got, want)
		}
	}
}

func TestBF16Edges(t *testing.T) {
	cases := []struct {
		in   uint32 // float32 bits
		want uint16
	}{
		{0x3f800000, 0x3f80}, // 1
		{0x3f808000, 0x3f80}, // 1 + half ulp: tie -> even (down)
		{0x3f818000, 0x3f82}, // 1 + 3 half ulps: tie -> even (up)
		{0x3f808001, 0x3f81}, // just above the tie: up
		{0x3f807fff, 0x3f80}, // just below: down
		{0x7f7fffff, 0x7f80}, // max float32 rounds to inf
		{0x7f800000, 0x7f80}, // +inf
		{0xff800000, 0xff80}, // -inf
		{0x00000001, 0x0000}, // smallest float32 subnormal rounds to 0
		{0x00010000, 0x0001}, // bf16 subnormal kept exactly
		{0x80018000, 0x8002}, // negative subnormal tie -> even
		{0x80000000, 0x8000}, // -0
	}
	for _, c := range cases {
		f := math.Float32frombits(c.in)
		if got := BF16FromF32(f); got != c.want {
			t.Errorf("BF16FromF32(%#08x) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
	for _, nan := range []uint32{0x7fc00000, 0x7f800001, 0xffffffff} {
		h := BF16FromF32(math.Float32frombits(nan))
		if h&0x7f80 != 0x7f80 || h&0x7f == 0 {
			t.Errorf("NaN %#08x -> %#04x, want a NaN", nan, h)
		}
		if (h&0x8000 != 0) != (nan&0x80000000 != 0) {
			t.Errorf("NaN %#08x lost its sign: %#04x", nan, h)
		}
	}
	for h := 0; h < 1<<16; h++ {
		f := BF16ToF32(uint16(h))
		if f != f {
			continue
		}
		if got := BF16FromF32(f); got != uint16(h) {
			t.Fatalf("bf16 %#04x -> %g -> %#04x", h, f, got)
		}
	}
}

func TestTensorViewsAndSet(t *testing.T) {
	x := New(F32, 2, 3)
	if x.Bytes() != 24 || x.Numel() != 6 {
		t.Fatalf("sizes %d %d", x.Bytes(), x.Numel())
	}
	v, err := x.View(3, 3)
	if err != nil {
		t.Fatal(err)
	}
	v.F32()[0] = 5
	if x.F32()[3] != 5 {
		t.Fatalf("view does not alias")
	}
	if _, err := x.View(4, 3); err == nil {
		t.Fatal("view past the end accepted")
	}
	h := New(BF16, 4)
	if err := h.SetF32([]float32{1, 1.00390625, 3, -0.5}); err != nil {
		t.Fatal(err)
	}
	got := h.ToF32()
	want := []float32{1, 1, 3, -0.5} // 1+2^-8 ties to even
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("bf16 elem %d = %g want %g", i, got[i], want[i])
		}
	}
	if err := h.SetF32([]float32{1}); err == nil {
		t.Error("SetF32 with the wrong length accepted")
	}
	var l Layout
	l.Add("a", true, 2, 2)
	l.Add("b", false, 3)
	flat := New(F32, l.Total)
	views, err := l.Views(flat)
	if err != nil || len(views) != 2 || views[1].Numel() != 3 {
		t.Fatalf("views %v %v", views, err)
	}
	views[1].F32()[0] = 7
	if flat.F32()[4] != 7 {
		t.Error("segment view does not alias the flat buffer")
	}
	if _, err := l.Views(New(F32, 3)); err == nil {
		t.Error("layout over a short buffer accepted")
	}
}

func TestClose(t *testing.T) {
	if err := Close([]float64{1, 2}, []float64{1, 2.00001}, F32, 1); err != nil {
		t.Errorf("within tolerance: %v", err)
	}
	err := Close([]float64{1, 2.1}, []float64{1, 2}, F32, 1)
	m, ok := err.(*Mismatch)
	if !ok || m.Index != 1 || m.Count != 1 {
		t.Errorf("want a mismatch at 1, got %v", err)
	}
	if err := Close([]float64{math.NaN()}, []float64{1}, BF16, 1); err == nil {
		t.Error("NaN accepted")
	}
	if err := Close([]float64{1.01}, []float64{1}, BF16, 1); err != nil {
		t.Errorf("bf16 tolerance too tight: %v", err)
	}
	inf, nan := math.Inf(1), math.NaN()
	for _, c := range []struct {
		got, want float64
		ok        bool
	}{
		{1, nan, false}, {nan, nan, true}, {inf, 1, false}, {1, inf, false},
		{inf, inf, true}, {-inf, inf, false}, {1e300, inf, false},
	} {
		if err := Close([]float64{c.got}, []float64{c.want}, F32, 1); (err == nil) != c.ok {
			t.Errorf("Close(%v, %v) = %v, want ok=%v", c.got, c.want, err, c.ok)
		}
	}
	if err := Close([]float64{1}, []float64{1, 2}, F32, 1); err == nil {
		t.Error("different lengths accepted")
	}
}

func TestRelErr(t *testing.T) {
	if r := RelErr([]float32{3, 4}, []float32{3, 4}); r != 0 {
		t.Errorf("equal slices: %v", r)
	}
	if r := RelErr([]float32{3, 5}, []float32{3, 4}); math.Abs(r-0.2) > 1e-12 {
		t.Errorf("RelErr = %v, want 0.2", r)
	}
	nan := float32(math.NaN())
	for _, c := range [][2][]float32{
		{nil, {1}}, {{1}, {1, 2}}, {{nan}, {1}}, {{1}, {nan}},
	} {
		if r := RelErr(c[0], c[1]); !math.IsInf(r, 1) {
			t.Errorf("RelErr(%v, %v) = %v, want +Inf", c[0], c[1], r)
		}
	}
}
