// copy.cu - ops that move elements: dup / cpy / cont (with type conversion, any layouts: casts,
// making permuted tensors contiguous), get_rows (embeddings of any readable type), set_rows (the
// KV cache's writes, at cells an index tensor gives), repeat, concat, and the backward ops acc,
// repeat_back, get_rows_back.
//
// Elements are matched in logical order (flat index, i0 fastest) as the CPU does. Same-type
// copies move raw bits (exact for every type, I32 included); block-typed destinations (a
// quantized KV cache) are written a block per thread with the reference quantizer's rounding.
#include "ops.cuh"
#include "quant.cuh"

namespace {

// ---- dup / cpy / cont -------------------------------------------------------------------------
// Raw copy of es-byte elements (same type).
__global__ void k_cpy_raw(tview dst, tview src, int64_t n, int es) {
    const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int64_t s0, s1, s2, s3, d0, d1, d2, d3;
    unravel(i, src, s0, s1, s2, s3);
    unravel(i, dst, d0, d1, d2, d3);
    const char * x = elem_ptr(src, s0, s1, s2, s3);
    char * y = elem_ptr(dst, d0, d1, d2, d3);
    switch (es) {
        case 1: *(uint8_t *) y = *(const uint8_t *) x; break;
        case 2: *(uint16_t *) y = *(const uint16_t *) x; break;
        case 4: *(uint32_t *) y = *(const uint32_t *) x; break;
        default: *(uint64_t *) y = *(const uint64_t *) x; break;
    }
}

// Any readable type to a plain float type.
__global__ void k_cpy_to_float(tview dst, tview src, int64_t n) {
    const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int64_t s0, s1, s2, s3, d0, d1, d2, d3;
    unravel(i, src, s0, s1, s2, s3);
    unravel(i, dst, d0, d1, d2, d3);
    const float v = load_any(row_ptr(src, s1, s2, s3), s0, src.type, src.nb[0]);
    store_f(elem_ptr(dst, d0, d1, d2, d3), dst.type, v);
}

// F32 to contiguous F32 a row of the product's activations per block (row length K), then the
// row in the form that product reads (QB: quant.cuh's forms): the attention's heads made one row
// per token (cont) for the output projection without flash attention.
template <int QB>
__global__ void k_cpy_f32_rows(float * dst, tview src, int64_t K, ActArgs q) {
    const int64_t r = blockIdx.x;
    for (int64_t i0 = threadIdx.x; i0 < K; i0 += blockDim.x) {
        int64_t s0, s1, s2, s3;
        unravel(r * K + i0, src, s0, s1, s2, s3);
        dst[r * K + i0] = *(const float *) elem_ptr(src, s0, s1, s2, s3);
    }
    quantize_produced_row<QB>(q, dst + r * K);
}

// Rows of a block type copied whole (same type, rows of the same length).
__global__ void k_cpy_rows(tview dst, tview src, int64_t row_bytes) {
    const int64_t r = blockIdx.x;
    int64_t s1, s2, s3, d1, d2, d3;
    row_coords(r, src, s1, s2, s3);
    row_coords(r, dst, d1, d2, d3);
    const char * x = row_ptr(src, s1, s2, s3);
    char * y = row_ptr(dst, d1, d2, d3);
    for (int64_t b = threadIdx.x; b < row_bytes; b += blockDim.x) y[b] = x[b];
}

// Plain float source to a 32-value block type: one thread per block of dst.
__global__ void k_cpy_quantize(tview dst, tview src, int64_t n_blocks_total, int64_t blocks_per_row, int64_t block_bytes) {
    const int64_t b = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= n_blocks_total) return;
    const int64_t r = b / blocks_per_row, k = b % blocks_per_row;
    int64_t d1, d2, d3;
    row_coords(r, dst, d1, d2, d3);
    float x[32];
    const int64_t flat0 = r * dst.ne[0] + 32 * k;  // dst's first element, in logical order
    for (int j = 0; j < 32; j++) {
        int64_t s0, s1, s2, s3;
        unravel(flat0 + j, src, s0, s1, s2, s3);
        x[j] = load_f(elem_ptr(src, s0, s1, s2, s3), src.type);
    }
    quantize_block(row_ptr(dst, d1, d2, d3) + k * block_bytes, x, dst.type);
}

