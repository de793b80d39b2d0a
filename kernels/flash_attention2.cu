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

// out (B,T,C) T, lse (B,NH,T) F32, qkv (B,T,3C) T; grid (B·NH, ceil(T/128)), 256 threads
template <int HS, int BC>
__device__ __forceinline__ void flash_fwd2(T* __restrict__ out, float* __restrict__ lse, const T* __restrict__ qkv,
                                           int Tn, int C, int NH, float scale) {
    const int LD = HS + 8;
    __shared__ __align__(16) unsigned short sK[2][BC * LD];
    __shared__ __align__(16) unsigned short sV[2][BC * LD];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t4 = lane & 3;
    const int qt = gridDim.y - 1 - blockIdx.y; // the longest tiles first
    const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
    const long long ld = 3LL * C;
    const T* q = qkv + (long long)b * Tn * ld + h * HS;
    const T* k = q + C;
    const int q0 = qt * FA2_BM + warp * 16; // this warp's first query row
    const float sl2 = scale * FA_LOG2E;
    // key tiles 0..nkt-1 cover keys up to the tile's last row and below T
    const int kend = min(qt * FA2_BM + FA2_BM, Tn);
    const int nkt = (kend + BC - 1) / BC;
    const T* gk = k + (long long)(threadIdx.x / (HS / 8)) * ld + (threadIdx.x % (HS / 8)) * 8; // this thread's chunk
    const T* gv = gk + C;

    fa2_tile<BC, HS, LD>(sK[0], gk, ld, 0, Tn);
    fa2_tile<BC, HS, LD>(sV[0], gv, ld, 0, Tn);
    fa2_commit();

    unsigned qf[HS / 16][4];
#pragma unroll
    for (int kk = 0; kk < HS / 16; kk++) {
        qf[kk][0] = fa_ldg32(q, ld, q0 + g, kk * 16 + 2 * t4, Tn);
        qf[kk][1] = fa_ldg32(q, ld, q0 + g + 8, kk * 16 + 2 * t4, Tn);
        qf[kk][2] = fa_ldg32(q, ld, q0 + g, kk * 16 + 8 + 2 * t4, Tn);
        qf[kk][3] = fa_ldg32(q, ld, q0 + g + 8, kk * 16 + 8 + 2 * t4, Tn);
    }
    float o[HS / 8][4];
#pragma unroll
    for (int j = 0; j < HS / 8; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float m0 = FA_NEG_INF, m1 = FA_NEG_INF; // running max (log2 domain) of rows g, g+8
    float l0 = 0.0f, l1 = 0.0f;             // this thread's part of the running sums

    for (int kt = 0; kt < nkt; kt++) {
        const int k0 = kt * BC, st = kt & 1;
        if (kt + 1 < nkt) { // the next tile into the other buffer (freed at the end of kt-1)
            fa2_tile<BC, HS, LD>(sK[st ^ 1], gk, ld, k0 + BC, Tn);
            fa2_tile<BC, HS, LD>(sV[st ^ 1], gv, ld, k0 + BC, Tn);
        }
        fa2_commit(); // possibly empty: the group count stays uniform
        fa2_wait<1>(); // tile kt has landed (this thread's copies)
        __syncthreads(); // ... and everyone's

        // Warp-uniform: tiles wholly above this warp's rows add nothing
        // (key 0 is in tile 0, which every warp runs, so m is finite after it).
        if (k0 <= q0 + 15) {
            const unsigned short* cK = sK[st];
            const unsigned short* cV = sV[st];
            float s[BC / 8][4];
#pragma unroll
            for (int j = 0; j < BC / 8; j++) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < HS / 16; kk++) {
#pragma unroll
                for (int j = 0; j < BC / 16; j++) {
                    unsigned bf[4];
                    fa_ldBt<LD>(bf, cK, j * 16, kk * 16, lane);
                    fa_mma(s[2 * j], qf[kk], bf[0], bf[1]);
                    fa_mma(s[2 * j + 1], qf[kk], bf[2], bf[3]);
                }
            }
            // scale to the log2 domain; mask where a key may pass a row or T
            const bool mask = k0 + BC - 1 > q0 || k0 + BC > Tn;
            // key k0 + j·8 + 2·t4 + (e&1) is masked when it passes its row
            // (q0 + g, or q0 + g + 8 for e >= 2) or T - 1: offsets past lim
            const int lim0 = min(q0 + g, Tn - 1) - k0 - 2 * t4;
            const int lim1 = min(q0 + g + 8, Tn - 1) - k0 - 2 * t4;
            float mx0 = m0, mx1 = m1;
#pragma unroll
            for (int j = 0; j < BC / 8; j++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float x = s[j][e] * sl2;
                    if (mask && j * 8 + (e & 1) > ((e >> 1) ? lim1 : lim0)) x = FA_NEG_INF;
                    s[j][e] = x;
                }
                mx0 = fmaxf(mx0, fmaxf(s[j][0], s[j][1]));
                mx1 = fmaxf(mx1, fmaxf(s[j][2], s[j][3]));
            }
            mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
            mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
            const float b0 = mx0 == FA_NEG_INF ? 0.0f : mx0;
            const float b1 = mx1 == FA_NEG_INF ? 0.0f : mx1;
            const float c0 = exp2f(m0 - b0), c1 = exp2f(m1 - b1); // m = -inf gives 0
            m0 = mx0;
            m1 = mx1;
            l0 *= c0;
            l1 *= c1;
#pragma unroll
            for (int j = 0; j < HS / 8; j++) {
                o[j][0] *= c0;
                o[j][1] *= c0;
                o[j][2] *= c1;
                o[j][3] *= c1;
            }
#pragma unroll
            for (int j = 0; j < BC / 8; j++) {
                s[j][0] = exp2f(s[j][0] - b0);
                s[j][1] = exp2f(s[j][1] - b0);
                s[j][2] = exp2f(s[j][2] - b1);
                s[j][3] = exp2f(s[j][3] - b1);
                l0 += s[j][0] + s[j][1];
                l1 += s[j][2] + s[j][3];
            }
            // o += p·v: the k dimension is the BC keys, 16 per step
#pragma unroll
            for (int kk = 0; kk < BC / 16; kk++) {
                unsigned pa[4];
                pa[0] = fa_pack(s[2 * kk][0], s[2 * kk][1]);
                pa[1] = fa_pack(s[2 * kk][2], s[2 * kk][3]);
                pa[2] = fa_pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
                pa[3] = fa_pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
                for (int j = 0; j < HS / 16; j++) {
                    unsigned bf[4];
                    fa_ldB<LD>(bf, cV, kk * 16, j * 16, lane);
                    fa_mma(o[2 * j], pa, bf[0], bf[1]);
                    fa_mma(o[2 * j + 1], pa, bf[2], bf[3]);
                }
            }
        }
        __syncthreads(); // buffer st is free for tile kt+2
    }
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const float i0 = 1.0f / l0, i1 = 1.0f / l1;
    const int r0 = q0 + g, r1 = q0 + g + 8;
    T* ob = out + (long long)b * Tn * C + h * HS;
