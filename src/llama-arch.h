// llama-arch.h - the model architectures as data: each architecture's name (general.architecture),
// its RoPE type, its Hugging Face class, and the tensors its files hold (which are required);
// each tensor kind's GGUF name, shape, use and where the loader puts it. The loader, the weight
// placement, the converter, the adapters' targets and the fuzz seeds read these tables, so that
// an architecture's facts are written once (docs/development/HOWTO-add-model.md).
#pragma once

#include "ggml.h"

#include <cstdint>
#include <string>
#include <vector>

struct llama_hparams;
struct llama_layer;
struct llama_model;

enum llm_arch {
    LLM_ARCH_LLAMA,    // Llama 1/2/3, TinyLlama, Mistral, SmolLM: RoPE NORMAL on rows permuted at conversion
    LLM_ARCH_QWEN2,    // Qwen2: RoPE NEOX, biases on Q, K, V
    LLM_ARCH_QWEN3,    // Qwen3: RoPE NEOX, per-head RMS norms of Q and K, explicit head size
    LLM_ARCH_GEMMA2,   // Gemma 2: scaled embeddings, post-norms, soft-capping, sliding window on even layers, GELU
    LLM_ARCH_GEMMA3,   // Gemma 3: Gemma 2 with Q/K norms, 5 local : 1 global layers, no soft-capping
    LLM_ARCH_PHI3,     // Phi-3 / Phi-4: fused QKV and gate-up projections, sliding window on every layer
    LLM_ARCH_QWEN2MOE, // Qwen2-MoE: qwen2's attention, experts (top-k, not renormalised) plus a gated shared expert
    LLM_ARCH_QWEN3MOE, // Qwen3-MoE: qwen3's attention, experts (top-k renormalised)
    LLM_ARCH_BERT,     // BERT: an encoder for embeddings; learned positions, post-LayerNorm blocks, no output head
    LLM_ARCH_NOMIC_BERT, // nomic-bert: BERT's post-LayerNorm encoder with RoPE (NEOX), a fused QKV, a SwiGLU FFN, no biases
    LLM_ARCH_UNKNOWN,  // vocab_only loads of other architectures
};

// Every tensor kind a model file can hold. Per-layer kinds have "%d" in their name.
enum llm_tensor {
    LLM_TENSOR_TOKEN_EMBD,
    LLM_TENSOR_OUTPUT_NORM,
    LLM_TENSOR_OUTPUT,
    LLM_TENSOR_ROPE_FREQS,
    LLM_TENSOR_ROPE_FACTORS_LONG,   // LongRoPE (Phi-3 128k): frequency factors beyond the original context
    LLM_TENSOR_ROPE_FACTORS_SHORT,  // and within it
    LLM_TENSOR_ATTN_NORM,
    LLM_TENSOR_ATTN_Q,
    LLM_TENSOR_ATTN_K,
    LLM_TENSOR_ATTN_V,
    LLM_TENSOR_ATTN_QKV,
    LLM_TENSOR_ATTN_OUT,
    LLM_TENSOR_ATTN_Q_BIAS,
    LLM_TENSOR_ATTN_K_BIAS,
    LLM_TENSOR_ATTN_V_BIAS,
    LLM_TENSOR_ATTN_Q_NORM,
    LLM_TENSOR_ATTN_K_NORM,
    LLM_TENSOR_ATTN_POST_NORM,
    LLM_TENSOR_FFN_NORM,
    LLM_TENSOR_FFN_GATE,
    LLM_TENSOR_FFN_UP,
    LLM_TENSOR_FFN_GATE_UP,  // gate and up stacked in one matrix (Phi-3's ffn_up, 2 n_ff rows)
    LLM_TENSOR_FFN_DOWN,
    LLM_TENSOR_FFN_POST_NORM,
    LLM_TENSOR_FFN_GATE_INP,        // the router: expert logits [n_embd, n_expert]
    LLM_TENSOR_FFN_GATE_EXPS,       // the experts, stacked [n_embd, n_ff_exp, n_expert]
    LLM_TENSOR_FFN_UP_EXPS,
    LLM_TENSOR_FFN_DOWN_EXPS,       // [n_ff_exp, n_embd, n_expert]
    LLM_TENSOR_FFN_GATE_INP_SHEXP,  // Qwen2-MoE's shared expert: its gate (a vector), and its FFN
    LLM_TENSOR_FFN_GATE_SHEXP,
    LLM_TENSOR_FFN_UP_SHEXP,
    LLM_TENSOR_FFN_DOWN_SHEXP,
    LLM_TENSOR_TOKEN_TYPES,          // BERT: token type (segment) embeddings [n_embd, n_token_types]
    LLM_TENSOR_POS_EMBD,             // learned absolute position embeddings [n_embd, n_ctx_train]
    LLM_TENSOR_TOKEN_EMBD_NORM,      // LayerNorm of the summed embeddings (weight, bias)
    LLM_TENSOR_TOKEN_EMBD_NORM_BIAS,
    LLM_TENSOR_ATTN_OUT_BIAS,
    LLM_TENSOR_ATTN_OUT_NORM,        // post-attention LayerNorm of the residual sum
    LLM_TENSOR_ATTN_OUT_NORM_BIAS,
    LLM_TENSOR_FFN_UP_BIAS,
    LLM_TENSOR_FFN_DOWN_BIAS,
    LLM_TENSOR_LAYER_OUT_NORM,       // post-FFN LayerNorm of the residual sum
    LLM_TENSOR_LAYER_OUT_NORM_BIAS,
    LLM_TENSOR_COUNT,
};

