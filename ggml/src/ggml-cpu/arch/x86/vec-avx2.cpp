// vec-avx2.cpp - AVX2 + FMA + F16C matmul kernels: 8-lane dot tiles (F16 through F16C, BF16 by
// shifting to f32), transposing packers, and a 16 x 6 GEMM micro-kernel (12 ymm accumulators).
// AVX512 builds compile these too (and test them).
#include "kernels-x86.h"

#if defined(GGML_SIMD_AVX2)

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <string.h>

namespace ggml_cpu_avx2 {
namespace {

// Fixed reduction tree, so a given accumulator always sums to the same float.
inline float hsum(__m256 v) {
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
    return _mm_cvtss_f32(s4);
}

inline __m256 bf16x8_to_f32(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// The first n (< 8) elements of type T from p, zeros after, as a full vector's worth of bytes.
template <typename T>
inline void copy_part(T * buf, const T * p, int64_t n) {
    memset(buf, 0, 8 * sizeof(T));
    memcpy(buf, p, n * sizeof(T));
}

// ---- element loaders: 8 elements of a row from element i (or the first n < 8, zeros after) --
struct LoadF32 {
    static constexpr int W = 8;
    static __m256 load(const char * p, int64_t i) { return _mm256_loadu_ps((const float *) p + i); }
    static __m256 part(const char * p, int64_t i, int64_t n) {
        float buf[8];
        copy_part(buf, (const float *) p + i, n);
        return _mm256_loadu_ps(buf);
    }
};

struct LoadF16 {
    static constexpr int W = 8;
    static __m256 load(const char * p, int64_t i) {
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) ((const ggml_fp16_t *) p + i)));
    }
    static __m256 part(const char * p, int64_t i, int64_t n) {
        ggml_fp16_t buf[8];
        copy_part(buf, (const ggml_fp16_t *) p + i, n);
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) buf));
    }
};

struct LoadBF16 {
    static constexpr int W = 8;
    static __m256 load(const char * p, int64_t i) {
        return bf16x8_to_f32(_mm_loadu_si128((const __m128i *) ((const ggml_bf16_t *) p + i)));
    }
    static __m256 part(const char * p, int64_t i, int64_t n) {
        ggml_bf16_t buf[8];
        copy_part(buf, (const ggml_bf16_t *) p + i, n);
        return bf16x8_to_f32(_mm_loadu_si128((const __m128i *) buf));
    }
};

// ---- dot tiles -----------------------------------------------------------------------------
// One accumulator per output (lanes sum k = lane mod 8), then hsum: the same instruction
// sequence for an output whatever the tile shape.
template <typename L, int R, int C>
void dot_tile_rc(int64_t k, const char * a, size_t lda, const char * b, size_t ldb, float * s, size_t lds) {
    __m256 acc[R][C];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + L::W <= k; i += L::W) {
        __m256 av[R];
        for (int r = 0; r < R; r++) av[r] = L::load(a + r * lda, i);
        for (int c = 0; c < C; c++) {
            const __m256 bv = L::load(b + c * ldb, i);
            for (int r = 0; r < R; r++) acc[r][c] = _mm256_fmadd_ps(av[r], bv, acc[r][c]);
        }
    }
    if (i < k) {
        const int64_t n = k - i;
        __m256 av[R];
        for (int r = 0; r < R; r++) av[r] = L::part(a + r * lda, i, n);
        for (int c = 0; c < C; c++) {
            const __m256 bv = L::part(b + c * ldb, i, n);
            for (int r = 0; r < R; r++) acc[r][c] = _mm256_fmadd_ps(av[r], bv, acc[r][c]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) s[c * lds + r] = hsum(acc[r][c]);
}

typedef void (*tile_rc_fn)(int64_t, const char *, size_t, const char *, size_t, float *, size_t);

// 16 ymm registers: at most 4 x 2 accumulators per call; wider tiles are done 2 columns at a time.
template <typename L>
void dot_tile(int64_t k, int nr, int nc, const void * a, size_t lda, const void * b, size_t ldb, float * s, size_t lds) {
    static const tile_rc_fn fns[4][2] = {
        { dot_tile_rc<L, 1, 1>, dot_tile_rc<L, 1, 2> },
        { dot_tile_rc<L, 2, 1>, dot_tile_rc<L, 2, 2> },
        { dot_tile_rc<L, 3, 1>, dot_tile_rc<L, 3, 2> },
        { dot_tile_rc<L, 4, 1>, dot_tile_rc<L, 4, 2> },
    };
    for (int c0 = 0; c0 < nc; c0 += 2) {
        const int cn = std::min(2, nc - c0);
        fns[nr - 1][cn - 1](k, (const char *) a, lda, (const char *) b + c0 * ldb, ldb, s + c0 * lds, lds);
    }
}

// ---- row conversions -----------------------------------------------------------------------
void fp32_to_fp16(const float * x, void * y, int64_t n) {
    ggml_fp16_t * out = (ggml_fp16_t *) y;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm_storeu_si128((__m128i *) (out + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    for (; i < n; i++) out[i] = GGML_FP32_TO_FP16(x[i]);
}

// Round to nearest even; NaN stays a quiet NaN (as GGML_FP32_TO_BF16).
void fp32_to_bf16(const float * x, void * y, int64_t n) {
    ggml_bf16_t * out = (ggml_bf16_t *) y;
    int64_t i = 0;
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    for (; i + 8 <= n; i += 8) {
        const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(x + i));
        const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
        const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, bias)), 16);
        const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(64));
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
        const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
        // pack 8 x 32-bit (values < 2^16) to 8 x 16-bit
        const __m128i lo = _mm256_castsi256_si128(r), hi = _mm256_extracti128_si256(r, 1);
        _mm_storeu_si128((__m128i *) (out + i), _mm_packus_epi32(lo, hi));
    }
    for (; i < n; i++) out[i] = GGML_FP32_TO_BF16(x[i]);
}

