// optim.cu - the optimizer steps (opt_step_adamw, opt_step_sgd): elementwise updates of a
// contiguous F32 parameter in place, with the hyperparameters read from their F32 tensor on the
// device (one captured graph serves every step). The multiply-adds are the CPU's explicit fmaf,
// so both give the same values.
#include "ops.cuh"

namespace {

__global__ void k_adamw(float * w, const float * g, float * m, float * v, const float * hp, int64_t hp_nb0, int64_t n) {
    const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    auto h = [&](int k) { return *(const float *) ((const char *) hp + k * hp_nb0); };
    const float alpha = h(0), beta1 = h(1), beta2 = h(2), eps = h(3), wd = h(4), beta1h = h(5), beta2h = h(6);
    const float keep = 1.0f - alpha * wd;
    const float gi = g[i];
    const float mi = fmaf(m[i], beta1, gi * (1.0f - beta1));
    const float vi = fmaf(v[i], beta2, gi * gi * (1.0f - beta2));
    m[i] = mi;
    v[i] = vi;
    const float mh = mi * beta1h;
    const float vh = sqrtf(vi * beta2h) + eps;
    w[i] = fmaf(w[i], keep, -(alpha * mh / vh));
}

__global__ void k_sgd(float * w, const float * g, const float * hp, int64_t hp_nb0, int64_t n) {
    const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float alpha = *hp, wd = *(const float *) ((const char *) hp + hp_nb0);
    const float keep = 1.0f - alpha * wd;
    w[i] = fmaf(w[i], keep, -(alpha * g[i]));
}

}  // namespace

bool ggml_cuda_opt_step_supported(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const int n_ops = dst->op == GGML_OP_OPT_STEP_ADAMW ? 3 : 1;  // grad (+ m, v)
    if (!a || a->type != GGML_TYPE_F32 || !ggml_is_contiguous(a)) return false;
    for (int k = 1; k <= n_ops; k++) {
        const ggml_tensor * t = dst->src[k];
        if (!t || t->type != GGML_TYPE_F32 || !ggml_are_same_shape(a, t) || !ggml_is_contiguous(t)) return false;
    }
    const ggml_tensor * hp = dst->src[n_ops + 1];
    return hp && hp->type == GGML_TYPE_F32 && ggml_nelements(hp) == (dst->op == GGML_OP_OPT_STEP_ADAMW ? 7 : 2);
}

void ggml_cuda_op_opt_step_adamw(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0], * hp = dst->src[4];
    const int64_t n = ggml_nelements(a);
    if (n == 0) return;
    GGML_CUDA_LAUNCH(k_adamw, n_blocks(n), 256, 0, ctx.stream)((float *) a->data, (const float *) dst->src[1]->data, (float *) dst->src[2]->data,
                                                 (float *) dst->src[3]->data, (const float *) hp->data, (int64_t) hp->nb[0], n);
    CUDA_CHECK_LAUNCH();
}

void ggml_cuda_op_opt_step_sgd(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0], * hp = dst->src[2];
    const int64_t n = ggml_nelements(a);
    if (n == 0) return;
    GGML_CUDA_LAUNCH(k_sgd, n_blocks(n), 256, 0, ctx.stream)((float *) a->data, (const float *) dst->src[1]->data, (const float *) hp->data,
                                               (int64_t) hp->nb[0], n);
    CUDA_CHECK_LAUNCH();
}
