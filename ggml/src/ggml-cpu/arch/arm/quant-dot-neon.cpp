// quant-dot-neon.cpp - NEON dot products of the quantized types with their activation types
// (aarch64). Weight blocks are decoded to bytes in registers and multiplied with the activation
// bytes by SDOT (vdotq_s32) where the CPU has it, else by widening multiplies (vmull_s8) summed
// into s32 by vpadalq_s16. 32-value blocks: four blocks per iteration, their integer sums scaled
// in float as one vector. K super-blocks: per sub-block s32 sums times the integer scales, reduced
// once per super-block; the -4 / -32 offsets and the mins go through Q8_K's bsums.
#include "kernels-arm.h"

#if defined(GGML_SIMD_NEON)

#include "quant-dot-neon.h"

#include <arm_neon.h>

#include <string.h>

#include <type_traits>

namespace ggml_cpu_neon {
namespace {

// As dot16, for weights in -127..127: two products per s16 stay within 2 * 127 * 128 < 2^15.
inline int32x4_t dot16_w7(int32x4_t acc, int8x16_t w, int8x16_t y) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, w, y);
#else
    const int16x8_t p = vmlal_high_s8(vmull_s8(vget_low_s8(w), vget_low_s8(y)), w, y);
    return vpadalq_s16(acc, p);
#endif
}

// Whole 32-value block: w0 holds values 0..15, w1 values 16..31.
inline int32x4_t dot32_w7(int8x16_t w0, int8x16_t w1, const int8_t * y) {
    return dot16_w7(dot16_w7(vdupq_n_s32(0), w0, vld1q_s8(y)), w1, vld1q_s8(y + 16));
}

// The 32 bits of a Q5 block's qh as a per-byte test mask: bytes 0..15 of lo (values 0..15) are
// 0xFF where bits 0..15 are set, likewise hi for bits 16..31.
inline void expand_qh(uint32_t qh, uint8x16_t & lo, uint8x16_t & hi) {
    static const uint8_t idx_lo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    static const uint8_t idx_hi[16] = {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t bytes = vreinterpretq_u8_u32(vdupq_n_u32(qh));
    const uint8x16_t mask = vld1q_u8(bit);
    lo = vtstq_u8(vqtbl1q_u8(bytes, vld1q_u8(idx_lo)), mask);
    hi = vtstq_u8(vqtbl1q_u8(bytes, vld1q_u8(idx_hi)), mask);
}

// ---- 32-value blocks -----------------------------------------------------------------------
// Four F16 fields, stride bytes apart, as F32 lanes.
inline float32x4_t load_f16x4(const ggml_fp16_t * p, size_t stride) {
    const char * c = (const char *) p;
    uint16x4_t v = vld1_dup_u16(p);
    v = vld1_lane_u16((const uint16_t *) (c + stride), v, 1);
    v = vld1_lane_u16((const uint16_t *) (c + 2 * stride), v, 2);
    v = vld1_lane_u16((const uint16_t *) (c + 3 * stride), v, 3);
    return vcvt_f32_f16(vreinterpret_f16_u16(v));
}

// Each kernel is a Block functor with the weight / activation blocks a, b and isum(i), the s32
// lanes of block i. The driver runs four blocks per iteration: their lane sums become one vector
// (three pairwise adds), scaled by the four d * db products at once. Q4_1 / Q5_1 (has_min) add
// the min terms m * s the same way: sum (d q + m) * db qb = d db sum(q qb) + m * s, with
// s = db sum(qb) stored in the Q8_1 block.
template <typename Block>
inline float dot_blocks32(int64_t n, const Block & blk) {
    const int64_t nb = n / 32;
    const size_t sa = sizeof(*blk.a), sb = sizeof(*blk.b);
    float32x4_t acc = vdupq_n_f32(0.0f), acc_min = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 3 < nb; i += 4) {
        const int32x4_t s01 = vpaddq_s32(blk.isum(i), blk.isum(i + 1));
        const int32x4_t s23 = vpaddq_s32(blk.isum(i + 2), blk.isum(i + 3));
        const float32x4_t d = vmulq_f32(load_f16x4(&blk.a[i].d, sa), load_f16x4(&blk.b[i].d, sb));
        acc = vfmaq_f32(acc, vcvtq_f32_s32(vpaddq_s32(s01, s23)), d);
        if constexpr (Block::has_min) acc_min = vfmaq_f32(acc_min, load_f16x4(&blk.a[i].m, sa), load_f16x4(&blk.b[i].s, sb));
    }
    float sum = vaddvq_f32(vaddq_f32(acc, acc_min));
    for (; i < nb; i++) {
        sum += h2f(blk.a[i].d) * h2f(blk.b[i].d) * (float) vaddvq_s32(blk.isum(i));
        if constexpr (Block::has_min) sum += h2f(blk.a[i].m) * h2f(blk.b[i].s);
    }
    return sum;
}

