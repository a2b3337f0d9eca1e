// ops-copy.cpp - dup / cpy / cont (copy with type conversion and reshaping), repeat, concat,
// get_rows, set_rows, and their backward ops: acc, repeat_back, get_rows_back.
//
// Conversions go through one "row to float" and one "float to row" function per type
// (row_to_f32_fn / row_from_f32_fn): F32, F16, BF16 and I32 are handled here, any other type
// falls back to ggml_get_type_traits(), which is where quantized types plug in. Same-type
// copies never go through float, so they are exact for every type (I32 included).
#include "ops-common.h"

#include <algorithm>
#include <string.h>

static_assert(GGML_CPU_CHUNK % 256 == 0, "chunks must hold whole blocks of every block type");

namespace {

typedef void (*row_to_f32_t)(const void * x, float * y, int64_t n);
typedef void (*row_from_f32_t)(const float * x, void * y, int64_t n);

void f32_to_f32(const void * x, float * y, int64_t n) { memcpy(y, x, (size_t) n * sizeof(float)); }
void f32_from_f32(const float * x, void * y, int64_t n) { memcpy(y, x, (size_t) n * sizeof(float)); }
void f16_to_f32(const void * x, float * y, int64_t n) { ggml_cpu_f16_to_f32_row((const ggml_fp16_t *) x, y, n); }
void f16_from_f32(const float * x, void * y, int64_t n) { ggml_cpu_f32_to_f16_row(x, (ggml_fp16_t *) y, n); }
void bf16_to_f32(const void * x, float * y, int64_t n) { ggml_cpu_bf16_to_f32_row((const ggml_bf16_t *) x, y, n); }
void bf16_from_f32(const float * x, void * y, int64_t n) { ggml_cpu_f32_to_bf16_row(x, (ggml_bf16_t *) y, n); }
void i32_to_f32(const void * x, float * y, int64_t n) { ggml_cpu_row_to_f32(GGML_TYPE_I32, x, y, n); }
void i32_from_f32(const float * x, void * y, int64_t n) { ggml_cpu_row_from_f32(GGML_TYPE_I32, x, y, n); }

// n contiguous elements (n a multiple of the block size for block types) to float.
row_to_f32_t row_to_f32_fn(enum ggml_type type) {
    switch (type) {
        case GGML_TYPE_F32:  return f32_to_f32;
        case GGML_TYPE_F16:  return f16_to_f32;
        case GGML_TYPE_BF16: return bf16_to_f32;
        case GGML_TYPE_I32:  return i32_to_f32;
        default: {
            const struct ggml_type_traits * tt = ggml_get_type_traits(type);
            GGML_ASSERT(tt != NULL && tt->to_float != NULL && "no conversion to float for this type");
            return tt->to_float;
        }
    }
}

row_from_f32_t row_from_f32_fn(enum ggml_type type) {
    switch (type) {
        case GGML_TYPE_F32:  return f32_from_f32;
        case GGML_TYPE_F16:  return f16_from_f32;
        case GGML_TYPE_BF16: return bf16_from_f32;
        case GGML_TYPE_I32:  return i32_from_f32;
        default: {
            const struct ggml_type_traits * tt = ggml_get_type_traits(type);
            GGML_ASSERT(tt != NULL && tt->from_float_ref != NULL && "no conversion from float for this type");
            return tt->from_float_ref;
        }
    }
}

// True when elements [0, n) at x with stride nb0 are packed (block types: always, nb0 is per block).
bool packed(enum ggml_type type, size_t nb0) {
    return ggml_blck_size(type) > 1 || nb0 == ggml_type_size(type);
}

// Address of element i of a row (i a multiple of the block size for block types).
template <typename Ptr>  // char * or const char *
Ptr row_elem(enum ggml_type type, Ptr row, size_t nb0, int64_t i) {
    return ggml_blck_size(type) > 1 ? row + ggml_row_size(type, i) : row + i * nb0;
}

// Copies n elements of one type, any strides (bytes per element es).
void copy_elems(char * y, size_t nby, const char * x, size_t nbx, int64_t n, size_t es) {
    if (nbx == es && nby == es) {
        memcpy(y, x, (size_t) n * es);
        return;
    }
    switch (es) {  // constant sizes let memcpy become one load/store
        case 2: for (int64_t i = 0; i < n; i++) memcpy(y + i * nby, x + i * nbx, 2); break;
        case 4: for (int64_t i = 0; i < n; i++) memcpy(y + i * nby, x + i * nbx, 4); break;
        case 8: for (int64_t i = 0; i < n; i++) memcpy(y + i * nby, x + i * nbx, 8); break;
        default: for (int64_t i = 0; i < n; i++) memcpy(y + i * nby, x + i * nbx, es); break;
    }
}

// Converts n elements from a row of type tx (stride nbx) to a row of type ty (stride nby).
// Block types need packed rows and n a multiple of the block size, or the row's end.
void convert_elems(enum ggml_type ty, char * y, size_t nby, enum ggml_type tx, const char * x, size_t nbx, int64_t n) {
    const bool x_packed = packed(tx, nbx), y_packed = packed(ty, nby);
    if (x_packed && y_packed && ty == GGML_TYPE_F32) {
        row_to_f32_fn(tx)(x, (float *) y, n);
        return;
    }
    if (x_packed && y_packed && tx == GGML_TYPE_F32) {
        row_from_f32_fn(ty)((const float *) x, y, n);
        return;
    }
    float buf[GGML_CPU_CHUNK];  // a multiple of every block size (32, 256)
    for (int64_t c = 0; c < n; c += GGML_CPU_CHUNK) {
        const int64_t m = n - c < GGML_CPU_CHUNK ? n - c : GGML_CPU_CHUNK;
        if (x_packed) {
            row_to_f32_fn(tx)(row_elem(tx, x, nbx, c), buf, m);
        } else {
            ggml_cpu_gather_f32(tx, x + c * nbx, nbx, buf, m);
        }
        if (y_packed) {
            row_from_f32_fn(ty)(buf, row_elem(ty, y, nby, c), m);
        } else {
            ggml_cpu_scatter_f32(ty, buf, y + c * nby, nby, m);
        }
    }
}

// Copies n elements (same or different types) between two rows.
void copy_or_convert(const struct ggml_tensor * dst, char * y, const struct ggml_tensor * src, const char * x, int64_t n) {
    if (dst->type == src->type && ggml_blck_size(src->type) == 1) {
        copy_elems(y, dst->nb[0], x, src->nb[0], n, ggml_type_size(src->type));
    } else {
        convert_elems(dst->type, y, dst->nb[0], src->type, x, src->nb[0], n);
    }
}

void row_index(const struct ggml_tensor * t, int64_t r, int64_t * i1, int64_t * i2, int64_t * i3) {
    *i1 = r % t->ne[1];
    *i2 = (r / t->ne[1]) % t->ne[2];
    *i3 = r / (t->ne[1] * t->ne[2]);
}

// Visits elements [flat, flat + n) of a plain-typed tensor in logical order (i0 fastest), as
// runs that each lie in one row: f(address of the run's first element, run length, elements
// visited before this run).
template <typename F>
void for_each_run(const struct ggml_tensor * t, int64_t flat, int64_t n, F && f) {
    const int64_t ne0 = t->ne[0];
    int64_t i0 = flat % ne0;
    int64_t row = flat / ne0;
    for (int64_t done = 0; done < n; ) {
        const int64_t len = ne0 - i0 < n - done ? ne0 - i0 : n - done;
        int64_t i1, i2, i3;
        row_index(t, row, &i1, &i2, &i3);
        f(ggml_cpu_elem_ptr(t, 0, i1, i2, i3) + i0 * t->nb[0], len, done);
        done += len;
        i0 = 0;
        row++;
    }
}

// dst (packed) = src whose dimension 1 is the contiguous one (a transposed view, as attention's
// V), same plain type: square tiles of TILE x TILE, so that src is read and dst written a cache
// line at a time (walking dst's rows in order strides through src one element per line). The
// work is split by planes and bands of TILE rows.
template <size_t ES>
void transpose_tiles(const struct ggml_compute_params * params, struct ggml_tensor * dst, const struct ggml_tensor * src) {
    constexpr int64_t TILE = 32;
    const int64_t ne0 = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2];
    const int64_t bands = (ne1 + TILE - 1) / TILE, items = bands * ne2 * dst->ne[3];
    int64_t w0, w1;
    ggml_cpu_split_rows(items, params->ith, params->nth, &w0, &w1);
    for (int64_t w = w0; w < w1; w++) {
        const int64_t b = w % bands, i2 = (w / bands) % ne2, i3 = w / (bands * ne2);
        const int64_t i1s = b * TILE, i1e = std::min(ne1, i1s + TILE);
        const char * x = (const char *) src->data + i2 * src->nb[2] + i3 * src->nb[3];
        char * y = (char *) dst->data + i2 * dst->nb[2] + i3 * dst->nb[3];
        for (int64_t i0s = 0; i0s < ne0; i0s += TILE) {
            const int64_t i0e = std::min(ne0, i0s + TILE);
            for (int64_t i0 = i0s; i0 < i0e; i0++) {
                const char * xr = x + i0 * src->nb[0];
                for (int64_t i1 = i1s; i1 < i1e; i1++) memcpy(y + i1 * dst->nb[1] + i0 * ES, xr + i1 * ES, ES);
            }
        }
    }
}

}  // namespace

