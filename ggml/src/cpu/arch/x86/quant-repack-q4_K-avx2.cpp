// quant-repack-q4_K-avx2.cpp - the 256-bit kernel for Q4_K weights repacked 16 rows at a time
// (quant-repack.h), for CPUs without AVX512: a register holds one 4-byte column of 8 rows, so
// the 16 rows are two halves. A sub-block's 8 vpmaddubsw pair sums (at most 2 * 15 * 127 each)
// add up in 16 bits without overflow (30480), and one vpmaddwd against (sc, sc) per row both
// widens them and applies the scale; the mins go the same way against Q8_K's block sums.
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

constexpr int PREFETCH = 4096;

template <int NC>
void gemm_q4_Kx16(int64_t nb, const block_q4_Kx16 * a, const char * b, size_t ldb, float * s, size_t lds) {
    __m256 acc[NC][2];
    for (int c = 0; c < NC; c++) acc[c][0] = acc[c][1] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i six_bits = _mm256_set1_epi32(63), low4 = _mm256_set1_epi32(15), m_hi = _mm256_set1_epi32(0x30);
    for (int64_t i = 0; i < nb; i++) {
        const block_q4_Kx16 * g = a + i;
        for (int l = 0; l < (int) sizeof(block_q4_Kx16); l += 64) _mm_prefetch((const char *) g + PREFETCH + l, _MM_HINT_T0);
        const block_q8_K * y[NC];
        for (int c = 0; c < NC; c++) y[c] = (const block_q8_K *) (b + c * ldb) + i;
        for (int h = 0; h < 2; h++) {  // rows 8h .. 8h + 7
            // Mins: acc -= (dmin * d_a) * sum_j m_j * bsum32_j.
            __m256i msum[NC];
            for (int c = 0; c < NC; c++) msum[c] = _mm256_setzero_si256();
            for (int j = 0; j < 8; j++) {
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi32(bytes_to_lanes(g->sm[j] + 8 * h), 2), m_hi);
                __m256i lo = bytes_to_lanes(g->mlo[j / 2] + 8 * h);
                lo = (j & 1) ? _mm256_srli_epi32(lo, 4) : _mm256_and_si256(lo, low4);
                const __m256i m2 = pair16(_mm256_or_si256(hi, lo));
                for (int c = 0; c < NC; c++) {
                    msum[c] = _mm256_add_epi32(msum[c], _mm256_madd_epi16(m2, bcast4(y[c]->bsums + 2 * j)));
                }
            }
            const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (g->dmin + 8 * h)));
            for (int c = 0; c < NC; c++) {
                const __m256 f = _mm256_mul_ps(dmin, _mm256_set1_ps(y[c]->d));
                acc[c][h] = _mm256_fnmadd_ps(f, _mm256_cvtepi32_ps(msum[c]), acc[c][h]);
            }

            // Quants, per pair of sub-blocks (2p, 2p + 1): low and high nibbles of 8 byte columns.
            __m256i isum[NC];
            for (int c = 0; c < NC; c++) isum[c] = _mm256_setzero_si256();
            for (int p = 0; p < 4; p++) {
                const __m256i sc0 = pair16(_mm256_and_si256(bytes_to_lanes(g->sm[2 * p] + 8 * h), six_bits));
                const __m256i sc1 = pair16(_mm256_and_si256(bytes_to_lanes(g->sm[2 * p + 1] + 8 * h), six_bits));
                __m256i lo[8], hi[8];
                for (int k = 0; k < 8; k++) {
                    const __m256i w = _mm256_loadu_si256((const __m256i *) g->qs[8 * p + k][8 * h]);
                    lo[k] = _mm256_and_si256(w, m4);
                    hi[k] = _mm256_and_si256(_mm256_srli_epi16(w, 4), m4);
                }
                for (int c = 0; c < NC; c++) {
                    const int8_t * q = y[c]->qs + 64 * p;
                    __m256i d0 = _mm256_maddubs_epi16(lo[0], bcast4(q));
                    __m256i d1 = _mm256_maddubs_epi16(hi[0], bcast4(q + 32));
                    for (int k = 1; k < 8; k++) {
                        d0 = _mm256_add_epi16(d0, _mm256_maddubs_epi16(lo[k], bcast4(q + 4 * k)));
                        d1 = _mm256_add_epi16(d1, _mm256_maddubs_epi16(hi[k], bcast4(q + 32 + 4 * k)));
                    }
                    isum[c] = _mm256_add_epi32(isum[c], _mm256_add_epi32(_mm256_madd_epi16(d0, sc0), _mm256_madd_epi16(d1, sc1)));
                }
            }
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

void repack_gemm_q4_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) {
    GGML_ASSERT(nc >= 1 && nc <= GGML_REPACK_MAX_COLS);
    const block_q4_Kx16 * g = (const block_q4_Kx16 *) a;
    for (int c0 = 0; c0 < nc; c0 += 4) {
        const char * bc = (const char *) b + c0 * ldb;
        float * sc = s + c0 * lds;
        switch (nc - c0 < 4 ? nc - c0 : 4) {
            case 1: gemm_q4_Kx16<1>(nb, g, bc, ldb, sc, lds); break;
            case 2: gemm_q4_Kx16<2>(nb, g, bc, ldb, sc, lds); break;
            case 3: gemm_q4_Kx16<3>(nb, g, bc, ldb, sc, lds); break;
            default: gemm_q4_Kx16<4>(nb, g, bc, ldb, sc, lds); break;
        }
    }
}

}  // namespace ggml_cpu_avx2

#endif
