// quant-dot-iq-avx2.cpp - AVX2 dot products of the IQ and ternary types with Q8_K, held to the
// scalar references of quant-dot-iq.cpp (which documents each type's integer form).
//
// The common shape: per 32 values the weights become unsigned bytes in one register (grid points
// gathered from the expanded grids, IQ4_XS's levels by pshufb), the activations take the
// weights' signs (sign bytes expanded to 0xFF masks), maddubs sums the products in pairs into
// s16 and madd with the sub-block's integer scale sums those into s32. The integer sum of a
// super-block (8 s32 lanes) is scaled once in float. Offsets that make levels unsigned (IQ1's
// grid + 1 and delta, the ternary types' level + 1) come back out through Q8_K's bsums.
//
// maddubs saturates at s16: every pair sum here stays below 2^15 (largest: IQ4_XS's
// 2 * 127 * 127, the activations of Q8_K being -127..127).
#include "kernels-x86.h"

#if defined(GGML_SIMD_AVX2)

#include "../../../quants-iq-grids.h"
#include "simd-avx2.h"

#include <string.h>
#include <type_traits>

namespace ggml_cpu_avx2 {
namespace {

inline float h2f(ggml_fp16_t h) { return _cvtsh_ss(h); }

inline __m256i load32(const void * p) { return _mm256_loadu_si256((const __m256i *) p); }
inline __m128i load16(const void * p) { return _mm_loadu_si128((const __m128i *) p); }
inline __m128i load8(const void * p) { return _mm_loadl_epi64((const __m128i *) p); }

inline uint16_t load_u16(const void * p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

inline uint32_t load_u32(const void * p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

// As quant-dot-avx2.cpp: the weights stream once per token, so ask for them 4 KB ahead.
template <typename B> inline void prefetch_ahead(const B * p) {
    for (size_t off = 0; off < sizeof(B); off += 64) _mm_prefetch((const char *) p + 4096 + off, _MM_HINT_T0);
}

// acc + the pairs of p (s16) times sc (s16), summed into s32 lanes (VNNI fuses the add).
inline __m256i madd_acc(__m256i acc, __m256i p, __m256i sc) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpwssd_epi32(acc, p, sc);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, sc));
#endif
}

// acc + sum of u * s over 32 values with one scale sc: u unsigned, s signed bytes.
inline __m256i dot_scaled(__m256i acc, __m256i u, __m256i s, __m256i sc) {
    return madd_acc(acc, _mm256_maddubs_epi16(u, s), sc);
}

// Four sign bytes (byte l: bit j set = value 8 l + j negative) as 32 byte masks, 0xFF where
// negative; y with those signs applied is (y ^ m) - m.
inline __m256i sign_mask(uint32_t signs) {
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL, 0x0101010101010101LL, 0);
    const __m256i bits = _mm256_set1_epi64x((long long) 0x8040201008040201ULL);
    const __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int) signs), shuf);
    return _mm256_cmpeq_epi8(_mm256_and_si256(b, bits), bits);
}

inline __m256i apply_sign(__m256i y, __m256i m) { return _mm256_sub_epi8(_mm256_xor_si256(y, m), m); }

// Per-sub-block values of a super-block kept in registers: v holds a u32 per sub-block ib (lane
// ib); each 128-bit half is copied to both lanes, so one in-lane pshufb with a constant index
// spreads sub-block ib's bytes (no extraction to a scalar and broadcast back).
struct sub_bcast {
    __m256i lo, hi;
    explicit sub_bcast(__m256i v) : lo(_mm256_permute2x128_si256(v, v, 0x00)), hi(_mm256_permute2x128_si256(v, v, 0x11)) {}
    __m256i half(int ib) const { return ib < 4 ? lo : hi; }
    // Byte 4 ib + l copied to the 8 bytes of values 8 l .. 8 l + 7 of the sub-block.
    __m256i bytes8(int ib) const {
        const long long k = 4 * (ib % 4) * 0x0101010101010101LL;
        const __m256i shuf = _mm256_set_epi64x(k + 3 * 0x0101010101010101LL, k + 2 * 0x0101010101010101LL, k + 0x0101010101010101LL, k);
        return _mm256_shuffle_epi8(half(ib), shuf);
    }
    // Sign bytes 4 ib + l (one per 8 values) as 0xFF masks where negative.
    __m256i sign_mask(int ib) const {
        const __m256i bits = _mm256_set1_epi64x((long long) 0x8040201008040201ULL);
        return _mm256_cmpeq_epi8(_mm256_and_si256(bytes8(ib), bits), bits);
    }
    // The low 16 bits of u32 ib in every s16 lane (a scale).
    __m256i s16(int ib) const {
        const short k = (short) (4 * (ib % 4) | ((4 * (ib % 4) + 1) << 8));
        return _mm256_shuffle_epi8(half(ib), _mm256_set1_epi16(k));
    }
};

