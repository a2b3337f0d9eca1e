// quant-dot.cpp - scalar reference dot products of the quantized types (see quant-dot.h).
// Each weight block is first decoded to its integer levels, so the arithmetic of every type is
// plain integer sums; the bit layouts are decoded exactly as dequantization does.
#include "quant-dot.h"
#include "kernels.h"

#include <string.h>

#include <type_traits>

static inline float h2f(ggml_fp16_t h) { return GGML_FP16_TO_FP32(h); }

static inline uint32_t load_u32(const uint8_t * p) {
    return (uint32_t) p[0] | ((uint32_t) p[1] << 8) | ((uint32_t) p[2] << 16) | ((uint32_t) p[3] << 24);
}

static inline int isum32(const int8_t * q, const int8_t * r) {
    int s = 0;
    for (int j = 0; j < 32; j++) s += q[j] * r[j];
    return s;
}

// ---- 32-value blocks -----------------------------------------------------------------------
// Each type's levels q[32] of one block (the bit layouts as dequantization reads them).
static inline void levels(const block_q4_0 & a, int8_t * q) {
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t) ((a.qs[j] & 0xF) - 8);
        q[j + 16] = (int8_t) ((a.qs[j] >> 4) - 8);
    }
}

static inline void levels(const block_q4_1 & a, int8_t * q) {
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t) (a.qs[j] & 0xF);
        q[j + 16] = (int8_t) (a.qs[j] >> 4);
    }
}

static inline void levels(const block_q5_0 & a, int8_t * q) {
    const uint32_t qh = load_u32(a.qh);
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t) (((a.qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - 16);
        q[j + 16] = (int8_t) (((a.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16);
    }
}

static inline void levels(const block_q5_1 & a, int8_t * q) {
    const uint32_t qh = load_u32(a.qh);
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t) ((a.qs[j] & 0xF) | (((qh >> j) & 1) << 4));
        q[j + 16] = (int8_t) ((a.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
    }
}

static inline void levels(const block_q8_0 & a, int8_t * q) { memcpy(q, a.qs, 32); }

static inline void levels(const block_iq4_nl & a, int8_t * q) {
    for (int j = 0; j < 16; j++) {
        q[j] = kvalues_iq4nl[a.qs[j] & 0xF];
        q[j + 16] = kvalues_iq4nl[a.qs[j] >> 4];
    }
}

// sum over blocks of d db sum(q qb); the types with a min m (Q4_1, Q5_1, against Q8_1) add
// sum (d q + m) db qb = d db sum(q qb) + m * (db sum qb), the last factor stored as s.
template <typename BA, typename BB> static float dot_32(int64_t n, const void * va, const void * vb) {
    const BA * a = (const BA *) va;
    const BB * b = (const BB *) vb;
    float sum = 0.0f;
    int8_t q[32];
    for (int64_t i = 0; i < n / 32; i++) {
        levels(a[i], q);
        if constexpr (std::is_same<BB, block_q8_1>::value) {
            sum += h2f(a[i].d) * h2f(b[i].d) * (float) isum32(q, b[i].qs) + h2f(a[i].m) * h2f(b[i].s);
        } else {
            sum += h2f(a[i].d) * h2f(b[i].d) * (float) isum32(q, b[i].qs);
        }
    }
    return sum;
}

float ggml_dot_q4_0_q8_0_ref(int64_t n, const void * va, const void * vb) { return dot_32<block_q4_0, block_q8_0>(n, va, vb); }
float ggml_dot_q4_1_q8_1_ref(int64_t n, const void * va, const void * vb) { return dot_32<block_q4_1, block_q8_1>(n, va, vb); }
float ggml_dot_q5_0_q8_0_ref(int64_t n, const void * va, const void * vb) { return dot_32<block_q5_0, block_q8_0>(n, va, vb); }
float ggml_dot_q5_1_q8_1_ref(int64_t n, const void * va, const void * vb) { return dot_32<block_q5_1, block_q8_1>(n, va, vb); }
float ggml_dot_q8_0_q8_0_ref(int64_t n, const void * va, const void * vb) { return dot_32<block_q8_0, block_q8_0>(n, va, vb); }
float ggml_dot_iq4_nl_q8_0_ref(int64_t n, const void * va, const void * vb) { return dot_32<block_iq4_nl, block_q8_0>(n, va, vb); }

// ---- K super-blocks ------------------------------------------------------------------------
// Sum of q[16 j .. 16 j + 16) * r[...] for one 16-value sub-block.
static inline int isum16(const int8_t * q, const int8_t * r) {
    int s = 0;
    for (int l = 0; l < 16; l++) s += q[l] * r[l];
    return s;
}

// Each type's levels q[256] of one super-block, then its dot with Q8_K's from them.
static inline void levels(const block_q2_K & a, int8_t * q) {
    for (int v = 0; v < QK_K; v++) q[v] = (int8_t) ((a.qs[32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32))) & 3);
}

static float block_dot(const block_q2_K & a, const int8_t * q, const block_q8_K & b) {
    int isum = 0, msum = 0;
    for (int j = 0; j < 16; j++) {
        isum += (a.scales[j] & 0xF) * isum16(q + 16 * j, b.qs + 16 * j);
        msum += (a.scales[j] >> 4) * b.bsums[j];
    }
    return b.d * (h2f(a.d) * isum - h2f(a.dmin) * msum);
}

static inline void levels(const block_q3_K & a, int8_t * q) {
    for (int v = 0; v < QK_K; v++) {
        const int lo = (a.qs[32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32))) & 3;
        const int hbit = (a.hmask[v % 32] >> (v / 32)) & 1;
        q[v] = (int8_t) (lo - (hbit ? 0 : 4));
    }
}

