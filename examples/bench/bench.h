// bench.h - what llama-bench's parts share: the command line, one test instance of it, a
// measured test, and the printers of the output formats (md, csv, json, jsonl, sql).
#pragma once

#include "arg.h"
#include "common.h"
#include "llama.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

enum class bench_format { none, md, csv, json, jsonl, sql };

// The command line. Every list is a test parameter: each combination of values is one test.
struct bench_params {
    common_params base;               // the flags and single options applied (common/arg.cpp)
    std::vector<common_arg_list> dims;  // the other options' lists: a test per combination
    std::vector<int> n_prompt;
    std::vector<int> n_gen;
    std::vector<std::pair<int, int>> n_pg;
    // the values the tests take (filled by enumerating them): the markdown table's columns
    std::vector<int> n_batch;
    std::vector<int> n_ubatch;
    std::vector<ggml_type> type_k;
    std::vector<ggml_type> type_v;
    std::vector<bool> flash_attn;
    std::vector<bool> use_mmap;
    int reps = 5;
    int delay = 0;  // seconds of rest before each test
    bool verbose = false;
    bool progress = false;
    bool no_warmup = false;
    double ceiling_gbps = 0;  // > 0: report tg speed as a share of the memory-bandwidth ceiling
    bool ceiling_auto = false;  // --ceiling auto: the ceiling measured before and after each tg test
    bench_format output = bench_format::md;
    bench_format output_err = bench_format::none;

    bool ceiling() const { return ceiling_gbps > 0 || ceiling_auto; }  // --ceiling given
};

// llama.cpp's defaults, which decide the columns a markdown table shows.
struct bench_defaults {
    static constexpr int n_batch = 2048;
    static constexpr int n_ubatch = 512;
    static constexpr ggml_type type_k = GGML_TYPE_F16;
    static constexpr ggml_type type_v = GGML_TYPE_F16;
    static constexpr int n_gpu_layers = 99;
    static constexpr bool flash_attn = false;
    static constexpr bool use_mmap = true;
};

// One test: one value of every list. n_prompt > 0 and n_gen > 0 together is a pg test.
struct bench_instance {
    common_params params;  // the options of this test (model and context parameters come from them)
    std::string model;
    int n_prompt = 0;
    int n_gen = 0;
    int n_depth = 0;
    int n_batch = 0;
    int n_ubatch = 0;
    ggml_type type_k = GGML_TYPE_F16;
    ggml_type type_v = GGML_TYPE_F16;
    int n_threads = 0;
    int n_gpu_layers = 0;
    llama_split_mode split_mode = LLAMA_SPLIT_MODE_LAYER;
    int main_gpu = 0;
    bool no_kv_offload = false;
    bool flash_attn = false;
    bool use_mmap = true;
};

// A test with the model's description and the measured repetitions.
struct bench_result {
    bench_instance inst;
    std::string model_type;  // llama_model_desc
    uint64_t model_size = 0;
    uint64_t token_bytes = 0;  // weight bytes a generated token reads: model_size less the experts it does not choose
    uint64_t model_n_params = 0;
    std::string test_time;  // RFC 3339, UTC
    std::vector<uint64_t> samples_ns;
    double ceiling_gbps = 0;     // the ceiling this test is held to (0: none, or not measured)
    bool ceiling_fields = false; // --ceiling given: csv, json and sql carry the ceiling fields

    std::string test_name() const;   // "pp512", "tg128", "pp512+tg128", with " @ d4096" for a depth
    std::vector<double> samples_ts() const;
    uint64_t avg_ns() const;
    uint64_t stddev_ns() const;
    double avg_ts() const;
    double stddev_ts() const;
    // Mean tokens/s as a percentage of GBPS / token_bytes (every weight byte read once per token, of
    // a mixture of experts' experts the expert_used_count of expert_count);
    // negative when it does not apply (no --ceiling, or not a plain tg test).
    double ceiling_pct() const;
};

// Read bandwidth of this machine with n threads (--ceiling auto, bench-membw.cpp): a buffer of
// `bytes`, touched once at construction, summed by the threads; the best of `passes` passes.
class bench_membw {
public:
    bench_membw(int n_threads, size_t bytes);
    ~bench_membw();
    double measure_gbps(int passes = 5);

private:
    int n_threads_;
    size_t n_words_ = 0;
    std::unique_ptr<uint64_t[]> words_;
    uint64_t sink_ = 0;  // keeps the sums alive
};

class bench_printer {
public:
    explicit bench_printer(FILE * out) : out_(out) {}
    virtual ~bench_printer() = default;
    virtual void header(const bench_params &) {}
    virtual void row(const bench_result & r) = 0;
    virtual void footer() {}

protected:
    FILE * out_;
};

std::unique_ptr<bench_printer> bench_make_printer(bench_format format, FILE * out);
