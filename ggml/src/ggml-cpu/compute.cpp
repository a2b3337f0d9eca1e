// compute.cpp - the CPU executor: plans the work buffer, then runs the graph's nodes in order on
// the persistent thread pool, every thread taking its share of each node, with a barrier between
// nodes. Nothing is allocated while the graph computes.
#include "cpu-ops.h"
#include "ggml-backend.h"
#include "ops-common.h"
#include "node-perf.h"
#include "kernels.h"
#include "threadpool.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <string.h>
#include <mutex>
#include <vector>

static const size_t CACHE_LINE = 64;

void ggml_cpu_barrier(const struct ggml_compute_params * params) {
    if (params->nth > 1) params->tp->barrier();
}

bool ggml_cpu_can_share_items(const struct ggml_compute_params * params, int64_t n) {
    return params->nth > 1 && params->nth <= ggml_threadpool::MAX_SHARES && n <= ggml_threadpool::MAX_SHARED_ITEMS;
}

bool ggml_cpu_next_items(const struct ggml_compute_params * params, int64_t n, int64_t * first, int64_t * end) {
    return params->tp->next_items(params->ith, params->nth, n, first, end);
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
    K(ARGSORT,                 ggml_cpu_forward_argsort,                    nullptr),
    K(REPEAT,                  ggml_cpu_forward_repeat,                     nullptr),
    K(CONCAT,                  ggml_cpu_forward_concat,                     nullptr),
    K(NORM,                    ggml_cpu_forward_norm,                       nullptr),
    K(RMS_NORM,                ggml_cpu_forward_rms_norm,                   nullptr),
    K(MUL_MAT,                 ggml_cpu_forward_mul_mat,                    ggml_cpu_mul_mat_work_size),
    K(MUL_MAT_ID,              ggml_cpu_forward_mul_mat_id,                 ggml_cpu_mul_mat_id_work_size),
    K(OUT_PROD,                ggml_cpu_forward_out_prod,                   ggml_cpu_out_prod_work_size),
    K(SCALE,                   ggml_cpu_forward_scale,                      nullptr),
    K(CPY,                     ggml_cpu_forward_dup,                        nullptr),
    K(CONT,                    ggml_cpu_forward_dup,                        nullptr),
    K(RESHAPE,                 nullptr,                                     nullptr),
    K(VIEW,                    nullptr,                                     nullptr),
    K(PERMUTE,                 nullptr,                                     nullptr),
    K(TRANSPOSE,               nullptr,                                     nullptr),
    K(GET_ROWS,                ggml_cpu_forward_get_rows,                   nullptr),
    K(SET_ROWS,                ggml_cpu_forward_set_rows,                   nullptr),
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
    K(MUL_MAT_ID_BACK,         ggml_cpu_forward_mul_mat_id_back,            nullptr),
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

// ---- attention chains: KQ, soft_max, KQV plane by plane --------------------------------------
// mul_mat -> soft_max -> mul_mat over the same planes (attention without the fused op): each
// thread takes whole planes (heads) and runs the three nodes on one plane after the other, so a
// plane's scores (n_kv x n_tokens floats) stay in its caches instead of making three trips through
// memory, and two barriers go. Every value is computed as the three nodes compute it (a mul_mat's
// outputs do not depend on how its work is split).
// The graph allocator hands out the memory of tensors no longer read: soft_max's output may lie
// over q (read by every thread's KQ), KQV's over KQ or q. So soft_max's planes are kept in the
// thread's scratch when they would overwrite an input (allowed only when no later node reads
// them), and KQV's planes are staged there and copied in after a barrier when their place
// overlaps anything the chain reads.
int ggml_cpu_attn_chain = 1;
static std::atomic<long> attn_chain_runs{0};
long ggml_cpu_attn_chain_runs(void) { return attn_chain_runs.load(); }

static bool overlap(const ggml_tensor * a, const ggml_tensor * b) {
    if (!a || !b) return false;
    const char * a0 = (const char *) a->data, * b0 = (const char *) b->data;
    return a0 < b0 + ggml_nbytes(b) && b0 < a0 + ggml_nbytes(a);
}

// Whether a node from `from` on (or the caller) reads t.
static bool read_from(const ggml_cgraph * g, int from, const ggml_tensor * t) {
    if (t->flags & GGML_TENSOR_FLAG_OUTPUT) return true;
    for (int j = from; j < g->n_nodes; j++) {
        for (int k = 0; k < GGML_MAX_SRC; k++) {
            const ggml_tensor * s = g->nodes[j]->src[k];
            if (s && (s == t || s->view_src == t)) return true;
        }
    }
    return false;
}

// Whether a node after the chain at i (or the caller) reads t.
static bool read_later(const ggml_cgraph * g, int i, const ggml_tensor * t) { return read_from(g, i + 3, t); }

// The last node reading each tensor that the fusions ask about (dead_from: silu's output, the
// attention's scores), as a source or through a view of it (as read_from counts), found in one
// pass over the graph: a scan of the rest of the graph per fusion grew with the square of the
// node count (9% of a 22-layer model's token on the CPU). A power-of-two table of those nodes
// only, small enough for L1, kept with the pool (computing allocates nothing; stamps spare clearing it).
static bool last_read_key(const ggml_tensor * t) { return t->op == GGML_OP_UNARY || t->op == GGML_OP_MUL_MAT; }

static ggml_threadpool::last_read_entry & last_read_slot(ggml_threadpool & tp, const void * t) {
    const size_t mask = tp.last_read.size() - 1;  // Fibonacci hashing: the product's top bits
    const int bits = __builtin_ctzll((unsigned long long) tp.last_read.size());
    for (size_t i = (size_t) (((uint64_t) (uintptr_t) t * 0x9E3779B97F4A7C15ull) >> (64 - bits));; i = (i + 1) & mask) {
        ggml_threadpool::last_read_entry & e = tp.last_read[i];
        if (e.stamp != tp.last_read_stamp || e.key == t) return e;
    }
}

static void last_read_build(const ggml_cgraph * g, ggml_threadpool & tp) {
    size_t n_keys = 0;
    for (int j = 0; j < g->n_nodes; j++) n_keys += last_read_key(g->nodes[j]);
    size_t size = 16;
    while (size < 2 * n_keys) size *= 2;  // at most half full
    if (++tp.last_read_stamp == 0 || tp.last_read.size() < size) {  // a stamp never used, or too small
        tp.last_read.assign(std::max(size, tp.last_read.size()), { nullptr, -1, 0 });
        tp.last_read_stamp = 1;
    }
    for (int j = 0; j < g->n_nodes; j++) {
        if (last_read_key(g->nodes[j])) last_read_slot(tp, g->nodes[j]) = { g->nodes[j], -1, tp.last_read_stamp };
    }
    for (int j = 0; j < g->n_nodes; j++) {  // in order: a later reader overwrites
        for (const ggml_tensor * s : g->nodes[j]->src) {
            if (!s) continue;
            for (const ggml_tensor * key : { (const ggml_tensor *) s, (const ggml_tensor *) s->view_src }) {
                if (!key || !last_read_key(key)) continue;
                ggml_threadpool::last_read_entry & e = last_read_slot(tp, key);
                if (e.stamp == tp.last_read_stamp) e.node = j;  // not a key: not one of the graph's nodes
            }
        }
    }
}

// Whether t's values need not be left in its memory: the graph allocator placed it (a compute
// buffer, whose memory later nodes may reuse anyway), it is no output, and no node from `from` on
// reads it (last_read_build's table, or a scan for a tensor not in it). Tensors of a plain context
// keep their values after the compute, as ggml promises.
static bool dead_from(const ggml_cgraph * g, ggml_threadpool & tp, int from, const ggml_tensor * t) {
    const ggml_tensor * o = t->view_src ? t->view_src : t;
    if (!o->buffer || ggml_backend_buffer_get_usage(o->buffer) != GGML_BACKEND_BUFFER_USAGE_COMPUTE) return false;
    if (t->flags & GGML_TENSOR_FLAG_OUTPUT) return false;
    if (!tp.last_read.empty() && last_read_key(t)) {
        const ggml_threadpool::last_read_entry & e = last_read_slot(tp, t);
        if (e.stamp == tp.last_read_stamp) return e.node < from;
    }
    return !read_from(g, from, t);
}

// soft_max's planes in scratch (they would overwrite k or q).
static bool attn_chain_sm_scratch(const ggml_cgraph * g, int i) {
    const ggml_tensor * kq = g->nodes[i], * sm = g->nodes[i + 1];
    return overlap(sm, kq->src[0]) || overlap(sm, kq->src[1]);
}

// KQV's planes staged (their place overlaps something the chain reads).
static bool attn_chain_staged(const ggml_cgraph * g, int i) {
    const ggml_tensor * kq = g->nodes[i], * sm = g->nodes[i + 1], * kqv = g->nodes[i + 2];
    return overlap(kqv, kq) || overlap(kqv, sm) || overlap(kqv, kq->src[0]) || overlap(kqv, kq->src[1]) ||
           overlap(kqv, sm->src[1]) || overlap(kqv, kqv->src[0]);
}

static bool attn_chain_at(const ggml_cgraph * g, int i, int n_threads) {
    if (!ggml_cpu_attn_chain || i + 2 >= g->n_nodes) return false;
    const ggml_tensor * kq = g->nodes[i], * sm = g->nodes[i + 1], * kqv = g->nodes[i + 2];
    if (kq->op != GGML_OP_MUL_MAT || sm->op != GGML_OP_SOFT_MAX || kqv->op != GGML_OP_MUL_MAT) return false;
    if (sm->src[0] != kq || kqv->src[1] != sm || kqv->src[0] == kq || kqv->src[0] == sm) return false;
    if (!ggml_cpu_mul_mat_by_plane(kq) || !ggml_cpu_mul_mat_by_plane(kqv)) return false;
    if (ggml_is_empty(kq) || ggml_is_empty(kqv) || !ggml_are_same_shape(kq, sm)) return false;
    if (kq->ne[2] != kqv->ne[2] || kq->ne[3] != kqv->ne[3]) return false;
    // One query and grouped heads (generation): the products alone meet a kv head's keys and
    // values with all its query heads at once (mul_mat's grouped dot path), which saves more
    // than the chain's two barriers (n_kv 1024, 32 / 4 heads: 193 -> 100 us a layer).
    if (kq->ne[1] == 1 && kq->ne[2] > kq->src[0]->ne[2]) return false;
    if (!ggml_is_contiguous(kq) || !ggml_is_contiguous(sm) || !ggml_is_contiguous(kqv)) return false;
    if (overlap(kq, kq->src[0]) || overlap(kq, kq->src[1]) || overlap(kq, sm->src[1])) return false;
    if (overlap(sm, kq) && sm->data != kq->data) return false;  // in place, or apart
    if (overlap(sm, sm->src[1]) || overlap(sm, kqv->src[0])) return false;
    if (attn_chain_sm_scratch(g, i) && (sm->data == kq->data || read_later(g, i, sm))) return false;
    return kq->ne[2] * kq->ne[3] >= n_threads;
}

static size_t line_up(size_t n) { return (n + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE; }

// One thread's scratch: the nodes' plane scratch (used one after the other), soft_max's plane
// where it is kept there, then KQV's staged planes.
static size_t attn_chain_scratch(const ggml_cgraph * g, int i) {
    size_t s = ggml_cpu_mul_mat_plane_work_size(g->nodes[i]);
    s = std::max(s, ggml_cpu_soft_max_plane_work_size(g->nodes[i + 1]));
    s = std::max(s, ggml_cpu_mul_mat_plane_work_size(g->nodes[i + 2]));
    return line_up(s);
}

static size_t attn_chain_thread_size(const ggml_cgraph * g, int i, int n_threads) {
    const ggml_tensor * sm = g->nodes[i + 1], * kqv = g->nodes[i + 2];
    const int64_t planes = kqv->ne[2] * kqv->ne[3];
    const size_t sm_plane = attn_chain_sm_scratch(g, i) ? line_up(sm->nb[2]) : 0;
    const size_t staged = attn_chain_staged(g, i) ? line_up((size_t) ((planes + n_threads - 1) / n_threads) * kqv->nb[2]) : 0;
    return attn_chain_scratch(g, i) + sm_plane + staged;
}

constexpr int64_t ATTN_CHAIN_BLOCK = 64;  // queries per block: 64 x 512 scores = 128 KiB

// Per query (row of soft_max), one past its last key not masked by -inf: KQ's scores past it
// need not be computed nor read (their logits are -inf), nor KQV's products past it (soft_max's
// zeros). False where that does not hold for every head: no mask, one per head, or a scale that
// is not > 0.
static bool attn_chain_limits(const ggml_tensor * sm, std::vector<int32_t> & lim) {
    const ggml_tensor * mask = sm->src[1];
    const float scale = ggml_get_op_params_f32(sm, 0), max_bias = ggml_get_op_params_f32(sm, 1);
    if (!mask || !(scale > 0.0f) || !(max_bias >= 0.0f) || mask->ne[2] != 1 || mask->ne[3] != 1) return false;
    const int64_t n_kv = sm->ne[0];
    lim.resize((size_t) sm->ne[1]);
    for (int64_t q = 0; q < sm->ne[1]; q++) {
        const char * row = (const char *) mask->data + q * mask->nb[1];
        int64_t j = n_kv;
        if (mask->type == GGML_TYPE_F32) {
            while (j > 0 && ((const float *) row)[j - 1] == -INFINITY) j--;
        } else {
            while (j > 0 && ((const uint16_t *) row)[j - 1] == 0xFC00) j--;  // F16 -inf
        }
        lim[(size_t) q] = (int32_t) j;
    }
    return true;
}

// limits: the caller's callback does not see KQ and nothing after the chain reads it, so scores
// past each query's last visible key need not be written.
static void attn_chain_run(const ggml_compute_params * params, const ggml_cgraph * g, int i, bool limits) {
    ggml_tensor * kq = g->nodes[i], * sm = g->nodes[i + 1], * kqv = g->nodes[i + 2];
    if (params->ith == 0) attn_chain_runs++;
    const size_t per = attn_chain_thread_size(g, i, params->nth);
    GGML_ASSERT(params->wsize >= CACHE_LINE + per * (size_t) params->nth && "attention chain: work buffer too small");
    char * w = (char *) (((uintptr_t) params->wdata + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE) + per * (size_t) params->ith;
    const bool sm_scratch = attn_chain_sm_scratch(g, i);
    float * sm_plane = sm_scratch ? (float *) (w + attn_chain_scratch(g, i)) : nullptr;
    char * staged = attn_chain_staged(g, i) ? w + attn_chain_scratch(g, i) + (sm_scratch ? line_up(sm->nb[2]) : 0) : nullptr;
    int64_t p0, p1;
    ggml_cpu_split_rows(kq->ne[2] * kq->ne[3], params->ith, params->nth, &p0, &p1);
    std::vector<int32_t> lim;  // causal prompts: about half of the scores and products skipped
    const int32_t * l = limits && attn_chain_limits(sm, lim) ? lim.data() : nullptr;
    // Queries in blocks whose scores (block x n_kv) stay in L2 between the three steps, where
    // both products split columns at the block's edges (whole panels: the same bits).
    const int64_t n_q = kq->ne[1], c_kq = ggml_cpu_mul_mat_plane_cols(kq), c_kqv = ggml_cpu_mul_mat_plane_cols(kqv);
    const int64_t blk = c_kq > 0 && c_kqv > 0 && ATTN_CHAIN_BLOCK % c_kq == 0 && ATTN_CHAIN_BLOCK % c_kqv == 0 ? ATTN_CHAIN_BLOCK : n_q;
    for (int64_t p = p0; p < p1; p++) {
        float * kqv_out = staged ? (float *) (staged + (p - p0) * kqv->nb[2]) : nullptr;
        for (int64_t q0 = 0; q0 < n_q; q0 += blk) {
            const int64_t q1 = std::min(n_q, q0 + blk);
            ggml_cpu_mul_mat_plane(kq, p, w, nullptr, nullptr, q0, q1, l, false);
            ggml_cpu_soft_max_plane(sm, p % sm->ne[2], p / sm->ne[2], w, sm_plane, q0, q1, l);
            ggml_cpu_mul_mat_plane(kqv, p, w, sm_plane, kqv_out, q0, q1, l, true);
        }
    }
    if (staged) {
        ggml_cpu_barrier(params);  // everything the chain reads has been read
        memcpy((char *) kqv->data + p0 * kqv->nb[2], staged, (size_t) (p1 - p0) * kqv->nb[2]);
    }
}

// ---- silu(x) * u in one pass ------------------------------------------------------------------
// A SILU followed by a MUL of its output with a tensor of the same shape (llama's feed-forward):
// each thread's chunks of the flat range, silu into a stack buffer, then the products. Both nodes
// work lane by lane, so the bits are theirs; one pass over memory and one barrier go. Only where
// silu's output is dead after the product (dead_from), and the product overlaps its inputs
// exactly or not at all.
int ggml_cpu_silu_mul_fusion = 1;
static std::atomic<long> silu_mul_runs{0};
long ggml_cpu_silu_mul_fusion_runs(void) { return silu_mul_runs.load(); }

static bool silu_mul_at(const ggml_cgraph * g, int i, ggml_threadpool & tp) {
    if (!ggml_cpu_silu_mul_fusion || i + 1 >= g->n_nodes) return false;
    const ggml_tensor * s = g->nodes[i], * m = g->nodes[i + 1];
    if (s->op != GGML_OP_UNARY || ggml_get_unary_op(s) != GGML_UNARY_OP_SILU || m->op != GGML_OP_MUL) return false;
    if (m->src[0] == m->src[1] || (m->src[0] != s && m->src[1] != s)) return false;
    const ggml_tensor * x = s->src[0], * u = m->src[0] == s ? m->src[1] : m->src[0];
    for (const ggml_tensor * t : { x, s, u, m }) {
        if (t->type != GGML_TYPE_F32 || !ggml_is_contiguous(t) || !ggml_are_same_shape(t, m)) return false;
    }
    if ((overlap(m, x) && m->data != x->data) || (overlap(m, u) && m->data != u->data)) return false;
    return dead_from(g, tp, i + 2, s);
}

static void silu_mul_run(const ggml_compute_params * params, const ggml_cgraph * g, int i) {
    const ggml_tensor * s = g->nodes[i], * m = g->nodes[i + 1];
    const ggml_tensor * u = m->src[0] == s ? m->src[1] : m->src[0];
    if (params->ith == 0) silu_mul_runs++;
    // All four are contiguous and of one shape: one flat range, split in whole chunks (one token's
    // row is a single row, which a split by rows would leave to one thread).
    const int64_t n = ggml_nelements(m), chunks = (n + GGML_CPU_CHUNK - 1) / GGML_CPU_CHUNK;
    int64_t q0, q1;
    ggml_cpu_split_rows(chunks, params->ith, params->nth, &q0, &q1);
    const float * x = (const float *) s->src[0]->data, * up = (const float *) u->data;
    float * y = (float *) m->data;
    float buf[GGML_CPU_CHUNK];
    for (int64_t c = q0 * GGML_CPU_CHUNK; c < std::min(n, q1 * GGML_CPU_CHUNK); c += GGML_CPU_CHUNK) {
        const int64_t k1 = std::min<int64_t>(GGML_CPU_CHUNK, n - c);
        ggml_cpu_vec_silu_f32(buf, x + c, k1);
        for (int64_t k = 0; k < k1; k++) y[c + k] = buf[k] * up[c + k];
    }
}

struct ggml_cplan ggml_graph_plan(const struct ggml_cgraph * cgraph, int n_threads) {
    if (n_threads <= 0) n_threads = 1;
    size_t work_size = 0;
    for (int i = 0; i < cgraph->n_nodes; i++) {
        const size_t s = ggml_cpu_op_work_size(cgraph->nodes[i], n_threads);
        if (s > work_size) work_size = s;
        if (attn_chain_at(cgraph, i, n_threads)) {
            work_size = std::max(work_size, CACHE_LINE + attn_chain_thread_size(cgraph, i, n_threads) * (size_t) n_threads);
        }
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
            // Repacked data means something only to the kernels that know the layout: mul_mat's,
            // out_prod's and mul_mat_id's (forward and back), as their src0 (even views are noops
            // that would pass on wrong bytes).
            const ggml_tensor * owner = s && s->view_src ? s->view_src : s;
            const bool reads_repacked = n->op == GGML_OP_MUL_MAT || n->op == GGML_OP_OUT_PROD || n->op == GGML_OP_MUL_MAT_ID ||
                                        n->op == GGML_OP_MUL_MAT_ID_BACK;
            if (owner && (owner->flags & GGML_TENSOR_FLAG_REPACKED) && !(reads_repacked && j == 0 && s == owner)) {
                ggml_log_error("ggml_graph_compute: tensor '%s' is repacked for the CPU matrix products and cannot be read by '%s' (%s)\n",
                               owner->name, n->name, ggml_op_desc(n));
                return false;
            }
        }
    }
    return true;
}

// ---- the fusions, decided once per compute ----------------------------------------------------
// What runs at node i. Decided by the calling thread before the workers start, in one pass while
// the graph's tensors are in its caches: asked by every thread at every node, the scans of the
// rest of the graph (dead_from) met tensors that the weights streamed through since had evicted.
enum node_run : uint8_t {
    RUN_NODE,              // the node alone
    RUN_ATTN_CHAIN,        // nodes i .. i + 2 (attn_chain_run)
    RUN_ATTN_CHAIN_LIMITS, // the same, skipping the scores past each query's last visible key
    RUN_SILU_MUL,          // nodes i, i + 1 (silu_mul_run)
    RUN_SKIP,              // computed by a fusion that starts before it
};

static void plan_node_runs(const ggml_cgraph * g, int n_threads, bool callback, ggml_threadpool & tp) {
    std::vector<uint8_t> & plan = tp.node_plan;
    plan.assign((size_t) g->n_nodes, RUN_NODE);
    if (!callback && (ggml_cpu_attn_chain || ggml_cpu_silu_mul_fusion)) last_read_build(g, tp);
    for (int i = 0; i < g->n_nodes; i++) {
        if (op_is_noop(g->nodes[i])) continue;
        if (attn_chain_at(g, i, n_threads)) {
            plan[i] = !callback && dead_from(g, tp, i + 3, g->nodes[i]) ? RUN_ATTN_CHAIN_LIMITS : RUN_ATTN_CHAIN;
            plan[i + 1] = plan[i + 2] = RUN_SKIP;
            i += 2;
        } else if (!callback && silu_mul_at(g, i, tp)) {  // a callback would see no silu
            plan[i] = RUN_SILU_MUL;
            plan[++i] = RUN_SKIP;
        }
    }
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
    plan_node_runs(cgraph, cplan->n_threads, cplan->node_callback != nullptr, *tp);
    st.tp->run(cplan->n_threads, [s = &st, perf](int ith, int nth) {
        const ggml_cpu_kernels * saved = ggml_cpu_kernels_override;
        ggml_cpu_kernels_override = s->kernels;
        ggml_compute_params params;
        params.ith = ith;
        params.nth = nth;
        params.wsize = s->cplan->work_size;
        params.wdata = s->cplan->work_data;
        params.tp = s->tp;
        params.prev = nullptr;
        for (int i = 0; i < s->cgraph->n_nodes; i++) {
            ggml_tensor * node = s->cgraph->nodes[i];
            if (op_is_noop(node)) {
                if (ith == 0 && s->cplan->node_callback) s->cplan->node_callback(i, node, s->cplan->node_callback_data);
                continue;
            }
            const auto t0 = perf && ith == 0 ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
            const uint8_t run = s->tp->node_plan[(size_t) i];
            if (run == RUN_ATTN_CHAIN || run == RUN_ATTN_CHAIN_LIMITS) {
                // The three nodes at once; GGML_PERF counts their time as the last one's (KQV).
                attn_chain_run(&params, s->cgraph, i, run == RUN_ATTN_CHAIN_LIMITS);
                if (ith == 0 && s->cplan->node_callback) {
                    s->cplan->node_callback(i, node, s->cplan->node_callback_data);
                    s->cplan->node_callback(i + 1, s->cgraph->nodes[i + 1], s->cplan->node_callback_data);
                }
                i += 2;
                node = s->cgraph->nodes[i];
                params.prev = nullptr;
            } else if (run == RUN_SILU_MUL) {
                // Both nodes at once; GGML_PERF counts their time as the MUL's.
                silu_mul_run(&params, s->cgraph, i);
                node = s->cgraph->nodes[++i];
                params.prev = node;
            } else {
                ggml_cpu_compute_forward(&params, node);
                params.prev = node;
            }
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
