// quant-repack-avx512.cpp - 512-bit VNNI kernels for weights repacked 16 rows at a time
// (quant-repack.h). Per block, the 16 rows' quants are 4 (Q4_0: nibbles, unpacked once) or 8
// (Q8_0) registers; they meet each column's activations through 8 vpdpbusd with 4 broadcast
// bytes each, every lane a row. Also the conversion of F32 rows to Q8_0 x16 blocks (out_prod).
#include "kernels-x86.h"

#if defined(GGML_SIMD_AVX512)

#include "simd-avx512.h"
#include <string.h>

namespace ggml_cpu_avx512 {

// Transposed F32 (32 values of m of 16 rows) straight to a Q8_0 x16 block, the same bytes as
// ggml_repack_quantize_q8_0x16_ref: lane r is row r; 32 loads of 16 rows, the max, then 4 values
// of m of each row into one dword.
void repack_quantize_q8_0x16(const float * x, int64_t ldx, void * vout) {
    block_q8_0x16 * out = (block_q8_0x16 *) vout;
    const __m512 sign = _mm512_set1_ps(-0.0f);
    __m512 amax = _mm512_setzero_ps();
    for (int m = 0; m < QK8_0; m++) {
        amax = _mm512_max_ps(_mm512_andnot_ps(sign, _mm512_loadu_ps(x + m * ldx)), amax);  // a > max ? a : max
    }
    const __m512 d = _mm512_div_ps(amax, _mm512_set1_ps(127.0f));
    const __m512 id = _mm512_maskz_div_ps(_mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_NEQ_UQ), _mm512_set1_ps(1.0f), d);
    _mm256_storeu_si256((__m256i *) out->d, _mm512_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m512i lo8 = _mm512_set1_epi32(0xFF);
    for (int j = 0; j < QK8_0 / 4; j++) {
        const float * xj = x + 4 * j * ldx;
        const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xj), id));
        const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xj + ldx), id));
        const __m512i q2 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xj + 2 * ldx), id));
        const __m512i q3 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xj + 3 * ldx), id));
        __m512i v = _mm512_and_si512(q0, lo8);
        v = _mm512_or_si512(v, _mm512_slli_epi32(_mm512_and_si512(q1, lo8), 8));
        v = _mm512_or_si512(v, _mm512_slli_epi32(_mm512_and_si512(q2, lo8), 16));
        v = _mm512_or_si512(v, _mm512_slli_epi32(q3, 24));
        _mm512_storeu_si512((void *) (out->qs + j * 64), _mm512_xor_si512(v, _mm512_set1_epi32((int) 0x80808080u)));
    }
}

// F32 rows to the repacked kernels' activation blocks, the same bytes as
// ggml_quantize_row_q8_0x_ref: per block of 32, the largest |x| (a NaN never wins), d = amax / 127
// and its reciprocal as the reference divides them, then each value rint(x / d) clamped to
// +-127 (NaN: 0), and -8 times the block's sum.
void quantize_row_q8_0x(const float * x, void * vy, int64_t n) {
    block_q8_0x * y = (block_q8_0x *) vy;
    const __m512 sign = _mm512_set1_ps(-0.0f);
    const __m512 hi = _mm512_set1_ps(127.0f), lo = _mm512_set1_ps(-127.0f);
    const int64_t nb = n / QK8_0;
    // 16 blocks at a time: their maxima, then the scales of all 16 in one vector (as
    // repack_quantize_q8_0x16: the F16 rounding by the conversion instruction), then the values.
    for (int64_t b0 = 0; b0 < nb; b0 += 16) {
        const int nblk = nb - b0 < 16 ? (int) (nb - b0) : 16;
        alignas(64) float amax[16] = {0}, id[16], dr[16];
        for (int j = 0; j < nblk; j++) {
            const float * xb = x + (b0 + j) * QK8_0;
            // max_ps(a, m) returns m when a is NaN: a NaN never wins, as in the reference.
            const __m512 m = _mm512_max_ps(_mm512_andnot_ps(sign, _mm512_loadu_ps(xb + 16)),
                                           _mm512_max_ps(_mm512_andnot_ps(sign, _mm512_loadu_ps(xb)), _mm512_setzero_ps()));
            amax[j] = _mm512_reduce_max_ps(m);
        }
        const __m512 d = _mm512_div_ps(_mm512_load_ps(amax), _mm512_set1_ps(127.0f));
        _mm512_store_ps(id, _mm512_maskz_div_ps(_mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_NEQ_UQ), _mm512_set1_ps(1.0f), d));
        _mm512_store_ps(dr, _mm512_cvtph_ps(_mm512_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
        for (int j = 0; j < nblk; j++) {
            const float * xb = x + (b0 + j) * QK8_0;
            block_q8_0x * yb = y + b0 + j;
            const __m512 vid = _mm512_set1_ps(id[j]);
            __m512i q[2];
            for (int h = 0; h < 2; h++) {
                __m512 v = _mm512_mul_ps(_mm512_loadu_ps(xb + 16 * h), vid);
                v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);  // NaN -> 0
                v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
                q[h] = _mm512_cvtps_epi32(v);  // round to nearest even, as rintf
            }
            _mm_storeu_si128((__m128i *) yb->qs, _mm512_cvtepi32_epi8(q[0]));
            _mm_storeu_si128((__m128i *) (yb->qs + 16), _mm512_cvtepi32_epi8(q[1]));
            yb->d = dr[j];
            yb->neg8sum = -8 * _mm512_reduce_add_epi32(_mm512_add_epi32(q[0], q[1]));
        }
    }
}

