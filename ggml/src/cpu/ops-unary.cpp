// ops-unary.cpp - GGML_OP_UNARY kernels (abs, sgn, neg, step, tanh, relu, sigmoid, gelu, silu,
// exp), the vectorized exp they build on, and unary_back (grad * f'(x) for each of them).
//
// exp(x) = 2^n * e^r with n = round(x / ln2), r = x - n ln2 (Cody-Waite split of ln2, so r is
// exact), e^r = 1 + r + r^2 q(r) with q a degree-4 fit on Chebyshev nodes of [-ln2/2, ln2/2]
// (relative error 1e-8 before rounding), evaluated by Horner's rule. 2^n is applied as
// 2^(n/2) * 2^(n - n/2) (AVX512: scalef) so that results down to the subnormal range and up
// to overflow come out right without branches. The SIMD and scalar paths run the same steps;
// vector tails are padded, so an element's value never depends on where it sits in a row.
#include "ops-common.h"

#include <math.h>
#include <string.h>

// GCC 12 flags the _mm512_undefined_* inside its own AVX512 intrinsics (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace {

// Cody-Waite: LN2_HI has few significant bits so n * LN2_HI is exact for |n| < 2^10.
constexpr float EXP_LOG2E  = 0x1.715476p+0f;
constexpr float EXP_LN2_HI = 0x1.62e400p-1f;
constexpr float EXP_LN2_LO = 0x1.7f7d1cp-20f;
constexpr float EXP_SHIFT  = 0x1.8p23f;        // adding it rounds to an integer kept in the low mantissa bits
constexpr float EXP_X_MIN  = -104.0f;          // exp below rounds to 0
constexpr float EXP_X_MAX  =   89.0f;          // exp above overflows to inf
constexpr float EXP_C2 = 0x1.000000p-1f;
constexpr float EXP_C3 = 0x1.5554dcp-3f;
constexpr float EXP_C4 = 0x1.55551ap-5f;
constexpr float EXP_C5 = 0x1.120b90p-7f;
constexpr float EXP_C6 = 0x1.6d112cp-10f;

// gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), equals x sigmoid(2u):
// the sigmoid form has no cancellation for negative x. GELU_A + GELU_B x^2 = -2u / x.
constexpr float GELU_A = -1.5957691216057308f;            // -2 sqrt(2/pi)
constexpr float GELU_B = -0.07135481627260025f;           // -2 sqrt(2/pi) 0.044715

enum class ExpKind { exp, silu, sigmoid, gelu };

#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
inline float fma_f32(float a, float b, float c) { return fmaf(a, b, c); }
#else
inline float fma_f32(float a, float b, float c) { return a * b + c; }
#endif

inline float bits_to_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
inline int32_t f32_to_bits(float f) { int32_t u; memcpy(&u, &f, 4); return u; }

inline float exp_scalar(float x) {
    // written so NaN passes the clamps
    x = x < EXP_X_MIN ? EXP_X_MIN : x;
    x = x > EXP_X_MAX ? EXP_X_MAX : x;
    const float t = fma_f32(x, EXP_LOG2E, EXP_SHIFT);
    const float n = t - EXP_SHIFT;
    float r = fma_f32(n, -EXP_LN2_HI, x);
    r = fma_f32(n, -EXP_LN2_LO, r);
    float q = fma_f32(EXP_C6, r, EXP_C5);
    q = fma_f32(q, r, EXP_C4);
    q = fma_f32(q, r, EXP_C3);
    q = fma_f32(q, r, EXP_C2);
    q = fma_f32(q, r, 1.0f);
    const float p = fma_f32(q, r, 1.0f);
    const int32_t ni = f32_to_bits(t) - f32_to_bits(EXP_SHIFT);
    const int32_t n1 = ni >> 1, n2 = ni - n1;
    return p * bits_to_f32((uint32_t) (n1 + 127) << 23) * bits_to_f32((uint32_t) (n2 + 127) << 23);
}