// dst gets src's elements in logical order (i0 fastest), converted to dst's type. Used for DUP,
// CONT and CPY (where dst is the node, a view of the destination tensor). Rows of a block
// (quantized) type are converted whole, in chunks of GGML_CPU_CHUNK elements: the work is
// split by the rows of the block-typed side, and the other side is walked in logical order.
void ggml_cpu_forward_dup(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const struct ggml_tensor * src = dst->src[0];
    GGML_ASSERT(src != NULL);
    GGML_ASSERT(ggml_nelements(src) == ggml_nelements(dst));

    const bool src_blocks = ggml_blck_size(src->type) > 1;
    const bool dst_blocks = ggml_blck_size(dst->type) > 1;
    int64_t r0, r1;

    // both packed, same type: a flat byte copy of this thread's rows
    if (src->type == dst->type && ggml_is_contiguous(src) && ggml_is_contiguous(dst)) {
        if (dst->data == src->data) return;  // dup_inplace of a packed tensor
        ggml_cpu_split_rows(ggml_nrows(dst), params->ith, params->nth, &r0, &r1);
        const size_t row_bytes = ggml_row_size(dst->type, dst->ne[0]);
        if (r0 < r1) {
            memcpy((char *) dst->data + r0 * row_bytes, (const char *) src->data + r0 * row_bytes, (size_t) (r1 - r0) * row_bytes);
        }
        return;
    }

    const size_t es = ggml_type_size(src->type);
    if (src->type == dst->type && !src_blocks && ggml_are_same_shape(src, dst) && ggml_is_contiguous(dst) && src->nb[1] == es && src->nb[0] > es &&
        dst->ne[0] >= 8 && dst->ne[1] >= 8 && (es == 2 || es == 4)) {
        if (es == 2) {
            transpose_tiles<2>(params, dst, src);
        } else {
            transpose_tiles<4>(params, dst, src);
        }
        return;
    }

    float buf[GGML_CPU_CHUNK];  // a multiple of every block size (32, 256)

    if (src_blocks) {
        // split by src rows; src row r holds dst's flat elements [r ne00, (r + 1) ne00)
        const int64_t ne00 = src->ne[0];
        GGML_ASSERT(!dst_blocks || dst->ne[0] == ne00);  // block to block: rows must line up
        ggml_cpu_split_rows(ggml_nrows(src), params->ith, params->nth, &r0, &r1);
        for (int64_t r = r0; r < r1; r++) {
            int64_t i1, i2, i3;
            row_index(src, r, &i1, &i2, &i3);
            const char * x = ggml_cpu_elem_ptr(src, 0, i1, i2, i3);
            if (dst_blocks) {
                row_index(dst, r, &i1, &i2, &i3);
                char * y = ggml_cpu_elem_ptr(dst, 0, i1, i2, i3);
                if (dst->type == src->type) {
                    memcpy(y, x, ggml_row_size(src->type, ne00));
                } else {
                    convert_elems(dst->type, y, dst->nb[0], src->type, x, src->nb[0], ne00);
                }
                continue;
            }
            for (int64_t c = 0; c < ne00; c += GGML_CPU_CHUNK) {
                const int64_t m = ne00 - c < GGML_CPU_CHUNK ? ne00 - c : GGML_CPU_CHUNK;
                row_to_f32_fn(src->type)(row_elem(src->type, x, src->nb[0], c), buf, m);
                for_each_run(dst, r * ne00 + c, m, [&](char * y, int64_t len, int64_t done) {
                    ggml_cpu_scatter_f32(dst->type, buf + done, y, dst->nb[0], len);
                });
            }
        }
        return;
    }

    // Rows of one element and the same shape on both sides (a transposed vector into a column,
    // as the V cache stores a token): runs along dimension 1, one strided conversion per run
    // instead of one call per element.
    if (!dst_blocks && dst->ne[0] == 1 && ggml_are_same_shape(src, dst)) {
        const int64_t ne1 = dst->ne[1];
        ggml_cpu_split_rows(ggml_nrows(dst), params->ith, params->nth, &r0, &r1);
        for (int64_t r = r0; r < r1; ) {
            int64_t i1, i2, i3;
            row_index(dst, r, &i1, &i2, &i3);
            const int64_t n = std::min(r1 - r, ne1 - i1);
            char * y = ggml_cpu_elem_ptr(dst, 0, i1, i2, i3);
            const char * x = ggml_cpu_elem_ptr(src, 0, i1, i2, i3);
            if (dst->type == src->type) {
                copy_elems(y, dst->nb[1], x, src->nb[1], n, ggml_type_size(src->type));
            } else {
                convert_elems(dst->type, y, dst->nb[1], src->type, x, src->nb[1], n);
            }
            r += n;
        }
        return;
    }

    // split by dst rows; dst row r holds src's flat elements [r ne0, (r + 1) ne0), which may
    // span several src rows
    const int64_t ne0 = dst->ne[0];
    ggml_cpu_split_rows(ggml_nrows(dst), params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        row_index(dst, r, &i1, &i2, &i3);
        char * y = ggml_cpu_elem_ptr(dst, 0, i1, i2, i3);
        if (!dst_blocks) {
            for_each_run(src, r * ne0, ne0, [&](const char * x, int64_t len, int64_t done) {
                copy_or_convert(dst, y + done * dst->nb[0], src, x, len);
            });
            continue;
        }
        for (int64_t c = 0; c < ne0; c += GGML_CPU_CHUNK) {
            const int64_t m = ne0 - c < GGML_CPU_CHUNK ? ne0 - c : GGML_CPU_CHUNK;
            for_each_run(src, r * ne0 + c, m, [&](const char * x, int64_t len, int64_t done) {
                ggml_cpu_gather_f32(src->type, x, src->nb[0], buf + done, len);
            });
            row_from_f32_fn(dst->type)(buf, row_elem(dst->type, y, dst->nb[0], c), m);
        }
    }
}

