// simd_amd64.s: the AVX2 kernels of simd.go. The vc_* tables are 8 copies
// of one float32 (or uint32) constant each: the scalar code's constants,
// rounded to float32 exactly as the Go compiler rounds them.

#include "textflag.h"

DATA vc_log2e<>+0(SB)/4, $0x3fb8aa3b
DATA vc_log2e<>+4(SB)/4, $0x3fb8aa3b
DATA vc_log2e<>+8(SB)/4, $0x3fb8aa3b
DATA vc_log2e<>+12(SB)/4, $0x3fb8aa3b
DATA vc_log2e<>+16(SB)/4, $0x3fb8aa3b
DATA vc_log2e<>+20(SB)/4, $0x3fb8aa3b
DATA vc_log2e<>+24(SB)/4, $0x3fb8aa3b
DATA vc_log2e<>+28(SB)/4, $0x3fb8aa3b
GLOBL vc_log2e<>(SB), RODATA|NOPTR, $32
DATA vc_half<>+0(SB)/4, $0x3f000000
DATA vc_half<>+4(SB)/4, $0x3f000000
DATA vc_half<>+8(SB)/4, $0x3f000000
DATA vc_half<>+12(SB)/4, $0x3f000000
DATA vc_half<>+16(SB)/4, $0x3f000000
DATA vc_half<>+20(SB)/4, $0x3f000000
DATA vc_half<>+24(SB)/4, $0x3f000000
DATA vc_half<>+28(SB)/4, $0x3f000000
GLOBL vc_half<>(SB), RODATA|NOPTR, $32
DATA vc_ln2hi<>+0(SB)/4, $0x3f318000
DATA vc_ln2hi<>+4(SB)/4, $0x3f318000
DATA vc_ln2hi<>+8(SB)/4, $0x3f318000
DATA vc_ln2hi<>+12(SB)/4, $0x3f318000
DATA vc_ln2hi<>+16(SB)/4, $0x3f318000
DATA vc_ln2hi<>+20(SB)/4, $0x3f318000
DATA vc_ln2hi<>+24(SB)/4, $0x3f318000
DATA vc_ln2hi<>+28(SB)/4, $0x3f318000
GLOBL vc_ln2hi<>(SB), RODATA|NOPTR, $32
DATA vc_ln2lo<>+0(SB)/4, $0xb95e8083
DATA vc_ln2lo<>+4(SB)/4, $0xb95e8083
DATA vc_ln2lo<>+8(SB)/4, $0xb95e8083
DATA vc_ln2lo<>+12(SB)/4, $0xb95e8083
DATA vc_ln2lo<>+16(SB)/4, $0xb95e8083
DATA vc_ln2lo<>+20(SB)/4, $0xb95e8083
DATA vc_ln2lo<>+24(SB)/4, $0xb95e8083
DATA vc_ln2lo<>+28(SB)/4, $0xb95e8083
GLOBL vc_ln2lo<>(SB), RODATA|NOPTR, $32
DATA vc_explo<>+0(SB)/4, $0xc2aeac4f
DATA vc_explo<>+4(SB)/4, $0xc2aeac4f
DATA vc_explo<>+8(SB)/4, $0xc2aeac4f
DATA vc_explo<>+12(SB)/4, $0xc2aeac4f
DATA vc_explo<>+16(SB)/4, $0xc2aeac4f
DATA vc_explo<>+20(SB)/4, $0xc2aeac4f
DATA vc_explo<>+24(SB)/4, $0xc2aeac4f
DATA vc_explo<>+28(SB)/4, $0xc2aeac4f
GLOBL vc_explo<>(SB), RODATA|NOPTR, $32
DATA vc_p7<>+0(SB)/4, $0x39500d01
DATA vc_p7<>+4(SB)/4, $0x39500d01
DATA vc_p7<>+8(SB)/4, $0x39500d01
DATA vc_p7<>+12(SB)/4, $0x39500d01
DATA vc_p7<>+16(SB)/4, $0x39500d01
DATA vc_p7<>+20(SB)/4, $0x39500d01
DATA vc_p7<>+24(SB)/4, $0x39500d01
DATA vc_p7<>+28(SB)/4, $0x39500d01
GLOBL vc_p7<>(SB), RODATA|NOPTR, $32
DATA vc_p6<>+0(SB)/4, $0x3ab60b61
DATA vc_p6<>+4(SB)/4, $0x3ab60b61
DATA vc_p6<>+8(SB)/4, $0x3ab60b61
DATA vc_p6<>+12(SB)/4, $0x3ab60b61
DATA vc_p6<>+16(SB)/4, $0x3ab60b61
DATA vc_p6<>+20(SB)/4, $0x3ab60b61
DATA vc_p6<>+24(SB)/4, $0x3ab60b61
DATA vc_p6<>+28(SB)/4, $0x3ab60b61
GLOBL vc_p6<>(SB), RODATA|NOPTR, $32
DATA vc_p5<>+0(SB)/4, $0x3c088889
DATA vc_p5<>+4(SB)/4, $0x3c088889
DATA vc_p5<>+8(SB)/4, $0x3c088889
DATA vc_p5<>+12(SB)/4, $0x3c088889
DATA vc_p5<>+16(SB)/4, $0x3c088889
DATA vc_p5<>+20(SB)/4, $0x3c088889
DATA vc_p5<>+24(SB)/4, $0x3c088889
DATA vc_p5<>+28(SB)/4, $0x3c088889
GLOBL vc_p5<>(SB), RODATA|NOPTR, $32
DATA vc_p4<>+0(SB)/4, $0x3d2aaaab
DATA vc_p4<>+4(SB)/4, $0x3d2aaaab
DATA vc_p4<>+8(SB)/4, $0x3d2aaaab
DATA vc_p4<>+12(SB)/4, $0x3d2aaaab
DATA vc_p4<>+16(SB)/4, $0x3d2aaaab
DATA vc_p4<>+20(SB)/4, $0x3d2aaaab
DATA vc_p4<>+24(SB)/4, $0x3d2aaaab
DATA vc_p4<>+28(SB)/4, $0x3d2aaaab
GLOBL vc_p4<>(SB), RODATA|NOPTR, $32
DATA vc_p3<>+0(SB)/4, $0x3e2aaaab
DATA vc_p3<>+4(SB)/4, $0x3e2aaaab
DATA vc_p3<>+8(SB)/4, $0x3e2aaaab
DATA vc_p3<>+12(SB)/4, $0x3e2aaaab
DATA vc_p3<>+16(SB)/4, $0x3e2aaaab
DATA vc_p3<>+20(SB)/4, $0x3e2aaaab
DATA vc_p3<>+24(SB)/4, $0x3e2aaaab
DATA vc_p3<>+28(SB)/4, $0x3e2aaaab
GLOBL vc_p3<>(SB), RODATA|NOPTR, $32
DATA vc_one<>+0(SB)/4, $0x3f800000
DATA vc_one<>+4(SB)/4, $0x3f800000
DATA vc_one<>+8(SB)/4, $0x3f800000
DATA vc_one<>+12(SB)/4, $0x3f800000
DATA vc_one<>+16(SB)/4, $0x3f800000
DATA vc_one<>+20(SB)/4, $0x3f800000
DATA vc_one<>+24(SB)/4, $0x3f800000
DATA vc_one<>+28(SB)/4, $0x3f800000
GLOBL vc_one<>(SB), RODATA|NOPTR, $32
DATA vc_c9<>+0(SB)/4, $0x3cb327a4
DATA vc_c9<>+4(SB)/4, $0x3cb327a4
DATA vc_c9<>+8(SB)/4, $0x3cb327a4
DATA vc_c9<>+12(SB)/4, $0x3cb327a4
DATA vc_c9<>+16(SB)/4, $0x3cb327a4
DATA vc_c9<>+20(SB)/4, $0x3cb327a4
DATA vc_c9<>+24(SB)/4, $0x3cb327a4
DATA vc_c9<>+28(SB)/4, $0x3cb327a4
GLOBL vc_c9<>(SB), RODATA|NOPTR, $32
DATA vc_c7<>+0(SB)/4, $0xbd5d0dd1
DATA vc_c7<>+4(SB)/4, $0xbd5d0dd1
DATA vc_c7<>+8(SB)/4, $0xbd5d0dd1
DATA vc_c7<>+12(SB)/4, $0xbd5d0dd1
DATA vc_c7<>+16(SB)/4, $0xbd5d0dd1
DATA vc_c7<>+20(SB)/4, $0xbd5d0dd1
DATA vc_c7<>+24(SB)/4, $0xbd5d0dd1
DATA vc_c7<>+28(SB)/4, $0xbd5d0dd1
GLOBL vc_c7<>(SB), RODATA|NOPTR, $32
DATA vc_c5<>+0(SB)/4, $0x3e088889
DATA vc_c5<>+4(SB)/4, $0x3e088889
DATA vc_c5<>+8(SB)/4, $0x3e088889
DATA vc_c5<>+12(SB)/4, $0x3e088889
DATA vc_c5<>+16(SB)/4, $0x3e088889
DATA vc_c5<>+20(SB)/4, $0x3e088889
DATA vc_c5<>+24(SB)/4, $0x3e088889
DATA vc_c5<>+28(SB)/4, $0x3e088889
GLOBL vc_c5<>(SB), RODATA|NOPTR, $32
DATA vc_c3<>+0(SB)/4, $0xbeaaaaab
DATA vc_c3<>+4(SB)/4, $0xbeaaaaab
DATA vc_c3<>+8(SB)/4, $0xbeaaaaab
DATA vc_c3<>+12(SB)/4, $0xbeaaaaab
DATA vc_c3<>+16(SB)/4, $0xbeaaaaab
DATA vc_c3<>+20(SB)/4, $0xbeaaaaab
DATA vc_c3<>+24(SB)/4, $0xbeaaaaab
DATA vc_c3<>+28(SB)/4, $0xbeaaaaab
GLOBL vc_c3<>(SB), RODATA|NOPTR, $32
DATA vc_eighth<>+0(SB)/4, $0x3e000000
DATA vc_eighth<>+4(SB)/4, $0x3e000000
DATA vc_eighth<>+8(SB)/4, $0x3e000000
DATA vc_eighth<>+12(SB)/4, $0x3e000000
DATA vc_eighth<>+16(SB)/4, $0x3e000000
DATA vc_eighth<>+20(SB)/4, $0x3e000000
DATA vc_eighth<>+24(SB)/4, $0x3e000000
DATA vc_eighth<>+28(SB)/4, $0x3e000000
GLOBL vc_eighth<>(SB), RODATA|NOPTR, $32
DATA vc_mtwo<>+0(SB)/4, $0xc0000000
DATA vc_mtwo<>+4(SB)/4, $0xc0000000
DATA vc_mtwo<>+8(SB)/4, $0xc0000000
DATA vc_mtwo<>+12(SB)/4, $0xc0000000
DATA vc_mtwo<>+16(SB)/4, $0xc0000000
DATA vc_mtwo<>+20(SB)/4, $0xc0000000
DATA vc_mtwo<>+24(SB)/4, $0xc0000000
DATA vc_mtwo<>+28(SB)/4, $0xc0000000
GLOBL vc_mtwo<>(SB), RODATA|NOPTR, $32
DATA vc_gcoef<>+0(SB)/4, $0x3d372713
DATA vc_gcoef<>+4(SB)/4, $0x3d372713
DATA vc_gcoef<>+8(SB)/4, $0x3d372713
DATA vc_gcoef<>+12(SB)/4, $0x3d372713
DATA vc_gcoef<>+16(SB)/4, $0x3d372713
DATA vc_gcoef<>+20(SB)/4, $0x3d372713
DATA vc_gcoef<>+24(SB)/4, $0x3d372713
DATA vc_gcoef<>+28(SB)/4, $0x3d372713
GLOBL vc_gcoef<>(SB), RODATA|NOPTR, $32
DATA vc_gscale<>+0(SB)/4, $0x3f4c422a
DATA vc_gscale<>+4(SB)/4, $0x3f4c422a
DATA vc_gscale<>+8(SB)/4, $0x3f4c422a
DATA vc_gscale<>+12(SB)/4, $0x3f4c422a
DATA vc_gscale<>+16(SB)/4, $0x3f4c422a
DATA vc_gscale<>+20(SB)/4, $0x3f4c422a
DATA vc_gscale<>+24(SB)/4, $0x3f4c422a
DATA vc_gscale<>+28(SB)/4, $0x3f4c422a
GLOBL vc_gscale<>(SB), RODATA|NOPTR, $32
DATA vc_absmask<>+0(SB)/4, $0x7fffffff
DATA vc_absmask<>+4(SB)/4, $0x7fffffff
DATA vc_absmask<>+8(SB)/4, $0x7fffffff
DATA vc_absmask<>+12(SB)/4, $0x7fffffff
DATA vc_absmask<>+16(SB)/4, $0x7fffffff
DATA vc_absmask<>+20(SB)/4, $0x7fffffff
DATA vc_absmask<>+24(SB)/4, $0x7fffffff
DATA vc_absmask<>+28(SB)/4, $0x7fffffff
GLOBL vc_absmask<>(SB), RODATA|NOPTR, $32
DATA vc_signmask<>+0(SB)/4, $0x80000000
DATA vc_signmask<>+4(SB)/4, $0x80000000
DATA vc_signmask<>+8(SB)/4, $0x80000000
DATA vc_signmask<>+12(SB)/4, $0x80000000
DATA vc_signmask<>+16(SB)/4, $0x80000000
DATA vc_signmask<>+20(SB)/4, $0x80000000
DATA vc_signmask<>+24(SB)/4, $0x80000000
DATA vc_signmask<>+28(SB)/4, $0x80000000
GLOBL vc_signmask<>(SB), RODATA|NOPTR, $32
DATA vc_i127<>+0(SB)/4, $0x7f
DATA vc_i127<>+4(SB)/4, $0x7f
DATA vc_i127<>+8(SB)/4, $0x7f
DATA vc_i127<>+12(SB)/4, $0x7f
DATA vc_i127<>+16(SB)/4, $0x7f
DATA vc_i127<>+20(SB)/4, $0x7f
DATA vc_i127<>+24(SB)/4, $0x7f
DATA vc_i127<>+28(SB)/4, $0x7f
GLOBL vc_i127<>(SB), RODATA|NOPTR, $32
DATA vc_r7fff<>+0(SB)/4, $0x7fff
DATA vc_r7fff<>+4(SB)/4, $0x7fff
DATA vc_r7fff<>+8(SB)/4, $0x7fff
DATA vc_r7fff<>+12(SB)/4, $0x7fff
DATA vc_r7fff<>+16(SB)/4, $0x7fff
DATA vc_r7fff<>+20(SB)/4, $0x7fff
DATA vc_r7fff<>+24(SB)/4, $0x7fff
DATA vc_r7fff<>+28(SB)/4, $0x7fff
GLOBL vc_r7fff<>(SB), RODATA|NOPTR, $32
DATA vc_one16<>+0(SB)/4, $0x1
DATA vc_one16<>+4(SB)/4, $0x1
DATA vc_one16<>+8(SB)/4, $0x1
DATA vc_one16<>+12(SB)/4, $0x1
DATA vc_one16<>+16(SB)/4, $0x1
DATA vc_one16<>+20(SB)/4, $0x1
DATA vc_one16<>+24(SB)/4, $0x1
DATA vc_one16<>+28(SB)/4, $0x1
GLOBL vc_one16<>(SB), RODATA|NOPTR, $32
DATA vc_inf<>+0(SB)/4, $0x7f800000
DATA vc_inf<>+4(SB)/4, $0x7f800000
DATA vc_inf<>+8(SB)/4, $0x7f800000
DATA vc_inf<>+12(SB)/4, $0x7f800000
DATA vc_inf<>+16(SB)/4, $0x7f800000
DATA vc_inf<>+20(SB)/4, $0x7f800000
DATA vc_inf<>+24(SB)/4, $0x7f800000
DATA vc_inf<>+28(SB)/4, $0x7f800000
GLOBL vc_inf<>(SB), RODATA|NOPTR, $32
DATA vc_q40<>+0(SB)/4, $0x40
DATA vc_q40<>+4(SB)/4, $0x40
DATA vc_q40<>+8(SB)/4, $0x40
DATA vc_q40<>+12(SB)/4, $0x40
DATA vc_q40<>+16(SB)/4, $0x40
DATA vc_q40<>+20(SB)/4, $0x40
DATA vc_q40<>+24(SB)/4, $0x40
DATA vc_q40<>+28(SB)/4, $0x40
GLOBL vc_q40<>(SB), RODATA|NOPTR, $32
DATA vc_g3coef<>+0(SB)/4, $0x3e095d4e
DATA vc_g3coef<>+4(SB)/4, $0x3e095d4e
DATA vc_g3coef<>+8(SB)/4, $0x3e095d4e
DATA vc_g3coef<>+12(SB)/4, $0x3e095d4e
DATA vc_g3coef<>+16(SB)/4, $0x3e095d4e
DATA vc_g3coef<>+20(SB)/4, $0x3e095d4e
DATA vc_g3coef<>+24(SB)/4, $0x3e095d4e
DATA vc_g3coef<>+28(SB)/4, $0x3e095d4e
GLOBL vc_g3coef<>(SB), RODATA|NOPTR, $32

