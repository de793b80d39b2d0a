// main.cpp: host emulator of kernels/adamw.cu's adamw_bf16m (see run.sh):
// the kernel compiled as C++ (its __f*_rn intrinsics as plain IEEE fp32
// operations, no contraction), every thread of every block run in turn
// (the kernel has no barriers), on pkg/device/cpu TestAdamWBF16Golden's
// inputs; it prints the FNV-1a hash of the master, m and v bits, which
// run.sh compares with the Go test's, and checks that the working copy is
// the master rounded to T.
//   usage: emu_BF16
#include <cstdio>
#include <cstdlib>
#include <math.h>
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
#include "../harness.h"
#include "adamw.cu"

static float bits(unsigned u) { return __uint_as_float(u); }

int main() {
    const int n = 5000;
    std::vector<float> p(n), g(n);
    std::vector<unsigned short> m(n), v(n);
    std::vector<T> work(n);
    for (int i = 0; i < n; i++) {
        p[i] = (float)((i * 37) % 201 - 100) / 128;
        g[i] = (float)((i * 53) % 157 - 78) / 64;
        m[i] = f32_to_bf16_bits((float)((i * 29) % 101 - 50) / 1024);
        v[i] = f32_to_bf16_bits((float)((i * 31) % 89 + 1) / 256);
    }
    // chunks: [0, 3001) decayed, [3004, 5000) not (adamChunks' table)
    const unsigned chunks[4] = {0, 3001u | (1u << 31), 3004, 1996};
    // hp.Consts() of the Go test, bit for bit (TestAdamWBF16Golden logs them)
    const float gs = bits(0x3f000000), decay = bits(0x3f7ff972), w1 = bits(0x3dccccd0), b2 = bits(0x3f733333),
                w2 = bits(0x3d4cccd0), step = bits(0xbb71d489), bc2 = bits(0x3ec15c4c), eps = bits(0x322bcc77);
    gridDim = {2, 1, 1};
    blockDim = {ADAMW_BLOCK, 1, 1};
    for (unsigned b = 0; b < 2; b++)
        for (unsigned t = 0; t < ADAMW_BLOCK; t++) {
            blockIdx = {b, 0, 0};
            threadIdx = {t, 0, 0};
            adamw_bf16m(p.data(), work.data(), g.data(), m.data(), v.data(), chunks, nullptr, gs, 1, decay, 1, w1, 1, b2,
                        w2, step, bc2, eps, 0x5eed42ull, 3u);
        }
    unsigned long long h = 0xcbf29ce484222325ull;
    auto mix = [&](unsigned x) {
        for (int k = 0; k < 4; k++) h = (h ^ ((x >> (8 * k)) & 0xff)) * 0x100000001b3ull;
    };
    int bad = 0;
    for (int i = 0; i < n; i++) {
        mix(__float_as_uint(p[i]));
        mix(m[i]);
        mix(v[i]);
        const bool in = i < 3001 || i >= 3004;
        if (in && __float_as_uint(load(&work[i], 0)) != __float_as_uint(round_to<T>(p[i]))) bad++;
    }
    printf("hash %#llx, %d working-copy elements off\n", h, bad);
    return bad != 0;
}