// Q4_0 (levels nibble - 8) and Q4_1 (nibble, with a min: against Q8_1).
template <typename BA, typename BB> struct BlockQ4 {
    static constexpr bool has_min = std::is_same<BB, block_q8_1>::value;
    const BA * a;
    const BB * b;
    int32x4_t isum(int64_t i) const {
        const uint8x16_t q = vld1q_u8(a[i].qs);
        int8x16_t w0 = s8(vandq_u8(q, vdupq_n_u8(0x0F))), w1 = s8(vshrq_n_u8(q, 4));
        if constexpr (!has_min) {
            w0 = vsubq_s8(w0, vdupq_n_s8(8));
            w1 = vsubq_s8(w1, vdupq_n_s8(8));
        }
        return dot32_w7(w0, w1, b[i].qs);
    }
};

// Q5_0 (levels - 16 = nibble - 16 * !bit4) and Q5_1 (nibble | 16 * bit4, with a min).
template <typename BA, typename BB> struct BlockQ5 {
    static constexpr bool has_min = std::is_same<BB, block_q8_1>::value;
    const BA * a;
    const BB * b;
    int32x4_t isum(int64_t i) const {
        uint8x16_t hlo, hhi;
        expand_qh(load_u32(a[i].qh), hlo, hhi);
        const uint8x16_t q = vld1q_u8(a[i].qs);
        const uint8x16_t m16 = vdupq_n_u8(0x10);
        const uint8x16_t lo = vandq_u8(q, vdupq_n_u8(0x0F)), hi = vshrq_n_u8(q, 4);
        if constexpr (has_min) return dot32_w7(s8(vorrq_u8(lo, vandq_u8(m16, hlo))), s8(vorrq_u8(hi, vandq_u8(m16, hhi))), b[i].qs);
        else return dot32_w7(s8(vsubq_u8(lo, vbicq_u8(m16, hlo))), s8(vsubq_u8(hi, vbicq_u8(m16, hhi))), b[i].qs);
    }
};

struct BlockQ8_0 {
    static constexpr bool has_min = false;
    const block_q8_0 * a;
    const block_q8_0 * b;
    int32x4_t isum(int64_t i) const {
        // Weights may be -128 here: the one-product-per-s16 path.
        const int32x4_t s = dot16(vdupq_n_s32(0), vld1q_s8(a[i].qs), vld1q_s8(b[i].qs));
        return dot16(s, vld1q_s8(a[i].qs + 16), vld1q_s8(b[i].qs + 16));
    }
};

struct BlockIQ4_NL {
    static constexpr bool has_min = false;
    const block_iq4_nl * a;
    const block_q8_0 * b;
    int8x16_t table;
    int32x4_t isum(int64_t i) const {
        const uint8x16_t q = vld1q_u8(a[i].qs);
        // The levels span -127..113, so dot16_w7 is safe.
        const int8x16_t w0 = vqtbl1q_s8(table, vandq_u8(q, vdupq_n_u8(0x0F)));
        const int8x16_t w1 = vqtbl1q_s8(table, vshrq_n_u8(q, 4));
        return dot32_w7(w0, w1, b[i].qs);
    }
};

template <typename BA, typename BB, template <typename, typename> class Block>
float dot_32(int64_t n, const void * va, const void * vb) {
    return dot_blocks32(n, Block<BA, BB>{(const BA *) va, (const BB *) vb});
}

float dot_q8_0(int64_t n, const void * va, const void * vb) {
    return dot_blocks32(n, BlockQ8_0{(const block_q8_0 *) va, (const block_q8_0 *) vb});
}

