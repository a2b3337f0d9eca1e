// vec-avx512.cpp - AVX512 matmul kernels: 16-lane dot tiles (F16 through F16C, BF16 through
// AVX512-BF16 vdpbf16ps where the build has it), transposing packers, and a 32 x 12 GEMM
// micro-kernel (24 zmm accumulators, one broadcast of b per column), in F32 and, for the opt-in
// BF16 products of out_prod, in bf16 pairs through vdpbf16ps.
#include "kernels-x86.h"

#if defined(GGML_SIMD_AVX512)

#include <immintrin.h>

#include "transpose-avx512.h"

#include <algorithm>

// GCC 12's AVX512 headers start some intrinsics from _mm512_undefined_*(), which trips these.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace ggml_cpu_avx512 {
namespace {

inline __mmask16 mask16(int64_t n) { return (__mmask16) ((1u << n) - 1); }
inline __mmask32 mask32(int64_t n) { return (__mmask32) ((1ull << n) - 1); }

// Fixed reduction tree, so a given accumulator always sums to the same float.
inline float hsum(__m512 v) {
    const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
    return _mm_cvtss_f32(s4);
}

inline __m512 bf16x16_to_f32(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// ---- element loaders: W elements of a row from element i (or the first n < W, zeros after) --
struct LoadF32 {
    static constexpr int W = 16;
    static constexpr size_t BYTES = 4;  // per element
    typedef __m512 V;
    static V load(const char * p, int64_t i) { return _mm512_loadu_ps((const float *) p + i); }
    static V part(const char * p, int64_t i, int64_t n) { return _mm512_maskz_loadu_ps(mask16(n), (const float *) p + i); }
    static __m512 madd(__m512 acc, V a, V b) { return _mm512_fmadd_ps(a, b, acc); }
};

struct LoadF16 {
    static constexpr int W = 16;
    static constexpr size_t BYTES = 2;
    typedef __m512 V;
    static V load(const char * p, int64_t i) {
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) ((const ggml_fp16_t *) p + i)));
    }
    static V part(const char * p, int64_t i, int64_t n) {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask16(n), (const ggml_fp16_t *) p + i));
    }
    static __m512 madd(__m512 acc, V a, V b) { return _mm512_fmadd_ps(a, b, acc); }
};

struct LoadBF16 {  // shift to f32
    static constexpr int W = 16;
    static constexpr size_t BYTES = 2;
    typedef __m512 V;
    static V load(const char * p, int64_t i) {
        return bf16x16_to_f32(_mm256_loadu_si256((const __m256i *) ((const ggml_bf16_t *) p + i)));
    }
    static V part(const char * p, int64_t i, int64_t n) {
        return bf16x16_to_f32(_mm256_maskz_loadu_epi16(mask16(n), (const ggml_bf16_t *) p + i));
    }
    static __m512 madd(__m512 acc, V a, V b) { return _mm512_fmadd_ps(a, b, acc); }
};

#if defined(__AVX512BF16__)
struct LoadBF16Pairs {  // 32 bf16, multiplied pairwise by vdpbf16ps
    static constexpr int W = 32;
    static constexpr size_t BYTES = 2;
    typedef __m512bh V;
    static V load(const char * p, int64_t i) { return (__m512bh) _mm512_loadu_si512((const ggml_bf16_t *) p + i); }
    static V part(const char * p, int64_t i, int64_t n) {
        return (__m512bh) _mm512_maskz_loadu_epi16(mask32(n), (const ggml_bf16_t *) p + i);
    }
    static __m512 madd(__m512 acc, V a, V b) { return _mm512_dpbf16_ps(acc, a, b); }
};
#endif

