// attention.cu: the softmax over the causal score matrix of attention
// (pkg/device/gpu/attention.go; the products are cuBLAS strided-batched GEMMs).
//
// druto:kernel attn_softmax_forward attn_softmax_backward
// druto:kernel attn_scale attn_mask attn_rowmax attn_expsub attn_rowsum attn_divide
// druto:kernel attn_bwd_rowsum attn_bwd_sub attn_bwd_mask attn_bwd_scale
// druto:dtypes f32 bf16 f16
//
// Layout: rows of Tn scores, row r being query position t = r % Tn of one
// (b,h) pair; scores and their gradients are fp32 scratch (rows, Tn), the
// probabilities att and the score gradient dpre are T (the GEMMs' type).
// Columns j > t are masked: att there is 0.
//
// Fused (one warp per row):
//   attn_softmax_forward: att = softmax(scores) over j <= t (the scores came
//     scaled from the GEMM), 0 beyond: max, exp-sum, then exp·(1/sum);
//   attn_softmax_backward: dpre = att ⊙ (datt - Σ_j att·datt) · scale for
//     j <= t, 0 beyond.
// Decomposed, one pass per eager-PyTorch step:
//   attn_scale (s *= scale), attn_mask (s = -inf above the diagonal),
//   attn_rowmax, attn_expsub (s = exp(s - max)), attn_rowsum, attn_divide
//   (att = s / sum); backward attn_bwd_rowsum (Σ_j att·datt),
//   attn_bwd_sub (datt = att·(datt - rowsum)), attn_bwd_mask (0 above the
//   diagonal), attn_bwd_scale (dpre = datt·scale, rounded to T).
// Row kernels run 8 warps (rows) per block; elementwise ones are grid-stride.
// The seam for a flash-attention kernel is attention.go's attnForward and
// attnBackward: they may replace all of this per chunk of batches.

#include "common.cuh"

// Block sizes (threads), read by the launchers too (kernels/blocks.go).
// druto:block ATTN_ROW_BLOCK attn_softmax_forward attn_softmax_backward attn_rowmax attn_rowsum attn_bwd_rowsum
#define ATTN_ROW_BLOCK 256
// druto:block ATTN_EW_BLOCK attn_scale attn_mask attn_expsub attn_divide attn_bwd_sub attn_bwd_mask attn_bwd_scale
#define ATTN_EW_BLOCK 256

#define ATTN_NEG_INF __int_as_float(0xff800000) // -inf (NVRTC has no math.h for INFINITY)

__device__ __forceinline__ float attn_warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

__device__ __forceinline__ float attn_warp_max(float v) {
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

// att (rows,Tn) T, scores (rows,Tn) F32 (scaled)
extern "C" __global__ void attn_softmax_forward(T* __restrict__ att, const float* __restrict__ scores, int rows, int Tn) {
    int lane = threadIdx.x & 31;
    int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= rows) return;
    int t = r % Tn;
    const float* s = scores + (size_t)r * Tn;
    T* a = att + (size_t)r * Tn;
    float m = ATTN_NEG_INF;
    for (int j = lane; j <= t; j += 32) m = fmaxf(m, s[j]);
    m = attn_warp_max(m);
    float sum = 0.0f;
    for (int j = lane; j <= t; j += 32) sum += expf(s[j] - m);
    float inv = 1.0f / attn_warp_sum(sum);
    for (int j = lane; j < Tn; j += 32) store(a, j, j <= t ? expf(s[j] - m) * inv : 0.0f);
}

// dpre (rows,Tn) T, att (rows,Tn) T, datt (rows,Tn) F32
extern "C" __global__ void attn_softmax_backward(T* __restrict__ dpre, const T* __restrict__ att, const float* __restrict__ datt,
                                                 int rows, int Tn, float scale) {
    int lane = threadIdx.x & 31;
    int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= rows) return;
    int t = r % Tn;
    const T* a = att + (size_t)r * Tn;
    const float* g = datt + (size_t)r * Tn;
    T* o = dpre + (size_t)r * Tn;
    float s = 0.0f;
    for (int j = lane; j <= t; j += 32) s += load(a, j) * g[j];
    s = attn_warp_sum(s);
    for (int j = lane; j < Tn; j += 32) store(o, j, j <= t ? load(a, j) * (g[j] - s) * scale : 0.0f);
}

