// gelu.cuh: the derivative of the tanh-form GELU, shared by gelu.cu
// (gelu_backward2 through gelu_grad_fast, gelu_bias_backward) and fp8.cu
// (dgelu_cast_transpose_dbias_e5m2, the FP8 backward's fused dGELU), so
// that the bf16 and the FP8 backwards of the MLP compute the same gelu':
// one function, not a copy per file. Include it after common.cuh (it uses
// T, DTYPE, GELU_SCALE and GELU_COEF from there).
//
//   gelu'(x) = 0.5·(1 + tanh(a)) + 0.5·x·(1 - tanh²(a))·√(2/π)·(1 + 3·0.044715·x²),
//   a = √(2/π)·(x + 0.044715·x³)
//
// gelu_grad_f is that formula in fp32 with tanhf, in the CPU reference's
// order (pkg/device/cpu/gelu.go). gelu_grad_lean is the form of the 16-bit
// dtypes: the tanh form rewritten with r = 1/(exp(2u) + 1)
// (1 + t = 2(1 - r), 1 - t² = 4r(1 - r)):
//
//   gelu'(x) = (1 - r)·(1 + 2x·r·√(2/π)·(1 + 3·0.044715·x²)),  1 - r = e·r
//
// one ex2 and one rcp (the MUFU approximations, ~2 ulps of fp32) and about
// ten FMAs an element. The relative error is a few fp32 ulps wherever
// gelu' is not near its zero (x ≈ -0.75), where it is ~1e-7 absolute: far
// inside a 16-bit (or FP8) rounding of the result (the CPU reference's
// fp32 tanh form loses more in the left tail, where 1 - t·t and t + 1
// cancel). For fp32 T, gelu_grad_lean is gelu_grad_f (tanhf, the CPU
// reference's order). Under DRUTO_EMU (the host emulators) ex2 and rcp
// are exp2f and a division with the .ftz flush.
#ifndef DRUTO_GELU_CUH
#define DRUTO_GELU_CUH

// gelu_grad_f is gelu'(x) in fp32 with tanhf, in the CPU reference's order.
__device__ __forceinline__ float gelu_grad_f(float x) {
    float x2 = x * x;
    float t = tanhf((x2 * x * GELU_COEF + x) * GELU_SCALE);
    float left = (t + 1.0f) * 0.5f;
    float right = x * 0.5f * (1.0f - t * t) * GELU_SCALE * (x2 * (3.0f * GELU_COEF) + 1.0f);
    return left + right;
}

#ifdef DRUTO_EMU
// As the .ftz instructions: a result below 2^-126 (subnormal) is 0.
__device__ __forceinline__ float gb_ftz(float v) { return fabsf(v) < 1.17549435e-38f ? copysignf(0.0f, v) : v; }
__device__ __forceinline__ float gb_ex2(float v) { return gb_ftz(exp2f(v)); }
__device__ __forceinline__ float gb_rcp(float v) { return gb_ftz(1.0f / v); }
#else
// gb_ex2 is 2^v (ex2.approx.ftz: results below 2^-126 are 0, +inf above 2^128).
__device__ __forceinline__ float gb_ex2(float v) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
}
// gb_rcp is 1/v (rcp.approx.ftz: 1/inf = 0).
__device__ __forceinline__ float gb_rcp(float v) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
}
#endif

// gelu_grad_lean is gelu'(x), the ex2/rcp form for 16-bit T (see above).
__device__ __forceinline__ float gelu_grad_lean(float x) {
#if DTYPE == DRUTO_F32
    return gelu_grad_f(x);
#else
    const float K = GELU_SCALE * 2.8853900817779268f; // 2u·log2(e) = x·(1 + c·x²)·K
    float x2 = x * x;
    // exp(2u), 0 at the left end; 2u·log2(e) capped at 64 (u > 22, where
    // tanh(u) is 1 in fp32): above 2^126, 1/(e+1) would be subnormal and
    // rcp.approx.ftz would flush it to 0, making e·r 0 instead of 1 (the H200
    // gave gelu'(9.45) = 0 before the cap). NaN stays NaN through b below.
    float e = gb_ex2(fminf(x * fmaf(x2, GELU_COEF * K, K), 64.0f));
    float r = gb_rcp(e + 1.0f); // 1/(e+1) in [2^-64, 1]
    // 1 - r as e·r: no cancellation where r is near 1 (x < -3, where
    // gelu' is tiny)
    float om = fminf(e * r, 1.0f);
    // 2x·√(2/π)·(1 + 3c·x²), x² capped (|x| > 1000: om or r is 0 there) so
    // that om·q is 0, not 0·inf, up to |x| ~ 1e33 (NaN stays NaN)
    float b = x * fmaf(fminf(x2, 1e6f), 6.0f * GELU_COEF * GELU_SCALE, 2.0f * GELU_SCALE);
    return om * fmaf(b, r, 1.0f);
#endif
}

// gelu_lean is gelu(x) = x·(1 + tanh(u))/2 (the tanh form) for the
// 16-bit dtypes in the same ex2/rcp form: (1 + tanh(u))/2 = e/(e + 1) =
// e·r with e = exp(2u), r = 1/(e + 1), so gelu(x) = x·e·r, one ex2, one
// rcp and a few FMAs where tanhf costs several times that (fp8.cu's
// gelu_cast_transpose_e4m3, which the SMs bound as much as memory). The
// same caps as gelu_grad_lean's: 2u·log2(e) at most 64, e·r at most 1;
// x = +Inf gives +Inf, -Inf gives NaN (-Inf·0, as the tanh form's), NaN
// stays NaN. Within a few fp32 ulps of gelu_f (far inside an FP8 rounding);
// for fp32 T it is gelu_f.
__device__ __forceinline__ float gelu_lean(float x) {
#if DTYPE == DRUTO_F32
    return gelu_f(x);
#else
    const float K = GELU_SCALE * 2.8853900817779268f; // 2u·log2(e) = x·(1 + c·x²)·K
    float e = gb_ex2(fminf(x * fmaf(x * x, GELU_COEF * K, K), 64.0f));
    return x * fminf(e * gb_rcp(e + 1.0f), 1.0f);
#endif
}

#endif // DRUTO_GELU_CUH
