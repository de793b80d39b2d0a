// harness.h: the host side the kernel emulators share (a development tool,
// not part of druto): the CUDA thread and block indices, a launcher that
// runs every CUDA thread of a block as a host thread (blocks one after
// another, in order or last to first), __syncthreads and the warps'
// barriers (EmuBarrier, a futex), __shfl_xor_sync through a per-warp slot
// table, the f16 conversions common.cuh asks DRUTO_EMU builds for, and a block's
// dynamic shared memory (emu_block_smem). An
// emulator's main.cpp includes it before the .cu it runs; flash/emu.h (the
// CUDA built-ins) comes first, by -include. flash/main.cpp keeps its own:
// its ldmatrix and mma emulation need wider slots.
#pragma once
#include <cstdio>
#include <climits>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <random>
thread_local dim3e threadIdx, blockIdx;
dim3e blockDim, gridDim;
// EmuBarrier is std::barrier's arrive_and_wait without its spinning: the
// waiters sleep on a futex until the last arrival moves the phase on.
// (libstdc++'s barrier spins with sched_yield before it sleeps, which is
// most of the time on a few cores with hundreds of threads.)
struct EmuBarrier {
    std::atomic<unsigned> left, phase{0};
    const unsigned n;
    explicit EmuBarrier(unsigned n) : left(n), n(n) {}
    void arrive_and_wait() {
        const unsigned p = phase.load(std::memory_order_acquire); // before arriving: this phase's
        if (left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            left.store(n, std::memory_order_relaxed); // nobody arrives again before phase moves
            phase.fetch_add(1, std::memory_order_release);
            syscall(SYS_futex, &phase, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
        } else {
            while (phase.load(std::memory_order_acquire) == p)
                syscall(SYS_futex, &phase, FUTEX_WAIT_PRIVATE, p, nullptr, nullptr, 0);
        }
    }
};
static_assert(sizeof(std::atomic<unsigned>) == sizeof(unsigned) && std::atomic<unsigned>::is_always_lock_free);

// The barriers and the shuffles' slot table of the thread's block.
static thread_local EmuBarrier* cta;
static thread_local std::vector<EmuBarrier*>* warpbar;
// slot is a warp's table for an emulator's own warp collectives (as
// encoder's __ballot_sync: write, meet, read, meet). The shuffles have two
// tables of their own, used by turns (a thread's shuffles counted in
// shfln): a lane writes one, the warp meets, it reads the other lane's
// value; its next shuffle writes the other table, so one barrier a shuffle
// suffices (a lane writes a table again only after the next shuffle's
// barrier, which every lane meets after its read).
static uint64_t slots0[3][64][32];
static thread_local uint64_t (*slot)[32];
static thread_local uint64_t (*shslot)[64][32];
static thread_local unsigned shfln;
void __syncthreads() { cta->arrive_and_wait(); }
static void wsync() { (*warpbar)[threadIdx.x >> 5]->arrive_and_wait(); }
void __syncwarp() { wsync(); }
template <typename V> static V shfl(V v, int off) {
    int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    uint64_t u = 0;
    memcpy(&u, &v, sizeof v);
    uint64_t(*tab)[32] = shslot[shfln++ & 1];
    tab[w][l] = u;
    wsync();
    uint64_t r = tab[w][l ^ off];
    V out;
    memcpy(&out, &r, sizeof out);
    return out;
}
float __shfl_xor_sync(unsigned, float v, int off) { return shfl(v, off); }
double __shfl_xor_sync(unsigned, double v, int off) { return shfl(v, off); }
unsigned long long __shfl_xor_sync(unsigned, unsigned long long v, int off) { return shfl(v, off); }
float druto_emu_f16_to_f32(unsigned short h) { _Float16 x; memcpy(&x, &h, 2); return (float)x; }
unsigned short druto_emu_f32_to_f16(float v) { _Float16 x = (_Float16)v; unsigned short h; memcpy(&h, &x, 2); return h; }

static bool reverseBlocks; // run the blocks of a launch last to first
static thread_local unsigned char* blocksmem; // the block's dynamic shared memory (emu_block_smem)

// launch runs fn as a (gx, gy) grid of blocks of threads threads: the
// block's threads are made once, and each runs its thread of every block in
// turn (in order, or last to first), a barrier of the block between blocks
// (thread creation dominated the emulators' time). smem: the bytes of
// dynamic shared memory a block gets (emu_block_smem; one buffer, as the
// blocks run one after another).
static void launch(int gx, int gy, int threads, std::function<void()> fn, size_t smem = 0) {
    gridDim = {(unsigned)gx, (unsigned)gy, 1};
    blockDim = {(unsigned)threads, 1, 1};
    // Exactly smem bytes from a 16-byte aligned address (operator new's),
    // so that a sanitizer build (EMU_FLAGS=-fsanitize=address) sees a
    // block's access past the launcher's bytes.
    std::vector<unsigned char> dyn(std::max<size_t>(smem, 1));
    unsigned char* dyn16 = smem ? dyn.data() : nullptr;
    EmuBarrier b(threads);
    std::vector<EmuBarrier*> wb;
    for (int i = 0; i < (threads + 31) / 32; i++) wb.push_back(new EmuBarrier(32));
    std::vector<std::thread> th;
    for (int i = 0; i < threads; i++)
        th.emplace_back([&, i] {
            threadIdx = {(unsigned)i, 0, 0};
            blocksmem = dyn16;
            cta = &b;
            warpbar = &wb;
            slot = slots0[0];
            shslot = slots0 + 1;
            shfln = 0;
            for (int n = 0; n < gx * gy; n++) {
                int k = reverseBlocks ? gx * gy - 1 - n : n;
                blockIdx = {(unsigned)(k % gx), (unsigned)(k / gx), 0};
                fn();
                b.arrive_and_wait();
            }
        });
    for (auto& t : th) t.join();
    for (auto p : wb) delete p;
}

// emu_block_smem is the block's dynamic shared memory (launch's smem).
unsigned char* emu_block_smem() { return blocksmem; }
