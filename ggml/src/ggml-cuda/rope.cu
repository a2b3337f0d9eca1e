// rope.cu - rotary position embedding with YaRN (ggml_rope_ext) and its gradient rope_back (the
// inverse rotation), the semantics of cpu/ops-rope.cpp: pair i of the first n_dims dimensions
// turns by theta_i = p * freq_base^(-2i/n_dims) / freq_factor[i], scaled and ramped by YaRN;
// NORMAL mode pairs (x[2i], x[2i+1]), NEOX (x[i], x[i + n_dims/2]); dims >= n_dims are copied.
// Angles in double, as the CPU's (no float loss at large positions). F32, F16, BF16, any strides,
// in place or not; one thread per pair.
#include "ops.cuh"
#include "quant.cuh"
#include "rope.cuh"

namespace {

// YaRN: the dimension (in [0, n_dims)) whose wavelength makes n_rot turns over n_ctx_orig tokens.
double yarn_corr_dim(int n_dims, int n_ctx_orig, double n_rot, double base) {
    return n_dims * log((double) n_ctx_orig / (n_rot * 2.0 * M_PI)) / (2.0 * log(base));
}

// Work riding along a rope whose result is stored into the keys' cache (generation's keys):
// the values' set_rows by the same index (copy_src's rows of F32 into a plain float cache: plane
// i2's row i1 to row idx[i1] of the cache's plane i2; a transposed cache is one value per row, a
// plane per dimension), and the queries' rope (same positions and parameters). Items in order: the
// keys' rope [0, n_rope), the values' elements [.., + n_copy), the queries' rope [.., + n_rope2).
struct RopeRide {
    int64_t n_rope, n_copy, n_rope2;
    tview copy_src;
    char * copy_cache;
    int64_t copy_nb0, copy_nb1, copy_nb2;
    int copy_type;
    tview dst2, src2;
    int64_t n_rows2;
    RopeHalves halves2;  // the queries' rope also as F16 activations of the product after it
};

__global__ void k_rope(tview dst, tview src, const int32_t * pos, int64_t pos_nb0, const float * ff, int64_t ff_nb0,
                       RopeArgs a, int64_t n_rows, RopeCacheStore st, RopeRide ride) {
    int64_t t = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (t < ride.n_rope) {
        rope_element(dst, src, pos, pos_nb0, ff, ff_nb0, a, n_rows, t, st);
        return;
    }
    t -= ride.n_rope;
    if (t < ride.n_copy) {
        int64_t i0, i1, i2, i3;
        unravel(t, ride.copy_src, i0, i1, i2, i3);
        const int64_t r = rope_cache_row(st, i1);
        if (r < 0) return;
        store_f(ride.copy_cache + r * ride.copy_nb1 + i2 * ride.copy_nb2 + i0 * ride.copy_nb0, ride.copy_type,
                *(const float *) elem_ptr(ride.copy_src, i0, i1, i2, 0));
        return;
    }
    t -= ride.n_copy;
    if (t < ride.n_rope2) rope_element(ride.dst2, ride.src2, pos, pos_nb0, ff, ff_nb0, a, ride.n_rows2, t, RopeCacheStore{}, ride.halves2);
}

// Work items of a rope node's rotation (pairs, and the dims past n_dims).
int64_t rope_items(const ggml_tensor * dst) {
    const int n_dims = ggml_get_op_params_i32(dst, 1);
    return (n_dims / 2 + (dst->ne[0] - n_dims)) * ggml_nrows(dst);
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
                 RopeRide ride = RopeRide{}) {
    const ggml_tensor * src = dst->src[0], * pos = dst->src[1], * ff = dst->src[2];
    const RopeArgs a = ggml_cuda_rope_args(dst, inverse);
    ride.n_rope = rope_items(dst);
    const int64_t n = ride.n_rope + ride.n_copy + ride.n_rope2;
    if (n == 0) return;
    GGML_CUDA_LAUNCH(k_rope, n_blocks(n), 256, 0, ctx.stream)(make_view(dst), make_view(src), (const int32_t *) pos->data, (int64_t) pos->nb[0],
                                                ff ? (const float *) ff->data : nullptr, ff ? (int64_t) ff->nb[0] : 0, a, ggml_nrows(dst), st,
                                                ride);
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

// A set_rows of F32 rows [ne0, n, ne2] by the same index into a plain float cache (the values
// after the keys; ne2 > 1: a transposed cache, [1, n_tokens, n_embd_v]): it joins the rope's launch.
bool ggml_cuda_set_rows_joins_rope(const ggml_tensor * rope, const ggml_tensor * set_rows_k, const ggml_tensor * set_rows_v) {
    const ggml_tensor * rows = set_rows_v->src[0];
    if (set_rows_v->op != GGML_OP_SET_ROWS || set_rows_v->src[1] != set_rows_k->src[1] || !rows || rows->type != GGML_TYPE_F32) return false;
    if (rows->nb[0] != sizeof(float) || rows->ne[1] != set_rows_k->src[0]->ne[1] || rows->ne[3] != 1 || ggml_is_empty(rows)) return false;
    if (!is_float_type(set_rows_v->type) || set_rows_v->ne[0] != rows->ne[0] || set_rows_v->ne[1] != set_rows_k->ne[1] ||
        set_rows_v->ne[2] != rows->ne[2] || set_rows_v->ne[3] != 1) return false;
    // run side by side: nothing one of them writes may be read or written by the other
    return !ggml_cuda_overlaps(rows, set_rows_k) && !ggml_cuda_overlaps(rows, rope) && !ggml_cuda_overlaps(set_rows_v, set_rows_k) &&
           !ggml_cuda_overlaps(set_rows_v, rope) && !ggml_cuda_overlaps(set_rows_v, rope->src[0]);
}

// The bytes of y lie within x's.
static bool contains(const ggml_tensor * x, const ggml_tensor * y) {
    const char * xl = (const char *) x->data, * yl = (const char *) y->data;
    return xl <= yl && yl + ggml_cuda_span(y) <= xl + ggml_cuda_span(x);
}

// Another rope (the queries') with the same positions, factors and parameters, touching nothing
// the fused nodes write: it joins the launch. Its result may take the keys' rope's memory (the
// graph allocator reuses it once the keys are stored): covering all of it, the launch then leaves
// the keys' rope result unwritten, as the queries' rope would overwrite it.
bool ggml_cuda_rope_joins_rope(const ggml_tensor * rope, const ggml_tensor * set_rows_k, const ggml_tensor * set_rows_v,
                               const ggml_tensor * rope2) {
    if (rope2->op != GGML_OP_ROPE || rope2 == rope || rope2->src[1] != rope->src[1] || rope2->src[2] != rope->src[2]) return false;
    if (memcmp(rope2->op_params, rope->op_params, sizeof(rope->op_params)) != 0 || !ggml_cuda_rope_supported(rope2)) return false;
    if (ggml_cuda_overlaps(rope2, rope) && !(ggml_is_contiguous(rope2) && contains(rope2, rope))) return false;
    for (const ggml_tensor * w : { rope, set_rows_k, set_rows_v }) {  // what the fused kernel writes
        if (w && ((w != rope && ggml_cuda_overlaps(rope2, w)) || ggml_cuda_overlaps(rope2->src[0], w))) return false;
    }
    return !ggml_cuda_overlaps(rope2, rope->src[0]) && !(set_rows_v && ggml_cuda_overlaps(rope2, set_rows_v->src[0]));
}

// The multipliers that put element (i0, i1, i2, i3) of rope (F32, contiguous) where the F16 copy
// of b, a permutation of all of it (ggml_permute), has it: b's element order, b's dims in rope's
// order. False when b is not such a view.
static bool permuted_halves(const ggml_tensor * rope, const ggml_tensor * b, int64_t mul[4]) {
    if (b->data != rope->data || b->type != GGML_TYPE_F32 || ggml_nelements(b) != ggml_nelements(rope) || !ggml_is_contiguous(rope)) return false;
    bool used[4] = {};
    for (int d = 0; d < 4; d++) {
        mul[d] = 0;
        if (rope->ne[d] == 1) continue;  // its index is always 0
        int64_t m = 1;
        bool found = false;
        for (int k = 0; k < 4 && !found; m *= b->ne[k], k++) {
            if (!used[k] && b->ne[k] == rope->ne[d] && b->nb[k] == rope->nb[d]) {
                used[k] = found = true;
                mul[d] = m;
            }
        }
        if (!found) return false;
    }
    for (int k = 0; k < 4; k++) {  // every dimension of b that counts is one of rope's
        if (b->ne[k] > 1 && !used[k]) return false;
    }
    return true;
}

void ggml_cuda_op_rope_set_rows(ggml_cuda_ctx & ctx, ggml_tensor * rope_node, ggml_tensor * set_rows, ggml_tensor * set_rows_v,
                                ggml_tensor * rope2, const ggml_tensor * product2) {
    const ggml_tensor * idx = set_rows->src[1];
    RopeCacheStore st = {};
    st.cache = (char *) set_rows->data;
    st.cache_nb0 = (int64_t) set_rows->nb[0];
    st.cache_nb1 = (int64_t) set_rows->nb[1];
    st.n_cells = set_rows->ne[1];
    st.cache_type = (int) set_rows->type;
    st.idx = (const char *) idx->data;
    st.idx_nb0 = (int64_t) idx->nb[0];
    st.idx64 = idx->type == GGML_TYPE_I64;
    RopeRide ride = {};
    if (set_rows_v) {
        const ggml_tensor * rows = set_rows_v->src[0];
        ride.n_copy = ggml_nelements(rows);
        ride.copy_src = make_view(rows);
        ride.copy_cache = (char *) set_rows_v->data;
        ride.copy_nb0 = (int64_t) set_rows_v->nb[0];
        ride.copy_nb1 = (int64_t) set_rows_v->nb[1];
        ride.copy_nb2 = (int64_t) set_rows_v->nb[2];
        ride.copy_type = (int) set_rows_v->type;
    }
    st.skip_dst = rope2 && ggml_cuda_overlaps(rope2, rope_node);  // then rope2 covers it (ggml_cuda_rope_joins_rope)
    if (rope2) {
        ride.n_rope2 = rope_items(rope2);
        ride.dst2 = make_view(rope2);
        ride.src2 = make_view(rope2->src[0]);
        ride.n_rows2 = ggml_nrows(rope2);
    }
    // the queries' F16 copy for the scores product (cuBLAS) that reads them permuted
    const ggml_tensor * b2 = product2 ? product2->src[1] : nullptr;
    const bool halves = rope2 && b2 && ggml_cuda_mul_mat_act_form(product2) == kActF16 && permuted_halves(rope2, b2, ride.halves2.mul);
    if (halves) ride.halves2.out = (uint16_t *) ggml_cuda_act_args(ctx, b2, kActF16).qs;
    rope(ctx, rope_node, false, st, ride);
    if (halves) ggml_cuda_act_produced(ctx, b2, kActF16);
}
