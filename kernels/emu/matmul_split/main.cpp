// main.cpp: host emulator of kernels/matmul_split.cu (see run.sh).
//   usage: emu_BF16 (no arguments: a fixed set of cases; exit 1 on a mismatch)
// emu.h (../flash) is included first by run.sh (-include).
#include "../harness.h"
#include <algorithm>
inline float tanhf(float x) { return std::tanh(x); }
inline int max(int a, int b) { return a > b ? a : b; }

// The cluster the thread's block belongs to: its blocks' shared memory,
// the cluster's barrier and the warps' exchange slots for ldmatrix and mma.
static thread_local int crank;
static thread_local std::vector<unsigned char*>* csmem;
static thread_local std::barrier<>* cbar;
static thread_local uint64_t (*mslot)[32][8];
unsigned char* druto_emu_cluster_smem() { return (*csmem)[crank]; }
int druto_emu_cluster_rank() { return crank; }
void druto_emu_cluster_sync() { cbar->arrive_and_wait(); }
const float* druto_emu_cluster_peer(const float* p, int rank) {
    const unsigned char* mine = (*csmem)[crank];
    return reinterpret_cast<const float*>((*csmem)[rank] + (reinterpret_cast<const unsigned char*>(p) - mine));
}
void druto_emu_cp_async16(void* dst, const void* src, int bytes) {
    memset(dst, 0, 16);
    if (bytes) memcpy(dst, src, bytes);
}
static int W() { return threadIdx.x >> 5; }
static int L() { return threadIdx.x & 31; }
static float half2f(unsigned h) {
#if DTYPE == DRUTO_BF16
    return __uint_as_float((h & 0xffff) << 16);
#else
    return druto_emu_f16_to_f32((unsigned short)(h & 0xffff));
#endif
}
// ldmatrix .x4: lane i gives row i%8 of matrix i/8; lane l receives
// elements 2(l%4), 2(l%4)+1 of row l/4 of each matrix (not transposed).
void druto_emu_ldm4(unsigned* r, const void* p, bool trans) {
    int w = W(), l = L();
    mslot[w][l][0] = (uint64_t)(uintptr_t)p;
    wsync();
    for (int m = 0; m < 4; m++) {
        if (trans) abort(); // not used here
        const unsigned short* row = (const unsigned short*)(uintptr_t)mslot[w][m * 8 + l / 4][0];
        r[m] = row[2 * (l % 4)] | ((unsigned)row[2 * (l % 4) + 1] << 16);
    }
    wsync();
}
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
#define __cluster_dims__(...)
#include "matmul_split.cu"

