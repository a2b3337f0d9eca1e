// gguf-impl.h - the in-memory form of a GGUF context, shared by gguf.cpp (API), gguf-read.cpp
// (parsing and loading) and gguf-write.cpp (serialization).
#pragma once

#include "ggml-impl.h"
#include "gguf.h"

#include <stdint.h>
#include <string>
#include <vector>

// One key-value pair. Arrays and single values share a representation: n elements of `type`.
struct gguf_kv {
    std::string    key;
    enum gguf_type type = GGUF_TYPE_UINT8;  // the value's type; for an array its element type
    bool           is_array = false;
    std::vector<uint8_t>     data;  // packed little-endian elements (all types but STRING)
    std::vector<std::string> strs; // STRING elements (one for a single string)

    size_t n_elements() const;
};

struct gguf_tensor_info {
    std::string    name;
    uint32_t       n_dims = 1;           // as written in the file (1..GGML_MAX_DIMS)
    int64_t        ne[GGML_MAX_DIMS] = {1, 1, 1, 1};
    enum ggml_type type = GGML_TYPE_F32;
    uint64_t       offset = 0;           // within the data section, a multiple of the alignment
    size_t         size = 0;             // bytes of data
    const void *   data = nullptr;       // where the bytes are in memory (NULL: none yet)
};

struct gguf_context {
    uint32_t version = GGUF_VERSION;
    size_t   alignment = GGUF_DEFAULT_ALIGNMENT;
    std::vector<gguf_kv>          kv;
    std::vector<gguf_tensor_info> tensors;

    size_t data_offset = 0;       // start of the data section in the file read (0: not read)
    void * data = nullptr;        // data section in memory (ggml context buffer or mapping)
    void * map_addr = nullptr;    // read-only mapping of the whole file (use_mmap)
    size_t map_size = 0;
};

// Bytes per element of a non-string, non-array type (0 for STRING, ARRAY and unknown ids).
size_t gguf_type_size(enum gguf_type type);

// Rounds x up to a multiple of the power of two `align`.
static inline uint64_t gguf_pad(uint64_t x, uint64_t align) { return (x + align - 1) & ~(align - 1); }

// Bytes of data of a tensor of this type and shape; false if the size does not fit in size_t
// (the caller has checked the type and that ne[0] is a multiple of its block size).
bool gguf_tensor_nbytes(enum ggml_type type, const int64_t ne[GGML_MAX_DIMS], size_t * nbytes);

// Serialized metadata (header, key-value pairs, tensor infos, padding to the alignment).
std::vector<uint8_t> gguf_serialize_meta(const struct gguf_context * ctx);
