// encoder.cu: the token + position embedding (pkg/device/gpu/encoder.go).
//
// druto:kernel encoder_forward encoder_gather_tokens encoder_gather_positions encoder_add_positions
// druto:kernel encoder_backward encoder_backward_combine encoder_sum_positions
// druto:dtypes f32 bf16 f16
//
// Forward, fused: encoder_forward, out[bt,c] = wte[tok,c] + wpe[t,c], four
// channels a thread with vector loads and one 16-byte store where C is a
// multiple of 4 and the pointers are aligned (vec), else one element a
// thread. Decomposed (PyTorch's wte(idx) + wpe(pos)): encoder_gather_tokens
// and encoder_gather_positions widen the rows into fp32 buffers,
// encoder_add_positions adds them with the positions broadcast over the
// batch. out is fp32 (the residual stream); wte and wpe are T.
//
// Backward, deterministic, no atomics, no host work (a graph captures it):
//   encoder_backward: one launch of two kinds of blocks.
//   * Token blocks, G·S of them: block (g, s) owns the K consecutive token
//     ids [g·K, g·K+K) and the positions [s·P, s·P+P). It reads the tokens
//     of its positions 256 at a time (coalesced), keeps the positions whose
//     token it owns in shared memory in increasing order (warp ballots: an
//     ordered compaction), and, every 1024 of them or at the end, sorts them
//     by (token, position) when K > 1 (bitonic, on unique keys) and adds
//     each token's rows of dout, in increasing position, into one register
//     a channel: a run of fewer than ENC_LONG rows by one warp (the warps
//     take the short runs in turn), a longer run by the whole block, so
//     each row is read coalesced once; with small vocabularies the hot
//     token ids of a batch are also split over the S position ranges.
//     S = 1: the sums go straight into dwte[tok,:], starting from its value,
//     in increasing (b,t) order: the CPU reference's order, the same bits.
//     S > 1 (small vocabularies, where each id repeats many times): block
//     (g, s) writes its sums, from zero, into part[s][tok,:] (zeros for an
//     id it did not see), and encoder_backward_combine then adds
//     dwte += part[0] + part[1] + ... in increasing s: a fixed order, so
//     deterministic, but not the CPU's bits.
//   * Position blocks (nW of them, fused form): one thread per (t,c),
//     dwpe[t,c] += dout[b,t,c] for b = 0..B-1 in order (a column reduction;
//     a warp reads 32 adjacent channels).
//   encoder_sum_positions: the same into a zeroed fp32 (T,C) buffer
//     (decomposed form; add_f32 of matmul.cu then accumulates it); the
//     decomposed form runs encoder_backward with no position blocks into a
//     zeroed dense (V,C) buffer, then add_f32 into dwte.
// dout, dwte and dwpe are fp32; dout may be T (the kernels read it with load).
// A token outside [0,V) (the caller validates them on the host) makes the
// forward row NaN and is skipped by backward, never read out of bounds.

#include "common.cuh"

// Block sizes (threads), read by the launchers too (kernels/blocks.go).
// druto:block ENC_BLOCK encoder_forward encoder_gather_tokens encoder_gather_positions encoder_add_positions encoder_sum_positions encoder_backward_combine
#define ENC_BLOCK 256
// druto:block ENC_THREADS encoder_backward
#define ENC_THREADS 256 // encoder_backward's block size
#define ENC_LIST 1024   // positions kept per flush (a power of two)
#define ENC_IDX_BITS 10 // log2(ENC_LIST): a sort key is (token - g·K) << 10 | index
#define ENC_UNROLL 16   // rows of one token loaded together by a thread
#define ENC_SLOTS 4     // channels (ENC_THREADS apart) a thread sums together
#define ENC_LONG 32     // runs of one id at least this long take the whole block (K > 1); shorter ones a warp

