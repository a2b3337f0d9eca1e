// quant-repack-q5_K-avx2.cpp - the 256-bit kernel for Q5_K weights repacked 16 rows at a time
// (quant-repack.h), for CPUs without AVX512: a register holds one 4-byte column of 8 rows, so the
// 16 rows are two halves. Per sub-block j, its 8 byte columns decode to unsigned 5-bit values
// (nibble j % 2 | bit j of the matching qh byte << 4; qh column k % 8 lies byte for byte over qs
// column k). A vpmaddubsw pair sum is at most 2 * 31 * 128 = 7936 in magnitude, so only 4 of them
// add up in 16 bits (31744 < 32767): a sub-block is two such sums, each widened by vpmaddwd
// against (sc, sc), which also applies the scale. The mins go as in the Q4_K kernel, and the
// float steps are the reference's (quant-repack-q5_K.cpp): mins first, then the values.
#include "kernels-x86.h"

#if defined(GGML_SIMD_AVX2)

#include <immintrin.h>
#include <string.h>

namespace {

inline __m256i bcast4(const void * p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

// 8 bytes (one per row) to 32-bit lanes.
inline __m256i bytes_to_lanes(const uint8_t * p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *) p)); }

// A 32-bit lane value v (< 2^15) as the 16-bit pair (v, v).
inline __m256i pair16(__m256i v) { return _mm256_or_si256(v, _mm256_slli_epi32(v, 16)); }

// Bit J of every qh byte moved to bit 4 of its byte (other bits: garbage, masked by the caller).
// 16-bit shifts by at most 4: a byte's bit 4 comes from its own byte.
template <int J> inline __m256i bit_to_4(__m256i h) {
    if constexpr (J < 4) return _mm256_slli_epi16(h, 4 - J);
    else if constexpr (J == 4) return h;
    else return _mm256_srli_epi16(h, J - 4);
}

constexpr int PREFETCH = 4096;

// Sub-block J, rows 8h .. 8h + 7: isum[c] += sc_J * (5-bit values . activations 32J .. 32J + 31).
template <int NC, int J>
inline void sub_block(const block_q5_Kx16 * g, int h, const block_q8_K * const * y, __m256i * isum) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m16 = _mm256_set1_epi8(0x10);
    __m256i u[8];
    for (int k = 0; k < 8; k++) {
        const __m256i w = _mm256_loadu_si256((const __m256i *) g->qs[8 * (J / 2) + k][8 * h]);
        const __m256i qh = _mm256_loadu_si256((const __m256i *) g->qh[k][8 * h]);
        const __m256i nib = (J & 1) ? _mm256_and_si256(_mm256_srli_epi16(w, 4), m4) : _mm256_and_si256(w, m4);
        u[k] = _mm256_or_si256(nib, _mm256_and_si256(bit_to_4<J>(qh), m16));
    }
    const __m256i sc = pair16(_mm256_and_si256(bytes_to_lanes(g->sm[J] + 8 * h), _mm256_set1_epi32(63)));
    for (int c = 0; c < NC; c++) {
        const int8_t * q = y[c]->qs + 32 * J;
        __m256i d0 = _mm256_maddubs_epi16(u[0], bcast4(q));
        __m256i d1 = _mm256_maddubs_epi16(u[4], bcast4(q + 16));
        for (int k = 1; k < 4; k++) {
            d0 = _mm256_add_epi16(d0, _mm256_maddubs_epi16(u[k], bcast4(q + 4 * k)));
            d1 = _mm256_add_epi16(d1, _mm256_maddubs_epi16(u[4 + k], bcast4(q + 16 + 4 * k)));
        }
        isum[c] = _mm256_add_epi32(isum[c], _mm256_add_epi32(_mm256_madd_epi16(d0, sc), _mm256_madd_epi16(d1, sc)));
    }
}

