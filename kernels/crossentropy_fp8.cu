// crossentropy_fp8.cu: the fused classifier of crossentropy.cu with the
// gradient also cast to E5M2 (pkg/device/gpu/crossentropy_fp8.go:
// CrossEntropyFP8), the operand of the LM head's FP8 dx product under
// amp.FP8Recipe.Head (issue 38).
//
// druto:kernel crossentropy_fp8_l3 crossentropy_fp8_tma
// druto:pdl crossentropy_fp8_l3 crossentropy_fp8_tma
// druto:dtypes f32 bf16 f16
// druto:arch 90
//
// Per row, exactly what crossentropy_fused_l3 and crossentropy_fused_tma
// compute (the same functions, crossentropy.cuh, in the same order):
// losses[row] = log(sum) - (x[target] - max), and with dscale != 0 the
// gradient g = (exp(x - max)/sum - onehot)·dscale written over the logits
// in T when store != 0. Besides, each g in fp32 (before its rounding to
// T: one rounding, to FP8) is cast to q (N,V) e5m2 = e5m2(g·s), s =
// scale[0] read on the device, and the kernel adds to amax as fp8.cu's
// casts add (fp8.cuh): amax[0] = max(amax[0], max |g|) by atomicMax on
// the bits, amax[1] += the nonzero finite g whose code is ±0, one atomic
// of each a block for all its rows (a persistent grid). With dscale == 0
// only the losses are written; q and amax are left as they are.
//
// store == 0: the caller reads the gradient only from q (the LM head's
// dx and dW products both in FP8, the dW's operand a transpose of q made
// apart: fp8transpose.cu), so the logits are left as they were: neither
// form stores the gradient in T (N·V·sizeof(T) bytes of writes fewer)
// nor packs it, and the l3 form skips the barrier that kept thread 0's
// read of x[target] ahead of those stores. The losses, q and amax are
// computed as with store != 0, bit for bit.
//
// The target's gradient (p - 1)·dscale is chosen per element by its
// column (a compare and a select a logit) instead of being written over
// the row afterwards as the bf16 kernels do, so that q holds its code
// too; its value is the bf16 kernels' (the same expression of the same
// exp). The dx product dlogits·wte takes q as its K-major operand (K = V)
// as it is; the weight gradient's (K = N, tokens) is qᵀ, which
// TransposeFP8 (fp8transpose.cu) makes from q after this kernel.
//
// Both kernels need rows of 16-byte vectors (V a multiple of 16, logits
// and q 16-byte aligned: the launcher checks), so there is no scalar path.
// crossentropy_fp8_tma is crossentropy_fused_tma's form (the row in shared
// memory by the bulk-copy engine; NVRTC 12 on sm_90, else an empty body
// the launcher never picks), crossentropy_fp8_l3 crossentropy_fused_l3's
// (the row read twice, the second time from L2), one block an SM per
// round of its persistent grid and one resident block an SM (the FP8
// state takes registers that two blocks of 512 would not have).
// Traffic: sizeof(T) read and sizeof(T) + 1 written a logit (1 with
// store == 0).

#include "common.cuh"
#include "crossentropy.cuh"
#include "fp8.cuh"

// druto:block CEF8_THREADS crossentropy_fp8_l3
#define CEF8_THREADS 512
#define CEF8_UNROLL 4
// druto:block CEF8_TMA_THREADS crossentropy_fp8_tma
#define CEF8_TMA_THREADS 1024

// cef8_grad writes the gradient of one 16-byte vector of logits (column
// j0 on) given the row's ml = max·log2(e), inv = 1/sum and sc = dscale/sum
// into o, casts it to CE_VEC e5m2 codes at qrow[j0..] and folds their
// |g| bits into am and their underflows into uf.
__device__ __forceinline__ void cef8_grad(float* o, const vec16& p, int j0, int tgt, float ml, float inv, float sc, float dscale,
                                          float s, unsigned char* qrow, unsigned int& am, unsigned int& uf) {
    const float L2E = 1.4426950408889634f;
#pragma unroll
    for (int e = 0; e < CE_VEC; e++) {
        const float x = ce_ex2(fmaf(load(p.e, e), L2E, -ml));
        o[e] = j0 + e == tgt ? ce_target_grad(x, inv, dscale) : x * sc;
    }
    unsigned int w[CE_VEC / 4];
#pragma unroll
    for (int k = 0; k < CE_VEC / 4; k++) {
        const unsigned int lo = fp8x2<FP8_E5M2>(o[4 * k] * s, o[4 * k + 1] * s);
        const unsigned int hi = fp8x2<FP8_E5M2>(o[4 * k + 2] * s, o[4 * k + 3] * s);
        w[k] = lo | (hi << 16);
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const unsigned int a = abs_bits(o[4 * k + e]);
            am = max_u32(am, a);
            uf += flushed(a, w[k] >> (8 * e));
        }
    }
#if DTYPE == DRUTO_F32
    *reinterpret_cast<unsigned int*>(qrow + j0) = w[0];
#else
    *reinterpret_cast<uint2*>(qrow + j0) = make_uint2(w[0], w[1]);
