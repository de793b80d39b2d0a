// decode_token.cu: a decode step's transformer blocks for one sequence as
// one persistent kernel (pkg/device/gpu/decode_token.go, the GPU side of
// device.TokenDecoder; the CPU twin is the ops one by one,
// device.DecodeTokenDecomposed).
//
// druto:kernel decode_token
// druto:pdl decode_token
// druto:dtypes bf16 f16
// druto:arch 90
// druto:pdl-weights decode_token:ln1w,ln1b,qkvw,qkvb,projw,projb,ln2w,ln2b,fcw,fcb,fcpw,fcpb,lnfw,lnfb,kc,vc,pos
//
// At one sequence a decode step is a chain of small dependent products:
// each is a few microseconds of launch and synchronisation around well
// under a microsecond of weight reading. Here the chain runs in one launch
// of one block an SM, and its links are words in global memory that carry
// their own ready flags (LL words, below), polled only by the blocks that
// read a phase's output. The weights never wait: each
// block copies its share of every layer's weights into shared memory
// (cp.async) as soon as the previous layer's copy of that phase is used, so
// the products read shared memory and the step's time is its chain of
// dependencies, not its bytes.
//
// Roles. Blocks 0..NH-1 are the heads' (attention blocks), the other NW =
// gridDim.x - NH blocks the workers'. Per layer l:
//   Q  (workers) wait x(l); LN1 of x into shared memory (every worker its
//      own copy: 768 values, cheaper than another link); the worker's rows
//      of qkv = LN1(x)·Wqkvᵀ + b, rounded to T, into qkv.
//   A  (head h) wait for q, and the newest key and value, from qkv (the
//      pair appended to the caches at pos) in qkv; scores against the cached
//      positions (in shared memory, copied before the wait, up to cap of
//      them; the rest read from the cache), softmax, p·V, rounded to T (the
//      op's output); then the head's share of the attention projection,
//      y_h = att_h·Wp[:, h·hs:(h+1)·hs]ᵀ, fp32, into ypart[h].
//   F  (workers) wait for ypart; proj = Σ_h ypart[h] (in head order) + bproj,
//      rounded to T; x2 = x + proj (fp32, kept in shared memory); LN2; the
//      worker's rows of h = GELU(LN2(x2)·Wfcᵀ + b), rounded to T.
//   FP (workers) wait for h; the worker's rows of x3 = x2 + round_T(h·Wfpᵀ +
//      b) into the next x.
// After the last layer block 0 waits x(L) and writes the final layernorm
// (lnf) of it, rounded to T, into out: the LM head's input, and advances
// the launches' sequence word.
//
// Arithmetic follows the ops one by one (LayerNorm, Matmul, AttentionDecode,
// ResidualLayerNorm): fp32 sums, the same rounding points to T, eps 1e-5,
// two-pass variance, the layernorm's output n·w + b with n = rstd·(x -
// mean) rounded per operation. The sums run in other orders (a worker's
// rows by warp parts, the projection by heads), so the bits may differ from
// the ops' in the last place of T; every sum has a fixed order, so the
// kernel is deterministic.
//
// Links. Every value a phase hands on goes out as an LL word (below): 32
// bits of value and a flag in one 8-byte store, which the readers poll
// until the flag is the layer's. A counter link (a fence, an atomic count,
// a poll, then the data) took about 1.9 µs on an H100, no less than a
// programmatic launch; the word's own flag takes one trip through L2.
// Every block must be resident at once: the launcher gives one block an SM
// and no more blocks than SMs.
//
// Shared memory (dynamic, the launcher's bytes): a worker holds its rows
// of Wqkv, Wfc and Wfp (one slot each, refilled for the next layer as soon
// as used) and fp32 vectors x, x2, the normalised row and h; a head block
// holds Wp's hs columns for its head (C rows of hs), the cached keys and
// values of up to cap positions, and the scores.

#include "common.cuh"

// druto:block DT_THREADS decode_token
#ifndef DT_THREADS
#define DT_THREADS 512
#endif
#define DT_WARPS (DT_THREADS / 32)
#define DT_HS 64     // the head size the kernel takes (8 lanes of 16 bytes a row)
#define DT_MAXH 16   // the most heads (C <= 1024)
#define DT_NEG_INF __int_as_float(0xff800000)

