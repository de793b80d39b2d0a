// main.cpp: host emulator of kernels/encoder.cu (see run.sh): every CUDA
// thread of a block is a host thread (blocks run one after another), warps
// and blocks synchronise with std::barrier. It runs encoder_forward (vector
// and scalar forms) and encoder_backward (+ encoder_backward_combine) with
// the launch plan of pkg/device/gpu/encoder.go (encoderPlan, for a GPU of
// `sms` multiprocessors) on random tokens, and compares with a reference
// that sums in increasing (b,t) order, as the CPU device does: the forward
// and dwpe bit for bit, dwte bit for bit unless the positions are split.
//   usage: emu_F32 B T C V sms hot   (hot 1: every other token is V-1)
#include "../flash/emu.h"
#include <cstdio>
#include <random>
#include <algorithm>
thread_local dim3e threadIdx, blockIdx;
dim3e blockDim, gridDim;
static std::barrier<>* cta;
static std::vector<std::barrier<>*> warpbar;
static unsigned slot[64][32];
void __syncthreads() { cta->arrive_and_wait(); }
static void wsync() { warpbar[threadIdx.x >> 5]->arrive_and_wait(); }
float __shfl_xor_sync(unsigned, float v, int) { return v; } // unused here
unsigned __ballot_sync(unsigned, bool p) {
    int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    slot[w][l] = p;
    wsync();
    unsigned r = 0;
    for (int i = 0; i < 32; i++) r |= slot[w][i] << i;
    wsync();
    return r;
}
inline int __popc(unsigned x) { return __builtin_popcount(x); }
float druto_emu_f16_to_f32(unsigned short h) { _Float16 x; memcpy(&x, &h, 2); return (float)x; }
unsigned short druto_emu_f32_to_f16(float v) { _Float16 x = (_Float16)v; unsigned short h; memcpy(&h, &x, 2); return h; }
#include "encoder.cu"

static void launch(int gx, int threads, std::function<void()> fn) {
    gridDim = {(unsigned)gx, 1, 1};
    blockDim = {(unsigned)threads, 1, 1};
    std::barrier<> b(threads);
    cta = &b;
    std::vector<std::barrier<>*> wb;
    for (int i = 0; i < threads / 32; i++) wb.push_back(new std::barrier<>(32));
    warpbar = wb;
    for (int x = 0; x < gx; x++) {
        std::vector<std::thread> th;
        for (int i = 0; i < threads; i++)
            th.emplace_back([&, i, x] { threadIdx = {(unsigned)i, 0, 0}; blockIdx = {(unsigned)x, 0, 0}; fn(); });
        for (auto& t : th) t.join();
    }
    for (auto p : wb) delete p;
}

static int blocks(int n, int per) { return (n + per - 1) / per; }

int main(int argc, char** argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s B T C V sms hot\n", argv[0]);
        return 2;
    }
    int B = atoi(argv[1]), Tn = atoi(argv[2]), C = atoi(argv[3]), V = atoi(argv[4]), sms = atoi(argv[5]), hot = atoi(argv[6]);
    int BT = B * Tn, maxT = Tn + 3;
    // encoderPlan
    int K, G, S, P;
    if (V <= 1024) {
        K = 1, G = V, S = std::max(1, std::min(16, BT / (4 * V))), P = blocks(BT, S);
    } else {
        G = std::min(V, 2 * sms), K = blocks(V, G), G = blocks(V, K), S = 1, P = BT;
    }
    std::mt19937 rng(B * 7919 + Tn * 131 + C * 17 + V);
    std::normal_distribution<float> nd;
    std::vector<T> wte((size_t)V * C), wpe((size_t)maxT * C);
    for (auto& x : wte) x = from_f32<T>(nd(rng));
    for (auto& x : wpe) x = from_f32<T>(nd(rng));
    std::vector<int> tok(BT);
    for (int i = 0; i < BT; i++) tok[i] = (hot && i % 2 == 0) ? V - 1 : (int)(rng() % V);
    std::vector<T> dout((size_t)BT * C);
    for (auto& x : dout) x = from_f32<T>(nd(rng));
    std::vector<float> dwte0((size_t)V * C), dwpe0((size_t)maxT * C);
    for (auto& x : dwte0) x = nd(rng);
    for (auto& x : dwpe0) x = nd(rng);

    // reference
    std::vector<float> rout((size_t)BT * C), rte = dwte0, rpe = dwpe0;
    for (int bt = 0; bt < BT; bt++)
        for (int c = 0; c < C; c++) {
            rout[(size_t)bt * C + c] = load(wte.data() + (size_t)tok[bt] * C, c) + load(wpe.data() + (size_t)(bt % Tn) * C, c);
            rte[(size_t)tok[bt] * C + c] += load(dout.data() + (size_t)bt * C, c);
            rpe[(size_t)(bt % Tn) * C + c] += load(dout.data() + (size_t)bt * C, c);
        }
    int bad = 0;
    for (int vec = 0; vec <= (C % 4 == 0); vec++) {
        std::vector<float> out((size_t)BT * C, NAN);
        launch(3, 64, [&] { encoder_forward(out.data(), wte.data(), wpe.data(), tok.data(), BT, Tn, C, V, vec); });
        if (memcmp(out.data(), rout.data(), out.size() * 4) != 0) {
            printf("forward vec=%d: not the reference's bits\n", vec);
            bad++;
        }
    }
    std::vector<float> te = dwte0, pe = dwpe0, part((size_t)S * V * C, NAN);
    int nW = blocks(Tn * C, ENC_THREADS);
    launch(G * S + nW, ENC_THREADS, [&] {
        encoder_backward(te.data(), part.data(), pe.data(), dout.data(), tok.data(), B, Tn, C, V, K, G, S, P);
    });
    if (S > 1) launch(2, 64, [&] { encoder_backward_combine(te.data(), part.data(), S, (long long)V * C); });
    if (memcmp(pe.data(), rpe.data(), pe.size() * 4) != 0) {
        printf("dwpe: not the reference's bits\n");
        bad++;
    }
    double worst = 0;
    for (size_t i = 0; i < te.size(); i++) {
        double d = std::fabs((double)te[i] - rte[i]);
        if (!(d <= 1e-3 * (1 + std::fabs(rte[i])))) {
            if (bad < 10) printf("dwte[%zu] = %.9g, want %.9g\n", i, te[i], rte[i]);
            bad++;
        }
        worst = std::max(worst, d);
    }
    bool bits = memcmp(te.data(), rte.data(), te.size() * 4) == 0;
    if (S == 1 && !bits) {
        printf("dwte: unsplit but not the reference's bits\n");
        bad++;
    }
    printf("B%d T%d C%d V%d hot%d: K=%d G=%d S=%d: dwte %s (max |diff| %.3g) %s\n", B, Tn, C, V, hot, K, G, S,
           bits ? "bit-identical" : "close", worst, bad ? "FAIL" : "OK");
    return bad ? 1 : 0;
}
