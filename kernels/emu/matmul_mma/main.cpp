// main.cpp: host emulator of kernels/matmul_mma.cu (see run.sh): every CUDA
// thread of a block runs as a host thread (barriers for __syncthreads and
// the warps' mma); the outputs are compared with a float64 reference of
// out = inp·Wᵀ + bias (and gelu), for slices S of C as matmul.go picks them
// and others, the blocks run first to last and last to first (the same bits
// either way: the slices are added in slice order by whichever block is
// last).
//   usage: emu_BF16 (no arguments: a fixed set of cases; exit 1 on a mismatch)
// emu.h (../flash) is included first by run.sh (-include).
#include "../harness.h"
inline float tanhf(float x) { return std::tanh(x); }
#include "matmul_mma.cu"

static std::mt19937_64 rng(11);
static double normal() { return std::normal_distribution<double>()(rng); }
static int fails = 0;
static float val(const T& v) { return load(&v, 0); }
static double geluRef(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

// run launches matmul_mma over S slices into out and pre.
static void run(std::vector<T>& out, std::vector<T>& pre, const std::vector<T>& inp, const std::vector<T>& w,
                const std::vector<T>& b, int N, int C, int OC, int S, int gelu, int bias, bool reverse) {
    const int tiles = (OC + MMA_NB - 1) / MMA_NB;
    std::vector<float> part((size_t)S * N * OC, NAN);
    std::vector<unsigned> done(tiles, 0);
    for (auto& v : out) store(&v, 0, NAN);
    for (auto& v : pre) store(&v, 0, NAN);
    reverseBlocks = reverse;
    launch(tiles, S, MMA_BLOCK, [&] {
        matmul_mma(out.data(), gelu ? pre.data() : nullptr, inp.data(), w.data(), bias ? b.data() : nullptr, part.data(),
                   done.data(), N, C, OC, gelu, C / S);
    });
    reverseBlocks = false;
    for (unsigned d : done)
        if (d != 0) {
            printf("a counter left at %u\n", d);
            fails++;
        }
}

// one case: N rows, C inputs, OC outputs, S slices of C, gelu, bias.
static void mm(int N, int C, int OC, int S, int gelu, int bias) {
    std::vector<T> inp(N * C), w((size_t)OC * C), b(OC), out((size_t)N * OC), pre((size_t)N * OC);
    for (auto& v : inp) store(&v, 0, (float)normal());
    for (auto& v : w) store(&v, 0, (float)(normal() / std::sqrt((double)C)));
    for (auto& v : b) store(&v, 0, (float)normal());
    run(out, pre, inp, w, b, N, C, OC, S, gelu, bias, false);
    // fp32 sums of C products: within ~C·2^-24 relative of the norms' product,
    // then one rounding to T (and gelu's slope is at most ~1.13)
    const double ulp = DTYPE == DRUTO_BF16 ? 0x1p-8 : 0x1p-11;
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
    // the blocks last to first: the same bits
    std::vector<T> out2((size_t)N * OC), pre2((size_t)N * OC);
    run(out2, pre2, inp, w, b, N, C, OC, S, gelu, bias, true);
    const bool same = memcmp(out.data(), out2.data(), out.size() * sizeof(T)) == 0 &&
                      (!gelu || memcmp(pre.data(), pre2.data(), pre.size() * sizeof(T)) == 0);
    if (!ok || !same) fails++;
    printf("N %2d C %4d OC %3d S %2d gelu %d bias %d: worst %.3f of tolerance, reversed %s %s\n", N, C, OC, S, gelu, bias,
           worst, same ? "same" : "DIFFERENT", ok && same ? "OK" : "MISMATCH");
}

int main() {
    // GPT-2's decode shapes (C 768 and 3072) at batch 9 to 64, OC scaled
    // down to keep the host busy briefly; OC past a block's columns and not a
    // multiple of 8; slices of one chunk a warp to several groups a warp.
    mm(64, 768, 72, 3, 0, 1);   // qkv's slices
    mm(64, 768, 40, 6, 0, 1);   // attn_proj's
    mm(64, 768, 64, 2, 1, 1);   // fc's, with GELU
    mm(64, 3072, 33, 8, 0, 1);  // fc_proj's
    mm(9, 768, 40, 1, 1, 0);    // one slice: the epilogue in the block
    mm(16, 256, 96, 2, 0, 0);
    mm(33, 96, 17, 1, 1, 1);    // a warp without a chunk (3 chunks, 4 warps)
    mm(48, 1024, 65, 1, 0, 1);  // 8 chunks a warp: three groups
    mm(17, 64, 8, 2, 1, 1);     // one chunk a slice
    return fails ? 1 : 0;
}
