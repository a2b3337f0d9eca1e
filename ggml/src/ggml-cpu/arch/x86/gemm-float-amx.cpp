// gemm-float-amx.cpp - mul_mat's packed GEMM for F16 and BF16 weights on AMX-BF16 tiles (the
// AMX set's mm_type; the other entries, and all of them where the OS grants no tile state, are
// the AVX512 set's).
//
// An F16 value is exactly the sum of two bf16 values: its 11 significant bits split into 8 (hi,
// the value rounded to bf16) and at most 3 (lo = value - hi). So the product of an F16 weight
// with an F16 activation (b is converted to F16, as for the FMA kernels) is the sum of four exact
// bf16 products, and the tiles compute, in F32, the same exact products the FMA kernels do; only
// the additions differ (four parts, the tiles' order), so sums differ from the scalar reference's
// in their last bits. BF16 weights (with bf16 activations) take one tile product.
//
// C tiles: 16 tokens (rows) x 16 weights, so they load from and store to dst as they are; a
// micro-tile is 2 x 2 of them. Per group of 32 values of k, a packed panel holds P parts x 2
// halves of 1 KiB tiles, tile (p, h) at (2 p + h) KiB (the packing buffers are cache-aligned):
//  - weights (pack_a, 32 rows): tile (p, h) holds, for 16 pairs of k, the pairs of rows 16 h ..
//    16 h + 15 (the tiles' pair layout, a transpose of the rows);
//  - tokens (pack_b, 32 rows): tile (p, h) holds rows 16 h .. 16 h + 15, 32 bf16 each.
// The k values past the last whole group are packed plainly (F16: F32 values, BF16: bf16 pairs,
// unit u of row i at u * 32 + i) and added by vector FMAs / vdpbf16ps after the tiles.
#include "amx.h"

#if defined(GGML_SIMD_AMX) && (defined(__AMX_BF16__) || defined(__AMXBF16__)) && defined(__AVX512BF16__)

#include "../../vec.h"
#include "simd-avx512.h"

namespace ggml_cpu_amx {

namespace {

constexpr int MR = 32, NR = 32;  // rows of a (weights) and of b (tokens) per micro-tile
constexpr int KG = 32;           // values of k per group: one tile's depth
constexpr int TILE = 1024;       // bytes

template <typename T> struct Float;
template <> struct Float<ggml_fp16_t> {
    static constexpr int P = 2, K_UNIT = 1;
    // n <= 32 values (zeros after) -> hi, lo as 32 bf16 each (hi + lo is the value, exactly).
    static void parts(const void * src, int n, __m512i out[P]) {
        const __m512i v = _mm512_maskz_loadu_epi16(n >= 32 ? ~0u : (1u << n) - 1, src);
        const __m512 f0 = _mm512_cvtph_ps(_mm512_castsi512_si256(v)), f1 = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(v, 1));
        const __m512bh h = _mm512_cvtne2ps_pbh(f1, f0);
        const __m512 h0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256((__m512i) h)), 16));
        const __m512 h1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64((__m512i) h, 1)), 16));
        out[0] = (__m512i) h;
        out[1] = (__m512i) _mm512_cvtne2ps_pbh(_mm512_sub_ps(f1, h1), _mm512_sub_ps(f0, h0));
    }
};
template <> struct Float<ggml_bf16_t> {
    static constexpr int P = 1, K_UNIT = 2;
    static void parts(const void * src, int n, __m512i out[P]) { out[0] = _mm512_maskz_loadu_epi16(n >= 32 ? ~0u : (1u << n) - 1, src); }
};

// The values past the whole groups, plainly: F16 as F32 values, BF16 as pairs (zero past nk).
template <typename T> void pack_tail(const char * src, size_t ld, int rows, int64_t k0, int64_t nk, uint32_t * dst) {
    const int64_t nu = (nk + Float<T>::K_UNIT - 1) / Float<T>::K_UNIT;
    for (int64_t u = 0; u < nu; u++)
        for (int i = 0; i < 32; i++) {
            uint32_t v = 0;
            if (i < rows) {
                const T * row = (const T *) (src + i * ld) + k0;
                if constexpr (Float<T>::K_UNIT == 1) {
                    const float f = GGML_FP16_TO_FP32(row[u]);
                    memcpy(&v, &f, 4);
                } else {
                    v = row[2 * u].bits | (2 * u + 1 < nk ? (uint32_t) row[2 * u + 1].bits << 16 : 0u);
                }
            }
            dst[u * 32 + i] = v;
        }
}

constexpr size_t group_bytes(int P) { return (size_t) P * 2 * TILE; }

