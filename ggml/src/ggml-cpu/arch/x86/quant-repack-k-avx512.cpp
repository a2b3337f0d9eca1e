// quant-repack-k-avx512.cpp - the 512-bit VNNI kernels of the layouts with Q8_K activations repacked
// 16 rows at a time (quant-repack.h: Q4_K, Q5_K, Q6_K, IQ4_XS x16), every lane a row: one template over the type,
// the same integers and float steps as the references (quant-repack-k.cpp), so the same bits.
//
// Per super-block and column: first the mins (Q4_K, Q5_K: vpdpwssd of (m, m) pairs against
// Q8_K's 16-value sums, then acc -= (dmin * d_a) * msum) or the offset (Q6_K: the integer sum
// starts at -32 * sum_j sc_j * bsums[j], vpdpwssd of (-32 sc_j, -32 sc_j+1) pairs against the
// bsums pair; IQ4_XS the same with -128 and the 32-value sums); then the values, in units: a unit decodes S groups of K registers of unsigned
// levels (each register one 4-byte column of the 16 rows), shared by all the columns of a pass,
// and each group meets 4 activation bytes per register through vpdpbusd and is multiplied by its
// sub-block's scales (vpmulld); last acc += (d * d_a) * isum. What differs per type (the traits):
//  - Q4_K: unit p = sub-blocks 2p (low nibbles) and 2p + 1 (high nibbles) of byte columns
//    8p .. 8p + 7, 2 groups of 8; 16 decoded registers leave room for 4 columns per pass.
//  - Q5_K: unit j = sub-block j (nibble j % 2 | bit j of the qh byte << 4; qh column k % 8 lies
//    byte for byte over qs column k), 1 group of 8; all 8 columns in one pass.
//  - Q6_K: unit (h, gg, p) = quarters p and p + 2 of half h, values 16 gg .. 16 gg + 15, i.e.
//    sub-blocks 8h + 2p + gg and + 4, 2 groups of 4 (ql nibble | 2 qh bits << 4), in the order
//    the block stores them; all 8 columns in one pass (26 vs 34 ns per super-block and column at
//    8 columns than in two passes of 4: each decoded register meets 8 columns).
//  - IQ4_XS: unit p = sub-blocks 2p and 2p + 1 (scale ls - 32), a group each: its 4 byte columns'
//    low nibbles (activations 32j + 4k) then their high nibbles (32j + 16 + 4k), every nibble
//    turned into its level + 128 (1..241, unsigned as vpdpbusd wants) by one byte-table lookup;
//    the shape of Q4_K's units (16 decoded registers), so 4 columns per pass as it.
// Where the time goes (Q6_K, 8 columns, per super-block and column): 64 vpdpbusd with their
// broadcast loads, 16 vpmulld (2 uops each), 8 vpdpwssd; the decoding is shared by the columns.
// Software prefetch (PREFETCH bytes ahead) from GGML_REPACK_PREFETCH_MIN_COLS columns; the _pf
// kernels (the AMX set's, for Xeons) prefetch PREFETCH_1 bytes ahead for fewer columns too: tg64,
// TinyLlama, 2 threads, alternated: Q4_K_M 28.6 -> 30.5 tokens/s, Q5_K_M 22.8 -> 26.7, Q6_K 20.9
// -> 23.5 at 1 KiB ahead; 4-16 KiB ahead lost 10-30%. Those prefetch into L2 (prefetcht1): tg32,
// alternated, 3 pairs, Q4_K_M 29.7-31.0 -> 30.2-31.1, Q6_K 23.6-24.5 -> 24.9-25.5 against
// prefetcht0 (2 and 4 KiB ahead lost 1-3% and 8-11% there too). Then each unit prefetching its share
// of the lines 2 KiB ahead, instead of the whole super-block at its start (36-53 prefetches in a
// burst, holding the fill buffers the demand loads need): tg48, alternated, 3 rounds, Q4_K_M
// 28.1-28.2 -> 30.5-32.6, Q6_K 24.0-24.3 -> 26.1-26.7 (tg32), Q5_K_M 27.0-27.6 -> 27.7-28.1.
// Then 4 KiB ahead instead of 2: these kernels do 3-5 times Q8_0's work per byte, so the
// out-of-order window reaches less far ahead by itself, and when the machine's memory is busy (its
// latency up, membw 18-19 GB/s) 2 KiB no longer covers it: tg64, alternated, 5 pairs, Q4_K_M
// +6.4%, Q5_K_M +6.7%, Q6_K +11% (6 KiB); 4, 6 and 8 KiB within 2% of each other there. Q6_K
// 6 KiB ahead (its super-blocks are 3360 bytes): 2 threads streaming TinyLlama's matrices, 21
// alternated passes, twice: +3.4% and +4.1% against 4 KiB (Q4_K, Q5_K: within 1%).
// On a Zen 4, for one column, prefetching
// 2 KiB ahead cost one thread (bench-quant) 10% with Q4_K and 29%
// with Q5_K; all of a Q6_K block 1 or 2 blocks ahead, 27-38% (Q6_K: none at all).
#include "kernels-x86.h"

