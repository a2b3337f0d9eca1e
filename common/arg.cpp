// arg.cpp - the table of the programs' options (see arg.h) and the parser, --help and usage
// built from it.
#include "arg.h"

#include "llama-hf.h"  // the LoRA target names
#include "llama-grammar.h"  // --grammar is checked when given
#ifdef LLAMA_JSON_SCHEMA
#include "json-schema-to-grammar.h"
#endif

#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

#ifndef LLAMA_ENGINE_VERSION
#define LLAMA_ENGINE_VERSION "0.1.0"
#endif
#ifndef LLAMA_BUILD_COMPILER
#define LLAMA_BUILD_COMPILER "unknown compiler"
#endif
#ifndef LLAMA_BUILD_TARGET
#define LLAMA_BUILD_TARGET "unknown target"
#endif
#ifndef LLAMA_BUILD_TYPE
#define LLAMA_BUILD_TYPE ""
#endif

namespace {

using E = llama_example;

// The programs that take the model, context and placement options, and those that generate.
const std::initializer_list<E> INFER = {LLAMA_EXAMPLE_MAIN, LLAMA_EXAMPLE_PERPLEXITY, LLAMA_EXAMPLE_EMBEDDING, LLAMA_EXAMPLE_IMATRIX};
// ... and llama-bench, where each takes a list of values (a test per value)
const std::initializer_list<E> INFER_BENCH = {LLAMA_EXAMPLE_MAIN, LLAMA_EXAMPLE_PERPLEXITY, LLAMA_EXAMPLE_BENCH, LLAMA_EXAMPLE_EMBEDDING,
                                              LLAMA_EXAMPLE_IMATRIX};
const std::initializer_list<E> INFER_LOGITS_BENCH = {LLAMA_EXAMPLE_MAIN, LLAMA_EXAMPLE_PERPLEXITY, LLAMA_EXAMPLE_LOGITS, LLAMA_EXAMPLE_BENCH,
                                                     LLAMA_EXAMPLE_EMBEDDING, LLAMA_EXAMPLE_IMATRIX};
// the programs that apply LoRA adapters (llama-export-lora merges them)
const std::initializer_list<E> LORA = {LLAMA_EXAMPLE_MAIN, LLAMA_EXAMPLE_PERPLEXITY, LLAMA_EXAMPLE_LOGITS, LLAMA_EXAMPLE_EXPORT_LORA,
                                       LLAMA_EXAMPLE_EMBEDDING};

// Why an option of llama.cpp is refused, by feature.
const char * const NO_PINNING = "threads are not pinned to CPUs, nor given priorities or polling";
[[maybe_unused]] const char * const NO_JSON_SCHEMA = "this build has no JSON schema support (nlohmann-json was not found when it was configured)";
const char * const NO_DOWNLOAD = "models are not downloaded: give a local GGUF file with -m";
const char * const NO_LOG_OPTS = "the log goes to standard error without prefixes, colors or timestamps";
const char * const ONE_SEQUENCE = "this program decodes its own sequences (llama-batched, llama-batched-bench and llama-parallel take -np)";

common_arg make(std::vector<std::string> names, const char * hint, common_arg::value_kind kind, std::string help) {
    common_arg a;
    a.args = std::move(names);
    a.value_hint = hint;
    a.kind = kind;
    a.help = std::move(help);
    return a;
}

common_arg flag(std::vector<std::string> names, std::string help, std::function<void(common_params &)> f) {
    common_arg a = make(std::move(names), nullptr, common_arg::NONE, std::move(help));
    a.on_flag = std::move(f);
    return a;
}

common_arg integer(std::vector<std::string> names, const char * hint, double lo, double hi, std::string help,
                   std::function<void(common_params &, int64_t)> f) {
    common_arg a = make(std::move(names), hint, common_arg::INT, std::move(help));
    a.lo = lo;
    a.hi = hi;
    a.on_int = std::move(f);
    return a;
}

common_arg number(std::vector<std::string> names, const char * hint, double lo, double hi, std::string help,
                  std::function<void(common_params &, double)> f) {
    common_arg a = make(std::move(names), hint, common_arg::FLOAT, std::move(help));
    a.lo = lo;
    a.hi = hi;
    a.on_float = std::move(f);
    return a;
}

common_arg text(std::vector<std::string> names, const char * hint, std::string help,
                std::function<void(common_params &, const std::string &)> f) {
    common_arg a = make(std::move(names), hint, common_arg::STRING, std::move(help));
    a.on_string = std::move(f);
    return a;
}

// An option of llama.cpp this engine refuses, with the reason (value_hint: whether it takes a value).
common_arg unsupported(std::vector<std::string> names, const char * hint, const char * why) {
    common_arg a = make(std::move(names), hint, hint ? common_arg::STRING : common_arg::NONE, std::string("not supported: ") + why);
    a.unsupported = why;
    return a;
}

std::vector<std::string> split_commas(const std::string & s) {
    std::vector<std::string> parts;
    size_t start = 0;
    for (;;) {
        const size_t end = s.find(',', start);
        parts.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
        if (end == std::string::npos) return parts;
        start = end + 1;
    }
}

[[noreturn]] void throw_arg(const std::string & msg) { throw std::invalid_argument(msg); }

// A value its option does not take: "invalid value for <the flag as given>: <what>".
struct bad_value : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};
[[noreturn]] void throw_value(const std::string & what) { throw bad_value(what); }

ggml_type cache_type(const std::string & v) {
    ggml_type t;
    if (!common_parse_cache_type(v, &t)) throw_value("'" + v + "' (" + common_cache_type_names() + ")");
    return t;
}

// A --chat-template value llama_chat_apply_template formats (as llama.cpp refuses one it cannot).
std::string checked_chat_template(const std::string & t) {
    if (llama_chat_apply_template(t.c_str(), nullptr, 0, false, nullptr, 0) < 0) {
        const char * names[16];
        const int32_t n = llama_chat_builtin_templates(names, 16);
        std::string list;
        for (int32_t i = 0; i < n && i < 16; i++) list += (list.empty() ? "" : ", ") + std::string(names[i]);
        throw_value("the chat template is none of the supported formats (" + list + ", or a template text of one of them)");
    }
    return t;
}

// A grammar that parses (from its rule root), or the parser's message.
std::string checked_grammar(const std::string & g) {
    std::string err;
    if (!g.empty() && !llama_gbnf_parse(g, "root", &err)) throw_value("the grammar does not parse: " + err);
    return g;
}

