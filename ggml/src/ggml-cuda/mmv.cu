// mmv.cu - matrix-vector products for generation: mul_mat(a, b) with few columns of b (at most
// MMV_MAX_COLS), memory-bound on a's bytes. a is read in its stored type (GGUF blocks read
// directly, never dequantized to memory), one warp per row of a: lane l takes units (32 values)
// l, l + 32, ... of the row, decodes each into registers once and multiplies it with every
// column of b; the warp's partial sums are then reduced with shuffles. Planes broadcast as the
// CPU's mul_mat (b->ne[2] a multiple of a->ne[2], same for dim 3).
#include "ops.cuh"
#include "quant.cuh"

namespace {

constexpr int kWarpsPerBlock = 4;  // rows of a per block

struct MmvArgs {
    const char * a;
    int64_t a_nb1, a_nb2, a_nb3;
    const char * b;
    int64_t b_nb1, b_nb2, b_nb3;
    char * d;
    int64_t d_nb1, d_nb2, d_nb3;
    int64_t M, K, N, ne12, r2, r3;  // r2, r3: planes of b per plane of a
    int b_vec4;                     // b's rows are 16-byte aligned: float4 loads
    int L;                          // lanes per row of a: 32, or fewer for short rows (a warp then takes 32 / L rows)
};

// NC: columns of b per block (1 for generation: fewer registers, more loads in flight).
template <int T, int NC>
__global__ void __launch_bounds__(WARP * kWarpsPerBlock) k_mmv(MmvArgs p) {
    const int lane = threadIdx.x % WARP, li = lane % p.L;
    const int64_t m0 = ((int64_t) blockIdx.x * kWarpsPerBlock + threadIdx.x / WARP) * (WARP / p.L);
    if (m0 >= p.M) return;  // whole warps leave: the shuffles below see full warps
    const int64_t m = m0 + lane / p.L;
    const bool active = m < p.M;
    const int64_t i12 = blockIdx.z % p.ne12, i13 = blockIdx.z / p.ne12;
    const int64_t n0 = (int64_t) blockIdx.y * NC;
    const char * arow = p.a + (active ? m : m0) * p.a_nb1 + (i12 / p.r2) * p.a_nb2 + (i13 / p.r3) * p.a_nb3;
    const char * bbase = p.b + i12 * p.b_nb2 + i13 * p.b_nb3;

    float s[NC];
#pragma unroll
    for (int c = 0; c < NC; c++) s[c] = 0.0f;

    const int64_t units = active ? p.K / 32 : 0;
    for (int64_t u = li; u < units; u += p.L) {
        float v[32];
        dequant_unit<T>(arow, u, v);
#pragma unroll
        for (int c = 0; c < NC; c++) {
            if (n0 + c >= p.N) break;
            const float * bp = (const float *) (bbase + (n0 + c) * p.b_nb1) + 32 * u;
            float acc = 0.0f;
            if (p.b_vec4) {
#pragma unroll
                for (int k = 0; k < 8; k++) {
                    const float4 bv = ((const float4 *) bp)[k];
                    acc += v[4 * k] * bv.x + v[4 * k + 1] * bv.y + v[4 * k + 2] * bv.z + v[4 * k + 3] * bv.w;
                }
            } else {
#pragma unroll
                for (int l = 0; l < 32; l++) acc += v[l] * bp[l];
            }
            s[c] += acc;
        }
    }
    // plain float rows whose length is not a multiple of 32: the tail, an element per lane of the row
    if constexpr (T == GGML_TYPE_F32 || T == GGML_TYPE_F16 || T == GGML_TYPE_BF16) {
        for (int64_t j = (p.K / 32) * 32 + li; active && j < p.K; j += p.L) {
            const float av = load_f(arow + j * (T == GGML_TYPE_F32 ? 4 : 2), T);
#pragma unroll
            for (int c = 0; c < NC; c++) {
                if (n0 + c >= p.N) break;
                s[c] += av * ((const float *) (bbase + (n0 + c) * p.b_nb1))[j];
            }
        }
    }
#pragma unroll
    for (int c = 0; c < NC; c++) {
        if (n0 + c >= p.N) break;  // uniform across the warp
        float r = s[c];
        for (int o = p.L / 2; o > 0; o >>= 1) r += __shfl_xor_sync(0xffffffffu, r, o);  // within each row's lanes
        if (active && li == 0) *(float *) (p.d + m * 4 + (n0 + c) * p.d_nb1 + i12 * p.d_nb2 + i13 * p.d_nb3) = r;
    }
}

}  // namespace