// ---- dot tiles -----------------------------------------------------------------------------
// One accumulator per output, lanes summing k = lane (mod W), then hsum: the same instruction
// sequence for an output whatever R and C are.
// PF > 0: a's rows are prefetched PF bytes ahead (one row streamed from memory: see dot_tile).
template <typename L, int R, int C, int PF = 0>
void dot_tile_rc(int64_t k, const char * a, size_t lda, const char * b, size_t ldb, float * s, size_t lds) {
    __m512 acc[R][C];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + L::W <= k; i += L::W) {
        if constexpr (PF > 0) {
            for (int r = 0; r < R; r++) _mm_prefetch(a + r * lda + i * L::BYTES + PF, _MM_HINT_T1);
        }
        typename L::V av[R];
        for (int r = 0; r < R; r++) av[r] = L::load(a + r * lda, i);
        for (int c = 0; c < C; c++) {
            const typename L::V bv = L::load(b + c * ldb, i);
            for (int r = 0; r < R; r++) acc[r][c] = L::madd(acc[r][c], av[r], bv);
        }
    }
    if (i < k) {
        const int64_t n = k - i;
        typename L::V av[R];
        for (int r = 0; r < R; r++) av[r] = L::part(a + r * lda, i, n);
        for (int c = 0; c < C; c++) {
            const typename L::V bv = L::part(b + c * ldb, i, n);
            for (int r = 0; r < R; r++) acc[r][c] = L::madd(acc[r][c], av[r], bv);
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) s[c * lds + r] = hsum(acc[r][c]);
}

typedef void (*tile_rc_fn)(int64_t, const char *, size_t, const char *, size_t, float *, size_t);

// One column (matrix-vector: weights streamed from memory) with rows of 2 to 12 KiB: the rows one
// after the other, so that a is read as one ascending stream. The 4 rows of a tile are read as 4
// interleaved streams, which the hardware prefetcher serves worse: Zen 4, one thread, F16 a far
// beyond the caches, K = 1024 .. 6144: 7-20 GB/s in tiles of 4 rows, 19-25 row by row. From
// K = 8192 (b's row 16 KiB, re-read for every row of a, no longer stays in L1 beside the stream)
// row by row drops to 16-17 GB/s against 21. Shorter rows (attention heads against keys in
// cache) keep the tile, whose 4 accumulation chains beat one there (50 vs 33 GB/s in cache).
constexpr size_t ROW_BY_ROW_MIN = 2 * 1024, ROW_BY_ROW_MAX = 12 * 1024;

// PF: bytes ahead to prefetch the rows streamed one by one (0: none, the AVX512 set, as Zen 4
// streams best by itself; 4 KiB in the AMX set's, for Xeons: TinyLlama F16 tg32 7.43 -> 8.13
// tokens/s, alternated builds; 1 KiB gave nothing, 2-8 KiB the same), into L2 (prefetcht1:
// 8.42-8.80 -> 9.06-9.47 against prefetcht0, four alternated pairs).
// With PF, the rows of a tile (up to 4) go side by side, each prefetched: one row's single chain of
// FMAs (4 cycles each, 128 a 4 KiB row) held the stream back on a busy machine: F16 tg32,
// alternated, 5 pairs: 2 rows +14%, then 4 rows +12% more.
template <typename L, int PF = 0>
void dot_tile(int64_t k, int nr, int nc, const void * a, size_t lda, const void * b, size_t ldb, float * s, size_t lds) {
    if (nc == 1 && (size_t) k * L::BYTES >= ROW_BY_ROW_MIN && (size_t) k * L::BYTES <= ROW_BY_ROW_MAX) {
        if constexpr (PF > 0) {
            // Prefetched rows may go side by side: each its own chain of FMAs, so that a row's
            // 4-cycle chain no longer paces the stream (the same bits: one chain per output).
            static const tile_rc_fn rows[4] = { dot_tile_rc<L, 1, 1, PF>, dot_tile_rc<L, 2, 1, PF>, dot_tile_rc<L, 3, 1, PF>,
                                                dot_tile_rc<L, 4, 1, PF> };
            for (int r = 0; r < nr; r += 4) rows[std::min(nr - r, 4) - 1](k, (const char *) a + r * lda, lda, (const char *) b, ldb, s + r, lds);
            return;
        }
        for (int r = 0; r < nr; r++) dot_tile_rc<L, 1, 1, PF>(k, (const char *) a + r * lda, lda, (const char *) b, ldb, s + r, lds);
        return;
    }
    static const tile_rc_fn fns[4][4] = {
        { dot_tile_rc<L, 1, 1>, dot_tile_rc<L, 1, 2>, dot_tile_rc<L, 1, 3>, dot_tile_rc<L, 1, 4> },
        { dot_tile_rc<L, 2, 1>, dot_tile_rc<L, 2, 2>, dot_tile_rc<L, 2, 3>, dot_tile_rc<L, 2, 4> },
        { dot_tile_rc<L, 3, 1>, dot_tile_rc<L, 3, 2>, dot_tile_rc<L, 3, 3>, dot_tile_rc<L, 3, 4> },
        { dot_tile_rc<L, 4, 1>, dot_tile_rc<L, 4, 2>, dot_tile_rc<L, 4, 3>, dot_tile_rc<L, 4, 4> },
    };
    fns[nr - 1][nc - 1](k, (const char *) a, lda, (const char *) b, ldb, s, lds);
}

