// quant-dot-iq-avx512.cpp - 512-bit dot products of the IQ grid types whose grids have 256
// points (IQ2_XXS, IQ3_XXS) with Q8_K, decoding the grid in registers (AVX512 VBMI). Held to the
// scalar references of quant-dot-iq.cpp like the AVX2 kernels, which serve the other types.
//
// Why: the AVX2 kernels load each grid point from memory (one load and one insert per 8 or 4
// values), and on 2 cores that, not the memory, bounds token generation (bench-quant: 4.9 GB/s of
// IQ2_XXS weights per thread in cache). Here a point is found by byte permutes instead:
//   - the packed grid (2 bits per coordinate for IQ2_XXS, 3 for IQ3_XXS; 16 bits a point) is
//     split into its low and high bytes, 256 each, four registers per byte; two vpermi2b and a
//     blend on bit 7 of the index look up 64 indices' bytes at once;
//   - vpermt2b puts each point's two bytes at the start of the u64 lane its values go to,
//     vpmultishiftqb moves each coordinate's bits to the bottom of its byte, and vpermb on the
//     low 6 bits (a 64-entry table repeating the levels) maps codes to levels.
// The signs become mask registers, applied by a masked subtraction (y -> -y); vpmaddubsw and
// vpdpwssd sum the products with the sub-block's scale, as in the AVX2 kernels. Per column the
// instructions are those of one column, so a tile of columns gives the single dot's bits.
#include "kernels-x86.h"

#if defined(GGML_SIMD_AVX512) && defined(__AVX512VNNI__) && defined(__AVX512VBMI__)

#include "../../../quants-iq-grids.h"
#include "simd-avx512.h"

#include <type_traits>

