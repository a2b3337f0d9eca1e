// llama-model.cpp - loading a GGUF model: metadata -> hyper-parameters, tensor infos -> weights
// (checked by name, shape and type), the tokenizer, and the llama_model_* accessors.
#include "llama-model.h"
#include "llama-impl.h"

#include "ggml-backend.h"
#include "ggml.h"
#include "gguf.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <set>
#include <vector>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

std::string format(const char * fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char * fmt, ...) {
    va_list args;
    va_start(args, fmt);
    va_list copy;
    va_copy(copy, args);
    const int n = vsnprintf(nullptr, 0, fmt, args);
    va_end(args);
    std::string s(n > 0 ? (size_t) n : 0, '\0');
    if (n > 0) vsnprintf(&s[0], (size_t) n + 1, fmt, copy);
    va_end(copy);
    return s;
}

// ---- metadata readers ----------------------------------------------------------------------
// Integer keys are written as u32 by the converters, but any integer type is accepted.
enum class KeyResult { absent, ok, bad };

KeyResult get_key_u64(const gguf_context * g, const std::string & key, uint64_t & out, std::string & err) {
    const int64_t id = gguf_find_key(g, key.c_str());
    if (id < 0) return KeyResult::absent;
    int64_t v = 0;
    switch (gguf_get_kv_type(g, id)) {
        case GGUF_TYPE_UINT8:  v = gguf_get_val_u8(g, id); break;
        case GGUF_TYPE_INT8:   v = gguf_get_val_i8(g, id); break;
        case GGUF_TYPE_UINT16: v = gguf_get_val_u16(g, id); break;
        case GGUF_TYPE_INT16:  v = gguf_get_val_i16(g, id); break;
        case GGUF_TYPE_UINT32: v = gguf_get_val_u32(g, id); break;
        case GGUF_TYPE_INT32:  v = gguf_get_val_i32(g, id); break;
        case GGUF_TYPE_UINT64: {
            const uint64_t u = gguf_get_val_u64(g, id);
            v = u > (uint64_t) INT64_MAX ? -1 : (int64_t) u;
            break;
        }
        case GGUF_TYPE_INT64:  v = gguf_get_val_i64(g, id); break;
        default:
            err = format("key %s has type %s, expected an integer", key.c_str(), gguf_type_name(gguf_get_kv_type(g, id)));
            return KeyResult::bad;
    }
    if (v < 0) {
        err = format("key %s has a negative value (%" PRId64 ")", key.c_str(), v);
        return KeyResult::bad;
    }
    out = (uint64_t) v;
    return KeyResult::ok;
}

KeyResult get_key_f32(const gguf_context * g, const std::string & key, float & out, std::string & err) {
    const int64_t id = gguf_find_key(g, key.c_str());
    if (id < 0) return KeyResult::absent;
    switch (gguf_get_kv_type(g, id)) {
        case GGUF_TYPE_FLOAT32: out = gguf_get_val_f32(g, id); break;
        case GGUF_TYPE_FLOAT64: out = (float) gguf_get_val_f64(g, id); break;
        default:
            err = format("key %s has type %s, expected a float", key.c_str(), gguf_type_name(gguf_get_kv_type(g, id)));
            return KeyResult::bad;
    }
    if (!std::isfinite(out)) {
        err = format("key %s is not a finite number", key.c_str());
        return KeyResult::bad;
    }
    return KeyResult::ok;
}

KeyResult get_key_str(const gguf_context * g, const std::string & key, std::string & out, std::string & err) {
    const int64_t id = gguf_find_key(g, key.c_str());
    if (id < 0) return KeyResult::absent;
    if (gguf_get_kv_type(g, id) != GGUF_TYPE_STRING) {
        err = format("key %s has type %s, expected a string", key.c_str(), gguf_type_name(gguf_get_kv_type(g, id)));
        return KeyResult::bad;
    }
    out = gguf_get_val_str(g, id);
    return KeyResult::ok;
}

KeyResult get_key_bool(const gguf_context * g, const std::string & key, bool & out, std::string & err) {
    const int64_t id = gguf_find_key(g, key.c_str());
    if (id < 0) return KeyResult::absent;
    if (gguf_get_kv_type(g, id) != GGUF_TYPE_BOOL) {
        err = format("key %s has type %s, expected a bool", key.c_str(), gguf_type_name(gguf_get_kv_type(g, id)));
        return KeyResult::bad;
    }
    out = gguf_get_val_bool(g, id);
    return KeyResult::ok;
}

// A required (or defaulted) hyper-parameter with an upper bound that keeps every later size
// computation far from overflow.
bool read_u32(const gguf_context * g, const std::string & key, uint32_t & out, bool required, uint64_t max,
              std::string & err) {
    uint64_t v = 0;
    switch (get_key_u64(g, key, v, err)) {
        case KeyResult::bad: return false;
        case KeyResult::absent:
            if (required) {
                err = format("missing hyper-parameter %s", key.c_str());
                return false;
            }
            return true;  // keep the default in out
        case KeyResult::ok: break;
    }
    if (v > max) {
        err = format("hyper-parameter %s = %" PRIu64 " is out of range (at most %" PRIu64 ")", key.c_str(), v, max);
        return false;
    }
    out = (uint32_t) v;
    return true;
}

bool read_f32(const gguf_context * g, const std::string & key, float & out, std::string & err) {
    return get_key_f32(g, key, out, err) != KeyResult::bad;
}

