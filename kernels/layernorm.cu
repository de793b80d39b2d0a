// layernorm.cu: layer normalisation forward and backward, fused and
// decomposed, and the residual add (pkg/device/gpu/layernorm.go).
//
// druto:kernel layernorm_forward layernorm_forward_rf32
// druto:kernel residual_layernorm_forward residual_layernorm_forward_rf32
// druto:kernel layernorm_backward layernorm_backward_rf32 layernorm_reduce layernorm_backward_tma_rf32
// druto:kernel layernorm_forward_rf32_c128 residual_layernorm_forward_rf32_c128 layernorm_backward_rf32_c128 layernorm_forward_rf32_c256 residual_layernorm_forward_rf32_c256 layernorm_backward_rf32_c256 layernorm_forward_rf32_c512 residual_layernorm_forward_rf32_c512 layernorm_backward_rf32_c512 layernorm_forward_rf32_c768 residual_layernorm_forward_rf32_c768 layernorm_backward_rf32_c768 layernorm_forward_rf32_c1024 residual_layernorm_forward_rf32_c1024
// druto:kernel add add_rf32
// druto:kernel layernorm_mean layernorm_mean_rf32 layernorm_rstd layernorm_rstd_rf32
// druto:kernel layernorm_normalise layernorm_normalise_rf32 layernorm_affine
// druto:kernel layernorm_colsum layernorm_colsum_f32 layernorm_mul_dout layernorm_dnorm layernorm_mul
// druto:kernel layernorm_dinp layernorm_dinp_rf32
// druto:pdl layernorm_forward layernorm_forward_rf32 residual_layernorm_forward residual_layernorm_forward_rf32 layernorm_backward layernorm_backward_rf32 layernorm_reduce add add_rf32 layernorm_backward_tma_rf32
// druto:pdl layernorm_forward_rf32_c128 residual_layernorm_forward_rf32_c128 layernorm_backward_rf32_c128 layernorm_forward_rf32_c256 residual_layernorm_forward_rf32_c256 layernorm_backward_rf32_c256 layernorm_forward_rf32_c512 residual_layernorm_forward_rf32_c512 layernorm_backward_rf32_c512 layernorm_forward_rf32_c768 residual_layernorm_forward_rf32_c768 layernorm_backward_rf32_c768 layernorm_forward_rf32_c1024 residual_layernorm_forward_rf32_c1024
// druto:dtypes f32 bf16 f16
//
// Types: out, weight, bias and dout are T (the policy's working type). The
// row input, the residual sum and dinp are R: T in the plain kernels, fp32
// in the _rf32 ones, since the precision policy keeps the residual stream
// in fp32 (pkg/amp). mean, rstd, dweight and dbias are fp32 (statistics and
// parameter gradients). All arithmetic is fp32.
//
// Fused forms (one visit per row, eps 1e-5, biased variance):
//   layernorm_forward: out = (x - mean)·rstd·weight + bias, also storing
//     mean and rstd (either may be null). One warp per row; when the row
//     fits (C % 4 == 0, C <= 1024, aligned rows: the vec flag) it is held
//     in registers as float4 groups and read from memory once, the mean and
//     the variance about it computed from the registers (two passes, no
//     Welford drift); otherwise three passes over the row in L1/L2.
//     Rounded like the CPU reference (pkg/device/cpu layerNormFused):
//     n = rstd·(x-mean), out = n·w + b, no FMA. The row is ln_forward_row
//     of layernorm.cuh, which fp8.cu's FP8 producers (layernorm_fp8_e4m3,
//     residual_layernorm_fp8_e4m3) share, so their statistics and values
//     are these bits.
//   residual_layernorm_forward: res = a + b rounded to R, stored, and the
//     rounded sum normalised as above, in the same row visit.
//     (A persistent-grid variant with the next row's loads in flight was
//     no faster, and is gone.)
//   layernorm_backward: per row, the two row means of dnorm = w·dout and
//     dnorm·n, then dinp += rstd·(dnorm - mean(dnorm) - n·mean(dnorm·n)),
//     and the row's dweight (n·dout) and dbias (dout) shares summed into
//     per-block partials (gridDim.x, 2C) fp32. Fast path (vec, C <= 1024):
//     a warp per row, the row's x, dout and dinp loaded in one go into
//     registers, the sums in per-warp shared-memory arrays that each lane
//     owns its columns of, added in warp order at the end. General path: a
//     block per row, each column owned by one thread, summed straight into
//     the block's partial. layernorm_reduce then adds the partials in block
//     order into dweight and dbias. No atomics: for a given grid the bits
//     do not change between runs. On sm_90, layernorm_backward_tma_rf32
//     (below) does the same with the rows brought into shared memory by
//     the bulk-copy engine. (A variant with the next row's loads in
//     flight was slower, and is gone.)
//
// Fixed-width forms (layernorm_forward_rf32_cC, residual_layernorm_forward_rf32_cC,
// layernorm_backward_rf32_cC; the section "fixed-width forms" below): the same
// arithmetic for fp32 rows of one C known at compile time, every load of a
// row issued first; the launchers prefer them where C is one of their widths.
//
// Decomposed forms (what plain PyTorch runs, each a full pass):
//   forward: layernorm_mean, layernorm_rstd (variance about the fp32 mean),
//     layernorm_normalise into an fp32 (N,C) xhat, layernorm_affine; the
//     residual variant runs add first.
//   backward (the CPU's nine passes): layernorm_colsum (dbias partials,
//     reduced by layernorm_reduce), layernorm_normalise (xhat),
//     layernorm_mul_dout (dout·xhat), layernorm_colsum_f32 (dweight
//     partials), layernorm_dnorm (dout·weight), layernorm_mean_rf32 (m1),
//     layernorm_mul (dnorm·xhat), layernorm_mean_rf32 (m2), layernorm_dinp.
// add: out = a + b elementwise (out and a of type R, b of type T).

#include "common.cuh"
#include "layernorm.cuh"

