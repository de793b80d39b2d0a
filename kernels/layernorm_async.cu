// layernorm_async.cu: the fused layernorm kernels of layernorm.cu with the
// rows staged through shared memory by cp.async (sm_80+), several rows in
// flight per warp (pkg/device/gpu/layernorm.go; DRUTO_LAYERNORM=async).
//
// druto:kernel layernorm_forward_async layernorm_forward_async_rf32
// druto:kernel residual_layernorm_forward_async residual_layernorm_forward_async_rf32
// druto:kernel layernorm_backward_async layernorm_backward_async_rf32
// druto:dtypes f32 bf16 f16
// druto:arch 80
//
// Why: layernorm.cu's kernels hold a row in registers, so a warp has bytes in
// flight only between its loads and their arrival, then computes and stores
// with nothing in flight; with ~50 registers (forward) or ~130 (backward)
// an SM holds 32 or 12 warps, and the H200 measured 67% of copy bandwidth
// for both (a persistent grid with the next row prefetched in registers,
// layernorm_forward2 / layernorm_backward3, lost: twice the registers, half
// the warps). Here the loads go to shared memory with cp.async, which costs
// no registers: each warp keeps stages-1 rows in flight while it computes
// the current one, on a persistent grid (as many blocks as are resident).
//
// Layout: a block of LN_ASYNC_WARPS warps; dynamic shared memory holds the
// weight (and bias) widened to fp32 once per block, then per warp `stages`
// slots, each one row of the inputs the kernel reads (forward: x; residual:
// a then b; backward: x, dout and dinp), plus (backward) the row's mean and
// rstd. Warp w of W = gridDim.x·LN_ASYNC_WARPS takes rows w, w+W, ...; row j
// of the warp goes to slot j % stages. Lane l copies the float4 groups l,
// l+32, ... of each row (16 bytes for fp32, 8 for 16-bit types) and later
// reads exactly those groups back, so the data of a slot is its own copies:
// cp.async.wait_group by the lane suffices, no barrier (the backward's
// mean/rstd, copied by lane 0, are read by every lane after a __syncwarp).
// A slot is refilled only after its previous row's values were consumed by
// the same lane (program order through the row's stores and warp sums).
//
// Arithmetic and its order are layernorm.cu's fast path (the same bits for
// out, mean, rstd, res and dinp); dweight and dbias are summed per lane in
// registers over the warp's rows, the warps' sums added in warp order into
// the block's partial (gridDim.x, 2C), reduced by layernorm.cu's
// layernorm_reduce: deterministic for a given grid. Preconditions (checked
// by the launcher, which runs layernorm.cu's kernels otherwise): C % 4 == 0,
// C <= 128·LN_G, every row pointer 4-element aligned, 2 <= stages <= 4.

#include "common.cuh"

#define LN_EPS 1e-5f
// LN_G is the float4 groups per lane: rows of up to 32·4·LN_G = 1024 elements.
#define LN_G 8

// druto:block LN_ASYNC_BLOCK layernorm_forward_async layernorm_forward_async_rf32 residual_layernorm_forward_async residual_layernorm_forward_async_rf32 layernorm_backward_async layernorm_backward_async_rf32
#define LN_ASYNC_BLOCK 128
#define LN_ASYNC_WARPS (LN_ASYNC_BLOCK / 32)

