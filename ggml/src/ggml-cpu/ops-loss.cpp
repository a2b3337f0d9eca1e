// ops-loss.cpp - cross_entropy_loss(a, b): a logits F32 [nc, rows...], b target probabilities of
// the same shape; dst F32 [1] = -(1/nr) * sum over rows of sum_c b[c] * log_softmax(a)[c].
// cross_entropy_loss_back: its gradient with respect to a, (softmax(a) * sum(b) - b) * grad / nr
// (sum(b) is 1 for probability labels; weighted or all-zero label rows, as a fine-tuning loss
// over some tokens uses them, get their exact gradient too).
//
// Each thread writes the loss of each of its rows (in double) to a per-row slot of the work
// buffer; after a barrier thread 0 sums the slots in row order, so the result is bit-identical
// for any thread count. Terms with b[c] == 0 count as 0 (the limit of b log b), so a target
// that puts no mass on a -inf logit does not turn the loss into NaN.
#include "cpu-ops.h"
#include "ops-common.h"

#include <math.h>
#include <stdint.h>

namespace {

constexpr int kLanes = 8;  // interleaved partial results (fixed: part of the result's bits)

// Elements [c0, c0 + n) of a row with element stride nb0, as floats: the row itself when it is
// contiguous, else gathered into buf.
inline const float * row_chunk(const char * row, size_t nb0, int64_t c0, int64_t n, float * buf) {
    if (nb0 == sizeof(float)) return (const float *) row + c0;
    for (int64_t j = 0; j < n; j++) buf[j] = *(const float *) (row + (c0 + j) * nb0);
    return buf;
}

// Calls f(j, j % kLanes) for j in [0, n), written as blocks of kLanes so the compiler turns
// the lanes into vector registers. n is a multiple of kLanes except in a row's last chunk.
template <typename F>
inline void for_lanes(int64_t n, F f) {
    int64_t j = 0;
    for (; j + kLanes <= n; j += kLanes) {
        for (int k = 0; k < kLanes; k++) f(j + k, k);
    }
    for (int k = 0; j + k < n; k++) f(j + k, k);
}

// The max of a row and the sum of exp(a - max) over it: two passes over chunks, the second with
// the vectorized float exp (~1 ulp) summed in double. Each pass keeps kLanes independent
// partial results so it is not latency-bound.
struct RowNorm {
    float max;
    double sum_exp;
};
RowNorm row_softmax_norm(const char * a, size_t a_nb0, int64_t nc) {
    float buf_a[GGML_CPU_CHUNK], buf_e[GGML_CPU_CHUNK];

    float max_lanes[kLanes];
    for (int k = 0; k < kLanes; k++) max_lanes[k] = -INFINITY;
    for (int64_t c0 = 0; c0 < nc; c0 += GGML_CPU_CHUNK) {
        const int64_t n = nc - c0 < GGML_CPU_CHUNK ? nc - c0 : GGML_CPU_CHUNK;
        const float * x = row_chunk(a, a_nb0, c0, n, buf_a);
        for_lanes(n, [&](int64_t j, int k) { max_lanes[k] = x[j] > max_lanes[k] ? x[j] : max_lanes[k]; });
    }
    float max = -INFINITY;
    for (int k = 0; k < kLanes; k++) max = max_lanes[k] > max ? max_lanes[k] : max;

    double sum_lanes[kLanes] = {0};
    for (int64_t c0 = 0; c0 < nc; c0 += GGML_CPU_CHUNK) {
        const int64_t n = nc - c0 < GGML_CPU_CHUNK ? nc - c0 : GGML_CPU_CHUNK;
        const float * x = row_chunk(a, a_nb0, c0, n, buf_a);
        for (int64_t j = 0; j < n; j++) buf_e[j] = x[j] - max;
        ggml_cpu_vec_exp_f32(buf_e, buf_e, n);
        for_lanes(n, [&](int64_t j, int k) { sum_lanes[k] += (double) buf_e[j]; });
    }
    double sum_exp = 0.0;
    for (int k = 0; k < kLanes; k++) sum_exp += sum_lanes[k];
    return {max, sum_exp};
}

// -sum_c b[c] * log_softmax(a)[c] for one row: the normalizer (row_softmax_norm), then the
// weighted sum in double.
double row_cross_entropy(const char * a, size_t a_nb0, const char * b, size_t b_nb0, int64_t nc) {
    float buf_a[GGML_CPU_CHUNK], buf_b[GGML_CPU_CHUNK];
    const RowNorm rn = row_softmax_norm(a, a_nb0, nc);
    const double log_norm = (double) rn.max + log(rn.sum_exp);  // log sum_c exp(a[c])

    double loss_lanes[kLanes] = {0};
    for (int64_t c0 = 0; c0 < nc; c0 += GGML_CPU_CHUNK) {
        const int64_t n = nc - c0 < GGML_CPU_CHUNK ? nc - c0 : GGML_CPU_CHUNK;
        const float * x = row_chunk(a, a_nb0, c0, n, buf_a);
        const float * t = row_chunk(b, b_nb0, c0, n, buf_b);
        for_lanes(n, [&](int64_t j, int k) {
            const double term = (double) t[j] * ((double) x[j] - log_norm);
            loss_lanes[k] -= t[j] != 0.0f ? term : 0.0;  // 0 * -inf counts as 0
        });
    }
    double loss = 0.0;
    for (int k = 0; k < kLanes; k++) loss += loss_lanes[k];
    return loss;
}

}  // namespace