// dst = src tiled: dst[i0, i1, i2, i3] = src[i0 % ne00, i1 % ne01, i2 % ne02, i3 % ne03].
void ggml_cpu_forward_repeat(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const struct ggml_tensor * src = dst->src[0];
    GGML_ASSERT(src != NULL && src->type == dst->type && ggml_blck_size(src->type) == 1);
    GGML_ASSERT(ggml_can_repeat(src, dst));

    const size_t es = ggml_type_size(src->type);
    const int64_t ne0 = dst->ne[0], ne00 = src->ne[0];
    int64_t r0, r1;
    ggml_cpu_split_rows(ggml_nrows(dst), params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        row_index(dst, r, &i1, &i2, &i3);
        const char * x = ggml_cpu_elem_ptr(src, 0, i1 % src->ne[1], i2 % src->ne[2], i3 % src->ne[3]);
        char * y = ggml_cpu_elem_ptr(dst, 0, i1, i2, i3);
        for (int64_t k = 0; k < ne0; k += ne00) {
            copy_elems(y + k * dst->nb[0], dst->nb[0], x, src->nb[0], ne00, es);
        }
    }
}

// dst = src0 and src1 joined along dim (op param i32[0]).
void ggml_cpu_forward_concat(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const struct ggml_tensor * src0 = dst->src[0];
    const struct ggml_tensor * src1 = dst->src[1];
    GGML_ASSERT(src0 != NULL && src1 != NULL);
    GGML_ASSERT(src0->type == dst->type && src1->type == dst->type && ggml_blck_size(dst->type) == 1);
    const int dim = ggml_get_op_params_i32(dst, 0);
    GGML_ASSERT(dim >= 0 && dim < GGML_MAX_DIMS);
    for (int d = 0; d < GGML_MAX_DIMS; d++) {
        if (d == dim) {
            GGML_ASSERT(dst->ne[d] == src0->ne[d] + src1->ne[d]);
        } else {
            GGML_ASSERT(dst->ne[d] == src0->ne[d] && dst->ne[d] == src1->ne[d]);
        }
    }

    const size_t es = ggml_type_size(dst->type);
    int64_t r0, r1;
    ggml_cpu_split_rows(ggml_nrows(dst), params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i[4] = {0, 0, 0, 0};
        row_index(dst, r, &i[1], &i[2], &i[3]);
        char * y = ggml_cpu_elem_ptr(dst, 0, i[1], i[2], i[3]);
        if (dim == 0) {
            const int64_t n0 = src0->ne[0];
            copy_elems(y, dst->nb[0], ggml_cpu_elem_ptr(src0, 0, i[1], i[2], i[3]), src0->nb[0], n0, es);
            copy_elems(y + n0 * dst->nb[0], dst->nb[0], ggml_cpu_elem_ptr(src1, 0, i[1], i[2], i[3]), src1->nb[0], src1->ne[0], es);
            continue;
        }
        const struct ggml_tensor * src = src0;
        if (i[dim] >= src0->ne[dim]) {
            i[dim] -= src0->ne[dim];
            src = src1;
        }
        copy_elems(y, dst->nb[0], ggml_cpu_elem_ptr(src, 0, i[1], i[2], i[3]), src->nb[0], dst->ne[0], es);
    }
}

