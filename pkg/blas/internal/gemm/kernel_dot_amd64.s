//go:build !purego

#include "textflag.h"

// The AVX512_BF16 micro-kernels: each k step is a pair of bf16 values
// (VDPBF16PS: C[i][j] += A[i][2q]·B[2q][j] + A[i][2q+1]·B[2q+1][j] in fp32).
// Go's assembler does not know VDPBF16PS (Go 1.26), so each form used is
// spelled out as its EVEX bytes (from GNU as 2.40, checked with objdump):
// VDPBF16PS.BCST addr, Zb, Zacc = vdpbf16ps addr{1to16}, %zmmb, %zmmacc,
// the A pair broadcast from memory as one dword to all 16 lanes.
// TestDotEncodings checks each against GNU as where binutils are installed.

// VDPBF16PS.BCST (SI), Z0, Z4
#define DP0_Z0_Z4 BYTE $0x62; BYTE $0xf2; BYTE $0x7e; BYTE $0x58; BYTE $0x52; BYTE $0x26
// VDPBF16PS.BCST (SI), Z1, Z5
#define DP0_Z1_Z5 BYTE $0x62; BYTE $0xf2; BYTE $0x76; BYTE $0x58; BYTE $0x52; BYTE $0x2e
// VDPBF16PS.BCST (SI)(R10*1), Z0, Z5
#define DP1_Z0_Z5 BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x58; BYTE $0x52; BYTE $0x2c; BYTE $0x16
// VDPBF16PS.BCST (SI)(R10*1), Z0, Z6
#define DP1_Z0_Z6 BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x58; BYTE $0x52; BYTE $0x34; BYTE $0x16
// VDPBF16PS.BCST (SI)(R10*1), Z1, Z7
#define DP1_Z1_Z7 BYTE $0x62; BYTE $0xb2; BYTE $0x76; BYTE $0x58; BYTE $0x52; BYTE $0x3c; BYTE $0x16
// VDPBF16PS.BCST (SI)(R10*2), Z0, Z6
#define DP2_Z0_Z6 BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x58; BYTE $0x52; BYTE $0x34; BYTE $0x56
// VDPBF16PS.BCST (SI)(R10*2), Z0, Z8
#define DP2_Z0_Z8 BYTE $0x62; BYTE $0x32; BYTE $0x7e; BYTE $0x58; BYTE $0x52; BYTE $0x04; BYTE $0x56
// VDPBF16PS.BCST (SI)(R10*2), Z1, Z9
#define DP2_Z1_Z9 BYTE $0x62; BYTE $0x32; BYTE $0x76; BYTE $0x58; BYTE $0x52; BYTE $0x0c; BYTE $0x56
// VDPBF16PS.BCST (R11), Z0, Z7
#define DP3_Z0_Z7 BYTE $0x62; BYTE $0xd2; BYTE $0x7e; BYTE $0x58; BYTE $0x52; BYTE $0x3b
// VDPBF16PS.BCST (R11), Z0, Z10
#define DP3_Z0_Z10 BYTE $0x62; BYTE $0x52; BYTE $0x7e; BYTE $0x58; BYTE $0x52; BYTE $0x13
// VDPBF16PS.BCST (R11), Z1, Z11
#define DP3_Z1_Z11 BYTE $0x62; BYTE $0x52; BYTE $0x76; BYTE $0x58; BYTE $0x52; BYTE $0x1b
// VDPBF16PS.BCST (R11)(R10*1), Z0, Z8
#define DP4_Z0_Z8 BYTE $0x62; BYTE $0x12; BYTE $0x7e; BYTE $0x58; BYTE $0x52; BYTE $0x04; BYTE $0x13
// VDPBF16PS.BCST (R11)(R10*1), Z0, Z12
#define DP4_Z0_Z12 BYTE $0x62; BYTE $0x12; BYTE $0x7e; BYTE $0x58; BYTE $0x52; BYTE $0x24; BYTE $0x13
// VDPBF16PS.BCST (R11)(R10*1), Z1, Z13
#define DP4_Z1_Z13 BYTE $0x62; BYTE $0x12; BYTE $0x76; BYTE $0x58; BYTE $0x52; BYTE $0x2c; BYTE $0x13
// VDPBF16PS.BCST (R11)(R10*2), Z0, Z9
#define DP5_Z0_Z9 BYTE $0x62; BYTE $0x12; BYTE $0x7e; BYTE $0x58; BYTE $0x52; BYTE $0x0c; BYTE $0x53
// VDPBF16PS.BCST (R11)(R10*2), Z0, Z14
#define DP5_Z0_Z14 BYTE $0x62; BYTE $0x12; BYTE $0x7e; BYTE $0x58; BYTE $0x52; BYTE $0x34; BYTE $0x53
// VDPBF16PS.BCST (R11)(R10*2), Z1, Z15
#define DP5_Z1_Z15 BYTE $0x62; BYTE $0x12; BYTE $0x76; BYTE $0x58; BYTE $0x52; BYTE $0x3c; BYTE $0x53

