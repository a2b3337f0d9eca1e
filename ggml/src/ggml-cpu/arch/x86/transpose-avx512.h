// transpose-avx512.h - the 16 x 16 register transpose of 32-bit values that the AVX512 GEMM
// packing (vec-avx512.cpp) and the AMX tiles' pair layout (gemm-float-amx.cpp) share.
#pragma once

#if defined(__AVX512F__)
#include <immintrin.h>

// In place: r[j][i] <- r[i][j] for a 16 x 16 block of 32-bit values.
inline void ggml_transpose16x16(__m512 r[16]) {
    __m512 t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i]     = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // u[4g + c], lane L: rows 4g..4g+3 of column 4L + c
    for (int g = 0; g < 4; g++) {
        const __m512d t0 = _mm512_castps_pd(t[4 * g]), t1 = _mm512_castps_pd(t[4 * g + 1]);
        const __m512d t2 = _mm512_castps_pd(t[4 * g + 2]), t3 = _mm512_castps_pd(t[4 * g + 3]);
        u[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
        u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
        u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
        u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
    }
    for (int c = 0; c < 4; c++) {
        const __m512 xlo = _mm512_shuffle_f32x4(u[c], u[4 + c], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512 xhi = _mm512_shuffle_f32x4(u[c], u[4 + c], _MM_SHUFFLE(3, 2, 3, 2));
        const __m512 ylo = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], _MM_SHUFFLE(1, 0, 1, 0));
        const __m512 yhi = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], _MM_SHUFFLE(3, 2, 3, 2));
        r[c]      = _mm512_shuffle_f32x4(xlo, ylo, _MM_SHUFFLE(2, 0, 2, 0));
        r[4 + c]  = _mm512_shuffle_f32x4(xlo, ylo, _MM_SHUFFLE(3, 1, 3, 1));
        r[8 + c]  = _mm512_shuffle_f32x4(xhi, yhi, _MM_SHUFFLE(2, 0, 2, 0));
        r[12 + c] = _mm512_shuffle_f32x4(xhi, yhi, _MM_SHUFFLE(3, 1, 3, 1));
    }
}

inline void ggml_transpose16x16(__m512i r[16]) {
    __m512 f[16];
    for (int i = 0; i < 16; i++) f[i] = _mm512_castsi512_ps(r[i]);
    ggml_transpose16x16(f);
    for (int i = 0; i < 16; i++) r[i] = _mm512_castps_si512(f[i]);
}
#endif
