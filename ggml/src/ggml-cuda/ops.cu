// ops.cu - the CUDA backend's op table: which (op, types, shapes) its kernels compute
// (supports_op: true exactly where a kernel below gives the CPU's result, so the scheduler leaves
// everything else to the CPU), and the dispatch of a node to its launcher.
#include "ops.cuh"
#include "quant.cuh"

namespace {

bool floats(const ggml_tensor * t) { return t && is_float_type(t->type); }

bool f32(const ggml_tensor * t) { return t && t->type == GGML_TYPE_F32; }

bool same_shape(const ggml_tensor * a, const ggml_tensor * b) { return a && b && ggml_are_same_shape(a, b); }

// The CPU's repacked weights are readable by its own matrix kernels only.
bool reads_repacked(const ggml_tensor * op) {
    for (int j = 0; j < GGML_MAX_SRC; j++) {
        const ggml_tensor * s = op->src[j];
        if (!s) continue;
        const ggml_tensor * o = s->view_src ? s->view_src : s;
        if (o->flags & GGML_TENSOR_FLAG_REPACKED) return true;
    }
    return false;
}

bool soft_max_supported(const ggml_tensor * op) {
    const ggml_tensor * src = op->src[0], * mask = op->src[1];
    if (!f32(src) || !f32(op) || !same_shape(src, op)) return false;
    if (!mask) return true;
    return (mask->type == GGML_TYPE_F32 || mask->type == GGML_TYPE_F16) && mask->nb[0] == ggml_type_size(mask->type) &&
           mask->ne[0] == op->ne[0] && mask->ne[1] >= op->ne[1] && mask->ne[2] > 0 && op->ne[2] % mask->ne[2] == 0 &&
           mask->ne[3] > 0 && op->ne[3] % mask->ne[3] == 0;
}

}  // namespace

