// cpu-ops.h - the contract between the CPU executor (compute.cpp) and the op kernels.
//
// Every kernel is called by all nth threads of the pool for the same node, with its own ith.
// A kernel splits its work by output rows (each row computed the same way whatever nth is, so
// results are bit-identical across thread counts); work it cannot split is done by ith == 0.
// A kernel that needs a phase (e.g. converting src1 once before the dot products) calls
// ggml_cpu_barrier(params) between phases: all threads of the node must call it equally often.
// Scratch memory comes from params->wdata (size from ggml_cpu_op_work_size); kernels never
// allocate.
#pragma once

#include "../ggml-impl.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ggml_threadpool;

struct ggml_compute_params {
    int ith;                    // this thread's index
    int nth;                    // threads working on this node
    size_t wsize;               // work buffer shared by the threads of the node
    void * wdata;
    struct ggml_threadpool * tp;
    // The node computed last before this one in this graph (views skipped), NULL at the start
    // and after an attention chain: its scratch may still be in the work buffer.
    const struct ggml_tensor * prev;
};

void ggml_cpu_barrier(const struct ggml_compute_params * params);

// Items [0, n) of this stretch of a node (between two barriers; one such loop per stretch), for
// thread ith, a run [*first, *end) at a time: its own contiguous share first, then the back half
// of another thread's unfinished share (see ggml_threadpool::next_items). Every item must give the
// same bits whoever computes it. Returns false when none is left. Only where
// ggml_cpu_can_share_items(params, n).
bool ggml_cpu_can_share_items(const struct ggml_compute_params * params, int64_t n);
bool ggml_cpu_next_items(const struct ggml_compute_params * params, int64_t n, int64_t * first, int64_t * end);

// Rows [*r0, *r1) of nr rows for thread ith of nth (contiguous chunks).
static inline void ggml_cpu_split_rows(int64_t nr, int ith, int nth, int64_t * r0, int64_t * r1) {
    const int64_t dr = (nr + nth - 1) / nth;
    *r0 = dr * ith < nr ? dr * ith : nr;
    *r1 = *r0 + dr < nr ? *r0 + dr : nr;
}

// Bytes of scratch a node needs with n_threads threads (0 for most ops).
size_t ggml_cpu_op_work_size(const struct ggml_tensor * node, int n_threads);

// How many threads a node can use (1 for ops that are cheap or not split).
int ggml_cpu_op_n_tasks(const struct ggml_tensor * node, int n_threads);

// The dispatcher: runs dst's op.
void ggml_cpu_compute_forward(const struct ggml_compute_params * params, struct ggml_tensor * dst);