#ifdef DRUTO_EMU
// (a poll that finds its word not ready sleeps long: hundreds of host
// threads poll at once on two cores, and the producers need them)
__device__ __forceinline__ void dt_pause() { std::this_thread::sleep_for(std::chrono::microseconds(500)); }
#define __trap() abort()
__device__ __forceinline__ void dt_cp16(void* dst, const void* src) { memcpy(dst, src, 16); }
__device__ __forceinline__ void dt_cp_commit() {}
template <int N> __device__ __forceinline__ void dt_cp_wait() {}
#else
__device__ __forceinline__ void dt_pause() {}
// cp.async of 16 bytes, global to shared (sm_80+), bypassing L1.
__device__ __forceinline__ void dt_cp16(void* dst, const void* src) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void dt_cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void dt_cp_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }
#endif

// ---- LL links ---------------------------------------------------------
// A link's data travels with its flag: each 8-byte word is (32 bits of
// value, the flag) in one store, and a reader polls the words themselves
// until their flag is the one it waits for (NCCL's LL protocol). No fence,
// no counter, one trip through L2 a word. The flag of what layer l makes is
// E + l + 1, E the launch's sequence word (seq[0], which block 0 advances
// by L + 1 at the end): never a flag an earlier launch left, of any L.
#ifdef DRUTO_EMU
__device__ __forceinline__ void dt_put(unsigned long long* p, unsigned v, unsigned f) {
    __atomic_store_n(p, (unsigned long long)v | (unsigned long long)f << 32, __ATOMIC_RELAXED);
}
__device__ __forceinline__ unsigned long long dt_ld64(const unsigned long long* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
#else
__device__ __forceinline__ void dt_put(unsigned long long* p, unsigned v, unsigned f) {
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"((unsigned long long)v | (unsigned long long)f << 32) : "memory");
}
__device__ __forceinline__ unsigned long long dt_ld64(const unsigned long long* p) {
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
#endif

// dt_ready returns word w's value once its flag is f, polling p (where w
// was loaded from) again until it is. A wait that outlasts 2^24 polls
// (seconds) is a broken chain, not a slow one: the kernel traps, and the
// launch fails instead of hanging the GPU.
__device__ __forceinline__ unsigned dt_ready(unsigned long long w, const unsigned long long* p, unsigned f) {
    unsigned polls = 0;
    while ((unsigned)(w >> 32) != f) {
        dt_pause();
        if (++polls == (1u << 24)) __trap();
        w = dt_ld64(p);
    }
    return (unsigned)w;
}

// dt_pack2 packs two values rounded to T into 32 bits (the first low);
// dt_unpack2 widens them back.
__device__ __forceinline__ unsigned dt_pack2(float a, float b) {
    return (unsigned)from_f32<T>(a).bits | (unsigned)from_f32<T>(b).bits << 16;
}
__device__ __forceinline__ void dt_unpack2(unsigned v, float* o) {
    T a, b;
    a.bits = (unsigned short)(v & 0xffffu);
    b.bits = (unsigned short)(v >> 16);
    o[0] = to_f32(a);
    o[1] = to_f32(b);
}

// DT_PER is the most words of a vector of up to 4·1024 T (2048 words) a
// thread reads in dt_gather: all its loads in flight before any is waited.
#define DT_PER ((2048 + DT_THREADS - 1) / DT_THREADS)

// dt_gather waits for words [0, n) of p at flag f and hands word i's value
// to out[i] (as raw 32 bits), the block's threads taking i = t, t + T, ...
__device__ __forceinline__ void dt_gather(unsigned* out, const unsigned long long* p, int n, unsigned f) {
    unsigned long long w[DT_PER];
#pragma unroll
    for (int k = 0; k < DT_PER; k++) {
        const int i = threadIdx.x + k * DT_THREADS;
        w[k] = i < n ? dt_ld64(p + i) : 0ull;
    }
#pragma unroll
    for (int k = 0; k < DT_PER; k++) {
        const int i = threadIdx.x + k * DT_THREADS;
        if (i < n) out[i] = dt_ready(w[k], p + i, f);
    }
}

// dt_mark records, where trace is given, the time (globaltimer, ns) at
// mark k of layer l into trace[l·DT_MARKS + k] and the block's clock at
// trace[(L + l)·DT_MARKS + k], by thread 0 (the phases' profile:
// TokenTrace).
#define DT_MARKS 16
__device__ __forceinline__ void dt_mark(unsigned long long* trace, int L, int l, int k) {
    if (trace == 0 || threadIdx.x != 0) return;
#ifdef DRUTO_EMU
    trace[l * DT_MARKS + k] = 1;
    trace[(L + l) * DT_MARKS + k] = 1;
#else
    unsigned long long g;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
    trace[l * DT_MARKS + k] = g;
    trace[(L + l) * DT_MARKS + k] = clock64();
#endif
}

// dt_copy queues the copy of bytes (a multiple of 16, both ends 16-byte
// aligned) from global src to shared dst over the block's threads.
__device__ __forceinline__ void dt_copy(void* dst, const void* src, int bytes) {
    char* d = (char*)dst;
    const char* s = (const char*)src;
    for (int o = threadIdx.x * 16; o < bytes; o += DT_THREADS * 16) dt_cp16(d + o, s + o);
}

// dt_vec copies n values of T from global src into fp32 dst in shared
// memory over the block's threads (plain loads: issued while the block
// waits for its next link, which orders them before their use).
__device__ __forceinline__ void dt_vec(float* dst, const T* src, int n) {
    for (int i = threadIdx.x; i < n; i += DT_THREADS) dst[i] = load(src, i);
}

// dt_span is the rows [lo, hi) of R that part w of n takes.
__device__ __forceinline__ void dt_span(int R, int w, int n, int& lo, int& hi) {
    lo = (int)((long)R * w / n);
    hi = (int)((long)R * (w + 1) / n);
}

// dt_span2 is dt_span over R/2 pairs of rows (R even), in rows: a worker's
// rows of qkv and h go out two T a word.
__device__ __forceinline__ void dt_span2(int R, int w, int n, int& lo, int& hi) {
    dt_span(R / 2, w, n, lo, hi);
    lo *= 2;
    hi *= 2;
}

// dt_layernorm: out[i] = round_T(n_i·w_i + b_i), n_i = rstd·(x_i - mean),
// of the C fp32 values x (shared memory), by warp 0; the others wait at the
// barrier that ends it. C <= 32·DT_LNV.
#define DT_LNV 32
__device__ void dt_layernorm(float* out, const float* x, const float* w, const float* b, int C) {
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        float v[DT_LNV];
        float sum = 0.f;
#pragma unroll
        for (int k = 0; k < DT_LNV; k++) {
            const int i = lane + 32 * k;
            v[k] = i < C ? x[i] : 0.f;
            sum += v[k];
        }
        const float m = warp_sum(sum) / (float)C;
        float sq = 0.f;
#pragma unroll
        for (int k = 0; k < DT_LNV; k++) {
            const int i = lane + 32 * k;
            if (i < C) {
                const float d = v[k] - m;
                sq += d * d;
            }
        }
        const float s = 1.0f / sqrtf(warp_sum(sq) / (float)C + 1e-5f);
#pragma unroll
        for (int k = 0; k < DT_LNV; k++) {
            const int i = lane + 32 * k;
            if (i < C) {
                const float n = __fmul_rn(s, __fsub_rn(v[k], m));
                out[i] = round_to<T>(__fadd_rn(__fmul_rn(n, w[i]), b[i]));
            }
        }
    }
    __syncthreads();
}

// dt_matvec: res[r] = Σ_k in[k]·W[r·K + k] (fp32) for the nr rows of W in
// shared memory (K a multiple of 8). Each row is cut into P parts (P warps
// a row where the rows are fewer than the warps), a warp taking (row, part)
// tasks w, w + DT_WARPS, ...: its lanes take the part's 16-byte vectors in
// turn and the warp's sum goes to red[r·P + part]; the parts are then added
// in order. red holds nr·P floats.
__device__ void dt_matvec(float* res, const T* W, const float* in, int nr, int K, float* red) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int V = K / 8; // vectors a row
    if (nr <= 0) return; // (uniform over the block: no barrier is skipped by some threads only)
    const int P = nr >= DT_WARPS ? 1 : DT_WARPS / nr;
    const int per = (V + P - 1) / P;
    for (int task = warp; task < nr * P; task += DT_WARPS) {
        const int r = task / P, part = task % P;
        const int lo = part * per, hi = min(V, lo + per);
        const uint4* wr = reinterpret_cast<const uint4*>(W + (size_t)r * K);
        float acc = 0.f;
#pragma unroll 4
        for (int c = lo + lane; c < hi; c += 32) {
            float wf[8];
            unpack16(wr[c], wf);
            const float4 a = reinterpret_cast<const float4*>(in)[2 * c];
            const float4 b = reinterpret_cast<const float4*>(in)[2 * c + 1];
            acc += wf[0] * a.x + wf[1] * a.y + wf[2] * a.z + wf[3] * a.w + wf[4] * b.x + wf[5] * b.y + wf[6] * b.z +
                   wf[7] * b.w;
        }
        acc = warp_sum(acc);
        if (lane == 0) red[task] = acc;
    }
    __syncthreads();
    for (int r = threadIdx.x; r < nr; r += DT_THREADS) {
        float s = 0.f;
        for (int p = 0; p < P; p++) s += red[r * P + p];
        res[r] = s;
    }
    __syncthreads();
}

