// quants-ref.cpp - scalar reference dequantization of every quantized type, and the reference
// (round-to-nearest) quantization of the one-scale-per-block types and of the activation types.
#include "quants.h"

#include <math.h>

const int8_t kvalues_iq4nl[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };

static inline float h2f(ggml_fp16_t h) { return GGML_FP16_TO_FP32(h); }

// min / max as comparisons: fminf / fmaxf are libm calls unless -ffast-math, and slow here.
// Same results as fminf / fmaxf for non-NaN inputs.
static inline float min_f(float a, float b) { return b < a ? b : a; }
static inline float max_f(float a, float b) { return b > a ? b : a; }

static inline uint32_t load_u32(const uint8_t * p) {
    return (uint32_t) p[0] | ((uint32_t) p[1] << 8) | ((uint32_t) p[2] << 16) | ((uint32_t) p[3] << 24);
}
static inline void store_u32(uint8_t * p, uint32_t v) {
    p[0] = (uint8_t) v; p[1] = (uint8_t) (v >> 8); p[2] = (uint8_t) (v >> 16); p[3] = (uint8_t) (v >> 24);
}

// ---- dequantize: 32-value blocks -----------------------------------------------------------
void dequantize_row_q4_0(const block_q4_0 * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / QK4_0; b++, y += QK4_0) {
        const float d = h2f(x[b].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            y[j]             = d * ((x[b].qs[j] & 0xF) - 8);
            y[j + QK4_0 / 2] = d * ((x[b].qs[j] >> 4) - 8);
        }
    }
}

void dequantize_row_q4_1(const block_q4_1 * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / QK4_1; b++, y += QK4_1) {
        const float d = h2f(x[b].d), m = h2f(x[b].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            y[j]             = d * (x[b].qs[j] & 0xF) + m;
            y[j + QK4_1 / 2] = d * (x[b].qs[j] >> 4) + m;
        }
    }
}

void dequantize_row_q5_0(const block_q5_0 * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / QK5_0; b++, y += QK5_0) {
        const float d = h2f(x[b].d);
        const uint32_t qh = load_u32(x[b].qh);
        for (int j = 0; j < QK5_0 / 2; j++) {
            const int lo = (x[b].qs[j] & 0xF) | (((qh >> j) & 1) << 4);
            const int hi = (x[b].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
            y[j]             = d * (lo - 16);
            y[j + QK5_0 / 2] = d * (hi - 16);
        }
    }
}

void dequantize_row_q5_1(const block_q5_1 * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / QK5_1; b++, y += QK5_1) {
        const float d = h2f(x[b].d), m = h2f(x[b].m);
        const uint32_t qh = load_u32(x[b].qh);
        for (int j = 0; j < QK5_1 / 2; j++) {
            const int lo = (x[b].qs[j] & 0xF) | (((qh >> j) & 1) << 4);
            const int hi = (x[b].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
            y[j]             = d * lo + m;
            y[j + QK5_1 / 2] = d * hi + m;
        }
    }
}

void dequantize_row_q8_0(const block_q8_0 * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / QK8_0; b++, y += QK8_0) {
        const float d = h2f(x[b].d);
        for (int j = 0; j < QK8_0; j++) y[j] = d * x[b].qs[j];
    }
}

void dequantize_row_q8_1(const block_q8_1 * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / QK8_1; b++, y += QK8_1) {
        const float d = h2f(x[b].d);
        for (int j = 0; j < QK8_1; j++) y[j] = d * x[b].qs[j];
    }
}

void dequantize_row_iq4_nl(const block_iq4_nl * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / QK4_NL; b++, y += QK4_NL) {
        const float d = h2f(x[b].d);
        for (int j = 0; j < QK4_NL / 2; j++) {
            y[j]              = d * kvalues_iq4nl[x[b].qs[j] & 0xF];
            y[j + QK4_NL / 2] = d * kvalues_iq4nl[x[b].qs[j] >> 4];
        }
    }
}

