// llama-vocab.h - the tokenizer and vocabulary of a model, loaded from GGUF metadata
// (tokenizer.ggml.*): SentencePiece ("llama") and byte-level BPE ("gpt2") with the
// pre-tokenizer of the model ("default"/gpt2, "llama-bpe", "qwen2", "smollm", ...).
#pragma once

#include "llama.h"

#include <string>
#include <vector>

struct gguf_context;

// The fill-in-the-middle special tokens.
enum llama_vocab_fim {
    LLAMA_VOCAB_FIM_PRE, LLAMA_VOCAB_FIM_SUF, LLAMA_VOCAB_FIM_MID,
    LLAMA_VOCAB_FIM_PAD, LLAMA_VOCAB_FIM_REP, LLAMA_VOCAB_FIM_SEP,
    LLAMA_VOCAB_FIM_COUNT,
};

struct llama_vocab {
    // Reads the vocabulary from the file's metadata; false with a message in err on failure
    // (missing or inconsistent arrays, unknown tokenizer model or pre-tokenizer).
    bool load(const gguf_context * meta, std::string & err);

    enum llama_vocab_type type() const;
    int32_t n_tokens() const;
    const std::string & text(llama_token id) const;
    float score(llama_token id) const;

    llama_token bos() const;
    llama_token eos() const;
    llama_token eot() const;
    bool add_bos() const;
    bool add_eos() const;
    bool is_eog(llama_token id) const;
    bool is_control(llama_token id) const;

    std::vector<llama_token> tokenize(const std::string & text, bool add_special, bool parse_special) const;
    // The bytes of one token (special tokens rendered only when `special`).
    std::string token_to_piece(llama_token id, bool special) const;
    std::string detokenize(const std::vector<llama_token> & tokens, bool remove_special, bool unparse_special) const;

    // Additions (token types as in tokenizer.ggml.token_type: 1 normal, 2 unknown, 3 control,
    // 4 user-defined, 5 unused, 6 byte; 0 for an invalid id).
    llama_token unk() const;
    llama_token pad() const;
    llama_token sep() const;
    llama_token nl() const;  // the token of "\n" (SentencePiece: <0x0A>)
    llama_token fim(llama_vocab_fim which) const;
    int32_t token_type(llama_token id) const;

    llama_vocab() = default;
    llama_vocab(llama_vocab && other) noexcept;
    llama_vocab & operator=(llama_vocab && other) noexcept;
    llama_vocab(const llama_vocab &) = delete;  // owns pimpl
    llama_vocab & operator=(const llama_vocab &) = delete;
    ~llama_vocab();
    struct impl;
    impl * pimpl = nullptr;  // the tokenizer's data, defined in llama-vocab.cpp
};
