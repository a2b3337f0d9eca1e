// llama-export-lora and llama-convert --lora, run as programs. Adapters are made here (random A
// and B large enough to move the logits). References: the merged weights computed by plain
// double loops from the base tensors and A, B; the logits of the base with the adapters applied
// unmerged through the C API; for quantized bases, the error of quantizing the merged weights
// directly and the logit error of quantizing the model; for PEFT, a Hugging Face model merged
// in its own (rotate-half) row order and converted.
#include "test-util.h"

#include "gguf.h"
#include "llama-adapter.h"
#include "llama-model.h"
#include "llama-safetensors.h"
#include "llama.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>


namespace {

using tu::run_result;
using temp_dir = tu::TempDir;

const std::string k_export = std::string(LLAMA_BIN_DIR) + "/llama-export-lora";
const std::string k_convert = std::string(LLAMA_BIN_DIR) + "/llama-convert";

run_result run_prog(const std::string & bin, const std::string & args) {
    return tu::run_command(std::string(LLAMA_EMULATOR) + " " + bin + " " + args);
}

std::string stories() { return tu::models_dir() + "/stories260K.gguf"; }
std::string ktest(const std::string & type) { return tu::models_dir() + "/ktest/ktest-" + type + ".gguf"; }

#define REQUIRE_BIN(b) \
    do { if (!tu::file_exists(b)) GTEST_SKIP() << (b) << " was not built"; } while (0)

// A GGUF file with its tensor data.
struct gguf_file {
    gguf_context * g = nullptr;
    ggml_context * ctx = nullptr;
    explicit gguf_file(const std::string & path) {
        gguf_init_params p = {};
        p.no_alloc = false;
        p.ctx = &ctx;
        g = gguf_init_from_file(path.c_str(), p);
    }
    ~gguf_file() {
        gguf_free(g);
        ggml_free(ctx);
    }
    ggml_tensor * get(const std::string & name) const { return ggml_get_tensor(ctx, name.c_str()); }
};

std::vector<float> floats(const ggml_tensor * t) {
    std::vector<float> v((size_t) ggml_nelements(t));
    if (t->type == GGML_TYPE_F32) memcpy(v.data(), t->data, v.size() * sizeof(float));
    else ggml_get_type_traits(t->type)->to_float(t->data, v.data(), (int64_t) v.size());
    return v;
}

// A model with the file's layouts (no repacking), as the programs load it.
std::unique_ptr<llama_model> load_model(const std::string & path) {
    auto m = std::make_unique<llama_model>();
    llama_model_params mp = llama_model_default_params();
    mp.use_repack = false;
    std::string err;
    if (!llama_model_load(*m, path.c_str(), mp, err)) {
        ADD_FAILURE() << path << ": " << err;
        return nullptr;
    }
    return m;
}

double rms(const std::vector<float> & v) {
    double s = 0;
    for (float x : v) s += (double) x * x;
    return std::sqrt(s / (double) v.size());
}

// A random adapter on the targets: A uniform in [-1, 1], B uniform with a per-tensor bound so
// that the update s * B A has an RMS of `rel` times the base weight's.
void make_adapter(llama_adapter_lora & ad, const llama_model & m, const std::vector<std::string> & targets, int r,
                  float alpha, uint32_t seed, double rel = 0.25) {
    std::string err;
    ASSERT_TRUE(llama_adapter_lora_create(ad, m, targets, r, alpha, err)) << err;
    std::mt19937 rng(seed);
    for (auto & kv : ad.weights) {
        const double s = ad.effective_scale(kv.second, 1.0f);
        // (B A) has RMS sqrt(r) * (b / sqrt(3)) * (1 / sqrt(3)) for B in [-b, b], A in [-1, 1].
        const double b = 3.0 * rel * rms(floats(kv.first)) / (std::fabs(s) * std::sqrt((double) r));
        tu::fill_uniform(kv.second.a, rng, -1.0f, 1.0f);
        tu::fill_uniform(kv.second.b, rng, (float) -b, (float) b);
    }
}

void save_adapter(const llama_adapter_lora & ad, const llama_model & m, const std::string & path) {
    std::string err;
    ASSERT_TRUE(llama_adapter_lora_save_gguf(ad, m, path, GGML_TYPE_F32, err)) << err;
}

// W + sum_i s_i * alpha_i / r_i * B_i A_i in double, by plain loops over the base tensor w.
std::vector<double> merged_reference(const ggml_tensor * w, const std::vector<std::pair<const llama_adapter_lora *, float>> & ads) {
    const std::vector<float> base = floats(w);
    std::vector<double> out(base.begin(), base.end());
    const int64_t n_in = w->ne[0], n_out = w->ne[1];
    for (const auto & [ad, scale] : ads) {
        const llama_adapter_lora_weight * lw = ad->get(w);
        if (!lw) continue;
        const int64_t r = lw->a->ne[1];
        const double s = ad->alpha != 0.0f ? (double) scale * ad->alpha / (double) r : (double) scale;
        const float * A = (const float *) lw->a->data;  // A[k][j]: row k of n_in
        const float * B = (const float *) lw->b->data;  // B[o][k]: row o of r
        for (int64_t o = 0; o < n_out; o++) {
            for (int64_t j = 0; j < n_in; j++) {
                double acc = 0;
                for (int64_t k = 0; k < r; k++) acc += (double) B[o * r + k] * (double) A[k * n_in + j];
                out[(size_t) (o * n_in + j)] += s * acc;
            }
        }
    }
    return out;
}

double max_abs(const std::vector<double> & v) {
    double m = 0;
    for (double x : v) m = std::max(m, std::fabs(x));
    return m;
}

double max_diff(const std::vector<float> & a, const std::vector<double> & b) {
    double m = 0;
    for (size_t i = 0; i < a.size(); i++) m = std::max(m, std::fabs((double) a[i] - b[i]));
    return m;
}

double rel_rmse(const std::vector<float> & a, const std::vector<double> & ref) {
    double e = 0, s = 0;
    for (size_t i = 0; i < a.size(); i++) {
        e += ((double) a[i] - ref[i]) * ((double) a[i] - ref[i]);
        s += ref[i] * ref[i];
    }
    return std::sqrt(e / s);
}

// The relative RMSE of quantizing ref (rounded to F32) directly to type: what a merged tensor
// that is requantized can be held to.
double quantization_error(const std::vector<double> & ref, ggml_type type, int64_t n_in) {
    const std::vector<float> f(ref.begin(), ref.end());
    const int64_t rows = (int64_t) f.size() / n_in;
    std::vector<uint8_t> q(ggml_row_size(type, n_in) * (size_t) rows);
    ggml_quantize_chunk(type, f.data(), q.data(), 0, rows, n_in, nullptr);
    std::vector<float> d(f.size());
    ggml_get_type_traits(type)->to_float(q.data(), d.data(), (int64_t) d.size());
    return rel_rmse(d, ref);
}

// Every key of a with the same type and value in b.
void expect_same_metadata(const gguf_context * a, const gguf_context * b) {
    ASSERT_EQ(gguf_get_n_kv(a), gguf_get_n_kv(b));
    for (int64_t i = 0; i < gguf_get_n_kv(a); i++) {
        const char * key = gguf_get_key(a, i);
        const int64_t j = gguf_find_key(b, key);
        ASSERT_GE(j, 0) << key;
        const gguf_type t = gguf_get_kv_type(a, i);
        ASSERT_EQ(t, gguf_get_kv_type(b, j)) << key;
        const auto size_of = [](gguf_type type) -> size_t {
            switch (type) {
                case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
                case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
                case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
                default: return 8;
            }
        };
        if (t == GGUF_TYPE_STRING) {
            EXPECT_STREQ(gguf_get_val_str(a, i), gguf_get_val_str(b, j)) << key;
        } else if (t == GGUF_TYPE_ARRAY) {
            const gguf_type at = gguf_get_arr_type(a, i);
            ASSERT_EQ(at, gguf_get_arr_type(b, j)) << key;
            const size_t n = gguf_get_arr_n(a, i);
            ASSERT_EQ(n, gguf_get_arr_n(b, j)) << key;
            if (at == GGUF_TYPE_STRING) {
                size_t bad = 0;
                for (size_t k = 0; k < n; k++) bad += strcmp(gguf_get_arr_str(a, i, k), gguf_get_arr_str(b, j, k)) != 0;
                EXPECT_EQ(bad, 0u) << key;
            } else {
                EXPECT_EQ(memcmp(gguf_get_arr_data(a, i), gguf_get_arr_data(b, j), n * size_of(at)), 0) << key;
            }
        } else {
            EXPECT_EQ(memcmp(gguf_get_val_data(a, i), gguf_get_val_data(b, j), size_of(t)), 0) << key;
        }
    }
}

const std::vector<llama_token> k_tokens = {1, 403, 407, 261, 378, 42, 300, 17, 511, 88, 2, 150};

// Logits of every token of k_tokens through the C API, with the adapters applied unmerged.
std::vector<float> eval_logits(const std::string & model_path, const std::vector<std::pair<std::string, float>> & loras = {}) {
    llama_model * m = llama_model_load_from_file(model_path.c_str(), llama_model_default_params());
    if (!m) {
        ADD_FAILURE() << "cannot load " << model_path;
        return {};
    }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = 64;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    llama_context * ctx = llama_init_from_model(m, cp);
    std::vector<llama_adapter_lora *> ads;
    for (const auto & [path, scale] : loras) {
        llama_adapter_lora * ad = llama_adapter_lora_init(m, path.c_str());
        EXPECT_NE(ad, nullptr) << path;
        if (ad) {
            llama_set_adapter_lora(ctx, ad, scale);
            ads.push_back(ad);
        }
    }
    const int32_t n = (int32_t) k_tokens.size();
    llama_batch batch = llama_batch_init(n, 0, 1);
    for (int32_t i = 0; i < n; i++) {
        batch.token[i] = k_tokens[i];
        batch.pos[i] = i;
        batch.logits[i] = 1;
    }
    batch.n_tokens = n;
    std::vector<float> out;
    EXPECT_EQ(llama_decode(ctx, batch), 0);
    const int32_t n_vocab = llama_model_n_vocab(m);
    for (int32_t i = 0; i < n; i++) {
        const float * l = llama_get_logits_ith(ctx, i);
        out.insert(out.end(), l, l + n_vocab);
    }
    llama_batch_free(batch);
    llama_free(ctx);
    for (llama_adapter_lora * ad : ads) llama_adapter_lora_free(ad);
    llama_model_free(m);
    return out;
}

double max_abs_diff(const std::vector<float> & a, const std::vector<float> & b) {
    double m = 0;
    for (size_t i = 0; i < a.size(); i++) m = std::max(m, (double) std::fabs(a[i] - b[i]));
    return m;
}

double max_abs(const std::vector<float> & v) {
    double m = 0;
    for (float x : v) m = std::max(m, (double) std::fabs(x));
    return m;
}

double mean_kl(const std::vector<float> & a, const std::vector<float> & b) {
    const int64_t n_rows = (int64_t) k_tokens.size();
    return tu::mean_kl(a.data(), b.data(), n_rows, (int64_t) a.size() / n_rows);
}

const std::vector<std::string> k_all_targets = {"q", "k", "v", "o", "gate", "up", "down", "output"};

// Checks the exported file against the base and the adapters: merged tensors against the double
// reference (F32 / F16 outputs: elementwise; quantized: relative RMSE within that of quantizing
// the reference directly), the others byte for byte; metadata and tensor order as the base's.
// Returns the largest relative RMSE of a requantized tensor over its direct quantization's.
double check_export(const std::string & base_path, const llama_model & m, const std::string & out_path,
                    const std::vector<std::pair<const llama_adapter_lora *, float>> & ads, ggml_type outtype,
                    const std::string & what) {
    gguf_file base(base_path), out(out_path);
    EXPECT_NE(out.g, nullptr) << what;
    if (!out.g || !base.g) return 0;
    expect_same_metadata(base.g, out.g);
    EXPECT_EQ(gguf_get_n_tensors(base.g), gguf_get_n_tensors(out.g)) << what;
    double worst_ratio = 0, worst_f32 = 0;
    int n_merged = 0;
    for (int64_t i = 0; i < gguf_get_n_tensors(base.g); i++) {
        const std::string name = gguf_get_tensor_name(base.g, i);
        EXPECT_EQ(name, gguf_get_tensor_name(out.g, i)) << what << ": tensor order";
        const ggml_tensor * tb = base.get(name), * to = out.get(name);
        if (!to) {
            ADD_FAILURE() << what << ": " << name << " missing";
            continue;
        }
        EXPECT_TRUE(ggml_are_same_shape(tb, to)) << what << " " << name;
        const ggml_tensor * w = ggml_get_tensor(m.ctx_w, name.c_str());
        bool adapted = false;
        for (const auto & a : ads) adapted = adapted || (a.first->get(w) && a.second != 0.0f);
        if (!adapted) {
            EXPECT_EQ(tb->type, to->type) << what << " " << name;
            EXPECT_TRUE(ggml_nbytes(tb) == ggml_nbytes(to) && memcmp(tb->data, to->data, ggml_nbytes(tb)) == 0)
                << what << ": untouched " << name << " is not byte-identical";
            continue;
        }
        n_merged++;
        const ggml_type want = outtype != GGML_TYPE_COUNT ? outtype : tb->type;
        EXPECT_EQ(to->type, want) << what << " " << name;
        const std::vector<double> ref = merged_reference(w, ads);
        const std::vector<float> got = floats(to);
        if (to->type == GGML_TYPE_F32 || to->type == GGML_TYPE_F16) {
            // Elementwise: F32 rounding of the update (~1e-7 of the largest value), or F16's own.
            const double tol = to->type == GGML_TYPE_F32 ? 1e-6 : 1.0 / 2048;
            size_t bad = 0;
            const double mx = max_abs(ref);
            for (size_t k = 0; k < got.size(); k++) {
                bad += std::fabs(got[k] - ref[k]) > tol * (std::fabs(ref[k]) + (to->type == GGML_TYPE_F32 ? mx : 1e-3 * mx));
            }
            EXPECT_EQ(bad, 0u) << what << " " << name;
            if (to->type == GGML_TYPE_F32) worst_f32 = std::max(worst_f32, max_diff(got, ref) / mx);
        } else {
            const double e = rel_rmse(got, ref), eq = quantization_error(ref, to->type, to->ne[0]);
            EXPECT_LE(e, eq * 1.01 + 1e-7) << what << " " << name << " (" << ggml_type_name(to->type) << ")";
            worst_ratio = std::max(worst_ratio, e / eq);
        }
    }
    EXPECT_GT(n_merged, 0) << what;
    if (worst_f32 > 0) printf("  [%s] F32 merged tensors: max |exported - reference| / max |reference| = %.3g\n", what.c_str(), worst_f32);
    if (worst_ratio > 0) {
        printf("  [%s] requantized tensors: relative RMSE at most %.4f x that of quantizing the reference directly\n",
               what.c_str(), worst_ratio);
    }
    return worst_ratio;
}

}  // namespace

