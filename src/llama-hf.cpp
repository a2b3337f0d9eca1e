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

// BERT (BertModel's names; the converter drops BertForMaskedLM's "bert." prefix).
static const char * bert_tensor_name(llm_tensor t) {
    switch (t) {
        case LLM_TENSOR_TOKEN_EMBD: return "embeddings.word_embeddings.weight";
        case LLM_TENSOR_TOKEN_TYPES: return "embeddings.token_type_embeddings.weight";
        case LLM_TENSOR_POS_EMBD: return "embeddings.position_embeddings.weight";
        case LLM_TENSOR_TOKEN_EMBD_NORM: return "embeddings.LayerNorm.weight";
        case LLM_TENSOR_TOKEN_EMBD_NORM_BIAS: return "embeddings.LayerNorm.bias";
        case LLM_TENSOR_ATTN_Q: return "encoder.layer.%d.attention.self.query.weight";
        case LLM_TENSOR_ATTN_Q_BIAS: return "encoder.layer.%d.attention.self.query.bias";
        case LLM_TENSOR_ATTN_K: return "encoder.layer.%d.attention.self.key.weight";
        case LLM_TENSOR_ATTN_K_BIAS: return "encoder.layer.%d.attention.self.key.bias";
        case LLM_TENSOR_ATTN_V: return "encoder.layer.%d.attention.self.value.weight";
        case LLM_TENSOR_ATTN_V_BIAS: return "encoder.layer.%d.attention.self.value.bias";
        case LLM_TENSOR_ATTN_OUT: return "encoder.layer.%d.attention.output.dense.weight";
        case LLM_TENSOR_ATTN_OUT_BIAS: return "encoder.layer.%d.attention.output.dense.bias";
        case LLM_TENSOR_ATTN_OUT_NORM: return "encoder.layer.%d.attention.output.LayerNorm.weight";
        case LLM_TENSOR_ATTN_OUT_NORM_BIAS: return "encoder.layer.%d.attention.output.LayerNorm.bias";
        case LLM_TENSOR_FFN_UP: return "encoder.layer.%d.intermediate.dense.weight";
        case LLM_TENSOR_FFN_UP_BIAS: return "encoder.layer.%d.intermediate.dense.bias";
        case LLM_TENSOR_FFN_DOWN: return "encoder.layer.%d.output.dense.weight";
        case LLM_TENSOR_FFN_DOWN_BIAS: return "encoder.layer.%d.output.dense.bias";
        case LLM_TENSOR_LAYER_OUT_NORM: return "encoder.layer.%d.output.LayerNorm.weight";
        case LLM_TENSOR_LAYER_OUT_NORM_BIAS: return "encoder.layer.%d.output.LayerNorm.bias";
        default: return nullptr;
    }
}

// nomic-bert (NomicBertModel's names, as nomic-embed-text's checkpoints have them).
static const char * nomic_bert_tensor_name(llm_tensor t) {
    switch (t) {
        case LLM_TENSOR_TOKEN_EMBD: return "embeddings.word_embeddings.weight";
        case LLM_TENSOR_TOKEN_TYPES: return "embeddings.token_type_embeddings.weight";
        case LLM_TENSOR_TOKEN_EMBD_NORM: return "emb_ln.weight";
        case LLM_TENSOR_TOKEN_EMBD_NORM_BIAS: return "emb_ln.bias";
        case LLM_TENSOR_ATTN_QKV: return "encoder.layers.%d.attn.Wqkv.weight";
        case LLM_TENSOR_ATTN_OUT: return "encoder.layers.%d.attn.out_proj.weight";
        case LLM_TENSOR_ATTN_OUT_NORM: return "encoder.layers.%d.norm1.weight";
        case LLM_TENSOR_ATTN_OUT_NORM_BIAS: return "encoder.layers.%d.norm1.bias";
        case LLM_TENSOR_FFN_UP: return "encoder.layers.%d.mlp.fc11.weight";  // y = fc11(x) * silu(fc12(x))
        case LLM_TENSOR_FFN_GATE: return "encoder.layers.%d.mlp.fc12.weight";
        case LLM_TENSOR_FFN_DOWN: return "encoder.layers.%d.mlp.fc2.weight";
        case LLM_TENSOR_LAYER_OUT_NORM: return "encoder.layers.%d.norm2.weight";
        case LLM_TENSOR_LAYER_OUT_NORM_BIAS: return "encoder.layers.%d.norm2.bias";
        default: return nullptr;
    }
}

const char * llama_hf_tensor_name(llm_arch arch, llm_tensor t) {
    if (arch == LLM_ARCH_BERT) return bert_tensor_name(t);
    if (arch == LLM_ARCH_NOMIC_BERT) return nomic_bert_tensor_name(t);
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
        // The router: Mixtral's block_sparse_moe.gate, Qwen-MoE's mlp.gate (and its shared expert).
        case LLM_TENSOR_FFN_GATE_INP:
            return arch == LLM_ARCH_LLAMA ? "model.layers.%d.block_sparse_moe.gate.weight" : "model.layers.%d.mlp.gate.weight";
        case LLM_TENSOR_FFN_GATE_INP_SHEXP: return "model.layers.%d.mlp.shared_expert_gate.weight";
        case LLM_TENSOR_FFN_GATE_SHEXP: return "model.layers.%d.mlp.shared_expert.gate_proj.weight";
        case LLM_TENSOR_FFN_UP_SHEXP: return "model.layers.%d.mlp.shared_expert.up_proj.weight";
        case LLM_TENSOR_FFN_DOWN_SHEXP: return "model.layers.%d.mlp.shared_expert.down_proj.weight";
        default: return nullptr;
    }
}

