// ggml-ops.cpp - op builders: each checks the shapes and types of its operands, creates the
// result tensor (or a view for in-place and layout ops) and records op, params and sources.
// Nothing is computed here; the CPU kernels in cpu/ do that when a graph runs.
#include "ggml-backward.h"

#include <stdio.h>
#include <string.h>

#include <initializer_list>

struct ggml_tensor * ggml_new_view_impl(struct ggml_context * ctx, struct ggml_tensor * src, int n_dims,
                                        const int64_t * ne, size_t offset);

struct ggml_tensor * ggml_new_view_as_impl(struct ggml_context * ctx, struct ggml_tensor * src, enum ggml_type type, int n_dims,
                                           const int64_t * ne, size_t offset);

struct ggml_tensor * ggml_view_tensor(struct ggml_context * ctx, struct ggml_tensor * src) {
    ggml_tensor * r = ggml_new_view_impl(ctx, src, GGML_MAX_DIMS, src->ne, 0);
    ggml_format_name(r, "%.58s (view)", src->name);
    for (int i = 0; i < GGML_MAX_DIMS; i++) r->nb[i] = src->nb[i];
    return r;
}

// The result of an op on a: a new tensor of a's type and shape, or a view of a for in-place ops.
static ggml_tensor * result_like(ggml_context * ctx, ggml_tensor * a, bool inplace) {
    return inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
}

static ggml_tensor * unary_like(ggml_context * ctx, ggml_tensor * a, ggml_op op, bool inplace) {
    ggml_tensor * r = result_like(ctx, a, inplace);
    r->op = op;
    r->src[0] = a;
    return r;
}

// ---- elementwise ---------------------------------------------------------------------------
static ggml_tensor * binary_op(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_op op, bool inplace) {
    GGML_ASSERT(ggml_can_repeat(b, a) && "second operand must broadcast to the first");
    ggml_tensor * r = result_like(ctx, a, inplace);
    r->op = op;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

struct ggml_tensor * ggml_dup(struct ggml_context * ctx, struct ggml_tensor * a) { return unary_like(ctx, a, GGML_OP_DUP, false); }
struct ggml_tensor * ggml_dup_inplace(struct ggml_context * ctx, struct ggml_tensor * a) { return unary_like(ctx, a, GGML_OP_DUP, true); }

struct ggml_tensor * ggml_add(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) { return binary_op(ctx, a, b, GGML_OP_ADD, false); }
struct ggml_tensor * ggml_add_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) { return binary_op(ctx, a, b, GGML_OP_ADD, true); }
struct ggml_tensor * ggml_sub(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) { return binary_op(ctx, a, b, GGML_OP_SUB, false); }
struct ggml_tensor * ggml_sub_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) { return binary_op(ctx, a, b, GGML_OP_SUB, true); }
struct ggml_tensor * ggml_mul(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) { return binary_op(ctx, a, b, GGML_OP_MUL, false); }
struct ggml_tensor * ggml_mul_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) { return binary_op(ctx, a, b, GGML_OP_MUL, true); }
struct ggml_tensor * ggml_div(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) { return binary_op(ctx, a, b, GGML_OP_DIV, false); }
struct ggml_tensor * ggml_div_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) { return binary_op(ctx, a, b, GGML_OP_DIV, true); }

static ggml_tensor * add1_impl(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, bool inplace) {
    GGML_ASSERT(ggml_is_scalar(b) && "add1 takes a scalar second operand");
    ggml_tensor * r = result_like(ctx, a, inplace);
    r->op = GGML_OP_ADD1;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}
struct ggml_tensor * ggml_add1(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) { return add1_impl(ctx, a, b, false); }
struct ggml_tensor * ggml_add1_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) { return add1_impl(ctx, a, b, true); }

static ggml_tensor * scale_impl(ggml_context * ctx, ggml_tensor * a, float s, bool inplace) {
    ggml_tensor * r = unary_like(ctx, a, GGML_OP_SCALE, inplace);
    ggml_set_op_params_f32(r, 0, s);
    return r;
}
struct ggml_tensor * ggml_scale(struct ggml_context * ctx, struct ggml_tensor * a, float s) { return scale_impl(ctx, a, s, false); }
struct ggml_tensor * ggml_scale_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float s) { return scale_impl(ctx, a, s, true); }

struct ggml_tensor * ggml_sqr(struct ggml_context * ctx, struct ggml_tensor * a) { return unary_like(ctx, a, GGML_OP_SQR, false); }
struct ggml_tensor * ggml_sqr_inplace(struct ggml_context * ctx, struct ggml_tensor * a) { return unary_like(ctx, a, GGML_OP_SQR, true); }
struct ggml_tensor * ggml_sqrt(struct ggml_context * ctx, struct ggml_tensor * a) { return unary_like(ctx, a, GGML_OP_SQRT, false); }
struct ggml_tensor * ggml_sqrt_inplace(struct ggml_context * ctx, struct ggml_tensor * a) { return unary_like(ctx, a, GGML_OP_SQRT, true); }
struct ggml_tensor * ggml_log(struct ggml_context * ctx, struct ggml_tensor * a) { return unary_like(ctx, a, GGML_OP_LOG, false); }
struct ggml_tensor * ggml_log_inplace(struct ggml_context * ctx, struct ggml_tensor * a) { return unary_like(ctx, a, GGML_OP_LOG, true); }

// Backward rules of the elementwise ops. b broadcasts over a, so b's gradient is summed back.
GGML_BACKWARD_RULE(dup) {
    if (ggml_bw_needs(bw, node->src[0])) ggml_bw_add(bw, node->src[0], grad);
}
GGML_BACKWARD_RULE(add) {
    ggml_tensor * a = node->src[0], * b = node->src[1];
    if (ggml_bw_needs(bw, a)) ggml_bw_add(bw, a, grad);
    if (ggml_bw_needs(bw, b)) ggml_bw_add(bw, b, ggml_bw_reduce_to(bw, grad, b));
}
GGML_BACKWARD_RULE(sub) {
    ggml_tensor * a = node->src[0], * b = node->src[1];
    if (ggml_bw_needs(bw, a)) ggml_bw_add(bw, a, grad);
    if (ggml_bw_needs(bw, b)) ggml_bw_add(bw, b, ggml_neg(ggml_bw_ctx(bw), ggml_bw_reduce_to(bw, grad, b)));
}
GGML_BACKWARD_RULE(mul) {
    ggml_context * ctx = ggml_bw_ctx(bw);
    ggml_tensor * a = node->src[0], * b = node->src[1];
    if (ggml_bw_needs(bw, a)) ggml_bw_add(bw, a, ggml_mul(ctx, grad, b));
    if (ggml_bw_needs(bw, b)) ggml_bw_add(bw, b, ggml_bw_reduce_to(bw, ggml_mul(ctx, grad, a), b));
}
GGML_BACKWARD_RULE(div) {  // y = a / b: dy/da = 1 / b, dy/db = -y / b
    ggml_context * ctx = ggml_bw_ctx(bw);
    ggml_tensor * a = node->src[0], * b = node->src[1];
    if (ggml_bw_needs(bw, a)) ggml_bw_add(bw, a, ggml_div(ctx, grad, b));
    if (ggml_bw_needs(bw, b)) {
        ggml_bw_add(bw, b, ggml_neg(ctx, ggml_bw_reduce_to(bw, ggml_div(ctx, ggml_mul(ctx, grad, node), b), b)));
    }
}
GGML_BACKWARD_RULE(add1) {
    ggml_tensor * a = node->src[0], * b = node->src[1];
    if (ggml_bw_needs(bw, a)) ggml_bw_add(bw, a, grad);
    if (ggml_bw_needs(bw, b)) ggml_bw_add(bw, b, ggml_reshape(ggml_bw_ctx(bw), ggml_sum(ggml_bw_ctx(bw), grad), b));
}
GGML_BACKWARD_RULE(scale) {
    if (ggml_bw_needs(bw, node->src[0])) ggml_bw_add(bw, node->src[0], ggml_scale(ggml_bw_ctx(bw), grad, ggml_get_op_params_f32(node, 0)));
}
GGML_BACKWARD_RULE(sqr) {  // d(x^2) = 2x
    ggml_context * ctx = ggml_bw_ctx(bw);
    if (ggml_bw_needs(bw, node->src[0])) ggml_bw_add(bw, node->src[0], ggml_scale(ctx, ggml_mul(ctx, grad, node->src[0]), 2.0f));
}
GGML_BACKWARD_RULE(sqrt) {  // d(sqrt x) = 0.5 / sqrt x
    ggml_context * ctx = ggml_bw_ctx(bw);
    if (ggml_bw_needs(bw, node->src[0])) ggml_bw_add(bw, node->src[0], ggml_div(ctx, ggml_scale(ctx, grad, 0.5f), node));
}
GGML_BACKWARD_RULE(log) {
    if (ggml_bw_needs(bw, node->src[0])) ggml_bw_add(bw, node->src[0], ggml_div(ggml_bw_ctx(bw), grad, node->src[0]));
}

