// test-grad-llama.cpp - a whole decoder forward pass differentiated: the training graph
// (llm_build_forward_train: attention over the batch's own keys and values under a causal mask,
// and the sliding-window mask where the family has one; logits for every token), the
// cross-entropy of the next tokens as the loss, every weight a parameter. On stories260K, and on
// the tiny random-weight model of every family of the runtime's table (tests/common/tiny-models.h:
// soft-caps, post-norms and GELU of Gemma, per-head Q/K norms, fused QKV and gate-up, LongRoPE,
// biases, routers and shared experts; the experts themselves are frozen, as in llama-finetune).
//
//  - The training graph's logits equal llama_decode's (KV cache in F32) for the same tokens.
//  - Gradients of every weight tensor against central finite differences of the library's own
//    forward loss (the forward is the reference here: it is held to llama.cpp's and PyTorch's
//    logits by test-model and test-arch). Per tensor on stories260K: 4 elements chosen with a
//    fixed seed, the element with the largest gradient, and the directional derivative along a
//    random +-1 direction (which checks the whole tensor's gradient at once); on the families'
//    models the last two. The forward is float: its rounding moves the loss by up to ~1e-6
//    between nearby weights, an error of ~5e-4 in a derivative taken with a step of 1e-3, so
//    single elements take h = max(1e-2, 1e-2 |w|) (truncation is small there: steps 3x and 10x
//    larger agree within 0.5%), directions h = 3e-3 * rms(w) per element. On the families' models,
//    whose per-tensor derivatives are smaller (NEON's rounding took a 3e-3 step past the
//    tolerance), directions take the five-point stencil with h = 1e-2 * rms(w). Tolerance
//        |analytic - numeric| <= 1e-3 + 3e-2 * |numeric|
//    which the finite differences meet with a margin of about 7x on stories260K (GRAD_VERBOSE=1
//    prints the ratios). A wrong rule anywhere in the graph (a missing factor, a transposed
//    product, a misrouted head) puts the directional derivatives off by far more than 3%.
//  - The gradients are bit-identical with 1 and 2 threads.
#include "test-llama.h"
#include "tiny-models.h"

#include "llama.h"
#include "llama-graph.h"
#include "llama-model.h"

#include <algorithm>
#include <functional>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace {

void quiet_log(enum ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_ERROR || std::getenv("LLAMA_TEST_VERBOSE")) fputs(text, stderr);
}

bool verbose() {
    const char * e = std::getenv("GRAD_VERBOSE");
    return e && *e && *e != '0';
}

std::string model_path() { return tu::models_dir() + "/stories260K.gguf"; }

struct ModelDeleter {
    void operator()(llama_model * m) const { llama_model_free(m); }
};
using ModelPtr = std::unique_ptr<llama_model, ModelDeleter>;

// Loaded into memory (writable, for the finite differences) and in the file's layout.
ModelPtr load_model(const std::string & path) {
    llama_log_set(quiet_log, nullptr);
    llama_model_params mp = llama_model_default_params();
    mp.use_mmap = false;
    mp.use_repack = false;
    mp.n_gpu_layers = 0;
    return ModelPtr(llama_model_load_from_file(path.c_str(), mp));
}

// n + 1 tokens of a short text (BOS first): the first n are the input, the last n the targets.
std::vector<llama_token> story_tokens(const llama_model * model, int n) {
    // Not a sentence the model has learnt by heart: its loss (~3.4) and gradients are large
    // enough to be measured well by finite differences. Longer than the tiny models' windows (8)
    // and LongRoPE's original context (16).
    const char * text = "The old robot sang loudly under the purple moon while cats danced. Then the little "
                        "girl found a shiny red ball in the garden.";
    std::vector<llama_token> toks(256);
    const int k = llama_tokenize(llama_model_get_vocab(model), text, (int) strlen(text), toks.data(), (int) toks.size(), true, false);
    EXPECT_GE(k, n + 1);
    toks.resize((size_t) std::min(k, n + 1));
    return toks;
}