// Block sizes (threads), read by the launchers too (kernels/blocks.go).
// druto:block LN_ROW_BLOCK layernorm_forward layernorm_forward_rf32 residual_layernorm_forward residual_layernorm_forward_rf32 layernorm_forward_rf32_c128 residual_layernorm_forward_rf32_c128 layernorm_forward_rf32_c256 residual_layernorm_forward_rf32_c256 layernorm_forward_rf32_c512 residual_layernorm_forward_rf32_c512 layernorm_forward_rf32_c768 residual_layernorm_forward_rf32_c768 layernorm_forward_rf32_c1024 residual_layernorm_forward_rf32_c1024 layernorm_mean layernorm_mean_rf32 layernorm_rstd layernorm_rstd_rf32
// 128 threads (4 rows a block, up to 16 blocks an SM): at GPT-2's
// 16384 x 768 on the H200 as fast as 256 or a little faster, 512 slower.
#define LN_ROW_BLOCK 128
// druto:block LN_BWD_BLOCK layernorm_backward layernorm_backward_rf32
#define LN_BWD_BLOCK 128
// druto:block LN_REDUCE_BLOCK layernorm_reduce
#define LN_REDUCE_BLOCK 1024
// druto:block LN_COLSUM_BLOCK layernorm_colsum layernorm_colsum_f32
#define LN_COLSUM_BLOCK 128
// druto:block LN_EW_BLOCK add add_rf32 layernorm_normalise layernorm_normalise_rf32 layernorm_affine layernorm_mul_dout layernorm_dnorm layernorm_mul layernorm_dinp layernorm_dinp_rf32
#define LN_EW_BLOCK 256

// ---- forward ------------------------------------------------------------

// out (N,C) T, mean (N) or null, rstd (N) or null, inp (N,C) R, weight (C), bias (C); a warp per row
template <typename R>
__device__ __forceinline__ void ln_forward(T* out, float* mean, float* rstd, const R* inp, const T* weight,
                                           const T* bias, int N, int C, int vec) {
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= N) return; // the whole warp leaves together
    LnStore o = {out + (size_t)row * C};
    ln_forward_row<R, false>((R*)0, o, mean, rstd, inp, (const T*)0, weight, bias, row, C, vec);
}

extern "C" __global__ void layernorm_forward(T* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd,
                                             const T* __restrict__ inp, const T* __restrict__ weight,
                                             const T* __restrict__ bias, int N, int C, int vec) {
    pdl_enter();
    ln_forward<T>(out, mean, rstd, inp, weight, bias, N, C, vec);
}

extern "C" __global__ void layernorm_forward_rf32(T* __restrict__ out, float* __restrict__ mean,
                                                  float* __restrict__ rstd, const float* __restrict__ inp,
                                                  const T* __restrict__ weight, const T* __restrict__ bias, int N,
                                                  int C, int vec) {
    pdl_enter();
    ln_forward<float>(out, mean, rstd, inp, weight, bias, N, C, vec);
}

// res (N,C) R, out (N,C) T, mean (N), rstd (N), a (N,C) R, b (N,C) T, weight (C), bias (C)
template <typename R>
__device__ __forceinline__ void ln_residual_forward(R* res, T* out, float* mean, float* rstd, const R* a, const T* b,
                                                    const T* weight, const T* bias, int N, int C, int vec) {
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= N) return;
    LnStore o = {out + (size_t)row * C};
    ln_forward_row<R, true>(res, o, mean, rstd, a, b, weight, bias, row, C, vec);
}

// res is written and (on the general path) read back, so it is not __restrict__.
extern "C" __global__ void residual_layernorm_forward(T* res, T* __restrict__ out, float* __restrict__ mean,
                                                      float* __restrict__ rstd, const T* a, const T* __restrict__ b,
                                                      const T* __restrict__ weight, const T* __restrict__ bias,
                                                      int N, int C, int vec) {
    pdl_enter();
    ln_residual_forward<T>(res, out, mean, rstd, a, b, weight, bias, N, C, vec);
}

extern "C" __global__ void residual_layernorm_forward_rf32(float* res, T* __restrict__ out, float* __restrict__ mean,
                                                           float* __restrict__ rstd, const float* a,
                                                           const T* __restrict__ b, const T* __restrict__ weight,
                                                           const T* __restrict__ bias, int N, int C, int vec) {
    pdl_enter();
    ln_residual_forward<float>(res, out, mean, rstd, a, b, weight, bias, N, C, vec);
}

// Raw4 is four T elements as loaded, not yet widened: dout is kept so
// between the two visits of a row (half the registers for 16-bit types).
#if DTYPE == DRUTO_F32
typedef float4 Raw4;
__device__ __forceinline__ Raw4 ldraw4(const T* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float raw4_at(const Raw4& r, int j) { return j == 0 ? r.x : j == 1 ? r.y : j == 2 ? r.z : r.w; }
#else
typedef uint2 Raw4;
__device__ __forceinline__ Raw4 ldraw4(const T* p) { return *reinterpret_cast<const uint2*>(p); }
__device__ __forceinline__ float raw4_at(const Raw4& r, int j) {
    unsigned int w = j < 2 ? r.x : r.y;
    T h;
    h.bits = (unsigned short)((j & 1) ? (w >> 16) : (w & 0xffffu));
    return to_f32(h);
}
#endif

// ---- fixed-width forms: rows of fp32, C = 128·G --------------------------
//
// The kernels above take C at run time and keep LN_G = 8 float4 groups a
// lane in registers, of which a row of C uses C/128. These are the same
// arithmetic for one C known at compile time (every lane exactly G groups,
// no predicates), with the loads of a row issued before anything that waits
// on them:
//   layernorm_forward_rf32_cC: weight and bias loaded with the row, not
//     after the sums (where each group's load waited on the store before it),
//     the bits unchanged;
//   residual_layernorm_forward_rf32_cC: also every load of a and b before
//     the first store of res, the bits unchanged;
//   layernorm_backward_rf32_cC: layernorm_backward_rf32's warp per row with
//     the row's x, dout and dinp in registers, blocks of LN_CBWD_BLOCK
//     threads (one an SM at C = 768: 128 registers a thread), the warps'
//     dweight/dbias sums in dynamic shared memory (LN_CBWD_BLOCK/32 · 2C
//     floats); a persistent grid, layernorm_reduce after: faster than the
//     TMA kernel at these widths (dinp bit-identical; dweight and dbias
//     summed over other partials, so rounded differently).
// The launchers use them where the rows are fp32, aligned, and C is one of
// lnCWidths; for DTYPE f32 they serve rows of T = fp32 as well.

template <int G>
__device__ __forceinline__ void lnc_forward(float* res, T* out, float* mean, float* rstd, const float* a, const T* b,
                                            const T* weight, const T* bias, int N, bool RES) {
    const int C = 128 * G; // a constant expression (NVRTC compiles without C++11)
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= N) return;
    const size_t off = (size_t)row * C;
    F4 xv[G];
    Raw4 bq[G], wr[G], br[G];
#pragma unroll
    for (int k = 0; k < G; k++) {
        const int g = lane + 32 * k;
        xv[k] = ld4(a + off + 4 * g);
        if (RES) bq[k] = ldraw4(b + off + 4 * g);
    }
#pragma unroll
    for (int k = 0; k < G; k++) {
        wr[k] = ldraw4(weight + 4 * (lane + 32 * k));
        br[k] = ldraw4(bias + 4 * (lane + 32 * k));
    }
    if (RES) {
#pragma unroll
        for (int k = 0; k < G; k++) {
#pragma unroll
            for (int j = 0; j < 4; j++) xv[k].v[j] = round_to<float>(xv[k].v[j] + raw4_at(bq[k], j));
            st4(res + off + 4 * (lane + 32 * k), xv[k]);
        }
    }
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < G; k++)
#pragma unroll
        for (int j = 0; j < 4; j++) sum += xv[k].v[j];
    const float m = warp_sum(sum) / (float)C;
    float sq = 0.0f;