// ---- unary ---------------------------------------------------------------------------------
static ggml_tensor * unary_impl(ggml_context * ctx, ggml_tensor * a, ggml_unary_op op, bool inplace) {
    GGML_ASSERT(op >= 0 && op < GGML_UNARY_OP_COUNT);
    ggml_tensor * r = unary_like(ctx, a, GGML_OP_UNARY, inplace);
    ggml_set_op_params_i32(r, 0, (int32_t) op);
    return r;
}
struct ggml_tensor * ggml_unary(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_unary_op op) { return unary_impl(ctx, a, op, false); }
struct ggml_tensor * ggml_unary_inplace(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_unary_op op) { return unary_impl(ctx, a, op, true); }

#define UNARY_BUILDERS(name, OP) \
    struct ggml_tensor * ggml_##name(struct ggml_context * ctx, struct ggml_tensor * a) { return unary_impl(ctx, a, OP, false); } \
    struct ggml_tensor * ggml_##name##_inplace(struct ggml_context * ctx, struct ggml_tensor * a) { return unary_impl(ctx, a, OP, true); }
UNARY_BUILDERS(abs, GGML_UNARY_OP_ABS)
UNARY_BUILDERS(sgn, GGML_UNARY_OP_SGN)
UNARY_BUILDERS(neg, GGML_UNARY_OP_NEG)
UNARY_BUILDERS(step, GGML_UNARY_OP_STEP)
UNARY_BUILDERS(tanh, GGML_UNARY_OP_TANH)
UNARY_BUILDERS(relu, GGML_UNARY_OP_RELU)
UNARY_BUILDERS(sigmoid, GGML_UNARY_OP_SIGMOID)
UNARY_BUILDERS(gelu, GGML_UNARY_OP_GELU)
UNARY_BUILDERS(silu, GGML_UNARY_OP_SILU)
UNARY_BUILDERS(exp, GGML_UNARY_OP_EXP)
UNARY_BUILDERS(gelu_erf, GGML_UNARY_OP_GELU_ERF)
#undef UNARY_BUILDERS

// grad * f'(x) in one kernel for every unary op.
GGML_BACKWARD_RULE(unary) {
    if (ggml_bw_needs(bw, node->src[0])) {
        ggml_bw_add(bw, node->src[0], ggml_unary_back(ggml_bw_ctx(bw), grad, node->src[0], ggml_get_unary_op(node)));
    }
}

// ---- reductions ----------------------------------------------------------------------------
struct ggml_tensor * ggml_sum(struct ggml_context * ctx, struct ggml_tensor * a) {
    ggml_tensor * r = ggml_new_tensor_1d(ctx, a->type, 1);
    r->op = GGML_OP_SUM;
    r->src[0] = a;
    return r;
}
struct ggml_tensor * ggml_sum_rows(struct ggml_context * ctx, struct ggml_tensor * a) {
    ggml_tensor * r = ggml_new_tensor_4d(ctx, a->type, 1, a->ne[1], a->ne[2], a->ne[3]);
    r->op = GGML_OP_SUM_ROWS;
    r->src[0] = a;
    return r;
}
struct ggml_tensor * ggml_mean(struct ggml_context * ctx, struct ggml_tensor * a) {
    ggml_tensor * r = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 1, a->ne[1], a->ne[2], a->ne[3]);
    r->op = GGML_OP_MEAN;
    r->src[0] = a;
    return r;
}
struct ggml_tensor * ggml_argmax(struct ggml_context * ctx, struct ggml_tensor * a) {
    GGML_ASSERT(ggml_is_matrix(a) && "argmax takes a matrix");
    GGML_ASSERT(a->ne[0] <= INT32_MAX);
    ggml_tensor * r = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, a->ne[1]);
    r->op = GGML_OP_ARGMAX;
    r->src[0] = a;
    return r;
}

struct ggml_tensor * ggml_argsort(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_sort_order order) {
    GGML_ASSERT(a->type == GGML_TYPE_F32 && "argsort takes F32 values");
    GGML_ASSERT(a->ne[0] <= INT32_MAX);
    GGML_ASSERT((order == GGML_SORT_ORDER_ASC || order == GGML_SORT_ORDER_DESC) && "argsort: unknown order");
    ggml_tensor * r = ggml_new_tensor(ctx, GGML_TYPE_I32, GGML_MAX_DIMS, a->ne);
    r->op = GGML_OP_ARGSORT;
    r->src[0] = a;
    ggml_set_op_params_i32(r, 0, (int32_t) order);
    return r;
}

struct ggml_tensor * ggml_top_k(struct ggml_context * ctx, struct ggml_tensor * a, int k) {
    GGML_ASSERT(k > 0 && k <= a->ne[0] && "top_k: k must be in [1, row length]");
    ggml_tensor * s = ggml_argsort(ctx, a, GGML_SORT_ORDER_DESC);
    return ggml_view_4d(ctx, s, k, s->ne[1], s->ne[2], s->ne[3], s->nb[1], s->nb[2], s->nb[3], 0);
}

// Reductions spread their gradient back over what they summed.
GGML_BACKWARD_RULE(sum) {
    if (ggml_bw_needs(bw, node->src[0])) ggml_bw_add(bw, node->src[0], ggml_repeat(ggml_bw_ctx(bw), grad, node->src[0]));
}
GGML_BACKWARD_RULE(sum_rows) {
    if (ggml_bw_needs(bw, node->src[0])) ggml_bw_add(bw, node->src[0], ggml_repeat(ggml_bw_ctx(bw), grad, node->src[0]));
}
GGML_BACKWARD_RULE(mean) {
    ggml_context * ctx = ggml_bw_ctx(bw);
    ggml_tensor * a = node->src[0];
    if (ggml_bw_needs(bw, a)) ggml_bw_add(bw, a, ggml_scale(ctx, ggml_repeat(ctx, grad, a), 1.0f / (float) a->ne[0]));
}

// ---- shape ops -----------------------------------------------------------------------------
struct ggml_tensor * ggml_repeat(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) {
    GGML_ASSERT(ggml_can_repeat(a, b) && "repeat: a must tile b's shape");
    ggml_tensor * r = ggml_new_tensor(ctx, a->type, GGML_MAX_DIMS, b->ne);
    r->op = GGML_OP_REPEAT;
    r->src[0] = a;
    return r;
}

struct ggml_tensor * ggml_concat(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, int dim) {
    GGML_ASSERT(dim >= 0 && dim < GGML_MAX_DIMS);
    GGML_ASSERT(a->type == b->type);
    int64_t ne[GGML_MAX_DIMS];
    for (int d = 0; d < GGML_MAX_DIMS; d++) {
        if (d == dim) {
            ne[d] = a->ne[d] + b->ne[d];
            continue;
        }
        GGML_ASSERT(a->ne[d] == b->ne[d] && "concat: shapes differ outside the joined dimension");
        ne[d] = a->ne[d];
    }
    ggml_tensor * r = ggml_new_tensor(ctx, a->type, GGML_MAX_DIMS, ne);
    ggml_set_op_params_i32(r, 0, dim);
    r->op = GGML_OP_CONCAT;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

GGML_BACKWARD_RULE(repeat) {
    if (ggml_bw_needs(bw, node->src[0])) ggml_bw_add(bw, node->src[0], ggml_repeat_back(ggml_bw_ctx(bw), grad, node->src[0]));
}
// Each part gets its slice of the gradient.
GGML_BACKWARD_RULE(concat) {
    ggml_context * ctx = ggml_bw_ctx(bw);
    const int dim = ggml_get_op_params_i32(node, 0);
    for (int j = 0; j < 2; j++) {
        ggml_tensor * part = node->src[j];
        if (!ggml_bw_needs(bw, part)) continue;
        const size_t offset = j == 0 ? 0 : (size_t) node->src[0]->ne[dim] * grad->nb[dim];
        ggml_bw_add(bw, part, ggml_cont(ctx, ggml_view_4d(ctx, grad, part->ne[0], part->ne[1], part->ne[2], part->ne[3],
                                                          grad->nb[1], grad->nb[2], grad->nb[3], offset)));
    }
}

// ---- normalization -------------------------------------------------------------------------
static ggml_tensor * norm_impl(ggml_context * ctx, ggml_tensor * a, float eps, ggml_op op, bool inplace) {
    ggml_tensor * r = unary_like(ctx, a, op, inplace);
    ggml_set_op_params_f32(r, 0, eps);
    return r;
}
struct ggml_tensor * ggml_norm(struct ggml_context * ctx, struct ggml_tensor * a, float eps) { return norm_impl(ctx, a, eps, GGML_OP_NORM, false); }
struct ggml_tensor * ggml_norm_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float eps) { return norm_impl(ctx, a, eps, GGML_OP_NORM, true); }
struct ggml_tensor * ggml_rms_norm(struct ggml_context * ctx, struct ggml_tensor * a, float eps) { return norm_impl(ctx, a, eps, GGML_OP_RMS_NORM, false); }
struct ggml_tensor * ggml_rms_norm_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float eps) { return norm_impl(ctx, a, eps, GGML_OP_RMS_NORM, true); }

