// quant-repack-q4_K-neon.cpp - NEON (SDOT) kernel for Q4_K weights repacked 16 rows at a time
// (quant-repack.h). As in quant-repack-neon.cpp, the 16 bytes at qs[k][4q] are rows 4q..4q+3 of
// byte column k (4 bytes each): one register whose 4 s32 lanes are 4 rows, and SDOT by lane
// (vdotq_laneq_s32) against 4 activation bytes gives each row's partial sum in its own lane.
// Sub-blocks 2p and 2p + 1 are the low and high nibbles of columns 8p .. 8p + 7; column 8p + k
// meets activation bytes 64p + 4k .. (low) and 64p + 32 + 4k .. (high), lane k & 3 of one of
// two 16-byte registers. Nibbles 0..15 are valid s8, so no offset is needed.
//
// Per super-block and row quarter (4 rows): each sub-block's dot (at most 32 * 15 * 128) times
// its 6-bit scale (vmlaq_s32, exact) into isum; then the mins, m_j * (bsums[2j] + bsums[2j + 1])
// (vpaddlq_s16 gives the 32-bit pair sums, vmlaq_laneq_s32 the products), and the float steps
// of the reference in its order: acc = fma(-(dmin * d_a), msum, acc) (vfmsq_f32), then
// acc = fma(d * d_a, isum, acc): the same bits.
//
// Registers: one sub-block of a quarter decodes to 8 registers (the 8 raw ones are kept for the
// high nibbles), plus 2 activation registers, and an integer sum per column. The float
// accumulators live in a small array (one load and store per quarter and column per super-block),
// so every column count runs in one pass over the weights. The 4-row scale and min vectors come
// from 16-row byte vectors through TBL (indices past 15 give zero bytes: bytes to 32-bit lanes).
#include "kernels-arm.h"

#if defined(GGML_SIMD_NEON) && defined(__ARM_FEATURE_DOTPROD)

#include <arm_neon.h>

// As in quant-repack-neon.cpp: keep GCC's first scheduling pass from hoisting every column's
// activation loads ahead of the dots (more live registers than there are).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-schedule-insns")
#endif