// src0 [ne00, ne01, ne02, ne03], src1 I32 [n, ne02, ne03] -> dst [ne00, n, ne02, ne03]:
// dst[:, i, j, k] = src0[:, src1[i, j, k], j, k], converted to dst's type.
void ggml_cpu_forward_get_rows(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const struct ggml_tensor * src0 = dst->src[0];
    const struct ggml_tensor * src1 = dst->src[1];
    GGML_ASSERT(src0 != NULL && src1 != NULL);
    GGML_ASSERT(src1->type == GGML_TYPE_I32 && src1->ne[3] == 1);
    GGML_ASSERT(dst->ne[0] == src0->ne[0] && dst->ne[1] == src1->ne[0] &&
                dst->ne[2] == src1->ne[1] && dst->ne[3] == src1->ne[2]);
    GGML_ASSERT(src0->ne[2] == src1->ne[1] && src0->ne[3] == src1->ne[2]);

    const int64_t ne00 = src0->ne[0], ne01 = src0->ne[1];
    int64_t r0, r1;
    ggml_cpu_split_rows(ggml_nrows(dst), params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i10, i11, i12;
        row_index(dst, r, &i10, &i11, &i12);
        int32_t idx;
        memcpy(&idx, (const char *) src1->data + i10 * src1->nb[0] + i11 * src1->nb[1] + i12 * src1->nb[2], sizeof(idx));
        GGML_ASSERT(idx >= 0 && idx < ne01 && "get_rows: index out of range");
        copy_or_convert(dst, ggml_cpu_elem_ptr(dst, 0, i10, i11, i12), src0, ggml_cpu_elem_ptr(src0, 0, idx, i11, i12), ne00);
    }
}

