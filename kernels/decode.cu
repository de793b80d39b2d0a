// decode.cu: generation over a key/value cache (pkg/device/gpu/decode.go,
// the GPU side of device.Decoder; the CPU twin is pkg/device/cpu/decode.go).
//
// druto:kernel encoder_at kv_append attention_decode sample_parts sample_rows
// druto:pdl encoder_at kv_append attention_decode sample_parts sample_rows
// druto:dtypes f32 bf16 f16
//
// encoder_at: out[i,c] = wte[tok[i],c] + wpe[pos[i],c], one thread an
// element; out is the fp32 residual stream.
// kv_append: row t of sequence b of qkv (B,T,3C) goes to position pos[b]+t
// of the caches (B,NH,S,hs), one thread an element of k and of v.
// attention_decode (flash-decoding): one query row a sequence against its
// cached positions [0, pos[b]], the positions cut into splits of
// DEC_CHUNK; block (x, b·NH+h) of a grid (X, B·NH) takes the splits x,
// x+X, x+2X, ... that hold positions, one after another: for each it
// scores the chunk, takes the softmax's max and sum over the chunk, sums
// the value rows of its positions (the threads' layout is at the kernel)
// and merges the chunk into the block's running (max, sum, unnormalised
// output) by the log-sum-exp rule; it writes that running state as its
// slot's partial. The last block of a pair (b, h) to finish (a counter a
// pair, reset by that block) merges the pair's slots in slot order and
// rounds once into out. Blocks with no split below pos[b] return at once.
// The launcher sizes X from B·NH, S and the SM count only (enough blocks to
// fill the GPU, never more than the splits), so a graph replays the grid for
// any lengths.
// sample_rows: device.SampleRow for each row of the logits, one block a row:
// the allowed tokens' argmax (ties to the smallest id), then for a
// temperature the top-k cut (the K-th largest allowed logit, found by
// bisection over the order-preserving integer keys of the floats: exact),
// the top-p cut (the largest logit θ whose kept weights at or above it reach
// P of the total, bisection again: weights grow with the logit), and the
// draw: the first kept id by id whose running sum of weights exceeds u
// times their total (weights exp((l - max)/T) in double, as the CPU twin).
// The row's state advances as SampleHead documents.
// sample_parts spreads the passes over the vocabulary across the GPU: block
// (p, b) scans ids [p·DEC_PART_IDS, (p+1)·DEC_PART_IDS) of row b for the
// allowed ids' best key, their count, whether a logit is not finite and,
// under a temperature, their weights' sum relative to the part's own best,
// Σ exp((l - mx_p)/T). sample_rows, given those parts, takes the argmax
// from them, and where no top-k or top-p cut applies draws without another
// pass over the row: the total is Σ sum_p·exp((mx_p - max)/T), the part
// where the running sum passes u times the total is found from the parts'
// weights, and only that part's ids are walked. A top-k or top-p cut still
// runs the exact bisections over the whole row in one block.

#include "common.cuh"

// druto:block DEC_BLOCK encoder_at kv_append
#define DEC_BLOCK 256
// druto:block DEC_ATT_BLOCK attention_decode
#define DEC_ATT_BLOCK 128
#define DEC_CHUNK 64 // cached positions a split of attention_decode scores (read by the launcher)
#define DEC_MAX_HEAD 256 // the largest head size attention_decode holds (q and the warps' sums in shared memory)
// druto:block DEC_SAMPLE_BLOCK sample_rows
#define DEC_SAMPLE_BLOCK 1024
// druto:block DEC_PART_BLOCK sample_parts
#define DEC_PART_BLOCK 256
#define DEC_PART_IDS 2048 // ids a block of sample_parts scans (read by the launcher)
#define DEC_NEG_INF __int_as_float(0xff800000) // -inf (NVRTC has no math.h for INFINITY)

// The slots of a row's sampling state (device.Row*).
#define ROW_STATE 0
#define ROW_LEFT 1
#define ROW_STEP 2
#define ROW_SEED_LO 3
#define ROW_SEED_HI 4
#define ROW_LEN 5