struct DtArgs {
    T* out;             // (C) the final layernorm of the last x (the head's input)
    const float* x0;    // (C) the encoder's output: layer 0's x
    unsigned long long* xs;    // (2, C) LL words: the layers' x (fp32), alternating
    unsigned long long* qkv;   // (3C/2) LL words: the current layer's q, k, v (two T a word)
    unsigned long long* ypart; // (NH, C) LL words: the heads' shares of the attention projection (fp32)
    unsigned long long* hbuf;  // (2C) LL words: the MLP's hidden row (two T a word)
    unsigned* seq;             // (1) the launch's sequence number
    const T *ln1w, *ln1b, *qkvw, *qkvb, *projw, *projb, *ln2w, *ln2b, *fcw, *fcb, *fcpw, *fcpb;
    const T *lnfw, *lnfb;
    T* kc;              // layer 0's key cache (NH, S, hs); layer l at kc + l·kvs
    T* vc;
    const int* pos;     // the position this step writes (the cache holds pos[0] before it)
    unsigned long long* trace; // (2L, DT_MARKS) the phases' marks (dt_mark), 0: none
    int C, NH, S, L, cap;
    long long ls;       // elements from a layer's parameter to the next layer's
    long long kvs;      // elements from a layer's cache to the next layer's
    unsigned E;         // the launch's flags: E + l + 1 for layer l's words (seq[0] at launch)
};