std::string read_text_file(const std::string & path, const std::string & what) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw_arg("cannot read the " + what + " '" + path + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::vector<common_arg> make_table() {
    std::vector<common_arg> t;
    auto add = [&](common_arg a) -> common_arg & {
        t.push_back(std::move(a));
        return t.back();
    };
    // A sampling option: llama-cli's; llama-perplexity and llama-imatrix take it as llama.cpp's do, to no effect.
    auto add_sampling = [&](common_arg a) -> common_arg & {
        common_arg & r = add(std::move(a));
        return r.set_examples({LLAMA_EXAMPLE_MAIN}).set_no_effect({LLAMA_EXAMPLE_PERPLEXITY, LLAMA_EXAMPLE_IMATRIX}).set_sparam();
    };
    const std::initializer_list<E> ALL = {LLAMA_EXAMPLE_MAIN, LLAMA_EXAMPLE_PERPLEXITY, LLAMA_EXAMPLE_TOKENIZE, LLAMA_EXAMPLE_LOGITS,
                                          LLAMA_EXAMPLE_BENCH, LLAMA_EXAMPLE_EXPORT_LORA, LLAMA_EXAMPLE_FINETUNE, LLAMA_EXAMPLE_EMBEDDING,
                                          LLAMA_EXAMPLE_IMATRIX};

    // ---- common params ----
    add(flag({"-h", "--help", "--usage"}, "print usage and exit", nullptr)).set_examples(ALL);
    add(flag({"--version"}, "show version and build info", [](common_params & p) { p.print_version = true; })).set_examples(INFER);
    add(flag({"--completion-bash"}, "print a bash completion script for the program's options: source it from ~/.bashrc",
             [](common_params & p) { p.completion_bash = true; })).set_examples(INFER);
    add(flag({"--verbose-prompt"}, "print the prompt's tokens (id -> piece) before generating",
             [](common_params & p) { p.verbose_prompt = true; })).set_examples(INFER);
    add(flag({"--no-display-prompt"}, "do not print the prompt, only what is generated",
             [](common_params & p) { p.display_prompt = false; })).set_examples({LLAMA_EXAMPLE_MAIN});
    add(flag({"--display-prompt"}, "print the prompt (default)", [](common_params & p) { p.display_prompt = true; }))
        .set_examples({LLAMA_EXAMPLE_MAIN});
    {
        common_arg a = flag({"-co", "--color"}, "color the prompt (yellow) and the user's input (green); [on|off|auto] as "
                                                "llama.cpp's later versions (bare: on)", nullptr);
        a.kind = common_arg::OPTIONAL_CHOICE;
        a.choices = {"on", "off", "auto"};
        a.on_string = [](common_params & p, const std::string & v) {
            p.use_color = v.empty() || v == "on" || (v == "auto" && isatty(fileno(stdout)));
        };
        add(a).set_examples({LLAMA_EXAMPLE_MAIN});
    }
    add(integer({"-t", "--threads"}, "N", 1, 1024, "threads (default: all cores)", [](common_params & p, int64_t v) { p.n_threads = (int32_t) v; }))
        .set_examples(INFER_LOGITS_BENCH).set_env("LLAMA_ARG_THREADS");
    t.back().examples.insert(LLAMA_EXAMPLE_EXPORT_LORA);
    t.back().examples.insert(LLAMA_EXAMPLE_FINETUNE);
    add(integer({"-tb", "--threads-batch"}, "N", -1, 1024, "threads for prompts and batches (default, or -1: as -t)",
                [](common_params & p, int64_t v) {
                    if (v == 0) throw_value("0 (-1: as -t, or 1 .. 1024)");
                    p.n_threads_batch = (int32_t) v;
                })).set_examples(INFER);
    for (const auto & names : std::vector<std::vector<std::string>>{{"-C", "--cpu-mask"}, {"-Cr", "--cpu-range"}, {"--prio"}, {"--poll"},
                                                                    {"-Cb", "--cpu-mask-batch"}, {"-Crb", "--cpu-range-batch"},
                                                                    {"--prio-batch"}, {"--poll-batch"}}) {
        add(unsupported(names, "V", NO_PINNING)).set_examples(INFER_BENCH);
    }
    add(unsupported({"--cpu-strict"}, "0|1", NO_PINNING)).set_examples(INFER_BENCH);
    add(unsupported({"--cpu-strict-batch"}, "0|1", NO_PINNING)).set_examples(INFER);
    add(integer({"-c", "--ctx-size"}, "N", 0, 1 << 24, "size of the prompt context (default: the program's; 0: the model's)",
                [](common_params & p, int64_t v) { p.n_ctx = (int32_t) v; })).set_examples(INFER).set_env("LLAMA_ARG_CTX_SIZE");
    add(integer({"-n", "--predict", "--n-predict"}, "N", -1, INT32_MAX, "tokens to generate (-1: until the model ends; default -1); per "
                "turn in interactive and chat mode", [](common_params & p, int64_t v) { p.n_predict = (int32_t) v; }))
        .set_examples({LLAMA_EXAMPLE_MAIN}).set_no_effect({LLAMA_EXAMPLE_PERPLEXITY}).set_env("LLAMA_ARG_N_PREDICT");
    add(integer({"-b", "--batch-size"}, "N", 1, 1 << 24, "tokens per llama_decode call (default: the program's)",
                [](common_params & p, int64_t v) { p.n_batch = (int32_t) v; })).set_examples(INFER_BENCH).set_env("LLAMA_ARG_BATCH");
    add(integer({"-ub", "--ubatch-size"}, "N", 1, 1 << 20, "most tokens per graph (default 512)",
                [](common_params & p, int64_t v) { p.n_ubatch = (int32_t) v; })).set_examples(INFER_BENCH).set_env("LLAMA_ARG_UBATCH");
    add(integer({"--keep"}, "N", -1, INT32_MAX, "prompt tokens kept when the context shifts (default 0; -1: all)",
                [](common_params & p, int64_t v) { p.n_keep = (int32_t) v; })).set_examples({LLAMA_EXAMPLE_MAIN})
        .set_no_effect({LLAMA_EXAMPLE_PERPLEXITY});
    add(flag({"--no-context-shift"}, "stop generating when the context is full instead of shifting it (perplexity: chunks "
             "never shift)", [](common_params & p) { p.ctx_shift = false; })).set_examples(INFER).set_env("LLAMA_ARG_NO_CONTEXT_SHIFT");
    add(integer({"--chunks"}, "N", -1, INT32_MAX, "evaluate at most N chunks (default -1: all)",
                [](common_params & p, int64_t v) {
                    if (v == 0) throw_arg("--chunks must be at least 1 (or -1: all)");
                    p.n_chunks = (int32_t) v;
                })).set_examples({LLAMA_EXAMPLE_PERPLEXITY, LLAMA_EXAMPLE_IMATRIX});
    {
        common_arg a = flag({"-fa", "--flash-attn"}, "fused attention reading the cache as stored, less memory; [on|off|auto] "
                                                     "(bare: on, as llama.cpp had it; auto: off)", nullptr);
        a.kind = common_arg::OPTIONAL_CHOICE;
        a.choices = {"on", "off", "auto", "enabled", "disabled", "1", "0", "-1"};
        a.on_string = [](common_params & p, const std::string & v) { p.flash_attn = v.empty() || v == "on" || v == "enabled" || v == "1"; };
        add(a).set_examples(INFER_BENCH).set_env("LLAMA_ARG_FLASH_ATTN");
    }
    add(text({"-p", "--prompt"}, "PROMPT", "prompt to start generation with (llama-cli: default empty, generation starts "
             "from BOS; with -cnv, the first user message)", [](common_params & p, const std::string & v) {
                 p.prompt = v;
                 p.prompt_given = true;
                 p.prompt_sources++;
             })).set_examples({LLAMA_EXAMPLE_MAIN, LLAMA_EXAMPLE_PERPLEXITY, LLAMA_EXAMPLE_TOKENIZE, LLAMA_EXAMPLE_LOGITS,
                               LLAMA_EXAMPLE_EMBEDDING, LLAMA_EXAMPLE_IMATRIX});
    add(flag({"--no-perf"}, "no timings at the end", [](common_params & p) { p.no_perf = true; }))
        .set_examples(INFER).set_env("LLAMA_ARG_NO_PERF");
    add(text({"-f", "--file"}, "FNAME", "a file containing the prompt (llama-cli: one trailing newline dropped; "
             "llama-perplexity: the text to score; llama-finetune: the training data; llama-imatrix: the text to run)",
             [](common_params & p, const std::string & v) {
                 p.prompt_file = v;
                 p.prompt_given = true;
                 p.prompt_sources++;
             })).set_examples({LLAMA_EXAMPLE_MAIN, LLAMA_EXAMPLE_PERPLEXITY, LLAMA_EXAMPLE_TOKENIZE, LLAMA_EXAMPLE_FINETUNE,
                               LLAMA_EXAMPLE_EMBEDDING, LLAMA_EXAMPLE_IMATRIX});
    add(text({"-bf", "--binary-file"}, "FNAME", "a binary file containing the prompt, read as it is (llama-perplexity: "
             "the --multiple-choice tasks)", [](common_params & p, const std::string & v) {
                 p.prompt_file = v;
                 p.prompt_binary = true;
                 p.prompt_given = true;
                 p.prompt_sources++;
             })).set_examples(INFER);
    add(flag({"-e", "--escape"}, "process escapes (\\n, \\r, \\t, \\', \\\", \\\\, \\xNN) in the prompt, reverse prompts, "
             "--in-prefix/--in-suffix and input lines (default: on, as llama.cpp)", [](common_params & p) { p.escape = true; }))
        .set_examples({LLAMA_EXAMPLE_MAIN, LLAMA_EXAMPLE_PERPLEXITY, LLAMA_EXAMPLE_TOKENIZE, LLAMA_EXAMPLE_EMBEDDING});
    add(flag({"--no-escape"}, "take them literally", [](common_params & p) { p.escape = false; }))
        .set_examples({LLAMA_EXAMPLE_MAIN, LLAMA_EXAMPLE_PERPLEXITY, LLAMA_EXAMPLE_TOKENIZE, LLAMA_EXAMPLE_EMBEDDING});
    add(integer({"-ptc", "--print-token-count"}, "N", -1, INT32_MAX, "print token count every N tokens, with -v (default: -1, never)",
                [](common_params & p, int64_t v) { p.n_print = (int32_t) v; })).set_examples({LLAMA_EXAMPLE_MAIN});
    add(text({"--prompt-cache"}, "FNAME", "file to cache prompt state for faster startup (default: none): a llama.cpp session "
             "file, loaded when it exists, its matching prefix of the prompt not evaluated again; written after the prompt",
             [](common_params & p, const std::string & v) { p.path_prompt_cache = v; })).set_examples({LLAMA_EXAMPLE_MAIN});
    add(flag({"--prompt-cache-all"}, "if specified, saves user input and generations to cache as well (not in interactive mode)",
             [](common_params & p) { p.prompt_cache_all = true; })).set_examples({LLAMA_EXAMPLE_MAIN});
    add(flag({"--prompt-cache-ro"}, "if specified, uses the prompt cache but does not update it",
             [](common_params & p) { p.prompt_cache_ro = true; })).set_examples({LLAMA_EXAMPLE_MAIN});
    add(text({"-r", "--reverse-prompt"}, "PROMPT", "stop generating when the output ends with PROMPT (in interactive mode: read "
             "a line); repeatable", [](common_params & p, const std::string & v) {
                 if (v.empty()) throw_value("an empty reverse prompt");
                 p.antiprompt.push_back(v);
             })).set_examples({LLAMA_EXAMPLE_MAIN});
    add(flag({"-sp", "--special"}, "special tokens output enabled (default: false)", [](common_params & p) { p.special = true; }))
        .set_examples({LLAMA_EXAMPLE_MAIN});
    add(flag({"-cnv", "--conversation"}, "chat using the model's chat template (a model without one: ChatML)",
             [](common_params & p) { p.conversation = true; })).set_examples({LLAMA_EXAMPLE_MAIN});
    add(flag({"-no-cnv", "--no-conversation"}, "no chat (the default here: unlike llama.cpp, chat mode is never turned on by "
             "itself for a model with a chat template)", [](common_params & p) { p.conversation = false; }))
        .set_examples({LLAMA_EXAMPLE_MAIN});
    add(text({"-sys", "--system-prompt"}, "PROMPT", "system message of chat mode",
             [](common_params & p, const std::string & v) { p.system_prompt = v; })).set_examples({LLAMA_EXAMPLE_MAIN});
    add(flag({"-i", "--interactive"}, "after the prompt, generate until a reverse prompt, -n tokens or the end of generation, "
             "then read a line from standard input, append it and go on; end of input ends the program (exit 0). As "
             "llama.cpp: the line's newline is not appended (end a line with '\\' to go on to the next one with a newline, "
             "with '/' to send it without); an empty line lets the model go on",
             [](common_params & p) { p.interactive = true; })).set_examples({LLAMA_EXAMPLE_MAIN});
    add(flag({"-if", "--interactive-first"}, "interactive, reading a line before generating",
             [](common_params & p) { p.interactive = p.interactive_first = true; })).set_examples({LLAMA_EXAMPLE_MAIN});
    add(unsupported({"-mli", "--multiline-input"}, nullptr, "lines are joined with a trailing '\\' instead"))
        .set_examples({LLAMA_EXAMPLE_MAIN});
    add(flag({"--in-prefix-bos"}, "prefix BOS to user inputs, preceding the --in-prefix string",
             [](common_params & p) { p.input_prefix_bos = true; })).set_examples({LLAMA_EXAMPLE_MAIN});
    add(text({"--in-prefix"}, "STRING", "text put before each input line (interactive mode)",
             [](common_params & p, const std::string & v) { p.input_prefix = v; })).set_examples({LLAMA_EXAMPLE_MAIN});
    add(text({"--in-suffix"}, "STRING", "text put after each input line (interactive mode)",
             [](common_params & p, const std::string & v) { p.input_suffix = v; })).set_examples({LLAMA_EXAMPLE_MAIN});
    add(flag({"--no-warmup"}, "accepted (no warm-up run is made)", [](common_params &) {})).set_examples(INFER);

    // ---- sampling params ----
    add_sampling(text({"--samplers"}, "SAMPLERS", "the samplers in their order, separated by ';' (default: penalties;dry;top_k;typ_p;"
                      "top_p;min_p;xtc;temperature; also infill, and the aliases top-k, top-p, nucleus, typical, typ, min-p, temp); "
                      "logit biases come first and the draw (dist) last",
                      [](common_params & p, const std::string & v) {
                          std::string err;
                          if (!common_sampler_types_from_names(v, p.sampling.samplers, err)) throw_value(err);
                      }));
    add_sampling(integer({"-s", "--seed"}, "SEED", -1, UINT32_MAX, "random seed (default -1: random)",
                [](common_params & p, int64_t v) { p.sampling.seed = v; }));
    add_sampling(text({"--sampling-seq", "--sampler-seq"}, "SEQUENCE", "--samplers by letters: d dry, k top_k, y typ_p, p top_p, m min_p, "
                      "x xtc, t temperature, i infill, e penalties (default: edkypmxt)",
                      [](common_params & p, const std::string & v) {
                          std::string err;
                          if (!common_sampler_types_from_chars(v, p.sampling.samplers, err)) throw_value(err);
                      }));
    add_sampling(flag({"--ignore-eos"}, "never stop at end-of-generation tokens (they get a logit bias of -inf: never sampled)",
             [](common_params & p) { p.sampling.ignore_eos = true; }));
    add_sampling(number({"--temp"}, "N", 0, 1e6, "temperature (default 0.8; 0: greedy)", [](common_params & p, double v) { p.sampling.temp = (float) v; }));
    add_sampling(integer({"--top-k"}, "N", 0, INT32_MAX, "top-k (default 40; 0: off)", [](common_params & p, int64_t v) { p.sampling.top_k = (int32_t) v; }));
    add_sampling(number({"--top-p"}, "N", 0, 1, "top-p (default 0.95; 1: off)", [](common_params & p, double v) { p.sampling.top_p = (float) v; }));
    add_sampling(number({"--min-p"}, "N", 0, 1, "min-p (default 0.05; 0: off)", [](common_params & p, double v) { p.sampling.min_p = (float) v; }));
    add_sampling(number({"--top-nsigma"}, "N", -1, 1e6, "top-n-sigma: keep the tokens within N standard deviations of the largest logit "
                        "(default -1: off); on, the chain is top-k, temperature, top-n-sigma instead of --samplers",
                        [](common_params & p, double v) { p.sampling.top_n_sigma = (float) v; }));
    add_sampling(number({"--xtc-probability"}, "N", 0, 1, "XTC: the chance of removing the likeliest tokens (default 0.0: off)",
                        [](common_params & p, double v) { p.sampling.xtc_probability = (float) v; }));
    add_sampling(number({"--xtc-threshold"}, "N", 0, 1, "XTC: the probability above which tokens are removed, all but the least likely "
                        "of them (default 0.1; above 0.5: off)", [](common_params & p, double v) { p.sampling.xtc_threshold = (float) v; }));
    add_sampling(number({"--typical"}, "N", 0, 1, "locally typical sampling, parameter p (default 1.0: off). As in llama.cpp's "
                        "llama-cli, whose min_keep is 0, it keeps every token (the sampler cuts only for min_keep >= 1)",
                        [](common_params & p, double v) { p.sampling.typ_p = (float) v; }));
    add_sampling(number({"--dry-multiplier"}, "N", 0, 1e6, "DRY: penalty multiplier for tokens that extend a repetition (default 0.0: off)",
                        [](common_params & p, double v) { p.sampling.dry_multiplier = (float) v; }));
    add_sampling(number({"--dry-base"}, "N", 0, 1e6, "DRY: penalty base, multiplier * base ^ (length - allowed length) (default 1.75; "
                        "a value below 1 is ignored, as llama.cpp)",
                        [](common_params & p, double v) {
                            if (v >= 1.0) p.sampling.dry_base = (float) v;
                        }));
    add_sampling(integer({"--dry-allowed-length"}, "N", 0, INT32_MAX, "DRY: repetitions this long go unpenalized (default 2)",
                         [](common_params & p, int64_t v) { p.sampling.dry_allowed_length = (int32_t) v; }));
    add_sampling(integer({"--dry-penalty-last-n"}, "N", -1, INT32_MAX, "DRY: tokens scanned for repetitions (default -1: the context; 0: off)",
                         [](common_params & p, int64_t v) { p.sampling.dry_penalty_last_n = (int32_t) v; }));
    add_sampling(text({"--dry-sequence-breaker"}, "STRING", "DRY: a string that ends a repetition; the first given replaces the defaults "
                      "('\\n', ':', '\"', '*'), \"none\" clears them (repeatable)",
                      [](common_params & p, const std::string & v) {
                          if (!p.sampling.dry_sequence_breakers_given) p.sampling.dry_sequence_breakers.clear();
                          p.sampling.dry_sequence_breakers_given = true;
                          if (v == "none") p.sampling.dry_sequence_breakers.clear();
                          else p.sampling.dry_sequence_breakers.push_back(v);
                      }));
    add_sampling(number({"--dynatemp-range"}, "N", 0, 1e6, "dynamic temperature: from temp - N to temp + N by the entropy (default 0.0: off)",
                        [](common_params & p, double v) { p.sampling.dynatemp_range = (float) v; }));
    add_sampling(number({"--dynatemp-exp"}, "N", 0, 1e6, "dynamic temperature exponent (default 1.0)",
                        [](common_params & p, double v) { p.sampling.dynatemp_exponent = (float) v; }));
    add_sampling(text({"-l", "--logit-bias"}, "TOKEN_ID(+/-)BIAS", "add BIAS to the logit of a token, e.g. 15043+1 or 15043-1 "
                      "(-inf: never sampled; repeatable)",
                      [](common_params & p, const std::string & v) {
                          // TOKEN_ID, a sign, a number (llama.cpp reads "15043+1", "15043-inf")
                          size_t i = 0;
                          while (i < v.size() && isdigit((unsigned char) v[i])) i++;
                          if (i == 0 || i >= v.size() || (v[i] != '+' && v[i] != '-')) throw_value("'" + v + "' (TOKEN_ID(+/-)BIAS)");
                          char * end = nullptr;
                          const std::string num = v.substr(i + 1);
                          const float bias = std::strtof(num.c_str(), &end);
                          if (num.empty() || *end != '\0') throw_value("'" + v + "' (TOKEN_ID(+/-)BIAS)");
                          p.sampling.logit_bias.push_back({(llama_token) std::atoi(v.substr(0, i).c_str()), v[i] == '-' ? -bias : bias});
                      }));
    add_sampling(integer({"--repeat-last-n"}, "N", -1, INT32_MAX, "tokens the penalties look back (default 64; 0: off; -1: context)",
                [](common_params & p, int64_t v) { p.sampling.penalty_last_n = (int32_t) v; }));
    add_sampling(number({"--repeat-penalty"}, "N", 0, 1e6, "repetition penalty (default 1.0: off)",
               [](common_params & p, double v) { p.sampling.penalty_repeat = (float) v; }));
    add_sampling(number({"--presence-penalty"}, "N", -1e6, 1e6, "presence penalty (default 0.0: off)",
               [](common_params & p, double v) { p.sampling.penalty_present = (float) v; }));
    add_sampling(number({"--frequency-penalty"}, "N", -1e6, 1e6, "frequency penalty (default 0.0: off)",
               [](common_params & p, double v) { p.sampling.penalty_freq = (float) v; }));
    add_sampling(integer({"--mirostat"}, "N", 0, 2, "Mirostat sampling: 0 off (default), 1 Mirostat, 2 Mirostat 2.0; top-k, top-p, min-p "
                "and the penalties are not used with it", [](common_params & p, int64_t v) { p.sampling.mirostat = (int32_t) v; }));
    add_sampling(number({"--mirostat-lr"}, "N", 0, 1e6, "Mirostat learning rate eta (default 0.1)",
               [](common_params & p, double v) { p.sampling.mirostat_eta = (float) v; }));
    add_sampling(number({"--mirostat-ent"}, "N", 0, 1e6, "Mirostat target entropy tau (default 5.0)",
               [](common_params & p, double v) { p.sampling.mirostat_tau = (float) v; }));
    // Grammars: the text is parsed when given (an error names the place); applied before the chain.
    add_sampling(text({"--grammar"}, "GRAMMAR", "BNF-like grammar to constrain generations (see samples in grammars/ dir) (default: '')",
                      [](common_params & p, const std::string & v) { p.sampling.grammar = checked_grammar(v); }));
    add_sampling(text({"--grammar-file"}, "FNAME", "file to read grammar from", [](common_params & p, const std::string & v) {
        p.sampling.grammar = checked_grammar(p.sampling.grammar + read_text_file(v, "grammar file"));  // appended, as llama.cpp
    }));
#ifdef LLAMA_JSON_SCHEMA
    add_sampling(text({"-j", "--json-schema"}, "SCHEMA", "JSON schema to constrain generations (https://json-schema.org/), e.g. `{}` for any "
                      "JSON object", [](common_params & p, const std::string & v) {
                          std::string g;
                          try {
                              g = json_schema_to_grammar(nlohmann::ordered_json::parse(v));
                          } catch (const std::exception & e) {
                              throw_value(e.what());
                          }
                          p.sampling.grammar = checked_grammar(g);
                      }));
#else
    add(unsupported({"-j", "--json-schema"}, "SCHEMA", NO_JSON_SCHEMA)).set_examples(INFER).set_sparam();
#endif

    // ---- model, context and placement ----
    // RoPE: the model's unless overridden (context extension), as llama.cpp's options.
    {
        common_arg a = text({"--rope-scaling"}, "{none,linear,yarn}", "RoPE frequency scaling method, defaults to linear unless "
                            "specified by the model", [](common_params & p, const std::string & v) {
                                if (v != "none" && v != "linear" && v != "yarn") throw_value("'" + v + "' (none, linear, yarn)");
                                p.rope_scaling_type = v == "none" ? LLAMA_ROPE_SCALING_TYPE_NONE
                                                      : v == "linear" ? LLAMA_ROPE_SCALING_TYPE_LINEAR
                                                                      : LLAMA_ROPE_SCALING_TYPE_YARN;
                            });
        add(a).set_examples(INFER).set_env("LLAMA_ARG_ROPE_SCALING_TYPE");
    }
    add(number({"--rope-scale"}, "N", 1e-6, 1e6, "RoPE context scaling factor, expands context by a factor of N",
               [](common_params & p, double v) { p.rope_freq_scale = (float) (1.0 / v); }))
        .set_examples(INFER).set_env("LLAMA_ARG_ROPE_SCALE");
    add(number({"--rope-freq-base"}, "N", 1e-6, 1e12, "RoPE base frequency, used by NTK-aware scaling (default: loaded from model)",
               [](common_params & p, double v) { p.rope_freq_base = (float) v; }))
        .set_examples(INFER).set_env("LLAMA_ARG_ROPE_FREQ_BASE");
    add(number({"--rope-freq-scale"}, "N", 1e-6, 1e6, "RoPE frequency scaling factor, expands context by a factor of 1/N",
               [](common_params & p, double v) { p.rope_freq_scale = (float) v; }))
        .set_examples(INFER).set_env("LLAMA_ARG_ROPE_FREQ_SCALE");
    add(integer({"--yarn-orig-ctx"}, "N", 0, 1 << 24, "YaRN: original context size of model (default: 0 = model training context size)",
                [](common_params & p, int64_t v) { p.yarn_orig_ctx = (int32_t) v; }))
        .set_examples(INFER).set_env("LLAMA_ARG_YARN_ORIG_CTX");
    add(number({"--yarn-ext-factor"}, "N", -1, 1e6, "YaRN: extrapolation mix factor (default: -1.0, 0.0 = full interpolation)",
               [](common_params & p, double v) { p.yarn_ext_factor = (float) v; }))
        .set_examples(INFER).set_env("LLAMA_ARG_YARN_EXT_FACTOR");
    add(number({"--yarn-attn-factor"}, "N", 1e-6, 1e6, "YaRN: scale sqrt(t) or attention magnitude (default: 1.0)",
               [](common_params & p, double v) { p.yarn_attn_factor = (float) v; }))
        .set_examples(INFER).set_env("LLAMA_ARG_YARN_ATTN_FACTOR");
    add(number({"--yarn-beta-slow"}, "N", -1e6, 1e6, "YaRN: high correction dim or alpha (default: 1.0)",
               [](common_params & p, double v) { p.yarn_beta_slow = (float) v; }))
        .set_examples(INFER).set_env("LLAMA_ARG_YARN_BETA_SLOW");
    add(number({"--yarn-beta-fast"}, "N", -1e6, 1e6, "YaRN: low correction dim or beta (default: 32.0)",
               [](common_params & p, double v) { p.yarn_beta_fast = (float) v; }))
        .set_examples(INFER).set_env("LLAMA_ARG_YARN_BETA_FAST");
    add(unsupported({"-gan", "--grp-attn-n"}, "N", "self-extend (grouped attention) is not implemented")).set_examples({LLAMA_EXAMPLE_MAIN});
    add(unsupported({"-gaw", "--grp-attn-w"}, "N", "self-extend (grouped attention) is not implemented")).set_examples({LLAMA_EXAMPLE_MAIN});
    add(unsupported({"-dkvc", "--dump-kv-cache"}, nullptr, "the KV cache is not dumped")).set_examples(INFER);
    add(flag({"-nkvo", "--no-kv-offload"}, "keep the KV cache in host memory", [](common_params & p) {
            p.no_kv_offload = true;
            p.gpu_flags_given.push_back("-nkvo");
        })).set_examples(INFER).set_env("LLAMA_ARG_NO_KV_OFFLOAD");
    add(text({"-ctk", "--cache-type-k"}, "TYPE", "KV cache type of K (default: f16): " + common_cache_type_names() + " "
             "(block types: head size a multiple of 32)", [](common_params & p, const std::string & v) { p.cache_type_k = cache_type(v); }))
        .set_examples(INFER_BENCH).set_env("LLAMA_ARG_CACHE_TYPE_K");
    add(text({"-ctv", "--cache-type-v"}, "TYPE", "KV cache type of V, the same types",
             [](common_params & p, const std::string & v) { p.cache_type_v = cache_type(v); }))
        .set_examples(INFER_BENCH).set_env("LLAMA_ARG_CACHE_TYPE_V");
    add(text({"--cache-type"}, "TYPE", "KV cache type of K and V",
             [](common_params & p, const std::string & v) { p.cache_type_k = p.cache_type_v = cache_type(v); }))
        .set_examples(INFER);
    add(unsupported({"--perplexity", "--all-logits"}, nullptr, "llama-logits writes every position's logits"))
        .set_examples({LLAMA_EXAMPLE_PERPLEXITY});
    add(flag({"--hellaswag"}, "compute the HellaSwag score (acc_norm) over the tasks of -f FILE (6 lines a task)",
             [](common_params & p) { p.hellaswag = true; })).set_examples({LLAMA_EXAMPLE_PERPLEXITY});
    add(integer({"--hellaswag-tasks"}, "N", 1, 1e9, "number of tasks to use when computing the HellaSwag score (default: 400)",
                [](common_params & p, int64_t v) { p.hellaswag_tasks = (size_t) v; })).set_examples({LLAMA_EXAMPLE_PERPLEXITY});
    add(flag({"--winogrande"}, "compute the WinoGrande score over the tasks of -f FILE (CSV: index, sentence, choice 1, choice 2, answer)",
             [](common_params & p) { p.winogrande = true; })).set_examples({LLAMA_EXAMPLE_PERPLEXITY});
    add(integer({"--winogrande-tasks"}, "N", 0, 1e9, "number of tasks to use when computing the WinoGrande score (default: 0, all)",
                [](common_params & p, int64_t v) { p.winogrande_tasks = (size_t) v; })).set_examples({LLAMA_EXAMPLE_PERPLEXITY});
    add(flag({"--multiple-choice"}, "compute the multiple-choice score (ARC, MMLU, TruthfulQA) over llama.cpp's binary task file (-bf FILE)",
             [](common_params & p) { p.multiple_choice = true; })).set_examples({LLAMA_EXAMPLE_PERPLEXITY});
    add(integer({"--multiple-choice-tasks"}, "N", 0, 1e9, "number of tasks to use when computing the multiple-choice score (default: 0, all)",
                [](common_params & p, int64_t v) { p.multiple_choice_tasks = (size_t) v; })).set_examples({LLAMA_EXAMPLE_PERPLEXITY});
    add(flag({"--kl-divergence"}, "compare the model with --kl-divergence-base FILE (the tokens come from FILE: no -f): KL "
             "divergence, top-token agreement, probability differences, both perplexities",
             [](common_params & p) { p.kl_divergence = true; })).set_examples({LLAMA_EXAMPLE_PERPLEXITY});
    add(text({"--save-all-logits", "--kl-divergence-base"}, "FNAME", "without --kl-divergence: also save the tokens and the logits of "
             "the scored positions to FNAME (written whole or not at all); with it: the base model's file to compare with",
             [](common_params & p, const std::string & v) { p.logits_file = v; })).set_examples({LLAMA_EXAMPLE_PERPLEXITY});
    add(integer({"--ppl-stride"}, "N", 0, INT32_MAX, "stride for perplexity calculation: windows of -c + N/2 tokens every N tokens, "
                "the last N of each scored (default: 0, chunks scored on their second half)",
                [](common_params & p, int64_t v) { p.ppl_stride = (int32_t) v; })).set_examples({LLAMA_EXAMPLE_PERPLEXITY});
    add(integer({"--ppl-output-type"}, "0|1", 0, 1, "output type for perplexity calculation: 0 [chunk]PPL, 1 a line per chunk (default: 0)",
                [](common_params & p, int64_t v) { p.ppl_output_type = (int32_t) v; })).set_examples({LLAMA_EXAMPLE_PERPLEXITY});
    add(unsupported({"-dt", "--defrag-thold"}, "N", "no defragmentation by threshold: freed cells are reused as they are (llama_kv_self_defrag compacts on request)")).set_examples(INFER);
    add(unsupported({"-np", "--parallel"}, "N", ONE_SEQUENCE)).set_examples(INFER);
    // ---- many sequences: llama-batched, llama-batched-bench, llama-parallel ----
    const std::initializer_list<E> MULTI = {LLAMA_EXAMPLE_BATCHED, LLAMA_EXAMPLE_BATCHED_BENCH, LLAMA_EXAMPLE_PARALLEL};
    add(integer({"-np", "--parallel"}, "N", 1, 255, "number of parallel sequences to decode (default: 1; llama-parallel: clients)",
                [](common_params & p, int64_t v) { p.n_parallel = (int32_t) v; }))
        .set_examples({LLAMA_EXAMPLE_BATCHED, LLAMA_EXAMPLE_PARALLEL, LLAMA_EXAMPLE_SERVER}).set_no_effect({LLAMA_EXAMPLE_BATCHED_BENCH})
        .set_env("LLAMA_ARG_N_PARALLEL");
    add(integer({"-ns", "--sequences"}, "N", 1, INT32_MAX, "number of sequences to decode (default: 1)",
                [](common_params & p, int64_t v) { p.n_sequences = (int32_t) v; })).set_examples({LLAMA_EXAMPLE_PARALLEL});
    // llama.cpp 4747 has these in llama-server only (llama-parallel batches continuously, its default)
    add(flag({"-cb", "--cont-batching"}, "enable continuous batching (a.k.a dynamic batching) (default: enabled)",
             [](common_params & p) { p.cont_batching = true; })).set_examples({LLAMA_EXAMPLE_PARALLEL, LLAMA_EXAMPLE_SERVER}).set_env("LLAMA_ARG_CONT_BATCHING");
    add(flag({"-nocb", "--no-cont-batching"}, "disable continuous batching: a new request's prompt waits until no client is generating",
             [](common_params & p) { p.cont_batching = false; })).set_examples({LLAMA_EXAMPLE_PARALLEL, LLAMA_EXAMPLE_SERVER})
        .set_env("LLAMA_ARG_NO_CONT_BATCHING");
    add(flag({"-pps"}, "is the prompt shared across parallel sequences (default: false)", [](common_params & p) { p.is_pp_shared = true; }))
        .set_examples({LLAMA_EXAMPLE_BATCHED_BENCH});
    // -npp, -ntg, -npl: comma-separated lists, appended to when repeated
    for (const auto & o : std::vector<std::pair<const char *, const char *>>{{"-npp", "number of prompt tokens"},
                                                                          {"-ntg", "number of text generation tokens"},
                                                                          {"-npl", "number of parallel prompts"}}) {
        const std::string name = o.first;
        add(text({name}, "n0,n1,...", o.second, [name](common_params & p, const std::string & v) {
                std::vector<int32_t> & list = name == "-npp" ? p.n_pp : name == "-ntg" ? p.n_tg : p.n_pl;
                const long lo = name == "-ntg" ? 0 : 1, hi = name == "-npl" ? 255 : (1 << 24);
                for (const std::string & item : split_commas(v)) {
                    char * end = nullptr;
                    errno = 0;
                    const long x = strtol(item.c_str(), &end, 10);
                    if (item.empty() || *end != '\0' || errno == ERANGE || x < lo || x > hi) {
                        throw_value("'" + v + "' (comma-separated integers, " + std::to_string(lo) + " .. " + std::to_string(hi) + ")");
                    }
                    list.push_back((int32_t) x);
                }
            })).set_examples({LLAMA_EXAMPLE_BATCHED_BENCH});
    }
    add(text({"--output-format"}, "{md,jsonl}", "output format for batched-bench results (default: md)", [](common_params & p, const std::string & v) {
            if (v != "md" && v != "jsonl") throw_value("'" + v + "' (md or jsonl)");
            p.batched_bench_output_jsonl = v == "jsonl";
        })).set_examples({LLAMA_EXAMPLE_BATCHED_BENCH});
    add(unsupported({"-rpc", "--rpc"}, "SERVERS", "there is no RPC backend")).set_examples(INFER_BENCH);
    add(flag({"--mlock"}, "keep the model's memory resident (a failure is a warning)", [](common_params & p) { p.use_mlock = true; }))
        .set_examples(INFER_BENCH).set_env("LLAMA_ARG_MLOCK");
    add(flag({"--no-mmap"}, "read the model into memory instead of mapping it", [](common_params & p) { p.use_mmap = false; }))
        .set_examples(INFER).set_env("LLAMA_ARG_NO_MMAP");
    add(flag({"--no-repack"}, "keep the file's weight layout (default: rearrange the matrices this CPU multiplies faster repacked)",
             [](common_params & p) { p.use_repack = false; })).set_examples(INFER_BENCH);
    add(text({"--numa"}, "TYPE", "distribute|isolate|numactl: accepted and noted (threads are not placed by NUMA node)",
             [](common_params & p, const std::string & v) {
                 if (v != "distribute" && v != "isolate" && v != "numactl") {
                     throw_value("'" + v + "' (distribute, isolate or numactl)");
                 }
                 p.numa = v;
             })).set_examples(INFER_BENCH).set_env("LLAMA_ARG_NUMA").set_single();
    add(unsupported({"-dev", "--device"}, "LIST", "devices are not chosen by name: -ngl places layers on the first GPU"))
        .set_examples(INFER_BENCH);
    add(flag({"--list-devices"}, "print the list of available devices and exit", [](common_params &) {
            printf("Available devices:\n");
            for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
                ggml_backend_dev_t d = ggml_backend_dev_get(i);
                if (ggml_backend_dev_type(d) == GGML_BACKEND_DEVICE_TYPE_CPU) continue;  // as llama.cpp: the GPUs
                size_t free = 0, total = 0;
                ggml_backend_dev_memory(d, &free, &total);
                printf("  %s: %s (%zu MiB, %zu MiB free)\n", ggml_backend_dev_name(d), ggml_backend_dev_description(d),
                       total / 1024 / 1024, free / 1024 / 1024);
            }
            exit(0);
        })).set_examples(INFER_BENCH);
    add(text({"-ngl", "--gpu-layers", "--n-gpu-layers"}, "N", "layers on the GPU, the last ones (default: 0; all: every one)",
             [](common_params & p, const std::string & v) {
                 if (v == "auto" || v == "all") {
                     p.n_gpu_layers = 999;
                 } else {
                     char * end = nullptr;
                     errno = 0;
                     const long x = strtol(v.c_str(), &end, 10);
                     if (v.empty() || *end != '\0' || errno == ERANGE || x < -1 || x > INT32_MAX) {
                         throw_value("'" + v + "' (an integer, -1 or more, or all)");
                     }
                     p.n_gpu_layers = (int32_t) x;
                 }
                 p.gpu_flags_given.push_back("-ngl");
             })).set_examples(INFER_LOGITS_BENCH).set_env("LLAMA_ARG_N_GPU_LAYERS");
    t.back().int_ranges = true;
    t.back().examples.insert(LLAMA_EXAMPLE_FINETUNE);
    add(text({"-sm", "--split-mode"}, "{none,layer,row}", "how layers spread over several GPUs (default: layer)",
             [](common_params & p, const std::string & v) {
                 if (v != "none" && v != "layer" && v != "row") throw_value("'" + v + "' (none, layer or row)");
                 p.split_mode = v == "none" ? LLAMA_SPLIT_MODE_NONE : v == "row" ? LLAMA_SPLIT_MODE_ROW : LLAMA_SPLIT_MODE_LAYER;
                 p.gpu_flags_given.push_back("-sm");
             })).set_examples(INFER_BENCH).set_env("LLAMA_ARG_SPLIT_MODE");
    add(unsupported({"-ts", "--tensor-split"}, "N0,N1,...", "one GPU takes the offloaded layers")).set_examples(INFER_BENCH);
    add(integer({"-mg", "--main-gpu"}, "INDEX", 0, INT32_MAX, "the GPU of split mode none (default: 0)", [](common_params & p, int64_t v) {
            p.main_gpu = (int32_t) v;
            p.gpu_flags_given.push_back("-mg");
        })).set_examples(INFER_BENCH).set_env("LLAMA_ARG_MAIN_GPU");
    add(flag({"--check-tensors"}, "check every tensor's data for invalid values (NaN, inf) when loading (default: false)",
             [](common_params & p) { p.check_tensors = true; })).set_examples(INFER_BENCH);
    add(text({"--override-kv"}, "KEY=TYPE:VALUE", "override a model metadata value (llama-quantize: set it in the output); "
             "TYPE int, float, bool or str; repeatable, e.g. --override-kv tokenizer.ggml.add_bos_token=bool:false",
             [](common_params & p, const std::string & v) {
                 llama_model_kv_override o;
                 std::string err;
                 if (!common_parse_kv_override(v, o, err)) throw_value(err);
                 if (!p.kv_overrides.empty()) p.kv_overrides.pop_back();  // the terminating empty key
                 p.kv_overrides.push_back(o);
                 p.kv_overrides.push_back({});
             })).set_examples({LLAMA_EXAMPLE_MAIN, LLAMA_EXAMPLE_PERPLEXITY, LLAMA_EXAMPLE_QUANTIZE});
    add(text({"--lora"}, "FNAME", "apply a LoRA adapter (GGUF file or PEFT directory) at scale 1; repeatable",
             [](common_params & p, const std::string & v) { p.lora_adapters.push_back({v, 1.0f}); })).set_examples(LORA);
    {
        common_arg a;
        a.args = {"--lora-scaled"};
        a.value_hint = "FNAME";
        a.value_hint_2 = "SCALE";
        a.kind = common_arg::STRING_PAIR;
        a.help = "apply a LoRA adapter at the given scale; repeatable";
        a.on_pair = [](common_params & p, const std::string & path, const std::string & s) {
            char * end = nullptr;
            const float x = strtof(s.c_str(), &end);
            if (s.empty() || *end != '\0' || !std::isfinite(x) || std::fabs(x) > 1e6f) {
                throw_value("'" + s + "' (a finite number)");
            }
            p.lora_adapters.push_back({path, x});
        };
        add(a).set_examples(LORA);
    }
    add(unsupported({"--control-vector"}, "FNAME", "control vectors are not implemented")).set_examples(INFER);
    add(unsupported({"--control-vector-scaled"}, "FNAME", "control vectors are not implemented")).set_examples(INFER);
    add(unsupported({"--control-vector-layer-range"}, "START", "control vectors are not implemented")).set_examples(INFER);
    add(text({"-m", "--model"}, "FNAME", "model path (GGUF)", [](common_params & p, const std::string & v) { p.model = v; }))
        .set_examples(ALL).set_env("LLAMA_ARG_MODEL");
    for (const auto & names : std::vector<std::vector<std::string>>{{"-mu", "--model-url"}, {"-hf", "-hfr", "--hf-repo"},
                                                                    {"-hfd", "-hfrd", "--hf-repo-draft"}, {"-hff", "--hf-file"},
                                                                    {"-hfv", "-hfrv", "--hf-repo-v"}, {"-hffv", "--hf-file-v"},
                                                                    {"-hft", "--hf-token"}}) {
        add(unsupported(names, "V", NO_DOWNLOAD)).set_examples(INFER);
    }
    add(unsupported({"--jinja"}, nullptr, "there is no Jinja engine: --chat-template takes the built-in templates by name or "
                    "recognizes a template text")).set_examples({LLAMA_EXAMPLE_MAIN});
    add(unsupported({"--reasoning-format"}, "FORMAT", "reasoning output is not parsed")).set_examples({LLAMA_EXAMPLE_MAIN});
    add(text({"--chat-template"}, "JINJA_TEMPLATE", "llama2, llama3, chatml, zephyr, mistral, phi3, gemma, or a template text recognized as one",
             [](common_params & p, const std::string & v) { p.chat_template = checked_chat_template(v); })).set_examples({LLAMA_EXAMPLE_MAIN})
        .set_env("LLAMA_ARG_CHAT_TEMPLATE");
    add(text({"--chat-template-file"}, "JINJA_TEMPLATE_FILE", "the --chat-template text read from a file",
             [](common_params & p, const std::string & v) { p.chat_template = checked_chat_template(read_text_file(v, "chat template file")); }))
        .set_examples({LLAMA_EXAMPLE_MAIN}).set_env("LLAMA_ARG_CHAT_TEMPLATE_FILE");
    add(flag({"--simple-io"}, "accepted (input and output are plain already)", [](common_params &) {})).set_examples({LLAMA_EXAMPLE_MAIN});
    add(flag({"--log-disable"}, "no log on standard error but errors (no timings either)", [](common_params & p) { p.verbosity = 0; }))
        .set_examples({LLAMA_EXAMPLE_MAIN, LLAMA_EXAMPLE_PERPLEXITY, LLAMA_EXAMPLE_TOKENIZE});
    add(unsupported({"--log-file"}, "FNAME", NO_LOG_OPTS)).set_examples(INFER);
    add(unsupported({"--log-colors"}, nullptr, NO_LOG_OPTS)).set_examples(INFER);
    add(flag({"-v", "--verbose", "--log-verbose"}, "all logs, the program's debug lines included", [](common_params & p) { p.verbosity = 2; }))
        .set_examples(INFER_BENCH);
    add(integer({"-lv", "--verbosity", "--log-verbosity"}, "N", 0, INT32_MAX, "0: errors only ... 1: the default log; above: all",
                [](common_params & p, int64_t v) { p.verbosity = v == 0 ? 0 : v == 1 ? 1 : 2; }))
        .set_examples(INFER).set_env("LLAMA_LOG_VERBOSITY");
    add(unsupported({"--log-prefix"}, nullptr, NO_LOG_OPTS)).set_examples(INFER);
    add(unsupported({"--log-timestamps"}, nullptr, NO_LOG_OPTS)).set_examples(INFER);

    // ---- llama-embedding ----
    const std::initializer_list<E> EMBD = {LLAMA_EXAMPLE_EMBEDDING};
    add(text({"--pooling"}, "{none,mean,cls,last,rank}", "pooling type for embeddings (default: the model's)",
             [](common_params & p, const std::string & v) {
                 if (v == "none") p.pooling_type = LLAMA_POOLING_TYPE_NONE;
                 else if (v == "mean") p.pooling_type = LLAMA_POOLING_TYPE_MEAN;
                 else if (v == "cls") p.pooling_type = LLAMA_POOLING_TYPE_CLS;
                 else if (v == "last") p.pooling_type = LLAMA_POOLING_TYPE_LAST;
                 else if (v == "rank") throw_value("not supported: rank pooling needs a classifier head, which no model here has");
                 else throw_value("expected none, mean, cls, last or rank");
             })).set_examples({LLAMA_EXAMPLE_EMBEDDING, LLAMA_EXAMPLE_SERVER}).set_env("LLAMA_ARG_POOLING");
    add(text({"--attention"}, "{causal,non-causal}", "attention type for embeddings (default: the model's)",
             [](common_params & p, const std::string & v) {
                 if (v == "causal") p.attention_type = LLAMA_ATTENTION_TYPE_CAUSAL;
                 else if (v == "non-causal") p.attention_type = LLAMA_ATTENTION_TYPE_NON_CAUSAL;
                 else throw_value("expected causal or non-causal");
             })).set_examples(EMBD);
    add(integer({"--embd-normalize"}, "N", -1, INT32_MAX, "normalisation of the embeddings (default: 2; -1 none, 0 max "
                "absolute int16, 1 taxicab, 2 euclidean, >2 p-norm)", [](common_params & p, int64_t v) { p.embd_normalize = (int32_t) v; }))
        .set_examples(EMBD).set_group(COMMON_ARG_GROUP_EXAMPLE);
    add(text({"--embd-output-format"}, "FORMAT", "empty: the default text; 'array' [[],[],...]; 'json' an OpenAI-style list; "
             "'json+' that and the cosine similarity matrix", [](common_params & p, const std::string & v) {
                 if (v != "" && v != "array" && v != "json" && v != "json+") throw_value("expected array, json or json+");
                 p.embd_out = v;
             })).set_examples(EMBD).set_group(COMMON_ARG_GROUP_EXAMPLE);
    add(text({"--embd-separator"}, "STRING", "separator of the prompts (default \\n); e.g. \"<#sep#>\"",
             [](common_params & p, const std::string & v) { p.embd_sep = v; })).set_examples(EMBD).set_group(COMMON_ARG_GROUP_EXAMPLE);

    // ---- llama-imatrix ----
    {
        const std::initializer_list<E> IMATRIX = {LLAMA_EXAMPLE_IMATRIX};
        add(text({"--in-file"}, "FNAME", "an importance matrix (.dat or GGUF) to start from; repeatable: they are combined "
                 "(without -f, only combined)", [](common_params & p, const std::string & v) { p.in_files.push_back(v); }))
            .set_examples(IMATRIX).set_group(COMMON_ARG_GROUP_EXAMPLE);
        add(text({"--output-format"}, "{gguf,dat}", "the output's format: gguf (llama.cpp's current) or dat (llama.cpp 4747's); "
                 "default: gguf when the output's name ends in .gguf, else dat", [](common_params & p, const std::string & v) {
                     if (v != "gguf" && v != "dat") throw_value("'" + v + "' (gguf or dat)");
                     p.imatrix_out_format = v;
                 })).set_examples(IMATRIX).set_group(COMMON_ARG_GROUP_EXAMPLE);
        add(integer({"-ofreq", "--output-frequency"}, "N", 0, INT32_MAX, "write the output every N calls (default: 10; 0: at the end only)",
                    [](common_params & p, int64_t v) { p.n_out_freq = (int32_t) v; })).set_examples(IMATRIX).set_group(COMMON_ARG_GROUP_EXAMPLE);
        add(integer({"--save-frequency"}, "N", 0, INT32_MAX, "also write a copy FNAME.at_N every N calls (default: 0, none)",
                    [](common_params & p, int64_t v) { p.n_save_freq = (int32_t) v; })).set_examples(IMATRIX).set_group(COMMON_ARG_GROUP_EXAMPLE);
        add(flag({"--process-output"}, "collect data for the output tensor too (default: false)",
                 [](common_params & p) { p.process_output = true; })).set_examples(IMATRIX).set_group(COMMON_ARG_GROUP_EXAMPLE);
        add(flag({"--no-ppl"}, "do not compute perplexity (default: computed)", [](common_params & p) { p.compute_ppl = false; }))
            .set_examples(IMATRIX).set_group(COMMON_ARG_GROUP_EXAMPLE);
        add(integer({"--chunk", "--from-chunk"}, "N", 0, INT32_MAX, "start processing the input from chunk N (default: 0)",
                    [](common_params & p, int64_t v) { p.i_chunk = (int32_t) v; })).set_examples(IMATRIX).set_group(COMMON_ARG_GROUP_EXAMPLE);
    }

    // ---- llama-tokenize ----
    add(flag({"--ids"}, "print only the ids, as a list ([1, 2, 3])", [](common_params & p) { p.ids_only = true; }))
        .set_examples({LLAMA_EXAMPLE_TOKENIZE}).set_group(COMMON_ARG_GROUP_EXAMPLE);
    add(flag({"--stdin"}, "read the prompt from standard input", [](common_params & p) {
            p.read_stdin = true;
            p.prompt_given = true;
            p.prompt_sources++;
        })).set_examples({LLAMA_EXAMPLE_TOKENIZE}).set_group(COMMON_ARG_GROUP_EXAMPLE);
    add(flag({"--no-bos"}, "do not add a BOS token first", [](common_params & p) { p.add_bos = false; }))
        .set_examples({LLAMA_EXAMPLE_TOKENIZE, LLAMA_EXAMPLE_LOGITS}).set_group(COMMON_ARG_GROUP_EXAMPLE);
    add(flag({"--no-parse-special"}, "take special tokens' texts (<s>, <|im_start|>) as plain text",
             [](common_params & p) { p.parse_special = false; })).set_examples({LLAMA_EXAMPLE_TOKENIZE}).set_group(COMMON_ARG_GROUP_EXAMPLE);
    add(flag({"--show-count"}, "print the number of tokens at the end", [](common_params & p) { p.show_count = true; }))
        .set_examples({LLAMA_EXAMPLE_TOKENIZE}).set_group(COMMON_ARG_GROUP_EXAMPLE);

    // ---- llama-bench (each option with a value takes a list: a test per value, but the single ones) ----
    const std::initializer_list<E> BENCH = {LLAMA_EXAMPLE_BENCH};
    add(integer({"-p", "--n-prompt"}, "N", 0, 1 << 22, "prompt tokens of a pp test (default: 512; 0: none)",
                [](common_params & p, int64_t v) { p.bench_n_prompt = (int32_t) v; })).set_examples(BENCH);
    add(integer({"-n", "--n-gen"}, "N", 0, 1 << 22, "generated tokens of a tg test (default: 128; 0: none)",
                [](common_params & p, int64_t v) { p.bench_n_gen = (int32_t) v; })).set_examples(BENCH);
    add(text({"-pg"}, "PP,TG", "a test of PP prompt tokens then TG generated ones, timed together; repeatable",
             [](common_params & p, const std::string & v) {
                 int pp = -1, tg = -1;
                 char extra = 0;
                 if (sscanf(v.c_str(), "%d,%d%c", &pp, &tg, &extra) != 2 || pp < 0 || tg < 0 || pp > (1 << 22) || tg > (1 << 22) ||
                     !isdigit((unsigned char) v[0])) {
                     throw_value("'" + v + "' (expected pp,tg)");
                 }
                 p.bench_pg.push_back({pp, tg});
             })).set_examples(BENCH).set_single();
    add(integer({"-d", "--n-depth"}, "N", 0, 1 << 22, "tokens in the KV cache before each repetition, untimed (default: 0)",
                [](common_params & p, int64_t v) { p.bench_n_depth = (int32_t) v; })).set_examples(BENCH);
    add(integer({"-mmp", "--mmap"}, "0|1", 0, 1, "map the model file (default: 1)",
                [](common_params & p, int64_t v) { p.use_mmap = v != 0; })).set_examples(BENCH);
    add(integer({"-nkvo", "--no-kv-offload"}, "0|1", 0, 1, "keep the KV cache in host memory (default: 0)",
                [](common_params & p, int64_t v) { p.no_kv_offload = v != 0; })).set_examples(BENCH);
    add(unsupported({"-embd", "--embeddings"}, "0|1", "embeddings are not implemented: a context returns logits")).set_examples(BENCH);
    add(unsupported({"-ot", "--override-tensor"}, "PATTERN=BUFT", "weights are placed by -ngl only")).set_examples(BENCH);
    add(integer({"-r", "--repetitions"}, "N", 1, 1000000, "number of times to repeat each test (default: 5)",
                [](common_params & p, int64_t v) { p.bench_reps = (int32_t) v; })).set_examples(BENCH).set_single();
    add(integer({"--delay"}, "SECONDS", 0, 3600, "delay between each test (default: 0)",
                [](common_params & p, int64_t v) { p.bench_delay = (int32_t) v; })).set_examples(BENCH).set_single();
    for (const bool err : {false, true}) {
        add(text(err ? std::vector<std::string>{"-oe", "--output-err"} : std::vector<std::string>{"-o", "--output"}, "FORMAT",
                 err ? "output format printed to stderr: csv, json, jsonl, md, sql (default: none)"
                     : "output format printed to stdout: csv, json, jsonl, md, sql (default: md)",
                 [err](common_params & p, const std::string & v) {
                     if (v != "csv" && v != "json" && v != "jsonl" && v != "md" && v != "sql" && v != "none") {
                         throw_value("'" + v + "' (csv, json, jsonl, md, sql)");
                     }
                     (err ? p.bench_output_err : p.bench_output) = v;
                 })).set_examples(BENCH).set_single();
    }
    add(flag({"--progress"}, "print test progress indicators", [](common_params & p) { p.bench_progress = true; })).set_examples(BENCH);
    add(flag({"--no-warmup"}, "skip warmup runs before benchmarking", [](common_params & p) { p.bench_no_warmup = true; })).set_examples(BENCH);
    add(text({"--ceiling"}, "GBPS|auto", "ours: add a column, tg t/s as a % of the memory-bandwidth ceiling (GB/s / model size); "
             "auto: the read bandwidth measured with the test's threads just before and after each tg test, the higher (default: off)",
             [](common_params & p, const std::string & v) {
                 char * end = nullptr;
                 const double g = v == "auto" ? 1 : strtod(v.c_str(), &end);
                 if (v != "auto" && (v.empty() || *end != '\0' || !(g > 0) || g > 1e6)) {
                     throw_value("'" + v + "' (memory bandwidth in GB/s, > 0, or auto)");
                 }
                 p.bench_ceiling = v;
             })).set_examples(BENCH).set_single();

    // ---- llama-convert ----
    const std::initializer_list<E> CONVERT = {LLAMA_EXAMPLE_CONVERT};
    add(text({"--llama2c"}, "FILE", "llama2.c legacy (version 0) checkpoint",
             [](common_params & p, const std::string & v) { p.convert_llama2c = v; })).set_examples(CONVERT);
    add(text({"--tokenizer"}, "FILE", "llama2.c tokenizer (tokenizer.bin format)",
             [](common_params & p, const std::string & v) { p.convert_tokenizer = v; })).set_examples(CONVERT);
    add(text({"--hf"}, "DIR", "Hugging Face LlamaForCausalLM / Qwen2ForCausalLM directory (config.json, *.safetensors, "
             "tokenizer.json, tokenizer_config.json)", [](common_params & p, const std::string & v) { p.convert_hf = v; }))
        .set_examples(CONVERT);
    add(text({"--lora"}, "DIR", "PEFT LoRA adapter (adapter_config.json, adapter_model.safetensors), written as llama.cpp's "
             "GGUF adapter (as convert_lora_to_gguf.py does)", [](common_params & p, const std::string & v) { p.convert_lora = v; }))
        .set_examples(CONVERT);
    add(text({"--base"}, "FILE", "with --lora: the GGUF base model the adapter is for (tensor names, shapes, Q/K row order); "
             "its weights are not read", [](common_params & p, const std::string & v) { p.convert_base = v; }))
        .set_examples(CONVERT);
    add(text({"-o", "--outfile"}, "FILE", "GGUF file to write", [](common_params & p, const std::string & v) { p.out_file = v; }))
        .set_examples(CONVERT);
    add(text({"--outtype"}, "T", "f32, f16, bf16 or q8_0 for the matrices (default: the source's type; 1-D tensors are always "
             "F32); f32, f16 or bf16 for --lora (default: the adapter's type when all its tensors have one, else f32)",
             [](common_params & p, const std::string & v) {
                 if (v != "f32" && v != "f16" && v != "bf16" && v != "q8_0") throw_value("'" + v + "' (f32, f16, bf16 or q8_0)");
                 p.out_type = v;
             })).set_examples(CONVERT);

    // ---- llama-finetune ----
    {
        const std::initializer_list<E> FT = {LLAMA_EXAMPLE_FINETUNE};
        using F = common_params_finetune;
        // A float option as a finite number in [lo, hi] (or (lo, hi] when lo_open).
        const auto real = [&](std::vector<std::string> names, double lo, double hi, bool lo_open, std::string help, float F::*field) {
            const std::string name = names[0];
            add(number(std::move(names), "X", lo, hi, std::move(help), [=](common_params & p, double v) {
                if (lo_open && v == lo) throw_value("'" + std::to_string(v) + "' (a number > " + std::to_string(lo) + ")");
                p.finetune.*field = (float) v;
            })).set_examples(FT);
        };
        const auto count = [&](std::vector<std::string> names, const char * hint, double lo, double hi, std::string help, int64_t F::*field) {
            add(integer(std::move(names), hint, lo, hi, std::move(help), [=](common_params & p, int64_t v) { p.finetune.*field = v; }))
                .set_examples(FT);
        };
        const auto path = [&](std::vector<std::string> names, const char * hint, std::string help, std::string F::*field) {
            add(text(std::move(names), hint, std::move(help), [=](common_params & p, const std::string & v) { p.finetune.*field = v; }))
                .set_examples(FT);
        };
        add(integer({"--lora-r"}, "R", 1, 65536, "rank (default 8)", [](common_params & p, int64_t v) {
                p.finetune.r = (int32_t) v;
                p.finetune.r_set = true;
            })).set_examples(FT);
        add(number({"--lora-alpha"}, "A", -1e6, 1e6, "alpha; B A is scaled by alpha / r (default 16)", [](common_params & p, double v) {
                p.finetune.alpha = (float) v;
                p.finetune.alpha_set = true;
            })).set_examples(FT);
        real({"--lora-dropout"}, 0.0, 0.99, false, "dropout on the input of A, as PEFT (default 0)", &F::dropout);
        add(text({"--lora-targets"}, "LIST", "comma-separated from q,k,v,o,gate,up,down,output, qkv,gate_up (Phi-3), router (experts); default: the attention projections",
                 [](common_params & p, const std::string & v) {
                     std::vector<std::string> targets;
                     for (const std::string & name : split_commas(v)) {
                         if (name.empty()) continue;
                         if (!llama_hf_is_target(name)) throw_arg("unknown LoRA target '" + name + "' (" + llama_hf_target_names() + ")");
                         if (std::find(targets.begin(), targets.end(), name) == targets.end()) targets.push_back(name);
                     }
                     if (targets.empty()) throw_arg("--lora-targets is empty");
                     p.finetune.targets = targets;
                     p.finetune.targets_set = true;
                 })).set_examples(FT);
        path({"--lora-in"}, "ADAPTER", "start from this adapter (GGUF or PEFT dir): its rank, alpha, targets", &F::lora_in);
        add(text({"--outtype"}, "f32|f16", "type of the written adapter (default f32)", [](common_params & p, const std::string & v) {
                if (v != "f32" && v != "f16") throw_value("'" + v + "' (f32 or f16)");
                p.finetune.outtype = v == "f16" ? GGML_TYPE_F16 : GGML_TYPE_F32;
            })).set_examples(FT);
        path({"--peft-out"}, "DIR", "also write a PEFT adapter (adapter_config.json, adapter_model.safetensors)", &F::peft_out);
        add(text({"--data-format"}, "text|jsonl", "plain text (default), or one JSON example per line: {\"messages\": [{\"role\", "
                 "\"content\"}...]} (chat template; loss on the assistant turns) or {\"prompt\", \"completion\"} (loss on the completion)",
                 [](common_params & p, const std::string & v) {
                     if (v != "text" && v != "jsonl") throw_value("'" + v + "' (text or jsonl)");
                     p.finetune.data_jsonl = v == "jsonl";
                 })).set_examples(FT);
        add(integer({"-c", "--ctx-size"}, "N", 2, 1 << 20, "tokens per sequence (default 256)",
                    [](common_params & p, int64_t v) { p.finetune.n_ctx = (int32_t) v; })).set_examples(FT);
        add(flag({"--no-shuffle"}, "keep the data order (default: shuffled every epoch with --seed)",
                 [](common_params & p) { p.finetune.shuffle = false; })).set_examples(FT);
        real({"--val-split"}, 0.0, 0.9, false, "hold out this fraction of the sequences; report their loss", &F::val_split);
        add(text({"--opt"}, "adamw|sgd", "optimizer (default adamw)", [](common_params & p, const std::string & v) {
                if (v != "adamw" && v != "sgd") throw_value("'" + v + "' (adamw or sgd)");
                p.finetune.opt = v == "sgd" ? GGML_OPT_OPTIMIZER_TYPE_SGD : GGML_OPT_OPTIMIZER_TYPE_ADAMW;
            })).set_examples(FT);
        real({"--lr"}, 0.0, 10.0, true, "learning rate (default 1e-3)", &F::lr);
        real({"--wd"}, 0.0, 1.0, false, "decoupled weight decay (default 0.01 for adamw, 0 for sgd)", &F::wd);
        real({"--beta1"}, 0.0, 0.9999999, false, "AdamW beta1 (default 0.9)", &F::beta1);
        real({"--beta2"}, 0.0, 0.9999999, false, "AdamW beta2 (default 0.999)", &F::beta2);
        real({"--eps"}, 0.0, 1.0, true, "AdamW epsilon (default 1e-8)", &F::eps);
        add(text({"--lr-schedule"}, "constant|cosine", "learning-rate schedule (default constant); --warmup N steps of linear warm-up",
                 [](common_params & p, const std::string & v) {
                     if (v != "constant" && v != "cosine") throw_value("'" + v + "' (constant or cosine)");
                     p.finetune.cosine = v == "cosine";
                 })).set_examples(FT);
        count({"--warmup"}, "N", 0, 1e15, "steps of linear warm-up (default 0)", &F::warmup);
        real({"--lr-min"}, 0.0, 1.0, false, "cosine: the final learning rate as a fraction of --lr (default 0)", &F::min_lr_factor);
        real({"--grad-clip"}, 0.0, 1e9, false, "clip the gradients' global L2 norm to X (default off)", &F::grad_clip);
        add(integer({"-b", "--batch"}, "N", 1, 1 << 16, "sequences per optimizer step (default 1; per process under MPI)",
                    [](common_params & p, int64_t v) { p.finetune.n_batch = (int32_t) v; })).set_examples(FT);
        add(integer({"--grad-acc"}, "K", 1, 1 << 16, "multiply the sequences per step by K (gradient accumulation)",
                    [](common_params & p, int64_t v) { p.finetune.grad_acc = (int32_t) v; })).set_examples(FT);
        count({"--steps"}, "N", 1, 1e12, "length of the run in optimizer steps (default: 1 epoch)", &F::steps);
        count({"--epochs"}, "N", 1, 1 << 20, "length of the run in epochs (default 1)", &F::epochs);
        add(integer({"--seed"}, "N", 0, UINT32_MAX, "seed of A's initialization, the shuffling and the dropout (default 0)",
                    [](common_params & p, int64_t v) { p.finetune.seed = (uint32_t) v; })).set_examples(FT);
        add(flag({"--checkpointing"}, "recompute activations layer by layer in the backward pass (least memory)",
                 [](common_params & p) { p.finetune.checkpointing = true; })).set_examples(FT);
        add(flag({"--no-recompute"}, "keep every activation for the backward pass (most memory); by default attention and "
                 "elementwise results are recomputed, weight products kept", [](common_params & p) { p.finetune.no_recompute = true; }))
            .set_examples(FT);
        add(text({"--backward-prec"}, "auto|f32|bf16|int8", "products through the frozen weights in the backward pass (auto: bf16 "
                 "for quantized weights or with -ngl, f32 otherwise)", [](common_params & p, const std::string & v) {
                     if (v != "auto" && v != "f32" && v != "bf16" && v != "int8") throw_value("'" + v + "' (auto, f32, bf16 or int8)");
                     p.finetune.backward_prec = v;
                 })).set_examples(FT);
        path({"--loss-log"}, "FILE", "TSV: step, loss, lr, tokens_per_s (row 0: before any update)", &F::loss_log);
        path({"--plot"}, "FILE.svg", "the loss curve (train and validation)", &F::plot);
        count({"--save-every"}, "N", 1, 1e12, "write a checkpoint every N steps (atomically)", &F::save_every);
        path({"--checkpoint-out"}, "FILE", "where checkpoints go (default: ADAPTER.ckpt.gguf)", &F::checkpoint_out);
        path({"--resume"}, "CHECKPOINT", "continue a run (same options); Ctrl-C saves a checkpoint and exits 0", &F::resume);
        add(flag({"--bench"}, "measure training tokens/s and peak memory on random tokens", [](common_params & p) { p.finetune.bench = true; }))
            .set_examples(FT);
    }

    // ---- llama-quantize ----
    const std::initializer_list<E> QUANTIZE = {LLAMA_EXAMPLE_QUANTIZE};
    const auto weight_type = [](const std::string & v) {
        const ggml_type t = common_parse_weight_type(v);
        if (t == GGML_TYPE_COUNT) throw_value("'" + v + "' (a ggml type name: q8_0, q6_K, q4_0, f16, ...)");
        return t;
    };
    add(flag({"--allow-requantize"}, "allow requantizing tensors that are already quantized (quality suffers)",
             [](common_params & p) { p.quantize_allow_requantize = true; })).set_examples(QUANTIZE);
    add(flag({"--leave-output-tensor"}, "leave output.weight unquantized (a larger model, perhaps better quality)",
             [](common_params & p) { p.quantize_leave_output = true; })).set_examples(QUANTIZE);
    add(flag({"--pure"}, "every tensor of the type's base type: no k-quant mixture", [](common_params & p) { p.quantize_pure = true; }))
        .set_examples(QUANTIZE);
    add(text({"--output-tensor-type"}, "GGML_TYPE", "the type of output.weight",
             [weight_type](common_params & p, const std::string & v) { p.quantize_output_type = weight_type(v); }))
        .set_examples(QUANTIZE);
    add(text({"--token-embedding-type"}, "GGML_TYPE", "the type of token_embd.weight",
             [weight_type](common_params & p, const std::string & v) { p.quantize_token_embd_type = weight_type(v); }))
        .set_examples(QUANTIZE);

    add(text({"--imatrix"}, "FNAME", "importance matrix (llama-imatrix's, .dat or GGUF) weighting each column's error in the quantizers",
             [](common_params & p, const std::string & v) { p.quantize_imatrix = v; })).set_examples(QUANTIZE);
    add(text({"--include-weights"}, "NAME", "use the importance matrix only for tensors whose name contains NAME (repeatable; "
             "not with --exclude-weights)", [](common_params & p, const std::string & v) { p.quantize_include_weights.push_back(v); }))
        .set_examples(QUANTIZE);
    add(text({"--exclude-weights"}, "NAME", "do not use the importance matrix for tensors whose name contains NAME (repeatable)",
             [](common_params & p, const std::string & v) { p.quantize_exclude_weights.push_back(v); })).set_examples(QUANTIZE);
    add(flag({"--keep-split"}, "write the output as the input's shards, OUT being their prefix (a single-file input: "
             "OUT-00001-of-00001.gguf, as llama.cpp; split inputs are not supported)",
             [](common_params & p) { p.quantize_keep_split = true; })).set_examples(QUANTIZE);

    // ---- llama-export-lora ----
    add(text({"-o", "--output", "--output-file"}, "FNAME", "GGUF file to write, whole or not at all (llama-export-lora: the merged "
             "model; llama-finetune: the adapter, required unless --bench; llama-imatrix: the importance matrix, GGUF when the name "
             "ends in .gguf, else llama.cpp 4747's .dat (see --output-format), default imatrix.dat)",
             [](common_params & p, const std::string & v) { p.out_file = v; }))
        .set_examples({LLAMA_EXAMPLE_EXPORT_LORA, LLAMA_EXAMPLE_FINETUNE, LLAMA_EXAMPLE_IMATRIX});
    add(text({"--outtype"}, "T", "type of the merged tensors (default: each tensor's own): " + common_merge_type_names(),
             [](common_params & p, const std::string & v) {
                 if (common_parse_merge_type(v) == GGML_TYPE_COUNT) throw_value("'" + v + "' (" + common_merge_type_names() + ")");
                 p.out_type = v;
             })).set_examples({LLAMA_EXAMPLE_EXPORT_LORA});

    // ---- llama-logits ----
    add(text({"-o", "--output"}, "FNAME", "the logits file to write (the reference logits format)",
             [](common_params & p, const std::string & v) { p.out_file = v; })).set_examples({LLAMA_EXAMPLE_LOGITS}).set_group(COMMON_ARG_GROUP_EXAMPLE);
    add(text({"--tokens"}, "IDS", "comma-separated token ids to evaluate instead of a prompt",
             [](common_params & p, const std::string & v) {
                 p.tokens.clear();
                 std::string cur;
                 for (size_t i = 0; i <= v.size(); i++) {
                     if (i < v.size() && v[i] != ',') {
                         cur += v[i];
                         continue;
                     }
                     char * end = nullptr;
                     errno = 0;
                     const long x = strtol(cur.c_str(), &end, 10);
                     if (cur.empty() || *end != '\0' || errno == ERANGE || x < 0 || x > INT32_MAX) {
                         throw_value("'" + v + "' (comma-separated non-negative integers)");
                     }
                     p.tokens.push_back((llama_token) x);
                     cur.clear();
                 }
             })).set_examples({LLAMA_EXAMPLE_LOGITS}).set_group(COMMON_ARG_GROUP_EXAMPLE);

    // llama-batched, llama-batched-bench and llama-parallel take llama.cpp's common options (its
    // LLAMA_EXAMPLE_COMMON): those llama-perplexity takes but its own (and -np, above). Where
    // llama.cpp's program ignores one, it is taken with the note: llama-batched sets the context
    // and batch sizes itself and samples with top-k, top-p, temperature and the seed only;
    // llama-batched-bench neither samples nor reads a prompt.
    for (common_arg & a : t) {
        if (!a.examples.count(LLAMA_EXAMPLE_PERPLEXITY) || a.examples.size() == 1 || a.args[0] == "-np") continue;
        const auto named = [&](std::initializer_list<const char *> names) {
            for (const char * n : names) {
                if (std::find(a.args.begin(), a.args.end(), n) != a.args.end()) return true;
            }
            return false;
        };
        const bool sampling = a.group == COMMON_ARG_GROUP_SAMPLING;
        const bool ignored_by_all = named({"--verbose-prompt", "--no-context-shift", "--keep"});
        for (E e : MULTI) {
            a.examples.insert(e);
            bool no_effect = ignored_by_all;
            if (e == LLAMA_EXAMPLE_BATCHED) {
                no_effect |= (sampling && !named({"--temp", "--top-k", "--top-p", "--seed"})) || named({"--ctx-size", "--batch-size"});
            } else if (e == LLAMA_EXAMPLE_BATCHED_BENCH) {
                no_effect |= sampling || a.no_effect.count(LLAMA_EXAMPLE_PERPLEXITY) ||
                             named({"--prompt", "--file", "--binary-file", "--escape", "--no-escape"});
            }
            if (no_effect) a.no_effect.insert(e);
        }
    }

    // llama-save-load-state takes them too (llama.cpp's LLAMA_EXAMPLE_COMMON program); it samples
    // with the seed only (a plain draw).
    for (common_arg & a : t) {
        if (!a.examples.count(LLAMA_EXAMPLE_PERPLEXITY) || a.examples.size() == 1 || a.args[0] == "-np") continue;
        a.examples.insert(LLAMA_EXAMPLE_SAVE_LOAD_STATE);
        const bool seed = std::find(a.args.begin(), a.args.end(), std::string("--seed")) != a.args.end();
        for (const char * n : {"--verbose-prompt", "--no-context-shift", "--keep"}) {
            if (std::find(a.args.begin(), a.args.end(), std::string(n)) != a.args.end()) a.no_effect.insert(LLAMA_EXAMPLE_SAVE_LOAD_STATE);
        }
        if (a.group == COMMON_ARG_GROUP_SAMPLING && !seed) {
            a.no_effect.insert(LLAMA_EXAMPLE_SAVE_LOAD_STATE);
        }
    }

    // llama-server takes the common options too (as llama-perplexity takes them), but the prompt's:
    // its prompts come in requests.
    for (common_arg & a : t) {
        if (!a.examples.count(LLAMA_EXAMPLE_PERPLEXITY) || a.examples.size() == 1 || a.args[0] == "-np") continue;
        a.examples.insert(LLAMA_EXAMPLE_SERVER);
        for (const char * n : {"--prompt", "--file", "--binary-file", "--escape", "--no-escape", "--verbose-prompt"}) {
            if (std::find(a.args.begin(), a.args.end(), std::string(n)) != a.args.end()) a.no_effect.insert(LLAMA_EXAMPLE_SERVER);
        }
    }
    for (common_arg & a : t) {
        for (const char * n : {"--chat-template", "--chat-template-file", "-n", "--keep"}) {
            if (a.args[0] == n && a.examples.count(LLAMA_EXAMPLE_MAIN)) a.examples.insert(LLAMA_EXAMPLE_SERVER);
        }
    }
    add(text({"--host"}, "HOST", "ip address to listen on (default: 127.0.0.1)", [](common_params & p, const std::string & v) { p.hostname = v; }))
        .set_examples({LLAMA_EXAMPLE_SERVER}).set_env("LLAMA_ARG_HOST");
    add(integer({"--port"}, "PORT", 0, 65535, "port to listen on (default: 8080; 0: any free port, printed)",
                [](common_params & p, int64_t v) { p.port = (int32_t) v; })).set_examples({LLAMA_EXAMPLE_SERVER}).set_env("LLAMA_ARG_PORT");
    add(text({"--api-key"}, "KEY", "API key a request must carry (Authorization: Bearer KEY) on every endpoint but /health; "
                                   "repeatable, comma-separated (default: none)",
             [](common_params & p, const std::string & v) {
                 for (const std::string & k : split_commas(v)) {
                     if (!k.empty()) p.api_keys.push_back(k);
                 }
             })).set_examples({LLAMA_EXAMPLE_SERVER}).set_env("LLAMA_API_KEY");
    add(text({"--api-key-file"}, "FNAME", "a file of API keys, one per line",
             [](common_params & p, const std::string & v) {
                 std::istringstream in(read_text_file(v, "API key file"));
                 for (std::string k; std::getline(in, k);) {
                     if (!k.empty() && k.back() == '\r') k.pop_back();
                     if (!k.empty()) p.api_keys.push_back(k);
                 }
             })).set_examples({LLAMA_EXAMPLE_SERVER});
    add(integer({"-to", "--timeout"}, "N", 1, 86400, "seconds a client may take to send its request or read the answer (default: 600); request headers must "
                                                  "come within this or 10 s, whichever is less",
                [](common_params & p, int64_t v) { p.timeout_read = (int32_t) v; })).set_examples({LLAMA_EXAMPLE_SERVER}).set_env("LLAMA_ARG_TIMEOUT");
    add(integer({"--threads-http"}, "N", -1, 1024, "threads kept for HTTP connections (default: -1, -np + 2); more start while all are busy, up to max(4 N, 256)",
                [](common_params & p, int64_t v) { p.n_threads_http = (int32_t) v; })).set_examples({LLAMA_EXAMPLE_SERVER})
        .set_env("LLAMA_ARG_THREADS_HTTP");
    add(flag({"--slots"}, "expose the slots monitoring endpoint GET /slots (default: enabled)",
             [](common_params & p) { p.endpoint_slots = true; })).set_examples({LLAMA_EXAMPLE_SERVER}).set_env("LLAMA_ARG_ENDPOINT_SLOTS");
    add(flag({"--no-slots"}, "disable GET /slots", [](common_params & p) { p.endpoint_slots = false; })).set_examples({LLAMA_EXAMPLE_SERVER});
    add(flag({"--metrics"}, "enable GET /metrics, Prometheus-compatible (default: disabled)",
             [](common_params & p) { p.endpoint_metrics = true; })).set_examples({LLAMA_EXAMPLE_SERVER}).set_env("LLAMA_ARG_ENDPOINT_METRICS");
    add(flag({"--embedding", "--embeddings"}, "serve embeddings only (POST /v1/embeddings; pooled by --pooling or the model's)",
             [](common_params & p) { p.embedding = true; })).set_examples({LLAMA_EXAMPLE_SERVER}).set_env("LLAMA_ARG_EMBEDDINGS");
    add(unsupported({"--path"}, "PATH", "the server serves no files: its chat page is built into the binary (no path from a request to the "
                                        "file system)")).set_examples({LLAMA_EXAMPLE_SERVER});

    // Options only one program has are that program's section of --help, as llama.cpp's; every
    // program takes -h.
    for (int e = 0; e < LLAMA_EXAMPLE_COUNT; e++) t[0].examples.insert((E) e);
    for (common_arg & a : t) {
        if (a.group == COMMON_ARG_GROUP_COMMON && a.examples.size() == 1 && a.args[0] != "-m" && a.args[0] != "-h" &&
            a.unsupported.empty()) {
            a.group = COMMON_ARG_GROUP_EXAMPLE;
        }
    }
    return t;
}

