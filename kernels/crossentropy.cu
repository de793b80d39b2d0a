// crossentropy.cu: softmax cross-entropy over the vocabulary, the "fused
// classifier" (pkg/device/gpu/crossentropy.go).
//
// druto:kernel crossentropy_fused_l3
// druto:kernel ce_rowmax ce_expsub ce_rowsum ce_divide ce_nll ce_grad
// druto:pdl crossentropy_fused_l3
// druto:dtypes f32 bf16 f16
//
// Fused (crossentropy_fused_l3): per row, Σ exp(x - max) in fp32; thread 0 writes
// losses[row] = log(sum) - (x[target] - max); when dscale != 0 the row is
// overwritten with (exp(x - max)/sum - onehot)·dscale in T. No probability
// buffer exists. Bytes: the logits read once and, with dscale != 0, written
// once; the targets and losses. With dscale_mul not null
// (crossentropy_fused_l3 and ce_grad), dscale is first multiplied by
// *dscale_mul: the loss scale of the device-resident step.
//
// Decomposed (log_softmax + nll_loss as eager PyTorch runs them, over a
// materialised fp32 (N,V) probability buffer): ce_rowmax, ce_expsub
// (probs = exp(x - max)), ce_rowsum, ce_divide (probs /= sum), ce_nll
// (losses = log(sum) - (x[target] - max), read from the logits before
// ce_grad overwrites them), ce_grad (logits = (probs - onehot)·dscale).
// A target outside [0,V) (the caller validates them on the host) gives a NaN
// loss and no out-of-bounds read.

#include "common.cuh"

// druto:block CE_EW_BLOCK ce_rowmax ce_expsub ce_rowsum ce_divide ce_nll ce_grad
#define CE_EW_BLOCK 256 // the decomposed kernels
#define CE_VEC ((int)(16 / sizeof(T)))
#define CE_NEG_INF __int_as_float(0xff800000)
#define CE_NAN __int_as_float(0x7fc00000)

