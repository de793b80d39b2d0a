// main.cpp: host emulator of kernels/layernorm_async.cu beside
// kernels/layernorm.cu's fast path (see run.sh): every CUDA thread of a CTA
// is a host thread, __syncthreads a CTA barrier, __syncwarp and the warp
// shuffles a per-warp barrier; cp.async is a queue per thread whose copies
// land at the thread's wait_group (late: a read before the wait sees the
// NaN poison of shared memory) or at once (EMU_EAGER=1: a slot refilled
// before its row was consumed is overwritten).
//   usage: emu_BF16 N C BLOCKS STAGES RF32   (RF32 1: the row input fp32)
#include <cstdio>
#include <cstdlib>
#include <random>
#include <deque>
#include <math.h>
thread_local dim3e threadIdx, blockIdx;
dim3e blockDim, gridDim;
static std::barrier<>* cta;
static std::vector<std::barrier<>*> warpbar;
static float slot[64][32];
static bool eager = getenv("EMU_EAGER") != nullptr;
void __syncthreads() { cta->arrive_and_wait(); }
static int W() { return threadIdx.x >> 5; }
static int L() { return threadIdx.x & 31; }
void __syncwarp() { warpbar[W()]->arrive_and_wait(); }
float __shfl_xor_sync(unsigned, float v, int off) {
    slot[W()][L()] = v;
    __syncwarp();
    float r = slot[W()][L() ^ off];
    __syncwarp();
    return r;
}
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fadd_rn(float a, float b) { return a + b; }
float druto_emu_f16_to_f32(unsigned short h) { _Float16 x; memcpy(&x, &h, 2); return (float)x; }
unsigned short druto_emu_f32_to_f16(float v) { _Float16 x = (_Float16)v; unsigned short h; memcpy(&h, &x, 2); return h; }

// cp.async: per thread, committed groups of copies (the source read at the
// issue, the destination written when the group completes)
struct Copy { void* dst; unsigned char src[16]; int n; };
thread_local std::vector<Copy> open_group;
thread_local std::deque<std::vector<Copy>> groups;
static std::atomic<long> copies{0};
void druto_emu_cp(void* s, const void* g, int bytes) {
    if (bytes != 4 && bytes != 8 && bytes != 16) { fprintf(stderr, "cp.async of %d bytes\n", bytes); exit(2); }
    if (((uintptr_t)s | (uintptr_t)g) % bytes != 0) { fprintf(stderr, "cp.async of %d bytes misaligned: %p %p\n", bytes, s, g); exit(2); }
    Copy c{s, {}, bytes};
    memcpy(c.src, g, bytes);
    copies++;
    if (eager) memcpy(s, c.src, bytes);
    else open_group.push_back(c);
}
void druto_emu_commit() { groups.push_back(std::move(open_group)); open_group.clear(); }
void druto_emu_wait(int pending) {
    while ((int)groups.size() > pending) {
        for (auto& c : groups.front()) memcpy(c.dst, c.src, c.n);
        groups.pop_front();
    }
}
static std::vector<float> dyn;
static size_t dynBytes;
float* druto_emu_dyn_smem() { return dyn.data(); }

#include "layernorm.cu"
#include "layernorm_async.cu"

static void launch(int gx, int threads, size_t smem, std::function<void()> fn) {
    gridDim = {(unsigned)gx, 1, 1};
    blockDim = {(unsigned)threads, 1, 1};
    for (int x = 0; x < gx; x++) {
        dynBytes = smem;
        dyn.assign(smem / 4 + 4, NAN); // poison: a read before its copy lands is NaN
        std::barrier<> b(threads);
        cta = &b;
        warpbar.clear();
        for (int i = 0; i < threads / 32; i++) warpbar.push_back(new std::barrier<>(32));
        std::vector<std::thread> th;
        for (int i = 0; i < threads; i++)
            th.emplace_back([&, i, x] {
                threadIdx = {(unsigned)i, 0, 0};
                blockIdx = {(unsigned)x, 0, 0};
                groups.clear();
                open_group.clear();
                fn();
                if (!groups.empty() || !open_group.empty()) { fprintf(stderr, "copies pending at the thread's exit\n"); exit(2); }
            });
        for (auto& t : th) t.join();
        for (auto* w : warpbar) delete w;
    }
}

// The slot sizes of layernorm_async.cu (pkg/device/gpu/layernorm.go's lnAsyncSmem).
static int r16(int n) { return (n + 15) & ~15; }

