// quant-dot-iq-avx512.cpp - 512-bit dot products of the IQ grid types with Q8_K that decode the
// grid in registers (AVX512 VBMI): IQ2_XXS, IQ3_XXS (256 points), IQ2_XS, IQ3_S (512), IQ2_S
// (1024). Held to the scalar references of quant-dot-iq.cpp like the AVX2 kernels, which serve
// the other types.
//
// Why: the AVX2 kernels load each grid point from memory (one load and one insert per 8 or 4
// values), and on 2 cores that, not the memory, bounds token generation (bench-quant, Zen 5: 4.5
// to 5.4 GB/s of weights per thread in cache). Here a point is found by byte permutes instead:
//   - the packed grid (2 bits per coordinate for IQ2, 3 for IQ3; 16 bits a point) is split into
//     its low and high bytes, tables of 128 bytes; vpermi2b looks up 64 indices in one of them,
//     and blends on the index's bits 7, 8, 9 pick the table;
//   - vpermt2b puts each point's two bytes at the start of the u64 lane its values go to,
//     vpmultishiftqb moves each coordinate's bits to the bottom of its byte, and vpermb on the
//     low 6 bits (a 64-entry table repeating the levels) maps codes to levels.
// The signs become mask registers, applied by a masked subtraction (y -> -y); vpmaddubsw and
// vpdpwssd sum the products with the sub-block's scale, as in the AVX2 kernels. Per column the
// instructions are those of one column, so a tile of columns gives the single dot's bits.
//
// IQ1_S / IQ1_M stay with the AVX2 kernels: their grid has 2048 points, 16 vpermi2b and 15 blends
// a byte table, and even with two blocks' indices in one lookup this measured no faster than the
// loads (bench-quant, Zen 5: IQ1_S 3.7 against 3.7-3.9 GB/s, IQ1_M 4.1-4.3 against 4.1-4.4).
#include "kernels-x86.h"

#if defined(GGML_SIMD_AVX512) && defined(__AVX512VNNI__) && defined(__AVX512VBMI__)

#include "../../../quants-iq-grids.h"
#include "simd-avx512.h"

#include <string.h>
#include <type_traits>

