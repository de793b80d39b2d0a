// step.cu: the scalars of the device-resident training step
// (pkg/device/gpu/step.go), device.StepScalars's arithmetic (pkg/device),
// so that no host round trip sits between the backward pass and AdamW.
//
// druto:kernel step_update
// druto:pdl step_update
// druto:dtypes f32
//
// step_update: one block of ST_THREADS. It adds the per-token losses (in
// float64, a fixed tree order) for the mean loss, and gradnorm_partial2's
// partials exactly as gradnorm_final does (so the norm has GradNorm's bits),
// then thread 0 updates the state:
//   used  = st[SCALE] (1 when the scaler is off); norm = sqrt(Σg²)·|1/used|
//   finite: the GradScaler's Update (backoff and skip, or count and grow),
//   and on a finite step the optimizer step count, the clip factor over the
//   used scale (AdamW's gradient multiplier), and AdamW's per-step
//   constants in float64 rounded to fp32, as device.AdamW.Consts does.
// Explicitly rounded intrinsics keep the compiler from contracting into
// FMAs, so the scalars match the Go reference bit for bit (pow may differ
// by an ulp of float64 from Go's, which the rounding to fp32 hides but for
// a chance of about 1e-8).

#include "common.cuh"

// druto:block ST_THREADS step_update
#define ST_THREADS 256

// The slots of the step state (pkg/device's Slot* constants).
#define ST_SCALE 0
#define ST_GOOD 1
#define ST_SKIPPED 2
#define ST_OPTSTEPS 3
#define ST_LR 4
#define ST_LOSS 5
#define ST_NORM 6
#define ST_FINITE 7
#define ST_USEDSCALE 8
#define ST_GRADSCALE 9
#define ST_DECAY 10
#define ST_DODECAY 11
#define ST_STEP 12
#define ST_BC2 13

// st_sum returns the sum of s over the block in a fixed tree order (valid
// in thread 0), as gradnorm.cu's sum_block.
__device__ __forceinline__ double st_sum(double s, double* sh) {
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int w = ST_THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads();
    return r;
}

// st (StateLen) fp32; losses (n) fp32; part (nparts) float64 from gradnorm_partial2
extern "C" __global__ void step_update(float* __restrict__ st, const float* __restrict__ losses, int n,
                                       const double* __restrict__ part, int nparts, int scaler, float growth,
                                       float backoff, int interval, float clip_norm, float beta1, float beta2,
                                       float wd) {
    pdl_enter();
    __shared__ double sh[ST_THREADS];
    double ls = 0.0;
    for (int i = threadIdx.x; i < n; i += ST_THREADS) ls += (double)losses[i];
    ls = st_sum(ls, sh);
    double q = 0.0;
    // in order per thread; unrolled so that 8 loads are in flight (~30K
    // partials from gradnorm_partial2 for GPT-2 124M)
#pragma unroll 8
    for (int i = threadIdx.x; i < nparts; i += ST_THREADS) q += part[i];
    q = st_sum(q, sh);
    if (threadIdx.x != 0) return;
    const float used = scaler ? st[ST_SCALE] : 1.0f;
    st[ST_USEDSCALE] = used;
    st[ST_LOSS] = (float)__ddiv_rn(ls, (double)n);
    const bool finite = q - q == 0.0;
    const float norm = finite ? (float)__dmul_rn(__dsqrt_rn(q), fabs((double)__fdiv_rn(1.0f, used))) : (float)q;
    st[ST_NORM] = norm;
    st[ST_FINITE] = finite ? 1.0f : 0.0f;
    if (!finite) {
        if (scaler) {
            st[ST_SCALE] = __fmul_rn(used, backoff);
            st[ST_GOOD] = 0.0f;
        }
        st[ST_SKIPPED] = __fadd_rn(st[ST_SKIPPED], 1.0f);
        return;
    }
    if (scaler) {
        const float good = __fadd_rn(st[ST_GOOD], 1.0f);
        if ((int)good >= interval) {
            st[ST_SCALE] = __fmul_rn(used, growth);
            st[ST_GOOD] = 0.0f;
        } else {
            st[ST_GOOD] = good;
        }
    }
    const float clip = (clip_norm > 0.0f && norm > clip_norm) ? __fdiv_rn(clip_norm, norm) : 1.0f;
    const float t = __fadd_rn(st[ST_OPTSTEPS], 1.0f);
    st[ST_OPTSTEPS] = t;
    st[ST_GRADSCALE] = __fdiv_rn(clip, used);
    const double lr = (double)st[ST_LR], lrwd = __dmul_rn(lr, (double)wd);
    st[ST_DECAY] = (float)__dadd_rn(1.0, -lrwd);
    st[ST_DODECAY] = lrwd != 0.0 ? 1.0f : 0.0f;
    st[ST_STEP] = (float)(-__ddiv_rn(lr, __dadd_rn(1.0, -pow((double)beta1, (double)t))));
    st[ST_BC2] = (float)__dsqrt_rn(__dadd_rn(1.0, -pow((double)beta2, (double)t)));
}