// F32 rows to Q8_K (the K-quants' activations), the same bytes as quantize_row_q8_K_ref: per
// block of 256, the first value of the largest magnitude (a NaN never wins) with its sign, then
// q = rint(-127 x / max) clamped to +-127 (NaN, inf: 0, as lrintf's out-of-range result cast to int),
// the sums of 16, and d = 1 / (-127 / max).
void quantize_row_q8_K(const float * x, void * vy, int64_t n) {
    block_q8_K * y = (block_q8_K *) vy;
    const __m512 sign = _mm512_set1_ps(-0.0f);
    const __m512i hi = _mm512_set1_epi32(127), lo = _mm512_set1_epi32(-127);
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        __m512 m = _mm512_setzero_ps();
        for (int j = 0; j < QK_K; j += 16) m = _mm512_max_ps(_mm512_andnot_ps(sign, _mm512_loadu_ps(x + j)), m);
        const float amax = _mm512_reduce_max_ps(m);
        block_q8_K * yb = y + b;
        if (amax == 0.0f) {
            memset(yb, 0, sizeof(*yb));  // d = 0, qs and bsums 0
            continue;
        }
        int first = 0;  // the first index of that magnitude
        const __m512 va = _mm512_set1_ps(amax);
        for (int j = 0; j < QK_K; j += 16) {
            const __mmask16 eq = _mm512_cmp_ps_mask(_mm512_andnot_ps(sign, _mm512_loadu_ps(x + j)), va, _CMP_EQ_OQ);
            if (eq) {
                first = j + __builtin_ctz((unsigned) eq);
                break;
            }
        }
        const float iscale = -127.0f / x[first];
        const __m512 vs = _mm512_set1_ps(iscale);
        for (int j = 0; j < QK_K; j += 16) {
            __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + j), vs);
            // NaN and +-inf (a subnormal max makes iscale infinite) -> 0, as lrintf's out-of-range
            // result cast to int is.
            v = _mm512_maskz_mov_ps((__mmask16) ~_mm512_fpclass_ps_mask(v, 0x99), v);
            const __m512i q = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(v), lo), hi);
            _mm_storeu_si128((__m128i *) (yb->qs + j), _mm512_cvtepi32_epi8(q));
            yb->bsums[j / 16] = (int16_t) _mm512_reduce_add_epi32(q);
        }
        yb->d = 1.0f / iscale;
    }
}

