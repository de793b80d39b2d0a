// flash_attention2.cu: the second variant of the flash-attention forward
// and backward (FlashAttention-2 scheme, sm_80+), which pkg/device/gpu runs
// wherever it is built; flash_attention.cu's variant 1 runs otherwise (f16
// on sm_75, and the backward at hs 128 on GPUs that cannot give
// flash_bwd2kv_hs128 its shared memory). Same layouts, arguments and
// results as variant 1's (see flash_attention.cu).
//
// druto:kernel flash_fwd2_hs32 flash_fwd2_hs64 flash_fwd2_hs128
// druto:kernel flash_bwd2_dot
// druto:kernel flash_bwd2kv_hs32 flash_bwd2kv_hs64 flash_bwd2kv_hs128
// druto:kernel flash_bwd2q_hs32 flash_bwd2q_hs64 flash_bwd2q_hs128
// druto:dtypes bf16 f16
// druto:arch 80
//
// flash_fwd2_hsN (grid (B·NH, ceil(T/128)), 256 threads): eight warps each
// own 16 query rows of a 128-row tile, so each K/V element staged in shared
// memory feeds twice the mma work of the 64-row kernel. Differences:
//   - K and V tiles (BC = 64 keys; 32 at hs 128, for registers and shared
//     memory) are double-buffered and filled with cp.async (16 bytes,
//     zero-fill past T): tile kt+1 loads while tile kt is multiplied;
//   - q fragments stay in registers for the whole key loop (read once);
//   - rows are padded by 8 elements (16 bytes), so the 8 row addresses of
//     each ldmatrix phase fall in 8 different 16-byte bank groups;
//   - a warp skips the mma work of key tiles wholly above its 16 rows (the
//     diagonal of a 128-row tile spans several key tiles), and masks only
//     the tiles that cross its rows or T;
//   - q tiles run in reverse order (blockIdx.y 0 is the last, longest
//     tile) and the heads run on x, the fastest grid dimension, so every
//     longest CTA of every head starts before any shorter one;
//   - __launch_bounds__(256, 2) at hs 32/64: two CTAs (16 warps) per SM.

#include "common.cuh"
#include "flash_common.cuh"

// Block sizes (threads), read by the launchers too (kernels/blocks.go).
// druto:block FA2_BLOCK flash_fwd2_hs32 flash_fwd2_hs64 flash_fwd2_hs128
#define FA2_BLOCK 256
// druto:block FA2_BWD_BLOCK flash_bwd2kv_hs32 flash_bwd2kv_hs64 flash_bwd2kv_hs128 flash_bwd2q_hs32 flash_bwd2q_hs64 flash_bwd2q_hs128 flash_bwd2_dot
#define FA2_BWD_BLOCK 256

#define FA2_BM 128 // query rows per CTA (8 warps × 16)