GGML_BACKWARD_RULE(norm) {
    if (ggml_bw_needs(bw, node->src[0])) {
        ggml_bw_add(bw, node->src[0], ggml_norm_back(ggml_bw_ctx(bw), grad, node->src[0], ggml_get_op_params_f32(node, 0)));
    }
}
GGML_BACKWARD_RULE(rms_norm) {
    if (ggml_bw_needs(bw, node->src[0])) {
        ggml_bw_add(bw, node->src[0], ggml_rms_norm_back(ggml_bw_ctx(bw), grad, node->src[0], ggml_get_op_params_f32(node, 0)));
    }
}

// ---- matrix products -----------------------------------------------------------------------
struct ggml_tensor * ggml_mul_mat(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) {
    GGML_ASSERT(a->ne[0] == b->ne[0] && "mul_mat: a and b must have the same row length");
    GGML_ASSERT(b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0 && "mul_mat: a must broadcast over b");
    GGML_ASSERT(!ggml_is_transposed(a) && "mul_mat: a must not be transposed");
    const int64_t ne[4] = { a->ne[1], b->ne[1], b->ne[2], b->ne[3] };
    ggml_tensor * r = ggml_new_tensor(ctx, GGML_TYPE_F32, 4, ne);
    r->op = GGML_OP_MUL_MAT;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

struct ggml_tensor * ggml_mul_mat_id(struct ggml_context * ctx, struct ggml_tensor * as, struct ggml_tensor * b,
                                     struct ggml_tensor * ids) {
    GGML_ASSERT(ids->type == GGML_TYPE_I32 && ids->ne[2] == 1 && ids->ne[3] == 1 && "mul_mat_id: ids must be an I32 matrix");
    GGML_ASSERT(as->ne[3] == 1 && b->ne[3] == 1 && "mul_mat_id: as and b have at most 3 dimensions");
    GGML_ASSERT(b->type == GGML_TYPE_F32 && "mul_mat_id: b must be F32");
    GGML_ASSERT(as->ne[0] == b->ne[0] && "mul_mat_id: as and b must have the same row length");
    GGML_ASSERT(ids->ne[1] == b->ne[2] && "mul_mat_id: one column of ids per token of b");
    GGML_ASSERT((b->ne[1] == 1 || b->ne[1] == ids->ne[0]) && "mul_mat_id: b has 1 or n_used rows per token");
    GGML_ASSERT(!ggml_is_transposed(as) && as->nb[0] == ggml_type_size(as->type) && "mul_mat_id: as must have packed rows");
    const int64_t ne[4] = { as->ne[1], ids->ne[0], b->ne[2], 1 };
    ggml_tensor * r = ggml_new_tensor(ctx, GGML_TYPE_F32, 4, ne);
    r->op = GGML_OP_MUL_MAT_ID;
    r->src[0] = as;
    r->src[1] = b;
    r->src[2] = ids;
    return r;
}

// The gradient reaches b (the activations: LoRA on the layers before, the router through the
// weights that scale the result); the experts themselves are frozen (no rule for as).
GGML_BACKWARD_RULE(mul_mat_id) {
    ggml_tensor * as = node->src[0], * b = node->src[1], * ids = node->src[2];
    GGML_ASSERT(!ggml_bw_needs(bw, as) && "mul_mat_id: no gradient for the experts (they are frozen)");
    if (!ggml_bw_needs(bw, b)) return;
    ggml_context * ctx = ggml_bw_ctx(bw);
    ggml_tensor * r = ggml_new_tensor(ctx, GGML_TYPE_F32, GGML_MAX_DIMS, b->ne);
    r->op = GGML_OP_MUL_MAT_ID_BACK;
    r->src[0] = as;
    r->src[1] = ggml_is_contiguous(grad) ? grad : ggml_cont(ctx, grad);
    r->src[2] = ids;
    ggml_bw_add(bw, b, r);
}

struct ggml_tensor * ggml_out_prod(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) {
    GGML_ASSERT(a->ne[1] == b->ne[1] && "out_prod: a and b must have the same number of columns");
    GGML_ASSERT(b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0 && "out_prod: a must broadcast over b");
    const int64_t ne[4] = { a->ne[0], b->ne[0], b->ne[2], b->ne[3] };
    ggml_tensor * r = ggml_new_tensor(ctx, GGML_TYPE_F32, 4, ne);
    r->op = GGML_OP_OUT_PROD;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

// A tensor that only gives a shape to ops like repeat_back: it gets no memory.
static ggml_tensor * shape_only(ggml_context * ctx, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    const bool no_alloc = ggml_get_no_alloc(ctx);
    ggml_set_no_alloc(ctx, true);
    ggml_tensor * t = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, ne0, ne1, ne2, ne3);
    ggml_set_no_alloc(ctx, no_alloc);
    return t;
}

// y = a^T b per plane (a [K, M], b [K, N], grad [M, N]):
//   db = a grad^T: out_prod(a, grad^T), which reads a's rows as they are (a may be quantized);
//   da = b grad^T: out_prod(b, grad), planes of b that shared a plane of a summed together.
GGML_BACKWARD_RULE(mul_mat) {
    ggml_context * ctx = ggml_bw_ctx(bw);
    ggml_tensor * a = node->src[0], * b = node->src[1];
    if (ggml_bw_needs(bw, b)) {
        ggml_tensor * db = ggml_out_prod(ctx, a, ggml_transpose(ctx, grad));
        const enum ggml_prec prec = (enum ggml_prec) ggml_get_op_params_i32(node, 0);
        if (prec != GGML_PREC_DEFAULT) ggml_out_prod_set_prec(db, prec);
        ggml_bw_add(bw, b, db);
    }
    if (ggml_bw_needs(bw, a)) {
        const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
        if (r2 == 1 && r3 == 1) {
            ggml_bw_add(bw, a, ggml_out_prod(ctx, b, grad));
        } else if (r3 == 1) {
            // b's planes i2 = g*r2 .. g*r2 + r2-1 all read a's plane g: in contiguous memory they
            // are consecutive, so r2 planes of N rows become one plane of r2*N rows.
            ggml_tensor * bc = ggml_is_contiguous(b) ? b : ggml_cont(ctx, b);
            ggml_tensor * b2 = ggml_reshape_4d(ctx, bc, b->ne[0], b->ne[1] * r2, a->ne[2], b->ne[3]);
            ggml_tensor * g2 = ggml_reshape_4d(ctx, grad, grad->ne[0], grad->ne[1] * r2, a->ne[2], grad->ne[3]);
            ggml_bw_add(bw, a, ggml_out_prod(ctx, b2, g2));
        } else {
            // Groups of planes are not consecutive in memory: per-plane products of b's shape,
            // then each group summed (dim 3, then dim 2) by repeat_back onto a shape with 1 there.
            const int64_t K = a->ne[0], M = a->ne[1], A2 = a->ne[2], A3 = a->ne[3], B2 = b->ne[2];
            ggml_tensor * full = ggml_out_prod(ctx, b, grad);  // [K, M, B2, B3]
            ggml_tensor * t = ggml_repeat_back(ctx, ggml_reshape_4d(ctx, full, K * M * B2, r3, A3, 1),
                                               shape_only(ctx, K * M * B2, 1, A3, 1));
            if (r2 > 1) {
                t = ggml_repeat_back(ctx, ggml_reshape_4d(ctx, t, K * M, r2, A2, A3), shape_only(ctx, K * M, 1, A2, A3));
            }
            ggml_bw_add(bw, a, ggml_reshape_4d(ctx, t, K, M, A2, A3));
        }
    }
}
// y[m, n] = sum_k a[m, k] b[n, k]:  da = grad b (as mul_mat(grad^T, b)), db = grad^T a.
GGML_BACKWARD_RULE(out_prod) {
    ggml_context * ctx = ggml_bw_ctx(bw);
    ggml_tensor * a = node->src[0], * b = node->src[1];
    if (a->ne[2] != b->ne[2] || a->ne[3] != b->ne[3]) GGML_ABORT("backward of out_prod: broadcasting is not supported");
    if (ggml_bw_needs(bw, a)) {
        ggml_tensor * bf = b->type == GGML_TYPE_F32 ? b : ggml_cast(ctx, b, GGML_TYPE_F32);
        ggml_bw_add(bw, a, ggml_mul_mat(ctx, ggml_cont(ctx, ggml_transpose(ctx, grad)), bf));
    }
    if (ggml_bw_needs(bw, b)) {
        ggml_tensor * af = a->type == GGML_TYPE_F32 ? a : ggml_cast(ctx, a, GGML_TYPE_F32);
        ggml_bw_add(bw, b, ggml_mul_mat(ctx, grad, af));
    }
}

void ggml_mul_mat_set_prec(struct ggml_tensor * a, enum ggml_prec prec) {
    GGML_ASSERT(a->op == GGML_OP_MUL_MAT && "mul_mat_set_prec: not a mul_mat node");
    GGML_ASSERT((prec == GGML_PREC_DEFAULT || prec == GGML_PREC_F32 || prec == GGML_PREC_BF16 || prec == GGML_PREC_INT8) &&
                "mul_mat_set_prec: unknown precision");
    ggml_set_op_params_i32(a, 0, (int32_t) prec);
}

void ggml_out_prod_set_prec(struct ggml_tensor * a, enum ggml_prec prec) {
    GGML_ASSERT(a->op == GGML_OP_OUT_PROD && "out_prod_set_prec: not an out_prod node");
    GGML_ASSERT((prec == GGML_PREC_DEFAULT || prec == GGML_PREC_F32 || prec == GGML_PREC_BF16 ||
                 prec == GGML_PREC_INT8) && "out_prod_set_prec: unknown precision");
    ggml_set_op_params_i32(a, 0, (int32_t) prec);
}

// ---- copies and layout ---------------------------------------------------------------------
struct ggml_tensor * ggml_cpy(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) {
    GGML_ASSERT(ggml_nelements(a) == ggml_nelements(b) && "cpy: element counts differ");
    ggml_tensor * r = ggml_view_tensor(ctx, b);
    if (b->name[0] != '\0') ggml_format_name(r, "%.52s (copy)", b->name);
    else ggml_format_name(r, "%.52s (copy)", a->name);
    r->op = GGML_OP_CPY;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

struct ggml_tensor * ggml_cast(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_type type) {
    ggml_tensor * r = ggml_new_tensor(ctx, type, GGML_MAX_DIMS, a->ne);
    ggml_format_name(r, "%.57s (copy)", a->name);
    r->op = GGML_OP_CPY;
    r->src[0] = a;
    r->src[1] = r;
    return r;
}

struct ggml_tensor * ggml_cont_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    GGML_ASSERT(ggml_nelements(a) == ne0 * ne1 * ne2 * ne3 && "cont: element counts differ");
    ggml_tensor * r = ggml_new_tensor_4d(ctx, a->type, ne0, ne1, ne2, ne3);
    ggml_format_name(r, "%.57s (cont)", a->name);
    r->op = GGML_OP_CONT;
    r->src[0] = a;
    return r;
}
struct ggml_tensor * ggml_cont(struct ggml_context * ctx, struct ggml_tensor * a) { return ggml_cont_4d(ctx, a, a->ne[0], a->ne[1], a->ne[2], a->ne[3]); }
struct ggml_tensor * ggml_cont_1d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0) { return ggml_cont_4d(ctx, a, ne0, 1, 1, 1); }
struct ggml_tensor * ggml_cont_2d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1) { return ggml_cont_4d(ctx, a, ne0, ne1, 1, 1); }
struct ggml_tensor * ggml_cont_3d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2) { return ggml_cont_4d(ctx, a, ne0, ne1, ne2, 1); }

