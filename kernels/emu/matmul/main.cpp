// main.cpp: host emulator of kernels/matmul.cu's matmul_rows (see run.sh):
// every CUDA thread of a block runs as a host thread (barriers for
// __syncthreads and the warps' shuffles); the outputs are compared with a
// float64 reference of out = inp·Wᵀ + bias (and gelu), with matmul.go's
// choice of ks and of the vector path, and every ks and both paths on the
// shapes of GPT-2's decode step.
//   usage: emu_BF16 (no arguments: a fixed set of cases; exit 1 on a mismatch)
// emu.h (../flash) is included first by run.sh (-include).
#include "../harness.h"
inline float tanhf(float x) { return std::tanh(x); }
#include "matmul.cu"

static std::mt19937_64 rng(7);
static double normal() { return std::normal_distribution<double>()(rng); }
static int fails = 0;
static float val(const T& v) { return load(&v, 0); }
static double geluRef(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

// one case: N rows, C inputs, OC outputs, ks warps a column, vec, gelu, bias.
static void rows(int N, int C, int OC, int ks, int vec, int gelu, int bias) {
    std::vector<T> inp(N * C), w((size_t)OC * C), b(OC), out((size_t)N * OC), pre((size_t)N * OC);
    for (auto& v : inp) store(&v, 0, (float)normal());
    for (auto& v : w) store(&v, 0, (float)(normal() / std::sqrt((double)C)));
    for (auto& v : b) store(&v, 0, (float)normal());
    for (auto& v : out) store(&v, 0, NAN);
    const int cpb = ROWS_BLOCK / 32 / ks;
    launch((OC + cpb - 1) / cpb, 1, ROWS_BLOCK, [&] {
        matmul_rows(out.data(), gelu ? pre.data() : nullptr, inp.data(), w.data(), bias ? b.data() : nullptr, N, C, OC, gelu, ks, vec);
    });
    // fp32 sums of C products: within ~C·2^-24 relative of the norms' product,
    // then one rounding to T (and gelu's slope is at most ~1.13)
    const double ulp = sizeof(T) == 4 ? 0x1p-24 : (DTYPE == DRUTO_BF16 ? 0x1p-8 : 0x1p-11);
    double worst = 0;
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = 0, mag = 0;
            for (int k = 0; k < C; k++) {
                double p = (double)val(inp[n * C + k]) * val(w[(size_t)o * C + k]);
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
    printf("N %d C %4d OC %4d ks %d vec %d gelu %d bias %d: worst %.3f of tolerance %s\n", N, C, OC, ks, vec, gelu, bias, worst,
           ok ? "OK" : "MISMATCH");
}

int main() {
    const int VE = 16 / (int)sizeof(T);
    // GPT-2's decode shapes (C 768), scaled down in OC to keep the host busy briefly
    for (int ks : {1, 2, 4, 8}) {
        rows(1, 768, 40, ks, 1, 0, 1);
        rows(3, 3072, 17, ks, 1, 0, 1);
        rows(8, 768, 33, ks, 1, 1, 1);
        rows(2, 1600, 9, ks, 1, 1, 1); // gpt2-xl: a lane's part ends inside a batch of ROWS_U vectors
    }
    rows(5, 768, 24, 2, 0, 1, 1);          // the scalar path
    rows(2, 8 * VE + 3, 9, 1, 0, 0, 0);    // C not a multiple of a vector
    rows(7, 37, 11, 4, 0, 1, 0);           // C smaller than the warps' chunks
    rows(1, 4 * VE, 1, 8, 1, 0, 1);        // more warps than vectors
    return fails ? 1 : 0;
}