#pragma unroll
    for (int j = 0; j < HS / 8; j++) {
        int c = j * 8 + 2 * t4;
        if (r0 < Tn) *reinterpret_cast<unsigned*>(ob + (long long)r0 * C + c) = fa_pack(o[j][0] * i0, o[j][1] * i0);
        if (r1 < Tn) *reinterpret_cast<unsigned*>(ob + (long long)r1 * C + c) = fa_pack(o[j][2] * i1, o[j][3] * i1);
    }
    if (t4 == 0) {
        float* lb = lse + (long long)bh * Tn;
        if (r0 < Tn) lb[r0] = (m0 + log2f(l0)) * 0.69314718055994531f;
        if (r1 < Tn) lb[r1] = (m1 + log2f(l1)) * 0.69314718055994531f;
    }
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

// fa2_old returns the two elements at p widened, the gradient a backward
// kernel adds to, or zeros when store is set (the store form,
// AttentionBackwardStore: the old values, NaN included, are never read;
// 0 + x gives the bits the accumulate form gives on a zeroed dqkv).
__device__ __forceinline__ float2 fa2_old(const unsigned* p, int store) {
    if (store) {
        float2 z;
        z.x = z.y = 0.0f;
        return z;
    }
    return fa_unpack(*p);
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
    const int g = lane >> 2, t4 = lane & 3;
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
#pragma unroll
    for (int j = 0; j < HS / 8; j++) {
        dk[j][0] = dk[j][1] = dk[j][2] = dk[j][3] = 0.0f;
        dv[j][0] = dv[j][1] = dv[j][2] = dv[j][3] = 0.0f;
    }

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
#pragma unroll
            for (int j = 0; j < BM / 8; j++) {
                s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
                dp[j][0] = dp[j][1] = dp[j][2] = dp[j][3] = 0.0f;
            }
#pragma unroll
            for (int kk = 0; kk < HS / 16; kk++) {
                unsigned ka[4], va[4];
                if (!KREG) {
                    fa_ldA<LD>(ka, sK, kw, kk * 16, lane);
                    fa_ldA<LD>(va, sV, kw, kk * 16, lane);
                }
                const unsigned* kap = KREG ? kf[KREG ? kk : 0] : ka;
                const unsigned* vap = KREG ? vf[KREG ? kk : 0] : va;
#pragma unroll
                for (int j = 0; j < BM / 16; j++) {
                    unsigned bf[4];
                    fa_ldBt<LD>(bf, cQ, j * 16, kk * 16, lane);
                    fa_mma(s[2 * j], kap, bf[0], bf[1]);
                    fa_mma(s[2 * j + 1], kap, bf[2], bf[3]);
                    fa_ldBt<LD>(bf, cO, j * 16, kk * 16, lane);
                    fa_mma(dp[2 * j], vap, bf[0], bf[1]);
                    fa_mma(dp[2 * j + 1], vap, bf[2], bf[3]);
                }
            }
            // Pᵀ, then dSᵀ = Pᵀ∘(dPᵀ − dd) in place of dp. Element e of
            // n-tile j: key k0 + kw + g + (e>>1)·8, query q0 + j·8 + 2·t4 + (e&1).
            const bool edge = k0 + kw + 15 > q0 || q0 + BM > Tn || k0 + kw + 16 > Tn;
            const int key0 = k0 + kw + g;
#pragma unroll
            for (int j = 0; j < BM / 8; j++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int qi = j * 8 + 2 * t4 + (e & 1);
                    float p = exp2f(s[j][e] * sl2 - cL[qi] * FA_LOG2E); // cL: lse, natural log
                    if (edge) {
                        const int key = key0 + (e >> 1) * 8, row = q0 + qi;
                        if (key > row || key >= Tn || row >= Tn) p = 0.0f;
                    }
                    s[j][e] = p;
                    dp[j][e] = p * (dp[j][e] - cD[qi]);
                }
            }
            // dv += Pᵀ·dout, dk += dSᵀ·q (k dimension: the BM queries)