// Whole groups of units in nk values (micro counts them from its units): for BF16 the last
// group may lack its last value (an odd nk), which packs as zero.
template <typename T> int64_t groups(int64_t nk) {
    constexpr int U = Float<T>::K_UNIT;
    return (nk + U - 1) / U / (KG / U);
}

// Row `row`'s parts for group g (zeros for a row past `rows`).
template <typename T> void row_parts(const char * s, size_t ld, int rows, int row, int64_t k0, int64_t nk, int64_t g, __m512i parts[]) {
    if (row < rows) {
        Float<T>::parts((const T *) (s + row * ld) + k0 + g * KG, (int) (nk - g * KG), parts);
    } else {
        for (int p = 0; p < Float<T>::P; p++) parts[p] = _mm512_setzero_si512();
    }
}

// Weights: per group, tile (p, h) = 16 pairs of k x rows 16 h .. 16 h + 15.
template <typename T> void pack_a(const void * src, size_t ld, int rows, int width, int64_t k0, int64_t nk, void * dst) {
    constexpr int P = Float<T>::P;
    GGML_ASSERT(width == MR);
    const char * s = (const char *) src;
    char * d = (char *) dst;
    const int64_t ng = groups<T>(nk);
    for (int64_t g = 0; g < ng; g++, d += group_bytes(P))
        for (int h = 0; h < 2; h++) {
            __m512i r[P][16];
            for (int i = 0; i < 16; i++) {
                __m512i parts[P];
                row_parts<T>(s, ld, rows, 16 * h + i, k0, nk, g, parts);
                for (int p = 0; p < P; p++) r[p][i] = parts[p];
            }
            for (int p = 0; p < P; p++) {
                ggml_simd::avx512::transpose(r[p]);
                for (int u = 0; u < 16; u++) _mm512_storeu_si512(d + (p * 2 + h) * TILE + 64 * u, r[p][u]);
            }
        }
    if (nk > ng * KG) pack_tail<T>(s, ld, rows, k0 + ng * KG, nk - ng * KG, (uint32_t *) d);
}

// Tokens: per group, tile (p, h) = rows 16 h .. 16 h + 15, 32 bf16 each.
template <typename T> void pack_b(const void * src, size_t ld, int rows, int width, int64_t k0, int64_t nk, void * dst) {
    constexpr int P = Float<T>::P;
    GGML_ASSERT(width == NR);
    const char * s = (const char *) src;
    char * d = (char *) dst;
    const int64_t ng = groups<T>(nk);
    for (int64_t g = 0; g < ng; g++, d += group_bytes(P))
        for (int j = 0; j < NR; j++) {
            __m512i parts[P];
            row_parts<T>(s, ld, rows, j, k0, nk, g, parts);
            for (int p = 0; p < P; p++) _mm512_storeu_si512(d + (p * 2 + j / 16) * TILE + 64 * (j % 16), parts[p]);
        }
    if (nk > ng * KG) pack_tail<T>(s, ld, rows, k0 + ng * KG, nk - ng * KG, (uint32_t *) d);
}

// The tail: c[j][i] += sum over its units of a's unit (u, i) x b's unit (u, j).
template <typename T> void micro_tail(int64_t nu, const uint32_t * a, const uint32_t * b, float * c, size_t ldc) {
    for (int j = 0; j < NR; j++) {
        __m512 c0 = _mm512_loadu_ps(c + j * ldc), c1 = _mm512_loadu_ps(c + j * ldc + 16);
        for (int64_t u = 0; u < nu; u++) {
            const __m512i a0 = _mm512_loadu_si512(a + u * 32), a1 = _mm512_loadu_si512(a + u * 32 + 16);
            const __m512i bj = _mm512_set1_epi32((int) b[u * 32 + j]);
            if constexpr (Float<T>::K_UNIT == 1) {
                c0 = _mm512_fmadd_ps(_mm512_castsi512_ps(a0), _mm512_castsi512_ps(bj), c0);
                c1 = _mm512_fmadd_ps(_mm512_castsi512_ps(a1), _mm512_castsi512_ps(bj), c1);
            } else {
                c0 = _mm512_dpbf16_ps(c0, (__m512bh) a0, (__m512bh) bj);
                c1 = _mm512_dpbf16_ps(c1, (__m512bh) a1, (__m512bh) bj);
            }
        }
        _mm512_storeu_ps(c + j * ldc, c0);
        _mm512_storeu_ps(c + j * ldc + 16, c1);
    }
}