// ---- get_rows ---------------------------------------------------------------------------------
// dst[:, i, j, k] = a[:, idx[i, j, k], j, k]; a raw 4-byte copy for I32 rows.
__global__ void k_get_rows(tview dst, tview a, tview idx, int64_t n, int raw_i32) {
    const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int64_t i0, i1, i2, i3;
    unravel(i, dst, i0, i1, i2, i3);
    const int32_t r = *(const int32_t *) (idx.data + i1 * idx.nb[0] + i2 * idx.nb[1] + i3 * idx.nb[2]);
    char * y = elem_ptr(dst, i0, i1, i2, i3);
    if (r < 0 || r >= a.ne[1]) {  // the CPU aborts; here the row reads as zeros
        if (raw_i32) *(int32_t *) y = 0; else store_f(y, dst.type, 0.0f);
        return;
    }
    const char * row = row_ptr(a, r, i2, i3);
    if (raw_i32) {
        *(int32_t *) y = *(const int32_t *) (row + i0 * a.nb[0]);
    } else {
        store_f(y, dst.type, load_any(row, i0, a.type, a.nb[0]));
    }
}

// dst (F32, contiguous, zeroed) [:, idx[i, j, k], j, k] += grad[:, i, j, k]
__global__ void k_get_rows_back(float * dst, int64_t dne0, int64_t dne1, int64_t dne2, tview grad, tview idx, int64_t n) {
    const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int64_t i0, i1, i2, i3;
    unravel(i, grad, i0, i1, i2, i3);
    const int32_t r = *(const int32_t *) (idx.data + i1 * idx.nb[0] + i2 * idx.nb[1] + i3 * idx.nb[2]);
    if (r < 0 || r >= dne1) return;
    atomicAdd(dst + ((i3 * dne2 + i2) * dne1 + r) * dne0 + i0, load_f(elem_ptr(grad, i0, i1, i2, i3), grad.type));
}

// ---- set_rows ---------------------------------------------------------------------------------
// Row i of plane (j, k) of src goes to row idx[i, j % c1, k % c2] of dst (a view of the destination).
GGML_CUDA_HD int64_t set_rows_target(const tview & idx, int64_t i1, int64_t i2, int64_t i3, int i64) {
    const char * p = idx.data + i1 * idx.nb[0] + bcast(i2, idx, 1) * idx.nb[1] + bcast(i3, idx, 2) * idx.nb[2];
    return i64 ? *(const int64_t *) p : (int64_t) *(const int32_t *) p;
}

// Plain float destinations: one thread per element of src.
__global__ void k_set_rows(tview dst, tview src, tview idx, int64_t n, int i64) {
    const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int64_t i0, i1, i2, i3;
    unravel(i, src, i0, i1, i2, i3);
    const int64_t r = set_rows_target(idx, i1, i2, i3, i64);
    if (r < 0 || r >= dst.ne[1]) return;  // the CPU aborts; here the row is dropped
    store_f(elem_ptr(dst, i0, r, i2, i3), dst.type, *(const float *) elem_ptr(src, i0, i1, i2, i3));
}

// 32-value block destinations: one thread per block, the reference quantizer's rounding.
__global__ void k_set_rows_quantize(tview dst, tview src, tview idx, int64_t n_blocks_total, int64_t blocks_per_row,
                                    int64_t block_bytes, int i64) {
    const int64_t b = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= n_blocks_total) return;
    int64_t i1, i2, i3;
    row_coords(b / blocks_per_row, src, i1, i2, i3);
    const int64_t k = b % blocks_per_row;
    const int64_t r = set_rows_target(idx, i1, i2, i3, i64);
    if (r < 0 || r >= dst.ne[1]) return;
    float x[32];
    const char * row = row_ptr(src, i1, i2, i3);
    for (int j = 0; j < 32; j++) x[j] = *(const float *) (row + (32 * k + j) * src.nb[0]);
    quantize_block(row_ptr(dst, r, i2, i3) + k * block_bytes, x, dst.type);
}

