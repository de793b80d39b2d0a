// main.cpp: host emulator of kernels/crossentropy_fp8.cu's
// crossentropy_fp8_l3 (a development tool, not part of druto; no GPU
// needed): every CUDA thread of a block is a host thread (harness.h),
// atomicMax a compare-and-swap loop, the PTX conversion
// cvt.rn.satfinite.e5m2x2.f32 fp8cvt.h's cvt8 (kernels/emu/fp8's,
// from the instruction's definition) and ex2.approx.ftz the host's exp2f
// (crossentropy.cuh's DRUTO_EMU branch). crossentropy_fp8_tma needs the
// bulk-copy engine and is not emulated; its rows run the same functions.
//
//   emu_DT io N V GRID REV STORE
//                            the kernel on GRID blocks (a persistent grid
//                            striding over the N rows; REV 1: the blocks
//                            last to first; STORE the kernel's store: 0
//                            leaves the logits as they were)
//                            stdin: scale, dscale, the loss scale at
//                            dscale_mul (0: a null pointer), the pending
//                            amax pair (f32 each), targets (N i32), logits
//                            (N·V of T, raw)
//                            stdout: losses (N f32), the logits after
//                            (N·V of T: with STORE 0 the input's), q
//                            (N·V bytes), amax (2 f32)
//
// pkg/device/gpu's TestCrossEntropyFP8EmulatorMatchesCPU runs it against
// pkg/device/cpu's CrossEntropyFP8 (go test).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <math.h>
#include <vector>
#include "../harness.h"

#include "../fp8cvt.h"
inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
inline float __fmul_rn(float a, float b) { return a * b; }

#include "crossentropy_fp8.cu"

static void readAll(void* p, size_t n) {
    if (fread(p, 1, n, stdin) != n) {
        fprintf(stderr, "emu: short input\n");
        exit(2);
    }
}

int main(int argc, char** argv) {
    if (argc != 7 || strcmp(argv[1], "io") != 0) {
        fprintf(stderr, "usage: emu_DT io N V GRID REV STORE\n");
        return 2;
    }
    const int N = atoi(argv[2]), V = atoi(argv[3]), G = atoi(argv[4]), STORE = atoi(argv[6]);
    reverseBlocks = atoi(argv[5]) != 0;
    float head[5]; // scale, dscale, mul, amax[0], amax[1]
    readAll(head, sizeof head);
    std::vector<int> tg(N);
    readAll(tg.data(), 4 * (size_t)N);
    std::vector<T> x((size_t)N * V);
    readAll(x.data(), sizeof(T) * x.size());
    std::vector<float> losses(N);
    std::vector<unsigned char> q((size_t)N * V, 0xa5);
    float amax[2] = {head[3], head[4]}, scale = head[0], mul = head[2];
    launch(G, 1, CEF8_THREADS, [&] {
        crossentropy_fp8_l3(losses.data(), x.data(), q.data(), amax, tg.data(), &scale, N, V, head[1], mul != 0 ? &mul : nullptr,
                            STORE);
    });
    fwrite(losses.data(), 4, N, stdout);
    fwrite(x.data(), sizeof(T), x.size(), stdout);
    fwrite(q.data(), 1, q.size(), stdout);
    fwrite(amax, 4, 2, stdout);
    return 0;
}