// Bytes of 7-bit sign codes (IQ2_XXS, IQ2_XS, IQ3_XXS) completed with their parity bit (bit 7
// set where bits 0..6 have an odd count: the count of negatives is even), by nibble lookups.
inline __m256i add_parity(__m256i c) {
    const __m256i odd = _mm256_setr_epi8(0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0,
                                         0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i p = _mm256_xor_si256(_mm256_shuffle_epi8(odd, _mm256_and_si256(c, m4)),
                                       _mm256_shuffle_epi8(odd, _mm256_and_si256(_mm256_srli_epi16(c, 4), m4)));
    return _mm256_or_si256(c, p);
}

// IQ2_XXS / IQ3_XXS: 8 u32 words (one per sub-block) of four 7-bit sign codes (bits 7 l) and a
// 4-bit scale: the 32 sign bytes (byte 4 ib + l) and the 8 odd scales 2 s + 1.
inline __m256i xxs_sign_bytes(__m256i aux) {
    // Codes 2, 3 move up by 2 bits (to bits 16..29), then in each 16-bit half the upper code up
    // by 1: every code starts a byte.
    const __m256i t = _mm256_or_si256(_mm256_and_si256(aux, _mm256_set1_epi32(0x3FFF)),
                                      _mm256_and_si256(_mm256_slli_epi32(aux, 2), _mm256_set1_epi32(0x3FFF0000)));
    const __m256i c = _mm256_or_si256(_mm256_and_si256(t, _mm256_set1_epi32(0x007F007F)),
                                      _mm256_and_si256(_mm256_slli_epi32(t, 1), _mm256_set1_epi32(0x7F007F00)));
    return add_parity(c);
}

inline __m256i xxs_scales(__m256i aux) {
    return _mm256_or_si256(_mm256_slli_epi32(_mm256_srli_epi32(aux, 28), 1), _mm256_set1_epi32(1));
}

// Per-16-value scales (IQ2_XS, IQ2_S, IQ1_M): 16 scale bytes in both lanes of sc; the scale
// vector of sub-block ib (16 s16, values 0..15 scaled by byte 2 ib, 16..31 by byte 2 ib + 1).
inline __m256i scale_pair(__m256i sc, int ib) {
    const __m256i idx = _mm256_set_m128i(_mm_set1_epi16((short) (0x8000 | (2 * ib + 1))), _mm_set1_epi16((short) (0x8000 | (2 * ib))));
    return _mm256_shuffle_epi8(sc, idx);
}

// The scale bytes 2 n + 1 of the 16 nibbles in 8 bytes (IQ2_XS, IQ2_S: low nibble first).
inline __m256i odd_nibble_scales(const uint8_t * p) {
    const __m128i s = load8(p);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m128i n = _mm_unpacklo_epi8(_mm_and_si128(s, m4), _mm_and_si128(_mm_srli_epi16(s, 4), m4));
    const __m128i odd = _mm_or_si128(_mm_add_epi8(n, n), _mm_set1_epi8(1));
    return _mm256_broadcastsi128_si256(odd);
}

// 4 u64 / 8 u32 grid points as one vector (entry 0 lowest), each loaded into its lane (vmovq /
// vpinsrq from memory). Measured on Zen 4 and kept this way: vpgatherdq / vpgatherdd were 25%
// slower (IQ2_XXS, IQ3_XXS), pairing IQ3's u32 points into u64 in general registers first 27%
// slower. Indices computed in vectors (IQ2_XS, IQ2_S, IQ3_S, IQ1_*) go through a small array
// that GCC turns into vpextrw; forcing the round trip through memory (store forwarding) or
// extracting u64 and shifting were both slower.
template <typename G> inline __m256i grid4(const G & g, const uint16_t * i) {
    return _mm256_set_epi64x((long long) g[i[3]], (long long) g[i[2]], (long long) g[i[1]], (long long) g[i[0]]);
}
template <typename G> inline __m256i grid4(const G & g, const uint8_t * i) {
    return _mm256_set_epi64x((long long) g[i[3]], (long long) g[i[2]], (long long) g[i[1]], (long long) g[i[0]]);
}
template <typename G, typename I> inline __m256i grid8(const G & g, const I * i) {
    return _mm256_set_epi32((int) g[i[7]], (int) g[i[6]], (int) g[i[5]], (int) g[i[4]], (int) g[i[3]], (int) g[i[2]], (int) g[i[1]], (int) g[i[0]]);
}

// IQ1's 11-bit indices, 4 per u64 (u16 lane l: index 4 ib + l), built in general registers by
// pdep: the low 8 bits from qs, the high 3 from qh, one pdep each. On Zen 5 this measured 27%
// faster than indices computed in vectors, which GCC extracts one vpextrw each (bench-quant,
// IQ1_S 4.8 against 3.8 GB/s in cache). Zen 1 and 2 run pdep in microcode, so there (and
// without BMI2) the vector indices stay.
#if defined(__BMI2__) && !defined(__znver1__) && !defined(__znver2__)
#define IQ1_PDEP_INDICES 1
inline uint64_t iq1_indices(uint32_t low8, uint32_t high, uint64_t high_mask) {
    return _pdep_u64(low8, 0x00FF00FF00FF00FFULL) | (_pdep_u64(high, high_mask) & 0x0700070007000700ULL);
}
template <typename G> inline __m256i grid4_packed(const G & g, uint64_t i) {
    return _mm256_set_epi64x((long long) g[i >> 48], (long long) g[(i >> 32) & 0xFFFF], (long long) g[(i >> 16) & 0xFFFF], (long long) g[i & 0xFFFF]);
}
#endif

// The driver: block(a, b) is a super-block's integer sum in 8 s32 lanes and the float it is
// scaled by; the scaled sums accumulate in one float vector.
template <typename BA, typename F> inline float dot_super(int64_t n, const void * va, const void * vb, F block) {
    const BA * a = (const BA *) va;
    const block_q8_K * b = (const block_q8_K *) vb;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        prefetch_ahead(a + i);
        float scale;
        const __m256i isum = block(a[i], b[i], scale);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(scale), _mm256_cvtepi32_ps(isum), acc);
    }
    return ggml_simd::avx2::hsum(acc);
}

