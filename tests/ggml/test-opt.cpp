// test-opt.cpp - training (ggml-opt.h) and gradient checkpointing: optimizer steps against a
// double-precision reference, convergence, gradient accumulation, clipping, learning-rate
// schedules, checkpointing's gradients and memory, thread-count determinism, datasets, and
// that a training step allocates nothing.
#include "test-util.h"

#include "ggml-alloc.h"
#include "ggml-cpu.h"
#include "ggml-opt.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <malloc.h>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

// ---- counting heap allocations ---------------------------------------------------------------
// Every allocation of the process (operator new included) goes through these while a test
// counts; they forward to glibc's allocator (not under ASan, whose allocator they would replace).
#if !defined(LLAMA_TEST_UNDER_ASAN) && defined(__GLIBC__)
#define TEST_OPT_COUNTS_ALLOCATIONS 1
static std::atomic<bool> g_counting{false};
static std::atomic<long> g_allocations{0};
extern "C" {
void * __libc_malloc(size_t);
void * __libc_calloc(size_t, size_t);
void * __libc_realloc(void *, size_t);
void * __libc_memalign(size_t, size_t);
void * malloc(size_t n) {
    if (g_counting.load(std::memory_order_relaxed)) g_allocations++;
    return __libc_malloc(n);
}
void * calloc(size_t n, size_t s) {
    if (g_counting.load(std::memory_order_relaxed)) g_allocations++;
    return __libc_calloc(n, s);
}
void * realloc(void * p, size_t n) {
    if (g_counting.load(std::memory_order_relaxed)) g_allocations++;
    return __libc_realloc(p, n);
}
void * aligned_alloc(size_t a, size_t n) {
    if (g_counting.load(std::memory_order_relaxed)) g_allocations++;
    return __libc_memalign(a, n);
}
int posix_memalign(void ** p, size_t a, size_t n) {
    if (g_counting.load(std::memory_order_relaxed)) g_allocations++;
    *p = __libc_memalign(a, n);
    return *p ? 0 : 12;  // ENOMEM
}
}
#endif

namespace {

// ---- models ----------------------------------------------------------------------------------
// Parameters in an allocated context, everything computed in a no_alloc one.
struct Model {
    tu::Ctx params{16u << 20};
    tu::Ctx compute{16u << 20, true};
    ggml_tensor * inputs = nullptr;
    ggml_tensor * outputs = nullptr;
    std::vector<ggml_tensor *> weights;      // trainable, in creation order
    std::vector<ggml_tensor *> layer_outputs; // checkpoint candidates
};

ggml_tensor * new_param(Model & m, int64_t ne0, int64_t ne1, std::mt19937 & rng, float scale) {
    ggml_tensor * t = ne1 > 1 ? ggml_new_tensor_2d(m.params, GGML_TYPE_F32, ne0, ne1) : ggml_new_tensor_1d(m.params, GGML_TYPE_F32, ne0);
    tu::fill_uniform(t, rng, -scale, scale);
    ggml_set_param(t);
    ggml_format_name(t, "param_%zu", m.weights.size());
    m.weights.push_back(t);
    return t;
}

// An MLP: widths[0] inputs, then layers of mul_mat + bias and tanh (none after the last).
void build_mlp(Model & m, const std::vector<int> & widths, int n_batch, uint32_t seed) {
    std::mt19937 rng(seed);
    m.inputs = ggml_new_tensor_2d(m.compute, GGML_TYPE_F32, widths[0], n_batch);
    ggml_set_name(m.inputs, "inputs");
    ggml_tensor * h = m.inputs;
    for (size_t l = 1; l < widths.size(); l++) {
        ggml_tensor * w = new_param(m, widths[l - 1], widths[l], rng, 1.0f / std::sqrt((float) widths[l - 1]));
        ggml_tensor * b = new_param(m, widths[l], 1, rng, 0.1f);
        h = ggml_add(m.compute, ggml_mul_mat(m.compute, w, h), b);
        if (l + 1 < widths.size()) h = ggml_tanh(m.compute, h);
        ggml_format_name(h, "layer_%zu", l);
        m.layer_outputs.push_back(h);
    }
    m.outputs = h;
}

std::vector<std::vector<uint8_t>> weight_bytes(const Model & m) {
    std::vector<std::vector<uint8_t>> v;
    for (ggml_tensor * w : m.weights) v.push_back(tu::bytes_of(w));
    return v;
}

// Random inputs and one-hot labels (class = argmax of a fixed projection, so it is learnable).
void fill_classification(ggml_opt_dataset_t ds, uint32_t seed) {
    ggml_tensor * data = ggml_opt_dataset_data(ds), * labels = ggml_opt_dataset_labels(ds);
    std::mt19937 rng(seed);
    tu::fill_uniform(data, rng);
    const int64_t nin = data->ne[0], ncls = labels->ne[0];
    for (int64_t j = 0; j < data->ne[1]; j++) {
        int64_t best = 0;
        double best_v = -1e30;
        for (int64_t c = 0; c < ncls; c++) {
            double v = 0;
            for (int64_t i = 0; i < nin; i++) v += tu::get(data, i, j) * std::sin(1.0 + i * 0.7 + c * 1.3);
            if (v > best_v) { best_v = v; best = c; }
        }
        for (int64_t c = 0; c < ncls; c++) tu::set(labels, c == best ? 1.0 : 0.0, c, j);
    }
}

ggml_opt_optimizer_params sgd_params(float alpha, float wd = 0.0f) {
    ggml_opt_optimizer_params p = ggml_opt_get_default_optimizer_params(nullptr);
    p.sgd.alpha = alpha;
    p.sgd.wd = wd;
    return p;
}

// w [n] * x [n, 1] summed: the gradient of w is x, so updates can be computed by hand.
struct LinearProbe {
    Model m;
    ggml_tensor * w;
    explicit LinearProbe(int64_t n) {
        std::mt19937 rng(7);
        w = new_param(m, n, 1, rng, 1.0f);
        m.inputs = ggml_new_tensor_2d(m.compute, GGML_TYPE_F32, n, 1);
        m.outputs = ggml_mul(m.compute, m.inputs, w);
    }
};

struct StepLog {
    std::vector<ggml_opt_step_info> steps;
    static void record(ggml_opt_context_t, const ggml_opt_step_info * info, void * ud) {
        ((StepLog *) ud)->steps.push_back(*info);
    }
};

}  // namespace

