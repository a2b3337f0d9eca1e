// GBNF grammars and the grammar sampler: strings accepted as complete and the tokens allowed along
// them, against llama.cpp's grammar sampler (tests/data/grammar-reference/reference.txt, written by
// gen.cpp there from llama.cpp's example grammars and our edge cases, stories260K's vocabulary);
// grammars that do not parse (a message naming the place, never a crash); the end of generation,
// clone / reset, UTF-8 split over tokens, the lazy form; JSON schemas to grammars.
#include "test-llama.h"

#include "llama-grammar.h"
#ifdef LLAMA_JSON_SCHEMA
#include "json-schema-to-grammar.h"
#endif

#include <cmath>
#include <fstream>
#include <sstream>

namespace {

const std::string REF_DIR = std::string(LLAMA_TEST_DATA_DIR) + "/grammar-reference";

std::string read_file(const std::string & path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string unhex(const std::string & h) {
    std::string out;
    for (size_t i = 0; i + 1 < h.size(); i += 2) out += (char) std::stoi(h.substr(i, 2), nullptr, 16);
    return out;
}

struct ref_step {
    size_t k;
    int count;
    std::string bits;  // bytes
};

struct ref_string {
    std::string text;
    int complete;
    std::vector<llama_token> tokens;
    std::vector<ref_step> steps;
};

struct ref_grammar {
    std::string file, text;
    std::vector<ref_string> strings;
};

std::vector<ref_grammar> load_reference() {
    std::vector<ref_grammar> out;
    std::ifstream in(REF_DIR + "/reference.txt");
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream ls(line);
        std::string kind;
        ls >> kind;
        if (kind == "grammar") {
            out.emplace_back();
            ls >> out.back().file;
            out.back().text = read_file(REF_DIR + "/" + out.back().file);
        } else if (kind == "string") {
            ref_string s;
            std::string hex, word, toks;
            ls >> hex >> word >> s.complete >> word >> toks;
            s.text = unhex(hex);
            std::istringstream ts(toks);
            for (std::string t; std::getline(ts, t, ',');) s.tokens.push_back(std::stoi(t));
            out.back().strings.push_back(s);
        } else if (kind == "step") {
            ref_step st;
            std::string hex;
            ls >> st.k >> st.count >> hex;
            st.bits = unhex(hex);
            out.back().strings.back().steps.push_back(st);
        }
    }
    return out;
}

// The text with newlines, tabs and bytes outside ASCII as escapes (for messages).
std::string show(const std::string & s) {
    std::string out;
    for (unsigned char c : s) {
        char buf[8];
        if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c < 0x20 || c >= 0x7F) snprintf(buf, sizeof(buf), "\\x%02x", c), out += buf;
        else out += (char) c;
    }
    return out;
}

std::string model_path() { return tu::models_dir() + "/stories260K.gguf"; }

// The candidates left after the sampler (all at logit 0 before).
std::vector<bool> allowed(llama_sampler * s, int32_t n_vocab) {
    std::vector<llama_token_data> data((size_t) n_vocab);
    for (llama_token t = 0; t < n_vocab; t++) data[(size_t) t] = {t, 0.0f, 0.0f};
    llama_token_data_array arr = {data.data(), data.size(), -1, false};
    llama_sampler_apply(s, &arr);
    std::vector<bool> out((size_t) n_vocab, false);
    for (size_t i = 0; i < arr.size; i++) {
        if (!std::isinf(arr.data[i].logit)) out[(size_t) arr.data[i].id] = true;
    }
    return out;
}

std::string piece(const llama_vocab * v, llama_token t) {
    char buf[256];
    const int32_t n = llama_token_to_piece(v, t, buf, sizeof(buf), 0, true);
    return std::string(buf, n > 0 ? (size_t) n : 0);
}

llama_token token_of(const llama_vocab * v, const std::string & p) {
    for (llama_token t = 0; t < llama_vocab_n_tokens(v); t++) {
        if (piece(v, t) == p && !(llama_vocab_get_attr(v, t) & LLAMA_TOKEN_ATTR_CONTROL)) return t;
    }
    return -1;
}