#pragma unroll
            for (int kk = 0; kk < BM / 16; kk++) {
                unsigned pa[4], sa[4];
                pa[0] = fa_pack(s[2 * kk][0], s[2 * kk][1]);
                pa[1] = fa_pack(s[2 * kk][2], s[2 * kk][3]);
                pa[2] = fa_pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
                pa[3] = fa_pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
                sa[0] = fa_pack(dp[2 * kk][0], dp[2 * kk][1]);
                sa[1] = fa_pack(dp[2 * kk][2], dp[2 * kk][3]);
                sa[2] = fa_pack(dp[2 * kk + 1][0], dp[2 * kk + 1][1]);
                sa[3] = fa_pack(dp[2 * kk + 1][2], dp[2 * kk + 1][3]);
#pragma unroll
                for (int j = 0; j < HS / 16; j++) {
                    unsigned bf[4];
                    fa_ldB<LD>(bf, cO, kk * 16, j * 16, lane);
                    fa_mma(dv[2 * j], pa, bf[0], bf[1]);
                    fa_mma(dv[2 * j + 1], pa, bf[2], bf[3]);
                    fa_ldB<LD>(bf, cQ, kk * 16, j * 16, lane);
                    fa_mma(dk[2 * j], sa, bf[0], bf[1]);
                    fa_mma(dk[2 * j + 1], sa, bf[2], bf[3]);
                }
            }
        }
    }
    // dk (×scale) and dv are added to dqkv's k and v parts (store: to zero,
    // the old values never read), rows past T skipped
    T* dkb = dqkv + (long long)b * Tn * ld + C + h * HS;
    T* dvb = dkb + C;
    const int r0 = k0 + kw + g, r1 = r0 + 8;
