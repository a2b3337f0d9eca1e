// simd-avx512.h - the AVX512 (F, BW, VL, DQ) vector type of simd.h and vec-math.h: 16 floats in
// a __m512, partial vectors by mask registers. exp is its own (scalef), and so is the 16 x 16
// register transpose that the GEMM packing and the AMX tiles' pair layout share.
#pragma once

// GCC 12's AVX512 headers start some intrinsics from _mm512_undefined_*(), which trips these
// (false "may be used uninitialized" warnings): off in every file that includes this one.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "ggml-cpu/simd.h"

#include <immintrin.h>

namespace ggml_simd {

inline __mmask16 mask16(int64_t n) { return (__mmask16) ((1u << n) - 1); }  // the first n <= 16 lanes

struct avx512 {
    typedef __m512    f;
    typedef __m512i   i;
    typedef __mmask16 m;
    static constexpr int N = 16;
    static constexpr bool MASKED = true;

    static f load(const float * p) { return _mm512_loadu_ps(p); }
    static void store(float * p, f v) { _mm512_storeu_ps(p, v); }
    static f load_part(const float * p, int64_t n) { return _mm512_maskz_loadu_ps(mask16(n), p); }
    static void store_part(float * p, f v, int64_t n) { _mm512_mask_storeu_ps(p, mask16(n), v); }
    static f set1(float x) { return _mm512_set1_ps(x); }
    static f zero() { return _mm512_setzero_ps(); }
    static f add(f a, f b) { return _mm512_add_ps(a, b); }
    static f sub(f a, f b) { return _mm512_sub_ps(a, b); }
    static f mul(f a, f b) { return _mm512_mul_ps(a, b); }
    static f div(f a, f b) { return _mm512_div_ps(a, b); }
    static f fma(f a, f b, f c) { return _mm512_fmadd_ps(a, b, c); }
    static f fnma(f a, f b, f c) { return _mm512_fnmadd_ps(a, b, c); }
    static f max(f a, f b) { return _mm512_max_ps(a, b); }  // b when either is NaN
    static f min(f a, f b) { return _mm512_min_ps(a, b); }
    static f abs(f a) { return _mm512_abs_ps(a); }
    static f neg(f a) { return _mm512_sub_ps(_mm512_setzero_ps(), a); }
    static m ge(f a, f b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
    static f select(m c, f a, f b) { return _mm512_mask_blend_ps(c, b, a); }

    static float hmax(f v) { return _mm512_reduce_max_ps(v); }
    // Fixed reduction tree, so a given accumulator always sums to the same float.
    static float hsum(f v) {
        const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
        __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
        s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
        s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
        return _mm_cvtss_f32(s4);
    }

    static f load(const ggml_fp16_t * p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) p)); }
    static f load_part(const ggml_fp16_t * p, int64_t n) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask16(n), p)); }
    static void store(ggml_fp16_t * p, f v) {
        _mm256_storeu_si256((__m256i *) p, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    static void store_part(ggml_fp16_t * p, f v, int64_t n) {
        _mm256_mask_storeu_epi16(p, mask16(n), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    static f bf16_to_f32(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
    static f load(const ggml_bf16_t * p) { return bf16_to_f32(_mm256_loadu_si256((const __m256i *) p)); }
    static f load_part(const ggml_bf16_t * p, int64_t n) { return bf16_to_f32(_mm256_maskz_loadu_epi16(mask16(n), p)); }

    // In place: r[j][i] <- r[i][j] for a 16 x 16 block of 32-bit values.
    static void transpose(f r[16]) {
        __m512 t[16], u[16];
        for (int k = 0; k < 8; k++) {
            t[2 * k]     = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
            t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
        }
        // u[4g + c], lane L: rows 4g..4g+3 of column 4L + c
        for (int g = 0; g < 4; g++) {
            const __m512d t0 = _mm512_castps_pd(t[4 * g]), t1 = _mm512_castps_pd(t[4 * g + 1]);
            const __m512d t2 = _mm512_castps_pd(t[4 * g + 2]), t3 = _mm512_castps_pd(t[4 * g + 3]);
            u[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
            u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
            u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
            u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
        }
        for (int c = 0; c < 4; c++) {
            const __m512 xlo = _mm512_shuffle_f32x4(u[c], u[4 + c], _MM_SHUFFLE(1, 0, 1, 0));
            const __m512 xhi = _mm512_shuffle_f32x4(u[c], u[4 + c], _MM_SHUFFLE(3, 2, 3, 2));
            const __m512 ylo = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], _MM_SHUFFLE(1, 0, 1, 0));
            const __m512 yhi = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], _MM_SHUFFLE(3, 2, 3, 2));
            r[c]      = _mm512_shuffle_f32x4(xlo, ylo, _MM_SHUFFLE(2, 0, 2, 0));
            r[4 + c]  = _mm512_shuffle_f32x4(xlo, ylo, _MM_SHUFFLE(3, 1, 3, 1));
            r[8 + c]  = _mm512_shuffle_f32x4(xhi, yhi, _MM_SHUFFLE(2, 0, 2, 0));
            r[12 + c] = _mm512_shuffle_f32x4(xhi, yhi, _MM_SHUFFLE(3, 1, 3, 1));
        }
    }
    static void transpose(__m512i r[16]) {
        __m512 v[16];
        for (int k = 0; k < 16; k++) v[k] = _mm512_castsi512_ps(r[k]);
        transpose(v);
        for (int k = 0; k < 16; k++) r[k] = _mm512_castps_si512(v[k]);
    }
};

}  // namespace ggml_simd

namespace ggml_vec_math {

// AVX512's exp: n rounded by roundscale and 2^n applied by scalef with one rounding, subnormal
// and overflowing results included (vec-math.h's steps otherwise). Lanes at or below EXP_X_MIN
// (-inf among them: a softmax's masked logits) give +0 without going through scalef: an
// underflowing scalef costs a microcode assist, about 25 times the whole computation (5.3
// against 0.2 ns an element on Sapphire Rapids). The same bits.
template <> inline __m512 exp<ggml_simd::avx512>(__m512 x) {
    typedef ggml_simd::avx512 V;
    const __mmask16 zero = _mm512_cmp_ps_mask(x, _mm512_set1_ps(EXP_X_MIN), _CMP_LE_OQ);
    if (zero == 0xFFFF) return _mm512_setzero_ps();
    x = _mm512_mask_blend_ps(zero, x, _mm512_setzero_ps());
    x = V::max(V::set1(EXP_X_MIN), x);  // max/min return x when x is NaN
    x = V::min(V::set1(EXP_X_MAX), x);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(EXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm512_maskz_scalef_ps((__mmask16) ~zero, exp_poly<V>(n, x), n);
}

}  // namespace ggml_vec_math
