// make-seeds: writes the tiny GGUF files the fuzzers start from (fuzz/corpus/fuzz-model, also
// copied to fuzz/corpus/fuzz-gguf) and fuzz-tokenizer falls back on without the shared test models:
//   tiny-llama-spm.gguf  llama, SentencePiece vocabulary of 20 tokens, f16 matrices, tied output
//   tiny-qwen2-bpe.gguf  qwen2, byte-level BPE vocabulary with merges, biases, f32
//   tiny-llama-q4_0.gguf llama, the same vocabulary, Q4_0 matrices (quantized matmuls), n_embd 32
//   tiny-vocab-only.gguf another architecture's tokenizer (loads with vocab_only only)
//   tiny-qwen3.gguf      qwen3: per-head Q/K norms, head size 6 (n_head * head != n_embd)
//   tiny-gemma2.gguf     gemma2: two layers (one windowed, window 3), soft-caps, post-norms
//   tiny-gemma3.gguf     gemma3: Q/K norms, windowed layers, linear RoPE scaling
//   tiny-phi3.gguf       phi3: fused QKV and gate-up, window 4, LongRoPE factors
//   tiny-mixtral.gguf    llama with 4 stacked experts, 2 per token (router ffn_gate_inp)
//   tiny-qwen2moe.gguf   qwen2moe: 4 experts of FFN 8, a gated shared expert of FFN 16, biases
//   all-types.gguf       one key of every value type and array type, tensors of several types
// Usage: fuzz-make-seeds OUT_DIR
#include "ggml.h"
#include "gguf.h"
#include "llama-arch.h"
#include "llama-model.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct builder {
    gguf_context * g = gguf_init_empty();
    ggml_context * ctx;
    uint32_t seed = 1;
    builder() {
        ggml_init_params ip = { 1u << 20, nullptr, false };
        ctx = ggml_init(ip);
    }
    ~builder() {
        gguf_free(g);
        ggml_free(ctx);
    }
    float rnd() {
        seed = seed * 1664525u + 1013904223u;
        return ((seed >> 8) / 16777216.0f - 0.5f) * 0.5f;
    }
    void tensor(const std::string & name, ggml_type type, int64_t ne0, int64_t ne1 = 1, float fill = NAN, int64_t ne2 = 1) {
        ggml_tensor * t = ne2 > 1   ? ggml_new_tensor_3d(ctx, type, ne0, ne1, ne2)
                          : ne1 == 1 ? ggml_new_tensor_1d(ctx, type, ne0) : ggml_new_tensor_2d(ctx, type, ne0, ne1);
        ggml_set_name(t, name.c_str());
        const int64_t n = ne0 * ne1 * ne2;
        std::vector<float> f((size_t) n);
        for (float & v : f) v = std::isnan(fill) ? rnd() : fill;
        if (type == GGML_TYPE_F32) memcpy(t->data, f.data(), f.size() * sizeof(float));
        else if (type == GGML_TYPE_F16) for (int64_t i = 0; i < n; i++) ((ggml_fp16_t *) t->data)[i] = ggml_fp32_to_fp16(f[i]);
        else ggml_quantize_chunk(type, f.data(), t->data, 0, ne1 * ne2, ne0, nullptr);
        gguf_add_tensor(g, t);
    }
    void strs(const char * key, const std::vector<std::string> & v) {
        std::vector<const char *> p;
        for (const std::string & s : v) p.push_back(s.c_str());
        gguf_set_arr_str(g, key, p.data(), p.size());
    }
    bool write(const std::string & path) {
        const bool ok = gguf_write_to_file(g, path.c_str(), false);
        if (!ok) fprintf(stderr, "cannot write %s\n", path.c_str());
        return ok;
    }
};

struct vocab_spec {
    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<int32_t> types;
};

void spm_vocab(builder & b, vocab_spec & v) {
    v.tokens = { "<unk>", "<s>", "</s>", "<0x0A>", "<0x20>", "<0xC3>", "<0xA9>", "\xe2\x96\x81", "a", "b", "ab",
                 "\xe2\x96\x81" "a", "\xe2\x96\x81" "ab", "t", "h", "e", "\xe2\x96\x81" "the", "<|im_start|>", "<|im_end|>", "\xc3\xa9" };
    v.types = { 2, 3, 3, 6, 6, 6, 6, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 3, 1 };
    for (size_t i = 0; i < v.tokens.size(); i++) v.scores.push_back(-(float) i);
    gguf_set_val_str(b.g, "tokenizer.ggml.model", "llama");
    b.strs("tokenizer.ggml.tokens", v.tokens);
    gguf_set_arr_data(b.g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, v.scores.data(), v.scores.size());
    gguf_set_arr_data(b.g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, v.types.data(), v.types.size());
    gguf_set_val_u32(b.g, "tokenizer.ggml.bos_token_id", 1);
    gguf_set_val_u32(b.g, "tokenizer.ggml.eos_token_id", 2);
    gguf_set_val_u32(b.g, "tokenizer.ggml.unknown_token_id", 0);
    gguf_set_val_bool(b.g, "tokenizer.ggml.add_bos_token", true);
    gguf_set_val_str(b.g, "tokenizer.chat_template",
                     "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}");
}

