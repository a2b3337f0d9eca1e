// llama-adapter.h - LoRA adapters: low-rank updates W + s * B A of a model's projection weights,
// applied unmerged in the forward graph (y = W x + s * B (A x), s = scale * alpha / rank).
//
// Layouts (as llama.cpp and PEFT store them): for a base weight W of ggml shape [n_in, n_out],
// A ("<W name>.lora_a", PEFT lora_A.weight of torch shape (r, n_in)) has ggml shape [n_in, r] and
// B ("<W name>.lora_b", PEFT lora_B.weight (n_out, r)) [r, n_out]: the same bytes either way.
// Adapters are held in F32 whatever type the file has (they are small, and trainable).
#pragma once

#include "ggml.h"
#include "ggml-backend.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

struct llama_model;
struct llama_adapter_device_copy;

struct llama_adapter_lora_weight {
    ggml_tensor * a = nullptr;  // F32 [n_in, r]
    ggml_tensor * b = nullptr;  // F32 [r, n_out]
};

struct llama_adapter_lora {
    std::string arch;           // general.architecture of the base it was made for
    float alpha = 0.0f;         // scale of B A is alpha / r; 0: none (as llama.cpp)
    float dropout = 0.0f;       // PEFT's lora_dropout (training only; kept for --peft-out)
    std::string base_name;      // PEFT's base_model_name_or_path, if known
    // By base weight; the key is the model's tensor (weights keep their ggml_tensor when repacked).
    std::map<const ggml_tensor *, llama_adapter_lora_weight> weights;
    std::vector<std::string> targets;  // short target names present (q, k, v, o, gate, up, down, output)

    ggml_context * ctx = nullptr;  // owns the A and B tensors and their data (host memory)
    // The pairs moved next to base weights in a device's memory (llama_adapter_lora_init).
    std::unique_ptr<llama_adapter_device_copy> on_device;

    llama_adapter_lora();
    ~llama_adapter_lora();
    llama_adapter_lora(const llama_adapter_lora &) = delete;
    llama_adapter_lora & operator=(const llama_adapter_lora &) = delete;

    const llama_adapter_lora_weight * get(const ggml_tensor * w) const {
        auto it = weights.find(w);
        return it == weights.end() ? nullptr : &it->second;
    }
    int32_t rank() const;  // r of the first weight (0 if none)
    // The factor of B A in y: scale * alpha / r (scale alone when alpha is 0).
    float effective_scale(const llama_adapter_lora_weight & w, float scale) const;
};

// A fresh adapter: A and B zero, F32, rank r, on every layer's projections named by targets
// (q, k, v, o, gate, up, down, output). False with a message when a target is unknown or the
// model lacks it, or r is out of range.
bool llama_adapter_lora_create(llama_adapter_lora & ad, const llama_model & model, const std::vector<std::string> & targets,
                               int32_t r, float alpha, std::string & err);

// A and B of the weights whose base lives in a device's memory (layers offloaded with -ngl),
// copied into buffers of that memory's type (usage: weights): the graph then reads them where
// the product runs, with no copy at a split's seam every token.
struct llama_adapter_device_copy {
    std::vector<ggml_context *> ctxs;
    std::vector<ggml_backend_buffer_t> bufs;
    std::map<ggml_tensor *, ggml_tensor *> host_of;  // device tensor -> the host tensor it came from

    llama_adapter_device_copy() = default;
    ~llama_adapter_device_copy();
    llama_adapter_device_copy(const llama_adapter_device_copy &) = delete;
    llama_adapter_device_copy & operator=(const llama_adapter_device_copy &) = delete;
};

// Copies the pairs whose base weight is in a device's memory there and points ad.weights at the
// copies (dc.host_of leads back). keep_host false: ad.ctx then keeps only the pairs left in host
// memory (inference; nothing reads the moved pairs' host values again). False with a message
// when a device's memory is short (ad unchanged).
bool llama_adapter_lora_to_devices(llama_adapter_lora & ad, llama_adapter_device_copy & dc, bool keep_host, std::string & err);

// Loads a GGUF LoRA adapter (general.type adapter, adapter.type lora) or a PEFT directory
// (adapter_config.json + adapter_model.safetensors, Q/K rows of lora_B from Hugging Face order
// to the model's). Every tensor is checked against the base: architecture, names, shapes.
bool llama_adapter_lora_load(llama_adapter_lora & ad, const llama_model & model, const std::string & path, std::string & err);

// Writes the adapter as llama.cpp's GGUF LoRA adapter (type F32, F16 or BF16), whole or not at all.
bool llama_adapter_lora_save_gguf(const llama_adapter_lora & ad, const llama_model & model, const std::string & path,
                                  ggml_type type, std::string & err);

// Writes the adapter as a PEFT directory for the Hugging Face model (created if absent; each
// file written whole or not at all): lora_B of q/k back in Hugging Face row order.
bool llama_adapter_lora_save_peft(const llama_adapter_lora & ad, const llama_model & model, const std::string & dir,
                                  std::string & err);

// PEFT directory reading and writing (llama-adapter-peft.cpp); used by the two above.
bool llama_adapter_lora_load_peft(llama_adapter_lora & ad, const llama_model & model, const std::string & dir,
                                  std::string & err);

// Empty when rank r fits base weight w, else why not: 1 <= r <= min(65536, n_in, n_out), the same
// bound for a rank asked for (--lora-r) and one read from a file (a larger r adds nothing B A
// could not already express); internal.
std::string llama_adapter_rank_error(const ggml_tensor * w, int64_t r);
// Empty when every value of v[0..n) is finite, else a message naming tensor `what` and the first
// bad value (an adapter holding NaN or Inf makes garbage of every token); internal.
std::string llama_adapter_non_finite_error(const float * v, size_t n, const std::string & what);
// Adds an A/B pair for base weight w (F32, zero) to ad.ctx (which must have room); internal.
bool llama_adapter_lora_add(llama_adapter_lora & ad, const ggml_tensor * w, int32_t r, std::string & err);
// Sets ad.targets to the short names of the projections the adapter covers; internal.
void llama_adapter_lora_list_targets(llama_adapter_lora & ad, const llama_model & model);
// The base tensor a GGUF tensor name refers to in the model (nullptr if none); internal.
const ggml_tensor * llama_adapter_base_tensor(const llama_model & model, const std::string & name);

// The adapters a forward graph applies, with their scales; dropout (training) multiplies the
// input of every A by a mask the graph builder creates (and the caller fills).
struct llm_lora_entry {
    const llama_adapter_lora * adapter;
    float scale;
};
struct llm_lora_set {
    std::vector<llm_lora_entry> entries;
    bool dropout = false;  // create dropout masks (training)
    // Precision of the backward products through the frozen base weights (training; see
    // ggml_mul_mat_set_prec: GGML_PREC_INT8 runs them on the forward's integer kernels).
    enum ggml_prec base_prec = GGML_PREC_DEFAULT;
    bool empty() const { return entries.empty(); }
};