#ifdef DRUTO_EMU
// The host emulator (kernels/emu/layernorm) implements the copies: each
// lane's pending groups are applied at its wait (or at once: EMU mode).
void druto_emu_cp(void* s, const void* g, int bytes);
void druto_emu_commit();
void druto_emu_wait(int pending);
void __syncwarp();
float* druto_emu_dyn_smem();
__device__ __forceinline__ void lna_cp(void* s, const void* g, int bytes) { druto_emu_cp(s, g, bytes); }
__device__ __forceinline__ void lna_commit() { druto_emu_commit(); }
template <int N>
__device__ __forceinline__ void lna_wait() { druto_emu_wait(N); }
#define LNA_SMEM druto_emu_dyn_smem()
#else
__device__ __forceinline__ unsigned lna_smem(const void* p) {
    unsigned r;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
    return r;
}
// lna_cp copies bytes (16: L2 only; 8 or 4: through L1) global→shared asynchronously.
__device__ __forceinline__ void lna_cp(void* s, const void* g, int bytes) {
    if (bytes == 16) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(lna_smem(s)), "l"(g) : "memory");
    else if (bytes == 8) asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(lna_smem(s)), "l"(g) : "memory");
    else asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(lna_smem(s)), "l"(g) : "memory");
}
__device__ __forceinline__ void lna_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// lna_wait waits until at most N of this thread's committed groups are pending.
template <int N>
__device__ __forceinline__ void lna_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
extern __shared__ __align__(16) float lna_dsmem[];
#define LNA_SMEM lna_dsmem
#endif

// lna_wait_rows waits, at row j, until row j's copies have arrived: one
// group is committed per row (empty past the warp's last row), stages-1
// ahead of it, so at row j (after committing row j+stages-1) at most
// stages-1 groups may stay pending.
__device__ __forceinline__ void lna_wait_rows(int stages) {
    if (stages <= 2) lna_wait<1>();
    else if (stages == 3) lna_wait<2>();
    else lna_wait<3>();
}

// lna_cp4 starts copying the 4 elements at g (aligned) to s.
__device__ __forceinline__ void lna_cp4(float* s, const float* g) { lna_cp(s, g, 16); }
#if DTYPE != DRUTO_F32
__device__ __forceinline__ void lna_cp4(T* s, const T* g) { lna_cp(s, g, 8); }
#endif

// lna_weights widens weight (and bias, when not null) into sw[0:C] (and
// sw[C:2C]) for the block; the caller syncs the block before reading.
__device__ __forceinline__ void lna_weights(float* sw, const T* weight, const T* bias, int C) {
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        sw[c] = load(weight, c);
        if (bias != 0) sw[C + c] = load(bias, c);
    }
}

__device__ __forceinline__ F4 lds4(const float* p) {
    float4 q = *reinterpret_cast<const float4*>(p);
    F4 r;
    r.v[0] = q.x;
    r.v[1] = q.y;
    r.v[2] = q.z;
    r.v[3] = q.w;
    return r;
}

// ---- forward ------------------------------------------------------------

// lna_round16 rounds a slot's bytes up to 16, the alignment of the next slot.
__device__ __forceinline__ int lna_round16(int n) { return (n + 15) & ~15; }

// Slot of the forward: the row's a (C elements of R), then with RES its b
// (C elements of T). pkg/device/gpu/layernorm.go (lnAsyncSmem) repeats the sizes.
template <typename R, bool RES>
__device__ __forceinline__ int lna_fwd_slot_bytes(int C) {
    return lna_round16(C * (int)sizeof(R) + (RES ? C * (int)sizeof(T) : 0));
}

// lna_fwd_issue starts copying row's a (and b) into slot, this lane's groups.
template <typename R, bool RES>
__device__ __forceinline__ void lna_fwd_issue(unsigned char* slot, const R* a, const T* b, int row, int C, int lane) {
    const int ng = C >> 2;
    const size_t off = (size_t)row * C;
    R* sa = reinterpret_cast<R*>(slot);
    T* sb = reinterpret_cast<T*>(slot + C * sizeof(R));
#pragma unroll
    for (int k = 0; k < LN_G; k++) {
        int g = lane + 32 * k;
        if (g < ng) {
            lna_cp4(sa + 4 * g, a + off + 4 * g);
            if (RES) lna_cp4(sb + 4 * g, b + off + 4 * g);
        }
    }
}

