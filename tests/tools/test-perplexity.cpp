// llama-perplexity as a user runs it: perplexity of stories260K on a story against random text,
// the number recomputed here through the C API (second half of each chunk, BOS rule), the KL
// divergence against the model itself and a Q8_0 copy, and bad input.
#include "test-llama.h"

#include "llama.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

namespace {

std::string bin(const std::string & prog) { return std::string(LLAMA_EMULATOR) + " " + LLAMA_BIN_DIR + "/" + prog; }
bool have(const std::string & prog) { return tu::file_exists(std::string(LLAMA_BIN_DIR) + "/" + prog); }
std::string model_path() { return tu::models_dir() + "/stories260K.gguf"; }

struct result {
    int status = -1;
    std::string out, err;  // standard output, standard error
};

result perplexity(const std::string & args) {
    result r;
    const tu::run_result rr = tu::run_command(bin("llama-perplexity") + " " + args, &r.err);
    r.status = rr.status;
    r.out = rr.output;
    return r;
}

// Simple children's-story sentences of the kind stories260K was trained on.
std::string story_text() {
    const char * names[] = {"Lily", "Tom", "Ben", "Mia", "Sam", "Anna"};
    const char * things[] = {"ball", "dog", "cat", "toy", "tree", "cake", "box", "bird"};
    const char * adjs[] = {"big", "little", "red", "happy", "small", "pretty"};
    std::string s;
    for (int i = 0; i < 12; i++) {
        const std::string n = names[i % 6], t = things[i % 8], a = adjs[i % 6];
        s += "Once upon a time, there was a " + a + " girl named " + n + ". She liked to play outside with her " + t +
             ". One day, " + n + " saw a " + a + " " + t + " in the park. She was very happy. \"Mom, look at the " + t +
             "!\" she said. Her mom smiled and said, \"Yes, it is a " + a + " " + t + ".\" They played together all day. ";
    }
    return s;
}

// Words of random letters.
std::string random_text() {
    std::mt19937 rng(42);
    std::uniform_int_distribution<int> len(2, 9), letter(0, 25);
    std::string s;
    for (int w = 0; w < 300; w++) {
        const int n = len(rng);
        for (int i = 0; i < n; i++) s += (char) ('a' + letter(rng));
        s += ' ';
    }
    return s;
}

std::string write(const tu::TempDir & dir, const std::string & name, const std::string & content) {
    const std::string path = dir.path + "/" + name;
    std::ofstream(path, std::ios::binary) << content;
    return path;
}

// The number of "Final estimate: PPL = X +/- Y" (NaN when absent or malformed).
double final_ppl(const std::string & out, double * unc = nullptr) {
    static const std::regex re(R"((^|\n)Final estimate: PPL = ([0-9]+\.[0-9]{4}) \+/- ([0-9]+\.[0-9]{5})\n)");
    std::smatch m;
    if (!std::regex_search(out, m, re)) return NAN;
    if (unc) *unc = std::stod(m[3]);
    return std::stod(m[2]);
}

// The number after a label of the KL summary ("Mean    KLD:", "Same top p:").
double stat(const std::string & out, const std::string & label) {
    const size_t at = out.find("\n" + label);
    if (at == std::string::npos) return NAN;
    return std::strtod(out.c_str() + at + 1 + label.size(), nullptr);
}

// Perplexity of the first n_chunk chunks of n_ctx tokens of text recomputed with the C API:
// each chunk decoded in one batch from an empty cache, its first token BOS when the model adds
// BOS, the tokens from n_ctx/2 + 1 on scored by the logits before them (log-softmax in double).
double reference_ppl(const std::string & text, int n_ctx, int n_chunk) {
    llama_model * model = llama_model_load_from_file(model_path().c_str(), llama_model_default_params());
    EXPECT_NE(model, nullptr);
    if (!model) return NAN;
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_model_n_vocab(model);
    std::vector<llama_token> toks(text.size() + 8);
    const int n = llama_tokenize(vocab, text.data(), (int) text.size(), toks.data(), (int) toks.size(), true, false);
    EXPECT_GE(n, n_ctx * n_chunk);
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t) n_ctx;
    cp.n_batch = (uint32_t) n_ctx;
    cp.n_ubatch = (uint32_t) n_ctx;
    cp.n_threads = cp.n_threads_batch = 2;
    llama_context * ctx = llama_init_from_model(model, cp);
    EXPECT_NE(ctx, nullptr);
    double nll = 0;
    int count = 0;
    llama_batch batch = llama_batch_init(n_ctx, 0, 1);
    for (int c = 0; c < n_chunk && ctx; c++) {
        llama_kv_self_clear(ctx);
        const llama_token * chunk = toks.data() + (size_t) c * n_ctx;
        for (int i = 0; i < n_ctx; i++) {
            batch.token[i] = chunk[i];
            batch.pos[i] = i;
            batch.logits[i] = 1;
        }
        if (llama_vocab_get_add_bos(vocab)) batch.token[0] = llama_vocab_bos(vocab);
        batch.n_tokens = n_ctx;
        EXPECT_EQ(llama_decode(ctx, batch), 0);
        for (int j = n_ctx / 2; j < n_ctx - 1; j++) {
            const float * row = llama_get_logits_ith(ctx, j);
            double mx = row[0];
            for (int v = 1; v < n_vocab; v++) mx = std::max(mx, (double) row[v]);
            double sum = 0;
            for (int v = 0; v < n_vocab; v++) sum += std::exp((double) row[v] - mx);
            nll += mx + std::log(sum) - row[chunk[j + 1]];
            count++;
        }
    }
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    return std::exp(nll / count);
}

