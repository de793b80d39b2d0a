//go:build !purego

#include "textflag.h"

// One k step of the 6x16 micro-kernel: two vectors of the packed B row
// (16 floats at boff(DI)), each of the six A values of the step broadcast
// and multiplied into its row's two accumulators (Y4..Y15, row r in
// Y(4+2r), Y(5+2r)). Rows 0-2 of A are at (SI), (SI)(R10), (SI)(R10*2),
// rows 3-5 the same from R11; the step then moves SI and R11 by R12.
#define STEP(boff) \
	VMOVUPS boff(DI), Y0 \
	VMOVUPS boff+32(DI), Y1 \
	VBROADCASTSS (SI), Y2 \
	VFMADD231PS Y0, Y2, Y4 \
	VFMADD231PS Y1, Y2, Y5 \
	VBROADCASTSS (SI)(R10*1), Y3 \
	VFMADD231PS Y0, Y3, Y6 \
	VFMADD231PS Y1, Y3, Y7 \
	VBROADCASTSS (SI)(R10*2), Y2 \
	VFMADD231PS Y0, Y2, Y8 \
	VFMADD231PS Y1, Y2, Y9 \
	VBROADCASTSS (R11), Y3 \
	VFMADD231PS Y0, Y3, Y10 \
	VFMADD231PS Y1, Y3, Y11 \
	VBROADCASTSS (R11)(R10*1), Y2 \
	VFMADD231PS Y0, Y2, Y12 \
	VFMADD231PS Y1, Y2, Y13 \
	VBROADCASTSS (R11)(R10*2), Y3 \
	VFMADD231PS Y0, Y3, Y14 \
	VFMADD231PS Y1, Y3, Y15 \
	ADDQ R12, SI \
	ADDQ R12, R11

// func kern6x16AVX2(k int, a *float32, rsa, csa int, b, c *float32, ldc int, alpha, beta float32)
//
// C[0:6, 0:16] = alpha·(A · Bpanel) + beta·C, where A[i][p] is at
// a[i·rsa + p·csa], Bpanel is k×16 packed row by row (16 floats per step)
// and C has row stride ldc floats. beta == 0 does not read C. k >= 1.
TEXT ·kern6x16AVX2(SB), NOSPLIT, $0-64
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ rsa+16(FP), R10
	SHLQ $2, R10 // A's row stride in bytes
	MOVQ csa+24(FP), R12
	SHLQ $2, R12 // A's step stride in bytes
	LEAQ (SI)(R10*2), R11
	ADDQ R10, R11 // row 3 of A
	MOVQ b+32(FP), DI
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R8
	SHLQ $2, R8 // C's row stride in bytes

	// Prefetch the six rows of C (both cache lines of each).
	LEAQ (DX)(R8*2), R9
	LEAQ (R9)(R8*1), R9 // R9 = row 3
	PREFETCHT0 (DX)
	PREFETCHT0 60(DX)
	PREFETCHT0 (DX)(R8*1)
	PREFETCHT0 60(DX)(R8*1)
	PREFETCHT0 (DX)(R8*2)
	PREFETCHT0 60(DX)(R8*2)
	PREFETCHT0 (R9)
	PREFETCHT0 60(R9)
	PREFETCHT0 (R9)(R8*1)
	PREFETCHT0 60(R9)(R8*1)
	PREFETCHT0 (R9)(R8*2)
	PREFETCHT0 60(R9)(R8*2)

	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15

	MOVQ CX, BX
	SHRQ $2, BX // steps of four
	ANDQ $3, CX // remainder
	TESTQ BX, BX
	JZ   tail

loop4:
	PREFETCHT0 384(DI)
	STEP(0)
	STEP(64)
	PREFETCHT0 448(DI)
	STEP(128)
	STEP(192)
	ADDQ $256, DI
	DECQ BX
	JNZ  loop4

tail:
	TESTQ CX, CX
	JZ    store

loop1:
	STEP(0)
	ADDQ $64, DI
	DECQ CX
	JNZ  loop1