extern "C" __global__ void __launch_bounds__(DEC_BLOCK) encoder_at(float* __restrict__ out, const T* __restrict__ wte,
        const T* __restrict__ wpe, const int* __restrict__ tok, const int* __restrict__ pos, int N, int C, int V, int S) {
    pdl_enter();
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)N * C) return;
    int r = (int)(i / C), c = (int)(i % C);
    int t = tok[r], p = pos[r];
    if (t < 0 || t >= V || p < 0 || p >= S) { out[i] = __int_as_float(0x7fc00000); return; } // NaN: the host validated them
    out[i] = load(wte, (size_t)t * C + c) + load(wpe, (size_t)p * C + c);
}

extern "C" __global__ void __launch_bounds__(DEC_BLOCK) kv_append(T* __restrict__ kc, T* __restrict__ vc,
        const T* __restrict__ qkv, const int* __restrict__ pos, int B, int Tn, int C, int NH, int S) {
    pdl_enter();
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)B * Tn * C) return;
    int c = (int)(i % C);
    long bt = i / C;
    int t = (int)(bt % Tn), b = (int)(bt / Tn);
    int at = pos[b] + t;
    if (at < 0 || at >= S) return;
    int hs = C / NH, h = c / hs, d = c % hs;
    size_t dst = (((size_t)b * NH + h) * S + at) * hs + d;
    size_t src = (size_t)bt * 3 * C;
    kc[dst] = qkv[src + C + c];
    vc[dst] = qkv[src + 2 * C + c];
}

// attention_decode: grid (X, B·NH), DEC_ATT_BLOCK threads; part_o
// (B·NH, X, hs) fp32, part_ml (B·NH, X, 2) fp32 (max, sum).
// At batch 1 the kernel is bound by memory latency, not bandwidth: a block
// reads 64 rows of 128 bytes each of K and V. So every load of a phase is
// issued before any is used: a unit is a 16-byte vector of T (or one
// element where the head's rows are not whole vectors), and
//   - scores: DEC_ATT_BLOCK/DEC_CHUNK threads a position, each over every
//     such unit of its key row (they are independent loads), the threads'
//     sums added in thread order;
//   - p·V: thread t holds unit t % U of the value rows of positions
//     g, g+G, ... (g = t / U, G = DEC_ATT_BLOCK / U groups), the groups'
//     sums then added in group order (deterministic).

// dec_unit widens unit u of a cached row into v[0..W) (W = 16/sizeof(T):
// a 16-byte vector; W = 1: one element). v holds 16/sizeof(T) floats
// whatever W, so that the branch W does not take stays in bounds.
template <int W>
__device__ __forceinline__ void dec_unit(const T* row, int u, float* v) {
    if (W == 1) {
        v[0] = load(row, u);
    } else {
        unpack16(*reinterpret_cast<const uint4*>(row + (size_t)u * W), v);
    }
}

