// main.cpp: host emulator of kernels/decode_token.cu (see run.sh): every
// CUDA thread of every block of the grid runs as a host thread at the same
// time (launch_grid: the blocks wait for each other's flagged words), and
// the step's output is compared with a float64 reference of the ops one by
// one with the same rounding points to T (pkg/gpt's decode step without
// the kernel: LN1, qkv, attention over the cache and the newest position, the
// projection, the residual, LN2, fc + GELU, the MLP projection, the
// residual; after the last layer the final layernorm).
//   usage: emu_BF16 [case...] (a fixed set of cases, or only those
//   numbered, from 0; exit 1 on a mismatch)
// emu.h (../flash) is included first by run.sh (-include).
#include <algorithm>
#include <csignal>
#include <unistd.h>
#include "../harness.h"
inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }
inline float tanhf(float x) { return std::tanh(x); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
#include "decode_token.cu"

static std::mt19937_64 rng(7);
static double normal() { return std::normal_distribution<double>()(rng); }
static int fails = 0;
static double val(T v) { return to_f32(v); }
static T tv(double v) { return from_f32<T>((float)v); }
static double rT(double v) { return val(tv(v)); }
static double geluRef(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }
static const int HS = DT_HS;

// A layer's parameters back to back (element offsets), the same for every
// layer: ls is their total.
struct Off {
    size_t ln1w, ln1b, qkvw, qkvb, projw, projb, ln2w, ln2b, fcw, fcb, fcpw, fcpb, n;
};
static Off offsets(size_t C) {
    Off o;
    size_t at = 0;
    auto take = [&](size_t n) { size_t r = at; at += n; return r; };
    o.ln1w = take(C), o.ln1b = take(C), o.qkvw = take(3 * C * C), o.qkvb = take(3 * C);
    o.projw = take(C * C), o.projb = take(C), o.ln2w = take(C), o.ln2b = take(C);
    o.fcw = take(4 * C * C), o.fcb = take(4 * C), o.fcpw = take(4 * C * C), o.fcpb = take(C);
    o.n = at;
    return o;
}

// The dynamic shared memory of a worker and of a head block, as
// dt_worker_smem and dt_head_smem lay it out.
static size_t worker_smem(int C, int NW) {
    const size_t rq = 2 * ((3 * C / 2 + NW - 1) / NW), rf = 2 * ((2 * C + NW - 1) / NW), rp = (C + NW - 1) / NW;
    return (rq * C + rf * C + rp * 4 * C) * sizeof(T) + (3 * C + 4 * C + rf + std::max<size_t>(rf, DT_WARPS) + 3 * C + rf) * sizeof(float);
}
static size_t head_smem(int C, int S, int cap) {
    return ((size_t)C * HS + 2 * (size_t)cap * HS + 2 * HS) * sizeof(T) + (HS + S + HS + DT_THREADS + 2 * DT_WARPS) * sizeof(float);
}

// ln: round_T(rstd·(x - mean)·w + b), two passes, biased variance, eps 1e-5.
static std::vector<double> ln(const std::vector<double>& x, const T* w, const T* b) {
    const int C = x.size();
    double m = 0, v = 0;
    for (double e : x) m += e;
    m /= C;
    for (double e : x) v += (e - m) * (e - m);
    const double rstd = 1 / std::sqrt(v / C + 1e-5);
    std::vector<double> out(C);
    for (int i = 0; i < C; i++) out[i] = rT((x[i] - m) * rstd * val(w[i]) + val(b[i]));
    return out;
}

// lin: in·Wᵀ + b (W (OC, K) row-major), unrounded.
static std::vector<double> lin(const std::vector<double>& in, const T* W, const T* b, int OC) {
    const size_t K = in.size();
    std::vector<double> out(OC);
    for (int o = 0; o < OC; o++) {
        double s = val(b[o]);
        for (size_t k = 0; k < K; k++) s += in[k] * val(W[o * K + k]);
        out[o] = s;
    }
    return out;
}

// Err: a vector's distance from its reference: the relative L2 error and
// the largest difference over the reference's rms.
struct Err {
    double rel = 0, max = 0;
    void add(const Err& e) { rel = std::max(rel, e.rel), max = std::max(max, e.max); }
};
template <typename G> static Err dist(G got, const std::vector<double>& ref) {
    double d2 = 0, r2 = 0, mx = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        const double g = got(i), d = std::fabs(g - ref[i]);
        d2 += d * d, r2 += ref[i] * ref[i];
        mx = std::max(mx, d != d ? INFINITY : d);
    }
    const double rms = std::sqrt(r2 / ref.size());
    Err e;
    e.rel = d2 != d2 ? INFINITY : std::sqrt(d2 / r2);
    e.max = mx / rms;
    return e;
}

