// llama-sampling.cpp - samplers: logit bias, repetition penalties, DRY, top-k, top-p, min-p,
// typical, top-n-sigma, XTC, temperature (and dynamic temperature), infill, and the selecting
// stages greedy, dist (a seeded random draw) and Mirostat 1 and 2, combined in a chain; the C
// API's sampler interface over them and over programs' own samplers.
#include "llama-sampling.h"
#include "llama-impl.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <random>
#include <string>
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

// Reused storage of draw_index (one per thread: samplers of different chains may run at once).
std::vector<float> & draw_scratch() {
    thread_local std::vector<float> v;
    return v;
}

// LLAMA_DEFAULT_SEED asks for a random seed, as in llama.cpp.
uint32_t resolve_seed(uint32_t seed) {
    if (seed != LLAMA_DEFAULT_SEED) return seed;
    std::random_device rd;
    return rd();
}

// A draw from the candidates' probabilities (softmax done): the index of the picked candidate.
// Drawn as llama.cpp draws it, by std::discrete_distribution over the float probabilities (which
// normalizes them in double and takes one canonical double from the generator, none for fewer
// than two candidates), so that a seed gives llama.cpp's tokens.
size_t draw_index(const llama_token_data_array & cur, std::mt19937 & rng) {
    std::vector<float> & p = draw_scratch();
    p.resize(cur.size);
    for (size_t i = 0; i < cur.size; i++) p[i] = cur.data[i].p;
    std::discrete_distribution<int> dist(p.begin(), p.end());
    return (size_t) dist(rng);
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


// Locally typical sampling (Meister et al. 2022): keeps the tokens whose surprise -log p is
// closest to the entropy of the distribution, in that order, until their probabilities add up to
// more than p. As llama.cpp 4747, the min_keep test is i >= min_keep - 1 in size_t, so min_keep 0
// never stops the scan: everything is kept (llama-cli's default --min-keep 0 makes --typical a
// no-op there, and here, so that both pick the same tokens).
struct sampler_typical : sampler_copyable<sampler_typical> {
    float p;
    size_t min_keep;
    sampler_typical(float p_, size_t mk) : p(p_), min_keep(mk) {}
    const char * name() const override { return "typical"; }
    void apply(llama_token_data_array & cur) override {
        if (p >= 1.0f || cur.size == 0) return;
        llama_token_data_array_softmax(&cur);
        // As llama.cpp 4747: a candidate at p = 0 (logit -inf, e.g. after --ignore-eos's bias)
        // makes the entropy NaN, then no token is "closer" than another, the order stays that of
        // the probabilities and the cut is a top-p with ">".
        float entropy = 0.0f;
        for (size_t i = 0; i < cur.size; i++) entropy -= cur.data[i].p * logf(cur.data[i].p);
        std::vector<float> dist(cur.size);  // |surprise - entropy|
        std::vector<size_t> order(cur.size);
        for (size_t i = 0; i < cur.size; i++) {
            dist[i] = fabsf(-logf(cur.data[i].p) - entropy);
            order[i] = i;
        }
        std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return dist[a] < dist[b]; });
        size_t keep = cur.size;
        float cum = 0.0f;
        for (size_t i = 0; i < order.size(); i++) {
            cum += cur.data[order[i]].p;
            if (cum > p && i >= min_keep - 1) {
                keep = i + 1;
                break;
            }
        }
        std::vector<llama_token_data> kept(keep);
        for (size_t i = 0; i < keep; i++) kept[i] = cur.data[order[i]];
        std::copy(kept.begin(), kept.end(), cur.data);
        cur.size = keep;
        cur.sorted = false;
    }
};

