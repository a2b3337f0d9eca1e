// ops-common.h - small helpers shared by the CPU op kernels: one element or one row of
// F32/F16/BF16 (and I32) as float, strided gather/scatter, and the vectorized exp/silu/sigmoid
// rows (defined in ops-unary.cpp). Header-only except where noted; stable for other kernels.
#pragma once

#include "cpu-ops.h"
#include "kernels.h"

#include <stdint.h>
#include <string.h>

// Floats per stack buffer when a kernel converts a row piecewise (keeps buffers in L1).
#define GGML_CPU_CHUNK 256

// True for the types these helpers convert to and from float.
static inline bool ggml_cpu_is_float_type(enum ggml_type type) {
    return type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16;
}

// ---- one element ---------------------------------------------------------------------------
// memcpy keeps unaligned views legal; compilers turn it into a plain load/store.
static inline float ggml_cpu_load_f32(enum ggml_type type, const void * p) {
    switch (type) {
        case GGML_TYPE_F32:  { float v; memcpy(&v, p, 4); return v; }
        case GGML_TYPE_F16:  { ggml_fp16_t h; memcpy(&h, p, 2); return GGML_FP16_TO_FP32(h); }
        case GGML_TYPE_BF16: { ggml_bf16_t h; memcpy(&h, p, 2); return GGML_BF16_TO_FP32(h); }
        case GGML_TYPE_I32:  { int32_t v; memcpy(&v, p, 4); return (float) v; }
        default: GGML_ABORT("ggml_cpu_load_f32: unsupported type %d", (int) type);
    }
}

static inline void ggml_cpu_store_f32(enum ggml_type type, void * p, float v) {
    switch (type) {
        case GGML_TYPE_F32:  memcpy(p, &v, 4); break;
        case GGML_TYPE_F16:  { const ggml_fp16_t h = GGML_FP32_TO_FP16(v); memcpy(p, &h, 2); break; }
        case GGML_TYPE_BF16: { const ggml_bf16_t h = GGML_FP32_TO_BF16(v); memcpy(p, &h, 2); break; }
        case GGML_TYPE_I32:  { const int32_t i = (int32_t) v; memcpy(p, &i, 4); break; }
        default: GGML_ABORT("ggml_cpu_store_f32: unsupported type %d", (int) type);
    }
}

// ---- contiguous rows -----------------------------------------------------------------------
// F16: the build's table (kernels.h), rounding to nearest even.
static inline void ggml_cpu_f16_to_f32_row(const ggml_fp16_t * x, float * y, int64_t n) { ggml_cpu()->f16_to_f32_row(x, y, n); }
static inline void ggml_cpu_f32_to_f16_row(const float * x, ggml_fp16_t * y, int64_t n) { ggml_cpu()->f32_to_f16_row(x, y, n); }

// Plain integer loops: the compiler vectorizes both directions.
static inline void ggml_cpu_bf16_to_f32_row(const ggml_bf16_t * x, float * y, int64_t n) {
    const uint16_t * xs = (const uint16_t *) x;
    uint32_t * yu = (uint32_t *) y;
    for (int64_t i = 0; i < n; i++) yu[i] = (uint32_t) xs[i] << 16;
}

