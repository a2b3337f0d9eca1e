// ops-opt.cpp - optimizer steps as graph ops: AdamW and SGD update a parameter in place from
// its gradient (params and formulas: ggml.h, ggml_opt_step_adamw / ggml_opt_step_sgd).
//
// Every tensor is contiguous F32 of the parameter's shape (the builders check it), so the
// update is elementwise over flat indices, split across threads in contiguous chunks; each
// element is computed the same way whatever the split. The hyperparameters come from an F32
// tensor so one graph serves every step (the caller updates the bias corrections). Every
// multiply-add is an explicit fmaf: left to the compiler, vectorized and scalar iterations may
// fuse different pairs (seen on aarch64), and the result would depend on the thread split.
#include "cpu-ops.h"

#include <math.h>

namespace {

// Value i of the F32 hyperparameter vector (any stride).
inline float hparam(const ggml_tensor * p, int64_t i) {
    return *(const float *) ((const char *) p->data + i * p->nb[0]);
}

void check_operand(const ggml_tensor * a, const ggml_tensor * t, const char * what) {
    if (t == nullptr || t->type != GGML_TYPE_F32 || !ggml_are_same_shape(a, t) || !ggml_is_contiguous(t)) {
        GGML_ABORT("opt_step: %s must be a contiguous F32 tensor of the parameter's shape", what);
    }
}

}  // namespace

// src0 the parameter a, src1 grad g, src2 m, src3 v, src4 F32 [7] = alpha, beta1, beta2, eps,
// wd, beta1h, beta2h. Per element:
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;
//   a = a (1 - alpha wd) - alpha (m beta1h) / (sqrt(v beta2h) + eps)
extern "C" void ggml_cpu_forward_opt_step_adamw(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * hp = dst->src[4];
    GGML_ASSERT(a != nullptr && a->type == GGML_TYPE_F32 && ggml_is_contiguous(a));
    check_operand(a, dst->src[1], "grad");
    check_operand(a, dst->src[2], "m");
    check_operand(a, dst->src[3], "v");
    GGML_ASSERT(hp != nullptr && hp->type == GGML_TYPE_F32 && ggml_nelements(hp) == 7);

    const float alpha  = hparam(hp, 0);
    const float beta1  = hparam(hp, 1);
    const float beta2  = hparam(hp, 2);
    const float eps    = hparam(hp, 3);
    const float wd     = hparam(hp, 4);
    const float beta1h = hparam(hp, 5);
    const float beta2h = hparam(hp, 6);
    const float keep = 1.0f - alpha * wd;

    float * w = (float *) a->data;
    const float * g = (const float *) dst->src[1]->data;
    float * m = (float *) dst->src[2]->data;
    float * v = (float *) dst->src[3]->data;

    int64_t i0, i1;
    ggml_cpu_split_rows(ggml_nelements(a), params->ith, params->nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        const float gi = g[i];
        const float mi = fmaf(m[i], beta1, gi * (1.0f - beta1));
        const float vi = fmaf(v[i], beta2, gi * gi * (1.0f - beta2));
        m[i] = mi;
        v[i] = vi;
        const float mh = mi * beta1h;
        const float vh = sqrtf(vi * beta2h) + eps;
        w[i] = fmaf(w[i], keep, -(alpha * mh / vh));
    }
}

// src0 the parameter a, src1 grad g, src2 F32 [2] = alpha, wd:  a = a (1 - alpha wd) - alpha g
extern "C" void ggml_cpu_forward_opt_step_sgd(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * hp = dst->src[2];
    GGML_ASSERT(a != nullptr && a->type == GGML_TYPE_F32 && ggml_is_contiguous(a));
    check_operand(a, dst->src[1], "grad");
    GGML_ASSERT(hp != nullptr && hp->type == GGML_TYPE_F32 && ggml_nelements(hp) == 2);

    const float alpha = hparam(hp, 0);
    const float wd    = hparam(hp, 1);
    const float keep = 1.0f - alpha * wd;

    float * w = (float *) a->data;
    const float * g = (const float *) dst->src[1]->data;

    int64_t i0, i1;
    ggml_cpu_split_rows(ggml_nelements(a), params->ith, params->nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) w[i] = fmaf(w[i], keep, -(alpha * g[i]));
}
