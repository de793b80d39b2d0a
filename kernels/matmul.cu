// matmul.cu: the kernels beside cuBLAS(Lt) in the linear layers
// (pkg/device/gpu/matmul.go).
//
// druto:kernel matmul_bias_grad add_f32
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

#include "common.cuh"

// Block sizes (threads), read by the launchers too (kernels/blocks.go).
// druto:block BIAS_GRAD_BLOCK matmul_bias_grad
#define BIAS_GRAD_BLOCK 1024
// druto:block ADD_F32_BLOCK add_f32
#define ADD_F32_BLOCK 256

// dbias (OC) F32, dout (N,OC) T
extern "C" __global__ void matmul_bias_grad(float* __restrict__ dbias, const T* __restrict__ dout, int N, int OC) {
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
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] += src[i];
}
