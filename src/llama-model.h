// llama-model.h - a loaded model: architecture, hyper-parameters, weight tensors (mapped from the
// GGUF file, never copied) and the vocabulary.
#pragma once

#include "llama.h"
#include "llama-arch.h"
#include "llama-vocab.h"

#include <cstdint>
#include <string>
#include <vector>

struct gguf_context;

struct llama_hparams {
    uint32_t n_ctx_train = 0;
    uint32_t n_embd = 0;
    uint32_t n_layer = 0;
    uint32_t n_head = 0;
    uint32_t n_head_kv = 0;
    uint32_t n_ff = 0;
    uint32_t n_vocab = 0;   // rows of token_embd (what the logits cover)
    // Mixture of experts (<arch>.expert_count > 0): n_expert_used of n_expert experts per token,
    // each an FFN of n_ff_exp; their weights the softmax of the router's logits over the chosen
    // ones renormalised to sum 1 (expert_weights_norm) or as they are; a shared expert of
    // n_ff_shexp (qwen2moe).
    uint32_t n_expert = 0;
    uint32_t n_expert_used = 0;
    uint32_t n_ff_exp = 0;
    uint32_t n_ff_shexp = 0;
    bool expert_weights_norm = true;

    uint32_t n_embd_head_k = 0;  // head size of queries and keys (<arch>.attention.key_length, n_embd / n_head by default)
    uint32_t n_embd_head_v = 0;  // head size of values (<arch>.attention.value_length)
    uint32_t n_rot = 0;     // dimensions rotated by RoPE (<= head size)
    float    f_norm_rms_eps = 1e-5f;

    // Sliding-window attention: layers with swa_layers[il] set see only the n_swa positions up to
    // their own (a token at p sees cells at p - n_swa + 1 .. p).
    uint32_t n_swa = 0;
    std::vector<uint8_t> swa_layers;
    bool is_swa(uint32_t il) const { return n_swa > 0 && il < swa_layers.size() && swa_layers[il]; }

    // Gemma: scores soft-capped as c tanh(s / c) before the softmax, logits likewise (0: none);
    // the token embeddings scaled by embd_scale (0: not scaled); the queries scaled by
    // f_attention_scale (0: 1 / sqrt(n_embd_head_k)).
    float f_attn_logit_softcapping = 0.0f;
    float f_final_logit_softcapping = 0.0f;
    float embd_scale = 0.0f;
    float f_attention_scale = 0.0f;

    // RoPE as trained; a context may override the base, the scale and the YaRN fields
    // (llama_context_params, llm_rope_params).
    float    rope_freq_base = 10000.0f;
    float    rope_freq_scale = 1.0f;    // 1 / scaling factor
    float    rope_freq_base_swa = 0.0f; // the sliding-window layers' base (Gemma 3), 0: rope_freq_base
    float    rope_attn_factor = 1.0f;   // rope.scaling.attn_factor: multiplies the context's YaRN attention factor
    enum llama_rope_scaling_type rope_scaling = LLAMA_ROPE_SCALING_TYPE_NONE;  // NONE, LINEAR or YARN
    uint32_t rope_n_ctx_orig = 0;       // YaRN: the original training context
    float    rope_yarn_ext_factor = 0.0f;  // 1 for YaRN
    float    rope_yarn_beta_fast = 32.0f;
    float    rope_yarn_beta_slow = 1.0f;
    int      rope_type = 0;             // GGML_ROPE_TYPE_NORMAL or _NEOX

    // Embedding models: how a sequence's embedding is pooled (<arch>.pooling_type) and whether
    // attention is causal (<arch>.attention.causal).
    enum llama_pooling_type pooling_type = LLAMA_POOLING_TYPE_NONE;
    bool causal_attn = true;

    // BERT: LayerNorm's epsilon (<arch>.attention.layer_norm_epsilon) and the number of token
    // types (tokenizer.ggml.token_type_count, 2 when absent); learned positions cover n_ctx_train.
    float    f_norm_eps = 1e-12f;
    uint32_t n_token_types = 0;

    uint32_t n_embd_k_gqa() const { return n_embd_head_k * n_head_kv; }
    uint32_t n_embd_v_gqa() const { return n_embd_head_v * n_head_kv; }
};

