// vec-avx2.cpp - the AVX2 + FMA + F16C matmul kernels of the float types (vec.h): simd.h's dot
// tiles, packers and row conversions over simd-avx2.h (8 lanes; F16 through F16C, BF16 by
// shifting to f32), with a 16 x 6 GEMM micro-kernel (12 ymm accumulators). AVX512 builds compile
// these too (and test them).
#include "kernels-x86.h"

#if defined(GGML_SIMD_AVX2)

#include "simd-avx2.h"

namespace ggml_cpu_avx2 {
namespace {

using V = ggml_simd::avx2;

// ---- GEMM micro-kernel ---------------------------------------------------------------------
constexpr int MR = 16, NR = 6;

// Named accumulators: with an array of 12 __m256 (all 16 registers in use) GCC 12 keeps
// storing the array to the stack inside the loop, halving the speed.
void micro_f32(int64_t nu, const void * a, const void * b, float * c, size_t ldc, bool accumulate) {
    const float * A = (const float *) a;
    const float * B = (const float *) b;
    __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    if (accumulate) {
        c00 = _mm256_loadu_ps(c + 0 * ldc); c01 = _mm256_loadu_ps(c + 0 * ldc + 8);
        c10 = _mm256_loadu_ps(c + 1 * ldc); c11 = _mm256_loadu_ps(c + 1 * ldc + 8);
        c20 = _mm256_loadu_ps(c + 2 * ldc); c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
        c30 = _mm256_loadu_ps(c + 3 * ldc); c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
        c40 = _mm256_loadu_ps(c + 4 * ldc); c41 = _mm256_loadu_ps(c + 4 * ldc + 8);
        c50 = _mm256_loadu_ps(c + 5 * ldc); c51 = _mm256_loadu_ps(c + 5 * ldc + 8);
    } else {
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
    }
    for (int64_t u = 0; u < nu; u++) {
        const __m256 a0 = _mm256_loadu_ps(A), a1 = _mm256_loadu_ps(A + 8);
        __m256 bj;
        bj = _mm256_broadcast_ss(B + 0); c00 = _mm256_fmadd_ps(a0, bj, c00); c01 = _mm256_fmadd_ps(a1, bj, c01);
        bj = _mm256_broadcast_ss(B + 1); c10 = _mm256_fmadd_ps(a0, bj, c10); c11 = _mm256_fmadd_ps(a1, bj, c11);
        bj = _mm256_broadcast_ss(B + 2); c20 = _mm256_fmadd_ps(a0, bj, c20); c21 = _mm256_fmadd_ps(a1, bj, c21);
        bj = _mm256_broadcast_ss(B + 3); c30 = _mm256_fmadd_ps(a0, bj, c30); c31 = _mm256_fmadd_ps(a1, bj, c31);
        bj = _mm256_broadcast_ss(B + 4); c40 = _mm256_fmadd_ps(a0, bj, c40); c41 = _mm256_fmadd_ps(a1, bj, c41);
        bj = _mm256_broadcast_ss(B + 5); c50 = _mm256_fmadd_ps(a0, bj, c50); c51 = _mm256_fmadd_ps(a1, bj, c51);
        A += MR;
        B += NR;
    }
    _mm256_storeu_ps(c + 0 * ldc, c00); _mm256_storeu_ps(c + 0 * ldc + 8, c01);
    _mm256_storeu_ps(c + 1 * ldc, c10); _mm256_storeu_ps(c + 1 * ldc + 8, c11);
    _mm256_storeu_ps(c + 2 * ldc, c20); _mm256_storeu_ps(c + 2 * ldc + 8, c21);
    _mm256_storeu_ps(c + 3 * ldc, c30); _mm256_storeu_ps(c + 3 * ldc + 8, c31);
    _mm256_storeu_ps(c + 4 * ldc, c40); _mm256_storeu_ps(c + 4 * ldc + 8, c41);
    _mm256_storeu_ps(c + 5 * ldc, c50); _mm256_storeu_ps(c + 5 * ldc + 8, c51);
}

}  // namespace

// Dot tiles: 16 ymm registers hold at most 4 x 2 accumulators; wider tiles go 2 columns at a time.
const ggml_mm_type_kernels * mm_type(ggml_type type) {
    return ggml_simd::float_mm<V, 2, micro_f32, MR, NR, 256, 128, 64, 20, ggml_simd::fp32_to_bf16<V>>::type(type);
}

}  // namespace ggml_cpu_avx2

#endif  // GGML_SIMD_AVX2
