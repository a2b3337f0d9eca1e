// gguf.h - read and write GGUF files (metadata key-value pairs, tensor infos, tensor data).
// Names and semantics follow ggml's GGUF API. The format (little-endian):
//   magic "GGUF", u32 version, u64 n_tensors, u64 n_kv,
//   n_kv x { string key, u32 type, value },
//   n_tensors x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset },
//   padding to `general.alignment` (default 32), then the data section; each tensor's offset is
//   relative to the data section and a multiple of the alignment.
// A string is a u64 byte length followed by the bytes (no terminating zero). An array value is
// u32 element type, u64 count, then the elements.
//
// Reading accepts versions 2 and 3 (same layout) and checks everything against the file size:
// any malformed file makes gguf_init_from_file return NULL with a message on stderr. Writing
// produces version 3. Getters called with a wrong index or type abort (programming errors).
#pragma once

#include "ggml.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GGUF_MAGIC   "GGUF"
#define GGUF_VERSION 3

#define GGUF_KEY_GENERAL_ALIGNMENT "general.alignment"
#define GGUF_DEFAULT_ALIGNMENT     32

enum gguf_type {
    GGUF_TYPE_UINT8   = 0,
    GGUF_TYPE_INT8    = 1,
    GGUF_TYPE_UINT16  = 2,
    GGUF_TYPE_INT16   = 3,
    GGUF_TYPE_UINT32  = 4,
    GGUF_TYPE_INT32   = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL    = 7,   // one byte, 0 or 1
    GGUF_TYPE_STRING  = 8,
    GGUF_TYPE_ARRAY   = 9,
    GGUF_TYPE_UINT64  = 10,
    GGUF_TYPE_INT64   = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT,         // marks the end of the enum
};

struct gguf_context;

struct gguf_init_params {
    // true: read only the metadata; tensors created in *ctx get data == NULL.
    bool no_alloc;

    // Not NULL: *ctx receives a new ggml context holding one tensor per tensor info (same name,
    // type and shape, in file order). Unless no_alloc, the tensors' data is loaded: read into
    // the ggml context's own memory (it outlives the gguf_context), or mapped, see use_mmap.
    struct ggml_context ** ctx;

    // With no_alloc == false: map the file instead of reading it. Each tensor's data (and
    // gguf_get_data) then points into the mapping without any copy; the mapping lives as long
    // as the gguf_context, so free the gguf_context only after the last use of the tensors'
    // data. It is private and read-only: a caller that rearranges data in place (weight
    // repacking) first makes those pages writable (mprotect), which copies them and never
    // touches the file. Works with ctx == NULL too (use gguf_get_data).
    // An extension of ggml's struct: designated initializers written for ggml leave it false.
    bool use_mmap;
};

struct gguf_context * gguf_init_empty(void);
// NULL on any error (missing file, malformed content), with a message on stderr.
struct gguf_context * gguf_init_from_file(const char * fname, struct gguf_init_params params);
void gguf_free(struct gguf_context * ctx);  // NULL is allowed

const char * gguf_type_name(enum gguf_type type);  // "u8", "str", "arr", ...; NULL if unknown

uint32_t gguf_get_version    (const struct gguf_context * ctx);  // version read (2 or 3); 3 when not read
size_t   gguf_get_alignment  (const struct gguf_context * ctx);
// Where the data section starts in the file this context was read from (0 if not read from a file).
size_t   gguf_get_data_offset(const struct gguf_context * ctx);
// The data section in memory (tensor i at gguf_get_data(ctx) + gguf_get_tensor_offset(ctx, i)):
// the loaded data when read with params.ctx and !no_alloc, or the mapping; NULL otherwise.
void *   gguf_get_data       (const struct gguf_context * ctx);

// ---- key-value pairs ---------------------------------------------------------------------
int64_t      gguf_get_n_kv(const struct gguf_context * ctx);
int64_t      gguf_find_key(const struct gguf_context * ctx, const char * key);  // -1 if absent
const char * gguf_get_key (const struct gguf_context * ctx, int64_t key_id);

enum gguf_type gguf_get_kv_type (const struct gguf_context * ctx, int64_t key_id);  // GGUF_TYPE_ARRAY for arrays
enum gguf_type gguf_get_arr_type(const struct gguf_context * ctx, int64_t key_id);  // element type of an array

// Each aborts if key_id is out of range or the value is not a single value of that type.
uint8_t      gguf_get_val_u8  (const struct gguf_context * ctx, int64_t key_id);
int8_t       gguf_get_val_i8  (const struct gguf_context * ctx, int64_t key_id);
uint16_t     gguf_get_val_u16 (const struct gguf_context * ctx, int64_t key_id);
int16_t      gguf_get_val_i16 (const struct gguf_context * ctx, int64_t key_id);
uint32_t     gguf_get_val_u32 (const struct gguf_context * ctx, int64_t key_id);
int32_t      gguf_get_val_i32 (const struct gguf_context * ctx, int64_t key_id);
float        gguf_get_val_f32 (const struct gguf_context * ctx, int64_t key_id);
uint64_t     gguf_get_val_u64 (const struct gguf_context * ctx, int64_t key_id);
int64_t      gguf_get_val_i64 (const struct gguf_context * ctx, int64_t key_id);
double       gguf_get_val_f64 (const struct gguf_context * ctx, int64_t key_id);
bool         gguf_get_val_bool(const struct gguf_context * ctx, int64_t key_id);
const char * gguf_get_val_str (const struct gguf_context * ctx, int64_t key_id);
// Raw bytes of a single non-string value.
const void * gguf_get_val_data(const struct gguf_context * ctx, int64_t key_id);

