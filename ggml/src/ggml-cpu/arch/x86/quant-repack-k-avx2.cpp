// quant-repack-k-avx2.cpp - the 256-bit kernels of the layouts with Q8_K activations repacked 16 rows
// at a time (quant-repack.h: Q4_K, Q5_K, Q6_K, IQ4_XS x16), for CPUs without AVX512: one template over the type,
// the same integers and float steps as the references (quant-repack-k.cpp), so the same bits.
//
// A register holds one 4-byte column of 8 rows, so the 16 rows are two halves. Per super-block,
// row half and column: first the mins (Q4_K, Q5_K: vpmaddwd of (m, m) pairs against Q8_K's
// 16-value sums, then acc -= (dmin * d_a) * msum) or the offset (Q6_K: the integer sum starts at
// -32 * sum_j sc_j * bsums[j], vpmaddwd of (32 sc_j, 32 sc_j+1) pairs against the bsums pair);
// then the values, in units: a unit decodes S groups of K registers of unsigned levels, shared
// by all the columns of a pass, which meet 4 activation bytes per register through vpmaddubsw.
// The 16-bit pair sums of L registers add up without overflow, and each such sum is widened and
// scaled at once by vpmaddwd against (sc, sc) int16 pairs; last acc += (d * d_a) * isum. What
// differs per type (the traits):
//  - Q4_K: unit p = sub-blocks 2p (low nibbles) and 2p + 1 (high nibbles) of byte columns
//    8p .. 8p + 7, 2 groups of 8; a pair sum is at most 2 * 15 * 127, so all 8 add up (30480).
//    4 columns per pass.
//  - Q5_K: unit j = sub-block j (nibble j % 2 | bit j of the qh byte << 4), 1 group of 8; a pair
//    sum is at most 2 * 31 * 128 = 7936, so 4 add up (31744). 4 columns per pass.
//  - Q6_K: unit = sub-block J (ql nibble | 2 qh bits << 4) in the order the block stores them
//    (quant-repack.h: half, then 16 values, then quarter), so that the block is read front to
//    back, which the hardware prefetcher streams with no software prefetch (one thread, Zen 4:
//    23 GB/s; 18 in the order 0..15, 13-16 with the block prefetched 4 KiB ahead); 1 group of 4;
//    a pair sum is at most 2 * 63 * 128 = 16128, so 2 add up (32256). All 8 columns in one pass:
//    the activations are read once per row half, and each decoded register meets all the columns
//    (at 8 columns, 15% faster than two passes of 4 although some sums then live on the stack).
//  - IQ4_XS: unit j = sub-block j, its 4 byte columns' low nibbles (activations 32j + 4k) then
//    their high ones (32j + 16 + 4k). A level + 128 (1..241) times an activation overflows a pair
//    sum of vpmaddubsw (2 * 241 * 127), so it is taken as 16 hi + lo (two byte-table lookups of
//    the nibble): 2 groups of the same 8 registers' activations, hi against (16 sc, 16 sc) pairs,
//    lo against (sc, sc); a pair sum is at most 2 * 15 * 127, so all 8 add up (30480). The
//    offset first, as Q6_K's: the integer sum starts at -128 * sum_j sc_j * bsum32_j. 4 columns
//    per pass as Q4_K (the same 16 decoded registers).
#include "kernels-x86.h"

#if defined(GGML_SIMD_AVX2)

#include <immintrin.h>
#include <string.h>

#include <utility>

