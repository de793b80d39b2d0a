package tensor

import (
	"fmt"
	"math"
)

// DType is the element type of a tensor.
type DType uint8

// The element types druto computes and stores in.
const (
	F32  DType = iota + 1 // IEEE 754 binary32
	BF16                  // bfloat16: 8 exponent bits, 7 mantissa bits
	F16                   // IEEE 754 binary16: 5 exponent bits, 10 mantissa bits
	I32                   // signed 32-bit integer (token ids)
	// The FP8 formats as storage (FP8Format says how their bytes convert):
	// the operands of FP8 GEMMs, written by the kernels that produce them.
	// They are not Float: no op but the FP8 ones takes them.
	F8E4M3
	F8E5M2
)

// Size returns the number of bytes of one element.
func (d DType) Size() int {
	switch d {
	case F32, I32:
		return 4
	case BF16, F16:
		return 2
	case F8E4M3, F8E5M2:
		return 1
	}
	return 0
}

// String returns the dtype's lower-case name, as used in flags and files.
func (d DType) String() string {
	switch d {
	case F32:
		return "f32"
	case BF16:
		return "bf16"
	case F16:
		return "f16"
	case I32:
		return "i32"
	case F8E4M3:
		return "f8e4m3"
	case F8E5M2:
		return "f8e5m2"
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// FP8 returns the FP8 format of F8E4M3 and F8E5M2, and false for the
// other dtypes.
func (d DType) FP8() (FP8Format, bool) {
	switch d {
	case F8E4M3:
		return E4M3, true
	case F8E5M2:
		return E5M2, true
	}
	return 0, false
}

// Float reports whether d is a floating-point type.
func (d DType) Float() bool { return d == F32 || d == BF16 || d == F16 }

// Eps returns the machine epsilon of a floating-point dtype (the gap between
// 1 and the next representable number): 2^-23, 2^-7, 2^-10.
func (d DType) Eps() float64 {
	switch d {
	case F32:
		return 1.0 / (1 << 23)
	case BF16:
		return 1.0 / (1 << 7)
	case F16:
		return 1.0 / (1 << 10)
	}
	return 0
}

// ParseDType returns the dtype named s ("f32", "bf16", "f16", "i32").
func ParseDType(s string) (DType, error) {
	for _, d := range []DType{F32, BF16, F16, I32} {
		if d.String() == s {
			return d, nil
		}
	}
	return 0, fmt.Errorf("tensor: unknown dtype %q (want f32, bf16, f16 or i32)", s)
}

// BF16FromF32 rounds f to the nearest bfloat16, ties to even. NaN stays NaN
// (quiet, sign kept); overflow rounds to ±Inf as IEEE rounding does.
func BF16FromF32(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN: keep sign, force a quiet mantissa bit
		return uint16(b>>16) | 0x0040
	}
	// Round to nearest even on bit 16: add 0x7fff plus the lowest kept bit.
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// BF16ToF32 widens a bfloat16 exactly.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F16FromF32 rounds f to the nearest IEEE binary16, ties to even, producing
// subnormals below 2^-14, ±Inf from 65520 up (the halfway point past 65504)
// and a quiet NaN for NaN. Branch-light (after F. Giesen's
// float_to_half_fast3_rtne): normal results round by integer addition on
// the bits, subnormal ones by one float32 addition of a magic constant, which
// the FPU rounds to nearest even; both are checked exhaustively in tests.
func F16FromF32(f float32) uint16 {
	x := math.Float32bits(f)
	sign := uint16(x>>16) & 0x8000
	x &= 0x7fffffff
	switch {
	case x >= 0x47800000: // |f| >= 2^16, Inf or NaN
		if x > 0x7f800000 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case x < 0x38800000: // |f| < 2^-14: an f16 subnormal or zero
		const magic = ((127 - 15) + (23 - 10) + 1) << 23 // 0.5 with its unit in f16's last subnormal place
		v := math.Float32frombits(x) + math.Float32frombits(magic)
		return sign | uint16(math.Float32bits(v)-magic)
	}
	odd := (x >> 13) & 1
	x = x - 112<<23 + 0xfff + odd // rebias the exponent (127 -> 15), round half to even
	return sign | uint16(x>>13)
}

// f16Table holds the float32 value of every binary16 pattern.
var f16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for h := range t {
		t[h] = f16ToF32Slow(uint16(h))
	}
	return &t
}()

// F16ToF32 widens an IEEE binary16 exactly (a table lookup).
func F16ToF32(h uint16) float32 { return f16Table[h] }

func f16ToF32Slow(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: man * 2^-24.
		f := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// Round returns f rounded to dtype d and widened back to float32 (identity
// for F32). It is how the CPU reference emulates 16-bit storage.
func Round(d DType, f float32) float32 {
	switch d {
	case BF16:
		return BF16ToF32(BF16FromF32(f))
	case F16:
		return F16ToF32(F16FromF32(f))
	}
	return f
}
