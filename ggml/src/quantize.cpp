// quantize.cpp - the public quantization entry point and the per-type row converters that the
// type table exposes (to_float / from_float_ref).
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

// One row of n values; qw is the row's importance weights (or NULL).
static void quantize_row(ggml_type type, const float * x, void * y, int64_t n, const float * qw) {
    switch (type) {
        case GGML_TYPE_Q4_0: if (qw) quantize_q4_0_weighted(x, (block_q4_0 *) y, n, qw); else quantize_row_q4_0_ref(x, (block_q4_0 *) y, n); break;
        case GGML_TYPE_Q4_1: if (qw) quantize_q4_1_weighted(x, (block_q4_1 *) y, n, qw); else quantize_row_q4_1_ref(x, (block_q4_1 *) y, n); break;
        case GGML_TYPE_Q5_0: if (qw) quantize_q5_0_weighted(x, (block_q5_0 *) y, n, qw); else quantize_row_q5_0_ref(x, (block_q5_0 *) y, n); break;
        case GGML_TYPE_Q5_1: if (qw) quantize_q5_1_weighted(x, (block_q5_1 *) y, n, qw); else quantize_row_q5_1_ref(x, (block_q5_1 *) y, n); break;
        case GGML_TYPE_Q8_0: quantize_row_q8_0_ref(x, (block_q8_0 *) y, n); break;
        case GGML_TYPE_Q8_1: quantize_row_q8_1_ref(x, (block_q8_1 *) y, n); break;
        case GGML_TYPE_Q8_K: quantize_row_q8_K_ref(x, (block_q8_K *) y, n); break;
        case GGML_TYPE_Q2_K: quantize_row_q2_K(x, (block_q2_K *) y, n, qw); break;
        case GGML_TYPE_Q3_K: quantize_row_q3_K(x, (block_q3_K *) y, n, qw); break;
        case GGML_TYPE_Q4_K: quantize_row_q4_K(x, (block_q4_K *) y, n, qw); break;
        case GGML_TYPE_Q5_K: quantize_row_q5_K(x, (block_q5_K *) y, n, qw); break;
        case GGML_TYPE_Q6_K: quantize_row_q6_K(x, (block_q6_K *) y, n, qw); break;
        case GGML_TYPE_IQ4_NL: quantize_row_iq4_nl(x, (block_iq4_nl *) y, n, qw); break;
        case GGML_TYPE_F32: memcpy(y, x, n * sizeof(float)); break;
        case GGML_TYPE_F16: ggml_fp32_to_fp16_row(x, (ggml_fp16_t *) y, n); break;
        case GGML_TYPE_BF16: ggml_fp32_to_bf16_row(x, (ggml_bf16_t *) y, n); break;
        default: GGML_ABORT("ggml_quantize_chunk: cannot quantize to %s", ggml_type_name(type));
    }
}

bool ggml_quantize_supported(enum ggml_type type) {
    switch (type) {
        case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1:
        case GGML_TYPE_Q8_0: case GGML_TYPE_Q8_1: case GGML_TYPE_Q8_K:
        case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K:
        case GGML_TYPE_IQ4_NL: case GGML_TYPE_F32: case GGML_TYPE_F16: case GGML_TYPE_BF16:
            return true;
        default:
            return false;
    }
}

bool ggml_quantize_requires_imatrix(enum ggml_type type) {
    return type == GGML_TYPE_IQ2_XXS || type == GGML_TYPE_IQ2_XS || type == GGML_TYPE_IQ1_S || type == GGML_TYPE_IQ1_M;
}

void ggml_quantize_init(enum ggml_type type) { (void) type; }
void ggml_quantize_free(void) {}

size_t ggml_quantize_chunk(enum ggml_type type, const float * src, void * dst, int64_t start, int64_t nrows,
                           int64_t n_per_row, const float * imatrix) {
    GGML_ASSERT(ggml_quantize_supported(type));
    GGML_ASSERT(start % n_per_row == 0);
    GGML_ASSERT(n_per_row % ggml_blck_size(type) == 0 && "row length must be a multiple of the block size");
    const size_t row_size = ggml_row_size(type, n_per_row);
    char * out = (char *) dst + (start / n_per_row) * row_size;
    for (int64_t r = 0; r < nrows; r++) {
        quantize_row(type, src + start + r * n_per_row, out + r * row_size, n_per_row, imatrix);
    }
    return nrows * row_size;
}

