// main.cpp: host emulator of kernels/fp8.cu's cast_transpose_e4m3 and
// cast_transpose_e5m2, their GELU and dbias forms (gelu_cast_transpose_e4m3,
// cast_transpose_dbias_e5m2, dgelu_cast_transpose_dbias_e5m2),
// layernorm_fp8_e4m3, residual_layernorm_fp8_e4m3 and
// layernorm_backward_cast_e5m2 (see run.sh): every CUDA thread of a block is a host
// thread, __syncthreads a std::barrier, the warp shuffle a slot table
// (harness.h), atomicMax a compare-and-swap loop, and the PTX instruction
// cvt.rn.satfinite.{e4m3,e5m2}x2.f32 the function cvt8 below, written from
// the instruction's definition (round to nearest even on the value,
// satfinite: past the largest finite value, ±Inf included, gives ±max;
// NaN gives the canonical NaN 0x7f, as cuda_fp8.hpp's host fallback of the
// same conversion writes it).
//
//   emu_F32 selftest            cvt8 against ref8 (below) on every fp8
//                               value, the midpoints between neighbours
//                               and their float neighbours, specials and a
//                               sweep of float32
//   emu_DT N C                  the kernels on random x (N,C) with special
//                               values, both formats, vector and scalar
//                               paths, against ref8 of x·s, qt = qᵀ and
//                               amax = max |x|; "OK" or a mismatch, exit 1
//   emu_DT io N C FMT VR VC REV for pkg/device/gpu's TestFP8EmulatorMatchesCPU:
//                               (FMT e4m3, e5m2, or gelu: the GELU
//                               cast-transpose, x the pre-activation)
//                               stdin: scale (f32), then x (N·C of T, raw);
//                               stdout: q (N·C), qt (N·C), amax (f32 bits), underflows (u32)
//   emu_DT dbio N C VR VC REV   cast_transpose_dbias_e5m2, for
//                               TestDBiasFP8EmulatorMatchesCPU: stdin as
//                               io's; stdout: q, qt, amax, underflows, then the column
//                               sums part (ceil(N/64)·C f32)
//   emu_DT dgio N C VR VC REV   dgelu_cast_transpose_dbias_e5m2, for
//                               TestDGELUDBiasFP8EmulatorMatchesCPU:
//                               stdin: scale (f32), dy (N·C of T, raw),
//                               pre (N·C of T, raw); stdout as dbio's
//   emu_DT ln N C               the layernorm kernels, plain and residual,
//                               on random rows with special values, the
//                               launcher's paths and the scalar ones,
//                               against layernorm.cu's row function
//                               (checkLN); "OK" or a mismatch, exit 1
//   emu_DT lnio N C RES VEC VQ VC [REV]
//                               for TestLayerNormFP8EmulatorMatchesCPU:
//                               stdin: scale (f32), rows a (N·C f32), with
//                               RES b (N·C of T), weight and bias (C of T);
//                               stdout: q, qt, amax, underflows, mean (N f32), rstd
//                               (N f32), with RES res (N·C f32)
//   emu_DT lbio N C VEC VQ VC REV ROWS
//                               layernorm_backward_cast_e5m2, for
//                               TestLayerNormBackwardCastFP8EmulatorMatchesCPU:
//                               stdin: scale (f32), dout (N·C of T), inp
//                               (N·C f32), dinp (N·C f32), weight (C of T),
//                               mean, rstd (N f32 each); stdout: dinp
//                               updated, q, qt, amax, underflows, part
//                               (ceil(N/64)·2C f32: [dweight | dbias] a
//                               block), dpart (ceil(N/64)·C f32: the
//                               column sums of the updated dinp)
//   emu_F32 cvt FMT             stdin: f32 values; stdout: one byte each
//
// ref8 is independent of cvt8: it decodes every code of the format from
// its bit fields and picks the nearest value (ties to the even code), as
// the OCP FP8 specification defines rounding, without any bit arithmetic
// on the input.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <mutex>
#include <string>
#include <math.h>
#include "../harness.h"

