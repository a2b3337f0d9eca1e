// mul_mat.cu - the matrix products: mul_mat (few columns: mmv.cu; more: cuBLAS) and out_prod
// (cuBLAS), the backward product of mul_mat.
//
// mul_mat(a, b) = a^T b per plane: dst[m, n] = sum_k a[k, m] b[k, n], F32 result, b F32, planes
// of a broadcast over b's. With cuBLAS (column-major), a's rows are the columns of a K x M
// matrix A (lda = a's row stride), so dst = A^T B with ldb, ldc the row strides of b and dst.
//  - a F32: SGEMM on the operands as they are (F32 products, as the CPU's).
//  - a F16 / BF16: b converted to a's type (the CPU rounds b the same way), tensor cores with
//    F32 accumulation; a read in place (a KV cache view works as it is).
//  - a quantized, few columns (generation): b quantized to 8 bits as the CPU quantizes it,
//    integer products (mmv.cu), so that both multiply the same values. More columns (prompts): a
//    dequantized to F16 into scratch (a thread per 32 values), then as F16 (b rounded to F16 is closer to its values than
//    the CPU's 8 bits; the integer kernel's batch variant is ~4x slower than the tensor cores).
// b's F16 copy sits at the start of the scratch buffer, where the next product of the same b (k
// and v after q; up after gate) finds it (ctx.act), or where the kernel that produced b wrote it
// in the same launch (norms, silu times up, attention, the heads' copy: ggml_cuda_launch_quantizing).
// Planes of a broadcast over b's (grouped-query attention without flash attention: the heads
// of a kv head) go to cuBLAS as one strided batch where b's and the result's planes are packed
// (the heads of a kv head one matrix), else as one batched call on pointers.
// out_prod(a, b): dst[k, n] = sum_m a[k, m] b[n, m], i.e. dst = A B^T with A as above, in F32
// (a of another type dequantized to F32 first); with GGML_PREC_BF16 both operands in BF16 on
// the tensor cores (F32 sums).
#include "ops.cuh"
#include "quant.cuh"

namespace {

// out[i] = the value at flat index i of t (any readable type, any layout), as OUT.
template <typename OUT>
__global__ void k_to_contig(OUT * out, tview t, int64_t n) {
    const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int64_t i0, i1, i2, i3;
    unravel(i, t, i0, i1, i2, i3);
    const float v = load_any(row_ptr(t, i1, i2, i3), i0, t.type, t.nb[0]);
    if constexpr (std::is_same<OUT, float>::value) {
        out[i] = v;
    } else if constexpr (std::is_same<OUT, __half>::value) {
        out[i] = __float2half_rn(v);
    } else {
        out[i] = __ushort_as_bfloat16(f2bf(v));
    }
}

template <typename OUT>
void to_contig(ggml_cuda_ctx & ctx, OUT * out, const ggml_tensor * t) {
    const int64_t n = ggml_nelements(t);
    if (n == 0) return;
    GGML_CUDA_LAUNCH(k_to_contig<OUT>, n_blocks(n), 256, 0, ctx.stream)(out, make_view(t), n);
    CUDA_CHECK_LAUNCH();
}

// Block-typed weights (up to 3 of one type: the products of one activation) as contiguous rows
// of OUT (F16 for the forward's tensor cores; BF16 or F32 for out_prod), in one launch: a thread
// per 32 values (one unit: a block, or a K-quant sub-block), decoded by quant.cuh's dequant_unit
// and written as 16-byte stores; rows counted over dims 1..3 of each weight (any row and plane
// strides).
struct DequantArgs {
    tview a[3];
    uint4 * out[3];
    int64_t units_per_row[3], first[3];  // first: the weight's first unit in the launch
    int64_t n_units;                     // all weights'
    int n;
};

template <int T, typename OUT>
__global__ void k_dequant(DequantArgs d) {
    const int64_t t = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= d.n_units) return;
    int w = 0;
    while (w + 1 < d.n && t >= d.first[w + 1]) w++;
    const int64_t g = t - d.first[w], r = g / d.units_per_row[w], u = g % d.units_per_row[w];
    int64_t i1, i2, i3;
    row_coords(r, d.a[w], i1, i2, i3);
    float v[32];
    dequant_unit<T>(row_ptr(d.a[w], i1, i2, i3), u, v);
    constexpr int W = 32 * (int) sizeof(OUT) / 4;  // 32-bit words of the unit's values
    uint32_t h[W];
#pragma unroll
    for (int k = 0; k < W; k++) {
        if constexpr (std::is_same<OUT, float>::value) {
            h[k] = __float_as_uint(v[k]);
        } else if constexpr (std::is_same<OUT, __half>::value) {
            h[k] = (uint32_t) f2h(v[2 * k]) | ((uint32_t) f2h(v[2 * k + 1]) << 16);
        } else {
            h[k] = (uint32_t) f2bf(v[2 * k]) | ((uint32_t) f2bf(v[2 * k + 1]) << 16);
        }
    }
#pragma unroll
    for (int k = 0; k < W / 4; k++) d.out[w][(W / 4) * g + k] = make_uint4(h[4 * k], h[4 * k + 1], h[4 * k + 2], h[4 * k + 3]);
}

