// softmax-row.h - the row pieces of softmax that soft_max (ops-softmax.cpp) and the fused
// attention (ops-flash-attn.cpp) share, so both give the same probabilities for the same logits.
#pragma once

#include "../ggml-impl.h"
#include "kernels.h"

#include <stdint.h>

namespace ggml_softmax_row {

// Sum of term(i) for i in [0, n), accumulated in double over 8 partial sums chosen by position
// and added pairwise, so the result depends only on the row, never on which thread computes it.
template <typename Term>
double row_sum(int64_t n, Term term) {
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int k = 0; k < 8; k++) acc[k] += term(i + k);
    }
    for (int k = 0; i + k < n; k++) acc[k] += term(i + k);
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// The logits of a row: w[i] = x[i] * scale, then fma(slope, mask[i], w[i]) with an F32 or
// (mask_f16) F16 mask (NULL: none); returns their max (-inf for an all -inf row). x may be w.
float logits_max(float * w, const float * x, const void * mask, bool mask_f16, float scale, float slope, int64_t n);
// w[i] = exp(w[i] - max) for i < n (the shared vectorized exp); returns the sum (row_sum).
double exp_sub_max_sum(float * w, int64_t n, float max);
// Largest element of w[0..n) (-inf for an all -inf row); exact, so any order gives it.
inline float row_max(const float * w, int64_t n) { return ggml_cpu()->row_max(w, n); }
// w[i] += slope * f16 mask[i] (with SIMD, one fused multiply-add each).
inline void add_mask_f16(float * w, const ggml_fp16_t * mask, int64_t n, float slope) { ggml_cpu()->add_mask_f16(w, mask, n, slope); }
// ALiBi (ggml's definition): head h of n_head gets m0^(h+1) for the first n_head_log2 heads (a
// power of two), then m1^(2(h - n_head_log2) + 1); 1 when max_bias <= 0.
float alibi_slope(uint32_t h, uint32_t n_head, float max_bias);

}  // namespace ggml_softmax_row
