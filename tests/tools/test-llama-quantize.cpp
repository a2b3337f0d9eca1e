// llama-quantize, run as a program: the mixes and errors against llama.cpp's own files of the
// ktest model, every target type, row-length fallbacks, thread-count independence, bad input;
// and its mixes (src/llama-quant-mix.cpp) tensor for tensor against llama.cpp's on models where every rule
// acts, mixtures of experts included; importance matrices (.dat and GGUF).
#include "test-util.h"

#include "gguf.h"
#include "imatrix-file.h"
#include "llama-quant-mix.h"
#include "llama.h"

#include <dirent.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <vector>

#define LLAMA_QUANTIZE_BIN LLAMA_BIN_DIR "/llama-quantize"
#define LLAMA_IMATRIX_BIN LLAMA_BIN_DIR "/llama-imatrix"

namespace {

using tu::run_result;
using temp_dir = tu::TempDir;

run_result run_quantize(const std::string & args) {
    return tu::run_command(std::string(LLAMA_EMULATOR) + " " + LLAMA_QUANTIZE_BIN + " " + args);
}



struct model {
    gguf_context * g = nullptr;
    ggml_context * ctx = nullptr;
    explicit model(const std::string & path) {
        gguf_init_params p = {};
        p.ctx = &ctx;
        g = gguf_init_from_file(path.c_str(), p);
    }
    ~model() {
        gguf_free(g);
        ggml_free(ctx);
    }
    std::vector<float> floats(const ggml_tensor * t) const {
        std::vector<float> v((size_t) ggml_nelements(t));
        ggml_get_type_traits(t->type)->to_float(t->data, v.data(), (int64_t) v.size());
        return v;
    }
    uint32_t file_type() const {
        const int64_t id = gguf_find_key(g, "general.file_type");
        return id < 0 ? 9999 : gguf_get_val_u32(g, id);
    }
};

double rel_rmse(const std::vector<float> & a, const std::vector<float> & ref) {
    double e = 0, s = 0;
    for (size_t i = 0; i < a.size(); i++) {
        e += (double) (a[i] - ref[i]) * (a[i] - ref[i]);
        s += (double) ref[i] * ref[i];
    }
    return s > 0 ? std::sqrt(e / s) : std::sqrt(e);
}

// Relative RMSE a type stays below on the ktest weights (Gaussian-like).
double type_bound(ggml_type t) {
    switch (t) {
        case GGML_TYPE_F32: return 0.0;
        case GGML_TYPE_F16: return 1e-3;
        case GGML_TYPE_BF16: return 8e-3;
        case GGML_TYPE_Q8_0: return 0.0065;
        case GGML_TYPE_Q6_K: return 0.020;
        case GGML_TYPE_Q5_1: return 0.042;
        case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_K: return 0.048;
        case GGML_TYPE_Q4_1: case GGML_TYPE_Q4_K: return 0.085;
        case GGML_TYPE_Q4_0: case GGML_TYPE_IQ4_NL: return 0.095;
        case GGML_TYPE_Q3_K: return 0.16;
        case GGML_TYPE_Q2_K: return 0.29;
        // Measured on ktest with a uniform importance matrix (largest tensor), with ~15% margin.
        case GGML_TYPE_IQ4_XS: return 0.083;
        case GGML_TYPE_IQ3_S: return 0.145;
        case GGML_TYPE_IQ3_XXS: return 0.20;
        case GGML_TYPE_IQ2_S: return 0.27;
        case GGML_TYPE_IQ2_XS: return 0.33;
        case GGML_TYPE_IQ2_XXS: return 0.375;
        case GGML_TYPE_IQ1_M: return 0.465;
        case GGML_TYPE_IQ1_S: return 0.50;
        case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0: return 0.89;  // (ternary: made for ternary weights, not these)
        default: return 0.0;
    }
}

std::string ktest(const std::string & type) { return tu::models_dir() + "/ktest/ktest-" + type + ".gguf"; }

#define REQUIRE_QUANTIZE_BIN() \
    do { if (!tu::file_exists(LLAMA_QUANTIZE_BIN)) GTEST_SKIP() << "llama-quantize was not built"; } while (0)

}  // namespace