static ggml_tensor * reshape_impl(ggml_context * ctx, ggml_tensor * a, int n_dims, const int64_t * ne) {
    GGML_ASSERT(ggml_is_contiguous(a) && "reshape needs a contiguous tensor (use ggml_cont first)");
    int64_t n = 1;
    for (int i = 0; i < n_dims; i++) n *= ne[i];
    GGML_ASSERT(n == ggml_nelements(a) && "reshape: element counts differ");
    ggml_tensor * r = ggml_new_view_impl(ctx, a, n_dims, ne, 0);
    ggml_format_name(r, "%.54s (reshaped)", a->name);
    r->op = GGML_OP_RESHAPE;
    r->src[0] = a;
    return r;
}
struct ggml_tensor * ggml_reshape(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) {
    return reshape_impl(ctx, a, GGML_MAX_DIMS, b->ne);
}
struct ggml_tensor * ggml_reshape_1d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0) {
    const int64_t ne[1] = { ne0 };
    return reshape_impl(ctx, a, 1, ne);
}
struct ggml_tensor * ggml_reshape_2d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = { ne0, ne1 };
    return reshape_impl(ctx, a, 2, ne);
}
struct ggml_tensor * ggml_reshape_3d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2) {
    const int64_t ne[3] = { ne0, ne1, ne2 };
    return reshape_impl(ctx, a, 3, ne);
}
struct ggml_tensor * ggml_reshape_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    const int64_t ne[4] = { ne0, ne1, ne2, ne3 };
    return reshape_impl(ctx, a, 4, ne);
}

// Copies pass the gradient to what they copied; the destination's old values were overwritten.
GGML_BACKWARD_RULE(cpy) {
    ggml_tensor * a = node->src[0];
    if (ggml_bw_needs(bw, a)) ggml_bw_add(bw, a, ggml_reshape(ggml_bw_ctx(bw), grad, a));
}
GGML_BACKWARD_RULE(cont) {
    ggml_tensor * a = node->src[0];
    if (ggml_bw_needs(bw, a)) ggml_bw_add(bw, a, ggml_reshape(ggml_bw_ctx(bw), grad, a));
}
GGML_BACKWARD_RULE(reshape) {
    ggml_tensor * a = node->src[0];
    if (ggml_bw_needs(bw, a)) ggml_bw_add(bw, a, ggml_reshape(ggml_bw_ctx(bw), grad, a));
}

// A view must lie inside the memory of the tensor that owns it.
static void check_view_extent(const ggml_tensor * r) {
    GGML_ASSERT((ggml_nbytes(r) == 0 || r->view_offs + ggml_nbytes(r) <= ggml_nbytes(r->view_src)) &&
                "view exceeds the memory of its source tensor");
}

static ggml_tensor * view_impl(ggml_context * ctx, ggml_tensor * a, int n_dims, const int64_t * ne, size_t offset) {
    ggml_tensor * r = ggml_new_view_impl(ctx, a, n_dims, ne, offset);
    ggml_format_name(r, "%.58s (view)", a->name);
    ggml_set_op_params(r, &offset, sizeof(offset));
    r->op = GGML_OP_VIEW;
    r->src[0] = a;
    return r;
}
struct ggml_tensor * ggml_view_1d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, size_t offset) {
    const int64_t ne[1] = { ne0 };
    ggml_tensor * r = view_impl(ctx, a, 1, ne, offset);
    check_view_extent(r);
    return r;
}
struct ggml_tensor * ggml_view_2d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset) {
    const int64_t ne[2] = { ne0, ne1 };
    ggml_tensor * r = view_impl(ctx, a, 2, ne, 0);
    r->nb[1] = nb1;
    r->nb[2] = r->nb[1] * ne1;
    r->nb[3] = r->nb[2];
    r->view_offs += offset;
    if (r->data) r->data = (char *) r->data + offset;
    ggml_set_op_params(r, &offset, sizeof(offset));
    check_view_extent(r);
    return r;
}
struct ggml_tensor * ggml_view_3d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, size_t nb1, size_t nb2, size_t offset) {
    const int64_t ne[3] = { ne0, ne1, ne2 };
    ggml_tensor * r = view_impl(ctx, a, 3, ne, 0);
    r->nb[1] = nb1;
    r->nb[2] = nb2;
    r->nb[3] = r->nb[2] * ne2;
    r->view_offs += offset;
    if (r->data) r->data = (char *) r->data + offset;
    ggml_set_op_params(r, &offset, sizeof(offset));
    check_view_extent(r);
    return r;
}
struct ggml_tensor * ggml_view_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    const int64_t ne[4] = { ne0, ne1, ne2, ne3 };
    ggml_tensor * r = view_impl(ctx, a, 4, ne, 0);
    r->nb[1] = nb1;
    r->nb[2] = nb2;
    r->nb[3] = nb3;
    r->view_offs += offset;
    if (r->data) r->data = (char *) r->data + offset;
    ggml_set_op_params(r, &offset, sizeof(offset));
    check_view_extent(r);
    return r;
}

