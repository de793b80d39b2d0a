// encoder.cu: the token + position embedding (pkg/device/gpu/encoder.go).
//
// druto:kernel encoder_forward encoder_gather_tokens encoder_gather_positions encoder_add_positions
// druto:kernel encoder_sort_count encoder_sort_pass encoder_backward encoder_backward_fixup encoder_sum_positions
// druto:pdl encoder_forward
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
// Backward, in the style of PyTorch's embedding_dense_backward: sort the
// positions by token id, cut the sorted list into segments of equal length,
// sum each segment's runs of one id, then combine the runs that cross a
// segment boundary. Deterministic (integer atomics only, every float sum in
// a fixed order), balanced whatever the token distribution (all positions
// one id included), no host work (the grids depend on B·T, V and the GPU
// only, so a graph captures it):
//   1. encoder_sort_count: tile t (ENC_THREADS·items positions, items <=
//      ENC_ITEMS from the launcher) counts the 8-bit digits of its keys for
//      every radix pass, hcnt[p][t][d]; it zeroes the look-back table and
//      the tile counters of step 2. A key is the token, or ENC_NOKEY for
//      one outside [0,V) (skipped by the sums).
//   2. encoder_sort_pass, once per 8 bits of V-1 (1 pass for V <= 256, 2
//      for GPT-2's 50304, 3 up to 2^24, 4 up to 2^30): an LSD radix pass, stable, so the
//      final list holds each id's positions in increasing order. A tile
//      ranks its keys by digit in registers (a warp matches equal digits
//      with 8 ballots; per-warp counters in shared memory), then writes
//      them at digit start (from the totals of hcnt) + the counts of the
//      same digit in the tiles before it: from hcnt for the first pass
//      (the tiles are the token order), else by look-back on the counts
//      those tiles publish (tiles numbered in the order their blocks start,
//      so a tile waits only on running ones). A radix sort rather than a
//      counting sort: its memory is O(B·T) whatever V (a per-(chunk, id)
//      count table grows as chunks·V), and a pass costs the same for any
//      distribution of the keys.
//   Position blocks (fused form) ride along steps 1 and 2, whose few sort
//   blocks leave the GPU mostly idle (enc_positions: one thread per (t,c),
//   dwpe[t,c] += dout[b,t,c] for b = 0..B-1 in order, the CPU's bits; a
//   warp reads 32 adjacent channels); the launcher splits them over the
//   launches.
//   3. encoder_backward: block s sums the sorted positions [s·L, s·L+L)
//      (L from the launcher, about 2 blocks an SM), a thread ENC_SLOTS
//      channels, ENC_UNROLL rows loaded at once. A run of one id that lies
//      inside the segment goes straight into dwte[tok,:], starting from
//      its value, in increasing (b,t): the CPU reference's order, the same
//      bits. The segment's first run, when it began in an earlier segment,
//      and its last, when it goes on into the next, are summed from zero
//      into part[2s] (first) and part[2s+1] (last).
//   4. encoder_backward_fixup: block s, where a run that crosses segments
//      begins, finds where it ends (a ballot over the later boundaries)
//      and adds dwte[tok] += part of s, then the parts of the later
//      segments, in segment order.
//   One scheme for every vocabulary: with byte tokens (V 256, the small
//   preset, Zipf) its heaviest block sums 32 rows where the former
//   block-per-(id, position range) plan's summed 186 and every one of its
//   2048 blocks read 1024 tokens (kernels/emu/encoder counts both).
//   encoder_sum_positions: the position sums into a zeroed fp32 (T,C)
//   buffer (decomposed form; add_f32 of matmul.cu then accumulates it); the
//   decomposed form runs steps 1-4 with no position blocks into a zeroed
//   dense (V,C) buffer, then add_f32 into dwte.
// dout, dwte and dwpe are fp32; dout may be T (the kernels read it with load).
// A token outside [0,V) (the caller validates them on the host) makes the
// forward row NaN and is skipped by backward, never read out of bounds.

