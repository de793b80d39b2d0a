package tensor

// fp8.go: the two OCP 8-bit floating-point formats of FP8 training
// (OCP "8-bit Floating Point Specification (OFP8)", 2023; the CUDA types
// __nv_fp8_e4m3 and __nv_fp8_e5m2, CUDA_R_8F_E4M3 and CUDA_R_8F_E5M2):
//
//	E4M3 ("fn": finite, NaN): 1 sign, 4 exponent (bias 7), 3 mantissa bits.
//	     No infinities; S.1111.111 is NaN; the largest value is
//	     S.1111.110 = 1.75·2^8 = 448; subnormals down to 2^-9.
//	E5M2 (IEEE-like): 1 sign, 5 exponent (bias 15), 2 mantissa bits.
//	     S.11111.00 is ±Inf, S.11111.xx (xx ≠ 0) NaN; the largest finite
//	     value is 1.75·2^15 = 57344; subnormals down to 2^-16.
//
// Narrowing rounds to nearest, ties to even, and saturates: a finite value
// beyond the largest finite one becomes ±max, not Inf or NaN. That is the
// conversion scaled FP8 training uses (Transformer Engine's casts, the
// satfinite conversions of cuda_fp8.h and PTX cvt.satfinite, cuBLASLt's
// FP8 outputs): with a scale chosen from the tensor's amax, a value past
// max is an outlier worth clipping, not an overflow that should poison the
// step. Under saturation ±Inf becomes ±max too (in E5M2 as in E4M3, as
// cvt.satfinite does); NaN stays NaN (quiet, sign kept). Whoever needs to
// know that a value saturated counts it (QuantizeFP8's counters): the
// conversion itself stays a pure function.

import "math"

// fp8Format is one FP8 format's parameters.
type fp8Format struct {
	man    uint32  // mantissa bits
	bias   int32   // exponent bias
	max    uint8   // the bit pattern of the largest finite value
	nan    uint8   // the (positive) NaN pattern narrowing produces
	maxVal float32 // the largest finite value
	// over is where rounding with an unbounded exponent first passes
	// maxVal: max plus half its ulp. It overflows at over itself when the
	// tie goes up (max's mantissa is odd: E5M2's 1.11), not when it goes to
	// max (E4M3's 1.110 is even, so 464 rounds to 448).
	over  float32
	tieUp bool
}

// overflows reports whether |v| = a rounds past the largest finite value
// (the values saturation changes; Inf included).
func (p fp8Format) overflows(a float32) bool { return a > p.over || a == p.over && p.tieUp }

var (
	e4m3 = fp8Format{man: 3, bias: 7, max: 0x7e, nan: 0x7f, maxVal: 448, over: 464}
	e5m2 = fp8Format{man: 2, bias: 15, max: 0x7b, nan: 0x7e, maxVal: 57344, over: 61440, tieUp: true}
)

// The largest finite values of the two formats.
const (
	E4M3Max = 448
	E5M2Max = 57344
)

// E4M3FromF32 rounds f to the nearest OCP FP8 E4M3 value, ties to even,
// saturating to ±448 (±Inf too); NaN becomes 0x7f or 0xff.
func E4M3FromF32(f float32) uint8 { return e4m3.fromF32(f) }

// E5M2FromF32 rounds f to the nearest OCP FP8 E5M2 value, ties to even,
// saturating to ±57344 (±Inf too); NaN becomes 0x7e or 0xfe (quiet).
func E5M2FromF32(f float32) uint8 { return e5m2.fromF32(f) }

// E4M3ToF32 widens an E4M3 value exactly (a table lookup).
func E4M3ToF32(q uint8) float32 { return e4m3Table[q] }

// E5M2ToF32 widens an E5M2 value exactly (a table lookup).
func E5M2ToF32(q uint8) float32 { return e5m2Table[q] }

func (p fp8Format) fromF32(f float32) uint8 {
	x := math.Float32bits(f)
	sign := uint8(x>>24) & 0x80
	x &= 0x7fffffff
	switch {
	case x > 0x7f800000: // NaN
		return sign | p.nan
	case x > math.Float32bits(p.maxVal): // past max (Inf included): saturate
		return sign | p.max
	}
	minNormal := uint32(127-p.bias+1) << 23 // 2^(1-bias) as float32 bits
	if x < minNormal {
		// A subnormal or zero: |f| / 2^(1-bias-man) rounded to an integer,
		// ties to even (exact in float64: a power-of-two product). The
		// integer is the bit pattern itself; 2^man carries into the
		// smallest normal (exponent field 1, mantissa 0).
		q := math.RoundToEven(float64(math.Float32frombits(x)) * math.Ldexp(1, int(p.bias)-1+int(p.man)))
		return sign | uint8(q)
	}
	// Normal: round the float32 mantissa to p.man bits on the bits, ties to
	// even (a carry into the exponent is the right answer), then rebias.
	// x <= max, so the result cannot pass max.
	shift := 23 - p.man
	x += 1<<(shift-1) - 1 + (x>>shift)&1
	exp := int32(x>>23) - 127 + p.bias
	return sign | uint8(uint32(exp)<<p.man|(x>>shift)&(1<<p.man-1))
}