// A worker's shared memory: the weight slots, then the fp32 vectors.
struct DtWorker {
    T *wq, *wf, *wfp;
    float *x, *x2, *xn, *h, *res, *red;
    float *lw, *lb, *pb, *bias; // the phase's layernorm weights, the attention projection's bias, its rows' biases
};

__device__ __forceinline__ DtWorker dt_worker_smem(unsigned char* sm, int C, int NW) {
    DtWorker s;
    const int rq = 2 * ((3 * C / 2 + NW - 1) / NW), rf = 2 * ((2 * C + NW - 1) / NW), rp = (C + NW - 1) / NW;
    s.wq = (T*)sm;
    s.wf = s.wq + (size_t)rq * C;
    s.wfp = s.wf + (size_t)rf * C;
    s.x = (float*)(s.wfp + (size_t)rp * 4 * C);
    s.x2 = s.x + C;
    s.xn = s.x2 + C;
    s.h = s.xn + C;
    s.res = s.h + 4 * C;
    s.red = s.res + rf; // max(rf, DT_WARPS) tasks
    s.lw = s.red + (rf > DT_WARPS ? rf : DT_WARPS);
    s.lb = s.lw + C;
    s.pb = s.lb + C;
    s.bias = s.pb + C; // rf
    return s;
}

// A head block's: Wp's columns, the keys and values, then the fp32 scratch.
struct DtHead {
    T *wp, *k, *v, *kn, *vn;
    float *q, *p, *o, *red;
};

__device__ __forceinline__ DtHead dt_head_smem(unsigned char* sm, int C, int S, int cap) {
    DtHead s;
    s.wp = (T*)sm;
    s.k = s.wp + (size_t)C * DT_HS;
    s.v = s.k + (size_t)cap * DT_HS;
    s.kn = s.v + (size_t)cap * DT_HS;
    s.vn = s.kn + DT_HS;
    s.q = (float*)(s.vn + DT_HS);
    s.p = s.q + DT_HS;
    s.o = s.p + S;
    s.red = s.o + DT_HS; // the p·V groups' sums (DT_THREADS), then the warps' maxima and sums
    return s;
}