struct ggml_tensor * ggml_view_2d_as(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_type type, int64_t ne0, int64_t ne1) {
    GGML_ASSERT(ggml_is_contiguous(a) && "view_2d_as: a must be contiguous");
    GGML_ASSERT(ne0 % ggml_blck_size(type) == 0 && ggml_row_size(type, ne0) * (size_t) ne1 == ggml_nbytes(a) &&
                "view_2d_as: the rows must cover a's bytes exactly");
    const int64_t ne[2] = { ne0, ne1 };
    ggml_tensor * r = ggml_new_view_as_impl(ctx, a, type, 2, ne, 0);
    ggml_format_name(r, "%.58s (as %s)", a->name, ggml_type_name(type));
    const size_t offset = 0;
    ggml_set_op_params(r, &offset, sizeof(offset));
    r->op = GGML_OP_VIEW;
    r->src[0] = a;
    return r;
}

static ggml_tensor * acc_zero_based(ggml_context * ctx, ggml_tensor * like, ggml_tensor * b, size_t nb1, size_t nb2,
                                    size_t nb3, size_t offset);

// A view's gradient lands in the part of its source it shows (zeros elsewhere). Strides and
// offset are in the source's layout, which matches its F32 gradient's when the source is contiguous.
GGML_BACKWARD_RULE(view) {
    ggml_tensor * a = node->src[0];
    if (!ggml_bw_needs(bw, a)) return;
    if (node->type != a->type) GGML_ABORT("backward of view: no gradient through '%s' seen as another type", a->name);
    if (!ggml_is_contiguous(a)) GGML_ABORT("backward of view: the viewed tensor '%s' must be contiguous", a->name);
    size_t offset;
    memcpy(&offset, node->op_params, sizeof(offset));
    const size_t es = ggml_element_size(a);
    const size_t nb1 = node->nb[1] / es * sizeof(float), nb2 = node->nb[2] / es * sizeof(float), nb3 = node->nb[3] / es * sizeof(float);
    ggml_bw_add(bw, a, acc_zero_based(ggml_bw_ctx(bw), a, grad, nb1, nb2, nb3, offset / es * sizeof(float)));
}

struct ggml_tensor * ggml_permute(struct ggml_context * ctx, struct ggml_tensor * a, int axis0, int axis1, int axis2, int axis3) {
    const int axes[4] = { axis0, axis1, axis2, axis3 };
    for (int i = 0; i < 4; i++) {
        GGML_ASSERT(axes[i] >= 0 && axes[i] < GGML_MAX_DIMS);
        for (int j = 0; j < i; j++) GGML_ASSERT(axes[i] != axes[j] && "permute: axes must be distinct");
    }
    ggml_tensor * r = ggml_view_tensor(ctx, a);
    ggml_format_name(r, "%.54s (permuted)", a->name);
    for (int i = 0; i < 4; i++) {
        r->ne[axes[i]] = a->ne[i];
        r->nb[axes[i]] = a->nb[i];
    }
    r->op = GGML_OP_PERMUTE;
    r->src[0] = a;
    ggml_set_op_params(r, axes, sizeof(axes));
    return r;
}

struct ggml_tensor * ggml_transpose(struct ggml_context * ctx, struct ggml_tensor * a) {
    ggml_tensor * r = ggml_view_tensor(ctx, a);
    ggml_format_name(r, "%.52s (transposed)", a->name);
    r->ne[0] = a->ne[1];
    r->ne[1] = a->ne[0];
    r->nb[0] = a->nb[1];
    r->nb[1] = a->nb[0];
    r->op = GGML_OP_TRANSPOSE;
    r->src[0] = a;
    return r;
}

GGML_BACKWARD_RULE(permute) {
    ggml_tensor * a = node->src[0];
    if (!ggml_bw_needs(bw, a)) return;
    int inv[4];
    for (int i = 0; i < 4; i++) inv[ggml_get_op_params_i32(node, i)] = i;
    ggml_bw_add(bw, a, ggml_permute(ggml_bw_ctx(bw), grad, inv[0], inv[1], inv[2], inv[3]));
}
GGML_BACKWARD_RULE(transpose) {
    if (ggml_bw_needs(bw, node->src[0])) ggml_bw_add(bw, node->src[0], ggml_transpose(ggml_bw_ctx(bw), grad));
}

// ---- indexing and masks --------------------------------------------------------------------
// a [ne0, rows, A2, A3], b I32 [n, A2, A3] -> [ne0, n, A2, A3]; F32 result (I32 for I32 a).
struct ggml_tensor * ggml_get_rows(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) {
    GGML_ASSERT(b->type == GGML_TYPE_I32 && "get_rows: indices must be I32");
    GGML_ASSERT(a->ne[2] == b->ne[1] && a->ne[3] == b->ne[2] && b->ne[3] == 1);
    const ggml_type type = a->type == GGML_TYPE_I32 ? GGML_TYPE_I32 : GGML_TYPE_F32;
    ggml_tensor * r = ggml_new_tensor_4d(ctx, type, a->ne[0], b->ne[0], b->ne[1], b->ne[2]);
    r->op = GGML_OP_GET_ROWS;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

struct ggml_tensor * ggml_set_rows(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, struct ggml_tensor * c) {
    GGML_ASSERT((c->type == GGML_TYPE_I32 || c->type == GGML_TYPE_I64) && "set_rows: indices must be I32 or I64");
    GGML_ASSERT(b->type == GGML_TYPE_F32 && "set_rows: the rows must be F32");
    GGML_ASSERT(a->ne[0] == b->ne[0] && a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3] && "set_rows: a and b differ in row length or dims 2, 3");
    GGML_ASSERT(b->ne[1] == c->ne[0] && c->ne[3] == 1 && "set_rows: one index per row of b");
    GGML_ASSERT(c->ne[1] > 0 && c->ne[2] > 0 && b->ne[2] % c->ne[1] == 0 && b->ne[3] % c->ne[2] == 0 && "set_rows: indices must broadcast over b");
    GGML_ASSERT(a->nb[0] == ggml_type_size(a->type) && b->nb[0] == sizeof(float) && "set_rows: rows must be packed");
    GGML_ASSERT(a->ne[0] % ggml_blck_size(a->type) == 0 && "set_rows: rows must hold whole blocks");
    ggml_tensor * r = ggml_view_tensor(ctx, a);
    ggml_format_name(r, "%.52s (rows set)", a->name);
    r->op = GGML_OP_SET_ROWS;
    r->src[0] = b;
    r->src[1] = c;
    r->src[2] = a;  // the destination: its producer runs first
    return r;
}

static ggml_tensor * diag_mask_inf_impl(ggml_context * ctx, ggml_tensor * a, int n_past, bool inplace) {
    ggml_tensor * r = unary_like(ctx, a, GGML_OP_DIAG_MASK_INF, inplace);
    ggml_set_op_params_i32(r, 0, n_past);
    return r;
}
struct ggml_tensor * ggml_diag_mask_inf(struct ggml_context * ctx, struct ggml_tensor * a, int n_past) { return diag_mask_inf_impl(ctx, a, n_past, false); }
struct ggml_tensor * ggml_diag_mask_inf_inplace(struct ggml_context * ctx, struct ggml_tensor * a, int n_past) { return diag_mask_inf_impl(ctx, a, n_past, true); }

