// matmul_split.cu: the forward of a linear layer over a few rows (a
// decode step's batch, at most SPLIT_ROWS), out = inp·Wᵀ + bias with an
// optional GELU, on tensor cores, for Hopper (thread block clusters).
//
// druto:kernel matmul_split4 matmul_split8
// druto:pdl-weights matmul_split4:w matmul_split8:w
// druto:dtypes bf16 f16
// druto:arch 90
//
// At 9 to 64 rows a product is memory-bound on W (OC,C): 64 rows make 64
// FLOPs a byte of W. A GEMM library tiles the output into a few large
// tiles and leaves most SMs idle, or splits K and reduces the partial sums
// in a second kernel through global memory. Here a cluster of S blocks
// (S = 4 or 8, the kernel's name) owns a strip of SPLIT_COLS output
// columns; block r of the cluster (its rank) takes the r-th of S equal
// slices of C, so that ceil(OC/64)·S blocks stream W across the GPU. The S
// partial tiles are summed through distributed shared memory: every block
// leaves its fp32 tile in its own shared memory, the cluster waits at its
// barrier, and block r adds the r-th part of the tile from all S blocks,
// in rank order (the same sums for any schedule: deterministic, no
// atomics), then adds the bias, applies the GELU and stores.
//
// A block is 8 warps. Warp w computes output columns (w%4)·16.. (the
// mma's M, from W's rows) against every row of inp (the mma's N, 8 rows an
// n-tile; the rows padded to 16, a compile-time count of tiles, so that a
// chunk's fragment loads are all issued before its products), over the
// chunks of C of parity w/4: the two halves of the block each leave a
// partial tile, and the cluster's reduction adds 2·S of them. The block's
// slice of W and of inp is copied into shared memory with cp.async in
// chunks of SPLIT_KCH columns, one commit group a chunk, all issued at
// once; the products of a pair of chunks start when their groups have
// landed, while later chunks are still in flight. Before pdl_enter() the
// block only asks L2 to prefetch its slice of W (the druto:pdl-weights
// line): nothing of a decode step writes W.
//
// grid (ceil(OC/SPLIT_COLS), S), SPLIT_BLOCK threads, cluster (1, S, 1),
// splitSmem(C/S, N) bytes of dynamic shared memory (pkg/device/gpu). The
// launcher guarantees 1 <= N <= SPLIT_ROWS, C a multiple of S·SPLIT_KCH,
// C/S <= SPLIT_KMAX, and inp and W 16-byte aligned.

#include "common.cuh"
#include "flash_common.cuh"

// druto:block SPLIT_BLOCK matmul_split4 matmul_split8
#define SPLIT_BLOCK 256
#define SPLIT_COLS 64             // output columns a cluster owns (4 m-tiles of 16)
#define SPLIT_ROWS 64             // the most rows (read by the launcher)
#define SPLIT_KCH 32              // columns of C a pipeline chunk
#define SPLIT_LD 40               // a chunk row's stride in shared memory, SPLIT_KCH + 8 (80 bytes: ldmatrix conflict-free)
#define SPLIT_KMAX 512            // the longest slice of C a block takes (read by the launcher)
#define SPLIT_PLD 68              // the partial tile's row stride (fp32), SPLIT_COLS + 4

#ifdef DRUTO_EMU
// The host emulator (kernels/emu/matmul_split) implements these.
unsigned char* druto_emu_cluster_smem();
int druto_emu_cluster_rank();
void druto_emu_cluster_sync();
const float* druto_emu_cluster_peer(const float* p, int rank);
void druto_emu_cp_async16(void* dst, const void* src, int bytes);
#endif

__device__ __forceinline__ int split_rank() {
#ifdef DRUTO_EMU
    return druto_emu_cluster_rank();
#else
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return (int)r;
#endif
}

// split_sync is the cluster's barrier: every block's earlier shared-memory
// writes are visible to the others after it.
__device__ __forceinline__ void split_sync() {
#ifdef DRUTO_EMU
    druto_emu_cluster_sync();
#else
    asm volatile("barrier.cluster.arrive.aligned;\n\tbarrier.cluster.wait.aligned;" ::: "memory");
#endif
}

// split_peer reads the four fp32 at p (this block's shared memory,
// 16-byte aligned) in the shared memory of the cluster's block rank.
__device__ __forceinline__ float4 split_peer(const float* p, int rank) {
#ifdef DRUTO_EMU
    const float* q = druto_emu_cluster_peer(p, rank);
    return float4{q[0], q[1], q[2], q[3]};
#else
    unsigned a = fa_smem(p), r;
    float4 v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(r)
                 : "memory");
    return v;