// ---- repeat, concat -------------------------------------------------------------------------------
__global__ void k_repeat(tview dst, tview src, int64_t n, int es) {
    const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int64_t i0, i1, i2, i3;
    unravel(i, dst, i0, i1, i2, i3);
    const char * x = bcast_ptr(src, i0, i1, i2, i3);
    char * y = elem_ptr(dst, i0, i1, i2, i3);
    if (es == 2) *(uint16_t *) y = *(const uint16_t *) x; else *(uint32_t *) y = *(const uint32_t *) x;
}

__global__ void k_concat(tview dst, tview a, tview b, int64_t n, int dim, int es) {
    const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int64_t c[4];
    unravel(i, dst, c[0], c[1], c[2], c[3]);
    char * y = elem_ptr(dst, c[0], c[1], c[2], c[3]);
    const char * x;
    if (c[dim] < a.ne[dim]) {
        x = elem_ptr(a, c[0], c[1], c[2], c[3]);
    } else {
        c[dim] -= a.ne[dim];
        x = elem_ptr(b, c[0], c[1], c[2], c[3]);
    }
    if (es == 2) *(uint16_t *) y = *(const uint16_t *) x; else *(uint32_t *) y = *(const uint32_t *) x;
}

// ---- backward: repeat_back, acc -----------------------------------------------------------------
// dst (F32) = the sum of src over the tiles of dst's shape, tiles in the CPU's order.
__global__ void k_repeat_back(tview dst, tview src, int64_t n) {
    const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int64_t i0, i1, i2, i3;
    unravel(i, dst, i0, i1, i2, i3);
    const int64_t nt0 = src.ne[0] / dst.ne[0], nt1 = src.ne[1] / dst.ne[1], nt2 = src.ne[2] / dst.ne[2], nt3 = src.ne[3] / dst.ne[3];
    float s = 0.0f;
    for (int64_t t3 = 0; t3 < nt3; t3++)
        for (int64_t t2 = 0; t2 < nt2; t2++)
            for (int64_t t1 = 0; t1 < nt1; t1++)
                for (int64_t t0 = 0; t0 < nt0; t0++)
                    s += load_f(elem_ptr(src, i0 + t0 * dst.ne[0], i1 + t1 * dst.ne[1], i2 + t2 * dst.ne[2], i3 + t3 * dst.ne[3]), src.type);
    *(float *) elem_ptr(dst, i0, i1, i2, i3) = s;
}

// src1 added into the view of dst (byte strides vnb, offset); atomics, since a view's elements
// may overlap (the sum is then the same in any order up to rounding).
__global__ void k_acc_add(char * dst, tview src1, int64_t n, int64_t nb1, int64_t nb2, int64_t nb3, int64_t offset) {
    const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int64_t i0, i1, i2, i3;
    unravel(i, src1, i0, i1, i2, i3);
    float * y = (float *) (dst + offset + i0 * (int64_t) sizeof(float) + i1 * nb1 + i2 * nb2 + i3 * nb3);
    atomicAdd(y, *(const float *) elem_ptr(src1, i0, i1, i2, i3));
}

}  // namespace

// ---- launchers --------------------------------------------------------------------------------
bool ggml_cuda_cpy_supported(const ggml_tensor * src, const ggml_tensor * dst) {
    if (ggml_nelements(src) != ggml_nelements(dst)) return false;
    const bool sq = ggml_is_quantized(src->type), dq = ggml_is_quantized(dst->type);
    if (src->type == dst->type) {
        if (!sq) return ggml_type_size(src->type) <= 8;
        return src->ne[0] == dst->ne[0];  // block rows copied whole
    }
    if (dq) {
        return is_float_type(src->type) && cuda_quantizable_type(dst->type) && dst->ne[0] % 32 == 0 && dst->nb[0] == ggml_type_size(dst->type);
    }
    // block-typed sources are read a row of whole blocks at a time
    return is_float_type(dst->type) && cuda_readable_type(src->type) && (!sq || src->nb[0] == ggml_type_size(src->type));
}