// dst (a view of src[2]) [:, c[i, j % c1, k % c2], j, k] = src0[:, i, j, k] for src0 F32 and
// indices c I32 or I64. Split by src0's rows. Rows of one element (the V cache's transposed
// writes: one row per cell and channel) are converted inline, not by a call per element.
void ggml_cpu_forward_set_rows(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const struct ggml_tensor * src = dst->src[0];
    const struct ggml_tensor * idx = dst->src[1];
    GGML_ASSERT(src != NULL && idx != NULL && src->type == GGML_TYPE_F32);
    GGML_ASSERT(idx->type == GGML_TYPE_I32 || idx->type == GGML_TYPE_I64);
    const int64_t ne0 = src->ne[0], n_rows = dst->ne[1];
    const bool i64 = idx->type == GGML_TYPE_I64;
    const bool scalar_rows = ne0 == 1 && (dst->type == GGML_TYPE_F32 || dst->type == GGML_TYPE_F16);
    const row_from_f32_t from_f32 = row_from_f32_fn(dst->type);
    int64_t r0, r1;
    ggml_cpu_split_rows(ggml_nrows(src), params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        row_index(src, r, &i1, &i2, &i3);
        const char * ip = (const char *) idx->data + i1 * idx->nb[0] + (i2 % idx->ne[1]) * idx->nb[1] + (i3 % idx->ne[2]) * idx->nb[2];
        int64_t row;
        if (i64) {
            memcpy(&row, ip, sizeof(row));
        } else {
            int32_t v;
            memcpy(&v, ip, sizeof(v));
            row = v;
        }
        GGML_ASSERT(row >= 0 && row < n_rows && "set_rows: index out of range");
        const float * x = (const float *) ggml_cpu_elem_ptr(src, 0, i1, i2, i3);
        char * y = ggml_cpu_elem_ptr(dst, 0, row, i2, i3);
        if (scalar_rows) {
            if (dst->type == GGML_TYPE_F32) memcpy(y, x, sizeof(float));
            else { const ggml_fp16_t h = GGML_FP32_TO_FP16(*x); memcpy(y, &h, sizeof(h)); }
        } else {
            from_f32(x, y, ne0);
        }
    }
}