// ---- F32 base --------------------------------------------------------------------------------

TEST(ExportLora, F32BaseMatchesDoubleReferenceAndUnmergedLogits) {
    REQUIRE_BIN(k_export);
    TU_REQUIRE_FILE(stories());
    temp_dir tmp;
    auto m = load_model(stories());
    ASSERT_TRUE(m);
    llama_adapter_lora ad;
    make_adapter(ad, *m, k_all_targets, 4, 8.0f, 11);
    const std::string ad_path = tmp.path + "/adapter.gguf", out = tmp.path + "/merged.gguf";
    save_adapter(ad, *m, ad_path);

    const run_result r = run_prog(k_export, "-m " + stories() + " --lora " + ad_path + " -o " + out + " -t 2");
    ASSERT_EQ(r.status, 0) << r.output;
    check_export(stories(), *m, out, {{&ad, 1.0f}}, GGML_TYPE_COUNT, "stories260K F32");

    // The merged model computes what the base does with the adapter applied unmerged.
    const std::vector<float> base = eval_logits(stories()), unmerged = eval_logits(stories(), {{ad_path, 1.0f}});
    const std::vector<float> merged = eval_logits(out);
    ASSERT_EQ(merged.size(), unmerged.size());
    const double moved = max_abs_diff(base, unmerged), d = max_abs_diff(merged, unmerged);
    printf("  logits: the adapter moves them by up to %.3f; merged vs unmerged: max |diff| %.3g (max |logit| %.2f)\n",
           moved, d, max_abs(unmerged));
    EXPECT_GT(moved, 1.0);
    EXPECT_LT(d, 1e-4 * std::max(1.0, max_abs(unmerged)));
}

