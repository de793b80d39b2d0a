// adamw_fp8.cu: the AdamW step of the weights that FP8 GEMMs read, writing
// their FP8 copies as it updates them (issue 38; pkg/device/gpu/adamw_fp8.go,
// AdamWStateFP8; the CPU twin is pkg/device/cpu's AdamWStateFP8: AdamWState,
// then CastTransposeFP8 of each weight's working copy).
//
// druto:kernel adamw_fp8_e4m3
// druto:pdl adamw_fp8_e4m3
// druto:dtypes f32 bf16 f16
// druto:arch 90
//
// Under amp.FP8 every linear layer's weight W (rows × cols, row-major in
// the flat parameter buffers) is read by the step's GEMMs as an e4m3 copy
// q = e4m3(W·s) and its transpose qt (Hopper's FP8 GEMMs take both operands
// K-major: the forward reads q, the input gradient qt). Cast in a pass of
// their own, the copies cost a read of the working copy and the writes of
// q and qt for every weight, once a step. Here the optimizer writes them:
// a block takes a 64×64 tile of one weight, updates it with adamw.cu's
// arithmetic (adam_update, the step's scalars from the step state as
// adamw_fused_state2 reads them), stores master, m, v and the working copy
// work (T) as adamw_fused_state2 does, and casts the updated working copy,
// the value work holds, exactly as cast_transpose_e4m3 (fp8.cu) casts it:
// q's row, the tile's bytes in shared memory, max |x| into amax[0] and the
// underflows into amax[1] (fp8.cuh), then qt through bytetile.cuh's
// tile_t_store. The scale s = scale[0] is the one the delayed scaling set
// for this step's cast (pkg/gpt updates the weights' scales just before).
//
// When the step's gradients were not finite (st[ST_FINITE] 0) nothing is
// updated and the working copy as it is gets cast: the scale may have
// changed, and the copies must follow it.
//
// The weights of one launch are described by a table ws of AF8W records
// (tile0: the first block of the weight's tiles, ascending): block b
// takes the last record with tile0 <= b. Bytes per element: adamw's 16
// read and 12 + sizeof(T) written, plus the two FP8 copies' 2, where the
// separate cast read sizeof(T) more and launched once a weight.

#include "common.cuh"
#include "adamw.cuh"
#include "fp8.cuh"
#include "bytetile.cuh"

// druto:block AF8_BLOCK adamw_fp8_e4m3
#define AF8_BLOCK 256
// AF8_TILE is the tile's side: a thread updates 16 elements of one row
// (4 threads a row), AF8_TILE·AF8_TILE = 16·AF8_BLOCK.
#define AF8_TILE 64
// AF8_WORDS is the 64-bit words of an AF8W record (the launcher writes
// them: pkg/device/gpu/adamw_fp8.go).
#define AF8_WORDS 8

// AF8W describes one weight: its elements off .. off + rows·cols of the
// flat buffers; q (rows, cols) and qt (cols, rows) e4m3; amax the pair the
// cast adds to; scale its scale (one float); tile0 its first block; dec 1
// when its segment decays; vec_row: off and cols multiples of 16 and
// every buffer's base aligned (16-byte loads and stores by rows), vec_col:
// rows a multiple of 16 and qt 16-byte aligned (tile_t_store's vec).
struct AF8W {
    unsigned long long off;
    int rows, cols;
    unsigned char* q;
    unsigned char* qt;
    float* amax;
    const float* scale;
    int tile0, dec;
    int vec_row, vec_col;
};

// af8_cast4 casts 4 values of the working copy (fp32) with scale s into 4
// e4m3 codes (the low byte is p[0]), adding to the amax bits m and the
// underflows u.
__device__ __forceinline__ unsigned int af8_cast4(const F4& p, float s, unsigned int& m, unsigned int& u) {
#pragma unroll
    for (int k = 0; k < 4; k++) m = max_u32(m, abs_bits(p.v[k]));
    const unsigned int lo = fp8x2<FP8_E4M3>(p.v[0] * s, p.v[1] * s), hi = fp8x2<FP8_E4M3>(p.v[2] * s, p.v[3] * s);
    u += flushed(abs_bits(p.v[0]), lo) + flushed(abs_bits(p.v[1]), lo >> 8) + flushed(abs_bits(p.v[2]), hi) +
         flushed(abs_bits(p.v[3]), hi >> 8);
    return lo | (hi << 16);
}

