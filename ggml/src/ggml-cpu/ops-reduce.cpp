// ops-reduce.cpp - sum (all elements), sum_rows, mean (over dim 0) and argmax (over dim 0).
//
// Sums accumulate in double with four partial sums indexed by element position (i mod 4):
// a row's result depends only on the row, never on how rows were split across threads.
#include "ops-common.h"

#include <math.h>

#include <vector>

namespace {

// Partial sums of a row, fed in pieces whose starts are multiples of 4.
struct RowSum {
    double acc[4] = {0.0, 0.0, 0.0, 0.0};

    void add(const float * x, int64_t n) {
        int64_t i = 0;
        for (; i + 4 <= n; i += 4) {
            acc[0] += x[i + 0];
            acc[1] += x[i + 1];
            acc[2] += x[i + 2];
            acc[3] += x[i + 3];
        }
        for (int64_t k = 0; i < n; i++, k++) acc[k] += x[i];
    }
    double total() const { return (acc[0] + acc[1]) + (acc[2] + acc[3]); }
};

static_assert(GGML_CPU_CHUNK % 4 == 0, "chunks must keep the i mod 4 accumulator assignment");

// Sum of the row of t at (i1, i2, i3), any float type and stride.
double row_sum(const struct ggml_tensor * t, int64_t i1, int64_t i2, int64_t i3) {
    const char * x = ggml_cpu_elem_ptr(t, 0, i1, i2, i3);
    const int64_t ne0 = t->ne[0];
    RowSum s;
    if (t->type == GGML_TYPE_F32 && t->nb[0] == sizeof(float)) {
        s.add((const float *) x, ne0);
        return s.total();
    }
    float buf[GGML_CPU_CHUNK];
    for (int64_t c = 0; c < ne0; c += GGML_CPU_CHUNK) {
        const int64_t n = ne0 - c < GGML_CPU_CHUNK ? ne0 - c : GGML_CPU_CHUNK;
        ggml_cpu_gather_f32(t->type, x + c * t->nb[0], t->nb[0], buf, n);
        s.add(buf, n);
    }
    return s.total();
}

// dst[0, i1, i2, i3] = sum (or mean) of src row (i1, i2, i3).
void forward_row_reduce(const struct ggml_compute_params * params, struct ggml_tensor * dst, bool mean) {
    const struct ggml_tensor * src = dst->src[0];
    GGML_ASSERT(src != NULL && ggml_cpu_is_float_type(src->type) && ggml_cpu_is_float_type(dst->type));
    GGML_ASSERT(dst->ne[0] == 1);
    for (int d = 1; d < GGML_MAX_DIMS; d++) GGML_ASSERT(dst->ne[d] == src->ne[d]);

    const int64_t ne1 = src->ne[1], ne2 = src->ne[2];
    int64_t r0, r1;
    ggml_cpu_split_rows(ggml_nrows(src), params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        double v = row_sum(src, i1, i2, i3);
        if (mean) v /= (double) src->ne[0];
        ggml_cpu_store_f32(dst->type, ggml_cpu_elem_ptr(dst, 0, i1, i2, i3), (float) v);
    }
}

}  // namespace

// One scalar out: not worth splitting (and splitting would need scratch); thread 0 does it.
void ggml_cpu_forward_sum(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const struct ggml_tensor * src = dst->src[0];
    GGML_ASSERT(src != NULL && ggml_cpu_is_float_type(src->type) && ggml_cpu_is_float_type(dst->type));
    GGML_ASSERT(ggml_nelements(dst) == 1);
    if (params->ith != 0) return;

    const int64_t ne1 = src->ne[1], ne2 = src->ne[2];
    double total = 0.0;
    for (int64_t r = 0; r < ggml_nrows(src); r++) {
        total += row_sum(src, r % ne1, (r / ne1) % ne2, r / (ne1 * ne2));
    }
    ggml_cpu_store_f32(dst->type, dst->data, (float) total);
}

void ggml_cpu_forward_sum_rows(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    forward_row_reduce(params, dst, false);
}

void ggml_cpu_forward_mean(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    forward_row_reduce(params, dst, true);
}

// dst[i1] = index of the first largest element of row i1 (NaNs never win; 0 when no element
// is larger than -inf).
void ggml_cpu_forward_argmax(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const struct ggml_tensor * src = dst->src[0];
    GGML_ASSERT(src != NULL && ggml_cpu_is_float_type(src->type));
    GGML_ASSERT(dst->type == GGML_TYPE_I32);
    GGML_ASSERT(src->ne[2] == 1 && src->ne[3] == 1);
    GGML_ASSERT(ggml_nelements(dst) == src->ne[1]);

    const int64_t ne0 = src->ne[0];
    int64_t r0, r1;
    ggml_cpu_split_rows(src->ne[1], params->ith, params->nth, &r0, &r1);

    // The first index of the largest value (a NaN never wins; 0 when no value beats -inf).
    std::vector<float> row;
    for (int64_t r = r0; r < r1; r++) {
        const char * x = ggml_cpu_elem_ptr(src, 0, r, 0, 0);
        int32_t best_i;
        if (src->type == GGML_TYPE_F32 && src->nb[0] == sizeof(float)) {
            best_i = (int32_t) ggml_argmax_f32_row((const float *) x, ne0);
        } else {  // gathered as F32 (F16 and BF16 are exact in F32)
            row.resize((size_t) ne0);
            ggml_cpu_gather_f32(src->type, x, src->nb[0], row.data(), ne0);
            best_i = (int32_t) ggml_argmax_f32_row(row.data(), ne0);
        }
        // dst may be a view with any stride
        const int32_t out = best_i;
        memcpy((char *) dst->data + r * dst->nb[0], &out, sizeof(out));
    }
}