// ---- row conversions -----------------------------------------------------------------------
void fp32_to_fp16(const float * x, void * y, int64_t n) {
    ggml_fp16_t * out = (ggml_fp16_t *) y;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_storeu_si256((__m256i *) (out + i), h);
    }
    if (i < n) {
        const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(mask16(n - i), x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_mask_storeu_epi16(out + i, mask16(n - i), h);
    }
}

// Round to nearest even; NaN stays a quiet NaN (as GGML_FP32_TO_BF16).
inline __m256i f32_to_bf16x16(__m512 v) {
#if defined(__AVX512BF16__)
    return (__m256i) _mm512_cvtneps_pbh(v);
#else
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(64));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
#endif
}

void fp32_to_bf16(const float * x, void * y, int64_t n) {
    ggml_bf16_t * out = (ggml_bf16_t *) y;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm256_storeu_si256((__m256i *) (out + i), f32_to_bf16x16(_mm512_loadu_ps(x + i)));
    if (i < n) _mm256_mask_storeu_epi16(out + i, mask16(n - i), f32_to_bf16x16(_mm512_maskz_loadu_ps(mask16(n - i), x + i)));
}

// ---- packing -------------------------------------------------------------------------------
// f32 units (k_unit 1) from rows of T, 16 rows x 16 k at a time through a register transpose.
template <typename L, typename T>
void pack(const void * src, size_t ld, int rows, int width, int64_t k0, int64_t nk, void * dst) {
    float * out = (float *) dst;
    for (int i0 = 0; i0 < width; i0 += 16) {
        const __mmask16 store_mask = mask16(std::min(16, width - i0));
        const int nrows = std::max(0, std::min(16, rows - i0));
        const char * row0 = (const char *) src + i0 * ld + k0 * sizeof(T);
        for (int64_t u = 0; u < nk; u += 16) {
            __m512 r[16];
            for (int i = 0; i < 16; i++) {
                if (i >= nrows) r[i] = _mm512_setzero_ps();
                else r[i] = nk - u >= 16 ? L::load(row0 + i * ld, u) : L::part(row0 + i * ld, u, nk - u);
            }
            ggml_transpose16x16(r);
            const int nt = (int) std::min<int64_t>(16, nk - u);
            for (int t = 0; t < nt; t++) _mm512_mask_storeu_ps(out + (u + t) * width + i0, store_mask, r[t]);
        }
    }
}

// ---- GEMM micro-kernel --------------------------------------------------------------------
constexpr int MR = 32, NR = 12;
// b micro-panel (KC x NR f32, 24 KiB) in L1, a block (MC x KC, 512 KiB) in L2; measured best
// of KC 256..512 x MC 128..512 at 1024^3 and 4096 x 512 x 4096.
constexpr int KC = 512, MC = 256;
// From how many rows of b packing pays off (measured, 1 thread, K = M = 1024 and 4096): the f32
// dot tiles keep up to N ~ 64, the f16/bf16 ones (converting both sides) to N ~ 20.
constexpr int MIN_N_F32 = 64, MIN_N_F16 = 20;

void micro_f32(int64_t nu, const void * a, const void * b, float * c, size_t ldc, bool accumulate) {
    const float * A = (const float *) a;
    const float * B = (const float *) b;
    __m512 c0[NR], c1[NR];
    for (int j = 0; j < NR; j++) {
        c0[j] = accumulate ? _mm512_loadu_ps(c + j * ldc) : _mm512_setzero_ps();
        c1[j] = accumulate ? _mm512_loadu_ps(c + j * ldc + 16) : _mm512_setzero_ps();
    }
    for (int64_t u = 0; u < nu; u++) {
        const __m512 a0 = _mm512_loadu_ps(A), a1 = _mm512_loadu_ps(A + 16);
#pragma GCC unroll 12
        for (int j = 0; j < NR; j++) {
            const __m512 bj = _mm512_set1_ps(B[j]);
            c0[j] = _mm512_fmadd_ps(a0, bj, c0[j]);
            c1[j] = _mm512_fmadd_ps(a1, bj, c1[j]);
        }
        A += MR;
        B += NR;
    }
    for (int j = 0; j < NR; j++) {
        _mm512_storeu_ps(c + j * ldc, c0[j]);
        _mm512_storeu_ps(c + j * ldc + 16, c1[j]);
    }
}