#include "../fp8cvt.h"

// The rounded fp32 operations layernorm.cuh spells out (the host rounds
// each operation to fp32 and, without -mfma, fuses none).
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }

#include "fp8.cu"

// isnan8 reports whether code is a NaN of the format.
static bool isnan8(unsigned char q, const Fmt& p) { return p.e5m2 ? (q & 0x7f) > 0x7c : (q & 0x7f) == 0x7f; }

// decode8 returns the value of a code from its bit fields.
static double decode8(unsigned char q, const Fmt& p) {
    const int ebits = 7 - p.man;
    const int exp = (q >> p.man) & ((1 << ebits) - 1), man = q & ((1 << p.man) - 1);
    double v;
    if (isnan8(q, p))
        v = NAN;
    else if (p.e5m2 && exp == 31)
        v = INFINITY;
    else if (exp == 0)
        v = std::ldexp((double)man, 1 - p.bias - p.man);
    else
        v = std::ldexp((double)(man | (1 << p.man)), exp - p.bias - p.man);
    return (q & 0x80) ? -v : v;
}

// ref8 rounds f to the nearest finite value of the format by search, ties
// to the even code, saturating; NaN gives 0x7f.
static unsigned char ref8(float f, const Fmt& p) {
    if (std::isnan(f)) return 0x7f;
    const unsigned char sign = std::signbit(f) ? 0x80 : 0;
    const double a = std::fabs((double)f);
    if (a >= p.max) return sign | p.maxcode;
    static double table[2][128];
    static std::once_flag once;
    std::call_once(once, [] {
        for (int c = 0; c < 128; c++) table[0][c] = decode8(c, E4M3f), table[1][c] = decode8(c, E5M2f);
    });
    const double* t = table[p.e5m2];
    int best = 0;
    for (int c = 1; c <= p.maxcode; c++) {
        const double d = std::fabs(t[c] - a), db = std::fabs(t[best] - a);
        if (d < db || (d == db && (c & 1) == 0)) best = c;
    }
    return sign | (unsigned char)best;
}

static bool same8(unsigned char a, unsigned char b, const Fmt& p) { return a == b || (isnan8(a, p) && isnan8(b, p)); }

static float f32bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t bitsf32(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

// selftest checks cvt8 against ref8; returns the number of mismatches.
static int selftest() {
    int bad = 0;
    for (const Fmt* p : {&E4M3f, &E5M2f}) {
        std::vector<float> xs = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1e-45f, -1e-45f, 1e38f, -1e38f, 3.4028235e38f};
        for (int c = 0; c < 256; c++) {
            if (isnan8(c, *p)) continue;
            const double v = decode8(c, *p);
            xs.push_back((float)v);
            if (std::isinf(v)) continue;
            // the midpoint to the next code up, and the floats around it
            for (int d : {1, -1}) {
                int n = c + d;
                if (n < 0 || n > 255 || isnan8(n, *p) || ((n ^ c) & 0x80) || std::isinf(decode8(n, *p))) continue;
                const float mid = (float)((v + decode8(n, *p)) / 2);
                xs.push_back(mid);
                xs.push_back(std::nextafter(mid, INFINITY));
                xs.push_back(std::nextafter(mid, -INFINITY));
            }
        }
        for (float m : {(float)p->max, (float)(p->max * 1.0625), (float)(p->max * 1.125), (float)(p->max * 1.2)})
            for (float s : {1.0f, -1.0f}) {
                xs.push_back(s * m);
                xs.push_back(std::nextafter(s * m, INFINITY));
                xs.push_back(std::nextafter(s * m, -INFINITY));
            }
        for (uint64_t u = 0; u < (1ull << 32); u += 65521) xs.push_back(f32bits((uint32_t)u));
        int n = 0;
        for (float x : xs) {
            const unsigned char a = cvt8(x, *p), b = ref8(x, *p);
            n++;
            if (!same8(a, b, *p)) {
                if (bad++ < 10) printf("cvt %s: %a (0x%08x): cvt8 0x%02x, ref8 0x%02x\n", p->e5m2 ? "e5m2" : "e4m3", x, bitsf32(x), a, b);
            }
        }
        printf("cvt %s: %d values checked\n", p->e5m2 ? "e5m2" : "e4m3", n);
    }
    return bad;
}

