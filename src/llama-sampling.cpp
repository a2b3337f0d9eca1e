// llama-sampling.cpp - samplers: repetition penalties, top-k, top-p, min-p, temperature, and the
// selecting stages greedy and dist (a seeded random draw), combined in a chain.
#include "llama-sampling.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>
#include <random>
#include <unordered_map>

void llama_candidates::sort_desc() {
    if (sorted) return;
    std::sort(data.begin(), data.end(), [](const llama_token_data & a, const llama_token_data & b) {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    });
    sorted = true;
}

void llama_candidates::softmax() {
    sort_desc();
    if (data.empty()) return;
    const float max = data[0].logit;
    double sum = 0.0;
    for (auto & d : data) {
        d.p = std::isinf(d.logit) && d.logit < 0 ? 0.0f : std::exp(d.logit - max);
        sum += d.p;
    }
    for (auto & d : data) d.p = (float) (d.p / sum);
}

namespace {

struct sampler_chain : llama_sampler {
    std::vector<std::unique_ptr<llama_sampler>> stages;
    void apply(llama_candidates & cand) override {
        for (auto & s : stages) {
            s->apply(cand);
            if (cand.selected != LLAMA_TOKEN_NULL) break;
        }
    }
    void accept(llama_token token) override {
        for (auto & s : stages) s->accept(token);
    }
    void reset() override {
        for (auto & s : stages) s->reset();
    }
};

struct sampler_greedy : llama_sampler {
    void apply(llama_candidates & cand) override {
        if (cand.data.empty()) return;
        // The first maximum in id order, so ties resolve the same way as an argmax.
        size_t best = 0;
        for (size_t i = 1; i < cand.data.size(); i++) {
            const auto & a = cand.data[i];
            const auto & b = cand.data[best];
            if (a.logit > b.logit || (a.logit == b.logit && a.id < b.id)) best = i;
        }
        cand.selected = cand.data[best].id;
    }
};

struct sampler_dist : llama_sampler {
    uint32_t seed;
    std::mt19937 rng;
    explicit sampler_dist(uint32_t s) : seed(s), rng(s) {}
    void apply(llama_candidates & cand) override {
        if (cand.data.empty()) return;
        cand.softmax();
        const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
        double acc = 0.0;
        for (const auto & d : cand.data) {
            acc += d.p;
            if (u < acc) {
                cand.selected = d.id;
                return;
            }
        }
        cand.selected = cand.data.back().id;  // rounding: u beyond the summed probabilities
        for (auto it = cand.data.rbegin(); it != cand.data.rend(); ++it) {
            if (it->p > 0.0f) {
                cand.selected = it->id;
                break;
            }
        }
    }
    void reset() override { rng.seed(seed); }
};

struct sampler_temp : llama_sampler {
    float t;
    explicit sampler_temp(float t_) : t(t_) {}
    void apply(llama_candidates & cand) override {
        if (t <= 0.0f) {
            // Temperature 0: only the most likely token remains (greedy).
            sampler_greedy g;
            g.apply(cand);
            const llama_token best = cand.selected;
            cand.selected = LLAMA_TOKEN_NULL;
            for (auto & d : cand.data) {
                if (d.id != best) d.logit = -INFINITY;
            }
            return;
        }
        for (auto & d : cand.data) d.logit /= t;
    }
};

struct sampler_top_k : llama_sampler {
    int32_t k;
    explicit sampler_top_k(int32_t k_) : k(k_) {}
    void apply(llama_candidates & cand) override {
        if (k <= 0 || (size_t) k >= cand.data.size()) return;
        cand.sort_desc();
        cand.data.resize((size_t) k);
    }
};

struct sampler_top_p : llama_sampler {
    float p;
    size_t min_keep;
    sampler_top_p(float p_, size_t mk) : p(p_), min_keep(mk) {}
    void apply(llama_candidates & cand) override {
        if (p >= 1.0f || cand.data.empty()) return;
        cand.softmax();
        double cum = 0.0;
        size_t keep = cand.data.size();
        for (size_t i = 0; i < cand.data.size(); i++) {
            cum += cand.data[i].p;
            if (cum >= p && i + 1 >= min_keep) {
                keep = i + 1;
                break;
            }
        }
        cand.data.resize(std::max<size_t>(keep, 1));
    }
};

struct sampler_min_p : llama_sampler {
    float p;
    size_t min_keep;
    sampler_min_p(float p_, size_t mk) : p(p_), min_keep(mk) {}
    void apply(llama_candidates & cand) override {
        if (p <= 0.0f || cand.data.empty()) return;
        cand.softmax();
        const float threshold = cand.data[0].p * p;
        size_t keep = 0;
        while (keep < cand.data.size() && (cand.data[keep].p >= threshold || keep < min_keep)) keep++;
        cand.data.resize(std::max<size_t>(keep, 1));
    }
};

struct sampler_penalties : llama_sampler {
    int32_t last_n;
    float repeat, freq, present;
    std::deque<llama_token> history;
    sampler_penalties(int32_t n, float r, float f, float p) : last_n(n), repeat(r), freq(f), present(p) {}
    void apply(llama_candidates & cand) override {
        if (history.empty() || (repeat == 1.0f && freq == 0.0f && present == 0.0f)) return;
        std::unordered_map<llama_token, int> count;
        for (llama_token t : history) count[t]++;
        for (auto & d : cand.data) {
            const auto it = count.find(d.id);
            if (it == count.end()) continue;
            // Divide positive logits and multiply negative ones, so the token always loses.
            d.logit = d.logit > 0.0f ? d.logit / repeat : d.logit * repeat;
            d.logit -= (float) it->second * freq + present;
        }
        cand.sorted = false;
    }
    void accept(llama_token token) override {
        if (last_n <= 0) return;
        history.push_back(token);
        while ((int32_t) history.size() > last_n) history.pop_front();
    }
    void reset() override { history.clear(); }
};

}  // namespace