// ---- BF16 products (opt-in, out_prod with GGML_PREC_BF16) ---------------------------------
#if defined(__AVX512BF16__)
// As micro_f32 with vdpbf16ps: each unit is a pair of k, two products per lane and instruction.
void micro_bf16(int64_t nu, const void * a, const void * b, float * c, size_t ldc, bool accumulate) {
    const uint32_t * A = (const uint32_t *) a;
    const uint32_t * B = (const uint32_t *) b;
    __m512 c0[NR], c1[NR];
    for (int j = 0; j < NR; j++) {
        c0[j] = accumulate ? _mm512_loadu_ps(c + j * ldc) : _mm512_setzero_ps();
        c1[j] = accumulate ? _mm512_loadu_ps(c + j * ldc + 16) : _mm512_setzero_ps();
    }
    for (int64_t u = 0; u < nu; u++) {
        const __m512bh a0 = (__m512bh) _mm512_loadu_si512(A), a1 = (__m512bh) _mm512_loadu_si512(A + 16);
#pragma GCC unroll 12
        for (int j = 0; j < NR; j++) {
            const __m512bh bj = (__m512bh) _mm512_set1_epi32((int) B[j]);
            c0[j] = _mm512_dpbf16_ps(c0[j], a0, bj);
            c1[j] = _mm512_dpbf16_ps(c1[j], a1, bj);
        }
        A += MR;
        B += NR;
    }
    for (int j = 0; j < NR; j++) {
        _mm512_storeu_ps(c + j * ldc, c0[j]);
        _mm512_storeu_ps(c + j * ldc + 16, c1[j]);
    }
}

#endif

// ---- tables --------------------------------------------------------------------------------
const ggml_gemm_kernel gemm_f32  = { MR, NR, 1, KC, MC, MIN_N_F32, pack<LoadF32, float>, pack<LoadF32, float>, micro_f32 };
const ggml_gemm_kernel gemm_f16  = { MR, NR, 1, KC, MC, MIN_N_F16, pack<LoadF16, ggml_fp16_t>, pack<LoadF16, ggml_fp16_t>, micro_f32 };
// BF16 GEMM converts to f32 while packing: a vdpbf16ps micro-kernel (two k per instruction)
// measured at half the f32 one's rate on Sapphire Rapids (~113 vs ~220 GFLOP/s per core), and
// the f32 path keeps every product exact. The dot path (memory-bound) does use vdpbf16ps.
const ggml_gemm_kernel gemm_bf16 = { MR, NR, 1, KC, MC, MIN_N_F16, pack<LoadBF16, ggml_bf16_t>, pack<LoadBF16, ggml_bf16_t>, micro_f32 };
#if defined(__AVX512BF16__)
typedef LoadBF16Pairs DotBF16;
#else
typedef LoadBF16 DotBF16;
#endif

const ggml_mm_type_kernels mm_f32  = { GGML_TYPE_F32,  nullptr,      dot_tile<LoadF32>, &gemm_f32 };
const ggml_mm_type_kernels mm_f16  = { GGML_TYPE_F16,  fp32_to_fp16, dot_tile<LoadF16>, &gemm_f16 };
const ggml_mm_type_kernels mm_bf16 = { GGML_TYPE_BF16, fp32_to_bf16, dot_tile<DotBF16>, &gemm_bf16 };
constexpr int ROW_PF = 4096;
const ggml_mm_type_kernels mm_f32_pf  = { GGML_TYPE_F32,  nullptr,      dot_tile<LoadF32, ROW_PF>, &gemm_f32 };
const ggml_mm_type_kernels mm_f16_pf  = { GGML_TYPE_F16,  fp32_to_fp16, dot_tile<LoadF16, ROW_PF>, &gemm_f16 };
const ggml_mm_type_kernels mm_bf16_pf = { GGML_TYPE_BF16, fp32_to_bf16, dot_tile<DotBF16, ROW_PF>, &gemm_bf16 };

}  // namespace