#endif
}

// cef8_amax adds the block's largest |g| bits (each thread's am) into
// amax[0] and its underflows (uf) into amax[1]: every thread calls it.
template <int BLOCK>
__device__ __forceinline__ void cef8_amax(float* amax, unsigned int am, unsigned int uf) {
    __shared__ unsigned int wmax[BLOCK / 32], wsum[BLOCK / 32];
    for (int off = 16; off > 0; off >>= 1) am = max_u32(am, __shfl_xor_sync(0xffffffffu, am, off));
    if ((threadIdx.x & 31) == 0) wmax[threadIdx.x / 32] = am;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned int b = 0;
#pragma unroll
        for (int w = 0; w < BLOCK / 32; w++) b = max_u32(b, wmax[w]);
        if (b != 0) atomicMax(reinterpret_cast<unsigned int*>(amax), b);
    }
    add_counts(amax, wsum, uf, BLOCK / 32);
}

// losses (N) F32, logits (N,V) T, q (N,V) e5m2 bytes, amax (2) f32,
// targets (N), scale (1) f32; dscale_mul: the device loss scale or null;
// store: 0 leaves the logits as they were (the gradient in q alone)
extern "C" __global__ void __launch_bounds__(CEF8_THREADS, 1)
    crossentropy_fp8_l3(float* __restrict__ losses, T* __restrict__ logits, unsigned char* __restrict__ q, float* __restrict__ amax,
                        const int* __restrict__ targets, const float* __restrict__ scale, int N, int V, float dscale,
                        const float* __restrict__ dscale_mul, int store) {
    pdl_enter();
    if (dscale_mul != 0) dscale *= *dscale_mul; // the device loss scale (a power of two: exact)
    __shared__ float red[64];
    const int tid = threadIdx.x;
    const int nv = V / CE_VEC;
    const float L2E = 1.4426950408889634f;
    const float s = dscale != 0.0f ? *scale : 0.0f;
    unsigned int am = 0, uf = 0;
    for (int row = blockIdx.x; row < N; row += gridDim.x) {
        T* x = logits + (size_t)row * V;
        const int tgt = targets[row];
        const bool ok = tgt >= 0 && tgt < V;
        float xt = 0.0f;
        if (tid == 0 && ok) xt = load(x, tgt); // before any thread writes the row
        uint4* xv = (uint4*)x;

        // pass 1: crossentropy_fused_l3's running (max, sum)
        float m = CE_NEG_INF, sum = 0.0f;
        vec16 p[CEF8_UNROLL];
#pragma unroll
        for (int u = 0; u < CEF8_UNROLL; u++) {
            int i = tid + u * CEF8_THREADS;
            if (i < nv) p[u].u = xv[i];
        }
        for (int i0 = tid; i0 < nv; i0 += CEF8_THREADS * CEF8_UNROLL) {
            vec16 n[CEF8_UNROLL];
            const int n0 = i0 + CEF8_THREADS * CEF8_UNROLL;
#pragma unroll
            for (int u = 0; u < CEF8_UNROLL; u++) {
                int i = n0 + u * CEF8_THREADS;
                if (i < nv) n[u].u = xv[i];
            }
            float lm = CE_NEG_INF;
#pragma unroll
            for (int u = 0; u < CEF8_UNROLL; u++) {
                if (i0 + u * CEF8_THREADS < nv) {
#pragma unroll
                    for (int e = 0; e < CE_VEC; e++) lm = fmaxf(lm, load(p[u].e, e));
                }
            }
            if (lm > m) {
                sum *= ce_ex2(fmaf(m, L2E, -lm * L2E)); // exp(m - lm); 0 while m is -inf
                m = lm;
            }
            const float ml = ce_ml(m);
#pragma unroll
            for (int u = 0; u < CEF8_UNROLL; u++) {
                if (i0 + u * CEF8_THREADS < nv) {
#pragma unroll
                    for (int e = 0; e < CE_VEC; e++) sum += ce_ex2(fmaf(load(p[u].e, e), L2E, -ml));
                }
            }
#pragma unroll
            for (int u = 0; u < CEF8_UNROLL; u++) p[u] = n[u];
        }
        ce_block_lse(m, sum, red);
        if (tid == 0) losses[row] = ok ? logf(sum) - (xt - m) : CE_NAN;
        if (dscale == 0.0f) continue;
        if (store) __syncthreads(); // thread 0 has read x[tgt] before anyone overwrites it
        const float ml = m * L2E, inv = 1.0f / sum, sc = dscale / sum;

        // pass 2: the row again (from L2); the gradient in q, and over the
        // row with store
        unsigned char* qrow = q + (size_t)row * V;
        for (int i = tid; i < nv; i += CEF8_THREADS) {
            vec16 v;
            v.u = xv[i];
            float o[CE_VEC];
            cef8_grad(o, v, i * CE_VEC, ok ? tgt : -1, ml, inv, sc, dscale, s, qrow, am, uf);
            if (store) xv[i] = pack16(o);
        }
    }
    cef8_amax<CEF8_THREADS>(amax, am, uf);
}

