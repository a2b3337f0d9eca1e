// Samplers (on raw logits) and chat templates: no model needed.
#include "test-llama.h"

#include "llama-sampling.h"

#include <cmath>
#include <map>
#include <random>

namespace {

llama_token sample(llama_sampler * s, const std::vector<float> & logits) {
    return llama_sampler_sample_logits(s, logits.data(), (int32_t) logits.size());
}

std::string apply(const char * tmpl, const std::vector<llama_chat_message> & msgs, bool add_ass) {
    const int32_t n = llama_chat_apply_template(tmpl, msgs.data(), msgs.size(), add_ass, nullptr, 0);
    EXPECT_GE(n, 0);
    std::string out((size_t) n + 1, '\0');
    EXPECT_EQ(llama_chat_apply_template(tmpl, msgs.data(), msgs.size(), add_ass, &out[0], n + 1), n);
    out.resize((size_t) n);
    return out;
}

}  // namespace

TEST(Sampling, GreedyPicksTheFirstMaximum) {
    llama_sampler * g = llama_sampler_init_greedy();
    EXPECT_EQ(sample(g, {0.1f, 3.0f, -1.0f, 3.0f}), 1);
    llama_sampler_free(g);
    // Temperature 0 in a chain with dist is greedy too.
    llama_sampler * c = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(c, llama_sampler_init_temp(0.0f));
    llama_sampler_chain_add(c, llama_sampler_init_dist(123));
    for (int i = 0; i < 20; i++) EXPECT_EQ(sample(c, {0.1f, 2.0f, 1.9f, -5.0f}), 1);
    llama_sampler_free(c);
}

TEST(Sampling, DistFollowsTheDistributionAndIsSeeded) {
    const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
    std::map<llama_token, int> counts;
    llama_sampler * d = llama_sampler_init_dist(42);
    const int n = 20000;
    std::vector<llama_token> first;
    for (int i = 0; i < n; i++) {
        const llama_token t = sample(d, logits);
        counts[t]++;
        if (i < 50) first.push_back(t);
    }
    EXPECT_NEAR(counts[0] / (double) n, 0.5, 0.02);
    EXPECT_NEAR(counts[1] / (double) n, 0.3, 0.02);
    EXPECT_NEAR(counts[2] / (double) n, 0.2, 0.02);
    // Same seed, same sequence (after reset, or in a new sampler).
    llama_sampler_reset(d);
    for (int i = 0; i < 50; i++) EXPECT_EQ(sample(d, logits), first[(size_t) i]);
    llama_sampler_free(d);
}

TEST(Sampling, TopKTopPMinPFilter) {
    const std::vector<float> logits = {std::log(0.4f), std::log(0.3f), std::log(0.2f), std::log(0.1f)};
    auto support = [&](llama_sampler * filter) {
        llama_sampler * c = llama_sampler_chain_init(llama_sampler_chain_default_params());
        llama_sampler_chain_add(c, filter);
        llama_sampler_chain_add(c, llama_sampler_init_dist(7));
        std::map<llama_token, int> seen;
        for (int i = 0; i < 3000; i++) seen[sample(c, logits)]++;
        llama_sampler_free(c);
        std::vector<llama_token> ids;
        for (auto & kv : seen) ids.push_back(kv.first);
        return ids;
    };
    EXPECT_EQ(support(llama_sampler_init_top_k(2)), (std::vector<llama_token>{0, 1}));
    EXPECT_EQ(support(llama_sampler_init_top_p(0.65f, 1)), (std::vector<llama_token>{0, 1}));
    EXPECT_EQ(support(llama_sampler_init_top_p(0.05f, 1)), (std::vector<llama_token>{0}));
    EXPECT_EQ(support(llama_sampler_init_min_p(0.45f, 1)), (std::vector<llama_token>{0, 1, 2}));  // p >= 0.18
    EXPECT_EQ(support(llama_sampler_init_top_k(0)), (std::vector<llama_token>{0, 1, 2, 3}));     // off
}

