// fp8.cu: the FP8 casts of FP8 training on Hopper (issue 38;
// pkg/device/gpu/fp8.go: CastTransposeFP8, GELUCastTransposeFP8,
// CastTransposeDBiasFP8, DGELUCastTransposeDBiasFP8, LayerNormFP8,
// ResidualLayerNormFP8): the cast-transpose of any tensor, the GELU that
// produces the FP8 input of the MLP projection, the output gradients'
// casts with their bias gradients (the fc layer's through the GELU
// backward), and the layernorm forwards that produce the FP8 input of the
// qkv and fc GEMMs themselves.
//
// druto:kernel cast_transpose_e4m3 cast_transpose_e5m2 gelu_cast_transpose_e4m3
// druto:kernel cast_transpose_dbias_e5m2 dgelu_cast_transpose_dbias_e5m2
// druto:kernel layernorm_fp8_e4m3 residual_layernorm_fp8_e4m3
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
// gelu_cast_transpose_e4m3: the same with x = gelu(pre) (common.cuh's
// gelu_f in fp32 of the stored pre-activation): the fc GEMM writes only
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
// cover all 32 banks once, no padding needed). Then columns: warp w takes
// the 32 columns from 32·(w%2) and rows from 16·(w/2); lane l gathers
// column 32·(w%2)+l over those 16 rows (byte loads: a warp reads 32
// consecutive bytes of one row per load, 8 banks, no conflict) and writes
// them to qt with one 16-byte store. The vector paths need rows aligned:
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
// Tiling by rows: a block of LNF8_BLOCK = 512 threads (16 warps) owns
// LNF8_ROWS = 64 consecutive rows (tokens) and all C channels; grid
// ceil(N/64). Warp w normalises rows w, w+16, w+32, w+48 (a warp a row, as
// layernorm.cu), writing each row's FP8 bytes to a 64×C byte tile in
// dynamic shared memory (4 bytes a lane a store on the vector path: a warp
// covers 128 consecutive bytes, no bank conflict). After one barrier:
// q: the block's rows are 64·C consecutive bytes of q, copied from the
// tile with 16-byte stores (q aligned: a block starts at a multiple of
// 64·C bytes) and bytes for the tail; qt: column c of the block is the
// 64-byte segment of qt's row c from column r0, written in four chunks of
// 16 rows: lane l of a warp takes column 32·g+l, gathers the chunk's 16
// bytes down it (each load of the warp reads 32 consecutive bytes of one
// tile row, no bank conflict) and stores them with one 16-byte store
// (N % 16 == 0 and qt aligned), else byte by byte, as at the partial chunk
// of the last block.
//
// Shared memory: 64·C bytes dynamic (48 KiB at C = 768, 64 KiB at 1024,
// 80 KiB at 1280, 100 KiB at 1600) plus 64 bytes static; past 48 KiB the
// launcher raises the kernel's limit at load (to 64·LNF8_MAX_C = 224 KiB,
// within sm_90's 227 KiB a block), and refuses C > LNF8_MAX_C = 3584.
// Registers: 64 a thread (ptxas, sm_90; no stack, no spills), so at most
// two blocks (32 warps) an SM whatever C; shared memory alone would allow
// four at C = 768, three at 1024, two at 1280 and 1600, one past about
// 1800.
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

// Block sizes (threads), read by the launchers too (kernels/blocks.go).
// druto:block CT_BLOCK cast_transpose_e4m3 cast_transpose_e5m2 gelu_cast_transpose_e4m3 cast_transpose_dbias_e5m2
// druto:block CT_BLOCK dgelu_cast_transpose_dbias_e5m2
#define CT_BLOCK 256
// CT_TILE is the tile's side: CT_BLOCK threads move 16 bytes each, once by
// rows and once by columns (CT_TILE·CT_TILE = 16·CT_BLOCK).
#define CT_TILE 64