// Tolerances: a few units of T's last place (2^-8 bf16, 2^-11 f16 relative
// rounding). The kernel's sums run in other orders than the reference's, so
// a rounding to T now and then lands on the other side and the difference
// spreads through the layers as ulps (measured: relative L2 at most 1.3e-4
// bf16, 4.6e-4 f16); a wrong head, row, bias, layer or a stale buffer was
// off by 1e-2 to 5e-1 of the rms where tried, or NaN.
static const double U = DTYPE == DRUTO_BF16 ? 0x1p-8 : 0x1p-11;
static const double TOL_REL = 2.5 * U, TOL_MAX = 16 * U;

static void on_alarm(int) {
    const char m[] = "FAIL: a launch ran past the alarm (a deadlock: a word whose flag never came, a barrier or shuffle not every thread met)\n";
    if (write(1, m, sizeof m - 1)) {}
    _exit(1);
}

static std::vector<int> only; // main's arguments: run only those cases (numbered from 0)
static int ncase = 0;

// One case: C channels (NH = C/64 heads), L layers, NW workers, a cache of S
// positions, this step at pos, cap positions a head block stages in shared
// memory. Launched twice; the second launch finds the words and the
// sequence word the first left and must give the same bits.
static void step(int C, int L, int NW, int S, int pos, int cap) {
    const int k = ncase++;
    if (!only.empty() && std::find(only.begin(), only.end(), k) == only.end()) return;
    const int NH = C / HS, G = NH + NW;
    const Off o = offsets(C);
    const long long ls = o.n, kvs = (long long)NH * S * HS;
    rng.seed(C * 1000003 + L * 10007 + NW * 101 + S * 7 + pos);
    std::vector<T> P((size_t)L * ls), lnf(2 * C);
    auto fill = [&](size_t at, size_t n, double mean, double sd) {
        for (size_t i = 0; i < n; i++) P[at + i] = tv(mean + sd * normal());
    };
    for (int l = 0; l < L; l++) {
        const size_t b = (size_t)l * ls;
        fill(b + o.ln1w, C, 1, 0.2), fill(b + o.ln1b, C, 0, 0.2);
        fill(b + o.qkvw, 3 * C * C, 0, 0.05), fill(b + o.qkvb, 3 * C, 0, 0.2);
        fill(b + o.projw, C * C, 0, 0.05), fill(b + o.projb, C, 0, 0.2);
        fill(b + o.ln2w, C, 1, 0.2), fill(b + o.ln2b, C, 0, 0.2);
        fill(b + o.fcw, 4 * C * C, 0, 0.05), fill(b + o.fcb, 4 * C, 0, 0.2);
        fill(b + o.fcpw, 4 * C * C, 0, 0.05), fill(b + o.fcpb, C, 0, 0.2);
    }
    for (int i = 0; i < C; i++) lnf[i] = tv(1 + 0.2 * normal()), lnf[C + i] = tv(0.2 * normal());
    std::vector<float> x0(C);
    for (auto& v : x0) v = normal();
    // The caches: random below pos, NaN from pos on (a read of a row this
    // step has not written shows as NaN in out).
    std::vector<T> kc((size_t)L * kvs), vc((size_t)L * kvs);
    auto at = [&](int l, int h, int j) { return (size_t)l * kvs + ((size_t)h * S + j) * HS; };
    for (int l = 0; l < L; l++)
        for (int h = 0; h < NH; h++)
            for (int j = 0; j < S; j++)
                for (int d = 0; d < HS; d++) {
                    kc[at(l, h, j) + d] = tv(j < pos ? normal() : NAN);
                    vc[at(l, h, j) + d] = tv(j < pos ? normal() : NAN);
                }
    const std::vector<T> kc0 = kc, vc0 = vc;

    // The reference, op by op.
    std::vector<double> x(x0.begin(), x0.end());
    std::vector<std::vector<double>> rk(L), rv(L);
    for (int l = 0; l < L; l++) {
        const T* p = P.data() + (size_t)l * ls;
        std::vector<double> qkv = lin(ln(x, p + o.ln1w, p + o.ln1b), p + o.qkvw, p + o.qkvb, 3 * C);
        for (auto& v : qkv) v = rT(v);
        rk[l].assign(qkv.begin() + C, qkv.begin() + 2 * C);
        rv[l].assign(qkv.begin() + 2 * C, qkv.end());
        std::vector<double> att(C);
        for (int h = 0; h < NH; h++) {
            auto key = [&](int j, int d) { return j < pos ? val(kc0[at(l, h, j) + d]) : qkv[C + h * HS + d]; };
            auto value = [&](int j, int d) { return j < pos ? val(vc0[at(l, h, j) + d]) : qkv[2 * C + h * HS + d]; };
            std::vector<double> sc(pos + 1);
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j <= pos; j++) {
                double s = 0;
                for (int d = 0; d < HS; d++) s += qkv[h * HS + d] * key(j, d);
                sc[j] = s / 8;
                mx = std::max(mx, sc[j]);
            }
            for (auto& s : sc) sum += (s = std::exp(s - mx));
            for (int d = 0; d < HS; d++) {
                double a = 0;
                for (int j = 0; j <= pos; j++) a += sc[j] * value(j, d);
                att[h * HS + d] = rT(a / sum);
            }
        }
        std::vector<double> proj = lin(att, p + o.projw, p + o.projb, C), x2(C);
        for (int i = 0; i < C; i++) x2[i] = x[i] + rT(proj[i]);
        std::vector<double> hid = lin(ln(x2, p + o.ln2w, p + o.ln2b), p + o.fcw, p + o.fcb, 4 * C);
        for (auto& v : hid) v = rT(geluRef(v));
        std::vector<double> fp = lin(hid, p + o.fcpw, p + o.fcpb, C);
        for (int i = 0; i < C; i++) x[i] = x2[i] + rT(fp[i]);
    }
    const std::vector<double> ref = ln(x, lnf.data(), lnf.data() + C);

    // The kernel, twice.
    // The links' words (a value and its flag in 8 bytes) and seq.
    std::vector<T> out(C);
    std::vector<unsigned long long> xs(2 * C), qkv(3 * C / 2), ypart((size_t)NH * C), hbuf(2 * C);
    std::vector<unsigned> seq(32, 0);
    // On the fourth case seq starts just below the flags' wrap: the first
    // launch must zero every word and start seq again from 0.
    const bool wrap = C == 128 && pos == 7;
    if (wrap) seq[0] = 0xf0000000u - 2;
    std::vector<size_t> smem(G);
    for (int k = 0; k < G; k++) smem[k] = k < NH ? head_smem(C, S, cap) : worker_smem(C, NW);
    int posv = pos;
    // The phases' marks (dt_mark) on the second case only: every one set.
    const bool trace = C == 128 && pos == 1 && L == 2;
    std::vector<unsigned long long> tr((size_t)2 * L * DT_MARKS, 0);
    std::vector<T> out1;
    bool same = true, zero = true, rows = true, kvexact = true;
    Err eo, ex, ekv;
    for (int rep = 0; rep < 2; rep++) {
        // The scratch NaN (a read before this launch wrote it shows), and
        // the caches' rows pos NaN again.
        std::fill(out.begin(), out.end(), tv(NAN));
        // Words of NaN values (fp32, and two of T) under a flag no launch waits for.
        const unsigned long long junk = 0xdeadbeef7fc07fc0ull;
        if (!(wrap && rep == 1))
            for (auto* v : {&xs, &qkv, &ypart, &hbuf}) std::fill(v->begin(), v->end(), junk);
        const unsigned seq0 = seq[0];
        for (int l = 0; l < L; l++)
            for (int h = 0; h < NH; h++)
                for (int d = 0; d < HS; d++) kc[at(l, h, pos) + d] = vc[at(l, h, pos) + d] = tv(NAN);
        alarm(300); // (26 blocks of host threads under AddressSanitizer take minutes on two cores)
        launch_grid(G, DT_THREADS, smem, [&] {
            decode_token(out.data(), x0.data(), xs.data(), qkv.data(), ypart.data(), hbuf.data(), seq.data(), P.data() + o.ln1w,
                         P.data() + o.ln1b, P.data() + o.qkvw, P.data() + o.qkvb, P.data() + o.projw, P.data() + o.projb,
                         P.data() + o.ln2w, P.data() + o.ln2b, P.data() + o.fcw, P.data() + o.fcb, P.data() + o.fcpw,
                         P.data() + o.fcpb, lnf.data(), lnf.data() + C, kc.data(), vc.data(), &posv, C, NH, S, L, cap, ls, kvs,
                         trace ? tr.data() : nullptr);
        });
        alarm(0);
        // seq advanced by L + 1 (or, near the wrap, back to 0 with every word zero).
        if (wrap && rep == 0) {
            zero = zero && seq[0] == 0;
            for (auto* v : {&xs, &qkv, &ypart, &hbuf})
                for (auto w : *v) zero = zero && w == 0;
        } else {
            zero = zero && seq[0] == seq0 + L + 1;
        }
        if (trace)
            for (auto m : tr)
                if (m != 1) {
                    printf("FAIL: a phase mark not recorded\n");
                    exit(1);
                }
        if (rep == 0) out1 = out;
        else same = memcmp(out1.data(), out.data(), C * sizeof(T)) == 0;
        eo.add(dist([&](size_t i) { return val(out[i]); }, ref));
        // (x(L) from the first launch only in the wrap case: the words are zero after it)
        if (!(wrap && rep == 0)) {
            const std::vector<unsigned long long>& xw = xs;
            ex.add(dist([&](size_t i) { unsigned u = (unsigned)xw[(size_t)((L - 1) % 2) * C + i]; float f; memcpy(&f, &u, 4); return (double)f; }, x));
        }
        // The caches: rows pos of every layer hold that layer's k and v
        // (the last layer's the same bits as qkv's), every other row is as
        // it was.
        for (int l = 0; l < L; l++)
            for (int h = 0; h < NH; h++) {
                for (int j = 0; j < S; j++)
                    if (j != pos)
                        rows = rows && !memcmp(&kc[at(l, h, j)], &kc0[at(l, h, j)], HS * sizeof(T)) &&
                               !memcmp(&vc[at(l, h, j)], &vc0[at(l, h, j)], HS * sizeof(T));
                ekv.add(dist([&](size_t d) { return val(kc[at(l, h, pos) + d]); }, std::vector<double>(rk[l].begin() + h * HS, rk[l].begin() + (h + 1) * HS)));
                ekv.add(dist([&](size_t d) { return val(vc[at(l, h, pos) + d]); }, std::vector<double>(rv[l].begin() + h * HS, rv[l].begin() + (h + 1) * HS)));
                if (l == L - 1 && !(wrap && rep == 0))
                    for (int d = 0; d < HS; d++) {
                        // qkv's T values, two a word (the first in the low half)
                        auto half = [&](int i) { return (unsigned short)(((unsigned)qkv[i / 2]) >> (16 * (i % 2))); };
                        kvexact = kvexact && kc[at(l, h, pos) + d].bits == half(C + h * HS + d) &&
                                  vc[at(l, h, pos) + d].bits == half(2 * C + h * HS + d);
                    }
            }
    }
    const bool ok = same && zero && rows && kvexact && eo.rel <= TOL_REL && eo.max <= TOL_MAX && ex.rel <= TOL_REL &&
                    ex.max <= TOL_MAX && ekv.rel <= TOL_REL && ekv.max <= TOL_MAX;
    fails += !ok;
    printf("%s C%d NH%d L%d NW%d S%d pos %d cap %d: out rel %.2e max %.2e, x(L) rel %.2e max %.2e, k/v rows rel %.2e max %.2e (of rms)%s%s%s%s\n",
           ok ? "OK  " : "FAIL", C, NH, L, NW, S, pos, cap, eo.rel, eo.max, ex.rel, ex.max, ekv.rel, ekv.max,
           same ? "" : "; the second launch's out differs", zero ? "" : "; seq not advanced by L + 1 (or, at the wrap, not zero with every word)",
           rows ? "" : "; a cache row other than pos changed", kvexact ? "" : "; the last layer's row pos is not qkv's k, v");
    fflush(stdout);
}

int main(int argc, char** argv) {
    signal(SIGALRM, on_alarm);
    for (int i = 1; i < argc; i++) only.push_back(atoi(argv[i]));
    printf("DT_THREADS %d, tolerances rel %.2e max %.2e\n", DT_THREADS, TOL_REL, TOL_MAX);
    // The first token (pos 0: one position), pos 1 with cap above it, cap 0
    // (every cached row from global memory), pos past cap, the whole cache
    // (pos S-1) staged or partly, more positions than threads (the
    // softmax's loops twice), and few rows a worker (C 64, 24 workers: a
    // row in several warp parts).
    step(128, 2, 4, 32, 0, 32);
    step(128, 2, 4, 32, 1, 32);
    step(128, 3, 5, 48, 1, 0);
    step(128, 2, 3, 40, 7, 4);
    step(256, 2, 6, 80, 79, 80);
    step(256, 3, 5, 80, 79, 33);
    step(128, 2, 4, 150, 149, 140);
    step(64, 2, 24, 32, 20, 10);
    return fails ? 1 : 0;
}
