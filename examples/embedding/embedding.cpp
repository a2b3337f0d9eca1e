// llama-embedding: the embeddings of one or more prompts, as llama.cpp's embedding example prints
// them (its flags, its text, JSON and array formats).
//
//   llama-embedding -m MODEL -p "first\nsecond" [--pooling mean] [--embd-normalize 2]
//                   [--embd-output-format json|json+|array] [--embd-separator SEP]
//
// The prompts (split at --embd-separator, default a newline) are tokenized with the model's
// special tokens and packed into batches of at most -b tokens, one sequence each; the context is
// cleared before each batch. With pooling none every token gets an embedding, else each prompt.
#include "arg.h"
#include "common.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<std::string> split(const std::string & s, const std::string & sep) {
    std::vector<std::string> parts;
    size_t start = 0;
    for (size_t end; !sep.empty() && (end = s.find(sep, start)) != std::string::npos; start = end + sep.size()) {
        parts.push_back(s.substr(start, end - start));
    }
    parts.push_back(s.substr(start));
    return parts;
}

std::vector<llama_token> tokenize(const llama_vocab * vocab, const std::string & text) {
    std::vector<llama_token> t(text.size() + 8);
    int32_t n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), t.data(), (int32_t) t.size(), true, true);
    if (n < 0) {
        t.resize((size_t) -n);
        n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), t.data(), (int32_t) t.size(), true, true);
    }
    t.resize(n > 0 ? (size_t) n : 0);
    return t;
}

std::string piece(const llama_vocab * vocab, llama_token t) {
    char buf[256];
    const int32_t n = llama_token_to_piece(vocab, t, buf, sizeof(buf), 0, true);
    return n > 0 ? std::string(buf, (size_t) n) : std::string();
}

// Decodes the batch (sequences 0..n_seq-1, the cache cleared first) and writes its embeddings,
// normalized, to out: one per token (pooling none) or one per sequence.
bool decode_batch(llama_context * ctx, llama_batch & batch, float * out, int n_embd, int embd_norm) {
    llama_kv_self_clear(ctx);
    fprintf(stderr, "batch_decode: n_tokens = %d\n", batch.n_tokens);
    if (llama_decode(ctx, batch) != 0) {
        fprintf(stderr, "llama-embedding: failed to decode\n");
        return false;
    }
    const bool none = llama_pooling_type(ctx) == LLAMA_POOLING_TYPE_NONE;
    for (int32_t i = 0; i < batch.n_tokens; i++) {
        const float * e = none ? llama_get_embeddings_ith(ctx, i) : llama_get_embeddings_seq(ctx, batch.seq_id[i][0]);
        if (!e) {
            fprintf(stderr, "llama-embedding: no embedding for batch token %d\n", i);
            return false;
        }
        common_embd_normalize(e, out + (size_t) (none ? i : batch.seq_id[i][0]) * n_embd, n_embd, embd_norm);
    }
    return true;
}

}  // namespace

