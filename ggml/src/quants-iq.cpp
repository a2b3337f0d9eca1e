// quants-iq.cpp - the IQ and ternary super-block types: reference dequantization (what every
// file of these types in the wild means, held to llama.cpp's decoder value for value), the
// ternary types' reference quantizers and IQ4_XS's scale search.
#include "quants-iq.h"
#include "quants-iq-grids.h"
#include "quants-search.h"

#include <math.h>
#include <string.h>

static inline float h2f(ggml_fp16_t h) { return GGML_FP16_TO_FP32(h); }

static inline uint32_t load_u32(const void * p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

// Byte j of a grid entry (the value of coordinate j).
static inline int grid_byte(uint64_t g, int j) { return (int) (uint8_t) (g >> (8 * j)); }
static inline float sign_of(uint8_t signs, int j) { return (signs >> j) & 1 ? -1.0f : 1.0f; }

// ---- IQ2 ------------------------------------------------------------------------------------
void dequantize_row_iq2_xxs(const block_iq2_xxs * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = h2f(x[b].d);
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const uint8_t * idx = (const uint8_t *) (x[b].qs + 4 * ib);
            const uint32_t aux = load_u32(x[b].qs + 4 * ib + 2);
            const float db = d * (0.5f + (float) (aux >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++, y += 8) {
                const uint64_t g = ggml_iq2xxs_grid[idx[l]];
                const uint8_t signs = ggml_iq2_signs((aux >> (7 * l)) & 127);
                for (int j = 0; j < 8; j++) y[j] = db * grid_byte(g, j) * sign_of(signs, j);
            }
        }
    }
}

void dequantize_row_iq2_xs(const block_iq2_xs * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = h2f(x[b].d);
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const float db[2] = { d * (0.5f + (x[b].scales[ib] & 0xF)) * 0.25f, d * (0.5f + (x[b].scales[ib] >> 4)) * 0.25f };
            for (int l = 0; l < 4; l++, y += 8) {
                const uint16_t q = x[b].qs[4 * ib + l];
                const uint64_t g = ggml_iq2xs_grid[q & 511];
                const uint8_t signs = ggml_iq2_signs(q >> 9);
                for (int j = 0; j < 8; j++) y[j] = db[l / 2] * grid_byte(g, j) * sign_of(signs, j);
            }
        }
    }
}

void dequantize_row_iq2_s(const block_iq2_s * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = h2f(x[b].d);
        const uint8_t * qs = x[b].qs;
        const uint8_t * signs = x[b].qs + QK_K / 8;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const float db[2] = { d * (0.5f + (x[b].scales[ib] & 0xF)) * 0.25f, d * (0.5f + (x[b].scales[ib] >> 4)) * 0.25f };
            for (int l = 0; l < 4; l++, y += 8) {
                const int idx = qs[4 * ib + l] | (((x[b].qh[ib] >> (2 * l)) & 3) << 8);
                const uint64_t g = ggml_iq2s_grid[idx];
                for (int j = 0; j < 8; j++) y[j] = db[l / 2] * grid_byte(g, j) * sign_of(signs[4 * ib + l], j);
            }
        }
    }
}

// ---- IQ3 ------------------------------------------------------------------------------------
void dequantize_row_iq3_xxs(const block_iq3_xxs * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = h2f(x[b].d);
        const uint8_t * qs = x[b].qs;
        const uint8_t * scales_and_signs = x[b].qs + QK_K / 4;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const uint32_t aux = load_u32(scales_and_signs + 4 * ib);
            const float db = d * (0.5f + (float) (aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++, y += 8) {
                const uint8_t signs = ggml_iq2_signs((aux >> (7 * l)) & 127);
                const uint32_t g1 = ggml_iq3xxs_grid[qs[8 * ib + 2 * l]], g2 = ggml_iq3xxs_grid[qs[8 * ib + 2 * l + 1]];
                for (int j = 0; j < 4; j++) {
                    y[j] = db * grid_byte(g1, j) * sign_of(signs, j);
                    y[j + 4] = db * grid_byte(g2, j) * sign_of(signs, j + 4);
                }
            }
        }
    }
}