void ggml_cuda_cpy_tensor(ggml_cuda_ctx & ctx, const ggml_tensor * src, ggml_tensor * dst) {
    const int64_t n = ggml_nelements(dst);
    if (n == 0) return;
    if (src->data == dst->data && src->type == dst->type && ggml_are_same_shape(src, dst) && ggml_are_same_stride(src, dst)) return;
    if (src->type == dst->type && ggml_is_contiguous(src) && ggml_is_contiguous(dst)) {
        CUDA_CHECK(cudaMemcpyAsync(dst->data, src->data, ggml_nbytes(dst), cudaMemcpyDeviceToDevice, ctx.stream));
        return;
    }
    if (src->type == dst->type && ggml_is_quantized(src->type)) {
        const int64_t nr = ggml_nrows(dst);
        GGML_CUDA_LAUNCH(k_cpy_rows, (unsigned int) nr, 128, 0, ctx.stream)(make_view(dst), make_view(src), (int64_t) ggml_row_size(src->type, src->ne[0]));
    } else if (src->type == dst->type) {
        GGML_CUDA_LAUNCH(k_cpy_raw, n_blocks(n), 256, 0, ctx.stream)(make_view(dst), make_view(src), n, (int) ggml_type_size(src->type));
    } else if (ggml_is_quantized(dst->type)) {
        const int64_t bpr = dst->ne[0] / 32, total = bpr * ggml_nrows(dst);
        GGML_CUDA_LAUNCH(k_cpy_quantize, n_blocks(total, 128), 128, 0, ctx.stream)(make_view(dst), make_view(src), total, bpr,
                                                                     (int64_t) ggml_type_size(dst->type));
    } else {
        GGML_CUDA_LAUNCH(k_cpy_to_float, n_blocks(n), 256, 0, ctx.stream)(make_view(dst), make_view(src), n);
    }
    CUDA_CHECK_LAUNCH();
}

// DUP, CONT: src[0] into dst. CPY: src[0] into dst, a view of src[1] (or src[1] itself for a cast).
void ggml_cuda_op_cpy(ggml_cuda_ctx & ctx, ggml_tensor * dst) { ggml_cuda_cpy_tensor(ctx, dst->src[0], dst); }

void ggml_cuda_op_cpy_product(ggml_cuda_ctx & ctx, ggml_tensor * dst, const ggml_tensor * product) {
    const ggml_tensor * src = dst->src[0];
    if (src->type != GGML_TYPE_F32 || dst->type != GGML_TYPE_F32 || ggml_nelements(dst) == 0) {
        ggml_cuda_cpy_tensor(ctx, src, dst);
        return;
    }
    ggml_cuda_launch_quantizing(ctx, dst, product, [&](auto qb, const ActArgs & q) {
        constexpr int QB = decltype(qb)::value;
        if constexpr (QB == 0) {
            ggml_cuda_cpy_tensor(ctx, src, dst);
        } else {
            const int64_t rows = ggml_nelements(dst) / q.K;  // the product's columns (dst is contiguous)
            GGML_CUDA_LAUNCH(k_cpy_f32_rows<QB>, (unsigned int) rows, 256, 0, ctx.stream)((float *) dst->data, make_view(src), q.K, q);
            CUDA_CHECK_LAUNCH();
        }
    }, kFormsAll | kFormAnyRows);
}

bool ggml_cuda_get_rows_supported(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0], * idx = dst->src[1];
    if (idx->type != GGML_TYPE_I32) return false;
    if (a->type == GGML_TYPE_I32) return dst->type == GGML_TYPE_I32;
    return cuda_readable_type(a->type) && is_float_type(dst->type) && (!ggml_is_quantized(a->type) || a->nb[0] == ggml_type_size(a->type));
}

void ggml_cuda_op_get_rows(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    const int64_t n = ggml_nelements(dst);
    if (n == 0) return;
    GGML_CUDA_LAUNCH(k_get_rows, n_blocks(n), 256, 0, ctx.stream)(make_view(dst), make_view(dst->src[0]), make_view(dst->src[1]), n,
                                                    dst->src[0]->type == GGML_TYPE_I32);
    CUDA_CHECK_LAUNCH();
}