// ---- dequantize: K super-blocks ------------------------------------------------------------
// Q2_K: each 128-value half uses 32 bytes of qs; value 32*s + l of the half is bits 2s..2s+1 of
// byte l (s = 0..3), and sub-block (2s, 2s+1) covers bytes l < 16 and l >= 16.
void dequantize_row_q2_K(const block_q2_K * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = h2f(x[b].d), dmin = h2f(x[b].dmin);
        const uint8_t * q = x[b].qs;
        int is = 0;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int part = 0; part < 2; part++) {
                    const uint8_t sc = x[b].scales[is++];
                    const float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
                    for (int l = 0; l < 16; l++) *y++ = dl * ((q[16 * part + l] >> shift) & 3) - ml;
                }
            }
        }
    }
}

// Q3_K: as Q2_K for the low 2 bits; the third bit is hmask[l] bit (4 * half + s) and, when
// clear, subtracts 4.
void dequantize_row_q3_K(const block_q3_K * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = h2f(x[b].d);
        const uint8_t * q = x[b].qs;
        int is = 0;
        uint8_t m = 1;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
                for (int part = 0; part < 2; part++) {
                    const float dl = d * q3_k_scale(x[b].scales, is++);
                    for (int l = 16 * part; l < 16 * part + 16; l++) {
                        const int v = ((q[l] >> shift) & 3) - ((x[b].hmask[l] & m) ? 0 : 4);
                        *y++ = dl * v;
                    }
                }
            }
        }
    }
}