__device__ __forceinline__ float ce_block_max(float v, float* red) {
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads(); // red may still be read by an earlier reduction
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < (int)(blockDim.x >> 5) ? red[lane] : CE_NEG_INF;
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

__device__ __forceinline__ float ce_block_sum(float v, float* red) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < (int)(blockDim.x >> 5) ? red[lane] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// ce_exp returns exp(x - m) given ml = m·log2(e): one FMA and exp2f (2 ulp);
// the FMA's rounding of the exponent adds a relative error of about
// |x - m|·6e-8, 2e-6 at the worst (x - m = -30), far inside fp32's tolerance.
__device__ __forceinline__ float ce_exp(float x, float ml) { return exp2f(fmaf(x, 1.4426950408889634f, -ml)); }

__device__ __forceinline__ float ce_grad_of(float x, float ml, float inv, int j, int tgt, float dscale) {
    float p = ce_exp(x, ml) * inv;
    return j == tgt ? (p - 1.0f) * dscale : p * dscale;
}

// ---- crossentropy_fused_l3: several rows in flight per SM ------------
//
// A kernel that held a whole row in registers (512 threads × 64 registers
// of cache) filled the register file, so an SM worked on one row at a time
// and its read phase, reductions and write phase never overlapped.
// crossentropy_fused_l3 keeps almost nothing in registers and reads the
// row twice: pass 1 streams it with CE3_UNROLL 128-bit loads in flight per
// thread (the next group's issued before the current one is folded) and
// folds each group into a running (max, sum) pair (online softmax: the sum
// is rescaled once per group when the max grows, so one pass gives both);
// the block merges the pairs (pass 2's first loads are already in flight);
// pass 2 reads the row again and writes the gradient over it. The launcher
// sizes a persistent grid of the blocks resident at once (2 an SM for
// bf16), so that the other block of an SM streams during one block's
// reductions. Where the row fits in shared memory beside that many blocks
// (rowsmem: V·sizeof(T) bytes a block, 100.6 KB for GPT-2's bf16 rows),
// pass 1 also stores it there and pass 2 reads it back from there: DRAM
// sees the logits read once and written once. Otherwise pass 2 reads the
// row again from L2, issued a few microseconds after the first read; that
// missed often enough on the H200 (Nsight Compute: 1.94 GB read from DRAM
// for 1.65 GB of bf16 logits, L2 hit rate 55%, 937 µs) to cost the kernel
// about 8% of its time.
//
// The work per logit is about 10 instructions (its predecessor
// crossentropy_fused_l2 spent about 25 and measured 61.1% of copy
// bandwidth against 82.7% on the H200):
//   - exp as one ex2.approx.ftz of an FMA (exp(x - m) below 2^-126, where
//     it flushes to 0, is a probability under 1e-38);
//   - pass 2 writes exp(x - m)·(dscale/sum) for every logit, the target's
//     (p - 1)·dscale is written over it by thread 0 after a barrier;
//   - on sm_80 and newer, two logits rounded and packed by one cvt.rn
//     .bf16x2/.f16x2 (the same round-to-nearest-even; a NaN becomes the
//     canonical NaN).
// The gradient is within an ulp of fp32 before its rounding to T
// (dscale/sum is one rounding).

// ce_merge folds the pair (om, os) into (m, s): s is a sum of exp(x - m).
__device__ __forceinline__ void ce_merge(float& m, float& s, float om, float os) {
    float nm = fmaxf(m, om);
    if (nm == CE_NEG_INF) return; // both empty
    s = s * ce_exp(m, nm * 1.4426950408889634f) + os * ce_exp(om, nm * 1.4426950408889634f);
    m = nm;
}

// ce_block_lse merges every thread's (m, s) over the block in a fixed order
// (deterministic); every thread gets the result. red holds 64 floats.
__device__ __forceinline__ void ce_block_lse(float& m, float& s, float* red) {
    for (int off = 16; off > 0; off >>= 1) {
        float om = __shfl_xor_sync(0xffffffffu, m, off), os = __shfl_xor_sync(0xffffffffu, s, off);
        ce_merge(m, s, om, os);
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads(); // red may still be read by the previous row
    if (lane == 0) {
        red[warp] = m;
        red[32 + warp] = s;
    }
    __syncthreads();
    bool have = lane < (int)(blockDim.x >> 5);
    m = have ? red[lane] : CE_NEG_INF;
    s = have ? red[32 + lane] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) {
        float om = __shfl_xor_sync(0xffffffffu, m, off), os = __shfl_xor_sync(0xffffffffu, s, off);
        ce_merge(m, s, om, os);
    }
}

// ce_rescale raises the running max m to lm (when larger), rescaling s.
__device__ __forceinline__ void ce_rescale(float& m, float& s, float lm) {
    if (lm > m) {
        s *= ce_exp(m, lm * 1.4426950408889634f); // exp(m - lm); 0 while m is -inf
        m = lm;
    }
}

// ce_ml is m·log2(e) for ce_exp, 0 while m is -inf (every value so far -inf
// or NaN): exp(-inf - -inf) would be NaN where the -inf logits (masked
// entries) must add 0; NaN logits still give NaN.
__device__ __forceinline__ float ce_ml(float m) { return m == CE_NEG_INF ? 0.0f : m * 1.4426950408889634f; }

// druto:block CE3_THREADS crossentropy_fused_l3
#define CE3_THREADS 512
#define CE3_UNROLL 4
// Two CTAs an SM (64 registers) for bf16; fp32 and f16 need a few more
// registers for their conversions (at 64, ptxas spills 4-8 bytes: local
// memory, which TestGPUBuildAndCache rejects), so they take one CTA an SM.
#if DTYPE == DRUTO_BF16
#define CE3_MIN_BLOCKS 2
#else
#define CE3_MIN_BLOCKS 1
#endif

// ce_ex2 is 2^v (one MUFU op; results below 2^-126 are 0).
__device__ __forceinline__ float ce_ex2(float v) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
}

// ce_row is the row held in shared memory (rowsmem): V·sizeof(T) bytes of
// dynamic shared memory.
extern __shared__ uint4 ce_row[];