#include "common.cuh"

// Block sizes (threads), read by the launchers too (kernels/blocks.go).
// druto:block ENC_BLOCK encoder_forward encoder_gather_tokens encoder_gather_positions encoder_add_positions encoder_sum_positions
#define ENC_BLOCK 256
// druto:block ENC_THREADS encoder_sort_count encoder_sort_pass encoder_backward encoder_backward_fixup
#define ENC_THREADS 256 // the backward's block size (one thread per digit in the sort)
#define ENC_ITEMS 16    // sort keys a thread holds, at most (the launcher picks 1 to 16; read by it)
#define ENC_RADIX 256   // digits of a sort pass (8 bits; ENC_THREADS of them)
#define ENC_SEG_ALIGN 32 // the segment length L is a multiple of this (read by the launcher)
#define ENC_CHUNK 256   // sorted entries a segment block stages in shared memory at once
#define ENC_UNROLL 8    // rows a thread loads together (encoder_backward)
#define ENC_FIX_UNROLL 16 // partial rows a thread loads together (encoder_backward_fixup)
#define ENC_SLOTS 4     // channels (ENC_THREADS apart) a thread sums together
#define ENC_LOOK 16     // tile counts a sort thread reads at once
#define ENC_NOKEY 0xffffffffu // the key of a token outside [0,V)
#define ENC_READY 0x80000000u // look-back: a published tile count

#if ENC_RADIX != ENC_THREADS
#error "ENC_RADIX must be ENC_THREADS (a thread per digit)"
#endif