TEST(LlamaQuantize, SameMixesAsLlamaCppAndNoWorseError) {
    REQUIRE_QUANTIZE_BIN();
    TU_REQUIRE_FILE(ktest("F32"));
    temp_dir tmp;
    model f32(ktest("F32"));
    ASSERT_NE(f32.g, nullptr);
    for (const char * name : {"Q8_0", "Q4_0", "Q4_K_M", "Q6_K"}) {
        TU_REQUIRE_FILE(ktest(name));
        const std::string out = tmp.path + "/" + name + ".gguf";
        const run_result r = run_quantize(ktest("F32") + " " + out + " " + name + " 2");
        ASSERT_EQ(r.status, 0) << r.output;
        model ours(out), theirs(ktest(name));
        ASSERT_NE(ours.g, nullptr) << name;
        ASSERT_NE(theirs.g, nullptr) << name;
        EXPECT_EQ(ours.file_type(), theirs.file_type()) << name;
        // Every key of the input is carried over.
        for (int64_t i = 0; i < gguf_get_n_kv(f32.g); i++) {
            EXPECT_GE(gguf_find_key(ours.g, gguf_get_key(f32.g, i)), 0) << name << ": key " << gguf_get_key(f32.g, i);
        }
        ASSERT_EQ(gguf_get_n_tensors(ours.g), gguf_get_n_tensors(theirs.g));
        double sum_ours = 0, sum_theirs = 0;
        for (ggml_tensor * t = ggml_get_first_tensor(theirs.ctx); t; t = ggml_get_next_tensor(theirs.ctx, t)) {
            ggml_tensor * o = ggml_get_tensor(ours.ctx, t->name);
            ggml_tensor * r32 = ggml_get_tensor(f32.ctx, t->name);
            ASSERT_NE(o, nullptr) << t->name;
            EXPECT_EQ(o->type, t->type) << name << " " << t->name << ": ours " << ggml_type_name(o->type)
                                        << ", llama.cpp " << ggml_type_name(t->type);
            ASSERT_TRUE(ggml_are_same_shape(o, t));
            const std::vector<float> ref = f32.floats(r32);
            const double eo = rel_rmse(ours.floats(o), ref), et = rel_rmse(theirs.floats(t), ref);
            EXPECT_LE(eo, et * 1.0001 + 1e-9) << name << " " << t->name;
            sum_ours += eo;
            sum_theirs += et;
        }
        printf("  %-7s summed relative RMSE over tensors: ours %.5f, llama.cpp %.5f\n", name, sum_ours, sum_theirs);
    }
}

// The type of every tensor for every mix as llama.cpp's llama-quantize (build 4747) chose it, on
// the models of tiny::quant_mix_specs: 16 dense layers with rows of 256 (no fallbacks), 4 query
// heads per KV head, Mixtral's 8 experts (attention K and V in Q8_0, the output in Q5_K), a
// mixture with a shared expert (the stacked and shared experts' down projections follow the FFN
// down rules), llama.cpp's "70B" of llama and of qwen2 (80 layers: attention V raised); without an importance matrix and with one (every target then, the IQ2 / IQ1 ones
// included; some rules change with one). tests/data/quant-reference/*.types, written by
// tools/quant-reference/gen.py.
TEST(LlamaQuantize, MixesAreLlamaCppsTensorForTensor) {
    for (const char * model : {"mix-llama", "mix-mixtral", "mix-qwen2moe", "mix-llama70b", "mix-qwen2-80", "mix-llama-imatrix",
                               "mix-mixtral-imatrix", "mix-qwen2moe-imatrix", "mix-llama70b-imatrix", "mix-qwen2-80-imatrix"}) {
        SCOPED_TRACE(model);
        std::ifstream file(std::string(LLAMA_TEST_DATA_DIR) + "/quant-reference/" + model + ".types");
        ASSERT_TRUE(file.good());
        const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
        std::istringstream f(text);
        std::vector<std::string> targets;
        quant_model_info info;
        quant_options opt;
        if (text.find("ffn_down_shexp") != std::string::npos) info.n_ffn_down_per_layer = 2;  // (as llama-quantize counts)
        size_t n_checked = 0, n_raised = 0;
        std::string line;
        while (std::getline(f, line)) {
            std::istringstream ss(line);
            std::string kind;
            ss >> kind;
            if (kind == "targets") {
                for (std::string t; ss >> t;) targets.push_back(t);
            } else if (kind == "info") {
                std::string k;
                int v = 0;
                while (ss >> k) {
                    if (k == "arch") {
                        ss >> info.arch;
                        continue;
                    }
                    if (!(ss >> v)) break;
                    if (k == "n_layer") info.n_layer = v;
                    if (k == "n_head") info.n_head = v;
                    if (k == "n_head_kv") info.n_head_kv = v;
                    if (k == "n_expert") info.n_expert = v;
                    if (k == "has_output") info.has_output = v != 0;
                    if (k == "has_imatrix") opt.has_imatrix = v != 0;
                }
            } else if (kind == "tensor") {
                std::string name;
                int n_dims = 0;
                int64_t ne[3] = {1, 1, 1};
                ss >> name >> n_dims >> ne[0] >> ne[1] >> ne[2];
                for (const std::string & tn : targets) {
                    std::string want;
                    ss >> want;
                    const quant_target * q = quant_target_find(tn);
                    ASSERT_NE(q, nullptr) << tn;
                    std::string fallback;
                    const ggml_type got = quant_choose_type(*q, info, name, n_dims, ne, GGML_TYPE_F16, opt, fallback);
                    EXPECT_EQ(ggml_type_name(got), want) << tn << " " << name;
                    n_checked++;
                    n_raised += n_dims > 1 && got != q->base;
                }
            }
        }
        EXPECT_GT(n_checked, 500u);
        EXPECT_GT(n_raised, 20u) << "the mixes move some tensors off the base type";
    }
}

