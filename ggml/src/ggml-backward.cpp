// ggml-backward.cpp - automatic differentiation: a transform over the graph that appends, in
// reverse order, each op's backward rule (from the op table), summing the contributions every
// source receives from its readers. Also the graph's gradient accessors and reset.
#include "ggml-backward.h"

#include <stdio.h>

#include <vector>

struct ggml_backward_ctx {
    ggml_context * ctx;
    ggml_cgraph * graph;
    std::vector<bool> needed;  // by hash slot: the tensor leads to a parameter
};

// The hash slot of a tensor that is in the graph (-1 when it is not).
static long slot_of(const ggml_cgraph * g, const ggml_tensor * t) {
    if (!ggml_hash_contains(&g->visited_hash_set, t)) return -1;
    return (long) ggml_hash_find(&g->visited_hash_set, t);
}

struct ggml_context * ggml_bw_ctx(struct ggml_backward_ctx * bw) { return bw->ctx; }

bool ggml_bw_needs(struct ggml_backward_ctx * bw, const struct ggml_tensor * src) {
    if (!src) return false;
    const long s = slot_of(bw->graph, src);
    return s >= 0 && bw->needed[s];
}

static bool is_float(ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16; }

void ggml_bw_add(struct ggml_backward_ctx * bw, struct ggml_tensor * src, struct ggml_tensor * c) {
    ggml_cgraph * g = bw->graph;
    const long s = slot_of(g, src);
    GGML_ASSERT(s >= 0);
    if (!ggml_are_same_shape(c, src)) {
        GGML_ABORT("backward: a gradient of shape [%lld %lld %lld %lld] for '%s' of shape [%lld %lld %lld %lld]",
                   (long long) c->ne[0], (long long) c->ne[1], (long long) c->ne[2], (long long) c->ne[3], src->name,
                   (long long) src->ne[0], (long long) src->ne[1], (long long) src->ne[2], (long long) src->ne[3]);
    }
    // Gradients are contiguous F32 tensors, which is what the rules may assume of their grad.
    if (c->type != GGML_TYPE_F32) c = ggml_cast(bw->ctx, c, GGML_TYPE_F32);
    else if (!ggml_is_contiguous(c)) c = ggml_cont(bw->ctx, c);
    if (g->grads[s]) {
        // Into the accumulator where the tensor has one, else a new sum.
        g->grads[s] = g->grad_accs[s] ? ggml_add_inplace(bw->ctx, g->grads[s], c) : ggml_add(bw->ctx, g->grads[s], c);
        ggml_format_name(g->grads[s], "grad for %.50s", src->name);
    } else {
        g->grads[s] = c;
    }
    ggml_build_forward_expand(g, g->grads[s]);  // in creation order: reverse forward order
}

struct ggml_tensor * ggml_bw_reduce_to(struct ggml_backward_ctx * bw, struct ggml_tensor * c, struct ggml_tensor * src) {
    return ggml_are_same_shape(c, src) ? c : ggml_repeat_back(bw->ctx, c, src);
}

