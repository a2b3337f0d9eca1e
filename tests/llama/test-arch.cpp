// test-arch: every architecture of the runtime's table on small random-weight models
// (tests/common/tiny-models.h), held to logits other implementations computed offline on the
// same files (tests/data/arch-reference/: a float64 PyTorch forward pass written from the
// published model definitions, and llama.cpp build 4747 for the families it runs; see the
// README there). Prompts are longer than the sliding windows; the mixtures of experts (Mixtral-style
// llama, qwen2moe with its shared expert, qwen3moe) route each token to 2 or 3 of 4 or 8 experts. Mean KL below 1e-5 with F32
// weights, 1e-3 with Q8_0; with and without flash attention; batch split into ubatches or token
// by token gives the same logits; the files' bad variants are refused naming the key or tensor.
//
// LLAMA_ARCH_WRITE_MODELS=DIR test-arch --gtest_filter=ArchReference.WriteModels writes the
// models for the offline tools (and with LLAMA_ARCH_WRITE_BENCH=1 the Q4_0 speed-measurement
// model tiny::moe_bench_spec, moe-bench-q4_0.gguf; with LLAMA_ARCH_WRITE_QUANT_MIX=1 the F16
// models of tiny::quant_mix_specs for tools/quant-reference).
#include "test-llama.h"
#include "tiny-models.h"

#include <cstdlib>

using namespace tu;