// EXPNEG sets X = expNeg32(X) lane by lane with the scalar code's exact
// sequence of float32 operations (no FMA), so the bits match it; N, P, M, T
// are clobbered.
#define EXPNEG(X, N, P, M, T) \
	VCMPPS $1, vc_explo<>(SB), X, M; \
	VMULPS vc_log2e<>(SB), X, N; \
	VSUBPS vc_half<>(SB), N, N; \
	VCVTTPS2DQ N, N; \
	VCVTDQ2PS N, P; \
	VMULPS vc_ln2hi<>(SB), P, T; \
	VSUBPS T, X, X; \
	VMULPS vc_ln2lo<>(SB), P, T; \
	VSUBPS T, X, X; \
	VMULPS vc_p7<>(SB), X, P; \
	VADDPS vc_p6<>(SB), P, P; \
	VMULPS X, P, P; \
	VADDPS vc_p5<>(SB), P, P; \
	VMULPS X, P, P; \
	VADDPS vc_p4<>(SB), P, P; \
	VMULPS X, P, P; \
	VADDPS vc_p3<>(SB), P, P; \
	VMULPS X, P, P; \
	VADDPS vc_half<>(SB), P, P; \
	VMULPS X, P, P; \
	VADDPS vc_one<>(SB), P, P; \
	VMULPS X, P, P; \
	VADDPS vc_one<>(SB), P, P; \
	VPADDD vc_i127<>(SB), N, N; \
	VPSLLD $23, N, N; \
	VMULPS N, P, P; \
	VANDNPS P, M, X

