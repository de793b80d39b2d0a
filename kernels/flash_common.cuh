// flash_common.cuh: the helpers of the flash-attention kernels
// (flash_attention.cu and flash_attention2.cu): mma.sync m16n8k16 (two
// m16n8k8 for f16 on sm_75), ldmatrix fragment loads, the 16-bit packs and
// the global-to-shared tile copy; and the warp tile code both variants
// share: the products of a 16-row tile, the causal mask, the forward's
// online-softmax tile and its end, the backward's recompute of Pᵀ and dSᵀ
// with the dk, dv products, and the gradients' write-back. Include it
// after common.cuh (it uses T, DTYPE and the bf16/f16 conversions from
// there).
#ifndef DRUTO_FLASH_COMMON_CUH
#define DRUTO_FLASH_COMMON_CUH
#define FA_NEG_INF __int_as_float(0xff800000)
#define FA_LOG2E 1.4426950408889634f

// FA_K16: one mma.m16n8k16 per 16-deep step (sm_80+); else (f16 on
// sm_75) two mma.m16n8k8, whose fragments are the two halves of k16's.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define FA_K16 1
#else
#define FA_K16 0
#endif
#if DTYPE == DRUTO_BF16
#if !FA_K16
#error "bf16 flash attention needs sm_80 (mma.m16n8k16.bf16)"
#endif
#define FA_MMA "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
#elif DTYPE == DRUTO_F16
#define FA_MMA "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
#define FA_MMA8 "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32"
#else
#error "flash_attention.cu is built for bf16 and f16 only"
#endif

#ifdef DRUTO_EMU
// The host emulator (a development tool, not part of druto) implements the
// PTX instructions below from their specification.
void druto_emu_mma(float* c, const unsigned* a, unsigned b0, unsigned b1);
void druto_emu_ldm4(unsigned* r, const void* p, bool trans);
void druto_emu_mma8(float* c, unsigned a0, unsigned a1, unsigned b0); // DRUTO_EMU_K8: the sm_75 form
#endif

// fa_pack rounds (lo, hi) to T and packs them, lo in the low half (the
// lower column index, as mma operands want).
__device__ __forceinline__ unsigned fa_pack(float lo, float hi) {
    unsigned r;
#if defined(DRUTO_EMU) && DTYPE == DRUTO_BF16
    r = (unsigned)f32_to_bf16_bits(lo) | ((unsigned)f32_to_bf16_bits(hi) << 16);
#elif defined(DRUTO_EMU)
    r = (unsigned)f32_to_f16_bits(lo) | ((unsigned)f32_to_f16_bits(hi) << 16);
#elif DTYPE == DRUTO_BF16
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#elif FA_K16
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
    r = (unsigned)f32_to_f16_bits(lo) | ((unsigned)f32_to_f16_bits(hi) << 16); // no f16x2 cvt before sm_80
#endif
    return r;
}

// fa_unpack widens a packed pair to fp32.
__device__ __forceinline__ float2 fa_unpack(unsigned v) {
#if DTYPE == DRUTO_BF16
    float2 r;
    r.x = __uint_as_float(v << 16);
    r.y = __uint_as_float(v & 0xffff0000u);
#else
    float2 r;
    r.x = f16_bits_to_f32((unsigned short)(v & 0xffffu));
    r.y = f16_bits_to_f32((unsigned short)(v >> 16));
#endif
    return r;
}

