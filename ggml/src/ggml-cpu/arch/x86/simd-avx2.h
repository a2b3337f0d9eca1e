// simd-avx2.h - the AVX2 (+ FMA + F16C) vector type of simd.h and vec-math.h: 8 floats in a
// __m256. AVX512 builds compile it too (the AVX2 set is the AVX512 one's base).
#pragma once

#include "ggml-cpu/simd.h"

#include <immintrin.h>

#include <string.h>

namespace ggml_simd {

struct avx2 {
    typedef __m256  f;
    typedef __m256i i;
    typedef __m256  m;
    static constexpr int N = 8;
    // Loops end in scalar tails (axpy, conversions) as they always have; load_part / store_part
    // (vmaskmovps; halves through a copy) serve the padded tails of exp & co. and the packing.
    static constexpr bool MASKED = false;

    // The first n (0 < n <= 8) lanes: vmaskmovps reads and writes those only.
    static __m256i lanes(int64_t n) { return _mm256_cmpgt_epi32(_mm256_set1_epi32((int) n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); }

    static f load(const float * p) { return _mm256_loadu_ps(p); }
    static void store(float * p, f v) { _mm256_storeu_ps(p, v); }
    static f load_part(const float * p, int64_t n) { return _mm256_maskload_ps(p, lanes(n)); }
    static void store_part(float * p, f v, int64_t n) { _mm256_maskstore_ps(p, lanes(n), v); }
    static f set1(float x) { return _mm256_set1_ps(x); }
    static f zero() { return _mm256_setzero_ps(); }
    static f add(f a, f b) { return _mm256_add_ps(a, b); }
    static f sub(f a, f b) { return _mm256_sub_ps(a, b); }
    static f mul(f a, f b) { return _mm256_mul_ps(a, b); }
    static f div(f a, f b) { return _mm256_div_ps(a, b); }
    static f fma(f a, f b, f c) { return _mm256_fmadd_ps(a, b, c); }
    static f fnma(f a, f b, f c) { return _mm256_fnmadd_ps(a, b, c); }
    static f max(f a, f b) { return _mm256_max_ps(a, b); }  // b when either is NaN
    static f min(f a, f b) { return _mm256_min_ps(a, b); }
    static f abs(f a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
    static f neg(f a) { return _mm256_sub_ps(_mm256_setzero_ps(), a); }
    static m ge(f a, f b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
    static f select(m c, f a, f b) { return _mm256_blendv_ps(b, a, c); }
    static i bits(f a) { return _mm256_castps_si256(a); }
    static f from_bits(i a) { return _mm256_castsi256_ps(a); }
    static i iset1(int32_t x) { return _mm256_set1_epi32(x); }
    static i iadd(i a, i b) { return _mm256_add_epi32(a, b); }
    static i isub(i a, i b) { return _mm256_sub_epi32(a, b); }
    template <int K> static i sra(i a) { return _mm256_srai_epi32(a, K); }
    template <int K> static i shl(i a) { return _mm256_slli_epi32(a, K); }
    template <int K> static i srl(i a) { return _mm256_srli_epi32(a, K); }
    static i iand(i a, i b) { return _mm256_and_si256(a, b); }
    static i ior(i a, i b) { return _mm256_or_si256(a, b); }
    static i igt(i a, i b) { return _mm256_cmpgt_epi32(a, b); }
    static i iselect(i c, i a, i b) { return _mm256_blendv_epi8(b, a, c); }
    static void store_u16(uint16_t * p, i v) {  // values < 2^16
        _mm_storeu_si128((__m128i *) p, _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
    }

    static float hmax(f v) {
        float l[8], mx = -INFINITY;
        _mm256_storeu_ps(l, v);
        for (int k = 0; k < 8; k++) mx = l[k] > mx ? l[k] : mx;
        return mx;
    }
    // Fixed reduction tree, so a given accumulator always sums to the same float.
    static float hsum(f v) {
        __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
        s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
        return _mm_cvtss_f32(s4);
    }

    static f load(const ggml_fp16_t * p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) p)); }
    static void store(ggml_fp16_t * p, f v) {
        _mm_storeu_si128((__m128i *) p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    static f load(const ggml_bf16_t * p) {
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *) p)), 16));
    }
    // No 16-bit masked loads: the halves go through a zeroed copy.
    template <typename T> static void copy_part(T * buf, const T * p, int64_t n) {
        memset(buf, 0, 8 * sizeof(T));
        memcpy(buf, p, n * sizeof(T));
    }
    static f load_part(const ggml_fp16_t * p, int64_t n) { ggml_fp16_t buf[8]; copy_part(buf, p, n); return load(buf); }
    static f load_part(const ggml_bf16_t * p, int64_t n) { ggml_bf16_t buf[8]; copy_part(buf, p, n); return load(buf); }

    // In place: r[j][i] <- r[i][j] for an 8 x 8 block of floats.
    static void transpose(f r[8]) {
        __m256 t[8], u[8];
        for (int k = 0; k < 4; k++) {
            t[2 * k]     = _mm256_unpacklo_ps(r[2 * k], r[2 * k + 1]);
            t[2 * k + 1] = _mm256_unpackhi_ps(r[2 * k], r[2 * k + 1]);
        }
        // u[4g + c], 128-bit lane L: rows 4g..4g+3 of column 4L + c
        for (int g = 0; g < 2; g++) {
            u[4 * g + 0] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(1, 0, 1, 0));
            u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(3, 2, 3, 2));
            u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(1, 0, 1, 0));
            u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(3, 2, 3, 2));
        }
        for (int c = 0; c < 4; c++) {
            r[c]     = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
            r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
        }
    }
};

}  // namespace ggml_simd
