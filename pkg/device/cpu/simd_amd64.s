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

// func expSubSumAVX2(x *float32, n int, m float32, sums *[4]float32)
// x[i] = expNeg32(x[i] - m) for i < n, a multiple of 8; sums[k] receives
// the sum of the x[i] with i%4 == k, each added in order of i (the scalar
// code's four partial sums exactly: the low half of each 8 first).
TEXT ·expSubSumAVX2(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS m+16(FP), Y10
	MOVQ         sums+24(FP), DI
	VXORPS       X11, X11, X11
	SHRQ         $3, CX
	JZ           esdone
esloop:
	VMOVUPS      (SI), Y0
	VSUBPS       Y10, Y0, Y0
	EXPNEG(Y0, Y1, Y2, Y3, Y4)
	VMOVUPS      Y0, (SI)
	VADDPS       X0, X11, X11
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X11, X11
	ADDQ         $32, SI
	DECQ         CX
	JNZ          esloop
esdone:
	VMOVUPS X11, (DI)
	VZEROUPPER
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

// func sum64AVX2(x *float32, n int, sums *[4]float64)
// sums[k] = Σ float64(x[i]) over i < n (a multiple of 8) with i%4 == k, in
// order of i: the scalar code's four partial sums exactly.
TEXT ·sum64AVX2(SB), NOSPLIT, $0-24
	MOVQ   x+0(FP), SI
	MOVQ   n+8(FP), CX
	MOVQ   sums+16(FP), DI
	VXORPD Y0, Y0, Y0
	SHRQ   $3, CX
	JZ     s6done
s6loop:
	VCVTPS2PD (SI), Y2
	VCVTPS2PD 16(SI), Y3
	VADDPD    Y2, Y0, Y0
	VADDPD    Y3, Y0, Y0
	ADDQ      $32, SI
	DECQ      CX
	JNZ       s6loop
s6done:
	VMOVUPD Y0, (DI)
	VZEROUPPER
	RET

// func sumSqDev64AVX2(x *float32, n int, m float64, sums *[4]float64)
// sums[k] = Σ (float64(x[i]) - m)² over i < n (a multiple of 8) with
// i%4 == k, in order of i, the square rounded before the add (no FMA): the
// scalar code's partial sums exactly.
TEXT ·sumSqDev64AVX2(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSD m+16(FP), Y4
	MOVQ         sums+24(FP), DI
	VXORPD       Y0, Y0, Y0
	SHRQ         $3, CX
	JZ           sqdone
sqloop:
	VCVTPS2PD (SI), Y2
	VCVTPS2PD 16(SI), Y3
	VSUBPD    Y4, Y2, Y2
	VSUBPD    Y4, Y3, Y3
	VMULPD    Y2, Y2, Y2
	VMULPD    Y3, Y3, Y3
	VADDPD    Y2, Y0, Y0
	VADDPD    Y3, Y0, Y0
	ADDQ      $32, SI
	DECQ      CX
	JNZ       sqloop
sqdone:
	VMOVUPD Y0, (DI)
	VZEROUPPER
	RET

// func lnNormAVX2(o, x, w, b *float32, n int, m, s float32)
// o[i] = (s·(x[i]-m))·w[i] + b[i] over n, a multiple of 8 (the scalar
// code's operations, unfused).
TEXT ·lnNormAVX2(SB), NOSPLIT, $0-48
	MOVQ         o+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         w+16(FP), DX
	MOVQ         b+24(FP), BX
	MOVQ         n+32(FP), CX
	VBROADCASTSS m+40(FP), Y4
	VBROADCASTSS s+44(FP), Y5
	SHRQ         $3, CX
	JZ           lndone
lnloop:
	VMOVUPS (SI), Y0
	VSUBPS  Y4, Y0, Y0
	VMULPS  Y0, Y5, Y0
	VMULPS  (DX), Y0, Y0
	VADDPS  (BX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, BX
	ADDQ    $32, DI
	DECQ    CX
	JNZ     lnloop
lndone:
	VZEROUPPER
	RET

// func lnBwdRowAVX2(di, dw, db, x, w, gr *float32, n int, m, s, dmf, dnmf float32)
// With nn = s·(x-m) and dn = w·g: db += g, dw += nn·g,
// di += s·((dn - dmf) - nn·dnmf), over n, a multiple of 8.
TEXT ·lnBwdRowAVX2(SB), NOSPLIT, $0-72
	MOVQ         di+0(FP), DI
	MOVQ         dw+8(FP), R8
	MOVQ         db+16(FP), R9
	MOVQ         x+24(FP), SI
	MOVQ         w+32(FP), DX
	MOVQ         gr+40(FP), BX
	MOVQ         n+48(FP), CX
	VBROADCASTSS m+56(FP), Y4
	VBROADCASTSS s+60(FP), Y5
	VBROADCASTSS dmf+64(FP), Y6
	VBROADCASTSS dnmf+68(FP), Y7
	SHRQ         $3, CX
	JZ           lrdone
lrloop:
	VMOVUPS (SI), Y0
	VSUBPS  Y4, Y0, Y0
	VMULPS  Y0, Y5, Y0
	VMOVUPS (BX), Y1
	VMULPS  (DX), Y1, Y2
	VADDPS  (R9), Y1, Y3
	VMOVUPS Y3, (R9)
	VMULPS  Y1, Y0, Y3
	VADDPS  (R8), Y3, Y3
	VMOVUPS Y3, (R8)
	VSUBPS  Y6, Y2, Y2
	VMULPS  Y7, Y0, Y3
	VSUBPS  Y3, Y2, Y2
	VMULPS  Y2, Y5, Y2
	VADDPS  (DI), Y2, Y2
	VMOVUPS Y2, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, BX
	ADDQ    $32, DI
	ADDQ    $32, R8
	ADDQ    $32, R9
	DECQ    CX
	JNZ     lrloop
lrdone:
	VZEROUPPER
	RET

// func adamWAVX2(p, gr, m, v *float32, n int, c *adamKernelConsts)
// One AdamW update over n, a multiple of 8, with the scalar code's float32
// operations in its order: gi = g·GS; pi = p·Decay; mi = base + W·(gi - m)
// with (base, W) = (m, W1) or (gi, W1-1); vi = v·B2 + (W2·gi)·gi;
// p = pi + Step·(mi / (sqrt(vi)/BC2 + Eps)).
TEXT ·adamWAVX2(SB), NOSPLIT, $0-48
	MOVQ         p+0(FP), DI
	MOVQ         gr+8(FP), SI
	MOVQ         m+16(FP), DX
	MOVQ         v+24(FP), BX
	MOVQ         n+32(FP), CX
	MOVQ         c+40(FP), AX
	VBROADCASTSS 0(AX), Y8   // GS
	VBROADCASTSS 4(AX), Y9   // Decay
	VBROADCASTSS 8(AX), Y10  // W (W1 or W1-1)
	VBROADCASTSS 12(AX), Y11 // B2
	VBROADCASTSS 16(AX), Y12 // W2
	VBROADCASTSS 20(AX), Y13 // BC2
	VBROADCASTSS 24(AX), Y14 // Eps
	VBROADCASTSS 28(AX), Y15 // Step
	VBROADCASTSS 32(AX), Y7  // base mask: all ones picks m (Small)
	SHRQ         $3, CX
	JZ           adone
aloop:
	VMULPS    (SI), Y8, Y0
	VMULPS    (DI), Y9, Y1
	VMOVUPS   (DX), Y2
	VSUBPS    Y2, Y0, Y3
	VMULPS    Y3, Y10, Y3
	VBLENDVPS Y7, Y2, Y0, Y4
	VADDPS    Y3, Y4, Y4
	VMOVUPS   Y4, (DX)
	VMULPS    (BX), Y11, Y5
	VMULPS    Y0, Y12, Y6
	VMULPS    Y0, Y6, Y6
	VADDPS    Y6, Y5, Y5
	VMOVUPS   Y5, (BX)
	VSQRTPS   Y5, Y5
	VDIVPS    Y13, Y5, Y5
	VADDPS    Y14, Y5, Y5
	VDIVPS    Y5, Y4, Y4
	VMULPS    Y15, Y4, Y4
	VADDPS    Y4, Y1, Y1
	VMOVUPS   Y1, (DI)
	ADDQ      $32, SI
	ADDQ      $32, DI
	ADDQ      $32, DX
	ADDQ      $32, BX
	DECQ      CX
	JNZ       aloop
adone:
	VZEROUPPER
	RET

// func addAVX2(dst, src *float32, n int)
// dst[i] += src[i] over n, a multiple of 8.
TEXT ·addAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   addone
adloop:
	VMOVUPS (DI), Y0
	VADDPS  (SI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     adloop
addone:
	VZEROUPPER
	RET

// func maxAVX2(x *float32, n int) float32
// The largest of x[0..n), n a positive multiple of 8, with NaNs skipped
// unless they come first in a lane, like the scalar loop's v > m.
TEXT ·maxAVX2(SB), NOSPLIT, $0-20
	MOVQ    x+0(FP), SI
	MOVQ    n+8(FP), CX
	VMOVUPS (SI), Y0
	ADDQ    $32, SI
	SHRQ    $3, CX
	DECQ    CX
	JZ      mxdone
mxloop:
	VMOVUPS (SI), Y1
	VMAXPS  Y0, Y1, Y0
	ADDQ    $32, SI
	DECQ    CX
	JNZ     mxloop
mxdone:
	VEXTRACTF128 $1, Y0, X1
	VMAXPS       X0, X1, X0
	VPERMILPS    $0x4E, X0, X1
	VMAXPS       X0, X1, X0
	VPERMILPS    $0xB1, X0, X1
	VMAXPS       X0, X1, X0
	VZEROUPPER
	MOVSS        X0, ret+16(FP)
	RET

// func softmaxBwdAVX2(a, da *float32, n int, s, scale float32)
// da[i] = (a[i]·(da[i] - s))·scale over n, a multiple of 8.
TEXT ·softmaxBwdAVX2(SB), NOSPLIT, $0-32
	MOVQ         a+0(FP), SI
	MOVQ         da+8(FP), DI
	MOVQ         n+16(FP), CX
	VBROADCASTSS s+24(FP), Y4
	VBROADCASTSS scale+28(FP), Y5
	SHRQ         $3, CX
	JZ           sbdone
sbloop:
	VMOVUPS (DI), Y0
	VSUBPS  Y4, Y0, Y0
	VMULPS  (SI), Y0, Y0
	VMULPS  Y5, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     sbloop
sbdone:
	VZEROUPPER
	RET

// func ceGradAVX2(x *float32, n int, inv float64, dscale float32)
// x[i] = float32(float64(x[i])·inv)·dscale over n, a multiple of 8.
TEXT ·ceGradAVX2(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSD inv+16(FP), Y4
	VBROADCASTSS dscale+24(FP), X5
	SHRQ         $2, CX
	JZ           cgdone
cgloop:
	VCVTPS2PD (SI), Y0
	VMULPD    Y4, Y0, Y0
	VCVTPD2PSY Y0, X0
	VMULPS    X5, X0, X0
	VMOVUPS   X0, (SI)
	ADDQ      $16, SI
	DECQ      CX
	JNZ       cgloop
cgdone:
	VZEROUPPER
	RET

// func addToBF16AVX2(dst *uint16, src *float32, n int)
// dst[i] = BF16FromF32(BF16ToF32(dst[i]) + src[i]) over n, a multiple of 16.
TEXT ·addToBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   abdone
abloop:
	VPMOVZXWD (DI), Y0
	VPMOVZXWD 16(DI), Y1
	VPSLLD    $16, Y0, Y0
	VPSLLD    $16, Y1, Y1
	VADDPS    (SI), Y0, Y0
	VADDPS    32(SI), Y1, Y1
	ROUNDBF(Y0, Y2, Y3, Y4)
	ROUNDBF(Y1, Y5, Y6, Y7)
	VPACKUSDW Y1, Y0, Y0
	VPERMQ    $0xD8, Y0, Y0
	VMOVDQU   Y0, (DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       abloop
abdone:
	VZEROUPPER
	RET

// func geluBackwardBF16AVX2(dinp, x, dout *uint16, n int)
// geluBackwardAVX2 on bf16 operands: widened exactly on load, the result
// rounded to bf16 (nearest even) on store; n is a multiple of 8.
TEXT ·geluBackwardBF16AVX2(SB), NOSPLIT, $0-32
	MOVQ dinp+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ dout+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ   gzdone
gzloop:
	VPMOVZXWD (SI), Y0
	VPSLLD    $16, Y0, Y0
	VMULPS    Y0, Y0, Y1
	VMULPS    Y0, Y1, Y2
	VMULPS    vc_gcoef<>(SB), Y2, Y2
	VADDPS    Y0, Y2, Y2
	VMULPS    vc_gscale<>(SB), Y2, Y2
	TANH(Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9)
	VADDPS    vc_one<>(SB), Y2, Y3
	VMULPS    vc_half<>(SB), Y3, Y3
	VMULPS    Y2, Y2, Y4
	VMOVUPS   vc_one<>(SB), Y5
	VSUBPS    Y4, Y5, Y5
	VMULPS    vc_half<>(SB), Y0, Y4
	VMULPS    Y5, Y4, Y4
	VMULPS    vc_gscale<>(SB), Y4, Y4
	VMULPS    vc_g3coef<>(SB), Y1, Y1
	VADDPS    vc_one<>(SB), Y1, Y1
	VMULPS    Y1, Y4, Y4
	VADDPS    Y4, Y3, Y3
	VPMOVZXWD (DX), Y4
	VPSLLD    $16, Y4, Y4
	VMULPS    Y4, Y3, Y3
	ROUNDBF(Y3, Y4, Y5, Y6)
	VPACKUSDW Y3, Y3, Y3
	VPERMQ    $0x08, Y3, Y3
	VMOVDQU   X3, (DI)
	ADDQ      $16, SI
	ADDQ      $16, DX
	ADDQ      $16, DI
	DECQ      CX
	JNZ       gzloop
gzdone:
	VZEROUPPER
	RET

// func geluForwardBF16AVX2(out *uint16, x *float32, n int)
// geluForwardAVX2 with the result rounded to bf16 on store; n is a
// multiple of 8.
TEXT ·geluForwardBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   gwdone
gwloop:
	VMOVUPS   (SI), Y0
	VMULPS    Y0, Y0, Y1
	VMULPS    Y0, Y1, Y1
	VMULPS    vc_gcoef<>(SB), Y1, Y1
	VADDPS    Y0, Y1, Y1
	VMULPS    vc_gscale<>(SB), Y1, Y1
	TANH(Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8)
	VADDPS    vc_one<>(SB), Y1, Y1
	VMULPS    Y0, Y1, Y1
	VMULPS    vc_half<>(SB), Y1, Y1
	ROUNDBF(Y1, Y2, Y3, Y4)
	VPACKUSDW Y1, Y1, Y1
	VPERMQ    $0x08, Y1, Y1
	VMOVDQU   X1, (DI)
	ADDQ      $32, SI
	ADDQ      $16, DI
	DECQ      CX
	JNZ       gwloop
gwdone:
	VZEROUPPER
	RET

// func dot8AVX2(a, b *float32, n int, sums *[8]float32)
// sums[k] = Σ a[i]·b[i] over i < n (a multiple of 8) with i%8 == k, in
// order of i, each product rounded before its add (no FMA): dot32Go's
// eight partial sums exactly.
TEXT ·dot8AVX2(SB), NOSPLIT, $0-32
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DX
	MOVQ   n+16(FP), CX
	MOVQ   sums+24(FP), DI
	VXORPS Y0, Y0, Y0
	SHRQ   $3, CX
	JZ     d8done
d8loop:
	VMOVUPS (SI), Y1
	VMULPS  (DX), Y1, Y1
	VADDPS  Y1, Y0, Y0
	ADDQ    $32, SI
	ADDQ    $32, DX
	DECQ    CX
	JNZ     d8loop
d8done:
	VMOVUPS Y0, (DI)
	VZEROUPPER
	RET

// func lnBwdSumsAVX2(x, w, gr *float32, n int, m, s float32, sums *[16]float64)
// Over j < n (a multiple of 8), with nn = s·(x-m) and dn = w·g in float32:
// sums[k] = Σ float64(dn) and sums[8+k] = Σ float64(dn·nn) over j%8 == k,
// in order of j: lnBwdSumsGo's sixteen partial sums exactly.
TEXT ·lnBwdSumsAVX2(SB), NOSPLIT, $0-48
	MOVQ         x+0(FP), SI
	MOVQ         w+8(FP), DX
	MOVQ         gr+16(FP), R8
	MOVQ         n+24(FP), CX
	VBROADCASTSS m+32(FP), Y14
	VBROADCASTSS s+36(FP), Y15
	MOVQ         sums+40(FP), DI
	VXORPD       Y0, Y0, Y0
	VXORPD       Y1, Y1, Y1
	VXORPD       Y2, Y2, Y2
	VXORPD       Y3, Y3, Y3
	SHRQ         $3, CX
	JZ           lsdone
lsloop:
	VMOVUPS      (SI), Y4
	VSUBPS       Y14, Y4, Y4
	VMULPS       Y15, Y4, Y4
	VMOVUPS      (DX), Y5
	VMULPS       (R8), Y5, Y5
	VMULPS       Y4, Y5, Y6
	VCVTPS2PD    X5, Y7
	VADDPD       Y7, Y0, Y0
	VEXTRACTF128 $1, Y5, X8
	VCVTPS2PD    X8, Y8
	VADDPD       Y8, Y1, Y1
	VCVTPS2PD    X6, Y9
	VADDPD       Y9, Y2, Y2
	VEXTRACTF128 $1, Y6, X10
	VCVTPS2PD    X10, Y10
	VADDPD       Y10, Y3, Y3
	ADDQ         $32, SI
	ADDQ         $32, DX
	ADDQ         $32, R8
	DECQ         CX
	JNZ          lsloop
lsdone:
	VMOVUPD      Y0, (DI)
	VMOVUPD      Y1, 32(DI)
	VMOVUPD      Y2, 64(DI)
	VMOVUPD      Y3, 96(DI)
	VZEROUPPER
	RET

// func biasRoundBF16AVX2(dst *uint16, y, b *float32, n int)
// dst[i] = bf16(y[i] + b[i]) (round to nearest even) over n, a multiple of
// 8: the fused Matmul's bias add and rounding store in one pass.
TEXT ·biasRoundBF16AVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ y+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ   brdone
brloop:
	VMOVUPS   (SI), Y0
	VADDPS    (DX), Y0, Y0
	ROUNDBF(Y0, Y2, Y3, Y4)
	VPACKUSDW Y0, Y0, Y0
	VPERMQ    $0x08, Y0, Y0
	VMOVDQU   X0, (DI)
	ADDQ      $32, SI
	ADDQ      $32, DX
	ADDQ      $16, DI
	DECQ      CX
	JNZ       brloop
brdone:
	VZEROUPPER
	RET

// func biasGeluBF16AVX2(pre, out *uint16, y, b *float32, n int)
// With v = y[i] + b[i]: pre[i] = bf16(v) and out[i] = bf16(gelu(v)), gelu
// as geluForwardAVX2 on the unrounded v, over n, a multiple of 8: the fused
// Matmul's bias, pre-activation store and GELU in one pass.
TEXT ·biasGeluBF16AVX2(SB), NOSPLIT, $0-40
	MOVQ pre+0(FP), DI
	MOVQ out+8(FP), R8
	MOVQ y+16(FP), SI
	MOVQ b+24(FP), DX
	MOVQ n+32(FP), CX
	SHRQ $3, CX
	JZ   bgdone
bgloop:
	VMOVUPS   (SI), Y0
	VADDPS    (DX), Y0, Y0
	VMOVAPS   Y0, Y9
	ROUNDBF(Y9, Y2, Y3, Y4)
	VPACKUSDW Y9, Y9, Y9
	VPERMQ    $0x08, Y9, Y9
	VMOVDQU   X9, (DI)
	VMULPS    Y0, Y0, Y1
	VMULPS    Y0, Y1, Y1
	VMULPS    vc_gcoef<>(SB), Y1, Y1
	VADDPS    Y0, Y1, Y1
	VMULPS    vc_gscale<>(SB), Y1, Y1
	TANH(Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8)
	VADDPS    vc_one<>(SB), Y1, Y1
	VMULPS    Y0, Y1, Y1
	VMULPS    vc_half<>(SB), Y1, Y1
	ROUNDBF(Y1, Y2, Y3, Y4)
	VPACKUSDW Y1, Y1, Y1
	VPERMQ    $0x08, Y1, Y1
	VMOVDQU   X1, (R8)
	ADDQ      $32, SI
	ADDQ      $32, DX
	ADDQ      $16, DI
	ADDQ      $16, R8
	DECQ      CX
	JNZ       bgloop
bgdone:
	VZEROUPPER
	RET

// func geluBackwardMixAVX2(dst *uint16, y *float32, x *uint16, n int)
// y[i] = gelu'(x[i])·y[i] (geluBackwardAVX2 with x widened from bf16 on
// load) and dst[i] = bf16(y[i]), over n, a multiple of 8: the fused
// MatmulBackwardGELU's derivative and rounding store in one pass, y kept
// in fp32 for the bias gradient.
TEXT ·geluBackwardMixAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ y+8(FP), DX
	MOVQ x+16(FP), SI
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ   gmdone
gmloop:
	VPMOVZXWD (SI), Y0
	VPSLLD    $16, Y0, Y0
	VMULPS    Y0, Y0, Y1
	VMULPS    Y0, Y1, Y2
	VMULPS    vc_gcoef<>(SB), Y2, Y2
	VADDPS    Y0, Y2, Y2
	VMULPS    vc_gscale<>(SB), Y2, Y2
	TANH(Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9)
	VADDPS    vc_one<>(SB), Y2, Y3
	VMULPS    vc_half<>(SB), Y3, Y3
	VMULPS    Y2, Y2, Y4
	VMOVUPS   vc_one<>(SB), Y5
	VSUBPS    Y4, Y5, Y5
	VMULPS    vc_half<>(SB), Y0, Y4
	VMULPS    Y5, Y4, Y4
	VMULPS    vc_gscale<>(SB), Y4, Y4
	VMULPS    vc_g3coef<>(SB), Y1, Y1
	VADDPS    vc_one<>(SB), Y1, Y1
	VMULPS    Y1, Y4, Y4
	VADDPS    Y4, Y3, Y3
	VMULPS    (DX), Y3, Y3
	VMOVUPS   Y3, (DX)
	ROUNDBF(Y3, Y4, Y5, Y6)
	VPACKUSDW Y3, Y3, Y3
	VPERMQ    $0x08, Y3, Y3
	VMOVDQU   X3, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DX
	ADDQ      $16, DI
	DECQ      CX
	JNZ       gmloop
gmdone:
	VZEROUPPER
	RET

// func roundKeepBF16AVX2(dst *uint16, x *float32, n int)
// dst[i] = bf16(x[i]) and x[i] = dst[i] widened, over n, a multiple of 8:
// a rounding store and the load of what it stored, in one pass.
TEXT ·roundKeepBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   rkdone
rkloop:
	VMOVUPS   (SI), Y0
	ROUNDBF(Y0, Y2, Y3, Y4)
	VPSLLD    $16, Y0, Y1
	VMOVUPS   Y1, (SI)
	VPACKUSDW Y0, Y0, Y0
	VPERMQ    $0x08, Y0, Y0
	VMOVDQU   X0, (DI)
	ADDQ      $32, SI
	ADDQ      $16, DI
	DECQ      CX
	JNZ       rkloop
rkdone:
	VZEROUPPER
	RET
