// quant-dot-iq-neon.cpp - NEON dot products of the IQ and ternary types with Q8_K (aarch64),
// held to the scalar references of quant-dot-iq.cpp (which documents each type's integer form).
//
// Per 16 values the weights become signed bytes in one register (grid points loaded from the
// expanded grids two u64 / four u32 at a time, IQ4_XS's levels by a table lookup, signs applied
// as (q ^ m) - m with m the sign bits expanded to byte masks) and SDOT (vdotq_s32) sums their
// products with the activations into s32 lanes. Sub-block sums are gathered four to a vector
// (lane_sums) and multiplied by the sub-blocks' integer scales; the super-block's integer sum is
// scaled in float once, as the reference does. Without the dot product extension, the products
// go through widening multiplies (dot16 below).
#include "kernels-arm.h"

#if defined(GGML_SIMD_NEON)

#include "quant-dot-neon.h"

#include "../../../quants-iq-grids.h"

#include <arm_neon.h>

#include <string.h>

namespace ggml_cpu_neon {
namespace {

// 32 values (two registers) against y.
inline int32x4_t dot32(int8x16_t w0, int8x16_t w1, const int8_t * y) {
    return dot16(dot16(vdupq_n_s32(0), w0, vld1q_s8(y)), w1, vld1q_s8(y + 16));
}

// The four whole-vector sums of d0..d3 as the lanes of one vector.
inline int32x4_t lane_sums(int32x4_t d0, int32x4_t d1, int32x4_t d2, int32x4_t d3) {
    return vpaddq_s32(vpaddq_s32(d0, d1), vpaddq_s32(d2, d3));
}

// Grid points: two u64 (16 values) / four u32 (16 values) in one register, entry 0 lowest.
template <typename G> inline uint8x16_t grid2(const G & g, unsigned i0, unsigned i1) {
    return vreinterpretq_u8_u64(vcombine_u64(vld1_u64((const uint64_t *) &g.v[i0]), vld1_u64((const uint64_t *) &g.v[i1])));
}
template <typename G> inline uint8x16_t grid4x32(const G & g, unsigned i0, unsigned i1, unsigned i2, unsigned i3) {
    uint32x2_t lo = vld1_dup_u32(&g.v[i0]), hi = vld1_dup_u32(&g.v[i2]);
    lo = vld1_lane_u32(&g.v[i1], lo, 1);
    hi = vld1_lane_u32(&g.v[i3], hi, 1);
    return vreinterpretq_u8_u32(vcombine_u32(lo, hi));
}

// Sign bytes k and k + 1 of s (bit j set: value j of its 8 negative) as 16 byte masks, 0xFF
// where negative: bytes 0..7 from s[k], 8..15 from s[k + 1].
inline uint8x16_t sign_mask(uint8x16_t s, int k) {
    static const uint8_t bits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t idx = vcombine_u8(vdup_n_u8((uint8_t) k), vdup_n_u8((uint8_t) (k + 1)));
    return vtstq_u8(vqtbl1q_u8(s, idx), vld1q_u8(bits));
}

// Grid bytes (unsigned magnitudes) with the signs of mask m: (q ^ m) - m.
inline int8x16_t apply_sign(uint8x16_t q, uint8x16_t m) { return vsubq_s8(s8(veorq_u8(q, m)), s8(m)); }

// Bytes of 7-bit sign codes with their parity bit 7 (the count of negatives is even).
inline uint8x16_t add_parity(uint8x16_t c) { return vorrq_u8(c, vshlq_n_u8(vcntq_u8(c), 7)); }

// IQ2_XXS / IQ3_XXS: 4 u32 words (one per sub-block) of four 7-bit sign codes (bits 7 l) and
// a 4-bit scale: the 16 sign bytes (byte 4 ib + l) and the odd scales 2 s + 1.
inline uint8x16_t xxs_sign_bytes(uint32x4_t aux) {
    // Codes 2, 3 move up by 2 bits (to bits 16..29), then in each 16-bit half the upper code up
    // by 1: every code starts a byte.
    const uint32x4_t t = vorrq_u32(vandq_u32(aux, vdupq_n_u32(0x3FFF)), vandq_u32(vshlq_n_u32(aux, 2), vdupq_n_u32(0x3FFF0000)));
    const uint32x4_t c = vorrq_u32(vandq_u32(t, vdupq_n_u32(0x007F007F)), vandq_u32(vshlq_n_u32(t, 1), vdupq_n_u32(0x7F007F00)));
    return add_parity(vreinterpretq_u8_u32(c));
}

inline int32x4_t xxs_scales(uint32x4_t aux) {
    return vreinterpretq_s32_u32(vorrq_u32(vshlq_n_u32(vshrq_n_u32(aux, 28), 1), vdupq_n_u32(1)));
}

// The 16 odd scales 2 n + 1 of the nibbles of 8 bytes (low nibble first), as 4 s32 vectors.
inline void odd_nibble_scales(const uint8_t * p, int32x4_t sc[4]) {
    const uint8x8_t s = vld1_u8(p);
    const uint8x8_t lo = vand_u8(s, vdup_n_u8(0x0F)), hi = vshr_n_u8(s, 4);
    const uint8x16_t n = vcombine_u8(vzip1_u8(lo, hi), vzip2_u8(lo, hi));
    const uint8x16_t odd = vorrq_u8(vshlq_n_u8(n, 1), vdupq_n_u8(1));
    const uint16x8_t w0 = vmovl_u8(vget_low_u8(odd)), w1 = vmovl_high_u8(odd);
    sc[0] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(w0)));
    sc[1] = vreinterpretq_s32_u32(vmovl_high_u16(w0));
    sc[2] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(w1)));
    sc[3] = vreinterpretq_s32_u32(vmovl_high_u16(w1));
}

