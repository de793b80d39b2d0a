// layernorm.cuh: the row of the layernorm forward, shared by layernorm.cu
// (layernorm_forward, residual_layernorm_forward and their _rf32 forms,
// which store the output in T) and fp8.cu (layernorm_fp8_e4m3 and
// residual_layernorm_fp8_e4m3, which cast it to FP8 in shared memory), so
// that both compute the same mean, rstd and normalised values, bit for
// bit: one function, one order of operations. Include it after
// common.cuh (it uses T, F4 and warp_sum from there).
//
// Arithmetic (layernorm.cu's header has the whole story): fp32, eps 1e-5,
// biased variance about the mean (two passes, no Welford drift); the
// output y = n·w + b with n = rstd·(x - mean), rounded per operation
// (no FMA) like the CPU reference (pkg/device/cpu layerNormFused).
#ifndef DRUTO_LAYERNORM_CUH
#define DRUTO_LAYERNORM_CUH

#define LN_EPS 1e-5f
// LN_G is the float4 groups per lane the fast paths keep in registers: rows
// of up to 32·4·LN_G = 1024 elements.
#define LN_G 8

// LnStore is layernorm.cu's output of a row: y rounded to T at o (the
// row's first element). ln_forward_row calls put4 with the four values of
// columns 4g .. 4g+3 (the vector path) or put with column i's.
struct LnStore {
    T* o;
    __device__ __forceinline__ void put4(int g, const F4& y) { st4(o + 4 * g, y); }
    __device__ __forceinline__ void put(int i, float y) { store(o, i, y); }
};

// ln_forward_row normalises one row with one warp and hands each output
// value to out (an LnStore, or fp8.cu's LnFP8Row). With RES, the row is
// a + b, rounded to R and stored into res first; else it is x (= a).
// Path: the row in registers when vec (C % 4 == 0, aligned rows) and
// C <= 128·LN_G; else three passes over it in L1/L2 (the sums then run
// over columns lane, lane+32, ..., in another order than the vector
// path's groups of 4, so the two paths' bits may differ).
template <typename R, bool RES, typename Out>
__device__ __forceinline__ void ln_forward_row(R* res, Out& out, float* mean, float* rstd, const R* a, const T* b,
                                               const T* weight, const T* bias, int row, int C, int vec) {
    const int lane = threadIdx.x & 31;
    const size_t off = (size_t)row * C;
    const R* x = a + off;
    float m, s;
    if (vec && C <= 128 * LN_G) {
        const int ng = C >> 2;
        F4 xv[LN_G];
        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < LN_G; k++) {
            int g = lane + 32 * k;
            if (g < ng) {
                xv[k] = ld4(x + 4 * g);
                if (RES) {
                    F4 bv = ld4(b + off + 4 * g);
#pragma unroll
                    for (int j = 0; j < 4; j++) xv[k].v[j] = round_to<R>(xv[k].v[j] + bv.v[j]);
                    st4(res + off + 4 * g, xv[k]);
                }
#pragma unroll
                for (int j = 0; j < 4; j++) sum += xv[k].v[j];
            }
        }
        m = warp_sum(sum) / (float)C;
        float sq = 0.0f;
#pragma unroll
        for (int k = 0; k < LN_G; k++) {
            if (lane + 32 * k < ng) {
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    float d = xv[k].v[j] - m;
                    sq += d * d;
                }
            }
        }
        s = 1.0f / sqrtf(warp_sum(sq) / (float)C + LN_EPS);
#pragma unroll
        for (int k = 0; k < LN_G; k++) {
            int g = lane + 32 * k;
            if (g < ng) {
                F4 wv = ld4(weight + 4 * g), bv = ld4(bias + 4 * g), ov;
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    float n = __fmul_rn(s, __fsub_rn(xv[k].v[j], m));
                    ov.v[j] = __fadd_rn(__fmul_rn(n, wv.v[j]), bv.v[j]);
                }
                out.put4(g, ov);
            }
        }
    } else {
        if (RES) {
            for (int i = lane; i < C; i += 32) store(res + off, i, load(a + off, i) + load(b + off, i));
            __syncwarp();
            x = res + off; // normalise what was stored (this lane's own writes, and the warp's after the sync)
        }
        float sum = 0.0f;
        for (int i = lane; i < C; i += 32) sum += load(x, i);
        m = warp_sum(sum) / (float)C;
        float sq = 0.0f;
        for (int i = lane; i < C; i += 32) {
            float d = load(x, i) - m;
            sq += d * d;
        }
        s = 1.0f / sqrtf(warp_sum(sq) / (float)C + LN_EPS);
        for (int i = lane; i < C; i += 32) {
            float n = __fmul_rn(s, __fsub_rn(load(x, i), m));
            out.put(i, __fadd_rn(__fmul_rn(n, load(weight, i)), load(bias, i)));
        }
    }
    if (lane == 0) {
        if (mean != 0) mean[row] = m;
        if (rstd != 0) rstd[row] = s;
    }
}

#endif // DRUTO_LAYERNORM_CUH
