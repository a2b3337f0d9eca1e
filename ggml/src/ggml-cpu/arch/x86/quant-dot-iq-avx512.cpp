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
//     low 6 bits (a 64-entry table repeating the levels) maps codes to levels;
//   - IQ2_XXS and IQ2_XS, whose 32 indices fill half a lookup, look each up twice at bytes of the
//     lane where its values go (lane_points), so no vpermt2b places them.
// The signs become mask registers, applied by a masked subtraction (y -> -y): the computed sign
// bytes of the XXS / XS types by a bit transpose (sign_masks), the explicit ones by loads. The
// 7-bit sign codes get their parity bit from a 128-byte table (vpermi2b). vpmaddubsw and
// vpdpwssd sum the products with the sub-block's scale, as in the AVX2 kernels. Per column the
// instructions are those of one column, so a tile of columns gives the single dot's bits.
//
// IQ1_S / IQ1_M stay with the AVX2 kernels: their grid has 2048 points, 16 vpermi2b and 15 blends
// a byte table, and even with two blocks' indices in one lookup this measured no faster than the
// loads (bench-quant, Zen 5: IQ1_S 3.7 against 3.7-3.9 GB/s, IQ1_M 4.1-4.3 against 4.1-4.4).
// What made them faster was building their indices in general registers (pdep, see there).
//
// Where the time goes (IQ2_XXS, Zen 5, one thread in cache, about 5.7 ns a super-block): leaving
// out in turn the lookup, the signs or the scales each saves about 1 ns; no one part dominates.
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

// The 4 sign masks of a super-block (64 values each, bit set = negative) from its 32 sign bytes
// (sign byte n: values 8 n .. 8 n + 7) arranged by lanes: byte 8 k + j of the input is sign byte
// 8 j + k, whose bits are the mask's bits 8 k .. 8 k + 7 for j. vgf2p8affineqb with the input
// as the matrices transposes the bits of each u64 lane (byte b of lane k: bit 7 - j = bit b of
// the lane's byte j), and vptestmb on bit 7 - j gives mask j. (Moving the sign bytes to mask
// registers through general registers or memory measured as slow as the rest of the signs' work
// together: IQ2_XXS 4.5 against 5.8 ns a block with the signs left out.)
struct sign_masks {
    __m512i t;  // byte b of lane k: bit 7 - j = bit b of the lane's byte j
    explicit sign_masks(__m512i arranged)
        : t(_mm512_gf2p8affine_epi64_epi8(_mm512_set1_epi64((long long) 0x8040201008040201ULL), arranged, 0)) {}
    __mmask64 mask(int j) const { return _mm512_test_epi8_mask(t, _mm512_set1_epi8((char) (0x80 >> j))); }
};
// A vpermb selection that arranges 32 bytes, one per 8 values (point or sign byte n, at byte
// src(n)), by lanes: byte 8 k + j, and again 8 k + 4 + j, of the result is byte n = 8 j + k, the
// one for values 64 j + 8 k .. 64 j + 8 k + 7.
template <typename F> constexpr byte_table by_lanes(F src) {
    byte_table t{};
    for (int k = 0; k < 8; k++) {
        for (int j = 0; j < 4; j++) t.v[8 * k + j] = t.v[8 * k + 4 + j] = (uint8_t) src(8 * j + k);
    }
    return t;
}
// Byte n at 8 (n / 4) + n % 4: the index bytes of IQ2_XXS, the sign codes of IQ2_XXS and IQ3_XXS
// after their shift (a u32 of four per u64 lane).
constexpr byte_table by_lanes_from_pairs = by_lanes([](int n) { return 8 * (n / 4) + n % 4; });
constexpr byte_table by_lanes_from_words = by_lanes([](int n) { return 2 * n; });      // the low bytes of u16 n
constexpr byte_table by_lanes_from_words_hi = by_lanes([](int n) { return 2 * n + 1; });  // their high bytes

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

