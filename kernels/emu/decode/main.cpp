// main.cpp: host emulator of kernels/decode.cu (see run.sh): every CUDA
// thread of a block runs as a host thread (barriers for __syncthreads and
// the warps' shuffles), and the kernels' results are compared with
// references written from device.SampleRow's and the attention's
// definitions (pkg/device/decode.go, pkg/device/cpu/decode.go).
//   usage: emu_F32 (a fixed set of cases; exit 1 on a mismatch)
// emu.h (../flash) is included first by run.sh (-include).
#include <algorithm>
#include <string>
#include "../harness.h"
inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }
using std::exp;
#include "decode.cu"

static std::mt19937_64 rng(7);
static double normal() { return std::normal_distribution<double>()(rng); }
static int fails = 0;

// attention_decode + combine against a double softmax over [0, pos[b]],
// on a grid of X blocks a pair (0: one a split, the most the launcher
// gives) run first to last or last to first. lens are the context lengths
// pos[b]+1 (empty: drawn, the first sequence's the whole cache). The
// partials and the caches' rows pos[b] start as NaN before each launch, so
// a merge that read a slot no block wrote, or a score or sum that read the
// newest position from the cache and not from qkv, would show; after it,
// those rows must hold qkv's key and value and every other row be as it
// was. It returns out.
static std::vector<float> attention(int B, int C, int NH, int S, int X = 0, std::vector<int> lens = {}, bool reverse = false) {
    int hs = C / NH, splits = (S + DEC_CHUNK - 1) / DEC_CHUNK;
    if (X == 0) X = splits;
    std::vector<float> qkv(B * 3 * C), kc(B * NH * S * hs), vc(B * NH * S * hs), out(B * C);
    std::vector<float> po(B * NH * X * hs), pml(B * NH * X * 2);
    std::vector<int> pos(B);
    std::vector<unsigned> done(B * NH, 0);
    rng.seed(B * 1000003 + C * 1009 + NH * 101 + S); // the same data for every X and order of a shape
    for (auto& v : qkv) v = normal();
    for (auto& v : kc) v = normal();
    for (auto& v : vc) v = normal();
    for (auto& p : pos) p = rng() % S;
    pos[0] = S - 1;
    for (size_t b = 0; b < lens.size() && b < (size_t)B; b++) pos[b] = lens[b] - 1;
    reverseBlocks = reverse;
    // Twice: the second launch finds the counters the first left (zero).
    auto row = [&](int b, int h, int j) { return ((size_t)(b * NH + h) * S + j) * hs; };
    // ref: the caches as the op leaves them (rows pos[b] appended).
    std::vector<float> rk = kc, rv = vc;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int d = 0; d < hs; d++) {
                rk[row(b, h, pos[b]) + d] = qkv[b * 3 * C + C + h * hs + d];
                rv[row(b, h, pos[b]) + d] = qkv[b * 3 * C + 2 * C + h * hs + d];
            }
    bool cache = true;
    for (int rep = 0; rep < 2; rep++) {
        std::fill(out.begin(), out.end(), NAN);
        std::fill(po.begin(), po.end(), NAN);
        std::fill(pml.begin(), pml.end(), NAN);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int d = 0; d < hs; d++) kc[row(b, h, pos[b]) + d] = vc[row(b, h, pos[b]) + d] = NAN;
        launch(X, B * NH, DEC_ATT_BLOCK, [&] { attention_decode(out.data(), po.data(), pml.data(), done.data(), qkv.data(), kc.data(), vc.data(), pos.data(), B, C, NH, S); });
        cache = cache && memcmp(kc.data(), rk.data(), kc.size() * 4) == 0 && memcmp(vc.data(), rv.data(), vc.size() * 4) == 0;
    }
    reverseBlocks = false;
    if (!cache) { printf("FAIL attention_decode: the caches are not the old ones with qkv's rows at pos\n"); fails++; }
    for (unsigned c : done)
        if (c != 0) { printf("FAIL attention_decode left a counter at %u\n", c); fails++; break; }
    double worst = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            int n = pos[b] + 1;
            std::vector<double> sc(n);
            double mx = -1e300, sum = 0;
            for (int j = 0; j < n; j++) {
                double s = 0;
                for (int d = 0; d < hs; d++) s += (double)qkv[b * 3 * C + h * hs + d] * rk[row(b, h, j) + d];
                sc[j] = s / std::sqrt((double)hs);
                mx = std::max(mx, sc[j]);
            }
            for (auto& s : sc) sum += (s = std::exp(s - mx));
            for (int d = 0; d < hs; d++) {
                double o = 0;
                for (int j = 0; j < n; j++) o += sc[j] / sum * rv[row(b, h, j) + d];
                double e = std::fabs(out[b * C + h * hs + d] - o) / (1 + std::fabs(o));
                worst = std::max(worst, e != e ? INFINITY : e);
            }
        }
    bool ok = worst < 2e-5;
    fails += !ok;
    std::string ls;
    for (int b = 0; b < B; b++) ls += (b ? "," : "") + std::to_string(pos[b] + 1);
    printf("%s attention_decode B%d C%d NH%d S%d (%d splits) X%d %s, lengths %s: worst error %.2e\n", ok ? "OK  " : "FAIL", B, C,
           NH, S, splits, X, reverse ? "last to first" : "first to last", ls.c_str(), worst);
    return out;
}

