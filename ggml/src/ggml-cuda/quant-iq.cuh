// quant-iq.cuh - the IQ and ternary super-block types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
// IQ1_S, IQ1_M, IQ4_XS, TQ1_0, TQ2_0) read on the GPU: one value at a time (iq_dequant1) and a
// unit of 32 values at a time as signed bytes with a float factor per 16 values (iq_unit), the
// integer form the CPU's dot products with Q8_K use (ggml-cpu/quant-dot-iq.cpp). Layouts:
// quants.h; the reference decoders these match value for value: quants-iq.cpp. Part of quant.cuh
// (included there after its byte loaders: load_h, load_u32_a2, sub_bias4, iq4nl_value).
//
// A unit u of a row is values [32 u, 32 u + 32): sub-block u % 8 of super-block u / 8. Its value l
// is D0 * q_l (l < 16) or D1 * q_l, bit for bit the reference's float:
//  - IQ2 / IQ3: q = grid value times sign, D the sub-block's scale (IQ2_XS / IQ2_S: one per 16).
//  - IQ1_S / IQ1_M: x = dl * (grid + delta) with delta = +-1/8 per 8 values, so q = 8 grid +- 1 and
//    D = dl / 8 (exact: a power of two), which keeps the delta inside the integer sums.
//  - IQ4_XS: q = IQ4_NL's level, D = d * (ls - 32). TQ1_0 / TQ2_0: q = t - 1, D = d.
#pragma once

#include "common.cuh"
#include "quants-iq-grids.h"

// ---- the grids ------------------------------------------------------------------------------
// quants-iq-grids.h's packed tables expanded at compile time into the kernels' form (a point's
// coordinates as bytes): on the device in global memory (a warp's lookups scatter, which constant
// memory would serialize), on the host (test-cuda-host, the emulator) the same constant
// expression, so the host checks cover the device's tables too. IQ1's grid is kept as level + 1
// (0, 1, 2: unsigned bytes that shift and subtract without borrows between bytes).
namespace ggml_cuda_iq {
constexpr int8_t levels_iq1_plus1[4] = { ggml_iq::levels_iq1[0] + 1, ggml_iq::levels_iq1[1] + 1, ggml_iq::levels_iq1[2] + 1,
                                          ggml_iq::levels_iq1[3] + 1 };
}  // namespace ggml_cuda_iq

#ifdef __CUDA_ARCH__
#define GGML_CUDA_IQ_GRID_HOST(name, T, N, DIMS, BITS, packed, levels)
#define GGML_CUDA_IQ_GRID_AT(name, i) d_##name.v[i]
#else
#define GGML_CUDA_IQ_GRID_HOST(name, T, N, DIMS, BITS, packed, levels) \
    static constexpr ggml_iq::grid<T, N> h_##name = ggml_iq::expand<T, N, DIMS, BITS>(packed, levels);
#define GGML_CUDA_IQ_GRID_AT(name, i) h_##name.v[i]
#endif
#define GGML_CUDA_IQ_GRID(name, T, N, DIMS, BITS, packed, levels)                                                  \
    static __device__ constexpr ggml_iq::grid<T, N> d_##name = ggml_iq::expand<T, N, DIMS, BITS>(packed, levels); \
    GGML_CUDA_IQ_GRID_HOST(name, T, N, DIMS, BITS, packed, levels)

GGML_CUDA_IQ_GRID(iq2xxs_grid, uint64_t, 256, 8, 2, ggml_iq::iq2xxs_packed, ggml_iq::levels_iq2)
GGML_CUDA_IQ_GRID(iq2xs_grid, uint64_t, 512, 8, 2, ggml_iq::iq2xs_packed, ggml_iq::levels_iq2)
GGML_CUDA_IQ_GRID(iq2s_grid, uint64_t, 1024, 8, 2, ggml_iq::iq2s_packed, ggml_iq::levels_iq2)
GGML_CUDA_IQ_GRID(iq3xxs_grid, uint32_t, 256, 4, 3, ggml_iq::iq3xxs_packed, ggml_iq::levels_iq3xxs)
GGML_CUDA_IQ_GRID(iq3s_grid, uint32_t, 512, 4, 3, ggml_iq::iq3s_packed, ggml_iq::levels_iq3s)
GGML_CUDA_IQ_GRID(iq1s_grid_plus1, uint64_t, 2048, 8, 2, ggml_iq::iq1s_packed, ggml_cuda_iq::levels_iq1_plus1)