#ifdef DRUTO_HAVE_TMA
extern __shared__ __align__(128) unsigned char cef8_tma_rows[];
#endif

// crossentropy_fp8_l3's arguments; dynamic shared memory 2·V·sizeof(T)
extern "C" __global__ void __launch_bounds__(CEF8_TMA_THREADS, 1)
    crossentropy_fp8_tma(float* __restrict__ losses, T* __restrict__ logits, unsigned char* __restrict__ q, float* __restrict__ amax,
                         const int* __restrict__ targets, const float* __restrict__ scale, int N, int V, float dscale,
                         const float* __restrict__ dscale_mul, int store) {
    pdl_enter();
#ifdef DRUTO_HAVE_TMA
    if (dscale_mul != 0) dscale *= *dscale_mul; // the device loss scale (a power of two: exact)
    __shared__ float red[64];
    __shared__ __align__(8) unsigned long long bars[2];
    const int tid = threadIdx.x;
    const int nv = V / CE_VEC;
    const unsigned rowBytes = (unsigned)V * (unsigned)sizeof(T);
    const unsigned rows0 = (unsigned)__cvta_generic_to_shared(cef8_tma_rows);
    const unsigned bar0 = (unsigned)__cvta_generic_to_shared(&bars[0]);
    const float L2E = 1.4426950408889634f;
    const float s = dscale != 0.0f ? *scale : 0.0f;
    unsigned int am = 0, uf = 0;
    if (tid == 0) {
        tma_bar_init(bar0);
        tma_bar_init(bar0 + 8);
        tma_bar_fence();
    }
    __syncthreads();
    if (tid == 0 && blockIdx.x < N) {
        tma_expect(bar0, rowBytes);
        tma_load(rows0, logits + (size_t)blockIdx.x * V, rowBytes, bar0);
    }
    int k = 0;
    for (int row = blockIdx.x; row < N; row += gridDim.x, k++) {
        const int b = k & 1;
        // The other buffer's last reader was the previous row, which every
        // thread finished before the barrier that ended it.
        const int next = row + gridDim.x;
        if (tid == 0 && next < N) {
            tma_expect(bar0 + 8 * (b ^ 1), rowBytes);
            tma_load(rows0 + (b ^ 1) * rowBytes, logits + (size_t)next * V, rowBytes, bar0 + 8 * (b ^ 1));
        }
        const int tgt = targets[row];
        const bool ok = tgt >= 0 && tgt < V;
        const uint4* sv = reinterpret_cast<const uint4*>(cef8_tma_rows + b * rowBytes);
        tma_bar_wait(bar0 + 8 * b, (k >> 1) & 1);

        // pass 1: crossentropy_fused_tma's, two vectors a step
        float m = CE_NEG_INF, sum = 0.0f;
        for (int i = tid; i < nv; i += 2 * CEF8_TMA_THREADS) {
            vec16 p[2];
            const bool two = i + CEF8_TMA_THREADS < nv;
            p[0].u = sv[i];
            if (two) p[1].u = sv[i + CEF8_TMA_THREADS];
            float lm = CE_NEG_INF;
#pragma unroll
            for (int e = 0; e < CE_VEC; e++) lm = fmaxf(lm, load(p[0].e, e));
            if (two) {
#pragma unroll
                for (int e = 0; e < CE_VEC; e++) lm = fmaxf(lm, load(p[1].e, e));
            }
            if (lm > m) {
                sum *= ce_ex2(fmaf(m, L2E, -lm * L2E)); // exp(m - lm); 0 while m is -inf
                m = lm;
            }
            const float ml = ce_ml(m);
#pragma unroll
            for (int e = 0; e < CE_VEC; e++) sum += ce_ex2(fmaf(load(p[0].e, e), L2E, -ml));
            if (two) {
#pragma unroll
                for (int e = 0; e < CE_VEC; e++) sum += ce_ex2(fmaf(load(p[1].e, e), L2E, -ml));
            }
        }
        ce_block_lse(m, sum, red);
        const float xt = ok ? load(reinterpret_cast<const T*>(sv), tgt) : 0.0f;
        if (tid == 0) losses[row] = ok ? logf(sum) - (xt - m) : CE_NAN;
        if (dscale != 0.0f) {
            // pass 2: from shared memory, the gradient in q, and with store
            // over the logits in global memory
            const float ml = m * L2E, inv = 1.0f / sum, sc = dscale / sum;
            uint4* xv = reinterpret_cast<uint4*>(logits + (size_t)row * V);
            unsigned char* qrow = q + (size_t)row * V;
            for (int i = tid; i < nv; i += CEF8_TMA_THREADS) {
                vec16 v;
                v.u = sv[i];
                float o[CE_VEC];
                cef8_grad(o, v, i * CE_VEC, ok ? tgt : -1, ml, inv, sc, dscale, s, qrow, am, uf);
                if (store) xv[i] = pack16(o);
            }
        }
        __syncthreads(); // buffer b is read; it is refilled two rows on
    }
    cef8_amax<CEF8_TMA_THREADS>(amax, am, uf);
#endif
}
