// main.cpp: host emulator of kernels/adamw_fp8.cu's adamw_fp8_e4m3 (a
// development tool, not part of druto; no GPU needed): every CUDA thread
// of a block is a host thread, __syncthreads a std::barrier, the warp
// shuffle a slot table (harness.h), atomicMax a compare-and-swap loop and
// the PTX conversion cvt.rn.satfinite.e4m3x2.f32 kernels/emu/fp8's cvt8
// (fp8cvt.h); the __f*_rn intrinsics are plain IEEE fp32 operations (no
// contraction: -ffp-contract=off is g++'s default for ISO C++).
//
//   emu_DT io NW TOTAL REV     for pkg/device/gpu's
//                              TestAdamWFP8EmulatorMatchesCPU: the kernel
//                              over NW weights of a flat buffer of TOTAL
//                              elements (blocks last to first with REV 1)
//                              stdin: per weight off, rows, cols, dec,
//                              vec_row, vec_col (i32), scale (f32), amax
//                              (2 f32: what is pending); the step state
//                              (16 f32); w1, b2, w2, eps (f32), small
//                              (i32); master, grads, m, v (TOTAL f32
//                              each), work (TOTAL of T, raw)
//                              stdout: master, m, v (TOTAL f32 each),
//                              work (TOTAL of T), then per weight q
//                              (rows·cols bytes), qt (the same), amax (2 f32)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <math.h>
#include "../harness.h"
#include "../fp8cvt.h"
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
#include "adamw_fp8.cu"

template <typename V> static bool readAll(V* p, size_t n) { return fread(p, sizeof(V), n, stdin) == n; }

int main(int argc, char** argv) {
    if (argc != 5 || std::string(argv[1]) != "io") {
        fprintf(stderr, "usage: %s io NW TOTAL REV\n", argv[0]);
        return 2;
    }
    const int nw = atoi(argv[2]);
    const size_t total = (size_t)atoll(argv[3]);
    reverseBlocks = atoi(argv[4]) != 0;
    std::vector<AF8W> ws(nw);
    std::vector<float> scales(nw), amax(2 * (size_t)nw);
    std::vector<std::vector<unsigned char>> q(nw), qt(nw);
    int tiles = 0;
    for (int i = 0; i < nw; i++) {
        int h[6];
        if (!readAll(h, 6) || !readAll(&scales[i], 1) || !readAll(&amax[2 * i], 2)) return 3;
        AF8W& w = ws[i];
        w.off = (unsigned long long)h[0], w.rows = h[1], w.cols = h[2], w.dec = h[3], w.vec_row = h[4], w.vec_col = h[5];
        q[i].assign((size_t)w.rows * w.cols, 0xA5); // canaries: every byte must be written
        qt[i].assign((size_t)w.rows * w.cols, 0x5A);
        w.q = q[i].data(), w.qt = qt[i].data(), w.amax = &amax[2 * i], w.scale = &scales[i];
        w.tile0 = tiles;
        tiles += ((w.rows + AF8_TILE - 1) / AF8_TILE) * ((w.cols + AF8_TILE - 1) / AF8_TILE);
    }
    float st[16], w1, b2, w2, eps;
    int small;
    if (!readAll(st, 16) || !readAll(&w1, 1) || !readAll(&b2, 1) || !readAll(&w2, 1) || !readAll(&eps, 1) || !readAll(&small, 1))
        return 3;
    std::vector<float> master(total), grads(total), m(total), v(total);
    std::vector<T> work(total);
    if (!readAll(master.data(), total) || !readAll(grads.data(), total) || !readAll(m.data(), total) ||
        !readAll(v.data(), total) || !readAll(work.data(), total))
        return 3;
    launch(tiles, 1, AF8_BLOCK, [&] {
        adamw_fp8_e4m3(master.data(), work.data(), grads.data(), m.data(), v.data(), ws.data(), nw, st, w1, small, b2, w2, eps);
    });
    fwrite(master.data(), 4, total, stdout);
    fwrite(m.data(), 4, total, stdout);
    fwrite(v.data(), 4, total, stdout);
    fwrite(work.data(), sizeof(T), total, stdout);
    for (int i = 0; i < nw; i++) {
        fwrite(q[i].data(), 1, q[i].size(), stdout);
        fwrite(qt[i].data(), 1, qt[i].size(), stdout);
        fwrite(&amax[2 * i], 4, 2, stdout);
    }
    return 0;
}