// v * sigmoid(w), as v / (1 + e) for w >= 0 and v e / (1 + e) for w < 0 with e = exp(-|w|):
// e never overflows, so tiny results (silu(-95) ~ -5e-40) keep their relative accuracy.
inline float mul_sigmoid_scalar(float v, float w) {
    const float e = exp_scalar(-fabsf(w));
    return (w >= 0.0f ? v : v * e) / (1.0f + e);
}

template <ExpKind K> inline float eval_scalar(float x) {
    if constexpr (K == ExpKind::exp)     return exp_scalar(x);
    if constexpr (K == ExpKind::silu)    return mul_sigmoid_scalar(x, x);
    if constexpr (K == ExpKind::sigmoid) return mul_sigmoid_scalar(1.0f, x);
    if constexpr (K == ExpKind::gelu)    return mul_sigmoid_scalar(x, -x * fma_f32(GELU_B, x * x, GELU_A));
}

#if defined(GGML_SIMD_AVX512)
inline __m512 exp_avx512(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(EXP_X_MIN), x);  // max/min return x when x is NaN
    x = _mm512_min_ps(_mm512_set1_ps(EXP_X_MAX), x);
    // scalef applies 2^n with one rounding, subnormal and overflowing results included
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(EXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_LN2_LO), r);
    __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(EXP_C6), r, _mm512_set1_ps(EXP_C5));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(EXP_C4));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(EXP_C3));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(EXP_C2));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f));
    const __m512 p = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

inline __m512 mul_sigmoid_avx512(__m512 v, __m512 w) {
    const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(w)));
    const __mmask16 pos = _mm512_cmp_ps_mask(w, _mm512_setzero_ps(), _CMP_GE_OQ);
    const __m512 num = _mm512_mask_blend_ps(pos, _mm512_mul_ps(v, e), v);
    return _mm512_div_ps(num, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

template <ExpKind K> inline __m512 eval_avx512(__m512 x) {
    if constexpr (K == ExpKind::exp)     return exp_avx512(x);
    if constexpr (K == ExpKind::silu)    return mul_sigmoid_avx512(x, x);
    if constexpr (K == ExpKind::sigmoid) return mul_sigmoid_avx512(_mm512_set1_ps(1.0f), x);
    if constexpr (K == ExpKind::gelu) {
        const __m512 a = _mm512_fmadd_ps(_mm512_set1_ps(GELU_B), _mm512_mul_ps(x, x), _mm512_set1_ps(GELU_A));
        return mul_sigmoid_avx512(x, _mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(x, a)));
    }
}
#endif

#if defined(GGML_SIMD_AVX2)
inline __m256 exp_avx2(__m256 x) {
    x = _mm256_max_ps(_mm256_set1_ps(EXP_X_MIN), x);
    x = _mm256_min_ps(_mm256_set1_ps(EXP_X_MAX), x);
    const __m256 shift = _mm256_set1_ps(EXP_SHIFT);
    const __m256 t = _mm256_fmadd_ps(x, _mm256_set1_ps(EXP_LOG2E), shift);
    const __m256 n = _mm256_sub_ps(t, shift);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_LN2_LO), r);
    __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(EXP_C6), r, _mm256_set1_ps(EXP_C5));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(EXP_C4));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(EXP_C3));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(EXP_C2));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f));
    const __m256 p = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f));
    const __m256i ni = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_castps_si256(shift));
    const __m256i n1 = _mm256_srai_epi32(ni, 1);
    const __m256i n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