// out (BT,C) F32, wte (V,C), wpe (maxT,C), tokens (BT); vec: C % 4 == 0 and aligned pointers
extern "C" __global__ void encoder_forward(float* __restrict__ out, const T* __restrict__ wte, const T* __restrict__ wpe,
                                           const int* __restrict__ tokens, int BT, int Tn, int C, int V, int vec) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    if (vec) {
        int C4 = C / 4;
        size_t n4 = (size_t)BT * C4;
        for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
            int bt = (int)(i / C4), c = (int)(i % C4) * 4;
            int tok = tokens[bt];
            F4 r;
            if (tok < 0 || tok >= V) {
#pragma unroll
                for (int k = 0; k < 4; k++) r.v[k] = __int_as_float(0x7fc00000);
            } else {
                F4 a = ld4(wte + (size_t)tok * C + c), b = ld4(wpe + (size_t)(bt % Tn) * C + c);
#pragma unroll
                for (int k = 0; k < 4; k++) r.v[k] = a.v[k] + b.v[k];
            }
            st4(out + i * 4, r);
        }
        return;
    }
    size_t n = (size_t)BT * C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        int bt = (int)(i / C), c = (int)(i % C);
        int tok = tokens[bt];
        if (tok < 0 || tok >= V) {
            out[i] = __int_as_float(0x7fc00000);
            continue;
        }
        out[i] = load(wte + (size_t)tok * C, c) + load(wpe + (size_t)(bt % Tn) * C, c);
    }
}

// dst (BT,C) F32 = wte[tokens] (widened)
extern "C" __global__ void encoder_gather_tokens(float* __restrict__ dst, const T* __restrict__ wte,
                                                 const int* __restrict__ tokens, int BT, int C, int V) {
    size_t n = (size_t)BT * C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int bt = (int)(i / C), c = (int)(i % C);
        int tok = tokens[bt];
        dst[i] = (tok < 0 || tok >= V) ? __int_as_float(0x7fc00000) : load(wte + (size_t)tok * C, c);
    }
}

// dst (Tn,C) F32 = wpe[0:Tn] (widened)
extern "C" __global__ void encoder_gather_positions(float* __restrict__ dst, const T* __restrict__ wpe, int Tn, int C) {
    size_t n = (size_t)Tn * C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        dst[i] = load(wpe, (int)i);
    }
}

// out (BT,C) F32 = tok (BT,C) + pos (Tn,C) broadcast over b
extern "C" __global__ void encoder_add_positions(float* __restrict__ out, const float* __restrict__ tok,
                                                 const float* __restrict__ pos, int BT, int Tn, int C) {
    size_t n = (size_t)BT * C;
    size_t tc = (size_t)Tn * C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        out[i] = tok[i] + pos[i % tc];
    }
}

// gpos (Tn,C) F32 = Σ_b dout[b,t,:] (from zero); dout (B,Tn,C)
extern "C" __global__ void encoder_sum_positions(float* __restrict__ gpos, const T* __restrict__ dout, int B, int Tn, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= Tn * C) return;
    float acc = 0.0f;
#pragma unroll 8
    for (int b = 0; b < B; b++) acc += load(dout + (size_t)b * Tn * C, i);
    gpos[i] = acc;
}

