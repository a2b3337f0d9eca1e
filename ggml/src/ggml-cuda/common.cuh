// common.cuh - what every CUDA kernel file shares: error checks, the per-backend context (stream,
// cuBLAS handle, scratch memory), element loads and stores by ggml type, tensor views passed to
// kernels by value, and warp / block reductions.
#pragma once

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cublas_v2.h>

#include <stdint.h>
#include <string.h>

#include <type_traits>

#include "ggml.h"
#include "ggml-impl.h"
#include "quants.h"

// Errors of the CUDA runtime are programming or environment errors the graph cannot recover
// from (a kernel fault poisons the context): report where and abort, as GGML_ASSERT does.
#define CUDA_CHECK(call)                                                                          \
    do {                                                                                          \
        const cudaError_t err_ = (call);                                                          \
        if (err_ != cudaSuccess) {                                                                \
            ggml_abort(__FILE__, __LINE__, "CUDA error %s: %s (%s)", cudaGetErrorName(err_),       \
                       cudaGetErrorString(err_), #call);                                          \
        }                                                                                         \
    } while (0)

#define CUBLAS_CHECK(call)                                                                        \
    do {                                                                                          \
        const cublasStatus_t st_ = (call);                                                        \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                                       \
            ggml_abort(__FILE__, __LINE__, "cuBLAS error %d (%s)", (int) st_, #call);              \
        }                                                                                         \
    } while (0)

// After a kernel launch: launch-configuration errors surface here, not at the next sync.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

// Kernel launches and dynamic shared memory go through these, so that the kernels also build
// for the host emulator of tests/cuda (which runs them on the CPU without a GPU).
#ifndef GGML_CUDA_LAUNCH
#define GGML_CUDA_LAUNCH(kernel, grid, block, smem, stream) kernel<<<grid, block, smem, stream>>>
#endif
#define GGML_COMMA ,  // a comma inside a macro argument (kernel templates of two parameters)
#ifndef GGML_CUDA_DYN_SMEM
#define GGML_CUDA_DYN_SMEM(type, name) extern __shared__ type name[]
#endif
// Past 48 KiB of dynamic shared memory a kernel must be allowed it, on each device, before its
// launch: ctx's device lets kernel (a pointer to it) take bytes (asked once per device and expansion).
#ifndef GGML_CUDA_SMEM_OPT_IN
#define GGML_CUDA_SMEM_OPT_IN(kernel, bytes) \
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int) (bytes)))
#endif
#define GGML_CUDA_SMEM_OPT_IN_ONCE(ctx, kernel, bytes)                 \
    do {                                                              \
        static bool opted_[64] = {};                                  \
        if (!opted_[(ctx).device & 63]) {                             \
            GGML_CUDA_SMEM_OPT_IN(kernel, bytes);                     \
            opted_[(ctx).device & 63] = true;                         \
        }                                                             \
    } while (0)

constexpr int WARP = 32;

// ---- the backend's state, as the op launchers see it --------------------------------------
struct ggml_cuda_ctx {
    int device = 0;
    int n_sm = 1;  // streaming multiprocessors: how many blocks keep the device busy
    int cc = 0;    // compute capability, major * 10 + minor (tensor-core kernels need 80)
    cudaStream_t stream = nullptr;
    cublasHandle_t cublas = nullptr;
    void * cublas_ws = nullptr;  // cuBLAS workspace set once, so cuBLAS never allocates while a graph is captured
    size_t cublas_ws_size = 0;

