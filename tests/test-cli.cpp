// The programs as a user runs them: llama-cli (greedy text against llama2.c's reference, context
// shift, long prompts, chat, bad input) and llama-tokenize.
#include "test-util.h"

#include <fstream>
#include <sstream>
#include <sys/wait.h>


namespace {

struct run_result {
    int status = -1;
    std::string out;  // standard output only
    std::string err;  // standard error
};

// Runs a program of the bin folder with args (already quoted), optional standard input.
run_result run(const std::string & prog, const std::string & args, const std::string & input = "") {
    char tmpl[] = "/tmp/test-cli-XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    const std::string in = dir + "/in", out = dir + "/out", err = dir + "/err";
    std::ofstream(in) << input;
    const std::string cmd = std::string(LLAMA_EMULATOR) + " " + LLAMA_BIN_DIR + "/" + prog + " " + args + " < " + in +
                            " > " + out + " 2> " + err;
    const int st = std::system(cmd.c_str());
    run_result r;
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    std::stringstream so, se;
    so << std::ifstream(out).rdbuf();
    se << std::ifstream(err).rdbuf();
    r.out = so.str();
    r.err = se.str();
    std::system(("rm -rf " + dir).c_str());
    return r;
}

bool have(const std::string & prog) { return tu::file_exists(std::string(LLAMA_BIN_DIR) + "/" + prog); }

std::string model(const std::string & name) { return tu::models_dir() + "/" + name; }

std::string read_file(const std::string & path) {
    std::stringstream ss;
    ss << std::ifstream(path).rdbuf();
    return ss.str();
}

std::string lstrip(const std::string & s) {
    size_t i = 0;
    while (i < s.size() && isspace((unsigned char) s[i])) i++;
    return s.substr(i);
}

std::vector<std::string> words(const std::string & s) {
    std::vector<std::string> w;
    std::istringstream in(s);
    std::string x;
    while (in >> x) w.push_back(x);
    return w;
}

#define REQUIRE_PROG(p) do { if (!have(p)) GTEST_SKIP() << p " was not built"; } while (0)

}  // namespace

TEST(Cli, GreedyStories260KMatchesLlama2c) {
    REQUIRE_PROG("llama-cli");
    TU_REQUIRE_FILE(model("stories260K.gguf"));
    const std::string ref_path = tu::shared_dir() + "/reference/stories260K-greedy.txt";
    TU_REQUIRE_FILE(ref_path);
    const run_result r = run("llama-cli", "-m " + model("stories260K.gguf") + " -n 256 --temp 0 -t 2");
    ASSERT_EQ(r.status, 0) << r.err;
    // Same words in the same order, leading white space aside.
    const std::vector<std::string> got = words(lstrip(r.out)), want = words(read_file(ref_path));
    ASSERT_GE(got.size(), want.size()) << r.out;
    for (size_t i = 0; i < want.size(); i++) ASSERT_EQ(got[i], want[i]) << "word " << i << "\n" << r.out;
    // Logs and timings go to standard error only.
    EXPECT_NE(r.err.find("eval"), std::string::npos) << r.err;
}

TEST(Cli, ContextShiftKeepsGenerating) {
    REQUIRE_PROG("llama-cli");
    TU_REQUIRE_FILE(model("stories260K.gguf"));
    // A 32-token context, 150 tokens generated: the context shifts several times.
    const run_result r = run("llama-cli", "-m " + model("stories260K.gguf") + " -c 32 -n 150 --temp 0 -p 'Once upon a time'");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("context full"), std::string::npos) << r.err;
    EXPECT_GT(words(r.out).size(), 40u) << r.out;
    EXPECT_EQ(r.out.rfind("Once upon a time", 0), 0u) << "the prompt comes first on standard output";
}

TEST(Cli, PromptLongerThanTheContextIsNotRefused) {
    REQUIRE_PROG("llama-cli");
    TU_REQUIRE_FILE(model("stories260K.gguf"));
    std::string prompt;
    for (int i = 0; i < 30; i++) prompt += "The cat sat on the mat. ";
    const run_result r = run("llama-cli", "-m " + model("stories260K.gguf") + " -c 48 -b 16 -n 10 --temp 0 -p '" + prompt + "'");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out.rfind(prompt, 0), 0u);
    EXPECT_GT(r.out.size(), prompt.size());
}