// Accepts the tokens spelling text (longest token text first, as gen.cpp).
void accept_text(llama_sampler * s, const llama_vocab * v, const std::string & text) {
    size_t at = 0;
    while (at < text.size()) {
        llama_token best = -1;
        size_t len = 0;
        for (llama_token t = 0; t < llama_vocab_n_tokens(v); t++) {
            if (llama_vocab_get_attr(v, t) & LLAMA_TOKEN_ATTR_CONTROL) continue;
            const std::string p = piece(v, t);
            if (p.size() > len && text.compare(at, p.size(), p) == 0) {
                best = t;
                len = p.size();
            }
        }
        ASSERT_GE(best, 0);
        llama_sampler_accept(s, best);
        at += len;
    }
}

}  // namespace

TEST(Grammar, ReferenceCoversTheGrammars) {
    const auto ref = load_reference();
    ASSERT_GE(ref.size(), 14u) << "tests/data/grammar-reference/reference.txt";
    for (const auto & g : ref) {
        EXPECT_FALSE(g.text.empty()) << g.file;
        EXPECT_FALSE(g.strings.empty()) << g.file;
    }
}

// Whole strings through the matcher (no vocabulary): complete or not as llama.cpp says.
TEST(Grammar, CompleteStringsMatchLlamaCpp) {
    for (const auto & g : load_reference()) {
        for (const auto & s : g.strings) {
            std::string err;
            const int m = llama_gbnf_match(g.text, "root", s.text, &err);
            ASSERT_GE(m, 0) << g.file << ": " << err;
            EXPECT_EQ(m, s.complete) << g.file << ": '" << show(s.text) << "'";
        }
    }
}

// The allowed tokens at each step of each string, end-of-generation included.
TEST(Grammar, AllowedTokensMatchLlamaCpp) {
    TU_REQUIRE_FILE(model_path());
    tu::ModelPtr model(model_path(), true, true);
    ASSERT_NE(model.m, nullptr);
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    size_t n_steps = 0;
    for (const auto & g : load_reference()) {
        for (const auto & s : g.strings) {
            llama_sampler * smpl = llama_sampler_init_grammar(vocab, g.text.c_str(), "root");
            ASSERT_NE(smpl, nullptr) << g.file << ": " << tu::take_errors();
            size_t next = 0;
            for (size_t k = 0; k <= s.tokens.size() && next < s.steps.size(); k++) {
                const std::vector<bool> ok = allowed(smpl, n_vocab);
                if (s.steps[next].k == k) {
                    const ref_step & st = s.steps[next++];
                    int count = 0;
                    std::string diff;
                    for (llama_token t = 0; t < n_vocab; t++) {
                        count += ok[(size_t) t];
                        const bool want = (st.bits[(size_t) t / 8] >> (t % 8)) & 1;
                        if (want != ok[(size_t) t] && diff.size() < 300) {
                            diff += " " + std::to_string(t) + "'" + show(piece(vocab, t)) + "'" + (want ? "+" : "-");
                        }
                    }
                    EXPECT_EQ(count, st.count) << g.file << " '" << show(s.text) << "' step " << k << ": (token'text' llama.cpp+/-)" << diff;
                    EXPECT_TRUE(diff.empty()) << g.file << " '" << show(s.text) << "' step " << k << ":" << diff;
                    n_steps++;
                }
                if (k == s.tokens.size() || !ok[(size_t) s.tokens[k]]) break;
                llama_sampler_accept(smpl, s.tokens[k]);
            }
            EXPECT_EQ(next, s.steps.size()) << g.file << " '" << show(s.text) << "': the walk stopped early";
            llama_sampler_free(smpl);
        }
    }
    EXPECT_GT(n_steps, 300u);
}

