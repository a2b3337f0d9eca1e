// ggml-opt.cpp - the optimization context: builds the loss, backward and optimizer graphs of a
// model once, places them once, and runs forward / backward / optimizer steps with gradient
// accumulation, a learning-rate schedule and gradient clipping. Nothing is allocated per step.
#include "ggml-opt-impl.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-impl.h"

#include <math.h>
#include <stdio.h>

#include <algorithm>
#include <map>
#include <thread>
#include <unordered_map>
#include <unordered_set>

struct ggml_opt_context {
    ggml_opt_params params;

    // Host memory that lives as long as the context: gradient accumulators, AdamW moments,
    // labels, the optimizer's parameter vector, ncorrect. Allocated once at init (with a
    // scheduler: in its CPU buffer type, in bufs_static).
    ggml_context * ctx_static = nullptr;
    void * buf_static = nullptr;
    size_t buf_static_size = 0;
    // Tensors without memory of their own until the planner places them: the loss, the backward
    // pass, recomputed activations, optimizer steps; and the graph objects.
    ggml_context * ctx_graphs = nullptr;
    ggml_gallocr_t galloc = nullptr;

    ggml_cgraph * gf = nullptr;       // forward (+ loss, predictions)
    ggml_cgraph * gb_grad = nullptr;  // gf + backward into the accumulators
    ggml_cgraph * gb_opt = nullptr;   // gb_grad + optimizer steps
    ggml_cgraph * g_step = nullptr;   // the optimizer steps of gb_opt alone (run after clipping)

    std::vector<uint8_t> work;        // the compute work buffer, sized once for the largest graph
    ggml_cplan cplan = {};

    ggml_tensor * inputs = nullptr, * outputs = nullptr, * labels = nullptr;
    ggml_tensor * loss = nullptr, * pred = nullptr, * ncorrect = nullptr;
    ggml_tensor * opt_pars = nullptr;  // F32 [7] AdamW or [2] SGD, written before each step
    std::vector<ggml_tensor *> param_tensors;  // trainable tensors, forward order
    std::vector<ggml_tensor *> grad_accs;  // their accumulators
    std::vector<ggml_tensor *> moments;    // AdamW: m, v per parameter

    bool loss_per_datapoint = false;
    int32_t opt_i = 0;        // micro-batches accumulated towards the next step
    int64_t iter = 0;         // optimizer steps done
    double step_loss = 0.0;   // loss of the micro-batches of the step under way
    int eval_mode = -1;       // set by ggml_opt_alloc: 0 forward, 1 backward; -1 from the build type

    // Data parallelism (ggml_opt_set_grad_reducer): the reducer, and for each node of gb_grad the
    // parameter whose gradient it completes (-1: none); early: parameters complete before any node.
    ggml_opt_grad_reducer reducer = {};
    std::vector<int64_t> node_param;
    std::vector<int64_t> ready_early, ready_late;

    std::mt19937 rng;

    // With a backend scheduler (params.backend_sched): the accumulators and moments live in the
    // buffer type of their parameter (the optimizer steps update them in place there), the rest
    // of the static tensors in host memory; the scheduler places each graph at ggml_opt_alloc,
    // and values are read and written through the backend interface.
    ggml_backend_sched_t sched = nullptr;
    std::map<ggml_backend_buffer_type_t, ggml_context *> ctx_static_by_buft;
    std::vector<ggml_backend_buffer_t> bufs_static;
    ggml_cgraph * allocated = nullptr;  // the graph the scheduler placed last
    // Its nodes' sources before the scheduler pointed some at its copies (put back before the
    // graph is placed again: the copies go with the placement).
    std::vector<ggml_tensor *> allocated_srcs;
    std::vector<uint8_t> pred_host;     // the predictions, copied out of the scheduler's buffers
    std::unordered_set<const ggml_tensor *> statics;  // the tensors of the static buffers
    // The optimizer steps need nothing but static tensors: per buffer type, a graph of the steps
    // of its parameters, reading its own copy of opt_pars, run by the backend of that memory
    // (the scheduler's placement of the last graph, whose loss the caller may still read, stays).
    std::map<ggml_backend_buffer_type_t, ggml_tensor *> opt_pars_by_buft;
    std::map<ggml_backend_buffer_type_t, ggml_cgraph *> g_step_by_buft;
    std::vector<std::pair<ggml_backend_t, ggml_cgraph *>> step_runs;  // each of those graphs and its backend
};

std::mt19937 & ggml_opt_rng(ggml_opt_context_t opt_ctx) { return opt_ctx->rng; }

// ---- optimizer parameters and schedules ----------------------------------------------------
struct ggml_opt_optimizer_params ggml_opt_get_default_optimizer_params(void * userdata) {
    (void) userdata;
    ggml_opt_optimizer_params p;
    p.adamw.alpha = 0.001f;
    p.adamw.beta1 = 0.9f;
    p.adamw.beta2 = 0.999f;
    p.adamw.eps = 1e-8f;
    p.adamw.wd = 0.0f;
    p.sgd.alpha = 0.001f;
    p.sgd.wd = 0.0f;
    return p;
}