// The driver of the kernels that decode a weight block once for NC (1..4) columns: block(a, y,
// isum, scale, nc) decodes super-block a and gives column c's integer sum (8 s32 lanes, isum[c])
// and float scale against its activation block y[c]. Each column takes the same instructions as
// with NC = 1 (the single dot), so its result is bit-identical whatever the tile's width.
template <typename BA, int NC, typename F>
inline void dot_super_cols(int64_t n, const void * va, const void * vb, size_t ldb, float * s, size_t lds, F block) {
    const BA * a = (const BA *) va;
    __m256 acc[NC];
    for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        prefetch_ahead(a + i);
        const block_q8_K * y[NC];
        for (int c = 0; c < NC; c++) y[c] = (const block_q8_K *) ((const char *) vb + c * ldb) + i;
        __m256i isum[NC];
        float scale[NC];
        block(a[i], y, isum, scale, std::integral_constant<int, NC>());
        for (int c = 0; c < NC; c++) acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(scale[c]), _mm256_cvtepi32_ps(isum[c]), acc[c]);
    }
    for (int c = 0; c < NC; c++) s[c * lds] = ggml_simd::avx2::hsum(acc[c]);
}

// The single dot and the multi-column dot of one such block kernel (K: a type holding it).
template <typename BA, typename K> float dot_one(int64_t n, const void * va, const void * vb) {
    float s;
    dot_super_cols<BA, 1>(n, va, vb, 0, &s, 1, K::block);
    return s;
}
template <typename BA, typename K>
void dot_cols(int64_t n, const void * va, const void * vb, size_t ldb, int nc, float * s, size_t lds) {
    switch (nc) {
        case 1: dot_super_cols<BA, 1>(n, va, vb, ldb, s, lds, K::block); break;
        case 2: dot_super_cols<BA, 2>(n, va, vb, ldb, s, lds, K::block); break;
        case 3: dot_super_cols<BA, 3>(n, va, vb, ldb, s, lds, K::block); break;
        default:
            for (int c0 = 0; c0 < nc; c0 += 4) {
                const int m = nc - c0 < 4 ? nc - c0 : 4;
                if (m == 4) dot_super_cols<BA, 4>(n, va, (const char *) vb + c0 * ldb, ldb, s + c0 * lds, lds, K::block);
                else dot_cols<BA, K>(n, va, (const char *) vb + c0 * ldb, ldb, m, s + c0 * lds, lds);
            }
    }
}

// The eight 32-value products of a super-block against NC columns: q(ib) the unsigned weights of
// sub-block ib, m(ib) their signs as 0xFF masks (nullptr: all positive), sc(ib) their s16 scales.
template <int NC, typename Q, typename M, typename S>
inline void sub_block_products(const block_q8_K * const * y, __m256i * isum, Q q, M m, S sc) {
    for (int c = 0; c < NC; c++) isum[c] = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ib++) {
        const __m256i w = q(ib), s16 = sc(ib);
        if constexpr (std::is_same<M, std::nullptr_t>::value) {
            for (int c = 0; c < NC; c++) isum[c] = dot_scaled(isum[c], w, load32(y[c]->qs + 32 * ib), s16);
        } else {
            const __m256i mb = m(ib);
            for (int c = 0; c < NC; c++) isum[c] = dot_scaled(isum[c], w, apply_sign(load32(y[c]->qs + 32 * ib), mb), s16);
        }
    }
}

// ---- IQ2 ------------------------------------------------------------------------------------
// IQ2_XXS: per sub-block 4 index bytes and a u32 of sign codes and scale (qs as 8 byte pairs).
struct iq2_xxs_kernel {
    static constexpr auto block = [](const block_iq2_xxs & a, const block_q8_K * const * y, __m256i * isum, float * scale, auto nc) {
        constexpr int NC = decltype(nc)::value;
        const __m256i w0 = load32(a.qs), w1 = load32(a.qs + 16);
        // The odd u32 words (aux of sub-blocks 0, 1, 4, 5 | 2, 3, 6, 7), put in order.
        const __m256i aux = _mm256_permute4x64_epi64(
            _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(w0), _mm256_castsi256_ps(w1), _MM_SHUFFLE(3, 1, 3, 1))), _MM_SHUFFLE(3, 1, 2, 0));
        const sub_bcast signs(xxs_sign_bytes(aux));
        const sub_bcast sc(xxs_scales(aux));
        const uint8_t * idx = (const uint8_t *) a.qs;
        sub_block_products<NC>(y, isum, [&](int ib) { return grid4(ggml_iq2xxs_grid, idx + 8 * ib); },
                               [&](int ib) { return signs.sign_mask(ib); },
                               [&](int ib) { return sc.s16(ib); });
        for (int c = 0; c < NC; c++) scale[c] = 0.125f * h2f(a.d) * y[c]->d;
    };
};