#ifdef DRUTO_EMU
// The emulator copies at once: cp.async is a plain copy, commit/wait no-ops.
__device__ __forceinline__ void fa2_cp16(void* s, const void* g, bool valid) {
    uint4 v;
    v.x = v.y = v.z = v.w = 0u;
    if (valid) v = *reinterpret_cast<const uint4*>(g);
    *reinterpret_cast<uint4*>(s) = v;
}
__device__ __forceinline__ void fa2_commit() {}
template <int N>
__device__ __forceinline__ void fa2_wait() {}
#else
// fa2_cp16 copies 16 bytes global→shared asynchronously (L2 only, .cg);
// valid false writes zeros and reads nothing (src-size 0).
__device__ __forceinline__ void fa2_cp16(void* s, const void* g, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(fa_smem(s)), "l"(g), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void fa2_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// fa2_wait waits until at most N of this thread's committed groups are pending.
template <int N>
__device__ __forceinline__ void fa2_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
#endif

// fa2_tile starts copying rows [r0, r0+ROWS) × HS columns of a global
// matrix into shared s (row stride LD); rows at or past n become zeros.
// g points at this thread's first chunk: the matrix's row
// threadIdx.x/(HS/8), column (threadIdx.x%(HS/8))·8, and ld is the row
// stride in elements. Every thread of the CTA (256) takes part.
template <int ROWS, int HS, int LD>
__device__ __forceinline__ void fa2_tile(unsigned short* s, const T* g, long long ld, int r0, int n) {
    const int per = HS / 8;            // 16-byte chunks per row
    const int step = FA2_BM * 2 / per; // rows per pass of the CTA
    const int r = threadIdx.x / per, c = (threadIdx.x % per) * 8;
    const T* p = g + (long long)r0 * ld;
#pragma unroll
    for (int i = 0; i < ROWS / step; i++) {
        bool valid = r0 + r + i * step < n;
        fa2_cp16(s + (r + i * step) * LD + c, valid ? p + (long long)(i * step) * ld : g, valid);
    }
}

// fa2_chunk is this thread's first 16-byte chunk of a BC-key tile of m
// (row stride ld), as fa2_tile wants it.
template <int HS>
__device__ __forceinline__ const T* fa2_chunk(const T* m, long long ld) {
    return m + (long long)(threadIdx.x / (HS / 8)) * ld + (threadIdx.x % (HS / 8)) * 8;
}

// The key-tile walk of flash_fwd2 and flash_bwd2q over query tile qt
// (128 rows): key tiles 0..fa2_nkt-1 cover the keys up to the tile's last
// row and below T; k and v tile kt+1 load (cp.async) into the other half
// of the double buffers sK, sV while tile kt is multiplied:
//
//   fa2_keys0(...);                       // tile 0 starts loading
//   ... this warp's own fragments ...
//   for (int kt = 0; kt < nkt; kt++) {
//       const int st = fa2_keys(..., kt, nkt, Tn); // tile kt is in buffer st
//       if (kt * BC <= q0 + 15) { ... fa2_mask(...) ... }
//       __syncthreads();                  // buffer st is free for tile kt+2
//   }
//
// A warp skips the tiles wholly above its rows q0..q0+15 (warp-uniform;
// key 0 is in tile 0, which every warp runs). k points at the head's k
// (row stride ld), its v at k + C.
template <int BC>
__device__ __forceinline__ int fa2_nkt(int qt, int Tn) {
    return (min(qt * FA2_BM + FA2_BM, Tn) + BC - 1) / BC;
}

template <int HS, int BC>
__device__ __forceinline__ void fa2_keys0(unsigned short (*sK)[BC * (HS + 8)], unsigned short (*sV)[BC * (HS + 8)],
                                          const T* k, long long ld, int C, int Tn) {
    const T* gk = fa2_chunk<HS>(k, ld);
    fa2_tile<BC, HS, HS + 8>(sK[0], gk, ld, 0, Tn);
    fa2_tile<BC, HS, HS + 8>(sV[0], gk + C, ld, 0, Tn);
    fa2_commit();
}

// fa2_keys starts tile kt+1 into the other buffer (freed at the end of
// kt-1) and waits for tile kt, which it returns the buffer of.
template <int HS, int BC>
__device__ __forceinline__ int fa2_keys(unsigned short (*sK)[BC * (HS + 8)], unsigned short (*sV)[BC * (HS + 8)],
                                        const T* k, long long ld, int C, int kt, int nkt, int Tn) {
    const int st = kt & 1;
    if (kt + 1 < nkt) {
        const T* gk = fa2_chunk<HS>(k, ld);
        fa2_tile<BC, HS, HS + 8>(sK[st ^ 1], gk, ld, kt * BC + BC, Tn);
        fa2_tile<BC, HS, HS + 8>(sV[st ^ 1], gk + C, ld, kt * BC + BC, Tn);
    }
    fa2_commit(); // possibly empty: the group count stays uniform
    fa2_wait<1>(); // tile kt has landed (this thread's copies)
    __syncthreads(); // ... and everyone's
    return st;
}

// fa2_mask masks key tile k0 for rows q0..q0+15 where a key may pass a row
// or T.
template <int BC>
__device__ __forceinline__ FaMask fa2_mask(int q0, int k0, int Tn, int lane) {
    return fa_mask(k0 + BC - 1 > q0 || k0 + BC > Tn, q0, k0, Tn, lane);
}

// out (B,T,C) T, lse (B,NH,T) F32, qkv (B,T,3C) T; grid (B·NH, ceil(T/128)), 256 threads
template <int HS, int BC>
__device__ __forceinline__ void flash_fwd2(T* __restrict__ out, float* __restrict__ lse, const T* __restrict__ qkv,
                                           int Tn, int C, int NH, float scale) {
    const int LD = HS + 8;
    __shared__ __align__(16) unsigned short sK[2][BC * LD];
    __shared__ __align__(16) unsigned short sV[2][BC * LD];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int qt = gridDim.y - 1 - blockIdx.y; // the longest tiles first
    const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
    const long long ld = 3LL * C;
    const T* q = qkv + (long long)b * Tn * ld + h * HS;
    const T* k = q + C;
    const int q0 = qt * FA2_BM + warp * 16; // this warp's first query row
    const float sl2 = scale * FA_LOG2E;

    fa2_keys0<HS, BC>(sK, sV, k, ld, C, Tn);

    unsigned qf[HS / 16][4]; // q stays in registers for the whole key loop
    fa_ldgA<HS>(qf, q, ld, q0, Tn, lane);
    float o[HS / 8][4];
    fa_zero<HS>(o);
    float m0 = FA_NEG_INF, m1 = FA_NEG_INF; // running max (log2 domain) of rows g, g+8
    float l0 = 0.0f, l1 = 0.0f;             // this thread's part of the running sums

    const int nkt = fa2_nkt<BC>(qt, Tn);
    for (int kt = 0; kt < nkt; kt++) {
        const int st = fa2_keys<HS, BC>(sK, sV, k, ld, C, kt, nkt, Tn), k0 = kt * BC;
        if (k0 <= q0 + 15) // tiles wholly above this warp's rows add nothing
            fa_fwd_tile<HS, BC, LD>(o, m0, m1, l0, l1, qf, sK[st], sV[st], sl2, fa2_mask<BC>(q0, k0, Tn, lane), lane);
        __syncthreads(); // buffer st is free for tile kt+2
    }
    fa_fwd_out<HS>(out + (long long)b * Tn * C + h * HS, lse + (long long)bh * Tn, o, m0, m1, l0, l1, q0, Tn, C, lane);
}

#define FA2_FWD_ARGS T *__restrict__ out, float *__restrict__ lse, const T *__restrict__ qkv, int Tn, int C, int NH, float scale
extern "C" __global__ void __launch_bounds__(FA2_BLOCK, 2) flash_fwd2_hs32(FA2_FWD_ARGS) {
    flash_fwd2<32, 64>(out, lse, qkv, Tn, C, NH, scale);
}
extern "C" __global__ void __launch_bounds__(FA2_BLOCK, 2) flash_fwd2_hs64(FA2_FWD_ARGS) {
    flash_fwd2<64, 64>(out, lse, qkv, Tn, C, NH, scale);
}
extern "C" __global__ void __launch_bounds__(FA2_BLOCK, 1) flash_fwd2_hs128(FA2_FWD_ARGS) {
    flash_fwd2<128, 32>(out, lse, qkv, Tn, C, NH, scale);
}

// ---- backward, variant 2 ----------------------------------------------------
//
// Three kernels, no atomics and no fp32 scratch (deterministic): dd, then
// dk and dv, then dq in a pass of its own that recomputes S and dP (7
// matrix products a tile pair against 5 with dq added by fp32 atomics, the
// variant this replaced: 124 against 109 TFLOP/s on the H200).
// flash_bwd2_dot (grid-stride, 8 elements a thread): dd = rowsum(dout∘out)
//   per (b,h,t) row. Thread i owns elements 8i..8i+7 of dout/out (B,T,C), a
//   group of HS/8 adjacent threads one (b,t,h) row.
// flash_bwd2kv_hsN (grid (B·NH, ceil(T/128)), 256 threads, dynamic shared
//   memory Fa2Bwd<HS,BM>::BYTES, > 48 KB: the launcher raises the limit
//   once at load): one CTA per tile of FA2_BN = 128 keys of one (b,h);
//   blockIdx.y = 0 is the first key tile, which meets the most query tiles,
//   and the grid runs x (the heads) fastest, so every longest CTA starts
//   before any shorter one (causal load balance). Eight warps own 16 keys
//   each; their dk and dv stay in fp32 registers while the CTA walks the
//   query tiles of BM rows from the diagonal to T:
//     Sᵀ = k·qᵀ, dPᵀ = v·doutᵀ (16 keys × BM queries a warp),
//     Pᵀ = exp2(Sᵀ·scale·log2e − lse·log2e), dSᵀ = Pᵀ∘(dPᵀ − dd),
//     dv += Pᵀ·dout, dk += dSᵀ·q (A operands straight from the registers).
//   The next query tile (q, dout, lse, dd) loads with cp.async into the
//   other half of a double buffer while the current one is multiplied; one
//   barrier a tile. A warp whose 16 keys lie above the tile's last row
//   (or at/after T) does no mma work. k and v A fragments stay in
//   registers at hs 32/64 (read once), are re-read from shared memory at
//   hs 128. Rows are padded by 8 elements (16 bytes): ldmatrix phases
//   conflict-free.
// flash_bwd2q_hsN: dq, see its comment below.

#define FA2_BN 128 // keys per backward CTA (8 warps × 16)

#ifdef DRUTO_EMU
__device__ __forceinline__ void fa2_cp4(void* s, const void* g, bool valid) {
    unsigned v = 0u;
    if (valid) v = *reinterpret_cast<const unsigned*>(g);
    *reinterpret_cast<unsigned*>(s) = v;
}
#else
// fa2_cp4 copies 4 bytes global→shared asynchronously; valid false writes 0.
__device__ __forceinline__ void fa2_cp4(void* s, const void* g, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(fa_smem(s)), "l"(g), "r"(valid ? 4 : 0) : "memory");
}
#endif