#endif
}

// split_copy16 copies 16 bytes from global src into shared dst
// asynchronously, or writes 16 zero bytes when !valid.
__device__ __forceinline__ void split_copy16(void* dst, const void* src, bool valid) {
#ifdef DRUTO_EMU
    druto_emu_cp_async16(dst, src, valid ? 16 : 0);
#else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(fa_smem(dst)), "l"(src), "r"(valid ? 16 : 0)
                 : "memory");
#endif
}

__device__ __forceinline__ void split_commit() {
#ifndef DRUTO_EMU
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

// split_wait waits until at most n (0..3) of this thread's commit groups
// are still in flight.
__device__ __forceinline__ void split_wait(int n) {
#ifndef DRUTO_EMU
    switch (n) {
    case 0: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
    }
#endif
}

__device__ __forceinline__ void split_prefetch_l2(const void* p) {
#ifndef DRUTO_EMU
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#endif
}

// split_prefetch_w asks L2 for the block's slice of W (rows col0..,
// columns k0..k0+C/S, in 128-byte lines): the only memory a block touches
// before pdl_enter().
__device__ __forceinline__ void split_prefetch_w(const T* __restrict__ w, int C, int OC, const int S) {
    const int kc = C / S, col0 = blockIdx.x * SPLIT_COLS, k0 = (int)blockIdx.y * kc;
    const int lines = (kc * (int)sizeof(T) + 127) / 128;
    for (int i = threadIdx.x; i < SPLIT_COLS * lines; i += SPLIT_BLOCK) {
        const int r = min(col0 + i / lines, OC - 1);
        split_prefetch_l2(w + (size_t)r * C + k0 + (i % lines) * (128 / (int)sizeof(T)));
    }
}

// split_body: the copies, the products, the cluster's reduction and the
// epilogue (see the file comment), for S blocks a cluster and P pairs of
// 8-row n-tiles (R = 16·P rows, the last N..R-1 zero).
template <int S, int P>
__device__ __forceinline__ void split_body(T* __restrict__ out, T* __restrict__ pre, const T* __restrict__ inp,
        const T* __restrict__ w, const T* __restrict__ bias, int N, int C, int OC, int gelu) {
    constexpr int R = 16 * P;
    const int kc = C / S, col0 = blockIdx.x * SPLIT_COLS, k0 = (int)blockIdx.y * kc;
    const int m = kc / SPLIT_KCH;
#ifdef DRUTO_EMU
    unsigned short* sW = reinterpret_cast<unsigned short*>(druto_emu_cluster_smem());
#else
    extern __shared__ __align__(16) unsigned char split_smem[];
    unsigned short* sW = reinterpret_cast<unsigned short*>(split_smem);
#endif
    unsigned short* sX = sW + m * SPLIT_COLS * SPLIT_LD; // [m][R][SPLIT_LD]
    float* sP = reinterpret_cast<float*>(sW);           // [2][R][SPLIT_PLD], after the products
    const int tid = threadIdx.x;
    // Every chunk's copies at once: thread t copies 16 bytes (8 columns)
    // of W's row t/4 and, for t < 4R, of inp's row t/4, at the same place
    // of each chunk; rows past OC and N are zero-filled.
    {
        const int r = tid >> 2, c = (tid & 3) * 8;
        const bool wok = col0 + r < OC, xok = r < N, xrow = r < R;
        const T* ws = w + (size_t)(wok ? col0 + r : 0) * C + k0 + c;
        const T* xs = inp + (size_t)(xok ? r : 0) * C + k0 + c;
        unsigned short* wd = sW + r * SPLIT_LD + c;
        unsigned short* xd = sX + r * SPLIT_LD + c;
        for (int i = 0; i < m; i++) {
            split_copy16(wd + i * SPLIT_COLS * SPLIT_LD, ws + i * SPLIT_KCH, wok);
            if (xrow) split_copy16(xd + i * R * SPLIT_LD, xs + i * SPLIT_KCH, xok);
            split_commit();
        }
    }
    // Warp w: output columns (w%4)·16.., chunks of parity w/4.
    const int lane = tid & 31, warp = tid >> 5, mt = warp & 3, half = warp >> 2;
    float acc[2 * P][4];
    fa_zero<16 * P>(acc);
    for (int i = half; i - half < m; i += 2) {
        // chunks up to (i - half) + 1 have landed when at most m-2-(i-half) groups are in flight
        split_wait(max(0, min(m - 2 - (i - half), 3)));
        __syncthreads();
        if (i < m) {
            const unsigned short* cw = sW + i * SPLIT_COLS * SPLIT_LD;
            const unsigned short* cx = sX + i * R * SPLIT_LD;
#pragma unroll
            for (int ks = 0; ks < SPLIT_KCH; ks += 16) {
                unsigned a[4], b[P][4];
                fa_ldA<SPLIT_LD>(a, cw, mt * 16, ks, lane);
#pragma unroll
                for (int j = 0; j < P; j++) fa_ldBt<SPLIT_LD>(b[j], cx, j * 16, ks, lane);
#pragma unroll
                for (int j = 0; j < P; j++) {
                    fa_mma(acc[2 * j], a, b[j][0], b[j][1]);
                    fa_mma(acc[2 * j + 1], a, b[j][2], b[j][3]);
                }
            }
        }
    }
    // Each half's partial tile into shared memory (over the copies: every
    // warp is past its last fragment load first): acc[j][e] is output
    // column mt·16 + g + (e>>1)·8 of row j·8 + 2·t4 + (e&1).
    __syncthreads();
    {
        const int g = lane >> 2, t4 = lane & 3;
        float* p = sP + (half * R + 2 * t4) * SPLIT_PLD + mt * 16 + g;
#pragma unroll
        for (int j = 0; j < 2 * P; j++) {
#pragma unroll
            for (int e = 0; e < 4; e++) p[(j * 8 + (e & 1)) * SPLIT_PLD + (e >> 1) * 8] = acc[j][e];
        }
    }
    split_sync();
    // Block rank takes the rank-th part of the R × SPLIT_COLS tile, four
    // columns a thread: the 2·S partial values loaded first (all in
    // flight), then added in the order (rank, half).
    const int rank = split_rank();
    constexpr int Q = R * (SPLIT_COLS / 4) / S;
    for (int u = rank * Q + tid; u < (rank + 1) * Q; u += SPLIT_BLOCK) {
        const int n = u / (SPLIT_COLS / 4), c = u % (SPLIT_COLS / 4) * 4;
        if (n >= N || col0 + c >= OC) continue;
        float4 pv[2 * S];
#pragma unroll
        for (int s = 0; s < 2 * S; s++) pv[s] = split_peer(sP + ((s & 1) * R + n) * SPLIT_PLD + c, s >> 1);
        float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int s = 0; s < 2 * S; s++) {
            v[0] += pv[s].x;
            v[1] += pv[s].y;
            v[2] += pv[s].z;
            v[3] += pv[s].w;
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int col = col0 + c + i;
            if (col < OC) {
                float x = v[i];
                if (bias) x += load(bias, col);
                const size_t o = (size_t)n * OC + col;
                if (gelu) {
                    store(pre, o, x);
                    store(out, o, gelu_f(x));
                } else {
                    store(out, o, x);
                }
            }
        }
    }
    // No block leaves while another may still read its tiles.
    split_sync();
}

