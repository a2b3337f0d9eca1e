// The programs as a user runs them: llama-cli (greedy text against llama2.c's reference, context
// shift, long prompts, chat, bad input, llama.cpp's flags), llama-simple and llama-tokenize.
#include "test-util.h"

#include <algorithm>
#include <fstream>
#include <regex>
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

// The number of single-token evaluations in the timings ("eval time = ... / N runs"), -1 if absent.
int eval_runs(const std::string & err) {
    std::smatch m;
    if (!std::regex_search(err, m, std::regex("eval time = [^/]*/ *([0-9]+) runs"))) return -1;
    return std::stoi(m[1].str());
}

size_t count(const std::string & s, const std::string & what) {
    size_t n = 0;
    for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) n++;
    return n;
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

// Seeded sampling draws llama.cpp's tokens: llama.cpp build 4747's llama-cli on the same model, seed
// and sampling flags (tests/data/sampling-reference/llama-cli-seeded.txt: seed, flags, its text
// with newlines as \r, recorded with `llama-cli -m stories260K.gguf -p "Once upon a time" -n 40
// -s SEED FLAGS -no-cnv --no-warmup`; its leading space dropped).
TEST(Cli, SeededSamplingMatchesLlamaCpp) {
    REQUIRE_PROG("llama-cli");
    TU_REQUIRE_FILE(model("stories260K.gguf"));
    std::ifstream in(std::string(LLAMA_TEST_DATA_DIR) + "/sampling-reference/llama-cli-seeded.txt");
    ASSERT_TRUE(in.good());
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
        const size_t t1 = line.find('\t'), t2 = line.find('\t', t1 + 1);
        const std::string seed = line.substr(0, t1), flags = line.substr(t1 + 1, t2 - t1 - 1);
        std::string want = line.substr(t2 + 1);
        std::replace(want.begin(), want.end(), '\r', '\n');
        SCOPED_TRACE("-s " + seed + " " + flags);
        const run_result r = run("llama-cli", "-m " + model("stories260K.gguf") + " -p 'Once upon a time' -n 40 -s " + seed + " " +
                                                  flags + " -no-cnv");
        ASSERT_EQ(r.status, 0) << r.err;
        std::string got = lstrip(r.out);
        while (!got.empty() && got.back() == '\n') got.pop_back();
        while (!want.empty() && want.back() == '\n') want.pop_back();
        EXPECT_EQ(got, want);
        n++;
    }
    EXPECT_EQ(n, 8);
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
        {"-m " + m + " --mirostat 3", "--mirostat"},
        {"-m " + m + " --mirostat-lr abc", "--mirostat-lr"},
        {"-m " + m + " -ctk q9", "-ctk"},
        {"-m " + m + " --cache-type-v q4_K", "--cache-type-v"},
        {"-m " + m + " -ctv", "missing value"},
        {"-m " + m + " -ub 0", "-ub"},
        {"-m " + m + " -s -2", "-s"},
        {"-m " + m + " -s 12x", "-s"},
        {"-m " + m + " -ngl many", "-ngl"},
        {"-m " + m + " -tb 0", "-tb"},
        {"-m " + m + " --numa everywhere", "--numa"},
        {"-m " + m + " -sm diagonal", "-sm"},
        {"-m " + m + " -r", "missing value"},
        {"-m " + m + " --presence-penalty", "missing value"},
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

// ---- llama.cpp's flags ----------------------------------------------------------------------

TEST(CliFlags, VersionPrintsALineAndExits) {
    REQUIRE_PROG("llama-cli");
    const run_result r = run("llama-cli", "--version");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out.rfind("llama-cli (llama-engine) version ", 0), 0u) << r.out;
    EXPECT_NE(r.out.find("built with"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(ggml_cpu_isa_name()), std::string::npos) << r.out;
}

TEST(CliFlags, SeedMinusOneIsRandom) {
    REQUIRE_PROG("llama-cli");
    TU_REQUIRE_FILE(model("stories260K.gguf"));
    for (const char * seed : {"-s -1", "--seed -1"}) {
        const run_result r = run("llama-cli", "-m " + model("stories260K.gguf") + " " + seed + " -n 8 -p 'Once upon a time'");
        ASSERT_EQ(r.status, 0) << seed << "\n" << r.err;
        EXPECT_EQ(r.out.rfind("Once upon a time", 0), 0u) << r.out;
        EXPECT_NE(r.err.find("sampler seed: "), std::string::npos) << r.err;
    }
}