// fa2b_tile starts copying rows [r0, r0+ROWS) × HS columns of a global
// matrix (row stride ld elements) into shared s (row stride LD); rows at or
// past n become zeros. All FA2_BWD_BLOCK threads take part.
template <int ROWS, int HS, int LD>
__device__ __forceinline__ void fa2b_tile(unsigned short* s, const T* g, long long ld, int r0, int n) {
    const int per = HS / 8, N = ROWS * per;
#pragma unroll
    for (int i0 = 0; i0 < N; i0 += FA2_BWD_BLOCK) {
        const int i = i0 + threadIdx.x;
        if (N % FA2_BWD_BLOCK == 0 || i < N) {
            const int r = i / per, c = (i % per) * 8;
            const bool valid = r0 + r < n;
            fa2_cp16(s + r * LD + c, valid ? g + (long long)(r0 + r) * ld + c : g, valid);
        }
    }
}

// Fa2Bwd: flash_bwd2kv's shared memory, byte offsets: k and v (FA2_BN ×
// LD), q and dout (2 buffers × BM × LD each), lse and dd (2 × BM floats
// each). pkg/device/gpu/attention.go (flashBwd2Smem) repeats BYTES for the
// launch.
template <int HS, int BM>
struct Fa2Bwd {
    static const int LD = HS + 8;
    static const int K = 0, V = K + FA2_BN * LD * 2, Q = V + FA2_BN * LD * 2, O = Q + 2 * BM * LD * 2;
    static const int L = O + 2 * BM * LD * 2, D = L + 2 * BM * 4, BYTES = D + 2 * BM * 4;
};