float dot_iq4_nl(int64_t n, const void * va, const void * vb) {
    return dot_blocks32(n, BlockIQ4_NL{(const block_iq4_nl *) va, (const block_q8_0 *) vb, vld1q_s8(kvalues_iq4nl)});
}

// ---- K super-blocks ------------------------------------------------------------------------
// The four whole-vector sums of d0..d3 as the lanes of one vector.
inline int32x4_t lane_sums(int32x4_t d0, int32x4_t d1, int32x4_t d2, int32x4_t d3) {
    return vpaddq_s32(vpaddq_s32(d0, d1), vpaddq_s32(d2, d3));
}

// One 16-value sub-block (one 16-byte vector) on its own.
inline int32x4_t dot_sub16(int8x16_t w, const int8_t * y) { return dot16_w7(vdupq_n_s32(0), w, vld1q_s8(y)); }

// Lanes 0..3 / 4..7 of 8 s16 widened to s32.
inline int32x4_t lo32(int16x8_t v) { return vmovl_s16(vget_low_s16(v)); }
inline int32x4_t hi32(int16x8_t v) { return vmovl_high_s16(v); }

// sum_j c[j] * bsums[j] over the 16 sub-blocks of a Q8_K block (c fits s16: |c * bsum| < 2^31).
inline int32_t bsums_dot16(int8x16_t c, const int16_t * bsums) {
    const int16x8_t c0 = vmovl_s8(vget_low_s8(c)), c1 = vmovl_high_s8(c);
    int32x4_t s = vmull_s16(vget_low_s16(c0), vld1_s16(bsums));
    s = vmlal_high_s16(s, c0, vld1q_s16(bsums));
    s = vmlal_s16(s, vget_low_s16(c1), vld1_s16(bsums + 8));
    s = vmlal_high_s16(s, c1, vld1q_s16(bsums + 8));
    return vaddvq_s32(s);
}

float dot_q2_K(int64_t n, const void * va, const void * vb) {
    const uint8x16_t m3 = vdupq_n_u8(3);
    return ggml_quant_dot_blocks_K<block_q2_K>(n, va, vb, [&](const block_q2_K & a, const block_q8_K & b) {
        const uint8x16_t scales = vld1q_u8(a.scales);
        const int16x8_t sc0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(vandq_u8(scales, vdupq_n_u8(0x0F)))));
        const int16x8_t sc1 = vreinterpretq_s16_u16(vmovl_high_u8(vandq_u8(scales, vdupq_n_u8(0x0F))));
        const int32x4_t sc[4] = {lo32(sc0), hi32(sc0), lo32(sc1), hi32(sc1)};
        const int8x16_t mins = s8(vshrq_n_u8(scales, 4));
        const int8_t * y = b.qs;
        int32x4_t acc = vdupq_n_s32(0);
        // Half h: 32 bytes of qs hold the 2-bit levels of 128 values, 4 shifts of 32 values each.
        #pragma GCC unroll 4
        for (int h = 0; h < 2; h++) {
            uint8x16_t q0 = vld1q_u8(a.qs + 32 * h), q1 = vld1q_u8(a.qs + 32 * h + 16);
            #pragma GCC unroll 4
            for (int s = 0; s < 4; s += 2, y += 64) {
                const int32x4_t d0 = dot_sub16(s8(vandq_u8(q0, m3)), y);
                const int32x4_t d1 = dot_sub16(s8(vandq_u8(q1, m3)), y + 16);
                q0 = vshrq_n_u8(q0, 2);
                q1 = vshrq_n_u8(q1, 2);
                const int32x4_t d2 = dot_sub16(s8(vandq_u8(q0, m3)), y + 32);
                const int32x4_t d3 = dot_sub16(s8(vandq_u8(q1, m3)), y + 48);
                q0 = vshrq_n_u8(q0, 2);
                q1 = vshrq_n_u8(q1, 2);
                acc = vmlaq_s32(acc, lane_sums(d0, d1, d2, d3), sc[2 * h + s / 2]);
            }
        }
        const int isum = vaddvq_s32(acc);
        const int msum = bsums_dot16(mins, b.bsums);
        return b.d * (h2f(a.d) * (float) isum - h2f(a.dmin) * (float) msum);
    });
}

