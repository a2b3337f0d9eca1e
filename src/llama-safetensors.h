// llama-safetensors.h - memory-mapped safetensors files (one file or shards listed by
// model.safetensors.index.json): u64 header length, JSON header {name: {dtype, shape,
// data_offsets}}, then the data. F32, F16 and BF16 tensors are readable and writable.
#pragma once

#include "ggml.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

// A read-only memory mapping of a whole file, shared by the tensor readers that point into it.
struct mapped_file {
    std::string path;
    const uint8_t * data = nullptr;
    size_t size = 0;
    ~mapped_file();
};
// Throws std::runtime_error if the file cannot be opened or mapped (an empty file maps to size 0).
std::shared_ptr<mapped_file> map_file(const std::string & path);

// Tells the kernel the mapped input bytes [p, p + n) will not be read again, so resident memory
// stays near one tensor instead of growing to the whole model (pages are re-read if touched).
void release_pages(const void * p, size_t n);

struct st_tensor {
    std::string name;
    ggml_type type;                  // F32, F16 or BF16
    std::vector<int64_t> shape;      // as stored: shape[0] is the outermost (row) dimension
    std::shared_ptr<mapped_file> file;
    const uint8_t * data = nullptr;  // into file's mapping
    size_t nbytes = 0;
};

// The tensor's values as F32 (its type's row converter).
std::vector<float> safetensors_to_f32(const st_tensor & t);

// Every tensor of the model in dir (model.safetensors, or the shards of the index, or all
// *.safetensors files). Throws std::runtime_error on a missing, malformed or inconsistent file.
std::map<std::string, st_tensor> safetensors_load_dir(const std::string & dir);
// The tensors of one file (added to out).
void safetensors_load_file(const std::string & path, std::map<std::string, st_tensor> & out);

// What safetensors_write stores: a name, F32/F16/BF16 data and its shape (outermost first).
struct st_out_tensor {
    std::string name;
    ggml_type type;
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;
};
// Writes the tensors (in name order, as safetensors requires none but readers expect it) with
// the __metadata__ strings, into a temporary file renamed into place when complete. Throws
// std::runtime_error on failure, leaving no file behind.
void safetensors_write(const std::string & path, const std::vector<st_out_tensor> & tensors,
                       const std::map<std::string, std::string> & metadata);

// s as a JSON string literal: quoted, with quotes, backslashes and control characters escaped.
std::string json_string(const std::string & s);

// Writes text to path whole or not at all (a temporary file PATH.tmp.PID.N renamed into place).
// Throws std::runtime_error on failure.
void write_file_atomic(const std::string & path, const std::string & text);

// Removes the temporaries that a killed writer of path left (PATH.tmp.PID.N of a process that no
// longer exists, as write_file_atomic and gguf_write_to_file name them, and the PATH.tmp.XXXXXX
// of earlier versions); returns the paths removed.
std::vector<std::string> remove_stale_temporaries(const std::string & path);
