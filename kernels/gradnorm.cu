// gradnorm.cu: the global L2 norm of the gradient buffer with the inf/NaN
// check and the scale multiply folded in (pkg/device/gpu/gradnorm.go):
// norm = sqrt(Σ g²)·|scale|, finite = every g finite.
//
// druto:kernel gradnorm_partial2 gradnorm_final
// druto:pdl gradnorm_partial2 gradnorm_final
// druto:dtypes f32
//
// One pass over the buffer and a deterministic two-stage reduction, no
// atomics:
//   gradnorm_partial2: the buffer in fixed chunks of GN_CHUNK elements, a
//     float64 partial of g² per chunk summed by one warp (lane l: the
//     float4 groups l, l+32, ... of the chunk, GN_BATCH loads in flight,
//     then a fixed butterfly), the warps of a persistent grid taking chunks
//     w, w + warps, ... The partition is a function of n alone, so the bits
//     are the same on every device and grid, and with ~30K chunks for GPT-2
//     124M every warp sums nearly the same number of them: no second wave
//     of blocks, no block barriers. (It replaced gradnorm_partial, a fixed
//     grid of 1024 blocks, which ran in two waves and was slower.)
//   gradnorm_final: one block adds the partials in a fixed order and writes
//     out[0] = sqrt(Σ)·|scale| and out[1] = 1 when the sum is finite; else
//     out[0] = the sum (Inf or NaN) and out[1] = 0. step.cu's step_update
//     adds them the same way.
// As in the CPU reference, squares of finite fp32 values and their sum are
// finite in float64, so the sum is non-finite exactly when some element is
// Inf or NaN: no per-element test is needed. The same input gives the same
// bits on every run.

#include "common.cuh"

// druto:block GN_THREADS gradnorm_partial2 gradnorm_final
#define GN_THREADS 256 // blockDim.x of both kernels (a power of two)

// sum_block returns the sum of s over the block in a fixed tree order
// (valid in thread 0).
__device__ __forceinline__ double sum_block(double s, double* sh) {
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int w = GN_THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    return sh[0];
}

// GN_CHUNK is gradnorm_partial2's chunk (a multiple of 32·4·GN_BATCH);
// GN_BATCH its float4 loads in flight per lane.
#define GN_CHUNK 4096
#define GN_BATCH 8

// part (ceil(n/GN_CHUNK)) float64, g (n) fp32; vec: g is 16-byte aligned
extern "C" __global__ void __launch_bounds__(GN_THREADS) gradnorm_partial2(double* __restrict__ part,
                                                                          const float* __restrict__ g, long long n,
                                                                          int vec) {
    pdl_enter();
    const size_t N = (size_t)n;
    const long long chunks = (n + GN_CHUNK - 1) / GN_CHUNK;
    const int lane = threadIdx.x & 31;
    const long long warps = (long long)gridDim.x * (GN_THREADS / 32);
    for (long long c = (long long)blockIdx.x * (GN_THREADS / 32) + (threadIdx.x >> 5); c < chunks; c += warps) {
        const size_t lo = (size_t)c * GN_CHUNK;
        double s = 0.0;
        if (vec && lo + GN_CHUNK <= N) {
            const float4* p = reinterpret_cast<const float4*>(g + lo) + lane;
#pragma unroll 1
            for (int b = 0; b < GN_CHUNK / (128 * GN_BATCH); b++) {
                float4 x[GN_BATCH];
#pragma unroll
                for (int k = 0; k < GN_BATCH; k++) x[k] = p[32 * (b * GN_BATCH + k)];
#pragma unroll
                for (int k = 0; k < GN_BATCH; k++) {
                    s += (double)x[k].x * (double)x[k].x;
                    s += (double)x[k].y * (double)x[k].y;
                    s += (double)x[k].z * (double)x[k].z;
                    s += (double)x[k].w * (double)x[k].w;
                }
            }
        } else {
            // the last, partial chunk (or a misaligned buffer): the same
            // columns per lane, one element at a time
            const size_t hi = min(N, lo + GN_CHUNK);
            for (size_t i = lo + 4 * lane; i < hi; i += 128)
                for (size_t k = i; k < i + 4 && k < hi; k++) s += (double)g[k] * (double)g[k];
        }
        for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        if (lane == 0) part[c] = s;
    }
}

// out (2) fp32: [norm, finite]; part (nparts) float64
extern "C" __global__ void gradnorm_final(float* __restrict__ out, const double* __restrict__ part, int nparts,
                                          float scale) {
    pdl_enter();
    __shared__ double sh[GN_THREADS];
    double s = 0.0;
    // in order per thread; unrolled so that 8 loads are in flight (gradnorm_partial2
    // leaves ~30K partials for GPT-2 124M: 119 a thread)
#pragma unroll 8
    for (int i = threadIdx.x; i < nparts; i += GN_THREADS) s += part[i];
    s = sum_block(s, sh);
    if (threadIdx.x == 0) {
        if (s - s == 0.0) { // finite
            out[0] = (float)(sqrt(s) * fabs((double)scale));
            out[1] = 1.0f;
        } else {
            out[0] = (float)s;
            out[1] = 0.0f;
        }
    }
}