// out (BT,C) F32, wte (V,C), wpe (maxT,C), tokens (BT); vec: C % 4 == 0 and aligned pointers
extern "C" __global__ void encoder_forward(float* __restrict__ out, const T* __restrict__ wte, const T* __restrict__ wpe,
                                           const int* __restrict__ tokens, int BT, int Tn, int C, int V, int vec) {
    pdl_enter();
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

// ---- backward -----------------------------------------------------------

// enc_match returns the lanes of the warp that are active with the same
// 8-bit digit d as this lane (every lane of the warp must call it).
__device__ __forceinline__ unsigned enc_match(unsigned d, bool active) {
    unsigned m = __ballot_sync(0xffffffffu, active);
#pragma unroll
    for (int b = 0; b < 8; b++) {
        unsigned x = __ballot_sync(0xffffffffu, (d >> b) & 1u);
        m &= ((d >> b) & 1u) ? x : ~x;
    }
    return m;
}

// enc_key is the sort key of token tok: itself, or ENC_NOKEY outside [0,V).
__device__ __forceinline__ unsigned enc_key(int tok, int V) { return (tok >= 0 && tok < V) ? (unsigned)tok : ENC_NOKEY; }

// enc_positions is position block j (fused form): one thread per (t,c),
// dwpe[t,c] += dout[b,t,c] for b = 0..B-1 in order. dwpe (maxT,C) F32,
// dout (B,Tn,C).
__device__ __forceinline__ void enc_positions(float* __restrict__ dwpe, const T* __restrict__ dout, int B, int Tn, int C, int j) {
    int i = j * ENC_THREADS + threadIdx.x;
    int tc = Tn * C;
    if (i >= tc) return;
    float acc = dwpe[i];
#pragma unroll 8
    for (int b = 0; b < B; b++) acc += load(dout + (size_t)b * tc, i);
    dwpe[i] = acc;
}

// encoder_sort_count: hcnt (nPass,nTiles,ENC_RADIX) I32: tile t's count of
// digit d in pass p (a tile is ENC_THREADS·items positions); look
// (4 + nPass·nTiles·ENC_RADIX) I32 zeroed (tile counters, then
// encoder_sort_pass's look-back table); tokens (B,Tn).
// Grid: nTiles blocks, then position blocks w0, w0+1, ... (dwpe, dout: see
// enc_positions).
extern "C" __global__ void __launch_bounds__(ENC_THREADS)
    encoder_sort_count(int* __restrict__ hcnt, int* __restrict__ look, float* __restrict__ dwpe, const T* __restrict__ dout,
                       const int* __restrict__ tokens, int B, int Tn, int C, int V, int nPass, int nTiles, int items, int w0) {
    if ((int)blockIdx.x >= nTiles) {
        enc_positions(dwpe, dout, B, Tn, C, w0 + (int)blockIdx.x - nTiles);
        return;
    }
    __shared__ int cnt[4][ENC_RADIX];
    int BT = B * Tn;
    int nLook = 4 + nPass * nTiles * ENC_RADIX;
    for (int i = blockIdx.x * ENC_THREADS + threadIdx.x; i < nLook; i += nTiles * ENC_THREADS) look[i] = 0;
    for (int i = threadIdx.x; i < 4 * ENC_RADIX; i += ENC_THREADS) cnt[i / ENC_RADIX][i % ENC_RADIX] = 0;
    __syncthreads();
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int base = blockIdx.x * ENC_THREADS * items + warp * 32 * items + lane;
    for (int r = 0; r < items; r++) {
        int i = base + r * 32;
        bool active = i < BT;
        unsigned key = active ? enc_key(tokens[i], V) : 0u;
        for (int p = 0; p < nPass; p++) {
            unsigned d = (key >> (8 * p)) & 0xffu;
            unsigned m = enc_match(d, active);
            if (active && lane == __ffs(m) - 1) atomicAdd(&cnt[p][d], __popc(m));
        }
    }
    __syncthreads();
    for (int p = 0; p < nPass; p++) hcnt[((size_t)p * nTiles + blockIdx.x) * ENC_RADIX + threadIdx.x] = cnt[p][threadIdx.x];
}

// encoder_sort_pass: pass p of the radix sort (see the header): keys and
// positions of the tiles of kin/vin (pass 0: the tokens and their
// positions) written, stably sorted by digit p, to kout/vout (B·Tn each).
// hcnt and look as encoder_sort_count left them.
// Grid: nTiles blocks, then position blocks w0, w0+1, ... (see enc_positions).
extern "C" __global__ void __launch_bounds__(ENC_THREADS)
    encoder_sort_pass(unsigned* __restrict__ kout, int* __restrict__ vout, const unsigned* __restrict__ kin,
                      const int* __restrict__ vin, const int* __restrict__ tokens, const int* __restrict__ hcnt, int* look,
                      float* __restrict__ dwpe, const T* __restrict__ dout, int B, int Tn, int C, int V, int p, int nTiles, int items,
                      int w0) {
    if ((int)blockIdx.x >= nTiles) {
        enc_positions(dwpe, dout, B, Tn, C, w0 + (int)blockIdx.x - nTiles);
        return;
    }
    __shared__ int wc[ENC_RADIX][ENC_THREADS / 32]; // per (digit, warp): count, then where the warp's keys go
    __shared__ int scan[2][ENC_RADIX];
    __shared__ int tileIdx;
    int BT = B * Tn;
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    if (tid == 0) tileIdx = p == 0 ? (int)blockIdx.x : atomicAdd(&look[p], 1);
    for (int i = tid; i < ENC_RADIX * (ENC_THREADS / 32); i += ENC_THREADS) wc[i / (ENC_THREADS / 32)][i % (ENC_THREADS / 32)] = 0;
    __syncthreads();
    int t = tileIdx;
    unsigned key[ENC_ITEMS];
    int val[ENC_ITEMS], rank[ENC_ITEMS];
    int base = t * ENC_THREADS * items + warp * 32 * items + lane;
#pragma unroll
    for (int r = 0; r < ENC_ITEMS; r++) {
        int i = base + r * 32;
        if (r < items && i < BT) {
            key[r] = p == 0 ? enc_key(tokens[i], V) : kin[i];
            val[r] = p == 0 ? i : vin[i];
        }
    }
    // Rank: the keys of a warp in order (round r, then lane), each after
    // the warp's earlier keys of its digit.
#pragma unroll
    for (int r = 0; r < ENC_ITEMS; r++) {
        if (r < items) {
            bool active = base + r * 32 < BT;
            unsigned d = active ? (key[r] >> (8 * p)) & 0xffu : 0u;
            unsigned m = enc_match(d, active);
            int prior = active ? wc[d][warp] : 0;
            rank[r] = prior + __popc(m & ((1u << lane) - 1u));
            __syncwarp();
            if (active && lane == __ffs(m) - 1) wc[d][warp] = prior + __popc(m);
            __syncwarp();
        }
    }
    __syncthreads();
    // Thread d: the tile's count of digit d (published for the later
    // tiles), the keys of digit d in the tiles before it, and the total of d.
    int d = tid, mine = 0;
    for (int w = 0; w < ENC_THREADS / 32; w++) mine += wc[d][w];
    const int* hc = hcnt + (size_t)p * nTiles * ENC_RADIX + d;
    volatile int* lk = look + 4 + (size_t)p * nTiles * ENC_RADIX + d;
    if (p > 0) {
        lk[(size_t)t * ENC_RADIX] = (int)(ENC_READY | (unsigned)mine);
        __threadfence();
    }
    // ENC_LOOK tiles' counts in flight at once (a warp reads 32 adjacent
    // digits of a tile: coalesced); a count not yet published is read
    // again until it is.
    int before = 0, total = 0;
#pragma unroll 16
    for (int u = 0; u < nTiles; u++) {
        int x = hc[(size_t)u * ENC_RADIX];
        total += x;
        if (p == 0 && u < t) before += x;
    }
    if (p > 0) {
        for (int u0 = 0; u0 < t; u0 += ENC_LOOK) {
            int x[ENC_LOOK];
#pragma unroll
            for (int k = 0; k < ENC_LOOK; k++) x[k] = u0 + k < t ? lk[(size_t)(u0 + k) * ENC_RADIX] : (int)ENC_READY;
#pragma unroll
            for (int k = 0; k < ENC_LOOK; k++) {
                while (!(x[k] & (int)ENC_READY)) x[k] = lk[(size_t)(u0 + k) * ENC_RADIX];
                before += x[k] & ~(int)ENC_READY;
            }
        }
    }
    // Exclusive scan of the totals over the digits (Hillis-Steele).
    scan[0][d] = total;
    __syncthreads();
    int src = 0;
    for (int off = 1; off < ENC_RADIX; off <<= 1) {
        int v = scan[src][d] + (d >= off ? scan[src][d - off] : 0);
        scan[src ^ 1][d] = v;
        src ^= 1;
        __syncthreads();
    }
    int run = scan[src][d] - total + before;
    for (int w = 0; w < ENC_THREADS / 32; w++) {
        int c = wc[d][w];
        wc[d][w] = run;
        run += c;
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < ENC_ITEMS; r++) {
        if (r < items && base + r * 32 < BT) {
            int at = wc[(key[r] >> (8 * p)) & 0xffu][warp] + rank[r];
            kout[at] = key[r];
            vout[at] = val[r];
        }
    }
}

// enc_store writes a finished run's sums (channels c0 + q·ENC_THREADS) of
// id k in segment s: into dst's row when the run lies inside the segment,
// else into s's part row (2s for its first run, 2s+1 for its last, as
// encoder_backward_fixup reads them). An id
// >= V (only tokens outside [0,V)) writes nothing.
__device__ __forceinline__ void enc_store(float* __restrict__ dst, float* __restrict__ part, unsigned k, const float* acc, int c0,
                                          int C, int V, int s, unsigned kA, unsigned kB, bool crossA, bool crossB) {
    if (k >= (unsigned)V) return;
    float* row = dst + (size_t)k * C;
    if ((k == kA && crossA) || (k == kB && crossB)) row = part + (size_t)(k == kA ? 2 * s : 2 * s + 1) * C;
#pragma unroll
    for (int q = 0; q < ENC_SLOTS; q++) {
        int c = c0 + q * ENC_THREADS;
        if (c < C) row[c] = acc[q];
    }
}

// encoder_backward: the segment sums (see the header). dst (V,C) F32:
// dwte; part (2·nSeg,C) F32; dout (BT,C); skey, spos (BT): the sorted keys
// and their positions; kmask: 2^bits(V-1) - 1.
// Grid: nSeg blocks, each L sorted positions.
extern "C" __global__ void __launch_bounds__(ENC_THREADS)
    encoder_backward(float* __restrict__ dst, float* __restrict__ part, const T* __restrict__ dout, const unsigned* __restrict__ skey,
                     const int* __restrict__ spos, int BT, int C, int V, unsigned kmask, int L) {
    __shared__ unsigned sk[ENC_CHUNK];
    __shared__ int sp[ENC_CHUNK];
    int s = blockIdx.x;
    int a = s * L, b = min(BT, a + L);
    // The first run (id kA) and the last (kB) may cross into the
    // neighbouring segments: those go into part, from zero.
    unsigned kA = skey[a] & kmask, kB = skey[b - 1] & kmask;
    bool crossA = a > 0 && (skey[a - 1] & kmask) == kA;
    bool crossB = b < BT && (skey[b] & kmask) == kB;
    for (int cb = 0; cb < C; cb += ENC_THREADS * ENC_SLOTS) { // the same trips in every thread (barriers inside)
        int c0 = cb + threadIdx.x;
        float acc[ENC_SLOTS];
        unsigned cur = 0xffffffffu; // the id being summed (none yet)
        for (int e0 = a; e0 < b; e0 += ENC_CHUNK) {
            int n = min(ENC_CHUNK, b - e0);
            __syncthreads();
            if ((int)threadIdx.x < n) {
                sk[threadIdx.x] = skey[e0 + threadIdx.x];
                sp[threadIdx.x] = spos[e0 + threadIdx.x];
            }
            __syncthreads();
            for (int e = 0; e < n; e += ENC_UNROLL) {
                float x[ENC_UNROLL][ENC_SLOTS], init[ENC_UNROLL][ENC_SLOTS];
                // Load the rows of the next ENC_UNROLL entries, and dst's
                // row for each that starts a run inside the segment.
#pragma unroll
                for (int u = 0; u < ENC_UNROLL; u++) {
                    if (e + u < n) {
                        unsigned key = sk[e + u], k = key & kmask;
                        unsigned prev = e + u > 0 ? sk[e + u - 1] & kmask : cur;
                        bool start = e0 + e + u == a || k != prev;
                        bool cross = (k == kA && crossA) || (k == kB && crossB);
                        const T* src = dout + (size_t)sp[e + u] * C;
                        const float* row = dst + (size_t)k * C;
#pragma unroll
                        for (int q = 0; q < ENC_SLOTS; q++) {
                            int c = c0 + q * ENC_THREADS;
                            x[u][q] = (key != ENC_NOKEY && c < C) ? load(src, c) : 0.0f;
                            init[u][q] = (start && !cross && k < (unsigned)V && c < C) ? row[c] : 0.0f;
                        }
                    }
                }
#pragma unroll
                for (int u = 0; u < ENC_UNROLL; u++) {
                    if (e + u < n) {
                        unsigned key = sk[e + u], k = key & kmask;
                        if (k != cur) { // a new run: store the last one
                            if (cur != 0xffffffffu) enc_store(dst, part, cur, acc, c0, C, V, s, kA, kB, crossA, crossB);
                            cur = k;
#pragma unroll
                            for (int q = 0; q < ENC_SLOTS; q++) acc[q] = init[u][q];
                        }
                        if (key != ENC_NOKEY) {
#pragma unroll
                            for (int q = 0; q < ENC_SLOTS; q++) acc[q] += x[u][q];
                        }
                    }
                }
            }
        }
        enc_store(dst, part, cur, acc, c0, C, V, s, kA, kB, crossA, crossB);
    }
}

// encoder_backward_fixup: block s adds, for the run that begins in segment
// s and goes on past its end, dst[tok] += part of s + the first-run parts
// of the segments it continues into, in segment order. Arguments as
// encoder_backward's. Grid: nSeg blocks.
extern "C" __global__ void __launch_bounds__(ENC_THREADS)
    encoder_backward_fixup(float* __restrict__ dst, const float* __restrict__ part, const unsigned* __restrict__ skey, int BT, int C,
                           int V, unsigned kmask, int L, int nSeg) {
    __shared__ int wfirst[ENC_THREADS / 32];
    __shared__ int last;
    int s = blockIdx.x;
    int a = s * L, b = min(BT, a + L);
    if (b >= BT) return;
    unsigned k = skey[b - 1] & kmask, kA = skey[a] & kmask;
    if ((skey[b] & kmask) != k || k >= (unsigned)V) return; // no run crosses s's end, or only invalid tokens
    if (kA == k && a > 0 && (skey[a - 1] & kmask) == k) return; // it began before s: that block adds it
    // The last segment of the run: the first j > s whose end it does not
    // cross (segment j crosses if j+1 < nSeg and the key at (j+1)·L is k).
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int j0 = s + 1;; j0 += ENC_THREADS) {
        int j = j0 + threadIdx.x;
        bool stop = j + 1 >= nSeg || (skey[(size_t)(j + 1) * L] & kmask) != k;
        unsigned m = __ballot_sync(0xffffffffu, stop);
        if (lane == 0) wfirst[warp] = m ? j0 + warp * 32 + __ffs(m) - 1 : 0x7fffffff;
        __syncthreads();
        if (threadIdx.x == 0) {
            int f = 0x7fffffff;
            for (int w = 0; w < ENC_THREADS / 32; w++) f = min(f, wfirst[w]);
            last = f;
        }
        __syncthreads();
        if (last != 0x7fffffff) break;
    }
    int s1 = last;
    size_t first = (size_t)(kA == k ? 2 * s : 2 * s + 1) * C;
    float* row = dst + (size_t)k * C;
    for (int c0 = threadIdx.x; c0 < C; c0 += ENC_THREADS * ENC_SLOTS) {
        float acc[ENC_SLOTS];
#pragma unroll
        for (int q = 0; q < ENC_SLOTS; q++) {
            int c = c0 + q * ENC_THREADS;
            acc[q] = c < C ? row[c] + part[first + c] : 0.0f;
        }
        for (int j = s + 1; j <= s1; j += ENC_FIX_UNROLL) {
            float x[ENC_FIX_UNROLL][ENC_SLOTS];
#pragma unroll
            for (int u = 0; u < ENC_FIX_UNROLL; u++) {
#pragma unroll
                for (int q = 0; q < ENC_SLOTS; q++) {
                    int c = c0 + q * ENC_THREADS;
                    x[u][q] = (j + u <= s1 && c < C) ? part[(size_t)2 * (j + u) * C + c] : 0.0f;
                }
            }
#pragma unroll
            for (int u = 0; u < ENC_FIX_UNROLL; u++) {
                if (j + u <= s1) {
#pragma unroll
                    for (int q = 0; q < ENC_SLOTS; q++) acc[q] += x[u][q];
                }
            }
        }
#pragma unroll
        for (int q = 0; q < ENC_SLOTS; q++) {
            int c = c0 + q * ENC_THREADS;
            if (c < C) row[c] = acc[q];
        }
    }
}
