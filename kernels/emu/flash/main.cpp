// main.cpp: host emulator of kernels/flash_attention.cu (see run.sh): the
// PTX instructions the kernels use, implemented from the PTX ISA text
// (mma.m16n8k16 fragment layouts, ldmatrix .x4 with and without .trans),
// a launcher that runs every CUDA thread of a CTA as a host thread, and a
// float64 reference of causal attention and its gradients.
//   usage: emu_BF16 B NH T HS [V]   (V 2: the forward and backward of flash_attention2.cu:
//          flash_bwd2_dot, flash_bwd2kv, flash_bwd2q)
#include "emu.h"
#include <cstdio>
#include <random>
#include <algorithm>
thread_local dim3e threadIdx, blockIdx;
dim3e blockDim, gridDim;
static std::barrier<>* cta;
static std::vector<std::barrier<>*> warpbar;
static uint64_t slot[64][32][8];
void __syncthreads() { cta->arrive_and_wait(); }
static int W() { return threadIdx.x >> 5; }
static int L() { return threadIdx.x & 31; }
static void wsync() { warpbar[W()]->arrive_and_wait(); }
float __shfl_xor_sync(unsigned, float v, int off) {
    int w = W(), l = L();
    slot[w][l][0] = __float_as_uint(v);
    wsync();
    float r = __uint_as_float((unsigned)slot[w][l ^ off][0]);
    wsync();
    return r;
}
float druto_emu_f16_to_f32(unsigned short h) { _Float16 x; memcpy(&x, &h, 2); return (float)x; }
unsigned short druto_emu_f32_to_f16(float v) { _Float16 x = (_Float16)v; unsigned short h; memcpy(&h, &x, 2); return h; }
static float half2f(unsigned h);
void druto_emu_ldm4(unsigned* r, const void* p, bool trans) {
    int w = W(), l = L();
    slot[w][l][0] = (uint64_t)(uintptr_t)p;
    wsync();
    for (int m = 0; m < 4; m++) {
        if (!trans) {
            const unsigned short* row = (const unsigned short*)(uintptr_t)slot[w][m * 8 + l / 4][0];
            r[m] = row[2 * (l % 4)] | ((unsigned)row[2 * (l % 4) + 1] << 16);
        } else {
            const unsigned short* r0 = (const unsigned short*)(uintptr_t)slot[w][m * 8 + 2 * (l % 4)][0];
            const unsigned short* r1 = (const unsigned short*)(uintptr_t)slot[w][m * 8 + 2 * (l % 4) + 1][0];
            r[m] = r0[l / 4] | ((unsigned)r1[l / 4] << 16);
        }
    }
    wsync();
}
static float half2f(unsigned h) {
#if DTYPE == DRUTO_BF16
    return __uint_as_float((h & 0xffff) << 16);
#else
    return druto_emu_f16_to_f32((unsigned short)(h & 0xffff));
#endif
}
void druto_emu_mma(float* c, const unsigned* a, unsigned b0, unsigned b1) {
    int w = W(), l = L();
    for (int i = 0; i < 4; i++) slot[w][l][i] = a[i];
    slot[w][l][4] = b0;
    slot[w][l][5] = b1;
    wsync();
    auto A = [&](int r, int k) {
        int ln = (r % 8) * 4 + (k % 8) / 2, reg = (r >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0);
        return half2f((unsigned)(slot[w][ln][reg] >> (16 * (k % 2))));
    };
    auto B = [&](int k, int n) {
        int ln = n * 4 + (k % 8) / 2, reg = 4 + (k >= 8 ? 1 : 0);
        return half2f((unsigned)(slot[w][ln][reg] >> (16 * (k % 2))));
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
// m16n8k8 (.f16, the sm_75 form): A 16×8 in two registers (row g, row
// g+8; columns 2t, 2t+1), B 8×8 in one (rows 2t, 2t+1; column g).
void druto_emu_mma8(float* c, unsigned a0, unsigned a1, unsigned b0) {
    int w = W(), l = L();
    slot[w][l][0] = a0;
    slot[w][l][1] = a1;
    slot[w][l][2] = b0;
    wsync();
    auto A = [&](int r, int k) { return half2f((unsigned)(slot[w][(r % 8) * 4 + k / 2][r >= 8 ? 1 : 0] >> (16 * (k % 2)))); };
    auto B = [&](int k, int n) { return half2f((unsigned)(slot[w][n * 4 + k / 2][2] >> (16 * (k % 2)))); };
    int g = l / 4, t = l % 4;
    int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
    float out[4];
    for (int i = 0; i < 4; i++) {
        float acc = c[i];
        for (int k = 0; k < 8; k++) acc += A(rows[i], k) * B(k, cols[i]);
        out[i] = acc;
    }
    wsync();
    for (int i = 0; i < 4; i++) c[i] = out[i];
}
#include "flash_attention.cu"
#include "flash_attention2.cu"

static void launch(int gx, int gy, int threads, std::function<void()> fn) {
    gridDim = {(unsigned)gx, (unsigned)gy, 1};
    blockDim = {(unsigned)threads, 1, 1};
    std::barrier<> b(threads);
    cta = &b;
    std::vector<std::barrier<>*> wb;
    for (int i = 0; i < threads / 32; i++) wb.push_back(new std::barrier<>(32));
    warpbar = wb;
    for (int y = 0; y < gy; y++)
        for (int x = 0; x < gx; x++) {
            std::vector<std::thread> th;
            for (int i = 0; i < threads; i++)
                th.emplace_back([&, i, x, y] { threadIdx = {(unsigned)i, 0, 0}; blockIdx = {(unsigned)x, (unsigned)y, 0}; fn(); });
            for (auto& t : th) t.join();
        }
    for (auto p : wb) delete p;
}

static unsigned short to16(float v) {
#if DTYPE == DRUTO_BF16
    return f32_to_bf16_bits(v);
#else
    return druto_emu_f32_to_f16(v);
#endif
}
static float from16(unsigned short h) { return half2f(h); }

int main(int argc, char** argv) {
    int B = atoi(argv[1]), NH = atoi(argv[2]), Tn = atoi(argv[3]), HS = atoi(argv[4]);
    int V = argc > 5 ? atoi(argv[5]) : 1;
    int C = NH * HS;
    float scale = 1.0f / std::sqrt((float)HS);
    std::mt19937 rng(42);
    std::normal_distribution<float> nd(0, 1);
    std::vector<T> qkv(B * Tn * 3 * C), dout(B * Tn * C), out(B * Tn * C), dqkv(B * Tn * 3 * C);
    std::vector<float> lse(B * NH * Tn, NAN), dd(B * NH * Tn), dqacc(B * Tn * C, 0.f);
    for (auto& x : qkv) x.bits = to16(nd(rng));
    for (auto& x : dout) x.bits = to16(nd(rng));
    for (auto& x : out) x.bits = 0xffff;
    std::vector<float> d0(dqkv.size());
    // EMU_ZERO_D0=1: the gradients start from 0, so their errors are not
    // hidden under the rounding of random starting values
    const bool zero0 = getenv("EMU_ZERO_D0") != nullptr;
    for (size_t i = 0; i < dqkv.size(); i++) { dqkv[i].bits = to16(zero0 ? 0.0f : nd(rng)); d0[i] = from16(dqkv[i].bits); }
    // EMU_STORE=1 (variants 2 and 3): the store form, dqkv NaN-poisoned and
    // never read (the gradients are compared from 0)
    const int store = getenv("EMU_STORE") != nullptr && V >= 2;
    if (store)
        for (size_t i = 0; i < dqkv.size(); i++) { dqkv[i].bits = 0xffff; d0[i] = 0; }
    int nt = (Tn + 63) / 64;
    auto fwd = HS == 32 ? flash_fwd_hs32 : HS == 64 ? flash_fwd_hs64 : flash_fwd_hs128;
    auto bwd = HS == 32 ? flash_bwd_hs32 : HS == 64 ? flash_bwd_hs64 : flash_bwd_hs128;
    if (V >= 2) {
        auto fwd2 = HS == 32 ? flash_fwd2_hs32 : HS == 64 ? flash_fwd2_hs64 : flash_fwd2_hs128;
        launch(B * NH, (Tn + FA2_BM - 1) / FA2_BM, 256, [&] { fwd2(out.data(), lse.data(), qkv.data(), Tn, C, NH, scale); });
    } else {
        launch(nt, B * NH, 128, [&] { fwd(out.data(), lse.data(), qkv.data(), Tn, C, NH, scale); });
    }
    int rows = B * NH * Tn;
    long long n = (long long)B * Tn * C;
    if (V >= 2) {
        // variant 2's backward: dd NaN-poisoned (flash_bwd2_dot writes it;
        // a small grid so that the grid-stride loop loops), flash_bwd2kv_hsN
        // then flash_bwd2q_hsN
        for (auto& x : dd) x = NAN;
        auto kv = HS == 32 ? flash_bwd2kv_hs32 : HS == 64 ? flash_bwd2kv_hs64 : flash_bwd2kv_hs128;
        auto bq = HS == 32 ? flash_bwd2q_hs32 : HS == 64 ? flash_bwd2q_hs64 : flash_bwd2q_hs128;
        launch(2, 1, 64, [&] { flash_bwd2_dot(dd.data(), dout.data(), out.data(), n / 8, Tn, NH, HS); });
        launch(B * NH, (Tn + FA2_BN - 1) / FA2_BN, 256, [&] { kv(dqkv.data(), qkv.data(), dout.data(), lse.data(), dd.data(), Tn, C, NH, scale, store); });
        launch(B * NH, (Tn + FA2_BM - 1) / FA2_BM, 256, [&] { bq(dqkv.data(), qkv.data(), dout.data(), lse.data(), dd.data(), Tn, C, NH, scale, store); });
    } else {
        launch((rows + 7) / 8, 1, 256, [&] { flash_bwd_dot(dd.data(), dout.data(), out.data(), rows, Tn, C, NH, HS); });
        launch(nt, B * NH, 128, [&] { bwd(dqkv.data(), dqacc.data(), qkv.data(), dout.data(), lse.data(), dd.data(), Tn, C, NH, scale); });
        launch(4, 1, 64, [&] { flash_bwd_dq(dqkv.data(), dqacc.data(), n, C); });
    }
    // reference in double
    auto Q = [&](int b, int t, int part, int h, int d) { return (double)from16(qkv[((size_t)b * Tn + t) * 3 * C + part * C + h * HS + d].bits); };
    double eo = 0, no = 0, el = 0, eg[3] = {0, 0, 0}, ng[3] = {0, 0, 0}, maxo = 0, maxg[3] = {0, 0, 0};
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            std::vector<double> P(Tn * Tn, 0), dP(Tn * Tn, 0), dS(Tn * Tn, 0), O(Tn * HS, 0), L(Tn);
            for (int t = 0; t < Tn; t++) {
                double m = -1e300;
                for (int j = 0; j <= t; j++) {
                    double s = 0;
                    for (int d = 0; d < HS; d++) s += Q(b, t, 0, h, d) * Q(b, j, 1, h, d);
                    P[t * Tn + j] = s * scale;
                    m = std::max(m, s * scale);
                }
                double sum = 0;
                for (int j = 0; j <= t; j++) sum += std::exp(P[t * Tn + j] - m);
                L[t] = m + std::log(sum);
                for (int j = 0; j <= t; j++) P[t * Tn + j] = std::exp(P[t * Tn + j] - L[t]);
                for (int d = 0; d < HS; d++) {
                    double o = 0;
                    for (int j = 0; j <= t; j++) o += P[t * Tn + j] * Q(b, j, 2, h, d);
                    O[t * HS + d] = o;
                    double got = from16(out[((size_t)b * Tn + t) * C + h * HS + d].bits);
                    double e = std::fabs(got - o);
                    if (!(e <= maxo)) maxo = std::isnan(e) ? INFINITY : e;
                    eo += e * e; no += o * o;
                }
                double gl = lse[(b * NH + h) * Tn + t];
                el = std::max(el, std::isnan(gl) ? INFINITY : std::fabs(gl - L[t]));
            }
            auto G = [&](int t, int d) { return (double)from16(dout[((size_t)b * Tn + t) * C + h * HS + d].bits); };
            for (int t = 0; t < Tn; t++) {
                double Dt = 0;
                for (int j = 0; j <= t; j++) {
                    double s = 0;
                    for (int d = 0; d < HS; d++) s += G(t, d) * Q(b, j, 2, h, d);
                    dP[t * Tn + j] = s;
                    Dt += P[t * Tn + j] * s;
                }
                for (int j = 0; j <= t; j++) dS[t * Tn + j] = P[t * Tn + j] * (dP[t * Tn + j] - Dt) * scale;
            }
            for (int t = 0; t < Tn; t++)
                for (int d = 0; d < HS; d++) {
                    double gq = 0, gk = 0, gv = 0;
                    for (int j = 0; j <= t; j++) gq += dS[t * Tn + j] * Q(b, j, 1, h, d);
                    for (int i = t; i < Tn; i++) { gk += dS[i * Tn + t] * Q(b, i, 0, h, d); gv += P[i * Tn + t] * G(i, d); }
                    double want[3] = {gq, gk, gv};
                    for (int part = 0; part < 3; part++) {
                        size_t idx = ((size_t)b * Tn + t) * 3 * C + part * C + h * HS + d;
                        double got = from16(dqkv[idx].bits) - d0[idx];
                        double e = std::fabs(got - want[part]);
                        if (!(e <= maxg[part])) maxg[part] = std::isnan(e) ? INFINITY : e;
                        eg[part] += e * e; ng[part] += want[part] * want[part];
                    }
                }
        }
    printf("%sv%d B%d NH%d T%d hs%d %s: out rel %.2e (max abs %.2e), lse max abs %.2e, dq rel %.2e (max %.2e), dk rel %.2e (max %.2e), dv rel %.2e (max %.2e)\n",
           store ? "store " : "", V, B, NH, Tn, HS, DTYPE == DRUTO_BF16 ? "bf16" : "f16", std::sqrt(eo / no), maxo, el, std::sqrt(eg[0] / ng[0]), maxg[0],
           std::sqrt(eg[1] / ng[1]), maxg[1], std::sqrt(eg[2] / ng[2]), maxg[2]);
    // a zero reference (T 1 from zero starting gradients: dq = dk = 0)
    // takes an absolute bound: D = rowsum(dout∘out) and dP differ by fp32
    // rounding (~1e-7)
    auto rel = [](double e, double n) { return n == 0 ? (std::sqrt(e) < 1e-5 ? 0.0 : INFINITY) : std::sqrt(e / n); };
    bool ok = rel(eo, no) < 2e-2 && el < 1e-3 && rel(eg[0], ng[0]) < 3e-2 && rel(eg[1], ng[1]) < 3e-2 && rel(eg[2], ng[2]) < 3e-2;
    printf(ok ? "OK\n" : "FAIL\n");
    return ok ? 0 : 1;
}
