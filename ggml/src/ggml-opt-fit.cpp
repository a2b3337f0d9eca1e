// ggml-opt-fit.cpp - loops over a dataset on top of the public API of ggml-opt.h: one epoch
// (training then evaluation), a progress bar, and the whole fit.
#include "ggml-opt.h"
#include "ggml-impl.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

static int64_t time_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void ggml_opt_epoch(ggml_opt_context_t opt_ctx, ggml_opt_dataset_t dataset, ggml_opt_result_t result_train,
                    ggml_opt_result_t result_eval, int64_t idata_split, ggml_opt_epoch_callback callback_train,
                    ggml_opt_epoch_callback callback_eval) {
    ggml_tensor * inputs = ggml_opt_inputs(opt_ctx);
    ggml_tensor * labels = ggml_opt_labels(opt_ctx);
    ggml_tensor * data = ggml_opt_dataset_data(dataset);
    GGML_ASSERT(data->ne[0] == inputs->ne[0] && "the dataset's datapoints must have the inputs' row size");

    const int64_t ndata = data->ne[1];
    const int64_t ndata_batch = inputs->ne[1];
    GGML_ASSERT(ndata % ndata_batch == 0 && "the dataset must hold whole batches");
    const int64_t nbatches = ndata / ndata_batch;
    if (idata_split < 0) idata_split = ndata;
    GGML_ASSERT(idata_split % ndata_batch == 0 && "the split must fall between batches");
    const int64_t ibatch_split = idata_split / ndata_batch;

    int64_t t_start = time_us();
    for (int64_t ib = 0; ib < ibatch_split; ib++) {
        ggml_opt_alloc(opt_ctx, true);
        ggml_opt_dataset_get_batch(dataset, inputs, labels, ib);
        ggml_opt_eval(opt_ctx, result_train);
        if (callback_train) callback_train(true, opt_ctx, dataset, result_train, ib + 1, ibatch_split, t_start);
    }
    t_start = time_us();
    for (int64_t ib = ibatch_split; ib < nbatches; ib++) {
        ggml_opt_alloc(opt_ctx, false);
        ggml_opt_dataset_get_batch(dataset, inputs, labels, ib);
        ggml_opt_eval(opt_ctx, result_eval);
        if (callback_eval) callback_eval(false, opt_ctx, dataset, result_eval, ib + 1 - ibatch_split, nbatches - ibatch_split, t_start);
    }
}

void ggml_opt_epoch_callback_progress_bar(bool train, ggml_opt_context_t opt_ctx, ggml_opt_dataset_t dataset,
                                          ggml_opt_result_t result, int64_t ibatch, int64_t ibatch_max, int64_t t_start_us) {
    (void) opt_ctx;
    (void) dataset;
    const int width = 30;
    const int64_t filled = ibatch_max > 0 ? ibatch * width / ibatch_max : width;
    char bar[width + 1];
    for (int i = 0; i < width; i++) bar[i] = i < filled ? '#' : '.';
    bar[width] = '\0';

    double loss = 0.0, loss_unc = NAN, acc = NAN, acc_unc = NAN;
    if (result) {
        ggml_opt_result_loss(result, &loss, &loss_unc);
        ggml_opt_result_accuracy(result, &acc, &acc_unc);
    }
    const double elapsed = (time_us() - t_start_us) * 1e-6;
    const double eta = ibatch > 0 ? elapsed * (ibatch_max - ibatch) / ibatch : 0.0;
    fprintf(stderr, "\r%s [%s] %" PRId64 "/%" PRId64 " loss %.5f", train ? "train" : "val  ", bar, ibatch, ibatch_max, loss);
    if (!isnan(loss_unc)) fprintf(stderr, " ± %.5f", loss_unc);
    if (!isnan(acc)) fprintf(stderr, ", accuracy %.2f%%", 100.0 * acc);
    fprintf(stderr, ", %.1fs (eta %.1fs)   ", elapsed, eta);
    if (ibatch == ibatch_max) fprintf(stderr, "\n");
    fflush(stderr);
}

// One line per epoch summing up a result.
static void print_result(const char * what, ggml_opt_result_t r) {
    double loss, loss_unc, acc, acc_unc;
    ggml_opt_result_loss(r, &loss, &loss_unc);
    ggml_opt_result_accuracy(r, &acc, &acc_unc);
    fprintf(stderr, "%s loss %.5f", what, loss);
    if (!isnan(acc)) fprintf(stderr, ", accuracy %.2f%%", 100.0 * acc);
}