#if defined(GGML_SIMD_AVX512) && defined(__AVX512VNNI__)

#include "simd-avx512.h"
#include <string.h>

#include <type_traits>
#include <utility>

namespace ggml_cpu_avx512 {
namespace {

inline __m512i bcast4(const void * p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

// acc + vpdpbusd(w, 4 bytes at p broadcast), the broadcast folded into the instruction
// ({1to16}), which GCC does not do here by itself: one fused uop instead of a vpbroadcastd
// beside it, 64 fewer a super-block and column (Q4_K, 1 column, 2 threads: in cache +12%,
// streaming +1.8%; Q5_K +2%).
inline __m512i dpbusd_bcast(__m512i acc, __m512i w, const void * p) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t *) p));
    return acc;
}

inline __m512i load64(const void * p) { return _mm512_loadu_si512(p); }

// 16 bytes (one per row) to 32-bit lanes.
inline __m512i bytes_to_lanes(const uint8_t * p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *) p)); }

// vpternlogd immediate of f(a, b, c): bit (a << 2 | b << 1 | c) of the table.
template <typename F> constexpr int ternary_imm(F f) {
    int imm = 0;
    for (int i = 0; i < 8; i++) imm |= f((i >> 2) & 1, (i >> 1) & 1, i & 1) << i;
    return imm;
}
constexpr int OR_AND = ternary_imm([](int a, int b, int c) { return a | (b & c); });  // a | (b & c)
constexpr int SELECT = ternary_imm([](int a, int b, int c) { return c ? a : b; });    // (a & c) | (b & ~c)
constexpr int AND_OR = ternary_imm([](int a, int b, int c) { return (a & c) | b; });   // (a & c) | b

typedef const block_q8_Kx * const * Cols;  // the columns' super-blocks

// ---- the types ------------------------------------------------------------------------------
// Q4_K / Q5_K: acc -= (dmin * d_a) * sum_j m_j * bsum32_j, the mins first; the values' sums
// start at zero.
// Sub-blocks 2p and 2p + 1 per vpdpwssd: lane r holds (m_2p, m_2p+1) as 16-bit halves, against
// the column's (bsums32[2p], bsums32[2p + 1]): 4 of them and 6 operations of decoding a pair,
// instead of 8 and 14 with (m_j, m_j) against bsums[2j], bsums[2j + 1] (the same integer sum).
template <int NC, typename G>
inline void k4_mins(const G * g, Cols y, __m512i * isum, __m512 * acc) {
    const __m512i m_hi = _mm512_set1_epi32(0x00300030), m_lo = _mm512_set1_epi32(0x000F000F);
    constexpr int OR_AND_C = ternary_imm([](int a, int b, int c) { return (a | b) & c; });
    __m512i msum[NC];
    for (int c = 0; c < NC; c++) msum[c] = _mm512_setzero_si512();
    for (int p = 0; p < 4; p++) {
        // High 2 bits: bits 6-7 of sm to bits 4-5 of each half; low 4 bits: mlo's two nibbles to
        // bits 0-3 of each half.
        const __m512i s0 = bytes_to_lanes(g->sm[2 * p]), s1 = bytes_to_lanes(g->sm[2 * p + 1]);
        const __m512i hi = _mm512_ternarylogic_epi32(_mm512_srli_epi32(s0, 2), _mm512_slli_epi32(s1, 14), m_hi, OR_AND_C);
        const __m512i l = bytes_to_lanes(g->mlo[p]);
        const __m512i lo = _mm512_ternarylogic_epi32(l, _mm512_slli_epi32(l, 12), m_lo, OR_AND_C);
        const __m512i m2 = _mm512_or_si512(hi, lo);
        for (int c = 0; c < NC; c++) msum[c] = _mm512_dpwssd_epi32(msum[c], m2, bcast4(y[c]->bsums32 + 2 * p));
    }
    const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) g->dmin));
    for (int c = 0; c < NC; c++) {
        const __m512 f = _mm512_mul_ps(dmin, _mm512_set1_ps(y[c]->d));
        acc[c] = _mm512_fnmadd_ps(f, _mm512_cvtepi32_ps(msum[c]), acc[c]);
        isum[c] = _mm512_setzero_si512();
    }
}

