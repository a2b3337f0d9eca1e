// ggml-impl.h - internals shared by the core, the planner, GGUF and the CPU backend.
#pragma once

#include "ggml.h"

#include <string.h>
#include <math.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- context arena -------------------------------------------------------------------------
// A context is one buffer holding objects (tensor structs, their data unless no_alloc, graphs,
// work buffers) one after another. Objects are never freed individually.
enum ggml_object_type { GGML_OBJECT_TYPE_TENSOR, GGML_OBJECT_TYPE_GRAPH, GGML_OBJECT_TYPE_WORK_BUFFER };

struct ggml_object {
    size_t offs;                // payload offset from mem_buffer
    size_t size;                // payload size
    struct ggml_object * next;
    enum ggml_object_type type;
    char padding[4];
};

#define GGML_OBJECT_SIZE sizeof(struct ggml_object)

struct ggml_context {
    size_t mem_size;
    void * mem_buffer;
    bool   mem_buffer_owned;
    bool   no_alloc;
    int    n_objects;
    struct ggml_object * objects_begin;
    struct ggml_object * objects_end;
};

// Allocates a work buffer object of size bytes in ctx (NULL when it does not fit).
void * ggml_new_buffer(struct ggml_context * ctx, size_t nbytes);

// ---- graphs --------------------------------------------------------------------------------
// Open-addressing set of tensor pointers, used to visit each tensor once while building a graph
// and by the planner. Size is a prime >= 2x the graph size.
struct ggml_hash_set {
    size_t size;
    uint32_t * used;  // bitset
    struct ggml_tensor ** keys;
};

#define GGML_HASHSET_FULL            ((size_t)-1)
#define GGML_HASHSET_ALREADY_EXISTS  ((size_t)-2)

size_t ggml_hash_size(size_t min_sz);
size_t ggml_bitset_size(size_t n);
size_t ggml_hash_find(const struct ggml_hash_set * set, const struct ggml_tensor * key);  // slot index or GGML_HASHSET_FULL
bool   ggml_hash_contains(const struct ggml_hash_set * set, const struct ggml_tensor * key);
size_t ggml_hash_insert(struct ggml_hash_set * set, struct ggml_tensor * key);  // slot, or ALREADY_EXISTS / FULL

struct ggml_cgraph {
    int size;     // capacity of nodes / leafs / grads
    int n_nodes;  // tensors computed by an op, topological order
    int n_leafs;  // tensors with no op (inputs, weights, constants)

    struct ggml_tensor ** nodes;
    struct ggml_tensor ** grads;      // room for autodiff: gradient of nodes[i] (NULL without grads)
    struct ggml_tensor ** grad_accs;  // room for autodiff: gradient accumulators
    struct ggml_tensor ** leafs;

    struct ggml_hash_set visited_hash_set;
};

// ---- ops -----------------------------------------------------------------------------------
static inline void ggml_set_op_params(struct ggml_tensor * t, const void * params, size_t size) {
    GGML_ASSERT(size <= GGML_MAX_OP_PARAMS);
    memcpy(t->op_params, params, size);
}
static inline int32_t ggml_get_op_params_i32(const struct ggml_tensor * t, uint32_t i) {
    return t->op_params[i];
}
static inline float ggml_get_op_params_f32(const struct ggml_tensor * t, uint32_t i) {
    float v;
    memcpy(&v, &t->op_params[i], sizeof(v));
    return v;
}
static inline void ggml_set_op_params_i32(struct ggml_tensor * t, uint32_t i, int32_t v) {
    t->op_params[i] = v;
}
static inline void ggml_set_op_params_f32(struct ggml_tensor * t, uint32_t i, float v) {
    memcpy(&t->op_params[i], &v, sizeof(v));
}