// c[4] += a[4] · b[2] (m16n8k16, fp32 accumulators).
__device__ __forceinline__ void fa_mma(float* c, const unsigned* a, unsigned b0, unsigned b1) {
#if defined(DRUTO_EMU) && defined(DRUTO_EMU_K8)
    // k 0..7: A columns 0..7 are a[0] (row g) and a[1] (row g+8), B rows
    // 0..7 are b0; k 8..15: a[2], a[3] and b1.
    druto_emu_mma8(c, a[0], a[1], b0);
    druto_emu_mma8(c, a[2], a[3], b1);
#elif defined(DRUTO_EMU)
    druto_emu_mma(c, a, b0, b1);
#elif FA_K16
    asm volatile(FA_MMA " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    // sm_75 (f16): the k16 step as two m16n8k8, k 0..7 (a[0], a[1], b0)
    // then k 8..15 (a[2], a[3], b1).
    asm volatile(FA_MMA8 " {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b0));
    asm volatile(FA_MMA8 " {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[2]), "r"(a[3]), "r"(b1));
#endif
}

#ifndef DRUTO_EMU
// fa_smem is p's shared-window address (ldmatrix's operand).
__device__ __forceinline__ unsigned fa_smem(const void* p) {
    unsigned r;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
    return r;
}
#endif

__device__ __forceinline__ void fa_ldm4(unsigned* r, const void* p) {
#ifdef DRUTO_EMU
    druto_emu_ldm4(r, p, false);
#else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(fa_smem(p)));
#endif
}

__device__ __forceinline__ void fa_ldm4t(unsigned* r, const void* p) {
#ifdef DRUTO_EMU
    druto_emu_ldm4(r, p, true);
#else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(fa_smem(p)));
#endif
}

// Fragment loads from a shared tile s stored row-major with row stride LD
// elements (LD·2 a multiple of 16 bytes). lane = threadIdx.x & 31.
//
// fa_ldA: the A fragment (16×16) of rows r0.., columns c0..: a[0..3].
template <int LD>
__device__ __forceinline__ void fa_ldA(unsigned* a, const unsigned short* s, int r0, int c0, int lane) {
    fa_ldm4(a, s + (r0 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + c0 + (lane >> 4) * 8);
}

// fa_ldBt: B fragments for two n-tiles when B[k][n] = s[n][k] (s holds n
// rows, k contiguous): n rows n0..n0+15, k columns k0..k0+15. b[0],b[1]
// are n-tile n0's, b[2],b[3] n-tile n0+8's.
template <int LD>
__device__ __forceinline__ void fa_ldBt(unsigned* b, const unsigned short* s, int n0, int k0, int lane) {
    fa_ldm4(b, s + (n0 + (lane & 7) + (lane >> 4) * 8) * LD + k0 + ((lane >> 3) & 1) * 8);
}

// fa_ldB: B fragments for two n-tiles when B[k][n] = s[k][n] (s holds k
// rows, n contiguous): k rows k0..k0+15, n columns n0..n0+15. b[0],b[1]
// are n-tile n0's, b[2],b[3] n-tile n0+8's.
template <int LD>
__device__ __forceinline__ void fa_ldB(unsigned* b, const unsigned short* s, int k0, int n0, int lane) {
    fa_ldm4t(b, s + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + n0 + (lane >> 4) * 8);
}

// fa_tile copies rows [r0, r0+ROWS) × HS columns of a global matrix (row
// stride ld elements) into shared s (row stride LD), zero past row n.
// 16-byte accesses; every thread of the CTA takes part.
template <int ROWS, int HS, int LD>
__device__ __forceinline__ void fa_tile(unsigned short* s, const T* g, long long ld, int r0, int n) {
    const int per = HS / 8; // 16-byte chunks per row
    for (int i = threadIdx.x; i < ROWS * per; i += blockDim.x) {
        int r = i / per, c = (i % per) * 8;
        uint4 v;
        v.x = v.y = v.z = v.w = 0u;
        if (r0 + r < n) v = *reinterpret_cast<const uint4*>(g + (long long)(r0 + r) * ld + c);
        *reinterpret_cast<uint4*>(s + r * LD + c) = v;
    }
}

// fa_ldg32 reads two consecutive elements (4-byte aligned) of a global row,
// 0 when the row is past n.
__device__ __forceinline__ unsigned fa_ldg32(const T* g, long long ld, int r, int c, int n) {
    return r < n ? *reinterpret_cast<const unsigned*>(g + (long long)r * ld + c) : 0u;
}

// ---- warp tiles --------------------------------------------------------------
//
// The tile code both variants run. A warp's fp32 accumulator tile c of 16
// rows × N columns is c[N/8][4]: c[j][e] holds row g + (e>>1)·8, column
// j·8 + 2·t4 + (e&1) (g = lane>>2, t4 = lane&3), as mma leaves it.

// fa_zero sets the accumulator tile c (16 × N) to 0.
template <int N>
__device__ __forceinline__ void fa_zero(float (*c)[4]) {
#pragma unroll
    for (int j = 0; j < N / 8; j++) c[j][0] = c[j][1] = c[j][2] = c[j][3] = 0.0f;
}

// fa_ldgA reads rows r0..r0+15 × HS columns of a global matrix (row
// stride ld elements) as HS/16 A fragments a[kk] (columns kk·16..), with
// 32-bit loads, 0 past row n.
template <int HS>
__device__ __forceinline__ void fa_ldgA(unsigned (*a)[4], const T* m, long long ld, int r0, int n, int lane) {
    const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int kk = 0; kk < HS / 16; kk++) {
        a[kk][0] = fa_ldg32(m, ld, r0 + g, kk * 16 + 2 * t4, n);
        a[kk][1] = fa_ldg32(m, ld, r0 + g + 8, kk * 16 + 2 * t4, n);
        a[kk][2] = fa_ldg32(m, ld, r0 + g, kk * 16 + 8 + 2 * t4, n);
        a[kk][3] = fa_ldg32(m, ld, r0 + g + 8, kk * 16 + 8 + 2 * t4, n);
    }
}

// fa_packA rounds 16 columns of an accumulator tile, c[0] and c[1], to T
// as an A fragment: those columns become the k dimension of the next mma.
__device__ __forceinline__ void fa_packA(unsigned* a, const float (*c)[4]) {
    a[0] = fa_pack(c[0][0], c[0][1]);
    a[1] = fa_pack(c[0][2], c[0][3]);
    a[2] = fa_pack(c[1][0], c[1][1]);
    a[3] = fa_pack(c[1][2], c[1][3]);
}

// fa_mma16: c[0], c[1] (16 × 16) += a · B, B the 16 × 16 tile of s at
// rows r0.., columns c0..: with NK, B[k][n] = s[r0 + n][c0 + k] (s holds
// the n rows, k contiguous: fa_ldBt), else B[k][n] = s[r0 + k][c0 + n]
// (s holds the k rows, n contiguous: fa_ldB).
template <int LD, bool NK>
__device__ __forceinline__ void fa_mma16(float (*c)[4], const unsigned* a, const unsigned short* s, int r0, int c0,
                                         int lane) {
    unsigned bf[4];
    if (NK)
        fa_ldBt<LD>(bf, s, r0, c0, lane);
    else
        fa_ldB<LD>(bf, s, r0, c0, lane);
    fa_mma(c[0], a, bf[0], bf[1]);
    fa_mma(c[1], a, bf[2], bf[3]);
}

// fa_mma_bt: c (16 × N) += a · B over one 16-deep step k0, B[k][n] =
// s[n][k0 + k] for the N rows of s.
template <int N, int LD>
__device__ __forceinline__ void fa_mma_bt(float (*c)[4], const unsigned* a, const unsigned short* s, int k0, int lane) {
#pragma unroll
    for (int j = 0; j < N / 16; j++) fa_mma16<LD, true>(c + 2 * j, a, s, j * 16, k0, lane);
}

// fa_mma_bt2 is fa_mma_bt for two products, c += a · (s rows)ᵀ and
// c2 += a2 · (s2 rows)ᵀ, their mma interleaved.
template <int N, int LD>
__device__ __forceinline__ void fa_mma_bt2(float (*c)[4], const unsigned* a, const unsigned short* s, float (*c2)[4],
                                           const unsigned* a2, const unsigned short* s2, int k0, int lane) {
#pragma unroll
    for (int j = 0; j < N / 16; j++) {
        fa_mma16<LD, true>(c + 2 * j, a, s, j * 16, k0, lane);
        fa_mma16<LD, true>(c2 + 2 * j, a2, s2, j * 16, k0, lane);
    }
}

// fa_mma_b: c (16 × N) += a · B over one 16-deep step, B[k][n] =
// s[k0 + k][n0 + n] for n < N.
template <int N, int LD>
__device__ __forceinline__ void fa_mma_b(float (*c)[4], const unsigned* a, const unsigned short* s, int k0, int n0,
                                         int lane) {
#pragma unroll
    for (int j = 0; j < N / 16; j++) fa_mma16<LD, false>(c + 2 * j, a, s, k0, n0 + j * 16, lane);
}

// fa_pv: c (16 × N) += p (16 × K, an accumulator tile rounded to T) · s
// (K rows × N columns): o += p·v in the forward, dq += dS·k in the
// backward.
template <int K, int N, int LD>
__device__ __forceinline__ void fa_pv(float (*c)[4], const float (*p)[4], const unsigned short* s, int lane) {
#pragma unroll
    for (int kk = 0; kk < K / 16; kk++) {
        unsigned pa[4];
        fa_packA(pa, p + 2 * kk);
        fa_mma_b<N, LD>(c, pa, s, kk * 16, 0, lane);
    }
}

// FaMask is the causal mask of a tile of scores S = q·kᵀ in accumulator
// order (query rows, key columns): key k0 + j·8 + 2·t4 + (e&1) is masked
// when it passes its row (q0 + g, or q0 + g + 8 for e >= 2) or T - 1,
// that is when its offset j·8 + (e&1) passes lim0 (lim1). on false: no
// key of the tile is masked.
struct FaMask {
    bool on;
    int lim0, lim1;
};

__device__ __forceinline__ FaMask fa_mask(bool on, int q0, int k0, int Tn, int lane) {
    const int g = lane >> 2, t4 = lane & 3;
    FaMask mk;
    mk.on = on;
    mk.lim0 = min(q0 + g, Tn - 1) - k0 - 2 * t4;
    mk.lim1 = min(q0 + g + 8, Tn - 1) - k0 - 2 * t4;
    return mk;
}

__device__ __forceinline__ bool fa_masked(const FaMask& mk, int j, int e) {
    return mk.on && j * 8 + (e & 1) > ((e >> 1) ? mk.lim1 : mk.lim0);
}

// fa_softmax is one key tile of the forward's online softmax (fp32, log2
// domain) for a warp's 16 query rows: the scores s (16 × BC, S = q·kᵀ)
// are scaled by sl2 = scale·log2e and masked (-inf), the running maxima
// m0, m1 of rows g and g+8 move to the tile's, the output tile o
// (16 × HS) and this thread's parts l0, l1 of the running sums are
// rescaled, and s becomes p = exp2(s - m), added to l0, l1.
template <int BC, int HS>
__device__ __forceinline__ void fa_softmax(float (*s)[4], float (*o)[4], float& m0, float& m1, float& l0, float& l1,
                                           float sl2, const FaMask& mk) {
    float mx0 = m0, mx1 = m1;
#pragma unroll
    for (int j = 0; j < BC / 8; j++) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            float x = s[j][e] * sl2;
            if (fa_masked(mk, j, e)) x = FA_NEG_INF;
            s[j][e] = x;
        }
        mx0 = fmaxf(mx0, fmaxf(s[j][0], s[j][1]));
        mx1 = fmaxf(mx1, fmaxf(s[j][2], s[j][3]));
    }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    // key 0 is in tile 0 and valid for every row, so mx is finite from the
    // first tile on; the guard keeps exp2f(-inf - -inf) out anyway.
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
}

// fa_fwd_tile is one key tile of the forward for a warp's 16 query rows:
// S = q·kᵀ (qf: q's A fragments; sK: BC keys × HS, row stride LD), the
// online softmax (fa_softmax) and o += p·v (sV: BC keys × HS).
template <int HS, int BC, int LD>
__device__ __forceinline__ void fa_fwd_tile(float (*o)[4], float& m0, float& m1, float& l0, float& l1,
                                            const unsigned (*qf)[4], const unsigned short* sK,
                                            const unsigned short* sV, float sl2, const FaMask& mk, int lane) {
    float s[BC / 8][4];
    fa_zero<BC>(s);
#pragma unroll
    for (int kk = 0; kk < HS / 16; kk++) fa_mma_bt<BC, LD>(s, qf[kk], sK, kk * 16, lane);
    fa_softmax<BC, HS>(s, o, m0, m1, l0, l1, sl2, mk);
    fa_pv<BC, HS, LD>(o, s, sV, lane); // the k dimension is the BC keys, 16 per step
}

// fa_fwd_out ends the forward of a warp's 16 query rows q0..: out rows
// (ob, row stride C) = o / l, lse (lb) = (m + log2 l)·ln 2, rows at or
// past T skipped.
template <int HS>
__device__ __forceinline__ void fa_fwd_out(T* ob, float* lb, float (*o)[4], float m0, float m1, float l0, float l1,
                                           int q0, int Tn, int C, int lane) {
    const int g = lane >> 2, t4 = lane & 3;
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const float i0 = 1.0f / l0, i1 = 1.0f / l1;
    const int r0 = q0 + g, r1 = q0 + g + 8;
#pragma unroll
    for (int j = 0; j < HS / 8; j++) {
        int c = j * 8 + 2 * t4;
        if (r0 < Tn) *reinterpret_cast<unsigned*>(ob + (long long)r0 * C + c) = fa_pack(o[j][0] * i0, o[j][1] * i0);
        if (r1 < Tn) *reinterpret_cast<unsigned*>(ob + (long long)r1 * C + c) = fa_pack(o[j][2] * i1, o[j][3] * i1);
    }
    if (t4 == 0) {
        if (r0 < Tn) lb[r0] = (m0 + log2f(l0)) * 0.69314718055994531f;
        if (r1 < Tn) lb[r1] = (m1 + log2f(l1)) * 0.69314718055994531f;
    }
}

// fa_dsT recomputes, in the backward over a warp's 16 keys × BM queries
// (transposed tiles: keys are the rows), Pᵀ = exp2(Sᵀ·sl2 − L) in place
// of s (Sᵀ = k·qᵀ) and dSᵀ = Pᵀ∘(dPᵀ − D) in place of dp (dPᵀ =
// v·doutᵀ). L and D are the query tile's lse·log2e (LN: lse in natural
// log, scaled here) and dd. key0 is the key of row g, q0 the tile's first
// query; where edge is set, P is 0 for key > query, key >= T or query >= T.
template <int BM, bool LN>
__device__ __forceinline__ void fa_dsT(float (*s)[4], float (*dp)[4], const float* L, const float* D, float sl2,
                                       bool edge, int key0, int q0, int Tn, int lane) {
    const int t4 = lane & 3;
#pragma unroll
    for (int j = 0; j < BM / 8; j++) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int qi = j * 8 + 2 * t4 + (e & 1);
            float p = exp2f(s[j][e] * sl2 - (LN ? L[qi] * FA_LOG2E : L[qi]));
            if (edge) {
                const int key = key0 + (e >> 1) * 8, row = q0 + qi;
                if (key > row || key >= Tn || row >= Tn) p = 0.0f;
            }
            s[j][e] = p;
            dp[j][e] = p * (dp[j][e] - D[qi]);
        }
    }
}