// Temperature t; with delta > 0 a dynamic one (Zhu et al. 2023, "entropy-based dynamic
// temperature"): t' = (t - delta) + 2 delta * (H / H_max)^exponent, H the entropy of the
// candidates and H_max that of as many equally likely ones (the lower end clamped at 0); the
// probabilities are those at t' afterwards. t <= 0 without delta keeps only the most likely token.
struct sampler_temp_ext : sampler_copyable<sampler_temp_ext> {
    float t, delta, exponent;
    sampler_temp_ext(float t_, float d, float e) : t(t_), delta(d), exponent(e) {}
    const char * name() const override { return "temp-ext"; }
    void apply(llama_token_data_array & cur) override {
        if (delta <= 0.0f) {
            if (t > 0.0f) {
                for (size_t i = 0; i < cur.size; i++) cur.data[i].logit /= t;
                return;
            }
            // The first maximum in the array's order stays (llama.cpp's temperature 0).
            size_t best = 0;
            for (size_t i = 1; i < cur.size; i++) {
                if (cur.data[i].logit > cur.data[best].logit) best = i;
            }
            for (size_t i = 0; i < cur.size; i++) {
                if (i != best) cur.data[i].logit = -INFINITY;
            }
            return;
        }
        if (cur.size <= 1) return;  // no spread to measure
        const float t_min = std::max(0.0f, t - delta), t_max = t + delta;
        llama_token_data_array_sort(&cur);
        // The entropy from probabilities normalized by a float sum, as llama.cpp's: for a peaked
        // distribution -p log p of the top token hangs on the last bits of p (p ~ 1).
        const float top = cur.data[0].logit;
        float sum = 0.0f;
        for (size_t i = 0; i < cur.size; i++) sum += cur.data[i].p = expf(cur.data[i].logit - top);
        for (size_t i = 0; i < cur.size; i++) cur.data[i].p /= sum;
        const float h_max = -logf(1.0f / (float) cur.size);
        float h = 0.0f;
        for (size_t i = 0; i < cur.size; i++) {
            const float pi = cur.data[i].p;
            if (pi > 0.0f) h -= pi * logf(pi);
        }
        const float t_dyn = t_min + (t_max - t_min) * powf(h / h_max, exponent);
        for (size_t i = 0; i < cur.size; i++) cur.data[i].logit /= t_dyn;
        // Dividing by a positive number keeps the order: still sorted, only p to recompute.
        llama_token_data_array_softmax(&cur);
    }
};

// XTC, "exclude top choices": with probability p (one draw of its own generator per use), the
// tokens with probability >= t are removed but the least likely of them, so the most likely
// choices give way to a less obvious one that is still plausible; not when that would leave fewer
// than min_keep. Off for p <= 0, t > 0.5 (then at most one token is above t) or under two tokens.
// llama.cpp's llama_sampler_get_seed does not report XTC's seed, nor does this.
struct sampler_xtc : sampler_copyable<sampler_xtc> {
    float p, t;
    size_t min_keep;
    uint32_t seed_asked, seed_cur;
    std::mt19937 rng;
    sampler_xtc(float p_, float t_, size_t mk, uint32_t s)
        : p(p_), t(t_), min_keep(mk), seed_asked(s), seed_cur(resolve_seed(s)), rng(seed_cur) {}
    const char * name() const override { return "xtc"; }
    void apply(llama_token_data_array & cur) override {
        if (p <= 0.0f || t > 0.5f || cur.size < 2) return;
        // A float draw (one 32-bit number), as llama.cpp's, so that the same seed excludes at the
        // same steps.
        const float chance = std::uniform_real_distribution<float>(0.0f, 1.0f)(rng);
        if (chance > p) return;
        llama_token_data_array_softmax(&cur);
        size_t n_above = 0;
        while (n_above < cur.size && cur.data[n_above].p >= t) n_above++;
        if (n_above < 2 || cur.size - n_above + 1 < min_keep) return;
        // Sorted, so the tokens above t lead: start the array at the last of them.
        cur.data += n_above - 1;
        cur.size -= n_above - 1;
    }
    void reset() override {
        seed_cur = resolve_seed(seed_asked);
        rng.seed(seed_cur);
    }
};

// Top-n-sigma (Tang et al. 2024): keeps the tokens whose logit is at least max - n * sigma, sigma
// the standard deviation of the logits (over the candidates, population form); then softmax.
// n = 0 keeps the maximum. n < 0 is off (llama-cli adds it only for --top-nsigma >= 0; llama.cpp
// 4747 itself would set every logit to -inf).
struct sampler_top_n_sigma : sampler_copyable<sampler_top_n_sigma> {
    float n;
    explicit sampler_top_n_sigma(float n_) : n(n_) {}
    const char * name() const override { return "top-n-sigma"; }
    void apply(llama_token_data_array & cur) override {
        if (n < 0.0f || cur.size == 0) return;
        float max = -INFINITY, sum = 0.0f;
        for (size_t i = 0; i < cur.size; i++) {
            max = std::max(max, cur.data[i].logit);
            sum += cur.data[i].logit;
        }
        const float mean = sum / (float) cur.size;
        float sq = 0.0f;
        for (size_t i = 0; i < cur.size; i++) sq += (cur.data[i].logit - mean) * (cur.data[i].logit - mean);
        const float sigma = sqrtf(sq / (float) cur.size);
        for (size_t i = 0; i < cur.size; i++) {
            if (cur.data[i].logit < max - n * sigma) cur.data[i].logit = -INFINITY;
        }
        cur.sorted = false;
        llama_token_data_array_softmax(&cur);
    }
};