// The 16 signed 6-bit scales of a Q3_K block (see q3_k_scale), in sub-block order.
inline int8x16_t q3_k_scales(const uint8_t * s) {
    const uint32_t w0 = load_u32(s), w1 = load_u32(s + 4), w2 = load_u32(s + 8);
    const uint32_t m4 = 0x0F0F0F0Fu, m2 = 0x30303030u;
    const uint32_t v[4] = {
        (w0 & m4) | ((w2 << 4) & m2),         // scales 0..3: high bits 0..1 of bytes 8..11
        (w1 & m4) | ((w2 << 2) & m2),         // 4..7: bits 2..3
        ((w0 >> 4) & m4) | (w2 & m2),         // 8..11: bits 4..5
        ((w1 >> 4) & m4) | ((w2 >> 2) & m2),  // 12..15: bits 6..7
    };
    return vsubq_s8(vreinterpretq_s8_u32(vld1q_u32(v)), vdupq_n_s8(32));
}

float dot_q3_K(int64_t n, const void * va, const void * vb) {
    const uint8x16_t m3 = vdupq_n_u8(3), m4 = vdupq_n_u8(4);
    return ggml_quant_dot_blocks_K<block_q3_K>(n, va, vb, [&](const block_q3_K & a, const block_q8_K & b) {
        const int8x16_t scales = q3_k_scales(a.scales);
        const int16x8_t sc0 = vmovl_s8(vget_low_s8(scales)), sc1 = vmovl_high_s8(scales);
        const int32x4_t sc[4] = {lo32(sc0), hi32(sc0), lo32(sc1), hi32(sc1)};
        // hm0 / hm1: the high bits of values v % 32 in 0..15 / 16..31, bit v / 32; shifted right
        // as the groups of 32 advance, so bit 0 is always the current group's.
        uint8x16_t hm0 = vld1q_u8(a.hmask), hm1 = vld1q_u8(a.hmask + 16);
        const int8_t * y = b.qs;
        int32x4_t acc = vdupq_n_s32(0);
        #pragma GCC unroll 4
        for (int h = 0; h < 2; h++) {
            uint8x16_t q0 = vld1q_u8(a.qs + 32 * h), q1 = vld1q_u8(a.qs + 32 * h + 16);
            #pragma GCC unroll 4
            for (int s = 0; s < 4; s += 2, y += 64) {
                // u = low 2 bits | 4 * high bit, in 0..7; the level is u - 4 (the -4 uses bsums).
                const int8x16_t u0 = s8(vorrq_u8(vandq_u8(q0, m3), vandq_u8(vshlq_n_u8(hm0, 2), m4)));
                const int8x16_t u1 = s8(vorrq_u8(vandq_u8(q1, m3), vandq_u8(vshlq_n_u8(hm1, 2), m4)));
                const int8x16_t u2 = s8(vorrq_u8(vandq_u8(vshrq_n_u8(q0, 2), m3), vandq_u8(vshlq_n_u8(hm0, 1), m4)));
                const int8x16_t u3 = s8(vorrq_u8(vandq_u8(vshrq_n_u8(q1, 2), m3), vandq_u8(vshlq_n_u8(hm1, 1), m4)));
                q0 = vshrq_n_u8(q0, 4);
                q1 = vshrq_n_u8(q1, 4);
                hm0 = vshrq_n_u8(hm0, 2);
                hm1 = vshrq_n_u8(hm1, 2);
                const int32x4_t d = lane_sums(dot_sub16(u0, y), dot_sub16(u1, y + 16), dot_sub16(u2, y + 32), dot_sub16(u3, y + 48));
                acc = vmlaq_s32(acc, d, sc[2 * h + s / 2]);
            }
        }
        const int isum = vaddvq_s32(acc) - 4 * bsums_dot16(scales, b.bsums);
        return h2f(a.d) * b.d * (float) isum;
    });
}

