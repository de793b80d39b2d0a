// encoder.cu: the token + position embedding (pkg/device/gpu/encoder.go).
//
// druto:kernel encoder_forward encoder_gather_tokens encoder_gather_positions encoder_add_positions
// druto:kernel encoder_backward_positions encoder_backward_tokens encoder_sum_positions
// druto:dtypes f32 bf16 f16
//
// Forward, fused: encoder_forward, out[bt,c] = wte[tok,c] + wpe[t,c], one
// thread per element. Decomposed (PyTorch's wte(idx) + wpe(pos)):
// encoder_gather_tokens and encoder_gather_positions widen the rows into fp32
// buffers, encoder_add_positions adds them with the positions broadcast over
// the batch. out is fp32 (the residual stream); wte and wpe are T.
//
// Backward, deterministic, no atomics; every element of dwte and dwpe is
// summed in increasing (b,t) order, as the CPU reference does, so the bits
// match it and do not depend on the launch:
//   encoder_backward_positions: one thread per (t,c), dwpe[t,c] += dout[b,t,c]
//     for b = 0..B-1 (fused form, straight into dwpe);
//   encoder_sum_positions: the same into a zeroed fp32 (T,C) buffer
//     (decomposed form; add_f32 of matmul.cu then accumulates it);
//   encoder_backward_tokens: one thread per (channel, token group); the
//     thread walks every position bt in order and, where tokens[bt] falls in
//     its group (tokens[bt] % groups == group), adds dout[bt,c] into
//     dst[tokens[bt],c]. Each element of dst is owned by one thread, so
//     there are no races; a warp covers 32 adjacent channels, so its loads
//     and stores are coalesced, and the token reads are broadcasts. dst is
//     dwte (fused) or a zeroed dense (V,C) buffer (decomposed).
// dout, dwte and dwpe are fp32; dout may be T (the kernels read it with load).
// A token outside [0,V) (the caller validates them on the host) makes the
// forward row NaN and is skipped by backward, never read out of bounds.

#include "common.cuh"

// Block sizes (threads), read by the launchers too (kernels/blocks.go).
// druto:block ENC_BLOCK encoder_forward encoder_gather_tokens encoder_gather_positions encoder_add_positions encoder_backward_positions encoder_backward_tokens encoder_sum_positions
#define ENC_BLOCK 256

// out (BT,C) F32, wte (V,C), wpe (maxT,C), tokens (BT)
extern "C" __global__ void encoder_forward(float* __restrict__ out, const T* __restrict__ wte, const T* __restrict__ wpe,
                                           const int* __restrict__ tokens, int BT, int Tn, int C, int V) {
    size_t n = (size_t)BT * C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int bt = (int)(i / C), c = (int)(i % C);
        int tok = tokens[bt];
        if (tok < 0 || tok >= V) {
            out[i] = __int_as_float(0x7fc00000);
            continue;
        }
        out[i] = load(wte + (size_t)tok * C, c) + load(wpe + (size_t)(bt % Tn) * C, c);
    }
}

// dst (BT,C) F32 = wte[tokens] (widened)
extern "C" __global__ void encoder_gather_tokens(float* __restrict__ dst, const T* __restrict__ wte,
                                                 const int* __restrict__ tokens, int BT, int C, int V) {
    size_t n = (size_t)BT * C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int bt = (int)(i / C), c = (int)(i % C);
        int tok = tokens[bt];
        dst[i] = (tok < 0 || tok >= V) ? __int_as_float(0x7fc00000) : load(wte + (size_t)tok * C, c);
    }
}

// dst (Tn,C) F32 = wpe[0:Tn] (widened)
extern "C" __global__ void encoder_gather_positions(float* __restrict__ dst, const T* __restrict__ wpe, int Tn, int C) {
    size_t n = (size_t)Tn * C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        dst[i] = load(wpe, (int)i);
    }
}

// out (BT,C) F32 = tok (BT,C) + pos (Tn,C) broadcast over b
extern "C" __global__ void encoder_add_positions(float* __restrict__ out, const float* __restrict__ tok,
                                                 const float* __restrict__ pos, int BT, int Tn, int C) {
    size_t n = (size_t)BT * C;
    size_t tc = (size_t)Tn * C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        out[i] = tok[i] + pos[i % tc];
    }
}

// dwpe (maxT,C) F32 += Σ_b dout[b,t,:] for t < Tn; dout (B,Tn,C)
extern "C" __global__ void encoder_backward_positions(float* __restrict__ dwpe, const T* __restrict__ dout, int B, int Tn, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= Tn * C) return;
    float acc = dwpe[i];
    for (int b = 0; b < B; b++) acc += load(dout + (size_t)b * Tn * C, i);
    dwpe[i] = acc;
}

// gpos (Tn,C) F32 = Σ_b dout[b,t,:] (from zero); dout (B,Tn,C)
extern "C" __global__ void encoder_sum_positions(float* __restrict__ gpos, const T* __restrict__ dout, int B, int Tn, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= Tn * C) return;
    float acc = 0.0f;
    for (int b = 0; b < B; b++) acc += load(dout + (size_t)b * Tn * C, i);
    gpos[i] = acc;
}

// dst (V,C) F32 += rows of dout (BT,C) by token; grid.x covers C, grid.y the groups
extern "C" __global__ void encoder_backward_tokens(float* __restrict__ dst, const T* __restrict__ dout,
                                                   const int* __restrict__ tokens, int BT, int C, int V, int groups) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int g = blockIdx.y;
    if (c >= C) return;
    for (int bt = 0; bt < BT; bt++) {
        int tok = tokens[bt];
        if (tok < 0 || tok >= V || tok % groups != g) continue;
        float* p = dst + (size_t)tok * C + c;
        *p = *p + load(dout + (size_t)bt * C, c);
    }
}
