// softmax.cu - soft_max(a * scale + slope * mask) over rows (mask F32 or F16 broadcast over dims
// 2 and 3, ALiBi slope per head from max_bias) and its gradient soft_max_back. One block per row:
// the row is read three times (max, sum, write) rather than held, so any length works. A row
// that is -inf everywhere gives zeros, as the CPU defines it.
#include "ops.cuh"
#include "quant.cuh"

namespace {

constexpr int kThreads = 256;

struct SoftmaxArgs {
    float scale, max_bias;
    int has_mask;
};

__device__ __forceinline__ float logit(const char * x, int64_t xs, const char * m, int mtype, int64_t i, float scale, float slope) {
    float w = *(const float *) (x + i * xs) * scale;
    if (m) w += slope * load_f(m + i * (mtype == GGML_TYPE_F16 ? 2 : 4), mtype);
    return w;
}

// QB: the form (quant.cuh) in which the product that reads dst next takes it (the probabilities
// as F16 for the values' product of a prompt without flash attention), or 0.
template <int QB>
__global__ void k_soft_max(tview dst, tview src, tview mask, SoftmaxArgs args, ActArgs q) {
    __shared__ float fbuf[32];
    __shared__ double dbuf[32];
    int64_t i1, i2, i3;
    row_coords(blockIdx.x, src, i1, i2, i3);
    const char * x = row_ptr(src, i1, i2, i3);
    char * y = row_ptr(dst, i1, i2, i3);
    const char * m = args.has_mask ? row_ptr(mask, i1, i2 % mask.ne[2], i3 % mask.ne[3]) : nullptr;
    const float slope = args.has_mask ? alibi_slope((uint32_t) i2, (uint32_t) src.ne[2], args.max_bias) : 1.0f;
    const int64_t n = src.ne[0];

    float mx = -INFINITY;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) mx = fmaxf(mx, logit(x, src.nb[0], m, mask.type, i, args.scale, slope));
    mx = block_max(mx, fbuf);
    if (mx == -INFINITY) {
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) *(float *) (y + i * dst.nb[0]) = 0.0f;
    } else {
        double s = 0.0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += (double) expf(logit(x, src.nb[0], m, mask.type, i, args.scale, slope) - mx);
        s = block_sum(s, dbuf);
        const float inv = (float) (1.0 / s);
        // In place, each thread rewrites only elements it read itself, after the sums: safe.
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            *(float *) (y + i * dst.nb[0]) = expf(logit(x, src.nb[0], m, mask.type, i, args.scale, slope) - mx) * inv;
        }
    }
    quantize_produced_row<QB>(q, (const float *) y);
}

// dx = scale * y * (g - sum(g * y)) per row.
__global__ void k_soft_max_back(tview dst, tview grad, tview yv, double scale) {
    __shared__ double dbuf[32];
    int64_t i1, i2, i3;
    row_coords(blockIdx.x, dst, i1, i2, i3);
    const char * g = row_ptr(grad, i1, i2, i3);
    const char * y = row_ptr(yv, i1, i2, i3);
    char * d = row_ptr(dst, i1, i2, i3);
    const int64_t n = dst.ne[0];
    double dot = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        dot += (double) *(const float *) (g + i * grad.nb[0]) * (double) *(const float *) (y + i * yv.nb[0]);
    }
    dot = block_sum(dot, dbuf);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const double gi = *(const float *) (g + i * grad.nb[0]), yi = *(const float *) (y + i * yv.nb[0]);
        *(float *) (d + i * dst.nb[0]) = (float) (scale * yi * (gi - dot));
    }
}

}  // namespace

void ggml_cuda_op_soft_max(ggml_cuda_ctx & ctx, ggml_tensor * dst, const ggml_tensor * product) {
    const ggml_tensor * src = dst->src[0], * mask = dst->src[1];
    const int64_t nr = ggml_nrows(dst);
    if (nr == 0) return;
    SoftmaxArgs args;
    args.scale = ggml_get_op_params_f32(dst, 0);
    args.max_bias = ggml_get_op_params_f32(dst, 1);
    args.has_mask = mask != nullptr;
    const tview mv = mask ? make_view(mask) : unit_view(GGML_TYPE_F32);
    ggml_cuda_launch_quantizing(ctx, dst, product, [&](auto qb, const ActArgs & q) {
        GGML_CUDA_LAUNCH(k_soft_max<decltype(qb)::value>, (unsigned int) nr, kThreads, 0, ctx.stream)(make_view(dst), make_view(src), mv, args, q);
    });
    CUDA_CHECK_LAUNCH();
}

void ggml_cuda_op_soft_max_back(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    const int64_t nr = ggml_nrows(dst);
    if (nr == 0) return;
    GGML_CUDA_LAUNCH(k_soft_max_back, (unsigned int) nr, kThreads, 0, ctx.stream)(make_view(dst), make_view(dst->src[0]), make_view(dst->src[1]),
                                                                     (double) ggml_get_op_params_f32(dst, 0));
    CUDA_CHECK_LAUNCH();
}
