// llama-sampling.cpp - samplers: logit bias, repetition penalties, top-k, top-p, min-p,
// temperature, and the selecting stages greedy, dist (a seeded random draw) and Mirostat 1 and 2,
// combined in a chain; the C API's sampler interface over them and over programs' own samplers.
#include "llama-sampling.h"
#include "llama-impl.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <random>
#include <unordered_map>
#include <vector>

void llama_token_data_array_sort(llama_token_data_array * cur) {
    if (cur->sorted) return;
    std::sort(cur->data, cur->data + cur->size, [](const llama_token_data & a, const llama_token_data & b) {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    });
    cur->sorted = true;
}

void llama_token_data_array_softmax(llama_token_data_array * cur) {
    llama_token_data_array_sort(cur);
    if (cur->size == 0) return;
    const float max = cur->data[0].logit;
    double sum = 0.0;
    for (size_t i = 0; i < cur->size; i++) {
        llama_token_data & d = cur->data[i];
        d.p = std::isinf(d.logit) && d.logit < 0 ? 0.0f : std::exp(d.logit - max);
        sum += d.p;
    }
    for (size_t i = 0; i < cur->size; i++) cur->data[i].p = (float) (cur->data[i].p / sum);
}

namespace {

// ---- the built-in samplers -----------------------------------------------------------------
// Each is a C++ object (the llama_sampler's ctx) behind the one interface builtin_iface.
struct sampler_impl {
    virtual ~sampler_impl() = default;
    virtual const char * name() const = 0;
    virtual void apply(llama_token_data_array & cur) = 0;
    virtual void accept(llama_token token) { (void) token; }
    virtual void reset() {}
    virtual sampler_impl * clone() const = 0;
    virtual uint32_t seed() const { return LLAMA_DEFAULT_SEED; }
};

// clone() as a copy, for samplers whose state is plain values.
template <typename T>
struct sampler_copyable : sampler_impl {
    sampler_impl * clone() const override { return new T(static_cast<const T &>(*this)); }
};

sampler_impl * impl_of(const llama_sampler * smpl);

const char * builtin_name(const llama_sampler * smpl) { return impl_of(smpl)->name(); }
void builtin_accept(llama_sampler * smpl, llama_token token) { impl_of(smpl)->accept(token); }
void builtin_apply(llama_sampler * smpl, llama_token_data_array * cur) { impl_of(smpl)->apply(*cur); }
void builtin_reset(llama_sampler * smpl) { impl_of(smpl)->reset(); }
llama_sampler * builtin_clone(const llama_sampler * smpl);
void builtin_free(llama_sampler * smpl) { delete impl_of(smpl); }

const llama_sampler_i builtin_iface = {
    builtin_name, builtin_accept, builtin_apply, builtin_reset, builtin_clone, builtin_free,
};

sampler_impl * impl_of(const llama_sampler * smpl) {
    return smpl && smpl->iface == &builtin_iface ? static_cast<sampler_impl *>(smpl->ctx) : nullptr;
}

llama_sampler * wrap(sampler_impl * impl) { return new llama_sampler{ &builtin_iface, impl }; }

llama_sampler * builtin_clone(const llama_sampler * smpl) { return wrap(impl_of(smpl)->clone()); }

// LLAMA_DEFAULT_SEED asks for a random seed, as in llama.cpp.
uint32_t resolve_seed(uint32_t seed) {
    if (seed != LLAMA_DEFAULT_SEED) return seed;
    std::random_device rd;
    return rd();
}

// A draw from the candidates' probabilities (softmax done): the index of the picked candidate.
size_t draw_index(const llama_token_data_array & cur, std::mt19937 & rng) {
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    double acc = 0.0;
    for (size_t i = 0; i < cur.size; i++) {
        acc += cur.data[i].p;
        if (u < acc) return i;
    }
    // Rounding: u beyond the summed probabilities; the last candidate with a probability.
    for (size_t i = cur.size; i-- > 0;) {
        if (cur.data[i].p > 0.0f) return i;
    }
    return cur.size - 1;
}

// The first maximum in id order (so ties resolve the same way as an argmax), or -1 if empty.
int64_t argmax(const llama_token_data_array & cur) {
    if (cur.size == 0) return -1;
    size_t best = 0;
    for (size_t i = 1; i < cur.size; i++) {
        const llama_token_data & a = cur.data[i];
        const llama_token_data & b = cur.data[best];
        if (a.logit > b.logit || (a.logit == b.logit && a.id < b.id)) best = i;
    }
    return (int64_t) best;
}

// Applies the samplers in order, stopping after the first that selects a token.
struct sampler_chain : sampler_impl {
    llama_sampler_chain_params params;
    std::vector<llama_sampler *> stages;  // owned
    int64_t t_sample_us = 0;
    int32_t n_sample = 0;