template <typename R>
static int run(int N, int C, int blocks, int stages) {
    std::mt19937 rng(7 + N + C);
    std::normal_distribution<float> nd(0, 1);
    const size_t n = (size_t)N * C;
    auto fill = [&](auto& v, float m, float s) { for (auto& x : v) x = from_f32<std::remove_reference_t<decltype(x)>>(m + s * nd(rng)); };
    std::vector<R> x(n), a(n);
    std::vector<T> b(n), w(C), bias(C), dout(n);
    fill(x, 0.5f, 2.0f); fill(a, 0.5f, 1.5f); fill(b, 0.0f, 1.0f); fill(w, 1.0f, 0.2f); fill(bias, 0.0f, 0.1f); fill(dout, 0.0f, 1.0f);
    const int rowsBlocks = (N + 7) / 8;
    int fails = 0;
    auto same = [&](const char* what, const void* p, const void* q, size_t bytes) {
        if (memcmp(p, q, bytes) != 0) { printf("  %s differs from layernorm.cu's\n", what); fails++; }
    };
    // forward: v1 (a warp per row, 256 threads) against async, the same bits
    {
        std::vector<T> o1(n), o2(n);
        std::vector<float> m1(N, NAN), s1(N, NAN), m2(N, NAN), s2(N, NAN);
        launch(rowsBlocks, 256, 0, [&] {
            if constexpr (sizeof(R) == 4 && DTYPE != DRUTO_F32) layernorm_forward_rf32(o1.data(), m1.data(), s1.data(), (const float*)x.data(), w.data(), bias.data(), N, C, 1);
            else layernorm_forward(o1.data(), m1.data(), s1.data(), (const T*)x.data(), w.data(), bias.data(), N, C, 1);
        });
        size_t smem = 2 * C * 4 + (size_t)LN_ASYNC_WARPS * stages * r16(C * sizeof(R));
        launch(blocks, LN_ASYNC_BLOCK, smem, [&] {
            if constexpr (sizeof(R) == 4 && DTYPE != DRUTO_F32) layernorm_forward_async_rf32(o2.data(), m2.data(), s2.data(), (const float*)x.data(), w.data(), bias.data(), N, C, stages);
            else layernorm_forward_async(o2.data(), m2.data(), s2.data(), (const T*)x.data(), w.data(), bias.data(), N, C, stages);
        });
        same("forward out", o1.data(), o2.data(), n * sizeof(T));
        same("forward mean", m1.data(), m2.data(), N * 4);
        same("forward rstd", s1.data(), s2.data(), N * 4);
        // and a float64 reference: out within a few roundings of T
        double worst = 0;
        for (int r = 0; r < N; r++) {
            double m = 0, v = 0;
            for (int c = 0; c < C; c++) m += load(x.data(), (size_t)r * C + c);
            m /= C;
            for (int c = 0; c < C; c++) { double d = load(x.data(), (size_t)r * C + c) - m; v += d * d; }
            double s = 1 / std::sqrt(v / C + 1e-5);
            for (int c = 0; c < C; c++) {
                double want = (load(x.data(), (size_t)r * C + c) - m) * s * load(w.data(), c) + load(bias.data(), c);
                double got = load(o2.data(), (size_t)r * C + c);
                double ulp = DTYPE == DRUTO_F32 ? 1e-5 : DTYPE == DRUTO_BF16 ? 1.0 / 128 : 1.0 / 1024;
                worst = std::max(worst, std::fabs(got - want) / (ulp * (std::fabs(want) + 1)));
            }
        }
        if (!(worst <= 1)) { printf("  forward out off the float64 reference: %.3g of the bound\n", worst); fails++; }
    }
    // residual forward, out of place and in place (res = a)
    for (int inplace = 0; inplace < 2; inplace++) {
        std::vector<R> r1(n), r2 = a;
        std::vector<T> o1(n), o2(n);
        std::vector<float> m1(N), s1(N), m2(N), s2(N);
        launch(rowsBlocks, 256, 0, [&] {
            if constexpr (sizeof(R) == 4 && DTYPE != DRUTO_F32) residual_layernorm_forward_rf32((float*)r1.data(), o1.data(), m1.data(), s1.data(), (const float*)a.data(), b.data(), w.data(), bias.data(), N, C, 1);
            else residual_layernorm_forward((T*)r1.data(), o1.data(), m1.data(), s1.data(), (const T*)a.data(), b.data(), w.data(), bias.data(), N, C, 1);
        });
        std::vector<R> src = a;
        R* res = inplace ? src.data() : r2.data();
        size_t smem = 2 * C * 4 + (size_t)LN_ASYNC_WARPS * stages * r16(C * sizeof(R) + C * sizeof(T));
        launch(blocks, LN_ASYNC_BLOCK, smem, [&] {
            if constexpr (sizeof(R) == 4 && DTYPE != DRUTO_F32) residual_layernorm_forward_async_rf32((float*)res, o2.data(), m2.data(), s2.data(), (const float*)src.data(), b.data(), w.data(), bias.data(), N, C, stages);
            else residual_layernorm_forward_async((T*)res, o2.data(), m2.data(), s2.data(), (const T*)src.data(), b.data(), w.data(), bias.data(), N, C, stages);
        });
        same(inplace ? "residual (in place) res" : "residual res", r1.data(), res, n * sizeof(R));
        same("residual out", o1.data(), o2.data(), n * sizeof(T));
        same("residual mean", m1.data(), m2.data(), N * 4);
        same("residual rstd", s1.data(), s2.data(), N * 4);
    }
    // backward: dinp the same bits as v1's; dweight, dbias (partials added
    // here in block order, as layernorm_reduce) against a float64 reference
    {
        std::vector<float> mean(N), rstd(N);
        std::vector<T> o(n);
        launch(rowsBlocks, 256, 0, [&] {
            if constexpr (sizeof(R) == 4 && DTYPE != DRUTO_F32) layernorm_forward_rf32(o.data(), mean.data(), rstd.data(), (const float*)x.data(), w.data(), bias.data(), N, C, 1);
            else layernorm_forward(o.data(), mean.data(), rstd.data(), (const T*)x.data(), w.data(), bias.data(), N, C, 1);
        });
        std::vector<R> d0(n);
        fill(d0, 0.0f, 1.0f);
        std::vector<R> di1 = d0, di2 = d0;
        const int nb1 = 3;
        std::vector<float> p1((size_t)nb1 * 2 * C, NAN), p2((size_t)blocks * 2 * C, NAN);
        launch(nb1, LN_BWD_BLOCK, 0, [&] {
            if constexpr (sizeof(R) == 4 && DTYPE != DRUTO_F32) layernorm_backward_rf32((float*)di1.data(), p1.data(), dout.data(), (const float*)x.data(), w.data(), mean.data(), rstd.data(), N, C, 1);
            else layernorm_backward((T*)di1.data(), p1.data(), dout.data(), (const T*)x.data(), w.data(), mean.data(), rstd.data(), N, C, 1);
        });
        size_t smem = (size_t)C * 4 + (size_t)LN_ASYNC_WARPS * stages * r16(2 * C * sizeof(R) + C * sizeof(T) + 8);
        launch(blocks, LN_ASYNC_BLOCK, smem, [&] {
            if constexpr (sizeof(R) == 4 && DTYPE != DRUTO_F32) layernorm_backward_async_rf32((float*)di2.data(), p2.data(), dout.data(), (const float*)x.data(), w.data(), mean.data(), rstd.data(), N, C, stages);
            else layernorm_backward_async((T*)di2.data(), p2.data(), dout.data(), (const T*)x.data(), w.data(), mean.data(), rstd.data(), N, C, stages);
        });
        same("backward dinp", di1.data(), di2.data(), n * sizeof(R));
        double worst = 0;
        for (int c = 0; c < 2 * C; c++) {
            double want = 0, mag = 0, got = 0;
            for (int r = 0; r < N; r++) {
                double g = load(dout.data(), (size_t)r * C + c % C);
                double nn = (double)rstd[r] * (load(x.data(), (size_t)r * C + c % C) - mean[r]);
                double t = c < C ? nn * g : g;
                want += t;
                mag += std::fabs(t);
            }
            for (int k = 0; k < blocks; k++) got += p2[(size_t)k * 2 * C + c];
            worst = std::max(worst, std::fabs(got - want) / (1e-6 * mag + 1e-30));
        }
        if (!(worst <= 1)) { printf("  backward dweight/dbias off the float64 reference: %.3g of 1e-6·Σ|.|\n", worst); fails++; }
    }
    printf("N%d C%d blocks%d stages%d %s/%s %s%s\n", N, C, blocks, stages, DTYPE == DRUTO_F32 ? "f32" : DTYPE == DRUTO_BF16 ? "bf16" : "f16",
           sizeof(R) == 4 ? "f32" : "same", eager ? "(eager copies) " : "", fails ? "FAIL" : "OK");
    return fails;
}

int main(int argc, char** argv) {
    if (argc < 6) { fprintf(stderr, "usage: %s N C BLOCKS STAGES RF32\n", argv[0]); return 2; }
    int N = atoi(argv[1]), C = atoi(argv[2]), blocks = atoi(argv[3]), stages = atoi(argv[4]), rf32 = atoi(argv[5]);
    int fails = rf32 ? run<float>(N, C, blocks, stages) : run<T>(N, C, blocks, stages);
    if (copies == 0) { printf("no cp.async was issued\n"); return 1; }
    return fails ? 1 : 0;
}