// The 7-bit sign codes completed with their parity bit (bit 7 set where bits 0..6 have an odd
// count: the count of negatives is even), as a 128-byte table for vpermi2b, which ignores bit 7.
struct sign_table {
    alignas(64) uint8_t v[128];
};
constexpr sign_table signs_with_parity = [] {
    sign_table t{};
    for (int c = 0; c < 128; c++) t.v[c] = (uint8_t) (c | (__builtin_popcount(c) & 1) << 7);
    return t;
}();
inline __m512i add_parity(__m512i c) {
    return _mm512_permutex2var_epi8(_mm512_load_si512(signs_with_parity.v), c, _mm512_load_si512(signs_with_parity.v + 64));
}

// The sign bytes of IQ2_XXS / IQ3_XXS, arranged by lanes for sign_masks: u64 lane s of aux holds
// sub-block s's u32 of four 7-bit sign codes (bits 7 l) and a 4-bit scale (bits 28..31) at bit
// BIT0.
template <int BIT0> inline __m512i xxs_sign_codes(__m512i aux) {
    const __m512i shifts = _mm512_set1_epi64((long long) (BIT0 | (BIT0 + 7) << 8 | (BIT0 + 14) << 16 | (BIT0 + 21) << 24));
    const __m512i codes = _mm512_multishift_epi64_epi8(shifts, aux);  // bytes 8 s + l: code l of sub-block s
    return add_parity(_mm512_permutexvar_epi8(load_table(by_lanes_from_pairs), codes));
}

// The odd scales 2 ls + 1 of the 8 sub-blocks of IQ2_XXS / IQ3_XXS (ls: bits 28..31 of the u32
// at bit BIT0 of u64 lane s) in the s16 lanes of 64 values: one vpermd per 64 values spreads a
// dword per sub-block that holds its scale in both halves.
template <int BIT0> struct xxs_scales {
    __m512i d;  // dword 2 s: sub-block s's scale, twice
    explicit xxs_scales(__m512i aux) {
        const __m512i ls = _mm512_and_si512(_mm512_srli_epi64(aux, BIT0 + 28), _mm512_set1_epi64(15));
        const __m512i odd = _mm512_or_si512(_mm512_add_epi64(ls, ls), _mm512_set1_epi64(1));
        d = _mm512_or_si512(odd, _mm512_slli_epi64(odd, 16));
    }
    // Values 64 j .. 64 j + 63: sub-block 2 j's scale for the low 32, 2 j + 1's for the high 32.
    __m512i values(int j) const {
        const int a = 4 * j, b = 4 * j + 2;
        return _mm512_permutexvar_epi32(_mm512_setr_epi32(a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b), d);
    }
};

// The IQ2 types' points (8 values, 16 bits packed) by lanes: the 32 indices of a super-block fill
// half a lookup, so each is looked up twice, arranged by lanes (by_lanes), and a blend keeps the
// low byte of point 8 j + k at byte 8 k + j and its high byte at byte 8 k + 4 + j. One
// vpmultishiftqb per 64 values then takes the codes, with no vpermt2b to place the points.
struct lane_points {
    __m512i pts;
    template <int N> lane_points(const grid_bytes<N> & g, __m512i arranged, const __mmask64 * upper) {
        __m512i l, h;
        lookup(g, arranged, upper, l, h);
        pts = _mm512_mask_blend_epi8(0xF0F0F0F0F0F0F0F0ULL, l, h);
    }
    // Coordinate c of the point at byte j (c < 4, 2 bits each) or 4 + j (c >= 4) of its lane.
    static constexpr long long codes_shifts(int j) {
        long long v = 0;
        for (int c = 0; c < 8; c++) v |= (long long) ((c < 4 ? 8 * j : 32 + 8 * j) + 2 * (c % 4)) << (8 * c);
        return v;
    }
    // The levels of values 64 j .. 64 j + 63.
    __m512i values(int j) const {
        return _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(_mm512_set1_epi64(codes_shifts(j)), pts), load_table(iq2_levels));
    }
};

