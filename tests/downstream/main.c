/* main.c - a downstream program: loads a model, generates a few tokens greedily, prints them. */
#include "llama.h"

#include <stdio.h>

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
        return 1;
    }
    llama_backend_init();
    struct llama_model * model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (!model) return 1;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 64;
    struct llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) return 1;
    const struct llama_vocab * vocab = llama_model_get_vocab(model);
    llama_token toks[64];
    int n = llama_tokenize(vocab, "Once upon a time", 16, toks, 64, 1, 1);
    struct llama_sampler * smpl = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(smpl, llama_sampler_init_greedy());
    int rc = n > 0 ? 0 : 1;
    for (int i = 0; i < 8 && rc == 0; i++) {
        if (llama_decode(ctx, llama_batch_get_one(toks, n)) != 0) rc = 1;
        if (rc) break;
        toks[0] = llama_sampler_sample(smpl, ctx, -1);
        n = 1;
        char piece[64];
        const int len = llama_token_to_piece(vocab, toks[0], piece, sizeof(piece), 0, 0);
        if (len > 0) fwrite(piece, 1, (size_t) len, stdout);
    }
    printf("\n");
    llama_sampler_free(smpl);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
