// llama-cli: generates text from a prompt, or chats (-cnv), with a GGUF model; llama.cpp's flags.
//
// Standard output carries the prompt followed by the generated text and nothing else (in
// interactive mode also --in-prefix / --in-suffix; the user's lines are not echoed, as in
// llama.cpp: a terminal shows them as typed); logs and timings go to standard error. When the
// context fills up, the oldest half of the tokens after the first --keep (and BOS) is dropped and
// generation goes on; a prompt longer than the context is evaluated through the same shift.
#include "llama.h"
#include "../shared-flags.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#ifndef LLAMA_ENGINE_VERSION
#define LLAMA_ENGINE_VERSION ""
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

struct cli_params {
    std::string model;
    std::string prompt;
    bool has_prompt = false;
    std::string system_prompt;  // -sys: the system message of chat mode
    int32_t n_predict = -1;   // -1: until end of generation
    int32_t n_ctx = 0;        // 0: min(model's context, 4096)
    int32_t n_batch = 512;    // prompt tokens per llama_decode call
    int32_t n_ubatch = 512;   // tokens per graph (the context's n_ubatch)
    int32_t n_threads = 0;    // 0: all cores
    int32_t n_threads_batch = -1;  // -tb; -1: as n_threads
    bool use_mlock = false;
    std::string numa;  // --numa: accepted, noted (threads are not placed by NUMA node)
    bool verbose_prompt = false;  // the prompt's tokens on standard error
    bool perf = true;             // the timings at the end (--no-perf: none)
    int32_t n_keep = 0;       // -1: the whole prompt
    int64_t seed = -1;        // -1: random
    float temp = 0.8f;
    int32_t top_k = 40;
    float top_p = 0.95f;
    float min_p = 0.05f;
    float repeat_penalty = 1.0f;
    int32_t repeat_last_n = 64;  // -1: the context size
    float presence_penalty = 0.0f;
    float frequency_penalty = 0.0f;
    int32_t mirostat = 0;        // 0 off, 1 Mirostat, 2 Mirostat 2.0
    float mirostat_tau = 5.0f;   // --mirostat-ent
    float mirostat_eta = 0.1f;   // --mirostat-lr
    bool ignore_eos = false;
    bool escape = true;          // as llama.cpp: on unless --no-escape
    bool color = false;
    bool display_prompt = true;
    bool interactive = false;
    bool interactive_first = false;
    std::vector<std::string> antiprompts;  // -r, repeatable
    std::string input_prefix, input_suffix;
    bool conversation = false;
    std::string chat_template;  // empty: the model's, else ChatML
    ggml_type cache_type_k = GGML_TYPE_F16;
    ggml_type cache_type_v = GGML_TYPE_F16;
    bool flash_attn = false;
    bool use_mmap = true;
    bool use_repack = true;
    std::vector<std::pair<std::string, float>> loras;  // LoRA adapter path, scale
    gpu_options gpu;  // -ngl, -sm, -mg, -nkvo
};

// Logs: 0 errors only (--log-disable), 1 errors, warnings and information (default), 2 also the
// CLI's debug lines (-v).
int g_verbosity = 1;

enum { LOG_ERROR = 2, LOG_WARN = 3, LOG_INFO = 4, LOG_DEBUG = 5 };

bool log_shown(int level) { return level <= LOG_ERROR || (level <= LOG_INFO ? g_verbosity >= 1 : g_verbosity >= 2); }

// The library's messages, at the CLI's levels.
void log_callback(enum ggml_log_level level, const char * text, void *) {
    const int cli_level = level == GGML_LOG_LEVEL_ERROR ? LOG_ERROR
                        : level == GGML_LOG_LEVEL_WARN  ? LOG_WARN
                        : level == GGML_LOG_LEVEL_DEBUG ? LOG_DEBUG
                                                        : LOG_INFO;
    if (!log_shown(cli_level)) return;
    fputs(text, stderr);
    fflush(stderr);
}

#ifdef __GNUC__
__attribute__((format(printf, 2, 3)))
#endif
void cli_log(int level, const char * fmt, ...) {
    if (!log_shown(level)) return;
    va_list args;
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fflush(stderr);
}

// Colors of --color, as llama.cpp's console: the prompt yellow, the user's input bold green.
const char * const COLOR_PROMPT = "\x1b[33m";
const char * const COLOR_INPUT = "\x1b[1m\x1b[32m";
const char * const COLOR_RESET = "\x1b[0m";

volatile sig_atomic_t g_interrupted = 0;

void on_sigint(int) {
    if (g_interrupted) {  // a second Ctrl-C while stopping: leave now
        std::signal(SIGINT, SIG_DFL);
        std::raise(SIGINT);
    }
    g_interrupted = 1;
}