// dec_attend scores the cnt positions from lo of one split and merges
// them into the block's running state, all in shared memory (registers
// held across the p·V phase spilled in f32): st[0] and st[1] are the
// softmax's max M and sum L so far, kept by thread 0, which also leaves
// there the factors a and c (st[2], st[3]) that rescale the old output and
// the chunk's to the new max; ro (hs) is the output so far relative to M,
// entry d owned by thread d % DEC_ATT_BLOCK. On the first split (M = -inf,
// L = 0, ro zero) a = 0 and c = 1: the state becomes the chunk's own (max,
// sum, output) exactly. The shared arrays are free again when it returns
// (its last barrier precedes their last reads, and st is next written
// after the next call's first barriers), so it can be called for the next
// split without another barrier.
template <int W>
__device__ __forceinline__ void dec_attend(float* ro, float* st, const float* q, float* p, float* sc, float* pv,
        float* red, const T* kb, const T* vb, int lo, int cnt, int hs) {
    const int U = hs / W, TPP = DEC_ATT_BLOCK / DEC_CHUNK;
    const int t = threadIdx.x, lane = t % 32, warp = t / 32, warps = DEC_ATT_BLOCK / 32;
    // Scores: thread t takes position t % DEC_CHUNK and the part t /
    // DEC_CHUNK of its key row (TPP consecutive runs of units).
    {
        const int j = t % DEC_CHUNK, part = t / DEC_CHUNK, per = (U + TPP - 1) / TPP;
        float s = 0.f;
        if (j < cnt) {
            const T* kr = kb + (size_t)(lo + j) * hs;
            const int u1 = min(U, (part + 1) * per);
#pragma unroll 4
            for (int u = part * per; u < u1; u++) {
                float kv[16 / sizeof(T)];
                dec_unit<W>(kr, u, kv);
#pragma unroll
                for (int e = 0; e < W; e++) s += q[u * W + e] * kv[e];
            }
        }
        sc[part * DEC_CHUNK + j] = s;
    }
    __syncthreads();
    const float scale = rsqrtf((float)hs);
    for (int j = t; j < cnt; j += DEC_ATT_BLOCK) {
        float s = 0.f;
        for (int k = 0; k < TPP; k++) s += sc[k * DEC_CHUNK + j];
        p[j] = s * scale;
    }
    __syncthreads();
    float m = DEC_NEG_INF;
    for (int j = t; j < cnt; j += DEC_ATT_BLOCK) m = fmaxf(m, p[j]);
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    if (lane == 0) red[warp] = m;
    __syncthreads();
    m = red[0];
    for (int w = 1; w < warps; w++) m = fmaxf(m, red[w]);
    __syncthreads();
    float l = 0.f;
    for (int j = t; j < cnt; j += DEC_ATT_BLOCK) {
        float e = expf(p[j] - m);
        p[j] = e;
        l += e;
    }
    l = warp_sum(l);
    if (lane == 0) red[warp] = l;
    __syncthreads();
    // The chunk's (m, sum) joins the running (M, L), both rescaled to the
    // larger max; the other threads read a and c after the next barrier.
    if (t == 0) {
        float tot = 0.f;
        for (int w = 0; w < warps; w++) tot += red[w];
        const float mn = fmaxf(st[0], m), a = expf(st[0] - mn), c = expf(m - mn);
        st[0] = mn;
        st[1] = st[1] * a + tot * c;
        st[2] = a;
        st[3] = c;
    }
    // p·V: G groups of U threads; the rest of the block (U not dividing
    // DEC_ATT_BLOCK) idles. U > DEC_ATT_BLOCK (rows of more than 128
    // elements that are not whole vectors): one group, units t, t+128, ...
    const int G = U <= DEC_ATT_BLOCK ? DEC_ATT_BLOCK / U : 1;
    const int g = t / (U <= DEC_ATT_BLOCK ? U : DEC_ATT_BLOCK);
    if (g < G) {
        for (int u = U <= DEC_ATT_BLOCK ? t % U : t; u < U; u += DEC_ATT_BLOCK) {
            float acc[W];
#pragma unroll
            for (int e = 0; e < W; e++) acc[e] = 0.f;
            // No unroll pragma: ptxas 11.8 spilled (sm_90, bf16 and f16)
            // with one, and unrolls this loop by itself.
            for (int j = g; j < cnt; j += G) {
                float vv[16 / sizeof(T)];
                dec_unit<W>(vb + (size_t)(lo + j) * hs, u, vv);
                const float pj = p[j];
#pragma unroll
                for (int e = 0; e < W; e++) acc[e] += pj * vv[e];
            }
#pragma unroll
            for (int e = 0; e < W; e++) pv[g * hs + u * W + e] = acc[e];
        }
    }
    __syncthreads();
    const float a = st[2], c = st[3];
    for (int d = t; d < hs; d += DEC_ATT_BLOCK) {
        float o = 0.f;
        for (int k = 0; k < G; k++) o += pv[k * hs + d];
        ro[d] = ro[d] * a + o * c;
    }
}

