// quant-mix.cpp - per-tensor type choices for the quantization mixes.
//
// The _S/_M/_L mixes spend more bits where quantization error hurts most: the output matrix
// (it maps straight to logits), attention V and FFN down in a subset of layers (the first and
// last eighth of the model and every third layer in between), as users of llama.cpp expect.
// llama.cpp's rules (build 4747) are the reference, tensor for tensor: a mixture's stacked
// experts and shared expert follow the FFN down rules ("ffn_down" anywhere in the name), and a
// model of 8 experts (Mixtral) keeps attention K and V in Q8_0 and its output in Q5_K for the
// smaller mixes (the attention is a small part of such a model).
#include "quant-mix.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum {
    FT_ALL_F32 = 0, FT_F16 = 1, FT_Q4_0 = 2, FT_Q4_1 = 3, FT_Q8_0 = 7, FT_Q5_0 = 8, FT_Q5_1 = 9,
    FT_Q2_K = 10, FT_Q3_K_S = 11, FT_Q3_K_M = 12, FT_Q3_K_L = 13, FT_Q4_K_S = 14, FT_Q4_K_M = 15,
    FT_Q5_K_S = 16, FT_Q5_K_M = 17, FT_Q6_K = 18, FT_IQ4_NL = 25, FT_BF16 = 32,
};

