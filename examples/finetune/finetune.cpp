// llama-finetune: LoRA / QLoRA fine-tuning of a GGUF model on the CPU.
//
//   llama-finetune -m BASE.gguf -f DATA -o ADAPTER.gguf [options]
//
// The base stays as loaded (quantized weights stay quantized; gradients flow through them to
// the activations); only the adapter's A and B are trained. One training graph of one sequence
// is built once (ggml-opt: forward, backward into accumulators, optimizer step); a step
// accumulates the gradients of b * grad-acc sequences, and the loss of a step is the mean
// cross-entropy over every counted target of its sequences (each target weighted by
// 1 / targets of the step, so sequences of any length and masked prompts add up exactly).
//
// Under MPI (built with -DGGML_MPI=ON, started with mpirun -np N) the run is data-parallel: the
// sequences of a step are N x b x grad-acc, rank r computes the r-th contiguous slice of them
// (the weights of its targets still 1 / targets of the whole step), the gradients are summed
// across the ranks before the step (finetune-dist.h, finetune-mpi.cpp), and the losses and
// adapter are those of one process with -b N x b, up to the order of the float sums.
#include "arg.h"
#include "common.h"
#include "finetune-checkpoint.h"
#include "finetune-data.h"
#include "finetune-dist.h"
#include "finetune-report.h"

#include "ggml-cpu.h"
#include "ggml-opt.h"
#include "llama.h"
#include "llama-adapter.h"
#include "llama-graph.h"
#include "llama-hf.h"
#include "llama-model.h"
#include "llama-safetensors.h"

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <thread>
#include <vector>

namespace {

// The options: common/arg.cpp's table (LLAMA_EXAMPLE_FINETUNE) fills common_params_finetune and
// the common -m, -f, -o, -t, -ngl.
struct options : common_params_finetune {
    std::string model, data, out;
    ft_data_format format = FT_DATA_TEXT;
    int32_t n_threads = 0;
    int32_t n_gpu_layers = 0;  // -ngl: layers of the frozen base model in a GPU's memory
};

ft_dist * g_dist = nullptr;  // the run's processes (one unless under MPI)

// Ends the run (every process of it, under MPI) with a message.
[[noreturn]] void die(const std::string & msg) {
    if (g_dist && g_dist->size > 1) {
        fprintf(stderr, "llama-finetune: rank %d: error: %s\n", g_dist->rank, msg.c_str());
        g_dist->abort(1);
    }
    fprintf(stderr, "llama-finetune: error: %s\n", msg.c_str());
    exit(1);
}

options parse_args(int argc, char ** argv) {
    const bool root = !g_dist || g_dist->rank == 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help") || !strcmp(argv[i], "--usage")) {
            if (root) {
                fputs(common_params_help(LLAMA_EXAMPLE_FINETUNE).c_str(), stdout);
                fputs("\nLoRA / QLoRA fine-tuning: the base model (F32, F16, BF16 or quantized) is frozen and stays as\n"
                      "loaded; a low-rank adapter is trained and written as a GGUF LoRA adapter (llama.cpp's format).\n"
                      "Data-parallel (builds with -DGGML_MPI=ON): mpirun -np N llama-finetune ... trains on N processes;\n"
                      "-b is per process (each step takes N x b x grad-acc sequences), rank 0 writes every file.\n", stdout);
            }
            if (g_dist) g_dist->finalize();
            exit(0);
        }
    }
    common_params cp;
    if (!common_params_parse(argc, argv, cp, LLAMA_EXAMPLE_FINETUNE)) {
        if (g_dist && g_dist->size > 1) g_dist->abort(1);  // every process saw the same command line
        exit(1);
    }
    options o;
    static_cast<common_params_finetune &>(o) = cp.finetune;
    o.model = cp.model;
    o.data = cp.prompt_file;
    o.out = cp.out_file;
    o.n_threads = cp.n_threads;
    o.n_gpu_layers = cp.n_gpu_layers;
    o.format = cp.finetune.data_jsonl ? FT_DATA_JSONL : FT_DATA_TEXT;
    if (o.model.empty()) die("no base model (-m BASE.gguf)");
    if (!o.bench && o.data.empty()) die("no training data (-f FILE)");
    if (!o.bench && o.out.empty()) die("no output adapter (-o ADAPTER.gguf)");
    if (o.steps && o.epochs) die("give --steps or --epochs, not both");
    if (o.wd < 0) o.wd = o.opt == GGML_OPT_OPTIMIZER_TYPE_ADAMW ? 0.01f : 0.0f;
    if (o.lr > 1.0f) die("learning rate " + std::to_string(o.lr) + " is absurd for fine-tuning (at most 1)");
    if (o.checkpoint_out.empty() && !o.out.empty()) {
        std::string base = o.out;
        if (base.size() > 5 && base.compare(base.size() - 5, 5, ".gguf") == 0) base.resize(base.size() - 5);
        o.checkpoint_out = base + ".ckpt.gguf";
    }
    // Processes on one machine share its cores.
    const int local = g_dist ? std::max(1, g_dist->local_size) : 1;
    if (o.n_threads == 0) o.n_threads = (int32_t) std::max(1u, std::thread::hardware_concurrency() / (unsigned) local);
    return o;
}

