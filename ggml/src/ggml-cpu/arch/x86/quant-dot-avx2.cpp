// quant-dot-avx2.cpp - AVX2 dot products of the quantized types with their activation types.
// Weight blocks are decoded to bytes in registers, multiplied with the activation bytes by
// maddubs (u8 x s8 -> s16 pairs) or, where the CPU has AVX512-VNNI with VL, by vpdpbusd
// straight into s32. Per block (or sub-block) the integer sum is scaled in float.
#include "kernels-x86.h"

#if defined(GGML_SIMD_AVX2)

#include "simd-avx2.h"

#include <string.h>

#include <type_traits>

namespace ggml_cpu_avx2 {
namespace {

inline float h2f(ggml_fp16_t h) { return _cvtsh_ss(h); }

inline float hsum_ps(__m256 v) { return ggml_simd::avx2::hsum(v); }

inline int hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

// Sums of u[i] * s[i] (u unsigned bytes, s signed bytes) in 8 s32 lanes, each lane the sum of 4
// neighbouring products (lane k: bytes 4k..4k+3).
inline __m256i dot_u8s8(__m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

// Signed x signed: move x's sign onto y so maddubs sees |x| unsigned.
inline __m256i dot_s8s8(__m256i x, __m256i y) {
    return dot_u8s8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

// 16 bytes of nibbles -> 32 bytes: low nibbles in the low lane (values 0..15), high nibbles in
// the high lane (values 16..31), the layout of the 32-value blocks.
inline __m256i unpack_nibbles(const uint8_t * p) {
    const __m128i q = _mm_loadu_si128((const __m128i *) p);
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// The 32 bits of a Q5 block's qh as 32 bytes, 0x10 where the bit is set.
inline __m256i expand_bits_to_0x10(uint32_t bits) {
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL, 0x0101010101010101LL, 0x0000000000000000LL);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int) bits), shuf);
    const __m256i mask = _mm256_set1_epi64x((long long) 0x8040201008040201ULL);
    b = _mm256_cmpeq_epi8(_mm256_and_si256(b, mask), mask);
    return _mm256_and_si256(b, _mm256_set1_epi8(0x10));
}

inline __m256i load32(const void * p) { return _mm256_loadu_si256((const __m256i *) p); }

// Weights stream from memory once per token: asking for the bytes 4 KB ahead keeps enough
// requests in flight to approach the memory bandwidth (measured: 6.7 -> 10.9 GB/s for Q4_0 on
// one core; the hardware prefetcher alone stops at page boundaries).
// Called once per block: covers every cache line of the block 4 KB ahead.
template <typename B> inline void prefetch_ahead(const B * p) {
    for (size_t off = 0; off < sizeof(B); off += 64) _mm_prefetch((const char *) p + 4096 + off, _MM_HINT_T0);
}

// ---- 32-value blocks -----------------------------------------------------------------------
// The driver of the 32-value types: isum(a[i], y) is block i's integer sum against the activation
// bytes y (8 s32 lanes), scaled by d * db into one float accumulator. Q4_1 / Q5_1 (against Q8_1)
// add the min terms m * s: sum (d q + m) * db qb = d db sum(q qb) + m * s, s = db sum(qb).
template <typename BA, typename BB, typename Isum>
inline float dot_blocks32(int64_t n, const void * va, const void * vb, Isum isum) {
    const BA * a = (const BA *) va;
    const BB * b = (const BB *) vb;
    __m256 acc = _mm256_setzero_ps();
    float mins = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        prefetch_ahead(a + i);
        const __m256i s = isum(a[i], load32(b[i].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(a[i].d) * h2f(b[i].d)), _mm256_cvtepi32_ps(s), acc);
        if constexpr (std::is_same<BB, block_q8_1>::value) mins += h2f(a[i].m) * h2f(b[i].s);
    }
    if constexpr (std::is_same<BB, block_q8_1>::value) return hsum_ps(acc) + mins;
    else return hsum_ps(acc);
}

