// cuda-emu.h - builds the CUDA backend's kernel files (ggml/src/ggml-cuda/*.cu but backend.cu)
// with the host C++ compiler, force-included before them (test-cuda-emu). Every CUDA thread of a
// block runs as a coroutine on the calling thread, blocks one after another; __syncthreads and
// the warp shuffles are barriers where the coroutines meet (a shuffle: every live lane of the warp
// writes its value, then reads its partner's; mma.sync likewise, its fragments). Shared memory is
// static storage, atomics plain read-modify-writes (one OS thread). The runtime calls the kernel
// files make (memcpy, memset on host memory) and cuBLAS's two GEMMs are stand-ins in
// cuda-emu.cpp. So the kernels' indexing, reductions and numerics are checked on machines without
// a GPU; timing, races between blocks and the real cuBLAS are not.
#pragma once

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cublas_v2.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <functional>

namespace emu {

extern uint3 g_tid, g_bid;
extern dim3 g_bdim, g_gdim;

// Runs body as every thread of every block of the grid (smem: bytes of dynamic shared memory).
// kernel names the kernel: more than 48 KiB of dynamic shared memory needs its opt-in first, as
// on a GPU (smem_opt_in, GGML_CUDA_SMEM_OPT_IN), and no launch may ask for more than a GPU has.
void run(dim3 grid, dim3 block, size_t smem, const std::function<void()> & body, const void * kernel = nullptr);
void smem_opt_in(const void * kernel, size_t bytes);
// mma.sync m16n8k16 (F16 or BF16 operands, F32 accumulators) for the calling warp: each lane
// leaves its fragments, then computes its four results from all of them (the same sums, in the
// same order, as mma.cuh's shuffle fallback, at two warp barriers instead of 128 shuffles).
void mma_16x8x16(float d[4], const uint32_t a[4], const uint32_t b[2], bool bf16);
// What a GPU would have run, as launches: kernels, the GEMM stand-ins, device copies and sets.
extern uint64_t g_launches;
void sync_block();
int sync_block_or(int pred);  // __syncthreads_or: the threads that have not exited vote
// CUDA_EMU_SCHEDULE is reverse or shuffle: memory a GPU leaves undefined is filled with 0xff.
bool scrambled();
void sync_warp();
void * dyn_smem();
int lane();
uint64_t & slot(int lane);  // the exchange slot of a lane of the current warp

template <typename T>
T shfl(T v, int src) {
    static_assert(sizeof(T) <= 8, "shuffles of at most 8 bytes");
    uint64_t bits = 0;
    memcpy(&bits, &v, sizeof(T));
    slot(lane()) = bits;
    sync_warp();
    const uint64_t r = slot(src & 31);
    sync_warp();  // nobody overwrites a slot before every lane has read
    T out;
    memcpy(&out, &r, sizeof(T));
    return out;
}

template <typename F>
struct launcher_t {
    dim3 g, b;
    size_t s;
    const void * kernel;
    F f;
    template <typename... A>
    void operator()(A... args) const {
        run(g, b, s, [&]() { f(args...); }, kernel);
    }
};

template <typename F>
launcher_t<F> launcher(dim3 g, dim3 b, size_t s, const void * kernel, F f) {
    return { g, b, s, kernel, f };
}

}  // namespace emu

#undef __global__
#define __global__
#undef __device__
#define __device__
#undef __host__
#define __host__
#undef __shared__
#define __shared__ static
#undef __constant__
#define __constant__
#define __launch_bounds__(...)

#define threadIdx (::emu::g_tid)
#define blockIdx (::emu::g_bid)
#define blockDim (::emu::g_bdim)
#define gridDim (::emu::g_gdim)

inline unsigned int __float_as_uint(float f) {
    unsigned int u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

inline void __syncthreads() { ::emu::sync_block(); }
inline int __syncthreads_or(int pred) { return ::emu::sync_block_or(pred); }

template <typename T>
T __shfl_xor_sync(unsigned, T v, int o) {
    return ::emu::shfl(v, ::emu::lane() ^ o);
}

template <typename T>
T __shfl_sync(unsigned, T v, int src) {
    return ::emu::shfl(v, src);
}

inline float atomicAdd(float * p, float v) {
    const float old = *p;
    *p = old + v;
    return old;
}

inline int atomicAdd(int * p, int v) {
    const int old = *p;
    *p = old + v;
    return old;
}

inline void __threadfence() {}  // one block at a time: every write is seen

template <typename T>
T __ldcg(const T * p) {
    return *p;
}

#define GGML_CUDA_LAUNCH(kernel, grid, block, smem, stream) \
    ::emu::launcher(grid, block, smem, reinterpret_cast<const void *>(&kernel), [&](auto... args_) { kernel(args_...); })
#define GGML_CUDA_EMU_MMA(d, a, b, bf16) ::emu::mma_16x8x16(d, a, b, bf16)
#define GGML_CUDA_SMEM_OPT_IN(kernel, bytes) ::emu::smem_opt_in(reinterpret_cast<const void *>(kernel), bytes)
#define GGML_CUDA_DYN_SMEM(type, name) type * name = (type *) ::emu::dyn_smem()
