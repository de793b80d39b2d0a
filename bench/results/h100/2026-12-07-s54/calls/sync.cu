// sync.cu: the cost of one dependency between phases of a decode step on this GPU,
// as a grid-wide counter in a persistent kernel against a launch (PDL or plain) in a graph.
// Each round: the producers write a C-float vector (a slice each), then every block reads
// the whole vector and reduces it (a layernorm's read), as a decode phase would.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) { unsigned v; asm volatile("ld.acquire.gpu.global.u32 %0,[%1];" : "=r"(v) : "l"(p) : "memory"); return v; }
__device__ __forceinline__ void red_release(unsigned* p, unsigned v) { asm volatile("red.release.gpu.global.add.u32 [%0],%1;" ::"l"(p), "r"(v) : "memory"); }

__device__ float block_sum(float s) {
    __shared__ float red[32];
    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(~0u, s, o);
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = s;
    __syncthreads();
    float t = 0;
    for (int w = 0; w < blockDim.x / 32; w++) t += red[w];
    __syncthreads();
    return t;
}

// mode 0: every block arrives on one counter; mode 1: only the P producers arrive (others only wait);
// mode 2: as 0 with __nanosleep(20) between polls.
__global__ void rounds(unsigned* cnt, float* buf, int R, int C, int P, int mode, float* out) {
    int G = gridDim.x, b = blockIdx.x, t = threadIdx.x;
    float acc = 0;
    for (int r = 1; r <= R; r++) {
        float* cur = buf + (r & 1) * C;
        bool prod = mode == 1 ? b < P : true;
        int np = mode == 1 ? P : G;
        if (prod) {
            int per = (C + np - 1) / np;
            for (int i = b * per + t; i < min(C, (b + 1) * per); i += blockDim.x) cur[i] = acc + i;
        }
        __syncthreads();
        if (t == 0) {
            if (prod) red_release(cnt, 1);
            while (ld_acquire(cnt) < (unsigned)(r * np)) { if (mode == 2) __nanosleep(20); }
        }
        __syncthreads();
        float s = 0;
        for (int i = t; i < C; i += blockDim.x) s += __ldcg(cur + i);
        s = block_sum(s);
        acc = s * 1e-9f;
    }
    if (t == 0) out[b] = acc;
}

// LL links: each element travels with its round's flag in one 8-byte store
// (value, round); readers poll the pairs themselves until the flag is the
// round's: no fence, no counter.
__global__ void rounds_ll(unsigned long long* buf, int R, int C, int P, float* out) {
    int G = gridDim.x, b = blockIdx.x, t = threadIdx.x;
    float acc = 0;
    for (int r = 1; r <= R; r++) {
        unsigned long long* cur = buf + (r & 1) * C;
        if (b < P) {
            int per = (C + P - 1) / P;
            for (int i = b * per + t; i < min(C, (b + 1) * per); i += blockDim.x) {
                float v = acc + i;
                unsigned long long w = (unsigned long long)__float_as_uint(v) | ((unsigned long long)r << 32);
                asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(cur + i), "l"(w) : "memory");
            }
        }
        float s = 0;
        for (int i = t; i < C; i += blockDim.x) {
            unsigned long long w;
            do { asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(w) : "l"(cur + i) : "memory"); } while ((unsigned)(w >> 32) != (unsigned)r);
            s += __uint_as_float((unsigned)w);
        }
        s = block_sum(s);
        acc = s * 1e-9f;
    }
    if (t == 0) out[b] = acc;
}