    explicit sampler_chain(llama_sampler_chain_params p) : params(p) {}
    ~sampler_chain() override {
        for (llama_sampler * s : stages) llama_sampler_free(s);
    }
    const char * name() const override { return "chain"; }
    void apply(llama_token_data_array & cur) override {
        const int64_t t0 = params.no_perf ? 0 : llama_time_us();
        for (llama_sampler * s : stages) {
            llama_sampler_apply(s, &cur);
            if (cur.selected >= 0) break;
        }
        if (!params.no_perf) t_sample_us += llama_time_us() - t0;
    }
    void accept(llama_token token) override {
        const int64_t t0 = params.no_perf ? 0 : llama_time_us();
        for (llama_sampler * s : stages) llama_sampler_accept(s, token);
        n_sample++;
        if (!params.no_perf) t_sample_us += llama_time_us() - t0;
    }
    void reset() override {
        for (llama_sampler * s : stages) llama_sampler_reset(s);
    }
    sampler_impl * clone() const override {
        auto * c = new sampler_chain(params);
        for (const llama_sampler * s : stages) {
            llama_sampler * copy = llama_sampler_clone(s);
            if (copy) c->stages.push_back(copy);
        }
        return c;
    }
    uint32_t seed() const override {
        for (size_t i = stages.size(); i-- > 0;) {
            const uint32_t s = llama_sampler_get_seed(stages[i]);
            if (s != LLAMA_DEFAULT_SEED) return s;
        }
        return LLAMA_DEFAULT_SEED;
    }
};

sampler_chain * chain_of(const llama_sampler * smpl) { return dynamic_cast<sampler_chain *>(impl_of(smpl)); }

struct sampler_greedy : sampler_copyable<sampler_greedy> {
    const char * name() const override { return "greedy"; }
    void apply(llama_token_data_array & cur) override { cur.selected = argmax(cur); }
};

struct sampler_dist : sampler_copyable<sampler_dist> {
    uint32_t seed_asked, seed_cur;
    std::mt19937 rng;
    explicit sampler_dist(uint32_t s) : seed_asked(s), seed_cur(resolve_seed(s)), rng(seed_cur) {}
    const char * name() const override { return "dist"; }
    void apply(llama_token_data_array & cur) override {
        if (cur.size == 0) return;
        llama_token_data_array_softmax(&cur);
        cur.selected = (int64_t) draw_index(cur, rng);
    }
    void reset() override {
        seed_cur = resolve_seed(seed_asked);
        rng.seed(seed_cur);
    }
    uint32_t seed() const override { return seed_cur; }
};

struct sampler_softmax : sampler_copyable<sampler_softmax> {
    const char * name() const override { return "softmax"; }
    void apply(llama_token_data_array & cur) override { llama_token_data_array_softmax(&cur); }
};

struct sampler_temp : sampler_copyable<sampler_temp> {
    float t;
    explicit sampler_temp(float t_) : t(t_) {}
    const char * name() const override { return "temp"; }
    void apply(llama_token_data_array & cur) override {
        if (t <= 0.0f) {
            // Temperature 0: only the most likely token remains (greedy).
            const int64_t best = argmax(cur);
            for (size_t i = 0; i < cur.size; i++) {
                if ((int64_t) i != best) cur.data[i].logit = -INFINITY;
            }
            return;
        }
        for (size_t i = 0; i < cur.size; i++) cur.data[i].logit /= t;
    }
};

struct sampler_top_k : sampler_copyable<sampler_top_k> {
    int32_t k;
    explicit sampler_top_k(int32_t k_) : k(k_) {}
    const char * name() const override { return "top-k"; }
    void apply(llama_token_data_array & cur) override {
        if (k <= 0 || (size_t) k >= cur.size) return;
        llama_token_data_array_sort(&cur);
        cur.size = (size_t) k;
    }
};

struct sampler_top_p : sampler_copyable<sampler_top_p> {
    float p;
    size_t min_keep;
    sampler_top_p(float p_, size_t mk) : p(p_), min_keep(mk) {}
    const char * name() const override { return "top-p"; }
    void apply(llama_token_data_array & cur) override {
        if (p >= 1.0f || cur.size == 0) return;
        llama_token_data_array_softmax(&cur);
        double cum = 0.0;
        size_t keep = cur.size;
        for (size_t i = 0; i < cur.size; i++) {
            cum += cur.data[i].p;
            if (cum >= p && i + 1 >= min_keep) {
                keep = i + 1;
                break;
            }
        }
        cur.size = std::max<size_t>(keep, 1);
    }
};

struct sampler_min_p : sampler_copyable<sampler_min_p> {
    float p;
    size_t min_keep;
    sampler_min_p(float p_, size_t mk) : p(p_), min_keep(mk) {}
    const char * name() const override { return "min-p"; }
    void apply(llama_token_data_array & cur) override {
        if (p <= 0.0f || cur.size == 0) return;
        llama_token_data_array_softmax(&cur);
        const float threshold = cur.data[0].p * p;
        size_t keep = 0;
        while (keep < cur.size && (cur.data[keep].p >= threshold || keep < min_keep)) keep++;
        cur.size = std::max<size_t>(keep, 1);
    }
};

struct sampler_penalties : sampler_copyable<sampler_penalties> {
    int32_t last_n;
    float repeat, freq, present;
    std::deque<llama_token> history;
    sampler_penalties(int32_t n, float r, float f, float p) : last_n(n), repeat(r), freq(f), present(p) {}
    const char * name() const override { return "penalties"; }
    void apply(llama_token_data_array & cur) override {
        if (history.empty() || (repeat == 1.0f && freq == 0.0f && present == 0.0f)) return;
        std::unordered_map<llama_token, int> count;
        for (llama_token t : history) count[t]++;
        for (size_t i = 0; i < cur.size; i++) {
            llama_token_data & d = cur.data[i];
            const auto it = count.find(d.id);
            if (it == count.end()) continue;
            // Divide positive logits and multiply negative ones, so the token always loses.
            d.logit = d.logit > 0.0f ? d.logit / repeat : d.logit * repeat;
            d.logit -= (float) it->second * freq + present;
        }
        cur.sorted = false;
    }
    void accept(llama_token token) override {
        if (last_n <= 0) return;
        history.push_back(token);
        while ((int32_t) history.size() > last_n) history.pop_front();
    }
    void reset() override { history.clear(); }
};

// Adds a fixed bias to the logits of some tokens (-INFINITY: never sampled).
struct sampler_logit_bias : sampler_copyable<sampler_logit_bias> {
    int32_t n_vocab;
    std::vector<llama_logit_bias> biases;
    sampler_logit_bias(int32_t n, std::vector<llama_logit_bias> b) : n_vocab(n), biases(std::move(b)) {}
    const char * name() const override { return "logit-bias"; }
    void apply(llama_token_data_array & cur) override {
        if (biases.empty()) return;
        const bool by_id = (int32_t) cur.size == n_vocab;  // the full vocabulary in id order?
        for (const auto & b : biases) {
            if (b.token < 0 || b.token >= n_vocab) continue;
            if (by_id && cur.data[(size_t) b.token].id == b.token) {
                cur.data[(size_t) b.token].logit += b.bias;
                continue;
            }
            for (size_t i = 0; i < cur.size; i++) {
                if (cur.data[i].id == b.token) cur.data[i].logit += b.bias;
            }
        }
        cur.sorted = false;
    }
};

// Mirostat 1.0 (Basu et al. 2021, algorithm 1): estimates the Zipf exponent s_hat from the m most
// likely tokens, keeps the top k tokens where k makes the expected surprise mu, draws one, and
// moves mu by -eta * (its surprise - tau). mu starts at 2 * tau.
struct sampler_mirostat : sampler_copyable<sampler_mirostat> {
    int32_t n_vocab;
    uint32_t seed_asked, seed_cur;
    float tau, eta;
    int32_t m;
    float mu;
    std::mt19937 rng;
    sampler_mirostat(int32_t nv, uint32_t s, float t, float e, int32_t m_)
        : n_vocab(nv), seed_asked(s), seed_cur(resolve_seed(s)), tau(t), eta(e), m(m_), mu(2.0f * t), rng(seed_cur) {}
    const char * name() const override { return "mirostat"; }
    void apply(llama_token_data_array & cur) override {
        if (cur.size == 0) return;
        llama_token_data_array_softmax(&cur);
        // s_hat: least squares over t_i = log((i+2)/(i+1)), b_i = log(p_i / p_{i+1}).
        float sum_ti_bi = 0.0f, sum_ti_sq = 0.0f;
        for (size_t i = 0; i + 1 < (size_t) std::max(m, 1) && i + 1 < cur.size; i++) {
            if (cur.data[i + 1].p <= 0.0f) break;  // tokens that cannot be drawn say nothing of s_hat
            const float t_i = logf(float(i + 2) / float(i + 1));
            const float b_i = logf(cur.data[i].p / cur.data[i + 1].p);
            sum_ti_bi += t_i * b_i;
            sum_ti_sq += t_i * t_i;
        }
        size_t k = 1;
        if (sum_ti_sq > 0.0f) {
            const float s_hat = sum_ti_bi / sum_ti_sq;
            const float epsilon_hat = s_hat - 1.0f;
            const float kf = powf((epsilon_hat * powf(2.0f, mu)) / (1.0f - powf((float) n_vocab, -epsilon_hat)), 1.0f / s_hat);
            if (!(kf >= 1.0f)) k = 1;                              // NaN or below 1
            else if (kf >= (float) cur.size) k = cur.size;        // also +inf
            else k = (size_t) kf;
        }
        cur.size = k;
        cur.sorted = true;
        llama_token_data_array_softmax(&cur);
        const size_t idx = draw_index(cur, rng);
        cur.selected = (int64_t) idx;
        const float observed_surprise = -log2f(cur.data[idx].p);
        mu = mu - eta * (observed_surprise - tau);
    }
    void reset() override {
        mu = 2.0f * tau;
        seed_cur = resolve_seed(seed_asked);
        rng.seed(seed_cur);
    }
    uint32_t seed() const override { return seed_cur; }
};

// Mirostat 2.0 (Basu et al. 2021, algorithm 2): drops the tokens whose surprise -log2(p) is above
// mu (the most likely one always stays), renormalizes, draws one, and moves mu by
// -eta * (its surprise - tau), the surprise taken from the renormalized probability. mu starts at
// 2 * tau.
struct sampler_mirostat_v2 : sampler_copyable<sampler_mirostat_v2> {
    uint32_t seed_asked, seed_cur;
    float tau, eta;
    float mu;
    std::mt19937 rng;
    sampler_mirostat_v2(uint32_t s, float t, float e)
        : seed_asked(s), seed_cur(resolve_seed(s)), tau(t), eta(e), mu(2.0f * t), rng(seed_cur) {}
    const char * name() const override { return "mirostat-v2"; }
    void apply(llama_token_data_array & cur) override {
        if (cur.size == 0) return;
        llama_token_data_array_softmax(&cur);
        size_t keep = 0;
        while (keep < cur.size && !(-log2f(cur.data[keep].p) > mu)) keep++;
        cur.size = std::max<size_t>(keep, 1);
        llama_token_data_array_softmax(&cur);
        const size_t idx = draw_index(cur, rng);
        cur.selected = (int64_t) idx;
        const float observed_surprise = -log2f(cur.data[idx].p);
        mu = mu - eta * (observed_surprise - tau);
    }
    void reset() override {
        mu = 2.0f * tau;
        seed_cur = resolve_seed(seed_asked);
        rng.seed(seed_cur);
    }
    uint32_t seed() const override { return seed_cur; }
};

}  // namespace