TEST(ExportLora, PeftDirectoryAsAdapterGivesTheSameFile) {
    REQUIRE_BIN(k_export);
    TU_REQUIRE_FILE(stories());
    temp_dir tmp;
    auto m = load_model(stories());
    ASSERT_TRUE(m);
    llama_adapter_lora ad;
    make_adapter(ad, *m, {"q", "k", "down"}, 2, 4.0f, 5);
    std::string err;
    ASSERT_TRUE(llama_adapter_lora_save_peft(ad, *m, tmp.path + "/peft", err)) << err;
    save_adapter(ad, *m, tmp.path + "/adapter.gguf");
    ASSERT_EQ(run_prog(k_export, "-m " + stories() + " --lora " + tmp.path + "/adapter.gguf -o " + tmp.path + "/a.gguf").status, 0);
    ASSERT_EQ(run_prog(k_export, "-m " + stories() + " --lora " + tmp.path + "/peft -o " + tmp.path + "/b.gguf").status, 0);
    EXPECT_EQ(std::system(("cmp -s " + tmp.path + "/a.gguf " + tmp.path + "/b.gguf").c_str()), 0);
}

TEST(ExportLora, OuttypeQ8_0FallsBackToF16ForShortRows) {
    REQUIRE_BIN(k_export);
    TU_REQUIRE_FILE(stories());
    temp_dir tmp;
    auto m = load_model(stories());
    ASSERT_TRUE(m);
    llama_adapter_lora ad;
    make_adapter(ad, *m, {"q", "down"}, 4, 8.0f, 3);
    save_adapter(ad, *m, tmp.path + "/adapter.gguf");
    const std::string out = tmp.path + "/merged.gguf";
    const run_result r = run_prog(k_export, "-m " + stories() + " --lora " + tmp.path + "/adapter.gguf -o " + out + " --outtype q8_0");
    ASSERT_EQ(r.status, 0) << r.output;
    gguf_file f(out), base(stories());
    ASSERT_NE(f.g, nullptr);
    const int64_t n_ff = m->layers[0].ffn_down->ne[0];
    EXPECT_EQ(f.get("blk.0.attn_q.weight")->type, GGML_TYPE_Q8_0);
    printf("  n_ff %lld: merged ffn_down written as %s\n", (long long) n_ff, ggml_type_name(f.get("blk.0.ffn_down.weight")->type));
    // ffn_down's rows are n_ff long: Q8_0's blocks of 32 fit only if it is a multiple of 32.
    EXPECT_EQ(f.get("blk.0.ffn_down.weight")->type, n_ff % 32 == 0 ? GGML_TYPE_Q8_0 : GGML_TYPE_F16) << "n_ff " << n_ff;
    if (n_ff % 32 != 0) {
        EXPECT_NE(r.output.find("not a multiple of the q8_0 block"), std::string::npos) << r.output;
    }
    EXPECT_EQ(f.get("blk.0.attn_k.weight")->type, GGML_TYPE_F32);  // untouched
    EXPECT_EQ(f.get("token_embd.weight")->type, GGML_TYPE_F32);
}

