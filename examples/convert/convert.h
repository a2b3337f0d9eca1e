// convert.h - what the readers (llama2.c, Hugging Face) hand to the writer: GGUF metadata and a
// list of tensors, each with a function producing its bytes on demand, so that only one tensor
// is in memory at a time.
#pragma once

#include "ggml.h"
#include "gguf.h"

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

// Row permutation GGUF llama files apply to Q and K of checkpoints using the rotate-half RoPE
// layout (Hugging Face): within each head, row j * (hd/2) + i moves to row i * 2 + j.
void permute_qk_rows(std::vector<uint8_t> & data, int64_t n_rows, size_t row_bytes, int64_t n_head);

// Readers. Each throws convert_error on a missing, malformed or inconsistent input.
model_plan load_llama2c(const std::string & model_path, const std::string & tokenizer_path);
model_plan load_hf(const std::string & dir);

// A read-only memory mapping of a whole file, shared by the tensor readers that point into it.
struct mapped_file {
    std::string path;
    const uint8_t * data = nullptr;
    size_t size = 0;
    ~mapped_file();
};
// Throws convert_error if the file cannot be opened or mapped (an empty file maps to size 0).
std::shared_ptr<mapped_file> map_file(const std::string & path);

// Tells the kernel the mapped input bytes [p, p + n) will not be read again, so resident memory
// stays near one tensor instead of growing to the whole model (pages are re-read if touched).
void release_pages(const void * p, size_t n);