const std::vector<common_arg> & table() {
    static const std::vector<common_arg> t = make_table();
    return t;
}

std::string names_of(const common_arg & a) {
    std::string s;
    for (const auto & n : a.args) s += (s.empty() ? "" : ", ") + n;
    if (a.value_hint) s += std::string(" ") + a.value_hint;
    if (a.value_hint_2) s += std::string(" ") + a.value_hint_2;
    if (a.kind == common_arg::OPTIONAL_CHOICE) s += " [" + a.choices[0] + "|" + a.choices[1] + "|" + a.choices[2] + "]";
    return s;
}

// The option's value(s) given to its handler; throws std::invalid_argument with the message.
void apply_value(const common_arg & a, common_params & p, const std::string & flag, const std::string & v, const std::string & v2);

void apply(const common_arg & a, common_params & p, const std::string & flag, const std::string & v, const std::string & v2) {
    try {
        apply_value(a, p, flag, v, v2);
    } catch (const bad_value & e) {
        throw_arg("invalid value for " + flag + ": " + e.what());
    }
}

void apply_value(const common_arg & a, common_params & p, const std::string & flag, const std::string & v, const std::string & v2) {
    switch (a.kind) {
        case common_arg::NONE: if (a.on_flag) a.on_flag(p); return;
        case common_arg::STRING: a.on_string(p, v); return;
        case common_arg::OPTIONAL_CHOICE: a.on_string(p, v); return;
        case common_arg::STRING_PAIR: a.on_pair(p, v, v2); return;
        case common_arg::INT: {
            char * end = nullptr;
            errno = 0;
            const long long x = strtoll(v.c_str(), &end, 10);
            if (v.empty() || *end != '\0' || errno == ERANGE) throw_arg("invalid value for " + flag + ": '" + v + "' (expected an integer)");
            if ((double) x < a.lo || (double) x > a.hi) {
                char b[96];
                snprintf(b, sizeof(b), " (allowed %.0f .. %.0f)", a.lo, a.hi);
                throw_arg("value of " + flag + " out of range: " + v + b);
            }
            a.on_int(p, (int64_t) x);
            return;
        }
        case common_arg::FLOAT: {
            char * end = nullptr;
            errno = 0;
            const double x = strtod(v.c_str(), &end);
            if (v.empty() || *end != '\0' || errno == ERANGE || x != x) throw_arg("invalid value for " + flag + ": '" + v + "' (expected a number)");
            if (x < a.lo || x > a.hi) {
                char b[96];
                snprintf(b, sizeof(b), " (allowed %g .. %g)", a.lo, a.hi);
                throw_arg("value of " + flag + " out of range: " + v + b);
            }
            a.on_float(p, x);
            return;
        }
    }
}