// The scales of sub-block j, one per lane.
template <typename G> inline __m512i k4_scale(const G * g, int j) {
    return _mm512_and_si512(bytes_to_lanes(g->sm[j]), _mm512_set1_epi32(63));
}

// What Q4_K and Q5_K share: the mins first.
struct K4 {
    template <int NC, typename G> static void begin(const G * g, Cols y, __m512i * isum, __m512 * acc) { k4_mins<NC>(g, y, isum, acc); }
};

struct Q4K : K4 {
    typedef block_q4_Kx16 G;
    static constexpr int PASS = 4, UNITS = 4, S = 2, K = 8, PREFETCH = 2048, PREFETCH_1 = 4096;
    static constexpr bool UNROLL = true;  // tg48 Q4_K_M, alternated: 32.8-34.3 -> 34.8-35.3
    static constexpr int act(int p, int s) { return 64 * p + 32 * s; }
    // The high nibbles stay in place (16 times their value): their sums, multiples of 16, are
    // shifted down once per column (HI_SHIFT) instead of every register once per unit (the
    // shifts share port 0 with vpdpbusd).
    static constexpr int HI_SHIFT = 4, CHAINS_FEW_COLS = 2;
    template <int NC, typename U> static void decode(const G * g, U u, __m512i (&w)[S][K], __m512i (&sc)[S]) {
        const int p = u;
        const __m512i m4 = _mm512_set1_epi8(0x0F), m4h = _mm512_set1_epi8((char) 0xF0);
        for (int k = 0; k < 8; k++) {
            const __m512i v = load64(g->qs[8 * p + k]);
            w[0][k] = _mm512_and_si512(v, m4);
            w[1][k] = _mm512_and_si512(v, m4h);
        }
        sc[0] = k4_scale(g, 2 * p);
        sc[1] = k4_scale(g, 2 * p + 1);
    }
};

// Bit J of every qh byte moved to bit 4 of its byte (other bits: garbage, masked by the caller).
// 16-bit shifts by at most 4: a byte's bit 4 comes from its own byte.
template <int J> inline __m512i bit_to_4(__m512i h) {
    if constexpr (J < 4) return _mm512_slli_epi16(h, 4 - J);
    else if constexpr (J == 4) return h;
    else return _mm512_srli_epi16(h, J - 4);
}

struct Q5K : K4 {
    typedef block_q5_Kx16 G;
    static constexpr int PASS = 8, UNITS = 8, S = 1, K = 8, PREFETCH = 2048, PREFETCH_1 = 4096;
    static constexpr bool UNROLL = true;
    [[maybe_unused]] static constexpr int HI_SHIFT = 0, CHAINS_FEW_COLS = 1;
    static constexpr int act(int j, int) { return 32 * j; }
    template <int NC, typename U> static void decode(const G * g, U, __m512i (&w)[S][K], __m512i (&sc)[S]) {
        constexpr int J = U::value;
        const __m512i m4 = _mm512_set1_epi8(0x0F), m16 = _mm512_set1_epi8(0x10);
        for (int k = 0; k < 8; k++) {
            const __m512i v = load64(g->qs[8 * (J / 2) + k]);
            const __m512i h = load64(g->qh[k]);
#if defined(__GFNI__)
            if constexpr (NC <= 2) {
                // Bit J of each qh byte alone at bit 4 in one affine map over GF(2) (bit 4 of the
                // result is row 3 of the matrix, byte 3): no 16-bit shift, nothing else to clear.
                // One column is decode-bound: 8% faster; 8 columns are vpdpbusd-bound and lose 3%
                // to it (the affine map takes the same ports).
                const __m512i hb = _mm512_gf2p8affine_epi64_epi8(h, _mm512_set1_epi64((long long) (1ull << J) << 24), 0);
                w[0][k] = _mm512_ternarylogic_epi32((J & 1) ? _mm512_srli_epi16(v, 4) : v, hb, m4, AND_OR);
                continue;
            }
#endif
            const __m512i nib = (J & 1) ? _mm512_and_si512(_mm512_srli_epi16(v, 4), m4) : _mm512_and_si512(v, m4);
            w[0][k] = _mm512_ternarylogic_epi32(nib, bit_to_4<J>(h), m16, OR_AND);
        }
        sc[0] = k4_scale(g, J);
    }
};