#define REQUIRE_PERPLEXITY()                                                                    \
    do {                                                                                        \
        if (!have("llama-perplexity")) GTEST_SKIP() << "llama-perplexity was not built";        \
        TU_REQUIRE_FILE(model_path());                                                          \
    } while (0)

}  // namespace

TEST(Perplexity, StoryFarBelowRandomText) {
    REQUIRE_PERPLEXITY();
    tu::TempDir dir;
    const std::string story = write(dir, "story.txt", story_text()), noise = write(dir, "random.txt", random_text());
    const std::string opts = " -c 128 --chunks 4 -t 2";
    const result rs = perplexity("-m " + model_path() + " -f " + story + opts);
    const result rn = perplexity("-m " + model_path() + " -f " + noise + opts);
    ASSERT_EQ(rs.status, 0) << rs.err;
    ASSERT_EQ(rn.status, 0) << rn.err;
    // The running estimates, one per chunk, then the final line.
    EXPECT_TRUE(std::regex_search(rs.out, std::regex(R"(^\[1\][0-9]+\.[0-9]{4},\[2\][0-9]+\.[0-9]{4},\[3\][0-9.]+,\[4\][0-9.]+,\n)")))
        << rs.out;
    double unc = NAN;
    const double ppl_story = final_ppl(rs.err, &unc), ppl_noise = final_ppl(rn.err);
    ASSERT_TRUE(std::isfinite(ppl_story)) << rs.out;
    ASSERT_TRUE(std::isfinite(ppl_noise)) << rn.out;
    EXPECT_GT(ppl_story, 1.0);
    EXPECT_GT(ppl_noise, 1.0);
    EXPECT_GT(unc, 0.0);
    EXPECT_LT(unc, ppl_story);
    EXPECT_LT(ppl_story, ppl_noise / 3) << "story " << ppl_story << ", random " << ppl_noise;
    // As llama.cpp's: the per-chunk line on standard output, the final estimate and the log on
    // standard error.
    EXPECT_EQ(rs.out.find("Final estimate"), std::string::npos) << rs.out;
    EXPECT_NE(rs.err.find("calculating perplexity over 4 chunks"), std::string::npos) << rs.err;
}

