// llama-graph.h - the llama forward graph for one micro-batch (inference, through the KV cache,
// or training, differentiable), and the graph that re-rotates the cached keys after a position
// shift. Inference graphs are built in a no_alloc context; the caller places them with
// the backend scheduler and fills the input tensors.
#pragma once

#include "ggml.h"

#include <cstdint>
#include <utility>
#include <vector>

struct llama_model;
struct llama_kv_cache;
struct llm_lora_set;

// Attention by groups (contexts of several sequences, without flash attention): the micro-batch's
// tokens are grouped by the sequence they attend as, and each group's queries meet only that
// sequence's cells, gathered from the cache (rows of K and V), instead of every token scoring every
// cell under a mask. n tokens of n sequences interleaved in n * m cells then cost n * m scores,
// not n * n * m. The caller sizes the groups before building (n_groups 0: the ordinary path);
// the graph makes the inputs, which the caller fills.
struct llm_attn_groups {
    uint32_t n_groups = 0;
    uint32_t n_tq = 0;                 // tokens per group (the largest group's; the others padded)
    uint32_t n_kc = 0;                 // cells per group (likewise)
    ggml_tensor * q_rows = nullptr;    // I32 [n_tq * n_groups]: the batch token of each group row (padding: any)
    ggml_tensor * kv_rows = nullptr;   // I32 [n_kc * n_groups]: the cell of each group column (padding: any, masked)
    ggml_tensor * out_rows = nullptr;  // I32 [n_tokens]: each token's row among the groups' n_tq * n_groups
    ggml_tensor * mask = nullptr;      // F32 [n_kc, n_tq, 1, n_groups]: 0 visible, -inf hidden
    ggml_tensor * mask_swa = nullptr;  // the same for the sliding-window layers (hparams.n_swa > 0)
};

// What the forward graph reads and produces.
struct llm_graph_io {
    ggml_tensor * tokens = nullptr;   // I32 [n_tokens]
    ggml_tensor * pos = nullptr;      // I32 [n_tokens]
    ggml_tensor * kq_mask = nullptr;  // F32 [n_kv, n_tokens]: 0 visible, -inf hidden
    // The same for the sliding-window layers (models with hparams.n_swa > 0, else nullptr): also
    // hidden, the cells at or more than n_swa positions before the token (llm_mask_window).
    ggml_tensor * kq_mask_swa = nullptr;
    ggml_tensor * out_ids = nullptr;  // I32 [n_outputs]: which tokens get logits (nullptr: all)
    ggml_tensor * logits = nullptr;   // F32 [n_vocab, n_outputs] (nullptr when n_outputs == 0)
    // Set by the caller before building: the outputs are the final hidden states (after the output
    // norm), io.embd F32 [n_embd, n_outputs], instead of logits (embeddings mode).
    bool want_embd = false;
    ggml_tensor * embd = nullptr;
    // LoRA dropout (llm_lora_set::dropout): one F32 mask [n_in, n_tokens] per adapted weight,
    // multiplied into the input of its A (0, or 1 / (1 - p) for the kept values).
    std::vector<ggml_tensor *> lora_masks;
    std::vector<ggml_tensor *> layer_out;  // each layer's output (checkpoints for recomputation)
    // Each layer's input, the outputs of its weight products (roped Q and K, V, FFN gate and
    // up), the attention output, the residual after attention and the adapters' scaled A x:
    // checkpoints under which only elementwise ops are recomputed, none of the products.
    std::vector<ggml_tensor *> matmul_out;
    // I32 [n_tokens]: the cache cells this batch's keys and values go to (ggml_set_rows), an input
    // like the others, so that a generated token's graph serves the next tokens unchanged.
    ggml_tensor * kv_idxs = nullptr;
    // Set by the caller before building (sizes) like want_embd; the graph adds the inputs.
    llm_attn_groups groups;
};

// RoPE as a context applies it: the model's trained values unless llama_context_params overrides
// them (llama.cpp's rules: a base or scale of 0 keeps the model's, scaling NONE never scales, a
// negative YaRN extrapolation factor means 1 for YaRN and 0 otherwise).
struct llm_rope_params {
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;
    float ext_factor = 0.0f;
    float attn_factor = 1.0f;
    float beta_fast = 32.0f;
    float beta_slow = 1.0f;
    uint32_t n_ctx_orig = 0;
    // Per-dimension frequency divisors (nullptr: none): Llama 3's rope_freqs, or LongRoPE's long
    // or short factors as the context size decides.
    ggml_tensor * freq_factors = nullptr;
};
// The model's own values (training, and contexts that override nothing) for sequences of up to
// n_ctx_seq tokens (which picks LongRoPE's factors; 0: the short ones).
llm_rope_params llm_rope_from_model(const llama_model & model, uint32_t n_ctx_seq = 0);

// Hides, in a mask row of a token at position p built for the full layers, the cells a
// sliding-window layer of the model does not see (cell positions cell_pos[c] <= p - n_swa).
void llm_mask_window(const llama_model & model, float * row, const int32_t * cell_pos, uint32_t n_cells, int32_t p);

// Most nodes either graph can have (for sizing the graph and its context), with n_lora adapters.
size_t llm_graph_max_nodes(const llama_model & model, size_t n_lora = 0);

// The forward pass of n_tokens tokens whose keys and values go to the cache cells the caller
// writes into io.kv_idxs; attention reads cells [0, n_kv). Logits for n_outputs of the tokens
// (all when n_outputs == n_tokens; none: only the KV cache is written). lora: adapters applied
// unmerged to the projections (nullptr: none).
// rope: the context's RoPE (nullptr: the model's).
ggml_cgraph * llm_build_forward(ggml_context * ctx, const llama_model & model, const llama_kv_cache & kv,
                                uint32_t n_tokens, uint32_t n_kv, uint32_t n_outputs, llm_graph_io & io,
                                const llm_lora_set * lora = nullptr, const llm_rope_params * rope = nullptr);

// The forward pass of n_tokens tokens for training: no KV cache; attention uses the batch's own
// keys and values under the mask io.kq_mask (F32 [n_tokens, n_tokens], 0 visible, -inf hidden,
// set by the caller: causal for one sequence; io.kq_mask_swa too for sliding-window models),
// and every token gets logits. The graph is made
// with room for gradients (ggml_new_graph_custom(.., llm_graph_max_nodes_train(model), true)):
// add a loss, flag it and the weights, then ggml_build_backward_expand.
// With lora, the adapters' tensors flagged as parameters are what gets trained (QLoRA when the
// base weights are quantized: gradients flow through them to the activations only).
ggml_cgraph * llm_build_forward_train(ggml_context * ctx, const llama_model & model, uint32_t n_tokens, llm_graph_io & io,
                                      const llm_lora_set * lora = nullptr);
// Most nodes a training graph can have with its backward pass and a loss.
size_t llm_graph_max_nodes_train(const llama_model & model, size_t n_lora = 0);

// Rotates the keys of cells [0, n_cells) by their pending position deltas (input I32 [n_cells]
// returned in *deltas), in place.
ggml_cgraph * llm_build_k_shift(ggml_context * ctx, const llama_model & model, const llama_kv_cache & kv,
                                uint32_t n_cells, ggml_tensor ** deltas, const llm_rope_params * rope = nullptr);
