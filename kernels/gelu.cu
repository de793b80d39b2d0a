// gelu.cu: the tanh-form GELU and the bias add of the linear layers
// (pkg/device/gpu/gelu.go; matmul.go uses the forward kernels in its
// decomposed form and when cuBLASLt's epilogues are not available).
//
// druto:kernel gelu_forward gelu_forward_pass bias_add gelu_backward2 gelu_backward_pass
// druto:kernel gelu_bias_backward
// druto:pdl gelu_forward bias_add gelu_backward2 gelu_bias_backward
// druto:dtypes f32 bf16 f16
//
//   gelu(x)  = 0.5·x·(1 + tanh(a)), a = √(2/π)·(x + 0.044715·x³)
//   gelu'(x) = 0.5·(1 + tanh(a)) + 0.5·x·(1 - tanh²(a))·√(2/π)·(1 + 3·0.044715·x²)
//
// Every tensor is T; arithmetic is fp32 in the CPU reference's order
// (pkg/device/cpu/gelu.go), tanh is tanhf.
//   gelu_forward: out = gelu(inp) in one pass (out may be inp).
//   gelu_forward_pass: one of the eight elementwise passes of the composite
//     as eager PyTorch runs it (op 0..7 below) through an fp32 (n) buffer t.
//   bias_add: out (N,OC) += bias (OC) broadcast over rows, in place.
//   gelu_backward2: dinp = gelu'(inp)·dout in one pass (dinp may be dout);
//     see its comment below.
//   gelu_backward_pass: one of the derivative's nine passes (op 0..8) over
//     fp32 (n) buffers x2, t and r.
//   gelu_bias_backward: dpre (N,C) = gelu'(pre)·dpre in place, and the fp32
//     column sums of the result per chunk of rows (the fc layer's bias
//     gradient, deterministic; see its comment below).
// gelu_forward moves 4 elements per thread with ld4/st4 when vec is set (n
// a multiple of 4 is not needed: the tail is scalar); gelu_backward2 16
// bytes per tensor; the passes are plain grid-stride loops, one element
// per thread and step.

#include "common.cuh"
#include "gelu.cuh"

// Block sizes (threads), read by the launchers too (kernels/blocks.go).
// druto:block GELU_BLOCK gelu_forward gelu_forward_pass bias_add gelu_backward2 gelu_backward_pass gelu_bias_backward
#define GELU_BLOCK 256


#define EW_LOOP(n) for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

// out (n) = gelu(inp (n))
extern "C" __global__ void gelu_forward(T* out, const T* inp, long long n, int vec) {
    pdl_enter();
    const size_t N = (size_t)n, stride = (size_t)gridDim.x * blockDim.x * 4;
    for (size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 4; i < N; i += stride) {
        if (vec && i + 4 <= N) {
            F4 x = ld4(inp + i);
#pragma unroll
            for (int j = 0; j < 4; j++) x.v[j] = gelu_f(x.v[j]);
            st4(out + i, x);
        } else {
            for (size_t k = i; k < i + 4 && k < N; k++) store(out, k, gelu_f(load(inp, k)));
        }
    }
}

// One pass of the composite: t (n) fp32, x (n) T, out (n) T (op 7 only).
extern "C" __global__ void gelu_forward_pass(int op, float* __restrict__ t, const T* __restrict__ x,
                                             T* __restrict__ out, long long n) {
    const size_t N = (size_t)n;
    switch (op) {
    case 0: EW_LOOP(N) { float v = load(x, i); t[i] = v * v * v; } break; // x³
    case 1: EW_LOOP(N) t[i] *= GELU_COEF; break;                          // ×0.044715
    case 2: EW_LOOP(N) t[i] += load(x, i); break;                         // +x
    case 3: EW_LOOP(N) t[i] *= GELU_SCALE; break;                         // ×√(2/π)
    case 4: EW_LOOP(N) t[i] = tanhf(t[i]); break;                         // tanh
    case 5: EW_LOOP(N) t[i] += 1.0f; break;                               // +1
    case 6: EW_LOOP(N) t[i] *= load(x, i); break;                         // ×x
    case 7: EW_LOOP(N) store(out, i, t[i] * 0.5f); break;                 // ×0.5 into out
    }
}

