// ops-avx2.cpp - the AVX2 float rows of the ops (kernels.h): exp, silu, sigmoid and gelu
// (vec-math.h: the scalar steps, 8 lanes at a time, the tail padded), softmax's row max and F16
// mask, and F16 <-> F32 rows (F16C). AVX512 builds compile them too (the mask row serves there).
#include "kernels-x86.h"
#include "ggml-cpu/vec-math.h"

#if defined(GGML_SIMD_AVX2)

#include <immintrin.h>

#include <math.h>
#include <string.h>

namespace ggml_cpu_avx2 {
namespace {

using namespace ggml_vec_math;

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

// y[i] = K(x[i]); y may equal x.
template <ExpKind K> void vec_apply(float * y, const float * x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i, eval_avx2<K>(_mm256_loadu_ps(x + i)));
    }
    if (i < n) {
        float tmp[8] = {0};
        memcpy(tmp, x + i, (size_t) (n - i) * sizeof(float));
        _mm256_storeu_ps(tmp, eval_avx2<K>(_mm256_loadu_ps(tmp)));
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
    __m256 vm = _mm256_set1_ps(-INFINITY);
    for (; i + 8 <= n; i += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(w + i));
    float lanes[8];
    _mm256_storeu_ps(lanes, vm);
    for (int k = 0; k < 8; k++) m = lanes[k] > m ? lanes[k] : m;
    for (; i < n; i++) m = w[i] > m ? w[i] : m;
    return m;
}

// w[i] += slope * f16 mask[i], one fused multiply-add each (the tail too).
void add_mask_f16(float * w, const ggml_fp16_t * mask, int64_t n, float slope) {
    int64_t i = 0;
    const __m256 vs = _mm256_set1_ps(slope);
    for (; i + 8 <= n; i += 8) {
        const __m256 m = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (mask + i)));
        _mm256_storeu_ps(w + i, _mm256_fmadd_ps(vs, m, _mm256_loadu_ps(w + i)));
    }
    for (; i < n; i++) w[i] = fmaf(slope, GGML_FP16_TO_FP32(mask[i]), w[i]);
}

void f16_to_f32_row(const ggml_fp16_t * x, float * y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (x + i))));
    }
    for (; i < n; i++) y[i] = GGML_FP16_TO_FP32(x[i]);
}

// Round to nearest even (the hardware conversion and the scalar one agree except NaN payloads).
void f32_to_f16_row(const float * x, ggml_fp16_t * y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm_storeu_si128((__m128i *) (y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    for (; i < n; i++) y[i] = GGML_FP32_TO_FP16(x[i]);
}

}  // namespace ggml_cpu_avx2

#endif  // GGML_SIMD_AVX2