struct ggml_opt_optimizer_params ggml_opt_get_constant_optimizer_params(void * userdata) {
    return *(const ggml_opt_optimizer_params *) userdata;
}

float ggml_opt_lr_factor(const struct ggml_opt_lr_schedule * s, int64_t step) {
    if (s->warmup_steps > 0 && step < s->warmup_steps) return (float) (step + 1) / (float) s->warmup_steps;
    if (s->type != GGML_OPT_LR_SCHEDULE_COSINE) return 1.0f;
    const int64_t t = step - s->warmup_steps;
    if (s->decay_steps <= 0 || t >= s->decay_steps) return s->decay_steps <= 0 ? 1.0f : s->min_factor;
    const double progress = (double) t / (double) s->decay_steps;
    return (float) (s->min_factor + (1.0 - s->min_factor) * 0.5 * (1.0 + cos(M_PI * progress)));
}

const char * ggml_opt_optimizer_name(enum ggml_opt_optimizer_type type) {
    switch (type) {
        case GGML_OPT_OPTIMIZER_TYPE_ADAMW: return "adamw";
        case GGML_OPT_OPTIMIZER_TYPE_SGD:   return "sgd";
        default:                            return "undefined";
    }
}

struct ggml_opt_params ggml_opt_default_params(struct ggml_context * ctx_compute, struct ggml_tensor * inputs,
                                               struct ggml_tensor * outputs, enum ggml_opt_loss_type loss_type) {
    ggml_opt_params p = {};
    p.ctx_compute = ctx_compute;
    p.inputs = inputs;
    p.outputs = outputs;
    p.loss_type = loss_type;
    p.build_type = GGML_OPT_BUILD_TYPE_OPT;
    p.opt_period = 1;
    p.get_opt_pars = ggml_opt_get_default_optimizer_params;
    p.get_opt_pars_ud = nullptr;
    p.optimizer = GGML_OPT_OPTIMIZER_TYPE_ADAMW;
    const unsigned hc = std::thread::hardware_concurrency();
    p.n_threads = hc > 0 ? (int) hc : 1;
    p.seed = 42;
    p.lr_schedule = { GGML_OPT_LR_SCHEDULE_CONSTANT, 0, 0, 0.0f };
    p.grad_clip = 0.0f;
    return p;
}

// ---- building ------------------------------------------------------------------------------
// Tensors reachable from t (sources and view owners), to size the graphs.
static size_t count_reachable(ggml_tensor * t) {
    std::unordered_set<const ggml_tensor *> seen;
    std::vector<ggml_tensor *> stack = { t };
    while (!stack.empty()) {
        ggml_tensor * x = stack.back();
        stack.pop_back();
        if (!x || !seen.insert(x).second) continue;
        for (int j = 0; j < GGML_MAX_SRC; j++) stack.push_back(x->src[j]);
        stack.push_back(x->view_src);
    }
    return seen.size();
}

// The loss on the outputs, flagged as loss and output. Mean-type losses are divided by
// opt_period so that the gradients accumulated over a step's micro-batches average over its
// logical batch.
static ggml_tensor * build_loss(ggml_opt_context * oc) {
    ggml_context * ctx = oc->ctx_graphs;
    ggml_tensor * out = oc->outputs;
    const float period = (float) oc->params.opt_period;
    ggml_tensor * loss = nullptr;
    switch (oc->params.loss_type) {
        case GGML_OPT_LOSS_TYPE_MEAN:
            loss = ggml_scale(ctx, ggml_sum(ctx, out), 1.0f / (period * (float) ggml_nelements(out)));
            oc->loss_per_datapoint = true;
            break;
        case GGML_OPT_LOSS_TYPE_SUM:
            loss = ggml_sum(ctx, out);
            oc->loss_per_datapoint = false;
            break;
        case GGML_OPT_LOSS_TYPE_CROSS_ENTROPY:
            loss = ggml_cross_entropy_loss(ctx, out, oc->labels);  // mean over datapoints
            if (oc->params.opt_period > 1) loss = ggml_scale(ctx, loss, 1.0f / period);
            oc->loss_per_datapoint = true;
            break;
        case GGML_OPT_LOSS_TYPE_MEAN_SQUARED_ERROR: {
            ggml_tensor * err = ggml_sqr(ctx, ggml_sub(ctx, out, oc->labels));
            loss = ggml_scale(ctx, ggml_sum(ctx, err), 1.0f / (period * (float) ggml_nelements(out)));
            oc->loss_per_datapoint = true;
            break;
        }
    }
    ggml_set_name(loss, "loss");
    ggml_set_output(loss);
    ggml_set_loss(loss);
    return loss;
}

static bool loss_uses_labels(ggml_opt_loss_type t) {
    return t == GGML_OPT_LOSS_TYPE_CROSS_ENTROPY || t == GGML_OPT_LOSS_TYPE_MEAN_SQUARED_ERROR;
}

