// llama-sampling.cpp - samplers: logit bias, repetition penalties, top-k, top-p, min-p,
// temperature, and the selecting stages greedy, dist (a seeded random draw) and Mirostat 1 and 2,
// combined in a chain.
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

// LLAMA_DEFAULT_SEED asks for a random seed, as in llama.cpp.
uint32_t resolve_seed(uint32_t seed) {
    if (seed != LLAMA_DEFAULT_SEED) return seed;
    std::random_device rd;
    return rd();
}

// A draw from the candidates' probabilities (softmax done): the index of the picked candidate.
size_t draw_index(const llama_candidates & cand, std::mt19937 & rng) {
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    double acc = 0.0;
    for (size_t i = 0; i < cand.data.size(); i++) {
        acc += cand.data[i].p;
        if (u < acc) return i;
    }
    // Rounding: u beyond the summed probabilities; the last candidate with a probability.
    for (size_t i = cand.data.size(); i-- > 0;) {
        if (cand.data[i].p > 0.0f) return i;
    }
    return cand.data.size() - 1;
}

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
    explicit sampler_dist(uint32_t s) : seed(s), rng(resolve_seed(s)) {}
    void apply(llama_candidates & cand) override {
        if (cand.data.empty()) return;
        cand.softmax();
        cand.selected = cand.data[draw_index(cand, rng)].id;
    }
    void reset() override { rng.seed(resolve_seed(seed)); }
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

// Adds a fixed bias to the logits of some tokens (-INFINITY: never sampled).
struct sampler_logit_bias : llama_sampler {
    int32_t n_vocab;
    std::vector<llama_logit_bias> biases;
    sampler_logit_bias(int32_t n, std::vector<llama_logit_bias> b) : n_vocab(n), biases(std::move(b)) {}
    void apply(llama_candidates & cand) override {
        if (biases.empty()) return;
        const bool by_id = (int32_t) cand.data.size() == n_vocab;  // the full vocabulary in id order?
        for (const auto & b : biases) {
            if (b.token < 0 || b.token >= n_vocab) continue;
            if (by_id && cand.data[(size_t) b.token].id == b.token) {
                cand.data[(size_t) b.token].logit += b.bias;
                continue;
            }
            for (auto & d : cand.data) {
                if (d.id == b.token) d.logit += b.bias;
            }
        }
        cand.sorted = false;
    }
};

// Mirostat 1.0 (Basu et al. 2021, algorithm 1): estimates the Zipf exponent s_hat from the m most
// likely tokens, keeps the top k tokens where k makes the expected surprise mu, draws one, and
// moves mu by -eta * (its surprise - tau). mu starts at 2 * tau.
struct sampler_mirostat : llama_sampler {
    int32_t n_vocab;
    uint32_t seed;
    float tau, eta;
    int32_t m;
    float mu;
    std::mt19937 rng;
    sampler_mirostat(int32_t nv, uint32_t s, float t, float e, int32_t m_)
        : n_vocab(nv), seed(s), tau(t), eta(e), m(m_), mu(2.0f * t), rng(resolve_seed(s)) {}
    void apply(llama_candidates & cand) override {
        if (cand.data.empty()) return;
        cand.softmax();
        // s_hat: least squares over t_i = log((i+2)/(i+1)), b_i = log(p_i / p_{i+1}).
        float sum_ti_bi = 0.0f, sum_ti_sq = 0.0f;
        for (size_t i = 0; i + 1 < (size_t) std::max(m, 1) && i + 1 < cand.data.size(); i++) {
            if (cand.data[i + 1].p <= 0.0f) break;  // tokens that cannot be drawn say nothing of s_hat
            const float t_i = logf(float(i + 2) / float(i + 1));
            const float b_i = logf(cand.data[i].p / cand.data[i + 1].p);
            sum_ti_bi += t_i * b_i;
            sum_ti_sq += t_i * t_i;
        }
        size_t k = 1;
        if (sum_ti_sq > 0.0f) {
            const float s_hat = sum_ti_bi / sum_ti_sq;
            const float epsilon_hat = s_hat - 1.0f;
            const float kf = powf((epsilon_hat * powf(2.0f, mu)) / (1.0f - powf((float) n_vocab, -epsilon_hat)), 1.0f / s_hat);
            if (!(kf >= 1.0f)) k = 1;                                        // NaN or below 1
            else if (kf >= (float) cand.data.size()) k = cand.data.size();  // also +inf
            else k = (size_t) kf;
        }
        cand.data.resize(k);
        cand.softmax();
        const size_t idx = draw_index(cand, rng);
        cand.selected = cand.data[idx].id;
        const float observed_surprise = -log2f(cand.data[idx].p);
        mu = mu - eta * (observed_surprise - tau);
    }
    void reset() override {
        mu = 2.0f * tau;
        rng.seed(resolve_seed(seed));
    }
};

// Mirostat 2.0 (Basu et al. 2021, algorithm 2): drops the tokens whose surprise -log2(p) is above
// mu (the most likely one always stays), renormalizes, draws one, and moves mu by
// -eta * (its surprise - tau), the surprise taken from the renormalized probability. mu starts at
// 2 * tau.
struct sampler_mirostat_v2 : llama_sampler {
    uint32_t seed;
    float tau, eta;
    float mu;
    std::mt19937 rng;
    sampler_mirostat_v2(uint32_t s, float t, float e) : seed(s), tau(t), eta(e), mu(2.0f * t), rng(resolve_seed(s)) {}
    void apply(llama_candidates & cand) override {
        if (cand.data.empty()) return;
        cand.softmax();
        size_t keep = 0;
        while (keep < cand.data.size() && !(-log2f(cand.data[keep].p) > mu)) keep++;
        cand.data.resize(std::max<size_t>(keep, 1));
        cand.softmax();
        const size_t idx = draw_index(cand, rng);
        cand.selected = cand.data[idx].id;
        const float observed_surprise = -log2f(cand.data[idx].p);
        mu = mu - eta * (observed_surprise - tau);
    }
    void reset() override {
        mu = 2.0f * tau;
        rng.seed(resolve_seed(seed));
    }
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
struct llama_sampler * llama_sampler_init_mirostat(int32_t n_vocab, uint32_t seed, float tau, float eta, int32_t m) {
    return new sampler_mirostat(n_vocab, seed, tau, eta, m);
}
struct llama_sampler * llama_sampler_init_mirostat_v2(uint32_t seed, float tau, float eta) {
    return new sampler_mirostat_v2(seed, tau, eta);
}
struct llama_sampler * llama_sampler_init_logit_bias(int32_t n_vocab, int32_t n_logit_bias, const llama_logit_bias * logit_bias) {
    std::vector<llama_logit_bias> b;
    if (logit_bias && n_logit_bias > 0) b.assign(logit_bias, logit_bias + n_logit_bias);
    return new sampler_logit_bias(n_vocab, std::move(b));
}
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

bool llama_sampler_mirostat_mu(const llama_sampler * smpl, float * mu) {
    if (const auto * m1 = dynamic_cast<const sampler_mirostat *>(smpl)) {
        *mu = m1->mu;
        return true;
    }
    if (const auto * m2 = dynamic_cast<const sampler_mirostat_v2 *>(smpl)) {
        *mu = m2->mu;
        return true;
    }
    return false;
}
