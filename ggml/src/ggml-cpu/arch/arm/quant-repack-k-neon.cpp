// quant-repack-k-neon.cpp - NEON (SDOT) kernels of the layouts with Q8_K activations repacked 16
// rows at a time (quant-repack.h: Q4_K, Q5_K, Q6_K, IQ4_XS x16): one template over the type, the same integers and
// float steps as the references (quant-repack-k.cpp), so the same bits.
//
// In the x16 layouts the 16 bytes at [column][4q] are rows 4q..4q+3 of a 4-byte column: one
// register whose 4 s32 lanes are 4 rows, and SDOT by lane (vdotq_laneq_s32) against 4 activation
// bytes gives each row's partial sum in its own lane. Per super-block: the rows' scales (and
// mins) are laid out once; then per row quarter (4 rows) the values, in units: a unit is S groups
// of K registers of unsigned levels (valid s8), each group decoded once and met by every column
// (K sdots), its sum times the sub-block's scales (vmlaq_s32, exact) added to the quarter's
// integer sum; last the float steps of the reference, in its order. The float accumulators live
// in a small array (one load and store per quarter and column per super-block), so every column
// count runs in one pass over the weights. What differs per type (the traits):
//  - Q4_K: unit p = sub-blocks 2p (low nibbles) and 2p + 1 (high nibbles) of columns
//    8p .. 8p + 7, 2 groups of 8, against activation bytes 64p + 4k .. and 64p + 32 + 4k ..; the
//    mins at the end of the quarter: acc = fma(-(dmin * d_a), msum, acc) (vfmsq_f32), then
//    acc = fma(d * d_a, isum, acc). The 4-row scale and min vectors come from 16-row byte
//    vectors through TBL (indices past 15 give zero bytes: bytes to 32-bit lanes).
//  - Q5_K: as Q4_K, with the fifth bit: qh[k % 8] lies byte for byte over qs[k], and sub-block
//    j takes bit j of each qh byte, shifted to bit 4 (vshlq_u8 by 4 - 2p for the low nibbles of
//    pair p, one more right for the high ones) and merged under a 0x10 mask (vbslq_u8).
//  - Q6_K: unit j = sub-block j (16 values), 1 group of 4 columns decoded to ql nibble | 2 qh
//    bits << 4; each sub-block's sum starts at -32 * bsums[j] (the reference's offset term, taken
//    sub-block by sub-block: the same integer); acc = fma(isum, d * d_a, acc).
//  - IQ4_XS: unit p = sub-blocks 2p and 2p + 1, a group each: its 4 columns' low nibbles, then
//    their high ones, turned into the signed levels by TBL (SDOT takes them as they are: no
//    offset); the scales ls - 32 laid out per super-block as bytes; the float steps as Q6_K's.
#include "kernels-arm.h"

#if defined(GGML_SIMD_NEON) && defined(__ARM_FEATURE_DOTPROD)

#include <arm_neon.h>
#include <string.h>

#include <utility>

// As in quant-repack-neon.cpp: keep GCC's first scheduling pass from hoisting every column's
// activation loads ahead of the dots (more live registers than there are).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-schedule-insns")
#endif