// Arrays. gguf_get_arr_data: the elements packed as in the file (bool: one byte each); not for
// string arrays, whose elements come from gguf_get_arr_str. Strings are zero-terminated copies.
size_t       gguf_get_arr_n   (const struct gguf_context * ctx, int64_t key_id);
const void * gguf_get_arr_data(const struct gguf_context * ctx, int64_t key_id);
const char * gguf_get_arr_str (const struct gguf_context * ctx, int64_t key_id, size_t i);

// ---- tensor infos --------------------------------------------------------------------------
int64_t        gguf_get_n_tensors    (const struct gguf_context * ctx);
int64_t        gguf_find_tensor      (const struct gguf_context * ctx, const char * name);  // -1 if absent
size_t         gguf_get_tensor_offset(const struct gguf_context * ctx, int64_t tensor_id);  // within the data section
const char *   gguf_get_tensor_name  (const struct gguf_context * ctx, int64_t tensor_id);
enum ggml_type gguf_get_tensor_type  (const struct gguf_context * ctx, int64_t tensor_id);
size_t         gguf_get_tensor_size  (const struct gguf_context * ctx, int64_t tensor_id);  // bytes

// ---- building / modifying ------------------------------------------------------------------
// Removes key if present; returns the id it had (-1 if absent). Later ids shift down by one.
int64_t gguf_remove_key(struct gguf_context * ctx, const char * key);

// Each replaces an existing pair with that key or adds one; the new pair is always at the back.
// general.alignment may only be set as a u32 power of two (else abort); changing it re-lays out
// the tensor offsets.
void gguf_set_val_u8  (struct gguf_context * ctx, const char * key, uint8_t      val);
void gguf_set_val_i8  (struct gguf_context * ctx, const char * key, int8_t       val);
void gguf_set_val_u16 (struct gguf_context * ctx, const char * key, uint16_t     val);
void gguf_set_val_i16 (struct gguf_context * ctx, const char * key, int16_t      val);
void gguf_set_val_u32 (struct gguf_context * ctx, const char * key, uint32_t     val);
void gguf_set_val_i32 (struct gguf_context * ctx, const char * key, int32_t      val);
void gguf_set_val_f32 (struct gguf_context * ctx, const char * key, float        val);
void gguf_set_val_u64 (struct gguf_context * ctx, const char * key, uint64_t     val);
void gguf_set_val_i64 (struct gguf_context * ctx, const char * key, int64_t      val);
void gguf_set_val_f64 (struct gguf_context * ctx, const char * key, double       val);
void gguf_set_val_bool(struct gguf_context * ctx, const char * key, bool         val);
void gguf_set_val_str (struct gguf_context * ctx, const char * key, const char * val);

// An array of n elements of type (not STRING or ARRAY) copied from data (n * type size bytes).
void gguf_set_arr_data(struct gguf_context * ctx, const char * key, enum gguf_type type, const void * data, size_t n);
// An array of n strings copied from data.
void gguf_set_arr_str (struct gguf_context * ctx, const char * key, const char ** data, size_t n);

// Sets (replaces or adds) every key-value pair of src in ctx, in src's order.
void gguf_set_kv(struct gguf_context * ctx, const struct gguf_context * src);

// Adds a tensor info (name, type, shape of the tensor; the tensor must be contiguous and its
// name unique, else abort). Its offset follows the current last tensor (aligned); its data is
// tensor->data, which is not copied: it is read when the file is written.
void gguf_add_tensor(struct gguf_context * ctx, const struct ggml_tensor * tensor);

// Changes a tensor's type (its shape must fit the type's block size); all tensor offsets are
// laid out again, back to back in order. Set matching data with gguf_set_tensor_data.
void gguf_set_tensor_type(struct gguf_context * ctx, const char * name, enum ggml_type type);

// Where the tensor's bytes (gguf_get_tensor_size of them) are read from when writing; the
// pointer is kept, not the bytes, so they must stay valid until the file is written.
void gguf_set_tensor_data(struct gguf_context * ctx, const char * name, const void * data);

// ---- writing -------------------------------------------------------------------------------
// Writes a version 3 file: the metadata and, unless only_meta, the tensor data (every tensor
// needs data then). The file is written under a temporary name in the same directory and
// renamed into place only once complete, so fname is written whole or not at all.
// Returns false with a message on stderr on any error.
bool gguf_write_to_file(const struct gguf_context * ctx, const char * fname, bool only_meta);

// Size in bytes of the metadata (header, key-value pairs, tensor infos, padding to the alignment).
size_t gguf_get_meta_size(const struct gguf_context * ctx);
// Writes those gguf_get_meta_size bytes to data.
void   gguf_get_meta_data(const struct gguf_context * ctx, void * data);

#ifdef __cplusplus
}
#endif
