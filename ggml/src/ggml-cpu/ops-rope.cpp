// ops-rope.cpp - rotary position embedding (ggml_rope_ext semantics, with YaRN).
//
// src0 [head_dim, n_head, n_tokens, ne3] (F32, F16 or BF16; dst has its type), src1 I32 positions
// [n_tokens], src2 optional F32 frequency factors [n_dims/2]. For the token at position p, pair
// i in [0, n_dims/2) is rotated by theta_i:
//   theta_extrap = p * freq_base^(-2i/n_dims) / freq_factor[i]
//   theta_interp = freq_scale * theta_extrap
//   theta        = theta_interp                                          (ext_factor == 0)
//                = theta_interp * (1 - mix_i) + theta_extrap * mix_i       (YaRN)
//   with mix_i = ext_factor * (1 - clamp((i - lo) / max(0.001, hi - lo), 0, 1)), [lo, hi] the
//   YaRN correction dims (from beta_fast, beta_slow, n_ctx_orig), and the rotation scaled by
//   mscale = attn_factor (* (1 + 0.1 ln(1/freq_scale)) with YaRN).
// NORMAL mode rotates (x[2i], x[2i+1]), NEOX mode (x[i], x[i + n_dims/2]); dims >= n_dims are
// copied. Angles are computed in double (exact powers, no running product, no float loss at
// large positions) once per token into a cos/sin cache, then applied to every head.
// rope_back (the gradient) applies the inverse rotation, -theta, with the same mscale: the
// same code with the sine negated.
#include "cpu-ops.h"

#include <math.h>
#include <string.h>

