// finetune-checkpoint.h - llama-finetune's checkpoints: one GGUF file with the adapter's A and B,
// the optimizer's moments ("opt.m.<name>", "opt.v.<name>"), the steps done, the position in
// the data, the history of the run and the options that must not change on resume.
#pragma once

#include "finetune-report.h"

#include "ggml-opt.h"

#include <cstdint>
#include <functional>
#include <string>

struct llama_adapter_lora;
struct llama_model;

struct ft_checkpoint_state {
    int64_t step = 0;      // optimizer steps done
    int64_t seq_pos = 0;   // training sequences consumed (across epochs)
    std::string config;    // the options a resumed run must share, one "key=value" per line
    ft_history history;
    std::string arch;      // general.architecture of the base model (read back only)
    float alpha = 0.0f;    // adapter.lora.alpha (read back only)
};

// What the resuming run is, for ft_checkpoint_check_state to hold every field of a checkpoint
// against.
struct ft_run_expect {
    std::string arch;           // the base model's general.architecture
    std::string config;         // this run's configuration string
    float alpha = 0.0f;         // this run's adapter alpha
    int64_t total_steps = 0;    // the run's length in steps
    int64_t seqs_per_step = 1;  // training sequences an optimizer step consumes (all processes)
    std::function<float(int64_t)> lr_at;          // the learning rate of step s (0-based)
    std::function<bool(int64_t)> validates_after;  // whether validation follows step s (1-based); null: no validation
};

// Written whole or not at all. opt: the optimizer context (its moments; NULL-safe for SGD).
bool ft_checkpoint_save(const std::string & path, const llama_model & model, const llama_adapter_lora & ad,
                        ggml_opt_context_t opt, const ft_checkpoint_state & st, std::string & err);

// Reads the state only (to compare the configuration before building anything); checks what
// can be checked without the run (sizes of the history, ranges).
bool ft_checkpoint_read_state(const std::string & path, ft_checkpoint_state & st, std::string & err);

// Holds every field of the state against the run: architecture, configuration, alpha, steps,
// the data position (steps x sequences per step), the learning rates and losses of the history,
// the validation rows. False with a message naming the field.
bool ft_checkpoint_check_state(const ft_checkpoint_state & st, const ft_run_expect & run, std::string & err);

// Restores A, B and the moments into a run built with the same configuration; sets the steps.
// Every tensor must have its exact shape (A and B swapped or transposed are refused) and finite
// values (second moments >= 0); the file may hold no other tensors. opt NULL: A and B only.
bool ft_checkpoint_restore(const std::string & path, const llama_adapter_lora & ad, ggml_opt_context_t opt, std::string & err);
