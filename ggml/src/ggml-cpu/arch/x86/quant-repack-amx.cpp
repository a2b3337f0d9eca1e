// quant-repack-amx.cpp - AMX-INT8 kernels for weights repacked 16 rows at a time (quant-repack.h),
// columns 16 at a time: per block of 32 values, one tile product of the 16 columns' activations
// (tile A: 16 rows of 32 bytes, read in place from the activation rows) with the 16 weight rows
// (tile B: 8 rows of 64 bytes, the repacked block's 4-byte columns as they are stored, which is
// the layout AMX wants for B). Each tile product gives every (column, row) its block's exact
// integer sum; the 16 x 16 sums leave through an L1 buffer and are scaled and accumulated as by
// the VNNI kernels, fma(isum, d_w * d_a, acc) block by block: the same bits as the reference.
// Both operands are signed (TDPBSSD): Q4_0's nibbles become q - 8 with one GF(2) affine map per
// register (GFNI), Q8_0's stored bytes (value + 128) get their top bit flipped.
// The weight tiles of a call's group are made once and serve all its tiles of columns. Fewer
// than 16 columns go to the VNNI kernels, as does everything where the OS does not grant the
// tile state.
#include "amx.h"

#if defined(GGML_SIMD_AMX)

#include "simd-avx512.h"

namespace ggml_cpu_amx {

namespace {

constexpr int COLS = 16;

// Q4_0 x16: block qs[j] (j < 4) holds values 4j..4j+3 (low nibbles) and 16+4j.. (high nibbles)
// of the 16 rows; as signed bytes q - 8 they are the weight tile's rows j and 4 + j. The affine
// maps put bits 0-2 (4-6) of the nibble in place and spread bit 3 (7), inverted, over bits 3-7:
// the nibble's two's complement after flipping its top bit, which is q - 8.
struct Q4_0 {
    using Block = block_q4_0x16;
    static void weights(const Block * g, int8_t * w) {
        const __m512i lo = _mm512_set1_epi64(0x0102040808080808ll);
        const __m512i hi = _mm512_set1_epi64(0x1020408080808080ll);
        for (int j = 0; j < 4; j++) {
            const __m512i v = _mm512_loadu_si512((const void *) (g->qs + 64 * j));
            _mm512_store_si512((void *) (w + 64 * j), _mm512_gf2p8affine_epi64_epi8(v, lo, 0xF8));
            _mm512_store_si512((void *) (w + 64 * (4 + j)), _mm512_gf2p8affine_epi64_epi8(v, hi, 0xF8));
        }
    }
};

// Q8_0 x16: the stored bytes are value + 128, in the order of the weight tile's rows.
struct Q8_0 {
    using Block = block_q8_0x16;
    static void weights(const Block * g, int8_t * w) {
        const __m512i top = _mm512_set1_epi8((char) 0x80);
        for (int j = 0; j < 8; j++) {
            _mm512_store_si512((void *) (w + 64 * j), _mm512_xor_si512(_mm512_loadu_si512((const void *) (g->qs + 64 * j)), top));
        }
    }
};

constexpr size_t W_BLOCK = 8 * 64;  // one block's weight tile
// Blocks per chunk: their weight tiles (16 KiB) stay in L1 while every tile of columns passes.
constexpr int64_t CHUNK = 32;

// Block k's tile product into tile C (with tiles A and B as its operands), and the store of a
// tile's sums to sums[C]. (Macros: GCC's tile intrinsics take the tile number as a literal.)
#define TILE_PRODUCT(C, A, B, k) do {                                 \
        _tile_loadd(B, w + (k) * W_BLOCK, 64);                        \
        _tile_loadd(A, qs + (k) * sizeof(block_q8_0x), (long) ldb);   \
        _tile_zero(C);                                                \
        _tile_dpbssd(C, A, B);                                        \
    } while (0)
#define TILE_STORE(C) _tile_stored(C, sums[C], 64)

// Column c's scaled sums of block k into acc[c] (lanes: the 16 rows).
#define SCALE_BLOCK(C, k) do {                                                                     \
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) a[k].d));          \
        _Pragma("GCC unroll 16")                                                                   \
        for (int c = 0; c < COLS; c++) {                                                           \
            const float dy = ((const block_q8_0x *) (bt + c * ldb))[k].d;                          \
            const __m512 sum = _mm512_cvtepi32_ps(_mm512_load_si512((const void *) (sums[C] + 16 * c))); \
            acc[c] = _mm512_fmadd_ps(sum, _mm512_mul_ps(dw, _mm512_set1_ps(dy)), acc[c]);        \
        }                                                                                          \
    } while (0)

