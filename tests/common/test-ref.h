// test-ref.h - double-precision references and input layouts shared by the op tests: 4-d shapes
// and logical-order indexing, operands laid out contiguous / padded / transposed / permuted,
// in-place runs over 1/2/3 threads, and naive references of norm / rms_norm, soft_max (scale,
// broadcast mask, ALiBi) and RoPE (YaRN, freq factors; the rotation and its inverse).
//
// Values are always in logical order (i0 fastest), whatever the memory layout of the tensor
// they came from (tu::to_double) or go to (set_values).
#pragma once

#include "test-util.h"

#include <algorithm>
#include <array>
#include <limits>

namespace tu {

using Shape = std::array<int64_t, 4>;
using Values = std::vector<double>;

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- shapes --------------------------------------------------------------------------------

// Position of element (i0, i1, i2, i3) in logical order.
inline int64_t flat_index(const Shape & ne, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return i0 + ne[0] * (i1 + ne[1] * (i2 + ne[2] * i3));
}

inline int64_t n_elements(const Shape & ne) { return ne[0] * ne[1] * ne[2] * ne[3]; }

// Rows of ne[0] elements.
inline int64_t rows_of(const Shape & ne) { return ne[1] * ne[2] * ne[3]; }

inline Shape shape_of(const ggml_tensor * t) { return {t->ne[0], t->ne[1], t->ne[2], t->ne[3]}; }

inline std::string shape_str(const Shape & ne) {
    return "[" + std::to_string(ne[0]) + "," + std::to_string(ne[1]) + "," + std::to_string(ne[2]) + "," +
           std::to_string(ne[3]) + "]";
}

inline ggml_tensor * new_tensor(ggml_context * ctx, ggml_type type, const Shape & ne) {
    return ggml_new_tensor_4d(ctx, type, ne[0], ne[1], ne[2], ne[3]);
}

// ---- values --------------------------------------------------------------------------------

// Stores v (logical order) into t, whatever t's layout.
inline void set_values(ggml_tensor * t, const Values & v) {
    const Shape ne = shape_of(t);
    for_each(t, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) { set(t, v[flat_index(ne, i0, i1, i2, i3)], i0, i1, i2, i3); });
}

// A value as the given type stores it.
inline double round_to(ggml_type type, double v) {
    switch (type) {
        case GGML_TYPE_F16:  return ggml_fp16_to_fp32(ggml_fp32_to_fp16((float) v));
        case GGML_TYPE_BF16: return ggml_bf16_to_fp32(ggml_fp32_to_bf16((float) v));
        case GGML_TYPE_I32:  return (double) (int32_t) v;
        default:             return (float) v;
    }
}

// Computes an in-place op with 1, 2 and 3 threads, restoring the input before each run (the op
// overwrites it); checks bit-identity like compute_all_threads and returns the 1-thread values.
inline Values compute_inplace_all_threads(ggml_context * ctx, ggml_tensor * out, ggml_tensor * input, const Values & input_vals) {
    return compute_all_threads(ctx, out, true, [&] { set_values(input, input_vals); });
}

// ---- input layouts -------------------------------------------------------------------------

// How a test operand is laid out in memory. Every layout but Contiguous is a view of a
// contiguous base tensor (its view_src).
enum class Layout {
    Contiguous,
    Padded,       // rows and planes padded (new_padded_view)
    Transposed,   // dims 0 and 1 swapped in memory (new_transposed_view)
    Permuted12,   // dims 1 and 2 swapped in memory, rows stay contiguous (as attention's q and k)
    PermutedAll,  // memory order [ne2, ne0, ne3, ne1]: no dimension keeps its stride
};

inline const char * layout_name(Layout l) {
    switch (l) {
        case Layout::Contiguous:  return "contiguous";
        case Layout::Padded:      return "padded";
        case Layout::Transposed:  return "transposed";
        case Layout::Permuted12:  return "permuted12";
        case Layout::PermutedAll: return "permuted-all";
    }
    return "?";
}

// A tensor of logical shape ne with the given layout.
inline ggml_tensor * new_input(ggml_context * ctx, ggml_type type, const Shape & ne, Layout layout) {
    switch (layout) {
        case Layout::Contiguous: return new_tensor(ctx, type, ne);
        case Layout::Padded:     return new_padded_view(ctx, type, ne.data());
        case Layout::Transposed: return new_transposed_view(ctx, type, ne.data());
        case Layout::Permuted12: {
            ggml_tensor * base = ggml_new_tensor_4d(ctx, type, ne[0], ne[2], ne[1], ne[3]);
            return ggml_permute(ctx, base, 0, 2, 1, 3);
        }
        case Layout::PermutedAll: {
            ggml_tensor * base = ggml_new_tensor_4d(ctx, type, ne[2], ne[0], ne[3], ne[1]);
            ggml_tensor * t = ggml_permute(ctx, base, 2, 0, 3, 1);
            EXPECT_EQ(shape_of(t), ne);
            return t;
        }
    }
    return nullptr;
}