llama_token llama_sampler_sample_logits(llama_sampler * smpl, const float * logits, int32_t n_vocab) {
    if (!smpl || !logits || n_vocab <= 0) return LLAMA_TOKEN_NULL;
    std::vector<llama_token_data> data((size_t) n_vocab);
    for (int32_t i = 0; i < n_vocab; i++) data[(size_t) i] = { i, logits[i], 0.0f };
    llama_token_data_array cur = { data.data(), data.size(), -1, false };
    llama_sampler_apply(smpl, &cur);
    if (cur.selected < 0 || (size_t) cur.selected >= cur.size) cur.selected = argmax(cur);  // no selecting stage
    if (cur.selected < 0) return LLAMA_TOKEN_NULL;
    const llama_token token = cur.data[cur.selected].id;
    llama_sampler_accept(smpl, token);
    return token;
}

bool llama_sampler_mirostat_mu(const llama_sampler * smpl, float * mu) {
    const sampler_impl * impl = impl_of(smpl);
    if (const auto * m1 = dynamic_cast<const sampler_mirostat *>(impl)) {
        *mu = m1->mu;
        return true;
    }
    if (const auto * m2 = dynamic_cast<const sampler_mirostat_v2 *>(impl)) {
        *mu = m2->mu;
        return true;
    }
    return false;
}

