// ggml-opt.h - training: datasets, an optimization context that owns the forward, backward and
// optimizer graphs of a model, results (loss, accuracy), and the loop over a dataset.
//
// Names and semantics follow upstream ggml's ggml-opt.h: static graphs only (ctx_compute, inputs
// and outputs are given at init). Without a backend scheduler (n_threads then) everything runs
// on the CPU, placed by the memory planner once; with one (backend_sched) the scheduler places
// each graph and splits it between its backends (a GPU holding the parameters). Beyond upstream:
// learning-rate schedules (warm-up, cosine decay), gradient clipping by global L2 norm, a
// callback after every optimizer step, and gradient checkpointing.
//
// Intended use:
//  1. Pick the loss for the problem.
//  2. Make a dataset and fill its data (and labels, if the loss uses them).
//  3. Build the model's graph in two contexts: a static one for the parameters (flagged with
//     ggml_set_param, allocated and initialised by you, e.g. with ggml_alloc_ctx_tensors), and a
//     no_alloc one (ctx_compute) for everything computed from the inputs. The second dimension
//     of inputs and outputs is the datapoint index (ne[1] = datapoints per physical batch).
//  4. Call ggml_opt_fit, or ggml_opt_init + ggml_opt_epoch for more control.
#pragma once

#include "ggml.h"
#include "ggml-backend.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ggml_opt_dataset;
struct ggml_opt_context;
struct ggml_opt_result;

typedef struct ggml_opt_dataset * ggml_opt_dataset_t;
typedef struct ggml_opt_context * ggml_opt_context_t;
typedef struct ggml_opt_result  * ggml_opt_result_t;

// ====== Loss ======

// What the optimizer minimizes, built on the outputs. MEAN and SUM reduce the outputs themselves
// (a custom loss computed per datapoint by the model); CROSS_ENTROPY treats the outputs as
// logits [n_classes, n] against label probabilities; MEAN_SQUARED_ERROR compares them to labels.
enum ggml_opt_loss_type {
    GGML_OPT_LOSS_TYPE_MEAN,
    GGML_OPT_LOSS_TYPE_SUM,
    GGML_OPT_LOSS_TYPE_CROSS_ENTROPY,
    GGML_OPT_LOSS_TYPE_MEAN_SQUARED_ERROR,
};

// ====== Dataset ======

ggml_opt_dataset_t ggml_opt_dataset_init(
        enum ggml_type type_data,    // type of the data tensor
        enum ggml_type type_label,   // type of the labels tensor
        int64_t        ne_datapoint, // elements per datapoint
        int64_t        ne_label,     // elements per label (0: no labels)
        int64_t        ndata,        // datapoints (and labels)
        int64_t        ndata_shard); // datapoints per shard: the unit that is shuffled and copied
void ggml_opt_dataset_free(ggml_opt_dataset_t dataset);

int64_t              ggml_opt_dataset_ndata (ggml_opt_dataset_t dataset);
struct ggml_tensor * ggml_opt_dataset_data  (ggml_opt_dataset_t dataset); // [ne_datapoint, ndata]
struct ggml_tensor * ggml_opt_dataset_labels(ggml_opt_dataset_t dataset); // [ne_label, ndata], NULL without labels

// Shuffles the shards of the first idata datapoints (all of them if idata < 0) with opt_ctx's
// random generator (seeded by ggml_opt_params.seed, so runs repeat).
void ggml_opt_dataset_shuffle(ggml_opt_context_t opt_ctx, ggml_opt_dataset_t dataset, int64_t idata);

// Copies batch ibatch (in shuffled order) into data_batch [ne_datapoint, n] and, if not NULL,
// labels_batch [ne_label, n]; n must be a multiple of the shard size.
void ggml_opt_dataset_get_batch(
        ggml_opt_dataset_t   dataset,
        struct ggml_tensor * data_batch,
        struct ggml_tensor * labels_batch,
        int64_t              ibatch);