// ---- packing -------------------------------------------------------------------------------
// In place: r[j][i] <- r[i][j] for an 8 x 8 block of floats.
inline void transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i]     = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // u[4g + c], 128-bit lane L: rows 4g..4g+3 of column 4L + c
    for (int g = 0; g < 2; g++) {
        u[4 * g + 0] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int c = 0; c < 4; c++) {
        r[c]     = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
        r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
}

template <typename L, typename T>
void pack(const void * src, size_t ld, int rows, int width, int64_t k0, int64_t nk, void * dst) {
    float * out = (float *) dst;
    for (int i0 = 0; i0 < width; i0 += 8) {
        const int lanes = std::min(8, width - i0);
        const __m256i store_mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        const int nrows = std::max(0, std::min(8, rows - i0));
        const char * row0 = (const char *) src + i0 * ld + k0 * sizeof(T);
        for (int64_t u = 0; u < nk; u += 8) {
            __m256 r[8];
            for (int i = 0; i < 8; i++) {
                if (i >= nrows) r[i] = _mm256_setzero_ps();
                else r[i] = nk - u >= 8 ? L::load(row0 + i * ld, u) : L::part(row0 + i * ld, u, nk - u);
            }
            transpose8(r);
            const int nt = (int) std::min<int64_t>(8, nk - u);
            for (int t = 0; t < nt; t++) {
                if (lanes == 8) _mm256_storeu_ps(out + (u + t) * width + i0, r[t]);
                else _mm256_maskstore_ps(out + (u + t) * width + i0, store_mask, r[t]);
            }
        }
    }
}

// ---- GEMM micro-kernel ---------------------------------------------------------------------
constexpr int MR = 16, NR = 6;

// Named accumulators: with an array of 12 __m256 (all 16 registers in use) GCC 12 keeps
// storing the array to the stack inside the loop, halving the speed.
void micro_f32(int64_t nu, const void * a, const void * b, float * c, size_t ldc, bool accumulate) {
    const float * A = (const float *) a;
    const float * B = (const float *) b;
    __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    if (accumulate) {
        c00 = _mm256_loadu_ps(c + 0 * ldc); c01 = _mm256_loadu_ps(c + 0 * ldc + 8);
        c10 = _mm256_loadu_ps(c + 1 * ldc); c11 = _mm256_loadu_ps(c + 1 * ldc + 8);
        c20 = _mm256_loadu_ps(c + 2 * ldc); c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
        c30 = _mm256_loadu_ps(c + 3 * ldc); c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
        c40 = _mm256_loadu_ps(c + 4 * ldc); c41 = _mm256_loadu_ps(c + 4 * ldc + 8);
        c50 = _mm256_loadu_ps(c + 5 * ldc); c51 = _mm256_loadu_ps(c + 5 * ldc + 8);
    } else {
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
    }
    for (int64_t u = 0; u < nu; u++) {
        const __m256 a0 = _mm256_loadu_ps(A), a1 = _mm256_loadu_ps(A + 8);
        __m256 bj;
        bj = _mm256_broadcast_ss(B + 0); c00 = _mm256_fmadd_ps(a0, bj, c00); c01 = _mm256_fmadd_ps(a1, bj, c01);
        bj = _mm256_broadcast_ss(B + 1); c10 = _mm256_fmadd_ps(a0, bj, c10); c11 = _mm256_fmadd_ps(a1, bj, c11);
        bj = _mm256_broadcast_ss(B + 2); c20 = _mm256_fmadd_ps(a0, bj, c20); c21 = _mm256_fmadd_ps(a1, bj, c21);
        bj = _mm256_broadcast_ss(B + 3); c30 = _mm256_fmadd_ps(a0, bj, c30); c31 = _mm256_fmadd_ps(a1, bj, c31);
        bj = _mm256_broadcast_ss(B + 4); c40 = _mm256_fmadd_ps(a0, bj, c40); c41 = _mm256_fmadd_ps(a1, bj, c41);
        bj = _mm256_broadcast_ss(B + 5); c50 = _mm256_fmadd_ps(a0, bj, c50); c51 = _mm256_fmadd_ps(a1, bj, c51);
        A += MR;
        B += NR;
    }
    _mm256_storeu_ps(c + 0 * ldc, c00); _mm256_storeu_ps(c + 0 * ldc + 8, c01);
    _mm256_storeu_ps(c + 1 * ldc, c10); _mm256_storeu_ps(c + 1 * ldc + 8, c11);
    _mm256_storeu_ps(c + 2 * ldc, c20); _mm256_storeu_ps(c + 2 * ldc + 8, c21);
    _mm256_storeu_ps(c + 3 * ldc, c30); _mm256_storeu_ps(c + 3 * ldc + 8, c31);
    _mm256_storeu_ps(c + 4 * ldc, c40); _mm256_storeu_ps(c + 4 * ldc + 8, c41);
    _mm256_storeu_ps(c + 5 * ldc, c50); _mm256_storeu_ps(c + 5 * ldc + 8, c51);
}

