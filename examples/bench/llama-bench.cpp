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
#include "common.h"

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

int default_threads() { return llama_context_default_params().n_threads; }

void usage(FILE * out) {
    fprintf(out,
            "usage: llama-bench [options]\n"
            "\n"
            "options:\n"
            "  -h, --help\n"
            "  -r, --repetitions <n>                     number of times to repeat each test (default: 5)\n"
            "  --delay <0...N> (seconds)                 delay between each test (default: 0)\n"
            "  -o, --output <csv|json|jsonl|md|sql>      output format printed to stdout (default: md)\n"
            "  -oe, --output-err <csv|json|jsonl|md|sql> output format printed to stderr (default: none)\n"
            "  -v, --verbose                             verbose output\n"
            "  --progress                                print test progress indicators\n"
            "  --no-warmup                               skip warmup runs before benchmarking\n"
            "  --ceiling <GB/s|auto>                     add a column: tg t/s as a %% of the memory-bandwidth\n"
            "                                            ceiling (GB/s / model size in GB); auto: the read\n"
            "                                            bandwidth measured with the test's threads just\n"
            "                                            before and after each tg test, the higher (default: off)\n"
            "\n"
            "test parameters:\n"
            "  -m, --model <filename>                    (required)\n"
            "  -p, --n-prompt <n>                        (default: 512)\n"
            "  -n, --n-gen <n>                           (default: 128)\n"
            "  -pg <pp,tg>                               (default: )\n"
            "  -d, --n-depth <n>                         (default: 0)\n"
            "  -b, --batch-size <n>                      (default: %d)\n"
            "  -ub, --ubatch-size <n>                    (default: %d)\n"
            "  -ctk, --cache-type-k <t>                  (default: f16; " COMMON_CACHE_TYPE_NAMES ")\n"
            "  -ctv, --cache-type-v <t>                  (default: f16)\n"
            "  -t, --threads <n>                         (default: %d)\n"
            "  -ngl, --n-gpu-layers <n>                  (default: %d; layers on the GPU, if the build has one)\n"
            "  -fa, --flash-attn <0|1>                   (default: 0)\n"
            "  -mmp, --mmap <0|1>                        (default: 1)\n"
            "\n"
            "Multiple values can be given for each parameter by separating them with ','\n"
            "or by specifying the parameter multiple times. Ranges can be given as\n"
            "'first-last' or 'first-last+step' or 'first-last*mult'.\n"
            "The prompt is evaluated in decodes of -b tokens, each in graphs of min(-b, -ub) tokens.\n",
            bench_defaults::n_batch, bench_defaults::n_ubatch, default_threads(), bench_defaults::n_gpu_layers);
}

[[noreturn]] void fail_arg(const std::string & msg) {
    fprintf(stderr, "llama-bench: %s\n(see llama-bench --help)\n", msg.c_str());
    exit(1);
}

std::vector<std::string> split(const std::string & s, char sep) {
    std::vector<std::string> parts;
    size_t start = 0;
    for (;;) {
        const size_t end = s.find(sep, start);
        parts.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
        if (end == std::string::npos) return parts;
        start = end + 1;
    }
}

// One integer at *p (advanced past it); false when there is none or it does not fit an int.
bool read_int(const char *& p, long & x) {
    if (!isdigit((unsigned char) *p) && !(*p == '-' && isdigit((unsigned char) p[1]))) return false;
    char * end = nullptr;
    errno = 0;
    x = strtol(p, &end, 10);
    if (errno == ERANGE || x < INT_MIN || x > INT_MAX) return false;
    p = end;
    return true;
}

