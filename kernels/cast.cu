// cast.cu: conversions between the float storage types
// (pkg/device/gpu/cast.go; a same-type Cast is a device copy).
//
// druto:kernel cast_f32_bf16 cast_f32_f16 cast_bf16_f32 cast_f16_f32 cast_bf16_f16 cast_f16_bf16
// druto:pdl cast_f32_bf16 cast_f32_f16 cast_bf16_f32 cast_f16_f32 cast_bf16_f16 cast_f16_bf16
// druto:dtypes f32
//
// cast_S_D: dst (n) D = src (n) S, through fp32 (exact for every source),
// rounded to nearest even (common.cuh), as tensor's host conversions are.
// Grid-stride, 4 elements per thread and step: one ld4/st4 when vec is set
// (both pointers aligned to 4 elements), scalar otherwise and in the tail.
// The module is built once (DTYPE f32): the types are in the kernel names.

#include "common.cuh"

// Block sizes (threads), read by the launchers too (kernels/blocks.go).
// druto:block CAST_BLOCK cast_f32_bf16 cast_f32_f16 cast_bf16_f32 cast_f16_f32 cast_bf16_f16 cast_f16_bf16
#define CAST_BLOCK 256

template <typename D, typename S>
__device__ __forceinline__ void cast_body(D* __restrict__ dst, const S* __restrict__ src, size_t n, int vec) {
    const size_t stride = (size_t)gridDim.x * blockDim.x * 4;
    for (size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 4; i < n; i += stride) {
        if (vec && i + 4 <= n) {
            st4(dst + i, ld4(src + i));
        } else {
            for (size_t k = i; k < i + 4 && k < n; k++) store(dst, k, load(src, k));
        }
    }
}

#define CAST(name, D, S)                                                                      \
    extern "C" __global__ void name(D* __restrict__ dst, const S* __restrict__ src, long long n, int vec) { \
        pdl_enter();                                                                          \
        cast_body<D, S>(dst, src, (size_t)n, vec);                                            \
    }

CAST(cast_f32_bf16, bf16, float)
CAST(cast_f32_f16, f16, float)
CAST(cast_bf16_f32, float, bf16)
CAST(cast_f16_f32, float, f16)
CAST(cast_bf16_f16, f16, bf16)
CAST(cast_f16_bf16, bf16, f16)
