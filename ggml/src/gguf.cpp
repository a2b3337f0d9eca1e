// gguf.cpp - the GGUF context: creation, getters and setters of key-value pairs and tensor
// infos. Parsing a file lives in gguf-read.cpp, writing one in gguf-write.cpp.
#include "gguf-impl.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <algorithm>

// ---- types ---------------------------------------------------------------------------------
size_t gguf_type_size(enum gguf_type type) {
    switch (type) {
        case GGUF_TYPE_UINT8:   return 1;
        case GGUF_TYPE_INT8:    return 1;
        case GGUF_TYPE_UINT16:  return 2;
        case GGUF_TYPE_INT16:   return 2;
        case GGUF_TYPE_UINT32:  return 4;
        case GGUF_TYPE_INT32:   return 4;
        case GGUF_TYPE_FLOAT32: return 4;
        case GGUF_TYPE_BOOL:    return 1;
        case GGUF_TYPE_UINT64:  return 8;
        case GGUF_TYPE_INT64:   return 8;
        case GGUF_TYPE_FLOAT64: return 8;
        default:                return 0;
    }
}

const char * gguf_type_name(enum gguf_type type) {
    switch (type) {
        case GGUF_TYPE_UINT8:   return "u8";
        case GGUF_TYPE_INT8:    return "i8";
        case GGUF_TYPE_UINT16:  return "u16";
        case GGUF_TYPE_INT16:   return "i16";
        case GGUF_TYPE_UINT32:  return "u32";
        case GGUF_TYPE_INT32:   return "i32";
        case GGUF_TYPE_FLOAT32: return "f32";
        case GGUF_TYPE_BOOL:    return "bool";
        case GGUF_TYPE_STRING:  return "str";
        case GGUF_TYPE_ARRAY:   return "arr";
        case GGUF_TYPE_UINT64:  return "u64";
        case GGUF_TYPE_INT64:   return "i64";
        case GGUF_TYPE_FLOAT64: return "f64";
        default:                return nullptr;
    }
}

size_t gguf_kv::n_elements() const {
    return type == GGUF_TYPE_STRING ? strs.size() : data.size() / gguf_type_size(type);
}

bool gguf_tensor_nbytes(enum ggml_type type, const int64_t ne[GGML_MAX_DIMS], size_t * nbytes) {
    const uint64_t blocks = (uint64_t) (ne[0] / ggml_blck_size(type));
    uint64_t n;
    if (__builtin_mul_overflow(blocks, (uint64_t) ggml_type_size(type), &n)) return false;
    for (int i = 1; i < GGML_MAX_DIMS; i++) {
        if (__builtin_mul_overflow(n, (uint64_t) ne[i], &n)) return false;
    }
    if (n > SIZE_MAX) return false;
    *nbytes = (size_t) n;
    return true;
}

// ---- context -------------------------------------------------------------------------------
struct gguf_context * gguf_init_empty(void) {
    return new gguf_context();
}

void gguf_free(struct gguf_context * ctx) {
    if (!ctx) return;
    if (ctx->map_addr) munmap(ctx->map_addr, ctx->map_size);
    delete ctx;
}

uint32_t gguf_get_version(const struct gguf_context * ctx) { return ctx->version; }
size_t gguf_get_alignment(const struct gguf_context * ctx) { return ctx->alignment; }
size_t gguf_get_data_offset(const struct gguf_context * ctx) { return ctx->data_offset; }
void * gguf_get_data(const struct gguf_context * ctx) { return ctx->data; }

// ---- key-value getters ---------------------------------------------------------------------
static const gguf_kv & kv_at(const gguf_context * ctx, int64_t key_id) {
    GGML_ASSERT(key_id >= 0 && key_id < (int64_t) ctx->kv.size());
    return ctx->kv[(size_t) key_id];
}

