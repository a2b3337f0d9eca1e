// Samplers (on raw logits) and chat templates: no model needed.
#include "test-util.h"

#include "llama-sampling.h"

#include <map>

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
    EXPECT_EQ(apply("something unknown", msgs, false), "<|im_start|>user\nHi<|im_end|>\n");
    EXPECT_EQ(apply(nullptr, msgs, false), "<|im_start|>user\nHi<|im_end|>\n");
    // A buffer too small gets a truncated, terminated copy and the full length.
    char small[8];
    EXPECT_EQ(llama_chat_apply_template("chatml", msgs.data(), 1, false, small, sizeof(small)), 30);
    EXPECT_EQ(std::string(small), "<|im_st");
    const llama_chat_message bad = {nullptr, "x"};
    EXPECT_EQ(llama_chat_apply_template("chatml", &bad, 1, false, small, sizeof(small)), -1);
}