// Prompts of 1x to 20x the context, with the default batch (larger than the context) and small
// ones: every shift drops half of the context after the kept tokens, so all go through and the
// generation follows (the bug was a halving of what was left until nothing could be dropped).
TEST(Cli, PromptsUpToTwentyContextsGoThroughWithAnyBatch) {
    REQUIRE_PROG("llama-cli");
    TU_REQUIRE_FILE(model("stories260K.gguf"));
    const std::string sentence = "Lily saw a big red ball in the park. ";  // 10 tokens
    for (int n_ctx : {64, 128}) {
        for (int times : {1, 3, 8, 20}) {
            std::string prompt;
            while ((int) prompt.size() / (int) sentence.size() * 10 < times * n_ctx) prompt += sentence;
            for (const char * batch : {"", " -b 16", " -b 7"}) {
                const std::string args = "-m " + model("stories260K.gguf") + " -c " + std::to_string(n_ctx) + batch +
                                         " --keep 4 -n 30 --temp 0 -p '" + prompt + "'";
                const run_result r = run("llama-cli", args);
                ASSERT_EQ(r.status, 0) << args << "\n" << r.err;
                EXPECT_EQ(r.out.rfind(prompt, 0), 0u) << args;
                EXPECT_GT(r.out.size(), prompt.size()) << "nothing generated: " << args;
            }
        }
    }
}

// More threads than cores: a warning, and the cores are used.
TEST(Cli, ThreadsAboveTheCoresAreCapped) {
    REQUIRE_PROG("llama-cli");
    TU_REQUIRE_FILE(model("stories260K.gguf"));
    const run_result r = run("llama-cli", "-m " + model("stories260K.gguf") + " -t 1000 -n 8 --temp 0 -p 'Once'");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("1000 threads asked for"), std::string::npos) << r.err;
}

TEST(Cli, SeededSamplingIsReproducible) {
    REQUIRE_PROG("llama-cli");
    TU_REQUIRE_FILE(model("stories260K.gguf"));
    const std::string args = "-m " + model("stories260K.gguf") + " -n 40 -s 1234 --temp 0.9 --top-k 20 --top-p 0.9 --min-p 0.02 "
                             "--repeat-penalty 1.1 --repeat-last-n 32 -p 'One day'";
    const run_result a = run("llama-cli", args), b = run("llama-cli", args);
    ASSERT_EQ(a.status, 0) << a.err;
    EXPECT_EQ(a.out, b.out);
}

TEST(Cli, ChatModeAnswersAndEndsAtEndOfInput) {
    REQUIRE_PROG("llama-cli");
    TU_REQUIRE_FILE(model("stories260K.gguf"));
    const run_result r = run("llama-cli", "-m " + model("stories260K.gguf") + " -cnv -n 20 --temp 0", "Hello\nTell me a story\n");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_GE(std::count(r.out.begin(), r.out.end(), '>'), 2) << r.out;
}

TEST(Cli, BadInputGetsAMessageAndNonZeroExit) {
    REQUIRE_PROG("llama-cli");
    const std::string m = model("stories260K.gguf");
    char tmpl[] = "/tmp/test-cli-bad-XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    std::ofstream(dir + "/garbage.gguf") << "this is not a model";
    if (tu::file_exists(m)) std::system(("head -c 100000 " + m + " > " + dir + "/truncated.gguf").c_str());
    struct bad { std::string args, expect; };
    const std::vector<bad> cases = {
        {"-m " + dir + "/missing.gguf -n 5", "cannot load"},
        {"-m " + dir + "/garbage.gguf -n 5", "cannot load"},
        {"-m " + dir + "/truncated.gguf -n 5", "cannot load"},
        {"-m " + m + " -n -5", "-n"},
        {"-m " + m + " --temp abc", "--temp"},
        {"-m " + m + " --frobnicate", "unknown option"},
        {"-m " + m + " -c", "missing value"},
        {"-n 5", "no model"},
    };
    for (const bad & c : cases) {
        const run_result r = run("llama-cli", c.args);
        EXPECT_NE(r.status, 0) << c.args;
        EXPECT_LT(r.status, 128) << "crashed: " << c.args << "\n" << r.err;
        EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << "\n" << r.err;
        EXPECT_TRUE(r.out.empty()) << c.args << ": " << r.out;
    }
    std::system(("rm -rf " + dir).c_str());
}

