// llama-sampling.h - sampling internals shared with the tests (the C API is in llama.h: a
// llama_sampler is an interface plus state; the built-in samplers are C++ objects behind one
// interface).
#pragma once

#include "llama.h"

#include <cstdint>

// Sorts the candidates by logit, descending (ties by id), unless they are sorted already.
void llama_token_data_array_sort(llama_token_data_array * cur);
// Sorts, then p = exp(logit - max) / sum.
void llama_token_data_array_softmax(llama_token_data_array * cur);

// Runs the sampler on raw logits (n_vocab of them) and accepts the chosen token: what
// llama_sampler_sample does with a context's logits. With no selecting stage the most likely
// candidate is taken.
llama_token llama_sampler_sample_logits(llama_sampler * smpl, const float * logits, int32_t n_vocab);

// Mirostat's current mu (maximum surprise, in bits) of a Mirostat 1 or 2 sampler (for tests);
// false for another sampler.
bool llama_sampler_mirostat_mu(const llama_sampler * smpl, float * mu);