bool env_true(const std::string & v) { return v == "1" || v == "true" || v == "on" || v == "enabled"; }

}  // namespace

const char * common_example_name(llama_example ex) {
    switch (ex) {
        case LLAMA_EXAMPLE_MAIN: return "llama-cli";
        case LLAMA_EXAMPLE_SIMPLE: return "llama-simple";
        case LLAMA_EXAMPLE_PERPLEXITY: return "llama-perplexity";
        case LLAMA_EXAMPLE_BENCH: return "llama-bench";
        case LLAMA_EXAMPLE_QUANTIZE: return "llama-quantize";
        case LLAMA_EXAMPLE_FINETUNE: return "llama-finetune";
        case LLAMA_EXAMPLE_EXPORT_LORA: return "llama-export-lora";
        case LLAMA_EXAMPLE_CONVERT: return "llama-convert";
        case LLAMA_EXAMPLE_TOKENIZE: return "llama-tokenize";
        case LLAMA_EXAMPLE_LOGITS: return "llama-logits";
        case LLAMA_EXAMPLE_EMBEDDING: return "llama-embedding";
        case LLAMA_EXAMPLE_BATCHED: return "llama-batched";
        case LLAMA_EXAMPLE_BATCHED_BENCH: return "llama-batched-bench";
        case LLAMA_EXAMPLE_PARALLEL: return "llama-parallel";
        case LLAMA_EXAMPLE_SAVE_LOAD_STATE: return "llama-save-load-state";
        case LLAMA_EXAMPLE_SERVER: return "llama-server";
        case LLAMA_EXAMPLE_IMATRIX: return "llama-imatrix";
        default: return "llama";
    }
}

