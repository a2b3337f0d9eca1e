// ggml-checkpoint.cpp - gradient checkpointing: a transform of the backward graph that makes it
// read recomputed copies of forward activations instead of the activations themselves, so the
// planner can free them after the forward pass (ggml.h, ggml_build_backward_checkpointed).
#include "ggml-impl.h"

#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace {

struct recompute_plan {
    std::unordered_set<const ggml_tensor *> forward;      // nodes of the forward pass
    std::unordered_set<const ggml_tensor *> checkpoints;
    std::unordered_set<const ggml_tensor *> needed;       // forward tensors to recompute
    std::unordered_map<const ggml_tensor *, ggml_tensor *> copies;

    // Values the backward pass may read where they are: they live through it anyway (inputs,
    // params, leafs, outputs) or the user chose to keep them (checkpoints).
    bool kept(const ggml_tensor * t) const {
        if (!forward.count(t) || checkpoints.count(t) || t->op == GGML_OP_NONE) return true;
        return (t->flags & (GGML_TENSOR_FLAG_INPUT | GGML_TENSOR_FLAG_PARAM | GGML_TENSOR_FLAG_OUTPUT | GGML_TENSOR_FLAG_LOSS)) != 0;
    }

    void mark(const ggml_tensor * t) {
        if (t && !kept(t)) needed.insert(t);
    }

    ggml_tensor * map(ggml_tensor * t) const {
        if (!t) return nullptr;
        auto it = copies.find(t);
        return it == copies.end() ? t : it->second;
    }
};

// A tensor that computes what t computes, from the recomputed versions of t's sources.
ggml_tensor * make_copy(ggml_context * ctx, const recompute_plan & plan, ggml_tensor * t) {
    // A view (or in-place result) over memory that is kept still holds its value: nothing to redo.
    if (t->view_src && plan.map(t->view_src) == t->view_src) return t;
    const bool no_alloc = ggml_get_no_alloc(ctx);
    ggml_set_no_alloc(ctx, true);  // the planner places copies; views must not get memory either
    ggml_tensor * c = ggml_new_tensor(ctx, t->type, GGML_MAX_DIMS, t->ne);
    ggml_set_no_alloc(ctx, no_alloc);
    memcpy(c->nb, t->nb, sizeof(c->nb));
    c->op = t->op;
    memcpy(c->op_params, t->op_params, sizeof(c->op_params));
    for (int j = 0; j < GGML_MAX_SRC; j++) c->src[j] = plan.map(t->src[j]);
    if (t->view_src) {
        // A view of a recomputed tensor becomes the same view of its copy.
        c->view_src = plan.map(t->view_src);
        c->view_offs = t->view_offs;
        c->data = nullptr;
    }
    ggml_format_name(c, "%.40s (recomputed)", t->name);
    return c;
}

}  // namespace

void ggml_build_backward_checkpointed(struct ggml_context * ctx, struct ggml_cgraph * g, struct ggml_tensor ** grad_accs,
                                      struct ggml_tensor ** checkpoints, int n_checkpoints) {
    const int n_fwd = g->n_nodes;
    ggml_build_backward_expand(ctx, g, grad_accs);

    recompute_plan plan;
    for (int i = 0; i < n_fwd; i++) plan.forward.insert(g->nodes[i]);
    for (int i = 0; i < n_checkpoints; i++) plan.checkpoints.insert(checkpoints[i]);

    // What the backward pass reads of the forward pass, then (forward nodes in reverse order)
    // what those values are computed from, back to kept values.
    for (int i = n_fwd; i < g->n_nodes; i++) {
        ggml_tensor * node = g->nodes[i];
        for (int j = 0; j < GGML_MAX_SRC; j++) plan.mark(node->src[j]);
        plan.mark(node->view_src);
    }
    for (int i = n_fwd - 1; i >= 0; i--) {
        ggml_tensor * node = g->nodes[i];
        if (!plan.needed.count(node)) continue;
        for (int j = 0; j < GGML_MAX_SRC; j++) plan.mark(node->src[j]);
        plan.mark(node->view_src);
    }
    // Copies in forward order, so every source's copy exists before its readers'.
    for (int i = 0; i < n_fwd; i++) {
        ggml_tensor * node = g->nodes[i];
        if (plan.needed.count(node)) {
            ggml_tensor * c = make_copy(ctx, plan, node);
            if (c != node) plan.copies[node] = c;
        }
    }
    for (int i = n_fwd; i < g->n_nodes; i++) {
        ggml_tensor * node = g->nodes[i];
        for (int j = 0; j < GGML_MAX_SRC; j++) node->src[j] = plan.map(node->src[j]);
        if (node->view_src && plan.copies.count(node->view_src)) {
            node->view_src = plan.map(node->view_src);
            node->data = nullptr;
        }
    }

    // Rebuild: the forward nodes in their order, then each backward node in its order, which
    // pulls in the copies it reads just before it. Gradients are indexed by hash slot, so they
    // are carried over by tensor.
    struct grad_entry { ggml_tensor * key, * grad, * acc; };
    std::vector<grad_entry> grads;
    const ggml_hash_set & hs = g->visited_hash_set;
    for (size_t s = 0; s < hs.size; s++) {
        const bool used = (hs.used[s >> 5] >> (s & 31)) & 1u;
        if (used && (g->grads[s] || g->grad_accs[s])) grads.push_back({ hs.keys[s], g->grads[s], g->grad_accs[s] });
    }
    const std::vector<ggml_tensor *> nodes(g->nodes, g->nodes + g->n_nodes);
    ggml_graph_clear(g);
    memset(g->grads, 0, sizeof(ggml_tensor *) * hs.size);
    memset(g->grad_accs, 0, sizeof(ggml_tensor *) * hs.size);
    for (int i = 0; i < n_fwd; i++) ggml_build_forward_expand(g, nodes[i]);
    GGML_ASSERT(g->n_nodes == n_fwd);
    for (size_t i = n_fwd; i < nodes.size(); i++) ggml_build_forward_expand(g, nodes[i]);
    for (const grad_entry & e : grads) {
        GGML_ASSERT(ggml_hash_contains(&g->visited_hash_set, e.key));
        const size_t s = ggml_hash_find(&g->visited_hash_set, e.key);
        g->grads[s] = e.grad;
        g->grad_accs[s] = e.acc;
    }
}
