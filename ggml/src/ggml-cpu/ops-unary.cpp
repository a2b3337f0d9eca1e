// ops-unary.cpp - GGML_OP_UNARY kernels (abs, sgn, neg, step, tanh, relu, sigmoid, gelu, silu,
// exp, gelu_erf) and unary_back (grad * f'(x) for each of them).
//
// The exponentials come from the build's table (kernels.h: vec_exp, vec_silu, vec_sigmoid,
// vec_gelu), every instruction set running the steps of vec-math.h.
#include "kernels.h"
#include "ops-common.h"
#include "vec-math.h"

#include <math.h>
#include <string.h>

namespace {

using namespace ggml_vec_math;

// y[i] = K(x[i]) with the build's row kernel; y may equal x.
template <ExpKind K> void vec_apply(float * y, const float * x, int64_t n) {
    const ggml_cpu_kernels * k = ggml_cpu();
    (K == ExpKind::exp ? k->vec_exp : K == ExpKind::silu ? k->vec_silu : K == ExpKind::sigmoid ? k->vec_sigmoid : k->vec_gelu)(y, x, n);
}

}  // namespace

extern "C" float ggml_cpu_exp_f32(float x) { return exp_scalar(x); }
extern "C" void ggml_cpu_vec_exp_f32    (float * y, const float * x, int64_t n) { vec_apply<ExpKind::exp>(y, x, n); }
extern "C" void ggml_cpu_vec_silu_f32   (float * y, const float * x, int64_t n) { vec_apply<ExpKind::silu>(y, x, n); }
extern "C" void ggml_cpu_vec_sigmoid_f32(float * y, const float * x, int64_t n) { vec_apply<ExpKind::sigmoid>(y, x, n); }