GGML_BACKWARD_RULE(get_rows) {  // the indices get no gradient
    ggml_tensor * a = node->src[0];
    if (ggml_bw_needs(bw, a)) ggml_bw_add(bw, a, ggml_get_rows_back(ggml_bw_ctx(bw), grad, node->src[1], a));
}
// b's rows went to a's rows c: b gets those rows of the gradient, a gets the rest (its rows c were
// overwritten). Needs one index row per plane of b (no broadcast) and distinct indices.
GGML_BACKWARD_RULE(set_rows) {
    ggml_tensor * b = node->src[0], * c = node->src[1], * a = node->src[2];
    ggml_context * ctx = ggml_bw_ctx(bw);
    const bool needs_b = ggml_bw_needs(bw, b), needs_a = ggml_bw_needs(bw, a);
    if (!needs_a && !needs_b) return;
    if (c->type != GGML_TYPE_I32 || c->ne[1] != b->ne[2] || c->ne[2] != b->ne[3]) {
        GGML_ABORT("backward of set_rows ('%s'): needs I32 indices with one row per plane of the rows set", node->name);
    }
    ggml_tensor * rows = ggml_get_rows(ctx, grad, c);  // [ne0, n, ne2, ne3], b's shape
    if (needs_b) ggml_bw_add(bw, b, rows);
    if (needs_a) ggml_bw_add(bw, a, ggml_set_rows(ctx, ggml_dup(ctx, grad), ggml_scale(ctx, rows, 0.0f), c));
}
// Also the rule of diag_mask_zero: masked elements pass no gradient.
GGML_BACKWARD_RULE(diag_mask_inf) {
    ggml_tensor * a = node->src[0];
    if (ggml_bw_needs(bw, a)) ggml_bw_add(bw, a, ggml_diag_mask_zero(ggml_bw_ctx(bw), grad, ggml_get_op_params_i32(node, 0)));
}

// ---- softmax -------------------------------------------------------------------------------
static ggml_tensor * soft_max_impl(ggml_context * ctx, ggml_tensor * a, ggml_tensor * mask, float scale, float max_bias, bool inplace) {
    GGML_ASSERT(ggml_is_contiguous(a) && "soft_max needs a contiguous input");
    if (mask) {
        GGML_ASSERT((mask->type == GGML_TYPE_F32 || mask->type == GGML_TYPE_F16) && "soft_max: mask must be F32 or F16");
        GGML_ASSERT(ggml_is_contiguous_rows(mask));
        GGML_ASSERT(mask->ne[0] == a->ne[0] && "soft_max: mask rows must match a's rows");
        GGML_ASSERT(mask->ne[1] >= a->ne[1] && "soft_max: mask needs at least as many rows as a");
        GGML_ASSERT(a->ne[2] % mask->ne[2] == 0 && a->ne[3] % mask->ne[3] == 0 && "soft_max: mask must broadcast");
    }
    if (max_bias > 0.0f) GGML_ASSERT(mask && "soft_max: ALiBi (max_bias > 0) needs a mask");
    ggml_tensor * r = unary_like(ctx, a, GGML_OP_SOFT_MAX, inplace);
    ggml_set_op_params_f32(r, 0, scale);
    ggml_set_op_params_f32(r, 1, max_bias);
    r->src[1] = mask;
    return r;
}
struct ggml_tensor * ggml_soft_max(struct ggml_context * ctx, struct ggml_tensor * a) { return soft_max_impl(ctx, a, nullptr, 1.0f, 0.0f, false); }
struct ggml_tensor * ggml_soft_max_inplace(struct ggml_context * ctx, struct ggml_tensor * a) { return soft_max_impl(ctx, a, nullptr, 1.0f, 0.0f, true); }
struct ggml_tensor * ggml_soft_max_ext(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * mask, float scale, float max_bias) {
    return soft_max_impl(ctx, a, mask, scale, max_bias, false);
}

GGML_BACKWARD_RULE(soft_max) {
    ggml_tensor * a = node->src[0];
    if (ggml_bw_needs(bw, node->src[1])) GGML_ABORT("backward of soft_max: the mask cannot be a parameter");
    if (ggml_bw_needs(bw, a)) {
        ggml_bw_add(bw, a, ggml_soft_max_ext_back(ggml_bw_ctx(bw), grad, node, ggml_get_op_params_f32(node, 0),
                                                  ggml_get_op_params_f32(node, 1)));
    }
}

// ---- fused attention -----------------------------------------------------------------------
static void check_attention_operands(const ggml_tensor * q, const ggml_tensor * k, const ggml_tensor * v, const ggml_tensor * mask) {
    // Keys and values of any type with a conversion to F32 (F16, BF16, Q8_0 caches), whole rows.
    auto is_kv = [](const ggml_tensor * t) {
        const ggml_type_traits * tt = ggml_get_type_traits(t->type);
        return (t->type == GGML_TYPE_F32 || (tt && tt->to_float)) && t->ne[0] % ggml_blck_size(t->type) == 0 &&
               t->nb[0] == ggml_type_size(t->type);
    };
    GGML_ASSERT(q->type == GGML_TYPE_F32 && q->nb[0] == sizeof(float) && "flash_attn_ext: q must be F32 with contiguous rows");
    GGML_ASSERT(is_kv(k) && is_kv(v) && "flash_attn_ext: k and v need contiguous rows of a type convertible to F32");
    GGML_ASSERT(k->ne[0] == q->ne[0] && "flash_attn_ext: q and k rows must have the same length");
    GGML_ASSERT(v->ne[1] == k->ne[1] && v->ne[2] == k->ne[2] && "flash_attn_ext: k and v must have the same keys and heads");
    GGML_ASSERT(k->ne[2] > 0 && q->ne[2] % k->ne[2] == 0 && "flash_attn_ext: n_head must be a multiple of n_head_kv");
    GGML_ASSERT(q->ne[3] == k->ne[3] && q->ne[3] == v->ne[3] && "flash_attn_ext: q, k and v must have the same ne[3]");
    if (mask) {
        GGML_ASSERT((mask->type == GGML_TYPE_F32 || mask->type == GGML_TYPE_F16) && "flash_attn_ext: mask must be F32 or F16");
        GGML_ASSERT(mask->nb[0] == ggml_type_size(mask->type) && mask->ne[0] == k->ne[1] && "flash_attn_ext: mask rows must have n_kv entries");
        GGML_ASSERT(mask->ne[1] >= q->ne[1] && "flash_attn_ext: mask needs a row per query");
        GGML_ASSERT(q->ne[2] % mask->ne[2] == 0 && q->ne[3] % mask->ne[3] == 0 && "flash_attn_ext: mask must broadcast");
    }
}

struct ggml_tensor * ggml_flash_attn_ext(struct ggml_context * ctx, struct ggml_tensor * q, struct ggml_tensor * k,
                                         struct ggml_tensor * v, struct ggml_tensor * mask, float scale, float max_bias,
                                         float logit_softcap) {
    check_attention_operands(q, k, v, mask);
    if (max_bias > 0.0f) GGML_ASSERT(mask && "flash_attn_ext: ALiBi (max_bias > 0) needs a mask");
    GGML_ASSERT(logit_softcap >= 0.0f && "flash_attn_ext: logit_softcap must be >= 0");
    ggml_tensor * r = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, v->ne[0], q->ne[2], q->ne[1], q->ne[3]);
    r->op = GGML_OP_FLASH_ATTN_EXT;
    ggml_set_op_params_f32(r, 0, scale);
    ggml_set_op_params_f32(r, 1, max_bias);
    ggml_set_op_params_f32(r, 2, logit_softcap);
    r->src[0] = q;
    r->src[1] = k;
    r->src[2] = v;
    r->src[3] = mask;
    return r;
}

void ggml_flash_attn_ext_set_prec(struct ggml_tensor * a, enum ggml_prec prec) {
    GGML_ASSERT(a->op == GGML_OP_FLASH_ATTN_EXT);
    ggml_set_op_params_i32(a, 3, (int32_t) prec);
}

struct ggml_tensor * ggml_flash_attn_back(struct ggml_context * ctx, struct ggml_tensor * q, struct ggml_tensor * k,
                                          struct ggml_tensor * v, struct ggml_tensor * mask, struct ggml_tensor * grad,
                                          float scale, float max_bias, float logit_softcap) {
    check_attention_operands(q, k, v, mask);
    GGML_ASSERT(grad->type == GGML_TYPE_F32 && ggml_is_contiguous(grad) && "flash_attn_back: grad must be contiguous F32");
    GGML_ASSERT(grad->ne[0] == v->ne[0] && grad->ne[1] == q->ne[2] && grad->ne[2] == q->ne[1] && grad->ne[3] == q->ne[3]);
    ggml_tensor * r = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, ggml_nelements(q) + ggml_nelements(k) + ggml_nelements(v));
    r->op = GGML_OP_FLASH_ATTN_BACK;
    ggml_set_op_params_f32(r, 0, scale);
    ggml_set_op_params_f32(r, 1, max_bias);
    ggml_set_op_params_f32(r, 2, logit_softcap);
    r->src[0] = q;
    r->src[1] = k;
    r->src[2] = v;
    r->src[3] = mask;
    r->src[4] = grad;
    return r;
}