namespace ggml_cpu_neon {
namespace {

typedef const block_q8_Kx * const * Cols;  // the columns' super-blocks

// TBL indices taking bytes 4q .. 4q + 3 of a 16-byte vector to the 4 32-bit lanes (zero-extended).
alignas(16) const uint8_t lanes_idx[4][16] = {
    { 0, 255, 255, 255, 1, 255, 255, 255, 2, 255, 255, 255, 3, 255, 255, 255 },
    { 4, 255, 255, 255, 5, 255, 255, 255, 6, 255, 255, 255, 7, 255, 255, 255 },
    { 8, 255, 255, 255, 9, 255, 255, 255, 10, 255, 255, 255, 11, 255, 255, 255 },
    { 12, 255, 255, 255, 13, 255, 255, 255, 14, 255, 255, 255, 15, 255, 255, 255 },
};

inline int32x4_t to_lanes(uint8x16_t v, uint8x16_t idx) { return vreinterpretq_s32_u8(vqtbl1q_u8(v, idx)); }

// A group's dots of one quarter: w[0..K) against K * 4 activation bytes at x, from d. The
// activations are loaded first (the order the code runs in: no first scheduling pass).
template <int K> inline int32x4_t dot(int32x4_t d, const int8x16_t * w, const int8_t * x) {
    if constexpr (K == 8) {
        const int8x16_t a0 = vld1q_s8(x), a1 = vld1q_s8(x + 16);
        d = vdotq_laneq_s32(d, w[0], a0, 0);
        d = vdotq_laneq_s32(d, w[1], a0, 1);
        d = vdotq_laneq_s32(d, w[2], a0, 2);
        d = vdotq_laneq_s32(d, w[3], a0, 3);
        d = vdotq_laneq_s32(d, w[4], a1, 0);
        d = vdotq_laneq_s32(d, w[5], a1, 1);
        d = vdotq_laneq_s32(d, w[6], a1, 2);
        d = vdotq_laneq_s32(d, w[7], a1, 3);
    } else {
        const int8x16_t a0 = vld1q_s8(x);
        d = vdotq_laneq_s32(d, w[0], a0, 0);
        d = vdotq_laneq_s32(d, w[1], a0, 1);
        d = vdotq_laneq_s32(d, w[2], a0, 2);
        d = vdotq_laneq_s32(d, w[3], a0, 3);
    }
    return d;
}

// ---- the types ------------------------------------------------------------------------------
// Q4_K / Q5_K: the 16 rows' 6-bit scales and mins of each sub-block, one byte per row.
template <int NC> struct K4State {
    alignas(16) uint8_t sc8[8][GGML_REPACK_ROWS], m8[8][GGML_REPACK_ROWS];
};

template <int NC, typename G>
inline void k4_prepare(const G * g, Cols, K4State<NC> & st) {
    const uint8x16_t m6 = vdupq_n_u8(0x3F);
    #pragma GCC unroll 8
    for (int j = 0; j < 8; j += 2) {
        const uint8x16_t sm0 = vld1q_u8(g->sm[j]), sm1 = vld1q_u8(g->sm[j + 1]);
        const uint8x16_t lo = vld1q_u8(g->mlo[j / 2]);
        vst1q_u8(st.sc8[j], vandq_u8(sm0, m6));
        vst1q_u8(st.sc8[j + 1], vandq_u8(sm1, m6));
        // m = (sm >> 6) << 4 | low 4 bits (low nibble of mlo for j even, high for j odd).
        vst1q_u8(st.m8[j], vsliq_n_u8(lo, vshrq_n_u8(sm0, 6), 4));
        vst1q_u8(st.m8[j + 1], vsliq_n_u8(vshrq_n_u8(lo, 4), vshrq_n_u8(sm1, 6), 4));
    }
}

// The mins, then the float steps of the reference, for quarter q.
template <int NC, typename G>
inline void k4_finish(const G * g, const K4State<NC> & st, Cols y, int q, uint8x16_t idx, const int32x4_t * isum, float (*acc)[GGML_REPACK_ROWS]) {
    int32x4_t m[8];
    #pragma GCC unroll 8
    for (int j = 0; j < 8; j++) m[j] = to_lanes(vld1q_u8(st.m8[j]), idx);
    const float32x4_t dmin = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(g->dmin + 4 * q)));
    const float32x4_t d = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(g->d + 4 * q)));
    #pragma GCC unroll 8
    for (int c = 0; c < NC; c++) {
        const int32x4_t bs0 = vpaddlq_s16(vld1q_s16(y[c]->bsums));      // sub-blocks 0..3
        const int32x4_t bs1 = vpaddlq_s16(vld1q_s16(y[c]->bsums + 8));  // sub-blocks 4..7
        int32x4_t msum = vmulq_laneq_s32(m[0], bs0, 0);
        msum = vmlaq_laneq_s32(msum, m[1], bs0, 1);
        msum = vmlaq_laneq_s32(msum, m[2], bs0, 2);
        msum = vmlaq_laneq_s32(msum, m[3], bs0, 3);
        msum = vmlaq_laneq_s32(msum, m[4], bs1, 0);
        msum = vmlaq_laneq_s32(msum, m[5], bs1, 1);
        msum = vmlaq_laneq_s32(msum, m[6], bs1, 2);
        msum = vmlaq_laneq_s32(msum, m[7], bs1, 3);
        float32x4_t r = vld1q_f32(acc[c] + 4 * q);
        r = vfmsq_f32(r, vmulq_n_f32(dmin, y[c]->d), vcvtq_f32_s32(msum));
        r = vfmaq_f32(r, vmulq_n_f32(d, y[c]->d), vcvtq_f32_s32(isum[c]));
        vst1q_f32(acc[c] + 4 * q, r);
    }
}

