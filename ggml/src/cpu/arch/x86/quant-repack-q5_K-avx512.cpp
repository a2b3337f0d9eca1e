// quant-repack-q5_K-avx512.cpp - the 512-bit VNNI kernel for Q5_K weights repacked 16 rows at a
// time (quant-repack.h), every lane a row; the same integers and float steps as the reference
// (quant-repack-q5_K.cpp). Per super-block: the mins first (vpdpwssd of (m, m) pairs against
// Q8_K's 16-value sums), then per sub-block j (nibble j % 2 of byte columns 8 (j / 2) .. + 7) the
// 8 columns decoded to unsigned 5-bit values, (nibble) | (bit j of the qh byte) << 4 (qh column
// k % 8 lies byte for byte over qs column k), met by each column's activations through vpdpbusd,
// the sub-block's sum times its scale (vpmulld). The decoding is shared by all columns (up to 8)
// in one pass: 8 decoded registers, and an integer sum and a float accumulator per column.
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

// vpternlogd immediate of a | (b & c): bit (a << 2 | b << 1 | c) of the table.
constexpr int or_and_imm() {
    int imm = 0;
    for (int i = 0; i < 8; i++) imm |= (((i >> 2) & 1) | ((i >> 1) & i & 1)) << i;
    return imm;
}
constexpr int OR_AND = or_and_imm();

// Bit J of every qh byte moved to bit 4 of its byte (other bits: garbage, masked by the caller).
// 16-bit shifts by at most 4: a byte's bit 4 comes from its own byte.
template <int J> inline __m512i bit_to_4(__m512i h) {
    if constexpr (J < 4) return _mm512_slli_epi16(h, 4 - J);
    else if constexpr (J == 4) return h;
    else return _mm512_srli_epi16(h, J - 4);
}

constexpr int PREFETCH = 2048;

// Sub-block J of one super-block: isum[c] += sc_J * (5-bit values . activations 32J .. 32J + 31).
template <int NC, int J>
inline void sub_block(const block_q5_Kx16 * g, const block_q8_K * const * y, __m512i * isum) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m16 = _mm512_set1_epi8(0x10);
    __m512i u[8];
    for (int k = 0; k < 8; k++) {
        const __m512i w = _mm512_loadu_si512((const void *) g->qs[8 * (J / 2) + k]);
        const __m512i h = _mm512_loadu_si512((const void *) g->qh[k]);
        const __m512i nib = (J & 1) ? _mm512_and_si512(_mm512_srli_epi16(w, 4), m4) : _mm512_and_si512(w, m4);
        u[k] = _mm512_ternarylogic_epi32(nib, bit_to_4<J>(h), m16, OR_AND);
    }
    const __m512i sc = _mm512_and_si512(bytes_to_lanes(g->sm[J]), _mm512_set1_epi32(63));
    for (int c = 0; c < NC; c++) {
        const int8_t * q = y[c]->qs + 32 * J;
        __m512i d = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[0], bcast4(q));
        for (int k = 1; k < 8; k++) d = _mm512_dpbusd_epi32(d, u[k], bcast4(q + 4 * k));
        isum[c] = _mm512_add_epi32(isum[c], _mm512_mullo_epi32(d, sc));
    }
}

template <int NC>
void gemm_q5_Kx16(int64_t nb, const block_q5_Kx16 * a, const char * b, size_t ldb, float * s, size_t lds) {
    __m512 acc[NC];
    for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    const __m512i low4 = _mm512_set1_epi32(15), m_hi = _mm512_set1_epi32(0x30);
    for (int64_t i = 0; i < nb; i++) {
        const block_q5_Kx16 * g = a + i;
        for (int l = 0; l < (int) sizeof(block_q5_Kx16); l += 64) _mm_prefetch((const char *) g + PREFETCH + l, _MM_HINT_T0);
        const block_q8_K * y[NC];
        for (int c = 0; c < NC; c++) y[c] = (const block_q8_K *) (b + c * ldb) + i;

        // Mins: acc -= (dmin * d_a) * sum_j m_j * bsum32_j.
        __m512i isum[NC];
        for (int c = 0; c < NC; c++) isum[c] = _mm512_setzero_si512();
        for (int j = 0; j < 8; j++) {
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(bytes_to_lanes(g->sm[j]), 2), m_hi);
            __m512i lo = bytes_to_lanes(g->mlo[j / 2]);
            lo = (j & 1) ? _mm512_srli_epi32(lo, 4) : _mm512_and_si512(lo, low4);
            const __m512i m = _mm512_or_si512(hi, lo);
            const __m512i m2 = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
            for (int c = 0; c < NC; c++) isum[c] = _mm512_dpwssd_epi32(isum[c], m2, bcast4(y[c]->bsums + 2 * j));
        }
        const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) g->dmin));
        for (int c = 0; c < NC; c++) {
            const __m512 f = _mm512_mul_ps(dmin, _mm512_set1_ps(y[c]->d));
            acc[c] = _mm512_fnmadd_ps(f, _mm512_cvtepi32_ps(isum[c]), acc[c]);
            isum[c] = _mm512_setzero_si512();
        }

        // Values, sub-block by sub-block.
        sub_block<NC, 0>(g, y, isum);
        sub_block<NC, 1>(g, y, isum);
        sub_block<NC, 2>(g, y, isum);
        sub_block<NC, 3>(g, y, isum);
        sub_block<NC, 4>(g, y, isum);
        sub_block<NC, 5>(g, y, isum);
        sub_block<NC, 6>(g, y, isum);
        sub_block<NC, 7>(g, y, isum);
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) g->d));
        for (int c = 0; c < NC; c++) {
            const __m512 f = _mm512_mul_ps(d, _mm512_set1_ps(y[c]->d));
            acc[c] = _mm512_fmadd_ps(f, _mm512_cvtepi32_ps(isum[c]), acc[c]);
        }
    }
    for (int c = 0; c < NC; c++) _mm512_storeu_ps(s + c * lds, acc[c]);
}

}  // namespace

namespace ggml_cpu_avx512 {

void repack_gemm_q5_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) {
    const block_q5_Kx16 * g = (const block_q5_Kx16 *) a;
    const char * y = (const char *) b;
    switch (nc) {
        case 1: gemm_q5_Kx16<1>(nb, g, y, ldb, s, lds); break;
        case 2: gemm_q5_Kx16<2>(nb, g, y, ldb, s, lds); break;
        case 3: gemm_q5_Kx16<3>(nb, g, y, ldb, s, lds); break;
        case 4: gemm_q5_Kx16<4>(nb, g, y, ldb, s, lds); break;
        case 5: gemm_q5_Kx16<5>(nb, g, y, ldb, s, lds); break;
        case 6: gemm_q5_Kx16<6>(nb, g, y, ldb, s, lds); break;
        case 7: gemm_q5_Kx16<7>(nb, g, y, ldb, s, lds); break;
        case 8: gemm_q5_Kx16<8>(nb, g, y, ldb, s, lds); break;
        default: GGML_ABORT("gemm_q5_Kx16: %d columns (at most %d)", nc, GGML_REPACK_MAX_COLS);
    }
}

}  // namespace ggml_cpu_avx512

#endif
