// fp8.cu: the FP8 casts of FP8 training on Hopper (issue 38;
// pkg/device/gpu/fp8.go: CastTransposeFP8, GELUCastTransposeFP8,
// CastTransposeDBiasFP8, DGELUCastTransposeDBiasFP8, LayerNormFP8,
// ResidualLayerNormFP8, LayerNormBackwardCastFP8): the cast-transpose of
// any tensor, the GELU that produces the FP8 input of the MLP projection,
// the output gradients' casts with their bias gradients (the fc layer's
// through the GELU backward), the layernorm forwards that produce the FP8
// input of the qkv and fc GEMMs themselves, and the layernorm backward
// that casts the residual gradient it updates (its last section).
//
// druto:kernel cast_transpose_e4m3 cast_transpose_e5m2 gelu_cast_transpose_e4m3
// druto:kernel cast_transpose_dbias_e5m2 dgelu_cast_transpose_dbias_e5m2
// druto:kernel layernorm_fp8_e4m3 residual_layernorm_fp8_e4m3
// druto:kernel layernorm_backward_cast_e5m2
// druto:pdl cast_transpose_e4m3 cast_transpose_e5m2 gelu_cast_transpose_e4m3 cast_transpose_dbias_e5m2
// druto:pdl dgelu_cast_transpose_dbias_e5m2 layernorm_fp8_e4m3 residual_layernorm_fp8_e4m3
// druto:pdl layernorm_backward_cast_e5m2
// druto:dtypes f32 bf16 f16
// druto:arch 90
//
// cast_transpose_F: q (N,C) fp8 = fp8_F(x·s), qt (C,N) = qᵀ, amax = max |x|,
// x (N,C) T, s = scale[0] (float, on the device: the FP8 scaler's scale,
// so nothing waits for the host). One pass over x makes the row-major copy
// the forward's GEMM reads, the transposed copy the backward's reads
// (cuBLASLt's FP8 GEMMs on Hopper take only the "TN" layout, both operands
// K-major) and the amax the delayed scaling records: no separate cast,
// transpose or amax pass (Transformer Engine's cast-transpose).
//
// gelu_cast_transpose_e4m3: the same with x = gelu(pre) (gelu.cuh's
// gelu_lean in fp32 of the stored pre-activation: the tanh form as
// x·e/(e+1) with one ex2 and one rcp for 16-bit T, common.cuh's gelu_f
// for fp32): the fc GEMM writes only
// its pre-activation (which the GELU backward needs anyway) and this pass
// makes the e4m3 input of the MLP projection, its transposed copy and
// amax = max |gelu(pre)|, in place of the bf16 GELU output: it reads 2
// B/elt and writes 2, where the bf16 path writes a 2 B/elt GELU output that
// a cast-transpose would read again.
//
// cast_transpose_dbias_e5m2: the cast-transpose of a linear layer's output
// gradient dy to e5m2, with the bias gradient's column sums on the way
// (Transformer Engine's cast_transpose_dbias): part[tile row][c] = the sum
// of column c over the tile's 64 rows, which matmul.cu's matmul_bias_grad
// then adds into dbias in tile order. dy is read once for the dx GEMM's
// operand, the dW GEMM's transposed operand, amax and dbias. The sums are
// of the unscaled values in fp32, in a fixed order: thread t holds row
// t/4's 16 columns from 16·(t%4); the 8 rows of a warp that share columns
// are added by the butterfly over lanes 4, 8, 16, i.e.
// ((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7)), then the 8 warps' sums in warp
// order (rows past N and columns past C add nothing).
//
// dgelu_cast_transpose_dbias_e5m2: cast_transpose_dbias_e5m2 of
// v = dy·gelu'(pre) (Transformer Engine's cast_transpose_dbias_dgelu):
// the fc layer's output gradient in the FP8 backward, from the gradient
// dy the MLP projection's dx GEMM wrote and the stored pre-activation pre
// (both T). gelu' is gelu.cuh's gelu_grad_lean (the derivative of
// gelu.cu's gelu_bias_backward, the bf16 MLP backward's; gelu_grad_f's
// tanhf for fp32 T), v = gelu'(pre)·dy in fp32, never rounded to T: q, qt,
// amax = max |v| and the column sums of v as cast_transpose_dbias_e5m2's
// of v. One pass in place of a GELU backward (read pre and dy, write v:
// 6 B/elt from bf16) and the cast of its output (read 2, write 2): it
// reads 2·sizeof(T) and writes 2, 6 B/elt from bf16 where the two passes
// move 10.
//
// Underflows: every cast also counts the nonzero finite values whose code
// is ±0 (too small for the scale: flushed), per thread, then per block
// (warp shuffles, one shared slot a warp), and adds the block's count to
// amax[1] (uint32 bits) with one atomicAdd; FP8ScaleUpdate moves it into
// the scaling state's meta, where the trainer reads and logs it.
//
// Conversion: cvt.rn.satfinite.{e4m3,e5m2}x2.f32, the product x·s rounded
// to fp32 first (tensor.QuantizeFP8 computes the same product): round to
// nearest even; a finite value or ±Inf past the largest finite one becomes
// ±max (448, 57344); NaN stays NaN. The embedded PTX (nvcc 11.8, PTX ISA
// 7.8) may use the instruction only for sm_90, hence the arch line; sm_89
// (Ada) has it from PTX ISA 8.1 on, which a newer nvcc would have to make.
// The one difference from pkg/tensor's conversion: the NaN the hardware
// writes (a canonical 0x7f, say NVIDIA's host fallback in cuda_fp8.hpp and
// the emulator) need not be tensor's (sign kept, 0x7e in E5M2); both are
// NaN in the format, and the tests compare NaNs as NaNs.
//
// amax: the largest |x| of the tensor, before scaling. |x| as a float's
// bits (sign cleared) orders as the value does, +Inf above every finite
// value and every NaN above +Inf, so the maximum of the bits as unsigned
// integers is the maximum of |x|, and NaN when any x is NaN (the scaler
// sees the overflow). Each block reduces its tile (warp shuffles, then one
// thread) and adds it with one atomicMax on *(unsigned*)amax: a maximum
// does not depend on the order of the atomics, so the result is
// deterministic in one kernel, with no partial buffer and no second
// launch. The launcher zeroes amax first (0 is the bits of +0, below
// every |x|).
//
// Tiling: a block of CT_BLOCK = 256 threads owns a CT_TILE × CT_TILE = 64×64
// tile of x (grid: C/64 × N/64, rounded up). Rows first: thread t takes row
// t/4 of the tile and its 16 columns from 16·(t%4), converts them, writes
// q with one 16-byte store, and keeps the 16 bytes in shared memory (a
// 64×64 byte tile, rows of 64 bytes: each quarter warp's 16-byte stores
// cover all 32 banks once, no padding needed). Then columns: after a
// barrier, bytetile.cuh's tile_t_store writes the tile's transpose to qt
// (items of 4 columns by 16 rows, the 4 lanes of a column's 64 bytes side
// by side, 16-byte stores). The vector paths need rows aligned:
// vec_row (x, q: C a multiple of 16 and both pointers aligned), vec_col
// (qt: N a multiple of 16 and the pointer aligned); without them, and in
// partial tiles at the right and bottom edges, the same threads move
// bytes one at a time.
//
// Traffic: read sizeof(T) bytes an element (4, or 2 for bf16/f16), write 2
// (q and qt), plus one float of scale per block and one atomic per block:
// 6 B/elt from fp32, 4 B/elt from bf16 (the dgelu form reads pre too: 10
// and 6); the dbias forms write 4·C bytes of part per 64 rows besides.
//
// layernorm_fp8_e4m3, residual_layernorm_fp8_e4m3: layernorm.cu's
// layernorm_forward_rf32 and residual_layernorm_forward_rf32 (the forms the
// training step runs: the residual stream is fp32, weight, bias and b are
// T) with the output cast instead of stored: q (N,C) e4m3 = fp8(y·s),
// qt (C,N) = qᵀ and amax = max |y|, y the layernorm's output in fp32 before
// scaling (not rounded to T first: one rounding, to FP8), s = scale[0] on
// the device. mean and rstd (and res, the rounded sum a + b) are stored as
// the layernorm stores them, for the backward and the next residual add.
// The FP8 cast of a T output would cost a pass that reads 2 B/elt and
// writes 2 more; here the layernorm writes 2 B/elt (q, qt) instead of the
// 2 of its bf16 output.
//
// Arithmetic: each row is layernorm.cuh's ln_forward_row, the function of
// layernorm.cu's forwards, with an output (LnFP8Row) that casts y·s to FP8
// where they round y to T, so mean, rstd, res and y are their bits (the
// fixed-width layernorm_forward_rf32_cC compute the same bits too). The
// row path follows the same vec flag: rows of C <= 1024 in registers,
// wider rows (GPT-2 large's 1280, xl's 1600) in three passes over L1/L2.
// amax: each lane keeps the largest |y| bits of its values, the block
// reduces them (warp shuffles, then one thread) and adds them with one
// atomicMax, as cast_transpose does; a row with a NaN or an Inf is NaN
// throughout (Inf - Inf in its variance), so amax is NaN; an infinite
// weight makes y ±Inf, amax +Inf and q ±448.
//
// Tiling by rows: a block of up to LNF8_BLOCK = 512 threads (the launcher
// chooses; fp8.go's lnf8Shape) owns `rows` consecutive rows (tokens; a
// multiple of 16, at most LNF8_ROWS = 64) and all C channels; grid
// ceil(N/rows). Warp w normalises rows w, w + warps, ..., writing each
// row's FP8 bytes to q at once (4 bytes a lane a store on the vector path:
// a warp covers 128 consecutive bytes of the row) and to a rows×C byte
// tile in dynamic shared memory. After one barrier, qt: column c of the
// block is the nr-byte segment of qt's row c from column r0, written by
// bytetile.cuh's tile_t_store (16-byte stores when N % 16 == 0, qt
// aligned and C % 4 == 0, else byte by byte, as at the partial chunk of
// the last block).
//
// Shared memory: rows·C bytes dynamic (48 KiB at 64 rows of C = 768, 64
// KiB at 1024, 80 KiB at 1280, 100 KiB at 1600) plus 128 bytes static;
// past 48 KiB the launcher raises the kernel's limit at load (to
// LNF8_ROWS·LNF8_MAX_C = 224 KiB, within sm_90's 227 KiB a block), and
// refuses C > LNF8_MAX_C = 3584. Registers: 64 a thread (ptxas, sm_90; no
// stack, no spills), so at most 32 warps an SM whatever the block.
//
// Traffic (bytes an element): layernorm_fp8_e4m3 reads 4 (the fp32 row)
// and writes 2 (q and qt): 6 B/elt, against layernorm_forward_rf32's 4 + 2
// (its bf16 output) and a cast_transpose of that output's 2 + 2 after it.
// residual_layernorm_fp8_e4m3 reads 4 (a) + sizeof(T) (b) and writes 4
// (res) + 2: 12 B/elt from a bf16 b. weight and bias (C each) are read
// again per row, from L1; mean and rstd are 8 bytes a row.

