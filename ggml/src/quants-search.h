// quants-search.h - scale searches shared by the quantizers: given a few values (a block or a
// sub-block) and a weight per value, find the scale (and offset) whose rounded levels give the
// least weighted squared error. Used with weights 1 (plain error) or an importance matrix.
#pragma once

#include <stdint.h>

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

// Nearest integer, ties away from zero (as roundf), returned as int.
static inline int quant_round(float v) { return (int) (v >= 0.0f ? v + 0.5f : v - 0.5f); }
