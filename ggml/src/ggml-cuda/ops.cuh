// ops.cuh - the op launchers of the CUDA backend (one per op, in the file of its family) and
// the checks supports_op uses for ops whose kernels cover only some types or shapes.
// A launcher enqueues its kernels on ctx.stream for dst = op(dst->src...) and returns.
#pragma once

#include "common.cuh"

#include <algorithm>

constexpr int MMV_MAX_COLS = 8;  // mul_mat with at most this many columns of b: mmv.cu

// elementwise.cu
void ggml_cuda_op_add(ggml_cuda_ctx & ctx, ggml_tensor * dst);
void ggml_cuda_op_sub(ggml_cuda_ctx & ctx, ggml_tensor * dst);
void ggml_cuda_op_mul(ggml_cuda_ctx & ctx, ggml_tensor * dst);
void ggml_cuda_op_div(ggml_cuda_ctx & ctx, ggml_tensor * dst);
void ggml_cuda_op_scale(ggml_cuda_ctx & ctx, ggml_tensor * dst);
void ggml_cuda_op_sqr(ggml_cuda_ctx & ctx, ggml_tensor * dst);
void ggml_cuda_op_sqrt(ggml_cuda_ctx & ctx, ggml_tensor * dst);
void ggml_cuda_op_log(ggml_cuda_ctx & ctx, ggml_tensor * dst);
bool ggml_cuda_unary_supported(int op);
void ggml_cuda_op_unary(ggml_cuda_ctx & ctx, ggml_tensor * dst);
bool ggml_cuda_unary_mul_fusable(const ggml_tensor * unary, const ggml_tensor * mul);
// product: as for ggml_cuda_op_rms_norm_mul (mul's rows quantized for the mul_mat after it)
void ggml_cuda_op_unary_mul(ggml_cuda_ctx & ctx, ggml_tensor * unary, ggml_tensor * mul, const ggml_tensor * product);
void ggml_cuda_op_unary_back(ggml_cuda_ctx & ctx, ggml_tensor * dst);
void ggml_cuda_op_diag_mask_inf(ggml_cuda_ctx & ctx, ggml_tensor * dst);
void ggml_cuda_op_diag_mask_zero(ggml_cuda_ctx & ctx, ggml_tensor * dst);

// copy.cu
bool ggml_cuda_cpy_supported(const ggml_tensor * src, const ggml_tensor * dst);
void ggml_cuda_cpy_tensor(ggml_cuda_ctx & ctx, const ggml_tensor * src, ggml_tensor * dst);
void ggml_cuda_op_cpy(ggml_cuda_ctx & ctx, ggml_tensor * dst);
// product: the mul_mat that reads dst next converting it first (an F32 copy then also writes dst
// in the product's form: ggml_cuda_launch_quantizing), or nullptr
void ggml_cuda_op_cpy_product(ggml_cuda_ctx & ctx, ggml_tensor * dst, const ggml_tensor * product);
bool ggml_cuda_get_rows_supported(const ggml_tensor * dst);
void ggml_cuda_op_get_rows(ggml_cuda_ctx & ctx, ggml_tensor * dst);
void ggml_cuda_op_get_rows_back(ggml_cuda_ctx & ctx, ggml_tensor * dst);
bool ggml_cuda_set_rows_supported(const ggml_tensor * dst);
void ggml_cuda_op_set_rows(ggml_cuda_ctx & ctx, ggml_tensor * dst);
void ggml_cuda_op_repeat(ggml_cuda_ctx & ctx, ggml_tensor * dst);
void ggml_cuda_op_concat(ggml_cuda_ctx & ctx, ggml_tensor * dst);
void ggml_cuda_op_repeat_back(ggml_cuda_ctx & ctx, ggml_tensor * dst);
void ggml_cuda_op_acc(ggml_cuda_ctx & ctx, ggml_tensor * dst);

