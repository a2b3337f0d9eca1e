// gen.cpp - writes the reference saved states of tests/llama/test-state.cpp with llama.cpp's own
// library (build 4747), and checks that llama.cpp loads a session file written by this runtime.
// Not part of the build: it links llama.cpp, built separately.
//
//   g++ -std=c++17 -O2 gen.cpp -I$LCPP/include -I$LCPP/ggml/include -L$LCPP/build/bin -lllama \
//       -Wl,-rpath,$LCPP/build/bin -o state-gen
//   ./state-gen save stories260K.gguf OUTDIR     # writes the files below into OUTDIR
//   ./state-gen load stories260K.gguf SESSION TOKEN OUT.bin
//         loads a session file, decodes TOKEN after its tokens, writes the n_vocab logits
//
// The files (default context: n_ctx 512, F16 cache, no flash attention, greedy):
//   session-1seq.bin  'ggsn' session after the prompt "Once upon a time, there was a little" in seq 0
//   logits-1seq.bin   i32 n_vocab, i32 next (the argmax after the prompt), f32[n_vocab] the prompt's
//                     last logits, f32[n_vocab] the logits after decoding next
//   session-2seq.bin  n_seq_max 4: BOS in seqs 0 and 1 (one shared cell), then "Lily went" in seq
//                     0 and "The dog" in seq 1, in one batch with the last token of each an output
//   logits-2seq.bin   i32 n_vocab, i32 next0, i32 next1, f32[n_vocab] x 4: the two outputs' logits,
//                     then those after decoding next0 (seq 0) and next1 (seq 1) in one batch
//   seq1.bin          'ggsq' file: sequence 1 of that context (after the prompts) with its tokens
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static std::vector<llama_token> tokenize(const llama_vocab * vocab, const std::string & text, bool bos) {
    std::vector<llama_token> t(text.size() + 8);
    const int n = llama_tokenize(vocab, text.c_str(), (int) text.size(), t.data(), (int) t.size(), bos, false);
    if (n < 0) exit(1);
    t.resize(n);
    return t;
}

static void add(llama_batch & b, llama_token t, llama_pos p, std::vector<llama_seq_id> seqs, bool out) {
    const int i = b.n_tokens++;
    b.token[i] = t;
    b.pos[i] = p;
    b.n_seq_id[i] = (int) seqs.size();
    for (size_t j = 0; j < seqs.size(); j++) b.seq_id[i][j] = seqs[j];
    b.logits[i] = out;
}

static llama_token argmax(const float * l, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) if (l[i] > l[best]) best = i;
    return best;
}

static void put(FILE * f, const void * p, size_t n) {
    if (fwrite(p, 1, n, f) != n) exit(1);
}

