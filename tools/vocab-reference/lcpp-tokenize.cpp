// lcpp-tokenize: llama.cpp's token ids for the texts of a vocabulary test file, in the format of
// llama.cpp's own models/ggml-vocab-*.gguf.out (one line per text, each id after a space).
//
//   lcpp-tokenize VOCAB.gguf TEXTS.inp OUT.out
//
// TEXTS.inp: texts separated by "\n__ggml_vocab_test__\n", as in llama.cpp's models/ folder. Each
// text is tokenized as llama.cpp's tests/test-tokenizer-0 does: no BOS or EOS added, special
// tokens not parsed (control tokens stay text; user-defined tokens still match, as llama.cpp
// does). An offline reference tool (tests and CI never build or run it), compiled against a
// llama.cpp build (4747) by build-lcpp-tokenize.sh; only llama.cpp's public C API is used.

#include "llama.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

static void quiet_log(enum ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char ** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s VOCAB.gguf TEXTS.inp OUT.out\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet_log, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);

    std::ifstream in(argv[2], std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string inp = ss.str(), sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> texts;
    size_t pos = 0;
    for (size_t next; (next = inp.find(sep, pos)) != std::string::npos; pos = next + sep.size()) {
        texts.push_back(inp.substr(pos, next - pos));
    }
    if (pos < inp.size()) texts.push_back(inp.substr(pos));

    std::string out;
    for (const std::string & t : texts) {
        std::vector<llama_token> ids(t.size() + 8);
        const int n = llama_tokenize(vocab, t.data(), (int32_t) t.size(), ids.data(), (int32_t) ids.size(), false, false);
        if (n < 0) {
            fprintf(stderr, "tokenizing failed (%d) for: %s\n", n, t.c_str());
            return 1;
        }
        for (int i = 0; i < n; i++) out += " " + std::to_string(ids[(size_t) i]);
        out += "\n";
    }
    std::ofstream o(argv[3], std::ios::binary);
    o << out;
    llama_model_free(model);
    printf("%zu texts -> %s\n", texts.size(), argv[3]);
    return o ? 0 : 1;
}
