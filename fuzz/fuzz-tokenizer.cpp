// fuzz-tokenizer: tokenizing and detokenizing arbitrary bytes with real vocabularies, loaded once
// (vocab_only): SentencePiece ones (stories260K, llama-spm, phi-3) and a byte-level BPE one
// (gpt-2) from the shared test models when present, and the tiny SPM and BPE vocabularies of the
// fuzz-model seeds (always). Input: byte 0 picks the vocabulary (modulo 6: stories260K, llama-spm,
// gpt-2, phi-3, tiny SPM, tiny BPE), byte 1 the flags, the rest is the text. Every call must stay in bounds; round trips are exercised, not compared.
#include "fuzz-common.h"

#include <sys/stat.h>

#include <memory>
#include <vector>

namespace {

std::string env_or(const char * name, const std::string & fallback) {
    const char * e = getenv(name);
    return e && *e ? std::string(e) : fallback;
}

// Six fixed slots, so that a saved input picks the same vocabulary on every machine: a slot whose
// file is absent falls back to the tiny vocabulary of the same kind.
struct vocabs {
    std::vector<llama_model *> owned;
    const llama_model * slot[6] = {};
    vocabs() {
        fuzz::quiet();
#ifdef FUZZ_SHARED_DIR
        const std::string shared = env_or("LLAMA_SHARED", FUZZ_SHARED_DIR);
#else
        const std::string shared = env_or("LLAMA_SHARED", "../shared");
#endif
        const std::string dir = env_or("LLAMA_TEST_MODELS", shared + "/models");
#ifdef FUZZ_SOURCE_DIR
        const std::string seeds = std::string(FUZZ_SOURCE_DIR) + "/corpus/fuzz-model";
#else
        const std::string seeds = "fuzz/corpus/fuzz-model";
#endif
        const llama_model * tiny_spm = load(seeds + "/tiny-llama-spm.gguf");
        const llama_model * tiny_bpe = load(seeds + "/tiny-qwen2-bpe.gguf");
        if (!tiny_spm || !tiny_bpe) {
            fprintf(stderr, "fuzz-tokenizer: cannot load the tiny vocabularies of %s\n", seeds.c_str());
            abort();
        }
        struct { const char * file; const llama_model * fallback; } files[4] = {
            { "/stories260K.gguf", tiny_spm },
            { "/vocab/ggml-vocab-llama-spm.gguf", tiny_spm },
            { "/vocab/ggml-vocab-gpt-2.gguf", tiny_bpe },
            { "/vocab/ggml-vocab-phi-3.gguf", tiny_spm },
        };
        for (int i = 0; i < 4; i++) {
            const llama_model * m = load(dir + files[i].file);
            slot[i] = m ? m : files[i].fallback;
        }
        slot[4] = tiny_spm;
        slot[5] = tiny_bpe;
    }
    const llama_model * load(const std::string & path) {
        struct stat st;
        if (stat(path.c_str(), &st) != 0) return nullptr;
        llama_model_params p = llama_model_default_params();
        p.vocab_only = true;
        llama_model * m = llama_model_load_from_file(path.c_str(), p);
        if (m) owned.push_back(m);
        return m;
    }
    ~vocabs() {
        for (llama_model * m : owned) llama_model_free(m);
    }
};

const vocabs & get_vocabs() {
    static const vocabs v;
    return v;
}

std::vector<llama_token> tokenize(const llama_vocab * vocab, const std::string & text, bool add_special, bool parse_special) {
    std::vector<llama_token> out(text.size() / 2 + 4);
    int32_t n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), out.data(), (int32_t) out.size(),
                               add_special, parse_special);
    if (n < 0) {
        FUZZ_CHECK(n != INT32_MIN);
        out.resize((size_t) -n);
        const int32_t n2 = llama_tokenize(vocab, text.data(), (int32_t) text.size(), out.data(), (int32_t) out.size(),
                                          add_special, parse_special);
        FUZZ_CHECK(n2 == -n);
        n = n2;
    }
    out.resize((size_t) n);
    return out;
}

std::string detokenize(const llama_vocab * vocab, const std::vector<llama_token> & tokens, bool remove_special,
                       bool unparse_special) {
    std::string out(8, '\0');  // too short most of the time: exercises the size query
    int32_t n = llama_detokenize(vocab, tokens.data(), (int32_t) tokens.size(), &out[0], (int32_t) out.size(),
                                 remove_special, unparse_special);
    if (n < 0) {
        FUZZ_CHECK(n != INT32_MIN);
        out.resize((size_t) -n);
        const int32_t n2 = llama_detokenize(vocab, tokens.data(), (int32_t) tokens.size(), &out[0], (int32_t) out.size(),
                                            remove_special, unparse_special);
        FUZZ_CHECK(n2 == -n);
        n = n2;
    }
    out.resize((size_t) n);
    return out;
}

}  // namespace

#ifndef LLVMFuzzerTestOneInput  // a fuzzer (test-fuzz-regressions renames the entry and calls it itself)
// The vocabularies load before the first input: outside libFuzzer's per-input timeout (-timeout=1),
// which their loading under the sanitizers came near on a loaded machine.
extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    get_vocabs();
    return 0;
}
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    const vocabs & v = get_vocabs();
    fuzz::reader in{ data, size };
    const llama_model * model = v.slot[in.u8() % 6];
    const uint8_t flags = in.u8();
    const std::string text = in.rest();
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);

    const bool add_special = flags & 1, parse_special = flags & 2;
    const bool remove_special = flags & 4, unparse_special = flags & 8;
    const int32_t lstrip = (flags >> 4) & 3;

    // Text -> tokens -> pieces and text -> tokens again.
    const std::vector<llama_token> tokens = tokenize(vocab, text, add_special, parse_special);
    for (llama_token t : tokens) FUZZ_CHECK(t >= 0 && t < n_vocab);
    char piece[4];
    for (llama_token t : tokens) {
        const int32_t n = llama_token_to_piece(vocab, t, piece, sizeof(piece), lstrip, unparse_special);
        if (n < 0) {
            std::vector<char> big((size_t) -n);
            FUZZ_CHECK(llama_token_to_piece(vocab, t, big.data(), -n, lstrip, unparse_special) == -n);
        }
    }
    const std::string back = detokenize(vocab, tokens, remove_special, unparse_special);
    const std::vector<llama_token> again = tokenize(vocab, back, false, !parse_special);
    for (llama_token t : again) FUZZ_CHECK(t >= 0 && t < n_vocab);
    detokenize(vocab, again, !remove_special, !unparse_special);

    // The bytes read as token ids (any value, valid or not).
    std::vector<llama_token> ids(text.size() / sizeof(llama_token));
    if (!ids.empty()) memcpy(ids.data(), text.data(), ids.size() * sizeof(llama_token));
    const std::string s = detokenize(vocab, ids, remove_special, unparse_special);
    tokenize(vocab, s, add_special, parse_special);
    for (llama_token t : ids) {
        llama_token_to_piece(vocab, t, piece, sizeof(piece), lstrip, unparse_special);
        (void) llama_vocab_get_text(vocab, t);
        (void) llama_vocab_is_eog(vocab, t);
    }
    return 0;
}
