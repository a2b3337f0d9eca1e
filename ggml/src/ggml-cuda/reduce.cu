// reduce.cu - reductions: sum (all elements), sum_rows, mean, argmax (over dim 0), and the
// cross-entropy loss with its gradient. One block per row; sums in double, as the CPU's, so
// long rows (a vocabulary of logits) lose nothing to float accumulation.
#include "ops.cuh"

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ double block_sum_d(double v) {
    __shared__ double buf[32];
    return block_sum(v, buf);
}

// dst[0, row] = sum (or mean) of the row.
__global__ void k_sum_rows(tview dst, tview src, int mean) {
    int64_t i1, i2, i3;
    row_coords(blockIdx.x, src, i1, i2, i3);
    const char * x = row_ptr(src, i1, i2, i3);
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < src.ne[0]; i += blockDim.x) s += load_f(x + i * src.nb[0], src.type);
    s = block_sum_d(s);
    if (threadIdx.x == 0) {
        store_f(row_ptr(dst, i1, i2, i3), dst.type, (float) (mean ? s / (double) src.ne[0] : s));
    }
}

// Everything in one block: a graph's sum is a loss or a small tensor.
__global__ void k_sum_all(tview dst, tview src, int64_t n) {
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        int64_t i0, i1, i2, i3;
        unravel(i, src, i0, i1, i2, i3);
        s += load_f(elem_ptr(src, i0, i1, i2, i3), src.type);
    }
    s = block_sum_d(s);
    if (threadIdx.x == 0) store_f(dst.data, dst.type, (float) s);
}

// The first index of the largest value of each row (rows of a matrix), as the CPU.
__global__ void k_argmax(tview dst, tview src) {
    __shared__ float sv[32];
    __shared__ int32_t si[32];
    const int64_t r = blockIdx.x;
    const char * x = src.data + r * src.nb[1];
    float best = -INFINITY;
    int32_t best_i = INT32_MAX;
    for (int64_t i = threadIdx.x; i < src.ne[0]; i += blockDim.x) {
        const float v = load_f(x + i * src.nb[0], src.type);
        if (v > best) { best = v; best_i = (int32_t) i; }  // increasing i: keeps the first
    }
    for (int o = WARP / 2; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, best, o);
        const int32_t oi = __shfl_xor_sync(0xffffffffu, best_i, o);
        if (ov > best || (ov == best && oi < best_i)) { best = ov; best_i = oi; }
    }
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    if (lane == 0) { sv[warp] = best; si[warp] = best_i; }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < (int) (blockDim.x / WARP); w++) {
            if (sv[w] > best || (sv[w] == best && si[w] < best_i)) { best = sv[w]; best_i = si[w]; }
        }
        *(int32_t *) (dst.data + r * dst.nb[0]) = best_i == INT32_MAX ? 0 : best_i;  // all -inf / NaN: 0, as the CPU
    }
}

// max and sum of exp(a - max) of a row (every thread gets them).
__device__ void row_softmax_norm(const char * a, int64_t nb0, int64_t nc, float & max, double & sum_exp) {
    __shared__ float fbuf[32];
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < nc; c += blockDim.x) m = fmaxf(m, *(const float *) (a + c * nb0));
    max = block_max(m, fbuf);
    double s = 0.0;
    for (int64_t c = threadIdx.x; c < nc; c += blockDim.x) s += (double) expf(*(const float *) (a + c * nb0) - max);
    sum_exp = block_sum_d(s);
}

// row_loss[r] = -sum_c b[c] log_softmax(a)[c] (terms with b[c] = 0 count as 0).
__global__ void k_cross_entropy_rows(double * row_loss, tview a, tview b) {
    int64_t i1, i2, i3;
    row_coords(blockIdx.x, a, i1, i2, i3);
    const char * ar = row_ptr(a, i1, i2, i3), * br = row_ptr(b, i1, i2, i3);
    float max;
    double sum_exp;
    row_softmax_norm(ar, a.nb[0], a.ne[0], max, sum_exp);
    const double log_norm = (double) max + log(sum_exp);
    double loss = 0.0;
    for (int64_t c = threadIdx.x; c < a.ne[0]; c += blockDim.x) {
        const float t = *(const float *) (br + c * b.nb[0]);
        if (t != 0.0f) loss -= (double) t * ((double) *(const float *) (ar + c * a.nb[0]) - log_norm);
    }
    loss = block_sum_d(loss);
    if (threadIdx.x == 0) row_loss[blockIdx.x] = loss;
}