    // One scratch buffer for the node being computed (converted operands, partial sums). It
    // only grows; growing waits for the stream, since earlier nodes may still read the old one.
    void * scratch_ptr = nullptr;
    size_t scratch_size = 0;
    uint64_t scratch_gen = 0;    // bumped when the buffer moves
    bool capturing = false;      // a CUDA graph is being captured: memory must not change
    bool capture_broken = false; // the capture needed more scratch: it is thrown away
    bool no_fusion = false;      // GGML_CUDA_DISABLE_FUSION=1: each node its own kernel (A/B, debugging)
    bool no_mma_fa = false;      // GGML_CUDA_DISABLE_MMA_FA=1: prompts' attention without tensor cores (A/B)
    // Zeroed counters a kernel's blocks count themselves done on, for the last one of a group to
    // finish the group's work; that one sets its counter back to zero (so they are zero between
    // launches, and in a CUDA graph's replays). Allocated with the backend.
    int * group_done = nullptr;
    static constexpr int64_t kGroupCounters = 1 << 14;

    // Scratch of at least `bytes` for the current node (valid until the next call). Each call
    // counts in scratch_uses.
    void * scratch(size_t bytes);
    uint64_t scratch_uses = 0;

    // The activations a product converted last (ggml_cuda_mmvq: quantized to 8 bits; the cuBLAS
    // products: rounded to F16), still at the start of the scratch buffer: the next product of
    // the same b in the same form (k, v and q of a layer; gate and up) reads them again instead
    // of converting anew. Dropped when the scratch buffer is handed out again, when a node writes
    // over b (ggml_cuda_compute_nodes) and where a graph starts (its inputs may have been set
    // meanwhile).
    struct quantized_act {
        const char * lo = nullptr, * hi = nullptr;  // the bytes b's elements span (lo: b->data; nullptr: none)
        int64_t ne[4] = {};
        size_t nb[4] = {};
        int block = 0;             // the form (quant.cuh): 32 or 256 (8-bit blocks of the weight type), 16 (F16)
        uint64_t scratch_use = 0;  // scratch_uses right after it was written
    } act;
    // Activations a fused kernel quantized while producing them, for the product after it: they
    // become act once the launch's nodes are through ggml_cuda_compute_nodes' staleness check.
    quantized_act act_pending;
    uint64_t n_act_reused = 0;     // products that found their activations converted (tests)
    uint64_t n_act_produced = 0;   // activations quantized by the kernel producing them (tests)
    uint64_t n_act_f16 = 0;        // of n_act_reused, those in F16 for cuBLAS (tests)
    uint64_t n_mma_attn = 0;       // flash attention nodes run on tensor cores, forward or gradient (tests)
};

// The bytes from a tensor's first element to the end of its last (views: strides included).
static inline size_t ggml_cuda_span(const ggml_tensor * t) {
    if (ggml_is_empty(t)) return 0;
    const bool blocks = ggml_blck_size(t->type) > 1;  // rows of whole blocks, packed
    size_t span = blocks ? ggml_row_size(t->type, t->ne[0]) : ggml_type_size(t->type);
    for (int d = blocks ? 1 : 0; d < GGML_MAX_DIMS; d++) span += (size_t) (t->ne[d] - 1) * t->nb[d];
    return span;
}

// The bytes of x and y overlap.
static inline bool ggml_cuda_overlaps(const ggml_tensor * x, const ggml_tensor * y) {
    const char * xl = (const char *) x->data, * yl = (const char *) y->data;
    return xl < yl + ggml_cuda_span(y) && yl < xl + ggml_cuda_span(x);
}

// ---- division by a tensor's sizes --------------------------------------------------------------
// Flat indices become coordinates by dividing by the sizes, per element in the elementwise and
// copy kernels; 64-bit division is a long software routine on the GPU, which made those kernels
// bound by arithmetic instead of memory. For numerators below 2^31 and a divisor d < 2^31:
// q = (umulhi(n, m) + n) >> s with s = ceil(log2 d), m = floor(2^32 (2^s - d) / d) + 1
// (Granlund and Montgomery's division by invariant integers; the sum cannot overflow).
struct fastdiv_t {
    uint32_t m, s;
};