// attention_decode: grid (X, B·NH), DEC_ATT_BLOCK threads, X at most the
// splits ceil(S/DEC_CHUNK); out (B,C); part_o (B·NH, X, hs) and part_ml
// (B·NH, X, 2) fp32 scratch (slot x: block x's running output, max and
// sum); done (B·NH) counters, zero before the first launch (each pair's last
// block sets its counter back to zero).
// The launch bounds' 8 blocks an SM (at most 64 registers a thread) keep
// ptxas from its default target: NVRTC (11.8 and 13) gave attention_decode
// 40 registers and an 8-byte stack of spilled addresses without it.
extern "C" __global__ void __launch_bounds__(DEC_ATT_BLOCK, 8) attention_decode(T* __restrict__ out,
        float* __restrict__ part_o, float* __restrict__ part_ml, unsigned* __restrict__ done, const T* __restrict__ qkv,
        const T* __restrict__ kc, const T* __restrict__ vc, const int* __restrict__ pos, int B, int C, int NH, int S) {
    pdl_enter();
    // pv holds G·hs floats: at most DEC_ATT_BLOCK·16/sizeof(T) (whole
    // vectors) or DEC_MAX_HEAD (one group). ro and st are the block's
    // running output and (max, sum, and the last merge's factors).
    __shared__ float q[DEC_MAX_HEAD];
    __shared__ float ro[DEC_MAX_HEAD];
    __shared__ float st[4];
    __shared__ float p[DEC_CHUNK];
    __shared__ float sc[DEC_ATT_BLOCK];
    __shared__ float red[DEC_ATT_BLOCK / 32];
    __shared__ float pv[DEC_ATT_BLOCK * 16 / sizeof(T) > DEC_MAX_HEAD ? DEC_ATT_BLOCK * 16 / sizeof(T) : DEC_MAX_HEAD];
    __shared__ int last;
    int x = blockIdx.x, X = gridDim.x, bh = blockIdx.y;
    int b = bh / NH, h = bh % NH, hs = C / NH;
    int n = pos[b] + 1;
    int active = (n + DEC_CHUNK - 1) / DEC_CHUNK; // the splits that hold positions
    if (x >= active) return;
    int slots = min(X, active); // the pair's blocks that hold positions, a slot each
    for (int d = threadIdx.x; d < hs; d += DEC_ATT_BLOCK) {
        q[d] = load(qkv, (size_t)b * 3 * C + h * hs + d);
        ro[d] = 0.f;
    }
    if (threadIdx.x == 0) {
        st[0] = DEC_NEG_INF;
        st[1] = 0.f;
    }
    __syncthreads();
    const T* kb = kc + (size_t)bh * S * hs;
    const T* vb = vc + (size_t)bh * S * hs;
    const int VE = 16 / (int)sizeof(T);
    const int step = X * DEC_CHUNK; // from one of the block's splits to its next
    // Whole 16-byte vectors: rows of a multiple of VE elements from
    // 16-byte aligned caches (every row then starts on a vector). The
    // block's splits in increasing order.
    if (hs % VE == 0 && ((size_t)kc | (size_t)vc) % 16 == 0) {
        for (int lo = x * DEC_CHUNK; lo < n; lo += step)
            dec_attend<16 / sizeof(T)>(ro, st, q, p, sc, pv, red, kb, vb, lo, min(DEC_CHUNK, n - lo), hs);
    } else {
        for (int lo = x * DEC_CHUNK; lo < n; lo += step)
            dec_attend<1>(ro, st, q, p, sc, pv, red, kb, vb, lo, min(DEC_CHUNK, n - lo), hs);
    }
    // Each thread copies the entries of ro it owns, thread 0 the (max, sum)
    // it keeps (no barrier needed).
    float* po = part_o + ((size_t)bh * X + x) * hs;
    for (int d = threadIdx.x; d < hs; d += DEC_ATT_BLOCK) po[d] = ro[d];
    if (threadIdx.x == 0) {
        part_ml[((size_t)bh * X + x) * 2] = st[0];
        part_ml[((size_t)bh * X + x) * 2 + 1] = st[1];
    }
    // The last block of the pair merges: every block makes its partials
    // visible before it counts itself (the fence), and the last reads them
    // past L1 (volatile). The merge runs over the slots in slot order, so
    // the result does not depend on which block finished last.
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        last = atomicAdd(done + bh, 1u) == (unsigned)slots - 1;
        if (last) done[bh] = 0;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    const volatile float* ml = part_ml + (size_t)bh * X * 2;
    const volatile float* pa = part_o + (size_t)bh * X * hs;
    float M = DEC_NEG_INF;
    for (int s = 0; s < slots; s++) M = fmaxf(M, ml[2 * s]);
    float L = 0.f;
    for (int s = 0; s < slots; s++) L += ml[2 * s + 1] * expf(ml[2 * s] - M);
    for (int d = threadIdx.x; d < hs; d += blockDim.x) {
        float o = 0.f;
        for (int s = 0; s < slots; s++) o += pa[(size_t)s * hs + d] * expf(ml[2 * s] - M);
        store(out, (size_t)b * C + h * hs + d, o / L);
    }
}

// ---- sample_rows ----------------------------------------------------------

