/* example.c - a C program written for llama.cpp's C API, as llama.cpp's llama.h (commit c392e509)
 * declares it: it compiles unchanged against llama.cpp's header as well:
 *
 *     gcc -std=c11 -fsyntax-only -I<llama.cpp>/include -I<llama.cpp>/ggml/include example.c
 *
 * Generates greedily from a prompt, feeding the tokens through a batch from llama_batch_init
 * with explicit positions, sequence ids and output flags; then formats a chat.
 * Exit status 0 when every check holds and text was generated.
 *
 *     example-c MODEL.gguf [N_PREDICT]
 */
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_failures = 0;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            g_failures++;                                                            \
        }                                                                            \
    } while (0)

static void log_errors(enum ggml_log_level level, const char * text, void * user_data) {
    (void) user_data;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

/* Puts one token into the batch: position pos, sequence 0, with or without logits. */
static void batch_add(struct llama_batch * batch, llama_token token, llama_pos pos, bool logits) {
    const int32_t i = batch->n_tokens++;
    batch->token[i] = token;
    batch->pos[i] = pos;
    batch->n_seq_id[i] = 1;
    batch->seq_id[i][0] = 0;
    batch->logits[i] = logits;
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf [N_PREDICT]\n", argv[0]);
        return 2;
    }
    const int n_predict = argc > 2 ? atoi(argv[2]) : 16;
    const char * prompt = "Once upon a time";

    llama_log_set(log_errors, NULL);
    llama_backend_init();

    struct llama_model_params mparams = llama_model_default_params();
    struct llama_model * model = llama_model_load_from_file(argv[1], mparams);
    if (!model) {
        fprintf(stderr, "error: unable to load model '%s'\n", argv[1]);
        return 1;
    }
    const struct llama_vocab * vocab = llama_model_get_vocab(model);

    llama_token tokens[64];
    const int32_t n_prompt = llama_tokenize(vocab, prompt, (int32_t) strlen(prompt), tokens, 64, true, false);
    CHECK(n_prompt > 1);
    if (n_prompt <= 1) return 1;

    struct llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx = 128;
    cparams.n_batch = 64;
    cparams.n_threads = 2;
    cparams.n_threads_batch = 2;
    struct llama_context * ctx = llama_init_from_model(model, cparams);
    if (!ctx) {
        fprintf(stderr, "error: failed to create the llama_context\n");
        return 1;
    }

    struct llama_sampler * smpl = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(smpl, llama_sampler_init_top_k(1));
    llama_sampler_chain_add(smpl, llama_sampler_init_dist(LLAMA_DEFAULT_SEED));

    struct llama_batch batch = llama_batch_init(64, 0, 1);
    for (int32_t i = 0; i < n_prompt; i++) batch_add(&batch, tokens[i], i, i == n_prompt - 1);

    char text[1024] = "";
    size_t n_text = 0;
    int n_generated = 0;
    llama_pos n_past = 0;
    for (int i = 0; i < n_predict; i++) {
        if (llama_decode(ctx, batch) != 0) {
            fprintf(stderr, "error: llama_decode failed\n");
            g_failures++;
            break;
        }
        n_past += batch.n_tokens;
        const llama_token id = llama_sampler_sample(smpl, ctx, batch.n_tokens - 1);
        if (llama_vocab_is_eog(vocab, id)) break;
        char piece[64];
        const int32_t n = llama_token_to_piece(vocab, id, piece, (int32_t) sizeof(piece), 0, false);
        if (n > 0 && n_text + (size_t) n < sizeof(text)) {
            memcpy(text + n_text, piece, (size_t) n);
            n_text += (size_t) n;
            text[n_text] = '\0';
        }
        n_generated++;
        batch.n_tokens = 0;
        batch_add(&batch, id, n_past, true);
    }
    printf("%s%s\n", prompt, text);
    CHECK(n_generated > 0);
    CHECK(strspn(text, " \n") < n_text);
    CHECK(llama_get_kv_cache_used_cells(ctx) == n_past);
    CHECK(llama_kv_cache_seq_pos_max(ctx, 0) == n_past - 1);

    const struct llama_chat_message chat[2] = {
        { "user", "Hello" },
        { "assistant", "Hi there" },
    };
    char formatted[256];
    const int32_t len = llama_chat_apply_template("chatml", chat, 2, true, formatted, (int32_t) sizeof(formatted));
    CHECK(len > 0 && len < (int32_t) sizeof(formatted));
    CHECK(len > 0 && strstr(formatted, "Hi there") != NULL);

    llama_batch_free(batch);
    llama_sampler_free(smpl);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();

    if (g_failures > 0) fprintf(stderr, "%d checks failed\n", g_failures);
    return g_failures == 0 ? 0 : 1;
}