TEST(Perplexity, MatchesTheCApi) {
    REQUIRE_PERPLEXITY();
    tu::TempDir dir;
    const std::string text = story_text(), path = write(dir, "story.txt", text);
    // One chunk: only its second half scored.
    const double want1 = reference_ppl(text, 64, 1);
    const result r1 = perplexity("-m " + model_path() + " -f " + path + " -c 64 --chunks 1 -t 2");
    ASSERT_EQ(r1.status, 0) << r1.err;
    EXPECT_NEAR(final_ppl(r1.err), want1, 1e-4 * want1) << r1.out;
    EXPECT_EQ(r1.out.rfind("[1]", 0), 0u) << r1.out;
    // llama.cpp's GPU flags: every layer and the cache on a GPU where the build has one (noted
    // and ignored where it has none), the same number.
    const result g = perplexity("-m " + model_path() + " -f " + path + " -c 64 --chunks 1 -t 2 -ngl 99 -sm layer -mg 0 -nkvo");
    ASSERT_EQ(g.status, 0) << g.err;
    EXPECT_TRUE(g.err.find("no usable GPU (none in this build or on this machine): -ngl, -sm, -mg, -nkvo ignored") != std::string::npos ||
                g.err.find("layers to") != std::string::npos) << g.err;
    EXPECT_NEAR(final_ppl(g.err), want1, 1e-4 * want1) << g.out;
    // -fa with llama.cpp's later values (bare -fa is its old form): fused attention, about the same number
    const result fa = perplexity("-m " + model_path() + " -f " + path + " -c 64 --chunks 1 -t 2 -fa on");
    ASSERT_EQ(fa.status, 0) << fa.err;
    EXPECT_NEAR(final_ppl(fa.err), want1, 1e-3 * want1) << fa.out;
    // Two chunks, the second one starting with BOS in place of its first token; in batches of
    // 16 tokens (other products, so a looser bound).
    const double want2 = reference_ppl(text, 64, 2);
    const result r2 = perplexity("-m " + model_path() + " -f " + path + " -c 64 --chunks 2 -b 16 -t 2");
    ASSERT_EQ(r2.status, 0) << r2.err;
    EXPECT_NEAR(final_ppl(r2.err), want2, 5e-4 * want2) << r2.out;
    EXPECT_NE(want1, want2);
}