// attention_orders runs attention on a grid of X blocks a pair in both
// orders of the blocks and checks that out is the same to the bit (the
// merge runs in slot order, whichever block finishes last).
static void attention_orders(int B, int C, int NH, int S, int X, std::vector<int> lens) {
    std::vector<float> fwd = attention(B, C, NH, S, X, lens, false);
    std::vector<float> rev = attention(B, C, NH, S, X, lens, true);
    bool ok = memcmp(fwd.data(), rev.data(), fwd.size() * sizeof(float)) == 0;
    fails += !ok;
    printf("%s attention_decode B%d C%d NH%d S%d X%d: both orders of the blocks give the same bits\n", ok ? "OK  " : "FAIL", B, C, NH, S, X);
}

// The reference of SampleRow (pkg/device/decode.go), as written there.
static int sample_ref(const std::vector<float>& l, const int* st, int left, float temp, int topk, float topp, float u) {
    int V = l.size();
    auto allowed = [&](int i) { return st[i] != -1 && (st[i] >> 8) <= left; };
    int best = -1;
    for (int i = 0; i < V; i++) {
        if (!allowed(i)) continue;
        if (l[i] - l[i] != 0) return -2;
        if (best < 0 || l[i] > l[best]) best = i;
    }
    if (best < 0) return -1;
    if (temp <= 0) return best;
    float kth = -INFINITY;
    std::vector<int> ids;
    for (int i = 0; i < V; i++) if (allowed(i)) ids.push_back(i);
    if (topk > 0 && topk < (int)ids.size()) {
        std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return l[a] > l[b]; });
        kth = l[ids[topk - 1]];
    }
    std::vector<double> p(V, 0.0);
    double total = 0;
    for (int i = 0; i < V; i++)
        if (allowed(i) && l[i] >= kth) total += (p[i] = std::exp(((double)l[i] - l[best]) / temp));
    if (topp > 0 && topp < 1) {
        std::vector<double> ws;
        for (double w : p) if (w > 0) ws.push_back(w);
        std::sort(ws.rbegin(), ws.rend());
        double tau = ws.back(), c = 0;
        for (double w : ws) if ((c += w) >= (double)topp * total) { tau = w; break; }
        total = 0;
        for (auto& w : p) total += (w = w < tau ? 0 : w);
    }
    double r = (double)u * total, c = 0;
    int last = -1;
    for (int i = 0; i < V; i++) {
        if (p[i] == 0) continue;
        last = i;
        if ((c += p[i]) > r) return i;
    }
    return last;
}

