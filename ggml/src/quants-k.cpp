// quants-k.cpp - quantization of the K super-block types (Q2_K .. Q6_K) and IQ4_NL.
//
// Two levels: each sub-block gets the least-squares scale (and min) for its values
// (quants-search.cpp); then the sub-block scales are themselves quantized against one
// super-block scale, trying the neighbouring integer scales of each sub-block and keeping the
// one whose re-rounded values give the least error; last, the block's scales are moved so that its
// error is orthogonal to its values (quant_unshrink_factor). Weights: with an importance matrix as
// llama.cpp's quantizers, per type (quant_imatrix_weights) or the entries alone (block_weights);
// without, quant_plain_weights.
#include "quants-k.h"
#include "quants-search.h"

#include <math.h>
#include <string.h>

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

// With an importance matrix, llama.cpp's weighting per type (quant_imatrix_weights; sigma_mult < 0:
// the matrix's entries alone, as llama.cpp's Q6_K, and ours for Q4_K: on trained weights, over four
// noisy copies of the model (tools/quant-quality/draws.sh), Q4_K_M's KL divergence was 2.4% lower
// and Q4_K_S's 2.3% than with llama.cpp's entry x sqrt(2 mean(x^2) + x^2); Q5_K_M's level, 3
// copies); without one, quant_plain_weights.
static void block_weights(const float * qw, const float * x, int n, float sigma_mult, quant_plain_weighting plain,
                          float * w) {
    if (!qw) {
        quant_plain_weights(n, x, plain, w);
        return;
    }
    if (sigma_mult >= 0.0f) {
        quant_imatrix_weights(n, x, qw, sigma_mult, w);
        return;
    }
    for (int i = 0; i < n; i++) w[i] = qw[i] > 0.0f ? qw[i] : 1e-9f;
}

static float max_of(const float * v, int n) {
    float m = 0.0f;
    for (int i = 0; i < n; i++) m = fmaxf(m, v[i]);
    return m;
}

// ---- asymmetric sub-block quantization (Q2_K, Q4_K, Q5_K) -----------------------------------
// Quantizes nsub sub-blocks of `sub` values to levels 0..qmax with integer scales and mins in
// 0..smax against super scales d and dmin. Writes the levels and the integer scales/mins;
// returns d and dmin (already rounded to F16, as stored).
static void quantize_scale_min_superblock(const float * x, const float * w, int nsub, int sub, int qmax, int smax,
                                          uint8_t * L, uint8_t * sc_q, uint8_t * m_q, ggml_fp16_t * d_out,
                                          ggml_fp16_t * dmin_out) {
    float scales[16], mins[16];
    for (int j = 0; j < nsub; j++) {
        scales[j] = quant_fit_scale_min(sub, x + sub * j, w + sub * j, qmax, L + sub * j, &mins[j]);
    }
    const ggml_fp16_t dh = GGML_FP32_TO_FP16(max_of(scales, nsub) / smax);
    const ggml_fp16_t mh = GGML_FP32_TO_FP16(max_of(mins, nsub) / smax);
    const float d = GGML_FP16_TO_FP32(dh), dmin = GGML_FP16_TO_FP32(mh);
    *d_out = dh;
    *dmin_out = mh;

    uint8_t cand[64];
    for (int j = 0; j < nsub; j++) {
        const float * xs = x + sub * j;
        const float * ws = w + sub * j;
        const int s0 = d > 0.0f ? clampi(quant_round(scales[j] / d), 0, smax) : 0;
        const int m0 = dmin > 0.0f ? clampi(quant_round(mins[j] / dmin), 0, smax) : 0;
        double best = INFINITY;
        for (int si = s0 - 1; si <= s0 + 1; si++) {
            if (si < 0 || si > smax) continue;
            for (int mi = m0 - 1; mi <= m0 + 1; mi++) {
                if (mi < 0 || mi > smax) continue;
                const float ds = d * si, dm = dmin * mi;
                const double err = quant_round_error(sub, xs, ws, ds, dm, qmax, cand);
                if (err < best) {
                    best = err;
                    sc_q[j] = (uint8_t) si;
                    m_q[j] = (uint8_t) mi;
                    memcpy(L + sub * j, cand, sub);
                }
            }
        }
    }
}