TEST(Sampling, RepetitionPenaltyDemotesRecentTokens) {
    llama_sampler * c = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(c, llama_sampler_init_penalties(2, 2.0f, 0.0f, 0.0f));
    llama_sampler_chain_add(c, llama_sampler_init_greedy());
    const std::vector<float> logits = {2.0f, 1.5f, 1.2f, -1.0f};
    EXPECT_EQ(sample(c, logits), 0);  // history: 0
    EXPECT_EQ(sample(c, logits), 1);  // 0 penalised to 1.0
    EXPECT_EQ(sample(c, logits), 2);  // 0 -> 1.0, 1 -> 0.75
    EXPECT_EQ(sample(c, logits), 0);  // window of 2: only 1 and 2 are penalised now
    llama_sampler_free(c);
}

// Mirostat 2.0 by hand: p = {1/2, 1/4, 1/8, 1/8} have surprises 1, 2, 3, 3 bits. With tau = 1.25,
// mu starts at 2.5: tokens 0 and 1 stay, renormalized to {2/3, 1/3}; the draw is the one a
// uniform u from the same seeded mt19937 gives; then mu -= eta * (surprise - tau).
TEST(Sampling, MirostatV2TruncatesDrawsAndUpdatesMu) {
    const std::vector<float> logits = {std::log(0.5f), std::log(0.25f), std::log(0.125f), std::log(0.125f)};
    const float tau = 1.25f, eta = 0.5f;
    for (uint32_t seed : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u}) {
        llama_sampler * m = llama_sampler_init_mirostat_v2(seed, tau, eta);
        float mu = 0.0f;
        ASSERT_TRUE(llama_sampler_mirostat_mu(m, &mu));
        EXPECT_FLOAT_EQ(mu, 2.5f);  // 2 * tau
        std::mt19937 rng(seed);
        const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
        const llama_token want = u < 2.0 / 3.0 ? 0 : 1;
        const llama_token got = sample(m, logits);
        EXPECT_EQ(got, want) << "seed " << seed << ", u " << u;
        // Surprise of the drawn token after renormalization: log2(3/2) or log2(3).
        const double surprise = got == 0 ? std::log2(1.5) : std::log2(3.0);
        ASSERT_TRUE(llama_sampler_mirostat_mu(m, &mu));
        EXPECT_NEAR(mu, 2.5 - eta * (surprise - tau), 1e-5) << "seed " << seed;
        EXPECT_NEAR(mu, got == 0 ? 2.83251875 : 2.33251875, 1e-5);
        // Reset: mu back to 2 * tau and the same draw again.
        llama_sampler_reset(m);
        ASSERT_TRUE(llama_sampler_mirostat_mu(m, &mu));
        EXPECT_FLOAT_EQ(mu, 2.5f);
        EXPECT_EQ(sample(m, logits), got);
        llama_sampler_free(m);
    }
    // Tau below the surprise of the most likely token: only it stays (p = 1 after
    // renormalization, surprise 0), so mu grows by eta * tau at each step.
    llama_sampler * m = llama_sampler_init_mirostat_v2(9, 0.25f, 0.5f);
    float mu = 0.0f;
    for (int i = 1; i <= 3; i++) {
        EXPECT_EQ(sample(m, logits), 0);
        ASSERT_TRUE(llama_sampler_mirostat_mu(m, &mu));
        EXPECT_NEAR(mu, 0.5f + i * 0.5f * 0.25f, 1e-6);
    }
    llama_sampler_free(m);
    // Not a Mirostat sampler.
    llama_sampler * g = llama_sampler_init_greedy();
    EXPECT_FALSE(llama_sampler_mirostat_mu(g, &mu));
    llama_sampler_free(g);
}