namespace {

constexpr int kMaxRopeDims = 4096;  // bound on n_dims: the per-thread caches live on the stack

struct RopeParams {
    int n_dims, mode, n_ctx_orig;
    float freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow;
};

RopeParams read_rope_params(const ggml_tensor * dst) {
    RopeParams p;
    p.n_dims      = ggml_get_op_params_i32(dst, 1);
    p.mode        = ggml_get_op_params_i32(dst, 2);
    p.n_ctx_orig  = ggml_get_op_params_i32(dst, 4);
    p.freq_base   = ggml_get_op_params_f32(dst, 5);
    p.freq_scale  = ggml_get_op_params_f32(dst, 6);
    p.ext_factor  = ggml_get_op_params_f32(dst, 7);
    p.attn_factor = ggml_get_op_params_f32(dst, 8);
    p.beta_fast   = ggml_get_op_params_f32(dst, 9);
    p.beta_slow   = ggml_get_op_params_f32(dst, 10);
    return p;
}

// YaRN: the dimension (in [0, n_dims)) whose wavelength makes n_rot turns over n_ctx_orig tokens.
double yarn_corr_dim(int n_dims, int n_ctx_orig, double n_rot, double base) {
    return n_dims * log((double) n_ctx_orig / (n_rot * 2.0 * M_PI)) / (2.0 * log(base));
}

// theta_i = p * angle_per_pos[i] for every pair i; fills angle_per_pos[0, n_dims/2).
void rope_angle_per_position(const RopeParams & rp, const ggml_tensor * freq_factors, double * angle_per_pos) {
    const int n_pairs = rp.n_dims / 2;
    double corr_lo = 0.0, corr_hi = 0.0;
    if (rp.ext_factor != 0.0f) {
        const double start = floor(yarn_corr_dim(rp.n_dims, rp.n_ctx_orig, rp.beta_fast, rp.freq_base));
        const double end   = ceil (yarn_corr_dim(rp.n_dims, rp.n_ctx_orig, rp.beta_slow, rp.freq_base));
        corr_lo = 0.0 > start ? 0.0 : start;
        corr_hi = (double) (rp.n_dims - 1) < end ? (double) (rp.n_dims - 1) : end;
    }
    for (int i = 0; i < n_pairs; i++) {
        double inv_freq = pow((double) rp.freq_base, -2.0 * i / rp.n_dims);
        if (freq_factors) {
            inv_freq /= (double) *(const float *) ((const char *) freq_factors->data + i * freq_factors->nb[0]);
        }
        double factor = rp.freq_scale;  // theta / theta_extrap
        if (rp.ext_factor != 0.0f) {
            const double y = (i - corr_lo) / fmax(0.001, corr_hi - corr_lo);
            const double ramp = 1.0 - fmin(1.0, fmax(0.0, y));
            const double mix = ramp * rp.ext_factor;
            factor = rp.freq_scale * (1.0 - mix) + mix;
        }
        angle_per_pos[i] = inv_freq * factor;
    }
}

// Per thread, the angles of the last parameters and the cos/sin of the last position: the
// 2 x n_layer rope nodes of a generated token share them (pow, cos and sin in double cost ~3 us a
// node). Keyed by the parameters and the frequency factors' values, so a cached value is the
// one that would be computed.
struct RopeCache {
    bool valid = false;
    RopeParams rp;
    bool has_ff;
    float ff[kMaxRopeDims / 2];
    double angle_per_pos[kMaxRopeDims / 2];
    bool cs_valid = false;  // cos_c / sin_c hold position pos with sine sign sin_sign
    int32_t pos;
    double sin_sign;
    float cos_c[kMaxRopeDims / 2], sin_c[kMaxRopeDims / 2];
};
thread_local RopeCache rope_cache;

float freq_factor(const ggml_tensor * ff, int i) { return *(const float *) ((const char *) ff->data + i * ff->nb[0]); }

RopeCache & rope_cache_for(const RopeParams & rp, const ggml_tensor * freq_factors) {
    RopeCache & c = rope_cache;
    const int n_pairs = rp.n_dims / 2;
    bool same = c.valid && memcmp(&c.rp, &rp, sizeof(rp)) == 0 && c.has_ff == (freq_factors != nullptr);
    for (int i = 0; same && freq_factors && i < n_pairs; i++) {
        const float f = freq_factor(freq_factors, i);
        same = memcmp(&c.ff[i], &f, sizeof(f)) == 0;  // bits: -0 and NaN are values too
    }
    if (!same) {
        c.rp = rp;
        c.has_ff = freq_factors != nullptr;
        for (int i = 0; freq_factors && i < n_pairs; i++) c.ff[i] = freq_factor(freq_factors, i);
        rope_angle_per_position(rp, freq_factors, c.angle_per_pos);
        c.valid = true;
        c.cs_valid = false;
    }
    return c;
}

// Element access for the types rope supports.
template <ggml_type T> struct Elem;
template <> struct Elem<GGML_TYPE_F32> {
    static float load(const char * p) { return *(const float *) p; }
    static void store(char * p, float v) { *(float *) p = v; }
};
template <> struct Elem<GGML_TYPE_F16> {
    static float load(const char * p) { return GGML_FP16_TO_FP32(*(const ggml_fp16_t *) p); }
    static void store(char * p, float v) { *(ggml_fp16_t *) p = GGML_FP32_TO_FP16(v); }
};
template <> struct Elem<GGML_TYPE_BF16> {
    static float load(const char * p) { return GGML_BF16_TO_FP32(*(const ggml_bf16_t *) p); }
    static void store(char * p, float v) { *(ggml_bf16_t *) p = GGML_FP32_TO_BF16(v); }
};

// Rotates one row (one head of one token). x and y may be the same memory (in place): each
// pair is read before it is written.
template <ggml_type T>
void rope_row(const char * x, size_t xs, char * y, size_t ys, int64_t ne0, int n_dims, bool neox,
              const float * cos_c, const float * sin_c) {
    const int n_pairs = n_dims / 2;
    const int64_t pair_step = neox ? 1 : 2;          // first element of pair i is at i * pair_step
    const int64_t partner   = neox ? n_pairs : 1;    // second element is that + partner
    for (int i = 0; i < n_pairs; i++) {
        const int64_t j0 = i * pair_step, j1 = j0 + partner;
        const float x0 = Elem<T>::load(x + j0 * xs);
        const float x1 = Elem<T>::load(x + j1 * xs);
        Elem<T>::store(y + j0 * ys, x0 * cos_c[i] - x1 * sin_c[i]);
        Elem<T>::store(y + j1 * ys, x0 * sin_c[i] + x1 * cos_c[i]);
    }
    if (x != y || xs != ys) {
        for (int64_t j = n_dims; j < ne0; j++) Elem<T>::store(y + j * ys, Elem<T>::load(x + j * xs));
    }
}

// F32 rows contiguous in dim 0: the common case, written over plain arrays so it vectorizes.
void rope_row_f32_contig(const float * x, float * y, int64_t ne0, int n_dims, bool neox,
                         const float * cos_c, const float * sin_c) {
    const int n_pairs = n_dims / 2;
    if (neox) {
        for (int i = 0; i < n_pairs; i++) {
            const float x0 = x[i], x1 = x[i + n_pairs];
            y[i]           = x0 * cos_c[i] - x1 * sin_c[i];
            y[i + n_pairs] = x0 * sin_c[i] + x1 * cos_c[i];
        }
    } else {
        for (int i = 0; i < n_pairs; i++) {
            const float x0 = x[2 * i], x1 = x[2 * i + 1];
            y[2 * i]     = x0 * cos_c[i] - x1 * sin_c[i];
            y[2 * i + 1] = x0 * sin_c[i] + x1 * cos_c[i];
        }
    }
    if (x != y) {
        for (int64_t j = n_dims; j < ne0; j++) y[j] = x[j];
    }
}

// inverse: rotate by -theta (rope_back: the transpose of the rotation, same magnitude scale).
template <ggml_type T>
void rope_rows(const ggml_compute_params * params, ggml_tensor * dst, const RopeParams & rp, bool inverse) {
    const ggml_tensor * src = dst->src[0];
    const ggml_tensor * pos = dst->src[1];
    const ggml_tensor * freq_factors = dst->src[2];
    const int64_t ne0 = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2];
    const bool neox = (rp.mode & GGML_ROPE_TYPE_NEOX) != 0;
    const int n_pairs = rp.n_dims / 2;