// Q5_K for 1-2 columns (generation): unit p = sub-blocks 2p and 2p + 1, as Q4_K's, so that each qs
// and qh register is loaded once for both nibbles instead of once per sub-block (16 loads fewer a
// pair of sub-blocks); from 3 columns Q5K's single sub-blocks leave room for 8 columns' sums.
struct Q5KPairs : K4 {
    typedef block_q5_Kx16 G;
    [[maybe_unused]] static constexpr int PASS = 2, UNITS = 4, S = 2, K = 8, PREFETCH = Q5K::PREFETCH, PREFETCH_1 = Q5K::PREFETCH_1;
    static constexpr bool UNROLL = true;
    static constexpr int HI_SHIFT = 0, CHAINS_FEW_COLS = 1;  // the two sub-blocks are two chains
    static constexpr int act(int p, int s) { return 64 * p + 32 * s; }
    template <int NC, typename U> static void decode(const G * g, U, __m512i (&w)[S][K], __m512i (&sc)[S]) {
        constexpr int J = 2 * U::value;
        const __m512i m4 = _mm512_set1_epi8(0x0F);
        for (int k = 0; k < 8; k++) {
            const __m512i v = load64(g->qs[4 * J + k]);
            const __m512i h = load64(g->qh[k]);
#if defined(__GFNI__)
            // Bits J and J + 1 of each qh byte alone at bit 4 (see Q5K::decode).
            const __m512i h0 = _mm512_gf2p8affine_epi64_epi8(h, _mm512_set1_epi64((long long) (1ull << J) << 24), 0);
            const __m512i h1 = _mm512_gf2p8affine_epi64_epi8(h, _mm512_set1_epi64((long long) (2ull << J) << 24), 0);
            w[0][k] = _mm512_ternarylogic_epi32(v, h0, m4, AND_OR);
            w[1][k] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(v, 4), h1, m4, AND_OR);
#else
            const __m512i m16 = _mm512_set1_epi8(0x10);
            w[0][k] = _mm512_ternarylogic_epi32(_mm512_and_si512(v, m4), bit_to_4<J>(h), m16, OR_AND);
            w[1][k] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), bit_to_4<J + 1>(h), m16, OR_AND);
#endif
        }
        sc[0] = k4_scale(g, J);
        sc[1] = k4_scale(g, J + 1);
    }
};

// IQ4_XS: the scale ls - 32 of sub-block j, one per lane (low 4 bits from nibble j % 2 of
// scales_l[j / 2], high 2 from bits 2 (j % 4) of scales_h[j / 4]).
inline __m512i iq4_scale(const block_iq4_xsx16 * g, int j) {
    const __m512i l = bytes_to_lanes(g->scales_l[j / 2]), h = bytes_to_lanes(g->scales_h[j / 4]);
    const __m512i lo = (j & 1) ? _mm512_srli_epi32(l, 4) : _mm512_and_si512(l, _mm512_set1_epi32(15));
    const __m512i hi = _mm512_srli_epi32(_mm512_slli_epi32(h, 4), 2 * (j % 4));  // bits 4, 5 (and above: masked)
    return _mm512_sub_epi32(_mm512_ternarylogic_epi32(lo, hi, _mm512_set1_epi32(0x30), OR_AND), _mm512_set1_epi32(32));
}

// The levels + 128 of the low nibbles of v's bytes (the bits above them are ignored): with VBMI
// one vpermb over the table repeated 4 times (it reads 6 bits), else a mask and vpshufb.
inline __m512i iq4_levels(__m512i v, __m512i table) {
#if defined(__AVX512VBMI__)
    return _mm512_permutexvar_epi8(v, table);
#else
    return _mm512_shuffle_epi8(table, _mm512_and_si512(v, _mm512_set1_epi8(0x0F)));
#endif
}

