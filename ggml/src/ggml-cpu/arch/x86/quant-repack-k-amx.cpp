// quant-repack-k-amx.cpp - AMX-INT8 kernels for the K-quant layouts Q4_K and Q5_K x16
// (quant-repack.h), columns 16 at a time. A tile product sums 64 values, two sub-blocks of 32 with
// their own 6-bit scales; so the scales go into the weight tiles: sc = 8 h + l (h, l < 8), and the
// tiles hold q * l and q * h (q < 32: at most 217, an unsigned byte). Per quarter p of a
// super-block (values 64p .. 64p + 63), the activations' tile (16 columns' Q8_K bytes, signed,
// read in place) meets three weight tiles (TDPBSUD):
//   lo: q * l, hi: q * h  ->  isum = lo + 8 hi = sum_j sc_j * dot32_j;
//   min: m_j in every byte of its sub-block  ->  msum = sum_j m_j * (bsums[2j] + bsums[2j + 1]).
// All integers, exact; the float steps are the reference's (quant-repack-k.cpp):
//   acc = fma(-(dmin * d_a), msum, acc); acc = fma(d * d_a, isum, acc), super-block by block,
// so the bits are the reference's. The weight tiles (12 KiB per super-block) are made per chunk
// of super-blocks and serve every tile of columns. Fewer than 16 columns, and everything where
// the OS does not grant the tile state, go to the VNNI kernels.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "amx.h"

#if defined(GGML_SIMD_AMX)

#include <stddef.h>

namespace ggml_cpu_amx {

namespace {

constexpr int COLS = 16;
constexpr size_t TILE = 16 * 64;        // one weight tile: 16 rows (4 values each) of 16 weight rows
constexpr size_t W_SUPER = 4 * 3 * TILE;  // a super-block's tiles: per quarter lo, hi, min
constexpr int64_t CHUNK = 2;            // super-blocks per chunk: 24 KiB of weight tiles stay in L1

inline __m512i load64(const void * p) { return _mm512_loadu_si512(p); }

// 16 bytes (one per weight row) to 32-bit lanes.
inline __m512i bytes_to_lanes(const uint8_t * p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *) p)); }

// Bytes of v times the 32-bit lane's small factor f (f < 8, each product < 256).
inline __m512i mul_bytes(__m512i v, __m512i f) {
    const __m512i f16 = _mm512_or_si512(f, _mm512_slli_epi32(f, 16));
    const __m512i low = _mm512_set1_epi16(0x00FF);
    const __m512i lo = _mm512_mullo_epi16(_mm512_and_si512(v, low), f16);
    const __m512i hi = _mm512_mullo_epi16(_mm512_andnot_si512(low, v), f16);  // (byte * f) << 8
    return _mm512_or_si512(lo, hi);
}

// A 32-bit lane's value (< 256) in each of its 4 bytes.
inline __m512i spread(__m512i x) { return _mm512_mullo_epi32(x, _mm512_set1_epi32(0x01010101)); }

// Q4_K / Q5_K: the unsigned values of sub-blocks 2p (va, from the low nibbles) and 2p + 1 (vb),
// 4-byte column k of each.
struct Q4K {
    typedef block_q4_Kx16 G;
    static void values(const G * g, int p, int k, __m512i & va, __m512i & vb) {
        const __m512i m4 = _mm512_set1_epi8(0x0F);
        const __m512i v = load64(g->qs[8 * p + k]);
        va = _mm512_and_si512(v, m4);
        vb = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    }
};