// A comma list of integers and ranges (first-last, first-last+step, first-last*mult), each
// value in [lo, hi].
std::vector<int> parse_int_list(const std::string & flag, const std::string & v, int lo, int hi) {
    const auto bad = [&](const std::string & why) -> std::vector<int> {
        fail_arg("invalid value for " + flag + ": '" + v + "' (" + why + ")");
    };
    std::vector<int> out;
    for (const std::string & item : split(v, ',')) {
        const char * p = item.c_str();
        long first = 0, last = 0, step = 1;
        char op = '+';
        if (!read_int(p, first)) return bad("expected integers, comma-separated");
        last = first;
        if (*p == '-') {
            p++;
            if (!read_int(p, last) || last < first) return bad("a range is first-last with first <= last");
            if (*p == '+' || *p == '*') {
                op = *p++;
                if (!read_int(p, step) || step < (op == '+' ? 1 : 2)) return bad("bad range step");
            }
        }
        if (*p != '\0') return bad("expected integers, comma-separated");
        if (first < lo || last > hi) {
            return bad("allowed " + std::to_string(lo) + " .. " + std::to_string(hi));
        }
        if (op == '*' && first < 1) return bad("a multiplied range starts at 1 or more");
        for (long x = first; x <= last; x = op == '+' ? x + step : x * step) {
            if (out.size() >= 4096) return bad("too many values");
            out.push_back((int) x);
        }
    }
    return out;
}

std::vector<bool> parse_bool_list(const std::string & flag, const std::string & v) {
    std::vector<bool> out;
    for (const std::string & s : split(v, ',')) {
        if (s == "1" || s == "on") {
            out.push_back(true);
        } else if (s == "0" || s == "off") {
            out.push_back(false);
        } else {
            fail_arg("invalid value for " + flag + ": '" + s + "' (0 or 1)");
        }
    }
    return out;
}

// -ctk / -ctv: comma-separated cache types, each a run of its own.
std::vector<ggml_type> parse_cache_types(const std::string & flag, const std::string & v) {
    std::vector<ggml_type> out;
    for (const std::string & s : split(v, ',')) {
        ggml_type t;
        if (!common_parse_cache_type(s, &t)) fail_arg("invalid cache type for " + flag + ": '" + s + "' (" COMMON_CACHE_TYPE_NAMES ")");
        out.push_back(t);
    }
    return out;
}

bool parse_format(const std::string & s, bench_format & f) {
    if (s == "md") f = bench_format::md;
    else if (s == "csv") f = bench_format::csv;
    else if (s == "json") f = bench_format::json;
    else if (s == "jsonl") f = bench_format::jsonl;
    else if (s == "sql") f = bench_format::sql;
    else if (s == "none") f = bench_format::none;
    else return false;
    return true;
}

template <class T> void append(std::vector<T> & to, const std::vector<T> & v) { to.insert(to.end(), v.begin(), v.end()); }

// llama.cpp options for hardware and placement this CPU engine does not have.
bool is_unsupported_llama_cpp_option(const std::string & a) {
    static const char * const opts[] = { "--numa", "--prio", "-C", "--cpu-mask", "--cpu-strict", "--poll", "-sm",
                                         "--split-mode", "-mg", "--main-gpu", "-nkvo", "--no-kv-offload", "-ts",
                                         "--tensor-split", "-ot", "--override-tensor", "-embd", "--embeddings", "-dev",
                                         "--device", "-rpc", "--rpc", "-nopo", "--no-op-offload", "-ncmoe",
                                         "--n-cpu-moe", "--list-devices" };
    for (const char * o : opts) {
        if (a == o) return true;
    }
    return false;
}