    int64_t r0, r1;
    ggml_cpu_split_rows(ggml_nrows(dst), params->ith, params->nth, &r0, &r1);
    if (r0 >= r1) return;

    RopeCache & c = rope_cache_for(rp, freq_factors);
    const float * cos_c = c.cos_c, * sin_c = c.sin_c;
    double mscale = rp.attn_factor;
    if (rp.ext_factor != 0.0f) mscale *= 1.0 + 0.1 * log(1.0 / (double) rp.freq_scale);
    const double sin_sign = inverse ? -1.0 : 1.0;

    const bool f32_contig = T == GGML_TYPE_F32 && src->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float);
    int64_t cached_token = -1;
    for (int64_t ir = r0; ir < r1; ir++) {
        const int64_t i1 = ir % ne1, i2 = (ir / ne1) % ne2, i3 = ir / (ne1 * ne2);
        if (i2 != cached_token) {
            // The cache depends on the token only, so a row's values do not depend on which
            // thread computes it.
            const int32_t p = *(const int32_t *) ((const char *) pos->data + i2 * pos->nb[0]);
            if (!(c.cs_valid && c.pos == p && c.sin_sign == sin_sign)) {
                for (int i = 0; i < n_pairs; i++) {
                    const double theta = (double) p * c.angle_per_pos[i];
                    c.cos_c[i] = (float) (cos(theta) * mscale);
                    c.sin_c[i] = (float) (sin(theta) * mscale * sin_sign);
                }
                c.cs_valid = true;
                c.pos = p;
                c.sin_sign = sin_sign;
            }
            cached_token = i2;
        }
        const char * x = (const char *) src->data + i1 * src->nb[1] + i2 * src->nb[2] + i3 * src->nb[3];
        char * y = (char *) dst->data + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        if (f32_contig) {
            rope_row_f32_contig((const float *) x, (float *) y, ne0, rp.n_dims, neox, cos_c, sin_c);
        } else {
            rope_row<T>(x, src->nb[0], y, dst->nb[0], ne0, rp.n_dims, neox, cos_c, sin_c);
        }
    }
}

// Forward (inverse = false) and backward (rope_back: dst = R(-theta) grad * mscale) share all
// but the sign of the sine.
void rope_dispatch(const ggml_compute_params * params, ggml_tensor * dst, bool inverse) {
    const ggml_tensor * src = dst->src[0];
    const ggml_tensor * pos = dst->src[1];
    const ggml_tensor * freq_factors = dst->src[2];
    const RopeParams rp = read_rope_params(dst);

    GGML_ASSERT(src != nullptr && pos != nullptr);
    GGML_ASSERT(src->type == dst->type);
    GGML_ASSERT(ggml_are_same_shape(src, dst));
    GGML_ASSERT(pos->type == GGML_TYPE_I32 && pos->ne[0] >= dst->ne[2]);
    GGML_ASSERT((rp.mode & ~GGML_ROPE_TYPE_NEOX) == 0);
    GGML_ASSERT(rp.n_dims >= 0 && rp.n_dims % 2 == 0 && rp.n_dims <= dst->ne[0]);
    GGML_ASSERT(rp.n_dims <= kMaxRopeDims);
    if (freq_factors) {
        GGML_ASSERT(freq_factors->type == GGML_TYPE_F32 && freq_factors->ne[0] >= rp.n_dims / 2);
    }

    switch (dst->type) {
        case GGML_TYPE_F32:  rope_rows<GGML_TYPE_F32>(params, dst, rp, inverse); break;
        case GGML_TYPE_F16:  rope_rows<GGML_TYPE_F16>(params, dst, rp, inverse); break;
        case GGML_TYPE_BF16: rope_rows<GGML_TYPE_BF16>(params, dst, rp, inverse); break;
        default: GGML_ABORT("%s: unsupported type %s", ggml_op_name(dst->op), ggml_type_name(dst->type));
    }
}

}  // namespace

extern "C" void ggml_cpu_forward_rope(const ggml_compute_params * params, ggml_tensor * dst) {
    rope_dispatch(params, dst, false);
}

extern "C" void ggml_cpu_forward_rope_back(const ggml_compute_params * params, ggml_tensor * dst) {
    rope_dispatch(params, dst, true);
}
