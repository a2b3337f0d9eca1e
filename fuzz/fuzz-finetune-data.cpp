// fuzz-finetune-data: llama-finetune's training data reader, ft_parse_data
// (examples/finetune/finetune-data.h): documents tokenized, with the targets that count for the
// loss, cut into sequences. Byte 0: bit 0 the format (0 plain text, 1 JSONL of {"messages": [...]}
// or {"prompt", "completion"}), bits 1-2 the vocabulary (tiny llama SentencePiece with a ChatML
// template, tiny qwen2 BPE, the tiny llama without a template (the ChatML fallback), a gpt2 BPE
// vocabulary; all vocab_only). Byte 1: n_ctx = 2 + byte % 63 (2..64). The rest is the data.
// Malformed data must be refused with a message; what is accepted is sequences of 2..n_ctx valid
// tokens, each with a 0/1 count per token, counts[0] 0 and at least one counted target.
#include "fuzz-common.h"

#include "finetune-data.h"

#include "gguf.h"

namespace {

llama_model * load_vocab(const std::string & path) {
    llama_model_params p = llama_model_default_params();
    p.vocab_only = true;
    llama_model * m = llama_model_load_from_file(path.c_str(), p);
    if (!m) {
        fprintf(stderr, "fuzz-finetune-data: cannot load %s\n", path.c_str());
        abort();
    }
    return m;
}

// The tiny llama's metadata without tokenizer.chat_template (no tensors: vocab_only reads none).
std::string without_template(const std::string & from, const fuzz::temp_dir & dir) {
    gguf_context * src = gguf_init_from_file(from.c_str(), { true, nullptr, false });
    FUZZ_CHECK(src != nullptr);
    gguf_context * g = gguf_init_empty();
    gguf_set_kv(g, src);
    gguf_remove_key(g, "tokenizer.chat_template");
    const std::string path = dir.path + "/no-template.gguf";
    FUZZ_CHECK(gguf_write_to_file(g, path.c_str(), false));
    gguf_free(g);
    gguf_free(src);
    return path;
}

struct vocabs {
    llama_model * models[4];
    vocabs() {
        const std::string dir = std::string(FUZZ_SOURCE_DIR) + "/corpus/fuzz-model/";
        fuzz::temp_dir tmp("finetune-data");
        models[0] = load_vocab(dir + "tiny-llama-spm.gguf");
        models[1] = load_vocab(dir + "tiny-qwen2-bpe.gguf");
        models[2] = load_vocab(without_template(dir + "tiny-llama-spm.gguf", tmp));
        models[3] = load_vocab(dir + "tiny-vocab-only.gguf");
        FUZZ_CHECK(llama_model_chat_template(models[2], nullptr) == nullptr);
    }
    ~vocabs() {
        for (llama_model * m : models) llama_model_free(m);
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    fuzz::quiet();
    static const vocabs v;
    fuzz::reader in{ data, size };
    const uint8_t b0 = in.u8();
    const ft_data_format format = (b0 & 1) ? FT_DATA_JSONL : FT_DATA_TEXT;
    const llama_model * model = v.models[(b0 >> 1) & 3];
    const int32_t n_ctx = 2 + in.u8() % 63;
    const std::string text = in.rest();

    std::vector<ft_sequence> out;
    std::string err;
    bool chatml_fallback = true;
    if (!ft_parse_data(model, text, "fuzz-input", format, n_ctx, out, err, &chatml_fallback)) {
        fuzz::refused(err);
        return 0;
    }
    // Only chat examples for a model without a template of its own (or with one that is none of the
    // built-in formats) are formatted with ChatML.
    const char * own = llama_model_chat_template(model, nullptr);
    FUZZ_CHECK(!chatml_fallback ||
               (format == FT_DATA_JSONL && (own == nullptr || llama_chat_apply_template(own, nullptr, 0, false, nullptr, 0) < 0)));
    const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    FUZZ_CHECK(!out.empty());
    for (const ft_sequence & s : out) {
        FUZZ_CHECK(s.tokens.size() >= 2 && s.tokens.size() <= (size_t) n_ctx);
        FUZZ_CHECK(s.counts.size() == s.tokens.size());
        FUZZ_CHECK(s.counts[0] == 0);
        int64_t n = 0;
        for (size_t i = 0; i < s.tokens.size(); i++) {
            FUZZ_CHECK(s.tokens[i] >= 0 && s.tokens[i] < n_vocab);
            FUZZ_CHECK(s.counts[i] <= 1);
            n += s.counts[i];
        }
        FUZZ_CHECK(n >= 1 && n == s.n_targets());
    }
    return 0;
}
