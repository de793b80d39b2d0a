// gemv_amd64.s: the AVX2 + FMA kernels of gemv.go: four rows of a weight
// matrix against one input row, streaming the rows once.

#include "textflag.h"

// PFQ_SHIFT: the rows kernels prefetch the weights 2^PFQ_SHIFT rows ahead
// of those they read.
#define PFQ_SHIFT 4

// A quad of weight rows (SI: its first row, BX: a row's bytes):
// QUAD_BEGIN points R8, R9, R10 at rows 1-3 and zeroes the accumulators
// Y0-Y3; QUAD_OUT sums Y0-Y3 into out's next four floats and moves SI to the
// next quad. PREFETCH_FROM(reg) points reg at the rows 2^PFQ_SHIFT ahead of
// SI, and PREFETCH_AHEAD(reg, bytes) asks for the line at reg and moves it on
// by bytes: a kernel moves it by its rows' share of one step (a quad of 32
// bytes a row 128, with a second line asked for at reg+64; a quad of 16,
// 64; a pair of 32, 64; a pair of 16, 32).
#define QUAD_BEGIN \
	LEAQ   (SI)(BX*1), R8 \
	LEAQ   (R8)(BX*1), R9 \
	LEAQ   (R9)(BX*1), R10 \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3

#define PREFETCH_FROM(reg) \
	MOVQ BX, reg \
	SHLQ $PFQ_SHIFT, reg \
	ADDQ SI, reg

#define PREFETCH_AHEAD(reg, bytes) \
	PREFETCHT0 (reg) \
	ADDQ       $bytes, reg

#define QUAD_OUT \
	HSUM4 \
	VMOVUPS X0, (DI) \
	ADDQ    $16, DI \
	LEAQ    (R10)(BX*1), SI

// GEMV4_OUT sums Y0..Y3 = (x row 0, w row a), (0, b), (1, a), (1, b) and
// Y4..Y7 the same for x rows 2 and 3 into the pair's two outputs of each
// x row (DI, R13, R14, R15), and moves those pointers on by two floats.
#define GEMV4_OUT \
	HSUM4 \
	VMOVLPS X0, (DI) \
	VMOVHPS X0, (R13) \
	VMOVAPS Y4, Y0 \
	VMOVAPS Y5, Y1 \
	VMOVAPS Y6, Y2 \
	VMOVAPS Y7, Y3 \
	HSUM4 \
	VMOVLPS X0, (R14) \
	VMOVHPS X0, (R15) \
	ADDQ    $8, DI \
	ADDQ    $8, R13 \
	ADDQ    $8, R14 \
	ADDQ    $8, R15

// GEMV4_BEGIN loads the four x rows and output rows of xs and outs
// (pointers to [4]*float32), the row stride BX (bytes) and the steps a row
// R12 (C/8), and returns when there are none.
#define GEMV4_BEGIN(rowbytes) \
	MOVQ  w+0(FP), SI \
	MOVQ  C+8(FP), BX \
	MOVQ  BX, R12 \
	SHRQ  $3, R12 \
	SHLQ  $rowbytes, BX \
	MOVQ  xs+16(FP), AX \
	MOVQ  0(AX), DX \
	MOVQ  8(AX), R9 \
	MOVQ  16(AX), R10 \
	MOVQ  24(AX), R11 \
	MOVQ  outs+24(FP), AX \
	MOVQ  0(AX), DI \
	MOVQ  8(AX), R13 \
	MOVQ  16(AX), R14 \
	MOVQ  24(AX), R15 \
	MOVQ  pairs+32(FP), CX \
	TESTQ CX, CX \
	JZ    done \
	TESTQ R12, R12 \
	JZ    done

// GEMV4_PAIR zeroes the eight accumulators and points R8 at the rows
// 2^PFQ_SHIFT ahead of the pair (prefetched as the pair is read).
#define GEMV4_PAIR \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3 \
	VXORPS Y4, Y4, Y4 \
	VXORPS Y5, Y5, Y5 \
	VXORPS Y6, Y6, Y6 \
	VXORPS Y7, Y7, Y7 \
	PREFETCH_FROM(R8) \
	MOVQ   R12, CX \
	XORQ   AX, AX