// ---- norm, rms_norm --------------------------------------------------------------------------

// 1 / sqrt(variance + eps) of the n values at x, and their mean (0 for rms_norm, whose
// "variance" is the mean square).
inline double ref_norm_scale(const double * x, int64_t n, double eps, bool rms, double * mean_out) {
    double mean = 0.0;
    if (!rms) {
        for (int64_t i = 0; i < n; i++) mean += x[i];
        mean /= (double) n;
    }
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) ss += (x[i] - mean) * (x[i] - mean);
    *mean_out = mean;
    return 1.0 / std::sqrt(ss / (double) n + eps);
}

// norm (rms false) or rms_norm of every row of x.
inline Values ref_norm(const Values & x, const Shape & ne, double eps, bool rms) {
    Values y(x.size());
    for (int64_t r = 0; r < rows_of(ne); r++) {
        const double * xr = x.data() + r * ne[0];
        double mean;
        const double scale = ref_norm_scale(xr, ne[0], eps, rms, &mean);
        for (int64_t i = 0; i < ne[0]; i++) y[r * ne[0] + i] = (xr[i] - mean) * scale;
    }
    return y;
}

// ---- soft_max --------------------------------------------------------------------------------

// ggml's ALiBi slope for head h of n_head.
inline double alibi_slope(double max_bias, int64_t h, int64_t n_head) {
    int64_t n_head_log2 = 1;
    while (n_head_log2 * 2 <= n_head) n_head_log2 *= 2;
    const double m0 = std::pow(2.0, -max_bias / (double) n_head_log2);
    const double m1 = std::pow(2.0, -(max_bias / 2.0) / (double) n_head_log2);
    return h < n_head_log2 ? std::pow(m0, (double) (h + 1)) : std::pow(m1, (double) (2 * (h - n_head_log2) + 1));
}

// softmax(x * scale + slope * mask) of every row, with slope the ALiBi slope of head i2 (of
// ne[2]) when max_bias > 0, else 1. The mask (none when null) has shape mask_ne (at least ne[1]
// rows) and broadcasts over dims 2 and 3. A row that is -inf everywhere gives zeros.
inline Values ref_soft_max(const Values & x, const Shape & ne, double scale = 1.0, const Values * mask = nullptr,
                           const Shape & mask_ne = {1, 1, 1, 1}, double max_bias = 0.0) {
    Values y(x.size());
    Values v((size_t) ne[0]);
    for (int64_t i3 = 0; i3 < ne[3]; i3++) {
        for (int64_t i2 = 0; i2 < ne[2]; i2++) {
            const double slope = max_bias > 0.0 ? alibi_slope(max_bias, i2, ne[2]) : 1.0;
            for (int64_t i1 = 0; i1 < ne[1]; i1++) {
                double max = -kInf;
                for (int64_t i0 = 0; i0 < ne[0]; i0++) {
                    v[i0] = x[flat_index(ne, i0, i1, i2, i3)] * scale;
                    if (mask) v[i0] += slope * (*mask)[flat_index(mask_ne, i0, i1, i2 % mask_ne[2], i3 % mask_ne[3])];
                    max = std::max(max, v[i0]);
                }
                double sum = 0.0;
                for (int64_t i0 = 0; i0 < ne[0]; i0++) sum += max == -kInf ? 0.0 : std::exp(v[i0] - max);
                for (int64_t i0 = 0; i0 < ne[0]; i0++) {
                    y[flat_index(ne, i0, i1, i2, i3)] = max == -kInf ? 0.0 : std::exp(v[i0] - max) / sum;
                }
            }
        }
    }
    return y;
}

// ---- flash_attn_ext --------------------------------------------------------------------------

