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
// when its segment decays; vec_row: off and cols multiples of 4, master,
// grads, m, v and work aligned to 4 elements and q to 4 bytes (ld4/st4 of
// 4 elements of a row, their 4 codes stored as one word), vec_col: rows a
// multiple of 16 and qt 16-byte aligned (tile_t_store's vec).
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

// af8_cast1 is af8_cast4 of one value: its code.
__device__ __forceinline__ unsigned char af8_cast1(float p, float s, unsigned int& m, unsigned int& u) {
    m = max_u32(m, abs_bits(p));
    const unsigned char q = (unsigned char)(fp8x2<FP8_E4M3>(p * s, 0.0f) & 0xffu);
    u += flushed(abs_bits(p), q);
    return q;
}

// AF8_PASSES: the tile is updated in passes of AF8_BLOCK/16 rows; in each
// a thread takes 4 consecutive elements of one row (16 threads a row of
// the tile, so a warp's 16-byte loads cover two rows' 256 bytes), the next
// pass's loads issued before the current pass is updated (the update's
// ~60 instructions an element, correctly rounded division and square root,
// would otherwise leave the loads' latency bare, as in adamw.cu).
#define AF8_PASSES (AF8_TILE * AF8_TILE / (4 * AF8_BLOCK))

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
    const int nr = min(AF8_TILE, w.rows - r0), nc = min(AF8_TILE, w.cols - c0);
    const bool upd = st[ST_FINITE] != 0.0f;
    AdamC c = {1.0f, 1.0f, w1, b2, w2, 0.0f, 1.0f, eps, 0, small};
    adam_from_state(c, st);
    const bool dec = w.dec && st[ST_DODECAY] != 0.0f;
    const float s = w.scale[0];
    const int tid = threadIdx.x;
    unsigned int mx = 0, uf = 0;

    if (w.vec_row) {
        // pass j: row j·(AF8_BLOCK/16) + tid/16 of the tile, columns 4·(tid%16) ..
        const int tr = tid / 16, tc = (tid % 16) * 4;
        const bool colok = tc < nc; // nc is a multiple of 4 here
        const int rs = AF8_BLOCK / 16; // rows a pass
        const size_t base = w.off + (size_t)(r0 + tr) * w.cols + c0 + tc; // pass 0's first element
        F4 p, g, mm, vv;
        if (colok && tr < nr) {
            const size_t i = base;
            if (upd) p = ld4(master + i), g = ld4(grads + i), mm = ld4(m + i), vv = ld4(v + i);
            else p = ld4(work + i);
        }
#pragma unroll
        for (int j = 0; j < AF8_PASSES; j++) {
            F4 pn, gn, mn, vn;
            if (j + 1 < AF8_PASSES && colok && (j + 1) * rs + tr < nr) { // another row: no overlap with this pass's stores
                const size_t i = base + (size_t)(j + 1) * rs * w.cols;
                if (upd) pn = ld4(master + i), gn = ld4(grads + i), mn = ld4(m + i), vn = ld4(v + i);
                else pn = ld4(work + i);
            }
            if (colok && j * rs + tr < nr) {
                const size_t i = base + (size_t)j * rs * w.cols;
                if (upd) {
#pragma unroll
                    for (int k = 0; k < 4; k++) adam_update(p.v[k], g.v[k], mm.v[k], vv.v[k], dec, c);
                    st4(master + i, p);
                    st4(m + i, mm);
                    st4(v + i, vv);
                    st4(work + i, p);
#pragma unroll
                    for (int k = 0; k < 4; k++) p.v[k] = round_to<T>(p.v[k]);
                }
                const unsigned int q4 = af8_cast4(p, s, mx, uf);
                const int r = j * rs + tr;
                *reinterpret_cast<unsigned int*>(w.q + (size_t)(r0 + r) * w.cols + c0 + tc) = q4;
                *reinterpret_cast<unsigned int*>(&tile[r][tc]) = q4;
            }
            p = pn, g = gn, mm = mn, vv = vn;
        }
    } else {
        // one element at a time, consecutive threads on consecutive columns
        for (int e = tid; e < AF8_TILE * AF8_TILE; e += AF8_BLOCK) {
            const int r = e / AF8_TILE, cc = e % AF8_TILE;
            if (r >= nr || cc >= nc) continue;
            const size_t i = w.off + (size_t)(r0 + r) * w.cols + c0 + cc;
            float p;
            if (upd) {
                float pp = master[i], mo = m[i], vo = v[i];
                adam_update(pp, grads[i], mo, vo, dec, c);
                master[i] = pp;
                m[i] = mo;
                v[i] = vo;
                store(work, i, pp);
                p = round_to<T>(pp);
            } else {
                p = load(work, i);
            }
            const unsigned char q = af8_cast1(p, s, mx, uf);
            w.q[(size_t)(r0 + r) * w.cols + c0 + cc] = q;
            tile[r][cc] = q;
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
    tile_t_store(w.qt + (size_t)c0 * w.rows + r0, w.rows, &tile[0][0], AF8_TILE, AF8_TILE, nr, nc, w.vec_col, tid, AF8_BLOCK);
}