GGML_CUDA_HD uint64_t iq2xxs_point(int i) { return GGML_CUDA_IQ_GRID_AT(iq2xxs_grid, i); }
GGML_CUDA_HD uint64_t iq2xs_point(int i) { return GGML_CUDA_IQ_GRID_AT(iq2xs_grid, i); }
GGML_CUDA_HD uint64_t iq2s_point(int i) { return GGML_CUDA_IQ_GRID_AT(iq2s_grid, i); }
GGML_CUDA_HD uint32_t iq3xxs_point(int i) { return GGML_CUDA_IQ_GRID_AT(iq3xxs_grid, i); }
GGML_CUDA_HD uint32_t iq3s_point(int i) { return GGML_CUDA_IQ_GRID_AT(iq3s_grid, i); }
GGML_CUDA_HD uint64_t iq1s_point_plus1(int i) { return GGML_CUDA_IQ_GRID_AT(iq1s_grid_plus1, i); }

#undef GGML_CUDA_IQ_GRID
#undef GGML_CUDA_IQ_GRID_HOST
#undef GGML_CUDA_IQ_GRID_AT

// ---- signs ----------------------------------------------------------------------------------
// A 7-bit sign code of IQ2_XXS / IQ2_XS / IQ3_XXS to its sign byte: bit 7 makes the number of
// negatives even (quants.h's ggml_iq2_signs).
GGML_CUDA_HD uint32_t iq2_sign_byte(uint32_t code) {
#ifdef __CUDA_ARCH__
    return code | ((uint32_t) (__popc(code) & 1) << 7);
#else
    return code | ((uint32_t) (__builtin_popcount(code) & 1) << 7);
#endif
}

// 4 magnitudes (bytes 1..127: every grid value is at least 1) negated where bits 0..3 of s are
// set, as signed bytes: x ^ 0xFF + 1 per negated byte, which never carries since x > 0. The
// multiply spreads bits 0..3 to bit 0 of bytes 0..3 (its partial products never overlap).
GGML_CUDA_HD int signed4(uint32_t x, uint32_t s) {
    const uint32_t m = ((((s & 0xFu) * 0x00204081u) & 0x01010101u) * 0xFFu);
    return (int) ((x ^ m) + (m & 0x01010101u));
}

// Byte j of a grid point.
GGML_CUDA_HD int point_byte(uint64_t g, int j) { return (int) (uint8_t) (g >> (8 * j)); }

// ---- TQ1_0's base-3 bytes -------------------------------------------------------------------
// Value v (0..255) of a block: the byte that holds it and its digit there (quants-iq.cpp:
// qs[0..31] digits 0..4 for values 0..159, qs[32..47] for 160..239, qh[0..3] digits 0..3 for 240..255).
GGML_CUDA_HD int tq1_digit(const block_tq1_0 * b, int v) {
    int byte, n;
    if (v < 160) {
        byte = b->qs[v % 32];
        n = v / 32;
    } else if (v < 240) {
        byte = b->qs[32 + (v - 160) % 16];
        n = (v - 160) / 16;
    } else {
        byte = b->qh[(v - 240) % 4];
        n = (v - 240) / 4;
    }
    const int pow3 = n == 0 ? 1 : n == 1 ? 3 : n == 2 ? 9 : n == 3 ? 27 : 81;
    return ((int) (uint8_t) (byte * pow3) * 3) >> 8;  // the top base-3 digit of the byte times 3^n
}