// n16 tiles of 16 columns against the group's nb blocks, a chunk of blocks at a time (a column's
// accumulators carry over from chunk to chunk through s: the same chain of fmas). Within a tile
// the products run a block ahead of the stores and two ahead of the scaling (four sum tiles in
// turn): a store right after its product waits for it, and the tile unit with it.
template <typename T>
void gemm_x16(int64_t nb, const typename T::Block * a0, const char * b0, size_t ldb, int n16, float * s, size_t lds) {
    configure(Tiles::int8);
    alignas(64) int8_t w[CHUNK * W_BLOCK];
    alignas(64) int32_t sums[4][COLS * 16];
    for (int64_t k0 = 0; k0 < nb; k0 += CHUNK) {
        const int64_t n = nb - k0 < CHUNK ? nb - k0 : CHUNK;
        const typename T::Block * a = a0 + k0;
        for (int64_t i = 0; i < n; i++) T::weights(a + i, w + i * W_BLOCK);
        __asm__ volatile("" ::: "memory");  // the tile loads read w (GCC's tile intrinsics declare no memory read)
        for (int t = 0; t < n16; t++) {
            const char * bt = b0 + (size_t) t * COLS * ldb + k0 * sizeof(block_q8_0x);
            const char * qs = bt + offsetof(block_q8_0x, qs);  // column c's block k at qs + c * ldb + k * 40
            float * st = s + (size_t) t * COLS * lds;
            __m512 acc[COLS];
            _Pragma("GCC unroll 16")
            for (int c = 0; c < COLS; c++) acc[c] = k0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(st + c * lds);
            int64_t i = 0;
            if (n >= 4) {
                TILE_PRODUCT(0, 4, 6, 0);
                TILE_PRODUCT(1, 5, 7, 1);
                TILE_STORE(0);
                for (; i + 4 <= n; i += 4) {  // on entry: blocks i, i + 1 in tiles 0, 1, block i stored
                    if (i + 2 < n) TILE_PRODUCT(2, 4, 6, i + 2);
                    TILE_STORE(1);
                    SCALE_BLOCK(0, i);
                    if (i + 3 < n) TILE_PRODUCT(3, 5, 7, i + 3);
                    TILE_STORE(2);
                    SCALE_BLOCK(1, i + 1);
                    if (i + 4 < n) TILE_PRODUCT(0, 4, 6, i + 4);
                    TILE_STORE(3);
                    SCALE_BLOCK(2, i + 2);
                    if (i + 5 < n) TILE_PRODUCT(1, 5, 7, i + 5);
                    if (i + 4 < n) TILE_STORE(0);
                    SCALE_BLOCK(3, i + 3);
                }
                // Left: blocks i, i + 1 when n % 4 >= 2 (in tiles 0, 1; block i stored).
                if (i + 2 <= n) {
                    TILE_STORE(1);
                    SCALE_BLOCK(0, i);
                    SCALE_BLOCK(1, i + 1);
                    i += 2;
                }
            }
            for (; i < n; i++) {
                TILE_PRODUCT(0, 4, 6, i);
                TILE_STORE(0);
                SCALE_BLOCK(0, i);
            }
            _Pragma("GCC unroll 16")
            for (int c = 0; c < COLS; c++) _mm512_storeu_ps(st + c * lds, acc[c]);
        }
    }
}

}  // namespace

void repack_gemm_x16_q4_0(int64_t nb, const void * a, const void * b, size_t ldb, int n16, float * s, size_t lds) {
    if (!granted()) {
        for (int c = 0; c < 2 * n16; c++) ggml_cpu_avx512::repack_gemm_q4_0(nb, a, (const char *) b + 8 * c * ldb, ldb, 8, s + 8 * c * lds, lds);
        return;
    }
    gemm_x16<Q4_0>(nb, (const block_q4_0x16 *) a, (const char *) b, ldb, n16, s, lds);
}

void repack_gemm_x16_q8_0(int64_t nb, const void * a, const void * b, size_t ldb, int n16, float * s, size_t lds) {
    if (!granted()) {
        for (int c = 0; c < 2 * n16; c++) ggml_cpu_avx512::repack_gemm_q8_0(nb, a, (const char *) b + 8 * c * ldb, ldb, 8, s + 8 * c * lds, lds);
        return;
    }
    gemm_x16<Q8_0>(nb, (const block_q8_0x16 *) a, (const char *) b, ldb, n16, s, lds);
}

}  // namespace ggml_cpu_amx

#endif  // GGML_SIMD_AMX
