// perplexity.h - what llama-perplexity's two files share: perplexity.cpp (perplexity, the KL
// divergence, the program) and tasks.cpp (the multiple-choice benchmarks).
#pragma once

#include "common.h"
#include "llama.h"

#include <cstdint>
#include <string>
#include <vector>

// log(sum(exp(x))) of a row, in double; *imax (when given) gets the index of the largest value.
double ppl_log_sum_exp(const float * x, int32_t n, int32_t * imax = nullptr);

// True (once a message is printed) after Ctrl-C.
bool ppl_interrupted();

// The text's tokens with the model's BOS (as llama.cpp's common_tokenize(ctx, text, true)).
std::vector<llama_token> ppl_tokenize(const llama_vocab * vocab, const std::string & text);

// The benchmarks over params.prompt (the data file's bytes, read by main): HellaSwag (--hellaswag),
// WinoGrande (--winogrande), and llama.cpp's binary multiple-choice files (--multiple-choice:
// ARC, MMLU, TruthfulQA). 0 on success, 1 with a message on bad data or a failed decode.
int run_hellaswag(llama_context * ctx, const common_params & params);
int run_winogrande(llama_context * ctx, const common_params & params);
int run_multiple_choice(llama_context * ctx, const common_params & params);