static inline void ggml_cpu_f32_to_bf16_row(const float * x, ggml_bf16_t * y, int64_t n) {
    const uint32_t * xu = (const uint32_t *) x;
    uint16_t * ys = (uint16_t *) y;
    for (int64_t i = 0; i < n; i++) {
        const uint32_t u = xu[i];
        const uint16_t rounded = (uint16_t) ((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
        const uint16_t quiet   = (uint16_t) ((u >> 16) | 64u);
        ys[i] = (u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded;  // same as GGML_FP32_TO_BF16
    }
}

// x: n contiguous elements of type; y: n floats.
static inline void ggml_cpu_row_to_f32(enum ggml_type type, const void * x, float * y, int64_t n) {
    switch (type) {
        case GGML_TYPE_F32:  if ((const void *) y != x) memmove(y, x, (size_t) n * sizeof(float)); break;
        case GGML_TYPE_F16:  ggml_cpu_f16_to_f32_row((const ggml_fp16_t *) x, y, n); break;
        case GGML_TYPE_BF16: ggml_cpu_bf16_to_f32_row((const ggml_bf16_t *) x, y, n); break;
        case GGML_TYPE_I32:  for (int64_t i = 0; i < n; i++) y[i] = (float) ((const int32_t *) x)[i]; break;
        default: GGML_ABORT("ggml_cpu_row_to_f32: unsupported type %d", (int) type);
    }
}

static inline void ggml_cpu_row_from_f32(enum ggml_type type, const float * x, void * y, int64_t n) {
    switch (type) {
        case GGML_TYPE_F32:  if ((void *) x != y) memmove(y, x, (size_t) n * sizeof(float)); break;
        case GGML_TYPE_F16:  ggml_cpu_f32_to_f16_row(x, (ggml_fp16_t *) y, n); break;
        case GGML_TYPE_BF16: ggml_cpu_f32_to_bf16_row(x, (ggml_bf16_t *) y, n); break;
        case GGML_TYPE_I32:  for (int64_t i = 0; i < n; i++) ((int32_t *) y)[i] = (int32_t) x[i]; break;
        default: GGML_ABORT("ggml_cpu_row_from_f32: unsupported type %d", (int) type);
    }
}

// ---- strided rows (stride in bytes; stride == element size takes the contiguous path) -------
static inline void ggml_cpu_gather_f32(enum ggml_type type, const void * x, size_t stride, float * y, int64_t n) {
    if (stride == ggml_type_size(type)) {
        ggml_cpu_row_to_f32(type, x, y, n);
        return;
    }
    const char * p = (const char *) x;
    for (int64_t i = 0; i < n; i++) y[i] = ggml_cpu_load_f32(type, p + i * stride);
}

static inline void ggml_cpu_scatter_f32(enum ggml_type type, const float * x, void * y, size_t stride, int64_t n) {
    if (stride == ggml_type_size(type)) {
        ggml_cpu_row_from_f32(type, x, y, n);
        return;
    }
    char * p = (char *) y;
    for (int64_t i = 0; i < n; i++) ggml_cpu_store_f32(type, p + i * stride, x[i]);
}

// Address of element (i0, i1, i2, i3).
static inline char * ggml_cpu_elem_ptr(const struct ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return (char *) t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

// ---- vectorized math on float rows (ops-unary.cpp) -------------------------------------------
// exp within ~1 ulp (tests: <= 2) on normal results (0 below -103.97, inf above 88.73, NaN kept);
// silu and sigmoid within ~3 ulp. Every
// element gets the same value whatever its position or n (vector tails are padded, not scalar),
// so splitting rows differently never changes a result. y may equal x.
#ifdef __cplusplus
extern "C" {
#endif
float ggml_cpu_exp_f32(float x);                                   // the scalar path of the same algorithm
void  ggml_cpu_vec_exp_f32    (float * y, const float * x, int64_t n);
void  ggml_cpu_vec_silu_f32   (float * y, const float * x, int64_t n);  // x / (1 + exp(-x))
void  ggml_cpu_vec_sigmoid_f32(float * y, const float * x, int64_t n);  // 1 / (1 + exp(-x))
#ifdef __cplusplus
}
#endif

#ifdef __cplusplus
// Calls row(i1, i2, i3) for each row of t in this thread's share (ggml_cpu_split_rows), in order.
template <typename RowFn>
static void ggml_cpu_for_own_rows(const struct ggml_compute_params * params, const struct ggml_tensor * t, RowFn row) {
    int64_t r0, r1;
    ggml_cpu_split_rows(ggml_nrows(t), params->ith, params->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) row(ir % t->ne[1], (ir / t->ne[1]) % t->ne[2], ir / (t->ne[1] * t->ne[2]));
}

// Applies fn(float * y, const float * x, int64_t n) to every row of src into dst (same shape,
// F32/F16/BF16, any strides; dst may be src itself). Rows are split across threads; each row
// is processed the same way whatever the split. fn must be elementwise (F16/BF16 and strided
// rows reach it in chunks) and accept y == x.
template <typename RowFn>
static void ggml_cpu_map_rows_f32(const struct ggml_compute_params * params, struct ggml_tensor * dst,
                                  const struct ggml_tensor * src, RowFn fn) {
    GGML_ASSERT(src != NULL && ggml_are_same_shape(src, dst));
    GGML_ASSERT(ggml_cpu_is_float_type(src->type) && ggml_cpu_is_float_type(dst->type));

    const int64_t ne0 = dst->ne[0];
    const bool direct = src->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F32 &&
                        src->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float);
    float buf[GGML_CPU_CHUNK];
    ggml_cpu_for_own_rows(params, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
        const char * x = ggml_cpu_elem_ptr(src, 0, i1, i2, i3);
        char * y = ggml_cpu_elem_ptr(dst, 0, i1, i2, i3);
        if (direct) {
            fn((float *) y, (const float *) x, ne0);
            return;
        }
        for (int64_t c = 0; c < ne0; c += GGML_CPU_CHUNK) {
            const int64_t n = ne0 - c < GGML_CPU_CHUNK ? ne0 - c : GGML_CPU_CHUNK;
            ggml_cpu_gather_f32(src->type, x + c * src->nb[0], src->nb[0], buf, n);
            fn(buf, buf, n);
            ggml_cpu_scatter_f32(dst->type, buf, y + c * dst->nb[0], dst->nb[0], n);
        }
    });
}
#endif
