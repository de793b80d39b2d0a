// matmul_mma.cu: the forward of a linear layer over a decode batch (up to
// MMA_ROWS rows), out = inp·Wᵀ + bias with an optional GELU, on tensor
// cores (pkg/device/gpu/matmul.go).
//
// druto:kernel matmul_rows_mma
// druto:pdl-weights matmul_rows_mma:w
// druto:dtypes bf16 f16
// druto:arch 80
//
// At 9 to 64 rows a product is bound by reading W (OC,C) once, yet a GEMM
// library's tiles leave most SMs idle, or split C and reduce the partial
// sums in a second kernel. This kernel keeps matmul_rows' plan (matmul.cu)
// and moves its products onto mma.sync: warp (mt, kp) of a block takes 16
// output columns (W's rows, the mma's M) and the kp-th of KS slices of C,
// against every row of inp (the mma's N, 8 rows an n-tile), and the block's
// KS partial tiles are added in shared memory in kp order (deterministic,
// no atomics, one launch with the bias and the GELU).
//
// No operand needs ldmatrix. The sum over k does not depend on which k a
// fragment slot holds, as long as W's fragment and inp's agree, so each
// thread loads 16 bytes (8 consecutive columns) of a row of W and of a row
// of inp, and the two mma.m16n8k16 of a 32-column
// step take them as their fragments: thread (g, t) (g = lane/4, t =
// lane%4) reads columns 8t..8t+7 of W's rows g and g+8 and of inp's row g
// of each n-tile; in the first mma its k slots 2t, 2t+1 hold columns 8t,
// 8t+1 and slots 2t+8, 2t+9 columns 8t+2, 8t+3; in the second, columns
// 8t+4..8t+7. Every column of the step is used once, by both operands
// alike. W's loads are 16-byte vectors straight into registers, MMA_U
// steps of them in flight, the first MMA_U issued before pdl_enter() (as
// the file's weights line allows: nothing of a decode step writes W). A
// warp's slice of inp comes through a ring of MMA_X steps in shared memory
// (cp.async, each step's rows whole), the same 16 bytes a thread read from
// the stage: a step's latency is paid once, not at every step.
//
// grid ceil(OC / (16·8/KS)), MMA_BLOCK threads (8 warps: 8/KS column tiles
// × KS slices), mmaSmem(N) bytes of dynamic shared memory, the launcher
// guaranteeing N <= MMA_ROWS, C a multiple of
// 32·KS, and inp, W 16-byte aligned. Rows of W past OC and of inp past N
// are read from the last valid row, and their products dropped.

#include "common.cuh"
#include "flash_common.cuh"

// druto:block MMA_BLOCK matmul_rows_mma
#define MMA_BLOCK 256
#define MMA_ROWS 64 // the most rows (read by the launcher)
#define MMA_U 2     // the 32-column steps of W a warp holds in flight (registers)
#define MMA_X 3     // the 32-column steps of inp a warp has in flight (its ring in shared memory)
#define MMA_LD 20   // the partial tiles' row stride (fp32): conflict-free stores

#ifdef DRUTO_EMU
// The host emulator (kernels/emu/matmul_mma) implements these.
unsigned char* emu_block_smem();
void druto_emu_cp_async16(void* dst, const void* src);
void __syncwarp();
#endif

// mma_copy16 copies 16 bytes from global src into shared dst
// asynchronously (cp.async; an immediate copy on the host emulator).
__device__ __forceinline__ void mma_copy16(void* dst, const void* src) {
#ifdef DRUTO_EMU
    druto_emu_cp_async16(dst, src);
#else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(fa_smem(dst)), "l"(src) : "memory");
#endif
}