void dequantize_row_iq3_s(const block_iq3_s * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = h2f(x[b].d);
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const float db = d * (1 + 2 * ((x[b].scales[ib / 2] >> (4 * (ib % 2))) & 0xF));
            const uint8_t qh = x[b].qh[ib];
            for (int l = 0; l < 4; l++, y += 8) {
                const int i1 = x[b].qs[8 * ib + 2 * l] | (((qh >> (2 * l)) & 1) << 8);
                const int i2 = x[b].qs[8 * ib + 2 * l + 1] | (((qh >> (2 * l + 1)) & 1) << 8);
                const uint32_t g1 = ggml_iq3s_grid[i1], g2 = ggml_iq3s_grid[i2];
                const uint8_t signs = x[b].signs[4 * ib + l];
                for (int j = 0; j < 4; j++) {
                    y[j] = db * grid_byte(g1, j) * sign_of(signs, j);
                    y[j + 4] = db * grid_byte(g2, j) * sign_of(signs, j + 4);
                }
            }
        }
    }
}

// ---- IQ1 ------------------------------------------------------------------------------------
static inline int grid_level(uint64_t g, int j) { return (int) (int8_t) (g >> (8 * j)); }

void dequantize_row_iq1_s(const block_iq1_s * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = h2f(x[b].d);
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const uint16_t qh = x[b].qh[ib];
            const float dl = d * (2 * ((qh >> 12) & 7) + 1);
            const float delta = qh & 0x8000 ? -IQ1S_DELTA : IQ1S_DELTA;
            for (int l = 0; l < 4; l++, y += 8) {
                const uint64_t g = ggml_iq1s_grid[x[b].qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)];
                for (int j = 0; j < 8; j++) y[j] = dl * (grid_level(g, j) + delta);
            }
        }
    }
}

float ggml_iq1_m_scale(const block_iq1_m * x) {
    uint16_t sc[4];
    memcpy(sc, x->scales, sizeof(sc));
    const uint16_t h = (uint16_t) ((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
    return h2f(h);
}

void dequantize_row_iq1_m(const block_iq1_m * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = ggml_iq1_m_scale(&x[b]);
        uint16_t sc[4];
        memcpy(sc, x[b].scales, sizeof(sc));
        for (int ib = 0; ib < QK_K / 32; ib++) {
            for (int l = 0; l < 4; l++, y += 8) {
                const int h = (x[b].qh[2 * ib + l / 2] >> (4 * (l % 2))) & 0xF;  // 3 index bits, the delta's sign
                const uint64_t g = ggml_iq1s_grid[x[b].qs[4 * ib + l] | ((h & 7) << 8)];
                const int ls = (sc[ib / 2] >> (6 * (ib % 2) + 3 * (l / 2))) & 7;
                const float dl = d * (2 * ls + 1);
                const float delta = h & 8 ? -IQ1M_DELTA : IQ1M_DELTA;
                for (int j = 0; j < 8; j++) y[j] = dl * (grid_level(g, j) + delta);
            }
        }
    }
}

// ---- IQ4_XS ---------------------------------------------------------------------------------
static inline int iq4_xs_scale(const block_iq4_xs & b, int ib) {
    return (((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b.scales_h >> (2 * ib)) & 3) << 4)) - 32;
}

void dequantize_row_iq4_xs(const block_iq4_xs * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = h2f(x[b].d);
        for (int ib = 0; ib < QK_K / 32; ib++, y += 32) {
            const float dl = d * iq4_xs_scale(x[b], ib);
            const uint8_t * qs = x[b].qs + 16 * ib;
            for (int j = 0; j < 16; j++) {
                y[j] = dl * kvalues_iq4nl[qs[j] & 0xF];
                y[j + 16] = dl * kvalues_iq4nl[qs[j] >> 4];
            }
        }
    }
}