// Op parameter layout (op_params index: meaning), shared by the builders and the kernels:
//   SCALE: f32[0] s.   NORM, RMS_NORM: f32[0] eps.   CONCAT: i32[0] dim.
//   DIAG_MASK_INF: i32[0] n_past.   UNARY: i32[0] enum ggml_unary_op.
//   SOFT_MAX: f32[0] scale, f32[1] max_bias; src[1] optional mask.
//   ROPE: i32[1] n_dims, i32[2] mode, i32[4] n_ctx_orig, f32[5] freq_base, f32[6] freq_scale,
//         f32[7] ext_factor, f32[8] attn_factor, f32[9] beta_fast, f32[10] beta_slow;
//         src[1] I32 positions, src[2] optional freq factors.
//   CPY: src[0] source, src[1] destination; the node is a view of src[1].
//   VIEW: size_t offset at op_params[0..1] (informative; view_offs is authoritative).
//   OUT_PROD: i32[0] enum ggml_prec (0: F32 products).
//   ARGSORT: i32[0] enum ggml_sort_order.
//   MUL_MAT_ID: src[0] as, src[1] b, src[2] I32 ids (ggml_mul_mat_id).
//   MUL_MAT_ID_BACK: src[0] as, src[1] grad [N, n_used, n_tokens], src[2] ids; F32 result of the
//        forward op's b's shape: column (j, t) = sum over i with i % n_b == j of as[ids[i, t]]^T grad(i, t).
//   PERMUTE: i32[0..3] axes.
//   ACC: size_t[0..3] at op_params: nb1, nb2, nb3, offset of the view of src[0] that src[1] is
//        added into; the result has src[0]'s shape (a view of src[0] for ggml_acc_inplace).
//        Without src[0] (the gradient of a view), the base is F32 zeros of the result's shape.
//   REPEAT_BACK: src[0] the tiled tensor; the result has the shape it was tiled from.
//   UNARY_BACK: i32[0] enum ggml_unary_op; src[0] grad, src[1] x (the forward op's input).
//   NORM_BACK, RMS_NORM_BACK: f32[0] eps; src[0] grad, src[1] x.
//   DIAG_MASK_ZERO: i32[0] n_past.
//   SOFT_MAX_BACK: f32[0] scale, f32[1] max_bias; src[0] grad, src[1] y (the forward output).
//   ROPE_BACK: ROPE's params; src[0] grad, src[1] I32 positions, src[2] optional freq factors.
//   GET_ROWS_BACK: src[0] grad [ne0, n, A2, A3], src[1] I32 indices [n, A2, A3]; F32 result of
//        the forward op's a's shape.
//   CROSS_ENTROPY_LOSS_BACK: src[0] grad (F32 scalar), src[1] logits, src[2] target probabilities.
//   OPT_STEP_ADAMW: src[0] the parameter (updated in place; the node is a view of it), src[1]
//        grad, src[2] m, src[3] v, src[4] F32 [7] params (see ggml_opt_step_adamw).
//   OPT_STEP_SGD: src[0] the parameter, src[1] grad, src[2] F32 [2] params (alpha, wd).

// ---- the op table ----------------------------------------------------------------------------
// One row per op: what the core, the planner and autodiff need to know about it. Kernels are
// registered per backend (cpu/compute.cpp). A new op is: builder + backward rule (side by side
// in ggml-ops*.cpp) + a row here + a kernel + a test.
struct ggml_backward_ctx;  // ggml-backward.cpp
// Adds the gradient contributions of node's sources, given grad (node's gradient, F32, node's
// shape), through the helpers of ggml-backward.h.
typedef void (*ggml_backward_fn)(struct ggml_backward_ctx * bw, struct ggml_tensor * node, struct ggml_tensor * grad);

enum ggml_op_flag {
    GGML_OP_FLAG_VIEW     = 1,  // the result is a view of src[0] and computes nothing
    GGML_OP_FLAG_IN_PLACE = 2,  // the kernel may write dst over src[0] (same type, shape, strides)
    GGML_OP_FLAG_NO_GRAD  = 4,  // no gradient flows through it (integer results, optimizer steps)
};

struct ggml_op_info {
    enum ggml_op op;           // == its index (checked at compile time)
    const char * name;
    const char * symbol;
    int n_src;                 // sources it may read (optional ones included)
    int flags;                 // enum ggml_op_flag
    ggml_backward_fn backward; // NULL with NO_GRAD, or where no rule exists yet (an error if needed)
};

const struct ggml_op_info * ggml_op_get_info(enum ggml_op op);
// True for ops whose result is a view of their first source that computes nothing.
bool ggml_op_is_view(enum ggml_op op);

