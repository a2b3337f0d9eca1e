/* A plain C program against the public headers, linked with libggml.a, the C++ runtime, pthread
 * and libm only: the C API must be usable from C (no C++ types leak into ggml.h / gguf.h). */
#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-opt.h"
#include "gguf.h"

#include <math.h>
#include <stdio.h>

static int failures = 0;
#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); failures++; } } while (0)

int main(void) {
    struct ggml_init_params params = { 16 * 1024 * 1024, NULL, false };
    struct ggml_context * ctx = ggml_init(params);
    CHECK(ctx != NULL);

    /* y = softmax(W x + b) with W [3 x 2], computed on 2 threads. */
    struct ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2);
    struct ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 1);
    struct ggml_tensor * b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2);
    ggml_set_name(w, "w");
    for (int i = 0; i < 6; i++) ggml_set_f32_1d(w, i, (float) i);
    for (int i = 0; i < 3; i++) ggml_set_f32_1d(x, i, 1.0f);
    ggml_set_f32(b, 0.5f);
    struct ggml_tensor * y = ggml_soft_max(ctx, ggml_add(ctx, ggml_mul_mat(ctx, w, x), b));

    struct ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, y);
    CHECK(ggml_graph_n_nodes(gf) == 3);
    CHECK(ggml_graph_compute_with_ctx(ctx, gf, 2) == GGML_STATUS_SUCCESS);

    /* logits: 0+1+2+0.5 = 3.5 and 3+4+5+0.5 = 12.5 */
    const double e = exp(3.5 - 12.5);
    CHECK(fabs(ggml_get_f32_1d(y, 0) - e / (1 + e)) < 1e-6);
    CHECK(fabs(ggml_get_f32_1d(y, 1) - 1 / (1 + e)) < 1e-6);
    CHECK(ggml_get_tensor(ctx, "w") == w);
    CHECK(ggml_nbytes(w) == 24);
    CHECK(ggml_is_contiguous(w));

    struct gguf_context * g = gguf_init_empty();
    gguf_set_val_u32(g, "test.answer", 42);
    CHECK(gguf_get_n_kv(g) == 1);
    gguf_free(g);

    /* ggml-opt.h from C: a dataset, the default parameters, a learning-rate schedule. */
    ggml_opt_dataset_t ds = ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, 3, 2, 8, 2);
    CHECK(ggml_opt_dataset_ndata(ds) == 8);
    ggml_opt_dataset_free(ds);
    struct ggml_opt_params op = ggml_opt_default_params(NULL, NULL, NULL, GGML_OPT_LOSS_TYPE_CROSS_ENTROPY);
    CHECK(op.opt_period == 1 && op.optimizer == GGML_OPT_OPTIMIZER_TYPE_ADAMW);
    struct ggml_opt_lr_schedule sched = { GGML_OPT_LR_SCHEDULE_COSINE, 2, 4, 0.0f };
    CHECK(fabs(ggml_opt_lr_factor(&sched, 0) - 0.5f) < 1e-6);

    ggml_free(ctx);
    printf("%s: %s\n", __FILE__, failures ? "FAILED" : "OK");
    return failures ? 1 : 0;
}
