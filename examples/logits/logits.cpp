// llama-logits: evaluates a prompt in one batch and writes the logits of every token.
//
//   llama-logits -m MODEL (-p PROMPT | --tokens 1,2,3) -o OUT [-t N] [-ngl N] [--no-bos]
//                [--lora FILE] [--lora-scaled FILE SCALE]
//
// OUT (little-endian): int32 n_tokens, int32 n_vocab, int32 tokens[n_tokens],
// float32 logits[n_tokens][n_vocab]. It is written to a temporary file that is renamed into
// place once complete, so OUT is written whole or not at all.
#include "llama.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

void usage(FILE * out) {
    fprintf(out,
            "usage: llama-logits -m MODEL -p PROMPT -o OUT [-t N] [-ngl N] [--no-bos] [--lora FILE]\n"
            "  -m, --model FILE    GGUF model\n"
            "  -p, --prompt TEXT   text to evaluate (tokenized with BOS when the model asks for it)\n"
            "  -o, --output FILE   logits file to write\n"
            "  -t, --threads N     threads (default: the library's)\n"
            "  -ngl, --n-gpu-layers N\n"
            "                      layers on the GPU, the last ones (default: 0; all: every one and the\n"
            "                      output layer)\n"
            "      --no-bos        do not add BOS/EOS even if the model asks for them\n"
            "      --tokens LIST   evaluate these comma-separated token ids instead of a prompt\n"
            "      --lora FILE     apply a LoRA adapter (GGUF file or PEFT directory) at scale 1;\n"
            "                      repeatable\n"
            "      --lora-scaled FILE SCALE\n"
            "                      apply a LoRA adapter at the given scale; repeatable\n"
            "Writes int32 n_tokens, int32 n_vocab, int32 tokens[n_tokens], float32 logits[n_tokens][n_vocab]\n"
            "(little-endian), all tokens evaluated in one batch.\n");
}

bool parse_int(const char * s, long lo, long hi, long & out) {
    char * end = nullptr;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return false;
    out = v;
    return true;
}

// A finite number (LoRA scales may be negative or zero).
bool parse_float(const char * s, float & out) {
    char * end = nullptr;
    errno = 0;
    const float v = strtof(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !std::isfinite(v)) return false;
    out = v;
    return true;
}

bool parse_tokens(const std::string & list, std::vector<llama_token> & out) {
    size_t start = 0;
    while (start <= list.size()) {
        const size_t comma = list.find(',', start);
        const std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        long v;
        if (!parse_int(item.c_str(), 0, INT32_MAX, v)) return false;
        out.push_back((llama_token) v);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return !out.empty();
}

// Writes the file under a temporary name next to it, then renames it into place.
bool write_logits(const std::string & path, const std::vector<llama_token> & tokens, int32_t n_vocab,
                  const std::vector<float> & logits) {
    const std::string tmp = path + ".tmp." + std::to_string((long) getpid());
    FILE * f = fopen(tmp.c_str(), "wb");
    if (!f) {
        fprintf(stderr, "llama-logits: cannot create '%s': %s\n", tmp.c_str(), strerror(errno));
        return false;
    }
    const int32_t header[2] = { (int32_t) tokens.size(), n_vocab };
    bool ok = fwrite(header, sizeof(header), 1, f) == 1 &&
              fwrite(tokens.data(), sizeof(llama_token), tokens.size(), f) == tokens.size() &&
              fwrite(logits.data(), sizeof(float), logits.size(), f) == logits.size();
    ok = fflush(f) == 0 && ok;
    ok = fsync(fileno(f)) == 0 && ok;
    ok = fclose(f) == 0 && ok;
    if (ok && rename(tmp.c_str(), path.c_str()) != 0) ok = false;
    if (!ok) {
        fprintf(stderr, "llama-logits: cannot write '%s': %s\n", path.c_str(), strerror(errno));
        unlink(tmp.c_str());
    }
    return ok;
}

}  // namespace