static float block_dot(const block_q3_K & a, const int8_t * q, const block_q8_K & b) {
    int isum = 0;
    for (int j = 0; j < 16; j++) isum += q3_k_scale(a.scales, j) * isum16(q + 16 * j, b.qs + 16 * j);
    return h2f(a.d) * b.d * isum;
}

// Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins (the mins through Q8_K's block sums).
static float k4_superblock_dot(const uint8_t * scales, ggml_fp16_t d, ggml_fp16_t dmin, const int8_t * q, const block_q8_K & b) {
    int isum = 0, msum = 0;
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        get_scale_min_k4(j, scales, &sc, &m);
        isum += sc * isum32(q + 32 * j, b.qs + 32 * j);
        msum += m * (b.bsums[2 * j] + b.bsums[2 * j + 1]);
    }
    return b.d * (h2f(d) * isum - h2f(dmin) * msum);
}

static inline void levels(const block_q4_K & a, int8_t * q) {
    for (int c = 0; c < 4; c++) {
        for (int l = 0; l < 32; l++) {
            q[64 * c + l] = (int8_t) (a.qs[32 * c + l] & 0xF);
            q[64 * c + 32 + l] = (int8_t) (a.qs[32 * c + l] >> 4);
        }
    }
}

static float block_dot(const block_q4_K & a, const int8_t * q, const block_q8_K & b) { return k4_superblock_dot(a.scales, a.d, a.dmin, q, b); }

static inline void levels(const block_q5_K & a, int8_t * q) {
    for (int c = 0; c < 4; c++) {
        for (int l = 0; l < 32; l++) {
            q[64 * c + l] = (int8_t) ((a.qs[32 * c + l] & 0xF) | (((a.qh[l] >> (2 * c)) & 1) << 4));
            q[64 * c + 32 + l] = (int8_t) ((a.qs[32 * c + l] >> 4) | (((a.qh[l] >> (2 * c + 1)) & 1) << 4));
        }
    }
}

static float block_dot(const block_q5_K & a, const int8_t * q, const block_q8_K & b) { return k4_superblock_dot(a.scales, a.d, a.dmin, q, b); }