// ---- IQ2 ------------------------------------------------------------------------------------
// IQ2_XXS: per sub-block 4 index bytes and a u32 of sign codes and scale (qs as 8 u32 pairs).
float dot_iq2_xxs(int64_t n, const void * va, const void * vb) {
    return ggml_quant_dot_blocks_K<block_iq2_xxs>(n, va, vb, [](const block_iq2_xxs & a, const block_q8_K & b) {
        const uint8_t * idx = (const uint8_t *) a.qs;
        int32x4_t acc = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            const uint32x4_t aux = vld2q_u32((const uint32_t *) (a.qs + 16 * h)).val[1];
            const uint8x16_t signs = xxs_sign_bytes(aux);
            int32x4_t d[4];
            for (int k = 0; k < 4; k++) {
                const uint8_t * i = idx + 32 * h + 8 * k;
                const int8_t * y = b.qs + 128 * h + 32 * k;
                const int8x16_t w0 = apply_sign(grid2(ggml_iq2xxs_grid, i[0], i[1]), sign_mask(signs, 4 * k));
                const int8x16_t w1 = apply_sign(grid2(ggml_iq2xxs_grid, i[2], i[3]), sign_mask(signs, 4 * k + 2));
                d[k] = dot32(w0, w1, y);
            }
            acc = vmlaq_s32(acc, lane_sums(d[0], d[1], d[2], d[3]), xxs_scales(aux));
        }
        return 0.125f * h2f(a.d) * b.d * (float) vaddvq_s32(acc);
    });
}