int main(int argc, char ** argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s save MODEL OUTDIR | load MODEL SESSION TOKEN OUT\n", argv[0]);
        return 1;
    }
    const std::string mode = argv[1];
    llama_backend_init();
    llama_model * model = llama_model_load_from_file(argv[2], llama_model_default_params());
    if (!model) return 1;
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    if (mode == "load") {
        llama_context * ctx = llama_init_from_model(model, llama_context_default_params());
        std::vector<llama_token> toks(4096);
        size_t n = 0;
        if (!llama_state_load_file(ctx, argv[3], toks.data(), toks.size(), &n)) return 1;
        llama_batch b = llama_batch_init(1, 0, 1);
        add(b, (llama_token) atoi(argv[4]), (llama_pos) n, {0}, true);
        if (llama_decode(ctx, b)) return 1;
        FILE * f = fopen(argv[5], "wb");
        put(f, llama_get_logits_ith(ctx, 0), n_vocab * sizeof(float));
        fclose(f);
        printf("loaded %zu tokens, decoded %s, next argmax %d\n", n, argv[4], argmax(llama_get_logits_ith(ctx, 0), n_vocab));
        return 0;
    }

    const std::string dir = argv[3];
    {
        llama_context * ctx = llama_init_from_model(model, llama_context_default_params());
        const auto toks = tokenize(vocab, "Once upon a time, there was a little", true);
        llama_batch b = llama_batch_init(512, 0, 4);
        for (size_t i = 0; i < toks.size(); i++) add(b, toks[i], (llama_pos) i, {0}, i + 1 == toks.size());
        if (llama_decode(ctx, b)) return 1;
        std::vector<float> l0(llama_get_logits_ith(ctx, -1), llama_get_logits_ith(ctx, -1) + n_vocab);
        const llama_token next = argmax(l0.data(), n_vocab);
        if (!llama_state_save_file(ctx, (dir + "/session-1seq.bin").c_str(), toks.data(), toks.size())) return 1;
        b.n_tokens = 0;
        add(b, next, (llama_pos) toks.size(), {0}, true);
        if (llama_decode(ctx, b)) return 1;
        FILE * f = fopen((dir + "/logits-1seq.bin").c_str(), "wb");
        put(f, &n_vocab, 4);
        put(f, &next, 4);
        put(f, l0.data(), n_vocab * sizeof(float));
        put(f, llama_get_logits_ith(ctx, 0), n_vocab * sizeof(float));
        fclose(f);
        llama_batch_free(b);
        llama_free(ctx);
        printf("1seq: %zu tokens, next %d\n", toks.size(), next);
    }
    {
        llama_context_params cp = llama_context_default_params();
        cp.n_seq_max = 4;
        llama_context * ctx = llama_init_from_model(model, cp);
        const auto a = tokenize(vocab, "Lily went", false);
        const auto c = tokenize(vocab, "The dog", false);
        llama_batch b = llama_batch_init(512, 0, 4);
        add(b, llama_vocab_bos(vocab), 0, {0, 1}, false);
        for (size_t i = 0; i < a.size(); i++) add(b, a[i], (llama_pos) i + 1, {0}, i + 1 == a.size());
        const int out0 = b.n_tokens - 1;
        for (size_t i = 0; i < c.size(); i++) add(b, c[i], (llama_pos) i + 1, {1}, i + 1 == c.size());
        const int out1 = b.n_tokens - 1;
        if (llama_decode(ctx, b)) return 1;
        std::vector<float> la(llama_get_logits_ith(ctx, out0), llama_get_logits_ith(ctx, out0) + n_vocab);
        std::vector<float> lb(llama_get_logits_ith(ctx, out1), llama_get_logits_ith(ctx, out1) + n_vocab);
        const llama_token n0 = argmax(la.data(), n_vocab), n1 = argmax(lb.data(), n_vocab);
        std::vector<llama_token> all(b.token, b.token + b.n_tokens);
        if (!llama_state_save_file(ctx, (dir + "/session-2seq.bin").c_str(), all.data(), all.size())) return 1;
        std::vector<llama_token> s1 = { llama_vocab_bos(vocab) };
        s1.insert(s1.end(), c.begin(), c.end());
        if (!llama_state_seq_save_file(ctx, (dir + "/seq1.bin").c_str(), 1, s1.data(), s1.size())) return 1;
        b.n_tokens = 0;
        add(b, n0, (llama_pos) a.size() + 1, {0}, true);
        add(b, n1, (llama_pos) c.size() + 1, {1}, true);
        if (llama_decode(ctx, b)) return 1;
        FILE * f = fopen((dir + "/logits-2seq.bin").c_str(), "wb");
        put(f, &n_vocab, 4);
        put(f, &n0, 4);
        put(f, &n1, 4);
        put(f, la.data(), n_vocab * sizeof(float));
        put(f, lb.data(), n_vocab * sizeof(float));
        put(f, llama_get_logits_ith(ctx, 0), n_vocab * sizeof(float));
        put(f, llama_get_logits_ith(ctx, 1), n_vocab * sizeof(float));
        fclose(f);
        llama_batch_free(b);
        llama_free(ctx);
        printf("2seq: %zu + %zu tokens, next %d %d\n", a.size(), c.size(), n0, n1);
    }
    llama_model_free(model);
    return 0;
}