// out (N,OC) += bias (OC), rounded to T
extern "C" __global__ void bias_add(T* __restrict__ out, const T* __restrict__ bias, int N, int OC) {
    pdl_enter();
    EW_LOOP((size_t)N * OC) store(out, i, load(out, i) + load(bias, (int)(i % OC)));
}

// gelu_backward2's arithmetic: one 16-byte access per tensor and vector (8
// elements of a 16-bit T, 4 of fp32) and, for 16-bit T, tanh as 1 - 2/(exp(2u) + 1) with the fast exp2 and reciprocal (about 1e-7
// absolute error, where tanhf's software path costs ~20 instructions an
// element: at 4.3 TB/s and 6 bytes an element that is near the issue limit;
// the result is rounded to bf16/f16, 2^-9 and 2^-12 relative). fp32 keeps
// tanhf and the CPU reference's rounding. vec: every pointer 16-byte aligned.
__device__ __forceinline__ float gelu_grad_fast(float x) {
#if DTYPE == DRUTO_F32
    return gelu_grad_f(x);
#else
    float x2 = x * x;
    float u = (x2 * x * GELU_COEF + x) * GELU_SCALE;
    float e = exp2f(u * 2.8853900817779268f); // exp(2u); inf for large u gives t = 1
    float t = 1.0f - 2.0f * __frcp_rn(e + 1.0f);
    float left = (t + 1.0f) * 0.5f;
    float right = x * 0.5f * (1.0f - t * t) * GELU_SCALE * (x2 * (3.0f * GELU_COEF) + 1.0f);
    return left + right;
#endif
}

// gelu_backward2: those 16-byte accesses over a persistent grid (the
// launcher sizes it to the blocks resident at once), software pipelined:
// each thread issues the loads of its next vector before it computes and
// stores the current one, so its 32 bytes of loads stay in flight during
// the ~25 instructions an element of the derivative costs (an unpipelined
// form, which waited for each vector's loads, was slower and is gone).
// dinp may be dout: a thread's next vector is
// another vector, loaded before the current one is stored. The last
// n % W elements (W = 16/sizeof(T)), and every element when vec is 0
// (not 16-byte aligned), take the scalar path.
__device__ __forceinline__ uint4 gb_compute(uint4 xu, uint4 gu) {
    vec16 x, g, o;
    x.u = xu;
    g.u = gu;
#pragma unroll
    for (int j = 0; j < (int)(16 / sizeof(T)); j++) store(o.e, j, gelu_grad_fast(load(x.e, j)) * load(g.e, j));
    return o.u;
}

extern "C" __global__ void __launch_bounds__(GELU_BLOCK) gelu_backward2(T* dinp, const T* __restrict__ inp, const T* dout,
                                                                       long long n, int vec) {
    pdl_enter();
    const int W = 16 / sizeof(T);
    const size_t N = (size_t)n, stride = (size_t)gridDim.x * GELU_BLOCK;
    const size_t first = (size_t)blockIdx.x * GELU_BLOCK + threadIdx.x;
    if (!vec) {
        for (size_t k = first; k < N; k += stride) store(dinp, k, gelu_grad_fast(load(inp, k)) * load(dout, k));
        return;
    }
    const size_t nv = N / W; // whole vectors
    const uint4* xv = reinterpret_cast<const uint4*>(inp);
    const uint4* gv = reinterpret_cast<const uint4*>(dout);
    uint4* ov = reinterpret_cast<uint4*>(dinp);
    uint4 x, g;
    if (first < nv) {
        x = xv[first];
        g = gv[first];
    }
    for (size_t v = first; v < nv; v += stride) {
        uint4 xn, gn;
        const size_t next = v + stride;
        if (next < nv) { // the next vector's loads, in flight while this one is computed
            xn = xv[next];
            gn = gv[next];
        }
        ov[v] = gb_compute(x, g);
        x = xn;
        g = gn;
    }
    if (first == 0)
        for (size_t k = nv * W; k < N; k++) store(dinp, k, gelu_grad_fast(load(inp, k)) * load(dout, k));
}