void bpe_vocab(builder & b, vocab_spec & v, const char * pre) {
    // Byte-level characters: printable ASCII as is, space U+0120, newline U+010A, 0xC3 U+00C3, 0xA9 U+00A9.
    v.tokens = { "<|endoftext|>", "a", "b", "c", "\xc4\xa0", "\xc4\x8a", "ab", "\xc4\xa0" "a", "\xc4\xa0" "ab", "abc",
                 "<|im_start|>", "<|im_end|>", "\xc3\x83", "\xc2\xa9", "\xc3\x83\xc2\xa9", "1", "2", "12" };
    v.types = { 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1 };
    gguf_set_val_str(b.g, "tokenizer.ggml.model", "gpt2");
    gguf_set_val_str(b.g, "tokenizer.ggml.pre", pre);
    b.strs("tokenizer.ggml.tokens", v.tokens);
    gguf_set_arr_data(b.g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, v.types.data(), v.types.size());
    b.strs("tokenizer.ggml.merges", { "a b", "\xc4\xa0 a", "\xc4\xa0" "a b", "ab c", "\xc3\x83 \xc2\xa9", "1 2" });
    gguf_set_val_u32(b.g, "tokenizer.ggml.eos_token_id", 0);
    gguf_set_val_u32(b.g, "tokenizer.ggml.bos_token_id", 0);
    gguf_set_val_bool(b.g, "tokenizer.ggml.add_bos_token", false);
    gguf_set_val_str(b.g, "tokenizer.chat_template", "{{ '<|im_start|>' + message['role'] }}");
}

// Hyper-parameters and weights of a model of the architecture table's family `arch`: its
// required tensors (biases too when asked), by the table's names and shapes. head_k: explicit
// head size (0: n_embd / n_head).
// A mixture of experts: n_expert experts (n_used per token) of FFN size n_ff_exp, and a shared
// expert of n_ff_shexp (0: none).
struct moe_spec {
    uint32_t n_expert = 0, n_used = 0, n_ff_exp = 0, n_ff_shexp = 0;
};