// A single (non-array) value of the given type.
static const gguf_kv & single_value(const gguf_context * ctx, int64_t key_id, enum gguf_type type) {
    const gguf_kv & kv = kv_at(ctx, key_id);
    if (kv.is_array || kv.type != type) {
        GGML_ABORT("gguf: key '%s' holds %s%s, not a single %s", kv.key.c_str(), kv.is_array ? "an array of " : "a ",
                   gguf_type_name(kv.type), gguf_type_name(type));
    }
    return kv;
}

template <typename T>
static T get_single(const gguf_context * ctx, int64_t key_id, enum gguf_type type) {
    const gguf_kv & kv = single_value(ctx, key_id, type);
    GGML_ASSERT(kv.data.size() == sizeof(T));
    T v;
    memcpy(&v, kv.data.data(), sizeof(T));
    return v;
}

int64_t gguf_get_n_kv(const struct gguf_context * ctx) { return (int64_t) ctx->kv.size(); }

int64_t gguf_find_key(const struct gguf_context * ctx, const char * key) {
    GGML_ASSERT(key);
    for (size_t i = 0; i < ctx->kv.size(); i++) {
        if (ctx->kv[i].key == key) return (int64_t) i;
    }
    return -1;
}

const char * gguf_get_key(const struct gguf_context * ctx, int64_t key_id) { return kv_at(ctx, key_id).key.c_str(); }

enum gguf_type gguf_get_kv_type(const struct gguf_context * ctx, int64_t key_id) {
    const gguf_kv & kv = kv_at(ctx, key_id);
    return kv.is_array ? GGUF_TYPE_ARRAY : kv.type;
}

enum gguf_type gguf_get_arr_type(const struct gguf_context * ctx, int64_t key_id) {
    const gguf_kv & kv = kv_at(ctx, key_id);
    if (!kv.is_array) GGML_ABORT("gguf: key '%s' is not an array", kv.key.c_str());
    return kv.type;
}

uint8_t  gguf_get_val_u8 (const struct gguf_context * ctx, int64_t key_id) { return get_single<uint8_t >(ctx, key_id, GGUF_TYPE_UINT8); }
int8_t   gguf_get_val_i8 (const struct gguf_context * ctx, int64_t key_id) { return get_single<int8_t  >(ctx, key_id, GGUF_TYPE_INT8); }
uint16_t gguf_get_val_u16(const struct gguf_context * ctx, int64_t key_id) { return get_single<uint16_t>(ctx, key_id, GGUF_TYPE_UINT16); }
int16_t  gguf_get_val_i16(const struct gguf_context * ctx, int64_t key_id) { return get_single<int16_t >(ctx, key_id, GGUF_TYPE_INT16); }
uint32_t gguf_get_val_u32(const struct gguf_context * ctx, int64_t key_id) { return get_single<uint32_t>(ctx, key_id, GGUF_TYPE_UINT32); }
int32_t  gguf_get_val_i32(const struct gguf_context * ctx, int64_t key_id) { return get_single<int32_t >(ctx, key_id, GGUF_TYPE_INT32); }
float    gguf_get_val_f32(const struct gguf_context * ctx, int64_t key_id) { return get_single<float   >(ctx, key_id, GGUF_TYPE_FLOAT32); }
uint64_t gguf_get_val_u64(const struct gguf_context * ctx, int64_t key_id) { return get_single<uint64_t>(ctx, key_id, GGUF_TYPE_UINT64); }
int64_t  gguf_get_val_i64(const struct gguf_context * ctx, int64_t key_id) { return get_single<int64_t >(ctx, key_id, GGUF_TYPE_INT64); }
double   gguf_get_val_f64(const struct gguf_context * ctx, int64_t key_id) { return get_single<double  >(ctx, key_id, GGUF_TYPE_FLOAT64); }
bool gguf_get_val_bool(const struct gguf_context * ctx, int64_t key_id) { return get_single<uint8_t>(ctx, key_id, GGUF_TYPE_BOOL) != 0; }