static void sample(int V, float temp, int topk, float topp, int seed, bool with_parts) {
    const int B = 3, NS = 2;
    std::vector<float> logits(B * V);
    std::vector<int> table(NS * V), rows(B * ROW_LEN, 0), ids(B, -9);
    for (auto& v : logits) v = (float)(rng() % 64) / 8; // ties
    for (int i = 0; i < NS * V; i++) table[i] = (rng() % 5 == 0) ? -1 : (int)((rng() % NS) | ((rng() % 3) << 8));
    for (int b = 0; b < B; b++) {
        rows[b * ROW_LEN + ROW_STATE] = b % NS;
        rows[b * ROW_LEN + ROW_LEFT] = b;
        rows[b * ROW_LEN + ROW_STEP] = b + seed;
        rows[b * ROW_LEN + ROW_SEED_LO] = seed * 7 + b;
    }
    std::vector<int> before = rows;
    int P = 0;
    std::vector<DecPart> parts;
    if (with_parts) { // sample_parts first, as the launcher runs them
        P = (V + DEC_PART_IDS - 1) / DEC_PART_IDS;
        parts.resize(B * P);
        launch(P, B, DEC_PART_BLOCK, [&] { sample_parts(parts.data(), logits.data(), table.data(), rows.data(), V, NS, temp); });
    }
    launch(B, 1, DEC_SAMPLE_BLOCK, [&] { sample_rows(ids.data(), logits.data(), table.data(), rows.data(), V, NS, temp, topk, topp, parts.data(), P); });
    for (int b = 0; b < B; b++) {
        const int* r = &before[b * ROW_LEN];
        unsigned long long sd = (unsigned)r[ROW_SEED_LO] | ((unsigned long long)(unsigned)r[ROW_SEED_HI] << 32);
        float u = dec_uniform(sd, (unsigned)r[ROW_STEP]);
        std::vector<float> row(logits.begin() + b * V, logits.begin() + (b + 1) * V);
        const int* st = &table[r[ROW_STATE] * V];
        int want = sample_ref(row, st, r[ROW_LEFT], temp, topk, topp, u);
        bool ok = ids[b] == want && rows[b * ROW_LEN + ROW_LEFT] == r[ROW_LEFT] - 1 && rows[b * ROW_LEN + ROW_STEP] == r[ROW_STEP] + 1 &&
                  (want < 0 || rows[b * ROW_LEN + ROW_STATE] == (st[want] & 0xff));
        fails += !ok;
        printf("%s sample_rows%s V%d T%.1f K%d P%.2f row %d: id %d, reference %d\n", ok ? "OK  " : "FAIL", with_parts ? "+parts" : "", V, temp, topk, topp, b, ids[b], want);
    }
}