struct Q5K {
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

// A super-block's weight tiles at w: per quarter p, lo, hi and min (TILE bytes each); tile rows
// 0-7 are sub-block 2p's columns, 8-15 sub-block 2p + 1's (the activation bytes 64p + 4 row ..).
template <typename T>
void weights(const typename T::G * g, uint8_t * w) {
    const __m512i m63 = _mm512_set1_epi32(63), m7 = _mm512_set1_epi32(7), m15 = _mm512_set1_epi32(15);
    for (int p = 0; p < 4; p++) {
        uint8_t * lo = w + (3 * p) * TILE, * hi = lo + TILE, * mn = hi + TILE;
        for (int s = 0; s < 2; s++) {
            const int j = 2 * p + s;
            const __m512i smj = bytes_to_lanes(g->sm[j]);
            __m512i mlo = bytes_to_lanes(g->mlo[j / 2]);
            mlo = s ? _mm512_srli_epi32(mlo, 4) : _mm512_and_si512(mlo, m15);
            const __m512i m = spread(_mm512_or_si512(_mm512_slli_epi32(_mm512_srli_epi32(smj, 6), 4), mlo));
            for (int k = 0; k < 8; k++) _mm512_store_si512((void *) (mn + 64 * (8 * s + k)), m);
        }
        const __m512i sa = _mm512_and_si512(bytes_to_lanes(g->sm[2 * p]), m63);
        const __m512i sb = _mm512_and_si512(bytes_to_lanes(g->sm[2 * p + 1]), m63);
        const __m512i la = _mm512_and_si512(sa, m7), ha = _mm512_srli_epi32(sa, 3);
        const __m512i lb = _mm512_and_si512(sb, m7), hb = _mm512_srli_epi32(sb, 3);
        for (int k = 0; k < 8; k++) {
            __m512i va, vb;
            T::values(g, p, k, va, vb);
            _mm512_store_si512((void *) (lo + 64 * k), mul_bytes(va, la));
            _mm512_store_si512((void *) (lo + 64 * (8 + k)), mul_bytes(vb, lb));
            _mm512_store_si512((void *) (hi + 64 * k), mul_bytes(va, ha));
            _mm512_store_si512((void *) (hi + 64 * (8 + k)), mul_bytes(vb, hb));
        }
    }
}

// n16 tiles of 16 columns (Q8_K rows, ldb bytes apart) against the group's nb super-blocks, a
// chunk at a time; a column's accumulators carry over from chunk to chunk through s (the same
// chain of fmas). Tiles: 0-2 the sums lo, hi, min; 3 the activations; 4-6 the weights.
template <typename T>
void gemm_x16(int64_t nb, const typename T::G * a0, const char * b0, size_t ldb, int n16, float * s, size_t lds) {
    configure(Tiles::full);
    alignas(64) uint8_t w[CHUNK * W_SUPER];
    alignas(64) int32_t sums[3][COLS * 16];
    for (int64_t k0 = 0; k0 < nb; k0 += CHUNK) {
        const int64_t n = nb - k0 < CHUNK ? nb - k0 : CHUNK;
        const typename T::G * a = a0 + k0;
        for (int64_t i = 0; i < n; i++) weights<T>(a + i, w + i * W_SUPER);
        __asm__ volatile("" ::: "memory");  // the tile loads read w (GCC's tile intrinsics declare no memory read)
        for (int t = 0; t < n16; t++) {
            const char * bt = b0 + (size_t) t * COLS * ldb + k0 * sizeof(block_q8_K);
            float * st = s + (size_t) t * COLS * lds;
            __m512 acc[COLS];
            _Pragma("GCC unroll 16")
            for (int c = 0; c < COLS; c++) acc[c] = k0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(st + c * lds);
            for (int64_t i = 0; i < n; i++) {
                const char * qs = bt + i * sizeof(block_q8_K) + offsetof(block_q8_K, qs);
                const uint8_t * wi = w + i * W_SUPER;
                _tile_zero(0);
                _tile_zero(1);
                _tile_zero(2);
                _Pragma("GCC unroll 4")
                for (int p = 0; p < 4; p++) {
                    _tile_loadd(3, qs + 64 * p, (long) ldb);
                    _tile_loadd(4, wi + (3 * p) * TILE, 64);
                    _tile_loadd(5, wi + (3 * p + 1) * TILE, 64);
                    _tile_loadd(6, wi + (3 * p + 2) * TILE, 64);
                    _tile_dpbsud(0, 3, 4);
                    _tile_dpbsud(1, 3, 5);
                    _tile_dpbsud(2, 3, 6);
                }
                _tile_stored(0, sums[0], 64);
                _tile_stored(1, sums[1], 64);
                _tile_stored(2, sums[2], 64);
                const typename T::G * g = a + i;
                const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) g->d));
                const __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) g->dmin));
                _Pragma("GCC unroll 16")
                for (int c = 0; c < COLS; c++) {
                    const __m512 dy = _mm512_set1_ps(((const block_q8_K *) (bt + c * ldb))[i].d);
                    const __m512i lo = _mm512_load_si512((const void *) (sums[0] + 16 * c));
                    const __m512i hi = _mm512_load_si512((const void *) (sums[1] + 16 * c));
                    const __m512i mn = _mm512_load_si512((const void *) (sums[2] + 16 * c));
                    const __m512i isum = _mm512_add_epi32(lo, _mm512_slli_epi32(hi, 3));
                    acc[c] = _mm512_fnmadd_ps(_mm512_mul_ps(dm, dy), _mm512_cvtepi32_ps(mn), acc[c]);
                    acc[c] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dy), _mm512_cvtepi32_ps(isum), acc[c]);
                }
            }
            _Pragma("GCC unroll 16")
            for (int c = 0; c < COLS; c++) _mm512_storeu_ps(st + c * lds, acc[c]);
        }
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

}  // namespace ggml_cpu_amx

#endif  // GGML_SIMD_AMX