// ---- hyper-parameters ----------------------------------------------------------------------
// What sets a family apart beyond the shared keys: sliding windows, soft-caps, scales.
bool load_family_hparams(llama_model & model, std::string & err) {
    const gguf_context * g = model.meta;
    llama_hparams & hp = model.hparams;
    const std::string a = model.arch_name + ".";
    hp.swa_layers.assign(hp.n_layer, 0);
    auto window = [&](uint32_t def) {
        hp.n_swa = def;
        return read_u32(g, a + "attention.sliding_window", hp.n_swa, false, 1u << 24, err);
    };
    switch (model.arch) {
        case LLM_ARCH_GEMMA2:
            // Even layers see a window of 4096 (Gemma 2's default), odd ones everything.
            if (!window(4096)) return false;
            for (uint32_t il = 0; il < hp.n_layer; il++) hp.swa_layers[il] = il % 2 == 0;
            hp.f_attn_logit_softcapping = 50.0f;
            hp.f_final_logit_softcapping = 30.0f;
            if (!read_f32(g, a + "attn_logit_softcapping", hp.f_attn_logit_softcapping, err)) return false;
            if (!read_f32(g, a + "final_logit_softcapping", hp.f_final_logit_softcapping, err)) return false;
            hp.embd_scale = sqrtf((float) hp.n_embd);
            // Queries scale by query_pre_attn_scalar^-1/2: the head size in the 2B and 9B models,
            // n_embd / n_head in the 27B one (46 layers), as llama.cpp decides it.
            hp.f_attention_scale = 1.0f / sqrtf((float) (hp.n_layer == 46 ? hp.n_embd / hp.n_head : hp.n_embd_head_k));
            break;
        case LLM_ARCH_GEMMA3:
            // Five sliding-window layers, then a global one; the local layers rotate with base 10000.
            if (!window(4096)) return false;
            for (uint32_t il = 0; il < hp.n_layer; il++) hp.swa_layers[il] = (il + 1) % 6 != 0;
            hp.rope_freq_base_swa = 10000.0f;
            hp.embd_scale = sqrtf((float) hp.n_embd);
            // query_pre_attn_scalar: the head size, but n_embd / n_head in the 27B model (62 layers).
            hp.f_attention_scale = 1.0f / sqrtf((float) (hp.n_layer == 62 ? hp.n_embd / hp.n_head : hp.n_embd_head_k));
            break;
        case LLM_ARCH_PHI3:
            // Phi-3 windows every layer when the file says so (Phi-4: no window).
            if (!window(0)) return false;
            for (uint32_t il = 0; il < hp.n_layer; il++) hp.swa_layers[il] = 1;
            if (hp.n_embd_head_k != hp.n_embd_head_v) {
                err = "phi3: the key and value head sizes must be equal";
                return false;
            }
            break;
        default:
            break;
    }
    if (hp.f_attn_logit_softcapping < 0.0f || hp.f_final_logit_softcapping < 0.0f) {
        err = format("%sattn_logit_softcapping / final_logit_softcapping must not be negative", a.c_str());
        return false;
    }
    return true;
}