// IQ2_XS: u16 per 8 values, a 9-bit index and a 7-bit sign code; 4-bit scales per 16 values.
struct iq2_xs_kernel {
    static constexpr auto block = [](const block_iq2_xs & a, const block_q8_K * const * y, __m256i * isum, float * scale, auto nc) {
        constexpr int NC = decltype(nc)::value;
        const __m256i q0 = load32(a.qs), q1 = load32(a.qs + 16);
        alignas(32) uint16_t idx[32];
        const __m256i m9 = _mm256_set1_epi16(511);
        _mm256_store_si256((__m256i *) idx, _mm256_and_si256(q0, m9));
        _mm256_store_si256((__m256i *) (idx + 16), _mm256_and_si256(q1, m9));
        const __m256i codes = _mm256_permute4x64_epi64(_mm256_packus_epi16(_mm256_srli_epi16(q0, 9), _mm256_srli_epi16(q1, 9)), _MM_SHUFFLE(3, 1, 2, 0));
        const sub_bcast signs(add_parity(codes));
        const __m256i sc = odd_nibble_scales(a.scales);
        sub_block_products<NC>(y, isum, [&](int ib) { return grid4(ggml_iq2xs_grid, idx + 4 * ib); },
                               [&](int ib) { return signs.sign_mask(ib); },
                               [&](int ib) { return scale_pair(sc, ib); });
        for (int c = 0; c < NC; c++) scale[c] = 0.125f * h2f(a.d) * y[c]->d;
    };
};

// IQ2_S: 10-bit indices (low bytes in qs[0..32), 2 high bits each in qh), explicit sign bytes
// (qs[32..64)), scales as IQ2_XS.
struct iq2_s_kernel {
    static constexpr auto block = [](const block_iq2_s & a, const block_q8_K * const * y, __m256i * isum, float * scale, auto nc) {
        constexpr int NC = decltype(nc)::value;
        alignas(32) uint16_t idx[32];
        // Index k's high bits: (qh[k / 4] >> 2 (k % 4)) & 3, shifted to bits 8, 9 by a multiply.
        const __m256i qh = _mm256_broadcastsi128_si256(load8(a.qh));
        const __m256i mul = _mm256_set1_epi64x(0x0004001000400100LL);  // 256, 64, 16, 4
        const __m256i m3 = _mm256_set1_epi16(0x300);
        for (int r = 0; r < 2; r++) {
            // u16 lane k of register r: qh[4 r + k / 4] (lane 0: k < 8, lane 1: k >= 8).
            const char b0 = (char) (4 * r), b1 = (char) (4 * r + 1), b2 = (char) (4 * r + 2), b3 = (char) (4 * r + 3);
            const __m256i shuf = _mm256_setr_epi8(b0, -128, b0, -128, b0, -128, b0, -128, b1, -128, b1, -128, b1, -128, b1, -128,
                                                  b2, -128, b2, -128, b2, -128, b2, -128, b3, -128, b3, -128, b3, -128, b3, -128);
            const __m256i hi = _mm256_and_si256(_mm256_mullo_epi16(_mm256_shuffle_epi8(qh, shuf), mul), m3);
            _mm256_store_si256((__m256i *) (idx + 16 * r), _mm256_or_si256(_mm256_cvtepu8_epi16(load16(a.qs + 16 * r)), hi));
        }
        const __m256i sc = odd_nibble_scales(a.scales);
        const uint8_t * signs = a.qs + QK_K / 8;
        sub_block_products<NC>(y, isum, [&](int ib) { return grid4(ggml_iq2s_grid, idx + 4 * ib); },
                               [&](int ib) { return sign_mask(load_u32(signs + 4 * ib)); },
                               [&](int ib) { return scale_pair(sc, ib); });
        for (int c = 0; c < NC; c++) scale[c] = 0.125f * h2f(a.d) * y[c]->d;
    };
};

// ---- IQ3 ------------------------------------------------------------------------------------
// IQ3_XXS: 8 index bytes per sub-block (4 values each), then 8 u32 of sign codes and scales.
struct iq3_xxs_kernel {
    static constexpr auto block = [](const block_iq3_xxs & a, const block_q8_K * const * y, __m256i * isum, float * scale, auto nc) {
        constexpr int NC = decltype(nc)::value;
        const __m256i aux = load32(a.qs + QK_K / 4);
        const sub_bcast signs(xxs_sign_bytes(aux));
        const sub_bcast sc(xxs_scales(aux));
        sub_block_products<NC>(y, isum, [&](int ib) { return grid8(ggml_iq3xxs_grid, a.qs + 8 * ib); },
                               [&](int ib) { return signs.sign_mask(ib); },
                               [&](int ib) { return sc.s16(ib); });
        for (int c = 0; c < NC; c++) scale[c] = 0.25f * h2f(a.d) * y[c]->d;
    };
};