// DRY, "don't repeat yourself" (the sampler of koboldcpp PR 982, as in llama.cpp): if the last
// tokens repeat an earlier stretch of the history, the token that followed that stretch would
// extend the repetition; once the repeated length k reaches allowed_length it loses
// multiplier * base^(k - allowed_length) from its logit. A sequence breaker (a string) ends a
// repetition: the repeated suffix cannot reach back over one. Breakers are matched on token
// texts: a token whose text contains the breaker is one by itself, and a token whose text ends
// with the start of a breaker is one when the tokens after it spell the rest (the "tail", as the
// tokenizer writes it, at most 20 tokens).
struct sampler_dry : sampler_copyable<sampler_dry> {
    int32_t n_ctx_train;
    float multiplier, base;
    int32_t allowed_length, penalty_last_n;
    std::unordered_multimap<llama_token, std::vector<llama_token>> breakers;  // head token -> tail
    std::deque<llama_token> history;                                         // the last tokens accepted

    sampler_dry(int32_t n_ctx, float mult, float b, int32_t allowed, int32_t last_n)
        : n_ctx_train(n_ctx), multiplier(mult), base(b), allowed_length(allowed), penalty_last_n(last_n) {}
    const char * name() const override { return "dry"; }

    bool off() const { return multiplier == 0.0f || base < 1.0f || penalty_last_n == 0; }
    size_t window() const { return (size_t) std::max(penalty_last_n == -1 ? n_ctx_train : penalty_last_n, 0); }

    void add_breaker(const llama_vocab * vocab, std::string s) {
        const size_t MAX_CHARS = 40, MAX_TAIL = 20;  // llama.cpp's limits
        if (s.empty()) return;
        if (s.size() > MAX_CHARS) s.resize(MAX_CHARS);
        const int32_t n_vocab = llama_vocab_n_tokens(vocab);
        std::vector<char> buf(256);
        for (llama_token tok = 0; tok < n_vocab; tok++) {
            int32_t n = llama_detokenize(vocab, &tok, 1, buf.data(), (int32_t) buf.size(), false, true);
            if (n < 0) {
                buf.resize((size_t) -n);
                n = llama_detokenize(vocab, &tok, 1, buf.data(), (int32_t) buf.size(), false, true);
            }
            const std::string text(buf.data(), (size_t) std::max(n, 0));
            if (text.find(s) != std::string::npos) {
                add_tail(tok, {});
                continue;
            }
            // The token ends with the first `len` characters of the breaker: the rest is its tail.
            for (size_t len = 1; len < s.size() && len <= text.size(); len++) {
                if (text.compare(text.size() - len, len, s, 0, len) != 0) continue;
                const std::string rest = s.substr(len);
                std::vector<llama_token> tail(rest.size() + 8);
                int32_t nt = llama_tokenize(vocab, rest.c_str(), (int32_t) rest.size(), tail.data(), (int32_t) tail.size(), false, false);
                if (nt < 0) {
                    tail.resize((size_t) -nt);
                    nt = llama_tokenize(vocab, rest.c_str(), (int32_t) rest.size(), tail.data(), (int32_t) tail.size(), false, false);
                }
                tail.resize((size_t) std::max(nt, 0));
                if (tail.size() > MAX_TAIL) tail.resize(MAX_TAIL);
                add_tail(tok, tail);
            }
        }
    }
    void add_tail(llama_token head, const std::vector<llama_token> & tail) {
        const auto range = breakers.equal_range(head);
        for (auto it = range.first; it != range.second; ++it) {
            if (it->second == tail) return;
        }
        breakers.emplace(head, tail);
    }
    bool is_single_token_breaker(llama_token tok) const {
        const auto range = breakers.equal_range(tok);
        for (auto it = range.first; it != range.second; ++it) {
            if (it->second.empty()) return true;
        }
        return false;
    }

