// ops-neon.cpp - the NEON float rows of the ops (kernels.h): exp, silu, sigmoid and gelu
// (vec-math.h: the scalar steps, 4 lanes at a time, the tail padded), softmax's row max and F16
// mask, and F16 <-> F32 rows.
#include "kernels-arm.h"
#include "ggml-cpu/vec-math.h"

#if defined(GGML_SIMD_NEON)

#include <arm_neon.h>

#include <math.h>
#include <string.h>

namespace ggml_cpu_neon {
namespace {

using namespace ggml_vec_math;

inline float32x4_t exp_neon(float32x4_t x) {
    // vmaxq/vminq return NaN when an operand is NaN, so NaN passes the clamps
    x = vmaxq_f32(vdupq_n_f32(EXP_X_MIN), x);
    x = vminq_f32(vdupq_n_f32(EXP_X_MAX), x);
    const float32x4_t shift = vdupq_n_f32(EXP_SHIFT);
    const float32x4_t t = vfmaq_f32(shift, x, vdupq_n_f32(EXP_LOG2E));
    const float32x4_t n = vsubq_f32(t, shift);
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(EXP_LN2_HI));
    r = vfmsq_f32(r, n, vdupq_n_f32(EXP_LN2_LO));
    float32x4_t q = vfmaq_f32(vdupq_n_f32(EXP_C5), vdupq_n_f32(EXP_C6), r);
    q = vfmaq_f32(vdupq_n_f32(EXP_C4), q, r);
    q = vfmaq_f32(vdupq_n_f32(EXP_C3), q, r);
    q = vfmaq_f32(vdupq_n_f32(EXP_C2), q, r);
    q = vfmaq_f32(vdupq_n_f32(1.0f), q, r);
    const float32x4_t p = vfmaq_f32(vdupq_n_f32(1.0f), q, r);
    const int32x4_t ni = vsubq_s32(vreinterpretq_s32_f32(t), vreinterpretq_s32_f32(shift));
    const int32x4_t n1 = vshrq_n_s32(ni, 1);
    const int32x4_t n2 = vsubq_s32(ni, n1);
    const int32x4_t bias = vdupq_n_s32(127);
    const float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, bias), 23));
    const float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, bias), 23));
    return vmulq_f32(vmulq_f32(p, s1), s2);
}

inline float32x4_t mul_sigmoid_neon(float32x4_t v, float32x4_t w) {
    const float32x4_t e = exp_neon(vnegq_f32(vabsq_f32(w)));
    const uint32x4_t pos = vcgeq_f32(w, vdupq_n_f32(0.0f));
    const float32x4_t num = vbslq_f32(pos, v, vmulq_f32(v, e));
    return vdivq_f32(num, vaddq_f32(vdupq_n_f32(1.0f), e));
}

template <ExpKind K> inline float32x4_t eval_neon(float32x4_t x) {
    if constexpr (K == ExpKind::exp)     return exp_neon(x);
    if constexpr (K == ExpKind::silu)    return mul_sigmoid_neon(x, x);
    if constexpr (K == ExpKind::sigmoid) return mul_sigmoid_neon(vdupq_n_f32(1.0f), x);
    if constexpr (K == ExpKind::gelu) {
        const float32x4_t a = vfmaq_f32(vdupq_n_f32(GELU_A), vdupq_n_f32(GELU_B), vmulq_f32(x, x));
        return mul_sigmoid_neon(x, vnegq_f32(vmulq_f32(x, a)));
    }
}

// y[i] = K(x[i]); y may equal x.
template <ExpKind K> void vec_apply(float * y, const float * x, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        vst1q_f32(y + i, eval_neon<K>(vld1q_f32(x + i)));
    }
    if (i < n) {
        float tmp[4] = {0};
        memcpy(tmp, x + i, (size_t) (n - i) * sizeof(float));
        vst1q_f32(tmp, eval_neon<K>(vld1q_f32(tmp)));
        memcpy(y + i, tmp, (size_t) (n - i) * sizeof(float));
    }
}

}  // namespace

void vec_exp(float * y, const float * x, int64_t n) { vec_apply<ExpKind::exp>(y, x, n); }
void vec_silu(float * y, const float * x, int64_t n) { vec_apply<ExpKind::silu>(y, x, n); }
void vec_sigmoid(float * y, const float * x, int64_t n) { vec_apply<ExpKind::sigmoid>(y, x, n); }
void vec_gelu(float * y, const float * x, int64_t n) { vec_apply<ExpKind::gelu>(y, x, n); }

// Largest element of w[0..n) (-inf for an all -inf row). Max is exact, so any order gives the
// same value.
float row_max(const float * w, int64_t n) {
    float m = -INFINITY;
    int64_t i = 0;
    float32x4_t vm = vdupq_n_f32(-INFINITY);
    for (; i + 4 <= n; i += 4) vm = vmaxq_f32(vm, vld1q_f32(w + i));
    m = vmaxvq_f32(vm);
    for (; i < n; i++) m = w[i] > m ? w[i] : m;
    return m;
}

// w[i] += slope * f16 mask[i], one fused multiply-add each (the tail too).
void add_mask_f16(float * w, const ggml_fp16_t * mask, int64_t n, float slope) {
    int64_t i = 0;
    const float32x4_t vs = vdupq_n_f32(slope);
    for (; i + 4 <= n; i += 4) {
        const float32x4_t m = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(mask + i)));
        vst1q_f32(w + i, vfmaq_f32(vld1q_f32(w + i), vs, m));
    }
    for (; i < n; i++) w[i] = fmaf(slope, GGML_FP16_TO_FP32(mask[i]), w[i]);
}

void f16_to_f32_row(const ggml_fp16_t * x, float * y, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        vst1q_f32(y + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x + i))));
    }
    for (; i < n; i++) y[i] = GGML_FP16_TO_FP32(x[i]);
}

// Round to nearest even (the hardware conversion and the scalar one agree except NaN payloads).
void f32_to_f16_row(const float * x, ggml_fp16_t * y, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    }
    for (; i < n; i++) y[i] = GGML_FP32_TO_FP16(x[i]);
}

}  // namespace ggml_cpu_neon

#endif  // GGML_SIMD_NEON