namespace {

const char * usage_line(llama_example ex) {
    switch (ex) {
        case LLAMA_EXAMPLE_MAIN: return "llama-cli -m MODEL [options]";
        case LLAMA_EXAMPLE_BENCH: return "llama-bench [options]";
        case LLAMA_EXAMPLE_FINETUNE: return "llama-finetune -m BASE.gguf -f DATA -o ADAPTER.gguf [options]\n"
                                            "       llama-finetune -m BASE.gguf --bench [-b N] [-c N] [--steps N] [-t N] [--lora-targets L]";
        case LLAMA_EXAMPLE_QUANTIZE: return "llama-quantize [options] IN.gguf [OUT.gguf] TYPE [NTHREADS]";
        case LLAMA_EXAMPLE_EXPORT_LORA: return "llama-export-lora -m BASE.gguf --lora FILE [--lora-scaled FILE SCALE] ... -o OUT.gguf "
                                               "[--outtype T] [-t N]";
        case LLAMA_EXAMPLE_CONVERT: return "llama-convert --llama2c MODEL.bin --tokenizer TOKENIZER.bin -o OUT.gguf [--outtype T]\n"
                                           "       llama-convert --hf DIR -o OUT.gguf [--outtype T]\n"
                                           "       llama-convert --lora PEFT_DIR --base BASE.gguf -o ADAPTER.gguf [--outtype T]";
        case LLAMA_EXAMPLE_PERPLEXITY: return "llama-perplexity -m MODEL -f TEXT [options]\n"
                                              "       llama-perplexity -m MODEL --kl-divergence-base FILE --kl-divergence [options]";
        case LLAMA_EXAMPLE_TOKENIZE: return "llama-tokenize -m MODEL (-p TEXT | -f FILE | --stdin) [options]";
        case LLAMA_EXAMPLE_LOGITS: return "llama-logits -m MODEL (-p PROMPT | --tokens IDS) -o OUT [options]";
        case LLAMA_EXAMPLE_BATCHED: return "llama-batched -m MODEL [-p PROMPT] [-n N] [-np N] [options]";
        case LLAMA_EXAMPLE_BATCHED_BENCH: return "llama-batched-bench -m MODEL [-c N] [-b N] [-ub N] -npp 128,256,512 -ntg 128,256 "
                                                 "-npl 1,2,4,8,16,32 [-pps] [options]";
        case LLAMA_EXAMPLE_PARALLEL: return "llama-parallel -m MODEL [-np N] [-ns N] [-n N] [-f PROMPTS] [options]";
        case LLAMA_EXAMPLE_SAVE_LOAD_STATE: return "llama-save-load-state -m MODEL [-p PROMPT] [-n N] [-s SEED] [options]";
        case LLAMA_EXAMPLE_SERVER: return "llama-server -m MODEL [--host 127.0.0.1] [--port 8080] [-np N] [-c N] [--api-key KEY] [options]";
        case LLAMA_EXAMPLE_EMBEDDING: return "llama-embedding -m MODEL (-p TEXT | -f FILE) [--pooling TYPE] [--embd-normalize N] "
                                             "[--embd-output-format json|json+|array] [options]";
        case LLAMA_EXAMPLE_IMATRIX: return "llama-imatrix -m MODEL -f TEXT [-o imatrix.dat|imatrix.gguf] [--output-format gguf|dat] "
                                           "[--process-output] [--no-ppl] [--chunk N] [--chunks N] [--output-frequency N] "
                                           "[--save-frequency N] [--in-file FILE ...]\n"
                                           "       llama-imatrix [-m MODEL] --in-file FILE [--in-file FILE ...] -o OUT.dat|OUT.gguf";
        default: return "";
    }
}

}  // namespace

