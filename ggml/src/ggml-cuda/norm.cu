// norm.cu - normalization over rows (dim 0): norm (zero mean, unit variance), rms_norm, and
// their gradients norm_back / rms_norm_back (src0 the output's gradient, src1 the input). F32,
// any strides; one block per row, sums in double as the CPU's (two passes for the variance).
#include "ops.cuh"
#include "quant.cuh"

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ double bsum(double v) {
    __shared__ double buf[32];
    return block_sum(v, buf);
}

// MUL: the result times w (broadcast over its rows), written to mdst as well (rms_norm then the
// norm's weight, one launch; the product from the F32 value just stored, as two kernels would).
template <bool RMS, bool MUL>
__device__ __forceinline__ void norm_row(tview dst, tview src, double eps, tview mdst, tview w, int norm_is_a) {
    int64_t i1, i2, i3;
    row_coords(blockIdx.x, src, i1, i2, i3);
    const char * x = row_ptr(src, i1, i2, i3);
    char * y = row_ptr(dst, i1, i2, i3);
    const int64_t n = src.ne[0];
    double mean = 0.0;
    if (!RMS) {
        double s = 0.0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += *(const float *) (x + i * src.nb[0]);
        mean = bsum(s) / (double) n;
    }
    double s2 = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const double d = (double) *(const float *) (x + i * src.nb[0]) - mean;
        s2 += d * d;
    }
    const double var = bsum(s2) / (double) n;
    const double scale = 1.0 / sqrt(var + eps);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = (float) (((double) *(const float *) (x + i * src.nb[0]) - mean) * scale);
        *(float *) (y + i * dst.nb[0]) = v;
        if constexpr (MUL) {
            const float o = load_f(bcast_ptr(w, i, i1, i2, i3), w.type);
            store_f(elem_ptr(mdst, i, i1, i2, i3), mdst.type, norm_is_a ? v * o : o * v);
        }
    }
}

template <bool RMS>
__global__ void k_norm(tview dst, tview src, double eps) { norm_row<RMS, false>(dst, src, eps, tview{}, tview{}, 1); }

// QB: the activation block (32, 256) of the integer products that read mdst next, or 0.
template <int QB>
__global__ void k_rms_norm_mul(tview dst, tview src, double eps, tview mdst, tview w, int norm_is_a, ActArgs q) {
    norm_row<true, true>(dst, src, eps, mdst, w, norm_is_a);
    int64_t i1, i2, i3;
    row_coords(blockIdx.x, src, i1, i2, i3);
    quantize_produced_row<QB>(q, (const float *) row_ptr(mdst, i1, i2, i3));
}

// The residual's add, then rms_norm of the sum and the multiply by its weight: the row's sum
// is stored first (each thread the elements norm_row reads back), as the add's kernel would.
template <int QB>
__global__ void k_add_rms_norm_mul(tview sum, tview a, tview b, tview dst, double eps, tview mdst, tview w, int norm_is_a, ActArgs q) {
    int64_t i1, i2, i3;
    row_coords(blockIdx.x, sum, i1, i2, i3);
    for (int64_t i = threadIdx.x; i < sum.ne[0]; i += blockDim.x) {
        const float x = load_f(elem_ptr(a, i, i1, i2, i3), a.type);
        const float y = load_f(bcast_ptr(b, i, i1, i2, i3), b.type);
        *(float *) elem_ptr(sum, i, i1, i2, i3) = x + y;
    }
    norm_row<true, true>(dst, sum, eps, mdst, w, norm_is_a);
    quantize_produced_row<QB>(q, (const float *) row_ptr(mdst, i1, i2, i3));
}

// norm:     dx = r (g - mean(g) - y mean(g y)),  mean(g y) = r sum(g (x - mean)) / n
// rms_norm: dx = r (g - y mean(g y)),            mean(g y) = r sum(g x) / n
template <bool RMS>
__global__ void k_norm_back(tview dst, tview grad, tview src, double eps) {
    int64_t i1, i2, i3;
    row_coords(blockIdx.x, src, i1, i2, i3);
    const char * g = row_ptr(grad, i1, i2, i3);
    const char * x = row_ptr(src, i1, i2, i3);
    char * y = row_ptr(dst, i1, i2, i3);
    const int64_t n = src.ne[0];
    auto xi = [&](int64_t i) { return (double) *(const float *) (x + i * src.nb[0]); };
    auto gi = [&](int64_t i) { return (double) *(const float *) (g + i * grad.nb[0]); };
    double mean = 0.0, mean_g = 0.0;
    if (!RMS) {
        double s = 0.0, sg = 0.0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            s += xi(i);
            sg += gi(i);
        }
        mean = bsum(s) / (double) n;
        mean_g = bsum(sg) / (double) n;
    }
    double s2 = 0.0, sgx = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const double d = xi(i) - mean;
        s2 += d * d;
        sgx += gi(i) * d;
    }
    const double var = bsum(s2) / (double) n;
    const double r = 1.0 / sqrt(var + eps);
    const double mean_gy = r * bsum(sgx) / (double) n;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const double yv = (xi(i) - mean) * r;
        *(float *) (y + i * dst.nb[0]) = (float) (r * (gi(i) - mean_g - yv * mean_gy));
    }
}

}  // namespace