// column16 copies n <= 16 bytes down a column of a shared-memory tile,
// col[0], col[ld], ..., to dst (a row of qt): with one 16-byte store when
// vec and n == 16 (dst then 16-byte aligned), else byte by byte.
__device__ __forceinline__ void column16(unsigned char* dst, const unsigned char* col, int ld, int n, int vec) {
    if (vec && n == 16) {
        unsigned int w[4];
#pragma unroll
        for (int k = 0; k < 4; k++)
            w[k] = (unsigned int)col[(4 * k) * ld] | ((unsigned int)col[(4 * k + 1) * ld] << 8) |
                   ((unsigned int)col[(4 * k + 2) * ld] << 16) | ((unsigned int)col[(4 * k + 3) * ld] << 24);
        uint4 o;
        o.x = w[0];
        o.y = w[1];
        o.z = w[2];
        o.w = w[3];
        *reinterpret_cast<uint4*>(dst) = o;
    } else {
        for (int k = 0; k < n; k++) dst[k] = col[k * ld];
    }
}

// The elementwise op a cast-transpose applies to x before the cast.
#define CT_COPY 0
#define CT_GELU 1
#define CT_DBIAS 2 // copy, and the column sums into part
#define CT_DGELU_DBIAS 3 // x·gelu'(pre), and the column sums into part
// CT_SUMS(OP): the op writes column sums.
#define CT_SUMS(OP) ((OP) == CT_DBIAS || (OP) == CT_DGELU_DBIAS)

// ct_value is the value an op casts: x itself, gelu(x), or for
// CT_DGELU_DBIAS x·gelu'(p) (p the pre-activation; the order of gelu.cu's
// backwards, gelu'(p)·x).
template <int OP> __device__ __forceinline__ float ct_value(float x, float p) {
    if (OP == CT_GELU) return gelu_f(x);
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
            float v[16];
#pragma unroll
            for (int k = 0; k < 4; k++) {
                F4 f = ld4(xr + 4 * k);
                F4 p = f;
                if (OP == CT_DGELU_DBIAS) p = ld4(pr + 4 * k);
#pragma unroll
                for (int e = 0; e < 4; e++) v[4 * k + e] = ct_value<OP>(f.v[e], p.v[e]);
            }
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
    add_counts<CT_BLOCK>(amax, wunder, uf);
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

    // Columns: column cc of the tile, rows rr .. rr+15, to qt row c0+cc.
    const int warp = tid / 32, lane = tid & 31;
    const int cc = (warp % 2) * 32 + lane, rr = (warp / 2) * 16;
    const int col = c0 + cc, row = r0 + rr;
    if (col < C && row < N) {
        unsigned char* qc = qt + (size_t)col * N + row;
        const int n = N - row < 16 ? N - row : 16;
        column16(qc, &tile[rr][cc], CT_TILE, n, vec_col);
    }
}

// Launchers: pkg/device/gpu/fp8.go. q (N,C) and qt (C,N) are bytes of the
// format in the name; amax the pair of floats (max |x| bits, underflow
// count bits) the casts add to.
#define CAST_TRANSPOSE(name, F, OP)                                                                               \
    extern "C" __global__ void __launch_bounds__(CT_BLOCK)                                                      \
        name(unsigned char* __restrict__ q, unsigned char* __restrict__ qt, float* __restrict__ amax,           \
             const T* __restrict__ x, const float* __restrict__ scale, int N, int C, int vec_row, int vec_col) { \
        cast_transpose_body<F, OP>(q, qt, amax, (float*)0, x, (const T*)0, scale, N, C, vec_row, vec_col);                  \
    }

CAST_TRANSPOSE(cast_transpose_e4m3, FP8_E4M3, CT_COPY)
CAST_TRANSPOSE(cast_transpose_e5m2, FP8_E5M2, CT_COPY)
CAST_TRANSPOSE(gelu_cast_transpose_e4m3, FP8_E4M3, CT_GELU)

// part (ceil(N/CT_TILE), C) fp32: each tile's column sums (see the header).
extern "C" __global__ void __launch_bounds__(CT_BLOCK)
    cast_transpose_dbias_e5m2(unsigned char* __restrict__ q, unsigned char* __restrict__ qt, float* __restrict__ amax,
                              float* __restrict__ part, const T* __restrict__ x, const float* __restrict__ scale, int N,
                              int C, int vec_row, int vec_col) {
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
    cast_transpose_body<FP8_E5M2, CT_DGELU_DBIAS>(q, qt, amax, part, dy, pre, scale, N, C, vec_row, vec_col);
}