#pragma unroll
    for (int j = 0; j < HS / 8; j++) {
        const int c = j * 8 + 2 * t4;
        if (r0 < Tn) {
            unsigned* pk = reinterpret_cast<unsigned*>(dkb + (long long)r0 * ld + c);
            unsigned* pv = reinterpret_cast<unsigned*>(dvb + (long long)r0 * ld + c);
            const float2 ok = fa2_old(pk, store), ov = fa2_old(pv, store);
            *pk = fa_pack(ok.x + dk[j][0] * scale, ok.y + dk[j][1] * scale);
            *pv = fa_pack(ov.x + dv[j][0], ov.y + dv[j][1]);
        }
        if (r1 < Tn) {
            unsigned* pk = reinterpret_cast<unsigned*>(dkb + (long long)r1 * ld + c);
            unsigned* pv = reinterpret_cast<unsigned*>(dvb + (long long)r1 * ld + c);
            const float2 ok = fa2_old(pk, store), ov = fa2_old(pv, store);
            *pk = fa_pack(ok.x + dk[j][2] * scale, ok.y + dk[j][3] * scale);
            *pv = fa_pack(ov.x + dv[j][2], ov.y + dv[j][3]);
        }
    }
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
    const int g = lane >> 2, t4 = lane & 3;
    const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
    const int qt = gridDim.y - 1 - blockIdx.y; // the longest tiles first
    const long long ld = 3LL * C;
    const T* q = qkv + (long long)b * Tn * ld + h * HS;
    const T* k = q + C;
    const T* go = dout + (long long)b * Tn * C + h * HS;
    const int q0 = qt * FA2_BM + warp * 16; // this warp's first query row
    const float sl2 = scale * FA_LOG2E;
    const int kend = min(qt * FA2_BM + FA2_BM, Tn);
    const int nkt = (kend + BC - 1) / BC;
    const T* gk = k + (long long)(threadIdx.x / (HS / 8)) * ld + (threadIdx.x % (HS / 8)) * 8; // this thread's chunk
    const T* gv = gk + C;

    fa2_tile<BC, HS, LD>(sK[0], gk, ld, 0, Tn);
    fa2_tile<BC, HS, LD>(sV[0], gv, ld, 0, Tn);
    fa2_commit();

    unsigned qf[HS / 16][4], of[HS / 16][4];
#pragma unroll
    for (int kk = 0; kk < HS / 16; kk++) {
        qf[kk][0] = fa_ldg32(q, ld, q0 + g, kk * 16 + 2 * t4, Tn);
        qf[kk][1] = fa_ldg32(q, ld, q0 + g + 8, kk * 16 + 2 * t4, Tn);
        qf[kk][2] = fa_ldg32(q, ld, q0 + g, kk * 16 + 8 + 2 * t4, Tn);
        qf[kk][3] = fa_ldg32(q, ld, q0 + g + 8, kk * 16 + 8 + 2 * t4, Tn);
        of[kk][0] = fa_ldg32(go, C, q0 + g, kk * 16 + 2 * t4, Tn);
        of[kk][1] = fa_ldg32(go, C, q0 + g + 8, kk * 16 + 2 * t4, Tn);
        of[kk][2] = fa_ldg32(go, C, q0 + g, kk * 16 + 8 + 2 * t4, Tn);
        of[kk][3] = fa_ldg32(go, C, q0 + g + 8, kk * 16 + 8 + 2 * t4, Tn);
    }
    // rows past T: lse and dd 0 (their q and dout are 0: dS = 0, never written)
    const float* lb = lse + (long long)bh * Tn;
    const float* db = dd + (long long)bh * Tn;
    const float L0 = q0 + g < Tn ? lb[q0 + g] * FA_LOG2E : 0.0f, L1 = q0 + g + 8 < Tn ? lb[q0 + g + 8] * FA_LOG2E : 0.0f;
    const float D0 = q0 + g < Tn ? db[q0 + g] : 0.0f, D1 = q0 + g + 8 < Tn ? db[q0 + g + 8] : 0.0f;
    float dq[HS / 8][4];