struct IQ4XS {
    typedef block_iq4_xsx16 G;
    static constexpr int PASS = 4, UNITS = 4, S = 2, K = 8, PREFETCH = Q4K::PREFETCH, PREFETCH_1 = Q4K::PREFETCH_1;
    static constexpr bool UNROLL = true;
    static constexpr int HI_SHIFT = 0, CHAINS_FEW_COLS = 2;
    // Offset: isum = -128 * sum_j sc_j * bsum32_j, two sub-blocks per vpdpwssd (-128 sc: -3968 .. 4096).
    template <int NC> static void begin(const G * g, Cols y, __m512i * isum, __m512 *) {
        for (int c = 0; c < NC; c++) isum[c] = _mm512_setzero_si512();
        for (int p = 0; p < 4; p++) {
            const __m512i pair = _mm512_mask_blend_epi16(0xAAAAAAAA, iq4_scale(g, 2 * p), _mm512_slli_epi32(iq4_scale(g, 2 * p + 1), 16));
            const __m512i neg = _mm512_mullo_epi16(pair, _mm512_set1_epi16(-128));
            for (int c = 0; c < NC; c++) isum[c] = _mm512_dpwssd_epi32(isum[c], neg, bcast4(y[c]->bsums32 + 2 * p));
        }
    }
    static constexpr int act(int p, int s) { return 64 * p + 32 * s; }
    template <int NC, typename U> static void decode(const G * g, U u, __m512i (&w)[S][K], __m512i (&sc)[S]) {
        const int p = u;
        const __m128i t = _mm_xor_si128(_mm_loadu_si128((const __m128i *) kvalues_iq4nl), _mm_set1_epi8((char) 0x80));  // + 128
        const __m512i table = _mm512_broadcast_i32x4(t);
        for (int s = 0; s < 2; s++) {
            for (int k = 0; k < 4; k++) {
                const __m512i v = load64(g->qs[4 * (2 * p + s) + k]);
                w[s][k] = iq4_levels(v, table);
                w[s][4 + k] = iq4_levels(_mm512_srli_epi16(v, 4), table);
            }
            sc[s] = iq4_scale(g, 2 * p + s);
        }
    }
};

// The traits a kernel of NC columns runs with.
template <typename T, int NC> struct ForCols { typedef T type; };
template <int NC> struct ForCols<Q5K, NC> { typedef typename std::conditional<NC <= 2, Q5KPairs, Q5K>::type type; };

struct Q6K {
    typedef block_q6_Kx16 G;
    static constexpr int PASS = 8, UNITS = 8, S = 2, K = 4;
    static constexpr int PREFETCH = 0, PREFETCH_1 = 6144;
    static constexpr bool UNROLL = true;
    static constexpr int HI_SHIFT = 0, CHAINS_FEW_COLS = 1;
    // Offset: isum = -32 * sum_j sc_j * bsums[j], two sub-blocks per vpdpwssd.
    template <int NC> static void begin(const G * g, Cols y, __m512i * isum, __m512 *) {
        // Interleaves two rows of 16 int16 (scales of sub-blocks j and j + 1) into (j, j + 1) pairs.
        const __m512i pair_idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                                  23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
        const __m512i minus32 = _mm512_set1_epi16(-32);
        for (int c = 0; c < NC; c++) isum[c] = _mm512_setzero_si512();
        for (int j = 0; j < QK_K / 16; j += 2) {
            const __m512i sc = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *) g->scales[j]));
            const __m512i pairs = _mm512_mullo_epi16(_mm512_permutexvar_epi16(pair_idx, sc), minus32);
            for (int c = 0; c < NC; c++) isum[c] = _mm512_dpwssd_epi32(isum[c], pairs, bcast4(y[c]->bsums + j));
        }
    }
    // Unit u = (h, gg, p): activations 128 h + 32 p + 16 gg (quarter p), + 64 (quarter p + 2).
    static constexpr int act(int u, int s) { return 128 * (u / 4) + 32 * (u % 2) + 16 * (u / 2 % 2) + 64 * s; }
    template <int NC, typename U> static void decode(const G * g, U, __m512i (&w)[S][K], __m512i (&sc)[S]) {
        constexpr int h = U::value / 4, gg = U::value / 2 % 2, p = U::value % 2;
        const __m512i m0F = _mm512_set1_epi8(0x0F), m33 = _mm512_set1_epi8(0x33);
        for (int k = 0; k < 4; k++) {
            const __m512i qh = load64(g->q[ggml_q6_Kx16_qh(8 * h + 4 * gg + k)]);
            const __m512i ql = load64(g->q[ggml_q6_Kx16_ql(16 * h + 8 * p + 4 * gg + k)]);
            // Bits 2p, 2p + 1 (quarter p) at 0-1, bits 2p + 4, 2p + 5 (quarter p + 2) at 4-5.
            const __m512i f = _mm512_and_si512(p ? _mm512_srli_epi16(qh, 2) : qh, m33);
            w[0][k] = _mm512_ternarylogic_epi32(ql, _mm512_slli_epi16(f, 4), m0F, SELECT);
            w[1][k] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(ql, 4), f, m0F, SELECT);
        }
        constexpr int j0 = 8 * h + 2 * p + gg;
        sc[0] = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *) g->scales[j0]));
        sc[1] = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *) g->scales[j0 + 4]));
    }
};