bool load_hparams(llama_model & model, std::string & err) {
    const gguf_context * g = model.meta;
    llama_hparams & hp = model.hparams;
    const std::string a = model.arch_name + ".";

    if (!read_u32(g, a + "embedding_length", hp.n_embd, true, 1u << 20, err)) return false;
    if (!read_u32(g, a + "block_count", hp.n_layer, true, 4096, err)) return false;
    if (!read_u32(g, a + "attention.head_count", hp.n_head, true, 1u << 14, err)) return false;
    if (!read_u32(g, a + "feed_forward_length", hp.n_ff, true, 1u << 22, err)) return false;
    hp.n_head_kv = hp.n_head;
    if (!read_u32(g, a + "attention.head_count_kv", hp.n_head_kv, false, 1u << 14, err)) return false;

    if (hp.n_embd == 0 || hp.n_layer == 0 || hp.n_head == 0 || hp.n_head_kv == 0 || hp.n_ff == 0) {
        err = "hyper-parameters must be positive (embedding_length, block_count, head_count, head_count_kv, feed_forward_length)";
        return false;
    }
    if (hp.n_head % hp.n_head_kv != 0) {
        err = format("head_count %u is not a multiple of head_count_kv %u", hp.n_head, hp.n_head_kv);
        return false;
    }
    // Head sizes: explicit (Gemma, Qwen3) or n_embd / n_head.
    hp.n_embd_head_k = hp.n_embd_head_v = 0;
    if (!read_u32(g, a + "attention.key_length", hp.n_embd_head_k, false, 1u << 14, err)) return false;
    if (!read_u32(g, a + "attention.value_length", hp.n_embd_head_v, false, 1u << 14, err)) return false;
    if ((hp.n_embd_head_k == 0 || hp.n_embd_head_v == 0) && hp.n_embd % hp.n_head != 0) {
        err = format("embedding_length %u is not a multiple of head_count %u (and %sattention.key_length / value_length "
                     "are not given)", hp.n_embd, hp.n_head, a.c_str());
        return false;
    }
    if (hp.n_embd_head_k == 0) hp.n_embd_head_k = hp.n_embd / hp.n_head;
    if (hp.n_embd_head_v == 0) hp.n_embd_head_v = hp.n_embd / hp.n_head;

    hp.n_ctx_train = 0;
    if (!read_u32(g, a + "context_length", hp.n_ctx_train, false, 1u << 24, err)) return false;
    if (hp.n_ctx_train == 0) {
        hp.n_ctx_train = 2048;
        LLAMA_LOG_WARN("llama_model_load: %scontext_length missing, assuming %u\n", a.c_str(), hp.n_ctx_train);
    }

    const bool encoder = llm_arch_get(model.arch).encoder;
    hp.f_norm_rms_eps = encoder ? 1e-5f : -1.0f;  // (encoders' norms are LayerNorms: below)
    if (!read_f32(g, a + "attention.layer_norm_rms_epsilon", hp.f_norm_rms_eps, err)) return false;
    if (hp.f_norm_rms_eps < 0.0f) {
        hp.f_norm_rms_eps = 1e-5f;
        LLAMA_LOG_WARN("llama_model_load: %sattention.layer_norm_rms_epsilon missing, assuming %g\n", a.c_str(),
                       hp.f_norm_rms_eps);
    }

    hp.n_rot = hp.n_embd_head_k;
    if (!read_u32(g, a + "rope.dimension_count", hp.n_rot, false, 1u << 14, err)) return false;
    if (hp.n_rot == 0 || hp.n_rot % 2 != 0 || hp.n_rot > hp.n_embd_head_k) {
        err = format("rope.dimension_count %u must be even, positive and at most the head size %u", hp.n_rot,
                     hp.n_embd_head_k);
        return false;
    }

    if (!read_f32(g, a + "rope.freq_base", hp.rope_freq_base, err)) return false;
    if (hp.rope_freq_base <= 0.0f) {
        err = format("rope.freq_base %g must be positive", hp.rope_freq_base);
        return false;
    }

    // As llama.cpp reads it: the type is linear unless the file says otherwise; a factor of 0 (or
    // none) scales by 1. The context may choose another type and scale.
    std::string scaling = "linear";
    if (get_key_str(g, a + "rope.scaling.type", scaling, err) == KeyResult::bad) return false;
    float factor = 0.0f;
    if (!read_f32(g, a + "rope.scale_linear", factor, err)) return false;
    if (factor == 0.0f && !read_f32(g, a + "rope.scaling.factor", factor, err)) return false;
    if (scaling == "none") {
        hp.rope_scaling = LLAMA_ROPE_SCALING_TYPE_NONE;
    } else if (scaling == "linear" || scaling == "yarn" || scaling == "longrope") {
        if (factor != 0.0f && factor < 1.0f) {
            err = format("rope.scaling.factor %g must be at least 1", factor);
            return false;
        }
        hp.rope_freq_scale = factor == 0.0f ? 1.0f : 1.0f / factor;
        hp.rope_scaling = scaling == "linear" ? LLAMA_ROPE_SCALING_TYPE_LINEAR
                          : scaling == "yarn" ? LLAMA_ROPE_SCALING_TYPE_YARN
                                              : LLAMA_ROPE_SCALING_TYPE_LONGROPE;
    } else {
        err = format("unsupported rope.scaling.type '%s' (supported: none, linear, yarn, longrope)", scaling.c_str());
        return false;
    }
    hp.rope_n_ctx_orig = hp.n_ctx_train;
    if (!read_u32(g, a + "rope.scaling.original_context_length", hp.rope_n_ctx_orig, false, 1u << 24, err)) return false;
    if (hp.rope_scaling == LLAMA_ROPE_SCALING_TYPE_YARN) hp.rope_yarn_ext_factor = 1.0f;
    if (!read_f32(g, a + "rope.scaling.attn_factor", hp.rope_attn_factor, err)) return false;
    if (!(hp.rope_attn_factor > 0.0f)) {
        err = format("rope.scaling.attn_factor %g must be positive", hp.rope_attn_factor);
        return false;
    }

    // Mixture of experts.
    if (!read_u32(g, a + "expert_count", hp.n_expert, false, 4096, err)) return false;
    if (!read_u32(g, a + "expert_used_count", hp.n_expert_used, false, 4096, err)) return false;
    // (Qwen2-MoE files without the key: n_ff / n_expert_used, as llama.cpp reads them.)
    hp.n_ff_exp = hp.n_ff_shexp = hp.n_ff;
    if (model.arch == LLM_ARCH_QWEN2MOE && hp.n_expert_used > 0) hp.n_ff_exp = hp.n_ff / hp.n_expert_used;
    if (!read_u32(g, a + "expert_feed_forward_length", hp.n_ff_exp, false, 1u << 22, err)) return false;
    if (!read_u32(g, a + "expert_shared_feed_forward_length", hp.n_ff_shexp, false, 1u << 22, err)) return false;
    const bool moe_family = model.arch == LLM_ARCH_QWEN2MOE || model.arch == LLM_ARCH_QWEN3MOE;
    if (moe_family && hp.n_expert == 0) {
        err = format("%sexpert_count is missing or 0: %s is a mixture of experts", a.c_str(), model.arch_name.c_str());
        return false;
    }
    if (hp.n_expert > 0 && (hp.n_expert_used == 0 || hp.n_expert_used > hp.n_expert)) {
        err = format("%sexpert_used_count %u must be in [1, expert_count %u]", a.c_str(), hp.n_expert_used, hp.n_expert);
        return false;
    }
    if (hp.n_expert > 0 && (hp.n_ff_exp == 0 || hp.n_ff_shexp == 0)) {
        err = format("%sexpert_feed_forward_length must be positive", a.c_str());
        return false;
    }
    // Qwen2-MoE weighs the chosen experts by their softmax probabilities as they are; Mixtral
    // and Qwen3-MoE renormalise them to sum 1.
    hp.expert_weights_norm = model.arch != LLM_ARCH_QWEN2MOE;

    hp.rope_type = llm_arch_get(model.arch).rope_type;
    if (!load_family_hparams(model, err)) return false;

    uint32_t pooling = LLAMA_POOLING_TYPE_NONE;
    if (!read_u32(g, a + "pooling_type", pooling, false, 16, err)) return false;
    if (pooling > LLAMA_POOLING_TYPE_LAST) {
        err = format("unsupported pooling_type %u (supported: 0 none, 1 mean, 2 cls, 3 last)", pooling);
        return false;
    }
    hp.pooling_type = (enum llama_pooling_type) pooling;
    hp.causal_attn = !encoder;
    if (get_key_bool(g, a + "attention.causal", hp.causal_attn, err) == KeyResult::bad) return false;
    if (encoder) {
        // LayerNorm's epsilon is required (as llama.cpp reads it); the token types default to
        // BERT's two segments.
        hp.f_norm_eps = -1.0f;
        if (!read_f32(g, a + "attention.layer_norm_epsilon", hp.f_norm_eps, err)) return false;
        if (!(hp.f_norm_eps >= 0.0f)) {
            err = format("missing or negative hyper-parameter %sattention.layer_norm_epsilon", a.c_str());
            return false;
        }
        hp.n_token_types = 2;
        if (!read_u32(g, "tokenizer.ggml.token_type_count", hp.n_token_types, false, 1u << 16, err)) return false;
        if (hp.n_token_types == 0) {
            err = "tokenizer.ggml.token_type_count must be positive";
            return false;
        }
    }
    return true;
}

