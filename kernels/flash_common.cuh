// flash_common.cuh: the helpers of the flash-attention kernels
// (flash_attention.cu and flash_attention2.cu): mma.sync m16n8k16 (two
// m16n8k8 for f16 on sm_75), ldmatrix fragment loads, the 16-bit packs and
// the global-to-shared tile copy. Include it after common.cuh (it uses T,
// DTYPE and the bf16/f16 conversions from there).
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

#endif // DRUTO_FLASH_COMMON_CUH