namespace {

std::string donor() { return tu::models_dir() + "/stories260K.gguf"; }

std::string reference_path(const std::string & name, const char * impl) {
    return std::string(LLAMA_TEST_DATA_DIR) + "/arch-reference/" + name + "." + impl + ".logits";
}

// Logits of toks evaluated in ubatches of n_ubatch (one decode call), or one token per call.
std::vector<float> run(llama_model * m, const std::vector<llama_token> & toks, uint32_t n_ubatch, bool fa, bool one_by_one = false) {
    CtxPtr ctx(m, 64, n_ubatch, 2, GGML_TYPE_F32, GGML_TYPE_F32, fa);
    if (!ctx.c) {
        ADD_FAILURE() << take_errors();
        return {};
    }
    if (!one_by_one) return eval_all(ctx, toks);
    std::vector<float> out;
    for (size_t i = 0; i < toks.size(); i++) {
        const std::vector<float> row = eval_all(ctx, { toks[i] }, (llama_pos) i);
        out.insert(out.end(), row.begin(), row.end());
    }
    return out;
}

// The logits of toks as sequence 0 of a context of two sequences, decoded interleaved token by
// token with another sequence (toks reversed) in micro-batches of n_ubatch: attention by groups
// when flash attention is off, the windows and soft-caps of the family included.
std::vector<float> run_beside_another(llama_model * m, const std::vector<llama_token> & toks, uint32_t n_ubatch, bool fa) {
    llama_context_params p = llama_context_default_params();
    p.n_ctx = p.n_batch = 128;
    p.n_ubatch = n_ubatch;
    p.n_seq_max = 2;
    p.n_threads = p.n_threads_batch = 2;
    p.type_k = p.type_v = GGML_TYPE_F32;
    p.flash_attn = fa;
    llama_context * ctx = llama_init_from_model(m, p);
    if (!ctx) {
        ADD_FAILURE() << take_errors();
        return {};
    }
    const int32_t n = (int32_t) toks.size(), n_vocab = n_vocab_of(m);
    llama_batch b = llama_batch_init(2 * n, 0, 1);
    for (int32_t i = 0; i < 2 * n; i++) {
        const int32_t t = i / 2;
        b.token[i] = i % 2 == 0 ? toks[t] : toks[n - 1 - t];
        b.pos[i] = t;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = i % 2;
        b.logits[i] = i % 2 == 0;
    }
    b.n_tokens = 2 * n;
    std::vector<float> out;
    if (llama_decode(ctx, b) == 0) {
        for (int32_t t = 0; t < n; t++) {
            const float * r = llama_get_logits_ith(ctx, 2 * t);
            if (r) out.insert(out.end(), r, r + n_vocab);
        }
    } else {
        ADD_FAILURE() << take_errors();
    }
    llama_batch_free(b);
    llama_free(ctx);
    return out;
}

// An encoder's hidden states for toks (one sequence, one decode call): per token with pooling
// NONE ([n][n_embd]), else the sequence's pooled row ([n_embd]); empty on failure.
std::vector<float> encode(llama_model * m, const std::vector<llama_token> & toks, enum llama_pooling_type pooling,
                          bool fa, uint32_t n_ubatch = 64) {
    llama_context_params p = llama_context_default_params();
    p.n_ctx = p.n_batch = 64;
    p.n_ubatch = n_ubatch;
    p.n_threads = p.n_threads_batch = 2;
    p.embeddings = true;
    p.pooling_type = pooling;
    p.flash_attn = fa;
    p.type_k = p.type_v = GGML_TYPE_F32;
    llama_context * ctx = llama_init_from_model(m, p);
    if (!ctx) return {};
    const int32_t n = (int32_t) toks.size(), n_embd = llama_model_n_embd(m);
    llama_batch b = llama_batch_init(n, 0, 1);
    for (int32_t i = 0; i < n; i++) {
        b.token[i] = toks[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = n;
    std::vector<float> out;
    if (llama_decode(ctx, b) == 0) {
        if (pooling == LLAMA_POOLING_TYPE_NONE) {
            for (int32_t i = 0; i < n; i++) {
                const float * e = llama_get_embeddings_ith(ctx, i);
                if (e) out.insert(out.end(), e, e + n_embd);
            }
        } else if (const float * e = llama_get_embeddings_seq(ctx, 0)) {
            out.assign(e, e + n_embd);
        }
    }
    llama_batch_free(b);
    llama_free(ctx);
    return out;
}

// max |a - b| / max |b|.
double rel_max_err(const std::vector<float> & a, const std::vector<float> & b) {
    double err = 0.0, mag = 0.0;
    for (size_t i = 0; i < a.size() && i < b.size(); i++) {
        err = std::max(err, (double) std::fabs(a[i] - b[i]));
        mag = std::max(mag, (double) std::fabs(b[i]));
    }
    return mag > 0.0 ? err / mag : err;
}

// An encoder (BERT): the last hidden states against the reference's (which holds them in place
// of logits), and the mean and CLS pooling of them; a batch that does not fit one micro-batch is
// refused (bidirectional attention needs the whole sequence). With llama.cpp's hidden states
// (lcpp, when its file is there) as a second reference: llama.cpp's BERT takes GELU's tanh
// approximation through an f16 table where the model (and we) have the exact GELU, which moves
// its states from ours (and PyTorch's) by 2.9e-4 of their largest (max err / max |ref|,
// measured; max abs 1.15e-3 for a std of 1.02): the bound there is 1e-3.
void check_encoder(const tiny::spec & s, const LogitsFile & ref, const LogitsFile * lcpp) {
    const int32_t n = (int32_t) ref.tokens.size(), n_embd = ref.n_vocab;
    std::vector<float> mean((size_t) n_embd, 0.0f);
    for (int32_t t = 0; t < n; t++) {
        for (int32_t d = 0; d < n_embd; d++) mean[(size_t) d] += ref.logits[(size_t) t * n_embd + d] / (float) n;
    }
    const std::vector<float> cls(ref.logits.begin(), ref.logits.begin() + n_embd);
    for (ggml_type wtype : { GGML_TYPE_F32, GGML_TYPE_Q8_0 }) {
        SCOPED_TRACE(ggml_type_name(wtype));
        TempFile file(s.name + "-" + ggml_type_name(wtype) + ".gguf");
        ASSERT_TRUE(tiny::write(s, file.path, donor(), wtype));
        ModelPtr m(file.path);
        ASSERT_NE(m.m, nullptr) << take_errors();
        ASSERT_EQ(llama_model_n_embd(m), n_embd);
        const double bound = wtype == GGML_TYPE_F32 ? 1e-5 : 2e-2;
        for (bool fa : { false, true }) {
            const std::vector<float> got = encode(m, ref.tokens, LLAMA_POOLING_TYPE_NONE, fa);
            ASSERT_EQ(got.size(), ref.logits.size()) << take_errors();
            const double err = rel_max_err(got, ref.logits);
            printf("[ %s %s fa=%d ] hidden states: max err / max |ref| vs float64 PyTorch %.3g", s.name.c_str(),
                   ggml_type_name(wtype), fa, err);
            EXPECT_LT(err, bound);
            if (lcpp) {
                ASSERT_EQ(lcpp->tokens, ref.tokens);
                const double err2 = rel_max_err(got, lcpp->logits);
                printf(", vs llama.cpp %.3g", err2);
                EXPECT_LT(err2, std::max(bound, 1e-3));
            }
            printf("\n");
            EXPECT_LT(rel_max_err(encode(m, ref.tokens, LLAMA_POOLING_TYPE_MEAN, fa), mean), bound) << "mean pooling";
            EXPECT_LT(rel_max_err(encode(m, ref.tokens, LLAMA_POOLING_TYPE_CLS, fa), cls), bound) << "CLS pooling";
        }
    }
    // Split into micro-batches, bidirectional attention would miss the later tokens: refused.
    TempFile file(s.name + "-split.gguf");
    ASSERT_TRUE(tiny::write(s, file.path, donor()));
    ModelPtr m(file.path);
    ASSERT_NE(m.m, nullptr);
    take_errors();
    EXPECT_TRUE(encode(m, ref.tokens, LLAMA_POOLING_TYPE_NONE, false, 5).empty());
    EXPECT_NE(take_errors().find("must fit one micro-batch"), std::string::npos);
}

class Arch : public testing::TestWithParam<tiny::spec> {};

TEST_P(Arch, MatchesReferenceImplementations) {
    const tiny::spec & s = GetParam();
    TU_REQUIRE_FILE(donor());
    LogitsFile torch_ref, lcpp_ref;
    ASSERT_TRUE(read_logits_file(reference_path(s.name, "torch"), torch_ref)) << reference_path(s.name, "torch");
    const bool has_lcpp = read_logits_file(reference_path(s.name, "llamacpp"), lcpp_ref);
    if (llm_arch_get(s.arch).encoder) {
        check_encoder(s, torch_ref, has_lcpp ? &lcpp_ref : nullptr);
        return;
    }
    for (ggml_type wtype : { GGML_TYPE_F32, GGML_TYPE_Q8_0 }) {
        SCOPED_TRACE(ggml_type_name(wtype));
        TempFile file(s.name + "-" + ggml_type_name(wtype) + ".gguf");
        ASSERT_TRUE(tiny::write(s, file.path, donor(), wtype));
        ModelPtr m(file.path);
        ASSERT_NE(m.m, nullptr) << take_errors();
        ASSERT_EQ(n_vocab_of(m), torch_ref.n_vocab);
        const int32_t n = (int32_t) torch_ref.tokens.size(), n_vocab = torch_ref.n_vocab;
        const double bound = wtype == GGML_TYPE_F32 ? 1e-5 : 1e-3;
        for (bool fa : { false, true }) {
            const std::vector<float> got = run(m, torch_ref.tokens, 64, fa);
            ASSERT_EQ(got.size(), torch_ref.logits.size());
            const double kl = mean_kl(torch_ref.logits.data(), got.data(), n, n_vocab);
            printf("[ %s %s fa=%d ] mean KL vs float64 PyTorch %.3g", s.name.c_str(), ggml_type_name(wtype), fa, kl);
            EXPECT_LT(kl, bound);
            if (has_lcpp) {
                const double kl2 = mean_kl(lcpp_ref.logits.data(), got.data(), n, n_vocab);
                printf(", vs llama.cpp %.3g", kl2);
                EXPECT_LT(kl2, bound);
            }
            printf("\n");
            if (wtype != GGML_TYPE_F32) continue;
            // Other batch shapes: the same logits to float rounding.
            for (bool one : { false, true }) {
                const std::vector<float> other = run(m, torch_ref.tokens, 5, fa, one);
                ASSERT_EQ(other.size(), got.size());
                EXPECT_LT(mean_kl(got.data(), other.data(), n, n_vocab), 1e-9) << (one ? "token by token" : "ubatch 5");
            }
            // Beside another sequence in the same micro-batches.
            const std::vector<float> beside = run_beside_another(m, torch_ref.tokens, 8, fa);
            ASSERT_EQ(beside.size(), got.size());
            EXPECT_LT(mean_kl(got.data(), beside.data(), n, n_vocab), 1e-9) << "beside another sequence";
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Families, Arch, testing::ValuesIn(tiny::specs()),
                         [](const testing::TestParamInfo<tiny::spec> & p) { return p.param.name; });

// A bad variant of a good file, its keys edited (edit) or some tensors dropped (keep says false):
// it must fail to load, with a message that holds `expect` (naming the tensor or the key).
struct BadFile {
    const char * what;
    std::function<void(gguf_context *)> edit;
    std::function<bool(const ggml_tensor *)> keep;
    const char * expect;
};

static void expect_bad_files_refused(const std::string & good, const std::string & tag, const std::vector<BadFile> & cases) {
    for (const BadFile & c : cases) {
        SCOPED_TRACE(c.what);
        TempFile bad("bad-" + tag + "-" + c.what + ".gguf");
        ASSERT_TRUE(rewrite_model(good, bad.path, c.edit, c.keep, {}));
        take_errors();
        ModelPtr m(bad.path);
        EXPECT_EQ(m.m, nullptr);
        const std::string errs = take_errors();
        EXPECT_NE(errs.find(c.expect), std::string::npos) << errs;
    }
}

// A file that disagrees with its architecture: the message names the tensor or the key.
TEST(ArchFiles, BadFilesNameTheProblem) {
    TU_REQUIRE_FILE(donor());
    tiny::spec s = tiny::specs()[3];  // gemma2
    ASSERT_EQ(s.name, "gemma2");
    TempFile file("bad.gguf");
    ASSERT_TRUE(tiny::write(s, file.path, donor()));
    expect_bad_files_refused(file.path, "gemma2", {
        {"head size", [](gguf_context * g) { gguf_set_val_u32(g, "gemma2.attention.key_length", 40); }, nullptr,
         "blk.0.attn_q.weight' has the wrong shape"},
        {"softcap", [](gguf_context * g) { gguf_set_val_f32(g, "gemma2.attn_logit_softcapping", -1.0f); }, nullptr, "softcapping"},
        {"rope scaling", [](gguf_context * g) { gguf_set_val_str(g, "gemma2.rope.scaling.type", "ntk"); }, nullptr,
         "rope.scaling.type"},
        {"missing layer tensor", nullptr, [](const ggml_tensor * t) { return strcmp(t->name, "blk.3.post_ffw_norm.weight") != 0; },
         "missing tensor 'blk.3.post_ffw_norm.weight'"},
    });
}

// Mixtures of experts: an expert count or a choice count that disagrees with the file, a missing
// expert tensor.
TEST(ArchFiles, BadExpertFilesNameTheProblem) {
    TU_REQUIRE_FILE(donor());
    const tiny::spec s = tiny::specs()[8];  // qwen2moe
    ASSERT_EQ(s.name, "qwen2moe");
    TempFile file("moe.gguf");
    ASSERT_TRUE(tiny::write(s, file.path, donor()));
    expect_bad_files_refused(file.path, "moe", {
        {"expert count", [](gguf_context * g) { gguf_set_val_u32(g, "qwen2moe.expert_count", 5); }, nullptr,
         "tensor 'blk.0.ffn_gate_inp.weight' has the wrong shape"},
        {"used count", [](gguf_context * g) { gguf_set_val_u32(g, "qwen2moe.expert_used_count", 9); }, nullptr, "expert_used_count 9"},
        {"no experts", [](gguf_context * g) { gguf_remove_key(g, "qwen2moe.expert_count"); }, nullptr, "expert_count is missing"},
        {"missing expert", nullptr, [](const ggml_tensor * t) { return strcmp(t->name, "blk.1.ffn_up_exps.weight") != 0; },
         "missing tensor 'blk.1.ffn_up_exps.weight'"},
    });
}

// An encoder: what it cannot do is refused with a message (logits without an output head,
// positions past its learned ones, moving cached positions), and its files' own keys and tensors
// are checked.
TEST(ArchFiles, EncoderRefusesWhatItCannotDo) {
    TU_REQUIRE_FILE(donor());
    tiny::spec s;
    for (const tiny::spec & t : tiny::specs()) {
        if (t.arch == LLM_ARCH_BERT) s = t;
    }
    ASSERT_EQ(s.name, "bert");
    TempFile file("bert.gguf");
    ASSERT_TRUE(tiny::write(s, file.path, donor()));
    ModelPtr m(file.path);
    ASSERT_NE(m.m, nullptr) << take_errors();
    EXPECT_EQ(llama_model_rope_type(m), LLAMA_ROPE_TYPE_NONE);
    {
        CtxPtr ctx(m, 64, 64);  // embeddings off
        ASSERT_NE(ctx.c, nullptr);
        EXPECT_FALSE(llama_kv_self_can_shift(ctx));
        std::vector<llama_token> toks = { 1, 2, 3 };
        take_errors();
        EXPECT_NE(llama_decode(ctx, llama_batch_get_one(toks.data(), 3)), 0);
        EXPECT_NE(take_errors().find("embedding model"), std::string::npos);
    }
    {
        llama_context_params p = llama_context_default_params();
        p.n_ctx = 512;  // beyond the 256 learned positions (allowed, with a warning)
        p.n_batch = p.n_ubatch = 64;
        p.embeddings = true;
        llama_context * ctx = llama_init_from_model(m, p);
        ASSERT_NE(ctx, nullptr);
        llama_batch b = llama_batch_init(2, 0, 1);
        b.n_tokens = 2;
        for (int i = 0; i < 2; i++) {
            b.token[i] = 5 + i;
            b.pos[i] = 255 + i;  // 256 is past the last
            b.n_seq_id[i] = 1;
            b.seq_id[i][0] = 0;
            b.logits[i] = 1;
        }
        take_errors();
        EXPECT_NE(llama_decode(ctx, b), 0);
        EXPECT_NE(take_errors().find("learned positions only up to 255"), std::string::npos);
        b.pos[0] = 0;
        b.pos[1] = 1;
        EXPECT_EQ(llama_decode(ctx, b), 0) << take_errors();
        llama_kv_self_seq_add(ctx, 0, 0, -1, 3);
        EXPECT_NE(take_errors().find("cannot change position"), std::string::npos);
        EXPECT_EQ(llama_kv_self_seq_pos_max(ctx, 0), 1);  // nothing moved
        llama_batch_free(b);
        llama_free(ctx);
    }
    expect_bad_files_refused(file.path, "bert", {
        {"no epsilon", [](gguf_context * g) { gguf_remove_key(g, "bert.attention.layer_norm_epsilon"); }, nullptr,
         "bert.attention.layer_norm_epsilon"},
        {"token types", [](gguf_context * g) { gguf_set_val_u32(g, "tokenizer.ggml.token_type_count", 3); }, nullptr,
         "tensor 'token_types.weight' has the wrong shape"},
        {"positions", [](gguf_context * g) { gguf_set_val_u32(g, "bert.context_length", 512); }, nullptr,
         "tensor 'position_embd.weight' has the wrong shape"},
        {"no layer norm bias", nullptr, [](const ggml_tensor * t) { return strcmp(t->name, "blk.1.layer_output_norm.bias") != 0; },
         "missing tensor 'blk.1.layer_output_norm.bias'"},
    });
}

// Writes the models for tools/arch-reference (skipped unless LLAMA_ARCH_WRITE_MODELS names a folder).
TEST(ArchReference, WriteModels) {
    const char * dir = getenv("LLAMA_ARCH_WRITE_MODELS");
    if (!dir) GTEST_SKIP() << "set LLAMA_ARCH_WRITE_MODELS=DIR to write the models";
    for (const tiny::spec & s : tiny::specs()) {
        for (ggml_type t : { GGML_TYPE_F32, GGML_TYPE_Q8_0 }) {
            const std::string path = std::string(dir) + "/" + s.name + "-" + ggml_type_name(t) + ".gguf";
            EXPECT_TRUE(tiny::write(s, path, donor(), t)) << path;
        }
    }
    if (getenv("LLAMA_ARCH_WRITE_QUANT_MIX")) {  // F16, for tools/quant-reference
        for (const tiny::spec & s : tiny::quant_mix_specs()) {
            const std::string path = std::string(dir) + "/" + s.name + "-F16.gguf";
            EXPECT_TRUE(tiny::write(s, path, donor(), GGML_TYPE_F16)) << path;
        }
    }
    if (getenv("LLAMA_ARCH_WRITE_BENCH")) {
        const std::string path = std::string(dir) + "/moe-bench-q4_0.gguf";
        EXPECT_TRUE(tiny::write(tiny::moe_bench_spec(), path, donor(), GGML_TYPE_Q4_0)) << path;
    }
}

}  // namespace