// IQ2_XS: u16 per 8 values, a 9-bit index and a 7-bit sign code; 4-bit scales per 16 values.
float dot_iq2_xs(int64_t n, const void * va, const void * vb) {
    return ggml_quant_dot_blocks_K<block_iq2_xs>(n, va, vb, [](const block_iq2_xs & a, const block_q8_K & b) {
        int32x4_t sc[4];
        odd_nibble_scales(a.scales, sc);
        int32x4_t acc = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            const uint16x8_t q0 = vld1q_u16(a.qs + 16 * h), q1 = vld1q_u16(a.qs + 16 * h + 8);
            const uint8x16_t signs = add_parity(vcombine_u8(vmovn_u16(vshrq_n_u16(q0, 9)), vmovn_u16(vshrq_n_u16(q1, 9))));
            uint16_t idx[16];
            vst1q_u16(idx, vandq_u16(q0, vdupq_n_u16(511)));
            vst1q_u16(idx + 8, vandq_u16(q1, vdupq_n_u16(511)));
            // d[2 k + j]: values 16 j .. 16 j + 15 of sub-block 4 h + k (one scale each).
            int32x4_t d[8];
            for (int k = 0; k < 4; k++) {
                const int8_t * y = b.qs + 128 * h + 32 * k;
                const int8x16_t w0 = apply_sign(grid2(ggml_iq2xs_grid, idx[4 * k], idx[4 * k + 1]), sign_mask(signs, 4 * k));
                const int8x16_t w1 = apply_sign(grid2(ggml_iq2xs_grid, idx[4 * k + 2], idx[4 * k + 3]), sign_mask(signs, 4 * k + 2));
                d[2 * k] = dot16(vdupq_n_s32(0), w0, vld1q_s8(y));
                d[2 * k + 1] = dot16(vdupq_n_s32(0), w1, vld1q_s8(y + 16));
            }
            acc = vmlaq_s32(acc, lane_sums(d[0], d[1], d[2], d[3]), sc[2 * h]);
            acc = vmlaq_s32(acc, lane_sums(d[4], d[5], d[6], d[7]), sc[2 * h + 1]);
        }
        return 0.125f * h2f(a.d) * b.d * (float) vaddvq_s32(acc);
    });
}

// IQ2_S: 10-bit indices (low bytes in qs[0..32), 2 high bits each in qh), explicit sign bytes
// (qs[32..64)), scales as IQ2_XS.
float dot_iq2_s(int64_t n, const void * va, const void * vb) {
    return ggml_quant_dot_blocks_K<block_iq2_s>(n, va, vb, [](const block_iq2_s & a, const block_q8_K & b) {
        int32x4_t sc[4];
        odd_nibble_scales(a.scales, sc);
        // Index k's high bits: (qh[k / 4] >> 2 (k % 4)) & 3 (a right shift by a negative count).
        static const int8_t shr[16] = {0, -2, -4, -6, 0, -2, -4, -6, 0, -2, -4, -6, 0, -2, -4, -6};
        static const uint8_t rep[16] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3};
        const uint8x16_t qh = vcombine_u8(vld1_u8(a.qh), vdup_n_u8(0));
        int32x4_t acc = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            const uint8x16_t hb = vqtbl1q_u8(qh, vaddq_u8(vld1q_u8(rep), vdupq_n_u8((uint8_t) (4 * h))));
            const uint8x16_t hi = vandq_u8(vshlq_u8(hb, vld1q_s8(shr)), vdupq_n_u8(3));
            const uint8x16_t lo = vld1q_u8(a.qs + 16 * h);
            uint16_t idx[16];
            vst1q_u8((uint8_t *) idx, vzip1q_u8(lo, hi));
            vst1q_u8((uint8_t *) (idx + 8), vzip2q_u8(lo, hi));
            const uint8x16_t signs = vld1q_u8(a.qs + QK_K / 8 + 16 * h);
            int32x4_t d[8];
            for (int k = 0; k < 4; k++) {
                const int8_t * y = b.qs + 128 * h + 32 * k;
                const int8x16_t w0 = apply_sign(grid2(ggml_iq2s_grid, idx[4 * k], idx[4 * k + 1]), sign_mask(signs, 4 * k));
                const int8x16_t w1 = apply_sign(grid2(ggml_iq2s_grid, idx[4 * k + 2], idx[4 * k + 3]), sign_mask(signs, 4 * k + 2));
                d[2 * k] = dot16(vdupq_n_s32(0), w0, vld1q_s8(y));
                d[2 * k + 1] = dot16(vdupq_n_s32(0), w1, vld1q_s8(y + 16));
            }
            acc = vmlaq_s32(acc, lane_sums(d[0], d[1], d[2], d[3]), sc[2 * h]);
            acc = vmlaq_s32(acc, lane_sums(d[4], d[5], d[6], d[7]), sc[2 * h + 1]);
        }
        return 0.125f * h2f(a.d) * b.d * (float) vaddvq_s32(acc);
    });
}