// a[0..n) (one type) into out[0..n).
template <typename OUT>
void dequant_to(ggml_cuda_ctx & ctx, void * const * out, const ggml_tensor * const * a, int n) {
    if (!ggml_is_quantized(a[0]->type)) {  // float types: value by value (rows of any length)
        for (int w = 0; w < n; w++) to_contig(ctx, (OUT *) out[w], a[w]);
        return;
    }
    DequantArgs d = {};
    d.n = n;
    for (int w = 0; w < n; w++) {
        d.a[w] = make_view(a[w]);
        d.out[w] = (uint4 *) out[w];
        d.units_per_row[w] = a[w]->ne[0] / 32;
        d.first[w] = d.n_units;
        d.n_units += d.units_per_row[w] * a[w]->ne[1] * a[w]->ne[2] * a[w]->ne[3];
    }
    if (d.n_units == 0) return;
    const int64_t n_units = d.n_units;
    switch (a[0]->type) {
#define DQ_CASE(T) case T: GGML_CUDA_LAUNCH(k_dequant<T GGML_COMMA OUT>, n_blocks(n_units), 256, 0, ctx.stream)(d); break;
        DQ_CASE(GGML_TYPE_Q4_0)
        DQ_CASE(GGML_TYPE_Q4_1)
        DQ_CASE(GGML_TYPE_Q5_0)
        DQ_CASE(GGML_TYPE_Q5_1)
        DQ_CASE(GGML_TYPE_Q8_0)
        DQ_CASE(GGML_TYPE_IQ4_NL)
        DQ_CASE(GGML_TYPE_Q2_K)
        DQ_CASE(GGML_TYPE_Q3_K)
        DQ_CASE(GGML_TYPE_Q4_K)
        DQ_CASE(GGML_TYPE_Q5_K)
        DQ_CASE(GGML_TYPE_Q6_K)
        DQ_CASE(GGML_TYPE_IQ2_XXS)
        DQ_CASE(GGML_TYPE_IQ2_XS)
        DQ_CASE(GGML_TYPE_IQ2_S)
        DQ_CASE(GGML_TYPE_IQ3_XXS)
        DQ_CASE(GGML_TYPE_IQ3_S)
        DQ_CASE(GGML_TYPE_IQ1_S)
        DQ_CASE(GGML_TYPE_IQ1_M)
        DQ_CASE(GGML_TYPE_IQ4_XS)
        DQ_CASE(GGML_TYPE_TQ1_0)
        DQ_CASE(GGML_TYPE_TQ2_0)
#undef DQ_CASE
        default:  // block types without a unit decoder: value by value
            for (int w = 0; w < n; w++) to_contig(ctx, (OUT *) out[w], a[w]);
            return;
    }
    CUDA_CHECK_LAUNCH();
}