// One pass of the derivative: x2, t, r (n) fp32; x = inp (n) T, g = dout (n) T,
// dinp (n) T (op 8 only; it may be g).
extern "C" __global__ void gelu_backward_pass(int op, float* __restrict__ x2, float* __restrict__ t,
                                              float* __restrict__ r, const T* __restrict__ x, const T* g, T* dinp,
                                              long long n) {
    const size_t N = (size_t)n;
    switch (op) {
    case 0: EW_LOOP(N) { float v = load(x, i); x2[i] = v * v; } break;                   // x2 = x²
    case 1: EW_LOOP(N) { float v = load(x, i); t[i] = x2[i] * v * GELU_COEF + v; } break; // t = x³·c + x
    case 2: EW_LOOP(N) t[i] = tanhf(t[i] * GELU_SCALE); break;                           // t = tanh(√(2/π)·t)
    case 3: EW_LOOP(N) r[i] = 1.0f - t[i] * t[i]; break;                                 // r = sech²
    case 4: EW_LOOP(N) r[i] = load(x, i) * 0.5f * r[i] * GELU_SCALE; break;              // r = 0.5·x·r·√(2/π)
    case 5: EW_LOOP(N) x2[i] = x2[i] * (3.0f * GELU_COEF) + 1.0f; break;                 // x2 = 3c·x² + 1
    case 6: EW_LOOP(N) r[i] *= x2[i]; break;                                             // right term
    case 7: EW_LOOP(N) t[i] = (t[i] + 1.0f) * 0.5f; break;                               // left term
    case 8: EW_LOOP(N) store(dinp, i, (t[i] + r[i]) * load(g, i)); break;                // dinp
    }
}

// ---- gelu_bias_backward ---------------------------------------------------
//
// The MLP projection's backward after a plain dgrad GEMM stored
// dpre = dout·W in T (pkg/device/gpu/matmul_gelu.go, the "kernel" form of
// MatmulBackwardGELU): one pass that reads pre and dpre, writes
// dpre = gelu'(pre)·dpre and sums each column of the fp32 products (before
// they are rounded to T) over a chunk of rows:
//
//   part (gridDim.y, C) F32: part[y][c] = Σ_{r in chunk y} gelu'(pre[r,c])·dpre[r,c]
//
// (part null: no sums). matmul_bias_grad (matmul.cu) then adds the chunks'
// sums, in chunk order, into the fp32 bias gradient: no atomics, and the
// same bits on every run for a given grid.
//
// grid (ceil(C / (32·GB_W)), ceil(N / rows)), GELU_BLOCK threads. A block
// owns a strip of 32·GB_W columns and the rows [y·rows, min(N, (y+1)·rows));
// warp w takes rows w, w + GB_WARPS, ... of it, lane l (vec) the GB_W
// columns l·GB_W.. as one 16-byte vector (GB_W = 8 for bf16/f16, 4 for
// fp32), or (scalar, vec 0) columns l, l+32, ..., each thread summing its
// columns over its rows in row order in registers; the block then adds its
// warps' sums in warp order (shared memory) and writes one partial per
// column. vec needs dpre and pre 16-byte aligned and C a multiple of GB_W
// (the launcher checks). Software pipelined as gelu_backward2: the loads of
// a thread's next two rows are issued before the current two are computed
// and stored (dpre is updated in place: each element is read and written by
// one thread, in that order).
//
// The derivative is gelu.cuh's gelu_grad_lean (for 16-bit T, the tanh
// form through one ex2 and one rcp; fp32 T keeps gelu_grad_f): with the
// paired rounding below, sm_90's SASS of the vector loop is ~22
// instructions an element, where gelu_backward2's (gelu_grad_fast's IEEE
// reciprocal, the separate terms, common.cuh's rounding) is ~52, which at
// 6 bytes an element is about a Hopper GPU's memory time: that kernel is
// issue-bound.

#define GB_W (16 / (int)sizeof(T))
#define GB_WARPS (GELU_BLOCK / 32)

