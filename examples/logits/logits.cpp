// llama-logits: evaluates a prompt in one batch and writes the logits of every token.
//
//   llama-logits -m MODEL (-p PROMPT | --tokens 1,2,3) -o OUT [-t N] [-ngl N] [--no-bos]
//                [--lora FILE] [--lora-scaled FILE SCALE]
//
// OUT (little-endian): int32 n_tokens, int32 n_vocab, int32 tokens[n_tokens],
// float32 logits[n_tokens][n_vocab]. It is written to a temporary file that is renamed into
// place once complete, so OUT is written whole or not at all.
#include "arg.h"
#include "common.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

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
    common_params params;
    if (!common_params_parse(argc, argv, params, LLAMA_EXAMPLE_LOGITS)) return 1;
    const bool has_prompt = params.prompt_given, has_tokens = !params.tokens.empty();
    if (params.model.empty() || params.out_file.empty() || has_prompt == has_tokens) {
        fprintf(stderr, "llama-logits: %s\n(see llama-logits --help)\n", params.model.empty() ? "no model given (-m)"
                                                                 : params.out_file.empty() ? "no output file given (-o)"
                                                                 : has_prompt ? "give either -p or --tokens, not both"
                                                                              : "no prompt given (-p)");
        return 1;
    }
    const std::string & prompt = params.prompt, & out_path = params.out_file;
    const bool add_bos = params.add_bos;
    std::vector<llama_token> tokens = params.tokens;

    llama_backend_init();
    const llama_model_params mparams = common_model_params_to_llama(params);
    llama_model * model = llama_model_load_from_file(params.model.c_str(), mparams);
    if (!model) {
        fprintf(stderr, "llama-logits: cannot load model '%s'\n", params.model.c_str());
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
    if (std::string err; !common_adapters_load(model, params, adapters, err)) {
        fprintf(stderr, "llama-logits: %s\n", err.c_str());
        free_all(nullptr);
        return 1;
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

    llama_context_params cp = common_context_params_to_llama(params);
    cp.n_ctx = (uint32_t) tokens.size();
    cp.n_batch = (uint32_t) tokens.size();
    cp.n_ubatch = cp.n_batch;  // one graph
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "llama-logits: cannot create a context\n");
        free_all(nullptr);
        return 1;
    }
    common_adapters_apply(ctx, params, adapters);

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