// Tiles 0-3: C (tokens half i, weights half j) at 2 i + j; 4, 5: weights; 6, 7: tokens.
template <int P> void groups_tiles(int64_t ng, const char * a, const char * b, float * c, size_t ldc, bool accumulate) {
    configure(Tiles::full);
    __asm__ volatile("" ::: "memory");  // the tile loads read what the packing wrote (GCC's tile intrinsics declare no memory read)
    const long ldc_b = (long) (ldc * sizeof(float));
    if (accumulate) {
        _tile_loadd(0, c, ldc_b);
        _tile_loadd(1, c + 16, ldc_b);
        _tile_loadd(2, c + 16 * ldc, ldc_b);
        _tile_loadd(3, c + 16 * ldc + 16, ldc_b);
    } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    }
    for (int64_t g = 0; g < ng; g++, a += group_bytes(P), b += group_bytes(P)) {
        _tile_loadd(4, a, 64);
        _tile_loadd(5, a + TILE, 64);
        _tile_loadd(6, b, 64);
        _tile_loadd(7, b + TILE, 64);
        _tile_dpbf16ps(0, 6, 4);
        _tile_dpbf16ps(1, 6, 5);
        _tile_dpbf16ps(2, 7, 4);
        _tile_dpbf16ps(3, 7, 5);
        if constexpr (P == 2) {  // hi x hi, then lo x hi, lo x lo, hi x lo
            _tile_loadd(6, b + 2 * TILE, 64);
            _tile_loadd(7, b + 3 * TILE, 64);
            _tile_dpbf16ps(0, 6, 4);
            _tile_dpbf16ps(1, 6, 5);
            _tile_dpbf16ps(2, 7, 4);
            _tile_dpbf16ps(3, 7, 5);
            _tile_loadd(4, a + 2 * TILE, 64);
            _tile_loadd(5, a + 3 * TILE, 64);
            _tile_dpbf16ps(0, 6, 4);
            _tile_dpbf16ps(1, 6, 5);
            _tile_dpbf16ps(2, 7, 4);
            _tile_dpbf16ps(3, 7, 5);
            _tile_loadd(6, b, 64);
            _tile_loadd(7, b + TILE, 64);
            _tile_dpbf16ps(0, 6, 4);
            _tile_dpbf16ps(1, 6, 5);
            _tile_dpbf16ps(2, 7, 4);
            _tile_dpbf16ps(3, 7, 5);
        }
    }
    _tile_stored(0, c, ldc_b);
    _tile_stored(1, c + 16, ldc_b);
    _tile_stored(2, c + 16 * ldc, ldc_b);
    _tile_stored(3, c + 16 * ldc + 16, ldc_b);
}

template <typename T> void micro(int64_t nu, const void * a, const void * b, float * c, size_t ldc, bool accumulate) {
    constexpr int P = Float<T>::P, GU = KG / Float<T>::K_UNIT;  // units per group
    const int64_t ng = nu / GU, tail = nu % GU;
    groups_tiles<P>(ng, (const char *) a, (const char *) b, c, ldc, accumulate);
    if (tail) {
        micro_tail<T>(tail, (const uint32_t *) ((const char *) a + ng * group_bytes(P)),
                      (const uint32_t *) ((const char *) b + ng * group_bytes(P)), c, ldc);
    }
}

// Cache blocks: 1024 values of k (a 32-token slice of b: 128 KiB), MC rows of a (512 KiB): pp512
// of the F16 TinyLlama, kc x mc of 512..2048 x 32..256: 203-249 t/s, this the best.
constexpr int KC_F16 = 1024, KC_BF16 = 512, MC = 128, MIN_N = 16;
const ggml_gemm_kernel gemm_f16 = { MR, NR, 1, KC_F16, MC, MIN_N, pack_a<ggml_fp16_t>, pack_b<ggml_fp16_t>, micro<ggml_fp16_t>, KG };
const ggml_gemm_kernel gemm_bf16 = { MR, NR, 2, KC_BF16, MC, MIN_N, pack_a<ggml_bf16_t>, pack_b<ggml_bf16_t>, micro<ggml_bf16_t>, KG / 2 };

}  // namespace

const ggml_mm_type_kernels * mm_type(ggml_type type) {
    static const ggml_mm_type_kernels f16 = [] {
        ggml_mm_type_kernels k = *ggml_cpu_avx512::mm_type_pf(GGML_TYPE_F16);
        k.gemm = &gemm_f16;
        return k;
    }();
    static const ggml_mm_type_kernels bf16 = [] {
        ggml_mm_type_kernels k = *ggml_cpu_avx512::mm_type_pf(GGML_TYPE_BF16);
        k.gemm = &gemm_bf16;
        return k;
    }();
    if (!granted()) return ggml_cpu_avx512::mm_type_pf(type);  // no tiles: the FMA GEMMs
    switch (type) {
        case GGML_TYPE_F16:  return &f16;
        case GGML_TYPE_BF16: return &bf16;
        default:             return ggml_cpu_avx512::mm_type_pf(type);
    }
}

}  // namespace ggml_cpu_amx

#endif