// One phase as its own kernel: wait (PDL), read the previous vector, reduce, write this one's slice.
__global__ void phase(const float* prev, float* next, int C, float* out, int pdl) {
    if (pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
    int G = gridDim.x, b = blockIdx.x, t = threadIdx.x;
    float s = 0;
    for (int i = t; i < C; i += blockDim.x) s += __ldcg(prev + i);
    s = block_sum(s);
    if (pdl) asm volatile("griddepcontrol.launch_dependents;");
    int per = (C + G - 1) / G;
    for (int i = b * per + t; i < min(C, (b + 1) * per); i += blockDim.x) next[i] = s * 1e-9f + i;
    if (t == 0 && b == 0) out[0] = s;
}

int main() {
    int dev = 0; CK(cudaSetDevice(dev));
    cudaDeviceProp pr; CK(cudaGetDeviceProperties(&pr, dev));
    int SM = pr.multiProcessorCount;
    printf("device %s, %d SMs\n", pr.name, SM);
    const int C = 768, R = 2000;
    unsigned* cnt; float *buf, *out;
    CK(cudaMalloc(&cnt, 4)); CK(cudaMalloc(&buf, 2 * C * 4 * 16)); CK(cudaMalloc(&out, 4096 * 4));
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    struct Cfg { int G, T, P, mode; const char* name; };
    std::vector<Cfg> cfgs = {
        {SM, 256, SM, 0, "counter, all arrive"}, {SM, 512, SM, 0, "counter, all arrive, 512 thr"},
        {SM, 256, SM, 2, "counter, all arrive, nanosleep"}, {SM, 256, 8, 1, "counter, 8 producers"},
        {SM, 256, 48, 1, "counter, 48 producers"}, {2 * SM, 256, 2 * SM, 0, "counter, 2 blocks/SM"},
        {64, 256, 64, 0, "counter, 64 blocks"}, {16, 256, 16, 0, "counter, 16 blocks"}};
    for (int rep = 0; rep < 2; rep++)
    for (auto& c : cfgs) {
        float best = 1e9;
        for (int k = 0; k < 5; k++) {
            CK(cudaMemset(cnt, 0, 4));
            CK(cudaEventRecord(e0));
            rounds<<<c.G, c.T>>>(cnt, buf, R, C, c.P, c.mode, out);
            CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1)); CK(cudaGetLastError());
            float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); best = std::min(best, ms);
        }
        printf("persistent  %-34s G=%3d T=%d: %.3f us a round\n", c.name, c.G, c.T, best * 1000 / R);
    }
    unsigned long long* ll; CK(cudaMalloc(&ll, 2 * 4096 * 8));
    for (int rep = 0; rep < 2; rep++)
    for (int P : {SM, 120, 12}) for (int CC : {768, 3072}) for (int T : {256, 512}) {
        float best = 1e9;
        for (int k = 0; k < 5; k++) {
            CK(cudaMemset(ll, 0, 2 * 4096 * 8));
            CK(cudaEventRecord(e0));
            rounds_ll<<<SM, T>>>(ll, R, CC, P, out);
            CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1)); CK(cudaGetLastError());
            float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); best = std::min(best, ms);
        }
        printf("persistent  LL pairs, %3d producers, C=%4d   G=%3d T=%d: %.3f us a round\n", P, CC, SM, T, best * 1000 / R);
    }
    // Graph chains of N phase kernels.
    const int N = 400;
    cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int grids[] = {1, 8, 48, SM};
    for (int rep = 0; rep < 2; rep++)
    for (int pdl = 0; pdl < 2; pdl++)
        for (int G : grids) {
            cudaGraph_t g; cudaGraphExec_t ge;
            CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
            for (int i = 0; i < N; i++) {
                cudaLaunchConfig_t lc = {};
                lc.gridDim = G; lc.blockDim = 256; lc.stream = s;
                cudaLaunchAttribute at[1];
                at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
                at[0].val.programmaticStreamSerializationAllowed = 1;
                lc.attrs = at; lc.numAttrs = pdl ? 1 : 0;
                CK(cudaLaunchKernelEx(&lc, phase, (const float*)(buf + (i & 1) * C), buf + ((i + 1) & 1) * C, C, out, pdl));
            }
            CK(cudaStreamEndCapture(s, &g));
            CK(cudaGraphInstantiateWithFlags(&ge, g, 0));
            float best = 1e9;
            for (int k = 0; k < 6; k++) {
                CK(cudaEventRecord(e0, s)); CK(cudaGraphLaunch(ge, s)); CK(cudaEventRecord(e1, s));
                CK(cudaEventSynchronize(e1));
                float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (k) best = std::min(best, ms);
            }
            printf("graph chain pdl=%d G=%3d: %.3f us a kernel\n", pdl, G, best * 1000 / N);
            CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g));
        }
    return 0;
}
