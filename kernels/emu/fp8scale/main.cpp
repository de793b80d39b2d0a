// main.cpp: host emulator of kernels/fp8scale.cu's fp8_scale_update (see
// run.sh): every CUDA thread of a block is a host thread, __syncthreads a
// std::barrier, the warp shuffle a slot table (harness.h).
//
//   emu selftest                       fixed cases checked here: the first
//                                      scale of each format, the clamp, a
//                                      non-finite amax, the ring's wrap
//   emu io K H MARGIN STEPS REVERSE    for pkg/device/gpu's
//                                      TestFP8ScaleEmulatorMatchesAmp:
//                                      stdin: K formats (i32), then STEPS·K
//                                      pending pairs (amax f32, underflow
//                                      count u32); each step sets them and
//                                      runs the kernel (blocks last to first
//                                      with REVERSE 1); stdout: st after
//                                      each step (K·(4+H) f32), then meta
//                                      (K·FP8_META i32)
//   emu io K H MARGIN STEPS REVERSE SUB
//                                      the same; with SUB 1 every odd step
//                                      updates only the odd records, listed
//                                      last to first (the record list)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <math.h>
inline float __frcp_rn(float x) { return 1.0f / x; }
using std::ldexp;
using std::fmin;
#include "../harness.h"
#include "fp8scale.cu"

static void step(std::vector<float>& st, std::vector<int>& meta, int K, int H, int margin,
                 const std::vector<int>* recs = nullptr) {
    const int n = recs ? (int)recs->size() : K;
    if (n == 0) return;
    launch(n, 1, FP8S_BLOCK, [&] { fp8_scale_update(st.data(), meta.data(), recs ? recs->data() : nullptr, K, H, margin); });
}

static int selftest() {
    int bad = 0;
    auto check = [&](const char* what, bool ok) {
        if (!ok) { fprintf(stderr, "selftest: %s\n", what); bad++; }
    };
    const int K = 3, H = 2;
    std::vector<float> st(K * (4 + H), 0.f);
    std::vector<int> meta(K * FP8_META, 0);
    for (int k = 0; k < K; k++) st[2 * K + k] = st[3 * K + k] = 1.f;
    meta[1 * FP8_META + FP8_META_FORMAT] = 1; // tensor 1 is E5M2
    auto under = [&](int k, unsigned int n) { memcpy(&st[2 * k + 1], &n, 4); };
    st[0] = 448.f, st[2] = 1.f, st[4] = ldexpf(1.f, -130);
    under(0, 7), under(2, 0xffffffffu);
    step(st, meta, K, H, 0);
    check("e4m3 amax 448 gives scale 1", st[2 * K + 0] == 1.f && st[3 * K + 0] == 1.f);
    check("e5m2 amax 1 gives scale 57344", st[2 * K + 1] == 57344.f && st[3 * K + 1] == 1.f / 57344.f);
    check("a tiny amax clamps to the largest float", st[2 * K + 2] == 3.4028234663852886e38f);
    check("amax and underflows cleared", st[0] == 0.f && st[1] == 0.f && st[2] == 0.f && st[3] == 0.f && st[4] == 0.f && st[5] == 0.f);
    check("underflows kept, saturating", meta[0 * FP8_META + FP8_META_UNDER] == 7 && meta[1 * FP8_META + FP8_META_UNDER] == 0 &&
                                             meta[2 * FP8_META + FP8_META_UNDER] == 0x7fffffff);
    st[0] = NAN, st[2] = INFINITY, st[4] = 0.f;
    under(1, 3);
    step(st, meta, K, H, 0);
    check("NaN and Inf counted, scales kept", meta[0 * FP8_META + FP8_META_BAD] == 1 && meta[1 * FP8_META + FP8_META_BAD] == 1 &&
                                                  st[2 * K + 0] == 1.f && st[2 * K + 1] == 57344.f);
    check("underflows of a step with an Inf amax kept", meta[1 * FP8_META + FP8_META_UNDER] == 3 && meta[0 * FP8_META + FP8_META_UNDER] == 0);
    check("amax 0 keeps the window's maximum", st[2 * K + 2] == 3.4028234663852886e38f && meta[2 * FP8_META + FP8_META_FILLED] == 2);
    st[0] = 224.f;
    step(st, meta, K, H, 0);
    check("the window's maximum (448) still rules", st[2 * K + 0] == 1.f);
    st[0] = 112.f;
    step(st, meta, K, H, 0);
    check("448 left the ring of 2", st[2 * K + 0] == 2.f);
    printf(bad ? "selftest FAILED\n" : "selftest OK\n");
    return bad ? 1 : 0;
}

int main(int argc, char** argv) {
    if (argc >= 2 && !strcmp(argv[1], "selftest")) return selftest();
    if ((argc != 7 && argc != 8) || strcmp(argv[1], "io")) {
        fprintf(stderr, "usage: %s selftest | io K H MARGIN STEPS REVERSE [SUB]\n", argv[0]);
        return 2;
    }
    const int K = atoi(argv[2]), H = atoi(argv[3]), margin = atoi(argv[4]), steps = atoi(argv[5]);
    reverseBlocks = atoi(argv[6]) != 0;
    const bool sub = argc == 8 && atoi(argv[7]) != 0;
    std::vector<int> odd;
    for (int k = K - 1; k >= 0; k--)
        if (k % 2 == 1) odd.push_back(k);
    std::vector<float> st((size_t)K * (4 + H), 0.f);
    std::vector<int> meta((size_t)K * FP8_META, 0);
    for (int k = 0; k < K; k++) {
        st[2 * K + k] = st[3 * K + k] = 1.f;
        if (fread(&meta[(size_t)k * FP8_META + FP8_META_FORMAT], 4, 1, stdin) != 1) return 3;
    }
    for (int s = 0; s < steps; s++) {
        if (fread(st.data(), 4, 2 * K, stdin) != (size_t)(2 * K)) return 3;
        step(st, meta, K, H, margin, sub && s % 2 == 1 ? &odd : nullptr);
        fwrite(st.data(), 4, st.size(), stdout);
    }
    fwrite(meta.data(), 4, meta.size(), stdout);
    return 0;
}