// The uniform of a draw (device.Uniform): splitmix64 of the seed and step.
__device__ __forceinline__ float dec_uniform(unsigned long long seed, unsigned step) {
    unsigned long long z = seed + (unsigned long long)(step + 1u) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)(z >> 40) / 16777216.f;
}

// key orders floats as unsigned integers (negative ones reversed).
__device__ __forceinline__ unsigned dec_key(float f) {
    unsigned u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float dec_unkey(unsigned k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

__device__ __forceinline__ bool dec_allowed(int e, int left) { return e != -1 && (e >> 8) <= left; }

// Block-wide sums (every thread gets the total; the order is fixed).
__device__ double dec_sum_d(double v, double* sh) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    double t = 0;
    for (int w = 0; w < warps; w++) t += sh[w];
    return t;
}
__device__ int dec_sum_i(int v, double* sh) { return (int)dec_sum_d((double)v, sh); }

// DecPart is sample_parts' result for one part of a row (32 bytes).
struct DecPart {
    unsigned long long best; // the largest (key, ~id) of the part's allowed ids, 0 if none
    double sum;              // Σ exp((l - mx)/T) over them (temperature > 0), else 0
    float mx;                // the logit of best
    int count;               // allowed ids
    int bad;                 // 1 if an allowed logit is not finite
    int pad;
};

// dec_part_set writes one part record (field by field: NVRTC's default
// dialect takes no braced initialiser here).
__device__ __forceinline__ void dec_part_set(DecPart* p, unsigned long long best, double sum, float mx, int count, int bad) {
    p->best = best;
    p->sum = sum;
    p->mx = mx;
    p->count = count;
    p->bad = bad;
    p->pad = 0;
}

// dec_best_count reduces each thread's (best, count) over the block; every
// thread gets both.
__device__ void dec_best_count(unsigned long long& best, int& count, unsigned long long* best_sh, double* sh) {
    for (int off = 16; off > 0; off >>= 1) {
        unsigned long long o = __shfl_xor_sync(0xffffffffu, best, off);
        best = o > best ? o : best;
    }
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    if (lane == 0) best_sh[warp] = best;
    __syncthreads();
    best = 0;
    for (int w = 0; w < warps; w++) best = best_sh[w] > best ? best_sh[w] : best;
    count = dec_sum_i(count, sh);
}

// dec_scan reduces the allowed ids of ids [lo, hi) of a row to the block's
// argmax and count: best packs (key, ~id), so that the largest is the
// largest logit with the smallest id. It returns 1 if an allowed logit is
// not finite (bad_sh: the caller's shared flag). Every thread gets all three.
__device__ int dec_scan(const T* l, const int* tab, int left, int lo, int hi, unsigned long long& best, int& count,
        int* bad_sh, unsigned long long* best_sh, double* sh) {
    if (threadIdx.x == 0) *bad_sh = 0;
    __syncthreads();
    best = 0;
    count = 0;
    for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        if (!dec_allowed(tab[i], left)) continue;
        float v = load(l, i);
        if (v - v != 0.f) *bad_sh = 1;
        unsigned long long k = ((unsigned long long)dec_key(v) << 32) | (unsigned)(0x7fffffff - i);
        best = k > best ? k : best;
        count++;
    }
    dec_best_count(best, count, best_sh, sh); // its barriers also publish bad_sh
    return *bad_sh;
}

// sample_parts: grid (P, B), DEC_PART_BLOCK threads. parts (B,P), logits
// (B,V) T, table (NS,V), rows (B,ROW_LEN).
extern "C" __global__ void __launch_bounds__(DEC_PART_BLOCK) sample_parts(DecPart* __restrict__ parts,
        const T* __restrict__ logits, const int* __restrict__ table, const int* __restrict__ rows, int V, int NS,
        float temperature) {
    pdl_enter();
    __shared__ double sh[DEC_PART_BLOCK / 32];
    __shared__ unsigned long long best_sh[DEC_PART_BLOCK / 32];
    __shared__ int bad_sh;
    int p = blockIdx.x, P = gridDim.x, b = blockIdx.y;
    DecPart* out = parts + (size_t)b * P + p;
    const int* row = rows + (size_t)b * ROW_LEN;
    int st = row[ROW_STATE], left = row[ROW_LEFT];
    if (st < 0 || st >= NS) { // sample_rows draws nothing for a bad state
        if (threadIdx.x == 0) dec_part_set(out, 0, 0.0, 0.f, 0, 0);
        return;
    }
    const T* l = logits + (size_t)b * V;
    const int* tab = table + (size_t)st * V;
    int lo = p * DEC_PART_IDS, hi = min(V, lo + DEC_PART_IDS);
    unsigned long long best;
    int count;
    int bad = dec_scan(l, tab, left, lo, hi, best, count, &bad_sh, best_sh, sh);
    double sum = 0;
    float mx = 0.f;
    if (count > 0 && !bad) {
        mx = load(l, 0x7fffffff - (int)(best & 0xffffffffu));
        if (temperature > 0.f) {
            double inv = 1.0 / (double)temperature;
            for (int i = lo + threadIdx.x; i < hi; i += blockDim.x)
                if (dec_allowed(tab[i], left)) sum += exp(((double)load(l, i) - (double)mx) * inv);
            sum = dec_sum_d(sum, sh);
        }
    }
    if (threadIdx.x == 0) dec_part_set(out, best, sum, mx, count, bad);
}