#pragma unroll
    for (int k = 0; k < G; k++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            float d = xv[k].v[j] - m;
            sq += d * d;
        }
    const float s = 1.0f / sqrtf(warp_sum(sq) / (float)C + LN_EPS);
#pragma unroll
    for (int k = 0; k < G; k++) {
        F4 ov;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            float n = __fmul_rn(s, __fsub_rn(xv[k].v[j], m));
            ov.v[j] = __fadd_rn(__fmul_rn(n, raw4_at(wr[k], j)), raw4_at(br[k], j));
        }
        st4(out + off + 4 * (lane + 32 * k), ov);
    }
    if (lane == 0) {
        if (mean != 0) mean[row] = m;
        if (rstd != 0) rstd[row] = s;
    }
}

// druto:block LN_CBWD_BLOCK layernorm_backward_rf32_c128 layernorm_backward_rf32_c256 layernorm_backward_rf32_c512 layernorm_backward_rf32_c768
#define LN_CBWD_BLOCK 512
#define LN_CBWD_WARPS (LN_CBWD_BLOCK / 32)

extern __shared__ __align__(16) float lnc_acc[]; // LN_CBWD_WARPS · 2C floats

template <int G>
__device__ __forceinline__ void lnc_backward(float* __restrict__ dinp, float* __restrict__ part,
                                             const T* __restrict__ dout, const float* __restrict__ inp,
                                             const T* __restrict__ weight, const float* __restrict__ mean,
                                             const float* __restrict__ rstd, int N) {
    const int C = 128 * G; // a constant expression (NVRTC compiles without C++11)
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float* acc = lnc_acc + warp * 2 * C;
#pragma unroll
    for (int k = 0; k < G; k++) {
        const int g = lane + 32 * k;
        *reinterpret_cast<float4*>(acc + 4 * g) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        *reinterpret_cast<float4*>(acc + C + 4 * g) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    const int step = gridDim.x * LN_CBWD_WARPS;
    for (int row = blockIdx.x * LN_CBWD_WARPS + warp; row < N; row += step) {
        const size_t off = (size_t)row * C;
        const float m = mean[row], s = rstd[row];
        F4 x[G], di[G];
        Raw4 gv[G];
#pragma unroll
        for (int k = 0; k < G; k++) {
            const int g = lane + 32 * k;
            x[k] = ld4(inp + off + 4 * g);
            gv[k] = ldraw4(dout + off + 4 * g);
            di[k] = ld4(dinp + off + 4 * g);
        }
        float sdn = 0.0f, sdnn = 0.0f;
#pragma unroll
        for (int k = 0; k < G; k++) {
            F4 wv = ld4(weight + 4 * (lane + 32 * k));
#pragma unroll
            for (int j = 0; j < 4; j++) {
                float n = s * (x[k].v[j] - m), dn = wv.v[j] * raw4_at(gv[k], j);
                sdn += dn;
                sdnn += dn * n;
            }
        }
        const float mdn = warp_sum(sdn) / (float)C, mdnn = warp_sum(sdnn) / (float)C;
#pragma unroll
        for (int k = 0; k < G; k++) {
            const int g = lane + 32 * k;
            F4 wv = ld4(weight + 4 * g);
            float4 aw = *reinterpret_cast<float4*>(acc + 4 * g);
            float4 ab = *reinterpret_cast<float4*>(acc + C + 4 * g);
            float nv[4], gg[4];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                gg[j] = raw4_at(gv[k], j);
                float n = s * (x[k].v[j] - m), dn = wv.v[j] * gg[j];
                nv[j] = n * gg[j];
                di[k].v[j] = di[k].v[j] + s * (dn - mdn - n * mdnn);
            }
            aw.x += nv[0];
            aw.y += nv[1];
            aw.z += nv[2];
            aw.w += nv[3];
            ab.x += gg[0];
            ab.y += gg[1];
            ab.z += gg[2];
            ab.w += gg[3];
            *reinterpret_cast<float4*>(acc + 4 * g) = aw;
            *reinterpret_cast<float4*>(acc + C + 4 * g) = ab;
            st4(dinp + off + 4 * g, di[k]);
        }
    }
    __syncthreads();
    // The block's partial: the warps' sums added in warp order.
    float* pb = part + (size_t)blockIdx.x * 2 * C;
    for (int c = threadIdx.x; c < 2 * C; c += blockDim.x) {
        float t = lnc_acc[c];
        for (int w = 1; w < LN_CBWD_WARPS; w++) t += lnc_acc[w * 2 * C + c];
        pb[c] = t;
    }
}

// The kernels, C = 128·G. The widths (pkg/device/gpu/layernorm.go:
// lnCWidths, which TestLNWidths checks against these names): tiny, small,
// 512, GPT-2 124M and (forward only: at 1024 the backward's registers spill
// at LN_CBWD_BLOCK threads, and C = 1024 keeps the TMA kernel) 350M.