namespace ggml_cpu_avx512 {
namespace {

inline float h2f(ggml_fp16_t h) { return _cvtsh_ss(h); }

// A 256-point packed grid as byte tables: lo[i] / hi[i] the low / high byte of point i.
struct grid_bytes {
    alignas(64) uint8_t lo[256];
    alignas(64) uint8_t hi[256];
};
constexpr grid_bytes split(const uint16_t (&packed)[256]) {
    grid_bytes g{};
    for (int i = 0; i < 256; i++) {
        g.lo[i] = (uint8_t) (packed[i] & 0xFF);
        g.hi[i] = (uint8_t) (packed[i] >> 8);
    }
    return g;
}
constexpr grid_bytes iq2xxs_bytes = split(ggml_iq::iq2xxs_packed);
constexpr grid_bytes iq3xxs_bytes = split(ggml_iq::iq3xxs_packed);

// A level table for vpermb: entry e is levels[e mod NL] (the code in the low bits, whatever the
// bits above it up to bit 5 are).
struct byte_table {
    alignas(64) uint8_t v[64];
};
template <size_t NL> constexpr byte_table level_table(const int8_t (&levels)[NL]) {
    byte_table t{};
    for (int e = 0; e < 64; e++) t.v[e] = (uint8_t) levels[e % NL];
    return t;
}
constexpr byte_table iq2_levels = level_table(ggml_iq::levels_iq2);
constexpr byte_table iq3_levels = level_table(ggml_iq::levels_iq3xxs);

// The vpermt2b selections of points(), one per 64 values j: IQ2_XXS's u64 lane k takes point
// l = k % 4 of sub-block s = 2 j + k / 4 (at byte 8 s + l); IQ3_XXS's takes points 16 j + 2 k and
// 16 j + 2 k + 1 (their bytes in that order).
struct selections {
    byte_table j[4];
};
constexpr selections iq2_xxs_selections() {
    selections t{};
    for (int j = 0; j < 4; j++) {
        for (int k = 0; k < 8; k++) {
            const int p = 8 * (2 * j + k / 4) + k % 4;
            t.j[j].v[8 * k] = (uint8_t) p;
            t.j[j].v[8 * k + 1] = (uint8_t) (64 + p);
        }
    }
    return t;
}
constexpr selections iq3_xxs_selections() {
    selections t{};
    for (int j = 0; j < 4; j++) {
        for (int k = 0; k < 8; k++) {
            const int p = 16 * j + 2 * k;
            t.j[j].v[8 * k] = (uint8_t) p;
            t.j[j].v[8 * k + 1] = (uint8_t) (64 + p);
            t.j[j].v[8 * k + 2] = (uint8_t) (p + 1);
            t.j[j].v[8 * k + 3] = (uint8_t) (64 + p + 1);
        }
    }
    return t;
}
constexpr selections iq2_xxs_sel = iq2_xxs_selections();
constexpr selections iq3_xxs_sel = iq3_xxs_selections();

inline __m512i load_table(const byte_table & t) { return _mm512_load_si512(t.v); }

// bytes[p] = the low (l) / high (h) byte of point idx[p] of grid g.
inline void lookup(const grid_bytes & g, __m512i idx, __m512i & l, __m512i & h) {
    const __mmask64 upper = _mm512_movepi8_mask(idx);  // index >= 128
    const __m512i * lo = (const __m512i *) g.lo, * hi = (const __m512i *) g.hi;
    l = _mm512_mask_blend_epi8(upper, _mm512_permutex2var_epi8(lo[0], idx, lo[1]), _mm512_permutex2var_epi8(lo[2], idx, lo[3]));
    h = _mm512_mask_blend_epi8(upper, _mm512_permutex2var_epi8(hi[0], idx, hi[1]), _mm512_permutex2var_epi8(hi[2], idx, hi[3]));
}

// Codes of 64 values: u64 lane k gets the point bytes at positions sel[8 k + ...] of (l | h)
// (sel: index < 64 from l, 64 + index from h), then each value's code to the bottom of its byte
// (shifts: the bit offset of each byte's code) and through the level table.
inline __m512i points(__m512i l, __m512i h, __m512i sel, __m512i shifts, __m512i levels) {
    return _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(shifts, _mm512_permutex2var_epi8(l, sel, h)), levels);
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

// The signs and scales of a super-block of IQ2_XXS / IQ3_XXS: u64 lane s of aux holds sub-block
// s's u32 of four 7-bit sign codes (bits 7 l) and a 4-bit scale (bits 28..31) at bit BIT0.
struct xxs_signs_scales {
    alignas(64) uint64_t masks[4];  // masks[j]: the signs of values 64 j .. 64 j + 63, bit set = negative
    __m512i sc;                     // u64 lane s: the odd scale 2 ls + 1 of sub-block s
    template <int BIT0> explicit xxs_signs_scales(__m512i aux, std::integral_constant<int, BIT0>) {
        const __m512i shifts = _mm512_set1_epi64((long long) (BIT0 | (BIT0 + 7) << 8 | (BIT0 + 14) << 16 | (BIT0 + 21) << 24));
        const __m512i codes = _mm512_multishift_epi64_epi8(shifts, aux);  // bytes 8 s + l: code l of sub-block s
        // Sign byte 4 s + l (that of values 32 s + 8 l ..) from byte 8 s + l.
        const __m512i compact = _mm512_set_epi64(0, 0, 0, 0, 0x3B3A393833323130LL, 0x2B2A292823222120LL,
                                                 0x1B1A191813121110LL, 0x0B0A090803020100LL);
        _mm512_store_si512(masks, add_parity(_mm512_permutexvar_epi8(compact, codes)));
        sc = _mm512_or_si512(_mm512_slli_epi64(_mm512_and_si512(_mm512_srli_epi64(aux, BIT0 + 28), _mm512_set1_epi64(15)), 1),
                             _mm512_set1_epi64(1));
    }
    // The scale of sub-block 2 j in s16 lanes 0..15, of 2 j + 1 in lanes 16..31.
    __m512i pair(int j) const {
        const __m512i sel = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16((short) (8 * j))), _mm256_set1_epi16((short) (8 * j + 4)), 1);
        return _mm512_permutexvar_epi16(sel, sc);
    }
    __mmask64 mask(int j) const { return _load_mask64((__mmask64 *) &masks[j]); }
};

