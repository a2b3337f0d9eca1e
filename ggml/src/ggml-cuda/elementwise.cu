// elementwise.cu - ops computing each element from the elements at the same place: add, sub, mul,
// div (b broadcast over a), add1, scale, sqr, sqrt, log, the unary ops and their gradients
// (unary_back), diag_mask_inf / diag_mask_zero. Any float types (F32, F16, BF16) and strides;
// one thread per element of dst, which may be its first source (in place).
#include "ops.cuh"
#include "quant.cuh"

namespace {

enum class Bin { add, sub, mul, div };

template <Bin OP>
__device__ __forceinline__ float bin_apply(float a, float b) {
    if constexpr (OP == Bin::add) return a + b;
    if constexpr (OP == Bin::sub) return a - b;
    if constexpr (OP == Bin::mul) return a * b;
    return a / b;
}

// dst[i] = a[i] op b[i mod b's shape]
template <Bin OP>
__global__ void k_binary(tview dst, tview a, tview b, int64_t n) {
    const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int64_t i0, i1, i2, i3;
    unravel(i, dst, i0, i1, i2, i3);
    const float x = load_f(elem_ptr(a, i0, i1, i2, i3), a.type);
    const float y = load_f(bcast_ptr(b, i0, i1, i2, i3), b.type);
    store_f(elem_ptr(dst, i0, i1, i2, i3), dst.type, bin_apply<OP>(x, y));
}

template <Bin OP>
void binary(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    const int64_t n = ggml_nelements(dst);
    if (n == 0) return;
    GGML_CUDA_LAUNCH(k_binary<OP>, n_blocks(n), 256, 0, ctx.stream)(make_view(dst), make_view(dst->src[0]), make_view(dst->src[1]), n);
    CUDA_CHECK_LAUNCH();
}

// ---- one-source maps ----------------------------------------------------------------------
enum class Map { scale, sqr, sqrt, log, abs, sgn, neg, step, tanh, relu, sigmoid, gelu, silu, exp, gelu_erf };

// v * sigmoid(w) without overflow: e = exp(-|w|) never overflows (the CPU's formulation).
__device__ __forceinline__ float mul_sigmoid(float v, float w) {
    const float e = expf(-fabsf(w));
    return (w >= 0.0f ? v : v * e) / (1.0f + e);
}

// gelu (tanh form) = x sigmoid(2u), 2u = -x (GELU_A + GELU_B x^2).
constexpr float GELU_A = -1.5957691216057308f;   // -2 sqrt(2/pi)
constexpr float GELU_B = -0.07135481627260025f;  // -2 sqrt(2/pi) 0.044715

template <Map M>
__device__ __forceinline__ float map_apply(float x, float s) {
    if constexpr (M == Map::scale) return x * s;
    if constexpr (M == Map::sqr) return x * x;
    if constexpr (M == Map::sqrt) return sqrtf(x);
    if constexpr (M == Map::log) return logf(x);
    if constexpr (M == Map::abs) return fabsf(x);
    if constexpr (M == Map::sgn) return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
    if constexpr (M == Map::neg) return -x;
    if constexpr (M == Map::step) return x > 0.0f ? 1.0f : 0.0f;
    if constexpr (M == Map::tanh) return tanhf(x);
    if constexpr (M == Map::relu) return x > 0.0f ? x : 0.0f;
    if constexpr (M == Map::sigmoid) return mul_sigmoid(1.0f, x);
    if constexpr (M == Map::gelu) return mul_sigmoid(x, -x * fmaf(GELU_B, x * x, GELU_A));
    if constexpr (M == Map::silu) return mul_sigmoid(x, x);
    if constexpr (M == Map::exp) return expf(x);
    if constexpr (M == Map::gelu_erf) return 0.5f * x * erfcf(-x * 0.70710678118654752f);
    return x;
}

template <Map M>
__global__ void k_map(tview dst, tview src, int64_t n, float s) {
    const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int64_t i0, i1, i2, i3;
    unravel(i, dst, i0, i1, i2, i3);
    const float x = load_f(elem_ptr(src, i0, i1, i2, i3), src.type);
    store_f(elem_ptr(dst, i0, i1, i2, i3), dst.type, map_apply<M>(x, s));
}

template <Map M>
void map(ggml_cuda_ctx & ctx, ggml_tensor * dst, float s = 0.0f) {
    const int64_t n = ggml_nelements(dst);
    if (n == 0) return;
    GGML_CUDA_LAUNCH(k_map<M>, n_blocks(n), 256, 0, ctx.stream)(make_view(dst), make_view(dst->src[0]), n, s);
    CUDA_CHECK_LAUNCH();
}

// silu / gelu then a multiply by another tensor (the FFN's gate times up), one launch: both
// results are written, the product from the F32 value just stored, as the two kernels would.
template <Map M>
__device__ __forceinline__ void map_mul_at(const tview & mdst, const tview & src, const tview & pdst, const tview & other, int map_is_a,
                                           int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const float m = map_apply<M>(load_f(elem_ptr(src, i0, i1, i2, i3), src.type), 0.0f);
    *(float *) elem_ptr(mdst, i0, i1, i2, i3) = m;
    const float o = load_f(bcast_ptr(other, i0, i1, i2, i3), other.type);
    store_f(elem_ptr(pdst, i0, i1, i2, i3), pdst.type, map_is_a ? m * o : o * m);
}

template <Map M>
__global__ void k_map_mul(tview mdst, tview src, tview pdst, tview other, int64_t n, int map_is_a) {
    const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int64_t i0, i1, i2, i3;
    unravel(i, pdst, i0, i1, i2, i3);
    map_mul_at<M>(mdst, src, pdst, other, map_is_a, i0, i1, i2, i3);
}

// The same a row per block, then the row quantized for the integer product that reads it next
// (QB: its activation block; generation's down projection after gate times up): one launch.
template <Map M, int QB>
__global__ void k_map_mul_rows(tview mdst, tview src, tview pdst, tview other, int map_is_a, ActArgs q) {
    int64_t i1, i2, i3;
    row_coords(blockIdx.x, pdst, i1, i2, i3);
    for (int64_t i0 = threadIdx.x; i0 < pdst.ne[0]; i0 += blockDim.x) map_mul_at<M>(mdst, src, pdst, other, map_is_a, i0, i1, i2, i3);
    quantize_produced_row<QB>(q, (const float *) row_ptr(pdst, i1, i2, i3));
}

// ---- unary_back: grad * f'(x) -------------------------------------------------------------
__device__ __forceinline__ float unary_grad(int op, float g, float x) {
    switch (op) {
        case GGML_UNARY_OP_ABS: return x > 0.0f ? g : (x < 0.0f ? -g : 0.0f);
        case GGML_UNARY_OP_SGN:
        case GGML_UNARY_OP_STEP: return 0.0f;
        case GGML_UNARY_OP_NEG: return -g;
        case GGML_UNARY_OP_RELU: return x > 0.0f ? g : 0.0f;
        case GGML_UNARY_OP_TANH: {
            const float e = expf(-2.0f * fabsf(x));  // 1 - tanh^2 = 4e / (1 + e)^2: no cancellation
            return g * (4.0f * e / ((1.0f + e) * (1.0f + e)));
        }
        case GGML_UNARY_OP_SIGMOID: {
            const float e = expf(-fabsf(x));
            return g * (e / ((1.0f + e) * (1.0f + e)));
        }
        case GGML_UNARY_OP_SILU: {
            const float e = expf(-fabsf(x)), inv = 1.0f / (1.0f + e);
            const float s = (x >= 0.0f ? 1.0f : e) * inv, sm = (x >= 0.0f ? e : 1.0f) * inv;
            return g * (s * (1.0f + x * sm));
        }
        case GGML_UNARY_OP_GELU: {
            const float w = -x * fmaf(GELU_B, x * x, GELU_A);
            const float wp = -fmaf(3.0f * GELU_B, x * x, GELU_A);
            const float e = expf(-fabsf(w)), inv = 1.0f / (1.0f + e);
            const float s = (w >= 0.0f ? 1.0f : e) * inv, sm = (w >= 0.0f ? e : 1.0f) * inv;
            return g * (s * (1.0f + x * sm * wp));
        }
        case GGML_UNARY_OP_EXP: return g * expf(x);
        case GGML_UNARY_OP_GELU_ERF:
            return g * (0.5f * erfcf(-x * 0.70710678118654752f) + x * 0.39894228040143268f * expf(-0.5f * x * x));
        default: return 0.0f;
    }
}

__global__ void k_unary_back(tview dst, tview grad, tview x, int64_t n, int op) {
    const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int64_t i0, i1, i2, i3;
    unravel(i, dst, i0, i1, i2, i3);
    const float g = load_f(elem_ptr(grad, i0, i1, i2, i3), grad.type);
    const float xv = load_f(elem_ptr(x, i0, i1, i2, i3), x.type);
    store_f(elem_ptr(dst, i0, i1, i2, i3), dst.type, unary_grad(op, g, xv));
}

// ---- diag_mask ------------------------------------------------------------------------------
__global__ void k_diag_mask(tview dst, tview src, int64_t n, int64_t n_past, float fill) {
    const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int64_t i0, i1, i2, i3;
    unravel(i, dst, i0, i1, i2, i3);
    const float v = i0 > n_past + i1 ? fill : *(const float *) elem_ptr(src, i0, i1, i2, i3);
    *(float *) elem_ptr(dst, i0, i1, i2, i3) = v;
}

}  // namespace