// dec_draw walks ids [lo, hi) in tiles of blockDim ids, weights
// exp((l - mx)/T) of the allowed ids whose key is at least theta, from the
// running sum run: a tile's sum first, and the one tile where the running
// sum passes r is walked id by id. It returns the id where it passes r, or
// -1 with last set to the last weighted id seen (rounding left r unreached).
__device__ int dec_draw(const T* l, const int* tab, int left, int lo, int hi, unsigned theta, float mx, double inv,
        double r, double run, double* scan, double* sh, int& last) {
    int chosen = -1;
    for (int base = lo; base < hi && chosen < 0; base += blockDim.x) {
        int i = base + threadIdx.x;
        double w = 0;
        if (i < hi) {
            float v = load(l, i);
            if (dec_allowed(tab[i], left) && dec_key(v) >= theta) w = exp(((double)v - (double)mx) * inv);
        }
        double tile = dec_sum_d(w, sh);
        if (tile == 0) continue;
        scan[threadIdx.x] = w;
        __syncthreads();
        if (run + tile > r) { // walk this tile (every thread the same walk)
            for (int k = 0; k < (int)blockDim.x && base + k < hi; k++) {
                if (scan[k] == 0) continue;
                last = base + k;
                run += scan[k];
                if (run > r) { chosen = base + k; break; }
            }
        } else {
            for (int k = (int)blockDim.x - 1; k >= 0; k--)
                if (base + k < hi && scan[k] != 0) { last = base + k; break; }
            run += tile;
        }
        __syncthreads();
    }
    return chosen;
}