const char * gguf_get_val_str(const struct gguf_context * ctx, int64_t key_id) {
    return single_value(ctx, key_id, GGUF_TYPE_STRING).strs[0].c_str();
}

const void * gguf_get_val_data(const struct gguf_context * ctx, int64_t key_id) {
    const gguf_kv & kv = kv_at(ctx, key_id);
    if (kv.is_array || kv.type == GGUF_TYPE_STRING) {
        GGML_ABORT("gguf: key '%s': gguf_get_val_data needs a single non-string value", kv.key.c_str());
    }
    return kv.data.data();
}

size_t gguf_get_arr_n(const struct gguf_context * ctx, int64_t key_id) {
    const gguf_kv & kv = kv_at(ctx, key_id);
    if (!kv.is_array) GGML_ABORT("gguf: key '%s' is not an array", kv.key.c_str());
    return kv.n_elements();
}

const void * gguf_get_arr_data(const struct gguf_context * ctx, int64_t key_id) {
    const gguf_kv & kv = kv_at(ctx, key_id);
    if (!kv.is_array || kv.type == GGUF_TYPE_STRING) {
        GGML_ABORT("gguf: key '%s' is not an array of numbers (use gguf_get_arr_str for strings)", kv.key.c_str());
    }
    return kv.data.data();
}

const char * gguf_get_arr_str(const struct gguf_context * ctx, int64_t key_id, size_t i) {
    const gguf_kv & kv = kv_at(ctx, key_id);
    if (!kv.is_array || kv.type != GGUF_TYPE_STRING) GGML_ABORT("gguf: key '%s' is not an array of strings", kv.key.c_str());
    GGML_ASSERT(i < kv.strs.size());
    return kv.strs[i].c_str();
}

// ---- tensor info getters -------------------------------------------------------------------
static const gguf_tensor_info & tensor_at(const gguf_context * ctx, int64_t tensor_id) {
    GGML_ASSERT(tensor_id >= 0 && tensor_id < (int64_t) ctx->tensors.size());
    return ctx->tensors[(size_t) tensor_id];
}

int64_t gguf_get_n_tensors(const struct gguf_context * ctx) { return (int64_t) ctx->tensors.size(); }

int64_t gguf_find_tensor(const struct gguf_context * ctx, const char * name) {
    GGML_ASSERT(name);
    for (size_t i = 0; i < ctx->tensors.size(); i++) {
        if (ctx->tensors[i].name == name) return (int64_t) i;
    }
    return -1;
}

size_t gguf_get_tensor_offset(const struct gguf_context * ctx, int64_t tensor_id) { return tensor_at(ctx, tensor_id).offset; }
const char * gguf_get_tensor_name(const struct gguf_context * ctx, int64_t tensor_id) { return tensor_at(ctx, tensor_id).name.c_str(); }
enum ggml_type gguf_get_tensor_type(const struct gguf_context * ctx, int64_t tensor_id) { return tensor_at(ctx, tensor_id).type; }
size_t gguf_get_tensor_size(const struct gguf_context * ctx, int64_t tensor_id) { return tensor_at(ctx, tensor_id).size; }

// ---- setters -------------------------------------------------------------------------------
// Places every tensor back to back in order, each at an aligned offset.
static void layout_tensors(gguf_context * ctx) {
    uint64_t offset = 0;
    for (gguf_tensor_info & t : ctx->tensors) {
        t.offset = offset;
        offset = gguf_pad(offset + t.size, ctx->alignment);
    }
}

// Keeps ctx->alignment in step with the general.alignment pair (validated by the setters).
static void sync_alignment(gguf_context * ctx) {
    const int64_t id = gguf_find_key(ctx, GGUF_KEY_GENERAL_ALIGNMENT);
    const size_t alignment = id < 0 ? GGUF_DEFAULT_ALIGNMENT : gguf_get_val_u32(ctx, id);
    if (alignment != ctx->alignment) {
        ctx->alignment = alignment;
        layout_tensors(ctx);
    }
}