inline __m256 mul_sigmoid_avx2(__m256 v, __m256 w) {
    const __m256 absw = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), w);
    const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), absw));
    const __m256 pos = _mm256_cmp_ps(w, _mm256_setzero_ps(), _CMP_GE_OQ);
    const __m256 num = _mm256_blendv_ps(_mm256_mul_ps(v, e), v, pos);
    return _mm256_div_ps(num, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

template <ExpKind K> inline __m256 eval_avx2(__m256 x) {
    if constexpr (K == ExpKind::exp)     return exp_avx2(x);
    if constexpr (K == ExpKind::silu)    return mul_sigmoid_avx2(x, x);
    if constexpr (K == ExpKind::sigmoid) return mul_sigmoid_avx2(_mm256_set1_ps(1.0f), x);
    if constexpr (K == ExpKind::gelu) {
        const __m256 a = _mm256_fmadd_ps(_mm256_set1_ps(GELU_B), _mm256_mul_ps(x, x), _mm256_set1_ps(GELU_A));
        return mul_sigmoid_avx2(x, _mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(x, a)));
    }
}
#endif

#if defined(GGML_SIMD_NEON)
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
#endif

// y[i] = K(x[i]); y may equal x.
template <ExpKind K> void vec_apply(float * y, const float * x, int64_t n) {
    int64_t i = 0;
#if defined(GGML_SIMD_AVX512)
    for (; i + 16 <= n; i += 16) {
        _mm512_storeu_ps(y + i, eval_avx512<K>(_mm512_loadu_ps(x + i)));
    }
    if (i < n) {
        const __mmask16 m = (__mmask16) ((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, eval_avx512<K>(_mm512_maskz_loadu_ps(m, x + i)));
    }
#elif defined(GGML_SIMD_AVX2)
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i, eval_avx2<K>(_mm256_loadu_ps(x + i)));
    }
    if (i < n) {
        float tmp[8] = {0};
        memcpy(tmp, x + i, (size_t) (n - i) * sizeof(float));
        _mm256_storeu_ps(tmp, eval_avx2<K>(_mm256_loadu_ps(tmp)));
        memcpy(y + i, tmp, (size_t) (n - i) * sizeof(float));
    }
#elif defined(GGML_SIMD_NEON)
    for (; i + 4 <= n; i += 4) {
        vst1q_f32(y + i, eval_neon<K>(vld1q_f32(x + i)));
    }
    if (i < n) {
        float tmp[4] = {0};
        memcpy(tmp, x + i, (size_t) (n - i) * sizeof(float));
        vst1q_f32(tmp, eval_neon<K>(vld1q_f32(tmp)));
        memcpy(y + i, tmp, (size_t) (n - i) * sizeof(float));
    }
#else
    for (; i < n; i++) y[i] = eval_scalar<K>(x[i]);
#endif
}

}  // namespace

extern "C" float ggml_cpu_exp_f32(float x) { return exp_scalar(x); }
extern "C" void ggml_cpu_vec_exp_f32    (float * y, const float * x, int64_t n) { vec_apply<ExpKind::exp>(y, x, n); }
extern "C" void ggml_cpu_vec_silu_f32   (float * y, const float * x, int64_t n) { vec_apply<ExpKind::silu>(y, x, n); }
extern "C" void ggml_cpu_vec_sigmoid_f32(float * y, const float * x, int64_t n) { vec_apply<ExpKind::sigmoid>(y, x, n); }

