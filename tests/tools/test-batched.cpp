// llama-batched, llama-batched-bench and llama-parallel as a user runs them on the smallest model:
// the texts llama.cpp's programs print for the same flags (recorded in
// tests/data/batched-reference), llama-batched-bench's table and JSON lines, and their flags.
#include "test-util.h"

#include <fstream>
#include <regex>
#include <sstream>

namespace {

struct run_result {
    int status = -1;
    std::string out;  // standard output
    std::string err;  // standard error
};

run_result run(const std::string & prog, const std::string & args) {
    tu::TempDir dir;
    const std::string out = dir.path + "/out", err = dir.path + "/err";
    const std::string cmd = std::string(LLAMA_EMULATOR) + " " + LLAMA_BIN_DIR + "/" + prog + " " + args + " > " + out + " 2> " + err +
                            " < /dev/null";
    const int st = std::system(cmd.c_str());
    run_result r;
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    std::stringstream so, se;
    so << std::ifstream(out).rdbuf();
    se << std::ifstream(err).rdbuf();
    r.out = so.str();
    r.err = se.str();
    return r;
}

std::string model() { return tu::models_dir() + "/stories260K.gguf"; }

std::string reference(const std::string & name) {
    std::stringstream ss;
    ss << std::ifstream(std::string(LLAMA_TEST_DATA_DIR) + "/batched-reference/" + name).rdbuf();
    return ss.str();
}

std::vector<std::string> lines(const std::string & s) {
    std::vector<std::string> v;
    std::istringstream in(s);
    for (std::string l; std::getline(in, l);) v.push_back(l);
    return v;
}

}  // namespace

TEST(Batched, GreedyTextIsLlamaCpps) {
    TU_REQUIRE_FILE(model());
    const run_result r = run("llama-batched", "-m " + model() + " -p 'Once upon a time' -n 32 -np 4 --temp 0 -t 1");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, reference("batched-greedy.txt"));
    EXPECT_NE(r.err.find("main: n_predict = 32, n_ctx = "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("main: stream 3 finished at n_cur = 32"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("main: decoded 108 tokens in "), std::string::npos) << r.err;
}

TEST(Batched, SeededSamplingIsLlamaCpps) {
    TU_REQUIRE_FILE(model());
    const run_result r = run("llama-batched", "-m " + model() + " -p 'Lily and Tom' -n 24 -np 3 -s 42 -t 1");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, reference("batched-seed42.txt"));
}

TEST(Batched, OneSequencePrintsAsItGoesAndBadLengthsAreRefused) {
    TU_REQUIRE_FILE(model());
    const run_result one = run("llama-batched", "-m " + model() + " -p 'Once upon a time' -n 32 --temp 0 -t 1");
    ASSERT_EQ(one.status, 0) << one.err;
    // the prompt's tokens, then the continuation on the same line (sequence 0 of the reference)
    EXPECT_EQ(one.out, "\n<s> Once upon a time, there was a little girl named Lily. She loved to play outside in the park.\n\n");
    const run_result shorter = run("llama-batched", "-m " + model() + " -p 'Once upon a time' -n 3 -t 1");
    EXPECT_EQ(shorter.status, 1);
    EXPECT_NE(shorter.err.find("prompt included"), std::string::npos) << shorter.err;
    const run_result refused = run("llama-batched", "-m " + model() + " -np 0");
    EXPECT_EQ(refused.status, 1);
    EXPECT_NE(refused.err.find("-np"), std::string::npos) << refused.err;
}

TEST(Parallel, GreedyResponsesAreLlamaCpps) {
    TU_REQUIRE_FILE(model());
    const run_result r = run("llama-parallel", "-m " + model() + " -np 3 -ns 6 -n 64 --temp 0 -c 1024 -t 1");
    ASSERT_EQ(r.status, 0) << r.err;
    std::string got;
    for (const std::string & l : lines(r.err)) {
        if (l.rfind("Input: ", 0) == 0 || l.find("Response: ") != std::string::npos) got += l + "\n";
    }
    EXPECT_EQ(got, reference("parallel-greedy.txt"));
    EXPECT_NE(r.err.find("main: n_parallel = 3, n_sequences = 6, cont_batching = 1, system tokens = 747"), std::string::npos);
    EXPECT_NE(r.err.find("Cache misses:             0"), std::string::npos);
    EXPECT_EQ(r.out, "\n\n");
}