// ---- ternary --------------------------------------------------------------------------------
// TQ1_0: a byte holds 5 base-3 digits t0..t4 as ceil(243 * (t0 t1 t2 t3 t4)_3 / 3^5 ... ) so that
// digit k is the top base-3 digit of the byte times 3^k: ((uint8)(q * 3^k) * 3) >> 8. The row's
// order: qs[0..31] digit 0, digit 1, ... (160 values), qs[32..47] likewise (80), then qh[0..3]
// digits 0..3 (16).
void ggml_tq1_0_levels(const block_tq1_0 * x, int8_t * t) {
    static const uint8_t pow3[5] = { 1, 3, 9, 27, 81 };
    int v = 0;
    for (int n = 0; n < 5; n++) {
        for (int m = 0; m < 32; m++) t[v++] = (int8_t) ((((uint8_t) (x->qs[m] * pow3[n])) * 3) >> 8);
    }
    for (int n = 0; n < 5; n++) {
        for (int m = 0; m < 16; m++) t[v++] = (int8_t) ((((uint8_t) (x->qs[32 + m] * pow3[n])) * 3) >> 8);
    }
    for (int n = 0; n < 4; n++) {
        for (int m = 0; m < 4; m++) t[v++] = (int8_t) ((((uint8_t) (x->qh[m] * pow3[n])) * 3) >> 8);
    }
}

void dequantize_row_tq1_0(const block_tq1_0 * x, float * y, int64_t n) {
    int8_t t[QK_K];
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        const float d = h2f(x[b].d);
        ggml_tq1_0_levels(&x[b], t);
        for (int i = 0; i < QK_K; i++) y[i] = (float) (t[i] - 1) * d;
    }
}

// TQ2_0: byte 32 c + m holds values 128 c + 32 l + m in bits 2 l.
void dequantize_row_tq2_0(const block_tq2_0 * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = h2f(x[b].d);
        for (int c = 0; c < 2; c++) {
            for (int l = 0; l < 4; l++) {
                for (int m = 0; m < 32; m++) *y++ = (float) (((x[b].qs[32 * c + m] >> (2 * l)) & 3) - 1) * d;
            }
        }
    }
}

// Ternary digit of v / d: -1, 0, 1 as 0, 1, 2 (rounded half away from zero, as the reference).
static inline int ternary(float v, float id) { return quant_round(v * id) + 1; }

static float absmax(const float * x, int n) {
    float m = 0.0f;
    for (int i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    return m;
}

// Five digits as a byte: (t0 t1 t2 t3 t4)_3 scaled by 256 / 243, rounded up so that the
// decoder's ((q * 3^k) * 3) >> 8 reads digit k back.
static inline uint8_t pack5(const int * t, int count) {
    int q = 0;
    for (int k = 0; k < count; k++) q = q * 3 + t[k];
    for (int k = count; k < 5; k++) q *= 3;
    return (uint8_t) ((q * 256 + 242) / 243);
}

void quantize_row_tq1_0_ref(const float * x, block_tq1_0 * y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        const float d = absmax(x, QK_K);
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = GGML_FP32_TO_FP16(d);
        int t[5];
        // qs[m] (m < 32) holds values m, 32 + m, ..., 128 + m; qs[32 + m] (m < 16) values 160 + m,
        // 176 + m, ... 224 + m; qh[m] values 240 + m, 244 + m, 248 + m, 252 + m (its 5th digit 0).
        for (int m = 0; m < 32; m++) {
            for (int k = 0; k < 5; k++) t[k] = ternary(x[m + 32 * k], id);
            y[b].qs[m] = pack5(t, 5);
        }
        for (int m = 0; m < 16; m++) {
            for (int k = 0; k < 5; k++) t[k] = ternary(x[160 + m + 16 * k], id);
            y[b].qs[32 + m] = pack5(t, 5);
        }
        for (int m = 0; m < 4; m++) {
            for (int k = 0; k < 4; k++) t[k] = ternary(x[240 + m + 4 * k], id);
            y[b].qh[m] = pack5(t, 4);
        }
    }
}