void usage(FILE * out) {
    fprintf(out,
            "usage: llama-cli -m MODEL [options]\n\n"
            "  -m, --model FILE          GGUF model\n"
            "  -p, --prompt TEXT         prompt (default: empty, generation starts from BOS); with -cnv,\n"
            "                            the first user message\n"
            "  -f, --file FILE           read the prompt from a file (one trailing newline dropped)\n"
            "  -e, --escape              process escapes (\\n, \\r, \\t, \\', \\\", \\\\, \\xNN) in the prompt,\n"
            "                            reverse prompts, --in-prefix/--in-suffix and input lines\n"
            "                            (default: on, as llama.cpp)\n"
            "      --no-escape           take them literally\n"
            "  -n, --n-predict N         tokens to generate (-1: until the model ends; default -1);\n"
            "                            per turn in interactive and chat mode\n"
            "  -c, --ctx-size N          context size (default: the model's, at most 4096)\n"
            "  -b, --batch-size N        prompt tokens per llama_decode call (default 512)\n"
            "  -ub, --ubatch-size N      most tokens per graph (default 512)\n"
            "  -t, --threads N           threads (default: all cores)\n"
            "  -tb, --threads-batch N    threads for prompts and batches (default, or -1: as -t)\n"
            "      --numa distribute|isolate|numactl\n"
            "                            accepted and noted (threads are not placed by NUMA node)\n"
            "  -s, --seed N              random seed (default -1: random)\n"
            "      --keep N              prompt tokens kept when the context shifts (default 0; -1: all)\n"
            "\n"
            "sampling (chain: [--ignore-eos bias] -> penalties -> top-k -> top-p -> min-p -> temp -> draw;\n"
            "with --mirostat: temp -> mirostat, as llama.cpp):\n"
            "      --temp T              temperature (default 0.8; 0: greedy)\n"
            "      --top-k K             top-k (default 40; 0: off)\n"
            "      --top-p P             top-p (default 0.95; 1: off)\n"
            "      --min-p P             min-p (default 0.05; 0: off)\n"
            "      --repeat-penalty R    repetition penalty (default 1.0: off)\n"
            "      --repeat-last-n N     tokens the penalties look back (default 64; 0: off; -1: context)\n"
            "      --presence-penalty P  presence penalty (default 0.0: off)\n"
            "      --frequency-penalty F frequency penalty (default 0.0: off)\n"
            "      --mirostat N          Mirostat sampling: 0 off (default), 1 Mirostat, 2 Mirostat 2.0;\n"
            "                            top-k, top-p, min-p and the penalties are not used with it\n"
            "      --mirostat-ent TAU    Mirostat target entropy tau (default 5.0)\n"
            "      --mirostat-lr ETA     Mirostat learning rate eta (default 0.1)\n"
            "      --ignore-eos          never stop at end-of-generation tokens (they get a logit\n"
            "                            bias of -inf: never sampled)\n"
            "\n"
            "interaction:\n"
            "  -i, --interactive         after the prompt, generate until a reverse prompt, -n tokens or\n"
            "                            the end of generation, then read a line from standard input,\n"
            "                            append it and go on; end of input ends the program (exit 0).\n"
            "                            As llama.cpp: the line's newline is not appended (end a line\n"
            "                            with '\\' to go on to the next one with a newline, with '/' to\n"
            "                            send it without); an empty line lets the model go on\n"
            "  -if, --interactive-first  interactive, reading a line before generating\n"
            "  -r, --reverse-prompt TEXT stop generating when the output ends with TEXT (in interactive\n"
            "                            mode: read a line); repeatable\n"
            "      --in-prefix TEXT      text put before each input line (interactive mode)\n"
            "      --in-suffix TEXT      text put after each input line (interactive mode)\n"
            "  -cnv, --conversation      chat using the model's chat template (a model without one: ChatML)\n"
            "  -no-cnv, --no-conversation\n"
            "                            no chat (the default here: unlike llama.cpp, chat mode is never\n"
            "                            turned on by itself for a model with a chat template)\n"
            "  -sys, --system-prompt TEXT\n"
            "                            system message of chat mode\n"
            "      --chat-template NAME  llama2, llama3, chatml, zephyr, mistral, or a template text\n"
            "\n"
            "output and logs:\n"
            "      --color               color the prompt (yellow) and the user's input (green)\n"
            "      --no-display-prompt   do not print the prompt, only what is generated\n"
            "      --log-disable         no log on standard error but errors (no timings either)\n"
            "      --no-perf             no timings at the end\n"
            "      --verbose-prompt      print the prompt's tokens (id -> piece) before generating\n"
            "      --no-warmup, --simple-io\n"
            "                            accepted (no warm-up run is made; input and output are plain)\n"
            "  -v, --verbose             all logs, the CLI's debug lines included\n"
            "      --version             print the version and build information, and exit\n"
            "\n"
            "model and memory:\n"
            "      --mlock               keep the model's memory resident (a failure is a warning)\n"
            "      --cache-type T        KV cache type of K and V: f16 (default), f32, bf16, q8_0,\n"
            "                            q4_0, q4_1, iq4_nl, q5_0, q5_1 (block types: head size a multiple of 32)\n"
            "  -ctk, --cache-type-k T    KV cache type of K only\n"
            "  -ctv, --cache-type-v T    KV cache type of V only\n"
            "  -fa, --flash-attn [on|off|auto]\n"
            "                            fused attention reading the cache as stored, less memory\n"
            "                            (bare: on; auto: off)\n"
            "      --no-mmap             read the model into memory instead of mapping it\n"
            "      --no-repack           keep the file's weight layout (default: rearrange\n"
            "                            the matrices this CPU multiplies faster repacked)\n"
            "      --lora FILE           apply a LoRA adapter (GGUF file or PEFT directory) at\n"
            "                            scale 1; repeatable\n"
            "      --lora-scaled FILE SCALE\n"
            "                            apply a LoRA adapter at the given scale; repeatable\n"
            "%s"
            "  -h, --help                this help\n",
            gpu_options::help());
}