size_t align256(size_t x) { return (x + 255) & ~(size_t) 255; }

cudaDataType_t cuda_type(ggml_type t) {
    switch (t) {
        case GGML_TYPE_F16: return CUDA_R_16F;
        case GGML_TYPE_BF16: return CUDA_R_16BF;
        default: return CUDA_R_32F;
    }
}

// One operand of a GEMM as cuBLAS sees it: base pointer, element type and size, leading
// dimension and plane strides (elements).
struct Operand {
    const void * p;
    cudaDataType_t type;
    size_t es;
    int64_t ld, s2, s3;
};

Operand operand(const void * p, ggml_type t, const size_t nb[4]) {
    const size_t es = t == GGML_TYPE_F32 ? 4 : 2;
    return { p, cuda_type(t), es, (int64_t) (nb[1] / es), (int64_t) (nb[2] / es), (int64_t) (nb[3] / es) };
}

Operand operand_contig(const void * p, ggml_type t, int64_t ne0, int64_t ne1, int64_t ne2) {
    const size_t es = t == GGML_TYPE_F32 ? 4 : 2;
    return { p, cuda_type(t), es, ne0, ne0 * ne1, ne0 * ne1 * ne2 };
}

const void * plane(const Operand & o, int64_t i2, int64_t i3) {
    return (const char *) o.p + (size_t) (i2 * o.s2 + i3 * o.s3) * o.es;
}

// The planes' pointers for cublasGemmBatchedEx, written on the device (a CUDA graph replays it):
// plane i = i2 + ne2 i3 of C and B, plane (i2 / r2, i3 / r3) of A.
__global__ void k_plane_ptrs(const void ** pa, const void ** pb, void ** pc, Operand A, Operand B, float * C, int64_t cs2, int64_t cs3,
                             int64_t ne2, int64_t n, int64_t r2, int64_t r3) {
    const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int64_t i2 = i % ne2, i3 = i / ne2;
    pa[i] = (const char *) A.p + (size_t) ((i2 / r2) * A.s2 + (i3 / r3) * A.s3) * A.es;
    pb[i] = (const char *) B.p + (size_t) (i2 * B.s2 + i3 * B.s3) * B.es;
    pc[i] = C + i2 * cs2 + i3 * cs3;
}

// Device memory for gemm_planes' pointers (3 per plane of C), part of the caller's scratch.
size_t plane_ptrs_bytes(int64_t ne2, int64_t ne3) { return align256((size_t) (3 * ne2 * ne3) * sizeof(void *)); }

// The leading dimension of a matrix of one column means nothing, but cuBLAS still wants it at
// least the column's length (a view's stride of a dimension of size 1 may be anything).
int64_t ld_of(int64_t ld, int64_t rows, int64_t cols) { return cols <= 1 && ld < rows ? std::max<int64_t>(rows, 1) : ld; }