// reduce.cu
void ggml_cuda_op_sum(ggml_cuda_ctx & ctx, ggml_tensor * dst);
void ggml_cuda_op_sum_rows(ggml_cuda_ctx & ctx, ggml_tensor * dst);
void ggml_cuda_op_mean(ggml_cuda_ctx & ctx, ggml_tensor * dst);
void ggml_cuda_op_argmax(ggml_cuda_ctx & ctx, ggml_tensor * dst);
void ggml_cuda_op_cross_entropy_loss(ggml_cuda_ctx & ctx, ggml_tensor * dst);
void ggml_cuda_op_cross_entropy_loss_back(ggml_cuda_ctx & ctx, ggml_tensor * dst);

// norm.cu
void ggml_cuda_op_norm(ggml_cuda_ctx & ctx, ggml_tensor * dst);
void ggml_cuda_op_rms_norm(ggml_cuda_ctx & ctx, ggml_tensor * dst);
void ggml_cuda_op_norm_back(ggml_cuda_ctx & ctx, ggml_tensor * dst);
void ggml_cuda_op_rms_norm_back(ggml_cuda_ctx & ctx, ggml_tensor * dst);
bool ggml_cuda_rms_norm_mul_fusable(const ggml_tensor * norm, const ggml_tensor * mul);
// product: the mul_mat that reads mul next through ggml_cuda_mmvq, or nullptr; the kernel then
// also quantizes mul's rows for it (ctx.act_pending)
void ggml_cuda_op_rms_norm_mul(ggml_cuda_ctx & ctx, ggml_tensor * norm, ggml_tensor * mul, const ggml_tensor * product);
bool ggml_cuda_add_rms_norm_mul_fusable(const ggml_tensor * add, const ggml_tensor * norm, const ggml_tensor * mul);
void ggml_cuda_op_add_rms_norm_mul(ggml_cuda_ctx & ctx, ggml_tensor * add, ggml_tensor * norm, ggml_tensor * mul, const ggml_tensor * product);

// mmv.cu: mul_mat_id (a mixture's experts: only the chosen experts' rows read)
bool ggml_cuda_mul_mat_id_supported(const ggml_tensor * dst);
void ggml_cuda_op_mul_mat_id(ggml_cuda_ctx & ctx, ggml_tensor * dst);

// argsort.cu: argsort of rows of at most 1024 values (a router's choice of experts)
bool ggml_cuda_argsort_supported(const ggml_tensor * dst);
void ggml_cuda_op_argsort(ggml_cuda_ctx & ctx, ggml_tensor * dst);

// softmax.cu
// product: as for ggml_cuda_op_cpy_product (the values' product after the probabilities)
void ggml_cuda_op_soft_max(ggml_cuda_ctx & ctx, ggml_tensor * dst, const ggml_tensor * product = nullptr);
void ggml_cuda_op_soft_max_back(ggml_cuda_ctx & ctx, ggml_tensor * dst);

// rope.cu
bool ggml_cuda_rope_supported(const ggml_tensor * dst);
void ggml_cuda_op_rope(ggml_cuda_ctx & ctx, ggml_tensor * dst);
void ggml_cuda_op_rope_back(ggml_cuda_ctx & ctx, ggml_tensor * dst);
// a rope and the set_rows that writes its result into a KV cache (views between), the values'
// set_rows by the same index after it and then the queries' rope (set_rows_v, rope2: or nullptr):
// one kernel; product2 (the mul_mat reading rope2 next, or nullptr): where it reads a permutation of
// rope2 as F16 (cuBLAS: the scores without flash attention), the kernel writes that copy too
bool ggml_cuda_rope_set_rows_fusable(const ggml_tensor * rope, const ggml_tensor * set_rows);
bool ggml_cuda_set_rows_joins_rope(const ggml_tensor * rope, const ggml_tensor * set_rows_k, const ggml_tensor * set_rows_v);
bool ggml_cuda_rope_joins_rope(const ggml_tensor * rope, const ggml_tensor * set_rows_k, const ggml_tensor * set_rows_v,
                               const ggml_tensor * rope2);
void ggml_cuda_op_rope_set_rows(ggml_cuda_ctx & ctx, ggml_tensor * rope, ggml_tensor * set_rows, ggml_tensor * set_rows_v,
                                ggml_tensor * rope2, const ggml_tensor * product2);