// enc_flush adds the rows of dout at the n kept positions into their
// tokens' rows of dst, in increasing position per token. keys[i] is
// (token - lo) << ENC_IDX_BITS | i and pos[i] the i-th kept position (in
// increasing order). With K > 1 the keys are sorted first (bitonic over
// the next power of two, padded with the largest key; the keys are unique,
// so the order is the same on every run). fresh: start the sums from zero
// instead of dst's value (S > 1, first flush). Every thread of the block
// calls it; it ends with a barrier, so keys and pos may be refilled.
__device__ void enc_flush(float* __restrict__ dst, const T* __restrict__ dout, unsigned* keys, const int* pos, int n,
                          int lo, int C, int K, bool fresh) {
    if (K > 1) {
        int np = 1;
        while (np < n) np <<= 1;
        for (int i = n + threadIdx.x; i < np; i += ENC_THREADS) keys[i] = 0xffffffffu;
        __syncthreads();
        for (int k = 2; k <= np; k <<= 1) {
            for (int j = k >> 1; j > 0; j >>= 1) {
                for (int i = threadIdx.x; i < np; i += ENC_THREADS) {
                    int ixj = i ^ j;
                    if (ixj > i) {
                        unsigned a = keys[i], b = keys[ixj];
                        if ((a > b) == ((i & k) == 0)) {
                            keys[i] = b;
                            keys[ixj] = a;
                        }
                    }
                }
                __syncthreads();
            }
        }
    }
    const unsigned mask = (1u << ENC_IDX_BITS) - 1;
    if (K > 1) {
        // Short runs (the common case of a large vocabulary: an id or two
        // a row) one warp each, the warps side by side: lane l sums the
        // channels l, l+32, ... eight at a time, so a run costs about one
        // memory latency per 256 channels instead of the block's.
        int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, r = 0;
        for (int i = 0; i < n; r++) {
            unsigned tk = keys[i] >> ENC_IDX_BITS;
            int j = i + 1;
            while (j < n && (keys[j] >> ENC_IDX_BITS) == tk) j++;
            if (j - i < ENC_LONG && r % (ENC_THREADS / 32) == warp) {
                float* row = dst + (size_t)(lo + (int)tk) * C;
                for (int c0 = lane; c0 < C; c0 += 32 * 8) {
                    float acc[8];
#pragma unroll
                    for (int k = 0; k < 8; k++) {
                        int c = c0 + 32 * k;
                        acc[k] = (fresh || c >= C) ? 0.0f : row[c];
                    }
                    for (int e = i; e < j; e++) {
                        const T* src = dout + (size_t)pos[keys[e] & mask] * C;
                        float x[8];
#pragma unroll
                        for (int k = 0; k < 8; k++) {
                            int c = c0 + 32 * k;
                            if (c < C) x[k] = load(src, c);
                        }
#pragma unroll
                        for (int k = 0; k < 8; k++)
                            if (c0 + 32 * k < C) acc[k] += x[k];
                    }
#pragma unroll
                    for (int k = 0; k < 8; k++) {
                        int c = c0 + 32 * k;
                        if (c < C) row[c] = acc[k];
                    }
                }
            }
            i = j;
        }
    }
    // Long runs (K == 1: the whole list) the whole block.
    for (int i = 0; i < n;) {
        unsigned tk = keys[i] >> ENC_IDX_BITS;
        int j = i + 1;
        if (K == 1) {
            j = n;
        } else {
            while (j < n && (keys[j] >> ENC_IDX_BITS) == tk) j++;
            if (j - i < ENC_LONG) { // done by a warp above
                i = j;
                continue;
            }
        }
        float* row = dst + (size_t)(lo + (int)tk) * C;
        // A thread sums ENC_SLOTS channels, ENC_THREADS apart, at once, and
        // loads up to ENC_UNROLL rows of each together (predicated), so
        // that one block keeps up to ENC_SLOTS·ENC_UNROLL loads a thread
        // in flight on a long run (a frequent token); each channel adds its
        // rows in increasing position.
        for (int c0 = threadIdx.x; c0 < C; c0 += ENC_THREADS * ENC_SLOTS) {
            float acc[ENC_SLOTS];
#pragma unroll
            for (int k = 0; k < ENC_SLOTS; k++) {
                int c = c0 + k * ENC_THREADS;
                acc[k] = (fresh || c >= C) ? 0.0f : row[c];
            }
            for (int e = i; e < j; e += ENC_UNROLL) {
                int cnt = min(ENC_UNROLL, j - e);
                float x[ENC_UNROLL][ENC_SLOTS];
#pragma unroll
                for (int u = 0; u < ENC_UNROLL; u++) {
                    if (u < cnt) {
                        const T* src = dout + (size_t)pos[keys[e + u] & mask] * C;
#pragma unroll
                        for (int k = 0; k < ENC_SLOTS; k++) {
                            int c = c0 + k * ENC_THREADS;
                            if (c < C) x[u][k] = load(src, c);
                        }
                    }
                }
#pragma unroll
                for (int u = 0; u < ENC_UNROLL; u++) {
                    if (u < cnt) {
#pragma unroll
                        for (int k = 0; k < ENC_SLOTS; k++)
                            if (c0 + k * ENC_THREADS < C) acc[k] += x[u][k];
                    }
                }
            }
#pragma unroll
            for (int k = 0; k < ENC_SLOTS; k++) {
                int c = c0 + k * ENC_THREADS;
                if (c < C) row[c] = acc[k];
            }
        }
        i = j;
    }
    __syncthreads();
}