store:
	VBROADCASTSS alpha+56(FP), Y0
	VMULPS Y0, Y4, Y4
	VMULPS Y0, Y5, Y5
	VMULPS Y0, Y6, Y6
	VMULPS Y0, Y7, Y7
	VMULPS Y0, Y8, Y8
	VMULPS Y0, Y9, Y9
	VMULPS Y0, Y10, Y10
	VMULPS Y0, Y11, Y11
	VMULPS Y0, Y12, Y12
	VMULPS Y0, Y13, Y13
	VMULPS Y0, Y14, Y14
	VMULPS Y0, Y15, Y15

	MOVL beta+60(FP), AX
	SHLL $1, AX // drop the sign: -0 is 0 too
	JZ   nobeta

	VBROADCASTSS beta+60(FP), Y1
	VFMADD231PS (DX), Y1, Y4
	VFMADD231PS 32(DX), Y1, Y5
	VFMADD231PS (DX)(R8*1), Y1, Y6
	VFMADD231PS 32(DX)(R8*1), Y1, Y7
	VFMADD231PS (DX)(R8*2), Y1, Y8
	VFMADD231PS 32(DX)(R8*2), Y1, Y9
	VFMADD231PS (R9), Y1, Y10
	VFMADD231PS 32(R9), Y1, Y11
	VFMADD231PS (R9)(R8*1), Y1, Y12
	VFMADD231PS 32(R9)(R8*1), Y1, Y13
	VFMADD231PS (R9)(R8*2), Y1, Y14
	VFMADD231PS 32(R9)(R8*2), Y1, Y15

nobeta:
	VMOVUPS Y4, (DX)
	VMOVUPS Y5, 32(DX)
	VMOVUPS Y6, (DX)(R8*1)
	VMOVUPS Y7, 32(DX)(R8*1)
	VMOVUPS Y8, (DX)(R8*2)
	VMOVUPS Y9, 32(DX)(R8*2)
	VMOVUPS Y10, (R9)
	VMOVUPS Y11, 32(R9)
	VMOVUPS Y12, (R9)(R8*1)
	VMOVUPS Y13, 32(R9)(R8*1)
	VMOVUPS Y14, (R9)(R8*2)
	VMOVUPS Y15, 32(R9)(R8*2)
	VZEROUPPER
	RET

// Loads rows r0..r7 (8 floats each) from the row pointers and transposes
// them: on exit Y8..Y15 hold columns 0..7 (Y(8+c)[j] = row j, float c).
#define LOAD_T8(r0, r1, r2, r3, r4, r5, r6, r7) \
	VMOVUPS r0, Y0 \
	VMOVUPS r1, Y1 \
	VMOVUPS r2, Y2 \
	VMOVUPS r3, Y3 \
	VMOVUPS r4, Y4 \
	VMOVUPS r5, Y5 \
	VMOVUPS r6, Y6 \
	VMOVUPS r7, Y7 \
	VUNPCKLPS Y1, Y0, Y8 \
	VUNPCKHPS Y1, Y0, Y9 \
	VUNPCKLPS Y3, Y2, Y10 \
	VUNPCKHPS Y3, Y2, Y11 \
	VUNPCKLPS Y5, Y4, Y12 \
	VUNPCKHPS Y5, Y4, Y13 \
	VUNPCKLPS Y7, Y6, Y14 \
	VUNPCKHPS Y7, Y6, Y15 \
	VSHUFPS $0x44, Y10, Y8, Y0 \
	VSHUFPS $0xEE, Y10, Y8, Y1 \
	VSHUFPS $0x44, Y11, Y9, Y2 \
	VSHUFPS $0xEE, Y11, Y9, Y3 \
	VSHUFPS $0x44, Y14, Y12, Y4 \
	VSHUFPS $0xEE, Y14, Y12, Y5 \
	VSHUFPS $0x44, Y15, Y13, Y6 \
	VSHUFPS $0xEE, Y15, Y13, Y7 \
	VPERM2F128 $0x20, Y4, Y0, Y8 \
	VPERM2F128 $0x20, Y5, Y1, Y9 \
	VPERM2F128 $0x20, Y6, Y2, Y10 \
	VPERM2F128 $0x20, Y7, Y3, Y11 \
	VPERM2F128 $0x31, Y4, Y0, Y12 \
	VPERM2F128 $0x31, Y5, Y1, Y13 \
	VPERM2F128 $0x31, Y6, Y2, Y14 \
	VPERM2F128 $0x31, Y7, Y3, Y15