void ggml_convert_rows(const struct ggml_tensor * src, enum ggml_type type, void * dst, int n_threads,
                       ggml_row_edit_t edit, void * user_data) {
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
            ggml_quantize_chunk(type, f, (char *) dst + r0 * out_row, 0, nr, n, nullptr);
        }
    };
    std::vector<std::thread> threads;
    for (int t = 1; t < n_threads; t++) threads.emplace_back(work);
    work();
    for (auto & t : threads) t.join();
}

// ---- row converters for the type table -----------------------------------------------------
#define TO_FLOAT(T, blk) static void to_float_##T(const void * x, float * y, int64_t k) { dequantize_row_##T((const blk *) x, y, k); }
TO_FLOAT(q4_0, block_q4_0)
TO_FLOAT(q4_1, block_q4_1)
TO_FLOAT(q5_0, block_q5_0)
TO_FLOAT(q5_1, block_q5_1)
TO_FLOAT(q8_0, block_q8_0)
TO_FLOAT(q8_1, block_q8_1)
TO_FLOAT(q2_K, block_q2_K)
TO_FLOAT(q3_K, block_q3_K)
TO_FLOAT(q4_K, block_q4_K)
TO_FLOAT(q5_K, block_q5_K)
TO_FLOAT(q6_K, block_q6_K)
TO_FLOAT(q8_K, block_q8_K)
TO_FLOAT(iq4_nl, block_iq4_nl)
#undef TO_FLOAT

#define FROM_FLOAT(T) static void from_float_##T(const float * x, void * y, int64_t k) { quantize_row(GGML_TYPE_##T, x, y, k, nullptr); }
FROM_FLOAT(Q4_0)
FROM_FLOAT(Q4_1)
FROM_FLOAT(Q5_0)
FROM_FLOAT(Q5_1)
FROM_FLOAT(Q8_0)
FROM_FLOAT(Q8_1)
FROM_FLOAT(Q2_K)
FROM_FLOAT(Q3_K)
FROM_FLOAT(Q4_K)
FROM_FLOAT(Q5_K)
FROM_FLOAT(Q6_K)
FROM_FLOAT(Q8_K)
FROM_FLOAT(IQ4_NL)
#undef FROM_FLOAT

void ggml_quants_fill_traits(struct ggml_type_traits * t);
void ggml_quants_fill_traits(struct ggml_type_traits * t) {
    t[GGML_TYPE_Q4_0] .to_float = to_float_q4_0;   t[GGML_TYPE_Q4_0] .from_float_ref = from_float_Q4_0;
    t[GGML_TYPE_Q4_1] .to_float = to_float_q4_1;   t[GGML_TYPE_Q4_1] .from_float_ref = from_float_Q4_1;
    t[GGML_TYPE_Q5_0] .to_float = to_float_q5_0;   t[GGML_TYPE_Q5_0] .from_float_ref = from_float_Q5_0;
    t[GGML_TYPE_Q5_1] .to_float = to_float_q5_1;   t[GGML_TYPE_Q5_1] .from_float_ref = from_float_Q5_1;
    t[GGML_TYPE_Q8_0] .to_float = to_float_q8_0;   t[GGML_TYPE_Q8_0] .from_float_ref = from_float_Q8_0;
    t[GGML_TYPE_Q8_1] .to_float = to_float_q8_1;   t[GGML_TYPE_Q8_1] .from_float_ref = from_float_Q8_1;
    t[GGML_TYPE_Q2_K] .to_float = to_float_q2_K;   t[GGML_TYPE_Q2_K] .from_float_ref = from_float_Q2_K;
    t[GGML_TYPE_Q3_K] .to_float = to_float_q3_K;   t[GGML_TYPE_Q3_K] .from_float_ref = from_float_Q3_K;
    t[GGML_TYPE_Q4_K] .to_float = to_float_q4_K;   t[GGML_TYPE_Q4_K] .from_float_ref = from_float_Q4_K;
    t[GGML_TYPE_Q5_K] .to_float = to_float_q5_K;   t[GGML_TYPE_Q5_K] .from_float_ref = from_float_Q5_K;
    t[GGML_TYPE_Q6_K] .to_float = to_float_q6_K;   t[GGML_TYPE_Q6_K] .from_float_ref = from_float_Q6_K;
    t[GGML_TYPE_Q8_K] .to_float = to_float_q8_K;   t[GGML_TYPE_Q8_K] .from_float_ref = from_float_Q8_K;
    t[GGML_TYPE_IQ4_NL].to_float = to_float_iq4_nl; t[GGML_TYPE_IQ4_NL].from_float_ref = from_float_IQ4_NL;
}