// What Q4_K and Q5_K share: unit p = sub-blocks 2p and 2p + 1, the scales and mins laid out
// per super-block, the mins at the end of each quarter.
struct K4 {
    template <int NC> using State = K4State<NC>;
    static constexpr int UNITS = 4, S = 2, K = 8;
    static constexpr bool UNROLL = false;
    template <int NC, typename G> static void prepare(const G * g, Cols y, State<NC> & st) { k4_prepare<NC>(g, y, st); }
    template <int NC, typename G> static void finish(const G * g, const State<NC> & st, Cols y, int q, uint8x16_t idx,
                                                     const int32x4_t * isum, float (*acc)[GGML_REPACK_ROWS]) {
        k4_finish<NC>(g, st, y, q, idx, isum, acc);
    }
    static constexpr int act(int p, int s) { return 64 * p + 32 * s; }
    template <int NC, typename G, typename U> static int32x4_t scale(const G *, const State<NC> & st, int, uint8x16_t idx, U u, int s) {
        return to_lanes(vld1q_u8(st.sc8[2 * (int) u + s]), idx);
    }
    template <int NC, typename U> static int32x4_t dot_init(const State<NC> &, int, U, int) { return vdupq_n_s32(0); }
};

struct Q4K : K4 {
    typedef block_q4_Kx16 G;
    template <typename U> static void decode(const G * g, int q, U u, int s, int8x16_t * w) {
        const int p = u;
        const uint8x16_t m4 = vdupq_n_u8(0x0F);
        #pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            const uint8x16_t raw = vld1q_u8(g->qs[8 * p + k][4 * q]);
            w[k] = vreinterpretq_s8_u8(s ? vshrq_n_u8(raw, 4) : vandq_u8(raw, m4));
        }
    }
};

struct Q5K : K4 {
    typedef block_q5_Kx16 G;
    template <typename U> static void decode(const G * g, int q, U u, int s, int8x16_t * w) {
        const int p = u;
        const uint8x16_t m4 = vdupq_n_u8(0x0F), m16 = vdupq_n_u8(0x10);
        // Bit 2p of qh to bit 4 (low nibbles); bit 2p + 1 lands on bit 5 (high nibbles).
        const int8x16_t sh = vdupq_n_s8((int8_t) (4 - 2 * p));
        #pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            const uint8x16_t raw = vld1q_u8(g->qs[8 * p + k][4 * q]);
            const uint8x16_t hb = vshlq_u8(vld1q_u8(g->qh[k][4 * q]), sh);
            w[k] = vreinterpretq_s8_u8(s ? vbslq_u8(m16, vshrq_n_u8(hb, 1), vshrq_n_u8(raw, 4)) : vbslq_u8(m16, hb, vandq_u8(raw, m4)));
        }
    }
};

// Q6_K: where each sub-block's sum starts, -32 * bsums.
template <int NC> struct Q6State {
    int32_t nbs[NC][QK_K / 16];
};

