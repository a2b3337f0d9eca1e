// llama-sampling.h - sampler stages over a candidate list (internal; the C API is in llama.h).
#pragma once

#include "llama.h"

#include <cstdint>
#include <vector>

struct llama_token_data {
    llama_token id;
    float logit;
    float p;  // probability, valid after a stage that computes the softmax
};

struct llama_candidates {
    std::vector<llama_token_data> data;
    bool sorted = false;                      // by logit, descending
    llama_token selected = LLAMA_TOKEN_NULL;  // set by a selecting stage (greedy, dist)

    void sort_desc();
    void softmax();  // sorts, then p = exp(logit - max) / sum
};

struct llama_sampler {
    virtual ~llama_sampler() = default;
    virtual void apply(llama_candidates & cand) = 0;
    virtual void accept(llama_token token) { (void) token; }
    virtual void reset() {}
};

// Runs the chain on raw logits (n_vocab of them) and accepts the chosen token; what
// llama_sampler_sample does with a context's logits.
llama_token llama_sampler_sample_logits(llama_sampler * smpl, const float * logits, int32_t n_vocab);

// Mirostat's current mu (maximum surprise, in bits) of a Mirostat 1 or 2 sampler (for tests);
// false for another sampler.
bool llama_sampler_mirostat_mu(const llama_sampler * smpl, float * mu);
