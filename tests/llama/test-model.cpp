// test-model.cpp - the llama runtime end to end on the real model files of the shared test models: logits
// against llama.cpp's reference files, batch splitting, token-by-token evaluation, KV cache
// types, thread counts, context shifting, and the errors of the model loader.
//
// Speed is measured by a program, not here: build/bin/llama-bench -m MODEL.gguf -p 512 -n 128
// (--ceiling GBPS compares tg with the memory-bandwidth ceiling).
#include "test-llama.h"

#include "gguf.h"
#include "llama.h"
#include "llama-context.h"  // internals: the planned buffers must not grow after creation
#include "llama-model.h"    // internals: where the weights were placed

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sys/wait.h>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using tu::CtxPtr;
using tu::eval_all;
using tu::LogitsFile;
using tu::mean_kl;
using tu::ModelPtr;
using tu::n_vocab_of;
using tu::read_logits_file;
using tu::take_errors;
using tu::rewrite_model;
using tu::temp_path;
using tu::TempFile;

// ---- files ---------------------------------------------------------------------------------
std::string model_path(const std::string & name) {
    if (name.rfind("ktest-", 0) == 0) return tu::models_dir() + "/ktest/" + name + ".gguf";
    return tu::models_dir() + "/" + name + ".gguf";
}
std::string reference_path(const std::string & name) {
    return tu::shared_dir() + "/reference/logits/" + name + ".p1.logits";
}
// The KL divergence two evaluation paths of one model may differ by. Float models differ by
// rounding only; in quantized models a last-bit difference can flip the rounding of an
// activation quantized for the next matrix product, which the noise-like test models amplify.
double path_tolerance(const std::string & model_name) {
    const bool quantized = model_name.find("Q") != std::string::npos;
    return quantized ? 1e-3 : 1e-6;
}

int argmax(const float * x, int32_t n) { return (int) (std::max_element(x, x + n) - x); }


// Evaluates tokens one llama_decode call each (positions following the cache); returns the
// logits of each step.
std::vector<float> eval_one_by_one(llama_context * ctx, const std::vector<llama_token> & tokens) {
    const int32_t n_vocab = n_vocab_of((llama_model *) llama_get_model(ctx));
    std::vector<float> out;
    for (llama_token t : tokens) {
        llama_token tok = t;
        const int32_t rc = llama_decode(ctx, llama_batch_get_one(&tok, 1));
        if (rc != 0) {
            ADD_FAILURE() << "llama_decode returned " << rc << ": " << take_errors();
            return {};
        }
        const float * row = llama_get_logits_ith(ctx, -1);
        out.insert(out.end(), row, row + n_vocab);
    }
    return out;
}

// Deterministic pseudo-random tokens (BOS first).
std::vector<llama_token> some_tokens(int n, int n_vocab, uint32_t seed = 7) {
    std::mt19937 rng(seed);
    std::vector<llama_token> t(1, 1);
    while ((int) t.size() < n) t.push_back(3 + (llama_token) (rng() % (uint32_t) (n_vocab - 3)));
    return t;
}

#define REQUIRE_MODEL(name)                     \
    const std::string path_ = model_path(name); \
    TU_REQUIRE_FILE(path_);                     \
    ModelPtr model(path_);                      \
    ASSERT_NE(model.m, nullptr) << take_errors()

// ---- reference logits ----------------------------------------------------------------------
struct RefCase {
    const char * name;
    double max_kl;
};

class ReferenceLogits : public testing::TestWithParam<RefCase> {};

TEST_P(ReferenceLogits, MatchesLlamaCpp) {
    const RefCase rc = GetParam();
    TU_REQUIRE_FILE(reference_path(rc.name));
    REQUIRE_MODEL(rc.name);
    LogitsFile ref;
    ASSERT_TRUE(read_logits_file(reference_path(rc.name), ref));
    ASSERT_EQ(ref.n_vocab, n_vocab_of(model));

    // Mapped, read, and mapped without repacking the weights (which changes kernels where
    // this build repacks, e.g. Q4_0 with AVX512).
    for (int variant = 0; variant < 3; variant++) {
        const bool use_mmap = variant != 1, use_repack = variant != 2;
        ModelPtr m2(path_, use_mmap, false, use_repack);
        ASSERT_NE(m2.m, nullptr);
        CtxPtr ctx(m2, 64, 64);
        ASSERT_NE(ctx.c, nullptr) << take_errors();
        const std::vector<float> got = eval_all(ctx, ref.tokens);
        ASSERT_EQ(got.size(), ref.logits.size());
        const int32_t n = (int32_t) ref.tokens.size();
        const double kl = mean_kl(ref.logits.data(), got.data(), n, ref.n_vocab);
        int top1 = 0;
        for (int32_t i = 0; i < n; i++) {
            top1 += argmax(ref.logits.data() + (size_t) i * ref.n_vocab, ref.n_vocab) ==
                    argmax(got.data() + (size_t) i * ref.n_vocab, ref.n_vocab);
        }
        static const char * const what[] = { "mapped", "read", "mapped, not repacked" };
        if (variant != 1) printf("[ %s ] %s: mean KL %.3g nats, top-1 agreement %d/%d\n", rc.name, what[variant], kl, top1, n);
        EXPECT_LT(kl, rc.max_kl) << rc.name << " (" << what[variant] << ")";
    }
}

INSTANTIATE_TEST_SUITE_P(Models, ReferenceLogits,
                         testing::Values(RefCase{ "stories260K", 1e-5 }, RefCase{ "ktest-F32", 1e-5 },
                                         RefCase{ "ktest-F16", 1e-5 }, RefCase{ "TinyStories-656K-Q8_0", 1e-3 },
                                         RefCase{ "ktest-Q8_0", 1e-3 }, RefCase{ "ktest-Q4_0", 1e-3 },
                                         RefCase{ "ktest-Q4_K_M", 1e-3 }, RefCase{ "ktest-Q6_K", 1e-3 }),
                         [](const testing::TestParamInfo<RefCase> & info) {
                             std::string s = info.param.name;
                             std::replace(s.begin(), s.end(), '-', '_');
                             return s;
                         });

// ---- batching --------------------------------------------------------------------------------
// n_ubatch smaller than the prompt splits it into several graphs: same logits within rounding
// (the matrix products take other code paths for other batch sizes).
TEST(Model, BatchSplitMatchesOneBatch) {
    for (const char * name : { "ktest-F32", "stories260K", "ktest-Q4_K_M", "ktest-Q4_0" }) {
        SCOPED_TRACE(name);
        REQUIRE_MODEL(name);
        const int32_t n_vocab = n_vocab_of(model);
        const std::vector<llama_token> toks = some_tokens(45, n_vocab);
        CtxPtr one(model, 64, 64);
        ASSERT_NE(one.c, nullptr);
        const std::vector<float> ref = eval_all(one, toks);
        for (uint32_t n_ubatch : { 16u, 7u, 1u }) {
            CtxPtr split(model, 64, n_ubatch);
            ASSERT_NE(split.c, nullptr);
            ASSERT_EQ(llama_n_ubatch(split), n_ubatch);
            ASSERT_EQ(llama_n_batch(split), 64u);
            const std::vector<float> got = eval_all(split, toks);
            ASSERT_EQ(got.size(), ref.size());
            const double kl = mean_kl(ref.data(), got.data(), (int32_t) toks.size(), n_vocab);
            EXPECT_LT(kl, path_tolerance(name)) << "n_ubatch " << n_ubatch;
        }
    }
}

TEST(Model, TokenByTokenMatchesOneBatch) {
    for (const char * name : { "ktest-F32", "stories260K", "TinyStories-656K-Q8_0", "ktest-Q4_0" }) {
        SCOPED_TRACE(name);
        REQUIRE_MODEL(name);
        const int32_t n_vocab = n_vocab_of(model);
        const std::vector<llama_token> toks = some_tokens(30, n_vocab, 11);
        CtxPtr one(model, 64, 64);
        const std::vector<float> ref = eval_all(one, toks);
        CtxPtr step(model, 64, 64);
        const std::vector<float> got = eval_one_by_one(step, toks);
        ASSERT_EQ(got.size(), ref.size());
        // Every step's logits equal those of the same token in the full batch.
        const double kl = mean_kl(ref.data(), got.data(), (int32_t) toks.size(), n_vocab);
        EXPECT_LT(kl, path_tolerance(name));
        EXPECT_EQ(llama_kv_self_used_cells(step), (int32_t) toks.size());
        EXPECT_EQ(llama_kv_self_seq_pos_max(step, 0), (llama_pos) toks.size() - 1);
        const llama_perf_context_data perf = llama_perf_context(step);
        EXPECT_EQ(perf.n_eval, (int32_t) toks.size());
        EXPECT_EQ(perf.n_p_eval, 0);
        EXPECT_GT(perf.t_eval_ms, 0.0);
        const llama_perf_context_data perf1 = llama_perf_context(one);
        EXPECT_EQ(perf1.n_p_eval, (int32_t) toks.size());
        EXPECT_EQ(perf1.n_eval, 0);
    }
}

