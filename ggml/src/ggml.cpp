// ggml.cpp - contexts (arenas), F16 / BF16 rows, tensor creation and properties, element access.
// The type table lives in ggml-type-table.cpp, op builders in ggml-ops.cpp, graphs in ggml-graph.cpp.
#include "ggml-impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <mutex>
#include <string>

// ---- errors --------------------------------------------------------------------------------
void ggml_abort(const char * file, int line, const char * fmt, ...) {
    fflush(stdout);
    fprintf(stderr, "%s:%d: ", file, line);
    va_list args;
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fprintf(stderr, "\n");
    abort();
}

// ggml_log_set's callback and its data, set together under one mutex (logging is rare).
static std::mutex g_log_mutex;
static ggml_log_callback g_log_callback = nullptr;  // nullptr: standard error
static void * g_log_user_data = nullptr;

void ggml_log_set(ggml_log_callback log_callback, void * user_data) {
    std::lock_guard<std::mutex> lock(g_log_mutex);
    g_log_callback = log_callback;
    g_log_user_data = log_callback ? user_data : nullptr;
}

static void log_at(ggml_log_level level, const char * fmt, va_list args) {
    va_list copy;
    va_copy(copy, args);
    const int n = vsnprintf(nullptr, 0, fmt, copy);
    va_end(copy);
    std::string text(n > 0 ? (size_t) n : 0, '\0');
    if (n > 0) vsnprintf(&text[0], text.size() + 1, fmt, args);
    std::lock_guard<std::mutex> lock(g_log_mutex);
    if (g_log_callback) {
        g_log_callback(level, text.c_str(), g_log_user_data);
    } else if (level >= GGML_LOG_LEVEL_WARN) {  // debug messages only reach a callback
        fputs(text.c_str(), stderr);
    }
}

void ggml_log_error(const char * fmt, ...) {
    va_list args;
    va_start(args, fmt);
    log_at(GGML_LOG_LEVEL_ERROR, fmt, args);
    va_end(args);
}

void ggml_log_warn(const char * fmt, ...) {
    va_list args;
    va_start(args, fmt);
    log_at(GGML_LOG_LEVEL_WARN, fmt, args);
    va_end(args);
}

void ggml_log_debug(const char * fmt, ...) {
    va_list args;
    va_start(args, fmt);
    log_at(GGML_LOG_LEVEL_DEBUG, fmt, args);
    va_end(args);
}

// ---- F16 / BF16 ----------------------------------------------------------------------------
float ggml_fp16_to_fp32(ggml_fp16_t x) { return ggml_compute_fp16_to_fp32(x); }
ggml_fp16_t ggml_fp32_to_fp16(float x) { return ggml_compute_fp32_to_fp16(x); }
float ggml_bf16_to_fp32(ggml_bf16_t x) { return ggml_compute_bf16_to_fp32(x); }
ggml_bf16_t ggml_fp32_to_bf16(float x) { return ggml_compute_fp32_to_bf16(x); }

void ggml_fp16_to_fp32_row(const ggml_fp16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = ggml_compute_fp16_to_fp32(x[i]);
}
void ggml_fp32_to_fp16_row(const float * x, ggml_fp16_t * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = ggml_compute_fp32_to_fp16(x[i]);
}
void ggml_bf16_to_fp32_row(const ggml_bf16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = ggml_compute_bf16_to_fp32(x[i]);
}
void ggml_fp32_to_bf16_row(const float * x, ggml_bf16_t * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = ggml_compute_fp32_to_bf16(x[i]);
}

// The type table (names, sizes, converters, what each type may be used for) and its accessors:
// ggml-type-table.cpp.

// ---- op names ------------------------------------------------------------------------------
static const char * const unary_op_names[GGML_UNARY_OP_COUNT] = {
    "ABS", "SGN", "NEG", "STEP", "TANH", "RELU", "SIGMOID", "GELU", "SILU", "EXP", "GELU_ERF",
};

