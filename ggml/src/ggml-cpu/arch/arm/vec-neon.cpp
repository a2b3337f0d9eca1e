// vec-neon.cpp - the NEON matmul kernels of the float types (vec.h, aarch64): simd.h's dot tiles,
// packers and row conversions over simd-neon.h (4 lanes, FMLA; F16 converted with FCVTL, BF16
// by shifting), with a 16 x 6 GEMM micro-kernel (24 q-register accumulators, b by lane).
#include "kernels-arm.h"

#if defined(GGML_SIMD_NEON)

#include "simd-neon.h"

namespace ggml_cpu_neon {
namespace {

using V = ggml_simd::neon;

// ---- GEMM micro-kernel ---------------------------------------------------------------------
constexpr int MR = 16, NR = 6;

void micro_f32(int64_t nu, const void * a, const void * b, float * c, size_t ldc, bool accumulate) {
    const float * A = (const float *) a;
    const float * B = (const float *) b;
    float32x4_t acc[NR][4];
    for (int j = 0; j < NR; j++)
        for (int i = 0; i < 4; i++) acc[j][i] = accumulate ? vld1q_f32(c + j * ldc + 4 * i) : vdupq_n_f32(0.0f);
    for (int64_t u = 0; u < nu; u++) {
        float32x4_t av[4];
        for (int i = 0; i < 4; i++) av[i] = vld1q_f32(A + 4 * i);
        const float32x4_t b0 = vld1q_f32(B);
        const float32x2_t b1 = vld1_f32(B + 4);
        for (int i = 0; i < 4; i++) {
            acc[0][i] = vfmaq_laneq_f32(acc[0][i], av[i], b0, 0);
            acc[1][i] = vfmaq_laneq_f32(acc[1][i], av[i], b0, 1);
            acc[2][i] = vfmaq_laneq_f32(acc[2][i], av[i], b0, 2);
            acc[3][i] = vfmaq_laneq_f32(acc[3][i], av[i], b0, 3);
            acc[4][i] = vfmaq_lane_f32(acc[4][i], av[i], b1, 0);
            acc[5][i] = vfmaq_lane_f32(acc[5][i], av[i], b1, 1);
        }
        A += MR;
        B += NR;
    }
    for (int j = 0; j < NR; j++)
        for (int i = 0; i < 4; i++) vst1q_f32(c + j * ldc + 4 * i, acc[j][i]);
}

}  // namespace

// Dot tiles: 32 q registers hold 4 x 4 accumulators.
const ggml_mm_type_kernels * mm_type(ggml_type type) {
    return ggml_simd::float_mm<V, 4, micro_f32, MR, NR, 256, 128, 64, 20, ggml_simd::fp32_to_bf16<V>>::type(type);
}

}  // namespace ggml_cpu_neon

#endif  // GGML_SIMD_NEON
