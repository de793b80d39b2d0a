// main.cpp: host emulator of kernels/encoder.cu (see run.sh): every CUDA
// thread of a block is a host thread (blocks run one after another), warps
// and blocks synchronise with std::barrier. It runs encoder_forward (vector
// and scalar forms) and the backward (encoder_sort_count, encoder_sort_pass
// per 8 bits, encoder_backward with its position blocks,
// encoder_backward_fixup) with the launch plan of pkg/device/gpu/encoder.go
// (encoderPlan, for a GPU of `sms` multiprocessors) and compares with a
// reference that sums in increasing (b,t) order, as the CPU device does:
//   - the sorted list: std::stable_sort's, exactly;
//   - the forward and dwpe: bit for bit;
//   - dwte: bit for bit for every id whose positions lie in one segment
//     (the CPU's order), within fp32 tolerance for the others;
//   - determinism: the backward runs twice, the second time with the blocks
//     of every launch in reverse order and the scratch poisoned with other
//     bits, and must give the same bits.
// It also counts the work of the heaviest block (rows of dout summed,
// token ids read) beside the mean, for this scheme and for the plan it
// replaced (V <= 1024: a block per id and position range; larger: ⌈V/G⌉
// ids a block over all positions), to show the balance.
//   usage: emu_F32 B T C V sms dist   (dist: uniform, hot (every other token
//          V-1), one (every token V-1), zipf (Zipf s=1 over ids < 256),
//          bad (uniform with every 7th token outside [0,V): skipped))
#include "../flash/emu.h"
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include "../harness.h"
unsigned __ballot_sync(unsigned, bool p) {
    int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    slot[w][l] = p;
    wsync();
    unsigned r = 0;
    for (int i = 0; i < 32; i++) r |= (unsigned)slot[w][i] << i;
    wsync();
    return r;
}
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
inline int atomicAdd(int* p, int v) { return std::atomic_ref<int>(*p).fetch_add(v); }
#include "encoder.cu"

static int blocks(int n, int per) { return (n + per - 1) / per; }

// Plan is encoderPlan of pkg/device/gpu/encoder.go.
struct Plan {
    int bits, passes, tiles, items, L, segs;
    unsigned kmask;
};
static Plan plan(int BT, int V, int sms) {
    Plan p;
    p.bits = 1;
    while ((1ll << p.bits) < V) p.bits++;
    p.passes = (p.bits + 7) / 8;
    p.kmask = (unsigned)((1ull << p.bits) - 1);
    p.items = std::min(ENC_ITEMS, std::max(1, blocks(BT, ENC_THREADS * sms)));
    p.tiles = blocks(BT, ENC_THREADS * p.items);
    p.L = std::max(ENC_SEG_ALIGN, blocks(blocks(BT, 2 * sms), ENC_SEG_ALIGN) * ENC_SEG_ALIGN);
    p.segs = blocks(BT, p.L);
    return p;
}

// backward runs the fused backward (tokensBackward of encoder.go) into te,
// pe with scratch poisoned by poison, and returns the sorted keys and
// positions.
static void backward(const Plan& pl, std::vector<float>& te, std::vector<float>& pe, const std::vector<T>& dout, const std::vector<int>& tok,
                     int B, int Tn, int C, int V, unsigned char poison, std::vector<unsigned>& skey, std::vector<int>& spos) {
    int BT = B * Tn;
    std::vector<unsigned> keys[2];
    std::vector<int> vals[2];
    for (int i = 0; i < 2; i++) {
        keys[i].assign(BT, 0);
        vals[i].assign(BT, 0);
        memset(keys[i].data(), poison, BT * 4);
        memset(vals[i].data(), poison, BT * 4);
    }
    std::vector<int> hcnt((size_t)pl.passes * ENC_RADIX * pl.tiles), look(4 + (size_t)pl.passes * ENC_RADIX * pl.tiles);
    memset(hcnt.data(), poison, hcnt.size() * 4);
    memset(look.data(), poison, look.size() * 4);
    std::vector<float> part((size_t)2 * pl.segs * C);
    memset(part.data(), poison, part.size() * 4);
    int nW = blocks(Tn * C, ENC_THREADS);
    auto w = [&](int i) { return nW * i / (1 + pl.passes); };
    launch(pl.tiles + w(1), 1, ENC_THREADS, [&] {
        encoder_sort_count(hcnt.data(), look.data(), pe.data(), dout.data(), tok.data(), B, Tn, C, V, pl.passes, pl.tiles, pl.items, 0);
    });
    for (int p = 0; p < pl.passes; p++) {
        int out = p & 1;
        launch(pl.tiles + w(p + 2) - w(p + 1), 1, ENC_THREADS, [&] {
            encoder_sort_pass(keys[out].data(), vals[out].data(), keys[out ^ 1].data(), vals[out ^ 1].data(), tok.data(), hcnt.data(),
                              look.data(), pe.data(), dout.data(), B, Tn, C, V, p, pl.tiles, pl.items, w(p + 1));
        });
    }
    int fin = (pl.passes - 1) & 1;
    launch(pl.segs, 1, ENC_THREADS, [&] {
        encoder_backward(te.data(), part.data(), dout.data(), keys[fin].data(), vals[fin].data(), BT, C, V, pl.kmask, pl.L);
    });
    launch(pl.segs, 1, ENC_THREADS, [&] {
        encoder_backward_fixup(te.data(), part.data(), keys[fin].data(), BT, C, V, pl.kmask, pl.L, pl.segs);
    });
    skey = keys[fin];
    spos = vals[fin];
}

