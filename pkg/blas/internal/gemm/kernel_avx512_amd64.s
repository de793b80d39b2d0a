//go:build !purego

#include "textflag.h"

// One k step of the AVX-512 6x16 micro-kernel: the packed B row (16 floats
// at boff(DI)) is one zmm vector; each of the step's six A values is
// broadcast and multiplied into its row's accumulator (Z4..Z9, row r in
// Z(4+r)). The addressing of A is kern6x16AVX2's: rows 0-2 at (SI),
// (SI)(R10), (SI)(R10*2), rows 3-5 the same from R11; the step then moves
// SI and R11 by R12. Two broadcast registers alternate so that consecutive
// broadcasts do not wait on each other's FMA.
#define STEP512(boff) \
	VMOVUPS boff(DI), Z0 \
	VBROADCASTSS (SI), Z2 \
	VFMADD231PS Z0, Z2, Z4 \
	VBROADCASTSS (SI)(R10*1), Z3 \
	VFMADD231PS Z0, Z3, Z5 \
	VBROADCASTSS (SI)(R10*2), Z2 \
	VFMADD231PS Z0, Z2, Z6 \
	VBROADCASTSS (R11), Z3 \
	VFMADD231PS Z0, Z3, Z7 \
	VBROADCASTSS (R11)(R10*1), Z2 \
	VFMADD231PS Z0, Z2, Z8 \
	VBROADCASTSS (R11)(R10*2), Z3 \
	VFMADD231PS Z0, Z3, Z9 \
	ADDQ R12, SI \
	ADDQ R12, R11

// func kern6x16AVX512(k int, a *float32, rsa, csa int, b, c *float32, ldc int, alpha, beta float32)
//
// kern6x16AVX2's contract and arithmetic (each element of C: FMAs in step
// order from 0, times alpha, then beta·C fused in), so its results are the
// AVX2 kernel's bit for bit; each row of the tile is one zmm register.
TEXT ·kern6x16AVX512(SB), NOSPLIT, $0-64
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

	LEAQ (DX)(R8*2), R9
	LEAQ (R9)(R8*1), R9 // R9 = row 3 of C
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

	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9

	MOVQ CX, BX
	SHRQ $2, BX // steps of four
	ANDQ $3, CX // remainder
	TESTQ BX, BX
	JZ   tail

loop4:
	PREFETCHT0 384(DI)
	STEP512(0)
	STEP512(64)
	PREFETCHT0 448(DI)
	STEP512(128)
	STEP512(192)
	ADDQ $256, DI
	DECQ BX
	JNZ  loop4

tail:
	TESTQ CX, CX
	JZ    store

loop1:
	STEP512(0)
	ADDQ $64, DI
	DECQ CX
	JNZ  loop1

store:
	VBROADCASTSS alpha+56(FP), Z0
	VMULPS Z0, Z4, Z4
	VMULPS Z0, Z5, Z5
	VMULPS Z0, Z6, Z6
	VMULPS Z0, Z7, Z7
	VMULPS Z0, Z8, Z8
	VMULPS Z0, Z9, Z9

	MOVL beta+60(FP), AX
	SHLL $1, AX // drop the sign: -0 is 0 too
	JZ   nobeta

	VBROADCASTSS beta+60(FP), Z1
	VFMADD231PS (DX), Z1, Z4
	VFMADD231PS (DX)(R8*1), Z1, Z5
	VFMADD231PS (DX)(R8*2), Z1, Z6
	VFMADD231PS (R9), Z1, Z7
	VFMADD231PS (R9)(R8*1), Z1, Z8
	VFMADD231PS (R9)(R8*2), Z1, Z9

nobeta:
	VMOVUPS Z4, (DX)
	VMOVUPS Z5, (DX)(R8*1)
	VMOVUPS Z6, (DX)(R8*2)
	VMOVUPS Z7, (R9)
	VMOVUPS Z8, (R9)(R8*1)
	VMOVUPS Z9, (R9)(R8*2)
	VZEROUPPER
	RET

// One k step of the 6x32 micro-kernel: two B panels (16 floats each, at
// boff(DI) and boff(DI)(R13)) in Z0, Z1, each of the six A values broadcast
// and multiplied into its row's two accumulators (row r in Z(4+2r),
// Z(5+2r)), A addressed as in STEP512.
#define STEP512W(boff) \
	VMOVUPS boff(DI), Z0 \
	VMOVUPS boff(DI)(R13*1), Z1 \
	VBROADCASTSS (SI), Z2 \
	VFMADD231PS Z0, Z2, Z4 \
	VFMADD231PS Z1, Z2, Z5 \
	VBROADCASTSS (SI)(R10*1), Z3 \
	VFMADD231PS Z0, Z3, Z6 \
	VFMADD231PS Z1, Z3, Z7 \
	VBROADCASTSS (SI)(R10*2), Z2 \
	VFMADD231PS Z0, Z2, Z8 \
	VFMADD231PS Z1, Z2, Z9 \
	VBROADCASTSS (R11), Z3 \
	VFMADD231PS Z0, Z3, Z10 \
	VFMADD231PS Z1, Z3, Z11 \
	VBROADCASTSS (R11)(R10*1), Z2 \
	VFMADD231PS Z0, Z2, Z12 \
	VFMADD231PS Z1, Z2, Z13 \
	VBROADCASTSS (R11)(R10*2), Z3 \
	VFMADD231PS Z0, Z3, Z14 \
	VFMADD231PS Z1, Z3, Z15 \
	ADDQ R12, SI \
	ADDQ R12, R11