// master, grads, m, v (total) fp32; work (total) T; ws (nw) AF8W; st
// (StateLen) fp32: the step's scalars as adamw_fused_state2 reads them.
extern "C" __global__ void __launch_bounds__(AF8_BLOCK)
    adamw_fp8_e4m3(float* __restrict__ master, T* __restrict__ work, const float* __restrict__ grads,
                   float* __restrict__ m, float* __restrict__ v, const AF8W* __restrict__ ws, int nw,
                   const float* __restrict__ st, float w1, int small, float b2, float w2, float eps) {
    pdl_enter();
    __shared__ __align__(16) unsigned char tile[AF8_TILE][AF8_TILE];
    __shared__ unsigned int wmax[AF8_BLOCK / 32], wunder[AF8_BLOCK / 32];
    int lo = 0, hi = nw - 1; // the last record with tile0 <= blockIdx.x
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (ws[mid].tile0 <= (int)blockIdx.x) lo = mid;
        else hi = mid - 1;
    }
    const AF8W w = ws[lo];
    const int tiles_c = (w.cols + AF8_TILE - 1) / AF8_TILE, b = (int)blockIdx.x - w.tile0;
    const int r0 = (b / tiles_c) * AF8_TILE, c0 = (b % tiles_c) * AF8_TILE;
    const bool upd = st[ST_FINITE] != 0.0f;
    AdamC c = {1.0f, 1.0f, w1, b2, w2, 0.0f, 1.0f, eps, 0, small};
    adam_from_state(c, st);
    const bool dec = w.dec && st[ST_DODECAY] != 0.0f;
    const float s = w.scale[0];

    const int tid = threadIdx.x, tr = tid / 4, tc = (tid % 4) * 16;
    const int r = r0 + tr, col = c0 + tc;
    unsigned int mx = 0, uf = 0;
    if (r < w.rows && col < w.cols) {
        const size_t e = w.off + (size_t)r * w.cols + col;
        unsigned char* qr = w.q + (size_t)r * w.cols + col;
        const int n = w.cols - col < 16 ? w.cols - col : 16;
        if (w.vec_row && n == 16) {
            unsigned int o[4];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const size_t i = e + 4 * j;
                F4 p;
                if (upd) {
                    p = ld4(master + i);
                    const F4 g = ld4(grads + i);
                    F4 mm = ld4(m + i), vv = ld4(v + i);
#pragma unroll
                    for (int k = 0; k < 4; k++) adam_update(p.v[k], g.v[k], mm.v[k], vv.v[k], dec, c);
                    st4(master + i, p);
                    st4(m + i, mm);
                    st4(v + i, vv);
                    st4(work + i, p);
#pragma unroll
                    for (int k = 0; k < 4; k++) p.v[k] = round_to<T>(p.v[k]);
                } else {
                    p = ld4(work + i);
                }
                o[j] = af8_cast4(p, s, mx, uf);
            }
            uint4 q4;
            q4.x = o[0];
            q4.y = o[1];
            q4.z = o[2];
            q4.w = o[3];
            *reinterpret_cast<uint4*>(qr) = q4;
            *reinterpret_cast<uint4*>(&tile[tr][tc]) = q4;
        } else {
            for (int k = 0; k < n; k++) {
                const size_t i = e + k;
                float p;
                if (upd) {
                    float pp = master[i], mm = m[i], vv = v[i];
                    adam_update(pp, grads[i], mm, vv, dec, c);
                    master[i] = pp;
                    m[i] = mm;
                    v[i] = vv;
                    store(work, i, pp);
                    p = round_to<T>(pp);
                } else {
                    p = load(work, i);
                }
                mx = max_u32(mx, abs_bits(p));
                const unsigned char q = (unsigned char)(fp8x2<FP8_E4M3>(p * s, 0.0f) & 0xffu);
                uf += flushed(abs_bits(p), q);
                qr[k] = q;
                tile[tr][tc + k] = q;
            }
        }
    }
    for (int off = 16; off > 0; off >>= 1) mx = max_u32(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    if ((tid & 31) == 0) wmax[tid / 32] = mx;
    __syncthreads();
    if (tid == 0) {
        unsigned int bm = 0;
#pragma unroll
        for (int k = 0; k < AF8_BLOCK / 32; k++) bm = max_u32(bm, wmax[k]);
        if (bm != 0) atomicMax(reinterpret_cast<unsigned int*>(w.amax), bm);
    }
    add_counts(w.amax, wunder, uf, AF8_BLOCK / 32);
    // qt's rows c0.. from column r0 (the barriers above follow the tile's
    // last write).
    tile_t_store(w.qt + (size_t)c0 * w.rows + r0, w.rows, &tile[0][0], AF8_TILE, AF8_TILE,
                 min(AF8_TILE, w.rows - r0), min(AF8_TILE, w.cols - c0), w.vec_col, tid, AF8_BLOCK);
}
