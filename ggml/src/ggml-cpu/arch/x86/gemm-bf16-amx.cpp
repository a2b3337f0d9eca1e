// gemm-bf16-amx.cpp - AMX-BF16 tile products for out_prod with GGML_PREC_BF16 (out-prod.cpp):
// 2 x 2 tiles of 16 x 16 F32 sums, accumulated in the tiles over the whole m range of a call,
// so that the tile unit streams (no per-block scaling, unlike the int8 kernels). Also F32 rows
// to bf16, rounding to nearest even as vcvtne2ps2bf16 does in bf16_pairs.
// The products of bf16 values are exact in F32; the tiles add them in their own order, so the
// sums differ in the last bits from those of the bf16-pairs GEMM (scalar and vdpbf16ps, which
// add per unit the high halves' product, then the low halves').
#include "amx.h"

#if defined(GGML_SIMD_AMX) && (defined(__AMX_BF16__) || defined(__AMXBF16__)) && defined(__AVX512BF16__)

#include "simd-avx512.h"

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
    configure(Tiles::full);
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

// A repacked Q4_0 block of 16 rows m (32 values of k) to the tiles' pairs of m: out + s *
// sub_stride + 16 i holds for k = 16 s .. 16 s + 15 the units (bf16(w[2i][k]), bf16(w[2i+1][k])),
// the same bits as dequantizing the rows and bf16_pairs: (q - 8) d is computed as fma(q, d, -8 d),
// the same real rounded once. Lanes are the 16 rows; a lane's value for k = 2p, 2p + 1 become one
// qword of pair i, and an 8 x 8 transpose of qwords puts each pair's 16 values of k in order.
void q4_0x16_to_bf16_pairs(const void * vg, void * vout, size_t sub_stride) {
    const block_q4_0x16 * g = (const block_q4_0x16 *) vg;
    uint32_t * out = (uint32_t *) vout;
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) g->d));
    const __m512 m8d = _mm512_mul_ps(d, _mm512_set1_ps(-8.0f));
    const __m512i nib = _mm512_set1_epi32(0xF);
    const __m512i idx = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    for (int s = 0; s < 2; s++) {  // s = 0: the low nibbles (k = 4j + t), 1: the high ones (k = 16 + 4j + t)
        __m512i y[8];
        for (int p = 0; p < 8; p++) {  // k = 16 s + 2p, 2p + 1: byte 2 (p % 2) (+1) of column j = p / 2
            const __m512i w = _mm512_loadu_si512((const void *) (g->qs + 64 * (p / 2)));
            const int sh = 16 * (p % 2) + 4 * s;
            const __m512 v0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(w, sh), nib)), d, m8d);
            const __m512 v1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(w, sh + 8), nib)), d, m8d);
            // dwords 0-7: pairs of rows at k = 2p, 8-15: at 2p + 1; interleaved: qword i = pair i at both.
            y[p] = _mm512_permutexvar_epi32(idx, (__m512i) _mm512_cvtne2ps_pbh(v1, v0));
        }
        __m512i t[8], u[8];
        for (int p = 0; p < 8; p += 2) {
            t[p] = _mm512_unpacklo_epi64(y[p], y[p + 1]);
            t[p + 1] = _mm512_unpackhi_epi64(y[p], y[p + 1]);
        }
        for (int h = 0; h < 2; h++) {  // rows 0-3 (h = 0) and 4-7 of y
            u[4 * h + 0] = _mm512_shuffle_i64x2(t[4 * h + 0], t[4 * h + 2], 0x88);
            u[4 * h + 1] = _mm512_shuffle_i64x2(t[4 * h + 0], t[4 * h + 2], 0xDD);
            u[4 * h + 2] = _mm512_shuffle_i64x2(t[4 * h + 1], t[4 * h + 3], 0x88);
            u[4 * h + 3] = _mm512_shuffle_i64x2(t[4 * h + 1], t[4 * h + 3], 0xDD);
        }
        uint32_t * o = out + s * sub_stride;
        _mm512_storeu_si512((void *) (o + 16 * 0), _mm512_shuffle_i64x2(u[0], u[4], 0x88));
        _mm512_storeu_si512((void *) (o + 16 * 4), _mm512_shuffle_i64x2(u[0], u[4], 0xDD));
        _mm512_storeu_si512((void *) (o + 16 * 2), _mm512_shuffle_i64x2(u[1], u[5], 0x88));
        _mm512_storeu_si512((void *) (o + 16 * 6), _mm512_shuffle_i64x2(u[1], u[5], 0xDD));
        _mm512_storeu_si512((void *) (o + 16 * 1), _mm512_shuffle_i64x2(u[2], u[6], 0x88));
        _mm512_storeu_si512((void *) (o + 16 * 5), _mm512_shuffle_i64x2(u[2], u[6], 0xDD));
        _mm512_storeu_si512((void *) (o + 16 * 3), _mm512_shuffle_i64x2(u[3], u[7], 0x88));
        _mm512_storeu_si512((void *) (o + 16 * 7), _mm512_shuffle_i64x2(u[3], u[7], 0xDD));
    }
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
