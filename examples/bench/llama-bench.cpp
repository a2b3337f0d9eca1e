// llama-bench: prompt processing (pp) and text generation (tg) speed, with llama.cpp's
// llama-bench command line and output, so that the same command runs against both engines.
//
// Each combination of the list parameters is one test. A model is loaded once for the tests
// that use it; each test gets its own context of depth + n_prompt + n_gen tokens, a warm-up run,
// then -r repetitions: clear the KV cache, fill it to the depth (untimed), time the prompt
// decode and / or the single-token decodes of random tokens. Reported: mean and sample standard
// deviation of tokens/s over the repetitions.
#include "bench.h"
#include "llama.h"
#include "arg.h"
#include "common.h"
#include "gguf.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <stdexcept>
#include <thread>

namespace {

// The weight bytes a generated token reads (the ceiling's divisor): model_size, less, in a mixture
// of experts, the share of the stacked experts ("*_exps" tensors) a token does not choose (of
// expert_count, expert_used_count are read), and less the token embeddings where the model has
// its own output matrix (a token reads one row of them; tied, they are the output's product and
// read whole). In the IQ files of a 1.1B model they are 5.5-8% of the file.
uint64_t token_bytes(const std::string & path, uint64_t model_size) {
    gguf_init_params gp = { true, nullptr, false };
    gguf_context * g = gguf_init_from_file(path.c_str(), gp);
    if (!g) return model_size;
    uint64_t exps = 0, embd = 0;
    bool output = false;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); i++) {
        const char * name = gguf_get_tensor_name(g, i);
        if (strstr(name, "_exps.")) exps += gguf_get_tensor_size(g, i);
        if (!strcmp(name, "token_embd.weight")) embd = gguf_get_tensor_size(g, i);
        if (!strcmp(name, "output.weight")) output = true;
    }
    double used = 1.0;  // the share of the experts a token reads; all where the file names none
    const int64_t ak = gguf_find_key(g, "general.architecture");
    if (ak >= 0 && gguf_get_kv_type(g, ak) == GGUF_TYPE_STRING) {
        const std::string arch = gguf_get_val_str(g, ak);
        const int64_t ne = gguf_find_key(g, (arch + ".expert_count").c_str()), nu = gguf_find_key(g, (arch + ".expert_used_count").c_str());
        if (ne >= 0 && nu >= 0 && gguf_get_kv_type(g, ne) == GGUF_TYPE_UINT32 && gguf_get_kv_type(g, nu) == GGUF_TYPE_UINT32 &&
            gguf_get_val_u32(g, ne) > 0) {
            used = std::min(1.0, (double) gguf_get_val_u32(g, nu) / gguf_get_val_u32(g, ne));
        }
    }
    gguf_free(g);
    const uint64_t skipped = (uint64_t) ((double) exps * (1.0 - used)) + (output ? embd : 0);
    return skipped < model_size ? model_size - skipped : model_size;
}

int default_threads() { return llama_context_default_params().n_threads; }

// The order of the test dimensions, outermost first, as llama.cpp's llama-bench nests them (the
// model-level ones outside, so that a model is loaded once for the tests that use it); an option
// added to llama-bench in common/arg.cpp's table and not named here varies innermost.
const char * const kDimensionOrder[] = {"-m", "-ngl", "-sm", "-mg", "-mmp", "-b", "-ub", "-ctk", "-ctv", "-nkvo", "-fa", "-t", "-d"};

bench_format format_of(const std::string & s) {
    if (s == "csv") return bench_format::csv;
    if (s == "json") return bench_format::json;
    if (s == "jsonl") return bench_format::jsonl;
    if (s == "sql") return bench_format::sql;
    if (s == "none") return bench_format::none;
    return bench_format::md;
}

[[noreturn]] void fail_arg(const std::string & msg) {
    fprintf(stderr, "llama-bench: %s\n(see llama-bench --help)\n", msg.c_str());
    exit(1);
}

