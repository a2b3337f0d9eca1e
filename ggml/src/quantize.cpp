// quantize.cpp - the public quantization entry point (each type's row quantizer is its row of
// the type table, ggml-type-table.cpp) and the one-scale types' weighted quantizers.
#include "quants-k.h"
#include "quants-search.h"

#include <math.h>
#include <string.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

// ---- importance-weighted quantizers of the 32-value types ----------------------------------
// With an importance matrix, the one-scale types also search their scale (weighted least
// squares); without one they keep the reference rounding, which gives the same bytes as other
// GGUF writers.
static void quantize_q4_0_weighted(const float * x, block_q4_0 * y, int64_t n, const float * qw) {
    int8_t L[QK4_0];
    for (int64_t b = 0; b < n / QK4_0; b++, x += QK4_0, qw += QK4_0) {
        const float s = quant_fit_symmetric(QK4_0, x, qw, -8, 7, L);
        y[b].d = GGML_FP32_TO_FP16(s);
        for (int j = 0; j < QK4_0 / 2; j++) y[b].qs[j] = (uint8_t) ((L[j] + 8) | ((L[j + QK4_0 / 2] + 8) << 4));
    }
}

static void quantize_q5_0_weighted(const float * x, block_q5_0 * y, int64_t n, const float * qw) {
    int8_t L[QK5_0];
    for (int64_t b = 0; b < n / QK5_0; b++, x += QK5_0, qw += QK5_0) {
        const float s = quant_fit_symmetric(QK5_0, x, qw, -16, 15, L);
        y[b].d = GGML_FP32_TO_FP16(s);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            const int u0 = L[j] + 16, u1 = L[j + QK5_0 / 2] + 16;
            y[b].qs[j] = (uint8_t) ((u0 & 0xF) | ((u1 & 0xF) << 4));
            qh |= (uint32_t) (u0 >> 4) << j;
            qh |= (uint32_t) (u1 >> 4) << (j + QK5_0 / 2);
        }
        memcpy(y[b].qh, &qh, 4);  // little-endian hosts only (all supported targets)
    }
}

static void quantize_q4_1_weighted(const float * x, block_q4_1 * y, int64_t n, const float * qw) {
    uint8_t L[QK4_1];
    for (int64_t b = 0; b < n / QK4_1; b++, x += QK4_1, qw += QK4_1) {
        float m;
        const float s = quant_fit_scale_offset(QK4_1, x, qw, 15, L, &m);
        y[b].d = GGML_FP32_TO_FP16(s);
        y[b].m = GGML_FP32_TO_FP16(-m);
        for (int j = 0; j < QK4_1 / 2; j++) y[b].qs[j] = (uint8_t) (L[j] | (L[j + QK4_1 / 2] << 4));
    }
}

static void quantize_q5_1_weighted(const float * x, block_q5_1 * y, int64_t n, const float * qw) {
    uint8_t L[QK5_1];
    for (int64_t b = 0; b < n / QK5_1; b++, x += QK5_1, qw += QK5_1) {
        float m;
        const float s = quant_fit_scale_offset(QK5_1, x, qw, 31, L, &m);
        y[b].d = GGML_FP32_TO_FP16(s);
        y[b].m = GGML_FP32_TO_FP16(-m);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            const int u0 = L[j], u1 = L[j + QK5_1 / 2];
            y[b].qs[j] = (uint8_t) ((u0 & 0xF) | ((u1 & 0xF) << 4));
            qh |= (uint32_t) (u0 >> 4) << j;
            qh |= (uint32_t) (u1 >> 4) << (j + QK5_1 / 2);
        }
        memcpy(y[b].qh, &qh, 4);
    }
}

