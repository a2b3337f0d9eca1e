// lora-merge.cpp - W' = W + sum_i s_i B_i A_i, row by row: row o of W' is row o of W plus
// s_i * sum_k B_i[o][k] * (row k of A_i), accumulated in F32 (as llama.cpp's export-lora does
// with ggml_mul_mat), then converted to the output type. Threads take blocks of rows.
#include "lora-merge.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

void lora_merge_tensor(const ggml_tensor * w, const std::vector<lora_merge_term> & terms, ggml_type type, void * out,
                       int n_threads) {
    const int64_t n_in = w->ne[0];
    const int64_t n_out = ggml_nrows(w);
    const size_t in_row = ggml_row_size(w->type, n_in);
    const size_t out_row = ggml_row_size(type, n_in);
    const ggml_type_traits * tin = ggml_get_type_traits(w->type);
    // Rows per task: about 256 KiB of F32 values, handed out dynamically so threads stay busy.
    const int64_t chunk = std::max<int64_t>(1, (256 * 1024) / (n_in * (int64_t) sizeof(float)));
    std::atomic<int64_t> next{0};
    auto work = [&]() {
        std::vector<float> rows((size_t) (chunk * n_in));
        std::vector<float> acc((size_t) n_in);
        for (;;) {
            const int64_t r0 = next.fetch_add(chunk);
            if (r0 >= n_out) break;
            const int64_t nr = std::min(chunk, n_out - r0);
            for (int64_t o = r0; o < r0 + nr; o++) {
                float * row = rows.data() + (o - r0) * n_in;
                const char * src = (const char *) w->data + o * in_row;
                if (w->type == GGML_TYPE_F32) memcpy(row, src, (size_t) n_in * sizeof(float));
                else tin->to_float(src, row, n_in);
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
            ggml_quantize_chunk(type, rows.data(), (char *) out + r0 * out_row, 0, nr, n_in, nullptr);
        }
    };
    std::vector<std::thread> threads;
    for (int i = 1; i < n_threads; i++) threads.emplace_back(work);
    work();
    for (auto & t : threads) t.join();
}