// res (N,C) R (RES), out (N,C) T, mean (N) or null, rstd (N) or null,
// a (N,C) R, b (N,C) T (RES), weight (C), bias (C). Dynamic shared memory:
// 2C floats + LN_ASYNC_WARPS·stages slots.
template <typename R, bool RES>
__device__ __forceinline__ void lna_forward(R* res, T* out, float* mean, float* rstd, const R* a, const T* b,
                                            const T* weight, const T* bias, int N, int C, int stages) {
    float* sw = LNA_SMEM; // weight [0:C], bias [C:2C] in fp32
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, ng = C >> 2;
    const int slotBytes = lna_fwd_slot_bytes<R, RES>(C);
    unsigned char* slots = reinterpret_cast<unsigned char*>(sw + 2 * C) + (size_t)warp * stages * slotBytes;
    const int W = gridDim.x * LN_ASYNC_WARPS, w = blockIdx.x * LN_ASYNC_WARPS + warp;
    const int nr = w < N ? (N - 1 - w) / W + 1 : 0; // this warp's rows
    // the first stages-1 rows in flight, then the weights (their loads overlap)
    for (int j = 0; j < stages - 1; j++) {
        if (j < nr) lna_fwd_issue<R, RES>(slots + j * slotBytes, a, b, w + j * W, C, lane);
        lna_commit();
    }
    lna_weights(sw, weight, bias, C);
    __syncthreads();
    for (int j = 0; j < nr; j++) {
        // refill the slot row j-1 used (consumed above by this lane) with row j+stages-1
        const int jn = j + stages - 1;
        if (jn < nr) lna_fwd_issue<R, RES>(slots + (jn % stages) * slotBytes, a, b, w + jn * W, C, lane);
        lna_commit();
        lna_wait_rows(stages);
        const int row = w + j * W;
        const size_t off = (size_t)row * C;
        const unsigned char* slot = slots + (j % stages) * slotBytes;
        const R* sa = reinterpret_cast<const R*>(slot);
        const T* sb = reinterpret_cast<const T*>(slot + C * sizeof(R));
        F4 xv[LN_G];
        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < LN_G; k++) {
            int g = lane + 32 * k;
            if (g < ng) {
                xv[k] = ld4(sa + 4 * g);
                if (RES) {
                    F4 bv = ld4(sb + 4 * g);
#pragma unroll
                    for (int q = 0; q < 4; q++) xv[k].v[q] = round_to<R>(xv[k].v[q] + bv.v[q]);
                    st4(res + off + 4 * g, xv[k]);
                }
#pragma unroll
                for (int q = 0; q < 4; q++) sum += xv[k].v[q];
            }
        }
        const float m = warp_sum(sum) / (float)C;
        float sq = 0.0f;
#pragma unroll
        for (int k = 0; k < LN_G; k++) {
            if (lane + 32 * k < ng) {
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    float d = xv[k].v[q] - m;
                    sq += d * d;
                }
            }
        }
        const float s = 1.0f / sqrtf(warp_sum(sq) / (float)C + LN_EPS);
#pragma unroll
        for (int k = 0; k < LN_G; k++) {
            int g = lane + 32 * k;
            if (g < ng) {
                F4 wv = lds4(sw + 4 * g), bv = lds4(sw + C + 4 * g), ov;
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    float n = __fmul_rn(s, __fsub_rn(xv[k].v[q], m));
                    ov.v[q] = __fadd_rn(__fmul_rn(n, wv.v[q]), bv.v[q]);
                }
                st4(out + off + 4 * g, ov);
            }
        }
        if (lane == 0) {
            if (mean != 0) mean[row] = m;
            if (rstd != 0) rstd[row] = s;
        }
    }
    lna_wait<0>(); // no copy outlives the block (none is pending here: the groups past nr are empty)
}

extern "C" __global__ void __launch_bounds__(LN_ASYNC_BLOCK)
    layernorm_forward_async(T* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd,
                            const T* __restrict__ inp, const T* __restrict__ weight, const T* __restrict__ bias, int N,
                            int C, int stages) {
    lna_forward<T, false>((T*)0, out, mean, rstd, inp, (const T*)0, weight, bias, N, C, stages);
}

extern "C" __global__ void __launch_bounds__(LN_ASYNC_BLOCK)
    layernorm_forward_async_rf32(T* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd,
                                 const float* __restrict__ inp, const T* __restrict__ weight,
                                 const T* __restrict__ bias, int N, int C, int stages) {
    lna_forward<float, false>((float*)0, out, mean, rstd, inp, (const T*)0, weight, bias, N, C, stages);
}