void ggml_opt_fit_params(struct ggml_opt_params params, ggml_opt_dataset_t dataset, int64_t nepoch, int64_t nbatch_logical,
                         float val_split, bool silent) {
    GGML_ASSERT(val_split >= 0.0f && val_split < 1.0f);
    GGML_ASSERT(nepoch >= 1);
    const int64_t ndata = ggml_opt_dataset_ndata(dataset);
    const int64_t nbatch_physical = params.inputs->ne[1];
    GGML_ASSERT(nbatch_logical % nbatch_physical == 0 && "nbatch_logical must be a multiple of the inputs' batch");
    GGML_ASSERT(ndata % nbatch_logical == 0 && "the dataset must hold whole logical batches");
    const int64_t opt_period = nbatch_logical / nbatch_physical;
    const int64_t nbatches_logical = ndata / nbatch_logical;
    const int64_t ibatch_split = (int64_t) ((1.0f - val_split) * nbatches_logical);
    const int64_t idata_split = ibatch_split * nbatch_logical;
    GGML_ASSERT(ibatch_split > 0 && "nothing left to train on: lower val_split");

    int64_t epoch = 1;
    params.opt_period = (int32_t) opt_period;
    if (!params.get_opt_pars_ud) params.get_opt_pars_ud = &epoch;
    ggml_opt_lr_schedule & sched = params.lr_schedule;
    if (sched.type == GGML_OPT_LR_SCHEDULE_COSINE && sched.decay_steps == 0) {
        sched.decay_steps = std::max<int64_t>(1, nepoch * ibatch_split - sched.warmup_steps);
    }

    ggml_opt_context_t opt_ctx = ggml_opt_init(params);
    if (!opt_ctx) GGML_ABORT("ggml_opt_fit: could not set up the optimization context");
    // Validation data drawn at random once; training data reshuffled every epoch.
    ggml_opt_dataset_shuffle(opt_ctx, dataset, -1);

    ggml_opt_result_t result_train = ggml_opt_result_init();
    ggml_opt_result_t result_val = ggml_opt_result_init();
    // The progress bar redraws one line: only for a terminal.
    const bool bar = !silent && isatty(fileno(stderr));
    ggml_opt_epoch_callback cb = bar ? ggml_opt_epoch_callback_progress_bar : nullptr;
    const int64_t t_start = time_us();
    for (; epoch <= nepoch; epoch++) {
        ggml_opt_dataset_shuffle(opt_ctx, dataset, idata_split);
        ggml_opt_result_reset(result_train);
        ggml_opt_result_reset(result_val);
        if (bar) fprintf(stderr, "epoch %" PRId64 "/%" PRId64 ":\n", epoch, nepoch);
        ggml_opt_epoch(opt_ctx, dataset, result_train, result_val, idata_split, cb, cb);
        if (!silent) {
            fprintf(stderr, "epoch %" PRId64 "/%" PRId64 ": ", epoch, nepoch);
            print_result("train", result_train);
            if (idata_split < ndata) {
                fprintf(stderr, " | ");
                print_result("val", result_val);
            }
            fprintf(stderr, " (%.1fs)\n", (time_us() - t_start) * 1e-6);
        }
    }
    ggml_opt_result_free(result_train);
    ggml_opt_result_free(result_val);
    ggml_opt_free(opt_ctx);
}

void ggml_opt_fit(struct ggml_context * ctx_compute, struct ggml_tensor * inputs, struct ggml_tensor * outputs,
                  ggml_opt_dataset_t dataset, enum ggml_opt_loss_type loss_type, enum ggml_opt_optimizer_type optimizer,
                  ggml_opt_get_optimizer_params get_opt_pars, int64_t nepoch, int64_t nbatch_logical, float val_split,
                  bool silent) {
    ggml_opt_params params = ggml_opt_default_params(ctx_compute, inputs, outputs, loss_type);
    params.optimizer = optimizer;
    params.get_opt_pars = get_opt_pars;
    params.get_opt_pars_ud = nullptr;  // the epoch
    ggml_opt_fit_params(params, dataset, nepoch, nbatch_logical, val_split, silent);
}
