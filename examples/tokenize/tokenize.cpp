// llama-tokenize: prints the tokens of a text: one line per token (id and piece), then, with
// --ids, the ids as a list on the last line.
//
//   llama-tokenize -m MODEL (-p TEXT | -f FILE) [--ids] [--no-bos] [--no-parse-special]
#include "llama.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

static void usage(FILE * out) {
    fprintf(out, "usage: llama-tokenize -m MODEL (-p TEXT | -f FILE) [--ids] [--no-bos] [--no-parse-special]\n");
}

int main(int argc, char ** argv) {
    std::string model_path, text;
    bool has_text = false, ids_only = false, add_bos = true, parse_special = true;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        auto value = [&]() -> const char * {
            if (i + 1 >= argc) {
                fprintf(stderr, "llama-tokenize: missing value for %s\n", a.c_str());
                exit(1);
            }
            return argv[++i];
        };
        if (a == "-h" || a == "--help") { usage(stdout); return 0; }
        else if (a == "-m" || a == "--model") model_path = value();
        else if (a == "-p" || a == "--prompt") { text = value(); has_text = true; }
        else if (a == "-f" || a == "--file") {
            const char * path = value();
            std::ifstream in(path, std::ios::binary);
            if (!in) { fprintf(stderr, "llama-tokenize: cannot read '%s'\n", path); return 1; }
            std::stringstream ss;
            ss << in.rdbuf();
            text = ss.str();
            has_text = true;
        }
        else if (a == "--ids") ids_only = true;
        else if (a == "--no-bos") add_bos = false;
        else if (a == "--no-parse-special") parse_special = false;
        else { fprintf(stderr, "llama-tokenize: unknown option '%s'\n", a.c_str()); usage(stderr); return 1; }
    }
    if (model_path.empty() || !has_text) { usage(stderr); return 1; }

    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model * model = llama_model_load_from_file(model_path.c_str(), mp);
    if (!model) { fprintf(stderr, "llama-tokenize: cannot load '%s'\n", model_path.c_str()); return 1; }
    const llama_vocab * vocab = llama_model_get_vocab(model);

    int32_t n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), nullptr, 0, add_bos, parse_special);
    std::vector<llama_token> toks((size_t) (n < 0 ? -n : n));
    n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), toks.data(), (int32_t) toks.size(), add_bos, parse_special);
    if (n < 0) { fprintf(stderr, "llama-tokenize: tokenization failed\n"); llama_model_free(model); return 1; }
    toks.resize((size_t) n);
    if (!ids_only) {
        for (llama_token t : toks) {
            char buf[256];
            const int32_t len = llama_token_to_piece(vocab, t, buf, sizeof(buf), 0, true);
            printf("%6d -> '%.*s'\n", t, len > 0 ? len : 0, buf);
        }
    }
    printf("[");
    for (size_t i = 0; i < toks.size(); i++) printf("%s%d", i ? ", " : "", toks[i]);
    printf("]\n");
    llama_model_free(model);
    return 0;
}