TEST(LlamaQuantize, EveryTargetType) {
    REQUIRE_QUANTIZE_BIN();
    TU_REQUIRE_FILE(ktest("F32"));
    temp_dir tmp;
    model f32(ktest("F32"));
    ASSERT_NE(f32.g, nullptr);
    const std::map<std::string, uint32_t> targets = {
        {"Q4_1", 3}, {"Q5_0", 8}, {"Q5_1", 9}, {"Q2_K", 10}, {"Q3_K_S", 11}, {"Q3_K_M", 12}, {"Q3_K_L", 13},
        {"Q4_K_S", 14}, {"Q5_K_S", 16}, {"Q5_K_M", 17}, {"IQ4_NL", 25}, {"F16", 1}, {"BF16", 32}, {"F32", 0},
    };
    for (const auto & [name, ftype] : targets) {
        const std::string out = tmp.path + "/" + name + ".gguf";
        const run_result r = run_quantize(ktest("F32") + " " + out + " " + name + " 2");
        ASSERT_EQ(r.status, 0) << name << ": " << r.output;
        model q(out);
        ASSERT_NE(q.g, nullptr) << name;
        EXPECT_EQ(q.file_type(), ftype) << name;
        for (ggml_tensor * t = ggml_get_first_tensor(q.ctx); t; t = ggml_get_next_tensor(q.ctx, t)) {
            ggml_tensor * r32 = ggml_get_tensor(f32.ctx, t->name);
            if (ggml_n_dims(t) == 1) {
                EXPECT_EQ(t->type, GGML_TYPE_F32) << name << " " << t->name;
            }
            EXPECT_LE(rel_rmse(q.floats(t), f32.floats(r32)), type_bound(t->type))
                << name << " " << t->name << " (" << ggml_type_name(t->type) << ")";
        }
    }
}

