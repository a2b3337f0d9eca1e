// fuzz-model: model loading (llama_model_load_from_file) of arbitrary bytes: vocabulary only,
// then the whole model (mapped and repacked, and read without repacking). A model that loads is
// used: metadata accessors, tokenizing a short string, the chat template, and, when its weights
// are tiny, a context with n_ctx 16 (KV cache F16 or Q8_0, flash attention or not, by the input's
// size) that decodes a batch of 2 tokens then one more, and samples.
// Hyper-parameters and tensor shapes that disagree must give a clean error (NULL), never a
// crash, a hang or a leak.
#include "fuzz-common.h"

#include "gguf.h"

#include <vector>

namespace {

void use_vocab(const llama_vocab * vocab, std::vector<llama_token> & tokens) {
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    FUZZ_CHECK(n_vocab >= 0);
    static const char text[] = "Hello world! <s> <|im_start|>user\n\xc3\xa9\xe2\x96\x81 \xff\x00z";
    for (int special = 0; special < 2; special++) {
        llama_token buf[64];
        const int32_t n = llama_tokenize(vocab, text, (int32_t) sizeof(text) - 1, buf, 64, special, special);
        FUZZ_CHECK(n >= 0);  // the text has far fewer than 64 bytes: far fewer tokens
        for (int32_t i = 0; i < n; i++) FUZZ_CHECK(buf[i] >= 0 && buf[i] < n_vocab);
        if (special) tokens.assign(buf, buf + n);
        char out[256];
        const int32_t m = llama_detokenize(vocab, buf, n, out, sizeof(out), special, special);
        FUZZ_CHECK(m >= -(1 << 20));
    }
    // Every token's text and piece, when the vocabulary is small enough to be quick.
    const int32_t n_check = n_vocab < 4096 ? n_vocab : 4096;
    for (llama_token t = -1; t <= n_check; t++) {
        const char * s = llama_vocab_get_text(vocab, t);
        FUZZ_CHECK(s != nullptr);
        fuzz::touch(s, strlen(s));
        char piece[8];
        for (int special = 0; special < 2; special++) {
            const int32_t n = llama_token_to_piece(vocab, t, piece, sizeof(piece), 1, special);
            if (n < 0) {
                std::vector<char> big((size_t) -n);
                FUZZ_CHECK(llama_token_to_piece(vocab, t, big.data(), -n, 1, special) == -n);
            }
        }
        (void) llama_vocab_get_score(vocab, t);
        (void) llama_vocab_is_eog(vocab, t);
        (void) llama_vocab_is_control(vocab, t);
    }
    for (llama_token t : { llama_vocab_bos(vocab), llama_vocab_eos(vocab), llama_vocab_eot(vocab) }) {
        FUZZ_CHECK(t == LLAMA_TOKEN_NULL || (t >= 0 && t < n_vocab));
    }
}

void use_metadata(const llama_model * model, const char * path) {
    char buf[16];
    FUZZ_CHECK(llama_model_desc(model, buf, sizeof(buf)) >= 0);
    // Every key of the file through llama_model_meta_val_str, into a short buffer.
    gguf_init_params gp = {};
    gp.no_alloc = true;
    gguf_context * g = gguf_init_from_file(path, gp);
    FUZZ_CHECK(g != nullptr);  // the model loaded from it
    for (int64_t i = 0; i < gguf_get_n_kv(g); i++) {
        const int32_t n = llama_model_meta_val_str(model, gguf_get_key(g, i), buf, sizeof(buf));
        FUZZ_CHECK(n >= 0);
        FUZZ_CHECK(strlen(buf) < sizeof(buf));
    }
    gguf_free(g);
    FUZZ_CHECK(llama_model_meta_val_str(model, "no.such.key", buf, sizeof(buf)) == -1);
    const char * tmpl = llama_model_chat_template(model, nullptr);
    llama_chat_message msgs[] = { { "system", "s" }, { "user", "hi" }, { "assistant", "yo" } };
    char out[64];
    // A template of the file's is formatted, or refused (-1) when it is none of the built-in formats.
    const int32_t n_fmt = llama_chat_apply_template(tmpl, msgs, 3, true, out, sizeof(out));
    FUZZ_CHECK(n_fmt >= 0 || (tmpl && n_fmt == -1 && llama_chat_apply_template(tmpl, nullptr, 0, false, nullptr, 0) == -1));
    (void) llama_model_n_ctx_train(model);
    (void) llama_model_n_embd(model);
    (void) llama_model_n_layer(model);
    (void) llama_model_n_head(model);
    (void) llama_model_n_head_kv(model);
    (void) llama_model_n_params(model);
}

void run_model(llama_model * model, std::vector<llama_token> tokens, size_t input_size) {
    const int32_t n_vocab = llama_model_n_vocab(model);
    FUZZ_CHECK(n_vocab > 0);
    // Tiny models only: the weights come from the input, which is small, but keep each run fast.
    if (llama_model_size(model) >= (8u << 20)) return;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 16;
    cp.n_batch = 16;
    cp.n_threads = 1;
    // The KV cache type and the attention kernel vary with the input's size (deterministic).
    cp.type_k = cp.type_v = (input_size & 1) ? GGML_TYPE_Q8_0 : GGML_TYPE_F16;
    cp.flash_attn = (input_size & 2) != 0;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) return;  // refused cleanly (e.g. no memory for the cache)
    FUZZ_CHECK(llama_n_ctx(ctx) >= 3);
    while (tokens.size() < 3) tokens.push_back((llama_token) (tokens.size() % (size_t) n_vocab));
    tokens.resize(3);
    for (llama_token & t : tokens) FUZZ_CHECK(t >= 0 && t < n_vocab);

