// llama-cli: generates text from a prompt, or chats (-cnv), with a GGUF model.
//
// Standard output carries the prompt followed by the generated text and nothing else; logs and
// timings go to standard error. When the context fills up, the oldest half of the tokens after
// the first --keep (and BOS) is dropped and generation goes on; a prompt longer than the
// context is evaluated through the same shift.
#include "llama.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

struct cli_params {
    std::string model;
    std::string prompt;
    bool has_prompt = false;
    int32_t n_predict = -1;   // -1: until end of generation
    int32_t n_ctx = 0;        // 0: min(model's context, 4096)
    int32_t n_batch = 512;
    int32_t n_threads = 0;    // 0: all cores
    int32_t n_keep = 0;
    uint32_t seed = 0;
    bool has_seed = false;
    float temp = 0.8f;
    int32_t top_k = 40;
    float top_p = 0.95f;
    float min_p = 0.05f;
    float repeat_penalty = 1.0f;
    int32_t repeat_last_n = 64;
    bool conversation = false;
    std::string chat_template;  // empty: the model's, else ChatML
    ggml_type cache_type = GGML_TYPE_F16;
    bool flash_attn = false;
    bool use_mmap = true;
    bool use_repack = true;
    std::vector<std::pair<std::string, float>> loras;  // LoRA adapter path, scale
};

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
            "  -p, --prompt TEXT         prompt (default: empty, generation starts from BOS)\n"
            "  -f, --file FILE           read the prompt from a file\n"
            "  -n, --n-predict N         tokens to generate (-1: until the model ends; default -1)\n"
            "  -c, --ctx-size N          context size (default: the model's, at most 4096)\n"
            "  -b, --batch-size N        prompt tokens per batch (default 512)\n"
            "  -t, --threads N           threads (default: all cores)\n"
            "  -s, --seed N              random seed (default: random)\n"
            "      --temp T              temperature (default 0.8; 0: greedy)\n"
            "      --top-k K             top-k (default 40; 0: off)\n"
            "      --top-p P             top-p (default 0.95; 1: off)\n"
            "      --min-p P             min-p (default 0.05; 0: off)\n"
            "      --repeat-penalty R    repetition penalty (default 1.0: off)\n"
            "      --repeat-last-n N     tokens the penalty looks back (default 64)\n"
            "      --keep N              prompt tokens kept when the context shifts (default 0)\n"
            "      --cache-type T        KV cache type: f16 (default), f32, q8_0\n"
            "  -fa, --flash-attn         fused attention reading the cache as stored (less memory)\n"
            "      --no-mmap             read the model into memory instead of mapping it\n"
            "      --no-repack           keep the file's weight layout (default: rearrange\n"
            "                            the matrices this CPU multiplies faster repacked)\n"
            "      --lora FILE           apply a LoRA adapter (GGUF file or PEFT directory) at\n"
            "                            scale 1; repeatable\n"
            "      --lora-scaled FILE SCALE\n"
            "                            apply a LoRA adapter at the given scale; repeatable\n"
            "  -cnv, --conversation      interactive chat using the model's chat template\n"
            "      --chat-template NAME  llama2, llama3, chatml, zephyr, mistral, or a template text\n"
            "  -h, --help                this help\n");
}

[[noreturn]] void fail_arg(const std::string & msg) {
    fprintf(stderr, "llama-cli: %s\n(see llama-cli --help)\n", msg.c_str());
    exit(1);
}

int32_t parse_int(const std::string & flag, const char * v, int32_t lo, int32_t hi) {
    char * end = nullptr;
    errno = 0;
    const long x = strtol(v, &end, 10);
    if (!*v || !end || *end != '\0' || errno == ERANGE) fail_arg("invalid value for " + flag + ": '" + v + "' (expected an integer)");
    if (x < lo || x > hi) {
        fail_arg("value of " + flag + " out of range: " + v + " (allowed " + std::to_string(lo) + " .. " + std::to_string(hi) + ")");
    }
    return (int32_t) x;
}