// C[plane(i2, i3)] = op(A[plane(i2 / r2, i3 / r3)]) op(B[plane(i2, i3)]) for every plane of C:
// strided batched when A's planes are not broadcast, or broadcast over dim 2 with B's and C's
// planes packed; other broadcasts through one batched call on pointers (ptrs: plane_ptrs_bytes of
// device memory), not one call per plane.
void gemm_planes(ggml_cuda_ctx & ctx, cublasOperation_t opa, cublasOperation_t opb, int64_t m, int64_t n, int64_t k,
                 const Operand & A_in, const Operand & B_in, float * C, int64_t ldc, int64_t cs2, int64_t cs3, int64_t ne2, int64_t ne3,
                 int64_t r2, int64_t r3, void * ptrs) {
    const float alpha = 1.0f, beta = 0.0f;
    Operand A = A_in, B = B_in;
    A.ld = ld_of(A.ld, opa == CUBLAS_OP_N ? m : k, opa == CUBLAS_OP_N ? k : m);
    B.ld = ld_of(B.ld, opb == CUBLAS_OP_N ? k : n, opb == CUBLAS_OP_N ? n : k);
    ldc = ld_of(ldc, m, n);
    // Broadcast over dim 2 (grouped-query attention: the r2 query heads of a kv head) with B's and
    // C's planes one after another: the r2 planes that share an A plane are one product of r2 n
    // columns, and the kv heads a strided batch (no pointer arrays).
    if (r2 > 1 && r3 == 1 && opb == CUBLAS_OP_N && B.s2 == B.ld * n && cs2 == ldc * n && n * r2 <= INT32_MAX) {
        for (int64_t i3 = 0; i3 < ne3; i3++) {
            CUBLAS_CHECK(cublasGemmStridedBatchedEx(ctx.cublas, opa, opb, (int) m, (int) (n * r2), (int) k, &alpha, plane(A, 0, i3), A.type,
                                                    (int) A.ld, A.s2, plane(B, 0, i3), B.type, (int) B.ld, B.s2 * r2, &beta,
                                                    C + i3 * cs3, CUDA_R_32F, (int) ldc, cs2 * r2, (int) (ne2 / r2), CUBLAS_COMPUTE_32F,
                                                    CUBLAS_GEMM_DEFAULT));
        }
        return;
    }
    if (r2 == 1 && r3 == 1 && ne2 > 1) {
        for (int64_t i3 = 0; i3 < ne3; i3++) {
            CUBLAS_CHECK(cublasGemmStridedBatchedEx(ctx.cublas, opa, opb, (int) m, (int) n, (int) k, &alpha, plane(A, 0, i3), A.type,
                                                    (int) A.ld, A.s2, plane(B, 0, i3), B.type, (int) B.ld, B.s2, &beta,
                                                    C + i3 * cs3, CUDA_R_32F, (int) ldc, cs2, (int) ne2, CUBLAS_COMPUTE_32F,
                                                    CUBLAS_GEMM_DEFAULT));
        }
        return;
    }
    const int64_t planes = ne2 * ne3;
    if (planes > 1 && ptrs) {
        const void ** pa = (const void **) ptrs;
        const void ** pb = pa + planes;
        void ** pc = (void **) (pb + planes);
        GGML_CUDA_LAUNCH(k_plane_ptrs, n_blocks(planes), 256, 0, ctx.stream)(pa, pb, pc, A, B, C, cs2, cs3, ne2, planes, r2, r3);
        CUDA_CHECK_LAUNCH();
        CUBLAS_CHECK(cublasGemmBatchedEx(ctx.cublas, opa, opb, (int) m, (int) n, (int) k, &alpha, pa, A.type, (int) A.ld, pb, B.type,
                                         (int) B.ld, &beta, pc, CUDA_R_32F, (int) ldc, (int) planes, CUBLAS_COMPUTE_32F,
                                         CUBLAS_GEMM_DEFAULT));
        return;
    }
    for (int64_t i3 = 0; i3 < ne3; i3++) {
        for (int64_t i2 = 0; i2 < ne2; i2++) {
            CUBLAS_CHECK(cublasGemmEx(ctx.cublas, opa, opb, (int) m, (int) n, (int) k, &alpha, plane(A, i2 / r2, i3 / r3), A.type,
                                      (int) A.ld, plane(B, i2, i3), B.type, (int) B.ld, &beta, C + i2 * cs2 + i3 * cs3, CUDA_R_32F,
                                      (int) ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        }
    }
}

}  // namespace

bool ggml_cuda_mul_mat_supported(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0], * b = dst->src[1];
    if (!a || !b || b->type != GGML_TYPE_F32 || dst->type != GGML_TYPE_F32 || dst->nb[0] != sizeof(float)) return false;
    if (!(is_float_type(a->type) || cuda_quant_supported(a->type)) || a->nb[0] != ggml_type_size(a->type)) return false;
    if (a->ne[0] != b->ne[0] || b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0) return false;
    // cuBLAS strides are whole elements; ints bound the sizes
    if (a->nb[1] % ggml_type_size(a->type) != 0 || a->ne[0] > INT32_MAX || a->ne[1] > INT32_MAX || b->ne[1] > INT32_MAX) return false;
    if (dst->nb[1] % sizeof(float) != 0 || b->ne[2] * b->ne[3] > 65535) return false;
    return true;
}

