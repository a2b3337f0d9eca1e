// ggml.h - C API of the tensor library: contexts, tensors, types, lazy ops, graphs, CPU compute.
// Names and semantics follow ggml's core API wherever the concept is the same, so code written
// against ggml compiles with few changes.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GGML_MAX_DIMS       4
#define GGML_MAX_SRC        10
#define GGML_MAX_OP_PARAMS  64
#define GGML_MAX_NAME       64
#define GGML_DEFAULT_GRAPH_SIZE 2048
#define GGML_MEM_ALIGN      64
#define GGML_MAX_N_THREADS  512  // the size of ggml_threadpool_params.cpumask
#define GGML_DEFAULT_N_THREADS 4

#define GGML_UNUSED(x) (void) (x)

#define GGML_EXIT_SUCCESS 0
#define GGML_EXIT_ABORTED 1

// Prints file:line and the failed condition, then aborts. Used for programming errors (bad
// shapes passed to an op builder), never for bad input files: those return errors.
#define GGML_ASSERT(x) \
    do { if (!(x)) ggml_abort(__FILE__, __LINE__, "GGML_ASSERT(%s) failed", #x); } while (0)
#define GGML_ABORT(...) ggml_abort(__FILE__, __LINE__, __VA_ARGS__)

#ifdef __GNUC__
__attribute__((noreturn, format(printf, 3, 4)))
#endif
void ggml_abort(const char * file, int line, const char * fmt, ...);

// Log levels and callbacks, as ggml names them (llama.h's llama_log_set takes a
// ggml_log_callback).
enum ggml_log_level {
    GGML_LOG_LEVEL_NONE  = 0,
    GGML_LOG_LEVEL_DEBUG = 1,
    GGML_LOG_LEVEL_INFO  = 2,
    GGML_LOG_LEVEL_WARN  = 3,
    GGML_LOG_LEVEL_ERROR = 4,
    GGML_LOG_LEVEL_CONT  = 5,  // continues the previous message
};
typedef void (*ggml_log_callback)(enum ggml_log_level level, const char * text, void * user_data);
// Where ggml's own messages go (the scheduler's errors, say): standard error by default, or
// log_callback (NULL: back to standard error). llama_log_set sets it too, as in llama.cpp.
void ggml_log_set(ggml_log_callback log_callback, void * user_data);

// Polled between graph nodes; returning true stops the computation (GGML_STATUS_ABORTED).
typedef bool (*ggml_abort_callback)(void * data);

// A monotonic clock (ggml_time_init is a no-op, kept for ggml compatibility).
void    ggml_time_init(void);
int64_t ggml_time_ms(void);
int64_t ggml_time_us(void);

typedef uint16_t ggml_fp16_t;
typedef struct { uint16_t bits; } ggml_bf16_t;

float       ggml_fp16_to_fp32(ggml_fp16_t x);
ggml_fp16_t ggml_fp32_to_fp16(float x);
float       ggml_bf16_to_fp32(ggml_bf16_t x);
ggml_bf16_t ggml_fp32_to_bf16(float x);  // round to nearest even, NaN kept quiet
void ggml_fp16_to_fp32_row(const ggml_fp16_t * x, float * y, int64_t n);
void ggml_fp32_to_fp16_row(const float * x, ggml_fp16_t * y, int64_t n);
void ggml_bf16_to_fp32_row(const ggml_bf16_t * x, float * y, int64_t n);
void ggml_fp32_to_bf16_row(const float * x, ggml_bf16_t * y, int64_t n);

// Type ids are those of the GGUF format: they are written to and read from files.
enum ggml_type {
    GGML_TYPE_F32     = 0,
    GGML_TYPE_F16     = 1,
    GGML_TYPE_Q4_0    = 2,
    GGML_TYPE_Q4_1    = 3,
    // 4, 5: Q4_2, Q4_3, removed from the format
    GGML_TYPE_Q5_0    = 6,
    GGML_TYPE_Q5_1    = 7,
    GGML_TYPE_Q8_0    = 8,
    GGML_TYPE_Q8_1    = 9,
    GGML_TYPE_Q2_K    = 10,
    GGML_TYPE_Q3_K    = 11,
    GGML_TYPE_Q4_K    = 12,
    GGML_TYPE_Q5_K    = 13,
    GGML_TYPE_Q6_K    = 14,
    GGML_TYPE_Q8_K    = 15,
    GGML_TYPE_IQ2_XXS = 16,
    GGML_TYPE_IQ2_XS  = 17,
    GGML_TYPE_IQ3_XXS = 18,
    GGML_TYPE_IQ1_S   = 19,
    GGML_TYPE_IQ4_NL  = 20,
    GGML_TYPE_IQ3_S   = 21,
    GGML_TYPE_IQ2_S   = 22,
    GGML_TYPE_IQ4_XS  = 23,
    GGML_TYPE_I8      = 24,
    GGML_TYPE_I16     = 25,
    GGML_TYPE_I32     = 26,
    GGML_TYPE_I64     = 27,
    GGML_TYPE_F64     = 28,
    GGML_TYPE_IQ1_M   = 29,
    GGML_TYPE_BF16    = 30,
    // 31-33: Q4_0_4_4, Q4_0_4_8, Q4_0_8_8, removed from the format
    GGML_TYPE_TQ1_0   = 34,
    GGML_TYPE_TQ2_0   = 35,
    // 36-38: IQ4_NL_4_4, IQ4_NL_4_8, IQ4_NL_8_8, removed from the format
    GGML_TYPE_COUNT   = 39,
};

// general.file_type values (the "most common type" of a model file).
enum ggml_ftype {
    GGML_FTYPE_UNKNOWN = -1,
    GGML_FTYPE_ALL_F32 = 0,
    GGML_FTYPE_MOSTLY_F16 = 1,
    GGML_FTYPE_MOSTLY_Q4_0 = 2,
    GGML_FTYPE_MOSTLY_Q4_1 = 3,
    GGML_FTYPE_MOSTLY_Q8_0 = 7,
    GGML_FTYPE_MOSTLY_Q5_0 = 8,
    GGML_FTYPE_MOSTLY_Q5_1 = 9,
    GGML_FTYPE_MOSTLY_Q2_K = 10,
    GGML_FTYPE_MOSTLY_Q3_K = 11,
    GGML_FTYPE_MOSTLY_Q4_K = 12,
    GGML_FTYPE_MOSTLY_Q5_K = 13,
    GGML_FTYPE_MOSTLY_Q6_K = 14,
    GGML_FTYPE_MOSTLY_BF16 = 24,
};

enum ggml_op {
    GGML_OP_NONE = 0,

    GGML_OP_DUP,
    GGML_OP_ADD,
    GGML_OP_ADD1,
    GGML_OP_SUB,
    GGML_OP_MUL,
    GGML_OP_DIV,
    GGML_OP_SQR,
    GGML_OP_SQRT,
    GGML_OP_LOG,
    GGML_OP_SUM,
    GGML_OP_SUM_ROWS,
    GGML_OP_MEAN,
    GGML_OP_ARGMAX,
    GGML_OP_ARGSORT,
    GGML_OP_REPEAT,
    GGML_OP_CONCAT,
    GGML_OP_NORM,
    GGML_OP_RMS_NORM,

    GGML_OP_MUL_MAT,
    GGML_OP_MUL_MAT_ID,
    GGML_OP_OUT_PROD,

    GGML_OP_SCALE,
    GGML_OP_CPY,
    GGML_OP_CONT,
    GGML_OP_RESHAPE,
    GGML_OP_VIEW,
    GGML_OP_PERMUTE,
    GGML_OP_TRANSPOSE,
    GGML_OP_GET_ROWS,
    GGML_OP_SET_ROWS,
    GGML_OP_DIAG_MASK_INF,
    GGML_OP_SOFT_MAX,
    GGML_OP_ROPE,
    GGML_OP_FLASH_ATTN_EXT,

    GGML_OP_UNARY,

    GGML_OP_CROSS_ENTROPY_LOSS,

    // Ops of the backward pass and of training (autodiff emits them; usable directly too).
    GGML_OP_ACC,                      // a with b added into a view of it
    GGML_OP_REPEAT_BACK,              // sums a over the tiles of ggml_repeat
    GGML_OP_UNARY_BACK,               // grad * f'(x) for a unary op f
    GGML_OP_NORM_BACK,
    GGML_OP_RMS_NORM_BACK,
    GGML_OP_DIAG_MASK_ZERO,
    GGML_OP_SOFT_MAX_BACK,
    GGML_OP_ROPE_BACK,
    GGML_OP_GET_ROWS_BACK,            // rows of grad added into zeros at the picked indices
    GGML_OP_MUL_MAT_ID_BACK,          // the gradient of mul_mat_id for its b
    GGML_OP_FLASH_ATTN_BACK,          // the gradients of flash_attn_ext for q, k and v, packed
    GGML_OP_CROSS_ENTROPY_LOSS_BACK,
    GGML_OP_OPT_STEP_ADAMW,
    GGML_OP_OPT_STEP_SGD,

    GGML_OP_COUNT,
};

enum ggml_unary_op {
    GGML_UNARY_OP_ABS,
    GGML_UNARY_OP_SGN,
    GGML_UNARY_OP_NEG,
    GGML_UNARY_OP_STEP,
    GGML_UNARY_OP_TANH,
    GGML_UNARY_OP_RELU,
    GGML_UNARY_OP_SIGMOID,
    GGML_UNARY_OP_GELU,
    GGML_UNARY_OP_SILU,
    GGML_UNARY_OP_EXP,
    GGML_UNARY_OP_GELU_ERF,  // the exact GELU, x Phi(x) = x (1 + erf(x / sqrt 2)) / 2 (BERT's)

    GGML_UNARY_OP_COUNT,
};

// Tensor flags: how a tensor takes part in a graph (the memory planner and, later, autodiff).
enum ggml_tensor_flag {
    GGML_TENSOR_FLAG_INPUT  = 1,  // set by the user before compute: placed first, never reused
    GGML_TENSOR_FLAG_OUTPUT = 2,  // read by the user after compute: its memory is never reused
    GGML_TENSOR_FLAG_PARAM  = 4,  // a trainable parameter: gradients are computed for it
    GGML_TENSOR_FLAG_LOSS   = 8,  // the scalar the backward pass starts from
    GGML_TENSOR_FLAG_REPACKED = 16,  // data in the CPU's repacked layout (ggml_cpu_repack)
};

// RoPE modes (op param).
#define GGML_ROPE_TYPE_NORMAL 0   // rotate pairs (x[2i], x[2i+1]), as in the original llama
#define GGML_ROPE_TYPE_NEOX   2   // rotate pairs (x[i], x[i + n_dims/2]), as in GPT-NeoX

struct ggml_backend_buffer;  // ggml-backend.h: the buffer holding the tensor's data

struct ggml_tensor {
    enum ggml_type type;

    struct ggml_backend_buffer * buffer;  // NULL: data is host memory not owned by a backend buffer

    int64_t ne[GGML_MAX_DIMS];  // number of elements per dimension, ne[0] innermost
    size_t  nb[GGML_MAX_DIMS];  // stride in bytes: nb[0] = type size, nb[1] = row stride, ...

    enum ggml_op op;

    int32_t op_params[GGML_MAX_OP_PARAMS / sizeof(int32_t)];  // op arguments (scalars)

    int32_t flags;  // enum ggml_tensor_flag

    struct ggml_tensor * src[GGML_MAX_SRC];

    struct ggml_tensor * view_src;  // for views: the tensor owning the memory
    size_t               view_offs; // byte offset into view_src->data

    void * data;

    char name[GGML_MAX_NAME];

    void * extra;  // backend-specific data

    char padding[8];
};

static const size_t GGML_TENSOR_SIZE = sizeof(struct ggml_tensor);

struct ggml_init_params {
    size_t mem_size;    // bytes of the arena holding tensor structs (and their data unless no_alloc)
    void * mem_buffer;  // NULL: allocated and owned by the context
    bool   no_alloc;    // true: tensors get no data (a planner or the user places it later)
};

struct ggml_context;
struct ggml_cgraph;

// ---- context -------------------------------------------------------------------------------
struct ggml_context * ggml_init(struct ggml_init_params params);  // NULL if memory is not available
void   ggml_reset(struct ggml_context * ctx);
void   ggml_free(struct ggml_context * ctx);
size_t ggml_used_mem(const struct ggml_context * ctx);
bool   ggml_get_no_alloc(struct ggml_context * ctx);
void   ggml_set_no_alloc(struct ggml_context * ctx, bool no_alloc);
void * ggml_get_mem_buffer(const struct ggml_context * ctx);
size_t ggml_get_mem_size(const struct ggml_context * ctx);
size_t ggml_get_max_tensor_size(const struct ggml_context * ctx);
size_t ggml_tensor_overhead(void);
size_t ggml_graph_overhead(void);
size_t ggml_graph_overhead_custom(size_t size, bool grads);

// ---- types ---------------------------------------------------------------------------------
const char * ggml_type_name(enum ggml_type type);   // "f32", "q4_0", ...; NULL for an invalid id
int64_t      ggml_blck_size(enum ggml_type type);   // elements per block (1 for plain types)
size_t       ggml_type_size(enum ggml_type type);   // bytes per block
size_t       ggml_row_size(enum ggml_type type, int64_t ne);  // bytes of ne elements
bool         ggml_is_quantized(enum ggml_type type);
bool         ggml_type_is_valid(int type);          // a known id with a defined block layout
const char * ggml_op_name(enum ggml_op op);
const char * ggml_op_symbol(enum ggml_op op);
const char * ggml_unary_op_name(enum ggml_unary_op op);
const char * ggml_op_desc(const struct ggml_tensor * t);  // the unary op's name for UNARY
enum ggml_type ggml_ftype_to_ggml_type(enum ggml_ftype ftype);

// Per-type facts and row converters: one row per type (ggml-type-table.cpp), the only list of
// types outside the kernels. Code that needs a fact about a type asks here (or asks a backend,
// ggml_backend_dev_supports_op, whether it runs an op on it) instead of naming types. Converters
// are NULL where not (yet) provided. A row's length must be a multiple of blck_size.
typedef void (*ggml_to_float_t)(const void * x, float * y, int64_t k);
typedef void (*ggml_from_float_t)(const float * x, void * y, int64_t k);
// Beyond upstream: k values of x to the type; imatrix: optional importance weights (NULL: none).
typedef void (*ggml_quantize_row_t)(const float * x, void * y, int64_t k, const float * imatrix);
struct ggml_type_traits {
    const char *      type_name;
    int64_t           blck_size;
    size_t            type_size;
    bool              is_quantized;
    ggml_to_float_t   to_float;
    ggml_from_float_t from_float_ref;  // scalar reference conversion (no importance weights)
    // Beyond upstream:
    ggml_quantize_row_t quantize_row;  // ggml_quantize_chunk's row quantizer (NULL: ggml cannot produce the type)
    bool requires_imatrix;  // its quantizer needs importance weights (ggml_quantize_requires_imatrix)
    bool weight_target;     // llama-quantize and llama-export-lora may write weights of it (not the
                            // products' activation formats Q8_1, Q8_K, which no loader accepts)
    bool kv_cache;          // it may hold a KV cache (llama.cpp's cache types: rows cut per head)
    enum ggml_ftype ftype;  // general.file_type of a file mostly of it (GGML_FTYPE_UNKNOWN: none)
};
const struct ggml_type_traits * ggml_get_type_traits(enum ggml_type type);

// ---- quantization --------------------------------------------------------------------------
// Quantizes nrows rows of n_per_row floats (src + start) into dst + (start / n_per_row) rows of
// `type`; start is a multiple of n_per_row. imatrix: optional importance weights, n_per_row of
// them (the mean squared activation of each column), steering the error where it matters.
// Returns the bytes written. F32, F16 and BF16 are converted.
size_t ggml_quantize_chunk(enum ggml_type type, const float * src, void * dst, int64_t start,
                           int64_t nrows, int64_t n_per_row, const float * imatrix);
bool   ggml_quantize_requires_imatrix(enum ggml_type type);  // the type table's requires_imatrix
void   ggml_quantize_init(enum ggml_type type);  // nothing to prepare for the supported types
void   ggml_quantize_free(void);
// Whether ggml_quantize_chunk can produce this type (the type table's quantize_row).
bool   ggml_quantize_supported(enum ggml_type type);

// Beyond upstream: converts every row of a contiguous tensor (F32, or any type with a row
// converter) to `type` into dst (ggml_row_size(type, ne[0]) bytes a row), with n_threads
// threads taking blocks of rows. imatrix, if not NULL, holds the importance weights of the
// columns, ne[0] floats per matrix (ne[0] * ne[2] * ne[3] in all: an expert tensor's matrices
// each their own), passed to the type's quantizer. edit, if not NULL, changes each row's F32
// values first (row: its index); it is called from several threads at once. Used by the
// quantizer and the LoRA merge.
typedef void (*ggml_row_edit_t)(int64_t row, float * values, int64_t n, void * user_data);
void ggml_convert_rows(const struct ggml_tensor * src, enum ggml_type type, void * dst, int n_threads,
                       const float * imatrix, ggml_row_edit_t edit, void * user_data);

// ---- tensor properties ---------------------------------------------------------------------
int64_t ggml_nelements(const struct ggml_tensor * tensor);
int64_t ggml_nrows(const struct ggml_tensor * tensor);
size_t  ggml_nbytes(const struct ggml_tensor * tensor);
size_t  ggml_nbytes_pad(const struct ggml_tensor * tensor);
size_t  ggml_element_size(const struct ggml_tensor * tensor);
int     ggml_n_dims(const struct ggml_tensor * tensor);  // 1 for scalars
bool    ggml_is_scalar(const struct ggml_tensor * tensor);
bool    ggml_is_vector(const struct ggml_tensor * tensor);
bool    ggml_is_matrix(const struct ggml_tensor * tensor);
bool    ggml_is_3d(const struct ggml_tensor * tensor);
bool    ggml_is_empty(const struct ggml_tensor * tensor);
bool    ggml_is_transposed(const struct ggml_tensor * tensor);
bool    ggml_is_permuted(const struct ggml_tensor * tensor);
bool    ggml_is_contiguous(const struct ggml_tensor * tensor);
bool    ggml_is_contiguous_0(const struct ggml_tensor * tensor);  // same as ggml_is_contiguous
bool    ggml_is_contiguous_1(const struct ggml_tensor * tensor);  // contiguous for dims >= 1
bool    ggml_is_contiguous_2(const struct ggml_tensor * tensor);  // contiguous for dims >= 2
bool    ggml_is_contiguous_rows(const struct ggml_tensor * tensor); // each row contiguous
bool    ggml_are_same_shape(const struct ggml_tensor * t0, const struct ggml_tensor * t1);
bool    ggml_are_same_stride(const struct ggml_tensor * t0, const struct ggml_tensor * t1);
bool    ggml_can_repeat(const struct ggml_tensor * t0, const struct ggml_tensor * t1);  // t0 broadcasts to t1
bool    ggml_can_repeat_rows(const struct ggml_tensor * t0, const struct ggml_tensor * t1);
// Splits a flat element index into coordinates.
void    ggml_unravel_index(const struct ggml_tensor * tensor, int64_t i, int64_t * i0, int64_t * i1, int64_t * i2, int64_t * i3);

// ---- tensor creation -----------------------------------------------------------------------
struct ggml_tensor * ggml_new_tensor(struct ggml_context * ctx, enum ggml_type type, int n_dims, const int64_t * ne);
struct ggml_tensor * ggml_new_tensor_1d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0);
struct ggml_tensor * ggml_new_tensor_2d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0, int64_t ne1);
struct ggml_tensor * ggml_new_tensor_3d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2);
struct ggml_tensor * ggml_new_tensor_4d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
struct ggml_tensor * ggml_new_i32(struct ggml_context * ctx, int32_t value);
struct ggml_tensor * ggml_new_f32(struct ggml_context * ctx, float value);
struct ggml_tensor * ggml_dup_tensor(struct ggml_context * ctx, const struct ggml_tensor * src);
struct ggml_tensor * ggml_view_tensor(struct ggml_context * ctx, struct ggml_tensor * src);