// ---- optimizer steps against a double reference ---------------------------------------------
TEST(Opt, AdamWStepsMatchDoubleReference) {
    const int64_t n = 37;
    LinearProbe lp(n);
    ggml_opt_optimizer_params op = ggml_opt_get_default_optimizer_params(nullptr);
    op.adamw.alpha = 0.01f;
    op.adamw.beta1 = 0.8f;
    op.adamw.beta2 = 0.95f;
    op.adamw.eps = 1e-6f;
    op.adamw.wd = 0.1f;
    ggml_opt_params p = ggml_opt_default_params(lp.m.compute, lp.m.inputs, lp.m.outputs, GGML_OPT_LOSS_TYPE_SUM);
    p.get_opt_pars = ggml_opt_get_constant_optimizer_params;
    p.get_opt_pars_ud = &op;
    p.n_threads = 2;
    ggml_opt_context_t ctx = ggml_opt_init(p);
    ASSERT_NE(ctx, nullptr);

    std::vector<double> w = tu::to_double(lp.w), m(n, 0.0), v(n, 0.0);
    std::mt19937 rng(3);
    for (int t = 1; t <= 6; t++) {
        tu::fill_uniform(ggml_opt_inputs(ctx), rng, -2.0f, 2.0f);
        const std::vector<double> g = tu::to_double(ggml_opt_inputs(ctx));
        ggml_opt_eval(ctx, nullptr);
        const double b1h = 1.0 / (1.0 - std::pow((double) op.adamw.beta1, t));
        const double b2h = 1.0 / (1.0 - std::pow((double) op.adamw.beta2, t));
        for (int64_t i = 0; i < n; i++) {
            m[i] = op.adamw.beta1 * m[i] + (1.0 - op.adamw.beta1) * g[i];
            v[i] = op.adamw.beta2 * v[i] + (1.0 - op.adamw.beta2) * g[i] * g[i];
            w[i] = w[i] * (1.0 - op.adamw.alpha * op.adamw.wd) - op.adamw.alpha * (m[i] * b1h) / (std::sqrt(v[i] * b2h) + op.adamw.eps);
        }
        tu::expect_close(tu::to_double(lp.w), w, 1e-5, 1e-6, "AdamW step " + std::to_string(t));
    }
    EXPECT_EQ(ggml_opt_n_steps(ctx), 6);
    ggml_opt_free(ctx);
}

TEST(Opt, SgdStepsMatchDoubleReference) {
    const int64_t n = 19;
    LinearProbe lp(n);
    ggml_opt_optimizer_params op = sgd_params(0.05f, 0.2f);
    ggml_opt_params p = ggml_opt_default_params(lp.m.compute, lp.m.inputs, lp.m.outputs, GGML_OPT_LOSS_TYPE_SUM);
    p.optimizer = GGML_OPT_OPTIMIZER_TYPE_SGD;
    p.get_opt_pars = ggml_opt_get_constant_optimizer_params;
    p.get_opt_pars_ud = &op;
    p.n_threads = 2;
    ggml_opt_context_t ctx = ggml_opt_init(p);
    ASSERT_NE(ctx, nullptr);

    std::vector<double> w = tu::to_double(lp.w);
    std::mt19937 rng(4);
    for (int t = 1; t <= 5; t++) {
        tu::fill_uniform(ggml_opt_inputs(ctx), rng);
        const std::vector<double> g = tu::to_double(ggml_opt_inputs(ctx));
        ggml_opt_eval(ctx, nullptr);
        for (int64_t i = 0; i < n; i++) w[i] = w[i] * (1.0 - op.sgd.alpha * op.sgd.wd) - op.sgd.alpha * g[i];
        tu::expect_close(tu::to_double(lp.w), w, 1e-5, 1e-6, "SGD step " + std::to_string(t));
    }
    ggml_opt_free(ctx);
}

