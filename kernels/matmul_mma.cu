// matmul_mma.cu: the forward of a linear layer over a batch of decode rows
// (pkg/device/gpu/matmul.go: more than matmul_rows' ROWS_MAX rows and at
// most MMA_ROWS), out = inp·Wᵀ + bias with an optional GELU, on the tensor
// cores (mma.sync m16n8k16, fp32 accumulators).
//
// druto:kernel matmul_mma
// druto:pdl-weights matmul_mma:w
// druto:dtypes bf16 f16
// druto:arch 80
//
// At 9 to 64 rows a step reads each weight once and does little arithmetic
// with it, so the kernel is built around the weights' bytes and the links
// between kernels, not around the products (a GEMM library tiles such an
// output into few tiles and leaves most SMs idle):
//   - block (x, s) of a grid (ceil(OC/MMA_NB), S) owns MMA_NB output
//     columns and the s-th of S equal slices of C (kb elements, a multiple
//     of 32); the launcher picks S so that the grid fills the GPU;
//   - warp w of the block takes the slice's 32-element chunks w, w+4, ...,
//     MMA_CPW of them at once: for each, one 16-byte load of W a lane and
//     n-tile, and two of inp a lane and 16-row tile;
//   - a lane's 16-byte vector of a row holds elements 8t..8t+7 of the
//     chunk (t = lane % 4). The kernel feeds elements 8t, 8t+1 where the
//     mma's fragments want k = 2t, 2t+1, 8t+2, 8t+3 for 2t+8, 2t+9 (first
//     k16 step), and 8t+4..8t+7 the same way in the second: one permutation
//     of k, the same for both operands, so every product meets its partner
//     and the fragments come straight from global memory, no shared-memory
//     staging, no ldmatrix;
//   - the first chunks' loads of W are issued before pdl_enter() (the
//     druto:pdl-weights line): W is a weight, which no kernel of a decode
//     step writes, so under a programmatic dependent launch they overlap
//     the kernel before this one;
//   - the warps' partial tiles are added in warp order through shared
//     memory; with S > 1 each block writes its slice's sums as fp32 into
//     part (S, N, OC), and the last block of a column tile to finish (a
//     counter a tile in done, set back to zero by that block) adds the S
//     partials in slice order. Deterministic, whatever the finishing order.
// The epilogue adds the bias to the fp32 sum; under GELU pre gets the sum
// and out gelu of it, each rounded once (matmul_rows' and the CPU
// reference's).
// Requirements (the launcher's): C a multiple of 32, inp and W 16-byte
// aligned, N <= MMA_ROWS, sm_80 (bf16 mma).

#include "common.cuh"
#include "flash_common.cuh"

// druto:block MMA_BLOCK matmul_mma
#define MMA_BLOCK 128
#define MMA_WARPS (MMA_BLOCK / 32)
#define MMA_ROWS 64 // the most rows (read by the launcher)
#define MMA_NB 32   // a block's output columns (read by the launcher)
#define MMA_NT (MMA_NB / 8)
#define MMA_MT (MMA_ROWS / 16)
#define MMA_CPW 3 // the chunks a warp holds at once
#define MMA_LD (MMA_NB + 4)

// mma_ld16 is the 16-byte vector at p, or zeros where ok is false.
__device__ __forceinline__ uint4 mma_ld16(const T* p, bool ok) {
    uint4 v = {0u, 0u, 0u, 0u};
    if (ok) v = *reinterpret_cast<const uint4*>(p);
    return v;
}

// mma_loadw loads the lane's vectors of W for chunks c, c + MMA_WARPS, ...
// (MMA_CPW of them; those at or past nch are zeros): row col0 + 8j + g of
// W, elements k0 + 32·chunk + 8t...
__device__ __forceinline__ void mma_loadw(uint4 (&bw)[MMA_CPW][MMA_NT], const T* w, int C, int OC, int col0, int g, int t,
                                          int k0, int c, int nch) {
#pragma unroll
    for (int u = 0; u < MMA_CPW; u++) {
        const int cc = c + u * MMA_WARPS;
#pragma unroll
        for (int j = 0; j < MMA_NT; j++) {
            const int n = col0 + 8 * j + g;
            bw[u][j] = mma_ld16(w + (size_t)min(n, OC - 1) * C + k0 + 32 * cc + 8 * t, cc < nch && n < OC);
        }
    }
}

// mma_out finishes output (r, col) from its fp32 sum v.
__device__ __forceinline__ void mma_out(T* out, T* pre, const T* bias, int gelu, int OC, int r, int col, float v) {
    if (bias) v += load(bias, col);
    const size_t o = (size_t)r * OC + col;
    if (gelu) {
        store(pre, o, v);
        store(out, o, gelu_f(v));
    } else {
        store(out, o, v);
    }
}