int main(int argc, char** argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s B T C V sms uniform|hot|one|zipf|bad\n", argv[0]);
        return 2;
    }
    int B = atoi(argv[1]), Tn = atoi(argv[2]), C = atoi(argv[3]), V = atoi(argv[4]), sms = atoi(argv[5]);
    std::string dist = argv[6];
    int BT = B * Tn, maxT = Tn + 3;
    Plan pl = plan(BT, V, sms);
    std::mt19937 rng(B * 7919 + Tn * 131 + C * 17 + V);
    std::normal_distribution<float> nd;
    std::vector<T> wte((size_t)V * C), wpe((size_t)maxT * C);
    for (auto& x : wte) x = from_f32<T>(nd(rng));
    for (auto& x : wpe) x = from_f32<T>(nd(rng));
    std::vector<int> tok(BT);
    std::vector<double> zipf;
    for (int r = 0; r < std::min(V, 256); r++) zipf.push_back(1.0 / (r + 1));
    std::discrete_distribution<int> zd(zipf.begin(), zipf.end());
    for (int i = 0; i < BT; i++) {
        if (dist == "uniform") {
            tok[i] = (int)(rng() % V);
        } else if (dist == "hot") {
            tok[i] = i % 2 == 0 ? V - 1 : (int)(rng() % V);
        } else if (dist == "one") {
            tok[i] = V - 1;
        } else if (dist == "zipf") {
            tok[i] = (zd(rng) * 37 + 11) % std::min(V, 256); // the ranks scattered over the ids
        } else if (dist == "bad") {
            tok[i] = i % 7 == 3 ? (i % 2 ? -1 - i : V + i) : (int)(rng() % V);
        } else {
            fprintf(stderr, "unknown dist %s\n", dist.c_str());
            return 2;
        }
    }
    std::vector<T> dout((size_t)BT * C);
    for (auto& x : dout) x = from_f32<T>(nd(rng));
    std::vector<float> dwte0((size_t)V * C), dwpe0((size_t)maxT * C);
    for (auto& x : dwte0) x = nd(rng);
    for (auto& x : dwpe0) x = nd(rng);
    auto valid = [&](int t) { return t >= 0 && t < V; };

    // reference (forward only for valid tokens: the rest is NaN)
    std::vector<float> rout((size_t)BT * C), rte = dwte0, rpe = dwpe0;
    for (int bt = 0; bt < BT; bt++)
        for (int c = 0; c < C; c++) {
            float g = load(dout.data() + (size_t)bt * C, c);
            rpe[(size_t)(bt % Tn) * C + c] += g;
            if (!valid(tok[bt])) {
                rout[(size_t)bt * C + c] = __int_as_float(0x7fc00000);
                continue;
            }
            rout[(size_t)bt * C + c] = load(wte.data() + (size_t)tok[bt] * C, c) + load(wpe.data() + (size_t)(bt % Tn) * C, c);
            rte[(size_t)tok[bt] * C + c] += g;
        }
    int bad = 0;
    for (int vec = 0; vec <= (C % 4 == 0); vec++) {
        std::vector<float> out((size_t)BT * C, 1.0f);
        launch(3, 1, 64, [&] { encoder_forward(out.data(), wte.data(), wpe.data(), tok.data(), BT, Tn, C, V, vec); });
        if (memcmp(out.data(), rout.data(), out.size() * 4) != 0) {
            printf("forward vec=%d: not the reference's bits\n", vec);
            bad++;
        }
    }

    // The sorted list the sort must give: keys (ENC_NOKEY for a bad
    // token; those sort by their masked key) with positions, stable.
    std::vector<int> order(BT);
    for (int i = 0; i < BT; i++) order[i] = i;
    auto keyOf = [&](int i) { return valid(tok[i]) ? (unsigned)tok[i] : ENC_NOKEY; };
    unsigned sortMask = pl.passes == 4 ? 0xffffffffu : (1u << (8 * pl.passes)) - 1;
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return (keyOf(x) & sortMask) < (keyOf(y) & sortMask); });

    std::vector<float> te[2], pe[2];
    std::vector<unsigned> skey;
    std::vector<int> spos;
    for (int run = 0; run < 2; run++) {
        reverseBlocks = run == 1;
        te[run] = dwte0, pe[run] = dwpe0;
        backward(pl, te[run], pe[run], dout, tok, B, Tn, C, V, run ? 0xff : 0x7f, skey, spos);
        for (int i = 0; i < BT; i++) {
            if (spos[i] != order[i] || skey[i] != keyOf(order[i])) {
                printf("run %d: sorted[%d] = (%u, %d), want (%u, %d)\n", run, i, skey[i], spos[i], keyOf(order[i]), order[i]);
                bad++;
                break;
            }
        }
    }
    reverseBlocks = false;
    if (memcmp(te[0].data(), te[1].data(), te[0].size() * 4) != 0 || memcmp(pe[0].data(), pe[1].data(), pe[0].size() * 4) != 0) {
        printf("backward: two runs (block orders) gave different bits\n");
        bad++;
    }
    if (memcmp(pe[0].data(), rpe.data(), rpe.size() * 4) != 0) {
        printf("dwpe: not the reference's bits\n");
        bad++;
    }
    // Ids whose positions lie in one segment must have the CPU's bits.
    std::vector<int> firstAt(V, -1), lastAt(V, -1);
    for (int i = 0; i < BT; i++) {
        int t = tok[order[i]];
        if (!valid(t)) continue;
        if (firstAt[t] < 0) firstAt[t] = i;
        lastAt[t] = i;
    }
    double worst = 0;
    int split = 0, ids = 0;
    for (int v = 0; v < V; v++) {
        bool inOne = firstAt[v] < 0 || firstAt[v] / pl.L == lastAt[v] / pl.L;
        ids += firstAt[v] >= 0;
        split += !inOne;
        for (int c = 0; c < C; c++) {
            size_t i = (size_t)v * C + c;
            float got = te[0][i], want = rte[i];
            double d = std::fabs((double)got - want);
            worst = std::max(worst, d);
            int n = firstAt[v] < 0 ? 0 : lastAt[v] - firstAt[v] + 1;
            if (inOne ? memcmp(&got, &want, 4) != 0 : !(d <= 1e-5 * n * 4 * (1 + std::fabs(want)))) {
                if (bad < 10) printf("dwte[%d,%d] = %.9g, want %.9g (id in %s)\n", v, c, got, want, inOne ? "one segment" : "several");
                bad++;
            }
        }
    }

    // Work of the heaviest block: rows of dout summed (and tokens read).
    std::vector<long> cnt(V, 0);
    for (int t : tok)
        if (valid(t)) cnt[t]++;
    long newMax = 0;
    for (int s = 0; s < pl.segs; s++) newMax = std::max(newMax, (long)std::min(BT, (s + 1) * pl.L) - s * pl.L);
    long oldMax = 0, oldBlocks, oldTokens;
    if (V <= 1024) { // K 1, G V, S ranges of P positions
        int S = std::max(1, std::min(16, BT / (4 * V))), P = blocks(BT, S);
        oldBlocks = (long)V * S, oldTokens = P;
        std::vector<long> c((size_t)V * S, 0);
        for (int i = 0; i < BT; i++)
            if (valid(tok[i])) oldMax = std::max(oldMax, ++c[(size_t)(i / P) * V + tok[i]]);
    } else { // K ids a block over all positions
        int G = std::min(V, 2 * sms), K = blocks(V, G);
        oldBlocks = blocks(V, K), oldTokens = BT;
        std::vector<long> c(oldBlocks, 0);
        for (int v = 0; v < V; v++) oldMax = std::max(oldMax, c[v / K] += cnt[v]);
    }
    printf("B%d T%d C%d V%d %-7s: %d pass(es), %d tiles of %d, %d segments of %d; %d ids, %d split; rows/block max %ld mean %.0f (was %ld, %ld "
           "blocks reading %ld tokens each); dwte max |diff| %.3g %s\n",
           B, Tn, C, V, dist.c_str(), pl.passes, pl.tiles, ENC_THREADS * pl.items, pl.segs, pl.L, ids, split, newMax, (double)BT / pl.segs, oldMax, oldBlocks,
           oldTokens, worst, bad ? "FAIL" : "OK");
    return bad ? 1 : 0;
}