// ---- IQ3 ------------------------------------------------------------------------------------
// IQ3_XXS: 8 index bytes per sub-block (4 values each), then 8 u32 of sign codes and scales.
float dot_iq3_xxs(int64_t n, const void * va, const void * vb) {
    return ggml_quant_dot_blocks_K<block_iq3_xxs>(n, va, vb, [](const block_iq3_xxs & a, const block_q8_K & b) {
        int32x4_t acc = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            uint32x4_t aux;
            memcpy(&aux, a.qs + QK_K / 4 + 16 * h, sizeof(aux));
            const uint8x16_t signs = xxs_sign_bytes(aux);
            int32x4_t d[4];
            for (int k = 0; k < 4; k++) {
                const uint8_t * i = a.qs + 32 * h + 8 * k;
                const int8x16_t w0 = apply_sign(grid4x32(ggml_iq3xxs_grid, i[0], i[1], i[2], i[3]), sign_mask(signs, 4 * k));
                const int8x16_t w1 = apply_sign(grid4x32(ggml_iq3xxs_grid, i[4], i[5], i[6], i[7]), sign_mask(signs, 4 * k + 2));
                d[k] = dot32(w0, w1, b.qs + 128 * h + 32 * k);
            }
            acc = vmlaq_s32(acc, lane_sums(d[0], d[1], d[2], d[3]), xxs_scales(aux));
        }
        return 0.25f * h2f(a.d) * b.d * (float) vaddvq_s32(acc);
    });
}

// IQ3_S: 9-bit indices (low bytes in qs, bit j of qh[ib] the high bit of index 8 ib + j),
// explicit sign bytes, a 4-bit scale per sub-block.
float dot_iq3_s(int64_t n, const void * va, const void * vb) {
    return ggml_quant_dot_blocks_K<block_iq3_s>(n, va, vb, [](const block_iq3_s & a, const block_q8_K & b) {
        static const uint8_t bits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
        const uint8x16_t qh = vcombine_u8(vld1_u8(a.qh), vdup_n_u8(0));
        // 1 + 2 ls per sub-block, ls the nibbles of scales (low first).
        const uint8x8_t s = vreinterpret_u8_u32(vdup_n_u32(load_u32(a.scales)));
        const uint8x8_t ls = vzip1_u8(vand_u8(s, vdup_n_u8(0x0F)), vshr_n_u8(s, 4));
        const uint16x8_t odd = vmovl_u8(vorr_u8(vshl_n_u8(ls, 1), vdup_n_u8(1)));
        const int32x4_t sc[2] = {vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(odd))), vreinterpretq_s32_u32(vmovl_high_u16(odd))};
        int32x4_t acc = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            uint16_t idx[32];
            for (int r = 0; r < 2; r++) {
                // Sub-blocks 4 h + 2 r and + 1: their 16 indices' high bits from their qh bytes.
                const int ib = 4 * h + 2 * r;
                const uint8x16_t hb = vqtbl1q_u8(qh, vcombine_u8(vdup_n_u8((uint8_t) ib), vdup_n_u8((uint8_t) (ib + 1))));
                const uint8x16_t hi = vandq_u8(vtstq_u8(hb, vld1q_u8(bits)), vdupq_n_u8(1));
                const uint8x16_t lo = vld1q_u8(a.qs + 8 * ib);
                vst1q_u8((uint8_t *) (idx + 16 * r), vzip1q_u8(lo, hi));
                vst1q_u8((uint8_t *) (idx + 16 * r + 8), vzip2q_u8(lo, hi));
            }
            const uint8x16_t signs = vld1q_u8(a.signs + 16 * h);
            int32x4_t d[4];
            for (int k = 0; k < 4; k++) {
                const uint16_t * i = idx + 8 * k;
                const int8x16_t w0 = apply_sign(grid4x32(ggml_iq3s_grid, i[0], i[1], i[2], i[3]), sign_mask(signs, 4 * k));
                const int8x16_t w1 = apply_sign(grid4x32(ggml_iq3s_grid, i[4], i[5], i[6], i[7]), sign_mask(signs, 4 * k + 2));
                d[k] = dot32(w0, w1, b.qs + 128 * h + 32 * k);
            }
            acc = vmlaq_s32(acc, lane_sums(d[0], d[1], d[2], d[3]), sc[h]);
        }
        return h2f(a.d) * b.d * (float) vaddvq_s32(acc);
    });
}

