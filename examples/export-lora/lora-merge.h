// lora-merge.h - one base weight with LoRA updates merged in, W' = W + sum_i s_i B_i A_i,
// computed in F32 row by row (a quantized W is dequantized first) and written as any type
// ggml_quantize_chunk produces, by several threads.
#pragma once

#include "ggml.h"

#include <cstdint>
#include <vector>

// One adapter's update of a weight W of ggml shape [n_in, n_out].
struct lora_merge_term {
    const float * a;  // A, ggml [n_in, r]: r rows of n_in values
    const float * b;  // B, ggml [r, n_out]: n_out rows of r values
    int64_t r;
    float scale;      // the factor of B A: user scale * alpha / r (the user scale alone when alpha is 0)
};

// Writes W' = W + sum of the terms' scale * B A as `type` into out (ggml_row_size(type, n_in) *
// n_out bytes). W must be contiguous with a row converter; n_in a multiple of type's block size.
void lora_merge_tensor(const ggml_tensor * w, const std::vector<lora_merge_term> & terms, ggml_type type, void * out,
                       int n_threads);
