// dequant-avx512.cpp - AVX512 row dequantization of the common weight types (Q4_0, Q8_0, Q4_K,
// Q6_K), for out_prod, which converts blocks of a's rows to F32 for its GEMM. Each value is
// computed with the reference's operations (quants-ref.cpp), in its order, so results equal the
// reference's (tests hold them to it); other types use the reference.
#include "kernels-x86.h"
#include "quants.h"

#if defined(GGML_SIMD_AVX512)

#include "simd-avx512.h"

namespace ggml_cpu_avx512 {
namespace {

inline __m512 i8x16_to_f32(__m128i v) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v)); }

// y = d * ((q & 0xF) - 8), then d * ((q >> 4) - 8) for the 16 bytes of each block.
void dequant_q4_0(const void * vx, float * y, int64_t n) {
    const block_q4_0 * x = (const block_q4_0 *) vx;
    const __m128i mask = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
    for (int64_t b = 0; b < n / QK4_0; b++, y += QK4_0) {
        const __m512 d = _mm512_set1_ps(GGML_FP16_TO_FP32(x[b].d));
        const __m128i q = _mm_loadu_si128((const __m128i *) x[b].qs);
        const __m128i lo = _mm_sub_epi8(_mm_and_si128(q, mask), eight);
        const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), mask), eight);
        _mm512_storeu_ps(y, _mm512_mul_ps(d, i8x16_to_f32(lo)));
        _mm512_storeu_ps(y + 16, _mm512_mul_ps(d, i8x16_to_f32(hi)));
    }
}

void dequant_q8_0(const void * vx, float * y, int64_t n) {
    const block_q8_0 * x = (const block_q8_0 *) vx;
    for (int64_t b = 0; b < n / QK8_0; b++, y += QK8_0) {
        const __m512 d = _mm512_set1_ps(GGML_FP16_TO_FP32(x[b].d));
        const __m256i q = _mm256_loadu_si256((const __m256i *) x[b].qs);
        _mm512_storeu_ps(y, _mm512_mul_ps(d, i8x16_to_f32(_mm256_castsi256_si128(q))));
        _mm512_storeu_ps(y + 16, _mm512_mul_ps(d, i8x16_to_f32(_mm256_extracti128_si256(q, 1))));
    }
}

// Sub-block j of 32 values: d_j * q - m_j as one fused operation (as the reference compiles
// under -mfma; the test allows the last-bit difference where it does not).
void dequant_q4_K(const void * vx, float * y, int64_t n) {
    const block_q4_K * x = (const block_q4_K *) vx;
    const __m128i mask = _mm_set1_epi8(0x0F);
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = GGML_FP16_TO_FP32(x[b].d), dmin = GGML_FP16_TO_FP32(x[b].dmin);
        const uint8_t * q = x[b].qs;
        for (int c = 0; c < 4; c++, q += 32, y += 64) {
            uint8_t sc, m;
            get_scale_min_k4(2 * c, x[b].scales, &sc, &m);
            const __m512 d1 = _mm512_set1_ps(d * sc), m1 = _mm512_set1_ps(dmin * m);
            get_scale_min_k4(2 * c + 1, x[b].scales, &sc, &m);
            const __m512 d2 = _mm512_set1_ps(d * sc), m2 = _mm512_set1_ps(dmin * m);
            for (int h = 0; h < 2; h++) {
                const __m128i v = _mm_loadu_si128((const __m128i *) (q + 16 * h));
                const __m128i lo = _mm_and_si128(v, mask), hi = _mm_and_si128(_mm_srli_epi16(v, 4), mask);
                _mm512_storeu_ps(y + 16 * h, _mm512_fmsub_ps(d1, i8x16_to_f32(lo), m1));
                _mm512_storeu_ps(y + 32 + 16 * h, _mm512_fmsub_ps(d2, i8x16_to_f32(hi), m2));
            }
        }
    }
}

// Each 128-value half: value 32 s + l is (nibble of ql[l] or ql[l + 32]) | (bits 2s..2s+1 of
// qh[l]) << 4, minus 32, times (d * scale of its 16 values).
void dequant_q6_K(const void * vx, float * y, int64_t n) {
    const block_q6_K * x = (const block_q6_K *) vx;
    const __m128i mask4 = _mm_set1_epi8(0x0F), mask2 = _mm_set1_epi8(3), off = _mm_set1_epi8(32);
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = GGML_FP16_TO_FP32(x[b].d);
        const uint8_t * ql = x[b].ql;
        const uint8_t * qh = x[b].qh;
        const int8_t * sc = x[b].scales;
        for (int half = 0; half < 2; half++, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l0 = 0; l0 < 32; l0 += 16) {
                const int is = l0 / 16;
                const __m128i a = _mm_loadu_si128((const __m128i *) (ql + l0));
                const __m128i c = _mm_loadu_si128((const __m128i *) (ql + l0 + 32));
                const __m128i h = _mm_loadu_si128((const __m128i *) (qh + l0));
                const __m128i hs[4] = { _mm_and_si128(h, mask2), _mm_and_si128(_mm_srli_epi16(h, 2), mask2),
                                        _mm_and_si128(_mm_srli_epi16(h, 4), mask2), _mm_and_si128(_mm_srli_epi16(h, 6), mask2) };
                const __m128i ls[4] = { _mm_and_si128(a, mask4), _mm_and_si128(c, mask4),
                                        _mm_and_si128(_mm_srli_epi16(a, 4), mask4), _mm_and_si128(_mm_srli_epi16(c, 4), mask4) };
                for (int s = 0; s < 4; s++) {
                    const __m128i v = _mm_sub_epi8(_mm_or_si128(ls[s], _mm_slli_epi16(hs[s], 4)), off);
                    const __m512 scale = _mm512_set1_ps(d * sc[is + 2 * s]);
                    _mm512_storeu_ps(y + 32 * s + l0, _mm512_mul_ps(scale, i8x16_to_f32(v)));
                }
            }
        }
    }
}

}  // namespace

ggml_to_float_t dequant(ggml_type type) {
    switch (type) {
        case GGML_TYPE_Q4_0: return dequant_q4_0;
        case GGML_TYPE_Q8_0: return dequant_q8_0;
        case GGML_TYPE_Q4_K: return dequant_q4_K;
        case GGML_TYPE_Q6_K: return dequant_q6_K;
        default:             return ggml_get_type_traits(type)->to_float;
    }
}

}  // namespace ggml_cpu_avx512

#endif  // GGML_SIMD_AVX512