struct Out {
    std::vector<unsigned char> q, qt;
    float amax[2]; // the max and the underflow count (bits)
};

// EMU_LN_ROWS and EMU_LN_THREADS are the FP8 layernorms' rows and threads
// a block here: not fp8.go's (lnf8DefaultRows, LNF8_BLOCK), so that the
// kernels' loops over rows, warps and 16-row chunks run with counts that
// are not powers of two.
#define EMU_LN_ROWS 48
#define EMU_LN_THREADS 256

// run launches the kernel of format f on x (N,C) as fp8.go does; f = EMU_GELU
// runs gelu_cast_transpose_e4m3 on x as the pre-activation.
#define EMU_GELU 2
static Out run(int f, const std::vector<T>& x, float scale, int N, int C, int vr, int vc) {
    Out o;
    o.q.assign((size_t)N * C, 0xA5); // poison
    o.qt.assign((size_t)N * C, 0x5A);
    o.amax[0] = o.amax[1] = 0;
    const int gx = (C + CT_TILE - 1) / CT_TILE, gy = (N + CT_TILE - 1) / CT_TILE;
    launch(gx, gy, CT_BLOCK, [&] {
        if (f == EMU_GELU)
            gelu_cast_transpose_e4m3(o.q.data(), o.qt.data(), o.amax, x.data(), &scale, N, C, vr, vc);
        else if (f == FP8_E4M3)
            cast_transpose_e4m3(o.q.data(), o.qt.data(), o.amax, x.data(), &scale, N, C, vr, vc);
        else
            cast_transpose_e5m2(o.q.data(), o.qt.data(), o.amax, x.data(), &scale, N, C, vr, vc);
    });
    return o;
}

static const char* dtname() { return DTYPE == DRUTO_F32 ? "f32" : DTYPE == DRUTO_BF16 ? "bf16" : "f16"; }

// check runs both formats and paths on random x with special values.
static int check(int N, int C) {
    std::mt19937 rng(N * 7919 + C);
    std::normal_distribution<float> nd(0, 1);
    std::vector<T> x((size_t)N * C);
    for (size_t i = 0; i < x.size(); i++) x[i] = from_f32<T>(nd(rng) * std::ldexp(1.0f, (int)(rng() % 9) - 4));
    const float specials[] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, 1e-7f, -3e-6f, 6e4f, -1e5f, 2.5e-3f, 1e-30f};
    int bad = 0;
    for (int withNaN = 0; withNaN < 2; withNaN++) {
        std::vector<T> xs = x;
        if (withNaN) // every special value, at random places
            for (float v : specials)
                for (int k = 0; k < 3; k++) xs[rng() % xs.size()] = from_f32<T>(v);
        uint32_t want = 0;
        for (auto& v : xs) want = std::max(want, bitsf32(to_f32(v)) & 0x7fffffffu);
        for (int f : {FP8_E4M3, FP8_E5M2}) {
            const Fmt& p = f == FP8_E4M3 ? E4M3f : E5M2f;
            const float s = f == FP8_E4M3 ? 37.5f : 1536.0f; // some values saturate, some flush
            const int vr = C % 16 == 0, vc = N % 16 == 0;
            Out a = run(f, xs, s, N, C, vr, vc), b = run(f, xs, s, N, C, 0, 0);
            int e = 0;
            for (int r = 0; r < N; r++)
                for (int c = 0; c < C; c++) {
                    const size_t i = (size_t)r * C + c;
                    const unsigned char w = ref8(to_f32(xs[i]) * s, p);
                    const unsigned char g = a.q[i], gt = a.qt[(size_t)c * N + r];
                    if (!same8(g, w, p) || g != gt || g != b.q[i] || gt != b.qt[(size_t)c * N + r]) {
                        if (e++ < 5)
                            printf("  %s %s (%d,%d): x %a q 0x%02x qt 0x%02x scalar 0x%02x/0x%02x want 0x%02x\n", dtname(),
                                   p.e5m2 ? "e5m2" : "e4m3", r, c, to_f32(xs[i]), g, gt, b.q[i], b.qt[(size_t)c * N + r], w);
                    }
                }
            if (bitsf32(a.amax[0]) != want || bitsf32(b.amax[0]) != want) {
                printf("  amax %a / %a (0x%08x), want 0x%08x\n", a.amax[0], b.amax[0], bitsf32(a.amax[0]), want);
                e++;
            }
            printf("%-4s %s N %4d C %4d %s vec(%d,%d): %s\n", dtname(), p.e5m2 ? "e5m2" : "e4m3", N, C,
                   withNaN ? "specials" : "normal  ", vr, vc, e ? "MISMATCH" : "OK");
            bad += e;
        }
    }
    return bad;
}