// ---- tensors -------------------------------------------------------------------------------
// Whether some device (the CPU is always one) runs op (MUL_MAT by a batch of F32 columns, or
// GET_ROWS) on a weight of w's type and shape: the backends answer from their kernels and the
// type table, so the loader keeps no list of types.
static bool weight_op_supported(const ggml_tensor * w, ggml_op op) {
    ggml_init_params ip = { 4 * ggml_tensor_overhead(), nullptr, true };
    ggml_context * ctx = ggml_init(ip);
    if (!ctx) return false;
    ggml_tensor * a = ggml_new_tensor(ctx, w->type, GGML_MAX_DIMS, w->ne);
    ggml_tensor * node = op == GGML_OP_MUL_MAT
                             ? ggml_mul_mat(ctx, a, ggml_new_tensor_4d(ctx, GGML_TYPE_F32, w->ne[0], 1, w->ne[2], w->ne[3]))
                             : ggml_get_rows(ctx, a, ggml_new_tensor_3d(ctx, GGML_TYPE_I32, 1, w->ne[2], w->ne[3]));
    bool ok = false;
    for (size_t i = 0; i < ggml_backend_dev_count() && !ok; i++) ok = ggml_backend_dev_supports_op(ggml_backend_dev_get(i), node);
    ggml_free(ctx);
    return ok;
}

struct TensorLoader {
    llama_model & model;
    std::string & err;
    std::set<std::string> used;

    // The tensor named `name` with shape ne (n_dims entries), or nullptr: absent (err empty when
    // optional) or wrong (err set).
    ggml_tensor * get(const std::string & name, std::initializer_list<int64_t> ne, llm_tensor_use use, bool required) {
        ggml_tensor * t = ggml_get_tensor(model.ctx_w, name.c_str());
        if (!t) {
            if (required) err = format("missing tensor '%s'", name.c_str());
            return nullptr;
        }
        int64_t want[GGML_MAX_DIMS] = { 1, 1, 1, 1 };
        int i = 0;
        for (int64_t v : ne) want[i++] = v;
        bool same = true;
        for (int d = 0; d < GGML_MAX_DIMS; d++) same = same && t->ne[d] == want[d];
        if (!same) {
            err = format("tensor '%s' has the wrong shape: [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                         "], expected [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]",
                         name.c_str(), t->ne[0], t->ne[1], t->ne[2], t->ne[3], want[0], want[1], want[2], want[3]);
            return nullptr;
        }
        const ggml_type type = t->type;
        bool type_ok = false;
        switch (use) {
            case llm_tensor_use::matrix: type_ok = weight_op_supported(t, GGML_OP_MUL_MAT); break;
            case llm_tensor_use::embedding: type_ok = weight_op_supported(t, GGML_OP_GET_ROWS); break;
            case llm_tensor_use::vector: type_ok = type == GGML_TYPE_F32; break;
        }
        if (!type_ok) {
            const char * tn = ggml_type_name(type);
            err = format("tensor '%s' has type %s, which is not supported %s", name.c_str(), tn ? tn : "?",
                         use == llm_tensor_use::vector ? "(norms and biases must be f32)" : "for this use");
            return nullptr;
        }
        used.insert(name);
        return t;
    }
};

bool load_tensors(llama_model & model, std::string & err) {
    llama_hparams & hp = model.hparams;
    TensorLoader ld{model, err, {}};

    // n_vocab comes from the embedding matrix; <arch>.vocab_size, when present, must agree.
    ggml_tensor * te = model.ctx_w ? ggml_get_tensor(model.ctx_w, "token_embd.weight") : nullptr;
    if (!te) {
        err = "missing tensor 'token_embd.weight'";
        return false;
    }
    if (te->ne[1] <= 0 || te->ne[1] > INT32_MAX) {
        err = "tensor 'token_embd.weight' has an invalid number of rows";
        return false;
    }
    uint32_t n_vocab_key = 0;
    if (!read_u32(model.meta, model.arch_name + ".vocab_size", n_vocab_key, false, INT32_MAX, err)) return false;
    hp.n_vocab = (uint32_t) te->ne[1];
    if (n_vocab_key != 0 && n_vocab_key != hp.n_vocab) {
        err = format("%s.vocab_size is %u but token_embd.weight has %u rows", model.arch_name.c_str(), n_vocab_key,
                     hp.n_vocab);
        return false;
    }

    // The architecture's tensors, by the table: global ones once, per-layer ones for each layer.
    const llm_arch_info & arch = llm_arch_get(model.arch);
    auto load = [&](const llm_arch_tensor & at, int il) -> ggml_tensor * {
        const llm_tensor_info & ti = llm_tensor_get(at.id);
        return ld.get(llm_tensor_name(at.id, il), { llm_dim_size(ti.ne[0], hp), llm_dim_size(ti.ne[1], hp), llm_dim_size(ti.ne[2], hp) },
                      ti.use, at.required(hp));
    };
    for (const llm_arch_tensor & at : arch.tensors) {
        const llm_tensor_info & ti = llm_tensor_get(at.id);
        if (ti.layer_field) continue;
        model.*ti.model_field = load(at, -1);
        if (!err.empty()) return false;
    }
    model.layers.assign(hp.n_layer, llama_layer());
    for (uint32_t il = 0; il < hp.n_layer; il++) {
        for (const llm_arch_tensor & at : arch.tensors) {
            const llm_tensor_info & ti = llm_tensor_get(at.id);
            if (!ti.layer_field) continue;
            model.layers[il].*ti.layer_field = load(at, (int) il);
            if (!err.empty()) return false;
        }
    }
    if (!model.output && !arch.encoder) {
        // Tied embeddings: the output projection is the embedding matrix.
        if (!weight_op_supported(model.tok_embd, GGML_OP_MUL_MAT)) {
            err = format("token_embd.weight (used as the output projection) has unsupported type %s",
                         ggml_type_name(model.tok_embd->type));
            return false;
        }
        model.output = model.tok_embd;
    }

    model.n_params = 0;
    model.n_bytes = 0;
    int n_unused = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(model.ctx_w); t; t = ggml_get_next_tensor(model.ctx_w, t)) {
        model.n_params += (uint64_t) ggml_nelements(t);
        model.n_bytes += ggml_nbytes(t);
        if (!ld.used.count(t->name)) {
            if (n_unused++ < 8) LLAMA_LOG_WARN("llama_model_load: tensor '%s' is not used\n", t->name);
        }
    }
    if (n_unused > 8) LLAMA_LOG_WARN("llama_model_load: %d tensors are not used\n", n_unused);

    // Without general.file_type the description names the most common matrix type.
    int counts[GGML_TYPE_COUNT] = {};
    for (ggml_tensor * t = ggml_get_first_tensor(model.ctx_w); t; t = ggml_get_next_tensor(model.ctx_w, t)) {
        if (ggml_n_dims(t) >= 2 && t->type >= 0 && t->type < GGML_TYPE_COUNT) counts[t->type]++;
    }
    const int best = (int) (std::max_element(counts, counts + GGML_TYPE_COUNT) - counts);
    if (counts[best] > 0) {
        model.ftype_guess = ggml_type_name((ggml_type) best);
        for (char & c : model.ftype_guess) c = (char) toupper((unsigned char) c);
    }
    return true;
}

