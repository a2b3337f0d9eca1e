// quant-repack-q6_K-avx2.cpp - the 256-bit kernel for Q6_K weights repacked 16 rows at a time
// (quant-repack.h), for CPUs without AVX512: a register holds one 4-byte column of 8 rows, so
// the 16 rows are two halves. The same integers and float steps as the reference
// (quant-repack-q6_K.cpp): per super-block and row half, the offset -32 * sum_j sc_j * bsums[j]
// first (vpmaddwd of (32 sc_j, 32 sc_j+1) int16 pairs against the bsums pair), then sub-block by
// sub-block: its 4 byte columns decoded to unsigned 6-bit values (ql nibble | 2 qh bits << 4),
// met by the activations through vpmaddubsw. A pair sum is at most 2 * 63 * 128 = 16128, so only
// two vpmaddubsw results add up in 16 bits (32256); each such sum is widened and scaled at once
// by vpmaddwd against (sc, sc) int16 pairs, two per sub-block.
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

inline __m256i load32(const void * p) { return _mm256_loadu_si256((const __m256i *) p); }

inline __m128i load8(const void * p) { return _mm_loadl_epi64((const __m128i *) p); }

// Keeps GCC from reassociating the sums of all 16 sub-blocks into a tree, which keeps every
// sub-block's products live at once and spills them (GCC 12).
// Likewise the activation pointers per row half: else GCC hoists all the activation loads out of
// the row-half loop and keeps them on the stack.
template <typename T>
inline void opaque(T & v) {
#if defined(__GNUC__)
    __asm__("" : "+g"(v));
#else
    (void) v;
#endif
}
inline void opaque(__m256i & v) {
#if defined(__GNUC__)
    __asm__("" : "+x"(v));
#else
    (void) v;
#endif
}

// Bits 2t, 2t + 1 of every qh byte moved to bits 4, 5 (the other bits of the byte still to mask).
template <int T>
inline __m256i qh_bits(__m256i qh) {
    if (T == 0) return _mm256_slli_epi16(qh, 4);
    if (T == 1) return _mm256_slli_epi16(qh, 2);
    if (T == 2) return qh;
    return _mm256_srli_epi16(qh, 2);
}

// Sub-block J (values 16 J .. 16 J + 15: half h = J / 8, quarter t = J % 8 / 2, l from 16 (J % 2))
// of rows r0 .. r0 + 7 against NC columns, added to isum.
template <int NC, int J>
inline void sub_block(const block_q6_Kx16 * g, const block_q8_K * const * y, int r0, __m256i m0F, __m256i m30, __m256i * isum) {
    constexpr int h = J / 8, t = J % 8 / 2, gg = J % 2;
    __m256i u[4];
    for (int k = 0; k < 4; k++) {
        const __m256i ql = load32(g->q[ggml_q6_Kx16_ql(16 * h + 8 * (t & 1) + 4 * gg + k)][r0]);
        const __m256i qh = load32(g->q[ggml_q6_Kx16_qh(8 * h + 4 * gg + k)][r0]);
        const __m256i lo = _mm256_and_si256(t < 2 ? ql : _mm256_srli_epi16(ql, 4), m0F);
        u[k] = _mm256_or_si256(lo, _mm256_and_si256(qh_bits<t>(qh), m30));
    }
    const __m128i s8 = load8(g->scales[J] + r0);
    const __m256i sc = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(s8, s8));  // (sc, sc) per row
    for (int c = 0; c < NC; c++) {
        const int8_t * q = y[c]->qs + 16 * J;
        const __m256i x0 = _mm256_add_epi16(_mm256_maddubs_epi16(u[0], bcast4(q)), _mm256_maddubs_epi16(u[1], bcast4(q + 4)));
        const __m256i x1 = _mm256_add_epi16(_mm256_maddubs_epi16(u[2], bcast4(q + 8)), _mm256_maddubs_epi16(u[3], bcast4(q + 12)));
        isum[c] = _mm256_add_epi32(isum[c], _mm256_add_epi32(_mm256_madd_epi16(x0, sc), _mm256_madd_epi16(x1, sc)));
        opaque(isum[c]);
    }
}