// The rows of the type table (ggml-type-table.cpp): importance weights pick the weighted search.
void ggml_quantize_row_q4_0(const float * x, void * y, int64_t n, const float * qw);
void ggml_quantize_row_q4_1(const float * x, void * y, int64_t n, const float * qw);
void ggml_quantize_row_q5_0(const float * x, void * y, int64_t n, const float * qw);
void ggml_quantize_row_q5_1(const float * x, void * y, int64_t n, const float * qw);
void ggml_quantize_row_q4_0(const float * x, void * y, int64_t n, const float * qw) {
    if (qw) quantize_q4_0_weighted(x, (block_q4_0 *) y, n, qw); else quantize_row_q4_0_ref(x, (block_q4_0 *) y, n);
}
void ggml_quantize_row_q4_1(const float * x, void * y, int64_t n, const float * qw) {
    if (qw) quantize_q4_1_weighted(x, (block_q4_1 *) y, n, qw); else quantize_row_q4_1_ref(x, (block_q4_1 *) y, n);
}
void ggml_quantize_row_q5_0(const float * x, void * y, int64_t n, const float * qw) {
    if (qw) quantize_q5_0_weighted(x, (block_q5_0 *) y, n, qw); else quantize_row_q5_0_ref(x, (block_q5_0 *) y, n);
}
void ggml_quantize_row_q5_1(const float * x, void * y, int64_t n, const float * qw) {
    if (qw) quantize_q5_1_weighted(x, (block_q5_1 *) y, n, qw); else quantize_row_q5_1_ref(x, (block_q5_1 *) y, n);
}

void ggml_quantize_init(enum ggml_type type) { (void) type; }
void ggml_quantize_free(void) {}

size_t ggml_quantize_chunk(enum ggml_type type, const float * src, void * dst, int64_t start, int64_t nrows,
                           int64_t n_per_row, const float * imatrix) {
    if (!ggml_quantize_supported(type)) GGML_ABORT("ggml_quantize_chunk: cannot quantize to %s", ggml_type_name(type));
    const ggml_quantize_row_t quantize_row = ggml_get_type_traits(type)->quantize_row;
    GGML_ASSERT(start % n_per_row == 0);
    GGML_ASSERT(n_per_row % ggml_blck_size(type) == 0 && "row length must be a multiple of the block size");
    const size_t row_size = ggml_row_size(type, n_per_row);
    char * out = (char *) dst + (start / n_per_row) * row_size;
    for (int64_t r = 0; r < nrows; r++) {
        quantize_row(src + start + r * n_per_row, out + r * row_size, n_per_row, imatrix);
    }
    return nrows * row_size;
}

void ggml_convert_rows(const struct ggml_tensor * src, enum ggml_type type, void * dst, int n_threads,
                       const float * imatrix, ggml_row_edit_t edit, void * user_data) {
    const int64_t n = src->ne[0], nrows = ggml_nrows(src);
    const size_t in_row = ggml_row_size(src->type, n), out_row = ggml_row_size(type, n);
    const ggml_type_traits * tin = ggml_get_type_traits(src->type);
    GGML_ASSERT(src->type == GGML_TYPE_F32 || (tin && tin->to_float));
    // Rows per task: about 256 KiB of floats, handed out dynamically so threads stay busy.
    const int64_t chunk = std::max<int64_t>(1, (256 * 1024) / (n * (int64_t) sizeof(float)));
    std::atomic<int64_t> next{0};
    auto work = [&]() {
        std::vector<float> buf;
        for (;;) {
            const int64_t r0 = next.fetch_add(chunk);
            if (r0 >= nrows) break;
            const int64_t nr = std::min(chunk, nrows - r0);
            const char * in = (const char *) src->data + r0 * in_row;
            const float * f = (const float *) in;
            if (src->type != GGML_TYPE_F32 || edit) {  // F32 rows are read in place unless edited
                buf.resize((size_t) (chunk * n));
                for (int64_t r = 0; r < nr; r++) {
                    float * row = buf.data() + r * n;
                    if (src->type == GGML_TYPE_F32) memcpy(row, in + r * in_row, (size_t) n * sizeof(float));
                    else tin->to_float(in + r * in_row, row, n);
                    if (edit) edit(r0 + r, row, n, user_data);
                }
                f = buf.data();
            }
            // Each matrix (ne[1] rows) with its own weights.
            for (int64_t r = 0; r < nr;) {
                const int64_t m = (r0 + r) / src->ne[1];
                const int64_t k = std::min(nr - r, (m + 1) * src->ne[1] - (r0 + r));
                ggml_quantize_chunk(type, f + r * n, (char *) dst + (r0 + r) * out_row, 0, k, n, imatrix ? imatrix + m * n : nullptr);
                r += k;
            }
        }
    };
    std::vector<std::thread> threads;
    for (int t = 1; t < n_threads; t++) threads.emplace_back(work);
    work();
    for (auto & t : threads) t.join();
}