ggml_opt_context_t ggml_opt_init(struct ggml_opt_params params) {
    GGML_ASSERT(params.ctx_compute && params.inputs && params.outputs && "ggml_opt_init: ctx_compute, inputs and outputs are required");
    GGML_ASSERT(params.opt_period >= 1);
    GGML_ASSERT(params.n_threads >= 1);
    GGML_ASSERT(params.n_checkpoints == 0 || params.checkpoints);
    GGML_ASSERT(params.get_opt_pars || params.build_type < GGML_OPT_BUILD_TYPE_OPT);
    GGML_ASSERT(params.outputs->type == GGML_TYPE_F32 && "ggml_opt_init: the outputs must be F32");

    ggml_opt_context * oc = new ggml_opt_context();
    oc->params = params;
    oc->rng.seed(params.seed);
    oc->inputs = params.inputs;
    oc->outputs = params.outputs;
    ggml_set_input(oc->inputs);
    ggml_set_output(oc->outputs);

    // Room for the forward graph, as many recomputed nodes, the backward pass (a few nodes per
    // forward node) and the optimizer steps.
    const size_t n_fwd = count_reachable(oc->outputs) + 16;
    const size_t graph_size = std::max<size_t>(GGML_DEFAULT_GRAPH_SIZE, 12 * n_fwd);
    const size_t graphs_mem = 5 * ggml_graph_overhead_custom(graph_size, true) + graph_size * ggml_tensor_overhead();
    oc->ctx_graphs = ggml_init({ graphs_mem, nullptr, true });
    if (!oc->ctx_graphs) {
        ggml_opt_free(oc);
        return nullptr;
    }

    // The forward graph up to the outputs tells which tensors are parameters.
    oc->gf = ggml_new_graph_custom(oc->ctx_graphs, graph_size, true);
    ggml_build_forward_expand(oc->gf, oc->outputs);
    for (int i = 0; i < oc->gf->n_nodes; i++) {
        ggml_tensor * node = oc->gf->nodes[i];
        if (!(node->flags & GGML_TENSOR_FLAG_PARAM)) continue;
        if (!node->data) {
            ggml_log_error("ggml_opt_init: parameter '%s' has no data (allocate and initialise the parameters first)\n", node->name);
            ggml_opt_free(oc);
            return nullptr;
        }
        oc->param_tensors.push_back(node);
    }
    const bool grad = params.build_type >= GGML_OPT_BUILD_TYPE_GRAD;
    const bool opt = params.build_type >= GGML_OPT_BUILD_TYPE_OPT;
    if (grad && oc->param_tensors.empty()) {
        ggml_log_error("ggml_opt_init: no tensor reaching the outputs is flagged with ggml_set_param\n");
        ggml_opt_free(oc);
        return nullptr;
    }

    // Static tensors, all allocated at once (with a scheduler: per buffer type, below).
    const size_t n_static = 8 + 3 * oc->param_tensors.size();
    oc->ctx_static = ggml_init({ n_static * ggml_tensor_overhead(), nullptr, true });
    ggml_context * cs = oc->ctx_static;
    oc->sched = params.backend_sched;
    // The context a parameter's accumulator and moments go in: its buffer type's.
    auto buft_of = [](const ggml_tensor * p) {
        const ggml_tensor * o = p->view_src ? p->view_src : p;
        return o->buffer ? ggml_backend_buffer_get_type(o->buffer) : ggml_backend_cpu_buffer_type();
    };
    auto ctx_for = [&](const ggml_tensor * p) -> ggml_context * {
        if (!oc->sched) return cs;
        ggml_context *& c = oc->ctx_static_by_buft[buft_of(p)];
        if (!c) c = ggml_init({ n_static * ggml_tensor_overhead(), nullptr, true });
        return c;
    };
    if (loss_uses_labels(params.loss_type)) {
        oc->labels = ggml_dup_tensor(cs, oc->outputs);
        ggml_set_name(oc->labels, "labels");
        ggml_set_input(oc->labels);
    }
    if (params.loss_type == GGML_OPT_LOSS_TYPE_CROSS_ENTROPY) {
        oc->ncorrect = ggml_new_tensor_1d(cs, GGML_TYPE_I64, 1);
        ggml_set_name(oc->ncorrect, "ncorrect");
    }
    std::unordered_map<const ggml_tensor *, ggml_tensor *> acc_of;
    std::vector<ggml_tensor *> & moments = oc->moments;
    if (grad) {
        for (ggml_tensor * p : oc->param_tensors) {
            ggml_tensor * acc = ggml_new_tensor(ctx_for(p), GGML_TYPE_F32, GGML_MAX_DIMS, p->ne);
            ggml_format_name(acc, "grad_acc for %.40s", p->name);
            oc->grad_accs.push_back(acc);
            acc_of[p] = acc;
        }
    }
    if (opt) {
        const bool adamw = params.optimizer == GGML_OPT_OPTIMIZER_TYPE_ADAMW;
        oc->opt_pars = ggml_new_tensor_1d(cs, GGML_TYPE_F32, adamw ? 7 : 2);
        ggml_set_name(oc->opt_pars, adamw ? "adamw_params" : "sgd_params");
        ggml_set_input(oc->opt_pars);
        if (oc->sched) {  // a copy in each parameter buffer type: the steps run where their parameters are
            for (ggml_tensor * p : oc->param_tensors) {
                ggml_tensor *& pars = oc->opt_pars_by_buft[buft_of(p)];
                if (!pars) pars = ggml_dup_tensor(ctx_for(p), oc->opt_pars);
            }
        }
        if (adamw) {
            for (ggml_tensor * p : oc->param_tensors) {
                moments.push_back(ggml_new_tensor(ctx_for(p), GGML_TYPE_F32, GGML_MAX_DIMS, p->ne));
                moments.push_back(ggml_new_tensor(ctx_for(p), GGML_TYPE_F32, GGML_MAX_DIMS, p->ne));
                ggml_format_name(moments[moments.size() - 2], "adamw m for %.40s", p->name);
                ggml_format_name(moments.back(), "adamw v for %.40s", p->name);
            }
        }
    }
    // With a scheduler, host memory of the CPU's buffer type there: a GPU's pinned memory when
    // the caller chose it (llama-finetune -ngl), so that the labels (n_vocab floats a token)
    // reach the GPU by DMA every micro-batch.
    ggml_backend_buffer_type_t host_buft = nullptr;
    if (oc->sched) {
        host_buft = ggml_backend_sched_get_buffer_type(oc->sched, ggml_backend_sched_get_backend(oc->sched, ggml_backend_sched_get_n_backends(oc->sched) - 1));
        if (host_buft && !ggml_backend_buft_is_host(host_buft)) host_buft = nullptr;
    }
    if (host_buft && ggml_get_first_tensor(cs)) {
        ggml_backend_buffer_t b = ggml_backend_alloc_ctx_tensors_from_buft(cs, host_buft);
        if (!b) {
            ggml_log_error("ggml_opt_init: cannot allocate the labels and optimizer inputs in %s\n", ggml_backend_buft_name(host_buft));
            ggml_opt_free(oc);
            return nullptr;
        }
        oc->bufs_static.push_back(b);
        oc->buf_static_size += ggml_backend_buffer_get_size(b);
    } else {
        oc->buf_static = ggml_alloc_ctx_tensors(cs, &oc->buf_static_size);
        if (ggml_get_first_tensor(cs) && !oc->buf_static) {
            ggml_opt_free(oc);
            return nullptr;
        }
    }
    for (ggml_tensor * t = ggml_get_first_tensor(cs); t; t = ggml_get_next_tensor(cs, t)) ggml_set_zero(t);
    for (ggml_tensor * t = ggml_get_first_tensor(cs); t; t = ggml_get_next_tensor(cs, t)) oc->statics.insert(t);
    for (auto & [buft, c] : oc->ctx_static_by_buft) {
        for (ggml_tensor * t = ggml_get_first_tensor(c); t; t = ggml_get_next_tensor(c, t)) oc->statics.insert(t);
        ggml_backend_buffer_t b = ggml_backend_alloc_ctx_tensors_from_buft(c, buft);
        if (!b) {
            ggml_log_error("ggml_opt_init: cannot allocate the accumulators and moments in %s\n", ggml_backend_buft_name(buft));
            ggml_opt_free(oc);
            return nullptr;
        }
        ggml_backend_buffer_clear(b, 0);
        oc->bufs_static.push_back(b);
        oc->buf_static_size += ggml_backend_buffer_get_size(b);
    }

    // Loss and predictions complete the forward graph.
    oc->loss = build_loss(oc);
    ggml_build_forward_expand(oc->gf, oc->loss);
    if (params.loss_type == GGML_OPT_LOSS_TYPE_CROSS_ENTROPY) {
        oc->pred = ggml_argmax(oc->ctx_graphs, oc->outputs);
        ggml_set_name(oc->pred, "pred");
        ggml_set_output(oc->pred);
        ggml_build_forward_expand(oc->gf, oc->pred);
    }

    if (grad) {
        oc->gb_grad = ggml_graph_dup(oc->ctx_graphs, oc->gf, true);
        std::vector<ggml_tensor *> accs(oc->gb_grad->n_nodes, nullptr);
        for (int i = 0; i < oc->gb_grad->n_nodes; i++) {
            auto it = acc_of.find(oc->gb_grad->nodes[i]);
            if (it != acc_of.end()) accs[i] = it->second;
        }
        if (params.n_checkpoints > 0) {
            ggml_build_backward_checkpointed(oc->ctx_graphs, oc->gb_grad, accs.data(), params.checkpoints, params.n_checkpoints);
        } else {
            ggml_build_backward_expand(oc->ctx_graphs, oc->gb_grad, accs.data());
        }
    }
    if (opt) {
        oc->gb_opt = ggml_graph_dup(oc->ctx_graphs, oc->gb_grad, true);
        oc->g_step = ggml_new_graph_custom(oc->ctx_graphs, oc->param_tensors.size() + 1, false);
        for (size_t i = 0; i < oc->param_tensors.size(); i++) {
            ggml_tensor * p = oc->param_tensors[i];
            ggml_tensor * pars = oc->sched ? oc->opt_pars_by_buft[buft_of(p)] : oc->opt_pars;
            // The final gradient node (a view of the accumulator) orders the step after it.
            ggml_tensor * g = ggml_graph_get_grad(oc->gb_grad, p);
            if (!g) g = oc->grad_accs[i];
            ggml_tensor * step = params.optimizer == GGML_OPT_OPTIMIZER_TYPE_ADAMW
                ? ggml_opt_step_adamw(oc->ctx_graphs, p, g, moments[2 * i], moments[2 * i + 1], pars)
                : ggml_opt_step_sgd(oc->ctx_graphs, p, g, pars);
            ggml_format_name(step, "step for %.40s", p->name);
            ggml_build_forward_expand(oc->gb_opt, step);
            ggml_graph_add_node(oc->g_step, step);
            if (oc->sched) {
                ggml_cgraph *& gs = oc->g_step_by_buft[buft_of(p)];
                if (!gs) gs = ggml_new_graph_custom(oc->ctx_graphs, oc->param_tensors.size() + 1, false);
                ggml_graph_add_node(gs, step);
            }
        }
    }

    // One placement, of the largest graph: the others are its prefixes. Tensors of ctx_compute
    // (parameters aside) are this context's to place, even if an earlier context placed them.
    for (ggml_tensor * t = ggml_get_first_tensor(params.ctx_compute); t; t = ggml_get_next_tensor(params.ctx_compute, t)) {
        const ggml_tensor * owner = t->view_src ? t->view_src : t;
        if (!(owner->flags & GGML_TENSOR_FLAG_PARAM)) t->data = nullptr;
    }
    ggml_cgraph * largest = oc->gb_opt ? oc->gb_opt : oc->gb_grad ? oc->gb_grad : oc->gf;
    if (oc->sched) {  // sized once for the largest graph computed (the steps run alone)
        for (auto & [buft, gs] : oc->g_step_by_buft) {
            ggml_backend_t b = nullptr;
            for (int k = 0; k < ggml_backend_sched_get_n_backends(oc->sched) && !b; k++) {
                ggml_backend_t c = ggml_backend_sched_get_backend(oc->sched, k);
                if (ggml_backend_get_default_buffer_type(c) == buft || ggml_backend_supports_buft(c, buft)) b = c;
            }
            if (!b) {
                ggml_log_error("ggml_opt_init: no backend of the scheduler computes in %s, where parameters live\n",
                               ggml_backend_buft_name(buft));
                ggml_opt_free(oc);
                return nullptr;
            }
            oc->step_runs.push_back({ b, gs });
        }
        if (!ggml_backend_sched_reserve(oc->sched, oc->gb_grad ? oc->gb_grad : oc->gf)) {
            ggml_opt_free(oc);
            return nullptr;
        }
        ggml_opt_reset(oc, true);
        return oc;
    }
    oc->galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    if (!ggml_gallocr_alloc_graph(oc->galloc, largest)) {
        ggml_opt_free(oc);
        return nullptr;
    }
    oc->cplan = ggml_graph_plan(largest, params.n_threads);
    oc->work.resize(oc->cplan.work_size);
    oc->cplan.work_data = oc->work.empty() ? nullptr : oc->work.data();

    ggml_opt_reset(oc, true);
    return oc;
}