// How a weight is used, which decides the types it may have.
enum class llm_tensor_use {
    matrix,     // multiplied by activations (mul_mat)
    embedding,  // rows read by token id (get_rows)
    vector,     // norms and biases: F32
};

// The sizes a tensor's dimensions are given in.
enum class llm_dim : uint8_t {
    one,
    embd,     // n_embd
    vocab,    // n_vocab
    ff,       // n_ff
    ff2,      // 2 n_ff (gate and up stacked)
    q,        // n_head * head size of K (queries have the keys' size)
    k,        // n_head_kv * head size of K
    v,        // n_head_kv * head size of V
    qkv,      // q + k + v
    attn_out, // n_head * head size of V (the input of the output projection)
    head_k,   // head size of K (per-head norms)
    rot_half, // n_rot / 2 (frequency factors)
    expert,   // n_expert
    ff_exp,   // an expert's FFN size
    ff_shexp, // the shared expert's FFN size
    token_types, // n_token_types (BERT's segments)
    ctx_train,   // n_ctx_train (learned positions)
};

struct llm_tensor_info {
    llm_tensor id;
    const char * name;         // GGUF name, "%d" for the layer: "blk.%d.attn_q.weight"
    llm_tensor_use use;
    llm_dim ne[3];             // shape, dimension 0 first (unlisted: 1)
    ggml_tensor * llama_layer::* layer_field;  // where a per-layer tensor goes (nullptr: global)
    ggml_tensor * llama_model::* model_field;  // where a global tensor goes
    const char * lora_target;  // the short name LoRA targets it by (q, k, v, o, gate, up, down, output) or nullptr
};

const llm_tensor_info & llm_tensor_get(llm_tensor t);
// The tensor's GGUF name for layer il (ignored for global tensors).
std::string llm_tensor_name(llm_tensor t, int il = 0);
// The size of a dimension for a model's hyper-parameters.
int64_t llm_dim_size(llm_dim d, const llama_hparams & hp);

// Whether a file of the family must have the tensor: always, never, or as its FFN is dense or
// made of experts (<arch>.expert_count > 0: llama's Mixtral-style files).
enum class llm_need { required, optional, dense, experts };

struct llm_arch_tensor {
    llm_tensor id;
    llm_need need;
    // Whether a model with these hyper-parameters must have it (else it is optional).
    bool required(const llama_hparams & hp) const;
};

struct llm_arch_info {
    llm_arch arch;
    const char * name;       // general.architecture
    int rope_type;           // GGML_ROPE_TYPE_NORMAL or _NEOX, LLAMA_ROPE_TYPE_NONE (-1): no RoPE (learned positions)
    const char * hf_class;   // the Hugging Face architectures entry (config.json)
    std::vector<llm_arch_tensor> tensors;
    // An encoder (BERT, nomic-bert): LayerNorms (<arch>.attention.layer_norm_epsilon), bidirectional
    // attention unless the file says otherwise, no output head (embeddings only).
    bool encoder = false;
};

// The architecture of a general.architecture value (LLM_ARCH_UNKNOWN if none).
llm_arch llm_arch_from_name(const std::string & name);
// The table row of an architecture (not LLM_ARCH_UNKNOWN).
const llm_arch_info & llm_arch_get(llm_arch arch);
// "llama, qwen2, ...": for messages.
std::string llm_arch_names();
