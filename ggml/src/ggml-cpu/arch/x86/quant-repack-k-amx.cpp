// quant-repack-k-amx.cpp - AMX-INT8 kernels for the K-quant layouts Q4_K, Q5_K and Q6_K x16
// (quant-repack.h), columns 16 at a time, one template over the type. A tile product sums 64
// values (a quarter of a super-block), spanning sub-blocks with their own scales; so the scales
// go into the weight tiles, split into digits small enough that value * digit is a byte:
//   Q4_K / Q5_K (q < 32, 6-bit sc = 8 h + l): tiles q * l and q * h, isum = lo + 8 hi; a third
//     tile holds the mins m_j (a product with the same activations gives sum_j m_j * bsum32_j);
//   Q6_K (u < 64, int8 sc): four tiles of u times the base-4 digits of sc + 128 (the top one
//     minus 2, signed), the offset of 32 through Q8_K's 16-value sums on the vector side.
// The activations' tile is 16 columns' Q8_K bytes, signed, read in place (TDPBSUD / TDPBSSD).
// All integers, exact; the float steps are the reference's (quant-repack-k.cpp), super-block by
// super-block, so the bits are the reference's. A chunk of super-blocks' weight tiles is made
// once and serves every tile of columns. Fewer than 16 columns, and everything where the OS does
// not grant the tile state, go to the VNNI kernels.
// The tile unit is the limit only if the vector work (the finish, about as long as the products)
// runs beside the products: see gemm_x16. Without its finish, Q4_K's kernel ran 1.9x as fast.
#include "amx.h"

#if defined(GGML_SIMD_AMX)

#include "simd-avx512.h"

#include <stddef.h>
#include <string.h>

namespace ggml_cpu_amx {

namespace {

constexpr int COLS = 16;
constexpr size_t TILE = 16 * 64;        // one weight tile: 16 rows (4 values each) of 16 weight rows

inline __m512i load64(const void * p) { return _mm512_loadu_si512(p); }

// 16 bytes (one per weight row) to 32-bit lanes.
inline __m512i bytes_to_lanes(const uint8_t * p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *) p)); }