// A generated token's graph serves the next tokens (moved to their cells, the attended cells
// padded to 32): the same logits, bit for bit, as building every graph afresh
// (LLAMA_GRAPH_REUSE_DISABLE), across pad boundaries, a prompt batch, a removed tail, the
// context's end (70 cells, not a multiple of 32), flash attention and a Q8_0 cache.
TEST(Model, GeneratedTokensReuseTheirGraph) {
    for (const char * name : { "ktest-F32", "ktest-Q4_0" }) {
        REQUIRE_MODEL(name);
        const int32_t n_vocab = n_vocab_of(model);
        for (int variant = 0; variant < 3; variant++) {
            SCOPED_TRACE(std::string(name) + " variant " + std::to_string(variant));
            auto run = [&](bool reuse, int64_t * n_reused) {
                if (!reuse) setenv("LLAMA_GRAPH_REUSE_DISABLE", "1", 1);
                llama_context_params cp = llama_context_default_params();
                cp.n_ctx = 70;
                cp.n_batch = cp.n_ubatch = 16;
                cp.n_threads = cp.n_threads_batch = 2;
                cp.flash_attn = variant >= 1;
                if (variant == 2) cp.type_k = cp.type_v = GGML_TYPE_Q8_0;
                llama_context * ctx = llama_init_from_model(model, cp);
                unsetenv("LLAMA_GRAPH_REUSE_DISABLE");
                EXPECT_NE(ctx, nullptr);
                std::vector<float> all;
                if (!ctx) return all;
                auto step = [&](const std::vector<llama_token> & t) {
                    const std::vector<float> l = eval_one_by_one(ctx, t);
                    all.insert(all.end(), l.begin(), l.end());
                };
                std::vector<llama_token> prompt = some_tokens(5, n_vocab, 3);
                EXPECT_EQ(llama_decode(ctx, llama_batch_get_one(prompt.data(), (int32_t) prompt.size())), 0);
                step(some_tokens(40, n_vocab, 4));                  // cells 5 .. 44: pads 32, 64
                llama_kv_self_seq_rm(ctx, 0, 30, -1);                // back to 30 cells
                prompt = some_tokens(3, n_vocab, 5);
                EXPECT_EQ(llama_decode(ctx, llama_batch_get_one(prompt.data(), (int32_t) prompt.size())), 0);
                step(some_tokens(37, n_vocab, 6));                  // to the context's end, 70
                *n_reused = ctx->n_graphs_reused;
                llama_free(ctx);
                return all;
            };
            int64_t reused = 0, rebuilt = 0;
            const std::vector<float> a = run(true, &reused), b = run(false, &rebuilt);
            ASSERT_EQ(a.size(), b.size());
            EXPECT_TRUE(memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
            EXPECT_GE(reused, 60);  // all but the graphs of a new pad, after a batch or a removal
            EXPECT_EQ(rebuilt, 0);
        }
    }
}

// Prompt in one batch, then generation one token at a time: the usual pattern.
TEST(Model, PromptThenGenerate) {
    REQUIRE_MODEL("ktest-Q8_0");
    const int32_t n_vocab = n_vocab_of(model);
    const std::vector<llama_token> toks = some_tokens(40, n_vocab, 5);
    CtxPtr one(model, 64, 64);
    const std::vector<float> ref = eval_all(one, toks);

    CtxPtr ctx(model, 64, 32);
    std::vector<llama_token> prompt(toks.begin(), toks.begin() + 25);
    ASSERT_EQ(llama_decode(ctx, llama_batch_get_one(prompt.data(), (int32_t) prompt.size())), 0);
    // Only the last token's logits are kept by default.
    EXPECT_EQ(llama_get_logits_ith(ctx, 0), nullptr);
    take_errors();
    const float * last = llama_get_logits_ith(ctx, -1);
    ASSERT_NE(last, nullptr);
    EXPECT_EQ(last, llama_get_logits(ctx));
    EXPECT_LT(mean_kl(ref.data() + 24 * (size_t) n_vocab, last, 1, n_vocab), path_tolerance("Q8_0"));
    const std::vector<float> rest = eval_one_by_one(ctx, std::vector<llama_token>(toks.begin() + 25, toks.end()));
    EXPECT_LT(mean_kl(ref.data() + 25 * (size_t) n_vocab, rest.data(), 15, n_vocab), path_tolerance("Q8_0"));
}

// A batch that keeps no logits still fills the cache (the graph stops after the last layer's
// keys and values); some kept in the middle come back in batch order.
TEST(Model, LogitsFlags) {
    REQUIRE_MODEL("ktest-F16");
    const int32_t n_vocab = n_vocab_of(model);
    const std::vector<llama_token> toks = some_tokens(30, n_vocab, 8);
    CtxPtr one(model, 64, 64);
    const std::vector<float> ref = eval_all(one, toks);

    CtxPtr ctx(model, 64, 8);
    llama_batch b = llama_batch_init(20, 0, 1);
    b.n_tokens = 20;
    for (int i = 0; i < 20; i++) {
        b.token[i] = toks[i];
        b.pos[i] = i;
        b.logits[i] = 0;
    }
    ASSERT_EQ(llama_decode(ctx, b), 0);
    EXPECT_EQ(llama_get_logits(ctx), nullptr);
    take_errors();
    EXPECT_EQ(llama_get_logits_ith(ctx, -1), nullptr);
    llama_kv_self_seq_rm(ctx, 0, 12, -1);
    b.n_tokens = 8;
    for (int i = 0; i < 8; i++) {
        b.token[i] = toks[12 + i];
        b.pos[i] = 12 + i;
        b.logits[i] = i == 2 || i == 5;
    }
    ASSERT_EQ(llama_decode(ctx, b), 0);
    llama_batch_free(b);
    const float * all = llama_get_logits(ctx);
    ASSERT_NE(all, nullptr);
    EXPECT_EQ(llama_get_logits_ith(ctx, 2), all);
    EXPECT_EQ(llama_get_logits_ith(ctx, 5), all + n_vocab);
    EXPECT_EQ(llama_get_logits_ith(ctx, -3), all + n_vocab);
    EXPECT_EQ(llama_get_logits_ith(ctx, 4), nullptr);
    EXPECT_LT(mean_kl(ref.data() + 14 * (size_t) n_vocab, all, 1, n_vocab), path_tolerance("F16"));
    EXPECT_LT(mean_kl(ref.data() + 17 * (size_t) n_vocab, all + n_vocab, 1, n_vocab), path_tolerance("F16"));
    const std::vector<float> rest = eval_one_by_one(ctx, std::vector<llama_token>(toks.begin() + 20, toks.end()));
    EXPECT_LT(mean_kl(ref.data() + 20 * (size_t) n_vocab, rest.data(), 10, n_vocab), path_tolerance("F16"));
}

// ---- KV cache types and threads --------------------------------------------------------------
TEST(Model, KvCacheTypes) {
    REQUIRE_MODEL("ktest-F32");
    const int32_t n_vocab = n_vocab_of(model);
    const std::vector<llama_token> toks = some_tokens(40, n_vocab, 3);
    // Prompt in a batch, then 8 tokens one at a time, so both paths read the cache.
    const std::vector<llama_token> prompt(toks.begin(), toks.begin() + 32), gen(toks.begin() + 32, toks.end());
    std::vector<std::vector<float>> results;
    const ggml_type types[3] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0 };
    for (ggml_type tk : types) {
        for (ggml_type tv : types) {
            CtxPtr ctx(model, 64, 64, 2, tk, tv);
            ASSERT_NE(ctx.c, nullptr) << take_errors();
            std::vector<float> r = eval_all(ctx, prompt);
            const std::vector<float> g = eval_one_by_one(ctx, gen);
            r.insert(r.end(), g.begin(), g.end());
            results.push_back(r);
        }
    }
    const std::vector<float> & f32 = results[0];
    for (int i = 1; i < 9; i++) {
        const ggml_type tk = types[i / 3], tv = types[i % 3];
        const double kl = mean_kl(f32.data(), results[i].data(), (int32_t) toks.size(), n_vocab);
        const bool quant = tk == GGML_TYPE_Q8_0 || tv == GGML_TYPE_Q8_0;
        printf("[ K %s, V %s ] mean KL vs F32 cache %.3g\n", ggml_type_name(tk), ggml_type_name(tv), kl);
        EXPECT_LT(kl, quant ? 1e-3 : 1e-5) << ggml_type_name(tk) << "/" << ggml_type_name(tv);
        EXPECT_GT(kl, 0.0) << "a different cache type should change the logits a little";
    }
}

// llama.cpp's other cache types (-ctk / -ctv): BF16 and the 32-value block types, K and V alike,
// with and without flash attention, a prompt in two batches then tokens one at a time, against
// the F32 cache. The logits must move away from the F32 cache's by the type's precision: BF16
// (8 bits of mantissa) and Q8_0 least, the 5-bit types more, the 4-bit ones most, so a type
// silently stored as another shows.
TEST(Model, KvCacheBlockTypes) {
    REQUIRE_MODEL("ktest-F32");
    const int32_t n_vocab = n_vocab_of(model);
    const std::vector<llama_token> toks = some_tokens(48, n_vocab, 11);
    const std::vector<llama_token> prompt(toks.begin(), toks.begin() + 40), gen(toks.begin() + 40, toks.end());
    auto run = [&](ggml_type t, bool fa) {
        CtxPtr ctx(model, 64, 32, 2, t, t, fa);
        EXPECT_NE(ctx.c, nullptr) << ggml_type_name(t) << ": " << take_errors();
        if (!ctx.c) return std::vector<float>();
        std::vector<float> r = eval_all(ctx, prompt);
        const std::vector<float> g = eval_one_by_one(ctx, gen);
        r.insert(r.end(), g.begin(), g.end());
        return r;
    };
    const int n = (int) toks.size();
    const ggml_type types[] = { GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q5_1, GGML_TYPE_Q5_0,
                                GGML_TYPE_Q4_1, GGML_TYPE_Q4_0, GGML_TYPE_IQ4_NL };
    const double bound[] = { 2e-5, 2e-4, 1e-2, 1e-2, 4e-2, 4e-2, 4e-2 };
    for (int fa = 0; fa < 2; fa++) {
        const std::vector<float> exact = run(GGML_TYPE_F32, fa == 1);
        ASSERT_EQ(exact.size(), (size_t) n * n_vocab);
        double kl[7];
        for (int i = 0; i < 7; i++) {
            const std::vector<float> r = run(types[i], fa == 1);
            ASSERT_EQ(r.size(), exact.size()) << ggml_type_name(types[i]);
            kl[i] = mean_kl(exact.data(), r.data(), n, n_vocab);
            printf("[ %s cache, flash attention %d ] mean KL to the F32 cache %.3g\n", ggml_type_name(types[i]), fa, kl[i]);
            EXPECT_GT(kl[i], 0.0) << ggml_type_name(types[i]);
            EXPECT_LT(kl[i], bound[i]) << ggml_type_name(types[i]) << " fa " << fa;
        }
        EXPECT_LT(std::max(kl[0], kl[1]), std::min(kl[2], kl[3])) << "8-bit caches beyond a 5-bit one, fa " << fa;
        EXPECT_LT(std::max(kl[2], kl[3]), std::min(std::min(kl[4], kl[5]), kl[6])) << "5-bit caches beyond a 4-bit one, fa " << fa;
    }
}

// Flash attention (the fused op reading K and V rows as stored) against the soft_max path: a
// prompt in batches of 16 (queries after cached keys), then tokens one at a time, on F32, F16
// and quantized models. With an F32 cache both compute the same thing. With an F16 or Q8_0
// cache the soft_max path also rounds q and the probabilities to F16 for its products while the
// fused op keeps them in F32: it must be at least as close to the F32 cache's logits. Then a
// context shift, which moves V rows instead of columns.
TEST(Model, FlashAttentionMatchesSoftMaxPath) {
    for (const char * name : { "stories260K", "ktest-F16", "ktest-Q4_0", "TinyStories-656K-Q8_0" }) {
        REQUIRE_MODEL(name);
        const int32_t n_vocab = n_vocab_of(model);
        const int32_t n = 48;
        const std::vector<llama_token> toks = some_tokens(n, n_vocab, 5);
        const std::vector<llama_token> prompt(toks.begin(), toks.begin() + 40), gen(toks.begin() + 40, toks.end());
        const bool q8_ok = llama_model_n_embd(model) / llama_model_n_head(model) % 32 == 0;
        auto run = [&](ggml_type type, bool fa) {
            CtxPtr ctx(model, 64, 16, 2, type, type, fa);
            EXPECT_NE(ctx.c, nullptr) << take_errors();
            if (!ctx.c) return std::vector<float>();
            std::vector<float> r = eval_all(ctx, prompt);
            const std::vector<float> g = eval_one_by_one(ctx, gen);
            r.insert(r.end(), g.begin(), g.end());
            return r;
        };
        const std::vector<float> exact = run(GGML_TYPE_F32, false);
        ASSERT_EQ(exact.size(), (size_t) n * n_vocab);
        for (ggml_type type : { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0 }) {
            if (type == GGML_TYPE_Q8_0 && !q8_ok) continue;
            SCOPED_TRACE(std::string(name) + " cache " + ggml_type_name(type));
            const std::vector<float> soft = run(type, false), fused = run(type, true);
            ASSERT_EQ(fused.size(), exact.size());
            const double kl_soft = mean_kl(exact.data(), soft.data(), n, n_vocab);
            const double kl_fused = mean_kl(exact.data(), fused.data(), n, n_vocab);
            printf("[ %s, %s cache ] mean KL to the F32 cache: soft_max path %.3g, flash attention %.3g\n", name,
                   ggml_type_name(type), kl_soft, kl_fused);
            if (type == GGML_TYPE_F32) {
                EXPECT_LT(kl_fused, 1e-6);  // float rounding only: sums in another order
            } else {
                EXPECT_LT(kl_fused, 1.1 * kl_soft + 1e-9);
                EXPECT_LT(kl_fused, 1e-3);
            }

            // Shift: drop positions [4, 12), move the rest down, continue; both paths agree.
            std::vector<float> shifted[2];
            for (int fa = 0; fa < 2; fa++) {
                CtxPtr ctx(model, 64, 16, 2, type, type, fa == 1);
                ASSERT_FALSE(eval_all(ctx, prompt).empty());
                ASSERT_TRUE(llama_kv_self_seq_rm(ctx, 0, 4, 12));
                llama_kv_self_seq_add(ctx, 0, 12, -1, -8);
                shifted[fa] = eval_one_by_one(ctx, gen);
            }
            const double kl_shift = mean_kl(shifted[0].data(), shifted[1].data(), (int32_t) gen.size(), n_vocab);
            EXPECT_LT(kl_shift, 2 * kl_soft + 1e-6) << "after a context shift";
        }
    }
}