const char * ggml_unary_op_name(enum ggml_unary_op op) {
    return op >= 0 && op < GGML_UNARY_OP_COUNT ? unary_op_names[op] : "?";
}
const char * ggml_op_desc(const struct ggml_tensor * t) {
    return t->op == GGML_OP_UNARY ? ggml_unary_op_name(ggml_get_unary_op(t)) : ggml_op_name(t->op);
}


// ---- context -------------------------------------------------------------------------------
static size_t pad_to(size_t x, size_t n) { return (x + n - 1) / n * n; }

struct ggml_context * ggml_init(struct ggml_init_params params) {
    ggml_context * ctx = (ggml_context *) malloc(sizeof(ggml_context));
    if (!ctx) return nullptr;
    const size_t mem_size = params.mem_buffer ? params.mem_size : pad_to(params.mem_size, GGML_MEM_ALIGN);
    ctx->mem_size = mem_size;
    ctx->mem_buffer = params.mem_buffer;
    ctx->mem_buffer_owned = false;
    if (!ctx->mem_buffer && mem_size > 0) {
        ctx->mem_buffer = aligned_alloc(GGML_MEM_ALIGN, mem_size);
        if (!ctx->mem_buffer) {
            ggml_log_error("ggml_init: cannot allocate %zu bytes\n", mem_size);
            free(ctx);
            return nullptr;
        }
        ctx->mem_buffer_owned = true;
    }
    ctx->no_alloc = params.no_alloc;
    ctx->n_objects = 0;
    ctx->objects_begin = nullptr;
    ctx->objects_end = nullptr;
    return ctx;
}

void ggml_reset(struct ggml_context * ctx) {
    if (!ctx) return;
    ctx->n_objects = 0;
    ctx->objects_begin = nullptr;
    ctx->objects_end = nullptr;
}

void ggml_free(struct ggml_context * ctx) {
    if (!ctx) return;
    if (ctx->mem_buffer_owned) free(ctx->mem_buffer);
    free(ctx);
}

size_t ggml_used_mem(const struct ggml_context * ctx) {
    return ctx->objects_end ? ctx->objects_end->offs + ctx->objects_end->size : 0;
}
bool ggml_get_no_alloc(struct ggml_context * ctx) { return ctx->no_alloc; }
void ggml_set_no_alloc(struct ggml_context * ctx, bool no_alloc) { ctx->no_alloc = no_alloc; }
void * ggml_get_mem_buffer(const struct ggml_context * ctx) { return ctx->mem_buffer; }
size_t ggml_get_mem_size(const struct ggml_context * ctx) { return ctx->mem_size; }

size_t ggml_get_max_tensor_size(const struct ggml_context * ctx) {
    size_t max_size = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        const size_t n = ggml_nbytes(t);
        if (n > max_size) max_size = n;
    }
    return max_size;
}

// Arena bytes one tensor struct takes in a no_alloc context: the header slot plus the struct.
size_t ggml_tensor_overhead(void) {
    return pad_to(GGML_OBJECT_SIZE, GGML_MEM_ALIGN) + pad_to(GGML_TENSOR_SIZE, GGML_MEM_ALIGN);
}

// Appends an object of `size` payload bytes; NULL (with a message) when the arena is full.
static ggml_object * new_object(ggml_context * ctx, ggml_object_type type, size_t size) {
    const size_t cur_end = ggml_used_mem(ctx);
    const size_t size_needed = pad_to(size, GGML_MEM_ALIGN);
    char * const mem = (char *) ctx->mem_buffer;
    // Objects are laid out [header][payload] with the header right before the payload and each
    // payload aligned to GGML_MEM_ALIGN, so a tensor's header is found from the tensor pointer.
    const size_t payload = pad_to(cur_end + GGML_OBJECT_SIZE, GGML_MEM_ALIGN);
    if (size_needed > ctx->mem_size || payload > ctx->mem_size - size_needed) {
        ggml_log_error("ggml: not enough space in the context's memory pool (needed %zu, available %zu)\n",
                       payload + size_needed, ctx->mem_size);
        return nullptr;
    }
    ggml_object * obj = (ggml_object *) (mem + payload - GGML_OBJECT_SIZE);
    obj->offs = payload;
    obj->size = size_needed;
    obj->next = nullptr;
    obj->type = type;
    if (ctx->objects_end) ctx->objects_end->next = obj; else ctx->objects_begin = obj;
    ctx->objects_end = obj;
    ctx->n_objects++;
    return obj;
}

