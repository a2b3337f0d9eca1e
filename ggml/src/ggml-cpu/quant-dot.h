// quant-dot.h - dot products of a quantized weight row with an activation row quantized on the
// fly (Q8_0 for Q4_0 / Q5_0 / Q8_0 / IQ4_NL, Q8_1 for Q4_1 / Q5_1, Q8_K for the K, IQ2 / IQ3 /
// IQ1 / IQ4_XS and ternary types).
// The scalar versions here are the reference every SIMD kernel is held to: integer sums per
// (sub-)block, scaled in float, accumulated block by block.
#pragma once

#include "../quants.h"

#ifdef __cplusplus
extern "C" {
#endif

// Returns sum_i a[i] * b[i] over n values (n a multiple of the block size).
typedef float (*ggml_quant_dot_fn)(int64_t n, const void * a, const void * b);

float ggml_dot_q4_0_q8_0_ref(int64_t n, const void * a, const void * b);
float ggml_dot_q4_1_q8_1_ref(int64_t n, const void * a, const void * b);
float ggml_dot_q5_0_q8_0_ref(int64_t n, const void * a, const void * b);
float ggml_dot_q5_1_q8_1_ref(int64_t n, const void * a, const void * b);
float ggml_dot_q8_0_q8_0_ref(int64_t n, const void * a, const void * b);
float ggml_dot_iq4_nl_q8_0_ref(int64_t n, const void * a, const void * b);
float ggml_dot_q2_K_q8_K_ref(int64_t n, const void * a, const void * b);
float ggml_dot_q3_K_q8_K_ref(int64_t n, const void * a, const void * b);
float ggml_dot_q4_K_q8_K_ref(int64_t n, const void * a, const void * b);
float ggml_dot_q5_K_q8_K_ref(int64_t n, const void * a, const void * b);
float ggml_dot_q6_K_q8_K_ref(int64_t n, const void * a, const void * b);
// quant-dot-iq.cpp: the IQ and ternary types, all against Q8_K.
float ggml_dot_iq2_xxs_q8_K_ref(int64_t n, const void * a, const void * b);
float ggml_dot_iq2_xs_q8_K_ref(int64_t n, const void * a, const void * b);
float ggml_dot_iq2_s_q8_K_ref(int64_t n, const void * a, const void * b);
float ggml_dot_iq3_xxs_q8_K_ref(int64_t n, const void * a, const void * b);
float ggml_dot_iq3_s_q8_K_ref(int64_t n, const void * a, const void * b);
float ggml_dot_iq1_s_q8_K_ref(int64_t n, const void * a, const void * b);
float ggml_dot_iq1_m_q8_K_ref(int64_t n, const void * a, const void * b);
float ggml_dot_iq4_xs_q8_K_ref(int64_t n, const void * a, const void * b);
float ggml_dot_tq1_0_q8_K_ref(int64_t n, const void * a, const void * b);
float ggml_dot_tq2_0_q8_K_ref(int64_t n, const void * a, const void * b);

// nr (<= 4) weight rows (a + r * lda) against one activation row: s[r] for r < nr. Each s[r] is
// bit-identical to the type's single-row dot; sharing the activation block between rows saves
// work where the single dot is compute-bound.
typedef void (*ggml_quant_dot_rows_fn)(int64_t n, const void * a, size_t lda, int nr, const void * b, float * s);

// One weight row against nc (<= GGML_DOT_TILE_MAX) activation rows (b + c * ldb): s[c * lds] for
// c < nc, each bit-identical to the type's single-row dot. Each weight block is decoded once for
// all the columns, which pays where decoding is most of the single dot's work (the grid types).
typedef void (*ggml_quant_dot_cols_fn)(int64_t n, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);

// One block of 32 activations to Q8_0: writes qs, returns the scale (the mul_mat conversion).
ggml_fp16_t ggml_quantize_act_block_q8_0(const float * x, int8_t * qs);

// The activation type a weight type is multiplied with (GGML_TYPE_COUNT: not quantized).
enum ggml_type ggml_quant_vec_dot_type(enum ggml_type type);
// The scalar reference dot of a weight type with its activation type (NULL if none).
ggml_quant_dot_fn ggml_quant_dot_ref(enum ggml_type type);
// The fastest dot this build has for the type (ggml_cpu()->quant_dot, kernels.h): a SIMD kernel
// when one is compiled in, else the reference (NULL if the type has no dot).
ggml_quant_dot_fn ggml_quant_dot_best(enum ggml_type type);

// The multi-row dot of this build for the type, or NULL (then use the single-row dot per row).
ggml_quant_dot_rows_fn ggml_quant_dot_rows_best(enum ggml_type type);
// The multi-column dot of this build for the type, or NULL (then use the single-row dot per column).
ggml_quant_dot_cols_fn ggml_quant_dot_cols_best(enum ggml_type type);

#ifdef __cplusplus
}
#endif

#ifdef __cplusplus
// A set's dot products, one per weight type (NULL: none), and the one switch that picks among them.
struct ggml_quant_dots {
    ggml_quant_dot_fn q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl, q2_K, q3_K, q4_K, q5_K, q6_K;
    ggml_quant_dot_fn iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m, iq4_xs, tq1_0, tq2_0;
};

// The K types' dots: the sum over the super-blocks i < n / QK_K of block_dot(a[i], b[i]) (a of
// type BA against Q8_K), in order.
template <typename BA, typename F>
inline float ggml_quant_dot_blocks_K(int64_t n, const void * va, const void * vb, F block_dot) {
    const BA * a = (const BA *) va;
    const block_q8_K * b = (const block_q8_K *) vb;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) sum += block_dot(a[i], b[i]);
    return sum;
}

inline ggml_quant_dot_fn ggml_quant_dot_of(const ggml_quant_dots & d, enum ggml_type type) {
    switch (type) {
        case GGML_TYPE_Q4_0:   return d.q4_0;
        case GGML_TYPE_Q4_1:   return d.q4_1;
        case GGML_TYPE_Q5_0:   return d.q5_0;
        case GGML_TYPE_Q5_1:   return d.q5_1;
        case GGML_TYPE_Q8_0:   return d.q8_0;
        case GGML_TYPE_IQ4_NL: return d.iq4_nl;
        case GGML_TYPE_Q2_K:   return d.q2_K;
        case GGML_TYPE_Q3_K:   return d.q3_K;
        case GGML_TYPE_Q4_K:   return d.q4_K;
        case GGML_TYPE_Q5_K:   return d.q5_K;
        case GGML_TYPE_Q6_K:   return d.q6_K;
        case GGML_TYPE_IQ2_XXS: return d.iq2_xxs;
        case GGML_TYPE_IQ2_XS: return d.iq2_xs;
        case GGML_TYPE_IQ2_S:  return d.iq2_s;
        case GGML_TYPE_IQ3_XXS: return d.iq3_xxs;
        case GGML_TYPE_IQ3_S:  return d.iq3_s;
        case GGML_TYPE_IQ1_S:  return d.iq1_s;
        case GGML_TYPE_IQ1_M:  return d.iq1_m;
        case GGML_TYPE_IQ4_XS: return d.iq4_xs;
        case GGML_TYPE_TQ1_0:  return d.tq1_0;
        case GGML_TYPE_TQ2_0:  return d.tq2_0;
        default:               return nullptr;
    }
}
#endif