// acc + the sums of pairs of u (unsigned weights) times y (the activations, negated where m is
// set), each pair sum times its s16 lane of sc, summed into s32 lanes.
inline __m512i dot_scaled(__m512i acc, __m512i u, __m512i y, __mmask64 m, __m512i sc) {
    const __m512i ys = _mm512_mask_sub_epi8(y, m, _mm512_setzero_si512(), y);
    return _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(u, ys), sc);
}

// IQ2_XXS: qs holds per sub-block s the u32 of its four index bytes, then its u32 of signs and
// scale; one register is the whole super-block, u64 lane s = sub-block s.
struct iq2_xxs_kernel {
    template <int NC> static void block(const block_iq2_xxs & a, const block_q8_K * const * y, __m512i * isum, float * scale) {
        const __m512i w = _mm512_loadu_si512(a.qs);
        __m512i l, h;
        lookup(iq2xxs_bytes, w, l, h);
        const xxs_signs_scales ss(w, std::integral_constant<int, 32>());
        const __m512i levels = load_table(iq2_levels);
        const __m512i shifts = _mm512_set1_epi64(0x0E0C0A0806040200LL);  // coordinate b at bits 2 b
        for (int c = 0; c < NC; c++) isum[c] = _mm512_setzero_si512();
        for (int j = 0; j < 4; j++) {
            const __m512i q = points(l, h, load_table(iq2_xxs_sel.j[j]), shifts, levels);
            const __mmask64 m = ss.mask(j);
            const __m512i sc = ss.pair(j);
            for (int c = 0; c < NC; c++) isum[c] = dot_scaled(isum[c], q, _mm512_loadu_si512(y[c]->qs + 64 * j), m, sc);
        }
        for (int c = 0; c < NC; c++) scale[c] = 0.125f * h2f(a.d) * y[c]->d;
    }
};

// IQ3_XXS: 64 index bytes (4 values each), then per sub-block a u32 of signs and scale.
struct iq3_xxs_kernel {
    template <int NC> static void block(const block_iq3_xxs & a, const block_q8_K * const * y, __m512i * isum, float * scale) {
        __m512i l, h;
        lookup(iq3xxs_bytes, _mm512_loadu_si512(a.qs), l, h);
        const __m512i aux = _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *) (a.qs + QK_K / 4)));
        const xxs_signs_scales ss(aux, std::integral_constant<int, 0>());
        const __m512i levels = load_table(iq3_levels);
        // Two points a u64 lane: coordinate b of the first at bits 3 b, of the second at 16 + 3 b.
        const __m512i shifts = _mm512_set1_epi64(0x1916131009060300LL);
        for (int c = 0; c < NC; c++) isum[c] = _mm512_setzero_si512();
        for (int j = 0; j < 4; j++) {
            const __m512i q = points(l, h, load_table(iq3_xxs_sel.j[j]), shifts, levels);
            const __mmask64 m = ss.mask(j);
            const __m512i sc = ss.pair(j);
            for (int c = 0; c < NC; c++) isum[c] = dot_scaled(isum[c], q, _mm512_loadu_si512(y[c]->qs + 64 * j), m, sc);
        }
        for (int c = 0; c < NC; c++) scale[c] = 0.25f * h2f(a.d) * y[c]->d;
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
        case GGML_TYPE_IQ3_XXS: return dot_one<block_iq3_xxs, iq3_xxs_kernel>;
        default:                return nullptr;
    }
}

ggml_quant_dot_cols_fn quant_dot_cols_iq(ggml_type type) {
    switch (type) {
        case GGML_TYPE_IQ2_XXS: return dot_cols<block_iq2_xxs, iq2_xxs_kernel>;
        case GGML_TYPE_IQ3_XXS: return dot_cols<block_iq3_xxs, iq3_xxs_kernel>;
        default:                return ggml_cpu_avx2::quant_dot_cols_iq(type);
    }
}

}  // namespace ggml_cpu_avx512

#endif