// general.alignment must be a u32 power of two (ggml aborts on anything else too).
static void check_reserved_key(const std::string & key, const gguf_kv & value) {
    if (key != GGUF_KEY_GENERAL_ALIGNMENT) return;
    uint32_t v = 0;
    if (!value.is_array && value.type == GGUF_TYPE_UINT32) memcpy(&v, value.data.data(), 4);
    if (v == 0 || (v & (v - 1)) != 0) {
        GGML_ABORT("gguf: " GGUF_KEY_GENERAL_ALIGNMENT " must be a u32 power of two");
    }
}

// Replaces or appends key with value (taking the key by value: it may point into ctx).
static void set_kv(gguf_context * ctx, std::string key, gguf_kv value) {
    check_reserved_key(key, value);
    gguf_remove_key(ctx, key.c_str());
    value.key = std::move(key);
    ctx->kv.push_back(std::move(value));
    if (ctx->kv.back().key == GGUF_KEY_GENERAL_ALIGNMENT) sync_alignment(ctx);
}

static gguf_kv make_value(enum gguf_type type, bool is_array, const void * data, size_t n) {
    gguf_kv kv;
    kv.type = type;
    kv.is_array = is_array;
    const size_t nbytes = n * gguf_type_size(type);
    if (nbytes) kv.data.assign((const uint8_t *) data, (const uint8_t *) data + nbytes);
    return kv;
}

int64_t gguf_remove_key(struct gguf_context * ctx, const char * key) {
    const int64_t id = gguf_find_key(ctx, key);
    if (id < 0) return -1;
    const bool was_alignment = ctx->kv[(size_t) id].key == GGUF_KEY_GENERAL_ALIGNMENT;
    ctx->kv.erase(ctx->kv.begin() + id);
    if (was_alignment) sync_alignment(ctx);
    return id;
}

template <typename T>
static void set_single(gguf_context * ctx, const char * key, enum gguf_type type, T val) {
    GGML_ASSERT(key);
    static_assert(sizeof(T) <= 8, "scalar");
    set_kv(ctx, key, make_value(type, false, &val, 1));
}

void gguf_set_val_u8 (struct gguf_context * ctx, const char * key, uint8_t  val) { set_single(ctx, key, GGUF_TYPE_UINT8, val); }
void gguf_set_val_i8 (struct gguf_context * ctx, const char * key, int8_t   val) { set_single(ctx, key, GGUF_TYPE_INT8, val); }
void gguf_set_val_u16(struct gguf_context * ctx, const char * key, uint16_t val) { set_single(ctx, key, GGUF_TYPE_UINT16, val); }
void gguf_set_val_i16(struct gguf_context * ctx, const char * key, int16_t  val) { set_single(ctx, key, GGUF_TYPE_INT16, val); }
void gguf_set_val_u32(struct gguf_context * ctx, const char * key, uint32_t val) { set_single(ctx, key, GGUF_TYPE_UINT32, val); }
void gguf_set_val_i32(struct gguf_context * ctx, const char * key, int32_t  val) { set_single(ctx, key, GGUF_TYPE_INT32, val); }
void gguf_set_val_f32(struct gguf_context * ctx, const char * key, float    val) { set_single(ctx, key, GGUF_TYPE_FLOAT32, val); }
void gguf_set_val_u64(struct gguf_context * ctx, const char * key, uint64_t val) { set_single(ctx, key, GGUF_TYPE_UINT64, val); }
void gguf_set_val_i64(struct gguf_context * ctx, const char * key, int64_t  val) { set_single(ctx, key, GGUF_TYPE_INT64, val); }
void gguf_set_val_f64(struct gguf_context * ctx, const char * key, double   val) { set_single(ctx, key, GGUF_TYPE_FLOAT64, val); }
void gguf_set_val_bool(struct gguf_context * ctx, const char * key, bool val) {
    set_single(ctx, key, GGUF_TYPE_BOOL, (uint8_t) (val ? 1 : 0));
}