// dt_head_load queues head h's copies for layer l: Wp's hs columns (C rows
// of hs elements, 16 bytes at a time) and the cached keys and values of
// positions [0, min(n, cap)).
__device__ void dt_head_load(const DtHead& s, const T* projw, const T* kc, const T* vc, int l, int h, int n, int C,
                             int S, int cap, long long ls, long long kvs) {
    const int hs = DT_HS, VPR = hs / 8; // vectors a row of the slice
    const T* wp = projw + (size_t)l * ls + h * hs;
    for (int i = threadIdx.x; i < C * VPR; i += DT_THREADS) {
        const int r = i / VPR, c = i % VPR;
        dt_cp16(s.wp + (size_t)r * hs + c * 8, wp + (size_t)r * C + c * 8);
    }
    const int m = min(n, cap);
    const size_t at = (size_t)l * kvs + (size_t)h * S * hs;
    dt_copy(s.k, kc + at, m * hs * (int)sizeof(T));
    dt_copy(s.v, vc + at, m * hs * (int)sizeof(T));
    dt_cp_commit();
}

// dt_worker_load queues worker w's copy of layer l's rows of one product
// (which: 0 qkv, 1 fc, 2 the MLP projection) as one group; a worker's
// groups are waited for in the order queued.
__device__ void dt_worker_load(const DtWorker& s, const T* qkvw, const T* fcw, const T* fcpw, int l, int w, int NW,
                               int which, int C, long long ls) {
    int lo, hi;
    if (which == 0) {
        dt_span2(3 * C, w, NW, lo, hi);
        dt_copy(s.wq, qkvw + (size_t)l * ls + (size_t)lo * C, (hi - lo) * C * (int)sizeof(T));
    } else if (which == 1) {
        dt_span2(4 * C, w, NW, lo, hi);
        dt_copy(s.wf, fcw + (size_t)l * ls + (size_t)lo * C, (hi - lo) * C * (int)sizeof(T));
    } else {
        dt_span(C, w, NW, lo, hi);
        dt_copy(s.wfp, fcpw + (size_t)l * ls + (size_t)lo * 4 * C, (hi - lo) * 4 * C * (int)sizeof(T));
    }
    dt_cp_commit();
}

