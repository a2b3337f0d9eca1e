// quant-repack-neon.cpp - NEON (SDOT) kernels for Q4_0 and Q8_0 weights repacked 16 rows at a
// time (quant-repack.h). In the x16 layouts, the 16 bytes at qs + 64 j + 16 q are rows 4q..4q+3,
// 4 bytes each, of byte column j: one register whose 4 s32 lanes are 4 rows. SDOT by lane
// (vdotq_laneq_s32) multiplies each row's 4 bytes with the same 4 activation bytes, so every lane
// ends the block holding its row's integer sum, with no horizontal reduction.
//   Q4_0: column j holds weights 4j..4j+3 in the low nibbles (lane j of the activation's qs[0..15])
//   and 16+4j.. in the high ones (lane j of qs[16..31]). Nibbles 0..15 are valid s8; the offset of
//   8 comes in through neg8sum, where each sum starts.
//   Q8_0: columns j = 0..7 are weights 4j..4j+3 (lane j & 3 of qs[0..15] or qs[16..31]), stored
//   plus 128; XOR 0x80 gives the signed values back, so each sum starts at zero.
//
// Registers: one quarter (4 rows) of a block decodes to 8 registers (both types); the float
// accumulators are NC x (rows per pass / 4). Wide column counts run the rows in several passes
// over the weights (which then come from cache) so that the accumulators stay in registers.
//
// The float steps are those of the reference: p = d_w * d_a (one rounding), acc = fma(isum, p,
// acc), block after block, so the results are the same bits.
#include "kernels-arm.h"

#if defined(GGML_SIMD_NEON) && defined(__ARM_FEATURE_DOTPROD)

#include <arm_neon.h>

// GCC's first scheduling pass moves the activation loads of all the columns ahead of the dots,
// which needs more than 32 vector registers and spills accumulators in the inner loop (GCC 12,
// every NC); the kernel is written in the order it should run.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-schedule-insns")
#endif

