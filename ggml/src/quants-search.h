// quants-search.h - scale searches shared by the quantizers: given a few values (a block or a
// sub-block) and a weight per value, find the scale (and offset) whose rounded levels give the
// least weighted squared error. Used with weights 1 (plain error) or an importance matrix.
#pragma once

#include <stdint.h>

#include "ggml.h"  // ggml_fp16_t

// Symmetric levels q in [qmin, qmax]: x ~ s * q. Writes the levels to L and returns s (which may
// be negative: the search tries mapping the largest-magnitude value to either end of the range).
float quant_fit_symmetric(int n, const float * x, const float * w, int qmin, int qmax, int8_t * L);

// Asymmetric levels q in [0, qmax]: x ~ s * q - m with s >= 0. The K formats store an unsigned
// min that is subtracted (m >= 0 enforced); with any_sign_min (Q4_1, Q5_1) m may take any sign.
// Writes the levels to L, *m the min, returns s.
float quant_fit_scale_min(int n, const float * x, const float * w, int qmax, uint8_t * L, float * m);
float quant_fit_scale_offset(int n, const float * x, const float * w, int qmax, uint8_t * L, float * m);

// Non-uniform levels (sorted ascending, nlev of them): x ~ s * levels[L]. Returns s.
float quant_fit_levels(int n, const float * x, const float * w, const int8_t * levels, int nlev, uint8_t * L);

// Levels L = clamp(quant_round((x + m) / s), 0, qmax) (all 0 when s <= 0) and the weighted
// squared error of x against s * L - m; n a multiple of 8.
double quant_round_error(int n, const float * x, const float * w, float s, float m, int qmax, uint8_t * L);
// The same for symmetric levels: L = clamp(quant_round(x / s), qmin, qmax) (all 0 when s == 0),
// error against s * L.
double quant_round_error_sym(int n, const float * x, const float * w, float s, int qmin, int qmax, int8_t * L);

// The weight of each of n values in the error searches, given the importance matrix's entries qw
// for their columns (the mean squared activation each weight multiplies): qw * sqrt(sigma_mult *
// mean(x^2) + x^2). The importance matrix alone is what a layer's output error weighs, but on
// trained weights the model's output (KL divergence) is kept better when large weights count more
// too, as llama.cpp's quantizers weigh them (measured: tools/quant-quality, docs/benchmarks.md).
// A zero entry (a column never seen) counts as a tiny positive one.
void quant_imatrix_weights(int n, const float * x, const float * qw, float sigma_mult, float * w);

// Without an importance matrix, the weight of each value in the searches: 1 (the plain error), or
// for Q4_K and Q5_K, as llama.cpp's reference quantizers weigh them, the 32-value group's RMS plus
// |x|. The plain error leaves less, but there large weights carry more of what a layer computes
// than their share of the squared error: the model's output (KL divergence) is kept better when
// they count more. llama.cpp's other plain weightings (|x| for Q2_K, x^2 for Q3_K, Q6_K, IQ4_NL,
// IQ4_XS) measured worse than the plain error here (tools/quant-quality).
enum quant_plain_weighting { QUANT_PLAIN_ONE, QUANT_PLAIN_RMS_ABS };
void quant_plain_weights(int n, const float * x, enum quant_plain_weighting kind, float * w);

// The factor to scale a quantized block of n values by (xhat: its decoded values) so that its
// error is orthogonal to the values themselves in the importance matrix's metric (qw, or 1 per
// value without one): sum qw x^2 / sum qw x xhat. The least-squares searches leave an error
// orthogonal to the decoded values instead, which shrinks every block towards zero (a few tenths of
// a percent at 4 bits, 5-15% at 1-2 bits); a row's output then shrinks coherently, which costs the
// model far more than the diagonal importance matrix counts (measured: IQ1_S's KL divergence 9%
// lower, IQ2_S's 6%, Q4_K_M's under 1%, tools/quant-quality). 1 when undefined; within [0.5, 2].
float quant_unshrink_factor(int n, const float * x, const float * xhat, const float * qw);

// An F16 scale times f, rounded back to F16 (0 stays 0).
ggml_fp16_t quant_scale_fp16(ggml_fp16_t d, float f);

// A quantized block of n values (x: the values it codes) decoded by DEQ, then its F16 scales (d,
// and dmin where the format has one) times quant_unshrink_factor.
template <typename B, void (*DEQ)(const B *, float *, int64_t)>
void quant_unshrink_block(B & blk, const float * x, const float * qw, int n, ggml_fp16_t * d, ggml_fp16_t * dmin = nullptr) {
    float r[256];  // n <= QK_K
    DEQ(&blk, r, n);
    const float f = quant_unshrink_factor(n, x, r, qw);
    *d = quant_scale_fp16(*d, f);
    if (dmin) *dmin = quant_scale_fp16(*dmin, f);
}

// Nearest integer, ties away from zero (as roundf), returned as int.
static inline int quant_round(float v) { return (int) (v >= 0.0f ? v + 0.5f : v - 0.5f); }