// The 8 scales and 8 mins of a Q4_K / Q5_K block (see get_scale_min_k4) as 8 bytes each.
inline void k4_scales_mins(const uint8_t * q, int16x8_t & sc, int16x8_t & mn) {
    const uint32_t w0 = load_u32(q), w1 = load_u32(q + 4), w2 = load_u32(q + 8);
    const uint32_t m6 = 0x3F3F3F3Fu, m4 = 0x0F0F0F0Fu, m2 = 0x30303030u;
    const uint32_t s[2] = {w0 & m6, (w2 & m4) | ((w0 >> 2) & m2)};
    const uint32_t m[2] = {w1 & m6, ((w2 >> 4) & m4) | ((w1 >> 2) & m2)};
    sc = vreinterpretq_s16_u16(vmovl_u8(vreinterpret_u8_u32(vld1_u32(s))));
    mn = vreinterpretq_s16_u16(vmovl_u8(vreinterpret_u8_u32(vld1_u32(m))));
}

// sum_j mn[j] * (bsums[2j] + bsums[2j + 1]): the pair sums fit s16 (|sum| <= 32 * 128).
inline int32_t bsums_dot8(int16x8_t mn, const int16_t * bsums) {
    const int16x8_t pairs = vpaddq_s16(vld1q_s16(bsums), vld1q_s16(bsums + 8));
    return vaddvq_s32(vmlal_high_s16(vmull_s16(vget_low_s16(mn), vget_low_s16(pairs)), mn, pairs));
}

// Sub-blocks 2c (low nibbles) and 2c + 1 (high nibbles, the next 32 values) of a Q4_K / Q5_K
// chunk, given the 32 decoded levels of each as two vectors.
inline int32x4_t dot_chunk64(int8x16_t l0, int8x16_t l1, int8x16_t h0, int8x16_t h1, const int8_t * y,
                             int32x4_t & dlo) {
    dlo = dot16_w7(dot16_w7(vdupq_n_s32(0), l0, vld1q_s8(y)), l1, vld1q_s8(y + 16));
    return dot16_w7(dot16_w7(vdupq_n_s32(0), h0, vld1q_s8(y + 32)), h1, vld1q_s8(y + 48));
}

// Q4_K and Q5_K (bits 2c / 2c + 1 of qh[l] are the fifth bits of chunk c; shifted right by 2
// per chunk).
template <typename BA> float dot_k4(int64_t n, const void * va, const void * vb) {
    constexpr bool q5 = std::is_same<BA, block_q5_K>::value;
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m16 = vdupq_n_u8(0x10);
    return ggml_quant_dot_blocks_K<BA>(n, va, vb, [&](const BA & a, const block_q8_K & b) {
        int16x8_t sc, mn;
        k4_scales_mins(a.scales, sc, mn);
        uint8x16_t qh0 = vdupq_n_u8(0), qh1 = vdupq_n_u8(0);
        if constexpr (q5) qh0 = vld1q_u8(a.qh), qh1 = vld1q_u8(a.qh + 16);
        int32x4_t d[8];
        #pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const uint8x16_t q0 = vld1q_u8(a.qs + 32 * c), q1 = vld1q_u8(a.qs + 32 * c + 16);
            uint8x16_t l0 = vandq_u8(q0, m4), l1 = vandq_u8(q1, m4), h0 = vshrq_n_u8(q0, 4), h1 = vshrq_n_u8(q1, 4);
            if constexpr (q5) {
                l0 = vorrq_u8(l0, vandq_u8(vshlq_n_u8(qh0, 4), m16));
                l1 = vorrq_u8(l1, vandq_u8(vshlq_n_u8(qh1, 4), m16));
                h0 = vorrq_u8(h0, vandq_u8(vshlq_n_u8(qh0, 3), m16));
                h1 = vorrq_u8(h1, vandq_u8(vshlq_n_u8(qh1, 3), m16));
                qh0 = vshrq_n_u8(qh0, 2);
                qh1 = vshrq_n_u8(qh1, 2);
            }
            d[2 * c + 1] = dot_chunk64(s8(l0), s8(l1), s8(h0), s8(h1), b.qs + 64 * c, d[2 * c]);
        }
        int32x4_t acc = vmulq_s32(lane_sums(d[0], d[1], d[2], d[3]), lo32(sc));
        acc = vmlaq_s32(acc, lane_sums(d[4], d[5], d[6], d[7]), hi32(sc));
        const int isum = vaddvq_s32(acc);
        const int msum = bsums_dot8(mn, b.bsums);
        return b.d * (h2f(a.d) * (float) isum - h2f(a.dmin) * (float) msum);
    });
}

