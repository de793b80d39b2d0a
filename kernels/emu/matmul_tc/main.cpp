// main.cpp: host emulator of kernels/matmul_tc.cu's matmul_rows_tc (see
// run.sh): every CUDA thread of a block runs as a host thread (barriers for
// __syncthreads and the warps' mma), mma.m16n8k16 is implemented from the
// PTX ISA's fragment layouts (as flash/main.cpp's), blocks run one after
// another (in order or last to first), so the column tiles' counters and
// the last block's sum over the K chunks run as on the GPU.
//   usage: emu_BF16            a fixed set of cases against a float64 reference
//                              (every column tile and K chunk the kernel takes);
//                              exit 1 on a mismatch
//          emu_BF16 io N C OC gelu bias lmt span rev
//                              stdin: inp (N,C), w (OC,C), bias (OC) if bias, as
//                              T's bytes; stdout: out (N,OC), then pre (N,OC) if
//                              gelu. The launch runs twice (blocks in the given
//                              order, then the other): exit 2 when the second
//                              launch's out differs in a bit (the counters must
//                              have come back to zero, the sums must not depend on
//                              which block finished last).
// emu.h (../flash) is included first by run.sh (-include).
#include "../harness.h"
#include <string>
inline float tanhf(float x) { return std::tanh(x); }
#include "matmul_tc.cu"