// TANH sets X = tanh32(X) lane by lane (the scalar code's operations in
// its order); A, S, E, T1..T4 are clobbered.
#define TANH(X, A, S, E, T1, T2, T3, T4) \
	VANDPS vc_absmask<>(SB), X, A; \
	VANDPS vc_signmask<>(SB), X, X; \
	VMULPS A, A, S; \
	VMULPS vc_c9<>(SB), S, T1; \
	VADDPS vc_c7<>(SB), T1, T1; \
	VMULPS S, T1, T1; \
	VADDPS vc_c5<>(SB), T1, T1; \
	VMULPS S, T1, T1; \
	VADDPS vc_c3<>(SB), T1, T1; \
	VMULPS S, T1, T1; \
	VADDPS vc_one<>(SB), T1, T1; \
	VMULPS T1, A, S; \
	VMULPS vc_mtwo<>(SB), A, E; \
	EXPNEG(E, T1, T2, T3, T4); \
	VADDPS vc_one<>(SB), E, T1; \
	VMOVUPS vc_one<>(SB), T2; \
	VSUBPS E, T2, T2; \
	VDIVPS T1, T2, T2; \
	VCMPPS $1, vc_eighth<>(SB), A, T1; \
	VBLENDVPS T1, S, T2, T2; \
	VORPS T2, X, X