// IQ3_S: 9-bit indices (low bytes in qs, bit j of qh[ib] the high bit of index 8 ib + j),
// explicit sign bytes, a 4-bit scale per sub-block.
struct iq3_s_kernel {
    static constexpr auto block = [](const block_iq3_s & a, const block_q8_K * const * y, __m256i * isum, float * scale, auto nc) {
        constexpr int NC = decltype(nc)::value;
        alignas(32) uint16_t idx[64];
        const __m256i qh = _mm256_broadcastsi128_si256(load8(a.qh));
        const __m256i mul = _mm256_broadcastsi128_si256(_mm_setr_epi16(256, 128, 64, 32, 16, 8, 4, 2));
        const __m256i m1 = _mm256_set1_epi16(0x100);
        for (int r = 0; r < 4; r++) {
            // u16 lane j of lane h (sub-block 2 r + h): qh[2 r + h] << (8 - j), bit 8 kept.
            const __m256i shuf = _mm256_set_m128i(_mm_set1_epi16((short) (0x8000 | (2 * r + 1))), _mm_set1_epi16((short) (0x8000 | (2 * r))));
            const __m256i hi = _mm256_and_si256(_mm256_mullo_epi16(_mm256_shuffle_epi8(qh, shuf), mul), m1);
            _mm256_store_si256((__m256i *) (idx + 16 * r), _mm256_or_si256(_mm256_cvtepu8_epi16(load16(a.qs + 16 * r)), hi));
        }
        // 1 + 2 ls per sub-block, ls the nibbles of scales (low first).
        const __m256i ls = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int) load_u32(a.scales)), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                                            _mm256_set1_epi32(0xF));
        const sub_bcast sc(_mm256_or_si256(_mm256_add_epi32(ls, ls), _mm256_set1_epi32(1)));
        sub_block_products<NC>(y, isum, [&](int ib) { return grid8(ggml_iq3s_grid, idx + 8 * ib); },
                               [&](int ib) { return sign_mask(load_u32(a.signs + 4 * ib)); },
                               [&](int ib) { return sc.s16(ib); });
        for (int c = 0; c < NC; c++) scale[c] = h2f(a.d) * y[c]->d;
    };
};

// ---- IQ1 ------------------------------------------------------------------------------------
// Grid levels are -1, 0, 1; u = level + 1 is unsigned. With Y the sum of q8 over a sub-block,
// the reference's 8 * (sumi + sumd / 8) = 8 sum mult (u . q8) + sum mult (delta - 8) Y.
struct iq1_s_kernel {
    static constexpr auto block = [](const block_iq1_s & a, const block_q8_K * const * y, __m256i * isum, float * scale, auto nc) {
        constexpr int NC = decltype(nc)::value;
        const __m128i qh = load16(a.qh);
        // Index k (sub-block k / 4, l = k % 4): qs[k] | ((qh >> 3 l) & 7) << 8.
#if IQ1_PDEP_INDICES
        const auto points = [&](int ib) { return grid4_packed(ggml_iq1s_grid, iq1_indices(load_u32(a.qs + 4 * ib), a.qh[ib], 0x0700070007000700ULL)); };
#else
        alignas(32) uint16_t idx[32];
        // The multiply shifts left by 8 - 3 l; l = 3 needs a right shift by 1, taken before.
        const __m256i qh2 = _mm256_broadcastsi128_si256(qh);
        const __m256i mul = _mm256_set1_epi64x(0x0001000400200100LL);  // 256, 32, 4, 1
        for (int r = 0; r < 2; r++) {
            const char b0 = (char) (8 * r), b1 = (char) (8 * r + 2), b2 = (char) (8 * r + 4), b3 = (char) (8 * r + 6);
            const __m256i shuf = _mm256_setr_epi8(b0, b0 + 1, b0, b0 + 1, b0, b0 + 1, b0, b0 + 1, b1, b1 + 1, b1, b1 + 1, b1, b1 + 1, b1, b1 + 1,
                                                  b2, b2 + 1, b2, b2 + 1, b2, b2 + 1, b2, b2 + 1, b3, b3 + 1, b3, b3 + 1, b3, b3 + 1, b3, b3 + 1);
            const __m256i h = _mm256_shuffle_epi8(qh2, shuf);
            const __m256i hs = _mm256_blend_epi16(h, _mm256_srli_epi16(h, 1), 0x88);
            const __m256i hi = _mm256_and_si256(_mm256_mullo_epi16(hs, mul), _mm256_set1_epi16(0x700));
            _mm256_store_si256((__m256i *) (idx + 16 * r), _mm256_or_si256(_mm256_cvtepu8_epi16(load16(a.qs + 16 * r)), hi));
        }
        const auto points = [&](int ib) { return grid4(ggml_iq1s_grid, idx + 4 * ib); };
#endif
        // Per sub-block: mult = 2 ((qh >> 12) & 7) + 1, delta = qh bit 15 ? -1 : 1.
        const __m128i mult = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(qh, 12), _mm_set1_epi16(7)), 1), _mm_set1_epi16(1));
        const __m128i delta = _mm_or_si128(_mm_srai_epi16(qh, 15), _mm_set1_epi16(1));
        const __m128i coef = _mm_mullo_epi16(mult, _mm_sub_epi16(delta, _mm_set1_epi16(8)));
        // bsums j = 2 ib, 2 ib + 1 both get sub-block ib's coefficient.
        const __m256i coef16 = _mm256_set_m128i(_mm_unpackhi_epi16(coef, coef), _mm_unpacklo_epi16(coef, coef));
        const sub_bcast sc(_mm256_cvtepu16_epi32(mult));
        const __m256i one = _mm256_set1_epi8(1);
        sub_block_products<NC>(y, isum, [&](int ib) { return _mm256_add_epi8(points(ib), one); },
                               nullptr,
                               [&](int ib) { return sc.s16(ib); });
        for (int c = 0; c < NC; c++) {
            const __m256i corr = _mm256_madd_epi16(load32(y[c]->bsums), coef16);
            isum[c] = _mm256_add_epi32(_mm256_slli_epi32(isum[c], 3), corr);
            scale[c] = 0.125f * h2f(a.d) * y[c]->d;
        }
    };
};