bool ggml_cuda_supports_op(const ggml_tensor * op) {
    const ggml_tensor * s0 = op->src[0], * s1 = op->src[1], * s2 = op->src[2];
    if (op->op != GGML_OP_NONE && reads_repacked(op)) return false;
    switch (op->op) {
        case GGML_OP_NONE:
        case GGML_OP_RESHAPE:
        case GGML_OP_VIEW:
        case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE:
            return true;
        case GGML_OP_DUP:
        case GGML_OP_CONT:
        case GGML_OP_CPY:
            return s0 && ggml_cuda_cpy_supported(s0, op);
        case GGML_OP_ADD:
        case GGML_OP_ADD1:
        case GGML_OP_SUB:
        case GGML_OP_MUL:
        case GGML_OP_DIV:
            return floats(s0) && floats(s1) && op->type == s0->type && same_shape(s0, op) && ggml_can_repeat(s1, s0);
        case GGML_OP_SQR:
        case GGML_OP_SQRT:
        case GGML_OP_LOG:
        case GGML_OP_SCALE:
            return floats(s0) && floats(op) && same_shape(s0, op);
        case GGML_OP_UNARY:
            return floats(s0) && op->type == s0->type && same_shape(s0, op) && ggml_cuda_unary_supported(ggml_get_op_params_i32(op, 0));
        case GGML_OP_SUM:
            return floats(s0) && floats(op) && ggml_nelements(op) == 1;
        case GGML_OP_SUM_ROWS:
        case GGML_OP_MEAN:
            return floats(s0) && floats(op) && op->ne[0] == 1 && op->ne[1] == s0->ne[1] && op->ne[2] == s0->ne[2] && op->ne[3] == s0->ne[3];
        case GGML_OP_ARGMAX:
            return floats(s0) && op->type == GGML_TYPE_I32 && s0->ne[2] == 1 && s0->ne[3] == 1 && ggml_nelements(op) == s0->ne[1];
        case GGML_OP_REPEAT:
            return s0 && s0->type == op->type && ggml_blck_size(op->type) == 1 &&
                   (ggml_type_size(op->type) == 2 || ggml_type_size(op->type) == 4) && ggml_can_repeat(s0, op);
        case GGML_OP_CONCAT:
            return s0 && s1 && s0->type == op->type && s1->type == op->type && ggml_blck_size(op->type) == 1 &&
                   (ggml_type_size(op->type) == 2 || ggml_type_size(op->type) == 4);
        case GGML_OP_NORM:
        case GGML_OP_RMS_NORM:
            return f32(s0) && f32(op) && same_shape(s0, op);
        case GGML_OP_MUL_MAT:
            return ggml_cuda_mul_mat_supported(op);
        case GGML_OP_MUL_MAT_ID:
            return ggml_cuda_mul_mat_id_supported(op);
        case GGML_OP_ARGSORT:
            return ggml_cuda_argsort_supported(op);
        case GGML_OP_OUT_PROD:
            return ggml_cuda_out_prod_supported(op);
        case GGML_OP_GET_ROWS:
            return s0 && s1 && ggml_cuda_get_rows_supported(op);
        case GGML_OP_SET_ROWS:
            return ggml_cuda_set_rows_supported(op);
        case GGML_OP_DIAG_MASK_INF:
        case GGML_OP_DIAG_MASK_ZERO:
            return f32(s0) && f32(op) && same_shape(s0, op);
        case GGML_OP_SOFT_MAX:
            return soft_max_supported(op);
        case GGML_OP_ROPE:
        case GGML_OP_ROPE_BACK:
            return ggml_cuda_rope_supported(op);
        case GGML_OP_FLASH_ATTN_EXT:
            return ggml_cuda_flash_attn_supported(op);
        case GGML_OP_CROSS_ENTROPY_LOSS:
            return f32(s0) && f32(s1) && f32(op) && same_shape(s0, s1) && ggml_nelements(op) == 1;
        case GGML_OP_CROSS_ENTROPY_LOSS_BACK:
            return f32(s0) && ggml_nelements(s0) == 1 && f32(s1) && f32(s2) && f32(op) && same_shape(s1, s2) && same_shape(s1, op);
        case GGML_OP_ACC:
            return f32(s1) && f32(op) && ggml_is_contiguous(op) && (!s0 || (f32(s0) && same_shape(s0, op)));
        case GGML_OP_REPEAT_BACK:
            return floats(s0) && f32(op) && op->nb[0] == sizeof(float) && ggml_can_repeat(op, s0);
        case GGML_OP_UNARY_BACK:
            return floats(s0) && floats(s1) && f32(op) && same_shape(s0, op) && same_shape(s1, op) &&
                   ggml_cuda_unary_supported(ggml_get_op_params_i32(op, 0));
        case GGML_OP_NORM_BACK:
        case GGML_OP_RMS_NORM_BACK:
            return f32(s0) && f32(s1) && f32(op) && same_shape(s0, op) && same_shape(s1, op);
        case GGML_OP_SOFT_MAX_BACK:
            return f32(s0) && f32(s1) && f32(op) && same_shape(s0, op) && same_shape(s1, op);
        case GGML_OP_GET_ROWS_BACK:
            return floats(s0) && s1 && s1->type == GGML_TYPE_I32 && f32(op) && ggml_is_contiguous(op);
        case GGML_OP_OPT_STEP_ADAMW:
        case GGML_OP_OPT_STEP_SGD:
            return ggml_cuda_opt_step_supported(op);
        case GGML_OP_FLASH_ATTN_BACK:
            return ggml_cuda_flash_attn_back_supported(op);
        default:
            return false;
    }
}

