// quant-dot-iq.cpp - scalar reference dot products of the IQ and ternary types with Q8_K (see
// quant-dot.h). Each super-block is decoded to one common form: signed integer levels per value
// (grid value times sign), an integer multiplier per 16 values (the sub-block scale's odd
// multiple, 2 ls + 1, or IQ4_XS's ls - 32), the IQ1 types' delta signs per 8 values, and the
// float factor the integer sum is scaled by. The sums are then plain integers, as in the
// dequantization these decoders mirror (quants-iq.cpp).
#include "quant-dot.h"
#include "../quants-iq.h"
#include "../quants-iq-grids.h"

#include <string.h>

namespace {

struct decoded {
    int8_t q[QK_K];        // levels
    int mult[QK_K / 16];   // integer scale per 16 values
    int delta[QK_K / 8];   // IQ1: the delta's sign per 8 values (0: no delta term)
    float factor;          // the block's float scale (super-scale times the type's constant)
};

inline float h2f(ggml_fp16_t h) { return GGML_FP16_TO_FP32(h); }

inline uint32_t load_u32(const void * p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

// 8 levels of a grid entry with signs (bit j of `signs` negates value j).
inline void put8(int8_t * q, uint64_t g, uint8_t signs) {
    for (int j = 0; j < 8; j++) {
        const int v = (uint8_t) (g >> (8 * j));
        q[j] = (int8_t) ((signs >> j) & 1 ? -v : v);
    }
}
inline void put4(int8_t * q, uint32_t g, uint8_t signs) {
    for (int j = 0; j < 4; j++) {
        const int v = (uint8_t) (g >> (8 * j));
        q[j] = (int8_t) ((signs >> j) & 1 ? -v : v);
    }
}

void decode(const block_iq2_xxs & a, decoded & o) {
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t * idx = (const uint8_t *) (a.qs + 4 * ib);
        const uint32_t aux = load_u32(a.qs + 4 * ib + 2);
        for (int l = 0; l < 4; l++) put8(o.q + 32 * ib + 8 * l, ggml_iq2xxs_grid[idx[l]], ggml_iq2_signs((aux >> (7 * l)) & 127));
        o.mult[2 * ib] = o.mult[2 * ib + 1] = 2 * (int) (aux >> 28) + 1;
    }
    o.factor = h2f(a.d) * 0.125f;
}

void decode(const block_iq2_xs & a, decoded & o) {
    for (int ib = 0; ib < 8; ib++) {
        for (int l = 0; l < 4; l++) {
            const uint16_t q = a.qs[4 * ib + l];
            put8(o.q + 32 * ib + 8 * l, ggml_iq2xs_grid[q & 511], ggml_iq2_signs(q >> 9));
        }
        o.mult[2 * ib] = 2 * (a.scales[ib] & 0xF) + 1;
        o.mult[2 * ib + 1] = 2 * (a.scales[ib] >> 4) + 1;
    }
    o.factor = h2f(a.d) * 0.125f;
}

void decode(const block_iq2_s & a, decoded & o) {
    const uint8_t * signs = a.qs + QK_K / 8;
    for (int ib = 0; ib < 8; ib++) {
        for (int l = 0; l < 4; l++) {
            const int idx = a.qs[4 * ib + l] | (((a.qh[ib] >> (2 * l)) & 3) << 8);
            put8(o.q + 32 * ib + 8 * l, ggml_iq2s_grid[idx], signs[4 * ib + l]);
        }
        o.mult[2 * ib] = 2 * (a.scales[ib] & 0xF) + 1;
        o.mult[2 * ib + 1] = 2 * (a.scales[ib] >> 4) + 1;
    }
    o.factor = h2f(a.d) * 0.125f;
}

void decode(const block_iq3_xxs & a, decoded & o) {
    for (int ib = 0; ib < 8; ib++) {
        const uint32_t aux = load_u32(a.qs + QK_K / 4 + 4 * ib);
        for (int l = 0; l < 4; l++) {
            const uint8_t signs = ggml_iq2_signs((aux >> (7 * l)) & 127);
            put4(o.q + 32 * ib + 8 * l, ggml_iq3xxs_grid[a.qs[8 * ib + 2 * l]], signs);
            put4(o.q + 32 * ib + 8 * l + 4, ggml_iq3xxs_grid[a.qs[8 * ib + 2 * l + 1]], (uint8_t) (signs >> 4));
        }
        o.mult[2 * ib] = o.mult[2 * ib + 1] = 2 * (int) (aux >> 28) + 1;
    }
    o.factor = h2f(a.d) * 0.25f;
}

void decode(const block_iq3_s & a, decoded & o) {
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t qh = a.qh[ib];
        for (int l = 0; l < 4; l++) {
            const int i1 = a.qs[8 * ib + 2 * l] | (((qh >> (2 * l)) & 1) << 8);
            const int i2 = a.qs[8 * ib + 2 * l + 1] | (((qh >> (2 * l + 1)) & 1) << 8);
            const uint8_t signs = a.signs[4 * ib + l];
            put4(o.q + 32 * ib + 8 * l, ggml_iq3s_grid[i1], signs);
            put4(o.q + 32 * ib + 8 * l + 4, ggml_iq3s_grid[i2], (uint8_t) (signs >> 4));
        }
        o.mult[2 * ib] = o.mult[2 * ib + 1] = 1 + 2 * ((a.scales[ib / 2] >> (4 * (ib % 2))) & 0xF);
    }
    o.factor = h2f(a.d);
}

