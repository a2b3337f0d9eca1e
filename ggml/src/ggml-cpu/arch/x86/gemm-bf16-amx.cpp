// gemm-bf16-amx.cpp - AMX-BF16 tile products for out_prod with GGML_PREC_BF16 (out-prod.cpp):
// 2 x 2 tiles of 16 x 16 F32 sums, accumulated in the tiles over the whole m range of a call,
// so that the tile unit streams (no per-block scaling, unlike the int8 kernels). Also F32 rows
// to bf16, rounding to nearest even as vcvtne2ps2bf16 does in bf16_pairs.
// The products of bf16 values are exact in F32; the tiles add them in their own order, so the
// sums differ in the last bits from those of the bf16-pairs GEMM (scalar and vdpbf16ps, which
// add per unit the high halves' product, then the low halves').
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "amx.h"

#if defined(GGML_SIMD_AMX) && defined(__AMX_BF16__) && defined(__AVX512BF16__)

namespace ggml_cpu_amx {

namespace {

// Where the OS grants no tile state: the same sums with vdpbf16ps, per row n of the tiles.
void tiles_bf16_avx512(int64_t nmc, const void * x0, const void * x1, size_t ldx, const void * w0, const void * w1, float * c) {
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < 2; j++) {
            float * ct = c + 256 * (2 * i + j);
            const char * x = (const char *) (i ? x1 : x0);
            const uint32_t * w = (const uint32_t *) (j ? w1 : w0);
            for (int n = 0; n < 16; n++) {
                __m512 acc = _mm512_loadu_ps(ct + 16 * n);
                const uint32_t * xn = (const uint32_t *) (x + n * ldx);
                for (int64_t u = 0; u < 16 * nmc; u++) {  // pairs of m
                    acc = _mm512_dpbf16_ps(acc, (__m512bh) _mm512_loadu_si512(w + 16 * u), (__m512bh) _mm512_set1_epi32((int) xn[u]));
                }
                _mm512_storeu_ps(ct + 16 * n, acc);
            }
        }
    }
}

}  // namespace

void tiles_bf16(int64_t nmc, const void * x0, const void * x1, size_t ldx, const void * w0, const void * w1, float * c) {
    if (!granted()) {
        tiles_bf16_avx512(nmc, x0, x1, ldx, w0, w1, c);
        return;
    }
    configure(Tiles::bf16);
    __asm__ volatile("" ::: "memory");  // the tile loads read what the caller wrote (GCC's tile intrinsics declare no memory read)
    const char * a0 = (const char *) x0;
    const char * a1 = (const char *) x1;
    const char * b0 = (const char *) w0;
    const char * b1 = (const char *) w1;
    _tile_loadd(0, c, 64);
    _tile_loadd(1, c + 256, 64);
    _tile_loadd(2, c + 512, 64);
    _tile_loadd(3, c + 768, 64);
    for (int64_t i = 0; i < nmc; i++) {  // 32 values of m: 64 bytes of each x row, 1 KiB of each w
        _tile_loadd(4, a0 + 64 * i, (long) ldx);
        _tile_loadd(6, b0 + 1024 * i, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_loadd(7, b1 + 1024 * i, 64);
        _tile_dpbf16ps(1, 4, 7);
        _tile_loadd(5, a1 + 64 * i, (long) ldx);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, c, 64);
    _tile_stored(1, c + 256, 64);
    _tile_stored(2, c + 512, 64);
    _tile_stored(3, c + 768, 64);
}

void f32_to_bf16_row(const float * x, void * out, int64_t n) {
    uint16_t * y = (uint16_t *) out;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        _mm512_storeu_si512((void *) (y + i), (__m512i) _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i)));
    }
    for (; i + 16 <= n; i += 16) _mm256_storeu_si256((__m256i *) (y + i), (__m256i) _mm512_cvtneps_pbh(_mm512_loadu_ps(x + i)));
    if (i < n) {
        const __mmask16 m = (__mmask16) ((1u << (n - i)) - 1);
        _mm256_mask_storeu_epi16(y + i, m, (__m256i) _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

}  // namespace ggml_cpu_amx

#endif
