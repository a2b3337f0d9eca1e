// rope.cu - rotary position embedding with YaRN (ggml_rope_ext) and its gradient rope_back (the
// inverse rotation), the semantics of cpu/ops-rope.cpp: pair i of the first n_dims dimensions
// turns by theta_i = p * freq_base^(-2i/n_dims) / freq_factor[i], scaled and ramped by YaRN;
// NORMAL mode pairs (x[2i], x[2i+1]), NEOX (x[i], x[i + n_dims/2]); dims >= n_dims are copied.
// Angles in double, as the CPU's (no float loss at large positions). F32, F16, BF16, any strides,
// in place or not; one thread per pair.
#include "ops.cuh"
#include "rope.cuh"

namespace {

// YaRN: the dimension (in [0, n_dims)) whose wavelength makes n_rot turns over n_ctx_orig tokens.
double yarn_corr_dim(int n_dims, int n_ctx_orig, double n_rot, double base) {
    return n_dims * log((double) n_ctx_orig / (n_rot * 2.0 * M_PI)) / (2.0 * log(base));
}

// A second set_rows by the same index riding along (the values, after the keys): rows of src
// (F32, contiguous) into a plain float cache.
struct RowsCopy {
    tview src;    // data nullptr: none
    char * cache;
    int64_t cache_nb0, cache_nb1;
    int cache_type;
};

// Items [0, n_rope): the rope's (rope_element); then one per element of copy.src.
__global__ void k_rope(tview dst, tview src, const int32_t * pos, int64_t pos_nb0, const float * ff, int64_t ff_nb0,
                       RopeArgs a, int64_t n_rows, RopeCacheStore st, int64_t n_rope, RowsCopy copy) {
    const int64_t t = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n_rope) {
        rope_element(dst, src, pos, pos_nb0, ff, ff_nb0, a, n_rows, t, st);
        return;
    }
    if (!copy.src.data || t - n_rope >= copy.src.ne[0] * copy.src.ne[1]) return;
    int64_t i0, i1, i2, i3;
    unravel(t - n_rope, copy.src, i0, i1, i2, i3);
    const char * ip = st.idx + i1 * st.idx_nb0;
    const int64_t r = st.idx64 ? *(const int64_t *) ip : (int64_t) *(const int32_t *) ip;
    if (r < 0 || r >= st.n_cells) return;
    store_f(copy.cache + r * copy.cache_nb1 + i0 * copy.cache_nb0, copy.cache_type, *(const float *) elem_ptr(copy.src, i0, i1, 0, 0));
}

}  // namespace

bool ggml_cuda_rope_supported(const ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0], * pos = dst->src[1], * ff = dst->src[2];
    const int n_dims = ggml_get_op_params_i32(dst, 1), mode = ggml_get_op_params_i32(dst, 2);
    return src && pos && is_float_type(dst->type) && src->type == dst->type && ggml_are_same_shape(src, dst) &&
           pos->type == GGML_TYPE_I32 && pos->ne[0] >= dst->ne[2] && (mode & ~GGML_ROPE_TYPE_NEOX) == 0 &&
           n_dims >= 0 && n_dims % 2 == 0 && n_dims <= dst->ne[0] && (!ff || (ff->type == GGML_TYPE_F32 && ff->ne[0] >= n_dims / 2));
}

RopeArgs ggml_cuda_rope_args(const ggml_tensor * dst, bool inverse) {
    const ggml_tensor * ff = dst->src[2];
    RopeArgs a;
    a.n_dims = ggml_get_op_params_i32(dst, 1);
    a.neox = (ggml_get_op_params_i32(dst, 2) & GGML_ROPE_TYPE_NEOX) != 0;
    const int n_ctx_orig = ggml_get_op_params_i32(dst, 4);
    a.freq_base = ggml_get_op_params_f32(dst, 5);
    a.freq_scale = ggml_get_op_params_f32(dst, 6);
    a.ext_factor = ggml_get_op_params_f32(dst, 7);
    const float attn_factor = ggml_get_op_params_f32(dst, 8);
    const float beta_fast = ggml_get_op_params_f32(dst, 9), beta_slow = ggml_get_op_params_f32(dst, 10);
    a.has_ff = ff != nullptr;
    a.corr_lo = a.corr_hi = 0.0;
    if (a.ext_factor != 0.0) {
        const double start = floor(yarn_corr_dim(a.n_dims, n_ctx_orig, beta_fast, a.freq_base));
        const double end = ceil(yarn_corr_dim(a.n_dims, n_ctx_orig, beta_slow, a.freq_base));
        a.corr_lo = 0.0 > start ? 0.0 : start;
        a.corr_hi = (double) (a.n_dims - 1) < end ? (double) (a.n_dims - 1) : end;
    }
    a.mscale = attn_factor;
    if (a.ext_factor != 0.0) a.mscale *= 1.0 + 0.1 * log(1.0 / a.freq_scale);
    a.sin_sign = inverse ? -1.0 : 1.0;
    return a;
}