struct ggml_tensor * ggml_get_first_tensor(const struct ggml_context * ctx);
struct ggml_tensor * ggml_get_next_tensor(const struct ggml_context * ctx, struct ggml_tensor * tensor);
struct ggml_tensor * ggml_get_tensor(struct ggml_context * ctx, const char * name);

const char *         ggml_get_name(const struct ggml_tensor * tensor);
struct ggml_tensor * ggml_set_name(struct ggml_tensor * tensor, const char * name);
#ifdef __GNUC__
__attribute__((format(printf, 2, 3)))
#endif
struct ggml_tensor * ggml_format_name(struct ggml_tensor * tensor, const char * fmt, ...);

void ggml_set_input(struct ggml_tensor * tensor);
void ggml_set_output(struct ggml_tensor * tensor);
void ggml_set_param(struct ggml_tensor * tensor);
void ggml_set_loss(struct ggml_tensor * tensor);

enum ggml_unary_op ggml_get_unary_op(const struct ggml_tensor * tensor);

// Element access for F32/F16/BF16/I8/I16/I32 tensors (any layout; converts through float/int).
struct ggml_tensor * ggml_set_zero(struct ggml_tensor * tensor);
struct ggml_tensor * ggml_set_i32(struct ggml_tensor * tensor, int32_t value);
struct ggml_tensor * ggml_set_f32(struct ggml_tensor * tensor, float value);
int32_t ggml_get_i32_1d(const struct ggml_tensor * tensor, int i);
void    ggml_set_i32_1d(const struct ggml_tensor * tensor, int i, int32_t value);
int32_t ggml_get_i32_nd(const struct ggml_tensor * tensor, int i0, int i1, int i2, int i3);
void    ggml_set_i32_nd(const struct ggml_tensor * tensor, int i0, int i1, int i2, int i3, int32_t value);
float   ggml_get_f32_1d(const struct ggml_tensor * tensor, int i);
void    ggml_set_f32_1d(const struct ggml_tensor * tensor, int i, float value);
float   ggml_get_f32_nd(const struct ggml_tensor * tensor, int i0, int i1, int i2, int i3);
void    ggml_set_f32_nd(const struct ggml_tensor * tensor, int i0, int i1, int i2, int i3, float value);
void *  ggml_get_data(const struct ggml_tensor * tensor);
float * ggml_get_data_f32(const struct ggml_tensor * tensor);