// mma.m16n8k16 (row.col, f32 accumulation): A 16×16 in four registers
// (rows g, g+8; k 2t.., 2t+8..), B 16×8 in two (k 2t.., 2t+8..; column g),
// C rows g, g+8 × columns 2t, 2t+1 (PTX ISA, "Matrix Fragments for
// mma.m16n8k16 with floating point type").
static unsigned mslot[TC_WARPS][32][6];
static float half2f(unsigned h) {
#if DTYPE == DRUTO_BF16
    return bf16_bits_to_f32(h & 0xffff);
#else
    return f16_bits_to_f32((unsigned short)(h & 0xffff));
#endif
}
void druto_emu_mma(float* c, const unsigned* a, unsigned b0, unsigned b1) {
    int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    for (int i = 0; i < 4; i++) mslot[w][l][i] = a[i];
    mslot[w][l][4] = b0;
    mslot[w][l][5] = b1;
    wsync();
    auto A = [&](int r, int k) {
        int ln = (r % 8) * 4 + (k % 8) / 2, reg = (r >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0);
        return half2f(mslot[w][ln][reg] >> (16 * (k % 2)));
    };
    auto B = [&](int k, int n) {
        int ln = n * 4 + (k % 8) / 2, reg = 4 + (k >= 8 ? 1 : 0);
        return half2f(mslot[w][ln][reg] >> (16 * (k % 2)));
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

static std::mt19937_64 rng(7);
static double normal() { return std::normal_distribution<double>()(rng); }
static int fails = 0;
static float val(const T& v) { return load(&v, 0); }
static double geluRef(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

// smemBytes is the launcher's dynamic shared memory for (N, lmt, span).
static int smemBytes(int N, int lmt, int span) {
    int kw = TC_WARPS >> lmt, kc = span * kw, ct = 16 << lmt, np = (N + 7) / 8 * 8;
    return std::max(np * (kc + TC_PAD) * (int)sizeof(T), kw * N * (ct + TC_RPAD) * 4);
}

// tc runs the kernel: grid (ceil(OC/ct), ceil(C/kc)), blocks in order or
// reversed; part and done persist across calls of one shape (done must
// come back to zero).
static std::vector<float> part;
static std::vector<unsigned> done;
static void tc(std::vector<T>& out, std::vector<T>& pre, const std::vector<T>& inp, const std::vector<T>& w, const T* b, int N, int C,
               int OC, int gelu, int lmt, int span, bool rev) {
    int ct = 16 << lmt, kc = span * (TC_WARPS >> lmt);
    int tiles = (OC + ct - 1) / ct, chunks = (C + kc - 1) / kc;
    if (smemBytes(N, lmt, span) > TC_SMEM) {
        fprintf(stderr, "N %d lmt %d span %d: %d bytes of shared memory, more than TC_SMEM\n", N, lmt, span, smemBytes(N, lmt, span));
        exit(3);
    }
    if ((int)part.size() < chunks * N * OC) part.assign(chunks * N * OC, NAN);
    if ((int)done.size() < tiles) done.assign(tiles, 0);
    memset(tc_smem, 0xff, sizeof tc_smem); // NaN-ish leftovers: the kernel must not read unstaged bytes
    reverseBlocks = rev;
    launch(tiles, chunks, TC_BLOCK, [&] {
        matmul_rows_tc(out.data(), gelu ? pre.data() : nullptr, part.data(), done.data(), inp.data(), w.data(), b, N, C, OC, gelu, lmt, span);
    });
    reverseBlocks = false;
    for (int i = 0; i < tiles; i++)
        if (done[i] != 0) {
            fprintf(stderr, "done[%d] = %u after the launch, want 0\n", i, done[i]);
            exit(4);
        }
}

// one case against float64: out within 1.2 ulp of T of the exact value plus
// fp32 sums' error (1e-6 of Σ|products|), pre likewise.
static void check(int N, int C, int OC, int lmt, int span, int gelu, int bias, bool rev) {
    std::vector<T> inp((size_t)N * C), w((size_t)OC * C), b(OC), out((size_t)N * OC), pre((size_t)N * OC);
    for (auto& v : inp) store(&v, 0, (float)normal());
    for (auto& v : w) store(&v, 0, (float)(normal() / std::sqrt((double)C)));
    for (auto& v : b) store(&v, 0, (float)normal());
    for (auto& v : out) store(&v, 0, NAN);
    for (auto& v : pre) store(&v, 0, NAN);
    part.clear();
    done.clear();
    tc(out, pre, inp, w, bias ? b.data() : nullptr, N, C, OC, gelu, lmt, span, rev);
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
            double err = std::fabs(got - want) / (1.2 * ulp * std::fabs(want) + 1e-6 * mag + 1e-30);
            worst = std::max(worst, std::isnan(got) ? 1e9 : err);
            if (gelu) {
                double gp = val(pre[(size_t)n * OC + o]);
                double e2 = std::fabs(gp - s) / (ulp * std::fabs(s) + 1e-6 * mag + 1e-30);
                worst = std::max(worst, std::isnan(gp) ? 1e9 : e2);
            }
        }
    bool ok = worst <= 1;
    if (!ok) fails++;
    printf("N %2d C %4d OC %4d ct %2d kc %4d gelu %d bias %d rev %d: worst %.3f of tolerance %s\n", N, C, OC, 16 << lmt,
           span * (TC_WARPS >> lmt), gelu, bias, rev, worst, ok ? "OK" : "MISMATCH");
}

static std::vector<T> readT(size_t n) {
    std::vector<T> v(n);
    if (n && fread(v.data(), sizeof(T), n, stdin) != n) {
        fprintf(stderr, "short input\n");
        exit(3);
    }
    return v;
}

int main(int argc, char** argv) {
    if (argc == 10 && std::string(argv[1]) == "io") {
        int N = atoi(argv[2]), C = atoi(argv[3]), OC = atoi(argv[4]), gelu = atoi(argv[5]), bias = atoi(argv[6]), lmt = atoi(argv[7]),
            span = atoi(argv[8]), rev = atoi(argv[9]);
        auto inp = readT((size_t)N * C), w = readT((size_t)OC * C), b = readT(bias ? OC : 0);
        std::vector<T> out((size_t)N * OC), pre((size_t)N * OC), out2, pre2;
        for (auto& v : out) store(&v, 0, NAN);
        for (auto& v : pre) store(&v, 0, NAN);
        out2 = out, pre2 = pre;
        tc(out, pre, inp, w, bias ? b.data() : nullptr, N, C, OC, gelu, lmt, span, rev);
        tc(out2, pre2, inp, w, bias ? b.data() : nullptr, N, C, OC, gelu, lmt, span, !rev);
        fwrite(out.data(), sizeof(T), out.size(), stdout);
        if (gelu) fwrite(pre.data(), sizeof(T), pre.size(), stdout);
        if (memcmp(out.data(), out2.data(), out.size() * sizeof(T)) != 0 || (gelu && memcmp(pre.data(), pre2.data(), pre.size() * sizeof(T)) != 0)) {
            fprintf(stderr, "the second launch (blocks in the other order) differs\n");
            return 2;
        }
        return 0;
    }
    // every column tile (lmt) and a span a warp of each, one K chunk and several
    for (int lmt = 0; lmt <= 2; lmt++)
        for (int span : {32, 64, 128}) {
            int kc = span * (TC_WARPS >> lmt);
            int N = smemBytes(64, lmt, span) <= TC_SMEM ? 33 : 16;
            check(N, kc * 2 + 8, 37, lmt, span, 1, 1, lmt & 1); // two chunks, the last one 8 inputs
            check(9, kc, 16 << lmt, lmt, span, 0, 0, 0);         // one chunk, one whole tile
        }
    // GPT-2's shapes at N 16 and 64, scaled down in OC (two or three column tiles)
    check(64, 768, 136, 2, 64, 0, 1, 0);  // qkv / attn_proj
    check(16, 768, 130, 1, 128, 1, 1, 1); // fc with GELU
    check(64, 3072, 72, 1, 64, 0, 1, 1);  // fc_proj: 12 chunks
    check(64, 1600, 70, 2, 128, 1, 1, 0); // gpt2-xl: a partial last chunk
    check(17, 1000, 17, 0, 32, 0, 1, 1);  // odd rows and columns
    return fails ? 1 : 0;
}