bench_params parse_args(int argc, char ** argv) {
    bench_params p;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a.rfind("--", 0) == 0) std::replace(a.begin(), a.end(), '_', '-');  // as llama.cpp: --n_prompt works
        auto value = [&]() -> std::string {
            // "-p -r 3" is a forgotten value, not a value "-r" (negative numbers still pass).
            if (i + 1 >= argc || (argv[i + 1][0] == '-' && isalpha((unsigned char) argv[i + 1][1]))) {
                fail_arg("missing value for " + a);
            }
            return argv[++i];
        };
        if (a == "-h" || a == "--help") {
            usage(stdout);
            exit(0);
        } else if (a == "-m" || a == "--model") {
            for (const std::string & m : split(value(), ',')) {
                if (m.empty()) fail_arg("empty model path for " + a);
                p.model.push_back(m);
            }
        } else if (a == "-p" || a == "--n-prompt") {
            append(p.n_prompt, parse_int_list(a, value(), 0, 1 << 22));
        } else if (a == "-n" || a == "--n-gen") {
            append(p.n_gen, parse_int_list(a, value(), 0, 1 << 22));
        } else if (a == "-pg") {
            const std::string v = value();
            const std::vector<int> pg = parse_int_list(a, v, 0, 1 << 22);
            if (pg.size() != 2 || v.find('-') != std::string::npos) fail_arg("invalid value for -pg: '" + v + "' (expected pp,tg)");
            p.n_pg.push_back({ pg[0], pg[1] });
        } else if (a == "-d" || a == "--n-depth") {
            append(p.n_depth, parse_int_list(a, value(), 0, 1 << 22));
        } else if (a == "-b" || a == "--batch-size") {
            append(p.n_batch, parse_int_list(a, value(), 1, 1 << 22));
        } else if (a == "-ub" || a == "--ubatch-size") {
            append(p.n_ubatch, parse_int_list(a, value(), 1, 1 << 22));
        } else if (a == "-ctk" || a == "--cache-type-k") {
            append(p.type_k, parse_cache_types(a, value()));
        } else if (a == "-ctv" || a == "--cache-type-v") {
            append(p.type_v, parse_cache_types(a, value()));
        } else if (a == "-t" || a == "--threads") {
            append(p.n_threads, parse_int_list(a, value(), 1, 1024));
        } else if (a == "-ngl" || a == "--n-gpu-layers") {
            append(p.n_gpu_layers, parse_int_list(a, value(), -1, INT_MAX));
        } else if (a == "-fa" || a == "--flash-attn") {
            // llama.cpp's newer on|off|auto too: auto resolves to off on an engine without it.
            for (const std::string & s : split(value(), ',')) p.flash_attn.push_back(s != "auto" && parse_bool_list(a, s)[0]);
        } else if (a == "-mmp" || a == "--mmap") {
            append(p.use_mmap, parse_bool_list(a, value()));
        } else if (a == "-r" || a == "--repetitions") {
            const std::vector<int> r = parse_int_list(a, value(), 1, 1000000);
            if (r.size() != 1) fail_arg("-r takes one value");
            p.reps = r[0];
        } else if (a == "--delay") {
            const std::vector<int> d = parse_int_list(a, value(), 0, 3600);
            if (d.size() != 1) fail_arg("--delay takes one value");
            p.delay = d[0];
        } else if (a == "-o" || a == "--output" || a == "-oe" || a == "--output-err") {
            const std::string v = value();
            if (!parse_format(v, a == "-o" || a == "--output" ? p.output : p.output_err)) {
                fail_arg("invalid value for " + a + ": '" + v + "' (md, csv, json, jsonl, sql)");
            }
        } else if (a == "-v" || a == "--verbose") {
            p.verbose = true;
        } else if (a == "--progress") {
            p.progress = true;
        } else if (a == "--no-warmup") {
            p.no_warmup = true;
        } else if (a == "--ceiling") {
            const std::string v = value();
            p.ceiling_auto = v == "auto";
            char * end = nullptr;
            p.ceiling_gbps = p.ceiling_auto ? 0 : strtod(v.c_str(), &end);
            if (!p.ceiling_auto && (v.empty() || *end != '\0' || !(p.ceiling_gbps > 0) || p.ceiling_gbps > 1e6)) {
                fail_arg("invalid value for --ceiling: '" + v + "' (memory bandwidth in GB/s, > 0, or auto)");
            }
        } else if (is_unsupported_llama_cpp_option(a)) {
            fail_arg("option " + a + " of llama.cpp's llama-bench is not supported here (a CPU-only engine)");
        } else {
            fail_arg("unknown argument: " + a);
        }
    }
    if (p.model.empty()) fail_arg("no model given (-m FILE)");
    if (p.n_prompt.empty()) p.n_prompt = { 512 };
    if (p.n_gen.empty()) p.n_gen = { 128 };
    if (p.n_depth.empty()) p.n_depth = { 0 };
    if (p.n_batch.empty()) p.n_batch = { bench_defaults::n_batch };
    if (p.n_ubatch.empty()) p.n_ubatch = { bench_defaults::n_ubatch };
    if (p.type_k.empty()) p.type_k = { bench_defaults::type_k };
    if (p.type_v.empty()) p.type_v = { bench_defaults::type_v };
    if (p.n_threads.empty()) p.n_threads = { default_threads() };
    if (p.n_gpu_layers.empty()) p.n_gpu_layers = { bench_defaults::n_gpu_layers };
    if (p.flash_attn.empty()) p.flash_attn = { bench_defaults::flash_attn };
    if (p.use_mmap.empty()) p.use_mmap = { bench_defaults::use_mmap };
    return p;
}