// The 5-bit levels of a Q5 block: nibbles | 0x10 where qh's bit is set.
template <typename B> inline __m256i q5_levels(const B & a) {
    uint32_t qh;
    memcpy(&qh, a.qh, 4);
    return _mm256_or_si256(unpack_nibbles(a.qs), expand_bits_to_0x10(qh));
}

float dot_q4_0(int64_t n, const void * va, const void * vb) {
    return dot_blocks32<block_q4_0, block_q8_0>(n, va, vb, [](const block_q4_0 & a, __m256i y) {
        return dot_s8s8(_mm256_sub_epi8(unpack_nibbles(a.qs), _mm256_set1_epi8(8)), y);
    });
}

float dot_q4_1(int64_t n, const void * va, const void * vb) {
    return dot_blocks32<block_q4_1, block_q8_1>(n, va, vb, [](const block_q4_1 & a, __m256i y) { return dot_u8s8(unpack_nibbles(a.qs), y); });
}

float dot_q5_0(int64_t n, const void * va, const void * vb) {
    return dot_blocks32<block_q5_0, block_q8_0>(n, va, vb, [](const block_q5_0 & a, __m256i y) {
        return dot_s8s8(_mm256_sub_epi8(q5_levels(a), _mm256_set1_epi8(16)), y);
    });
}

float dot_q5_1(int64_t n, const void * va, const void * vb) {
    return dot_blocks32<block_q5_1, block_q8_1>(n, va, vb, [](const block_q5_1 & a, __m256i y) { return dot_u8s8(q5_levels(a), y); });
}

float dot_q8_0(int64_t n, const void * va, const void * vb) {
    return dot_blocks32<block_q8_0, block_q8_0>(n, va, vb, [](const block_q8_0 & a, __m256i y) { return dot_s8s8(load32(a.qs), y); });
}

float dot_iq4_nl(int64_t n, const void * va, const void * vb) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *) kvalues_iq4nl));
    return dot_blocks32<block_iq4_nl, block_q8_0>(n, va, vb, [table](const block_iq4_nl & a, __m256i y) {
        return dot_s8s8(_mm256_shuffle_epi8(table, unpack_nibbles(a.qs)), y);
    });
}

// Up to 4 rows of Q4_0 against one Q8_0 row. Each activation block is loaded once for all rows,
// and the -8 offset of the weights is taken out once per block (8 * sum of y) instead of
// sign-transferring per row; the integer lane sums, scales and accumulation order equal those
// of dot_q4_0, so each result is bit-identical to it.
void dot_rows_q4_0(int64_t n, const void * va, size_t lda, int nr, const void * vb, float * s) {
    const block_q8_0 * b = (const block_q8_0 *) vb;
    const block_q4_0 * a[4];
    for (int r = 0; r < 4; r++) a[r] = (const block_q4_0 *) ((const char *) va + (r < nr ? r : 0) * lda);
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
    const __m256i eight = _mm256_set1_epi8(8);
    for (int64_t i = 0; i < n / QK4_0; i++) {
        const __m256i y = load32(b[i].qs);
        const __m256i y8 = dot_u8s8(eight, y);
        const float db = h2f(b[i].d);
        for (int r = 0; r < nr; r++) {
            prefetch_ahead(a[r] + i);
            const __m256i sum = _mm256_sub_epi32(dot_u8s8(unpack_nibbles(a[r][i].qs), y), y8);
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(h2f(a[r][i].d) * db), _mm256_cvtepi32_ps(sum), acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) s[r] = hsum_ps(acc[r]);
}

// ---- K super-blocks ------------------------------------------------------------------------
// Per-16-value scales applied to the s16 pair sums of one 32-byte vector (two sub-blocks):
// maddubs gives 16 s16 (8 per sub-block), madd with [sa x8, sb x8] gives 8 s32.
inline __m256i scaled_pairs(__m256i u, __m256i s, int sa, int sb) {
    const __m256i p = _mm256_maddubs_epi16(u, s);
    const __m256i sc = _mm256_set_m128i(_mm_set1_epi16((short) sb), _mm_set1_epi16((short) sa));
    return _mm256_madd_epi16(p, sc);
}

// One 32-value sub-block with one scale.
inline __m256i scaled_32(__m256i u, __m256i s, int sc) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16((short) sc));
}