TEST(Grammar, BadGrammarsAreRefusedWithAMessage) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"root ::= \"a", "unterminated string literal"},
        {"root ::= [a-z", "unterminated character class"},
        {"root ::= foo", "line 1, column 10 (at 'foo'): undefined rule 'foo'"},
        {"root ::= root \"a\"", "left recursion in rule 'root'"},
        {"root ::= x\nx ::= \"a\"? y\ny ::= x | \"b\"", "left recursion"},
        {"root ::= \"a\"*  *", "left recursion"},  // a repetition of a nullable item (as llama.cpp)
        {"root ::= \"a\"* \"b\"+ ", ""},
        {"root = \"a\"", "expecting '::='"},
        {"root ::= \"a\" )", "unexpected ')'"},
        {"root ::= *", "expecting an item before '*'"},
        {"root ::= \"\\q\"", "unknown escape '\\q'"},
        {"root ::= \"\\x4\"", "expecting 2 hex digits"},
        {"root ::= \"a\"{3,1}", "repetition maximum below its minimum"},
        {"root ::= \"a\"{2", "expecting '}'"},
        {"root ::= \"a\"{x}", "expecting an integer"},
        {"root ::= (\"a\"", "expecting ')'"},
        {"other ::= \"a\"", "no rule 'root'"},
        {"# only a comment\n", "the grammar has no rules"},
        {"", "the grammar has no rules"},
        {"greeting ::= \"hello\" | \"hi\"\n   | \"hey\"\nroot ::= greeting", "line 2, column 4 (at '| \"hey\"'): expecting a rule name"},
        {"root ::= \"a\"\nx ::= \"b\" @", "line 2, column 11 (at '@'): unexpected '@'"},
        {"root ::= ((((\"a\"{1000}){1000}){1000}){1000})", ""},  // groups are rules: small
        {"root ::= \"abcdefghij\"{300000}", "too large"},
        {"root ::= \"a\"{10000000}", "repetition count too large"},
        {"root ::= \"a\"{2,888884}", "too large"},  // refused before making its rules (fuzz-grammar: 1 s)
        {"root ::= \"\"*", "left recursion"},
    };
    for (const auto & [text, want] : cases) {
        std::string err;
        auto g = llama_gbnf_parse(text, "root", &err);
        if (want.empty()) {
            EXPECT_NE(g, nullptr) << text << ": " << err;
            continue;
        }
        EXPECT_EQ(g, nullptr) << text;
        EXPECT_NE(err.find(want), std::string::npos) << text << "\n  got: " << err << "\n  want: " << want;
    }
}

// Nested repetitions double the alternatives per level (a fuzzer's find, which hung the matcher):
// past 4096 expansions for one character the text is refused instead.
TEST(Grammar, NestedRepetitionsAreRefusedNotHung) {
    const std::string g = "root ::= \"a\" (\"b\" | \"c\")" + std::string(60, '+');
    EXPECT_EQ(llama_gbnf_match(g, "root", "abcb", nullptr), 0);
}

TEST(Grammar, SamplerRefusesABadGrammarAndLogsWhy) {
    TU_REQUIRE_FILE(model_path());
    tu::ModelPtr model(model_path(), true, true);
    const llama_vocab * vocab = llama_model_get_vocab(model);
    tu::take_errors();
    EXPECT_EQ(llama_sampler_init_grammar(vocab, "root ::= undefined-rule", "root"), nullptr);
    EXPECT_NE(tu::take_errors().find("undefined rule 'undefined-rule'"), std::string::npos);
    EXPECT_EQ(llama_sampler_init_grammar(vocab, "start ::= \"a\"", "root"), nullptr);
    EXPECT_NE(tu::take_errors().find("no rule 'root'"), std::string::npos);
    llama_sampler * s = llama_sampler_init_grammar(vocab, "start ::= \"a\"", "start");
    EXPECT_NE(s, nullptr);
    llama_sampler_free(s);
    const char * words[] = {"x"};
    EXPECT_EQ(llama_sampler_init_grammar_lazy(vocab, "root ::= (", "root", words, 1, nullptr, 0), nullptr);
}