// An importance matrix of weights 1 for every matrix of a model (llama.cpp's .dat layout).
static void write_uniform_imatrix(const std::string & model_path, const std::string & out) {
    model m(model_path);
    ASSERT_NE(m.g, nullptr);
    std::vector<std::pair<std::string, int64_t>> entries;
    for (ggml_tensor * t = ggml_get_first_tensor(m.ctx); t; t = ggml_get_next_tensor(m.ctx, t)) {
        if (ggml_n_dims(t) >= 2) entries.emplace_back(t->name, t->ne[0] * t->ne[2]);
    }
    FILE * f = fopen(out.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    const auto put_i32 = [&](int32_t v) { fwrite(&v, 4, 1, f); };
    put_i32((int32_t) entries.size());
    for (const auto & e : entries) {
        put_i32((int32_t) e.first.size());
        fwrite(e.first.data(), 1, e.first.size(), f);
        put_i32(1);
        put_i32((int32_t) e.second);
        const std::vector<float> ones((size_t) e.second, 1.0f);
        fwrite(ones.data(), 4, ones.size(), f);
    }
    put_i32(1);
    put_i32(4);
    fwrite("ones", 1, 4, f);
    fclose(f);
}

// The first layer of a model file (and its other tensors) as a 1-layer model.
static void write_first_layer(const std::string & in, const std::string & out) {
    model m(in);
    ASSERT_NE(m.g, nullptr);
    gguf_context * g = gguf_init_empty();
    gguf_set_kv(g, m.g);
    gguf_set_val_u32(g, "llama.block_count", 1);
    for (ggml_tensor * t = ggml_get_first_tensor(m.ctx); t; t = ggml_get_next_tensor(m.ctx, t)) {
        if (strncmp(t->name, "blk.", 4) != 0 || strncmp(t->name, "blk.0.", 6) == 0) gguf_add_tensor(g, t);
    }
    EXPECT_TRUE(gguf_write_to_file(g, out.c_str(), false));
    gguf_free(g);
}

// The IQ and ternary targets: the 2-bit and 1-bit ones (and Q2_K_S, IQ3_XXS) refused without an
// importance matrix, with the reason and nothing written, as llama.cpp refuses them; with one,
// every target written with its file type, each tensor within its type's error. On the first
// layer of ktest (fourteen quantizations of the whole model took 80 s of CI's sanitized run).
TEST(LlamaQuantize, IqTargetsNeedAnImatrixWhereLlamaCppDoes) {
    REQUIRE_QUANTIZE_BIN();
    TU_REQUIRE_FILE(ktest("F32"));
    temp_dir tmp;
    const std::string in = tmp.path + "/layer0.gguf";
    write_first_layer(ktest("F32"), in);
    const std::string dat = tmp.path + "/ones.dat";
    write_uniform_imatrix(in, dat);
    model f32(in);
    ASSERT_NE(f32.g, nullptr);
    const std::map<std::string, std::pair<uint32_t, bool>> targets = {  // name -> file type, needs an imatrix
        {"IQ2_XXS", {19, true}}, {"IQ2_XS", {20, true}}, {"Q2_K_S", {21, true}}, {"IQ3_XS", {22, false}}, {"IQ3_XXS", {23, true}},
        {"IQ1_S", {24, true}},   {"IQ3_S", {26, false}}, {"IQ3_M", {27, false}}, {"IQ2_S", {28, true}},   {"IQ2_M", {29, true}},
        {"IQ4_XS", {30, false}}, {"IQ1_M", {31, true}},  {"TQ1_0", {36, false}}, {"TQ2_0", {37, false}},
    };
    for (const auto & [name, info] : targets) {
        const std::string out = tmp.path + "/" + name + ".gguf";
        if (info.second) {
            const run_result r = run_quantize(in + " " + out + " " + name + " 2");
            EXPECT_EQ(r.status, 1) << name << ": " << r.output;
            EXPECT_NE(r.output.find("needs an importance matrix"), std::string::npos) << name << ": " << r.output;
            EXPECT_FALSE(tu::file_exists(out)) << name;
        }
        const run_result r = run_quantize("--imatrix " + dat + " " + in + " " + out + " " + name + " 2");
        ASSERT_EQ(r.status, 0) << name << ": " << r.output;
        model q(out);
        ASSERT_NE(q.g, nullptr) << name;
        EXPECT_EQ(q.file_type(), info.first) << name;
        size_t n_base = 0, n_matrices = 0;
        for (ggml_tensor * t = ggml_get_first_tensor(q.ctx); t; t = ggml_get_next_tensor(q.ctx, t)) {
            const double e = rel_rmse(q.floats(t), f32.floats(ggml_get_tensor(f32.ctx, t->name)));
            if (getenv("LLAMA_TEST_VERBOSE")) printf("  %-8s %-28s %-8s %.4f\n", name.c_str(), t->name, ggml_type_name(t->type), e);
            EXPECT_LE(e, type_bound(t->type)) << name << " " << t->name << " (" << ggml_type_name(t->type) << ")";
            n_base += quant_target_find(name)->base == t->type;
            n_matrices += ggml_n_dims(t) >= 2;
        }
        EXPECT_EQ(n_matrices, 9u) << name;
        EXPECT_GE(n_base, 4u) << name << ": the layer's matrices mostly in the target's base type";
    }
    std::vector<std::string> files = tmp.files();
    std::sort(files.begin(), files.end());
    EXPECT_EQ(files, (std::vector<std::string>{"IQ1_M.gguf", "IQ1_S.gguf", "IQ2_M.gguf", "IQ2_S.gguf", "IQ2_XS.gguf", "IQ2_XXS.gguf",
                                                     "IQ3_M.gguf", "IQ3_S.gguf", "IQ3_XS.gguf", "IQ3_XXS.gguf", "IQ4_XS.gguf", "Q2_K_S.gguf",
                                                     "TQ1_0.gguf", "TQ2_0.gguf", "layer0.gguf", "ones.dat"}));
}

// llama_model_quantize from the C API writes the bytes the program writes; --keep-split names
// the one shard as llama.cpp does.
TEST(LlamaQuantize, LibraryFunctionAndKeepSplit) {
    REQUIRE_QUANTIZE_BIN();
    TU_REQUIRE_FILE(ktest("F32"));
    temp_dir tmp;
    ASSERT_EQ(run_quantize(ktest("F32") + " " + tmp.path + "/prog.gguf Q4_K_M 2").status, 0);
    llama_model_quantize_params p = llama_model_quantize_default_params();
    p.ftype = LLAMA_FTYPE_MOSTLY_Q4_K_M;
    p.nthread = 2;
    ASSERT_EQ(llama_model_quantize(ktest("F32").c_str(), (tmp.path + "/lib.gguf").c_str(), &p), 0u);
    EXPECT_EQ(std::system(("cmp -s " + tmp.path + "/prog.gguf " + tmp.path + "/lib.gguf").c_str()), 0);
    // Bad parameters: a file type that is no target, an input that is not there.
    p.ftype = (llama_ftype) 4;
    EXPECT_EQ(llama_model_quantize(ktest("F32").c_str(), (tmp.path + "/bad.gguf").c_str(), &p), 1u);
    p.ftype = LLAMA_FTYPE_MOSTLY_Q4_0;
    EXPECT_EQ(llama_model_quantize((tmp.path + "/missing.gguf").c_str(), (tmp.path + "/bad.gguf").c_str(), &p), 1u);
    EXPECT_EQ(llama_model_quantize(nullptr, (tmp.path + "/bad.gguf").c_str(), &p), 1u);
    EXPECT_FALSE(tu::file_exists(tmp.path + "/bad.gguf"));

    const run_result r = run_quantize("--keep-split " + ktest("F32") + " " + tmp.path + "/split.gguf Q4_0 2");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_TRUE(tu::file_exists(tmp.path + "/split-00001-of-00001.gguf"));
    EXPECT_FALSE(tu::file_exists(tmp.path + "/split.gguf"));
}

TEST(LlamaQuantize, ResultDoesNotDependOnThreads) {
    REQUIRE_QUANTIZE_BIN();
    TU_REQUIRE_FILE(ktest("F32"));
    temp_dir tmp;
    ASSERT_EQ(run_quantize(ktest("F32") + " " + tmp.path + "/a.gguf Q4_K_M 1").status, 0);
    ASSERT_EQ(run_quantize(ktest("F32") + " " + tmp.path + "/b.gguf Q4_K_M 3").status, 0);
    ASSERT_EQ(std::system(("cmp -s " + tmp.path + "/a.gguf " + tmp.path + "/b.gguf").c_str()), 0);
}

TEST(LlamaQuantize, ShortRowsFallBackAndSaySo) {
    REQUIRE_QUANTIZE_BIN();
    temp_dir tmp;
    // A tiny llama-shaped model whose rows (96, 100) do not fit the K-quants' 256-value blocks.
    const std::string in = tmp.path + "/small.gguf";
    {
        tu::Ctx ctx(8u << 20);
        gguf_context * g = gguf_init_empty();
        gguf_set_val_str(g, "general.architecture", "llama");
        gguf_set_val_u32(g, "llama.block_count", 1);
        std::mt19937 rng(1);
        struct spec { const char * name; int64_t ne0, ne1; };
        for (const spec & s : {spec{"blk.0.attn_q.weight", 96, 64}, spec{"blk.0.attn_v.weight", 96, 32},
                               spec{"blk.0.ffn_up.weight", 100, 8}, spec{"blk.0.attn_norm.weight", 96, 1},
                               spec{"output.weight", 96, 40}}) {
            ggml_tensor * t = s.ne1 == 1 ? ggml_new_tensor_1d(ctx, GGML_TYPE_F32, s.ne0) : ggml_new_tensor_2d(ctx, GGML_TYPE_F32, s.ne0, s.ne1);
            ggml_set_name(t, s.name);
            tu::fill_uniform(t, rng);
            gguf_add_tensor(g, t);
        }
        ASSERT_TRUE(gguf_write_to_file(g, in.c_str(), false));
        gguf_free(g);
    }
    const std::string out = tmp.path + "/small-q4km.gguf";
    const run_result r = run_quantize(in + " " + out + " Q4_K_M 2");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("not a multiple of 256"), std::string::npos) << r.output;
    model q(out);
    ASSERT_NE(q.g, nullptr);
    EXPECT_EQ(ggml_get_tensor(q.ctx, "blk.0.attn_q.weight")->type, GGML_TYPE_Q5_0);  // Q4_K -> Q5_0
    EXPECT_EQ(ggml_get_tensor(q.ctx, "blk.0.attn_v.weight")->type, GGML_TYPE_Q8_0);  // Q6_K -> Q8_0
    EXPECT_EQ(ggml_get_tensor(q.ctx, "output.weight")->type, GGML_TYPE_Q8_0);        // Q6_K -> Q8_0
    EXPECT_EQ(ggml_get_tensor(q.ctx, "blk.0.ffn_up.weight")->type, GGML_TYPE_F16);   // 100 fits no block
    EXPECT_EQ(ggml_get_tensor(q.ctx, "blk.0.attn_norm.weight")->type, GGML_TYPE_F32);
}

