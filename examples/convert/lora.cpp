// lora.cpp - llama-convert --lora: a PEFT LoRA adapter directory to llama.cpp's GGUF adapter
// format, checked against the base model (GGUF) it adapts, which gives the tensor names, shapes
// and the head counts for the Q/K row order (llama_adapter_lora_load, llama_adapter_lora_save_gguf).
#include "convert.h"

#include "llama-adapter.h"
#include "llama-model.h"

#include <cstdio>
#include <sys/stat.h>

namespace {

// The type of the adapter's tensors when they all have one (F32, F16 or BF16), else F32.
ggml_type source_type(const std::string & dir) {
    std::map<std::string, st_tensor> ts;
    try {
        safetensors_load_file(dir + "/adapter_model.safetensors", ts);
    } catch (const std::exception &) {
        return GGML_TYPE_F32;  // the adapter loader has already reported anything wrong
    }
    ggml_type type = GGML_TYPE_COUNT;
    for (const auto & kv : ts) {
        if (type == GGML_TYPE_COUNT) type = kv.second.type;
        else if (kv.second.type != type) return GGML_TYPE_F32;
    }
    return type == GGML_TYPE_COUNT ? GGML_TYPE_F32 : type;
}

}  // namespace

void convert_lora(const std::string & peft_dir, const std::string & base, const std::string & out, const std::string & outtype) {
    struct stat st;
    if (stat(peft_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        throw convert_error("--lora: '" + peft_dir + "' is not a directory (a PEFT adapter: adapter_config.json and " +
                            "adapter_model.safetensors)");
    }
    llama_model model;
    llama_model_params mp = llama_model_default_params();
    mp.use_mmap = true;     // only the shapes are needed: the weights are never read
    mp.use_repack = false;
    mp.n_gpu_layers = 0;    // host memory
    std::string err;
    if (!llama_model_load(model, base.c_str(), mp, err)) throw convert_error("cannot load the base model '" + base + "': " + err);
    llama_adapter_lora ad;
    if (!llama_adapter_lora_load(ad, model, peft_dir, err)) throw convert_error("cannot load the LoRA adapter: " + err);
    ggml_type type = outtype.empty()      ? source_type(peft_dir)
                     : outtype == "f32"   ? GGML_TYPE_F32
                     : outtype == "f16"   ? GGML_TYPE_F16
                     : outtype == "bf16"  ? GGML_TYPE_BF16
                                          : GGML_TYPE_COUNT;
    if (type == GGML_TYPE_COUNT) throw convert_error("--outtype for an adapter must be f32, f16 or bf16, not '" + outtype + "'");
    fprintf(stderr, "llama-convert: %s: %zu LoRA pairs, rank %d, alpha %g, for %s -> %s as %s\n", peft_dir.c_str(),
            ad.weights.size(), ad.rank(), ad.alpha, base.c_str(), out.c_str(), ggml_type_name(type));
    if (!llama_adapter_lora_save_gguf(ad, model, out, type, err)) throw convert_error(err);
    fprintf(stderr, "llama-convert: wrote %s\n", out.c_str());
}