namespace ggml_cpu_avx2 {
namespace {

inline __m256i bcast4(const void * p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

inline __m256i load32(const void * p) { return _mm256_loadu_si256((const __m256i *) p); }
inline __m128i load8(const void * p) { return _mm_loadl_epi64((const __m128i *) p); }

// 8 bytes (one per row) to 32-bit lanes.
inline __m256i bytes_to_lanes(const uint8_t * p) { return _mm256_cvtepu8_epi32(load8(p)); }

// A 32-bit lane value v (< 2^15) as the 16-bit pair (v, v).
inline __m256i pair16(__m256i v) { return _mm256_or_si256(v, _mm256_slli_epi32(v, 16)); }

// Q6_K: keeps GCC from reassociating the sums of all 16 sub-blocks into a tree, which keeps
// every sub-block's products live at once and spills them (GCC 12); likewise the activation
// pointers per row half: else GCC hoists all the activation loads out of the row-half loop and
// keeps them on the stack.
template <typename T>
inline void opaque(T & v) {
#if defined(__GNUC__)
    __asm__("" : "+g"(v));
#else
    (void) v;
#endif
}
inline void opaque(__m256i & v) {
#if defined(__GNUC__)
    __asm__("" : "+x"(v));
#else
    (void) v;
#endif
}

typedef const block_q8_Kx * const * Cols;  // the columns' super-blocks

// ---- the types ------------------------------------------------------------------------------
// Q4_K / Q5_K, rows 8h .. 8h + 7: acc -= (dmin * d_a) * sum_j m_j * bsum32_j, the mins first;
// the values' sums start at zero.
template <int NC, typename G>
inline void k4_mins(const G * g, int h, Cols y, __m256i * isum, __m256 (*acc)[2]) {
    const __m256i low4 = _mm256_set1_epi32(15), m_hi = _mm256_set1_epi32(0x30);
    __m256i msum[NC];
    for (int c = 0; c < NC; c++) msum[c] = _mm256_setzero_si256();
    for (int j = 0; j < 8; j++) {
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi32(bytes_to_lanes(g->sm[j] + 8 * h), 2), m_hi);
        __m256i lo = bytes_to_lanes(g->mlo[j / 2] + 8 * h);
        lo = (j & 1) ? _mm256_srli_epi32(lo, 4) : _mm256_and_si256(lo, low4);
        const __m256i m2 = pair16(_mm256_or_si256(hi, lo));
        for (int c = 0; c < NC; c++) {
            msum[c] = _mm256_add_epi32(msum[c], _mm256_madd_epi16(m2, bcast4(y[c]->bsums + 2 * j)));
        }
    }
    const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (g->dmin + 8 * h)));
    for (int c = 0; c < NC; c++) {
        const __m256 f = _mm256_mul_ps(dmin, _mm256_set1_ps(y[c]->d));
        acc[c][h] = _mm256_fnmadd_ps(f, _mm256_cvtepi32_ps(msum[c]), acc[c][h]);
        isum[c] = _mm256_setzero_si256();
    }
}

// The scales of sub-block j of rows 8h .. 8h + 7 as (sc, sc) pairs.
template <typename G> inline __m256i k4_scale(const G * g, int h, int j) {
    return pair16(_mm256_and_si256(bytes_to_lanes(g->sm[j] + 8 * h), _mm256_set1_epi32(63)));
}

// What Q4_K and Q5_K share: the mins first.
struct K4 {
    template <int NC, typename G> static void begin(const G * g, int h, Cols y, __m256i * isum, __m256 (*acc)[2]) { k4_mins<NC>(g, h, y, isum, acc); }
};

struct Q4K : K4 {
    typedef block_q4_Kx16 G;
    static constexpr int PASS = 4, UNITS = 4, S = 2, K = 8, L = 8, PREFETCH = 4096;
    static constexpr bool UNROLL = false, OPAQUE = false;
    static constexpr int act(int p, int s) { return 64 * p + 32 * s; }
    template <typename U> static void decode(const G * g, int h, U u, __m256i (&w)[S][K], __m256i (&sc)[S]) {
        const int p = u;
        const __m256i m4 = _mm256_set1_epi8(0x0F);
        sc[0] = k4_scale(g, h, 2 * p);
        sc[1] = k4_scale(g, h, 2 * p + 1);
        for (int k = 0; k < 8; k++) {
            const __m256i v = load32(g->qs[8 * p + k][8 * h]);
            w[0][k] = _mm256_and_si256(v, m4);
            w[1][k] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        }
    }
};

// Bit J of every qh byte moved to bit 4 of its byte (other bits: garbage, masked by the caller).
// 16-bit shifts by at most 4: a byte's bit 4 comes from its own byte.
template <int J> inline __m256i bit_to_4(__m256i h) {
    if constexpr (J < 4) return _mm256_slli_epi16(h, 4 - J);
    else if constexpr (J == 4) return h;
    else return _mm256_srli_epi16(h, J - 4);
}