// Bytes of v times the 32-bit lane's small factor f (each product a byte: 0..255, or -128..127
// where f < 0).
inline __m512i mul_bytes(__m512i v, __m512i f) {
    const __m512i f16 = _mm512_or_si512(_mm512_and_si512(f, _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(f, 16));
    const __m512i low = _mm512_set1_epi16(0x00FF);
    const __m512i lo = _mm512_mullo_epi16(_mm512_and_si512(v, low), f16);
    const __m512i hi = _mm512_mullo_epi16(_mm512_andnot_si512(low, v), f16);  // (byte * f) << 8
    return _mm512_ternarylogic_epi32(lo, hi, low, 0xE4);  // (lo & low) | (hi & ~low)
}

// A 32-bit lane's value (a byte) in each of its 4 bytes.
inline __m512i spread(__m512i x) { return _mm512_mullo_epi32(_mm512_and_si512(x, _mm512_set1_epi32(0xFF)), _mm512_set1_epi32(0x01010101)); }

inline void store(void * p, __m512i v) { _mm512_store_si512((void *) p, v); }

// ---- the types ------------------------------------------------------------------------------
// A type makes, per quarter p of a super-block (values 64p .. 64p + 63: tile row k holds values
// 64p + 4k .. + 3 of the 16 weight rows), NT weight tiles (TILE bytes each, in order), tile i
// signed where SIGNED >> i & 1; its finish adds a column's sums (sums[i] + 16 c) to acc.

// Q4_K / Q5_K: sc = 8 h + l; tiles q * l, q * h (q < 32: at most 217) and the mins.
//   isum = lo + 8 hi; acc = fma(-(dmin * d_a), min, acc); acc = fma(d * d_a, isum, acc).
template <typename Values>
struct K4 {
    typedef typename Values::G G;
    static constexpr int NT = 3;
    static constexpr unsigned SIGNED = 0;
    static constexpr size_t EXTRA = 0;
    static constexpr int a_tile(int p) { return 3 + (p & 1); }
    static constexpr int b_tile(int, int i) { return 5 + i; }
    static void weights(const G * g, uint8_t * w) {
        const __m512i m63 = _mm512_set1_epi32(63), m7 = _mm512_set1_epi32(7), m15 = _mm512_set1_epi32(15);
        for (int p = 0; p < 4; p++) {
            uint8_t * lo = w + (NT * p) * TILE, * hi = lo + TILE, * mn = hi + TILE;
            __m512i l[2], h[2];
            for (int s = 0; s < 2; s++) {  // sub-blocks 2p + s: tile rows 8s ..
                const int j = 2 * p + s;
                const __m512i smj = bytes_to_lanes(g->sm[j]);
                __m512i mlo = bytes_to_lanes(g->mlo[j / 2]);
                mlo = s ? _mm512_srli_epi32(mlo, 4) : _mm512_and_si512(mlo, m15);
                const __m512i m = spread(_mm512_or_si512(_mm512_slli_epi32(_mm512_srli_epi32(smj, 6), 4), mlo));
                for (int k = 0; k < 8; k++) store(mn + 64 * (8 * s + k), m);
                const __m512i sc = _mm512_and_si512(smj, m63);
                l[s] = _mm512_and_si512(sc, m7);
                h[s] = _mm512_srli_epi32(sc, 3);
            }
            for (int k = 0; k < 8; k++) {
                __m512i va, vb;
                Values::values(g, p, k, va, vb);
                store(lo + 64 * k, mul_bytes(va, l[0]));
                store(lo + 64 * (8 + k), mul_bytes(vb, l[1]));
                store(hi + 64 * k, mul_bytes(va, h[0]));
                store(hi + 64 * (8 + k), mul_bytes(vb, h[1]));
            }
        }
    }
    static __m512 finish(const G * g, const uint8_t *, const int32_t (*sums)[COLS * 16], int c, const block_q8_Kx * y, __m512 acc) {
        const __m512 dy = _mm512_set1_ps(y->d);
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) g->d));
        const __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) g->dmin));
        const __m512i lo = _mm512_load_si512((const void *) (sums[0] + 16 * c));
        const __m512i hi = _mm512_load_si512((const void *) (sums[1] + 16 * c));
        const __m512i mn = _mm512_load_si512((const void *) (sums[2] + 16 * c));
        const __m512i isum = _mm512_add_epi32(lo, _mm512_slli_epi32(hi, 3));
        acc = _mm512_fnmadd_ps(_mm512_mul_ps(dm, dy), _mm512_cvtepi32_ps(mn), acc);
        return _mm512_fmadd_ps(_mm512_mul_ps(dw, dy), _mm512_cvtepi32_ps(isum), acc);
    }
};

// The unsigned values of sub-blocks 2p (va, from the low nibbles) and 2p + 1 (vb), 4-byte column
// k of each.
struct Q4KValues {
    typedef block_q4_Kx16 G;
    static void values(const G * g, int p, int k, __m512i & va, __m512i & vb) {
        const __m512i m4 = _mm512_set1_epi8(0x0F);
        const __m512i v = load64(g->qs[8 * p + k]);
        va = _mm512_and_si512(v, m4);
        vb = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    }
};

struct Q5KValues {
    typedef block_q5_Kx16 G;
    static void values(const G * g, int p, int k, __m512i & va, __m512i & vb) {
        const __m512i m4 = _mm512_set1_epi8(0x0F), m16 = _mm512_set1_epi8(0x10);
        const __m512i v = load64(g->qs[8 * p + k]);
        const __m512i h = load64(g->qh[k]);
        // Bit 2p (2p + 1) of each qh byte to bit 4: a 16-bit shift by at most 4 keeps a byte's
        // bit 4 within its byte.
        const int ja = 2 * p, jb = 2 * p + 1;
        const __m512i ha = ja <= 4 ? _mm512_sll_epi16(h, _mm_cvtsi32_si128(4 - ja)) : _mm512_srl_epi16(h, _mm_cvtsi32_si128(ja - 4));
        const __m512i hb = jb <= 4 ? _mm512_sll_epi16(h, _mm_cvtsi32_si128(4 - jb)) : _mm512_srl_epi16(h, _mm_cvtsi32_si128(jb - 4));
        va = _mm512_or_si512(_mm512_and_si512(v, m4), _mm512_and_si512(ha, m16));
        vb = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), _mm512_and_si512(hb, m16));
    }
};

typedef K4<Q4KValues> Q4K;
typedef K4<Q5KValues> Q5K;

