// test-gpu-model.cpp - the shared models run with every layer on the build's GPU (CUDA builds):
// logits against the CPU's (mean KL below 1e-4 for F32/F16 weights and 1e-3 for quantized ones,
// the same top token), against llama.cpp's reference logits, and greedy text. Skips with a
// message where no GPU is present.
//
// The top token: in every row for F32/F16 weights; in at least 95% of the rows for quantized
// ones. Their activations are rounded to 8 bits before each product, so a difference of one
// F32 rounding upstream (the GPU's exp in the softmax, another order of additions in attention)
// now and then moves an activation to the next 8-bit level, and the ktest models' logits are
// noise-like, with near ties. The first position, whose attention is trivial, is bit-identical.
#include <gtest/gtest.h>

#include "test-llama.h"

#include "ggml-backend.h"
#include "llama.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace {

using Model = tu::UniqueModel;
using Ctx = tu::UniqueCtx;

struct Case {
    const char * file;  // under the models folder
    bool quantized;
};
const Case kModels[] = {
    { "stories260K.gguf", false },          { "TinyStories-656K-Q8_0.gguf", true }, { "ktest/ktest-F32.gguf", false },
    { "ktest/ktest-F16.gguf", false },      { "ktest/ktest-Q8_0.gguf", true },      { "ktest/ktest-Q4_0.gguf", true },
    { "ktest/ktest-Q4_K_M.gguf", true },    { "ktest/ktest-Q6_K.gguf", true },
};

std::string model_path(const char * name) { return tu::models_dir() + "/" + name; }

bool have_gpu() { return ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_GPU) != nullptr; }

#define REQUIRE_GPU() \
    do { if (!have_gpu()) GTEST_SKIP() << "no GPU device in this build or on this machine"; } while (0)

Model load(const std::string & path, int n_gpu_layers) {
    llama_model_params p = llama_model_default_params();
    p.n_gpu_layers = n_gpu_layers;
    return Model(llama_model_load_from_file(path.c_str(), p));
}

Ctx context(llama_model * m, bool flash_attn, ggml_type type_kv = GGML_TYPE_F16) {
    llama_context_params p = llama_context_default_params();
    p.n_ctx = 256;
    p.n_batch = 256;
    p.n_ubatch = 64;
    p.n_threads = 2;
    p.n_threads_batch = 2;
    p.flash_attn = flash_attn;
    p.type_k = type_kv;
    p.type_v = type_kv;
    return Ctx(llama_init_from_model(m, p));
}

// A 100-token prompt (two ubatches of 64 and 36: the matrix-matrix path), then single-token
// decodes (the matrix-vector path of generation, CUDA graphs re-launched), logits of every step.
std::vector<float> run(llama_context * ctx) {
    std::vector<llama_token> prompt = { 1 };
    for (int i = 1; i < 100; i++) prompt.push_back((llama_token) ((i * 37 + 11) % 500 + 3));
    std::vector<float> out = tu::eval_all(ctx, prompt);
    llama_pos p = (llama_pos) prompt.size();
    for (llama_token t : { 14, 250, 3, 77, 9, 120, 401, 55 }) {
        std::vector<float> b = tu::eval_all(ctx, { t }, p++);
        out.insert(out.end(), b.begin(), b.end());
    }
    return out;
}

// Mean KL below max_kl, and the same top token in all rows but at most max_differ of them.
void expect_close(const std::vector<float> & got, const std::vector<float> & ref, int32_t n_vocab, double max_kl,
                  double max_differ = 0.0) {
    ASSERT_EQ(got.size(), ref.size());
    ASSERT_FALSE(ref.empty());
    const int32_t n_rows = (int32_t) (ref.size() / (size_t) n_vocab);
    for (float x : got) ASSERT_TRUE(std::isfinite(x));
    const double kl = tu::mean_kl(ref.data(), got.data(), n_rows, n_vocab);
    EXPECT_LT(kl, max_kl);
    int differ = 0;
    for (int32_t r = 0; r < n_rows; r++) {
        const float * a = ref.data() + (size_t) r * n_vocab;
        const float * b = got.data() + (size_t) r * n_vocab;
        if (std::max_element(a, a + n_vocab) - a != std::max_element(b, b + n_vocab) - b) differ++;
    }
    EXPECT_LE(differ, (int) (max_differ * n_rows)) << "rows whose top token differs, of " << n_rows;
    printf("    mean KL %.3g over %d rows, top token differs in %d\n", kl, n_rows, differ);
}

