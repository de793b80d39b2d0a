// main.cpp: host emulator of kernels/fp8transpose.cu's transpose_fp8 (see
// run.sh): every CUDA thread of a block is a host thread, __syncthreads a
// std::barrier (harness.h).
//
//   emu selftest                          fixed shapes checked here against
//                                         a plain transpose, every vector
//                                         path, blocks in both orders
//   emu io R C VECIN VECOUT REVERSE       for pkg/device/gpu's
//                                         TestTransposeFP8EmulatorMatchesCPU:
//                                         stdin: in's R·C bytes; stdout:
//                                         out's C·R bytes (blocks last to
//                                         first with REVERSE 1)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "../harness.h"
#include "fp8transpose.cu"

static std::vector<unsigned char> run(const std::vector<unsigned char>& in, int R, int C, int vin, int vout) {
    // out is filled with a canary: every byte must be written.
    std::vector<unsigned char> out((size_t)R * C, 0xa5);
    const int gx = (R + TR_ROWS - 1) / TR_ROWS, gy = (C + TR_COLS - 1) / TR_COLS;
    launch(gx, gy, TR_BLOCK, [&] { transpose_fp8(out.data(), in.data(), R, C, vin, vout); });
    return out;
}

static int selftest() {
    int bad = 0;
    const int shapes[][2] = {{1, 1}, {1, 17}, {17, 1}, {37, 100}, {64, 96}, {48, 50}, {33, 96}, {130, 160}, {80, 528}, {64, 256}, {16, 302}, {96, 514}};
    for (auto& s : shapes) {
        const int R = s[0], C = s[1];
        std::vector<unsigned char> in((size_t)R * C);
        for (size_t i = 0; i < in.size(); i++) in[i] = (unsigned char)(i * 131 + (i >> 8) * 7 + 3);
        for (int rev = 0; rev < 2; rev++) {
            reverseBlocks = rev != 0;
            const int vin = C % 16 == 0, vout = R % 16 == 0;
            for (int v = 0; v < 2; v++) {
                std::vector<unsigned char> out = run(in, R, C, v ? vin : 0, v ? vout : 0);
                for (int r = 0; r < R; r++)
                    for (int c = 0; c < C; c++)
                        if (out[(size_t)c * R + r] != in[(size_t)r * C + c]) {
                            fprintf(stderr, "selftest: (%d,%d) vec %d reverse %d: out[%d][%d] %#x, want %#x\n", R, C, v, rev,
                                    c, r, out[(size_t)c * R + r], in[(size_t)r * C + c]);
                            bad++;
                            r = R;
                            break;
                        }
            }
        }
    }
    reverseBlocks = false;
    printf(bad ? "selftest FAILED\n" : "selftest OK\n");
    return bad ? 1 : 0;
}

int main(int argc, char** argv) {
    if (argc >= 2 && !strcmp(argv[1], "selftest")) return selftest();
    if (argc != 7 || strcmp(argv[1], "io")) {
        fprintf(stderr, "usage: %s selftest | io R C VECIN VECOUT REVERSE\n", argv[0]);
        return 2;
    }
    const int R = atoi(argv[2]), C = atoi(argv[3]), vin = atoi(argv[4]), vout = atoi(argv[5]);
    reverseBlocks = atoi(argv[6]) != 0;
    std::vector<unsigned char> in((size_t)R * C);
    if (fread(in.data(), 1, in.size(), stdin) != in.size()) return 3;
    std::vector<unsigned char> out = run(in, R, C, vin, vout);
    fwrite(out.data(), 1, out.size(), stdout);
    return 0;
}