// The same into plain memory: nb_data_batch bytes of data (a multiple of a shard's bytes).
void ggml_opt_dataset_get_batch_host(
        ggml_opt_dataset_t   dataset,
        void               * data_batch,
        size_t               nb_data_batch,
        void               * labels_batch,
        int64_t              ibatch);

// ====== Model / Context ======

enum ggml_opt_build_type {
    GGML_OPT_BUILD_TYPE_FORWARD = 10,  // forward pass only (evaluation)
    GGML_OPT_BUILD_TYPE_GRAD    = 20,  // + backward pass (gradients into the accumulators)
    GGML_OPT_BUILD_TYPE_OPT     = 30,  // + optimizer step
};

enum ggml_opt_optimizer_type {
    GGML_OPT_OPTIMIZER_TYPE_ADAMW,
    GGML_OPT_OPTIMIZER_TYPE_SGD,

    GGML_OPT_OPTIMIZER_TYPE_COUNT
};

// How the optimizer steps (formulas: ggml_opt_step_adamw, ggml_opt_step_sgd in ggml.h).
struct ggml_opt_optimizer_params {
    struct {
        float alpha; // learning rate
        float beta1; // decay of the first moment
        float beta2; // decay of the second moment
        float eps;   // added to the root of the second moment
        float wd;    // decoupled weight decay, 0.0f for none
    } adamw;
    struct {
        float alpha; // learning rate
        float wd;    // decoupled weight decay
    } sgd;
};

// Called before every optimizer step for the parameters of that step; userdata is
// ggml_opt_params.get_opt_pars_ud (a pointer to the epoch, an int64_t, in ggml_opt_fit).
typedef struct ggml_opt_optimizer_params (*ggml_opt_get_optimizer_params)(void * userdata);

// Constant defaults (AdamW alpha 1e-3, betas 0.9 / 0.999, eps 1e-8, no weight decay; SGD alpha
// 1e-3); userdata is not used.
struct ggml_opt_optimizer_params ggml_opt_get_default_optimizer_params(void * userdata);
// *(struct ggml_opt_optimizer_params *) userdata.
struct ggml_opt_optimizer_params ggml_opt_get_constant_optimizer_params(void * userdata);

// The learning rate of optimizer step t (0-based) is alpha * ggml_opt_lr_factor(schedule, t):
// linear warm-up over warmup_steps (factor (t+1)/warmup_steps), then constant or a cosine decay
// from 1 to min_factor over decay_steps, staying at min_factor afterwards.
enum ggml_opt_lr_schedule_type {
    GGML_OPT_LR_SCHEDULE_CONSTANT,
    GGML_OPT_LR_SCHEDULE_COSINE,
};
struct ggml_opt_lr_schedule {
    enum ggml_opt_lr_schedule_type type;
    int64_t warmup_steps; // 0: none
    int64_t decay_steps;  // cosine: steps from the end of warm-up to min_factor (ggml_opt_fit: 0 = to the last step)
    float   min_factor;   // cosine: the final learning rate as a fraction of alpha
};
float ggml_opt_lr_factor(const struct ggml_opt_lr_schedule * schedule, int64_t step);

// What ggml_opt_params.step_callback receives after every optimizer step.
struct ggml_opt_step_info {
    int64_t step;      // optimizer steps done (1 after the first)
    float   loss;      // loss of the step's logical batch (its opt_period micro-batches)
    float   lr;        // learning rate used (alpha after the schedule)
    float   grad_norm; // global L2 norm of the gradients, before clipping
    bool    clipped;   // the gradients were scaled down to grad_clip
};
typedef void (*ggml_opt_step_callback)(ggml_opt_context_t opt_ctx, const struct ggml_opt_step_info * info, void * userdata);

struct ggml_opt_params {
    struct ggml_context * ctx_compute; // no_alloc context of the model's graph (inputs to outputs)
    struct ggml_tensor  * inputs;      // [ne_datapoint, n]: set before every ggml_opt_eval
    struct ggml_tensor  * outputs;     // [ne_label, n] when the loss uses labels