#include "common.cuh"
#include "gelu.cuh"
#include "layernorm.cuh"
#include "fp8.cuh"
#include "bytetile.cuh"

// Block sizes (threads), read by the launchers too (kernels/blocks.go).
// druto:block CT_BLOCK cast_transpose_e4m3 cast_transpose_e5m2 gelu_cast_transpose_e4m3 cast_transpose_dbias_e5m2
// druto:block CT_BLOCK dgelu_cast_transpose_dbias_e5m2
#define CT_BLOCK 256
// CT_TILE is the tile's side: CT_BLOCK threads move 16 bytes each, once by
// rows and once by columns (CT_TILE·CT_TILE = 16·CT_BLOCK).
#define CT_TILE 64

// The elementwise op a cast-transpose applies to x before the cast.
#define CT_COPY 0
#define CT_GELU 1
#define CT_DBIAS 2 // copy, and the column sums into part
#define CT_DGELU_DBIAS 3 // x·gelu'(pre), and the column sums into part
// CT_SUMS(OP): the op writes column sums.
#define CT_SUMS(OP) ((OP) == CT_DBIAS || (OP) == CT_DGELU_DBIAS)

// ct_value is the value an op casts: x itself, gelu(x) (gelu.cuh's
// gelu_lean: the ex2/rcp form for 16-bit T, gelu_f for fp32), or for
// CT_DGELU_DBIAS x·gelu'(p) (p the pre-activation; the order of gelu.cu's
// backwards, gelu'(p)·x).
template <int OP> __device__ __forceinline__ float ct_value(float x, float p) {
    if (OP == CT_GELU) return gelu_lean(x);
    if (OP == CT_DGELU_DBIAS) return gelu_grad_lean(p) * x;
    return x;
}

