// quant-repack-q6_K-neon.cpp - NEON (SDOT) kernel for Q6_K weights repacked 16 rows at a time
// (quant-repack.h). In block_q6_Kx16, the 16 bytes at q[ggml_q6_Kx16_ql(k)][4q] (resp. _qh) are
// rows 4q..4q+3, 4 bytes each, of ql (qh) byte column k: one register whose 4 s32 lanes are 4 rows. A
// sub-block j (16 values) is 4 byte columns; they decode to the unsigned 6-bit values (0..63,
// valid s8: ql nibble | 2 qh bits << 4), and SDOT by lane (vdotq_laneq_s32) meets column k with
// activation bytes 16j + 4k .. 16j + 4k + 3, so every lane ends the sub-block holding its row's sum.
// Each sub-block's sum starts at -32 * bsums[j] (the reference's offset term, taken sub-block
// by sub-block: the same integer) and is then multiplied by the rows' scales (vmlaq_s32).
//
// The float steps are those of the reference: p = d_w * d_a (one rounding), acc = fma(isum, p,
// acc), super-block after super-block, so the results are the same bits.
#include "kernels-arm.h"

#if defined(GGML_SIMD_NEON) && defined(__ARM_FEATURE_DOTPROD)

#include <arm_neon.h>
#include <string.h>

#include <utility>

// As in quant-repack-neon.cpp: keep GCC's first scheduling pass from hoisting the loads of all
// the columns ahead of the dots (which spills accumulators).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-schedule-insns")
#endif

namespace {

// Row quarters (4 rows each) per pass over the weights for NC columns: NC * QR float accumulators
// and as many integer sums.
constexpr int quarters_per_pass(int nc) { return nc <= 2 ? 4 : nc <= 4 ? 2 : 1; }

// Quarter T of a half (value bits: low nibble of ql for T < 2, else high; qh bits 2T, 2T + 1).
template <int T>
inline int8x16_t decode(uint8x16_t ql, uint8x16_t qh, uint8x16_t m0F, uint8x16_t m30) {
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

// Sub-block J (values 16 J .. 16 J + 15: half h = J / 8, quarter t = J % 8 / 2, l from 16 (J % 2))
// of row quarters q0 .. q0 + QR - 1 against NC columns, added to isum.
template <int NC, int QR, int J>
inline void sub_block(const block_q6_Kx16 * g, const block_q8_K * const * y, const int32_t (*nbs)[QK_K / 16], int q0,
                      uint8x16_t m0F, uint8x16_t m30, int32x4_t (*isum)[QR]) {
    constexpr int h = J / 8, t = J % 8 / 2, gg = J % 2;
    #pragma GCC unroll 4
    for (int q = 0; q < QR; q++) {
        const int r = 4 * (q0 + q);
        int8x16_t u[4];
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            u[k] = decode<t>(vld1q_u8(g->q[ggml_q6_Kx16_ql(16 * h + 8 * (t & 1) + 4 * gg + k)][r]),
                            vld1q_u8(g->q[ggml_q6_Kx16_qh(8 * h + 4 * gg + k)][r]), m0F, m30);
        }
        int32_t s4;
        memcpy(&s4, g->scales[J] + r, 4);
        const int32x4_t sc = vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(s4)))));
        #pragma GCC unroll 8
        for (int c = 0; c < NC; c++) {
            const int8x16_t act = vld1q_s8(y[c]->qs + 16 * J);
            int32x4_t d = vld1q_dup_s32(&nbs[c][J]);
            d = vdotq_laneq_s32(d, u[0], act, 0);
            d = vdotq_laneq_s32(d, u[1], act, 1);
            d = vdotq_laneq_s32(d, u[2], act, 2);
            d = vdotq_laneq_s32(d, u[3], act, 3);
            isum[c][q] = vmlaq_s32(isum[c][q], d, sc);
        }
    }
}

template <int NC, int QR, int... J>
inline void sub_blocks(const block_q6_Kx16 * g, const block_q8_K * const * y, const int32_t (*nbs)[QK_K / 16], int q0,
                       uint8x16_t m0F, uint8x16_t m30, int32x4_t (*isum)[QR], std::integer_sequence<int, J...>) {
    (sub_block<NC, QR, J>(g, y, nbs, q0, m0F, m30, isum), ...);
}