// func geluForwardAVX2(out, x *float32, n int)
// n is a multiple of 8.
TEXT ·geluForwardAVX2(SB), NOSPLIT, $0-24
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   gfdone
gfloop:
	VMOVUPS (SI), Y0
	VMULPS  Y0, Y0, Y1
	VMULPS  Y0, Y1, Y1
	VMULPS  vc_gcoef<>(SB), Y1, Y1
	VADDPS  Y0, Y1, Y1
	VMULPS  vc_gscale<>(SB), Y1, Y1
	TANH(Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8)
	VADDPS  vc_one<>(SB), Y1, Y1
	VMULPS  Y0, Y1, Y1
	VMULPS  vc_half<>(SB), Y1, Y1
	VMOVUPS Y1, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     gfloop
gfdone:
	VZEROUPPER
	RET

// func tanhAVX2(out, x *float32, n int)
// n is a multiple of 8.
TEXT ·tanhAVX2(SB), NOSPLIT, $0-24
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   thdone
thloop:
	VMOVUPS (SI), Y1
	TANH(Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8)
	VMOVUPS Y1, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     thloop
thdone:
	VZEROUPPER
	RET

// func geluBackwardAVX2(dinp, x, dout *float32, n int)
// n is a multiple of 8.
TEXT ·geluBackwardAVX2(SB), NOSPLIT, $0-32
	MOVQ dinp+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ dout+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ   gbdone