TEST(LlamaQuantize, BadInputIsRefusedAndLeavesNoFile) {
    REQUIRE_QUANTIZE_BIN();
    TU_REQUIRE_FILE(ktest("F32"));
    temp_dir tmp;
    const std::string out = tmp.path + "/out.gguf";
    struct bad_case { std::string args, expect; };
    // A truncated copy of a real model.
    const std::string trunc = tmp.path + "/truncated.gguf";
    ASSERT_EQ(std::system(("head -c 3000000 " + ktest("F32") + " > " + trunc).c_str()), 0);
    const std::vector<bad_case> cases = {
        {ktest("F32") + " " + out + " Q9_9", "unknown type"},
        {tmp.path + "/missing.gguf " + out + " Q4_0", "cannot load"},
        {trunc + " " + out + " Q4_0", "cannot load"},
        {ktest("Q8_0") + " " + out + " Q4_0", "already quantized"},
        {ktest("F32") + " " + out + " Q4_0 abc", "NTHREADS"},
        {ktest("F32") + " " + out + " Q4_0 0", "NTHREADS"},
        {ktest("F32") + " " + out + " Q4_0 --bogus", "unknown option"},
        {ktest("F32") + " " + ktest("F32") + " Q4_0", "must not be the input"},
        {ktest("F32") + " /nonexistent-dir/out.gguf Q4_0", "cannot create"},
        {ktest("F32"), "usage"},
    };
    for (const bad_case & c : cases) {
        const run_result r = run_quantize(c.args);
        EXPECT_NE(r.status, 0) << c.args;
        EXPECT_LT(r.status, 128) << "crashed: " << c.args << "\n" << r.output;
        EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.args << "\n" << r.output;
    }
    // Nothing but the truncated input is left: no output, no temporary file.
    EXPECT_EQ(tmp.files(), std::vector<std::string>{"truncated.gguf"});
    // Requantizing is possible when asked for.
    const run_result r = run_quantize("--allow-requantize " + ktest("Q8_0") + " " + out + " Q4_0 2");
    EXPECT_EQ(r.status, 0) << r.output;
}