void * ggml_new_buffer(struct ggml_context * ctx, size_t nbytes) {
    ggml_object * obj = new_object(ctx, GGML_OBJECT_TYPE_WORK_BUFFER, nbytes);
    return obj ? (char *) ctx->mem_buffer + obj->offs : nullptr;
}

void * ggml_new_graph_object(struct ggml_context * ctx, size_t nbytes);
void * ggml_new_graph_object(struct ggml_context * ctx, size_t nbytes) {
    ggml_object * obj = new_object(ctx, GGML_OBJECT_TYPE_GRAPH, nbytes);
    return obj ? (char *) ctx->mem_buffer + obj->offs : nullptr;
}

// ---- tensors -------------------------------------------------------------------------------
// A tensor's data (when the context owns it) follows its struct, starting on a cache line.
static const size_t TENSOR_DATA_OFFSET = pad_to(sizeof(ggml_tensor), GGML_MEM_ALIGN);

static ggml_tensor * new_tensor_impl(ggml_context * ctx, ggml_type type, int n_dims, const int64_t * ne,
                                     ggml_tensor * view_src, size_t view_offs) {
    GGML_ASSERT(ggml_type_is_valid(type));
    GGML_ASSERT(n_dims >= 1 && n_dims <= GGML_MAX_DIMS);
    if (view_src && view_src->view_src) {  // a view of a view points at the owner of the memory
        view_offs += view_src->view_offs;
        view_src = view_src->view_src;
    }
    int64_t ne_full[GGML_MAX_DIMS] = {1, 1, 1, 1};
    for (int i = 0; i < n_dims; i++) {
        GGML_ASSERT(ne[i] >= 0);
        ne_full[i] = ne[i];
    }
    GGML_ASSERT(ne_full[0] % ggml_blck_size(type) == 0);
    size_t data_size = ggml_row_size(type, ne_full[0]);
    for (int i = 1; i < GGML_MAX_DIMS; i++) data_size *= ne_full[i];

    void * data = view_src ? view_src->data : nullptr;
    if (data) data = (char *) data + view_offs;

    const size_t obj_alloc = (view_src == nullptr && !ctx->no_alloc) ? data_size : 0;
    ggml_object * obj = new_object(ctx, GGML_OBJECT_TYPE_TENSOR, TENSOR_DATA_OFFSET + obj_alloc);
    if (!obj) GGML_ABORT("ggml_new_tensor: context memory exhausted (mem_size %zu)", ctx->mem_size);

    ggml_tensor * t = (ggml_tensor *) ((char *) ctx->mem_buffer + obj->offs);
    memset(t, 0, sizeof(*t));
    t->type = type;
    t->op = GGML_OP_NONE;
    t->view_src = view_src;
    t->view_offs = view_offs;
    t->data = (view_src == nullptr && !ctx->no_alloc) ? (void *) ((char *) t + TENSOR_DATA_OFFSET) : data;
    for (int i = 0; i < GGML_MAX_DIMS; i++) t->ne[i] = ne_full[i];
    t->nb[0] = ggml_type_size(type);
    t->nb[1] = t->nb[0] * (t->ne[0] / ggml_blck_size(type));
    for (int i = 2; i < GGML_MAX_DIMS; i++) t->nb[i] = t->nb[i - 1] * t->ne[i - 1];
    return t;
}


