#pragma once
#define DRUTO_F32 1
#define DRUTO_BF16 2
#define DRUTO_F16 3
// emu.h: the CUDA built-ins flash_attention.cu uses, for the host emulator
// (run.sh); included first with -include.
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>
#include <functional>
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
struct dim3e { unsigned x, y, z; };
extern thread_local dim3e threadIdx, blockIdx;
extern dim3e blockDim, gridDim;
struct uint2 { unsigned x, y; };
struct uint4 { unsigned x, y, z, w; };
struct float2 { float x, y; };
struct float4 { float x, y, z, w; };
inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
inline float __uint_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned i; memcpy(&i, &f, 4); return i; }
void __syncthreads();
float __shfl_xor_sync(unsigned, float, int);
inline float atomicAdd(float* p, float v) { return std::atomic_ref<float>(*p).fetch_add(v); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return std::atomic_ref<unsigned>(*p).fetch_add(v); }
// __byte_perm(x, y, s): byte i of the result is byte s's nibble i (its low
// 3 bits) of the 8 bytes y:x (x the low four).
inline unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
    const unsigned long long b = (unsigned long long)y << 32 | x;
    unsigned int r = 0;
    for (int i = 0; i < 4; i++) r |= (unsigned int)(b >> (8 * ((s >> (4 * i)) & 7)) & 0xff) << (8 * i);
    return r;
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
using std::exp2f; using std::log2f; using std::fmaxf;
inline int min(int a, int b) { return a < b ? a : b; }