// fa_dkv: dv += Pᵀ·dout and dk += dSᵀ·q for a warp's 16 keys (k
// dimension: the BM queries; sO, sQ: BM rows × HS).
template <int BM, int HS, int LD>
__device__ __forceinline__ void fa_dkv(float (*dk)[4], float (*dv)[4], const float (*p)[4], const float (*ds)[4],
                                       const unsigned short* sQ, const unsigned short* sO, int lane) {
#pragma unroll
    for (int kk = 0; kk < BM / 16; kk++) {
        unsigned pa[4], sa[4];
        fa_packA(pa, p + 2 * kk);
        fa_packA(sa, ds + 2 * kk);
#pragma unroll
        for (int j = 0; j < HS / 16; j++) {
            fa_mma16<LD, false>(dv + 2 * j, pa, sO, kk * 16, j * 16, lane);
            fa_mma16<LD, false>(dk + 2 * j, sa, sQ, kk * 16, j * 16, lane);
        }
    }
}

// fa_old returns the two elements at p widened, the gradient a backward
// kernel adds to, or zeros when store is set (the store form,
// AttentionBackwardStore: the old values, NaN included, are never read;
// 0 + x gives the bits the accumulate form gives on a zeroed dqkv).
__device__ __forceinline__ float2 fa_old(const unsigned* p, int store) {
    if (store) {
        float2 z;
        z.x = z.y = 0.0f;
        return z;
    }
    return fa_unpack(*p);
}