static inline fastdiv_t make_fastdiv(int64_t d) {
    if (d < 1 || d >= ((int64_t) 1 << 31)) return { 0, 0 };  // unused: the tensor takes the 64-bit path
    uint32_t s = 0;
    while (((uint64_t) 1 << s) < (uint64_t) d) s++;
    return { (uint32_t) ((((uint64_t) 1 << 32) * (((uint64_t) 1 << s) - (uint64_t) d)) / (uint64_t) d + 1), s };
}

#define GGML_CUDA_HD __host__ __device__ __forceinline__

GGML_CUDA_HD uint32_t umulhi32(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
    return __umulhi(a, b);
#else
    return (uint32_t) (((uint64_t) a * b) >> 32);
#endif
}

GGML_CUDA_HD uint32_t fast_div(uint32_t n, fastdiv_t f) { return (umulhi32(n, f.m) + n) >> f.s; }

// ---- tensors as kernel arguments ------------------------------------------------------------
// A tensor's data pointer, shape and byte strides, by value (kernels index any layout); dv
// divides by the sizes when every index fits 31 bits (idx32).
struct tview {
    char * data;
    int64_t ne[4];
    int64_t nb[4];
    int type;
    int idx32;
    fastdiv_t dv[4];
};

static inline tview make_view(const ggml_tensor * t) {
    tview v;
    v.data = (char *) t->data;
    int64_t n = 1;
    for (int d = 0; d < 4; d++) {
        v.ne[d] = t->ne[d];
        v.nb[d] = (int64_t) t->nb[d];
        v.dv[d] = make_fastdiv(t->ne[d]);
        n *= t->ne[d] > 0 ? t->ne[d] : 1;
    }
    v.type = (int) t->type;
    v.idx32 = n < ((int64_t) 1 << 31);
    return v;
}

// A view of nothing with sizes 1 (a missing operand that kernels broadcast).
static inline tview unit_view(int type) {
    tview v = {};
    v.type = type;
    for (int d = 0; d < 4; d++) {
        v.ne[d] = 1;
        v.dv[d] = make_fastdiv(1);
    }
    v.idx32 = 1;
    return v;
}

// Row r of v (rows counted over dims 1..3) to its coordinates.
GGML_CUDA_HD void row_coords(int64_t r, const tview & v, int64_t & i1, int64_t & i2, int64_t & i3) {
    if (v.idx32) {
        uint32_t n = (uint32_t) r, q = fast_div(n, v.dv[1]);
        i1 = n - q * (uint32_t) v.ne[1];
        n = q;
        q = fast_div(n, v.dv[2]);
        i2 = n - q * (uint32_t) v.ne[2];
        i3 = q;
        return;
    }
    i1 = r % v.ne[1];
    r /= v.ne[1];
    i2 = r % v.ne[2];
    i3 = r / v.ne[2];
}

// Flat element index i (i0 fastest) to coordinates of v's shape.
GGML_CUDA_HD void unravel(int64_t i, const tview & v, int64_t & i0, int64_t & i1, int64_t & i2, int64_t & i3) {
    int64_t r;
    if (v.idx32) {
        const uint32_t n = (uint32_t) i, q = fast_div(n, v.dv[0]);
        i0 = n - q * (uint32_t) v.ne[0];
        r = q;
    } else {
        i0 = i % v.ne[0];
        r = i / v.ne[0];
    }
    row_coords(r, v, i1, i2, i3);
}

// Coordinate i of a larger tensor along dim d, broadcast over v's size there (i mod ne[d]).
GGML_CUDA_HD int64_t bcast(int64_t i, const tview & v, int d) {
    if (i < v.ne[d]) return i;
    if (v.idx32 && i < ((int64_t) 1 << 31)) return (uint32_t) i - fast_div((uint32_t) i, v.dv[d]) * (uint32_t) v.ne[d];
    return i % v.ne[d];
}

GGML_CUDA_HD char * elem_ptr(const tview & v, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return v.data + i0 * v.nb[0] + i1 * v.nb[1] + i2 * v.nb[2] + i3 * v.nb[3];
}

