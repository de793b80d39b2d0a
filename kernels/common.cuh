// common.cuh: what every kernel file shares: the storage dtypes and their
// fp32 conversions, 4-wide vector loads and stores, and warp sums.
//
// Each .cu file includes it with `#include "common.cuh"`: nvcc (gen-ptx.sh)
// reads it from this folder, and package kernels pastes it in place of that
// line before NVRTC compiles the source (Variant.Source), so both compile the
// same text. Its sha256 is recorded in every PTX header beside the .cu's, so
// TestPTXUpToDate fails when it changes and the PTX is not regenerated.
//
// Storage types. A file is compiled once per dtype with -DDTYPE=DRUTO_F32,
// DRUTO_BF16 or DRUTO_F16, which sets T, the policy's working type. Tensors
// the precision policy always keeps in fp32 (the residual stream, statistics,
// gradients of parameters, optimizer state) are float* whatever DTYPE is.
// bf16 and f16 are 16-bit patterns in small structs, so the overloads below
// tell the three types apart; no CUDA header is included, so NVRTC and nvcc
// compile the same text. Conversions round to nearest even:
//   bf16 -> f32: exact (the pattern shifted up 16 bits);
//   f32 -> bf16: round to nearest even on bit 16; NaN stays a quiet NaN
//                (as tensor.BF16FromF32);
//   f16 <-> f32: the PTX cvt instructions (cvt.rn.f16.f32), all on sm_75.
//
// Vectors: F4 is 4 consecutive elements widened to fp32; ld4/st4 move them
// with one 16-byte access (float) or one 8-byte access (bf16, f16). They need
// the address aligned to that size: launchers check the base pointers and
// pass a vec flag; kernels fall back to scalar code without it.

#ifndef DRUTO_COMMON_CUH
#define DRUTO_COMMON_CUH

#define DRUTO_F32 1
#define DRUTO_BF16 2
#define DRUTO_F16 3

#ifndef DTYPE
#error "compile with -DDTYPE=DRUTO_F32, -DDTYPE=DRUTO_BF16 or -DDTYPE=DRUTO_F16"
#endif

// bf16 is a bfloat16 bit pattern.
struct bf16 {
    unsigned short bits;
};

// f16 is an IEEE half bit pattern.
struct f16 {
    unsigned short bits;
};

#if DTYPE == DRUTO_F32
typedef float T;
#elif DTYPE == DRUTO_BF16
typedef bf16 T;
#elif DTYPE == DRUTO_F16
typedef f16 T;
#else
#error "DTYPE must be DRUTO_F32, DRUTO_BF16 or DRUTO_F16"
#endif

// ---- scalar conversions -------------------------------------------------

__device__ __forceinline__ float bf16_bits_to_f32(unsigned int h) { return __uint_as_float(h << 16); }

__device__ __forceinline__ unsigned short f32_to_bf16_bits(float v) {
    unsigned int b = __float_as_uint(v);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((b >> 16) | 0x0040u); // quiet NaN
    b += 0x7fffu + ((b >> 16) & 1u);
    return (unsigned short)(b >> 16);
}

#ifdef DRUTO_EMU
// The host emulator (a development tool, not part of druto) has no PTX.
float druto_emu_f16_to_f32(unsigned short h);
unsigned short druto_emu_f32_to_f16(float v);
__device__ __forceinline__ float f16_bits_to_f32(unsigned short h) { return druto_emu_f16_to_f32(h); }
__device__ __forceinline__ unsigned short f32_to_f16_bits(float v) { return druto_emu_f32_to_f16(v); }
#else
__device__ __forceinline__ float f16_bits_to_f32(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ unsigned short f32_to_f16_bits(float v) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
    return h;
}
#endif

// to_f32 widens one element.
__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(bf16 x) { return bf16_bits_to_f32(x.bits); }
__device__ __forceinline__ float to_f32(f16 x) { return f16_bits_to_f32(x.bits); }

// from_f32<S> rounds v to S.
template <typename S> __device__ __forceinline__ S from_f32(float v);
template <> __device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ bf16 from_f32<bf16>(float v) {
    bf16 h;
    h.bits = f32_to_bf16_bits(v);
    return h;
}
template <> __device__ __forceinline__ f16 from_f32<f16>(float v) {
    f16 h;
    h.bits = f32_to_f16_bits(v);
    return h;
}

