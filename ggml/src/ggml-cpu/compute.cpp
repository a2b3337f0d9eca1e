// compute.cpp - the CPU executor: plans the work buffer, then runs the graph's nodes in order on
// the persistent thread pool, every thread taking its share of each node, with a barrier between
// nodes. Nothing is allocated while the graph computes.
#include "cpu-ops.h"
#include "node-perf.h"
#include "kernels.h"
#include "threadpool.h"

#include <chrono>
#include <mutex>

static const size_t CACHE_LINE = 64;

void ggml_cpu_barrier(const struct ggml_compute_params * params) {
    if (params->nth > 1) params->tp->barrier();
}

// ---- the CPU's kernel table: one row per op (forward kernel, scratch size) ---------------------
namespace {

typedef void (*cpu_forward_fn)(const ggml_compute_params * params, ggml_tensor * dst);
typedef size_t (*cpu_work_size_fn)(const ggml_tensor * node, int n_threads);

struct cpu_kernel {
    ggml_op op;
    cpu_forward_fn forward;      // NULL: nothing to compute (views, leafs)
    cpu_work_size_fn work_size;  // NULL: no scratch
};

#define K(OP, fn, ws) { GGML_OP_##OP, fn, ws }
constexpr cpu_kernel cpu_kernels[] = {
    K(NONE,                    nullptr,                                     nullptr),
    K(DUP,                     ggml_cpu_forward_dup,                        nullptr),
    K(ADD,                     ggml_cpu_forward_add,                        nullptr),
    K(ADD1,                    ggml_cpu_forward_add1,                       nullptr),
    K(SUB,                     ggml_cpu_forward_sub,                        nullptr),
    K(MUL,                     ggml_cpu_forward_mul,                        nullptr),
    K(DIV,                     ggml_cpu_forward_div,                        nullptr),
    K(SQR,                     ggml_cpu_forward_sqr,                        nullptr),
    K(SQRT,                    ggml_cpu_forward_sqrt,                       nullptr),
    K(LOG,                     ggml_cpu_forward_log,                        nullptr),
    K(SUM,                     ggml_cpu_forward_sum,                        nullptr),
    K(SUM_ROWS,                ggml_cpu_forward_sum_rows,                   nullptr),
    K(MEAN,                    ggml_cpu_forward_mean,                       nullptr),
    K(ARGMAX,                  ggml_cpu_forward_argmax,                     nullptr),
    K(REPEAT,                  ggml_cpu_forward_repeat,                     nullptr),
    K(CONCAT,                  ggml_cpu_forward_concat,                     nullptr),
    K(NORM,                    ggml_cpu_forward_norm,                       nullptr),
    K(RMS_NORM,                ggml_cpu_forward_rms_norm,                   nullptr),
    K(MUL_MAT,                 ggml_cpu_forward_mul_mat,                    ggml_cpu_mul_mat_work_size),
    K(OUT_PROD,                ggml_cpu_forward_out_prod,                   ggml_cpu_out_prod_work_size),
    K(SCALE,                   ggml_cpu_forward_scale,                      nullptr),
    K(CPY,                     ggml_cpu_forward_dup,                        nullptr),
    K(CONT,                    ggml_cpu_forward_dup,                        nullptr),
    K(RESHAPE,                 nullptr,                                     nullptr),
    K(VIEW,                    nullptr,                                     nullptr),
    K(PERMUTE,                 nullptr,                                     nullptr),
    K(TRANSPOSE,               nullptr,                                     nullptr),
    K(GET_ROWS,                ggml_cpu_forward_get_rows,                   nullptr),
    K(DIAG_MASK_INF,           ggml_cpu_forward_diag_mask_inf,              nullptr),
    K(SOFT_MAX,                ggml_cpu_forward_soft_max,                   ggml_cpu_soft_max_work_size),
    K(ROPE,                    ggml_cpu_forward_rope,                       nullptr),
    K(FLASH_ATTN_EXT,          ggml_cpu_forward_flash_attn_ext,             ggml_cpu_flash_attn_ext_work_size),
    K(UNARY,                   ggml_cpu_forward_unary,                      nullptr),
    K(CROSS_ENTROPY_LOSS,      ggml_cpu_forward_cross_entropy_loss,         ggml_cpu_loss_work_size),
    K(ACC,                     ggml_cpu_forward_acc,                        nullptr),
    K(REPEAT_BACK,             ggml_cpu_forward_repeat_back,                nullptr),
    K(UNARY_BACK,              ggml_cpu_forward_unary_back,                 nullptr),
    K(NORM_BACK,               ggml_cpu_forward_norm_back,                  nullptr),
    K(RMS_NORM_BACK,           ggml_cpu_forward_rms_norm_back,              nullptr),
    K(DIAG_MASK_ZERO,          ggml_cpu_forward_diag_mask_zero,             nullptr),
    K(SOFT_MAX_BACK,           ggml_cpu_forward_soft_max_back,              nullptr),
    K(ROPE_BACK,               ggml_cpu_forward_rope_back,                  nullptr),
    K(GET_ROWS_BACK,           ggml_cpu_forward_get_rows_back,              nullptr),
    K(FLASH_ATTN_BACK,         ggml_cpu_forward_flash_attn_back,            ggml_cpu_flash_attn_back_work_size),
    K(CROSS_ENTROPY_LOSS_BACK, ggml_cpu_forward_cross_entropy_loss_back,    nullptr),
    K(OPT_STEP_ADAMW,          ggml_cpu_forward_opt_step_adamw,             nullptr),
    K(OPT_STEP_SGD,            ggml_cpu_forward_opt_step_sgd,               nullptr),
};
#undef K

constexpr bool kernels_cover_enum() {
    if (sizeof(cpu_kernels) / sizeof(cpu_kernels[0]) != GGML_OP_COUNT) return false;
    for (int i = 0; i < GGML_OP_COUNT; i++) {
        if (cpu_kernels[i].op != i) return false;
    }
    return true;
}
static_assert(kernels_cover_enum(), "the CPU kernel table needs one row per enum ggml_op, in enum order");

}  // namespace

