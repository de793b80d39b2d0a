// flash_attention.cu: causal multi-head attention without the T×T matrix
// (FlashAttention-2 scheme) on tensor cores, for pkg/device/gpu/attention.go.
//
// druto:kernel flash_fwd_hs32 flash_fwd_hs64 flash_fwd_hs128
// druto:kernel flash_bwd_hs32 flash_bwd_hs64 flash_bwd_hs128
// druto:kernel flash_bwd_dot flash_bwd_dq
// druto:dtypes bf16 f16
// druto:arch bf16:80 f16:75
//
// Layouts (hs = HS, the head size; C = NH·hs):
//   qkv (B,T,3C) T: q of head h at column h·hs, k at C + h·hs, v at 2C + h·hs,
//     row stride 3C, read in place;
//   out, dout (B,T,C) T: head h at column h·hs;
//   lse, dd (B,NH,T) F32: per query row, lse = ln Σ_j exp(scale·q·k_j) over
//     j <= t (natural log), dd = Σ_d dout·out;
//   dqacc (B,T,C) F32: dq accumulated with atomicAdd (zeroed by the caller);
//   dqkv (B,T,3C) T: the gradients are ADDED to it (dq by flash_bwd_dq).
//
// Kernels:
//   flash_fwd_hsN (grid (ceil(T/64), B·NH), 128 threads): out and lse. Four
//     warps each own 16 query rows of a 64-row tile; K and V tiles of 64 keys
//     are staged in shared memory (zero-filled past T); S = q·kᵀ and o += p·v
//     are mma.sync m16n8k16 (16-bit inputs, fp32 accumulators); the online
//     softmax runs in fp32 in the log2 domain (scores times scale·log2e, exp2f).
//     Key tiles run from 0 to the query tile's diagonal tile: the ones above
//     it are never visited, only the diagonal tile is masked.
//   flash_bwd_dot (one warp per (b,h,t) row): dd = rowsum(dout∘out).
//   flash_bwd_hsN (grid (ceil(T/64), B·NH), 128 threads): one CTA per tile of
//     64 keys; each warp owns 16 keys and keeps their dk, dv in registers
//     while the CTA walks query tiles of BR rows from the diagonal down:
//     Sᵀ = k·qᵀ, Pᵀ = exp2(Sᵀ·scale·log2e - lse·log2e), dPᵀ = v·doutᵀ,
//     dSᵀ = Pᵀ∘(dPᵀ - dd), dv += Pᵀ·dout, dk += dSᵀ·q; dS goes through shared
//     memory (16-bit) for dq += dS·k, added to dqacc with fp32 atomics.
//   flash_bwd_dq (grid-stride over B·T·C): dqkv's q part += dqacc.
// Fragments: A (16×16, row-major) and B (16×8, "col") operands are loaded
// with ldmatrix (x4; .trans where the shared tile is stored k-major the
// other way round), except q (forward) and v (backward) A fragments, which
// are read once from global memory with 32-bit loads.
//
// Requirements the launcher checks: hs in {32,64,128}, qkv/out/dout/dqkv
// 16-byte aligned, C a multiple of 8 (true for C = NH·hs), B·NH <= 65535.
// bf16 mma.m16n8k16 needs sm_80, hence the druto:arch line: on older GPUs
// the bf16 kernels are unavailable and bf16 attention uses the cuBLAS path.
// f16 builds for sm_75 (the T4) too: there each 16-deep step is two
// mma.m16n8k8, whose A/B fragments are exactly the halves of m16n8k16's.

#include "common.cuh"
#include "flash_common.cuh"

// Block sizes (threads), read by the launchers too (kernels/blocks.go).
// druto:block FA_BLOCK flash_fwd_hs32 flash_fwd_hs64 flash_fwd_hs128 flash_bwd_hs32 flash_bwd_hs64 flash_bwd_hs128
#define FA_BLOCK 128
// druto:block FA_ROW_BLOCK flash_bwd_dot
#define FA_ROW_BLOCK 256
// druto:block FA_EW_BLOCK flash_bwd_dq
#define FA_EW_BLOCK 256

