// Saved state (llama_state_*): states and session files written by llama.cpp's own library (build
// 4747, tests/data/state-reference/, made by gen.cpp there) load here and continue with the logits
// llama.cpp computed (KL below 1e-6); a state saved here and loaded again (into the same context
// after a clear, or another one) gives the same logits bit for bit; a sequence's state moves to
// another sequence of another context; and every bad input (another model or cache type, a
// truncated or corrupt buffer or file, a wrong magic or version, no room) is refused with a
// message, the context exactly as it was.
#include "test-llama.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

namespace {

using tu::mean_kl;
using tu::take_errors;

std::string stories() { return tu::models_dir() + "/stories260K.gguf"; }
std::string ref(const std::string & name) { return std::string(LLAMA_TEST_DATA_DIR) + "/state-reference/" + name; }

std::vector<uint8_t> read_bytes(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string & path, const std::vector<uint8_t> & b) {
    std::ofstream(path, std::ios::binary).write((const char *) b.data(), (std::streamsize) b.size());
}

struct Ctx {
    llama_context * c = nullptr;
    explicit Ctx(llama_model * m, uint32_t n_seq_max = 4, uint32_t n_ctx = 512, ggml_type type = GGML_TYPE_F16, bool fa = false) {
        llama_context_params p = llama_context_default_params();
        p.n_ctx = n_ctx;
        p.n_batch = n_ctx;
        p.n_seq_max = n_seq_max;
        p.n_threads = p.n_threads_batch = 2;
        p.type_k = p.type_v = type;
        p.flash_attn = fa;
        c = llama_init_from_model(m, p);
    }
    ~Ctx() { llama_free(c); }
    operator llama_context *() const { return c; }
};

struct Tok {
    llama_token id;
    llama_pos pos;
    std::vector<llama_seq_id> seqs;
    bool logits;
};

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

int32_t n_vocab(llama_context * ctx) { return tu::n_vocab_of((llama_model *) llama_get_model(ctx)); }

std::vector<float> logits(llama_context * ctx, int32_t i) {
    const float * r = llama_get_logits_ith(ctx, i);
    if (!r) return {};
    return std::vector<float>(r, r + n_vocab(ctx));
}

std::vector<uint8_t> state_of(llama_context * ctx) {
    std::vector<uint8_t> s(llama_state_get_size(ctx));
    EXPECT_EQ(llama_state_get_data(ctx, s.data(), s.size()), s.size());
    return s;
}

std::vector<uint8_t> seq_state_of(llama_context * ctx, llama_seq_id s) {
    std::vector<uint8_t> b(llama_state_seq_get_size(ctx, s));
    EXPECT_EQ(llama_state_seq_get_data(ctx, b.data(), b.size(), s), b.size());
    return b;
}

// The reference logits files of gen.cpp.
struct RefLogits {
    int32_t n_vocab = 0;
    std::vector<int32_t> next;
    std::vector<std::vector<float>> rows;
};

RefLogits read_ref(const std::string & name, int n_next, int n_rows) {
    const std::vector<uint8_t> b = read_bytes(ref(name));
    RefLogits r;
    if (b.size() < 4) return r;
    memcpy(&r.n_vocab, b.data(), 4);
    if (b.size() != 4 + 4 * (size_t) n_next + (size_t) n_rows * r.n_vocab * 4) return RefLogits();
    r.next.resize(n_next);
    memcpy(r.next.data(), b.data() + 4, 4 * (size_t) n_next);
    const uint8_t * p = b.data() + 4 + 4 * n_next;
    for (int i = 0; i < n_rows; i++, p += (size_t) r.n_vocab * 4) {
        r.rows.emplace_back((size_t) r.n_vocab);
        memcpy(r.rows.back().data(), p, (size_t) r.n_vocab * 4);
    }
    return r;
}

double kl(const std::vector<float> & a, const std::vector<float> & b) {
    if (a.empty() || a.size() != b.size()) return INFINITY;
    return mean_kl(a.data(), b.data(), 1, (int64_t) a.size());
}

class State : public testing::Test {
protected:
    void SetUp() override {
        if (!tu::file_exists(stories())) GTEST_SKIP() << stories() << " is absent";
        model = std::make_unique<tu::ModelPtr>(stories());
        ASSERT_NE(model->m, nullptr);
        take_errors();
    }
    llama_model * m() { return model->m; }
    // Two sequences sharing a BOS cell, then 4 and 3 tokens of their own; outputs at the end of each.
    void two_sequences(llama_context * ctx) {
        ASSERT_EQ(decode(ctx, { { 1, 0, { 0, 1 }, false },
                                { 403, 1, { 0 }, false }, { 261, 2, { 0 }, false }, { 378, 3, { 0 }, false }, { 343, 4, { 0 }, true },
                                { 45, 1, { 1 }, false }, { 300, 2, { 1 }, false }, { 17, 3, { 1 }, true } }), 0);
    }
    std::unique_ptr<tu::ModelPtr> model;
};

// ---- llama.cpp's files ---------------------------------------------------------------------

TEST_F(State, LoadsLlamaCppSession) {
    const RefLogits r = read_ref("logits-1seq.bin", 1, 2);
    ASSERT_EQ(r.rows.size(), 2u);
    Ctx ctx(m(), 1);
    ASSERT_EQ(n_vocab(ctx), r.n_vocab);
    std::vector<llama_token> toks(64);
    size_t n_toks = 0;
    ASSERT_TRUE(llama_state_load_file(ctx, ref("session-1seq.bin").c_str(), toks.data(), toks.size(), &n_toks)) << take_errors();
    toks.resize(n_toks);
    ASSERT_EQ(n_toks, 10u);
    EXPECT_EQ(llama_kv_self_used_cells(ctx), 10);
    EXPECT_EQ(llama_kv_self_seq_pos_max(ctx, 0), 9);
    // The saved logits, and those this runtime computes for the prompt.
    EXPECT_EQ(logits(ctx, -1), r.rows[0]);
    EXPECT_EQ(logits(ctx, 9), r.rows[0]);
    {
        Ctx fresh(m(), 1);
        const std::vector<float> all = tu::eval_all(fresh, toks);
        ASSERT_FALSE(all.empty());
        const std::vector<float> last(all.end() - r.n_vocab, all.end());
        EXPECT_LT(kl(r.rows[0], last), 1e-6);
    }
    // The cache continues: the next token's logits as llama.cpp's.
    ASSERT_EQ(decode(ctx, { { r.next[0], 10, { 0 }, true } }), 0);
    EXPECT_LT(kl(r.rows[1], logits(ctx, 0)), 1e-6);
}

TEST_F(State, LoadsLlamaCppTwoSequenceSession) {
    const RefLogits r = read_ref("logits-2seq.bin", 2, 4);
    ASSERT_EQ(r.rows.size(), 4u);
    Ctx ctx(m(), 4);
    std::vector<llama_token> toks(64);
    size_t n_toks = 0;
    ASSERT_TRUE(llama_state_load_file(ctx, ref("session-2seq.bin").c_str(), toks.data(), toks.size(), &n_toks)) << take_errors();
    ASSERT_EQ(n_toks, 7u);
    EXPECT_EQ(llama_kv_self_used_cells(ctx), 7);
    EXPECT_EQ(llama_kv_self_seq_pos_max(ctx, 0), 3);
    EXPECT_EQ(llama_kv_self_seq_pos_max(ctx, 1), 3);
    EXPECT_EQ(llama_kv_self_seq_pos_min(ctx, 1), 0);  // the shared BOS cell
    EXPECT_EQ(logits(ctx, 3), r.rows[0]);
    EXPECT_EQ(logits(ctx, 6), r.rows[1]);
    ASSERT_EQ(decode(ctx, { { r.next[0], 4, { 0 }, true }, { r.next[1], 4, { 1 }, true } }), 0);
    EXPECT_LT(kl(r.rows[2], logits(ctx, 0)), 1e-6);
    EXPECT_LT(kl(r.rows[3], logits(ctx, 1)), 1e-6);
}

TEST_F(State, LoadsLlamaCppSequenceFileIntoAnotherSequence) {
    const RefLogits r = read_ref("logits-2seq.bin", 2, 4);
    ASSERT_EQ(r.rows.size(), 4u);
    Ctx ctx(m(), 4);
    ASSERT_EQ(decode(ctx, { { 1, 0, { 0 }, false }, { 45, 1, { 0 }, true } }), 0);  // something else in seq 0
    std::vector<llama_token> toks(64);
    size_t n_toks = 0;
    const size_t n = llama_state_seq_load_file(ctx, ref("seq1.bin").c_str(), 3, toks.data(), toks.size(), &n_toks);
    EXPECT_EQ(n, read_bytes(ref("seq1.bin")).size()) << take_errors();
    ASSERT_EQ(n_toks, 4u);
    EXPECT_EQ(llama_kv_self_used_cells(ctx), 6);
    EXPECT_EQ(llama_kv_self_seq_pos_max(ctx, 3), 3);
    EXPECT_EQ(llama_kv_self_seq_pos_max(ctx, 0), 1);
    ASSERT_EQ(decode(ctx, { { r.next[1], 4, { 3 }, true } }), 0);
    EXPECT_LT(kl(r.rows[3], logits(ctx, 0)), 1e-6);
}

// ---- round trips ---------------------------------------------------------------------------

TEST_F(State, RoundTripBitForBit) {
    Ctx ctx(m(), 4);
    two_sequences(ctx);
    const std::vector<uint8_t> saved = state_of(ctx);
    ASSERT_FALSE(saved.empty());
    const std::vector<float> out0 = logits(ctx, 4), out1 = logits(ctx, 7);
    ASSERT_EQ(decode(ctx, { { 220, 5, { 0 }, true }, { 101, 4, { 1 }, true } }), 0);
    const std::vector<float> next0 = logits(ctx, 0), next1 = logits(ctx, 1);

    // Cleared (and something else decoded), then loaded: the same outputs and continuation.
    llama_kv_self_clear(ctx);
    ASSERT_EQ(decode(ctx, { { 480, 0, { 2 }, true } }), 0);
    EXPECT_EQ(llama_state_set_data(ctx, saved.data(), saved.size()), saved.size()) << take_errors();
    EXPECT_EQ(logits(ctx, 4), out0);
    EXPECT_EQ(logits(ctx, 7), out1);
    EXPECT_EQ(logits(ctx, -1), out1);
    EXPECT_EQ(state_of(ctx), saved);
    ASSERT_EQ(decode(ctx, { { 220, 5, { 0 }, true }, { 101, 4, { 1 }, true } }), 0);
    EXPECT_EQ(logits(ctx, 0), next0);
    EXPECT_EQ(logits(ctx, 1), next1);

    // Through a session file, into another context.
    tu::TempDir dir;
    const std::string path = dir.path + "/session.bin";
    ASSERT_EQ(llama_state_set_data(ctx, saved.data(), saved.size()), saved.size());
    const std::vector<llama_token> toks = { 1, 403, 261, 378, 343, 45, 300, 17 };
    ASSERT_TRUE(llama_state_save_file(ctx, path.c_str(), toks.data(), toks.size())) << take_errors();
    EXPECT_EQ(dir.files(), std::vector<std::string>{ "session.bin" });  // no temporary left
    EXPECT_EQ(read_bytes(path).size(), 12 + 4 * toks.size() + saved.size());
    Ctx ctx2(m(), 4);
    std::vector<llama_token> got(8);
    size_t n_got = 0;
    ASSERT_TRUE(llama_state_load_file(ctx2, path.c_str(), got.data(), got.size(), &n_got)) << take_errors();
    EXPECT_EQ(std::vector<llama_token>(got.begin(), got.begin() + (long) n_got), toks);
    EXPECT_EQ(state_of(ctx2), saved);
    ASSERT_EQ(decode(ctx2, { { 220, 5, { 0 }, true }, { 101, 4, { 1 }, true } }), 0);
    EXPECT_EQ(logits(ctx2, 0), next0);
    EXPECT_EQ(logits(ctx2, 1), next1);

    // The older names.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    std::vector<uint8_t> old(llama_get_state_size(ctx2));
    EXPECT_EQ(llama_copy_state_data(ctx2, old.data()), old.size());
    EXPECT_EQ(llama_set_state_data(ctx, old.data()), old.size());
#pragma GCC diagnostic pop
}

TEST_F(State, RoundTripOtherCacheLayouts) {
    // V not transposed (flash attention; a Q8_0 cache, on a model whose heads hold whole blocks)
    // and an F32 cache.
    const std::string other = tu::models_dir() + "/ktest/ktest-F16.gguf";
    std::unique_ptr<tu::ModelPtr> m2;
    if (tu::file_exists(other)) m2 = std::make_unique<tu::ModelPtr>(other);
    struct Case { ggml_type type; bool fa; bool ktest; };
    for (const Case & c : { Case{ GGML_TYPE_F16, true, false }, Case{ GGML_TYPE_F32, false, false }, Case{ GGML_TYPE_Q8_0, false, true },
                            Case{ GGML_TYPE_Q8_0, true, true } }) {
        SCOPED_TRACE(std::string(ggml_type_name(c.type)) + (c.fa ? " fa" : ""));
        if (c.ktest && (!m2 || !m2->m)) continue;
        llama_model * model_c = c.ktest ? m2->m : m();
        Ctx ctx(model_c, 4, 64, c.type, c.fa);
        ASSERT_NE(ctx.c, nullptr) << take_errors();
        two_sequences(ctx);
        const std::vector<uint8_t> saved = state_of(ctx);
        ASSERT_EQ(decode(ctx, { { 220, 5, { 0 }, true }, { 101, 4, { 1 }, true } }), 0);
        const std::vector<float> next0 = logits(ctx, 0), next1 = logits(ctx, 1);
        Ctx ctx2(model_c, 4, 64, c.type, c.fa);
        ASSERT_EQ(llama_state_set_data(ctx2, saved.data(), saved.size()), saved.size()) << take_errors();
        EXPECT_EQ(state_of(ctx2), saved);
        ASSERT_EQ(decode(ctx2, { { 220, 5, { 0 }, true }, { 101, 4, { 1 }, true } }), 0);
        EXPECT_EQ(logits(ctx2, 0), next0);
        EXPECT_EQ(logits(ctx2, 1), next1);
    }
}

TEST_F(State, EmbeddingsRoundTrip) {
    // With embeddings on the rows are hidden states (pooling none): saved and loaded as they are.
    llama_context_params p = llama_context_default_params();
    p.n_ctx = p.n_batch = 64;
    p.n_seq_max = 4;
    p.n_threads = p.n_threads_batch = 2;
    p.embeddings = true;
    p.pooling_type = LLAMA_POOLING_TYPE_NONE;
    tu::UniqueCtx a(llama_init_from_model(m(), p)), b(llama_init_from_model(m(), p));
    ASSERT_TRUE(a && b) << take_errors();
    two_sequences(a.get());
    const int32_t n_embd = llama_model_n_embd(m());
    const float * e = llama_get_embeddings_ith(a.get(), 7);
    ASSERT_NE(e, nullptr) << take_errors();
    const std::vector<float> row(e, e + n_embd);
    const std::vector<uint8_t> saved = state_of(a.get());
    ASSERT_EQ(llama_state_set_data(b.get(), saved.data(), saved.size()), saved.size()) << take_errors();
    const float * e2 = llama_get_embeddings_ith(b.get(), 7);
    ASSERT_NE(e2, nullptr);
    EXPECT_EQ(std::vector<float>(e2, e2 + n_embd), row);
    EXPECT_EQ(state_of(b.get()), saved);
    // A logits state into an embeddings context: zero rows, never out of bounds.
    Ctx c(m(), 4, 64);
    two_sequences(c);
    const std::vector<uint8_t> logits_state = state_of(c);
    ASSERT_EQ(llama_state_set_data(b.get(), logits_state.data(), logits_state.size()), logits_state.size()) << take_errors();
    const float * e3 = llama_get_embeddings_ith(b.get(), 7);
    ASSERT_NE(e3, nullptr);
    EXPECT_EQ(std::vector<float>(e3, e3 + n_embd), std::vector<float>(n_embd, 0.0f));
}

TEST_F(State, SequenceMovesToAnotherSequenceAndContext) {
    Ctx a(m(), 4);
    two_sequences(a);
    const std::vector<uint8_t> s1 = seq_state_of(a, 1);
    ASSERT_EQ(decode(a, { { 101, 4, { 1 }, true } }), 0);
    const std::vector<float> next1 = logits(a, 0);

    // Into seq 3 of a context already holding seq 0.
    Ctx b(m(), 4);
    ASSERT_EQ(decode(b, { { 1, 0, { 0 }, false }, { 480, 1, { 0 }, false }, { 33, 2, { 0 }, true } }), 0);
    EXPECT_EQ(llama_state_seq_set_data(b, s1.data(), s1.size(), 3), s1.size()) << take_errors();
    EXPECT_EQ(llama_kv_self_used_cells(b), 3 + 4);
    EXPECT_EQ(llama_kv_self_seq_pos_max(b, 3), 3);
    EXPECT_EQ(seq_state_of(b, 3), s1);
    ASSERT_EQ(decode(b, { { 101, 4, { 3 }, true } }), 0);
    EXPECT_LT(kl(next1, logits(b, 0)), 1e-6);
    // Loading it again replaces seq 3's cells.
    EXPECT_EQ(llama_state_seq_set_data(b, s1.data(), s1.size(), 3), s1.size()) << take_errors();
    EXPECT_EQ(llama_kv_self_used_cells(b), 3 + 4);
    EXPECT_EQ(llama_kv_self_seq_pos_max(b, 3), 3);

    // The same context, after a clear: same cells, same logits bit for bit.
    Ctx c(m(), 4);
    two_sequences(c);
    const std::vector<uint8_t> whole = state_of(c);
    llama_kv_self_clear(c);
    ASSERT_EQ(llama_state_seq_set_data(c, s1.data(), s1.size(), 1), s1.size());
    ASSERT_EQ(decode(c, { { 101, 4, { 1 }, true } }), 0);
    EXPECT_LT(kl(next1, logits(c, 0)), 1e-6);

    // Sequence files.
    tu::TempDir dir;
    const std::string path = dir.path + "/seq.bin";
    const std::vector<llama_token> toks = { 1, 45, 300, 17 };
    ASSERT_EQ(llama_state_set_data(c, whole.data(), whole.size()), whole.size());
    const size_t n_file = llama_state_seq_save_file(c, path.c_str(), 1, toks.data(), toks.size());
    EXPECT_EQ(n_file, 12 + 16 + s1.size());
    Ctx d(m(), 4);
    std::vector<llama_token> got(4);
    size_t n_got = 0;
    EXPECT_EQ(llama_state_seq_load_file(d, path.c_str(), 2, got.data(), got.size(), &n_got), n_file) << take_errors();
    EXPECT_EQ(got, toks);
    ASSERT_EQ(decode(d, { { 101, 4, { 2 }, true } }), 0);
    EXPECT_LT(kl(next1, logits(d, 0)), 1e-6);
}

TEST_F(State, PendingShiftIsSaved) {
    Ctx a(m(), 1);
    ASSERT_EQ(decode(a, { { 1, 0, { 0 }, false }, { 403, 1, { 0 }, false }, { 261, 2, { 0 }, true } }), 0);
    llama_kv_self_seq_add(a, 0, 0, -1, 5);
    const std::vector<uint8_t> saved = state_of(a);
    ASSERT_EQ(decode(a, { { 378, 8, { 0 }, true } }), 0);
    Ctx b(m(), 1);
    ASSERT_EQ(llama_state_set_data(b, saved.data(), saved.size()), saved.size()) << take_errors();
    EXPECT_EQ(llama_kv_self_seq_pos_max(b, 0), 7);
    ASSERT_EQ(decode(b, { { 378, 8, { 0 }, true } }), 0);
    EXPECT_EQ(logits(b, 0), logits(a, 0));
}

// ---- bad input -----------------------------------------------------------------------------

// The message logged and that the context is as before (its whole state, byte for byte).
#define EXPECT_REFUSED(call, ctx, before, word)                                           \
    do {                                                                                  \
        EXPECT_FALSE(call);                                                               \
        const std::string errs_ = take_errors();                                          \
        EXPECT_NE(errs_.find(word), std::string::npos) << errs_;                          \
        EXPECT_TRUE(state_of(ctx) == (before)) << "the context changed";                  \
    } while (0)

TEST_F(State, TruncatedOrCorruptBufferLeavesContextAsItWas) {
    Ctx src(m(), 4);
    two_sequences(src);
    const std::vector<uint8_t> good = state_of(src);
    const std::vector<uint8_t> seq_good = seq_state_of(src, 1);

    Ctx ctx(m(), 4);
    ASSERT_EQ(decode(ctx, { { 1, 0, { 2 }, false }, { 480, 1, { 2 }, true } }), 0);
    const std::vector<uint8_t> before = state_of(ctx);
    for (size_t n = 0; n < good.size(); n++) {
        ASSERT_EQ(llama_state_set_data(ctx, good.data(), n), 0u) << n;
        ASSERT_NE(take_errors().find("ends early"), std::string::npos) << n;
    }
    for (size_t n = 0; n < seq_good.size(); n++) {
        ASSERT_EQ(llama_state_seq_set_data(ctx, seq_good.data(), n, 3), 0u) << n;
        ASSERT_NE(take_errors().find("ends early"), std::string::npos) << n;
    }
    EXPECT_TRUE(state_of(ctx) == before);

    // Fields of the header: (offset, value, what the message says).
    const uint32_t arch_len = 5;  // "llama"
    const size_t o_outputs = 4 + arch_len;
    const size_t o_ids = o_outputs + 4;
    const size_t o_logits = o_ids + 2 * 4;
    const size_t o_embd = o_logits + 8 + 2 * 512 * 4;
    const size_t o_cells = o_embd + 8;
    const size_t o_cell0 = o_cells + 4;  // pos, n_seq = 2, seq 0, seq 1
    const size_t o_cell1 = o_cell0 + 16;  // pos, n_seq = 1, seq 0
    const size_t o_vtrans = o_cells + 4 + 16 + 7 * 12;
    const size_t o_k0 = o_vtrans + 8;
    const int32_t n_embd_v = llama_model_n_embd(m()) / llama_model_n_head(m()) * llama_model_n_head_kv(m());
    const size_t o_v_last = good.size() - (size_t) n_embd_v * 8 * sizeof(ggml_fp16_t) - 12;  // the last layer's V header
    struct Edit { size_t off; std::vector<uint8_t> bytes; const char * word; };
    auto u32 = [](uint32_t v) { std::vector<uint8_t> b(4); memcpy(b.data(), &v, 4); return b; };
    auto u64 = [](uint64_t v) { std::vector<uint8_t> b(8); memcpy(b.data(), &v, 8); return b; };
    const std::vector<Edit> edits = {
        { 4, { 'q' }, "'qlama' model" },
        { 0, u32(0x7fffffffu), "ends early" },
        { o_outputs, u32(600), "more than n_batch" },
        { o_ids, u32(512), "out of range" },
        { o_ids + 4, u32(4), "twice" },
        { o_logits, u64(2 * 512 - 1), "logits" },
        { o_logits, u64(~0ull), "logits" },
        { o_embd, u64(5), "embedding" },
        { o_cells, u32(513), "cells" },
        { o_cells, u32(0xffffffffu), "ends early" },
        { o_cell0, u32(0x80000000u), "negative position" },
        { o_cell0 + 4, u32(0), "no sequence" },
        { o_cell0 + 8, u32(4), "out of range" },
        { o_cell1 + 4, u32(0x40000000u), "ends early" },
        { o_vtrans, u32(7), "unknown layout" },
        { o_vtrans + 4, u32(4), "layers" },
        { o_k0, u32(GGML_TYPE_F32), "K cache is f32" },
        { o_k0 + 4, u64(66), "K row" },
        { o_v_last, u32(GGML_TYPE_Q8_0), "V cache is q8_0" },  // V as rows (a context of several sequences)
        { o_v_last + 4, u64(66), "V row" },
    };
    for (const Edit & e : edits) {
        SCOPED_TRACE(e.word);
        std::vector<uint8_t> bad = good;
        ASSERT_LE(e.off + e.bytes.size(), bad.size());
        memcpy(bad.data() + e.off, e.bytes.data(), e.bytes.size());
        EXPECT_REFUSED(llama_state_set_data(ctx, bad.data(), bad.size()), ctx, before, e.word);
    }
    // V transposed (a context of one sequence): its header's element size and dimensions.
    {
        Ctx one(m(), 1), dst(m(), 1);
        ASSERT_EQ(decode(one, { { 1, 0, { 0 }, false }, { 403, 1, { 0 }, true } }), 0);
        ASSERT_EQ(decode(dst, { { 1, 0, { 0 }, true } }), 0);
        const std::vector<uint8_t> good1 = state_of(one), before1 = state_of(dst);
        const size_t o_v1 = good1.size() - (size_t) n_embd_v * 2 * sizeof(ggml_fp16_t) - 12;
        for (const Edit & e : { Edit{ o_v1, u32(GGML_TYPE_Q8_0), "V cache is q8_0" }, Edit{ o_v1 + 4, u32(4), "V element" },
                                Edit{ o_v1 + 8, u32(16), "dimensions" } }) {
            SCOPED_TRACE(e.word);
            std::vector<uint8_t> bad = good1;
            memcpy(bad.data() + e.off, e.bytes.data(), e.bytes.size());
            EXPECT_REFUSED(llama_state_set_data(dst, bad.data(), bad.size()), dst, before1, e.word);
        }
    }
    // A sequence's state must not name sequences; a whole one is not a sequence's.
    EXPECT_REFUSED(llama_state_seq_set_data(ctx, good.data() + o_cells, good.size() - o_cells, 3), ctx, before, "names sequences");
    EXPECT_REFUSED(llama_state_seq_set_data(ctx, seq_good.data(), seq_good.size(), 9), ctx, before, "out of range");
    EXPECT_REFUSED(llama_state_seq_set_data(ctx, seq_good.data(), seq_good.size(), -2), ctx, before, "out of range");
    // The whole state needs every cell to name a sequence.
    EXPECT_REFUSED(llama_state_seq_set_data(ctx, seq_good.data(), seq_good.size(), -1), ctx, before, "no sequence");
    // And a buffer too small to save into.
    std::vector<uint8_t> small(good.size() - 1);
    EXPECT_EQ(llama_state_get_data(src, small.data(), small.size()), 0u);
    EXPECT_NE(take_errors().find("too small"), std::string::npos);
}

TEST_F(State, OtherModelOrCacheTypeIsRefused) {
    Ctx src(m(), 4);
    two_sequences(src);
    const std::vector<uint8_t> good = state_of(src);
    const std::vector<uint8_t> seq_good = seq_state_of(src, 1);
    struct Case { ggml_type type; bool fa; const char * word; };
    for (const Case & c : { Case{ GGML_TYPE_F32, false, "f32" }, Case{ GGML_TYPE_F32, true, "f32" } }) {
        SCOPED_TRACE(c.word);
        Ctx ctx(m(), 4, 64, c.type, c.fa);
        ASSERT_EQ(decode(ctx, { { 1, 0, { 0 }, true } }), 0);
        const std::vector<uint8_t> before = state_of(ctx);
        EXPECT_REFUSED(llama_state_set_data(ctx, good.data(), good.size()), ctx, before, c.word);
        EXPECT_REFUSED(llama_state_seq_set_data(ctx, seq_good.data(), seq_good.size(), 1), ctx, before, c.word);
    }
    const std::string other = tu::models_dir() + "/ktest/ktest-F16.gguf";
    if (!tu::file_exists(other)) GTEST_SKIP() << other << " is absent";
    tu::ModelPtr m2(other);
    ASSERT_NE(m2.m, nullptr);
    Ctx ctx(m2, 4, 64);
    ASSERT_EQ(decode(ctx, { { 1, 0, { 0 }, true } }), 0);
    const std::vector<uint8_t> before = state_of(ctx);
    take_errors();
    EXPECT_FALSE(llama_state_set_data(ctx, good.data(), good.size()));
    EXPECT_NE(take_errors(), "");
    EXPECT_TRUE(state_of(ctx) == before);
    EXPECT_FALSE(llama_state_seq_set_data(ctx, seq_good.data(), seq_good.size(), 1));
    EXPECT_NE(take_errors(), "");
    EXPECT_TRUE(state_of(ctx) == before);
}

// V is stored transposed in a context of one sequence without flash attention, as rows otherwise;
// a state moves between them (llama.cpp's, whose layout depends on flash attention alone, too):
// the same outputs, and the same continuation to the rounding of another attention path.
TEST_F(State, StatesMoveBetweenVLayouts) {
    struct Cfg { uint32_t n_seq; bool fa; const char * name; };
    const Cfg cfgs[] = { { 1, false, "one sequence (V transposed)" }, { 4, false, "four sequences (V rows)" },
                         { 1, true, "flash attention (V rows)" } };
    const std::vector<Tok> prompt = { { 1, 0, { 0 }, false }, { 403, 1, { 0 }, false }, { 261, 2, { 0 }, false }, { 378, 3, { 0 }, true } };
    for (const Cfg & from : cfgs) {
        Ctx src(m(), from.n_seq, 64, GGML_TYPE_F16, from.fa);
        ASSERT_EQ(decode(src, prompt), 0);
        const std::vector<uint8_t> saved = state_of(src), seq_saved = seq_state_of(src, 0);
        const std::vector<float> out = logits(src, 3);
        ASSERT_EQ(decode(src, { { 343, 4, { 0 }, true } }), 0);
        const std::vector<float> next = logits(src, 0);
        for (const Cfg & to : cfgs) {
            SCOPED_TRACE(std::string(from.name) + " into " + to.name);
            Ctx dst(m(), to.n_seq, 64, GGML_TYPE_F16, to.fa);
            ASSERT_EQ(llama_state_set_data(dst, saved.data(), saved.size()), saved.size()) << take_errors();
            EXPECT_EQ(logits(dst, 3), out);
            ASSERT_EQ(decode(dst, { { 343, 4, { 0 }, true } }), 0);
            EXPECT_LT(kl(next, logits(dst, 0)), 1e-6);
            // A sequence's state, into the last sequence.
            Ctx dst2(m(), to.n_seq, 64, GGML_TYPE_F16, to.fa);
            const llama_seq_id s = (llama_seq_id) to.n_seq - 1;
            ASSERT_EQ(llama_state_seq_set_data(dst2, seq_saved.data(), seq_saved.size(), s), seq_saved.size()) << take_errors();
            ASSERT_EQ(decode(dst2, { { 343, 4, { s }, true } }), 0);
            EXPECT_LT(kl(next, logits(dst2, 0)), 1e-6);
        }
    }
}

TEST_F(State, SequenceThatDoesNotFitIsRefused) {
    Ctx src(m(), 4);
    two_sequences(src);
    const std::vector<uint8_t> s0 = seq_state_of(src, 0);  // 5 cells
    Ctx ctx(m(), 4, 8);
    ASSERT_EQ(decode(ctx, { { 1, 0, { 1 }, false }, { 45, 1, { 1 }, false }, { 300, 2, { 1 }, false }, { 17, 3, { 1, 2 }, true } }), 0);
    const std::vector<uint8_t> before = state_of(ctx);
    EXPECT_REFUSED(llama_state_seq_set_data(ctx, s0.data(), s0.size(), 0), ctx, before, "only 4 cells");
    // Into seq 1, whose 3 cells of its own become free (the one shared with seq 2 stays): 7 free.
    EXPECT_EQ(llama_state_seq_set_data(ctx, s0.data(), s0.size(), 1), s0.size()) << take_errors();
    EXPECT_EQ(llama_kv_self_used_cells(ctx), 6);
    EXPECT_EQ(llama_kv_self_seq_pos_max(ctx, 2), 3);
    EXPECT_EQ(llama_kv_self_seq_pos_max(ctx, 1), 4);
    // A whole cache of more cells than the cache has.
    Ctx tiny(m(), 4, 4);
    ASSERT_EQ(decode(tiny, { { 1, 0, { 0 }, true } }), 0);
    const std::vector<uint8_t> tiny_before = state_of(tiny);
    const std::vector<uint8_t> whole = seq_state_of(src, -1);
    EXPECT_REFUSED(llama_state_seq_set_data(tiny, whole.data(), whole.size(), -1), tiny, tiny_before, "cache only 4");
    EXPECT_EQ(llama_state_seq_set_data(ctx, whole.data(), whole.size(), -1), whole.size()) << take_errors();
    EXPECT_EQ(llama_kv_self_used_cells(ctx), 8);
}

TEST_F(State, BadFilesAreRefused) {
    Ctx src(m(), 4);
    two_sequences(src);
    tu::TempDir dir;
    const std::string path = dir.path + "/s.bin", seq_path = dir.path + "/q.bin";
    const std::vector<llama_token> toks = { 1, 2, 3 };
    ASSERT_TRUE(llama_state_save_file(src, path.c_str(), toks.data(), toks.size()));
    const size_t n_seq_file = llama_state_seq_save_file(src, seq_path.c_str(), 1, toks.data(), toks.size());
    ASSERT_EQ(n_seq_file, read_bytes(seq_path).size());
    const std::vector<uint8_t> good = read_bytes(path), seq_good = read_bytes(seq_path);

    Ctx ctx(m(), 4);
    ASSERT_EQ(decode(ctx, { { 1, 0, { 2 }, false }, { 480, 1, { 2 }, true } }), 0);
    const std::vector<uint8_t> before = state_of(ctx);
    std::vector<llama_token> out(8, -7);
    size_t n_out = 99;
    const std::string bad_path = dir.path + "/bad.bin";
    auto load = [&](const std::vector<uint8_t> & bytes) {
        write_bytes(bad_path, bytes);
        return llama_state_load_file(ctx, bad_path.c_str(), out.data(), out.size(), &n_out);
    };
    auto load_seq = [&](const std::vector<uint8_t> & bytes) {
        write_bytes(bad_path, bytes);
        return llama_state_seq_load_file(ctx, bad_path.c_str(), 3, out.data(), out.size(), &n_out) != 0;
    };
    std::vector<uint8_t> b = good;
    b[0] ^= 1;
    EXPECT_REFUSED(load(b), ctx, before, "not a session file");
    b = good;
    b[4] = 8;
    EXPECT_REFUSED(load(b), ctx, before, "version");
    EXPECT_REFUSED(load(seq_good), ctx, before, "not a session file");
    EXPECT_REFUSED(load_seq(good), ctx, before, "not a sequence state file");
    for (size_t n : { (size_t) 0, (size_t) 6, (size_t) 13, good.size() / 2, good.size() - 1 }) {
        EXPECT_REFUSED(load(std::vector<uint8_t>(good.begin(), good.begin() + (long) n)), ctx, before, n < 12 ? "too short" : "early");
    }
    for (size_t n : { (size_t) 13, seq_good.size() / 2, seq_good.size() - 1 }) {
        EXPECT_REFUSED(load_seq(std::vector<uint8_t>(seq_good.begin(), seq_good.begin() + (long) n)), ctx, before, "early");
    }
    b = good;
    b.push_back(0);
    EXPECT_REFUSED(load(b), ctx, before, "after the state");
    EXPECT_REFUSED(llama_state_load_file(ctx, path.c_str(), out.data(), 2, &n_out), ctx, before, "room");
    EXPECT_REFUSED(llama_state_load_file(ctx, (dir.path + "/none").c_str(), out.data(), 8, &n_out), ctx, before, "cannot open");
    EXPECT_EQ(out, std::vector<llama_token>(8, -7));  // nothing written on a failure
    EXPECT_EQ(n_out, 99u);

    // Saving into a folder that does not exist fails and leaves nothing.
    EXPECT_FALSE(llama_state_save_file(src, (dir.path + "/no/s.bin").c_str(), toks.data(), toks.size()));
    EXPECT_NE(take_errors().find("cannot create"), std::string::npos);
    EXPECT_EQ(read_bytes(path), good);
    EXPECT_EQ(dir.files().size(), 3u);  // s.bin, q.bin, bad.bin
}

}  // namespace