// Every file the run writes, checked before anything heavy: a folder that does not exist or
// cannot be written is reported now, not after the training.
void check_output_paths(const options & o) {
    auto dir_of = [](const std::string & p) {
        const size_t slash = p.rfind('/');
        return slash == std::string::npos ? std::string(".") : slash == 0 ? std::string("/") : p.substr(0, slash);
    };
    auto writable_dir = [](const std::string & d, const std::string & flag, const std::string & p) {
        struct stat st;
        if (stat(d.c_str(), &st) != 0) die(flag + " '" + p + "': the folder '" + d + "' does not exist");
        if (!S_ISDIR(st.st_mode)) die(flag + " '" + p + "': '" + d + "' is not a folder");
        if (access(d.c_str(), W_OK | X_OK) != 0) die(flag + " '" + p + "': cannot write into '" + d + "': " + strerror(errno));
    };
    const std::pair<const char *, const std::string *> files[] = {
        {"-o", &o.out}, {"--checkpoint-out", &o.checkpoint_out}, {"--loss-log", &o.loss_log}, {"--plot", &o.plot}};
    for (const auto & [flag, p] : files) {
        if (p->empty()) continue;
        struct stat st;
        if (stat(p->c_str(), &st) == 0 && S_ISDIR(st.st_mode)) die(std::string(flag) + " '" + *p + "' is a folder, not a file");
        writable_dir(dir_of(*p), flag, *p);
    }
    if (!o.peft_out.empty()) {  // a folder, created if absent
        struct stat st;
        if (stat(o.peft_out.c_str(), &st) == 0) {
            if (!S_ISDIR(st.st_mode)) die("--peft-out '" + o.peft_out + "' exists and is not a folder");
            writable_dir(o.peft_out, "--peft-out", o.peft_out);
        } else {
            writable_dir(dir_of(o.peft_out), "--peft-out", o.peft_out);
        }
    }
}

// What a killed earlier run left next to the files this one writes (a SIGKILL during a write).
void remove_stale_temporaries_of(const options & o) {
    std::vector<std::string> paths = {o.out, o.checkpoint_out, o.loss_log, o.plot};
    if (!o.peft_out.empty()) {
        paths.push_back(o.peft_out + "/adapter_model.safetensors");
        paths.push_back(o.peft_out + "/adapter_config.json");
    }
    for (const std::string & p : paths) {
        if (p.empty()) continue;
        for (const std::string & r : remove_stale_temporaries(p)) {
            fprintf(stderr, "llama-finetune: removed %s, left by an interrupted write\n", r.c_str());
        }
    }
}

std::atomic<bool> g_interrupted(false);

void on_sigint(int) {
    if (g_interrupted.exchange(true)) {
        signal(SIGINT, SIG_DFL);
        raise(SIGINT);
    }
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double peak_rss_gb() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return (double) ru.ru_maxrss * 1024.0 / 1e9;
}

// PEFT's default initialization of A: Kaiming-uniform with a = sqrt(5), i.e. U(-1/sqrt(n_in), 1/sqrt(n_in)).
void init_lora_a(llama_adapter_lora & ad, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<ggml_tensor *> as;
    for (auto & kv : ad.weights) as.push_back(kv.second.a);
    std::sort(as.begin(), as.end(), [](const ggml_tensor * x, const ggml_tensor * y) { return strcmp(x->name, y->name) < 0; });
    for (ggml_tensor * a : as) {
        const float bound = 1.0f / std::sqrt((float) a->ne[0]);
        std::uniform_real_distribution<float> u(-bound, bound);
        float * d = (float *) a->data;
        for (int64_t i = 0; i < ggml_nelements(a); i++) d[i] = u(rng);
    }
}

struct ModelDeleter {
    void operator()(llama_model * m) const { llama_model_free(m); }
};
struct OptDeleter {
    void operator()(ggml_opt_context * c) const { ggml_opt_free(c); }
};
struct CtxDeleter {
    void operator()(ggml_context * c) const { ggml_free(c); }
};

