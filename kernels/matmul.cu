// matmul.cu: the kernels beside cuBLAS(Lt) in the linear layers
// (pkg/device/gpu/matmul.go).
//
// druto:kernel matmul_bias_grad add_f32 cast_bias_grad matmul_rows
// druto:pdl matmul_bias_grad add_f32 cast_bias_grad
// druto:pdl-weights matmul_rows:w
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
// cast kernel and cuBLASLt's BGRADB epilogue, which slowed the
// weight-gradient GEMM by nearly half on the H200.
// grid (ceil(OC/128), ceil(N/rows)), CAST_BIAS_BLOCK threads: a block owns
// 128 columns (lane l: columns 4l..4l+3, one 16-byte load, vec) of rows
// [y·rows, ...), warp w its rows w, w+8, ...; the warps' sums are added in
// warp order. Without vec (OC % 4 != 0 or unaligned) lane l takes columns
// l, l+32, l+64, l+96.
//
// matmul_rows: the forward of a linear layer over a few rows (N <=
// ROWS_MAX: a decode step's one row a sequence), out = inp·Wᵀ + bias with
// an optional GELU, as a memory-bound pass over W. At such N a GEMM tiles
// the output into few tiles (768 columns: 6 tiles of 128) and leaves most
// SMs idle while it streams the weights; here each output column is a dot
// product over a contiguous row of W (OC,C), so a warp reads its row with
// coalesced 16-byte loads and keeps N fp32 sums. ks warps share a column
// (ks in 1, 2, 4, 8, chosen by the launcher so that about 4 warps a column
// of W's rows are in flight per SM), each over a contiguous chunk of C, and
// their sums are added in warp order: deterministic, no atomics. The bias
// is added to the fp32 sum; under GELU pre gets the sum and out gelu of the
// fp32 sum, each rounded once (the CPU reference's fused epilogue).
// A lane issues the loads of ROWS_U vectors of its part of the row before
// using any of them (GPT-2's rows are one such batch: 768 16-bit values a
// row, or 3 vectors a lane; 384 fp32 values a warp at ks 2), so a whole
// wave's share of W is in flight at once instead of one vector a warp;
// summed in k order as before (the same sums, bit for bit). The first batch
// is loaded before pdl_enter() (the druto:pdl-weights line): W is a
// weight, which no kernel of a decode step writes, so its loads overlap the
// kernel before this one when launched as a programmatic dependent launch.
// Only W may be read before pdl_enter (TestPDLKernelsWait): matmul_rows
// must not follow, on its stream, a kernel that writes its W.
// grid ceil(OC / (ROWS_BLOCK/32/ks)), ROWS_BLOCK threads; vec: C a multiple
// of 16/sizeof(T) and inp, W 16-byte aligned (else scalar loads).

#include "common.cuh"

// Block sizes (threads), read by the launchers too (kernels/blocks.go).
// druto:block BIAS_GRAD_BLOCK matmul_bias_grad
#define BIAS_GRAD_BLOCK 1024
// druto:block ADD_F32_BLOCK add_f32
#define ADD_F32_BLOCK 256
// druto:block CAST_BIAS_BLOCK cast_bias_grad
#define CAST_BIAS_BLOCK 256
#define CB_WARPS (CAST_BIAS_BLOCK / 32)
// druto:block ROWS_BLOCK matmul_rows
#define ROWS_BLOCK 256
#define ROWS_MAX 8 // the most rows matmul_rows takes (read by the launcher)
#define ROWS_U 4   // the 16-byte vectors of W a lane loads before using them

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

#if DTYPE == DRUTO_F32
// dot44 is the fp32 dot product of two 128-bit vectors of four floats, in
// element order (w.x·x.x + w.y·x.y + ...).
__device__ __forceinline__ float dot44(uint4 w, uint4 x) {
    return __uint_as_float(w.x) * __uint_as_float(x.x) + __uint_as_float(w.y) * __uint_as_float(x.y) +
           __uint_as_float(w.z) * __uint_as_float(x.z) + __uint_as_float(w.w) * __uint_as_float(x.w);
}
#endif