// Escapes are processed by default (as llama.cpp), -e keeps that, --no-escape does not.
TEST(CliFlags, EscapesInThePrompt) {
    REQUIRE_PROG("llama-cli");
    TU_REQUIRE_FILE(model("stories260K.gguf"));
    const std::string base = "-m " + model("stories260K.gguf") + " -n 4 --temp 0 -p 'a\\nb\\t\\x41\\q'";
    for (const char * flag : {"", " -e", " --escape"}) {
        const run_result r = run("llama-cli", base + flag);
        ASSERT_EQ(r.status, 0) << r.err;
        EXPECT_EQ(r.out.rfind("a\nb\tA\\q", 0), 0u) << flag << ": " << r.out;
    }
    const run_result raw = run("llama-cli", base + " --no-escape");
    ASSERT_EQ(raw.status, 0) << raw.err;
    EXPECT_EQ(raw.out.rfind("a\\nb\\t\\x41\\q", 0), 0u) << raw.out;
}

TEST(CliFlags, NoDisplayPromptPrintsOnlyTheGeneration) {
    REQUIRE_PROG("llama-cli");
    TU_REQUIRE_FILE(model("stories260K.gguf"));
    const std::string prompt = "Once upon a time";
    const std::string args = "-m " + model("stories260K.gguf") + " -n 20 --temp 0 -p '" + prompt + "'";
    const run_result with = run("llama-cli", args), without = run("llama-cli", args + " --no-display-prompt");
    ASSERT_EQ(with.status, 0) << with.err;
    ASSERT_EQ(without.status, 0) << without.err;
    EXPECT_NE(without.out.rfind(prompt, 0), 0u) << without.out;
    EXPECT_FALSE(lstrip(without.out).empty());
    EXPECT_EQ(prompt + without.out, with.out);
}

// --color wraps the prompt in ANSI colors; --log-disable leaves standard error empty on success;
// -v adds the CLI's debug lines.
TEST(CliFlags, ColorLogDisableVerbose) {
    REQUIRE_PROG("llama-cli");
    TU_REQUIRE_FILE(model("stories260K.gguf"));
    const std::string args = "-m " + model("stories260K.gguf") + " -n 8 --temp 0 -p 'Once upon a time'";
    const run_result color = run("llama-cli", args + " --color");
    ASSERT_EQ(color.status, 0) << color.err;
    EXPECT_EQ(color.out.rfind("\x1b[33mOnce upon a time\x1b[0m", 0), 0u) << color.out;
    const run_result quiet = run("llama-cli", args + " --log-disable -ngl 99");
    ASSERT_EQ(quiet.status, 0) << quiet.err;
    EXPECT_EQ(quiet.err, "");
    EXPECT_EQ(quiet.out.rfind("Once upon a time", 0), 0u) << quiet.out;
    const run_result verbose = run("llama-cli", args + " -v");
    ASSERT_EQ(verbose.status, 0) << verbose.err;
    EXPECT_NE(verbose.err.find("llama-cli: prompt: "), std::string::npos) << verbose.err;
    EXPECT_NE(verbose.err.find("sampler chain: logits -> penalties -> greedy"), std::string::npos) << verbose.err;
    EXPECT_EQ(verbose.out, quiet.out);
}

// A model that ends its story at about 108 tokens at temperature 0 goes on to exactly 200 with
// --ignore-eos (its end-of-generation token is never sampled).
TEST(CliFlags, IgnoreEosGeneratesAllTokens) {
    REQUIRE_PROG("llama-cli");
    const std::string m = model("TinyStories-656K-Q8_0.gguf");
    TU_REQUIRE_FILE(m);
    const std::string args = "-m " + m + " -n 200 --temp 0 -p 'Once upon a time'";
    const run_result stops = run("llama-cli", args);
    ASSERT_EQ(stops.status, 0) << stops.err;
    const int n_stops = eval_runs(stops.err);
    ASSERT_GT(n_stops, 0) << stops.err;
    ASSERT_LT(n_stops, 200) << "the model no longer stops early: pick another prompt";
    const run_result r = run("llama-cli", args + " --ignore-eos");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(eval_runs(r.err), 200) << r.err;
    EXPECT_GT(r.out.size(), stops.out.size());
    // The same text up to where the first run ended (its last newline aside).
    EXPECT_EQ(r.out.substr(0, stops.out.size() - 1), stops.out.substr(0, stops.out.size() - 1));
}