// Q4_K: 4 chunks of 64 values use 32 bytes of qs each: low nibbles first (sub-block 2c), then
// high nibbles (sub-block 2c + 1).
void dequantize_row_q4_K(const block_q4_K * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = h2f(x[b].d), dmin = h2f(x[b].dmin);
        const uint8_t * q = x[b].qs;
        for (int c = 0; c < 4; c++, q += 32) {
            uint8_t sc, m;
            get_scale_min_k4(2 * c, x[b].scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            get_scale_min_k4(2 * c + 1, x[b].scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

// Q5_K: as Q4_K; the fifth bit of value l of sub-block j is bit j of qh[l].
void dequantize_row_q5_K(const block_q5_K * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = h2f(x[b].d), dmin = h2f(x[b].dmin);
        const uint8_t * ql = x[b].qs;
        for (int c = 0; c < 4; c++, ql += 32) {
            uint8_t sc, m;
            get_scale_min_k4(2 * c, x[b].scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            get_scale_min_k4(2 * c + 1, x[b].scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            const uint8_t u1 = (uint8_t) (1u << (2 * c)), u2 = (uint8_t) (2u << (2 * c));
            for (int l = 0; l < 32; l++) *y++ = d1 * ((ql[l] & 0xF) + ((x[b].qh[l] & u1) ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * ((ql[l] >> 4) + ((x[b].qh[l] & u2) ? 16 : 0)) - m2;
        }
    }
}

// Q6_K: each 128-value half uses 64 bytes of ql and 32 of qh; value 32*s + l takes the low or
// high nibble of ql[l] / ql[l + 32] and bits 2s..2s+1 of qh[l].
void dequantize_row_q6_K(const block_q6_K * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = h2f(x[b].d);
        const uint8_t * ql = x[b].ql;
        const uint8_t * qh = x[b].qh;
        const int8_t * sc = x[b].scales;
        for (int half = 0; half < 2; half++, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l]      = d * sc[is + 0] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}

void dequantize_row_q8_K(const block_q8_K * x, float * y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        for (int j = 0; j < QK_K; j++) y[j] = x[b].d * x[b].qs[j];
    }
}

// ---- reference quantize --------------------------------------------------------------------
// The value of largest magnitude, with its sign: mapping it to the most negative level uses
// the asymmetric level range (-8..7, -16..15) fully.
static float signed_absmax(const float * x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

void quantize_row_q4_0_ref(const float * x, block_q4_0 * y, int64_t n) {
    for (int64_t b = 0; b < n / QK4_0; b++, x += QK4_0) {
        const float max = signed_absmax(x, QK4_0);
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = GGML_FP32_TO_FP16(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const int q0 = (int) min_f(15.0f, x[j] * id + 8.5f);
            const int q1 = (int) min_f(15.0f, x[j + QK4_0 / 2] * id + 8.5f);
            y[b].qs[j] = (uint8_t) (q0 | (q1 << 4));
        }
    }
}

void quantize_row_q4_1_ref(const float * x, block_q4_1 * y, int64_t n) {
    for (int64_t b = 0; b < n / QK4_1; b++, x += QK4_1) {
        float min = x[0], max = x[0];
        for (int j = 1; j < QK4_1; j++) {
            min = min_f(min, x[j]);
            max = max_f(max, x[j]);
        }
        const float d = (max - min) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = GGML_FP32_TO_FP16(d);
        y[b].m = GGML_FP32_TO_FP16(min);
        for (int j = 0; j < QK4_1 / 2; j++) {
            const int q0 = (int) min_f(15.0f, (x[j] - min) * id + 0.5f);
            const int q1 = (int) min_f(15.0f, (x[j + QK4_1 / 2] - min) * id + 0.5f);
            y[b].qs[j] = (uint8_t) (q0 | (q1 << 4));
        }
    }
}

void quantize_row_q5_0_ref(const float * x, block_q5_0 * y, int64_t n) {
    for (int64_t b = 0; b < n / QK5_0; b++, x += QK5_0) {
        const float max = signed_absmax(x, QK5_0);
        const float d = max / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = GGML_FP32_TO_FP16(d);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            const int q0 = (int) min_f(31.0f, x[j] * id + 16.5f);
            const int q1 = (int) min_f(31.0f, x[j + QK5_0 / 2] * id + 16.5f);
            y[b].qs[j] = (uint8_t) ((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= (uint32_t) ((q0 >> 4) & 1) << j;
            qh |= (uint32_t) ((q1 >> 4) & 1) << (j + QK5_0 / 2);
        }
        store_u32(y[b].qh, qh);
    }
}

void quantize_row_q5_1_ref(const float * x, block_q5_1 * y, int64_t n) {
    for (int64_t b = 0; b < n / QK5_1; b++, x += QK5_1) {
        float min = x[0], max = x[0];
        for (int j = 1; j < QK5_1; j++) {
            min = min_f(min, x[j]);
            max = max_f(max, x[j]);
        }
        const float d = (max - min) / 31.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = GGML_FP32_TO_FP16(d);
        y[b].m = GGML_FP32_TO_FP16(min);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            const int q0 = (int) min_f(31.0f, (x[j] - min) * id + 0.5f);
            const int q1 = (int) min_f(31.0f, (x[j + QK5_1 / 2] - min) * id + 0.5f);
            y[b].qs[j] = (uint8_t) ((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= (uint32_t) ((q0 >> 4) & 1) << j;
            qh |= (uint32_t) ((q1 >> 4) & 1) << (j + QK5_1 / 2);
        }
        store_u32(y[b].qh, qh);
    }
}

void quantize_row_q8_0_ref(const float * x, block_q8_0 * y, int64_t n) {
    for (int64_t b = 0; b < n / QK8_0; b++, x += QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; j++) amax = max_f(amax, fabsf(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = GGML_FP32_TO_FP16(d);
        for (int j = 0; j < QK8_0; j++) y[b].qs[j] = (int8_t) roundf(ggml_q8_clamp(x[j] * id));
    }
}

void quantize_row_q8_1_ref(const float * x, block_q8_1 * y, int64_t n) {
    for (int64_t b = 0; b < n / QK8_1; b++, x += QK8_1) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_1; j++) amax = max_f(amax, fabsf(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int j = 0; j < QK8_1; j++) {
            y[b].qs[j] = (int8_t) roundf(ggml_q8_clamp(x[j] * id));
            sum += y[b].qs[j];
        }
        y[b].d = GGML_FP32_TO_FP16(d);
        y[b].s = GGML_FP32_TO_FP16(d * (float) sum);
    }
}

void quantize_row_q8_K_ref(const float * x, block_q8_K * y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        const float max = signed_absmax(x, QK_K);
        if (max == 0.0f) {
            y[b].d = 0.0f;
            memset(y[b].qs, 0, sizeof(y[b].qs));
            memset(y[b].bsums, 0, sizeof(y[b].bsums));
            continue;
        }
        // The extreme value maps to -127 (q = -127 * x / max); the clamp only guards rounding.
        const float iscale = -127.0f / max;
        for (int j = 0; j < QK_K; j++) {
            const int v = (int) lrintf(iscale * x[j]);
            y[b].qs[j] = (int8_t) (v > 127 ? 127 : v < -127 ? -127 : v);
        }
        for (int j = 0; j < QK_K / 16; j++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += y[b].qs[16 * j + l];
            y[b].bsums[j] = (int16_t) sum;
        }
        y[b].d = 1.0f / iscale;
    }
}