// One flash_attn_back node gives all three gradients; each source takes its slice.
GGML_BACKWARD_RULE(flash_attn_ext) {
    ggml_tensor * q = node->src[0], * k = node->src[1], * v = node->src[2];
    if (ggml_bw_needs(bw, node->src[3])) GGML_ABORT("backward of flash_attn_ext: the mask cannot be a parameter");
    const bool nq = ggml_bw_needs(bw, q), nk = ggml_bw_needs(bw, k), nv = ggml_bw_needs(bw, v);
    if (!nq && !nk && !nv) return;
    ggml_context * ctx = ggml_bw_ctx(bw);
    ggml_tensor * g = ggml_flash_attn_back(ctx, q, k, v, node->src[3], grad, ggml_get_op_params_f32(node, 0),
                                           ggml_get_op_params_f32(node, 1), ggml_get_op_params_f32(node, 2));
    size_t offset = 0;
    for (ggml_tensor * src : {q, k, v}) {
        const size_t nb1 = src->ne[0] * sizeof(float), nb2 = nb1 * src->ne[1], nb3 = nb2 * src->ne[2];
        if (ggml_bw_needs(bw, src)) {
            ggml_bw_add(bw, src, ggml_view_4d(ctx, g, src->ne[0], src->ne[1], src->ne[2], src->ne[3], nb1, nb2, nb3, offset));
        }
        offset += nb3 * src->ne[3];
    }
}

// ---- rope ----------------------------------------------------------------------------------
static ggml_tensor * rope_impl(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, int n_dims, int mode,
                               int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor,
                               float beta_fast, float beta_slow, bool inplace) {
    GGML_ASSERT(ggml_is_vector(b) && b->type == GGML_TYPE_I32 && "rope: positions must be an I32 vector");
    GGML_ASSERT(a->ne[2] == b->ne[0] && "rope: one position per token (a->ne[2])");
    GGML_ASSERT(n_dims > 0 && n_dims % 2 == 0 && n_dims <= a->ne[0] && "rope: n_dims must be even and <= head size");
    GGML_ASSERT((mode == GGML_ROPE_TYPE_NORMAL || mode == GGML_ROPE_TYPE_NEOX) && "rope: mode must be NORMAL (0) or NEOX (2)");
    if (c) {
        GGML_ASSERT(c->type == GGML_TYPE_F32 && c->ne[0] >= n_dims / 2 && "rope: freq factors must be F32 [n_dims/2]");
    }
    ggml_tensor * r = result_like(ctx, a, inplace);
    int32_t params[11] = { 0, n_dims, mode, 0, n_ctx_orig };
    memcpy(params + 5, &freq_base, sizeof(float));
    memcpy(params + 6, &freq_scale, sizeof(float));
    memcpy(params + 7, &ext_factor, sizeof(float));
    memcpy(params + 8, &attn_factor, sizeof(float));
    memcpy(params + 9, &beta_fast, sizeof(float));
    memcpy(params + 10, &beta_slow, sizeof(float));
    ggml_set_op_params(r, params, sizeof(params));
    r->op = GGML_OP_ROPE;
    r->src[0] = a;
    r->src[1] = b;
    r->src[2] = c;
    return r;
}
struct ggml_tensor * ggml_rope(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, int n_dims, int mode) {
    return rope_impl(ctx, a, b, nullptr, n_dims, mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, false);
}
struct ggml_tensor * ggml_rope_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, int n_dims, int mode) {
    return rope_impl(ctx, a, b, nullptr, n_dims, mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, true);
}
struct ggml_tensor * ggml_rope_ext(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, struct ggml_tensor * c,
        int n_dims, int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
        float attn_factor, float beta_fast, float beta_slow) {
    return rope_impl(ctx, a, b, c, n_dims, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow, false);
}
struct ggml_tensor * ggml_rope_ext_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, struct ggml_tensor * c,
        int n_dims, int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
        float attn_factor, float beta_fast, float beta_slow) {
    return rope_impl(ctx, a, b, c, n_dims, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow, true);
}

// The inverse rotation; positions and frequency factors get no gradient.
GGML_BACKWARD_RULE(rope) {
    ggml_tensor * a = node->src[0];
    if (ggml_bw_needs(bw, node->src[2])) GGML_ABORT("backward of rope: the frequency factors cannot be a parameter");
    if (!ggml_bw_needs(bw, a)) return;
    ggml_tensor * r = ggml_rope_ext_back(ggml_bw_ctx(bw), grad, node->src[1], node->src[2], ggml_get_op_params_i32(node, 1),
                                         ggml_get_op_params_i32(node, 2), ggml_get_op_params_i32(node, 4),
                                         ggml_get_op_params_f32(node, 5), ggml_get_op_params_f32(node, 6),
                                         ggml_get_op_params_f32(node, 7), ggml_get_op_params_f32(node, 8),
                                         ggml_get_op_params_f32(node, 9), ggml_get_op_params_f32(node, 10));
    ggml_bw_add(bw, a, r);
}

// ---- loss ----------------------------------------------------------------------------------
struct ggml_tensor * ggml_cross_entropy_loss(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) {
    GGML_ASSERT(ggml_are_same_shape(a, b) && "cross_entropy_loss: logits and targets must have the same shape");
    GGML_ASSERT(a->type == GGML_TYPE_F32 && b->type == GGML_TYPE_F32);
    ggml_tensor * r = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1);
    r->op = GGML_OP_CROSS_ENTROPY_LOSS;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

GGML_BACKWARD_RULE(cross_entropy_loss) {
    ggml_tensor * a = node->src[0], * b = node->src[1];
    if (ggml_bw_needs(bw, b)) GGML_ABORT("backward of cross_entropy_loss: the target probabilities cannot be a parameter");
    if (ggml_bw_needs(bw, a)) ggml_bw_add(bw, a, ggml_cross_entropy_loss_back(ggml_bw_ctx(bw), grad, a, b));
}

// ---- ops of the backward pass ----------------------------------------------------------------
static ggml_tensor * acc_impl(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t nb1, size_t nb2,
                              size_t nb3, size_t offset, bool inplace) {
    GGML_ASSERT(ggml_nelements(b) <= ggml_nelements(a) && "acc: b must fit in a");
    GGML_ASSERT(ggml_is_contiguous(a) && a->type == GGML_TYPE_F32 && b->type == GGML_TYPE_F32);
    GGML_ASSERT(offset + (b->ne[0] - 1) * ggml_element_size(a) + (b->ne[1] - 1) * nb1 + (b->ne[2] - 1) * nb2 +
                (b->ne[3] - 1) * nb3 < ggml_nbytes(a) && "acc: the view lies outside a");
    ggml_tensor * r = result_like(ctx, a, inplace);
    const size_t params[4] = { nb1, nb2, nb3, offset };
    ggml_set_op_params(r, params, sizeof(params));
    r->op = GGML_OP_ACC;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}
// F32 zeros of like's shape with b added into the view: ACC without src[0] (nothing to copy).
static ggml_tensor * acc_zero_based(ggml_context * ctx, ggml_tensor * like, ggml_tensor * b, size_t nb1, size_t nb2,
                                    size_t nb3, size_t offset) {
    ggml_tensor * r = ggml_new_tensor(ctx, GGML_TYPE_F32, GGML_MAX_DIMS, like->ne);
    GGML_ASSERT(b->type == GGML_TYPE_F32);
    GGML_ASSERT(offset + (b->ne[0] - 1) * sizeof(float) + (b->ne[1] - 1) * nb1 + (b->ne[2] - 1) * nb2 +
                (b->ne[3] - 1) * nb3 < ggml_nbytes(r) && "acc: the view lies outside a");
    const size_t params[4] = { nb1, nb2, nb3, offset };
    ggml_set_op_params(r, params, sizeof(params));
    r->op = GGML_OP_ACC;
    r->src[1] = b;
    return r;
}

struct ggml_tensor * ggml_acc(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                              size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    return acc_impl(ctx, a, b, nb1, nb2, nb3, offset, false);
}
struct ggml_tensor * ggml_acc_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                      size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    return acc_impl(ctx, a, b, nb1, nb2, nb3, offset, true);
}

