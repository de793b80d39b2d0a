// matmul_tc.cu: the forward of a linear layer over 9 to 64 rows (a decode
// step's batch) on the tensor cores (pkg/device/gpu/matmul.go).
//
// druto:kernel matmul_rows_tc
// druto:pdl-weights matmul_rows_tc:w
// druto:dtypes bf16 f16
// druto:arch 80
//
// matmul_rows_tc: out = inp·Wᵀ + bias with an optional GELU (pre and out as
// matmul_rows writes them) for N in TC_ROWS_MIN..TC_ROWS_MAX. At such N a
// GEMM's tiles leave most SMs idle while the weights stream (gpt2-124M's
// fc_proj: 768 columns, 6 tiles of 128), and matmul_rows (CUDA cores) would
// be bound by its arithmetic; here the weights are spread over every SM in
// tiles of ct = 16·mt output columns × kc of the C inputs (a "K chunk"):
// grid (ceil(OC/ct), ceil(C/kc)), TC_BLOCK threads, and the launcher picks
// mt and kc from the sizes and the SM count only, so a CUDA graph replays
// the grid.
//
// Warp w of a block takes m-tile w % mt (16 columns) and part w / mt of
// the block's K chunk (kw = TC_WARPS/mt parts of span = kc/kw inputs, at
// most TC_SPAN). Its weights go straight from global memory into mma
// fragments: mma.m16n8k16 with W as the A operand (16 columns × 16 k,
// row-major as W is stored) and the rows as the B operand (16 k × 8 rows,
// "col": the rows of inp, k contiguous), so the N rows pad to 8, not 16.
// The dot product does not care in which order k is visited, so each
// lane's k are permuted to make its loads 16 bytes: lane (g = lane/4,
// t = lane%4) loads W[col g][k0+8t .. k0+8t+7] and W[col g+8][same] for
// each sub-block of 32 k (k0 = its start), and the two mma of the
// sub-block take those vectors' words (x, y) and (z, w) as the fragments
// of logical k (2t, 2t+1 | 2t+8, 2t+9): logical k 2t+j of mma s is
// k0 + 8t + 4s + j, 2t+8+j is k0 + 8t + 4s + 2 + j. The B fragments use
// the same map, so lane (g, t) reads row 8j+g of the staged rows at the
// same 8 k, again one 16-byte access.
//
// Order of the work:
//   - before pdl_enter(): every weight vector of the warp (at most
//     TC_SPAN/32 sub-blocks: 8 vectors a lane), issued before any is used
//     (the druto:pdl-weights line: W is a weight that no kernel of a decode
//     step writes; the kernel must not follow, on its stream, a kernel
//     that writes its W, as matmul_rows);
//   - the block's N (padded to 8) × kc rows of the input are staged in
//     shared memory (16-byte loads, zero past N and past C; rows TC_PAD
//     elements apart beyond kc so that a quarter warp's two rows fall on
//     different banks);
//   - the mma over the warp's sub-blocks and the rows' 8-row tiles,
//     fp32 accumulation;
//   - the kw parts' sums are added through shared memory in part order;
//     with one K chunk the block adds the bias, applies GELU and rounds
//     into out (and pre); else it writes its fp32 sums to part[chunk] and
//     counts itself on done[tile]; the last block of a column tile to
//     finish (the counter, which it resets) adds the chunks' sums in chunk
//     order, then bias and GELU, rounded once: deterministic, no float
//     atomics, as attention_decode merges its splits.
//
// Needs C a multiple of 8 and inp, W 16-byte aligned (the launcher falls
// back to cuBLASLt otherwise); out, pre and bias are written and read an
// element at a time. sm_80 and newer (mma.m16n8k16 with bf16, hence the
// file's arch line); older GPUs keep cuBLASLt.

#include "common.cuh"

// druto:block TC_BLOCK matmul_rows_tc
#define TC_BLOCK 256
#define TC_WARPS (TC_BLOCK / 32)
#define TC_ROWS_MIN 9  // the fewest rows the launcher gives it (fewer: matmul_rows)
#define TC_ROWS_MAX 64 // the most rows (8 tiles of 8 in the accumulators)
#define TC_SPAN 128    // the most k a warp takes (4 sub-blocks of 32: 8 vectors a lane)
#define TC_PAD 32      // elements after each staged input row
#define TC_RPAD 4      // floats after each row of the reduction tile
#define TC_SMEM 49152  // the most dynamic shared memory a launch asks (read by the launcher)
#define TC_U 8         // loads a thread has in flight while staging rows and adding chunks