namespace ggml_cpu_avx512 {
namespace {

inline float h2f(ggml_fp16_t h) { return _cvtsh_ss(h); }

inline uint64_t load_u64(const void * p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

// A packed grid of N points as byte tables: lo[i] / hi[i] the low / high byte of point i.
template <int N> struct grid_bytes {
    alignas(64) uint8_t lo[N];
    alignas(64) uint8_t hi[N];
};
template <int N> constexpr grid_bytes<N> split(const uint16_t (&packed)[N]) {
    grid_bytes<N> g{};
    for (int i = 0; i < N; i++) {
        g.lo[i] = (uint8_t) (packed[i] & 0xFF);
        g.hi[i] = (uint8_t) (packed[i] >> 8);
    }
    return g;
}
constexpr grid_bytes<256> iq2xxs_bytes = split(ggml_iq::iq2xxs_packed);
constexpr grid_bytes<512> iq2xs_bytes = split(ggml_iq::iq2xs_packed);
constexpr grid_bytes<1024> iq2s_bytes = split(ggml_iq::iq2s_packed);
constexpr grid_bytes<256> iq3xxs_bytes = split(ggml_iq::iq3xxs_packed);
constexpr grid_bytes<512> iq3s_bytes = split(ggml_iq::iq3s_packed);

// Byte p of l / h = the low / high byte of point idx[p] of grid g: vpermi2b looks up 128 points
// by bits 0..6 of the index byte, then blends by bit 7 (of the byte) and by the index's bits
// from 8 up (upper[0]: bit 8 of each index, upper[1]: bit 9), halving the candidates each time.
template <int N> inline void lookup(const grid_bytes<N> & g, __m512i idx, const __mmask64 * upper, __m512i & l, __m512i & h) {
    constexpr int C = N / 128;
    __m512i rl[C], rh[C];
    const __m512i * lo = (const __m512i *) g.lo, * hi = (const __m512i *) g.hi;
    for (int c = 0; c < C; c++) {
        rl[c] = _mm512_permutex2var_epi8(lo[2 * c], idx, lo[2 * c + 1]);
        rh[c] = _mm512_permutex2var_epi8(hi[2 * c], idx, hi[2 * c + 1]);
    }
    const __mmask64 b7 = _mm512_movepi8_mask(idx);
    for (int c = 0; c < C; c += 2) {
        rl[c / 2] = _mm512_mask_blend_epi8(b7, rl[c], rl[c + 1]);
        rh[c / 2] = _mm512_mask_blend_epi8(b7, rh[c], rh[c + 1]);
    }
    for (int n = C / 2, b = 0; n > 1; n /= 2, b++) {
        for (int c = 0; c < n; c += 2) {
            rl[c / 2] = _mm512_mask_blend_epi8(upper[b], rl[c], rl[c + 1]);
            rh[c / 2] = _mm512_mask_blend_epi8(upper[b], rh[c], rh[c + 1]);
        }
    }
    l = rl[0];
    h = rh[0];
}

// A 64-byte table: for vpermb (levels, below) and vpermt2b / vpermw (selections).
struct byte_table {
    alignas(64) uint8_t v[64];
};

// A level table for vpermb: entry e is levels[e mod NL] (the code in the low bits, whatever the
// bits above it up to bit 5 are).
template <size_t NL> constexpr byte_table level_table(const int8_t (&levels)[NL]) {
    byte_table t{};
    for (int e = 0; e < 64; e++) t.v[e] = (uint8_t) levels[e % NL];
    return t;
}
constexpr byte_table iq2_levels = level_table(ggml_iq::levels_iq2);
constexpr byte_table iq3xxs_levels = level_table(ggml_iq::levels_iq3xxs);
constexpr byte_table iq3s_levels = level_table(ggml_iq::levels_iq3s);

inline __m512i load_table(const byte_table & t) { return _mm512_load_si512(t.v); }

// The vpermt2b selections of points(), one per 64 values j. With 8 values a point, u64 lane k
// takes point 8 j + k, its bytes at position pos(8 j + k) of the looked-up bytes; with 4 values a
// point (IQ3), points 16 j + 2 k and 16 j + 2 k + 1.
struct selections {
    byte_table j[4];
};
template <int PPL, typename F> constexpr selections make_selections(F pos) {
    selections t{};
    for (int j = 0; j < 4; j++) {
        for (int k = 0; k < 8; k++) {
            for (int e = 0; e < PPL; e++) {
                const int p = pos(8 * PPL * j + PPL * k + e);
                t.j[j].v[8 * k + 2 * e] = (uint8_t) p;
                t.j[j].v[8 * k + 2 * e + 1] = (uint8_t) (64 + p);
            }
        }
    }
    return t;
}
// IQ2_XXS: point l of sub-block s at byte 8 s + l of the block's u32 pairs.
constexpr selections iq2_xxs_sel = make_selections<1>([](int i) { return 8 * (i / 4) + i % 4; });
// IQ2_XS: the indices are u16, the low byte of index i at byte 2 i.
constexpr selections iq2_xs_sel = make_selections<1>([](int i) { return 2 * i; });
// IQ2_S, IQ3_XXS, IQ3_S: index bytes in order.
constexpr selections in_order_sel = make_selections<1>([](int i) { return i; });
constexpr selections in_order_sel2 = make_selections<2>([](int i) { return i; });

// Where each coordinate's code starts in a u64 lane: 8 of 2 bits (IQ2), or two points of 4
// coordinates of 3 bits, the second at bit 16 (IQ3).
constexpr long long SHIFTS_8X2 = 0x0E0C0A0806040200LL;
constexpr long long SHIFTS_2X4X3 = 0x1916131009060300LL;

// Codes of 64 values: u64 lane k gets the point bytes at positions sel[8 k + ...] of (l | h)
// (sel: index < 64 from l, 64 + index from h), then each value's code to the bottom of its byte
// (shifts: the bit offset of each byte's code) and through the level table.
inline __m512i points(__m512i l, __m512i h, const byte_table & sel, long long shifts, const byte_table & levels) {
    const __m512i pts = _mm512_permutex2var_epi8(l, load_table(sel), h);
    return _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(_mm512_set1_epi64(shifts), pts), load_table(levels));
}

// Bytes of 7-bit sign codes completed with their parity bit (bit 7 set where bits 0..6 have an
// odd count: the count of negatives is even), by nibble lookups; bit 7 of the input ignored.
inline __m512i add_parity(__m512i c) {
    const __m512i odd = _mm512_broadcast_i32x4(_mm_setr_epi8(0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0));
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    c = _mm512_and_si512(c, _mm512_set1_epi8(0x7F));
    const __m512i p = _mm512_xor_si512(_mm512_shuffle_epi8(odd, _mm512_and_si512(c, m4)),
                                       _mm512_shuffle_epi8(odd, _mm512_and_si512(_mm512_srli_epi16(c, 4), m4)));
    return _mm512_or_si512(c, p);
}

// The 32 sign bytes of a super-block (byte i: the signs of values 8 i .. 8 i + 7, bit set =
// negative), as 4 masks of 64 values.
struct sign_bytes {
    alignas(32) uint64_t m[4];
    // From bytes 0..31 of v, in order.
    explicit sign_bytes(__m512i v) { _mm256_store_si256((__m256i *) m, _mm512_castsi512_si256(v)); }
    __mmask64 mask(int j) const { return _load_mask64((__mmask64 *) &m[j]); }
};
inline __mmask64 sign_mask(const uint8_t * signs, int j) { return (__mmask64) load_u64(signs + 8 * j); }

// The scales of 64 values j in s16 lanes (the pairs of values vpmaddubsw forms): lane L (values
// 64 j + 2 L, + 1) takes word STRIDE * t of the scale words, t = (64 j + 2 L) / VALUES (VALUES
// values a scale).
template <int VALUES, int STRIDE> constexpr selections make_scale_sel() {
    selections t{};
    for (int j = 0; j < 4; j++) {
        for (int lane = 0; lane < 32; lane++) {
            const int w = STRIDE * ((64 * j + 2 * lane) / VALUES);
            t.j[j].v[2 * lane] = (uint8_t) w;
            t.j[j].v[2 * lane + 1] = 0;
        }
    }
    return t;
}
constexpr selections scale_sel_32_u64 = make_scale_sel<32, 4>();  // a scale per 32 values, in u64 lanes
constexpr selections scale_sel_16_u16 = make_scale_sel<16, 1>();  // a scale per 16 values, in u16 lanes
inline __m512i scale_pair(__m512i words, const selections & sel, int j) { return _mm512_permutexvar_epi16(load_table(sel.j[j]), words); }

// The odd scales 2 ls + 1 of IQ2_XS / IQ2_S: 16 nibbles (low first) in 8 bytes, as u16 lanes.
inline __m512i nibble_scales(const uint8_t * p) {
    const __m128i s = _mm_loadl_epi64((const __m128i *) p);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m128i n = _mm_unpacklo_epi8(_mm_and_si128(s, m4), _mm_and_si128(_mm_srli_epi16(s, 4), m4));
    const __m256i w = _mm256_cvtepu8_epi16(n);
    return _mm512_castsi256_si512(_mm256_or_si256(_mm256_add_epi16(w, w), _mm256_set1_epi16(1)));
}

// acc + the sums of pairs of u (unsigned weights) times y (the activations, negated where m is
// set), each pair sum times its s16 lane of sc, summed into s32 lanes.
inline __m512i dot_scaled(__m512i acc, __m512i u, __m512i y, __mmask64 m, __m512i sc) {
    const __m512i ys = _mm512_mask_sub_epi8(y, m, _mm512_setzero_si512(), y);
    return _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(u, ys), sc);
}

// The four 64-value products of a super-block against NC columns: q(j) the unsigned weights,
// m(j) their signs, sc(j) their scales.
template <int NC, typename Q, typename M, typename S>
inline void products(const block_q8_K * const * y, __m512i * isum, Q q, M m, S sc) {
    for (int c = 0; c < NC; c++) isum[c] = _mm512_setzero_si512();
    for (int j = 0; j < 4; j++) {
        const __m512i w = q(j), s = sc(j);
        const __mmask64 mj = m(j);
        for (int c = 0; c < NC; c++) isum[c] = dot_scaled(isum[c], w, _mm512_loadu_si512(y[c]->qs + 64 * j), mj, s);
    }
}

// The sign codes and scales of IQ2_XXS / IQ3_XXS: u64 lane s of aux holds sub-block s's u32 of
// four 7-bit sign codes (bits 7 l) and a 4-bit scale (bits 28..31) at bit BIT0.
struct xxs_signs_scales {
    sign_bytes signs;
    __m512i sc;  // u64 lane s: the odd scale 2 ls + 1 of sub-block s
    template <int BIT0> static __m512i sign_codes(__m512i aux) {
        const __m512i shifts = _mm512_set1_epi64((long long) (BIT0 | (BIT0 + 7) << 8 | (BIT0 + 14) << 16 | (BIT0 + 21) << 24));
        const __m512i codes = _mm512_multishift_epi64_epi8(shifts, aux);  // bytes 8 s + l: code l of sub-block s
        // Sign byte 4 s + l from byte 8 s + l.
        const __m512i compact = _mm512_set_epi64(0, 0, 0, 0, 0x3B3A393833323130LL, 0x2B2A292823222120LL,
                                                 0x1B1A191813121110LL, 0x0B0A090803020100LL);
        return add_parity(_mm512_permutexvar_epi8(compact, codes));
    }
    template <int BIT0>
    xxs_signs_scales(__m512i aux, std::integral_constant<int, BIT0>)
        : signs(sign_codes<BIT0>(aux)),
          sc(_mm512_or_si512(_mm512_slli_epi64(_mm512_and_si512(_mm512_srli_epi64(aux, BIT0 + 28), _mm512_set1_epi64(15)), 1),
                             _mm512_set1_epi64(1))) {}
};

// IQ2_XXS: qs holds per sub-block s the u32 of its four index bytes, then its u32 of signs and
// scale; one register is the whole super-block, u64 lane s = sub-block s.
struct iq2_xxs_kernel {
    template <int NC> static void block(const block_iq2_xxs & a, const block_q8_K * const * y, __m512i * isum, float * scale) {
        const __m512i w = _mm512_loadu_si512(a.qs);
        __m512i l, h;
        lookup(iq2xxs_bytes, w, nullptr, l, h);
        const xxs_signs_scales ss(w, std::integral_constant<int, 32>());
        products<NC>(y, isum, [&](int j) { return points(l, h, iq2_xxs_sel.j[j], SHIFTS_8X2, iq2_levels); },
                     [&](int j) { return ss.signs.mask(j); }, [&](int j) { return scale_pair(ss.sc, scale_sel_32_u64, j); });
        for (int c = 0; c < NC; c++) scale[c] = 0.125f * h2f(a.d) * y[c]->d;
    }
};

// IQ2_XS: a u16 per 8 values, a 9-bit index and a 7-bit sign code; 4-bit scales per 16 values.
struct iq2_xs_kernel {
    template <int NC> static void block(const block_iq2_xs & a, const block_q8_K * const * y, __m512i * isum, float * scale) {
        const __m512i w = _mm512_loadu_si512(a.qs);
        // Index i's low byte at byte 2 i; its bit 8 is bit 0 of byte 2 i + 1.
        const __m512i upper = _mm512_srli_epi16(w, 8);
        const __mmask64 b8 = _mm512_test_epi8_mask(upper, _mm512_set1_epi16(1));
        __m512i l, h;
        lookup(iq2xs_bytes, w, &b8, l, h);
        // The sign codes (bits 9..15) to bytes 2 i, then in order.
        const __m512i compact = _mm512_set_epi64(0, 0, 0, 0, 0x3E3C3A3836343230LL, 0x2E2C2A2826242220LL,
                                                 0x1E1C1A1816141210LL, 0x0E0C0A0806040200LL);
        const sign_bytes signs(add_parity(_mm512_permutexvar_epi8(compact, _mm512_srli_epi16(w, 9))));
        const __m512i sc = nibble_scales(a.scales);
        products<NC>(y, isum, [&](int j) { return points(l, h, iq2_xs_sel.j[j], SHIFTS_8X2, iq2_levels); },
                     [&](int j) { return signs.mask(j); }, [&](int j) { return scale_pair(sc, scale_sel_16_u16, j); });
        for (int c = 0; c < NC; c++) scale[c] = 0.125f * h2f(a.d) * y[c]->d;
    }
};

// IQ2_S: 10-bit indices (low bytes in qs[0..32), 2 high bits each in qh: index k's are bits
// 2 k, 2 k + 1 of qh as a u64), explicit sign bytes (qs[32..64)), scales as IQ2_XS.
struct iq2_s_kernel {
    template <int NC> static void block(const block_iq2_s & a, const block_q8_K * const * y, __m512i * isum, float * scale) {
        const uint64_t qh = load_u64(a.qh);
        const __mmask64 upper[2] = { (__mmask64) _pext_u64(qh, 0x5555555555555555ULL), (__mmask64) _pext_u64(qh, 0xAAAAAAAAAAAAAAAAULL) };
        __m512i l, h;
        lookup(iq2s_bytes, _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *) a.qs)), upper, l, h);
        const uint8_t * signs = a.qs + QK_K / 8;
        const __m512i sc = nibble_scales(a.scales);
        products<NC>(y, isum, [&](int j) { return points(l, h, in_order_sel.j[j], SHIFTS_8X2, iq2_levels); },
                     [&](int j) { return sign_mask(signs, j); }, [&](int j) { return scale_pair(sc, scale_sel_16_u16, j); });
        for (int c = 0; c < NC; c++) scale[c] = 0.125f * h2f(a.d) * y[c]->d;
    }
};

