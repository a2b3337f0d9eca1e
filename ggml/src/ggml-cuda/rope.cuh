// rope.cuh - the per-thread work of the rope kernel (rope.cu), host-callable so that it can be
// checked against the CPU's rope on the host (test-cuda-host).
#pragma once

#include "common.cuh"

#include <math.h>

struct RopeArgs {
    int n_dims, neox, has_ff;
    double freq_base, freq_scale, ext_factor, corr_lo, corr_hi, mscale, sin_sign;
};

// The arguments of a ROPE / ROPE_BACK node (inverse: ROPE_BACK's rotation by -theta).
RopeArgs ggml_cuda_rope_args(const ggml_tensor * dst, bool inverse);

// A KV cache the rope's result is also written to (generation's keys: a set_rows of it fused
// with the rope): token i2's values go to row idx[i2] of cache, head i1's at i1 * ne0.
struct RopeCacheStore {
    char * cache;            // nullptr: none
    int64_t cache_nb0, cache_nb1, n_cells;
    int cache_type;
    const char * idx;
    int64_t idx_nb0;
    int idx64;
    int skip_dst;  // the rope's own result is not stored: the queries' rope, fused after it, writes over all of it
};

// The rope's result also as halves for the product that reads it next through a permutation
// (the queries' rope for the scores product without flash attention: its F16 activations, as
// mul_mat.cu's conversion would write them): element (i0, i1, i2, i3) to out[sum i_d * mul[d]].
struct RopeHalves {
    uint16_t * out;  // nullptr: none
    int64_t mul[4];
};

GGML_CUDA_HD void rope_store_half(const RopeHalves & hv, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v) {
    if (hv.out) hv.out[i0 * hv.mul[0] + i1 * hv.mul[1] + i2 * hv.mul[2] + i3 * hv.mul[3]] = f2h(v);
}

// The cache row of token i2 (idx[i2]); -1 out of range, where set_rows drops the row.
GGML_CUDA_HD int64_t rope_cache_row(const RopeCacheStore & st, int64_t i2) {
    const char * ip = st.idx + i2 * st.idx_nb0;
    const int64_t r = st.idx64 ? *(const int64_t *) ip : (int64_t) *(const int32_t *) ip;
    return r >= 0 && r < st.n_cells ? r : -1;
}

// v, the rope's value of element j of row (i1, i2), into the cache as set_rows would put it.
GGML_CUDA_HD void rope_store_cache(const RopeCacheStore & st, int64_t ne0, int64_t j, int64_t i1, int64_t i2, float v) {
    const int64_t r = rope_cache_row(st, i2);
    if (r < 0) return;
    store_f(st.cache + r * st.cache_nb1 + (i1 * ne0 + j) * st.cache_nb0, st.cache_type, v);
}

// Work item t of a rope over n_rows rows: items [0, n_dims/2) of a row rotate a pair, the rest
// copy one of the dims >= n_dims (unless in place).
GGML_CUDA_HD void rope_element(const tview & dst, const tview & src, const int32_t * pos, int64_t pos_nb0, const float * ff,
                               int64_t ff_nb0, const RopeArgs & a, int64_t n_rows, int64_t t, const RopeCacheStore & st = RopeCacheStore{},
                               const RopeHalves & hv = RopeHalves{}) {
    const int n_pairs = a.n_dims / 2;
    const int64_t per_row = n_pairs + (dst.ne[0] - a.n_dims);
    if (t >= per_row * n_rows) return;
    const int64_t r = t / per_row, k = t % per_row;
    int64_t i1, i2, i3;
    row_coords(r, dst, i1, i2, i3);
    const char * x = src.data + i1 * src.nb[1] + i2 * src.nb[2] + i3 * src.nb[3];
    char * y = dst.data + i1 * dst.nb[1] + i2 * dst.nb[2] + i3 * dst.nb[3];
    if (k >= n_pairs) {
        const int64_t j = a.n_dims + (k - n_pairs);
        const float v = load_f(x + j * src.nb[0], src.type);
        if ((x != y || src.nb[0] != dst.nb[0]) && !st.skip_dst) store_f(y + j * dst.nb[0], dst.type, v);
        if (st.cache) rope_store_cache(st, dst.ne[0], j, i1, i2, v);
        rope_store_half(hv, j, i1, i2, i3, v);
        return;
    }
    const int i = (int) k;
    double inv_freq = pow(a.freq_base, -2.0 * i / a.n_dims);
    if (a.has_ff) inv_freq /= (double) *(const float *) ((const char *) ff + i * ff_nb0);
    double factor = a.freq_scale;
    if (a.ext_factor != 0.0) {
        const double yv = (i - a.corr_lo) / fmax(0.001, a.corr_hi - a.corr_lo);
        const double mix = (1.0 - fmin(1.0, fmax(0.0, yv))) * a.ext_factor;
        factor = a.freq_scale * (1.0 - mix) + mix;
    }
    const double p = (double) *(const int32_t *) ((const char *) pos + i2 * pos_nb0);
    const double theta = p * (inv_freq * factor);  // in double, as the CPU: no loss at large positions
    const float c = (float) (cos(theta) * a.mscale), s = (float) (sin(theta) * a.mscale * a.sin_sign);
    const int64_t j0 = a.neox ? i : 2 * i, j1 = a.neox ? i + n_pairs : 2 * i + 1;
    const float x0 = load_f(x + j0 * src.nb[0], src.type), x1 = load_f(x + j1 * src.nb[0], src.type);
    const float y0 = x0 * c - x1 * s, y1 = x0 * s + x1 * c;
    if (!st.skip_dst) {
        store_f(y + j0 * dst.nb[0], dst.type, y0);
        store_f(y + j1 * dst.nb[0], dst.type, y1);
    }
    if (st.cache) {  // the F32 values just stored, converted as set_rows converts them
        rope_store_cache(st, dst.ne[0], j0, i1, i2, y0);
        rope_store_cache(st, dst.ne[0], j1, i1, i2, y1);
    }
    rope_store_half(hv, j0, i1, i2, i3, y0);
    rope_store_half(hv, j1, i1, i2, i3, y1);
}