// ---- quantized bases ---------------------------------------------------------------------------

// The adapter's logit effect, the merge error, and the error of quantizing the model (llama.cpp's
// quantized file against the F32 one): the tolerance for requantized merged weights.
struct logit_figures {
    double moved, merged_vs_unmerged, quantization;
};

logit_figures compare_logits(const std::string & type, const std::string & out,
                             const std::vector<std::pair<std::string, float>> & loras) {
    const std::vector<float> f32 = eval_logits(ktest("F32")), base = eval_logits(ktest(type));
    const std::vector<float> unmerged = eval_logits(ktest(type), loras), merged = eval_logits(out);
    logit_figures f{mean_kl(unmerged, base), mean_kl(unmerged, merged), mean_kl(f32, base)};
    printf("  [%s] mean KL: adapter effect %.4g, merged vs unmerged %.3g, quantization of the model %.3g nats\n",
           type.c_str(), f.moved, f.merged_vs_unmerged, f.quantization);
    return f;
}

TEST(ExportLora, QuantizedBasesKeepTheirTypes) {
    REQUIRE_BIN(k_export);
    for (const std::string type : {"Q8_0", "Q4_0", "Q4_K_M"}) {
        TU_REQUIRE_FILE(ktest(type));
        TU_REQUIRE_FILE(ktest("F32"));
        temp_dir tmp;
        auto m = load_model(ktest(type));
        ASSERT_TRUE(m);
        llama_adapter_lora ad;
        make_adapter(ad, *m, k_all_targets, 8, 16.0f, 21);
        const std::string ad_path = tmp.path + "/adapter.gguf", out = tmp.path + "/merged.gguf";
        save_adapter(ad, *m, ad_path);
        const run_result r = run_prog(k_export, "-m " + ktest(type) + " --lora " + ad_path + " -o " + out + " -t 2");
        ASSERT_EQ(r.status, 0) << r.output;
        check_export(ktest(type), *m, out, {{&ad, 1.0f}}, GGML_TYPE_COUNT, "ktest " + type);
        // Requantizing the merged weights is one more quantization of the adapted matrices, which
        // costs about what quantizing the model did: the merge error in the logits stays within
        // twice the quantization's, and far below the adapter's effect.
        const logit_figures f = compare_logits(type, out, {{ad_path, 1.0f}});
        EXPECT_LT(f.merged_vs_unmerged, 2.0 * f.quantization) << type;
        EXPECT_GT(f.moved, 5.0 * f.merged_vs_unmerged) << type;
        if (type == "Q4_K_M") {  // the same bytes with any number of threads
            const std::string out1 = tmp.path + "/t1.gguf";
            ASSERT_EQ(run_prog(k_export, "-m " + ktest(type) + " --lora " + ad_path + " -o " + out1 + " -t 1").status, 0);
            EXPECT_EQ(std::system(("cmp -s " + out + " " + out1).c_str()), 0);
        }
    }
}