// ggml_flash_attn_ext in double: per head h (kv head h / (H / Hkv)) and query i, logits
// u_j = scale q.k_j (softcap > 0: softcap tanh(u_j / softcap)) + slope * mask[j, i], p =
// softmax (zeros when every key is hidden), out[:, h, i] = sum_j p_j v_j. q [D, n_q, H, B3], k
// [D, n_kv, Hkv, B3], v [Dv, n_kv, Hkv, B3]; result [Dv, H, n_q, B3]. Given dout (the result's
// shape), also the gradients dq, dk, dv (the shapes of q, k, v).
inline Values ref_flash_attn(const Values & q, const Shape & qne, const Values & k, const Shape & kne, const Values & v,
                             const Shape & vne, const Values * mask, const Shape & mne, double scale, double max_bias,
                             double softcap, const Values * dout = nullptr, Values * dq = nullptr, Values * dk = nullptr,
                             Values * dv = nullptr) {
    const int64_t D = qne[0], n_q = qne[1], H = qne[2], B3 = qne[3], n_kv = kne[1], Hkv = kne[2], Dv = vne[0];
    const Shape one = {Dv, H, n_q, B3};
    Values out((size_t) n_elements(one), 0.0);
    if (dout) {
        dq->assign(q.size(), 0.0);
        dk->assign(k.size(), 0.0);
        dv->assign(v.size(), 0.0);
    }
    std::vector<double> u((size_t) n_kv), p((size_t) n_kv);
    for (int64_t i3 = 0; i3 < B3; i3++) {
        for (int64_t h = 0; h < H; h++) {
            const int64_t hk = h / (H / Hkv);
            const double slope = max_bias > 0.0 ? alibi_slope(max_bias, h, H) : 1.0;
            for (int64_t i = 0; i < n_q; i++) {
                double max = -kInf;
                for (int64_t j = 0; j < n_kv; j++) {
                    double dot = 0.0;
                    for (int64_t d = 0; d < D; d++) dot += q[flat_index(qne, d, i, h, i3)] * k[flat_index(kne, d, j, hk, i3)];
                    u[j] = scale * dot;
                    p[j] = softcap > 0.0 ? softcap * std::tanh(u[j] / softcap) : u[j];
                    if (mask) p[j] += slope * (*mask)[flat_index(mne, j, i, h % mne[2], i3 % mne[3])];
                    max = std::max(max, p[j]);
                }
                double sum = 0.0;
                for (int64_t j = 0; j < n_kv; j++) sum += max == -kInf ? 0.0 : std::exp(p[j] - max);
                for (int64_t j = 0; j < n_kv; j++) p[j] = max == -kInf ? 0.0 : std::exp(p[j] - max) / sum;
                for (int64_t j = 0; j < n_kv; j++) {
                    for (int64_t d = 0; d < Dv; d++) out[flat_index(one, d, h, i, i3)] += p[j] * v[flat_index(vne, d, j, hk, i3)];
                }
                if (!dout) continue;
                std::vector<double> dp((size_t) n_kv);
                double Di = 0.0;
                for (int64_t j = 0; j < n_kv; j++) {
                    dp[j] = 0.0;
                    for (int64_t d = 0; d < Dv; d++) dp[j] += (*dout)[flat_index(one, d, h, i, i3)] * v[flat_index(vne, d, j, hk, i3)];
                    Di += p[j] * dp[j];
                }
                for (int64_t j = 0; j < n_kv; j++) {
                    double du = p[j] * (dp[j] - Di) * scale;
                    if (softcap > 0.0) du *= 1.0 - std::pow(std::tanh(u[j] / softcap), 2);
                    for (int64_t d = 0; d < D; d++) {
                        (*dq)[flat_index(qne, d, i, h, i3)] += du * k[flat_index(kne, d, j, hk, i3)];
                        (*dk)[flat_index(kne, d, j, hk, i3)] += du * q[flat_index(qne, d, i, h, i3)];
                    }
                    for (int64_t d = 0; d < Dv; d++) (*dv)[flat_index(vne, d, j, hk, i3)] += p[j] * (*dout)[flat_index(one, d, h, i, i3)];
                }
            }
        }
    }
    return out;
}

// ---- rope ------------------------------------------------------------------------------------

// The parameters of ggml_rope_ext.
struct RopeCase {
    int n_dims = 0;
    int mode = GGML_ROPE_TYPE_NORMAL;
    int n_ctx_orig = 0;
    float freq_base = 10000.0f, freq_scale = 1.0f, ext_factor = 0.0f, attn_factor = 1.0f;
    float beta_fast = 32.0f, beta_slow = 1.0f;
    std::vector<double> freq_factors;  // one per pair of rotated dims; empty: none
};

inline std::string rope_case_str(const RopeCase & c) {
    return std::string(c.mode & GGML_ROPE_TYPE_NEOX ? "neox" : "normal") + " n_dims " + std::to_string(c.n_dims) +
           " base " + std::to_string(c.freq_base) + " scale " + std::to_string(c.freq_scale) + " ext " +
           std::to_string(c.ext_factor) + " attn " + std::to_string(c.attn_factor) + " n_ctx_orig " +
           std::to_string(c.n_ctx_orig) + (c.freq_factors.empty() ? "" : " freq factors");
}