TEST(Perplexity, KlDivergenceAgainstItselfAndQ8_0) {
    REQUIRE_PERPLEXITY();
    if (!have("llama-quantize")) GTEST_SKIP() << "llama-quantize was not built";
    tu::TempDir dir;
    const std::string story = write(dir, "story.txt", story_text());
    const std::string base = dir.path + "/base.kld";
    const result rb = perplexity("-m " + model_path() + " -f " + story + " -c 64 --chunks 4 -t 2 --kl-divergence-base " + base);
    ASSERT_EQ(rb.status, 0) << rb.err;
    const double ppl = final_ppl(rb.err);
    ASSERT_TRUE(std::isfinite(ppl)) << rb.out;
    // llama.cpp's layout: "_logits_", n_ctx, n_vocab, n_chunk, 4 * 64 tokens, 4 * 31 rows of
    // 2 floats + 512 16-bit log-probabilities; no temporary left.
    struct stat st;
    ASSERT_EQ(stat(base.c_str(), &st), 0);
    const size_t nv = 512 + 4;
    ASSERT_EQ((size_t) st.st_size, 20u + 4u * 64 * 4 + 4u * 31 * nv * 2);
    for (const std::string & f : dir.files()) EXPECT_EQ(f.find(".tmp"), std::string::npos) << f;
    std::string bytes;
    {
        std::stringstream ss;
        ss << std::ifstream(base, std::ios::binary).rdbuf();
        bytes = ss.str();
    }
    ASSERT_EQ(bytes.compare(0, 8, "_logits_"), 0);
    int32_t h[3], tok[64];
    memcpy(h, bytes.data() + 8, sizeof(h));
    EXPECT_EQ(h[0], 64);
    EXPECT_EQ(h[1], 512);
    EXPECT_EQ(h[2], 4);
    memcpy(tok, bytes.data() + 20, sizeof(tok));
    // Row 0 of chunk 0 (position 32) against the model's own log-softmax there, computed through
    // the C API (chunk 0 with BOS first): within the 16-bit step over the top 16 nats.
    {
        tu::ModelPtr m(model_path());
        tu::CtxPtr c(m, 64, 64, 2);  // the F16 cache llama-perplexity keeps by default
        ASSERT_TRUE(m.m && c.c);
        std::vector<llama_token> in(tok, tok + 64);
        in[0] = llama_vocab_bos(llama_model_get_vocab(m));
        const std::vector<float> logits = tu::eval_all(c, in);
        ASSERT_EQ(logits.size(), 64u * 512);
        const float * row = logits.data() + 32 * 512;
        double mx = row[0], sum = 0;
        for (int i = 0; i < 512; i++) mx = std::max(mx, (double) row[i]);
        for (int i = 0; i < 512; i++) sum += std::exp(row[i] - mx);
        const uint16_t * q = (const uint16_t *) (bytes.data() + 20 + 4 * 64 * 4);
        float d[2];
        memcpy(d, q, sizeof(d));
        EXPECT_NEAR(d[0], 16.0f / 65535, 1e-3f * d[0]) << "the scale spans 16 nats";
        double worst = 0;
        for (int i = 0; i < 512; i++) {
            const double lp = row[i] - mx - std::log(sum);
            if (row[i] > mx - 16) worst = std::max(worst, std::fabs(d[0] * q[4 + i] + d[1] - lp));
        }
        EXPECT_LT(worst, 1e-3) << "stored log-probabilities against the model's";
    }

    // The model against its own (16-bit) logits: next to no divergence.
    const result rs = perplexity("-m " + model_path() + " --kl-divergence-base " + base + " --kl-divergence -t 2");
    ASSERT_EQ(rs.status, 0) << rs.err;
    for (const char * label : {"====== Perplexity statistics ======", "Mean PPL(Q)                   :",
                               "Mean PPL(base)                :", "Mean PPL(Q)/PPL(base)         :",
                               "====== KL divergence statistics ======", "Mean    KLD:", "Maximum KLD:", "99.9%   KLD:",
                               "Median  KLD:", "Minimum KLD:", "====== Token probability statistics ======",
                               "Mean    Δp:", "Maximum Δp:", "99.9%   Δp:", "99.0%   Δp:", "95.0%   Δp:", "90.0%   Δp:",
                               "75.0%   Δp:", "Median  Δp:", "25.0%   Δp:", "10.0%   Δp:", " 5.0%   Δp:", " 1.0%   Δp:",
                               " 0.1%   Δp:", "Minimum Δp:", "RMS Δp    :", "Same top p:"}) {
        EXPECT_NE(rs.out.find(label), std::string::npos) << label << "\n" << rs.out;
    }
    EXPECT_LT(stat(rs.out, "Mean    KLD:"), 1e-6) << rs.out;
    EXPECT_LT(stat(rs.out, "Maximum KLD:"), 1e-4) << rs.out;  // measured 4.3e-5: the 16-bit steps and the -16 floor
    EXPECT_LT(stat(rs.out, "Maximum Δp:"), 0.05) << rs.out;
    EXPECT_GT(stat(rs.out, "Minimum Δp:"), -0.05) << rs.out;
    EXPECT_GT(stat(rs.out, "Same top p:"), 99.0) << rs.out;
    EXPECT_NEAR(stat(rs.out, "Mean PPL(Q)                   :"), ppl, 1e-4 * ppl) << rs.out;
    EXPECT_NEAR(stat(rs.out, "Mean PPL(base)                :"), ppl, 1e-4 * ppl) << rs.out;
    EXPECT_NEAR(stat(rs.out, "Mean PPL(Q)/PPL(base)         :"), 1.0, 1e-4) << rs.out;

    // A Q8_0 copy: a small divergence, the same top token almost everywhere.
    const std::string q8 = dir.path + "/q8_0.gguf";
    const tu::run_result rq = tu::run_command(bin("llama-quantize") + " " + model_path() + " " + q8 + " q8_0");
    ASSERT_EQ(rq.status, 0) << rq.output;
    const result r8 = perplexity("-m " + q8 + " --kl-divergence-base " + base + " --kl-divergence -t 2");
    ASSERT_EQ(r8.status, 0) << r8.err;
    const double kld = stat(r8.out, "Mean    KLD:");
    EXPECT_GT(kld, 0.0) << r8.out;
    EXPECT_LT(kld, 0.05) << r8.out;
    EXPECT_GT(stat(r8.out, "Same top p:"), 90.0) << r8.out;
    EXPECT_NEAR(stat(r8.out, "Mean PPL(base)                :"), ppl, 1e-4 * ppl) << r8.out;
    const double ppl_q = stat(r8.out, "Mean PPL(Q)                   :");
    EXPECT_NEAR(ppl_q, ppl, 0.05 * ppl) << r8.out;
    EXPECT_NEAR(stat(r8.out, "Mean PPL(Q)/PPL(base)         :"), ppl_q / ppl, 1e-4) << r8.out;
    // One line per chunk under llama.cpp's header.
    EXPECT_NE(r8.out.find("chunk             PPL               ln(PPL(Q)/PPL(base))"), std::string::npos) << r8.out;
    EXPECT_NE(r8.out.find("\n   4 "), std::string::npos) << r8.out;
}

