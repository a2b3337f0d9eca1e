// tiny-models.h - small random-weight GGUF models of every architecture in the runtime's table
// (src/llama-arch.h), written the same way on every machine (a counter-based generator, no
// library RNG), so that logits computed offline by other implementations on these files
// (tools/arch-reference: llama.cpp, a float64 PyTorch forward pass) hold for the files a test
// writes again. The tokenizer metadata is copied from a donor GGUF (stories260K: 512 tokens).
#pragma once

#include "ggml.h"
#include "gguf.h"
#include "llama-arch.h"
#include "llama-model.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

namespace tiny {

struct spec {
    std::string name;   // file stem: "gemma2"
    llm_arch arch;
    uint32_t n_embd = 128, n_layer = 2, n_head = 4, n_head_kv = 2, n_ff = 192;
    uint32_t head_k = 0, head_v = 0;   // 0: n_embd / n_head, not written
    uint32_t n_swa = 0;                // written when > 0
    float freq_base = 10000.0f;
    float rope_linear = 0.0f;          // rope.scaling.factor with type linear, when > 0
    float attn_softcap = 0.0f, final_softcap = 0.0f;  // written when > 0
    bool tied = false;                 // no output.weight
    uint32_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_ff_shexp = 0;  // mixtures of experts (keys written when > 0)
    bool longrope = false;             // phi3: LongRoPE factors, original context 16 (contexts of 32 and more take the long ones), attn_factor 1.19
    uint32_t pooling = 0;              // encoders: <arch>.pooling_type (1 mean, 2 cls)
    uint64_t seed = 1;
};

// The models the tests and tools/arch-reference use: every family, head sizes other than 64,
// grouped-query attention, windows of 8 tokens (prompts are longer).
inline std::vector<spec> specs() {
    std::vector<spec> v;
    spec llama{"llama", LLM_ARCH_LLAMA};
    llama.seed = 11;
    v.push_back(llama);
    spec qwen2{"qwen2", LLM_ARCH_QWEN2};
    qwen2.tied = true;
    qwen2.seed = 12;
    v.push_back(qwen2);
    spec qwen3{"qwen3", LLM_ARCH_QWEN3};
    qwen3.head_k = qwen3.head_v = 48;  // n_head * head != n_embd
    qwen3.freq_base = 1e6f;
    qwen3.seed = 13;
    v.push_back(qwen3);
    spec gemma2{"gemma2", LLM_ARCH_GEMMA2};
    gemma2.n_layer = 26;  // llama.cpp 4747 knows Gemma 2 only with 26, 42 or 46 layers
    gemma2.n_embd = 64;
    gemma2.n_ff = 96;
    gemma2.head_k = gemma2.head_v = 32;
    gemma2.n_swa = 8;
    gemma2.attn_softcap = 2.0f;
    gemma2.final_softcap = 5.0f;
    gemma2.tied = true;
    gemma2.seed = 14;
    v.push_back(gemma2);
    spec gemma3{"gemma3", LLM_ARCH_GEMMA3};
    gemma3.n_layer = 7;  // layer 5 is global, the others local
    gemma3.head_k = gemma3.head_v = 48;
    gemma3.n_swa = 8;
    gemma3.freq_base = 1e6f;
    gemma3.rope_linear = 2.0f;
    gemma3.tied = true;
    gemma3.seed = 15;
    v.push_back(gemma3);
    spec phi3{"phi3", LLM_ARCH_PHI3};
    phi3.n_head = 4;
    phi3.head_k = phi3.head_v = 32;
    phi3.n_swa = 8;
    phi3.seed = 16;
    v.push_back(phi3);
    spec phi3_long = phi3;
    phi3_long.name = "phi3_longrope";
    phi3_long.longrope = true;
    phi3_long.seed = 17;
    v.push_back(phi3_long);
    spec llama_moe{"llama_moe", LLM_ARCH_LLAMA};  // Mixtral-style: experts of n_ff
    llama_moe.n_expert = 4;
    llama_moe.n_expert_used = 2;
    llama_moe.seed = 18;
    v.push_back(llama_moe);
    spec qwen2moe{"qwen2moe", LLM_ARCH_QWEN2MOE};
    qwen2moe.n_expert = 4;
    qwen2moe.n_expert_used = 2;
    qwen2moe.n_ff_exp = 64;
    qwen2moe.n_ff_shexp = 96;
    qwen2moe.freq_base = 1e6f;
    qwen2moe.seed = 19;
    v.push_back(qwen2moe);
    spec qwen3moe{"qwen3moe", LLM_ARCH_QWEN3MOE};
    qwen3moe.head_k = qwen3moe.head_v = 32;
    qwen3moe.n_expert = 8;
    qwen3moe.n_expert_used = 3;
    qwen3moe.n_ff_exp = 64;
    qwen3moe.tied = true;
    qwen3moe.freq_base = 1e6f;
    qwen3moe.seed = 20;
    v.push_back(qwen3moe);
    spec bert{"bert", LLM_ARCH_BERT};  // bidirectional, learned positions, mean pooling
    bert.n_head_kv = bert.n_head;
    bert.n_layer = 3;
    bert.pooling = 1;
    bert.seed = 22;
    v.push_back(bert);
    spec nomic{"nomic_bert", LLM_ARCH_NOMIC_BERT};  // bidirectional, RoPE (base 1000 as nomic-embed-text), SwiGLU, mean pooling
    nomic.n_head_kv = nomic.n_head;
    nomic.n_layer = 3;
    nomic.pooling = 1;
    nomic.freq_base = 1000.0f;
    nomic.seed = 23;
    v.push_back(nomic);
    return v;
}

// A model for speed measurements, not for tests: Mixtral's shape (8 experts, 2 used per token,
// the expert FFN 3.5 times the width, 4 query heads per KV head, heads of 128) at a quarter of
// its width and 8 layers: 0.73 B parameters, 0.42 GB in Q4_0 (tools/arch-reference/README.md).
inline spec moe_bench_spec() {
    spec s{"moe-bench", LLM_ARCH_LLAMA};
    s.n_embd = 1024;
    s.n_ff = 3584;
    s.n_head = 8;
    s.n_head_kv = 2;
    s.n_layer = 8;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.seed = 21;
    return s;
}

// Models whose shapes let every quantization mix rule act, for comparing the per-tensor types with
// llama.cpp's llama-quantize (tools/quant-reference): rows of 256 (k-quants without fallbacks),
// enough layers for the first-eighth / first-sixteenth rules, 4 query heads per KV head, Mixtral's
// 8 experts (its own attention rules), and a mixture with a shared expert.
inline std::vector<spec> quant_mix_specs() {
    spec dense{"mix-llama", LLM_ARCH_LLAMA};
    dense.n_embd = 256;
    dense.n_ff = 512;
    dense.n_layer = 16;
    dense.n_head = 8;
    dense.n_head_kv = 2;
    dense.seed = 31;
    spec mixtral = dense;
    mixtral.name = "mix-mixtral";
    mixtral.n_ff = 256;
    mixtral.n_layer = 8;
    mixtral.n_expert = 8;
    mixtral.n_expert_used = 2;
    mixtral.seed = 32;
    spec qwen2moe{"mix-qwen2moe", LLM_ARCH_QWEN2MOE};
    qwen2moe.n_embd = 256;
    qwen2moe.n_layer = 8;
    qwen2moe.n_head = 4;
    qwen2moe.n_head_kv = 4;
    qwen2moe.n_expert = 4;
    qwen2moe.n_expert_used = 2;
    qwen2moe.n_ff_exp = 256;
    qwen2moe.n_ff_shexp = 512;
    qwen2moe.freq_base = 1e6f;
    qwen2moe.seed = 33;
    // llama.cpp's "70B" (80 blocks: of llama with grouped KV heads, of qwen2 with any), whose
    // attention V gets more bits.
    spec llama70b = dense;
    llama70b.name = "mix-llama70b";
    llama70b.n_ff = 256;
    llama70b.n_layer = 80;
    llama70b.n_head_kv = 1;
    llama70b.seed = 34;
    spec qwen2_80{"mix-qwen2-80", LLM_ARCH_QWEN2};
    qwen2_80.n_embd = 256;
    qwen2_80.n_ff = 256;
    qwen2_80.n_layer = 80;
    qwen2_80.n_head = 4;
    qwen2_80.n_head_kv = 4;
    qwen2_80.seed = 35;
    return { dense, mixtral, qwen2moe, llama70b, qwen2_80 };
}

// gtest prints a model by its name.
inline void PrintTo(const spec & s, std::ostream * os) { *os << s.name; }

// splitmix64 of (seed, tensor, element): uniform in [-1, 1).
inline float noise(uint64_t seed, uint64_t tensor, uint64_t i) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + tensor * 0xD1B54A32D192ED03ull + i * 0x94D049BB133111EBull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float) ((double) (z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

// Writes the model of s to path with the tokenizer of donor; matrices in wtype (F32 or a
// quantized type), norms and biases F32. False if a file cannot be read or written.
inline bool write(const spec & s, const std::string & path, const std::string & donor, ggml_type wtype = GGML_TYPE_F32) {
    gguf_init_params dp = { true, nullptr, false };
    gguf_context * src = gguf_init_from_file(donor.c_str(), dp);
    if (!src) return false;
    gguf_context * g = gguf_init_empty();
    for (int64_t i = 0; i < gguf_get_n_kv(src); i++) {
        const std::string key = gguf_get_key(src, i);
        if (key.rfind("tokenizer.", 0) != 0) continue;
        const gguf_type t = gguf_get_kv_type(src, i);
        if (t == GGUF_TYPE_STRING) {
            gguf_set_val_str(g, key.c_str(), gguf_get_val_str(src, i));
        } else if (t == GGUF_TYPE_UINT32) {
            gguf_set_val_u32(g, key.c_str(), gguf_get_val_u32(src, i));
        } else if (t == GGUF_TYPE_BOOL) {
            gguf_set_val_bool(g, key.c_str(), gguf_get_val_bool(src, i));
        } else if (t == GGUF_TYPE_ARRAY && gguf_get_arr_type(src, i) == GGUF_TYPE_STRING) {
            std::vector<const char *> strs;
            for (size_t j = 0; j < gguf_get_arr_n(src, i); j++) strs.push_back(gguf_get_arr_str(src, i, j));
            gguf_set_arr_str(g, key.c_str(), strs.data(), strs.size());
        } else if (t == GGUF_TYPE_ARRAY) {
            gguf_set_arr_data(g, key.c_str(), gguf_get_arr_type(src, i), gguf_get_arr_data(src, i), gguf_get_arr_n(src, i));
        }
    }
    const int64_t tok_id = gguf_find_key(src, "tokenizer.ggml.tokens");
    const uint32_t n_vocab = tok_id >= 0 ? (uint32_t) gguf_get_arr_n(src, tok_id) : 0;
    gguf_free(src);
    if (n_vocab == 0) {
        gguf_free(g);
        return false;
    }

    const llm_arch_info & arch = llm_arch_get(s.arch);
    const std::string a = std::string(arch.name) + ".";
    gguf_set_val_str(g, "general.architecture", arch.name);
    gguf_set_val_str(g, "general.name", "tiny test model");  // (a name with "phi3" in it changes llama.cpp's vocabulary)
    gguf_set_val_u32(g, (a + "context_length").c_str(), 256);
    gguf_set_val_u32(g, (a + "embedding_length").c_str(), s.n_embd);
    gguf_set_val_u32(g, (a + "block_count").c_str(), s.n_layer);
    gguf_set_val_u32(g, (a + "feed_forward_length").c_str(), s.n_ff);
    gguf_set_val_u32(g, (a + "attention.head_count").c_str(), s.n_head);
    gguf_set_val_u32(g, (a + "attention.head_count_kv").c_str(), s.n_head_kv);
    if (arch.encoder) {
        // As llama.cpp's converter writes BERT: LayerNorm epsilon, no causal mask, the pooling.
        gguf_set_val_f32(g, (a + "attention.layer_norm_epsilon").c_str(), 1e-12f);
        gguf_set_val_bool(g, (a + "attention.causal").c_str(), false);
        gguf_set_val_u32(g, (a + "pooling_type").c_str(), s.pooling);
        gguf_set_val_u32(g, "tokenizer.ggml.token_type_count", 2);
        if (arch.rope_type >= 0) gguf_set_val_f32(g, (a + "rope.freq_base").c_str(), s.freq_base);
    } else {
        gguf_set_val_f32(g, (a + "attention.layer_norm_rms_epsilon").c_str(), 1e-6f);
        gguf_set_val_f32(g, (a + "rope.freq_base").c_str(), s.freq_base);
    }
    if (s.head_k) gguf_set_val_u32(g, (a + "attention.key_length").c_str(), s.head_k);
    if (s.head_v) gguf_set_val_u32(g, (a + "attention.value_length").c_str(), s.head_v);
    if (s.n_swa) gguf_set_val_u32(g, (a + "attention.sliding_window").c_str(), s.n_swa);
    if (s.rope_linear > 0.0f) {
        gguf_set_val_str(g, (a + "rope.scaling.type").c_str(), "linear");
        gguf_set_val_f32(g, (a + "rope.scaling.factor").c_str(), s.rope_linear);
    }
    if (s.attn_softcap > 0.0f) gguf_set_val_f32(g, (a + "attn_logit_softcapping").c_str(), s.attn_softcap);
    if (s.n_expert) {
        gguf_set_val_u32(g, (a + "expert_count").c_str(), s.n_expert);
        gguf_set_val_u32(g, (a + "expert_used_count").c_str(), s.n_expert_used);
    }
    if (s.n_ff_exp) gguf_set_val_u32(g, (a + "expert_feed_forward_length").c_str(), s.n_ff_exp);
    if (s.n_ff_shexp) gguf_set_val_u32(g, (a + "expert_shared_feed_forward_length").c_str(), s.n_ff_shexp);
    if (s.longrope) {
        gguf_set_val_u32(g, (a + "rope.scaling.original_context_length").c_str(), 16);
        gguf_set_val_f32(g, (a + "rope.scaling.attn_factor").c_str(), 1.19f);
    }
    if (s.final_softcap > 0.0f) gguf_set_val_f32(g, (a + "final_logit_softcapping").c_str(), s.final_softcap);
    gguf_set_val_u32(g, "general.file_type", wtype == GGML_TYPE_F32 ? 0 : wtype == GGML_TYPE_Q8_0 ? 7 : wtype == GGML_TYPE_Q4_0 ? 2 : 1);

    llama_hparams hp;
    hp.n_embd = s.n_embd;
    hp.n_layer = s.n_layer;
    hp.n_head = s.n_head;
    hp.n_head_kv = s.n_head_kv;
    hp.n_ff = s.n_ff;
    hp.n_vocab = n_vocab;
    hp.n_embd_head_k = s.head_k ? s.head_k : s.n_embd / s.n_head;
    hp.n_embd_head_v = s.head_v ? s.head_v : s.n_embd / s.n_head;
    hp.n_rot = hp.n_embd_head_k;
    hp.n_expert = s.n_expert;
    hp.n_expert_used = s.n_expert_used;
    hp.n_ff_exp = s.n_ff_exp ? s.n_ff_exp : s.n_ff;
    hp.n_ff_shexp = s.n_ff_shexp ? s.n_ff_shexp : s.n_ff;
    hp.n_ctx_train = 256;  // the context_length written above (BERT's learned positions)
    hp.n_token_types = 2;

    // The tensors of the file, then a context that holds them all.
    std::vector<std::pair<llm_tensor, int>> list;
    for (const llm_arch_tensor & at : arch.tensors) {
        if (llm_tensor_get(at.id).layer_field) continue;
        if (at.id == LLM_TENSOR_OUTPUT && s.tied) continue;
        const bool factors = at.id == LLM_TENSOR_ROPE_FACTORS_LONG || at.id == LLM_TENSOR_ROPE_FACTORS_SHORT;
        if (!at.required(hp) && at.id != LLM_TENSOR_OUTPUT && !(factors && s.longrope)) continue;
        list.push_back({at.id, -1});
    }
    for (uint32_t il = 0; il < s.n_layer; il++) {
        for (const llm_arch_tensor & at : arch.tensors) {
            if (!llm_tensor_get(at.id).layer_field || !at.required(hp)) continue;
            list.push_back({at.id, (int) il});
        }
    }
    size_t ctx_bytes = 1u << 20;
    for (const auto & e : list) {
        const llm_tensor_info & ti = llm_tensor_get(e.first);
        ctx_bytes += ggml_tensor_overhead() + 64 +
                     (size_t) (llm_dim_size(ti.ne[0], hp) * llm_dim_size(ti.ne[1], hp) * llm_dim_size(ti.ne[2], hp)) * sizeof(float);
    }
    ggml_init_params ip = { ctx_bytes, nullptr, false };
    ggml_context * ctx = ggml_init(ip);
    auto add = [&](llm_tensor id, int il) {
        // The values depend on the tensor's name, not on the order the table lists it in.
        uint64_t tensor_no = 1469598103934665603ull;
        for (char ch : llm_tensor_name(id, il)) tensor_no = (tensor_no ^ (uint8_t) ch) * 1099511628211ull;
        const llm_tensor_info & ti = llm_tensor_get(id);
        const int64_t ne0 = llm_dim_size(ti.ne[0], hp), ne1 = llm_dim_size(ti.ne[1], hp), ne2 = llm_dim_size(ti.ne[2], hp);
        const bool vec = ti.use == llm_tensor_use::vector;
        std::vector<float> v((size_t) (ne0 * ne1 * ne2));
        const std::string tname = ti.name;
        const bool is_norm = tname.find("norm") != std::string::npos && tname.compare(tname.size() - 7, 7, ".weight") == 0;
        // Norm weights near 1, biases small, matrices scaled like an initialisation (1/sqrt(n_in)).
        // Routers larger (decisive choices): near ties between the k-th and the next expert, which a
        // Q8_0 file's rounding flips, would make its KL a matter of luck (amplitude 1.5: 1.4e-3).
        const bool router_w = id == LLM_TENSOR_FFN_GATE_INP;
        const float amp = is_norm ? 0.2f : vec ? 0.1f : (router_w ? 10.0f : 1.5f) / sqrtf((float) ne0);
        for (size_t i = 0; i < v.size(); i++) v[i] = (is_norm ? 1.0f : 0.0f) + amp * noise(s.seed, tensor_no, i);
        if (id == LLM_TENSOR_ROPE_FACTORS_LONG || id == LLM_TENSOR_ROPE_FACTORS_SHORT) {
            for (size_t i = 0; i < v.size(); i++) v[i] = 1.0f + 4.0f * fabsf(noise(s.seed, tensor_no, i));  // divisors >= 1
        }
        // The router stays F32 in quantized files (as llama.cpp's quantizer leaves it).
        const bool router = id == LLM_TENSOR_FFN_GATE_INP || id == LLM_TENSOR_FFN_GATE_INP_SHEXP;
        const ggml_type type = vec || router || ti.use == llm_tensor_use::embedding ? GGML_TYPE_F32 : wtype;
        ggml_tensor * t = ne2 > 1 ? ggml_new_tensor_3d(ctx, type, ne0, ne1, ne2)
                          : ne1 > 1 ? ggml_new_tensor_2d(ctx, type, ne0, ne1) : ggml_new_tensor_1d(ctx, type, ne0);
        ggml_set_name(t, llm_tensor_name(id, il).c_str());
        if (type == GGML_TYPE_F32) {
            memcpy(t->data, v.data(), v.size() * sizeof(float));
        } else {
            ggml_quantize_chunk(type, v.data(), t->data, 0, ne1 * ne2, ne0, nullptr);
        }
        gguf_add_tensor(g, t);
    };
    for (const auto & e : list) add(e.first, e.second);
    const bool ok = gguf_write_to_file(g, path.c_str(), false);
    gguf_free(g);
    ggml_free(ctx);
    return ok;
}

}  // namespace tiny