bool is_integer_type(enum gguf_type t) {
    switch (t) {
        case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16:
        case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64:
            return true;
        default:
            return false;
    }
}

// llama_model_params.kv_overrides: each replaces the file's value (or adds the key) before
// anything is read. One whose type does not fit the key's is skipped with a warning, as in
// llama.cpp. Integers keep the key's integer type when the value fits it.
void apply_kv_overrides(gguf_context * g, const llama_model_kv_override * ov) {
    for (; ov && ov->key[0]; ov++) {
        const std::string key(ov->key, strnlen(ov->key, sizeof(ov->key)));
        const int64_t id = gguf_find_key(g, key.c_str());
        const enum gguf_type old = id >= 0 ? gguf_get_kv_type(g, id) : GGUF_TYPE_COUNT;
        auto mismatch = [&](const char * want) {
            LLAMA_LOG_WARN("llama_model_load: override of '%s' is %s but the key has type %s: skipped\n", key.c_str(), want,
                           gguf_type_name(old));
        };
        switch (ov->tag) {
            case LLAMA_KV_OVERRIDE_TYPE_INT: {
                if (id >= 0 && !is_integer_type(old)) { mismatch("an integer"); continue; }
                const int64_t v = ov->val_i64;
                if (old == GGUF_TYPE_UINT32 && v >= 0 && v <= (int64_t) UINT32_MAX) gguf_set_val_u32(g, key.c_str(), (uint32_t) v);
                else if (old == GGUF_TYPE_INT32 && v >= INT32_MIN && v <= INT32_MAX) gguf_set_val_i32(g, key.c_str(), (int32_t) v);
                else if (old == GGUF_TYPE_UINT64 && v >= 0) gguf_set_val_u64(g, key.c_str(), (uint64_t) v);
                else gguf_set_val_i64(g, key.c_str(), v);
                LLAMA_LOG_INFO("llama_model_load: override %s = %" PRId64 "\n", key.c_str(), v);
                break;
            }
            case LLAMA_KV_OVERRIDE_TYPE_FLOAT:
                if (id >= 0 && old != GGUF_TYPE_FLOAT32 && old != GGUF_TYPE_FLOAT64) { mismatch("a float"); continue; }
                if (old == GGUF_TYPE_FLOAT64) gguf_set_val_f64(g, key.c_str(), ov->val_f64);
                else gguf_set_val_f32(g, key.c_str(), (float) ov->val_f64);
                LLAMA_LOG_INFO("llama_model_load: override %s = %g\n", key.c_str(), ov->val_f64);
                break;
            case LLAMA_KV_OVERRIDE_TYPE_BOOL:
                if (id >= 0 && old != GGUF_TYPE_BOOL) { mismatch("a bool"); continue; }
                gguf_set_val_bool(g, key.c_str(), ov->val_bool);
                LLAMA_LOG_INFO("llama_model_load: override %s = %s\n", key.c_str(), ov->val_bool ? "true" : "false");
                break;
            case LLAMA_KV_OVERRIDE_TYPE_STR: {
                if (id >= 0 && old != GGUF_TYPE_STRING) { mismatch("a string"); continue; }
                const std::string v(ov->val_str, strnlen(ov->val_str, sizeof(ov->val_str)));
                gguf_set_val_str(g, key.c_str(), v.c_str());
                LLAMA_LOG_INFO("llama_model_load: override %s = '%s'\n", key.c_str(), v.c_str());
                break;
            }
            default:
                LLAMA_LOG_WARN("llama_model_load: override of '%s' has an unknown type tag %d: skipped\n", key.c_str(), (int) ov->tag);
                break;
        }
    }
}

// llama_model_params.check_tensors: every value of every tensor with a float conversion must be
// finite (read before repacking).
bool check_tensor_data(const llama_model & model, std::string & err) {
    std::vector<float> row;
    for (ggml_tensor * t = ggml_get_first_tensor(model.ctx_w); t; t = ggml_get_next_tensor(model.ctx_w, t)) {
        const ggml_type_traits * tt = ggml_get_type_traits(t->type);
        if (!tt || !tt->to_float || !t->data) continue;
        const int64_t n0 = t->ne[0], n_rows = ggml_nelements(t) / std::max<int64_t>(n0, 1);
        const size_t row_size = ggml_row_size(t->type, n0);
        row.resize((size_t) n0);
        for (int64_t r = 0; r < n_rows; r++) {
            tt->to_float((const char *) t->data + (size_t) r * row_size, row.data(), n0);
            for (int64_t i = 0; i < n0; i++) {
                if (!std::isfinite(row[(size_t) i])) {
                    err = format("tensor '%s' has a non-finite value (row %" PRId64 ", column %" PRId64 ")", t->name, r, i);
                    return false;
                }
            }
        }
    }
    return true;
}

