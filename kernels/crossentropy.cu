// crossentropy.cu: softmax cross-entropy over the vocabulary, the "fused
// classifier" (pkg/device/gpu/crossentropy.go).
//
// druto:kernel crossentropy_fused_l3 crossentropy_fused_tma
// druto:kernel ce_rowmax ce_expsub ce_rowsum ce_divide ce_nll ce_grad
// druto:pdl crossentropy_fused_l3 crossentropy_fused_tma
// druto:dtypes f32 bf16 f16
//
// Fused (crossentropy_fused_tma on sm_90, crossentropy_fused_l3 elsewhere,
// both described below): per row, Σ exp(x - max) in fp32; thread 0 writes
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
#include "crossentropy.cuh"

// druto:block CE_EW_BLOCK ce_rowmax ce_expsub ce_rowsum ce_divide ce_nll ce_grad
#define CE_EW_BLOCK 256 // the decomposed kernels

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
// sizes a persistent grid of a few blocks per SM (rows ≈ 2·SMs in flight,
// 26 MB of bf16 GPT-2 rows), so the second read of a row, issued a few
// microseconds after the first, hits the 50 MB L2: DRAM sees the logits
// read once and written once, while the other blocks of the SM stream
// during one block's reductions.
//
// The work per logit is about 10 instructions (its predecessor
// crossentropy_fused_l2 spent about 25 and was issue-bound):
//   - exp as one ex2.approx.ftz of an FMA (exp(x - m) below 2^-126, where
//     it flushes to 0, is a probability under 1e-38);
//   - pass 2 writes exp(x - m)·(dscale/sum) for every logit, the target's
//     (p - 1)·dscale is written over it by thread 0 after a barrier;
//   - on sm_80 and newer, two logits rounded and packed by one cvt.rn
//     .bf16x2/.f16x2 (the same round-to-nearest-even; a NaN becomes the
//     canonical NaN).
// The gradient is within an ulp of fp32 before its rounding to T
// (dscale/sum is one rounding).

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