// GEMV4_FMA8 adds the products of the widened weights Y8 (row a) and Y9
// (row b) with the 8 elements at AX of each x row.
#define GEMV4_FMA8 \
	VMOVUPS     (DX)(AX*1), Y10 \
	VFMADD231PS Y8, Y10, Y0 \
	VFMADD231PS Y9, Y10, Y1 \
	VMOVUPS     (R9)(AX*1), Y11 \
	VFMADD231PS Y8, Y11, Y2 \
	VFMADD231PS Y9, Y11, Y3 \
	VMOVUPS     (R10)(AX*1), Y12 \
	VFMADD231PS Y8, Y12, Y4 \
	VFMADD231PS Y9, Y12, Y5 \
	VMOVUPS     (R11)(AX*1), Y13 \
	VFMADD231PS Y8, Y13, Y6 \
	VFMADD231PS Y9, Y13, Y7

// func gemv4F32AVX2(w *float32, ldw int, x *float32, n int, acc *[32]float32)
// acc[8r+k] = Σ w[r·ldw+i]·x[i] over i < n (a multiple of 8) with i%8 == k,
// for rows r < 4, each step a fused multiply-add.
TEXT ·gemv4F32AVX2(SB), NOSPLIT, $0-40
	MOVQ   w+0(FP), SI
	MOVQ   ldw+8(FP), BX
	SHLQ   $2, BX
	MOVQ   x+16(FP), DX
	MOVQ   n+24(FP), CX
	MOVQ   acc+32(FP), DI
	QUAD_BEGIN
	SHRQ   $3, CX
	JZ     g4fdone
g4floop:
	VMOVUPS     (DX), Y4
	VFMADD231PS (SI), Y4, Y0
	VFMADD231PS (R8), Y4, Y1
	VFMADD231PS (R9), Y4, Y2
	VFMADD231PS (R10), Y4, Y3
	ADDQ        $32, SI
	ADDQ        $32, R8
	ADDQ        $32, R9
	ADDQ        $32, R10
	ADDQ        $32, DX
	DECQ        CX
	JNZ         g4floop
g4fdone:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VZEROUPPER
	RET

// func gemv4BF16AVX2(w *uint16, ldw int, x *float32, n int, acc *[32]float32)
// gemv4F32AVX2 with bf16 weights, widened exactly in registers.
TEXT ·gemv4BF16AVX2(SB), NOSPLIT, $0-40
	MOVQ   w+0(FP), SI
	MOVQ   ldw+8(FP), BX
	SHLQ   $1, BX
	MOVQ   x+16(FP), DX
	MOVQ   n+24(FP), CX
	MOVQ   acc+32(FP), DI
	QUAD_BEGIN
	SHRQ   $3, CX
	JZ     g4bdone
g4bloop:
	VMOVUPS     (DX), Y4
	VPMOVZXWD   (SI), Y5
	VPMOVZXWD   (R8), Y6
	VPMOVZXWD   (R9), Y7
	VPMOVZXWD   (R10), Y8
	VPSLLD      $16, Y5, Y5
	VPSLLD      $16, Y6, Y6
	VPSLLD      $16, Y7, Y7
	VPSLLD      $16, Y8, Y8
	VFMADD231PS Y5, Y4, Y0
	VFMADD231PS Y6, Y4, Y1
	VFMADD231PS Y7, Y4, Y2
	VFMADD231PS Y8, Y4, Y3
	ADDQ        $16, SI
	ADDQ        $16, R8
	ADDQ        $16, R9
	ADDQ        $16, R10
	ADDQ        $32, DX
	DECQ        CX
	JNZ         g4bloop
g4bdone:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VZEROUPPER
	RET