// llama.cpp's flags and forms: --pure, --leave-output-tensor, --output-tensor-type,
// --token-embedding-type, --override-kv, file type numbers, COPY, OUT defaulting to
// ggml-model-TYPE.gguf beside IN; importance-matrix flags refused as not supported.
TEST(LlamaQuantize, LlamaCppFlagsTypeNumbersAndCopy) {
    REQUIRE_QUANTIZE_BIN();
    TU_REQUIRE_FILE(ktest("F32"));
    temp_dir tmp;
    auto types_of = [](const std::string & path) {
        model m(path);
        std::map<std::string, ggml_type> out;
        for (ggml_tensor * t = m.ctx ? ggml_get_first_tensor(m.ctx) : nullptr; t; t = ggml_get_next_tensor(m.ctx, t)) out[t->name] = t->type;
        return out;
    };
    const std::string in = ktest("F32");
    ASSERT_EQ(run_quantize(in + " " + tmp.path + "/mix.gguf Q4_K_M 2").status, 0);
    const run_result pure = run_quantize("--pure --token-embedding-type f16 --output-tensor-type q8_0 --override-kv general.name=str:hello "
                                         "--override-kv test.n=int:-7 --override-kv test.f=float:0.5 --override-kv test.b=bool:true " +
                                         in + " " + tmp.path + "/pure.gguf Q4_K_M 2");
    ASSERT_EQ(pure.status, 0) << pure.output;
    const auto mix = types_of(tmp.path + "/mix.gguf"), pt = types_of(tmp.path + "/pure.gguf");
    size_t higher = 0;
    for (const auto & kv : mix) higher += kv.second == GGML_TYPE_Q6_K;
    EXPECT_GT(higher, 2u) << "the Q4_K_M mix raises some tensors";
    for (const auto & kv : pt) {
        const std::string & n = kv.first;
        const ggml_type want = n == "token_embd.weight" ? GGML_TYPE_F16 : n == "output.weight" ? GGML_TYPE_Q8_0
                             : mix.at(n) == GGML_TYPE_F32 ? GGML_TYPE_F32 : GGML_TYPE_Q4_K;
        EXPECT_EQ(kv.second, want) << n;
    }
    {
        model m(tmp.path + "/pure.gguf");
        ASSERT_TRUE(m.g);
        EXPECT_STREQ(gguf_get_val_str(m.g, gguf_find_key(m.g, "general.name")), "hello");
        EXPECT_EQ(gguf_get_val_i32(m.g, gguf_find_key(m.g, "test.n")), -7);
        EXPECT_EQ(gguf_get_val_f32(m.g, gguf_find_key(m.g, "test.f")), 0.5f);
        EXPECT_TRUE(gguf_get_val_bool(m.g, gguf_find_key(m.g, "test.b")));
    }
    // --leave-output-tensor: output.weight as it is.
    ASSERT_EQ(run_quantize("--leave-output-tensor " + in + " " + tmp.path + "/leave.gguf Q4_0 2").status, 0);
    EXPECT_EQ(types_of(tmp.path + "/leave.gguf").at("output.weight"), GGML_TYPE_F32);
    // A file type number is its type; OUT left out: ggml-model-TYPE.gguf beside IN.
    std::system(("cp " + in + " " + tmp.path + "/in.gguf").c_str());
    const run_result num = run_quantize(tmp.path + "/in.gguf 7 2");
    ASSERT_EQ(num.status, 0) << num.output;
    ASSERT_EQ(run_quantize(in + " " + tmp.path + "/named.gguf Q8_0 2").status, 0);
    std::stringstream a, b;
    a << std::ifstream(tmp.path + "/ggml-model-Q8_0.gguf", std::ios::binary).rdbuf();
    b << std::ifstream(tmp.path + "/named.gguf", std::ios::binary).rdbuf();
    EXPECT_TRUE(a.str() == b.str() && !a.str().empty()) << "'7' is Q8_0, written to ggml-model-Q8_0.gguf";
    // COPY: every tensor as it is (quantized ones too, without --allow-requantize).
    ASSERT_EQ(run_quantize(ktest("Q8_0") + " " + tmp.path + "/copy.gguf COPY 2").status, 0);
    {
        model src(ktest("Q8_0")), dst(tmp.path + "/copy.gguf");
        ASSERT_TRUE(src.ctx && dst.ctx);
        for (ggml_tensor * t = ggml_get_first_tensor(src.ctx); t; t = ggml_get_next_tensor(src.ctx, t)) {
            const ggml_tensor * u = ggml_get_tensor(dst.ctx, t->name);
            ASSERT_TRUE(u) << t->name;
            EXPECT_EQ(u->type, t->type) << t->name;
            EXPECT_EQ(0, memcmp(u->data, t->data, ggml_nbytes(t))) << t->name;
        }
        EXPECT_EQ(dst.file_type(), src.file_type());
    }
    for (const char * bad : {"--imatrix x.dat", "--include-weights attn_v", "--output-tensor-type q9_9",
                                    "--override-kv general.name=text:x", "--override-kv nokey"}) {
        const run_result r = run_quantize(std::string(bad) + " " + in + " " + tmp.path + "/bad.gguf Q4_0");
        EXPECT_EQ(r.status, 1) << bad << "\n" << r.output;
        EXPECT_FALSE(tu::file_exists(tmp.path + "/bad.gguf")) << bad;
    }
}