struct ggml_tensor * ggml_new_tensor(struct ggml_context * ctx, enum ggml_type type, int n_dims, const int64_t * ne) {
    return new_tensor_impl(ctx, type, n_dims, ne, nullptr, 0);
}
struct ggml_tensor * ggml_new_tensor_1d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0) {
    return ggml_new_tensor(ctx, type, 1, &ne0);
}
struct ggml_tensor * ggml_new_tensor_2d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = {ne0, ne1};
    return ggml_new_tensor(ctx, type, 2, ne);
}
struct ggml_tensor * ggml_new_tensor_3d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2) {
    const int64_t ne[3] = {ne0, ne1, ne2};
    return ggml_new_tensor(ctx, type, 3, ne);
}
struct ggml_tensor * ggml_new_tensor_4d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return ggml_new_tensor(ctx, type, 4, ne);
}

// Internal: a tensor of the given shape sharing src's memory at offset (used by view builders).
struct ggml_tensor * ggml_new_view_impl(struct ggml_context * ctx, struct ggml_tensor * src, int n_dims,
                                        const int64_t * ne, size_t offset);
struct ggml_tensor * ggml_new_view_impl(struct ggml_context * ctx, struct ggml_tensor * src, int n_dims,
                                        const int64_t * ne, size_t offset) {
    return new_tensor_impl(ctx, src->type, n_dims, ne, src, offset);
}

// A view of src's memory as another type (ggml_view_2d_as).
struct ggml_tensor * ggml_new_view_as_impl(struct ggml_context * ctx, struct ggml_tensor * src, enum ggml_type type, int n_dims,
                                           const int64_t * ne, size_t offset);
struct ggml_tensor * ggml_new_view_as_impl(struct ggml_context * ctx, struct ggml_tensor * src, enum ggml_type type, int n_dims,
                                           const int64_t * ne, size_t offset) {
    return new_tensor_impl(ctx, type, n_dims, ne, src, offset);
}

struct ggml_tensor * ggml_new_i32(struct ggml_context * ctx, int32_t value) {
    GGML_ASSERT(!ctx->no_alloc);
    ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 1);
    ggml_set_i32(t, value);
    return t;
}
struct ggml_tensor * ggml_new_f32(struct ggml_context * ctx, float value) {
    GGML_ASSERT(!ctx->no_alloc);
    ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1);
    ggml_set_f32(t, value);
    return t;
}
struct ggml_tensor * ggml_dup_tensor(struct ggml_context * ctx, const struct ggml_tensor * src) {
    return ggml_new_tensor(ctx, src->type, GGML_MAX_DIMS, src->ne);
}

struct ggml_tensor * ggml_get_first_tensor(const struct ggml_context * ctx) {
    for (ggml_object * obj = ctx->objects_begin; obj; obj = obj->next) {
        if (obj->type == GGML_OBJECT_TYPE_TENSOR) return (ggml_tensor *) ((char *) ctx->mem_buffer + obj->offs);
    }
    return nullptr;
}
struct ggml_tensor * ggml_get_next_tensor(const struct ggml_context * ctx, struct ggml_tensor * tensor) {
    const ggml_object * obj = (const ggml_object *) ((const char *) tensor - GGML_OBJECT_SIZE);
    for (obj = obj->next; obj; obj = obj->next) {
        if (obj->type == GGML_OBJECT_TYPE_TENSOR) return (ggml_tensor *) ((char *) ctx->mem_buffer + obj->offs);
    }
    return nullptr;
}
struct ggml_tensor * ggml_get_tensor(struct ggml_context * ctx, const char * name) {
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (strcmp(t->name, name) == 0) return t;
    }
    return nullptr;
}

const char * ggml_get_name(const struct ggml_tensor * tensor) { return tensor->name; }
struct ggml_tensor * ggml_set_name(struct ggml_tensor * tensor, const char * name) {
    size_t i;
    for (i = 0; i < sizeof(tensor->name) - 1 && name[i] != '\0'; i++) tensor->name[i] = name[i];
    tensor->name[i] = '\0';
    return tensor;
}
struct ggml_tensor * ggml_format_name(struct ggml_tensor * tensor, const char * fmt, ...) {
    va_list args;
    va_start(args, fmt);
    vsnprintf(tensor->name, sizeof(tensor->name), fmt, args);
    va_end(args);
    return tensor;
}