// ---- the kernel -----------------------------------------------------------------------------
// One unit of a super-block: decoded once, met by every column of the pass.
// Unit u's share of the super-block's lines prefetched into L2, PF bytes ahead (PF > 0): spread
// over the units, not all 36-53 lines at the super-block's start (see the top).
template <typename T, int PF, typename U> inline void prefetch_share(const typename T::G * g, U u) {
    if constexpr (PF > 0) {
        constexpr int size = (int) sizeof(*g);
        const int lo = size * (int) u / T::UNITS / 64 * 64, hi = size * ((int) u + 1) / T::UNITS / 64 * 64;
        for (int l = lo; l < hi; l += 64) _mm_prefetch((const char *) g + PF + l, _MM_HINT_T1);
        if (size % 64 != 0 && (int) u == T::UNITS - 1) _mm_prefetch((const char *) g + PF + size - 1, _MM_HINT_T1);
    }
}

template <typename T, int NC, int PF, typename U>
inline void unit(const typename T::G * g, Cols y, __m512i * isum, U u) {
    prefetch_share<T, PF>(g, u);
    __m512i w[T::S][T::K], sc[T::S];
    T::template decode<NC>(g, u, w, sc);
    for (int c = 0; c < NC; c++) {
        const int8_t * q = y[c]->qs;
        // Q4_K, 1-2 columns: two chains of vpdpbusd per group, so the core does not wait on their
        // latency (integer sums: any split gives the same). bench-quant, 1 column in cache: Q4_K
        // 33.5 -> 35.6-38.5 GB/s; Q5_K and Q6_K lost 4% and 12% with it.
        constexpr int CH = NC <= 2 ? T::CHAINS_FEW_COLS : 1;
        __m512i d[T::S], e[T::S];
        for (int s = 0; s < T::S; s++) d[s] = e[s] = _mm512_setzero_si512();
        for (int k = 0; k < T::K; k++) {
            for (int s = 0; s < T::S; s++) {
                if (CH == 2 && k % 2) e[s] = dpbusd_bcast(e[s], w[s][k], q + T::act(u, s) + 4 * k);
                else d[s] = dpbusd_bcast(d[s], w[s][k], q + T::act(u, s) + 4 * k);
            }
        }
        if constexpr (CH == 2) {
            for (int s = 0; s < T::S; s++) d[s] = _mm512_add_epi32(d[s], e[s]);
        }
        if constexpr (T::S == 2) {
            if constexpr (T::HI_SHIFT > 0) d[1] = _mm512_srai_epi32(d[1], T::HI_SHIFT);  // exact: multiples of 2^HI_SHIFT
            isum[c] = _mm512_add_epi32(isum[c], _mm512_add_epi32(_mm512_mullo_epi32(d[0], sc[0]), _mm512_mullo_epi32(d[1], sc[1])));
        } else {
            isum[c] = _mm512_add_epi32(isum[c], _mm512_mullo_epi32(d[0], sc[0]));
        }
    }
}

template <typename T, int NC, int PF, int... U>
inline void units(const typename T::G * g, Cols y, __m512i * isum, std::integer_sequence<int, U...>) {
    (unit<T, NC, PF>(g, y, isum, std::integral_constant<int, U>()), ...);
}