void ggml_cuda_op_add(ggml_cuda_ctx & ctx, ggml_tensor * dst) { binary<Bin::add>(ctx, dst); }
void ggml_cuda_op_sub(ggml_cuda_ctx & ctx, ggml_tensor * dst) { binary<Bin::sub>(ctx, dst); }
void ggml_cuda_op_mul(ggml_cuda_ctx & ctx, ggml_tensor * dst) { binary<Bin::mul>(ctx, dst); }
void ggml_cuda_op_div(ggml_cuda_ctx & ctx, ggml_tensor * dst) { binary<Bin::div>(ctx, dst); }

void ggml_cuda_op_scale(ggml_cuda_ctx & ctx, ggml_tensor * dst) { map<Map::scale>(ctx, dst, ggml_get_op_params_f32(dst, 0)); }
void ggml_cuda_op_sqr(ggml_cuda_ctx & ctx, ggml_tensor * dst) { map<Map::sqr>(ctx, dst); }
void ggml_cuda_op_sqrt(ggml_cuda_ctx & ctx, ggml_tensor * dst) { map<Map::sqrt>(ctx, dst); }
void ggml_cuda_op_log(ggml_cuda_ctx & ctx, ggml_tensor * dst) { map<Map::log>(ctx, dst); }

bool ggml_cuda_unary_supported(int op) { return op >= 0 && op < GGML_UNARY_OP_COUNT; }