// The options come from common/arg.cpp's table (LLAMA_EXAMPLE_BENCH): each option with a value
// is a list of values, a test dimension.
bench_params parse_args(int argc, char ** argv) {
    bench_params p;
    common_params & b = p.base;
    b.n_batch = bench_defaults::n_batch;
    b.n_ubatch = bench_defaults::n_ubatch;
    b.n_gpu_layers = bench_defaults::n_gpu_layers;
    b.cache_type_k = bench_defaults::type_k;
    b.cache_type_v = bench_defaults::type_v;
    b.flash_attn = bench_defaults::flash_attn;
    b.use_mmap = bench_defaults::use_mmap;
    b.n_threads = default_threads();
    std::vector<common_arg_list> lists;
    if (!common_params_parse_lists(argc, argv, b, LLAMA_EXAMPLE_BENCH, lists)) exit(1);
    for (common_arg_list & l : lists) {
        const std::string & key = l.arg->args[0];
        if (key == "-p" || key == "-n") {  // the test shapes, not dimensions
            for (const std::string & v : l.values) (key == "-p" ? p.n_prompt : p.n_gen).push_back(atoi(v.c_str()));
            continue;
        }
        p.dims.push_back(std::move(l));
    }
    const auto rank = [](const common_arg_list & l) {
        const auto * end = std::end(kDimensionOrder);
        return (size_t) (std::find(std::begin(kDimensionOrder), end, l.arg->args[0]) - std::begin(kDimensionOrder));
    };
    std::stable_sort(p.dims.begin(), p.dims.end(), [&](const common_arg_list & x, const common_arg_list & y) { return rank(x) < rank(y); });
    if (b.model.empty() && std::none_of(p.dims.begin(), p.dims.end(), [](const common_arg_list & l) { return l.arg->args[0] == "-m"; })) {
        fail_arg("no model given (-m FILE)");
    }
    if (p.n_prompt.empty()) p.n_prompt = { b.bench_n_prompt };
    if (p.n_gen.empty()) p.n_gen = { b.bench_n_gen };
    for (const auto & pg : b.bench_pg) p.n_pg.push_back(pg);
    p.reps = b.bench_reps;
    p.delay = b.bench_delay;
    p.verbose = b.verbosity > 1;
    p.progress = b.bench_progress;
    p.no_warmup = b.bench_no_warmup;
    p.ceiling_auto = b.bench_ceiling == "auto";
    p.ceiling_gbps = b.bench_ceiling.empty() || p.ceiling_auto ? 0 : atof(b.bench_ceiling.c_str());
    p.output = format_of(b.bench_output);
    p.output_err = format_of(b.bench_output_err);
    return p;
}