TEST(ExportLora, TwoScaledAdaptersOnQ8_0) {
    REQUIRE_BIN(k_export);
    TU_REQUIRE_FILE(ktest("Q8_0"));
    TU_REQUIRE_FILE(ktest("F32"));
    temp_dir tmp;
    auto m = load_model(ktest("Q8_0"));
    ASSERT_TRUE(m);
    llama_adapter_lora a1, a2;
    make_adapter(a1, *m, {"q", "v", "up"}, 4, 8.0f, 31);
    make_adapter(a2, *m, {"q", "k", "down", "output"}, 8, 0.0f, 32);  // alpha 0: the user scale alone
    const std::string p1 = tmp.path + "/a1.gguf", p2 = tmp.path + "/a2.gguf", out = tmp.path + "/merged.gguf";
    save_adapter(a1, *m, p1);
    save_adapter(a2, *m, p2);
    const run_result r = run_prog(k_export, "-m " + ktest("Q8_0") + " --lora-scaled " + p1 + " 0.7 --lora-scaled " + p2 +
                                                " -1.3 -o " + out);
    ASSERT_EQ(r.status, 0) << r.output;
    check_export(ktest("Q8_0"), *m, out, {{&a1, 0.7f}, {&a2, -1.3f}}, GGML_TYPE_COUNT, "ktest Q8_0, two adapters");
    const logit_figures f = compare_logits("Q8_0", out, {{p1, 0.7f}, {p2, -1.3f}});
    EXPECT_LT(f.merged_vs_unmerged, 2.0 * f.quantization);
    EXPECT_GT(f.moved, 5.0 * f.merged_vs_unmerged);
}

TEST(ExportLora, OuttypeF16OnQuantizedBase) {
    REQUIRE_BIN(k_export);
    TU_REQUIRE_FILE(ktest("Q4_0"));
    TU_REQUIRE_FILE(ktest("F32"));
    temp_dir tmp;
    auto m = load_model(ktest("Q4_0"));
    ASSERT_TRUE(m);
    llama_adapter_lora ad;
    make_adapter(ad, *m, {"q", "k", "v", "o", "gate", "up", "down"}, 8, 16.0f, 41);
    const std::string ad_path = tmp.path + "/adapter.gguf", out = tmp.path + "/merged.gguf";
    save_adapter(ad, *m, ad_path);
    const run_result r = run_prog(k_export, "-m " + ktest("Q4_0") + " --lora " + ad_path + " -o " + out + " --outtype f16");
    ASSERT_EQ(r.status, 0) << r.output;
    check_export(ktest("Q4_0"), *m, out, {{&ad, 1.0f}}, GGML_TYPE_F16, "ktest Q4_0 --outtype f16");
    // No requantization: the merged model is as close to the unmerged one as F16 rounding allows,
    // far closer than the quantization of the model.
    const logit_figures f = compare_logits("Q4_0", out, {{ad_path, 1.0f}});
    EXPECT_LT(f.merged_vs_unmerged, 0.1 * f.quantization);
}