void ggml_opt_free(ggml_opt_context_t oc) {
    if (!oc) return;
    ggml_gallocr_free(oc->galloc);
    ggml_free(oc->ctx_graphs);
    ggml_free(oc->ctx_static);
    for (ggml_backend_buffer_t b : oc->bufs_static) ggml_backend_buffer_free(b);
    for (auto & bc : oc->ctx_static_by_buft) ggml_free(bc.second);
    ggml_aligned_free(oc->buf_static);
    delete oc;
}

void ggml_opt_reset(ggml_opt_context_t oc, bool optimizer) {
    if (oc->sched) {  // the loss's gradient is set to one where ggml_opt_alloc places it
        for (ggml_tensor * acc : oc->grad_accs) ggml_backend_tensor_memset(acc, 0, 0, ggml_nbytes(acc));
        if (optimizer) {
            for (ggml_tensor * m : oc->moments) ggml_backend_tensor_memset(m, 0, 0, ggml_nbytes(m));
            oc->iter = 0;
        }
    } else if (optimizer && oc->gb_opt) {
        ggml_graph_reset(oc->gb_opt);  // moments too
        oc->iter = 0;
    } else if (oc->gb_grad) {
        ggml_graph_reset(oc->gb_grad);
    }
    oc->opt_i = 0;
    oc->step_loss = 0.0;
}