#define FA_BC 64 // keys per tile (both kernels) and query rows per forward tile

// ---- forward --------------------------------------------------------------

// out (B,T,C) T, lse (B,NH,T) F32, qkv (B,T,3C) T; grid (ceil(T/64), B·NH)
template <int HS>
__device__ __forceinline__ void flash_fwd(T* __restrict__ out, float* __restrict__ lse, const T* __restrict__ qkv,
                                          int Tn, int C, int NH, float scale) {
    const int LD = HS + 8;
    __shared__ __align__(16) unsigned short sK[FA_BC * LD];
    __shared__ __align__(16) unsigned short sV[FA_BC * LD];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int qt = gridDim.x - 1 - blockIdx.x; // the longest tiles first
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    const long long ld = 3LL * C;
    const T* q = qkv + (long long)b * Tn * ld + h * HS;
    const T* k = q + C;
    const T* v = q + 2 * C;
    const int q0 = qt * FA_BC + warp * 16; // this warp's first query row
    const float sl2 = scale * FA_LOG2E;

    unsigned qf[HS / 16][4];
    fa_ldgA<HS>(qf, q, ld, q0, Tn, lane);
    float o[HS / 8][4];
    fa_zero<HS>(o);
    float m0 = FA_NEG_INF, m1 = FA_NEG_INF; // running max (log2 domain) of rows g, g+8
    float l0 = 0.0f, l1 = 0.0f;             // this thread's part of the running sums

    for (int kt = 0; kt <= qt; kt++) {
        const int k0 = kt * FA_BC;
        __syncthreads(); // the previous tile's readers are done
        fa_tile<FA_BC, HS, LD>(sK, k, ld, k0, Tn);
        fa_tile<FA_BC, HS, LD>(sV, v, ld, k0, Tn);
        __syncthreads();
        // only the diagonal tile is masked (key > query, key >= T)
        const FaMask mk = fa_mask(kt == qt, q0, k0, Tn, lane);
        fa_fwd_tile<HS, FA_BC, LD>(o, m0, m1, l0, l1, qf, sK, sV, sl2, mk, lane);
    }
    fa_fwd_out<HS>(out + (long long)b * Tn * C + h * HS, lse + (long long)bh * Tn, o, m0, m1, l0, l1, q0, Tn, C, lane);
}

extern "C" __global__ void __launch_bounds__(FA_BLOCK) flash_fwd_hs32(T* __restrict__ out, float* __restrict__ lse, const T* __restrict__ qkv, int Tn, int C, int NH, float scale) {
    flash_fwd<32>(out, lse, qkv, Tn, C, NH, scale);
}
extern "C" __global__ void __launch_bounds__(FA_BLOCK) flash_fwd_hs64(T* __restrict__ out, float* __restrict__ lse, const T* __restrict__ qkv, int Tn, int C, int NH, float scale) {
    flash_fwd<64>(out, lse, qkv, Tn, C, NH, scale);
}
extern "C" __global__ void __launch_bounds__(FA_BLOCK) flash_fwd_hs128(T* __restrict__ out, float* __restrict__ lse, const T* __restrict__ qkv, int Tn, int C, int NH, float scale) {
    flash_fwd<128>(out, lse, qkv, Tn, C, NH, scale);
}

// ---- backward ---------------------------------------------------------------

// dd (B,NH,T) F32 = Σ_d dout·out over each head's hs columns; one warp per
// (b,h,t), rows = B·NH·T, 8 warps per block.
// dd (B,NH,T) F32, dout (B,T,C) T, out (B,T,C) T
extern "C" __global__ void flash_bwd_dot(float* __restrict__ dd, const T* __restrict__ dout, const T* __restrict__ out,
                                         int rows, int Tn, int C, int NH, int hs) {
    int lane = threadIdx.x & 31;
    int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= rows) return;
    int t = r % Tn, bh = r / Tn, b = bh / NH, h = bh % NH;
    long long off = ((long long)b * Tn + t) * C + (long long)h * hs;
    float acc = 0.0f;
    for (int d = lane; d < hs; d += 32) acc += load(dout + off, d) * load(out + off, d);
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) dd[r] = acc;
}