int main(int argc, char ** argv) {
    std::string model_path, prompt, out_path, token_list;
    bool has_prompt = false, has_tokens = false, add_bos = true;
    long n_threads = 0;
    long n_gpu_layers = 0;
    std::vector<std::pair<std::string, float>> loras;  // adapter path, scale
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        const bool takes_value = a == "-m" || a == "--model" || a == "-p" || a == "--prompt" || a == "-o" ||
                                 a == "--output" || a == "-t" || a == "--threads" || a == "--tokens" || a == "--lora" ||
                                 a == "-ngl" || a == "--n-gpu-layers";
        if ((takes_value && i + 1 >= argc) || (a == "--lora-scaled" && i + 2 >= argc)) {
            fprintf(stderr, "llama-logits: missing value for %s\n", a.c_str());
            usage(stderr);
            return 1;
        }
        if (a == "-h" || a == "--help") {
            usage(stdout);
            return 0;
        } else if (a == "-m" || a == "--model") {
            model_path = argv[++i];
        } else if (a == "-p" || a == "--prompt") {
            prompt = argv[++i];
            has_prompt = true;
        } else if (a == "-o" || a == "--output") {
            out_path = argv[++i];
        } else if (a == "-t" || a == "--threads") {
            if (!parse_int(argv[++i], 1, 512, n_threads)) {
                fprintf(stderr, "llama-logits: invalid thread count '%s' (1 to 512)\n", argv[i]);
                return 1;
            }
        } else if (a == "-ngl" || a == "--n-gpu-layers") {
            const std::string v = argv[++i];
            if (v == "all") {
                n_gpu_layers = 999;
            } else if (!parse_int(v.c_str(), 0, 1L << 30, n_gpu_layers)) {
                fprintf(stderr, "llama-logits: invalid layer count '%s' (0 or more, or all)\n", v.c_str());
                return 1;
            }
        } else if (a == "--tokens") {
            token_list = argv[++i];
            has_tokens = true;
        } else if (a == "--lora") {
            loras.push_back({argv[++i], 1.0f});
        } else if (a == "--lora-scaled") {
            const char * path = argv[++i];
            float scale;
            if (!parse_float(argv[++i], scale)) {
                fprintf(stderr, "llama-logits: invalid LoRA scale '%s' for '%s' (a number)\n", argv[i], path);
                return 1;
            }
            loras.push_back({path, scale});
        } else if (a == "--no-bos") {
            add_bos = false;
        } else {
            fprintf(stderr, "llama-logits: unknown option '%s'\n", a.c_str());
            usage(stderr);
            return 1;
        }
    }
    if (model_path.empty() || out_path.empty() || has_prompt == has_tokens) {
        fprintf(stderr, "llama-logits: %s\n", model_path.empty() ? "no model given (-m)"
                                              : out_path.empty() ? "no output file given (-o)"
                                              : has_prompt ? "give either -p or --tokens, not both"
                                                           : "no prompt given (-p)");
        usage(stderr);
        return 1;
    }
    std::vector<llama_token> tokens;
    if (has_tokens && !parse_tokens(token_list, tokens)) {
        fprintf(stderr, "llama-logits: invalid token list '%s' (comma-separated non-negative integers)\n", token_list.c_str());
        return 1;
    }

    llama_backend_init();
    llama_model_params mparams = llama_model_default_params();
    mparams.n_gpu_layers = (int32_t) n_gpu_layers;
    llama_model * model = llama_model_load_from_file(model_path.c_str(), mparams);
    if (!model) {
        fprintf(stderr, "llama-logits: cannot load model '%s'\n", model_path.c_str());
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    if (llama_vocab_n_tokens(vocab) <= 0) {
        fprintf(stderr, "llama-logits: the model has no vocabulary, so the width of its logits is unknown\n");
        llama_model_free(model);
        return 1;
    }

    // Adapters are checked against the model before any work; freed after the context.
    std::vector<llama_adapter_lora *> adapters;
    auto free_all = [&](llama_context * ctx) {
        llama_free(ctx);
        for (llama_adapter_lora * ad : adapters) llama_adapter_lora_free(ad);
        llama_model_free(model);
    };
    for (const auto & l : loras) {
        llama_adapter_lora * ad = llama_adapter_lora_init(model, l.first.c_str());
        if (!ad) {
            fprintf(stderr, "llama-logits: cannot load LoRA adapter '%s'\n", l.first.c_str());
            free_all(nullptr);
            return 1;
        }
        adapters.push_back(ad);
    }

    if (has_prompt) {
        // add_special: BOS (and EOS) exactly as the model's metadata asks.
        int32_t n = llama_tokenize(vocab, prompt.data(), (int32_t) prompt.size(), nullptr, 0, add_bos, true);
        tokens.resize((size_t) (n < 0 ? -n : n));
        n = llama_tokenize(vocab, prompt.data(), (int32_t) prompt.size(), tokens.data(), (int32_t) tokens.size(), add_bos, true);
        if (n < 0) {
            fprintf(stderr, "llama-logits: tokenization failed\n");
            free_all(nullptr);
            return 1;
        }
        tokens.resize((size_t) n);
    }
    if (tokens.empty()) {
        fprintf(stderr, "llama-logits: the prompt has no tokens\n");
        free_all(nullptr);
        return 1;
    }

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t) tokens.size();
    cp.n_batch = (uint32_t) tokens.size();
    cp.n_ubatch = cp.n_batch;  // one graph
    if (n_threads > 0) cp.n_threads = cp.n_threads_batch = (int32_t) n_threads;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "llama-logits: cannot create a context\n");
        free_all(nullptr);
        return 1;
    }
    for (size_t i = 0; i < adapters.size(); i++) llama_set_adapter_lora(ctx, adapters[i], loras[i].second);

    // All tokens in one batch, logits for every one of them.
    const int32_t n_tokens = (int32_t) tokens.size();
    llama_batch batch = llama_batch_init(n_tokens, 0, 1);
    for (int32_t i = 0; i < n_tokens; i++) {
        batch.token[i] = tokens[i];
        batch.pos[i] = i;
        batch.logits[i] = 1;
    }
    batch.n_tokens = n_tokens;
    const int32_t rc = llama_decode(ctx, batch);
    llama_batch_free(batch);
    bool ok = rc == 0;
    if (!ok) fprintf(stderr, "llama-logits: evaluation failed (llama_decode returned %d)\n", rc);

    if (ok) {
        const int32_t n_vocab = llama_vocab_n_tokens(vocab);
        std::vector<float> logits((size_t) n_tokens * n_vocab);
        for (int32_t i = 0; i < n_tokens; i++) {
            const float * row = llama_get_logits_ith(ctx, i);
            if (!row) {
                ok = false;
                break;
            }
            memcpy(logits.data() + (size_t) i * n_vocab, row, (size_t) n_vocab * sizeof(float));
        }
        ok = ok && write_logits(out_path, tokens, n_vocab, logits);
    }
    free_all(ctx);
    return ok ? 0 : 1;
}