// Rows 4 q0 .. 4 (q0 + QR) - 1 of the group against NC columns.
template <int NC, int QR>
void gemm_pass(int64_t nb, const block_q6_Kx16 * a, const char * b, size_t ldb, float * s, size_t lds, int q0) {
    float32x4_t acc[NC][QR];
    #pragma GCC unroll 8
    for (int c = 0; c < NC; c++) {
        #pragma GCC unroll 8
        for (int q = 0; q < QR; q++) acc[c][q] = vdupq_n_f32(0.0f);
    }
    const uint8x16_t m0F = vdupq_n_u8(0x0F), m30 = vdupq_n_u8(0x30);
    for (int64_t i = 0; i < nb; i++) {
        const block_q6_Kx16 * g = a + i;
        const block_q8_K * y[NC];
        int32_t nbs[NC][QK_K / 16];  // -32 * bsums, where each sub-block's sum starts
        #pragma GCC unroll 8
        for (int c = 0; c < NC; c++) {
            y[c] = (const block_q8_K *) (b + c * ldb) + i;
            const int16x8_t b0 = vld1q_s16(y[c]->bsums), b1 = vld1q_s16(y[c]->bsums + 8);
            vst1q_s32(nbs[c] + 0, vmull_n_s16(vget_low_s16(b0), -32));
            vst1q_s32(nbs[c] + 4, vmull_n_s16(vget_high_s16(b0), -32));
            vst1q_s32(nbs[c] + 8, vmull_n_s16(vget_low_s16(b1), -32));
            vst1q_s32(nbs[c] + 12, vmull_n_s16(vget_high_s16(b1), -32));
        }
        int32x4_t isum[NC][QR];
        #pragma GCC unroll 8
        for (int c = 0; c < NC; c++) {
            #pragma GCC unroll 8
            for (int q = 0; q < QR; q++) isum[c][q] = vdupq_n_s32(0);
        }
        sub_blocks<NC, QR>(g, y, nbs, q0, m0F, m30, isum, std::make_integer_sequence<int, QK_K / 16>());
        #pragma GCC unroll 8
        for (int q = 0; q < QR; q++) {
            const float32x4_t dw = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(g->d + 4 * (q0 + q))));
            #pragma GCC unroll 8
            for (int c = 0; c < NC; c++) {
                const float32x4_t p = vmulq_n_f32(dw, y[c]->d);
                acc[c][q] = vfmaq_f32(acc[c][q], vcvtq_f32_s32(isum[c][q]), p);
            }
        }
    }
    #pragma GCC unroll 8
    for (int c = 0; c < NC; c++) {
        #pragma GCC unroll 8
        for (int q = 0; q < QR; q++) vst1q_f32(s + c * lds + 4 * (q0 + q), acc[c][q]);
    }
}

template <int NC>
void gemm_q6_Kx16(int64_t nb, const block_q6_Kx16 * a, const char * b, size_t ldb, float * s, size_t lds) {
    constexpr int QR = quarters_per_pass(NC);
    for (int q0 = 0; q0 < GGML_REPACK_ROWS / 4; q0 += QR) gemm_pass<NC, QR>(nb, a, b, ldb, s, lds, q0);
}

}  // namespace

namespace ggml_cpu_neon {

void repack_gemm_q6_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) {
    const block_q6_Kx16 * g = (const block_q6_Kx16 *) a;
    const char * y = (const char *) b;
    switch (nc) {
        case 1: gemm_q6_Kx16<1>(nb, g, y, ldb, s, lds); break;
        case 2: gemm_q6_Kx16<2>(nb, g, y, ldb, s, lds); break;
        case 3: gemm_q6_Kx16<3>(nb, g, y, ldb, s, lds); break;
        case 4: gemm_q6_Kx16<4>(nb, g, y, ldb, s, lds); break;
        case 5: gemm_q6_Kx16<5>(nb, g, y, ldb, s, lds); break;
        case 6: gemm_q6_Kx16<6>(nb, g, y, ldb, s, lds); break;
        case 7: gemm_q6_Kx16<7>(nb, g, y, ldb, s, lds); break;
        case 8: gemm_q6_Kx16<8>(nb, g, y, ldb, s, lds); break;
        default: GGML_ABORT("gemm_q6_Kx16: %d columns (at most %d)", nc, GGML_REPACK_MAX_COLS);
    }
}

}  // namespace ggml_cpu_neon

#endif