// Q6_K: u < 64, 16-value sub-blocks with int8 scales sc; sc + 128 = d0 + 4 d1 + 16 d2 + 64 d3
// (digits < 4), so sc = d0 + 4 d1 + 16 d2 + 64 (d3 - 2). Tiles u * d0, u * d1, u * d2 (at most
// 189, unsigned) and u * (d3 - 2) (-126..63, signed); the offset of 32 through Q8_K's 16-value
// sums, as the VNNI kernel takes it (vpdpwssd of (-32 sc_j, -32 sc_j+1) pairs, kept after the
// tiles):  isum = t0 + 4 t1 + 16 t2 + 64 t3 - 32 sum_j sc_j bsums_j; acc = fma(d * d_a, isum, acc).
struct Q6K {
    typedef block_q6_Kx16 G;
    static constexpr int NT = 4;
    static constexpr unsigned SIGNED = 0x8;
    static constexpr size_t EXTRA = 8 * 64;  // the 8 pairs of scales
    static constexpr int a_tile(int) { return 4; }
    static constexpr int b_tile(int p, int i) { return 5 + (NT * p + i) % 3; }
    static void weights(const G * g, uint8_t * w) {
        const __m512i m3 = _mm512_set1_epi32(3), m0F = _mm512_set1_epi8(0x0F), b3 = _mm512_set1_epi8(0x03);
        for (int p = 0; p < 4; p++) {
            uint8_t * t = w + (NT * p) * TILE;
            const int h = p / 2, tq = 2 * (p % 2);  // quarters tq (tile rows 0-7), tq + 1 (8-15)
            __m512i dig[4][4];                      // per sub-block 4p + i (tile rows 4i ..)
            for (int i = 0; i < 4; i++) {
                const __m512i x = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *) g->scales[4 * p + i]));
                const __m512i u = _mm512_add_epi32(x, _mm512_set1_epi32(128));
                for (int d = 0; d < 3; d++) dig[i][d] = _mm512_and_si512(_mm512_srli_epi32(u, 2 * d), m3);
                dig[i][3] = _mm512_sub_epi32(_mm512_srli_epi32(u, 6), _mm512_set1_epi32(2));
            }
            for (int s = 0; s < 2; s++) {
                const int q = tq + s;  // quarter q of half h: ql nibble q / 2 of ql columns 16h + 8(q % 2) ..
                for (int gg = 0; gg < 8; gg++) {
                    const __m512i ql = load64(g->q[ggml_q6_Kx16_ql(16 * h + 8 * (q % 2) + gg)]);
                    const __m512i qh = load64(g->q[ggml_q6_Kx16_qh(8 * h + gg)]);
                    const __m512i lo = _mm512_and_si512(q / 2 ? _mm512_srli_epi16(ql, 4) : ql, m0F);
                    const __m512i hi = _mm512_and_si512(_mm512_srl_epi16(qh, _mm_cvtsi32_si128(2 * q)), b3);
                    const __m512i u = _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));
                    const int row = 8 * s + gg;
                    for (int d = 0; d < 4; d++) store(t + d * TILE + 64 * row, mul_bytes(u, dig[row / 4][d]));
                }
            }
        }
        // (-32 sc_j, -32 sc_j+1) per row, j even.
        const __m512i pair_idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                                  23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
        for (int j = 0; j < QK_K / 16; j += 2) {
            const __m512i sc = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *) g->scales[j]));
            store(w + 4 * NT * TILE + 32 * j, _mm512_mullo_epi16(_mm512_permutexvar_epi16(pair_idx, sc), _mm512_set1_epi16(-32)));
        }
    }
    static __m512 finish(const G * g, const uint8_t * w, const int32_t (*sums)[COLS * 16], int c, const block_q8_Kx * y, __m512 acc) {
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) g->d));
        __m512i isum = _mm512_load_si512((const void *) (sums[0] + 16 * c));
        for (int d = 1; d < 4; d++) isum = _mm512_add_epi32(isum, _mm512_slli_epi32(_mm512_load_si512((const void *) (sums[d] + 16 * c)), 2 * d));
        for (int j = 0; j < QK_K / 16; j += 2) {
            int32_t b2;
            memcpy(&b2, y->bsums + j, 4);
            isum = _mm512_dpwssd_epi32(isum, _mm512_load_si512((const void *) (w + 4 * NT * TILE + 32 * j)), _mm512_set1_epi32(b2));
        }
        return _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(y->d)), _mm512_cvtepi32_ps(isum), acc);
    }
};

