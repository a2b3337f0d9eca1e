// llama-gguf-stream.h - writes a GGUF file tensor by tensor into a temporary file next to the
// output, renamed into place only when complete (SIGINT/SIGTERM or an error remove it), so that
// only one tensor is in memory at a time. Used by llama-convert and llama-export-lora.
#pragma once

#include "ggml.h"
#include "gguf.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

struct gguf_stream_tensor {
    const char * name;
    size_t nbytes;  // bytes the producer will write
    // Fills buf with exactly nbytes bytes.
    std::function<void(std::vector<uint8_t> & buf)> produce;
};

// meta must already hold every tensor info (gguf_add_tensor + gguf_set_tensor_type) in the order
// of `tensors`. Throws std::runtime_error on failure (a producer may throw too), after removing
// the temporary file.
void gguf_stream_write(const gguf_context * meta, const std::vector<gguf_stream_tensor> & tensors,
                       const std::string & out_path);