static bool op_is_noop(const ggml_tensor * node) {
    return cpu_kernels[node->op].forward == nullptr || ggml_is_empty(node);
}

int ggml_cpu_op_n_tasks(const struct ggml_tensor * node, int n_threads) {
    return op_is_noop(node) ? 1 : n_threads;
}

size_t ggml_cpu_op_work_size(const struct ggml_tensor * node, int n_threads) {
    const cpu_work_size_fn ws = cpu_kernels[node->op].work_size;
    return ws ? ws(node, n_threads) : 0;
}

void ggml_cpu_compute_forward(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const cpu_forward_fn fn = cpu_kernels[dst->op].forward;
    if (fn) fn(params, dst);
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

    // One graph at a time on a pool (the process-wide one, or a CPU backend's own).
    ggml_threadpool * tp = cplan->threadpool ? cplan->threadpool : &ggml_threadpool_global();
    std::lock_guard<std::mutex> lock(tp->compute_mutex);

    // The job captures one pointer, so std::function keeps it inline: computing a graph
    // allocates nothing (training steps rely on it).
    struct job_state {
        ggml_cgraph * cgraph;
        ggml_cplan * cplan;
        ggml_threadpool * tp;
        const ggml_cpu_kernels * kernels;
        std::atomic<bool> aborted{false};
    } st;
    st.cgraph = cgraph;
    st.cplan = cplan;
    st.tp = tp;

    const bool perf = ggml_node_perf_enabled();
    st.kernels = ggml_cpu_kernels_override;  // the caller's table, for every worker
    st.tp->run(cplan->n_threads, [s = &st, perf](int ith, int nth) {
        const ggml_cpu_kernels * saved = ggml_cpu_kernels_override;
        ggml_cpu_kernels_override = s->kernels;
        ggml_compute_params params;
        params.ith = ith;
        params.nth = nth;
        params.wsize = s->cplan->work_size;
        params.wdata = s->cplan->work_data;
        params.tp = s->tp;
        for (int i = 0; i < s->cgraph->n_nodes; i++) {
            ggml_tensor * node = s->cgraph->nodes[i];
            if (op_is_noop(node)) {
                if (ith == 0 && s->cplan->node_callback) s->cplan->node_callback(i, node, s->cplan->node_callback_data);
                continue;
            }
            const auto t0 = perf && ith == 0 ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
            ggml_cpu_compute_forward(&params, node);
            if (ith == 0 && s->cplan->abort_callback && s->cplan->abort_callback(s->cplan->abort_callback_data)) {
                s->aborted = true;
            }
            ggml_cpu_barrier(&params);  // the next node may read this one; also publishes `aborted`
            if (perf && ith == 0) {
                ggml_node_perf_add(node, std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
            }
            if (s->aborted) break;
            if (ith == 0 && s->cplan->node_callback) s->cplan->node_callback(i, node, s->cplan->node_callback_data);
        }
        ggml_cpu_kernels_override = saved;
    });
    return st.aborted ? GGML_STATUS_ABORTED : GGML_STATUS_SUCCESS;
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

// ---- build facts ----------------------------------------------------------------------------
__thread const ggml_cpu_kernels * ggml_cpu_kernels_override = nullptr;

const char * ggml_cpu_isa_name(void) { return ggml_cpu()->isa; }
int ggml_cpu_has_avx2(void) { return (ggml_cpu()->features & GGML_CPU_FEAT_AVX2) != 0; }
int ggml_cpu_has_avx512(void) { return (ggml_cpu()->features & GGML_CPU_FEAT_AVX512) != 0; }
int ggml_cpu_has_avx512_vnni(void) { return (ggml_cpu()->features & GGML_CPU_FEAT_AVX512_VNNI) != 0; }
int ggml_cpu_has_amx_int8(void) { return (ggml_cpu()->features & GGML_CPU_FEAT_AMX_INT8) != 0; }
int ggml_cpu_has_neon(void) { return (ggml_cpu()->features & GGML_CPU_FEAT_NEON) != 0; }
int ggml_cpu_has_dotprod(void) { return (ggml_cpu()->features & GGML_CPU_FEAT_DOTPROD) != 0; }
