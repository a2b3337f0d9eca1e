// finetune-data.h - llama-finetune's training data: documents (a plain text file, or one JSONL
// example per line) tokenized as the model asks, with the targets that count for the loss, cut
// into sequences of at most n_ctx tokens.
#pragma once

#include "llama.h"

#include <cstdint>
#include <string>
#include <vector>

// A sequence of the model's input: tokens[0..n) predict tokens[1..n]; counts[i] says whether
// target tokens[i] (i >= 1) is part of the loss (counts[0] is unused).
struct ft_sequence {
    std::vector<llama_token> tokens;
    std::vector<uint8_t> counts;
    int64_t n_targets() const;  // the counted targets
};

enum ft_data_format { FT_DATA_TEXT, FT_DATA_JSONL };

// Reads and tokenizes the file and cuts it into sequences of at most n_ctx tokens. Consecutive
// sequences of a document share one token (the last input of one is the first of the next), so
// every target is predicted exactly once. Sequences without counted targets are dropped. False
// with a message on a missing, unreadable, empty or malformed file.
// chatml_fallback (optional): set when chat examples were formatted with ChatML because the model
// has no chat template of its own.
bool ft_load_data(const llama_model * model, const std::string & path, ft_data_format format, int32_t n_ctx,
                  std::vector<ft_sequence> & out, std::string & err, bool * chatml_fallback = nullptr);
// The same on text already read; name is what messages call it (the file's path).
bool ft_parse_data(const llama_model * model, const std::string & text, const std::string & name, ft_data_format format,
                   int32_t n_ctx, std::vector<ft_sequence> & out, std::string & err, bool * chatml_fallback = nullptr);

// A Fisher-Yates shuffle of [0, n) with a 64-bit generator seeded by seed (the same order on
// every platform, unlike std::shuffle).
std::vector<int64_t> ft_shuffled_order(int64_t n, uint64_t seed);

// SplitMix64: the seeds of the epoch orders and of the dropout masks derive from --seed with it.
uint64_t ft_mix(uint64_t x);
