// ops-avx512.cpp - the AVX512 float rows of the ops (kernels.h): exp, silu, sigmoid and gelu
// (vec-math.h: the scalar steps, 16 lanes at a time, 2^n by scalef, the tail masked), softmax's
// row max, and F16 <-> F32 rows.
// GCC 12 flags the _mm512_undefined_* inside its own AVX512 intrinsics (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "kernels-x86.h"
#include "ggml-cpu/vec-math.h"

#if defined(GGML_SIMD_AVX512)

#include <immintrin.h>

#include <math.h>

namespace ggml_cpu_avx512 {
namespace {

using namespace ggml_vec_math;

// Lanes at or below EXP_X_MIN (-inf among them: a softmax's masked logits) give +0 without
// going through scalef: an underflowing scalef costs a microcode assist, about 25 times the
// whole computation (5.3 against 0.2 ns an element on Sapphire Rapids). The same bits.
inline __m512 exp_avx512(__m512 x) {
    const __mmask16 zero = _mm512_cmp_ps_mask(x, _mm512_set1_ps(EXP_X_MIN), _CMP_LE_OQ);
    if (zero == 0xFFFF) return _mm512_setzero_ps();
    x = _mm512_mask_blend_ps(zero, x, _mm512_setzero_ps());
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
    return _mm512_maskz_scalef_ps((__mmask16) ~zero, p, n);
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

// y[i] = K(x[i]); y may equal x.
template <ExpKind K> void vec_apply(float * y, const float * x, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm512_storeu_ps(y + i, eval_avx512<K>(_mm512_loadu_ps(x + i)));
    }
    if (i < n) {
        const __mmask16 m = (__mmask16) ((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, eval_avx512<K>(_mm512_maskz_loadu_ps(m, x + i)));
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
    __m512 vm = _mm512_set1_ps(-INFINITY);
    for (; i + 16 <= n; i += 16) vm = _mm512_max_ps(vm, _mm512_loadu_ps(w + i));
    m = _mm512_reduce_max_ps(vm);
    for (; i < n; i++) m = w[i] > m ? w[i] : m;
    return m;
}

// softmax's logits, masked and scaled as the steps one by one do them (x * scale, then one fma
// with the mask), and their max, in one pass.
float soft_max_logits(float * w, const float * x, const void * mask, int mask_f16, float scale, float slope, int64_t n) {
    const __m512 vscale = _mm512_set1_ps(scale), vslope = _mm512_set1_ps(slope);
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16) 0xFFFF : (__mmask16) ((1u << (n - i)) - 1);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vscale);
        if (mask) {
            const __m512 mk = mask_f16 ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const ggml_fp16_t *) mask + i))
                                       : _mm512_maskz_loadu_ps(m, (const float *) mask + i);
            v = _mm512_fmadd_ps(vslope, mk, v);
        }
        _mm512_mask_storeu_ps(w + i, m, v);
        vmax = _mm512_mask_max_ps(vmax, m, vmax, v);
    }
    return _mm512_reduce_max_ps(vmax);
}

// w[i] = exp(w[i] - max), summed in double as row_sum (softmax-row.h) does: 8 partial sums by
// position (the low and high halves of each 16 in turn), then pairwise. One pass: the separate
// subtraction (written 32 bytes at a time by the compiler) stalled the exp's 64-byte loads on
// store forwarding.
double exp_sub_max_sum(float * w, int64_t n, float max) {
    const __m512 vmax = _mm512_set1_ps(max);
    __m512d acc = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_loadu_ps(w + i), vmax));
        _mm512_storeu_ps(w + i, e);
        acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
    }
    if (i < n) {
        const int r = (int) (n - i);
        const __mmask16 m = (__mmask16) ((1u << r) - 1);
        const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, w + i), vmax));
        _mm512_mask_storeu_ps(w + i, m, e);
        acc = _mm512_mask_add_pd(acc, (__mmask8) m, acc, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        acc = _mm512_mask_add_pd(acc, (__mmask8) (m >> 8), acc, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
    }
    alignas(64) double a[8];
    _mm512_store_pd(a, acc);
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

void f16_to_f32_row(const ggml_fp16_t * x, float * y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) (x + i))));
    }
    for (; i < n; i++) y[i] = GGML_FP16_TO_FP32(x[i]);
}

// Round to nearest even (the hardware conversion and the scalar one agree except NaN payloads).
void f32_to_f16_row(const float * x, ggml_fp16_t * y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_si256((__m256i *) (y + i), _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    for (; i < n; i++) y[i] = GGML_FP32_TO_FP16(x[i]);
}

}  // namespace ggml_cpu_avx512

#endif  // GGML_SIMD_AVX512