// round_to<S> is v rounded to S and widened again: the value a tensor of
// dtype S holds after storing v.
template <typename S> __device__ __forceinline__ float round_to(float v) { return to_f32(from_f32<S>(v)); }

// load returns element i of p widened to fp32; store rounds v into p[i].
__device__ __forceinline__ float load(const float* p, size_t i) { return p[i]; }
__device__ __forceinline__ float load(const bf16* p, size_t i) { return to_f32(p[i]); }
__device__ __forceinline__ float load(const f16* p, size_t i) { return to_f32(p[i]); }
__device__ __forceinline__ void store(float* p, size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store(bf16* p, size_t i, float v) { p[i] = from_f32<bf16>(v); }
__device__ __forceinline__ void store(f16* p, size_t i, float v) { p[i] = from_f32<f16>(v); }

// ---- Hopper bulk copies (TMA) --------------------------------------------
//
// DRUTO_HAVE_TMA is defined where the bulk-copy instructions exist: sm_90
// and newer, compiled by a CUDA 12+ compiler (PTX ISA 8.0). The embedded
// PTX (nvcc 11.8) and older NVRTCs compile without it; the launchers only
// pick the kernels that need it where tmaOK (pkg/device/gpu) holds.
// Addresses of shared memory are 32-bit shared-window addresses
// (__cvta_generic_to_shared); mbarriers are 8-byte aligned.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && __CUDACC_VER_MAJOR__ >= 12
#define DRUTO_HAVE_TMA 1

// tma_bar_init makes the mbarrier at bar expect one arrival a phase; after
// the inits, one tma_bar_fence, then a barrier of the block.
__device__ __forceinline__ void tma_bar_init(unsigned bar) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void tma_bar_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }

// tma_expect arrives on bar's phase, which then completes when bytes have
// landed by tma_load's copies counted on it.
__device__ __forceinline__ void tma_expect(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

// tma_load copies bytes (a multiple of 16) from global src to shared dst,
// both 16-byte aligned, counted on bar.
__device__ __forceinline__ void tma_load(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}

// tma_bar_wait returns once bar's phase of the given parity has completed.
__device__ __forceinline__ void tma_bar_wait(unsigned bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}
#endif

// ---- 128-bit vectors of T -----------------------------------------------

// vec16 is one 128-bit vector of T (16-byte loads and stores).
union vec16 {
    uint4 u;
    T e[16 / sizeof(T)];
};

// unpack16 widens the 16/sizeof(T) values of one 128-bit vector into v,
// from the vector's 32-bit words (no union indexed at run time, which some
// compilers keep in local memory).
__device__ __forceinline__ void unpack16(uint4 u, float* v) {
    const unsigned int w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int k = 0; k < 4; k++) {
#if DTYPE == DRUTO_F32
        v[k] = __uint_as_float(w[k]);
#elif DTYPE == DRUTO_BF16
        v[2 * k] = bf16_bits_to_f32(w[k] & 0xffffu);
        v[2 * k + 1] = bf16_bits_to_f32(w[k] >> 16);
#else
        v[2 * k] = f16_bits_to_f32((unsigned short)(w[k] & 0xffffu));
        v[2 * k + 1] = f16_bits_to_f32((unsigned short)(w[k] >> 16));
#endif
    }
}

// pack16 rounds the 16/sizeof(T) values v to T into one 128-bit vector: two
// at a time on sm_80+ (cvt.rn.bf16x2/f16x2), else one by one.
__device__ __forceinline__ uint4 pack16(const float* v) {
    vec16 r;
#if DTYPE != DRUTO_F32 && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned int w[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
#if DTYPE == DRUTO_BF16
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w[k]) : "f"(v[2 * k + 1]), "f"(v[2 * k]));
#else
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(w[k]) : "f"(v[2 * k + 1]), "f"(v[2 * k]));
#endif
    }
    r.u.x = w[0];
    r.u.y = w[1];
    r.u.z = w[2];
    r.u.w = w[3];
#else
#pragma unroll
    for (int e = 0; e < 16 / (int)sizeof(T); e++) store(r.e, e, v[e]);
#endif
    return r.u;
}

// ---- 4-wide vectors -----------------------------------------------------

// F4 is four consecutive elements in fp32. Index v[] only with constants
// (unrolled loops), so it stays in registers.
struct F4 {
    float v[4];
};