// fa_grad_out adds a warp's gradient tile c (16 rows × HS, times mul) to
// rows r0.. of m (row stride ld elements; store: to zero, the old values
// never read), rows at or past T skipped; with TWO, c2 (times mul2) goes
// to m2 in the same pass (dk and dv).
template <int HS, bool TWO>
__device__ __forceinline__ void fa_grad_out(T* m, const float (*c)[4], float mul, T* m2, const float (*c2)[4], float mul2,
                                            long long ld, int r0, int Tn, int store, int lane) {
    const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int j = 0; j < HS / 8; j++) {
        const int col = j * 8 + 2 * t4;
#pragma unroll
        for (int h = 0; h < 2; h++) { // rows r0 + g and r0 + g + 8
            const int r = r0 + g + h * 8;
            if (r < Tn) {
                unsigned* p = reinterpret_cast<unsigned*>(m + (long long)r * ld + col);
                unsigned* p2 = TWO ? reinterpret_cast<unsigned*>(m2 + (long long)r * ld + col) : p;
                const float2 o = fa_old(p, store), o2 = TWO ? fa_old(p2, store) : o;
                *p = fa_pack(o.x + c[j][2 * h] * mul, o.y + c[j][2 * h + 1] * mul);
                if (TWO) *p2 = fa_pack(o2.x + c2[j][2 * h] * mul2, o2.y + c2[j][2 * h + 1] * mul2);
            }
        }
    }
}

#endif // DRUTO_FLASH_COMMON_CUH