// ---- losses ------------------------------------------------------------------------------------
TEST(Opt, LossValuesMatchHost) {
    const int64_t ncls = 5, nb = 3;
    for (ggml_opt_loss_type lt : { GGML_OPT_LOSS_TYPE_MEAN, GGML_OPT_LOSS_TYPE_SUM, GGML_OPT_LOSS_TYPE_CROSS_ENTROPY,
                                   GGML_OPT_LOSS_TYPE_MEAN_SQUARED_ERROR }) {
        Model m;
        std::mt19937 rng(11);
        ggml_tensor * w = new_param(m, ncls, 1, rng, 1.0f);
        m.inputs = ggml_new_tensor_2d(m.compute, GGML_TYPE_F32, ncls, nb);
        m.outputs = ggml_mul(m.compute, m.inputs, w);
        ggml_opt_params p = ggml_opt_default_params(m.compute, m.inputs, m.outputs, lt);
        p.build_type = GGML_OPT_BUILD_TYPE_FORWARD;
        p.n_threads = 1;
        ggml_opt_context_t ctx = ggml_opt_init(p);
        ASSERT_NE(ctx, nullptr);
        tu::fill_uniform(ggml_opt_inputs(ctx), rng, -3.0f, 3.0f);
        ggml_tensor * labels = ggml_opt_labels(ctx);
        if (labels) {
            for (int64_t j = 0; j < nb; j++) {
                for (int64_t c = 0; c < ncls; c++) tu::set(labels, c == (j * 2) % ncls ? 1.0 : 0.0, c, j);
            }
        }
        ggml_opt_result_t res = ggml_opt_result_init();
        ggml_opt_eval(ctx, res);

        const std::vector<double> x = tu::to_double(ggml_opt_inputs(ctx)), wv = tu::to_double(w);
        double sum = 0, sq = 0, ce = 0;
        int64_t correct = 0;
        for (int64_t j = 0; j < nb; j++) {
            double mx = -1e30, lse = 0;
            int64_t arg = 0;
            for (int64_t c = 0; c < ncls; c++) {
                const double o = wv[c] * x[j * ncls + c];
                sum += o;
                if (labels) sq += (o - tu::get(labels, c, j)) * (o - tu::get(labels, c, j));
                if (o > mx) { mx = o; arg = c; }
            }
            for (int64_t c = 0; c < ncls; c++) lse += std::exp(wv[c] * x[j * ncls + c] - mx);
            lse = mx + std::log(lse);
            for (int64_t c = 0; c < ncls; c++) if (labels) ce -= tu::get(labels, c, j) * (wv[c] * x[j * ncls + c] - lse);
            correct += labels && arg == (j * 2) % ncls;
        }
        const double expected = lt == GGML_OPT_LOSS_TYPE_MEAN ? sum / (ncls * nb)
                              : lt == GGML_OPT_LOSS_TYPE_SUM  ? sum
                              : lt == GGML_OPT_LOSS_TYPE_CROSS_ENTROPY ? ce / nb
                              : sq / (ncls * nb);
        double loss, unc;
        ggml_opt_result_loss(res, &loss, &unc);
        EXPECT_NEAR(loss, expected, 1e-5 * (1 + std::fabs(expected))) << "loss type " << (int) lt;
        EXPECT_NEAR(tu::get(ggml_opt_loss(ctx), 0), expected, 1e-5 * (1 + std::fabs(expected)));
        int64_t ndata;
        ggml_opt_result_ndata(res, &ndata);
        EXPECT_EQ(ndata, nb);
        if (lt == GGML_OPT_LOSS_TYPE_CROSS_ENTROPY) {
            double acc;
            ggml_opt_result_accuracy(res, &acc, nullptr);
            EXPECT_DOUBLE_EQ(acc, (double) correct / nb);
            EXPECT_EQ(*(int64_t *) ggml_opt_ncorrect(ctx)->data, correct);
        }
        ggml_opt_result_free(res);
        ggml_opt_free(ctx);
    }
}

// ---- convergence ---------------------------------------------------------------------------------
TEST(Opt, LinearRegressionConverges) {
    const int nin = 6, nout = 3, nb = 16, ndata = 256;
    Model m;
    build_mlp(m, { nin, nout }, nb, 5);
    ggml_opt_dataset_t ds = ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, nin, nout, ndata, 1);
    std::mt19937 rng(9);
    tu::fill_uniform(ggml_opt_dataset_data(ds), rng);
    for (int64_t j = 0; j < ndata; j++) {  // y = W* x + b*
        for (int o = 0; o < nout; o++) {
            double y = 0.3 * o - 0.2;
            for (int i = 0; i < nin; i++) y += std::cos(1.0 + i + 2.0 * o) * tu::get(ggml_opt_dataset_data(ds), i, j);
            tu::set(ggml_opt_dataset_labels(ds), y, o, j);
        }
    }
    ggml_opt_optimizer_params op = ggml_opt_get_default_optimizer_params(nullptr);
    op.adamw.alpha = 0.05f;
    ggml_opt_params p = ggml_opt_default_params(m.compute, m.inputs, m.outputs, GGML_OPT_LOSS_TYPE_MEAN_SQUARED_ERROR);
    p.get_opt_pars = ggml_opt_get_constant_optimizer_params;
    p.get_opt_pars_ud = &op;
    p.n_threads = 2;
    ggml_opt_context_t ctx = ggml_opt_init(p);
    ASSERT_NE(ctx, nullptr);
    ggml_opt_result_t res = ggml_opt_result_init();
    double first = 0, loss = 0;
    for (int epoch = 0; epoch < 30; epoch++) {
        ggml_opt_result_reset(res);
        ggml_opt_epoch(ctx, ds, res, nullptr, -1, nullptr, nullptr);
        ggml_opt_result_loss(res, &loss, nullptr);
        if (epoch == 0) first = loss;
    }
    EXPECT_GT(first, 0.1);
    EXPECT_LT(loss, 1e-4) << "the loss fell from " << first << " only to " << loss;
    ggml_opt_result_free(res);
    ggml_opt_free(ctx);
    ggml_opt_dataset_free(ds);
}

// ---- gradient accumulation ----------------------------------------------------------------------
TEST(Opt, AccumulatedMicroBatchesEqualOneLargeBatch) {
    const int K = 4, nb = 5, nin = 7, ncls = 4;
    ggml_opt_dataset_t ds = ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, nin, ncls, K * nb * 3, 1);
    fill_classification(ds, 21);
    ggml_opt_optimizer_params op = sgd_params(0.5f, 0.01f);

    Model small, large;
    build_mlp(small, { nin, 9, ncls }, nb, 13);
    build_mlp(large, { nin, 9, ncls }, K * nb, 13);
    ASSERT_TRUE(weight_bytes(small) == weight_bytes(large));

    auto params_for = [&](Model & m, int period) {
        ggml_opt_params p = ggml_opt_default_params(m.compute, m.inputs, m.outputs, GGML_OPT_LOSS_TYPE_CROSS_ENTROPY);
        p.optimizer = GGML_OPT_OPTIMIZER_TYPE_SGD;
        p.get_opt_pars = ggml_opt_get_constant_optimizer_params;
        p.get_opt_pars_ud = &op;
        p.opt_period = period;
        p.n_threads = 2;
        return p;
    };
    ggml_opt_context_t cs = ggml_opt_init(params_for(small, K));
    ggml_opt_context_t cl = ggml_opt_init(params_for(large, 1));
    ASSERT_TRUE(cs && cl);
    ggml_opt_result_t rs = ggml_opt_result_init(), rl = ggml_opt_result_init();
    ggml_opt_epoch(cs, ds, rs, nullptr, -1, nullptr, nullptr);  // 3 steps of K micro-batches
    ggml_opt_epoch(cl, ds, rl, nullptr, -1, nullptr, nullptr);  // 3 steps of one batch
    EXPECT_EQ(ggml_opt_n_steps(cs), 3);
    EXPECT_EQ(ggml_opt_n_steps(cl), 3);
    for (size_t i = 0; i < small.weights.size(); i++) {
        tu::expect_close(tu::to_double(small.weights[i]), tu::to_double(large.weights[i]), 1e-5, 1e-6, small.weights[i]->name);
    }
    double ls, ll;
    ggml_opt_result_loss(rs, &ls, nullptr);
    ggml_opt_result_loss(rl, &ll, nullptr);
    EXPECT_NEAR(ls, ll, 1e-5 * ll);  // mean over the same datapoints
    ggml_opt_result_free(rs);
    ggml_opt_result_free(rl);
    ggml_opt_free(cs);
    ggml_opt_free(cl);
    ggml_opt_dataset_free(ds);
}