// res may be a (in place): a row's a is in shared memory before its res is
// stored, and the rows in flight are other rows; so neither is __restrict__.
extern "C" __global__ void __launch_bounds__(LN_ASYNC_BLOCK)
    residual_layernorm_forward_async(T* res, T* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd,
                                     const T* a, const T* __restrict__ b, const T* __restrict__ weight,
                                     const T* __restrict__ bias, int N, int C, int stages) {
    lna_forward<T, true>(res, out, mean, rstd, a, b, weight, bias, N, C, stages);
}

extern "C" __global__ void __launch_bounds__(LN_ASYNC_BLOCK)
    residual_layernorm_forward_async_rf32(float* res, T* __restrict__ out, float* __restrict__ mean,
                                          float* __restrict__ rstd, const float* a, const T* __restrict__ b,
                                          const T* __restrict__ weight, const T* __restrict__ bias, int N, int C,
                                          int stages) {
    lna_forward<float, true>(res, out, mean, rstd, a, b, weight, bias, N, C, stages);
}

// ---- backward -----------------------------------------------------------

// Slot of the backward: x (C of R), dinp (C of R), dout (C of T), then the
// row's mean and rstd (2 floats), rounded up to 16 bytes.
template <typename R>
__device__ __forceinline__ int lna_bwd_slot_bytes(int C) {
    return lna_round16(2 * C * (int)sizeof(R) + C * (int)sizeof(T) + 8);
}

template <typename R>
__device__ __forceinline__ void lna_bwd_issue(unsigned char* slot, const R* inp, const R* dinp, const T* dout,
                                              const float* mean, const float* rstd, int row, int C, int lane) {
    const int ng = C >> 2;
    const size_t off = (size_t)row * C;
    R* sx = reinterpret_cast<R*>(slot);
    R* sd = sx + C;
    T* sg = reinterpret_cast<T*>(slot + 2 * C * sizeof(R));
    float* st = reinterpret_cast<float*>(slot + 2 * C * sizeof(R) + C * sizeof(T));
#pragma unroll
    for (int k = 0; k < LN_G; k++) {
        int g = lane + 32 * k;
        if (g < ng) {
            lna_cp4(sx + 4 * g, inp + off + 4 * g);
            lna_cp4(sg + 4 * g, dout + off + 4 * g);
            lna_cp4(sd + 4 * g, dinp + off + 4 * g);
        }
    }
    if (lane == 0) {
        lna_cp(st, mean + row, 4);
        lna_cp(st + 1, rstd + row, 4);
    }
}

