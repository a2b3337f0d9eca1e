// quant-repack-q5_K.cpp - Q5_K x16 (quant-repack.h): packing, the way back, the reference kernel.
// As Q4_K x16 (quant-repack-q4_K.cpp), the values having a fifth bit: for sub-block pair c
// (sub-blocks 2c, 2c + 1) and byte l of 32, the low-nibble value is
// (qs[32c + l] & 15) | bit 2c of qh[l] << 4 and the high-nibble value (qs[32c + l] >> 4) |
// bit 2c + 1 of qh[l] << 4 (0..31). In the x16 layout byte 32c + l is qs column (32c + l) / 4,
// and its high bits are qh column (l / 4) = (qs column) % 8.
// Per super-block, row r and column: msum = sum_j m_j * (bsums[2j] + bsums[2j + 1]) and
// isum = sum_j sc_j * dot32_j (integers, exact), then
//   acc = fma(-(dmin * d_a), msum, acc); acc = fma(d * d_a, isum, acc)
// in that order, as for Q4_K.
#include "quant-repack.h"

#include <math.h>
#include <string.h>


void ggml_repack_gemm_q5_Kx16_ref(int64_t nb, const void * va, const void * vb, size_t ldb, int nc, float * s, size_t lds) {
    const block_q5_Kx16 * a = (const block_q5_Kx16 *) va;
    for (int c = 0; c < nc; c++) {
        const block_q8_K * y = (const block_q8_K *) ((const char *) vb + c * ldb);
        for (int r = 0; r < GGML_REPACK_ROWS; r++) {
            float acc = 0.0f;
            for (int64_t i = 0; i < nb; i++) {
                const block_q5_Kx16 & g = a[i];
                int32_t msum = 0, isum = 0;
                for (int j = 0; j < 8; j++) {
                    const int m = ggml_repack_k4_min(g.sm, g.mlo, j, r);
                    msum += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
                    // Sub-block j: nibble j % 2 of bytes 32 (j / 2) .. 32 (j / 2) + 31, high bit j of qh[l].
                    int32_t dot = 0;
                    for (int l = 0; l < 32; l++) {
                        const int byte = 32 * (j / 2) + l;
                        const uint8_t q = g.qs[byte / 4][r][byte % 4];
                        const uint8_t h = g.qh[l / 4][r][l % 4];
                        const int v = ((j & 1) ? (q >> 4) : (q & 15)) | (((h >> j) & 1) << 4);
                        dot += v * y[i].qs[32 * j + l];
                    }
                    isum += (g.sm[j][r] & 63) * dot;
                }
                const float dw = GGML_FP16_TO_FP32(g.d[r]), dm = GGML_FP16_TO_FP32(g.dmin[r]);
                acc = fmaf(-(dm * y[i].d), (float) msum, acc);
                acc = fmaf(dw * y[i].d, (float) isum, acc);
            }
            s[c * lds + r] = acc;
        }
    }
}