// One pair step of the 6x16 dot kernel: the packed B row (16 dwords, each
// a bf16 pair along k, at boff(DI)) in Z0; row r's A pair (a dword at the
// addresses of STEP512: (SI), (SI)(R10*1), (SI)(R10*2), (R11), ...) is
// broadcast into its VDPBF16PS and accumulated into Z(4+r).
#define DOTSTEP(boff) \
	VMOVDQU32 boff(DI), Z0 \
	DP0_Z0_Z4 \
	DP1_Z0_Z5 \
	DP2_Z0_Z6 \
	DP3_Z0_Z7 \
	DP4_Z0_Z8 \
	DP5_Z0_Z9 \
	ADDQ R12, SI \
	ADDQ R12, R11

// func kernDot6x16(kp int, a *uint16, rsa, csa int, b *uint32, c *float32, ldc int, alpha, beta float32)
//
// C[0:6, 0:16] = alpha·(A·B) + beta·C over kp pair steps: A's pair q of
// row i is the two bf16 values at a + i·rsa + q·csa (uint16 units), B a
// packed panel of kp rows of 16 dwords (DotKernel's contract).
TEXT ·kernDot6x16(SB), NOSPLIT, $0-64
	MOVQ kp+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ rsa+16(FP), R10
	SHLQ $1, R10 // A's row stride in bytes
	MOVQ csa+24(FP), R12
	SHLQ $1, R12 // A's pair step in bytes
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
	SHRQ $2, BX // pair steps of four
	ANDQ $3, CX // remainder
	TESTQ BX, BX
	JZ   dtail

dloop4:
	PREFETCHT0 384(DI)
	DOTSTEP(0)
	DOTSTEP(64)
	PREFETCHT0 448(DI)
	DOTSTEP(128)
	DOTSTEP(192)
	ADDQ $256, DI
	DECQ BX
	JNZ  dloop4

dtail:
	TESTQ CX, CX
	JZ    dstore

dloop1:
	DOTSTEP(0)
	ADDQ $64, DI
	DECQ CX
	JNZ  dloop1

dstore:
	VBROADCASTSS alpha+56(FP), Z0
	VMULPS Z0, Z4, Z4
	VMULPS Z0, Z5, Z5
	VMULPS Z0, Z6, Z6
	VMULPS Z0, Z7, Z7
	VMULPS Z0, Z8, Z8
	VMULPS Z0, Z9, Z9

	MOVL beta+60(FP), AX
	SHLL $1, AX // drop the sign: -0 is 0 too
	JZ   dnobeta

	VBROADCASTSS beta+60(FP), Z1
	VFMADD231PS (DX), Z1, Z4
	VFMADD231PS (DX)(R8*1), Z1, Z5
	VFMADD231PS (DX)(R8*2), Z1, Z6
	VFMADD231PS (R9), Z1, Z7
	VFMADD231PS (R9)(R8*1), Z1, Z8
	VFMADD231PS (R9)(R8*2), Z1, Z9

dnobeta:
	VMOVUPS Z4, (DX)
	VMOVUPS Z5, (DX)(R8*1)
	VMOVUPS Z6, (DX)(R8*2)
	VMOVUPS Z7, (R9)
	VMOVUPS Z8, (R9)(R8*1)
	VMOVUPS Z9, (R9)(R8*2)
	VZEROUPPER
	RET

// One pair step of the 6x32 dot kernel: two B panels (at boff(DI) and
// boff(DI)(R13*1)) in Z0, Z1; row r accumulates into Z(4+2r), Z(5+2r).
#define DOTSTEPW(boff) \
	VMOVDQU32 boff(DI), Z0 \
	VMOVDQU32 boff(DI)(R13*1), Z1 \
	DP0_Z0_Z4 \
	DP0_Z1_Z5 \
	DP1_Z0_Z6 \
	DP1_Z1_Z7 \
	DP2_Z0_Z8 \
	DP2_Z1_Z9 \
	DP3_Z0_Z10 \
	DP3_Z1_Z11 \
	DP4_Z0_Z12 \
	DP4_Z1_Z13 \
	DP5_Z0_Z14 \
	DP5_Z1_Z15 \
	ADDQ R12, SI \
	ADDQ R12, R11

