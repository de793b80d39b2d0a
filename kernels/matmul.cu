// matmul.cu: the kernels beside cuBLAS(Lt) in the linear layers
// (pkg/device/gpu/matmul.go).
//
// druto:kernel matmul_bias_grad add_f32 cast_bias_grad
// druto:pdl matmul_bias_grad add_f32 cast_bias_grad
// druto:dtypes f32 bf16 f16
//
// matmul_bias_grad: dbias[oc] += Σ_n dout[n,oc], fp32 sums, deterministic:
// one block per 32 columns (lane = column, so each warp reads 32 adjacent
// elements of a row), warp w summing rows w, w+W, w+2W, ... in order, then
// warp 0 adding the W partials in warp order. No atomics. Used by the
// decomposed form and when cuBLASLt's bias-gradient epilogue is not
// available; dbias is fp32 (a parameter gradient), dout is T.
//
// add_f32: dst[i] += src[i] over n fp32 elements (the epilogue's bias
// gradient, written into scratch, accumulated into dbias).
//
// cast_bias_grad: a linear layer whose output gradient is the fp32
// residual gradient (the attention and MLP projections) needs it in T for
// its GEMMs and its column sums for the bias gradient. One pass reads dout
// once, writes the T copy g and sums each column of the rounded values (the
// 16-bit gradient autocast's bias gradient sums) over a chunk of rows into
// part[chunk][col]; matmul_bias_grad (instantiated for f32) then adds the
// chunks in order into dbias: deterministic, no atomics. This replaces a
// cast kernel and cuBLASLt's BGRADB epilogue, which cost the weight-gradient
// GEMM ~40% on the H200 (gemm_attn_proj_wgrad 0.040 ms, with the epilogue
// 0.057).
// grid (ceil(OC/128), ceil(N/rows)), CAST_BIAS_BLOCK threads: a block owns
// 128 columns (lane l: columns 4l..4l+3, one 16-byte load, vec) of rows
// [y·rows, ...), warp w its rows w, w+8, ...; the warps' sums are added in
// warp order. Without vec (OC % 4 != 0 or unaligned) lane l takes columns
// l, l+32, l+64, l+96.

#include "common.cuh"

// Block sizes (threads), read by the launchers too (kernels/blocks.go).
// druto:block BIAS_GRAD_BLOCK matmul_bias_grad
#define BIAS_GRAD_BLOCK 1024
// druto:block ADD_F32_BLOCK add_f32
#define ADD_F32_BLOCK 256
// druto:block CAST_BIAS_BLOCK cast_bias_grad
#define CAST_BIAS_BLOCK 256
#define CB_WARPS (CAST_BIAS_BLOCK / 32)

// dbias (OC) F32, dout (N,OC) T
extern "C" __global__ void matmul_bias_grad(float* __restrict__ dbias, const T* __restrict__ dout, int N, int OC) {
    pdl_enter();
    __shared__ float part[32][33]; // [warp][lane], padded
    int lane = threadIdx.x & 31;
    int warp = threadIdx.x >> 5;
    int warps = blockDim.x >> 5;
    int col = blockIdx.x * 32 + lane;
    float s = 0.0f;
    if (col < OC) {
        for (int n = warp; n < N; n += warps) s += load(dout + (size_t)n * OC, col);
    }
    part[warp][lane] = s;
    __syncthreads();
    if (warp == 0 && col < OC) {
        float acc = 0.0f;
        for (int w = 0; w < warps; w++) acc += part[w][lane];
        dbias[col] += acc;
    }
}

// dst (n) F32, src (n) F32; grid-stride with 64-bit indices (n may pass 2^31)
extern "C" __global__ void add_f32(float* __restrict__ dst, const float* __restrict__ src, long long n) {
    pdl_enter();
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] += src[i];
}

// g (N,OC) T, part (gridDim.y, OC) F32, dout (N,OC) F32; vec: OC % 4 == 0,
// dout 16-byte and g 4-element aligned
extern "C" __global__ void __launch_bounds__(CAST_BIAS_BLOCK)
    cast_bias_grad(T* __restrict__ g, float* __restrict__ part, const float* __restrict__ dout, int N, int OC, int rows, int vec) {
    pdl_enter();
    __shared__ float red[CB_WARPS][128];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int strip = blockIdx.x * 128;
    const int r0 = blockIdx.y * rows, r1 = min(N, r0 + rows);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (vec) {
        const int c = strip + lane * 4;
        if (c < OC) {
            int r = r0 + warp;
            // two rows in flight: the next row's load issued before this one is stored
            F4 cur;
            if (r < r1) cur = ld4(dout + (size_t)r * OC + c);
            for (; r < r1; r += CB_WARPS) {
                const int rn = r + CB_WARPS;
                F4 nxt;
                if (rn < r1) nxt = ld4(dout + (size_t)rn * OC + c);
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    cur.v[j] = round_to<T>(cur.v[j]);
                    acc[j] += cur.v[j];
                }
                st4(g + (size_t)r * OC + c, cur);
                cur = nxt;
            }
        }
    } else {
        for (int r = r0 + warp; r < r1; r += CB_WARPS) {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int c = strip + lane + 32 * j;
                if (c < OC) {
                    const size_t o = (size_t)r * OC + c;
                    float v = round_to<T>(dout[o]);
                    acc[j] += v;
                    store(g, o, v);
                }
            }
        }
    }
#pragma unroll
    for (int j = 0; j < 4; j++) red[warp][vec ? lane * 4 + j : lane + 32 * j] = acc[j];
    __syncthreads();
    for (int k = threadIdx.x; k < 128; k += CAST_BIAS_BLOCK) {
        const int c = strip + k;
        if (c < OC) {
            float sum = 0.0f;
#pragma unroll
            for (int w = 0; w < CB_WARPS; w++) sum += red[w][k];
            part[(size_t)blockIdx.y * OC + c] = sum;
        }
    }
}
