// convert.h - what the readers (llama2.c, Hugging Face) hand to the writer: GGUF metadata and a
// list of tensors, each with a function producing its bytes on demand, so that only one tensor
// is in memory at a time.
#pragma once

#include "ggml.h"
#include "gguf.h"
#include "llama-safetensors.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

// Any failure of the converter: the message is printed and the program exits non-zero.
struct convert_error : std::runtime_error {
    explicit convert_error(const std::string & m) : std::runtime_error(m) {}
};

struct source_tensor {
    std::string name;        // GGUF name (token_embd.weight, blk.0.attn_q.weight, ...)
    std::vector<int64_t> ne; // GGUF shape: ne[0] is the row length
    ggml_type src_type;      // F32, F16 or BF16: the type of the bytes `read` produces
    // Appends/fills the tensor's bytes in src_type (ggml_row_size(src_type, ne[0]) * rows).
    std::function<void(std::vector<uint8_t> &)> read;
};

struct model_plan {
    gguf_context * meta = nullptr;  // key-value pairs (owned; freed by the writer's caller)
    std::vector<source_tensor> tensors;
};

// Readers. Each throws convert_error on a missing, malformed or inconsistent input.
model_plan load_llama2c(const std::string & model_path, const std::string & tokenizer_path);
model_plan load_hf(const std::string & dir);

// llama-convert --lora (lora.cpp): a PEFT adapter directory to a GGUF adapter for the base model;
// outtype "" (the adapter's type), f32, f16 or bf16. Throws convert_error.
void convert_lora(const std::string & peft_dir, const std::string & base, const std::string & out, const std::string & outtype);