bool ggml_cuda_mul_mat_uses_mmvq(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0], * b = dst->src[1];
    return b->ne[1] <= MMV_MAX_COLS && cuda_quant_supported(a->type) && b->nb[0] == sizeof(float);
}

namespace {

// Plain float a, few columns: mmv.cu's kernel for attention's products (many planes, short
// rows) and small matrices; cuBLAS for a weight matrix (one plane, a million values or more),
// where its matrix-vector kernels stream F16 at several times mmv's rate.
bool uses_mmv(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0], * b = dst->src[1];
    const bool big_weight = b->ne[2] * b->ne[3] == 1 && ggml_nelements(a) >= (1 << 20);
    return b->ne[1] <= MMV_MAX_COLS && b->nb[0] == sizeof(float) && ggml_cuda_mmv_supported(a) && !big_weight;
}

// The type cuBLAS multiplies in: block types dequantized to F16, plain float types as they are.
ggml_type gemm_type(const ggml_tensor * a) { return ggml_is_quantized(a->type) ? GGML_TYPE_F16 : a->type; }

}  // namespace

int ggml_cuda_mul_mat_act_form(const ggml_tensor * dst) {
    if (dst->op != GGML_OP_MUL_MAT || !ggml_cuda_mul_mat_supported(dst) || uses_mmv(dst)) return 0;
    if (ggml_cuda_mul_mat_uses_mmvq(dst)) return act_block_size(dst->src[0]->type);
    return gemm_type(dst->src[0]) == GGML_TYPE_F16 ? kActF16 : 0;
}