    enum ggml_opt_loss_type  loss_type;
    enum ggml_opt_build_type build_type;

    int32_t opt_period; // micro-batches whose gradients are accumulated per optimizer step

    ggml_opt_get_optimizer_params get_opt_pars;    // optimizer parameters, asked before every step
    void *                        get_opt_pars_ud;

    enum ggml_opt_optimizer_type optimizer;

    int      n_threads; // CPU threads of every compute (default: all cores; without backend_sched)

    // NULL: everything on the CPU, placed once. Else the scheduler places each graph at
    // ggml_opt_alloc (set the inputs after it; a call for the graph placed last keeps its
    // places, and the inputs keep their memory) across its backends: the parameters may live in
    // a device's buffers (their accumulators and AdamW moments go to the same buffer type), and
    // the nodes run where the scheduler puts them. A gradient reducer then hears of every
    // gradient after the backward pass (no overlap) and reads its accumulators with
    // ggml_backend_tensor_get, writes them with ggml_backend_tensor_set.
    ggml_backend_sched_t backend_sched;
    uint32_t seed;      // of the dataset shuffling

    struct ggml_opt_lr_schedule lr_schedule; // applied to alpha per optimizer step
    float grad_clip; // > 0: gradients scaled so that their global L2 norm is at most this; 0: off

    ggml_opt_step_callback step_callback; // NULL: none
    void *                 step_callback_ud;

    // Gradient checkpointing (ggml_build_backward_checkpointed): tensors of the forward pass kept
    // for the backward pass, e.g. each layer's output; everything between them is recomputed.
    // NULL / 0: the backward pass keeps every activation it reads.
    struct ggml_tensor ** checkpoints;
    int                   n_checkpoints;
};

// Defaults: build type OPT, opt_period 1, AdamW with ggml_opt_get_default_optimizer_params,
// all cores, constant learning rate, no clipping, no callback, no checkpoints.
struct ggml_opt_params ggml_opt_default_params(
        struct ggml_context   * ctx_compute,
        struct ggml_tensor    * inputs,
        struct ggml_tensor    * outputs,
        enum ggml_opt_loss_type loss_type);

// Builds the graphs, allocates gradient accumulators and optimizer moments in a static buffer,
// places every computed tensor with the memory planner once, and resets (ggml_opt_reset with
// optimizer = true). Parameters must already have data. The tensors of ctx_compute are placed
// by the context (data set earlier is dropped): one context at a time per ctx_compute. NULL on
// failure (with a message).
ggml_opt_context_t ggml_opt_init(struct ggml_opt_params params);
void ggml_opt_free(ggml_opt_context_t opt_ctx);

// Gradient accumulators to zero, the loss gradient to one, and with optimizer = true the AdamW
// moments to zero and the step count to 0.
void ggml_opt_reset(ggml_opt_context_t opt_ctx, bool optimizer);

bool ggml_opt_static_graphs(ggml_opt_context_t opt_ctx); // always true here

struct ggml_tensor * ggml_opt_inputs(  ggml_opt_context_t opt_ctx); // forward graph input tensor
struct ggml_tensor * ggml_opt_outputs( ggml_opt_context_t opt_ctx); // forward graph output tensor
struct ggml_tensor * ggml_opt_labels(  ggml_opt_context_t opt_ctx); // labels to compare outputs against (NULL for MEAN / SUM)
struct ggml_tensor * ggml_opt_loss(    ggml_opt_context_t opt_ctx); // scalar loss of the last eval (scaled by 1/opt_period)
struct ggml_tensor * ggml_opt_pred(    ggml_opt_context_t opt_ctx); // I32 argmax of the outputs (cross entropy), else NULL
struct ggml_tensor * ggml_opt_ncorrect(ggml_opt_context_t opt_ctx); // I64 [1] predictions matching the labels' argmax, else NULL

// The gradient accumulator of a node of the forward graph (a parameter), NULL if it has none.
struct ggml_tensor * ggml_opt_grad_acc(ggml_opt_context_t opt_ctx, struct ggml_tensor * node);