void print_version() {
    const char * version = LLAMA_ENGINE_VERSION[0] ? LLAMA_ENGINE_VERSION : "0.1.0";
    printf("llama-cli (llama-engine) version %s\n", version);
    printf("built with %s for %s%s%s, CPU kernels: %s\n", LLAMA_BUILD_COMPILER, LLAMA_BUILD_TARGET,
           LLAMA_BUILD_TYPE[0] ? ", " : "", LLAMA_BUILD_TYPE, ggml_cpu_isa_name());
}

[[noreturn]] void fail_arg(const std::string & msg) {
    fprintf(stderr, "llama-cli: %s\n(see llama-cli --help)\n", msg.c_str());
    exit(1);
}

int64_t parse_int64(const std::string & flag, const char * v, int64_t lo, int64_t hi) {
    char * end = nullptr;
    errno = 0;
    const long long x = strtoll(v, &end, 10);
    if (!*v || !end || *end != '\0' || errno == ERANGE) fail_arg("invalid value for " + flag + ": '" + v + "' (expected an integer)");
    if (x < lo || x > hi) {
        fail_arg("value of " + flag + " out of range: " + v + " (allowed " + std::to_string(lo) + " .. " + std::to_string(hi) + ")");
    }
    return (int64_t) x;
}

int32_t parse_int(const std::string & flag, const char * v, int32_t lo, int32_t hi) {
    return (int32_t) parse_int64(flag, v, lo, hi);
}

float parse_float(const std::string & flag, const char * v, float lo, float hi) {
    char * end = nullptr;
    errno = 0;
    const float x = strtof(v, &end);
    if (!*v || !end || *end != '\0' || errno == ERANGE || x != x) fail_arg("invalid value for " + flag + ": '" + v + "' (expected a number)");
    if (x < lo || x > hi) fail_arg("value of " + flag + " out of range: " + v);
    return x;
}

ggml_type parse_cache_type(const std::string & flag, const std::string & v) {
    ggml_type t;
    if (!parse_cache_type(v, &t)) fail_arg("invalid value for " + flag + ": '" + v + "' (" LLAMA_CACHE_TYPE_NAMES ")");
    return t;
}

// llama.cpp's escapes: \n \r \t \' \" \\ and \xNN; any other backslash stays as it is.
void process_escapes(std::string & s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); i++) {
        if (s[i] != '\\' || i + 1 >= s.size()) {
            out += s[i];
            continue;
        }
        const char c = s[++i];
        switch (c) {
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case '\'': out += '\''; break;
            case '"': out += '"'; break;
            case '\\': out += '\\'; break;
            case 'x':
                if (i + 2 < s.size() && isxdigit((unsigned char) s[i + 1]) && isxdigit((unsigned char) s[i + 2])) {
                    out += (char) strtol(s.substr(i + 1, 2).c_str(), nullptr, 16);
                    i += 2;
                    break;
                }
                out += '\\';
                out += c;
                break;
            default:
                out += '\\';
                out += c;
                break;
        }
    }
    s = out;
}

