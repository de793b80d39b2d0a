// adamw.cu: the AdamW step over the flat parameter buffer
// (pkg/device/gpu/adamw.go), torch.optim.AdamW's arithmetic as the CPU
// reference writes it (pkg/device/cpu/adamw.go):
//
//   g  = grad·gs                              (only when scaled)
//   p  = p·(1 - lr·wd)                        (only where the segment decays)
//   m  = m + (1-β1)(g - m)   (or g + ((1-β1)-1)(g - m) when 1-β1 >= 0.5: torch's lerp)
//   v  = v·β2 + ((1-β2)·g)·g
//   p += step · (m / (sqrt(v)/sqrt(1-β2ᵗ) + eps)),  step = -lr/(1-β1ᵗ)
//
// druto:kernel adamw_fused2 adamw_fused_state2 adamw_pass adamw_store_work adamw_bf16m
// druto:pdl adamw_fused2 adamw_fused_state2
// druto:dtypes f32 bf16 f16
//
// The scalars are computed on the host in float64 and rounded, as torch's
// Python scalars are. Every operation is an explicitly rounded fp32
// intrinsic (no FMA contraction; sqrt and division correctly rounded), in
// the reference's order, so the GPU's fused and decomposed forms and the
// CPU's give the same bits for the same inputs.
//
// adamw_fused2 (apex FusedAdam / llm.c adamw_kernel): one launch over the
// whole buffer. The host cuts the layout's segments into chunks of at most
// 16384 elements that never straddle a segment and uploads the table once
// per layout: chunks[2k] = first element, chunks[2k+1] = length | decay<<31.
// Block k updates chunk k: the scalar head up to a 4-element boundary, then
// float4 loads of p, g, m, v (vec set: every base pointer aligned), then the
// scalar tail; the working copy work (T, or null) is written in the same
// pass. The vector body is software-pipelined: each thread issues the next
// group's four 16-byte loads before it computes and stores the current
// group, so its loads stay in flight during the ~60 instructions an element
// of the update costs (correctly rounded division and square root). Bytes
// per element: 16 read (p, g, m, v), 12 written (p, m, v) and sizeof(T) for
// work. (An unpipelined form, slower on the H200, is gone.)
//
// adamw_fused_state2: adamw_fused2 with the per-step scalars read from the
// step state that step_update wrote (kernels/step.cu, pkg/device's Slot*
// constants), and nothing done when the step's gradients were not finite:
// the optimizer step of the device-resident (graph-capturable) step.
//
// adamw_pass: one elementwise step of torch's for-loop (single-tensor)
// AdamW, launched per tensor and step by the decomposed form (op below);
// adamw_store_work: work (n) T = p (n), rounded (the copy_ into the 16-bit
// parameters after the step).
//
// adamw_bf16m: adamw_fused2 (st null) or adamw_fused_state2 (st given) with
// the moments m and v stored in bf16 (druto train --adam-state bf16; the
// rule and why stochastic rounding is in pkg/device/adamw16.go): widened
// exactly, updated by adam_update in fp32, the master update from the fp32
// values, then each rounded to bf16 up or down by 16 random bits of
// sr_bits(seed, step, element), the same hash as device.SRBits, so the CPU
// twin gives the same bits. One element a thread over the chunk table (no
// float4 body): bytes per element 8 read (p, g), 4 of moments read and 4
// written, 4 of p written, sizeof(T) for work.

#include "common.cuh"
#include "adamw.cuh"

// Block sizes (threads), read by the launchers too (kernels/blocks.go).
// druto:block ADAMW_BLOCK adamw_fused2 adamw_fused_state2 adamw_pass adamw_store_work adamw_bf16m
#define ADAMW_BLOCK 256

// adam_one updates element i (the scalar head and tail of a chunk).
__device__ __forceinline__ void adam_one(size_t i, float* __restrict__ master, T* __restrict__ work,
                                         const float* __restrict__ grads, float* __restrict__ m, float* __restrict__ v,
                                         bool dec, const AdamC& c) {
    float p = master[i], mm = m[i], vv = v[i];
    adam_update(p, grads[i], mm, vv, dec, c);
    master[i] = p;
    m[i] = mm;
    v[i] = vv;
    if (work != 0) store(work, i, p);
}