// The training graph of n tokens in a context with memory, its inputs filled (positions 0..n-1,
// causal mask, and the window's mask for sliding-window layers as llama-finetune fills it).
struct TrainGraph {
    tu::Ctx ctx{256u << 20};
    llm_graph_io io;
    ggml_cgraph * gf = nullptr;

    TrainGraph(const llama_model & model, const std::vector<llama_token> & tokens) {
        const uint32_t n = (uint32_t) tokens.size();
        gf = llm_build_forward_train(ctx, model, n, io);
        memcpy(io.tokens->data, tokens.data(), n * sizeof(int32_t));
        int32_t * pos = (int32_t *) io.pos->data;
        for (uint32_t t = 0; t < n; t++) pos[t] = (int32_t) t;
        float * mask = (float *) io.kq_mask->data;
        for (uint32_t t = 0; t < n; t++)
            for (uint32_t c = 0; c < n; c++) mask[t * n + c] = c <= t ? 0.0f : -std::numeric_limits<float>::infinity();
        if (io.kq_mask_swa) {
            float * swa = (float *) io.kq_mask_swa->data;
            memcpy(swa, mask, (size_t) n * n * sizeof(float));
            for (uint32_t t = 0; t < n; t++) llm_mask_window(model, swa + (size_t) t * n, pos, n, (int32_t) t);
        }
    }
};

bool is_expert(const ggml_tensor * t) { return strstr(t->name, "_exps.") != nullptr; }

// The weight tensors of the model: everything the file holds but the RoPE frequency factors
// (constants) and the experts of a mixture (frozen: their gradient is not computed).
std::vector<ggml_tensor *> weights(const llama_model & model) {
    std::vector<ggml_tensor *> w;
    for (ggml_tensor * t = ggml_get_first_tensor(model.ctx_w); t; t = ggml_get_next_tensor(model.ctx_w, t)) {
        if (t != model.rope_freqs && t != model.rope_long && t != model.rope_short && !is_expert(t)) w.push_back(t);
    }
    return w;
}