// IQ3_XXS: 64 index bytes (4 values each), then per sub-block a u32 of signs and scale.
struct iq3_xxs_kernel {
    template <int NC> static void block(const block_iq3_xxs & a, const block_q8_K * const * y, __m512i * isum, float * scale) {
        __m512i l, h;
        lookup(iq3xxs_bytes, _mm512_loadu_si512(a.qs), nullptr, l, h);
        const __m512i aux = _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *) (a.qs + QK_K / 4)));
        const xxs_signs_scales ss(aux, std::integral_constant<int, 0>());
        products<NC>(y, isum, [&](int j) { return points(l, h, in_order_sel2.j[j], SHIFTS_2X4X3, iq3xxs_levels); },
                     [&](int j) { return ss.signs.mask(j); }, [&](int j) { return scale_pair(ss.sc, scale_sel_32_u64, j); });
        for (int c = 0; c < NC; c++) scale[c] = 0.25f * h2f(a.d) * y[c]->d;
    }
};

// IQ3_S: 9-bit indices (low bytes in qs; index i's bit 8 is bit i of qh as a u64), explicit sign
// bytes, a 4-bit scale per sub-block (nibble s of the scales' u32).
struct iq3_s_kernel {
    template <int NC> static void block(const block_iq3_s & a, const block_q8_K * const * y, __m512i * isum, float * scale) {
        const __mmask64 b8 = (__mmask64) load_u64(a.qh);
        __m512i l, h;
        lookup(iq3s_bytes, _mm512_loadu_si512(a.qs), &b8, l, h);
        uint32_t sc4;
        memcpy(&sc4, a.scales, 4);
        const __m512i ls = _mm512_and_si512(_mm512_srlv_epi64(_mm512_set1_epi64(sc4), _mm512_setr_epi64(0, 4, 8, 12, 16, 20, 24, 28)),
                                            _mm512_set1_epi64(15));
        const __m512i sc = _mm512_or_si512(_mm512_add_epi64(ls, ls), _mm512_set1_epi64(1));
        products<NC>(y, isum, [&](int j) { return points(l, h, in_order_sel2.j[j], SHIFTS_2X4X3, iq3s_levels); },
                     [&](int j) { return sign_mask(a.signs, j); }, [&](int j) { return scale_pair(sc, scale_sel_32_u64, j); });
        for (int c = 0; c < NC; c++) scale[c] = h2f(a.d) * y[c]->d;
    }
};