// IQ1_M: a nibble per 8 values (3 index bits, the delta's sign in bit 3), 3-bit scales per 16
// values, the F16 scale in the scales' top nibbles. The weight bytes 8 u + (delta + 1) =
// (8 level + delta) + 9 fold the delta into the product; the 9 comes out through bsums:
// 8 * (sumi + sumd / 8) = sum_j mult_j ((8 u + delta + 1) . q8)_j - 9 sum_j mult_j bsums_j.
struct iq1_m_kernel {
    static constexpr auto block = [](const block_iq1_m & a, const block_q8_K * const * y, __m256i * isum, float * scale, auto nc) {
        constexpr int NC = decltype(nc)::value;
        const __m128i m4 = _mm_set1_epi8(0x0F);
        const __m128i qh = load16(a.qh);
        const __m128i nl = _mm_and_si128(qh, m4), nh = _mm_and_si128(_mm_srli_epi16(qh, 4), m4);
        const __m128i h0 = _mm_unpacklo_epi8(nl, nh), h1 = _mm_unpackhi_epi8(nl, nh);  // nibbles 0..15, 16..31
        // Index k: qs[k] | (nibble k & 7) << 8, nibbles low first. The pdep indices measured
        // slower here for more than one column (4 columns in cache: 6.2 against 10.9 GB/s), so
        // those keep the vector ones.
#if IQ1_PDEP_INDICES
        constexpr bool pdep = NC == 1;
#else
        constexpr bool pdep = false;
#endif
        alignas(32) uint16_t idx[32];
        if constexpr (!pdep) {
            const __m128i m7 = _mm_set1_epi8(7);
            const __m128i qs0 = load16(a.qs), qs1 = load16(a.qs + 16);
            _mm_store_si128((__m128i *) idx, _mm_unpacklo_epi8(qs0, _mm_and_si128(h0, m7)));
            _mm_store_si128((__m128i *) (idx + 8), _mm_unpackhi_epi8(qs0, _mm_and_si128(h0, m7)));
            _mm_store_si128((__m128i *) (idx + 16), _mm_unpacklo_epi8(qs1, _mm_and_si128(h1, m7)));
            _mm_store_si128((__m128i *) (idx + 24), _mm_unpackhi_epi8(qs1, _mm_and_si128(h1, m7)));
        }
        const auto points = [&](int ib) {
#if IQ1_PDEP_INDICES
            if constexpr (pdep) return grid4_packed(ggml_iq1s_grid, iq1_indices(load_u32(a.qs + 4 * ib), load_u16(a.qh + 2 * ib), 0x0F000F000F000F00ULL));
            else
#endif
                return grid4(ggml_iq1s_grid, idx + 4 * ib);
        };
        // delta + 1 per group of 8: 2 where bit 3 is clear, else 0.
        const __m128i m8 = _mm_set1_epi8(8);
        const sub_bcast dp(_mm256_set_m128i(_mm_srli_epi16(_mm_xor_si128(_mm_and_si128(h1, m8), m8), 2),
                                            _mm_srli_epi16(_mm_xor_si128(_mm_and_si128(h0, m8), m8), 2)));
        // Scale j (per 16 values): (sc[j / 4] >> 3 (j % 4)) & 7, by a multiply to bits 9..11.
        const __m128i sw = load8(a.scales);
        const __m128i d2 = _mm_unpacklo_epi16(sw, sw);                  // s0 s0 s1 s1 s2 s2 s3 s3
        const __m256i w = _mm256_set_m128i(_mm_unpackhi_epi32(d2, d2),  // s2 x4, s3 x4
                                           _mm_unpacklo_epi32(d2, d2)); // s0 x4, s1 x4
        const __m256i mul = _mm256_set1_epi64x(0x0001000800400200LL);   // 512, 64, 8, 1
        const __m256i s3 = _mm256_and_si256(_mm256_srli_epi16(_mm256_mullo_epi16(w, mul), 9), _mm256_set1_epi16(7));
        const __m256i mult = _mm256_or_si256(_mm256_add_epi16(s3, s3), _mm256_set1_epi16(1));  // 16 s16, j in order
        const __m256i mult9 = _mm256_mullo_epi16(mult, _mm256_set1_epi16(9));
        const __m256i scb = _mm256_permute4x64_epi64(_mm256_packus_epi16(mult, mult), _MM_SHUFFLE(2, 0, 2, 0));
        const __m256i one = _mm256_set1_epi8(1);
        sub_block_products<NC>(y, isum,
                               [&](int ib) {
                                   const __m256i u = _mm256_add_epi8(points(ib), one);
                                   return _mm256_or_si256(_mm256_slli_epi16(u, 3), dp.bytes8(ib));
                               },
                               nullptr, [&](int ib) { return scale_pair(scb, ib); });
        uint16_t s[4];
        memcpy(s, a.scales, sizeof(s));
        const uint16_t d = (uint16_t) ((s[0] >> 12) | ((s[1] >> 8) & 0x00F0) | ((s[2] >> 4) & 0x0F00) | (s[3] & 0xF000));
        for (int c = 0; c < NC; c++) {
            isum[c] = _mm256_sub_epi32(isum[c], _mm256_madd_epi16(load32(y[c]->bsums), mult9));
            scale[c] = 0.125f * h2f(d) * y[c]->d;
        }
    };
};