template <class T> void add_distinct(std::vector<T> & v, const T & x) {
    if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

// Every combination of the dimensions' values (the first dimension outermost), each applied to
// the options as given alone, then for each the pp tests, the tg tests and the pg tests.
std::vector<bench_instance> enumerate(bench_params & p) {
    std::vector<bench_instance> out;
    std::vector<size_t> at(p.dims.size(), 0);
    for (;;) {
        common_params cp = p.base;
        for (size_t d = 0; d < p.dims.size(); d++) common_arg_apply(*p.dims[d].arg, cp, p.dims[d].name, p.dims[d].values[at[d]]);
        bench_instance base;
        base.params = cp;
        base.model = cp.model;
        base.n_gpu_layers = cp.n_gpu_layers;
        base.split_mode = cp.split_mode;
        base.main_gpu = cp.main_gpu;
        base.no_kv_offload = cp.no_kv_offload;
        base.use_mmap = cp.use_mmap;
        base.n_batch = cp.n_batch;
        base.n_ubatch = cp.n_ubatch;
        base.type_k = cp.cache_type_k;
        base.type_v = cp.cache_type_v;
        base.flash_attn = cp.flash_attn;
        base.n_threads = cp.n_threads;
        base.n_depth = cp.bench_n_depth;
        // what the markdown table shows a column for: the values the tests take
        add_distinct(p.n_batch, base.n_batch);
        add_distinct(p.n_ubatch, base.n_ubatch);
        add_distinct(p.type_k, base.type_k);
        add_distinct(p.type_v, base.type_v);
        add_distinct(p.flash_attn, base.flash_attn);
        add_distinct(p.use_mmap, base.use_mmap);
        std::vector<std::pair<int, int>> shapes;
        for (int n : p.n_prompt) if (n > 0) shapes.push_back({ n, 0 });
        for (int n : p.n_gen) if (n > 0) shapes.push_back({ 0, n });
        for (const auto & pg : p.n_pg) if (pg.first > 0 || pg.second > 0) shapes.push_back(pg);
        for (const auto & s : shapes) {
            bench_instance t = base;
            t.n_prompt = s.first;
            t.n_gen = s.second;
            out.push_back(t);
        }
        // the next combination, the innermost dimension fastest
        size_t d = p.dims.size();
        while (d > 0 && ++at[d - 1] == p.dims[d - 1].values.size()) at[--d] = 0;
        if (d == 0) break;
    }
    return out;
}

// ---- running -------------------------------------------------------------------------------
struct model_free { void operator()(llama_model * m) const { llama_model_free(m); } };
struct ctx_free { void operator()(llama_context * c) const { llama_free(c); } };
using model_ptr = std::unique_ptr<llama_model, model_free>;
using ctx_ptr = std::unique_ptr<llama_context, ctx_free>;

std::mt19937 g_rng(1234);  // fixed: the same token streams on every run

llama_token random_token(const llama_vocab * vocab) {
    return (llama_token) (g_rng() % (uint32_t) llama_vocab_n_tokens(vocab));
}

// n_prompt tokens in decodes of n_batch (BOS first when the model wants one, as a prompt would).
void run_prompt(llama_context * ctx, int n_prompt, int n_batch) {
    const llama_vocab * vocab = llama_model_get_vocab(llama_get_model(ctx));
    std::vector<llama_token> tokens((size_t) std::min(n_prompt, n_batch));
    for (int done = 0; done < n_prompt;) {
        const int n = std::min(n_prompt - done, n_batch);
        for (int i = 0; i < n; i++) tokens[i] = random_token(vocab);
        if (done == 0 && llama_vocab_get_add_bos(vocab) && llama_vocab_bos(vocab) != LLAMA_TOKEN_NULL) {
            tokens[0] = llama_vocab_bos(vocab);
        }
        const int rc = llama_decode(ctx, llama_batch_get_one(tokens.data(), n));
        if (rc != 0) throw std::runtime_error("failed to decode a prompt batch (llama_decode returned " + std::to_string(rc) + ")");
        done += n;
    }
}

// n_gen single-token decodes, as generation does (sampling left out: it is not the engine's speed).
void run_gen(llama_context * ctx, int n_gen) {
    const llama_vocab * vocab = llama_model_get_vocab(llama_get_model(ctx));
    llama_token t = llama_vocab_get_add_bos(vocab) && llama_vocab_bos(vocab) != LLAMA_TOKEN_NULL ? llama_vocab_bos(vocab)
                                                                                                   : random_token(vocab);
    for (int i = 0; i < n_gen; i++) {
        const int rc = llama_decode(ctx, llama_batch_get_one(&t, 1));
        if (rc != 0) throw std::runtime_error("failed to decode a generated token (llama_decode returned " + std::to_string(rc) + ")");
        t = random_token(vocab);
    }
}

uint64_t now_ns() {
    return (uint64_t) std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string utc_now() {
    const time_t t = time(nullptr);
    struct tm tm_utc;
    gmtime_r(&t, &tm_utc);
    char buf[32];
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm_utc);
    return buf;
}

bool g_verbose = false;

// Errors always reach stderr (a model that fails to load says why); the rest only with -v.
void log_callback(enum ggml_log_level level, const char * text, void *) {
    if (g_verbose || level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int run(bench_params & params) {
    std::vector<std::unique_ptr<bench_printer>> printers;
    if (auto pr = bench_make_printer(params.output, stdout)) printers.push_back(std::move(pr));
    if (auto pr = bench_make_printer(params.output_err, stderr)) printers.push_back(std::move(pr));
    const std::vector<bench_instance> tests = enumerate(params);
    for (auto & pr : printers) pr->header(params);
    fflush(stdout);

    model_ptr model;
    const bench_instance * loaded = nullptr;
    llama_model_params loaded_mp = llama_model_default_params();
    for (size_t ti = 0; ti < tests.size(); ti++) {
        const bench_instance & inst = tests[ti];
        const auto progress = [&](const std::string & what) {
            if (params.progress) fprintf(stderr, "llama-bench: benchmark %zu/%zu: %s\n", ti + 1, tests.size(), what.c_str());
        };
        progress("starting");
        const llama_model_params mp = common_model_params_to_llama(inst.params);
        if (!model || inst.model != loaded->model || mp.use_mmap != loaded_mp.use_mmap || mp.n_gpu_layers != loaded_mp.n_gpu_layers ||
            mp.split_mode != loaded_mp.split_mode || mp.main_gpu != loaded_mp.main_gpu || mp.use_mlock != loaded_mp.use_mlock ||
            mp.use_repack != loaded_mp.use_repack) {
            model.reset();
            model.reset(llama_model_load_from_file(inst.model.c_str(), mp));
            if (!model) throw std::runtime_error("failed to load model '" + inst.model + "'");
            if (llama_vocab_n_tokens(llama_model_get_vocab(model.get())) <= 0) {
                throw std::runtime_error("model '" + inst.model + "' has no vocabulary to draw tokens from");
            }
            loaded = &inst;
            loaded_mp = mp;
        }

        llama_context_params cp = common_context_params_to_llama(inst.params);
        cp.n_ctx = (uint32_t) (inst.n_depth + inst.n_prompt + inst.n_gen);
        cp.n_threads_batch = cp.n_threads;  // llama-bench's -t is both
        cp.no_perf = !params.verbose;  // timings for llama_perf_context_print
        ctx_ptr ctx(llama_init_from_model(model.get(), cp));
        if (!ctx) throw std::runtime_error("failed to create a context for model '" + inst.model + "'");

        bench_result r;
        r.inst = inst;
        char desc[256];
        llama_model_desc(model.get(), desc, sizeof(desc));
        r.model_type = desc;
        r.model_size = llama_model_size(model.get());
        r.token_bytes = token_bytes(inst.model, r.model_size);
        r.model_n_params = llama_model_n_params(model.get());
        r.test_time = utc_now();
        r.ceiling_gbps = params.ceiling_gbps;
        r.ceiling_fields = params.ceiling();

        llama_kv_self_clear(ctx.get());
        if (params.delay > 0) std::this_thread::sleep_for(std::chrono::seconds(params.delay));

        // Warm-up: pages of the weights touched, buffers and thread pool up, before any timing.
        if (!params.no_warmup) {
            if (inst.n_prompt > 0) {
                progress("warmup prompt run");
                run_prompt(ctx.get(), inst.n_prompt, inst.n_batch);
            }
            if (inst.n_gen > 0) {
                progress("warmup generation run");
                run_gen(ctx.get(), 1);
            }
        }

        // --ceiling auto: a plain tg test measures the bandwidth beside its own repetitions.
        std::unique_ptr<bench_membw> membw;
        if (params.ceiling_auto && inst.n_prompt == 0 && inst.n_gen > 0) {
            progress("read bandwidth");
            // 1 GiB, far beyond any cache; tests shrink it (LLAMA_BENCH_MEMBW_MIB) to stay quick.
            const char * mib = getenv("LLAMA_BENCH_MEMBW_MIB");
            const size_t bytes = (size_t) (mib && atoi(mib) > 0 ? atoi(mib) : 1024) << 20;
            membw.reset(new bench_membw(inst.n_threads, bytes));
            r.ceiling_gbps = membw->measure_gbps();
        }
        for (int rep = 0; rep < params.reps; rep++) {
            const std::string of = " " + std::to_string(rep + 1) + "/" + std::to_string(params.reps);
            llama_kv_self_clear(ctx.get());
            if (inst.n_depth > 0) {
                progress("depth run" + of);
                run_prompt(ctx.get(), inst.n_depth, inst.n_batch);
            }
            const uint64_t t0 = now_ns();
            if (inst.n_prompt > 0) {
                progress("prompt run" + of);
                run_prompt(ctx.get(), inst.n_prompt, inst.n_batch);
            }
            if (inst.n_gen > 0) {
                progress("generation run" + of);
                run_gen(ctx.get(), inst.n_gen);
            }
            r.samples_ns.push_back(now_ns() - t0);
        }
        if (membw) r.ceiling_gbps = std::max(r.ceiling_gbps, membw->measure_gbps());
        membw.reset();

        for (auto & pr : printers) pr->row(r);
        fflush(stdout);
        fflush(stderr);
        if (params.verbose) llama_perf_context_print(ctx.get());
    }
    for (auto & pr : printers) pr->footer();
    return 0;
}

}  // namespace

int main(int argc, char ** argv) {
    bench_params params = parse_args(argc, argv);
    g_verbose = params.verbose;
    llama_log_set(log_callback, nullptr);
    llama_backend_init();
    int rc = 1;
    try {
        rc = run(params);
    } catch (const std::exception & e) {
        fflush(stdout);
        fprintf(stderr, "llama-bench: error: %s\n", e.what());
    }
    llama_backend_free();
    return rc;
}