// As the AVX2 kernels: the weights stream once per token, so ask for them 4 KB ahead.
template <typename B> inline void prefetch_ahead(const B * p) {
    for (size_t off = 0; off < sizeof(B); off += 64) _mm_prefetch((const char *) p + 4096 + off, _MM_HINT_T0);
}

// The driver: K::block<NC> decodes super-block i once and gives each column's integer sums (16
// s32 lanes) and float scale; the scaled sums accumulate in one float register per column.
template <typename BA, typename K, int NC>
void dot_super_cols(int64_t n, const void * va, const void * vb, size_t ldb, float * s, size_t lds) {
    const BA * a = (const BA *) va;
    __m512 acc[NC];
    for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        prefetch_ahead(a + i);
        const block_q8_K * y[NC];
        for (int c = 0; c < NC; c++) y[c] = (const block_q8_K *) ((const char *) vb + c * ldb) + i;
        __m512i isum[NC];
        float scale[NC];
        K::template block<NC>(a[i], y, isum, scale);
        for (int c = 0; c < NC; c++) acc[c] = _mm512_fmadd_ps(_mm512_set1_ps(scale[c]), _mm512_cvtepi32_ps(isum[c]), acc[c]);
    }
    for (int c = 0; c < NC; c++) s[c * lds] = _mm512_reduce_add_ps(acc[c]);
}