static void rope(ggml_cuda_ctx & ctx, ggml_tensor * dst, bool inverse, const RopeCacheStore & st = RopeCacheStore{},
                 const RowsCopy & copy = RowsCopy{}) {
    const ggml_tensor * src = dst->src[0], * pos = dst->src[1], * ff = dst->src[2];
    const RopeArgs a = ggml_cuda_rope_args(dst, inverse);
    const int64_t n_rows = ggml_nrows(dst);
    const int64_t n_rope = (a.n_dims / 2 + (dst->ne[0] - a.n_dims)) * n_rows;
    const int64_t n = n_rope + (copy.src.data ? copy.src.ne[0] * copy.src.ne[1] : 0);
    if (n == 0) return;
    GGML_CUDA_LAUNCH(k_rope, n_blocks(n), 256, 0, ctx.stream)(make_view(dst), make_view(src), (const int32_t *) pos->data, (int64_t) pos->nb[0],
                                                ff ? (const float *) ff->data : nullptr, ff ? (int64_t) ff->nb[0] : 0, a, n_rows, st,
                                                n_rope, copy);
    CUDA_CHECK_LAUNCH();
}

void ggml_cuda_op_rope(ggml_cuda_ctx & ctx, ggml_tensor * dst) { rope(ctx, dst, false); }
void ggml_cuda_op_rope_back(ggml_cuda_ctx & ctx, ggml_tensor * dst) { rope(ctx, dst, true); }

// set_rows writes the rope's result, as [ne0 * ne1, ne2] rows, into a plain float cache by a
// 1-D index: the keys of a layer stored as they are rotated.
bool ggml_cuda_rope_set_rows_fusable(const ggml_tensor * rope, const ggml_tensor * set_rows) {
    const ggml_tensor * rows = set_rows->src[0], * idx = set_rows->src[1];
    if (rope->op != GGML_OP_ROPE || set_rows->op != GGML_OP_SET_ROWS || !rows || !idx) return false;
    if (rope->type != GGML_TYPE_F32 || !ggml_is_contiguous(rope) || rope->ne[3] != 1 || !ggml_cuda_set_rows_supported(set_rows)) return false;
    if (rows->data != rope->data || (rows != rope && rows->view_src != rope) || !ggml_is_contiguous(rows)) return false;
    if (rows->ne[0] != rope->ne[0] * rope->ne[1] || rows->ne[1] != rope->ne[2] || rows->ne[2] != 1 || rows->ne[3] != 1) return false;
    return !ggml_is_quantized(set_rows->type) && set_rows->ne[0] == rows->ne[0] && set_rows->ne[2] == 1 && set_rows->ne[3] == 1 &&
           idx->ne[0] == rows->ne[1] && idx->ne[1] == 1 && idx->ne[2] == 1;
}

// A set_rows of F32 rows [ne0, n] by the same index into a plain float cache (the values after
// the keys): it joins the rope's launch.
// The bytes of x and y overlap.
static bool overlaps(const ggml_tensor * x, const ggml_tensor * y) {
    const char * xl = (const char *) x->data, * yl = (const char *) y->data;
    return xl < yl + ggml_cuda_span(y) && yl < xl + ggml_cuda_span(x);
}

bool ggml_cuda_set_rows_joins_rope(const ggml_tensor * rope, const ggml_tensor * set_rows_k, const ggml_tensor * set_rows_v) {
    const ggml_tensor * rows = set_rows_v->src[0];
    if (set_rows_v->op != GGML_OP_SET_ROWS || set_rows_v->src[1] != set_rows_k->src[1] || !rows || rows->type != GGML_TYPE_F32) return false;
    if (rows->nb[0] != sizeof(float) || rows->ne[1] != set_rows_k->src[0]->ne[1] || rows->ne[2] != 1 || rows->ne[3] != 1 || ggml_is_empty(rows)) return false;
    if (!is_float_type(set_rows_v->type) || set_rows_v->ne[0] != rows->ne[0] || set_rows_v->ne[1] != set_rows_k->ne[1]) return false;
    // run side by side: nothing one of them writes may be read or written by the other
    return !overlaps(rows, set_rows_k) && !overlaps(rows, rope) && !overlaps(set_rows_v, set_rows_k) && !overlaps(set_rows_v, rope) &&
           !overlaps(set_rows_v, rope->src[0]);
}

void ggml_cuda_op_rope_set_rows(ggml_cuda_ctx & ctx, ggml_tensor * rope_node, ggml_tensor * set_rows, ggml_tensor * set_rows_v) {
    const ggml_tensor * idx = set_rows->src[1];
    RopeCacheStore st;
    st.cache = (char *) set_rows->data;
    st.cache_nb0 = (int64_t) set_rows->nb[0];
    st.cache_nb1 = (int64_t) set_rows->nb[1];
    st.n_cells = set_rows->ne[1];
    st.cache_type = (int) set_rows->type;
    st.idx = (const char *) idx->data;
    st.idx_nb0 = (int64_t) idx->nb[0];
    st.idx64 = idx->type == GGML_TYPE_I64;
    RowsCopy copy = {};
    if (set_rows_v) {
        copy.src = make_view(set_rows_v->src[0]);
        copy.cache = (char *) set_rows_v->data;
        copy.cache_nb0 = (int64_t) set_rows_v->nb[0];
        copy.cache_nb1 = (int64_t) set_rows_v->nb[1];
        copy.cache_type = (int) set_rows_v->type;
    }
    rope(ctx, rope_node, false, st, copy);
}