// ---- layernorm with the FP8 cast: the producer of the qkv and fc GEMMs ----
//
// Block sizes, rows and the widest C (launchers: pkg/device/gpu/fp8.go).
// druto:block LNF8_BLOCK layernorm_fp8_e4m3 residual_layernorm_fp8_e4m3
#define LNF8_BLOCK 512
// LNF8_ROWS is the rows (tokens) a block owns: the bytes of each column
// segment of qt it writes.
#define LNF8_ROWS 64
// LNF8_MAX_C is the widest row: the block's LNF8_ROWS·C bytes of dynamic
// shared memory (224 KiB at 3584) within sm_90's 227 KiB a block.
#define LNF8_MAX_C 3584

// LnFP8Row is the output of ln_forward_row (layernorm.cuh) for the FP8
// kernels: y·s cast to format F into the row's bytes in shared memory,
// the largest |y| bits seen (before scaling) in m, the underflows in u.
template <int F> struct LnFP8Row {
    unsigned char* row;
    float s;
    unsigned int m, u;
    __device__ __forceinline__ void put4(int g, const F4& y) {
        m = max_u32(max_u32(m, abs_bits(y.v[0])), max_u32(abs_bits(y.v[1]), max_u32(abs_bits(y.v[2]), abs_bits(y.v[3]))));
        const unsigned int w = fp8x2<F>(y.v[0] * s, y.v[1] * s) | ((unsigned int)fp8x2<F>(y.v[2] * s, y.v[3] * s) << 16);
#pragma unroll
        for (int e = 0; e < 4; e++) u += flushed(abs_bits(y.v[e]), w >> (8 * e));
        *reinterpret_cast<unsigned int*>(row + 4 * g) = w; // C % 4 == 0 on this path: aligned
    }
    __device__ __forceinline__ void put(int i, float y) {
        m = max_u32(m, abs_bits(y));
        const unsigned char b = (unsigned char)(fp8x2<F>(y * s, 0.0f) & 0xffu);
        u += flushed(abs_bits(y), b);
        row[i] = b;
    }
};

// The block's rows as FP8 bytes, LNF8_ROWS × C, rows of C bytes.
#ifdef DRUTO_EMU
static __align__(16) unsigned char lnf8_tile[LNF8_ROWS * LNF8_MAX_C];
#else
extern __shared__ __align__(16) unsigned char lnf8_tile[];
#endif

