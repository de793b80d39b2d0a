// adamw.cuh: the AdamW update of one element and the step state's slots
// it reads, shared by the optimizer kernels (adamw.cu) and the update that
// writes the weights' FP8 copies (adamw_fp8.cu). The arithmetic is
// adamw.cu's header's, torch.optim.AdamW's, every operation an explicitly
// rounded fp32 intrinsic.

#ifndef DRUTO_ADAMW_CUH
#define DRUTO_ADAMW_CUH

// AdamC is the step's scalars (see pkg/device/gpu/adamw.go adamConsts).
struct AdamC {
    float gs, decay, w1, b2, w2, step, bc2, eps;
    int scaled, small;
};

__device__ __forceinline__ void adam_update(float& p, float g, float& m, float& v, bool decay, const AdamC& c) {
    if (c.scaled) g = __fmul_rn(g, c.gs);
    if (decay) p = __fmul_rn(p, c.decay);
    if (c.small) m = __fadd_rn(m, __fmul_rn(c.w1, __fsub_rn(g, m)));
    else m = __fadd_rn(g, __fmul_rn(__fsub_rn(c.w1, 1.0f), __fsub_rn(g, m)));
    v = __fadd_rn(__fmul_rn(v, c.b2), __fmul_rn(__fmul_rn(c.w2, g), g));
    float den = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), c.bc2), c.eps);
    p = __fadd_rn(p, __fmul_rn(c.step, __fdiv_rn(m, den)));
}

// The slots of the step state read here (pkg/device's Slot* constants).
#define ST_OPTSTEPS 3
#define ST_FINITE 7
#define ST_GRADSCALE 9
#define ST_DECAY 10
#define ST_DODECAY 11
#define ST_STEP 12
#define ST_BC2 13

// adam_from_state takes the per-step values of c from the step state st
// (the device-resident step: pkg/device's Slot* constants).
__device__ __forceinline__ void adam_from_state(AdamC& c, const float* __restrict__ st) {
    c.gs = st[ST_GRADSCALE];
    c.scaled = c.gs != 1.0f;
    c.decay = st[ST_DECAY];
    c.step = st[ST_STEP];
    c.bc2 = st[ST_BC2];
}

#endif