void ggml_set_input(struct ggml_tensor * tensor) { tensor->flags |= GGML_TENSOR_FLAG_INPUT; }
void ggml_set_output(struct ggml_tensor * tensor) { tensor->flags |= GGML_TENSOR_FLAG_OUTPUT; }
void ggml_set_param(struct ggml_tensor * tensor) {
    GGML_ASSERT(tensor->op == GGML_OP_NONE);
    tensor->flags |= GGML_TENSOR_FLAG_PARAM;
}
void ggml_set_loss(struct ggml_tensor * tensor) {
    GGML_ASSERT(ggml_is_scalar(tensor));
    GGML_ASSERT(tensor->type == GGML_TYPE_F32);
    tensor->flags |= GGML_TENSOR_FLAG_LOSS;
}

enum ggml_unary_op ggml_get_unary_op(const struct ggml_tensor * tensor) {
    GGML_ASSERT(tensor->op == GGML_OP_UNARY);
    return (enum ggml_unary_op) ggml_get_op_params_i32(tensor, 0);
}

// ---- properties ----------------------------------------------------------------------------
int64_t ggml_nelements(const struct ggml_tensor * t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }
int64_t ggml_nrows(const struct ggml_tensor * t) { return t->ne[1] * t->ne[2] * t->ne[3]; }

size_t ggml_nbytes(const struct ggml_tensor * t) {
    for (int i = 0; i < GGML_MAX_DIMS; i++) {
        if (t->ne[i] <= 0) return 0;
    }
    const size_t blck = (size_t) ggml_blck_size(t->type);
    size_t nbytes;
    if (blck == 1) {
        nbytes = ggml_type_size(t->type);
        for (int i = 0; i < GGML_MAX_DIMS; i++) nbytes += (t->ne[i] - 1) * t->nb[i];
    } else {
        nbytes = t->ne[0] * t->nb[0] / blck;
        for (int i = 1; i < GGML_MAX_DIMS; i++) nbytes += (t->ne[i] - 1) * t->nb[i];
    }
    return nbytes;
}
size_t ggml_nbytes_pad(const struct ggml_tensor * t) { return pad_to(ggml_nbytes(t), GGML_MEM_ALIGN); }
size_t ggml_element_size(const struct ggml_tensor * t) { return ggml_type_size(t->type); }

int ggml_n_dims(const struct ggml_tensor * t) {
    for (int i = GGML_MAX_DIMS - 1; i >= 1; --i) {
        if (t->ne[i] > 1) return i + 1;
    }
    return 1;
}
bool ggml_is_scalar(const struct ggml_tensor * t) { return t->ne[0] == 1 && t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1; }
bool ggml_is_vector(const struct ggml_tensor * t) { return t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1; }
bool ggml_is_matrix(const struct ggml_tensor * t) { return t->ne[2] == 1 && t->ne[3] == 1; }
bool ggml_is_3d(const struct ggml_tensor * t) { return t->ne[3] == 1; }
bool ggml_is_empty(const struct ggml_tensor * t) {
    for (int i = 0; i < GGML_MAX_DIMS; i++) if (t->ne[i] == 0) return true;
    return false;
}
bool ggml_is_transposed(const struct ggml_tensor * t) { return t->nb[0] > t->nb[1]; }
bool ggml_is_permuted(const struct ggml_tensor * t) {
    return t->nb[0] > t->nb[1] || t->nb[1] > t->nb[2] || t->nb[2] > t->nb[3];
}