std::vector<common_arg> common_args_for(llama_example ex) {
    std::vector<common_arg> out;
    for (const common_arg & a : table()) {
        if (a.examples.count(ex)) out.push_back(a);
    }
    return out;
}

std::string common_params_help(llama_example ex) {
    std::string s = std::string("usage: ") + usage_line(ex) + "\n";
    static const char * const titles[] = {"----- common params -----", "----- sampling params -----", "----- example-specific params -----"};
    for (int g = 0; g < 3; g++) {
        std::string body;
        for (const common_arg & a : table()) {
            if (!a.examples.count(ex) || a.group != g) continue;
            std::string line = names_of(a);
            const std::string & help = a.help;
            // the names in a 36-column field, the help wrapped beside it, as llama.cpp prints it
            std::string text;
            std::vector<std::string> lines;
            std::istringstream words(help);
            size_t col = 0;
            for (std::string w; words >> w;) {
                if (col > 0 && col + 1 + w.size() > 70) {
                    lines.push_back(text);
                    text.clear();
                    col = 0;
                }
                text += (col ? " " : "") + w;
                col += (col ? 1 : 0) + w.size();
            }
            if (!text.empty()) lines.push_back(text);
            if (a.env && ex != LLAMA_EXAMPLE_BENCH) lines.push_back(std::string("(env: ") + a.env + ")");  // llama-bench reads none
            if (line.size() >= 36) {
                body += line + "\n";
                line.clear();
            }
            for (size_t i = 0; i < lines.size(); i++) {
                std::string l = i == 0 ? line : "";
                l.resize(37, ' ');
                body += l + lines[i] + "\n";
            }
        }
        if (!body.empty()) s += std::string("\n") + titles[g] + "\n\n" + body;
    }
    if (ex == LLAMA_EXAMPLE_BENCH) {
        s += "\nMultiple values can be given for each parameter by separating them with ','\n"
             "or by specifying the parameter multiple times. Ranges can be given as\n"
             "'first-last' or 'first-last+step' or 'first-last*mult'.\n"
             "The prompt is evaluated in decodes of -b tokens, each in graphs of min(-b, -ub) tokens.\n";
    }
    return s;
}