// losses (N) F32, logits (N,V) T, targets (N); vecok: the launcher checked
// that logits is 16-byte aligned (V a multiple of CE_VEC is checked here)
extern "C" __global__ void __launch_bounds__(CE3_THREADS, CE3_MIN_BLOCKS) crossentropy_fused_l3(float* __restrict__ losses, T* __restrict__ logits,
                                                                               const int* __restrict__ targets, int N, int V,
                                                                               float dscale, int vecok, const float* __restrict__ dscale_mul) {
    pdl_enter();
    if (dscale_mul != 0) dscale *= *dscale_mul; // the device loss scale (a power of two: exact)
    __shared__ float red[64];
    const int tid = threadIdx.x;
    const bool vec = vecok != 0 && (V % CE_VEC) == 0;
    const int nv = vec ? V / CE_VEC : 0;
    const float L2E = 1.4426950408889634f;
    for (int row = blockIdx.x; row < N; row += gridDim.x) {
        T* x = logits + (size_t)row * V;
        const int tgt = targets[row];
        const bool ok = tgt >= 0 && tgt < V;
        float xt = 0.0f;
        if (tid == 0 && ok) xt = load(x, tgt); // before any thread writes the row
        uint4* xv = (uint4*)x;

        // pass 1: the running (max, sum of exp(x - max)); group g+1's loads
        // are issued before group g is folded
        float m = CE_NEG_INF, s = 0.0f;
        vec16 p[CE3_UNROLL];
#pragma unroll
        for (int u = 0; u < CE3_UNROLL; u++) {
            int i = tid + u * CE3_THREADS;
            if (i < nv) p[u].u = xv[i];
        }
        for (int i0 = tid; i0 < nv; i0 += CE3_THREADS * CE3_UNROLL) {
            vec16 q[CE3_UNROLL];
            const int n0 = i0 + CE3_THREADS * CE3_UNROLL;
#pragma unroll
            for (int u = 0; u < CE3_UNROLL; u++) {
                int i = n0 + u * CE3_THREADS;
                if (i < nv) q[u].u = xv[i];
            }
            float lm = CE_NEG_INF;
#pragma unroll
            for (int u = 0; u < CE3_UNROLL; u++) {
                if (i0 + u * CE3_THREADS < nv) {
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
                if (i0 + u * CE3_THREADS < nv) {
#pragma unroll
                    for (int e = 0; e < CE_VEC; e++) s += ce_ex2(fmaf(load(p[u].e, e), L2E, -ml));
                }
            }
#pragma unroll
            for (int u = 0; u < CE3_UNROLL; u++) p[u] = q[u];
        }
        if (!vec) {
            for (int j = tid; j < V; j += CE3_THREADS) {
                float v = load(x, j);
                ce_rescale(m, s, v);
                s += ce_exp(v, ce_ml(m));
            }
        }
        // pass 2's first loads, in flight during the block's reduction
        if (dscale != 0.0f) {
#pragma unroll
            for (int u = 0; u < CE3_UNROLL; u++) {
                int i = tid + u * CE3_THREADS;
                if (i < nv) p[u].u = xv[i];
            }
        }
        ce_block_lse(m, s, red);
        if (tid == 0) losses[row] = ok ? logf(s) - (xt - m) : CE_NAN;
        if (dscale == 0.0f) continue;
        __syncthreads(); // thread 0 has read x[tgt] before anyone overwrites it
        const float ml = m * L2E, inv = 1.0f / s, sc = dscale / s;

        // pass 2: the row again (from L2); exp(x - m)·dscale/sum over it
        for (int i0 = tid; i0 < nv; i0 += CE3_THREADS * CE3_UNROLL) {
            if (i0 != tid) {
#pragma unroll
                for (int u = 0; u < CE3_UNROLL; u++) {
                    int i = i0 + u * CE3_THREADS;
                    if (i < nv) p[u].u = xv[i];
                }
            }
#pragma unroll
            for (int u = 0; u < CE3_UNROLL; u++) {
                int i = i0 + u * CE3_THREADS;
                if (i < nv) {
                    float o[CE_VEC];
#pragma unroll
                    for (int e = 0; e < CE_VEC; e++) o[e] = ce_ex2(fmaf(load(p[u].e, e), L2E, -ml)) * sc;
                    xv[i] = pack16(o);
                }
            }
        }
        if (!vec) {
            for (int j = tid; j < V; j += CE3_THREADS) store(x, j, ce_grad_of(load(x, j), ml, inv, j, tgt, dscale));
        } else {
            __syncthreads(); // the target's vector is written
            if (tid == 0 && ok) store(x, tgt, ce_target_grad(ce_ex2(fmaf(xt, L2E, -ml)), inv, dscale));
        }
    }
}

// ---- crossentropy_fused_tma: rows brought into shared memory by TMA --
//
// Nsight Compute on the H200 found crossentropy_fused_l3 bound by issue
// and latency (about 19 instructions a logit, the loads in flight limited
// by what registers and L1 can hold) and reading 1.94 GB from DRAM for 1.65
// GB of logits (pass 2's L2 re-reads miss); keeping the row in shared
// memory with ordinary loads cost more than it saved (the loads staged
// through registers, and L1 shrunk to make room).
// crossentropy_fused_tma has Hopper's bulk copy engine (cp.async.bulk, one
// instruction for a whole row, completion counted in bytes on an mbarrier)
// bring each row into shared memory, two row buffers a block: while the
// block works on row r in one buffer, row r + gridDim.x streams into the
// other. Pass 1 (the row's max and Σ exp) and pass 2 (the gradient,
// written to global memory over the logits) read shared memory only, so
// DRAM sees each logit read once and written once, and a thread issues
// about 3 instructions a logit a pass.
//
// One block of CE_TMA_THREADS an SM (2·V·sizeof(T) bytes of dynamic shared
// memory: 196.5 KB for GPT-2's bf16 rows), a persistent grid. sm_90 and
// newer, built by NVRTC 12 or newer (PTX ISA 8.0; the embedded PTX, made by
// nvcc 11.8, has an empty body: the launcher never picks it); V a multiple of the 16-byte vector,
// logits 16-byte aligned. The same results as crossentropy_fused_l3 but
// for the order of the sums (loss within fp32 rounding; the gradient from
// the same formulas).

// druto:block CE_TMA_THREADS crossentropy_fused_tma
#define CE_TMA_THREADS 1024

#ifdef DRUTO_HAVE_TMA
extern __shared__ __align__(128) unsigned char ce_tma_rows[];
#endif

// losses (N) F32, logits (N,V) T, targets (N); dynamic shared memory 2·V·sizeof(T)
extern "C" __global__ void __launch_bounds__(CE_TMA_THREADS, 1) crossentropy_fused_tma(float* __restrict__ losses, T* __restrict__ logits,
                                                                               const int* __restrict__ targets, int N, int V,
                                                                               float dscale, const float* __restrict__ dscale_mul) {
    pdl_enter();
#ifdef DRUTO_HAVE_TMA
    if (dscale_mul != 0) dscale *= *dscale_mul; // the device loss scale (a power of two: exact)
    __shared__ float red[64];
    __shared__ __align__(8) unsigned long long bars[2];
    const int tid = threadIdx.x;
    const int nv = V / CE_VEC;
    const unsigned rowBytes = (unsigned)V * (unsigned)sizeof(T);
    const unsigned rows0 = (unsigned)__cvta_generic_to_shared(ce_tma_rows);
    const unsigned bar0 = (unsigned)__cvta_generic_to_shared(&bars[0]);
    const float L2E = 1.4426950408889634f;
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
        const uint4* sv = reinterpret_cast<const uint4*>(ce_tma_rows + b * rowBytes);
        tma_bar_wait(bar0 + 8 * b, (k >> 1) & 1);

        // pass 1: the running (max, sum of exp(x - max)), two vectors a step
        float m = CE_NEG_INF, s = 0.0f;
        for (int i = tid; i < nv; i += 2 * CE_TMA_THREADS) {
            vec16 p[2];
            const bool two = i + CE_TMA_THREADS < nv;
            p[0].u = sv[i];
            if (two) p[1].u = sv[i + CE_TMA_THREADS];
            float lm = CE_NEG_INF;
#pragma unroll
            for (int e = 0; e < CE_VEC; e++) lm = fmaxf(lm, load(p[0].e, e));
            if (two) {
#pragma unroll
                for (int e = 0; e < CE_VEC; e++) lm = fmaxf(lm, load(p[1].e, e));
            }
            if (lm > m) {
                s *= ce_ex2(fmaf(m, L2E, -lm * L2E)); // exp(m - lm); 0 while m is -inf
                m = lm;
            }
            const float ml = ce_ml(m);
#pragma unroll
            for (int e = 0; e < CE_VEC; e++) s += ce_ex2(fmaf(load(p[0].e, e), L2E, -ml));
            if (two) {
#pragma unroll
                for (int e = 0; e < CE_VEC; e++) s += ce_ex2(fmaf(load(p[1].e, e), L2E, -ml));
            }
        }
        ce_block_lse(m, s, red);
        const float xt = ok ? load(reinterpret_cast<const T*>(sv), tgt) : 0.0f;
        if (tid == 0) losses[row] = ok ? logf(s) - (xt - m) : CE_NAN;
        if (dscale != 0.0f) {
            // pass 2: exp(x - m)·dscale/sum from shared memory over the
            // logits in global memory; the target's (p - 1)·dscale in place
            const float ml = m * L2E, inv = 1.0f / s, sc = dscale / s;
            const int tv = ok ? tgt / CE_VEC : -1;
            uint4* xv = reinterpret_cast<uint4*>(logits + (size_t)row * V);
            for (int i = tid; i < nv; i += CE_TMA_THREADS) {
                vec16 p;
                p.u = sv[i];
                float o[CE_VEC];
#pragma unroll
                for (int e = 0; e < CE_VEC; e++) o[e] = ce_ex2(fmaf(load(p.e, e), L2E, -ml)) * sc;
                xv[i] = pack16(o);
                // the target over it, by the same thread (so after it); o[tgt % CE_VEC]
                // would index registers by a variable and put o in local memory
                if (i == tv) store(logits + (size_t)row * V, tgt, ce_target_grad(ce_ex2(fmaf(xt, L2E, -ml)), inv, dscale));
            }
        }
        __syncthreads(); // buffer b is read; it is refilled two rows on
    }
#endif
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