namespace {

// TBL indices taking bytes 4q .. 4q + 3 of a 16-byte vector to the 4 32-bit lanes (zero-extended).
alignas(16) const uint8_t lanes_idx[4][16] = {
    { 0, 255, 255, 255, 1, 255, 255, 255, 2, 255, 255, 255, 3, 255, 255, 255 },
    { 4, 255, 255, 255, 5, 255, 255, 255, 6, 255, 255, 255, 7, 255, 255, 255 },
    { 8, 255, 255, 255, 9, 255, 255, 255, 10, 255, 255, 255, 11, 255, 255, 255 },
    { 12, 255, 255, 255, 13, 255, 255, 255, 14, 255, 255, 255, 15, 255, 255, 255 },
};

inline int32x4_t to_lanes(uint8x16_t v, uint8x16_t idx) { return vreinterpretq_s32_u8(vqtbl1q_u8(v, idx)); }

// 8 sub-block dots of one quarter: columns w[0..7] against 32 activation bytes (a0, a1).
inline int32x4_t dot32(const int8x16_t * w, int8x16_t a0, int8x16_t a1) {
    int32x4_t d = vdotq_laneq_s32(vdupq_n_s32(0), w[0], a0, 0);
    d = vdotq_laneq_s32(d, w[1], a0, 1);
    d = vdotq_laneq_s32(d, w[2], a0, 2);
    d = vdotq_laneq_s32(d, w[3], a0, 3);
    d = vdotq_laneq_s32(d, w[4], a1, 0);
    d = vdotq_laneq_s32(d, w[5], a1, 1);
    d = vdotq_laneq_s32(d, w[6], a1, 2);
    d = vdotq_laneq_s32(d, w[7], a1, 3);
    return d;
}

template <int NC>
void gemm_q4_Kx16(int64_t nb, const block_q4_Kx16 * a, const char * b, size_t ldb, float * s, size_t lds) {
    alignas(16) float acc[NC][GGML_REPACK_ROWS];
    #pragma GCC unroll 8
    for (int c = 0; c < NC; c++) {
        for (int r = 0; r < GGML_REPACK_ROWS; r += 4) vst1q_f32(acc[c] + r, vdupq_n_f32(0.0f));
    }
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    const uint8x16_t m6 = vdupq_n_u8(0x3F);
    for (int64_t i = 0; i < nb; i++) {
        const block_q4_Kx16 * g = a + i;
        const block_q8_K * y[NC];
        #pragma GCC unroll 8
        for (int c = 0; c < NC; c++) y[c] = (const block_q8_K *) (b + c * ldb) + i;

        // The 16 rows' scales and mins of each sub-block, one byte per row.
        alignas(16) uint8_t sc8[8][GGML_REPACK_ROWS], m8[8][GGML_REPACK_ROWS];
        #pragma GCC unroll 8
        for (int j = 0; j < 8; j += 2) {
            const uint8x16_t sm0 = vld1q_u8(g->sm[j]), sm1 = vld1q_u8(g->sm[j + 1]);
            const uint8x16_t lo = vld1q_u8(g->mlo[j / 2]);
            vst1q_u8(sc8[j], vandq_u8(sm0, m6));
            vst1q_u8(sc8[j + 1], vandq_u8(sm1, m6));
            // m = (sm >> 6) << 4 | low 4 bits (low nibble of mlo for j even, high for j odd).
            vst1q_u8(m8[j], vsliq_n_u8(lo, vshrq_n_u8(sm0, 6), 4));
            vst1q_u8(m8[j + 1], vsliq_n_u8(vshrq_n_u8(lo, 4), vshrq_n_u8(sm1, 6), 4));
        }

        #pragma GCC unroll 1
        for (int q = 0; q < GGML_REPACK_ROWS / 4; q++) {
            const uint8x16_t idx = vld1q_u8(lanes_idx[q]);
            int32x4_t isum[NC];
            #pragma GCC unroll 8
            for (int c = 0; c < NC; c++) isum[c] = vdupq_n_s32(0);
            #pragma GCC unroll 1
            for (int p = 0; p < 4; p++) {
                uint8x16_t raw[8];
                int8x16_t w[8];
                #pragma GCC unroll 8
                for (int k = 0; k < 8; k++) {
                    raw[k] = vld1q_u8(g->qs[8 * p + k][4 * q]);
                    w[k] = vreinterpretq_s8_u8(vandq_u8(raw[k], m4));
                }
                const int32x4_t sc0 = to_lanes(vld1q_u8(sc8[2 * p]), idx);
                #pragma GCC unroll 8
                for (int c = 0; c < NC; c++) {
                    const int8_t * x = y[c]->qs + 64 * p;
                    isum[c] = vmlaq_s32(isum[c], dot32(w, vld1q_s8(x), vld1q_s8(x + 16)), sc0);
                }
                #pragma GCC unroll 8
                for (int k = 0; k < 8; k++) w[k] = vreinterpretq_s8_u8(vshrq_n_u8(raw[k], 4));
                const int32x4_t sc1 = to_lanes(vld1q_u8(sc8[2 * p + 1]), idx);
                #pragma GCC unroll 8
                for (int c = 0; c < NC; c++) {
                    const int8_t * x = y[c]->qs + 64 * p + 32;
                    isum[c] = vmlaq_s32(isum[c], dot32(w, vld1q_s8(x), vld1q_s8(x + 16)), sc1);
                }
            }

            // Mins, then the float steps of the reference.
            int32x4_t m[8];
            #pragma GCC unroll 8
            for (int j = 0; j < 8; j++) m[j] = to_lanes(vld1q_u8(m8[j]), idx);
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
    }
    #pragma GCC unroll 8
    for (int c = 0; c < NC; c++) {
        for (int r = 0; r < GGML_REPACK_ROWS; r += 4) vst1q_f32(s + c * lds + r, vld1q_f32(acc[c] + r));
    }
}

}  // namespace

namespace ggml_cpu_neon {

void repack_gemm_q4_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) {
    const block_q4_Kx16 * g = (const block_q4_Kx16 *) a;
    const char * y = (const char *) b;
    switch (nc) {
        case 1: gemm_q4_Kx16<1>(nb, g, y, ldb, s, lds); break;
        case 2: gemm_q4_Kx16<2>(nb, g, y, ldb, s, lds); break;
        case 3: gemm_q4_Kx16<3>(nb, g, y, ldb, s, lds); break;
        case 4: gemm_q4_Kx16<4>(nb, g, y, ldb, s, lds); break;
        case 5: gemm_q4_Kx16<5>(nb, g, y, ldb, s, lds); break;
        case 6: gemm_q4_Kx16<6>(nb, g, y, ldb, s, lds); break;
        case 7: gemm_q4_Kx16<7>(nb, g, y, ldb, s, lds); break;
        case 8: gemm_q4_Kx16<8>(nb, g, y, ldb, s, lds); break;
        default: GGML_ABORT("gemm_q4_Kx16: %d columns (at most %d)", nc, GGML_REPACK_MAX_COLS);
    }
}

}  // namespace ggml_cpu_neon

#endif