// dt_head runs head h's attention and projection share for every layer.
__device__ void dt_head(const DtArgs& a, unsigned char* sm, int h) {
    const int C = a.C, hs = DT_HS, t = threadIdx.x, lane = t % 32, warp = t / 32;
    const int pos = a.pos[0], n = pos + 1; // positions attended: the cached ones and the newest
    const DtHead s = dt_head_smem(sm, C, a.S, a.cap);
    unsigned long long* tr = h == 0 ? a.trace : (unsigned long long*)0;
    const int m = min(pos, a.cap); // cached positions in shared memory
    const float scale = rsqrtf((float)hs);
    for (int l = 0; l < a.L; l++) {
        T* kl = a.kc + (size_t)l * a.kvs + (size_t)h * a.S * hs;
        T* vl = a.vc + (size_t)l * a.kvs + (size_t)h * a.S * hs;
        const unsigned f = a.E + l + 1;
        // q, and the newest key and value (which go to the caches at pos):
        // thread 32·part + u takes word u of the head's hs/2 of each.
        if (t < 3 * hs / 2) {
            const int part = t / (hs / 2), u = t % (hs / 2);
            const unsigned long long* p = a.qkv + (part * C + h * hs) / 2 + u;
            const unsigned v = dt_ready(dt_ld64(p), p, f);
            if (part == 0) {
                dt_unpack2(v, s.q + 2 * u);
            } else {
                T* row = part == 1 ? s.kn : s.vn;
                T* cache = (part == 1 ? kl : vl) + (size_t)pos * hs;
                reinterpret_cast<unsigned*>(row)[u] = v;
                reinterpret_cast<unsigned*>(cache)[u] = v;
            }
        }
        dt_mark(tr, a.L, l, 13);
        dt_cp_wait<0>();
        __syncthreads();
        // Scores: 8 lanes a position, 16 bytes each. A warp's 4 positions go
        // round together while the first is below n: the shuffles name every
        // lane, so no lane may leave the loop before the others (lanes past n
        // read s.kn and store nothing).
        const int j0 = t / 8, part = t % 8;
        float qv[8];
        for (int e = 0; e < 8; e++) qv[e] = s.q[part * 8 + e];
        for (int j = j0; j - lane / 8 < n; j += DT_THREADS / 8) {
            const T* kr = j < m ? s.k + (size_t)j * hs : (j < pos ? kl + (size_t)j * hs : s.kn);
            float kf[8];
            unpack16(reinterpret_cast<const uint4*>(kr)[part], kf);
            float d = 0.f;
            for (int e = 0; e < 8; e++) d += qv[e] * kf[e];
            d += __shfl_xor_sync(0xffffffffu, d, 1);
            d += __shfl_xor_sync(0xffffffffu, d, 2);
            d += __shfl_xor_sync(0xffffffffu, d, 4);
            if (part == 0 && j < n) s.p[j] = d * scale;
        }
        __syncthreads();
        // The max, then the weights and their sum (warps in order).
        float mx = DT_NEG_INF;
        for (int j = t; j < n; j += DT_THREADS) mx = fmaxf(mx, s.p[j]);
        for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
        float* red = s.red + DT_THREADS;
        if (lane == 0) red[warp] = mx;
        __syncthreads();
        mx = red[0];
        for (int w = 1; w < DT_WARPS; w++) mx = fmaxf(mx, red[w]);
        float sum = 0.f;
        for (int j = t; j < n; j += DT_THREADS) {
            const float e = expf(s.p[j] - mx);
            s.p[j] = e;
            sum += e;
        }
        sum = warp_sum(sum);
        if (lane == 0) red[DT_WARPS + warp] = sum;
        __syncthreads();
        float den = 0.f;
        for (int w = 0; w < DT_WARPS; w++) den += red[DT_WARPS + w];
        // p·V: thread (g, d) sums positions g, g + G, ... of dimension d.
        const int G = DT_THREADS / hs, g = t / hs, d = t % hs;
        float acc = 0.f;
        for (int j = g; j < n; j += G) {
            const T* vr = j < m ? s.v + (size_t)j * hs : (j < pos ? vl + (size_t)j * hs : s.vn);
            acc += s.p[j] * load(vr, d);
        }
        s.red[g * hs + d] = acc;
        __syncthreads();
        if (t < hs) {
            float o = 0.f;
            for (int k = 0; k < G; k++) o += s.red[k * hs + t];
            s.o[t] = round_to<T>(o / den);
        }
        __syncthreads();
        dt_mark(tr, a.L, l, 14);
        // The head's share of the projection: output c takes Wp row c's hs
        // columns (8 vectors, taken from vector c % 8 on: 8 neighbouring
        // threads read 8 different bank groups).
        unsigned long long* yp = a.ypart + (size_t)h * C;
        for (int c = t; c < C; c += DT_THREADS) {
            const uint4* wr = reinterpret_cast<const uint4*>(s.wp + (size_t)c * hs);
            float y = 0.f;
            for (int i = 0; i < hs / 8; i++) {
                const int u = (i + c) % (hs / 8);
                float wf[8];
                unpack16(wr[u], wf);
                float part8 = 0.f;
                for (int e = 0; e < 8; e++) part8 += wf[e] * s.o[u * 8 + e];
                y += part8;
            }
            dt_put(yp + c, __float_as_uint(y), f);
        }
        dt_mark(tr, a.L, l, 15);
        __syncthreads(); // every thread done with the shared memory the next copies overwrite
        if (l + 1 < a.L) dt_head_load(s, a.projw, a.kc, a.vc, l + 1, h, pos, C, a.S, a.cap, a.ls, a.kvs);
    }
}