template <typename BA, typename K> float dot_one(int64_t n, const void * va, const void * vb) {
    float s;
    dot_super_cols<BA, K, 1>(n, va, vb, 0, &s, 1);
    return s;
}

template <typename BA, typename K>
void dot_cols(int64_t n, const void * va, const void * vb, size_t ldb, int nc, float * s, size_t lds) {
    for (int c0 = 0; c0 < nc; c0 += 4) {
        const char * b = (const char *) vb + c0 * ldb;
        switch (nc - c0 < 4 ? nc - c0 : 4) {
            case 1: dot_super_cols<BA, K, 1>(n, va, b, ldb, s + c0 * lds, lds); break;
            case 2: dot_super_cols<BA, K, 2>(n, va, b, ldb, s + c0 * lds, lds); break;
            case 3: dot_super_cols<BA, K, 3>(n, va, b, ldb, s + c0 * lds, lds); break;
            default: dot_super_cols<BA, K, 4>(n, va, b, ldb, s + c0 * lds, lds); break;
        }
    }
}

}  // namespace

ggml_quant_dot_fn quant_dot_iq(ggml_type type) {
    switch (type) {
        case GGML_TYPE_IQ2_XXS: return dot_one<block_iq2_xxs, iq2_xxs_kernel>;
        case GGML_TYPE_IQ2_XS:  return dot_one<block_iq2_xs, iq2_xs_kernel>;
        case GGML_TYPE_IQ2_S:   return dot_one<block_iq2_s, iq2_s_kernel>;
        case GGML_TYPE_IQ3_XXS: return dot_one<block_iq3_xxs, iq3_xxs_kernel>;
        case GGML_TYPE_IQ3_S:   return dot_one<block_iq3_s, iq3_s_kernel>;
        default:                return nullptr;
    }
}

ggml_quant_dot_cols_fn quant_dot_cols_iq(ggml_type type) {
    switch (type) {
        case GGML_TYPE_IQ2_XXS: return dot_cols<block_iq2_xxs, iq2_xxs_kernel>;
        case GGML_TYPE_IQ2_XS:  return dot_cols<block_iq2_xs, iq2_xs_kernel>;
        case GGML_TYPE_IQ2_S:   return dot_cols<block_iq2_s, iq2_s_kernel>;
        case GGML_TYPE_IQ3_XXS: return dot_cols<block_iq3_xxs, iq3_xxs_kernel>;
        case GGML_TYPE_IQ3_S:   return dot_cols<block_iq3_s, iq3_s_kernel>;
        default:                return ggml_cpu_avx2::quant_dot_cols_iq(type);
    }
}

}  // namespace ggml_cpu_avx512

#endif