void quiet_log(enum ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN) fputs(text, stderr);
}
void errors_only_log(enum ggml_log_level level, const char * text, void *) {  // other ranks: errors only
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

// The training run: model, adapter, graph, optimizer, data and the loop.
struct trainer {
    options o;
    llama_model * model = nullptr;
    llama_adapter_lora ad;
    llm_lora_set lora;
    std::unique_ptr<ggml_context, CtxDeleter> ctx;
    std::unique_ptr<ggml_opt_context, OptDeleter> oc;
    llm_graph_io io;
    ggml_opt_optimizer_params opt_pars{};
    int32_t n_graph = 0;  // tokens per graph (the longest sequence's inputs)
    int32_t n_vocab = 0;
    std::vector<ft_sequence> train, val;
    int64_t seqs_per_step = 1;  // of the whole run: processes x b x grad-acc
    int64_t local_seqs = 1;     // of this process: b x grad-acc (ggml-opt's period)
    int rank = 0, n_procs = 1;
    int64_t total_steps = 0;
    std::vector<int32_t> label_rows;  // one-hot positions set in the labels (cleared next time)
    // With layers on a GPU: its backends and the CPU's under one scheduler (ggml-opt places each
    // graph with it, so the inputs are set after ggml_opt_alloc, through the backend interface).
    std::vector<ggml_backend_t> backends;
    ggml_backend_sched_t sched = nullptr;
    std::vector<int32_t> staged_tokens;
    std::vector<float> staged_mask, staged_dropout;
    // The adapter's weights next to their base weights on the GPU (their gradients, moments and
    // steps stay there too); dev.host_of leads to the host tensors files are written from.
    llama_adapter_device_copy dev;

    ~trainer() {
        oc.reset();
        ggml_backend_sched_free(sched);
        for (ggml_backend_t b : backends) ggml_backend_free(b);
    }

    void move_adapter_to_devices() {
        std::string err;
        if (!llama_adapter_lora_to_devices(ad, dev, true, err)) die(err);
    }

    // Runs f with the adapter in host memory, holding the trained values.
    template <typename F>
    void with_host_adapter(F && f) {
        auto swap = [&](bool to_host) {
            for (auto & kv : ad.weights) {
                for (ggml_tensor ** t : {&kv.second.a, &kv.second.b}) {
                    if (to_host && dev.host_of.count(*t)) {
                        ggml_tensor * h = dev.host_of[*t];
                        ggml_backend_tensor_get(*t, h->data, 0, ggml_nbytes(h));
                        *t = h;
                    } else if (!to_host) {
                        for (auto & [d, h] : dev.host_of) {
                            if (h == *t) *t = d;
                        }
                    }
                }
            }
        };
        swap(true);
        f();
        swap(false);
    }

    // The training sequence at global position pos (epoch pos / n, shuffled per epoch).
    std::vector<int64_t> order;
    int64_t order_epoch = -1;
    const ft_sequence & train_seq(int64_t pos) {
        const int64_t n = (int64_t) train.size(), epoch = pos / n;
        if (epoch != order_epoch) {
            if (o.shuffle) {
                order = ft_shuffled_order(n, ft_mix(o.seed ^ ft_mix((uint64_t) epoch + 1)));
            } else {
                order.resize((size_t) n);
                for (int64_t i = 0; i < n; i++) order[(size_t) i] = i;
            }
            order_epoch = epoch;
        }
        return train[(size_t) order[(size_t) (pos % n)]];
    }

    // Places the graph of a step (training) or of a look at the loss, then fills the inputs and
    // labels of one sequence; weight: of each counted target. Dropout masks are drawn from
    // dropout_seed when training, all ones otherwise.
    void set_inputs(const ft_sequence & s, double weight, bool training, uint64_t dropout_seed) {
        ggml_opt_alloc(oc.get(), training);
        if (sched) set_static_inputs();  // the scheduler placed them anew
        const int32_t n = (int32_t) s.tokens.size() - 1;
        staged_tokens.resize((size_t) n_graph);
        for (int32_t t = 0; t < n_graph; t++) staged_tokens[(size_t) t] = t < n ? s.tokens[(size_t) t] : 0;
        ggml_backend_tensor_set(io.tokens, staged_tokens.data(), 0, ggml_nbytes(io.tokens));
        ggml_tensor * labels = ggml_opt_labels(oc.get());
        float * lab = (float *) labels->data;
        for (int32_t idx : label_rows) lab[idx] = 0.0f;
        label_rows.clear();
        for (int32_t t = 0; t < n; t++) {
            if (!s.counts[(size_t) t + 1]) continue;
            const int32_t idx = t * n_vocab + s.tokens[(size_t) t + 1];
            lab[idx] = (float) weight;
            label_rows.push_back(idx);
        }
        if (!io.lora_masks.empty()) {
            std::mt19937_64 rng(dropout_seed);
            const double keep = 1.0 - o.dropout;
            const float scale = (float) (1.0 / keep);
            for (ggml_tensor * m : io.lora_masks) {
                staged_dropout.resize((size_t) ggml_nelements(m));
                for (float & d : staged_dropout) d = !training ? 1.0f : (double) (rng() >> 11) * 0x1.0p-53 < keep ? scale : 0.0f;
                ggml_backend_tensor_set(m, staged_dropout.data(), 0, ggml_nbytes(m));
            }
        }
    }

    // Positions and the causal mask (padding after a shorter sequence is never attended to by
    // its real tokens, and its rows carry no label): once on the CPU, after every placement with
    // a scheduler.
    void set_static_inputs() {
        const int32_t n = n_graph;
        staged_tokens.resize((size_t) n);
        for (int32_t t = 0; t < n; t++) staged_tokens[(size_t) t] = t;
        ggml_backend_tensor_set(io.pos, staged_tokens.data(), 0, ggml_nbytes(io.pos));
        if (staged_mask.empty()) {
            staged_mask.resize((size_t) n * n);
            for (int32_t t = 0; t < n; t++)
                for (int32_t c = 0; c < n; c++) staged_mask[(size_t) t * n + c] = c <= t ? 0.0f : -std::numeric_limits<float>::infinity();
        }
        // A mask no layer reads is not allocated (Phi-3: every layer has the window).
        if (io.kq_mask->buffer) ggml_backend_tensor_set(io.kq_mask, staged_mask.data(), 0, ggml_nbytes(io.kq_mask));
        if (io.kq_mask_swa && io.kq_mask_swa->buffer) {
            // Sliding-window layers: the causal mask less what the window leaves behind.
            std::vector<float> swa = staged_mask;
            for (int32_t t = 0; t < n; t++) llm_mask_window(*model, swa.data() + (size_t) t * n, staged_tokens.data(), (uint32_t) n, t);
            ggml_backend_tensor_set(io.kq_mask_swa, swa.data(), 0, ggml_nbytes(io.kq_mask_swa));
        }
    }

    float last_loss() {
        float loss;
        ggml_backend_tensor_get(ggml_opt_loss(oc.get()), &loss, 0, sizeof(loss));
        return loss;
    }

    // The weight that makes the sum of the graphs' losses over a group (of every process) the
    // mean over its targets: the graph averages over n_graph rows and ggml-opt divides by the
    // period, this process's sequences per step.
    double target_weight(int64_t n_targets) const {
        return (double) n_graph * (double) local_seqs / (double) n_targets;
    }

    // Mean loss of the validation sequences (forward only); process r takes every n_procs-th.
    float validate(ft_dist & dist) {
        if (val.empty()) return NAN;
        int64_t n_targets = 0;
        for (const auto & s : val) n_targets += s.n_targets();
        double sum = 0;
        for (size_t i = (size_t) rank; i < val.size(); i += (size_t) n_procs) {
            set_inputs(val[i], target_weight(n_targets), false, 0);
            ggml_opt_eval(oc.get(), nullptr);
            sum += last_loss();
        }
        dist.allreduce_sum(&sum, 1);
        return (float) sum;
    }
};

// FNV-1a over the sequences' tokens and loss masks: the same data, not just as many sequences.
uint64_t data_hash(const std::vector<ft_sequence> & seqs, uint64_t h = 1469598103934665603ull) {
    for (const auto & s : seqs) {
        for (size_t i = 0; i < s.tokens.size(); i++) {
            const uint64_t v = (uint64_t) (uint32_t) s.tokens[i] << 1 | s.counts[i];
            for (int k = 0; k < 5; k++) h = (h ^ ((v >> (8 * k)) & 0xff)) * 1099511628211ull;
        }
        h = (h ^ 0xff) * 1099511628211ull;  // sequence boundary
    }
    return h;
}

// Everything the resumed run must share with the interrupted one.
std::string config_string(const options & o, const trainer & tr) {
    char b[1024];
    snprintf(b, sizeof(b),
             "data=%016llx\ndata_sequences=%zu+%zu\nn_ctx=%d\nbatch=%d\ngrad_acc=%d\nseed=%u\nshuffle=%d\nopt=%d\nlr=%.9g\nwd=%.9g\n"
             "beta1=%.9g\nbeta2=%.9g\neps=%.9g\ngrad_clip=%.9g\ncosine=%d\nwarmup=%lld\nlr_min=%.9g\nsteps=%lld\n"
             "r=%d\nalpha=%.9g\ndropout=%.9g\n",
             (unsigned long long) data_hash(tr.val, data_hash(tr.train)), tr.train.size(), tr.val.size(), o.n_ctx, o.n_batch * tr.n_procs, o.grad_acc, o.seed, (int) o.shuffle, (int) o.opt, o.lr,
             o.wd, o.beta1, o.beta2, o.eps, o.grad_clip, (int) o.cosine, (long long) o.warmup, o.min_lr_factor,
             (long long) tr.total_steps, tr.ad.rank(), tr.ad.alpha, o.dropout);
    std::string s = b;
    s += "targets=";
    for (const auto & t : tr.ad.targets) s += t + ",";
    s += "\n";
    return s;
}

ggml_prec backward_prec(const options & o, const llama_model & m, bool on_gpu) {
    if (o.backward_prec == "f32") return GGML_PREC_DEFAULT;
    if (o.backward_prec == "bf16") return GGML_PREC_BF16;
    if (o.backward_prec == "int8") return GGML_PREC_INT8;
    // auto: BF16 products for quantized weights, whose own precision is below BF16's (measured on
    // TinyLlama Q4_0 the fastest of the three, and on stories260K Q8_0 as close to F32's curve),
    // and for any weights with layers on a GPU (its tensor cores multiply BF16, its F32 products
    // run at a tenth of their rate: half precision is what GPU fine-tuning uses); F32 otherwise.
    const ggml_tensor * w = m.layers.empty() ? nullptr : m.layers[0].wo;
    return on_gpu || (w && ggml_is_quantized(w->type)) ? GGML_PREC_BF16 : GGML_PREC_DEFAULT;
}

// Random token sequences for --bench: processes * b * grad-acc sequences of n_ctx inputs.
void bench_data(trainer & tr) {
    std::mt19937 rng(tr.o.seed);
    std::uniform_int_distribution<int32_t> tok(0, tr.n_vocab - 1);
    for (int64_t i = 0; i < (int64_t) tr.n_procs * tr.o.n_batch * tr.o.grad_acc; i++) {
        ft_sequence s;
        for (int32_t t = 0; t <= tr.o.n_ctx; t++) s.tokens.push_back(tok(rng));
        s.counts.assign(s.tokens.size(), 1);
        s.counts[0] = 0;
        tr.train.push_back(std::move(s));
    }
}

// FNV-1a of the parameters' bytes (the replicas of a data-parallel run must stay equal).
uint64_t params_hash(ggml_opt_context_t oc) {
    uint64_t h = 1469598103934665603ull;
    std::vector<uint8_t> d;
    for (int64_t i = 0; i < ggml_opt_n_params(oc); i++) {
        const ggml_tensor * t = ggml_opt_param(oc, i);
        d.resize(ggml_nbytes(t));
        ggml_backend_tensor_get(t, d.data(), 0, d.size());  // host memory, or a GPU's with -ngl
        for (uint8_t c : d) h = (h ^ c) * 1099511628211ull;
    }
    return h;
}

// Rank 0's values of t to every process, wherever t lives (host memory, or a GPU's with -ngl).
void broadcast_tensor(ft_dist & dist, ggml_tensor * t) {
    std::vector<uint8_t> d(ggml_nbytes(t));
    ggml_backend_tensor_get(t, d.data(), 0, d.size());
    dist.broadcast(d.data(), d.size());
    ggml_backend_tensor_set(t, d.data(), 0, d.size());
}

uint64_t string_hash(const std::string & s) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}