// dt_worker runs worker w's rows of every layer's products.
__device__ void dt_worker(const DtArgs& a, unsigned char* sm, int w, int NW) {
    const int C = a.C, t = threadIdx.x;
    const DtWorker s = dt_worker_smem(sm, C, NW);
    unsigned long long* tr = w == 0 ? a.trace : (unsigned long long*)0;
    int q0, q1, f0, f1, p0, p1;
    dt_span2(3 * C, w, NW, q0, q1);
    dt_span2(4 * C, w, NW, f0, f1);
    dt_span(C, w, NW, p0, p1);
    for (int l = 0; l < a.L; l++) {
        const size_t lo = (size_t)l * a.ls;
        const unsigned f = a.E + l + 1; // this layer's words
        // Q: LN1(x) and the worker's rows of qkv.
        dt_mark(tr, a.L, l, 0);
        // The phase's small vectors into shared memory, then x.
        dt_vec(s.lw, a.ln1w + lo, C);
        dt_vec(s.lb, a.ln1b + lo, C);
        dt_vec(s.bias, a.qkvb + lo + q0, q1 - q0);
        if (l == 0)
            for (int i = t; i < C; i += DT_THREADS) s.x[i] = a.x0[i];
        else
            dt_gather(reinterpret_cast<unsigned*>(s.x), a.xs + (size_t)((l - 1) % 2) * C, C, f - 1);
        __syncthreads();
        dt_mark(tr, a.L, l, 1);
        dt_layernorm(s.xn, s.x, s.lw, s.lb, C);
        dt_mark(tr, a.L, l, 2);
        dt_cp_wait<2>();
        __syncthreads();
        dt_mark(tr, a.L, l, 3);
        dt_matvec(s.res, s.wq, s.xn, q1 - q0, C, s.red);
        dt_mark(tr, a.L, l, 4);
        for (int r = t; r < (q1 - q0) / 2; r += DT_THREADS)
            dt_put(a.qkv + q0 / 2 + r, dt_pack2(s.res[2 * r] + s.bias[2 * r], s.res[2 * r + 1] + s.bias[2 * r + 1]), f);
        dt_mark(tr, a.L, l, 5);
        __syncthreads(); // (the stores read s.bias, which F's vectors overwrite)
        if (l + 1 < a.L) dt_worker_load(s, a.qkvw, a.fcw, a.fcpw, l + 1, w, NW, 0, C, a.ls);
        else dt_cp_commit(); // an empty group keeps the waits' count
        // F: the projection from the heads' shares, x2, LN2, fc + GELU.
        dt_vec(s.lw, a.ln2w + lo, C);
        dt_vec(s.lb, a.ln2b + lo, C);
        dt_vec(s.pb, a.projb + lo, C);
        dt_vec(s.bias, a.fcb + lo + f0, f1 - f0);
        // The heads' shares of element i, all loads in flight before the
        // sum (in head order).
        for (int i = t; i < C; i += DT_THREADS) {
            unsigned long long wv[DT_MAXH];
#pragma unroll
            for (int hh = 0; hh < DT_MAXH; hh++) wv[hh] = hh < a.NH ? dt_ld64(a.ypart + (size_t)hh * C + i) : 0ull;
            float sum = 0.f;
#pragma unroll
            for (int hh = 0; hh < DT_MAXH; hh++)
                if (hh < a.NH) sum += __uint_as_float(dt_ready(wv[hh], a.ypart + (size_t)hh * C + i, f));
            s.x2[i] = s.x[i] + round_to<T>(sum + s.pb[i]);
        }
        __syncthreads();
        dt_mark(tr, a.L, l, 6);
        dt_mark(tr, a.L, l, 7);
        dt_layernorm(s.xn, s.x2, s.lw, s.lb, C);
        dt_cp_wait<2>();
        __syncthreads();
        dt_mark(tr, a.L, l, 8);
        dt_matvec(s.res, s.wf, s.xn, f1 - f0, C, s.red);
        for (int r = t; r < (f1 - f0) / 2; r += DT_THREADS)
            dt_put(a.hbuf + f0 / 2 + r,
                   dt_pack2(gelu_f(s.res[2 * r] + s.bias[2 * r]), gelu_f(s.res[2 * r + 1] + s.bias[2 * r + 1])), f);
        dt_mark(tr, a.L, l, 9);
        __syncthreads();
        if (l + 1 < a.L) dt_worker_load(s, a.qkvw, a.fcw, a.fcpw, l + 1, w, NW, 1, C, a.ls);
        else dt_cp_commit();
        // FP: the worker's rows of x3 = x2 + h·Wfpᵀ + b.
        dt_vec(s.bias, a.fcpb + lo + p0, p1 - p0);
        {
            unsigned long long wv[DT_PER];
#pragma unroll
            for (int k = 0; k < DT_PER; k++) {
                const int i = t + k * DT_THREADS;
                wv[k] = i < 2 * C ? dt_ld64(a.hbuf + i) : 0ull;
            }
#pragma unroll
            for (int k = 0; k < DT_PER; k++) {
                const int i = t + k * DT_THREADS;
                if (i < 2 * C) dt_unpack2(dt_ready(wv[k], a.hbuf + i, f), s.h + 2 * i);
            }
        }
        dt_mark(tr, a.L, l, 10);
        dt_cp_wait<2>();
        __syncthreads();
        dt_mark(tr, a.L, l, 11);
        dt_matvec(s.res, s.wfp, s.h, p1 - p0, 4 * C, s.red);
        unsigned long long* xout = a.xs + (size_t)(l % 2) * C;
        for (int r = t; r < p1 - p0; r += DT_THREADS)
            dt_put(xout + p0 + r, __float_as_uint(s.x2[p0 + r] + round_to<T>(s.res[r] + s.bias[r])), f);
        dt_mark(tr, a.L, l, 12);
        __syncthreads();
        if (l + 1 < a.L) dt_worker_load(s, a.qkvw, a.fcw, a.fcpw, l + 1, w, NW, 2, C, a.ls);
        else dt_cp_commit();
    }
}

