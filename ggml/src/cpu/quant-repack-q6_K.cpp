// quant-repack-q6_K.cpp - Q6_K x16 (quant-repack.h): packing, the way back, the reference kernel.
// The 6-bit values are taken unsigned (u = q in 0..63) and the offset of 32 comes out through
// Q8_K's 16-value sums. Per super-block, row r and column (integers, exact in any order):
//   isum = sum_j sc_j * sum_{l < 16} u_{16j+l} * y.qs[16j+l]  -  32 * sum_j sc_j * y.bsums[j]
// then acc = fma(d * d_a, isum, acc), super-block after super-block.
//
// Where value v = 128h + 32t + l (h half, t quarter 0..3, l 0..31) of a row lives: low 4 bits in
// ql byte 64h + 32(t & 1) + l (low nibble for t < 2, high nibble otherwise), high 2 bits in qh
// byte 32h + l at bit 2t. In 4-byte columns: l = 4g + b, ql column 16h + 8(t & 1) + g, qh
// column 8h + g, byte b of each; ggml_q6_Kx16_ql / _qh say where a column is stored.
#include "quant-repack.h"

#include <math.h>
#include <string.h>

void ggml_repack_q6_K_pack_group(const void * vrows, int64_t nb, void * vout) {
    const block_q6_K * rows = (const block_q6_K *) vrows;
    block_q6_Kx16 * out = (block_q6_Kx16 *) vout;
    for (int64_t i = 0; i < nb; i++) {
        block_q6_Kx16 & g = out[i];
        for (int r = 0; r < GGML_REPACK_ROWS; r++) {
            const block_q6_K & src = rows[r * nb + i];
            g.d[r] = src.d;
            for (int j = 0; j < QK_K / 16; j++) g.scales[j][r] = src.scales[j];
            for (int k = 0; k < QK_K / 8; k++) memcpy(g.q[ggml_q6_Kx16_ql(k)][r], src.ql + 4 * k, 4);
            for (int k = 0; k < QK_K / 16; k++) memcpy(g.q[ggml_q6_Kx16_qh(k)][r], src.qh + 4 * k, 4);
        }
    }
}

void ggml_repack_q6_K_unpack_group(const void * vin, int64_t nb, void * vrows) {
    const block_q6_Kx16 * in = (const block_q6_Kx16 *) vin;
    block_q6_K * rows = (block_q6_K *) vrows;
    for (int64_t i = 0; i < nb; i++) {
        const block_q6_Kx16 & g = in[i];
        for (int r = 0; r < GGML_REPACK_ROWS; r++) {
            block_q6_K & dst = rows[r * nb + i];
            dst.d = g.d[r];
            for (int j = 0; j < QK_K / 16; j++) dst.scales[j] = g.scales[j][r];
            for (int k = 0; k < QK_K / 8; k++) memcpy(dst.ql + 4 * k, g.q[ggml_q6_Kx16_ql(k)][r], 4);
            for (int k = 0; k < QK_K / 16; k++) memcpy(dst.qh + 4 * k, g.q[ggml_q6_Kx16_qh(k)][r], 4);
        }
    }
}

namespace {

// Value v (0..255) of row r of a repacked super-block, unsigned (0..63).
inline int q6_value(const block_q6_Kx16 & g, int r, int v) {
    const int h = v / 128, t = (v % 128) / 32, l = v % 32;
    const int bl = 64 * h + 32 * (t & 1) + l, bh = 32 * h + l;
    const int lo = (g.q[ggml_q6_Kx16_ql(bl / 4)][r][bl % 4] >> (4 * (t >> 1))) & 15;
    const int hi = (g.q[ggml_q6_Kx16_qh(bh / 4)][r][bh % 4] >> (2 * t)) & 3;
    return lo | (hi << 4);
}

}  // namespace

void ggml_repack_gemm_q6_Kx16_ref(int64_t nb, const void * va, const void * vb, size_t ldb, int nc, float * s, size_t lds) {
    const block_q6_Kx16 * a = (const block_q6_Kx16 *) va;
    for (int c = 0; c < nc; c++) {
        const block_q8_K * y = (const block_q8_K *) ((const char *) vb + c * ldb);
        for (int r = 0; r < GGML_REPACK_ROWS; r++) {
            float acc = 0.0f;
            for (int64_t i = 0; i < nb; i++) {
                const block_q6_Kx16 & g = a[i];
                int32_t isum = 0, bsum = 0;
                for (int j = 0; j < QK_K / 16; j++) {
                    int32_t dot = 0;
                    for (int l = 0; l < 16; l++) dot += q6_value(g, r, 16 * j + l) * y[i].qs[16 * j + l];
                    isum += g.scales[j][r] * dot;
                    bsum += g.scales[j][r] * y[i].bsums[j];
                }
                isum -= 32 * bsum;
                const float dw = GGML_FP16_TO_FP32(g.d[r]);
                acc = fmaf(dw * y[i].d, (float) isum, acc);
            }
            s[c * lds + r] = acc;
        }
    }
}