// llama_model_params.use_mlock: keeps the weights' pages in memory; a failure (RLIMIT_MEMLOCK)
// is a warning, as in llama.cpp.
void lock_weights(const llama_model & model) {
    const uintptr_t page = (uintptr_t) sysconf(_SC_PAGESIZE);
    size_t failed = 0;
    int first_errno = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(model.ctx_w); t; t = ggml_get_next_tensor(model.ctx_w, t)) {
        if (!t->data || (t->buffer && !ggml_backend_buffer_is_host(t->buffer))) continue;  // host memory only
        const uintptr_t lo = (uintptr_t) t->data & ~(page - 1);
        const uintptr_t hi = ((uintptr_t) t->data + ggml_nbytes(t) + page - 1) & ~(page - 1);
        if (hi > lo && mlock((const void *) lo, hi - lo) != 0) {
            if (failed++ == 0) first_errno = errno;
        }
    }
    if (failed > 0) {
        LLAMA_LOG_WARN("llama_model_load: mlock failed for %zu tensors (%s): the weights may be paged out "
                       "(raise the RLIMIT_MEMLOCK limit, ulimit -l)\n", failed, strerror(first_errno));
    }
}

}  // namespace

llama_model::~llama_model() {
    for (ggml_backend_buffer_t b : bufs) ggml_backend_buffer_free(b);
    ggml_free(ctx_dup);
    ggml_free(ctx_w);  // the tensor structs (and their data when read without mmap)
    gguf_free(meta);   // the metadata and the mapping
}

bool llama_model_load(llama_model & model, const char * path, const llama_model_params & params, std::string & err) {
    model.t_start_us = llama_time_us();
    if (!path || !*path) {
        err = "no model path given";
        return false;
    }
    model.path = path;
    struct stat st;
    if (stat(path, &st) != 0) {
        err = format("cannot open '%s': %s", path, strerror(errno));
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        err = format("'%s' is not a regular file", path);
        return false;
    }

    model.vocab_only = params.vocab_only;
    gguf_init_params gp = {};
    gp.no_alloc = params.vocab_only;
    gp.ctx = params.vocab_only ? nullptr : &model.ctx_w;
    gp.use_mmap = params.use_mmap;
    model.meta = gguf_init_from_file(path, gp);
    if (!model.meta) {
        err = format("'%s' is not a valid GGUF file (details above)", path);
        return false;
    }
    apply_kv_overrides(model.meta, params.kv_overrides);

    if (get_key_str(model.meta, "general.architecture", model.arch_name, err) != KeyResult::ok) {
        if (err.empty()) err = "missing key general.architecture";
        return false;
    }
    model.arch = llm_arch_from_name(model.arch_name);
    if (model.arch == LLM_ARCH_UNKNOWN && !params.vocab_only) {
        err = format("unsupported architecture '%s' (supported: %s)", model.arch_name.c_str(), llm_arch_names().c_str());
        return false;
    }

    uint64_t ft = 0;
    std::string ignored;
    if (get_key_u64(model.meta, "general.file_type", ft, ignored) == KeyResult::ok && ft <= INT32_MAX) {
        model.file_type = (int32_t) ft;
    }

    if (gguf_find_key(model.meta, "tokenizer.ggml.model") >= 0) {
        std::string verr;
        if (!model.vocab.load(model.meta, verr)) {
            err = "tokenizer: " + verr;
            return false;
        }
        model.has_vocab = true;
    } else if (params.vocab_only) {
        err = "the file has no tokenizer (tokenizer.ggml.model missing)";
        return false;
    } else {
        LLAMA_LOG_WARN("llama_model_load: '%s' has no tokenizer metadata: the vocabulary is empty (token ids can "
                       "still be evaluated)\n", path);
    }

    if (params.vocab_only) {
        // Hyper-parameters are informative only here (any architecture's tokenizer may be loaded).
        if (model.arch != LLM_ARCH_UNKNOWN) {
            std::string herr;
            if (!load_hparams(model, herr)) LLAMA_LOG_WARN("llama_model_load: %s (ignored: vocab_only)\n", herr.c_str());
        }
        // (As llama.cpp: a vocabulary-only load reports no progress.)
        model.t_load_us = llama_time_us() - model.t_start_us;
        return true;
    }

    if (!load_hparams(model, err)) return false;
    if (!load_tensors(model, err)) return false;
    // The progress callback as llama.cpp calls it: before each tensor, with the fraction of the
    // tensor bytes before it (0 first), then 1.0 when done; false cancels. (The file's data was
    // read or mapped in one pass by gguf_init_from_file: these steps walk the tensors after it.)
    if (params.progress_callback) {
        size_t done = 0;
        for (ggml_tensor * t = ggml_get_first_tensor(model.ctx_w); t; t = ggml_get_next_tensor(model.ctx_w, t)) {
            const float f = model.n_bytes > 0 ? (float) ((double) done / (double) model.n_bytes) : 0.0f;
            if (!params.progress_callback(f, params.progress_callback_user_data)) {
                err = "loading cancelled by the progress callback";
                return false;
            }
            done += ggml_nbytes(t);
        }
    }
    if (params.check_tensors && !check_tensor_data(model, err)) return false;
    if (!llama_model_place_weights(model, params, err)) return false;
    if (params.use_mlock) lock_weights(model);
    // The logits cover the embedding rows; callers size them with llama_vocab_n_tokens.
    if (model.has_vocab && model.vocab.n_tokens() != (int32_t) model.hparams.n_vocab) {
        err = format("the tokenizer has %d tokens but token_embd.weight has %u rows", model.vocab.n_tokens(),
                     model.hparams.n_vocab);
        return false;
    }
    if (params.progress_callback && !params.progress_callback(1.0f, params.progress_callback_user_data)) {
        err = "loading cancelled by the progress callback";
        return false;
    }
    model.t_load_us = llama_time_us() - model.t_start_us;
    return true;
}