namespace ggml_cpu_neon {
namespace {

// Row quarters (4 rows each) per pass over the weights for NC columns: NC * QR float accumulators.
constexpr int quarters_per_pass(int nc) { return nc <= 2 ? 4 : nc <= 4 ? 2 : 1; }

// Rows 4 q0 .. 4 (q0 + QR) - 1 of the group against NC columns.
template <int NC, int QR>
inline void gemm_pass(int64_t nb, const block_q4_0x16 * a, const char * b, size_t ldb, float * s, size_t lds, int q0) {
    float32x4_t acc[NC][QR];
    #pragma GCC unroll 8
    for (int c = 0; c < NC; c++) {
        #pragma GCC unroll 8
        for (int q = 0; q < QR; q++) acc[c][q] = vdupq_n_f32(0.0f);
    }
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    for (int64_t i = 0; i < nb; i++) {
        const block_q4_0x16 * g = a + i;
        #pragma GCC unroll 8
        for (int q = 0; q < QR; q++) {
            const uint8_t * w = g->qs + 16 * (q0 + q);
            int8x16_t lo[4], hi[4];
            #pragma GCC unroll 8
            for (int j = 0; j < 4; j++) {
                const uint8x16_t x = vld1q_u8(w + 64 * j);
                lo[j] = vreinterpretq_s8_u8(vandq_u8(x, m4));
                hi[j] = vreinterpretq_s8_u8(vshrq_n_u8(x, 4));
            }
            const float32x4_t dw = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(g->d + 4 * (q0 + q))));
            #pragma GCC unroll 8
            for (int c = 0; c < NC; c++) {
                const block_q8_0x * y = (const block_q8_0x *) (b + c * ldb) + i;
                const int8x16_t alo = vld1q_s8(y->qs);
                const int8x16_t ahi = vld1q_s8(y->qs + 16);
                int32x4_t is = vld1q_dup_s32(&y->neg8sum);
                is = vdotq_laneq_s32(is, lo[0], alo, 0);
                is = vdotq_laneq_s32(is, hi[0], ahi, 0);
                is = vdotq_laneq_s32(is, lo[1], alo, 1);
                is = vdotq_laneq_s32(is, hi[1], ahi, 1);
                is = vdotq_laneq_s32(is, lo[2], alo, 2);
                is = vdotq_laneq_s32(is, hi[2], ahi, 2);
                is = vdotq_laneq_s32(is, lo[3], alo, 3);
                is = vdotq_laneq_s32(is, hi[3], ahi, 3);
                const float32x4_t p = vmulq_n_f32(dw, y->d);
                acc[c][q] = vfmaq_f32(acc[c][q], vcvtq_f32_s32(is), p);
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
void gemm_q4_0x16(int64_t nb, const block_q4_0x16 * a, const char * b, size_t ldb, float * s, size_t lds) {
    constexpr int QR = quarters_per_pass(NC);
    for (int q0 = 0; q0 < GGML_REPACK_ROWS / 4; q0 += QR) gemm_pass<NC, QR>(nb, a, b, ldb, s, lds, q0);
}

// Q8_0 x16: the same quarters, 8 byte columns of 4 rows each. The stored bytes are values + 128
// (value XOR 0x80); XOR-ing the 0x80 back gives the signed values, so each sum starts at zero and
// ends equal to the reference's 16 * neg8sum + sum(stored * activation) (no offset to take out).
template <int NC, int QR>
inline void gemm_pass_q8(int64_t nb, const block_q8_0x16 * a, const char * b, size_t ldb, float * s, size_t lds, int q0) {
    float32x4_t acc[NC][QR];
    #pragma GCC unroll 8
    for (int c = 0; c < NC; c++) {
        #pragma GCC unroll 8
        for (int q = 0; q < QR; q++) acc[c][q] = vdupq_n_f32(0.0f);
    }
    const uint8x16_t m80 = vdupq_n_u8(0x80);
    for (int64_t i = 0; i < nb; i++) {
        const block_q8_0x16 * g = a + i;
        #pragma GCC unroll 8
        for (int q = 0; q < QR; q++) {
            const uint8_t * w = g->qs + 16 * (q0 + q);
            int8x16_t x[8];  // x[j]: bytes 4j..4j+3 of rows 4 (q0 + q) .. + 3, signed
            #pragma GCC unroll 8
            for (int j = 0; j < 8; j++) x[j] = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(w + 64 * j), m80));
            const float32x4_t dw = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(g->d + 4 * (q0 + q))));
            #pragma GCC unroll 8
            for (int c = 0; c < NC; c++) {
                const block_q8_0x * y = (const block_q8_0x *) (b + c * ldb) + i;
                const int8x16_t alo = vld1q_s8(y->qs);
                const int8x16_t ahi = vld1q_s8(y->qs + 16);
                int32x4_t is = vdupq_n_s32(0);
                is = vdotq_laneq_s32(is, x[0], alo, 0);
                is = vdotq_laneq_s32(is, x[4], ahi, 0);
                is = vdotq_laneq_s32(is, x[1], alo, 1);
                is = vdotq_laneq_s32(is, x[5], ahi, 1);
                is = vdotq_laneq_s32(is, x[2], alo, 2);
                is = vdotq_laneq_s32(is, x[6], ahi, 2);
                is = vdotq_laneq_s32(is, x[3], alo, 3);
                is = vdotq_laneq_s32(is, x[7], ahi, 3);
                const float32x4_t p = vmulq_n_f32(dw, y->d);
                acc[c][q] = vfmaq_f32(acc[c][q], vcvtq_f32_s32(is), p);
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
void gemm_q8_0x16(int64_t nb, const block_q8_0x16 * a, const char * b, size_t ldb, float * s, size_t lds) {
    constexpr int QR = quarters_per_pass(NC);
    for (int q0 = 0; q0 < GGML_REPACK_ROWS / 4; q0 += QR) gemm_pass_q8<NC, QR>(nb, a, b, ldb, s, lds, q0);
}

}  // namespace

void repack_gemm_q4_0(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) {
    const block_q4_0x16 * g = (const block_q4_0x16 *) a;
    const char * y = (const char *) b;
    switch (nc) {
        case 1: gemm_q4_0x16<1>(nb, g, y, ldb, s, lds); break;
        case 2: gemm_q4_0x16<2>(nb, g, y, ldb, s, lds); break;
        case 3: gemm_q4_0x16<3>(nb, g, y, ldb, s, lds); break;
        case 4: gemm_q4_0x16<4>(nb, g, y, ldb, s, lds); break;
        case 5: gemm_q4_0x16<5>(nb, g, y, ldb, s, lds); break;
        case 6: gemm_q4_0x16<6>(nb, g, y, ldb, s, lds); break;
        case 7: gemm_q4_0x16<7>(nb, g, y, ldb, s, lds); break;
        case 8: gemm_q4_0x16<8>(nb, g, y, ldb, s, lds); break;
        default: GGML_ABORT("gemm_q4_0x16: %d columns (at most %d)", nc, GGML_REPACK_MAX_COLS);
    }
}

void repack_gemm_q8_0(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds) {
    const block_q8_0x16 * g = (const block_q8_0x16 *) a;
    const char * y = (const char *) b;
    switch (nc) {
        case 1: gemm_q8_0x16<1>(nb, g, y, ldb, s, lds); break;
        case 2: gemm_q8_0x16<2>(nb, g, y, ldb, s, lds); break;
        case 3: gemm_q8_0x16<3>(nb, g, y, ldb, s, lds); break;
        case 4: gemm_q8_0x16<4>(nb, g, y, ldb, s, lds); break;
        case 5: gemm_q8_0x16<5>(nb, g, y, ldb, s, lds); break;
        case 6: gemm_q8_0x16<6>(nb, g, y, ldb, s, lds); break;
        case 7: gemm_q8_0x16<7>(nb, g, y, ldb, s, lds); break;
        case 8: gemm_q8_0x16<8>(nb, g, y, ldb, s, lds); break;
        default: GGML_ABORT("gemm_q8_0x16: %d columns (at most %d)", nc, GGML_REPACK_MAX_COLS);
    }
}

}  // namespace ggml_cpu_neon

#endif