// adamw_chunk updates chunk blockIdx.x of the table (adamw_fused2's body),
// the next group's loads issued before the current group's update.
__device__ __forceinline__ void adamw_chunk(float* __restrict__ master, T* __restrict__ work,
                                            const float* __restrict__ grads, float* __restrict__ m,
                                            float* __restrict__ v, const unsigned int* __restrict__ chunks,
                                            int do_decay, int vec, const AdamC& c) {
    const size_t lo = chunks[2 * blockIdx.x];
    const unsigned int word = chunks[2 * blockIdx.x + 1];
    const size_t len = word & 0x7fffffffu;
    const bool dec = do_decay && (word >> 31);
    const size_t end = lo + len;
    size_t body = lo; // first element of the vector body
    if (vec) {
        const size_t up = (lo + 3) & ~(size_t)3;
        body = up < end ? up : end;
        for (size_t i = lo + threadIdx.x; i < body; i += blockDim.x) {
            adam_one(i, master, work, grads, m, v, dec, c);
        }
        const size_t groups = (end - body) >> 2;
        size_t k = threadIdx.x;
        F4 p, g, mm, vv;
        if (k < groups) {
            const size_t i = body + 4 * k;
            p = ld4(master + i), g = ld4(grads + i), mm = ld4(m + i), vv = ld4(v + i);
        }
        for (; k < groups; k += blockDim.x) {
            const size_t i = body + 4 * k, kn = k + blockDim.x;
            F4 pn, gn, mn, vn;
            if (kn < groups) { // another thread-group's elements: no overlap with i's stores
                const size_t in = body + 4 * kn;
                pn = ld4(master + in), gn = ld4(grads + in), mn = ld4(m + in), vn = ld4(v + in);
            }
#pragma unroll
            for (int j = 0; j < 4; j++) adam_update(p.v[j], g.v[j], mm.v[j], vv.v[j], dec, c);
            st4(master + i, p);
            st4(m + i, mm);
            st4(v + i, vv);
            if (work != 0) st4(work + i, p);
            p = pn, g = gn, mm = mn, vv = vn;
        }
        body += groups * 4; // the scalar tail starts here
    }
    for (size_t i = body + threadIdx.x; i < end; i += blockDim.x) {
        adam_one(i, master, work, grads, m, v, dec, c);
    }
}

#define ADAMW_FUSED_ARGS                                                                                        \
    float *__restrict__ master, T *__restrict__ work, const float *__restrict__ grads, float *__restrict__ m,       \
        float *__restrict__ v, const unsigned int *__restrict__ chunks, float gs, int scaled, float decay,          \
        int do_decay, float w1, int small, float b2, float w2, float step, float bc2, float eps, int vec

// master, grads, m, v (total) fp32; work (total) T or null; chunks (nchunks, 2)
extern "C" __global__ void adamw_fused2(ADAMW_FUSED_ARGS) {
    pdl_enter();
    AdamC c = {gs, decay, w1, b2, w2, step, bc2, eps, scaled, small};
    adamw_chunk(master, work, grads, m, v, chunks, do_decay, vec, c);
}

// adamw_fused2 with gs, decay, step and bc2 from st (StateLen) fp32; a no-op
// unless st[ST_FINITE] is set.
#define ADAMW_STATE_ARGS                                                                                        \
    float *__restrict__ master, T *__restrict__ work, const float *__restrict__ grads, float *__restrict__ m,       \
        float *__restrict__ v, const unsigned int *__restrict__ chunks, const float *__restrict__ st, float w1,     \
        int small, float b2, float w2, float eps, int vec

extern "C" __global__ void adamw_fused_state2(ADAMW_STATE_ARGS) {
    pdl_enter();
    if (st[ST_FINITE] == 0.0f) return;
    AdamC c = {1.0f, 1.0f, w1, b2, w2, 0.0f, 1.0f, eps, 0, small};
    adam_from_state(c, st);
    adamw_chunk(master, work, grads, m, v, chunks, st[ST_DODECAY] != 0.0f, vec, c);
}

#define EW_LOOP(n) for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