TEST(Model, KvCacheBlockTypesNeedWholeBlocksPerHead) {
    REQUIRE_MODEL("stories260K");  // head size 8
    take_errors();
    CtxPtr ctx(model, 64, 64, 2, GGML_TYPE_Q8_0, GGML_TYPE_F16);
    EXPECT_EQ(ctx.c, nullptr);
    EXPECT_NE(take_errors().find("head size"), std::string::npos);
    CtxPtr q4(model, 64, 64, 2, GGML_TYPE_F16, GGML_TYPE_Q4_0);
    EXPECT_EQ(q4.c, nullptr);
    EXPECT_NE(take_errors().find("a q4_0 V cache needs a head size that is a multiple of 32"), std::string::npos);
    CtxPtr bad(model, 64, 64, 2, GGML_TYPE_Q4_K, GGML_TYPE_F16);
    EXPECT_EQ(bad.c, nullptr);
    EXPECT_NE(take_errors().find("unsupported K cache type"), std::string::npos);
}

TEST(Model, ThreadCountsGiveIdenticalLogits) {
    for (const char * name : { "ktest-Q4_K_M", "ktest-F16", "stories260K" }) {
        SCOPED_TRACE(name);
        REQUIRE_MODEL(name);
        const int32_t n_vocab = n_vocab_of(model);
        const std::vector<llama_token> toks = some_tokens(40, n_vocab, 9);
        const std::vector<llama_token> prompt(toks.begin(), toks.begin() + 34), gen(toks.begin() + 34, toks.end());
        std::vector<float> res[3];
        for (int nt = 1; nt <= 3; nt++) {
            CtxPtr ctx(model, 64, 64, nt);
            res[nt - 1] = eval_all(ctx, prompt);
            const std::vector<float> g = eval_one_by_one(ctx, gen);
            res[nt - 1].insert(res[nt - 1].end(), g.begin(), g.end());
        }
        EXPECT_TRUE(res[0] == res[1]) << "1 vs 2 threads";
        EXPECT_TRUE(res[0] == res[2]) << "1 vs 3 threads";
        // llama_set_n_threads on a live context.
        CtxPtr ctx(model, 64, 64, 1);
        llama_set_n_threads(ctx, 2, 2);
        std::vector<float> r = eval_all(ctx, prompt);
        const std::vector<float> g = eval_one_by_one(ctx, gen);
        r.insert(r.end(), g.begin(), g.end());
        EXPECT_TRUE(r == res[0]);
    }
}

// The graph memory is planned once for the largest batch: batches of any size, the K shift and
// a removal never make it grow.
TEST(Model, BuffersArePlannedOnce) {
    for (const char * name : { "ktest-F32", "ktest-Q4_K_M" }) {
        SCOPED_TRACE(name);
        REQUIRE_MODEL(name);
        const int32_t n_vocab = n_vocab_of(model);
        for (ggml_type type : { GGML_TYPE_F16, GGML_TYPE_Q8_0 }) {
            CtxPtr ctx(model, 64, 16, 2, type, type);
            ASSERT_NE(ctx.c, nullptr);
            const size_t graph_bytes = ggml_backend_sched_get_buffer_size(ctx.c->sched, ctx.c->backend_cpu);
            EXPECT_GT(graph_bytes, 0u);
            const std::vector<llama_token> toks = some_tokens(64, n_vocab, 2);
            ASSERT_FALSE(eval_all(ctx, std::vector<llama_token>(toks.begin(), toks.begin() + 40)).empty());  // 16 + 16 + 8
            ASSERT_FALSE(eval_one_by_one(ctx, std::vector<llama_token>(toks.begin() + 40, toks.begin() + 50)).empty());
            ASSERT_TRUE(llama_kv_self_seq_rm(ctx, 0, 2, 10));
            llama_kv_self_seq_add(ctx, 0, 10, -1, -8);
            ASSERT_FALSE(eval_all(ctx, std::vector<llama_token>(toks.begin() + 50, toks.end()), 42).empty());
            EXPECT_EQ(llama_kv_self_used_cells(ctx), 56);
            EXPECT_EQ(ggml_backend_sched_get_buffer_size(ctx.c->sched, ctx.c->backend_cpu), graph_bytes);
        }
    }
}

// Whether this build's CPU kernels repack a matrix of this type (16 x 256 values).
bool build_repacks(ggml_type type) {
    ggml_init_params ip = { ggml_tensor_overhead() + ggml_row_size(type, 256) * 16 + 64, nullptr, false };
    ggml_context * ctx = ggml_init(ip);
    const bool yes = ggml_cpu_can_repack(ggml_new_tensor_2d(ctx, type, 256, 16));
    ggml_free(ctx);
    return yes;
}

// Mapped matrices leave the file's 4 KiB pages for the CPU's own (huge-page) buffer: quantized ones
// repacked, float ones as they are; without repacking, or read without a mapping, they stay in the
// memory they were read into (quantized ones repacked there).
TEST(Model, MappedMatricesMoveToOwnMemory) {
    for (const char * name : { "ktest-F16", "ktest-F32", "ktest-Q4_0" }) {
        SCOPED_TRACE(name);
        const std::string path = model_path(name);
        TU_REQUIRE_FILE(path);
        for (bool use_mmap : { true, false }) {
            for (bool use_repack : { true, false }) {
                ModelPtr model(path, use_mmap, false, use_repack);
                ASSERT_NE(model.m, nullptr) << take_errors();
                const ggml_tensor * w = model.m->layers[0].wq;
                const bool quant = ggml_is_quantized(w->type);
                const bool repackable = quant && build_repacks(w->type);  // not in a scalar build
                const bool own = use_repack && use_mmap && (!quant || repackable);
                EXPECT_EQ(std::string(ggml_backend_buffer_name(w->buffer)), own ? "CPU_REPACK" : "CPU")
                    << "mmap " << use_mmap << " repack " << use_repack;
                EXPECT_EQ((w->flags & GGML_TENSOR_FLAG_REPACKED) != 0, use_repack && repackable);
                EXPECT_EQ(std::string(ggml_backend_buffer_name(model.m->tok_embd->buffer)), "CPU");  // read by get_rows
            }
        }
    }
}

// ---- context shift ---------------------------------------------------------------------------
// Moving every cached token by the same delta is exact: RoPE makes attention depend only on
// relative positions, so a fresh evaluation at the new positions computes the same hidden states
// in every layer, and the re-rotated keys equal keys rotated to the new positions directly.
TEST(Model, ContextShiftMatchesFreshEvaluation) {
    for (const char * name : { "ktest-F32", "stories260K", "ktest-Q4_0" }) {
        REQUIRE_MODEL(name);
        const int32_t n_vocab = n_vocab_of(model);
        const std::vector<llama_token> toks = some_tokens(28, n_vocab, 21);
        const std::vector<llama_token> first(toks.begin(), toks.begin() + 24), next(toks.begin() + 24, toks.end());
        const bool q8_ok = llama_model_n_embd(model) / llama_model_n_head(model) % 32 == 0;
        for (ggml_type type : { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0 }) {
            if (type == GGML_TYPE_Q8_0 && !q8_ok) continue;
            SCOPED_TRACE(std::string(name) + " cache " + ggml_type_name(type));
            CtxPtr ctx(model, 28, 16, 2, type, type);
            ASSERT_NE(ctx.c, nullptr);
            ASSERT_FALSE(eval_all(ctx, first, 9).empty());  // positions 9..32
            // The cache is nearly full: a batch that does not fit is refused and changes nothing.
            std::vector<llama_token> too_many(5, 3);
            EXPECT_EQ(llama_decode(ctx, llama_batch_get_one(too_many.data(), 5)), 1);
            EXPECT_EQ(llama_kv_self_used_cells(ctx), 24);
            llama_kv_self_seq_add(ctx, 0, 0, -1, -9);  // now 0..23
            EXPECT_EQ(llama_kv_self_seq_pos_max(ctx, 0), 23);
            const std::vector<float> shifted = eval_one_by_one(ctx, next);

            CtxPtr fresh(model, 28, 16, 2, type, type);
            ASSERT_FALSE(eval_all(fresh, first).empty());
            const std::vector<float> ref = eval_one_by_one(fresh, next);
            ASSERT_EQ(shifted.size(), ref.size());
            const double kl = mean_kl(ref.data(), shifted.data(), (int32_t) next.size(), n_vocab);
            printf("[ %s, %s cache ] shifted vs fresh: mean KL %.3g\n", name, ggml_type_name(type), kl);
            // The re-rotated F16/Q8_0 keys are rounded to the cache type a second time.
            const bool quant_model = strstr(name, "Q4_0") != nullptr;
            EXPECT_LT(kl, quant_model || type == GGML_TYPE_Q8_0 ? 1e-3 : type == GGML_TYPE_F16 ? 1e-4 : 1e-7);

            // Positions are relative: the unshifted cache (9..32) continued at 33 gives the same
            // logits; position 24 is refused there (it goes back inside the sequence), and a
            // token 8 positions further on is far off.
            CtxPtr unshifted(model, 28, 16, 2, type, type);
            ASSERT_FALSE(eval_all(unshifted, first, 9).empty());
            llama_batch b = llama_batch_init(1, 0, 1);
            b.n_tokens = 1;
            b.token[0] = next[0];
            b.pos[0] = 24;
            b.logits[0] = 1;
            EXPECT_EQ(llama_decode(unshifted, b), -1);
            EXPECT_NE(take_errors().find("positions cannot go back within a sequence"), std::string::npos);
            b.pos[0] = 33;
            ASSERT_EQ(llama_decode(unshifted, b), 0);
            EXPECT_LT(mean_kl(ref.data(), llama_get_logits_ith(unshifted, 0), 1, n_vocab), 1e-3);
            llama_kv_self_seq_rm(unshifted, 0, 33, -1);
            b.pos[0] = 41;
            ASSERT_EQ(llama_decode(unshifted, b), 0);
            llama_batch_free(b);
            EXPECT_GT(mean_kl(ref.data(), llama_get_logits_ith(unshifted, 0), 1, n_vocab), 100 * kl + 1e-5);
        }
    }
}