extern "C" size_t ggml_cpu_loss_work_size(const ggml_tensor * node, int n_threads) {
    (void) n_threads;
    return sizeof(double) + (size_t) ggml_nrows(node->src[0]) * sizeof(double);  // + alignment slack
}

extern "C" void ggml_cpu_forward_cross_entropy_loss(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    GGML_ASSERT(a != nullptr && b != nullptr);
    GGML_ASSERT(a->type == GGML_TYPE_F32 && b->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F32);
    GGML_ASSERT(ggml_are_same_shape(a, b));
    GGML_ASSERT(ggml_nelements(dst) == 1);

    const int64_t nc = a->ne[0];
    const int64_t nr = ggml_nrows(a);
    GGML_ASSERT(params->wsize >= sizeof(double) + (size_t) nr * sizeof(double));
    const uintptr_t base = ((uintptr_t) params->wdata + sizeof(double) - 1) / sizeof(double) * sizeof(double);
    double * row_loss = (double *) base;

    ggml_cpu_for_own_rows(params, a, [&](int64_t i1, int64_t i2, int64_t i3) {
        row_loss[i1 + a->ne[1] * (i2 + a->ne[2] * i3)] = row_cross_entropy(ggml_cpu_elem_ptr(a, 0, i1, i2, i3), a->nb[0], ggml_cpu_elem_ptr(b, 0, i1, i2, i3), b->nb[0], nc);
    });

    ggml_cpu_barrier(params);

    if (params->ith == 0) {
        double total = 0.0;
        for (int64_t ir = 0; ir < nr; ir++) total += row_loss[ir];
        *(float *) dst->data = (float) (nr > 0 ? total / (double) nr : 0.0);
    }
}

// dst = (softmax(a) * sum(b) - b) * grad / nr per row, nr the number of rows (the forward is the mean
// over rows). softmax(a) as in the forward: exp(a - max) with the vectorized exp over the
// double sum; each output computed in double and rounded once. Split by rows.
extern "C" void ggml_cpu_forward_cross_entropy_loss_back(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * grad = dst->src[0];
    const ggml_tensor * a = dst->src[1];
    const ggml_tensor * b = dst->src[2];
    GGML_ASSERT(grad != nullptr && a != nullptr && b != nullptr);
    GGML_ASSERT(grad->type == GGML_TYPE_F32 && ggml_nelements(grad) == 1);
    GGML_ASSERT(a->type == GGML_TYPE_F32 && b->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F32);
    GGML_ASSERT(ggml_are_same_shape(a, b) && ggml_are_same_shape(a, dst));

    const int64_t nc = a->ne[0];
    const int64_t nr = ggml_nrows(a);
    const double k = (double) *(const float *) grad->data / (double) nr;

    float buf_a[GGML_CPU_CHUNK], buf_b[GGML_CPU_CHUNK], buf_e[GGML_CPU_CHUNK];
    ggml_cpu_for_own_rows(params, a, [&](int64_t i1, int64_t i2, int64_t i3) {
        const char * ar = ggml_cpu_elem_ptr(a, 0, i1, i2, i3);
        const char * br = ggml_cpu_elem_ptr(b, 0, i1, i2, i3);
        char * dr = ggml_cpu_elem_ptr(dst, 0, i1, i2, i3);
        // The labels' mass (exactly 1 for one-hot rows), in kLanes interleaved partial sums.
        double mass_lanes[kLanes] = {0};
        for (int64_t c0 = 0; c0 < nc; c0 += GGML_CPU_CHUNK) {
            const int64_t n = nc - c0 < GGML_CPU_CHUNK ? nc - c0 : GGML_CPU_CHUNK;
            const float * t = row_chunk(br, b->nb[0], c0, n, buf_b);
            for_lanes(n, [&](int64_t j, int k) { mass_lanes[k] += (double) t[j]; });
        }
        double mass = 0.0;
        for (int k = 0; k < kLanes; k++) mass += mass_lanes[k];
        if (mass == 0.0) {
            for (int64_t c = 0; c < nc; c++) *(float *) (dr + c * dst->nb[0]) = 0.0f;
            return;
        }
        const RowNorm rn = row_softmax_norm(ar, a->nb[0], nc);
        const double inv_sum = mass / rn.sum_exp;
        for (int64_t c0 = 0; c0 < nc; c0 += GGML_CPU_CHUNK) {
            const int64_t n = nc - c0 < GGML_CPU_CHUNK ? nc - c0 : GGML_CPU_CHUNK;
            const float * x = row_chunk(ar, a->nb[0], c0, n, buf_a);
            const float * t = row_chunk(br, b->nb[0], c0, n, buf_b);
            for (int64_t j = 0; j < n; j++) buf_e[j] = x[j] - rn.max;
            ggml_cpu_vec_exp_f32(buf_e, buf_e, n);
            if (dst->nb[0] == sizeof(float)) {  // a plain loop the compiler vectorizes
                float * out = (float *) dr + c0;
                for (int64_t j = 0; j < n; j++) out[j] = (float) (((double) buf_e[j] * inv_sum - (double) t[j]) * k);
                continue;
            }
            for (int64_t j = 0; j < n; j++) {
                *(float *) (dr + (c0 + j) * dst->nb[0]) = (float) (((double) buf_e[j] * inv_sum - (double) t[j]) * k);
            }
        }
    });
}