// One step of the for-loop AdamW over one tensor of n elements:
//   op 0: a = b·s           g = grad·gs (out of place: grads are an input)
//   op 1: a = a·s           p.mul_(1 - lr·wd), v.mul_(β2)
//   op 2: a = lerp(a, b, s) m.lerp_(g, 1-β1) (small picks the form, as above)
//   op 3: a = a + (s·b)·b   v.addcmul_(g, g, 1-β2)
//   op 4: a = sqrt(b)       den = v.sqrt()
//   op 5: a = a / s         den /= sqrt(1-β2ᵗ)
//   op 6: a = a + s         den += eps
//   op 7: a = a + s·(b / c) p.addcdiv_(m, den, step)
extern "C" __global__ void adamw_pass(int op, float* a, const float* b, const float* c, float s, int small,
                                      long long n) {
    const size_t N = (size_t)n;
    switch (op) {
    case 0: EW_LOOP(N) a[i] = __fmul_rn(b[i], s); break;
    case 1: EW_LOOP(N) a[i] = __fmul_rn(a[i], s); break;
    case 2:
        if (small) {
            EW_LOOP(N) a[i] = __fadd_rn(a[i], __fmul_rn(s, __fsub_rn(b[i], a[i])));
        } else {
            EW_LOOP(N) a[i] = __fadd_rn(b[i], __fmul_rn(__fsub_rn(s, 1.0f), __fsub_rn(b[i], a[i])));
        }
        break;
    case 3: EW_LOOP(N) a[i] = __fadd_rn(a[i], __fmul_rn(__fmul_rn(s, b[i]), b[i])); break;
    case 4: EW_LOOP(N) a[i] = __fsqrt_rn(b[i]); break;
    case 5: EW_LOOP(N) a[i] = __fdiv_rn(a[i], s); break;
    case 6: EW_LOOP(N) a[i] = __fadd_rn(a[i], s); break;
    case 7: EW_LOOP(N) a[i] = __fadd_rn(a[i], __fmul_rn(s, __fdiv_rn(b[i], c[i]))); break;
    }
}

// work (n) T = p (n) fp32, rounded
extern "C" __global__ void adamw_store_work(T* __restrict__ work, const float* __restrict__ p, long long n) {
    EW_LOOP((size_t)n) store(work, i, p[i]);
}

// sr_bits is device.SRBits: splitmix64's finaliser over (seed, step, i).
__device__ __forceinline__ unsigned int sr_bits(unsigned long long seed, unsigned int step, unsigned long long i) {
    unsigned long long h = seed ^ (unsigned long long)step * 0x9E3779B97F4A7C15ull ^ i * 0xD1B54A32D192ED03ull;
    h ^= h >> 30;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 27;
    h *= 0x94D049BB133111EBull;
    h ^= h >> 31;
    return (unsigned int)(h >> 32);
}

// bf16_sr is device.RoundBF16SR: x rounded up or down by the random bits r
// (low 16); NaN and Inf as f32_to_bf16_bits.
__device__ __forceinline__ unsigned short bf16_sr(float x, unsigned int r) {
    const unsigned int b = __float_as_uint(x);
    if ((b & 0x7fffffffu) >= 0x7f800000u) return f32_to_bf16_bits(x);
    return (unsigned short)((b + (r & 0xffffu)) >> 16);
}

// master, grads (total) fp32; work (total) T or null; m, v (total) bf16
// bits; chunks (nchunks, 2); st (StateLen) fp32 or null: with st, gs,
// decay, do_decay, step, bc2 and the step count come from it and nothing
// is done unless st[ST_FINITE] is set.
extern "C" __global__ void adamw_bf16m(float* __restrict__ master, T* __restrict__ work, const float* __restrict__ grads,
                                       unsigned short* __restrict__ m, unsigned short* __restrict__ v,
                                       const unsigned int* __restrict__ chunks, const float* __restrict__ st, float gs,
                                       int scaled, float decay, int do_decay, float w1, int small, float b2, float w2,
                                       float step, float bc2, float eps, unsigned long long seed, unsigned int stepno) {
    AdamC c = {gs, decay, w1, b2, w2, step, bc2, eps, scaled, small};
    if (st != 0) {
        if (st[ST_FINITE] == 0.0f) return;
        adam_from_state(c, st);
        do_decay = st[ST_DODECAY] != 0.0f;
        stepno = (unsigned int)st[ST_OPTSTEPS];
    }
    const size_t lo = chunks[2 * blockIdx.x];
    const unsigned int word = chunks[2 * blockIdx.x + 1];
    const size_t end = lo + (word & 0x7fffffffu);
    const bool dec = do_decay && (word >> 31);
    for (size_t i = lo + threadIdx.x; i < end; i += blockDim.x) {
        float p = master[i], mm = bf16_bits_to_f32(m[i]), vv = bf16_bits_to_f32(v[i]);
        adam_update(p, grads[i], mm, vv, dec, c);
        const unsigned int r = sr_bits(seed, stepno, i);
        master[i] = p;
        m[i] = bf16_sr(mm, r);
        v[i] = bf16_sr(vv, r >> 16);
        if (work != 0) store(work, i, p);
    }
}
