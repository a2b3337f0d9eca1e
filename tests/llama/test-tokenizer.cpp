// test-tokenizer.cpp - the tokenizer: llama.cpp's vocabulary test cases (SentencePiece llama and
// phi-3, byte-level BPE gpt-2, WordPiece bert-bge), the prompts of the reference logits, special tokens, byte
// fallback, invalid UTF-8, empty and 1 MB inputs, invalid ids, the C API's buffer contract, the
// pre-tokenizer splitters against their regexes, and loading errors on synthetic vocabularies.
#include "gguf.h"
#include "llama-unicode.h"
#include "llama-vocab.h"
#include "test-util.h"

#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

namespace {

std::string read_text(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// A vocabulary loaded from a file's metadata only.
struct file_vocab {
    llama_vocab vocab;
    bool ok = false;
    bool space_prefix = true;  // SentencePiece's leading space (Gemma's files turn it off)
    std::string err;
    explicit file_vocab(const std::string & path) {
        gguf_init_params params = {};
        params.no_alloc = true;
        params.ctx = nullptr;
        gguf_context * meta = gguf_init_from_file(path.c_str(), params);
        if (!meta) { err = "cannot read " + path; return; }
        ok = vocab.load(meta, err);
        const int64_t k = gguf_find_key(meta, "tokenizer.ggml.add_space_prefix");
        if (k >= 0) space_prefix = gguf_get_val_bool(meta, k);
        gguf_free(meta);
    }
};

// llama.cpp's vocabulary test files: in the shared models folder, or committed (tests/data/vocab:
// bert-bge, from llama.cpp's models/ at build 4747).
std::string vocab_path(const std::string & name) {
    const std::string committed = std::string(LLAMA_TEST_DATA_DIR) + "/vocab/ggml-vocab-" + name + ".gguf";
    return tu::file_exists(committed) ? committed : tu::models_dir() + "/vocab/ggml-vocab-" + name + ".gguf";
}

// llama.cpp's test files: texts separated by "\n__ggml_vocab_test__\n", one line of ids each.
struct vocab_case {
    std::string text;
    std::vector<llama_token> ids;
};

std::vector<vocab_case> read_cases(const std::string & path, std::string & err) {
    const std::string sep = "\n__ggml_vocab_test__\n";
    const std::string inp = read_text(path + ".inp");
    std::vector<std::string> texts;
    size_t pos = 0;
    for (size_t next; (next = inp.find(sep, pos)) != std::string::npos; pos = next + sep.size()) {
        texts.push_back(inp.substr(pos, next - pos));
    }
    if (pos < inp.size()) texts.push_back(inp.substr(pos));
    std::vector<vocab_case> cases;
    std::istringstream out(read_text(path + ".out"));
    std::string line;
    for (const std::string & t : texts) {
        if (!std::getline(out, line)) { err = "fewer id lines than texts"; return {}; }
        vocab_case c{ t, {} };
        std::istringstream ids(line);
        for (long id; ids >> id;) c.ids.push_back((llama_token) id);
        cases.push_back(c);
    }
    if (cases.empty()) err = "no cases";
    return cases;
}

std::string show(const std::vector<llama_token> & ids) {
    std::string s;
    for (llama_token t : ids) s += " " + std::to_string(t);
    return s;
}

std::vector<llama_token> concat(std::initializer_list<std::vector<llama_token>> parts) {
    std::vector<llama_token> out;
    for (const auto & p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
}

// ---- synthetic vocabularies ----------------------------------------------------------------
struct synth {
    gguf_context * meta = gguf_init_empty();
    ~synth() { gguf_free(meta); }

    void tokens(const std::vector<std::string> & texts) {
        std::vector<const char *> p;
        for (const auto & t : texts) p.push_back(t.c_str());
        gguf_set_arr_str(meta, "tokenizer.ggml.tokens", p.data(), p.size());
    }
    void merges(const std::vector<std::string> & m) {
        std::vector<const char *> p;
        for (const auto & t : m) p.push_back(t.c_str());
        gguf_set_arr_str(meta, "tokenizer.ggml.merges", p.data(), p.size());
    }
    void scores(const std::vector<float> & s) { gguf_set_arr_data(meta, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, s.data(), s.size()); }
    void types(const std::vector<int32_t> & t) { gguf_set_arr_data(meta, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, t.data(), t.size()); }

    bool load(llama_vocab & v, std::string & err) const { return v.load(meta, err); }
};

// A byte-level BPE vocabulary: the 256 byte characters, then the given merges' results, then
// the given special tokens (control).
void make_bpe(synth & s, const char * pre, const std::vector<std::string> & merges, const std::vector<std::string> & specials) {
    std::vector<std::string> texts;
    for (int b = 0; b < 256; b++) {
        std::string ch;
        llama_utf8_append(ch, llama_byte_to_unicode((uint8_t) b));
        texts.push_back(ch);
    }
    for (const std::string & m : merges) {
        const size_t sp = m.find(' ');
        texts.push_back(m.substr(0, sp) + m.substr(sp + 1));
    }
    std::vector<int32_t> types(texts.size(), 1);
    for (const std::string & t : specials) { texts.push_back(t); types.push_back(3); }
    gguf_set_val_str(s.meta, "tokenizer.ggml.model", "gpt2");
    if (pre) gguf_set_val_str(s.meta, "tokenizer.ggml.pre", pre);
    s.tokens(texts);
    s.types(types);
    s.merges(merges);
}

// ---- llama.cpp's vocabulary test cases -----------------------------------------------------
class VocabFile : public testing::TestWithParam<const char *> {};

TEST_P(VocabFile, MatchesReferenceIdsAndRoundTrips) {
    const std::string path = vocab_path(GetParam());
    TU_REQUIRE_FILE(path);
    TU_REQUIRE_FILE(path + ".inp");
    file_vocab fv(path);
    ASSERT_TRUE(fv.ok) << fv.err;
    const llama_vocab & v = fv.vocab;
    std::string err;
    const std::vector<vocab_case> cases = read_cases(path, err);
    ASSERT_FALSE(cases.empty()) << err;

    const bool spm = v.type() == LLAMA_VOCAB_TYPE_SPM;
    int n_checked = 0;
    for (const vocab_case & c : cases) {
        const std::vector<llama_token> ids = v.tokenize(c.text, false, false);
        EXPECT_EQ(show(ids), show(c.ids)) << "text: \"" << c.text << "\"";

        // The C API gives the same.
        std::vector<llama_token> buf(c.text.size() + 4);
        const int32_t n = llama_tokenize(&v, c.text.data(), (int32_t) c.text.size(), buf.data(), (int32_t) buf.size(), false, false);
        ASSERT_GE(n, 0);
        buf.resize((size_t) n);
        EXPECT_EQ(buf, ids);

        // SentencePiece and BPE are lossless on these texts (WordPiece lowercases and drops
        // accents and spaces); SentencePiece adds its leading space, which detokenizing drops
        // after a BOS when removing special tokens.
        if (v.type() == LLAMA_VOCAB_TYPE_WPM) {
            n_checked++;
            continue;
        }
        if (spm) {
            std::vector<llama_token> with_bos = concat({ { v.bos() }, ids });
            // (llama.cpp's rule: the first token loses the prefix's space unless a BOS was
            // removed before it.)
            EXPECT_EQ(v.detokenize(ids, false, false), c.text);
            EXPECT_EQ(v.detokenize(with_bos, true, false), c.text.empty() || !fv.space_prefix ? c.text : " " + c.text);
        } else {
            EXPECT_EQ(v.detokenize(ids, false, false), c.text);
        }
        n_checked++;
    }
    EXPECT_GE(n_checked, 40);
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, VocabFile, testing::Values("llama-spm", "phi-3", "gpt-2", "bert-bge", "gemma-spm", "qwen-bpe"),
                         [](const testing::TestParamInfo<const char *> & info) {
                             std::string name = info.param;
                             for (char & ch : name) if (!isalnum((unsigned char) ch)) ch = '_';
                             return name;
                         });

TEST(Tokenizer, VocabFileProperties) {
    const std::string spm = vocab_path("llama-spm"), phi3 = vocab_path("phi-3"), gpt2 = vocab_path("gpt-2");
    TU_REQUIRE_FILE(spm);
    TU_REQUIRE_FILE(phi3);
    TU_REQUIRE_FILE(gpt2);
    file_vocab a(spm), b(phi3), c(gpt2);
    ASSERT_TRUE(a.ok && b.ok && c.ok) << a.err << b.err << c.err;

    EXPECT_EQ(a.vocab.type(), LLAMA_VOCAB_TYPE_SPM);
    EXPECT_EQ(a.vocab.n_tokens(), 32000);
    EXPECT_EQ(a.vocab.bos(), 1);
    EXPECT_EQ(a.vocab.eos(), 2);
    EXPECT_EQ(a.vocab.eot(), LLAMA_TOKEN_NULL);
    EXPECT_TRUE(a.vocab.add_bos());
    EXPECT_FALSE(a.vocab.add_eos());
    EXPECT_TRUE(a.vocab.is_eog(2));
    EXPECT_FALSE(a.vocab.is_eog(1));
    EXPECT_TRUE(a.vocab.is_control(1));
    EXPECT_FALSE(a.vocab.is_control(100));
    EXPECT_EQ(a.vocab.text(29871), "\xe2\x96\x81");
    EXPECT_EQ(a.vocab.token_to_piece(29871, false), " ");
    EXPECT_EQ(a.vocab.token_to_piece(13, false), "\n");  // <0x0A>
    EXPECT_EQ(a.vocab.token_to_piece(1, false), "");
    EXPECT_EQ(a.vocab.token_to_piece(1, true), "<s>");
    EXPECT_EQ(a.vocab.token_to_piece(0, false), " \xe2\x81\x87 ");  // <unk>
    EXPECT_EQ(a.vocab.tokenize("Hello", true, false), (std::vector<llama_token>{ 1, 15043 }));

    // phi-3: EOS is <|endoftext|>, EOT found by its text, both end generation.
    EXPECT_EQ(b.vocab.eos(), 32000);
    EXPECT_EQ(b.vocab.eot(), 32007);
    EXPECT_TRUE(b.vocab.is_eog(32000));
    EXPECT_TRUE(b.vocab.is_eog(32007));
    EXPECT_FALSE(b.vocab.is_eog(32010));

    EXPECT_EQ(c.vocab.type(), LLAMA_VOCAB_TYPE_BPE);
    EXPECT_EQ(c.vocab.n_tokens(), 50257);
    EXPECT_EQ(c.vocab.bos(), 50256);
    EXPECT_FALSE(c.vocab.add_bos());
    EXPECT_TRUE(c.vocab.is_eog(50256));
    EXPECT_TRUE(c.vocab.is_control(50256));
    EXPECT_EQ(c.vocab.token_to_piece(220, false), " ");  // "Ġ"
    EXPECT_EQ(c.vocab.token_to_piece(50256, false), "");
    EXPECT_EQ(c.vocab.token_to_piece(50256, true), "<|endoftext|>");
}

// Gemma's settings: no leading space; <end_of_turn>, user-defined in the file, found by its text
// as the end of a turn and made a control token (as llama.cpp does: not matched in plain text, not
// printed unless special tokens are); <start_of_turn> stays user-defined (matched, printed).
TEST(Tokenizer, GemmaVocabularyTurnTokens) {
    const std::string path = vocab_path("gemma-spm");
    TU_REQUIRE_FILE(path);
    file_vocab g(path);
    ASSERT_TRUE(g.ok) << g.err;
    const llama_vocab & v = g.vocab;
    EXPECT_FALSE(g.space_prefix);
    EXPECT_EQ(v.text(5), "<start_of_turn>");
    EXPECT_EQ(v.text(6), "<end_of_turn>");
    EXPECT_EQ(v.eot(), 6);
    EXPECT_TRUE(v.is_eog(6));
    EXPECT_TRUE(v.is_eog(1));  // <eos>
    EXPECT_FALSE(v.is_eog(5));
    EXPECT_TRUE(v.is_control(6));
    EXPECT_FALSE(v.is_control(5));
    EXPECT_EQ(v.token_to_piece(6, false), "");
    EXPECT_EQ(v.token_to_piece(6, true), "<end_of_turn>");
    EXPECT_EQ(v.token_to_piece(5, false), "<start_of_turn>");
    EXPECT_EQ(v.tokenize("<end_of_turn>", false, true), (std::vector<llama_token>{ 6 }));
    EXPECT_EQ(v.tokenize("Hi", true, false).front(), v.bos());
}

// ---- the prompts of the reference logits ---------------------------------------------------
TEST(Tokenizer, ReferencePromptTokens) {
    const char * models[][2] = {
        { "stories260K.gguf", "stories260K" },
        { "TinyStories-656K-Q8_0.gguf", "TinyStories-656K-Q8_0" },
        { "ktest/ktest-F32.gguf", "ktest-F32" },
    };
    int n_checked = 0;
    for (const auto & m : models) {
        const std::string model = tu::models_dir() + "/" + m[0];
        const std::string logits = tu::shared_dir() + "/reference/logits/" + m[1] + ".p1.logits";
        if (!tu::file_exists(model) || !tu::file_exists(logits)) continue;
        const std::string data = read_text(logits);
        ASSERT_GE(data.size(), 8u);
        int32_t n_tokens, n_vocab;
        memcpy(&n_tokens, data.data(), 4);
        memcpy(&n_vocab, data.data() + 4, 4);
        ASSERT_GE(data.size(), 8 + 4 * (size_t) n_tokens);
        std::vector<llama_token> expected((size_t) n_tokens);
        memcpy(expected.data(), data.data() + 8, 4 * (size_t) n_tokens);

        file_vocab fv(model);
        ASSERT_TRUE(fv.ok) << m[0] << ": " << fv.err;
        EXPECT_EQ(fv.vocab.n_tokens(), n_vocab) << m[0];
        const std::vector<llama_token> ids = fv.vocab.tokenize("Once upon a time", true, false);
        EXPECT_EQ(show(ids), show(expected)) << m[0];
        // (llama.cpp's rule: the prefix's space goes when no BOS was removed before the text.)
        EXPECT_EQ(fv.vocab.detokenize(std::vector<llama_token>(ids.begin() + 1, ids.end()), true, false), "Once upon a time") << m[0];
        EXPECT_EQ(fv.vocab.detokenize(ids, true, false), " Once upon a time") << m[0];
        printf("  %s:%s\n", m[0], show(ids).c_str());
        n_checked++;
    }
    if (n_checked == 0) GTEST_SKIP() << "no model with reference logits found under " << tu::models_dir();
}

// ---- special tokens ------------------------------------------------------------------------
TEST(Tokenizer, SpecialTokensSentencePiece) {
    const std::string path = vocab_path("phi-3");
    TU_REQUIRE_FILE(path);
    file_vocab fv(path);
    ASSERT_TRUE(fv.ok) << fv.err;
    const llama_vocab & v = fv.vocab;

    const std::string text = "<|user|>\nHello<|end|>";
    // Text after a special token gets SentencePiece's space prefix, as at the start.
    EXPECT_EQ(show(v.tokenize(text, false, true)), show(concat({ { 32010 }, v.tokenize("\nHello", false, false), { 32007 } })));
    EXPECT_EQ(show(v.tokenize(text, true, true)), show(concat({ { 1, 32010 }, v.tokenize("\nHello", false, false), { 32007 } })));

    // Without parse_special the markers are text.
    const std::vector<llama_token> plain = v.tokenize(text, false, false);
    for (llama_token t : plain) EXPECT_FALSE(v.is_control(t)) << t;
    EXPECT_EQ(v.detokenize(plain, false, false), text);

    // Control tokens render only when asked.
    const std::vector<llama_token> parsed = v.tokenize(text, false, true);
    EXPECT_EQ(v.detokenize(parsed, false, true), "<|user|> \nHello<|end|>");
    EXPECT_EQ(v.detokenize(parsed, false, false), " \nHello");

    // A user-defined token (</s> in this vocabulary) is always split out, like an added token.
    const std::vector<llama_token> ud = v.tokenize("a</s>b", false, false);
    EXPECT_EQ(show(ud), show(concat({ v.tokenize("a", false, false), { 2 }, v.tokenize("b", false, false) })));
    EXPECT_EQ(v.detokenize(ud, false, false), "a</s> b");

    // Unknown-type tokens are special too ([PAD32011] here).
    EXPECT_EQ(show(v.tokenize("[PAD32011]", false, true)), " 32011");
}

TEST(Tokenizer, SpecialTokensBpe) {
    const std::string path = vocab_path("gpt-2");
    TU_REQUIRE_FILE(path);
    file_vocab fv(path);
    ASSERT_TRUE(fv.ok) << fv.err;
    const llama_vocab & v = fv.vocab;

    const std::string text = "Hi<|endoftext|> there<|endoftext|>";
    EXPECT_EQ(show(v.tokenize(text, false, true)),
              show(concat({ v.tokenize("Hi", false, false), { 50256 }, v.tokenize(" there", false, false), { 50256 } })));
    const std::vector<llama_token> plain = v.tokenize(text, false, false);
    EXPECT_EQ(std::count(plain.begin(), plain.end(), 50256), 0);
    EXPECT_EQ(v.detokenize(plain, false, false), text);
    EXPECT_EQ(v.detokenize(v.tokenize(text, false, true), false, true), text);
    EXPECT_EQ(v.detokenize(v.tokenize(text, false, true), false, false), "Hi there");
    // remove_special drops a leading BOS and a trailing EOS only where the vocabulary adds them
    // (as llama.cpp): GPT-2 adds neither.
    EXPECT_EQ(v.detokenize(v.tokenize(text, false, true), true, true), text);
}

TEST(Tokenizer, SpecialTokensLongestMatch) {
    synth s;
    gguf_set_val_str(s.meta, "tokenizer.ggml.model", "llama");
    gguf_set_val_bool(s.meta, "tokenizer.ggml.add_space_prefix", false);
    s.tokens({ "<unk>", "<s>", "</s>", "<a>", "<a><b>", "x", "y", "<", ">", "a", "b" });
    s.types({ 2, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1 });
    llama_vocab v;
    std::string err;
    ASSERT_TRUE(s.load(v, err)) << err;
    EXPECT_EQ(show(v.tokenize("x<a><b>y<a>", false, true)), " 5 4 6 3");
    EXPECT_EQ(show(v.tokenize("<a><a><b", false, true)), " 3 3 7 10");
    EXPECT_EQ(show(v.tokenize("<a>", false, false)), " 7 9 8");
    EXPECT_EQ(show(v.tokenize("<unk><s>", false, true)), " 0 1");
    // add_space_prefix = false: no space anywhere
    EXPECT_EQ(v.detokenize(v.tokenize("x<a>y", true, true), true, true), "x<a>y");
}

// ---- byte fallback, invalid UTF-8, empty input ---------------------------------------------
TEST(Tokenizer, ByteFallbackAndInvalidUtf8) {
    const std::string spm_path = vocab_path("llama-spm"), bpe_path = vocab_path("gpt-2");
    TU_REQUIRE_FILE(spm_path);
    TU_REQUIRE_FILE(bpe_path);
    file_vocab spm(spm_path), bpe(bpe_path);
    ASSERT_TRUE(spm.ok && bpe.ok) << spm.err << bpe.err;

    // The llama emoji is not in the SentencePiece vocabulary: its four bytes, as <0xXX> tokens.
    EXPECT_EQ(show(spm.vocab.tokenize("\xf0\x9f\xa6\x99", false, false)), " 29871 243 162 169 156");

    const std::string bad[] = {
        "\xff", "a\xc3", "\xc3(", "\xed\xa0\x80 surrogate", "\xc0\xaf overlong", "\xf4\x90\x80\x80 too big",
        "\xe2\x82 truncated", "ok \xf0\x9f\xa6", std::string("nul\0byte", 8), "\x80\x80\x80",
    };
    for (const std::string & t : bad) {
        const std::vector<llama_token> a = spm.vocab.tokenize(t, false, false);
        for (llama_token id : a) EXPECT_TRUE(id >= 0 && id < spm.vocab.n_tokens());
        EXPECT_EQ(spm.vocab.detokenize(a, false, false), t);
        const std::vector<llama_token> b = bpe.vocab.tokenize(t, false, false);
        EXPECT_EQ(bpe.vocab.detokenize(b, false, false), t);
    }
    // Invalid bytes each become a byte token.
    EXPECT_EQ(show(spm.vocab.tokenize("\xff\xfe", false, false)), " 29871 258 257");
}

TEST(Tokenizer, EmptyInput) {
    const std::string spm_path = vocab_path("llama-spm"), bpe_path = vocab_path("gpt-2");
    TU_REQUIRE_FILE(spm_path);
    TU_REQUIRE_FILE(bpe_path);
    file_vocab spm(spm_path), bpe(bpe_path);
    ASSERT_TRUE(spm.ok && bpe.ok);
    EXPECT_TRUE(spm.vocab.tokenize("", false, false).empty());
    EXPECT_TRUE(spm.vocab.tokenize("", false, true).empty());
    EXPECT_EQ(spm.vocab.tokenize("", true, true), std::vector<llama_token>{ 1 });
    EXPECT_TRUE(bpe.vocab.tokenize("", true, true).empty());  // gpt-2 adds no BOS
    EXPECT_EQ(spm.vocab.detokenize({}, true, true), "");
    EXPECT_EQ(spm.vocab.detokenize({ 1 }, true, false), "");
    EXPECT_EQ(llama_tokenize(&spm.vocab, nullptr, 0, nullptr, 0, false, false), 0);
    llama_token t[2];
    EXPECT_EQ(llama_tokenize(&spm.vocab, "", 0, t, 2, true, false), 1);
    EXPECT_EQ(t[0], 1);
    EXPECT_EQ(llama_detokenize(&spm.vocab, nullptr, 0, nullptr, 0, true, false), 0);
}

// ---- long input ----------------------------------------------------------------------------
std::string mixed_text(size_t bytes) {
    const std::string chunk =
        "Once upon a time, in a land far away, there lived 1234 cats and 56 dogs. "
        "They said: \"We'll see!\"\n\n\tIndented\r\n"
        "Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich. "
        "Съешь же ещё этих мягких французских булок. 我能吞下玻璃而不伤身体。 "
        "\xf0\x9f\x98\x80\xf0\x9f\x9a\x80 ½ Ⅻ   spaces    and\ttabs\n";
    std::string s;
    while (s.size() + chunk.size() <= bytes) s += chunk;
    return s;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Timing is asserted only on a native, optimized, unsanitized x86-64 build; elsewhere (qemu,
// sanitizers, debug) it is reported.
#if defined(__x86_64__) && defined(NDEBUG) && !defined(LLAMA_TEST_UNDER_ASAN)
constexpr bool k_assert_speed = true;
#else
constexpr bool k_assert_speed = false;
#endif

TEST(Tokenizer, LongInputIsFastAndLossless) {
    const std::string spm_path = vocab_path("llama-spm"), bpe_path = vocab_path("gpt-2");
    TU_REQUIRE_FILE(spm_path);
    TU_REQUIRE_FILE(bpe_path);
    file_vocab spm(spm_path), bpe(bpe_path);
    ASSERT_TRUE(spm.ok && bpe.ok);

    const size_t MB = 1u << 20;
    const std::pair<const char *, std::string> inputs[] = {
        { "mixed text", mixed_text(MB) },
        { "one letter", std::string(MB, 'a') },
        { "spaces", std::string(MB, ' ') },
        { "digits", std::string(MB, '7') },
    };
    for (const auto & in : inputs) {
        for (const file_vocab * fv : { &spm, &bpe }) {
            const bool is_spm = fv == &spm;
            const auto t0 = std::chrono::steady_clock::now();
            const std::vector<llama_token> ids = fv->vocab.tokenize(in.second, false, true);
            const double dt = seconds_since(t0);
            printf("  %-4s %-10s %zu bytes -> %zu tokens in %.3f s\n", is_spm ? "spm" : "bpe", in.first, in.second.size(), ids.size(), dt);
            if (k_assert_speed) {
                // A guard against quadratic behaviour (minutes on 1 MB), not a speed figure: wide
                // enough for a loaded shared machine (a linear pass takes ~0.1-0.5 s).
                EXPECT_LT(dt, 10.0) << in.first;
            }
            const std::string back = fv->vocab.detokenize(ids, false, false);
            EXPECT_TRUE(back == in.second) << in.first << (is_spm ? " (spm)" : " (bpe)");
        }
    }
}

TEST(Tokenizer, RandomBytesRoundTrip) {
    // Arbitrary bytes, with pieces of special-token texts mixed in: valid ids, no crash, and the
    // text back (SentencePiece's U+2581 is left out: it comes back as a space).
    const char * names[] = { "llama-spm", "phi-3", "gpt-2" };
    const std::string fragments[] = { "<s>", "</s>", "<|end|>", "<|endoftext|>", "<0x41>", " ", "  ", "\n", "<", "|>", "\xc3\xa9", "\xf0\x9f" };
    std::mt19937 rng(1234);
    for (const char * name : names) {
        const std::string path = vocab_path(name);
        if (!tu::file_exists(path)) continue;
        file_vocab fv(path);
        ASSERT_TRUE(fv.ok) << fv.err;
        const llama_vocab & v = fv.vocab;
        const bool spm = v.type() == LLAMA_VOCAB_TYPE_SPM;
        for (int iter = 0; iter < 300; iter++) {
            std::string text;
            const int n = (int) (rng() % 40);
            for (int k = 0; k < n; k++) {
                if (rng() % 3 == 0) text += fragments[rng() % std::size(fragments)];
                else text += (char) (rng() % 256);
            }
            if (spm && text.find("\xe2\x96\x81") != std::string::npos) continue;
            for (int flags = 0; flags < 4; flags++) {
                const bool add_special = flags & 1, parse_special = flags & 2;
                const std::vector<llama_token> ids = v.tokenize(text, add_special, parse_special);
                for (llama_token id : ids) ASSERT_TRUE(id >= 0 && id < v.n_tokens()) << name;
                // SentencePiece puts its space after a user-defined token (</s> in phi-3) too.
                const bool has_user_defined = std::any_of(ids.begin(), ids.end(), [&](llama_token id) { return v.token_type(id) == 4; });
                if (!parse_special && !(spm && has_user_defined)) {
                    // The text comes back from its tokens without the BOS (llama.cpp's rule: the
                    // prefix's space goes from the first token when no BOS was removed before it).
                    std::vector<llama_token> seq = ids;
                    if (add_special && !seq.empty() && seq[0] == v.bos()) seq.erase(seq.begin());
                    EXPECT_EQ(v.detokenize(seq, false, false), text) << name << " iteration " << iter << " flags " << flags;
                }
            }
        }
    }
}

TEST(Tokenizer, ThreadsGiveTheSameTokens) {
    const std::string bpe_path = vocab_path("gpt-2");
    TU_REQUIRE_FILE(bpe_path);
    file_vocab bpe(bpe_path);
    ASSERT_TRUE(bpe.ok);
    const std::string text = mixed_text(64 * 1024);
    const std::vector<llama_token> expected = bpe.vocab.tokenize(text, false, false);
    std::vector<std::vector<llama_token>> got(3);
    std::vector<std::thread> threads;
    for (auto & g : got) threads.emplace_back([&] { g = bpe.vocab.tokenize(text, false, false); });
    for (auto & t : threads) t.join();
    for (const auto & g : got) EXPECT_TRUE(g == expected);
}

// ---- invalid ids and the C API -------------------------------------------------------------
TEST(Tokenizer, InvalidIds) {
    const std::string path = vocab_path("llama-spm");
    TU_REQUIRE_FILE(path);
    file_vocab fv(path);
    ASSERT_TRUE(fv.ok);
    const llama_vocab & v = fv.vocab;
    for (llama_token id : { -1, -1000, 32000, 1 << 30, INT32_MIN, INT32_MAX }) {
        EXPECT_EQ(v.text(id), "");
        EXPECT_EQ(v.score(id), 0.0f);
        EXPECT_EQ(v.token_type(id), 0);
        EXPECT_FALSE(v.is_eog(id));
        EXPECT_FALSE(v.is_control(id));
        EXPECT_EQ(v.token_to_piece(id, true), "");
        EXPECT_STREQ(llama_vocab_get_text(&v, id), "");
        char buf[16];
        EXPECT_EQ(llama_token_to_piece(&v, id, buf, sizeof(buf), 0, true), 0);
    }
    // Invalid ids in a sequence render as nothing; the rest is kept.
    EXPECT_EQ(v.detokenize({ 15043, -1, 32000, 3186 }, false, false), "Hello world");
    const llama_token ids[] = { 1, 15043, 99999 };
    char out[32];
    EXPECT_EQ(llama_detokenize(&v, ids, 3, out, sizeof(out), true, false), 6);  // (a BOS removed: the space stays, as llama.cpp)
    EXPECT_EQ(std::string(out, 6), " Hello");

    // A null vocabulary or bad arguments fail without crashing.
    EXPECT_EQ(llama_vocab_n_tokens(nullptr), 0);
    EXPECT_EQ(llama_vocab_type(nullptr), LLAMA_VOCAB_TYPE_NONE);
    EXPECT_STREQ(llama_vocab_get_text(nullptr, 5), "");
    EXPECT_EQ(llama_vocab_bos(nullptr), LLAMA_TOKEN_NULL);
    EXPECT_FALSE(llama_vocab_is_eog(nullptr, 2));
    EXPECT_LT(llama_tokenize(nullptr, "a", 1, nullptr, 0, false, false), -1000);
    EXPECT_LT(llama_tokenize(&v, "a", -1, nullptr, 0, false, false), -1000);
    EXPECT_LT(llama_tokenize(&v, nullptr, 3, nullptr, 0, false, false), -1000);
    EXPECT_LT(llama_detokenize(&v, nullptr, 3, out, sizeof(out), false, false), -1000);
    EXPECT_EQ(llama_token_to_piece(nullptr, 5, out, sizeof(out), 0, false), 0);

    // An empty (never loaded) vocabulary.
    llama_vocab empty;
    EXPECT_EQ(empty.n_tokens(), 0);
    EXPECT_TRUE(empty.tokenize("abc", true, true).empty());
    EXPECT_EQ(empty.detokenize({ 1, 2 }, true, true), "");
    EXPECT_EQ(empty.text(0), "");
}

TEST(Tokenizer, CApiBuffers) {
    const std::string path = vocab_path("llama-spm");
    TU_REQUIRE_FILE(path);
    file_vocab fv(path);
    ASSERT_TRUE(fv.ok);
    const llama_vocab * v = &fv.vocab;
    const char * text = "Hello world";
    llama_token toks[8];
    EXPECT_EQ(llama_tokenize(v, text, 11, toks, 1, true, false), -3);  // BOS Hello world
    EXPECT_EQ(llama_tokenize(v, text, 11, nullptr, 0, true, false), -3);
    ASSERT_EQ(llama_tokenize(v, text, 11, toks, 3, true, false), 3);
    EXPECT_EQ(toks[0], 1);
    EXPECT_EQ(toks[1], 15043);
    EXPECT_EQ(toks[2], 3186);

    char buf[32];
    EXPECT_EQ(llama_token_to_piece(v, 15043, buf, 3, 0, false), -6);  // " Hello"
    ASSERT_EQ(llama_token_to_piece(v, 15043, buf, sizeof(buf), 0, false), 6);
    EXPECT_EQ(std::string(buf, 6), " Hello");
    ASSERT_EQ(llama_token_to_piece(v, 15043, buf, sizeof(buf), 1, false), 5);  // lstrip one space
    EXPECT_EQ(std::string(buf, 5), "Hello");
    ASSERT_EQ(llama_token_to_piece(v, 259, buf, sizeof(buf), 1, false), 1);  // "▁▁": one of two
    ASSERT_EQ(llama_token_to_piece(v, 1, buf, sizeof(buf), 0, true), 3);
    EXPECT_EQ(std::string(buf, 3), "<s>");
    EXPECT_EQ(llama_token_to_piece(v, 1, buf, sizeof(buf), 0, false), 0);

    // (llama.cpp's rule: a removed BOS keeps the prefix's space; without the BOS it goes.)
    EXPECT_EQ(llama_detokenize(v, toks, 3, buf, 4, true, false), -12);
    ASSERT_EQ(llama_detokenize(v, toks, 3, buf, sizeof(buf), true, false), 12);
    EXPECT_EQ(std::string(buf, 12), std::string(" ") + text);
    ASSERT_EQ(llama_detokenize(v, toks + 1, 2, buf, sizeof(buf), false, false), 11);
    EXPECT_EQ(std::string(buf, 11), text);
    ASSERT_EQ(llama_detokenize(v, toks, 3, buf, sizeof(buf), false, true), 15);
    EXPECT_EQ(std::string(buf, 15), "<s> Hello world");

    EXPECT_EQ(llama_vocab_n_tokens(v), 32000);
    EXPECT_EQ(llama_vocab_type(v), LLAMA_VOCAB_TYPE_SPM);
    EXPECT_STREQ(llama_vocab_get_text(v, 1), "<s>");
    EXPECT_EQ(llama_vocab_get_score(v, 29871), fv.vocab.score(29871));
    EXPECT_EQ(llama_vocab_bos(v), 1);
    EXPECT_EQ(llama_vocab_eos(v), 2);
    EXPECT_EQ(llama_vocab_eot(v), LLAMA_TOKEN_NULL);
    EXPECT_TRUE(llama_vocab_get_add_bos(v));
    EXPECT_FALSE(llama_vocab_get_add_eos(v));
    EXPECT_TRUE(llama_vocab_is_eog(v, 2));
    EXPECT_TRUE(llama_vocab_is_control(v, 2));
}

// ---- the pre-tokenizers --------------------------------------------------------------------
struct split_case {
    llama_pretok kind;
    const char * text;
    std::vector<std::string> pieces;
};

// Expected pieces from Python's `regex` module running each model's split regex (see
// llama-unicode.h); SMOLLM splits digits first, then runs GPT-2's regex between them.
const split_case k_split_cases[] = {
    // gpt2
    { llama_pretok::GPT2, "Hello, world! I'm   fine\x0a\x0a\x09Thanks", { "Hello", ",", " world", "!", " I", "'m", "  ", " fine", "\x0a\x0a", "\x09", "Thanks" } },
    { llama_pretok::GPT2, "It'S 'll 'LL \xc5\xbf '\xc5\xbf x'Re don't", { "It", "'", "S", " '", "ll", " '", "LL", " \xc5\xbf", " '", "\xc5\xbf", " x", "'", "Re", " don", "'t" } },
    { llama_pretok::GPT2, "12345 \xc2\xbd\xe2\x85\xab\xd9\xa3 3.14 a1b22c333", { "12345", " \xc2\xbd\xe2\x85\xab\xd9\xa3", " 3", ".", "14", " a", "1", "b", "22", "c", "333" } },
    { llama_pretok::GPT2, "  \x0d\x0a\x0d\x0a  x \x0a ", { "  \x0d\x0a\x0d\x0a ", " x", " \x0a " } },
    { llama_pretok::GPT2, "tab\x09\x09""end  ", { "tab", "\x09", "\x09", "end", "  " } },
    { llama_pretok::GPT2, "\xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd (emoji) \xe2\x9c\x85!!", { "\xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd", " (", "emoji", ")", " \xe2\x9c\x85!!" } },
    { llama_pretok::GPT2, "\xd0\xbd\xd0\xb5\xd1\x89\xd0\xbe \xd0\xbd\xd0\xb0 \xd0\x91\xd1\x8a\xd0\xbb\xd0\xb3\xd0\xb0\xd1\x80\xd1\x81\xd0\xba\xd0\xb8 \xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c", { "\xd0\xbd\xd0\xb5\xd1\x89\xd0\xbe", " \xd0\xbd\xd0\xb0", " \xd0\x91\xd1\x8a\xd0\xbb\xd0\xb3\xd0\xb0\xd1\x80\xd1\x81\xd0\xba\xd0\xb8", " \xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c" } },
    { llama_pretok::GPT2, "a\xc2\xa0""b\xe3\x80\x80""c\xe2\x80\x83 d", { "a", "\xc2\xa0", "b", "\xe3\x80\x80", "c", "\xe2\x80\x83", " d" } },
    { llama_pretok::GPT2, "\x3f!\x0a\x0a""foo...\x0d\x0a""bar", { "\x3f!", "\x0a", "\x0a", "foo", "...", "\x0d", "\x0a", "bar" } },
    { llama_pretok::GPT2, " 'x' ''' ' ", { " '", "x", "'", " '''", " '", " " } },
    // llama3
    { llama_pretok::LLAMA3, "Hello, world! I'm   fine\x0a\x0a\x09Thanks", { "Hello", ",", " world", "!", " I", "'m", "  ", " fine", "\x0a\x0a", "\x09Thanks" } },
    { llama_pretok::LLAMA3, "It'S 'll 'LL \xc5\xbf '\xc5\xbf x'Re don't", { "It", "'S", " '", "ll", " '", "LL", " \xc5\xbf", " '", "\xc5\xbf", " x", "'Re", " don", "'t" } },
    { llama_pretok::LLAMA3, "12345 \xc2\xbd\xe2\x85\xab\xd9\xa3 3.14 a1b22c333", { "123", "45", " ", "\xc2\xbd\xe2\x85\xab\xd9\xa3", " ", "3", ".", "14", " a", "1", "b", "22", "c", "333" } },
    { llama_pretok::LLAMA3, "  \x0d\x0a\x0d\x0a  x \x0a ", { "  \x0d\x0a\x0d\x0a", " ", " x", " \x0a", " " } },
    { llama_pretok::LLAMA3, "tab\x09\x09""end  ", { "tab", "\x09", "\x09""end", "  " } },
    { llama_pretok::LLAMA3, "\xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd (emoji) \xe2\x9c\x85!!", { "\xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd", " (", "emoji", ")", " \xe2\x9c\x85!!" } },
    { llama_pretok::LLAMA3, "\xd0\xbd\xd0\xb5\xd1\x89\xd0\xbe \xd0\xbd\xd0\xb0 \xd0\x91\xd1\x8a\xd0\xbb\xd0\xb3\xd0\xb0\xd1\x80\xd1\x81\xd0\xba\xd0\xb8 \xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c", { "\xd0\xbd\xd0\xb5\xd1\x89\xd0\xbe", " \xd0\xbd\xd0\xb0", " \xd0\x91\xd1\x8a\xd0\xbb\xd0\xb3\xd0\xb0\xd1\x80\xd1\x81\xd0\xba\xd0\xb8", " \xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c" } },
    { llama_pretok::LLAMA3, "a\xc2\xa0""b\xe3\x80\x80""c\xe2\x80\x83 d", { "a", "\xc2\xa0""b", "\xe3\x80\x80""c", "\xe2\x80\x83", " d" } },
    { llama_pretok::LLAMA3, "\x3f!\x0a\x0a""foo...\x0d\x0a""bar", { "\x3f!\x0a\x0a", "foo", "...\x0d\x0a", "bar" } },
    { llama_pretok::LLAMA3, " 'x' ''' ' ", { " '", "x", "'", " '''", " '", " " } },
    // qwen2
    { llama_pretok::QWEN2, "Hello, world! I'm   fine\x0a\x0a\x09Thanks", { "Hello", ",", " world", "!", " I", "'m", "  ", " fine", "\x0a\x0a", "\x09Thanks" } },
    { llama_pretok::QWEN2, "It'S 'll 'LL \xc5\xbf '\xc5\xbf x'Re don't", { "It", "'S", " '", "ll", " '", "LL", " \xc5\xbf", " '", "\xc5\xbf", " x", "'Re", " don", "'t" } },
    { llama_pretok::QWEN2, "12345 \xc2\xbd\xe2\x85\xab\xd9\xa3 3.14 a1b22c333", { "1", "2", "3", "4", "5", " ", "\xc2\xbd", "\xe2\x85\xab", "\xd9\xa3", " ", "3", ".", "1", "4", " a", "1", "b", "2", "2", "c", "3", "3", "3" } },
    { llama_pretok::QWEN2, "  \x0d\x0a\x0d\x0a  x \x0a ", { "  \x0d\x0a\x0d\x0a", " ", " x", " \x0a", " " } },
    { llama_pretok::QWEN2, "tab\x09\x09""end  ", { "tab", "\x09", "\x09""end", "  " } },
    { llama_pretok::QWEN2, "\xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd (emoji) \xe2\x9c\x85!!", { "\xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd", " (", "emoji", ")", " \xe2\x9c\x85!!" } },
    { llama_pretok::QWEN2, "\xd0\xbd\xd0\xb5\xd1\x89\xd0\xbe \xd0\xbd\xd0\xb0 \xd0\x91\xd1\x8a\xd0\xbb\xd0\xb3\xd0\xb0\xd1\x80\xd1\x81\xd0\xba\xd0\xb8 \xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c", { "\xd0\xbd\xd0\xb5\xd1\x89\xd0\xbe", " \xd0\xbd\xd0\xb0", " \xd0\x91\xd1\x8a\xd0\xbb\xd0\xb3\xd0\xb0\xd1\x80\xd1\x81\xd0\xba\xd0\xb8", " \xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c" } },
    { llama_pretok::QWEN2, "a\xc2\xa0""b\xe3\x80\x80""c\xe2\x80\x83 d", { "a", "\xc2\xa0""b", "\xe3\x80\x80""c", "\xe2\x80\x83", " d" } },
    { llama_pretok::QWEN2, "\x3f!\x0a\x0a""foo...\x0d\x0a""bar", { "\x3f!\x0a\x0a", "foo", "...\x0d\x0a", "bar" } },
    { llama_pretok::QWEN2, " 'x' ''' ' ", { " '", "x", "'", " '''", " '", " " } },
    // smollm
    { llama_pretok::SMOLLM, "Hello, world! I'm   fine\x0a\x0a\x09Thanks", { "Hello", ",", " world", "!", " I", "'m", "  ", " fine", "\x0a\x0a", "\x09", "Thanks" } },
    { llama_pretok::SMOLLM, "It'S 'll 'LL \xc5\xbf '\xc5\xbf x'Re don't", { "It", "'", "S", " '", "ll", " '", "LL", " \xc5\xbf", " '", "\xc5\xbf", " x", "'", "Re", " don", "'t" } },
    { llama_pretok::SMOLLM, "12345 \xc2\xbd\xe2\x85\xab\xd9\xa3 3.14 a1b22c333", { "1", "2", "3", "4", "5", " ", "\xc2\xbd", "\xe2\x85\xab", "\xd9\xa3", " ", "3", ".", "1", "4", " a", "1", "b", "2", "2", "c", "3", "3", "3" } },
    { llama_pretok::SMOLLM, "  \x0d\x0a\x0d\x0a  x \x0a ", { "  \x0d\x0a\x0d\x0a ", " x", " \x0a " } },
    { llama_pretok::SMOLLM, "tab\x09\x09""end  ", { "tab", "\x09", "\x09", "end", "  " } },
    { llama_pretok::SMOLLM, "\xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd (emoji) \xe2\x9c\x85!!", { "\xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd", " (", "emoji", ")", " \xe2\x9c\x85!!" } },
    { llama_pretok::SMOLLM, "\xd0\xbd\xd0\xb5\xd1\x89\xd0\xbe \xd0\xbd\xd0\xb0 \xd0\x91\xd1\x8a\xd0\xbb\xd0\xb3\xd0\xb0\xd1\x80\xd1\x81\xd0\xba\xd0\xb8 \xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c", { "\xd0\xbd\xd0\xb5\xd1\x89\xd0\xbe", " \xd0\xbd\xd0\xb0", " \xd0\x91\xd1\x8a\xd0\xbb\xd0\xb3\xd0\xb0\xd1\x80\xd1\x81\xd0\xba\xd0\xb8", " \xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c" } },
    { llama_pretok::SMOLLM, "a\xc2\xa0""b\xe3\x80\x80""c\xe2\x80\x83 d", { "a", "\xc2\xa0", "b", "\xe3\x80\x80", "c", "\xe2\x80\x83", " d" } },
    { llama_pretok::SMOLLM, "\x3f!\x0a\x0a""foo...\x0d\x0a""bar", { "\x3f!", "\x0a", "\x0a", "foo", "...", "\x0d", "\x0a", "bar" } },
    { llama_pretok::SMOLLM, " 'x' ''' ' ", { " '", "x", "'", " '''", " '", " " } },
};

TEST(Tokenizer, PreTokenizersMatchTheirRegexes) {
    for (const split_case & c : k_split_cases) {
        std::vector<size_t> ends;
        const size_t len = strlen(c.text);
        llama_pretokenize(c.kind, c.text, len, ends);
        std::vector<std::string> pieces;
        size_t begin = 0;
        for (size_t e : ends) {
            pieces.push_back(std::string(c.text + begin, e - begin));
            begin = e;
        }
        EXPECT_EQ(pieces, c.pieces) << "kind " << (int) c.kind << " text \"" << c.text << "\"";
    }
    std::vector<size_t> ends;
    llama_pretokenize(llama_pretok::LLAMA3, "", 0, ends);
    EXPECT_TRUE(ends.empty());
}

TEST(Tokenizer, UnicodeTables) {
    EXPECT_EQ(llama_unicode_category_of('A'), LLAMA_UCAT_LU);
    EXPECT_EQ(llama_unicode_category_of(0xE9), LLAMA_UCAT_LL);     // é
    EXPECT_EQ(llama_unicode_category_of(0x663), LLAMA_UCAT_ND);    // Arabic-Indic three
    EXPECT_EQ(llama_unicode_category_of(0xBD), LLAMA_UCAT_NO);     // ½
    EXPECT_EQ(llama_unicode_category_of(0x216B), LLAMA_UCAT_NL);   // Ⅻ
    EXPECT_EQ(llama_unicode_category_of(0x301), LLAMA_UCAT_MN);    // combining acute
    EXPECT_EQ(llama_unicode_category_of(0x1F600), LLAMA_UCAT_SO);  // 😀
    EXPECT_EQ(llama_unicode_category_of(0x20000), LLAMA_UCAT_LO);  // CJK extension B
    EXPECT_EQ(llama_unicode_category_of(0xE000), LLAMA_UCAT_CO);
    EXPECT_EQ(llama_unicode_category_of(0xD800), LLAMA_UCAT_CS);
    EXPECT_EQ(llama_unicode_category_of(0x10FFFF), LLAMA_UCAT_CN);
    EXPECT_EQ(llama_unicode_category_of(LLAMA_UNICODE_INVALID_BASE + 0xFF), LLAMA_UCAT_CN);
    EXPECT_EQ(llama_unicode_flags(0x3000), LLAMA_UFLAG_SPACE);
    EXPECT_EQ(llama_unicode_flags(0x85), LLAMA_UFLAG_SPACE);
    EXPECT_EQ(llama_unicode_flags(0x1C), 0);  // not White_Space
    EXPECT_EQ(llama_unicode_flags(0x200B), 0);  // zero width space is Cf
    EXPECT_EQ(llama_unicode_flags(0x1D7CE), LLAMA_UFLAG_NUMBER);  // mathematical bold zero

    // GPT-2's alphabet is a bijection between bytes and 256 code points.
    std::set<uint32_t> seen;
    for (int b = 0; b < 256; b++) {
        const uint32_t cp = llama_byte_to_unicode((uint8_t) b);
        EXPECT_EQ(llama_unicode_to_byte(cp), b);
        seen.insert(cp);
    }
    EXPECT_EQ(seen.size(), 256u);
    EXPECT_EQ(llama_byte_to_unicode(' '), 0x120u);  // Ġ
    EXPECT_EQ(llama_byte_to_unicode('\n'), 0x10Au); // Ċ
    EXPECT_EQ(llama_byte_to_unicode('A'), (uint32_t) 'A');
    EXPECT_EQ(llama_unicode_to_byte(0x4E00), -1);

    // UTF-8 decoding: valid forms and each kind of invalid one.
    uint32_t cp;
    EXPECT_EQ(llama_utf8_decode("\xf0\x9f\xa6\x99", 4, 0, &cp), 4u);
    EXPECT_EQ(cp, 0x1F999u);
    EXPECT_EQ(llama_utf8_decode("\xf0\x9f\xa6", 3, 0, &cp), 1u);
    EXPECT_EQ(cp, LLAMA_UNICODE_INVALID_BASE + 0xF0);
    EXPECT_EQ(llama_utf8_decode("\xed\xa0\x80", 3, 0, &cp), 1u);  // surrogate
    EXPECT_EQ(llama_utf8_decode("\xe0\x80\x80", 3, 0, &cp), 1u);  // overlong
    EXPECT_EQ(llama_utf8_decode("\xc2\xa0", 2, 0, &cp), 2u);
    EXPECT_EQ(cp, 0xA0u);
}

// ---- synthetic vocabularies: BPE details and loading errors -------------------------------
TEST(Tokenizer, BpeMergesByRankWithinPreTokens) {
    // "Ġ" is the space character of the byte alphabet.
    synth s;
    make_bpe(s, "llama-bpe", { "a b", "ab c", "\xc4\xa0 a", "b c", "1 2", "12 3" }, { "<|eot_id|>" });
    llama_vocab v;
    std::string err;
    ASSERT_TRUE(s.load(v, err)) << err;
    const llama_token ab = 256, abc = 257, sp_a = 258, bc = 259, n12 = 260, n123 = 261, eot = 262;
    EXPECT_EQ(v.eot(), eot);
    EXPECT_TRUE(v.is_eog(eot));
    EXPECT_TRUE(v.add_bos() == false);  // no BOS token at all
    // "abc": a+b (rank 0) before b+c (rank 3), then ab+c.
    EXPECT_EQ(show(v.tokenize("abc", false, false)), show({ abc }));
    // " abc": Ġ+a (rank 2) loses to a+b (rank 0); then ab+c (rank 1).
    EXPECT_EQ(show(v.tokenize(" abc", false, false)), show({ (llama_token) ' ', abc }));
    // Llama 3 splits numbers in threes: "1234" -> "123" "4".
    EXPECT_EQ(show(v.tokenize("1234", false, false)), show({ n123, (llama_token) '4' }));
    EXPECT_EQ(show(v.tokenize("bc<|eot_id|>", false, true)), show({ bc, eot }));
    (void) ab; (void) sp_a; (void) n12;
}

TEST(Tokenizer, BpePreTokenizerChoice) {
    // The same vocabulary under each pre-tokenizer: digits group by 3 (llama-bpe), 1 (qwen2,
    // smollm) or all (gpt-2).
    const char * pres[] = { "gpt-2", "llama-bpe", "qwen2", "smollm" };
    const size_t expected_tokens[] = { 1, 2, 4, 4 };
    for (int k = 0; k < 4; k++) {
        synth s;
        make_bpe(s, pres[k], { "1 2", "12 3", "123 4" }, {});
        llama_vocab v;
        std::string err;
        ASSERT_TRUE(s.load(v, err)) << pres[k] << ": " << err;
        const std::vector<llama_token> ids = v.tokenize("1234", false, false);
        EXPECT_EQ(ids.size(), expected_tokens[k]) << pres[k] << ":" << show(ids);
        EXPECT_EQ(v.detokenize(ids, false, false), "1234");
    }
}

TEST(Tokenizer, SentencePieceScoresAndDefaults) {
    // No types and no scores: all tokens normal, equal scores merge leftmost first; the byte
    // tokens are recognised by their text.
    synth s;
    gguf_set_val_str(s.meta, "tokenizer.ggml.model", "llama");
    s.tokens({ "<unk>", "<s>", "</s>", "<0x21>", "\xe2\x96\x81", "a", "b", "c", "ab", "bc" });
    llama_vocab v;
    std::string err;
    ASSERT_TRUE(s.load(v, err)) << err;
    EXPECT_EQ(v.bos(), 1);
    EXPECT_EQ(v.eos(), 2);
    EXPECT_EQ(v.unk(), 0);
    EXPECT_TRUE(v.add_bos());
    EXPECT_EQ(show(v.tokenize("abc", false, false)), " 4 8 7");
    EXPECT_EQ(show(v.tokenize("!", false, false)), " 4 3");
    EXPECT_EQ(show(v.tokenize("?", false, false)), " 4 0");  // no byte token: unknown

    // With scores, the best-scoring pair goes first.
    synth t;
    gguf_set_val_str(t.meta, "tokenizer.ggml.model", "llama");
    gguf_set_val_bool(t.meta, "tokenizer.ggml.add_space_prefix", false);
    t.tokens({ "<unk>", "<s>", "</s>", "a", "b", "c", "ab", "bc" });
    t.scores({ 0, 0, 0, -1, -1, -1, -5, -2 });
    t.types({ 2, 3, 3, 1, 1, 1, 1, 1 });
    llama_vocab w;
    ASSERT_TRUE(t.load(w, err)) << err;
    EXPECT_EQ(show(w.tokenize("abc", false, false)), " 3 7");
    EXPECT_EQ(w.detokenize(w.tokenize("abc", true, false), true, false), "abc");
}

// WordPiece as llama.cpp runs BERT's vocabularies (converted with word-initial pieces marked by
// U+2581 and "##" dropped from the others): lowercased, accents dropped, punctuation and CJK
// ideographs split off, control characters removed, the longest piece first, an unknown word
// one [UNK]; [CLS] ... [SEP] around the text; detokenized with the spaces before punctuation
// cleaned up.
TEST(Tokenizer, WordPiece) {
    synth s;
    gguf_set_val_str(s.meta, "tokenizer.ggml.model", "bert");
    const std::string W = "\xe2\x96\x81";
    s.tokens({ "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", W + "hello", W + "world", W + ",", W + "!", W + "un", "aff",
               "able", W + "cafe", W + "the", W + "'", "s", W + "\xe4\xb8\xad", W + "\xe6\x96\x87", W + "hell", "o" });
    s.types({ 3, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 });
    gguf_set_val_u32(s.meta, "tokenizer.ggml.bos_token_id", 2);
    gguf_set_val_u32(s.meta, "tokenizer.ggml.seperator_token_id", 3);
    gguf_set_val_u32(s.meta, "tokenizer.ggml.unknown_token_id", 1);
    gguf_set_val_u32(s.meta, "tokenizer.ggml.padding_token_id", 0);
    llama_vocab v;
    std::string err;
    ASSERT_TRUE(s.load(v, err)) << err;
    EXPECT_EQ(v.type(), LLAMA_VOCAB_TYPE_WPM);
    EXPECT_EQ(v.bos(), 2);
    EXPECT_EQ(v.sep(), 3);
    EXPECT_TRUE(v.add_bos());
    EXPECT_FALSE(v.add_eos());
    EXPECT_EQ(show(v.tokenize("Hello, world!", true, false)), " 2 5 7 6 8 3");
    EXPECT_EQ(show(v.tokenize("Hello, world!", false, false)), " 5 7 6 8");
    EXPECT_EQ(show(v.tokenize("unaffable", false, false)), " 9 10 11");
    EXPECT_EQ(show(v.tokenize("CAF\xc3\x89 caf\xc3\xa9", false, false)), " 12 12");  // NFD's base letters, lowercased
    EXPECT_EQ(show(v.tokenize("hello xyz world", false, false)), " 5 1 6");       // an unknown word: one [UNK]
    EXPECT_EQ(show(v.tokenize("helloq", false, false)), " 1");                    // a piece missing: the whole word
    EXPECT_EQ(show(v.tokenize("\xe4\xb8\xad\xe6\x96\x87", false, false)), " 16 17");  // each CJK ideograph a word
    EXPECT_EQ(show(v.tokenize("hel\x07lo\xe2\x80\x8b", false, false)), " 5");       // BEL (Cc) and U+200B (Cf) vanish
    EXPECT_EQ(show(v.tokenize("\t hello \n", false, false)), " 5");
    EXPECT_EQ(show(v.tokenize("hello's", false, false)), " 5 14 1");  // "'" a word; "s" has no word-initial piece
    EXPECT_EQ(show(v.tokenize("[CLS] hello", false, true)), " 2 5");
    EXPECT_EQ(show(v.tokenize("hello\xff", false, false)), " 5");  // a byte outside UTF-8 is dropped
    EXPECT_EQ(show(v.tokenize("", true, false)), " 2 3");
    // Detokenizing: word-initial pieces bring their space, which goes before , ! ? . and 's.
    EXPECT_EQ(v.detokenize(v.tokenize("Hello, world!", true, false), true, false), " hello, world!");
    EXPECT_EQ(v.detokenize({ 13, 14, 15 }, false, false), " the's");
    EXPECT_EQ(v.detokenize({ 2, 5, 3 }, false, true), "[CLS] hello[SEP]");
}

TEST(Tokenizer, LoadErrors) {
    struct bad_case {
        const char * what;
        std::function<void(synth &)> build;
        const char * message_part;
    };
    const bad_case cases[] = {
        { "no model key", [](synth & s) { s.tokens({ "a" }); }, "tokenizer.ggml.model" },
        { "unknown model", [](synth & s) { gguf_set_val_str(s.meta, "tokenizer.ggml.model", "t5"); s.tokens({ "a" }); }, "t5" },
        { "model not a string", [](synth & s) { gguf_set_val_u32(s.meta, "tokenizer.ggml.model", 1); }, "tokenizer.ggml.model" },
        { "no tokens", [](synth & s) { gguf_set_val_str(s.meta, "tokenizer.ggml.model", "llama"); }, "tokenizer.ggml.tokens" },
        { "tokens not strings", [](synth & s) {
              gguf_set_val_str(s.meta, "tokenizer.ggml.model", "llama");
              const int32_t x[2] = { 1, 2 };
              gguf_set_arr_data(s.meta, "tokenizer.ggml.tokens", GGUF_TYPE_INT32, x, 2);
          }, "tokenizer.ggml.tokens" },
        { "empty tokens", [](synth & s) {
              gguf_set_val_str(s.meta, "tokenizer.ggml.model", "llama");
              gguf_set_arr_str(s.meta, "tokenizer.ggml.tokens", nullptr, 0);
          }, "tokenizer.ggml.tokens" },
        { "scores count", [](synth & s) {
              gguf_set_val_str(s.meta, "tokenizer.ggml.model", "llama");
              s.tokens({ "a", "b" });
              s.scores({ 1.0f });
          }, "tokenizer.ggml.scores" },
        { "scores type", [](synth & s) {
              gguf_set_val_str(s.meta, "tokenizer.ggml.model", "llama");
              s.tokens({ "a", "b" });
              const int32_t x[2] = { 1, 2 };
              gguf_set_arr_data(s.meta, "tokenizer.ggml.scores", GGUF_TYPE_INT32, x, 2);
          }, "tokenizer.ggml.scores" },
        { "types count", [](synth & s) {
              gguf_set_val_str(s.meta, "tokenizer.ggml.model", "llama");
              s.tokens({ "a", "b" });
              s.types({ 1, 1, 1 });
          }, "tokenizer.ggml.token_type" },
        { "bos id type", [](synth & s) {
              gguf_set_val_str(s.meta, "tokenizer.ggml.model", "llama");
              s.tokens({ "a", "b" });
              gguf_set_val_str(s.meta, "tokenizer.ggml.bos_token_id", "1");
          }, "bos_token_id" },
        { "unknown pre", [](synth & s) { make_bpe(s, "no-such-pre", {}, {}); }, "no-such-pre" },
        { "no merges", [](synth & s) { make_bpe(s, nullptr, {}, {}); gguf_remove_key(s.meta, "tokenizer.ggml.merges"); }, "merges" },
        { "bad merge", [](synth & s) { make_bpe(s, nullptr, { "a b" }, {}); s.merges({ "ab" }); }, "merges" },
    };
    for (const bad_case & c : cases) {
        synth s;
        c.build(s);
        llama_vocab v;
        std::string err;
        EXPECT_FALSE(s.load(v, err)) << c.what;
        EXPECT_NE(err.find(c.message_part), std::string::npos) << c.what << ": " << err;
        EXPECT_EQ(v.n_tokens(), 0) << c.what;
        EXPECT_TRUE(v.tokenize("abc", true, true).empty()) << c.what;
    }
    llama_vocab v;
    std::string err;
    EXPECT_FALSE(v.load(nullptr, err));

    // Out-of-range special ids (like u32 -1) mean "none"; a failed reload leaves an empty vocabulary.
    synth s;
    gguf_set_val_str(s.meta, "tokenizer.ggml.model", "llama");
    s.tokens({ "<unk>", "<s>", "</s>", "a" });
    gguf_set_val_u32(s.meta, "tokenizer.ggml.eos_token_id", 0xFFFFFFFFu);
    gguf_set_val_u32(s.meta, "tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);
    ASSERT_TRUE(s.load(v, err)) << err;
    EXPECT_EQ(v.eos(), LLAMA_TOKEN_NULL);
    EXPECT_EQ(v.pad(), LLAMA_TOKEN_NULL);
    EXPECT_FALSE(v.add_eos());
    EXPECT_FALSE(v.is_eog(LLAMA_TOKEN_NULL));
    synth bad;
    EXPECT_FALSE(bad.load(v, err));
    EXPECT_EQ(v.n_tokens(), 0);

    // A model without a tokenizer ("no_vocab") loads as an empty vocabulary of type NONE.
    synth none;
    gguf_set_val_str(none.meta, "tokenizer.ggml.model", "no_vocab");
    ASSERT_TRUE(none.load(v, err)) << err;
    EXPECT_EQ(v.type(), LLAMA_VOCAB_TYPE_NONE);
    EXPECT_TRUE(v.tokenize("abc", true, true).empty());

    // Moving keeps the data with the new owner.
    ASSERT_TRUE(s.load(v, err));
    llama_vocab moved(std::move(v));
    EXPECT_EQ(moved.n_tokens(), 4);
    EXPECT_EQ(v.n_tokens(), 0);
}

}  // namespace

// A vocabulary-only model gets a context, as in llama.cpp (its llama-tokenize makes one): no KV
// cache, tokenizing works, the cache calls are harmless and llama_decode refuses with -1.
TEST(Tokenizer, VocabOnlyModelGetsAContext) {
    const std::string path = vocab_path("llama-spm");
    TU_REQUIRE_FILE(path);
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model * model = llama_model_load_from_file(path.c_str(), mp);
    ASSERT_NE(model, nullptr);
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 128;
    llama_context * ctx = llama_init_from_model(model, cp);
    ASSERT_NE(ctx, nullptr);
    EXPECT_EQ(llama_n_ctx(ctx), 128u);
    EXPECT_EQ(llama_get_model(ctx), model);
    const llama_vocab * vocab = llama_model_get_vocab(model);
    llama_token toks[8];
    const int32_t n = llama_tokenize(vocab, "Hello world", 11, toks, 8, true, false);
    ASSERT_EQ(n, 3);
    EXPECT_EQ(toks[1], 15043);
    llama_kv_self_clear(ctx);
    EXPECT_EQ(llama_kv_self_seq_pos_max(ctx, 0), -1);
    EXPECT_EQ(llama_decode(ctx, llama_batch_get_one(toks, n)), -1);
    EXPECT_EQ(llama_get_logits_ith(ctx, -1), nullptr);
    llama_free(ctx);
    llama_model_free(model);
}
