// fp8transpose.cu: the byte transpose of an FP8 tensor (issue 38;
// pkg/device/gpu/fp8transpose.go, TransposeFP8; the CPU twin is
// pkg/device/cpu's TransposeFP8).
//
// druto:kernel transpose_fp8
// druto:pdl transpose_fp8
// druto:dtypes f32
//
// transpose_fp8: out (C,R) = inᵀ for in (R,C) of one-byte codes, either
// FP8 format (a copy of the bits: no conversion, so the dtype line only
// names the one build). The LM head's FP8 weight gradient takes the e5m2
// logits' gradient K-major as (V, n): the classifier writes q (n, V) in
// its row form and this pass makes the transposed copy, bandwidth-bound
// (one read and one write of each byte), in place of a second read of q
// in tiles inside the classifier.
//
// A block moves one TR_ROWS × TR_COLS = 64 × 256 byte tile through shared
// memory. Loads: thread t takes 16 bytes of rows t/16 + 16k (k = 0..3)
// from column 16·(t%16), the four loads issued before any is used (one
// 16-byte load each when vec_in: C a multiple of 16 and in 16-byte
// aligned, else byte by byte within the tensor): a warp reads two whole
// 256-byte row segments a load. Stores: bytetile.cuh's tile_t_store, one
// item of 4 columns by 16 rows a thread, so the 4 lanes of a column store
// its 64 bytes side by side (16-byte stores when vec_out: R a multiple of
// 16 and out 16-byte aligned, else byte by byte). The grid is (tiles of R,
// tiles of C): it depends only on the sizes.

#include "common.cuh"
#include "bytetile.cuh"

// druto:block TR_BLOCK transpose_fp8
#define TR_BLOCK 256
// TR_ROWS × TR_COLS is a block's tile in bytes: TR_BLOCK threads load 64
// bytes each, and store one tile_t_store item (4 × 16 bytes) each.
#define TR_ROWS 64
#define TR_COLS 256

extern "C" __global__ void __launch_bounds__(TR_BLOCK)
    transpose_fp8(unsigned char* __restrict__ out, const unsigned char* __restrict__ in, int R, int C, int vec_in,
                  int vec_out) {
    pdl_enter();
    __shared__ __align__(16) unsigned char tile[TR_ROWS][TR_COLS];
    const int t = threadIdx.x;
    const int r0 = blockIdx.x * TR_ROWS, c0 = blockIdx.y * TR_COLS;
    const int nr = min(TR_ROWS, R - r0), nc = min(TR_COLS, C - c0);
    const int tc = (t % 16) * 16, c = c0 + tc;
    const int n = C - c < 16 ? C - c : 16; // the bytes of a load's row segment (n <= 0 past C)
    if (vec_in && n == 16) {
        uint4 v[TR_ROWS / 16];
#pragma unroll
        for (int k = 0; k < TR_ROWS / 16; k++) {
            const int tr = t / 16 + 16 * k;
            if (tr < nr) v[k] = *reinterpret_cast<const uint4*>(in + (size_t)(r0 + tr) * C + c);
        }
#pragma unroll
        for (int k = 0; k < TR_ROWS / 16; k++) {
            const int tr = t / 16 + 16 * k;
            if (tr < nr) *reinterpret_cast<uint4*>(&tile[tr][tc]) = v[k];
        }
    } else {
        for (int k = 0; k < TR_ROWS / 16; k++) {
            const int tr = t / 16 + 16 * k;
            if (tr >= nr) break;
            const unsigned char* src = in + (size_t)(r0 + tr) * C + c;
            for (int j = 0; j < n; j++) tile[tr][tc + j] = src[j];
        }
    }
    __syncthreads();
    tile_t_store(out + (size_t)c0 * R + r0, R, &tile[0][0], TR_COLS, TR_ROWS, nr, nc, vec_out, t, TR_BLOCK);
}