void weights(builder & b, const char * arch, uint32_t n_layer, int64_t n_embd, uint32_t n_head, uint32_t n_head_kv,
             int64_t n_ff, int64_t n_vocab, ggml_type mat, bool tied, bool biases, uint32_t head_k = 0,
             const moe_spec & moe = moe_spec()) {
    const std::string a = arch;
    gguf_set_val_str(b.g, "general.architecture", arch);
    gguf_set_val_str(b.g, "general.name", "tiny");
    gguf_set_val_u32(b.g, (a + ".context_length").c_str(), 32);
    gguf_set_val_u32(b.g, (a + ".embedding_length").c_str(), (uint32_t) n_embd);
    gguf_set_val_u32(b.g, (a + ".block_count").c_str(), n_layer);
    gguf_set_val_u32(b.g, (a + ".feed_forward_length").c_str(), (uint32_t) n_ff);
    gguf_set_val_u32(b.g, (a + ".attention.head_count").c_str(), n_head);
    gguf_set_val_u32(b.g, (a + ".attention.head_count_kv").c_str(), n_head_kv);
    gguf_set_val_f32(b.g, (a + ".attention.layer_norm_rms_epsilon").c_str(), 1e-5f);
    gguf_set_val_f32(b.g, (a + ".rope.freq_base").c_str(), 10000.0f);
    llama_hparams hp;
    hp.n_embd = (uint32_t) n_embd;
    hp.n_layer = n_layer;
    hp.n_head = n_head;
    hp.n_head_kv = n_head_kv;
    hp.n_ff = (uint32_t) n_ff;
    hp.n_vocab = (uint32_t) n_vocab;
    hp.n_embd_head_k = hp.n_embd_head_v = head_k ? head_k : (uint32_t) (n_embd / n_head);
    hp.n_rot = hp.n_embd_head_k;
    gguf_set_val_u32(b.g, (a + ".rope.dimension_count").c_str(), hp.n_rot);
    if (moe.n_expert) {
        hp.n_expert = moe.n_expert;
        hp.n_expert_used = moe.n_used;
        hp.n_ff_exp = moe.n_ff_exp ? moe.n_ff_exp : hp.n_ff;
        hp.n_ff_shexp = moe.n_ff_shexp;
        gguf_set_val_u32(b.g, (a + ".expert_count").c_str(), moe.n_expert);
        gguf_set_val_u32(b.g, (a + ".expert_used_count").c_str(), moe.n_used);
        if (moe.n_ff_exp) gguf_set_val_u32(b.g, (a + ".expert_feed_forward_length").c_str(), moe.n_ff_exp);
        if (moe.n_ff_shexp) gguf_set_val_u32(b.g, (a + ".expert_shared_feed_forward_length").c_str(), moe.n_ff_shexp);
    }
    if (head_k) {
        gguf_set_val_u32(b.g, (a + ".attention.key_length").c_str(), head_k);
        gguf_set_val_u32(b.g, (a + ".attention.value_length").c_str(), head_k);
    }
    const llm_arch_info & info = llm_arch_get(llm_arch_from_name(arch));
    auto add = [&](const llm_arch_tensor & at, int il) {
        const llm_tensor_info & ti = llm_tensor_get(at.id);
        const bool vec = ti.use == llm_tensor_use::vector, norm = strstr(ti.name, "norm") != nullptr;
        b.tensor(llm_tensor_name(at.id, il), vec ? GGML_TYPE_F32 : mat, llm_dim_size(ti.ne[0], hp), llm_dim_size(ti.ne[1], hp),
                 norm ? 1.0f : NAN, llm_dim_size(ti.ne[2], hp));
    };
    for (const llm_arch_tensor & at : info.tensors) {
        if (llm_tensor_get(at.id).layer_field) continue;
        if (at.required(hp) || (at.id == LLM_TENSOR_OUTPUT && !tied)) add(at, -1);
    }
    for (uint32_t il = 0; il < n_layer; il++) {
        for (const llm_arch_tensor & at : info.tensors) {
            if (!llm_tensor_get(at.id).layer_field) continue;
            if (at.required(hp) || (biases && strstr(llm_tensor_get(at.id).name, ".bias"))) add(at, (int) il);
        }
    }
}

}  // namespace