// IQ1_M's F16 super-scale, spread over the top nibbles of its four scale words.
GGML_CUDA_HD float iq1m_scale(const uint16_t * sc) {
    return h2f((uint16_t) ((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000)));
}

// IQ4_XS's 6-bit scale of sub-block ib, minus 32.
GGML_CUDA_HD int iq4xs_scale(const block_iq4_xs * b, int ib) {
    return (((b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b->scales_h >> (2 * ib)) & 3) << 4)) - 32;
}

// ---- one value --------------------------------------------------------------------------------
// Value j of a row of one of these types (0 for other types): the reference decoder's float
// expression for that value, so the result is the same bits.
GGML_CUDA_HD float iq_dequant1(const char * row, int64_t j, int type) {
    const int v = (int) (j % QK_K), ib = v / 32, l = (v % 32) / 8, k = v % 8;  // sub-block, group of 8, place
    switch (type) {
        case GGML_TYPE_IQ2_XXS: {
            const block_iq2_xxs * b = (const block_iq2_xxs *) row + j / QK_K;
            const uint8_t * p = (const uint8_t *) (b->qs + 4 * ib);  // 4 grid indices, then the u32 of signs and scale
            const uint32_t aux = load_u32_a2(p + 4);
            const float db = load_h(&b->d) * (0.5f + (float) (aux >> 28)) * 0.25f;
            const uint32_t signs = iq2_sign_byte((aux >> (7 * l)) & 127);
            return db * point_byte(iq2xxs_point(p[l]), k) * ((signs >> k) & 1 ? -1.0f : 1.0f);
        }
        case GGML_TYPE_IQ2_XS: {
            const block_iq2_xs * b = (const block_iq2_xs *) row + j / QK_K;
            const int sc = (b->scales[ib] >> (4 * (l / 2))) & 0xF;
            const float db = load_h(&b->d) * (0.5f + sc) * 0.25f;
            const uint16_t q = b->qs[4 * ib + l];
            const uint32_t signs = iq2_sign_byte(q >> 9);
            return db * point_byte(iq2xs_point(q & 511), k) * ((signs >> k) & 1 ? -1.0f : 1.0f);
        }
        case GGML_TYPE_IQ2_S: {
            const block_iq2_s * b = (const block_iq2_s *) row + j / QK_K;
            const int sc = (b->scales[ib] >> (4 * (l / 2))) & 0xF;
            const float db = load_h(&b->d) * (0.5f + sc) * 0.25f;
            const int idx = b->qs[4 * ib + l] | (((b->qh[ib] >> (2 * l)) & 3) << 8);
            const int signs = b->qs[QK_K / 8 + 4 * ib + l];
            return db * point_byte(iq2s_point(idx), k) * ((signs >> k) & 1 ? -1.0f : 1.0f);
        }
        case GGML_TYPE_IQ3_XXS: {
            const block_iq3_xxs * b = (const block_iq3_xxs *) row + j / QK_K;
            const uint32_t aux = load_u32_a2(b->qs + QK_K / 4 + 4 * ib);
            const float db = load_h(&b->d) * (0.5f + (float) (aux >> 28)) * 0.5f;
            const uint32_t signs = iq2_sign_byte((aux >> (7 * l)) & 127);
            const uint32_t g = iq3xxs_point(b->qs[8 * ib + 2 * l + k / 4]);
            return db * point_byte(g, k % 4) * ((signs >> k) & 1 ? -1.0f : 1.0f);
        }
        case GGML_TYPE_IQ3_S: {
            const block_iq3_s * b = (const block_iq3_s *) row + j / QK_K;
            const float db = load_h(&b->d) * (1 + 2 * ((b->scales[ib / 2] >> (4 * (ib % 2))) & 0xF));
            const int h = 2 * l + k / 4;  // the 4-value point's index in the sub-block
            const int idx = b->qs[8 * ib + h] | (((b->qh[ib] >> h) & 1) << 8);
            const int signs = b->signs[4 * ib + l];
            return db * point_byte(iq3s_point(idx), k % 4) * ((signs >> k) & 1 ? -1.0f : 1.0f);
        }
        case GGML_TYPE_IQ1_S: {
            const block_iq1_s * b = (const block_iq1_s *) row + j / QK_K;
            const uint16_t qh = b->qh[ib];
            const float dl = load_h(&b->d) * (2 * ((qh >> 12) & 7) + 1);
            const float delta = qh & 0x8000 ? -IQ1S_DELTA : IQ1S_DELTA;
            const int level = point_byte(iq1s_point_plus1(b->qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)), k) - 1;
            return dl * (level + delta);
        }
        case GGML_TYPE_IQ1_M: {
            const block_iq1_m * b = (const block_iq1_m *) row + j / QK_K;
            const uint16_t * sc = (const uint16_t *) b->scales;
            const int h = (b->qh[2 * ib + l / 2] >> (4 * (l % 2))) & 0xF;  // 3 index bits, the delta's sign
            const int ls = (sc[ib / 2] >> (6 * (ib % 2) + 3 * (l / 2))) & 7;
            const float dl = iq1m_scale(sc) * (2 * ls + 1);
            const float delta = h & 8 ? -IQ1M_DELTA : IQ1M_DELTA;
            const int level = point_byte(iq1s_point_plus1(b->qs[4 * ib + l] | ((h & 7) << 8)), k) - 1;
            return dl * (level + delta);
        }
        case GGML_TYPE_IQ4_XS: {
            const block_iq4_xs * b = (const block_iq4_xs *) row + j / QK_K;
            const int t = v % 32;
            const uint8_t q = b->qs[16 * ib + t % 16];
            return load_h(&b->d) * iq4xs_scale(b, ib) * iq4nl_value(t < 16 ? (q & 0xF) : (q >> 4));
        }
        case GGML_TYPE_TQ1_0: {
            const block_tq1_0 * b = (const block_tq1_0 *) row + j / QK_K;
            return (float) (tq1_digit(b, v) - 1) * load_h(&b->d);
        }
        case GGML_TYPE_TQ2_0: {
            // byte 32 c + m holds values 128 c + 32 s + m in bits 2 s
            const block_tq2_0 * b = (const block_tq2_0 *) row + j / QK_K;
            const int c = v / 128, s = (v % 128) / 32, m = v % 32;
            return (float) (((b->qs[32 * c + m] >> (2 * s)) & 3) - 1) * load_h(&b->d);
        }
        default:
            return 0.0f;
    }
}