void decode(const block_iq1_s & a, decoded & o) {
    for (int ib = 0; ib < 8; ib++) {
        const uint16_t qh = a.qh[ib];
        for (int l = 0; l < 4; l++) {
            const uint64_t g = ggml_iq1s_grid[a.qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)];
            for (int j = 0; j < 8; j++) o.q[32 * ib + 8 * l + j] = (int8_t) (g >> (8 * j));
            o.delta[4 * ib + l] = qh & 0x8000 ? -1 : 1;
        }
        o.mult[2 * ib] = o.mult[2 * ib + 1] = 2 * ((qh >> 12) & 7) + 1;
    }
    o.factor = h2f(a.d);
}

void decode(const block_iq1_m & a, decoded & o) {
    uint16_t sc[4];
    memcpy(sc, a.scales, sizeof(sc));
    for (int ib = 0; ib < 8; ib++) {
        for (int l = 0; l < 4; l++) {
            const int h = (a.qh[2 * ib + l / 2] >> (4 * (l % 2))) & 0xF;
            const uint64_t g = ggml_iq1s_grid[a.qs[4 * ib + l] | ((h & 7) << 8)];
            for (int j = 0; j < 8; j++) o.q[32 * ib + 8 * l + j] = (int8_t) (g >> (8 * j));
            o.delta[4 * ib + l] = h & 8 ? -1 : 1;
        }
        for (int k = 0; k < 2; k++) o.mult[2 * ib + k] = 2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3 * k)) & 7) + 1;
    }
    o.factor = ggml_iq1_m_scale(&a);
}

void decode(const block_iq4_xs & a, decoded & o) {
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t * qs = a.qs + 16 * ib;
        for (int j = 0; j < 16; j++) {
            o.q[32 * ib + j] = kvalues_iq4nl[qs[j] & 0xF];
            o.q[32 * ib + j + 16] = kvalues_iq4nl[qs[j] >> 4];
        }
        const int ls = ((a.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((a.scales_h >> (2 * ib)) & 3) << 4);
        o.mult[2 * ib] = o.mult[2 * ib + 1] = ls - 32;
    }
    o.factor = h2f(a.d);
}

void decode(const block_tq1_0 & a, decoded & o) {
    ggml_tq1_0_levels(&a, o.q);
    for (int i = 0; i < QK_K; i++) o.q[i] -= 1;
    for (int j = 0; j < 16; j++) o.mult[j] = 1;
    o.factor = h2f(a.d);
}

void decode(const block_tq2_0 & a, decoded & o) {
    for (int c = 0; c < 2; c++) {
        for (int l = 0; l < 4; l++) {
            for (int m = 0; m < 32; m++) o.q[128 * c + 32 * l + m] = (int8_t) (((a.qs[32 * c + m] >> (2 * l)) & 3) - 1);
        }
    }
    for (int j = 0; j < 16; j++) o.mult[j] = 1;
    o.factor = h2f(a.d);
}

// sum_j mult_j * (levels . q8 over 16 values j) + delta / 8 * sum_g mult * delta_g * (sum of q8 over 8 values g)
float block_dot(const decoded & o, const block_q8_K & b, bool has_delta) {
    int sumi = 0, sumd = 0;
    for (int j = 0; j < QK_K / 16; j++) {
        int s = 0;
        for (int l = 0; l < 16; l++) s += o.q[16 * j + l] * b.qs[16 * j + l];
        sumi += o.mult[j] * s;
    }
    if (has_delta) {
        for (int g = 0; g < QK_K / 8; g++) {
            int s = 0;
            for (int l = 0; l < 8; l++) s += b.qs[8 * g + l];
            sumd += o.mult[g / 2] * o.delta[g] * s;
        }
    }
    return o.factor * b.d * ((float) sumi + 0.125f * (float) sumd);  // (IQ1S_DELTA = IQ1M_DELTA = 1 / 8)
}

template <typename BA, bool DELTA = false> float dot_iq(int64_t n, const void * va, const void * vb) {
    decoded o;
    return ggml_quant_dot_blocks_K<BA>(n, va, vb, [&](const BA & a, const block_q8_K & b) {
        decode(a, o);
        return block_dot(o, b, DELTA);
    });
}

}  // namespace

float ggml_dot_iq2_xxs_q8_K_ref(int64_t n, const void * a, const void * b) { return dot_iq<block_iq2_xxs>(n, a, b); }
float ggml_dot_iq2_xs_q8_K_ref(int64_t n, const void * a, const void * b) { return dot_iq<block_iq2_xs>(n, a, b); }
float ggml_dot_iq2_s_q8_K_ref(int64_t n, const void * a, const void * b) { return dot_iq<block_iq2_s>(n, a, b); }
float ggml_dot_iq3_xxs_q8_K_ref(int64_t n, const void * a, const void * b) { return dot_iq<block_iq3_xxs>(n, a, b); }
float ggml_dot_iq3_s_q8_K_ref(int64_t n, const void * a, const void * b) { return dot_iq<block_iq3_s>(n, a, b); }
float ggml_dot_iq1_s_q8_K_ref(int64_t n, const void * a, const void * b) { return dot_iq<block_iq1_s, true>(n, a, b); }
float ggml_dot_iq1_m_q8_K_ref(int64_t n, const void * a, const void * b) { return dot_iq<block_iq1_m, true>(n, a, b); }
float ggml_dot_iq4_xs_q8_K_ref(int64_t n, const void * a, const void * b) { return dot_iq<block_iq4_xs>(n, a, b); }
float ggml_dot_tq1_0_q8_K_ref(int64_t n, const void * a, const void * b) { return dot_iq<block_tq1_0>(n, a, b); }
float ggml_dot_tq2_0_q8_K_ref(int64_t n, const void * a, const void * b) { return dot_iq<block_tq2_0>(n, a, b); }