// toF32Slow decodes q from its bit fields.
func (p fp8Format) toF32Slow(q uint8) float32 {
	ebits := 7 - p.man
	exp := int32(q>>p.man) & (1<<ebits - 1)
	man := uint32(q) & (1<<p.man - 1)
	var v float64
	switch {
	case p == e4m3 && q&0x7f == 0x7f:
		v = math.NaN()
	case p == e5m2 && exp == 31 && man != 0:
		v = math.NaN()
	case p == e5m2 && exp == 31:
		v = math.Inf(1)
	case exp == 0: // subnormal: man · 2^(1-bias-man)
		v = math.Ldexp(float64(man), int(1-p.bias-int32(p.man)))
	default:
		v = math.Ldexp(float64(man|1<<p.man), int(exp-p.bias-int32(p.man)))
	}
	if q&0x80 != 0 {
		v = -v
	}
	return float32(v)
}

func fp8Table(p fp8Format) *[256]float32 {
	var t [256]float32
	for q := range t {
		t[q] = p.toF32Slow(uint8(q))
	}
	return &t
}

var (
	e4m3Table = fp8Table(e4m3)
	e5m2Table = fp8Table(e5m2)
)

// FP8Format names one of the two FP8 formats.
type FP8Format uint8

// The FP8 formats of the hybrid recipe: E4M3 (more precision) for forward
// activations and weights, E5M2 (more range) for gradients.
const (
	E4M3 FP8Format = iota + 1
	E5M2
)

// String returns "e4m3" or "e5m2".
func (f FP8Format) String() string {
	if f == E5M2 {
		return "e5m2"
	}
	return "e4m3"
}

func (f FP8Format) format() fp8Format {
	if f == E5M2 {
		return e5m2
	}
	return e4m3
}

// DType returns the tensor dtype that stores the format: F8E4M3 or F8E5M2.
func (f FP8Format) DType() DType {
	if f == E5M2 {
		return F8E5M2
	}
	return F8E4M3
}

// Max returns the format's largest finite value: 448 or 57344.
func (f FP8Format) Max() float32 {
	if f == E5M2 {
		return E5M2Max
	}
	return E4M3Max
}

// FromF32 narrows f to the format (round to nearest even, saturating).
func (f FP8Format) FromF32(v float32) uint8 {
	if f == E5M2 {
		return E5M2FromF32(v)
	}
	return E4M3FromF32(v)
}

// ToF32 widens a value of the format exactly.
func (f FP8Format) ToF32(q uint8) float32 {
	if f == E5M2 {
		return E5M2ToF32(q)
	}
	return E4M3ToF32(q)
}

// FP8Counts counts what a quantization lost at the ends of the range.
type FP8Counts struct {
	// Saturated counts scaled values whose rounding would have overflowed
	// and were clipped to ±max: |v| > 464 in E4M3 (464 itself ties to even,
	// to 448), |v| >= 61440 in E5M2, and ±Inf. Values between max and
	// those bounds round to max as any value rounds, and are not counted.
	Saturated int
	Flushed   int // nonzero finite scaled values that rounded to ±0
	NaN       int // NaN scaled values (kept NaN)
}

// QuantizeFP8 writes fp8(src[i]·scale) in format f to dst (len(dst) must
// be at least len(src)) and returns its counts. The product is rounded to
// float32 first, as a GPU kernel computing it in float32 does.
func QuantizeFP8(dst []uint8, src []float32, scale float32, f FP8Format) FP8Counts {
	var c FP8Counts
	p := f.format()
	dst = dst[:len(src)]
	for i, v := range src {
		s := v * scale
		q := p.fromF32(s)
		dst[i] = q
		switch a := float32(math.Abs(float64(s))); {
		case s != s:
			c.NaN++
		case p.overflows(a):
			c.Saturated++
		case a != 0 && q&0x7f == 0:
			c.Flushed++
		}
	}
	return c
}

// DequantizeFP8 writes ToF32(src[i])·invScale to dst (len(dst) must be at
// least len(src)): the inverse of QuantizeFP8 with invScale = 1/scale, up
// to the one rounding QuantizeFP8 made.
func DequantizeFP8(dst []float32, src []uint8, invScale float32, f FP8Format) {
	dst = dst[:len(src)]
	for i, q := range src {
		dst[i] = f.ToF32(q) * invScale
	}
}