// Contiguous from dimension n upwards: dims of size 1 may have any stride.
static bool is_contiguous_n(const ggml_tensor * t, int n) {
    size_t next_nb = ggml_type_size(t->type);
    if (t->ne[0] != ggml_blck_size(t->type) && t->nb[0] != next_nb) return false;
    next_nb *= t->ne[0] / ggml_blck_size(t->type);
    for (int i = 1; i < GGML_MAX_DIMS; i++) {
        if (t->ne[i] != 1) {
            if (i > n) {
                if (t->nb[i] != next_nb) return false;
                next_nb *= t->ne[i];
            } else {
                next_nb = t->ne[i] * t->nb[i];  // dims up to n may be padded
            }
        }
    }
    return true;
}
bool ggml_is_contiguous(const struct ggml_tensor * t) { return is_contiguous_n(t, 0); }
bool ggml_is_contiguous_0(const struct ggml_tensor * t) { return is_contiguous_n(t, 0); }
bool ggml_is_contiguous_1(const struct ggml_tensor * t) { return is_contiguous_n(t, 1); }
bool ggml_is_contiguous_2(const struct ggml_tensor * t) { return is_contiguous_n(t, 2); }
bool ggml_is_contiguous_rows(const struct ggml_tensor * t) {
    return t->ne[0] == ggml_blck_size(t->type) || t->nb[0] == ggml_type_size(t->type);
}

bool ggml_are_same_shape(const struct ggml_tensor * a, const struct ggml_tensor * b) {
    return a->ne[0] == b->ne[0] && a->ne[1] == b->ne[1] && a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3];
}
bool ggml_are_same_stride(const struct ggml_tensor * a, const struct ggml_tensor * b) {
    return a->nb[0] == b->nb[0] && a->nb[1] == b->nb[1] && a->nb[2] == b->nb[2] && a->nb[3] == b->nb[3];
}
bool ggml_can_repeat(const struct ggml_tensor * t0, const struct ggml_tensor * t1) {
    if (ggml_is_empty(t0)) return ggml_is_empty(t1);
    for (int i = 0; i < GGML_MAX_DIMS; i++) {
        if (t1->ne[i] % t0->ne[i] != 0) return false;
    }
    return true;
}
bool ggml_can_repeat_rows(const struct ggml_tensor * t0, const struct ggml_tensor * t1) {
    return t0->ne[0] == t1->ne[0] && ggml_can_repeat(t0, t1);
}

void ggml_unravel_index(const struct ggml_tensor * t, int64_t i, int64_t * i0, int64_t * i1, int64_t * i2, int64_t * i3) {
    const int64_t ne2 = t->ne[2], ne1 = t->ne[1], ne0 = t->ne[0];
    const int64_t i3_ = i / (ne2 * ne1 * ne0);
    const int64_t i2_ = (i - i3_ * ne2 * ne1 * ne0) / (ne1 * ne0);
    const int64_t i1_ = (i - i3_ * ne2 * ne1 * ne0 - i2_ * ne1 * ne0) / ne0;
    const int64_t i0_ = i - i3_ * ne2 * ne1 * ne0 - i2_ * ne1 * ne0 - i1_ * ne0;
    if (i0) *i0 = i0_;
    if (i1) *i1 = i1_;
    if (i2) *i2 = i2_;
    if (i3) *i3 = i3_;
}

// ---- element access ------------------------------------------------------------------------
static void * elem_ptr(const ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    GGML_ASSERT(t->data != nullptr);
    GGML_ASSERT(!ggml_is_quantized(t->type));
    return (char *) t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

static double load_elem(const ggml_tensor * t, const void * p) {
    switch (t->type) {
        case GGML_TYPE_F32:  return *(const float *) p;
        case GGML_TYPE_F16:  return ggml_compute_fp16_to_fp32(*(const ggml_fp16_t *) p);
        case GGML_TYPE_BF16: return ggml_compute_bf16_to_fp32(*(const ggml_bf16_t *) p);
        case GGML_TYPE_I8:   return *(const int8_t *) p;
        case GGML_TYPE_I16:  return *(const int16_t *) p;
        case GGML_TYPE_I32:  return *(const int32_t *) p;
        case GGML_TYPE_I64:  return (double) *(const int64_t *) p;
        case GGML_TYPE_F64:  return *(const double *) p;
        default: GGML_ABORT("element access not supported for type %s", ggml_type_name(t->type));
    }
}

static void store_elem(const ggml_tensor * t, void * p, double v, bool is_int) {
    switch (t->type) {
        case GGML_TYPE_F32:  *(float *) p = (float) v; break;
        case GGML_TYPE_F16:  *(ggml_fp16_t *) p = ggml_compute_fp32_to_fp16((float) v); break;
        case GGML_TYPE_BF16: *(ggml_bf16_t *) p = ggml_compute_fp32_to_bf16((float) v); break;
        case GGML_TYPE_I8:   *(int8_t *) p = (int8_t) v; break;
        case GGML_TYPE_I16:  *(int16_t *) p = (int16_t) v; break;
        case GGML_TYPE_I32:  *(int32_t *) p = (int32_t) v; break;
        case GGML_TYPE_I64:  *(int64_t *) p = (int64_t) v; break;
        case GGML_TYPE_F64:  *(double *) p = v; break;
        default: GGML_ABORT("element access not supported for type %s", ggml_type_name(t->type));
    }
    (void) is_int;
}

static void set_all(ggml_tensor * t, double v) {
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) store_elem(t, elem_ptr(t, i0, i1, i2, i3), v, false);
}