// dqkv (B,T,3C) T: the q part += dqacc (B,T,C) F32, n = B·T·C
extern "C" __global__ void flash_bwd_dq(T* __restrict__ dqkv, const float* __restrict__ dqacc, long long n, int C) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        long long row = i / C, c = i % C;
        T* p = dqkv + row * 3 * C + c;
        store(p, 0, load(p, 0) + dqacc[i]);
    }
}

// dqkv (B,T,3C) T (k and v parts +=), dqacc (B,T,C) F32 (+= by atomics),
// qkv (B,T,3C), dout (B,T,C), lse (B,NH,T) F32, dd (B,NH,T) F32;
// grid (ceil(T/64), B·NH), 128 threads. BR query rows per step.
template <int HS, int BR>
__device__ __forceinline__ void flash_bwd(T* __restrict__ dqkv, float* __restrict__ dqacc, const T* __restrict__ qkv,
                                          const T* __restrict__ dout, const float* __restrict__ lse,
                                          const float* __restrict__ dd, int Tn, int C, int NH, float scale) {
    const int LD = HS + 8;       // row stride of the q, dout and k tiles
    const int LS = FA_BC + 8;    // row stride of the dS tile (BR query rows × 64 keys)
    const int NG = BR / 16;      // dq: query row groups of 16
    const int NS = 4 / NG;       // dq: column splits (4 warps = NG × NS)
    const int DW = HS / NS;      // dq: columns per warp
    __shared__ __align__(16) unsigned short sK[FA_BC * LD];
    __shared__ __align__(16) unsigned short sQ[BR * LD];
    __shared__ __align__(16) unsigned short sO[BR * LD]; // dout
    __shared__ __align__(16) unsigned short sS[BR * LS]; // dS, query-major
    __shared__ float sL[BR], sD[BR];                     // lse·log2e and dd of the query tile
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t4 = lane & 3;
    const int kt = blockIdx.x, bh = blockIdx.y, b = bh / NH, h = bh % NH;
    const int k0 = kt * FA_BC;
    const int kw = warp * 16; // this warp's keys within the tile
    const long long ld = 3LL * C;
    const T* q = qkv + (long long)b * Tn * ld + h * HS;
    const T* k = q + C;
    const T* v = q + 2 * C;
    const T* go = dout + (long long)b * Tn * C + h * HS;
    const float* lb = lse + (long long)bh * Tn;
    const float* db = dd + (long long)bh * Tn;
    const float sl2 = scale * FA_LOG2E;

    fa_tile<FA_BC, HS, LD>(sK, k, ld, k0, Tn);
    unsigned vf[HS / 16][4]; // v of this warp's 16 keys, A fragments
    fa_ldgA<HS>(vf, v, ld, k0 + kw, Tn, lane);
    float dk[HS / 8][4], dv[HS / 8][4];
    fa_zero<HS>(dk);
    fa_zero<HS>(dv);
    const int nq = (Tn + BR - 1) / BR;
    for (int qt = k0 / BR; qt < nq; qt++) {
        const int q0 = qt * BR;
        __syncthreads(); // the previous step's readers of sQ, sO, sS, sL, sD are done
        fa_tile<BR, HS, LD>(sQ, q, ld, q0, Tn);
        fa_tile<BR, HS, LD>(sO, go, C, q0, Tn);
        for (int i = threadIdx.x; i < BR; i += blockDim.x) {
            bool in = q0 + i < Tn;
            sL[i] = in ? lb[q0 + i] * FA_LOG2E : 0.0f;
            sD[i] = in ? db[q0 + i] : 0.0f;
        }
        __syncthreads();

        // Sᵀ = k·qᵀ and dPᵀ = v·doutᵀ: 16 keys × BR queries per warp
        float s[BR / 8][4], dp[BR / 8][4];
        fa_zero<BR>(s);
        fa_zero<BR>(dp);
#pragma unroll
        for (int kk = 0; kk < HS / 16; kk++) {
            unsigned ka[4];
            fa_ldA<LD>(ka, sK, kw, kk * 16, lane);
            fa_mma_bt2<BR, LD>(s, ka, sQ, dp, vf[kk], sO, kk * 16, lane);
        }
        // Pᵀ, then dSᵀ = Pᵀ∘(dPᵀ - dd) in place of dp
        const bool edge = q0 < k0 + FA_BC || q0 + BR > Tn || k0 + FA_BC > Tn;
        fa_dsT<BR, false>(s, dp, sL, sD, sl2, edge, k0 + kw + g, q0, Tn, lane);
        // dv += Pᵀ·dout and dk += dSᵀ·q (k dimension: the BR queries)
        fa_dkv<BR, HS, LD>(dk, dv, s, dp, sQ, sO, lane);
        // dS to shared memory, query-major: sS[query][key]
#pragma unroll
        for (int j = 0; j < BR / 8; j++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int qi = j * 8 + 2 * t4 + (e & 1), ki = kw + g + (e >> 1) * 8;
                unsigned pk = fa_pack(dp[j][e], 0.0f);
                sS[qi * LS + ki] = (unsigned short)(pk & 0xffffu);
            }
        }
        __syncthreads();
        // dq (BR × HS) += dS (BR × 64 keys) · k (64 × HS): warp = (row group, column split)
        {
            const int rg = warp % NG, cs = warp / NG;
            float dq[DW / 8][4];
            fa_zero<DW>(dq);
#pragma unroll
            for (int kk = 0; kk < FA_BC / 16; kk++) {
                unsigned sa[4];
                fa_ldA<LS>(sa, sS, rg * 16, kk * 16, lane);
                fa_mma_b<DW, LD>(dq, sa, sK, kk * 16, cs * DW, lane);
            }
            const int r0 = q0 + rg * 16 + g, r1 = r0 + 8;
            float* qa = dqacc + (long long)b * Tn * C + h * HS + cs * DW;
#pragma unroll
            for (int j = 0; j < DW / 8; j++) {
                int c = j * 8 + 2 * t4;
                if (r0 < Tn) {
                    atomicAdd(qa + (long long)r0 * C + c, dq[j][0] * scale);
                    atomicAdd(qa + (long long)r0 * C + c + 1, dq[j][1] * scale);
                }
                if (r1 < Tn) {
                    atomicAdd(qa + (long long)r1 * C + c, dq[j][2] * scale);
                    atomicAdd(qa + (long long)r1 * C + c + 1, dq[j][3] * scale);
                }
            }
        }
    }
    // dk (×scale) and dv are added to dqkv's k and v parts, rows past T skipped
    T* dkb = dqkv + (long long)b * Tn * ld + C + h * HS;
    fa_grad_out<HS, true>(dkb, dk, scale, dkb + C, dv, 1.0f, ld, k0 + kw, Tn, 0, lane);
}

#define FA_BWD_ARGS                                                                                            \
    T *__restrict__ dqkv, float *__restrict__ dqacc, const T *__restrict__ qkv, const T *__restrict__ dout,    \
        const float *__restrict__ lse, const float *__restrict__ dd, int Tn, int C, int NH, float scale
extern "C" __global__ void __launch_bounds__(FA_BLOCK) flash_bwd_hs32(FA_BWD_ARGS) {
    flash_bwd<32, 64>(dqkv, dqacc, qkv, dout, lse, dd, Tn, C, NH, scale);
}
extern "C" __global__ void __launch_bounds__(FA_BLOCK) flash_bwd_hs64(FA_BWD_ARGS) {
    flash_bwd<64, 64>(dqkv, dqacc, qkv, dout, lse, dd, Tn, C, NH, scale);
}
extern "C" __global__ void __launch_bounds__(FA_BLOCK) flash_bwd_hs128(FA_BWD_ARGS) {
    flash_bwd<128, 32>(dqkv, dqacc, qkv, dout, lse, dd, Tn, C, NH, scale);
}