extern "C" __global__ void layernorm_forward_rf32_c128(T* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd,
                                                     const float* __restrict__ inp, const T* __restrict__ weight,
                                                     const T* __restrict__ bias, int N) {
    pdl_enter();
    lnc_forward<1>((float*)0, out, mean, rstd, inp, (const T*)0, weight, bias, N, false);
}
extern "C" __global__ void residual_layernorm_forward_rf32_c128(float* res, T* __restrict__ out, float* __restrict__ mean,
                                                              float* __restrict__ rstd, const float* a,
                                                              const T* __restrict__ b, const T* __restrict__ weight,
                                                              const T* __restrict__ bias, int N) {
    pdl_enter();
    lnc_forward<1>(res, out, mean, rstd, a, b, weight, bias, N, true);
}

extern "C" __global__ void __launch_bounds__(LN_CBWD_BLOCK) layernorm_backward_rf32_c128(
    float* __restrict__ dinp, float* __restrict__ part, const T* __restrict__ dout, const float* __restrict__ inp,
    const T* __restrict__ weight, const float* __restrict__ mean, const float* __restrict__ rstd, int N) {
    pdl_enter();
    lnc_backward<1>(dinp, part, dout, inp, weight, mean, rstd, N);
}

extern "C" __global__ void layernorm_forward_rf32_c256(T* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd,
                                                     const float* __restrict__ inp, const T* __restrict__ weight,
                                                     const T* __restrict__ bias, int N) {
    pdl_enter();
    lnc_forward<2>((float*)0, out, mean, rstd, inp, (const T*)0, weight, bias, N, false);
}
extern "C" __global__ void residual_layernorm_forward_rf32_c256(float* res, T* __restrict__ out, float* __restrict__ mean,
                                                              float* __restrict__ rstd, const float* a,
                                                              const T* __restrict__ b, const T* __restrict__ weight,
                                                              const T* __restrict__ bias, int N) {
    pdl_enter();
    lnc_forward<2>(res, out, mean, rstd, a, b, weight, bias, N, true);
}

extern "C" __global__ void __launch_bounds__(LN_CBWD_BLOCK) layernorm_backward_rf32_c256(
    float* __restrict__ dinp, float* __restrict__ part, const T* __restrict__ dout, const float* __restrict__ inp,
    const T* __restrict__ weight, const float* __restrict__ mean, const float* __restrict__ rstd, int N) {
    pdl_enter();
    lnc_backward<2>(dinp, part, dout, inp, weight, mean, rstd, N);
}

extern "C" __global__ void layernorm_forward_rf32_c512(T* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd,
                                                     const float* __restrict__ inp, const T* __restrict__ weight,
                                                     const T* __restrict__ bias, int N) {
    pdl_enter();
    lnc_forward<4>((float*)0, out, mean, rstd, inp, (const T*)0, weight, bias, N, false);
}
extern "C" __global__ void residual_layernorm_forward_rf32_c512(float* res, T* __restrict__ out, float* __restrict__ mean,
                                                              float* __restrict__ rstd, const float* a,
                                                              const T* __restrict__ b, const T* __restrict__ weight,
                                                              const T* __restrict__ bias, int N) {
    pdl_enter();
    lnc_forward<4>(res, out, mean, rstd, a, b, weight, bias, N, true);
}

extern "C" __global__ void __launch_bounds__(LN_CBWD_BLOCK) layernorm_backward_rf32_c512(
    float* __restrict__ dinp, float* __restrict__ part, const T* __restrict__ dout, const float* __restrict__ inp,
    const T* __restrict__ weight, const float* __restrict__ mean, const float* __restrict__ rstd, int N) {
    pdl_enter();
    lnc_backward<4>(dinp, part, dout, inp, weight, mean, rstd, N);
}

extern "C" __global__ void layernorm_forward_rf32_c768(T* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd,
                                                     const float* __restrict__ inp, const T* __restrict__ weight,
                                                     const T* __restrict__ bias, int N) {
    pdl_enter();
    lnc_forward<6>((float*)0, out, mean, rstd, inp, (const T*)0, weight, bias, N, false);
}
extern "C" __global__ void residual_layernorm_forward_rf32_c768(float* res, T* __restrict__ out, float* __restrict__ mean,
                                                              float* __restrict__ rstd, const float* a,
                                                              const T* __restrict__ b, const T* __restrict__ weight,
                                                              const T* __restrict__ bias, int N) {
    pdl_enter();
    lnc_forward<6>(res, out, mean, rstd, a, b, weight, bias, N, true);
}

extern "C" __global__ void __launch_bounds__(LN_CBWD_BLOCK) layernorm_backward_rf32_c768(
    float* __restrict__ dinp, float* __restrict__ part, const T* __restrict__ dout, const float* __restrict__ inp,
    const T* __restrict__ weight, const float* __restrict__ mean, const float* __restrict__ rstd, int N) {
    pdl_enter();
    lnc_backward<6>(dinp, part, dout, inp, weight, mean, rstd, N);
}

extern "C" __global__ void layernorm_forward_rf32_c1024(T* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd,
                                                     const float* __restrict__ inp, const T* __restrict__ weight,
                                                     const T* __restrict__ bias, int N) {
    pdl_enter();
    lnc_forward<8>((float*)0, out, mean, rstd, inp, (const T*)0, weight, bias, N, false);
}
extern "C" __global__ void residual_layernorm_forward_rf32_c1024(float* res, T* __restrict__ out, float* __restrict__ mean,
                                                              float* __restrict__ rstd, const float* a,
                                                              const T* __restrict__ b, const T* __restrict__ weight,
                                                              const T* __restrict__ bias, int N) {
    pdl_enter();
    lnc_forward<8>(res, out, mean, rstd, a, b, weight, bias, N, true);
}

// ---- backward -----------------------------------------------------------

// block_sum2 returns the sums of a and b over the whole block (blockDim.x a
// multiple of 32, at most 1024) in a fixed order; every thread gets them.
// sh holds 64 floats.
__device__ __forceinline__ void block_sum2(float& a, float& b, float* sh) {
    a = warp_sum(a);
    b = warp_sum(b);
    const int w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads(); // earlier readers of sh are done
    if ((threadIdx.x & 31) == 0) {
        sh[w] = a;
        sh[32 + w] = b;
    }
    __syncthreads();
    a = 0.0f;
    b = 0.0f;
    for (int i = 0; i < nw; i++) {
        a += sh[i];
        b += sh[32 + i];
    }
}