void ggml_cuda_op_norm(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    const int64_t nr = ggml_nrows(dst);
    if (nr == 0) return;
    GGML_CUDA_LAUNCH(k_norm<false>, (unsigned int) nr, kThreads, 0, ctx.stream)(make_view(dst), make_view(dst->src[0]),
                                                                                (double) ggml_get_op_params_f32(dst, 0));
    CUDA_CHECK_LAUNCH();
}

void ggml_cuda_op_rms_norm(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    const int64_t nr = ggml_nrows(dst);
    if (nr == 0) return;
    GGML_CUDA_LAUNCH(k_norm<true>, (unsigned int) nr, kThreads, 0, ctx.stream)(make_view(dst), make_view(dst->src[0]),
                                                                               (double) ggml_get_op_params_f32(dst, 0));
    CUDA_CHECK_LAUNCH();
}

bool ggml_cuda_rms_norm_mul_fusable(const ggml_tensor * norm, const ggml_tensor * mul) {
    const ggml_tensor * w = mul->src[0] == norm ? mul->src[1] : mul->src[0];
    return (mul->src[0] == norm || mul->src[1] == norm) && mul->src[0] != mul->src[1] && ggml_are_same_shape(norm, mul) &&
           is_float_type(mul->type) && is_float_type(w->type) && ggml_can_repeat(w, mul);
}

void ggml_cuda_op_rms_norm_mul(ggml_cuda_ctx & ctx, ggml_tensor * norm, ggml_tensor * mul, const ggml_tensor * product) {
    const int64_t nr = ggml_nrows(norm);
    if (nr == 0) return;
    const int norm_is_a = mul->src[0] == norm;
    ggml_cuda_launch_quantizing(ctx, mul, product, [&](auto qb, const ActArgs & q) {
        GGML_CUDA_LAUNCH(k_rms_norm_mul<decltype(qb)::value>, (unsigned int) nr, kThreads, 0, ctx.stream)(
            make_view(norm), make_view(norm->src[0]), (double) ggml_get_op_params_f32(norm, 0), make_view(mul),
            make_view(norm_is_a ? mul->src[1] : mul->src[0]), norm_is_a, q);
    });
    CUDA_CHECK_LAUNCH();
}

bool ggml_cuda_add_rms_norm_mul_fusable(const ggml_tensor * add, const ggml_tensor * norm, const ggml_tensor * mul) {
    const ggml_tensor * a = add->src[0], * b = add->src[1];
    return add->op == GGML_OP_ADD && norm->src[0] == add && add->type == GGML_TYPE_F32 && a && b && is_float_type(a->type) &&
           is_float_type(b->type) && ggml_are_same_shape(a, add) && ggml_can_repeat(b, add) && ggml_are_same_shape(add, norm) &&
           ggml_cuda_rms_norm_mul_fusable(norm, mul);
}

void ggml_cuda_op_add_rms_norm_mul(ggml_cuda_ctx & ctx, ggml_tensor * add, ggml_tensor * norm, ggml_tensor * mul, const ggml_tensor * product) {
    const int64_t nr = ggml_nrows(norm);
    if (nr == 0) return;
    const int norm_is_a = mul->src[0] == norm;
    ggml_cuda_launch_quantizing(ctx, mul, product, [&](auto qb, const ActArgs & q) {
        GGML_CUDA_LAUNCH(k_add_rms_norm_mul<decltype(qb)::value>, (unsigned int) nr, kThreads, 0, ctx.stream)(
            make_view(add), make_view(add->src[0]), make_view(add->src[1]), make_view(norm), (double) ggml_get_op_params_f32(norm, 0),
            make_view(mul), make_view(norm_is_a ? mul->src[1] : mul->src[0]), norm_is_a, q);
    });
    CUDA_CHECK_LAUNCH();
}

void ggml_cuda_op_norm_back(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    const int64_t nr = ggml_nrows(dst);
    if (nr == 0) return;
    GGML_CUDA_LAUNCH(k_norm_back<false>, (unsigned int) nr, kThreads, 0, ctx.stream)(make_view(dst), make_view(dst->src[0]), make_view(dst->src[1]),
                                                                       (double) ggml_get_op_params_f32(dst, 0));
    CUDA_CHECK_LAUNCH();
}

void ggml_cuda_op_rms_norm_back(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    const int64_t nr = ggml_nrows(dst);
    if (nr == 0) return;
    GGML_CUDA_LAUNCH(k_norm_back<true>, (unsigned int) nr, kThreads, 0, ctx.stream)(make_view(dst), make_view(dst->src[0]), make_view(dst->src[1]),
                                                                      (double) ggml_get_op_params_f32(dst, 0));
    CUDA_CHECK_LAUNCH();
}