// ld4 loads p[0..3] in one access; p must be aligned to 4 elements.
__device__ __forceinline__ F4 ld4(const float* p) {
    float4 q = *reinterpret_cast<const float4*>(p);
    F4 r;
    r.v[0] = q.x;
    r.v[1] = q.y;
    r.v[2] = q.z;
    r.v[3] = q.w;
    return r;
}
__device__ __forceinline__ F4 ld4(const bf16* p) {
    uint2 q = *reinterpret_cast<const uint2*>(p);
    F4 r;
    r.v[0] = bf16_bits_to_f32(q.x & 0xffffu);
    r.v[1] = bf16_bits_to_f32(q.x >> 16);
    r.v[2] = bf16_bits_to_f32(q.y & 0xffffu);
    r.v[3] = bf16_bits_to_f32(q.y >> 16);
    return r;
}
__device__ __forceinline__ F4 ld4(const f16* p) {
    uint2 q = *reinterpret_cast<const uint2*>(p);
    F4 r;
    r.v[0] = f16_bits_to_f32((unsigned short)(q.x & 0xffffu));
    r.v[1] = f16_bits_to_f32((unsigned short)(q.x >> 16));
    r.v[2] = f16_bits_to_f32((unsigned short)(q.y & 0xffffu));
    r.v[3] = f16_bits_to_f32((unsigned short)(q.y >> 16));
    return r;
}

// st4 rounds and stores a.v[0..3] at p[0..3] in one access (p aligned).
__device__ __forceinline__ void st4(float* p, const F4& a) {
    float4 q;
    q.x = a.v[0];
    q.y = a.v[1];
    q.z = a.v[2];
    q.w = a.v[3];
    *reinterpret_cast<float4*>(p) = q;
}
__device__ __forceinline__ void st4(bf16* p, const F4& a) {
    uint2 q;
    q.x = (unsigned int)f32_to_bf16_bits(a.v[0]) | ((unsigned int)f32_to_bf16_bits(a.v[1]) << 16);
    q.y = (unsigned int)f32_to_bf16_bits(a.v[2]) | ((unsigned int)f32_to_bf16_bits(a.v[3]) << 16);
    *reinterpret_cast<uint2*>(p) = q;
}
__device__ __forceinline__ void st4(f16* p, const F4& a) {
    uint2 q;
    q.x = (unsigned int)f32_to_f16_bits(a.v[0]) | ((unsigned int)f32_to_f16_bits(a.v[1]) << 16);
    q.y = (unsigned int)f32_to_f16_bits(a.v[2]) | ((unsigned int)f32_to_f16_bits(a.v[3]) << 16);
    *reinterpret_cast<uint2*>(p) = q;
}

// ---- reductions ---------------------------------------------------------

// warp_sum returns the sum of v over the 32 lanes of a full warp, the same
// bits in every lane (a butterfly: a fixed order, so deterministic).
__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// ---- GELU ----------------------------------------------------------------

// gelu_f is the tanh-form GELU in fp32, as the CPU reference computes it
// (pkg/device/cpu/gelu.go): gelu.cu's kernels and matmul.cu's matmul_rows
// epilogue.
#define GELU_SCALE 0.7978845608028654f // √(2/π)
#define GELU_COEF 0.044715f
__device__ __forceinline__ float gelu_f(float x) {
    float u = x * x * x * GELU_COEF + x;
    float t = tanhf(u * GELU_SCALE);
    return (t + 1.0f) * x * 0.5f;
}

// ---- programmatic dependent launch ---------------------------------------

// pdl_enter is the first statement of every kernel a file's "// druto:pdl"
// line names. On sm_90 and newer, such a kernel may be launched as a
// programmatic dependent launch (pkg/device/gpu: cuLaunchKernelEx with
// programmatic stream serialization), which lets its blocks be scheduled
// while the kernel before it on the stream is still running:
//   - griddepcontrol.wait blocks until every prerequisite grid has
//     completed and its memory operations are visible, so nothing the
//     kernel reads or writes before it can race with its predecessor;
//   - griddepcontrol.launch_dependents then lets the next such launch be
//     scheduled as soon as every block of this grid has started (or
//     exited), so its launch and block start-up overlap this kernel's tail
//     instead of following its last write.
// Launched normally, or on older GPUs (where it compiles to nothing), both
// are no-ops.
__device__ __forceinline__ void pdl_enter() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

#endif // DRUTO_COMMON_CUH