// LN_BACK_WARPS is the warps of a layernorm_backward block.
#define LN_BACK_WARPS (LN_BWD_BLOCK / 32)

// part (gridDim.x, 2C) fp32 partial [dweight | dbias] per block; dinp (N,C) R accumulated;
// dout (N,C) T, inp (N,C) R, weight (C) T, mean (N), rstd (N). blockDim.x = 32·LN_BACK_WARPS.
template <typename R>
__device__ __forceinline__ void ln_backward(R* dinp, float* part, const T* dout, const R* inp, const T* weight,
                                            const float* mean, const float* rstd, int N, int C, int vec) {
    // Each warp's private [dweight | dbias] sums (fast path); the general
    // path uses the first 64 floats for block_sum2.
    // float4 storage: the sums are read and written as float4 (16-byte aligned)
    __shared__ float4 sacc4[LN_BACK_WARPS * 2 * 128 * LN_G / 4];
    float* sacc = reinterpret_cast<float*>(sacc4);
    float* pb = part + (size_t)blockIdx.x * 2 * C;
    if (vec && C <= 128 * LN_G) {
        // A warp per row; lane l owns the float4 groups l, l+32, ... of every
        // row and the same columns of its warp's sums in shared memory. The
        // row's x, dout and dinp are loaded together (one trip to memory per
        // row) and kept in registers for the second visit.
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        const int ng = C >> 2;
        float* acc = sacc + warp * 2 * C;
#pragma unroll
        for (int k = 0; k < LN_G; k++) {
            int g = lane + 32 * k;
            if (g < ng) {
#pragma unroll
                for (int j = 0; j < 4; j++) acc[4 * g + j] = acc[C + 4 * g + j] = 0.0f;
            }
        }
        const int step = gridDim.x * LN_BACK_WARPS;
        for (int row = blockIdx.x * LN_BACK_WARPS + warp; row < N; row += step) {
            const size_t off = (size_t)row * C;
            const float m = mean[row], s = rstd[row];
            F4 x[LN_G], di[LN_G];
            Raw4 gv[LN_G];
#pragma unroll
            for (int k = 0; k < LN_G; k++) {
                int g = lane + 32 * k;
                if (g < ng) {
                    x[k] = ld4(inp + off + 4 * g);
                    gv[k] = ldraw4(dout + off + 4 * g);
                    di[k] = ld4(dinp + off + 4 * g);
                }
            }
            float sdn = 0.0f, sdnn = 0.0f;
#pragma unroll
            for (int k = 0; k < LN_G; k++) {
                int g = lane + 32 * k;
                if (g < ng) {
                    F4 wv = ld4(weight + 4 * g);
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        float n = s * (x[k].v[j] - m), dn = wv.v[j] * raw4_at(gv[k], j);
                        sdn += dn;
                        sdnn += dn * n;
                    }
                }
            }
            const float mdn = warp_sum(sdn) / (float)C, mdnn = warp_sum(sdnn) / (float)C;
#pragma unroll
            for (int k = 0; k < LN_G; k++) {
                int g = lane + 32 * k;
                if (g < ng) {
                    F4 wv = ld4(weight + 4 * g);
                    float4 aw = *reinterpret_cast<float4*>(acc + 4 * g);
                    float4 ab = *reinterpret_cast<float4*>(acc + C + 4 * g);
                    float nv[4], gg[4];
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        gg[j] = raw4_at(gv[k], j);
                        float n = s * (x[k].v[j] - m), dn = wv.v[j] * gg[j];
                        nv[j] = n * gg[j];
                        di[k].v[j] = di[k].v[j] + s * (dn - mdn - n * mdnn);
                    }
                    aw.x += nv[0];
                    aw.y += nv[1];
                    aw.z += nv[2];
                    aw.w += nv[3];
                    ab.x += gg[0];
                    ab.y += gg[1];
                    ab.z += gg[2];
                    ab.w += gg[3];
                    *reinterpret_cast<float4*>(acc + 4 * g) = aw;
                    *reinterpret_cast<float4*>(acc + C + 4 * g) = ab;
                    st4(dinp + off + 4 * g, di[k]);
                }
            }
        }
        __syncthreads();
        // The block's partial: the warps' sums added in warp order.
        for (int c = threadIdx.x; c < 2 * C; c += blockDim.x) {
            float t = sacc[c];
            for (int w = 1; w < LN_BACK_WARPS; w++) t += sacc[w * 2 * C + c];
            pb[c] = t;
        }
    } else {
        // A block per row; thread t owns columns t, t+blockDim.x, ... and
        // accumulates their partials straight in pb (no other thread touches them).
        float* sh = sacc;
        for (int c = threadIdx.x; c < C; c += blockDim.x) pb[c] = pb[C + c] = 0.0f;
        for (int row = blockIdx.x; row < N; row += gridDim.x) {
            const size_t off = (size_t)row * C;
            const float m = mean[row], s = rstd[row];
            float sdn = 0.0f, sdnn = 0.0f;
            for (int c = threadIdx.x; c < C; c += blockDim.x) {
                float n = s * (load(inp + off, c) - m), dn = load(weight, c) * load(dout + off, c);
                sdn += dn;
                sdnn += dn * n;
            }
            block_sum2(sdn, sdnn, sh);
            const float mdn = sdn / (float)C, mdnn = sdnn / (float)C;
            for (int c = threadIdx.x; c < C; c += blockDim.x) {
                float g = load(dout + off, c);
                float n = s * (load(inp + off, c) - m), dn = load(weight, c) * g;
                pb[c] += n * g;
                pb[C + c] += g;
                store(dinp + off, c, load(dinp + off, c) + s * (dn - mdn - n * mdnn));
            }
        }
    }
}

extern "C" __global__ void layernorm_backward(T* __restrict__ dinp, float* __restrict__ part,
                                              const T* __restrict__ dout, const T* __restrict__ inp,
                                              const T* __restrict__ weight, const float* __restrict__ mean,
                                              const float* __restrict__ rstd, int N, int C, int vec) {
    pdl_enter();
    ln_backward<T>(dinp, part, dout, inp, weight, mean, rstd, N, C, vec);
}

extern "C" __global__ void layernorm_backward_rf32(float* __restrict__ dinp, float* __restrict__ part,
                                                   const T* __restrict__ dout, const float* __restrict__ inp,
                                                   const T* __restrict__ weight, const float* __restrict__ mean,
                                                   const float* __restrict__ rstd, int N, int C, int vec) {
    pdl_enter();
    ln_backward<float>(dinp, part, dout, inp, weight, mean, rstd, N, C, vec);
}

