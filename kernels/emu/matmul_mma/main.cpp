// main.cpp: host emulator of kernels/matmul_mma.cu (see run.sh).
//   usage: emu_BF16 (no arguments: a fixed set of cases; exit 1 on a mismatch)
// emu.h (../flash) is included first by run.sh (-include).
#include "../harness.h"
#include <algorithm>
inline float tanhf(float x) { return std::tanh(x); }

// The warps' exchange slots for mma (blocks run one after another).
static uint64_t mslot[32][32][8];
static int W() { return threadIdx.x >> 5; }
static int L() { return threadIdx.x & 31; }
static float half2f(unsigned h) {
#if DTYPE == DRUTO_BF16
    return __uint_as_float((h & 0xffff) << 16);
#else
    return druto_emu_f16_to_f32((unsigned short)(h & 0xffff));
#endif
}
void druto_emu_ldm4(unsigned*, const void*, bool) { abort(); } // not used here
void druto_emu_cp_async16(void* dst, const void* src) { memcpy(dst, src, 16); }
// mma.m16n8k16.row.col, fp32 accumulators: A(r,k) from lane (r%8)·4 +
// (k%8)/2, register (r>=8) + 2(k>=8); B(k,n) from lane n·4 + (k%8)/2,
// register (k>=8); c[i] at row g + 8(i>=2), column 2t + i%2.
void druto_emu_mma(float* c, const unsigned* a, unsigned b0, unsigned b1) {
    int w = W(), l = L();
    for (int i = 0; i < 4; i++) mslot[w][l][i] = a[i];
    mslot[w][l][4] = b0;
    mslot[w][l][5] = b1;
    wsync();
    auto A = [&](int r, int k) {
        int ln = (r % 8) * 4 + (k % 8) / 2, reg = (r >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0);
        return half2f((unsigned)(mslot[w][ln][reg] >> (16 * (k % 2))));
    };
    auto B = [&](int k, int n) {
        int ln = n * 4 + (k % 8) / 2, reg = 4 + (k >= 8 ? 1 : 0);
        return half2f((unsigned)(mslot[w][ln][reg] >> (16 * (k % 2))));
    };
    int g = l / 4, t = l % 4;
    int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
    float out[4];
    for (int i = 0; i < 4; i++) {
        float acc = c[i];
        for (int k = 0; k < 16; k++) acc += A(rows[i], k) * B(k, cols[i]);
        out[i] = acc;
    }
    wsync();
    for (int i = 0; i < 4; i++) c[i] = out[i];
}
#include "matmul_mma.cu"

static std::mt19937_64 rng(13);
static double normal() { return std::normal_distribution<double>()(rng); }
static int fails = 0;
static float val(const T& v) { return load(&v, 0); }
static double geluRef(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

// one case: N rows, C inputs, OC outputs, KS slices of C a column tile, gelu, bias.
static void rows(int N, int C, int OC, int KS, int gelu, int bias) {
    std::vector<T> inp((size_t)N * C), w((size_t)OC * C), b(OC), out((size_t)N * OC), pre((size_t)N * OC);
    for (auto& v : inp) store(&v, 0, (float)normal());
    for (auto& v : w) store(&v, 0, (float)(normal() / std::sqrt((double)C)));
    for (auto& v : b) store(&v, 0, (float)normal());
    for (auto& v : out) store(&v, 0, NAN);
    for (auto& v : pre) store(&v, 0, NAN);
    const int cols = 16 * 8 / KS, R = (N + 15) & ~15;
    // mmaSmem (pkg/device/gpu): the warps' rings, or the partial tiles
    const size_t smem = std::max(MMA_BLOCK / 32 * MMA_X * R * 32 * 2, MMA_BLOCK / 32 * R * MMA_LD * 4);
    launch((OC + cols - 1) / cols, 1, MMA_BLOCK, [&] {
        matmul_rows_mma(out.data(), gelu ? pre.data() : nullptr, inp.data(), w.data(), bias ? b.data() : nullptr, N, C, OC,
                        gelu, KS);
    }, smem);
    // fp32 sums of C products: within ~C·2^-24 relative of the norms'
    // product, then one rounding to T (gelu's slope is at most ~1.13)
    const double ulp = DTYPE == DRUTO_BF16 ? 0x1p-8 : 0x1p-11;
    double worst = 0;
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = 0, mag = 0;
            for (int k = 0; k < C; k++) {
                double p = (double)val(inp[(size_t)n * C + k]) * val(w[(size_t)o * C + k]);
                s += p;
                mag += std::fabs(p);
            }
            if (bias) { s += val(b[o]); mag += std::fabs(val(b[o])); }
            double want = gelu ? geluRef(s) : s, got = val(out[(size_t)n * OC + o]);
            double tol = 1.2 * ulp * std::fabs(want) + 1e-6 * mag + 1e-30;
            double err = std::fabs(got - want) / tol;
            if (!(err <= 1)) err = std::isnan(got) ? 1e9 : err;
            worst = std::max(worst, err);
            if (gelu) {
                double gp = val(pre[(size_t)n * OC + o]);
                double e2 = std::fabs(gp - s) / (ulp * std::fabs(s) + 1e-6 * mag + 1e-30);
                worst = std::max(worst, std::isnan(gp) ? 1e9 : e2);
            }
        }
    bool ok = worst <= 1;
    if (!ok) fails++;
    printf("N %2d C %4d OC %4d KS %d gelu %d bias %d: worst %.3f of tolerance %s\n", N, C, OC, KS, gelu, bias, worst,
           ok ? "OK" : "MISMATCH");
}

int main() {
    // GPT-2's decode shapes (C 768, 3072), OC scaled down; every KS; rows
    // 1 to 64 (1 to 4 pairs of n-tiles, rows past N read from row N-1);
    // OC ending inside a column tile; more steps than MMA_U and fewer.
    rows(64, 768, 128, 8, 0, 1);
    rows(64, 768, 64, 4, 1, 1);
    rows(33, 3072, 48, 8, 0, 1);
    rows(9, 768, 100, 2, 1, 0);
    rows(16, 768, 72, 1, 0, 1);
    rows(17, 256, 40, 8, 1, 1);
    rows(1, 768, 64, 4, 0, 1);
    rows(48, 1024, 130, 2, 1, 1);
    rows(40, 64, 20, 2, 0, 1); // one step a warp
    rows(64, 3072, 16, 1, 1, 1); // 96 steps a warp: the rings wrap many times
    return fails ? 1 : 0;
}