bool ggml_cuda_compute_node(ggml_cuda_ctx & ctx, ggml_tensor * node) {
    switch (node->op) {
        case GGML_OP_NONE:
        case GGML_OP_RESHAPE:
        case GGML_OP_VIEW:
        case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE:
            return true;
        case GGML_OP_DUP:
        case GGML_OP_CONT:
        case GGML_OP_CPY:                     ggml_cuda_op_cpy(ctx, node); return true;
        case GGML_OP_ADD:
        case GGML_OP_ADD1:                    ggml_cuda_op_add(ctx, node); return true;
        case GGML_OP_SUB:                     ggml_cuda_op_sub(ctx, node); return true;
        case GGML_OP_MUL:                     ggml_cuda_op_mul(ctx, node); return true;
        case GGML_OP_DIV:                     ggml_cuda_op_div(ctx, node); return true;
        case GGML_OP_SQR:                     ggml_cuda_op_sqr(ctx, node); return true;
        case GGML_OP_SQRT:                    ggml_cuda_op_sqrt(ctx, node); return true;
        case GGML_OP_LOG:                     ggml_cuda_op_log(ctx, node); return true;
        case GGML_OP_SCALE:                   ggml_cuda_op_scale(ctx, node); return true;
        case GGML_OP_UNARY:                   ggml_cuda_op_unary(ctx, node); return true;
        case GGML_OP_SUM:                     ggml_cuda_op_sum(ctx, node); return true;
        case GGML_OP_SUM_ROWS:                ggml_cuda_op_sum_rows(ctx, node); return true;
        case GGML_OP_MEAN:                    ggml_cuda_op_mean(ctx, node); return true;
        case GGML_OP_ARGMAX:                  ggml_cuda_op_argmax(ctx, node); return true;
        case GGML_OP_REPEAT:                  ggml_cuda_op_repeat(ctx, node); return true;
        case GGML_OP_CONCAT:                  ggml_cuda_op_concat(ctx, node); return true;
        case GGML_OP_NORM:                    ggml_cuda_op_norm(ctx, node); return true;
        case GGML_OP_RMS_NORM:                ggml_cuda_op_rms_norm(ctx, node); return true;
        case GGML_OP_MUL_MAT:                 ggml_cuda_op_mul_mat(ctx, node); return true;
        case GGML_OP_MUL_MAT_ID:              ggml_cuda_op_mul_mat_id(ctx, node); return true;
        case GGML_OP_ARGSORT:                 ggml_cuda_op_argsort(ctx, node); return true;
        case GGML_OP_OUT_PROD:                ggml_cuda_op_out_prod(ctx, node); return true;
        case GGML_OP_GET_ROWS:                ggml_cuda_op_get_rows(ctx, node); return true;
        case GGML_OP_SET_ROWS:                ggml_cuda_op_set_rows(ctx, node); return true;
        case GGML_OP_DIAG_MASK_INF:           ggml_cuda_op_diag_mask_inf(ctx, node); return true;
        case GGML_OP_DIAG_MASK_ZERO:          ggml_cuda_op_diag_mask_zero(ctx, node); return true;
        case GGML_OP_SOFT_MAX:                ggml_cuda_op_soft_max(ctx, node); return true;
        case GGML_OP_ROPE:                    ggml_cuda_op_rope(ctx, node); return true;
        case GGML_OP_ROPE_BACK:               ggml_cuda_op_rope_back(ctx, node); return true;
        case GGML_OP_FLASH_ATTN_EXT:          ggml_cuda_op_flash_attn_ext(ctx, node, nullptr); return true;
        case GGML_OP_FLASH_ATTN_BACK:         ggml_cuda_op_flash_attn_back(ctx, node); return true;
        case GGML_OP_CROSS_ENTROPY_LOSS:      ggml_cuda_op_cross_entropy_loss(ctx, node); return true;
        case GGML_OP_CROSS_ENTROPY_LOSS_BACK: ggml_cuda_op_cross_entropy_loss_back(ctx, node); return true;
        case GGML_OP_ACC:                     ggml_cuda_op_acc(ctx, node); return true;
        case GGML_OP_REPEAT_BACK:             ggml_cuda_op_repeat_back(ctx, node); return true;
        case GGML_OP_UNARY_BACK:              ggml_cuda_op_unary_back(ctx, node); return true;
        case GGML_OP_NORM_BACK:               ggml_cuda_op_norm_back(ctx, node); return true;
        case GGML_OP_RMS_NORM_BACK:           ggml_cuda_op_rms_norm_back(ctx, node); return true;
        case GGML_OP_SOFT_MAX_BACK:           ggml_cuda_op_soft_max_back(ctx, node); return true;
        case GGML_OP_GET_ROWS_BACK:           ggml_cuda_op_get_rows_back(ctx, node); return true;
        case GGML_OP_OPT_STEP_ADAMW:          ggml_cuda_op_opt_step_adamw(ctx, node); return true;
        case GGML_OP_OPT_STEP_SGD:            ggml_cuda_op_opt_step_sgd(ctx, node); return true;
        default:
            return false;
    }
}

