// quant-repack-avx2.cpp - the 256-bit kernel for Q4_0 weights repacked 16 rows at a time
// (quant-repack.h), for CPUs without AVX512: a register holds one 4-byte column of 8 rows, so
// the 16 rows are two halves. Without VNNI, vpmaddubsw makes 16-bit pair sums (at most
// 2 * 15 * 127 = 3810 each), which 8 adds keep below 32767, and one vpmaddwd per half and column
// widens them to each row's 32-bit sum.
#include "kernels-x86.h"

#if defined(GGML_SIMD_AVX2)

#include <immintrin.h>
#include <string.h>

namespace ggml_cpu_avx2 {
namespace {

inline __m256i bcast4(const int8_t * p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

// As for the 512-bit kernel: 6144 bytes ahead gave 4% more tokens/s than 2048 (from
// GGML_REPACK_PREFETCH_MIN_COLS columns; below, none).
constexpr int PREFETCH = 6144;

template <int NC>
void gemm_q4_0x16(int64_t nb, const block_q4_0x16 * a, const char * b, size_t ldb, float * s, size_t lds) {
    __m256 acc[NC][2];
    for (int c = 0; c < NC; c++) acc[c][0] = acc[c][1] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t i = 0; i < nb; i++) {
        const block_q4_0x16 * g = a + i;
        if constexpr (NC >= GGML_REPACK_PREFETCH_MIN_COLS) {
            for (int l = 0; l < 5; l++) _mm_prefetch((const char *) g + PREFETCH + 64 * l, _MM_HINT_T0);
        }
        for (int h = 0; h < 2; h++) {  // rows 8h .. 8h + 7
            __m256i lo[4], hi[4];
            for (int j = 0; j < 4; j++) {
                const __m256i w = _mm256_loadu_si256((const __m256i *) (g->qs + 64 * j + 32 * h));
                lo[j] = _mm256_and_si256(w, m4);
                hi[j] = _mm256_and_si256(_mm256_srli_epi16(w, 4), m4);
            }
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (g->d + 8 * h)));
            for (int c = 0; c < NC; c++) {
                const block_q8_0x * y = (const block_q8_0x *) (b + c * ldb) + i;
                __m256i p16 = _mm256_maddubs_epi16(lo[0], bcast4(y->qs));
                p16 = _mm256_add_epi16(p16, _mm256_maddubs_epi16(hi[0], bcast4(y->qs + 16)));
                for (int j = 1; j < 4; j++) {
                    p16 = _mm256_add_epi16(p16, _mm256_maddubs_epi16(lo[j], bcast4(y->qs + 4 * j)));
                    p16 = _mm256_add_epi16(p16, _mm256_maddubs_epi16(hi[j], bcast4(y->qs + 16 + 4 * j)));
                }
                const __m256i isum = _mm256_add_epi32(_mm256_madd_epi16(p16, ones), _mm256_set1_epi32(y->neg8sum));
                const __m256 sc = _mm256_mul_ps(dw, _mm256_set1_ps(y->d));
                acc[c][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), sc, acc[c][h]);
            }
        }
    }
    for (int c = 0; c < NC; c++) {
        _mm256_storeu_ps(s + c * lds, acc[c][0]);
        _mm256_storeu_ps(s + c * lds + 8, acc[c][1]);
    }
}

}  // namespace

void repack_gemm_q4_0(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) {
    const block_q4_0x16 * g = (const block_q4_0x16 *) a;
    const char * y = (const char *) b;
    switch (nc) {
        case 1: gemm_q4_0x16<1>(nb, g, y, ldb, s, lds); break;
        case 2: gemm_q4_0x16<2>(nb, g, y, ldb, s, lds); break;
        case 3: gemm_q4_0x16<3>(nb, g, y, ldb, s, lds); break;
        case 4: gemm_q4_0x16<4>(nb, g, y, ldb, s, lds); break;
        case 5: gemm_q4_0x16<5>(nb, g, y, ldb, s, lds); break;
        case 6: gemm_q4_0x16<6>(nb, g, y, ldb, s, lds); break;
        case 7: gemm_q4_0x16<7>(nb, g, y, ldb, s, lds); break;
        case 8: gemm_q4_0x16<8>(nb, g, y, ldb, s, lds); break;
        default: GGML_ABORT("gemm_q4_0x16: %d columns (at most %d)", nc, GGML_REPACK_MAX_COLS);
    }
}

}  // namespace ggml_cpu_avx2

#endif  // GGML_SIMD_AVX2
