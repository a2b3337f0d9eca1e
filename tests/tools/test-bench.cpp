// llama-bench as a user runs it on the smallest model: llama.cpp's table, csv and json outputs,
// pg and depth tests, the ceiling column, and clean refusals of bad command lines.
#include "test-util.h"
#include "gguf.h"

#include <cstring>

#include <fstream>
#include <regex>
#include <sstream>

namespace {

struct run_result {
    int status = -1;
    std::string out;  // standard output only
    std::string err;  // standard error
};

// Runs llama-bench (under the emulator of a cross build) with args, already quoted.
run_result run_bench(const std::string & args) {
    tu::TempDir dir;
    const std::string out = dir.path + "/out", err = dir.path + "/err";
    const std::string cmd = std::string(LLAMA_EMULATOR) + " " + LLAMA_BIN_DIR + "/llama-bench " + args + " > " + out +
                            " 2> " + err + " < /dev/null";
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

// The short runs every test starts from: 2 repetitions, 1 thread.
std::string base_args() { return "-m " + model() + " -r 2 -t 1"; }

std::vector<std::string> lines(const std::string & s) {
    std::vector<std::string> v;
    std::istringstream in(s);
    std::string l;
    while (std::getline(in, l)) {
        if (!l.empty()) v.push_back(l);
    }
    return v;
}

// A markdown row whose test column is `test` and whose t/s is "number ± number".
bool has_md_row(const std::string & out, const std::string & test) {
    const std::regex row("\\| +" + std::regex_replace(test, std::regex("[+]"), "\\+") +
                         " \\| +[0-9]+\\.[0-9]{2} ± [0-9]+\\.[0-9]{2} \\|");
    for (const std::string & l : lines(out)) {
        if (std::regex_search(l, row)) return true;
    }
    return false;
}

size_t count(const std::string & s, const std::string & what) {
    size_t n = 0;
    for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) n++;
    return n;
}

#define REQUIRE_BENCH()                                                                                           \
    do {                                                                                                          \
        if (!tu::file_exists(std::string(LLAMA_BIN_DIR) + "/llama-bench")) GTEST_SKIP() << "llama-bench was not built"; \
        TU_REQUIRE_FILE(model());                                                                                 \
    } while (0)

}  // namespace

TEST(Bench, MarkdownTableLikeLlamaCpp) {
    REQUIRE_BENCH();
    const run_result r = run_bench(base_args() + " -p 16 -n 4");
    ASSERT_EQ(r.status, 0) << r.err;
    const std::vector<std::string> l = lines(r.out);
    ASSERT_GE(l.size(), 4u) << r.out;
    EXPECT_TRUE(std::regex_search(l[0], std::regex("^\\| model +\\| +size \\| +params \\| backend +\\| threads \\| +test \\| +t/s \\|$")))
        << l[0];
    EXPECT_EQ(l[1].rfind("| ---", 0), 0u) << l[1];
    EXPECT_TRUE(has_md_row(r.out, "pp16")) << r.out;
    EXPECT_TRUE(has_md_row(r.out, "tg4")) << r.out;
    EXPECT_NE(r.out.find("| CPU "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" MiB |"), std::string::npos) << r.out;
    EXPECT_TRUE(r.err.empty()) << "info logs are silent without -v: " << r.err;
}

TEST(Bench, CsvHeaderAndOneRowPerTest) {
    REQUIRE_BENCH();
    const run_result r = run_bench(base_args() + " -p 16 -n 4 -o csv");
    ASSERT_EQ(r.status, 0) << r.err;
    const std::vector<std::string> l = lines(r.out);
    ASSERT_EQ(l.size(), 3u) << r.out;
    for (const char * f : { "model_filename", "model_type", "model_size", "model_n_params", "n_batch", "n_ubatch",
                            "n_threads", "type_k", "type_v", "n_prompt", "n_gen", "n_depth", "test_time", "avg_ns",
                            "stddev_ns", "avg_ts", "stddev_ts" }) {
        EXPECT_NE(("," + l[0] + ",").find(std::string(",") + f + ","), std::string::npos) << f << " in " << l[0];
    }
    EXPECT_EQ(count(l[0], ","), count(l[1], "\",\"")) << "as many values as fields";
    EXPECT_NE(l[1].find("\"16\",\"0\",\"0\""), std::string::npos) << "n_prompt, n_gen, n_depth of pp16: " << l[1];
    EXPECT_NE(l[2].find("\"0\",\"4\",\"0\""), std::string::npos) << "n_prompt, n_gen, n_depth of tg4: " << l[2];
}

