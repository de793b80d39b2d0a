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
// A block is 4 warps; warp w computes output columns w·16..w·16+15 (the
// mma's M, from W's rows) against every row of inp (the mma's N, 8 rows an
// n-tile), so the rows are padded only to 16, never to 64. The block's
// slice of W and of inp is copied into shared memory with cp.async in
// chunks of SPLIT_KCH columns, one commit group a chunk, all issued at
// once; the products of chunk i start when its group has landed, while
// later chunks are still in flight. Before pdl_enter() the block only asks
// L2 to prefetch its slice of W (the druto:pdl-weights line): nothing of a
// decode step writes W.
//
// grid (ceil(OC/SPLIT_COLS), S), SPLIT_BLOCK threads, cluster (1, S, 1),
// splitSmem(C/S, N) bytes of dynamic shared memory (pkg/device/gpu). The
// launcher guarantees 1 <= N <= SPLIT_ROWS, C a multiple of S·SPLIT_KCH,
// C/S <= SPLIT_KMAX, and inp and W 16-byte aligned.

#include "common.cuh"
#include "flash_common.cuh"

// druto:block SPLIT_BLOCK matmul_split4 matmul_split8
#define SPLIT_BLOCK 128
#define SPLIT_COLS 64             // output columns a cluster owns (4 warps × 16)
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
// epilogue (see the file comment).
__device__ __forceinline__ void split_body(T* __restrict__ out, T* __restrict__ pre, const T* __restrict__ inp,
        const T* __restrict__ w, const T* __restrict__ bias, int N, int C, int OC, int gelu, const int S) {
    const int kc = C / S, col0 = blockIdx.x * SPLIT_COLS, k0 = (int)blockIdx.y * kc;
    const int m = kc / SPLIT_KCH, R = (N + 15) & ~15;
#ifdef DRUTO_EMU
    unsigned short* sW = reinterpret_cast<unsigned short*>(druto_emu_cluster_smem());
#else
    extern __shared__ __align__(16) unsigned char split_smem[];
    unsigned short* sW = reinterpret_cast<unsigned short*>(split_smem);
#endif
    unsigned short* sX = sW + m * SPLIT_COLS * SPLIT_LD; // [m][R][SPLIT_LD]
    float* sP = reinterpret_cast<float*>(sW);           // [R][SPLIT_PLD], after the products
    const int VE = 8;                                    // elements of a 16-byte piece
    const int per = SPLIT_KCH / VE;                      // pieces of a chunk row
    for (int i = 0; i < m; i++) {
        const int kk = k0 + i * SPLIT_KCH;
        for (int p = threadIdx.x; p < SPLIT_COLS * per; p += SPLIT_BLOCK) {
            const int r = p / per, c = (p % per) * VE;
            const bool ok = col0 + r < OC;
            split_copy16(sW + (i * SPLIT_COLS + r) * SPLIT_LD + c, w + (size_t)(ok ? col0 + r : 0) * C + kk + c, ok);
        }
        for (int p = threadIdx.x; p < R * per; p += SPLIT_BLOCK) {
            const int r = p / per, c = (p % per) * VE;
            const bool ok = r < N;
            split_copy16(sX + (i * R + r) * SPLIT_LD + c, inp + (size_t)(ok ? r : 0) * C + kk + c, ok);
        }
        split_commit();
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int pairs = R / 16; // pairs of 8-row n-tiles
    float acc[SPLIT_ROWS / 8][4];
    fa_zero<SPLIT_ROWS>(acc);
    for (int i = 0; i < m; i++) {
        split_wait(min(m - 1 - i, 3));
        __syncthreads();
        const unsigned short* cw = sW + i * SPLIT_COLS * SPLIT_LD;
        const unsigned short* cx = sX + i * R * SPLIT_LD;
#pragma unroll
        for (int ks = 0; ks < SPLIT_KCH; ks += 16) {
            unsigned a[4];
            fa_ldA<SPLIT_LD>(a, cw, warp * 16, ks, lane);
#pragma unroll
            for (int j = 0; j < SPLIT_ROWS / 16; j++) {
                if (j < pairs) {
                    unsigned b[4];
                    fa_ldBt<SPLIT_LD>(b, cx, j * 16, ks, lane);
                    fa_mma(acc[2 * j], a, b[0], b[1]);
                    fa_mma(acc[2 * j + 1], a, b[2], b[3]);
                }
            }
        }
    }
    // The block's partial tile into shared memory (over the copies: every
    // warp is past its last fragment load first): acc[j][e] is output
    // column warp·16 + g + (e>>1)·8 of row j·8 + 2·t4 + (e&1).
    __syncthreads();
    const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int j = 0; j < SPLIT_ROWS / 8; j++) {
        if (j < 2 * pairs) {
#pragma unroll
            for (int e = 0; e < 4; e++)
                sP[(j * 8 + 2 * t4 + (e & 1)) * SPLIT_PLD + warp * 16 + g + (e >> 1) * 8] = acc[j][e];
        }
    }
    split_sync();
    // Block rank takes the rank-th part of the R × SPLIT_COLS tile, four
    // columns a thread: the S blocks' values loaded first (S loads in
    // flight), then added in rank order.
    const int rank = split_rank(), Q = R * (SPLIT_COLS / 4) / S;
    for (int u = rank * Q + threadIdx.x; u < (rank + 1) * Q; u += SPLIT_BLOCK) {
        const int n = u / (SPLIT_COLS / 4), c = u % (SPLIT_COLS / 4) * 4;
        if (n >= N || col0 + c >= OC) continue;
        float4 pv[8];
#pragma unroll
        for (int s = 0; s < 8; s++)
            if (s < S) pv[s] = split_peer(sP + n * SPLIT_PLD + c, s);
        float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int s = 0; s < 8; s++) {
            if (s < S) {
                v[0] += pv[s].x;
                v[1] += pv[s].y;
                v[2] += pv[s].z;
                v[3] += pv[s].w;
            }
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
    // No block leaves while another may still read its tile.
    split_sync();
}

// out, pre (gelu only) (N,OC) T; inp (N,C) T; w (OC,C) T; bias (OC) T or null
extern "C" __global__ void __cluster_dims__(1, 4, 1) __launch_bounds__(SPLIT_BLOCK) matmul_split4(T* __restrict__ out,
        T* __restrict__ pre, const T* __restrict__ inp, const T* __restrict__ w, const T* __restrict__ bias, int N,
        int C, int OC, int gelu) {
    split_prefetch_w(w, C, OC, 4);
    pdl_enter();
    split_body(out, pre, inp, w, bias, N, C, OC, gelu, 4);
}

extern "C" __global__ void __cluster_dims__(1, 8, 1) __launch_bounds__(SPLIT_BLOCK) matmul_split8(T* __restrict__ out,
        T* __restrict__ pre, const T* __restrict__ inp, const T* __restrict__ w, const T* __restrict__ bias, int N,
        int C, int OC, int gelu) {
    split_prefetch_w(w, C, OC, 8);
    pdl_enter();
    split_body(out, pre, inp, w, bias, N, C, OC, gelu, 8);
}