float dot_q2_K(int64_t n, const void * va, const void * vb) {
    const __m256i m3 = _mm256_set1_epi8(3);
    return ggml_quant_dot_blocks_K<block_q2_K>(n, va, vb, [&](const block_q2_K & a, const block_q8_K & b) {
        prefetch_ahead(&a);
        __m256i acc = _mm256_setzero_si256();
        const int8_t * y = b.qs;
        int is = 0;
        for (int h = 0; h < 2; h++) {
            const __m256i q = load32(a.qs + 32 * h);
            for (int s = 0; s < 4; s++, y += 32, is += 2) {
                const __m256i u = _mm256_and_si256(_mm256_srli_epi16(q, 2 * s), m3);
                acc = _mm256_add_epi32(acc, scaled_pairs(u, load32(y), a.scales[is] & 0xF, a.scales[is + 1] & 0xF));
            }
        }
        int msum = 0;
        for (int j = 0; j < 16; j++) msum += (a.scales[j] >> 4) * b.bsums[j];
        return b.d * (h2f(a.d) * (float) hsum_epi32(acc) - h2f(a.dmin) * (float) msum);
    });
}

float dot_q3_K(int64_t n, const void * va, const void * vb) {
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    return ggml_quant_dot_blocks_K<block_q3_K>(n, va, vb, [&](const block_q3_K & a, const block_q8_K & b) {
        prefetch_ahead(&a);
        int sc[16];
        for (int j = 0; j < 16; j++) sc[j] = q3_k_scale(a.scales, j);
        const __m256i hm = load32(a.hmask);
        __m256i acc = _mm256_setzero_si256();
        const int8_t * y = b.qs;
        int is = 0;
        for (int h = 0; h < 2; h++) {
            const __m256i q = load32(a.qs + 32 * h);
            for (int s = 0; s < 4; s++, y += 32, is += 2) {
                // u = low 2 bits + 4 * high bit, in 0..7; the value is u - 4 (the -4 uses bsums).
                const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(q, 2 * s), m3);
                const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + s), one);
                const __m256i u = _mm256_or_si256(lo, _mm256_slli_epi16(hb, 2));
                acc = _mm256_add_epi32(acc, scaled_pairs(u, load32(y), sc[is], sc[is + 1]));
            }
        }
        int corr = 0;
        for (int j = 0; j < 16; j++) corr += sc[j] * b.bsums[j];
        return h2f(a.d) * b.d * (float) (hsum_epi32(acc) - 4 * corr);
    });
}

// Q4_K and Q5_K (the fifth bits from qh: bits 2c / 2c + 1 of qh[l] for chunk c).
template <typename BA> float dot_k4(int64_t n, const void * va, const void * vb) {
    constexpr bool q5 = std::is_same<BA, block_q5_K>::value;
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    return ggml_quant_dot_blocks_K<BA>(n, va, vb, [&](const BA & a, const block_q8_K & b) {
        prefetch_ahead(&a);
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 8; j++) get_scale_min_k4(j, a.scales, &sc[j], &mn[j]);
        __m256i qh = _mm256_setzero_si256();
        if constexpr (q5) qh = load32(a.qh);
        __m256i acc = _mm256_setzero_si256();
        const int8_t * y = b.qs;
        for (int c = 0; c < 4; c++, y += 64) {
            const __m256i q = load32(a.qs + 32 * c);
            __m256i u0 = _mm256_and_si256(q, m4);
            __m256i u1 = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if constexpr (q5) {
                const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one), 4);
                const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one), 4);
                u0 = _mm256_or_si256(u0, h0);
                u1 = _mm256_or_si256(u1, h1);
            }
            acc = _mm256_add_epi32(acc, scaled_32(u0, load32(y), sc[2 * c]));
            acc = _mm256_add_epi32(acc, scaled_32(u1, load32(y + 32), sc[2 * c + 1]));
        }
        int msum = 0;
        for (int j = 0; j < 8; j++) msum += mn[j] * (b.bsums[2 * j] + b.bsums[2 * j + 1]);
        return b.d * (h2f(a.d) * (float) hsum_epi32(acc) - h2f(a.dmin) * (float) msum);
    });
}