// ---- IQ1 ------------------------------------------------------------------------------------
// Grid levels -1, 0, 1 are signed bytes as they are. IQ1_S: 11-bit indices (qs and 3 bits
// each of qh), a 3-bit scale and the delta's sign per sub-block; the delta term
// sum mult delta Y (Y: the sub-block's q8 sum) comes from bsums.
float dot_iq1_s(int64_t n, const void * va, const void * vb) {
    return ggml_quant_dot_blocks_K<block_iq1_s>(n, va, vb, [](const block_iq1_s & a, const block_q8_K & b) {
        const uint16x8_t qh = vld1q_u16(a.qh);
        // Index k (sub-block k / 4, l = k % 4): qs[k] | ((qh >> 3 l) & 7) << 8.
        static const int16_t shr[8] = {8, 5, 2, -1, 8, 5, 2, -1};  // left: into bits 8..10
        static const uint8_t rep[16] = {0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3};
        const uint8x16_t qhb = vreinterpretq_u8_u16(qh);
        uint16_t idx[32];
        for (int r = 0; r < 4; r++) {  // indices 8 r .. 8 r + 7: sub-blocks 2 r, 2 r + 1
            const uint16x8_t h = vreinterpretq_u16_u8(vqtbl1q_u8(qhb, vaddq_u8(vld1q_u8(rep), vdupq_n_u8((uint8_t) (4 * r)))));
            const uint16x8_t hi = vandq_u16(vshlq_u16(h, vld1q_s16(shr)), vdupq_n_u16(0x700));
            vst1q_u16(idx + 8 * r, vorrq_u16(vmovl_u8(vld1_u8(a.qs + 8 * r)), hi));
        }
        // mult = 2 ((qh >> 12) & 7) + 1; delta = qh bit 15 ? -1 : 1.
        const int16x8_t mult = vreinterpretq_s16_u16(vorrq_u16(vshlq_n_u16(vandq_u16(vshrq_n_u16(qh, 12), vdupq_n_u16(7)), 1), vdupq_n_u16(1)));
        const int16x8_t delta = vorrq_s16(vshrq_n_s16(vreinterpretq_s16_u16(qh), 15), vdupq_n_s16(1));
        const int16x8_t ysum = vpaddq_s16(vld1q_s16(b.bsums), vld1q_s16(b.bsums + 8));  // Y per sub-block
        const int16x8_t md = vmulq_s16(mult, delta);
        const int32_t sumd = vaddvq_s32(vmlal_high_s16(vmull_s16(vget_low_s16(md), vget_low_s16(ysum)), md, ysum));
        const int32x4_t sc[2] = {vmovl_s16(vget_low_s16(mult)), vmovl_high_s16(mult)};
        int32x4_t acc = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            int32x4_t d[4];
            for (int k = 0; k < 4; k++) {
                const uint16_t * i = idx + 16 * h + 4 * k;
                const int8x16_t w0 = s8(grid2(ggml_iq1s_grid, i[0], i[1])), w1 = s8(grid2(ggml_iq1s_grid, i[2], i[3]));
                d[k] = dot32(w0, w1, b.qs + 128 * h + 32 * k);
            }
            acc = vmlaq_s32(acc, lane_sums(d[0], d[1], d[2], d[3]), sc[h]);
        }
        return h2f(a.d) * b.d * ((float) vaddvq_s32(acc) + 0.125f * (float) sumd);
    });
}

