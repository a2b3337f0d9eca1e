// quants-k.h - quantizers that search for scales: the K super-block types and IQ4_NL.
// qw: optional importance weights, one per column of the row (NULL: every value weighs 1).
#pragma once

#include "quants.h"

#ifdef __cplusplus
extern "C" {
#endif

void quantize_row_q2_K(const float * x, block_q2_K * y, int64_t n, const float * qw);
void quantize_row_q3_K(const float * x, block_q3_K * y, int64_t n, const float * qw);
void quantize_row_q4_K(const float * x, block_q4_K * y, int64_t n, const float * qw);
void quantize_row_q5_K(const float * x, block_q5_K * y, int64_t n, const float * qw);
void quantize_row_q6_K(const float * x, block_q6_K * y, int64_t n, const float * qw);
void quantize_row_iq4_nl(const float * x, block_iq4_nl * y, int64_t n, const float * qw);

#ifdef __cplusplus
}
#endif
