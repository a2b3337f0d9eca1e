// gen.cpp - writes reference.txt: llama.cpp's grammar sampler (build 4747) on the grammars of this
// folder (lcpp-*.gbnf: llama.cpp's grammars/; edge-*.gbnf: our own edge cases) with the vocabulary
// of stories260K.gguf. Not part of the build; run by hand against a llama.cpp build:
//
//   g++ -std=c++17 -O1 gen.cpp -I/tmp/lcpp/include -I/tmp/lcpp/ggml/include -I/tmp/lcpp/src \
//       -L/tmp/lcpp/build/bin -lllama -lggml -lggml-base -Wl,-rpath,/tmp/lcpp/build/bin -o /tmp/grammar-gen
//   /tmp/grammar-gen /work/shared/models/stories260K.gguf . > reference.txt
//
// For each grammar and test string it records (1) whether llama.cpp accepts the string as complete
// (llama_grammar_accept_str, then an empty stack), and (2) the string as tokens (longest token text
// first, so non-ASCII characters come as byte tokens, split UTF-8 sequences included), and the
// sampler's allowed-token bitmap at the start and after each accepted token (up to 8 steps, and
// the last), the candidates all at logit 0 (end-of-generation tokens included).
//
// reference.txt lines:
//   grammar FILE
//   string HEX complete 0|1 tokens ID,ID,...
//   step K ALLOWED_COUNT HEX_BITMAP      (bit t of the bitmap: token t allowed; byte t/8, low bit first)
#include "llama.h"
#include "llama-grammar.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct grammar_case {
    const char * file;
    std::vector<std::string> strings;
};

const std::vector<grammar_case> CASES = {
    {"lcpp-json.gbnf",
     {"{\"a\": 1}", "{\"name\": \"x\", \"list\": [1, 2.5, -3e10, true, null]}", "{}", "{\"a\":}", "[1, 2]",
      "{\"k\": \"caf\xc3\xa9 \\u00e9\"}", "{\"a", "{ \"b\" : { \"c\" : [ ] } }\n"}},
    {"lcpp-json_arr.gbnf", {"[\n1,\n2]", "[\n{\"a\": true}]", "[1]", "[\n]", "[\n\"x\",\n"}},
    {"lcpp-arithmetic.gbnf", {"1+2=3\n", "(a + b) * c= 12\n", "1+=2\n", "x=y\nz=1\n", "12"}},
    {"lcpp-list.gbnf", {"- one\n- two\n", "- one", "* one\n", "- \xe2\x80\xa8\n", "- caf\xc3\xa9\n"}},
    {"lcpp-chess.gbnf", {"1. e4 e5\n2. Nf3 Nc6\n", "1. e4 e5\n", "1. O-O O-O-O\n2. Qxd5+ Kh8#\n", "1. e9 e5\n"}},
    {"lcpp-c.gbnf", {"int main() {\n  return 0;\n}", "int x = 1;", "void f(){}", "int 1x;"}},
    {"lcpp-english.gbnf", {"Hello, world!", "one two\tthree\nfour", "caf\xc3\xa9", " leading", "a  b"}},
    {"lcpp-japanese.gbnf",
     {"\xe3\x81\x93\xe3\x82\x93\xe3\x81\xab\xe3\x81\xa1\xe3\x81\xaf", "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xe3\x82\xab\xe3\x82\xbf",
      "abc", "\xe3\x81\x82 a"}},
    {"edge-repeat.gbnf", {"aabbbe", "aaaabbbcdeeey,12,3", "abbbe", "aaaaabbbe", "aabbbcdce", "aabbbee,"}},
    {"edge-classes.gbnf",
     {"xyz\xc3\xa9\xf0\x9f\x98\x80]\t\xe2\x82\xac-a-", "A\xc3\xa9\xf0\x9f\x98\x80[\tq-aa", "q\xc3\xa9\xf0\x9f\x98\x80\\\t\n--a",
      "q\xc3\xa9\xf0\x9f\x98\x80\"\tzz-a"}},
    {"edge-layout.gbnf", {"hello Bob.", "Alice", "hey\n\tJoHn", "hi bob", "  X."}},
    {"edge-unicode.gbnf",
     {"\xe3\x81\x82\xe3\x81\x84", "\xe6\x97\xa5\xe6\x9c\xac!", "\xe6\x97\xa5\xe6\x9c\xac" "a", "\xc3\xa9xxx", "\xc4\x80!", "\xc3\xa9y"}},
    {"edge-special.gbnf", {"<s>once upon a time.", "hello</s>", "hello", "<s>x"}},
    {"edge-anychar.gbnf", {"<abc>", "<>", "<\xe2\x82\xac>", "[a[b]", "[]]", "<a>>"}},
};