// Nodes run as one kernel: rms_norm then the multiply by its weight (and the residual's add
// before them), silu (gelu) then the multiply by up, generation's products of one activation
// (q, k and v; gate and up). Every node's result is still written (a
// later node or another split may read it), so only launches are saved, which is what
// generation on a GPU is bound by.
namespace {

// The first node from x on that computes (views only name memory); n_nodes if none.
int next_computing(const ggml_cgraph * g, int x) {
    while (x < g->n_nodes && ggml_op_is_view(g->nodes[x]->op)) x++;
    return x;
}

// The node after node i (past views) when it is a product whose activations are node i's result
// (or a view of it) and which converts them first (8-bit blocks for ggml_cuda_mmvq, F16 for
// cuBLAS): a kernel producing that result can write them in that form in the same launch
// (ggml_cuda_launch_quantizing checks the view).
const ggml_tensor * act_reader(const ggml_cgraph * g, int i) {
    const int j = next_computing(g, i + 1);
    if (j >= g->n_nodes) return nullptr;
    const ggml_tensor * next = g->nodes[j], * b = next->src[1];
    const bool reads = b == g->nodes[i] || (b && b->view_src == g->nodes[i]);
    return reads && ggml_cuda_mul_mat_act_form(next) != 0 ? next : nullptr;
}

// Whether one kernel may compute the nodes together: no result of theirs overlaps an input from
// outside the group unless it is that input exactly (the same bytes in the same layout, read by
// the thread that then overwrites it). The graph allocator may give a later node the memory of
// an input that its predecessor was the last to read (a residual after the add); run as one
// kernel, a block could then overwrite rows another block has yet to read.
bool fused_writes_safe(std::initializer_list<const ggml_tensor *> nodes) {
    auto in_group = [&](const ggml_tensor * t) {
        for (const ggml_tensor * n : nodes) {
            if (t == n) return true;
        }
        return false;
    };
    auto same = [](const ggml_tensor * x, const ggml_tensor * y) {
        return x->data == y->data && x->type == y->type && ggml_are_same_shape(x, y) && memcmp(x->nb, y->nb, sizeof(x->nb)) == 0;
    };
    for (const ggml_tensor * m : nodes) {
        for (const ggml_tensor * src : m->src) {
            if (!src || in_group(src) || ggml_is_empty(src)) continue;
            for (const ggml_tensor * w : nodes) {
                if (ggml_cuda_overlaps(w, src) && !same(w, src)) return false;
            }
        }
    }
    return true;
}

int compute_fused(ggml_cuda_ctx & ctx, ggml_cgraph * g, int i) {
    ggml_tensor * node = g->nodes[i];
    if (!ctx.no_fusion && node->op == GGML_OP_MUL_MAT) {  // q, k, v (gate, up) of one activation
        int n = 1;
        while (n < 3 && i + n < g->n_nodes && ggml_cuda_mmvq_multi_fusable(node, g->nodes[i + n])) n++;
        if (n > 1) {
            ggml_cuda_mmvq_multi(ctx, g->nodes + i, n);
            return n;
        }
        // prompts: their weights dequantized in one launch
        while (n < 3 && i + n < g->n_nodes && ggml_cuda_gemm_multi_fusable(node, g->nodes[i + n])) n++;
        if (n > 1) {
            ggml_cuda_gemm_multi(ctx, g->nodes + i, n);
            return n;
        }
    }
    if (!ctx.no_fusion && node->op == GGML_OP_ROPE) {  // the keys into the cache as they are rotated
        const int j = next_computing(g, i + 1);
        if (j < g->n_nodes && ggml_cuda_rope_set_rows_fusable(node, g->nodes[j])) {
            int last = j, k = next_computing(g, j + 1);  // the values' store after the keys', then the queries' rope
            ggml_tensor * set_rows_v = k < g->n_nodes && ggml_cuda_set_rows_joins_rope(node, g->nodes[j], g->nodes[k]) ? g->nodes[k] : nullptr;
            if (set_rows_v) last = k;
            const int r = next_computing(g, last + 1);
            ggml_tensor * rope2 = r < g->n_nodes && ggml_cuda_rope_joins_rope(node, g->nodes[j], set_rows_v, g->nodes[r]) ? g->nodes[r] : nullptr;
            if (rope2) last = r;
            ggml_cuda_op_rope_set_rows(ctx, node, g->nodes[j], set_rows_v, rope2, rope2 ? act_reader(g, r) : nullptr);
            return last - i + 1;
        }
    }
    if (i + 2 < g->n_nodes && !ctx.no_fusion && node->op == GGML_OP_ADD && g->nodes[i + 1]->op == GGML_OP_RMS_NORM &&
        g->nodes[i + 2]->op == GGML_OP_MUL && ggml_cuda_add_rms_norm_mul_fusable(node, g->nodes[i + 1], g->nodes[i + 2]) &&
        fused_writes_safe({ node, g->nodes[i + 1], g->nodes[i + 2] })) {
        ggml_cuda_op_add_rms_norm_mul(ctx, node, g->nodes[i + 1], g->nodes[i + 2], act_reader(g, i + 2));
        return 3;
    }
    if (i + 1 < g->n_nodes && !ctx.no_fusion) {
        ggml_tensor * next = g->nodes[i + 1];
        if (next->op == GGML_OP_MUL && (next->src[0] == node || next->src[1] == node) && fused_writes_safe({ node, next })) {
            if (node->op == GGML_OP_RMS_NORM && ggml_cuda_rms_norm_mul_fusable(node, next)) {
                ggml_cuda_op_rms_norm_mul(ctx, node, next, act_reader(g, i + 1));
                return 2;
            }
            if (node->op == GGML_OP_UNARY && ggml_cuda_unary_mul_fusable(node, next)) {
                ggml_cuda_op_unary_mul(ctx, node, next, act_reader(g, i + 1));
                return 2;
            }
        }
    }
    if (!ctx.no_fusion && (node->op == GGML_OP_CONT || node->op == GGML_OP_CPY || node->op == GGML_OP_DUP)) {
        const ggml_tensor * product = act_reader(g, i);  // the heads of a token as one row, for the output projection
        if (product) {
            ggml_cuda_op_cpy_product(ctx, node, product);
            return 1;
        }
    }
    if (!ctx.no_fusion && node->op == GGML_OP_SOFT_MAX) {  // the probabilities as F16 for the values' product (prompts)
        const ggml_tensor * product = act_reader(g, i);
        if (product) {
            ggml_cuda_op_soft_max(ctx, node, product);
            return 1;
        }
    }
    if (!ctx.no_fusion && node->op == GGML_OP_FLASH_ATTN_EXT) {  // its rows in the form the output projection reads
        const ggml_tensor * product = act_reader(g, i);
        if (product) {
            ggml_cuda_op_flash_attn_ext(ctx, node, product);
            return 1;
        }
    }
    return ggml_cuda_compute_node(ctx, node) ? 1 : 0;
}

}  // namespace

int ggml_cuda_compute_nodes(ggml_cuda_ctx & ctx, ggml_cgraph * g, int i) {
    const int done = compute_fused(ctx, g, i);
    // A node that wrote over the quantized activations' source makes them stale.
    for (int k = i; k < i + done && ctx.act.lo; k++) {
        const ggml_tensor * n = g->nodes[k];
        const char * lo = (const char *) n->data, * hi = lo + ggml_cuda_span(n);
        if (lo < ctx.act.hi && ctx.act.lo < hi) ctx.act = ggml_cuda_ctx::quantized_act();
    }
    if (ctx.act_pending.lo) {  // quantized by the kernel that just wrote them: fresh
        ctx.act = ctx.act_pending;
        ctx.act_pending = ggml_cuda_ctx::quantized_act();
    }
    return done;
}