#ifdef DRUTO_EMU
static __align__(16) unsigned char fa2_dsmem[160 * 1024];
#else
extern __shared__ __align__(16) unsigned char fa2_dsmem[];
#endif

// fa2b_qtile starts loading query tile q0 (q, dout, lse, dd) into buffer st.
template <int HS, int BM>
__device__ __forceinline__ void fa2b_qtile(unsigned char* sm, int st, const T* q, const T* go, const float* lb,
                                           const float* db, long long ld, int C, int q0, int Tn) {
    typedef Fa2Bwd<HS, BM> G;
    fa2b_tile<BM, HS, G::LD>(reinterpret_cast<unsigned short*>(sm + G::Q) + st * BM * G::LD, q, ld, q0, Tn);
    fa2b_tile<BM, HS, G::LD>(reinterpret_cast<unsigned short*>(sm + G::O) + st * BM * G::LD, go, C, q0, Tn);
    const int i = threadIdx.x;
    if (i < 2 * BM) { // threads 0..BM-1: lse, BM..2BM-1: dd (4-byte copies: the rows need not be 16-byte aligned)
        const int r = i % BM;
        const bool valid = q0 + r < Tn;
        const float* src = i < BM ? lb : db;
        float* dst = reinterpret_cast<float*>(sm + (i < BM ? G::L : G::D)) + st * BM + r;
        fa2_cp4(dst, valid ? src + q0 + r : src, valid);
    }
}