// ---- symmetric sub-block quantization (Q3_K, Q6_K) -----------------------------------------
// Levels qmin..qmax, signed integer scales in smin..smax against one super scale d.
static void quantize_symmetric_superblock(const float * x, const float * w, int nsub, int sub, int qmin, int qmax,
                                          int smin, int smax, int8_t * L, int8_t * sc_q, ggml_fp16_t * d_out) {
    float scales[16];
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < nsub; j++) {
        scales[j] = quant_fit_symmetric(sub, x + sub * j, w + sub * j, qmin, qmax, L + sub * j);
        if (fabsf(scales[j]) > amax) {
            amax = fabsf(scales[j]);
            max = scales[j];
        }
    }
    // The extreme sub-scale maps to smin (the larger magnitude end of the integer range).
    const ggml_fp16_t dh = GGML_FP32_TO_FP16(amax > 0.0f ? max / (float) smin : 0.0f);
    const float d = GGML_FP16_TO_FP32(dh);
    *d_out = dh;

    int8_t cand[64];
    for (int j = 0; j < nsub; j++) {
        const float * xs = x + sub * j;
        const float * ws = w + sub * j;
        const int s0 = d != 0.0f ? clampi(quant_round(scales[j] / d), smin, smax) : 0;
        double best = INFINITY;
        for (int si = s0 - 1; si <= s0 + 1; si++) {
            if (si < smin || si > smax) continue;
            const double err = quant_round_error_sym(sub, xs, ws, d * si, qmin, qmax, cand);
            if (err < best) {
                best = err;
                sc_q[j] = (int8_t) si;
                memcpy(L + sub * j, cand, sub);
            }
        }
    }
}

// ---- per type ------------------------------------------------------------------------------
void quantize_row_q2_K(const float * x, block_q2_K * y, int64_t n, const float * qw) {
    float w[QK_K];
    uint8_t L[QK_K], sc[16], m[16];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, qw = qw ? qw + QK_K : nullptr) {
        block_weights(qw, x, QK_K, 1.0f, QUANT_PLAIN_ONE, w);
        quantize_scale_min_superblock(x, w, 16, 16, 3, 15, L, sc, m, &y[b].d, &y[b].dmin);
        for (int j = 0; j < 16; j++) y[b].scales[j] = (uint8_t) (sc[j] | (m[j] << 4));
        // Byte 32h + j holds values 128h + j + 32s in bits 2s (s = 0..3).
        for (int h = 0; h < 2; h++) {
            for (int j = 0; j < 32; j++) {
                const uint8_t * v = L + 128 * h + j;
                y[b].qs[32 * h + j] = (uint8_t) (v[0] | (v[32] << 2) | (v[64] << 4) | (v[96] << 6));
            }
        }
        quant_unshrink_block<block_q2_K, dequantize_row_q2_K>(y[b], x, qw, QK_K, &y[b].d, &y[b].dmin);
    }
}

void quantize_row_q3_K(const float * x, block_q3_K * y, int64_t n, const float * qw) {
    float w[QK_K];
    int8_t L[QK_K], sc[16];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, qw = qw ? qw + QK_K : nullptr) {
        block_weights(qw, x, QK_K, 2.0f, QUANT_PLAIN_ONE, w);
        quantize_symmetric_superblock(x, w, 16, 16, -4, 3, -32, 31, L, sc, &y[b].d);
        memset(y[b].scales, 0, sizeof(y[b].scales));
        for (int j = 0; j < 16; j++) {
            const int u = sc[j] + 32;  // stored 0..63
            if (j < 8) y[b].scales[j] |= (uint8_t) (u & 0xF);
            else y[b].scales[j - 8] |= (uint8_t) ((u & 0xF) << 4);
            y[b].scales[8 + (j & 3)] |= (uint8_t) ((u >> 4) << (2 * (j >> 2)));
        }
        memset(y[b].hmask, 0, sizeof(y[b].hmask));
        memset(y[b].qs, 0, sizeof(y[b].qs));
        for (int v = 0; v < QK_K; v++) {
            const int u = L[v] + 4;  // 0..7: low 2 bits in qs, the third in hmask
            const int h = v / 128, s = (v % 128) / 32, j = v % 32;
            y[b].qs[32 * h + j] |= (uint8_t) ((u & 3) << (2 * s));
            y[b].hmask[j] |= (uint8_t) ((u >> 2) << (v / 32));
        }
        quant_unshrink_block<block_q3_K, dequantize_row_q3_K>(y[b], x, qw, QK_K, &y[b].d);
    }
}