// decode_token: grid (NH + NW) blocks of DT_THREADS, one an SM, the
// launcher's dynamic shared memory; seq and the LL words zero before the
// first launch (then as the launches leave them).
// Parameters as DtArgs's fields; the weights are layer 0's, layer l's at
// ls elements on, the caches layer 0's, layer l's at kvs elements on.
extern "C" __global__ void __launch_bounds__(DT_THREADS, 1) decode_token(T* __restrict__ out,
        const float* __restrict__ x0, unsigned long long* xs, unsigned long long* qkv, unsigned long long* ypart,
        unsigned long long* hbuf, unsigned* __restrict__ seq, const T* __restrict__ ln1w, const T* __restrict__ ln1b,
        const T* __restrict__ qkvw, const T* __restrict__ qkvb, const T* __restrict__ projw,
        const T* __restrict__ projb, const T* __restrict__ ln2w, const T* __restrict__ ln2b,
        const T* __restrict__ fcw, const T* __restrict__ fcb, const T* __restrict__ fcpw, const T* __restrict__ fcpb,
        const T* __restrict__ lnfw, const T* __restrict__ lnfb, T* kc, T* vc, const int* __restrict__ pos, int C,
        int NH, int S, int L, int cap, long long ls, long long kvs, unsigned long long* trace) {
#ifdef DRUTO_EMU
    unsigned char* sm = emu_block_smem();
#else
    extern __shared__ __align__(16) unsigned char dt_smem[];
    unsigned char* sm = dt_smem;
#endif
    // Before the wait: the first layer's weights (and a head's cached keys
    // and values) on their way into shared memory. No kernel of a decode
    // step writes them, nor pos (uploaded before the step), and the cache
    // rows below pos were written by earlier steps' decode_token, which had
    // completed before the kernels between (the LM head, the draw, the
    // encoder: each waits for its predecessor before it lets its dependent
    // start) let this one start.
    const int NW = gridDim.x - NH;
    if ((int)blockIdx.x < NH) {
        dt_head_load(dt_head_smem(sm, C, S, cap), projw, kc, vc, 0, blockIdx.x, pos[0], C, S, cap, ls, kvs);
    } else {
        const DtWorker s = dt_worker_smem(sm, C, NW);
        for (int which = 0; which < 3; which++)
            dt_worker_load(s, qkvw, fcw, fcpw, 0, blockIdx.x - NH, NW, which, C, ls);
    }
    pdl_enter();
    // This launch's flags are E + 1 .. E + L, above every earlier one's.
    const unsigned E = seq[0];
    const DtArgs a = {out, x0, xs, qkv, ypart, hbuf, seq, ln1w, ln1b, qkvw, qkvb, projw, projb, ln2w, ln2b,
                      fcw, fcb, fcpw, fcpb, lnfw, lnfb, kc, vc, pos, trace, C, NH, S, L, cap, ls, kvs, E};
    if ((int)blockIdx.x < NH)
        dt_head(a, sm, blockIdx.x);
    else
        dt_worker(a, sm, blockIdx.x - NH, NW);
    // The final layernorm of x(L), by block 0, which then advances the
    // sequence number: every block has read it (each took part in the last
    // layer, whose x it waited for).
    if (blockIdx.x == 0) {
        float* x = (float*)sm;
        float* xn = x + a.C;
        float* lw = xn + a.C;
        float* lb = lw + a.C;
        __syncthreads();
        dt_vec(lw, a.lnfw, a.C);
        dt_vec(lb, a.lnfb, a.C);
        dt_gather(reinterpret_cast<unsigned*>(x), a.xs + (size_t)((a.L - 1) % 2) * a.C, a.C, a.E + a.L);
        __syncthreads();
        dt_layernorm(xn, x, lw, lb, a.C);
        for (int i = threadIdx.x; i < a.C; i += DT_THREADS) store(a.out, i, xn[i]);
        // Near the flags' wrap, every word back to zero (no block reads one
        // any more) and the count from zero.
        unsigned next = E + L + 1;
        if (next > 0xf0000000u) {
            const int n[4] = {2 * C, 3 * C / 2, NH * C, 2 * C};
            unsigned long long* p[4] = {xs, qkv, ypart, hbuf};
            for (int k = 0; k < 4; k++)
                for (int i = threadIdx.x; i < n[k]; i += DT_THREADS) p[k][i] = 0ull;
            next = 0;
        }
        if (threadIdx.x == 0) seq[0] = next;
    }
}