void ggml_cpu_forward_unary(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const struct ggml_tensor * src = dst->src[0];
    GGML_ASSERT(src != NULL);
    GGML_ASSERT(dst->type == src->type);

    const enum ggml_unary_op op = (enum ggml_unary_op) ggml_get_op_params_i32(dst, 0);
    switch (op) {
        case GGML_UNARY_OP_ABS:
            ggml_cpu_map_rows_f32(params, dst, src, [](float * y, const float * x, int64_t n) {
                for (int64_t i = 0; i < n; i++) y[i] = fabsf(x[i]);
            });
            break;
        case GGML_UNARY_OP_SGN:
            ggml_cpu_map_rows_f32(params, dst, src, [](float * y, const float * x, int64_t n) {
                for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? 1.0f : (x[i] < 0.0f ? -1.0f : 0.0f);
            });
            break;
        case GGML_UNARY_OP_NEG:
            ggml_cpu_map_rows_f32(params, dst, src, [](float * y, const float * x, int64_t n) {
                for (int64_t i = 0; i < n; i++) y[i] = -x[i];
            });
            break;
        case GGML_UNARY_OP_STEP:
            ggml_cpu_map_rows_f32(params, dst, src, [](float * y, const float * x, int64_t n) {
                for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? 1.0f : 0.0f;
            });
            break;
        case GGML_UNARY_OP_TANH:
            // not hot in llama models: libm's tanhf keeps full relative accuracy near 0
            ggml_cpu_map_rows_f32(params, dst, src, [](float * y, const float * x, int64_t n) {
                for (int64_t i = 0; i < n; i++) y[i] = tanhf(x[i]);
            });
            break;
        case GGML_UNARY_OP_RELU:
            ggml_cpu_map_rows_f32(params, dst, src, [](float * y, const float * x, int64_t n) {
                for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
            });
            break;
        case GGML_UNARY_OP_SIGMOID: ggml_cpu_map_rows_f32(params, dst, src, vec_apply<ExpKind::sigmoid>); break;
        case GGML_UNARY_OP_GELU:    ggml_cpu_map_rows_f32(params, dst, src, vec_apply<ExpKind::gelu>);    break;
        case GGML_UNARY_OP_SILU:    ggml_cpu_map_rows_f32(params, dst, src, vec_apply<ExpKind::silu>);    break;
        case GGML_UNARY_OP_EXP:     ggml_cpu_map_rows_f32(params, dst, src, vec_apply<ExpKind::exp>);     break;
        default:
            GGML_ABORT("ggml_cpu_forward_unary: unknown unary op %d", (int) op);
    }
}

// ---- unary_back: grad * f'(x) ------------------------------------------------------------------
namespace {

// sigmoid(w) and 1 - sigmoid(w) from e = exp(-|w|), each without cancellation.
inline void sigmoid_pair(float w, float e, float * s, float * sm) {
    const float inv = 1.0f / (1.0f + e);
    *s  = (w >= 0.0f ? 1.0f : e) * inv;
    *sm = (w >= 0.0f ? e : 1.0f) * inv;
}

// d[i] = g[i] * f'(x[i]) for n <= GGML_CPU_CHUNK elements; t is scratch. The exponentials go
// through the vectorized exp, whose value for an element does not depend on its position.
void unary_back_chunk(ggml_unary_op op, float * d, const float * g, const float * x, float * t, int64_t n) {
    switch (op) {
        case GGML_UNARY_OP_ABS:
            for (int64_t i = 0; i < n; i++) d[i] = x[i] > 0.0f ? g[i] : (x[i] < 0.0f ? -g[i] : 0.0f);
            break;
        case GGML_UNARY_OP_SGN:
        case GGML_UNARY_OP_STEP:
            for (int64_t i = 0; i < n; i++) d[i] = 0.0f;
            break;
        case GGML_UNARY_OP_NEG:
            for (int64_t i = 0; i < n; i++) d[i] = -g[i];
            break;
        case GGML_UNARY_OP_RELU:
            for (int64_t i = 0; i < n; i++) d[i] = x[i] > 0.0f ? g[i] : 0.0f;
            break;
        case GGML_UNARY_OP_TANH:
            // 1 - tanh(x)^2 = 4e / (1 + e)^2 with e = exp(-2|x|): no cancellation for large |x|
            for (int64_t i = 0; i < n; i++) t[i] = -2.0f * fabsf(x[i]);
            vec_apply<ExpKind::exp>(t, t, n);
            for (int64_t i = 0; i < n; i++) d[i] = g[i] * (4.0f * t[i] / ((1.0f + t[i]) * (1.0f + t[i])));
            break;
        case GGML_UNARY_OP_SIGMOID:
            // s (1 - s) = e / (1 + e)^2 with e = exp(-|x|)
            for (int64_t i = 0; i < n; i++) t[i] = -fabsf(x[i]);
            vec_apply<ExpKind::exp>(t, t, n);
            for (int64_t i = 0; i < n; i++) d[i] = g[i] * (t[i] / ((1.0f + t[i]) * (1.0f + t[i])));
            break;
        case GGML_UNARY_OP_SILU:
            // s (1 + x (1 - s)), s = sigmoid(x)
            for (int64_t i = 0; i < n; i++) t[i] = -fabsf(x[i]);
            vec_apply<ExpKind::exp>(t, t, n);
            for (int64_t i = 0; i < n; i++) {
                float s, sm;
                sigmoid_pair(x[i], t[i], &s, &sm);
                d[i] = g[i] * (s * (1.0f + x[i] * sm));
            }
            break;
        case GGML_UNARY_OP_GELU:
            // the forward is x s(w) with w = -x (GELU_A + GELU_B x^2), so the derivative is
            // s(w) (1 + x (1 - s(w)) w'), w' = -(GELU_A + 3 GELU_B x^2)
            for (int64_t i = 0; i < n; i++) t[i] = -fabsf(-x[i] * fma_f32(GELU_B, x[i] * x[i], GELU_A));
            vec_apply<ExpKind::exp>(t, t, n);
            for (int64_t i = 0; i < n; i++) {
                const float w = -x[i] * fma_f32(GELU_B, x[i] * x[i], GELU_A);
                const float wp = -fma_f32(3.0f * GELU_B, x[i] * x[i], GELU_A);
                float s, sm;
                sigmoid_pair(w, t[i], &s, &sm);
                d[i] = g[i] * (s * (1.0f + x[i] * sm * wp));
            }
            break;
        case GGML_UNARY_OP_EXP:
            vec_apply<ExpKind::exp>(t, x, n);
            for (int64_t i = 0; i < n; i++) d[i] = g[i] * t[i];
            break;
        default:
            GGML_ABORT("unary_back: unknown unary op %d", (int) op);
    }
}

}  // namespace

