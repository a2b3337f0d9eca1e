/* simple: the shortest complete use of the C API: load a model, tokenize a prompt, evaluate it,
 * then generate greedily token by token.
 *
 *   llama-simple MODEL [PROMPT] [N]
 */
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL [PROMPT] [N]\n", argv[0]);
        return 1;
    }
    const char * prompt = argc > 2 ? argv[2] : "Once upon a time";
    const int n_predict = argc > 3 ? atoi(argv[3]) : 32;

    struct llama_model * model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (!model) return 1;
    const struct llama_vocab * vocab = llama_model_get_vocab(model);

    struct llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx = 512;
    struct llama_context * ctx = llama_init_from_model(model, cparams);
    if (!ctx) return 1;

    /* Tokenize: a first call with no room returns minus the number of tokens. */
    const int n_prompt = -llama_tokenize(vocab, prompt, (int) strlen(prompt), NULL, 0, true, true);
    llama_token * tokens = malloc(sizeof(llama_token) * (size_t) (n_prompt + n_predict));
    llama_tokenize(vocab, prompt, (int) strlen(prompt), tokens, n_prompt, true, true);

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
    return 0;
}
