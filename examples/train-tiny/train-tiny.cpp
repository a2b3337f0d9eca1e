// train-tiny: trains a two-layer MLP from scratch to continue arithmetic sequences modulo M.
// Each datapoint is the sequence a, a+d, a+2d, a+3d (mod M), one-hot per position; the label is
// the next element, a+4d (mod M). The loop is ggml_opt_fit: AdamW with warm-up and cosine decay,
// gradients accumulated over two micro-batches per step and clipped to norm 1. A step callback
// records the loss, and a forward-only context measures the accuracy at the end.
//
//   train-tiny [--epochs N] [--hidden N] [--threads N] [--seed N]
#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-opt.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

static const int M = 16;                // the modulus: classes and values per position
static const int N_CTX = 4;             // elements shown
static const int N_IN = N_CTX * M;      // one-hot inputs
static const int N_DATA = 4096;
static const int N_BATCH = 32;          // datapoints per micro-batch (the inputs' ne[1])
static const int N_BATCH_LOGICAL = 64;  // datapoints per optimizer step

struct options {
    int epochs = 8;
    int hidden = 128;
    int threads = 1;  // a model this small gains nothing from more: the work per node is tiny
    unsigned seed = 1;
};

static bool parse(int argc, char ** argv, options & o) {
    for (int i = 1; i < argc; i++) {
        const bool has_value = i + 1 < argc;
        if (!strcmp(argv[i], "--epochs") && has_value) o.epochs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--hidden") && has_value) o.hidden = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && has_value) o.threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && has_value) o.seed = (unsigned) atoi(argv[++i]);
        else return false;
    }
    return o.epochs > 0 && o.hidden > 0 && o.threads > 0;
}

// Random sequences: data one-hot [N_IN, N_DATA], labels one-hot [M, N_DATA].
static void make_dataset(ggml_opt_dataset_t ds, std::mt19937 & rng) {
    float * data = (float *) ggml_opt_dataset_data(ds)->data;
    float * labels = (float *) ggml_opt_dataset_labels(ds)->data;
    memset(data, 0, ggml_nbytes(ggml_opt_dataset_data(ds)));
    memset(labels, 0, ggml_nbytes(ggml_opt_dataset_labels(ds)));
    std::uniform_int_distribution<int> value(0, M - 1);
    for (int j = 0; j < N_DATA; j++) {
        const int a = value(rng), d = value(rng);
        for (int k = 0; k < N_CTX; k++) data[j * N_IN + k * M + (a + k * d) % M] = 1.0f;
        labels[j * M + (a + N_CTX * d) % M] = 1.0f;
    }
}

// The losses of the first and last few optimizer steps, to tell whether training worked.
struct loss_log {
    std::vector<float> losses;
    static void record(ggml_opt_context_t, const ggml_opt_step_info * info, void * ud) {
        ((loss_log *) ud)->losses.push_back(info->loss);
    }
    float mean(size_t from, size_t to) const {
        double s = 0;
        for (size_t i = from; i < to; i++) s += losses[i];
        return (float) (s / (double) (to - from));
    }
};

static ggml_opt_optimizer_params optimizer_params(void *) {
    ggml_opt_optimizer_params p = ggml_opt_get_default_optimizer_params(nullptr);
    p.adamw.alpha = 3e-3f;
    p.adamw.wd = 1e-4f;
    return p;
}