// ---- C API: the interface ------------------------------------------------------------------
struct llama_sampler * llama_sampler_init(const struct llama_sampler_i * iface, llama_sampler_context_t ctx) {
    return new llama_sampler{ iface, ctx };
}

const char * llama_sampler_name(const struct llama_sampler * smpl) {
    if (!smpl || !smpl->iface->name) return "(null)";
    return smpl->iface->name(smpl);
}

void llama_sampler_accept(struct llama_sampler * smpl, llama_token token) {
    if (smpl && smpl->iface->accept) smpl->iface->accept(smpl, token);
}

void llama_sampler_apply(struct llama_sampler * smpl, llama_token_data_array * cur_p) {
    GGML_ASSERT(smpl && smpl->iface->apply);
    smpl->iface->apply(smpl, cur_p);
}

void llama_sampler_reset(struct llama_sampler * smpl) {
    if (smpl && smpl->iface->reset) smpl->iface->reset(smpl);
}

struct llama_sampler * llama_sampler_clone(const struct llama_sampler * smpl) {
    if (!smpl) return nullptr;
    if (smpl->iface->clone) return smpl->iface->clone(smpl);
    if (!smpl->ctx) return llama_sampler_init(smpl->iface, nullptr);
    LLAMA_LOG_ERROR("llama_sampler_clone: the sampler '%s' has state but no clone function\n", llama_sampler_name(smpl));
    return nullptr;
}

