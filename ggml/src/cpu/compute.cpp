// compute.cpp - the CPU executor: plans the work buffer, then runs the graph's nodes in order on
// the persistent thread pool, every thread taking its share of each node, with a barrier between
// nodes. Nothing is allocated while the graph computes.
#include "cpu-ops.h"
#include "simd.h"
#include "threadpool.h"

#include <mutex>

static const size_t CACHE_LINE = 64;

void ggml_cpu_barrier(const struct ggml_compute_params * params) {
    if (params->nth > 1) params->tp->barrier();
}

static bool op_is_noop(const ggml_tensor * node) {
    switch (node->op) {
        case GGML_OP_NONE:
        case GGML_OP_RESHAPE:
        case GGML_OP_VIEW:
        case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE:
            return true;
        default:
            return ggml_is_empty(node);
    }
}

int ggml_cpu_op_n_tasks(const struct ggml_tensor * node, int n_threads) {
    return op_is_noop(node) ? 1 : n_threads;
}

size_t ggml_cpu_op_work_size(const struct ggml_tensor * node, int n_threads) {
    switch (node->op) {
        case GGML_OP_MUL_MAT:            return ggml_cpu_mul_mat_work_size(node, n_threads);
        case GGML_OP_OUT_PROD:           return ggml_cpu_out_prod_work_size(node, n_threads);
        case GGML_OP_SOFT_MAX:           return ggml_cpu_soft_max_work_size(node, n_threads);
        case GGML_OP_CROSS_ENTROPY_LOSS: return ggml_cpu_loss_work_size(node, n_threads);
        default:                         return 0;
    }
}

void ggml_cpu_compute_forward(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    switch (dst->op) {
        case GGML_OP_DUP:
        case GGML_OP_CPY:
        case GGML_OP_CONT:               ggml_cpu_forward_dup(params, dst); break;
        case GGML_OP_ADD:                ggml_cpu_forward_add(params, dst); break;
        case GGML_OP_ADD1:               ggml_cpu_forward_add1(params, dst); break;
        case GGML_OP_SUB:                ggml_cpu_forward_sub(params, dst); break;
        case GGML_OP_MUL:                ggml_cpu_forward_mul(params, dst); break;
        case GGML_OP_DIV:                ggml_cpu_forward_div(params, dst); break;
        case GGML_OP_SQR:                ggml_cpu_forward_sqr(params, dst); break;
        case GGML_OP_SQRT:               ggml_cpu_forward_sqrt(params, dst); break;
        case GGML_OP_LOG:                ggml_cpu_forward_log(params, dst); break;
        case GGML_OP_SCALE:              ggml_cpu_forward_scale(params, dst); break;
        case GGML_OP_SUM:                ggml_cpu_forward_sum(params, dst); break;
        case GGML_OP_SUM_ROWS:           ggml_cpu_forward_sum_rows(params, dst); break;
        case GGML_OP_MEAN:               ggml_cpu_forward_mean(params, dst); break;
        case GGML_OP_ARGMAX:             ggml_cpu_forward_argmax(params, dst); break;
        case GGML_OP_REPEAT:             ggml_cpu_forward_repeat(params, dst); break;
        case GGML_OP_CONCAT:             ggml_cpu_forward_concat(params, dst); break;
        case GGML_OP_NORM:               ggml_cpu_forward_norm(params, dst); break;
        case GGML_OP_RMS_NORM:           ggml_cpu_forward_rms_norm(params, dst); break;
        case GGML_OP_MUL_MAT:            ggml_cpu_forward_mul_mat(params, dst); break;
        case GGML_OP_OUT_PROD:           ggml_cpu_forward_out_prod(params, dst); break;
        case GGML_OP_GET_ROWS:           ggml_cpu_forward_get_rows(params, dst); break;
        case GGML_OP_DIAG_MASK_INF:      ggml_cpu_forward_diag_mask_inf(params, dst); break;
        case GGML_OP_SOFT_MAX:           ggml_cpu_forward_soft_max(params, dst); break;
        case GGML_OP_ROPE:               ggml_cpu_forward_rope(params, dst); break;
        case GGML_OP_UNARY:              ggml_cpu_forward_unary(params, dst); break;
        case GGML_OP_CROSS_ENTROPY_LOSS: ggml_cpu_forward_cross_entropy_loss(params, dst); break;
        case GGML_OP_NONE:
        case GGML_OP_RESHAPE:
        case GGML_OP_VIEW:
        case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE:
            break;
        default:
            GGML_ABORT("op %s has no CPU kernel", ggml_op_name(dst->op));
    }
}

struct ggml_cplan ggml_graph_plan(const struct ggml_cgraph * cgraph, int n_threads) {
    if (n_threads <= 0) n_threads = 1;
    size_t work_size = 0;
    for (int i = 0; i < cgraph->n_nodes; i++) {
        const size_t s = ggml_cpu_op_work_size(cgraph->nodes[i], n_threads);
        if (s > work_size) work_size = s;
    }
    if (work_size > 0) work_size += CACHE_LINE * n_threads;  // room to keep per-thread slices apart
    struct ggml_cplan plan = {};
    plan.work_size = work_size;
    plan.n_threads = n_threads;
    return plan;
}