struct Q5K : K4 {
    typedef block_q5_Kx16 G;
    static constexpr int PASS = 4, UNITS = 8, S = 1, K = 8, L = 4, PREFETCH = 4096;
    static constexpr bool UNROLL = true, OPAQUE = false;
    static constexpr int act(int j, int) { return 32 * j; }
    template <typename U> static void decode(const G * g, int h, U, __m256i (&w)[S][K], __m256i (&sc)[S]) {
        constexpr int J = U::value;
        const __m256i m4 = _mm256_set1_epi8(0x0F), m16 = _mm256_set1_epi8(0x10);
        for (int k = 0; k < 8; k++) {
            const __m256i v = load32(g->qs[8 * (J / 2) + k][8 * h]);
            const __m256i qh = load32(g->qh[k][8 * h]);
            const __m256i nib = (J & 1) ? _mm256_and_si256(_mm256_srli_epi16(v, 4), m4) : _mm256_and_si256(v, m4);
            w[0][k] = _mm256_or_si256(nib, _mm256_and_si256(bit_to_4<J>(qh), m16));
        }
        sc[0] = k4_scale(g, h, J);
    }
};

// Bits 2t, 2t + 1 of every qh byte moved to bits 4, 5 (the other bits of the byte still to mask).
template <int T> inline __m256i qh_bits(__m256i qh) {
    if constexpr (T == 0) return _mm256_slli_epi16(qh, 4);
    else if constexpr (T == 1) return _mm256_slli_epi16(qh, 2);
    else if constexpr (T == 2) return qh;
    else return _mm256_srli_epi16(qh, 2);
}

struct Q6K {
    typedef block_q6_Kx16 G;
    static constexpr int PASS = 8, UNITS = 16, S = 1, K = 4, L = 2, PREFETCH = 0;
    static constexpr bool UNROLL = true, OPAQUE = true;
    // Offset: isum = -32 * sum_j sc_j * bsums[j], two sub-blocks per vpmaddwd.
    template <int NC> static void begin(const G * g, int h, Cols y, __m256i * isum, __m256 (*)[2]) {
        for (int c = 0; c < NC; c++) isum[c] = _mm256_setzero_si256();
        for (int j = 0; j < QK_K / 16; j += 2) {
            const __m128i s01 = _mm_unpacklo_epi8(load8(g->scales[j] + 8 * h), load8(g->scales[j + 1] + 8 * h));
            const __m256i pairs = _mm256_slli_epi16(_mm256_cvtepi8_epi16(s01), 5);  // 32 sc: -4096 .. 4064
            for (int c = 0; c < NC; c++) isum[c] = _mm256_sub_epi32(isum[c], _mm256_madd_epi16(pairs, bcast4(y[c]->bsums + j)));
        }
    }
    // Unit u: sub-block J = 8 (u / 8) + 2 (u % 4) + u / 4 % 2 (0, 2, 4, 6, 1, 3, 5, 7, 8, ...):
    // values 16 J .. 16 J + 15, half J / 8, quarter J % 8 / 2, l from 16 (J % 2).
    static constexpr int sub_block(int u) { return 8 * (u / 8) + 2 * (u % 4) + u / 4 % 2; }
    static constexpr int act(int u, int) { return 16 * sub_block(u); }
    template <typename U> static void decode(const G * g, int h, U, __m256i (&w)[S][K], __m256i (&sc)[S]) {
        constexpr int J = sub_block(U::value), hf = J / 8, t = J % 8 / 2, gg = J % 2;
        const __m256i m0F = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
        for (int k = 0; k < 4; k++) {
            const __m256i ql = load32(g->q[ggml_q6_Kx16_ql(16 * hf + 8 * (t & 1) + 4 * gg + k)][8 * h]);
            const __m256i qh = load32(g->q[ggml_q6_Kx16_qh(8 * hf + 4 * gg + k)][8 * h]);
            const __m256i lo = _mm256_and_si256(t < 2 ? ql : _mm256_srli_epi16(ql, 4), m0F);
            w[0][k] = _mm256_or_si256(lo, _mm256_and_si256(qh_bits<t>(qh), m30));
        }
        const __m128i s8 = load8(g->scales[J] + 8 * h);
        sc[0] = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(s8, s8));  // (sc, sc) per row
    }
};

// IQ4_XS, rows 8h .. 8h + 7: the scale ls - 32 of sub-block j, one per lane (low 4 bits from
// nibble j % 2 of scales_l[j / 2], high 2 from bits 2 (j % 4) of scales_h[j / 4]).
inline __m256i iq4_scale(const block_iq4_xsx16 * g, int h, int j) {
    const __m256i l = bytes_to_lanes(g->scales_l[j / 2] + 8 * h), hb = bytes_to_lanes(g->scales_h[j / 4] + 8 * h);
    const __m256i lo = (j & 1) ? _mm256_srli_epi32(l, 4) : _mm256_and_si256(l, _mm256_set1_epi32(15));
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi32(_mm256_slli_epi32(hb, 4), 2 * (j % 4)), _mm256_set1_epi32(0x30));
    return _mm256_sub_epi32(_mm256_or_si256(lo, hi), _mm256_set1_epi32(32));
}