TEST(Tokenize, IdsOnTheLastLine) {
    REQUIRE_PROG("llama-tokenize");
    TU_REQUIRE_FILE(model("stories260K.gguf"));
    const run_result r = run("llama-tokenize", "-m " + model("stories260K.gguf") + " -p 'Once upon a time' --ids");
    ASSERT_EQ(r.status, 0) << r.err;
    // The same ids as the reference logits file's prompt.
    std::ifstream f(tu::shared_dir() + "/reference/logits/stories260K.p1.logits", std::ios::binary);
    int32_t n = 0, nv = 0;
    f.read((char *) &n, 4);
    f.read((char *) &nv, 4);
    std::vector<int32_t> ids((size_t) n);
    f.read((char *) ids.data(), 4 * n);
    std::string want = "[";
    for (int i = 0; i < n; i++) want += (i ? ", " : "") + std::to_string(ids[(size_t) i]);
    want += "]";
    std::string last = r.out;
    while (!last.empty() && last.back() == '\n') last.pop_back();
    last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
    EXPECT_EQ(last, want);
    const run_result nb = run("llama-tokenize", "-m " + model("stories260K.gguf") + " -p 'Once upon a time' --ids --no-bos");
    EXPECT_EQ(nb.out.find("[1,"), std::string::npos) << nb.out;
    EXPECT_NE(run("llama-tokenize", "-m " + model("stories260K.gguf")).status, 0);
}

TEST(Cli, CtrlCStopsGenerationAndPrintsTimings) {
    REQUIRE_PROG("llama-cli");
    TU_REQUIRE_FILE(model("stories260K.gguf"));
    char tmpl[] = "/tmp/test-cli-sig-XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    // Endless generation (-n -1, the context shifting forever); SIGINT once output has started.
    const std::string script =
        std::string(LLAMA_EMULATOR) + " " + LLAMA_BIN_DIR + "/llama-cli -m " + model("stories260K.gguf") +
        " -n -1 -c 64 -s 1 -p 'Once upon a time' > " + dir + "/out 2> " + dir + "/err & pid=$!; "
        "for i in $(seq 1 600); do [ -s " + dir + "/out ] && break; sleep 0.1; done; sleep 0.3; "
        "kill -INT $pid; wait $pid; echo $? > " + dir + "/rc\n";
    std::ofstream(dir + "/run.sh") << script;
    ASSERT_EQ(std::system(("sh " + dir + "/run.sh").c_str()), 0);
    EXPECT_EQ(read_file(dir + "/rc"), "0\n");
    const std::string err = read_file(dir + "/err");
    EXPECT_NE(err.find("eval time"), std::string::npos) << err;
    EXPECT_EQ(read_file(dir + "/out").rfind("Once upon a time", 0), 0u);
    std::system(("rm -rf " + dir).c_str());
}

// Repacking is on by default where the build has a repacked kernel, and --no-repack / --no-mmap
// are accepted.
TEST(Cli, RepackAndMmapFlags) {
    REQUIRE_PROG("llama-cli");
    const std::string m = tu::models_dir() + "/ktest/ktest-Q4_0.gguf";
    TU_REQUIRE_FILE(m);
    const bool repacks = ggml_cpu_has_avx2() || ggml_cpu_has_avx512_vnni() || ggml_cpu_has_dotprod();
    const run_result def = run("llama-cli", "-m " + m + " -n 8 --temp 0 -p 'Once upon'");
    ASSERT_EQ(def.status, 0) << def.err;
    EXPECT_EQ(def.err.find("repacked") != std::string::npos, repacks) << def.err;
    for (const char * flags : { "--no-repack", "--no-mmap", "--no-repack --no-mmap" }) {
        const run_result r = run("llama-cli", "-m " + m + " -n 8 --temp 0 -p 'Once upon' " + flags);
        ASSERT_EQ(r.status, 0) << flags << "\n" << r.err;
        EXPECT_EQ(r.err.find("repacked") != std::string::npos, repacks && !strstr(flags, "--no-repack")) << flags << "\n" << r.err;
        EXPECT_EQ(r.out.rfind("Once upon", 0), 0u) << r.out;
    }
}