int main(int argc, char ** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
        return 2;
    }
    const std::string dir = argv[1];
    bool ok = true;
    {
        builder b;
        vocab_spec v;
        spm_vocab(b, v);
        weights(b, "llama", 1, 8, 2, 1, 16, (int64_t) v.tokens.size(), GGML_TYPE_F16, true, false);
        gguf_set_val_u32(b.g, "general.file_type", 1);
        ok = b.write(dir + "/tiny-llama-spm.gguf") && ok;
    }
    {
        builder b;
        vocab_spec v;
        bpe_vocab(b, v, "qwen2");
        weights(b, "qwen2", 1, 8, 2, 2, 8, (int64_t) v.tokens.size(), GGML_TYPE_F32, false, true);
        gguf_set_val_str(b.g, "qwen2.rope.scaling.type", "yarn");
        gguf_set_val_f32(b.g, "qwen2.rope.scaling.factor", 2.0f);
        ok = b.write(dir + "/tiny-qwen2-bpe.gguf") && ok;
    }
    {
        builder b;
        vocab_spec v;
        spm_vocab(b, v);
        weights(b, "llama", 1, 32, 4, 1, 32, (int64_t) v.tokens.size(), GGML_TYPE_Q4_0, false, false);
        ok = b.write(dir + "/tiny-llama-q4_0.gguf") && ok;
    }
    {
        builder b;
        vocab_spec v;
        spm_vocab(b, v);
        weights(b, "qwen3", 1, 8, 2, 1, 16, (int64_t) v.tokens.size(), GGML_TYPE_F32, true, false, 6);
        ok = b.write(dir + "/tiny-qwen3.gguf") && ok;
    }
    {
        builder b;
        vocab_spec v;
        spm_vocab(b, v);
        weights(b, "gemma2", 2, 8, 2, 1, 16, (int64_t) v.tokens.size(), GGML_TYPE_F16, true, false, 4);
        gguf_set_val_u32(b.g, "gemma2.attention.sliding_window", 3);
        gguf_set_val_f32(b.g, "gemma2.attn_logit_softcapping", 5.0f);
        gguf_set_val_f32(b.g, "gemma2.final_logit_softcapping", 3.0f);
        ok = b.write(dir + "/tiny-gemma2.gguf") && ok;
    }
    {
        builder b;
        vocab_spec v;
        spm_vocab(b, v);
        weights(b, "gemma3", 2, 8, 2, 2, 16, (int64_t) v.tokens.size(), GGML_TYPE_F32, true, false);
        gguf_set_val_u32(b.g, "gemma3.attention.sliding_window", 3);
        gguf_set_val_str(b.g, "gemma3.rope.scaling.type", "linear");
        gguf_set_val_f32(b.g, "gemma3.rope.scaling.factor", 4.0f);
        ok = b.write(dir + "/tiny-gemma3.gguf") && ok;
    }
    {
        builder b;
        vocab_spec v;
        spm_vocab(b, v);
        weights(b, "phi3", 1, 8, 2, 2, 16, (int64_t) v.tokens.size(), GGML_TYPE_F32, false, false);
        gguf_set_val_u32(b.g, "phi3.attention.sliding_window", 4);
        gguf_set_val_u32(b.g, "phi3.rope.scaling.original_context_length", 8);
        gguf_set_val_f32(b.g, "phi3.rope.scaling.attn_factor", 1.2f);
        b.tensor("rope_factors_long.weight", GGML_TYPE_F32, 2, 1, 2.0f);
        b.tensor("rope_factors_short.weight", GGML_TYPE_F32, 2, 1, 1.0f);
        ok = b.write(dir + "/tiny-phi3.gguf") && ok;
    }
    {
        builder b;  // Mixtral-style: 4 experts, 2 per token, in the llama architecture
        vocab_spec v;
        spm_vocab(b, v);
        moe_spec moe;
        moe.n_expert = 4;
        moe.n_used = 2;
        weights(b, "llama", 1, 8, 2, 1, 16, (int64_t) v.tokens.size(), GGML_TYPE_F32, true, false, 0, moe);
        ok = b.write(dir + "/tiny-mixtral.gguf") && ok;
    }
    {
        builder b;  // experts of their own FFN size and a gated shared expert
        vocab_spec v;
        bpe_vocab(b, v, "qwen2");
        moe_spec moe;
        moe.n_expert = 4;
        moe.n_used = 2;
        moe.n_ff_exp = 8;
        moe.n_ff_shexp = 16;
        weights(b, "qwen2moe", 1, 8, 2, 2, 16, (int64_t) v.tokens.size(), GGML_TYPE_F32, false, true, 0, moe);
        ok = b.write(dir + "/tiny-qwen2moe.gguf") && ok;
    }
    {
        builder b;
        vocab_spec v;
        bpe_vocab(b, v, "llama-bpe");
        gguf_set_val_str(b.g, "general.architecture", "gpt2");
        ok = b.write(dir + "/tiny-vocab-only.gguf") && ok;
    }
    {
        builder b;
        gguf_set_val_u32(b.g, "general.alignment", 16);
        gguf_set_val_u8(b.g, "u8", 1);
        gguf_set_val_i8(b.g, "i8", -1);
        gguf_set_val_u16(b.g, "u16", 2);
        gguf_set_val_i16(b.g, "i16", -2);
        gguf_set_val_i32(b.g, "i32", -3);
        gguf_set_val_f32(b.g, "f32", 0.5f);
        gguf_set_val_bool(b.g, "bool", true);
        gguf_set_val_str(b.g, "str", "text");
        gguf_set_val_u64(b.g, "u64", 4);
        gguf_set_val_i64(b.g, "i64", -4);
        gguf_set_val_f64(b.g, "f64", 0.25);
        const uint8_t u8s[3] = { 1, 2, 3 };
        const double f64s[2] = { 1.0, 2.0 };
        gguf_set_arr_data(b.g, "arr.u8", GGUF_TYPE_UINT8, u8s, 3);
        gguf_set_arr_data(b.g, "arr.f64", GGUF_TYPE_FLOAT64, f64s, 2);
        b.strs("arr.str", { "x", "", "yz" });
        b.tensor("a", GGML_TYPE_F32, 4, 2);
        b.tensor("b", GGML_TYPE_F16, 3);
        ggml_tensor * q = ggml_new_tensor_1d(b.ctx, GGML_TYPE_Q8_0, 32);
        memset(q->data, 0, ggml_nbytes(q));
        ggml_set_name(q, "q8");
        gguf_add_tensor(b.g, q);
        ok = b.write(dir + "/all-types.gguf") && ok;
    }
    return ok ? 0 : 1;
}