static void pack_k4_scales(const uint8_t * sc, const uint8_t * m, uint8_t * q) {
    for (int j = 0; j < 4; j++) {
        q[j] = (uint8_t) (sc[j] | ((sc[j + 4] >> 4) << 6));
        q[j + 4] = (uint8_t) (m[j] | ((m[j + 4] >> 4) << 6));
        q[j + 8] = (uint8_t) ((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
    }
}

void quantize_row_q4_K(const float * x, block_q4_K * y, int64_t n, const float * qw) {
    float w[QK_K];
    uint8_t L[QK_K], sc[8], m[8];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, qw = qw ? qw + QK_K : nullptr) {
        block_weights(qw, x, QK_K, -1.0f, QUANT_PLAIN_RMS_ABS, w);
        quantize_scale_min_superblock(x, w, 8, 32, 15, 63, L, sc, m, &y[b].d, &y[b].dmin);
        pack_k4_scales(sc, m, y[b].scales);
        for (int c = 0; c < 4; c++) {
            for (int l = 0; l < 32; l++) y[b].qs[32 * c + l] = (uint8_t) (L[64 * c + l] | (L[64 * c + 32 + l] << 4));
        }
        quant_unshrink_block<block_q4_K, dequantize_row_q4_K>(y[b], x, qw, QK_K, &y[b].d, &y[b].dmin);
    }
}

void quantize_row_q5_K(const float * x, block_q5_K * y, int64_t n, const float * qw) {
    float w[QK_K];
    uint8_t L[QK_K], sc[8], m[8];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, qw = qw ? qw + QK_K : nullptr) {
        block_weights(qw, x, QK_K, 2.0f, QUANT_PLAIN_RMS_ABS, w);
        quantize_scale_min_superblock(x, w, 8, 32, 31, 63, L, sc, m, &y[b].d, &y[b].dmin);
        pack_k4_scales(sc, m, y[b].scales);
        memset(y[b].qh, 0, sizeof(y[b].qh));
        for (int c = 0; c < 4; c++) {
            for (int l = 0; l < 32; l++) {
                const int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
                y[b].qs[32 * c + l] = (uint8_t) ((lo & 0xF) | ((hi & 0xF) << 4));
                y[b].qh[l] |= (uint8_t) (((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
            }
        }
        quant_unshrink_block<block_q5_K, dequantize_row_q5_K>(y[b], x, qw, QK_K, &y[b].d, &y[b].dmin);
    }
}

void quantize_row_q6_K(const float * x, block_q6_K * y, int64_t n, const float * qw) {
    float w[QK_K];
    int8_t L[QK_K], sc[16];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, qw = qw ? qw + QK_K : nullptr) {
        block_weights(qw, x, QK_K, -1.0f, QUANT_PLAIN_ONE, w);
        quantize_symmetric_superblock(x, w, 16, 16, -32, 31, -128, 127, L, sc, &y[b].d);
        memcpy(y[b].scales, sc, 16);
        memset(y[b].qh, 0, sizeof(y[b].qh));
        for (int h = 0; h < 2; h++) {
            for (int l = 0; l < 32; l++) {
                const int8_t * v = L + 128 * h + l;
                const int u0 = v[0] + 32, u1 = v[32] + 32, u2 = v[64] + 32, u3 = v[96] + 32;
                y[b].ql[64 * h + l]      = (uint8_t) ((u0 & 0xF) | ((u2 & 0xF) << 4));
                y[b].ql[64 * h + l + 32] = (uint8_t) ((u1 & 0xF) | ((u3 & 0xF) << 4));
                y[b].qh[32 * h + l] = (uint8_t) ((u0 >> 4) | ((u1 >> 4) << 2) | ((u2 >> 4) << 4) | ((u3 >> 4) << 6));
            }
        }
        quant_unshrink_block<block_q6_K, dequantize_row_q6_K>(y[b], x, qw, QK_K, &y[b].d);
    }
}

// Without the unshrink of the other types: this quantizer also writes IQ4_NL KV caches, which the
// CUDA backend's cache kernel writes alike (the same bytes on either device).
void quantize_row_iq4_nl(const float * x, block_iq4_nl * y, int64_t n, const float * qw) {
    float w[QK4_NL];
    uint8_t L[QK4_NL];
    for (int64_t b = 0; b < n / QK4_NL; b++, x += QK4_NL, qw = qw ? qw + QK4_NL : nullptr) {
        block_weights(qw, x, QK4_NL, 2.0f, QUANT_PLAIN_ONE, w);
        const float s = quant_fit_levels(QK4_NL, x, w, kvalues_iq4nl, 16, L);
        y[b].d = GGML_FP32_TO_FP16(s);
        // Re-round under the stored (F16) scale.
        const float d = GGML_FP16_TO_FP32(y[b].d);
        if (d != 0.0f) {
            for (int i = 0; i < QK4_NL; i++) {
                const float v = x[i] / d;
                int best = 0;
                for (int k = 1; k < 16; k++) {
                    if (fabsf(v - kvalues_iq4nl[k]) < fabsf(v - kvalues_iq4nl[best])) best = k;
                }
                L[i] = (uint8_t) best;
            }
        }
        for (int j = 0; j < QK4_NL / 2; j++) y[b].qs[j] = (uint8_t) (L[j] | (L[j + QK4_NL / 2] << 4));
    }
}