// func dotFMAAVX2(a, b *float32, n int) float32
// Σ a[i]·b[i] over i < n (a multiple of 8): two 8-lane fused multiply-add
// chains, added lane-wise and then as (l0+l4)+(l1+l5)... at the end.
TEXT ·dotFMAAVX2(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DX
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	SHRQ   $3, CX
	JZ     dfdone
	TESTQ  $1, CX
	JZ     dfpairs
	VMOVUPS     (SI), Y2
	VFMADD231PS (DX), Y2, Y0
	ADDQ        $32, SI
	ADDQ        $32, DX
	DECQ        CX
	JZ          dfdone
dfpairs:
	VMOVUPS     (SI), Y2
	VMOVUPS     32(SI), Y3
	VFMADD231PS (DX), Y2, Y0
	VFMADD231PS 32(DX), Y3, Y1
	ADDQ        $64, SI
	ADDQ        $64, DX
	SUBQ        $2, CX
	JNZ         dfpairs
dfdone:
	VADDPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	MOVSS        X0, ret+24(FP)
	VZEROUPPER
	RET

// func axpyAVX2(y, x *float32, a float32, n int)
// y[i] += a·x[i] over i < n (a multiple of 8), fused multiply-adds.
TEXT ·axpyAVX2(SB), NOSPLIT, $0-32
	MOVQ         y+0(FP), DI
	MOVQ         x+8(FP), SI
	VBROADCASTSS a+16(FP), Y1
	MOVQ         n+24(FP), CX
	SHRQ         $3, CX
	JZ           axdone
axloop:
	VMOVUPS     (DI), Y0
	VFMADD231PS (SI), Y1, Y0
	VMOVUPS     Y0, (DI)
	ADDQ        $32, SI
	ADDQ        $32, DI
	DECQ        CX
	JNZ         axloop
axdone:
	VZEROUPPER
	RET

// HSUM4 sums each of Y0..Y3 across its 8 lanes into X0 = [Σ Y0, Σ Y1, Σ Y2, Σ Y3]
// (clobbers Y1, Y2).
#define HSUM4 \
	VHADDPS      Y1, Y0, Y0 \
	VHADDPS      Y3, Y2, Y2 \
	VHADDPS      Y2, Y0, Y0 \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS       X1, X0, X0

// func gemvRowsF32AVX2(w *float32, C int, x *float32, out *float32, quads int)
// out[4q+j] = Σ_i w[(4q+j)·C+i]·x[i] for q < quads, j < 4, over i < C (a
// multiple of 8): four rows at a time, fused multiply-adds in 8 lanes,
// summed across lanes in registers.
TEXT ·gemvRowsF32AVX2(SB), NOSPLIT, $0-40
	MOVQ  w+0(FP), SI
	MOVQ  C+8(FP), BX
	MOVQ  BX, R12
	SHRQ  $3, R12
	SHLQ  $2, BX
	MOVQ  x+16(FP), DX
	MOVQ  out+24(FP), DI
	MOVQ  quads+32(FP), R11
	TESTQ R11, R11
	JZ    grfdone
	TESTQ R12, R12
	JZ    grfdone
grfquad:
	QUAD_BEGIN
	MOVQ   R12, CX
	XORQ   AX, AX
	PREFETCH_FROM(R14)
grfinner:
	PREFETCHT0  64(R14)
	PREFETCH_AHEAD(R14, 128)
	VMOVUPS     (DX)(AX*1), Y4
	VFMADD231PS (SI)(AX*1), Y4, Y0
	VFMADD231PS (R8)(AX*1), Y4, Y1
	VFMADD231PS (R9)(AX*1), Y4, Y2
	VFMADD231PS (R10)(AX*1), Y4, Y3
	ADDQ        $32, AX
	DECQ        CX
	JNZ         grfinner
	QUAD_OUT
	DECQ        R11
	JNZ         grfquad
grfdone:
	VZEROUPPER
	RET

// func gemvRowsBF16AVX2(w *uint16, C int, x *float32, out *float32, quads int)
// gemvRowsF32AVX2 with bf16 weights, widened exactly in registers.
TEXT ·gemvRowsBF16AVX2(SB), NOSPLIT, $0-40
	MOVQ  w+0(FP), SI
	MOVQ  C+8(FP), BX
	MOVQ  BX, R12
	SHRQ  $3, R12
	SHLQ  $1, BX
	MOVQ  x+16(FP), DX
	MOVQ  out+24(FP), DI
	MOVQ  quads+32(FP), R11
	TESTQ R11, R11
	JZ    grbdone
	TESTQ R12, R12
	JZ    grbdone
grbquad:
	QUAD_BEGIN
	MOVQ   R12, CX
	XORQ   AX, AX
	MOVQ   DX, R13
	PREFETCH_FROM(R14)
grbinner:
	PREFETCH_AHEAD(R14, 64)
	VMOVUPS     (R13), Y4
	VPMOVZXWD   (SI)(AX*1), Y5
	VPMOVZXWD   (R8)(AX*1), Y6
	VPMOVZXWD   (R9)(AX*1), Y7
	VPMOVZXWD   (R10)(AX*1), Y8
	VPSLLD      $16, Y5, Y5
	VPSLLD      $16, Y6, Y6
	VPSLLD      $16, Y7, Y7
	VPSLLD      $16, Y8, Y8
	VFMADD231PS Y5, Y4, Y0
	VFMADD231PS Y6, Y4, Y1
	VFMADD231PS Y7, Y4, Y2
	VFMADD231PS Y8, Y4, Y3
	ADDQ        $16, AX
	ADDQ        $32, R13
	DECQ        CX
	JNZ         grbinner
	QUAD_OUT
	DECQ        R11
	JNZ         grbquad
grbdone:
	VZEROUPPER
	RET

// func gemvPairs4F32AVX2(w *float32, C int, xs *[4]*float32, outs *[4]*float32, pairs int)
// For pairs p < pairs of weight rows (a = 2p, b = 2p+1, each C floats, C a
// multiple of 8) and the four x rows xs[i]: outs[i][2p+j] = w[2p+j]·xs[i].
// Each weight is read once for four x rows (a batch of decode rows), where
// the one-row kernel reads it once a row. Rows may repeat (a batch of 2 or
// 3 passes its last row again: the same sums into the same place).
TEXT ·gemvPairs4F32AVX2(SB), NOSPLIT, $0-40
	GEMV4_BEGIN(2)
g4fpair:
	GEMV4_PAIR
g4finner:
	PREFETCH_AHEAD(R8, 64)
	VMOVUPS     (SI), Y8
	VMOVUPS     (SI)(BX*1), Y9
	GEMV4_FMA8
	ADDQ        $32, SI
	ADDQ        $32, AX
	DECQ        CX
	JNZ         g4finner
	GEMV4_OUT
	ADDQ        BX, SI
	DECQ        pairs+32(FP)
	JNZ         g4fpair
done:
	VZEROUPPER
	RET

// func gemvPairs4BF16AVX2(w *uint16, C int, xs *[4]*float32, outs *[4]*float32, pairs int)
// gemvPairs4F32AVX2 with bf16 weights, widened exactly in registers.
TEXT ·gemvPairs4BF16AVX2(SB), NOSPLIT, $0-40
	GEMV4_BEGIN(1)
g4bpair:
	GEMV4_PAIR
g4binner:
	PREFETCH_AHEAD(R8, 32)
	VPMOVZXWD   (SI), Y8
	VPMOVZXWD   (SI)(BX*1), Y9
	VPSLLD      $16, Y8, Y8
	VPSLLD      $16, Y9, Y9
	GEMV4_FMA8
	ADDQ        $16, SI
	ADDQ        $32, AX
	DECQ        CX
	JNZ         g4binner
	GEMV4_OUT
	ADDQ        BX, SI
	DECQ        pairs+32(FP)
	JNZ         g4bpair
done:
	VZEROUPPER
	RET

// func wsumF32AVX2(o *float32, v *float32, ldv int, a *float32, n int, cols int)
// o[c] = Σ_{j<n} a[j]·v[j*ldv+c] for c < cols (cols a multiple of 32), the
// terms added in order of j with fused multiply-adds (as n axpy calls would),
// 32 columns at a time in four registers: the weighted sum of the cached
// value rows of attention's decode step.
TEXT ·wsumF32AVX2(SB), NOSPLIT, $0-48
	MOVQ o+0(FP), DI
	MOVQ v+8(FP), SI
	MOVQ ldv+16(FP), R8
	SHLQ $2, R8
	MOVQ a+24(FP), R9
	MOVQ n+32(FP), R10
	MOVQ cols+40(FP), R11

wsum_cols:
	CMPQ R11, $0
	JLE  wsum_done
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ SI, AX
	MOVQ R9, BX
	MOVQ R10, CX

wsum_rows:
	CMPQ CX, $0
	JLE  wsum_store
	VBROADCASTSS (BX), Y4
	VFMADD231PS (AX), Y4, Y0
	VFMADD231PS 32(AX), Y4, Y1
	VFMADD231PS 64(AX), Y4, Y2
	VFMADD231PS 96(AX), Y4, Y3
	ADDQ R8, AX
	ADDQ $4, BX
	DECQ CX
	JMP  wsum_rows

wsum_store:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ $128, DI
	ADDQ $128, SI
	SUBQ $32, R11
	JMP  wsum_cols

wsum_done:
	VZEROUPPER
	RET
