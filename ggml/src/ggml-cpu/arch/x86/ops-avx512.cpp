// ops-avx512.cpp - the AVX512 float rows of softmax that have no form on the other sets (kernels.h:
// soft_max_logits, exp_sub_max_sum): masked tails, and the exp sum in double 8 lanes wide. The rows
// every set has (exp, silu, sigmoid, gelu, row max, F16 rows) are simd.h's.
#include "kernels-x86.h"

#if defined(GGML_SIMD_AVX512)

#include "simd-avx512.h"

#include <algorithm>
#include <math.h>

namespace ggml_cpu_avx512 {

using ggml_simd::mask16;
typedef ggml_simd::avx512 V;

// softmax's logits, masked and scaled as the steps one by one do them (x * scale, then one fma
// with the mask), and their max, in one pass.
float soft_max_logits(float * w, const float * x, const void * mask, int mask_f16, float scale, float slope, int64_t n) {
    const __m512 vscale = _mm512_set1_ps(scale), vslope = _mm512_set1_ps(slope);
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = mask16(std::min<int64_t>(16, n - i));
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
        const __m512 e = ggml_vec_math::exp<V>(_mm512_sub_ps(_mm512_loadu_ps(w + i), vmax));
        _mm512_storeu_ps(w + i, e);
        acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
    }
    if (i < n) {
        const int r = (int) (n - i);
        const __mmask16 m = mask16(r);
        const __m512 e = ggml_vec_math::exp<V>(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, w + i), vmax));
        _mm512_mask_storeu_ps(w + i, m, e);
        acc = _mm512_mask_add_pd(acc, (__mmask8) m, acc, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        acc = _mm512_mask_add_pd(acc, (__mmask8) (m >> 8), acc, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
    }
    alignas(64) double a[8];
    _mm512_store_pd(a, acc);
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

}  // namespace ggml_cpu_avx512

#endif  // GGML_SIMD_AVX512