// Mirostat 1.0 on a Zipf distribution p_i ~ 1/(i+1)^1.5 over 100 tokens: s_hat = 1.5 exactly, so
// with tau = 3 (mu = 6) k = (0.5 * 2^6 / (1 - 100^-0.5))^(1/1.5) = 10.8: the draw is among the 10
// most likely tokens, and mu moves by -eta * (surprise among those 10 - tau).
TEST(Sampling, MirostatV1KeepsTheTopKOfTheZipfEstimate) {
    const int n = 100;
    std::vector<float> logits((size_t) n);
    double z10 = 0.0;
    for (int i = 0; i < n; i++) logits[(size_t) i] = -1.5f * std::log((float) (i + 1));
    for (int i = 0; i < 10; i++) z10 += std::pow(i + 1.0, -1.5);
    const float tau = 3.0f, eta = 0.1f;
    std::map<llama_token, int> seen;
    for (uint32_t seed = 0; seed < 300; seed++) {
        llama_sampler * m = llama_sampler_init_mirostat(n, seed, tau, eta, 100);
        const llama_token t = sample(m, logits);
        ASSERT_GE(t, 0);
        ASSERT_LT(t, 10) << "seed " << seed;
        seen[t]++;
        float mu = 0.0f;
        ASSERT_TRUE(llama_sampler_mirostat_mu(m, &mu));
        const double p = std::pow(t + 1.0, -1.5) / z10;
        EXPECT_NEAR(mu, 6.0 - eta * (-std::log2(p) - tau), 1e-4) << "seed " << seed << " token " << t;
        llama_sampler_free(m);
    }
    EXPECT_GE(seen.size(), 6u);  // a draw, not a fixed pick
    // Seeded: the same sequence twice.
    llama_sampler * a = llama_sampler_init_mirostat(n, 42, tau, eta, 100);
    llama_sampler * b = llama_sampler_init_mirostat(n, 42, tau, eta, 100);
    for (int i = 0; i < 50; i++) EXPECT_EQ(sample(a, logits), sample(b, logits));
    llama_sampler_free(a);
    llama_sampler_free(b);
}

// A -inf logit bias (--ignore-eos) makes a token impossible, even for greedy when it is the best.
TEST(Sampling, LogitBiasMinusInfinityIsNeverSampled) {
    const std::vector<float> logits = {1.0f, 5.0f, 2.0f, 0.5f};
    const llama_logit_bias bias[] = {{1, -INFINITY}, {3, 0.75f}};
    llama_sampler * c = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(c, llama_sampler_init_logit_bias(4, 2, bias));
    llama_sampler_chain_add(c, llama_sampler_init_greedy());
    EXPECT_EQ(sample(c, logits), 2);
    llama_sampler_free(c);
    c = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(c, llama_sampler_init_logit_bias(4, 2, bias));
    llama_sampler_chain_add(c, llama_sampler_init_dist(5));
    for (int i = 0; i < 2000; i++) EXPECT_NE(sample(c, logits), 1);
    llama_sampler_free(c);
}

TEST(Sampling, FrequencyAndPresencePenalties) {
    llama_sampler * c = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(c, llama_sampler_init_penalties(8, 1.0f, 0.5f, 0.25f));
    llama_sampler_chain_add(c, llama_sampler_init_greedy());
    const std::vector<float> logits = {3.0f, 2.0f, 1.7f};
    llama_sampler_accept(c, 0);
    llama_sampler_accept(c, 0);  // token 0: 3 - 2 * 0.5 - 0.25 = 1.75
    EXPECT_EQ(sample(c, logits), 1);  // token 1: 2.0 (history now 0, 0, 1)
    EXPECT_EQ(sample(c, logits), 0);  // 0: 1.75, 1: 2 - 0.5 - 0.25 = 1.25, 2: 1.7
    llama_sampler_free(c);
}

TEST(ChatTemplates, NamedStyles) {
    const std::vector<llama_chat_message> msgs = {
        {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "How are you?"}};
    EXPECT_EQ(apply("chatml", msgs, true),
              "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
              "<|im_start|>user\nHow are you?<|im_end|>\n<|im_start|>assistant\n");
    EXPECT_EQ(apply("llama3", msgs, true),
              "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
              "How are you?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    EXPECT_EQ(apply("llama2", msgs, true),
              "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello!</s><s>[INST] How are you? [/INST]");
    EXPECT_EQ(apply("mistral", msgs, true), "[INST] Be brief.\n\nHi [/INST] Hello!</s>[INST] How are you? [/INST]");
    EXPECT_EQ(apply("zephyr", msgs, true),
              "<|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n<|assistant|>\nHello!</s>\n<|user|>\nHow are you?</s>\n<|assistant|>\n");
    // Gemma (llama.cpp 4747's output for these messages, with the spaces it trims): no system
    // role, "model" for the assistant; recognised by <start_of_turn> in a Jinja template.
    const std::vector<llama_chat_message> padded = {
        {"system", " Be brief. "}, {"user", "Hi\n"}, {"assistant", "Hello!"}, {"user", "How are you?"}};
    const std::string gemma = "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
                              "<start_of_turn>user\nHow are you?<end_of_turn>\n<start_of_turn>model\n";
    EXPECT_EQ(apply("gemma", padded, true), gemma);
    EXPECT_EQ(apply("{{ '<start_of_turn>' + role + '\\n' }}", padded, true), gemma);
}

