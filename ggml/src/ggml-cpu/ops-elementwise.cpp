// ops-elementwise.cpp - binary ops with src1 broadcast (add, sub, mul, div, add1) and the simple
// per-element ops scale, sqr, sqrt, log.
//
// Binary ops: dst[i0, i1, i2, i3] = src0[...] op src1[i0 % ne10, i1 % ne11, i2 % ne12, i3 % ne13].
// All-F32 rows with unit stride run the op straight on the tensors' memory (plain loops the
// compiler vectorizes); anything else (F16/BF16, strided rows) goes through float chunks on
// the stack. In-place ops (dst == src0) read and write each element at the same address.
#include "ops-common.h"

#include <math.h>

namespace {

struct OpAdd { static float apply(float a, float b) { return a + b; } };
struct OpSub { static float apply(float a, float b) { return a - b; } };
struct OpMul { static float apply(float a, float b) { return a * b; } };
struct OpDiv { static float apply(float a, float b) { return a / b; } };

// d may equal a (in-place); the plain loops let the compiler vectorize with its own alias checks.
template <typename Op>
void vec_binary(float * d, const float * a, const float * b, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = Op::apply(a[i], b[i]);
}

template <typename Op>
void vec_binary_scalar(float * d, const float * a, float b, int64_t n) {
    for (int64_t i = 0; i < n; i++) d[i] = Op::apply(a[i], b);
}

template <typename Op>
void forward_binary(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const struct ggml_tensor * src0 = dst->src[0];
    const struct ggml_tensor * src1 = dst->src[1];
    GGML_ASSERT(src0 != NULL && src1 != NULL);
    GGML_ASSERT(ggml_are_same_shape(src0, dst));
    GGML_ASSERT(ggml_can_repeat(src1, src0));
    GGML_ASSERT(ggml_cpu_is_float_type(src0->type) && dst->type == src0->type);
    GGML_ASSERT(ggml_cpu_is_float_type(src1->type));  // usually F32 or src0's type; any works

    const int64_t ne00 = src0->ne[0], ne01 = src0->ne[1], ne02 = src0->ne[2];
    const int64_t ne10 = src1->ne[0], ne11 = src1->ne[1], ne12 = src1->ne[2], ne13 = src1->ne[3];
    const size_t nb00 = src0->nb[0], nb10 = src1->nb[0], nb0 = dst->nb[0];

    const bool direct = src0->type == GGML_TYPE_F32 && src1->type == GGML_TYPE_F32 &&
                        nb00 == sizeof(float) && nb10 == sizeof(float) && nb0 == sizeof(float);

    int64_t r0, r1;
    ggml_cpu_split_rows(ggml_nrows(dst), params->ith, params->nth, &r0, &r1);

    float buf0[GGML_CPU_CHUNK];
    float buf1[GGML_CPU_CHUNK];
    for (int64_t r = r0; r < r1; r++) {
        const int64_t i1 = r % ne01, i2 = (r / ne01) % ne02, i3 = r / (ne01 * ne02);
        const char * a = ggml_cpu_elem_ptr(src0, 0, i1, i2, i3);
        const char * b = ggml_cpu_elem_ptr(src1, 0, i1 % ne11, i2 % ne12, i3 % ne13);
        char * d = ggml_cpu_elem_ptr(dst, 0, i1, i2, i3);

        if (direct) {
            const float * af = (const float *) a;
            const float * bf = (const float *) b;
            float * df = (float *) d;
            if (ne10 == ne00) {
                vec_binary<Op>(df, af, bf, ne00);
            } else if (ne10 == 1) {
                vec_binary_scalar<Op>(df, af, bf[0], ne00);
            } else {
                for (int64_t k = 0; k < ne00; k += ne10) vec_binary<Op>(df + k, af + k, bf, ne10);
            }
            continue;
        }

        const float b_scalar = ne10 == 1 ? ggml_cpu_load_f32(src1->type, b) : 0.0f;
        for (int64_t c = 0; c < ne00; c += GGML_CPU_CHUNK) {
            const int64_t n = ne00 - c < GGML_CPU_CHUNK ? ne00 - c : GGML_CPU_CHUNK;
            ggml_cpu_gather_f32(src0->type, a + c * nb00, nb00, buf0, n);
            if (ne10 == 1) {
                vec_binary_scalar<Op>(buf0, buf0, b_scalar, n);
            } else {
                if (ne10 == ne00) {
                    ggml_cpu_gather_f32(src1->type, b + c * nb10, nb10, buf1, n);
                } else {
                    for (int64_t j = 0; j < n; j++) buf1[j] = ggml_cpu_load_f32(src1->type, b + ((c + j) % ne10) * nb10);
                }
                vec_binary<Op>(buf0, buf0, buf1, n);
            }
            ggml_cpu_scatter_f32(dst->type, buf0, d + c * nb0, nb0, n);
        }
    }
}

}  // namespace

void ggml_cpu_forward_add(const struct ggml_compute_params * params, struct ggml_tensor * dst) { forward_binary<OpAdd>(params, dst); }
void ggml_cpu_forward_sub(const struct ggml_compute_params * params, struct ggml_tensor * dst) { forward_binary<OpSub>(params, dst); }
void ggml_cpu_forward_mul(const struct ggml_compute_params * params, struct ggml_tensor * dst) { forward_binary<OpMul>(params, dst); }
void ggml_cpu_forward_div(const struct ggml_compute_params * params, struct ggml_tensor * dst) { forward_binary<OpDiv>(params, dst); }

// src1 is a single element: the general broadcast covers it.
void ggml_cpu_forward_add1(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    GGML_ASSERT(ggml_is_scalar(dst->src[1]));
    forward_binary<OpAdd>(params, dst);
}

void ggml_cpu_forward_scale(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const float s = ggml_get_op_params_f32(dst, 0);
    ggml_cpu_map_rows_f32(params, dst, dst->src[0], [s](float * y, const float * x, int64_t n) {
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * s;
    });
}

void ggml_cpu_forward_sqr(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    ggml_cpu_map_rows_f32(params, dst, dst->src[0], [](float * y, const float * x, int64_t n) {
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * x[i];
    });
}

void ggml_cpu_forward_sqrt(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    ggml_cpu_map_rows_f32(params, dst, dst->src[0], [](float * y, const float * x, int64_t n) {
        for (int64_t i = 0; i < n; i++) y[i] = sqrtf(x[i]);
    });
}

void ggml_cpu_forward_log(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    ggml_cpu_map_rows_f32(params, dst, dst->src[0], [](float * y, const float * x, int64_t n) {
        for (int64_t i = 0; i < n; i++) y[i] = logf(x[i]);
    });
}