// ---- the kernel -----------------------------------------------------------------------------
// Tiles: 0 .. NT - 1 the sums; the activations and the weights where the type says (a_tile,
// b_tile): a weight tile is loaded while the products before it run, so a tile is loaded again
// only after the product two or three back has read it (no renaming of tiles).
// The intrinsics take tile numbers as literals: these switch on constants, folded once inlined.
#define GGML_AMX_INLINE __attribute__((always_inline)) inline
#define GGML_AMX_INLINE_LAMBDA __attribute__((always_inline))
GGML_AMX_INLINE void tile_load(int t, const void * p, long stride) {
    switch (t) {
        case 3: _tile_loadd(3, p, stride); break;
        case 4: _tile_loadd(4, p, stride); break;
        case 5: _tile_loadd(5, p, stride); break;
        case 6: _tile_loadd(6, p, stride); break;
        case 7: _tile_loadd(7, p, stride); break;
        default: __builtin_unreachable();
    }
}

GGML_AMX_INLINE void tile_product(bool sgn, int c, int a, int b) {
#define TILE_DP(C, A, B) case 64 * C + 8 * A + B: if (sgn) _tile_dpbssd(C, A, B); else _tile_dpbsud(C, A, B); break;
#define TILE_DP_B(C, A) TILE_DP(C, A, 5) TILE_DP(C, A, 6) TILE_DP(C, A, 7)
    switch (64 * c + 8 * a + b) {
        TILE_DP_B(0, 3) TILE_DP_B(0, 4) TILE_DP_B(1, 3) TILE_DP_B(1, 4) TILE_DP_B(2, 3) TILE_DP_B(2, 4) TILE_DP_B(3, 4)
        default: __builtin_unreachable();
    }
#undef TILE_DP_B
#undef TILE_DP
}

#define SUM_TILES(F) F(0) if constexpr (T::NT > 1) F(1) if constexpr (T::NT > 2) F(2) if constexpr (T::NT > 3) F(3)
#define ZERO_TILE(I) { _tile_zero(I); }
#define STORE_TILE(I) { _tile_stored(I, sums_e[I], 64); }

// After each of a step's 4 NT products, vector work for its share of the 16 columns:
// between(c0, c1). A long run of vector code between tile instructions holds up their issue
// (the tile unit then idles: the vector work cost as much as all the products), a few columns
// after each product keep both busy.
template <typename T, typename Between>
GGML_AMX_INLINE void quarter(int p, const char * a, size_t lda, const uint8_t * wq, Between && between) {
    tile_load(T::a_tile(p), a, (long) lda);
    _Pragma("GCC unroll 4")
    for (int i = 0; i < T::NT; i++) {
        tile_load(T::b_tile(p, i), wq + i * TILE, 64);
        tile_product((T::SIGNED >> i) & 1, i, T::a_tile(p), T::b_tile(p, i));
        const int k = p * T::NT + i;
        between(k * COLS / (4 * T::NT), (k + 1) * COLS / (4 * T::NT));
    }
}