// 16 rows (lanes) against NC columns; ALWAYS: software prefetch for fewer columns too.
template <typename T, int NC, bool ALWAYS>
void gemm(int64_t nb, const typename T::G * a, const char * b, size_t ldb, float * s, size_t lds) {
    __m512 acc[NC];
    for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const typename T::G * g = a + i;
        // Prompts: the whole super-block into L1 at its start; generation (ALWAYS): into L2, spread.
        // The AVX512 set (not ALWAYS) bursts for one column too: on a Zen 5 (2 threads, TinyLlama
        // 1.1B, tg64, 3 alternated rounds) IQ4_XS went from 47.9 to 69.5 tokens/s and Q4_K_M from
        // 48.8 to 61.3, where a Zen 4's single thread had lost 10-29% (bench-quant, above).
        constexpr int burst = NC >= GGML_REPACK_PREFETCH_MIN_COLS || !ALWAYS ? T::PREFETCH : 0;
        constexpr int spread = NC < GGML_REPACK_PREFETCH_MIN_COLS && ALWAYS ? T::PREFETCH_1 : 0;
        if constexpr (burst > 0) {
            for (int l = 0; l < (int) sizeof(*g); l += 64) _mm_prefetch((const char *) g + burst + l, _MM_HINT_T0);
        }
        const block_q8_Kx * y[NC];
        for (int c = 0; c < NC; c++) y[c] = (const block_q8_Kx *) (b + c * ldb) + i;

        __m512i isum[NC];
        T::template begin<NC>(g, y, isum, acc);
        if constexpr (T::UNROLL) {
            units<T, NC, spread>(g, y, isum, std::make_integer_sequence<int, T::UNITS>());
        } else {
            for (int u = 0; u < T::UNITS; u++) unit<T, NC, spread>(g, y, isum, u);
        }
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) g->d));
        for (int c = 0; c < NC; c++) {
            const __m512 f = _mm512_mul_ps(d, _mm512_set1_ps(y[c]->d));
            acc[c] = _mm512_fmadd_ps(f, _mm512_cvtepi32_ps(isum[c]), acc[c]);
        }
    }
    for (int c = 0; c < NC; c++) _mm512_storeu_ps(s + c * lds, acc[c]);
}

// nc (<= 8) columns in passes of at most T::PASS.
template <typename T, bool ALWAYS, int... N>
void run(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds, std::integer_sequence<int, N...>) {
    typedef void (*kernel_fn)(int64_t, const typename T::G *, const char *, size_t, float *, size_t);
    static const kernel_fn kernels[] = { gemm<typename ForCols<T, N + 1>::type, N + 1, ALWAYS>... };
    GGML_ASSERT(nc >= 1 && nc <= GGML_REPACK_MAX_COLS);
    for (int c0 = 0; c0 < nc; c0 += T::PASS) {
        const int n = nc - c0 < T::PASS ? nc - c0 : T::PASS;
        kernels[n - 1](nb, (const typename T::G *) a, (const char *) b + c0 * ldb, ldb, s + c0 * lds, lds);
    }
}

template <typename T, bool ALWAYS = false>
void gemm_kx16(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) {
    run<T, ALWAYS>(nb, a, b, ldb, nc, s, lds, std::make_integer_sequence<int, T::PASS>());
}

}  // namespace

void repack_gemm_q4_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) { gemm_kx16<Q4K>(nb, a, b, ldb, nc, s, lds); }
void repack_gemm_q5_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) { gemm_kx16<Q5K>(nb, a, b, ldb, nc, s, lds); }
void repack_gemm_q6_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) { gemm_kx16<Q6K>(nb, a, b, ldb, nc, s, lds); }
void repack_gemm_q4_K_pf(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) { gemm_kx16<Q4K, true>(nb, a, b, ldb, nc, s, lds); }
void repack_gemm_q5_K_pf(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) { gemm_kx16<Q5K, true>(nb, a, b, ldb, nc, s, lds); }
void repack_gemm_q6_K_pf(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) { gemm_kx16<Q6K, true>(nb, a, b, ldb, nc, s, lds); }
void repack_gemm_iq4_xs(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) { gemm_kx16<IQ4XS>(nb, a, b, ldb, nc, s, lds); }
void repack_gemm_iq4_xs_pf(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) { gemm_kx16<IQ4XS, true>(nb, a, b, ldb, nc, s, lds); }

}  // namespace ggml_cpu_avx512

#endif  // GGML_SIMD_AVX512 && __AVX512VNNI__