enum ggml_opt_optimizer_type ggml_opt_context_optimizer_type(ggml_opt_context_t opt_ctx);
const char * ggml_opt_optimizer_name(enum ggml_opt_optimizer_type type);

// Optimizer steps done since the last reset.
int64_t ggml_opt_n_steps(ggml_opt_context_t opt_ctx);
// Beyond upstream, for checkpoints: sets the steps done (AdamW's bias correction depends on it),
// and the optimizer state of a parameter: AdamW's first (i = 0) and second (i = 1) moments,
// NULL for SGD or a tensor that is not a parameter. Read or write their data between evals.
void ggml_opt_set_n_steps(ggml_opt_context_t opt_ctx, int64_t n_steps);
struct ggml_tensor * ggml_opt_optimizer_state(ggml_opt_context_t opt_ctx, struct ggml_tensor * param, int i);
// Bytes of the planner's buffer for computed tensors, and of the static buffer (accumulators,
// moments, labels); both fixed at init.
size_t ggml_opt_compute_buffer_size(ggml_opt_context_t opt_ctx);
size_t ggml_opt_static_buffer_size(ggml_opt_context_t opt_ctx);
// The graphs: forward, forward + backward, and forward + backward + optimizer step (NULL
// above the build type). Each is a prefix of the next.
struct ggml_cgraph * ggml_opt_graph_forward(ggml_opt_context_t opt_ctx);
struct ggml_cgraph * ggml_opt_graph_grad(ggml_opt_context_t opt_ctx);
struct ggml_cgraph * ggml_opt_graph_opt(ggml_opt_context_t opt_ctx);

// ====== Data parallelism ======

// Several processes can train one model together, each on its share of every logical batch:
// each computes the gradients of its share into its accumulators, a reducer sums the
// accumulators across the processes, and every process then takes the same optimizer step.
// The reducer runs inside the ggml_opt_eval that ends an optimizer step (its backward pass is
// that of the step's last micro-batch), on the thread that called it:
//  - grad_ready (optional): as soon as the backward pass has finished parameter i's gradient
//    (ggml_opt_param(opt_ctx, i)), between two graph nodes, so that sending it overlaps the rest
//    of the backward pass. Every parameter is announced once per step, in an order that is the
//    same at every step (that of the backward graph; with a backend scheduler, whose backends
//    run their splits whole, after the backward pass in parameter order).
//  - poll (optional): after every graph node of that backward pass (progress for transfers; not
//    with a backend scheduler).
//  - reduce (required): after the backward pass, before clipping and the optimizer step: must
//    leave in every accumulator the sum of that accumulator over the processes.
// The losses and gradients of a process then add up to the whole batch's only if each process
// scales its share's loss by the whole batch (mean-type losses divide by opt_period, the
// micro-batches of this process). Nothing here communicates: the reducer does (over MPI, say).
struct ggml_opt_grad_reducer {
    void (*grad_ready)(void * userdata, int64_t i, struct ggml_tensor * grad_acc);
    void (*poll)(void * userdata);
    void (*reduce)(void * userdata);
    void * userdata;
};
// Installs a copy of *reducer (NULL: none, the default).
void ggml_opt_set_grad_reducer(ggml_opt_context_t opt_ctx, const struct ggml_opt_grad_reducer * reducer);

// The trainable parameters in forward order (ggml_opt_grad_acc: the accumulator of each).
int64_t              ggml_opt_n_params(ggml_opt_context_t opt_ctx);
struct ggml_tensor * ggml_opt_param(   ggml_opt_context_t opt_ctx, int64_t i);

// ====== Optimization Result ======

ggml_opt_result_t ggml_opt_result_init(void);
void ggml_opt_result_free(ggml_opt_result_t result);
void ggml_opt_result_reset(ggml_opt_result_t result);