// ---- accessors -----------------------------------------------------------------------------
bool ggml_opt_static_graphs(ggml_opt_context_t) { return true; }
struct ggml_tensor * ggml_opt_inputs(ggml_opt_context_t oc) { return oc->inputs; }
struct ggml_tensor * ggml_opt_outputs(ggml_opt_context_t oc) { return oc->outputs; }
struct ggml_tensor * ggml_opt_labels(ggml_opt_context_t oc) { return oc->labels; }
struct ggml_tensor * ggml_opt_loss(ggml_opt_context_t oc) { return oc->loss; }
struct ggml_tensor * ggml_opt_pred(ggml_opt_context_t oc) { return oc->pred; }
struct ggml_tensor * ggml_opt_ncorrect(ggml_opt_context_t oc) { return oc->ncorrect; }
struct ggml_tensor * ggml_opt_grad_acc(ggml_opt_context_t oc, struct ggml_tensor * node) {
    return oc->gb_grad ? ggml_graph_get_grad_acc(oc->gb_grad, node) : nullptr;
}
enum ggml_opt_optimizer_type ggml_opt_context_optimizer_type(ggml_opt_context_t oc) { return oc->params.optimizer; }
int64_t ggml_opt_n_steps(ggml_opt_context_t oc) { return oc->iter; }
void ggml_opt_set_n_steps(ggml_opt_context_t oc, int64_t n_steps) { oc->iter = n_steps; }
struct ggml_tensor * ggml_opt_optimizer_state(ggml_opt_context_t oc, struct ggml_tensor * param, int i) {
    if (oc->moments.empty() || i < 0 || i > 1) return nullptr;
    for (size_t k = 0; k < oc->param_tensors.size(); k++) {
        if (oc->param_tensors[k] == param) return oc->moments[2 * k + (size_t) i];
    }
    return nullptr;
}
size_t ggml_opt_compute_buffer_size(ggml_opt_context_t oc) {
    if (!oc->sched) return ggml_gallocr_get_buffer_size(oc->galloc, 0);
    size_t n = 0;
    for (int i = 0; i < ggml_backend_sched_get_n_backends(oc->sched); i++) {
        n += ggml_backend_sched_get_buffer_size(oc->sched, ggml_backend_sched_get_backend(oc->sched, i));
    }
    return n;
}
size_t ggml_opt_static_buffer_size(ggml_opt_context_t oc) { return oc->buf_static_size; }
struct ggml_cgraph * ggml_opt_graph_forward(ggml_opt_context_t oc) { return oc->gf; }
struct ggml_cgraph * ggml_opt_graph_grad(ggml_opt_context_t oc) { return oc->gb_grad; }
struct ggml_cgraph * ggml_opt_graph_opt(ggml_opt_context_t oc) { return oc->gb_opt; }