// The element of v at coordinates of a larger tensor, broadcast along every dim.
GGML_CUDA_HD char * bcast_ptr(const tview & v, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return elem_ptr(v, bcast(i0, v, 0), bcast(i1, v, 1), bcast(i2, v, 2), bcast(i3, v, 3));
}

GGML_CUDA_HD char * row_ptr(const tview & v, int64_t i1, int64_t i2, int64_t i3) {
    return v.data + i1 * v.nb[1] + i2 * v.nb[2] + i3 * v.nb[3];
}

// ---- element conversion -------------------------------------------------------------------
// F16 and BF16 stored as ggml does (raw 16 bits); conversions round to nearest even, as the CPU's.
// Host and device: the block decoders built on them are checked on the host (test-cuda-host).

GGML_CUDA_HD float bits_to_f32(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
#endif
}

GGML_CUDA_HD uint32_t f32_to_bits(float f) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
#endif
}

GGML_CUDA_HD float h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }
GGML_CUDA_HD uint16_t f2h(float f) { return __half_as_ushort(__float2half_rn(f)); }
GGML_CUDA_HD float bf2f(uint16_t h) { return bits_to_f32((uint32_t) h << 16); }
GGML_CUDA_HD uint16_t f2bf(float f) {
    const uint32_t u = f32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t) ((u >> 16) | 64);  // quiet NaN, as the CPU
    return (uint16_t) ((u + (0x7fffu + ((u >> 16) & 1))) >> 16);
}

// The plain float types the elementwise kernels read and write.
static inline bool is_float_type(ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16; }

// One element of a plain float type (the type is uniform across a launch: no divergence).
GGML_CUDA_HD float load_f(const char * p, int type) {
    switch (type) {
        case GGML_TYPE_F16:  return h2f(*(const uint16_t *) p);
        case GGML_TYPE_BF16: return bf2f(*(const uint16_t *) p);
        default:             return *(const float *) p;
    }
}

GGML_CUDA_HD void store_f(char * p, int type, float v) {
    switch (type) {
        case GGML_TYPE_F16:  *(uint16_t *) p = f2h(v); break;
        case GGML_TYPE_BF16: *(uint16_t *) p = f2bf(v); break;
        default:             *(float *) p = v; break;
    }
}

// ---- reductions -----------------------------------------------------------------------------
template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
    for (int o = WARP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = WARP / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// buf: 32 elements of shared memory; the block must call it uniformly.
template <typename T>
__device__ __forceinline__ T block_sum(T v, T * buf) {
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP, nw = blockDim.x / WARP;
    v = warp_sum(v);
    __syncthreads();  // buf may still be read by a previous call
    if (lane == 0) buf[warp] = v;
    __syncthreads();
    v = lane < nw ? buf[lane] : T(0);
    return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float * buf) {
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP, nw = blockDim.x / WARP;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) buf[warp] = v;
    __syncthreads();
    v = lane < nw ? buf[lane] : -INFINITY;
    return warp_max(v);
}

// Blocks of 256 threads covering n items (grid.x may be large: the 2^31 - 1 limit).
static inline unsigned int n_blocks(int64_t n, int threads = 256) { return (unsigned int) ((n + threads - 1) / threads); }

// ALiBi head slope (soft_max, flash_attn_ext): 1 without ALiBi (max_bias 0).
__device__ __forceinline__ float alibi_slope(uint32_t h, uint32_t n_head, float max_bias) {
    if (max_bias <= 0.0f) return 1.0f;
    uint32_t n_head_log2 = 1;
    while (n_head_log2 * 2 <= n_head) n_head_log2 *= 2;
    const float m0 = powf(2.0f, -max_bias / (float) n_head_log2);
    const float m1 = powf(2.0f, -(max_bias / 2.0f) / (float) n_head_log2);
    return h < n_head_log2 ? powf(m0, (float) (h + 1)) : powf(m1, (float) (2 * (h - n_head_log2) + 1));
}
