// llama-cli: generates text from a prompt, or chats (-cnv), with a GGUF model; llama.cpp's flags.
//
// Standard output carries the prompt followed by the generated text and nothing else (in
// interactive mode also --in-prefix / --in-suffix; the user's lines are not echoed, as in
// llama.cpp: a terminal shows them as typed); logs and timings go to standard error. When the
// context fills up, the oldest half of the tokens after the first --keep (and BOS) is dropped and
// generation goes on; a prompt longer than the context is evaluated through the same shift.
//
// --prompt-cache FNAME (llama.cpp's session file, llama_state_load_file): when the file exists its
// state is loaded and the prompt's tokens it holds are not evaluated again; the state is written
// after the prompt (before the first token is sampled) unless it held the whole prompt, and with
// --prompt-cache-all once more at the end, generation included; --prompt-cache-ro never writes.
// A context shift stops the cache (the cells no longer follow the tokens); conversation mode
// does not use it.
#include "llama.h"
#include "arg.h"
#include "common.h"

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

#include <sys/stat.h>
#include <unistd.h>

namespace {

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

// The options (common/arg.cpp's table), with llama-cli's defaults; the prompt file read, escapes
// processed as llama.cpp does.
common_params parse_args(int argc, char ** argv) {
    common_params p;
    p.n_batch = 512;  // prompt tokens per llama_decode call
    if (!common_params_parse(argc, argv, p, LLAMA_EXAMPLE_MAIN)) exit(1);
    auto fail = [](const std::string & msg) {
        fprintf(stderr, "llama-cli: %s\n(see llama-cli --help)\n", msg.c_str());
        exit(1);
    };
    if (p.model.empty()) fail("no model given (-m MODEL)");
    if (p.prompt_cache_all && (p.interactive || p.interactive_first)) fail("--prompt-cache-all not supported in interactive mode yet");
    if (!p.prompt_file.empty()) {
        std::ifstream in(p.prompt_file, std::ios::binary);
        if (!in) fail("cannot read the prompt file '" + p.prompt_file + "'");
        std::stringstream ss;
        ss << in.rdbuf();
        p.prompt = ss.str();
        if (!p.prompt_binary && !p.prompt.empty() && p.prompt.back() == '\n') p.prompt.pop_back();  // as llama.cpp (not -bf)
    }
    if (p.escape) {  // what llama.cpp processes
        string_process_escapes(p.prompt);
        string_process_escapes(p.input_prefix);
        string_process_escapes(p.input_suffix);
        for (auto & r : p.antiprompt) string_process_escapes(r);
    }
    g_verbosity = p.verbosity;
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
    bool ctx_shift = true;     // false: a full context stops generation (--no-context-shift)
    bool full = false;         // a full context stopped it
    bool interactive = false;  // reverse prompts must end the text exactly
    bool special = false;      // -sp: special tokens printed as their text (as llama.cpp: off)
    int32_t n_print = -1;      // -ptc: the count of cached tokens every n_print (with -v)
    std::string tail;  // the end of the text evaluated so far, where reverse prompts are looked for
    llama_token last_eog = LLAMA_TOKEN_NULL;  // the end-of-generation token generate() stopped at
    // --prompt-cache: the tokens whose cells the cache holds, in order (a session file's tokens);
    // given up at a context shift.
    bool track = false;
    std::vector<llama_token> cached;

    // Makes room for `need` more positions (at most n_ctx - n_keep) with one shift: drops half of
    // the context after the kept tokens (a fixed share of the context, not of what is left), or
    // more when `need` asks for it, so that any prompt length and batch size goes through.
    bool make_room(int32_t need) {
        need = std::min(need, n_ctx - n_keep);
        if (n_past + need <= n_ctx) return true;
        if (!ctx_shift) {  // --no-context-shift: as llama.cpp, stop instead
            full = true;
            fprintf(stderr, "\nllama-cli: the context is full (%d tokens) and context shift is disabled (--no-context-shift): "
                            "stopping\n", n_ctx);
            return false;
        }
        const int32_t n_left = n_past - n_keep;
        const int32_t n_discard = std::min(n_left, std::max((n_ctx - n_keep) / 2, n_past + need - n_ctx));
        if (n_discard <= 0) {  // cannot happen while n_keep < n_ctx
            fprintf(stderr, "llama-cli: no room left in the context (%d)\n", n_ctx);
            return false;
        }
        llama_kv_self_seq_rm(ctx, 0, n_keep, n_keep + n_discard);
        llama_kv_self_seq_add(ctx, 0, n_keep + n_discard, n_past, -n_discard);
        n_past -= n_discard;
        if (track) {
            track = false;
            cached.clear();
            cli_log(LOG_DEBUG, "\nllama-cli: the context shifted: the prompt cache is no longer written\n");
        }
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
                if (track) cached.insert(cached.end(), chunk.begin(), chunk.end());
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
            const std::string s = piece(t, special);
            fwrite(s.data(), 1, s.size(), stdout);
            fflush(stdout);
            if (text) *text += s;
            remember(s);
            std::vector<llama_token> one = {t};
            if (!eval(one)) return full ? gen_stop::limit : gen_stop::error;
            if (n_print > 0 && n_past % n_print == 0) cli_log(LOG_DEBUG, "\nTokens consumed so far = %d / %d\n", n_past, n_ctx);
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
    const common_params params = parse_args(argc, argv);
    llama_log_set(log_callback, nullptr);
    std::signal(SIGINT, on_sigint);

    if (const std::string w = common_gpu_flags_warning(params, "llama-cli"); !w.empty()) cli_log(LOG_WARN, "%s", w.c_str());

    llama_backend_init();
    const llama_model_params mp = common_model_params_to_llama(params);
    if (!params.numa.empty()) cli_log(LOG_INFO, "llama-cli: --numa %s noted: threads are not placed by NUMA node here\n", params.numa.c_str());
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
    if (std::string err; !common_adapters_load(model, params, adapters, err)) {
        fprintf(stderr, "llama-cli: %s\n", err.c_str());
        free_adapters();
        llama_model_free(model);
        return 1;
    }

    llama_context_params cparams = common_context_params_to_llama(params);
    const int32_t n_ctx_train = llama_model_n_ctx_train(model);
    cparams.n_ctx = (uint32_t) (params.n_ctx > 0 ? params.n_ctx : std::min(n_ctx_train > 0 ? n_ctx_train : 4096, 4096));
    cparams.n_batch = (uint32_t) std::min<int32_t>(params.n_batch, (int32_t) cparams.n_ctx);
    llama_context * ctx = llama_init_from_model(model, cparams);
    if (!ctx) {
        fprintf(stderr, "llama-cli: cannot create a context\n");
        free_adapters();
        llama_model_free(model);
        return 1;
    }
    common_adapters_apply(ctx, params, adapters);
    const int32_t n_ctx = (int32_t) llama_n_ctx(ctx);

    // The sampler chain, as llama.cpp builds it.
    uint32_t seed = 0;
    std::string chain_desc;
    llama_sampler * smpl = common_sampler_chain(model, params.sampling, n_ctx, &seed, &chain_desc);
    if (!smpl) {
        cli_log(LOG_ERROR, "llama-cli: the sampler could not be made (the grammar does not parse)\n");
        llama_free(ctx);
        free_adapters();
        llama_model_free(model);
        return 1;
    }
    cli_log(LOG_INFO, "llama-cli: sampler seed: %u\n", seed);
    cli_log(LOG_INFO, "llama-cli: sampler chain: %s\n", chain_desc.c_str());
    cli_log(LOG_DEBUG, "llama-cli: n_ctx %d, n_batch %d, n_ubatch %d, n_predict %d, temp %.3f, top_k %d, top_p %.3f, "
                       "min_p %.3f, repeat_penalty %.3f, repeat_last_n %d, presence_penalty %.3f, frequency_penalty %.3f, "
                       "mirostat %d (tau %.3f, eta %.3f)\n",
            n_ctx, (int) llama_n_batch(ctx), (int) llama_n_ubatch(ctx), params.n_predict, params.sampling.temp, params.sampling.top_k,
            params.sampling.top_p, params.sampling.min_p, params.sampling.penalty_repeat, params.sampling.penalty_last_n,
            params.sampling.penalty_present, params.sampling.penalty_freq, params.sampling.mirostat, params.sampling.mirostat_tau,
            params.sampling.mirostat_eta);

    session s;
    s.ctx = ctx;
    s.vocab = vocab;
    s.smpl = smpl;
    s.n_ctx = n_ctx;
    s.n_batch = (int32_t) llama_n_batch(ctx);
    s.antiprompts = params.antiprompt;
    s.special = params.special;
    s.n_print = params.n_print;
    s.ctx_shift = params.ctx_shift;
    s.interactive = params.interactive || params.conversation;
    const bool add_bos = llama_vocab_get_add_bos(vocab);
    s.n_keep = std::min<int32_t>(std::max(params.n_keep, 0) + (add_bos ? 1 : 0), n_ctx - 1);
    int rc = 0;

    const bool color = params.use_color;
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
        if (params.escape) string_process_escapes(line);
        return true;
    };

    // --prompt-cache: the session file's tokens, its state loaded into the context (as llama.cpp).
    std::string path_session = params.path_prompt_cache;
    std::vector<llama_token> session_tokens;
    if (!path_session.empty() && params.conversation) {
        cli_log(LOG_WARN, "llama-cli: --prompt-cache is not used in conversation mode\n");
        path_session.clear();
    }
    if (!path_session.empty()) {
        cli_log(LOG_INFO, "main: attempting to load saved session from '%s'\n", path_session.c_str());
        struct stat st;
        if (stat(path_session.c_str(), &st) != 0) {
            cli_log(LOG_INFO, "main: session file does not exist, will create.\n");
        } else if (st.st_size == 0) {
            cli_log(LOG_INFO, "main: The session file is empty. A new session will be initialized.\n");
        } else {
            session_tokens.resize((size_t) n_ctx);
            size_t n_loaded = 0;
            if (!llama_state_load_file(ctx, path_session.c_str(), session_tokens.data(), session_tokens.size(), &n_loaded)) {
                fprintf(stderr, "main: failed to load session file '%s'\n", path_session.c_str());
                llama_sampler_free(smpl);
                llama_free(ctx);
                free_adapters();
                llama_model_free(model);
                return 1;
            }
            session_tokens.resize(n_loaded);
            cli_log(LOG_INFO, "main: loaded a session with prompt size of %d tokens\n", (int) session_tokens.size());
        }
    }
    // Writes the cache's tokens and state to the session file.
    auto save_session = [&]() {
        if (!llama_state_save_file(ctx, path_session.c_str(), s.cached.data(), s.cached.size())) {
            cli_log(LOG_WARN, "llama-cli: the prompt cache '%s' could not be written\n", path_session.c_str());
        } else {
            cli_log(LOG_DEBUG, "llama-cli: saved session to %s\n", path_session.c_str());
        }
    };

    if (!params.conversation) {
        bool need_save = false;  // the prompt's state is to be written (the session did not hold all of it)
        // No prompt but a session: its tokens are the prompt (as llama.cpp).
        const bool from_session = params.prompt.empty() && !session_tokens.empty() && !params.interactive_first;
        std::vector<llama_token> prompt = from_session ? session_tokens : tokenize(vocab, params.prompt, true, true);
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
            std::string prompt_text = params.prompt;
            if (from_session) {
                prompt_text.clear();
                for (llama_token t : prompt) prompt_text += s.piece(t, params.special);
            }
            if (params.display_prompt) {
                if (color) printf("%s", COLOR_PROMPT);
                fwrite(prompt_text.data(), 1, prompt_text.size(), stdout);
                if (color) printf("%s", COLOR_RESET);
                fflush(stdout);
            }
            for (llama_token t : prompt) llama_sampler_accept(smpl, t);
            s.remember(prompt_text);
            // The session's cells that continue the prompt are kept, the rest removed; the last
            // prompt token is evaluated again when the session goes beyond the prompt (its logits
            // are not those saved), or when the state has no logits.
            size_t n_reuse = 0;
            if (!path_session.empty()) {
                size_t n_match = 0;
                while (n_match < session_tokens.size() && n_match < prompt.size() && session_tokens[n_match] == prompt[n_match]) n_match++;
                if (!session_tokens.empty()) {
                    if (params.prompt.empty() && n_match == prompt.size()) {
                        cli_log(LOG_INFO, "main: using full prompt from session file\n");
                    } else if (n_match >= prompt.size()) {
                        cli_log(LOG_INFO, "main: session file has exact match for prompt!\n");
                    } else if (n_match < prompt.size() / 2) {
                        cli_log(LOG_WARN, "main: session file has low similarity to prompt (%zu / %zu tokens); will mostly be reevaluated\n",
                                n_match, prompt.size());
                    } else {
                        cli_log(LOG_INFO, "main: session file matches %zu / %zu tokens of prompt\n", n_match, prompt.size());
                    }
                }
                need_save = n_match < prompt.size();
                n_reuse = n_match;
                if (n_reuse > 0 && n_reuse == prompt.size() && (session_tokens.size() > prompt.size() || !llama_get_logits(ctx))) n_reuse--;
                llama_kv_self_seq_rm(ctx, -1, (llama_pos) n_reuse, -1);
                s.n_past = (int32_t) n_reuse;
                s.cached.assign(prompt.begin(), prompt.begin() + (long) n_reuse);
                s.track = true;
                cli_log(LOG_DEBUG, "llama-cli: %zu prompt tokens from the prompt cache, %zu to evaluate\n", n_reuse, prompt.size() - n_reuse);
            }
            if (!s.eval(std::vector<llama_token>(prompt.begin() + (long) n_reuse, prompt.end()))) rc = 1;
        }
        const bool interactive = params.interactive;
        // Interactive mode reads a line first with -if, or when the prompt ends with a reverse prompt.
        bool want_input = interactive && (params.interactive_first || s.at_reverse_prompt());
        // Without -i, a prompt that ends with a reverse prompt generates nothing (as llama.cpp).
        bool done = rc != 0 || (!interactive && s.at_reverse_prompt());
        while (!done) {
            if (!want_input) {
                // The prompt's state, saved before the first token is sampled (as llama.cpp).
                if (need_save) {
                    need_save = false;
                    if (!params.prompt_cache_ro && s.track) save_session();
                }
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
                    if (!params.antiprompt.empty()) {
                        const std::vector<llama_token> r = tokenize(vocab, params.antiprompt[0], false, true);
                        toks.insert(toks.end(), r.begin(), r.end());
                        s.remember(params.antiprompt[0]);
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
            if (params.input_prefix_bos && llama_vocab_bos(vocab) != LLAMA_TOKEN_NULL) toks.insert(toks.begin(), llama_vocab_bos(vocab));
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
        if (rc == 0 && !path_session.empty() && params.prompt_cache_all && !params.prompt_cache_ro && s.track) {
            cli_log(LOG_INFO, "\nmain: saving final output to session file '%s'\n", path_session.c_str());
            save_session();
        }
    } else {
        // Chat: the whole history is formatted with the template each turn; the part that is new
        // since the last turn is tokenized and evaluated.
        std::string tmpl_owned = params.chat_template;
        const char * tmpl = tmpl_owned.empty() ? llama_model_chat_template(model, nullptr) : tmpl_owned.c_str();
        if (!tmpl) {
            cli_log(LOG_WARN, "llama-cli: the model has no chat template: using chatml (--chat-template NAME picks another)\n");
            tmpl = "chatml";
        } else if (llama_chat_apply_template(tmpl, nullptr, 0, false, nullptr, 0) < 0) {
            // (a --chat-template given is checked when parsed: this is the model's own)
            cli_log(LOG_WARN, "llama-cli: the model's chat template is none of the built-in formats: using chatml "
                              "(--chat-template NAME picks another)\n");
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
    if (!params.no_perf) llama_perf_context_print(ctx);
    llama_sampler_free(smpl);
    llama_free(ctx);
    free_adapters();
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