void ggml_opt_set_grad_reducer(ggml_opt_context_t oc, const struct ggml_opt_grad_reducer * reducer) {
    oc->reducer = reducer ? *reducer : ggml_opt_grad_reducer{};
    oc->node_param.clear();
    oc->ready_early.clear();
    oc->ready_late.clear();
    if (!reducer || !reducer->grad_ready || !oc->gb_grad) return;
    GGML_ASSERT(reducer->reduce && "ggml_opt_set_grad_reducer: reduce is required");
    if (oc->sched) {  // the backends run their splits whole: every gradient is announced after them
        for (size_t i = 0; i < oc->param_tensors.size(); i++) oc->ready_late.push_back((int64_t) i);
        return;
    }
    // Where each gradient is complete: its last node in gb_grad (an addition into the
    // accumulator), before any node if nothing adds to it, after the graph if it is not found.
    ggml_cgraph * g = oc->gb_grad;
    oc->node_param.assign((size_t) g->n_nodes, -1);
    std::unordered_map<const ggml_tensor *, int> index;
    for (int j = 0; j < g->n_nodes; j++) index[g->nodes[j]] = j;
    for (size_t i = 0; i < oc->param_tensors.size(); i++) {
        const ggml_tensor * grad = ggml_graph_get_grad(g, oc->param_tensors[i]);
        auto it = grad ? index.find(grad) : index.end();
        if (grad == oc->grad_accs[i]) oc->ready_early.push_back((int64_t) i);
        else if (it == index.end()) oc->ready_late.push_back((int64_t) i);
        else oc->node_param[(size_t) it->second] = (int64_t) i;
    }
}

int64_t ggml_opt_n_params(ggml_opt_context_t oc) { return (int64_t) oc->param_tensors.size(); }
struct ggml_tensor * ggml_opt_param(ggml_opt_context_t oc, int64_t i) {
    return i >= 0 && i < (int64_t) oc->param_tensors.size() ? oc->param_tensors[(size_t) i] : nullptr;
}

// ---- computing -----------------------------------------------------------------------------
// The node callback of the backward pass that ends a step, with a reducer installed.
static void reducer_node_callback(int i, struct ggml_tensor * node, void * data) {
    (void) node;
    ggml_opt_context * oc = (ggml_opt_context *) data;
    const ggml_opt_grad_reducer & r = oc->reducer;
    const int64_t p = i < (int) oc->node_param.size() ? oc->node_param[(size_t) i] : -1;
    if (p >= 0 && r.grad_ready) r.grad_ready(r.userdata, p, oc->grad_accs[(size_t) p]);
    if (r.poll) r.poll(r.userdata);
}