// ---- layernorm_backward_tma_rf32: rows brought into shared memory by TMA
//
// layernorm_backward_rf32 holds each row's x, dout and dinp in registers
// (126 of them, 16 warps an SM): the bytes an SM has in flight are bounded
// by its registers and L1, and Nsight Compute found it latency-bound at
// about 85% of the copy bandwidth inside the kernel. Here Hopper's
// bulk-copy engine (common.cuh, tma_load) brings chunks of LN_TMA_ROWS
// consecutive rows (x, dinp and dout: three copies, one mbarrier) into a
// ring of `stages` shared-memory buffers, stages - 1 chunks ahead of the
// one the block works on; warp w takes row w of a chunk, each lane the
// same float4 groups as layernorm_backward_rf32 (l, l + 32, ...), the row's
// two sums in the same order (dinp is bit-identical to it), and keeps its
// columns' dweight and dbias sums in registers across its rows. The block
// then adds its warps' sums in warp order into part[blockIdx.x] (the same
// layout, so layernorm_reduce adds them). One block an SM, a persistent
// grid; block b of G takes the contiguous rows [b·N/G, (b+1)·N/G) in
// chunks (the blocks' shares differ by at most a row), and loads each
// row's mean and rstd a chunk ahead.
//
// Needs: DRUTO_HAVE_TMA (sm_90, NVRTC 12+: the launcher checks), C % 8 == 0
// and C <= 128·LN_G, 16-byte aligned rows; dynamic shared memory
// stages · LN_TMA_ROWS · C · (8 + sizeof(T)) bytes.

// druto:block LN_TMA_BLOCK layernorm_backward_tma_rf32
#define LN_TMA_BLOCK 256
#define LN_TMA_ROWS (LN_TMA_BLOCK / 32)
#define LN_TMA_MAX_STAGES 4

#ifdef DRUTO_HAVE_TMA
extern __shared__ __align__(128) unsigned char ln_tma_rows[];
#endif

extern "C" __global__ void __launch_bounds__(LN_TMA_BLOCK, 1) layernorm_backward_tma_rf32(
    float* __restrict__ dinp, float* __restrict__ part, const T* __restrict__ dout, const float* __restrict__ inp,
    const T* __restrict__ weight, const float* __restrict__ mean, const float* __restrict__ rstd, int N, int C, int stages) {
    pdl_enter();
#ifdef DRUTO_HAVE_TMA
    __shared__ __align__(8) unsigned long long bars[LN_TMA_MAX_STAGES];
    stages = max(1, min(stages, LN_TMA_MAX_STAGES)); // the launcher's (lnTMAMaxStages); fewer fit its memory too
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int ng = C >> 2;
    // this block's rows [lo, hi): N split evenly over the grid, so that every
    // block ends within a row of the others (no tail of whole chunks)
    const int lo = (int)((long long)blockIdx.x * N / gridDim.x), hi = (int)((long long)(blockIdx.x + 1) * N / gridDim.x);
    const int nchunks = (hi - lo + LN_TMA_ROWS - 1) / LN_TMA_ROWS;
    // a stage: [x: ROWS·C f32][dinp: ROWS·C f32][dout: ROWS·C T]
    const unsigned xBytes = LN_TMA_ROWS * C * 4, stageBytes = 2 * xBytes + LN_TMA_ROWS * C * (unsigned)sizeof(T);
    const unsigned rows0 = (unsigned)__cvta_generic_to_shared(ln_tma_rows);
    const unsigned bar0 = (unsigned)__cvta_generic_to_shared(&bars[0]);
    if (tid == 0) {
        for (int s = 0; s < stages; s++) tma_bar_init(bar0 + 8 * s);
        tma_bar_fence();
    }
    __syncthreads();
    // issue brings chunk j of this block (if any) into stage j % stages.
    auto issue = [&](int j) {
        if (j >= nchunks) return;
        const int r0 = lo + j * LN_TMA_ROWS, nr = min(LN_TMA_ROWS, hi - r0);
        const unsigned st = rows0 + (unsigned)(j % stages) * stageBytes, bar = bar0 + 8 * (j % stages);
        const unsigned fb = (unsigned)(nr * C) * 4, tb = (unsigned)(nr * C) * (unsigned)sizeof(T);
        tma_expect(bar, 2 * fb + tb);
        tma_load(st, inp + (size_t)r0 * C, fb, bar);
        tma_load(st + xBytes, dinp + (size_t)r0 * C, fb, bar);
        tma_load(st + 2 * xBytes, dout + (size_t)r0 * C, tb, bar);
    };
    if (tid == 0) {
        for (int j = 0; j < stages - 1; j++) issue(j);
    }
    float aw[4 * LN_G], ab[4 * LN_G];
#pragma unroll
    for (int i = 0; i < 4 * LN_G; i++) aw[i] = ab[i] = 0.0f;
    // the row's mean and rstd, loaded a chunk ahead (their latency hidden
    // behind the chunk before, not paid after each stage arrives)
    float m = 0.0f, sd = 0.0f;
    if (lo + warp < hi) m = mean[lo + warp], sd = rstd[lo + warp];
    for (int j = 0;; j++) {
        if (j >= nchunks) break;
        // stage (j - 1) % stages was last read in iteration j - 1, which
        // every thread finished before the barrier that ended it
        if (tid == 0) issue(j + stages - 1);
        const int s = j % stages;
        const int row = lo + j * LN_TMA_ROWS + warp;
        float mNext = 0.0f, sdNext = 0.0f;
        if (row + LN_TMA_ROWS < hi) mNext = mean[row + LN_TMA_ROWS], sdNext = rstd[row + LN_TMA_ROWS];
        tma_bar_wait(bar0 + 8 * s, (unsigned)(j / stages) & 1u);
        if (row < hi) {
            const unsigned char* st = ln_tma_rows + (size_t)s * stageBytes;
            const float* xs = reinterpret_cast<const float*>(st) + (size_t)warp * C;
            const float* ds = reinterpret_cast<const float*>(st + xBytes) + (size_t)warp * C;
            const T* gs = reinterpret_cast<const T*>(st + 2 * xBytes) + (size_t)warp * C;
            float sdn = 0.0f, sdnn = 0.0f;
#pragma unroll
            for (int k = 0; k < LN_G; k++) {
                int g = lane + 32 * k;
                if (g < ng) {
                    float4 xv = *reinterpret_cast<const float4*>(xs + 4 * g);
                    Raw4 gv = *reinterpret_cast<const Raw4*>(gs + 4 * g);
                    F4 wv = ld4(weight + 4 * g);
                    const float xa[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        float n = sd * (xa[e] - m), dn = wv.v[e] * raw4_at(gv, e);
                        sdn += dn;
                        sdnn += dn * n;
                    }
                }
            }
            const float mdn = warp_sum(sdn) / (float)C, mdnn = warp_sum(sdnn) / (float)C;
            const size_t off = (size_t)row * C;
#pragma unroll
            for (int k = 0; k < LN_G; k++) {
                int g = lane + 32 * k;
                if (g < ng) {
                    float4 xv = *reinterpret_cast<const float4*>(xs + 4 * g);
                    float4 dv = *reinterpret_cast<const float4*>(ds + 4 * g);
                    Raw4 gv = *reinterpret_cast<const Raw4*>(gs + 4 * g);
                    F4 wv = ld4(weight + 4 * g);
                    const float xa[4] = {xv.x, xv.y, xv.z, xv.w};
                    F4 di;
                    di.v[0] = dv.x, di.v[1] = dv.y, di.v[2] = dv.z, di.v[3] = dv.w;
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        float gg = raw4_at(gv, e);
                        float n = sd * (xa[e] - m), dn = wv.v[e] * gg;
                        aw[4 * k + e] += n * gg;
                        ab[4 * k + e] += gg;
                        di.v[e] = di.v[e] + sd * (dn - mdn - n * mdnn);
                    }
                    st4(dinp + off + 4 * g, di);
                }
            }
        }
        m = mNext, sd = sdNext;
        __syncthreads(); // stage s is read; it is refilled stages - 1 chunks on
    }
    // The block's partial: each warp's sums into the (now idle) stage
    // memory, 2C floats a warp, then added in warp order.
    float* acc = reinterpret_cast<float*>(ln_tma_rows) + (size_t)warp * 2 * C;