// out, pre (N,OC) (pre only under gelu), inp (N,C), w (OC,C), bias (OC) or
// null; part (S,N,OC) fp32 and done (gridDim.x) counters, zero before the
// first launch, used where S = gridDim.y > 1; kb = C/S.
extern "C" __global__ void __launch_bounds__(MMA_BLOCK, 2)
    matmul_mma(T* __restrict__ out, T* __restrict__ pre, const T* __restrict__ inp, const T* __restrict__ w,
               const T* __restrict__ bias, float* __restrict__ part, unsigned* __restrict__ done, int N, int C, int OC,
               int gelu, int kb) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int col0 = blockIdx.x * MMA_NB;
    const int S = gridDim.y, s = blockIdx.y;
    const int k0 = s * kb, nch = kb / 32;
    uint4 bw[MMA_CPW][MMA_NT];
    mma_loadw(bw, w, C, OC, col0, g, t, k0, warp, nch);
    pdl_enter();
    __shared__ float red[MMA_WARPS][MMA_ROWS][MMA_LD];
    __shared__ int last;
    float acc[MMA_MT][MMA_NT][4];
#pragma unroll
    for (int i = 0; i < MMA_MT; i++)
#pragma unroll
        for (int j = 0; j < MMA_NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.f;
    const int mt = (N + 15) / 16;
    for (int c = warp; c < nch; c += MMA_WARPS * MMA_CPW) {
        if (c != warp) mma_loadw(bw, w, C, OC, col0, g, t, k0, c, nch);
        // inp's rows 16i + g and 16i + 8 + g, the same elements of the chunk
        uint4 ax[MMA_CPW][MMA_MT][2];
#pragma unroll
        for (int u = 0; u < MMA_CPW; u++) {
            const int cc = c + u * MMA_WARPS;
#pragma unroll
            for (int i = 0; i < MMA_MT; i++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int r = 16 * i + 8 * h + g;
                    ax[u][i][h] = mma_ld16(inp + (size_t)min(r, N - 1) * C + k0 + 32 * cc + 8 * t, cc < nch && r < N);
                }
        }
#pragma unroll
        for (int u = 0; u < MMA_CPW; u++) {
            if (c + u * MMA_WARPS >= nch) break;
#pragma unroll
            for (int i = 0; i < MMA_MT; i++) {
                if (i >= mt) break;
                const unsigned a0[4] = {ax[u][i][0].x, ax[u][i][1].x, ax[u][i][0].y, ax[u][i][1].y};
                const unsigned a1[4] = {ax[u][i][0].z, ax[u][i][1].z, ax[u][i][0].w, ax[u][i][1].w};
#pragma unroll
                for (int j = 0; j < MMA_NT; j++) {
                    fa_mma(acc[i][j], a0, bw[u][j].x, bw[u][j].y);
                    fa_mma(acc[i][j], a1, bw[u][j].z, bw[u][j].w);
                }
            }
        }
    }
    // acc[i][j]: rows 16i + g (elements 0, 1) and 16i + 8 + g (2, 3),
    // columns 8j + 2t, 8j + 2t + 1 of the block's tile
#pragma unroll
    for (int i = 0; i < MMA_MT; i++) {
        if (i >= mt) break;
#pragma unroll
        for (int j = 0; j < MMA_NT; j++) {
            float* r0 = &red[warp][16 * i + g][8 * j + 2 * t];
            float* r1 = &red[warp][16 * i + 8 + g][8 * j + 2 * t];
            r0[0] = acc[i][j][0];
            r0[1] = acc[i][j][1];
            r1[0] = acc[i][j][2];
            r1[1] = acc[i][j][3];
        }
    }
    __syncthreads();
    float* ps = part + (size_t)s * N * OC;
    for (int e = threadIdx.x; e < N * MMA_NB; e += MMA_BLOCK) {
        const int r = e / MMA_NB, cl = e % MMA_NB, col = col0 + cl;
        if (col >= OC) continue;
        float v = red[0][r][cl];
#pragma unroll
        for (int q = 1; q < MMA_WARPS; q++) v += red[q][r][cl];
        if (S == 1)
            mma_out(out, pre, bias, gelu, OC, r, col, v);
        else
            ps[(size_t)r * OC + col] = v;
    }
    if (S == 1) return;
    // The last block of the column tile adds the slices: every block makes
    // its partial visible before it counts itself (the fence), and the last
    // reads them past L1 (volatile).
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        last = atomicAdd(done + blockIdx.x, 1u) == (unsigned)S - 1;
        if (last) done[blockIdx.x] = 0;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    const volatile float* pa = part;
    for (int e = threadIdx.x; e < N * MMA_NB; e += MMA_BLOCK) {
        const int r = e / MMA_NB, col = col0 + e % MMA_NB;
        if (col >= OC) continue;
        float v = 0.f;
        for (int q = 0; q < S; q++) v += pa[((size_t)q * N + r) * OC + col];
        mma_out(out, pre, bias, gelu, OC, r, col, v);
    }
}
