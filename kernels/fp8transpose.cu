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
// A block moves one TR_TILE × TR_TILE byte tile through shared memory:
// thread t loads 16 bytes of row t/4 from column 16·(t%4) (one 16-byte
// load when vec_in: C a multiple of 16 and in 16-byte aligned, else byte
// by byte within the tensor), then writes 16 bytes of out's row t%64 (a
// column of the tile) from the tile's rows 16·(t/64) on: a warp reads 32
// consecutive bytes of a tile row at a time (no bank conflicts), and
// stores them with one 16-byte store when vec_out (R a multiple of 16 and
// out 16-byte aligned), else byte by byte. The grid is (tiles of R, tiles
// of C): it depends only on the sizes.

#include "common.cuh"

// druto:block TR_BLOCK transpose_fp8
#define TR_BLOCK 256
// TR_TILE is the tile's side in bytes (TR_TILE·TR_TILE = 16·TR_BLOCK).
#define TR_TILE 64

extern "C" __global__ void __launch_bounds__(TR_BLOCK)
    transpose_fp8(unsigned char* __restrict__ out, const unsigned char* __restrict__ in, int R, int C, int vec_in,
                  int vec_out) {
    pdl_enter();
    __shared__ __align__(16) unsigned char tile[TR_TILE][TR_TILE];
    const int t = threadIdx.x;
    const int r0 = blockIdx.x * TR_TILE, c0 = blockIdx.y * TR_TILE;

    // Load: 16 bytes of in's row r0 + t/4 from column c0 + 16·(t%4).
    {
        const int tr = t / 4, tc = (t % 4) * 16;
        const int r = r0 + tr, c = c0 + tc;
        unsigned char* s = &tile[tr][tc];
        if (r < R && c < C) {
            const unsigned char* src = in + (size_t)r * C + c;
            const int n = C - c < 16 ? C - c : 16;
            if (vec_in && n == 16) {
                *reinterpret_cast<uint4*>(s) = *reinterpret_cast<const uint4*>(src);
            } else {
                for (int k = 0; k < n; k++) s[k] = src[k];
            }
        }
    }
    __syncthreads();

    // Store: out's row c0 + t%64, 16 bytes from column r0 + 16·(t/64).
    const int j = t % TR_TILE, i0 = (t / TR_TILE) * 16;
    const int c = c0 + j, r = r0 + i0;
    if (c >= C || r >= R) return;
    unsigned char* dst = out + (size_t)c * R + r;
    const int n = R - r < 16 ? R - r : 16;
    if (vec_out && n == 16) {
        unsigned int w[4];
#pragma unroll
        for (int k = 0; k < 4; k++)
            w[k] = (unsigned int)tile[i0 + 4 * k][j] | ((unsigned int)tile[i0 + 4 * k + 1][j] << 8) |
                   ((unsigned int)tile[i0 + 4 * k + 2][j] << 16) | ((unsigned int)tile[i0 + 4 * k + 3][j] << 24);
        uint4 o;
        o.x = w[0];
        o.y = w[1];
        o.z = w[2];
        o.w = w[3];
        *reinterpret_cast<uint4*>(dst) = o;
    } else {
        for (int k = 0; k < n; k++) dst[k] = tile[i0 + k][j];
    }
}