// gb_row applies the derivative to one vector of a row: xu (pre) and gu
// (dpre) in, the rounded result returned, the fp32 products added to acc.
// On sm_80+ the 16-bit results are rounded two at a time (cvt.rn.bf16x2 /
// f16x2: one instruction a pair, where common.cuh's bf16 rounding takes
// about six an element; the same round-to-nearest-even).
__device__ __forceinline__ uint4 gb_row(uint4 xu, uint4 gu, float* acc) {
    vec16 x, g;
    x.u = xu;
    g.u = gu;
    float v[GB_W];
#pragma unroll
    for (int j = 0; j < GB_W; j++) {
        v[j] = gelu_grad_lean(load(x.e, j)) * load(g.e, j);
        acc[j] += v[j];
    }
    return pack16(v);
}

extern "C" __global__ void __launch_bounds__(GELU_BLOCK) gelu_bias_backward(T* dpre, const T* __restrict__ pre,
                                                                           float* __restrict__ part, int N, int C, int rows,
                                                                           int vec) {
    pdl_enter();
    __shared__ float red[GB_WARPS][32 * GB_W];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int strip = blockIdx.x * 32 * GB_W;
    const int r0 = blockIdx.y * rows, r1 = min(N, r0 + rows);
    float acc[GB_W];
#pragma unroll
    for (int j = 0; j < GB_W; j++) acc[j] = 0.0f;
    if (vec) {
        const int c = strip + lane * GB_W;
        if (c < C) {
            const size_t S = (size_t)GB_WARPS * C; // between a warp's consecutive rows
            size_t o = (size_t)(r0 + warp) * C + c;
            int r = r0 + warp;
            bool h0 = r < r1, h1 = r + GB_WARPS < r1;
            uint4 x0, g0, x1, g1;
            if (h0) {
                x0 = *reinterpret_cast<const uint4*>(pre + o);
                g0 = *reinterpret_cast<const uint4*>(dpre + o);
            }
            if (h1) {
                x1 = *reinterpret_cast<const uint4*>(pre + o + S);
                g1 = *reinterpret_cast<const uint4*>(dpre + o + S);
            }
            while (h0) {
                const int rn = r + 2 * GB_WARPS;
                const bool n0 = rn < r1, n1 = rn + GB_WARPS < r1;
                uint4 xn0, gn0, xn1, gn1;
                if (n0) { // the next two rows' loads, in flight while these are computed
                    xn0 = *reinterpret_cast<const uint4*>(pre + o + 2 * S);
                    gn0 = *reinterpret_cast<const uint4*>(dpre + o + 2 * S);
                }
                if (n1) {
                    xn1 = *reinterpret_cast<const uint4*>(pre + o + 3 * S);
                    gn1 = *reinterpret_cast<const uint4*>(dpre + o + 3 * S);
                }
                *reinterpret_cast<uint4*>(dpre + o) = gb_row(x0, g0, acc);
                if (h1) *reinterpret_cast<uint4*>(dpre + o + S) = gb_row(x1, g1, acc);
                x0 = xn0, g0 = gn0, x1 = xn1, g1 = gn1;
                h0 = n0, h1 = n1, r = rn, o += 2 * S;
            }
        }
    } else {
        for (int r = r0 + warp; r < r1; r += GB_WARPS) {
            T* d = dpre + (size_t)r * C;
            const T* p = pre + (size_t)r * C;
#pragma unroll
            for (int j = 0; j < GB_W; j++) {
                const int c = strip + lane + 32 * j;
                if (c < C) {
                    float v = gelu_grad_lean(load(p, c)) * load(d, c);
                    acc[j] += v;
                    store(d, c, v);
                }
            }
        }
    }
    if (part == 0) return; // the same for the whole block
#pragma unroll
    for (int j = 0; j < GB_W; j++) red[warp][vec ? lane * GB_W + j : lane + 32 * j] = acc[j];
    __syncthreads();
    for (int k = threadIdx.x; k < 32 * GB_W; k += GELU_BLOCK) {
        const int c = strip + k;
        if (c < C) {
            float s = 0.0f;
#pragma unroll
            for (int w = 0; w < GB_WARPS; w++) s += red[w][k];
            part[(size_t)blockIdx.y * C + c] = s;
        }
    }
}