void ggml_cuda_op_unary(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    switch ((ggml_unary_op) ggml_get_op_params_i32(dst, 0)) {
        case GGML_UNARY_OP_ABS:     map<Map::abs>(ctx, dst); break;
        case GGML_UNARY_OP_SGN:     map<Map::sgn>(ctx, dst); break;
        case GGML_UNARY_OP_NEG:     map<Map::neg>(ctx, dst); break;
        case GGML_UNARY_OP_STEP:    map<Map::step>(ctx, dst); break;
        case GGML_UNARY_OP_TANH:    map<Map::tanh>(ctx, dst); break;
        case GGML_UNARY_OP_RELU:    map<Map::relu>(ctx, dst); break;
        case GGML_UNARY_OP_SIGMOID: map<Map::sigmoid>(ctx, dst); break;
        case GGML_UNARY_OP_GELU:    map<Map::gelu>(ctx, dst); break;
        case GGML_UNARY_OP_SILU:    map<Map::silu>(ctx, dst); break;
        case GGML_UNARY_OP_EXP:     map<Map::exp>(ctx, dst); break;
        case GGML_UNARY_OP_GELU_ERF: map<Map::gelu_erf>(ctx, dst); break;
        default: GGML_ABORT("ggml_cuda: unknown unary op %d", ggml_get_op_params_i32(dst, 0));
    }
}