float dot_q6_K(int64_t n, const void * va, const void * vb) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m30 = vdupq_n_u8(0x30);
    return ggml_quant_dot_blocks_K<block_q6_K>(n, va, vb, [&](const block_q6_K & a, const block_q8_K & b) {
        const int8x16_t scales = vld1q_s8(a.scales);
        const int16x8_t sc0 = vmovl_s8(vget_low_s8(scales)), sc1 = vmovl_high_s8(scales);
        const int32x4_t sc[4] = {lo32(sc0), hi32(sc0), lo32(sc1), hi32(sc1)};
        const int8_t * y = b.qs;
        int32x4_t acc = vdupq_n_s32(0);
        #pragma GCC unroll 4
        for (int h = 0; h < 2; h++, y += 128) {
            const uint8_t * ql = a.ql + 64 * h;
            const uint8_t * qhp = a.qh + 32 * h;
            // u = 6-bit level in 0..63; the value is u - 32 (the -32 uses bsums). Groups of 32:
            // g0 = ql[0..32) low | qh bits 0..1, g1 = ql[32..64) low | bits 2..3,
            // g2 = ql[0..32) high | bits 4..5, g3 = ql[32..64) high | bits 6..7.
            int8x16_t u[8];
            #pragma GCC unroll 4
            for (int k = 0; k < 2; k++) {
                const uint8x16_t l0 = vld1q_u8(ql + 16 * k), l1 = vld1q_u8(ql + 32 + 16 * k);
                const uint8x16_t qh = vld1q_u8(qhp + 16 * k);
                u[0 + k] = s8(vorrq_u8(vandq_u8(l0, m4), vandq_u8(vshlq_n_u8(qh, 4), m30)));
                u[2 + k] = s8(vorrq_u8(vandq_u8(l1, m4), vandq_u8(vshlq_n_u8(qh, 2), m30)));
                u[4 + k] = s8(vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(qh, m30)));
                u[6 + k] = s8(vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(vshrq_n_u8(qh, 2), m30)));
            }
            // u[k] is sub-block 8h + k (16 values each).
            const int32x4_t s0 = lane_sums(dot_sub16(u[0], y), dot_sub16(u[1], y + 16), dot_sub16(u[2], y + 32), dot_sub16(u[3], y + 48));
            const int32x4_t s1 = lane_sums(dot_sub16(u[4], y + 64), dot_sub16(u[5], y + 80), dot_sub16(u[6], y + 96), dot_sub16(u[7], y + 112));
            acc = vmlaq_s32(acc, s0, sc[2 * h]);
            acc = vmlaq_s32(acc, s1, sc[2 * h + 1]);
        }
        const int isum = vaddvq_s32(acc) - 32 * bsums_dot16(scales, b.bsums);
        return h2f(a.d) * b.d * (float) isum;
    });
}

}  // namespace

ggml_quant_dot_fn quant_dot(ggml_type type) {
    static const ggml_quant_dots dots = { dot_32<block_q4_0, block_q8_0, BlockQ4>, dot_32<block_q4_1, block_q8_1, BlockQ4>,
                                          dot_32<block_q5_0, block_q8_0, BlockQ5>, dot_32<block_q5_1, block_q8_1, BlockQ5>,
                                          dot_q8_0, dot_iq4_nl, dot_q2_K, dot_q3_K, dot_k4<block_q4_K>, dot_k4<block_q5_K>, dot_q6_K,
                                          quant_dot_iq(GGML_TYPE_IQ2_XXS), quant_dot_iq(GGML_TYPE_IQ2_XS), quant_dot_iq(GGML_TYPE_IQ2_S),
                                          quant_dot_iq(GGML_TYPE_IQ3_XXS), quant_dot_iq(GGML_TYPE_IQ3_S), quant_dot_iq(GGML_TYPE_IQ1_S),
                                          quant_dot_iq(GGML_TYPE_IQ1_M), quant_dot_iq(GGML_TYPE_IQ4_XS), quant_dot_iq(GGML_TYPE_TQ1_0),
                                          quant_dot_iq(GGML_TYPE_TQ2_0) };
    return ggml_quant_dot_of(dots, type);
}

}  // namespace ggml_cpu_neon

#endif  // GGML_SIMD_NEON