// Stores columns Y8..Y15 to steps 0..7 of the panel at DI, at byte offset
// off within each 64-byte step (0: rows 0-7, 32: rows 8-15).
#define STORE_T8(off) \
	VMOVUPS Y8, off(DI) \
	VMOVUPS Y9, off+64(DI) \
	VMOVUPS Y10, off+128(DI) \
	VMOVUPS Y11, off+192(DI) \
	VMOVUPS Y12, off+256(DI) \
	VMOVUPS Y13, off+320(DI) \
	VMOVUPS Y14, off+384(DI) \
	VMOVUPS Y15, off+448(DI)

// func packBT16AVX2(b *float32, ldb int, n8 int, d *float32)
//
// Packs 8·n8 steps of 16 rows of B (row j at b + j·ldb, step p at +p) into
// the k-major panel d (d[p·16 + j] = b[j·ldb + p]). n8 >= 1.
TEXT ·packBT16AVX2(SB), NOSPLIT, $0-32
	MOVQ b+0(FP), SI
	MOVQ ldb+8(FP), R8
	SHLQ $2, R8 // row stride in bytes
	MOVQ n8+16(FP), CX
	MOVQ d+24(FP), DI
	LEAQ (SI)(R8*2), R10
	ADDQ R8, R10 // row 3
	LEAQ (R10)(R8*2), R11
	ADDQ R8, R11 // row 6
	LEAQ (SI)(R8*8), BX // row 8
	LEAQ (BX)(R8*2), R12
	ADDQ R8, R12 // row 11
	LEAQ (R12)(R8*2), R13
	ADDQ R8, R13 // row 14

packloop:
	LOAD_T8((SI), (SI)(R8*1), (SI)(R8*2), (R10), (SI)(R8*4), (R10)(R8*2), (R11), (R11)(R8*1))
	STORE_T8(0)
	LOAD_T8((BX), (BX)(R8*1), (BX)(R8*2), (R12), (BX)(R8*4), (R12)(R8*2), (R13), (R13)(R8*1))
	STORE_T8(32)
	ADDQ $32, SI
	ADDQ $32, R10
	ADDQ $32, R11
	ADDQ $32, BX
	ADDQ $32, R12
	ADDQ $32, R13
	ADDQ $512, DI
	DECQ CX
	JNZ  packloop
	VZEROUPPER
	RET

// func packBN16AVX2(b *float32, ldb int, kb int, d *float32)
//
// Packs kb steps of 16 contiguous floats of B (step p at b + p·ldb) into
// the k-major panel d (d[p·16 + j] = b[p·ldb + j]), prefetching eight
// steps ahead. kb >= 1.
TEXT ·packBN16AVX2(SB), NOSPLIT, $0-32
	MOVQ b+0(FP), SI
	MOVQ ldb+8(FP), R8
	SHLQ $2, R8 // step stride in bytes
	MOVQ kb+16(FP), CX
	MOVQ d+24(FP), DI

copyloop:
	PREFETCHT0 (SI)(R8*8)
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ R8, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  copyloop
	VZEROUPPER
	RET

// func widenBN16AVX2(b *uint16, ldb int, kb int, d *float32)
//
// Packs kb steps of 16 contiguous bf16 values of B (step p at b + p·ldb
// elements) into the k-major fp32 panel d, widening each exactly (its bits
// shifted into the high half): d[p·16 + j] = bf16(b[p·ldb + j]). kb >= 1.
TEXT ·widenBN16AVX2(SB), NOSPLIT, $0-32
	MOVQ b+0(FP), SI
	MOVQ ldb+8(FP), R8
	SHLQ $1, R8 // step stride in bytes
	MOVQ kb+16(FP), CX
	MOVQ d+24(FP), DI

widenloop:
	VPMOVZXWD (SI), Y0
	VPMOVZXWD 16(SI), Y1
	VPSLLD    $16, Y0, Y0
	VPSLLD    $16, Y1, Y1
	VMOVUPS   Y0, (DI)
	VMOVUPS   Y1, 32(DI)
	ADDQ      R8, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       widenloop
	VZEROUPPER
	RET

// func widenAVX2(d *float32, s *uint16, n8 int)
//
// Widens 8·n8 contiguous bf16 values into fp32: d[i] = bf16(s[i]). n8 >= 1.
TEXT ·widenAVX2(SB), NOSPLIT, $0-24
	MOVQ d+0(FP), DI
	MOVQ s+8(FP), SI
	MOVQ n8+16(FP), CX

widen8:
	VPMOVZXWD (SI), Y0
	VPSLLD    $16, Y0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       widen8
	VZEROUPPER
	RET