// dk and dv of one key tile (flash_bwd2kv_hsN; dq by flash_bwd2q_hsN).
template <int HS, int BM>
__device__ __forceinline__ void flash_bwd2kv(T* __restrict__ dqkv, const T* __restrict__ qkv, const T* __restrict__ dout,
                                             const float* __restrict__ lse, const float* __restrict__ dd, int Tn, int C,
                                             int NH, float scale, int store) {
    typedef Fa2Bwd<HS, BM> G;
    const int LD = G::LD;
    const bool KREG = HS <= 64; // k and v A fragments held in registers
    const int KF = KREG ? HS / 16 : 1;
    unsigned char* sm = fa2_dsmem;
#ifndef DRUTO_EMU
    {
        unsigned dyn;
        asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
        if (dyn < (unsigned)G::BYTES) __trap(); // a launch with too little shared memory: fail, never compute wrong
    }
#endif
    unsigned short* sK = reinterpret_cast<unsigned short*>(sm + G::K);
    unsigned short* sV = reinterpret_cast<unsigned short*>(sm + G::V);
    unsigned short* sQ = reinterpret_cast<unsigned short*>(sm + G::Q);
    unsigned short* sO = reinterpret_cast<unsigned short*>(sm + G::O);
    const float* sL = reinterpret_cast<const float*>(sm + G::L);
    const float* sD = reinterpret_cast<const float*>(sm + G::D);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2;
    const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
    const int k0 = blockIdx.y * FA2_BN;
    const int kw = warp * 16; // this warp's keys within the tile
    const long long ld = 3LL * C;
    const T* q = qkv + (long long)b * Tn * ld + h * HS;
    const T* k = q + C;
    const T* v = q + 2 * C;
    const T* go = dout + (long long)b * Tn * C + h * HS;
    const float* lb = lse + (long long)bh * Tn;
    const float* db = dd + (long long)bh * Tn;
    const float sl2 = scale * FA_LOG2E;
    const int qt0 = k0 / BM, nq = (Tn + BM - 1) / BM;

    fa2b_tile<FA2_BN, HS, LD>(sK, k, ld, k0, Tn);
    fa2b_tile<FA2_BN, HS, LD>(sV, v, ld, k0, Tn);
    fa2b_qtile<HS, BM>(sm, 0, q, go, lb, db, ld, C, qt0 * BM, Tn);
    fa2_commit();
    fa2_wait<0>();
    __syncthreads();
    unsigned kf[KF][4], vf[KF][4];
    if (KREG) {
#pragma unroll
        for (int kk = 0; kk < KF; kk++) {
            fa_ldA<LD>(kf[kk], sK, kw, kk * 16, lane);
            fa_ldA<LD>(vf[kk], sV, kw, kk * 16, lane);
        }
    }
    float dk[HS / 8][4], dv[HS / 8][4];
    fa_zero<HS>(dk);
    fa_zero<HS>(dv);

    for (int qt = qt0; qt < nq; qt++) {
        const int q0 = qt * BM, st = (qt - qt0) & 1;
        fa2_wait<0>();   // query tile qt has landed (this thread's copies)
        __syncthreads(); // ... and everyone's; the previous tile's readers of buffer st^1 are done
        if (qt + 1 < nq) fa2b_qtile<HS, BM>(sm, st ^ 1, q, go, lb, db, ld, C, q0 + BM, Tn);
        fa2_commit();
        // keys [k0, k0+kmax) can meet the tile: the others are above its
        // last row or at/after T (kmax > 0: k0 <= q0 < T)
        const int kmax = min(FA2_BN, min(q0 + BM, Tn) - k0);
        if (kw < kmax) { // warp-uniform
            const unsigned short* cQ = sQ + st * BM * LD;
            const unsigned short* cO = sO + st * BM * LD;
            const float* cL = sL + st * BM;
            const float* cD = sD + st * BM;
            // Sᵀ = k·qᵀ and dPᵀ = v·doutᵀ: 16 keys × BM queries
            float s[BM / 8][4], dp[BM / 8][4];
            fa_zero<BM>(s);
            fa_zero<BM>(dp);
#pragma unroll
            for (int kk = 0; kk < HS / 16; kk++) {
                unsigned ka[4], va[4];
                if (!KREG) {
                    fa_ldA<LD>(ka, sK, kw, kk * 16, lane);
                    fa_ldA<LD>(va, sV, kw, kk * 16, lane);
                }
                const unsigned* kap = KREG ? kf[KREG ? kk : 0] : ka;
                const unsigned* vap = KREG ? vf[KREG ? kk : 0] : va;
                fa_mma_bt2<BM, LD>(s, kap, cQ, dp, vap, cO, kk * 16, lane);
            }
            // Pᵀ, then dSᵀ = Pᵀ∘(dPᵀ − dd) in place of dp (cL: lse, natural log)
            const bool edge = k0 + kw + 15 > q0 || q0 + BM > Tn || k0 + kw + 16 > Tn;
            fa_dsT<BM, true>(s, dp, cL, cD, sl2, edge, k0 + kw + g, q0, Tn, lane);
            // dv += Pᵀ·dout, dk += dSᵀ·q (k dimension: the BM queries)
            fa_dkv<BM, HS, LD>(dk, dv, s, dp, cQ, cO, lane);
        }
    }
    // dk (×scale) and dv are added to dqkv's k and v parts (store: to zero,
    // the old values never read), rows past T skipped
    T* dkb = dqkv + (long long)b * Tn * ld + C + h * HS;
    fa_grad_out<HS, true>(dkb, dk, scale, dkb + C, dv, 1.0f, ld, k0 + kw, Tn, store, lane);
}