// ---- layernorm_fp8_e4m3 and residual_layernorm_fp8_e4m3 ------------------

// LnF32 is an output of layernorm.cuh's ln_forward_row that keeps y in
// fp32: what layernorm.cu's forwards compute before rounding to T.
struct LnF32 {
    float* o;
    void put4(int g, const F4& y) {
        for (int j = 0; j < 4; j++) o[4 * g + j] = y.v[j];
    }
    void put(int i, float y) { o[i] = y; }
};

// LnIn is one call's inputs: rows a (N,C) f32 (the residual stream), with
// res also b (N,C) T; weight, bias (C) T; the scale.
struct LnIn {
    int N, C;
    bool res;
    std::vector<float> a;
    std::vector<T> b, w, bias;
    float s;
};

struct LnOut {
    std::vector<unsigned char> q, qt;
    float amax[2]; // the max and the underflow count (bits)
    std::vector<float> mean, rstd, res;
};

// runLN launches the FP8 kernel as fp8.go does, outputs poisoned.
static LnOut runLN(const LnIn& in, int vec, int vq, int vc) {
    const int N = in.N, C = in.C;
    LnOut o;
    o.q.assign((size_t)N * C, 0xA5);
    o.qt.assign((size_t)N * C, 0x5A);
    o.amax[0] = o.amax[1] = 0;
    o.mean.assign(N, NAN);
    o.rstd.assign(N, NAN);
    o.res.assign(in.res ? (size_t)N * C : 0, NAN);
    launch((N + EMU_LN_ROWS - 1) / EMU_LN_ROWS, 1, EMU_LN_THREADS, [&] {
        if (in.res)
            residual_layernorm_fp8_e4m3(o.res.data(), o.q.data(), o.qt.data(), o.amax, o.mean.data(), o.rstd.data(),
                                        in.a.data(), in.b.data(), in.w.data(), in.bias.data(), &in.s, N, C,
                                        EMU_LN_ROWS, vec, vq, vc);
        else
            layernorm_fp8_e4m3(o.q.data(), o.qt.data(), o.amax, o.mean.data(), o.rstd.data(), in.a.data(),
                               in.w.data(), in.bias.data(), &in.s, N, C, EMU_LN_ROWS, vec, vq, vc);
    });
    return o;
}

// LnRef is layernorm.cu's forward on the same rows: y (N,C) in fp32 (its
// row function through LnF32), out (N,C) rounded to T (through LnStore,
// the kernels' own output), mean, rstd and res.
struct LnRef {
    std::vector<float> y, mean, rstd, res;
    std::vector<T> out;
    bool consistent = true; // both calls of a row gave the same res, mean and rstd
};