// Quarter T of a half (value bits: low nibble of ql for T < 2, else high; qh bits 2T, 2T + 1).
template <int T>
inline int8x16_t q6_decode(uint8x16_t ql, uint8x16_t qh, uint8x16_t m0F, uint8x16_t m30) {
    uint8x16_t lo, sh;
    if constexpr (T < 2) {
        lo = vandq_u8(ql, m0F);
    } else {
        lo = vshrq_n_u8(ql, 4);
    }
    if constexpr (T == 0) {
        sh = vshlq_n_u8(qh, 4);
    } else if constexpr (T == 1) {
        sh = vshlq_n_u8(qh, 2);
    } else if constexpr (T == 2) {
        sh = qh;
    } else {
        sh = vshrq_n_u8(qh, 2);
    }
    return vreinterpretq_s8_u8(vbslq_u8(m30, sh, lo));  // bits 4, 5 from sh, the rest from lo
}

// The types with no mins (Q6_K, IQ4_XS): acc = fma(isum, d * d_a, acc) for quarter q.
template <int NC, typename G>
inline void d_finish(const G * g, Cols y, int q, const int32x4_t * isum, float (*acc)[GGML_REPACK_ROWS]) {
    const float32x4_t dw = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(g->d + 4 * q)));
    #pragma GCC unroll 8
    for (int c = 0; c < NC; c++) {
        const float32x4_t p = vmulq_n_f32(dw, y[c]->d);
        vst1q_f32(acc[c] + 4 * q, vfmaq_f32(vld1q_f32(acc[c] + 4 * q), vcvtq_f32_s32(isum[c]), p));
    }
}

// 4 signed bytes (one per row of a quarter) to the 4 s32 lanes.
inline int32x4_t s8x4_lanes(const int8_t * p) {
    int32_t s4;
    memcpy(&s4, p, 4);
    return vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(s4)))));
}

struct Q6K {
    typedef block_q6_Kx16 G;
    template <int NC> using State = Q6State<NC>;
    static constexpr int UNITS = QK_K / 16, S = 1, K = 4;
    static constexpr bool UNROLL = true;
    template <int NC> static void prepare(const G *, Cols y, State<NC> & st) {
        #pragma GCC unroll 8
        for (int c = 0; c < NC; c++) {
            const int16x8_t b0 = vld1q_s16(y[c]->bsums), b1 = vld1q_s16(y[c]->bsums + 8);
            vst1q_s32(st.nbs[c] + 0, vmull_n_s16(vget_low_s16(b0), -32));
            vst1q_s32(st.nbs[c] + 4, vmull_n_s16(vget_high_s16(b0), -32));
            vst1q_s32(st.nbs[c] + 8, vmull_n_s16(vget_low_s16(b1), -32));
            vst1q_s32(st.nbs[c] + 12, vmull_n_s16(vget_high_s16(b1), -32));
        }
    }
    template <int NC> static void finish(const G * g, const State<NC> &, Cols y, int q, uint8x16_t, const int32x4_t * isum,
                                         float (*acc)[GGML_REPACK_ROWS]) {
        d_finish<NC>(g, y, q, isum, acc);
    }
    // Sub-block J: values 16 J .. 16 J + 15, half J / 8, quarter t = J % 8 / 2, l from 16 (J % 2).
    static constexpr int act(int j, int) { return 16 * j; }
    template <typename U> static void decode(const G * g, int q, U, int, int8x16_t * w) {
        constexpr int J = U::value, h = J / 8, t = J % 8 / 2, gg = J % 2;
        const uint8x16_t m0F = vdupq_n_u8(0x0F), m30 = vdupq_n_u8(0x30);
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            w[k] = q6_decode<t>(vld1q_u8(g->q[ggml_q6_Kx16_ql(16 * h + 8 * (t & 1) + 4 * gg + k)][4 * q]),
                                vld1q_u8(g->q[ggml_q6_Kx16_qh(8 * h + 4 * gg + k)][4 * q]), m0F, m30);
        }
    }
    template <int NC, typename U> static int32x4_t scale(const G * g, const State<NC> &, int q, uint8x16_t, U, int) {
        return s8x4_lanes(g->scales[U::value] + 4 * q);
    }
    template <int NC, typename U> static int32x4_t dot_init(const State<NC> & st, int c, U, int) { return vld1q_dup_s32(&st.nbs[c][U::value]); }
};