// ---- data parallelism: a gradient reducer ---------------------------------------------------------
// Two workers (threads, each with its own replica and optimization context) take halves of every
// logical batch; their reducer averages the accumulators through shared memory. The replicas must
// train as one context on the whole batch does, and the reducer must see every gradient announced
// once per step, already final when announced.
namespace {

struct TwoWorkers {
    std::mutex mu;
    std::condition_variable cv;
    int arrived = 0;
    uint64_t gen = 0;
    std::vector<ggml_tensor *> accs[2];
    void barrier() {
        std::unique_lock<std::mutex> lock(mu);
        const uint64_t g = gen;
        if (++arrived == 2) {
            arrived = 0;
            gen++;
            cv.notify_all();
        } else {
            cv.wait(lock, [&] { return gen != g; });
        }
    }
};

struct Worker {
    TwoWorkers * shared = nullptr;
    int id = 0;
    ggml_opt_context_t ctx = nullptr;
    std::vector<std::vector<float>> at_ready;  // each accumulator when announced this step
    std::vector<int64_t> order, first_order;
    int polls = 0;
    bool ok = true;  // announced once each and final when announced, every step
};

void worker_grad_ready(void * ud, int64_t i, ggml_tensor * acc) {
    Worker & w = *(Worker *) ud;
    w.order.push_back(i);
    if (acc != ggml_opt_grad_acc(w.ctx, ggml_opt_param(w.ctx, i))) w.ok = false;
    const float * d = (const float *) acc->data;
    w.at_ready[(size_t) i].assign(d, d + ggml_nelements(acc));
}
void worker_poll(void * ud) { ((Worker *) ud)->polls++; }
void worker_reduce(void * ud) {
    Worker & w = *(Worker *) ud;
    const int64_t n = ggml_opt_n_params(w.ctx);
    std::vector<int64_t> sorted = w.order;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < n; i++) w.ok &= (size_t) i < sorted.size() && sorted[(size_t) i] == i;
    w.ok &= (int64_t) sorted.size() == n;
    if (w.first_order.empty()) w.first_order = w.order;
    w.ok &= w.order == w.first_order;
    w.shared->accs[w.id].clear();
    for (int64_t i = 0; i < n; i++) {
        ggml_tensor * acc = ggml_opt_grad_acc(w.ctx, ggml_opt_param(w.ctx, i));
        const float * d = (const float *) acc->data;
        w.ok &= std::equal(d, d + ggml_nelements(acc), w.at_ready[(size_t) i].begin());
        w.shared->accs[w.id].push_back(acc);
    }
    w.order.clear();
    w.shared->barrier();  // both halves complete
    if (w.id == 0) {
        for (size_t i = 0; i < w.shared->accs[0].size(); i++) {
            float * a = (float *) w.shared->accs[0][i]->data, * b = (float *) w.shared->accs[1][i]->data;
            for (int64_t e = 0; e < ggml_nelements(w.shared->accs[0][i]); e++) a[e] = b[e] = 0.5f * (a[e] + b[e]);
        }
    }
    w.shared->barrier();  // both averaged
}

}  // namespace

TEST(Opt, GradReducerSplitsTheBatchAcrossWorkers) {
    const int K = 2, nb = 3, nin = 6, ncls = 4, steps = 3;
    ggml_opt_dataset_t ds = ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, nin, ncls, 2 * K * nb * steps, 1);
    fill_classification(ds, 5);
    ggml_opt_optimizer_params op = ggml_opt_get_default_optimizer_params(nullptr);
    op.adamw.wd = 0.01f;
    auto params_for = [&](Model & m, int period) {
        ggml_opt_params p = ggml_opt_default_params(m.compute, m.inputs, m.outputs, GGML_OPT_LOSS_TYPE_CROSS_ENTROPY);
        p.get_opt_pars = ggml_opt_get_constant_optimizer_params;
        p.get_opt_pars_ud = &op;
        p.opt_period = period;
        p.n_threads = 2;
        p.grad_clip = 1.0f;  // clipping must see the reduced gradients
        return p;
    };
    Model whole, half[2];
    build_mlp(whole, { nin, 8, 8, ncls }, 2 * K * nb, 17);
    ggml_opt_context_t cw = ggml_opt_init(params_for(whole, 1));
    ASSERT_NE(cw, nullptr);
    for (int s = 0; s < steps; s++) {
        ggml_opt_dataset_get_batch(ds, ggml_opt_inputs(cw), ggml_opt_labels(cw), s);
        ggml_opt_eval(cw, nullptr);
    }

    TwoWorkers shared;
    Worker w[2];
    for (int k = 0; k < 2; k++) {
        build_mlp(half[k], { nin, 8, 8, ncls }, nb, 17);
        w[k].shared = &shared;
        w[k].id = k;
        w[k].ctx = ggml_opt_init(params_for(half[k], K));
        ASSERT_NE(w[k].ctx, nullptr);
        EXPECT_EQ(ggml_opt_n_params(w[k].ctx), (int64_t) half[k].weights.size());
        w[k].at_ready.resize(half[k].weights.size());
        const ggml_opt_grad_reducer r = { worker_grad_ready, worker_poll, worker_reduce, &w[k] };
        ggml_opt_set_grad_reducer(w[k].ctx, &r);
    }
    auto run = [&](int k) {
        for (int s = 0; s < steps; s++) {
            for (int j = 0; j < K; j++) {  // worker k: micro-batches k*K .. k*K+K-1 of step s
                ggml_opt_dataset_get_batch(ds, ggml_opt_inputs(w[k].ctx), ggml_opt_labels(w[k].ctx), (int64_t) s * 2 * K + k * K + j);
                ggml_opt_eval(w[k].ctx, nullptr);
            }
        }
    };
    std::thread t1(run, 1);
    run(0);
    t1.join();
    for (int k = 0; k < 2; k++) {
        EXPECT_TRUE(w[k].ok) << "worker " << k << ": a gradient announced twice, not at all, or before it was final";
        EXPECT_GT(w[k].polls, 0);
        EXPECT_EQ(ggml_opt_n_steps(w[k].ctx), steps);
        EXPECT_TRUE(weight_bytes(half[k]) == weight_bytes(half[0])) << "the replicas diverged";
        for (size_t i = 0; i < whole.weights.size(); i++) {
            tu::expect_close(tu::to_double(half[k].weights[i]), tu::to_double(whole.weights[i]), 1e-4, 1e-6, whole.weights[i]->name);
        }
        ggml_opt_free(w[k].ctx);
    }
    ggml_opt_free(cw);
    ggml_opt_dataset_free(ds);
}