// Signed 32-bit lanes (|v| < 2^15) as the 16-bit pairs (a, b): a from the low half of each lane of
// va, b from vb's.
inline __m256i pairs16(__m256i va, __m256i vb) { return _mm256_blend_epi16(va, _mm256_slli_epi32(vb, 16), 0xAA); }

struct IQ4XS {
    typedef block_iq4_xsx16 G;
    static constexpr int PASS = 4, UNITS = 8, S = 2, K = 8, L = 8, PREFETCH = 4096;
    static constexpr bool UNROLL = true, OPAQUE = false;
    // Offset: isum = -128 * sum_j sc_j * bsum32_j, two sub-blocks per vpmaddwd (128 sc: -4096 .. 3968).
    template <int NC> static void begin(const G * g, int h, Cols y, __m256i * isum, __m256 (*)[2]) {
        for (int c = 0; c < NC; c++) isum[c] = _mm256_setzero_si256();
        for (int p = 0; p < 4; p++) {
            const __m256i pairs = _mm256_slli_epi16(pairs16(iq4_scale(g, h, 2 * p), iq4_scale(g, h, 2 * p + 1)), 7);
            for (int c = 0; c < NC; c++) isum[c] = _mm256_sub_epi32(isum[c], _mm256_madd_epi16(pairs, bcast4(y[c]->bsums32 + 2 * p)));
        }
    }
    static constexpr int act(int j, int) { return 32 * j; }
    template <typename U> static void decode(const G * g, int h, U u, __m256i (&w)[S][K], __m256i (&sc)[S]) {
        const int j = u;
        const __m128i m4x = _mm_set1_epi8(0x0F);
        const __m128i t = _mm_xor_si128(_mm_loadu_si128((const __m128i *) kvalues_iq4nl), _mm_set1_epi8((char) 0x80));  // + 128
        const __m256i hi_t = _mm256_broadcastsi128_si256(_mm_and_si128(_mm_srli_epi16(t, 4), m4x));
        const __m256i lo_t = _mm256_broadcastsi128_si256(_mm_and_si128(t, m4x));
        const __m256i m4 = _mm256_set1_epi8(0x0F);
        for (int k = 0; k < 4; k++) {
            const __m256i v = load32(g->qs[4 * j + k][8 * h]);
            const __m256i n0 = _mm256_and_si256(v, m4), n1 = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            w[0][k] = _mm256_shuffle_epi8(hi_t, n0);
            w[0][4 + k] = _mm256_shuffle_epi8(hi_t, n1);
            w[1][k] = _mm256_shuffle_epi8(lo_t, n0);
            w[1][4 + k] = _mm256_shuffle_epi8(lo_t, n1);
        }
        const __m256i s = iq4_scale(g, h, j);
        sc[1] = pairs16(s, s);
        sc[0] = _mm256_slli_epi16(sc[1], 4);  // 16 sc: -512 .. 496
    }
};

// ---- the kernel -----------------------------------------------------------------------------
// One unit of a super-block, rows 8h .. 8h + 7: decoded once, met by every column of the pass.
// Each group of K registers is summed in chunks of L (16 bits), each chunk widened and scaled by
// vpmaddwd; every type has two such products per column and unit.
template <typename T, int NC, typename U>
inline void unit(const typename T::G * g, int h, Cols y, __m256i * isum, U u) {
    constexpr int NCH = T::K / T::L;  // chunks per group
    static_assert(T::S * NCH == 2, "two products per column and unit");
    __m256i w[T::S][T::K], sc[T::S];
    T::decode(g, h, u, w, sc);
    for (int c = 0; c < NC; c++) {
        const int8_t * q = y[c]->qs;
        __m256i x[2];
        for (int i = 0; i < 2; i++) {  // i = s * NCH + chunk
            const int s = i / NCH, k = i % NCH * T::L;
            x[i] = _mm256_maddubs_epi16(w[s][k], bcast4(q + T::act(u, s) + 4 * k));
        }
        for (int t = 1; t < T::L; t++) {
            for (int i = 0; i < 2; i++) {
                const int s = i / NCH, k = i % NCH * T::L + t;
                x[i] = _mm256_add_epi16(x[i], _mm256_maddubs_epi16(w[s][k], bcast4(q + T::act(u, s) + 4 * k)));
            }
        }
        isum[c] = _mm256_add_epi32(isum[c], _mm256_add_epi32(_mm256_madd_epi16(x[0], sc[0]), _mm256_madd_epi16(x[1], sc[T::S - 1])));
        if constexpr (T::OPAQUE) opaque(isum[c]);
    }
}