llama_token llama_sampler_sample_logits(llama_sampler * smpl, const float * logits, int32_t n_vocab) {
    llama_candidates cand;
    cand.data.resize((size_t) n_vocab);
    for (int32_t i = 0; i < n_vocab; i++) cand.data[(size_t) i] = { i, logits[i], 0.0f };
    smpl->apply(cand);
    if (cand.selected == LLAMA_TOKEN_NULL) {  // no selecting stage in the chain: the most likely
        sampler_greedy g;
        g.apply(cand);
    }
    smpl->accept(cand.selected);
    return cand.selected;
}

// ---- C API ---------------------------------------------------------------------------------
struct llama_sampler_chain_params llama_sampler_chain_default_params(void) {
    llama_sampler_chain_params p;
    p.no_perf = true;
    return p;
}

struct llama_sampler * llama_sampler_chain_init(struct llama_sampler_chain_params) { return new sampler_chain(); }

void llama_sampler_chain_add(struct llama_sampler * chain, struct llama_sampler * smpl) {
    auto * c = dynamic_cast<sampler_chain *>(chain);
    if (!c || !smpl) return;
    c->stages.emplace_back(smpl);
}

struct llama_sampler * llama_sampler_init_greedy(void) { return new sampler_greedy(); }
struct llama_sampler * llama_sampler_init_dist(uint32_t seed) { return new sampler_dist(seed); }
struct llama_sampler * llama_sampler_init_temp(float t) { return new sampler_temp(t); }
struct llama_sampler * llama_sampler_init_top_k(int32_t k) { return new sampler_top_k(k); }
struct llama_sampler * llama_sampler_init_top_p(float p, size_t min_keep) { return new sampler_top_p(p, min_keep); }
struct llama_sampler * llama_sampler_init_min_p(float p, size_t min_keep) { return new sampler_min_p(p, min_keep); }
struct llama_sampler * llama_sampler_init_penalties(int32_t penalty_last_n, float penalty_repeat, float penalty_freq,
                                                    float penalty_present) {
    return new sampler_penalties(penalty_last_n, penalty_repeat, penalty_freq, penalty_present);
}

llama_token llama_sampler_sample(struct llama_sampler * smpl, struct llama_context * ctx, int32_t idx) {
    const float * logits = llama_get_logits_ith(ctx, idx);
    if (!smpl || !logits) return LLAMA_TOKEN_NULL;
    const int32_t n_vocab = llama_model_n_vocab(llama_get_model(ctx));  // the logits' width, tokenizer or not
    return llama_sampler_sample_logits(smpl, logits, n_vocab);
}

void llama_sampler_accept(struct llama_sampler * smpl, llama_token token) {
    if (smpl) smpl->accept(token);
}
void llama_sampler_reset(struct llama_sampler * smpl) {
    if (smpl) smpl->reset();
}
void llama_sampler_free(struct llama_sampler * smpl) { delete smpl; }
