// mma.cuh - the warp-level tensor-core product the tensor-core kernels are built on:
// mma.sync.m16n8k16 with F16 or BF16 inputs and F32 accumulators, and the operands as hi + lo
// pairs (F16: x = hi + lo to about 2^-22 relative; BF16 to 2^-17 over F32's whole range), so that
// products of F32 values keep near-F32 accuracy.
//
// Fragments follow the PTX ISA layout of m16n8k16 (.f16 / .bf16 A and B, .f32 C/D). With
// g = lane / 4 and t = lane % 4, each register holding two halves (the lower one first):
//   A (16 x 16): a[0] = A[g][2t, 2t+1], a[1] = A[g+8][2t, 2t+1], a[2] = A[g][2t+8, 2t+9], a[3] = A[g+8][2t+8, 2t+9]
//   B (16 x 8):  b[0] = B[2t, 2t+1][g], b[1] = B[2t+8, 2t+9][g]
//   D (16 x 8):  d[0] = D[g][2t], d[1] = D[g][2t+1], d[2] = D[g+8][2t], d[3] = D[g+8][2t+1]
// Note D's two tiles of 8 columns side by side are A's layout for 16 columns: a product's
// result feeds the next product without leaving registers (attention's P V).
#pragma once

#include "common.cuh"

// Two halves in one register: lo the first (lower) element.
__device__ __forceinline__ uint32_t pack_h2(uint16_t lo, uint16_t hi) { return (uint32_t) lo | ((uint32_t) hi << 16); }

// x0, x1 as F16 hi + lo pairs: hi = f16(x), lo = f16(x - hi).
__device__ __forceinline__ void split_h2(float x0, float x1, uint32_t & hi, uint32_t & lo) {
    const uint16_t h0 = f2h(x0), h1 = f2h(x1);
    hi = pack_h2(h0, h1);
    lo = pack_h2(f2h(x0 - h2f(h0)), f2h(x1 - h2f(h1)));
}

// x0, x1 as BF16 hi + lo pairs: hi = bf16(x), lo = bf16(x - hi) (x = hi + lo to about 2^-17
// relative, over F32's whole range: gradients far below F16's smallest normal keep their bits).
__device__ __forceinline__ void split_bf2(float x0, float x1, uint32_t & hi, uint32_t & lo) {
    const uint16_t h0 = f2bf(x0), h1 = f2bf(x1);
    hi = pack_h2(h0, h1);
    lo = pack_h2(f2bf(x0 - bf2f(h0)), f2bf(x1 - bf2f(h1)));
}

// The product through shuffles (GPUs without the instruction; the host emulator has its own,
// checked against this one), elements F16 or BF16: for column k of A, row g's and g+8's elements
// sit in lane 4g + (k % 8) / 2 of A's register 2 (k / 8) and 2 (k / 8) + 1; B's row k of column n
// in lane 4n + (k % 8) / 2, register k / 8.
template <bool BF16>
__device__ __forceinline__ void mma_16x8x16_shuffled(float d[4], const uint32_t a[4], const uint32_t b[2]) {
    const int lane = threadIdx.x % WARP, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int k = 0; k < 16; k++) {
        const int hi = k >> 3, sh = 16 * (k & 1), src = (k & 7) >> 1;
        const uint32_t ra0 = __shfl_sync(0xffffffffu, a[2 * hi], 4 * g + src);
        const uint32_t ra1 = __shfl_sync(0xffffffffu, a[2 * hi + 1], 4 * g + src);
        const uint32_t rb0 = __shfl_sync(0xffffffffu, b[hi], 4 * (2 * t) + src);
        const uint32_t rb1 = __shfl_sync(0xffffffffu, b[hi], 4 * (2 * t + 1) + src);
        const uint16_t ea0 = (uint16_t) (ra0 >> sh), ea1 = (uint16_t) (ra1 >> sh), eb0 = (uint16_t) (rb0 >> sh), eb1 = (uint16_t) (rb1 >> sh);
        const float a0 = BF16 ? bf2f(ea0) : h2f(ea0), a1 = BF16 ? bf2f(ea1) : h2f(ea1);
        const float b0 = BF16 ? bf2f(eb0) : h2f(eb0), b1 = BF16 ? bf2f(eb1) : h2f(eb1);
        d[0] += a0 * b0;
        d[1] += a0 * b1;
        d[2] += a1 * b0;
        d[3] += a1 * b1;
    }
}

// d += A B for one 16 x 8 x 16 tile (fragments as above), F16 or BF16 elements; every lane of the
// warp calls it.
template <bool BF16>
__device__ __forceinline__ void mma_16x8x16_of(float d[4], const uint32_t a[4], const uint32_t b[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define GGML_MMA_ASM(T)                                                                                                     \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." T "." T ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                                           \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
    if constexpr (BF16) {
        GGML_MMA_ASM("bf16");
    } else {
        GGML_MMA_ASM("f16");
    }
#undef GGML_MMA_ASM
#elif defined(GGML_CUDA_EMU_MMA)
    GGML_CUDA_EMU_MMA(d, a, b, BF16);  // the host emulator's own (tests/cuda/cuda-emu.h)
#else
    mma_16x8x16_shuffled<BF16>(d, a, b);
#endif
}

__device__ __forceinline__ void mma_16x8x16(float d[4], const uint32_t a[4], const uint32_t b[2]) { mma_16x8x16_of<false>(d, a, b); }
__device__ __forceinline__ void mma_16x8x16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2]) { mma_16x8x16_of<true>(d, a, b); }

// d += A B with both operands as BF16 hi + lo pairs: A_lo B_hi + A_hi B_lo + A_hi B_hi. What is
// lost (A_lo B_lo, the lo parts' own rounding) is about 2^-17 of each product (F32 rounds to
// 2^-24, F16 hi + lo pairs to 2^-22, but only inside F16's range).
__device__ __forceinline__ void mma_bf16x3(float d[4], const uint32_t ah[4], const uint32_t al[4], const uint32_t bh[2],
                                           const uint32_t bl[2]) {
    mma_16x8x16_bf16(d, al, bh);
    mma_16x8x16_bf16(d, ah, bl);
    mma_16x8x16_bf16(d, ah, bh);
}