void llama_sampler_free(struct llama_sampler * smpl) {
    if (!smpl) return;
    if (smpl->iface->free) smpl->iface->free(smpl);
    delete smpl;
}

// ---- C API: chains and the built-in samplers -----------------------------------------------
struct llama_sampler_chain_params llama_sampler_chain_default_params(void) {
    llama_sampler_chain_params p;
    p.no_perf = true;
    return p;
}

struct llama_sampler * llama_sampler_chain_init(struct llama_sampler_chain_params params) {
    return wrap(new sampler_chain(params));
}

void llama_sampler_chain_add(struct llama_sampler * chain, struct llama_sampler * smpl) {
    sampler_chain * c = chain_of(chain);
    if (!c || !smpl) return;
    c->stages.push_back(smpl);
}

struct llama_sampler * llama_sampler_chain_get(const struct llama_sampler * chain, int32_t i) {
    const sampler_chain * c = chain_of(chain);
    if (!c || i < 0 || (size_t) i >= c->stages.size()) return nullptr;
    return c->stages[(size_t) i];
}

int llama_sampler_chain_n(const struct llama_sampler * chain) {
    const sampler_chain * c = chain_of(chain);
    return c ? (int) c->stages.size() : 0;
}

struct llama_sampler * llama_sampler_chain_remove(struct llama_sampler * chain, int32_t i) {
    sampler_chain * c = chain_of(chain);
    if (!c || i < 0 || (size_t) i >= c->stages.size()) return nullptr;
    llama_sampler * s = c->stages[(size_t) i];
    c->stages.erase(c->stages.begin() + i);
    return s;
}