// ---- ops of the backward pass ---------------------------------------------------------------

namespace {

// True when no two elements of a view of shape ne with byte strides nb (nb[0] = es) share
// memory: sorted by stride, each dim must step over the whole extent of the smaller ones.
bool view_is_disjoint(const int64_t ne[4], const size_t nb[4], size_t es) {
    int order[4] = {0, 1, 2, 3};
    for (int i = 1; i < 4; i++) {  // insertion sort by stride
        for (int j = i; j > 0 && nb[order[j]] < nb[order[j - 1]]; j--) {
            const int t = order[j]; order[j] = order[j - 1]; order[j - 1] = t;
        }
    }
    size_t extent = es;  // bytes spanned by the dims seen so far
    for (int k = 0; k < 4; k++) {
        const int d = order[k];
        if (ne[d] <= 1) continue;
        if (nb[d] < extent) return false;
        extent = nb[d] * (size_t) (ne[d] - 1) + extent;
    }
    return true;
}

}  // namespace

// dst = src0 (or zeros without src0), then src1 added into the view of dst with strides
// nb1..nb3 and byte offset (op params, dst's layout). Phase 1 copies (or zeroes) dst split by
// rows, a barrier, then phase 2 adds src1 split by its rows. A view whose elements overlap
// would have two threads add into one element: then thread 0 adds everything, in row order.
extern "C" void ggml_cpu_forward_acc(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * src0 = dst->src[0];
    const ggml_tensor * src1 = dst->src[1];
    GGML_ASSERT(src1 != NULL && src1->type == GGML_TYPE_F32);
    GGML_ASSERT(dst->type == GGML_TYPE_F32 && ggml_is_contiguous(dst));
    size_t p[4];
    memcpy(p, dst->op_params, sizeof(p));
    const size_t vnb[4] = { sizeof(float), p[0], p[1], p[2] };
    const size_t offset = p[3];
    GGML_ASSERT(offset % sizeof(float) == 0 && vnb[1] % sizeof(float) == 0 && vnb[2] % sizeof(float) == 0 &&
                vnb[3] % sizeof(float) == 0 && "acc: the view's strides and offset must be multiples of 4 bytes");
    if (!ggml_is_empty(src1)) {
        size_t last = offset + sizeof(float);
        for (int d = 0; d < 4; d++) last += (size_t) (src1->ne[d] - 1) * vnb[d];
        GGML_ASSERT(last <= ggml_nbytes(dst) && "acc: the view lies outside the result");
    }

    // phase 1: the base
    const int64_t nr = ggml_nrows(dst);
    const size_t row_bytes = (size_t) dst->ne[0] * sizeof(float);
    int64_t r0, r1;
    ggml_cpu_split_rows(nr, params->ith, params->nth, &r0, &r1);
    if (src0 == NULL) {
        if (r0 < r1) memset((char *) dst->data + r0 * row_bytes, 0, (size_t) (r1 - r0) * row_bytes);
    } else {
        GGML_ASSERT(src0->type == GGML_TYPE_F32 && ggml_are_same_shape(src0, dst));
        const bool same_memory = src0->data == dst->data && ggml_are_same_stride(src0, dst);
        if (!same_memory) {
            for (int64_t r = r0; r < r1; r++) {
                int64_t i1, i2, i3;
                row_index(dst, r, &i1, &i2, &i3);
                copy_elems(ggml_cpu_elem_ptr(dst, 0, i1, i2, i3), sizeof(float), ggml_cpu_elem_ptr(src0, 0, i1, i2, i3),
                           src0->nb[0], dst->ne[0], sizeof(float));
            }
        }
    }
    ggml_cpu_barrier(params);

    // phase 2: src1 added into the view
    const bool disjoint = view_is_disjoint(src1->ne, vnb, sizeof(float));
    const int64_t nr1 = ggml_nrows(src1);
    if (disjoint) {
        ggml_cpu_split_rows(nr1, params->ith, params->nth, &r0, &r1);
    } else {
        r0 = 0;
        r1 = params->ith == 0 ? nr1 : 0;
    }
    const int64_t ne10 = src1->ne[0];
    const bool contig = src1->nb[0] == sizeof(float);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        row_index(src1, r, &i1, &i2, &i3);
        float * y = (float *) ((char *) dst->data + offset + i1 * vnb[1] + i2 * vnb[2] + i3 * vnb[3]);
        const char * x = ggml_cpu_elem_ptr(src1, 0, i1, i2, i3);
        if (contig) {
            const float * xf = (const float *) x;
            for (int64_t i = 0; i < ne10; i++) y[i] += xf[i];
        } else {
            for (int64_t i = 0; i < ne10; i++) y[i] += *(const float *) (x + i * src1->nb[0]);
        }
    }
}