// -r alone stops at the reverse prompt; with -i the program then reads a line, appends it and
// goes on, until the end of input (exit 0).
TEST(CliFlags, InteractiveReversePrompt) {
    REQUIRE_PROG("llama-cli");
    TU_REQUIRE_FILE(model("stories260K.gguf"));
    const std::string args = "-m " + model("stories260K.gguf") + " -n 60 --temp 0 -p 'Once upon a time'";
    const run_result plain = run("llama-cli", args);
    const run_result stop = run("llama-cli", args + " -r .");
    ASSERT_EQ(plain.status, 0) << plain.err;
    ASSERT_EQ(stop.status, 0) << stop.err;
    // Stopped right after the first '.'.
    const size_t dot = plain.out.find('.');
    ASSERT_NE(dot, std::string::npos) << plain.out;
    EXPECT_EQ(stop.out, plain.out.substr(0, dot + 1) + "\n");

    const run_result inter = run("llama-cli", args + " -i -r . -v", "Hello\n");
    ASSERT_EQ(inter.status, 0) << inter.err;
    const std::string first = plain.out.substr(0, dot + 1);
    ASSERT_EQ(inter.out.rfind(first, 0), 0u) << inter.out;
    // It went on after the input, with another text than without it.
    const std::string after = inter.out.substr(first.size());
    EXPECT_GT(lstrip(after).size(), 3u) << inter.out;
    EXPECT_NE(after, plain.out.substr(first.size(), after.size())) << inter.out;
    // Two turns: after the first reverse prompt (the line read), after the second (end of input).
    EXPECT_EQ(count(inter.err, "waiting for input"), 2u) << inter.err;
    EXPECT_NE(inter.err.find("end of input"), std::string::npos) << inter.err;
    EXPECT_NE(inter.err.find("eval time"), std::string::npos) << "timings at the end";

    // -if reads before generating: no input, nothing generated.
    const run_result first_in = run("llama-cli", args + " -if");
    ASSERT_EQ(first_in.status, 0) << first_in.err;
    EXPECT_EQ(first_in.out, "Once upon a time\n");
}

TEST(CliFlags, MirostatIsSeededAndNotGreedy) {
    REQUIRE_PROG("llama-cli");
    TU_REQUIRE_FILE(model("stories260K.gguf"));
    const std::string base = "-m " + model("stories260K.gguf") + " -n 40 -p 'Once upon a time'";
    const run_result greedy = run("llama-cli", base + " --temp 0");
    ASSERT_EQ(greedy.status, 0) << greedy.err;
    for (const char * m : {"1", "2"}) {
        const std::string args = base + " -s 7 --mirostat " + m + " --mirostat-ent 5.0 --mirostat-lr 0.1";
        const run_result a = run("llama-cli", args), b = run("llama-cli", args);
        ASSERT_EQ(a.status, 0) << a.err;
        EXPECT_NE(a.err.find(std::string("-> temp -> mirostat") + (m[0] == '2' ? "-v2" : "")), std::string::npos) << a.err;
        EXPECT_EQ(a.out, b.out) << "mirostat " << m;
        EXPECT_NE(a.out, greedy.out) << "mirostat " << m;
        EXPECT_EQ(a.out.rfind("Once upon a time", 0), 0u);
    }
}