void fp16_to_fp32(const void * x, float * y, int64_t n) {
    const char * p = (const char *) x;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, LoadF16::load(p, i));
    if (i < n) _mm512_mask_storeu_ps(y + i, mask16(n - i), LoadF16::part(p, i, n - i));
}

void bf16_to_fp32(const void * x, float * y, int64_t n) {
    const char * p = (const char *) x;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, LoadBF16::load(p, i));
    if (i < n) _mm512_mask_storeu_ps(y + i, mask16(n - i), LoadBF16::part(p, i, n - i));
}

// ---- axpy ----------------------------------------------------------------------------------
void axpy(int64_t n, int nx, const float * s, const float * const * x, float * y) {
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512 y0 = _mm512_loadu_ps(y + i), y1 = _mm512_loadu_ps(y + i + 16);
        __m512 y2 = _mm512_loadu_ps(y + i + 32), y3 = _mm512_loadu_ps(y + i + 48);
        for (int j = 0; j < nx; j++) {
            const __m512 sj = _mm512_set1_ps(s[j]);
            const float * xj = x[j] + i;
            y0 = _mm512_fmadd_ps(sj, _mm512_loadu_ps(xj), y0);
            y1 = _mm512_fmadd_ps(sj, _mm512_loadu_ps(xj + 16), y1);
            y2 = _mm512_fmadd_ps(sj, _mm512_loadu_ps(xj + 32), y2);
            y3 = _mm512_fmadd_ps(sj, _mm512_loadu_ps(xj + 48), y3);
        }
        _mm512_storeu_ps(y + i, y0);
        _mm512_storeu_ps(y + i + 16, y1);
        _mm512_storeu_ps(y + i + 32, y2);
        _mm512_storeu_ps(y + i + 48, y3);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = mask16(std::min<int64_t>(16, n - i));
        __m512 yv = _mm512_maskz_loadu_ps(m, y + i);
        for (int j = 0; j < nx; j++) yv = _mm512_fmadd_ps(_mm512_set1_ps(s[j]), _mm512_maskz_loadu_ps(m, x[j] + i), yv);
        _mm512_mask_storeu_ps(y + i, m, yv);
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

const ggml_mm_type_kernels * mm_type_pf(ggml_type type) {
    switch (type) {
        case GGML_TYPE_F32:  return &mm_f32_pf;
        case GGML_TYPE_F16:  return &mm_f16_pf;
        case GGML_TYPE_BF16: return &mm_bf16_pf;
        default:             return nullptr;
    }
}

// ---- BF16 products (opt-in, out_prod with GGML_PREC_BF16) ---------------------------------
#if defined(__AVX512BF16__)
// Units (bf16(x0[i]), bf16(x1[i])): one two-source conversion, then the halves interleaved.
void bf16_pairs(const float * x0, const float * x1, int64_t n, void * out) {
    uint32_t * o = (uint32_t *) out;
    // word 2i <- word i (x0), word 2i + 1 <- word 16 + i (x1)
    static const uint16_t order[32] = { 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
                                        8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31 };
    const __m512i idx = _mm512_loadu_si512(order);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v0 = _mm512_loadu_ps(x0 + i);
        const __m512 v1 = x1 ? _mm512_loadu_ps(x1 + i) : _mm512_setzero_ps();
        const __m512i w = (__m512i) _mm512_cvtne2ps_pbh(v1, v0);  // words 0..15: v0, 16..31: v1
        _mm512_storeu_si512(o + i, _mm512_permutexvar_epi16(idx, w));
    }
    if (i < n) {
        const __mmask16 m = mask16(n - i);
        const __m512 v0 = _mm512_maskz_loadu_ps(m, x0 + i);
        const __m512 v1 = x1 ? _mm512_maskz_loadu_ps(m, x1 + i) : _mm512_setzero_ps();
        const __m512i w = (__m512i) _mm512_cvtne2ps_pbh(v1, v0);
        _mm512_mask_storeu_epi32(o + i, m, _mm512_permutexvar_epi16(idx, w));
    }
}

// KC in pairs: the b micro-panel takes the same 24 KiB of L1 as the f32 kernel's.
extern const ggml_gemm_kernel gemm_bf16_pairs = { MR, NR, 2, KC, MC, MIN_N_F32, nullptr, nullptr, micro_bf16 };
#endif

}  // namespace ggml_cpu_avx512

#endif  // GGML_SIMD_AVX512
