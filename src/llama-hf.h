// llama-hf.h - how a Hugging Face Llama checkpoint relates to a GGUF llama model: the names of
// the projection weights, and the Q/K row order (HF rotates halves of a head, GGUF llama files
// adjacent pairs, so the converter permutes the rows of Q and K within each head).
#pragma once

#include "llama-arch.h"

#include <cstdint>
#include <string>
#include <vector>

// Row permutation GGUF llama files apply to Q and K of checkpoints using the rotate-half RoPE
// layout (Hugging Face): within each head, row j * (hd/2) + i moves to row i * 2 + j.
// Throws std::runtime_error when the rows do not split into n_head heads of even size.
void permute_qk_rows(std::vector<uint8_t> & data, int64_t n_rows, size_t row_bytes, int64_t n_head);
// Its inverse: GGUF order back to Hugging Face order.
void unpermute_qk_rows(std::vector<uint8_t> & data, int64_t n_rows, size_t row_bytes, int64_t n_head);

// The Hugging Face name of a GGUF tensor kind in a family's checkpoints ("%d" for the layer), or
// nullptr when checkpoints do not store it (RoPE factors come from config.json). Gemma's norms
// are stored as w where GGUF files hold 1 + w (llama_hf_norm_plus_one).
const char * llama_hf_tensor_name(llm_arch arch, llm_tensor t);
bool llama_hf_norm_plus_one(llm_arch arch, llm_tensor t);

// A projection's short name as PEFT's target_modules and llama-finetune's --lora-targets know it.
struct llama_hf_proj {
    const char * target;   // q, k, v, o, gate, up, down, output
    const char * gguf;     // GGUF tensor name, "%d" for the layer: "blk.%d.attn_q.weight"
    const char * hf;       // HF module path, "%d" for the layer: "model.layers.%d.self_attn.q_proj"
    const char * module;   // PEFT's target_modules entry: "q_proj"
    bool per_layer;
};
// The eight projections LoRA can target, in llama-finetune's order.
const std::vector<llama_hf_proj> & llama_hf_projections();
// The projection of a short target name, PEFT module name or GGUF tensor name (nullptr if none).
const llama_hf_proj * llama_hf_find_target(const std::string & name);
// Fills "%d" with the layer (or returns fmt unchanged when it has none).
std::string llama_hf_name(const char * fmt, int layer);