#pragma unroll
    for (int j = 0; j < HS / 8; j++) dq[j][0] = dq[j][1] = dq[j][2] = dq[j][3] = 0.0f;

    for (int kt = 0; kt < nkt; kt++) {
        const int k0 = kt * BC, st = kt & 1;
        if (kt + 1 < nkt) { // the next tile into the other buffer (freed at the end of kt-1)
            fa2_tile<BC, HS, LD>(sK[st ^ 1], gk, ld, k0 + BC, Tn);
            fa2_tile<BC, HS, LD>(sV[st ^ 1], gv, ld, k0 + BC, Tn);
        }
        fa2_commit();
        fa2_wait<1>();
        __syncthreads();
        if (k0 <= q0 + 15) { // warp-uniform: tiles wholly above this warp's rows add nothing
            const unsigned short* cK = sK[st];
            const unsigned short* cV = sV[st];
            float s[BC / 8][4], dp[BC / 8][4];
#pragma unroll
            for (int j = 0; j < BC / 8; j++) {
                s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
                dp[j][0] = dp[j][1] = dp[j][2] = dp[j][3] = 0.0f;
            }
#pragma unroll
            for (int kk = 0; kk < HS / 16; kk++) {
#pragma unroll
                for (int j = 0; j < BC / 16; j++) {
                    unsigned bf[4];
                    fa_ldBt<LD>(bf, cK, j * 16, kk * 16, lane);
                    fa_mma(s[2 * j], qf[kk], bf[0], bf[1]);
                    fa_mma(s[2 * j + 1], qf[kk], bf[2], bf[3]);
                    fa_ldBt<LD>(bf, cV, j * 16, kk * 16, lane);
                    fa_mma(dp[2 * j], of[kk], bf[0], bf[1]);
                    fa_mma(dp[2 * j + 1], of[kk], bf[2], bf[3]);
                }
            }
            // key k0 + j·8 + 2·t4 + (e&1) is masked when it passes its row
            // (q0 + g, or q0 + g + 8 for e >= 2) or T - 1: offsets past lim
            const bool mask = k0 + BC - 1 > q0 || k0 + BC > Tn;
            const int lim0 = min(q0 + g, Tn - 1) - k0 - 2 * t4;
            const int lim1 = min(q0 + g + 8, Tn - 1) - k0 - 2 * t4;
#pragma unroll
            for (int j = 0; j < BC / 8; j++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float p = exp2f(s[j][e] * sl2 - ((e >> 1) ? L1 : L0));
                    if (mask && j * 8 + (e & 1) > ((e >> 1) ? lim1 : lim0)) p = 0.0f;
                    dp[j][e] = p * (dp[j][e] - ((e >> 1) ? D1 : D0));
                }
            }
            // dq += dS·k: the k dimension is the BC keys, 16 per step
#pragma unroll
            for (int kk = 0; kk < BC / 16; kk++) {
                unsigned sa[4];
                sa[0] = fa_pack(dp[2 * kk][0], dp[2 * kk][1]);
                sa[1] = fa_pack(dp[2 * kk][2], dp[2 * kk][3]);
                sa[2] = fa_pack(dp[2 * kk + 1][0], dp[2 * kk + 1][1]);
                sa[3] = fa_pack(dp[2 * kk + 1][2], dp[2 * kk + 1][3]);
#pragma unroll
                for (int j = 0; j < HS / 16; j++) {
                    unsigned bf[4];
                    fa_ldB<LD>(bf, cK, kk * 16, j * 16, lane);
                    fa_mma(dq[2 * j], sa, bf[0], bf[1]);
                    fa_mma(dq[2 * j + 1], sa, bf[2], bf[3]);
                }
            }
        }
        __syncthreads(); // buffer st is free for tile kt+2
    }
    T* dqb = dqkv + (long long)b * Tn * ld + h * HS;
    const int r0 = q0 + g, r1 = r0 + 8;
#pragma unroll
    for (int j = 0; j < HS / 8; j++) {
        const int c = j * 8 + 2 * t4;
        if (r0 < Tn) {
            unsigned* p = reinterpret_cast<unsigned*>(dqb + (long long)r0 * ld + c);
            const float2 o = fa2_old(p, store);
            *p = fa_pack(o.x + dq[j][0] * scale, o.y + dq[j][1] * scale);
        }
        if (r1 < Tn) {
            unsigned* p = reinterpret_cast<unsigned*>(dqb + (long long)r1 * ld + c);
            const float2 o = fa2_old(p, store);
            *p = fa_pack(o.x + dq[j][2] * scale, o.y + dq[j][3] * scale);
        }
    }
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
