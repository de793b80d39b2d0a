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
// only the losses are written; q, qt and amax are left as they are.
//
// store == 0: the caller reads the gradient only from q and qt (the LM
// head's dx and dW products both in FP8), so the logits are left as they
// were: neither form stores the gradient in T (N·V·sizeof(T) bytes of
// writes fewer) nor packs it, and the l3 form skips the barrier that
// kept thread 0's read of x[target] ahead of those stores. The losses,
// q, qt and amax are computed as with store != 0, bit for bit.
//
// The target's gradient (p - 1)·dscale is chosen per element by its
// column (a compare and a select a logit) instead of being written over
// the row afterwards as the bf16 kernels do, so that q holds its code
// too; its value is the bf16 kernels' (the same expression of the same
// exp). The dx product dlogits·wte takes q as its K-major operand (K = V)
// as it is.
//
// Transposed copy (qt not null): the weight gradient dwte = dlogitsᵀ·ln
// has K = N (tokens), so its FP8 GEMM needs qt (V,N) = qᵀ, N contiguous.
// A block then takes tiles of CEF8_TILE consecutive rows (N a multiple
// of it: the launcher checks), runs each row of its tile as above, and
// after the tile's last row (cef8_transpose) reads the tile's q back and
// writes qt[v][t0..t0+15] as one 16-byte store a vocabulary id. The
// two passes over a row stay one row apart, as without qt, so the second
// still reads the row from L2 (or shared memory); a tile whose rows were
// read twice by one pass over 16 rows would keep 16 rows a block in
// flight, 16·V·sizeof(T) (1.6 MB at V 50304, bf16), over the L2 for a
// grid of every SM. The read-back is the tile's q (16·V bytes, written
// just before, mostly still in L2); its stores are whole 16-byte pieces,
// half a sector each. qt holds q's bytes: no second rounding, and the
// amax and underflows are counted once, from q. Without qt a tile is one
// row, the rows' order that of the kernels without qt.
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
// store == 0); with qt, 1 more read (the tile's q, mostly from L2) and 1
// more written.

#include "common.cuh"
#include "crossentropy.cuh"
#include "fp8.cuh"

// druto:block CEF8_THREADS crossentropy_fp8_l3
#define CEF8_THREADS 512
#define CEF8_UNROLL 4
// druto:block CEF8_TMA_THREADS crossentropy_fp8_tma
#define CEF8_TMA_THREADS 1024
// CEF8_TILE is the rows of a block's tile with qt: the bytes of one store
// of qt (one vocabulary id's codes of the tile).
#define CEF8_TILE 16

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
        o[e] = j0 + e == tgt ? (x * inv - 1.0f) * dscale : x * sc;
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

// cef8_next returns the row a block runs after row when its tiles are of
// tr rows: the next of the tile, else the first of its next tile (the
// block's tiles stride by gridDim.x); N or more when there is none.
__device__ __forceinline__ int cef8_next(int row, int tr, int N) {
    const int n = row + 1;
    return n % tr != 0 && n < N ? n : (row / tr + (int)gridDim.x) * tr;
}

// cef8_transpose writes qt (V,N) rows t0..t0+CEF8_TILE-1 of every column
// from q (N,V) of those rows, which this block wrote (a barrier of the
// block after its last store of them): a thread takes 4 columns, loads
// their 4 bytes of each of the tile's rows (a warp: 128 consecutive bytes
// of a row), transposes each 4×4 block of bytes with byte permutes and
// stores the 4 columns' 16 bytes into qt. Every thread calls it.
__device__ __forceinline__ void cef8_transpose(unsigned char* qt, const unsigned char* q, int t0, int N, int V) {
    const unsigned char* src = q + (size_t)t0 * V;
    for (int c = threadIdx.x; c < V / 4; c += blockDim.x) {
        unsigned int w[CEF8_TILE];
#pragma unroll
        for (int r = 0; r < CEF8_TILE; r++) w[r] = *reinterpret_cast<const unsigned int*>(src + (size_t)r * V + 4 * c);
        unsigned int o[4][CEF8_TILE / 4]; // o[j][k]: column 4c + j, rows 4k..4k+3
#pragma unroll
        for (int k = 0; k < CEF8_TILE / 4; k++) {
            const unsigned int lo01 = __byte_perm(w[4 * k], w[4 * k + 1], 0x5140); // a0 b0 a1 b1
            const unsigned int hi01 = __byte_perm(w[4 * k], w[4 * k + 1], 0x7362); // a2 b2 a3 b3
            const unsigned int lo23 = __byte_perm(w[4 * k + 2], w[4 * k + 3], 0x5140);
            const unsigned int hi23 = __byte_perm(w[4 * k + 2], w[4 * k + 3], 0x7362);
            o[0][k] = __byte_perm(lo01, lo23, 0x5410); // a0 b0 c0 d0
            o[1][k] = __byte_perm(lo01, lo23, 0x7632);
            o[2][k] = __byte_perm(hi01, hi23, 0x5410);
            o[3][k] = __byte_perm(hi01, hi23, 0x7632);
        }
#pragma unroll
        for (int j = 0; j < 4; j++)
            *reinterpret_cast<uint4*>(qt + (size_t)(4 * c + j) * N + t0) = make_uint4(o[j][0], o[j][1], o[j][2], o[j][3]);
    }
}