// Uncertainties are optional (NULL), NAN where there is too little data.
void ggml_opt_result_ndata(   ggml_opt_result_t result, int64_t * ndata);                  // datapoints seen
void ggml_opt_result_loss(    ggml_opt_result_t result, double  * loss,     double * unc); // mean per batch, or total for SUM
void ggml_opt_result_pred(    ggml_opt_result_t result, int32_t * pred);                   // ndata predictions
void ggml_opt_result_accuracy(ggml_opt_result_t result, double  * accuracy, double * unc);

// ====== Computation ======

// Chooses what the next ggml_opt_eval computes: the forward pass only, or forward + backward
// (+ the optimizer step on every opt_period-th such call). Allocates nothing: the graphs were
// placed at init. Without a call, ggml_opt_eval does what the build type allows.
void ggml_opt_alloc(ggml_opt_context_t opt_ctx, bool backward);

// Computes the forward pass on the inputs (and labels) set by the caller, adds loss, predictions
// and accuracy to result (if not NULL); with backward, adds the gradients into the accumulators
// and on every opt_period-th call clips them, steps the optimizer, calls the step callback and
// zeroes the accumulators.
void ggml_opt_eval(ggml_opt_context_t opt_ctx, ggml_opt_result_t result);

// ====== High level: loops over a dataset ======

// Called after every batch of ggml_opt_epoch.
typedef void (*ggml_opt_epoch_callback)(
        bool               train,       // true while training, false while evaluating
        ggml_opt_context_t opt_ctx,
        ggml_opt_dataset_t dataset,
        ggml_opt_result_t  result,      // result of this part of the dataset so far
        int64_t            ibatch,      // batches evaluated so far
        int64_t            ibatch_max,  // batches in this part of the dataset
        int64_t            t_start_us); // when this part started (a monotonic clock, microseconds)

// Trains on the datapoints before idata_split and evaluates on those from it on, one physical
// batch (the inputs' ne[1] datapoints) at a time, in the dataset's current order.
void ggml_opt_epoch(
        ggml_opt_context_t      opt_ctx,
        ggml_opt_dataset_t      dataset,
        ggml_opt_result_t       result_train, // NULL: not recorded
        ggml_opt_result_t       result_eval,  // NULL: not recorded
        int64_t                 idata_split,
        ggml_opt_epoch_callback callback_train,
        ggml_opt_epoch_callback callback_eval);

// Prints a progress bar with loss, accuracy and timing on stderr.
void ggml_opt_epoch_callback_progress_bar(
        bool               train,
        ggml_opt_context_t opt_ctx,
        ggml_opt_dataset_t dataset,
        ggml_opt_result_t  result,
        int64_t            ibatch,
        int64_t            ibatch_max,
        int64_t            t_start_us);

// Fits the model from inputs to outputs to the dataset: nepoch passes, shuffling the training
// part each time, nbatch_logical datapoints per optimizer step (a multiple of the inputs'
// ne[1]: gradients are accumulated over the micro-batches), the last val_split of the data held
// out for validation. Unless silent, a progress bar and one line per epoch go to stderr.
void ggml_opt_fit(
        struct ggml_context         * ctx_compute,
        struct ggml_tensor          * inputs,
        struct ggml_tensor          * outputs,
        ggml_opt_dataset_t            dataset,
        enum ggml_opt_loss_type       loss_type,
        enum ggml_opt_optimizer_type  optimizer,
        ggml_opt_get_optimizer_params get_opt_pars, // userdata: a pointer to the epoch (int64_t)
        int64_t                       nepoch,
        int64_t                       nbatch_logical,
        float                         val_split,    // in [0, 1)
        bool                          silent);

// ggml_opt_fit with every field of params (threads, schedule, clipping, step callback,
// checkpoints) under the caller's control; opt_period is set from nbatch_logical, and a cosine
// schedule with decay_steps 0 decays until the last step. get_opt_pars_ud NULL: the epoch.
void ggml_opt_fit_params(
        struct ggml_opt_params params,
        ggml_opt_dataset_t     dataset,
        int64_t                nepoch,
        int64_t                nbatch_logical,
        float                  val_split,
        bool                   silent);

#ifdef __cplusplus
}
#endif