// func kernDot6x32(kp int, a *uint16, rsa, csa int, b *uint32, c *float32, ldc int, alpha, beta float32)
//
// Two adjacent 6x16 dot tiles: the second B panel follows the first
// (at b + 16·kp dwords). Each element of C gets kernDot6x16's
// instructions in the same order, so the bits are its.
TEXT ·kernDot6x32(SB), NOSPLIT, $0-64
	MOVQ kp+0(FP), CX
	MOVQ CX, R13
	SHLQ $6, R13 // 16·kp dwords: the second panel's offset in bytes
	MOVQ a+8(FP), SI
	MOVQ rsa+16(FP), R10
	SHLQ $1, R10
	MOVQ csa+24(FP), R12
	SHLQ $1, R12
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
	JZ   dwtail

dwloop4:
	PREFETCHT0 384(DI)
	PREFETCHT0 384(DI)(R13*1)
	DOTSTEPW(0)
	DOTSTEPW(64)
	PREFETCHT0 448(DI)
	PREFETCHT0 448(DI)(R13*1)
	DOTSTEPW(128)
	DOTSTEPW(192)
	ADDQ $256, DI
	DECQ BX
	JNZ  dwloop4

dwtail:
	TESTQ CX, CX
	JZ    dwstore

dwloop1:
	DOTSTEPW(0)
	ADDQ $64, DI
	DECQ CX
	JNZ  dwloop1

dwstore:
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
	JZ   dwnobeta

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

dwnobeta:
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

// func packBNDotAVX2(b *uint16, ldb int, np int, d *uint32)
//
// Packs np pair steps of 16 columns of a row-major bf16 B (row stride ldb)
// into a pair panel: d[q·16 + j] = b[2q·ldb + j] | b[(2q+1)·ldb + j]<<16
// (each pair of rows interleaved word by word).
TEXT ·packBNDotAVX2(SB), NOSPLIT, $0-32
	MOVQ b+0(FP), SI
	MOVQ ldb+8(FP), BX
	SHLQ $1, BX // B's row stride in bytes
	MOVQ np+16(FP), CX
	MOVQ d+24(FP), DI

ploop:
	VMOVDQU (SI), X0 // the even row, columns 0-7
	VMOVDQU 16(SI), X1 // columns 8-15
	VMOVDQU (SI)(BX*1), X2 // the odd row
	VMOVDQU 16(SI)(BX*1), X3
	VPUNPCKLWD X2, X0, X4 // columns 0-3: even in the low word
	VPUNPCKHWD X2, X0, X5
	VPUNPCKLWD X3, X1, X6
	VPUNPCKHWD X3, X1, X7
	VMOVDQU X4, (DI)
	VMOVDQU X5, 16(DI)
	VMOVDQU X6, 32(DI)
	VMOVDQU X7, 48(DI)
	LEAQ (SI)(BX*2), SI
	ADDQ $64, DI
	DECQ CX
	JNZ  ploop
	RET

// func packATDotAVX2(a *uint16, lda int, np int, nq int, d *uint32, pstride int)
//
// Packs nq pair steps of np full 6-row panels of a transposed bf16 A
// (stored k×m, row stride lda; a at panel 0's first element of step 0):
// d[p·pstride + q·6 + i] = a[2q·lda + 6p + i] | a[(2q+1)·lda + 6p + i]<<16.
// Each panel's step reads 8 values of both rows (two past the panel).
TEXT ·packATDotAVX2(SB), NOSPLIT, $0-48
	MOVQ a+0(FP), SI
	MOVQ lda+8(FP), BX
	SHLQ $1, BX // A's row stride in bytes
	MOVQ np+16(FP), R8
	MOVQ nq+24(FP), CX
	MOVQ d+32(FP), DI
	MOVQ pstride+40(FP), R9
	SHLQ $2, R9 // the panels' stride in bytes

aqloop:
	MOVQ SI, R10 // step q's even row at panel 0
	MOVQ DI, R11 // panel 0's dwords of step q
	MOVQ R8, DX

aploop:
	VMOVDQU (R10), X0 // the even row's 8 values from the panel's first
	VMOVDQU (R10)(BX*1), X1 // the odd row's
	VPUNPCKLWD X1, X0, X2 // rows 0-3: the even value in the low word
	VPUNPCKHWD X1, X0, X3 // rows 4-7 (4 and 5 stored)
	VMOVDQU X2, (R11)
	VMOVQ X3, 16(R11)
	ADDQ $12, R10
	ADDQ R9, R11
	DECQ DX
	JNZ  aploop

	LEAQ (SI)(BX*2), SI
	ADDQ $24, DI
	DECQ CX
	JNZ  aqloop
	RET