static inline void levels(const block_q6_K & a, int8_t * q) {
    for (int h = 0; h < 2; h++) {
        const uint8_t * ql = a.ql + 64 * h;
        const uint8_t * qh = a.qh + 32 * h;
        int8_t * y = q + 128 * h;
        for (int l = 0; l < 32; l++) {
            y[l]      = (int8_t) (((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
            y[l + 32] = (int8_t) (((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
            y[l + 64] = (int8_t) (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            y[l + 96] = (int8_t) (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
}

static float block_dot(const block_q6_K & a, const int8_t * q, const block_q8_K & b) {
    int isum = 0;
    for (int j = 0; j < 16; j++) isum += a.scales[j] * isum16(q + 16 * j, b.qs + 16 * j);
    return h2f(a.d) * b.d * isum;
}

template <typename BA> static float dot_K(int64_t n, const void * va, const void * vb) {
    int8_t q[QK_K];
    return ggml_quant_dot_blocks_K<BA>(n, va, vb, [&](const BA & a, const block_q8_K & b) {
        levels(a, q);
        return block_dot(a, q, b);
    });
}

float ggml_dot_q2_K_q8_K_ref(int64_t n, const void * va, const void * vb) { return dot_K<block_q2_K>(n, va, vb); }
float ggml_dot_q3_K_q8_K_ref(int64_t n, const void * va, const void * vb) { return dot_K<block_q3_K>(n, va, vb); }
float ggml_dot_q4_K_q8_K_ref(int64_t n, const void * va, const void * vb) { return dot_K<block_q4_K>(n, va, vb); }
float ggml_dot_q5_K_q8_K_ref(int64_t n, const void * va, const void * vb) { return dot_K<block_q5_K>(n, va, vb); }
float ggml_dot_q6_K_q8_K_ref(int64_t n, const void * va, const void * vb) { return dot_K<block_q6_K>(n, va, vb); }

// ---- tables --------------------------------------------------------------------------------
enum ggml_type ggml_quant_vec_dot_type(enum ggml_type type) {
    switch (type) {
        case GGML_TYPE_Q4_0: case GGML_TYPE_Q5_0: case GGML_TYPE_Q8_0: case GGML_TYPE_IQ4_NL: return GGML_TYPE_Q8_0;
        case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_1: return GGML_TYPE_Q8_1;
        case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K:
        case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ3_XXS: case GGML_TYPE_IQ3_S:
        case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ1_M: case GGML_TYPE_IQ4_XS: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0: return GGML_TYPE_Q8_K;
        default: return GGML_TYPE_COUNT;
    }
}

ggml_quant_dot_fn ggml_quant_dot_ref(enum ggml_type type) {
    static const ggml_quant_dots dots = { ggml_dot_q4_0_q8_0_ref, ggml_dot_q4_1_q8_1_ref, ggml_dot_q5_0_q8_0_ref, ggml_dot_q5_1_q8_1_ref,
                                          ggml_dot_q8_0_q8_0_ref, ggml_dot_iq4_nl_q8_0_ref, ggml_dot_q2_K_q8_K_ref, ggml_dot_q3_K_q8_K_ref,
                                          ggml_dot_q4_K_q8_K_ref, ggml_dot_q5_K_q8_K_ref, ggml_dot_q6_K_q8_K_ref,
                                          ggml_dot_iq2_xxs_q8_K_ref, ggml_dot_iq2_xs_q8_K_ref, ggml_dot_iq2_s_q8_K_ref,
                                          ggml_dot_iq3_xxs_q8_K_ref, ggml_dot_iq3_s_q8_K_ref, ggml_dot_iq1_s_q8_K_ref,
                                          ggml_dot_iq1_m_q8_K_ref, ggml_dot_iq4_xs_q8_K_ref, ggml_dot_tq1_0_q8_K_ref,
                                          ggml_dot_tq2_0_q8_K_ref };
    return ggml_quant_dot_of(dots, type);
}

ggml_quant_dot_fn ggml_quant_dot_best(enum ggml_type type) { return ggml_cpu()->quant_dot(type); }

ggml_quant_dot_rows_fn ggml_quant_dot_rows_best(enum ggml_type type) { return ggml_cpu()->quant_dot_rows(type); }

ggml_quant_dot_cols_fn ggml_quant_dot_cols_best(enum ggml_type type) { return ggml_cpu()->quant_dot_cols(type); }