struct ggml_tensor * ggml_set_zero(struct ggml_tensor * t) {
    if (ggml_is_empty(t)) return t;
    GGML_ASSERT(t->data);
    if (ggml_is_contiguous(t)) memset(t->data, 0, ggml_nbytes(t));
    else set_all(t, 0.0);
    return t;
}
struct ggml_tensor * ggml_set_i32(struct ggml_tensor * t, int32_t value) { set_all(t, value); return t; }
struct ggml_tensor * ggml_set_f32(struct ggml_tensor * t, float value) { set_all(t, value); return t; }

// 1-d accessors index the tensor as if it were contiguous in logical order (as ggml does).
int32_t ggml_get_i32_1d(const struct ggml_tensor * t, int i) {
    int64_t i0, i1, i2, i3;
    ggml_unravel_index(t, i, &i0, &i1, &i2, &i3);
    return (int32_t) load_elem(t, elem_ptr(t, i0, i1, i2, i3));
}
void ggml_set_i32_1d(const struct ggml_tensor * t, int i, int32_t value) {
    int64_t i0, i1, i2, i3;
    ggml_unravel_index(t, i, &i0, &i1, &i2, &i3);
    store_elem(t, elem_ptr(t, i0, i1, i2, i3), value, true);
}
int32_t ggml_get_i32_nd(const struct ggml_tensor * t, int i0, int i1, int i2, int i3) {
    return (int32_t) load_elem(t, elem_ptr(t, i0, i1, i2, i3));
}
void ggml_set_i32_nd(const struct ggml_tensor * t, int i0, int i1, int i2, int i3, int32_t value) {
    store_elem(t, elem_ptr(t, i0, i1, i2, i3), value, true);
}
float ggml_get_f32_1d(const struct ggml_tensor * t, int i) {
    int64_t i0, i1, i2, i3;
    ggml_unravel_index(t, i, &i0, &i1, &i2, &i3);
    return (float) load_elem(t, elem_ptr(t, i0, i1, i2, i3));
}
void ggml_set_f32_1d(const struct ggml_tensor * t, int i, float value) {
    int64_t i0, i1, i2, i3;
    ggml_unravel_index(t, i, &i0, &i1, &i2, &i3);
    store_elem(t, elem_ptr(t, i0, i1, i2, i3), value, false);
}
float ggml_get_f32_nd(const struct ggml_tensor * t, int i0, int i1, int i2, int i3) {
    return (float) load_elem(t, elem_ptr(t, i0, i1, i2, i3));
}
void ggml_set_f32_nd(const struct ggml_tensor * t, int i0, int i1, int i2, int i3, float value) {
    store_elem(t, elem_ptr(t, i0, i1, i2, i3), value, false);
}
void * ggml_get_data(const struct ggml_tensor * t) { return t->data; }
float * ggml_get_data_f32(const struct ggml_tensor * t) {
    GGML_ASSERT(t->type == GGML_TYPE_F32);
    return (float *) t->data;
}