TEST(Grammar, EndOfGenerationOnlyWhenCompleteCloneAndReset) {
    TU_REQUIRE_FILE(model_path());
    tu::ModelPtr model(model_path(), true, true);
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    const llama_token eos = llama_vocab_eos(vocab);

    // An empty grammar: a sampler that does nothing.
    llama_sampler * none = llama_sampler_init_grammar(vocab, "", "root");
    ASSERT_NE(none, nullptr);
    auto all = allowed(none, n_vocab);
    EXPECT_EQ(std::count(all.begin(), all.end(), true), n_vocab);
    llama_sampler_accept(none, 100);
    llama_sampler_free(none);

    llama_sampler * s = llama_sampler_init_grammar(vocab, "root ::= \"ab\" | \"abc\"", "root");
    ASSERT_NE(s, nullptr);
    EXPECT_STREQ(llama_sampler_name(s), "grammar");
    auto ok = allowed(s, n_vocab);
    EXPECT_FALSE(ok[(size_t) eos]);
    EXPECT_TRUE(ok[(size_t) token_of(vocab, "a")]);
    EXPECT_FALSE(ok[(size_t) token_of(vocab, "b")]);
    llama_sampler_accept(s, token_of(vocab, "a"));
    llama_sampler_accept(s, token_of(vocab, "b"));
    llama_sampler * c = llama_sampler_clone(s);
    for (llama_sampler * x : {s, c}) {
        ok = allowed(x, n_vocab);
        EXPECT_TRUE(ok[(size_t) eos]);
        EXPECT_TRUE(ok[(size_t) token_of(vocab, "c")]);
        EXPECT_EQ(std::count(ok.begin(), ok.end(), true), 3);  // "c", the byte token of "c", the end
    }
    llama_sampler_accept(c, token_of(vocab, "c"));
    ok = allowed(c, n_vocab);
    EXPECT_EQ(std::count(ok.begin(), ok.end(), true), 1);  // only the end
    EXPECT_TRUE(ok[(size_t) eos]);
    EXPECT_TRUE(allowed(s, n_vocab)[(size_t) token_of(vocab, "c")]);  // the original did not move
    llama_sampler_reset(c);
    ok = allowed(c, n_vocab);
    EXPECT_FALSE(ok[(size_t) eos]);
    EXPECT_TRUE(ok[(size_t) token_of(vocab, "a")]);
    // A token that does not fit is ignored with a warning (llama.cpp throws).
    tu::take_errors();
    llama_sampler_accept(c, token_of(vocab, "z"));
    EXPECT_NE(tu::take_errors().find("does not fit the grammar"), std::string::npos);
    EXPECT_TRUE(allowed(c, n_vocab)[(size_t) token_of(vocab, "a")]);
    llama_sampler_free(c);
    llama_sampler_free(s);
}

TEST(Grammar, Utf8SplitOverByteTokens) {
    TU_REQUIRE_FILE(model_path());
    tu::ModelPtr model(model_path(), true, true);
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    llama_sampler * s = llama_sampler_init_grammar(vocab, "root ::= \"\xc3\xa9\" [\\u3040-\\u309F]", "root");  // é, then hiragana
    ASSERT_NE(s, nullptr);
    auto ok = allowed(s, n_vocab);
    EXPECT_TRUE(ok[(size_t) token_of(vocab, "\xc3")]);
    EXPECT_FALSE(ok[(size_t) token_of(vocab, "\xc4")]);
    EXPECT_FALSE(ok[(size_t) token_of(vocab, "\xa9")]);  // a continuation byte alone
    llama_sampler_accept(s, token_of(vocab, "\xc3"));
    ok = allowed(s, n_vocab);
    EXPECT_TRUE(ok[(size_t) token_of(vocab, "\xa9")]);
    EXPECT_FALSE(ok[(size_t) token_of(vocab, "\xaa")]);
    EXPECT_EQ(std::count(ok.begin(), ok.end(), true), 1);
    llama_sampler_accept(s, token_of(vocab, "\xa9"));
    ok = allowed(s, n_vocab);
    EXPECT_TRUE(ok[(size_t) token_of(vocab, "\xe3")]);  // U+3000-U+3FFF may hold hiragana
    EXPECT_FALSE(ok[(size_t) token_of(vocab, "\xe4")]);
    EXPECT_FALSE(ok[(size_t) token_of(vocab, "a")]);
    llama_sampler_accept(s, token_of(vocab, "\xe3"));
    ok = allowed(s, n_vocab);
    EXPECT_TRUE(ok[(size_t) token_of(vocab, "\x81")]);  // U+3040-U+307F
    EXPECT_TRUE(ok[(size_t) token_of(vocab, "\x82")]);
    EXPECT_FALSE(ok[(size_t) token_of(vocab, "\x80")]);  // U+3000-U+303F: none
    llama_sampler_accept(s, token_of(vocab, "\x81"));
    llama_sampler_accept(s, token_of(vocab, "\x82"));  // あ
    EXPECT_TRUE(allowed(s, n_vocab)[(size_t) llama_vocab_eos(vocab)]);
    llama_sampler_free(s);
}

