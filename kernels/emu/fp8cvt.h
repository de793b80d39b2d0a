// fp8cvt.h: what the host emulators of the FP8 kernels (kernels/emu/fp8,
// kernels/emu/adamw_fp8, kernels/emu/crossentropy_fp8) add to harness.h:
// the 32-bit warp shuffle, atomicMax as a compare-and-swap loop, and the
// PTX conversion cvt.rn.satfinite.{e4m3,e5m2}x2.f32 as cvt8, written from
// the instruction's definition (kernels/emu/fp8/main.cpp's header says how
// it is checked). Include it after harness.h, before the kernel's source.
#ifndef DRUTO_EMU_FP8CVT_H
#define DRUTO_EMU_FP8CVT_H
#include <cmath>

unsigned int __shfl_xor_sync(unsigned, unsigned int v, int off) { return shfl(v, off); }
unsigned int atomicMax(unsigned int* p, unsigned int v) {
    std::atomic_ref<unsigned int> a(*p);
    unsigned int old = a.load();
    while (old < v && !a.compare_exchange_weak(old, v)) {
    }
    return old;
}

// Format parameters: E4M3 (bias 7, 3 mantissa bits, no Inf, 0x7f NaN,
// max 448 = 0x7e) and E5M2 (bias 15, 2 mantissa bits, 0x7c Inf, max
// 57344 = 0x7b).
struct Fmt {
    int man, bias;
    double max;
    unsigned char maxcode;
    bool e5m2;
};
static const Fmt E4M3f = {3, 7, 448, 0x7e, false}, E5M2f = {2, 15, 57344, 0x7b, true};

// cvt8 is one lane of cvt.rn.satfinite.<fmt>x2.f32.
static unsigned char cvt8(float f, const Fmt& p) {
    if (std::isnan(f)) return 0x7f;
    const unsigned char sign = std::signbit(f) ? 0x80 : 0;
    const double a = std::fabs((double)f);
    if (a > p.max) return sign | p.maxcode; // satfinite
    if (a == 0) return sign;
    int e;
    std::frexp(a, &e);                 // a = m·2^e, m in [0.5, 1)
    const int E = std::max(e - 1, 1 - p.bias); // the binade's exponent, or the subnormals'
    const double quantum = std::ldexp(1.0, E - p.man);
    const double r = std::nearbyint(a / quantum) * quantum; // the default mode: ties to even
    if (r == 0) return sign;
    std::frexp(r, &e);
    const int E2 = e - 1;
    if (E2 < 1 - p.bias) return sign | (unsigned char)(r / std::ldexp(1.0, 1 - p.bias - p.man)); // subnormal
    const unsigned mant = (unsigned)(r / std::ldexp(1.0, E2 - p.man)) - (1u << p.man);
    return sign | (unsigned char)(((E2 + p.bias) << p.man) | mant);
}
unsigned short druto_emu_cvt_e4m3x2(float a, float b) { return (unsigned short)(cvt8(a, E4M3f) << 8 | cvt8(b, E4M3f)); }
unsigned short druto_emu_cvt_e5m2x2(float a, float b) { return (unsigned short)(cvt8(a, E5M2f) << 8 | cvt8(b, E5M2f)); }

#endif
