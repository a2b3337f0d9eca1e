// quants-iq.h - the IQ and ternary types' routines beyond quants.h's reference dequantizers:
// their quantizers (qw: optional importance weights, one per column of the row; NULL: every
// value weighs 1) and the decoders the dot products share.
#pragma once

#include "quants.h"

#ifdef __cplusplus
extern "C" {
#endif

void quantize_row_iq4_xs(const float * x, block_iq4_xs * y, int64_t n, const float * qw);
// The grid types' searches (quants-iq-search.cpp).
void quantize_row_iq2_xxs(const float * x, block_iq2_xxs * y, int64_t n, const float * qw);
void quantize_row_iq2_xs(const float * x, block_iq2_xs * y, int64_t n, const float * qw);
void quantize_row_iq2_s(const float * x, block_iq2_s * y, int64_t n, const float * qw);
void quantize_row_iq3_xxs(const float * x, block_iq3_xxs * y, int64_t n, const float * qw);
void quantize_row_iq3_s(const float * x, block_iq3_s * y, int64_t n, const float * qw);
void quantize_row_iq1_s(const float * x, block_iq1_s * y, int64_t n, const float * qw);
void quantize_row_iq1_m(const float * x, block_iq1_m * y, int64_t n, const float * qw);

// The F16 super-scale of an IQ1_M block (spread over the top nibbles of its scales).
float ggml_iq1_m_scale(const block_iq1_m * x);
// A TQ1_0 block's 256 ternary digits (0, 1, 2 for -1, 0, 1) in value order.
void ggml_tq1_0_levels(const block_tq1_0 * x, int8_t * t);

#ifdef __cplusplus
}
#endif
