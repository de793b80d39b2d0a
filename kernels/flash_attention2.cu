// flash_attention2.cu: the second variant of the flash-attention forward
// (FlashAttention-2 scheme, sm_80+), beside flash_attention.cu's, chosen by
// pkg/device/gpu (Device flash variant 2, env DRUTO_FLASH=2). Same layouts,
// arguments and results as flash_fwd_hsN (see flash_attention.cu); the
// backward of variant 2 is flash_attention.cu's.
//
// druto:kernel flash_fwd2_hs32 flash_fwd2_hs64 flash_fwd2_hs128
// druto:dtypes bf16 f16
// druto:arch 80
//
// flash_fwd2_hsN (grid (ceil(T/128), B·NH), 256 threads): eight warps each
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
//   - q tiles run in reverse order (blockIdx.x 0 is the last, longest tile)
//     so that the long diagonal-heavy CTAs start first;
//   - __launch_bounds__(256, 2) at hs 32/64: two CTAs (16 warps) per SM.

#include "common.cuh"
#include "flash_common.cuh"

// Block sizes (threads), read by the launchers too (kernels/blocks.go).
// druto:block FA2_BLOCK flash_fwd2_hs32 flash_fwd2_hs64 flash_fwd2_hs128
#define FA2_BLOCK 256

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

// out (B,T,C) T, lse (B,NH,T) F32, qkv (B,T,3C) T; grid (ceil(T/128), B·NH), 256 threads
template <int HS, int BC>
__device__ __forceinline__ void flash_fwd2(T* __restrict__ out, float* __restrict__ lse, const T* __restrict__ qkv,
                                           int Tn, int C, int NH, float scale) {
    const int LD = HS + 8;
    __shared__ __align__(16) unsigned short sK[2][BC * LD];
    __shared__ __align__(16) unsigned short sV[2][BC * LD];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t4 = lane & 3;
    const int qt = gridDim.x - 1 - blockIdx.x; // the longest tiles first
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
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