TEST(Perplexity, BadInputFailsWithAMessage) {
    REQUIRE_PERPLEXITY();
    tu::TempDir dir;
    const std::string m = " -m " + model_path();
    const std::string story = write(dir, "story.txt", story_text());
    const std::string short_text = write(dir, "short.txt", "Once upon a time, there was a little girl.");
    auto expect_fail = [](const result & r, const std::string & needle) {
        EXPECT_EQ(r.status, 1) << r.err;  // a clean exit, not a signal
        EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in:\n" << r.err;
    };
    expect_fail(perplexity(m + " -f " + dir.path + "/missing.txt"), "missing.txt");
    expect_fail(perplexity(m), "-f");
    expect_fail(perplexity(m + " -f " + story + " --no-such-flag"), "unknown option '--no-such-flag'");
    expect_fail(perplexity(m + " -f " + story + " -c 2"), "-c");
    expect_fail(perplexity(m + " -f " + story + " -c abc"), "-c");
    expect_fail(perplexity(m + " -f " + story + " -b"), "missing value for -b");
    expect_fail(perplexity(m + " -f " + story + " -ngl many"), "invalid value for -ngl: 'many'");
    expect_fail(perplexity(m + " -f " + story + " -sm rows"), "invalid value for -sm: 'rows' (none, layer or row)");
    expect_fail(perplexity(m + " -f " + story + " -mg"), "missing value for -mg");
    expect_fail(perplexity(" -m " + dir.path + "/missing.gguf -f " + story), "cannot load model");
    // Too short for two chunks: no base file is left behind either.
    const std::string never = dir.path + "/never.kld";
    expect_fail(perplexity(m + " -f " + short_text + " -c 64 --kl-divergence-base " + never), "you need at least 128 tokens");
    EXPECT_FALSE(tu::file_exists(never));
    EXPECT_EQ(dir.files().size(), 2u);
    expect_fail(perplexity(m + " --kl-divergence"), "--kl-divergence-base");

    // Base files: not one, truncated, missing, of another context size.
    const std::string base = dir.path + "/base.kld";
    ASSERT_EQ(perplexity(m + " -f " + story + " -c 64 --chunks 2 -t 2 --kl-divergence-base " + base).status, 0);
    std::string bytes;
    {
        std::stringstream ss;
        ss << std::ifstream(base, std::ios::binary).rdbuf();
        bytes = ss.str();
    }
    const std::string kl = " --kl-divergence --kl-divergence-base ";
    expect_fail(perplexity(m + kl + story), "not a base file");
    expect_fail(perplexity(m + kl + write(dir, "half.kld", bytes.substr(0, bytes.size() / 2))), "truncated");
    expect_fail(perplexity(m + kl + write(dir, "header.kld", bytes.substr(0, 12))), "truncated");
    expect_fail(perplexity(m + kl + write(dir, "long.kld", bytes + "x")), "more than its header announces");
    expect_fail(perplexity(m + kl + dir.path + "/missing.kld"), "missing.kld");
    expect_fail(perplexity(m + kl + base + " -c 128"), "context of 64");
    // A model of another vocabulary.
    const std::string other = tu::models_dir() + "/TinyStories-656K-Q8_0.gguf";
    if (tu::file_exists(other)) expect_fail(perplexity(" -m " + other + kl + base), "vocabulary");
}

// ---- the multiple-choice benchmarks and strided perplexity, against llama.cpp ----------------
// tests/data/perplexity-tasks: small task files in each benchmark's format and the standard
// output of llama.cpp's llama-perplexity (build 4747) on them with stories260K (see its README).

namespace {

std::string tasks_dir() { return std::string(LLAMA_TEST_DATA_DIR) + "/perplexity-tasks"; }

std::string read_all(const std::string & path) {
    std::stringstream ss;
    ss << std::ifstream(path, std::ios::binary).rdbuf();
    return ss.str();
}

std::vector<std::string> lines_of(const std::string & s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    std::string line;
    while (std::getline(in, line)) out.push_back(line);
    return out;
}

// The numbers of a line, in order.
std::vector<double> numbers(const std::string & line) {
    std::vector<double> out;
    static const std::regex re(R"(-?[0-9]+(\.[0-9]+)?)");
    for (auto it = std::sregex_iterator(line.begin(), line.end(), re); it != std::sregex_iterator(); ++it) out.push_back(std::stod(it->str()));
    return out;
}

}  // namespace