void gguf_set_val_str(struct gguf_context * ctx, const char * key, const char * val) {
    GGML_ASSERT(key && val);
    gguf_kv kv;
    kv.type = GGUF_TYPE_STRING;
    kv.strs.emplace_back(val);
    set_kv(ctx, key, std::move(kv));
}

void gguf_set_arr_data(struct gguf_context * ctx, const char * key, enum gguf_type type, const void * data, size_t n) {
    GGML_ASSERT(key);
    if (gguf_type_size(type) == 0) {
        GGML_ABORT("gguf_set_arr_data: element type %d is not a number or bool type (strings: gguf_set_arr_str)", (int) type);
    }
    GGML_ASSERT(n == 0 || data);
    set_kv(ctx, key, make_value(type, true, data, n));
}

void gguf_set_arr_str(struct gguf_context * ctx, const char * key, const char ** data, size_t n) {
    GGML_ASSERT(key && (n == 0 || data));
    gguf_kv kv;
    kv.type = GGUF_TYPE_STRING;
    kv.is_array = true;
    kv.strs.reserve(n);
    for (size_t i = 0; i < n; i++) {
        GGML_ASSERT(data[i]);
        kv.strs.emplace_back(data[i]);
    }
    set_kv(ctx, key, std::move(kv));
}

void gguf_set_kv(struct gguf_context * ctx, const struct gguf_context * src) {
    if (ctx == src) return;
    for (const gguf_kv & kv : src->kv) set_kv(ctx, kv.key, kv);
}

void gguf_add_tensor(struct gguf_context * ctx, const struct ggml_tensor * tensor) {
    GGML_ASSERT(tensor);
    if (gguf_find_tensor(ctx, tensor->name) != -1) GGML_ABORT("gguf_add_tensor: duplicate tensor name '%s'", tensor->name);
    if (!ggml_is_contiguous(tensor)) GGML_ABORT("gguf_add_tensor: tensor '%s' is not contiguous", tensor->name);
    gguf_tensor_info info;
    info.name = tensor->name;
    info.n_dims = (uint32_t) ggml_n_dims(tensor);
    for (int i = 0; i < GGML_MAX_DIMS; i++) info.ne[i] = tensor->ne[i];
    info.type = tensor->type;
    GGML_ASSERT(gguf_tensor_nbytes(info.type, info.ne, &info.size));
    info.data = tensor->data;
    // After the tensor that ends last (a file read may have its tensors in any order).
    uint64_t end = 0;
    for (const gguf_tensor_info & t : ctx->tensors) end = std::max<uint64_t>(end, gguf_pad(t.offset + t.size, ctx->alignment));
    info.offset = end;
    ctx->tensors.push_back(std::move(info));
}

void gguf_set_tensor_type(struct gguf_context * ctx, const char * name, enum ggml_type type) {
    const int64_t id = gguf_find_tensor(ctx, name);
    if (id < 0) GGML_ABORT("gguf_set_tensor_type: no tensor named '%s'", name);
    GGML_ASSERT(ggml_type_is_valid(type));
    gguf_tensor_info & info = ctx->tensors[(size_t) id];
    if (info.ne[0] % ggml_blck_size(type) != 0) {
        GGML_ABORT("gguf_set_tensor_type: '%s' has ne[0] = %lld, not a multiple of the block size %lld of %s", name,
                   (long long) info.ne[0], (long long) ggml_blck_size(type), ggml_type_name(type));
    }
    info.type = type;
    GGML_ASSERT(gguf_tensor_nbytes(type, info.ne, &info.size));
    layout_tensors(ctx);
}

void gguf_set_tensor_data(struct gguf_context * ctx, const char * name, const void * data) {
    const int64_t id = gguf_find_tensor(ctx, name);
    if (id < 0) GGML_ABORT("gguf_set_tensor_data: no tensor named '%s'", name);
    ctx->tensors[(size_t) id].data = data;
}
