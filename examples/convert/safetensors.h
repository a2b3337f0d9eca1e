// safetensors.h - memory-mapped safetensors files (one file or shards listed by
// model.safetensors.index.json): u64 header length, JSON header {name: {dtype, shape,
// data_offsets}}, then the data. F32, F16 and BF16 tensors are readable.
#pragma once

#include "convert.h"

#include <map>

struct st_tensor {
    std::string name;
    ggml_type type;                  // F32, F16 or BF16
    std::vector<int64_t> shape;      // as stored: shape[0] is the outermost (row) dimension
    std::shared_ptr<mapped_file> file;
    const uint8_t * data = nullptr;  // into file's mapping
    size_t nbytes = 0;
};

// Every tensor of the model in dir (model.safetensors, or the shards of the index, or all
// *.safetensors files). Throws convert_error on a missing, malformed or inconsistent file.
std::map<std::string, st_tensor> safetensors_load_dir(const std::string & dir);
// The tensors of one file (added to out).
void safetensors_load_file(const std::string & path, std::map<std::string, st_tensor> & out);