cli_params parse_args(int argc, char ** argv) {
    cli_params p;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        auto value = [&]() -> const char * {
            if (i + 1 >= argc) fail_arg("missing value for " + a);
            return argv[++i];
        };
        if (a == "-h" || a == "--help") {
            usage(stdout);
            exit(0);
        } else if (a == "--version") {
            print_version();
            exit(0);
        } else if (a == "-m" || a == "--model") {
            p.model = value();
        } else if (a == "-p" || a == "--prompt") {
            p.prompt = value();
            p.has_prompt = true;
        } else if (a == "-f" || a == "--file") {
            const char * path = value();
            std::ifstream in(path, std::ios::binary);
            if (!in) fail_arg(std::string("cannot read the prompt file '") + path + "'");
            std::stringstream ss;
            ss << in.rdbuf();
            p.prompt = ss.str();
            if (!p.prompt.empty() && p.prompt.back() == '\n') p.prompt.pop_back();  // as llama.cpp
            p.has_prompt = true;
        } else if (a == "-sys" || a == "--system-prompt") {
            p.system_prompt = value();
        } else if (a == "-e" || a == "--escape") {
            p.escape = true;
        } else if (a == "--no-escape") {
            p.escape = false;
        } else if (a == "-n" || a == "--n-predict" || a == "--predict") {
            p.n_predict = parse_int(a, value(), -1, INT32_MAX);
        } else if (a == "-c" || a == "--ctx-size") {
            p.n_ctx = parse_int(a, value(), 0, 1 << 24);
        } else if (a == "-b" || a == "--batch-size") {
            p.n_batch = parse_int(a, value(), 1, 1 << 20);
        } else if (a == "-ub" || a == "--ubatch-size") {
            p.n_ubatch = parse_int(a, value(), 1, 1 << 20);
        } else if (a == "-t" || a == "--threads") {
            p.n_threads = parse_int(a, value(), 1, 1024);
        } else if (a == "-tb" || a == "--threads-batch") {
            p.n_threads_batch = parse_int(a, value(), -1, 1024);  // -1 (llama.cpp's default): as -t
            if (p.n_threads_batch == 0) fail_arg("value of " + a + " out of range: 0 (allowed -1, 1 .. 1024)");
        } else if (a == "--mlock") {
            p.use_mlock = true;
        } else if (a == "--numa") {
            const std::string v = value();
            if (v != "distribute" && v != "isolate" && v != "numactl") fail_arg("invalid value for " + a + ": '" + v + "' (distribute, isolate or numactl)");
            p.numa = v;
        } else if (a == "--no-warmup" || a == "--simple-io") {
            // accepted: this CLI makes no warm-up run, and its input and output are plain already
        } else if (a == "--no-perf") {
            p.perf = false;
        } else if (a == "--verbose-prompt") {
            p.verbose_prompt = true;
        } else if (a == "-s" || a == "--seed") {
            p.seed = parse_int64(a, value(), -1, UINT32_MAX);
        } else if (a == "--temp") {
            p.temp = parse_float(a, value(), 0.0f, 1e6f);
        } else if (a == "--top-k") {
            p.top_k = parse_int(a, value(), 0, INT32_MAX);
        } else if (a == "--top-p") {
            p.top_p = parse_float(a, value(), 0.0f, 1.0f);
        } else if (a == "--min-p") {
            p.min_p = parse_float(a, value(), 0.0f, 1.0f);
        } else if (a == "--repeat-penalty") {
            p.repeat_penalty = parse_float(a, value(), 0.0f, 1e6f);
        } else if (a == "--repeat-last-n") {
            p.repeat_last_n = parse_int(a, value(), -1, INT32_MAX);
        } else if (a == "--presence-penalty") {
            p.presence_penalty = parse_float(a, value(), -1e6f, 1e6f);
        } else if (a == "--frequency-penalty") {
            p.frequency_penalty = parse_float(a, value(), -1e6f, 1e6f);
        } else if (a == "--mirostat") {
            p.mirostat = parse_int(a, value(), 0, 2);
        } else if (a == "--mirostat-ent") {
            p.mirostat_tau = parse_float(a, value(), 0.0f, 1e6f);
        } else if (a == "--mirostat-lr") {
            p.mirostat_eta = parse_float(a, value(), 0.0f, 1e6f);
        } else if (a == "--ignore-eos") {
            p.ignore_eos = true;
        } else if (a == "--keep") {
            p.n_keep = parse_int(a, value(), -1, INT32_MAX);
        } else if (a == "--cache-type") {
            p.cache_type_k = p.cache_type_v = parse_cache_type(a, value());
        } else if (a == "-ctk" || a == "--cache-type-k") {
            p.cache_type_k = parse_cache_type(a, value());
        } else if (a == "-ctv" || a == "--cache-type-v") {
            p.cache_type_v = parse_cache_type(a, value());
        } else if (a == "-fa" || a == "--flash-attn") {
            p.flash_attn = parse_flash_attn(argc, argv, i);
        } else if (a == "--no-mmap") {
            p.use_mmap = false;
        } else if (a == "--no-repack") {
            p.use_repack = false;
        } else if (a == "--lora") {
            p.loras.push_back({value(), 1.0f});
        } else if (a == "--lora-scaled") {
            const std::string path = value();
            p.loras.push_back({path, parse_float(a, value(), -1e6f, 1e6f)});
        } else if (a == "-i" || a == "--interactive") {
            p.interactive = true;
        } else if (a == "-if" || a == "--interactive-first") {
            p.interactive = p.interactive_first = true;
        } else if (a == "-r" || a == "--reverse-prompt") {
            const std::string r = value();
            if (r.empty()) fail_arg("empty reverse prompt (" + a + ")");
            p.antiprompts.push_back(r);
        } else if (a == "--in-prefix") {
            p.input_prefix = value();
        } else if (a == "--in-suffix") {
            p.input_suffix = value();
        } else if (a == "-cnv" || a == "--conversation") {
            p.conversation = true;
        } else if (a == "-no-cnv" || a == "--no-conversation") {
            p.conversation = false;
        } else if (a == "--chat-template") {
            p.chat_template = value();
        } else if (a == "-co" || a == "--color") {
            p.color = true;
            // llama.cpp's newer form takes on|off|auto.
            if (i + 1 < argc && (!strcmp(argv[i + 1], "on") || !strcmp(argv[i + 1], "off") || !strcmp(argv[i + 1], "auto"))) {
                const std::string v = argv[++i];
                p.color = v == "on" || (v == "auto" && isatty(fileno(stdout)));
            }
        } else if (a == "--no-display-prompt") {
            p.display_prompt = false;
        } else if (a == "--display-prompt") {
            p.display_prompt = true;
        } else if (a == "--log-disable") {
            g_verbosity = 0;
        } else if (a == "-v" || a == "--verbose" || a == "--log-verbose") {
            g_verbosity = 2;
        } else if (std::string err; p.gpu.parse(argc, argv, i, &err) != 0) {
            if (!err.empty()) fail_arg(err);
        } else {
            fail_arg("unknown option '" + a + "'");
        }
    }
    if (p.model.empty()) fail_arg("no model given (-m MODEL)");
    if (p.escape) {  // what llama.cpp processes
        process_escapes(p.prompt);
        process_escapes(p.input_prefix);
        process_escapes(p.input_suffix);
        for (auto & r : p.antiprompts) process_escapes(r);
    }
    return p;
}

// Why generate() stopped.
enum class gen_stop { limit, eog, reverse_prompt, interrupted, error };