// IQ1_M: a nibble per 8 values (3 index bits, the delta's sign in bit 3), 3-bit scales per 16
// values, the F16 scale in the scales' top nibbles. The delta, one per 8 values, is folded into
// the weights: bytes 8 level + delta (|.| <= 9) give 8 * (sumi + sumd / 8) in one sum.
float dot_iq1_m(int64_t n, const void * va, const void * vb) {
    return ggml_quant_dot_blocks_K<block_iq1_m>(n, va, vb, [](const block_iq1_m & a, const block_q8_K & b) {
        const uint8x16_t qh = vld1q_u8(a.qh);
        const uint8x16_t nl = vandq_u8(qh, vdupq_n_u8(0x0F)), nh = vshrq_n_u8(qh, 4);
        const uint8x16_t h[2] = {vzip1q_u8(nl, nh), vzip2q_u8(nl, nh)};  // nibbles 0..15, 16..31
        uint16_t idx[32];
        for (int r = 0; r < 2; r++) {
            const uint8x16_t lo = vld1q_u8(a.qs + 16 * r), hi = vandq_u8(h[r], vdupq_n_u8(7));
            vst1q_u8((uint8_t *) (idx + 16 * r), vzip1q_u8(lo, hi));
            vst1q_u8((uint8_t *) (idx + 16 * r + 8), vzip2q_u8(lo, hi));
        }
        // Scale j (per 16 values): (sc[j / 4] >> 3 (j % 4)) & 7, by right shifts per lane.
        uint16_t sw[4];
        memcpy(sw, a.scales, sizeof(sw));
        static const int16_t shr[8] = {0, -3, -6, -9, 0, -3, -6, -9};
        int32x4_t sc[4];
        for (int q = 0; q < 2; q++) {
            const uint16x8_t w = vcombine_u16(vdup_n_u16(sw[2 * q]), vdup_n_u16(sw[2 * q + 1]));
            const uint16x8_t s3 = vandq_u16(vshlq_u16(w, vld1q_s16(shr)), vdupq_n_u16(7));
            const uint16x8_t odd = vorrq_u16(vshlq_n_u16(s3, 1), vdupq_n_u16(1));
            sc[2 * q] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(odd)));
            sc[2 * q + 1] = vreinterpretq_s32_u32(vmovl_high_u16(odd));
        }
        int32x4_t acc = vdupq_n_s32(0);
        for (int r = 0; r < 2; r++) {
            // delta per nibble: 1 - 2 (bit 3), as bytes of h[r]'s order; 8 copies per group.
            const uint8x16_t dl = vsubq_u8(vdupq_n_u8(1), vshrq_n_u8(vandq_u8(h[r], vdupq_n_u8(8)), 2));
            int32x4_t d[8];
            for (int k = 0; k < 8; k++) {  // 16 values: groups 2 k, 2 k + 1 of this half
                const uint16_t * i = idx + 16 * r + 2 * k;
                const int8x16_t g = s8(grid2(ggml_iq1s_grid, i[0], i[1]));
                const uint8x16_t dk = vqtbl1q_u8(dl, vcombine_u8(vdup_n_u8((uint8_t) (2 * k)), vdup_n_u8((uint8_t) (2 * k + 1))));
                const int8x16_t w = vaddq_s8(vshlq_n_s8(g, 3), s8(dk));
                d[k] = dot16(vdupq_n_s32(0), w, vld1q_s8(b.qs + 128 * r + 16 * k));
            }
            acc = vmlaq_s32(acc, lane_sums(d[0], d[1], d[2], d[3]), sc[2 * r]);
            acc = vmlaq_s32(acc, lane_sums(d[4], d[5], d[6], d[7]), sc[2 * r + 1]);
        }
        const uint16_t dh = (uint16_t) ((sw[0] >> 12) | ((sw[1] >> 8) & 0x00F0) | ((sw[2] >> 4) & 0x0F00) | (sw[3] & 0xF000));
        return 0.125f * h2f(dh) * b.d * (float) vaddvq_s32(acc);
    });
}