// The rotation angle of pair i at position p and the magnitude scale, straight from the
// definitions (ggml_rope_ext / YaRN).
inline void ref_rope_angle(const RopeCase & c, double p, int i, double * theta, double * mscale) {
    double theta_extrap = p * std::pow((double) c.freq_base, -2.0 * i / c.n_dims);
    if (!c.freq_factors.empty()) theta_extrap /= c.freq_factors[(size_t) i];
    const double theta_interp = c.freq_scale * theta_extrap;
    *theta = theta_interp;
    *mscale = c.attn_factor;
    if (c.ext_factor != 0.0f) {
        // Correction dims: the dimension where the wavelength fits n_rot turns into n_ctx_orig.
        auto corr_dim = [&](double n_rot) {
            return c.n_dims * std::log(c.n_ctx_orig / (n_rot * 2.0 * M_PI)) / (2.0 * std::log((double) c.freq_base));
        };
        const double lo = std::max(0.0, std::floor(corr_dim(c.beta_fast)));
        const double hi = std::min((double) (c.n_dims - 1), std::ceil(corr_dim(c.beta_slow)));
        const double y = (i - lo) / std::max(0.001, hi - lo);
        const double ramp = 1.0 - std::min(1.0, std::max(0.0, y));
        const double mix = ramp * c.ext_factor;
        *theta = theta_interp * (1.0 - mix) + theta_extrap * mix;
        *mscale *= 1.0 + 0.1 * std::log(1.0 / c.freq_scale);
    }
}

// Rotates the first n_dims of each row of x (shape ne, token i2 at position pos[i2]) by
// R(theta) * mscale, or by R(-theta) * mscale when inverse (rope_back: the transpose of the
// forward rotation). Normal mode pairs dims (2i, 2i + 1), neox mode (i, i + n_dims / 2); the
// other dims are copied.
inline Values ref_rope(const Values & x, const Shape & ne, const std::vector<int32_t> & pos, const RopeCase & c,
                       bool inverse = false) {
    Values y = x;
    const bool neox = (c.mode & GGML_ROPE_TYPE_NEOX) != 0;
    const int n_pairs = c.n_dims / 2;
    for (int64_t i3 = 0; i3 < ne[3]; i3++)
        for (int64_t i2 = 0; i2 < ne[2]; i2++)
            for (int64_t i1 = 0; i1 < ne[1]; i1++)
                for (int i = 0; i < n_pairs; i++) {
                    double theta, mscale;
                    ref_rope_angle(c, (double) pos[(size_t) i2], i, &theta, &mscale);
                    const double cos_t = std::cos(theta), sin_t = inverse ? -std::sin(theta) : std::sin(theta);
                    const int64_t j0 = neox ? i : 2 * i, j1 = neox ? i + n_pairs : 2 * i + 1;
                    const double x0 = x[flat_index(ne, j0, i1, i2, i3)], x1 = x[flat_index(ne, j1, i1, i2, i3)];
                    y[flat_index(ne, j0, i1, i2, i3)] = (x0 * cos_t - x1 * sin_t) * mscale;
                    y[flat_index(ne, j1, i1, i2, i3)] = (x0 * sin_t + x1 * cos_t) * mscale;
                }
    return y;
}

// n distinct positions out of order, including 0 and large values (a float angle would lose
// ~1e-3 rad at 10^5).
inline std::vector<int32_t> rope_test_positions(int64_t n, std::mt19937 & rng) {
    const int32_t fixed[] = {0, 100003, 7, 4095, 1, 31, 2047, 65536, 3, 250};
    std::vector<int32_t> pos;
    for (int64_t i = 0; i < n; i++) pos.push_back(fixed[i % 10] + (int32_t) (i / 10) * 11);
    std::shuffle(pos.begin(), pos.end(), rng);
    return pos;
}

// Random freq factors in [0.5, 4), one per pair of rotated dims.
inline std::vector<double> random_freq_factors(int n_dims, std::mt19937 & rng) {
    std::uniform_real_distribution<double> d(0.5, 4.0);
    std::vector<double> ff((size_t) n_dims / 2);
    for (double & v : ff) v = d(rng);
    return ff;
}

// The position and freq factor tensors of a rope node, and the case as the reference must see it.
struct RopeInputs {
    ggml_tensor * pos = nullptr;
    ggml_tensor * ff = nullptr;         // null without freq factors
    std::vector<int32_t> pos_vals;
    RopeCase stored;                    // freq factors as stored (rounded to float)
};

// Positions for n_tokens (rope_test_positions) and c's freq factors as F32 tensors.
inline RopeInputs make_rope_inputs(ggml_context * ctx, const RopeCase & c, int64_t n_tokens, std::mt19937 & rng) {
    RopeInputs in;
    in.pos_vals = rope_test_positions(n_tokens, rng);
    in.pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens);
    for (int64_t i = 0; i < n_tokens; i++) set(in.pos, in.pos_vals[(size_t) i], i);
    in.stored = c;
    if (!c.freq_factors.empty()) {
        in.ff = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, (int64_t) c.freq_factors.size());
        for (size_t i = 0; i < c.freq_factors.size(); i++) set(in.ff, c.freq_factors[i], (int64_t) i);
        in.stored.freq_factors = to_double(in.ff);
    }
    return in;
}

}  // namespace tu