// dst[i] = sum of src0 over every tile of dst's shape: dst[i0, i1, i2, i3] = sum over t of
// src0[i0 + t0 ne0, i1 + t1 ne1, ...], the tiles taken in a fixed order (t3, t2, t1 outer,
// t0 inner), accumulated in float in dst's row. Split by dst rows.
extern "C" void ggml_cpu_forward_repeat_back(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    GGML_ASSERT(src != NULL && ggml_cpu_is_float_type(src->type));
    GGML_ASSERT(dst->type == GGML_TYPE_F32 && dst->nb[0] == sizeof(float));
    GGML_ASSERT(ggml_can_repeat(dst, src) && "repeat_back: the result's shape must tile the source's");

    const int64_t ne0 = dst->ne[0];
    const int64_t nt[4] = { src->ne[0] / dst->ne[0], src->ne[1] / dst->ne[1], src->ne[2] / dst->ne[2], src->ne[3] / dst->ne[3] };
    const bool direct = src->type == GGML_TYPE_F32 && src->nb[0] == sizeof(float);
    int64_t r0, r1;
    ggml_cpu_split_rows(ggml_nrows(dst), params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        row_index(dst, r, &i1, &i2, &i3);
        float * y = (float *) ggml_cpu_elem_ptr(dst, 0, i1, i2, i3);
        for (int64_t i = 0; i < ne0; i++) y[i] = 0.0f;
        for (int64_t t3 = 0; t3 < nt[3]; t3++) {
            for (int64_t t2 = 0; t2 < nt[2]; t2++) {
                for (int64_t t1 = 0; t1 < nt[1]; t1++) {
                    const char * x = ggml_cpu_elem_ptr(src, 0, i1 + t1 * dst->ne[1], i2 + t2 * dst->ne[2], i3 + t3 * dst->ne[3]);
                    for (int64_t t0 = 0; t0 < nt[0]; t0++) {
                        const char * xt = x + t0 * ne0 * src->nb[0];
                        if (direct) {
                            const float * xf = (const float *) xt;
                            for (int64_t i = 0; i < ne0; i++) y[i] += xf[i];
                        } else {
                            for (int64_t i = 0; i < ne0; i++) y[i] += ggml_cpu_load_f32(src->type, xt + i * src->nb[0]);
                        }
                    }
                }
            }
        }
    }
}