// n16 tiles of 16 columns (Q8_K rows, ldb bytes apart) against the group's nb super-blocks, a
// chunk at a time, each (tile of columns, super-block) a step: its products, with the finish of
// the step before spread between them (the vector units scale one step's sums while the tile
// unit makes the next) and the next step's activation blocks fetched into L1 (from L2 the tile
// loads wait on them), then the store of its sums. The accumulators live in s (the same chain
// of fmas per column). Measured (2 threads, 512 columns, 5632 x 2048 and 2048 x 5632, 15
// alternated runs): +38% / +56% over the finish after the products without the prefetch.
template <typename T>
void gemm_x16(int64_t nb, const typename T::G * a0, const char * b0, size_t ldb, int n16, float * s, size_t lds) {
    constexpr size_t W_SUPER = 4 * T::NT * TILE + T::EXTRA;
    constexpr int64_t CHUNK = 24 * 1024 / W_SUPER > 0 ? 24 * 1024 / W_SUPER : 1;  // weight tiles that stay in L1
    configure(Tiles::full);
    alignas(64) uint8_t w[CHUNK * W_SUPER];
    alignas(64) int32_t sums[2][T::NT][COLS * 16];
    for (int64_t k0 = 0; k0 < nb; k0 += CHUNK) {
        const int64_t n = nb - k0 < CHUNK ? nb - k0 : CHUNK;
        const typename T::G * a = a0 + k0;
        for (int64_t i = 0; i < n; i++) T::weights(a + i, w + i * W_SUPER);
        __asm__ volatile("" ::: "memory");  // the tile loads read w (GCC's tile intrinsics declare no memory read)
        // Step e: tile of columns e / n, super-block e % n of the chunk.
        auto block = [&](int64_t e) { return b0 + (size_t) (e / n) * COLS * ldb + (k0 + e % n) * sizeof(block_q8_Kx); };
        auto finish = [&](int64_t e, int c0, int c1) GGML_AMX_INLINE_LAMBDA {
            const int64_t t = e / n, i = e % n;
            const char * bt = block(e);
            float * st = s + (size_t) t * COLS * lds;
            const int32_t (*sm)[COLS * 16] = sums[e & 1];
            _Pragma("GCC unroll 16")
            for (int c = c0; c < c1; c++) {
                const __m512 acc = k0 + i == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(st + c * lds);
                _mm512_storeu_ps(st + c * lds, T::finish(a + i, w + i * W_SUPER, sm, c, (const block_q8_Kx *) (bt + c * ldb), acc));
            }
        };
        const int64_t steps = n16 * n;
        static_assert(sizeof(block_q8_Kx) == 5 * 64, "an activation block is 5 cache lines");
        for (int64_t e = 0; e < steps; e++) {
            const char * qs = block(e) + offsetof(block_q8_Kx, qs);
            const char * next = block(e + 1 < steps ? e + 1 : e);
            const uint8_t * wi = w + (e % n) * W_SUPER;
            auto between = [&](int c0, int c1) GGML_AMX_INLINE_LAMBDA {
                if (e > 0) finish(e - 1, c0, c1);
                for (int c = c0; c < c1; c++) {
                    for (int l = 0; l < 5; l++) _mm_prefetch(next + c * ldb + 64 * l, _MM_HINT_T0);
                }
            };
            SUM_TILES(ZERO_TILE)
            quarter<T>(0, qs, ldb, wi, between);
            quarter<T>(1, qs + 64, ldb, wi + 1 * T::NT * TILE, between);
            quarter<T>(2, qs + 128, ldb, wi + 2 * T::NT * TILE, between);
            quarter<T>(3, qs + 192, ldb, wi + 3 * T::NT * TILE, between);
            int32_t (*sums_e)[COLS * 16] = sums[e & 1];
            SUM_TILES(STORE_TILE)
            (void) sums_e;
        }
        if (steps > 0) finish(steps - 1, 0, COLS);
    }
}

// Where the OS grants no tile state: the VNNI kernel, 8 columns at a time.
template <typename T>
void run(ggml_repack_gemm_fn vnni, int64_t nb, const void * a, const void * b, size_t ldb, int n16, float * s, size_t lds) {
    if (!granted()) {
        for (int c = 0; c < 2 * n16; c++) vnni(nb, a, (const char *) b + 8 * c * ldb, ldb, 8, s + 8 * c * lds, lds);
        return;
    }
    gemm_x16<T>(nb, (const typename T::G *) a, (const char *) b, ldb, n16, s, lds);
}

}  // namespace

void repack_gemm_x16_q4_K(int64_t nb, const void * a, const void * b, size_t ldb, int n16, float * s, size_t lds) {
    run<Q4K>(ggml_cpu_avx512::repack_gemm_q4_K, nb, a, b, ldb, n16, s, lds);
}

void repack_gemm_x16_q5_K(int64_t nb, const void * a, const void * b, size_t ldb, int n16, float * s, size_t lds) {
    run<Q5K>(ggml_cpu_avx512::repack_gemm_q5_K, nb, a, b, ldb, n16, s, lds);
}

void repack_gemm_x16_q6_K(int64_t nb, const void * a, const void * b, size_t ldb, int n16, float * s, size_t lds) {
    run<Q6K>(ggml_cpu_avx512::repack_gemm_q6_K, nb, a, b, ldb, n16, s, lds);
}

}  // namespace ggml_cpu_amx

#endif  // GGML_SIMD_AMX
