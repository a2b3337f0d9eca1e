// ops-opt.cpp - optimizer steps as graph ops: AdamW and SGD update a parameter in place from
// its gradient (params and formulas: ggml.h, ggml_opt_step_adamw / ggml_opt_step_sgd).
#include "cpu-ops.h"

extern "C" void ggml_cpu_forward_opt_step_adamw(const ggml_compute_params * params, ggml_tensor * dst) {
    GGML_ABORT("%s: no CPU kernel yet", ggml_op_name(dst->op));
}

extern "C" void ggml_cpu_forward_opt_step_sgd(const ggml_compute_params * params, ggml_tensor * dst) {
    GGML_ABORT("%s: no CPU kernel yet", ggml_op_name(dst->op));
}