// part: the column sums of CT_SUMS ops, (gridDim.y, C) fp32; pre: the
// pre-activation of CT_DGELU_DBIAS (N,C) T, laid out as x; both unused
// otherwise.
template <int F, int OP>
__device__ __forceinline__ void cast_transpose_body(unsigned char* __restrict__ q, unsigned char* __restrict__ qt,
                                                    float* __restrict__ amax, float* __restrict__ part,
                                                    const T* __restrict__ x, const T* __restrict__ pre,
                                                    const float* __restrict__ scale, int N, int C, int vec_row,
                                                    int vec_col) {
    __shared__ __align__(16) unsigned char tile[CT_TILE][CT_TILE];
    __shared__ unsigned int wmax[CT_BLOCK / 32], wunder[CT_BLOCK / 32];
    __shared__ float csum[CT_SUMS(OP) ? CT_BLOCK / 32 : 1][CT_TILE];
    const int tid = threadIdx.x;
    const int r0 = blockIdx.y * CT_TILE, c0 = blockIdx.x * CT_TILE;
    const float s = scale[0];

    // Rows: 16 elements of row tr from column tc.
    const int tr = tid / 4, tc = (tid % 4) * 16;
    const int r = r0 + tr, c = c0 + tc;
    unsigned int m = 0;  // the largest |x| bits seen
    unsigned int uf = 0; // underflows
    float cs[CT_SUMS(OP) ? 16 : 1]; // CT_SUMS: this thread's 16 values (0 outside the tensor)
#pragma unroll
    for (int k = 0; k < (CT_SUMS(OP) ? 16 : 1); k++) cs[k] = 0.f;
    if (r < N && c < C) {
        const T* xr = x + (size_t)r * C + c;
        const T* pr = OP == CT_DGELU_DBIAS ? pre + (size_t)r * C + c : xr; // read by CT_DGELU_DBIAS only
        unsigned char* qr = q + (size_t)r * C + c;
        const int n = C - c < 16 ? C - c : 16;
        if (vec_row && n == 16) {
            // 16-byte loads: two a row's 16 elements of a 16-bit T (a warp's
            // load then takes 8 rows' 128-byte lines for 512 bytes, where
            // 8-byte loads took them for 256), four of fp32.
            float v[16], f[16], p[16];
#pragma unroll
            for (int k = 0; k < (int)sizeof(T); k++) {
                unpack16(reinterpret_cast<const uint4*>(xr)[k], f + k * (16 / (int)sizeof(T)));
                if (OP == CT_DGELU_DBIAS) unpack16(reinterpret_cast<const uint4*>(pr)[k], p + k * (16 / (int)sizeof(T)));
            }
#pragma unroll
            for (int k = 0; k < 16; k++) v[k] = ct_value<OP>(f[k], OP == CT_DGELU_DBIAS ? p[k] : 0.0f);
            unsigned int w[8];
#pragma unroll
            for (int k = 0; k < 16; k++) m = max_u32(m, abs_bits(v[k]));
            if (CT_SUMS(OP)) {
#pragma unroll
                for (int k = 0; k < 16; k++) cs[k % (CT_SUMS(OP) ? 16 : 1)] = v[k];
            }
#pragma unroll
            for (int k = 0; k < 8; k++) {
                w[k] = fp8x2<F>(v[2 * k] * s, v[2 * k + 1] * s);
                uf += flushed(abs_bits(v[2 * k]), w[k]) + flushed(abs_bits(v[2 * k + 1]), w[k] >> 8);
            }
            uint4 o;
            o.x = w[0] | (w[1] << 16);
            o.y = w[2] | (w[3] << 16);
            o.z = w[4] | (w[5] << 16);
            o.w = w[6] | (w[7] << 16);
            *reinterpret_cast<uint4*>(qr) = o;
            *reinterpret_cast<uint4*>(&tile[tr][tc]) = o;
        } else {
            // Unrolled with a guard, so that cs is indexed by constants
            // (registers, not local memory).
#pragma unroll
            for (int k = 0; k < 16; k++) {
                if (k >= n) break;
                const float v = ct_value<OP>(load(xr, k), OP == CT_DGELU_DBIAS ? load(pr, k) : 0.0f);
                m = max_u32(m, abs_bits(v));
                if (CT_SUMS(OP)) cs[k % (CT_SUMS(OP) ? 16 : 1)] = v;
                const unsigned char b = (unsigned char)(fp8x2<F>(v * s, 0.0f) & 0xffu);
                uf += flushed(abs_bits(v), b);
                qr[k] = b;
                tile[tr][tc + k] = b;
            }
        }
    }
    // amax: the warp's maximum to wmax, the block's to *amax after the barrier
    for (int off = 16; off > 0; off >>= 1) m = max_u32(m, __shfl_xor_sync(0xffffffffu, m, off));
    if ((tid & 31) == 0) wmax[tid / 32] = m;
    __syncthreads();
    if (tid == 0) {
        unsigned int b = 0;
#pragma unroll
        for (int w = 0; w < CT_BLOCK / 32; w++) b = max_u32(b, wmax[w]);
        if (b != 0) atomicMax(reinterpret_cast<unsigned int*>(amax), b);
    }
    add_counts(amax, wunder, uf, CT_BLOCK / 32);
    if (CT_SUMS(OP)) {
        // The 8 rows of the warp with the same columns: lanes l, l^4, l^8, l^16.
        const int lane = tid & 31;
#pragma unroll
        for (int k = 0; k < (CT_SUMS(OP) ? 16 : 1); k++) {
            float v = cs[k];
            v += __shfl_xor_sync(0xffffffffu, v, 4);
            v += __shfl_xor_sync(0xffffffffu, v, 8);
            v += __shfl_xor_sync(0xffffffffu, v, 16);
            cs[k] = v;
        }
        if (lane < 4) {
#pragma unroll
            for (int k = 0; k < (CT_SUMS(OP) ? 16 : 1); k++) csum[tid / 32][lane * 16 + k] = cs[k];
        }
        __syncthreads();
        if (tid < CT_TILE && c0 + tid < C) {
            float a = 0.f;
#pragma unroll
            for (int w = 0; w < CT_BLOCK / 32; w++) a += csum[w][tid];
            part[(size_t)blockIdx.y * C + c0 + tid] = a;
        }
    }

    // Columns: the tile's transpose into qt's rows c0.. from column r0
    // (bytetile.cuh; the barrier above follows the tile's last write).
    tile_t_store(qt + (size_t)c0 * N + r0, N, &tile[0][0], CT_TILE, CT_TILE, min(CT_TILE, N - r0), min(CT_TILE, C - c0),
                 vec_col, tid, CT_BLOCK);
}