    const int32_t r = llama_decode(ctx, llama_batch_get_one(tokens.data(), 2));
    FUZZ_CHECK(r == 0 || r == -2);
    if (r == 0) {
        const float * logits = llama_get_logits_ith(ctx, -1);
        FUZZ_CHECK(logits != nullptr);
        fuzz::touch(logits, (size_t) n_vocab * sizeof(float));
        llama_sampler * s = llama_sampler_chain_init(llama_sampler_chain_default_params());
        llama_sampler_chain_add(s, llama_sampler_init_penalties(8, 1.1f, 0.1f, 0.1f));
        llama_sampler_chain_add(s, llama_sampler_init_top_k(4));
        llama_sampler_chain_add(s, llama_sampler_init_top_p(0.9f, 1));
        llama_sampler_chain_add(s, llama_sampler_init_min_p(0.05f, 1));
        llama_sampler_chain_add(s, llama_sampler_init_temp(0.8f));
        llama_sampler_chain_add(s, llama_sampler_init_dist(1));
        const llama_token next = llama_sampler_sample(s, ctx, -1);
        FUZZ_CHECK(next >= 0 && next < n_vocab);
        llama_sampler_free(s);

        // One more token: the single-token path, attending to the cached two.
        const int32_t r2 = llama_decode(ctx, llama_batch_get_one(&tokens[2], 1));
        FUZZ_CHECK(r2 == 0 || r2 == -2);
        if (r2 == 0) FUZZ_CHECK(llama_kv_self_seq_pos_max(ctx, 0) == 2);
    }
    llama_free(ctx);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    fuzz::quiet();
    fuzz::mem_file f(data, size);

    // The tokenizer alone (any architecture).
    llama_model_params p = llama_model_default_params();
    p.vocab_only = true;
    if (llama_model * m = llama_model_load_from_file(f.path.c_str(), p)) {
        std::vector<llama_token> tokens;
        use_vocab(llama_model_get_vocab(m), tokens);
        use_metadata(m, f.path.c_str());
        // A context for tokenizing only: it decodes nothing.
        llama_context_params cp = llama_context_default_params();
        cp.n_ctx = 64;
        llama_context * ctx = llama_init_from_model(m, cp);
        FUZZ_CHECK(ctx != nullptr);
        llama_token t = 0;
        FUZZ_CHECK(llama_decode(ctx, llama_batch_get_one(&t, 1)) == -1);
        llama_free(ctx);
        llama_model_free(m);
    }

    // The whole model, mapped and repacked (as llama-cli loads it), then read into memory as is.
    for (int read = 0; read < 2; read++) {
        p = llama_model_default_params();
        p.use_mmap = read == 0;
        p.use_repack = read == 0;
        llama_model * m = llama_model_load_from_file(f.path.c_str(), p);
        if (!m) continue;
        std::vector<llama_token> tokens;
        use_vocab(llama_model_get_vocab(m), tokens);
        if (read == 0) use_metadata(m, f.path.c_str());
        run_model(m, tokens, size);
        llama_model_free(m);
    }
    return 0;
}