// ---- IQ4_XS ---------------------------------------------------------------------------------
// IQ4_NL's levels by a table lookup, 6-bit scales (ls - 32) per sub-block.
float dot_iq4_xs(int64_t n, const void * va, const void * vb) {
    const int8x16_t table = vld1q_s8(kvalues_iq4nl);
    return ggml_quant_dot_blocks_K<block_iq4_xs>(n, va, vb, [&](const block_iq4_xs & a, const block_q8_K & b) {
        // ls: low 4 bits from scales_l (nibbles, low first), high 2 from scales_h (bits 2 ib).
        const uint8x8_t sl = vreinterpret_u8_u32(vdup_n_u32(load_u32(a.scales_l)));
        const uint8x8_t lo = vzip1_u8(vand_u8(sl, vdup_n_u8(0x0F)), vshr_n_u8(sl, 4));
        static const int16_t shr[8] = {0, -2, -4, -6, -8, -10, -12, -14};
        const uint16x8_t hi = vandq_u16(vshlq_u16(vdupq_n_u16(a.scales_h), vld1q_s16(shr)), vdupq_n_u16(3));
        const int16x8_t ls = vsubq_s16(vreinterpretq_s16_u16(vorrq_u16(vmovl_u8(lo), vshlq_n_u16(hi, 4))), vdupq_n_s16(32));
        const int32x4_t sc[2] = {vmovl_s16(vget_low_s16(ls)), vmovl_high_s16(ls)};
        int32x4_t acc = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            int32x4_t d[4];
            for (int k = 0; k < 4; k++) {
                const uint8x16_t q = vld1q_u8(a.qs + 64 * h + 16 * k);
                const int8x16_t w0 = vqtbl1q_s8(table, vandq_u8(q, vdupq_n_u8(0x0F)));
                const int8x16_t w1 = vqtbl1q_s8(table, vshrq_n_u8(q, 4));
                d[k] = dot32(w0, w1, b.qs + 128 * h + 32 * k);
            }
            acc = vmlaq_s32(acc, lane_sums(d[0], d[1], d[2], d[3]), sc[h]);
        }
        return h2f(a.d) * b.d * (float) vaddvq_s32(acc);
    });
}

// ---- ternary --------------------------------------------------------------------------------
// Level t - 1: sum (t - 1) q8 = sum t q8 - sum q8, the last from bsums.
inline int32_t ysum(const block_q8_K & b) { return vaddlvq_s16(vaddq_s16(vld1q_s16(b.bsums), vld1q_s16(b.bsums + 8))); }

// TQ1_0's digit of byte p (after the multiplies by 3^n): (3 p) >> 8 = [p >= 86] + [p >= 171],
// here negated (the compares give -1): the dot of -t.
inline int8x16_t tq1_neg_digit(uint8x16_t p) {
    return s8(vaddq_u8(vcgeq_u8(p, vdupq_n_u8(86)), vcgeq_u8(p, vdupq_n_u8(171))));
}