// part (gridDim.x, 2C) fp32 partial [dweight | dbias] per block; dinp (N,C)
// R accumulated; dout (N,C) T, inp (N,C) R, weight (C) T, mean (N), rstd (N).
// Dynamic shared memory: C floats + LN_ASYNC_WARPS·stages slots, at least
// LN_ASYNC_WARPS·2C floats (the warps' sums at the end).
template <typename R>
__device__ __forceinline__ void lna_backward(R* dinp, float* part, const T* dout, const R* inp, const T* weight,
                                             const float* mean, const float* rstd, int N, int C, int stages) {
    float* sw = LNA_SMEM; // weight [0:C] in fp32
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, ng = C >> 2;
    const int slotBytes = lna_bwd_slot_bytes<R>(C);
    unsigned char* slots = reinterpret_cast<unsigned char*>(sw + C) + (size_t)warp * stages * slotBytes;
    const int W = gridDim.x * LN_ASYNC_WARPS, w = blockIdx.x * LN_ASYNC_WARPS + warp;
    const int nr = w < N ? (N - 1 - w) / W + 1 : 0;
    for (int j = 0; j < stages - 1; j++) {
        if (j < nr) lna_bwd_issue<R>(slots + j * slotBytes, inp, dinp, dout, mean, rstd, w + j * W, C, lane);
        lna_commit();
    }
    lna_weights(sw, weight, (const T*)0, C);
    __syncthreads();
    F4 dw[LN_G], db[LN_G]; // this lane's columns of the warp's sums
#pragma unroll
    for (int k = 0; k < LN_G; k++) {
#pragma unroll
        for (int q = 0; q < 4; q++) dw[k].v[q] = db[k].v[q] = 0.0f;
    }
    for (int j = 0; j < nr; j++) {
        const int jn = j + stages - 1;
        __syncwarp(); // every lane has read the refilled slot's mean and rstd (row j-1)
        if (jn < nr) lna_bwd_issue<R>(slots + (jn % stages) * slotBytes, inp, dinp, dout, mean, rstd, w + jn * W, C, lane);
        lna_commit();
        lna_wait_rows(stages);
        __syncwarp(); // lane 0's copies of mean and rstd are visible to the warp
        const int row = w + j * W;
        const size_t off = (size_t)row * C;
        const unsigned char* slot = slots + (j % stages) * slotBytes;
        const R* sx = reinterpret_cast<const R*>(slot);
        const R* sd = sx + C;
        const T* sg = reinterpret_cast<const T*>(slot + 2 * C * sizeof(R));
        const float* st = reinterpret_cast<const float*>(slot + 2 * C * sizeof(R) + C * sizeof(T));
        const float m = st[0], s = st[1];
        float sdn = 0.0f, sdnn = 0.0f;
#pragma unroll
        for (int k = 0; k < LN_G; k++) {
            int g = lane + 32 * k;
            if (g < ng) {
                F4 x = ld4(sx + 4 * g), gv = ld4(sg + 4 * g), wv = lds4(sw + 4 * g);
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    float n = s * (x.v[q] - m), dn = wv.v[q] * gv.v[q];
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
                F4 x = ld4(sx + 4 * g), gv = ld4(sg + 4 * g), wv = lds4(sw + 4 * g), di = ld4(sd + 4 * g);
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    float n = s * (x.v[q] - m), dn = wv.v[q] * gv.v[q];
                    dw[k].v[q] += n * gv.v[q];
                    db[k].v[q] += gv.v[q];
                    di.v[q] = di.v[q] + s * (dn - mdn - n * mdnn);
                }
                st4(dinp + off + 4 * g, di);
            }
        }
    }
    lna_wait<0>();
    // The block's partial: the warps' sums (over the slots, now free) added in warp order.
    __syncthreads();
    float* acc = sw + C; // LN_ASYNC_WARPS × 2C floats
#pragma unroll
    for (int k = 0; k < LN_G; k++) {
        int g = lane + 32 * k;
        if (g < ng) {
#pragma unroll
            for (int q = 0; q < 4; q++) {
                acc[warp * 2 * C + 4 * g + q] = dw[k].v[q];
                acc[warp * 2 * C + C + 4 * g + q] = db[k].v[q];
            }
        }
    }
    __syncthreads();
    float* pb = part + (size_t)blockIdx.x * 2 * C;
    for (int c = threadIdx.x; c < 2 * C; c += blockDim.x) {
        float t = acc[c];
        for (int v = 1; v < LN_ASYNC_WARPS; v++) t += acc[v * 2 * C + c];
        pb[c] = t;
    }
}

extern "C" __global__ void __launch_bounds__(LN_ASYNC_BLOCK)
    layernorm_backward_async(T* __restrict__ dinp, float* __restrict__ part, const T* __restrict__ dout,
                             const T* __restrict__ inp, const T* __restrict__ weight, const float* __restrict__ mean,
                             const float* __restrict__ rstd, int N, int C, int stages) {
    lna_backward<T>(dinp, part, dout, inp, weight, mean, rstd, N, C, stages);
}

extern "C" __global__ void __launch_bounds__(LN_ASYNC_BLOCK)
    layernorm_backward_async_rf32(float* __restrict__ dinp, float* __restrict__ part, const T* __restrict__ dout,
                                  const float* __restrict__ inp, const T* __restrict__ weight,
                                  const float* __restrict__ mean, const float* __restrict__ rstd, int N, int C,
                                  int stages) {
    lna_backward<float>(dinp, part, dout, inp, weight, mean, rstd, N, C, stages);
}
