// llama-graph-build.h - what a family's graph builder works with (internal to the runtime): the
// shared pieces of a decoder block (norms, projections with their LoRA adapters, RoPE, attention
// through the KV cache or over the batch, the feed-forward variants, the output head), and one
// builder function per family (llama-build-*.cpp). A builder writes the block as its family's
// paper does; everything it has in common with the others comes from here.
#pragma once

#include "llama-graph.h"
#include "llama-model.h"

struct llm_lora_set;

// Where attention takes its keys and values from: the KV cache (inference), or the batch itself
// (training, where the graph must be differentiable and hold no cache).
struct llm_kv_source {
    virtual ~llm_kv_source() = default;
    // The layer's new keys (rotated, [head_k, n_head_kv, n_tokens]) and values [n_embd_v_gqa, n_tokens].
    virtual void put(int il, ggml_tensor * k, ggml_tensor * v) = 0;
    // softmax(kq_scale q.k, soft-capped when softcap > 0, + mask) v for q [head_k, n_head, n_tokens]:
    // [n_head * head_v, n_tokens].
    virtual ggml_tensor * attention(int il, ggml_tensor * q, ggml_tensor * kq_mask, float kq_scale, float softcap) = 0;
};

enum class llm_ffn_act { silu, gelu };

struct llm_graph_builder {
    ggml_context * ctx;
    ggml_cgraph * gf;
    const llama_model & model;
    const llama_hparams & hp;
    const llm_rope_params & rope_p;
    uint32_t n_tokens;
    bool logits;  // false: only the keys and values of the layers are wanted
    llm_graph_io & io;
    llm_kv_source & src;
    const llm_lora_set * lora;  // nullptr: no adapters

    // ---- pieces ----
    // The token embeddings, scaled by hparams.embd_scale when set.
    ggml_tensor * inp_embd();
    ggml_tensor * rms_norm(ggml_tensor * x, ggml_tensor * weight);
    // LayerNorm (hparams.f_norm_eps) times weight plus bias.
    ggml_tensor * layer_norm(ggml_tensor * x, ggml_tensor * weight, ggml_tensor * bias);
    // w x plus the adapters of w (and dropout masks when training with dropout).
    ggml_tensor * mm(ggml_tensor * w, ggml_tensor * x);
    // mm plus an optional bias.
    ggml_tensor * linear(ggml_tensor * w, ggml_tensor * b, ggml_tensor * x);
    // x [head, n_heads, n_tokens] rotated by the positions as layer il does.
    ggml_tensor * rope(ggml_tensor * x, int il);
    // Marks the products of one input as consecutive in the graph (the CPU converts the input once).
    void expand_together(std::initializer_list<ggml_tensor *> ts);

    // Whether layer il is the last one and no logits are wanted: only its keys and values matter.
    bool kv_only(int il) const { return !logits && il + 1 == (int) hp.n_layer; }
    // The layer's attention: q [head_k, n_head, n_tokens] and k (both rotated) and v [n_embd_v_gqa,
    // n_tokens]; keys and values stored, then the output before the output projection. The mask
    // is the layer's (sliding window or not); the scale hparams.f_attention_scale or 1/sqrt(head_k).
    ggml_tensor * attention(int il, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v);
    // Queries, keys and values of the normed input x for layer il (separate or fused projections,
    // biases, per-head norms, RoPE), then attention and the output projection. nullptr when the
    // layer only stores its keys and values (kv_only).
    ggml_tensor * self_attention(int il, ggml_tensor * x);
    // act(gate x) * (up x), then down; gate and up separate or stacked in one matrix.
    ggml_tensor * ffn(int il, ggml_tensor * x, llm_ffn_act act);
    // A mixture of experts: the router's softmax over the experts, the top n_expert_used of them
    // per token (renormalised when hparams.expert_weights_norm), each a SiLU-gated FFN on the
    // token, summed by weight; plus the shared expert, gated by sigmoid(w . x), where the layer
    // has one.
    ggml_tensor * moe_ffn(int il, ggml_tensor * x);
    // In the last layer, keeps only the rows of the tokens that get outputs (cur and the residual).
    void keep_outputs(int il, ggml_tensor *& cur, ggml_tensor *& residual);
    // The output head on the last hidden states: norm (when the model has one), then logits
    // (soft-capped when the model says so) or, in embeddings mode, the normed states.
    void output(ggml_tensor * x);
};

// The builders, one per block shape (families whose blocks differ only in which tensors they
// have share one).
void llm_build_llama(llm_graph_builder & b);  // llama (dense or Mixtral-style experts), qwen2, qwen3, phi3, qwen2moe, qwen3moe
void llm_build_gemma(llm_graph_builder & b);  // gemma2, gemma3
void llm_build_bert(llm_graph_builder & b);   // bert
void llm_build_nomic_bert(llm_graph_builder & b);  // nomic-bert