__global__ void k_cross_entropy_total(float * dst, const double * row_loss, int64_t nr) {
    double s = 0.0;
    for (int64_t r = threadIdx.x; r < nr; r += blockDim.x) s += row_loss[r];
    s = block_sum_d(s);
    if (threadIdx.x == 0) *dst = (float) (nr > 0 ? s / (double) nr : 0.0);
}

// dst = (softmax(a) * sum(b) - b) * grad / nr per row.
__global__ void k_cross_entropy_back(tview dst, const float * grad, tview a, tview b, int64_t nr) {
    int64_t i1, i2, i3;
    row_coords(blockIdx.x, a, i1, i2, i3);
    const char * ar = row_ptr(a, i1, i2, i3), * br = row_ptr(b, i1, i2, i3);
    char * dr = row_ptr(dst, i1, i2, i3);
    const int64_t nc = a.ne[0];
    double mass = 0.0;
    for (int64_t c = threadIdx.x; c < nc; c += blockDim.x) mass += *(const float *) (br + c * b.nb[0]);
    mass = block_sum_d(mass);
    if (mass == 0.0) {
        for (int64_t c = threadIdx.x; c < nc; c += blockDim.x) *(float *) (dr + c * dst.nb[0]) = 0.0f;
        return;
    }
    float max;
    double sum_exp;
    row_softmax_norm(ar, a.nb[0], nc, max, sum_exp);
    const double k = (double) *grad / (double) nr, inv_sum = mass / sum_exp;
    for (int64_t c = threadIdx.x; c < nc; c += blockDim.x) {
        const double e = (double) expf(*(const float *) (ar + c * a.nb[0]) - max);
        *(float *) (dr + c * dst.nb[0]) = (float) ((e * inv_sum - (double) *(const float *) (br + c * b.nb[0])) * k);
    }
}

}  // namespace

void ggml_cuda_op_sum(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    GGML_CUDA_LAUNCH(k_sum_all, 1, 1024, 0, ctx.stream)(make_view(dst), make_view(dst->src[0]), ggml_nelements(dst->src[0]));
    CUDA_CHECK_LAUNCH();
}

static void row_reduce(ggml_cuda_ctx & ctx, ggml_tensor * dst, int mean) {
    const int64_t nr = ggml_nrows(dst->src[0]);
    if (nr == 0) return;
    GGML_CUDA_LAUNCH(k_sum_rows, (unsigned int) nr, kThreads, 0, ctx.stream)(make_view(dst), make_view(dst->src[0]), mean);
    CUDA_CHECK_LAUNCH();
}

void ggml_cuda_op_sum_rows(ggml_cuda_ctx & ctx, ggml_tensor * dst) { row_reduce(ctx, dst, 0); }
void ggml_cuda_op_mean(ggml_cuda_ctx & ctx, ggml_tensor * dst) { row_reduce(ctx, dst, 1); }

void ggml_cuda_op_argmax(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    const int64_t nr = dst->src[0]->ne[1];
    if (nr == 0) return;
    GGML_CUDA_LAUNCH(k_argmax, (unsigned int) nr, kThreads, 0, ctx.stream)(make_view(dst), make_view(dst->src[0]));
    CUDA_CHECK_LAUNCH();
}

void ggml_cuda_op_cross_entropy_loss(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const int64_t nr = ggml_nrows(a);
    double * row_loss = (double *) ctx.scratch((size_t) std::max<int64_t>(nr, 1) * sizeof(double));
    if (nr > 0) {
        GGML_CUDA_LAUNCH(k_cross_entropy_rows, (unsigned int) nr, kThreads, 0, ctx.stream)(row_loss, make_view(a), make_view(dst->src[1]));
        CUDA_CHECK_LAUNCH();
    }
    GGML_CUDA_LAUNCH(k_cross_entropy_total, 1, 1024, 0, ctx.stream)((float *) dst->data, row_loss, nr);
    CUDA_CHECK_LAUNCH();
}

void ggml_cuda_op_cross_entropy_loss_back(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[1];
    const int64_t nr = ggml_nrows(a);
    if (nr == 0) return;
    GGML_CUDA_LAUNCH(k_cross_entropy_back, (unsigned int) nr, kThreads, 0, ctx.stream)(make_view(dst), (const float *) dst->src[0]->data,
                                                                          make_view(a), make_view(dst->src[2]), nr);
    CUDA_CHECK_LAUNCH();
}
