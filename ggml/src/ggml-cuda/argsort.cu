// argsort.cu - argsort of each row (a mixture's router: the experts by probability), as the CPU's
// stable sort: one block per row, a bitonic sort in shared memory over the row padded to a power
// of two. Elements compare by value, then by index (the earlier first), a total order, so the
// result is the stable sort's whatever the order of the network's exchanges.
#include "ops.cuh"

namespace {

constexpr int kMaxCols = 1024;  // one thread per padded element

// Whether element (va, ia) goes before (vb, ib): ascending or descending values, ties by index.
// Padding (index >= n) goes last.
__device__ __forceinline__ bool before(float va, int32_t ia, float vb, int32_t ib, int32_t n, int desc) {
    if (ia >= n || ib >= n) return ia < ib;
    if (va != vb) return desc ? va > vb : va < vb;
    return ia < ib;
}

__global__ void k_argsort(tview dst, tview src, int npad, int desc) {
    GGML_CUDA_DYN_SMEM(char, smem);
    float * v = (float *) smem;
    int32_t * idx = (int32_t *) (v + npad);
    int64_t i1, i2, i3;
    row_coords(blockIdx.x, src, i1, i2, i3);
    const char * x = row_ptr(src, i1, i2, i3);
    const int32_t n = (int32_t) src.ne[0];
    const int t = threadIdx.x;
    v[t] = t < n ? load_f(x + (int64_t) t * src.nb[0], src.type) : 0.0f;
    idx[t] = t;
    __syncthreads();
    for (int k = 2; k <= npad; k <<= 1) {
        for (int j = k >> 1; j > 0; j >>= 1) {
            const int p = t ^ j;
            if (p > t) {
                // this pair ascends in the network's order where (t & k) == 0
                const bool up = (t & k) == 0;
                const bool swap = up ? before(v[p], idx[p], v[t], idx[t], n, desc) : before(v[t], idx[t], v[p], idx[p], n, desc);
                if (swap) {
                    const float tv = v[t];
                    v[t] = v[p];
                    v[p] = tv;
                    const int32_t ti = idx[t];
                    idx[t] = idx[p];
                    idx[p] = ti;
                }
            }
            __syncthreads();
        }
    }
    char * y = row_ptr(dst, i1, i2, i3);
    if (t < n) *(int32_t *) (y + (int64_t) t * dst.nb[0]) = idx[t];
}

int padded(int64_t n) {
    int p = 1;
    while (p < n) p <<= 1;
    return p;
}

}  // namespace

bool ggml_cuda_argsort_supported(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    return a && a->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_I32 && a->ne[0] >= 1 && a->ne[0] <= kMaxCols &&
           ggml_are_same_shape(a, dst) && ggml_nrows(a) <= INT32_MAX;
}

void ggml_cuda_op_argsort(ggml_cuda_ctx & ctx, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const int64_t nr = ggml_nrows(a);
    if (nr == 0) return;
    const int npad = std::max(padded(a->ne[0]), WARP);
    const int desc = ggml_get_op_params_i32(dst, 0) == GGML_SORT_ORDER_DESC;
    const size_t smem = (size_t) npad * (sizeof(float) + sizeof(int32_t));
    GGML_CUDA_LAUNCH(k_argsort, (unsigned int) nr, npad, smem, ctx.stream)(make_view(dst), make_view(a), npad, desc);
    CUDA_CHECK_LAUNCH();
}