#define FA2_BWD_ARGS                                                                                          \
    T *__restrict__ dqkv, const T *__restrict__ qkv, const T *__restrict__ dout, const float *__restrict__ lse, \
        const float *__restrict__ dd, int Tn, int C, int NH, float scale, int store
extern "C" __global__ void __launch_bounds__(FA2_BWD_BLOCK, 1) flash_bwd2kv_hs32(FA2_BWD_ARGS) {
    flash_bwd2kv<32, 64>(dqkv, qkv, dout, lse, dd, Tn, C, NH, scale, store);
}
extern "C" __global__ void __launch_bounds__(FA2_BWD_BLOCK, 1) flash_bwd2kv_hs64(FA2_BWD_ARGS) {
    flash_bwd2kv<64, 64>(dqkv, qkv, dout, lse, dd, Tn, C, NH, scale, store);
}
extern "C" __global__ void __launch_bounds__(FA2_BWD_BLOCK, 1) flash_bwd2kv_hs128(FA2_BWD_ARGS) {
    flash_bwd2kv<128, 32>(dqkv, qkv, dout, lse, dd, Tn, C, NH, scale, store);
}

// dqkv (B,T,3C) T: the q part += dq; qkv (B,T,3C), dout (B,T,C) T, lse,
// dd (B,NH,T) F32. grid (B·NH, ceil(T/128)), 256 threads: the dq pass.
// Eight warps own 16 query rows each of a 128-row tile and keep q, dout
// (A fragments) and dq (fp32) in registers while the CTA walks the key
// tiles of BC keys from 0 to the diagonal (cp.async double-buffered k and
// v, as flash_fwd2): S = q·kᵀ, dP = dout·vᵀ, P = exp2(S·scale·log2e −
// lse·log2e), dS = P∘(dP − dd), dq += dS·k (dS straight from the
// registers). blockIdx.y = 0 is the last (longest) query tile.
template <int HS, int BC>
__device__ __forceinline__ void flash_bwd2q(T* __restrict__ dqkv, const T* __restrict__ qkv, const T* __restrict__ dout,
                                            const float* __restrict__ lse, const float* __restrict__ dd, int Tn, int C,
                                            int NH, float scale, int store) {
    const int LD = HS + 8;
    __shared__ __align__(16) unsigned short sK[2][BC * LD];
    __shared__ __align__(16) unsigned short sV[2][BC * LD];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2;
    const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
    const int qt = gridDim.y - 1 - blockIdx.y; // the longest tiles first
    const long long ld = 3LL * C;
    const T* q = qkv + (long long)b * Tn * ld + h * HS;
    const T* k = q + C;
    const T* go = dout + (long long)b * Tn * C + h * HS;
    const int q0 = qt * FA2_BM + warp * 16; // this warp's first query row
    const float sl2 = scale * FA_LOG2E;

    fa2_keys0<HS, BC>(sK, sV, k, ld, C, Tn);

    unsigned qf[HS / 16][4], of[HS / 16][4];
    fa_ldgA<HS>(qf, q, ld, q0, Tn, lane);
    fa_ldgA<HS>(of, go, C, q0, Tn, lane);
    // rows past T: lse and dd 0 (their q and dout are 0: dS = 0, never written)
    const float* lb = lse + (long long)bh * Tn;
    const float* db = dd + (long long)bh * Tn;
    const float L0 = q0 + g < Tn ? lb[q0 + g] * FA_LOG2E : 0.0f, L1 = q0 + g + 8 < Tn ? lb[q0 + g + 8] * FA_LOG2E : 0.0f;
    const float D0 = q0 + g < Tn ? db[q0 + g] : 0.0f, D1 = q0 + g + 8 < Tn ? db[q0 + g + 8] : 0.0f;
    float dq[HS / 8][4];
    fa_zero<HS>(dq);

    const int nkt = fa2_nkt<BC>(qt, Tn);
    for (int kt = 0; kt < nkt; kt++) {
        const int st = fa2_keys<HS, BC>(sK, sV, k, ld, C, kt, nkt, Tn), k0 = kt * BC;
        if (k0 <= q0 + 15) { // tiles wholly above this warp's rows add nothing
            // S = q·kᵀ and dP = dout·vᵀ, as the forward's S
            float s[BC / 8][4], dp[BC / 8][4];
            fa_zero<BC>(s);
            fa_zero<BC>(dp);
#pragma unroll
            for (int kk = 0; kk < HS / 16; kk++) fa_mma_bt2<BC, LD>(s, qf[kk], sK[st], dp, of[kk], sV[st], kk * 16, lane);
            // dS = P∘(dP − dd) in place of dp, P masked as the forward's
            const FaMask mk = fa2_mask<BC>(q0, k0, Tn, lane);
#pragma unroll
            for (int j = 0; j < BC / 8; j++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float p = exp2f(s[j][e] * sl2 - ((e >> 1) ? L1 : L0));
                    if (fa_masked(mk, j, e)) p = 0.0f;
                    dp[j][e] = p * (dp[j][e] - ((e >> 1) ? D1 : D0));
                }
            }
            fa_pv<BC, HS, LD>(dq, dp, sK[st], lane); // dq += dS·k: the k dimension is the BC keys, 16 per step
        }
        __syncthreads(); // buffer st is free for tile kt+2
    }
    fa_grad_out<HS, false>(dqkv + (long long)b * Tn * ld + h * HS, dq, scale, 0, 0, 0.0f, ld, q0, Tn, store, lane);
}