struct llama_layer {
    ggml_tensor * attn_norm = nullptr;
    ggml_tensor * wq = nullptr;
    ggml_tensor * wk = nullptr;
    ggml_tensor * wv = nullptr;
    ggml_tensor * wo = nullptr;
    ggml_tensor * wqkv = nullptr;  // phi3: Q, K and V stacked
    ggml_tensor * bq = nullptr;  // qwen2
    ggml_tensor * bk = nullptr;
    ggml_tensor * bv = nullptr;
    ggml_tensor * attn_q_norm = nullptr;  // qwen3, gemma3: per-head RMS norms
    ggml_tensor * attn_k_norm = nullptr;
    ggml_tensor * attn_post_norm = nullptr;  // gemma: norm of the attention output
    ggml_tensor * ffn_norm = nullptr;
    ggml_tensor * ffn_gate = nullptr;
    ggml_tensor * ffn_up = nullptr;
    ggml_tensor * ffn_gate_up = nullptr;  // phi3: gate and up stacked
    ggml_tensor * ffn_down = nullptr;
    ggml_tensor * ffn_post_norm = nullptr;  // gemma: norm of the FFN output
    ggml_tensor * ffn_gate_inp = nullptr;   // mixture of experts: the router and the stacked experts
    ggml_tensor * ffn_gate_exps = nullptr;
    ggml_tensor * ffn_up_exps = nullptr;
    ggml_tensor * ffn_down_exps = nullptr;
    ggml_tensor * ffn_gate_inp_shexp = nullptr;  // qwen2moe: the shared expert and its gate
    ggml_tensor * ffn_gate_shexp = nullptr;
    ggml_tensor * ffn_up_shexp = nullptr;
    ggml_tensor * ffn_down_shexp = nullptr;
    ggml_tensor * bo = nullptr;               // bert: the output projection's bias, post-norms (LayerNorm
    ggml_tensor * attn_out_norm = nullptr;    // weight and bias) after attention and after the FFN, the
    ggml_tensor * attn_out_norm_b = nullptr;  // FFN's biases
    ggml_tensor * layer_out_norm = nullptr;
    ggml_tensor * layer_out_norm_b = nullptr;
    ggml_tensor * ffn_up_b = nullptr;
    ggml_tensor * ffn_down_b = nullptr;
};

struct llama_model {
    llm_arch arch = LLM_ARCH_UNKNOWN;
    std::string arch_name;   // general.architecture as written in the file
    std::string path;
    llama_hparams hparams;
    llama_vocab vocab;
    bool has_vocab = false;  // false: the file has no tokenizer metadata (empty vocabulary)
    bool vocab_only = false;

    ggml_tensor * tok_embd = nullptr;
    ggml_tensor * output_norm = nullptr;
    ggml_tensor * output = nullptr;      // token_embd itself when the embeddings are tied
    ggml_tensor * rope_freqs = nullptr;  // optional per-dimension frequency factors (Llama 3.1)
    ggml_tensor * rope_long = nullptr;   // LongRoPE factors (Phi-3 128k): contexts beyond the original one
    ggml_tensor * rope_short = nullptr;  // and within it
    ggml_tensor * type_embd = nullptr;   // bert: token type embeddings, learned positions, the
    ggml_tensor * pos_embd = nullptr;    // LayerNorm of the summed embeddings
    ggml_tensor * tok_norm = nullptr;
    ggml_tensor * tok_norm_b = nullptr;
    std::vector<llama_layer> layers;

    uint64_t n_params = 0;
    uint64_t n_bytes = 0;    // bytes of tensor data
    int32_t  file_type = -1; // general.file_type, -1 if absent
    std::string ftype_guess; // the most common matrix type when general.file_type is absent
    int64_t  t_load_us = 0;
    int64_t  t_start_us = 0;

    // The file's metadata, kept for llama_model_meta_val_str and the chat template; with
    // use_mmap it also owns the mapping the weights point into.
    gguf_context * meta = nullptr;
    ggml_context * ctx_w = nullptr;  // the weight tensors (data mapped or read by gguf)
    // Where the weights live (llama-model-weights.cpp): each layer's device (NULL: the CPU), the
    // output layer's, the GPU devices used, and the backend buffers holding the weights.
    std::vector<ggml_backend_dev_t> layer_dev;
    ggml_backend_dev_t output_dev = nullptr;
    std::vector<ggml_backend_dev_t> devices;
    std::vector<ggml_backend_buffer_t> bufs;
    ggml_context * ctx_dup = nullptr;  // the output matrix's own copy when tied embeddings go to a GPU

    llama_model() = default;
    ~llama_model();
    llama_model(const llama_model &) = delete;
    llama_model & operator=(const llama_model &) = delete;
};

// Gives every weight a backend buffer: layers on GPU devices by n_gpu_layers, CPU matrices
// repacked (use_repack), the rest in place. False with a message in err.
// Every weight of a layer that the file has (the architecture table's per-layer tensors).
std::vector<ggml_tensor *> llama_layer_tensors(const llama_layer & l);

bool llama_model_place_weights(llama_model & model, const llama_model_params & params, std::string & err);

// Loads the model; false with a message in err on any problem.
bool llama_model_load(llama_model & model, const char * path, const llama_model_params & params, std::string & err);