// Penalties, cache types, micro-batches and GPU flags are accepted.
// Flags of llama.cpp's that scripts pass: -tb (threads of prompts), --mlock, --numa (noted),
// --no-warmup and --simple-io (nothing to turn off here), --verbose-prompt, --no-perf.
TEST(CliFlags, LlamaCppThreadMemoryAndLogFlagsAccepted) {
    REQUIRE_PROG("llama-cli");
    TU_REQUIRE_FILE(model("stories260K.gguf"));
    const std::string base = "-m " + model("stories260K.gguf") + " -n 12 --temp 0 -p 'Once upon a time'";
    const run_result ref = run("llama-cli", base);
    ASSERT_EQ(ref.status, 0) << ref.err;
    EXPECT_NE(ref.err.find("llama_perf_context_print"), std::string::npos) << ref.err;
    const run_result r = run("llama-cli", base + " -t 2 -tb 1 --mlock --numa distribute --no-warmup --simple-io --verbose-prompt --no-perf");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, ref.out);  // the same greedy text
    EXPECT_NE(r.err.find("n_threads 2/1,"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--numa distribute noted"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("main: number of tokens in prompt = 5"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("     1 -> '<s>'"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("llama_perf_context_print"), std::string::npos) << r.err;
    const run_result same = run("llama-cli", base + " -t 2 -tb -1");
    ASSERT_EQ(same.status, 0) << same.err;
    EXPECT_NE(same.err.find("n_threads 2/2,"), std::string::npos) << same.err;
}

TEST(CliFlags, CacheBatchPenaltyAndGpuFlagsAccepted) {
    REQUIRE_PROG("llama-cli");
    TU_REQUIRE_FILE(model("stories260K.gguf"));
    const std::string base = "-m " + model("stories260K.gguf") + " -n 12 --temp 0 -p 'Once upon a time'";
    const run_result ref = run("llama-cli", base);
    ASSERT_EQ(ref.status, 0) << ref.err;
    const run_result r = run("llama-cli", base + " -ctk f32 -ctv f16 -b 3 -ub 2 --presence-penalty 0 --frequency-penalty 0");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("n_batch 3, n_ubatch 2,"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("K f32, V f16"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, ref.out);  // the same greedy text
    // Penalised, the text leaves the greedy one within 30 tokens.
    const std::string longer = "-m " + model("stories260K.gguf") + " -n 30 --temp 0 -p 'Once upon a time'";
    const run_result unpen = run("llama-cli", longer);
    for (const char * flags : {" --presence-penalty 1.5", " --frequency-penalty 1.0"}) {
        const run_result pen = run("llama-cli", longer + flags);
        ASSERT_EQ(pen.status, 0) << pen.err;
        EXPECT_NE(pen.out, unpen.out) << flags;
    }
    const run_result gpu = run("llama-cli", base + " -ngl 99 -sm layer -mg 0 -nkvo");
    ASSERT_EQ(gpu.status, 0) << gpu.err;
    // Noted and ignored without a GPU; with one, the layers go there and the text stays.
    const bool noted = gpu.err.find("no usable GPU") != std::string::npos;
    EXPECT_TRUE(noted || gpu.err.find("layers to") != std::string::npos) << gpu.err;
    EXPECT_EQ(gpu.out, ref.out);
    // -fa bare (llama.cpp's old form) or with a value (its later on|off|auto, 1|0|-1)
    for (const auto & fa : std::vector<std::pair<std::string, int>>{ { " -fa", 1 }, { " -fa on", 1 }, { " -fa 1", 1 },
                                                                     { " --flash-attn off", 0 }, { " -fa auto", 0 }, { " -fa -1", 0 } }) {
        const run_result f = run("llama-cli", "-m " + model("stories260K.gguf") + fa.first + " -n 12 --temp 0 -p 'Once upon a time'");
        ASSERT_EQ(f.status, 0) << fa.first << "\n" << f.err;
        EXPECT_NE(f.err.find("flash_attn " + std::to_string(fa.second) + ","), std::string::npos) << fa.first << "\n" << f.err;
        EXPECT_EQ(f.out, ref.out) << fa.first;
    }
    const std::string k = tu::models_dir() + "/ktest/ktest-Q4_0.gguf";  // head size 32: a q8_0 cache
    if (tu::file_exists(k)) {
        const run_result q = run("llama-cli", "-m " + k + " -n 4 --temp 0 -p 'Once' -ctk q8_0 -ctv q8_0");
        ASSERT_EQ(q.status, 0) << q.err;
        EXPECT_NE(q.err.find("K q8_0, V q8_0"), std::string::npos) << q.err;
    }
}

// -sys is the system message, -p the first user message (answered before any input is read);
// a model without a chat template gets ChatML, with a message.
TEST(CliFlags, ChatSystemPromptAndTemplateFallback) {
    REQUIRE_PROG("llama-cli");
    TU_REQUIRE_FILE(model("stories260K.gguf"));
    const run_result r = run("llama-cli", "-m " + model("stories260K.gguf") + " -cnv -sys 'Be brief.' -p 'Hi there' -n 10 --temp 0 -no-cnv -cnv");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("no chat template: using chatml"), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("> Hi there\n"), std::string::npos) << r.out;
    EXPECT_GT(r.out.size(), std::string("\n> Hi there\n\n> \n").size()) << "an answer: " << r.out;
}

TEST(Simple, TakesLlamaCppsArguments) {
    REQUIRE_PROG("llama-simple");
    TU_REQUIRE_FILE(model("stories260K.gguf"));
    const run_result r = run("llama-simple", "-m " + model("stories260K.gguf") + " -n 8");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out.rfind("Hello my name is", 0), 0u) << r.out;
    EXPECT_GT(words(r.out).size(), 5u) << r.out;
    const run_result p = run("llama-simple", "-m " + model("stories260K.gguf") + " -n 8 Once upon a time");
    ASSERT_EQ(p.status, 0) << p.err;
    EXPECT_EQ(p.out.rfind("Once upon a time,", 0), 0u) << p.out;
    EXPECT_NE(run("llama-simple", model("stories260K.gguf")).status, 0);  // no -m: usage
}
