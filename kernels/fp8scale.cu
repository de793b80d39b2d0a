// fp8scale.cu: the FP8 scales of FP8 training, updated on the device
// (issue 38; pkg/device/gpu/fp8scale.go, FP8ScaleUpdate; the CPU twin is
// pkg/device/cpu/fp8scale.go, and amp.FP8Scaler the rule both follow).
//
// druto:kernel fp8_scale_update
// druto:pdl fp8_scale_update
// druto:dtypes f32
//
// A training step casts K tensors to FP8, each with its own scale. The
// kernels that produce them read the scale on the device and add their
// tensor's amax (max |x| before scaling, as float bits) with atomicMax, so
// the scale of the next cast has to be made on the device as well: then the
// whole step, the update included, stays one CUDA graph with no host round
// trip. fp8_scale_update does it for all K tensors in one launch, one block
// a tensor, after the last producer of the step (after the last micro-step
// under gradient accumulation: the amax is the maximum over them all).
//
// State (amp.FP8Scales documents it): st (f32) is amax[K][2] (max |x| as
// float bits, and the underflow count as uint32 bits: the producers'
// nonzero finite values whose cast is ±0), scale[K], inv[K] (the
// dequantisation factor 1/scale that cuBLASLt's scale pointers read) and
// the amax histories hist[K][H]; meta (i32) is K records of FP8_META ints:
// the format, the history's next slot, how many slots hold an amax, the
// count of non-finite amaxes, and the last step's underflows.
//
// For tensor k, with a = amax[k]:
//   - a is NaN or ±Inf (an overflow upstream): the count grows; the
//     history and the scale stay as they are.
//   - delayed scaling (H > 0): a enters the history's ring at the next
//     slot, and the scale follows the maximum over the slots filled;
//     current scaling (H = 0): the scale follows a alone.
//   - the scale is Transformer Engine's (max / 2^margin) / amax, computed
//     in double and rounded once to float, clamped to the largest float;
//     an amax of 0 keeps the previous scale. inv = 1/scale, rounded to
//     nearest (__frcp_rn: the same value as an IEEE division).
//   - the underflow count moves into meta (saturating at 2^31 - 1), and
//     both words of amax[k] are set back to 0 (the bits of +0, below every
//     |x|, and a count of 0) for the next step's producers, so no memset
//     is needed.
// The history's maximum is a maximum, so the threads' order does not
// change it; every value is the one amp.FP8Scaler.Update computes.
//
// Cost: K blocks reading K·H floats (12 layers × 12 operands × 1024 slots
// is 590 KB a step); negligible beside the step.

#include "common.cuh"

// druto:block FP8S_BLOCK fp8_scale_update
#define FP8S_BLOCK 128

// The fields of a tensor's meta record.
#define FP8_META 5
#define FP8_META_FORMAT 0 // 0 E4M3, 1 E5M2
#define FP8_META_NEXT 1
#define FP8_META_FILLED 2
#define FP8_META_BAD 3
#define FP8_META_UNDER 4

// st: amax[K][2], scale[K], inv[K], hist[K·H] (f32); meta: K·FP8_META
// ints; recs: null (block k updates tensor k, K blocks) or the records to
// update, one a block (the launch's blocks), each listed once: the FP8
// step updates its weights' scales just before the optimizer casts them
// (adamw_fp8.cu) and the others where the step begins.
extern "C" __global__ void __launch_bounds__(FP8S_BLOCK) fp8_scale_update(float* __restrict__ st, int* __restrict__ meta,
        const int* __restrict__ recs, int K, int H, int margin) {
    pdl_enter();
    __shared__ float red[FP8S_BLOCK / 32];
    __shared__ int filled;
    const int k = recs != 0 ? recs[blockIdx.x] : (int)blockIdx.x, t = threadIdx.x;
    if (k < 0 || k >= K) return;
    float* amax = st + 2 * (size_t)k;
    float* scale = st + 2 * (size_t)K;
    float* inv = st + 3 * (size_t)K;
    float* hist = st + 4 * (size_t)K + (size_t)k * H;
    int* m = meta + (size_t)k * FP8_META;
    const float a = amax[0];
    // Every thread reads a before thread 0 clears it.
    __syncthreads();
    if (t == 0) {
        const unsigned int u = __float_as_uint(amax[1]);
        m[FP8_META_UNDER] = u > 0x7fffffffu ? 0x7fffffff : (int)u;
        amax[1] = 0.f;
    }
    // Not finite: exponent bits all ones.
    if ((__float_as_uint(a) & 0x7f800000u) == 0x7f800000u) {
        if (t == 0) {
            m[FP8_META_BAD]++;
            amax[0] = 0.f;
        }
        return;
    }
    float mx = a;
    if (H > 0) {
        if (t == 0) {
            int next = m[FP8_META_NEXT];
            hist[next] = a;
            m[FP8_META_NEXT] = next + 1 == H ? 0 : next + 1;
            filled = min(m[FP8_META_FILLED] + 1, H);
            m[FP8_META_FILLED] = filled;
        }
        __syncthreads(); // hist[next] and filled written
        mx = 0.f;
        for (int i = t; i < filled; i += FP8S_BLOCK) mx = fmaxf(mx, hist[i]);
        for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
        if (t % 32 == 0) red[t / 32] = mx;
        __syncthreads();
        if (t == 0)
            for (int w = 0; w < FP8S_BLOCK / 32; w++) mx = fmaxf(mx, red[w]);
    }
    if (t != 0) return;
    amax[0] = 0.f;
    if (mx > 0.f) {
        const double fmax = m[FP8_META_FORMAT] == 0 ? 448.0 : 57344.0;
        double s = fmax / ldexp(1.0, margin) / (double)mx;
        const float sc = (float)fmin(s, 3.4028234663852886e38);
        scale[k] = sc;
        inv[k] = __frcp_rn(sc);
    }
}