TEST(ExportLora, ZeroScaleCopiesTheBase) {
    REQUIRE_BIN(k_export);
    TU_REQUIRE_FILE(ktest("Q4_0"));
    temp_dir tmp;
    auto m = load_model(ktest("Q4_0"));
    ASSERT_TRUE(m);
    llama_adapter_lora ad;
    make_adapter(ad, *m, {"q"}, 2, 4.0f, 1);
    save_adapter(ad, *m, tmp.path + "/adapter.gguf");
    const run_result r = run_prog(k_export, "-m " + ktest("Q4_0") + " --lora-scaled " + tmp.path + "/adapter.gguf 0 -o " +
                                                tmp.path + "/out.gguf");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(std::system(("cmp -s " + ktest("Q4_0") + " " + tmp.path + "/out.gguf").c_str()), 0);
}

// ---- llama-convert --lora ----------------------------------------------------------------------

TEST(ConvertLora, PeftToGgufEqualsTheOriginalAdapter) {
    REQUIRE_BIN(k_convert);
    TU_REQUIRE_FILE(stories());
    temp_dir tmp;
    auto m = load_model(stories());
    ASSERT_TRUE(m);
    llama_adapter_lora ad;
    make_adapter(ad, *m, k_all_targets, 4, 8.0f, 51);
    std::string err;
    ASSERT_TRUE(llama_adapter_lora_save_peft(ad, *m, tmp.path + "/peft", err)) << err;
    const std::string out = tmp.path + "/converted.gguf";
    const run_result r = run_prog(k_convert, "--lora " + tmp.path + "/peft --base " + stories() + " -o " + out);
    ASSERT_EQ(r.status, 0) << r.output;

    gguf_file f(out);
    ASSERT_NE(f.g, nullptr);
    const int64_t ka = gguf_find_key(f.g, "adapter.lora.alpha");
    ASSERT_GE(ka, 0);
    EXPECT_EQ(gguf_get_val_f32(f.g, ka), 8.0f);
    EXPECT_STREQ(gguf_get_val_str(f.g, gguf_find_key(f.g, "general.type")), "adapter");
    EXPECT_STREQ(gguf_get_val_str(f.g, gguf_find_key(f.g, "adapter.type")), "lora");
    EXPECT_STREQ(gguf_get_val_str(f.g, gguf_find_key(f.g, "general.architecture")), "llama");
    EXPECT_EQ(gguf_get_n_tensors(f.g), (int64_t) (2 * ad.weights.size()));
    for (const auto & kv : ad.weights) {
        for (const ggml_tensor * t : {kv.second.a, kv.second.b}) {
            const ggml_tensor * c = f.get(t->name);
            ASSERT_NE(c, nullptr) << t->name;
            EXPECT_EQ(c->type, GGML_TYPE_F32) << t->name;  // the PEFT file's type
            ASSERT_TRUE(ggml_are_same_shape(c, t)) << t->name;
            EXPECT_EQ(memcmp(c->data, t->data, ggml_nbytes(t)), 0) << t->name;
        }
    }
    // The same file the original adapter is written as.
    save_adapter(ad, *m, tmp.path + "/original.gguf");
    EXPECT_EQ(std::system(("cmp -s " + out + " " + tmp.path + "/original.gguf").c_str()), 0);

    // --outtype f16: the same values rounded to F16.
    const std::string out16 = tmp.path + "/converted-f16.gguf";
    ASSERT_EQ(run_prog(k_convert, "--lora " + tmp.path + "/peft --base " + stories() + " -o " + out16 + " --outtype f16").status, 0);
    gguf_file f16(out16);
    ASSERT_NE(f16.g, nullptr);
    for (const auto & kv : ad.weights) {
        const ggml_tensor * c = f16.get(kv.second.b->name);
        ASSERT_NE(c, nullptr);
        EXPECT_EQ(c->type, GGML_TYPE_F16);
        const std::vector<float> got = floats(c);
        const float * want = (const float *) kv.second.b->data;
        for (size_t i = 0; i < got.size(); i++) ASSERT_EQ(got[i], ggml_fp16_to_fp32(ggml_fp32_to_fp16(want[i])));
    }
}

