// llama-hf.h - how a Hugging Face checkpoint relates to a GGUF model: the names of its weights and
// of the projections LoRA adapts, and the Q/K row order of llama (HF rotates halves of a head, GGUF llama files
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
// The per-expert Hugging Face name of a stacked experts' tensor ("%d" for the layer, then the
// expert: "model.layers.%d.block_sparse_moe.experts.%d.w1.weight"), nullptr for other kinds.
const char * llama_hf_expert_name(llm_arch arch, llm_tensor t);
// The family of a Hugging Face architectures entry (the table's classes, and Mistral's and
// Mixtral's, which are llama files); LLM_ARCH_UNKNOWN if none.
llm_arch llama_hf_arch_of_class(const std::string & hf_class);

// A projection LoRA can adapt, as llama-finetune's --lora-targets and PEFT's target_modules name
// it. Built from the tensor table's lora_target column and the family's Hugging Face names.
struct llama_hf_proj {
    std::string target;   // the short name: q, k, v, qkv, o, gate, up, gate_up, down, router, output
    std::string gguf;     // GGUF tensor name, "%d" for the layer: "blk.%d.attn_q.weight"
    std::string hf;       // HF module path, "%d" for the layer: "model.layers.%d.self_attn.q_proj"
    std::string module;   // PEFT's target_modules entry: "q_proj"
    bool per_layer;
};
// The projections of a family LoRA can target, in llama-finetune's order.
const std::vector<llama_hf_proj> & llama_hf_projections(llm_arch arch);
// A family's projection by short target name, PEFT module name (nullptr if none, or if the module
// name is shared: see llama_hf_module_sharers).
const llama_hf_proj * llama_hf_find_target(llm_arch arch, const std::string & name);
// The projections of a family whose PEFT module name is the same (BERT: attention.output.dense,
// intermediate.dense and output.dense are all "dense"); empty when fewer than two share it.
// PEFT matches target_modules by the end of the module path, so such a name adapts them all.
std::vector<const llama_hf_proj *> llama_hf_module_sharers(llm_arch arch, const std::string & module);
// Whether some family has a projection of that short or PEFT name (options are checked before a
// model is loaded), and the short names of all families for messages: "q, k, v, ...".
bool llama_hf_is_target(const std::string & name);
std::string llama_hf_target_names();
// Fills the first "%d" with the layer (or returns fmt unchanged when it has none).
std::string llama_hf_name(const std::string & fmt, int layer);