// Removing tokens from the middle and shifting the rest down: in a one-layer model the cached
// keys and values depend only on each token and its position, so the result must equal a fresh
// evaluation of the remaining tokens. (With more layers the later tokens' cached states still
// carry what they saw of the removed ones, as in llama.cpp's context shift: no fresh
// evaluation reproduces that.)
TEST(Model, ContextShiftAfterRemovalMatchesFreshEvaluation) {
    const std::string src = model_path("ktest-F32");
    TU_REQUIRE_FILE(src);
    TempFile one_layer("one-layer.gguf");
    ASSERT_TRUE(rewrite_model(src, one_layer.path, [](gguf_context * g) { gguf_set_val_u32(g, "llama.block_count", 1); },
                              [](const ggml_tensor * t) { return strncmp(t->name, "blk.", 4) != 0 || strncmp(t->name, "blk.0.", 6) == 0; }));
    ModelPtr model(one_layer.path);
    ASSERT_NE(model.m, nullptr) << take_errors();
    ASSERT_EQ(llama_model_n_layer(model), 1);
    const int32_t n_vocab = n_vocab_of(model);
    const std::vector<llama_token> toks = some_tokens(28, n_vocab, 21);
    const std::vector<llama_token> first(toks.begin(), toks.begin() + 24), next(toks.begin() + 24, toks.end());
    std::vector<llama_token> kept(toks.begin(), toks.begin() + 4);
    kept.insert(kept.end(), toks.begin() + 12, toks.begin() + 24);

    for (ggml_type type : { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0 }) {
        SCOPED_TRACE(std::string("cache ") + ggml_type_name(type));
        CtxPtr ctx(model, 28, 16, 2, type, type);
        ASSERT_NE(ctx.c, nullptr);
        ASSERT_FALSE(eval_all(ctx, first).empty());
        ASSERT_TRUE(llama_kv_self_seq_rm(ctx, 0, 4, 12));
        llama_kv_self_seq_add(ctx, 0, 12, -1, -8);
        EXPECT_EQ(llama_kv_self_used_cells(ctx), 16);
        EXPECT_EQ(llama_kv_self_seq_pos_max(ctx, 0), 15);
        // Room again for a batch of 12.
        const std::vector<float> shifted = eval_one_by_one(ctx, next);

        CtxPtr fresh(model, 28, 16, 2, type, type);
        ASSERT_FALSE(eval_all(fresh, kept).empty());
        const std::vector<float> ref = eval_one_by_one(fresh, next);
        ASSERT_EQ(shifted.size(), ref.size());
        const double kl = mean_kl(ref.data(), shifted.data(), (int32_t) next.size(), n_vocab);
        printf("[ one layer, %s cache ] removed + shifted vs fresh: mean KL %.3g\n", ggml_type_name(type), kl);
        EXPECT_LT(kl, type == GGML_TYPE_Q8_0 ? 1e-4 : type == GGML_TYPE_F16 ? 1e-5 : 1e-7);
    }
}

TEST(Model, KvCacheClearAndRemoveTail) {
    REQUIRE_MODEL("stories260K");
    const int32_t n_vocab = n_vocab_of(model);
    const std::vector<llama_token> toks = some_tokens(20, n_vocab, 4);
    CtxPtr ctx(model, 32, 32);
    const std::vector<float> ref = eval_all(ctx, toks);
    // Regenerate the tail: remove positions >= 12 and evaluate the same tokens again.
    ASSERT_TRUE(llama_kv_self_seq_rm(ctx, 0, 12, -1));
    EXPECT_EQ(llama_kv_self_used_cells(ctx), 12);
    const std::vector<float> tail = eval_one_by_one(ctx, std::vector<llama_token>(toks.begin() + 12, toks.end()));
    EXPECT_LT(mean_kl(ref.data() + 12 * (size_t) n_vocab, tail.data(), 8, n_vocab), path_tolerance("stories260K"));
    llama_kv_self_clear(ctx);
    EXPECT_EQ(llama_kv_self_used_cells(ctx), 0);
    EXPECT_EQ(llama_kv_self_seq_pos_max(ctx, 0), -1);
    const std::vector<float> again = eval_all(ctx, toks);
    EXPECT_TRUE(again == ref);
    // Shifting everything below zero removes those cells.
    llama_kv_self_seq_add(ctx, 0, 0, 5, -5);
    EXPECT_EQ(llama_kv_self_used_cells(ctx), 15);
}

// ---- bad input -------------------------------------------------------------------------------
TEST(Model, DecodeRejectsBadBatches) {
    REQUIRE_MODEL("stories260K");
    CtxPtr ctx(model, 16, 8);
    ASSERT_NE(ctx.c, nullptr);
    take_errors();
    llama_token bad = 512;
    EXPECT_EQ(llama_decode(ctx, llama_batch_get_one(&bad, 1)), -1);
    bad = -3;
    EXPECT_EQ(llama_decode(ctx, llama_batch_get_one(&bad, 1)), -1);
    EXPECT_EQ(llama_decode(ctx, llama_batch_get_one(&bad, 0)), -1);
    EXPECT_NE(take_errors().find("out of range"), std::string::npos);
    std::vector<llama_token> many(17, 5);
    EXPECT_EQ(llama_decode(ctx, llama_batch_get_one(many.data(), 17)), -1);  // more than n_batch (the context)
    EXPECT_NE(take_errors().find("more than n_batch 16"), std::string::npos);
    EXPECT_EQ(llama_kv_self_used_cells(ctx), 0);
    EXPECT_EQ(llama_decode(ctx, llama_batch_get_one(many.data(), 16)), 0);
    EXPECT_EQ(llama_decode(ctx, llama_batch_get_one(many.data(), 1)), 1);  // full: make room first
    llama_batch neg = llama_batch_init(1, 0, 1);
    neg.n_tokens = 1;
    neg.pos[0] = -1;
    llama_kv_self_clear(ctx);
    EXPECT_EQ(llama_decode(ctx, neg), -1);
    llama_batch_free(neg);
    // Sequence ids are those of n_seq_max (1 here), and token ids are the only input.
    llama_batch seq = llama_batch_init(1, 0, 2);
    seq.n_tokens = 1;
    seq.token[0] = 5;
    seq.pos[0] = 0;
    seq.seq_id[0][0] = 1;
    EXPECT_EQ(llama_decode(ctx, seq), -1);
    EXPECT_NE(take_errors().find("has sequence id 1, out of range [0, 1)"), std::string::npos);
    seq.n_seq_id[0] = 2;
    seq.seq_id[0][0] = 0;
    seq.seq_id[0][1] = 1;
    EXPECT_EQ(llama_decode(ctx, seq), -1);
    EXPECT_NE(take_errors().find("has sequence id 1"), std::string::npos);
    seq.n_seq_id[0] = 0;
    EXPECT_EQ(llama_decode(ctx, seq), -1);
    EXPECT_NE(take_errors().find("belongs to no sequence"), std::string::npos);
    seq.n_seq_id[0] = 1;
    EXPECT_EQ(llama_kv_self_used_cells(ctx), 0);
    seq.pos[0] = 1;
    EXPECT_EQ(llama_decode(ctx, seq), 0);
    seq.pos[0] = 0;
    EXPECT_EQ(llama_decode(ctx, seq), -1);  // before position 1 in sequence 0
    EXPECT_NE(take_errors().find("positions cannot go back"), std::string::npos);
    EXPECT_EQ(llama_kv_self_used_cells(ctx), 1);
    llama_batch_free(seq);
    llama_batch emb = llama_batch_init(1, 64, 1);
    emb.n_tokens = 1;
    EXPECT_EQ(emb.token, nullptr);
    EXPECT_EQ(llama_decode(ctx, emb), -1);
    EXPECT_NE(take_errors().find("embeddings input"), std::string::npos);
    llama_batch_free(emb);
    EXPECT_EQ(llama_get_logits_ith(ctx, 1), nullptr);
    EXPECT_EQ(llama_get_logits_ith(ctx, -2), nullptr);
}

class ModelFiles : public testing::Test {
protected:
    // The model loaded from path must fail with a message containing `expect`.
    void expect_load_error(const std::string & path, const std::string & expect) {
        take_errors();
        ModelPtr m(path);
        EXPECT_EQ(m.m, nullptr) << path;
        const std::string errs = take_errors();
        EXPECT_NE(errs.find(expect), std::string::npos) << "message: " << errs;
    }
    void TearDown() override {
        for (const auto & f : files) unlink(f.c_str());
    }
    std::vector<std::string> files;
};

TEST_F(ModelFiles, MissingFile) {
    expect_load_error(temp_path("does-not-exist.gguf"), "cannot open");
    take_errors();
    llama_model * m = llama_model_load_from_file(nullptr, llama_model_default_params());
    EXPECT_EQ(m, nullptr);
}