// IQ4_XS: the 16 rows' scales ls - 32 of each sub-block, one byte per row.
template <int NC> struct IQ4State {
    alignas(16) int8_t sc8[8][GGML_REPACK_ROWS];
};

struct IQ4XS {
    typedef block_iq4_xsx16 G;
    template <int NC> using State = IQ4State<NC>;
    static constexpr int UNITS = 4, S = 2, K = 8;
    static constexpr bool UNROLL = false;
    template <int NC> static void prepare(const G * g, Cols, State<NC> & st) {
        const uint8x16_t m4 = vdupq_n_u8(0x0F), m30 = vdupq_n_u8(0x30), m32 = vdupq_n_u8(32);
        #pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            const uint8x16_t l = vld1q_u8(g->scales_l[j / 2]), h = vld1q_u8(g->scales_h[j / 4]);
            const uint8x16_t lo = (j & 1) ? vshrq_n_u8(l, 4) : vandq_u8(l, m4);
            const uint8x16_t hi = vshlq_u8(h, vdupq_n_s8((int8_t) (4 - 2 * (j % 4))));  // bits 2 (j % 4), + 1 to 4, 5
            vst1q_s8(st.sc8[j], vreinterpretq_s8_u8(vsubq_u8(vbslq_u8(m30, hi, lo), m32)));
        }
    }
    template <int NC> static void finish(const G * g, const State<NC> &, Cols y, int q, uint8x16_t, const int32x4_t * isum,
                                         float (*acc)[GGML_REPACK_ROWS]) {
        d_finish<NC>(g, y, q, isum, acc);
    }
    static constexpr int act(int p, int s) { return 64 * p + 32 * s; }
    template <typename U> static void decode(const G * g, int q, U u, int s, int8x16_t * w) {
        const int j = 2 * (int) u + s;
        const int8x16_t table = vld1q_s8(kvalues_iq4nl);
        const uint8x16_t m4 = vdupq_n_u8(0x0F);
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const uint8x16_t raw = vld1q_u8(g->qs[4 * j + k][4 * q]);
            w[k] = vqtbl1q_s8(table, vandq_u8(raw, m4));
            w[4 + k] = vqtbl1q_s8(table, vshrq_n_u8(raw, 4));
        }
    }
    template <int NC, typename U> static int32x4_t scale(const G *, const State<NC> & st, int q, uint8x16_t, U u, int s) {
        return s8x4_lanes(st.sc8[2 * (int) u + s] + 4 * q);
    }
    template <int NC, typename U> static int32x4_t dot_init(const State<NC> &, int, U, int) { return vdupq_n_s32(0); }
};

// ---- the kernel -----------------------------------------------------------------------------
// Group S of a unit for quarter q: decoded once, met by every column.
template <typename T, int NC, int S, typename U>
inline void group(const typename T::G * g, const typename T::template State<NC> & st, Cols y, int q, uint8x16_t idx,
                  int32x4_t * isum, U u) {
    int8x16_t w[T::K];
    T::decode(g, q, u, S, w);
    const int32x4_t sc = T::template scale<NC>(g, st, q, idx, u, S);
    #pragma GCC unroll 8
    for (int c = 0; c < NC; c++) {
        const int32x4_t d = dot<T::K>(T::template dot_init<NC>(st, c, u, S), w, y[c]->qs + T::act(u, S));
        isum[c] = vmlaq_s32(isum[c], d, sc);
    }
}