namespace {

// nodes[0..n) through cuBLAS, products of one b (n > 1: 2-D block-typed weights of one type,
// ggml_cuda_gemm_multi_fusable). What needs converting goes into one scratch allocation: b (to
// a's type, or to contiguous F32 rows) first, where the next product of the same b finds its F16
// copy (ctx.act, as the integer products' 8-bit activations; or the kernel that produced b wrote
// it there), then the weights (block types: all in one launch), then the planes' pointers.
void gemm_products(ggml_cuda_ctx & ctx, ggml_tensor * const * nodes, int n) {
    const ggml_tensor * a = nodes[0]->src[0], * b = nodes[0]->src[1];
    const int64_t K = a->ne[0], N = b->ne[1];
    const int64_t ne2 = b->ne[2], ne3 = b->ne[3], r2 = ne2 / a->ne[2], r3 = ne3 / a->ne[3];

    const bool a_quant = ggml_is_quantized(a->type);
    const ggml_type gt = gemm_type(a);
    const bool b_f16 = gt == GGML_TYPE_F16;
    const bool b_convert = gt != GGML_TYPE_F32 || b->nb[0] != sizeof(float) || b->nb[1] % sizeof(float) != 0;
    size_t a_bytes[3] = {}, a_total = 0;
    for (int w = 0; w < n; w++) {
        a_bytes[w] = a_quant ? align256((size_t) ggml_nelements(nodes[w]->src[0]) * 2) : 0;
        a_total += a_bytes[w];
    }
    const size_t b_bytes = b_convert ? align256((size_t) ggml_nelements(b) * (gt == GGML_TYPE_F32 ? 4 : 2)) : 0;
    const size_t p_bytes = r2 * r3 > 1 ? plane_ptrs_bytes(ne2, ne3) : 0;
    const bool b_ready = b_f16 && ggml_cuda_act_ready(ctx, b, kActF16);
    const uint64_t gen = ctx.scratch_gen;
    char * scratch = a_total + b_bytes + p_bytes > 0 ? (char *) ctx.scratch(a_total + b_bytes + p_bytes) : nullptr;

    Operand B;
    if (b_convert) {
        void * bp = scratch;
        if (b_ready && gen == ctx.scratch_gen) {  // the buffer did not move (grow) meanwhile
            ctx.n_act_reused++;
            ctx.n_act_f16++;
        } else {
            switch (gt) {
                case GGML_TYPE_F16: to_contig(ctx, (__half *) bp, b); break;
                case GGML_TYPE_BF16: to_contig(ctx, (__nv_bfloat16 *) bp, b); break;
                default: to_contig(ctx, (float *) bp, b); break;
            }
        }
        if (b_f16) ggml_cuda_act_record(ctx.act, b, kActF16, ctx.scratch_uses);
        B = operand_contig(bp, gt, K, N, ne2);
    } else {
        B = operand(b->data, GGML_TYPE_F32, b->nb);
    }
    void * a_f16[3] = {};
    const ggml_tensor * as[3] = {};
    for (size_t w = 0, at = 0; w < (size_t) n; at += a_bytes[w], w++) {
        a_f16[w] = scratch + b_bytes + at;
        as[w] = nodes[w]->src[0];
    }
    if (a_quant) dequant_to<__half>(ctx, a_f16, as, n);
    for (int w = 0; w < n; w++) {
        const ggml_tensor * aw = nodes[w]->src[0], * dst = nodes[w];
        const Operand A = a_quant ? operand_contig(a_f16[w], GGML_TYPE_F16, K, aw->ne[1], aw->ne[2]) : operand(aw->data, aw->type, aw->nb);
        gemm_planes(ctx, CUBLAS_OP_T, CUBLAS_OP_N, aw->ne[1], N, K, A, B, (float *) dst->data, dst->nb[1] / 4, dst->nb[2] / 4,
                    dst->nb[3] / 4, ne2, ne3, r2, r3, p_bytes ? scratch + b_bytes + a_total : nullptr);
    }
}

}  // namespace

void ggml_cuda_op_mul_mat(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0], * b = dst->src[1];
    if (a->ne[1] == 0 || b->ne[1] == 0 || ggml_nelements(dst) == 0) return;
    if (uses_mmv(dst)) {
        ggml_cuda_mmv(ctx, a, b, dst);
        return;
    }
    // quantized weights, few columns: b quantized as the CPU quantizes it, integer products (mmv.cu)
    if (ggml_cuda_mul_mat_uses_mmvq(dst)) {
        ggml_cuda_mmvq(ctx, a, b, dst);
        return;
    }
    gemm_products(ctx, &dst, 1);
}

bool ggml_cuda_gemm_multi_fusable(const ggml_tensor * first, const ggml_tensor * other) {
    const ggml_tensor * a = first->src[0], * b = first->src[1], * a2 = other->src[0];
    if (other->op != GGML_OP_MUL_MAT || other->src[1] != b || !a2 || a2->type != a->type || !ggml_is_quantized(a->type)) return false;
    if (ggml_cuda_mul_mat_act_form(first) != kActF16 || ggml_cuda_mul_mat_act_form(other) != kActF16) return false;  // cuBLAS, F16
    for (const ggml_tensor * t : { a, a2, b }) {
        if (t->ne[2] != 1 || t->ne[3] != 1) return false;  // one plane each
    }
    return !ggml_is_empty(first) && !ggml_is_empty(other) && a2->ne[0] == a->ne[0];
}

void ggml_cuda_gemm_multi(ggml_cuda_ctx & ctx, ggml_tensor * const * nodes, int n) {
    GGML_ASSERT(n >= 1 && n <= 3);
    gemm_products(ctx, nodes, n);
}