// ---- 32 values as bytes ------------------------------------------------------------------------
GGML_CUDA_HD constexpr bool iq_type(int t) {
    return t == GGML_TYPE_IQ2_XXS || t == GGML_TYPE_IQ2_XS || t == GGML_TYPE_IQ2_S || t == GGML_TYPE_IQ3_XXS || t == GGML_TYPE_IQ3_S ||
           t == GGML_TYPE_IQ1_S || t == GGML_TYPE_IQ1_M || t == GGML_TYPE_IQ4_XS || t == GGML_TYPE_TQ1_0 || t == GGML_TYPE_TQ2_0;
}

// Unit u of a row of type T: q[i] the signed bytes of values 4 i .. 4 i + 3 (q[0..3]: values
// 0..15, scaled by D0; q[4..7]: 16..31, by D1).
template <int T>
GGML_CUDA_HD void iq_unit(const char * row, int64_t u, int * q, float & D0, float & D1) {
    const int ib = (int) (u % 8);
    if constexpr (T == GGML_TYPE_IQ2_XXS) {
        const block_iq2_xxs * b = (const block_iq2_xxs *) row + u / 8;
        const uint8_t * p = (const uint8_t *) (b->qs + 4 * ib);  // 66-byte blocks: 2-byte aligned
        const uint32_t aux = load_u32_a2(p + 4);
        D0 = D1 = load_h(&b->d) * (0.5f + (float) (aux >> 28)) * 0.25f;
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const uint64_t g = iq2xxs_point(p[l]);
            const uint32_t s = iq2_sign_byte((aux >> (7 * l)) & 127);
            q[2 * l] = signed4((uint32_t) g, s);
            q[2 * l + 1] = signed4((uint32_t) (g >> 32), s >> 4);
        }
    } else if constexpr (T == GGML_TYPE_IQ2_XS) {
        const block_iq2_xs * b = (const block_iq2_xs *) row + u / 8;
        const float d = load_h(&b->d);
        const int sc = b->scales[ib];
        D0 = d * (0.5f + (sc & 0xF)) * 0.25f;
        D1 = d * (0.5f + (sc >> 4)) * 0.25f;
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const uint32_t w = b->qs[4 * ib + l];
            const uint64_t g = iq2xs_point(w & 511);
            const uint32_t s = iq2_sign_byte(w >> 9);
            q[2 * l] = signed4((uint32_t) g, s);
            q[2 * l + 1] = signed4((uint32_t) (g >> 32), s >> 4);
        }
    } else if constexpr (T == GGML_TYPE_IQ2_S) {
        const block_iq2_s * b = (const block_iq2_s *) row + u / 8;
        const float d = load_h(&b->d);
        const int sc = b->scales[ib], qh = b->qh[ib];
        D0 = d * (0.5f + (sc & 0xF)) * 0.25f;
        D1 = d * (0.5f + (sc >> 4)) * 0.25f;
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const uint64_t g = iq2s_point(b->qs[4 * ib + l] | (((qh >> (2 * l)) & 3) << 8));
            const uint32_t s = b->qs[QK_K / 8 + 4 * ib + l];
            q[2 * l] = signed4((uint32_t) g, s);
            q[2 * l + 1] = signed4((uint32_t) (g >> 32), s >> 4);
        }
    } else if constexpr (T == GGML_TYPE_IQ3_XXS) {
        const block_iq3_xxs * b = (const block_iq3_xxs *) row + u / 8;
        const uint32_t aux = load_u32_a2(b->qs + QK_K / 4 + 4 * ib);
        D0 = D1 = load_h(&b->d) * (0.5f + (float) (aux >> 28)) * 0.5f;
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const uint32_t s = iq2_sign_byte((aux >> (7 * l)) & 127);
            q[2 * l] = signed4(iq3xxs_point(b->qs[8 * ib + 2 * l]), s);
            q[2 * l + 1] = signed4(iq3xxs_point(b->qs[8 * ib + 2 * l + 1]), s >> 4);
        }
    } else if constexpr (T == GGML_TYPE_IQ3_S) {
        const block_iq3_s * b = (const block_iq3_s *) row + u / 8;
        D0 = D1 = load_h(&b->d) * (1 + 2 * ((b->scales[ib / 2] >> (4 * (ib % 2))) & 0xF));
        const int qh = b->qh[ib];
#pragma unroll
        for (int h = 0; h < 8; h++) {  // 4-value points: bit h of qh is point h's ninth index bit
            const uint32_t g = iq3s_point(b->qs[8 * ib + h] | (((qh >> h) & 1) << 8));
            q[h] = signed4(g, (uint32_t) b->signs[4 * ib + h / 2] >> (4 * (h % 2)));
        }
    } else if constexpr (T == GGML_TYPE_IQ1_S || T == GGML_TYPE_IQ1_M) {
        // q = 8 (level + 1) - (8 - delta): the grid's bytes level + 1 (0..2) times 8 fit a byte each
        int idx[4], bias[4];  // per 8 values: the 11-bit grid index and 8 - delta (7 or 9)
        if constexpr (T == GGML_TYPE_IQ1_S) {
            const block_iq1_s * b = (const block_iq1_s *) row + u / 8;
            const int qh = b->qh[ib];
            D0 = D1 = load_h(&b->d) * (2 * ((qh >> 12) & 7) + 1) * 0.125f;  // dl / 8 (IQ1S_DELTA)
#pragma unroll
            for (int l = 0; l < 4; l++) {
                idx[l] = b->qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8);
                bias[l] = qh & 0x8000 ? 9 : 7;
            }
        } else {
            const block_iq1_m * b = (const block_iq1_m *) row + u / 8;
            const uint16_t * sc = (const uint16_t *) b->scales;
            const float d = iq1m_scale(sc);
            const int s = sc[ib / 2] >> (6 * (ib % 2));
            D0 = d * (2 * (s & 7) + 1) * 0.125f;  // dl / 8 (IQ1M_DELTA), per 16 values
            D1 = d * (2 * ((s >> 3) & 7) + 1) * 0.125f;
#pragma unroll
            for (int l = 0; l < 4; l++) {
                const int h = (b->qh[2 * ib + l / 2] >> (4 * (l % 2))) & 0xF;
                idx[l] = b->qs[4 * ib + l] | ((h & 7) << 8);
                bias[l] = h & 8 ? 9 : 7;
            }
        }
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const uint64_t g = iq1s_point_plus1(idx[l]);
            q[2 * l] = sub_bias4((uint32_t) g << 3, (uint32_t) bias[l]);
            q[2 * l + 1] = sub_bias4((uint32_t) (g >> 32) << 3, (uint32_t) bias[l]);
        }
    } else if constexpr (T == GGML_TYPE_IQ4_XS) {
        const block_iq4_xs * b = (const block_iq4_xs *) row + u / 8;
        D0 = D1 = load_h(&b->d) * iq4xs_scale(b, ib);
        const uint32_t * qs = (const uint32_t *) (b->qs + 16 * ib);  // 136-byte blocks, qs at 8: 4-byte aligned
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t w = qs[i];
            uint32_t lo = 0, hi = 0;
#pragma unroll
            for (int t = 0; t < 4; t++) {
                lo |= (uint32_t) (uint8_t) iq4nl_value((w >> (8 * t)) & 0xF) << (8 * t);
                hi |= (uint32_t) (uint8_t) iq4nl_value((w >> (8 * t + 4)) & 0xF) << (8 * t);
            }
            q[i] = (int) lo;
            q[4 + i] = (int) hi;
        }
    } else if constexpr (T == GGML_TYPE_TQ1_0) {
        const block_tq1_0 * b = (const block_tq1_0 *) row + u / 8;
        D0 = D1 = load_h(&b->d);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            uint32_t w = 0;
#pragma unroll
            for (int t = 0; t < 4; t++) w |= (uint32_t) tq1_digit(b, 32 * ib + 4 * i + t) << (8 * t);
            q[i] = sub_bias4(w, 1);
        }
    } else if constexpr (T == GGML_TYPE_TQ2_0) {
        // unit (c, s) = 4 c + s: bits 2 s of qs[32 c .. 32 c + 31]
        const block_tq2_0 * b = (const block_tq2_0 *) row + u / 8;
        const int c = ib / 4, s = ib % 4;
        D0 = D1 = load_h(&b->d);
#pragma unroll
        for (int i = 0; i < 8; i++) q[i] = sub_bias4((load_u32_a2(b->qs + 32 * c + 4 * i) >> (2 * s)) & 0x03030303u, 1);
    } else {
        static_assert(iq_type(T), "iq_unit: an IQ or ternary type");
    }
}

// The unit's 32 values as floats: D * q, the reference's value bit for bit (see above).
template <int T>
GGML_CUDA_HD void iq_dequant_unit(const char * row, int64_t u, float * v) {
    int q[8];
    float D0, D1;
    iq_unit<T>(row, u, q, D0, D1);
#pragma unroll
    for (int i = 0; i < 8; i++) {
#pragma unroll
        for (int t = 0; t < 4; t++) v[4 * i + t] = (i < 4 ? D0 : D1) * (float) (int8_t) (q[i] >> (8 * t));
    }
}