void ggml_cuda_op_unary_back(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    const int64_t n = ggml_nelements(dst);
    if (n == 0) return;
    GGML_CUDA_LAUNCH(k_unary_back, n_blocks(n), 256, 0, ctx.stream)(make_view(dst), make_view(dst->src[0]), make_view(dst->src[1]), n,
                                                      ggml_get_op_params_i32(dst, 0));
    CUDA_CHECK_LAUNCH();
}

static void diag_mask(ggml_cuda_ctx & ctx, ggml_tensor * dst, float fill) {
    const int64_t n = ggml_nelements(dst);
    if (n == 0) return;
    GGML_CUDA_LAUNCH(k_diag_mask, n_blocks(n), 256, 0, ctx.stream)(make_view(dst), make_view(dst->src[0]), n,
                                                     ggml_get_op_params_i32(dst, 0), fill);
    CUDA_CHECK_LAUNCH();
}

void ggml_cuda_op_diag_mask_inf(ggml_cuda_ctx & ctx, ggml_tensor * dst) { diag_mask(ctx, dst, -INFINITY); }
void ggml_cuda_op_diag_mask_zero(ggml_cuda_ctx & ctx, ggml_tensor * dst) { diag_mask(ctx, dst, 0.0f); }

bool ggml_cuda_unary_mul_fusable(const ggml_tensor * unary, const ggml_tensor * mul) {
    const int op = ggml_get_op_params_i32(unary, 0);
    if (op != GGML_UNARY_OP_SILU && op != GGML_UNARY_OP_GELU) return false;
    const ggml_tensor * other = mul->src[0] == unary ? mul->src[1] : mul->src[0];
    return unary->type == GGML_TYPE_F32 && is_float_type(mul->type) && (mul->src[0] == unary || mul->src[1] == unary) &&
           mul->src[0] != mul->src[1] && ggml_are_same_shape(unary, mul) && is_float_type(other->type) &&
           ggml_can_repeat(other, mul);
}

void ggml_cuda_op_unary_mul(ggml_cuda_ctx & ctx, ggml_tensor * unary, ggml_tensor * mul, const ggml_tensor * product) {
    const int64_t n = ggml_nelements(mul);
    if (n == 0) return;
    const int map_is_a = mul->src[0] == unary;
    const ggml_tensor * other = map_is_a ? mul->src[1] : mul->src[0];
    const bool silu = ggml_get_op_params_i32(unary, 0) == GGML_UNARY_OP_SILU;
    ggml_cuda_launch_quantizing(ctx, mul, product, [&](auto qb, const ActArgs & q) {
        constexpr int QB = decltype(qb)::value;
        if constexpr (QB > 0) {
            const unsigned int rows = (unsigned int) ggml_nrows(mul);
            if (silu) {
                GGML_CUDA_LAUNCH(k_map_mul_rows<Map::silu GGML_COMMA QB>, rows, 256, 0, ctx.stream)(
                    make_view(unary), make_view(unary->src[0]), make_view(mul), make_view(other), map_is_a, q);
            } else {
                GGML_CUDA_LAUNCH(k_map_mul_rows<Map::gelu GGML_COMMA QB>, rows, 256, 0, ctx.stream)(
                    make_view(unary), make_view(unary->src[0]), make_view(mul), make_view(other), map_is_a, q);
            }
        } else if (silu) {
            GGML_CUDA_LAUNCH(k_map_mul<Map::silu>, n_blocks(n), 256, 0, ctx.stream)(make_view(unary), make_view(unary->src[0]), make_view(mul),
                                                                                    make_view(other), n, map_is_a);
        } else {
            GGML_CUDA_LAUNCH(k_map_mul<Map::gelu>, n_blocks(n), 256, 0, ctx.stream)(make_view(unary), make_view(unary->src[0]), make_view(mul),
                                                                                    make_view(other), n, map_is_a);
        }
    });
    CUDA_CHECK_LAUNCH();
}
