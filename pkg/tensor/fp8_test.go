package tensor

import (
	"math"
	"testing"
)

// fp8Spec decodes pattern q from the OFP8 specification's bit fields,
// written apart from fp8.go: sign, e exponent bits with bias 2^(e-1)-1,
// m mantissa bits; E4M3 has no infinities and only S.1111.111 as NaN, E5M2
// follows IEEE 754 (all-ones exponent: Inf or NaN).
func fp8Spec(f FP8Format, q uint8) float64 {
	e, m := 4, 3
	if f == E5M2 {
		e, m = 5, 2
	}
	bias := 1<<(e-1) - 1
	s := 1.0
	if q&0x80 != 0 {
		s = -1
	}
	exp := int(q>>m) & (1<<e - 1)
	man := int(q) & (1<<m - 1)
	allOnes := exp == 1<<e-1
	switch {
	case f == E4M3 && allOnes && man == 1<<m-1:
		return math.NaN()
	case f == E5M2 && allOnes && man != 0:
		return math.NaN()
	case f == E5M2 && allOnes:
		return s * math.Inf(1)
	case exp == 0:
		return s * float64(man) / float64(int(1)<<m) * math.Pow(2, float64(1-bias))
	}
	return s * (1 + float64(man)/float64(int(1)<<m)) * math.Pow(2, float64(exp-bias))
}

var fp8Formats = []FP8Format{E4M3, E5M2}

func isNaN32(f float32) bool { return f != f }

// TestFP8Decode: every pattern of each format widens to the value its bit
// fields give, and the landmarks are where the specification puts them.
func TestFP8Decode(t *testing.T) {
	for _, f := range fp8Formats {
		nans := 0
		for q := range 256 {
			got, want := f.ToF32(uint8(q)), fp8Spec(f, uint8(q))
			if math.IsNaN(want) {
				nans++
				if !isNaN32(got) {
					t.Errorf("%s %#02x = %g, want NaN", f, q, got)
				}
				continue
			}
			if float64(got) != want || math.Signbit(float64(got)) != math.Signbit(want) {
				t.Errorf("%s %#02x = %g, want %g", f, q, got, want)
			}
		}
		if want := map[FP8Format]int{E4M3: 2, E5M2: 6}[f]; nans != want {
			t.Errorf("%s has %d NaN patterns, want %d", f, nans, want)
		}
	}
	for _, c := range []struct {
		f    FP8Format
		q    uint8
		want float32
	}{
		{E4M3, 0x7e, 448}, {E4M3, 0xfe, -448}, {E4M3, 0x08, 1.0 / 64}, {E4M3, 0x01, 1.0 / 512}, {E4M3, 0x07, 7.0 / 512},
		{E4M3, 0x38, 1}, {E4M3, 0x78, 256}, {E4M3, 0x80, 0},
		{E5M2, 0x7b, 57344}, {E5M2, 0x04, 1.0 / 16384}, {E5M2, 0x01, 1.0 / 65536}, {E5M2, 0x3c, 1},
		{E5M2, 0x7c, float32(math.Inf(1))}, {E5M2, 0xfc, float32(math.Inf(-1))},
	} {
		if got := c.f.ToF32(c.q); got != c.want {
			t.Errorf("%s %#02x = %g, want %g", c.f, c.q, got, c.want)
		}
	}
	if f := E4M3ToF32(0x80); !math.Signbit(float64(f)) {
		t.Error("E4M3 0x80 is not -0")
	}
}

// TestFP8RoundTrip: every non-NaN pattern narrows back to itself, except
// E5M2's infinities, which saturate to ±max; NaN narrows to NaN.
func TestFP8RoundTrip(t *testing.T) {
	for _, f := range fp8Formats {
		for q := range 256 {
			v := f.ToF32(uint8(q))
			got := f.FromF32(v)
			switch {
			case isNaN32(v):
				if !isNaN32(f.ToF32(got)) || got&0x80 != uint8(q)&0x80 {
					t.Errorf("%s: NaN %#02x narrows to %#02x, want a NaN of the same sign", f, q, got)
				}
			case math.IsInf(float64(v), 0):
				if want := uint8(q)&0x80 | 0x7b; got != want {
					t.Errorf("%s: %g narrows to %#02x, want ±max %#02x", f, v, got, want)
				}
			case got != uint8(q):
				t.Errorf("%s: %#02x -> %g -> %#02x", f, q, v, got)
			}
		}
	}
}

// TestFP8Midpoints: between every pair of adjacent values (zero and the
// subnormals included, both signs), the midpoint ties to the even pattern,
// and the float32 values just beside it go to the nearer neighbour.
func TestFP8Midpoints(t *testing.T) {
	for _, f := range fp8Formats {
		max := f.FromF32(f.Max())
		for q := uint8(0); q < max; q++ {
			a, b := f.ToF32(q), f.ToF32(q+1)
			mid := (a + b) / 2 // exact: a few mantissa bits, far from float32's limits
			if float64(mid) != (float64(a)+float64(b))/2 {
				t.Fatalf("%s: midpoint of %g and %g not exact", f, a, b)
			}
			even := q
			if q&1 == 1 {
				even = q + 1
			}
			for _, s := range []float32{1, -1} {
				sign := uint8(0)
				if s < 0 {
					sign = 0x80
				}
				checks := []struct {
					in   float32
					want uint8
				}{
					{s * mid, even},
					{s * math.Nextafter32(mid, 0), q},
					{s * math.Nextafter32(mid, 1e9), q + 1},
				}
				for _, c := range checks {
					if got := f.FromF32(c.in); got != sign|c.want {
						t.Errorf("%s(%.9g) = %#02x, want %#02x (between %g and %g)", f, c.in, got, sign|c.want, a, b)
					}
				}
			}
		}
	}
}