// split_rows runs split_body for the pairs of n-tiles N needs.
template <int S>
__device__ __forceinline__ void split_rows(T* __restrict__ out, T* __restrict__ pre, const T* __restrict__ inp,
        const T* __restrict__ w, const T* __restrict__ bias, int N, int C, int OC, int gelu) {
    switch ((N + 15) / 16) {
    case 1: split_body<S, 1>(out, pre, inp, w, bias, N, C, OC, gelu); break;
    case 2: split_body<S, 2>(out, pre, inp, w, bias, N, C, OC, gelu); break;
    case 3: split_body<S, 3>(out, pre, inp, w, bias, N, C, OC, gelu); break;
    default: split_body<S, 4>(out, pre, inp, w, bias, N, C, OC, gelu); break;
    }
}

// out, pre (gelu only) (N,OC) T; inp (N,C) T; w (OC,C) T; bias (OC) T or null
extern "C" __global__ void __cluster_dims__(1, 4, 1) __launch_bounds__(SPLIT_BLOCK) matmul_split4(T* __restrict__ out,
        T* __restrict__ pre, const T* __restrict__ inp, const T* __restrict__ w, const T* __restrict__ bias, int N,
        int C, int OC, int gelu) {
    split_prefetch_w(w, C, OC, 4);
    pdl_enter();
    split_rows<4>(out, pre, inp, w, bias, N, C, OC, gelu);
}

extern "C" __global__ void __cluster_dims__(1, 8, 1) __launch_bounds__(SPLIT_BLOCK) matmul_split8(T* __restrict__ out,
        T* __restrict__ pre, const T* __restrict__ inp, const T* __restrict__ w, const T* __restrict__ bias, int N,
        int C, int OC, int gelu) {
    split_prefetch_w(w, C, OC, 8);
    pdl_enter();
    split_rows<8>(out, pre, inp, w, bias, N, C, OC, gelu);
}