int main(int argc, char ** argv) {
    options opt;
    if (!parse(argc, argv, opt)) {
        fprintf(stderr, "usage: %s [--epochs N] [--hidden N] [--threads N] [--seed N]\n", argv[0]);
        return 2;
    }
    std::mt19937 rng(opt.seed);

    ggml_opt_dataset_t dataset = ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, N_IN, M, N_DATA, 1);
    make_dataset(dataset, rng);

    // Parameters live in a context of their own, allocated here; everything computed from the
    // inputs goes in a no_alloc context that the optimization context places.
    ggml_context * ctx_params = ggml_init({ 8 * ggml_tensor_overhead(), nullptr, true });
    ggml_tensor * w1 = ggml_new_tensor_2d(ctx_params, GGML_TYPE_F32, N_IN, opt.hidden);
    ggml_tensor * b1 = ggml_new_tensor_1d(ctx_params, GGML_TYPE_F32, opt.hidden);
    ggml_tensor * w2 = ggml_new_tensor_2d(ctx_params, GGML_TYPE_F32, opt.hidden, M);
    ggml_tensor * b2 = ggml_new_tensor_1d(ctx_params, GGML_TYPE_F32, M);
    void * params_buf = ggml_alloc_ctx_tensors(ctx_params, nullptr);
    for (ggml_tensor * t : { w1, b1, w2, b2 }) {
        const float bound = 1.0f / std::sqrt((float) (t == w2 || t == b2 ? opt.hidden : N_IN));
        std::uniform_real_distribution<float> init(-bound, bound);
        for (int64_t i = 0; i < ggml_nelements(t); i++) ((float *) t->data)[i] = init(rng);
        ggml_set_param(t);
    }

    ggml_context * ctx_compute = ggml_init({ 64 * ggml_tensor_overhead(), nullptr, true });
    ggml_tensor * inputs = ggml_new_tensor_2d(ctx_compute, GGML_TYPE_F32, N_IN, N_BATCH);
    ggml_tensor * hidden = ggml_gelu(ctx_compute, ggml_add(ctx_compute, ggml_mul_mat(ctx_compute, w1, inputs), b1));
    ggml_tensor * logits = ggml_add(ctx_compute, ggml_mul_mat(ctx_compute, w2, hidden), b2);

    printf("train-tiny: continue a, a+d, a+2d, a+3d (mod %d); %d sequences, MLP %d-%d-%d, threads: %d\n", M, N_DATA,
           N_IN, opt.hidden, M, opt.threads);
    fflush(stdout);  // before the per-epoch lines on stderr
    loss_log log;
    ggml_opt_params params = ggml_opt_default_params(ctx_compute, inputs, logits, GGML_OPT_LOSS_TYPE_CROSS_ENTROPY);
    params.get_opt_pars = optimizer_params;
    params.n_threads = opt.threads;
    params.seed = opt.seed;
    params.lr_schedule = { GGML_OPT_LR_SCHEDULE_COSINE, /*warmup_steps*/ 20, /*decay_steps: to the end*/ 0, 0.1f };
    params.grad_clip = 1.0f;
    params.step_callback = loss_log::record;
    params.step_callback_ud = &log;
    ggml_opt_fit_params(params, dataset, opt.epochs, N_BATCH_LOGICAL, /*val_split*/ 0.1f, /*silent*/ false);

    // Accuracy of the trained model on the whole dataset, forward only.
    ggml_opt_params eval_params = ggml_opt_default_params(ctx_compute, inputs, logits, GGML_OPT_LOSS_TYPE_CROSS_ENTROPY);
    eval_params.build_type = GGML_OPT_BUILD_TYPE_FORWARD;
    eval_params.n_threads = opt.threads;
    ggml_opt_context_t eval_ctx = ggml_opt_init(eval_params);
    ggml_opt_result_t result = ggml_opt_result_init();
    ggml_opt_epoch(eval_ctx, dataset, nullptr, result, 0, nullptr, nullptr);
    double loss, accuracy;
    ggml_opt_result_loss(result, &loss, nullptr);
    ggml_opt_result_accuracy(result, &accuracy, nullptr);

    const size_t n = log.losses.size(), k = std::min<size_t>(10, n / 2);
    const float first = log.mean(0, k), last = log.mean(n - k, n);
    printf("%zu optimizer steps: loss fell from %.4f to %.4f; on all %d sequences: loss %.4f, accuracy %.1f%%\n", n,
           first, last, N_DATA, loss, 100.0 * accuracy);

    ggml_opt_result_free(result);
    ggml_opt_free(eval_ctx);
    ggml_free(ctx_compute);
    ggml_aligned_free(params_buf);
    ggml_free(ctx_params);
    ggml_opt_dataset_free(dataset);
    return last < 0.5f * first ? 0 : 1;  // training failed to halve the loss
}
