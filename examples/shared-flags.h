// shared-flags.h: flags llama.cpp's programs share, parsed one way for every program here that
// offers them (llama-cli, llama-perplexity, llama-bench): the GPU placement (-ngl, -sm, -mg,
// -nkvo), flash attention (-fa, bare as llama.cpp had it, or with llama.cpp's later
// on|off|auto value) and the KV cache's types (-ctk, -ctv).
#pragma once

#include "llama.h"

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

struct gpu_options {
    int32_t n_gpu_layers = 0;  // -ngl (llama.cpp's default: none)
    llama_split_mode split_mode = LLAMA_SPLIT_MODE_LAYER;
    int32_t main_gpu = 0;
    bool kv_offload = true;
    std::vector<std::string> given;  // the flags given (without effect in a build without GPUs)

    // The lines of a program's --help.
    static const char * help() {
        return "  -ngl, --n-gpu-layers N    layers on the GPU, the last ones (default: 0; all: every one)\n"
               "  -sm, --split-mode none|layer|row\n"
               "                            how layers spread over several GPUs (default: layer)\n"
               "  -mg, --main-gpu N         the GPU of split mode none (default: 0)\n"
               "  -nkvo, --no-kv-offload    keep the KV cache in host memory\n"
               "                            (without a usable GPU these are noted and ignored)\n";
    }

    // Takes argv[i] when it is one of these flags (advancing i past its value): 1 when taken,
    // 0 when it is another flag, -1 with *err set when its value is missing or invalid.
    int parse(int argc, char ** argv, int & i, std::string * err) {
        const std::string a = argv[i];
        const bool layers = a == "-ngl" || a == "--n-gpu-layers" || a == "--gpu-layers";
        const bool split = a == "-sm" || a == "--split-mode";
        const bool main = a == "-mg" || a == "--main-gpu";
        if (a == "-nkvo" || a == "--no-kv-offload") {
            kv_offload = false;
            given.push_back(a);
            return 1;
        }
        if (!layers && !split && !main) return 0;
        if (i + 1 >= argc) {
            *err = "missing value for " + a;
            return -1;
        }
        const std::string v = argv[++i];
        if (split) {
            if (v != "none" && v != "layer" && v != "row") {
                *err = "invalid value for " + a + ": '" + v + "' (none, layer or row)";
                return -1;
            }
            split_mode = v == "none" ? LLAMA_SPLIT_MODE_NONE : v == "row" ? LLAMA_SPLIT_MODE_ROW : LLAMA_SPLIT_MODE_LAYER;
        } else if (layers && (v == "auto" || v == "all")) {
            n_gpu_layers = 999;
        } else {
            char * end = nullptr;
            errno = 0;
            const long x = strtol(v.c_str(), &end, 10);
            const long lo = layers ? -1 : 0;  // -1: llama.cpp's "all layers"
            if (v.empty() || *end != '\0' || errno == ERANGE || x < lo || x > INT32_MAX) {
                *err = "invalid value for " + a + ": '" + v + "' (an integer, " + std::to_string(lo) + " or more" +
                       (layers ? ", or all)" : ")");
                return -1;
            }
            (layers ? n_gpu_layers : main_gpu) = (int32_t) x;
        }
        given.push_back(a);
        return 1;
    }

    // The warning for flags given where no GPU can take them; empty otherwise.
    std::string ignored_warning(const char * program) const {
        if (given.empty() || llama_supports_gpu_offload()) return "";
        std::string flags;
        for (const auto & f : given) flags += (flags.empty() ? "" : ", ") + f;
        return std::string(program) + ": no usable GPU (none in this build or on this machine): " + flags +
               " ignored, everything runs on the CPU\n";
    }

    void apply(llama_model_params & mp) const {
        mp.n_gpu_layers = n_gpu_layers;
        mp.split_mode = split_mode;
        mp.main_gpu = main_gpu;
    }

    void apply(llama_context_params & cp) const { cp.offload_kqv = kv_offload; }
};

// -fa / --flash-attn at argv[i]: bare it turns flash attention on (llama.cpp until its values
// came); followed by on|off|auto (or enabled|disabled, 1|0|-1, as llama.cpp's later versions)
// it takes that value (i advanced past it). auto: this engine's default, off.
inline bool parse_flash_attn(int argc, char ** argv, int & i) {
    if (i + 1 >= argc) return true;
    const std::string v = argv[i + 1];
    const bool on = v == "on" || v == "enabled" || v == "1";
    const bool off = v == "off" || v == "disabled" || v == "0" || v == "auto" || v == "-1";
    if (!on && !off) return true;  // another flag follows: the bare form
    i++;
    return on;
}

// The KV cache types of -ctk / -ctv: llama.cpp's list, by their ggml names.
#define LLAMA_CACHE_TYPE_NAMES "f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1"
inline bool parse_cache_type(const std::string & v, ggml_type * t) {
    static const ggml_type types[] = { GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0,
                                       GGML_TYPE_Q4_1, GGML_TYPE_IQ4_NL, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1 };
    for (ggml_type c : types) {
        if (v == ggml_type_name(c)) {
            *t = c;
            return true;
        }
    }
    return false;
}
