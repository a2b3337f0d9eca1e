// llama-quant-mix.cpp - per-tensor type choices for the quantization mixes.
//
// The _S/_M/_L mixes spend more bits where quantization error hurts most: the output matrix
// (it maps straight to logits), attention V and FFN down in a subset of layers (the first and
// last eighth of the model and every third layer in between), as users of llama.cpp expect.
// llama.cpp's rules (build 4747) are the reference, tensor for tensor: a mixture's stacked
// experts and shared expert follow the FFN down rules ("ffn_down" anywhere in the name), and a
// model of 8 experts (Mixtral) keeps attention K and V in Q8_0 and its output in Q5_K for the
// smaller mixes (the attention is a small part of such a model).
#include "llama-quant-mix.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <initializer_list>

enum {
    FT_ALL_F32 = 0, FT_F16 = 1, FT_Q4_0 = 2, FT_Q4_1 = 3, FT_Q8_0 = 7, FT_Q5_0 = 8, FT_Q5_1 = 9,
    FT_Q2_K = 10, FT_Q3_K_S = 11, FT_Q3_K_M = 12, FT_Q3_K_L = 13, FT_Q4_K_S = 14, FT_Q4_K_M = 15,
    FT_Q5_K_S = 16, FT_Q5_K_M = 17, FT_Q6_K = 18, FT_IQ2_XXS = 19, FT_IQ2_XS = 20, FT_Q2_K_S = 21,
    FT_IQ3_XS = 22, FT_IQ3_XXS = 23, FT_IQ1_S = 24, FT_IQ4_NL = 25, FT_IQ3_S = 26, FT_IQ3_M = 27,
    FT_IQ2_S = 28, FT_IQ2_M = 29, FT_IQ4_XS = 30, FT_IQ1_M = 31, FT_BF16 = 32, FT_TQ1_0 = 36, FT_TQ2_0 = 37,
};