// mma_commit closes the thread's current group of copies; mma_wait waits
// until at most MMA_X-1 of its groups are in flight.
__device__ __forceinline__ void mma_commit() {
#ifndef DRUTO_EMU
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
__device__ __forceinline__ void mma_wait() {
#ifndef DRUTO_EMU
    asm volatile("cp.async.wait_group %0;" ::"n"(MMA_X - 1) : "memory");
#endif
}

// mma_stage copies step s of the warp's slice of inp (R rows × 32
// columns, each row's 64 bytes in 4 pieces, lane l taking pieces l, l+32,
// ...: xo[i], its piece i's offset from xb) into ring stage st, then
// closes the group (empty past the last step, so that every step closes
// one).
template <int P>
__device__ __forceinline__ void mma_stage(unsigned short* st, const T* xb, const int* xo, int s, int steps, int lane) {
    if (s < steps) {
#pragma unroll
        for (int i = 0; i < P * 2; i++) mma_copy16(st + (lane + 32 * i) * 8, xb + xo[i] + s * 32);
    }
    mma_commit();
}

// mma_body: the block's work for P pairs of 8-row n-tiles (R = 16·P rows).
// ring: the warp's MMA_X stages of R × 32 elements of inp; red: the
// partial tiles (laid over the rings once every warp is done with them).
template <int P>
__device__ __forceinline__ void mma_body(unsigned char* smem, uint4 (*wa)[2], T* __restrict__ out, T* __restrict__ pre,
        const T* __restrict__ inp, const T* __restrict__ bias, int N, int C, int OC, int gelu, int KS, const T* wr0,
        const T* wr1, int k0, int steps) {
    const int R = 16 * P;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int M = 8 / KS, mt = warp % M, kp = warp / M;
    const int g = lane >> 2, t = lane & 3;
    unsigned short* ring = reinterpret_cast<unsigned short*>(smem) + warp * MMA_X * R * 32;
    // lane's pieces: row (lane + 32i)/4 of inp (the last valid one past N),
    // columns ((lane + 32i) % 4)·8..; a row's index times C is below 2^31
    const T* xb = inp + k0;
    int xo[2 * P];
#pragma unroll
    for (int i = 0; i < 2 * P; i++) xo[i] = min((lane >> 2) + 8 * i, N - 1) * C + (lane & 3) * 8;
#pragma unroll
    for (int x = 0; x < MMA_X; x++) mma_stage<P>(ring + x * R * 32, xb, xo, x, steps, lane);
    float acc[2 * P][4];
    fa_zero<16 * P>(acc);
    for (int s = 0; s < steps; s += MMA_U) {
#pragma unroll
        for (int u = 0; u < MMA_U; u++) {
            if (s + u < steps) {
                const int kk = (s + u) * 32;
                mma_wait(); // step s+u's group has landed (one group a step)
                __syncwarp();
                // thread (g, t): columns 8t..8t+7 of row j·8 + g of the stage
                unsigned short* stage = ring + (s + u) % MMA_X * R * 32;
                const unsigned short* st = stage + g * 32 + 8 * t;
                uint4 xv[2 * P];
#pragma unroll
                for (int j = 0; j < 2 * P; j++) xv[j] = *reinterpret_cast<const uint4*>(st + j * 8 * 32);
                const uint4 a0 = wa[u][0], a1 = wa[u][1];
                // the step's next-but-MMA_U W vectors, in flight through these products
                if (s + u + MMA_U < steps) {
                    wa[u][0] = *reinterpret_cast<const uint4*>(wr0 + kk + 32 * MMA_U);
                    wa[u][1] = *reinterpret_cast<const uint4*>(wr1 + kk + 32 * MMA_U);
                }
                const unsigned f0[4] = {a0.x, a1.x, a0.y, a1.y}, f1[4] = {a0.z, a1.z, a0.w, a1.w};
#pragma unroll
                for (int j = 0; j < 2 * P; j++) {
                    fa_mma(acc[j], f0, xv[j].x, xv[j].y);
                    fa_mma(acc[j], f1, xv[j].z, xv[j].w);
                }
                __syncwarp(); // every lane has read the stage before it is refilled
                mma_stage<P>(stage, xb, xo, s + u + MMA_X, steps, lane);
            }
        }
    }
    // The partial tiles: red[kp][mt][n][c] (c the tile's column), then the
    // KS of each element added in kp order.
    __syncthreads();
    float* red = reinterpret_cast<float*>(smem);
    float* mine = red + ((kp * M + mt) * R) * MMA_LD;
#pragma unroll
    for (int j = 0; j < 2 * P; j++) {
#pragma unroll
        for (int e = 0; e < 4; e++) mine[(j * 8 + 2 * t + (e & 1)) * MMA_LD + g + (e >> 1) * 8] = acc[j][e];
    }
    __syncthreads();
    const int col0 = blockIdx.x * 16 * M;
    for (int i = threadIdx.x; i < M * R * 16; i += MMA_BLOCK) {
        const int c = i & 15, n = (i >> 4) % R, m = (i >> 4) / R;
        const int col = col0 + m * 16 + c;
        if (n < N && col < OC) {
            float v = 0.0f;
            for (int k = 0; k < KS; k++) v += red[((k * M + m) * R + n) * MMA_LD + c];
            if (bias) v += load(bias, col);
            const size_t o = (size_t)n * OC + col;
            if (gelu) {
                store(pre, o, v);
                store(out, o, gelu_f(v));
            } else {
                store(out, o, v);
            }
        }
    }
}

// out, pre (gelu only) (N,OC) T; inp (N,C) T; w (OC,C) T; bias (OC) T or null
extern "C" __global__ void __launch_bounds__(MMA_BLOCK, 2) matmul_rows_mma(T* __restrict__ out, T* __restrict__ pre,
        const T* __restrict__ inp, const T* __restrict__ w, const T* __restrict__ bias, int N, int C, int OC, int gelu,
        int KS) {
    // W only, before waiting on the previous kernel: the warp's first MMA_U
    // steps of its rows g and g+8.
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, M = 8 / KS;
    const int row = blockIdx.x * 16 * M + (warp % M) * 16 + (lane >> 2);
    const int steps = C / KS / 32, k0 = (warp / M) * (C / KS);
    const T* wr0 = w + (size_t)min(row, OC - 1) * C + k0 + 8 * (lane & 3);
    const T* wr1 = w + (size_t)min(row + 8, OC - 1) * C + k0 + 8 * (lane & 3);
    uint4 wa[MMA_U][2];
#pragma unroll
    for (int u = 0; u < MMA_U; u++) {
        if (u < steps) {
            wa[u][0] = *reinterpret_cast<const uint4*>(wr0 + 32 * u);
            wa[u][1] = *reinterpret_cast<const uint4*>(wr1 + 32 * u);
        }
    }
    pdl_enter();
#ifdef DRUTO_EMU
    unsigned char* smem = emu_block_smem();
#else
    extern __shared__ __align__(16) unsigned char mma_smem[];
    unsigned char* smem = mma_smem;
#endif
    switch ((N + 15) / 16) {
    case 1: mma_body<1>(smem, wa, out, pre, inp, bias, N, C, OC, gelu, KS, wr0, wr1, k0, steps); break;
    case 2: mma_body<2>(smem, wa, out, pre, inp, bias, N, C, OC, gelu, KS, wr0, wr1, k0, steps); break;
    case 3: mma_body<3>(smem, wa, out, pre, inp, bias, N, C, OC, gelu, KS, wr0, wr1, k0, steps); break;
    default: mma_body<4>(smem, wa, out, pre, inp, bias, N, C, OC, gelu, KS, wr0, wr1, k0, steps); break;
    }
}
