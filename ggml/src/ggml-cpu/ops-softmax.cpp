// ops-softmax.cpp - diag_mask_inf (causal mask) and soft_max (with scale, mask and ALiBi), and
// their gradients diag_mask_zero and soft_max_back.
//
// soft_max of a row x with mask row m and head slope s: y = softmax(x * scale + s * m).
// Entries at -inf give 0. A row that is -inf everywhere has no defined softmax (ggml yields NaN
// or garbage there); we define it as all zeros, so a fully masked row contributes nothing.
// The exponential is the shared vectorized one (about 1 ulp), and the row sum is accumulated in
// double in a fixed order, so a row gives the same bits whichever thread computes it. The row
// max and the F16 mask come from the build's table (kernels.h).

#include "cpu-ops.h"
#include "ops-common.h"
#include "softmax-row.h"

#include <math.h>
#include <string.h>
#include <stdint.h>

namespace ggml_softmax_row {

// w[i] = exp(w[i] - max) for i < n, with the shared vectorized exp (ops-common.h); returns the
// sum of the new w[i] (row_sum).
double exp_sub_max_sum(float * w, int64_t n, float max) {
    if (ggml_cpu()->exp_sub_max_sum) return ggml_cpu()->exp_sub_max_sum(w, n, max);
    for (int64_t i = 0; i < n; i++) w[i] -= max;
    ggml_cpu_vec_exp_f32(w, w, n);
    return row_sum(n, [w](int64_t i) { return (double) w[i]; });
}

float logits_max(float * w, const float * x, const void * mask, bool mask_f16, float scale, float slope, int64_t n) {
    if (ggml_cpu()->soft_max_logits) return ggml_cpu()->soft_max_logits(w, x, mask, mask_f16, scale, slope, n);
    for (int64_t i = 0; i < n; i++) w[i] = x[i] * scale;
    if (mask && mask_f16) {
        add_mask_f16(w, (const ggml_fp16_t *) mask, n, slope);
    } else if (mask) {
        const float * mf = (const float *) mask;
        for (int64_t i = 0; i < n; i++) w[i] = fmaf(slope, mf[i], w[i]);  // one rounding, as add_mask_f16
    }
    return row_max(w, n);
}

float alibi_slope(uint32_t h, uint32_t n_head, float max_bias) {
    if (max_bias <= 0.0f) return 1.0f;
    const uint32_t n_head_log2 = n_head > 0 ? 1u << (uint32_t) floor(log2((double) n_head)) : 1u;
    const float m0 = powf(2.0f, -max_bias / (float) n_head_log2);
    const float m1 = powf(2.0f, -(max_bias / 2.0f) / (float) n_head_log2);
    return h < n_head_log2 ? powf(m0, (float) (h + 1)) : powf(m1, (float) (2 * (h - n_head_log2) + 1));
}

}  // namespace ggml_softmax_row

namespace {

using namespace ggml_softmax_row;

constexpr size_t kBufAlign = 64;

// Bytes of one thread's row buffer: a multiple of kBufAlign so every thread's buffer has the
// same alignment.
size_t soft_max_row_bytes(int64_t ne0) {
    return ((size_t) ne0 * sizeof(float) + kBufAlign - 1) / kBufAlign * kBufAlign;
}

}  // namespace

extern "C" size_t ggml_cpu_soft_max_work_size(const ggml_tensor * node, int n_threads) {
    return kBufAlign + (size_t) n_threads * soft_max_row_bytes(node->ne[0]);
}