// src0 grad [ne0, n, A2, A3], src1 I32 indices [n, A2, A3] -> dst F32 [ne0, rows, A2, A3]:
// zeros, then for j = 0, 1, ... in order, grad row (j, i2, i3) added into dst row
// (src1[j, i2, i3], i2, i3). Split by destination rows: each thread scans all the indices of
// the planes its rows lie in and adds the ones that land in its rows, so every dst row sums
// its terms in index order whatever the thread count. Every index is checked before use.
extern "C" void ggml_cpu_forward_get_rows_back(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * grad = dst->src[0];
    const ggml_tensor * idx = dst->src[1];
    GGML_ASSERT(grad != NULL && idx != NULL);
    GGML_ASSERT(ggml_cpu_is_float_type(grad->type) && idx->type == GGML_TYPE_I32 && idx->ne[3] == 1);
    GGML_ASSERT(dst->type == GGML_TYPE_F32 && dst->nb[0] == sizeof(float));
    GGML_ASSERT(grad->ne[0] == dst->ne[0] && grad->ne[1] == idx->ne[0] && grad->ne[2] == idx->ne[1] &&
                grad->ne[3] == idx->ne[2] && dst->ne[2] == idx->ne[1] && dst->ne[3] == idx->ne[2]);

    const int64_t ne0 = dst->ne[0], rows = dst->ne[1], n = idx->ne[0];
    const bool direct = grad->type == GGML_TYPE_F32 && grad->nb[0] == sizeof(float);
    int64_t r0, r1;
    ggml_cpu_split_rows(ggml_nrows(dst), params->ith, params->nth, &r0, &r1);
    if (r0 >= r1) return;

    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        row_index(dst, r, &i1, &i2, &i3);
        float * y = (float *) ggml_cpu_elem_ptr(dst, 0, i1, i2, i3);
        for (int64_t i = 0; i < ne0; i++) y[i] = 0.0f;
    }
    // planes (i2, i3) holding rows [r0, r1): flat plane index r / rows
    for (int64_t plane = r0 / rows; plane <= (r1 - 1) / rows; plane++) {
        const int64_t i2 = plane % dst->ne[2], i3 = plane / dst->ne[2];
        const int64_t lo = r0 > plane * rows ? r0 - plane * rows : 0;            // this thread's rows
        const int64_t hi = r1 < (plane + 1) * rows ? r1 - plane * rows : rows;   // of the plane
        for (int64_t j = 0; j < n; j++) {
            int32_t k;
            memcpy(&k, (const char *) idx->data + j * idx->nb[0] + i2 * idx->nb[1] + i3 * idx->nb[2], sizeof(k));
            if (k < 0 || k >= rows) {
                GGML_ABORT("get_rows_back: index %d at [%lld, %lld, %lld] is out of range [0, %lld)", (int) k,
                           (long long) j, (long long) i2, (long long) i3, (long long) rows);
            }
            if (k < lo || k >= hi) continue;
            float * y = (float *) ggml_cpu_elem_ptr(dst, 0, k, i2, i3);
            const char * x = ggml_cpu_elem_ptr(grad, 0, j, i2, i3);
            if (direct) {
                const float * xf = (const float *) x;
                for (int64_t i = 0; i < ne0; i++) y[i] += xf[i];
            } else {
                for (int64_t i = 0; i < ne0; i++) y[i] += ggml_cpu_load_f32(grad->type, x + i * grad->nb[0]);
            }
        }
    }
}