namespace {

// One integer at *p (advanced past it); false when there is none or it is out of long long.
bool read_ll(const char *& p, long long & x) {
    if (!isdigit((unsigned char) *p) && !(*p == '-' && isdigit((unsigned char) p[1]))) return false;
    char * end = nullptr;
    errno = 0;
    x = strtoll(p, &end, 10);
    if (errno == ERANGE) return false;
    p = end;
    return true;
}

// "first-last", "first-last+step", "first-last*mult" as their values (llama.cpp's llama-bench
// ranges); anything else as it stands.
std::vector<std::string> expand_range(const std::string & flag, const std::string & item) {
    const char * p = item.c_str();
    long long first = 0, last = 0, step = 1;
    if (!read_ll(p, first) || *p != '-') return {item};
    p++;
    char op = '+';
    if (!read_ll(p, last)) return {item};
    if (*p == '+' || *p == '*') {
        op = *p++;
        if (!read_ll(p, step)) throw_arg("invalid value for " + flag + ": '" + item + "' (bad range step)");
    }
    if (*p != '\0') return {item};
    if (last < first) throw_arg("invalid value for " + flag + ": '" + item + "' (a range is first-last with first <= last)");
    if (step < (op == '+' ? 1 : 2) || (op == '*' && first < 1)) {
        throw_arg("invalid value for " + flag + ": '" + item + "' (bad range step)");
    }
    std::vector<std::string> out;
    for (long long x = first; x <= last; x = op == '+' ? x + step : x * step) {
        if (out.size() >= 4096) throw_arg("invalid value for " + flag + ": '" + item + "' (too many values)");
        out.push_back(std::to_string(x));
    }
    return out;
}

bool parse_impl(int argc, char ** argv, common_params & params, llama_example ex, std::vector<common_arg_list> * lists) {
    const char * prog = common_example_name(ex);
    std::map<std::string, const common_arg *> by_name;
    for (const common_arg & a : table()) {
        if (!a.examples.count(ex)) continue;
        for (const auto & n : a.args) by_name[n] = &a;
    }
    auto fail = [&](const std::string & msg) {
        fprintf(stderr, "%s: %s\n(see %s --help)\n", prog, msg.c_str(), prog);
        return false;
    };
    std::vector<std::string> given;  // the names given on the command line (which env values yield to)
    for (int i = 1; i < argc; i++) given.push_back(argv[i]);
    try {
        // The environment first (LLAMA_ARG_*), for options the command line does not set.
        for (const common_arg & a : table()) {
            if (lists || !a.examples.count(ex) || !a.env || !a.unsupported.empty()) continue;
            const char * v = getenv(a.env);
            if (!v) continue;
            bool on_cmdline = false;
            for (const auto & n : a.args) on_cmdline |= std::find(given.begin(), given.end(), n) != given.end();
            if (on_cmdline) continue;
            if (a.kind == common_arg::NONE) {
                if (env_true(v)) apply(a, params, a.env, "", "");
            } else {
                apply(a, params, a.env, v, "");
            }
        }
        for (int i = 1; i < argc; i++) {
            std::string name = argv[i];
            // llama-bench spells long options with underscores too (--n_prompt)
            if (lists && name.rfind("--", 0) == 0) std::replace(name.begin(), name.end(), '_', '-');
            // llama-quantize's IN [OUT] TYPE [NTHREADS]: words that are not options
            if (ex == LLAMA_EXAMPLE_QUANTIZE && (name.size() < 2 || name[0] != '-' || isdigit((unsigned char) name[1]))) {
                params.positional.push_back(argv[i]);
                continue;
            }
            auto it = by_name.find(name);
            if (it == by_name.end()) return fail("unknown option '" + name + "'");
            const common_arg & a = *it->second;
            if (a.args[0] == "-h") {
                fputs(common_params_help(ex).c_str(), stdout);
                exit(0);
            }
            const bool as_list = lists && !a.single && a.kind != common_arg::NONE && a.kind != common_arg::STRING_PAIR;
            std::string v, v2;
            if (a.kind == common_arg::STRING || a.kind == common_arg::INT || a.kind == common_arg::FLOAT || a.kind == common_arg::STRING_PAIR ||
                (as_list && a.kind == common_arg::OPTIONAL_CHOICE)) {
                if (i + 1 >= argc || (a.kind == common_arg::STRING_PAIR && i + 2 >= argc)) return fail("missing value for " + name);
                // "-p -r 3" is a forgotten value, not a value "-r" (negative numbers still pass)
                if (lists && argv[i + 1][0] == '-' && isalpha((unsigned char) argv[i + 1][1])) return fail("missing value for " + name);
                v = argv[++i];
                if (a.kind == common_arg::STRING_PAIR) v2 = argv[++i];
            } else if (a.kind == common_arg::OPTIONAL_CHOICE && i + 1 < argc &&
                       std::find(a.choices.begin(), a.choices.end(), argv[i + 1]) != a.choices.end()) {
                v = argv[++i];
            }
            if (!a.unsupported.empty()) return fail("'" + name + "' is not supported: " + a.unsupported);
            if (a.no_effect.count(ex)) fprintf(stderr, "%s: note: %s has no effect here\n", prog, name.c_str());
            if (!as_list) {
                apply(a, params, name, v, v2);
                continue;
            }
            auto li = std::find_if(lists->begin(), lists->end(), [&](const common_arg_list & l) { return l.arg == &a; });
            if (li == lists->end()) {
                lists->push_back({&a, name, {}});
                li = lists->end() - 1;
            }
            for (const std::string & item : split_commas(v)) {
                const std::vector<std::string> values =
                    a.kind == common_arg::INT || a.int_ranges ? expand_range(name, item) : std::vector<std::string>{item};
                for (const std::string & x : values) {
                    common_params scratch = params;  // checked as the option alone would check it
                    apply(a, scratch, name, x, "");
                    li->values.push_back(x);
                }
            }
        }
    } catch (const std::invalid_argument & e) {
        return fail(e.what());
    }
    return true;
}

}  // namespace