// The training graph's logits against llama_decode's for the n tokens.
void expect_train_forward_matches_decode(llama_model * model, const std::vector<llama_token> & tokens) {
    const int n_vocab = llama_model_n_vocab(model);
    const int n = (int) tokens.size();

    // The runtime's forward, with an F32 cache so that both paths compute in F32.
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
    llama_context * lctx = llama_init_from_model(model, cp);
    ASSERT_NE(lctx, nullptr);
    llama_batch batch = llama_batch_init(n, 0, 1);
    batch.n_tokens = n;
    for (int i = 0; i < n; i++) {
        batch.token[i] = tokens[(size_t) i];
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    ASSERT_EQ(llama_decode(lctx, batch), 0);
    std::vector<double> ref;
    for (int i = 0; i < n; i++) {
        const float * row = llama_get_logits_ith(lctx, i);
        ASSERT_NE(row, nullptr);
        ref.insert(ref.end(), row, row + n_vocab);
    }
    llama_batch_free(batch);
    llama_free(lctx);

    TrainGraph tg(*model, tokens);
    ASSERT_EQ(tg.io.logits->ne[0], n_vocab);
    ASSERT_EQ(tg.io.logits->ne[1], n);
    ASSERT_EQ(ggml_graph_compute_with_ctx(tg.ctx, tg.gf, 2), GGML_STATUS_SUCCESS);
    const std::vector<double> got = tu::to_double(tg.io.logits);

    // Same ops on the same F32 values; only the attention operands' layouts differ (cache views
    // against the batch's permuted keys), which may change the order of float sums.
    double max_ref = 0.0, max_diff = 0.0;
    for (size_t i = 0; i < ref.size(); i++) {
        max_ref = std::max(max_ref, std::fabs(ref[i]));
        max_diff = std::max(max_diff, std::fabs(got[i] - ref[i]));
    }
    if (verbose()) printf("  logits: max |ref| %.3g, max |train - decode| %.3g\n", max_ref, max_diff);
    tu::expect_close(got, ref, 1e-5, 1e-5 * max_ref, "training graph logits against llama_decode");
}

// Gradients of the weights ws of the loss over all[0..n-1] -> all[1..n] against central finite
// differences; n_random single elements per tensor besides the largest and a random direction.
void expect_gradients_match_finite_differences(const llama_model & m, const std::vector<llama_token> & all,
                                               const std::vector<ggml_tensor *> & ws, int n_random, double dir_step,
                                               bool five_point) {
    const int n_vocab = (int) m.hparams.n_vocab;
    const std::vector<llama_token> tokens(all.begin(), all.end() - 1);
    const int n = (int) tokens.size();
    for (ggml_tensor * w : ws) {
        ASSERT_EQ(w->type, GGML_TYPE_F32) << w->name << ": this test perturbs F32 weights";
        ggml_set_param(w);
    }
    struct ClearParams {
        const std::vector<ggml_tensor *> & ws;
        ~ClearParams() { for (ggml_tensor * w : ws) w->flags &= ~GGML_TENSOR_FLAG_PARAM; }
    } clear_params{ws};

    TrainGraph tg(m, tokens);
    ggml_context * ctx = tg.ctx;
    ggml_tensor * targets = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_vocab, n);
    ggml_set_zero(targets);
    for (int t = 0; t < n; t++) ggml_set_f32_nd(targets, all[(size_t) t + 1], t, 0, 0, 1.0f);
    ggml_tensor * loss = ggml_cross_entropy_loss(ctx, tg.io.logits, targets);
    ggml_set_loss(loss);
    ggml_build_forward_expand(tg.gf, loss);
    ggml_cgraph * gf_fwd = ggml_graph_dup(ctx, tg.gf, false);  // the forward pass only
    ggml_build_backward_expand(ctx, tg.gf, nullptr);

    std::vector<ggml_tensor *> grads;
    for (ggml_tensor * w : ws) {
        ggml_tensor * g = ggml_graph_get_grad(tg.gf, w);
        ASSERT_NE(g, nullptr) << "no gradient for " << w->name;
        ASSERT_TRUE(g->type == GGML_TYPE_F32 && ggml_are_same_shape(g, w)) << w->name;
        grads.push_back(g);
    }

    // 1 and 2 threads: bit-identical gradients (the 2-thread values are the ones checked).
    std::vector<std::vector<uint8_t>> first;
    for (int nt = 1; nt <= 2; nt++) {
        ggml_graph_reset(tg.gf);
        ASSERT_EQ(ggml_graph_compute_with_ctx(ctx, tg.gf, nt), GGML_STATUS_SUCCESS);
        for (size_t i = 0; i < grads.size(); i++) {
            if (nt == 1) first.push_back(tu::bytes_of(grads[i]));
            else EXPECT_TRUE(tu::bytes_of(grads[i]) == first[i]) << "gradient of " << ws[i]->name << " differs between 1 and 2 threads";
        }
    }
    const double loss0 = ggml_get_f32_1d(loss, 0);
    EXPECT_TRUE(std::isfinite(loss0) && loss0 > 0.0 && loss0 < 10.0) << "loss " << loss0;

    // The experts each token is routed to (the first n_expert_used of each row of every argsort
    // in the graph, as sets). A finite difference is only one where the routing stays the same:
    // a step that moves a token to another expert jumps the loss.
    const int n_used = (int) m.hparams.n_expert_used;
    auto routing = [&]() {
        std::vector<int32_t> r;
        for (int i = 0; i < ggml_graph_n_nodes(gf_fwd); i++) {
            const ggml_tensor * t = ggml_graph_node(gf_fwd, i);
            if (t->op != GGML_OP_ARGSORT) continue;
            for (int64_t row = 0; row < ggml_nrows(t); row++) {
                const int32_t * x = (const int32_t *) ((const char *) t->data + row * t->nb[1]);
                std::vector<int32_t> chosen(x, x + n_used);
                std::sort(chosen.begin(), chosen.end());
                r.insert(r.end(), chosen.begin(), chosen.end());
            }
        }
        return r;
    };
    auto forward_loss = [&]() {
        EXPECT_EQ(ggml_graph_compute_with_ctx(ctx, gf_fwd, 2), GGML_STATUS_SUCCESS);
        return (double) ggml_get_f32_1d(loss, 0);
    };
    EXPECT_EQ(forward_loss(), loss0) << "the forward-only graph computes the same loss";
    const std::vector<int32_t> routing0 = routing();
    // L(+) and L(-) for the weights set by step(sign, shrink): the step shrunk by 4 up to 3 times
    // while it changes the routing; false if it still does.
    auto loss_pair = [&](const std::function<void(int, double)> & step, double & lp, double & lm, double & shrunk) {
        for (int attempt = 0; attempt < 4; attempt++) {
            shrunk = std::pow(0.25, attempt);
            step(+1, shrunk);
            lp = forward_loss();
            const bool same_p = routing() == routing0;
            step(-1, shrunk);
            lm = forward_loss();
            const bool same_m = routing() == routing0;
            step(0, shrunk);
            if (same_p && same_m) return true;
        }
        return false;
    };

    std::mt19937 rng(4242);
    int n_checked = 0, n_unroutable = 0;
    double worst = 0.0;
    std::string worst_what;
    auto check = [&](double analytic, double numeric, const std::string & what) {
        const double tol = 1e-3 + 3e-2 * std::fabs(numeric);
        const double err = std::fabs(analytic - numeric);
        if (err / tol > worst) {
            worst = err / tol;
            worst_what = what;
        }
        if (verbose()) printf("  %-40s analytic % .6e numeric % .6e  err/tol %.3f\n", what.c_str(), analytic, numeric, err / tol);
        EXPECT_LE(err, tol) << what << ": analytic " << analytic << ", numeric " << numeric;
        n_checked++;
    };

    for (size_t wi = 0; wi < ws.size(); wi++) {
        ggml_tensor * w = ws[wi];
        float * data = (float *) w->data;
        const int64_t ne = ggml_nelements(w);
        ASSERT_TRUE(ggml_is_contiguous(w));
        const float * g = (const float *) grads[wi]->data;
        double rms = 0.0;
        for (int64_t i = 0; i < ne; i++) rms += (double) data[i] * data[i];
        rms = std::sqrt(rms / (double) ne);

        // Single elements: a few at random (for the embedding table, in the rows of the batch's
        // tokens: the other rows get no gradient, checked below) and the element with the
        // largest gradient, where the relative part of the tolerance decides.
        std::vector<int64_t> picks;
        for (int s = 0; s < n_random; s++) {
            if (w == m.tok_embd && s < n_random - 1) {
                picks.push_back((int64_t) tokens[rng() % tokens.size()] * w->ne[0] + (int64_t) (rng() % (uint64_t) w->ne[0]));
            } else {
                picks.push_back((int64_t) (rng() % (uint64_t) ne));
            }
        }
        int64_t imax = 0;
        for (int64_t i = 1; i < ne; i++) if (std::fabs(g[i]) > std::fabs(g[imax])) imax = i;
        picks.push_back(imax);
        for (int64_t i : picks) {
            const float w0 = data[i];
            const float h = std::max(1e-2f, 1e-2f * std::fabs(w0));
            float wp = w0, wm = w0;
            auto step = [&](int sign, double shrink) {
                data[i] = sign == 0 ? w0 : (float) (w0 + sign * shrink * h);
                if (sign > 0) wp = data[i];
                if (sign < 0) wm = data[i];
            };
            double lp, lm, shrunk;
            const std::string what = std::string(w->name) + "[" + std::to_string(i) + "]";
            if (!loss_pair(step, lp, lm, shrunk)) {
                n_unroutable++;
                if (verbose()) printf("  %-40s the routing changes at every step\n", what.c_str());
                continue;
            }
            // The step actually taken (w0 +- h rounded to float).
            check(g[i], (lp - lm) / ((double) wp - (double) wm), what);
        }

        // A random direction d (entries +-1 in the weight's own scale): L(w + h d) - L(w - h d)
        // over 2h against sum(grad * d).
        std::vector<float> w0(data, data + ne), d((size_t) ne);
        for (int64_t i = 0; i < ne; i++) d[(size_t) i] = (rng() & 1) ? 1.0f : -1.0f;
        const double h0 = dir_step * rms;  // moves the tensor by dir_step of its norm
        std::vector<float> step_p((size_t) ne), step_m((size_t) ne);
        auto step = [&](int sign, double shrink) {
            if (sign == 0) {
                memcpy(data, w0.data(), (size_t) ne * sizeof(float));
                return;
            }
            for (int64_t i = 0; i < ne; i++) {
                data[i] = (float) (w0[(size_t) i] + sign * shrink * h0 * d[(size_t) i]);
                (sign > 0 ? step_p : step_m)[(size_t) i] = sign * (data[i] - w0[(size_t) i]);
            }
        };
        const std::string what = std::string(w->name) + " along a random direction";
        if (five_point) {
            // L(w + j h d) for j = -2, -1, 1, 2: (8 (L1 - L-1) - (L2 - L-2)) / 12h, whose error is
            // O(h^4): a step large enough for float's rounding of the loss not to matter.
            double L[5] = {};
            double shrink = 1.0;
            bool same = false;
            for (int attempt = 0; attempt < 4 && !same; attempt++) {
                shrink = std::pow(0.25, attempt);
                same = true;
                for (int j : { -2, -1, 1, 2 }) {
                    for (int64_t i = 0; i < ne; i++) data[i] = (float) (w0[(size_t) i] + j * shrink * h0 * d[(size_t) i]);
                    L[j + 2] = forward_loss();
                    same = same && routing() == routing0;
                }
                memcpy(data, w0.data(), (size_t) ne * sizeof(float));
            }
            if (!same) {
                n_unroutable++;
                if (verbose()) printf("  %-40s the routing changes at every step\n", what.c_str());
                continue;
            }
            double analytic = 0.0;
            for (int64_t i = 0; i < ne; i++) analytic += (double) g[i] * d[(size_t) i];
            check(analytic, (8.0 * (L[3] - L[1]) - (L[4] - L[0])) / (12.0 * shrink * h0), what);
            continue;
        }
        double lp, lm, shrunk;
        if (!loss_pair(step, lp, lm, shrunk)) {
            n_unroutable++;
            if (verbose()) printf("  %-40s the routing changes at every step\n", what.c_str());
            continue;
        }
        const double h = shrunk * h0;
        // Weighted by the steps actually taken, so float rounding of w +- h d does not count.
        double analytic = 0.0;
        for (int64_t i = 0; i < ne; i++) analytic += (double) g[i] * (double) (step_p[(size_t) i] + step_m[(size_t) i]) / (2.0 * h);
        check(analytic, (lp - lm) / (2.0 * h), what);
    }
    // Steps 64x smaller than the usual still moving a token to another expert: rare, or the
    // router's choices are near ties everywhere.
    EXPECT_LE(n_unroutable * 10, n_checked) << n_unroutable << " checks skipped: the routing changed at every step";
    EXPECT_EQ(forward_loss(), loss0) << "the weights were restored";

    // Embedding rows of tokens not in the batch get exactly zero gradient (unless tied to the output).
    if (m.output != m.tok_embd && std::find(ws.begin(), ws.end(), m.tok_embd) != ws.end()) {
        const float * g = (const float *) ggml_graph_get_grad(tg.gf, m.tok_embd)->data;
        for (int64_t r = 0; r < m.tok_embd->ne[1]; r++) {
            if (std::find(tokens.begin(), tokens.end(), (llama_token) r) != tokens.end()) continue;
            for (int64_t c = 0; c < m.tok_embd->ne[0]; c++) ASSERT_EQ(g[r * m.tok_embd->ne[0] + c], 0.0f) << "row " << r;
        }
    }
    printf("  %d gradient checks on %zu weight tensors (%d skipped: routing changed), loss %.4f; worst err/tol %.3f (%s)\n",
           n_checked, ws.size(), n_unroutable, loss0, worst, worst_what.c_str());
}

