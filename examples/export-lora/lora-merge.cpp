// lora-merge.cpp - W' = W + sum_i s_i B_i A_i, row by row: row o of W' is row o of W plus
// s_i * sum_k B_i[o][k] * (row k of A_i), accumulated in F32 (as llama.cpp's export-lora does
// with ggml_mul_mat), then converted to the output type. Threads take blocks of rows.
#include "lora-merge.h"

#include <algorithm>

namespace {

// Adds the terms' scale * (B A) row o to a row of W.
void add_terms(int64_t o, float * row, int64_t n_in, void * user_data) {
    const auto & terms = *(const std::vector<lora_merge_term> *) user_data;
    thread_local std::vector<float> acc;
    acc.resize((size_t) n_in);
    for (const lora_merge_term & t : terms) {
        float * ac = acc.data();
        std::fill(acc.begin(), acc.end(), 0.0f);
        const float * brow = t.b + o * t.r;
        for (int64_t k = 0; k < t.r; k++) {
            const float bk = brow[k];
            const float * ak = t.a + k * n_in;
            for (int64_t j = 0; j < n_in; j++) ac[j] += bk * ak[j];
        }
        const float s = t.scale;
        for (int64_t j = 0; j < n_in; j++) row[j] += s * ac[j];
    }
}

}  // namespace

void lora_merge_tensor(const ggml_tensor * w, const std::vector<lora_merge_term> & terms, ggml_type type, void * out,
                       int n_threads) {
    ggml_convert_rows(w, type, out, n_threads, nullptr, add_terms, (void *) &terms);
}
