/* simple: the shortest complete use of the C API: load a model, tokenize a prompt, evaluate it,
 * then generate greedily token by token. Arguments as llama.cpp's simple example:
 *
 *   llama-simple -m MODEL [-n N_PREDICT] [-ngl N_GPU_LAYERS (default 99: all, where the build has a GPU)] [PROMPT...]
 */
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char ** argv) {
    const char * model_path = NULL;
    const char * prompt = "Hello my name is";
    int n_predict = 32;
    int ngl = 99; /* llama.cpp's simple example offloads every layer by default */
    char * joined = NULL;
    int a = 1;
    for (; a < argc; a++) {
        if (!strcmp(argv[a], "-m") && a + 1 < argc) model_path = argv[++a];
        else if (!strcmp(argv[a], "-n") && a + 1 < argc) n_predict = atoi(argv[++a]);
        else if (!strcmp(argv[a], "-ngl") && a + 1 < argc) ngl = atoi(argv[++a]);
        else break;  /* the rest is the prompt */
    }
    if (!model_path || n_predict < 0 || (a < argc && argv[a][0] == '-' && argv[a][1] != '\0')) {
        fprintf(stderr, "usage: %s -m model.gguf [-n n_predict] [-ngl n_gpu_layers] [prompt]\n", argv[0]);
        return 1;
    }
    if (a < argc) {  /* the remaining arguments, joined with spaces */
        size_t len = 1;
        for (int k = a; k < argc; k++) len += strlen(argv[k]) + 1;
        joined = calloc(len, 1);
        for (int k = a; k < argc; k++) strcat(strcat(joined, k > a ? " " : ""), argv[k]);
        prompt = joined;
    }

    struct llama_model_params mparams = llama_model_default_params();
    mparams.n_gpu_layers = ngl;
    struct llama_model * model = llama_model_load_from_file(model_path, mparams);
    if (!model) return 1;
    const struct llama_vocab * vocab = llama_model_get_vocab(model);

    /* Tokenize: a first call with no room returns minus the number of tokens. */
    const int n_prompt = -llama_tokenize(vocab, prompt, (int) strlen(prompt), NULL, 0, true, true);
    llama_token * tokens = malloc(sizeof(llama_token) * (size_t) (n_prompt + n_predict + 1));
    llama_tokenize(vocab, prompt, (int) strlen(prompt), tokens, n_prompt, true, true);

    struct llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx = (uint32_t) (n_prompt + n_predict + 1);
    struct llama_context * ctx = llama_init_from_model(model, cparams);
    if (!ctx) return 1;

    struct llama_sampler * smpl = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(smpl, llama_sampler_init_greedy());

    printf("%s", prompt);
    struct llama_batch batch = llama_batch_get_one(tokens, n_prompt);
    for (int i = 0; i < n_predict; i++) {
        if (llama_decode(ctx, batch) != 0) {
            fprintf(stderr, "decode failed\n");
            break;
        }
        llama_token next = llama_sampler_sample(smpl, ctx, -1);
        if (llama_vocab_is_eog(vocab, next)) break;
        char piece[128];
        const int n = llama_token_to_piece(vocab, next, piece, sizeof(piece), 0, false);
        printf("%.*s", n > 0 ? n : 0, piece);
        fflush(stdout);
        tokens[n_prompt + i] = next;
        batch = llama_batch_get_one(&tokens[n_prompt + i], 1);
    }
    printf("\n");

    llama_sampler_free(smpl);
    llama_free(ctx);
    llama_model_free(model);
    free(tokens);
    free(joined);
    return 0;
}