// ---- scalar F16 / BF16 conversion (inline, for kernels) ------------------------------------
static inline float ggml_compute_fp16_to_fp32(ggml_fp16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp  = (h >> 10) & 0x1fu;
    const uint32_t man  = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);          // inf / nan
    } else if (exp == 0) {
        const float v = (float)man * 0x1p-24f;             // zero / subnormal: exact in float
        return sign ? -v : v;
    } else {
        bits = sign | ((exp + 112u) << 23) | (man << 13);  // rebias 15 -> 127
    }
    float f; memcpy(&f, &bits, 4);
    return f;
}

// Round to nearest, ties to even; overflow gives inf, NaN stays a quiet NaN.
static inline ggml_fp16_t ggml_compute_fp32_to_fp16(float f) {
    uint32_t x; memcpy(&x, &f, 4);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (ggml_fp16_t)(sign | 0x7e00u);
    if (ax >= 0x477ff000u) return (ggml_fp16_t)(sign | 0x7c00u);  // >= 65520 rounds to inf
    if (ax < 0x38800000u) {                                       // below 2^-14: subnormal half
        if (ax < 0x33000000u) return sign;                        // <= 2^-25 rounds to zero
        const uint32_t e = ax >> 23;
        const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126u - e;                          // 14..24
        uint32_t r = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1u))) r++;
        return (ggml_fp16_t)(sign | r);
    }
    const uint32_t v = ax - 0x38000000u;                          // rebias 127 -> 15
    uint32_t r = v >> 13;
    const uint32_t rem = v & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++;
    return (ggml_fp16_t)(sign | r);
}

static inline float ggml_compute_bf16_to_fp32(ggml_bf16_t h) {
    const uint32_t bits = (uint32_t)h.bits << 16;
    float f; memcpy(&f, &bits, 4);
    return f;
}

static inline ggml_bf16_t ggml_compute_fp32_to_bf16(float s) {
    ggml_bf16_t h;
    uint32_t u; memcpy(&u, &s, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it quiet
        h.bits = (uint16_t)((u >> 16) | 64);
        return h;
    }
    h.bits = (uint16_t)((u + (0x7fffu + ((u >> 16) & 1))) >> 16);
    return h;
}

// The first index of the largest of n floats (a NaN never wins; 0 when none beats -inf): the
// largest in 16 interleaved lanes (a loop compilers vectorize), then the first index holding it,
// 16 at a time. Shared by the ARGMAX op and the optimizer's accuracy count.
static inline int64_t ggml_argmax_f32_row(const float * v, int64_t n) {
    float lanes[16];
    for (int k = 0; k < 16; k++) lanes[k] = -INFINITY;
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        for (int k = 0; k < 16; k++) lanes[k] = v[j + k] > lanes[k] ? v[j + k] : lanes[k];
    }
    for (; j < n; j++) lanes[0] = v[j] > lanes[0] ? v[j] : lanes[0];
    float best = -INFINITY;
    for (int k = 0; k < 16; k++) best = lanes[k] > best ? lanes[k] : best;
    if (!(best > -INFINITY)) return 0;
    for (j = 0; j < n; j += 16) {
        const int64_t m = n - j < 16 ? n - j : 16;
        int hit = 0;
        for (int64_t k = 0; k < m; k++) hit |= v[j + k] == best;
        if (hit) break;
    }
    while (v[j] != best) j++;
    return j;
}

#define GGML_FP16_TO_FP32(x) ggml_compute_fp16_to_fp32(x)
#define GGML_FP32_TO_FP16(x) ggml_compute_fp32_to_fp16(x)
#define GGML_BF16_TO_FP32(x) ggml_compute_bf16_to_fp32(x)
#define GGML_FP32_TO_BF16(x) ggml_compute_fp32_to_bf16(x)

// ---- logging -------------------------------------------------------------------------------
// Errors of the library go to stderr through this one function (tests may silence it).
#ifdef __GNUC__
__attribute__((format(printf, 1, 2)))
#endif
void ggml_log_error(const char * fmt, ...);
// Warnings (stderr by default) and debug messages (to a ggml_log_set callback only).
#ifdef __GNUC__
__attribute__((format(printf, 1, 2)))
#endif
void ggml_log_warn(const char * fmt, ...);
#ifdef __GNUC__
__attribute__((format(printf, 1, 2)))
#endif
void ggml_log_debug(const char * fmt, ...);

#ifdef __cplusplus
}
#endif