void ggml_cpu_forward_unary(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const struct ggml_tensor * src = dst->src[0];
    GGML_ASSERT(src != NULL);
    GGML_ASSERT(dst->type == src->type);

    const enum ggml_unary_op op = (enum ggml_unary_op) ggml_get_op_params_i32(dst, 0);
    switch (op) {
        case GGML_UNARY_OP_ABS:
            ggml_cpu_map_rows_f32(params, dst, src, [](float * y, const float * x, int64_t n) {
                for (int64_t i = 0; i < n; i++) y[i] = fabsf(x[i]);
            });
            break;
        case GGML_UNARY_OP_SGN:
            ggml_cpu_map_rows_f32(params, dst, src, [](float * y, const float * x, int64_t n) {
                for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? 1.0f : (x[i] < 0.0f ? -1.0f : 0.0f);
            });
            break;
        case GGML_UNARY_OP_NEG:
            ggml_cpu_map_rows_f32(params, dst, src, [](float * y, const float * x, int64_t n) {
                for (int64_t i = 0; i < n; i++) y[i] = -x[i];
            });
            break;
        case GGML_UNARY_OP_STEP:
            ggml_cpu_map_rows_f32(params, dst, src, [](float * y, const float * x, int64_t n) {
                for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? 1.0f : 0.0f;
            });
            break;
        case GGML_UNARY_OP_TANH:
            // not hot in llama models: libm's tanhf keeps full relative accuracy near 0
            ggml_cpu_map_rows_f32(params, dst, src, [](float * y, const float * x, int64_t n) {
                for (int64_t i = 0; i < n; i++) y[i] = tanhf(x[i]);
            });
            break;
        case GGML_UNARY_OP_RELU:
            ggml_cpu_map_rows_f32(params, dst, src, [](float * y, const float * x, int64_t n) {
                for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
            });
            break;
        case GGML_UNARY_OP_SIGMOID: ggml_cpu_map_rows_f32(params, dst, src, vec_apply<ExpKind::sigmoid>); break;
        case GGML_UNARY_OP_GELU:    ggml_cpu_map_rows_f32(params, dst, src, vec_apply<ExpKind::gelu>);    break;
        case GGML_UNARY_OP_SILU:    ggml_cpu_map_rows_f32(params, dst, src, vec_apply<ExpKind::silu>);    break;
        case GGML_UNARY_OP_EXP:     ggml_cpu_map_rows_f32(params, dst, src, vec_apply<ExpKind::exp>);     break;
        case GGML_UNARY_OP_GELU_ERF:
            // BERT's exact GELU: not hot enough (one FFN activation) for a vectorized erf
            ggml_cpu_map_rows_f32(params, dst, src, [](float * y, const float * x, int64_t n) {
                for (int64_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * erfcf(-x[i] * 0.70710678118654752f);
            });
            break;
        default:
            GGML_ABORT("ggml_cpu_forward_unary: unknown unary op %d", (int) op);
    }
}

// ---- unary_back: grad * f'(x) ------------------------------------------------------------------
namespace {

// sigmoid(w) and 1 - sigmoid(w) from e = exp(-|w|), each without cancellation.
inline void sigmoid_pair(float w, float e, float * s, float * sm) {
    const float inv = 1.0f / (1.0f + e);
    *s  = (w >= 0.0f ? 1.0f : e) * inv;
    *sm = (w >= 0.0f ? e : 1.0f) * inv;
}

// d[i] = g[i] * f'(x[i]) for n <= GGML_CPU_CHUNK elements; t is scratch. The exponentials go
// through the vectorized exp, whose value for an element does not depend on its position.
void unary_back_chunk(ggml_unary_op op, float * d, const float * g, const float * x, float * t, int64_t n) {
    switch (op) {
        case GGML_UNARY_OP_ABS:
            for (int64_t i = 0; i < n; i++) d[i] = x[i] > 0.0f ? g[i] : (x[i] < 0.0f ? -g[i] : 0.0f);
            break;
        case GGML_UNARY_OP_SGN:
        case GGML_UNARY_OP_STEP:
            for (int64_t i = 0; i < n; i++) d[i] = 0.0f;
            break;
        case GGML_UNARY_OP_NEG:
            for (int64_t i = 0; i < n; i++) d[i] = -g[i];
            break;
        case GGML_UNARY_OP_RELU:
            for (int64_t i = 0; i < n; i++) d[i] = x[i] > 0.0f ? g[i] : 0.0f;
            break;
        case GGML_UNARY_OP_TANH:
            // 1 - tanh(x)^2 = 4e / (1 + e)^2 with e = exp(-2|x|): no cancellation for large |x|
            for (int64_t i = 0; i < n; i++) t[i] = -2.0f * fabsf(x[i]);
            vec_apply<ExpKind::exp>(t, t, n);
            for (int64_t i = 0; i < n; i++) d[i] = g[i] * (4.0f * t[i] / ((1.0f + t[i]) * (1.0f + t[i])));
            break;
        case GGML_UNARY_OP_SIGMOID:
            // s (1 - s) = e / (1 + e)^2 with e = exp(-|x|)
            for (int64_t i = 0; i < n; i++) t[i] = -fabsf(x[i]);
            vec_apply<ExpKind::exp>(t, t, n);
            for (int64_t i = 0; i < n; i++) d[i] = g[i] * (t[i] / ((1.0f + t[i]) * (1.0f + t[i])));
            break;
        case GGML_UNARY_OP_SILU:
            // s (1 + x (1 - s)), s = sigmoid(x)
            for (int64_t i = 0; i < n; i++) t[i] = -fabsf(x[i]);
            vec_apply<ExpKind::exp>(t, t, n);
            for (int64_t i = 0; i < n; i++) {
                float s, sm;
                sigmoid_pair(x[i], t[i], &s, &sm);
                d[i] = g[i] * (s * (1.0f + x[i] * sm));
            }
            break;
        case GGML_UNARY_OP_GELU:
            // the forward is x s(w) with w = -x (GELU_A + GELU_B x^2), so the derivative is
            // s(w) (1 + x (1 - s(w)) w'), w' = -(GELU_A + 3 GELU_B x^2)
            for (int64_t i = 0; i < n; i++) t[i] = -fabsf(-x[i] * fma_f32(GELU_B, x[i] * x[i], GELU_A));
            vec_apply<ExpKind::exp>(t, t, n);
            for (int64_t i = 0; i < n; i++) {
                const float w = -x[i] * fma_f32(GELU_B, x[i] * x[i], GELU_A);
                const float wp = -fma_f32(3.0f * GELU_B, x[i] * x[i], GELU_A);
                float s, sm;
                sigmoid_pair(w, t[i], &s, &sm);
                d[i] = g[i] * (s * (1.0f + x[i] * sm * wp));
            }
            break;
        case GGML_UNARY_OP_EXP:
            vec_apply<ExpKind::exp>(t, x, n);
            for (int64_t i = 0; i < n; i++) d[i] = g[i] * t[i];
            break;
        case GGML_UNARY_OP_GELU_ERF:
            // Phi(x) + x phi(x)
            for (int64_t i = 0; i < n; i++) {
                const float cdf = 0.5f * erfcf(-x[i] * 0.70710678118654752f);  // erfc: no cancellation for x < 0
                const float pdf = 0.39894228040143268f * expf(-0.5f * x[i] * x[i]);
                d[i] = g[i] * (cdf + x[i] * pdf);
            }
            break;
        default:
            GGML_ABORT("unary_back: unknown unary op %d", (int) op);
    }
}

}  // namespace

// src0 grad, src1 x (F32/F16/BF16, any strides, same shape) -> dst F32 = grad * f'(x). Rows
// are split across threads and processed in chunks; each element's value depends only on its
// own grad and x.
extern "C" void ggml_cpu_forward_unary_back(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * grad = dst->src[0];
    const ggml_tensor * x = dst->src[1];
    GGML_ASSERT(grad != nullptr && x != nullptr);
    GGML_ASSERT(ggml_cpu_is_float_type(grad->type) && ggml_cpu_is_float_type(x->type) && dst->type == GGML_TYPE_F32);
    GGML_ASSERT(ggml_are_same_shape(grad, dst) && ggml_are_same_shape(x, dst));
    const ggml_unary_op op = (ggml_unary_op) ggml_get_op_params_i32(dst, 0);
    GGML_ASSERT(op >= 0 && op < GGML_UNARY_OP_COUNT && "unary_back: unknown unary op");

    const int64_t ne0 = dst->ne[0];
    float gb[GGML_CPU_CHUNK], xb[GGML_CPU_CHUNK], tb[GGML_CPU_CHUNK], db[GGML_CPU_CHUNK];
    ggml_cpu_for_own_rows(params, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
        const char * gr = ggml_cpu_elem_ptr(grad, 0, i1, i2, i3);
        const char * xr = ggml_cpu_elem_ptr(x, 0, i1, i2, i3);
        char * yr = ggml_cpu_elem_ptr(dst, 0, i1, i2, i3);
        for (int64_t c = 0; c < ne0; c += GGML_CPU_CHUNK) {
            const int64_t n = ne0 - c < GGML_CPU_CHUNK ? ne0 - c : GGML_CPU_CHUNK;
            ggml_cpu_gather_f32(grad->type, gr + c * grad->nb[0], grad->nb[0], gb, n);
            ggml_cpu_gather_f32(x->type, xr + c * x->nb[0], x->nb[0], xb, n);
            unary_back_chunk(op, db, gb, xb, tb, n);
            ggml_cpu_scatter_f32(GGML_TYPE_F32, db, yr + c * dst->nb[0], dst->nb[0], n);
        }
    });
}