TEST(Grammar, LazyWaitsForATriggerWordOrToken) {
    TU_REQUIRE_FILE(model_path());
    tu::ModelPtr model(model_path(), true, true);
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    const char * grammar = "root ::= \"{\" [a-z]+ \"}\"";
    const char * words[] = {"{"};
    llama_sampler * s = llama_sampler_init_grammar_lazy(vocab, grammar, "root", words, 1, nullptr, 0);
    ASSERT_NE(s, nullptr);
    auto ok = allowed(s, n_vocab);
    EXPECT_EQ(std::count(ok.begin(), ok.end(), true), n_vocab);  // not triggered: nothing removed
    accept_text(s, vocab, "Once upon");
    EXPECT_EQ(std::count(ok.begin(), ok.end(), true), n_vocab);
    accept_text(s, vocab, " a {ti");  // the trigger word, then the grammar from it on: "{ti"
    ok = allowed(s, n_vocab);
    EXPECT_TRUE(ok[(size_t) token_of(vocab, "}")]);
    EXPECT_TRUE(ok[(size_t) token_of(vocab, "m")]);
    EXPECT_FALSE(ok[(size_t) token_of(vocab, " ")]);
    EXPECT_FALSE(ok[(size_t) llama_vocab_eos(vocab)]);
    llama_sampler * c = llama_sampler_clone(s);
    llama_sampler_reset(s);  // waiting again
    ok = allowed(s, n_vocab);
    EXPECT_EQ(std::count(ok.begin(), ok.end(), true), n_vocab);
    EXPECT_FALSE(allowed(c, n_vocab)[(size_t) token_of(vocab, " ")]);
    llama_sampler_free(c);
    llama_sampler_free(s);

    // A trigger token: the grammar applies from that token's text on.
    const llama_token brace = token_of(vocab, "{");
    ASSERT_GE(brace, 0);
    s = llama_sampler_init_grammar_lazy(vocab, grammar, "root", nullptr, 0, &brace, 1);
    ASSERT_NE(s, nullptr);
    accept_text(s, vocab, "the end");
    EXPECT_TRUE(allowed(s, n_vocab)[(size_t) token_of(vocab, " ")]);
    llama_sampler_accept(s, brace);
    ok = allowed(s, n_vocab);
    EXPECT_FALSE(ok[(size_t) token_of(vocab, " ")]);
    EXPECT_TRUE(ok[(size_t) token_of(vocab, "a")]);
    EXPECT_FALSE(ok[(size_t) token_of(vocab, "}")]);
    llama_sampler_free(s);
}

// ---- JSON schemas --------------------------------------------------------------------------

#ifdef LLAMA_JSON_SCHEMA
namespace {

struct schema_case {
    const char * schema;
    std::vector<std::string> good, bad;
};

}  // namespace