std::string hex(const std::string & s) {
    static const char * d = "0123456789abcdef";
    std::string out;
    for (unsigned char c : s) {
        out += d[c >> 4];
        out += d[c & 15];
    }
    return out;
}

std::vector<llama_token> longest_first(const std::vector<std::string> & pieces, const std::vector<bool> & usable, const std::string & s) {
    std::vector<llama_token> out;
    size_t at = 0;
    while (at < s.size()) {
        llama_token best = -1;
        size_t best_len = 0;
        for (size_t t = 0; t < pieces.size(); t++) {
            const std::string & p = pieces[t];
            if (!usable[t] || p.size() <= best_len || s.compare(at, p.size(), p) != 0) continue;
            best = (llama_token) t;
            best_len = p.size();
        }
        if (best < 0) {
            fprintf(stderr, "no token for byte %zu of '%s'\n", at, s.c_str());
            exit(1);
        }
        out.push_back(best);
        at += best_len;
    }
    return out;
}

}  // namespace

int main(int argc, char ** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s stories260K.gguf grammar-dir > reference.txt\n", argv[0]);
        return 1;
    }
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) return 1;
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    std::vector<std::string> pieces(n_vocab);
    std::vector<bool> usable(n_vocab);
    for (llama_token t = 0; t < n_vocab; t++) {
        char buf[256];
        const int32_t n = llama_token_to_piece(vocab, t, buf, sizeof(buf), 0, true);
        pieces[t].assign(buf, n > 0 ? n : 0);
        // Tokens by text: not the control tokens (the strings spell "<s>" with ordinary tokens).
        usable[t] = n > 0 && !(llama_vocab_get_attr(vocab, t) & LLAMA_TOKEN_ATTR_CONTROL);
    }

    for (const grammar_case & gc : CASES) {
        std::ifstream in(std::string(argv[2]) + "/" + gc.file);
        std::stringstream ss;
        ss << in.rdbuf();
        const std::string text = ss.str();
        printf("grammar %s\n", gc.file);
        for (const std::string & s : gc.strings) {
            int complete = 0;
            llama_grammar * g = llama_grammar_init_impl(nullptr, text.c_str(), "root", false, nullptr, 0, nullptr, 0);
            if (!g) {
                fprintf(stderr, "%s does not load\n", gc.file);
                return 1;
            }
            try {
                llama_grammar_accept_str(*g, s);
                for (const auto & st : llama_grammar_get_stacks(g)) complete |= st.empty();
            } catch (const std::exception &) {
                complete = 0;
            }
            llama_grammar_free_impl(g);

            const std::vector<llama_token> toks = longest_first(pieces, usable, s);
            printf("string %s complete %d tokens ", hex(s).c_str(), complete);
            for (size_t i = 0; i < toks.size(); i++) printf("%s%d", i ? "," : "", toks[i]);
            printf("\n");

            llama_sampler * smpl = llama_sampler_init_grammar(vocab, text.c_str(), "root");
            std::vector<llama_token_data> data(n_vocab);
            for (size_t k = 0; k <= toks.size(); k++) {
                for (llama_token t = 0; t < n_vocab; t++) data[t] = {t, 0.0f, 0.0f};
                llama_token_data_array arr = {data.data(), data.size(), -1, false};
                llama_sampler_apply(smpl, &arr);
                std::vector<unsigned char> bits((n_vocab + 7) / 8, 0);
                int count = 0;
                for (size_t i = 0; i < arr.size; i++) {
                    if (arr.data[i].logit != -INFINITY) {
                        bits[arr.data[i].id / 8] |= 1u << (arr.data[i].id % 8);
                        count++;
                    }
                }
                if (k < 8 || k == toks.size()) {
                    printf("step %zu %d %s\n", k, count, hex(std::string(bits.begin(), bits.end())).c_str());
                }
                if (k == toks.size()) break;
                const llama_token t = toks[k];
                if (!(bits[t / 8] >> (t % 8) & 1)) break;  // llama.cpp would throw on accepting it
                llama_sampler_accept(smpl, t);
            }
            llama_sampler_free(smpl);
        }
    }
    llama_model_free(model);
    return 0;
}
