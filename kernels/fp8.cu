// fp8.cu: the FP8 cast of FP8 training on Hopper (issue 38;
// pkg/device/gpu/fp8.go, CastTransposeFP8).
//
// druto:kernel cast_transpose_e4m3 cast_transpose_e5m2
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
// 6 B/elt from fp32, 4 B/elt from bf16.

#include "common.cuh"

// Block sizes (threads), read by the launchers too (kernels/blocks.go).
// druto:block CT_BLOCK cast_transpose_e4m3 cast_transpose_e5m2
#define CT_BLOCK 256
// CT_TILE is the tile's side: CT_BLOCK threads move 16 bytes each, once by
// rows and once by columns (CT_TILE·CT_TILE = 16·CT_BLOCK).
#define CT_TILE 64

#define FP8_E4M3 0
#define FP8_E5M2 1

// fp8x2<F>(lo, hi) converts two floats; lo lands in the low byte (the
// element at the lower address when stored little-endian).
#ifdef DRUTO_EMU
// The host emulator (kernels/emu/fp8) implements the PTX instructions.
unsigned short druto_emu_cvt_e4m3x2(float a, float b);
unsigned short druto_emu_cvt_e5m2x2(float a, float b);
template <int F> __device__ __forceinline__ unsigned short fp8x2(float lo, float hi) {
    return F == FP8_E4M3 ? druto_emu_cvt_e4m3x2(hi, lo) : druto_emu_cvt_e5m2x2(hi, lo);
}
#else
// cvt ... d, a, b puts a's conversion in d's upper byte, b's in the lower.
template <int F> __device__ __forceinline__ unsigned short fp8x2(float lo, float hi);
template <> __device__ __forceinline__ unsigned short fp8x2<FP8_E4M3>(float lo, float hi) {
    unsigned short d;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
    return d;
}
template <> __device__ __forceinline__ unsigned short fp8x2<FP8_E5M2>(float lo, float hi) {
    unsigned short d;
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
    return d;
}
#endif

// abs_bits is |v| as a float's bits: unsigned order is |v|'s order, NaN on top.
__device__ __forceinline__ unsigned int abs_bits(float v) { return __float_as_uint(v) & 0x7fffffffu; }
__device__ __forceinline__ unsigned int max_u32(unsigned int a, unsigned int b) { return a > b ? a : b; }

template <int F>
__device__ __forceinline__ void cast_transpose_body(unsigned char* __restrict__ q, unsigned char* __restrict__ qt,
                                                    float* __restrict__ amax, const T* __restrict__ x,
                                                    const float* __restrict__ scale, int N, int C, int vec_row,
                                                    int vec_col) {
    __shared__ __align__(16) unsigned char tile[CT_TILE][CT_TILE];
    __shared__ unsigned int wmax[CT_BLOCK / 32];
    const int tid = threadIdx.x;
    const int r0 = blockIdx.y * CT_TILE, c0 = blockIdx.x * CT_TILE;
    const float s = scale[0];

    // Rows: 16 elements of row tr from column tc.
    const int tr = tid / 4, tc = (tid % 4) * 16;
    const int r = r0 + tr, c = c0 + tc;
    unsigned int m = 0; // the largest |x| bits seen
    if (r < N && c < C) {
        const T* xr = x + (size_t)r * C + c;
        unsigned char* qr = q + (size_t)r * C + c;
        const int n = C - c < 16 ? C - c : 16;
        if (vec_row && n == 16) {
            float v[16];
#pragma unroll
            for (int k = 0; k < 4; k++) {
                F4 f = ld4(xr + 4 * k);
#pragma unroll
                for (int e = 0; e < 4; e++) v[4 * k + e] = f.v[e];
            }
            unsigned int w[8];
#pragma unroll
            for (int k = 0; k < 16; k++) m = max_u32(m, abs_bits(v[k]));
#pragma unroll
            for (int k = 0; k < 8; k++) w[k] = fp8x2<F>(v[2 * k] * s, v[2 * k + 1] * s);
            uint4 o;
            o.x = w[0] | (w[1] << 16);
            o.y = w[2] | (w[3] << 16);
            o.z = w[4] | (w[5] << 16);
            o.w = w[6] | (w[7] << 16);
            *reinterpret_cast<uint4*>(qr) = o;
            *reinterpret_cast<uint4*>(&tile[tr][tc]) = o;
        } else {
            for (int k = 0; k < n; k++) {
                const float v = load(xr, k);
                m = max_u32(m, abs_bits(v));
                const unsigned char b = (unsigned char)(fp8x2<F>(v * s, 0.0f) & 0xffu);
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

    // Columns: column cc of the tile, rows rr .. rr+15, to qt row c0+cc.
    const int warp = tid / 32, lane = tid & 31;
    const int cc = (warp % 2) * 32 + lane, rr = (warp / 2) * 16;
    const int col = c0 + cc, row = r0 + rr;
    if (col < C && row < N) {
        unsigned char* qc = qt + (size_t)col * N + row;
        const int n = N - row < 16 ? N - row : 16;
        if (vec_col && n == 16) {
            unsigned int w[4];
#pragma unroll
            for (int k = 0; k < 4; k++)
                w[k] = (unsigned int)tile[rr + 4 * k][cc] | ((unsigned int)tile[rr + 4 * k + 1][cc] << 8) |
                       ((unsigned int)tile[rr + 4 * k + 2][cc] << 16) | ((unsigned int)tile[rr + 4 * k + 3][cc] << 24);
            uint4 o;
            o.x = w[0];
            o.y = w[1];
            o.z = w[2];
            o.w = w[3];
            *reinterpret_cast<uint4*>(qc) = o;
        } else {
            for (int k = 0; k < n; k++) qc[k] = tile[rr + k][cc];
        }
    }
}

// Launchers: pkg/device/gpu/fp8.go. q (N,C) and qt (C,N) are bytes of the
// format in the name; amax one float, zeroed before the launch.
#define CAST_TRANSPOSE(name, F)                                                                                 \
    extern "C" __global__ void __launch_bounds__(CT_BLOCK)                                                      \
        name(unsigned char* __restrict__ q, unsigned char* __restrict__ qt, float* __restrict__ amax,           \
             const T* __restrict__ x, const float* __restrict__ scale, int N, int C, int vec_row, int vec_col) { \
        cast_transpose_body<F>(q, qt, amax, x, scale, N, C, vec_row, vec_col);                                  \
    }

CAST_TRANSPOSE(cast_transpose_e4m3, FP8_E4M3)
CAST_TRANSPOSE(cast_transpose_e5m2, FP8_E5M2)
