// llama-hf.cpp - Hugging Face <-> GGUF layout of llama weights (see llama-hf.h).
#include "llama-hf.h"

#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace {

// within each head of hd rows: GGUF row i * 2 + j holds HF row j * (hd/2) + i.
void permute_rows(std::vector<uint8_t> & data, int64_t n_rows, size_t row_bytes, int64_t n_head, bool to_gguf) {
    if (n_head <= 0 || n_rows % n_head != 0 || (n_rows / n_head) % 2 != 0 || data.size() != (size_t) n_rows * row_bytes) {
        throw std::runtime_error("cannot permute " + std::to_string(n_rows) + " rows into " + std::to_string(n_head) + " heads");
    }
    const int64_t hd = n_rows / n_head, half = hd / 2;
    std::vector<uint8_t> out(data.size());
    for (int64_t h = 0; h < n_head; h++) {
        for (int64_t i = 0; i < half; i++) {
            for (int64_t j = 0; j < 2; j++) {
                const int64_t gguf = h * hd + i * 2 + j, hf = h * hd + j * half + i;
                const int64_t dst = to_gguf ? gguf : hf, src = to_gguf ? hf : gguf;
                memcpy(out.data() + dst * row_bytes, data.data() + src * row_bytes, row_bytes);
            }
        }
    }
    data.swap(out);
}

}  // namespace

void permute_qk_rows(std::vector<uint8_t> & data, int64_t n_rows, size_t row_bytes, int64_t n_head) {
    permute_rows(data, n_rows, row_bytes, n_head, true);
}

void unpermute_qk_rows(std::vector<uint8_t> & data, int64_t n_rows, size_t row_bytes, int64_t n_head) {
    permute_rows(data, n_rows, row_bytes, n_head, false);
}

const char * llama_hf_tensor_name(llm_arch arch, llm_tensor t) {
    const bool gemma = arch == LLM_ARCH_GEMMA2 || arch == LLM_ARCH_GEMMA3;
    switch (t) {
        case LLM_TENSOR_TOKEN_EMBD: return "model.embed_tokens.weight";
        case LLM_TENSOR_OUTPUT_NORM: return "model.norm.weight";
        case LLM_TENSOR_OUTPUT: return "lm_head.weight";
        case LLM_TENSOR_ATTN_NORM: return "model.layers.%d.input_layernorm.weight";
        case LLM_TENSOR_ATTN_Q: return "model.layers.%d.self_attn.q_proj.weight";
        case LLM_TENSOR_ATTN_K: return "model.layers.%d.self_attn.k_proj.weight";
        case LLM_TENSOR_ATTN_V: return "model.layers.%d.self_attn.v_proj.weight";
        case LLM_TENSOR_ATTN_QKV: return "model.layers.%d.self_attn.qkv_proj.weight";
        case LLM_TENSOR_ATTN_OUT: return "model.layers.%d.self_attn.o_proj.weight";
        case LLM_TENSOR_ATTN_Q_BIAS: return "model.layers.%d.self_attn.q_proj.bias";
        case LLM_TENSOR_ATTN_K_BIAS: return "model.layers.%d.self_attn.k_proj.bias";
        case LLM_TENSOR_ATTN_V_BIAS: return "model.layers.%d.self_attn.v_proj.bias";
        case LLM_TENSOR_ATTN_Q_NORM: return "model.layers.%d.self_attn.q_norm.weight";
        case LLM_TENSOR_ATTN_K_NORM: return "model.layers.%d.self_attn.k_norm.weight";
        // Gemma: post_attention_layernorm is the attention output's norm, the FFN's input norm
        // is pre_feedforward_layernorm; elsewhere post_attention_layernorm is the FFN's input norm.
        case LLM_TENSOR_ATTN_POST_NORM: return "model.layers.%d.post_attention_layernorm.weight";
        case LLM_TENSOR_FFN_NORM:
            return gemma ? "model.layers.%d.pre_feedforward_layernorm.weight" : "model.layers.%d.post_attention_layernorm.weight";
        case LLM_TENSOR_FFN_POST_NORM: return "model.layers.%d.post_feedforward_layernorm.weight";
        case LLM_TENSOR_FFN_GATE: return "model.layers.%d.mlp.gate_proj.weight";
        case LLM_TENSOR_FFN_UP: return "model.layers.%d.mlp.up_proj.weight";
        case LLM_TENSOR_FFN_GATE_UP: return "model.layers.%d.mlp.gate_up_proj.weight";
        case LLM_TENSOR_FFN_DOWN: return "model.layers.%d.mlp.down_proj.weight";
        default: return nullptr;
    }
}

bool llama_hf_norm_plus_one(llm_arch arch, llm_tensor t) {
    if (arch != LLM_ARCH_GEMMA2 && arch != LLM_ARCH_GEMMA3) return false;
    const llm_tensor_info & ti = llm_tensor_get(t);
    return ti.use == llm_tensor_use::vector && strstr(ti.name, "norm") != nullptr;
}

const std::vector<llama_hf_proj> & llama_hf_projections() {
    static const std::vector<llama_hf_proj> p = {
        {"q", "blk.%d.attn_q.weight", "model.layers.%d.self_attn.q_proj", "q_proj", true},
        {"k", "blk.%d.attn_k.weight", "model.layers.%d.self_attn.k_proj", "k_proj", true},
        {"v", "blk.%d.attn_v.weight", "model.layers.%d.self_attn.v_proj", "v_proj", true},
        {"o", "blk.%d.attn_output.weight", "model.layers.%d.self_attn.o_proj", "o_proj", true},
        {"gate", "blk.%d.ffn_gate.weight", "model.layers.%d.mlp.gate_proj", "gate_proj", true},
        {"up", "blk.%d.ffn_up.weight", "model.layers.%d.mlp.up_proj", "up_proj", true},
        {"down", "blk.%d.ffn_down.weight", "model.layers.%d.mlp.down_proj", "down_proj", true},
        {"output", "output.weight", "lm_head", "lm_head", false},
    };
    return p;
}

const llama_hf_proj * llama_hf_find_target(const std::string & name) {
    for (const auto & p : llama_hf_projections()) {
        if (name == p.target || name == p.module) return &p;
    }
    return nullptr;
}

std::string llama_hf_name(const char * fmt, int layer) {
    if (!strstr(fmt, "%d")) return fmt;
    char buf[256];
    snprintf(buf, sizeof(buf), fmt, layer);
    return buf;
}