// refLN runs ln_forward_row as layernorm.cu's forwards do (a warp a row,
// LN_ROW_BLOCK's 4 rows a block), twice a row: once for each output.
static LnRef refLN(const LnIn& in, int vec) {
    const int N = in.N, C = in.C;
    LnRef r;
    r.y.assign((size_t)N * C, NAN);
    r.out.assign((size_t)N * C, from_f32<T>(NAN));
    r.mean.assign(N, NAN);
    r.rstd.assign(N, NAN);
    r.res.assign((size_t)N * C, NAN);
    std::vector<float> res2 = r.res, mean2 = r.mean, rstd2 = r.rstd;
    launch((N + 3) / 4, 1, 128, [&] {
        const int row = blockIdx.x * 4 + threadIdx.x / 32;
        if (row >= N) return;
        LnF32 f = {r.y.data() + (size_t)row * C};
        LnStore t = {r.out.data() + (size_t)row * C};
        const float* a = in.a.data();
        const T *w = in.w.data(), *bias = in.bias.data();
        if (in.res) {
            ln_forward_row<float, true>(r.res.data(), f, r.mean.data(), r.rstd.data(), a, in.b.data(), w, bias, row, C, vec);
            ln_forward_row<float, true>(res2.data(), t, mean2.data(), rstd2.data(), a, in.b.data(), w, bias, row, C, vec);
        } else {
            ln_forward_row<float, false>((float*)0, f, r.mean.data(), r.rstd.data(), a, (const T*)0, w, bias, row, C, vec);
            ln_forward_row<float, false>((float*)0, t, mean2.data(), rstd2.data(), a, (const T*)0, w, bias, row, C, vec);
        }
    });
    if (memcmp(res2.data(), r.res.data(), 4 * res2.size()) || memcmp(mean2.data(), r.mean.data(), 4 * (size_t)N) ||
        memcmp(rstd2.data(), r.rstd.data(), 4 * (size_t)N))
        r.consistent = false;
    return r;
}

// sameBits compares floats bit for bit, any NaN matching any NaN.
static bool sameBits(float a, float b) { return bitsf32(a) == bitsf32(b) || (std::isnan(a) && std::isnan(b)); }

static const char* lnModes[] = {"normal", "w Inf", "x NaN/Inf"};

// lnInput makes rows with values spread over 2^-4 .. 2^4 and weights
// over 2^-9 .. 2^5, so that y·s both saturates and flushes to zero; mode
// 1 puts +Inf and -Inf into two weights (y ±Inf there: amax Inf, q ±max),
// mode 2 a NaN and an Inf into rows of x (those rows NaN: amax NaN).
static LnIn lnInput(std::mt19937& rng, int N, int C, bool res, int mode) {
    std::normal_distribution<float> nd(0, 1);
    LnIn in;
    in.N = N, in.C = C, in.res = res, in.s = 37.5f;
    in.a.resize((size_t)N * C);
    for (auto& v : in.a) v = nd(rng) * std::ldexp(1.0f, (int)(rng() % 9) - 4);
    if (res) {
        in.b.resize((size_t)N * C);
        for (auto& v : in.b) v = from_f32<T>(nd(rng));
    }
    in.w.resize(C);
    in.bias.resize(C);
    for (int c = 0; c < C; c++) {
        in.w[c] = from_f32<T>(nd(rng) * std::ldexp(1.0f, (int)(rng() % 15) - 9));
        in.bias[c] = from_f32<T>(nd(rng) * 0.01f);
    }
    if (mode == 1) {
        in.w[rng() % C] = from_f32<T>(INFINITY);
        in.w[rng() % C] = from_f32<T>(-INFINITY);
    } else if (mode == 2) {
        in.a[rng() % in.a.size()] = NAN;
        in.a[rng() % in.a.size()] = INFINITY;
    }
    return in;
}

