// crossentropy.cuh: the row arithmetic of the fused classifier that
// crossentropy.cu (crossentropy_fused_l3, crossentropy_fused_tma) and its
// FP8 form crossentropy_fp8.cu share: the exp, the online (max, sum)
// merge and its block reduction. Both files' gradients come from these
// functions, so that the FP8 form writes the same values.

#define CE_VEC ((int)(16 / sizeof(T)))
#define CE_NEG_INF __int_as_float(0xff800000)
#define CE_NAN __int_as_float(0x7fc00000)

// ce_exp returns exp(x - m) given ml = m·log2(e): one FMA and exp2f (2 ulp);
// the FMA's rounding of the exponent adds a relative error of about
// |x - m|·6e-8, 2e-6 at the worst (x - m = -30), far inside fp32's tolerance.
__device__ __forceinline__ float ce_exp(float x, float ml) { return exp2f(fmaf(x, 1.4426950408889634f, -ml)); }

__device__ __forceinline__ float ce_grad_of(float x, float ml, float inv, int j, int tgt, float dscale) {
    float p = ce_exp(x, ml) * inv;
    return j == tgt ? (p - 1.0f) * dscale : p * dscale;
}

// ce_target_grad is the target's gradient (p - 1)·dscale from e =
// exp(x_t - m) and inv = 1/sum: p - 1 as one FMA (e·inv - 1 rounded once),
// written out so that every classifier computes the same bits whatever the
// compiler contracts (crossentropy.cu's vector forms, crossentropy_fp8.cu).
__device__ __forceinline__ float ce_target_grad(float e, float inv, float dscale) { return fmaf(e, inv, -1.0f) * dscale; }

// ce_merge folds the pair (om, os) into (m, s): s is a sum of exp(x - m).
// The two products are rounded each (__fmul_rn) before they are added: as
// a·b + c·d the compiler may contract either product into an FMA, and two
// kernels (crossentropy.cu's and crossentropy_fp8.cu's) then differ in a
// row's sum, and every gradient of the row, where the choice decides the
// last bit.
__device__ __forceinline__ void ce_merge(float& m, float& s, float om, float os) {
    float nm = fmaxf(m, om);
    if (nm == CE_NEG_INF) return; // both empty
    s = __fmul_rn(s, ce_exp(m, nm * 1.4426950408889634f)) + __fmul_rn(os, ce_exp(om, nm * 1.4426950408889634f));
    m = nm;
}

// ce_block_lse merges every thread's (m, s) over the block in a fixed order
// (deterministic); every thread gets the result. red holds 64 floats.
__device__ __forceinline__ void ce_block_lse(float& m, float& s, float* red) {
    for (int off = 16; off > 0; off >>= 1) {
        float om = __shfl_xor_sync(0xffffffffu, m, off), os = __shfl_xor_sync(0xffffffffu, s, off);
        ce_merge(m, s, om, os);
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads(); // red may still be read by the previous row
    if (lane == 0) {
        red[warp] = m;
        red[32 + warp] = s;
    }
    __syncthreads();
    bool have = lane < (int)(blockDim.x >> 5);
    m = have ? red[lane] : CE_NEG_INF;
    s = have ? red[32 + lane] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) {
        float om = __shfl_xor_sync(0xffffffffu, m, off), os = __shfl_xor_sync(0xffffffffu, s, off);
        ce_merge(m, s, om, os);
    }
}

// ce_rescale raises the running max m to lm (when larger), rescaling s.
__device__ __forceinline__ void ce_rescale(float& m, float& s, float lm) {
    if (lm > m) {
        s *= ce_exp(m, lm * 1.4426950408889634f); // exp(m - lm); 0 while m is -inf
        m = lm;
    }
}

// ce_ml is m·log2(e) for ce_exp, 0 while m is -inf (every value so far -inf
// or NaN): exp(-inf - -inf) would be NaN where the -inf logits (masked
// entries) must add 0; NaN logits still give NaN.
__device__ __forceinline__ float ce_ml(float m) { return m == CE_NEG_INF ? 0.0f : m * 1.4426950408889634f; }

// ce_ex2 is 2^v (one MUFU op; results below 2^-126 are 0).
#ifdef DRUTO_EMU
// The host emulator (kernels/emu/crossentropy_fp8) has no PTX: the host's
// exp2f, flushed as the MUFU op flushes.
__device__ __forceinline__ float ce_ex2(float v) {
    const float r = exp2f(v);
    return r < 1.17549435e-38f ? 0.0f : r;
}
#else
__device__ __forceinline__ float ce_ex2(float v) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
}
#endif