// Launchers: pkg/device/gpu/fp8.go. q (N,C) and qt (C,N) are bytes of the
// format in the name; amax the pair of floats (max |x| bits, underflow
// count bits) the casts add to.
extern "C" __global__ void __launch_bounds__(CT_BLOCK)
    cast_transpose_e4m3(unsigned char* __restrict__ q, unsigned char* __restrict__ qt, float* __restrict__ amax,
         const T* __restrict__ x, const float* __restrict__ scale, int N, int C, int vec_row, int vec_col) {
    pdl_enter();
    cast_transpose_body<FP8_E4M3, CT_COPY>(q, qt, amax, (float*)0, x, (const T*)0, scale, N, C, vec_row, vec_col);
}

extern "C" __global__ void __launch_bounds__(CT_BLOCK)
    cast_transpose_e5m2(unsigned char* __restrict__ q, unsigned char* __restrict__ qt, float* __restrict__ amax,
         const T* __restrict__ x, const float* __restrict__ scale, int N, int C, int vec_row, int vec_col) {
    pdl_enter();
    cast_transpose_body<FP8_E5M2, CT_COPY>(q, qt, amax, (float*)0, x, (const T*)0, scale, N, C, vec_row, vec_col);
}

extern "C" __global__ void __launch_bounds__(CT_BLOCK)
    gelu_cast_transpose_e4m3(unsigned char* __restrict__ q, unsigned char* __restrict__ qt, float* __restrict__ amax,
         const T* __restrict__ x, const float* __restrict__ scale, int N, int C, int vec_row, int vec_col) {
    pdl_enter();
    cast_transpose_body<FP8_E4M3, CT_GELU>(q, qt, amax, (float*)0, x, (const T*)0, scale, N, C, vec_row, vec_col);
}

// part (ceil(N/CT_TILE), C) fp32: each tile's column sums (see the header).
extern "C" __global__ void __launch_bounds__(CT_BLOCK)
    cast_transpose_dbias_e5m2(unsigned char* __restrict__ q, unsigned char* __restrict__ qt, float* __restrict__ amax,
                              float* __restrict__ part, const T* __restrict__ x, const float* __restrict__ scale, int N,
                              int C, int vec_row, int vec_col) {
    pdl_enter();
    cast_transpose_body<FP8_E5M2, CT_DBIAS>(q, qt, amax, part, x, (const T*)0, scale, N, C, vec_row, vec_col);
}

// dy (N,C) the output gradient, pre (N,C) the stored pre-activation, both
// T; the rest as cast_transpose_dbias_e5m2's (vec_row: dy, pre and q rows
// 16-byte aligned).
extern "C" __global__ void __launch_bounds__(CT_BLOCK)
    dgelu_cast_transpose_dbias_e5m2(unsigned char* __restrict__ q, unsigned char* __restrict__ qt,
                                    float* __restrict__ amax, float* __restrict__ part, const T* __restrict__ dy,
                                    const T* __restrict__ pre, const float* __restrict__ scale, int N, int C,
                                    int vec_row, int vec_col) {
    pdl_enter();
    cast_transpose_body<FP8_E5M2, CT_DGELU_DBIAS>(q, qt, amax, part, dy, pre, scale, N, C, vec_row, vec_col);
}

// ---- layernorm with the FP8 cast: the producer of the qkv and fc GEMMs ----
//
// Block sizes, rows and the widest C (launchers: pkg/device/gpu/fp8.go).
// LNF8_BLOCK is the most threads a block, and LNF8_ROWS the most rows
// (tokens) a block owns: the launcher's defaults.
// druto:block LNF8_BLOCK layernorm_fp8_e4m3 residual_layernorm_fp8_e4m3
#define LNF8_BLOCK 512
#define LNF8_ROWS 64
// LNF8_MAX_C is the widest row: the block's LNF8_ROWS·C bytes of dynamic
// shared memory (224 KiB at 3584) within sm_90's 227 KiB a block.
#define LNF8_MAX_C 3584

