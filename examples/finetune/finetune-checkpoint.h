// finetune-checkpoint.h - llama-finetune's checkpoints: one GGUF file with the adapter's A and B,
// the optimizer's moments ("opt.m.<name>", "opt.v.<name>"), the steps done, the position in
// the data, the history of the run and the options that must not change on resume.
#pragma once

#include "finetune-report.h"

#include "ggml-opt.h"

#include <cstdint>
#include <string>

struct llama_adapter_lora;
struct llama_model;

struct ft_checkpoint_state {
    int64_t step = 0;      // optimizer steps done
    int64_t seq_pos = 0;   // training sequences consumed (across epochs)
    std::string config;    // the options a resumed run must share, one "key=value" per line
    ft_history history;
};

// Written whole or not at all. opt: the optimizer context (its moments; NULL-safe for SGD).
bool ft_checkpoint_save(const std::string & path, const llama_model & model, const llama_adapter_lora & ad,
                        ggml_opt_context_t opt, const ft_checkpoint_state & st, std::string & err);

// Reads the state only (to compare the configuration before building anything).
bool ft_checkpoint_read_state(const std::string & path, ft_checkpoint_state & st, std::string & err);

// Restores A, B and the moments into a run built with the same configuration; sets the steps.
bool ft_checkpoint_restore(const std::string & path, const llama_adapter_lora & ad, ggml_opt_context_t opt, std::string & err);