TEST(GpuModel, LogitsMatchTheCpu) {
    REQUIRE_GPU();
    for (const Case & c : kModels) {
        if (!tu::file_exists(model_path(c.file))) {
            printf("  %s: not found, left out (set LLAMA_TEST_MODELS)\n", c.file);
            continue;
        }
        Model cpu = load(model_path(c.file), 0);
        Model gpu = load(model_path(c.file), 999);
        ASSERT_TRUE(cpu && gpu) << tu::take_errors();
        const int32_t n_vocab = tu::n_vocab_of(cpu.get());
        for (bool fa : { false, true }) {
            SCOPED_TRACE(std::string(c.file) + (fa ? ", flash attention" : ""));
            printf("  %s%s\n", c.file, fa ? ", flash attention" : "");
            Ctx cc = context(cpu.get(), fa);
            Ctx gc = context(gpu.get(), fa);
            ASSERT_TRUE(cc && gc) << tu::take_errors();
            expect_close(run(gc.get()), run(cc.get()), n_vocab, c.quantized ? 1e-3 : 1e-4, c.quantized ? 0.05 : 0.0);
        }
    }
}

// Flash attention over quantized (and BF16) caches, read as stored by the device's kernel.
TEST(GpuModel, QuantizedCacheMatchesTheCpu) {
    REQUIRE_GPU();
    const char * file = "ktest/ktest-F16.gguf";
    TU_REQUIRE_FILE(model_path(file));
    Model cpu = load(model_path(file), 0);
    Model gpu = load(model_path(file), 999);
    ASSERT_TRUE(cpu && gpu);
    // Q8_0 and llama.cpp's other cache types: the GPU writes the rows with the reference
    // quantizers and its flash attention reads them as the CPU's does.
    for (ggml_type t : { GGML_TYPE_Q8_0, GGML_TYPE_BF16, GGML_TYPE_Q5_1, GGML_TYPE_Q4_0, GGML_TYPE_IQ4_NL }) {
        SCOPED_TRACE(ggml_type_name(t));
        printf("  %s cache, flash attention\n", ggml_type_name(t));
        Ctx cc = context(cpu.get(), true, t);
        Ctx gc = context(gpu.get(), true, t);
        ASSERT_TRUE(cc && gc) << tu::take_errors();
        expect_close(run(gc.get()), run(cc.get()), tu::n_vocab_of(cpu.get()), 1e-4, t == GGML_TYPE_Q8_0 ? 0.0 : 0.05);
    }
}

// llama.cpp's logits of "Once upon a time" (the shared reference logits).
TEST(GpuModel, ReferenceLogits) {
    REQUIRE_GPU();
    for (const Case & c : kModels) {
        const std::string name = std::string(c.file).substr(std::string(c.file).rfind('/') + 1);
        const std::string ref_path = tu::shared_dir() + "/reference/logits/" + name.substr(0, name.size() - 5) + ".p1.logits";
        tu::LogitsFile ref;
        if (!tu::file_exists(model_path(c.file)) || !tu::read_logits_file(ref_path, ref)) continue;
        SCOPED_TRACE(c.file);
        printf("  %s\n", c.file);
        Model gpu = load(model_path(c.file), 999);
        ASSERT_TRUE(gpu);
        Ctx gc = context(gpu.get(), false);
        ASSERT_TRUE(gc);
        ASSERT_EQ(tu::n_vocab_of(gpu.get()), ref.n_vocab);
        // 5 or 6 rows: one may differ for quantized weights
        expect_close(tu::eval_all(gc.get(), ref.tokens), ref.logits, ref.n_vocab, c.quantized ? 1e-3 : 1e-4, c.quantized ? 0.2 : 0.0);
    }
}

// Greedy generation through the public sampler API gives the CPU's tokens: 200 from BOS for an
// F32 model; for a quantized one the first 32 (later, one 8-bit rounding moved by the GPU's
// softmax can pick the other side of a near tie, as between the CPU's own instruction sets).
TEST(GpuModel, GreedyTextIsTheCpus) {
    REQUIRE_GPU();
    for (const char * file : { "stories260K.gguf", "TinyStories-656K-Q8_0.gguf" }) {
        SCOPED_TRACE(file);
        if (!tu::file_exists(model_path(file))) continue;
        const int n = std::string(file).find("Q8_0") != std::string::npos ? 100 : 200;  // tokens after BOS
        auto generate = [file, n](int ngl) {
            Model m = load(model_path(file), ngl);
            EXPECT_TRUE(m);
            Ctx c = context(m.get(), false);
            EXPECT_TRUE(c);
            llama_sampler * s = llama_sampler_init_greedy();
            std::vector<llama_token> toks = { 1 };
            for (int i = 0; i < n; i++) {
                llama_batch b = llama_batch_get_one(&toks.back(), 1);
                if (llama_decode(c.get(), b) != 0) break;
                toks.push_back(llama_sampler_sample(s, c.get(), -1));
            }
            llama_sampler_free(s);
            return toks;
        };
        const std::vector<llama_token> cpu = generate(0), gpu = generate(999);
        ASSERT_EQ(cpu.size(), (size_t) n + 1);
        ASSERT_EQ(gpu.size(), (size_t) n + 1);
        size_t same = 0;
        while (same < cpu.size() && cpu[same] == gpu[same]) same++;
        printf("  %s: the first %zu of %zu tokens are the CPU's\n", file, same, cpu.size());
        EXPECT_GE(same, n == 200 ? cpu.size() : (size_t) 33);
    }
}

}  // namespace
