// decode.cu: generation over a key/value cache (pkg/device/gpu/decode.go,
// the GPU side of device.Decoder; the CPU twin is pkg/device/cpu/decode.go).
//
// druto:kernel encoder_at kv_append attention_decode sample_parts sample_rows
// druto:pdl encoder_at kv_append sample_parts sample_rows
// druto:pdl-weights attention_decode:kc,vc,pos
// druto:dtypes f32 bf16 f16
//
// encoder_at: out[i,c] = wte[tok[i],c] + wpe[pos[i],c], one thread an
// element; out is the fp32 residual stream.
// kv_append: row t of sequence b of qkv (B,T,3C) goes to position pos[b]+t
// of the caches (B,NH,S,hs), one thread an element of k and of v.
// attention_decode (flash-decoding): one query row a sequence against its
// cached positions [0, pos[b]], its own key and value (qkv's) appended to
// the caches at pos[b] in the same launch, the positions cut into splits of
// DEC_CHUNK; block (x, b·NH+h) of a grid (X, B·NH) takes the splits x,
// x+X, x+2X, ... that hold positions, one after another, the next split's
// loads in flight while it reduces the current one: for each it scores the
// chunk, takes the softmax's max over the chunk, and merges the chunk into
// the block's running (max, sum, unnormalised output) by the log-sum-exp
// rule, the value rows of its positions summed into that output (the
// threads' layout is at the kernel); it writes that running state as its
// slot's partial. The last block of a pair (b, h) to finish (a counter a
// pair, reset by that block) merges the pair's slots in slot order and
// rounds once into out. Blocks with no split below pos[b] return at once.
// The launcher sizes X from B·NH, S and the SM count only (enough blocks to
// fill the GPU, never more than the splits), so a graph replays the grid for
// any lengths. Where rows are 4 to 32 16-byte vectors, a block runs
// dec_attend_rows instead: groups of lanes, each with its own running state
// in registers over the block's splits and no block barrier a split,
// merged once at the end into the block's partial (or, at X = 1, batch
// 64's grid, written to out directly).
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
#define DEC_SCAN_U 8 // ids a thread of dec_scan loads before using them (DEC_PART_IDS / DEC_PART_BLOCK: one batch)
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
// The kernel is bound by memory latency, not by its arithmetic: a split is
// 64 rows of K and of V, and a block walks its splits one after another.
// So each thread holds its share of a split's key and value rows in
// registers (DEC_HELD units of each, loaded as raw bits), and the loads of
// the next split are issued as soon as those registers are free: the next
// split's keys once the scores are taken (in flight through the softmax
// and p·V), its values once p·V is done (in flight through the next
// scores and softmax), the first split's keys and values together before
// q. A unit is a 16-byte vector of T (or one element where the head's rows
// are not whole vectors), and
//   - scores: DEC_TPP neighbouring lanes a position (j = t / DEC_TPP),
//     lane part = t % DEC_TPP taking units part, part + DEC_TPP, ... of the
//     key row (so each load of the lanes of a position covers a whole
//     32-byte sector), their sums added by a butterfly of shuffles (the
//     same bits in each of those lanes);
//   - p·V: thread t holds unit t % U of the value rows of positions
//     g, g+G, ... (g = t / U, G = DEC_ATT_BLOCK / U groups; a warp's loads
//     cover whole rows), accumulated over all the block's splits in its
//     registers, rescaled to each new max; the groups' sums are added in
//     group order once, at the end (deterministic).
// A split takes two block barriers: one for the max over the warps, one
// for the sum and the probabilities p (no thread reuses p or the warps'
// slots before every thread has passed the next split's first barrier).
#define DEC_TPP (DEC_ATT_BLOCK / DEC_CHUNK) // the lanes of one position in the scores (a power of two, at most 32)
#define DEC_HELD 4 // the key units and value positions a thread holds in registers a split

// dec_fetch returns unit u of a cached row as raw bits: a 16-byte vector
// (W = 16/sizeof(T)) or, W = 1, one element's bits in x. The bits are
// widened only where they are used (dec_widen), so that nothing waits for
// the load before then.
template <int W>
__device__ __forceinline__ uint4 dec_fetch(const T* row, int u) {
    if (W == 1) {
        uint4 r;
        r.y = r.z = r.w = 0u;
#if DTYPE == DRUTO_F32
        r.x = __float_as_uint(row[u]);
#else
        r.x = row[u].bits;
#endif
        return r;
    }
    return *reinterpret_cast<const uint4*>(row + (size_t)u * W);
}