namespace {

// dst = src with columns i0 > n_past + i1 set to fill (-inf: diag_mask_inf; 0: diag_mask_zero,
// its gradient). In place (dst over src) the kept columns are left as they are.
void diag_mask(const ggml_compute_params * params, ggml_tensor * dst, float fill) {
    const ggml_tensor * src = dst->src[0];
    GGML_ASSERT(src != nullptr);
    GGML_ASSERT(src->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F32);
    GGML_ASSERT(ggml_are_same_shape(src, dst));
    const int64_t n_past = ggml_get_op_params_i32(dst, 0);
    const int64_t ne0 = dst->ne[0];

    ggml_cpu_for_own_rows(params, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
        const char * x = ggml_cpu_elem_ptr(src, 0, i1, i2, i3);
        char * y = ggml_cpu_elem_ptr(dst, 0, i1, i2, i3);
        // Columns i0 > n_past + i1 are masked; clamp the boundary into [0, ne0].
        int64_t keep = n_past + i1 + 1;
        keep = keep < 0 ? 0 : (keep > ne0 ? ne0 : keep);
        if (x != y || src->nb[0] != dst->nb[0]) {
            for (int64_t i0 = 0; i0 < keep; i0++) *(float *) (y + i0 * dst->nb[0]) = *(const float *) (x + i0 * src->nb[0]);
        }
        for (int64_t i0 = keep; i0 < ne0; i0++) *(float *) (y + i0 * dst->nb[0]) = fill;
    });
}

}  // namespace

extern "C" void ggml_cpu_forward_diag_mask_inf(const ggml_compute_params * params, ggml_tensor * dst) {
    diag_mask(params, dst, -INFINITY);
}

namespace {

// Checks soft_max's operands (once per node).
void soft_max_check(const ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    const ggml_tensor * mask = dst->src[1];
    GGML_ASSERT(src != nullptr);
    GGML_ASSERT(src->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F32);
    GGML_ASSERT(ggml_are_same_shape(src, dst));
    if (mask) {
        GGML_ASSERT(mask->type == GGML_TYPE_F32 || mask->type == GGML_TYPE_F16);
        GGML_ASSERT(mask->ne[0] == dst->ne[0] && mask->ne[1] >= dst->ne[1]);
        GGML_ASSERT(mask->ne[2] > 0 && dst->ne[2] % mask->ne[2] == 0 && mask->ne[3] > 0 && dst->ne[3] % mask->ne[3] == 0);
        GGML_ASSERT(mask->nb[0] == ggml_type_size(mask->type));
    }
}

// Row (i1, i2, i3) of soft_max, through the row buffer w (ne0 floats), to y (NULL: dst's row).
// n (< ne0): the row's logits from n on are masked (-inf): they are not read, and their zeros
// are written without an exp; the sums by position (row_sum) are the whole row's bits.
void soft_max_row(const ggml_tensor * dst, float * w, int64_t i1, int64_t i2, int64_t i3, char * y = nullptr, int64_t n = -1) {
    const ggml_tensor * src = dst->src[0];
    const ggml_tensor * mask = dst->src[1];
    const int64_t ne0 = n >= 0 && n < dst->ne[0] ? n : dst->ne[0], ne2 = dst->ne[2];
    const float scale = ggml_get_op_params_f32(dst, 0);
    const float max_bias = ggml_get_op_params_f32(dst, 1);

    const char * x = ggml_cpu_elem_ptr(src, 0, i1, i2, i3);
    const float slope = mask ? alibi_slope((uint32_t) i2, (uint32_t) ne2, max_bias) : 1.0f;
    const char * m = mask ? ggml_cpu_elem_ptr(mask, 0, i1, i2 % mask->ne[2], i3 % mask->ne[3]) : nullptr;
    const float * xf = (const float *) x;
    if (src->nb[0] != sizeof(float)) {  // gathered into w first (x * scale is the same product there)
        for (int64_t i = 0; i < ne0; i++) w[i] = *(const float *) (x + i * src->nb[0]);
        xf = w;
    }
    const float max = logits_max(w, xf, m, mask && mask->type == GGML_TYPE_F16, scale, slope, ne0);

    if (!y) y = ggml_cpu_elem_ptr(dst, 0, i1, i2, i3);
    if (dst->nb[0] == sizeof(float)) {  // masked past n
        memset(y + ne0 * sizeof(float), 0, (size_t) (dst->ne[0] - ne0) * sizeof(float));
    } else {
        for (int64_t i = ne0; i < dst->ne[0]; i++) *(float *) (y + i * dst->nb[0]) = 0.0f;
    }
    if (max == -INFINITY) {
        // Fully masked row: defined as zeros (see the top of the file).
        for (int64_t i = 0; i < ne0; i++) *(float *) (y + i * dst->nb[0]) = 0.0f;
        return;
    }
    const double sum = exp_sub_max_sum(w, ne0, max);
    const float inv_sum = (float) (1.0 / sum);
    if (dst->nb[0] == sizeof(float)) {
        float * yf = (float *) y;
        for (int64_t i = 0; i < ne0; i++) yf[i] = w[i] * inv_sum;
    } else {
        for (int64_t i = 0; i < ne0; i++) *(float *) (y + i * dst->nb[0]) = w[i] * inv_sum;
    }
}

}  // namespace