TEST_F(ModelFiles, TruncatedAndCorruptFiles) {
    const std::string src = model_path("stories260K");
    TU_REQUIRE_FILE(src);
    std::ifstream in(src, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (size_t len : { (size_t) 0, (size_t) 3, (size_t) 100, bytes.size() / 2, bytes.size() - 1 }) {
        const std::string path = temp_path("truncated.gguf");
        files.push_back(path);
        std::ofstream(path, std::ios::binary).write(bytes.data(), (std::streamsize) len);
        SCOPED_TRACE(len);
        expect_load_error(path, "not a valid GGUF file");
    }
    std::vector<char> garbage = bytes;
    garbage[0] = 'X';
    const std::string path = temp_path("garbage.gguf");
    files.push_back(path);
    std::ofstream(path, std::ios::binary).write(garbage.data(), (std::streamsize) garbage.size());
    expect_load_error(path, "not a valid GGUF file");
    expect_load_error(testing::TempDir(), "not a regular file");
}

TEST_F(ModelFiles, WrongShapeMissingTensorWrongType) {
    TU_REQUIRE_FILE(model_path("stories260K"));
    // Copies of stories260K with the metadata edited, or one tensor left out or replaced.
    const std::string src = model_path("stories260K");
    ggml_init_params cp = { 1 << 20, nullptr, false };
    ggml_context * extra = ggml_init(cp);
    auto build = [&](const std::string & what, const char * name, ggml_tensor * replacement,
                     const std::function<void(gguf_context *)> & edit_meta) {
        const std::string path = temp_path(what + ".gguf");
        files.push_back(path);
        std::vector<ggml_tensor *> add;
        if (replacement) add.push_back(replacement);
        EXPECT_TRUE(rewrite_model(src, path, edit_meta,
                                  [&](const ggml_tensor * t) { return !name || strcmp(t->name, name) != 0; }, add));
        return path;
    };

    ggml_tensor * wrong = ggml_new_tensor_2d(extra, GGML_TYPE_F32, 64, 63);
    ggml_set_name(wrong, "blk.0.attn_q.weight");
    memset(wrong->data, 0, ggml_nbytes(wrong));
    expect_load_error(build("wrong-shape", "blk.0.attn_q.weight", wrong, nullptr), "wrong shape");

    expect_load_error(build("missing-tensor", "blk.3.ffn_up.weight", nullptr, nullptr),
                      "missing tensor 'blk.3.ffn_up.weight'");

    ggml_tensor * i32 = ggml_new_tensor_1d(extra, GGML_TYPE_I32, 64);
    ggml_set_name(i32, "blk.1.attn_norm.weight");
    memset(i32->data, 0, ggml_nbytes(i32));
    expect_load_error(build("wrong-type", "blk.1.attn_norm.weight", i32, nullptr), "has type i32");

    expect_load_error(build("unsupported-arch", nullptr, nullptr,
                            [](gguf_context * g) { gguf_set_val_str(g, "general.architecture", "mamba"); }),
                      "unsupported architecture 'mamba'");
    expect_load_error(build("no-arch", nullptr, nullptr,
                            [](gguf_context * g) { gguf_remove_key(g, "general.architecture"); }),
                      "general.architecture");
    expect_load_error(build("bad-heads", nullptr, nullptr,
                            [](gguf_context * g) { gguf_set_val_u32(g, "llama.attention.head_count", 7); }),
                      "not a multiple");
    expect_load_error(build("no-layers-key", nullptr, nullptr,
                            [](gguf_context * g) { gguf_remove_key(g, "llama.block_count"); }),
                      "missing hyper-parameter llama.block_count");
    expect_load_error(build("string-heads", nullptr, nullptr,
                            [](gguf_context * g) { gguf_set_val_str(g, "llama.attention.head_count", "8"); }),
                      "expected an integer");
    expect_load_error(build("bad-vocab-size", nullptr, nullptr,
                            [](gguf_context * g) { gguf_set_val_u32(g, "llama.vocab_size", 1000); }),
                      "vocab_size");
    expect_load_error(build("bad-rope-scaling", nullptr, nullptr,
                            [](gguf_context * g) { gguf_set_val_str(g, "llama.rope.scaling.type", "bogus"); }),
                      "rope.scaling.type");

    // Without tokenizer metadata the model loads with an empty vocabulary (and a warning).
    const std::string no_tok = build("no-tokenizer", nullptr, nullptr, [](gguf_context * g) {
        for (int64_t i = gguf_get_n_kv(g) - 1; i >= 0; i--) {
            if (strncmp(gguf_get_key(g, i), "tokenizer.", 10) == 0) gguf_remove_key(g, gguf_get_key(g, i));
        }
    });
    take_errors();
    {
        ModelPtr m(no_tok);
        ASSERT_NE(m.m, nullptr) << take_errors();
        EXPECT_NE(take_errors().find("no tokenizer"), std::string::npos);
        EXPECT_EQ(llama_vocab_n_tokens(llama_model_get_vocab(m)), 0);
        CtxPtr ctx(m, 16, 16);
        ASSERT_NE(ctx.c, nullptr);
        std::vector<llama_token> t = { 1, 42, 7 };
        EXPECT_EQ(llama_decode(ctx, llama_batch_get_one(t.data(), 3)), 0);
        EXPECT_NE(llama_get_logits(ctx), nullptr);
    }
    ggml_free(extra);
}

TEST_F(ModelFiles, VocabOnly) {
    // The vocabulary-only files have no tensors; any architecture's tokenizer loads.
    for (const char * f : { "ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf", "ggml-vocab-phi-3.gguf" }) {
        const std::string path = tu::models_dir() + "/vocab/" + f;
        if (!tu::file_exists(path)) continue;
        SCOPED_TRACE(f);
        ModelPtr m(path, true, true);
        ASSERT_NE(m.m, nullptr) << take_errors();
        EXPECT_GT(llama_vocab_n_tokens(llama_model_get_vocab(m)), 0);
        take_errors();
        // A context for tokenizing (as llama.cpp gives one); decoding is refused.
        llama_context * ctx = llama_init_from_model(m, llama_context_default_params());
        ASSERT_NE(ctx, nullptr) << take_errors();
        llama_token t = 1;
        EXPECT_EQ(llama_decode(ctx, llama_batch_get_one(&t, 1)), -1);
        EXPECT_NE(take_errors().find("vocab_only"), std::string::npos);
        llama_free(ctx);
        // Without vocab_only there are no tensors to load.
        expect_load_error(path, strstr(f, "gpt-2") ? "unsupported architecture" : "missing tensor");
    }
}

// ---- an independent reference: the forward pass in double precision -------------------------
// Reads an all-F32 llama/qwen2 GGUF and evaluates tokens at positions 0..n-1 naively.
struct NaiveModel {
    int n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, n_ff = 0, n_vocab = 0, n_rot = 0;
    float eps = 1e-5f, freq_base = 10000.0f, freq_scale = 1.0f;
    bool neox = false;
    gguf_context * g = nullptr;
    ggml_context * data = nullptr;

    ~NaiveModel() {
        gguf_free(g);
        ggml_free(data);
    }
    bool load(const std::string & path) {
        gguf_init_params ip = { false, &data, false };
        g = gguf_init_from_file(path.c_str(), ip);
        if (!g) return false;
        const std::string arch = gguf_get_val_str(g, gguf_find_key(g, "general.architecture"));
        neox = arch == "qwen2";
        auto u32 = [&](const char * k, int def) {
            const int64_t id = gguf_find_key(g, (arch + "." + k).c_str());
            return id < 0 ? def : (int) gguf_get_val_u32(g, id);
        };
        auto f32 = [&](const char * k, float def) {
            const int64_t id = gguf_find_key(g, (arch + "." + k).c_str());
            return id < 0 ? def : gguf_get_val_f32(g, id);
        };
        n_embd = u32("embedding_length", 0);
        n_layer = u32("block_count", 0);
        n_head = u32("attention.head_count", 0);
        n_head_kv = u32("attention.head_count_kv", n_head);
        n_ff = u32("feed_forward_length", 0);
        n_rot = u32("rope.dimension_count", n_embd / n_head);
        eps = f32("attention.layer_norm_rms_epsilon", 1e-5f);
        freq_base = f32("rope.freq_base", 10000.0f);
        const int64_t st = gguf_find_key(g, (arch + ".rope.scaling.type").c_str());
        if (st >= 0 && std::string(gguf_get_val_str(g, st)) == "linear") freq_scale = 1.0f / f32("rope.scaling.factor", 1.0f);
        n_vocab = (int) ggml_get_tensor(data, "token_embd.weight")->ne[1];
        return true;
    }
    const float * w(const std::string & name) const {
        ggml_tensor * t = ggml_get_tensor(data, name.c_str());
        return t ? (const float *) t->data : nullptr;
    }
    // y = W x (+ b) for W [n_in, n_out] as ggml stores it.
    std::vector<double> matvec(const std::string & name, const std::vector<double> & x, const std::string & bias = "") const {
        ggml_tensor * t = ggml_get_tensor(data, name.c_str());
        const int64_t n_in = t->ne[0], n_out = t->ne[1];
        const float * W = (const float *) t->data;
        const float * b = bias.empty() ? nullptr : w(bias);
        std::vector<double> y((size_t) n_out);
        for (int64_t o = 0; o < n_out; o++) {
            double acc = b ? b[o] : 0.0;
            for (int64_t i = 0; i < n_in; i++) acc += (double) W[o * n_in + i] * x[(size_t) i];
            y[(size_t) o] = acc;
        }
        return y;
    }
    std::vector<double> rms_norm(const std::vector<double> & x, const std::string & weight) const {
        double ss = 0;
        for (double v : x) ss += v * v;
        const double scale = 1.0 / std::sqrt(ss / x.size() + eps);
        const float * wt = w(weight);
        std::vector<double> y(x.size());
        for (size_t i = 0; i < x.size(); i++) y[i] = x[i] * scale * wt[i];
        return y;
    }
    void rope(std::vector<double> & v, int n_heads, int pos) const {
        const int hd = n_embd / n_head;
        for (int h = 0; h < n_heads; h++) {
            double * x = v.data() + (size_t) h * hd;
            for (int j = 0; j < n_rot / 2; j++) {
                const double theta = pos * freq_scale * std::pow((double) freq_base, -2.0 * j / n_rot);
                const int a = neox ? j : 2 * j, b = neox ? j + n_rot / 2 : 2 * j + 1;
                const double x0 = x[a], x1 = x[b];
                x[a] = x0 * std::cos(theta) - x1 * std::sin(theta);
                x[b] = x0 * std::sin(theta) + x1 * std::cos(theta);
            }
        }
    }
    bool has(const std::string & name) const { return ggml_get_tensor(data, name.c_str()) != nullptr; }

    std::vector<float> forward(const std::vector<llama_token> & toks) const {
        const int n = (int) toks.size(), hd = n_embd / n_head, group = n_head / n_head_kv;
        std::vector<std::vector<double>> x((size_t) n, std::vector<double>((size_t) n_embd));
        const float * E = w("token_embd.weight");
        for (int t = 0; t < n; t++) {
            for (int i = 0; i < n_embd; i++) x[t][i] = E[(size_t) toks[t] * n_embd + i];
        }
        for (int l = 0; l < n_layer; l++) {
            const std::string p = "blk." + std::to_string(l) + ".";
            auto bias = [&](const char * name) { return has(p + name) ? p + name : std::string(); };
            std::vector<std::vector<double>> q(n), k(n), v(n);
            for (int t = 0; t < n; t++) {
                const std::vector<double> h = rms_norm(x[t], p + "attn_norm.weight");
                q[t] = matvec(p + "attn_q.weight", h, bias("attn_q.bias"));
                k[t] = matvec(p + "attn_k.weight", h, bias("attn_k.bias"));
                v[t] = matvec(p + "attn_v.weight", h, bias("attn_v.bias"));
                rope(q[t], n_head, t);
                rope(k[t], n_head_kv, t);
            }
            for (int t = 0; t < n; t++) {
                std::vector<double> att((size_t) n_embd, 0.0);
                for (int h = 0; h < n_head; h++) {
                    const int g = h / group;
                    std::vector<double> s((size_t) t + 1);
                    double mx = -INFINITY;
                    for (int j = 0; j <= t; j++) {
                        double d = 0;
                        for (int i = 0; i < hd; i++) d += q[t][h * hd + i] * k[j][g * hd + i];
                        s[j] = d / std::sqrt((double) hd);
                        mx = std::max(mx, s[j]);
                    }
                    double sum = 0;
                    for (int j = 0; j <= t; j++) sum += s[j] = std::exp(s[j] - mx);
                    for (int j = 0; j <= t; j++) {
                        for (int i = 0; i < hd; i++) att[h * hd + i] += s[j] / sum * v[j][g * hd + i];
                    }
                }
                const std::vector<double> o = matvec(p + "attn_output.weight", att);
                for (int i = 0; i < n_embd; i++) x[t][i] += o[i];
                const std::vector<double> h = rms_norm(x[t], p + "ffn_norm.weight");
                std::vector<double> gate = matvec(p + "ffn_gate.weight", h);
                const std::vector<double> up = matvec(p + "ffn_up.weight", h);
                for (int i = 0; i < n_ff; i++) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
                const std::vector<double> d = matvec(p + "ffn_down.weight", gate);
                for (int i = 0; i < n_embd; i++) x[t][i] += d[i];
            }
        }
        std::vector<float> logits;
        const std::string out = has("output.weight") ? "output.weight" : "token_embd.weight";
        for (int t = 0; t < n; t++) {
            const std::vector<double> y = matvec(out, rms_norm(x[t], "output_norm.weight"));
            logits.insert(logits.end(), y.begin(), y.end());
        }
        return logits;
    }
};

// The runtime (F32 KV cache) against the naive forward pass on llama and on qwen2 (NEOX RoPE,
// Q/K/V biases) variants of ktest-F32, with linear RoPE scaling, grouped-query attention and
// tied embeddings.
TEST(Model, MatchesNaiveForwardPass) {
    const std::string src = model_path("ktest-F32");
    TU_REQUIRE_FILE(src);
    ggml_init_params cp = { 1 << 20, nullptr, false };
    ggml_context * extra = ggml_init(cp);
    std::mt19937 rng(17);
    std::vector<ggml_tensor *> biases;
    for (int l = 0; l < 4; l++) {
        const int64_t sizes[3] = { 256, 128, 128 };
        const char * names[3] = { "attn_q.bias", "attn_k.bias", "attn_v.bias" };
        for (int i = 0; i < 3; i++) {
            ggml_tensor * b = ggml_new_tensor_1d(extra, GGML_TYPE_F32, sizes[i]);
            ggml_format_name(b, "blk.%d.%s", l, names[i]);
            tu::fill_uniform(b, rng, -0.5f, 0.5f);
            biases.push_back(b);
        }
    }
    // llama.* keys renamed for another architecture.
    auto rename_arch = [](gguf_context * g, const char * arch) {
        gguf_set_val_str(g, "general.architecture", arch);
        for (int64_t i = gguf_get_n_kv(g) - 1; i >= 0; i--) {
            const std::string key = gguf_get_key(g, i);
            if (key.rfind("llama.", 0) != 0) continue;
            const std::string nk = std::string(arch) + key.substr(5);
            if (gguf_get_kv_type(g, i) == GGUF_TYPE_UINT32) gguf_set_val_u32(g, nk.c_str(), gguf_get_val_u32(g, i));
            else if (gguf_get_kv_type(g, i) == GGUF_TYPE_FLOAT32) gguf_set_val_f32(g, nk.c_str(), gguf_get_val_f32(g, i));
        }
    };
    struct Variant {
        const char * what;
        std::function<void(gguf_context *)> meta;
        std::function<bool(const ggml_tensor *)> keep;
        std::vector<ggml_tensor *> extra;
    };
    const std::vector<Variant> variants = {
        { "llama", nullptr, nullptr, {} },
        { "llama-linear-rope",
          [](gguf_context * g) {
              gguf_set_val_str(g, "llama.rope.scaling.type", "linear");
              gguf_set_val_f32(g, "llama.rope.scaling.factor", 4.0f);
              gguf_set_val_f32(g, "llama.rope.freq_base", 500.0f);
          },
          nullptr, {} },
        { "llama-tied", nullptr, [](const ggml_tensor * t) { return strcmp(t->name, "output.weight") != 0; }, {} },
        { "qwen2", [&](gguf_context * g) { rename_arch(g, "qwen2"); }, nullptr, biases },
    };
    for (const Variant & v : variants) {
        SCOPED_TRACE(v.what);
        TempFile file(std::string(v.what) + ".gguf");
        ASSERT_TRUE(rewrite_model(src, file.path, v.meta, v.keep, v.extra));
        NaiveModel naive;
        ASSERT_TRUE(naive.load(file.path));
        ModelPtr model(file.path);
        ASSERT_NE(model.m, nullptr) << take_errors();
        const int32_t n_vocab = n_vocab_of(model);
        const std::vector<llama_token> toks = some_tokens(12, n_vocab, 23);
        const std::vector<float> ref = naive.forward(toks);
        for (ggml_type cache : { GGML_TYPE_F32, GGML_TYPE_F16 }) {
            CtxPtr ctx(model, 32, 32, 2, cache, cache);
            ASSERT_NE(ctx.c, nullptr);
            const std::vector<float> got = eval_all(ctx, toks);
            ASSERT_EQ(got.size(), ref.size());
            const double kl = mean_kl(ref.data(), got.data(), (int32_t) toks.size(), n_vocab);
            printf("[ %s, %s cache ] mean KL vs double-precision forward pass %.3g\n", v.what, ggml_type_name(cache), kl);
            EXPECT_LT(kl, cache == GGML_TYPE_F32 ? 1e-9 : 1e-6);
        }
    }
    ggml_free(extra);
}

// llama_context_params' RoPE overrides (context extension): a base and a linear scale given by
// the context rotate as the naive pass does with those values; NONE as the scaling type undoes
// the scale; the model's own values come back with the defaults.
TEST(Model, ContextRopeOverridesMatchNaiveForwardPass) {
    const std::string path = model_path("ktest-F32");
    TU_REQUIRE_FILE(path);
    NaiveModel naive;
    ASSERT_TRUE(naive.load(path));
    ModelPtr model(path);
    ASSERT_NE(model.m, nullptr) << take_errors();
    const int32_t n_vocab = n_vocab_of(model);
    const std::vector<llama_token> toks = some_tokens(12, n_vocab, 29);
    struct Case {
        float base, scale;
        llama_rope_scaling_type type;
        double want_base, want_scale;
    };
    for (const Case & c : { Case{ 500.0f, 0.25f, LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED, 500.0, 0.25 },
                            Case{ 0.0f, 0.25f, LLAMA_ROPE_SCALING_TYPE_LINEAR, naive.freq_base, 0.25 },
                            Case{ 2000.0f, 0.25f, LLAMA_ROPE_SCALING_TYPE_NONE, 2000.0, 1.0 },
                            Case{ 0.0f, 0.0f, LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED, naive.freq_base, naive.freq_scale } }) {
        SCOPED_TRACE(std::to_string(c.base) + " " + std::to_string(c.scale) + " " + std::to_string((int) c.type));
        NaiveModel ref;
        ASSERT_TRUE(ref.load(path));
        ref.freq_base = (float) c.want_base;
        ref.freq_scale = (float) c.want_scale;
        llama_context_params cp = llama_context_default_params();
        cp.n_ctx = cp.n_batch = cp.n_ubatch = 32;
        cp.type_k = cp.type_v = GGML_TYPE_F32;
        cp.rope_freq_base = c.base;
        cp.rope_freq_scale = c.scale;
        cp.rope_scaling_type = c.type;
        llama_context * ctx = llama_init_from_model(model, cp);
        ASSERT_NE(ctx, nullptr) << take_errors();
        const std::vector<float> got = eval_all(ctx, toks);
        llama_free(ctx);
        const std::vector<float> want = ref.forward(toks);
        EXPECT_LT(mean_kl(want.data(), got.data(), (int32_t) toks.size(), n_vocab), 1e-9);
    }
    // An invalid base is refused.
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 32;
    cp.rope_freq_base = -1.0f;
    EXPECT_EQ(llama_init_from_model(model, cp), nullptr);
    EXPECT_NE(take_errors().find("invalid RoPE parameters"), std::string::npos);
}

// ---- llama-logits ----------------------------------------------------------------------------
// The program in the bin folder, run under the cross emulator in cross builds; empty (the test
// skips) when it is absent.
std::string logits_program() {
    const std::string prog = std::string(LLAMA_BIN_DIR) + "/llama-logits";
    if (!tu::file_exists(prog)) return "";
    const std::string cmd = std::string(LLAMA_EMULATOR) + " '" + prog + "'";
    if (system((cmd + " --help > /dev/null 2>&1").c_str()) != 0) return "";
    return cmd;
}

int run_quiet(const std::string & cmd) {
    const int rc = system((cmd + " > /dev/null 2>&1").c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(LogitsProgram, WritesReferenceFormat) {
    const std::string prog = logits_program();
    if (prog.empty()) GTEST_SKIP() << "llama-logits not built next to this test";
    for (const char * name : { "stories260K", "ktest-Q4_K_M" }) {
        SCOPED_TRACE(name);
        TU_REQUIRE_FILE(model_path(name));
        TU_REQUIRE_FILE(reference_path(name));
        LogitsFile ref, got;
        ASSERT_TRUE(read_logits_file(reference_path(name), ref));
        TempFile out(std::string(name) + ".logits");
        ASSERT_EQ(run_quiet(prog + " -m '" + model_path(name) + "' -p 'Once upon a time' -t 2 -o '" + out.path + "'"), 0);
        ASSERT_TRUE(read_logits_file(out.path, got));
        EXPECT_EQ(got.tokens, ref.tokens);
        ASSERT_EQ(got.logits.size(), ref.logits.size());
        EXPECT_LT(mean_kl(ref.logits.data(), got.logits.data(), (int32_t) ref.tokens.size(), ref.n_vocab),
                  path_tolerance(name) < 1e-5 ? 1e-5 : 1e-3);
        // The same tokens given by id.
        TempFile out2(std::string(name) + "-ids.logits");
        std::string ids;
        for (llama_token t : ref.tokens) ids += (ids.empty() ? "" : ",") + std::to_string(t);
        ASSERT_EQ(run_quiet(prog + " -m '" + model_path(name) + "' --tokens " + ids + " -o '" + out2.path + "'"), 0);
        LogitsFile got2;
        ASSERT_TRUE(read_logits_file(out2.path, got2));
        EXPECT_TRUE(got2.logits == got.logits);
    }
}

TEST(LogitsProgram, FailsCleanly) {
    const std::string prog = logits_program();
    if (prog.empty()) GTEST_SKIP() << "llama-logits not built next to this test";
    const std::string model = model_path("stories260K");
    TU_REQUIRE_FILE(model);
    TempFile out("never-written.logits");
    const std::string o = " -o '" + out.path + "'";
    const std::string m = " -m '" + model + "'";
    for (const std::string & args : { std::string(""), m, m + " -p", " -m /no/such/model.gguf -p hi" + o,
                                      m + " -p hi -t 0" + o, m + " -p hi -t x" + o, m + " --bogus" + o,
                                      m + " --tokens 1,99999" + o, m + " --tokens 1,,2" + o,
                                      m + " -p hi -o /no/such/dir/out.logits" }) {
        SCOPED_TRACE(args);
        EXPECT_NE(run_quiet(prog + args), 0);
        EXPECT_FALSE(tu::file_exists(out.path));
    }
}

// ---- model information -----------------------------------------------------------------------
TEST(Model, Information) {
    REQUIRE_MODEL("stories260K");
    EXPECT_EQ(llama_model_n_embd(model), 64);
    EXPECT_EQ(llama_model_n_layer(model), 5);
    EXPECT_EQ(llama_model_n_head(model), 8);
    EXPECT_EQ(llama_model_n_head_kv(model), 4);
    EXPECT_EQ(llama_model_n_ctx_train(model), 2048);
    EXPECT_GT(llama_model_n_params(model), 250000u);
    EXPECT_LT(llama_model_n_params(model), 300000u);
    EXPECT_EQ(llama_model_size(model), llama_model_n_params(model) * 4);  // all F32
    char buf[64];
    const int32_t n = llama_model_desc(model, buf, sizeof(buf));
    EXPECT_EQ(std::string(buf), "llama 293K F32 (guessed)");  // no general.file_type in this file
    EXPECT_EQ(n, (int32_t) strlen(buf));
    char small[4];
    EXPECT_EQ(llama_model_desc(model, small, sizeof(small)), n);
    EXPECT_EQ(std::string(small), "lla");
    EXPECT_EQ(llama_model_meta_val_str(model, "general.architecture", buf, sizeof(buf)), 5);
    EXPECT_EQ(std::string(buf), "llama");
    EXPECT_GT(llama_model_meta_val_str(model, "llama.attention.layer_norm_rms_epsilon", buf, sizeof(buf)), 0);
    EXPECT_EQ(std::string(buf), "1e-05");
    EXPECT_EQ(llama_model_meta_val_str(model, "llama.block_count", buf, sizeof(buf)), 1);
    EXPECT_EQ(llama_model_meta_val_str(model, "no.such.key", buf, sizeof(buf)), -1);
    char big[512];
    EXPECT_GT(llama_model_meta_val_str(model, "tokenizer.ggml.scores", big, sizeof(big)), 0);
    EXPECT_EQ(big[0], '[');
    EXPECT_NE(std::string(big).find(", ...]"), std::string::npos);
    EXPECT_EQ(llama_model_chat_template(model, nullptr), nullptr);

    CtxPtr ctx(model, 100, 500);
    ASSERT_NE(ctx.c, nullptr);
    EXPECT_EQ(llama_n_ctx(ctx), 100u);
    EXPECT_EQ(llama_n_batch(ctx), 100u);  // clamped to n_ctx
    EXPECT_EQ(llama_n_ubatch(ctx), 100u);  // clamped to n_batch
    EXPECT_EQ(llama_get_model(ctx), model.m);
    CtxPtr deflt(model, 0, 0);
    ASSERT_NE(deflt.c, nullptr);
    EXPECT_EQ(llama_n_ctx(deflt), 2048u);  // the training context
}

// ---- greedy generation against llama2.c ------------------------------------------------------
// stories260K at temperature 0 from BOS: llama2.c's text (256 steps: each one evaluates a
// token at positions 0..255 and prints the next).
TEST(Model, GreedyStories260KMatchesLlama2c) {
    const std::string ref_path = tu::shared_dir() + "/reference/stories260K-greedy.txt";
    TU_REQUIRE_FILE(ref_path);
    REQUIRE_MODEL("stories260K");
    std::ifstream rf(ref_path, std::ios::binary);
    std::string expected((std::istreambuf_iterator<char>(rf)), std::istreambuf_iterator<char>());
    while (!expected.empty() && expected.back() == '\n') expected.pop_back();
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int32_t n_vocab = n_vocab_of(model);

    CtxPtr ctx(model, 256, 64);
    llama_token tok = llama_vocab_bos(vocab);
    std::string text;
    for (int step = 0; step < 256; step++) {
        ASSERT_EQ(llama_decode(ctx, llama_batch_get_one(&tok, 1)), 0);
        tok = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
        if (tok == llama_vocab_bos(vocab) || tok == llama_vocab_eos(vocab)) break;
        char piece[64];
        const int32_t n = llama_token_to_piece(vocab, tok, piece, sizeof(piece), 0, false);
        ASSERT_GE(n, 0);
        text.append(piece, (size_t) n);
    }
    if (!text.empty() && text[0] == ' ') text.erase(0, 1);  // SentencePiece's leading space
    while (!text.empty() && text.back() == '\n') text.pop_back();
    EXPECT_EQ(text, expected);
}

// ---- llama.cpp's parameters and functions ------------------------------------------------------
TEST(LlamaApi, DefaultParamsAreLlamaCpps) {
    const llama_model_params mp = llama_model_default_params();
    EXPECT_EQ(mp.devices, nullptr);
    EXPECT_EQ(mp.n_gpu_layers, 0);
    EXPECT_EQ(mp.split_mode, LLAMA_SPLIT_MODE_LAYER);
    EXPECT_EQ(mp.kv_overrides, nullptr);
    EXPECT_TRUE(mp.use_mmap);
    EXPECT_FALSE(mp.use_mlock || mp.check_tensors || mp.vocab_only);
    const llama_context_params cp = llama_context_default_params();
    EXPECT_EQ(cp.n_batch, 2048u);
    EXPECT_EQ(cp.n_ubatch, 512u);
    EXPECT_EQ(cp.n_seq_max, 1u);
    EXPECT_EQ(cp.n_threads_batch, cp.n_threads);
    EXPECT_EQ(cp.rope_scaling_type, LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED);
    EXPECT_EQ(cp.pooling_type, LLAMA_POOLING_TYPE_UNSPECIFIED);
    EXPECT_EQ(cp.yarn_ext_factor, -1.0f);
    EXPECT_EQ(cp.type_k, GGML_TYPE_F16);
    EXPECT_TRUE(cp.offload_kqv && cp.no_perf);
    EXPECT_FALSE(cp.logits_all || cp.embeddings || cp.flash_attn);
    EXPECT_EQ(cp.abort_callback, nullptr);
    EXPECT_TRUE(llama_sampler_chain_default_params().no_perf);
}

// kv_overrides replace metadata before it is read; the progress callback may cancel a load;
// check_tensors finds a NaN; use_mlock locks (or warns).
TEST_F(ModelFiles, ModelParams) {
    const std::string src = model_path("stories260K");
    TU_REQUIRE_FILE(src);
    llama_model_kv_override ov[4] = {};
    ov[0].tag = LLAMA_KV_OVERRIDE_TYPE_INT;
    strcpy(ov[0].key, "llama.context_length");
    ov[0].val_i64 = 512;
    ov[1].tag = LLAMA_KV_OVERRIDE_TYPE_STR;
    strcpy(ov[1].key, "general.name");
    strcpy(ov[1].val_str, "renamed");
    ov[2].tag = LLAMA_KV_OVERRIDE_TYPE_FLOAT;  // a string key: skipped
    strcpy(ov[2].key, "general.architecture");
    ov[2].val_f64 = 1.0;
    llama_model_params mp = llama_model_default_params();
    mp.kv_overrides = ov;
    std::vector<float> progress;  // every call, as llama.cpp makes them: before each tensor, then 1.0
    mp.progress_callback = [](float p, void * ud) { ((std::vector<float> *) ud)->push_back(p); return true; };
    mp.progress_callback_user_data = &progress;
    mp.use_mlock = true;
    mp.check_tensors = true;
    take_errors();
    llama_model * m = llama_model_load_from_file(src.c_str(), mp);
    ASSERT_NE(m, nullptr) << take_errors();
    EXPECT_NE(take_errors().find("override of 'general.architecture' is a float but the key has type str"), std::string::npos);
    ASSERT_GE(progress.size(), 3u);
    EXPECT_EQ(progress.front(), 0.0f);
    EXPECT_EQ(progress.back(), 1.0f);
    EXPECT_TRUE(std::is_sorted(progress.begin(), progress.end()));
    EXPECT_LT(progress[progress.size() - 2], 1.0f);
    {
        gguf_init_params gp = { true, nullptr, false };
        gguf_context * g = gguf_init_from_file(src.c_str(), gp);
        ASSERT_NE(g, nullptr);
        EXPECT_EQ((int64_t) progress.size(), gguf_get_n_tensors(g) + 1);  // one call per tensor, then 1.0
        gguf_free(g);
    }
    EXPECT_EQ(llama_model_n_ctx_train(m), 512);
    char buf[64];
    EXPECT_EQ(llama_model_meta_val_str(m, "general.name", buf, sizeof(buf)), 7);
    EXPECT_STREQ(buf, "renamed");
    llama_model_free(m);

    mp = llama_model_default_params();
    mp.progress_callback = [](float, void *) { return false; };
    EXPECT_EQ(llama_model_load_from_file(src.c_str(), mp), nullptr);
    EXPECT_NE(take_errors().find("cancelled by the progress callback"), std::string::npos);
    // Cancelled half way (the fifth call), and at the last one (1.0: as llama.cpp, still honoured).
    for (int stop_at : { 5, (int) progress.size() }) {
        int calls = 0;
        std::pair<int *, int> st = { &calls, stop_at };
        mp.progress_callback = [](float, void * ud) {
            auto * s = (std::pair<int *, int> *) ud;
            return ++*s->first < s->second;
        };
        mp.progress_callback_user_data = &st;
        EXPECT_EQ(llama_model_load_from_file(src.c_str(), mp), nullptr);
        EXPECT_EQ(calls, stop_at);
        EXPECT_NE(take_errors().find("cancelled by the progress callback"), std::string::npos);
    }

    ggml_init_params ip = { 1 << 16, nullptr, false };
    ggml_context * extra = ggml_init(ip);
    ggml_tensor * nan = ggml_new_tensor_1d(extra, GGML_TYPE_F32, 64);
    ggml_set_name(nan, "blk.2.ffn_norm.weight");
    for (int i = 0; i < 64; i++) ggml_set_f32_1d(nan, i, i == 5 ? NAN : 1.0f);
    const std::string path = temp_path("nan.gguf");
    files.push_back(path);
    ASSERT_TRUE(rewrite_model(src, path, nullptr, [](const ggml_tensor * t) { return strcmp(t->name, "blk.2.ffn_norm.weight") != 0; },
                              { nan }));
    ggml_free(extra);
    ModelPtr unchecked(path);
    EXPECT_NE(unchecked.m, nullptr);  // not checked by default
    mp = llama_model_default_params();
    mp.check_tensors = true;
    EXPECT_EQ(llama_model_load_from_file(path.c_str(), mp), nullptr);
    EXPECT_NE(take_errors().find("tensor 'blk.2.ffn_norm.weight' has a non-finite value (row 0, column 5)"), std::string::npos);
}

TEST(LlamaApi, ContextParams) {
    REQUIRE_MODEL("stories260K");
    const int32_t n_vocab = n_vocab_of(model);
    std::vector<llama_token> toks = some_tokens(6, n_vocab, 3);
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 32;
    cp.n_threads = 1;
    cp.n_threads_batch = 2;
    cp.logits_all = true;
    cp.n_seq_max = 2;               // sequence ids 0 and 1
    take_errors();
    llama_context * ctx = llama_init_from_model(model, cp);
    ASSERT_NE(ctx, nullptr);
    EXPECT_EQ(llama_n_seq_max(ctx), 2u);
    EXPECT_EQ(llama_n_threads(ctx), 1);
    EXPECT_EQ(llama_n_threads_batch(ctx), 2);
    EXPECT_EQ(llama_n_batch(ctx), 32u);
    EXPECT_EQ(llama_n_ubatch(ctx), 32u);
    EXPECT_EQ(llama_pooling_type(ctx), LLAMA_POOLING_TYPE_NONE);

    // logits_all: every token of a batch without output flags keeps its logits.
    ASSERT_EQ(llama_decode(ctx, llama_batch_get_one(toks.data(), 6)), 0);
    for (int i = 0; i < 6; i++) EXPECT_NE(llama_get_logits_ith(ctx, i), nullptr) << i;
    // no_perf (the default): counts, no times.
    llama_perf_context_data perf = llama_perf_context(ctx);
    EXPECT_EQ(perf.n_p_eval, 6);
    EXPECT_EQ(perf.t_p_eval_ms, 0.0);
    EXPECT_GT(perf.t_start_ms, 0.0);

    // An abort callback that says stop: llama_decode returns 2 and the cache is unchanged.
    int polls = 0;
    llama_set_abort_callback(ctx, [](void * data) { return ++*(int *) data > 0; }, &polls);
    EXPECT_EQ(llama_decode(ctx, llama_batch_get_one(toks.data(), 2)), 2);
    EXPECT_GT(polls, 0);
    EXPECT_EQ(llama_get_kv_cache_used_cells(ctx), 6);
    llama_set_abort_callback(ctx, nullptr, nullptr);
    EXPECT_EQ(llama_decode(ctx, llama_batch_get_one(toks.data(), 2)), 0);
    EXPECT_EQ(llama_get_kv_cache_used_cells(ctx), 8);
    llama_set_n_threads(ctx, 2, 1);
    EXPECT_EQ(llama_n_threads(ctx), 2);
    EXPECT_EQ(llama_n_threads_batch(ctx), 1);
    llama_synchronize(ctx);
    llama_free(ctx);
}

// cb_eval: asked for every node of the graph; the nodes it wants come back computed (the logits
// equal llama_get_logits'); returning false then cancels the decode (2, the cache unchanged).
TEST(LlamaApi, EvalCallbackSeesTheNodes) {
    REQUIRE_MODEL("stories260K");
    const int32_t n_vocab = n_vocab_of(model);
    struct seen_t {
        int asked = 0, shown = 0;
        std::vector<float> logits;
        bool stop = false;
    } seen;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 32;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.cb_eval = [](ggml_tensor * t, bool ask, void * ud) {
        seen_t * s = (seen_t *) ud;
        const bool logits = strcmp(t->name, "logits") == 0;
        if (ask) {
            s->asked++;
            return logits;
        }
        s->shown++;
        s->logits.assign((const float *) t->data, (const float *) t->data + ggml_nelements(t));
        return !s->stop;
    };
    cp.cb_eval_user_data = &seen;
    llama_context * ctx = llama_init_from_model(model, cp);
    ASSERT_NE(ctx, nullptr);
    EXPECT_EQ(take_errors().find("cb_eval"), std::string::npos);
    std::vector<llama_token> toks = some_tokens(6, n_vocab, 8);
    ASSERT_EQ(llama_decode(ctx, llama_batch_get_one(toks.data(), 6)), 0);
    EXPECT_GT(seen.asked, 20);
    EXPECT_EQ(seen.shown, 1);
    ASSERT_EQ(seen.logits.size(), (size_t) n_vocab);
    EXPECT_TRUE(std::equal(seen.logits.begin(), seen.logits.end(), llama_get_logits_ith(ctx, -1)));
    seen.stop = true;
    EXPECT_EQ(llama_decode(ctx, llama_batch_get_one(toks.data(), 2)), 2);
    EXPECT_EQ(llama_kv_self_used_cells(ctx), 6);
    llama_free(ctx);
}

// llama.cpp's llama_kv_cache_* names, and dividing positions.
TEST(LlamaApi, KvCacheFunctions) {
    REQUIRE_MODEL("stories260K");
    const int32_t n_vocab = n_vocab_of(model);
    const std::vector<llama_token> toks = some_tokens(10, n_vocab, 5);
    CtxPtr ctx(model, 32, 32);
    ASSERT_FALSE(eval_all(ctx, toks).empty());
    EXPECT_EQ(llama_get_kv_cache_token_count(ctx), 10);
    EXPECT_EQ(llama_kv_cache_seq_pos_max(ctx, 0), 9);
    EXPECT_EQ(llama_kv_cache_seq_pos_max(ctx, 1), -1);
    EXPECT_TRUE(llama_kv_cache_can_shift(ctx));
    llama_kv_cache_seq_div(ctx, 0, 4, -1, 2);  // 4..9 -> 2..4
    EXPECT_EQ(llama_kv_cache_seq_pos_max(ctx, 0), 4);
    llama_kv_cache_update(ctx);  // re-rotates now
    llama_kv_cache_defrag(ctx);
    EXPECT_EQ(llama_get_kv_cache_used_cells(ctx), 10);
    llama_kv_cache_seq_keep(ctx, 0);
    EXPECT_EQ(llama_get_kv_cache_used_cells(ctx), 10);
    take_errors();
    llama_kv_cache_seq_cp(ctx, 0, 1, -1, -1);  // the context has one sequence
    EXPECT_NE(take_errors().find("sequence id 1 is out of range [0, 1)"), std::string::npos);
    EXPECT_TRUE(llama_kv_cache_seq_rm(ctx, 0, 3, -1));  // positions 0 1 2 2 2 stay
    EXPECT_EQ(llama_get_kv_cache_used_cells(ctx), 5);
    llama_kv_cache_seq_keep(ctx, 1);
    EXPECT_NE(take_errors().find("out of range"), std::string::npos);
    EXPECT_EQ(llama_get_kv_cache_used_cells(ctx), 5);
    EXPECT_TRUE(llama_kv_cache_seq_rm(ctx, -1, -1, -1));  // every sequence
    EXPECT_EQ(llama_get_kv_cache_used_cells(ctx), 0);
}

// Dividing positions matches evaluating at the divided positions (after the K shift), in a
// one-layer model (where the cache depends only on each token and its position).
TEST(LlamaApi, KvCacheDivMatchesFreshEvaluation) {
    const std::string src = model_path("ktest-F32");
    TU_REQUIRE_FILE(src);
    TempFile one_layer("one-layer-div.gguf");
    ASSERT_TRUE(rewrite_model(src, one_layer.path, [](gguf_context * g) { gguf_set_val_u32(g, "llama.block_count", 1); },
                              [](const ggml_tensor * t) { return strncmp(t->name, "blk.", 4) != 0 || strncmp(t->name, "blk.0.", 6) == 0; }));
    ModelPtr model(one_layer.path);
    ASSERT_NE(model.m, nullptr) << take_errors();
    const int32_t n_vocab = n_vocab_of(model);
    const std::vector<llama_token> toks = some_tokens(5, n_vocab, 5);
    CtxPtr a(model, 32, 32, 2, GGML_TYPE_F32, GGML_TYPE_F32), b(model, 32, 32, 2, GGML_TYPE_F32, GGML_TYPE_F32);
    ASSERT_FALSE(eval_all(a, std::vector<llama_token>(toks.begin(), toks.begin() + 4), 8).empty());  // 8..11
    llama_kv_cache_seq_div(a, 0, -1, -1, 2);  // 4..5 (pairs share a position)
    llama_batch nb = llama_batch_init(1, 0, 1);
    nb.n_tokens = 1;
    nb.token[0] = toks[4];
    nb.pos[0] = 6;
    nb.logits[0] = 1;
    ASSERT_EQ(llama_decode(a, nb), 0);
    const std::vector<float> got(llama_get_logits_ith(a, 0), llama_get_logits_ith(a, 0) + n_vocab);
    llama_batch four = llama_batch_init(5, 0, 1);
    const llama_pos pos[5] = { 4, 4, 5, 5, 6 };
    for (int i = 0; i < 5; i++) {
        four.token[i] = toks[i];
        four.pos[i] = pos[i];
        four.logits[i] = i == 4;
    }
    four.n_tokens = 5;
    ASSERT_EQ(llama_decode(b, four), 0);
    EXPECT_LT(mean_kl(llama_get_logits_ith(b, 4), got.data(), 1, n_vocab), 1e-7);
    llama_batch_free(nb);
    llama_batch_free(four);
}

TEST(LlamaApi, ModelAndVocabInformation) {
    REQUIRE_MODEL("stories260K");
    const int32_t n = llama_model_meta_count(model);
    ASSERT_GT(n, 5);
    char key[128], val[256], by_key[256];
    for (int32_t i = 0; i < n; i++) {
        ASSERT_GT(llama_model_meta_key_by_index(model, i, key, sizeof(key)), 0);
        EXPECT_EQ(llama_model_meta_val_str_by_index(model, i, val, sizeof(val)),
                  llama_model_meta_val_str(model, key, by_key, sizeof(by_key))) << key;
        EXPECT_STREQ(val, by_key) << key;
    }
    strcpy(val, "x");
    EXPECT_EQ(llama_model_meta_key_by_index(model, n, val, sizeof(val)), -1);
    EXPECT_STREQ(val, "");  // cleared on failure
    EXPECT_EQ(llama_model_rope_type(model), LLAMA_ROPE_TYPE_NORM);
    EXPECT_EQ(llama_model_rope_freq_scale_train(model), 1.0f);
    EXPECT_FALSE(llama_model_has_encoder(model) || llama_model_is_recurrent(model));
    EXPECT_EQ(llama_model_decoder_start_token(model), LLAMA_TOKEN_NULL);

    const llama_vocab * vocab = llama_model_get_vocab(model);
    EXPECT_EQ(llama_vocab_get_attr(vocab, llama_vocab_bos(vocab)), LLAMA_TOKEN_ATTR_CONTROL);
    EXPECT_EQ(llama_vocab_get_attr(vocab, 0), LLAMA_TOKEN_ATTR_UNKNOWN);
    EXPECT_EQ(llama_vocab_get_attr(vocab, llama_vocab_nl(vocab)), LLAMA_TOKEN_ATTR_BYTE);
    EXPECT_STREQ(llama_vocab_get_text(vocab, llama_vocab_nl(vocab)), "<0x0A>");
    EXPECT_EQ(llama_vocab_get_attr(vocab, 400), LLAMA_TOKEN_ATTR_NORMAL);
    EXPECT_EQ(llama_vocab_get_attr(vocab, -1), LLAMA_TOKEN_ATTR_UNDEFINED);
    EXPECT_EQ(llama_vocab_sep(vocab), LLAMA_TOKEN_NULL);
    EXPECT_EQ(llama_vocab_fim_pre(vocab), LLAMA_TOKEN_NULL);
    EXPECT_EQ(llama_vocab_pad(vocab), LLAMA_TOKEN_NULL);

    char split[128];
    EXPECT_EQ(llama_split_path(split, sizeof(split), "/models/m", 1, 4), 29);
    EXPECT_STREQ(split, "/models/m-00002-of-00004.gguf");
    EXPECT_EQ(llama_split_prefix(split, sizeof(split), "/models/m-00002-of-00004.gguf", 1, 4), 9);
    EXPECT_STREQ(split, "/models/m");
    EXPECT_EQ(llama_split_prefix(split, sizeof(split), "/models/m-00002-of-00004.gguf", 2, 4), 0);
    EXPECT_NE(strstr(llama_print_system_info(), "CPU"), nullptr);
    EXPECT_GT(llama_time_us(), 0);
}

}  // namespace
