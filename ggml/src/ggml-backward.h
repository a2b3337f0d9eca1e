// ggml-backward.h - what an op's backward rule may use (ggml-backward.cpp), and the rules
// themselves (each defined next to its op's builder in ggml-ops*.cpp, listed in the op table).
//
// A rule receives the node and grad, the gradient of the loss with respect to the node (F32, the
// node's shape, contiguous). For each source that wants a gradient (ggml_bw_needs) it builds the
// contribution with ordinary ops and hands it to ggml_bw_add, which adds it to what other readers
// of that source contributed (into the accumulator, for parameters that have one).
#pragma once

#include "ggml-impl.h"

struct ggml_backward_ctx;

struct ggml_context * ggml_bw_ctx(struct ggml_backward_ctx * bw);
// True when src (one of node's sources) leads to a parameter, so its gradient is wanted.
bool ggml_bw_needs(struct ggml_backward_ctx * bw, const struct ggml_tensor * src);
// Adds contribution (src's shape; converted to F32 if needed) to src's gradient.
void ggml_bw_add(struct ggml_backward_ctx * bw, struct ggml_tensor * src, struct ggml_tensor * contribution);
// contribution summed down to src's shape when src was broadcast (tiled) to contribution's shape.
struct ggml_tensor * ggml_bw_reduce_to(struct ggml_backward_ctx * bw, struct ggml_tensor * contribution, struct ggml_tensor * src);

#define GGML_BACKWARD_RULE(name) \
    void ggml_backward_##name(struct ggml_backward_ctx * bw, struct ggml_tensor * node, struct ggml_tensor * grad)

GGML_BACKWARD_RULE(dup);
GGML_BACKWARD_RULE(add);
GGML_BACKWARD_RULE(add1);
GGML_BACKWARD_RULE(sub);
GGML_BACKWARD_RULE(mul);
GGML_BACKWARD_RULE(div);
GGML_BACKWARD_RULE(sqr);
GGML_BACKWARD_RULE(sqrt);
GGML_BACKWARD_RULE(log);
GGML_BACKWARD_RULE(sum);
GGML_BACKWARD_RULE(sum_rows);
GGML_BACKWARD_RULE(mean);
GGML_BACKWARD_RULE(repeat);
GGML_BACKWARD_RULE(concat);
GGML_BACKWARD_RULE(norm);
GGML_BACKWARD_RULE(rms_norm);
GGML_BACKWARD_RULE(mul_mat);
GGML_BACKWARD_RULE(out_prod);
GGML_BACKWARD_RULE(scale);
GGML_BACKWARD_RULE(cpy);
GGML_BACKWARD_RULE(cont);
GGML_BACKWARD_RULE(reshape);
GGML_BACKWARD_RULE(view);
GGML_BACKWARD_RULE(permute);
GGML_BACKWARD_RULE(transpose);
GGML_BACKWARD_RULE(get_rows);
GGML_BACKWARD_RULE(mul_mat_id);
GGML_BACKWARD_RULE(set_rows);
GGML_BACKWARD_RULE(diag_mask_inf);
GGML_BACKWARD_RULE(soft_max);
GGML_BACKWARD_RULE(rope);
GGML_BACKWARD_RULE(flash_attn_ext);
GGML_BACKWARD_RULE(unary);
GGML_BACKWARD_RULE(cross_entropy_loss);
GGML_BACKWARD_RULE(acc);
GGML_BACKWARD_RULE(repeat_back);