TEST(GradLlama, TrainForwardMatchesDecode) {
    TU_REQUIRE_FILE(model_path());
    ModelPtr model = load_model(model_path());
    ASSERT_TRUE(model);
    std::vector<llama_token> tokens = story_tokens(model.get(), 12);
    tokens.pop_back();
    expect_train_forward_matches_decode(model.get(), tokens);
}

TEST(GradLlama, WeightGradientsMatchFiniteDifferences) {
    TU_REQUIRE_FILE(model_path());
    ModelPtr model = load_model(model_path());
    ASSERT_TRUE(model);
    const llama_model & m = *model;
    const std::vector<llama_token> all = story_tokens(model.get(), 12);
    ASSERT_EQ(all.size(), 13u);
    const std::vector<ggml_tensor *> ws = weights(m);
    ASSERT_EQ(ws.size(), 2 + 9 * (size_t) m.hparams.n_layer + (m.output != m.tok_embd ? 1 : 0));
    expect_gradients_match_finite_differences(m, all, ws, 4, 3e-3, false);
}

// Every family's tiny model (F32 weights), 20 tokens: past the windows of 8 and LongRoPE's original
// context of 16 (the long factors, in both paths).
class GradFamily : public testing::TestWithParam<tiny::spec> {};

TEST_P(GradFamily, TrainForwardMatchesDecodeAndGradientsMatchFiniteDifferences) {
    const tiny::spec & s = GetParam();
    TU_REQUIRE_FILE(model_path());
    tu::TempFile file("grad-" + s.name + ".gguf");
    ASSERT_TRUE(tiny::write(s, file.path, model_path()));
    ModelPtr model = load_model(file.path);
    ASSERT_TRUE(model);
    const std::vector<llama_token> all = story_tokens(model.get(), 20);
    ASSERT_EQ(all.size(), 21u);
    {
        SCOPED_TRACE("training forward against llama_decode");
        expect_train_forward_matches_decode(model.get(), std::vector<llama_token>(all.begin(), all.end() - 1));
    }
    // The global weights and those of the first two layers, the last and the first whose attention
    // is not like layer 0's (sliding window or not): the layers between run the same code (Gemma 2
    // has 26).
    const llama_hparams & hp = model->hparams;
    int other = -1;
    for (int il = 1; il < (int) hp.n_layer && other < 0; il++) if (hp.is_swa((uint32_t) il) != hp.is_swa(0)) other = il;
    std::vector<ggml_tensor *> ws;
    for (ggml_tensor * t : weights(*model)) {
        int il = -1;
        if (sscanf(t->name, "blk.%d.", &il) != 1 || il < 2 || il == (int) hp.n_layer - 1 || il == other) ws.push_back(t);
    }
    size_t n_experts = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(model->ctx_w); t; t = ggml_get_next_tensor(model->ctx_w, t)) n_experts += is_expert(t);
    EXPECT_EQ(n_experts, s.n_expert ? 3 * (size_t) s.n_layer : 0) << "the experts are frozen, the rest trains";
    expect_gradients_match_finite_differences(*model, all, ws, 0, 1e-2, true);
}

std::vector<tiny::spec> families() {
    std::vector<tiny::spec> v;
    // llama: stories260K above; encoders have no output head to train through
    for (const tiny::spec & s : tiny::specs()) if (s.name != "llama" && !llm_arch_get(s.arch).encoder) v.push_back(s);
    return v;
}

INSTANTIATE_TEST_SUITE_P(Tiny, GradFamily, testing::ValuesIn(families()),
                         [](const testing::TestParamInfo<tiny::spec> & i) { return i.param.name; });

}  // namespace