    void accept(llama_token token) override {
        if (off()) return;
        const size_t cap = window();
        if (cap == 0) return;
        history.push_back(token);
        while (history.size() > cap) history.pop_front();
    }
    void reset() override { history.clear(); }

    void apply(llama_token_data_array & cur) override {
        if (off()) return;
        const size_t n = std::min(history.size(), window());
        if (n <= (size_t) std::max(allowed_length, 0)) return;
        // from_end(i): the token i places before the last one.
        auto from_end = [&](size_t i) { return history[history.size() - 1 - i]; };

        // 1. The nearest breaker: the repeated suffix may not reach back over it. Of the breakers
        //    with this head token that end within the history, the longest counts.
        size_t limit = n;
        for (size_t i = 0; i < n; i++) {
            const auto range = breakers.equal_range(from_end(i));
            if (range.first == range.second) continue;
            bool found = false;
            size_t longest = 0;
            for (auto it = range.first; it != range.second; ++it) {
                const std::vector<llama_token> & tail = it->second;
                if (tail.size() > i) continue;  // the breaker would go past the last token
                bool match = true;
                for (size_t j = 0; j < tail.size() && match; j++) match = from_end(i - 1 - j) == tail[j];
                if (match) {
                    found = true;
                    longest = std::max(longest, tail.size());
                }
            }
            if (found) {
                limit = i - longest;
                break;
            }
        }
        if (limit < (size_t) std::max(allowed_length, 0)) return;  // a repeat may be as long as limit

        // 2. For each earlier position, how long a stretch ending there equals the suffix of the
        //    history (capped at limit): the Z-function of the history read backwards.
        std::vector<llama_token> rev(n);
        for (size_t i = 0; i < n; i++) rev[i] = from_end(i);
        std::vector<size_t> z(n, 0);
        for (size_t i = 1, l = 0, r = 0; i < n; i++) {
            size_t k = i < r ? std::min(r - i, z[i - l]) : 0;
            while (i + k < n && rev[k] == rev[i + k]) k++;
            z[i] = k;
            if (i + k > r) {
                l = i;
                r = i + k;
            }
        }

        // 3. The token that followed such a stretch would extend the repetition: keep, per token,
        //    the longest repetition it would extend.
        std::unordered_map<llama_token, size_t> longest;
        for (size_t i = 1; i < n; i++) {
            const size_t k = std::min(z[i], limit);
            if (k < (size_t) std::max(allowed_length, 0)) continue;
            const llama_token next = rev[i - 1];
            auto it = longest.find(next);
            if (it == longest.end()) longest.emplace(next, k);
            else it->second = std::max(it->second, k);
        }
        if (longest.empty()) return;

        // 4. The penalty; the exponent capped so that base^exponent stays a finite float.
        const float max_exponent = base > 1.000001f ? 88.7228391f / logf(base) : 0.0f;
        for (size_t i = 0; i < cur.size; i++) {
            const auto it = longest.find(cur.data[i].id);
            if (it == longest.end() || is_single_token_breaker(cur.data[i].id)) continue;
            float e = (float) it->second - (float) allowed_length;
            if (max_exponent > 0.0f && e > max_exponent) e = max_exponent;
            cur.data[i].logit -= multiplier * powf(base, e);
        }
        cur.sorted = false;
    }
};

// Fill-in-the-middle (llama.cpp's infill sampler): if the end-of-generation tokens together
// outweigh the rest (3 * p_eog * n > p_text), only they remain; otherwise tokens whose text is a
// prefix of another's are merged into the likelier of the two (they would write the same start),
// text tokens under p 0.2 go, then (renormalized) those under 1 / (text tokens left + 1). With no
// text token left, the end-of-turn token is the single candidate.
struct sampler_infill : sampler_copyable<sampler_infill> {
    const llama_vocab * vocab;
    explicit sampler_infill(const llama_vocab * v) : vocab(v) {}
    const char * name() const override { return "infill"; }