float parse_float(const std::string & flag, const char * v, float lo, float hi) {
    char * end = nullptr;
    errno = 0;
    const float x = strtof(v, &end);
    if (!*v || !end || *end != '\0' || errno == ERANGE || x != x) fail_arg("invalid value for " + flag + ": '" + v + "' (expected a number)");
    if (x < lo || x > hi) fail_arg("value of " + flag + " out of range: " + v);
    return x;
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
            p.has_prompt = true;
        } else if (a == "-n" || a == "--n-predict") {
            p.n_predict = parse_int(a, value(), -1, INT32_MAX);
        } else if (a == "-c" || a == "--ctx-size") {
            p.n_ctx = parse_int(a, value(), 0, 1 << 24);
        } else if (a == "-b" || a == "--batch-size") {
            p.n_batch = parse_int(a, value(), 1, 1 << 20);
        } else if (a == "-t" || a == "--threads") {
            p.n_threads = parse_int(a, value(), 1, 1024);
        } else if (a == "-s" || a == "--seed") {
            p.seed = (uint32_t) parse_int(a, value(), 0, INT32_MAX);
            p.has_seed = true;
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
            p.repeat_last_n = parse_int(a, value(), 0, INT32_MAX);
        } else if (a == "--keep") {
            p.n_keep = parse_int(a, value(), 0, INT32_MAX);
        } else if (a == "--cache-type") {
            const std::string t = value();
            if (t == "f16") p.cache_type = GGML_TYPE_F16;
            else if (t == "f32") p.cache_type = GGML_TYPE_F32;
            else if (t == "q8_0") p.cache_type = GGML_TYPE_Q8_0;
            else fail_arg("invalid value for --cache-type: '" + t + "' (f16, f32 or q8_0)");
        } else if (a == "-fa" || a == "--flash-attn") {
            p.flash_attn = true;
        } else if (a == "--no-mmap") {
            p.use_mmap = false;
        } else if (a == "--no-repack") {
            p.use_repack = false;
        } else if (a == "--lora") {
            p.loras.push_back({value(), 1.0f});
        } else if (a == "--lora-scaled") {
            const std::string path = value();
            p.loras.push_back({path, parse_float(a, value(), -1e6f, 1e6f)});
        } else if (a == "-cnv" || a == "--conversation") {
            p.conversation = true;
        } else if (a == "--chat-template") {
            p.chat_template = value();
        } else {
            fail_arg("unknown option '" + a + "'");
        }
    }
    if (p.model.empty()) fail_arg("no model given (-m MODEL)");
    return p;
}

// The generation loop's state: the context, how many positions are used, the sampler.
struct session {
    llama_context * ctx;
    const llama_vocab * vocab;
    llama_sampler * smpl;
    int32_t n_ctx;
    int32_t n_batch;
    int32_t n_keep;  // tokens at the start never dropped by a shift (BOS included)
    int32_t n_past = 0;

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
        fprintf(stderr, "\nllama-cli: context full, dropped %d tokens\n", n_discard);
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

    std::string piece(llama_token t) const {
        char buf[256];
        int32_t n = llama_token_to_piece(vocab, t, buf, sizeof(buf), 0, false);
        if (n < 0) {
            std::string s((size_t) -n, '\0');
            n = llama_token_to_piece(vocab, t, &s[0], (int32_t) s.size(), 0, false);
            s.resize(n > 0 ? (size_t) n : 0);
            return s;
        }
        return std::string(buf, (size_t) n);
    }

    // Samples and prints up to n_predict tokens (-1: until end of generation or Ctrl-C);
    // returns the generated text.
    std::string generate(int32_t n_predict) {
        std::string text;
        for (int32_t i = 0; n_predict < 0 || i < n_predict; i++) {
            if (g_interrupted) break;
            const llama_token t = llama_sampler_sample(smpl, ctx, -1);
            if (t == LLAMA_TOKEN_NULL || llama_vocab_is_eog(vocab, t)) break;
            const std::string s = piece(t);
            fwrite(s.data(), 1, s.size(), stdout);
            fflush(stdout);
            text += s;
            std::vector<llama_token> one = {t};
            if (!eval(one)) break;
        }
        return text;
    }
};

std::vector<llama_token> tokenize(const llama_vocab * vocab, const std::string & text, bool add_special, bool parse_special) {
    int32_t n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), nullptr, 0, add_special, parse_special);
    std::vector<llama_token> out((size_t) (n < 0 ? -n : n));
    n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), out.data(), (int32_t) out.size(), add_special, parse_special);
    out.resize(n > 0 ? (size_t) n : 0);
    return out;
}

}  // namespace

