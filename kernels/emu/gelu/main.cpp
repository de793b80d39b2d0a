// main.cpp: host emulator of kernels/gelu.cu's gelu_bias_backward (see
// run.sh): every CUDA thread of a CTA is a host thread, the CTA's
// __syncthreads a std::barrier; a float64 reference of the tanh-form
// derivative checks dpre and the column sums.
//   usage: emu_BF16 N C ROWS
#include <cstdio>
#include <cstdlib>
#include <random>
#include <math.h>
inline float __frcp_rn(float x) { return 1.0f / x; }
#include "../harness.h"
#include "gelu.cu"

static double gradRef(double x) { // pkg/device/cpu geluGrad, in float64
    const double s = std::sqrt(2 / M_PI), c = 0.044715;
    double t = std::tanh(s * (x + c * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * s * (1 + 3 * c * x * x);
}

static float val(const T& v) { return load(&v, 0); }

// run applies gelu_bias_backward (vec as asked) and matmul_bias_grad to
// copies of dpre0; returns dpre and dbias.
static void run(int N, int C, int rows, int vec, const std::vector<T>& pre, const std::vector<T>& dpre0,
                const std::vector<float>& db0, std::vector<T>& dpre, std::vector<float>& db) {
    dpre = dpre0;
    db = db0;
    const int strips = (C + 32 * GB_W - 1) / (32 * GB_W), chunks = (N + rows - 1) / rows;
    std::vector<float> part((size_t)chunks * C, NAN);
    launch(strips, chunks, GELU_BLOCK, [&] { gelu_bias_backward(dpre.data(), pre.data(), part.data(), N, C, rows, vec); });
    // matmul_bias_grad on the f32 partials: the kernel is compiled for T; its
    // row order (warp w: rows w, w+32, ...; warps in order) is redone here
    for (int c = 0; c < C; c++) {
        float w[32] = {0};
        for (int k = 0; k < 32; k++)
            for (int n = k; n < chunks; n += 32) w[k] += part[(size_t)n * C + c];
        float acc = 0;
        for (int k = 0; k < 32; k++) acc += w[k];
        db[c] += acc;
    }
}

int main(int argc, char** argv) {
    int N = atoi(argv[1]), C = atoi(argv[2]), rows = atoi(argv[3]);
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0, 1);
    std::vector<T> pre((size_t)N * C), dpre0((size_t)N * C);
    std::vector<float> db0(C);
    for (auto& x : pre) x = from_f32<T>(2.5f * nd(rng)); // |x| up to ~10: both tails
    // and a sweep over [-12, 12) in the first rows: the ends of the
    // derivative's exp, where 1/(exp(2u)+1) is subnormal (x ~ 9.45, flushed
    // to 0 by rcp.approx.ftz), and past its overflow
    for (size_t i = 0; i < pre.size() && i < 4096; i++) pre[i] = from_f32<T>(-12.0f + 24.0f * (float)i / 4096.0f);
    for (auto& x : dpre0) x = from_f32<T>(nd(rng));
    for (auto& x : db0) x = nd(rng);
    const bool vecok = C % GB_W == 0;
    std::vector<T> dA, dB, dS;
    std::vector<float> bA, bB, bS;
    run(N, C, rows, vecok, pre, dpre0, db0, dA, bA);
    run(N, C, rows, vecok, pre, dpre0, db0, dB, bB);
    run(N, C, rows, 0, pre, dpre0, db0, dS, bS);
    // |round(v) - v| <= 2^-p·|v| for the dtype's p (24 bits of fp32, 8 of
    // bf16, 11 of f16; f16's subnormals: 2^-25 absolute), plus the derivative's own error: ~1e-7·|dpre| for
    // the 16-bit form, ~1e-6·|dpre| for fp32's tanhf form in the left tail
    // (1 - t·t cancels, as in the CPU reference)
    const double half = DTYPE == DRUTO_F32 ? 0x1p-24 : DTYPE == DRUTO_BF16 ? 0x1p-8 : 0x1p-11;
    const double dabs = DTYPE == DRUTO_F32 ? 1e-6 : 2e-7;
    const double sub = DTYPE == DRUTO_F16 ? 0x1p-25 : 0;
    double worst = 0, bworst = 0;
    bool same = true, sameS = true;
    for (int c = 0; c < C; c++) {
        double sum = 0, mag = 0;
        for (int r = 0; r < N; r++) {
            size_t i = (size_t)r * C + c;
            double want = gradRef(val(pre[i])) * val(dpre0[i]);
            double got = val(dA[i]);
            // one rounding of the result and the derivative's few fp32 ulps
            double e = std::fabs(got - want) / (std::fabs(want) * half * 1.0001 + dabs * std::fabs(val(dpre0[i])) + sub + 1e-30);
            if (!(e <= worst)) {
                worst = std::isnan(e) ? INFINITY : e;
                if (getenv("EMU_VERBOSE")) printf("  worst at r%d c%d: pre %.8g dpre %.8g got %.8g want %.8g\n", r, c, val(pre[i]), val(dpre0[i]), got, want);
            }
            if (memcmp(&dA[i], &dB[i], sizeof(T)) != 0) same = false;
            if (val(dA[i]) != val(dS[i])) sameS = false;
            sum += want;
            mag += std::fabs(want);
        }
        double e = std::fabs(bA[c] - (db0[c] + sum)) / (1e-6 * (mag + std::fabs(db0[c])) + 1e-6);
        if (!(e <= bworst)) bworst = std::isnan(e) ? INFINITY : e;
        if (bA[c] != bB[c]) same = false;
        if (std::fabs(bA[c] - bS[c]) > 1e-6 * (mag + std::fabs(db0[c]) + 1)) sameS = false;
    }
    // dpre within one rounding (and the derivative's error) of the exact
    // product; the sums within 1e-6 of their magnitude
    bool ok = worst <= 1.0 && bworst <= 1.0 && same && sameS;
    printf("N%d C%d rows%d vec%d %s: dpre worst %.3g (of the bound), dbias worst %.3g (of 1e-6·Σ|.|), repeat %s, scalar path %s %s\n", N, C, rows,
           (int)vecok, DTYPE == DRUTO_F32 ? "f32" : DTYPE == DRUTO_BF16 ? "bf16" : "f16", worst, bworst, same ? "same bits" : "DIFFERS",
           sameS ? "agrees" : "DIFFERS", ok ? "OK" : "FAIL");
    return ok ? 0 : 1;
}