void quantize_row_tq2_0_ref(const float * x, block_tq2_0 * y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        const float d = absmax(x, QK_K);
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = GGML_FP32_TO_FP16(d);
        for (int c = 0; c < 2; c++) {
            for (int m = 0; m < 32; m++) {
                uint8_t q = 0;
                for (int l = 0; l < 4; l++) q |= (uint8_t) (ternary(x[128 * c + 32 * l + m], id) << (2 * l));
                y[b].qs[32 * c + m] = q;
            }
        }
    }
}

// IQ4_XS: per 32 values the least-squares scale on IQ4_NL's levels (quant_fit_levels), then the
// scales as 6-bit integers (ls - 32 in -32..31) of one F16 super-scale; each sub-block tries its
// neighbouring integer scales and keeps the one whose re-rounded levels err least.
static int nearest_iq4(float v) {
    int best = 0;
    for (int k = 1; k < 16; k++) {
        if (fabsf(v - kvalues_iq4nl[k]) < fabsf(v - kvalues_iq4nl[best])) best = k;
    }
    return best;
}

static double iq4_error(const float * x, const float * w, float dl, uint8_t * L) {
    double err = 0.0;
    const float id = dl != 0.0f ? 1.0f / dl : 0.0f;
    for (int i = 0; i < 32; i++) {
        L[i] = (uint8_t) (dl != 0.0f ? nearest_iq4(x[i] * id) : 8);  // (level 8 is 1: closest to 0)
        const float diff = x[i] - dl * kvalues_iq4nl[L[i]];
        err += (double) w[i] * diff * diff;
    }
    return err;
}

void quantize_row_iq4_xs(const float * x, block_iq4_xs * y, int64_t n, const float * qw) {
    float w[QK_K], scales[QK_K / 32];
    uint8_t L[QK_K], cand[32];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, qw = qw ? qw + QK_K : nullptr) {
        if (qw) quant_imatrix_weights(QK_K, x, qw, 2.0f, w);
        else quant_plain_weights(QK_K, x, QUANT_PLAIN_ONE, w);
        float amax = 0.0f, smax = 0.0f;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            scales[ib] = quant_fit_levels(32, x + 32 * ib, w + 32 * ib, kvalues_iq4nl, 16, L + 32 * ib);
            if (fabsf(scales[ib]) > amax) {
                amax = fabsf(scales[ib]);
                smax = scales[ib];
            }
        }
        // The largest scale maps to -32 (the most negative integer scale), so it keeps full range.
        const ggml_fp16_t dh = GGML_FP32_TO_FP16(-smax / 32.0f);
        const float d = h2f(dh);
        y[b].d = dh;
        y[b].scales_h = 0;
        memset(y[b].scales_l, 0, sizeof(y[b].scales_l));
        for (int ib = 0; ib < QK_K / 32; ib++) {
            int ls0 = d != 0.0f ? quant_round(scales[ib] / d) : 0;
            ls0 = ls0 < -32 ? -32 : ls0 > 31 ? 31 : ls0;
            double best = INFINITY;
            int best_ls = ls0;
            for (int ls = ls0 - 1; ls <= ls0 + 1; ls++) {
                if (ls < -32 || ls > 31) continue;
                const double err = iq4_error(x + 32 * ib, w + 32 * ib, d * ls, cand);
                if (err < best) {
                    best = err;
                    best_ls = ls;
                    memcpy(L + 32 * ib, cand, 32);
                }
            }
            const int u = best_ls + 32;
            y[b].scales_l[ib / 2] |= (uint8_t) ((u & 0xF) << (4 * (ib % 2)));
            y[b].scales_h |= (uint16_t) ((u >> 4) << (2 * ib));
            for (int j = 0; j < 16; j++) y[b].qs[16 * ib + j] = (uint8_t) (L[32 * ib + j] | (L[32 * ib + j + 16] << 4));
        }
        quant_unshrink_block<block_iq4_xs, dequantize_row_iq4_xs>(y[b], x, qw, QK_K, &y[b].d);
    }
}