int main(int argc, char ** argv) {
    const cli_params params = parse_args(argc, argv);
    std::signal(SIGINT, on_sigint);

    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.use_mmap = params.use_mmap;
    mp.use_repack = params.use_repack;
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
    const int32_t n_ctx_train = llama_model_n_ctx_train(model);
    cparams.n_ctx = (uint32_t) (params.n_ctx > 0 ? params.n_ctx : std::min(n_ctx_train > 0 ? n_ctx_train : 4096, 4096));
    cparams.n_batch = (uint32_t) std::min<int32_t>(params.n_batch, (int32_t) cparams.n_ctx);
    cparams.n_threads = params.n_threads > 0 ? params.n_threads : (int32_t) std::max(1u, std::thread::hardware_concurrency());
    cparams.type_k = params.cache_type;
    cparams.type_v = params.cache_type;
    cparams.flash_attn = params.flash_attn;
    llama_context * ctx = llama_init_from_model(model, cparams);
    if (!ctx) {
        fprintf(stderr, "llama-cli: cannot create a context\n");
        free_adapters();
        llama_model_free(model);
        return 1;
    }
    for (size_t i = 0; i < adapters.size(); i++) llama_set_adapter_lora(ctx, adapters[i], params.loras[i].second);

    llama_sampler * smpl = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(smpl, llama_sampler_init_penalties(params.repeat_last_n, params.repeat_penalty, 0.0f, 0.0f));
    if (params.temp <= 0.0f) {
        llama_sampler_chain_add(smpl, llama_sampler_init_greedy());
    } else {
        llama_sampler_chain_add(smpl, llama_sampler_init_top_k(params.top_k));
        llama_sampler_chain_add(smpl, llama_sampler_init_top_p(params.top_p, 1));
        llama_sampler_chain_add(smpl, llama_sampler_init_min_p(params.min_p, 1));
        llama_sampler_chain_add(smpl, llama_sampler_init_temp(params.temp));
        const uint32_t seed = params.has_seed ? params.seed : (uint32_t) std::chrono::steady_clock::now().time_since_epoch().count();
        llama_sampler_chain_add(smpl, llama_sampler_init_dist(seed));
    }

    session s{ctx, vocab, smpl, (int32_t) llama_n_ctx(ctx), (int32_t) llama_n_batch(ctx), 0};
    const bool add_bos = llama_vocab_get_add_bos(vocab);
    s.n_keep = std::min<int32_t>(params.n_keep + (add_bos ? 1 : 0), s.n_ctx - 1);
    int rc = 0;

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
        if (rc == 0) {
            if ((int32_t) prompt.size() > s.n_ctx) {
                fprintf(stderr, "llama-cli: the prompt (%zu tokens) is longer than the context (%d): it is evaluated "
                                "through context shifts, keeping its first %d tokens\n", prompt.size(), s.n_ctx, s.n_keep);
            }
            fwrite(params.prompt.data(), 1, params.prompt.size(), stdout);
            fflush(stdout);
            for (llama_token t : prompt) llama_sampler_accept(smpl, t);
            if (!s.eval(prompt)) {
                rc = 1;
            } else {
                s.generate(params.n_predict);
                printf("\n");
            }
        }
    } else {
        // Chat: the whole history is formatted with the template each turn; the part that is new
        // since the last turn is tokenized and evaluated.
        std::string tmpl_owned = params.chat_template;
        const char * tmpl = tmpl_owned.empty() ? llama_model_chat_template(model, nullptr) : tmpl_owned.c_str();
        std::vector<std::pair<std::string, std::string>> history;
        if (params.has_prompt && !params.prompt.empty()) history.push_back({"system", params.prompt});
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
        for (;;) {
            g_interrupted = 0;
            printf("\n> ");
            fflush(stdout);
            std::string line;
            if (!std::getline(std::cin, line)) break;
            if (line.empty()) continue;
            history.push_back({"user", line});
            const std::string formatted = format(true);
            const std::string delta = formatted.substr(std::min(formatted_prev.size(), formatted.size()));
            std::vector<llama_token> toks = tokenize(vocab, delta, first, true);
            first = false;
            if (!s.eval(toks)) {
                rc = 1;
                break;
            }
            const std::string reply = s.generate(params.n_predict);
            history.push_back({"assistant", reply});
            // The cache holds the formatted text up to the assistant's opening plus the reply;
            // the next turn's delta starts with the closing of this reply.
            formatted_prev = formatted + reply;
        }
        printf("\n");
    }

    fflush(stdout);
    llama_perf_context_print(ctx);
    llama_sampler_free(smpl);
    llama_free(ctx);
    free_adapters();
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
