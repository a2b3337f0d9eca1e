// vec-avx512.cpp - AVX512 matmul kernels: simd.h's 16-lane dot tiles (F16 through F16C, BF16
// through AVX512-BF16 vdpbf16ps where the build has it), packers and conversions over
// simd-avx512.h, the row-by-row dot of one streamed column, and a 32 x 12 GEMM
// micro-kernel (24 zmm accumulators, one broadcast of b per column), in F32 and, for the opt-in
// BF16 products of out_prod, in bf16 pairs through vdpbf16ps.
#include "kernels-x86.h"

#if defined(GGML_SIMD_AVX512)

#include "simd-avx512.h"

#include <algorithm>

namespace ggml_cpu_avx512 {
namespace {

using V = ggml_simd::avx512;
using LoadF32 = ggml_simd::load_row<V, float>;
using LoadF16 = ggml_simd::load_row<V, ggml_fp16_t>;
using LoadBF16 = ggml_simd::load_row<V, ggml_bf16_t>;
using ggml_simd::mask16;

inline __mmask32 mask32(int64_t n) { return (__mmask32) ((1ull << n) - 1); }

#if defined(__AVX512BF16__)
struct LoadBF16Pairs {  // 32 bf16, multiplied pairwise by vdpbf16ps
    static constexpr int W = 32;
    static constexpr size_t BYTES = 2;
    typedef __m512bh T;
    static T load(const char * p, int64_t i) { return (__m512bh) _mm512_loadu_si512((const ggml_bf16_t *) p + i); }
    static T part(const char * p, int64_t i, int64_t n) {
        return (__m512bh) _mm512_maskz_loadu_epi16(mask32(n), (const ggml_bf16_t *) p + i);
    }
    static __m512 madd(__m512 acc, T a, T b) { return _mm512_dpbf16_ps(acc, a, b); }
};
#endif

// ---- dot tiles (simd.h: dot_tile_rc) ----------------------------------------------------------
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
    using ggml_simd::dot_tile_rc;
    if (nc == 1 && (size_t) k * L::BYTES >= ROW_BY_ROW_MIN && (size_t) k * L::BYTES <= ROW_BY_ROW_MAX) {
        if constexpr (PF > 0) {
            // Prefetched rows may go side by side: each its own chain of FMAs, so that a row's
            // 4-cycle chain no longer paces the stream (the same bits: one chain per output).
            static const ggml_simd::dot_tile_rc_fn rows[4] = { dot_tile_rc<V, L, 1, 1, PF>, dot_tile_rc<V, L, 2, 1, PF>, dot_tile_rc<V, L, 3, 1, PF>,
                                                dot_tile_rc<V, L, 4, 1, PF> };
            for (int r = 0; r < nr; r += 4) rows[std::min(nr - r, 4) - 1](k, (const char *) a + r * lda, lda, (const char *) b, ldb, s + r, lds);
            return;
        }
        for (int r = 0; r < nr; r++) dot_tile_rc<V, L, 1, 1, PF>(k, (const char *) a + r * lda, lda, (const char *) b, ldb, s + r, lds);
        return;
    }
    ggml_simd::dot_tile<V, L, 4>(k, nr, nc, a, lda, b, ldb, s, lds);
}

// ---- row conversions -----------------------------------------------------------------------
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

// ---- GEMM micro-kernel --------------------------------------------------------------------
constexpr int MR = 32, NR = 12;
// b micro-panel (KC x NR f32, 24 KiB) in L1, a block (MC x KC, 512 KiB) in L2; measured best
// of KC 256..512 x MC 128..512 at 1024^3 and 4096 x 512 x 4096.
constexpr int KC = 512, MC = 256;
// From how many rows of b packing pays off (measured, 1 thread, K = M = 1024 and 4096): the f32
// dot tiles keep up to N ~ 64, the f16/bf16 ones (converting both sides) to N ~ 20.
constexpr int MIN_N_F32 = 64, MIN_N_F16 = 20;

// The units of a micro-kernel: an f32 (one k: FMA), or (the opt-in BF16 products of out_prod)
// a pair of bf16 (two k: vdpbf16ps, two products per lane and instruction).
struct UnitF32 {
    typedef __m512 T;
    static T load(const uint32_t * p) { return _mm512_loadu_ps((const float *) p); }
    static T bcast(const uint32_t * p) { return _mm512_set1_ps(*(const float *) p); }
    static __m512 madd(__m512 acc, T a, T b) { return _mm512_fmadd_ps(a, b, acc); }
};

#if defined(__AVX512BF16__)
struct UnitBF16Pair {
    typedef __m512bh T;
    static T load(const uint32_t * p) { return (__m512bh) _mm512_loadu_si512(p); }
    static T bcast(const uint32_t * p) { return (__m512bh) _mm512_set1_epi32((int) *p); }
    static __m512 madd(__m512 acc, T a, T b) { return _mm512_dpbf16_ps(acc, a, b); }
};
#endif

template <typename U>
void micro(int64_t nu, const void * a, const void * b, float * c, size_t ldc, bool accumulate) {
    const uint32_t * A = (const uint32_t *) a;
    const uint32_t * B = (const uint32_t *) b;
    __m512 c0[NR], c1[NR];
    for (int j = 0; j < NR; j++) {
        c0[j] = accumulate ? _mm512_loadu_ps(c + j * ldc) : _mm512_setzero_ps();
        c1[j] = accumulate ? _mm512_loadu_ps(c + j * ldc + 16) : _mm512_setzero_ps();
    }
    for (int64_t u = 0; u < nu; u++) {
        const typename U::T a0 = U::load(A), a1 = U::load(A + 16);
#pragma GCC unroll 12
        for (int j = 0; j < NR; j++) {
            const typename U::T bj = U::bcast(B + j);
            c0[j] = U::madd(c0[j], a0, bj);
            c1[j] = U::madd(c1[j], a1, bj);
        }
        A += MR;
        B += NR;
    }
    for (int j = 0; j < NR; j++) {
        _mm512_storeu_ps(c + j * ldc, c0[j]);
        _mm512_storeu_ps(c + j * ldc + 16, c1[j]);
    }
}


// ---- tables --------------------------------------------------------------------------------
const ggml_gemm_kernel gemm_f32  = { MR, NR, 1, KC, MC, MIN_N_F32, ggml_simd::pack<V, LoadF32, float>, ggml_simd::pack<V, LoadF32, float>, micro<UnitF32> };
const ggml_gemm_kernel gemm_f16  = { MR, NR, 1, KC, MC, MIN_N_F16, ggml_simd::pack<V, LoadF16, ggml_fp16_t>, ggml_simd::pack<V, LoadF16, ggml_fp16_t>, micro<UnitF32> };
// BF16 GEMM converts to f32 while packing: a vdpbf16ps micro-kernel (two k per instruction)
// measured at half the f32 one's rate on Sapphire Rapids (~113 vs ~220 GFLOP/s per core), and
// the f32 path keeps every product exact. The dot path (memory-bound) does use vdpbf16ps.
const ggml_gemm_kernel gemm_bf16 = { MR, NR, 1, KC, MC, MIN_N_F16, ggml_simd::pack<V, LoadBF16, ggml_bf16_t>, ggml_simd::pack<V, LoadBF16, ggml_bf16_t>, micro<UnitF32> };
#if defined(__AVX512BF16__)
typedef LoadBF16Pairs DotBF16;
#else
typedef LoadBF16 DotBF16;
#endif

const ggml_mm_type_kernels mm_f32  = { GGML_TYPE_F32,  nullptr,      dot_tile<LoadF32>, &gemm_f32 };
const ggml_mm_type_kernels mm_f16  = { GGML_TYPE_F16,  ggml_simd::fp32_to_fp16<V>, dot_tile<LoadF16>, &gemm_f16 };
const ggml_mm_type_kernels mm_bf16 = { GGML_TYPE_BF16, fp32_to_bf16, dot_tile<DotBF16>, &gemm_bf16 };
constexpr int ROW_PF = 4096;
const ggml_mm_type_kernels mm_f32_pf  = { GGML_TYPE_F32,  nullptr,      dot_tile<LoadF32, ROW_PF>, &gemm_f32 };
const ggml_mm_type_kernels mm_f16_pf  = { GGML_TYPE_F16,  ggml_simd::fp32_to_fp16<V>, dot_tile<LoadF16, ROW_PF>, &gemm_f16 };
const ggml_mm_type_kernels mm_bf16_pf = { GGML_TYPE_BF16, fp32_to_bf16, dot_tile<DotBF16, ROW_PF>, &gemm_bf16 };

}  // namespace

const ggml_mm_type_kernels * mm_type(ggml_type type) { return ggml_simd::mm_type<&mm_f32, &mm_f16, &mm_bf16>(type); }
const ggml_mm_type_kernels * mm_type_pf(ggml_type type) { return ggml_simd::mm_type<&mm_f32_pf, &mm_f16_pf, &mm_bf16_pf>(type); }

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
extern const ggml_gemm_kernel gemm_bf16_pairs = { MR, NR, 2, KC, MC, MIN_N_F32, nullptr, nullptr, micro<UnitBF16Pair> };
#endif

}  // namespace ggml_cpu_avx512

#endif  // GGML_SIMD_AVX512