// Checks, before anything runs, that every tensor the graph touches has memory.
static bool graph_has_data(const ggml_cgraph * g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const ggml_tensor * n = g->nodes[i];
        if (!op_is_noop(n) && n->data == nullptr) {
            ggml_log_error("ggml_graph_compute: node '%s' (%s) has no data (allocate the graph first)\n",
                           n->name, ggml_op_desc(n));
            return false;
        }
        for (int j = 0; j < GGML_MAX_SRC; j++) {
            const ggml_tensor * s = n->src[j];
            if (s && !op_is_noop(n) && s->data == nullptr && !ggml_is_empty(s)) {
                ggml_log_error("ggml_graph_compute: tensor '%s' read by '%s' has no data\n", s->name, n->name);
                return false;
            }
            // Repacked data means something only to the kernels that know the layout: mul_mat's
            // and out_prod's, as their src0 (even views are noops that would pass on wrong bytes).
            const ggml_tensor * owner = s && s->view_src ? s->view_src : s;
            if (owner && (owner->flags & GGML_TENSOR_FLAG_REPACKED) &&
                !((n->op == GGML_OP_MUL_MAT || n->op == GGML_OP_OUT_PROD) && j == 0 && s == owner)) {
                ggml_log_error("ggml_graph_compute: tensor '%s' is repacked for the CPU matrix products and cannot be read by '%s' (%s)\n",
                               owner->name, n->name, ggml_op_desc(n));
                return false;
            }
        }
    }
    return true;
}

enum ggml_status ggml_graph_compute(struct ggml_cgraph * cgraph, struct ggml_cplan * cplan) {
    GGML_ASSERT(cplan && cplan->n_threads > 0);
    GGML_ASSERT(cplan->work_size == 0 || cplan->work_data != nullptr);
    if (!graph_has_data(cgraph)) return GGML_STATUS_FAILED;

    // One graph at a time on the shared pool.
    static std::mutex compute_mutex;
    std::lock_guard<std::mutex> lock(compute_mutex);

    ggml_threadpool & tp = ggml_threadpool_global();
    const int n_threads = cplan->n_threads;
    std::atomic<bool> aborted{false};

    tp.run(n_threads, [&](int ith, int nth) {
        ggml_compute_params params;
        params.ith = ith;
        params.nth = nth;
        params.wsize = cplan->work_size;
        params.wdata = cplan->work_data;
        params.tp = &tp;
        for (int i = 0; i < cgraph->n_nodes; i++) {
            ggml_tensor * node = cgraph->nodes[i];
            if (op_is_noop(node)) continue;
            ggml_cpu_compute_forward(&params, node);
            if (ith == 0 && cplan->abort_callback && cplan->abort_callback(cplan->abort_callback_data)) {
                aborted = true;
            }
            ggml_cpu_barrier(&params);  // the next node may read this one; also publishes `aborted`
            if (aborted) break;
        }
    });
    return aborted ? GGML_STATUS_ABORTED : GGML_STATUS_SUCCESS;
}

enum ggml_status ggml_graph_compute_with_ctx(struct ggml_context * ctx, struct ggml_cgraph * cgraph, int n_threads) {
    struct ggml_cplan plan = ggml_graph_plan(cgraph, n_threads);
    if (plan.work_size > 0) {
        plan.work_data = (uint8_t *) ggml_new_buffer(ctx, plan.work_size);
        if (!plan.work_data) {
            ggml_log_error("ggml_graph_compute_with_ctx: no room for a %zu-byte work buffer in the context\n", plan.work_size);
            return GGML_STATUS_ALLOC_FAILED;
        }
    }
    return ggml_graph_compute(cgraph, &plan);
}

// ---- build facts ---------------------------------------------------------------------------
const char * ggml_cpu_isa_name(void) {
#if defined(GGML_SIMD_AVX512)
    return "AVX512";
#elif defined(GGML_SIMD_AVX2)
    return "AVX2";
#elif defined(GGML_SIMD_NEON)
    return "NEON";
#else
    return "scalar";
#endif
}
int ggml_cpu_has_avx2(void) {
#if defined(GGML_SIMD_AVX2)
    return 1;
#else
    return 0;
#endif
}
int ggml_cpu_has_avx512(void) {
#if defined(GGML_SIMD_AVX512)
    return 1;
#else
    return 0;
#endif
}
int ggml_cpu_has_avx512_vnni(void) {
#if defined(GGML_SIMD_AVX512) && defined(__AVX512VNNI__)
    return 1;
#else
    return 0;
#endif
}
int ggml_cpu_has_neon(void) {
#if defined(GGML_SIMD_NEON)
    return 1;
#else
    return 0;
#endif
}
int ggml_cpu_has_dotprod(void) {
#if defined(GGML_SIMD_NEON) && defined(__ARM_FEATURE_DOTPROD)
    return 1;
#else
    return 0;
#endif
}