// ---- clipping ----------------------------------------------------------------------------------
TEST(Opt, GradientClippingScalesTheUpdate) {
    const int64_t n = 8;
    for (float clip : { 0.5f, 100.0f }) {
        LinearProbe lp(n);
        ggml_opt_optimizer_params op = sgd_params(0.1f);
        StepLog log;
        ggml_opt_params p = ggml_opt_default_params(lp.m.compute, lp.m.inputs, lp.m.outputs, GGML_OPT_LOSS_TYPE_SUM);
        p.optimizer = GGML_OPT_OPTIMIZER_TYPE_SGD;
        p.get_opt_pars = ggml_opt_get_constant_optimizer_params;
        p.get_opt_pars_ud = &op;
        p.grad_clip = clip;
        p.step_callback = StepLog::record;
        p.step_callback_ud = &log;
        p.n_threads = 1;
        ggml_opt_context_t ctx = ggml_opt_init(p);
        ASSERT_NE(ctx, nullptr);
        std::mt19937 rng(8);
        tu::fill_uniform(ggml_opt_inputs(ctx), rng);
        const std::vector<double> g = tu::to_double(ggml_opt_inputs(ctx));
        std::vector<double> w = tu::to_double(lp.w);
        double norm = 0;
        for (double x : g) norm += x * x;
        norm = std::sqrt(norm);
        ASSERT_GT(norm, 0.5);  // so the small threshold clips
        ggml_opt_eval(ctx, nullptr);
        const double scale = norm > clip ? clip / norm : 1.0;
        for (int64_t i = 0; i < n; i++) w[i] -= op.sgd.alpha * g[i] * scale;
        tu::expect_close(tu::to_double(lp.w), w, 1e-6, 1e-7, "clip " + std::to_string(clip));
        ASSERT_EQ(log.steps.size(), 1u);
        EXPECT_NEAR(log.steps[0].grad_norm, norm, 1e-6 * norm);
        EXPECT_EQ(log.steps[0].clipped, norm > clip);
        EXPECT_EQ(log.steps[0].step, 1);
        ggml_opt_free(ctx);
    }
}

// ---- learning-rate schedules --------------------------------------------------------------------
TEST(Opt, CosineScheduleWithWarmup) {
    const ggml_opt_lr_schedule s = { GGML_OPT_LR_SCHEDULE_COSINE, 4, 10, 0.1f };
    auto expected = [&](int64_t t) {
        if (t < 4) return (t + 1) / 4.0;
        const double prog = std::min(1.0, (t - 4) / 10.0);
        return 0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * prog));
    };
    for (int64_t t = 0; t < 20; t++) EXPECT_NEAR(ggml_opt_lr_factor(&s, t), expected(t), 1e-6) << "step " << t;
    const ggml_opt_lr_schedule c = { GGML_OPT_LR_SCHEDULE_CONSTANT, 2, 0, 0.0f };
    EXPECT_FLOAT_EQ(ggml_opt_lr_factor(&c, 0), 0.5f);
    EXPECT_FLOAT_EQ(ggml_opt_lr_factor(&c, 1), 1.0f);
    EXPECT_FLOAT_EQ(ggml_opt_lr_factor(&c, 100), 1.0f);

    // Through a context: the step callback reports the scheduled rate, and SGD applies it.
    LinearProbe lp(3);
    ggml_opt_optimizer_params op = sgd_params(0.2f);
    StepLog log;
    ggml_opt_params p = ggml_opt_default_params(lp.m.compute, lp.m.inputs, lp.m.outputs, GGML_OPT_LOSS_TYPE_SUM);
    p.optimizer = GGML_OPT_OPTIMIZER_TYPE_SGD;
    p.get_opt_pars = ggml_opt_get_constant_optimizer_params;
    p.get_opt_pars_ud = &op;
    p.lr_schedule = s;
    p.step_callback = StepLog::record;
    p.step_callback_ud = &log;
    p.n_threads = 1;
    ggml_opt_context_t ctx = ggml_opt_init(p);
    ASSERT_NE(ctx, nullptr);
    ggml_set_f32(ggml_opt_inputs(ctx), 1.0f);  // gradient 1: each step moves w by -lr
    for (int t = 0; t < 16; t++) {
        const double before = tu::get(lp.w, 0);
        ggml_opt_eval(ctx, nullptr);
        EXPECT_NEAR(before - tu::get(lp.w, 0), 0.2 * expected(t), 1e-6) << "step " << t;
    }
    ASSERT_EQ(log.steps.size(), 16u);
    for (int t = 0; t < 16; t++) EXPECT_NEAR(log.steps[t].lr, 0.2 * expected(t), 1e-7) << "step " << t;
    ggml_opt_free(ctx);
}