// IQ2_XXS: qs holds per sub-block s the u32 of its four index bytes, then its u32 of signs and
// scale; one register is the whole super-block, u64 lane s = sub-block s.
struct iq2_xxs_kernel {
    template <int NC> static void block(const block_iq2_xxs & a, const block_q8_K * const * y, __m512i * isum, float * scale) {
        const __m512i w = _mm512_loadu_si512(a.qs);
        const lane_points pts(iq2xxs_bytes, _mm512_permutexvar_epi8(load_table(by_lanes_from_pairs), w), nullptr);
        const sign_masks signs(xxs_sign_codes<32>(w));
        const xxs_scales<32> sc(w);
        products<NC>(y, isum, [&](int j) { return pts.values(j); }, [&](int j) { return signs.mask(j); },
                     [&](int j) { return sc.values(j); });
        for (int c = 0; c < NC; c++) scale[c] = 0.125f * h2f(a.d) * y[c]->d;
    }
};

// IQ2_XS: a u16 per 8 values, a 9-bit index and a 7-bit sign code; 4-bit scales per 16 values.
struct iq2_xs_kernel {
    template <int NC> static void block(const block_iq2_xs & a, const block_q8_K * const * y, __m512i * isum, float * scale) {
        const __m512i w = _mm512_loadu_si512(a.qs);
        // The high bytes: bit 0 is an index's bit 8, bits 1..7 its sign code (add_parity ignores
        // the bit the shift brings into bit 7).
        const __m512i hi = _mm512_permutexvar_epi8(load_table(by_lanes_from_words_hi), w);
        const __mmask64 b8 = _mm512_test_epi8_mask(hi, _mm512_set1_epi8(1));
        const lane_points pts(iq2xs_bytes, _mm512_permutexvar_epi8(load_table(by_lanes_from_words), w), &b8);
        const sign_masks signs(add_parity(_mm512_srli_epi16(hi, 1)));
        const __m512i sc = nibble_scales(a.scales);
        products<NC>(y, isum, [&](int j) { return pts.values(j); }, [&](int j) { return signs.mask(j); },
                     [&](int j) { return scale_pair(sc, scale_sel_16_u16, j); });
        for (int c = 0; c < NC; c++) scale[c] = 0.125f * h2f(a.d) * y[c]->d;
    }
};

// IQ2_S: 10-bit indices (low bytes in qs[0..32), 2 high bits each in qh: index k's are bits
// 2 k, 2 k + 1 of qh as a u64), explicit sign bytes (qs[32..64)), scales as IQ2_XS. Its lookup
// (8 tables, 16 vpermi2b and 14 blends) is the longest of the IQ2 types, so two super-blocks
// share one (pair); arranging the indices by lanes measured slower than placing the points after.
struct iq2_s_kernel {
    static constexpr bool pairs = true;
    // Low bytes of index k of the first block at byte k of the lookup, of the second at 32 + k.
    static constexpr selections second_sel = make_selections<1>([](int i) { return 32 + i; });
    template <int NC>
    static void finish(const block_iq2_s & a, __m512i l, __m512i h, const selections & sel, const block_q8_K * const * y, __m512i * isum, float * scale) {
        const uint8_t * signs = a.qs + QK_K / 8;
        const __m512i sc = nibble_scales(a.scales);
        products<NC>(y, isum, [&](int j) { return points(l, h, sel.j[j], SHIFTS_8X2, iq2_levels); },
                     [&](int j) { return sign_mask(signs, j); }, [&](int j) { return scale_pair(sc, scale_sel_16_u16, j); });
        for (int c = 0; c < NC; c++) scale[c] = 0.125f * h2f(a.d) * y[c]->d;
    }
    template <int NC> static void block(const block_iq2_s & a, const block_q8_K * const * y, __m512i * isum, float * scale) {
        const uint64_t qh = load_u64(a.qh);
        const __mmask64 upper[2] = { (__mmask64) _pext_u64(qh, 0x5555555555555555ULL), (__mmask64) _pext_u64(qh, 0xAAAAAAAAAAAAAAAAULL) };
        __m512i l, h;
        lookup(iq2s_bytes, _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *) a.qs)), upper, l, h);
        finish<NC>(a, l, h, in_order_sel, y, isum, scale);
    }
    template <int NC>
    static void pair(const block_iq2_s * a, const block_q8_K * const * y0, const block_q8_K * const * y1, __m512i * isum0, __m512i * isum1, float * scale0,
                     float * scale1) {
        const uint64_t qh0 = load_u64(a[0].qh), qh1 = load_u64(a[1].qh);
        const __mmask64 upper[2] = {
            (__mmask64) (_pext_u64(qh0, 0x5555555555555555ULL) | _pext_u64(qh1, 0x5555555555555555ULL) << 32),
            (__mmask64) (_pext_u64(qh0, 0xAAAAAAAAAAAAAAAAULL) | _pext_u64(qh1, 0xAAAAAAAAAAAAAAAAULL) << 32),
        };
        __m512i l, h;
        lookup(iq2s_bytes, _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *) a[0].qs)), _mm256_loadu_si256((const __m256i *) a[1].qs), 1),
               upper, l, h);
        finish<NC>(a[0], l, h, in_order_sel, y0, isum0, scale0);
        finish<NC>(a[1], l, h, second_sel, y1, isum1, scale1);
    }
};