template <typename T, int NC, int... U>
inline void units(const typename T::G * g, int h, Cols y, __m256i * isum, std::integer_sequence<int, U...>) {
    (unit<T, NC>(g, h, y, isum, std::integral_constant<int, U>()), ...);
}

// 16 rows (two halves of 8 lanes) against NC columns.
template <typename T, int NC>
void gemm(int64_t nb, const typename T::G * a, const char * b, size_t ldb, float * s, size_t lds) {
    __m256 acc[NC][2];
    for (int c = 0; c < NC; c++) acc[c][0] = acc[c][1] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const typename T::G * g = a + i;
        if constexpr (T::PREFETCH > 0 && NC >= GGML_REPACK_PREFETCH_MIN_COLS) {
            for (int l = 0; l < (int) sizeof(*g); l += 64) _mm_prefetch((const char *) g + T::PREFETCH + l, _MM_HINT_T0);
        }
        const block_q8_Kx * yi[NC];
        for (int c = 0; c < NC; c++) yi[c] = (const block_q8_Kx *) (b + c * ldb) + i;
        for (int h = 0; h < 2; h++) {  // rows 8h .. 8h + 7
            const block_q8_Kx * y[NC];
            for (int c = 0; c < NC; c++) {
                y[c] = yi[c];
                if constexpr (T::OPAQUE) opaque(y[c]);
            }
            __m256i isum[NC];
            T::template begin<NC>(g, h, y, isum, acc);
            if constexpr (T::UNROLL) {
                units<T, NC>(g, h, y, isum, std::make_integer_sequence<int, T::UNITS>());
            } else {
                for (int u = 0; u < T::UNITS; u++) unit<T, NC>(g, h, y, isum, u);
            }
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (g->d + 8 * h)));
            for (int c = 0; c < NC; c++) {
                const __m256 f = _mm256_mul_ps(d, _mm256_set1_ps((T::OPAQUE ? yi : y)[c]->d));  // the scale read once
                acc[c][h] = _mm256_fmadd_ps(f, _mm256_cvtepi32_ps(isum[c]), acc[c][h]);
            }
        }
    }
    for (int c = 0; c < NC; c++) {
        _mm256_storeu_ps(s + c * lds, acc[c][0]);
        _mm256_storeu_ps(s + c * lds + 8, acc[c][1]);
    }
}

// nc (<= 8) columns in passes of at most T::PASS.
template <typename T, int... N>
void run(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds, std::integer_sequence<int, N...>) {
    typedef void (*kernel_fn)(int64_t, const typename T::G *, const char *, size_t, float *, size_t);
    static const kernel_fn kernels[] = { gemm<T, N + 1>... };
    GGML_ASSERT(nc >= 1 && nc <= GGML_REPACK_MAX_COLS);
    for (int c0 = 0; c0 < nc; c0 += T::PASS) {
        const int n = nc - c0 < T::PASS ? nc - c0 : T::PASS;
        kernels[n - 1](nb, (const typename T::G *) a, (const char *) b + c0 * ldb, ldb, s + c0 * lds, lds);
    }
}

template <typename T>
void gemm_kx16(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) {
    run<T>(nb, a, b, ldb, nc, s, lds, std::make_integer_sequence<int, T::PASS>());
}

}  // namespace

void repack_gemm_q4_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) { gemm_kx16<Q4K>(nb, a, b, ldb, nc, s, lds); }
void repack_gemm_q5_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) { gemm_kx16<Q5K>(nb, a, b, ldb, nc, s, lds); }
void repack_gemm_q6_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) { gemm_kx16<Q6K>(nb, a, b, ldb, nc, s, lds); }
void repack_gemm_iq4_xs(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) { gemm_kx16<IQ4XS>(nb, a, b, ldb, nc, s, lds); }

}  // namespace ggml_cpu_avx2

#endif  // GGML_SIMD_AVX2