// src0 grad, src1 x (F32/F16/BF16, any strides, same shape) -> dst F32 = grad * f'(x). Rows
// are split across threads and processed in chunks; each element's value depends only on its
// own grad and x.
extern "C" void ggml_cpu_forward_unary_back(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * grad = dst->src[0];
    const ggml_tensor * x = dst->src[1];
    GGML_ASSERT(grad != nullptr && x != nullptr);
    GGML_ASSERT(ggml_cpu_is_float_type(grad->type) && ggml_cpu_is_float_type(x->type) && dst->type == GGML_TYPE_F32);
    GGML_ASSERT(ggml_are_same_shape(grad, dst) && ggml_are_same_shape(x, dst));
    const ggml_unary_op op = (ggml_unary_op) ggml_get_op_params_i32(dst, 0);
    GGML_ASSERT(op >= 0 && op < GGML_UNARY_OP_COUNT && "unary_back: unknown unary op");

    const int64_t ne0 = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2];
    float gb[GGML_CPU_CHUNK], xb[GGML_CPU_CHUNK], tb[GGML_CPU_CHUNK], db[GGML_CPU_CHUNK];
    int64_t r0, r1;
    ggml_cpu_split_rows(ggml_nrows(dst), params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const char * gr = ggml_cpu_elem_ptr(grad, 0, i1, i2, i3);
        const char * xr = ggml_cpu_elem_ptr(x, 0, i1, i2, i3);
        char * yr = ggml_cpu_elem_ptr(dst, 0, i1, i2, i3);
        for (int64_t c = 0; c < ne0; c += GGML_CPU_CHUNK) {
            const int64_t n = ne0 - c < GGML_CPU_CHUNK ? ne0 - c : GGML_CPU_CHUNK;
            ggml_cpu_gather_f32(grad->type, gr + c * grad->nb[0], grad->nb[0], gb, n);
            ggml_cpu_gather_f32(x->type, xr + c * x->nb[0], x->nb[0], xb, n);
            unary_back_chunk(op, db, gb, xb, tb, n);
            ggml_cpu_scatter_f32(GGML_TYPE_F32, db, yr + c * dst->nb[0], dst->nb[0], n);
        }
    }
}