TEST(ChatTemplates, RecognisedFromJinjaAndChatMLWhenUnknown) {
    const std::vector<llama_chat_message> msgs = {{"user", "Hi"}};
    const char * chatml_jinja = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}";
    const char * llama3_jinja = "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' %}";
    const char * llama2_jinja = "{% if message['role'] == 'system' %}{{ '<<SYS>>\\n' + content }}{% endif %}{{ '[INST] ' + content + ' [/INST]' }}";
    const char * zephyr_jinja = "{% if message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + eos_token }}{% endif %}";
    EXPECT_EQ(apply(chatml_jinja, msgs, true), apply("chatml", msgs, true));
    EXPECT_EQ(apply(llama3_jinja, msgs, true), apply("llama3", msgs, true));
    EXPECT_EQ(apply(llama2_jinja, msgs, true), apply("llama2", msgs, true));
    EXPECT_EQ(apply(zephyr_jinja, msgs, true), apply("zephyr", msgs, true));
    // None of the formats: refused, as llama.cpp refuses it (not formatted as ChatML).
    EXPECT_EQ(llama_chat_apply_template("something unknown", msgs.data(), msgs.size(), false, nullptr, 0), -1);
    EXPECT_EQ(llama_chat_apply_template("{{ messages }}", nullptr, 0, false, nullptr, 0), -1);
    EXPECT_EQ(llama_chat_apply_template("chatml", nullptr, 0, false, nullptr, 0), 0);
    EXPECT_EQ(apply(nullptr, msgs, false), "<|im_start|>user\nHi<|im_end|>\n");
    // A buffer too small gets a truncated, terminated copy and the full length.
    char small[8];
    EXPECT_EQ(llama_chat_apply_template("chatml", msgs.data(), 1, false, small, sizeof(small)), 30);
    EXPECT_EQ(std::string(small), "<|im_st");
    const llama_chat_message bad = {nullptr, "x"};
    EXPECT_EQ(llama_chat_apply_template("chatml", &bad, 1, false, small, sizeof(small)), -1);
}

// llama.cpp's sampler interface: a sampler of the program's own in a chain, the chain's
// accessors, clones, seeds, names, applying to a candidate array directly, timings.
namespace {

struct only_even {  // keeps the even token ids; counts what it sees
    int n_apply = 0, n_accept = 0, n_reset = 0;
};

const llama_sampler_i only_even_iface = {
    [](const llama_sampler *) { return "only-even"; },
    [](llama_sampler * s, llama_token) { ((only_even *) s->ctx)->n_accept++; },
    [](llama_sampler * s, llama_token_data_array * cur) {
        ((only_even *) s->ctx)->n_apply++;
        size_t n = 0;
        for (size_t i = 0; i < cur->size; i++) {
            if (cur->data[i].id % 2 == 0) cur->data[n++] = cur->data[i];
        }
        cur->size = n;
    },
    [](llama_sampler * s) { ((only_even *) s->ctx)->n_reset++; },
    nullptr,
    nullptr,  // the test owns the state
};

}  // namespace

