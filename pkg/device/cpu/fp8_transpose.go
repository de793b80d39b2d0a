package cpu

// fp8_transpose.go: the CPU reference of kernels/fp8.cu's cast-transpose
// (issue 38), the twin of pkg/device/gpu's CastTransposeFP8.

import (
	"math"

	"github.com/druto/druto/pkg/tensor"
)

// CastTransposeFP8 writes q (N,C) = fp8(x·scale) in format f, qt (C,N) its
// transpose, and returns amax = max |x| over x (N,C) before scaling and
// under, the number of nonzero finite x whose code is ±0 (underflows:
// too small for the scale).
//
//	q (N,C), qt (C,N), x (N,C)
//
// Each product x·scale is rounded to float32 first and then narrowed as
// tensor.QuantizeFP8 does (nearest even, saturating to ±max, ±Inf too).
// amax is the largest |x| compared as a float's bits with the sign
// cleared, as the kernel's atomicMax compares them: +Inf above every
// finite value, a NaN above +Inf (so amax is NaN when any x is; of several
// NaNs the one with the largest bits). x holds the input widened to
// float32, which is exact from bf16 and f16.
func CastTransposeFP8(q, qt []uint8, x []float32, scale float32, f tensor.FP8Format, N, C int) (amax float32, under int) {
	q, qt, x = q[:N*C], qt[:N*C], x[:N*C]
	var m uint32
	for r := range N {
		for c := range C {
			v := x[r*C+c]
			bits := math.Float32bits(v) & 0x7fffffff
			m = max(m, bits)
			b := f.FromF32(v * scale)
			if b&0x7f == 0 && bits != 0 && bits < 0x7f800000 {
				under++
			}
			q[r*C+c] = b
			qt[c*N+r] = b
		}
	}
	return math.Float32frombits(m), under
}

// TransposeFP8 writes out (C,N) = inᵀ for in (N,C) of one-byte codes of
// either FP8 format, bit for bit: the reference of
// kernels/fp8transpose.cu's transpose_fp8.
//
//	out (C,N), in (N,C)
func TransposeFP8(out, in []uint8, N, C int) {
	out, in = out[:N*C], in[:N*C]
	for r := range N {
		for c := range C {
			out[c*N+r] = in[r*C+c]
		}
	}
}

// GELUCastTransposeFP8 is CastTransposeFP8 of gelu(pre) in E4M3 (the
// reference of kernels/fp8.cu's gelu_cast_transpose_e4m3): the tanh-form
// GELU of each pre-activation in float32, as the GELU forward computes it,
// then cast and transposed; amax = max |gelu(pre)|, under its underflows.
//
//	q (N,C), qt (C,N), pre (N,C)
func GELUCastTransposeFP8(q, qt []uint8, pre []float32, scale float32, N, C int) (amax float32, under int) {
	y := make([]float32, N*C)
	geluForwardGo(y, pre[:N*C])
	return CastTransposeFP8(q, qt, y, scale, tensor.E4M3, N, C)
}

// CastTransposeDBiasFP8 is CastTransposeFP8 of dy (N,C) in E5M2 that also
// adds the column sums of dy (unscaled, fp32) into dbias (C): the
// reference of kernels/fp8.cu's cast_transpose_dbias_e5m2 with matmul.cu's
// matmul_bias_grad after it. Each 64-row tile's sum of a column is the
// kernel's (FP8DBiasTile), and the tiles' sums are added in order; the
// GPU's second stage adds them in another fixed order, so dbias agrees to
// fp32 rounding.
//
//	q (N,C), qt (C,N), dbias (C), dy (N,C)
func CastTransposeDBiasFP8(q, qt []uint8, dbias, dy []float32, scale float32, N, C int) (amax float32, under int) {
	for c := range C {
		var s float32
		for r0 := 0; r0 < N; r0 += 64 {
			s += FP8DBiasTile(dy, N, C, r0, c)
		}
		dbias[c] += s
	}
	return CastTransposeFP8(q, qt, dy, scale, tensor.E5M2, N, C)
}

// DGELUCastTransposeDBiasFP8 is CastTransposeDBiasFP8 of
// v = gelu'(pre)·dy (the reference of kernels/fp8.cu's
// dgelu_cast_transpose_dbias_e5m2): v is the fused GELUBackward's fp32
// product (geluBackwardSlice, the same bits), never rounded to dy's dtype,
// then cast, transposed and summed into dbias as CastTransposeDBiasFP8
// does; amax = max |v|.
//
//	q (N,C), qt (C,N), dbias (C), dy (N,C), pre (N,C)
func DGELUCastTransposeDBiasFP8(q, qt []uint8, dbias, dy, pre []float32, scale float32, N, C int) (amax float32, under int) {
	v := make([]float32, N*C)
	geluBackwardSlice(v, pre[:N*C], dy[:N*C])
	return CastTransposeDBiasFP8(q, qt, dbias, v, scale, N, C)
}

// FP8DBiasTile returns the sum of column c of dy (N,C) over the rows
// [r0, r0+64) below N in cast_transpose_dbias_e5m2's order: the warps'
// sums of 8 rows each, ((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7)), added in warp
// order from 0 (rows past N count as +0).
func FP8DBiasTile(dy []float32, N, C, r0, c int) float32 {
	var a float32
	for w := range 8 {
		var r [8]float32
		for i := range r {
			if row := r0 + 8*w + i; row < N {
				r[i] = dy[row*C+c]
			}
		}
		a += ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
	}
	return a
}

// SameFP8 reports whether two codes of format f are equal, any NaN
// matching any NaN: the GPU writes a canonical NaN (0x7f), which need not
// be tensor's (the sign kept, 0x7e in E5M2).
func SameFP8(a, b uint8, f tensor.FP8Format) bool {
	return a == b || IsNaNFP8(a, f) && IsNaNFP8(b, f)
}

// IsNaNFP8 reports whether code q is a NaN of format f: S.1111.111 in E4M3,
// S.11111.xx with xx ≠ 0 in E5M2.
func IsNaNFP8(q uint8, f tensor.FP8Format) bool {
	if f == tensor.E5M2 {
		return q&0x7f > 0x7c
	}
	return q&0x7f == 0x7f
}

// CastFP8 writes q = fp8(x·scale) in format f (no transposed copy) and
// returns amax = max |x| and the underflows, as CastTransposeFP8 counts
// them: the reference of the FP8 classifier's gradient cast
// (kernels/crossentropy_fp8.cu).
func CastFP8(q []uint8, x []float32, scale float32, f tensor.FP8Format) (amax float32, under int) {
	q = q[:len(x)]
	var m uint32
	for i, v := range x {
		bits := math.Float32bits(v) & 0x7fffffff
		m = max(m, bits)
		b := f.FromF32(v * scale)
		if b&0x7f == 0 && bits != 0 && bits < 0x7f800000 {
			under++
		}
		q[i] = b
	}
	return math.Float32frombits(m), under
}