#ifdef DRUTO_EMU
void druto_emu_mma(float* c, const unsigned* a, unsigned b0, unsigned b1);
alignas(16) static unsigned char tc_smem[TC_SMEM];
#else
extern __shared__ __align__(16) unsigned char tc_smem[];
#endif

// tc_zero4 is a 16-byte vector of zeros.
__device__ __forceinline__ uint4 tc_zero4() {
    uint4 z;
    z.x = z.y = z.z = z.w = 0u;
    return z;
}

// tc_mma: c (16 columns × 8 rows, fp32) += A (16 × 16: a0..a3) · B (16 × 8:
// b0, b1), the fragments of mma.m16n8k16 (row.col, fp32 accumulation).
__device__ __forceinline__ void tc_mma(float* c, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
#ifdef DRUTO_EMU
    const unsigned a[4] = {a0, a1, a2, a3};
    druto_emu_mma(c, a, b0, b1);
#else
#if DTYPE == DRUTO_BF16
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
#else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
#endif
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

// tc_ldcg loads p past L1 (another block wrote it in this launch).
__device__ __forceinline__ float tc_ldcg(const float* p) {
#ifdef DRUTO_EMU
    return *(const volatile float*)p;
#else
    float v;
    asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
#endif
}

// tc_finish adds the bias to the fp32 sum v of (row n, column col) and
// stores it rounded (under GELU pre gets the sum, out its gelu).
__device__ __forceinline__ void tc_finish(T* __restrict__ out, T* __restrict__ pre, const T* __restrict__ bias, float v,
        int n, int col, int OC, int gelu) {
    if (bias) v += load(bias, col);
    const size_t o = (size_t)n * OC + col;
    if (gelu) {
        store(pre, o, v);
        store(out, o, gelu_f(v));
    } else {
        store(out, o, v);
    }
}

// out (N,OC) T, pre (N,OC) T (gelu only), part (chunks,N,OC) fp32 scratch
// (chunks > 1), done (ceil(OC/ct)) counters, zero before the first launch
// (the last block of a tile sets its counter back to zero), inp (N,C) T,
// w (OC,C) T, bias (OC) T or null; dynamic shared memory
// max(NP·(kc+TC_PAD)·sizeof(T), kw·N·(ct+TC_RPAD)·4) bytes, NP = N rounded
// up to 8. mt in 1, 2, 4; kc a multiple of 32·kw, at most TC_SPAN·kw.
// 2 blocks an SM: at most 128 registers a thread (32 of weights, 32
// accumulators, the staged rows' vectors in flight).
extern "C" __global__ void __launch_bounds__(TC_BLOCK, 2) matmul_rows_tc(T* __restrict__ out, T* __restrict__ pre,
        float* __restrict__ part, unsigned* __restrict__ done, const T* __restrict__ inp, const T* __restrict__ w,
        const T* __restrict__ bias, int N, int C, int OC, int gelu, int lmt, int span) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int kw = TC_WARPS >> lmt, kc = span * kw, subs = span >> 5, ct = 16 << lmt;
    const int mtile = warp & ((1 << lmt) - 1), kpart = warp >> lmt;
    const int tile0 = blockIdx.x * ct;                     // the block's first column
    const int col = tile0 + 16 * mtile + g;                // the warp's columns: col and col + 8
    const int kb = blockIdx.y * kc, k0 = kb + kpart * span; // the block's and the warp's first k
    // Weights only, before waiting on the kernel before: every vector of the
    // warp's share (columns past OC read the last column, never stored).
    const T* w0 = w + (size_t)min(col, OC - 1) * C;
    const T* w1 = w + (size_t)min(col + 8, OC - 1) * C;
    uint4 wa[TC_SPAN / 32], wb[TC_SPAN / 32];
#pragma unroll
    for (int r = 0; r < TC_SPAN / 32; r++) wa[r] = wb[r] = tc_zero4();
    // (a block of its own: ptxas 11.8 for sm_90 moved griddepcontrol.wait
    // above these loads when they shared a basic block with it)
    if (k0 < C) {
#pragma unroll
        for (int r = 0; r < TC_SPAN / 32; r++) {
            const int k = k0 + 32 * r + 8 * t;
            if (r < subs && k < C) {
                wa[r] = *reinterpret_cast<const uint4*>(w0 + k);
                wb[r] = *reinterpret_cast<const uint4*>(w1 + k);
            }
        }
    }
    pdl_enter();
    __shared__ int last;
    const int NT = (N + 7) / 8, LD = kc + TC_PAD;
    T* xs = reinterpret_cast<T*>(tc_smem);
    // Stage rows [0, 8·NT) × k [kb, kb + kc) of the input: TC_U vectors a
    // thread in flight before any is stored.
    {
        const int vr = kc / 8, nv = NT * 8 * vr;
        for (int v0 = threadIdx.x; v0 < nv; v0 += TC_U * TC_BLOCK) {
            uint4 x[TC_U];
#pragma unroll
            for (int u = 0; u < TC_U; u++) {
                const int v = v0 + u * TC_BLOCK, n = v / vr, k = kb + 8 * (v % vr);
                x[u] = tc_zero4();
                if (v < nv && n < N && k < C) x[u] = *reinterpret_cast<const uint4*>(inp + (size_t)n * C + k);
            }
#pragma unroll
            for (int u = 0; u < TC_U; u++) {
                const int v = v0 + u * TC_BLOCK;
                if (v < nv) *reinterpret_cast<uint4*>(xs + (size_t)(v / vr) * LD + 8 * (v % vr)) = x[u];
            }
        }
    }
    __syncthreads();
    float acc[TC_ROWS_MAX / 8][4];
#pragma unroll
    for (int j = 0; j < TC_ROWS_MAX / 8; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    const T* xw = xs + (size_t)g * LD + kpart * span + 8 * t; // lane (g, t)'s 8 k of row g
#pragma unroll
    for (int r = 0; r < TC_SPAN / 32; r++) {
        if (r < subs) {
#pragma unroll
            for (int j = 0; j < TC_ROWS_MAX / 8; j++) {
                if (j < NT) {
                    const uint4 x = *reinterpret_cast<const uint4*>(xw + (size_t)8 * j * LD + 32 * r);
                    tc_mma(acc[j], wa[r].x, wb[r].x, wa[r].y, wb[r].y, x.x, x.y);
                    tc_mma(acc[j], wa[r].z, wb[r].z, wa[r].w, wb[r].w, x.z, x.w);
                }
            }
        }
    }
    // The kw parts' sums through shared memory (over the staged rows, once
    // every warp is done with them): red[part][n][column of the tile].
    __syncthreads();
    float* red = reinterpret_cast<float*>(tc_smem);
    const int RL = ct + TC_RPAD;
    {
        float* rp = red + (size_t)kpart * N * RL + 16 * mtile + g;
#pragma unroll
        for (int j = 0; j < TC_ROWS_MAX / 8; j++) {
            const int n = 8 * j + 2 * t;
            if (j < NT && n < N) {
                rp[(size_t)n * RL] = acc[j][0];
                rp[(size_t)n * RL + 8] = acc[j][2];
            }
            if (j < NT && n + 1 < N) {
                rp[(size_t)(n + 1) * RL] = acc[j][1];
                rp[(size_t)(n + 1) * RL + 8] = acc[j][3];
            }
        }
    }
    __syncthreads();
    const int chunks = gridDim.y, cols = min(ct, OC - tile0);
    for (int e = threadIdx.x; e < N * ct; e += TC_BLOCK) {
        const int n = e / ct, c = e % ct;
        if (c < cols) {
            float v = red[(size_t)n * RL + c];
            for (int p = 1; p < kw; p++) v += red[((size_t)p * N + n) * RL + c];
            if (chunks == 1)
                tc_finish(out, pre, bias, v, n, tile0 + c, OC, gelu);
            else
                part[((size_t)blockIdx.y * N + n) * OC + tile0 + c] = v;
        }
    }
    if (chunks == 1) return;
    // The last block of the column tile adds the chunks: every block makes
    // its sums visible before it counts itself (the fence), and the last
    // reads them past L1. The chunks are added in chunk order, so the
    // result does not depend on which block finished last.
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        last = atomicAdd(done + blockIdx.x, 1u) == (unsigned)chunks - 1;
        if (last) done[blockIdx.x] = 0;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int e = threadIdx.x; e < N * ct; e += TC_BLOCK) {
        const int n = e / ct, c = e % ct;
        if (c < cols) {
            const float* pp = part + (size_t)n * OC + tile0 + c;
            const size_t step = (size_t)N * OC;
            float v = tc_ldcg(pp);
            int p = 1;
            // TC_U loads in flight, added in chunk order
            for (; p + TC_U <= chunks; p += TC_U) {
                float s[TC_U];
#pragma unroll
                for (int u = 0; u < TC_U; u++) s[u] = tc_ldcg(pp + (p + u) * step);
#pragma unroll
                for (int u = 0; u < TC_U; u++) v += s[u];
            }
            for (; p < chunks; p++) v += tc_ldcg(pp + p * step);
            tc_finish(out, pre, bias, v, n, tile0 + c, OC, gelu);
        }
    }
}