// One unit of a super-block for quarter q: its groups one after the other.
template <typename T, int NC, typename U>
inline void unit(const typename T::G * g, const typename T::template State<NC> & st, Cols y, int q, uint8x16_t idx,
                 int32x4_t * isum, U u) {
    group<T, NC, 0>(g, st, y, q, idx, isum, u);
    if constexpr (T::S == 2) group<T, NC, 1>(g, st, y, q, idx, isum, u);
}

template <typename T, int NC, int... U>
inline void units(const typename T::G * g, const typename T::template State<NC> & st, Cols y, int q, uint8x16_t idx,
                  int32x4_t * isum, std::integer_sequence<int, U...>) {
    (unit<T, NC>(g, st, y, q, idx, isum, std::integral_constant<int, U>()), ...);
}

// 16 rows (4 quarters) against NC columns.
template <typename T, int NC>
void gemm(int64_t nb, const typename T::G * a, const char * b, size_t ldb, float * s, size_t lds) {
    alignas(16) float acc[NC][GGML_REPACK_ROWS];
    #pragma GCC unroll 8
    for (int c = 0; c < NC; c++) {
        for (int r = 0; r < GGML_REPACK_ROWS; r += 4) vst1q_f32(acc[c] + r, vdupq_n_f32(0.0f));
    }
    for (int64_t i = 0; i < nb; i++) {
        const typename T::G * g = a + i;
        const block_q8_Kx * y[NC];
        #pragma GCC unroll 8
        for (int c = 0; c < NC; c++) y[c] = (const block_q8_Kx *) (b + c * ldb) + i;
        typename T::template State<NC> st;
        T::template prepare<NC>(g, y, st);

        #pragma GCC unroll 1
        for (int q = 0; q < GGML_REPACK_ROWS / 4; q++) {
            const uint8x16_t idx = vld1q_u8(lanes_idx[q]);
            int32x4_t isum[NC];
            #pragma GCC unroll 8
            for (int c = 0; c < NC; c++) isum[c] = vdupq_n_s32(0);
            if constexpr (T::UNROLL) {
                units<T, NC>(g, st, y, q, idx, isum, std::make_integer_sequence<int, T::UNITS>());
            } else {
                #pragma GCC unroll 1
                for (int u = 0; u < T::UNITS; u++) unit<T, NC>(g, st, y, q, idx, isum, u);
            }
            T::template finish<NC>(g, st, y, q, idx, isum, acc);
        }
    }
    #pragma GCC unroll 8
    for (int c = 0; c < NC; c++) {
        for (int r = 0; r < GGML_REPACK_ROWS; r += 4) vst1q_f32(s + c * lds + r, vld1q_f32(acc[c] + r));
    }
}

// All nc (<= 8) columns in one pass.
template <typename T, int... N>
void run(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds, std::integer_sequence<int, N...>) {
    typedef void (*kernel_fn)(int64_t, const typename T::G *, const char *, size_t, float *, size_t);
    static const kernel_fn kernels[] = { gemm<T, N + 1>... };
    GGML_ASSERT(nc >= 1 && nc <= GGML_REPACK_MAX_COLS);
    kernels[nc - 1](nb, (const typename T::G *) a, (const char *) b, ldb, s, lds);
}

template <typename T>
void gemm_kx16(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) {
    run<T>(nb, a, b, ldb, nc, s, lds, std::make_integer_sequence<int, GGML_REPACK_MAX_COLS>());
}

}  // namespace

void repack_gemm_q4_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) { gemm_kx16<Q4K>(nb, a, b, ldb, nc, s, lds); }
void repack_gemm_q5_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) { gemm_kx16<Q5K>(nb, a, b, ldb, nc, s, lds); }
void repack_gemm_q6_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) { gemm_kx16<Q6K>(nb, a, b, ldb, nc, s, lds); }
void repack_gemm_iq4_xs(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) { gemm_kx16<IQ4XS>(nb, a, b, ldb, nc, s, lds); }

}  // namespace ggml_cpu_neon

#endif  // GGML_SIMD_NEON && __ARM_FEATURE_DOTPROD