// llama.cpp's targets, in its llama-quantize's order; the aliases Q3_K, Q4_K, Q5_K name the _M mixes.
static const quant_target targets[] = {
    { "Q4_0",    FT_Q4_0,    GGML_TYPE_Q4_0,    "4.5 bpw, one scale per 32 values" },
    { "Q4_1",    FT_Q4_1,    GGML_TYPE_Q4_1,    "5.0 bpw, scale and min per 32 values" },
    { "Q5_0",    FT_Q5_0,    GGML_TYPE_Q5_0,    "5.5 bpw" },
    { "Q5_1",    FT_Q5_1,    GGML_TYPE_Q5_1,    "6.0 bpw" },
    { "IQ2_XXS", FT_IQ2_XXS, GGML_TYPE_IQ2_XXS, "2.06 bpw, needs an importance matrix" },
    { "IQ2_XS",  FT_IQ2_XS,  GGML_TYPE_IQ2_XS,  "2.31 bpw, needs an importance matrix" },
    { "IQ2_S",   FT_IQ2_S,   GGML_TYPE_IQ2_XS,  "2.5 bpw mix, needs an importance matrix" },
    { "IQ2_M",   FT_IQ2_M,   GGML_TYPE_IQ2_S,   "2.7 bpw mix, needs an importance matrix" },
    { "IQ1_S",   FT_IQ1_S,   GGML_TYPE_IQ1_S,   "1.56 bpw, needs an importance matrix" },
    { "IQ1_M",   FT_IQ1_M,   GGML_TYPE_IQ1_M,   "1.75 bpw, needs an importance matrix" },
    { "TQ1_0",   FT_TQ1_0,   GGML_TYPE_TQ1_0,   "1.69 bpw ternary" },
    { "TQ2_0",   FT_TQ2_0,   GGML_TYPE_TQ2_0,   "2.06 bpw ternary" },
    { "Q2_K",    FT_Q2_K,    GGML_TYPE_Q2_K,    "2.6 bpw base, attention V / FFN down / output higher" },
    { "Q2_K_S",  FT_Q2_K_S,  GGML_TYPE_Q2_K,    "2.6 bpw, needs an importance matrix" },
    { "IQ3_XXS", FT_IQ3_XXS, GGML_TYPE_IQ3_XXS, "3.06 bpw, needs an importance matrix (attention K and Q in IQ2_S)" },
    { "IQ3_S",   FT_IQ3_S,   GGML_TYPE_IQ3_S,   "3.44 bpw" },
    { "IQ3_M",   FT_IQ3_M,   GGML_TYPE_IQ3_S,   "3.66 bpw mix" },
    { "Q3_K",    FT_Q3_K_M,  GGML_TYPE_Q3_K,    "alias for Q3_K_M" },
    { "IQ3_XS",  FT_IQ3_XS,  GGML_TYPE_IQ3_S,   "3.3 bpw mix" },
    { "Q3_K_S",  FT_Q3_K_S,  GGML_TYPE_Q3_K,    "3.4 bpw" },
    { "Q3_K_M",  FT_Q3_K_M,  GGML_TYPE_Q3_K,    "3.4 bpw base, some layers Q4_K / Q5_K" },
    { "Q3_K_L",  FT_Q3_K_L,  GGML_TYPE_Q3_K,    "3.4 bpw base, attention V / FFN down Q5_K" },
    { "IQ4_NL",  FT_IQ4_NL,  GGML_TYPE_IQ4_NL,  "4.5 bpw, non-linear levels" },
    { "IQ4_XS",  FT_IQ4_XS,  GGML_TYPE_IQ4_XS,  "4.25 bpw, non-linear levels" },
    { "Q4_K",    FT_Q4_K_M,  GGML_TYPE_Q4_K,    "alias for Q4_K_M" },
    { "Q4_K_S",  FT_Q4_K_S,  GGML_TYPE_Q4_K,    "4.5 bpw" },
    { "Q4_K_M",  FT_Q4_K_M,  GGML_TYPE_Q4_K,    "4.5 bpw base, half of attention V / FFN down Q6_K" },
    { "Q5_K",    FT_Q5_K_M,  GGML_TYPE_Q5_K,    "alias for Q5_K_M" },
    { "Q5_K_S",  FT_Q5_K_S,  GGML_TYPE_Q5_K,    "5.5 bpw" },
    { "Q5_K_M",  FT_Q5_K_M,  GGML_TYPE_Q5_K,    "5.5 bpw base, half of attention V / FFN down Q6_K" },
    { "Q6_K",    FT_Q6_K,    GGML_TYPE_Q6_K,    "6.6 bpw" },
    { "Q8_0",    FT_Q8_0,    GGML_TYPE_Q8_0,    "8.5 bpw, nearly lossless" },
    { "F16",     FT_F16,     GGML_TYPE_F16,     "16 bpw" },
    { "BF16",    FT_BF16,    GGML_TYPE_BF16,    "16 bpw, F32's range" },
    { "F32",     FT_ALL_F32, GGML_TYPE_F32,     "32 bpw" },
    { "COPY",    -1,         GGML_TYPE_COUNT,   "only copy tensors, no quantizing" },
    { nullptr,   0,          GGML_TYPE_COUNT,   nullptr },
};

const quant_target * quant_targets() { return targets; }

const quant_target * quant_target_find(const std::string & name) {
    for (const quant_target * t = targets; t->name; t++) {
        if (strcasecmp(t->name, name.c_str()) == 0) return t;
    }
    // llama.cpp's file type numbers
    if (name.empty() || name.size() > 3 || name.find_first_not_of("0123456789") != std::string::npos) return nullptr;
    const int ft = atoi(name.c_str());
    for (const quant_target * t = targets; t->name; t++) {
        if (t->file_type == ft && strstr(t->desc, "alias") == nullptr) return t;
    }
    return nullptr;
}

