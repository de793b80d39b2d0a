// fp8.cuh: the FP8 conversion helpers that the FP8 casts (fp8.cu) and the
// FP8 classifier (crossentropy_fp8.cu) share: fp8x2 (two floats to two
// FP8 codes, cvt.rn.satfinite, or the host emulator's twin under
// DRUTO_EMU), the amax order (abs_bits, max_u32), the underflow test
// (flushed) and the block's underflow count added into amax[1]
// (add_counts). The conventions are fp8.cu's header's (Conversion, amax,
// Underflows). The conversions need sm_90 in the embedded PTX (a file
// that includes this header has a "druto:arch 90" line).

#define FP8_E4M3 0
#define FP8_E5M2 1

// fp8x2<F>(lo, hi) converts two floats; lo lands in the low byte (the
// element at the lower address when stored little-endian).
#ifdef DRUTO_EMU
// The host emulator (kernels/emu/fp8) implements the PTX instructions.
unsigned short druto_emu_cvt_e4m3x2(float a, float b);
unsigned short druto_emu_cvt_e5m2x2(float a, float b);
template <int F> __device__ __forceinline__ unsigned short fp8x2(float lo, float hi) {
    return F == FP8_E4M3 ? druto_emu_cvt_e4m3x2(hi, lo) : druto_emu_cvt_e5m2x2(hi, lo);
}
#else
// cvt ... d, a, b puts a's conversion in d's upper byte, b's in the lower.
template <int F> __device__ __forceinline__ unsigned short fp8x2(float lo, float hi);
template <> __device__ __forceinline__ unsigned short fp8x2<FP8_E4M3>(float lo, float hi) {
    unsigned short d;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
    return d;
}
template <> __device__ __forceinline__ unsigned short fp8x2<FP8_E5M2>(float lo, float hi) {
    unsigned short d;
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
    return d;
}
#endif

// abs_bits is |v| as a float's bits: unsigned order is |v|'s order, NaN on top.
__device__ __forceinline__ unsigned int abs_bits(float v) { return __float_as_uint(v) & 0x7fffffffu; }
__device__ __forceinline__ unsigned int max_u32(unsigned int a, unsigned int b) { return a > b ? a : b; }
// flushed is 1 when a nonzero finite value (|v|'s bits av) was cast to the
// code b of ±0 (an underflow: too small for the scale), else 0.
__device__ __forceinline__ unsigned int flushed(unsigned int av, unsigned int b) {
    return (av - 1u < 0x7f7fffffu) & ((b & 0x7fu) == 0u);
}
// add_counts adds the block's per-thread counts u into amax[1] (its bits a
// uint32): a warp sum by shuffles, the warps' sums through wsum (one slot a
// warp of the block, warps of them) after a barrier, one atomicAdd by
// thread 0. Every thread of the block calls it.
__device__ __forceinline__ void add_counts(float* amax, unsigned int* wsum, unsigned int u, int warps) {
    for (int off = 16; off > 0; off >>= 1) u += __shfl_xor_sync(0xffffffffu, u, off);
    if ((threadIdx.x & 31) == 0) wsum[threadIdx.x / 32] = u;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned int b = 0;
        for (int w = 0; w < warps; w++) b += wsum[w];
        if (b != 0) atomicAdd(reinterpret_cast<unsigned int*>(amax) + 1, b);
    }
}