int main() {
    // The new grid: X blocks a pair over gpt2's 16 splits of 1024, contexts
    // of 1, 63, 64, 65 and 1000 positions (10 pairs), X from 1 (a block
    // takes all its pair's splits) through X below the active splits
    // (blocks looping over several) to X past them (blocks with none), in
    // both orders; head sizes 64 (16-byte vectors) and 15 (one element a
    // unit).
    for (int X : {1, 2, 3, 7, 16})
        attention_orders(5, 128, 2, 1024, X, {1, 63, 64, 65, 1000});
    for (int X : {1, 4, 9})
        attention_orders(5, 30, 2, 1024, X, {1000, 65, 64, 63, 1});
    attention_orders(2, 768, 12, 1024, 3, {200, 17}); // gpt2-124M's heads, 24 pairs
    // Rows of 4 to 32 vectors (f32: hs 16 to 128) take dec_attend_rows at
    // every X (the cases above with hs 64 and 32 too): here X = 1, the
    // groups' lanes in step, positions past a group's last, and groups
    // with none (1 position).
    attention_orders(2, 768, 12, 1024, 1, {200, 17});
    attention_orders(2, 256, 2, 1024, 1, {129, 1000});
    attention_orders(3, 32, 2, 1024, 1, {1, 2, 31});
    // The registers a thread holds a split (DEC_HELD key units and value
    // rows, the next split's loaded during this one's softmax and p·V):
    // hs 32 (f32: 8 vectors a row, as bf16's hs 64) fills them exactly,
    // with no loads beyond them; hs 16 fills half; hs 64 (above) and 128
    // load the units and rows beyond them in place. Splits of 64, 40, 8
    // and 1 positions last, blocks with exactly one split (X = 4 at 200
    // and 256 positions), and X = 1 walking 16.
    for (int X : {1, 3, 16})
        attention_orders(5, 64, 2, 1024, X, {1, 63, 64, 65, 1000});
    attention_orders(3, 32, 2, 1024, 1, {200, 129, 1});
    attention_orders(2, 128, 2, 1024, 4, {200, 256});
    attention_orders(2, 256, 2, 1024, 2, {129, 1000});
    // hs 250 (elements, U > DEC_ATT_BLOCK): a second unit a thread in p·V.
    attention_orders(2, 500, 2, 300, 1, {300, 130});
    attention_orders(2, 500, 2, 300, 2, {300, 65});
    attention_orders(3, 48, 2, 5, 1, {});               // one split
    attention(2, 128, 2, 600);
    attention(3, 48, 2, 5);
    attention(1, 64, 1, 1);
    attention(2, 30, 2, 130);  // hs 15: rows that are not whole vectors (one element a unit)
    attention(1, 512, 2, 70);  // hs 256 (DEC_MAX_HEAD): 64 vectors a row
    attention(2, 768, 12, 300); // gpt2-124M's heads
    attention(1, 20, 2, 9);    // hs 10, hs·4 bytes not a multiple of 16
    for (int parts = 0; parts <= 1; parts++)
        for (int seed = 1; seed <= 2; seed++) {
            sample(3000, 0, 0, 0, seed, parts);
            sample(3000, 1, 0, 0, seed, parts);
            sample(3000, 0.7f, 40, 0, seed, parts);
            sample(3000, 1.3f, 0, 0.9f, seed, parts);
            sample(1000, 1, 5, 0.5f, seed, parts);
            sample(50, 1, 1, 0, seed, parts);
        }
    // With parts: a vocabulary of several parts (GPT-2's), greedy and under
    // temperatures, many seeds (the draw lands in every part).
    for (int seed = 3; seed <= 14; seed++) {
        sample(50304, seed % 3 == 0 ? 0.f : 0.5f + 0.1f * (seed % 9), 0, 0, seed, true);
        sample(5000, 2.0f, 0, 0, seed, true);
    }
    // kv_append and encoder_at: exact placement.
    int B = 2, Tn = 3, C = 8, NH = 2, S = 6, hs = C / NH;
    std::vector<float> qkv(B * Tn * 3 * C), kc(B * NH * S * hs, NAN), vc(B * NH * S * hs, NAN);
    for (size_t i = 0; i < qkv.size(); i++) qkv[i] = i;
    std::vector<int> pos = {0, 3};
    launch(1, 1, DEC_BLOCK, [&] { kv_append(kc.data(), vc.data(), qkv.data(), pos.data(), B, Tn, C, NH, S); });
    bool ok = true;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tn; t++)
            for (int c = 0; c < C; c++) {
                size_t dst = ((size_t)(b * NH + c / hs) * S + pos[b] + t) * hs + c % hs;
                ok = ok && kc[dst] == qkv[(b * Tn + t) * 3 * C + C + c] && vc[dst] == qkv[(b * Tn + t) * 3 * C + 2 * C + c];
            }
    fails += !ok;
    printf("%s kv_append\n", ok ? "OK  " : "FAIL");
    return fails ? 1 : 0;
}