// LnFP8Row is the output of ln_forward_row (layernorm.cuh) for the FP8
// kernels: y·s cast to format F, stored at once into the row of q (qrow:
// 4 bytes a lane a store on the vector path, so a warp writes 128
// consecutive bytes; byte by byte unless vq, q 16-byte aligned) and into
// the row's bytes in shared memory for the transposed copy; the largest
// |y| bits seen (before scaling) in m, the underflows in u.
template <int F> struct LnFP8Row {
    unsigned char *row, *qrow;
    float s;
    unsigned int m, u;
    int vq;
    __device__ __forceinline__ void put4(int g, const F4& y) {
        m = max_u32(max_u32(m, abs_bits(y.v[0])), max_u32(abs_bits(y.v[1]), max_u32(abs_bits(y.v[2]), abs_bits(y.v[3]))));
        const unsigned int w = fp8x2<F>(y.v[0] * s, y.v[1] * s) | ((unsigned int)fp8x2<F>(y.v[2] * s, y.v[3] * s) << 16);
#pragma unroll
        for (int e = 0; e < 4; e++) u += flushed(abs_bits(y.v[e]), w >> (8 * e));
        *reinterpret_cast<unsigned int*>(row + 4 * g) = w; // C % 4 == 0 on this path: aligned
        if (vq) {
            *reinterpret_cast<unsigned int*>(qrow + 4 * g) = w;
        } else {
#pragma unroll
            for (int e = 0; e < 4; e++) qrow[4 * g + e] = (unsigned char)(w >> (8 * e));
        }
    }
    __device__ __forceinline__ void put(int i, float y) {
        m = max_u32(m, abs_bits(y));
        const unsigned char b = (unsigned char)(fp8x2<F>(y * s, 0.0f) & 0xffu);
        u += flushed(abs_bits(y), b);
        row[i] = b;
        qrow[i] = b;
    }
};

// The block's rows as FP8 bytes, rows × C, rows of C bytes.
#ifdef DRUTO_EMU
static __align__(16) unsigned char lnf8_tile[LNF8_ROWS * LNF8_MAX_C];
#else
extern __shared__ __align__(16) unsigned char lnf8_tile[];
#endif

// ln_fp8_body: rows (a multiple of 16, at most LNF8_ROWS) rows a block,
// blockDim.x threads (a multiple of 32, at most LNF8_BLOCK).
template <int F, bool RES>
__device__ __forceinline__ void ln_fp8_body(float* res, unsigned char* __restrict__ q, unsigned char* __restrict__ qt,
                                            float* __restrict__ amax, float* __restrict__ mean,
                                            float* __restrict__ rstd, const float* a, const T* __restrict__ b,
                                            const T* __restrict__ weight, const T* __restrict__ bias,
                                            const float* __restrict__ scale, int N, int C, int rows, int vec,
                                            int vec_q, int vec_col) {
    __shared__ unsigned int wmax[LNF8_BLOCK / 32], wunder[LNF8_BLOCK / 32];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, warps = blockDim.x >> 5;
    const int r0 = blockIdx.x * rows, nr = min(rows, N - r0);

    // Rows: warp w normalises rows w, w + warps, ... of the block, its bytes
    // to q and the tile (the same call as layernorm.cu's forwards, another
    // output).
    LnFP8Row<F> out;
    out.s = scale[0];
    out.m = 0;
    out.u = 0;
    out.vq = vec_q;
    for (int rl = warp; rl < nr; rl += warps) {
        out.row = lnf8_tile + (size_t)rl * C;
        out.qrow = q + (size_t)(r0 + rl) * C;
        ln_forward_row<float, RES>(res, out, mean, rstd, a, b, weight, bias, r0 + rl, C, vec);
    }
    unsigned int m = out.m;
    for (int off = 16; off > 0; off >>= 1) m = max_u32(m, __shfl_xor_sync(0xffffffffu, m, off));
    if (lane == 0) wmax[warp] = m;
    __syncthreads(); // the tile and wmax are complete
    if (tid == 0) {
        unsigned int bm = 0;
        for (int w = 0; w < warps; w++) bm = max_u32(bm, wmax[w]);
        if (bm != 0) atomicMax(reinterpret_cast<unsigned int*>(amax), bm);
    }
    add_counts(amax, wunder, out.u, warps);

    // qt: column c of the block is qt's row c from column r0, nr bytes
    // (bytetile.cuh; its word loads need C % 4 == 0).
    tile_t_store(qt + r0, N, lnf8_tile, C, rows, nr, C, vec_col && C % 4 == 0, tid, blockDim.x);
}

// Launchers: pkg/device/gpu/fp8.go (LayerNormFP8, ResidualLayerNormFP8).
// q (N,C) and qt (C,N) E4M3 bytes, amax the pair the casts add to,
// mean and rstd (N) f32 (either may be null), inp, res and a (N,C) f32 (the
// residual stream), b (N,C), weight and bias (C) T, scale one float; grid
// ceil(N/rows) blocks of up to LNF8_BLOCK threads, rows·C bytes of dynamic
// shared memory. vec as layernorm.cu's (rows of 4 aligned elements), vec_q
// (q 16-byte aligned), vec_col (as cast_transpose's).
extern "C" __global__ void __launch_bounds__(LNF8_BLOCK)
    layernorm_fp8_e4m3(unsigned char* __restrict__ q, unsigned char* __restrict__ qt, float* __restrict__ amax,
                       float* __restrict__ mean, float* __restrict__ rstd, const float* __restrict__ inp,
                       const T* __restrict__ weight, const T* __restrict__ bias, const float* __restrict__ scale, int N,
                       int C, int rows, int vec, int vec_q, int vec_col) {
    pdl_enter();
    ln_fp8_body<FP8_E4M3, false>((float*)0, q, qt, amax, mean, rstd, inp, (const T*)0, weight, bias, scale, N, C, rows,
                                 vec, vec_q, vec_col);
}