// ---- IQ4_XS ---------------------------------------------------------------------------------
// IQ4_NL's levels by pshufb, two sub-blocks per 32 bytes of nibbles; signed levels times signed
// activations by moving the level's sign onto the activation.
float dot_iq4_xs(int64_t n, const void * va, const void * vb) {
    const __m256i table = _mm256_broadcastsi128_si256(load16(kvalues_iq4nl));
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i sh_l = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28), sh_h = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    return dot_super<block_iq4_xs>(n, va, vb, [&](const block_iq4_xs & a, const block_q8_K & b, float & scale) {
        // ls - 32 per sub-block: low 4 bits from scales_l, high 2 from scales_h.
        const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int) load_u32(a.scales_l)), sh_l), _mm256_set1_epi32(0xF));
        const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(a.scales_h), sh_h), _mm256_set1_epi32(3));
        const sub_bcast sc(_mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32)));
        __m256i acc = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib += 2) {
            const __m256i q = load32(a.qs + 16 * ib);
            const __m256i ql = _mm256_and_si256(q, m4), qh = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            const __m256i w0 = _mm256_shuffle_epi8(table, _mm256_permute2x128_si256(ql, qh, 0x20));
            const __m256i w1 = _mm256_shuffle_epi8(table, _mm256_permute2x128_si256(ql, qh, 0x31));
            const __m256i y0 = load32(b.qs + 32 * ib), y1 = load32(b.qs + 32 * ib + 32);
            acc = dot_scaled(acc, _mm256_sign_epi8(w0, w0), _mm256_sign_epi8(y0, w0), sc.s16(ib));
            acc = dot_scaled(acc, _mm256_sign_epi8(w1, w1), _mm256_sign_epi8(y1, w1), sc.s16(ib + 1));
        }
        scale = h2f(a.d) * b.d;
        return acc;
    });
}

// ---- ternary --------------------------------------------------------------------------------
// Level t - 1 with t in 0..2 (TQ2_0's 2-bit fields also 3): sum (t - 1) q8 = sum t q8 - sum q8,
// the last from bsums. The products of small t accumulate in s16 (|sum| <= 8 * 2 * 3 * 127).
struct tsum {
    __m256i acc = _mm256_setzero_si256();
    void add(__m256i t, const int8_t * y) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
        acc = _mm256_dpbusd_epi32(acc, t, load32(y));
#else
        acc = _mm256_add_epi16(acc, _mm256_maddubs_epi16(t, load32(y)));
#endif
    }
    // The s32 lanes of sum t q8 - sum q8.
    __m256i minus_ysum(const block_q8_K & b) const {
        const __m256i ones = _mm256_set1_epi16(1);
        const __m256i ysum = _mm256_madd_epi16(load32(b.bsums), ones);
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
        return _mm256_sub_epi32(acc, ysum);
#else
        return _mm256_sub_epi32(_mm256_madd_epi16(acc, ones), ysum);
#endif
    }
};

// TQ1_0's digit of byte p (after the multiplies by 3^n): (3 p) >> 8 = [p >= 86] + [p >= 171].
inline __m256i tq1_digit(__m256i p) {
    const __m256i one = _mm256_set1_epi8(1);
    const __m256i a = _mm256_min_epu8(_mm256_subs_epu8(p, _mm256_set1_epi8(85)), one);
    const __m256i c = _mm256_min_epu8(_mm256_subs_epu8(p, _mm256_set1_epi8((char) 170)), one);
    return _mm256_add_epi8(a, c);
}

inline __m256i times3(__m256i p) { return _mm256_add_epi8(p, _mm256_add_epi8(p, p)); }