// TestFP8Saturation: the largest input that rounds to max, the smallest
// that overflows (and saturates, counted), infinities and NaN.
func TestFP8Saturation(t *testing.T) {
	inf := float32(math.Inf(1))
	for _, c := range []struct {
		f          FP8Format
		lastRound  float32 // the largest input that rounds to max
		firstOver  float32 // the smallest that overflows
		maxPattern uint8
	}{
		// E4M3: max 448 = 1.110·2^8, ulp 32; 464 ties to 448 (even).
		{E4M3, 464, math.Nextafter32(464, inf), 0x7e},
		// E5M2: max 57344 = 1.11·2^15, ulp 8192; 61440 ties up, past max.
		{E5M2, math.Nextafter32(61440, 0), 61440, 0x7b},
	} {
		for _, v := range []float32{c.f.Max(), c.lastRound, c.firstOver, 1e30, inf} {
			for _, s := range []float32{1, -1} {
				want := c.maxPattern
				if s < 0 {
					want |= 0x80
				}
				if got := c.f.FromF32(s * v); got != want {
					t.Errorf("%s(%g) = %#02x, want %#02x", c.f, s*v, got, want)
				}
			}
		}
		dst := make([]uint8, 8)
		got := QuantizeFP8(dst, []float32{c.lastRound, -c.lastRound, c.firstOver, -c.firstOver, inf, -inf, float32(math.NaN()), 1}, 1, c.f)
		if got != (FP8Counts{Saturated: 4, NaN: 1}) {
			t.Errorf("%s: counts %+v, want 4 saturated (the first overflow and Inf, both signs), 1 NaN", c.f, got)
		}
		if !isNaN32(c.f.ToF32(dst[6])) {
			t.Errorf("%s: NaN quantized to %#02x", c.f, dst[6])
		}
	}
}

// TestFP8Subnormals: the smallest subnormal, half of it (ties to zero:
// flushed, counted) and just above half (rounds up, not flushed).
func TestFP8Subnormals(t *testing.T) {
	for _, c := range []struct {
		f   FP8Format
		min float32
	}{{E4M3, 1.0 / 512}, {E5M2, 1.0 / 65536}} {
		half := c.min / 2
		cases := []struct {
			in   float32
			want uint8
		}{{c.min, 1}, {half, 0}, {math.Nextafter32(half, 1), 1}, {-half, 0x80}, {c.min * 1.5, 2}, {1e-30, 0}}
		for _, k := range cases {
			if got := c.f.FromF32(k.in); got != k.want {
				t.Errorf("%s(%g) = %#02x, want %#02x", c.f, k.in, got, k.want)
			}
		}
		dst := make([]uint8, 4)
		got := QuantizeFP8(dst, []float32{half, -half, math.Nextafter32(half, 1), 0}, 1, c.f)
		if got != (FP8Counts{Flushed: 2}) {
			t.Errorf("%s: counts %+v, want 2 flushed (±half the smallest subnormal; 0 is not flushed)", c.f, got)
		}
	}
}

// fp8Ref rounds v by exhaustive search over the finite patterns: the
// nearest, ties to the even pattern, saturating.
func fp8Ref(f FP8Format, v float32) uint8 {
	x := math.Abs(float64(v))
	max := f.FromF32(f.Max())
	best, bestD := uint8(0), math.Inf(1)
	for q := uint8(0); q <= max; q++ {
		d := math.Abs(x - float64(f.ToF32(q)))
		if d < bestD || (d == bestD && q&1 == 0) {
			best, bestD = q, d
		}
	}
	if math.Signbit(float64(v)) {
		best |= 0x80
	}
	return best
}

// TestFP8AgainstReference compares with the exhaustive search on random
// values across each format's range and past it.
func TestFP8AgainstReference(t *testing.T) {
	rng := NewRNG(8)
	for _, f := range fp8Formats {
		for range 20000 {
			e := rng.Intn(40) - 22 // 2^-22 .. 2^17
			v := float32((rng.Float64()*2 - 1) * math.Pow(2, float64(e)))
			if got, want := f.FromF32(v), fp8Ref(f, v); got != want {
				t.Fatalf("%s(%.9g) = %#02x, reference %#02x", f, v, got, want)
			}
		}
	}
}

// TestQuantizeFP8Scale: a scale brings small values into range and
// dequantizing with its inverse gives them back within half an ulp.
func TestQuantizeFP8Scale(t *testing.T) {
	src := []float32{1e-5, -3e-5, 2.5e-6, 0}
	q := make([]uint8, len(src))
	if c := QuantizeFP8(q, src, 1, E4M3); c.Flushed != 3 {
		t.Errorf("unscaled: %+v, want 3 flushed", c)
	}
	scale := float32(E4M3Max) / 3e-5
	if c := QuantizeFP8(q, src, scale, E4M3); c != (FP8Counts{}) {
		t.Errorf("scaled: %+v, want nothing lost", c)
	}
	back := make([]float32, len(src))
	DequantizeFP8(back, q, 1/scale, E4M3)
	for i := range src {
		if d := math.Abs(float64(back[i] - src[i])); d > math.Abs(float64(src[i]))/16*1.0001 {
			t.Errorf("%g came back as %g", src[i], back[i])
		}
	}
}