// ---- C API ---------------------------------------------------------------------------------
llama_model_params llama_model_default_params(void) {
    llama_model_params p;
    p.devices = nullptr;
    p.n_gpu_layers = 0;
    p.split_mode = LLAMA_SPLIT_MODE_LAYER;
    p.main_gpu = 0;
    p.tensor_split = nullptr;
    p.progress_callback = nullptr;
    p.progress_callback_user_data = nullptr;
    p.kv_overrides = nullptr;
    p.vocab_only = false;
    p.use_mmap = true;
    p.use_mlock = false;
    p.check_tensors = false;
    p.use_repack = true;
    return p;
}

llama_model * llama_model_load_from_file(const char * path, llama_model_params params) {
    llama_model * model = new llama_model();
    std::string err;
    if (!llama_model_load(*model, path, params, err)) {
        LLAMA_LOG_ERROR("llama_model_load_from_file: %s: %s\n", path ? path : "(null)", err.c_str());
        delete model;
        return nullptr;
    }
    const llama_hparams & hp = model->hparams;
    if (!params.vocab_only) {
        LLAMA_LOG_INFO("llama_model_load: %s: arch %s, %u layers, n_embd %u, n_head %u/%u, n_ff %u, n_vocab %u, "
                       "%.2f M params, %.2f MiB, loaded in %.1f ms\n",
                       path, model->arch_name.c_str(), hp.n_layer, hp.n_embd, hp.n_head, hp.n_head_kv, hp.n_ff,
                       hp.n_vocab, model->n_params / 1e6, model->n_bytes / (1024.0 * 1024.0), model->t_load_us / 1e3);
    }
    return model;
}

llama_model * llama_load_model_from_file(const char * path_model, llama_model_params params) {
    return llama_model_load_from_file(path_model, params);
}

void llama_model_free(llama_model * model) { delete model; }
void llama_free_model(llama_model * model) { llama_model_free(model); }

const llama_vocab * llama_model_get_vocab(const llama_model * model) { return &model->vocab; }
enum llama_rope_type llama_model_rope_type(const llama_model * model) {
    if (model->arch == LLM_ARCH_UNKNOWN) return LLAMA_ROPE_TYPE_NONE;
    if (model->hparams.rope_type < 0) return LLAMA_ROPE_TYPE_NONE;
    return model->hparams.rope_type == GGML_ROPE_TYPE_NEOX ? LLAMA_ROPE_TYPE_NEOX : LLAMA_ROPE_TYPE_NORM;
}
float llama_model_rope_freq_scale_train(const llama_model * model) { return model->hparams.rope_freq_scale; }
int32_t llama_model_n_ctx_train(const llama_model * model) { return (int32_t) model->hparams.n_ctx_train; }
int32_t llama_model_n_embd(const llama_model * model) { return (int32_t) model->hparams.n_embd; }
int32_t llama_model_n_vocab(const llama_model * model) { return (int32_t) model->hparams.n_vocab; }
int32_t llama_model_n_layer(const llama_model * model) { return (int32_t) model->hparams.n_layer; }
int32_t llama_model_n_head(const llama_model * model) { return (int32_t) model->hparams.n_head; }
int32_t llama_model_n_head_kv(const llama_model * model) { return (int32_t) model->hparams.n_head_kv; }
uint64_t llama_model_n_params(const llama_model * model) { return model->n_params; }
uint64_t llama_model_size(const llama_model * model) { return model->n_bytes; }
bool llama_model_has_encoder(const llama_model * model) { return (void) model, false; }
bool llama_model_has_decoder(const llama_model * model) { return (void) model, true; }
llama_token llama_model_decoder_start_token(const llama_model * model) { return (void) model, LLAMA_TOKEN_NULL; }
bool llama_model_is_recurrent(const llama_model * model) { return (void) model, false; }

int32_t llama_n_ctx_train(const llama_model * model) { return llama_model_n_ctx_train(model); }
int32_t llama_n_embd(const llama_model * model) { return llama_model_n_embd(model); }
int32_t llama_n_layer(const llama_model * model) { return llama_model_n_layer(model); }
int32_t llama_n_head(const llama_model * model) { return llama_model_n_head(model); }