// sample_rows: grid B, DEC_SAMPLE_BLOCK threads. logits (B,V) T, table
// (NS,V), rows (B,ROW_LEN), ids (B); parts (B,P) from sample_parts, or P = 0
// (the whole row scanned here).
extern "C" __global__ void __launch_bounds__(DEC_SAMPLE_BLOCK) sample_rows(int* __restrict__ ids,
        const T* __restrict__ logits, const int* __restrict__ table, int* __restrict__ rows, int V, int NS,
        float temperature, int topk, float topp, const DecPart* __restrict__ parts, int P) {
    pdl_enter();
    __shared__ double sh[DEC_SAMPLE_BLOCK / 32];
    __shared__ unsigned long long best_sh[DEC_SAMPLE_BLOCK / 32];
    __shared__ double scan[DEC_SAMPLE_BLOCK];
    __shared__ int bad_sh;
    int b = blockIdx.x;
    int* row = rows + (size_t)b * ROW_LEN;
    int st = row[ROW_STATE], left = row[ROW_LEFT];
    const T* l = logits + (size_t)b * V;
    if (st < 0 || st >= NS) { // the host validates states; a bad one draws nothing
        if (threadIdx.x == 0) ids[b] = -1;
        return;
    }
    const int* tab = table + (size_t)st * V;
    const DecPart* pr = parts + (size_t)b * P;
    // Argmax over the allowed tokens: (key, ~id) packed so that the largest
    // is the largest logit with the smallest id; from the parts when given.
    unsigned long long best = 0;
    int count = 0, bad = 0;
    if (P > 0) {
        for (int q = 0; q < P; q++) {
            best = pr[q].best > best ? pr[q].best : best;
            count += pr[q].count;
            bad |= pr[q].bad;
        }
    } else {
        bad = dec_scan(l, tab, left, 0, V, best, count, &bad_sh, best_sh, sh);
    }
    int id;
    if (bad) id = -2;
    else if (count == 0) id = -1;
    else {
        id = 0x7fffffff - (int)(best & 0xffffffffu);
        if (temperature > 0.f) {
            float mx = load(l, id);
            double inv = 1.0 / (double)temperature;
            unsigned long long seed = (unsigned)row[ROW_SEED_LO] | ((unsigned long long)(unsigned)row[ROW_SEED_HI] << 32);
            double u = (double)dec_uniform(seed, (unsigned)row[ROW_STEP]);
            bool cut = (topk > 0 && topk < count) || (topp > 0.f && topp < 1.f);
            int chosen, last = -1;
            if (P > 0 && !cut) {
                // The total and the part the draw lands in from the parts'
                // weights, then that part's ids walked.
                double total = 0;
                for (int q = 0; q < P; q++)
                    if (pr[q].count > 0) total += pr[q].sum * exp(((double)pr[q].mx - (double)mx) * inv);
                double r = u * total, run = 0, before = 0;
                int q = 0, qlast = -1;
                for (; q < P; q++) {
                    double w = pr[q].count > 0 ? pr[q].sum * exp(((double)pr[q].mx - (double)mx) * inv) : 0;
                    if (w == 0) continue;
                    if (run + w > r) break;
                    qlast = q, before = run;
                    run += w;
                }
                if (q == P) q = qlast < 0 ? 0 : qlast, run = before; // rounding left r unreached: the last weighted part
                chosen = dec_draw(l, tab, left, q * DEC_PART_IDS, min(V, (q + 1) * DEC_PART_IDS), 0u, mx, inv, r, run, scan, sh, last);
            } else {
                // Top-k: the largest key K with at least topk allowed logits at or above it.
                unsigned kth = 0;
                if (topk > 0 && topk < count) {
                    unsigned lo = 0, hi = 0xffffffffu; // count(>= lo) >= topk holds
                    while (lo < hi) {
                        unsigned mid = lo + (hi - lo) / 2 + 1;
                        int c = 0;
                        for (int i = threadIdx.x; i < V; i += blockDim.x)
                            if (dec_allowed(tab[i], left) && dec_key(load(l, i)) >= mid) c++;
                        if (dec_sum_i(c, sh) >= topk) lo = mid; else hi = mid - 1;
                    }
                    kth = lo;
                }
                double total = 0;
                for (int i = threadIdx.x; i < V; i += blockDim.x) {
                    float v = load(l, i);
                    if (dec_allowed(tab[i], left) && dec_key(v) >= kth) total += exp(((double)v - (double)mx) * inv);
                }
                total = dec_sum_d(total, sh);
                // Top-p: the largest key θ >= kth whose kept weight reaches P of the total.
                unsigned theta = kth;
                if (topp > 0.f && topp < 1.f) {
                    unsigned lo = kth, hi = 0xffffffffu;
                    double need = (double)topp * total;
                    while (lo < hi) {
                        unsigned mid = lo + (hi - lo) / 2 + 1;
                        double c = 0;
                        for (int i = threadIdx.x; i < V; i += blockDim.x) {
                            float v = load(l, i);
                            if (dec_allowed(tab[i], left) && dec_key(v) >= mid) c += exp(((double)v - (double)mx) * inv);
                        }
                        if (dec_sum_d(c, sh) >= need) lo = mid; else hi = mid - 1;
                    }
                    theta = lo;
                    total = 0;
                    for (int i = threadIdx.x; i < V; i += blockDim.x) {
                        float v = load(l, i);
                        if (dec_allowed(tab[i], left) && dec_key(v) >= theta) total += exp(((double)v - (double)mx) * inv);
                    }
                    total = dec_sum_d(total, sh);
                }
                // The draw: the first kept id by id whose running sum of
                // weights exceeds u times their total.
                chosen = dec_draw(l, tab, left, 0, V, theta, mx, inv, u * total, 0, scan, sh, last);
            }
            id = chosen >= 0 ? chosen : last;
        }
    }
    if (threadIdx.x == 0) {
        ids[b] = id;
        if (id >= 0) row[ROW_STATE] = tab[id] & 0xff;
        row[ROW_LEFT] = left - 1;
        row[ROW_STEP] = row[ROW_STEP] + 1;
    }
}