float dot_tq1_0(int64_t n, const void * va, const void * vb) {
    return dot_super<block_tq1_0>(n, va, vb, [](const block_tq1_0 & a, const block_q8_K & b, float & scale) {
        tsum s;
        // qs[0..32): values 32 n + m are digit n of byte m (its multiple by 3^n, mod 256).
        __m256i p = load32(a.qs);
        for (int k = 0; k < 5; k++) {
            s.add(tq1_digit(p), b.qs + 32 * k);
            p = times3(p);
        }
        // qs[32..48): values 160 + 16 n + m; two digits per register: [n | n + 1].
        const __m128i q = load16(a.qs + 32);
        const __m128i q3 = _mm_add_epi8(q, _mm_add_epi8(q, q));
        __m256i r = _mm256_set_m128i(q3, q);
        s.add(tq1_digit(r), b.qs + 160);
        r = times3(times3(r));
        s.add(tq1_digit(r), b.qs + 192);
        r = times3(times3(r));
        // qh: values 240 + 4 n + m, digit n of qh[m]: the 4 bytes times 3^n per u32 (bytes
        // multiplied apart in the u16 lanes, so no carries cross).
        const __m128i h = _mm_set1_epi32((int) load_u32(a.qh));
        const __m128i pw = _mm_setr_epi16(1, 1, 3, 3, 9, 9, 27, 27);
        const __m128i he = _mm_and_si128(_mm_mullo_epi16(_mm_and_si128(h, _mm_set1_epi16(0x00FF)), pw), _mm_set1_epi16(0x00FF));
        const __m128i ho = _mm_mullo_epi16(_mm_and_si128(h, _mm_set1_epi16((short) 0xFF00)), pw);
        r = _mm256_inserti128_si256(r, _mm_or_si128(he, ho), 1);
        s.add(tq1_digit(r), b.qs + 224);
        scale = h2f(a.d) * b.d;
        return s.minus_ysum(b);
    });
}

// TQ2_0: byte 32 c + m holds values 128 c + 32 l + m in bits 2 l.
float dot_tq2_0(int64_t n, const void * va, const void * vb) {
    const __m256i m3 = _mm256_set1_epi8(3);
    return dot_super<block_tq2_0>(n, va, vb, [&](const block_tq2_0 & a, const block_q8_K & b, float & scale) {
        tsum s;
        for (int c = 0; c < 2; c++) {
            const __m256i q = load32(a.qs + 32 * c);
            s.add(_mm256_and_si256(q, m3), b.qs + 128 * c);
            s.add(_mm256_and_si256(_mm256_srli_epi16(q, 2), m3), b.qs + 128 * c + 32);
            s.add(_mm256_and_si256(_mm256_srli_epi16(q, 4), m3), b.qs + 128 * c + 64);
            s.add(_mm256_and_si256(_mm256_srli_epi16(q, 6), m3), b.qs + 128 * c + 96);
        }
        scale = h2f(a.d) * b.d;
        return s.minus_ysum(b);
    });
}

}  // namespace

ggml_quant_dot_fn quant_dot_iq(ggml_type type) {
    switch (type) {
        case GGML_TYPE_IQ2_XXS: return dot_one<block_iq2_xxs, iq2_xxs_kernel>;
        case GGML_TYPE_IQ2_XS:  return dot_one<block_iq2_xs, iq2_xs_kernel>;
        case GGML_TYPE_IQ2_S:   return dot_one<block_iq2_s, iq2_s_kernel>;
        case GGML_TYPE_IQ3_XXS: return dot_one<block_iq3_xxs, iq3_xxs_kernel>;
        case GGML_TYPE_IQ3_S:   return dot_one<block_iq3_s, iq3_s_kernel>;
        case GGML_TYPE_IQ1_S:   return dot_one<block_iq1_s, iq1_s_kernel>;
        case GGML_TYPE_IQ1_M:   return dot_one<block_iq1_m, iq1_m_kernel>;
        case GGML_TYPE_IQ4_XS:  return dot_iq4_xs;
        case GGML_TYPE_TQ1_0:   return dot_tq1_0;
        case GGML_TYPE_TQ2_0:   return dot_tq2_0;
        default:                return nullptr;
    }
}

// The grid types decode a block once for up to 4 columns (prompts); the others' decoding is cheap
// next to their products (IQ4_XS, which has a repacked GEMM too, and the ternary types).
ggml_quant_dot_cols_fn quant_dot_cols_iq(ggml_type type) {
    switch (type) {
        case GGML_TYPE_IQ2_XXS: return dot_cols<block_iq2_xxs, iq2_xxs_kernel>;
        case GGML_TYPE_IQ2_XS:  return dot_cols<block_iq2_xs, iq2_xs_kernel>;
        case GGML_TYPE_IQ2_S:   return dot_cols<block_iq2_s, iq2_s_kernel>;
        case GGML_TYPE_IQ3_XXS: return dot_cols<block_iq3_xxs, iq3_xxs_kernel>;
        case GGML_TYPE_IQ3_S:   return dot_cols<block_iq3_s, iq3_s_kernel>;
        case GGML_TYPE_IQ1_S:   return dot_cols<block_iq1_s, iq1_s_kernel>;
        case GGML_TYPE_IQ1_M:   return dot_cols<block_iq1_m, iq1_m_kernel>;
        default:                return nullptr;
    }
}

}  // namespace ggml_cpu_avx2

#endif  // GGML_SIMD_AVX2