// The types weights may be written in are the type table's weight targets that ggml quantizes to.
static bool ends_with(const std::string & s, const char * suffix) {
    const size_t n = strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// Layer index of "blk.N.xxx", or -1.
static int layer_of(const std::string & name) {
    if (name.compare(0, 4, "blk.") != 0) return -1;
    return atoi(name.c_str() + 4);
}

// The layers that get more bits in the _M mixes: first and last eighth, every third between.
static bool use_more_bits(int i_layer, int n_layer) {
    return i_layer < n_layer / 8 || i_layer >= 7 * n_layer / 8 || (i_layer - n_layer / 8) % 3 == 2;
}

static bool is_ft(int ft, std::initializer_list<int> fts) {
    for (int f : fts) {
        if (f == ft) return true;
    }
    return false;
}

// llama.cpp's model type "70B", which one rule keys on: 80 blocks of llama with grouped KV heads
// (with one KV head per query head it is the 65B) or of qwen2 (Qwen2-72B); not a llama mixture.
static bool is_70b(const quant_model_info & info) {
    if (info.n_layer != 80) return false;
    if (info.arch == "llama") return info.n_expert != 8 && info.n_head != info.n_head_kv;
    return info.arch == "qwen2";
}

// The preferred type before the row-length check: llama.cpp's rules (llama_tensor_get_type).
static ggml_type preferred_type(const quant_target & t, const quant_model_info & info, const quant_options & opt, const std::string & name) {
    const int ft = t.file_type;
    ggml_type type = t.base;
    const int il = layer_of(name);
    const int nl = info.n_layer > 0 ? info.n_layer : 1;
    const bool gqa4 = info.n_head_kv > 0 && info.n_head / info.n_head_kv >= 4;
    const bool experts8 = info.n_expert == 8;
    const bool more_bits = il >= 0 && use_more_bits(il, nl);
    // The 2-bit and 1-bit targets (IQ2_S / IQ2_M raise to IQ3_S where the others raise to Q2_K).
    const bool very_low = is_ft(ft, {FT_IQ2_XXS, FT_IQ2_XS, FT_IQ1_S, FT_IQ2_S, FT_IQ2_M, FT_IQ1_M});
    const ggml_type raised_low = is_ft(ft, {FT_IQ2_S, FT_IQ2_M}) ? GGML_TYPE_IQ3_S : GGML_TYPE_Q2_K;

    // The output matrix maps hidden states to logits (with tied embeddings, the token
    // embedding plays that part): Q6_K unless the target is already as fine; Q5_K for the
    // very low targets.
    if (name == "output.weight" || (!info.has_output && name == "token_embd.weight")) {
        if (is_ft(ft, {FT_IQ2_XXS, FT_IQ2_XS, FT_IQ3_XXS, FT_IQ1_S, FT_IQ2_S, FT_IQ2_M, FT_IQ1_M})) return GGML_TYPE_Q5_K;
        if (ft != FT_Q8_0 && ft != FT_F16 && ft != FT_BF16 && ft != FT_ALL_F32) type = GGML_TYPE_Q6_K;
        return type;
    }
    if (name == "token_embd.weight") {
        if (is_ft(ft, {FT_IQ2_XXS, FT_IQ2_XS, FT_IQ1_S, FT_IQ1_M})) return GGML_TYPE_Q2_K;
        if (is_ft(ft, {FT_IQ2_S, FT_IQ2_M, FT_IQ3_XXS})) return GGML_TYPE_IQ3_S;
        if (is_ft(ft, {FT_TQ1_0, FT_TQ2_0})) return GGML_TYPE_Q4_K;
        return type;
    }
    if (very_low) {
        if (name.find("attn_v.weight") != std::string::npos) return gqa4 || info.n_expert >= 4 ? GGML_TYPE_Q4_K : raised_low;
        if (experts8 && name.find("attn_k.weight") != std::string::npos) return GGML_TYPE_Q4_K;
        if (name.find("ffn_down") != std::string::npos) {
            // Here llama.cpp counts the FFN down tensors in its order (by layer, then by name:
            // ffn_down, ffn_down_exps, ffn_down_shexp) against n_layer / 8: with a shared expert
            // (two per layer) that is the first n_layer / 16 layers and a half.
            const int per_layer = info.n_ffn_down_per_layer > 0 ? info.n_ffn_down_per_layer : 1;
            const int rank = name.find("ffn_down_shexp") != std::string::npos && per_layer > 1 ? 1 : 0;
            return il >= 0 && il * per_layer + rank < nl / 8 ? raised_low : type;
        }
        if (name.find("attn_output.weight") != std::string::npos) {
            if (experts8) return GGML_TYPE_Q5_K;
            if (is_ft(ft, {FT_IQ1_S, FT_IQ1_M})) return GGML_TYPE_IQ2_XXS;
            if (is_ft(ft, {FT_IQ2_S, FT_IQ2_M})) return GGML_TYPE_IQ3_S;
        }
        return type;
    }
    if (name.find("attn_v.weight") != std::string::npos) {
        switch (ft) {
            case FT_Q2_K:    type = gqa4 ? GGML_TYPE_Q4_K : GGML_TYPE_Q3_K; break;
            case FT_Q2_K_S:  if (gqa4) type = GGML_TYPE_Q4_K; break;
            case FT_IQ3_XXS: type = gqa4 ? GGML_TYPE_Q4_K : !opt.has_imatrix ? GGML_TYPE_IQ3_S : GGML_TYPE_IQ3_XXS; break;
            case FT_IQ3_XS:
            case FT_IQ3_S:   if (gqa4) type = GGML_TYPE_Q4_K; break;
            case FT_IQ3_M:   type = GGML_TYPE_Q4_K; break;
            case FT_Q3_K_M:  type = il < 2 ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K; break;
            case FT_Q3_K_L:  type = GGML_TYPE_Q5_K; break;
            case FT_IQ4_NL:
            case FT_IQ4_XS:  if (gqa4) type = GGML_TYPE_Q5_K; break;
            case FT_Q4_K_M:
            case FT_Q5_K_M:  if (more_bits) type = GGML_TYPE_Q6_K; break;
            case FT_Q4_K_S:  if (il >= 0 && il < 4) type = GGML_TYPE_Q5_K; break;
            default: break;
        }
        // A 70B model's V projection is a fraction of its Q (8 query heads share each KV head),
        // so a few more bits there cost little in size.
        if (is_70b(info) && (type == GGML_TYPE_Q3_K || type == GGML_TYPE_Q4_K)) type = GGML_TYPE_Q5_K;
        return experts8 ? GGML_TYPE_Q8_0 : type;
    }
    if (name.find("attn_k.weight") != std::string::npos) {
        if (experts8) return GGML_TYPE_Q8_0;
        if (ft == FT_IQ3_XS) return GGML_TYPE_IQ3_XXS;
        if (ft == FT_IQ3_XXS) return GGML_TYPE_IQ2_S;
        return type;
    }
    if (name.find("attn_q.weight") != std::string::npos) {
        if (ft == FT_IQ3_XS) return GGML_TYPE_IQ3_XXS;
        if (ft == FT_IQ3_XXS) return GGML_TYPE_IQ2_S;
        return type;
    }
    if (name.find("ffn_down") != std::string::npos) {  // ffn_down, ffn_down_exps, ffn_down_shexp
        const bool first8 = il >= 0 && il < nl / 8;
        switch (ft) {
            case FT_Q2_K:    type = GGML_TYPE_Q3_K; break;
            case FT_Q2_K_S:  if (first8) type = GGML_TYPE_Q4_K; break;
            case FT_IQ3_XXS: if (!opt.has_imatrix) type = first8 ? GGML_TYPE_Q4_K : GGML_TYPE_Q3_K; break;
            case FT_Q3_K_M:  type = il >= 0 && il < nl / 16 ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K; break;
            case FT_IQ3_M:   if (first8 || (experts8 && more_bits)) type = GGML_TYPE_Q4_K; break;
            case FT_Q3_K_L:  type = GGML_TYPE_Q5_K; break;
            case FT_Q4_K_M:
            case FT_Q5_K_M:  if (more_bits) type = GGML_TYPE_Q6_K; break;
            case FT_IQ4_NL:
            case FT_IQ4_XS:  if (first8 && !opt.has_imatrix) type = GGML_TYPE_Q5_K; break;
            case FT_Q4_K_S:  if (first8) type = GGML_TYPE_Q5_K; break;
            case FT_Q4_0:    if (first8 && opt.has_imatrix) type = GGML_TYPE_Q4_1; break;
            case FT_Q5_0:    if (first8 && opt.has_imatrix) type = GGML_TYPE_Q5_1; break;
            default: break;
        }
        return type;
    }
    if (name.find("attn_output.weight") != std::string::npos) {
        if (experts8) {
            if (is_ft(ft, {FT_Q2_K, FT_IQ3_XS, FT_IQ3_XXS, FT_Q3_K_S, FT_Q3_K_M, FT_IQ4_NL, FT_Q4_K_S, FT_Q4_K_M, FT_IQ3_S, FT_IQ3_M, FT_IQ4_XS})) {
                type = GGML_TYPE_Q5_K;
            }
            return type;
        }
        switch (ft) {
            case FT_Q2_K:    type = GGML_TYPE_Q3_K; break;
            case FT_IQ3_XXS: type = GGML_TYPE_IQ3_S; break;
            case FT_Q3_K_M:
            case FT_IQ3_M:   type = GGML_TYPE_Q4_K; break;
            case FT_Q3_K_L:  type = GGML_TYPE_Q5_K; break;
            default: break;
        }
        return type;
    }
    if (name.find("attn_qkv.weight") != std::string::npos) {
        // Fused Q, K and V (Phi-3): V's share of the bits, as llama.cpp gives it.
        switch (ft) {
            case FT_Q3_K_M:
            case FT_Q3_K_L:
            case FT_IQ3_M:  type = GGML_TYPE_Q4_K; break;
            case FT_Q4_K_M: type = GGML_TYPE_Q5_K; break;
            case FT_Q5_K_M: type = GGML_TYPE_Q6_K; break;
            default: break;
        }
        return type;
    }
    if (name.find("ffn_gate") != std::string::npos || name.find("ffn_up") != std::string::npos) {
        // IQ3_XS: the middle three quarters of the gate and up projections in IQ3_XXS.
        if (ft == FT_IQ3_XS && il >= nl / 8 && il < 7 * nl / 8) type = GGML_TYPE_IQ3_XXS;
        return type;
    }
    return type;
}

// A type of the same family that fits rows whose length is not a multiple of 256.
static ggml_type fallback_for(ggml_type type) {
    switch (type) {
        case GGML_TYPE_TQ1_0:
        case GGML_TYPE_TQ2_0: return GGML_TYPE_Q4_0;
        case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ3_XXS: case GGML_TYPE_IQ3_S:
        case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ1_M: case GGML_TYPE_IQ4_XS:
        case GGML_TYPE_Q2_K:
        case GGML_TYPE_Q3_K: return GGML_TYPE_IQ4_NL;
        case GGML_TYPE_Q4_K: return GGML_TYPE_Q5_0;
        case GGML_TYPE_Q5_K: return GGML_TYPE_Q5_1;
        case GGML_TYPE_Q6_K: return GGML_TYPE_Q8_0;
        default:             return GGML_TYPE_F16;
    }
}

ggml_type quant_choose_type(const quant_target & target, const quant_model_info & info, const std::string & name,
                            int n_dims, const int64_t * ne, ggml_type current, const quant_options & opt, std::string & fallback) {
    fallback.clear();
    if (target.base == GGML_TYPE_COUNT) return current;  // COPY
    // Only matrices are quantized: norms, biases and other vectors stay F32; so does a mixture's
    // router (its small errors would change which experts run), as llama.cpp keeps it.
    if (n_dims < 2 || !ends_with(name, ".weight") || ends_with(name, "ffn_gate_inp.weight")) return GGML_TYPE_F32;
    if (!opt.quantize_output && name == "output.weight") return current;
    ggml_type type = opt.pure ? target.base : preferred_type(target, info, opt, name);
    if (opt.token_embd_type != GGML_TYPE_COUNT && name == "token_embd.weight") type = opt.token_embd_type;
    if (opt.output_type != GGML_TYPE_COUNT && name == "output.weight") type = opt.output_type;
    if (ne[0] % ggml_blck_size(type) != 0) {
        ggml_type alt = fallback_for(type);
        if (ne[0] % ggml_blck_size(alt) != 0) alt = GGML_TYPE_F16;
        fallback = std::string("row length ") + std::to_string((long long) ne[0]) + " is not a multiple of " +
                   std::to_string((long long) ggml_blck_size(type)) + " (" + ggml_type_name(type) + "): using " +
                   ggml_type_name(alt);
        type = alt;
    }
    return type;
}

bool quant_needs_imatrix(const quant_target & target, const std::string & name, ggml_type type) {
    switch (type) {
        case GGML_TYPE_IQ2_XXS:
        case GGML_TYPE_IQ2_XS:
        case GGML_TYPE_IQ2_S:
        case GGML_TYPE_IQ1_S: return true;
        case GGML_TYPE_IQ1_M: return name != "token_embd.weight" && name != "output.weight";
        case GGML_TYPE_Q2_K:  return target.file_type == FT_Q2_K_S && name != "token_embd.weight";
        default:              return false;
    }
}
