// example.cpp - a program written for llama.cpp's C API, as llama.cpp's llama.h (commit c392e509)
// declares it, in the manner of its examples: it uses nothing specific to this project and
// compiles unchanged against llama.cpp's header:
//
//     g++ -fsyntax-only -I<llama.cpp>/include -I<llama.cpp>/ggml/include example.cpp
//
// It loads a model, generates greedily from a prompt with llama_batch_get_one, checks that an
// explicit llama_batch gives the same next token, edits the KV cache, samples with a seeded
// chain and with a sampler of its own (llama_sampler_i), formats a chat, and prints timings.
// Exit status 0 when every check holds and text was generated.
//
//     example MODEL.gguf [N_PREDICT]
#include "llama.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int g_failures = 0;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            g_failures++;                                                            \
        }                                                                            \
    } while (0)

// Only errors reach stderr.
void log_errors(enum ggml_log_level level, const char * text, void * /*user_data*/) {
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

bool on_progress(float progress, void * user_data) {
    *(float *) user_data = progress;
    return true;
}

std::string token_to_piece(const llama_vocab * vocab, llama_token token) {
    char buf[128];
    const int n = llama_token_to_piece(vocab, token, buf, sizeof(buf), 0, true);
    if (n < 0) {
        std::string piece((size_t) -n, '\0');
        llama_token_to_piece(vocab, token, &piece[0], (int32_t) piece.size(), 0, true);
        return piece;
    }
    return std::string(buf, (size_t) n);
}

llama_token argmax(const float * logits, int32_t n_vocab) {
    llama_token best = 0;
    for (llama_token i = 1; i < n_vocab; i++) {
        if (logits[i] > logits[best]) best = i;
    }
    return best;
}

// A sampler of the program's own: forbids one token (its logit goes to -inf).
struct ban_state {
    llama_token banned;
    int n_applied;
};

const char * ban_name(const llama_sampler * /*smpl*/) { return "ban"; }

void ban_apply(llama_sampler * smpl, llama_token_data_array * cur_p) {
    ban_state * st = (ban_state *) smpl->ctx;
    st->n_applied++;
    for (size_t i = 0; i < cur_p->size; i++) {
        if (cur_p->data[i].id == st->banned) cur_p->data[i].logit = -INFINITY;
    }
    cur_p->sorted = false;
}

void ban_free(llama_sampler * smpl) { delete (ban_state *) smpl->ctx; }

const llama_sampler_i ban_iface = {
    /* .name   = */ ban_name,
    /* .accept = */ nullptr,
    /* .apply  = */ ban_apply,
    /* .reset  = */ nullptr,
    /* .clone  = */ nullptr,
    /* .free   = */ ban_free,
};

}  // namespace

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf [N_PREDICT]\n", argv[0]);
        return 2;
    }
    const char * model_path = argv[1];
    const int n_predict = argc > 2 ? atoi(argv[2]) : 24;
    const std::string prompt = "Once upon a time";

    llama_log_set(log_errors, nullptr);
    ggml_backend_load_all();
    llama_backend_init();

    // ---- the model ---------------------------------------------------------------------------
    float progress = 0.0f;
    llama_model_params model_params = llama_model_default_params();
    model_params.n_gpu_layers = 0;
    model_params.progress_callback = on_progress;
    model_params.progress_callback_user_data = &progress;
    llama_model * model = llama_model_load_from_file(model_path, model_params);
    if (model == nullptr) {
        fprintf(stderr, "error: unable to load model '%s'\n", model_path);
        return 1;
    }
    CHECK(progress == 1.0f);
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);

    char desc[128];
    llama_model_desc(model, desc, sizeof(desc));
    char arch[64];
    CHECK(llama_model_meta_val_str(model, "general.architecture", arch, sizeof(arch)) > 0);
    CHECK(llama_model_meta_count(model) > 0);
    char key[128];
    CHECK(llama_model_meta_key_by_index(model, 0, key, sizeof(key)) > 0);
    CHECK(llama_model_meta_val_str_by_index(model, -1, key, sizeof(key)) == -1);
    printf("model: %s (%s), %.2f M params, %llu bytes, n_ctx_train %d, n_embd %d, n_layer %d, n_head %d, n_vocab %d\n",
           desc, arch, llama_model_n_params(model) / 1e6, (unsigned long long) llama_model_size(model),
           llama_model_n_ctx_train(model), llama_model_n_embd(model), llama_model_n_layer(model),
           llama_model_n_head(model), n_vocab);
    CHECK(n_vocab > 0);
    CHECK(llama_vocab_type(vocab) == LLAMA_VOCAB_TYPE_SPM || llama_vocab_type(vocab) == LLAMA_VOCAB_TYPE_BPE);
    CHECK(llama_model_rope_type(model) != LLAMA_ROPE_TYPE_NONE);
    CHECK(!llama_model_has_encoder(model) && llama_model_has_decoder(model));
    CHECK(llama_print_system_info() != nullptr);

    // ---- the prompt --------------------------------------------------------------------------
    const int n_prompt = -llama_tokenize(vocab, prompt.c_str(), (int32_t) prompt.size(), nullptr, 0, true, true);
    std::vector<llama_token> prompt_tokens((size_t) n_prompt);
    if (llama_tokenize(vocab, prompt.c_str(), (int32_t) prompt.size(), prompt_tokens.data(), (int32_t) prompt_tokens.size(),
                       true, true) < 0) {
        fprintf(stderr, "error: failed to tokenize the prompt\n");
        return 1;
    }
    CHECK(n_prompt >= 2);
    CHECK(prompt_tokens[0] == llama_vocab_bos(vocab) || !llama_vocab_get_add_bos(vocab));
    char text[256];
    const int32_t n_text = llama_detokenize(vocab, prompt_tokens.data(), n_prompt, text, sizeof(text), true, false);
    // (llama.cpp keeps SentencePiece's leading space here, this project drops it)
    CHECK(n_text > 0 && std::string(text, (size_t) n_text).find(prompt) <= 1);

    // ---- the context -------------------------------------------------------------------------
    llama_context_params ctx_params = llama_context_default_params();
    ctx_params.n_ctx = (uint32_t) (n_prompt + n_predict + 16);
    ctx_params.n_batch = (uint32_t) n_prompt;
    ctx_params.n_threads = 2;
    ctx_params.n_threads_batch = 2;
    ctx_params.no_perf = false;
    llama_context * ctx = llama_init_from_model(model, ctx_params);
    if (ctx == nullptr) {
        fprintf(stderr, "error: failed to create the llama_context\n");
        return 1;
    }
    CHECK(llama_n_ctx(ctx) >= ctx_params.n_ctx);  // (llama.cpp pads it)
    CHECK(llama_n_batch(ctx) >= (uint32_t) n_prompt);  // (llama.cpp makes it at least 32)
    CHECK(llama_n_threads(ctx) == 2 && llama_n_threads_batch(ctx) == 2);
    CHECK(llama_get_model(ctx) == model);

    llama_sampler_chain_params sparams = llama_sampler_chain_default_params();
    sparams.no_perf = false;
    llama_sampler * smpl = llama_sampler_chain_init(sparams);
    llama_sampler_chain_add(smpl, llama_sampler_init_greedy());

    // ---- greedy generation, as llama.cpp's simple example does it ----------------------------
    std::string generated;
    std::vector<llama_token> generated_tokens;
    for (llama_token id : prompt_tokens) printf("%s", token_to_piece(vocab, id).c_str());
    llama_batch batch = llama_batch_get_one(prompt_tokens.data(), (int32_t) prompt_tokens.size());
    llama_token new_token_id;
    int n_decode = 0, n_sample = 0;
    for (int n_pos = 0; n_pos + batch.n_tokens < n_prompt + n_predict;) {
        if (llama_decode(ctx, batch)) {
            fprintf(stderr, "error: failed to eval\n");
            return 1;
        }
        n_decode++;
        n_pos += batch.n_tokens;
        new_token_id = llama_sampler_sample(smpl, ctx, -1);
        n_sample++;
        if (llama_vocab_is_eog(vocab, new_token_id)) break;
        const std::string piece = token_to_piece(vocab, new_token_id);
        printf("%s", piece.c_str());
        fflush(stdout);
        generated += piece;
        generated_tokens.push_back(new_token_id);
        batch = llama_batch_get_one(&new_token_id, 1);
    }
    printf("\n");
    CHECK(!generated_tokens.empty());
    CHECK(generated.find_first_not_of(" \n") != std::string::npos);
    CHECK(llama_get_kv_cache_used_cells(ctx) == n_prompt + n_decode - 1);

    llama_perf_sampler_print(smpl);
    llama_perf_context_print(ctx);
    const llama_perf_context_data perf = llama_perf_context(ctx);
    CHECK(perf.n_p_eval == n_prompt);
    CHECK(perf.n_eval == n_decode - 1);
    CHECK(perf.t_eval_ms > 0.0);
    CHECK(llama_perf_sampler(smpl).n_sample == n_sample);
    llama_perf_context_reset(ctx);
    llama_perf_sampler_reset(smpl);

    // ---- the prompt again in an explicit batch: same first token -----------------------------
    llama_kv_cache_clear(ctx);
    CHECK(llama_get_kv_cache_used_cells(ctx) == 0);
    llama_batch full = llama_batch_init(n_prompt, 0, 1);
    for (int i = 0; i < n_prompt; i++) {
        full.token[i] = prompt_tokens[(size_t) i];
        full.pos[i] = i;
        full.n_seq_id[i] = 1;
        full.seq_id[i][0] = 0;
        full.logits[i] = true;
    }
    full.n_tokens = n_prompt;
    CHECK(llama_decode(ctx, full) == 0);
    CHECK(llama_get_logits_ith(ctx, 0) != nullptr);
    const float * last = llama_get_logits_ith(ctx, full.n_tokens - 1);
    CHECK(last != nullptr && argmax(last, n_vocab) == generated_tokens[0]);
    CHECK(llama_get_logits(ctx) + (size_t) (n_prompt - 1) * n_vocab == last);
    llama_batch_free(full);

    // ---- the KV cache ------------------------------------------------------------------------
    CHECK(llama_kv_cache_seq_pos_max(ctx, 0) == n_prompt - 1);
    CHECK(llama_kv_cache_seq_rm(ctx, 0, n_prompt - 1, -1));
    CHECK(llama_get_kv_cache_used_cells(ctx) == n_prompt - 1);
    CHECK(llama_kv_cache_can_shift(ctx));
    llama_kv_cache_seq_add(ctx, 0, 0, -1, 3);
    llama_kv_cache_update(ctx);
    CHECK(llama_kv_cache_seq_pos_max(ctx, 0) == n_prompt + 1);
    llama_kv_cache_seq_add(ctx, 0, 0, -1, -3);
    CHECK(llama_kv_cache_seq_pos_max(ctx, 0) == n_prompt - 2);
    // The last prompt token after the others: the greedy choice comes back.
    llama_token last_prompt = prompt_tokens.back();
    CHECK(llama_decode(ctx, llama_batch_get_one(&last_prompt, 1)) == 0);
    CHECK(argmax(llama_get_logits_ith(ctx, -1), n_vocab) == generated_tokens[0]);

    // ---- a seeded sampling chain with a sampler of the program's own -------------------------
    llama_sampler * chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    ban_state * ban = new ban_state{ generated_tokens[0], 0 };
    llama_sampler_chain_add(chain, llama_sampler_init(&ban_iface, ban));
    llama_sampler_chain_add(chain, llama_sampler_init_top_k(40));
    llama_sampler_chain_add(chain, llama_sampler_init_top_p(0.95f, 1));
    llama_sampler_chain_add(chain, llama_sampler_init_min_p(0.05f, 1));
    llama_sampler_chain_add(chain, llama_sampler_init_temp(0.8f));
    llama_sampler_chain_add(chain, llama_sampler_init_dist(1234));
    CHECK(llama_sampler_chain_n(chain) == 6);
    CHECK(strcmp(llama_sampler_name(llama_sampler_chain_get(chain, 0)), "ban") == 0);
    CHECK(llama_sampler_get_seed(chain) == 1234);
    const llama_token drawn = llama_sampler_sample(chain, ctx, -1);
    CHECK(drawn != generated_tokens[0] && drawn >= 0 && drawn < n_vocab);
    CHECK(ban->n_applied == 1);
    llama_sampler_reset(chain);
    CHECK(llama_sampler_sample(chain, ctx, -1) == drawn);  // reset: the same seed again
    llama_sampler_free(chain);  // frees the samplers in it, ours included

    // ---- chat templates ----------------------------------------------------------------------
    const char * tmpl = llama_model_chat_template(model, nullptr);
    if (tmpl == nullptr) tmpl = "chatml";
    const llama_chat_message chat[] = {
        { "system", "You are a storyteller." },
        { "user", "Tell me a story." },
    };
    std::vector<char> formatted(16);
    int len = llama_chat_apply_template(tmpl, chat, 2, true, formatted.data(), (int32_t) formatted.size());
    CHECK(len > (int) formatted.size());
    formatted.resize((size_t) len + 1);
    len = llama_chat_apply_template(tmpl, chat, 2, true, formatted.data(), (int32_t) formatted.size());
    const std::string chat_text(formatted.data(), (size_t) len);
    CHECK(chat_text.find("Tell me a story.") != std::string::npos);
    const char * names[64];
    const int32_t n_names = llama_chat_builtin_templates(names, 64);
    CHECK(n_names > 0);

    // ---- the end -----------------------------------------------------------------------------
    llama_sampler_free(smpl);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();

    printf("generated %zu tokens: %s\n", generated_tokens.size(), generated.c_str());
    if (g_failures > 0) fprintf(stderr, "%d checks failed\n", g_failures);
    return g_failures == 0 ? 0 : 1;
}