static const quant_target targets[] = {
    { "Q4_0",   FT_Q4_0,   GGML_TYPE_Q4_0,   "4.5 bpw, one scale per 32 values" },
    { "Q4_1",   FT_Q4_1,   GGML_TYPE_Q4_1,   "5.0 bpw, scale and min per 32 values" },
    { "Q5_0",   FT_Q5_0,   GGML_TYPE_Q5_0,   "5.5 bpw" },
    { "Q5_1",   FT_Q5_1,   GGML_TYPE_Q5_1,   "6.0 bpw" },
    { "Q8_0",   FT_Q8_0,   GGML_TYPE_Q8_0,   "8.5 bpw, nearly lossless" },
    { "Q2_K",   FT_Q2_K,   GGML_TYPE_Q2_K,   "2.6 bpw base, attention V / FFN down / output higher" },
    { "Q3_K_S", FT_Q3_K_S, GGML_TYPE_Q3_K,   "3.4 bpw" },
    { "Q3_K_M", FT_Q3_K_M, GGML_TYPE_Q3_K,   "3.4 bpw base, some layers Q4_K / Q5_K" },
    { "Q3_K_L", FT_Q3_K_L, GGML_TYPE_Q3_K,   "3.4 bpw base, attention V / FFN down Q5_K" },
    { "Q4_K_S", FT_Q4_K_S, GGML_TYPE_Q4_K,   "4.5 bpw" },
    { "Q4_K_M", FT_Q4_K_M, GGML_TYPE_Q4_K,   "4.5 bpw base, half of attention V / FFN down Q6_K" },
    { "Q5_K_S", FT_Q5_K_S, GGML_TYPE_Q5_K,   "5.5 bpw" },
    { "Q5_K_M", FT_Q5_K_M, GGML_TYPE_Q5_K,   "5.5 bpw base, half of attention V / FFN down Q6_K" },
    { "Q6_K",   FT_Q6_K,   GGML_TYPE_Q6_K,   "6.6 bpw" },
    { "IQ4_NL", FT_IQ4_NL, GGML_TYPE_IQ4_NL, "4.5 bpw, non-linear levels" },
    { "F16",    FT_F16,    GGML_TYPE_F16,    "16 bpw" },
    { "BF16",   FT_BF16,   GGML_TYPE_BF16,   "16 bpw, F32's range" },
    { "F32",    FT_ALL_F32, GGML_TYPE_F32,   "32 bpw" },
    { "COPY",   -1,        GGML_TYPE_COUNT,  "only copy tensors, no quantizing" },
    { nullptr,  0,         GGML_TYPE_COUNT,  nullptr },
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
        if (t->file_type == ft) return t;
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

// The preferred type before the row-length check.
static ggml_type preferred_type(const quant_target & t, const quant_model_info & info, const std::string & name) {
    const int ft = t.file_type;
    ggml_type type = t.base;
    const int il = layer_of(name);
    const int nl = info.n_layer > 0 ? info.n_layer : 1;

    // The output matrix maps hidden states to logits (with tied embeddings, the token
    // embedding plays that part): Q6_K unless the target is already as fine.
    if (name == "output.weight" || (!info.has_output && name == "token_embd.weight")) {
        if (ft != FT_Q8_0 && ft != FT_F16 && ft != FT_BF16 && ft != FT_ALL_F32) type = GGML_TYPE_Q6_K;
        return type;
    }
    const bool gqa4 = info.n_head_kv > 0 && info.n_head / info.n_head_kv >= 4;
    const bool experts8 = info.n_expert == 8;
    if (ends_with(name, "attn_v.weight")) {
        switch (ft) {
            case FT_Q2_K:   type = gqa4 ? GGML_TYPE_Q4_K : GGML_TYPE_Q3_K; break;
            case FT_Q3_K_M: type = il < 2 ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K; break;
            case FT_Q3_K_L: type = GGML_TYPE_Q5_K; break;
            case FT_IQ4_NL: if (gqa4) type = GGML_TYPE_Q5_K; break;
            case FT_Q4_K_S: if (il >= 0 && il < 4) type = GGML_TYPE_Q5_K; break;
            case FT_Q4_K_M:
            case FT_Q5_K_M: if (il >= 0 && use_more_bits(il, nl)) type = GGML_TYPE_Q6_K; break;
            default: break;
        }
        return experts8 ? GGML_TYPE_Q8_0 : type;
    }
    if (ends_with(name, "attn_k.weight")) return experts8 ? GGML_TYPE_Q8_0 : type;
    if (name.find("ffn_down") != std::string::npos) {  // ffn_down, ffn_down_exps, ffn_down_shexp
        switch (ft) {
            case FT_Q2_K:   type = GGML_TYPE_Q3_K; break;
            case FT_Q3_K_M: type = il >= 0 && il < nl / 16 ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K; break;
            case FT_Q3_K_L: type = GGML_TYPE_Q5_K; break;
            case FT_IQ4_NL: if (il >= 0 && il < nl / 8) type = GGML_TYPE_Q5_K; break;  // (without an imatrix)
            case FT_Q4_K_S: if (il >= 0 && il < nl / 8) type = GGML_TYPE_Q5_K; break;
            case FT_Q4_K_M:
            case FT_Q5_K_M: if (il >= 0 && use_more_bits(il, nl)) type = GGML_TYPE_Q6_K; break;
            default: break;
        }
        return type;
    }
    if (ends_with(name, "attn_qkv.weight")) {
        // Fused Q, K and V (Phi-3): V's share of the bits, as llama.cpp gives it.
        switch (ft) {
            case FT_Q3_K_M:
            case FT_Q3_K_L: type = GGML_TYPE_Q4_K; break;
            case FT_Q4_K_M: type = GGML_TYPE_Q5_K; break;
            case FT_Q5_K_M: type = GGML_TYPE_Q6_K; break;
            default: break;
        }
        return type;
    }
    if (ends_with(name, "attn_output.weight")) {
        if (experts8) {
            switch (ft) {
                case FT_Q2_K: case FT_Q3_K_S: case FT_Q3_K_M: case FT_IQ4_NL: case FT_Q4_K_S: case FT_Q4_K_M:
                    type = GGML_TYPE_Q5_K;
                    break;
                default: break;
            }
            return type;
        }
        switch (ft) {
            case FT_Q2_K:   type = GGML_TYPE_Q3_K; break;
            case FT_Q3_K_M: type = GGML_TYPE_Q4_K; break;
            case FT_Q3_K_L: type = GGML_TYPE_Q5_K; break;
            default: break;
        }
        return type;
    }
    return type;
}

// A type of the same family that fits rows whose length is not a multiple of 256.
static ggml_type fallback_for(ggml_type type) {
    switch (type) {
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
    ggml_type type = opt.pure ? target.base : preferred_type(target, info, name);
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