void ggml_build_backward_expand(struct ggml_context * ctx, struct ggml_cgraph * g, struct ggml_tensor ** grad_accs) {
    if (!g->grads) GGML_ABORT("ggml_build_backward_expand: the graph has no room for gradients (ggml_new_graph_custom(ctx, size, true))");
    ggml_backward_ctx bw = { ctx, g, std::vector<bool>(g->visited_hash_set.size, false) };
    const int n_fwd = g->n_nodes;

    // Which nodes lead to a parameter (forward order: sources first).
    bool has_loss = false;
    for (int i = 0; i < n_fwd; i++) {
        ggml_tensor * node = g->nodes[i];
        has_loss |= (node->flags & GGML_TENSOR_FLAG_LOSS) != 0;
        bool need = (node->flags & GGML_TENSOR_FLAG_PARAM) != 0;
        const ggml_op_info * info = ggml_op_get_info(node->op);
        if (!need && !(info->flags & GGML_OP_FLAG_NO_GRAD) && is_float(node->type)) {
            for (int j = 0; j < GGML_MAX_SRC && !need; j++) need = ggml_bw_needs(&bw, node->src[j]);
        }
        if (!need) continue;
        if (node->view_src && !(info->flags & GGML_OP_FLAG_VIEW) && node->op != GGML_OP_CPY && node->op != GGML_OP_SET_ROWS &&
            node->op != GGML_OP_NONE) {
            GGML_ABORT("ggml_build_backward_expand: '%s' (%s) is computed in place, which overwrites a value the "
                       "backward pass needs: use the op's non-inplace form", node->name, ggml_op_desc(node));
        }
        bw.needed[slot_of(g, node)] = true;
    }
    if (!has_loss) GGML_ABORT("ggml_build_backward_expand: no tensor of the graph is flagged with ggml_set_loss");

    // Seeds: the loss's gradient (set to 1 by ggml_graph_reset) and the parameters' accumulators.
    for (int i = 0; i < n_fwd; i++) {
        ggml_tensor * node = g->nodes[i];
        const long s = slot_of(g, node);
        if (grad_accs && grad_accs[i]) {
            GGML_ASSERT(grad_accs[i]->type == GGML_TYPE_F32 && ggml_are_same_shape(grad_accs[i], node));
            g->grad_accs[s] = grad_accs[i];
            g->grads[s] = grad_accs[i];
        } else if (node->flags & GGML_TENSOR_FLAG_LOSS) {
            ggml_tensor * acc = ggml_new_tensor(ctx, GGML_TYPE_F32, GGML_MAX_DIMS, node->ne);
            ggml_format_name(acc, "grad for %.50s", node->name);
            g->grad_accs[s] = acc;
            g->grads[s] = acc;
        }
    }

    for (int i = n_fwd - 1; i >= 0; i--) {
        ggml_tensor * node = g->nodes[i];
        const long s = slot_of(g, node);
        ggml_tensor * grad = g->grads[s];
        if (!grad || !bw.needed[s] || node->op == GGML_OP_NONE) continue;
        bool any = false;
        for (int j = 0; j < GGML_MAX_SRC; j++) any |= ggml_bw_needs(&bw, node->src[j]);
        if (!any) continue;
        const ggml_op_info * info = ggml_op_get_info(node->op);
        if (!info->backward) {
            GGML_ABORT("ggml_build_backward_expand: op %s ('%s') has no backward rule", ggml_op_desc(node), node->name);
        }
        info->backward(&bw, node, grad);
    }

    for (int i = 0; i < n_fwd; i++) {
        ggml_tensor * node = g->nodes[i];
        if (!(node->flags & GGML_TENSOR_FLAG_PARAM)) continue;
        const long s = slot_of(g, node);
        ggml_tensor * grad = g->grads[s];
        if (!grad) continue;
        if (!g->grad_accs[s]) ggml_set_output(grad);  // the planner must not reuse its memory
        ggml_build_forward_expand(g, grad);
    }
}

struct ggml_tensor * ggml_graph_get_grad(const struct ggml_cgraph * g, const struct ggml_tensor * node) {
    if (!g->grads) return nullptr;
    const long s = slot_of(g, node);
    return s >= 0 ? g->grads[s] : nullptr;
}

struct ggml_tensor * ggml_graph_get_grad_acc(const struct ggml_cgraph * g, const struct ggml_tensor * node) {
    if (!g->grad_accs) return nullptr;
    const long s = slot_of(g, node);
    return s >= 0 ? g->grad_accs[s] : nullptr;
}

void ggml_graph_reset(struct ggml_cgraph * g) {
    if (!g->grads) return;
    for (int i = 0; i < g->n_nodes; i++) {
        ggml_tensor * node = g->nodes[i];
        if (node->op == GGML_OP_OPT_STEP_ADAMW) {
            ggml_set_zero(node->src[2]);
            ggml_set_zero(node->src[3]);
        }
        ggml_tensor * acc = ggml_graph_get_grad_acc(g, node);
        if (!acc) continue;
        GGML_ASSERT(acc->data && "ggml_graph_reset: allocate the graph first");
        if (node->flags & GGML_TENSOR_FLAG_LOSS) {
            GGML_ASSERT(acc->type == GGML_TYPE_F32);
            ggml_set_f32(acc, 1.0f);
        } else {
            ggml_set_zero(acc);
        }
    }
}