// A PEFT adapter is relative to the Hugging Face model, whose Q and K rows are in rotate-half
// order. Merging it into the Hugging Face weights (in that order, by the test) and converting
// must give the model that converting the base and merging the converted adapter gives.
TEST(ConvertLora, PeftMergedInHuggingFaceOrderEqualsExportedMerge) {
    REQUIRE_BIN(k_convert);
    REQUIRE_BIN(k_export);
    const std::string hf = tu::models_dir() + "/tinystories-656k";
    TU_REQUIRE_FILE(hf + "/model.safetensors");
    temp_dir tmp;
    const std::string base = tmp.path + "/base.gguf";
    run_result r = run_prog(k_convert, "--hf " + hf + " -o " + base + " --outtype f32");
    ASSERT_EQ(r.status, 0) << r.output;
    auto m = load_model(base);
    ASSERT_TRUE(m);
    llama_adapter_lora ad;
    make_adapter(ad, *m, {"q", "k", "v", "o", "gate", "up", "down"}, 4, 8.0f, 61);
    std::string err;
    const std::string peft = tmp.path + "/peft";
    ASSERT_TRUE(llama_adapter_lora_save_peft(ad, *m, peft, err)) << err;

    // W_hf + s * B_peft A_peft on the Hugging Face tensors, written as a model directory.
    const std::string hf2 = tmp.path + "/hf-merged";
    ASSERT_EQ(std::system(("mkdir -p " + hf2 + " && cd " + hf + " && for f in *; do [ \"$f\" = model.safetensors ] || cp \"$f\" " +
                           hf2 + "/; done").c_str()), 0);
    std::map<std::string, st_tensor> w_hf, lora;
    safetensors_load_file(hf + "/model.safetensors", w_hf);
    safetensors_load_file(peft + "/adapter_model.safetensors", lora);
    const double s = 8.0 / 4;
    std::vector<st_out_tensor> outs;
    int n_merged = 0;
    for (const auto & [name, t] : w_hf) {
        ASSERT_EQ(t.type, GGML_TYPE_F32) << name;
        st_out_tensor o{name, GGML_TYPE_F32, t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes)};
        const std::string module = name.substr(0, name.size() - std::string(".weight").size());
        auto ia = lora.find("base_model.model." + module + ".lora_A.weight");
        auto ib = lora.find("base_model.model." + module + ".lora_B.weight");
        if (ia != lora.end() && ib != lora.end()) {
            n_merged++;
            const int64_t n_out = t.shape[0], n_in = t.shape[1], rk = ia->second.shape[0];
            const float * A = (const float *) ia->second.data;  // (r, n_in)
            const float * B = (const float *) ib->second.data;  // (n_out, r)
            float * W = (float *) o.data.data();
            for (int64_t i = 0; i < n_out; i++) {
                for (int64_t j = 0; j < n_in; j++) {
                    double acc = 0;
                    for (int64_t k = 0; k < rk; k++) acc += (double) B[i * rk + k] * A[k * n_in + j];
                    W[i * n_in + j] = (float) (W[i * n_in + j] + s * acc);
                }
            }
        }
        outs.push_back(std::move(o));
    }
    EXPECT_EQ(n_merged, 7 * (int) m->hparams.n_layer);
    safetensors_write(hf2 + "/model.safetensors", outs, {{"format", "pt"}});
    const std::string want = tmp.path + "/hf-merged.gguf";
    r = run_prog(k_convert, "--hf " + hf2 + " -o " + want + " --outtype f32");
    ASSERT_EQ(r.status, 0) << r.output;

    const std::string ad_gguf = tmp.path + "/adapter.gguf", got = tmp.path + "/exported.gguf";
    r = run_prog(k_convert, "--lora " + peft + " --base " + base + " -o " + ad_gguf);
    ASSERT_EQ(r.status, 0) << r.output;
    r = run_prog(k_export, "-m " + base + " --lora " + ad_gguf + " -o " + got);
    ASSERT_EQ(r.status, 0) << r.output;

    gguf_file a(want), b(got);
    ASSERT_NE(a.g, nullptr);
    ASSERT_NE(b.g, nullptr);
    ASSERT_EQ(gguf_get_n_tensors(a.g), gguf_get_n_tensors(b.g));
    double worst = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(a.ctx); t; t = ggml_get_next_tensor(a.ctx, t)) {
        const ggml_tensor * u = b.get(t->name);
        ASSERT_NE(u, nullptr) << t->name;
        ASSERT_TRUE(ggml_are_same_shape(t, u)) << t->name;
        const std::vector<float> x = floats(t), y = floats(u);
        double d = 0, mx = 0;
        for (size_t i = 0; i < x.size(); i++) {
            d = std::max(d, (double) std::fabs(x[i] - y[i]));
            mx = std::max(mx, (double) std::fabs(x[i]));
        }
        EXPECT_LE(d, 1e-6 * mx) << t->name;
        worst = std::max(worst, d / mx);
    }
    printf("  HF-order merge + convert vs convert + export-lora: max |diff| / max |w| = %.3g\n", worst);
}

// ---- bad input ---------------------------------------------------------------------------------

