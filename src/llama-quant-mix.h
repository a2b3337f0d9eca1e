// llama-quant-mix.h - which type each tensor of a llama-family model gets for a requested quantization
// ("Q4_K_M" and friends): the per-tensor choices users know from llama.cpp's quantizer.
#pragma once

#include "ggml.h"

#include <string>

// A target the user can ask for: its name, the file type id written to general.file_type, and
// the base type of the large matrices. COPY (file type -1, base GGML_TYPE_COUNT) copies every
// tensor as it is.
struct quant_target {
    const char * name;
    int file_type;       // llama's general.file_type value (-1: COPY, the input's is kept)
    ggml_type base;
    const char * desc;
};

// NULL for an unknown name (case-insensitive) or file type number (llama.cpp's: "2" is Q4_0).
const quant_target * quant_target_find(const std::string & name);
// All targets, terminated by a NULL name.
const quant_target * quant_targets();

// Facts about the model that the choice depends on.
struct quant_model_info {
    std::string arch = "llama";  // general.architecture
    int n_layer = 0;       // transformer blocks
    int n_head = 0;
    int n_head_kv = 0;
    int n_expert = 0;      // experts of a mixture (0: a dense model); 8 (Mixtral) moves attention up
    bool has_output = true;  // false: embeddings tied, token_embd doubles as the output matrix
    int n_ffn_down_per_layer = 1;  // 2 with a shared expert beside the experts (Qwen2-MoE)
};

// What llama-quantize's flags change in the choice (llama.cpp's names).
struct quant_options {
    bool pure = false;                             // --pure: every matrix the target's base type, no mix
    bool quantize_output = true;                   // false: --leave-output-tensor (output.weight as it is)
    ggml_type output_type = GGML_TYPE_COUNT;       // --output-tensor-type
    ggml_type token_embd_type = GGML_TYPE_COUNT;   // --token-embedding-type
    bool has_imatrix = false;                      // --imatrix given (some rules change with one)
};

// The type for one tensor: name, shape and type as in the file; `fallback` receives a reason when
// the preferred type could not be used (row length not a multiple of its block), else is cleared.
ggml_type quant_choose_type(const quant_target & target, const quant_model_info & info, const std::string & name,
                            int n_dims, const int64_t * ne, ggml_type current, const quant_options & opt, std::string & fallback);


// Whether llama.cpp's llama-quantize refuses to make this tensor's type without importance
// weights: the 2-bit and 1-bit IQ types (IQ1_M not for the token embedding and output), Q2_K in
// the Q2_K_S target (not for the token embedding). The types ggml itself refuses to quantize
// without them (ggml_quantize_requires_imatrix) are refused besides.
bool quant_needs_imatrix(const quant_target & target, const std::string & name, ggml_type type);