bool ggml_cuda_out_prod_supported(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0], * b = dst->src[1];
    if (!a || !b || b->type != GGML_TYPE_F32 || dst->type != GGML_TYPE_F32 || !ggml_is_contiguous(dst)) return false;
    if (!(is_float_type(a->type) || cuda_quant_supported(a->type)) || a->nb[0] != ggml_type_size(a->type)) return false;
    if (a->ne[1] != b->ne[1] || b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0) return false;
    return a->ne[0] <= INT32_MAX && a->ne[1] <= INT32_MAX && b->ne[0] <= INT32_MAX;
}

void ggml_cuda_op_out_prod(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0], * b = dst->src[1];
    const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[0];
    if (ggml_nelements(dst) == 0) return;
    if (M == 0) {
        CUDA_CHECK(cudaMemsetAsync(dst->data, 0, ggml_nbytes(dst), ctx.stream));
        return;
    }
    const int64_t ne2 = b->ne[2], ne3 = b->ne[3], r2 = ne2 / a->ne[2], r3 = ne3 / a->ne[3];

    // GGML_PREC_BF16 (llama-finetune's products through frozen weights on a GPU): both operands
    // rounded to BF16, tensor cores with F32 sums, as the CPU's BF16 kernels; else F32 products.
    const bool bf16 = ggml_get_op_params_i32(dst, 0) == GGML_PREC_BF16;
    const ggml_type ct = bf16 ? GGML_TYPE_BF16 : GGML_TYPE_F32;  // the products' operand type
    const size_t es = ggml_type_size(ct);
    const bool a_convert = a->type != ct || a->nb[1] % es != 0;
    // b [N, M]: rows contiguous (B^T through OP_T), or a transposed contiguous tensor (OP_N);
    // anything else, and any b for BF16, is made contiguous first.
    const bool b_rows = !bf16 && b->nb[0] == sizeof(float) && b->nb[1] % sizeof(float) == 0;
    const bool b_cols = !bf16 && !b_rows && b->nb[1] == sizeof(float) && b->nb[0] % sizeof(float) == 0;
    const bool b_convert = !b_rows && !b_cols;
    const size_t a_bytes = a_convert ? align256((size_t) ggml_nelements(a) * es) : 0;
    const size_t b_bytes = b_convert ? align256((size_t) ggml_nelements(b) * es) : 0;
    const size_t p_bytes = r2 * r3 > 1 ? plane_ptrs_bytes(ne2, ne3) : 0;
    char * scratch = a_bytes + b_bytes + p_bytes > 0 ? (char *) ctx.scratch(a_bytes + b_bytes + p_bytes) : nullptr;

    Operand A, B;
    if (a_convert) {
        void * out[1] = { scratch };
        if (bf16) dequant_to<__nv_bfloat16>(ctx, out, &a, 1);  // block types a unit a thread, others value by value
        else dequant_to<float>(ctx, out, &a, 1);
        A = operand_contig(scratch, ct, K, M, a->ne[2]);
    } else {
        A = operand(a->data, ct, a->nb);
    }
    cublasOperation_t opb = CUBLAS_OP_T;
    if (b_convert) {
        if (bf16) to_contig(ctx, (__nv_bfloat16 *) (scratch + a_bytes), b);
        else to_contig(ctx, (float *) (scratch + a_bytes), b);
        B = operand_contig(scratch + a_bytes, ct, N, M, ne2);
    } else if (b_rows) {
        B = operand(b->data, GGML_TYPE_F32, b->nb);
    } else {
        B = { b->data, CUDA_R_32F, 4, (int64_t) (b->nb[0] / 4), (int64_t) (b->nb[2] / 4), (int64_t) (b->nb[3] / 4) };
        opb = CUBLAS_OP_N;
    }
    gemm_planes(ctx, CUBLAS_OP_N, opb, K, N, M, A, B, (float *) dst->data, dst->nb[1] / 4, dst->nb[2] / 4, dst->nb[3] / 4, ne2, ne3,
                r2, r3, p_bytes ? scratch + a_bytes + b_bytes : nullptr);
}