#pragma unroll
    for (int k = 0; k < LN_G; k++) {
        int g = lane + 32 * k;
        if (g < ng) {
            *reinterpret_cast<float4*>(acc + 4 * g) = make_float4(aw[4 * k], aw[4 * k + 1], aw[4 * k + 2], aw[4 * k + 3]);
            *reinterpret_cast<float4*>(acc + C + 4 * g) = make_float4(ab[4 * k], ab[4 * k + 1], ab[4 * k + 2], ab[4 * k + 3]);
        }
    }
    __syncthreads();
    const float* all = reinterpret_cast<const float*>(ln_tma_rows);
    float* pb = part + (size_t)blockIdx.x * 2 * C;
    for (int i = tid; i < 2 * C; i += LN_TMA_BLOCK) {
        float t = all[i];
        for (int w = 1; w < LN_TMA_ROWS; w++) t += all[(size_t)w * 2 * C + i];
        pb[i] = t;
    }
#endif
}

// d0 (C) += Σ_b part[b, 0:C] and, when d1 is not null, d1 (C) += Σ_b part[b, C:2C];
// part (nb, C or 2C) fp32. Block: 32 columns × (blockDim.x/32) slices, at
// most 32; slice s sums rows b ≡ s (mod slices) in increasing b, then
// slice 0 adds the slices in order.
extern "C" __global__ void layernorm_reduce(float* __restrict__ d0, float* __restrict__ d1,
                                            const float* __restrict__ part, int nb, int C) {
    pdl_enter();
    __shared__ float sh[32][33];
    const int width = d1 != 0 ? 2 * C : C;
    const int lane = threadIdx.x & 31, slice = threadIdx.x >> 5, slices = blockDim.x >> 5;
    const int c = blockIdx.x * 32 + lane;
    float s = 0.0f;
    if (c < width) {
#pragma unroll 4
        for (int b = slice; b < nb; b += slices) s += part[(size_t)b * width + c];
    }
    sh[slice][lane] = s;
    __syncthreads();
    if (slice == 0 && c < width) {
        float t = 0.0f;
        for (int i = 0; i < slices; i++) t += sh[i][lane];
        if (c < C) d0[c] += t;
        else d1[c - C] += t;
    }
}

// ---- add ----------------------------------------------------------------

// out (n) R = a (n) R + b (n) T; grid-stride, 4 elements per thread and step.
template <typename R>
__device__ __forceinline__ void add_body(R* out, const R* a, const T* b, size_t n, int vec) {
    const size_t stride = (size_t)gridDim.x * blockDim.x * 4;
    for (size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 4; i < n; i += stride) {
        if (vec && i + 4 <= n) {
            F4 x = ld4(a + i), y = ld4(b + i);
#pragma unroll
            for (int j = 0; j < 4; j++) x.v[j] += y.v[j];
            st4(out + i, x);
        } else {
            for (size_t k = i; k < i + 4 && k < n; k++) store(out, k, load(a, k) + load(b, k));
        }
    }
}

extern "C" __global__ void add(T* out, const T* a, const T* b, long long n, int vec) {
    pdl_enter();
    add_body<T>(out, a, b, (size_t)n, vec);
}

extern "C" __global__ void add_rf32(float* out, const float* a, const T* b, long long n, int vec) {
    pdl_enter();
    add_body<float>(out, a, b, (size_t)n, vec);
}

// ---- decomposed forward -------------------------------------------------

// mean (N) = Σ_c x / C; a warp per row. x (N,C) R
template <typename R>
__device__ __forceinline__ void ln_mean(float* mean, const R* x, int N, int C) {
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= N) return;
    const R* r = x + (size_t)row * C;
    float s = 0.0f;
    for (int i = lane; i < C; i += 32) s += load(r, i);
    s = warp_sum(s);
    if (lane == 0) mean[row] = s / (float)C;
}

extern "C" __global__ void layernorm_mean(float* __restrict__ mean, const T* __restrict__ x, int N, int C) {
    ln_mean<T>(mean, x, N, C);
}
extern "C" __global__ void layernorm_mean_rf32(float* __restrict__ mean, const float* __restrict__ x, int N, int C) {
    ln_mean<float>(mean, x, N, C);
}