// out (N,OC) T, pre (N,OC) T (gelu only), inp (N,C) T, w (OC,C) T, bias (OC) T or null
// 4 blocks an SM (at most 64 registers a thread): without a minimum NVRTC
// 13 gave matmul_rows/f32 48 registers and 16 bytes of local memory
// (TestGPUBuildAndCache); NVRTC 11.8 gives it 56 registers and no stack.
extern "C" __global__ void __launch_bounds__(ROWS_BLOCK, 4) matmul_rows(T* __restrict__ out, T* __restrict__ pre,
        const T* __restrict__ inp, const T* __restrict__ w, const T* __restrict__ bias, int N, int C, int OC,
        int gelu, int ks, int vec) {
    const int VE = 16 / (int)sizeof(T); // elements of a 16-byte vector
    const int STRIDE = 32 * VE;         // a warp's elements per vector load
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int col = blockIdx.x * (ROWS_BLOCK / 32 / ks) + warp / ks, part = warp % ks;
    const int chunk = ((C + ks - 1) / ks + VE - 1) / VE * VE;
    const int lo = part * chunk, hi = min(C, lo + chunk);
    const T* wr = w + (size_t)min(col, OC - 1) * C;
    // W only, before waiting on the previous kernel: this lane's first batch.
    uint4 wv[ROWS_U];
    int k = lo + lane * VE;
    if (vec && col < OC) {
#pragma unroll
        for (int u = 0; u < ROWS_U; u++)
            if (k + u * STRIDE < hi) wv[u] = *reinterpret_cast<const uint4*>(wr + k + u * STRIDE);
    }
    pdl_enter();
    __shared__ float red[ROWS_BLOCK / 32][ROWS_MAX];
    float acc[ROWS_MAX];
#pragma unroll
    for (int n = 0; n < ROWS_MAX; n++) acc[n] = 0.0f;
    if (col < OC) {
        if (vec) {
            for (;;) {
#pragma unroll
                for (int u = 0; u < ROWS_U; u++) {
                    const int kk = k + u * STRIDE;
                    if (kk < hi) {
#if DTYPE == DRUTO_F32
                        // f32 from the vectors' words, no array: NVRTC 13
                        // kept a 16-byte array of the weights (and before it
                        // a union) in local memory for f32.
#pragma unroll
                        for (int n = 0; n < ROWS_MAX; n++)
                            if (n < N) acc[n] += dot44(wv[u], *reinterpret_cast<const uint4*>(inp + (size_t)n * C + kk));
#else
                        float wf[16 / sizeof(T)];
                        unpack16(wv[u], wf);
#pragma unroll
                        for (int n = 0; n < ROWS_MAX; n++) {
                            if (n < N) {
                                // 16-bit types through the union: a form
                                // without it made ptxas (11.8, sm_90) spill
                                // for bf16.
                                vec16 xv;
                                xv.u = *reinterpret_cast<const uint4*>(inp + (size_t)n * C + kk);
                                float s = 0.0f;
#pragma unroll
                                for (int e = 0; e < VE; e++) s += wf[e] * to_f32(xv.e[e]);
                                acc[n] += s;
                            }
                        }
#endif
                    }
                }
                k += ROWS_U * STRIDE;
                if (k >= hi) break;
#pragma unroll
                for (int u = 0; u < ROWS_U; u++)
                    if (k + u * STRIDE < hi) wv[u] = *reinterpret_cast<const uint4*>(wr + k + u * STRIDE);
            }
        } else {
            for (int k = lo + lane; k < hi; k += 32) {
                const float wf = load(wr, k);
#pragma unroll
                for (int n = 0; n < ROWS_MAX; n++)
                    if (n < N) acc[n] += wf * load(inp, (size_t)n * C + k);
            }
        }
    }
#pragma unroll
    for (int n = 0; n < ROWS_MAX; n++) {
        if (n < N) {
            const float v = warp_sum(acc[n]);
            if (lane == 0) red[warp][n] = v;
        }
    }
    __syncthreads();
    if (part == 0 && col < OC && lane < N) {
        float v = 0.0f;
        for (int p = 0; p < ks; p++) v += red[warp + p][lane];
        if (bias) v += load(bias, col);
        const size_t o = (size_t)lane * OC + col;
        if (gelu) {
            store(pre, o, v);
            store(out, o, gelu_f(v));
        } else {
            store(out, o, v);
        }
    }
}