// hs 32/64: two CTAs (16 warps) an SM within 128 registers (hs 64: 32-key
// tiles, as q, dout and dq fragments take 64 registers)
extern "C" __global__ void __launch_bounds__(FA2_BWD_BLOCK, 2) flash_bwd2q_hs32(FA2_BWD_ARGS) {
    flash_bwd2q<32, 64>(dqkv, qkv, dout, lse, dd, Tn, C, NH, scale, store);
}
extern "C" __global__ void __launch_bounds__(FA2_BWD_BLOCK, 2) flash_bwd2q_hs64(FA2_BWD_ARGS) {
    flash_bwd2q<64, 32>(dqkv, qkv, dout, lse, dd, Tn, C, NH, scale, store);
}
extern "C" __global__ void __launch_bounds__(FA2_BWD_BLOCK, 1) flash_bwd2q_hs128(FA2_BWD_ARGS) {
    flash_bwd2q<128, 32>(dqkv, qkv, dout, lse, dd, Tn, C, NH, scale, store);
}

// dd (B,NH,T) F32 = Σ dout·out over each head's hs columns. dout, out
// (B,T,C) T; n8 = B·T·C/8 (C a multiple of 8, hs/8 threads a row: hs/8
// divides 32). Grid-stride; every thread of a row
// group runs the same iterations (the stride is a multiple of 32).
extern "C" __global__ void flash_bwd2_dot(float* __restrict__ dd, const T* __restrict__ dout, const T* __restrict__ out,
                                          long long n8, int Tn, int NH, int hs) {
    const int per = hs / 8;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i0 = (long long)blockIdx.x * blockDim.x; i0 < n8; i0 += stride) {
        const long long i = i0 + threadIdx.x;
        float acc = 0.0f;
        if (i < n8) {
            const uint4 a = reinterpret_cast<const uint4*>(dout)[i];
            const uint4 o = reinterpret_cast<const uint4*>(out)[i];
            float2 x, y;
            x = fa_unpack(a.x), y = fa_unpack(o.x), acc += x.x * y.x + x.y * y.y;
            x = fa_unpack(a.y), y = fa_unpack(o.y), acc += x.x * y.x + x.y * y.y;
            x = fa_unpack(a.z), y = fa_unpack(o.z), acc += x.x * y.x + x.y * y.y;
            x = fa_unpack(a.w), y = fa_unpack(o.w), acc += x.x * y.x + x.y * y.y;
        }
        for (int off = per / 2; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
        if (i < n8 && i % per == 0) {
            const long long e = i / per; // (b, t, h)
            const long long bt = e / NH;
            const int h = (int)(e % NH);
            const long long bb = bt / Tn, t = bt % Tn;
            dd[(bb * NH + h) * Tn + t] = acc;
        }
    }
}