float dot_tq1_0(int64_t n, const void * va, const void * vb) {
    return ggml_quant_dot_blocks_K<block_tq1_0>(n, va, vb, [](const block_tq1_0 & a, const block_q8_K & b) {
        static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
        int32x4_t acc = vdupq_n_s32(0);  // sum of -t q8
        // qs[0..32): values 32 n + m are digit n of byte m (times 3^n, mod 256).
        const uint8x16_t q0 = vld1q_u8(a.qs), q1 = vld1q_u8(a.qs + 16);
        for (int k = 0; k < 5; k++) {
            const uint8x16_t m = vdupq_n_u8(pow3[k]);
            acc = dot16(acc, tq1_neg_digit(vmulq_u8(q0, m)), vld1q_s8(b.qs + 32 * k));
            acc = dot16(acc, tq1_neg_digit(vmulq_u8(q1, m)), vld1q_s8(b.qs + 32 * k + 16));
        }
        // qs[32..48): values 160 + 16 n + m.
        const uint8x16_t q2 = vld1q_u8(a.qs + 32);
        for (int k = 0; k < 5; k++) acc = dot16(acc, tq1_neg_digit(vmulq_u8(q2, vdupq_n_u8(pow3[k]))), vld1q_s8(b.qs + 160 + 16 * k));
        // qh: values 240 + 4 n + m, digit n of qh[m].
        static const uint8_t pw[16] = {1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27};
        const uint8x16_t qh = vreinterpretq_u8_u32(vdupq_n_u32(load_u32(a.qh)));
        acc = dot16(acc, tq1_neg_digit(vmulq_u8(qh, vld1q_u8(pw))), vld1q_s8(b.qs + 240));
        return h2f(a.d) * b.d * (float) (-vaddvq_s32(acc) - ysum(b));
    });
}

// TQ2_0: byte 32 c + m holds values 128 c + 32 l + m in bits 2 l.
float dot_tq2_0(int64_t n, const void * va, const void * vb) {
    return ggml_quant_dot_blocks_K<block_tq2_0>(n, va, vb, [](const block_tq2_0 & a, const block_q8_K & b) {
        const uint8x16_t m3 = vdupq_n_u8(3);
        int32x4_t acc = vdupq_n_s32(0);
        for (int c = 0; c < 2; c++) {
            for (int j = 0; j < 2; j++) {
                const uint8x16_t q = vld1q_u8(a.qs + 32 * c + 16 * j);
                const int8_t * y = b.qs + 128 * c + 16 * j;
                acc = dot16(acc, s8(vandq_u8(q, m3)), vld1q_s8(y));
                acc = dot16(acc, s8(vandq_u8(vshrq_n_u8(q, 2), m3)), vld1q_s8(y + 32));
                acc = dot16(acc, s8(vandq_u8(vshrq_n_u8(q, 4), m3)), vld1q_s8(y + 64));
                acc = dot16(acc, s8(vshrq_n_u8(q, 6)), vld1q_s8(y + 96));
            }
        }
        return h2f(a.d) * b.d * (float) (vaddvq_s32(acc) - ysum(b));
    });
}

}  // namespace

ggml_quant_dot_fn quant_dot_iq(ggml_type type) {
    switch (type) {
        case GGML_TYPE_IQ2_XXS: return dot_iq2_xxs;
        case GGML_TYPE_IQ2_XS:  return dot_iq2_xs;
        case GGML_TYPE_IQ2_S:   return dot_iq2_s;
        case GGML_TYPE_IQ3_XXS: return dot_iq3_xxs;
        case GGML_TYPE_IQ3_S:   return dot_iq3_s;
        case GGML_TYPE_IQ1_S:   return dot_iq1_s;
        case GGML_TYPE_IQ1_M:   return dot_iq1_m;
        case GGML_TYPE_IQ4_XS:  return dot_iq4_xs;
        case GGML_TYPE_TQ1_0:   return dot_tq1_0;
        case GGML_TYPE_TQ2_0:   return dot_tq2_0;
        default:                return nullptr;
    }
}

}  // namespace ggml_cpu_neon

#endif  // GGML_SIMD_NEON