// mmv.cu, mul_mat.cu
bool ggml_cuda_mmv_supported(const ggml_tensor * a);
void ggml_cuda_mmv(ggml_cuda_ctx & ctx, const ggml_tensor * a, const ggml_tensor * b, ggml_tensor * dst);
void ggml_cuda_mmvq(ggml_cuda_ctx & ctx, const ggml_tensor * a, const ggml_tensor * b, ggml_tensor * dst);
// Products of one b (generation: one column) with weights of one type (or of K-quant types),
// consecutive nodes (q, k, v; gate, up): one launch for all (fusable: other can join first's launch).
bool ggml_cuda_mmvq_multi_fusable(const ggml_tensor * first, const ggml_tensor * other);
void ggml_cuda_mmvq_multi(ggml_cuda_ctx & ctx, ggml_tensor * const * nodes, int n);
// Prompts' products of one b with block-typed weights of one type (q, k, v; gate, up), consecutive
// nodes: b rounded to F16 once, the weights dequantized in one launch, then a GEMM each.
bool ggml_cuda_gemm_multi_fusable(const ggml_tensor * first, const ggml_tensor * other);
void ggml_cuda_gemm_multi(ggml_cuda_ctx & ctx, ggml_tensor * const * nodes, int n);
bool ggml_cuda_mul_mat_supported(const ggml_tensor * dst);
// mul_mat takes ggml_cuda_mmvq: quantized weights, few columns (b's 8-bit activations in ctx.act
// are read, or written first)
bool ggml_cuda_mul_mat_uses_mmvq(const ggml_tensor * dst);
void ggml_cuda_op_mul_mat(ggml_cuda_ctx & ctx, ggml_tensor * dst);
bool ggml_cuda_out_prod_supported(const ggml_tensor * dst);
void ggml_cuda_op_out_prod(ggml_cuda_ctx & ctx, ggml_tensor * dst);

// fattn.cu
bool ggml_cuda_flash_attn_supported(const ggml_tensor * dst);
// product: the mul_mat reading the result next through ggml_cuda_mmvq (or nullptr): generation's
// kernels then quantize their rows for it (32-value activation blocks)
void ggml_cuda_op_flash_attn_ext(ggml_cuda_ctx & ctx, ggml_tensor * dst, const ggml_tensor * product);
bool ggml_cuda_flash_attn_back_supported(const ggml_tensor * dst);
void ggml_cuda_op_flash_attn_back(ggml_cuda_ctx & ctx, ggml_tensor * dst);
// fattn-mma.cu: prompts with F16 caches on tensor cores (flash_attn_ext takes it where usable);
// act.qs: the output also as halves there (the F16 form of the output projection's activations)
bool ggml_cuda_fattn_mma_usable(const ggml_cuda_ctx & ctx, const ggml_tensor * dst);
void ggml_cuda_fattn_mma(ggml_cuda_ctx & ctx, ggml_tensor * dst, const struct ActArgs & act);
// and flash_attn_back's gradient there (training: heads of 64 or 128, float caches), b's operands
// set but for its scratch (b.stats): false where it does not apply, nothing launched
bool ggml_cuda_fattn_back_mma(ggml_cuda_ctx & ctx, ggml_tensor * dst, struct FaBackArgs b);

// optim.cu
bool ggml_cuda_opt_step_supported(const ggml_tensor * dst);
void ggml_cuda_op_opt_step_adamw(ggml_cuda_ctx & ctx, ggml_tensor * dst);
void ggml_cuda_op_opt_step_sgd(ggml_cuda_ctx & ctx, ggml_tensor * dst);

// ops.cu: the dispatch and the support check over every op
bool ggml_cuda_supports_op(const ggml_tensor * op);
// false: the node's op has no kernel here (supports_op should have kept it away)
bool ggml_cuda_compute_node(ggml_cuda_ctx & ctx, ggml_tensor * node);
// Node i of g, or it and the next one or two fused: how many nodes it computed (0: no kernel
// for node i).
int ggml_cuda_compute_nodes(ggml_cuda_ctx & ctx, ggml_cgraph * g, int i);