// The tests in llama.cpp's order: model-level parameters outermost so that a model is loaded
// once; for each combination the pp tests, then tg, then pg.
std::vector<bench_instance> enumerate(const bench_params & p) {
    std::vector<bench_instance> out;
    // clang-format off
    for (const std::string & m : p.model)
    for (int ngl : p.n_gpu_layers)
    for (bool mmp : p.use_mmap)
    for (int nb : p.n_batch)
    for (int nub : p.n_ubatch)
    for (ggml_type tk : p.type_k)
    for (ggml_type tv : p.type_v)
    for (bool fa : p.flash_attn)
    for (int nt : p.n_threads)
    for (int nd : p.n_depth) {
        bench_instance base;
        base.model = m; base.n_gpu_layers = ngl; base.use_mmap = mmp; base.n_batch = nb; base.n_ubatch = nub;
        base.type_k = tk; base.type_v = tv; base.flash_attn = fa; base.n_threads = nt; base.n_depth = nd;
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
    }
    // clang-format on
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

int run(const bench_params & params) {
    std::vector<std::unique_ptr<bench_printer>> printers;
    if (auto pr = bench_make_printer(params.output, stdout)) printers.push_back(std::move(pr));
    if (auto pr = bench_make_printer(params.output_err, stderr)) printers.push_back(std::move(pr));
    for (auto & pr : printers) pr->header(params);
    fflush(stdout);

    const std::vector<bench_instance> tests = enumerate(params);
    model_ptr model;
    const bench_instance * loaded = nullptr;
    for (size_t ti = 0; ti < tests.size(); ti++) {
        const bench_instance & inst = tests[ti];
        const auto progress = [&](const std::string & what) {
            if (params.progress) fprintf(stderr, "llama-bench: benchmark %zu/%zu: %s\n", ti + 1, tests.size(), what.c_str());
        };
        progress("starting");
        if (!model || inst.model != loaded->model || inst.use_mmap != loaded->use_mmap || inst.n_gpu_layers != loaded->n_gpu_layers) {
            model.reset();
            llama_model_params mp = llama_model_default_params();
            mp.use_mmap = inst.use_mmap;
            mp.n_gpu_layers = inst.n_gpu_layers;
            model.reset(llama_model_load_from_file(inst.model.c_str(), mp));
            if (!model) throw std::runtime_error("failed to load model '" + inst.model + "'");
            if (llama_vocab_n_tokens(llama_model_get_vocab(model.get())) <= 0) {
                throw std::runtime_error("model '" + inst.model + "' has no vocabulary to draw tokens from");
            }
            loaded = &inst;
        }

        llama_context_params cp = llama_context_default_params();
        cp.n_ctx = (uint32_t) (inst.n_depth + inst.n_prompt + inst.n_gen);
        cp.n_batch = (uint32_t) inst.n_batch;
        cp.n_ubatch = (uint32_t) inst.n_ubatch;
        cp.n_threads = inst.n_threads;
        cp.n_threads_batch = inst.n_threads;
        cp.no_perf = !params.verbose;  // timings for llama_perf_context_print
        cp.type_k = inst.type_k;
        cp.flash_attn = inst.flash_attn;
        cp.type_v = inst.type_v;
        ctx_ptr ctx(llama_init_from_model(model.get(), cp));
        if (!ctx) throw std::runtime_error("failed to create a context for model '" + inst.model + "'");

        bench_result r;
        r.inst = inst;
        char desc[256];
        llama_model_desc(model.get(), desc, sizeof(desc));
        r.model_type = desc;
        r.model_size = llama_model_size(model.get());
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
    const bench_params params = parse_args(argc, argv);
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