// res is written and (on the three-pass path) read back, so it is not __restrict__.
extern "C" __global__ void __launch_bounds__(LNF8_BLOCK)
    residual_layernorm_fp8_e4m3(float* res, unsigned char* __restrict__ q, unsigned char* __restrict__ qt,
                                float* __restrict__ amax, float* __restrict__ mean, float* __restrict__ rstd,
                                const float* a, const T* __restrict__ b, const T* __restrict__ weight,
                                const T* __restrict__ bias, const float* __restrict__ scale, int N, int C, int rows,
                                int vec, int vec_q, int vec_col) {
    pdl_enter();
    ln_fp8_body<FP8_E4M3, true>(res, q, qt, amax, mean, rstd, a, b, weight, bias, scale, N, C, rows, vec, vec_q,
                                vec_col);
}

// ---- layernorm backward with the FP8 cast of its dinp ------------------------
//
// layernorm_backward_cast_e5m2: layernorm.cu's layernorm_backward_rf32
// (dinp += the row's gradient; the dweight and dbias shares into
// per-block partials that layernorm.cu's layernorm_reduce adds) and, in
// the same pass, cast_transpose_dbias_e5m2 of the updated dinp v (the
// fp32 residual gradient after the +=): q (N,C) = e5m2(v·s), qt (C,N) =
// qᵀ, amax = max |v|, the underflows, and v's column sums (unscaled, fp32)
// into per-block partials that matmul.cu's matmul_bias_grad adds into the
// next layer's dbias. In the FP8 backward every layernorm backward that
// updates the residual gradient is followed by the cast of that gradient
// for the projection before it; fused, v is cast from the registers that
// hold it instead of being read again.
//
// Rows: a block of LNB8_BLOCK = 128 threads (4 warps) owns `rows`
// consecutive rows (the launcher's choice, fp8.go's lnb8RowsFor: 64 =
// LNB8_ROWS at GPT-2 small's width, 32 for wider rows, where a smaller
// tile lets a third block onto an SM; grid ceil(N/rows)). Fast path (vec: C % 4 == 0,
// C <= 128·LN_G = 1024, aligned rows): warp w takes rows w, w+4, ...,
// w+60, a warp a row, the row's x, dout and dinp loaded into registers in
// one go, the two row means as layernorm_backward_rf32's fast path sums
// them (the same expressions in the same order: dinp the same values),
// then each float4 group's new dinp stored, cast (4 bytes to the tile) and
// summed. General path (any C up to LNB8_MAX_C = 2048: GPT-2 large's
// 1280 and xl's 1600, widths not a multiple of 4, unaligned rows): the
// block takes its rows one after another, thread t its columns t, t+128,
// ... (at most LNB8_COLS = 16), their x, dout and dinp in registers; the
// row's two sums over the block (warp butterflies, then the warps in
// order: two barriers a row). The bytes go to a 64×C tile in dynamic
// shared memory; after one barrier the block writes q (its rows are 64·C
// consecutive bytes of q) and qt (column c of the block is a 64-byte
// segment of qt's row c) exactly as layernorm_fp8_e4m3 does.
//
// Sums, deterministic (no float atomics), per column of the block's rows:
// [dweight | dbias | next dbias] = Σ n·dout, Σ dout, Σ v. Fast path: each
// warp keeps its own sums of its columns in dynamic shared memory (3C
// floats a warp; lane l owns its columns, so no lane waits on another),
// added row by row in the warp's row order from 0, and after the barrier
// the block adds the 4 warps' sums in warp order. General path: the
// column's thread keeps them in registers, the block's rows added in
// order from 0. Either way the block writes part[blockIdx.x] (2C floats:
// layernorm_reduce's layout) and dpart[blockIdx.x] (C floats:
// matmul_bias_grad's chunks). The next dbias is thus summed in another
// fixed order than cast_transpose_dbias_e5m2's (its 64-row tiles, 8-row
// butterflies), so it agrees with it to fp32 rounding, bit for bit from
// run to run.
//
// Shared memory: the fast path 4·3C floats of sums and the rows·C byte
// tile (64 rows at C = 768: 84 KiB, two blocks an SM; 32 rows at 1024:
// 80 KiB, two); the general path the tile alone (32 rows: 40 KiB at 1280,
// 50 KiB at 1600, three blocks an SM). The launcher raises the kernel's
// limit at load to the largest, LNB8_ROWS rows' worth. Registers: 153 a
// thread (ptxas, sm_90, every dtype; no stack, no spills), three blocks
// an SM's worth.
//
// Traffic (bytes an element, dout in bf16): read dout 2, inp 4, dinp 4;
// write dinp 4, q 1, qt 1: 16 B/elt, where layernorm_backward_rf32 (14:
// read 10, write 4) and cast_transpose_dbias_e5m2 of its output (6: read
// 4, write 2) move 20; plus 12·C bytes of partials a block (0.19 B/elt),
// weight (C) and mean, rstd (8 bytes a row) from L1/L2. From fp32 dout:
// 18 against 22.

// Block size, rows and the widest C (launcher: pkg/device/gpu/fp8.go,
// LayerNormBackwardCastFP8).
// druto:block LNB8_BLOCK layernorm_backward_cast_e5m2
#define LNB8_BLOCK 128
#define LNB8_WARPS (LNB8_BLOCK / 32)
#define LNB8_ROWS 64
// LNB8_MAX_C is the widest row: the general path's LNB8_COLS columns a
// thread in registers, LNB8_ROWS·C bytes (128 KiB) of tile.
#define LNB8_MAX_C 2048
#define LNB8_COLS (LNB8_MAX_C / LNB8_BLOCK)

// Fast path: the warps' sums (LNB8_WARPS × 3C floats, 48·C bytes: a
// multiple of 16, so the tile is aligned) then the block's rows as E5M2
// bytes (LNB8_ROWS × C); general path: the rows alone.
#ifdef DRUTO_EMU
static __align__(16) unsigned char lnb8_smem[LNB8_WARPS * 3 * 4 * LNB8_MAX_C + LNB8_ROWS * LNB8_MAX_C];
#else
extern __shared__ __align__(16) unsigned char lnb8_smem[];
#endif