// A repacked Q4_0 block straight to the transposed Q8_0 x16 block (quant-repack.h): per group,
// the 4 registers of 4-byte columns (lane = row) are transposed within their 128-bit lanes, so
// that each row's 16 bytes come out whole; each row's nibbles become its 16 values of k (lanes)
// in F32 through an L1 tile, which repack_quantize_q8_0x16 quantizes as from any F32 rows.
void repack_q4_0x16_to_q8_0x16t(const void * vg0, const void * vg1, int half, void * out) {
    alignas(64) float x[QK8_0 * GGML_REPACK_ROWS];
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i eight = _mm512_set1_epi32(8);
    for (int g = 0; g < 2; g++) {
        const block_q4_0x16 * b = (const block_q4_0x16 *) (g ? vg1 : vg0);
        __m512i c[4];
        for (int j = 0; j < 4; j++) {
            const __m512i w = _mm512_loadu_si512((const void *) (b->qs + 64 * j));
            c[j] = _mm512_and_si512(half ? _mm512_srli_epi16(w, 4) : w, m4);
        }
        // Within each 128-bit lane L (rows 4L..4L+3): t[i] holds row 4L + i's columns 0..3.
        const __m512i u0 = _mm512_unpacklo_epi32(c[0], c[1]), u1 = _mm512_unpackhi_epi32(c[0], c[1]);
        const __m512i u2 = _mm512_unpacklo_epi32(c[2], c[3]), u3 = _mm512_unpackhi_epi32(c[2], c[3]);
        const __m512i t[4] = { _mm512_unpacklo_epi64(u0, u2), _mm512_unpackhi_epi64(u0, u2),
                               _mm512_unpacklo_epi64(u1, u3), _mm512_unpackhi_epi64(u1, u3) };
        alignas(64) float d[GGML_REPACK_ROWS];
        _mm512_store_ps(d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) b->d)));
        for (int L = 0; L < 4; L++) {
            for (int i = 0; i < 4; i++) {
                const int row = 4 * L + i;
                __m128i v;
                switch (L) {  // the lane index must be a constant
                    case 0:  v = _mm512_extracti32x4_epi32(t[i], 0); break;
                    case 1:  v = _mm512_extracti32x4_epi32(t[i], 1); break;
                    case 2:  v = _mm512_extracti32x4_epi32(t[i], 2); break;
                    default: v = _mm512_extracti32x4_epi32(t[i], 3); break;
                }
                const __m512 q = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(v), eight));
                _mm512_store_ps(x + (16 * g + row) * GGML_REPACK_ROWS, _mm512_mul_ps(_mm512_set1_ps(d[row]), q));
            }
        }
    }
    repack_quantize_q8_0x16(x, GGML_REPACK_ROWS, out);
}

#if defined(__AVX512VNNI__)
namespace {

inline int32_t load_i32(const int8_t * p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

// Software prefetch: from how many columns, and how many bytes ahead of the current block.
// PrefetchPrompts (the AVX512 set): from GGML_REPACK_PREFETCH_MIN_COLS columns (kernels-x86.h);
// for one column it cost one thread of a Zen 4 6% with Q4_0 and 7% with Q8_0. PrefetchAlways
// (the AMX set, Xeons): there it is the other way round, token generation (2 threads, TinyLlama)
// went from 30.7 to 33.5 tokens/s with Q4_0 and from 19.8 to 21.6 with Q8_0.
// PrefetchAlways prefetches into L2 (prefetcht1): tg32, alternated, 3 pairs, Q4_0 29.1-31.1 ->
// 35.6-38.0 tokens/s, Q8_0 21.5-22.2 -> 22.1-22.6, against prefetcht0.
// Q8_0 4 KiB ahead instead of 2 (busy memory, membw 18-19 GB/s): tg64, 7 alternated pairs, +7.8%
// (6 of 7 pairs); Q4_0 8 KiB instead of 4: within noise.
template <bool TO_L2> inline void prefetch(const char * p) {
    if constexpr (TO_L2) {
        _mm_prefetch(p, _MM_HINT_T1);
    } else {
        _mm_prefetch(p, _MM_HINT_T0);
    }
}
struct PrefetchPrompts {
    static constexpr int MIN_COLS = GGML_REPACK_PREFETCH_MIN_COLS, Q4_0 = 6144, Q8_0 = 2048;
    static constexpr bool TO_L2 = false;
};
struct PrefetchAlways {
    static constexpr int MIN_COLS = 1, Q4_0 = 4096, Q8_0 = 4096;
    static constexpr bool TO_L2 = true;
};

template <int NC, typename P>
void gemm_q4_0x16(int64_t nb, const block_q4_0x16 * a, const char * b, size_t ldb, float * s, size_t lds) {
    __m512 acc[NC];
    for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int64_t i = 0; i < nb; i++) {
        const block_q4_0x16 * g = a + i;
        if constexpr (NC >= P::MIN_COLS) {
            for (int l = 0; l < 5; l++) prefetch<P::TO_L2>((const char *) g + P::Q4_0 + 64 * l);
        }
        __m512i lo[4], hi[4];
        for (int j = 0; j < 4; j++) {
            const __m512i w = _mm512_loadu_si512((const void *) (g->qs + 64 * j));
            lo[j] = _mm512_and_si512(w, m4);
            hi[j] = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) g->d));
        for (int c = 0; c < NC; c++) {
            const block_q8_0x * y = (const block_q8_0x *) (b + c * ldb) + i;
            // Two chains (low and high nibbles) so that one column alone is not latency-bound.
            __m512i s0 = _mm512_set1_epi32(y->neg8sum);
            __m512i s1 = _mm512_setzero_si512();
            for (int j = 0; j < 4; j++) {
                s0 = _mm512_dpbusd_epi32(s0, lo[j], _mm512_set1_epi32(load_i32(y->qs + 4 * j)));
                s1 = _mm512_dpbusd_epi32(s1, hi[j], _mm512_set1_epi32(load_i32(y->qs + 16 + 4 * j)));
            }
            const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(y->d));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), sc, acc[c]);
        }
    }
    for (int c = 0; c < NC; c++) _mm512_storeu_ps(s + c * lds, acc[c]);
}