gbloop:
	VMOVUPS (SI), Y0
	VMULPS  Y0, Y0, Y1
	VMULPS  Y0, Y1, Y2
	VMULPS  vc_gcoef<>(SB), Y2, Y2
	VADDPS  Y0, Y2, Y2
	VMULPS  vc_gscale<>(SB), Y2, Y2
	TANH(Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9)
	VADDPS  vc_one<>(SB), Y2, Y3
	VMULPS  vc_half<>(SB), Y3, Y3
	VMULPS  Y2, Y2, Y4
	VMOVUPS vc_one<>(SB), Y5
	VSUBPS  Y4, Y5, Y5
	VMULPS  vc_half<>(SB), Y0, Y4
	VMULPS  Y5, Y4, Y4
	VMULPS  vc_gscale<>(SB), Y4, Y4
	VMULPS  vc_g3coef<>(SB), Y1, Y1
	VADDPS  vc_one<>(SB), Y1, Y1
	VMULPS  Y1, Y4, Y4
	VADDPS  Y4, Y3, Y3
	VMULPS  (DX), Y3, Y3
	VMOVUPS Y3, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	DECQ    CX
	JNZ     gbloop
gbdone:
	VZEROUPPER
	RET

// func expSubSumAVX2(x *float32, n int, m float32) float32
// x[i] = expNeg32(x[i] - m) for i < n, a multiple of 8; returns their sum
// (eight lane sums, then pairwise).
TEXT ·expSubSumAVX2(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS m+16(FP), Y10
	VXORPS       Y11, Y11, Y11
	SHRQ         $3, CX
	JZ           esdone
esloop:
	VMOVUPS (SI), Y0
	VSUBPS  Y10, Y0, Y0
	EXPNEG(Y0, Y1, Y2, Y3, Y4)
	VMOVUPS Y0, (SI)
	VADDPS  Y0, Y11, Y11
	ADDQ    $32, SI
	DECQ    CX
	JNZ     esloop
esdone:
	VEXTRACTF128 $1, Y11, X1
	VADDPS       X1, X11, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+24(FP)
	RET

// func scaleAVX2(x *float32, n int, s float32)
// x[i] *= s for i < n, a multiple of 8.
TEXT ·scaleAVX2(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS s+16(FP), Y10
	SHRQ         $3, CX
	JZ           scdone
scloop:
	VMULPS  (SI), Y10, Y0
	VMOVUPS Y0, (SI)
	ADDQ    $32, SI
	DECQ    CX
	JNZ     scloop
scdone:
	VZEROUPPER
	RET

// func bf16ToF32AVX2(dst *float32, src *uint16, n int)
// n is a multiple of 8.
TEXT ·bf16ToF32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   bwdone
bwloop:
	VPMOVZXWD (SI), Y0
	VPSLLD    $16, Y0, Y0
	VMOVDQU   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       bwloop
bwdone:
	VZEROUPPER
	RET

// ROUNDBF sets X's lanes to tensor.BF16FromF32 of X's fp32 lanes (in the
// low 16 bits): round to nearest even, NaN kept quiet with its sign.
#define ROUNDBF(X, T1, T2, T3) \
	VPSRLD    $16, X, T1; \
	VPAND     vc_one16<>(SB), T1, T2; \
	VPADDD    vc_r7fff<>(SB), T2, T2; \
	VPADDD    X, T2, T2; \
	VPSRLD    $16, T2, T2; \
	VPOR      vc_q40<>(SB), T1, T1; \
	VPAND     vc_absmask<>(SB), X, T3; \
	VPCMPGTD  vc_inf<>(SB), T3, T3; \
	VPBLENDVB T3, T1, T2, X

// func f32ToBF16AVX2(dst *uint16, src *float32, n int)
// n is a multiple of 16.
TEXT ·f32ToBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   bndone
bnloop:
	VMOVDQU   (SI), Y0
	VMOVDQU   32(SI), Y1
	ROUNDBF(Y0, Y2, Y3, Y4)
	ROUNDBF(Y1, Y5, Y6, Y7)
	VPACKUSDW Y1, Y0, Y0
	VPERMQ    $0xD8, Y0, Y0
	VMOVDQU   Y0, (DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       bnloop
bndone:
	VZEROUPPER
	RET