// lnb8_cast4 casts the four values of a float4 group to E5M2 (scale s),
// stores their bytes at dst (4-byte aligned) and adds their largest |v|
// bits to m and their underflows to u.
__device__ __forceinline__ void lnb8_cast4(unsigned char* dst, const F4& v, float s, unsigned int& m,
                                           unsigned int& u) {
    m = max_u32(max_u32(m, max_u32(abs_bits(v.v[0]), abs_bits(v.v[1]))), max_u32(abs_bits(v.v[2]), abs_bits(v.v[3])));
    const unsigned int w = fp8x2<FP8_E5M2>(v.v[0] * s, v.v[1] * s) |
                           ((unsigned int)fp8x2<FP8_E5M2>(v.v[2] * s, v.v[3] * s) << 16);
#pragma unroll
    for (int e = 0; e < 4; e++) u += flushed(abs_bits(v.v[e]), w >> (8 * e));
    *reinterpret_cast<unsigned int*>(dst) = w;
}

// lnb8_tile_out writes the block's tile (nr rows of C bytes from row r0)
// to q and its transpose to qt, as ln_fp8_body does: q with 16-byte
// stores when vec_q, qt in 16-row chunks down each column (column16).
__device__ __forceinline__ void lnb8_tile_out(unsigned char* __restrict__ q, unsigned char* __restrict__ qt,
                                              const unsigned char* tile, int r0, int nr, int rows, int N, int C,
                                              int vec_q, int vec_col) {
    const int tid = threadIdx.x;
    const size_t nbytes = (size_t)nr * C;
    unsigned char* qb = q + (size_t)r0 * C;
    size_t done = 0;
    if (vec_q) {
        const size_t nv = nbytes / 16;
        for (size_t i = tid; i < nv; i += LNB8_BLOCK)
            reinterpret_cast<uint4*>(qb)[i] = reinterpret_cast<const uint4*>(tile)[i];
        done = nv * 16;
    }
    for (size_t i = done + tid; i < nbytes; i += LNB8_BLOCK) qb[i] = tile[i];
    tile_t_store(qt + r0, N, tile, C, rows, nr, C, vec_col && C % 4 == 0, tid, LNB8_BLOCK);
}