// checkLN runs both kernels on rows (N,C) in each mode, with the paths the
// launcher would take and with every path scalar, against refLN with the
// same row path: mean, rstd and res the same bits; q = ref8(y·s) (the
// independent search, not cvt8), qt = qᵀ, amax = max |y| the same bits;
// the reference's own T output = y rounded to T; y within fp32 rounding of
// a float64 layernorm (mode 0).
static int checkLN(int N, int C) {
    std::mt19937 rng(N * 7919 + C + 38);
    int bad = 0;
    for (int res = 0; res < 2; res++)
        for (int mode = 0; mode < 3; mode++) {
            const LnIn in = lnInput(rng, N, C, res, mode);
            for (int natural = 1; natural >= 0; natural--) {
                const int vec = natural && C % 4 == 0, vq = natural, vc = natural && N % 16 == 0;
                const LnOut o = runLN(in, vec, vq, vc);
                const LnRef r = refLN(in, vec);
                int e = 0;
                auto miss = [&](const char* what, int i, double got, double want) {
                    if (e++ < 5) printf("  %s[%d]: %a, want %a\n", what, i, got, want);
                };
                for (int i = 0; i < N; i++) {
                    if (!sameBits(o.mean[i], r.mean[i])) miss("mean", i, o.mean[i], r.mean[i]);
                    if (!sameBits(o.rstd[i], r.rstd[i])) miss("rstd", i, o.rstd[i], r.rstd[i]);
                }
                // the float64 layernorm's mean and variance of each row
                std::vector<double> m64(N), v64(N);
                for (int row = 0; row < N && mode == 0; row++) {
                    const float* x = res ? r.res.data() + (size_t)row * C : in.a.data() + (size_t)row * C;
                    for (int k = 0; k < C; k++) m64[row] += x[k];
                    m64[row] /= C;
                    for (int k = 0; k < C; k++) v64[row] += (x[k] - m64[row]) * (x[k] - m64[row]);
                    v64[row] /= C;
                }
                uint32_t want = 0;
                int sat = 0, zero = 0, nan = 0; // codes: ±max, ±0, NaN
                for (int i = 0; i < N * C; i++) {
                    const int row = i / C, c = i % C;
                    const float y = r.y[i];
                    want = std::max(want, bitsf32(y) & 0x7fffffffu);
                    sat += (o.q[i] & 0x7f) == 0x7e, zero += (o.q[i] & 0x7f) == 0, nan += (o.q[i] & 0x7f) == 0x7f;
                    if (!same8(o.q[i], ref8(y * in.s, E4M3f), E4M3f)) miss("q", i, decode8(o.q[i], E4M3f), y * in.s);
                    if (o.qt[(size_t)c * N + row] != o.q[i]) miss("qt", i, o.qt[(size_t)c * N + row], o.q[i]);
                    if (res && !sameBits(o.res[i], r.res[i])) miss("res", i, o.res[i], r.res[i]);
                    if (bitsf32(to_f32(r.out[i])) != bitsf32(to_f32(from_f32<T>(y))) && !std::isnan(y))
                        miss("layernorm.cu out", i, to_f32(r.out[i]), y);
                    if (mode == 0) {
                        const float x = res ? r.res[i] : in.a[i];
                        const double n = (x - m64[row]) / std::sqrt(v64[row] + 1e-5), w = to_f32(in.w[c]), b = to_f32(in.bias[c]);
                        if (std::fabs(y - (n * w + b)) > 1e-5 * (std::fabs(n * w) + std::fabs(b)) + 1e-6 * std::fabs(w))
                            miss("y against float64", i, y, n * w + b);
                    }
                }
                if (!sameBits(o.amax[0], f32bits(want))) miss("amax", 0, o.amax[0], f32bits(want));
                if (!r.consistent) miss("the reference's two calls (res, mean, rstd)", 0, 0, 0);
                printf("%-4s ln N %4d C %4d %s %-9s vec(%d,%d,%d) amax %-8.3g q ±max %5d ±0 %5d NaN %5d: %s\n", dtname(), N,
                       C, res ? "residual" : "plain   ", lnModes[mode], vec, vq, vc, o.amax[0], sat, zero, nan,
                       e ? "MISMATCH" : "OK");
                bad += e;
            }
        }
    return bad;
}

static bool readAll(void* p, size_t n) { return fread(p, 1, n, stdin) == n; }