// HellaSwag and multiple choice print a running accuracy: the same lines as llama.cpp's, to the byte.
TEST(PerplexityTasks, HellaSwagAndMultipleChoiceAsLlamaCpp) {
    REQUIRE_PERPLEXITY();
    const std::string m = " -m " + model_path() + " -t 2 ";
    const std::string d = tasks_dir() + "/";
    const std::pair<std::string, std::string> cases[] = {
        {"--hellaswag -f " + d + "hellaswag.txt", "llama.cpp-hellaswag.txt"},
        {"--hellaswag -f " + d + "hellaswag.txt --hellaswag-tasks 5", "llama.cpp-hellaswag-5.txt"},
        {"--multiple-choice -bf " + d + "multiple-choice.bin", "llama.cpp-multiple-choice.txt"},
        {"--multiple-choice -bf " + d + "multiple-choice.bin --multiple-choice-tasks 3", "llama.cpp-multiple-choice-3.txt"},
    };
    for (const auto & c : cases) {
        const result r = perplexity(m + c.first);
        ASSERT_EQ(r.status, 0) << c.first << "\n" << r.err;
        EXPECT_EQ(r.out, read_all(d + c.second)) << c.first;
    }
    const result r = perplexity(m + "--multiple-choice -bf " + d + "multiple-choice.bin");
    EXPECT_NE(r.err.find("Final result: 100.0000 +/- 0.0000"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("Random chance: 26.3158 +/- 22.0174"), std::string::npos) << r.err;
}

// WinoGrande prints both sentences' scores: within 1e-3 of llama.cpp's (its logits differ from
// ours by about 1e-4 here), the same choice wherever llama.cpp's two scores are 1e-3 apart or
// more, the same tasks chosen by --winogrande-tasks. The data's last line is malformed: llama.cpp
// drops a -f file's last line, this reports and skips it, so both score the same 8 tasks.
TEST(PerplexityTasks, WinoGrandeAsLlamaCpp) {
    REQUIRE_PERPLEXITY();
    const std::string m = " -m " + model_path() + " -t 2 ";
    const std::string d = tasks_dir() + "/";
    for (const auto & c : {std::make_pair(std::string(""), std::string("llama.cpp-winogrande.txt")),
                           std::make_pair(std::string(" --winogrande-tasks 4"), std::string("llama.cpp-winogrande-4.txt"))}) {
        const result r = perplexity(m + "--winogrande -f " + d + "winogrande.csv" + c.first);
        ASSERT_EQ(r.status, 0) << r.err;
        EXPECT_NE(r.err.find("line 9: expected 5 comma-separated fields, skipped"), std::string::npos) << r.err;
        const auto ours = lines_of(r.out), ref = lines_of(read_all(d + c.second));
        ASSERT_EQ(ours.size(), ref.size()) << r.out;
        size_t n_tasks = 0;
        for (size_t i = 0; i < ref.size(); i++) {
            const auto a = numbers(ours[i]), b = numbers(ref[i]);
            ASSERT_EQ(a.size(), b.size()) << ours[i] << " | " << ref[i];
            if (b.empty()) continue;
            ASSERT_EQ(b.size(), 6u) << ref[i];
            n_tasks++;
            EXPECT_EQ(a[0], b[0]);
            EXPECT_NEAR(a[2], b[2], 1e-3) << ours[i] << " | " << ref[i];
            EXPECT_NEAR(a[3], b[3], 1e-3) << ours[i] << " | " << ref[i];
            if (std::fabs(b[2] - b[3]) >= 1e-3) {
                EXPECT_EQ(a[4], b[4]) << ours[i] << " | " << ref[i];
            }
            EXPECT_EQ(a[5], b[5]) << "another task: " << ours[i] << " | " << ref[i];
        }
        EXPECT_EQ(n_tasks, c.first.empty() ? 8u : 4u);
    }
}

// --ppl-stride (windows of -c + stride/2 rounded up to 32 tokens, every stride tokens, the last
// stride scored) and --ppl-output-type 1: the running perplexities within 0.1% of llama.cpp's.
TEST(PerplexityTasks, StridedPerplexityAsLlamaCpp) {
    REQUIRE_PERPLEXITY();
    const std::string m = " -m " + model_path() + " -t 2 -f " + tasks_dir() + "/story.txt ";
    const std::pair<std::string, std::string> cases[] = {
        {"--ppl-stride 100 -c 200 -b 64", "llama.cpp-ppl-stride-100.txt"},
        {"--ppl-stride 32 -c 64 -b 64 --ppl-output-type 1", "llama.cpp-ppl-stride-32-type-1.txt"},
    };
    for (const auto & c : cases) {
        const result r = perplexity(m + c.first);
        ASSERT_EQ(r.status, 0) << r.err;
        std::vector<double> ours, ref;
        const bool type1 = c.first.find("output-type 1") != std::string::npos;
        for (const auto & l : lines_of(r.out)) {
            const auto v = numbers(l);
            if (type1 && v.size() == 2) ours.push_back(v[1]);
            if (!type1 && l.rfind("[1]", 0) == 0) {
                for (size_t i = 1; i < v.size(); i += 2) ours.push_back(v[i]);
            }
        }
        for (const auto & l : lines_of(read_all(tasks_dir() + "/" + c.second))) {
            const auto v = numbers(l);
            if (type1) {
                ref.push_back(v.at(1));
            } else {
                for (size_t i = 1; i < v.size(); i += 2) ref.push_back(v[i]);
            }
        }
        ASSERT_EQ(ours.size(), ref.size()) << r.out;
        ASSERT_GT(ref.size(), 10u);
        for (size_t i = 0; i < ref.size(); i++) EXPECT_NEAR(ours[i], ref[i], 1e-3 * ref[i]) << c.first << " chunk " << i + 1;
        EXPECT_FALSE(std::isnan(final_ppl(r.err))) << r.err;
    }
}

TEST(PerplexityTasks, BadTaskDataFailsWithAMessage) {
    REQUIRE_PERPLEXITY();
    tu::TempDir dir;
    const std::string m = " -m " + model_path() + " -t 2 ";
    const std::string d = tasks_dir() + "/";
    auto expect_fail = [](const result & r, const std::string & needle) {
        EXPECT_EQ(r.status, 1) << r.err;
        EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in:\n" << r.err;
    };
    const std::string hs = read_all(d + "hellaswag.txt");
    expect_fail(perplexity(m + "--hellaswag -f " + write(dir, "seven.txt", hs.substr(0, hs.find('\n') + 1) + hs)), "not a multiple of 6");
    std::string bad_gold = hs;
    bad_gold.replace(bad_gold.find("\n0\n"), 3, "\n7\n");
    expect_fail(perplexity(m + "--hellaswag -f " + write(dir, "gold.txt", bad_gold) + " --hellaswag-tasks 12"), "must be 0 to 3");
    expect_fail(perplexity(m + "--hellaswag -f " + d + "hellaswag.txt -c 8"), "does not fit in the context window");
    expect_fail(perplexity(m + "--winogrande -f " + write(dir, "none.csv", "a,b,c\nno blank here,x,y,z,1\n")), "no tasks");
    const std::string mc = read_all(d + "multiple-choice.bin");
    expect_fail(perplexity(m + "--multiple-choice -bf " + write(dir, "half.bin", mc.substr(0, mc.size() / 2))), "truncated or malformed");
    expect_fail(perplexity(m + "--multiple-choice -bf " + write(dir, "head.bin", mc.substr(0, 10))), "task offsets");
    expect_fail(perplexity(m + "--multiple-choice -bf " + write(dir, "empty.bin", "")), "no tasks");
    expect_fail(perplexity(m + "--hellaswag --winogrande -f " + d + "hellaswag.txt"), "choose one of");
    expect_fail(perplexity(m + "--hellaswag -f " + d + "hellaswag.txt --kl-divergence-base x.kld"), "do not go with");
    expect_fail(perplexity(m + "-f " + d + "story.txt --ppl-stride 300 -c 64"), "must be smaller than the context");
    expect_fail(perplexity(m + "-f " + d + "story.txt --ppl-output-type 2"), "--ppl-output-type");
}