template <int F, bool RES>
__device__ __forceinline__ void ln_fp8_body(float* res, unsigned char* __restrict__ q, unsigned char* __restrict__ qt,
                                            float* __restrict__ amax, float* __restrict__ mean,
                                            float* __restrict__ rstd, const float* a, const T* __restrict__ b,
                                            const T* __restrict__ weight, const T* __restrict__ bias,
                                            const float* __restrict__ scale, int N, int C, int vec, int vec_q,
                                            int vec_col) {
    __shared__ unsigned int wmax[LNF8_BLOCK / 32], wunder[LNF8_BLOCK / 32];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int r0 = blockIdx.x * LNF8_ROWS, nr = min(LNF8_ROWS, N - r0);

    // Rows: warp w normalises rows w, w + 16, ... of the block, its bytes to
    // the tile (the same call as layernorm.cu's forwards, another output).
    LnFP8Row<F> out;
    out.s = scale[0];
    out.m = 0;
    out.u = 0;
    for (int rl = warp; rl < nr; rl += LNF8_BLOCK / 32) {
        out.row = lnf8_tile + (size_t)rl * C;
        ln_forward_row<float, RES>(res, out, mean, rstd, a, b, weight, bias, r0 + rl, C, vec);
    }
    unsigned int m = out.m;
    for (int off = 16; off > 0; off >>= 1) m = max_u32(m, __shfl_xor_sync(0xffffffffu, m, off));
    if (lane == 0) wmax[warp] = m;
    __syncthreads(); // the tile and wmax are complete
    if (tid == 0) {
        unsigned int bm = 0;
#pragma unroll
        for (int w = 0; w < LNF8_BLOCK / 32; w++) bm = max_u32(bm, wmax[w]);
        if (bm != 0) atomicMax(reinterpret_cast<unsigned int*>(amax), bm);
    }
    add_counts<LNF8_BLOCK>(amax, wunder, out.u);

    // q: the block's rows are nr·C consecutive bytes of q from row r0, as in
    // the tile; 16 bytes a thread while whole vectors last (r0·C is a
    // multiple of 64, so q aligned is enough), then bytes.
    const size_t nbytes = (size_t)nr * C;
    unsigned char* qb = q + (size_t)r0 * C;
    size_t done = 0;
    if (vec_q) {
        const size_t nv = nbytes / 16;
        for (size_t i = tid; i < nv; i += LNF8_BLOCK)
            reinterpret_cast<uint4*>(qb)[i] = reinterpret_cast<const uint4*>(lnf8_tile)[i];
        done = nv * 16;
    }
    for (size_t i = done + tid; i < nbytes; i += LNF8_BLOCK) qb[i] = lnf8_tile[i];

    // qt: column c of the block is qt's row c from column r0, LNF8_ROWS bytes
    // in four chunks of 16 rows. Item (group, chunk) of a warp: lane l takes
    // column 32·group + l and gathers the chunk's 16 bytes down it (byte
    // loads: the warp reads 32 consecutive bytes of one row, no bank
    // conflict), then one 16-byte store (vec_col: N % 16 == 0 and qt
    // aligned) or 16 byte stores; the bottom block's partial chunk byte by
    // byte.
    const int items = (C + 31) / 32 * (LNF8_ROWS / 16);
    for (int it = warp; it < items; it += LNF8_BLOCK / 32) {
        const int c = (it / (LNF8_ROWS / 16)) * 32 + lane, rr = (it % (LNF8_ROWS / 16)) * 16;
        if (c >= C || rr >= nr) continue;
        unsigned char* qc = qt + (size_t)c * N + r0 + rr;
        const unsigned char* tc = lnf8_tile + (size_t)rr * C + c;
        const int n = nr - rr < 16 ? nr - rr : 16;
        column16(qc, tc, C, n, vec_col);
    }
}

// Launchers: pkg/device/gpu/fp8.go (LayerNormFP8, ResidualLayerNormFP8).
// q (N,C) and qt (C,N) E4M3 bytes, amax the pair the casts add to,
// mean and rstd (N) f32 (either may be null), inp, res and a (N,C) f32 (the
// residual stream), b (N,C), weight and bias (C) T, scale one float; grid
// ceil(N/LNF8_ROWS) blocks of LNF8_BLOCK threads, LNF8_ROWS·C bytes of
// dynamic shared memory. vec as layernorm.cu's (rows of 4 aligned
// elements), vec_q (q 16-byte aligned), vec_col (as cast_transpose's).
extern "C" __global__ void __launch_bounds__(LNF8_BLOCK)
    layernorm_fp8_e4m3(unsigned char* __restrict__ q, unsigned char* __restrict__ qt, float* __restrict__ amax,
                       float* __restrict__ mean, float* __restrict__ rstd, const float* __restrict__ inp,
                       const T* __restrict__ weight, const T* __restrict__ bias, const float* __restrict__ scale, int N,
                       int C, int vec, int vec_q, int vec_col) {
    ln_fp8_body<FP8_E4M3, false>((float*)0, q, qt, amax, mean, rstd, inp, (const T*)0, weight, bias, scale, N, C, vec,
                                 vec_q, vec_col);
}

// res is written and (on the three-pass path) read back, so it is not __restrict__.
extern "C" __global__ void __launch_bounds__(LNF8_BLOCK)
    residual_layernorm_fp8_e4m3(float* res, unsigned char* __restrict__ q, unsigned char* __restrict__ qt,
                                float* __restrict__ amax, float* __restrict__ mean, float* __restrict__ rstd,
                                const float* a, const T* __restrict__ b, const T* __restrict__ weight,
                                const T* __restrict__ bias, const float* __restrict__ scale, int N, int C, int vec,
                                int vec_q, int vec_col) {
    ln_fp8_body<FP8_E4M3, true>(res, q, qt, amax, mean, rstd, a, b, weight, bias, scale, N, C, vec, vec_q, vec_col);
}