namespace {

// A bash completion function for the program: its options' names, and file names after the
// options that take a file.
void print_completion_bash(llama_example ex) {
    const std::string prog = common_example_name(ex);
    std::string fn = "_" + prog + "_completions";
    for (char & c : fn) c = c == '-' ? '_' : c;
    std::string names, file_opts;
    for (const common_arg & a : table()) {
        if (!a.examples.count(ex)) continue;
        for (const auto & n : a.args) {
            names += (names.empty() ? "" : " ") + n;
            const std::string hint = a.value_hint ? a.value_hint : "";
            if (hint.find("FNAME") != std::string::npos || hint.find("FILE") != std::string::npos || hint == "DIR") {
                file_opts += (file_opts.empty() ? "" : "|") + n;
            }
        }
    }
    printf("%s() {\n", fn.c_str());
    printf("    local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n");
    if (!file_opts.empty()) {
        printf("    case \"$prev\" in\n        %s)\n            COMPREPLY=( $(compgen -f -- \"$cur\") )\n            return 0 ;;\n    esac\n",
               file_opts.c_str());
    }
    printf("    COMPREPLY=( $(compgen -W \"%s\" -- \"$cur\") )\n", names.c_str());
    printf("}\ncomplete -F %s %s\n", fn.c_str(), prog.c_str());
}

}  // namespace

bool common_params_parse_lists(int argc, char ** argv, common_params & params, llama_example ex, std::vector<common_arg_list> & lists) {
    return parse_impl(argc, argv, params, ex, &lists);
}

void common_arg_apply(const common_arg & a, common_params & params, const std::string & name, const std::string & value) {
    apply(a, params, name, value, "");
}

bool common_params_parse(int argc, char ** argv, common_params & params, llama_example ex) {
    if (!parse_impl(argc, argv, params, ex, nullptr)) return false;
    const char * prog = common_example_name(ex);
    if (params.completion_bash) {
        print_completion_bash(ex);
        exit(0);
    }
    if (params.print_version) {
        printf("%s (llama-engine) version %s\n", prog, LLAMA_ENGINE_VERSION);
        printf("built with %s for %s%s%s, CPU kernels: %s\n", LLAMA_BUILD_COMPILER, LLAMA_BUILD_TARGET, LLAMA_BUILD_TYPE[0] ? ", " : "",
               LLAMA_BUILD_TYPE, ggml_cpu_isa_name());
        exit(0);
    }
    return true;
}