// losses (N) F32, logits (N,V) T, q (N,V) e5m2 bytes, qt (V,N) e5m2
// bytes or null, amax (2) f32, targets (N), scale (1) f32; dscale_mul:
// the device loss scale or null; store: 0 leaves the logits as they were
// (the gradient in q and qt alone)
extern "C" __global__ void __launch_bounds__(CEF8_THREADS, 1)
    crossentropy_fp8_l3(float* __restrict__ losses, T* __restrict__ logits, unsigned char* __restrict__ q, unsigned char* __restrict__ qt,
                        float* __restrict__ amax, const int* __restrict__ targets, const float* __restrict__ scale, int N, int V,
                        float dscale, const float* __restrict__ dscale_mul, int store) {
    pdl_enter();
    if (dscale_mul != 0) dscale *= *dscale_mul; // the device loss scale (a power of two: exact)
    __shared__ float red[64];
    const int tid = threadIdx.x;
    const int nv = V / CE_VEC;
    const float L2E = 1.4426950408889634f;
    const float s = dscale != 0.0f ? *scale : 0.0f;
    unsigned int am = 0, uf = 0;
    const int tr = qt != 0 ? CEF8_TILE : 1; // the rows of a tile
    for (int row = blockIdx.x * tr; row < N; row = cef8_next(row, tr, N)) {
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
        if (qt != 0 && (row + 1) % CEF8_TILE == 0) {
            __syncthreads(); // the tile's q is written
            cef8_transpose(qt, q, row + 1 - CEF8_TILE, N, V);
        }
    }
    cef8_amax<CEF8_THREADS>(amax, am, uf);
}

#ifdef DRUTO_HAVE_TMA
extern __shared__ __align__(128) unsigned char cef8_tma_rows[];
#endif

// crossentropy_fp8_l3's arguments; dynamic shared memory 2·V·sizeof(T)
extern "C" __global__ void __launch_bounds__(CEF8_TMA_THREADS, 1)
    crossentropy_fp8_tma(float* __restrict__ losses, T* __restrict__ logits, unsigned char* __restrict__ q, unsigned char* __restrict__ qt,
                         float* __restrict__ amax, const int* __restrict__ targets, const float* __restrict__ scale, int N, int V,
                         float dscale, const float* __restrict__ dscale_mul, int store) {
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
    const int tr = qt != 0 ? CEF8_TILE : 1; // the rows of a tile
    const int first = blockIdx.x * tr;
    if (tid == 0) {
        tma_bar_init(bar0);
        tma_bar_init(bar0 + 8);
        tma_bar_fence();
    }
    __syncthreads();
    if (tid == 0 && first < N) {
        tma_expect(bar0, rowBytes);
        tma_load(rows0, logits + (size_t)first * V, rowBytes, bar0);
    }
    int k = 0;
    for (int row = first; row < N; row = cef8_next(row, tr, N), k++) {
        const int b = k & 1;
        // The other buffer's last reader was the previous row, which every
        // thread finished before the barrier that ended it.
        const int next = cef8_next(row, tr, N);
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
        if (qt != 0 && dscale != 0.0f && (row + 1) % CEF8_TILE == 0) cef8_transpose(qt, q, row + 1 - CEF8_TILE, N, V); // after the barrier: the tile's q is written
    }
    cef8_amax<CEF8_TMA_THREADS>(amax, am, uf);
#endif
}