struct ggml_tensor * ggml_repeat_back(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) {
    GGML_ASSERT(ggml_can_repeat(b, a) && "repeat_back: b's shape must tile a's");
    ggml_tensor * r = ggml_new_tensor(ctx, GGML_TYPE_F32, GGML_MAX_DIMS, b->ne);
    r->op = GGML_OP_REPEAT_BACK;
    r->src[0] = a;
    return r;
}

struct ggml_tensor * ggml_unary_back(struct ggml_context * ctx, struct ggml_tensor * grad, struct ggml_tensor * x, enum ggml_unary_op op) {
    GGML_ASSERT(ggml_are_same_shape(grad, x) && "unary_back: grad and x must have the same shape");
    GGML_ASSERT(op >= 0 && op < GGML_UNARY_OP_COUNT);
    ggml_tensor * r = ggml_new_tensor(ctx, GGML_TYPE_F32, GGML_MAX_DIMS, x->ne);
    ggml_set_op_params_i32(r, 0, (int32_t) op);
    r->op = GGML_OP_UNARY_BACK;
    r->src[0] = grad;
    r->src[1] = x;
    return r;
}
struct ggml_tensor * ggml_silu_back(struct ggml_context * ctx, struct ggml_tensor * grad, struct ggml_tensor * x) {
    return ggml_unary_back(ctx, grad, x, GGML_UNARY_OP_SILU);
}
struct ggml_tensor * ggml_gelu_back(struct ggml_context * ctx, struct ggml_tensor * grad, struct ggml_tensor * x) {
    return ggml_unary_back(ctx, grad, x, GGML_UNARY_OP_GELU);
}

static ggml_tensor * grad_x_op(ggml_context * ctx, ggml_tensor * grad, ggml_tensor * x, ggml_op op) {
    GGML_ASSERT(ggml_are_same_shape(grad, x) && "backward op: grad and x must have the same shape");
    ggml_tensor * r = ggml_new_tensor(ctx, GGML_TYPE_F32, GGML_MAX_DIMS, x->ne);
    r->op = op;
    r->src[0] = grad;
    r->src[1] = x;
    return r;
}
struct ggml_tensor * ggml_norm_back(struct ggml_context * ctx, struct ggml_tensor * grad, struct ggml_tensor * x, float eps) {
    ggml_tensor * r = grad_x_op(ctx, grad, x, GGML_OP_NORM_BACK);
    ggml_set_op_params_f32(r, 0, eps);
    return r;
}
struct ggml_tensor * ggml_rms_norm_back(struct ggml_context * ctx, struct ggml_tensor * grad, struct ggml_tensor * x, float eps) {
    ggml_tensor * r = grad_x_op(ctx, grad, x, GGML_OP_RMS_NORM_BACK);
    ggml_set_op_params_f32(r, 0, eps);
    return r;
}

struct ggml_tensor * ggml_diag_mask_zero(struct ggml_context * ctx, struct ggml_tensor * a, int n_past) {
    ggml_tensor * r = unary_like(ctx, a, GGML_OP_DIAG_MASK_ZERO, false);
    ggml_set_op_params_i32(r, 0, n_past);
    return r;
}

struct ggml_tensor * ggml_soft_max_ext_back(struct ggml_context * ctx, struct ggml_tensor * grad, struct ggml_tensor * y,
                                            float scale, float max_bias) {
    ggml_tensor * r = grad_x_op(ctx, grad, y, GGML_OP_SOFT_MAX_BACK);
    ggml_set_op_params_f32(r, 0, scale);
    ggml_set_op_params_f32(r, 1, max_bias);
    return r;
}

struct ggml_tensor * ggml_rope_ext_back(struct ggml_context * ctx, struct ggml_tensor * grad, struct ggml_tensor * b, struct ggml_tensor * c,
        int n_dims, int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
        float attn_factor, float beta_fast, float beta_slow) {
    ggml_tensor * r = rope_impl(ctx, grad, b, c, n_dims, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor,
                                beta_fast, beta_slow, false);
    r->op = GGML_OP_ROPE_BACK;
    return r;
}

struct ggml_tensor * ggml_get_rows_back(struct ggml_context * ctx, struct ggml_tensor * grad, struct ggml_tensor * b, struct ggml_tensor * c) {
    GGML_ASSERT(b->type == GGML_TYPE_I32 && "get_rows_back: indices must be I32");
    GGML_ASSERT(grad->ne[0] == c->ne[0] && grad->ne[1] == b->ne[0] && grad->ne[2] == b->ne[1] && grad->ne[3] == b->ne[2]);
    GGML_ASSERT(c->ne[2] == b->ne[1] && c->ne[3] == b->ne[2]);
    ggml_tensor * r = ggml_new_tensor(ctx, GGML_TYPE_F32, GGML_MAX_DIMS, c->ne);
    r->op = GGML_OP_GET_ROWS_BACK;
    r->src[0] = grad;
    r->src[1] = b;
    return r;
}

struct ggml_tensor * ggml_cross_entropy_loss_back(struct ggml_context * ctx, struct ggml_tensor * grad, struct ggml_tensor * a, struct ggml_tensor * b) {
    GGML_ASSERT(ggml_is_scalar(grad) && grad->type == GGML_TYPE_F32);
    GGML_ASSERT(ggml_are_same_shape(a, b) && a->type == GGML_TYPE_F32 && b->type == GGML_TYPE_F32);
    ggml_tensor * r = ggml_new_tensor(ctx, GGML_TYPE_F32, GGML_MAX_DIMS, a->ne);
    r->op = GGML_OP_CROSS_ENTROPY_LOSS_BACK;
    r->src[0] = grad;
    r->src[1] = a;
    r->src[2] = b;
    return r;
}

GGML_BACKWARD_RULE(acc) {
    ggml_context * ctx = ggml_bw_ctx(bw);
    ggml_tensor * a = node->src[0], * b = node->src[1];
    if (ggml_bw_needs(bw, a)) ggml_bw_add(bw, a, grad);
    if (ggml_bw_needs(bw, b)) {
        size_t p[4];  // op_params is only 4-byte aligned: copied out, not read through a size_t pointer
        memcpy(p, node->op_params, sizeof(p));
        ggml_bw_add(bw, b, ggml_cont(ctx, ggml_view_4d(ctx, grad, b->ne[0], b->ne[1], b->ne[2], b->ne[3], p[0], p[1], p[2], p[3])));
    }
}
GGML_BACKWARD_RULE(repeat_back) {
    if (ggml_bw_needs(bw, node->src[0])) ggml_bw_add(bw, node->src[0], ggml_repeat(ggml_bw_ctx(bw), grad, node->src[0]));
}

// ---- optimizer steps -------------------------------------------------------------------------
static void check_opt_operand(const ggml_tensor * a, const ggml_tensor * t, const char * what) {
    if (!(t->type == GGML_TYPE_F32 && ggml_are_same_shape(a, t) && ggml_is_contiguous(t))) {
        GGML_ABORT("opt_step: %s must be a contiguous F32 tensor of the parameter's shape", what);
    }
}

// The step node: a view of the parameter a (the step updates a in place) with sources a, grad,
// then the step's own operands; params holds its n_params F32 hyperparameters.
static ggml_tensor * opt_step_node(ggml_context * ctx, ggml_op op, ggml_tensor * a, ggml_tensor * grad,
                                   ggml_tensor * params, int64_t n_params) {
    GGML_ASSERT(a->type == GGML_TYPE_F32 && ggml_is_contiguous(a) && "opt_step: the parameter must be contiguous F32");
    check_opt_operand(a, grad, "grad");
    GGML_ASSERT(params->type == GGML_TYPE_F32 && ggml_nelements(params) == n_params);
    ggml_tensor * r = ggml_view_tensor(ctx, a);
    r->op = op;
    r->src[0] = a;
    r->src[1] = grad;
    return r;
}

struct ggml_tensor * ggml_opt_step_adamw(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * grad,
                                         struct ggml_tensor * m, struct ggml_tensor * v, struct ggml_tensor * adamw_params) {
    ggml_tensor * r = opt_step_node(ctx, GGML_OP_OPT_STEP_ADAMW, a, grad, adamw_params, 7);
    check_opt_operand(a, m, "m");
    check_opt_operand(a, v, "v");
    r->src[2] = m;
    r->src[3] = v;
    r->src[4] = adamw_params;
    return r;
}

struct ggml_tensor * ggml_opt_step_sgd(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * grad,
                                       struct ggml_tensor * params) {
    ggml_tensor * r = opt_step_node(ctx, GGML_OP_OPT_STEP_SGD, a, grad, params, 2);
    r->src[2] = params;
    return r;
}