TEST(ExportLora, BadInputFailsCleanlyAndLeavesNoFile) {
    REQUIRE_BIN(k_export);
    TU_REQUIRE_FILE(stories());
    TU_REQUIRE_FILE(ktest("F32"));
    temp_dir in, outdir;
    auto m = load_model(stories());
    ASSERT_TRUE(m);
    llama_adapter_lora ad;
    make_adapter(ad, *m, {"q", "v"}, 2, 4.0f, 71);
    const std::string good = in.path + "/adapter.gguf";
    save_adapter(ad, *m, good);
    // Corrupt: the first half of a good adapter.
    const std::string corrupt = in.path + "/corrupt.gguf";
    {
        std::ifstream f(good, std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        std::ofstream(corrupt, std::ios::binary).write(bytes.data(), (std::streamsize) bytes.size() / 2);
    }
    // An adapter for another shape: made for ktest (dim 256), given with stories260K (dim 64).
    const std::string other = in.path + "/ktest-adapter.gguf";
    {
        auto mk = load_model(ktest("F32"));
        ASSERT_TRUE(mk);
        llama_adapter_lora ak;
        make_adapter(ak, *mk, {"q"}, 2, 4.0f, 72);
        save_adapter(ak, *mk, other);
    }
    // A rank-0 adapter (empty A and B: no scale alpha / r exists), as a PEFT directory.
    const std::string rank0 = in.path + "/rank0";
    {
        std::string err;
        ASSERT_TRUE(llama_adapter_lora_save_peft(ad, *m, rank0, err)) << err;
        const int64_t n_embd = m->hparams.n_embd;
        safetensors_write(rank0 + "/adapter_model.safetensors",
                          {{"base_model.model.model.layers.0.self_attn.v_proj.lora_A.weight", GGML_TYPE_F32, {0, n_embd}, {}},
                           {"base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight", GGML_TYPE_F32, {n_embd / 2, 0}, {}}},
                          {{"format", "pt"}});
    }
    const std::string out = outdir.path + "/out.gguf";
    const std::string base = " -m " + stories();
    struct bad_case {
        std::string args, message;
    };
    const std::vector<bad_case> cases = {
        {"-m " + in.path + "/missing.gguf --lora " + good + " -o " + out, "cannot load the base model"},
        {"-m " + good + " --lora " + good + " -o " + out, "cannot load the base model"},
        {base + " --lora " + in.path + "/missing.gguf -o " + out, "cannot load the LoRA adapter"},
        {base + " --lora " + corrupt + " -o " + out, "cannot load the LoRA adapter"},
        {base + " --lora " + stories() + " -o " + out, "is not a LoRA adapter"},
        {base + " --lora " + other + " -o " + out, "does not fit"},
        {base + " --lora " + rank0 + " -o " + out, "rank"},
        {base + " --lora " + good + " -o " + out + " --outtype q9_9", "invalid value for --outtype: 'q9_9'"},
        {base + " --lora " + good, "no output file"},
        {base + " -o " + out, "no adapter"},
        {base + " --lora-scaled " + good + " abc -o " + out, "'abc' (a finite number)"},
        {base + " --lora " + good + " -o " + out + " -t 0", "value of -t out of range: 0"},
        {base + " --lora " + good + " -o " + stories(), "must not be the base"},
        {base + " --lora " + good + " -o " + out + " --bogus", "unknown option '--bogus'"},
        {base + " --lora " + good + " -o " + outdir.path + "/no/such/dir/out.gguf", "cannot create"},
    };
    for (const bad_case & c : cases) {
        const run_result r = run_prog(k_export, c.args);
        EXPECT_NE(r.status, 0) << c.args;
        EXPECT_LT(r.status, 128) << c.args << ": crashed\n" << r.output;
        EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
        EXPECT_TRUE(r.output.find("error") != std::string::npos || r.output.find("(see llama-export-lora --help)") != std::string::npos)
            << c.args;
        EXPECT_TRUE(outdir.files().empty()) << c.args << ": left " << outdir.files()[0];
    }
}

TEST(ConvertLora, BadInputFailsCleanlyAndLeavesNoFile) {
    REQUIRE_BIN(k_convert);
    TU_REQUIRE_FILE(stories());
    TU_REQUIRE_FILE(ktest("F32"));
    temp_dir in, outdir;
    auto mk = load_model(ktest("F32"));
    ASSERT_TRUE(mk);
    llama_adapter_lora ak;
    make_adapter(ak, *mk, {"q"}, 2, 4.0f, 81);
    std::string err;
    ASSERT_TRUE(llama_adapter_lora_save_peft(ak, *mk, in.path + "/ktest-peft", err)) << err;
    const std::string out = outdir.path + "/out.gguf";
    struct bad_case {
        std::string args, message;
    };
    const std::vector<bad_case> cases = {
        {"--lora " + in.path + "/ktest-peft -o " + out, "needs --base"},
        {"--lora " + in.path + "/ktest-peft --base " + stories() + " -o " + out, "does not fit"},
        {"--lora " + in.path + "/missing --base " + stories() + " -o " + out, "not a directory"},
        {"--lora " + in.path + " --base " + stories() + " -o " + out, "not a PEFT adapter directory"},
        {"--lora " + in.path + "/ktest-peft --base " + in.path + "/missing.gguf -o " + out, "cannot load the base model"},
        {"--lora " + in.path + "/ktest-peft --base " + ktest("F32") + " -o " + out + " --outtype q8_0", "f32, f16 or bf16"},
        {"--lora " + in.path + "/ktest-peft --base " + ktest("F32"), "no output file"},
    };
    for (const bad_case & c : cases) {
        const run_result r = run_prog(k_convert, c.args);
        EXPECT_NE(r.status, 0) << c.args;
        EXPECT_LT(r.status, 128) << c.args << ": crashed\n" << r.output;
        EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
        EXPECT_TRUE(outdir.files().empty()) << c.args;
    }
    // The good case works (the adapter fits ktest).
    const run_result r = run_prog(k_convert, "--lora " + in.path + "/ktest-peft --base " + ktest("F32") + " -o " + out);
    EXPECT_EQ(r.status, 0) << r.output;
}