namespace {

const char * file_type_name(int32_t ft) {  // llama.cpp's names (llama_model_ftype_name)
    switch (ft) {
        case 0:  return "all F32";
        case 1:  return "F16";
        case 2:  return "Q4_0";
        case 3:  return "Q4_1";
        case 7:  return "Q8_0";
        case 8:  return "Q5_0";
        case 9:  return "Q5_1";
        case 10: return "Q2_K - Medium";
        case 11: return "Q3_K - Small";
        case 12: return "Q3_K - Medium";
        case 13: return "Q3_K - Large";
        case 14: return "Q4_K - Small";
        case 15: return "Q4_K - Medium";
        case 16: return "Q5_K - Small";
        case 17: return "Q5_K - Medium";
        case 18: return "Q6_K";
        case 19: return "IQ2_XXS - 2.0625 bpw";
        case 20: return "IQ2_XS - 2.3125 bpw";
        case 21: return "Q2_K - Small";
        case 22: return "IQ3_XS - 3.3 bpw";
        case 23: return "IQ3_XXS - 3.0625 bpw";
        case 24: return "IQ1_S - 1.5625 bpw";
        case 25: return "IQ4_NL - 4.5 bpw";
        case 26: return "IQ3_S - 3.4375 bpw";
        case 27: return "IQ3_S mix - 3.66 bpw";
        case 28: return "IQ2_S - 2.5 bpw";
        case 29: return "IQ2_M - 2.7 bpw";
        case 30: return "IQ4_XS - 4.25 bpw";
        case 31: return "IQ1_M - 1.75 bpw";
        case 32: return "BF16";
        case 36: return "TQ1_0 - 1.69 bpw ternary";
        case 37: return "TQ2_0 - 2.06 bpw ternary";
        default: return "?";
    }
}

std::string size_label(uint64_t n) {
    if (n == 0) return "?";
    if (n < 1000000) return format("%.0fK", n / 1e3);
    if (n < 1000000000) return format("%.0fM", n / 1e6);
    return format("%.1fB", n / 1e9);
}

// -1 with an empty string: a missing key or index.
int32_t copy_none(char * buf, size_t buf_size) {
    if (buf && buf_size > 0) buf[0] = '\0';
    return -1;
}

// snprintf semantics for a std::string result.
int32_t copy_out(const std::string & s, char * buf, size_t buf_size) {
    if (buf && buf_size > 0) {
        const size_t n = s.size() < buf_size - 1 ? s.size() : buf_size - 1;
        memcpy(buf, s.data(), n);
        buf[n] = '\0';
    }
    return (int32_t) s.size();
}

std::string scalar_to_string(const gguf_context * g, int64_t id, enum gguf_type type, const void * data) {
    switch (type) {
        case GGUF_TYPE_UINT8:   return format("%u", *(const uint8_t *) data);
        case GGUF_TYPE_INT8:    return format("%d", *(const int8_t *) data);
        case GGUF_TYPE_UINT16:  return format("%u", *(const uint16_t *) data);
        case GGUF_TYPE_INT16:   return format("%d", *(const int16_t *) data);
        case GGUF_TYPE_UINT32:  return format("%u", *(const uint32_t *) data);
        case GGUF_TYPE_INT32:   return format("%d", *(const int32_t *) data);
        case GGUF_TYPE_UINT64:  return format("%" PRIu64, *(const uint64_t *) data);
        case GGUF_TYPE_INT64:   return format("%" PRId64, *(const int64_t *) data);
        case GGUF_TYPE_FLOAT32: return format("%g", *(const float *) data);
        case GGUF_TYPE_FLOAT64: return format("%g", *(const double *) data);
        case GGUF_TYPE_BOOL:    return *(const uint8_t *) data ? "true" : "false";
        default:                return "?";
    }
}

}  // namespace

int32_t llama_model_desc(const llama_model * model, char * buf, size_t buf_size) {
    std::string type = file_type_name(model->file_type);
    if (model->file_type < 0 && !model->ftype_guess.empty()) type = model->ftype_guess + " (guessed)";
    const std::string s = format("%s %s %s", model->arch_name.c_str(), size_label(model->n_params).c_str(), type.c_str());
    return copy_out(s, buf, buf_size);
}

namespace {

// The value of metadata entry id as a string.
std::string meta_value_string(const llama_model * model, int64_t id) {
    const enum gguf_type type = gguf_get_kv_type(model->meta, id);
    std::string s;
    if (type == GGUF_TYPE_STRING) {
        s = gguf_get_val_str(model->meta, id);
    } else if (type == GGUF_TYPE_ARRAY) {
        // Arrays as "[a, b, ...]", shortened after 16 elements.
        const enum gguf_type et = gguf_get_arr_type(model->meta, id);
        const size_t n = gguf_get_arr_n(model->meta, id);
        const size_t shown = n < 16 ? n : 16;
        s = "[";
        for (size_t i = 0; i < shown; i++) {
            if (i) s += ", ";
            if (et == GGUF_TYPE_STRING) {
                s += gguf_get_arr_str(model->meta, id, i);
            } else if (et != GGUF_TYPE_ARRAY) {
                size_t es = 0;
                switch (et) {
                    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: es = 1; break;
                    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: es = 2; break;
                    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: es = 4; break;
                    default: es = 8; break;
                }
                s += scalar_to_string(model->meta, id, et, (const char *) gguf_get_arr_data(model->meta, id) + i * es);
            }
        }
        if (shown < n) s += ", ...";
        s += "]";
    } else {
        s = scalar_to_string(model->meta, id, type, gguf_get_val_data(model->meta, id));
    }
    return s;
}

}  // namespace

int32_t llama_model_meta_val_str(const llama_model * model, const char * key, char * buf, size_t buf_size) {
    if (!model->meta || !key) return copy_none(buf, buf_size);
    const int64_t id = gguf_find_key(model->meta, key);
    if (id < 0) return copy_none(buf, buf_size);
    return copy_out(meta_value_string(model, id), buf, buf_size);
}

int32_t llama_model_meta_count(const llama_model * model) {
    return model->meta ? (int32_t) gguf_get_n_kv(model->meta) : 0;
}

int32_t llama_model_meta_key_by_index(const llama_model * model, int32_t i, char * buf, size_t buf_size) {
    if (i < 0 || i >= llama_model_meta_count(model)) return copy_none(buf, buf_size);
    return copy_out(gguf_get_key(model->meta, i), buf, buf_size);
}

int32_t llama_model_meta_val_str_by_index(const llama_model * model, int32_t i, char * buf, size_t buf_size) {
    if (i < 0 || i >= llama_model_meta_count(model)) return copy_none(buf, buf_size);
    return copy_out(meta_value_string(model, i), buf, buf_size);
}

const char * llama_model_chat_template(const llama_model * model, const char * name) {
    if (!model->meta) return nullptr;
    const std::string key = name ? std::string("tokenizer.chat_template.") + name : "tokenizer.chat_template";
    const int64_t id = gguf_find_key(model->meta, key.c_str());
    if (id < 0 || gguf_get_kv_type(model->meta, id) != GGUF_TYPE_STRING) return nullptr;
    return gguf_get_val_str(model->meta, id);
}