extern "C" void ggml_cpu_forward_soft_max(const ggml_compute_params * params, ggml_tensor * dst) {
    soft_max_check(dst);
    const size_t row_bytes = soft_max_row_bytes(dst->ne[0]);
    GGML_ASSERT(params->wdata != nullptr || dst->ne[0] == 0);
    GGML_ASSERT(params->wsize >= kBufAlign + (size_t) params->nth * row_bytes);
    const uintptr_t base = ((uintptr_t) params->wdata + kBufAlign - 1) / kBufAlign * kBufAlign;
    float * w = (float *) (base + (size_t) params->ith * row_bytes);
    ggml_cpu_for_own_rows(params, dst, [&](int64_t i1, int64_t i2, int64_t i3) { soft_max_row(dst, w, i1, i2, i3); });
}

extern "C" size_t ggml_cpu_soft_max_plane_work_size(const ggml_tensor * node) { return kBufAlign + soft_max_row_bytes(node->ne[0]); }

extern "C" void ggml_cpu_soft_max_plane(ggml_tensor * dst, int64_t i2, int64_t i3, void * work, float * out, int64_t r0,
                                        int64_t r1, const int32_t * lim) {
    soft_max_check(dst);
    float * w = (float *) (((uintptr_t) work + kBufAlign - 1) / kBufAlign * kBufAlign);
    for (int64_t i1 = r0; i1 < r1; i1++) {
        soft_max_row(dst, w, i1, i2, i3, out ? (char *) out + i1 * dst->nb[1] : nullptr, lim ? lim[i1] : -1);
    }
}

extern "C" void ggml_cpu_forward_diag_mask_zero(const ggml_compute_params * params, ggml_tensor * dst) {
    diag_mask(params, dst, 0.0f);
}

// Gradient of y = soft_max(x * scale + mask) with respect to x, per row:
// dx = scale * y * (g - sum(g * y)); src0 g, src1 y (F32, any strides). The mask and ALiBi
// slope only shift the logits, so max_bias does not enter. The dot is a row_sum, so a row
// gives the same bits on any thread.
extern "C" void ggml_cpu_forward_soft_max_back(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * grad = dst->src[0];
    const ggml_tensor * y = dst->src[1];
    GGML_ASSERT(grad != nullptr && y != nullptr);
    GGML_ASSERT(grad->type == GGML_TYPE_F32 && y->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F32);
    GGML_ASSERT(ggml_are_same_shape(grad, dst) && ggml_are_same_shape(y, dst));
    const double scale = (double) ggml_get_op_params_f32(dst, 0);
    const int64_t ne0 = dst->ne[0];

    ggml_cpu_for_own_rows(params, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
        const char * g = ggml_cpu_elem_ptr(grad, 0, i1, i2, i3);
        const char * yr = ggml_cpu_elem_ptr(y, 0, i1, i2, i3);
        char * d = ggml_cpu_elem_ptr(dst, 0, i1, i2, i3);
        auto gi = [&](int64_t i) { return (double) *(const float *) (g + i * grad->nb[0]); };
        auto yi = [&](int64_t i) { return (double) *(const float *) (yr + i * y->nb[0]); };

        const double dot = row_sum(ne0, [&](int64_t i) { return gi(i) * yi(i); });

        for (int64_t j = 0; j < ne0; j++) {
            *(float *) (d + j * dst->nb[0]) = (float) (scale * yi(j) * (gi(j) - dot));
        }
    });
}