int main(int argc, char ** argv) {
    common_params params;
    params.n_ctx = 0;  // the model's
    if (!common_params_parse(argc, argv, params, LLAMA_EXAMPLE_EMBEDDING)) return 1;
    if (params.model.empty()) {
        fprintf(stderr, "llama-embedding: no model given (-m)\n(see llama-embedding --help)\n");
        return 1;
    }
    if (!common_load_prompt(params, "llama-embedding")) return 1;
    params.embedding = true;

    llama_backend_init();
    llama_model * model = llama_model_load_from_file(params.model.c_str(), common_model_params_to_llama(params));
    if (!model) {
        fprintf(stderr, "llama-embedding: cannot load model '%s'\n", params.model.c_str());
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const std::vector<std::string> prompts = split(params.prompt, params.embd_sep);
    const int n_prompts = (int) prompts.size();

    // A batch holds whole prompts, each its own sequence, in one micro-batch (so that non-causal
    // models see a whole prompt at once).
    llama_context_params cp = common_context_params_to_llama(params);
    if (cp.n_ctx == 0) cp.n_ctx = (uint32_t) llama_model_n_ctx_train(model);
    cp.n_batch = params.n_batch > 0 ? (uint32_t) params.n_batch : std::min<uint32_t>(cp.n_ctx, 2048);
    cp.n_ubatch = cp.n_batch;
    cp.n_seq_max = (uint32_t) std::min(n_prompts, 256);
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "llama-embedding: cannot create a context\n");
        llama_model_free(model);
        return 1;
    }
    const uint32_t n_batch = llama_n_batch(ctx);
    const int n_embd = llama_model_n_embd(model);
    const enum llama_pooling_type pooling = llama_pooling_type(ctx);
    const int n_ctx_train = llama_model_n_ctx_train(model);
    if ((int) llama_n_ctx(ctx) > n_ctx_train) {
        fprintf(stderr, "main: warning: model was trained on only %d context tokens (%u specified)\n", n_ctx_train, llama_n_ctx(ctx));
    }

    int status = 0;
    std::vector<std::vector<llama_token>> inputs;
    for (const std::string & p : prompts) {
        inputs.push_back(tokenize(vocab, p));
        if (inputs.back().size() > n_batch) {
            fprintf(stderr, "main: number of tokens in input line (%zu) exceeds batch size (%u), increase batch size and re-run\n",
                    inputs.back().size(), n_batch);
            status = 1;
        }
    }
    for (const auto & inp : inputs) {
        if (inp.empty() || inp.back() != llama_vocab_sep(vocab)) {
            fprintf(stderr, "main: last token in the prompt is not SEP\n");
            fprintf(stderr, "main: 'tokenizer.ggml.add_eos_token' should be set to 'true' in the GGUF header\n");
        }
    }
    if (params.verbose_prompt) {
        for (int i = 0; i < n_prompts; i++) {
            fprintf(stderr, "main: prompt %d: '%s'\n", i, prompts[i].c_str());
            fprintf(stderr, "main: number of tokens in prompt = %zu\n", inputs[i].size());
            for (llama_token t : inputs[i]) printf("%6d -> '%s'\n", t, piece(vocab, t).c_str());
            printf("\n\n");
        }
    }

    size_t n_embd_count = 0;
    for (const auto & inp : inputs) n_embd_count += pooling == LLAMA_POOLING_TYPE_NONE ? inp.size() : 1;
    std::vector<float> emb(n_embd_count * (size_t) n_embd, 0.0f);
    llama_batch batch = llama_batch_init((int32_t) n_batch, 0, 1);
    size_t e = 0;  // embeddings stored
    int s = 0;     // prompts in the batch
    auto flush = [&]() {
        if (batch.n_tokens == 0) return true;
        if (!decode_batch(ctx, batch, emb.data() + e * n_embd, n_embd, params.embd_normalize)) return false;
        e += pooling == LLAMA_POOLING_TYPE_NONE ? (size_t) batch.n_tokens : (size_t) s;
        s = 0;
        batch.n_tokens = 0;
        return true;
    };
    for (int k = 0; k < n_prompts && status == 0; k++) {
        const auto & inp = inputs[k];
        if ((size_t) batch.n_tokens + inp.size() > n_batch || s == (int) cp.n_seq_max) {
            if (!flush()) status = 1;
        }
        for (size_t i = 0; i < inp.size(); i++) {
            const int32_t j = batch.n_tokens++;
            batch.token[j] = inp[i];
            batch.pos[j] = (llama_pos) i;
            batch.n_seq_id[j] = 1;
            batch.seq_id[j][0] = s;
            batch.logits[j] = 1;
        }
        s++;
    }
    if (status == 0 && !flush()) status = 1;

    if (status == 0) {
        auto val = [&](size_t j, int i) {
            printf(params.embd_normalize == 0 ? "%6.0f " : "%9.6f ", emb[j * n_embd + i]);
        };
        if (params.embd_out.empty()) {
            printf("\n");
            if (pooling == LLAMA_POOLING_TYPE_NONE) {
                for (size_t j = 0; j < n_embd_count; j++) {
                    printf("embedding %zu: ", j);
                    for (int i = 0; i < std::min(3, n_embd); i++) val(j, i);
                    printf(" ... ");
                    for (int i = n_embd - 3; i < n_embd; i++) val(j, i);
                    printf("\n");
                }
            } else {
                for (int j = 0; j < n_prompts; j++) {
                    printf("embedding %d: ", j);
                    for (int i = 0; i < (n_prompts > 1 ? std::min(16, n_embd) : n_embd); i++) val((size_t) j, i);
                    printf("\n");
                }
                if (n_prompts > 1) {
                    printf("\ncosine similarity matrix:\n\n");
                    for (int i = 0; i < n_prompts; i++) printf("%6.6s ", prompts[i].c_str());
                    printf("\n");
                    for (int i = 0; i < n_prompts; i++) {
                        for (int j = 0; j < n_prompts; j++) {
                            printf("%6.2f ", common_embd_similarity_cos(&emb[(size_t) i * n_embd], &emb[(size_t) j * n_embd], n_embd));
                        }
                        printf("%1.10s\n", prompts[i].c_str());
                    }
                }
            }
        } else {
            // JSON (an OpenAI-style list, json+ with the similarity matrix) or a bare array.
            const bool json = params.embd_out != "array";
            printf(json ? "{\n  \"object\": \"list\",\n  \"data\": [\n" : "[");
            for (size_t j = 0; j < n_embd_count; j++) {
                if (json) printf("    {\n      \"object\": \"embedding\",\n      \"index\": %zu,\n      \"embedding\": ", j);
                printf("[");
                for (int i = 0; i < n_embd; i++) {
                    printf(params.embd_normalize == 0 ? "%1.0f" : "%1.7f", emb[j * n_embd + i]);
                    if (i + 1 < n_embd) printf(",");
                }
                printf(json ? "]\n    }" : "]");
                if (j + 1 < n_embd_count) printf(json ? ",\n" : ",");
            }
            printf(json ? "\n  ]" : "]\n");
            if (params.embd_out == "json+" && n_prompts > 1) {
                printf(",\n  \"cosineSimilarity\": [\n");
                for (size_t i = 0; i < n_embd_count; i++) {
                    printf("    [");
                    for (size_t j = 0; j < n_embd_count; j++) {
                        printf("%6.2f", common_embd_similarity_cos(&emb[i * n_embd], &emb[j * n_embd], n_embd));
                        if (j + 1 < n_embd_count) printf(", ");
                    }
                    printf(" ]");
                    if (i + 1 < n_embd_count) printf(",\n");
                }
                printf("\n  ]");
            }
            if (json) printf("\n}\n");
        }
        printf("\n");
        llama_perf_context_print(ctx);
    }

    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return status;
}