// With a scheduler: places g (its tensors' earlier places are gone).
static void sched_place(ggml_opt_context * oc, ggml_cgraph * g) {
    // The same graph again (the next micro-batch): its places stand. Placing anew costs about
    // a microsecond a node (a training graph: thousands), and lands on the same addresses.
    if (oc->allocated == g) return;
    if (ggml_cgraph * prev = oc->allocated) {
        for (int i = 0; i < prev->n_nodes; i++) memcpy(prev->nodes[i]->src, &oc->allocated_srcs[(size_t) i * GGML_MAX_SRC], sizeof(prev->nodes[i]->src));
    }
    // The placed tensors forget their places (the planner places only tensors without memory):
    // everything of ctx_compute but the parameters, and every tensor the graphs added.
    for (ggml_context * c : { oc->params.ctx_compute, oc->ctx_graphs }) {
        for (ggml_tensor * t = ggml_get_first_tensor(c); t; t = ggml_get_next_tensor(c, t)) {
            const ggml_tensor * owner = t->view_src ? t->view_src : t;
            if ((owner->flags & GGML_TENSOR_FLAG_PARAM) || oc->statics.count(owner)) continue;  // their places stay
            t->data = nullptr;
            t->buffer = nullptr;
        }
    }
    oc->allocated_srcs.resize((size_t) g->n_nodes * GGML_MAX_SRC);
    for (int i = 0; i < g->n_nodes; i++) memcpy(&oc->allocated_srcs[(size_t) i * GGML_MAX_SRC], g->nodes[i]->src, sizeof(g->nodes[i]->src));
    ggml_backend_sched_reset(oc->sched);
    if (!ggml_backend_sched_alloc_graph(oc->sched, g)) GGML_ABORT("ggml_opt: the scheduler cannot place the graph");
    oc->allocated = g;
}

void ggml_opt_alloc(ggml_opt_context_t oc, bool backward) {
    GGML_ASSERT(!backward || oc->gb_grad);
    oc->eval_mode = backward ? 1 : 0;
    if (!oc->sched) return;
    sched_place(oc, backward ? oc->gb_grad : oc->gf);
    if (backward) {  // where the scheduler put the loss's gradient: one
        ggml_tensor * seed = ggml_graph_get_grad_acc(oc->gb_grad, oc->loss);
        const float one = 1.0f;
        if (seed) ggml_backend_tensor_set(seed, &one, 0, sizeof(one));
    }
}

static void compute(ggml_opt_context * oc, ggml_cgraph * g) {
    ggml_status st;
    if (oc->sched) {
        GGML_ASSERT(oc->allocated == g && "ggml_opt_eval: call ggml_opt_alloc first (a backend scheduler places the graph there)");
        st = ggml_backend_sched_graph_compute(oc->sched, g);
    } else {
        st = ggml_graph_compute(g, &oc->cplan);
    }
    if (st != GGML_STATUS_SUCCESS) GGML_ABORT("ggml_opt_eval: graph compute failed (status %d)", (int) st);
}

// A static or computed tensor's values in host memory.
static std::vector<uint8_t> host_copy(const ggml_tensor * t) {
    std::vector<uint8_t> v(ggml_nbytes(t));
    ggml_backend_tensor_get(t, v.data(), 0, v.size());
    return v;
}

// Datapoints whose prediction is the argmax of their label (ties: the first maximum, as argmax).
static int64_t count_correct(const int32_t * pred, const ggml_tensor * labels) {
    const int64_t n = labels->ne[1], ncls = labels->ne[0];
    int64_t correct = 0;
    for (int64_t j = 0; j < n; j++) {
        const float * row = (const float *) ((const char *) labels->data + j * labels->nb[1]);
        correct += pred[j] == ggml_argmax_f32_row(row, ncls);
    }
    return correct;
}

// Calls f(values, n) on each accumulator's gradients; with a scheduler on host copies, which
// are written back when f returns true.
template <typename F>
static void for_each_grad(const ggml_opt_context * oc, F && f) {
    for (ggml_tensor * acc : oc->grad_accs) {
        const int64_t n = ggml_nelements(acc);
        if (!oc->sched) {
            f((float *) acc->data, n);
            continue;
        }
        std::vector<uint8_t> v = host_copy(acc);
        if (f((float *) v.data(), n)) ggml_backend_tensor_set(acc, v.data(), 0, v.size());
    }
}

static double grad_norm(const ggml_opt_context * oc) {
    double sum = 0.0;
    for_each_grad(oc, [&](const float * g, int64_t n) {
        for (int64_t i = 0; i < n; i++) sum += (double) g[i] * g[i];
        return false;
    });
    return sqrt(sum);
}