TEST(Sampling, InterfaceChainsAndClones) {
    only_even state;
    llama_sampler_chain_params cp = llama_sampler_chain_default_params();
    cp.no_perf = false;
    llama_sampler * chain = llama_sampler_chain_init(cp);
    llama_sampler_chain_add(chain, llama_sampler_init(&only_even_iface, &state));
    llama_sampler_chain_add(chain, llama_sampler_init_top_k(2));
    llama_sampler_chain_add(chain, llama_sampler_init_dist(42));
    EXPECT_STREQ(llama_sampler_name(chain), "chain");
    ASSERT_EQ(llama_sampler_chain_n(chain), 3);
    EXPECT_STREQ(llama_sampler_name(llama_sampler_chain_get(chain, 0)), "only-even");
    EXPECT_STREQ(llama_sampler_name(llama_sampler_chain_get(chain, 1)), "top-k");
    EXPECT_STREQ(llama_sampler_name(llama_sampler_chain_get(chain, 2)), "dist");
    EXPECT_EQ(llama_sampler_chain_get(chain, 3), nullptr);
    EXPECT_EQ(llama_sampler_get_seed(chain), 42u);

    const std::vector<float> logits = {5.0f, 9.0f, 4.0f, 8.0f, 3.0f, 7.0f};
    for (int i = 0; i < 50; i++) {
        const llama_token t = sample(chain, logits);
        EXPECT_TRUE(t == 0 || t == 2) << t;  // odd ids dropped, then the top 2 of the rest
    }
    EXPECT_EQ(state.n_apply, 50);
    EXPECT_EQ(state.n_accept, 50);
    const llama_perf_sampler_data perf = llama_perf_sampler(chain);
    EXPECT_EQ(perf.n_sample, 50);
    EXPECT_GE(perf.t_sample_ms, 0.0);
    llama_perf_sampler_reset(chain);
    EXPECT_EQ(llama_perf_sampler(chain).n_sample, 0);

    // A sampler with state and no clone function cannot be cloned; stateless built-ins can.
    tu::take_errors();
    EXPECT_EQ(llama_sampler_clone(llama_sampler_chain_get(chain, 0)), nullptr);
    EXPECT_NE(tu::take_errors().find("no clone function"), std::string::npos);
    llama_sampler * removed = llama_sampler_chain_remove(chain, 0);  // ours again
    ASSERT_NE(removed, nullptr);
    EXPECT_EQ(llama_sampler_chain_n(chain), 2);
    llama_sampler_free(removed);
    llama_sampler_reset(chain);
    llama_sampler * copy = llama_sampler_clone(chain);
    ASSERT_NE(copy, nullptr);
    EXPECT_EQ(llama_sampler_chain_n(copy), 2);
    for (int i = 0; i < 20; i++) EXPECT_EQ(sample(chain, logits), sample(copy, logits)) << i;  // same state, same draws
    llama_sampler_free(copy);
    llama_sampler_free(chain);
    EXPECT_EQ(llama_sampler_get_seed(llama_sampler_chain_get(nullptr, 0)), LLAMA_DEFAULT_SEED);

    // A random seed is drawn once and reported.
    llama_sampler * dist = llama_sampler_init_dist(LLAMA_DEFAULT_SEED);
    EXPECT_NE(llama_sampler_get_seed(dist), LLAMA_DEFAULT_SEED);
    llama_sampler_free(dist);

    // Applying to a candidate array directly.
    std::vector<llama_token_data> data;
    for (int i = 0; i < 6; i++) data.push_back({i, logits[(size_t) i], 0.0f});
    llama_token_data_array cur = {data.data(), data.size(), -1, false};
    llama_sampler * top = llama_sampler_init_top_k(3);
    llama_sampler_apply(top, &cur);
    ASSERT_EQ(cur.size, 3u);
    EXPECT_TRUE(cur.sorted);
    EXPECT_EQ(cur.data[0].id, 1);
    EXPECT_EQ(cur.data[2].id, 5);
    llama_sampler_free(top);
    llama_sampler * greedy = llama_sampler_init_greedy();
    llama_sampler_apply(greedy, &cur);
    EXPECT_EQ(cur.selected, 0);
    llama_sampler_free(greedy);
}

TEST(ChatTemplates, BuiltinNames) {
    const char * names[16];
    const int32_t n = llama_chat_builtin_templates(names, 16);
    ASSERT_GT(n, 0);
    ASSERT_LE(n, 16);
    const std::vector<llama_chat_message> msgs = {{"user", "Hi"}};
    for (int32_t i = 0; i < n; i++) EXPECT_GT(apply(names[i], msgs, true).size(), 2u) << names[i];
    EXPECT_EQ(llama_chat_builtin_templates(nullptr, 0), n);
}