// The generation loop's state: the context, how many positions are used, the sampler.
struct session {
    llama_context * ctx = nullptr;
    const llama_vocab * vocab = nullptr;
    llama_sampler * smpl = nullptr;
    int32_t n_ctx = 0;
    int32_t n_batch = 0;  // tokens per llama_decode call
    int32_t n_keep = 0;   // tokens at the start never dropped by a shift (BOS included)
    int32_t n_past = 0;
    std::vector<std::string> antiprompts;
    bool interactive = false;  // reverse prompts must end the text exactly
    std::string tail;  // the end of the text evaluated so far, where reverse prompts are looked for
    llama_token last_eog = LLAMA_TOKEN_NULL;  // the end-of-generation token generate() stopped at

    // Makes room for `need` more positions (at most n_ctx - n_keep) with one shift: drops half of
    // the context after the kept tokens (a fixed share of the context, not of what is left), or
    // more when `need` asks for it, so that any prompt length and batch size goes through.
    bool make_room(int32_t need) {
        need = std::min(need, n_ctx - n_keep);
        if (n_past + need <= n_ctx) return true;
        const int32_t n_left = n_past - n_keep;
        const int32_t n_discard = std::min(n_left, std::max((n_ctx - n_keep) / 2, n_past + need - n_ctx));
        if (n_discard <= 0) {  // cannot happen while n_keep < n_ctx
            fprintf(stderr, "llama-cli: no room left in the context (%d)\n", n_ctx);
            return false;
        }
        llama_kv_self_seq_rm(ctx, 0, n_keep, n_keep + n_discard);
        llama_kv_self_seq_add(ctx, 0, n_keep + n_discard, n_past, -n_discard);
        n_past -= n_discard;
        cli_log(LOG_INFO, "\nllama-cli: context full, dropped %d tokens\n", n_discard);
        return true;
    }

    // Evaluates tokens in batches, shifting the context as needed; logits of the last token kept.
    bool eval(const std::vector<llama_token> & tokens) {
        for (size_t i = 0; i < tokens.size(); i += (size_t) n_batch) {
            const int32_t n = (int32_t) std::min(tokens.size() - i, (size_t) n_batch);
            int32_t done = 0;
            while (done < n) {
                // A chunk never larger than what the context can hold after a shift.
                if (!make_room(n - done)) return false;
                const int32_t m = std::min(n - done, n_ctx - n_past);
                std::vector<llama_token> chunk(tokens.begin() + (long) i + done, tokens.begin() + (long) i + done + m);
                const int32_t rc = llama_decode(ctx, llama_batch_get_one(chunk.data(), m));
                if (rc != 0) {
                    fprintf(stderr, "llama-cli: evaluation failed (%d)\n", rc);
                    return false;
                }
                n_past += m;
                done += m;
            }
        }
        return true;
    }

    std::string piece(llama_token t, bool special = false) const {
        char buf[256];
        int32_t n = llama_token_to_piece(vocab, t, buf, sizeof(buf), 0, special);
        if (n < 0) {
            std::string s((size_t) -n, '\0');
            n = llama_token_to_piece(vocab, t, &s[0], (int32_t) s.size(), 0, special);
            s.resize(n > 0 ? (size_t) n : 0);
            return s;
        }
        return std::string(buf, (size_t) n);
    }

    void remember(const std::string & text) {
        tail += text;
        size_t longest = 0;
        for (const auto & r : antiprompts) longest = std::max(longest, r.size());
        const size_t keep = longest + 64;
        if (tail.size() > 2 * keep) tail.erase(0, tail.size() - keep);
    }

    // Whether the text so far ends with a reverse prompt (as llama.cpp: outside interactive mode
    // the reverse prompt may also be followed by up to 2 more characters, which a token can bring).
    bool at_reverse_prompt() const {
        for (const auto & r : antiprompts) {
            const size_t window = r.size() + (interactive ? 0 : 2);
            const size_t from = tail.size() > window ? tail.size() - window : 0;
            if (tail.find(r, from) != std::string::npos) return true;
        }
        return false;
    }

    // Samples, prints and evaluates up to n_predict tokens (-1: no limit) until an end-of-generation
    // token (not evaluated), a reverse prompt or Ctrl-C; the generated text goes to *text.
    gen_stop generate(int32_t n_predict, std::string * text) {
        for (int32_t i = 0; n_predict < 0 || i < n_predict; i++) {
            if (g_interrupted) return gen_stop::interrupted;
            const llama_token t = llama_sampler_sample(smpl, ctx, -1);
            if (t == LLAMA_TOKEN_NULL) return gen_stop::error;
            if (llama_vocab_is_eog(vocab, t)) {
                last_eog = t;
                return gen_stop::eog;
            }
            const std::string s = piece(t);
            fwrite(s.data(), 1, s.size(), stdout);
            fflush(stdout);
            if (text) *text += s;
            remember(s);
            std::vector<llama_token> one = {t};
            if (!eval(one)) return gen_stop::error;
            if (at_reverse_prompt()) {
                cli_log(LOG_DEBUG, "\nllama-cli: reverse prompt found\n");
                return gen_stop::reverse_prompt;
            }
        }
        return gen_stop::limit;
    }
};

