// quant-repack-q4_K.cpp - Q4_K x16 (quant-repack.h): packing, the way back, the reference kernel.
// Per super-block, row r and column: msum = sum_j m_j * (bsums[2j] + bsums[2j + 1]) and
// isum = sum_j sc_j * dot32_j (integers, exact), then
//   acc = fma(-(dmin * d_a), msum, acc); acc = fma(d * d_a, isum, acc)
// in that order: the mins first, so that kernels need not keep them in registers.
#include "quant-repack.h"

#include <math.h>
#include <string.h>

void ggml_repack_k4_scales_in(const uint8_t * scales, int r, uint8_t (*sm)[GGML_REPACK_ROWS], uint8_t (*mlo)[GGML_REPACK_ROWS]) {
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        get_scale_min_k4(j, scales, &sc, &m);
        const int shift = 4 * (j & 1);
        sm[j][r] = (uint8_t) (sc | ((m >> 4) << 6));
        mlo[j / 2][r] = (uint8_t) ((mlo[j / 2][r] & ~(15 << shift)) | ((m & 15) << shift));
    }
}

// The inverse of get_scale_min_k4: the 96 bits of the 12 bytes hold each scale and min once.
void ggml_repack_k4_scales_out(const uint8_t (*sm)[GGML_REPACK_ROWS], const uint8_t (*mlo)[GGML_REPACK_ROWS], int r, uint8_t * q) {
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; j++) {
        sc[j] = sm[j][r] & 63;
        m[j] = (uint8_t) ggml_repack_k4_min(sm, mlo, j, r);
    }
    for (int j = 0; j < 4; j++) {
        q[j] = (uint8_t) ((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        q[j + 4] = (uint8_t) ((m[j] & 63) | ((m[j + 4] >> 4) << 6));
        q[j + 8] = (uint8_t) ((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
    }
}

void ggml_repack_act_q8_K(const float * x, void * y, int64_t n) { quantize_row_q8_K_ref(x, (block_q8_K *) y, n); }


void ggml_repack_gemm_q4_Kx16_ref(int64_t nb, const void * va, const void * vb, size_t ldb, int nc, float * s, size_t lds) {
    const block_q4_Kx16 * a = (const block_q4_Kx16 *) va;
    for (int c = 0; c < nc; c++) {
        const block_q8_K * y = (const block_q8_K *) ((const char *) vb + c * ldb);
        for (int r = 0; r < GGML_REPACK_ROWS; r++) {
            float acc = 0.0f;
            for (int64_t i = 0; i < nb; i++) {
                const block_q4_Kx16 & g = a[i];
                int32_t msum = 0, isum = 0;
                for (int j = 0; j < 8; j++) {
                    const int m = ggml_repack_k4_min(g.sm, g.mlo, j, r);
                    msum += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
                    // Sub-block j: nibble j % 2 of bytes 32 (j / 2) .. 32 (j / 2) + 31.
                    int32_t dot = 0;
                    for (int l = 0; l < 32; l++) {
                        const int byte = 32 * (j / 2) + l;
                        const uint8_t q = g.qs[byte / 4][r][byte % 4];
                        dot += ((j & 1) ? (q >> 4) : (q & 15)) * y[i].qs[32 * j + l];
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