// rstd (N) = 1/sqrt(Σ_c (x - mean)² / C + eps); a warp per row
template <typename R>
__device__ __forceinline__ void ln_rstd(float* rstd, const float* mean, const R* x, int N, int C) {
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= N) return;
    const R* r = x + (size_t)row * C;
    const float m = mean[row];
    float s = 0.0f;
    for (int i = lane; i < C; i += 32) {
        float d = load(r, i) - m;
        s += d * d;
    }
    s = warp_sum(s);
    if (lane == 0) rstd[row] = 1.0f / sqrtf(s / (float)C + LN_EPS);
}

extern "C" __global__ void layernorm_rstd(float* __restrict__ rstd, const float* __restrict__ mean,
                                          const T* __restrict__ x, int N, int C) {
    ln_rstd<T>(rstd, mean, x, N, C);
}
extern "C" __global__ void layernorm_rstd_rf32(float* __restrict__ rstd, const float* __restrict__ mean,
                                               const float* __restrict__ x, int N, int C) {
    ln_rstd<float>(rstd, mean, x, N, C);
}

// The elementwise passes below: one element per thread and step, grid-stride
// over the (N,C) buffer, row = i / C and column = i % C.
#define EW_LOOP(n) for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

// xhat (N,C) fp32 = (x - mean)·rstd
template <typename R>
__device__ __forceinline__ void ln_normalise(float* xhat, const float* mean, const float* rstd, const R* x, int N,
                                             int C) {
    EW_LOOP((size_t)N * C) {
        size_t row = i / C;
        xhat[i] = rstd[row] * (load(x, i) - mean[row]);
    }
}

extern "C" __global__ void layernorm_normalise(float* __restrict__ xhat, const float* __restrict__ mean,
                                               const float* __restrict__ rstd, const T* __restrict__ x, int N, int C) {
    ln_normalise<T>(xhat, mean, rstd, x, N, C);
}
extern "C" __global__ void layernorm_normalise_rf32(float* __restrict__ xhat, const float* __restrict__ mean,
                                                    const float* __restrict__ rstd, const float* __restrict__ x, int N,
                                                    int C) {
    ln_normalise<float>(xhat, mean, rstd, x, N, C);
}

// out (N,C) T = xhat·weight + bias
extern "C" __global__ void layernorm_affine(T* __restrict__ out, const float* __restrict__ xhat,
                                            const T* __restrict__ weight, const T* __restrict__ bias, int N, int C) {
    EW_LOOP((size_t)N * C) {
        int c = (int)(i % C);
        store(out, i, xhat[i] * load(weight, c) + load(bias, c));
    }
}

// ---- decomposed backward ------------------------------------------------

// part (ceil(N/rows), C) fp32: slice y sums rows [y·rows, min(N, (y+1)·rows))
// of src (N,C) per column, in row order. grid (ceil(C/blockDim.x), up to
// 65535): block row blockIdx.y does slices blockIdx.y, +gridDim.y, ... (more
// than 65535 slices, N > 4.19 M rows at 64 rows a slice, loop).
template <typename S>
__device__ __forceinline__ void ln_colsum(float* part, const S* src, int N, int C, int rows) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    const int slices = (int)(((long long)N + rows - 1) / rows);
    for (int y = blockIdx.y; y < slices; y += gridDim.y) {
        long long r0 = (long long)y * rows, r1 = min((long long)N, r0 + rows);
        float s = 0.0f;
        for (long long r = r0; r < r1; r++) s += load(src + (size_t)r * C, c);
        part[(size_t)y * C + c] = s;
    }
}

extern "C" __global__ void layernorm_colsum(float* __restrict__ part, const T* __restrict__ src, int N, int C,
                                            int rows) {
    ln_colsum<T>(part, src, N, C, rows);
}
extern "C" __global__ void layernorm_colsum_f32(float* __restrict__ part, const float* __restrict__ src, int N, int C,
                                                int rows) {
    ln_colsum<float>(part, src, N, C, rows);
}

// out (N,C) fp32 = dout (N,C) T · src (N,C) fp32
extern "C" __global__ void layernorm_mul_dout(float* __restrict__ out, const T* __restrict__ dout,
                                              const float* __restrict__ src, int N, int C) {
    EW_LOOP((size_t)N * C) out[i] = load(dout, i) * src[i];
}

// dnorm (N,C) fp32 = dout (N,C) T · weight (C) T
extern "C" __global__ void layernorm_dnorm(float* __restrict__ dnorm, const T* __restrict__ dout,
                                           const T* __restrict__ weight, int N, int C) {
    EW_LOOP((size_t)N * C) dnorm[i] = load(weight, (int)(i % C)) * load(dout, i);
}

// out (N,C) fp32 = a · b, both fp32
extern "C" __global__ void layernorm_mul(float* __restrict__ out, const float* __restrict__ a,
                                         const float* __restrict__ b, int N, int C) {
    EW_LOOP((size_t)N * C) out[i] = a[i] * b[i];
}

// dinp (N,C) R += rstd·(dnorm - m1 - xhat·m2); rstd, m1, m2 (N)
template <typename R>
__device__ __forceinline__ void ln_dinp(R* dinp, const float* dnorm, const float* xhat, const float* rstd,
                                        const float* m1, const float* m2, int N, int C) {
    EW_LOOP((size_t)N * C) {
        size_t row = i / C;
        store(dinp, i, load(dinp, i) + rstd[row] * (dnorm[i] - m1[row] - xhat[i] * m2[row]));
    }
}

extern "C" __global__ void layernorm_dinp(T* __restrict__ dinp, const float* __restrict__ dnorm,
                                          const float* __restrict__ xhat, const float* __restrict__ rstd,
                                          const float* __restrict__ m1, const float* __restrict__ m2, int N, int C) {
    ln_dinp<T>(dinp, dnorm, xhat, rstd, m1, m2, N, C);
}
extern "C" __global__ void layernorm_dinp_rf32(float* __restrict__ dinp, const float* __restrict__ dnorm,
                                               const float* __restrict__ xhat, const float* __restrict__ rstd,
                                               const float* __restrict__ m1, const float* __restrict__ m2, int N,
                                               int C) {
    ln_dinp<float>(dinp, dnorm, xhat, rstd, m1, m2, N, C);
}