std::vector<llama_token> tokenize(const llama_vocab * vocab, const std::string & text, bool add_special, bool parse_special) {
    int32_t n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), nullptr, 0, add_special, parse_special);
    std::vector<llama_token> out((size_t) (n < 0 ? -n : n));
    n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), out.data(), (int32_t) out.size(), add_special, parse_special);
    out.resize(n > 0 ? (size_t) n : 0);
    return out;
}

// Reads the user's input as llama.cpp does: a line ending in '\' goes on to the next line (the
// newline kept), one ending in '/' is sent as it is; the final newline is dropped. False at the
// end of input with nothing read.
bool read_input(std::string & out) {
    out.clear();
    bool any = false;
    for (;;) {
        std::string line;
        if (!std::getline(std::cin, line)) return any;
        any = true;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (!line.empty() && line.back() == '/') {
            line.pop_back();
            out += line;
            return true;
        }
        if (!line.empty() && line.back() == '\\') {
            line.pop_back();
            out += line + "\n";
            continue;
        }
        out += line;
        return true;
    }
}

}  // namespace

int main(int argc, char ** argv) {
    const cli_params params = parse_args(argc, argv);
    llama_log_set(log_callback, nullptr);
    std::signal(SIGINT, on_sigint);

    if (const std::string w = params.gpu.ignored_warning("llama-cli"); !w.empty()) cli_log(LOG_WARN, "%s", w.c_str());

    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.use_mmap = params.use_mmap;
    mp.use_mlock = params.use_mlock;
    mp.use_repack = params.use_repack;
    if (!params.numa.empty()) cli_log(LOG_INFO, "llama-cli: --numa %s noted: threads are not placed by NUMA node here\n", params.numa.c_str());
    params.gpu.apply(mp);
    llama_model * model = llama_model_load_from_file(params.model.c_str(), mp);
    if (!model) {
        fprintf(stderr, "llama-cli: cannot load model '%s'\n", params.model.c_str());
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    if (llama_vocab_n_tokens(vocab) == 0) {
        fprintf(stderr, "llama-cli: the model has no tokenizer\n");
        llama_model_free(model);
        return 1;
    }

    // Adapters are checked against the model before the context is made; freed after it.
    std::vector<llama_adapter_lora *> adapters;
    auto free_adapters = [&]() {
        for (llama_adapter_lora * ad : adapters) llama_adapter_lora_free(ad);
    };
    for (const auto & l : params.loras) {
        llama_adapter_lora * ad = llama_adapter_lora_init(model, l.first.c_str());
        if (!ad) {
            fprintf(stderr, "llama-cli: cannot load LoRA adapter '%s'\n", l.first.c_str());
            free_adapters();
            llama_model_free(model);
            return 1;
        }
        adapters.push_back(ad);
    }

    llama_context_params cparams = llama_context_default_params();
    params.gpu.apply(cparams);
    const int32_t n_ctx_train = llama_model_n_ctx_train(model);
    cparams.n_ctx = (uint32_t) (params.n_ctx > 0 ? params.n_ctx : std::min(n_ctx_train > 0 ? n_ctx_train : 4096, 4096));
    cparams.n_batch = (uint32_t) std::min<int32_t>(params.n_batch, (int32_t) cparams.n_ctx);
    cparams.n_ubatch = (uint32_t) params.n_ubatch;
    cparams.n_threads = params.n_threads > 0 ? params.n_threads : (int32_t) std::max(1u, std::thread::hardware_concurrency());
    cparams.n_threads_batch = params.n_threads_batch > 0 ? params.n_threads_batch : cparams.n_threads;
    cparams.no_perf = !params.perf;  // llama_perf_context_print at the end
    cparams.type_k = params.cache_type_k;
    cparams.type_v = params.cache_type_v;
    cparams.flash_attn = params.flash_attn;
    llama_context * ctx = llama_init_from_model(model, cparams);
    if (!ctx) {
        fprintf(stderr, "llama-cli: cannot create a context\n");
        free_adapters();
        llama_model_free(model);
        return 1;
    }
    for (size_t i = 0; i < adapters.size(); i++) llama_set_adapter_lora(ctx, adapters[i], params.loras[i].second);
    const int32_t n_ctx = (int32_t) llama_n_ctx(ctx);

    // The sampler chain, as llama.cpp builds it.
    uint32_t seed = (uint32_t) params.seed;
    if (params.seed < 0 || seed == LLAMA_DEFAULT_SEED) seed = std::random_device()();
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    llama_sampler * smpl = llama_sampler_chain_init(llama_sampler_chain_default_params());
    std::string chain_desc = "logits";
    if (params.ignore_eos) {
        std::vector<llama_logit_bias> biases;
        for (llama_token t = 0; t < n_vocab; t++) {
            if (llama_vocab_is_eog(vocab, t)) biases.push_back({t, -INFINITY});
        }
        llama_sampler_chain_add(smpl, llama_sampler_init_logit_bias(llama_model_n_vocab(model), (int32_t) biases.size(), biases.data()));
        chain_desc += " -> logit-bias (" + std::to_string(biases.size()) + " end-of-generation tokens at -inf)";
    }
    if (params.mirostat == 0) {
        const int32_t last_n = params.repeat_last_n < 0 ? n_ctx : params.repeat_last_n;
        llama_sampler_chain_add(smpl, llama_sampler_init_penalties(last_n, params.repeat_penalty, params.frequency_penalty,
                                                                   params.presence_penalty));
        chain_desc += " -> penalties";
        if (params.temp <= 0.0f) {
            llama_sampler_chain_add(smpl, llama_sampler_init_greedy());
            chain_desc += " -> greedy";
        } else {
            llama_sampler_chain_add(smpl, llama_sampler_init_top_k(params.top_k));
            llama_sampler_chain_add(smpl, llama_sampler_init_top_p(params.top_p, 1));
            llama_sampler_chain_add(smpl, llama_sampler_init_min_p(params.min_p, 1));
            llama_sampler_chain_add(smpl, llama_sampler_init_temp(params.temp));
            llama_sampler_chain_add(smpl, llama_sampler_init_dist(seed));
            chain_desc += " -> top-k -> top-p -> min-p -> temp -> dist";
        }
    } else {
        llama_sampler_chain_add(smpl, llama_sampler_init_temp(params.temp));
        if (params.mirostat == 1) {
            llama_sampler_chain_add(smpl, llama_sampler_init_mirostat(n_vocab, seed, params.mirostat_tau, params.mirostat_eta, 100));
        } else {
            llama_sampler_chain_add(smpl, llama_sampler_init_mirostat_v2(seed, params.mirostat_tau, params.mirostat_eta));
        }
        chain_desc += params.mirostat == 1 ? " -> temp -> mirostat" : " -> temp -> mirostat-v2";
    }
    cli_log(LOG_INFO, "llama-cli: sampler seed: %u\n", seed);
    cli_log(LOG_INFO, "llama-cli: sampler chain: %s\n", chain_desc.c_str());
    cli_log(LOG_DEBUG, "llama-cli: n_ctx %d, n_batch %d, n_ubatch %d, n_predict %d, temp %.3f, top_k %d, top_p %.3f, "
                       "min_p %.3f, repeat_penalty %.3f, repeat_last_n %d, presence_penalty %.3f, frequency_penalty %.3f, "
                       "mirostat %d (tau %.3f, eta %.3f)\n",
            n_ctx, (int) llama_n_batch(ctx), (int) llama_n_ubatch(ctx), params.n_predict, params.temp, params.top_k, params.top_p,
            params.min_p, params.repeat_penalty, params.repeat_last_n, params.presence_penalty, params.frequency_penalty,
            params.mirostat, params.mirostat_tau, params.mirostat_eta);

    session s;
    s.ctx = ctx;
    s.vocab = vocab;
    s.smpl = smpl;
    s.n_ctx = n_ctx;
    s.n_batch = (int32_t) llama_n_batch(ctx);
    s.antiprompts = params.antiprompts;
    s.interactive = params.interactive || params.conversation;
    const bool add_bos = llama_vocab_get_add_bos(vocab);
    s.n_keep = std::min<int32_t>(std::max(params.n_keep, 0) + (add_bos ? 1 : 0), n_ctx - 1);
    int rc = 0;

    const bool color = params.color;
    // Reads one input line (colored), or returns false at the end of input.
    auto read_user = [&](std::string & line) {
        g_interrupted = 0;
        if (color) printf("%s", COLOR_INPUT);
        fflush(stdout);
        const bool ok = read_input(line);
        if (color) printf("%s", COLOR_RESET);
        fflush(stdout);
        if (!ok) {
            cli_log(LOG_DEBUG, "\nllama-cli: end of input\n");
            return false;
        }
        if (params.escape) process_escapes(line);
        return true;
    };

    if (!params.conversation) {
        std::vector<llama_token> prompt = tokenize(vocab, params.prompt, true, true);
        if (prompt.empty()) {
            const llama_token bos = llama_vocab_bos(vocab);
            if (bos == LLAMA_TOKEN_NULL) {
                fprintf(stderr, "llama-cli: empty prompt and the model has no BOS token to start from\n");
                rc = 1;
            } else {
                prompt.push_back(bos);
            }
        }
        if (rc == 0 && params.verbose_prompt) {  // as llama.cpp prints it
            cli_log(LOG_INFO, "main: prompt: '%s'\n", params.prompt.c_str());
            cli_log(LOG_INFO, "main: number of tokens in prompt = %zu\n", prompt.size());
            for (llama_token t : prompt) cli_log(LOG_INFO, "%6d -> '%s'\n", t, s.piece(t, true).c_str());
        }
        if (rc == 0) {
            if (params.n_keep < 0) s.n_keep = std::min<int32_t>((int32_t) prompt.size(), n_ctx - 1);
            if ((int32_t) prompt.size() > n_ctx) {
                cli_log(LOG_WARN, "llama-cli: the prompt (%zu tokens) is longer than the context (%d): it is evaluated "
                                  "through context shifts, keeping its first %d tokens\n", prompt.size(), n_ctx, s.n_keep);
            }
            cli_log(LOG_DEBUG, "llama-cli: prompt: %zu tokens\n", prompt.size());
            if (params.display_prompt) {
                if (color) printf("%s", COLOR_PROMPT);
                fwrite(params.prompt.data(), 1, params.prompt.size(), stdout);
                if (color) printf("%s", COLOR_RESET);
                fflush(stdout);
            }
            for (llama_token t : prompt) llama_sampler_accept(smpl, t);
            s.remember(params.prompt);
            if (!s.eval(prompt)) rc = 1;
        }
        const bool interactive = params.interactive;
        // Interactive mode reads a line first with -if, or when the prompt ends with a reverse prompt.
        bool want_input = interactive && (params.interactive_first || s.at_reverse_prompt());
        // Without -i, a prompt that ends with a reverse prompt generates nothing (as llama.cpp).
        bool done = rc != 0 || (!interactive && s.at_reverse_prompt());
        while (!done) {
            if (!want_input) {
                const gen_stop why = s.generate(params.n_predict, nullptr);
                if (why == gen_stop::error) {
                    rc = 1;
                    break;
                }
                if (!interactive) break;
                if (why == gen_stop::eog) {
                    // As llama.cpp: the end-of-generation token goes into the context, followed
                    // by the first reverse prompt (not printed), and the user gets the turn.
                    std::vector<llama_token> toks = {s.last_eog};
                    if (!params.antiprompts.empty()) {
                        const std::vector<llama_token> r = tokenize(vocab, params.antiprompts[0], false, true);
                        toks.insert(toks.end(), r.begin(), r.end());
                        s.remember(params.antiprompts[0]);
                    }
                    for (size_t k = 1; k < toks.size(); k++) llama_sampler_accept(smpl, toks[k]);
                    if (!s.eval(toks)) {
                        rc = 1;
                        break;
                    }
                    printf("\n");
                }
            }
            want_input = false;
            if (!params.input_prefix.empty()) {
                fwrite(params.input_prefix.data(), 1, params.input_prefix.size(), stdout);
            }
            cli_log(LOG_DEBUG, "\nllama-cli: waiting for input\n");
            std::string line;
            if (!read_user(line)) break;  // end of input: the end, exit 0
            if (line.empty()) continue;    // an empty line lets the model go on
            if (!params.input_suffix.empty()) {
                fwrite(params.input_suffix.data(), 1, params.input_suffix.size(), stdout);
                fflush(stdout);
            }
            std::vector<llama_token> toks = tokenize(vocab, params.input_prefix, false, true);
            const std::vector<llama_token> inp = tokenize(vocab, line, false, false);
            const std::vector<llama_token> sfx = tokenize(vocab, params.input_suffix, false, true);
            toks.insert(toks.end(), inp.begin(), inp.end());
            toks.insert(toks.end(), sfx.begin(), sfx.end());
            // As llama.cpp: the sampler starts afresh each turn, then sees the input.
            llama_sampler_reset(smpl);
            for (llama_token t : toks) llama_sampler_accept(smpl, t);
            s.remember(params.input_prefix + line + params.input_suffix);
            if (!toks.empty() && !s.eval(toks)) {
                rc = 1;
                break;
            }
        }
        if (rc == 0) printf("\n");
    } else {
        // Chat: the whole history is formatted with the template each turn; the part that is new
        // since the last turn is tokenized and evaluated.
        std::string tmpl_owned = params.chat_template;
        const char * tmpl = tmpl_owned.empty() ? llama_model_chat_template(model, nullptr) : tmpl_owned.c_str();
        if (!tmpl) {
            cli_log(LOG_WARN, "llama-cli: the model has no chat template: using chatml (--chat-template NAME picks another)\n");
            tmpl = "chatml";
        }
        std::vector<std::pair<std::string, std::string>> history;
        if (!params.system_prompt.empty()) history.push_back({"system", params.system_prompt});
        std::string formatted_prev;
        auto format = [&](bool add_ass) {
            std::vector<llama_chat_message> msgs;
            for (auto & m : history) msgs.push_back({m.first.c_str(), m.second.c_str()});
            const int32_t n = llama_chat_apply_template(tmpl, msgs.data(), msgs.size(), add_ass, nullptr, 0);
            std::string out((size_t) std::max(n, 0) + 1, '\0');
            llama_chat_apply_template(tmpl, msgs.data(), msgs.size(), add_ass, &out[0], (int32_t) out.size());
            out.resize((size_t) std::max(n, 0));
            return out;
        };
        bool first = true;
        // -p is the first user message (as llama.cpp), answered before any input is read.
        std::string pending = params.prompt;
        for (;;) {
            std::string line;
            if (!pending.empty()) {
                line = pending;
                pending.clear();
                if (params.display_prompt) {
                    printf("\n> %s%s%s\n", color ? COLOR_INPUT : "", line.c_str(), color ? COLOR_RESET : "");
                    fflush(stdout);
                }
            } else {
                printf("\n> ");
                fflush(stdout);
                if (!read_user(line)) break;
                if (line.empty()) continue;
            }
            history.push_back({"user", line});
            const std::string formatted = format(true);
            const std::string delta = formatted.substr(std::min(formatted_prev.size(), formatted.size()));
            std::vector<llama_token> toks = tokenize(vocab, delta, first, true);
            first = false;
            llama_sampler_reset(smpl);
            for (llama_token t : toks) llama_sampler_accept(smpl, t);
            if (!s.eval(toks)) {
                rc = 1;
                break;
            }
            s.tail.clear();
            std::string reply;
            if (s.generate(params.n_predict, &reply) == gen_stop::error) {
                rc = 1;
                break;
            }
            history.push_back({"assistant", reply});
            // The cache holds the formatted text up to the assistant's opening plus the reply;
            // the next turn's delta starts with the closing of this reply.
            formatted_prev = formatted + reply;
        }
        printf("\n");
    }

    fflush(stdout);
    if (params.perf) llama_perf_context_print(ctx);
    llama_sampler_free(smpl);
    llama_free(ctx);
    free_adapters();
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
