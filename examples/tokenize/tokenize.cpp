// llama-tokenize: the tokens of a text, as llama.cpp's llama-tokenize prints them: one line per
// token (`    id -> 'piece'`), or with --ids the ids only, as a list ([1, 2, 3]); --show-count
// adds the total. Escapes (\n, \t, ...) in the text are processed unless --no-escape.
//
//   llama-tokenize -m MODEL (-p TEXT | -f FILE | --stdin) [--ids] [--no-bos] [--no-escape]
//                  [--no-parse-special] [--show-count] [--log-disable]
#include "arg.h"
#include "common.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace {

void quiet_log(enum ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

}  // namespace

int main(int argc, char ** argv) {
    common_params params;
    if (!common_params_parse(argc, argv, params, LLAMA_EXAMPLE_TOKENIZE)) return 1;
    const char * why = params.model.empty()        ? "no model given (-m MODEL)"
                       : params.prompt_sources == 0 ? "no text given (-p TEXT, -f FILE or --stdin)"
                       : params.prompt_sources > 1  ? "--stdin, --file and --prompt are mutually exclusive"
                                                    : nullptr;
    if (why) {
        fprintf(stderr, "llama-tokenize: %s\n(see llama-tokenize --help)\n", why);
        return 1;
    }
    std::string text = params.prompt;
    if (!params.prompt_file.empty()) {
        std::ifstream in(params.prompt_file, std::ios::binary);
        if (!in) {
            fprintf(stderr, "llama-tokenize: cannot read '%s'\n", params.prompt_file.c_str());
            return 1;
        }
        std::stringstream ss;
        ss << in.rdbuf();
        text = ss.str();
    } else if (params.read_stdin) {
        text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
        if (std::cin.bad()) {
            fprintf(stderr, "llama-tokenize: cannot read the standard input\n");
            return 1;
        }
    }
    if (params.escape) string_process_escapes(text);
    if (params.verbosity == 0) llama_log_set(quiet_log, nullptr);

    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model * model = llama_model_load_from_file(params.model.c_str(), mp);
    if (!model) {
        fprintf(stderr, "llama-tokenize: cannot load '%s'\n", params.model.c_str());
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const bool add_bos = params.add_bos && llama_vocab_get_add_bos(vocab);
    int32_t n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), nullptr, 0, add_bos, params.parse_special);
    std::vector<llama_token> toks((size_t) (n < 0 ? -n : n));
    n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), toks.data(), (int32_t) toks.size(), add_bos, params.parse_special);
    if (n < 0) {
        fprintf(stderr, "llama-tokenize: tokenization failed\n");
        llama_model_free(model);
        return 1;
    }
    toks.resize((size_t) n);
    if (params.ids_only) {
        printf("[");
        for (size_t i = 0; i < toks.size(); i++) printf("%s%d", i ? ", " : "", toks[i]);
        printf("]\n");
    } else {
        std::vector<char> buf(256);
        for (llama_token t : toks) {
            int32_t len = llama_token_to_piece(vocab, t, buf.data(), (int32_t) buf.size(), 0, true);
            if (len < 0) {
                buf.resize((size_t) -len);
                len = llama_token_to_piece(vocab, t, buf.data(), (int32_t) buf.size(), 0, true);
            }
            printf("%6d -> '%.*s'\n", t, len > 0 ? len : 0, buf.data());
        }
    }
    if (params.show_count) printf("Total number of tokens: %zu\n", toks.size());
    llama_model_free(model);
    return 0;
}