TEST(Bench, JsonAndJsonlCarryTheSamples) {
    REQUIRE_BENCH();
    const run_result r = run_bench(base_args() + " -p 16 -n 4 -o json");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out.find_first_not_of(" \n"), r.out.find('['));
    EXPECT_EQ(r.out.find_last_not_of(" \n"), r.out.rfind(']'));
    const std::regex avg("\"avg_ts\": [0-9]+\\.[0-9]+,");
    EXPECT_EQ(std::distance(std::sregex_iterator(r.out.begin(), r.out.end(), avg), std::sregex_iterator()), 2) << r.out;
    const std::regex samples("\"samples_ts\": \\[ [0-9.e+]+, [0-9.e+]+ \\]");
    EXPECT_EQ(std::distance(std::sregex_iterator(r.out.begin(), r.out.end(), samples), std::sregex_iterator()), 2) << r.out;
    EXPECT_NE(r.out.find("\"flash_attn\": false,"), std::string::npos) << r.out;

    const run_result l = run_bench(base_args() + " -p 16 -n 0 -o jsonl");
    ASSERT_EQ(l.status, 0) << l.err;
    ASSERT_EQ(lines(l.out).size(), 1u) << l.out;
    EXPECT_EQ(l.out.front(), '{');
    EXPECT_NE(l.out.find("\"n_prompt\": 16, "), std::string::npos) << l.out;
}

TEST(Bench, PromptThenGenerationAndDepth) {
    REQUIRE_BENCH();
    const run_result pg = run_bench(base_args() + " -p 0 -n 0 -pg 8,4");
    ASSERT_EQ(pg.status, 0) << pg.err;
    EXPECT_TRUE(has_md_row(pg.out, "pp8+tg4")) << pg.out;
    EXPECT_EQ(lines(pg.out).size(), 4u) << "header, rule, one row, build line: " << pg.out;

    const run_result d = run_bench(base_args() + " -p 16 -n 0 -d 8");
    ASSERT_EQ(d.status, 0) << d.err;
    EXPECT_TRUE(has_md_row(d.out, "pp16 @ d8")) << d.out;
}

TEST(Bench, NonDefaultParametersGetColumns) {
    REQUIRE_BENCH();
    const run_result r = run_bench(base_args() + " -p 16 -n 4 -b 8 -ub 4 -ctk f32 -fa 1 --ceiling 20");
    ASSERT_EQ(r.status, 0) << r.err;
    const std::string head = lines(r.out).at(0);
    for (const char * c : { "| n_batch |", "| n_ubatch |", "| type_k |", "| fa |", "| % of ceiling |" }) {
        EXPECT_NE(head.find(c), std::string::npos) << c << " in " << head;
    }
    EXPECT_EQ(head.find("type_v"), std::string::npos) << head;
    // The ceiling share is given for tg only.
    EXPECT_TRUE(std::regex_search(r.out, std::regex("tg4 \\|[^|]+\\| +[0-9]+\\.[0-9] \\|"))) << r.out;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("pp16 \\|[^|]+\\| +\\|"))) << r.out;
}

// --ceiling auto: the bandwidth is measured beside each tg test; csv carries it and the share,
// the markdown table a column for each, and a pp test leaves both empty.
TEST(Bench, CeilingAutoMeasuresTheBandwidth) {
    REQUIRE_BENCH();
    setenv("LLAMA_BENCH_MEMBW_MIB", "64", 1);
    const run_result c = run_bench(base_args() + " -p 16 -n 4 -o csv --ceiling auto");
    ASSERT_EQ(c.status, 0) << c.err;
    const std::vector<std::string> ls = lines(c.out);
    ASSERT_EQ(ls.size(), 3u) << c.out;
    EXPECT_NE(ls[0].find(",ceiling_gbps,ceiling_pct"), std::string::npos) << ls[0];
    EXPECT_TRUE(std::regex_search(ls[1], std::regex(",\"16\",\"0\",.*,\"\",\"\"$"))) << "pp: no ceiling: " << ls[1];
    std::smatch m;
    ASSERT_TRUE(std::regex_search(ls[2], m, std::regex(",\"([0-9.]+)\",\"([0-9.]+)\"$"))) << "tg: " << ls[2];
    const double gbps = std::stod(m[1].str()), pct = std::stod(m[2].str());
    EXPECT_GT(gbps, 0.1);
    EXPECT_GT(pct, 0.0);
    const run_result md = run_bench(base_args() + " -p 0 -n 4 --ceiling auto");
    ASSERT_EQ(md.status, 0) << md.err;
    EXPECT_NE(lines(md.out).at(0).find("| ceiling GB/s | % of ceiling |"), std::string::npos) << md.out;
    EXPECT_TRUE(std::regex_search(md.out, std::regex("tg4 \\|[^|]+\\| +[0-9]+\\.[0-9] \\| +[0-9]+\\.[0-9] \\|"))) << md.out;
    unsetenv("LLAMA_BENCH_MEMBW_MIB");
}