// ---- tables --------------------------------------------------------------------------------
const ggml_gemm_kernel gemm_f32  = { MR, NR, 1, 256, 128, 64, pack<LoadF32, float>, pack<LoadF32, float>, micro_f32 };
const ggml_gemm_kernel gemm_f16  = { MR, NR, 1, 256, 128, 20, pack<LoadF16, ggml_fp16_t>, pack<LoadF16, ggml_fp16_t>, micro_f32 };
const ggml_gemm_kernel gemm_bf16 = { MR, NR, 1, 256, 128, 20, pack<LoadBF16, ggml_bf16_t>, pack<LoadBF16, ggml_bf16_t>, micro_f32 };

const ggml_mm_type_kernels mm_f32  = { GGML_TYPE_F32,  nullptr,      dot_tile<LoadF32>,  &gemm_f32 };
const ggml_mm_type_kernels mm_f16  = { GGML_TYPE_F16,  fp32_to_fp16, dot_tile<LoadF16>,  &gemm_f16 };
const ggml_mm_type_kernels mm_bf16 = { GGML_TYPE_BF16, fp32_to_bf16, dot_tile<LoadBF16>, &gemm_bf16 };

}  // namespace

void fp16_to_fp32(const void * x, float * y, int64_t n) {
    const char * p = (const char *) x;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, LoadF16::load(p, i));
    for (; i < n; i++) y[i] = GGML_FP16_TO_FP32(((const ggml_fp16_t *) x)[i]);
}

void bf16_to_fp32(const void * x, float * y, int64_t n) {
    const char * p = (const char *) x;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, LoadBF16::load(p, i));
    for (; i < n; i++) y[i] = GGML_BF16_TO_FP32(((const ggml_bf16_t *) x)[i]);
}

// ---- axpy ----------------------------------------------------------------------------------
void axpy(int64_t n, int nx, const float * s, const float * const * x, float * y) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 y0 = _mm256_loadu_ps(y + i), y1 = _mm256_loadu_ps(y + i + 8);
        __m256 y2 = _mm256_loadu_ps(y + i + 16), y3 = _mm256_loadu_ps(y + i + 24);
        for (int j = 0; j < nx; j++) {
            const __m256 sj = _mm256_set1_ps(s[j]);
            const float * xj = x[j] + i;
            y0 = _mm256_fmadd_ps(sj, _mm256_loadu_ps(xj), y0);
            y1 = _mm256_fmadd_ps(sj, _mm256_loadu_ps(xj + 8), y1);
            y2 = _mm256_fmadd_ps(sj, _mm256_loadu_ps(xj + 16), y2);
            y3 = _mm256_fmadd_ps(sj, _mm256_loadu_ps(xj + 24), y3);
        }
        _mm256_storeu_ps(y + i, y0);
        _mm256_storeu_ps(y + i + 8, y1);
        _mm256_storeu_ps(y + i + 16, y2);
        _mm256_storeu_ps(y + i + 24, y3);
    }
    for (; i < n; i++) {
        float v = y[i];
        for (int j = 0; j < nx; j++) v = std::fma(s[j], x[j][i], v);
        y[i] = v;
    }
}

const ggml_mm_type_kernels * mm_type(ggml_type type) {
    switch (type) {
        case GGML_TYPE_F32:  return &mm_f32;
        case GGML_TYPE_F16:  return &mm_f16;
        case GGML_TYPE_BF16: return &mm_bf16;
        default:             return nullptr;
    }
}

}  // namespace ggml_cpu_avx2

#endif  // GGML_SIMD_AVX2