bool ggml_cuda_mmv_supported(const ggml_tensor * a) {
    switch (a->type) {
        case GGML_TYPE_F32: case GGML_TYPE_F16: case GGML_TYPE_BF16:
            return true;
        default:
            return cuda_quant_supported(a->type);
    }
}

// dst = mul_mat(a, b) for b->ne[1] <= MMV_MAX_COLS (more columns: several column groups).
void ggml_cuda_mmv(ggml_cuda_ctx & ctx, const ggml_tensor * a, const ggml_tensor * b, ggml_tensor * dst) {
    MmvArgs p;
    p.a = (const char *) a->data;
    p.a_nb1 = a->nb[1]; p.a_nb2 = a->nb[2]; p.a_nb3 = a->nb[3];
    p.b = (const char *) b->data;
    p.b_nb1 = b->nb[1]; p.b_nb2 = b->nb[2]; p.b_nb3 = b->nb[3];
    p.d = (char *) dst->data;
    p.d_nb1 = dst->nb[1]; p.d_nb2 = dst->nb[2]; p.d_nb3 = dst->nb[3];
    p.M = a->ne[1];
    p.K = a->ne[0];
    p.N = b->ne[1];
    p.ne12 = b->ne[2];
    p.r2 = b->ne[2] / a->ne[2];
    p.r3 = b->ne[3] / a->ne[3];
    p.b_vec4 = ((uintptr_t) b->data % 16 == 0) && b->nb[1] % 16 == 0 && b->nb[2] % 16 == 0 && b->nb[3] % 16 == 0;
    if (p.M == 0 || p.N == 0 || b->ne[2] * b->ne[3] == 0) return;
    // Short rows (attention's K^T q in generation: 64 or 128 values) would leave most lanes idle:
    // a row gets the fewest lanes (a power of two) that still cover its units.
    const int64_t units = (p.K + 31) / 32;
    p.L = WARP;
    while (p.L > 1 && p.L / 2 >= units) p.L /= 2;
    const int64_t rows_per_block = (int64_t) kWarpsPerBlock * (WARP / p.L);

    const int nc = p.N == 1 ? 1 : MMV_MAX_COLS;
    const dim3 grid((unsigned int) ((p.M + rows_per_block - 1) / rows_per_block), (unsigned int) ((p.N + nc - 1) / nc),
                    (unsigned int) (b->ne[2] * b->ne[3]));
    const dim3 block(WARP * kWarpsPerBlock);
    switch (a->type) {
#define MMV_CASE(T)                                                                          \
    case T:                                                                                  \
        if (nc == 1) GGML_CUDA_LAUNCH(k_mmv<T GGML_COMMA 1>, grid, block, 0, ctx.stream)(p);       \
        else GGML_CUDA_LAUNCH(k_mmv<T GGML_COMMA MMV_MAX_COLS>, grid, block, 0, ctx.stream)(p);    \
        break;
        MMV_CASE(GGML_TYPE_F32)
        MMV_CASE(GGML_TYPE_F16)
        MMV_CASE(GGML_TYPE_BF16)
        MMV_CASE(GGML_TYPE_Q4_0)
        MMV_CASE(GGML_TYPE_Q4_1)
        MMV_CASE(GGML_TYPE_Q5_0)
        MMV_CASE(GGML_TYPE_Q5_1)
        MMV_CASE(GGML_TYPE_Q8_0)
        MMV_CASE(GGML_TYPE_IQ4_NL)
        MMV_CASE(GGML_TYPE_Q2_K)
        MMV_CASE(GGML_TYPE_Q3_K)
        MMV_CASE(GGML_TYPE_Q4_K)
        MMV_CASE(GGML_TYPE_Q5_K)
        MMV_CASE(GGML_TYPE_Q6_K)
#undef MMV_CASE
        default: GGML_ABORT("ggml_cuda_mmv: unsupported type %s", ggml_type_name(a->type));
    }
    CUDA_CHECK_LAUNCH();
}