// ---- gradient checkpointing ---------------------------------------------------------------------
namespace {

// Gradients of a deep MLP's cross-entropy loss into accumulators, with checkpoints every
// `every` layers (0: none); returns the gradients and the planner's buffer size.
struct GradRun {
    std::vector<std::vector<uint8_t>> grads;
    size_t buffer = 0;
    int n_nodes = 0;
};

GradRun deep_mlp_grads(int every, int n_threads) {
    const int depth = 16, width = 48, nb = 32, ncls = 6;
    std::vector<int> widths(1, width);
    for (int l = 0; l < depth; l++) widths.push_back(l + 1 == depth ? ncls : width);
    Model m;
    build_mlp(m, widths, nb, 99);
    std::mt19937 rng(5);
    ggml_tensor * labels = ggml_new_tensor_2d(m.params, GGML_TYPE_F32, ncls, nb);
    tu::fill_uniform(labels, rng, 0.0f, 1.0f);
    ggml_set_input(labels);
    ggml_tensor * loss = ggml_cross_entropy_loss(m.compute, m.outputs, labels);
    ggml_set_loss(loss);
    ggml_set_output(loss);

    ggml_cgraph * g = ggml_new_graph_custom(m.compute, 4096, true);
    ggml_build_forward_expand(g, loss);
    std::vector<ggml_tensor *> accs(ggml_graph_n_nodes(g), nullptr);  // accumulators in static memory
    for (int i = 0; i < ggml_graph_n_nodes(g); i++) {
        ggml_tensor * node = ggml_graph_node(g, i);
        if (node->flags & GGML_TENSOR_FLAG_PARAM) accs[i] = ggml_dup_tensor(m.params, node);
    }
    std::vector<ggml_tensor *> ckpts;
    for (int l = 0; every > 0 && l < depth - 1; l++) {
        if ((l + 1) % every == 0) ckpts.push_back(m.layer_outputs[l]);
    }
    if (every > 0) ggml_build_backward_checkpointed(m.compute, g, accs.data(), ckpts.data(), (int) ckpts.size());
    else ggml_build_backward_expand(m.compute, g, accs.data());

    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    EXPECT_TRUE(ggml_gallocr_alloc_graph(ga, g));
    tu::fill_uniform(m.inputs, rng);
    ggml_graph_reset(g);
    ggml_cplan plan = ggml_graph_plan(g, n_threads);
    std::vector<uint8_t> work(plan.work_size);
    plan.work_data = work.data();
    EXPECT_EQ(ggml_graph_compute(g, &plan), GGML_STATUS_SUCCESS);

    GradRun r;
    for (ggml_tensor * w : m.weights) {
        ggml_tensor * acc = ggml_graph_get_grad_acc(g, w);
        EXPECT_NE(acc, nullptr);
        if (acc) r.grads.push_back(tu::bytes_of(acc));
    }
    r.buffer = ggml_gallocr_get_buffer_size(ga, 0);
    r.n_nodes = ggml_graph_n_nodes(g);
    ggml_gallocr_free(ga);
    return r;
}

}  // namespace

TEST(Checkpoint, SameGradientsInLessMemory) {
    const GradRun plain = deep_mlp_grads(0, 2);
    const GradRun every4 = deep_mlp_grads(4, 2);
    const GradRun every1 = deep_mlp_grads(1, 2);
    ASSERT_EQ(plain.grads.size(), 32u);
    EXPECT_TRUE(every4.grads == plain.grads) << "checkpointing (every 4 layers) changed the gradients";
    EXPECT_TRUE(every1.grads == plain.grads) << "checkpointing (every layer) changed the gradients";
    EXPECT_GT(every4.n_nodes, plain.n_nodes);  // the recomputed activations
    std::printf("planner buffer: %zu bytes without checkpoints, %zu with one every layer, %zu every 4 layers\n",
                plain.buffer, every1.buffer, every4.buffer);
    EXPECT_LT(every4.buffer * 10, plain.buffer * 6) << "checkpoints every 4 layers should save over 40%";
    EXPECT_LT(every1.buffer, plain.buffer);
    // The same in another thread count.
    EXPECT_TRUE(deep_mlp_grads(4, 1).grads == plain.grads);
}