// encoder_backward: the fused backward (see the header).
// dwte (V,C) F32; part (S,V,C) F32 or unused (S == 1); dwpe (maxT,C) F32 or
// unused (no position blocks); dout (B,Tn,C); tokens (B,Tn).
// Grid: G·S token blocks (g = blockIdx % G, s = blockIdx / G; S > 1 needs
// K == 1), then the position blocks, blocks of ENC_THREADS threads.
extern "C" __global__ void __launch_bounds__(ENC_THREADS)
    encoder_backward(float* __restrict__ dwte, float* __restrict__ part, float* __restrict__ dwpe, const T* __restrict__ dout,
                     const int* __restrict__ tokens, int B, int Tn, int C, int V, int K, int G, int S, int P) {
    int nTok = G * S;
    if ((int)blockIdx.x >= nTok) {
        int i = ((int)blockIdx.x - nTok) * ENC_THREADS + threadIdx.x;
        int tc = Tn * C;
        if (i >= tc) return;
        float acc = dwpe[i];
#pragma unroll 8
        for (int b = 0; b < B; b++) acc += load(dout + (size_t)b * tc, i);
        dwpe[i] = acc;
        return;
    }
    __shared__ unsigned keys[ENC_LIST];
    __shared__ int pos[ENC_LIST];
    __shared__ int wcount[ENC_THREADS / 32];
    int g = (int)blockIdx.x % G, s = (int)blockIdx.x / G;
    int lo = g * K, hi = min(lo + K, V);
    int BT = B * Tn;
    int p0 = s * P, p1 = min(BT, p0 + P);
    float* dst = S > 1 ? part + (size_t)s * V * C : dwte;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int n = 0;
    bool fresh = S > 1;
    for (int base = p0; base < p1; base += ENC_THREADS) {
        int bt = base + threadIdx.x;
        int tok = bt < p1 ? tokens[bt] : -1;
        bool mine = tok >= lo && tok < hi;
        unsigned ball = __ballot_sync(0xffffffffu, mine);
        if (lane == 0) wcount[warp] = __popc(ball);
        __syncthreads();
        int before = 0, total = 0;
#pragma unroll
        for (int w = 0; w < ENC_THREADS / 32; w++) {
            int cnt = wcount[w];
            before += w < warp ? cnt : 0;
            total += cnt;
        }
        if (n + total > ENC_LIST) { // the same decision in every thread
            enc_flush(dst, dout, keys, pos, n, lo, C, K, fresh);
            fresh = false;
            n = 0;
        }
        if (mine) {
            int idx = n + before + __popc(ball & ((1u << lane) - 1u));
            keys[idx] = ((unsigned)(tok - lo) << ENC_IDX_BITS) | (unsigned)idx;
            pos[idx] = bt;
        }
        n += total;
        __syncthreads();
    }
    if (n > 0) {
        enc_flush(dst, dout, keys, pos, n, lo, C, K, fresh);
        fresh = false;
    }
    if (fresh) { // S > 1 and the id never occurred in this range: its partial row is zero
        for (int k = lo; k < hi; k++)
            for (int c = threadIdx.x; c < C; c += ENC_THREADS) dst[(size_t)k * C + c] = 0.0f;
    }
}

// dwte (n) F32 += part[0] + part[1] + ... + part[S-1], in that order; part (S,n) F32
extern "C" __global__ void encoder_backward_combine(float* __restrict__ dwte, const float* __restrict__ part, int S, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float acc = dwte[i];
        for (int s = 0; s < S; s++) acc += part[(size_t)s * n + i];
        dwte[i] = acc;
    }
}