template <int NC>
void gemm_q5_Kx16(int64_t nb, const block_q5_Kx16 * a, const char * b, size_t ldb, float * s, size_t lds) {
    __m256 acc[NC][2];
    for (int c = 0; c < NC; c++) acc[c][0] = acc[c][1] = _mm256_setzero_ps();
    const __m256i low4 = _mm256_set1_epi32(15), m_hi = _mm256_set1_epi32(0x30);
    for (int64_t i = 0; i < nb; i++) {
        const block_q5_Kx16 * g = a + i;
        for (int l = 0; l < (int) sizeof(block_q5_Kx16); l += 64) _mm_prefetch((const char *) g + PREFETCH + l, _MM_HINT_T0);
        const block_q8_K * y[NC];
        for (int c = 0; c < NC; c++) y[c] = (const block_q8_K *) (b + c * ldb) + i;
        for (int h = 0; h < 2; h++) {  // rows 8h .. 8h + 7
            // Mins: acc -= (dmin * d_a) * sum_j m_j * bsum32_j.
            __m256i isum[NC];
            for (int c = 0; c < NC; c++) isum[c] = _mm256_setzero_si256();
            for (int j = 0; j < 8; j++) {
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi32(bytes_to_lanes(g->sm[j] + 8 * h), 2), m_hi);
                __m256i lo = bytes_to_lanes(g->mlo[j / 2] + 8 * h);
                lo = (j & 1) ? _mm256_srli_epi32(lo, 4) : _mm256_and_si256(lo, low4);
                const __m256i m2 = pair16(_mm256_or_si256(hi, lo));
                for (int c = 0; c < NC; c++) {
                    isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(m2, bcast4(y[c]->bsums + 2 * j)));
                }
            }
            const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (g->dmin + 8 * h)));
            for (int c = 0; c < NC; c++) {
                const __m256 f = _mm256_mul_ps(dmin, _mm256_set1_ps(y[c]->d));
                acc[c][h] = _mm256_fnmadd_ps(f, _mm256_cvtepi32_ps(isum[c]), acc[c][h]);
                isum[c] = _mm256_setzero_si256();
            }

            // Values, sub-block by sub-block.
            sub_block<NC, 0>(g, h, y, isum);
            sub_block<NC, 1>(g, h, y, isum);
            sub_block<NC, 2>(g, h, y, isum);
            sub_block<NC, 3>(g, h, y, isum);
            sub_block<NC, 4>(g, h, y, isum);
            sub_block<NC, 5>(g, h, y, isum);
            sub_block<NC, 6>(g, h, y, isum);
            sub_block<NC, 7>(g, h, y, isum);
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (g->d + 8 * h)));
            for (int c = 0; c < NC; c++) {
                const __m256 f = _mm256_mul_ps(d, _mm256_set1_ps(y[c]->d));
                acc[c][h] = _mm256_fmadd_ps(f, _mm256_cvtepi32_ps(isum[c]), acc[c][h]);
            }
        }
    }
    for (int c = 0; c < NC; c++) {
        _mm256_storeu_ps(s + c * lds, acc[c][0]);
        _mm256_storeu_ps(s + c * lds + 8, acc[c][1]);
    }
}

}  // namespace

namespace ggml_cpu_avx2 {

void repack_gemm_q5_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) {
    GGML_ASSERT(nc >= 1 && nc <= GGML_REPACK_MAX_COLS);
    const block_q5_Kx16 * g = (const block_q5_Kx16 *) a;
    for (int c0 = 0; c0 < nc; c0 += 4) {
        const char * bc = (const char *) b + c0 * ldb;
        float * sc = s + c0 * lds;
        switch (nc - c0 < 4 ? nc - c0 : 4) {
            case 1: gemm_q5_Kx16<1>(nb, g, bc, ldb, sc, lds); break;
            case 2: gemm_q5_Kx16<2>(nb, g, bc, ldb, sc, lds); break;
            case 3: gemm_q5_Kx16<3>(nb, g, bc, ldb, sc, lds); break;
            default: gemm_q5_Kx16<4>(nb, g, bc, ldb, sc, lds); break;
        }
    }
}

}  // namespace ggml_cpu_avx2

#endif