namespace {

// A deep net whose layers go through views: z = W h + b, s = z seen as [d/2, 2, n],
// y = s * sigmoid(s) (the backward pass reads s, a view), h' = y seen as [d, n]. Gradients into
// accumulators; checkpoints every `every` layers (0: none). Also checks that the backward pass
// reads nothing of the forward pass but kept tensors.
std::vector<std::vector<uint8_t>> viewed_net_grads(int every) {
    const int depth = 6, d = 16, nb = 4;
    Model m;
    std::mt19937 rng(12);
    m.inputs = ggml_new_tensor_2d(m.params, GGML_TYPE_F32, d, nb);
    tu::fill_uniform(m.inputs, rng);
    ggml_set_input(m.inputs);
    ggml_tensor * h = m.inputs;
    std::vector<ggml_tensor *> ckpts;
    for (int l = 0; l < depth; l++) {
        ggml_tensor * w = new_param(m, d, d, rng, 0.5f);
        ggml_tensor * b = new_param(m, d, 1, rng, 0.1f);
        ggml_tensor * z = ggml_add(m.compute, ggml_mul_mat(m.compute, w, h), b);
        ggml_tensor * s = ggml_reshape_3d(m.compute, z, d / 2, 2, nb);
        ggml_tensor * y = ggml_mul(m.compute, s, ggml_sigmoid(m.compute, s));
        h = ggml_reshape_2d(m.compute, y, d, nb);
        if (every > 0 && (l + 1) % every == 0 && l + 1 < depth) ckpts.push_back(h);
    }
    ggml_tensor * loss = ggml_sum(m.compute, ggml_sqr(m.compute, h));
    ggml_set_loss(loss);
    ggml_cgraph * g = ggml_new_graph_custom(m.compute, 2048, true);
    ggml_build_forward_expand(g, loss);
    const int n_fwd = ggml_graph_n_nodes(g);
    std::vector<ggml_tensor *> accs(n_fwd, nullptr);
    for (int i = 0; i < n_fwd; i++) {
        ggml_tensor * node = ggml_graph_node(g, i);
        if (node->flags & GGML_TENSOR_FLAG_PARAM) accs[i] = ggml_dup_tensor(m.params, node);
    }
    if (every > 0) ggml_build_backward_checkpointed(m.compute, g, accs.data(), ckpts.data(), (int) ckpts.size());
    else ggml_build_backward_expand(m.compute, g, accs.data());

    if (every > 0) {
        std::set<const ggml_tensor *> recomputable;
        for (int i = 0; i < n_fwd; i++) {
            ggml_tensor * node = ggml_graph_node(g, i);
            const bool kept = node->op == GGML_OP_NONE || (node->flags & (GGML_TENSOR_FLAG_PARAM | GGML_TENSOR_FLAG_LOSS)) ||
                              std::find(ckpts.begin(), ckpts.end(), node) != ckpts.end();
            // Views of kept tensors hold kept memory.
            const ggml_tensor * owner = node->view_src ? node->view_src : node;
            const bool owner_kept = owner == node ? kept : !recomputable.count(owner);
            if (!kept && !(node->view_src && owner_kept)) recomputable.insert(node);
        }
        for (int i = n_fwd; i < ggml_graph_n_nodes(g); i++) {
            ggml_tensor * node = ggml_graph_node(g, i);
            for (int j = 0; j < GGML_MAX_SRC; j++) {
                EXPECT_FALSE(node->src[j] && recomputable.count(node->src[j])) << node->name << " reads " << node->src[j]->name;
            }
            EXPECT_FALSE(node->view_src && recomputable.count(node->view_src)) << node->name << " views " << node->view_src->name;
        }
    }

    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    EXPECT_TRUE(ggml_gallocr_alloc_graph(ga, g));
    ggml_graph_reset(g);
    EXPECT_EQ(ggml_graph_compute_with_ctx(m.params, g, 2), GGML_STATUS_SUCCESS);
    std::vector<std::vector<uint8_t>> grads;
    for (ggml_tensor * w : m.weights) grads.push_back(tu::bytes_of(ggml_graph_get_grad_acc(g, w)));
    ggml_gallocr_free(ga);
    return grads;
}

}  // namespace

TEST(Checkpoint, ViewsOfRecomputedTensors) {
    const auto plain = viewed_net_grads(0);
    EXPECT_TRUE(viewed_net_grads(2) == plain);
    EXPECT_TRUE(viewed_net_grads(1) == plain);
}

TEST(Checkpoint, ThroughTheOptimizationContext) {
    const int depth = 12, width = 32, nb = 16, ncls = 4;
    std::vector<int> widths(1, width);
    for (int l = 0; l < depth; l++) widths.push_back(l + 1 == depth ? ncls : width);
    ggml_opt_dataset_t ds = ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, width, ncls, nb * 4, 1);
    fill_classification(ds, 3);

    std::vector<std::vector<uint8_t>> after[2];
    size_t buffer[2];
    for (int use = 0; use < 2; use++) {
        Model m;
        build_mlp(m, widths, nb, 17);
        std::vector<ggml_tensor *> ckpts;
        for (int l = 2; l < depth - 1; l += 3) ckpts.push_back(m.layer_outputs[l]);
        ggml_opt_params p = ggml_opt_default_params(m.compute, m.inputs, m.outputs, GGML_OPT_LOSS_TYPE_CROSS_ENTROPY);
        p.n_threads = 2;
        if (use) {
            p.checkpoints = ckpts.data();
            p.n_checkpoints = (int) ckpts.size();
        }
        ggml_opt_context_t ctx = ggml_opt_init(p);
        ASSERT_NE(ctx, nullptr);
        ggml_opt_epoch(ctx, ds, nullptr, nullptr, -1, nullptr, nullptr);
        after[use] = weight_bytes(m);
        buffer[use] = ggml_opt_compute_buffer_size(ctx);
        ggml_opt_free(ctx);
    }
    EXPECT_TRUE(after[0] == after[1]) << "training with checkpoints gave other parameters";
    EXPECT_LT(buffer[1], buffer[0]);
    ggml_opt_dataset_free(ds);
}

// ---- determinism and allocation -------------------------------------------------------------------
TEST(Opt, SameResultsWithOneAndTwoThreads) {
    std::vector<std::vector<uint8_t>> after[2];
    for (int nt = 1; nt <= 2; nt++) {
        Model m;
        build_mlp(m, { 12, 24, 5 }, 8, 31);
        ggml_opt_dataset_t ds = ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, 12, 5, 64, 1);
        fill_classification(ds, 2);
        ggml_opt_params p = ggml_opt_default_params(m.compute, m.inputs, m.outputs, GGML_OPT_LOSS_TYPE_CROSS_ENTROPY);
        p.n_threads = nt;
        p.opt_period = 2;
        p.grad_clip = 0.5f;
        p.lr_schedule = { GGML_OPT_LR_SCHEDULE_COSINE, 2, 6, 0.0f };
        ggml_opt_context_t ctx = ggml_opt_init(p);
        ASSERT_NE(ctx, nullptr);
        for (int e = 0; e < 3; e++) {
            ggml_opt_dataset_shuffle(ctx, ds, -1);
            ggml_opt_epoch(ctx, ds, nullptr, nullptr, -1, nullptr, nullptr);
        }
        after[nt - 1] = weight_bytes(m);
        ggml_opt_free(ctx);
        ggml_opt_dataset_free(ds);
    }
    EXPECT_TRUE(after[0] == after[1]) << "1 and 2 threads trained to different parameters";
}