static std::mt19937_64 rng(11);
static double normal() { return std::normal_distribution<double>()(rng); }
static int fails = 0;
static float val(const T& v) { return load(&v, 0); }
static double geluRef(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

// splitSmem is pkg/device/gpu's: the chunks of W and inp, or the two
// partial tiles laid over them, whichever is larger.
static size_t splitSmem(int kc, int N) {
    const int R = (N + 15) & ~15;
    return std::max<size_t>((size_t)(kc / SPLIT_KCH) * (SPLIT_COLS + R) * SPLIT_LD * 2, (size_t)2 * R * SPLIT_PLD * 4);
}

// launchCluster runs grid (gx, S) in clusters of (1, S): the S blocks of a
// cluster at once, the clusters one after another (reverse: last first).
static void launchCluster(int gx, int S, size_t smem, bool reverse, std::function<void()> fn) {
    gridDim = {(unsigned)gx, (unsigned)S, 1};
    blockDim = {SPLIT_BLOCK, 1, 1};
    for (int n = 0; n < gx; n++) {
        const int x = reverse ? gx - 1 - n : n;
        std::vector<std::vector<unsigned char>> mem(S, std::vector<unsigned char>(smem));
        std::vector<unsigned char*> ptrs;
        for (auto& m : mem) {
            std::fill(m.begin(), m.end(), 0xff); // NaN-ish garbage: the kernel must not read what it did not write
            ptrs.push_back(m.data());
        }
        std::barrier<> cb(S * SPLIT_BLOCK);
        std::vector<std::barrier<>> bars;
        std::vector<std::vector<std::barrier<>*>> wbs(S);
        std::vector<std::barrier<>*> ctas;
        for (int r = 0; r < S; r++) {
            ctas.push_back(new std::barrier<>(SPLIT_BLOCK));
            for (int i = 0; i < SPLIT_BLOCK / 32; i++) wbs[r].push_back(new std::barrier<>(32));
        }
        std::vector<std::vector<uint64_t>> slots(S, std::vector<uint64_t>(SPLIT_BLOCK / 32 * 32 * 8));
        std::vector<std::thread> th;
        for (int t = 0; t < S * SPLIT_BLOCK; t++)
            th.emplace_back([&, t] {
                const int r = t / SPLIT_BLOCK;
                threadIdx = {(unsigned)(t % SPLIT_BLOCK), 0, 0};
                blockIdx = {(unsigned)x, (unsigned)r, 0};
                crank = r;
                csmem = &ptrs;
                cbar = &cb;
                cta = ctas[r];
                warpbar = &wbs[r];
                mslot = reinterpret_cast<uint64_t(*)[32][8]>(slots[r].data());
                fn();
            });
        for (auto& t : th) t.join();
        for (auto p : ctas) delete p;
        for (auto& v : wbs)
            for (auto p : v) delete p;
    }
}

static void run(std::vector<T>& out, std::vector<T>& pre, const std::vector<T>& inp, const std::vector<T>& w,
                const std::vector<T>& b, int N, int C, int OC, int S, int gelu, int bias, bool reverse) {
    for (auto& v : out) store(&v, 0, NAN);
    for (auto& v : pre) store(&v, 0, NAN);
    const int gx = (OC + SPLIT_COLS - 1) / SPLIT_COLS;
    launchCluster(gx, S, splitSmem(C / S, N), reverse, [&] {
        auto k = S == 4 ? matmul_split4 : matmul_split8;
        k(out.data(), gelu ? pre.data() : nullptr, inp.data(), w.data(), bias ? b.data() : nullptr, N, C, OC, gelu);
    });
}

// one case: N rows, C inputs, OC outputs, a cluster of S, gelu, bias.
static void split(int N, int C, int OC, int S, int gelu, int bias) {
    std::vector<T> inp((size_t)N * C), w((size_t)OC * C), b(OC), out((size_t)N * OC), pre((size_t)N * OC);
    for (auto& v : inp) store(&v, 0, (float)normal());
    for (auto& v : w) store(&v, 0, (float)(normal() / std::sqrt((double)C)));
    for (auto& v : b) store(&v, 0, (float)normal());
    run(out, pre, inp, w, b, N, C, OC, S, gelu, bias, false);
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
    // the clusters last to first: the same bits
    std::vector<T> out2(out.size()), pre2(pre.size());
    run(out2, pre2, inp, w, b, N, C, OC, S, gelu, bias, true);
    const bool same = memcmp(out.data(), out2.data(), out.size() * sizeof(T)) == 0 &&
                      (!gelu || memcmp(pre.data(), pre2.data(), pre.size() * sizeof(T)) == 0);
    bool ok = worst <= 1 && same;
    if (!ok) fails++;
    printf("N %2d C %4d OC %4d S %d gelu %d bias %d: worst %.3f of tolerance, reversed %s %s\n", N, C, OC, S, gelu, bias,
           worst, same ? "same bits" : "DIFFERENT", ok ? "OK" : "MISMATCH");
}

int main() {
    // GPT-2's decode shapes (C 768 and 3072 at S 4 and 8), OC scaled down;
    // rows 1 to 64 (n-tile pairs 1 to 4, rows past N zero-filled) and an OC
    // that ends inside a strip.
    split(64, 768, 128, 4, 0, 1);
    split(64, 768, 64, 8, 1, 1);
    split(33, 3072, 64, 8, 0, 1);
    split(9, 768, 100, 4, 1, 0);
    split(16, 768, 72, 8, 0, 1);
    split(17, 256, 64, 8, 1, 1);
    split(1, 768, 64, 4, 0, 1);
    split(48, 1024, 130, 4, 1, 1);
    split(40, 768, 64, 8, 0, 1);  // kc 96: an odd count of chunks
    split(64, 4096, 64, 8, 1, 1); // kc 512, the longest slice
    return fails ? 1 : 0;
}
