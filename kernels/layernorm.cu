// layernorm.cu: layer normalisation.
//
// druto:kernel layernorm_forward
// druto:dtypes f32 bf16 f16
//
// layernorm_forward: out = (inp - mean) * rstd * weight + bias, row by row,
// with fp32 statistics (mean, then the biased variance about it: two passes
// over the row, which stays in L1/L2), eps 1e-5; it also stores mean and
// rstd (N) in fp32 for backward (either pointer may be null). One warp per
// row; the affine step is rounded like the CPU reference
// (pkg/device/cpu layerNormFused: n = rstd*(x-mean), out = n*w + b, no FMA).
//
// Storage type: compile with -DDTYPE=DRUTO_F32, DRUTO_BF16 or DRUTO_F16;
// out, inp, weight and bias share it. No CUDA headers are included, so NVRTC
// and nvcc build the same text: bf16 and f16 are handled as 16-bit patterns
// with round-to-nearest-even conversions written out (bf16) or as PTX cvt
// instructions (f16), all available on sm_75.

#define DRUTO_F32 1
#define DRUTO_BF16 2
#define DRUTO_F16 3

#ifndef DTYPE
#error "compile with -DDTYPE=DRUTO_F32, -DDTYPE=DRUTO_BF16 or -DDTYPE=DRUTO_F16"
#endif

#if DTYPE == DRUTO_F32
typedef float T;
__device__ __forceinline__ float load(const T* p, int i) { return p[i]; }
__device__ __forceinline__ void store(T* p, int i, float v) { p[i] = v; }
#elif DTYPE == DRUTO_BF16
typedef unsigned short T;
__device__ __forceinline__ float load(const T* p, int i) { return __uint_as_float(((unsigned int)p[i]) << 16); }
// Round to nearest even on bit 16; NaN stays a quiet NaN (as tensor.BF16FromF32).
__device__ __forceinline__ void store(T* p, int i, float v) {
    unsigned int b = __float_as_uint(v);
    if ((b & 0x7fffffffu) > 0x7f800000u) {
        p[i] = (unsigned short)((b >> 16) | 0x0040u);
        return;
    }
    b += 0x7fffu + ((b >> 16) & 1u);
    p[i] = (unsigned short)(b >> 16);
}
#elif DTYPE == DRUTO_F16
typedef unsigned short T;
__device__ __forceinline__ float load(const T* p, int i) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(p[i]));
    return f;
}
__device__ __forceinline__ void store(T* p, int i, float v) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
    p[i] = h;
}
#else
#error "DTYPE must be DRUTO_F32, DRUTO_BF16 or DRUTO_F16"
#endif

__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// out (N,C), mean (N) or null, rstd (N) or null, inp (N,C), weight (C), bias (C)
extern "C" __global__ void layernorm_forward(T* __restrict__ out, float* __restrict__ mean,
                                             float* __restrict__ rstd, const T* __restrict__ inp,
                                             const T* __restrict__ weight, const T* __restrict__ bias,
                                             int N, int C) {
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= N) return; // the whole warp leaves together
    const T* x = inp + (size_t)row * C;

    float sum = 0.0f;
    for (int i = lane; i < C; i += 32) sum += load(x, i);
    float m = warp_sum(sum) / (float)C;

    float sq = 0.0f;
    for (int i = lane; i < C; i += 32) {
        float d = load(x, i) - m;
        sq += d * d;
    }
    float s = 1.0f / sqrtf(warp_sum(sq) / (float)C + 1e-5f);
    if (lane == 0) {
        if (mean != 0) mean[row] = m;
        if (rstd != 0) rstd[row] = s;
    }

    T* o = out + (size_t)row * C;
    for (int i = lane; i < C; i += 32) {
        float n = __fmul_rn(s, __fsub_rn(load(x, i), m));
        store(o, i, __fadd_rn(__fmul_rn(n, load(weight, i)), load(bias, i)));
    }
}