// --imatrix (llama.cpp's own .dat of stories260K, tests/data/imatrix): the quantizers weigh each
// column's error by its mean squared activation, so the weighted error of every tensor is no
// larger than without (and smaller in all); llama.cpp's quantize.imatrix.* keys;
// --include-weights limits it; an imatrix of another model, a truncated one and conflicting
// flags are refused with nothing written.
TEST(LlamaQuantize, ImportanceMatrixWeightsTheError) {
    REQUIRE_QUANTIZE_BIN();
    const std::string in = tu::models_dir() + "/stories260K.gguf", dat = std::string(LLAMA_TEST_DATA_DIR) + "/imatrix/stories260K.dat";
    TU_REQUIRE_FILE(in);
    temp_dir tmp;
    const std::string with = tmp.path + "/with.gguf", without = tmp.path + "/without.gguf", attn = tmp.path + "/attn.gguf";
    const run_result r = run_quantize("--imatrix " + dat + " " + in + " " + with + " Q4_0 2");
    ASSERT_EQ(r.status, 0) << r.output;
    ASSERT_EQ(run_quantize(in + " " + without + " Q4_0 2").status, 0);
    ASSERT_EQ(run_quantize("--imatrix " + dat + " --include-weights attn " + in + " " + attn + " Q4_0 2").status, 0);
    common_imatrix im;
    std::string err;
    ASSERT_TRUE(common_imatrix_read(dat, im, err)) << err;
    model src(in), a(with), b(without), c(attn);
    ASSERT_TRUE(src.ctx && a.ctx && b.ctx && c.ctx);
    EXPECT_STREQ(gguf_get_val_str(a.g, gguf_find_key(a.g, "quantize.imatrix.file")), dat.c_str());
    EXPECT_EQ(gguf_get_val_i32(a.g, gguf_find_key(a.g, "quantize.imatrix.entries_count")), (int32_t) im.items.size());
    EXPECT_EQ(gguf_get_val_i32(a.g, gguf_find_key(a.g, "quantize.imatrix.chunks_count")), im.last_chunk);
    EXPECT_STREQ(gguf_get_val_str(a.g, gguf_find_key(a.g, "quantize.imatrix.dataset")), im.dataset.c_str());
    EXPECT_LT(gguf_find_key(b.g, "quantize.imatrix.file"), 0);
    double sum_with = 0, sum_without = 0;
    int n_weighted = 0;
    for (const common_imatrix::item & it : im.items) {
        const ggml_tensor * t = ggml_get_tensor(src.ctx, it.name.c_str());
        const ggml_tensor * ta = ggml_get_tensor(a.ctx, it.name.c_str()), * tb = ggml_get_tensor(b.ctx, it.name.c_str());
        const ggml_tensor * tc = ggml_get_tensor(c.ctx, it.name.c_str());
        ASSERT_TRUE(t && ta && tb && tc) << it.name;
        const bool same_as_without = ggml_nbytes(tc) == ggml_nbytes(tb) && memcmp(tc->data, tb->data, ggml_nbytes(tb)) == 0;
        EXPECT_EQ(same_as_without, it.name.find("attn") == std::string::npos || ta->type != GGML_TYPE_Q4_0) << it.name;
        if (ta->type != GGML_TYPE_Q4_0) continue;  // (rows that fall back to another type)
        const std::vector<float> x = src.floats(t), qa = a.floats(ta), qb = b.floats(tb);
        double ea = 0, eb = 0;
        for (size_t i = 0; i < x.size(); i++) {
            const double w = it.values[i % (size_t) t->ne[0]] / it.ncall;
            ea += w * (x[i] - qa[i]) * (x[i] - qa[i]);
            eb += w * (x[i] - qb[i]) * (x[i] - qb[i]);
        }
        EXPECT_LE(ea, eb * (1 + 1e-6)) << it.name;
        sum_with += ea;
        sum_without += eb;
        n_weighted++;
    }
    EXPECT_GT(n_weighted, 20);
    EXPECT_LT(sum_with, 0.9 * sum_without);
    // Refused, nothing written.
    const std::string trunc = tmp.path + "/trunc.dat";
    ASSERT_EQ(std::system(("head -c 1000 " + dat + " > " + trunc).c_str()), 0);
    const struct { std::string args, says; } bad[] = {
        {"--imatrix " + std::string(LLAMA_TEST_DATA_DIR) + "/imatrix/qwen2moe-f32-cache.dat", "made for another model"},
        {"--imatrix " + trunc, "truncated"},
        {"--imatrix " + dat + " --include-weights attn --exclude-weights ffn", "exclude each other"},
        {"--exclude-weights ffn", "need --imatrix"},
    };
    for (const auto & k : bad) {
        const run_result e = run_quantize(k.args + " " + in + " " + tmp.path + "/bad.gguf Q4_0 2");
        EXPECT_EQ(e.status, 1) << k.args << "\n" << e.output;
        EXPECT_NE(e.output.find(k.says), std::string::npos) << k.args << "\n" << e.output;
        EXPECT_FALSE(tu::file_exists(tmp.path + "/bad.gguf")) << k.args;
    }
}