// Launcher: pkg/device/gpu/fp8.go (LayerNormBackwardCastFP8). dinp (N,C)
// f32 accumulated; part (gridDim.x, 2C) f32 [dweight | dbias] partials;
// dpart (gridDim.x, C) f32 the next dbias's partials; q (N,C), qt (C,N)
// E5M2 bytes; amax the pair the cast adds to; dout (N,C) T, inp (N,C) f32,
// weight (C) T, mean, rstd (N) f32, scale one float. vec as layernorm.cu's
// (rows of 4 aligned elements), vec_q (q 16-byte aligned), vec_col (N %
// 16 == 0 and qt aligned). rows a block (a multiple of 16, at most
// LNB8_ROWS): grid ceil(N/rows), LNB8_BLOCK threads, 48·C + rows·C bytes
// of dynamic shared memory on the fast path, rows·C on the general one.
extern "C" __global__ void __launch_bounds__(LNB8_BLOCK)
    layernorm_backward_cast_e5m2(float* __restrict__ dinp, float* __restrict__ part, float* __restrict__ dpart,
                                 unsigned char* __restrict__ q, unsigned char* __restrict__ qt,
                                 float* __restrict__ amax, const T* __restrict__ dout, const float* __restrict__ inp,
                                 const T* __restrict__ weight, const float* __restrict__ mean,
                                 const float* __restrict__ rstd, const float* __restrict__ scale, int N, int C,
                                 int rows, int vec, int vec_q, int vec_col) {
    pdl_enter();
    __shared__ unsigned int wmax[LNB8_WARPS], wunder[LNB8_WARPS];
    __shared__ float rsum[2 * LNB8_WARPS];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int r0 = blockIdx.x * rows, nr = min(rows, N - r0);
    const bool fast = vec && C <= 128 * LN_G;
    float* sums = reinterpret_cast<float*>(lnb8_smem);
    // the tile follows the fast path's sums; the general path has none
    unsigned char* tile = lnb8_smem + (fast ? (size_t)LNB8_WARPS * 3 * 4 * C : 0);
    float* pb = part + (size_t)blockIdx.x * 2 * C;
    float* db = dpart + (size_t)blockIdx.x * C;
    const float s8 = scale[0];
    unsigned int m8 = 0, uf = 0; // the largest |v| bits, the underflows
    if (fast) {
        float* acc = sums + (size_t)warp * 3 * C; // this warp's [dweight | dbias | next dbias]
        for (int i = lane; i < 3 * C; i += 32) acc[i] = 0.0f;
        __syncwarp(); // lanes own other columns than they zeroed
        const int ng = C >> 2;
        for (int rl = warp; rl < nr; rl += LNB8_WARPS) {
            const int row = r0 + rl;
            const size_t off = (size_t)row * C;
            const float m = mean[row], s = rstd[row];
            F4 x[LN_G], di[LN_G], gv[LN_G];
#pragma unroll
            for (int k = 0; k < LN_G; k++) {
                const int g = lane + 32 * k;
                if (g < ng) {
                    x[k] = ld4(inp + off + 4 * g);
                    gv[k] = ld4(dout + off + 4 * g);
                    di[k] = ld4(dinp + off + 4 * g);
                }
            }
            float sdn = 0.0f, sdnn = 0.0f;
#pragma unroll
            for (int k = 0; k < LN_G; k++) {
                const int g = lane + 32 * k;
                if (g < ng) {
                    F4 wv = ld4(weight + 4 * g);
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        float n = s * (x[k].v[j] - m), dn = wv.v[j] * gv[k].v[j];
                        sdn += dn;
                        sdnn += dn * n;
                    }
                }
            }
            const float mdn = warp_sum(sdn) / (float)C, mdnn = warp_sum(sdnn) / (float)C;
            unsigned char* trow = tile + (size_t)rl * C;
#pragma unroll
            for (int k = 0; k < LN_G; k++) {
                const int g = lane + 32 * k;
                if (g < ng) {
                    F4 wv = ld4(weight + 4 * g);
                    float4 aw = *reinterpret_cast<float4*>(acc + 4 * g);
                    float4 ab = *reinterpret_cast<float4*>(acc + C + 4 * g);
                    float4 an = *reinterpret_cast<float4*>(acc + 2 * C + 4 * g);
                    float nv[4];
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        float n = s * (x[k].v[j] - m), dn = wv.v[j] * gv[k].v[j];
                        nv[j] = n * gv[k].v[j];
                        di[k].v[j] = di[k].v[j] + s * (dn - mdn - n * mdnn);
                    }
                    aw.x += nv[0];
                    aw.y += nv[1];
                    aw.z += nv[2];
                    aw.w += nv[3];
                    ab.x += gv[k].v[0];
                    ab.y += gv[k].v[1];
                    ab.z += gv[k].v[2];
                    ab.w += gv[k].v[3];
                    an.x += di[k].v[0];
                    an.y += di[k].v[1];
                    an.z += di[k].v[2];
                    an.w += di[k].v[3];
                    *reinterpret_cast<float4*>(acc + 4 * g) = aw;
                    *reinterpret_cast<float4*>(acc + C + 4 * g) = ab;
                    *reinterpret_cast<float4*>(acc + 2 * C + 4 * g) = an;
                    st4(dinp + off + 4 * g, di[k]);
                    lnb8_cast4(trow + 4 * g, di[k], s8, m8, uf);
                }
            }
        }
    } else {
        // The block takes its rows one after another; thread t owns columns
        // t, t + LNB8_BLOCK, ... (LNB8_COLS at most): their x, dout and dinp
        // in registers for the row's two visits, their sums in registers
        // across the rows (added in row order from 0).
        float sw[LNB8_COLS], sb[LNB8_COLS], sn[LNB8_COLS];
#pragma unroll
        for (int j = 0; j < LNB8_COLS; j++) sw[j] = sb[j] = sn[j] = 0.0f;
        for (int rl = 0; rl < nr; rl++) {
            const int row = r0 + rl;
            const size_t off = (size_t)row * C;
            const float m = mean[row], s = rstd[row];
            float x[LNB8_COLS], g[LNB8_COLS], d[LNB8_COLS];
            float sdn = 0.0f, sdnn = 0.0f;
#pragma unroll
            for (int j = 0; j < LNB8_COLS; j++) {
                const int c = tid + LNB8_BLOCK * j;
                if (c < C) {
                    x[j] = inp[off + c];
                    g[j] = load(dout + off, c);
                    d[j] = dinp[off + c];
                }
            }
#pragma unroll
            for (int j = 0; j < LNB8_COLS; j++) {
                const int c = tid + LNB8_BLOCK * j;
                if (c < C) {
                    float n = s * (x[j] - m), dn = load(weight, c) * g[j];
                    sdn += dn;
                    sdnn += dn * n;
                }
            }
            // the block's sums: the warps' (butterflies), then the warps in order
            sdn = warp_sum(sdn);
            sdnn = warp_sum(sdnn);
            if (lane == 0) rsum[warp] = sdn, rsum[LNB8_WARPS + warp] = sdnn;
            __syncthreads();
            sdn = rsum[0];
            sdnn = rsum[LNB8_WARPS];
#pragma unroll
            for (int w = 1; w < LNB8_WARPS; w++) sdn += rsum[w], sdnn += rsum[LNB8_WARPS + w];
            __syncthreads(); // rsum is read before the next row writes it
            const float mdn = sdn / (float)C, mdnn = sdnn / (float)C;
            unsigned char* trow = tile + (size_t)rl * C;
#pragma unroll
            for (int j = 0; j < LNB8_COLS; j++) {
                const int c = tid + LNB8_BLOCK * j;
                if (c < C) {
                    const float n = s * (x[j] - m), dn = load(weight, c) * g[j];
                    const float v = d[j] + s * (dn - mdn - n * mdnn);
                    dinp[off + c] = v;
                    sw[j] += n * g[j];
                    sb[j] += g[j];
                    sn[j] += v;
                    m8 = max_u32(m8, abs_bits(v));
                    const unsigned char b = (unsigned char)(fp8x2<FP8_E5M2>(v * s8, 0.0f) & 0xffu);
                    uf += flushed(abs_bits(v), b);
                    trow[c] = b;
                }
            }
        }
#pragma unroll
        for (int j = 0; j < LNB8_COLS; j++) {
            const int c = tid + LNB8_BLOCK * j;
            if (c < C) {
                pb[c] = sw[j];
                pb[C + c] = sb[j];
                db[c] = sn[j];
            }
        }
    }
    for (int off = 16; off > 0; off >>= 1) m8 = max_u32(m8, __shfl_xor_sync(0xffffffffu, m8, off));
    if (lane == 0) wmax[warp] = m8;
    __syncthreads(); // the tile, the sums and wmax are complete
    if (tid == 0) {
        unsigned int bm = 0;
#pragma unroll
        for (int w = 0; w < LNB8_WARPS; w++) bm = max_u32(bm, wmax[w]);
        if (bm != 0) atomicMax(reinterpret_cast<unsigned int*>(amax), bm);
    }
    add_counts(amax, wunder, uf, LNB8_BLOCK / 32);

    if (fast) {
        // The block's partials: the warps' sums added in warp order.
        for (int c = tid; c < 3 * C; c += LNB8_BLOCK) {
            float t = sums[c];
#pragma unroll
            for (int w = 1; w < LNB8_WARPS; w++) t += sums[(size_t)w * 3 * C + c];
            if (c < 2 * C) pb[c] = t;
            else db[c - 2 * C] = t;
        }
    }
    lnb8_tile_out(q, qt, tile, r0, nr, rows, N, C, vec_q, vec_col);
}
