// quant-dot-avx512.cpp - 512-bit VNNI dot products where they beat the 256-bit kernels: Q4_0,
// two blocks per register. Used for the multi-row kernel and (with one row) the single dot,
// so both give the same bits.
#include "kernels-x86.h"

#if defined(GGML_SIMD_AVX512) && defined(__AVX512VNNI__)

#include "simd-avx2.h"
#include "simd-avx512.h"

namespace ggml_cpu_avx512 {
namespace {

inline __m256i load32(const void * p) { return _mm256_loadu_si256((const __m256i *) p); }
inline __m128i load16(const void * p) { return _mm_loadu_si128((const __m128i *) p); }

inline float hsum256(__m256 v) { return ggml_simd::avx2::hsum(v); }

// Two F16 scales as floats in lanes 0 and 1.
inline __m128 two_halves(ggml_fp16_t a, ggml_fp16_t b) {
    return _mm_cvtph_ps(_mm_insert_epi16(_mm_cvtsi32_si128(a), b, 1));
}

// Up to 4 rows of Q4_0 against one Q8_0 row. Per pair of blocks (i, j = i + 1), the weight
// nibbles form [i low, j low, i high, j high] (16 bytes each) and the activations are permuted
// to match; vpdpbusd sums unsigned nibbles times signed activations, and 8 * sum(y) (shared by
// the rows) takes out the -8 offset. Lanes 0-3 and 8-11 belong to block i, 4-7 and 12-15 to j.
void dot_rows_q4_0(int64_t n, const void * va, size_t lda, int nr, const void * vb, float * s) {
    const block_q8_0 * b = (const block_q8_0 *) vb;
    const block_q4_0 * a[4];
    for (int r = 0; r < 4; r++) a[r] = (const block_q4_0 *) ((const char *) va + (r < nr ? r : 0) * lda);
    __m512 acc[4] = { _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps() };
    const __m512i m4 = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8), zero = _mm512_setzero_si512();
    const __m512i lane_block = _mm512_set_epi32(1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0);
    const int64_t nb = n / QK4_0;
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        __m512i y = _mm512_inserti64x4(_mm512_castsi256_si512(load32(b[i].qs)), load32(b[i + 1].qs), 1);
        y = _mm512_shuffle_i64x2(y, y, _MM_SHUFFLE(3, 1, 2, 0));
        const __m512i y8 = _mm512_dpbusd_epi32(zero, eight, y);
        const __m128 db = two_halves(b[i].d, b[i + 1].d);
        for (int r = 0; r < nr; r++) {
            const block_q4_0 * ar = a[r] + i;
            _mm_prefetch((const char *) ar + 4096, _MM_HINT_T0);
            const __m256i q = _mm256_set_m128i(load16(ar[1].qs), load16(ar[0].qs));
            const __m512i u = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1), m4);
            const __m512i sum = _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, u, y), y8);
            const __m128 sc2 = _mm_mul_ps(two_halves(ar[0].d, ar[1].d), db);
            const __m512 sc = _mm512_permutexvar_ps(lane_block, _mm512_castps128_ps512(sc2));
            acc[r] = _mm512_fmadd_ps(sc, _mm512_cvtepi32_ps(sum), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) {
        float tail = 0.0f;
        if (i < nb) {  // an odd last block, in 256-bit registers
            const __m128i q = load16(a[r][i].qs);
            const __m256i u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
            const __m256i y = load32(b[i].qs);
            const __m256i sum = _mm256_sub_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), u, y),
                                                 _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(8), y));
            const float sc = _cvtsh_ss(a[r][i].d) * _cvtsh_ss(b[i].d);
            tail = hsum256(_mm256_mul_ps(_mm256_set1_ps(sc), _mm256_cvtepi32_ps(sum)));
        }
        s[r] = _mm512_reduce_add_ps(acc[r]) + tail;
    }
}

float dot_q4_0(int64_t n, const void * a, const void * b) {
    float s;
    dot_rows_q4_0(n, a, 0, 1, b, &s);
    return s;
}

}  // namespace

ggml_quant_dot_fn quant_dot(ggml_type type) {
    if (type == GGML_TYPE_Q4_0) return dot_q4_0;
#if defined(__AVX512VBMI__)
    return quant_dot_iq(type);
#else
    return nullptr;
#endif
}

ggml_quant_dot_rows_fn quant_dot_rows(ggml_type type) {
    return type == GGML_TYPE_Q4_0 ? dot_rows_q4_0 : nullptr;
}

}  // namespace ggml_cpu_avx512

#endif
