// ggml-opt.cpp - the optimization context: builds the loss, backward and optimizer graphs of a
// model once, places them once, and runs forward / backward / optimizer steps with gradient
// accumulation, a learning-rate schedule and gradient clipping. Nothing is allocated per step.
#include "ggml-opt-impl.h"
#include "ggml-alloc.h"
#include "ggml-cpu.h"
#include "ggml-impl.h"

#include <math.h>
#include <stdio.h>

#include <algorithm>
#include <thread>
#include <unordered_map>
#include <unordered_set>

struct ggml_opt_context {
    ggml_opt_params params;

    // Host memory that lives as long as the context: gradient accumulators, AdamW moments,
    // labels, the optimizer's parameter vector, ncorrect. Allocated once at init.
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

    // Static tensors, all allocated at once.
    const size_t n_static = 8 + 3 * oc->param_tensors.size();
    oc->ctx_static = ggml_init({ n_static * ggml_tensor_overhead(), nullptr, true });
    ggml_context * cs = oc->ctx_static;
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
            ggml_tensor * acc = ggml_new_tensor(cs, GGML_TYPE_F32, GGML_MAX_DIMS, p->ne);
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
        if (adamw) {
            for (ggml_tensor * p : oc->param_tensors) {
                moments.push_back(ggml_new_tensor(cs, GGML_TYPE_F32, GGML_MAX_DIMS, p->ne));
                moments.push_back(ggml_new_tensor(cs, GGML_TYPE_F32, GGML_MAX_DIMS, p->ne));
                ggml_format_name(moments[moments.size() - 2], "adamw m for %.40s", p->name);
                ggml_format_name(moments.back(), "adamw v for %.40s", p->name);
            }
        }
    }
    oc->buf_static = ggml_alloc_ctx_tensors(cs, &oc->buf_static_size);
    if (ggml_get_first_tensor(cs) && !oc->buf_static) {
        ggml_opt_free(oc);
        return nullptr;
    }
    for (ggml_tensor * t = ggml_get_first_tensor(cs); t; t = ggml_get_next_tensor(cs, t)) ggml_set_zero(t);

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
            // The final gradient node (a view of the accumulator) orders the step after it.
            ggml_tensor * g = ggml_graph_get_grad(oc->gb_grad, p);
            if (!g) g = oc->grad_accs[i];
            ggml_tensor * step = params.optimizer == GGML_OPT_OPTIMIZER_TYPE_ADAMW
                ? ggml_opt_step_adamw(oc->ctx_graphs, p, g, moments[2 * i], moments[2 * i + 1], oc->opt_pars)
                : ggml_opt_step_sgd(oc->ctx_graphs, p, g, oc->opt_pars);
            ggml_format_name(step, "step for %.40s", p->name);
            ggml_build_forward_expand(oc->gb_opt, step);
            ggml_graph_add_node(oc->g_step, step);
        }
    }

    // One placement, of the largest graph: the others are its prefixes. Tensors of ctx_compute
    // (parameters aside) are this context's to place, even if an earlier context placed them.
    for (ggml_tensor * t = ggml_get_first_tensor(params.ctx_compute); t; t = ggml_get_next_tensor(params.ctx_compute, t)) {
        const ggml_tensor * owner = t->view_src ? t->view_src : t;
        if (!(owner->flags & GGML_TENSOR_FLAG_PARAM)) t->data = nullptr;
    }
    ggml_cgraph * largest = oc->gb_opt ? oc->gb_opt : oc->gb_grad ? oc->gb_grad : oc->gf;
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
    ggml_aligned_free(oc->buf_static);
    delete oc;
}

void ggml_opt_reset(ggml_opt_context_t oc, bool optimizer) {
    if (optimizer && oc->gb_opt) {
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
size_t ggml_opt_compute_buffer_size(ggml_opt_context_t oc) { return ggml_gallocr_get_buffer_size(oc->galloc, 0); }
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

void ggml_opt_alloc(ggml_opt_context_t oc, bool backward) {
    GGML_ASSERT(!backward || oc->gb_grad);
    oc->eval_mode = backward ? 1 : 0;
}

static void compute(ggml_opt_context * oc, ggml_cgraph * g) {
    const ggml_status st = ggml_graph_compute(g, &oc->cplan);
    if (st != GGML_STATUS_SUCCESS) GGML_ABORT("ggml_opt_eval: graph compute failed (status %d)", (int) st);
}

// Datapoints whose prediction is the argmax of their label (ties: the first maximum, as argmax).
static int64_t count_correct(const ggml_tensor * pred, const ggml_tensor * labels) {
    const int64_t n = labels->ne[1], ncls = labels->ne[0];
    int64_t correct = 0;
    for (int64_t j = 0; j < n; j++) {
        const float * row = (const float *) ((const char *) labels->data + j * labels->nb[1]);
        correct += ((const int32_t *) pred->data)[j] == ggml_argmax_f32_row(row, ncls);
    }
    return correct;
}

static double grad_norm(const ggml_opt_context * oc) {
    double sum = 0.0;
    for (const ggml_tensor * acc : oc->grad_accs) {
        const float * g = (const float *) acc->data;
        const int64_t n = ggml_nelements(acc);
        for (int64_t i = 0; i < n; i++) sum += (double) g[i] * g[i];
    }
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
        for (ggml_tensor * acc : oc->grad_accs) {
            float * g = (float *) acc->data;
            const int64_t n = ggml_nelements(acc);
            for (int64_t i = 0; i < n; i++) g[i] *= scale;
        }
        info.clipped = true;
    }

    oc->iter++;
    float * pars = (float *) oc->opt_pars->data;
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
    compute(oc, oc->g_step);

    for (ggml_tensor * acc : oc->grad_accs) memset(acc->data, 0, ggml_nbytes(acc));
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
        oc->cplan.node_callback = reducer_node_callback;
        oc->cplan.node_callback_data = oc;
    }
    compute(oc, backward ? oc->gb_grad : oc->gf);
    if (announce) {
        oc->cplan.node_callback = nullptr;
        oc->cplan.node_callback_data = nullptr;
        if (r.grad_ready) {
            for (int64_t p : oc->ready_late) r.grad_ready(r.userdata, p, oc->grad_accs[(size_t) p]);
        }
    }

    const float loss = *(const float *) oc->loss->data;
    int64_t ncorrect = 0;
    if (oc->ncorrect) {
        ncorrect = count_correct(oc->pred, oc->labels);
        *(int64_t *) oc->ncorrect->data = ncorrect;
    }
    if (result) {
        ggml_opt_result_add(result, oc->outputs->ne[1], loss, oc->params.opt_period, oc->loss_per_datapoint,
                            oc->pred ? (const int32_t *) oc->pred->data : nullptr, ncorrect);
    }
    if (!backward) return;
    oc->step_loss += loss;
    if (++oc->opt_i < oc->params.opt_period || !oc->gb_opt) return;
    oc->opt_i = 0;
    if (r.reduce) r.reduce(r.userdata);
    optimizer_step(oc);
}