int main(int argc, char** argv) {
    if (argc >= 2 && std::string(argv[1]) == "selftest") return selftest() ? 1 : 0;
    if (argc >= 3 && std::string(argv[1]) == "cvt") {
        const Fmt& p = std::string(argv[2]) == "e5m2" ? E5M2f : E4M3f;
        std::vector<float> in;
        float v;
        while (fread(&v, 4, 1, stdin) == 1) in.push_back(v);
        std::vector<unsigned char> out(in.size() + 1);
        // in pairs through the x2 instruction's emulation, as the kernel calls it
        for (size_t i = 0; i < in.size(); i += 2) {
            const float hi = i + 1 < in.size() ? in[i + 1] : 0.0f;
            const unsigned short w = p.e5m2 ? druto_emu_cvt_e5m2x2(hi, in[i]) : druto_emu_cvt_e4m3x2(hi, in[i]);
            out[i] = (unsigned char)(w & 0xff);
            out[i + 1] = (unsigned char)(w >> 8);
        }
        fwrite(out.data(), 1, in.size(), stdout);
        return 0;
    }
    if (argc >= 8 && std::string(argv[1]) == "io") {
        const int N = atoi(argv[2]), C = atoi(argv[3]), vr = atoi(argv[5]), vc = atoi(argv[6]);
        const std::string fs = argv[4];
        const int f = fs == "e5m2" ? FP8_E5M2 : fs == "gelu" ? EMU_GELU : FP8_E4M3;
        reverseBlocks = atoi(argv[7]) != 0;
        float s;
        std::vector<T> x((size_t)N * C);
        if (!readAll(&s, 4) || !readAll(x.data(), x.size() * sizeof(T))) {
            fprintf(stderr, "emu: short input\n");
            return 2;
        }
        Out o = run(f, x, s, N, C, vr, vc);
        fwrite(o.q.data(), 1, o.q.size(), stdout);
        fwrite(o.qt.data(), 1, o.qt.size(), stdout);
        fwrite(o.amax, 4, 2, stdout);
        return 0;
    }
    if (argc >= 7 && (std::string(argv[1]) == "dbio" || std::string(argv[1]) == "dgio")) {
        const bool dgelu = std::string(argv[1]) == "dgio";
        const int N = atoi(argv[2]), C = atoi(argv[3]), vr = atoi(argv[4]), vc = atoi(argv[5]);
        reverseBlocks = atoi(argv[6]) != 0;
        float s;
        std::vector<T> x((size_t)N * C), pre(dgelu ? (size_t)N * C : 0);
        if (!readAll(&s, 4) || !readAll(x.data(), x.size() * sizeof(T)) || !readAll(pre.data(), pre.size() * sizeof(T))) {
            fprintf(stderr, "emu: short input\n");
            return 2;
        }
        const int gx = (C + CT_TILE - 1) / CT_TILE, gy = (N + CT_TILE - 1) / CT_TILE;
        std::vector<unsigned char> q((size_t)N * C, 0xA5), qt((size_t)N * C, 0x5A);
        std::vector<float> part((size_t)gy * C, NAN);
        float amax[2] = {0, 0};
        launch(gx, gy, CT_BLOCK, [&] {
            if (dgelu)
                dgelu_cast_transpose_dbias_e5m2(q.data(), qt.data(), amax, part.data(), x.data(), pre.data(), &s, N, C,
                                                vr, vc);
            else
                cast_transpose_dbias_e5m2(q.data(), qt.data(), amax, part.data(), x.data(), &s, N, C, vr, vc);
        });
        fwrite(q.data(), 1, q.size(), stdout);
        fwrite(qt.data(), 1, qt.size(), stdout);
        fwrite(amax, 4, 2, stdout);
        fwrite(part.data(), 4, part.size(), stdout);
        return 0;
    }
    if (argc >= 8 && std::string(argv[1]) == "lnio") {
        LnIn in;
        in.N = atoi(argv[2]), in.C = atoi(argv[3]), in.res = atoi(argv[4]) != 0;
        const int vec = atoi(argv[5]), vq = atoi(argv[6]), vc = atoi(argv[7]);
        reverseBlocks = argc >= 9 && atoi(argv[8]) != 0;
        const size_t n = (size_t)in.N * in.C;
        in.a.resize(n);
        in.b.resize(in.res ? n : 0);
        in.w.resize(in.C);
        in.bias.resize(in.C);
        if (!readAll(&in.s, 4) || !readAll(in.a.data(), 4 * n) || !readAll(in.b.data(), sizeof(T) * in.b.size()) ||
            !readAll(in.w.data(), sizeof(T) * in.C) || !readAll(in.bias.data(), sizeof(T) * in.C)) {
            fprintf(stderr, "emu: short input\n");
            return 2;
        }
        LnOut o = runLN(in, vec, vq, vc);
        fwrite(o.q.data(), 1, n, stdout);
        fwrite(o.qt.data(), 1, n, stdout);
        fwrite(o.amax, 4, 2, stdout);
        fwrite(o.mean.data(), 4, in.N, stdout);
        fwrite(o.rstd.data(), 4, in.N, stdout);
        fwrite(o.res.data(), 4, o.res.size(), stdout);
        return 0;
    }
    if (argc >= 9 && std::string(argv[1]) == "lbio") {
        const int N = atoi(argv[2]), C = atoi(argv[3]), vec = atoi(argv[4]), vq = atoi(argv[5]), vc = atoi(argv[6]);
        reverseBlocks = atoi(argv[7]) != 0;
        const int rows = atoi(argv[8]); // fp8.go's lnb8RowsFor(C)
        if (rows < 16 || rows > LNB8_ROWS || rows % 16 != 0) {
            fprintf(stderr, "emu: rows %d: want a multiple of 16 up to LNB8_ROWS\n", rows);
            return 2;
        }
        if (C > LNB8_MAX_C) {
            fprintf(stderr, "emu: C %d past LNB8_MAX_C\n", C);
            return 2;
        }
        const size_t n = (size_t)N * C;
        float s;
        std::vector<T> dout(n), w(C);
        std::vector<float> inp(n), dinp(n), mean(N), rstd(N);
        if (!readAll(&s, 4) || !readAll(dout.data(), sizeof(T) * n) || !readAll(inp.data(), 4 * n) ||
            !readAll(dinp.data(), 4 * n) || !readAll(w.data(), sizeof(T) * C) || !readAll(mean.data(), 4 * (size_t)N) ||
            !readAll(rstd.data(), 4 * (size_t)N)) {
            fprintf(stderr, "emu: short input\n");
            return 2;
        }
        const int nb = (N + rows - 1) / rows;
        std::vector<unsigned char> q(n, 0xA5), qt(n, 0x5A);
        std::vector<float> part((size_t)nb * 2 * C, NAN), dpart((size_t)nb * C, NAN);
        float amax[2] = {0, 0};
        launch(nb, 1, LNB8_BLOCK, [&] {
            layernorm_backward_cast_e5m2(dinp.data(), part.data(), dpart.data(), q.data(), qt.data(), amax, dout.data(),
                                         inp.data(), w.data(), mean.data(), rstd.data(), &s, N, C, rows, vec, vq, vc);
        });
        fwrite(dinp.data(), 4, n, stdout);
        fwrite(q.data(), 1, n, stdout);
        fwrite(qt.data(), 1, n, stdout);
        fwrite(amax, 4, 2, stdout);
        fwrite(part.data(), 4, part.size(), stdout);
        fwrite(dpart.data(), 4, dpart.size(), stdout);
        return 0;
    }
    if (argc == 4 && std::string(argv[1]) == "ln") return checkLN(atoi(argv[2]), atoi(argv[3])) ? 1 : 0;
    if (argc == 3) return check(atoi(argv[1]), atoi(argv[2])) ? 1 : 0;
    fprintf(stderr, "usage: emu selftest | emu N C | emu ln N C | emu io N C e4m3|e5m2|gelu VECROW VECCOL REVERSE | "
                    "emu dbio|dgio N C VECROW VECCOL REVERSE | "
                    "emu lnio N C RES VEC VECQ VECCOL [REVERSE] | emu lbio N C VEC VECQ VECCOL REVERSE ROWS | "
                    "emu cvt e4m3|e5m2\n");
    return 2;
}
