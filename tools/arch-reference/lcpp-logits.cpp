// lcpp-logits: logits of every position of a token list, computed by llama.cpp itself.
//
//   lcpp-logits MODEL.gguf --tokens 1,2,3 -o OUT.logits [-t N] [--kv-f16] [--embd] [--quiet]
//
// An offline reference tool (tests and CI never build or run it): it is compiled against a
// llama.cpp source tree (build 4747) by build-lcpp-logits.sh and uses only llama.cpp's public C
// API (llama.h). The tokens given are the whole input (no BOS is added), evaluated as one
// sequence at positions 0..n-1 in a single causal batch, flash attention off, logits requested
// for every token. The KV cache is F32 by default (llama.cpp's default F16 cache rounds K and V,
// which costs ~1e-3 relative accuracy; --kv-f16 restores the default). --embd: an embedding model
// (BERT): the last hidden states of every token (pooling none) in place of logits.
//
// OUT (little-endian, the format of our llama-logits): int32 n_tokens, int32 n_vocab,
// int32 tokens[n_tokens], float32 logits[n_tokens][n_vocab].

#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static bool g_quiet = false;

static void log_cb(enum ggml_log_level level, const char * text, void * /*user*/) {
    if (g_quiet && level != GGML_LOG_LEVEL_ERROR) {
        return;
    }
    fputs(text, stderr);
}

static bool parse_tokens(const char * s, std::vector<llama_token> & out) {
    out.clear();
    const char * p = s;
    while (*p) {
        char * end = nullptr;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > 0x7fffffff) {
            return false;
        }
        out.push_back((llama_token) v);
        p = end;
        if (*p == ',') {
            p++;
        } else if (*p != '\0') {
            return false;
        }
    }
    return !out.empty();
}

static int usage(const char * argv0) {
    fprintf(stderr, "usage: %s MODEL.gguf --tokens 1,2,3 -o OUT.logits [-t N] [--kv-f16] [--embd] [--quiet]\n", argv0);
    return 2;
}

int main(int argc, char ** argv) {
    std::string model_path, out_path;
    std::vector<llama_token> tokens;
    int n_threads = -1;
    bool kv_f16 = false, embd = false;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "--tokens" && i + 1 < argc) {
            if (!parse_tokens(argv[++i], tokens)) {
                fprintf(stderr, "lcpp-logits: bad --tokens list\n");
                return 2;
            }
        } else if ((a == "-o" || a == "--out") && i + 1 < argc) {
            out_path = argv[++i];
        } else if ((a == "-m" || a == "--model") && i + 1 < argc) {
            model_path = argv[++i];
        } else if (a == "-t" && i + 1 < argc) {
            n_threads = atoi(argv[++i]);
        } else if (a == "--embd") {
            embd = true;
        } else if (a == "--kv-f16") {
            kv_f16 = true;
        } else if (a == "--quiet" || a == "-q") {
            g_quiet = true;
        } else if (!a.empty() && a[0] != '-' && model_path.empty()) {
            model_path = a;
        } else {
            return usage(argv[0]);
        }
    }
    if (model_path.empty() || out_path.empty() || tokens.empty()) {
        return usage(argv[0]);
    }

    llama_log_set(log_cb, nullptr);
    llama_backend_init();

    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(model_path.c_str(), mp);
    if (!model) {
        fprintf(stderr, "lcpp-logits: cannot load %s\n", model_path.c_str());
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int32_t n_vocab_tok = llama_vocab_n_tokens(vocab);
    const int32_t n_vocab = embd ? llama_model_n_embd(model) : n_vocab_tok;  // the row size written
    for (llama_token t : tokens) {
        if (t >= n_vocab_tok) {
            fprintf(stderr, "lcpp-logits: token %d out of range (n_vocab %d)\n", t, n_vocab_tok);
            return 1;
        }
    }

    const int32_t n_tokens = (int32_t) tokens.size();
    const uint32_t n_ctx = (uint32_t) ((n_tokens + 31) / 32 * 32);

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_ctx;
    cp.n_ubatch = n_ctx;
    cp.n_seq_max = 1;
    cp.flash_attn = false;
    cp.embeddings = embd;
    if (embd) cp.pooling_type = LLAMA_POOLING_TYPE_NONE;
    cp.no_perf = true;
    cp.type_k = kv_f16 ? GGML_TYPE_F16 : GGML_TYPE_F32;
    cp.type_v = kv_f16 ? GGML_TYPE_F16 : GGML_TYPE_F32;
    if (n_threads > 0) {
        cp.n_threads = n_threads;
        cp.n_threads_batch = n_threads;
    }
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "lcpp-logits: cannot create a context\n");
        llama_model_free(model);
        return 1;
    }

    llama_batch batch = llama_batch_init(n_tokens, 0, 1);
    for (int32_t i = 0; i < n_tokens; i++) {
        batch.token[i] = tokens[i];
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = n_tokens;

    int rc = 0;
    if (llama_decode(ctx, batch) != 0) {
        fprintf(stderr, "lcpp-logits: llama_decode failed\n");
        rc = 1;
    } else {
        std::vector<float> logits((size_t) n_tokens * n_vocab);
        for (int32_t i = 0; i < n_tokens; i++) {
            const float * l = embd ? llama_get_embeddings_ith(ctx, i) : llama_get_logits_ith(ctx, i);
            if (!l) {
                fprintf(stderr, "lcpp-logits: no logits for token %d\n", i);
                rc = 1;
                break;
            }
            memcpy(logits.data() + (size_t) i * n_vocab, l, sizeof(float) * n_vocab);
        }
        if (rc == 0) {
            const std::string tmp = out_path + ".tmp";
            FILE * f = fopen(tmp.c_str(), "wb");
            const int32_t header[2] = { n_tokens, n_vocab };
            bool ok = f && fwrite(header, sizeof(header), 1, f) == 1 &&
                      fwrite(tokens.data(), sizeof(llama_token), tokens.size(), f) == tokens.size() &&
                      fwrite(logits.data(), sizeof(float), logits.size(), f) == logits.size();
            if (f) {
                ok = (fclose(f) == 0) && ok;
            }
            if (!ok || rename(tmp.c_str(), out_path.c_str()) != 0) {
                fprintf(stderr, "lcpp-logits: cannot write %s\n", out_path.c_str());
                remove(tmp.c_str());
                rc = 1;
            }
        }
    }

    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