// s (n) F32 *= scale
extern "C" __global__ void attn_scale(float* __restrict__ s, long long n, float scale) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) s[i] *= scale;
}

// s (rows,Tn) F32: -inf above the diagonal
extern "C" __global__ void attn_mask(float* __restrict__ s, int rows, int Tn) {
    long long n = (long long)rows * Tn;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        int j = (int)(i % Tn), t = (int)((i / Tn) % Tn);
        if (j > t) s[i] = ATTN_NEG_INF;
    }
}

// mx (rows) F32 = max over the row of s (rows,Tn)
extern "C" __global__ void attn_rowmax(float* __restrict__ mx, const float* __restrict__ s, int rows, int Tn) {
    int lane = threadIdx.x & 31;
    int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= rows) return;
    const float* x = s + (size_t)r * Tn;
    float m = ATTN_NEG_INF;
    for (int j = lane; j < Tn; j += 32) m = fmaxf(m, x[j]);
    m = attn_warp_max(m);
    if (lane == 0) mx[r] = m;
}

// s (rows,Tn) F32 = exp(s - mx[row])
extern "C" __global__ void attn_expsub(float* __restrict__ s, const float* __restrict__ mx, int rows, int Tn) {
    long long n = (long long)rows * Tn;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        s[i] = expf(s[i] - mx[i / Tn]);
    }
}

// sum (rows) F32 = Σ over the row of s (rows,Tn)
extern "C" __global__ void attn_rowsum(float* __restrict__ sum, const float* __restrict__ s, int rows, int Tn) {
    int lane = threadIdx.x & 31;
    int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= rows) return;
    const float* x = s + (size_t)r * Tn;
    float acc = 0.0f;
    for (int j = lane; j < Tn; j += 32) acc += x[j];
    acc = attn_warp_sum(acc);
    if (lane == 0) sum[r] = acc;
}

// att (rows,Tn) T = s / sum[row]
extern "C" __global__ void attn_divide(T* __restrict__ att, const float* __restrict__ s, const float* __restrict__ sum, int rows, int Tn) {
    long long n = (long long)rows * Tn;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        store(att + i, 0, s[i] / sum[i / Tn]);
    }
}

// rs (rows) F32 = Σ_j att·datt over the row
extern "C" __global__ void attn_bwd_rowsum(float* __restrict__ rs, const T* __restrict__ att, const float* __restrict__ datt, int rows, int Tn) {
    int lane = threadIdx.x & 31;
    int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= rows) return;
    const T* a = att + (size_t)r * Tn;
    const float* g = datt + (size_t)r * Tn;
    float acc = 0.0f;
    for (int j = lane; j < Tn; j += 32) acc += load(a, j) * g[j];
    acc = attn_warp_sum(acc);
    if (lane == 0) rs[r] = acc;
}

// datt (rows,Tn) F32 = att·(datt - rs[row])
extern "C" __global__ void attn_bwd_sub(float* __restrict__ datt, const T* __restrict__ att, const float* __restrict__ rs, int rows, int Tn) {
    long long n = (long long)rows * Tn;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        datt[i] = load(att + i, 0) * (datt[i] - rs[i / Tn]);
    }
}

// datt (rows,Tn) F32: 0 above the diagonal
extern "C" __global__ void attn_bwd_mask(float* __restrict__ datt, int rows, int Tn) {
    long long n = (long long)rows * Tn;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        int j = (int)(i % Tn), t = (int)((i / Tn) % Tn);
        if (j > t) datt[i] = 0.0f;
    }
}

// dpre (n) T = datt (n) F32 · scale
extern "C" __global__ void attn_bwd_scale(T* __restrict__ dpre, const float* __restrict__ datt, long long n, float scale) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        store(dpre + i, 0, datt[i] * scale);
    }
}