// IQ3_XXS: 64 index bytes (4 values each), then per sub-block a u32 of signs and scale.
struct iq3_xxs_kernel {
    template <int NC> static void block(const block_iq3_xxs & a, const block_q8_K * const * y, __m512i * isum, float * scale) {
        __m512i l, h;
        lookup(iq3xxs_bytes, _mm512_loadu_si512(a.qs), nullptr, l, h);
        const __m512i aux = _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *) (a.qs + QK_K / 4)));
        const sign_masks signs(xxs_sign_codes<0>(aux));
        const xxs_scales<0> sc(aux);
        products<NC>(y, isum, [&](int j) { return points(l, h, in_order_sel2.j[j], SHIFTS_2X4X3, iq3xxs_levels); },
                     [&](int j) { return signs.mask(j); }, [&](int j) { return sc.values(j); });
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

// Kernels with pairs = true also decode two super-blocks at once (pair), sharing a lookup.
template <typename K, typename = void> struct decodes_pairs : std::false_type {};
template <typename K> struct decodes_pairs<K, std::void_t<decltype(K::pairs)>> : std::bool_constant<K::pairs> {};

// The driver: K::block<NC> decodes super-block i once and gives each column's integer sums (16
// s32 lanes) and float scale; the scaled sums accumulate in one float register per column, in
// block order (pairs too, so both paths give the same bits).
template <typename BA, typename K, int NC>
void dot_super_cols(int64_t n, const void * va, const void * vb, size_t ldb, float * s, size_t lds) {
    const BA * a = (const BA *) va;
    __m512 acc[NC];
    for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    const auto columns = [&](int64_t i, const block_q8_K ** y) {
        for (int c = 0; c < NC; c++) y[c] = (const block_q8_K *) ((const char *) vb + c * ldb) + i;
    };
    const auto accumulate = [&](const __m512i * isum, const float * scale) {
        for (int c = 0; c < NC; c++) acc[c] = _mm512_fmadd_ps(_mm512_set1_ps(scale[c]), _mm512_cvtepi32_ps(isum[c]), acc[c]);
    };
    int64_t i = 0;
    if constexpr (decodes_pairs<K>::value) {
        for (; i + 1 < n / QK_K; i += 2) {
            prefetch_ahead(a + i);
            prefetch_ahead(a + i + 1);
            const block_q8_K * y0[NC], * y1[NC];
            columns(i, y0);
            columns(i + 1, y1);
            __m512i isum0[NC], isum1[NC];
            float scale0[NC], scale1[NC];
            K::template pair<NC>(a + i, y0, y1, isum0, isum1, scale0, scale1);
            accumulate(isum0, scale0);
            accumulate(isum1, scale1);
        }
    }
    for (; i < n / QK_K; i++) {
        prefetch_ahead(a + i);
        const block_q8_K * y[NC];
        columns(i, y);
        __m512i isum[NC];
        float scale[NC];
        K::template block<NC>(a[i], y, isum, scale);
        accumulate(isum, scale);
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