// Clips the accumulated gradients, runs the optimizer steps and starts the next accumulation.
static void optimizer_step(ggml_opt_context * oc) {
    const ggml_opt_params & P = oc->params;
    const ggml_opt_optimizer_params op = P.get_opt_pars(P.get_opt_pars_ud);
    const float factor = ggml_opt_lr_factor(&P.lr_schedule, oc->iter);

    ggml_opt_step_info info = {};
    const bool want_norm = P.grad_clip > 0.0f || P.step_callback;
    const double norm = want_norm ? grad_norm(oc) : 0.0;
    info.grad_norm = (float) norm;
    if (P.grad_clip > 0.0f && norm > P.grad_clip) {
        const float scale = (float) (P.grad_clip / norm);
        for_each_grad(oc, [&](float * g, int64_t n) {
            for (int64_t i = 0; i < n; i++) g[i] *= scale;
            return true;
        });
        info.clipped = true;
    }

    oc->iter++;
    float pars[7] = {};
    if (P.optimizer == GGML_OPT_OPTIMIZER_TYPE_ADAMW) {
        info.lr = op.adamw.alpha * factor;
        pars[0] = info.lr;
        pars[1] = op.adamw.beta1;
        pars[2] = op.adamw.beta2;
        pars[3] = op.adamw.eps;
        pars[4] = op.adamw.wd;
        pars[5] = (float) (1.0 / (1.0 - pow((double) op.adamw.beta1, (double) oc->iter)));
        pars[6] = (float) (1.0 / (1.0 - pow((double) op.adamw.beta2, (double) oc->iter)));
    } else {
        info.lr = op.sgd.alpha * factor;
        pars[0] = info.lr;
        pars[1] = op.sgd.wd;
    }
    ggml_backend_tensor_set(oc->opt_pars, pars, 0, ggml_nbytes(oc->opt_pars));
    if (oc->sched) {
        for (auto & [buft, t] : oc->opt_pars_by_buft) ggml_backend_tensor_set(t, pars, 0, ggml_nbytes(t));
        for (auto & [b, gs] : oc->step_runs) {
            if (ggml_backend_graph_compute(b, gs) != GGML_STATUS_SUCCESS) GGML_ABORT("ggml_opt: the optimizer steps failed");
        }
    } else {
        compute(oc, oc->g_step);
    }

    for (ggml_tensor * acc : oc->grad_accs) ggml_backend_tensor_memset(acc, 0, 0, ggml_nbytes(acc));
    info.step = oc->iter;
    info.loss = (float) oc->step_loss;
    oc->step_loss = 0.0;
    if (P.step_callback) P.step_callback(oc, &info, P.step_callback_ud);
}

void ggml_opt_eval(ggml_opt_context_t oc, ggml_opt_result_t result) {
    const bool backward = oc->eval_mode >= 0 ? oc->eval_mode == 1 : oc->gb_grad != nullptr;
    oc->eval_mode = -1;
    // The backward pass that ends a step, with a reducer: gradients are announced as they complete.
    const ggml_opt_grad_reducer & r = oc->reducer;
    const bool ends_step = backward && oc->gb_opt && oc->opt_i + 1 >= oc->params.opt_period;
    const bool announce = ends_step && r.reduce && (r.grad_ready || r.poll);
    if (announce) {
        if (r.grad_ready) {
            for (int64_t p : oc->ready_early) r.grad_ready(r.userdata, p, oc->grad_accs[(size_t) p]);
        }
        if (!oc->sched) {
            oc->cplan.node_callback = reducer_node_callback;
            oc->cplan.node_callback_data = oc;
        }
    }
    compute(oc, backward ? oc->gb_grad : oc->gf);
    if (announce) {
        oc->cplan.node_callback = nullptr;
        oc->cplan.node_callback_data = nullptr;
        if (r.grad_ready) {
            for (int64_t p : oc->ready_late) r.grad_ready(r.userdata, p, oc->grad_accs[(size_t) p]);
        }
    }

    float loss;
    ggml_backend_tensor_get(oc->loss, &loss, 0, sizeof(loss));
    const int32_t * pred = nullptr;
    if (oc->pred && oc->sched) {
        oc->pred_host.resize(ggml_nbytes(oc->pred));
        ggml_backend_tensor_get(oc->pred, oc->pred_host.data(), 0, oc->pred_host.size());
        pred = (const int32_t *) oc->pred_host.data();
    } else if (oc->pred) {
        pred = (const int32_t *) oc->pred->data;
    }
    int64_t ncorrect = 0;
    if (oc->ncorrect) {
        ncorrect = count_correct(pred, oc->labels);
        *(int64_t *) oc->ncorrect->data = ncorrect;  // host memory
    }
    if (result) {
        ggml_opt_result_add(result, oc->outputs->ne[1], loss, oc->params.opt_period, oc->loss_per_datapoint,
                            pred, ncorrect);
    }
    if (!backward) return;
    oc->step_loss += loss;
    if (++oc->opt_i < oc->params.opt_period || !oc->gb_opt) return;
    oc->opt_i = 0;
    if (r.reduce) r.reduce(r.userdata);
    optimizer_step(oc);
}