// ---- the packed path: 16-bit logits on sm_80 and newer ----------------
//
// Nsight Compute on the H200 counted about 19 instructions a logit in the
// general path below, whose issue slots were half busy (the group copies of
// its software pipeline, a predicate per vector, every element widened
// twice): the kernel was bound by issue and latency, not by DRAM (70% of
// its peak). The packed path spends about 8: the group's max by packed
// max.bf16x2/f16x2 (half an instruction a logit), each logit widened once
// (one instruction), then one FMA, one ex2 and one add into two running
// sums; groups without predicates but the last; pass 2 folds dscale/sum
// into the exponent (exp(x - m)·sc = 2^(x·log2e - (m·log2e - log2 sc)):
// one FMA and one ex2 a logit, two rounded and packed by one cvt) for a
// positive sc. The exponent's rounding adds a relative error of about
// |x·log2e - m·log2e + log2 sc|·6e-8 (under 4e-6 for GPT-2's logits and
// scales), far inside a 16-bit gradient's rounding.
#if DTYPE != DRUTO_F32 && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define CE_PACKED 1
#define CE_PU 6 // vectors a group, 64 logits a thread

// ce_hmax2 is the elementwise max of two packed pairs (NaN dropped, as fmaxf).
__device__ __forceinline__ unsigned int ce_hmax2(unsigned int a, unsigned int b) {
    unsigned int d;
#if DTYPE == DRUTO_BF16
    asm("max.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
#else
    asm("max.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
#endif
    return d;
}

// ce_lo and ce_hi widen the low and the high element of a packed pair;
// CE_NINF2 is a pair of -inf.
#if DTYPE == DRUTO_BF16
__device__ __forceinline__ float ce_lo(unsigned int w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float ce_hi(unsigned int w) { return __uint_as_float(w & 0xffff0000u); }
#define CE_NINF2 0xff80ff80u
#else
__device__ __forceinline__ float ce_lo(unsigned int w) { return f16_bits_to_f32((unsigned short)(w & 0xffffu)); }
__device__ __forceinline__ float ce_hi(unsigned int w) { return f16_bits_to_f32((unsigned short)(w >> 16)); }
#define CE_NINF2 0xfc00fc00u
#endif

// ce_max4 folds the four pairs of q into the packed max mw.
__device__ __forceinline__ unsigned int ce_max4(unsigned int mw, const uint4& q) {
    return ce_hmax2(ce_hmax2(mw, q.x), ce_hmax2(ce_hmax2(q.y, q.z), q.w));
}

// ce_grad16 is exp(x - m)·sc for the vector q, packed (see ce_pass2).
template <bool FOLD>
__device__ __forceinline__ uint4 ce_grad16(const uint4& q, float mls, float sc) {
    const float L2E = 1.4426950408889634f;
    const unsigned int w[4] = {q.x, q.y, q.z, q.w};
    float o[8];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        o[2 * k] = ce_ex2(fmaf(ce_lo(w[k]), L2E, -mls));
        o[2 * k + 1] = ce_ex2(fmaf(ce_hi(w[k]), L2E, -mls));
        if (!FOLD) {
            o[2 * k] *= sc;
            o[2 * k + 1] *= sc;
        }
    }
    return pack16(o);
}

// ce_pass2 writes exp(x - m)·sc over the row (xv, nv vectors), reading it
// from ce_row (SMEM) or again from memory. FOLD: sc is folded into the
// exponent, mls = m·log2e - log2(sc); else mls = m·log2e and the result
// is multiplied by sc.
template <bool FOLD, bool SMEM>
__device__ __forceinline__ void ce_pass2(uint4* xv, int nv, float mls, float sc) {
    const uint4* src = SMEM ? (const uint4*)ce_row : (const uint4*)xv;
    int i0 = threadIdx.x;
    for (; i0 + (CE_PU - 1) * CE3_THREADS < nv; i0 += CE3_THREADS * CE_PU) {
        uint4 q[CE_PU];
#pragma unroll
        for (int u = 0; u < CE_PU; u++) q[u] = src[i0 + u * CE3_THREADS];
#pragma unroll
        for (int u = 0; u < CE_PU; u++) xv[i0 + u * CE3_THREADS] = ce_grad16<FOLD>(q[u], mls, sc);
    }
    for (; i0 < nv; i0 += CE3_THREADS) xv[i0] = ce_grad16<FOLD>(src[i0], mls, sc);
}

// ce_fold folds n vectors p, whose packed max is mw, into the running max
// m and the two running sums of exp(x - m).
__device__ __forceinline__ void ce_fold(float& m, float& s0, float& s1, unsigned int mw, const uint4* p, const int n) {
    const float L2E = 1.4426950408889634f;
    const float lm = fmaxf(ce_lo(mw), ce_hi(mw));
    if (lm > m) {
        const float r = ce_ex2(fmaf(m, L2E, -lm * L2E)); // exp(m - lm); 0 while m is -inf
        s0 *= r;
        s1 *= r;
        m = lm;
    }
    const float ml = ce_ml(m);
#pragma unroll
    for (int u = 0; u < n; u++) {
        const unsigned int w[4] = {p[u].x, p[u].y, p[u].z, p[u].w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            s0 += ce_ex2(fmaf(ce_lo(w[k]), L2E, -ml));
            s1 += ce_ex2(fmaf(ce_hi(w[k]), L2E, -ml));
        }
    }
}

// ce_packed_row is one row of crossentropy_fused_l3 on the packed path:
// losses[row], and with dscale != 0 the gradient over the row but the
// target's element (the caller's). red: the block reduction's 64 floats.
__device__ __forceinline__ void ce_packed_row(float* losses, T* x, int row, int nv, int tgt, bool ok, float xt,
                                              float dscale, int rowsmem, float* red) {
    const int tid = threadIdx.x;
    uint4* xv = (uint4*)x;
    const float L2E = 1.4426950408889634f;
    float m = CE_NEG_INF, s0 = 0.0f, s1 = 0.0f;
    int i0 = tid;
    // full groups of CE_PU vectors a thread: no predicates
    for (; i0 + (CE_PU - 1) * CE3_THREADS < nv; i0 += CE3_THREADS * CE_PU) {
        uint4 p[CE_PU];
        const uint4* g = xv + i0; // one base address, the group's vectors at constant offsets
#pragma unroll
        for (int u = 0; u < CE_PU; u++) p[u] = g[u * CE3_THREADS];
        if (rowsmem) {
            uint4* r = ce_row + i0;
#pragma unroll
            for (int u = 0; u < CE_PU; u++) r[u * CE3_THREADS] = p[u];
        }
        unsigned int mw = CE_NINF2;
#pragma unroll
        for (int u = 0; u < CE_PU; u++) mw = ce_max4(mw, p[u]);
        ce_fold(m, s0, s1, mw, p, CE_PU);
    }
    // the rest: a vector at a time
    for (; i0 < nv; i0 += CE3_THREADS) {
        uint4 p[1] = {xv[i0]};
        if (rowsmem) ce_row[i0] = p[0];
        ce_fold(m, s0, s1, ce_max4(CE_NINF2, p[0]), p, 1);
    }
    float s = s0 + s1;
    ce_block_lse(m, s, red);
    if (tid == 0) losses[row] = ok ? logf(s) - (xt - m) : CE_NAN;
    if (dscale == 0.0f) return;
    const float ml = m * L2E, sc = dscale / s;
    const bool fold = sc > 0.0f && sc <= 3.4e38f;
    const float mls = fold ? ml - log2f(sc) : ml;
    if (rowsmem) {
        if (fold) ce_pass2<true, true>(xv, nv, mls, sc);
        else ce_pass2<false, true>(xv, nv, mls, sc);
    } else {
        if (fold) ce_pass2<true, false>(xv, nv, mls, sc);
        else ce_pass2<false, false>(xv, nv, mls, sc);
    }
    __syncthreads(); // the target's vector is written; every read of ce_row is done before the next row's pass 1
    if (tid == 0 && ok) store(x, tgt, (ce_ex2(fmaf(xt, L2E, -ml)) * (1.0f / s) - 1.0f) * dscale);
}
#else
#define CE_PACKED 0
#endif

// losses (N) F32, logits (N,V) T, targets (N); vecok: the launcher checked
// that logits is 16-byte aligned (V a multiple of CE_VEC is checked here);
// rowsmem: the launch gave V·sizeof(T) bytes of dynamic shared memory
// (with vecok and dscale != 0 only), and pass 1 keeps the row there for
// pass 2 instead of reading it again from L2.
extern "C" __global__ void __launch_bounds__(CE3_THREADS, CE3_MIN_BLOCKS) crossentropy_fused_l3(float* __restrict__ losses, T* __restrict__ logits,
                                                                               const int* __restrict__ targets, int N, int V,
                                                                               float dscale, int vecok, const float* __restrict__ dscale_mul,
                                                                               int rowsmem) {
    pdl_enter();
    if (dscale_mul != 0) dscale *= *dscale_mul; // the device loss scale (a power of two: exact)
    __shared__ float red[64];
    const int tid = threadIdx.x;
    const bool vec = vecok != 0 && (V % CE_VEC) == 0;
    const int nv = vec ? V / CE_VEC : 0;
    const int nvg = nv; // the general path's vectors (its vector code is not built where the packed path is)
    const float L2E = 1.4426950408889634f;
    for (int row = blockIdx.x; row < N; row += gridDim.x) {
        T* x = logits + (size_t)row * V;
        const int tgt = targets[row];
        const bool ok = tgt >= 0 && tgt < V;
        float xt = 0.0f;
        if (tid == 0 && ok) xt = load(x, tgt); // before any thread writes the row
        uint4* xv = (uint4*)x;
#if CE_PACKED
        if (vec) {
            ce_packed_row(losses, x, row, nv, tgt, ok, xt, dscale, rowsmem, red);
            continue;
        }
#endif

        // pass 1: the running (max, sum of exp(x - max)); group g+1's loads
        // are issued before group g is folded
        float m = CE_NEG_INF, s = 0.0f;
#if !CE_PACKED // (the packed path takes every vectorised row)
        vec16 p[CE3_UNROLL];
#pragma unroll
        for (int u = 0; u < CE3_UNROLL; u++) {
            int i = tid + u * CE3_THREADS;
            if (i < nvg) p[u].u = xv[i];
        }
        for (int i0 = tid; i0 < nvg; i0 += CE3_THREADS * CE3_UNROLL) {
            vec16 q[CE3_UNROLL];
            const int n0 = i0 + CE3_THREADS * CE3_UNROLL;
#pragma unroll
            for (int u = 0; u < CE3_UNROLL; u++) {
                int i = n0 + u * CE3_THREADS;
                if (i < nvg) q[u].u = xv[i];
            }
            float lm = CE_NEG_INF;
#pragma unroll
            for (int u = 0; u < CE3_UNROLL; u++) {
                if (i0 + u * CE3_THREADS < nvg) {
                    if (rowsmem) ce_row[i0 + u * CE3_THREADS] = p[u].u;
#pragma unroll
                    for (int e = 0; e < CE_VEC; e++) lm = fmaxf(lm, load(p[u].e, e));
                }
            }
            if (lm > m) {
                s *= ce_ex2(fmaf(m, L2E, -lm * L2E)); // exp(m - lm); 0 while m is -inf
                m = lm;
            }
            const float ml = ce_ml(m);
#pragma unroll
            for (int u = 0; u < CE3_UNROLL; u++) {
                if (i0 + u * CE3_THREADS < nvg) {
#pragma unroll
                    for (int e = 0; e < CE_VEC; e++) s += ce_ex2(fmaf(load(p[u].e, e), L2E, -ml));
                }
            }
#pragma unroll
            for (int u = 0; u < CE3_UNROLL; u++) p[u] = q[u];
        }
#endif
        if (!vec) {
            for (int j = tid; j < V; j += CE3_THREADS) {
                float v = load(x, j);
                ce_rescale(m, s, v);
                s += ce_exp(v, ce_ml(m));
            }
        }
#if !CE_PACKED
        // pass 2's first loads, in flight during the block's reduction
        // (from L2; none where the row is in shared memory)
        if (dscale != 0.0f && !rowsmem) {
#pragma unroll
            for (int u = 0; u < CE3_UNROLL; u++) {
                int i = tid + u * CE3_THREADS;
                if (i < nvg) p[u].u = xv[i];
            }
        }
#endif
        ce_block_lse(m, s, red);
        if (tid == 0) losses[row] = ok ? logf(s) - (xt - m) : CE_NAN;
        if (dscale == 0.0f) continue;
        __syncthreads(); // thread 0 has read x[tgt] before anyone overwrites it
        const float ml = m * L2E, inv = 1.0f / s, sc = dscale / s;

#if !CE_PACKED
        // pass 2: the row again (from shared memory, else from L2);
        // exp(x - m)·dscale/sum over it. (The block reduction's barrier has
        // made every thread's shared-memory stores of pass 1 visible.)
        for (int i0 = tid; i0 < nvg; i0 += CE3_THREADS * CE3_UNROLL) {
            if (rowsmem) {
#pragma unroll
                for (int u = 0; u < CE3_UNROLL; u++) {
                    int i = i0 + u * CE3_THREADS;
                    if (i < nvg) p[u].u = ce_row[i];
                }
            } else if (i0 != tid) {
#pragma unroll
                for (int u = 0; u < CE3_UNROLL; u++) {
                    int i = i0 + u * CE3_THREADS;
                    if (i < nvg) p[u].u = xv[i];
                }
            }
#pragma unroll
            for (int u = 0; u < CE3_UNROLL; u++) {
                int i = i0 + u * CE3_THREADS;
                if (i < nvg) {
                    float o[CE_VEC];
#pragma unroll
                    for (int e = 0; e < CE_VEC; e++) o[e] = ce_ex2(fmaf(load(p[u].e, e), L2E, -ml)) * sc;
                    xv[i] = pack16(o);
                }
            }
        }
#endif
        if (!vec) {
            for (int j = tid; j < V; j += CE3_THREADS) store(x, j, ce_grad_of(load(x, j), ml, inv, j, tgt, dscale));
        } else {
            __syncthreads(); // the target's vector is written; every read of ce_row is done before the next row's pass 1
            if (tid == 0 && ok) store(x, tgt, (ce_ex2(fmaf(xt, L2E, -ml)) * inv - 1.0f) * dscale);
        }
    }
}

// mx (N) F32 = max_j logits[i,j]; one block per row
extern "C" __global__ void ce_rowmax(float* __restrict__ mx, const T* __restrict__ logits, int N, int V) {
    __shared__ float red[32];
    int row = blockIdx.x;
    if (row >= N) return;
    const T* x = logits + (size_t)row * V;
    float m = CE_NEG_INF;
    for (int j = threadIdx.x; j < V; j += blockDim.x) m = fmaxf(m, load(x, j));
    m = ce_block_max(m, red);
    if (threadIdx.x == 0) mx[row] = m;
}

// probs (N,V) F32 = exp(logits - mx[row])
extern "C" __global__ void ce_expsub(float* __restrict__ probs, const T* __restrict__ logits, const float* __restrict__ mx, int N, int V) {
    long long n = (long long)N * V;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        probs[i] = expf(load(logits + i, 0) - mx[i / V]);
    }
}

// sum (N) F32 = Σ_j probs[i,j]; one block per row
extern "C" __global__ void ce_rowsum(float* __restrict__ sum, const float* __restrict__ probs, int N, int V) {
    __shared__ float red[32];
    int row = blockIdx.x;
    if (row >= N) return;
    const float* p = probs + (size_t)row * V;
    float s = 0.0f;
    for (int j = threadIdx.x; j < V; j += blockDim.x) s += p[j];
    s = ce_block_sum(s, red);
    if (threadIdx.x == 0) sum[row] = s;
}

// probs (N,V) F32 /= sum[row]
extern "C" __global__ void ce_divide(float* __restrict__ probs, const float* __restrict__ sum, int N, int V) {
    long long n = (long long)N * V;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        probs[i] = probs[i] / sum[i / V];
    }
}

// losses (N) F32 = log(sum[i]) - (logits[i, targets[i]] - mx[i]): the NLL
// gather in log-sum-exp form, never -log of the materialised probability
// (which underflows to 0, a loss of +inf, for a target about 103 below the max)
extern "C" __global__ void ce_nll(float* __restrict__ losses, const T* __restrict__ logits, const float* __restrict__ mx,
                                  const float* __restrict__ sum, const int* __restrict__ targets, int N, int V) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    int t = targets[i];
    losses[i] = (t >= 0 && t < V) ? logf(sum[i]) - (load(logits, (size_t)i * V + t) - mx[i]) : CE_NAN;
}

// logits (N,V) T = (probs - onehot(targets))·dscale
extern "C" __global__ void ce_grad(T* __restrict__ logits, const float* __restrict__ probs, const int* __restrict__ targets,
                                   int N, int V, float dscale, const float* __restrict__ dscale_mul) {
    if (dscale_mul != 0) dscale *= *dscale_mul; // the device loss scale (a power of two: exact)
    long long n = (long long)N * V;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        int row = (int)(i / V), j = (int)(i % V);
        float p = probs[i];
        store(logits + i, 0, j == targets[row] ? (p - 1.0f) * dscale : p * dscale);
    }
}