TEST(JsonSchema, GrammarsTakeTheSchemasTexts) {
    const std::vector<schema_case> cases = {
        {R"({})", {R"({"a": [1, "x", null]})", "[]", "\"s\"", "-1.5e3", "true"}, {"{", "nul", "01", "[1,]"}},
        {R"({"type": "integer"})", {"0", "-12", "7 "}, {"1.5", "01", "\"1\"", "-"}},
        {R"({"type": "number"})", {"0", "-1.25", "3e10", "2.5E-3"}, {".5", "1.", "e3"}},
        {R"({"type": "boolean"})", {"true", "false"}, {"True", "1"}},
        {R"({"type": "null"})", {"null"}, {"nil", ""}},
        {R"({"type": "string", "minLength": 2, "maxLength": 3})", {R"("ab")", R"("abc")", R"("\n\"")", R"("é¢€")"}, {R"("a")", R"("abcd")", R"(ab)"}},
        {R"({"type": "string"})", {R"("")", R"("x\u00e9y")"}, {R"("a\qb")", "\"a\nb\"", R"("unterminated)"}},
        {R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["name"]})",
         {R"({"name": "Bob"})", R"({"name": "Bob", "age": 3})", R"({"name":"Bob","age":3,"tags":["a","b"]})", R"({ "name" : "x" , "tags" : [ ] })",
          "{\n  \"name\": \"x\"\n}"},
         {R"({})", R"({"age": 3})", R"({"age": 3, "name": "Bob"})", R"({"name": "Bob", "other": 1})", R"({"name": "Bob",})",
          R"({"name": 1})"}},
        {R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}})",
         {"{}", R"({"a": 1})", R"({"b": 2})", R"({"a": 1, "b": 2})"}, {R"({"b": 2, "a": 1})", R"({, "b": 2})", R"({"a": 1,})"}},
        {R"({"type": "object", "properties": {"a": {"const": 1}}, "required": ["a"], "additionalProperties": true})",
         {R"({"a": 1})", R"({"a": 1, "x": [true], "y": {}})"}, {R"({"a": 2})", R"({"x": 1})"}},
        {R"({"type": "object", "additionalProperties": {"type": "integer"}})", {"{}", R"({"x": 1, "y": 2})"}, {R"({"x": "1"})"}},
        {R"({"type": "object", "additionalProperties": false})", {"{}", "{ }"}, {R"({"x": 1})"}},
        {R"({"enum": ["red", "green", 3, null]})", {R"("red")", R"("green")", "3", "null"}, {R"("blue")", "4", "red"}},
        {R"({"const": {"k": [1, 2]}})", {R"({"k":[1,2]})"}, {R"({"k": [1, 2]})", R"({"k":[1]})"}},
        {R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})", {"[1]", "[1, 2, 3]", "[ 1 ,2 ]"}, {"[]", "[1, 2, 3, 4]", "[\"a\"]"}},
        {R"({"type": "array", "maxItems": 0})", {"[]"}, {"[1]"}},
        {R"({"type": "array", "items": [{"type": "string"}, {"type": "integer"}]})", {R"(["a", 1])"}, {R"([1, "a"])", R"(["a"])", R"(["a", 1, 2])"}},
        {R"({"type": "array", "prefixItems": [{"type": "boolean"}]})", {"[true]"}, {"[]"}},
        {R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]})", {"1", R"("a")"}, {R"("ab")", "true"}},
        {R"({"oneOf": [{"type": "null"}, {"type": "boolean"}]})", {"null", "false"}, {"0"}},
        {R"({"type": ["string", "null"]})", {R"("x")", "null"}, {"1"}},
        {R"({"$defs": {"pos": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}}, "type": "array", "items": {"$ref": "#/$defs/pos"}})",
         {R"([{"x": 1}, {"x": 2.5}])", "[]"}, {R"([{"y": 1}])"}},
        {R"({"definitions": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/definitions/node"}, {"type": "null"}]}}, "required": ["v", "next"]}}, "$ref": "#/definitions/node"})",
         {R"({"v": 1, "next": null})", R"({"v": 1, "next": {"v": 2, "next": {"v": 3, "next": null}}})"}, {R"({"v": 1, "next": {"v": 2}})"}},
        {R"({"type": "object", "properties": {"a b/c": {"type": "string"}}, "required": ["a b/c"]})", {R"({"a b/c": "x"})"}, {R"({"a": "x"})"}},
    };
    for (const auto & c : cases) {
        std::string grammar;
        try {
            grammar = json_schema_to_grammar(nlohmann::ordered_json::parse(c.schema));
        } catch (const std::exception & e) {
            ADD_FAILURE() << c.schema << ": " << e.what();
            continue;
        }
        std::string err;
        ASSERT_NE(llama_gbnf_parse(grammar, "root", &err), nullptr) << c.schema << "\n" << grammar << "\n" << err;
        for (const auto & t : c.good) EXPECT_EQ(llama_gbnf_match(grammar, "root", t, &err), 1) << c.schema << " must take " << t << "\n" << grammar;
        for (const auto & t : c.bad) EXPECT_EQ(llama_gbnf_match(grammar, "root", t, &err), 0) << c.schema << " must refuse " << t << "\n" << grammar;
    }
}

TEST(JsonSchema, UnsupportedSchemasThrowWithAReason) {
    const std::vector<std::pair<const char *, const char *>> cases = {
        {R"({"type": "string", "pattern": "^a+$"})", "pattern not supported"},
        {R"({"$ref": "https://example.com/schema.json"})", "not supported"},
        {R"({"$ref": "#/$defs/missing"})", "not found"},
        {R"({"type": "date"})", "type 'date' not supported"},
        {R"({"enum": []})", "empty enum"},
    };
    for (const auto & [schema, want] : cases) {
        try {
            json_schema_to_grammar(nlohmann::ordered_json::parse(schema));
            ADD_FAILURE() << schema << " did not throw";
        } catch (const std::runtime_error & e) {
            EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << schema << ": " << e.what();
        }
    }
}
#endif