TEST(Opt, TrainingStepAllocatesNothing) {
    Model m;
    build_mlp(m, { 10, 16, 4 }, 8, 1);
    ggml_opt_dataset_t ds = ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, 10, 4, 64, 1);
    fill_classification(ds, 6);
    StepLog log;
    log.steps.reserve(64);
    ggml_opt_params p = ggml_opt_default_params(m.compute, m.inputs, m.outputs, GGML_OPT_LOSS_TYPE_CROSS_ENTROPY);
    p.n_threads = 2;
    p.opt_period = 2;
    p.grad_clip = 1.0f;
    p.step_callback = StepLog::record;
    p.step_callback_ud = &log;
    ggml_opt_context_t ctx = ggml_opt_init(p);
    ASSERT_NE(ctx, nullptr);
    const size_t buffer = ggml_opt_compute_buffer_size(ctx);
    std::vector<void *> placed;
    for (int i = 0; i < ggml_graph_n_nodes(ggml_opt_graph_opt(ctx)); i++) placed.push_back(ggml_graph_node(ggml_opt_graph_opt(ctx), i)->data);

    ggml_opt_dataset_get_batch(ds, ggml_opt_inputs(ctx), ggml_opt_labels(ctx), 0);
    ggml_opt_eval(ctx, nullptr);  // warm-up: the thread pool starts its workers
#ifdef TEST_OPT_COUNTS_ALLOCATIONS
    g_allocations = 0;
    g_counting = true;
#endif
    for (int64_t ib = 1; ib < 8; ib++) {
        ggml_opt_alloc(ctx, true);
        ggml_opt_dataset_get_batch(ds, ggml_opt_inputs(ctx), ggml_opt_labels(ctx), ib);
        ggml_opt_eval(ctx, nullptr);
    }
    ggml_opt_alloc(ctx, false);
    ggml_opt_eval(ctx, nullptr);
#ifdef TEST_OPT_COUNTS_ALLOCATIONS
    g_counting = false;
    EXPECT_EQ(g_allocations.load(), 0) << "heap allocations during training steps";
#endif
    EXPECT_EQ(ggml_opt_n_steps(ctx), 4);
    EXPECT_EQ(log.steps.size(), 4u);
    EXPECT_EQ(ggml_opt_compute_buffer_size(ctx), buffer);
    for (int i = 0; i < ggml_graph_n_nodes(ggml_opt_graph_opt(ctx)); i++) {
        EXPECT_EQ(ggml_graph_node(ggml_opt_graph_opt(ctx), i)->data, placed[i]) << "node " << i << " was placed again";
    }
    ggml_opt_free(ctx);
    ggml_opt_dataset_free(ds);
}

// ---- datasets -----------------------------------------------------------------------------------
TEST(Opt, DatasetBatchesFollowTheShuffledShards) {
    const int64_t ne = 3, ndata = 12, shard = 2;
    ggml_opt_dataset_t ds = ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_I32, ne, 1, ndata, shard);
    ggml_tensor * data = ggml_opt_dataset_data(ds), * labels = ggml_opt_dataset_labels(ds);
    for (int64_t j = 0; j < ndata; j++) {
        for (int64_t i = 0; i < ne; i++) tu::set(data, 10.0 * j + i, i, j);
        tu::set(labels, (double) j, 0, j);
    }
    tu::Ctx c;
    ggml_tensor * db = ggml_new_tensor_2d(c, GGML_TYPE_F32, ne, 4), * lb = ggml_new_tensor_2d(c, GGML_TYPE_I32, 1, 4);
    ggml_opt_dataset_get_batch(ds, db, lb, 1);  // unshuffled: datapoints 4..7
    for (int64_t j = 0; j < 4; j++) {
        EXPECT_EQ(tu::get(lb, 0, j), 4 + j);
        EXPECT_EQ(tu::get(db, 2, j), 10.0 * (4 + j) + 2);
    }

    // Shuffling moves whole shards, the same way for the same seed.
    auto order_after_shuffle = [&](uint32_t seed) {
        LinearProbe lp(2);
        ggml_opt_params p = ggml_opt_default_params(lp.m.compute, lp.m.inputs, lp.m.outputs, GGML_OPT_LOSS_TYPE_SUM);
        p.build_type = GGML_OPT_BUILD_TYPE_FORWARD;
        p.seed = seed;
        p.n_threads = 1;
        ggml_opt_context_t ctx = ggml_opt_init(p);
        ggml_opt_dataset_shuffle(ctx, ds, -1);
        std::vector<int> order;
        for (int64_t ib = 0; ib < ndata / 4; ib++) {
            ggml_opt_dataset_get_batch(ds, db, lb, ib);
            for (int64_t j = 0; j < 4; j++) order.push_back((int) tu::get(lb, 0, j));
        }
        ggml_opt_free(ctx);
        return order;
    };
    std::vector<int> a = order_after_shuffle(1);
    std::vector<int> sorted = a;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t j = 0; j < ndata; j++) EXPECT_EQ(sorted[j], j);
    for (size_t j = 0; j < a.size(); j += 2) EXPECT_EQ(a[j] % 2, 0) << "shards of 2 stay together";
    for (size_t j = 0; j < a.size(); j += 2) EXPECT_EQ(a[j + 1], a[j] + 1);
    ggml_opt_dataset_free(ds);
}

// ---- the example program --------------------------------------------------------------------------
TEST(Opt, TrainTinyLearns) {
    const std::string bin = std::string(LLAMA_BIN_DIR) + "/train-tiny";
    if (!tu::file_exists(bin)) GTEST_SKIP() << "train-tiny not built";
    const tu::run_result r = tu::run_command(std::string(LLAMA_EMULATOR) + " " + bin + " --epochs 4 --seed 3");
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("loss fell"), std::string::npos) << r.output;
}