int run(int argc, char ** argv, ft_dist & dist) {
    trainer tr;
    tr.rank = dist.rank;
    tr.n_procs = dist.size;
    const bool lead = dist.rank == 0;  // writes files and talks to the user
    tr.o = parse_args(argc, argv);
    options & o = tr.o;
    llama_log_set(lead ? quiet_log : errors_only_log, nullptr);
    if (lead) {
        check_output_paths(o);
        remove_stale_temporaries_of(o);
    }

    // The checkpoint's state first: a mismatch is reported before anything heavy. Rank 0 reads
    // the checkpoint and sends its contents to the others.
    ft_checkpoint_state resume_state;
    if (!o.resume.empty() && lead) {
        std::string err;
        if (!ft_checkpoint_read_state(o.resume, resume_state, err)) die(err);
    }

    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = o.n_gpu_layers;  // the frozen weights; the adapter stays in host memory
    std::unique_ptr<llama_model, ModelDeleter> model(llama_model_load_from_file(o.model.c_str(), mp));
    if (!model) die("cannot load the base model '" + o.model + "'");
    tr.model = model.get();
    const llama_model & m = *model;
    tr.n_vocab = (int32_t) m.hparams.n_vocab;
    if (!m.output) {
        die("'" + o.model + "' is an embedding model (" + m.arch_name + ", no output head): fine-tuning trains next-token "
            "prediction, which it cannot do (not supported)");
    }

    std::string err;
    if (!o.lora_in.empty()) {
        if (!llama_adapter_lora_load(tr.ad, m, o.lora_in, err)) die("--lora-in: " + err);
        if (tr.ad.alpha == 0.0f) tr.ad.alpha = (float) tr.ad.rank();  // no alpha: scale 1
        if (lead && (o.r_set || o.alpha_set || o.targets_set)) {
            fprintf(stderr, "llama-finetune: note: --lora-in's rank %d, alpha %g and targets apply\n", tr.ad.rank(), tr.ad.alpha);
        }
    } else {
        // By default the attention projections the family has (q, k, v, o; Phi-3's fused qkv, o).
        std::vector<std::string> targets = o.targets;
        if (!o.targets_set) {
            targets.clear();
            for (const llama_hf_proj & p : llama_hf_projections(m.arch)) {
                if (p.target == "q" || p.target == "k" || p.target == "v" || p.target == "qkv" || p.target == "o") targets.push_back(p.target);
            }
        }
        if (!llama_adapter_lora_create(tr.ad, m, targets, o.r, o.alpha, err)) die(err);
        init_lora_a(tr.ad, o.seed);  // rank 0's is sent to the others below
    }
    tr.ad.dropout = o.dropout;

    // Layers on a GPU: a scheduler over the GPU backends and the CPU's, and the adapter's
    // weights moved next to their base weights.
    bool on_gpu = false;
    for (const llama_layer & L : m.layers) on_gpu |= L.wq && L.wq->buffer && !ggml_backend_buffer_is_host(L.wq->buffer);
    if (on_gpu) {
        for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
            ggml_backend_dev_t d = ggml_backend_dev_get(i);
            if (ggml_backend_dev_type(d) != GGML_BACKEND_DEVICE_TYPE_GPU) continue;
            ggml_backend_t b = ggml_backend_dev_init(d, nullptr);
            if (!b) die(std::string("cannot start the device ") + ggml_backend_dev_name(d));
            tr.backends.push_back(b);
        }
        ggml_backend_t cpu = ggml_backend_cpu_init();
        ggml_backend_cpu_set_n_threads(cpu, o.n_threads);
        tr.backends.push_back(cpu);
        // the CPU's compute buffer in the first GPU's page-locked memory, as inference contexts
        // have it: the embeddings go up and the logits' gradient comes down by DMA
        std::vector<ggml_backend_buffer_type_t> bufts;
        for (ggml_backend_t b : tr.backends) bufts.push_back(ggml_backend_get_default_buffer_type(b));
        if (ggml_backend_buffer_type_t host = ggml_backend_dev_host_buffer_type(ggml_backend_get_device(tr.backends[0]))) {
            bufts.back() = host;
        }
        tr.sched = ggml_backend_sched_new(tr.backends.data(), bufts.data(), (int) tr.backends.size(),
                                          llm_graph_max_nodes_train(m, 1), false, false);
        if (!tr.sched) die("cannot set up the backend scheduler");
        tr.move_adapter_to_devices();
    }
    if (tr.ad.base_name.empty()) {
        char name[256];
        if (llama_model_meta_val_str(&m, "general.name", name, sizeof(name)) >= 0) tr.ad.base_name = name;
    }

    // Data.
    if (o.bench) {
        bench_data(tr);
    } else {
        std::vector<ft_sequence> all;
        bool chatml = false;
        if (!ft_load_data(&m, o.data, o.format, o.n_ctx, all, err, &chatml)) die(err);
        if (chatml && lead) {
            fprintf(stderr, "llama-finetune: note: the model has no chat template (tokenizer.chat_template); the chat examples "
                            "are formatted as ChatML\n");
        }
        const int64_t n_val = o.val_split > 0 ? (int64_t) std::ceil(o.val_split * (double) all.size()) : 0;
        if (n_val >= (int64_t) all.size()) {
            die("--val-split " + std::to_string(o.val_split) + " leaves no training sequence (" + std::to_string(all.size()) +
                " in all)");
        }
        tr.val.assign(all.end() - n_val, all.end());
        tr.train.assign(all.begin(), all.end() - n_val);
    }
    size_t max_len = 0;
    int64_t n_tokens_train = 0;
    for (const auto & s : tr.train) {
        max_len = std::max(max_len, s.tokens.size());
        n_tokens_train += (int64_t) s.tokens.size() - 1;
    }
    for (const auto & s : tr.val) max_len = std::max(max_len, s.tokens.size());
    tr.n_graph = (int32_t) max_len - 1;
    if (lead && (uint32_t) tr.n_graph > m.hparams.n_ctx_train && m.hparams.n_ctx_train > 0) {
        fprintf(stderr, "llama-finetune: warning: sequences of %d tokens exceed the model's training context %u\n", tr.n_graph,
                m.hparams.n_ctx_train);
    }
    tr.local_seqs = (int64_t) o.n_batch * o.grad_acc;
    tr.seqs_per_step = (int64_t) dist.size * tr.local_seqs;
    const int64_t n_train = (int64_t) tr.train.size();
    tr.total_steps = o.steps ? o.steps
                   : o.bench ? 4
                   : ((o.epochs ? o.epochs : 1) * n_train + tr.seqs_per_step - 1) / tr.seqs_per_step;
    if (o.bench && !o.steps) tr.total_steps = 4;

    // The training graph: the adapter's tensors are the parameters.
    for (auto & kv : tr.ad.weights) {
        ggml_set_param(kv.second.a);
        ggml_set_param(kv.second.b);
    }
    tr.lora.entries.push_back({&tr.ad, 1.0f});
    tr.lora.dropout = o.dropout > 0.0f;
    tr.lora.base_prec = backward_prec(o, m, tr.sched != nullptr);
    const size_t max_nodes = llm_graph_max_nodes_train(m, 1);
    tr.ctx.reset(ggml_init({ggml_graph_overhead_custom(max_nodes, true) + 2 * max_nodes * ggml_tensor_overhead(), nullptr, true}));
    llm_build_forward_train(tr.ctx.get(), m, (uint32_t) tr.n_graph, tr.io, &tr.lora);

    tr.opt_pars = ggml_opt_get_default_optimizer_params(nullptr);
    tr.opt_pars.adamw.alpha = o.lr;
    tr.opt_pars.adamw.beta1 = o.beta1;
    tr.opt_pars.adamw.beta2 = o.beta2;
    tr.opt_pars.adamw.eps = o.eps;
    tr.opt_pars.adamw.wd = o.wd;
    tr.opt_pars.sgd.alpha = o.lr;
    tr.opt_pars.sgd.wd = o.wd;
    ggml_opt_params op = ggml_opt_default_params(tr.ctx.get(), tr.io.tokens, tr.io.logits, GGML_OPT_LOSS_TYPE_CROSS_ENTROPY);
    op.optimizer = o.opt;
    op.get_opt_pars = ggml_opt_get_constant_optimizer_params;
    op.get_opt_pars_ud = &tr.opt_pars;
    op.opt_period = (int32_t) tr.local_seqs;
    op.n_threads = o.n_threads;
    op.seed = o.seed;
    op.backend_sched = tr.sched;
    op.grad_clip = o.grad_clip;
    op.lr_schedule.type = o.cosine ? GGML_OPT_LR_SCHEDULE_COSINE : GGML_OPT_LR_SCHEDULE_CONSTANT;
    op.lr_schedule.warmup_steps = o.warmup;
    op.lr_schedule.decay_steps = std::max<int64_t>(1, tr.total_steps - o.warmup);
    op.lr_schedule.min_factor = o.min_lr_factor;
    if (o.checkpointing) {
        op.checkpoints = tr.io.layer_out.data();
        op.n_checkpoints = (int) tr.io.layer_out.size();
    } else if (!o.no_recompute) {
        op.checkpoints = tr.io.matmul_out.data();
        op.n_checkpoints = (int) tr.io.matmul_out.size();
    }
    tr.oc.reset(ggml_opt_init(op));
    if (!tr.oc) die("cannot set up the training graphs");
    dist.attach(tr.oc.get());  // with -ngl the gradients are summed after the backward pass (no overlap)
    if (o.bench && lead) {
        fprintf(stderr, "llama-finetune: compute buffer %.1f MiB, static buffer %.1f MiB\n",
                ggml_opt_compute_buffer_size(tr.oc.get()) / 1048576.0, ggml_opt_static_buffer_size(tr.oc.get()) / 1048576.0);
    }

    const int32_t n = tr.n_graph;
    if (!tr.sched) tr.set_static_inputs();  // placed once
    memset(ggml_opt_labels(tr.oc.get())->data, 0, ggml_nbytes(ggml_opt_labels(tr.oc.get())));  // host memory

    ft_checkpoint_state st;
    st.config = config_string(o, tr);
    if (dist.size > 1) {
        // Every process must have the same options, data and adapter layout as rank 0.
        std::string layout = st.config;
        for (int64_t i = 0; i < ggml_opt_n_params(tr.oc.get()); i++) {
            const ggml_tensor * t = ggml_opt_param(tr.oc.get(), i);
            layout += std::string(t->name) + ":" + std::to_string(ggml_nelements(t)) + ";";
        }
        uint64_t h = string_hash(layout);
        const uint64_t mine = h;
        dist.broadcast(&h, sizeof(h));
        if (h != mine) die("this process's options, data or adapter differ from rank 0's (same files and options on every machine?)");
    }
    const int64_t steps_per_epoch = std::max<int64_t>(1, n_train / tr.seqs_per_step);
    auto lr_at = [&](int64_t step) { return o.lr * ggml_opt_lr_factor(&op.lr_schedule, step); };  // of step (0-based)
    if (!o.resume.empty() && lead) {
        ft_run_expect ex;
        ex.arch = m.arch_name;
        ex.config = st.config;
        ex.alpha = tr.ad.alpha;
        ex.total_steps = tr.total_steps;
        ex.seqs_per_step = tr.seqs_per_step;
        ex.lr_at = lr_at;
        if (!tr.val.empty()) ex.validates_after = [&](int64_t s) { return s % steps_per_epoch == 0 || s == tr.total_steps; };
        if (!ft_checkpoint_check_state(resume_state, ex, err)) {
            die("cannot resume from '" + o.resume + "': " + err + (dist.size > 1 ? " (under MPI the batch is processes x -b)" : ""));
        }
        if (!ft_checkpoint_restore(o.resume, tr.ad, tr.oc.get(), err)) die(err);
        st.step = resume_state.step;
        st.seq_pos = resume_state.seq_pos;
        st.history = resume_state.history;
        fprintf(stderr, "llama-finetune: resuming at step %lld of %lld\n", (long long) st.step, (long long) tr.total_steps);
    }
    if (dist.size > 1) {
        // Rank 0's adapter (initialized, read by --lora-in or from the checkpoint) and, when
        // resuming, its optimizer state and position, to every process.
        ggml_opt_context_t oc = tr.oc.get();
        int64_t pos[3] = {st.step, st.seq_pos, ggml_opt_n_steps(oc)};
        dist.broadcast(pos, sizeof(pos));
        st.step = pos[0];
        st.seq_pos = pos[1];
        ggml_opt_set_n_steps(oc, pos[2]);
        for (int64_t i = 0; i < ggml_opt_n_params(oc); i++) {
            ggml_tensor * p = ggml_opt_param(oc, i);
            broadcast_tensor(dist, p);
            for (int k = 0; k < 2 && !o.resume.empty(); k++) {
                ggml_tensor * mk = ggml_opt_optimizer_state(oc, p, k);
                if (mk) broadcast_tensor(dist, mk);
            }
        }
    }

    signal(SIGINT, on_sigint);  // from here on, Ctrl-C ends the run with a checkpoint
    // Under mpirun, Ctrl-C ends the job at once (the launcher's SIGTERM); SIGUSR1, which mpirun
    // forwards to every process, ends it with a checkpoint as Ctrl-C does one process.
    if (dist.size > 1) signal(SIGUSR1, on_sigint);
    int64_t n_params = 0;
    for (const auto & kv : tr.ad.weights) n_params += ggml_nelements(kv.second.a) + ggml_nelements(kv.second.b);
    std::string targets;
    for (const auto & t : tr.ad.targets) targets += (targets.empty() ? "" : ",") + t;
    if (lead && dist.size > 1) {
        fprintf(stderr, "llama-finetune: data-parallel over %d MPI processes (%d on this machine), %lld sequences per process per step\n",
                dist.size, dist.local_size, (long long) tr.local_seqs);
    }
    if (lead) fprintf(stderr,
            "llama-finetune: %s, %s base; LoRA r %d alpha %g on %s (%lld parameters); %lld training sequences "
            "(%lld tokens), %zu validation; %lld sequences of <= %d tokens per step, %lld steps; %s lr %g; %d threads; "
            "backward %s\n",
            o.model.c_str(), ggml_type_name(m.layers[0].wo->type), tr.ad.rank(), tr.ad.alpha, targets.c_str(),
            (long long) n_params, (long long) n_train, (long long) n_tokens_train, tr.val.size(), (long long) tr.seqs_per_step,
            n, (long long) tr.total_steps, ggml_opt_optimizer_name(o.opt), o.lr, o.n_threads,
            tr.lora.base_prec == GGML_PREC_INT8 ? "int8" : tr.lora.base_prec == GGML_PREC_BF16 ? "bf16" : "f32");

    // The adapter (or the checkpoint, written before this) is the run's work: failing to write
    // it is an error. The PEFT copy, the loss log and the plot can be made again from it and the
    // checkpoint: failing those is a warning, after the adapter is safe.
    int n_secondary_failed = 0;
    auto save_outputs = [&](bool final_adapter) {
        if (!lead) return;
        std::string e;
        auto warn = [&](const std::string & what) {
            fprintf(stderr, "llama-finetune: warning: %s not written: %s\n", what.c_str(), e.c_str());
            n_secondary_failed++;
        };
        if (final_adapter && !o.out.empty()) {
            tr.with_host_adapter([&]() {
                if (!llama_adapter_lora_save_gguf(tr.ad, m, o.out, o.outtype, e)) die(e);
                if (!o.peft_out.empty() && !llama_adapter_lora_save_peft(tr.ad, m, o.peft_out, e)) warn("the PEFT adapter");
            });
        }
        if (!o.loss_log.empty() && !ft_write_loss_log(st.history, o.loss_log, e)) warn("the loss log");
        if (!o.plot.empty() && !ft_write_plot(st.history, o.plot, "llama-finetune: " + o.model, e)) warn("the plot");
    };
    auto save_checkpoint = [&]() {
        std::string e;
        if (o.checkpoint_out.empty() || !lead) return;
        if (!ft_checkpoint_save(o.checkpoint_out, m, tr.ad, tr.oc.get(), st, e)) die(e);
        fprintf(stderr, "\nllama-finetune: checkpoint at step %lld written to %s\n", (long long) st.step, o.checkpoint_out.c_str());
    };

    // Runs the sequences of the next group (one optimizer step, or a forward-only look at the
    // loss after the last step; under MPI this process's slice of it); returns the group's mean
    // loss and sets tokens/s (of every process) and whether any process was interrupted.
    bool stop_all = false;
    auto run_group = [&](bool train_step, double & tokens_per_s) {
        int64_t n_targets = 0, n_tokens = 0;
        for (int64_t i = 0; i < tr.seqs_per_step; i++) {
            const ft_sequence & s = tr.train_seq(st.seq_pos + i);
            n_targets += s.n_targets();
            n_tokens += (int64_t) s.tokens.size() - 1;
        }
        const double t0 = now_s();
        double loss = 0;
        const int64_t first = (int64_t) dist.rank * tr.local_seqs;
        for (int64_t i = first; i < first + tr.local_seqs; i++) {
            const ft_sequence & s = tr.train_seq(st.seq_pos + i);
            tr.set_inputs(s, tr.target_weight(n_targets), train_step,
                          ft_mix(((uint64_t) o.seed << 40) ^ (uint64_t) (st.seq_pos + i)));
            ggml_opt_eval(tr.oc.get(), nullptr);
            loss += tr.last_loss();
        }
        if (dist.size > 1) {
            double v[2] = {loss, g_interrupted ? 1.0 : 0.0};
            dist.allreduce_sum(v, 2);
            loss = v[0];
            stop_all = v[1] > 0;
        }
        tokens_per_s = (double) n_tokens / std::max(1e-9, now_s() - t0);
        if (train_step) st.seq_pos += tr.seqs_per_step;
        return (float) loss;
    };

    const double t_start = now_s();
    const int64_t first_step = st.step;
    std::vector<double> bench_rates, bench_step, bench_compute, bench_comm, bench_issue, bench_wait, bench_other;
    if (st.step == 0 && !tr.val.empty()) {
        st.history.val_step.push_back(0);
        st.history.val_loss.push_back(tr.validate(dist));
    }
    dist.take_stats();
    while (st.step < tr.total_steps) {
        dist.step_begin(st.step + 1);
        const float lr = lr_at(st.step);
        double tps = 0;
        const double t_step = now_s();
        const float loss = run_group(true, tps);
        if (o.bench) {
            const ft_dist::stats cs = dist.take_stats();
            bench_step.push_back(now_s() - t_step);
            bench_compute.push_back(bench_step.back() - cs.comm_s);
            bench_comm.push_back(cs.comm_s);
            bench_issue.push_back(cs.issue_s);
            bench_wait.push_back(cs.wait_s);
            bench_other.push_back(cs.other_s);
        }
        if (!std::isfinite(loss)) {
            // A step's loss is computed before its update: at the run's first step no learning
            // rate has acted yet.
            die("the loss is not finite at step " + std::to_string(st.step + 1) +
                (st.step == 0 && o.resume.empty() ? " (before any update: the base model's weights or the starting adapter give "
                                                    "non-finite logits)"
                                                  : " (lr too high?)"));
        }
        st.history.loss.push_back(loss);
        st.history.lr.push_back(lr);
        st.history.tokens_per_s.push_back((float) tps);
        st.step++;
        if (o.bench) bench_rates.push_back(tps);
        if (!tr.val.empty() && (st.step % steps_per_epoch == 0 || st.step == tr.total_steps)) {
            st.history.val_step.push_back(st.step);
            st.history.val_loss.push_back(tr.validate(dist));
        }
        const double elapsed = now_s() - t_start;
        const double eta = elapsed / (double) (st.step - first_step) * (double) (tr.total_steps - st.step);
        if (lead) ft_progress(st.step, tr.total_steps, loss, lr, tps, eta, st.step == tr.total_steps);
        if (dist.size > 1 ? stop_all : g_interrupted.load()) {
            save_checkpoint();
            save_outputs(false);
            if (lead) fprintf(stderr, "llama-finetune: interrupted; resume with --resume %s\n", o.checkpoint_out.c_str());
            return 0;
        }
        if (o.save_every > 0 && st.step % o.save_every == 0 && st.step < tr.total_steps) {
            save_checkpoint();
            save_outputs(false);
        }
    }

    if (o.bench) {
        // The first step is a warm-up (page faults, caches); the median of the rest.
        auto median = [](const std::vector<double> & v) {
            std::vector<double> r(v.begin() + (v.size() > 1 ? 1 : 0), v.end());
            std::sort(r.begin(), r.end());
            return r.empty() ? 0.0 : r[r.size() / 2];
        };
        const double med = median(bench_rates);
        const double t_ar = dist.time_allreduce(20);  // collective: every process
        const ft_dist::stats cs = dist.take_stats();
        // The time of a step beyond the computation of its slowest process: the communication
        // the step could not hide (that process computing, or waiting, while this one waits).
        std::vector<double> slowest = bench_compute, exposed;
        dist.allreduce_max(slowest.data(), (int) slowest.size());
        for (size_t i = 0; i < slowest.size(); i++) exposed.push_back(std::max(0.0, bench_step[i] - slowest[i]));
        if (lead) {
            printf("| model | type | targets | batch x seq | threads | backward | train tokens/s | peak RSS |\n");
            printf("| %s | %s | %s | %lld x %d | %d | %s | %.1f | %.2f GB |\n", o.model.c_str(), ggml_type_name(m.layers[0].wo->type),
                   targets.c_str(), (long long) tr.seqs_per_step, n, o.n_threads,
                   tr.lora.base_prec == GGML_PREC_INT8 ? "int8" : tr.lora.base_prec == GGML_PREC_BF16 ? "bf16" : "f32", med,
                   peak_rss_gb());
        }
        if (lead && dist.size > 1) {
            // Rank 0's medians over the steps after the first.
            const double step_s = median(bench_step), comm_s = median(bench_comm), exp_s = median(exposed);
            printf("mpi: %d processes x %d threads; gradients all-reduced per step: %.1f KiB in %d buckets (%s)\n"
                   "mpi: step %.1f ms; rank 0 in communication %.2f ms (%.2f%%): issuing and polling %.2f ms, waiting after the "
                   "backward pass %.2f ms, loss all-reduce %.2f ms; beyond the slowest process's computation %.2f ms (%.2f%%)\n"
                   "mpi: a blocking all-reduce of the gradients alone: %.3f ms\n",
                   dist.size, o.n_threads, cs.bytes_per_step / 1024.0, cs.buckets,
                   getenv("GGML_MPI_OVERLAP") && atoi(getenv("GGML_MPI_OVERLAP")) == 0 ? "after the backward pass" : "overlapped",
                   step_s * 1e3, comm_s * 1e3, 100.0 * comm_s / std::max(1e-12, step_s), median(bench_issue) * 1e3,
                   median(bench_wait) * 1e3, median(bench_other) * 1e3, exp_s * 1e3, 100.0 * exp_s / std::max(1e-12, step_s),
                   t_ar * 1e3);
        }
        if (o.out.empty()) return 0;
    }

    // Row N: the loss after the last update, on the batch that would come next.
    double tps = 0;
    const float final_loss = run_group(false, tps);
    st.history.loss.push_back(final_loss);
    st.history.lr.push_back(st.history.lr.empty() ? o.lr : st.history.lr.back());
    st.history.tokens_per_s.push_back((float) tps);
    if (dist.size > 1) {
        // The replicas took the same steps from the same sums: their adapters must be equal.
        uint64_t h = params_hash(tr.oc.get()), h0 = h;
        dist.broadcast(&h0, sizeof(h0));
        double differ = h != h0 ? 1.0 : 0.0;
        dist.allreduce_sum(&differ, 1);
        if (lead && differ > 0) {
            fprintf(stderr, "llama-finetune: warning: the adapters of %g processes differ from rank 0's (rank 0's is written)\n", differ);
        }
    }
    save_outputs(true);
    if (!lead) return 0;
    fprintf(stderr, "llama-finetune: loss %.4f -> %.4f over %lld steps", st.history.loss.front(), final_loss,
            (long long) tr.total_steps);
    if (!st.history.val_loss.empty()) fprintf(stderr, ", validation %.4f -> %.4f", st.history.val_loss.front(), st.history.val_loss.back());
    fprintf(stderr, "; %.1f s, peak RSS %.2f GB; adapter written to %s\n", now_s() - t_start, peak_rss_gb(), o.out.c_str());
    if (n_secondary_failed > 0) fprintf(stderr, "llama-finetune: warning: %d secondary output(s) not written (see above)\n", n_secondary_failed);
    return 0;
}

}  // namespace

int main(int argc, char ** argv) {
    std::unique_ptr<ft_dist> dist = ft_dist_init(argc, argv);
    g_dist = dist.get();
    try {
        const int rc = run(argc, argv, *dist);
        if (rc != 0 && dist->size > 1) dist->abort(rc);
        dist->finalize();
        return rc;
    } catch (const std::exception & e) {
        die(e.what());
    }
}