float dot_q6_K(int64_t n, const void * va, const void * vb) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
    return ggml_quant_dot_blocks_K<block_q6_K>(n, va, vb, [&](const block_q6_K & a, const block_q8_K & b) {
        prefetch_ahead(&a);
        const int8_t * sc = a.scales;
        __m256i acc = _mm256_setzero_si256();
        const int8_t * y = b.qs;
        for (int h = 0; h < 2; h++, y += 128, sc += 8) {
            const __m256i l0 = load32(a.ql + 64 * h);
            const __m256i l1 = load32(a.ql + 64 * h + 32);
            const __m256i qh = load32(a.qh + 32 * h);
            // u = 6-bit level in 0..63; the value is u - 32 (the -32 uses bsums).
            const __m256i u0 = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4));
            const __m256i u1 = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4));
            const __m256i u2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4));
            const __m256i u3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4));
            acc = _mm256_add_epi32(acc, scaled_pairs(u0, load32(y), sc[0], sc[1]));
            acc = _mm256_add_epi32(acc, scaled_pairs(u1, load32(y + 32), sc[2], sc[3]));
            acc = _mm256_add_epi32(acc, scaled_pairs(u2, load32(y + 64), sc[4], sc[5]));
            acc = _mm256_add_epi32(acc, scaled_pairs(u3, load32(y + 96), sc[6], sc[7]));
        }
        int corr = 0;
        for (int j = 0; j < 16; j++) corr += a.scales[j] * b.bsums[j];
        return h2f(a.d) * b.d * (float) (hsum_epi32(acc) - 32 * corr);
    });
}

}  // namespace

ggml_quant_dot_fn quant_dot(ggml_type type) {
    static const ggml_quant_dots dots = { dot_q4_0, dot_q4_1, dot_q5_0, dot_q5_1, dot_q8_0, dot_iq4_nl,
                                          dot_q2_K, dot_q3_K, dot_k4<block_q4_K>, dot_k4<block_q5_K>, dot_q6_K,
                                          quant_dot_iq(GGML_TYPE_IQ2_XXS), quant_dot_iq(GGML_TYPE_IQ2_XS), quant_dot_iq(GGML_TYPE_IQ2_S),
                                          quant_dot_iq(GGML_TYPE_IQ3_XXS), quant_dot_iq(GGML_TYPE_IQ3_S), quant_dot_iq(GGML_TYPE_IQ1_S),
                                          quant_dot_iq(GGML_TYPE_IQ1_M), quant_dot_iq(GGML_TYPE_IQ4_XS), quant_dot_iq(GGML_TYPE_TQ1_0),
                                          quant_dot_iq(GGML_TYPE_TQ2_0) };
    return ggml_quant_dot_of(dots, type);
}

ggml_quant_dot_rows_fn quant_dot_rows(ggml_type type) {
    switch (type) {
        case GGML_TYPE_Q4_0: return dot_rows_q4_0;
        default:             return nullptr;
    }
}

}  // namespace ggml_cpu_avx2

#endif  // GGML_SIMD_AVX2