bool ggml_cuda_set_rows_supported(const ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0], * idx = dst->src[1];
    if (!src || !idx || src->type != GGML_TYPE_F32 || (idx->type != GGML_TYPE_I32 && idx->type != GGML_TYPE_I64)) return false;
    if (ggml_is_quantized(dst->type)) return cuda_quantizable_type(dst->type) && dst->ne[0] % 32 == 0;
    return is_float_type(dst->type);
}

void ggml_cuda_op_set_rows(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0], * idx = dst->src[1];
    const int64_t n = ggml_nelements(src);
    if (n == 0) return;
    const int i64 = idx->type == GGML_TYPE_I64;
    if (ggml_is_quantized(dst->type)) {
        const int64_t bpr = src->ne[0] / 32, total = bpr * ggml_nrows(src);
        GGML_CUDA_LAUNCH(k_set_rows_quantize, n_blocks(total, 128), 128, 0, ctx.stream)(make_view(dst), make_view(src), make_view(idx), total,
                                                                          bpr, (int64_t) ggml_type_size(dst->type), i64);
    } else {
        GGML_CUDA_LAUNCH(k_set_rows, n_blocks(n), 256, 0, ctx.stream)(make_view(dst), make_view(src), make_view(idx), n, i64);
    }
    CUDA_CHECK_LAUNCH();
}

void ggml_cuda_op_get_rows_back(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    const ggml_tensor * grad = dst->src[0];
    CUDA_CHECK(cudaMemsetAsync(dst->data, 0, ggml_nbytes(dst), ctx.stream));
    const int64_t n = ggml_nelements(grad);
    if (n == 0) return;
    GGML_CUDA_LAUNCH(k_get_rows_back, n_blocks(n), 256, 0, ctx.stream)((float *) dst->data, dst->ne[0], dst->ne[1], dst->ne[2], make_view(grad),
                                                         make_view(dst->src[1]), n);
    CUDA_CHECK_LAUNCH();
}

void ggml_cuda_op_repeat(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    const int64_t n = ggml_nelements(dst);
    if (n == 0) return;
    GGML_CUDA_LAUNCH(k_repeat, n_blocks(n), 256, 0, ctx.stream)(make_view(dst), make_view(dst->src[0]), n, (int) ggml_type_size(dst->type));
    CUDA_CHECK_LAUNCH();
}

void ggml_cuda_op_concat(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    const int64_t n = ggml_nelements(dst);
    if (n == 0) return;
    GGML_CUDA_LAUNCH(k_concat, n_blocks(n), 256, 0, ctx.stream)(make_view(dst), make_view(dst->src[0]), make_view(dst->src[1]), n,
                                                  ggml_get_op_params_i32(dst, 0), (int) ggml_type_size(dst->type));
    CUDA_CHECK_LAUNCH();
}

void ggml_cuda_op_repeat_back(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    const int64_t n = ggml_nelements(dst);
    if (n == 0) return;
    GGML_CUDA_LAUNCH(k_repeat_back, n_blocks(n), 256, 0, ctx.stream)(make_view(dst), make_view(dst->src[0]), n);
    CUDA_CHECK_LAUNCH();
}

void ggml_cuda_op_acc(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    const ggml_tensor * src0 = dst->src[0], * src1 = dst->src[1];
    size_t p[4];
    memcpy(p, dst->op_params, sizeof(p));
    if (!src0) {
        CUDA_CHECK(cudaMemsetAsync(dst->data, 0, ggml_nbytes(dst), ctx.stream));
    } else {
        ggml_cuda_cpy_tensor(ctx, src0, dst);  // nothing to do in place
    }
    const int64_t n = ggml_nelements(src1);
    if (n == 0) return;
    GGML_CUDA_LAUNCH(k_acc_add, n_blocks(n), 256, 0, ctx.stream)((char *) dst->data, make_view(src1), n, (int64_t) p[0], (int64_t) p[1],
                                                   (int64_t) p[2], (int64_t) p[3]);
    CUDA_CHECK_LAUNCH();
}