const char * llama_hf_expert_name(llm_arch arch, llm_tensor t) {
    const bool mixtral = arch == LLM_ARCH_LLAMA;
    switch (t) {
        case LLM_TENSOR_FFN_GATE_EXPS: return mixtral ? "model.layers.%d.block_sparse_moe.experts.%d.w1.weight" : "model.layers.%d.mlp.experts.%d.gate_proj.weight";
        case LLM_TENSOR_FFN_UP_EXPS: return mixtral ? "model.layers.%d.block_sparse_moe.experts.%d.w3.weight" : "model.layers.%d.mlp.experts.%d.up_proj.weight";
        case LLM_TENSOR_FFN_DOWN_EXPS: return mixtral ? "model.layers.%d.block_sparse_moe.experts.%d.w2.weight" : "model.layers.%d.mlp.experts.%d.down_proj.weight";
        default: return nullptr;
    }
}

llm_arch llama_hf_arch_of_class(const std::string & hf_class) {
    if (hf_class == "MistralForCausalLM" || hf_class == "MixtralForCausalLM") return LLM_ARCH_LLAMA;
    for (int i = 0; i < (int) LLM_ARCH_UNKNOWN; i++) {
        if (hf_class == llm_arch_get((llm_arch) i).hf_class) return (llm_arch) i;
    }
    return LLM_ARCH_UNKNOWN;
}

bool llama_hf_norm_plus_one(llm_arch arch, llm_tensor t) {
    if (arch != LLM_ARCH_GEMMA2 && arch != LLM_ARCH_GEMMA3) return false;
    const llm_tensor_info & ti = llm_tensor_get(t);
    return ti.use == llm_tensor_use::vector && strstr(ti.name, "norm") != nullptr;
}

namespace {

// The order llama-finetune lists targets in (and PEFT's target_modules are written in).
const char * const kTargetOrder[] = {"q", "k", "v", "qkv", "o", "gate", "up", "gate_up", "down", "router", "output"};

std::vector<llama_hf_proj> make_projections(llm_arch arch) {
    std::vector<llama_hf_proj> v;
    const llm_arch_info & info = llm_arch_get(arch);
    for (const char * target : kTargetOrder) {
        for (const llm_arch_tensor & at : info.tensors) {
            const llm_tensor_info & ti = llm_tensor_get(at.id);
            if (!ti.lora_target || strcmp(ti.lora_target, target) != 0) continue;
            const char * hf = llama_hf_tensor_name(arch, at.id);
            if (!hf) continue;
            std::string path = hf;
            const std::string suffix = ".weight";
            if (path.size() > suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0) {
                path.resize(path.size() - suffix.size());
            }
            const size_t dot = path.rfind('.');
            v.push_back({target, ti.name, path, dot == std::string::npos ? path : path.substr(dot + 1), ti.layer_field != nullptr});
        }
    }
    return v;
}

const std::vector<std::vector<llama_hf_proj>> & all_projections() {
    static const std::vector<std::vector<llama_hf_proj>> all = [] {
        std::vector<std::vector<llama_hf_proj>> v;
        for (int a = 0; a < (int) LLM_ARCH_UNKNOWN; a++) v.push_back(make_projections((llm_arch) a));
        return v;
    }();
    return all;
}

}  // namespace

const std::vector<llama_hf_proj> & llama_hf_projections(llm_arch arch) {
    static const std::vector<llama_hf_proj> none;
    return arch >= 0 && arch < LLM_ARCH_UNKNOWN ? all_projections()[(size_t) arch] : none;
}

const llama_hf_proj * llama_hf_find_target(llm_arch arch, const std::string & name) {
    for (const auto & p : llama_hf_projections(arch)) {
        if (name == p.target) return &p;
    }
    if (!llama_hf_module_sharers(arch, name).empty()) return nullptr;  // ambiguous
    for (const auto & p : llama_hf_projections(arch)) {
        if (name == p.module) return &p;
    }
    return nullptr;
}

std::vector<const llama_hf_proj *> llama_hf_module_sharers(llm_arch arch, const std::string & module) {
    std::vector<const llama_hf_proj *> v;
    for (const auto & p : llama_hf_projections(arch)) {
        if (p.module == module) v.push_back(&p);
    }
    if (v.size() < 2) v.clear();
    return v;
}

bool llama_hf_is_target(const std::string & name) {
    for (const auto & ps : all_projections()) {
        for (const auto & p : ps) {
            if (name == p.target || name == p.module) return true;
        }
    }
    return false;
}

std::string llama_hf_target_names() {
    std::string s;
    for (const char * t : kTargetOrder) s += (s.empty() ? "" : ", ") + std::string(t);
    return s;
}

std::string llama_hf_name(const std::string & fmt, int layer) {
    std::string s = fmt;
    const size_t at = s.find("%d");
    if (at != std::string::npos) s.replace(at, 2, std::to_string(layer));
    return s;
}