    std::string piece(llama_token tok) const {
        char buf[256];
        int32_t n = llama_token_to_piece(vocab, tok, buf, (int32_t) sizeof(buf), 0, false);
        if (n >= 0) return std::string(buf, (size_t) n);
        std::vector<char> big((size_t) -n);
        n = llama_token_to_piece(vocab, tok, big.data(), (int32_t) big.size(), 0, false);
        return std::string(big.data(), (size_t) std::max(n, 0));
    }
    // Keeps the EOG tokens and the text tokens with p >= thold (keep_text), renormalized (not in a
    // pass before the last that keeps no text token); returns the number of text tokens kept.
    size_t filter(llama_token_data_array & cur, float thold, bool keep_text, bool last) const {
        const size_t n = cur.size;
        size_t kept = 0, n_text = 0;
        float sum = 0.0f;
        for (size_t i = 0; i < n; i++) {
            const bool eog = llama_vocab_is_eog(vocab, cur.data[i].id);
            if (!eog && (!keep_text || cur.data[i].p < thold)) continue;
            if (!eog) n_text++;
            sum += cur.data[i].p;
            cur.data[kept++] = cur.data[i];
        }
        cur.size = kept;
        if (keep_text && n_text == 0 && !last) return 0;  // the caller replaces the array, p left as it was
        for (size_t i = 0; i < cur.size; i++) cur.data[i].p /= sum;
        return n_text;
    }

    void apply(llama_token_data_array & cur) override {
        llama_token_data_array_softmax(&cur);
        float p_text = 0.0f, p_eog = 0.0f;
        for (size_t i = 0; i < cur.size; i++) {
            (llama_vocab_is_eog(vocab, cur.data[i].id) ? p_eog : p_text) += cur.data[i].p;
        }
        if (3 * p_eog * cur.size > p_text) {
            filter(cur, 0.0f, false, true);
            return;
        }
        std::vector<std::string> pieces(cur.size);
        for (size_t i = 0; i < cur.size; i++) pieces[i] = piece(cur.data[i].id);
        for (size_t a = 0; a < cur.size; a++) {
            for (size_t b = 0; b < cur.size; b++) {
                if (cur.data[a].logit == -INFINITY) break;  // merged away meanwhile
                if (a == b || cur.data[b].logit == -INFINITY) continue;
                const std::string & pa = pieces[a];
                const std::string & pb = pieces[b];
                if (pa.empty() || pa.size() > pb.size() || pb.compare(0, pa.size(), pa) != 0) continue;
                // a's text starts b's: the likelier one takes the other's probability.
                const size_t into = cur.data[b].p > cur.data[a].p ? b : a;
                const size_t from = into == a ? b : a;
                cur.data[into].p += cur.data[from].p;
                cur.data[from].logit = -INFINITY;
                cur.data[from].p = 0.0f;
            }
        }
        const size_t n_text = filter(cur, 0.2f, true, false);
        if (n_text == 0) {
            cur.size = 1;
            cur.data[0].id = llama_vocab_eot(vocab);
            cur.data[0].logit = 1.0f;
            return;
        }
        filter(cur, (float) (1.0 / (double) (n_text + 1)), true, true);
    }
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

struct llama_sampler * llama_sampler_init_typical(float p, size_t min_keep) { return wrap(new sampler_typical(p, min_keep)); }
struct llama_sampler * llama_sampler_init_temp_ext(float t, float delta, float exponent) {
    return wrap(new sampler_temp_ext(t, delta, exponent));
}
struct llama_sampler * llama_sampler_init_xtc(float p, float t, size_t min_keep, uint32_t seed) {
    return wrap(new sampler_xtc(p, t, min_keep, seed));
}
struct llama_sampler * llama_sampler_init_top_n_sigma(float n) { return wrap(new sampler_top_n_sigma(n)); }
struct llama_sampler * llama_sampler_init_dry(const struct llama_vocab * vocab, int32_t n_ctx_train, float dry_multiplier,
                                              float dry_base, int32_t dry_allowed_length, int32_t dry_penalty_last_n,
                                              const char ** seq_breakers, size_t num_breakers) {
    auto * s = new sampler_dry(n_ctx_train, dry_multiplier, dry_base, dry_allowed_length, dry_penalty_last_n);
    // The breakers are looked up in the vocabulary once, and only when the sampler can act.
    if (vocab && !s->off()) {
        for (size_t i = 0; i < num_breakers; i++) {
            if (seq_breakers && seq_breakers[i]) s->add_breaker(vocab, seq_breakers[i]);
        }
    }
    return wrap(s);
}
struct llama_sampler * llama_sampler_init_infill(const struct llama_vocab * vocab) { return wrap(new sampler_infill(vocab)); }

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