// --imatrix takes llama.cpp's GGUF importance matrices too, told apart from a .dat by content:
// the .dat and the GGUF file of the same llama-imatrix run, under the same name, give the same
// output byte for byte (4 chunks of 128 tokens: the means of the two files are the same floats;
// for other counts they may differ in the last bit, and so may the output), with llama.cpp's
// quantize.imatrix.* keys. The weights of a GGUF entry: in_sum2 / count per matrix, 1 for an
// expert without rows. Bad GGUF files (an entry's counts missing, a key missing, truncated,
// another model's) are refused with nothing written.
TEST(LlamaQuantize, GgufImportanceMatrix) {
    REQUIRE_QUANTIZE_BIN();
    if (!tu::file_exists(LLAMA_IMATRIX_BIN)) GTEST_SKIP() << "llama-imatrix was not built";
    const std::string in = tu::models_dir() + "/stories260K.gguf", text = std::string(LLAMA_TEST_DATA_DIR) + "/imatrix/stories.txt";
    TU_REQUIRE_FILE(in);
    temp_dir tmp;
    const std::string p = tmp.path + "/", im = p + "imatrix";
    for (const char * f : {"run.dat", "run.gguf"}) {
        const run_result r = tu::run_command(std::string(LLAMA_EMULATOR) + " " + LLAMA_IMATRIX_BIN + " -m " + in + " -f " + text +
                                             " -c 128 --chunks 4 -t 2 --no-ppl -o " + p + f);
        ASSERT_EQ(r.status, 0) << r.output;
    }
    const auto quantize_with = [&](const std::string & file, const std::string & out) {
        ASSERT_EQ(std::system(("cp " + p + file + " " + im).c_str()), 0);
        const run_result r = run_quantize("--imatrix " + im + " " + in + " " + p + out + " Q4_0 2");
        ASSERT_EQ(r.status, 0) << r.output;
        EXPECT_NE(r.output.find(file == "run.dat" ? "(.dat)" : "(GGUF)"), std::string::npos) << r.output;
    };
    quantize_with("run.dat", "with-dat.gguf");
    quantize_with("run.gguf", "with-gguf.gguf");
    EXPECT_EQ(std::system(("cmp -s " + p + "with-dat.gguf " + p + "with-gguf.gguf").c_str()), 0);
    {
        model q(p + "with-gguf.gguf");
        ASSERT_TRUE(q.g);
        EXPECT_STREQ(gguf_get_val_str(q.g, gguf_find_key(q.g, "quantize.imatrix.file")), im.c_str());
        EXPECT_STREQ(gguf_get_val_str(q.g, gguf_find_key(q.g, "quantize.imatrix.dataset")), text.c_str());
        EXPECT_EQ(gguf_get_val_i32(q.g, gguf_find_key(q.g, "quantize.imatrix.entries_count")), 35);
        EXPECT_EQ(gguf_get_val_i32(q.g, gguf_find_key(q.g, "quantize.imatrix.chunks_count")), 4);
    }
    // The weights, by the shared reader.
    common_imatrix m;
    std::string err;
    ASSERT_TRUE(common_imatrix_read(p + "run.gguf", m, err)) << err;
    EXPECT_TRUE(m.gguf);
    ASSERT_FALSE(m.items.empty());
    const common_imatrix::item & first = m.items[0];
    ASSERT_EQ(first.counts, std::vector<float>{512});
    const std::vector<float> w = common_imatrix_weights(first);
    for (size_t j = 0; j < w.size(); j++) EXPECT_EQ(w[j], first.values[j] / 512) << j;
    common_imatrix::item experts;
    experts.values = {2, 4, 6, 8, 10, 12};
    experts.counts = {2, 0, 4};
    EXPECT_EQ(common_imatrix_weights(experts), (std::vector<float>{1, 2, 1, 1, 2.5f, 3}));

    // Refused, nothing written.
    const auto rewrite = [&](const std::string & out, const std::string & drop_tensor, const std::string & drop_key) {
        ggml_context * ctx = nullptr;
        gguf_init_params gp = {};
        gp.ctx = &ctx;
        gguf_context * src = gguf_init_from_file((p + "run.gguf").c_str(), gp);
        ASSERT_NE(src, nullptr);
        gguf_context * g = gguf_init_empty();
        gguf_set_kv(g, src);
        if (!drop_key.empty()) gguf_remove_key(g, drop_key.c_str());
        for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
            if (t->name != drop_tensor) gguf_add_tensor(g, t);
        }
        EXPECT_TRUE(gguf_write_to_file(g, out.c_str(), false));
        gguf_free(g);
        gguf_free(src);
        ggml_free(ctx);
    };
    rewrite(p + "no-counts.gguf", "blk.2.attn_v.weight.counts", "");
    rewrite(p + "no-key.gguf", "", "imatrix.chunk_size");
    ASSERT_EQ(std::system(("head -c 3000 " + p + "run.gguf > " + p + "trunc.gguf").c_str()), 0);
    const run_result c = tu::run_command(std::string(LLAMA_EMULATOR) + " " + LLAMA_IMATRIX_BIN + " --in-file " + LLAMA_TEST_DATA_DIR +
                                         "/imatrix/qwen2moe-f32-cache.dat -o " + p + "moe.gguf");
    ASSERT_EQ(c.status, 0) << c.output;
    const struct { std::string file, says; } bad[] = {
        {"no-counts.gguf", "no blk.2.attn_v.weight.counts"},
        {"no-key.gguf", "no imatrix.chunk_size key"},
        {"trunc.gguf", "truncated"},
        {"moe.gguf", "made for another model"},
    };
    for (const auto & k : bad) {
        const run_result e = run_quantize("--imatrix " + p + k.file + " " + in + " " + p + "bad.gguf Q4_0 2");
        EXPECT_EQ(e.status, 1) << k.file << "\n" << e.output;
        EXPECT_NE(e.output.find(k.says), std::string::npos) << k.file << "\n" << e.output;
        EXPECT_FALSE(tu::file_exists(p + "bad.gguf")) << k.file;
    }
    std::vector<std::string> files = tmp.files();
    std::sort(files.begin(), files.end());
    EXPECT_EQ(files, (std::vector<std::string>{"imatrix", "moe.gguf", "no-counts.gguf", "no-key.gguf", "run.dat", "run.gguf", "trunc.gguf",
                                               "with-dat.gguf", "with-gguf.gguf"}));
}