// func kern6x32AVX512(k int, a *float32, rsa, csa int, b, c *float32, ldc int, alpha, beta float32)
//
// Two adjacent 6x16 tiles at once: C[0:6, 0:32] = alpha·(A · [B0 B1]) +
// beta·C, where B0 is the k×16 panel at b and B1 the next one, at b + 16·k
// (packed B panels are contiguous). Each element of C gets the 6x16
// kernels' FMAs in the same order, so the bits are theirs. k >= 1.
TEXT ·kern6x32AVX512(SB), NOSPLIT, $0-64
	MOVQ k+0(FP), CX
	MOVQ CX, R13
	SHLQ $6, R13 // 16·k floats: the second panel's offset in bytes
	MOVQ a+8(FP), SI
	MOVQ rsa+16(FP), R10
	SHLQ $2, R10
	MOVQ csa+24(FP), R12
	SHLQ $2, R12
	LEAQ (SI)(R10*2), R11
	ADDQ R10, R11
	MOVQ b+32(FP), DI
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R8
	SHLQ $2, R8

	LEAQ (DX)(R8*2), R9
	LEAQ (R9)(R8*1), R9
	PREFETCHT0 (DX)
	PREFETCHT0 124(DX)
	PREFETCHT0 (DX)(R8*1)
	PREFETCHT0 124(DX)(R8*1)
	PREFETCHT0 (DX)(R8*2)
	PREFETCHT0 124(DX)(R8*2)
	PREFETCHT0 (R9)
	PREFETCHT0 124(R9)
	PREFETCHT0 (R9)(R8*1)
	PREFETCHT0 124(R9)(R8*1)
	PREFETCHT0 (R9)(R8*2)
	PREFETCHT0 124(R9)(R8*2)

	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15

	MOVQ CX, BX
	SHRQ $2, BX
	ANDQ $3, CX
	TESTQ BX, BX
	JZ   wtail

wloop4:
	PREFETCHT0 384(DI)
	PREFETCHT0 384(DI)(R13*1)
	STEP512W(0)
	STEP512W(64)
	PREFETCHT0 448(DI)
	PREFETCHT0 448(DI)(R13*1)
	STEP512W(128)
	STEP512W(192)
	ADDQ $256, DI
	DECQ BX
	JNZ  wloop4

wtail:
	TESTQ CX, CX
	JZ    wstore

wloop1:
	STEP512W(0)
	ADDQ $64, DI
	DECQ CX
	JNZ  wloop1

wstore:
	VBROADCASTSS alpha+56(FP), Z0
	VMULPS Z0, Z4, Z4
	VMULPS Z0, Z5, Z5
	VMULPS Z0, Z6, Z6
	VMULPS Z0, Z7, Z7
	VMULPS Z0, Z8, Z8
	VMULPS Z0, Z9, Z9
	VMULPS Z0, Z10, Z10
	VMULPS Z0, Z11, Z11
	VMULPS Z0, Z12, Z12
	VMULPS Z0, Z13, Z13
	VMULPS Z0, Z14, Z14
	VMULPS Z0, Z15, Z15

	MOVL beta+60(FP), AX
	SHLL $1, AX
	JZ   wnobeta

	VBROADCASTSS beta+60(FP), Z1
	VFMADD231PS (DX), Z1, Z4
	VFMADD231PS 64(DX), Z1, Z5
	VFMADD231PS (DX)(R8*1), Z1, Z6
	VFMADD231PS 64(DX)(R8*1), Z1, Z7
	VFMADD231PS (DX)(R8*2), Z1, Z8
	VFMADD231PS 64(DX)(R8*2), Z1, Z9
	VFMADD231PS (R9), Z1, Z10
	VFMADD231PS 64(R9), Z1, Z11
	VFMADD231PS (R9)(R8*1), Z1, Z12
	VFMADD231PS 64(R9)(R8*1), Z1, Z13
	VFMADD231PS (R9)(R8*2), Z1, Z14
	VFMADD231PS 64(R9)(R8*2), Z1, Z15

wnobeta:
	VMOVUPS Z4, (DX)
	VMOVUPS Z5, 64(DX)
	VMOVUPS Z6, (DX)(R8*1)
	VMOVUPS Z7, 64(DX)(R8*1)
	VMOVUPS Z8, (DX)(R8*2)
	VMOVUPS Z9, 64(DX)(R8*2)
	VMOVUPS Z10, (R9)
	VMOVUPS Z11, 64(R9)
	VMOVUPS Z12, (R9)(R8*1)
	VMOVUPS Z13, 64(R9)(R8*1)
	VMOVUPS Z14, (R9)(R8*2)
	VMOVUPS Z15, 64(R9)(R8*2)
	VZEROUPPER
	RET
