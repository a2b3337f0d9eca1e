// Many sequences in one context: batches mixing sequences, the sequence operations of the KV cache
// (rm, cp, keep, add, div, defrag), a full cache and bad batches. The bar: a sequence evaluated
// beside others, in any interleaving, split into any micro-batches, gives the logits it gets
// alone in a fresh context, to rounding (mean KL below 1e-6 for float models, 1e-3 for quantized
// ones, as test-model's paths: a different batch shape sums in a different order).
#include "test-llama.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>

namespace {

using tu::mean_kl;
using tu::ModelPtr;
using tu::n_vocab_of;
using tu::take_errors;

std::string model_path(const std::string & name) {
    if (name.rfind("ktest-", 0) == 0) return tu::models_dir() + "/ktest/" + name + ".gguf";
    return tu::models_dir() + "/" + name + ".gguf";
}

double path_tolerance(const std::string & name) { return name.find('Q') != std::string::npos ? 1e-3 : 1e-6; }

std::vector<llama_token> some_tokens(int n, int n_vocab, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<llama_token> t(1, 1);
    while ((int) t.size() < n) t.push_back(3 + (llama_token) (rng() % (uint32_t) (n_vocab - 3)));
    return t;
}

struct Ctx {
    llama_context * c = nullptr;
    Ctx(llama_model * m, uint32_t n_ctx, uint32_t n_ubatch, uint32_t n_seq_max, ggml_type type = GGML_TYPE_F16, bool fa = false) {
        llama_context_params p = llama_context_default_params();
        p.n_ctx = n_ctx;
        p.n_batch = n_ctx;
        p.n_ubatch = n_ubatch;
        p.n_seq_max = n_seq_max;
        p.n_threads = p.n_threads_batch = 2;
        p.type_k = p.type_v = type;
        p.flash_attn = fa;
        c = llama_init_from_model(m, p);
    }
    ~Ctx() { llama_free(c); }
    operator llama_context *() const { return c; }
};

// One token of a batch: its id, position, sequences and whether it keeps logits.
struct Tok {
    llama_token id;
    llama_pos pos;
    std::vector<llama_seq_id> seqs;
    bool logits = true;
};

// Decodes the tokens in one batch; returns llama_decode's code.
int32_t decode(llama_context * ctx, const std::vector<Tok> & toks) {
    llama_batch b = llama_batch_init((int32_t) toks.size(), 0, 8);
    for (size_t i = 0; i < toks.size(); i++) {
        b.token[i] = toks[i].id;
        b.pos[i] = toks[i].pos;
        b.n_seq_id[i] = (int32_t) toks[i].seqs.size();
        for (size_t j = 0; j < toks[i].seqs.size(); j++) b.seq_id[i][j] = toks[i].seqs[j];
        b.logits[i] = toks[i].logits;
    }
    b.n_tokens = (int32_t) toks.size();
    const int32_t rc = llama_decode(ctx, b);
    llama_batch_free(b);
    return rc;
}

std::vector<float> row(llama_context * ctx, int32_t i) {
    const int32_t n_vocab = n_vocab_of((llama_model *) llama_get_model(ctx));
    const float * r = llama_get_logits_ith(ctx, i);
    EXPECT_NE(r, nullptr) << "batch index " << i;
    return r ? std::vector<float>(r, r + n_vocab) : std::vector<float>(n_vocab, 0.0f);
}

// The logits of each token of seq evaluated alone (one batch, sequence 0) in a fresh context.
std::vector<std::vector<float>> alone(llama_model * model, const std::vector<llama_token> & seq, ggml_type type, bool fa,
                                      llama_pos p0 = 0) {
    Ctx ctx(model, 128, 128, 1, type, fa);
    std::vector<Tok> toks;
    for (size_t i = 0; i < seq.size(); i++) toks.push_back({seq[i], p0 + (llama_pos) i, {0}});
    EXPECT_EQ(decode(ctx, toks), 0) << take_errors();
    std::vector<std::vector<float>> out;
    for (size_t i = 0; i < seq.size(); i++) out.push_back(row(ctx, (int32_t) i));
    return out;
}

double kl(const std::vector<float> & a, const std::vector<float> & b) { return mean_kl(a.data(), b.data(), 1, (int64_t) a.size()); }

#define REQUIRE_MODEL(name)                     \
    const std::string path_ = model_path(name); \
    TU_REQUIRE_FILE(path_);                     \
    ModelPtr model(path_);                      \
    ASSERT_NE(model.m, nullptr) << take_errors()

// Four sequences of different lengths, their prompts interleaved token by token in one batch cut
// into micro-batches of 7 (so every micro-batch mixes sequences), then generated a token per
// sequence per batch: every row equals the sequence alone. For each cache type, with and without
// flash attention.
TEST(Sequences, InterleavedSequencesMatchEachAlone) {
    for (const char * name : { "stories260K", "ktest-Q4_0" }) {
        REQUIRE_MODEL(name);
        const int32_t n_vocab = n_vocab_of(model);
        const bool q8_ok = llama_model_n_embd(model) / llama_model_n_head(model) % 32 == 0;
        const int lens[4] = { 13, 5, 21, 9 };
        std::vector<std::vector<llama_token>> seqs;
        for (int s = 0; s < 4; s++) seqs.push_back(some_tokens(lens[s] + 6, n_vocab, 100 + s));
        // Every cache type of the type table (block types where the model's heads hold whole blocks).
        std::vector<ggml_type> types;
        for (int t = 0; t < GGML_TYPE_COUNT; t++) {
            if (!ggml_type_is_valid(t) || !ggml_get_type_traits((ggml_type) t)->kv_cache) continue;
            if (ggml_blck_size((ggml_type) t) > 1 && !q8_ok) continue;
            types.push_back((ggml_type) t);
        }
        EXPECT_GE(types.size(), q8_ok ? 9u : 3u);
        for (ggml_type type : types) {
            for (bool fa : { false, true }) {
                SCOPED_TRACE(std::string(name) + " cache " + ggml_type_name(type) + (fa ? " flash" : ""));
                Ctx ctx(model, 128, 7, 4, type, fa);
                ASSERT_NE(ctx.c, nullptr) << take_errors();
                EXPECT_EQ(llama_n_seq_max(ctx), 4u);
                std::vector<Tok> batch;
                std::vector<std::pair<int, int>> who;  // (sequence, index) of each batch token
                for (int i = 0; i < 21; i++) {
                    for (int s = 0; s < 4; s++) {
                        if (i >= lens[s]) continue;
                        batch.push_back({seqs[s][i], i, {s}});
                        who.emplace_back(s, i);
                    }
                }
                ASSERT_EQ(decode(ctx, batch), 0) << take_errors();
                std::vector<std::vector<std::vector<float>>> ref;
                for (int s = 0; s < 4; s++) ref.push_back(alone(model, seqs[s], type, fa));
                double worst = 0;
                for (size_t b = 0; b < who.size(); b++) worst = std::max(worst, kl(ref[who[b].first][who[b].second], row(ctx, (int32_t) b)));
                // Generation: one token per sequence per batch, in a rotating order.
                for (int step = 0; step < 6; step++) {
                    std::vector<Tok> gen;
                    for (int k = 0; k < 4; k++) {
                        const int s = (k + step) % 4;
                        gen.push_back({seqs[s][lens[s] + step], lens[s] + step, {s}});
                    }
                    ASSERT_EQ(decode(ctx, gen), 0) << take_errors();
                    for (int k = 0; k < 4; k++) {
                        const int s = (k + step) % 4;
                        worst = std::max(worst, kl(ref[s][lens[s] + step], row(ctx, k)));
                        // Negative indices count from the end of the batch.
                        EXPECT_EQ(llama_get_logits_ith(ctx, k - 4), llama_get_logits_ith(ctx, k));
                    }
                }
                EXPECT_LT(worst, path_tolerance(name));
                for (int s = 0; s < 4; s++) {
                    EXPECT_EQ(llama_kv_self_seq_pos_max(ctx, s), lens[s] + 5);
                    EXPECT_EQ(llama_kv_self_seq_pos_min(ctx, s), 0);
                }
                EXPECT_EQ(llama_kv_self_used_cells(ctx), 13 + 5 + 21 + 9 + 24);
            }
        }
    }
}

// A prompt decoded once for three sequences (tokens in several sequences, and llama_kv_self_seq_cp
// sharing cells) then continued differently by each: each equals its prompt + continuation alone.
TEST(Sequences, SharedPromptContinuesPerSequence) {
    REQUIRE_MODEL("stories260K");
    const int32_t n_vocab = n_vocab_of(model);
    const std::vector<llama_token> prompt = some_tokens(10, n_vocab, 5);
    for (bool by_copy : { false, true }) {
        SCOPED_TRACE(by_copy ? "seq_cp" : "tokens in three sequences");
        Ctx ctx(model, 64, 64, 3);
        ASSERT_NE(ctx.c, nullptr) << take_errors();
        std::vector<Tok> batch;
        for (size_t i = 0; i < prompt.size(); i++) {
            batch.push_back({prompt[i], (llama_pos) i, by_copy ? std::vector<llama_seq_id>{0} : std::vector<llama_seq_id>{0, 1, 2}});
        }
        ASSERT_EQ(decode(ctx, batch), 0) << take_errors();
        if (by_copy) {
            llama_kv_self_seq_cp(ctx, 0, 1, -1, -1);
            llama_kv_self_seq_cp(ctx, 0, 2, 0, -1);
        }
        EXPECT_EQ(llama_kv_self_used_cells(ctx), 10);  // shared, not copied
        EXPECT_EQ(llama_kv_self_n_tokens(ctx), 30);
        for (int s = 0; s < 3; s++) EXPECT_EQ(llama_kv_self_seq_pos_max(ctx, s), 9);
        std::vector<std::vector<llama_token>> full(3, prompt);
        for (int s = 0; s < 3; s++) {
            const std::vector<llama_token> more = some_tokens(6, n_vocab, 50 + s);
            full[s].insert(full[s].end(), more.begin() + 1, more.end());
        }
        double worst = 0;
        for (int step = 0; step < 5; step++) {
            std::vector<Tok> gen;
            for (int s = 0; s < 3; s++) gen.push_back({full[s][10 + step], 10 + step, {s}});
            ASSERT_EQ(decode(ctx, gen), 0) << take_errors();
            for (int s = 0; s < 3; s++) worst = std::max(worst, kl(alone(model, full[s], GGML_TYPE_F16, false)[10 + step], row(ctx, s)));
        }
        EXPECT_LT(worst, 1e-6);
        EXPECT_EQ(llama_kv_self_used_cells(ctx), 25);
        // Keeping one sequence frees the others' cells and takes the shared ones for it alone.
        llama_kv_self_seq_keep(ctx, 1);
        EXPECT_EQ(llama_kv_self_used_cells(ctx), 15);
        EXPECT_EQ(llama_kv_self_n_tokens(ctx), 15);
        EXPECT_EQ(llama_kv_self_seq_pos_max(ctx, 0), -1);
        EXPECT_EQ(llama_kv_self_seq_pos_max(ctx, 1), 14);
    }
}

// Removing a sequence leaves holes that a new sequence fills; defragmentation moves the cells and
// the results stay those of each sequence alone; a shift of one sequence leaves the others.
TEST(Sequences, HolesDefragAndPerSequenceShift) {
    REQUIRE_MODEL("stories260K");
    const int32_t n_vocab = n_vocab_of(model);
    for (ggml_type type : { GGML_TYPE_F16, GGML_TYPE_F32 }) {  // (a block type needs heads of 32: not this model)
        SCOPED_TRACE(ggml_type_name(type));
        Ctx ctx(model, 64, 16, 3, type);
        ASSERT_NE(ctx.c, nullptr) << take_errors();
        const std::vector<llama_token> a = some_tokens(20, n_vocab, 1), b = some_tokens(20, n_vocab, 2), c = some_tokens(24, n_vocab, 3);
        std::vector<Tok> batch;
        for (int i = 0; i < 12; i++) {
            batch.push_back({a[i], i, {0}});
            batch.push_back({b[i], i, {1}});
        }
        ASSERT_EQ(decode(ctx, batch), 0) << take_errors();
        ASSERT_TRUE(llama_kv_self_seq_rm(ctx, 0, -1, -1));  // sequence 0 leaves every other cell empty
        EXPECT_EQ(llama_kv_self_used_cells(ctx), 12);
        batch.clear();
        for (int i = 0; i < 16; i++) batch.push_back({c[i], i, {2}});
        ASSERT_EQ(decode(ctx, batch), 0) << take_errors();
        const auto ref_c = alone(model, c, type, false);
        const auto ref_b = alone(model, b, type, false);
        double worst = 0;
        for (int i = 0; i < 16; i++) worst = std::max(worst, kl(ref_c[i], row(ctx, i)));
        llama_kv_self_defrag(ctx);
        for (int i = 12; i < 16; i++) {
            ASSERT_EQ(decode(ctx, {{b[i], i, {1}}, {c[i + 4], i + 4, {2}}}), 0);
            worst = std::max(worst, kl(ref_b[i], row(ctx, 0)));
            worst = std::max(worst, kl(ref_c[i + 4], row(ctx, 1)));
        }
        EXPECT_LT(worst, 1e-6);
        // Shift sequence 2 down by 4 (positions 4..19 become 0..15, 0..3 are dropped): it now equals
        // its tokens 4..19 at positions 0..15 in a one-layer sense only, so check the bookkeeping and
        // that sequence 1 is untouched.
        llama_kv_self_seq_add(ctx, 2, 0, -1, -4);
        EXPECT_EQ(llama_kv_self_seq_pos_min(ctx, 2), 0);
        EXPECT_EQ(llama_kv_self_seq_pos_max(ctx, 2), 15);
        EXPECT_EQ(llama_kv_self_seq_pos_max(ctx, 1), 15);
        EXPECT_EQ(llama_kv_self_used_cells(ctx), 16 + 16);
        ASSERT_EQ(decode(ctx, {{b[16], 16, {1}}}), 0);
        EXPECT_LT(kl(ref_b[16], row(ctx, 0)), 1e-6);
        llama_kv_self_seq_div(ctx, 2, 0, -1, 2);
        EXPECT_EQ(llama_kv_self_seq_pos_max(ctx, 2), 7);
        ASSERT_EQ(decode(ctx, {{b[17], 17, {1}}}), 0);
        EXPECT_LT(kl(ref_b[17], row(ctx, 0)), 1e-6);
    }
}

// A batch that does not fit returns 1 and leaves the cache as it was; a failed batch in the
// middle of micro-batches (bad input is found first) writes nothing.
TEST(Sequences, FullCacheAndBadBatchesChangeNothing) {
    REQUIRE_MODEL("stories260K");
    const int32_t n_vocab = n_vocab_of(model);
    Ctx ctx(model, 32, 8, 2);
    ASSERT_NE(ctx.c, nullptr) << take_errors();
    const std::vector<llama_token> a = some_tokens(32, n_vocab, 9);
    std::vector<Tok> batch;
    for (int i = 0; i < 14; i++) batch.push_back({a[i], i, {0}});
    for (int i = 0; i < 14; i++) batch.push_back({a[i], i, {1}});
    ASSERT_EQ(decode(ctx, batch), 0);
    const std::vector<float> before = row(ctx, 13);
    std::vector<Tok> big;
    for (int i = 14; i < 19; i++) big.push_back({a[i], i, {0}});
    EXPECT_EQ(decode(ctx, big), 1);
    take_errors();
    EXPECT_EQ(llama_kv_self_used_cells(ctx), 28);
    EXPECT_EQ(llama_kv_self_seq_pos_max(ctx, 0), 13);
    // Bad batches: a sequence id at n_seq_max, negative, positions going back (in the batch or
    // before the cache's), no sequence. (Equal positions are allowed: llama_kv_self_seq_div makes them.)
    const std::vector<std::vector<Tok>> bad = {
        {{a[14], 14, {2}}},
        {{a[14], 14, {-1}}},
        {{a[14], 14, {0}}, {a[15], 13, {0}}},
        {{a[14], 5, {1}}},
        {{a[14], 14, {0, 1}}, {a[15], 10, {1}}},
        {{a[14], 14, {}}},
    };
    for (const auto & b : bad) {
        EXPECT_EQ(decode(ctx, b), -1);
        EXPECT_FALSE(take_errors().empty());
        EXPECT_EQ(llama_kv_self_used_cells(ctx), 28);
    }
    // The cache is intact: continuing sequence 0 gives what it gives alone.
    ASSERT_EQ(decode(ctx, {{a[14], 14, {0}}}), 0);
    std::vector<llama_token> a15(a.begin(), a.begin() + 15);
    EXPECT_LT(kl(alone(model, a15, GGML_TYPE_F16, false)[14], row(ctx, 0)), 1e-6);
    // Sequence operations with ids out of range do nothing and say so.
    EXPECT_FALSE(llama_kv_self_seq_rm(ctx, 2, -1, -1));
    llama_kv_self_seq_cp(ctx, 0, 5, -1, -1);
    llama_kv_self_seq_keep(ctx, 7);
    llama_kv_self_seq_add(ctx, 3, 0, -1, 1);
    EXPECT_NE(take_errors().find("out of range [0, 2)"), std::string::npos);
    EXPECT_EQ(llama_kv_self_used_cells(ctx), 29);
    EXPECT_EQ(llama_kv_self_seq_pos_max(ctx, 0), 14);
    EXPECT_EQ(llama_kv_self_seq_pos_max(ctx, 1), 13);
    // More sequences than a context holds are refused at creation.
    llama_context_params p = llama_context_default_params();
    p.n_ctx = 32;
    p.n_seq_max = 257;
    EXPECT_EQ(llama_init_from_model(model, p), nullptr);
    EXPECT_NE(take_errors().find("n_seq_max 257"), std::string::npos);
}

// Embeddings: pooled per sequence of a batch of several equal each sequence's alone; the pooled
// rows are the mean / first / last of the per-token ones; the mode switches at run time.
TEST(Sequences, EmbeddingsPerSequence) {
    REQUIRE_MODEL("stories260K");
    const int32_t n_vocab = n_vocab_of(model), n_embd = llama_model_n_embd(model);
    const std::vector<llama_token> a = some_tokens(9, n_vocab, 31), b = some_tokens(6, n_vocab, 32);
    auto close = [&](const float * x, const float * y) {
        double d = 0;
        for (int i = 0; i < n_embd; i++) d = std::max(d, (double) std::fabs(x[i] - y[i]));
        return d;
    };
    // Per-token rows of one sequence alone.
    Ctx none(model, 64, 64, 1);
    ASSERT_NE(none.c, nullptr);
    llama_set_embeddings(none, true);
    EXPECT_EQ(llama_pooling_type(none), LLAMA_POOLING_TYPE_NONE);  // the GGUF has no pooling_type
    std::vector<Tok> ta;
    for (int i = 0; i < 9; i++) ta.push_back({a[i], i, {0}});
    ASSERT_EQ(decode(none, ta), 0) << take_errors();
    std::vector<std::vector<float>> rows;
    for (int i = 0; i < 9; i++) rows.emplace_back(llama_get_embeddings_ith(none, i), llama_get_embeddings_ith(none, i) + n_embd);
    EXPECT_EQ(llama_get_logits_ith(none, 0), nullptr);  // embeddings mode keeps no logits
    EXPECT_EQ(llama_get_embeddings(none), llama_get_embeddings_ith(none, 0));
    take_errors();
    for (enum llama_pooling_type pt : { LLAMA_POOLING_TYPE_MEAN, LLAMA_POOLING_TYPE_CLS, LLAMA_POOLING_TYPE_LAST }) {
        SCOPED_TRACE((int) pt);
        llama_context_params p = llama_context_default_params();
        p.n_ctx = 64;
        p.n_seq_max = 2;
        p.embeddings = true;
        p.pooling_type = pt;
        p.n_threads = p.n_threads_batch = 2;
        llama_context * ctx = llama_init_from_model(model, p);
        ASSERT_NE(ctx, nullptr);
        std::vector<Tok> both;
        for (int i = 0; i < 9; i++) {
            both.push_back({a[i], i, {0}});
            if (i < 6) both.push_back({b[i], i, {1}});
        }
        ASSERT_EQ(decode(ctx, both), 0) << take_errors();
        std::vector<float> want(n_embd, 0.0f);
        for (int k = 0; k < n_embd; k++) {
            if (pt == LLAMA_POOLING_TYPE_MEAN) {
                for (int i = 0; i < 9; i++) want[k] += rows[i][k] / 9.0f;
            } else {
                want[k] = rows[pt == LLAMA_POOLING_TYPE_CLS ? 0 : 8][k];
            }
        }
        ASSERT_NE(llama_get_embeddings_seq(ctx, 0), nullptr);
        ASSERT_NE(llama_get_embeddings_seq(ctx, 1), nullptr);
        EXPECT_EQ(llama_get_embeddings_seq(ctx, 2), nullptr);
        EXPECT_EQ(llama_get_embeddings(ctx), nullptr);  // pooled: per sequence only
        EXPECT_LT(close(llama_get_embeddings_seq(ctx, 0), want.data()), 1e-4);  // unnormalized states of size ~1-10, another batch shape
        // Back to logits: the same context generates.
        llama_set_embeddings(ctx, false);
        ASSERT_EQ(decode(ctx, {{a[0], 9, {0}}}), 0);
        EXPECT_NE(llama_get_logits_ith(ctx, 0), nullptr);
        llama_free(ctx);
    }
    // Without causal attention a batch must fit one micro-batch.
    Ctx small(model, 64, 4, 1);
    llama_set_embeddings(small, true);
    llama_set_causal_attn(small, false);
    EXPECT_EQ(decode(small, ta), -1);
    EXPECT_NE(take_errors().find("without causal attention"), std::string::npos);
}

// Random batches and sequence operations checked against a plain model of the cache: the cells
// in use, each sequence's positions, and the codes llama_decode returns.
TEST(Sequences, RandomOperationsKeepTheBookkeeping) {
    REQUIRE_MODEL("stories260K");
    const int32_t n_vocab = n_vocab_of(model);
    const int n_seq = 4, n_ctx = 48;
    Ctx ctx(model, n_ctx, 8, n_seq);
    ASSERT_NE(ctx.c, nullptr) << take_errors();
    std::mt19937 rng(1234);
    // Model: position -> set of sequences, one entry per cell.
    std::vector<std::pair<llama_pos, std::set<int>>> cells;
    auto pos_max = [&](int s) {
        llama_pos m = -1;
        for (const auto & c : cells) if (c.second.count(s)) m = std::max(m, c.first);
        return m;
    };
    auto pos_min = [&](int s) {
        llama_pos m = -1;
        for (const auto & c : cells) if (c.second.count(s)) m = m < 0 ? c.first : std::min(m, c.first);
        return m;
    };
    for (int step = 0; step < 300; step++) {
        const int op = (int) (rng() % 6);
        const int s = (int) (rng() % n_seq), s2 = (int) (rng() % n_seq);
        const llama_pos p0 = (llama_pos) (rng() % 20) - 2, p1 = rng() % 3 == 0 ? -1 : p0 + (llama_pos) (rng() % 10);
        auto in = [&](llama_pos p) { return p >= std::max(0, p0) && (p1 < 0 || p < p1); };
        if (op <= 1) {  // a batch: 1-6 tokens each continuing a random sequence
            std::vector<Tok> b;
            std::map<int, llama_pos> next;
            const int n = 1 + (int) (rng() % 6);
            for (int i = 0; i < n; i++) {
                const int t = (int) (rng() % n_seq);
                if (!next.count(t)) next[t] = pos_max(t) + 1 + (llama_pos) (rng() % 2);
                b.push_back({3 + (llama_token) (rng() % (n_vocab - 3)), next[t]++, {t}});
            }
            const int32_t rc = decode(ctx, b);
            const bool fits = (int) cells.size() + n <= n_ctx;
            ASSERT_EQ(rc, fits ? 0 : 1) << "step " << step;
            if (fits) for (const Tok & t : b) cells.push_back({t.pos, {t.seqs[0]}});
        } else if (op == 2) {
            llama_kv_self_seq_rm(ctx, s, p0, p1);
            for (auto & c : cells) if (c.second.count(s) && in(c.first)) c.second.erase(s);
        } else if (op == 3) {
            llama_kv_self_seq_cp(ctx, s, s2, p0, p1);
            for (auto & c : cells) if (c.second.count(s) && in(c.first)) c.second.insert(s2);
        } else if (op == 4) {
            const llama_pos d = (llama_pos) (rng() % 7) - 3;
            llama_kv_self_seq_add(ctx, s, p0, p1, d);
            for (auto & c : cells) {
                if (c.second.count(s) && in(c.first)) {
                    c.first += d;
                    if (c.first < 0) c.second.clear();
                }
            }
        } else if (rng() % 8 == 0) {
            llama_kv_self_seq_keep(ctx, s);
            for (auto & c : cells) {
                if (c.second.count(s)) c.second = {s};
                else c.second.clear();
            }
        } else {
            llama_kv_self_defrag(ctx);
        }
        cells.erase(std::remove_if(cells.begin(), cells.end(), [](const auto & c) { return c.second.empty(); }), cells.end());
        ASSERT_EQ(llama_kv_self_used_cells(ctx), (int32_t) cells.size()) << "step " << step << " op " << op;
        for (int t = 0; t < n_seq; t++) {
            ASSERT_EQ(llama_kv_self_seq_pos_max(ctx, t), pos_max(t)) << "step " << step << " op " << op << " seq " << t;
            ASSERT_EQ(llama_kv_self_seq_pos_min(ctx, t), pos_min(t)) << "step " << step << " op " << op << " seq " << t;
        }
    }
    take_errors();
}

}  // namespace