// ---- kernels, one family per file ----------------------------------------------------------
// ops-elementwise.cpp: binary ops with broadcasting of src1, add1, scale, sqr, sqrt, log
void ggml_cpu_forward_add (const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_add1(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_sub (const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_mul (const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_div (const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_scale(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_sqr (const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_sqrt(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_log (const struct ggml_compute_params * params, struct ggml_tensor * dst);
// ops-unary.cpp: GGML_OP_UNARY (abs, sgn, neg, step, tanh, relu, sigmoid, gelu, silu, exp)
void ggml_cpu_forward_unary(const struct ggml_compute_params * params, struct ggml_tensor * dst);
// ops-reduce.cpp: sum, sum_rows, mean, argmax
void ggml_cpu_forward_sum     (const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_sum_rows(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_mean    (const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_argmax  (const struct ggml_compute_params * params, struct ggml_tensor * dst);
// ops-copy.cpp: dup / cpy / cont (type conversion between F32, F16, BF16, I32), repeat, concat, get_rows, set_rows
void ggml_cpu_forward_dup     (const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_repeat  (const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_concat  (const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_get_rows(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_set_rows(const struct ggml_compute_params * params, struct ggml_tensor * dst);
// ops-norm.cpp: norm, rms_norm
void ggml_cpu_forward_norm    (const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_rms_norm(const struct ggml_compute_params * params, struct ggml_tensor * dst);
// ops-softmax.cpp: diag_mask_inf, soft_max (with mask, scale, ALiBi)
void ggml_cpu_forward_diag_mask_inf(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_soft_max     (const struct ggml_compute_params * params, struct ggml_tensor * dst);
// ops-rope.cpp
void ggml_cpu_forward_rope(const struct ggml_compute_params * params, struct ggml_tensor * dst);
// ops-flash-attn.cpp: flash_attn_ext and flash_attn_back
void ggml_cpu_forward_flash_attn_ext (const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_flash_attn_back(const struct ggml_compute_params * params, struct ggml_tensor * dst);
size_t ggml_cpu_flash_attn_ext_work_size (const struct ggml_tensor * node, int n_threads);
size_t ggml_cpu_flash_attn_back_work_size(const struct ggml_tensor * node, int n_threads);
// ops-loss.cpp
void ggml_cpu_forward_cross_entropy_loss(const struct ggml_compute_params * params, struct ggml_tensor * dst);
// matmul-id.cpp: mul_mat_id (experts), its gradient for b, argsort
void ggml_cpu_forward_mul_mat_id     (const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_mul_mat_id_back(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_argsort        (const struct ggml_compute_params * params, struct ggml_tensor * dst);
size_t ggml_cpu_mul_mat_id_work_size(const struct ggml_tensor * node, int n_threads);
// matmul.cpp: mul_mat; out-prod.cpp: out_prod
void ggml_cpu_forward_mul_mat (const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_out_prod(const struct ggml_compute_params * params, struct ggml_tensor * dst);
// Ops of the backward pass and optimizer steps (semantics and params: ggml-impl.h).
// ops-copy.cpp: acc, repeat_back, get_rows_back
void ggml_cpu_forward_acc          (const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_repeat_back  (const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_get_rows_back(const struct ggml_compute_params * params, struct ggml_tensor * dst);
// ops-unary.cpp: unary_back
void ggml_cpu_forward_unary_back   (const struct ggml_compute_params * params, struct ggml_tensor * dst);
// ops-norm.cpp: norm_back, rms_norm_back
void ggml_cpu_forward_norm_back    (const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_rms_norm_back(const struct ggml_compute_params * params, struct ggml_tensor * dst);
// ops-softmax.cpp: diag_mask_zero, soft_max_back
void ggml_cpu_forward_diag_mask_zero(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_soft_max_back (const struct ggml_compute_params * params, struct ggml_tensor * dst);
// ops-rope.cpp: rope_back
void ggml_cpu_forward_rope_back    (const struct ggml_compute_params * params, struct ggml_tensor * dst);
// ops-loss.cpp: cross_entropy_loss_back
void ggml_cpu_forward_cross_entropy_loss_back(const struct ggml_compute_params * params, struct ggml_tensor * dst);
// ops-opt.cpp: optimizer steps
void ggml_cpu_forward_opt_step_adamw(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_forward_opt_step_sgd  (const struct ggml_compute_params * params, struct ggml_tensor * dst);

size_t ggml_cpu_mul_mat_work_size(const struct ggml_tensor * node, int n_threads);
// One plane (i2 + ne2 * i3) of a mul_mat, all of it by the calling thread, with work bytes of
// scratch of its own: the same values as the node computed whole (the attention chain in
// compute.cpp runs KQ, soft_max and KQV plane by plane). b's plane is read from b_plane where
// given (laid out as b's plane), written to dst, or (out not NULL) to out, laid out as dst's
// plane (nb[1] bytes between rows). Not for a repacked a.
bool ggml_cpu_mul_mat_by_plane(const struct ggml_tensor * dst);
// compute.cpp runs such chains plane by plane unless this is 0 (tests compare the two).
extern int ggml_cpu_attn_chain;
long ggml_cpu_attn_chain_runs(void);  // chains run so far (tests)
long ggml_cpu_mul_mat_b_reuses(void);  // mul_mats that found b converted by the node before (tests)
// compute.cpp runs silu(x) followed by a product with it as one pass unless this is 0.
extern int ggml_cpu_silu_mul_fusion;
long ggml_cpu_silu_mul_fusion_runs(void);  // fused pairs run so far (tests)
size_t ggml_cpu_mul_mat_plane_work_size(const struct ggml_tensor * dst);
// Only columns [c0, c1) (rows of b): c0 a multiple of ggml_cpu_mul_mat_plane_cols(dst), which
// is 0 where the plane is computed whole (c0 = 0, c1 = ne1 then). lim (NULL: none), one per row
// n of b (attention's queries): only the first lim[n] rows of a (dst's values m < lim[n], the
// scores not masked) matter for column n, or, with lim_k, only the first lim[n] of the K
// products (the rest of b's row is zero). Columns share a limit in groups, rounded up to whole
// tiles; values past it may be left unwritten (lim_k unset). Values written are the bits of the
// whole product.
int64_t ggml_cpu_mul_mat_plane_cols(const struct ggml_tensor * dst);
void ggml_cpu_mul_mat_plane(struct ggml_tensor * dst, int64_t p, void * work, const float * b_plane, float * out,
                            int64_t c0, int64_t c1, const int32_t * lim, bool lim_k);
// The same for soft_max: rows [r0, r1) of plane (i2, i3), to dst or to out (laid out as dst's
// plane); lim (NULL: none): row i1's logits from lim[i1] on are masked by -inf (and not read).
size_t ggml_cpu_soft_max_plane_work_size(const struct ggml_tensor * node);
void ggml_cpu_soft_max_plane(struct ggml_tensor * dst, int64_t i2, int64_t i3, void * work, float * out, int64_t r0,
                             int64_t r1, const int32_t * lim);
size_t ggml_cpu_out_prod_work_size(const struct ggml_tensor * node, int n_threads);
size_t ggml_cpu_soft_max_work_size(const struct ggml_tensor * node, int n_threads);
size_t ggml_cpu_loss_work_size(const struct ggml_tensor * node, int n_threads);

#ifdef __cplusplus
}

// item(it) for items [0, n) of this stretch of a node: shared out with stealing where the pool
// can (ggml_cpu_next_items), else thread ith's contiguous share.
template <typename F>
static inline void ggml_cpu_for_items(const struct ggml_compute_params * params, int64_t n, F && item) {
    if (ggml_cpu_can_share_items(params, n)) {
        for (int64_t it0, it1; ggml_cpu_next_items(params, n, &it0, &it1);) {
            for (int64_t it = it0; it < it1; it++) item(it);
        }
        return;
    }
    int64_t it0, it1;
    ggml_cpu_split_rows(n, params->ith, params->nth, &it0, &it1);
    for (int64_t it = it0; it < it1; it++) item(it);
}
#endif