template <int NC, int... J>
inline void sub_blocks(const block_q6_Kx16 * g, const block_q8_K * const * y, int r0, __m256i m0F, __m256i m30, __m256i * isum) {
    (sub_block<NC, J>(g, y, r0, m0F, m30, isum), ...);
}

template <int NC>
void gemm_q6_Kx16(int64_t nb, const block_q6_Kx16 * a, const char * b, size_t ldb, float * s, size_t lds) {
    __m256 acc[NC][2];
    for (int c = 0; c < NC; c++) acc[c][0] = acc[c][1] = _mm256_setzero_ps();
    const __m256i m0F = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    for (int64_t i = 0; i < nb; i++) {
        const block_q6_Kx16 * g = a + i;
        const block_q8_K * yi[NC];
        for (int c = 0; c < NC; c++) yi[c] = (const block_q8_K *) (b + c * ldb) + i;
        for (int rh = 0; rh < 2; rh++) {
            const int r0 = 8 * rh;
            const block_q8_K * y[NC];
            for (int c = 0; c < NC; c++) {
                y[c] = yi[c];
                opaque(y[c]);
            }
            // Offset: isum = -32 * sum_j sc_j * bsums[j], two sub-blocks per vpmaddwd.
            __m256i isum[NC];
            for (int c = 0; c < NC; c++) isum[c] = _mm256_setzero_si256();
            for (int j = 0; j < QK_K / 16; j += 2) {
                const __m128i s01 = _mm_unpacklo_epi8(load8(g->scales[j] + r0), load8(g->scales[j + 1] + r0));
                const __m256i pairs = _mm256_slli_epi16(_mm256_cvtepi8_epi16(s01), 5);  // 32 sc: -4096 .. 4064
                for (int c = 0; c < NC; c++) isum[c] = _mm256_sub_epi32(isum[c], _mm256_madd_epi16(pairs, bcast4(y[c]->bsums + j)));
            }
            // Sub-blocks in the order their columns are stored (quant-repack.h: half, then 16
            // values, then quarter), so that the block is read front to back, which the hardware
            // prefetcher streams with no software prefetch. One thread (Zen 4): 23 GB/s; 18 in
            // the order 0..15, 13-16 with the block prefetched 4 KiB ahead.
            sub_blocks<NC, 0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15>(g, y, r0, m0F, m30, isum);
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (g->d + r0)));
            for (int c = 0; c < NC; c++) {
                const __m256 f = _mm256_mul_ps(d, _mm256_set1_ps(yi[c]->d));
                acc[c][rh] = _mm256_fmadd_ps(f, _mm256_cvtepi32_ps(isum[c]), acc[c][rh]);
            }
        }
    }
    for (int c = 0; c < NC; c++) {
        _mm256_storeu_ps(s + c * lds, acc[c][0]);
        _mm256_storeu_ps(s + c * lds + 8, acc[c][1]);
    }
}

typedef void (*kernel_fn)(int64_t, const block_q6_Kx16 *, const char *, size_t, float *, size_t);

}  // namespace

// All nc (<= 8) columns in one pass: the activations are read once per row half, and each
// decoded register meets all the columns (at nc = 8, 15% faster than two passes of 4 although
// some sums then live on the stack).
namespace ggml_cpu_avx2 {

void repack_gemm_q6_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) {
    static const kernel_fn kernels[GGML_REPACK_MAX_COLS] = { gemm_q6_Kx16<1>, gemm_q6_Kx16<2>, gemm_q6_Kx16<3>, gemm_q6_Kx16<4>,
                                                             gemm_q6_Kx16<5>, gemm_q6_Kx16<6>, gemm_q6_Kx16<7>, gemm_q6_Kx16<8> };
    GGML_ASSERT(nc >= 1 && nc <= GGML_REPACK_MAX_COLS);
    kernels[nc - 1](nb, (const block_q6_Kx16 *) a, (const char *) b, ldb, s, lds);
}

}  // namespace ggml_cpu_avx2

#endif