// ---- ops (lazy: each records op + sources; nothing runs until a graph is computed) ----------
// Binary elementwise ops broadcast b over a when ggml_can_repeat(b, a).
struct ggml_tensor * ggml_dup(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_dup_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_add(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
struct ggml_tensor * ggml_add_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
struct ggml_tensor * ggml_add1(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);  // b scalar
struct ggml_tensor * ggml_add1_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
struct ggml_tensor * ggml_sub(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
struct ggml_tensor * ggml_sub_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
struct ggml_tensor * ggml_mul(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
struct ggml_tensor * ggml_mul_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
struct ggml_tensor * ggml_div(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
struct ggml_tensor * ggml_div_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
struct ggml_tensor * ggml_scale(struct ggml_context * ctx, struct ggml_tensor * a, float s);
struct ggml_tensor * ggml_scale_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float s);
struct ggml_tensor * ggml_sqr(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_sqr_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_sqrt(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_sqrt_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_log(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_log_inplace(struct ggml_context * ctx, struct ggml_tensor * a);

// Unary ops (GGML_OP_UNARY with the unary op as param).
struct ggml_tensor * ggml_unary(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_unary_op op);
struct ggml_tensor * ggml_unary_inplace(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_unary_op op);
struct ggml_tensor * ggml_abs(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_abs_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_sgn(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_sgn_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_neg(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_neg_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_step(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_step_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_tanh(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_tanh_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_relu(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_relu_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_sigmoid(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_sigmoid_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_gelu(struct ggml_context * ctx, struct ggml_tensor * a);  // tanh approximation
struct ggml_tensor * ggml_gelu_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_gelu_erf(struct ggml_context * ctx, struct ggml_tensor * a);  // exact (erf) form
struct ggml_tensor * ggml_gelu_erf_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_silu(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_silu_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_exp(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_exp_inplace(struct ggml_context * ctx, struct ggml_tensor * a);

// Reductions.
struct ggml_tensor * ggml_sum(struct ggml_context * ctx, struct ggml_tensor * a);       // -> [1]
struct ggml_tensor * ggml_sum_rows(struct ggml_context * ctx, struct ggml_tensor * a);  // -> [1, ne1, ne2, ne3]
struct ggml_tensor * ggml_mean(struct ggml_context * ctx, struct ggml_tensor * a);      // -> [1, ne1, ne2, ne3]
struct ggml_tensor * ggml_argmax(struct ggml_context * ctx, struct ggml_tensor * a);    // I32 [ne1], a is a matrix

enum ggml_sort_order {
    GGML_SORT_ORDER_ASC,
    GGML_SORT_ORDER_DESC,
};
// I32 of a's shape: each row's indices in the order of its values (equal values: lower index first).
struct ggml_tensor * ggml_argsort(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_sort_order order);
// I32 [k, ne1, ne2, ne3]: the indices of each row's k largest values, largest first (a view of argsort).
struct ggml_tensor * ggml_top_k(struct ggml_context * ctx, struct ggml_tensor * a, int k);

// Shape ops.
struct ggml_tensor * ggml_repeat(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);  // a tiled to b's shape
struct ggml_tensor * ggml_concat(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, int dim);

// Normalization over rows (dim 0).
struct ggml_tensor * ggml_norm(struct ggml_context * ctx, struct ggml_tensor * a, float eps);
struct ggml_tensor * ggml_norm_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float eps);
struct ggml_tensor * ggml_rms_norm(struct ggml_context * ctx, struct ggml_tensor * a, float eps);
struct ggml_tensor * ggml_rms_norm_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float eps);

// a: [K, M, ...], b: [K, N, ...] -> F32 [M, N, ...]: each output is a row of a dot a row of b.
// b broadcasts a over dims 2 and 3 (b->ne[2] a multiple of a->ne[2], same for dim 3).
struct ggml_tensor * ggml_mul_mat(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
// Mixture of experts: as [K, N, n_as] (a stack of matrices, any type mul_mat takes), b F32 [K,
// n_b, n_tokens] with n_b 1 or n_used, ids I32 [n_used, n_tokens] (0 <= id < n_as): F32 [N,
// n_used, n_tokens], column (i, t) = as[:, :, ids[i, t]] x b[:, i % n_b, t]. Only the matrices
// named in ids are read.
struct ggml_tensor * ggml_mul_mat_id(struct ggml_context * ctx, struct ggml_tensor * as, struct ggml_tensor * b,
                                     struct ggml_tensor * ids);
// a: [M, K, ...], b: [N, K, ...] -> F32 [M, N, ...]: sum over k of a[:, k] x b[:, k] (outer products).
// a may be any type with a to_float conversion, also repacked for the CPU; b is F32.
struct ggml_tensor * ggml_out_prod(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);

// Precision of the products of a matrix op; sums are F32 whatever it is. GGML_PREC_DEFAULT and
// GGML_PREC_F32: F32 products of the operands' values. GGML_PREC_BF16 (opt-in, out_prod only):
// both operands rounded to BF16 where the build has a fast kernel for it (AVX512-BF16: about
// twice the F32 rate), F32 elsewhere; results then differ from the F32 ones by ~2e-3 relative.
// GGML_PREC_INT8 (opt-in, out_prod only): products of 8-bit quantized operands, as the quantized
// forward: a's values and b's are quantized to Q8_0 along the reduction and multiplied by the
// forward's int8 kernel, where the build has one (AVX512-VNNI, NEON dotprod) and M % 32 == 0 and
// K % 16 == 0; F32 elsewhere. Results then differ from the F32 ones by ~1e-2 relative.
enum ggml_prec {
    GGML_PREC_DEFAULT = 0,
    GGML_PREC_INT8    = 8,
    GGML_PREC_F32     = 10,
    GGML_PREC_BF16    = 16,
};
// Sets the precision of an out_prod node (the tensor ggml_out_prod returned).
void ggml_out_prod_set_prec(struct ggml_tensor * a, enum ggml_prec prec);
// Sets the precision of a mul_mat node (ggml's name). The CPU forward is unchanged (its products
// follow the weights' type); autodiff gives the gradient with respect to b (the activations) this
// precision: e.g. GGML_PREC_INT8 on the products with frozen quantized weights (QLoRA).
void ggml_mul_mat_set_prec(struct ggml_tensor * a, enum ggml_prec prec);

// Copies and layout.
struct ggml_tensor * ggml_cpy(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);  // a -> b (same element count), returns a view of b
struct ggml_tensor * ggml_cast(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_type type);
struct ggml_tensor * ggml_cont(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_cont_1d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0);
struct ggml_tensor * ggml_cont_2d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1);
struct ggml_tensor * ggml_cont_3d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2);
struct ggml_tensor * ggml_cont_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
struct ggml_tensor * ggml_reshape(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);  // to b's shape
struct ggml_tensor * ggml_reshape_1d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0);
struct ggml_tensor * ggml_reshape_2d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1);
struct ggml_tensor * ggml_reshape_3d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2);
struct ggml_tensor * ggml_reshape_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
struct ggml_tensor * ggml_view_1d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, size_t offset);
struct ggml_tensor * ggml_view_2d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset);
struct ggml_tensor * ggml_view_3d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, size_t nb1, size_t nb2, size_t offset);
struct ggml_tensor * ggml_view_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset);
// The bytes of a contiguous tensor a seen as ne1 rows of ne0 elements of another type (this
// project's extension; ggml has no such view): a raw row copy of any type is get_rows on an I32
// view, seen again as the original type. No data moves; there is no gradient through it.
struct ggml_tensor * ggml_view_2d_as(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_type type, int64_t ne0, int64_t ne1);
// axis_i: where dimension i of a goes in the result.
struct ggml_tensor * ggml_permute(struct ggml_context * ctx, struct ggml_tensor * a, int axis0, int axis1, int axis2, int axis3);
struct ggml_tensor * ggml_transpose(struct ggml_context * ctx, struct ggml_tensor * a);

// Rows of a (any type) picked by the I32 indices in b: a [n_embd, n_rows, ne2], b [n, ne2] -> F32 [n_embd, n, ne2].
struct ggml_tensor * ggml_get_rows(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);

// Writes the rows of b (F32) into rows of a picked by the I32 or I64 indices in c, converted to a's
// type, and returns a view of a: a [n_embd, n_rows, ne2, ne3], b [n_embd, n, ne2, ne3],
// c [n, ne2 / k2, ne3 / k3] (broadcast over b's dims 2 and 3): a[:, c[i, j % c2, k % c3], j, k] = b[:, i, j, k].
// Indices should be distinct (duplicates: one of the rows wins). The KV cache's writes: the
// graph stays the same from token to token, only the index tensor's contents change.
struct ggml_tensor * ggml_set_rows(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, struct ggml_tensor * c);

// Sets a[i0, i1] = -inf where i0 > n_past + i1 (causal mask).
struct ggml_tensor * ggml_diag_mask_inf(struct ggml_context * ctx, struct ggml_tensor * a, int n_past);
struct ggml_tensor * ggml_diag_mask_inf_inplace(struct ggml_context * ctx, struct ggml_tensor * a, int n_past);

// Softmax over rows.  _ext: softmax(a*scale + mask), mask (F32 or F16) [ne0, >= ne1] broadcast
// over dims 2, 3; max_bias is the ALiBi slope base (0: no ALiBi).
struct ggml_tensor * ggml_soft_max(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_soft_max_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
struct ggml_tensor * ggml_soft_max_ext(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * mask, float scale, float max_bias);

// Fused attention (ggml's flash_attn_ext): per head softmax(scale * K^T q + mask) V, computed by
// blocks of queries without the n_kv x n_q score matrix. q [D, n_q, n_head, ne3] F32; k [D, n_kv,
// n_head_kv, ne3] and v [Dv, n_kv, n_head_kv, ne3] F32, F16, BF16 or a quantized type (a KV
// cache read as it is stored; gradients only for F32), rows contiguous (n_head a multiple
// of n_head_kv: grouped-query attention); mask NULL or F32/F16 [n_kv, >= n_q, 1 or n_head, 1 or
// ne3], -inf where a key is hidden from a query (the keys hidden from a whole block of queries are
// skipped, so a causal mask halves the work). max_bias > 0: ALiBi, the mask scaled by the head's
// slope as in soft_max_ext; logit_softcap > 0: logits = softcap * tanh(scale * K^T q / softcap).
// Result F32 [Dv, n_head, n_q, ne3]: the heads of a query side by side. A query that sees no key
// gets zeros. Differentiable with respect to q, k and v (F32).
struct ggml_tensor * ggml_flash_attn_ext(struct ggml_context * ctx, struct ggml_tensor * q, struct ggml_tensor * k,
                                         struct ggml_tensor * v, struct ggml_tensor * mask, float scale, float max_bias,
                                         float logit_softcap);
void ggml_flash_attn_ext_set_prec(struct ggml_tensor * a, enum ggml_prec prec);  // accepted; F32 here whatever it is
// The gradients of flash_attn_ext(q, k, v, mask, ...) given grad, the gradient of its result:
// one F32 vector holding grad q, then grad k, then grad v, each contiguous in its source's shape.
struct ggml_tensor * ggml_flash_attn_back(struct ggml_context * ctx, struct ggml_tensor * q, struct ggml_tensor * k,
                                          struct ggml_tensor * v, struct ggml_tensor * mask, struct ggml_tensor * grad,
                                          float scale, float max_bias, float logit_softcap);

// Rotary position embedding. a: [head_dim, n_head, n_tokens, 1], b: I32 positions [n_tokens].
// c: optional F32 frequency factors [n_dims/2] (NULL for none). YaRN arguments as in ggml;
// ext_factor 0 and attn_factor 1 give plain (linearly scaled) RoPE.
struct ggml_tensor * ggml_rope(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, int n_dims, int mode);
struct ggml_tensor * ggml_rope_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, int n_dims, int mode);
struct ggml_tensor * ggml_rope_ext(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, struct ggml_tensor * c,
        int n_dims, int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
        float attn_factor, float beta_fast, float beta_slow);
struct ggml_tensor * ggml_rope_ext_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, struct ggml_tensor * c,
        int n_dims, int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
        float attn_factor, float beta_fast, float beta_slow);

// Mean over rows of the cross entropy between softmax(a) and the probabilities b -> F32 [1].
struct ggml_tensor * ggml_cross_entropy_loss(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);

// ---- ops of the backward pass (autodiff emits these; each is also a plain op) ---------------
// a with b added into the view of a given by strides nb1..nb3 and byte offset (a's layout).
struct ggml_tensor * ggml_acc(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                              size_t nb1, size_t nb2, size_t nb3, size_t offset);
struct ggml_tensor * ggml_acc_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                      size_t nb1, size_t nb2, size_t nb3, size_t offset);
// The reverse of ggml_repeat: a (b's shape tiled) summed back to b's shape.
struct ggml_tensor * ggml_repeat_back(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
// grad * f'(x) for the unary op f (any of enum ggml_unary_op); silu and gelu by name.
struct ggml_tensor * ggml_unary_back(struct ggml_context * ctx, struct ggml_tensor * grad, struct ggml_tensor * x, enum ggml_unary_op op);
struct ggml_tensor * ggml_silu_back(struct ggml_context * ctx, struct ggml_tensor * grad, struct ggml_tensor * x);
struct ggml_tensor * ggml_gelu_back(struct ggml_context * ctx, struct ggml_tensor * grad, struct ggml_tensor * x);
// Gradients of norm / rms_norm with respect to their input x, given the output's gradient.
struct ggml_tensor * ggml_norm_back(struct ggml_context * ctx, struct ggml_tensor * grad, struct ggml_tensor * x, float eps);
struct ggml_tensor * ggml_rms_norm_back(struct ggml_context * ctx, struct ggml_tensor * grad, struct ggml_tensor * x, float eps);
// Sets a[i0, i1] = 0 where i0 > n_past + i1 (the gradient of diag_mask_inf).
struct ggml_tensor * ggml_diag_mask_zero(struct ggml_context * ctx, struct ggml_tensor * a, int n_past);
// Gradient of soft_max_ext(a, mask, scale, max_bias) with respect to a, from the output y = the
// softmax and its gradient: scale * y * (grad - sum(grad * y)) per row.
struct ggml_tensor * ggml_soft_max_ext_back(struct ggml_context * ctx, struct ggml_tensor * grad, struct ggml_tensor * y,
                                            float scale, float max_bias);
// Gradient of rope_ext: the inverse rotation of grad (same arguments as the forward op).
struct ggml_tensor * ggml_rope_ext_back(struct ggml_context * ctx, struct ggml_tensor * grad, struct ggml_tensor * b, struct ggml_tensor * c,
        int n_dims, int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
        float attn_factor, float beta_fast, float beta_slow);
// Gradient of get_rows(a, b): rows of grad added (in index order) into zeros of shape c (a's shape).
struct ggml_tensor * ggml_get_rows_back(struct ggml_context * ctx, struct ggml_tensor * grad, struct ggml_tensor * b, struct ggml_tensor * c);
// Gradient of cross_entropy_loss(a, b) with respect to the logits a: (softmax(a) * sum(b) - b) *
// grad / rows per row (labels need not sum to 1: rows of zeros drop out, weights scale).
struct ggml_tensor * ggml_cross_entropy_loss_back(struct ggml_context * ctx, struct ggml_tensor * grad, struct ggml_tensor * a, struct ggml_tensor * b);

// ---- optimizer steps (ops: one graph serves every step; the result is a view of a) ---------
// AdamW with decoupled weight decay, as torch.optim.AdamW. adamw_params: F32 [7] = alpha (the
// learning rate), beta1, beta2, eps, wd, beta1h = 1/(1 - beta1^t), beta2h = 1/(1 - beta2^t).
// m, v: F32 moments of a's shape, updated in place. Per element:
//   m = beta1*m + (1-beta1)*g;  v = beta2*v + (1-beta2)*g^2;
//   a = a*(1 - alpha*wd) - alpha * (m*beta1h) / (sqrt(v*beta2h) + eps)
struct ggml_tensor * ggml_opt_step_adamw(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * grad,
                                         struct ggml_tensor * m, struct ggml_tensor * v, struct ggml_tensor * adamw_params);
// SGD with decoupled weight decay. params: F32 [2] = alpha, wd:  a = a*(1 - alpha*wd) - alpha*g
struct ggml_tensor * ggml_opt_step_sgd(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * grad,
                                       struct ggml_tensor * params);

// ---- graphs --------------------------------------------------------------------------------
struct ggml_cgraph * ggml_new_graph(struct ggml_context * ctx);  // GGML_DEFAULT_GRAPH_SIZE nodes, no grads
struct ggml_cgraph * ggml_new_graph_custom(struct ggml_context * ctx, size_t size, bool grads);
void   ggml_build_forward_expand(struct ggml_cgraph * cgraph, struct ggml_tensor * tensor);
int    ggml_graph_size(struct ggml_cgraph * cgraph);
int    ggml_graph_n_nodes(struct ggml_cgraph * cgraph);
struct ggml_tensor * ggml_graph_node(struct ggml_cgraph * cgraph, int i);  // i < 0: from the end
struct ggml_tensor ** ggml_graph_nodes(struct ggml_cgraph * cgraph);
int    ggml_graph_n_leafs(struct ggml_cgraph * cgraph);
struct ggml_tensor * ggml_graph_leaf(struct ggml_cgraph * cgraph, int i);
struct ggml_tensor * ggml_graph_get_tensor(const struct ggml_cgraph * cgraph, const char * name);
void   ggml_graph_clear(struct ggml_cgraph * cgraph);
void   ggml_graph_print(const struct ggml_cgraph * cgraph);
// Copies src's nodes, leafs (and gradients, where both graphs have room) into dst (size >= src's).
void   ggml_graph_cpy(struct ggml_cgraph * src, struct ggml_cgraph * dst);
// A new graph in ctx of src's size holding src's nodes (with gradient room if src has it or force_grads).
struct ggml_cgraph * ggml_graph_dup(struct ggml_context * ctx, struct ggml_cgraph * cgraph, bool force_grads);
// Adds a node at the end (the caller keeps the order topological).
void   ggml_graph_add_node(struct ggml_cgraph * cgraph, struct ggml_tensor * tensor);

// ---- automatic differentiation --------------------------------------------------------------
// cgraph (made with grads = true) holds a forward pass with a tensor flagged ggml_set_loss and
// tensors flagged ggml_set_param. Appends the backward pass: every node between the params and
// the loss gets a gradient of its shape (F32), built from each op's backward rule. grad_accs
// (indexed like cgraph's nodes; may be NULL): where non-NULL, the param's gradient is added into
// that tensor (accumulation over micro-batches); otherwise the gradient is a node of its own,
// created in ctx and flagged as output. The loss gets an accumulator set to 1 by ggml_graph_reset.
// In-place ops cannot be differentiated (their input is overwritten): build with the plain ops.
void ggml_build_backward_expand(struct ggml_context * ctx, struct ggml_cgraph * cgraph, struct ggml_tensor ** grad_accs);
struct ggml_tensor * ggml_graph_get_grad(const struct ggml_cgraph * cgraph, const struct ggml_tensor * node);      // NULL: none
struct ggml_tensor * ggml_graph_get_grad_acc(const struct ggml_cgraph * cgraph, const struct ggml_tensor * node);  // NULL: none
// Gradient accumulators to 0, the loss's gradient to 1, optimizer moments (of opt_step nodes) to 0.
void ggml_graph_reset(struct ggml_cgraph * cgraph);

// Gradient checkpointing: ggml_build_backward_expand, after which the backward pass reads, of
// the forward pass, only the checkpoints (e.g. each layer's output), params, inputs, outputs and
// leafs. Every other forward value it reads is recomputed from the nearest checkpoints, and each
// recomputed tensor is placed just before its first backward reader (forward nodes stay first,
// in their order). With the memory planner, forward activations then die after their last
// forward reader, and only one segment between checkpoints is alive at a time in the backward
// pass, for about one more forward pass of compute. Gradients are those of the plain backward
// pass, bit for bit. ctx should be no_alloc (the planner places the recomputed tensors); the
// graph needs room for up to twice its forward nodes plus the backward pass.
void ggml_build_backward_checkpointed(struct ggml_context * ctx, struct ggml_cgraph * cgraph, struct ggml_tensor ** grad_accs,
                                      struct ggml_tensor ** checkpoints, int n_checkpoints);

// ---- CPU compute ---------------------------------------------------------------------------
// Computes every node in order on a persistent pool of n_threads threads. The work buffer is
// taken from ctx (allocated before the first node runs; nothing is allocated while computing).
enum ggml_status { GGML_STATUS_ALLOC_FAILED = -2, GGML_STATUS_FAILED = -1, GGML_STATUS_SUCCESS = 0, GGML_STATUS_ABORTED = 1 };
enum ggml_status ggml_graph_compute_with_ctx(struct ggml_context * ctx, struct ggml_cgraph * cgraph, int n_threads);

// Lower level: plan (work buffer size), then compute with a caller-provided work buffer.
struct ggml_cplan {
    size_t    work_size;
    uint8_t * work_data;
    int       n_threads;
    ggml_abort_callback abort_callback;  // polled between nodes; true stops the graph
    void *    abort_callback_data;
    struct ggml_threadpool * threadpool;  // the workers to run on; NULL: the process-wide pool
    // NULL, or called on the calling thread once node i and every node before it are complete,
    // while the other threads go on with the next node (the training code starts sending a
    // gradient as soon as the backward pass has finished it).
    void (*node_callback)(int i, struct ggml_tensor * node, void * data);
    void *    node_callback_data;
};
struct ggml_cplan ggml_graph_plan(const struct ggml_cgraph * cgraph, int n_threads);
enum ggml_status  ggml_graph_compute(struct ggml_cgraph * cgraph, struct ggml_cplan * cplan);

// ---- thread pools --------------------------------------------------------------------------
// A pool of worker threads for graph computes (ggml-cpu.h: ggml_threadpool_new), as ggml's API
// has it. The pool in ggml_cplan.threadpool is such a pool.
enum ggml_sched_priority {
    GGML_SCHED_PRIO_NORMAL,
    GGML_SCHED_PRIO_MEDIUM,
    GGML_SCHED_PRIO_HIGH,
    GGML_SCHED_PRIO_REALTIME
};

struct ggml_threadpool_params {
    bool                cpumask[GGML_MAX_N_THREADS]; // the cores the workers may run on (all false: no placement)
    int                 n_threads;                   // threads of a compute (the caller's included)
    enum ggml_sched_priority prio;                   // the workers' scheduling priority
    uint32_t            poll;                        // 0: idle workers sleep at once ... 100: they poll longest
    bool                strict_cpu;                  // each worker on one core of the mask (else all on the mask)
    bool                paused;                      // created paused (the first compute resumes it)
};

typedef struct ggml_threadpool * ggml_threadpool_t;

// Defaults: n_threads threads, no placement, normal priority, poll 50, not strict, not paused.
struct ggml_threadpool_params ggml_threadpool_params_default(int n_threads);
void                          ggml_threadpool_params_init   (struct ggml_threadpool_params * p, int n_threads);
// Whether the two would make the same pool (every field equal).
bool                          ggml_threadpool_params_match  (const struct ggml_threadpool_params * p0, const struct ggml_threadpool_params * p1);

// Weights repacked for the CPU: mul_mat reads some quantized matrices faster with their blocks
// rearranged (same bytes, same results as the scalar reference dot). ggml_cpu_can_repack: this
// build has such a layout for t (Q4_0, Q8_0, Q4_K, Q5_K, Q6_K on AVX512-VNNI and NEON-dotprod
// builds, all but Q8_0 on AVX2; a matrix with data, not a view,
// contiguous, rows a multiple of 16). ggml_cpu_repack rearranges t's data in place (the memory
// must be writable) and sets GGML_TENSOR_FLAG_REPACKED; false, with nothing changed, where it
// cannot. Afterwards only mul_mat and out_prod may read t, as their src0: graph compute refuses
// other readers.
bool ggml_cpu_can_repack(const struct ggml_tensor * t);
bool ggml_cpu_repack(struct ggml_tensor * t);

// Names the kernels this build selected ("AMX", "AVX512", "AVX2", "NEON", "scalar").
const char * ggml_cpu_isa_name(void);
int ggml_cpu_has_avx2(void);
int ggml_cpu_has_avx512(void);
int ggml_cpu_has_avx512_vnni(void);
int ggml_cpu_has_amx_int8(void);
int ggml_cpu_has_neon(void);
int ggml_cpu_has_dotprod(void);

#ifdef __cplusplus
}
#endif