// Q8_0 x16: bytes are values + 128; the sum starts at -128 * sum(y) = 16 * neg8sum.
template <int NC, typename P>
void gemm_q8_0x16(int64_t nb, const block_q8_0x16 * a, const char * b, size_t ldb, float * s, size_t lds) {
    __m512 acc[NC];
    for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const block_q8_0x16 * g = a + i;
        if constexpr (NC >= P::MIN_COLS) {
            for (int l = 0; l < 9; l++) prefetch<P::TO_L2>((const char *) g + P::Q8_0 + 64 * l);
        }
        __m512i w[8];
        for (int j = 0; j < 8; j++) w[j] = _mm512_loadu_si512((const void *) (g->qs + 64 * j));
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) g->d));
        for (int c = 0; c < NC; c++) {
            const block_q8_0x * y = (const block_q8_0x *) (b + c * ldb) + i;
            __m512i s0 = _mm512_set1_epi32(16 * y->neg8sum);
            __m512i s1 = _mm512_setzero_si512();
            for (int j = 0; j < 8; j += 2) {
                s0 = _mm512_dpbusd_epi32(s0, w[j], _mm512_set1_epi32(load_i32(y->qs + 4 * j)));
                s1 = _mm512_dpbusd_epi32(s1, w[j + 1], _mm512_set1_epi32(load_i32(y->qs + 4 * j + 4)));
            }
            const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(y->d));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), sc, acc[c]);
        }
    }
    for (int c = 0; c < NC; c++) _mm512_storeu_ps(s + c * lds, acc[c]);
}

// Runs kernel<NC> for nc = 1..8.
template <template <int> class K, typename G>
void dispatch(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) {
    const G * g = (const G *) a;
    const char * y = (const char *) b;
    switch (nc) {
        case 1: K<1>::run(nb, g, y, ldb, s, lds); break;
        case 2: K<2>::run(nb, g, y, ldb, s, lds); break;
        case 3: K<3>::run(nb, g, y, ldb, s, lds); break;
        case 4: K<4>::run(nb, g, y, ldb, s, lds); break;
        case 5: K<5>::run(nb, g, y, ldb, s, lds); break;
        case 6: K<6>::run(nb, g, y, ldb, s, lds); break;
        case 7: K<7>::run(nb, g, y, ldb, s, lds); break;
        case 8: K<8>::run(nb, g, y, ldb, s, lds); break;
        default: GGML_ABORT("repacked gemm: %d columns (at most %d)", nc, GGML_REPACK_MAX_COLS);
    }
}

template <typename P> struct Q4_0K {
    template <int NC> struct K { static void run(int64_t nb, const block_q4_0x16 * a, const char * b, size_t ldb, float * s, size_t lds) { gemm_q4_0x16<NC, P>(nb, a, b, ldb, s, lds); } };
};
template <typename P> struct Q8_0K {
    template <int NC> struct K { static void run(int64_t nb, const block_q8_0x16 * a, const char * b, size_t ldb, float * s, size_t lds) { gemm_q8_0x16<NC, P>(nb, a, b, ldb, s, lds); } };
};

}  // namespace

void repack_gemm_q8_0(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) {
    dispatch<Q8_0K<PrefetchPrompts>::K, block_q8_0x16>(nb, a, b, ldb, nc, s, lds);
}

void repack_gemm_q4_0(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) {
    dispatch<Q4_0K<PrefetchPrompts>::K, block_q4_0x16>(nb, a, b, ldb, nc, s, lds);
}

void repack_gemm_q8_0_pf(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) {
    dispatch<Q8_0K<PrefetchAlways>::K, block_q8_0x16>(nb, a, b, ldb, nc, s, lds);
}

void repack_gemm_q4_0_pf(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) {
    dispatch<Q4_0K<PrefetchAlways>::K, block_q4_0x16>(nb, a, b, ldb, nc, s, lds);
}

#endif  // __AVX512VNNI__

}  // namespace ggml_cpu_avx512

#endif  // GGML_SIMD_AVX512