// dec_widen widens a fetched unit into v[0..W). v holds 16/sizeof(T)
// floats whatever W, so that the branch W does not take stays in bounds.
template <int W>
__device__ __forceinline__ void dec_widen(uint4 r, float* v) {
    if (W == 1) {
#if DTYPE == DRUTO_F32
        v[0] = __uint_as_float(r.x);
#elif DTYPE == DRUTO_BF16
        v[0] = bf16_bits_to_f32(r.x);
#else
        v[0] = f16_bits_to_f32((unsigned short)r.x);
#endif
    } else {
        unpack16(r, v);
    }
}

// dec_row is the row of position at: the cache's row, or for the newest
// position (at == n - 1) the row of qkv it comes from (the cache gets that
// row in the same launch, so none of the kernel's loads reads it there).
__device__ __forceinline__ const T* dec_row(const T* cached, int at, int n, const T* fresh) {
    return at == n - 1 ? fresh : cached;
}

// dec_attend runs the block's splits, the min(DEC_CHUNK, n - lo) positions
// from lo = x·DEC_CHUNK, lo + step, ... below n, and writes its partial:
// po (hs) the output relative to the max M, and M and the sum L (into ml
// by thread 0). It loads q (qr, hs elements) into shared memory itself,
// after the first split's loads are issued. Every thread keeps M and L
// (the same bits: each computes them from the same shared values in the
// same order); on the first split (M = -inf, L = 0, outputs zero) the
// rescale factor a is 0 and the state becomes the split's own. The newest
// position's key and value come from kn and vn (dec_row), not the cache.
// With direct (the block is its pair's only one) it writes the output
// itself, o / L rounded once into direct (hs), and no partial: the bits a
// merge of that one partial would give (its rescale factor is exp(0) = 1).
template <int W>
__device__ __forceinline__ void dec_attend(float* po, float* ml, float* q, float* p, float* red, float* pv, const T* qr,
        const T* kb, const T* vb, const T* kn, const T* vn, int lo, int n, int step, int hs, T* direct) {
    const int U = hs / W, warps = DEC_ATT_BLOCK / 32;
    // NU: the units of a value row a thread of p·V takes (more than one
    // only for rows of more than DEC_ATT_BLOCK units: elements, W = 1).
    const int NU = (DEC_MAX_HEAD / W + DEC_ATT_BLOCK - 1) / DEC_ATT_BLOCK;
    const int t = threadIdx.x, lane = t % 32, warp = t / 32;
    const int j = t / DEC_TPP, part = t % DEC_TPP; // scores: position and part of the key row
    // p·V: G groups of U threads; the rest of the block (U not dividing
    // DEC_ATT_BLOCK) idles. U > DEC_ATT_BLOCK: one group, units t,
    // t + DEC_ATT_BLOCK, ...
    const int G = U <= DEC_ATT_BLOCK ? DEC_ATT_BLOCK / U : 1;
    const int g = t / (U <= DEC_ATT_BLOCK ? U : DEC_ATT_BLOCK);
    const int u0 = U <= DEC_ATT_BLOCK ? t % U : t;
    const bool pvt = g < G && u0 < U;
    // kt: the thread's key row in the current split; vt: its first value
    // row there (position g); both move on by step rows a split.
    // (int offsets: a pair's cache, S·hs elements, is below 2^31.)
    const int adv = step * hs, gh = G * hs;
    const T* kt = kb + ((size_t)lo + j) * hs;
    const T* vt = vb + ((size_t)lo + g) * hs;
    int left = n - lo; // the positions from the current split on
    uint4 kr[DEC_HELD], vr[DEC_HELD];
#pragma unroll
    for (int r = 0; r < DEC_HELD; r++) {
        kr[r].x = kr[r].y = kr[r].z = kr[r].w = 0u;
        vr[r] = kr[r];
    }
    // The first split's keys and values, then q (its loads overlap theirs).
#pragma unroll
    for (int r = 0; r < DEC_HELD; r++) {
        if (j < left && part + r * DEC_TPP < U) kr[r] = dec_fetch<W>(dec_row(kt, lo + j, n, kn), part + r * DEC_TPP);
        if (pvt && g + r * G < left) vr[r] = dec_fetch<W>(dec_row(vt + r * gh, lo + g + r * G, n, vn), u0);
    }
    // (hs <= DEC_MAX_HEAD: a bounded loop, which ptxas does not unroll
    // into more loads held at once than there are elements.)
#pragma unroll
    for (int k = 0; k < DEC_MAX_HEAD / DEC_ATT_BLOCK; k++)
        if (t + k * DEC_ATT_BLOCK < hs) q[t + k * DEC_ATT_BLOCK] = load(qr, t + k * DEC_ATT_BLOCK);
    __syncthreads();
    const float scale = rsqrtf((float)hs);
    float M = DEC_NEG_INF, L = 0.f;
    // The thread's running outputs: pv[g·hs + u·W + e] for its units u,
    // its own until the end (no other thread reads or writes them).
    if (pvt) {
#pragma unroll
        for (int k = 0; k < NU; k++)
            if (u0 + k * DEC_ATT_BLOCK < U)
#pragma unroll
                for (int e = 0; e < W; e++) pv[g * hs + (u0 + k * DEC_ATT_BLOCK) * W + e] = 0.f;
    }
    for (;;) {
        const int cnt = min(DEC_CHUNK, left);
        // Scores: the held units, then any beyond them loaded here.
        float s = 0.f;
        if (j < cnt) {
#pragma unroll
            for (int r = 0; r < DEC_HELD; r++) {
                const int u = part + r * DEC_TPP;
                if (u < U) {
                    float kv[16 / sizeof(T)];
                    dec_widen<W>(kr[r], kv);
#pragma unroll
                    for (int e = 0; e < W; e++) s += q[u * W + e] * kv[e];
                }
            }
#pragma unroll 1
            for (int u = part + DEC_HELD * DEC_TPP; u < U; u += DEC_TPP) {
                float kv[16 / sizeof(T)];
                dec_widen<W>(dec_fetch<W>(dec_row(kt, lo + j, n, kn), u), kv);
#pragma unroll
                for (int e = 0; e < W; e++) s += q[u * W + e] * kv[e];
            }
        }
        for (int off = 1; off < DEC_TPP; off <<= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        s *= scale;
        // The next split's keys, in flight through the softmax and p·V.
        const int nleft = left - step;
        if (j < nleft) {
#pragma unroll
            for (int r = 0; r < DEC_HELD; r++)
                if (part + r * DEC_TPP < U) kr[r] = dec_fetch<W>(dec_row(kt + adv, lo + step + j, n, kn), part + r * DEC_TPP);
        }
        // The split's max over the warps, and the new running max.
        float m = j < cnt ? s : DEC_NEG_INF;
        for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
        if (lane == 0) red[warp] = m;
        __syncthreads();
        m = red[0];
        for (int w = 1; w < warps; w++) m = fmaxf(m, red[w]);
        const float mn = fmaxf(M, m);
        // p relative to the new max (lane part 0 of a position writes it)
        // and the split's sum over the warps, added in warp order.
        const float e = j < cnt ? expf(s - mn) : 0.f;
        if (part == 0 && j < cnt) p[j] = e;
        const float l = warp_sum(part == 0 ? e : 0.f);
        if (lane == 0) red[warps + warp] = l;
        __syncthreads();
        float tot = 0.f;
        for (int w = 0; w < warps; w++) tot += red[warps + w];
        const float a = expf(M - mn);
        M = mn;
        L = L * a + tot;
        // p·V into the running outputs, rescaled to the new max: the held
        // positions, then any beyond them, then (W = 1, rows of more than
        // DEC_ATT_BLOCK elements) the thread's further units.
        if (pvt) {
            float acc[W];
            float* o = pv + g * hs + u0 * W;
#pragma unroll
            for (int e2 = 0; e2 < W; e2++) acc[e2] = o[e2] * a;
#pragma unroll
            for (int r = 0; r < DEC_HELD; r++) {
                if (g + r * G < cnt) {
                    float vv[16 / sizeof(T)];
                    dec_widen<W>(vr[r], vv);
                    const float pj = p[g + r * G];
#pragma unroll
                    for (int e2 = 0; e2 < W; e2++) acc[e2] += pj * vv[e2];
                }
            }
#pragma unroll 1
            for (int jj = g + DEC_HELD * G; jj < cnt; jj += G) {
                float vv[16 / sizeof(T)];
                dec_widen<W>(dec_fetch<W>(dec_row(vt + (size_t)(jj - g) * hs, lo + jj, n, vn), u0), vv);
                const float pj = p[jj];
#pragma unroll
                for (int e2 = 0; e2 < W; e2++) acc[e2] += pj * vv[e2];
            }
#pragma unroll
            for (int e2 = 0; e2 < W; e2++) o[e2] = acc[e2];
#pragma unroll
            for (int k = 1; k < NU; k++) {
                const int u = u0 + k * DEC_ATT_BLOCK;
                if (u < U) {
                    float a1 = pv[g * hs + u] * a;
#pragma unroll 1
                    for (int jj = g; jj < cnt; jj += G) {
                        float vv[16 / sizeof(T)];
                        dec_widen<W>(dec_fetch<W>(dec_row(vt + (size_t)(jj - g) * hs, lo + jj, n, vn), u), vv);
                        a1 += p[jj] * vv[0];
                    }
                    pv[g * hs + u] = a1;
                }
            }
        }
        if (nleft <= 0) break;
        // The next split's values, in flight through its scores and softmax.
        kt += adv;
        vt += adv;
        lo += step;
#pragma unroll
        for (int r = 0; r < DEC_HELD; r++)
            if (pvt && g + r * G < nleft) vr[r] = dec_fetch<W>(dec_row(vt + r * gh, lo + g + r * G, n, vn), u0);
        left = nleft;
    }
    // The groups' outputs added in group order; thread 0 writes (M, L).
    __syncthreads();
#pragma unroll
    for (int i = 0; i < DEC_MAX_HEAD / DEC_ATT_BLOCK; i++) {
        const int d = t + i * DEC_ATT_BLOCK;
        if (d < hs) {
            float o = 0.f;
            for (int k = 0; k < G; k++) o += pv[k * hs + d];
            if (direct)
                store(direct, d, o / L);
            else
                po[d] = o;
        }
    }
    if (t == 0 && !direct) {
        ml[0] = M;
        ml[1] = L;
    }
}

// dec_attend_rows is dec_attend for rows of U = hs/W 16-byte vectors, U a
// power of two from 4 to 32: the same splits a block (lo, lo + step, ...,
// DEC_CHUNK positions each) and the same partial or direct output, but
// nothing crosses the warps until the end, so a position costs no block
// barrier:
//   - U neighbouring lanes hold a position's row, lane u its u-th vector
//     of q (in registers), of the key and of the value; a warp takes
//     32/U positions at once and the block NG = DEC_ATT_BLOCK/U: the
//     block's positions in split order, i = 0, 1, ..., go to group i % NG;
//   - a lane loads the keys and values of DEC_ROWS of its group's
//     positions before it uses any (all its loads of a step in flight);
//     each score is summed over its U lanes by log2(U) shuffles;
//   - each group keeps its own running max m, sum l and output (its lanes'
//     vectors, fp32 in registers), rescaled by exp(m_old - m_new) as the
//     positions come (the log-sum-exp rule);
//   - at the end the groups' states go to shared memory (m and l into p,
//     the outputs into pv: NG·hs = DEC_ATT_BLOCK·W floats, pv's size) and
//     thread d merges dimension d over the groups in group order, so the
//     result does not depend on timing: o / l rounded into direct, or o
//     into po and (m, l) into ml by thread 0, as dec_attend leaves them.
// The newest position's key and value come from kn and vn (dec_row).
#define DEC_ROWS 4
template <int W>
__device__ __forceinline__ void dec_attend_rows(float* po, float* ml, float* p, float* pv, const T* qr, const T* kb,
        const T* vb, const T* kn, const T* vn, int lo, int n, int step, int hs, T* direct) {
    const int U = hs / W, t = threadIdx.x, lane = t % 32;
    const int NG = DEC_ATT_BLOCK / U;          // position groups in the block
    const int k = t / U, u = lane % U;         // this lane's group and vector
    float q[16 / sizeof(T)], acc[16 / sizeof(T)];
    dec_widen<W>(dec_fetch<W>(qr, u), q);
#pragma unroll
    for (int e = 0; e < W; e++) acc[e] = 0.f;
    const float scale = rsqrtf((float)hs);
    float M = DEC_NEG_INF, L = 0.f;
    // The block's splits hold positions i = 0, 1, ... in split order:
    // position j(i) = lo + (i / DEC_CHUNK)·step + i % DEC_CHUNK, those
    // below n. Every lane runs the same trip count (whether its group's
    // positions are below n or not), so that the shuffles see full warps.
    const int nsplit = (n - lo + step - 1) / step; // the block's splits that hold positions (lo < n)
    const int trips = (nsplit * DEC_CHUNK + NG * DEC_ROWS - 1) / (NG * DEC_ROWS);
    for (int it = 0; it < trips; it++) {
        int js[DEC_ROWS];
#pragma unroll
        for (int r = 0; r < DEC_ROWS; r++) {
            const int i = (it * DEC_ROWS + r) * NG + k;
            js[r] = lo + (i / DEC_CHUNK) * step + i % DEC_CHUNK;
        }
        uint4 kr[DEC_ROWS], vr[DEC_ROWS];
#pragma unroll
        for (int r = 0; r < DEC_ROWS; r++) {
            const int j = js[r];
            kr[r].x = kr[r].y = kr[r].z = kr[r].w = 0u;
            vr[r] = kr[r];
            if (j < n) {
                kr[r] = dec_fetch<W>(dec_row(kb + (size_t)j * hs, j, n, kn), u);
                vr[r] = dec_fetch<W>(dec_row(vb + (size_t)j * hs, j, n, vn), u);
            }
        }
        float s[DEC_ROWS];
        float mx = M;
#pragma unroll
        for (int r = 0; r < DEC_ROWS; r++) {
            float kv[16 / sizeof(T)];
            dec_widen<W>(kr[r], kv);
            float d = 0.f;
#pragma unroll
            for (int e = 0; e < W; e++) d += q[e] * kv[e];
            for (int off = 1; off < U; off <<= 1) d += __shfl_xor_sync(0xffffffffu, d, off);
            s[r] = js[r] < n ? d * scale : DEC_NEG_INF;
            mx = fmaxf(mx, s[r]);
        }
        if (mx != DEC_NEG_INF) { // some position of the group scored, now or before
            const float a = expf(M - mx);
            L *= a;
#pragma unroll
            for (int e = 0; e < W; e++) acc[e] *= a;
#pragma unroll
            for (int r = 0; r < DEC_ROWS; r++) {
                const float pr = expf(s[r] - mx);
                float vv[16 / sizeof(T)];
                dec_widen<W>(vr[r], vv);
                L += pr;
#pragma unroll
                for (int e = 0; e < W; e++) acc[e] += pr * vv[e];
            }
            M = mx;
        }
    }
    // The groups' states, then the merge over them in group order.
    if (u == 0) {
        p[k] = M;
        p[NG + k] = L;
    }
#pragma unroll
    for (int e = 0; e < W; e++) pv[k * hs + u * W + e] = acc[e];
    __syncthreads();
    for (int d = t; d < hs; d += DEC_ATT_BLOCK) {
        float mm = DEC_NEG_INF;
        for (int g = 0; g < NG; g++) mm = fmaxf(mm, p[g]);
        float ll = 0.f, o = 0.f;
        for (int g = 0; g < NG; g++) {
            const float a = expf(p[g] - mm); // 0 for a group with no positions
            ll += p[NG + g] * a;
            o += pv[g * hs + d] * a;
        }
        if (direct)
            store(direct, d, o / ll);
        else
            po[d] = o;
        if (d == 0 && !direct) {
            ml[0] = mm;
            ml[1] = ll;
        }
    }
}

// dec_prefetch_l2 asks L2 for the 128-byte lines of [p, p + bytes), the
// block's threads a line each in turn (no-op on the host emulator).
__device__ __forceinline__ void dec_prefetch_l2(const T* p, size_t bytes) {
#ifndef DRUTO_EMU
    const char* c = reinterpret_cast<const char*>(p);
    const size_t first = reinterpret_cast<size_t>(c) & 127u; // the first line's bytes before p
    for (size_t o = threadIdx.x * (size_t)128; o < bytes + first; o += (size_t)blockDim.x * 128)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(c - first + o));
#endif
}

