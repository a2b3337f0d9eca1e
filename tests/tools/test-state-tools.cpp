// The programs on saved state: llama-save-load-state (its output against llama.cpp's own program on
// the same model and flags) and llama-cli's --prompt-cache, --prompt-cache-all, --prompt-cache-ro
// (a cached prompt continues as an evaluated one; llama.cpp's session files are taken; bad files
// refused).
#include "test-util.h"

#include <fstream>
#include <iterator>
#include <sstream>

namespace {

bool have(const std::string & prog) { return tu::file_exists(std::string(LLAMA_BIN_DIR) + "/" + prog); }
std::string stories() { return tu::models_dir() + "/stories260K.gguf"; }

// Runs a program of the bin folder in dir: standard output, standard error into *err.
tu::run_result run(const std::string & dir, const std::string & prog, const std::string & args, std::string * err) {
    return tu::run_command("cd '" + dir + "' && " + std::string(LLAMA_EMULATOR) + " " + LLAMA_BIN_DIR + "/" + prog + " " + args +
                               " < /dev/null", err);
}

std::string read_bytes(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

#define REQUIRE(prog)                                                                              \
    do {                                                                                           \
        if (!have(prog)) GTEST_SKIP() << prog << " was not built";                                 \
        if (!tu::file_exists(stories())) GTEST_SKIP() << stories() << " is absent";               \
    } while (0)

// llama.cpp 4747's llama-save-load-state -m stories260K.gguf [-n 24 -s 7 -p "Lily and Tom"]: its
// standard output, and the sizes it reports.
TEST(SaveLoadState, AsLlamaCpp) {
    REQUIRE("llama-save-load-state");
    tu::TempDir dir;
    std::string err;
    tu::run_result r = run(dir.path, "llama-save-load-state", "-m '" + stories() + "'", &err);
    ASSERT_EQ(r.status, 0) << err;
    const std::string run1 = "The quick brown fox would balance his favorite fo";
    EXPECT_EQ(r.output, "\nfirst run: " + run1 + "\n\n\nsecond run: " + run1 + "\n\n\nsingle seq run: " + run1 + "\n");
    for (const char * line : { "main : serialized state into 11341 out of a maximum of 11341 bytes\n",
                               "main : deserialized state from 11341 out of a maximum of 11341 bytes\n", "main : seq 0 copied, 9204 bytes\n",
                               "main : kv cache cleared\n", "main : seq 1 restored, 9204 bytes\n", "main : success\n" }) {
        EXPECT_NE(err.find(line), std::string::npos) << line << err;
    }
    EXPECT_EQ(read_bytes(dir.path + "/dump_state.bin").size(), 11341u);

    r = run(dir.path, "llama-save-load-state", "-m '" + stories() + "' -n 24 -s 7 -p 'Lily and Tom'", &err);
    ASSERT_EQ(r.status, 0) << err;
    const std::string run2 = "Lily and Tom were sad because they wanted to join golff. They";
    EXPECT_EQ(r.output, "\nfirst run: " + run2 + "\n\n\nsecond run: " + run2 + "\n\n\nsingle seq run: " + run2 + "\n");
    EXPECT_NE(err.find("main : success"), std::string::npos) << err;
}

TEST(SaveLoadState, BadArguments) {
    REQUIRE("llama-save-load-state");
    tu::TempDir dir;
    std::string err;
    EXPECT_NE(run(dir.path, "llama-save-load-state", "", &err).status, 0);
    EXPECT_NE(err.find("no model"), std::string::npos) << err;
    EXPECT_NE(run(dir.path, "llama-save-load-state", "-m '" + dir.path + "/none.gguf'", &err).status, 0);
    EXPECT_NE(run(dir.path, "llama-save-load-state", "-m '" + stories() + "' --bogus", &err).status, 0);
    const tu::run_result h = run(dir.path, "llama-save-load-state", "--help", &err);
    EXPECT_EQ(h.status, 0);
    EXPECT_NE(h.output.find("--seed"), std::string::npos) << h.output;
}

// ---- llama-cli --prompt-cache --------------------------------------------------------------

struct Cli {
    tu::TempDir dir;
    std::string err;
    tu::run_result operator()(const std::string & args) {
        return run(dir.path, "llama-cli", "-m '" + stories() + "' --temp 0 --no-perf " + args, &err);
    }
};

TEST(PromptCache, CachedPromptContinuesAsEvaluated) {
    REQUIRE("llama-cli");
    Cli cli;
    const std::string pc = cli.dir.path + "/pc.bin";
    const tu::run_result plain = cli("-n 24 -p 'Once upon a time'");
    ASSERT_EQ(plain.status, 0) << cli.err;

    // Written after the prompt; then the whole prompt comes from it.
    tu::run_result r = cli("-n 24 -p 'Once upon a time' --prompt-cache '" + pc + "'");
    ASSERT_EQ(r.status, 0) << cli.err;
    EXPECT_EQ(r.output, plain.output);
    EXPECT_NE(cli.err.find("session file does not exist, will create"), std::string::npos) << cli.err;
    const std::string saved = read_bytes(pc);
    ASSERT_GT(saved.size(), 12u);
    EXPECT_EQ(saved.substr(0, 8), std::string("nsgg\x09\0\0\0", 8));  // 'ggsn', version 9
    r = cli("-n 24 -p 'Once upon a time' --prompt-cache '" + pc + "'");
    ASSERT_EQ(r.status, 0) << cli.err;
    EXPECT_EQ(r.output, plain.output);
    EXPECT_NE(cli.err.find("session file has exact match for prompt!"), std::string::npos) << cli.err;
    EXPECT_EQ(read_bytes(pc), saved);  // the whole prompt came from it: not written again

    // A longer prompt starting with it: the rest evaluated, the file updated.
    const tu::run_result plain2 = cli("-n 24 -p 'Once upon a time, there was a big'");
    r = cli("-n 24 -p 'Once upon a time, there was a big' --prompt-cache '" + pc + "'");
    ASSERT_EQ(r.status, 0) << cli.err;
    EXPECT_EQ(r.output, plain2.output);
    EXPECT_NE(cli.err.find("session file matches 5 / 10 tokens of prompt"), std::string::npos) << cli.err;
    const std::string saved2 = read_bytes(pc);
    EXPECT_GT(saved2.size(), saved.size());

    // A shorter one, read only: its last token evaluated again, the file unchanged.
    r = cli("-n 24 -p 'Once upon a time' --prompt-cache '" + pc + "' --prompt-cache-ro");
    ASSERT_EQ(r.status, 0) << cli.err;
    EXPECT_EQ(r.output, plain.output);
    EXPECT_EQ(read_bytes(pc), saved2);

    // A different prompt: evaluated, the file replaced.
    const tu::run_result plain3 = cli("-n 12 -p 'Lily went'");
    r = cli("-n 12 -p 'Lily went' --prompt-cache '" + pc + "'");
    ASSERT_EQ(r.status, 0) << cli.err;
    EXPECT_EQ(r.output, plain3.output);
    EXPECT_NE(cli.err.find("low similarity"), std::string::npos) << cli.err;
}

TEST(PromptCache, AllAndEmptyPrompt) {
    REQUIRE("llama-cli");
    Cli cli;
    const std::string pc = cli.dir.path + "/pc.bin";
    tu::run_result r = cli("-n 12 -p 'Lily went' --prompt-cache '" + pc + "' --prompt-cache-all");
    ASSERT_EQ(r.status, 0) << cli.err;
    EXPECT_NE(cli.err.find("saving final output to session file"), std::string::npos) << cli.err;
    // 4 prompt tokens (BOS, "L", "ily", " went") and 12 generated.
    const std::string all = read_bytes(pc);
    uint32_t n_tokens = 0;
    memcpy(&n_tokens, all.data() + 8, 4);
    EXPECT_EQ(n_tokens, 16u);
    // No prompt: the session's tokens are the prompt (printed), and generation goes on from them.
    const tu::run_result plain = cli("-p 'Lily went' -n 20");
    r = cli("-n 8 --prompt-cache '" + pc + "'");
    ASSERT_EQ(r.status, 0) << cli.err;
    EXPECT_NE(cli.err.find("using full prompt from session file"), std::string::npos) << cli.err;
    EXPECT_EQ(r.output, " " + plain.output);  // the first piece's space (the prompt's is dropped by the tokenizer)
    // Not in interactive mode.
    EXPECT_NE(cli("-i --prompt-cache '" + pc + "' --prompt-cache-all").status, 0);
    EXPECT_NE(cli.err.find("not supported in interactive mode"), std::string::npos) << cli.err;
}

TEST(PromptCache, LlamaCppSessionFile) {
    REQUIRE("llama-cli");
    Cli cli;
    // Written by llama.cpp's library after this prompt (tests/data/state-reference/gen.cpp).
    const std::string pc = cli.dir.path + "/pc.bin";
    const std::string ref = read_bytes(std::string(LLAMA_TEST_DATA_DIR) + "/state-reference/session-1seq.bin");
    ASSERT_FALSE(ref.empty());
    std::ofstream(pc, std::ios::binary) << ref;
    const std::string prompt = "-n 24 -p 'Once upon a time, there was a little'";
    const tu::run_result plain = cli(prompt);
    const tu::run_result r = cli(prompt + " --prompt-cache '" + pc + "'");
    ASSERT_EQ(r.status, 0) << cli.err;
    EXPECT_NE(cli.err.find("exact match"), std::string::npos) << cli.err;
    EXPECT_EQ(r.output, plain.output);
}

TEST(PromptCache, BadFileIsRefused) {
    REQUIRE("llama-cli");
    Cli cli;
    const std::string pc = cli.dir.path + "/pc.bin";
    std::ofstream(pc, std::ios::binary) << "not a session file at all";
    EXPECT_EQ(cli("-n 4 -p 'Hi' --prompt-cache '" + pc + "'").status, 1);
    EXPECT_NE(cli.err.find("failed to load session file"), std::string::npos) << cli.err;
    EXPECT_EQ(read_bytes(pc), "not a session file at all");
    // An empty file starts a new session.
    std::ofstream(pc, std::ios::binary).close();
    EXPECT_EQ(cli("-n 4 -p 'Hi' --prompt-cache '" + pc + "'").status, 0) << cli.err;
    EXPECT_NE(cli.err.find("The session file is empty"), std::string::npos) << cli.err;
    EXPECT_GT(read_bytes(pc).size(), 12u);
}

}  // namespace
