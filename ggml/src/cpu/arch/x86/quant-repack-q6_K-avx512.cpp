// quant-repack-q6_K-avx512.cpp - the 512-bit VNNI kernel for Q6_K weights repacked 16 rows at a
// time (quant-repack.h), every lane a row; the same integers and float steps as the reference
// (quant-repack-q6_K.cpp). Per super-block: the offset term -32 * sum_j sc_j * bsums[j] first
// (vpdpwssd of (-32 sc_j, -32 sc_j+1) int16 pairs against the bsums pair), then in 8 units of
// 2 sub-blocks: 4 qh and 4 ql byte columns decoded into 8 registers of unsigned 6-bit values
// (low or high ql nibble | 2 qh bits << 4), met by each column's activations through vpdpbusd,
// each sub-block's sum times its scale (vpmulld). All columns (up to 8) in one pass.
// Where the time goes (nc = 8, per super-block and column): 64 vpdpbusd with their broadcast
// loads, 16 vpmulld (2 uops each), 8 vpdpwssd; the decoding is shared by the 8 columns.
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

inline __m512i load64(const void * p) { return _mm512_loadu_si512(p); }

// vpternlogd immediate of (a & c) | (b & ~c): bit (a << 2 | b << 1 | c) of the table.
constexpr int select_imm() {
    int imm = 0;
    for (int i = 0; i < 8; i++) {
        const int a = (i >> 2) & 1, b = (i >> 1) & 1, c = i & 1;
        imm |= (c ? a : b) << i;
    }
    return imm;
}
constexpr int SEL = select_imm();

template <int NC>
void gemm_q6_Kx16(int64_t nb, const block_q6_Kx16 * a, const char * b, size_t ldb, float * s, size_t lds) {
    __m512 acc[NC];
    for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    const __m512i m0F = _mm512_set1_epi8(0x0F), m33 = _mm512_set1_epi8(0x33);
    // Interleaves two rows of 16 int16 (scales of sub-blocks j and j + 1) into (j, j + 1) pairs.
    const __m512i pair_idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                              23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i minus32 = _mm512_set1_epi16(-32);
    for (int64_t i = 0; i < nb; i++) {
        // No software prefetch: the block is read front to back (quant-repack.h), which the
        // hardware prefetcher streams; prefetching all of it 1 or 2 blocks ahead on top took one
        // thread from 26 to 19 or 16 GB/s (bench-quant, Zen 4).
        const block_q6_Kx16 * g = a + i;
        const block_q8_K * y[NC];
        for (int c = 0; c < NC; c++) y[c] = (const block_q8_K *) (b + c * ldb) + i;

        // Offset: isum = -32 * sum_j sc_j * bsums[j], two sub-blocks per vpdpwssd.
        __m512i isum[NC];
        for (int c = 0; c < NC; c++) isum[c] = _mm512_setzero_si512();
        for (int j = 0; j < QK_K / 16; j += 2) {
            const __m512i sc = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *) g->scales[j]));
            const __m512i pairs = _mm512_mullo_epi16(_mm512_permutexvar_epi16(pair_idx, sc), minus32);
            for (int c = 0; c < NC; c++) isum[c] = _mm512_dpwssd_epi32(isum[c], pairs, bcast4(y[c]->bsums + j));
        }

        // Values: unit (h, gg, p) holds quarters t = p and p + 2 of half h, l = 16 gg .. 16 gg + 15,
        // i.e. sub-blocks j0 = 8h + 2p + gg and j0 + 4. Unrolled: 3-8% faster for NC > 1 (GCC 13).
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
#pragma GCC unroll 2
            for (int gg = 0; gg < 2; gg++) {
#pragma GCC unroll 2
                for (int p = 0; p < 2; p++) {
                    __m512i ulo[4], uhi[4];
                    for (int k = 0; k < 4; k++) {
                        const __m512i qh = load64(g->q[ggml_q6_Kx16_qh(8 * h + 4 * gg + k)]);
                        const __m512i ql = load64(g->q[ggml_q6_Kx16_ql(16 * h + 8 * p + 4 * gg + k)]);
                        // Bits 2p, 2p + 1 (quarter p) at 0-1, bits 2p + 4, 2p + 5 (quarter p + 2) at 4-5.
                        const __m512i f = _mm512_and_si512(p ? _mm512_srli_epi16(qh, 2) : qh, m33);
                        ulo[k] = _mm512_ternarylogic_epi32(ql, _mm512_slli_epi16(f, 4), m0F, SEL);
                        uhi[k] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(ql, 4), f, m0F, SEL);
                    }
                    const int j0 = 8 * h + 2 * p + gg;
                    const __m512i sc0 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *) g->scales[j0]));
                    const __m512i sc1 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *) g->scales[j0 + 4]));
                    for (int c = 0; c < NC; c++) {
                        const int8_t * q = y[c]->qs + 128 * h + 32 * p + 16 * gg;
                        __m512i d0 = _mm512_setzero_si512(), d1 = _mm512_setzero_si512();
                        for (int k = 0; k < 4; k++) {
                            d0 = _mm512_dpbusd_epi32(d0, ulo[k], bcast4(q + 4 * k));
                            d1 = _mm512_dpbusd_epi32(d1, uhi[k], bcast4(q + 64 + 4 * k));
                        }
                        isum[c] = _mm512_add_epi32(isum[c], _mm512_add_epi32(_mm512_mullo_epi32(d0, sc0), _mm512_mullo_epi32(d1, sc1)));
                    }
                }
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

typedef void (*kernel_fn)(int64_t, const block_q6_Kx16 *, const char *, size_t, float *, size_t);

}  // namespace

// All nc (<= 8) columns in one pass: the 8 decoded registers leave room for 8 columns' sums and
// accumulators, and each decoded register then meets 8 columns (26 vs 34 ns per super-block and
// column at nc = 8 than in two passes of 4).
namespace ggml_cpu_avx512 {

void repack_gemm_q6_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) {
    static const kernel_fn kernels[GGML_REPACK_MAX_COLS] = { gemm_q6_Kx16<1>, gemm_q6_Kx16<2>, gemm_q6_Kx16<3>, gemm_q6_Kx16<4>,
                                                             gemm_q6_Kx16<5>, gemm_q6_Kx16<6>, gemm_q6_Kx16<7>, gemm_q6_Kx16<8> };
    GGML_ASSERT(nc >= 1 && nc <= GGML_REPACK_MAX_COLS);
    kernels[nc - 1](nb, (const block_q6_Kx16 *) a, (const char *) b, ldb, s, lds);
}

}  // namespace ggml_cpu_avx512

#endif
