// bytetile.cuh: the transposed store of a tile of one-byte codes held in
// shared memory, shared by the FP8 casts (fp8.cu: the qt of every
// cast-transpose, layernorm and layernorm backward) and the FP8 byte
// transpose (fp8transpose.cu).
//
// tile_t_store(dst, ldd, tile, ld, rows, nr, nc, vec, t, nt):
// dst[c·ldd + r] = tile[r·ld + c] for r < nr, c < nc, by the nt threads of
// a block (t the calling thread's index; every thread calls it). rows is
// the tile's height, a multiple of 16, nr <= rows the rows it holds. The
// work is cut into items of 4 columns by 16 rows: a thread loads the
// item's 16 words (4 bytes of each of its rows) from shared memory,
// transposes each 4×4 block of bytes with byte permutes and stores each
// column's 16 bytes with one 16-byte store. Items are numbered with the
// 16-row chunk fastest, so the rows/16 consecutive lanes that share 4
// columns store consecutive 16-byte pieces of the same dst rows: a column
// of a 64-row tile is one 64-byte segment (two whole 32-byte sectors) from
// one store instruction of 4 lanes. (A lane a column, 32 lanes storing 16
// bytes into each of 32 rows, leaves half sectors for L2 to merge, and L2,
// not DRAM, was then what limited the casts.)
//
// vec: ld % 4 == 0 with tile 4-byte aligned, and ldd % 16 == 0 with dst
// 16-byte aligned. Without it, and for items cut by nr or nc, bytes move
// one at a time. The word loads of a 64-row tile's 4 chunks fall on one
// bank when ld is a multiple of 128 bytes (4 wavefronts a load, as many as
// the byte loads they replace took for the same bytes).

#ifndef DRUTO_BYTETILE_CUH
#define DRUTO_BYTETILE_CUH

__device__ __forceinline__ void tile_t_store(unsigned char* __restrict__ dst, size_t ldd, const unsigned char* tile,
                                             int ld, int rows, int nr, int nc, int vec, int t, int nt) {
    const int chunks = rows / 16, items = (nc + 3) / 4 * chunks;
    for (int it = t; it < items; it += nt) {
        const int c = (it / chunks) * 4, r = (it % chunks) * 16;
        if (r >= nr) continue;
        const int n = nr - r < 16 ? nr - r : 16, m = nc - c < 4 ? nc - c : 4;
        unsigned char* d = dst + (size_t)c * ldd + r;
        const unsigned char* s = tile + (size_t)r * ld + c;
        if (vec && n == 16 && m == 4) {
            unsigned int w[16];
#pragma unroll
            for (int k = 0; k < 16; k++) w[k] = *reinterpret_cast<const unsigned int*>(s + (size_t)k * ld);
            unsigned int o[4][4]; // o[j][k]: column c + j, rows r + 4k .. r + 4k + 3
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const unsigned int lo01 = __byte_perm(w[4 * k], w[4 * k + 1], 0x5140);     // a0 b0 a1 b1
                const unsigned int hi01 = __byte_perm(w[4 * k], w[4 * k + 1], 0x7362);     // a2 b2 a3 b3
                const unsigned int lo23 = __byte_perm(w[4 * k + 2], w[4 * k + 3], 0x5140); // c0 d0 c1 d1
                const unsigned int hi23 = __byte_perm(w[4 * k + 2], w[4 * k + 3], 0x7362); // c2 d2 c3 d3
                o[0][k] = __byte_perm(lo01, lo23, 0x5410);                                 // a0 b0 c0 d0
                o[1][k] = __byte_perm(lo01, lo23, 0x7632);                                 // a1 b1 c1 d1
                o[2][k] = __byte_perm(hi01, hi23, 0x5410);                                 // a2 b2 c2 d2
                o[3][k] = __byte_perm(hi01, hi23, 0x7632);                                 // a3 b3 c3 d3
            }
#pragma unroll
            for (int j = 0; j < 4; j++) {
                uint4 v;
                v.x = o[j][0];
                v.y = o[j][1];
                v.z = o[j][2];
                v.w = o[j][3];
                *reinterpret_cast<uint4*>(d + (size_t)j * ldd) = v;
            }
        } else {
            for (int j = 0; j < m; j++)
                for (int k = 0; k < n; k++) d[(size_t)j * ldd + k] = s[(size_t)k * ld + j];
        }
    }
}

#endif