struct llama_sampler * llama_sampler_init_greedy(void) { return wrap(new sampler_greedy()); }
struct llama_sampler * llama_sampler_init_dist(uint32_t seed) { return wrap(new sampler_dist(seed)); }
struct llama_sampler * llama_sampler_init_softmax(void) { return wrap(new sampler_softmax()); }
struct llama_sampler * llama_sampler_init_temp(float t) { return wrap(new sampler_temp(t)); }
struct llama_sampler * llama_sampler_init_top_k(int32_t k) { return wrap(new sampler_top_k(k)); }
struct llama_sampler * llama_sampler_init_top_p(float p, size_t min_keep) { return wrap(new sampler_top_p(p, min_keep)); }
struct llama_sampler * llama_sampler_init_min_p(float p, size_t min_keep) { return wrap(new sampler_min_p(p, min_keep)); }
struct llama_sampler * llama_sampler_init_mirostat(int32_t n_vocab, uint32_t seed, float tau, float eta, int32_t m) {
    return wrap(new sampler_mirostat(n_vocab, seed, tau, eta, m));
}
struct llama_sampler * llama_sampler_init_mirostat_v2(uint32_t seed, float tau, float eta) {
    return wrap(new sampler_mirostat_v2(seed, tau, eta));
}
struct llama_sampler * llama_sampler_init_logit_bias(int32_t n_vocab, int32_t n_logit_bias, const llama_logit_bias * logit_bias) {
    std::vector<llama_logit_bias> b;
    if (logit_bias && n_logit_bias > 0) b.assign(logit_bias, logit_bias + n_logit_bias);
    return wrap(new sampler_logit_bias(n_vocab, std::move(b)));
}
struct llama_sampler * llama_sampler_init_penalties(int32_t penalty_last_n, float penalty_repeat, float penalty_freq,
                                                    float penalty_present) {
    return wrap(new sampler_penalties(penalty_last_n, penalty_repeat, penalty_freq, penalty_present));
}

uint32_t llama_sampler_get_seed(const struct llama_sampler * smpl) {
    const sampler_impl * impl = impl_of(smpl);
    return impl ? impl->seed() : LLAMA_DEFAULT_SEED;
}

llama_token llama_sampler_sample(struct llama_sampler * smpl, struct llama_context * ctx, int32_t idx) {
    const float * logits = llama_get_logits_ith(ctx, idx);
    if (!smpl || !logits) return LLAMA_TOKEN_NULL;
    const int32_t n_vocab = llama_model_n_vocab(llama_get_model(ctx));  // the logits' width, tokenizer or not
    return llama_sampler_sample_logits(smpl, logits, n_vocab);
}

// ---- C API: timings ------------------------------------------------------------------------
struct llama_perf_sampler_data llama_perf_sampler(const struct llama_sampler * chain) {
    llama_perf_sampler_data d = { 0.0, 0 };
    if (const sampler_chain * c = chain_of(chain)) {
        d.t_sample_ms = c->t_sample_us / 1e3;
        d.n_sample = c->n_sample;
    }
    return d;
}

void llama_perf_sampler_print(const struct llama_sampler * chain) {
    const llama_perf_sampler_data d = llama_perf_sampler(chain);
    LLAMA_LOG_INFO("llama_perf_sampler_print:    sampling time = %10.2f ms / %5d runs   (%8.2f ms per token, %8.2f tokens per second)\n",
                   d.t_sample_ms, d.n_sample, d.n_sample > 0 ? d.t_sample_ms / d.n_sample : 0.0,
                   d.t_sample_ms > 0 ? 1e3 * d.n_sample / d.t_sample_ms : 0.0);
}

void llama_perf_sampler_reset(struct llama_sampler * chain) {
    if (sampler_chain * c = chain_of(chain)) {
        c->t_sample_us = 0;
        c->n_sample = 0;
    }
}