// pv holds G·hs floats: at most DEC_ATT_BLOCK·16/sizeof(T) (whole vectors)
// or DEC_MAX_HEAD (one group).
#define DEC_PV (DEC_ATT_BLOCK * 16 / (int)sizeof(T) > DEC_MAX_HEAD ? DEC_ATT_BLOCK * 16 / (int)sizeof(T) : DEC_MAX_HEAD)

// attention_decode: grid (X, B·NH), DEC_ATT_BLOCK threads, X at most the
// splits ceil(S/DEC_CHUNK); out (B,C); part_o (B·NH, X, hs) and part_ml
// (B·NH, X, 2) fp32 scratch (slot x: block x's running output, max and
// sum); done (B·NH) counters, zero before the first launch (each pair's last
// block sets its counter back to zero).
// The launch bounds' 7 blocks an SM allow 72 registers a thread (65536 /
// (7·128) = 73, allocated in steps of 8): a thread holds 2·DEC_HELD
// 16-byte units (32 registers) of the splits' keys and values at all times,
// and at 64 registers (8 blocks) ptxas spilled a few addresses and indices.
// 7 blocks of 128 threads still take 896 of an SM's 2048 threads and about
// 7·5.4 KB of its shared memory; a grid of more blocks than 7 an SM is one
// decSlots gives only for B·NH between 3.5 and 4 times the SMs (X = 2),
// where at most one block an SM waits for a free slot (decode.go).
extern "C" __global__ void __launch_bounds__(DEC_ATT_BLOCK, 7) attention_decode(T* __restrict__ out,
        float* __restrict__ part_o, float* __restrict__ part_ml, unsigned* __restrict__ done, const T* __restrict__ qkv,
        const T* __restrict__ kc, const T* __restrict__ vc, const int* __restrict__ pos, int B, int C, int NH, int S) {
    // Before the wait: the keys and values of the block's first split (rows
    // x·DEC_CHUNK.. of a pair's cache) prefetched into L2, a 128-byte line a
    // thread at a time, so that its loads find them there and not in device
    // memory (prefetching all the block's splits at once measured no
    // faster). pos is written by no kernel of a decode step (the host
    // uploads it before the step), and neither is the cache: its row pos[b]
    // is this kernel's to write (below), and the kernel takes that row's
    // key and value from the step's own projection instead (dec_row).
    // Block (x, bh): the attention of pair bh = b·NH + h over the splits
    // x, x+X, ... and, when it is the pair's last block to finish, the merge.
    const int x = blockIdx.x, X = gridDim.x, bh = blockIdx.y;
    const int b = bh / NH, h = bh % NH, hs = C / NH;
    const int n = pos[b] + 1;
    const int lo = x * DEC_CHUNK;
    if (lo < n) {
        const size_t bytes = (size_t)min(DEC_CHUNK, n - lo) * hs * sizeof(T), at = ((size_t)bh * S + lo) * hs;
        dec_prefetch_l2(kc + at, bytes);
        dec_prefetch_l2(vc + at, bytes);
    }
    pdl_enter();
    // red: the warps' maxima, then their sums.
    __shared__ float q[DEC_MAX_HEAD];
    __shared__ float p[DEC_CHUNK];
    __shared__ float red[2 * (DEC_ATT_BLOCK / 32)];
    __shared__ float pv[DEC_PV];
    __shared__ int last;
    int active = (n + DEC_CHUNK - 1) / DEC_CHUNK; // the splits that hold positions
    if (x >= active) return;
    int slots = min(X, active); // the pair's blocks that hold positions, a slot each
    const T* qr = qkv + (size_t)b * 3 * C + h * hs;
    const T* kb = kc + (size_t)bh * S * hs;
    const T* vb = vc + (size_t)bh * S * hs;
    const T* kn = qr + C; // the newest position's key and value
    const T* vn = qr + 2 * C;
    float* po = part_o + ((size_t)bh * X + x) * hs;
    float* pm = part_ml + ((size_t)bh * X + x) * 2;
    const int VE = 16 / (int)sizeof(T);
    const int step = X * DEC_CHUNK; // from one of the block's splits to its next
    // Whole 16-byte vectors: rows of a multiple of VE elements from
    // 16-byte aligned caches (every row then starts on a vector).
    // A pair with one block holding positions needs no merge: that block
    // writes out itself.
    T* direct = slots == 1 ? out + (size_t)b * C + h * hs : (T*)0;
    const bool vecs = hs % VE == 0 && ((size_t)kc | (size_t)vc | (size_t)qkv) % 16 == 0;
    const int U = hs / VE;
    if (vecs && U >= 4 && U <= 32 && (U & (U - 1)) == 0)
        dec_attend_rows<16 / sizeof(T)>(po, pm, p, pv, qr, kb, vb, kn, vn, x * DEC_CHUNK, n, step, hs, direct);
    else if (hs % VE == 0 && ((size_t)kc | (size_t)vc) % 16 == 0)
        dec_attend<16 / sizeof(T)>(po, pm, q, p, red, pv, qr, kb, vb, kn, vn, x * DEC_CHUNK, n, step, hs, direct);
    else
        dec_attend<1>(po, pm, q, p, red, pv, qr, kb, vb, kn, vn, x * DEC_CHUNK, n, step, hs, direct);
    // The append: the block that holds the split of position n - 1 copies
    // its key and value into the caches. No load of this launch reads that
    // row there, so the stores may go through kc and vc (read-only to every
    // load of the kernel but these rows').
    if (x == (n - 1) / DEC_CHUNK % X) {
        T* kw = const_cast<T*>(kb) + (size_t)(n - 1) * hs;
        T* vw = const_cast<T*>(vb) + (size_t)(n - 1) * hs;
        for (int d = threadIdx.x; d < hs; d += blockDim.x) {
            kw[d] = kn[d];
            vw[d] = vn[d];
        }
    }
    if (direct) return;
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

// dec_batch loads a thread's batch of DEC_SCAN_U ids, base, base +
// blockDim.x, ... below hi: their table entries into e (-1 past hi) and
// logits into v, all issued before any is used (one memory latency a
// batch, where loading the logit after testing its entry took two an id).
__device__ __forceinline__ void dec_batch(int* e, float* v, const T* l, const int* tab, int base, int hi) {
#pragma unroll
    for (int u = 0; u < DEC_SCAN_U; u++) {
        const int i = base + u * blockDim.x;
        e[u] = -1;
        v[u] = 0.f;
        if (i < hi) e[u] = tab[i], v[u] = load(l, i);
    }
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
    // A thread's ids i, i + blockDim.x, ... in batches (dec_batch), taken
    // in the same order as one by one.
    for (int base = lo + threadIdx.x; base < hi; base += DEC_SCAN_U * blockDim.x) {
        int e[DEC_SCAN_U];
        float v[DEC_SCAN_U];
        dec_batch(e, v, l, tab, base, hi);
#pragma unroll
        for (int u = 0; u < DEC_SCAN_U; u++) {
            if (!dec_allowed(e[u], left)) continue;
            const int i = base + u * blockDim.x;
            if (v[u] - v[u] != 0.f) *bad_sh = 1;
            unsigned long long k = ((unsigned long long)dec_key(v[u]) << 32) | (unsigned)(0x7fffffff - i);
            best = k > best ? k : best;
            count++;
        }
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
            // batched as dec_scan, summed in the same order as one by one
            for (int base = lo + threadIdx.x; base < hi; base += DEC_SCAN_U * blockDim.x) {
                int e[DEC_SCAN_U];
                float v[DEC_SCAN_U];
                dec_batch(e, v, l, tab, base, hi);
#pragma unroll
                for (int u = 0; u < DEC_SCAN_U; u++)
                    if (dec_allowed(e[u], left)) sum += exp(((double)v[u] - (double)mx) * inv);
            }
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