TEST(Parallel, QuestionsFromAFileAndNoContinuousBatching) {
    TU_REQUIRE_FILE(model());
    tu::TempDir dir;
    const std::string f = dir.path + "/q.txt";
    std::ofstream(f) << "Who is the cat?\nWhat is a ball?\n";
    const run_result r = run("llama-parallel", "-m " + model() + " -np 2 -ns 4 -n 48 --temp 0 -nocb -f " + f + " -t 1");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("  1 prompt: Who is the cat?"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("  2 prompt: What is a ball?"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("cont_batching = 0"), std::string::npos);
    size_t inputs = 0, started = 0;
    for (const std::string & l : lines(r.err)) {
        inputs += l.rfind("Input:    Who is the cat?", 0) == 0 || l.rfind("Input:    What is a ball?", 0) == 0;
        started += l.find("started decoding") != std::string::npos;
    }
    EXPECT_EQ(inputs, 4u);
    EXPECT_EQ(started, 4u);
    EXPECT_NE(r.err.find("External prompt file: \033[32m" + f), std::string::npos);
}

TEST(BatchedBench, TableRowsAreLlamaCpps) {
    TU_REQUIRE_FILE(model());
    // 8+4 per sequence: B = 16 needs 192 cells > 128, skipped as llama.cpp skips it
    const run_result r = run("llama-batched-bench", "-m " + model() + " -npp 8,16 -ntg 4 -npl 1,2,16 -c 128 -t 1");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("main: n_kv_max = 128, n_batch = 2048, n_ubatch = 512, flash_attn = 0, is_pp_shared = 0, n_gpu_layers = "),
              std::string::npos) << r.out;
    EXPECT_NE(r.out.find("|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |\n"
                         "|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|\n"),
              std::string::npos) << r.out;
    const std::regex row("^\\| +([0-9]+) \\| +([0-9]+) \\| +([0-9]+) \\| +([0-9]+) \\|( +[0-9.]+ \\|){6}$");
    std::vector<std::string> rows;
    for (const std::string & l : lines(r.out)) {
        std::smatch m;
        if (std::regex_match(l, m, row)) rows.push_back(m[1].str() + "," + m[2].str() + "," + m[3].str() + "," + m[4].str());
    }
    EXPECT_EQ(rows, (std::vector<std::string>{"8,4,1,12", "8,4,2,24", "16,4,1,20", "16,4,2,40"}));

    const run_result j = run("llama-batched-bench", "-m " + model() + " -npp 8 -ntg 4 -npl 1,2,64 -pps -c 128 -t 1 --output-format jsonl");
    ASSERT_EQ(j.status, 0) << j.err;
    const std::regex obj("^\\{\"n_kv_max\": 128, \"n_batch\": 2048, \"n_ubatch\": 512, \"flash_attn\": 0, \"is_pp_shared\": 1, "
                         "\"n_gpu_layers\": -?[0-9]+, \"n_threads\": 1, \"n_threads_batch\": 1, \"pp\": 8, \"tg\": 4, \"pl\": ([0-9]+), "
                         "\"n_kv\": ([0-9]+), \"t_pp\": [0-9.]+, \"speed_pp\": [0-9.a-z]+, \"t_tg\": [0-9.]+, \"speed_tg\": [0-9.a-z]+, "
                         "\"t\": [0-9.]+, \"speed\": [0-9.a-z]+\\}$");
    std::vector<std::string> objs;
    for (const std::string & l : lines(j.out)) {
        std::smatch m;
        if (std::regex_match(l, m, obj)) objs.push_back(m[1].str() + "," + m[2].str());
    }
    EXPECT_EQ(objs, (std::vector<std::string>{"1,12", "2,16"}));  // B = 64 shared: 8 + 64 * 4 = 264 > 128 cells: skipped
}

TEST(BatchedBench, FlagsAreChecked) {
    TU_REQUIRE_FILE(model());
    EXPECT_EQ(run("llama-batched-bench", "-m " + model() + " -npp 8,x").status, 1);
    EXPECT_EQ(run("llama-batched-bench", "-m " + model() + " --output-format csv").status, 1);
    const run_result np = run("llama-batched-bench", "-m " + model() + " -npp 4 -ntg 2 -npl 2 -np 3 -c 64 -t 1");
    EXPECT_EQ(np.status, 0) << np.err;
    EXPECT_NE(np.err.find("-np has no effect here"), std::string::npos) << np.err;
    const run_result h = run("llama-batched-bench", "--help");
    EXPECT_EQ(h.status, 0);
    for (const char * f : {"-npp", "-ntg", "-npl", "-pps", "--output-format", "-fa", "-ub"}) {
        EXPECT_NE(h.out.find(f), std::string::npos) << f;
    }
}