// A mixture of experts: a generated token reads expert_used_count of the expert_count experts, so
// the ceiling's divisor is the model size less the unchosen share of the "*_exps" tensors.
TEST(Bench, CeilingOfAMixtureCountsTheChosenExperts) {
    REQUIRE_BENCH();
    const std::string moe = std::string(LLAMA_TEST_DATA_DIR) + "/../../fuzz/corpus/fuzz-model/tiny-mixtral.gguf";
    TU_REQUIRE_FILE(moe);
    gguf_init_params gp = { true, nullptr, false };
    gguf_context * g = gguf_init_from_file(moe.c_str(), gp);
    ASSERT_NE(g, nullptr);
    const double n_exp = gguf_get_val_u32(g, gguf_find_key(g, "llama.expert_count"));
    const double n_used = gguf_get_val_u32(g, gguf_find_key(g, "llama.expert_used_count"));
    double exps = 0;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); i++) {
        if (strstr(gguf_get_tensor_name(g, i), "_exps.")) exps += (double) gguf_get_tensor_size(g, i);
    }
    gguf_free(g);
    ASSERT_GT(exps, 0.0);
    ASSERT_LT(n_used, n_exp);
    const run_result c = run_bench("-m " + moe + " -r 2 -t 1 -p 0 -n 4 -o csv --ceiling 10");
    ASSERT_EQ(c.status, 0) << c.err;
    const std::vector<std::string> ls = lines(c.out);
    ASSERT_EQ(ls.size(), 2u) << c.out;
    auto field = [&](const std::string & name) {
        std::vector<std::string> head, row;
        for (auto * v : { &head, &row }) {
            std::stringstream ss(v == &head ? ls[0] : ls[1]);
            for (std::string f; std::getline(ss, f, ',');) v->push_back(f.size() >= 2 && f[0] == '"' ? f.substr(1, f.size() - 2) : f);
        }
        for (size_t i = 0; i < head.size() && i < row.size(); i++) {
            if (head[i] == name) return std::stod(row[i]);
        }
        ADD_FAILURE() << "no column " << name << " in " << ls[0];
        return 0.0;
    };
    const double size = field("model_size"), ts = field("avg_ts"), pct = field("ceiling_pct");
    const double bytes = size - exps * (1.0 - n_used / n_exp);
    EXPECT_NEAR(pct, 100.0 * ts * bytes / 1e9 / 10.0, 1e-3 * pct);
}

TEST(Bench, BadCommandLinesAreRefusedCleanly) {
    REQUIRE_BENCH();
    const struct {
        std::string args, message;
    } cases[] = {
        { base_args() + " --no-such-flag", "unknown option '--no-such-flag'" },
        { base_args() + " -C 3", "'-C' is not supported" },
        { base_args() + " -t 0", "value of -t out of range: 0" },
        { base_args() + " -t 2-1", "first <= last" },
        { base_args() + " -r 1,2", "invalid value for -r" },
        { "-m /nonexistent/model.gguf -p 16 -n 4 -r 2 -t 1", "failed to load model" },
        { base_args() + " -ctk q9", "q9" },
        { base_args() + " -ctv q4_K", "invalid value for -ctv: 'q4_K'" },
        { base_args() + " -p abc", "-p" },
        { base_args() + " -pg 8", "-pg" },
        { base_args() + " -o xml", "xml" },
        { base_args() + " --ceiling fast", "--ceiling" },
        { "-p 16", "no model" },
    };
    for (const auto & c : cases) {
        const run_result r = run_bench(c.args);
        EXPECT_EQ(r.status, 1) << c.args << "\n" << r.err;
        EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    }
}
