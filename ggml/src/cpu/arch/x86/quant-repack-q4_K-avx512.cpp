// quant-repack-q4_K-avx512.cpp - the 512-bit VNNI kernel for Q4_K weights repacked 16 rows at a time
// (quant-repack.h), every lane a row. Q4_K: the mins first (vpdpwssd of (m, m) pairs against
// Q8_K's 16-value sums), then per pair of sub-blocks 8 nibble columns unpacked once and met by
// each column's activations through vpdpbusd, each sub-block's sum times its scale (vpmulld).
// At most 4 columns per pass: the 16 unpacked registers and 2 accumulators per column fill the
// register file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "kernels-x86.h"

#if defined(GGML_SIMD_AVX512) && defined(__AVX512VNNI__)

#include <immintrin.h>
#include <string.h>

namespace {

inline __m512i bcast4(const void * p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

inline __m512i bytes_to_lanes(const uint8_t * p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *) p)); }

constexpr int PREFETCH = 2048;

template <int NC>
void gemm_q4_Kx16(int64_t nb, const block_q4_Kx16 * a, const char * b, size_t ldb, float * s, size_t lds) {
    __m512 acc[NC];
    for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i six_bits = _mm512_set1_epi32(63), low4 = _mm512_set1_epi32(15), m_hi = _mm512_set1_epi32(0x30);
    for (int64_t i = 0; i < nb; i++) {
        const block_q4_Kx16 * g = a + i;
        for (int l = 0; l < (int) sizeof(block_q4_Kx16); l += 64) _mm_prefetch((const char *) g + PREFETCH + l, _MM_HINT_T0);
        const block_q8_K * y[NC];
        for (int c = 0; c < NC; c++) y[c] = (const block_q8_K *) (b + c * ldb) + i;

        // Mins: acc -= (dmin * d_a) * sum_j m_j * bsum32_j.
        __m512i msum[NC];
        for (int c = 0; c < NC; c++) msum[c] = _mm512_setzero_si512();
        for (int j = 0; j < 8; j++) {
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(bytes_to_lanes(g->sm[j]), 2), m_hi);
            __m512i lo = bytes_to_lanes(g->mlo[j / 2]);
            lo = (j & 1) ? _mm512_srli_epi32(lo, 4) : _mm512_and_si512(lo, low4);
            const __m512i m = _mm512_or_si512(hi, lo);
            const __m512i m2 = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
            for (int c = 0; c < NC; c++) msum[c] = _mm512_dpwssd_epi32(msum[c], m2, bcast4(y[c]->bsums + 2 * j));
        }
        const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) g->dmin));
        for (int c = 0; c < NC; c++) {
            const __m512 f = _mm512_mul_ps(dmin, _mm512_set1_ps(y[c]->d));
            acc[c] = _mm512_fnmadd_ps(f, _mm512_cvtepi32_ps(msum[c]), acc[c]);
        }

        // Quants: per pair of sub-blocks (2p, 2p + 1), low and high nibbles of 8 byte columns.
        __m512i isum[NC];
        for (int c = 0; c < NC; c++) isum[c] = _mm512_setzero_si512();
        for (int p = 0; p < 4; p++) {
            __m512i lo[8], hi[8];
            for (int k = 0; k < 8; k++) {
                const __m512i w = _mm512_loadu_si512((const void *) g->qs[8 * p + k]);
                lo[k] = _mm512_and_si512(w, m4);
                hi[k] = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
            }
            const __m512i sc0 = _mm512_and_si512(bytes_to_lanes(g->sm[2 * p]), six_bits);
            const __m512i sc1 = _mm512_and_si512(bytes_to_lanes(g->sm[2 * p + 1]), six_bits);
            for (int c = 0; c < NC; c++) {
                const int8_t * q = y[c]->qs + 64 * p;
                __m512i d0 = _mm512_setzero_si512(), d1 = _mm512_setzero_si512();
                for (int k = 0; k < 8; k++) {
                    d0 = _mm512_dpbusd_epi32(d0, lo[k], bcast4(q + 4 * k));
                    d1 = _mm512_dpbusd_epi32(d1, hi[k], bcast4(q + 32 + 4 * k));
                }
                isum[c] = _mm512_add_epi32(isum[c], _mm512_add_epi32(_mm512_mullo_epi32(d0, sc0), _mm512_mullo_epi32(d1, sc1)));
            }
        }
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) g->d));
        for (int c = 0; c < NC; c++) {
            const __m512 f = _mm512_mul_ps(d, _mm512_set1_ps(y[c]->d));
            acc[c] = _mm512_fmadd_ps(f, _mm512_cvtepi32_ps(isum[c]), acc[c]);
        }
    }
    for (int c = 0; c < NC; c++) _mm512_storeu_ps(s + c * lds, acc[c]);
}

// nc columns in passes of at most 4.
template <typename G, void (*K1)(int64_t, const G *, const char *, size_t, float *, size_t),
          void (*K2)(int64_t, const G *, const char *, size_t, float *, size_t),
          void (*K3)(int64_t, const G *, const char *, size_t, float *, size_t),
          void (*K4)(int64_t, const G *, const char *, size_t, float *, size_t)>
void in_passes_of_4(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) {
    GGML_ASSERT(nc >= 1 && nc <= GGML_REPACK_MAX_COLS);
    for (int c0 = 0; c0 < nc; c0 += 4) {
        const char * bc = (const char *) b + c0 * ldb;
        float * sc = s + c0 * lds;
        switch (nc - c0 < 4 ? nc - c0 : 4) {
            case 1: K1(nb, (const G *) a, bc, ldb, sc, lds); break;
            case 2: K2(nb, (const G *) a, bc, ldb, sc, lds); break;
            case 3: K3(nb, (const G *) a, bc, ldb, sc, lds); break;
            default: K4(nb, (const G *) a, bc, ldb, sc, lds); break;
        }
    }
}

}  // namespace

namespace ggml_cpu_avx512 {

void repack_gemm_q4_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) {
    in_passes_of_4<block_q4_Kx16, gemm_q4_Kx16<1>, gemm_q4_Kx16<2>, gemm_q4_Kx16<3>, gemm_q4_Kx16<4>>(nb, a, b, ldb, nc, s, lds);
}

}  // namespace ggml_cpu_avx512

#endif
