// quants-search.cpp - least-squares scale searches for the quantizers.
//
// For a fixed assignment of levels, the best scale (and offset) has a closed form (weighted
// least squares), and so has the error it leaves, from the same five sums. The search walks
// candidate inverse scales around the "range / levels" guess, rounds the values to levels under
// each candidate (one pass, accumulating the sums), and keeps the candidate with the least
// error; the winner's levels are then re-rounded under its fitted scale once more.
#include "quants-search.h"

#include "ggml-impl.h"  // F16 conversions

#include <math.h>
#include <string.h>

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

// Eight lanes (GCC/Clang vector extensions: AVX / NEON registers where the build has them,
// scalar code elsewhere). This file is compiled with -ffp-contract=off, so each lane rounds
// exactly as the scalar expression does on every ISA and compiler.
typedef float f8 __attribute__((vector_size(32)));
typedef int32_t i8v __attribute__((vector_size(32)));

static inline f8 load8(const float * p) {
    f8 v;
    memcpy(&v, p, sizeof(v));
    return v;
}
static inline f8 splat8(float s) { return f8{s, s, s, s, s, s, s, s}; }
static inline double sum8(f8 v) { return (double) (((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]))); }

// rintf (nearest, ties to even) of each lane with |v| < 2^22, by adding and subtracting
// 1.5 * 2^23, which vectorizes where the libm call does not. Larger |v| come out large with
// their sign, which the callers' clamping to the level range maps the same way.
static inline f8 round_even8(f8 v) {
    const f8 magic = splat8(12582912.0f);
    return (v + magic) - magic;
}

// Lanes clamped to [lo, hi] (a NaN stays NaN, as with the scalar ternaries).
static inline f8 clamp8(f8 v, float lo, float hi) {
    const f8 vlo = splat8(lo), vhi = splat8(hi);
    v = v < vlo ? vlo : v;
    return v > vhi ? vhi : v;
}

// ---- symmetric: x ~ s * q, q in [qmin, qmax] -----------------------------------------------
static const int SYM_STEPS = 9;  // candidates on each side of each end's guess

// Rounds x * iscale to levels, returns sum w x q and sum w q^2. Sums go to 8 partial sums by
// position (a fixed order the compiler can vectorize); n is a multiple of 8.
static inline void sym_round(int n, const float * x, const float * w, float iscale, int qmin, int qmax, int8_t * L,
                             double * sxl, double * sll) {
    f8 a = {}, b = {};
    for (int i = 0; i < n; i += 8) {
        const f8 xv = load8(x + i), wv = load8(w + i);
        const f8 l = clamp8(round_even8(iscale * xv), (float) qmin, (float) qmax);
        const i8v li = __builtin_convertvector(l, i8v);
        for (int k = 0; k < 8; k++) L[i + k] = (int8_t) li[k];
        a += wv * xv * l;
        b += wv * l * l;
    }
    *sxl = sum8(a);
    *sll = sum8(b);
}

float quant_fit_symmetric(int n, const float * x, const float * w, int qmin, int qmax, int8_t * L) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    }
    if (amax < 1e-30f) {
        memset(L, 0, n);
        return 0.0f;
    }
    int8_t cand[256];
    float best_iscale = 0.0f;
    double best_gain = -1.0;  // error = sum w x^2 - sxl^2 / sll: maximize sxl^2 / sll
    // The extreme value goes to either end of the range (for short ranges like -4..3 the ends
    // differ enough to matter; for long ones like -32..31 one end suffices), scaled by a factor
    // around 1.
    const int n_ends = qmax >= 15 ? 1 : 2;
    for (int end = 0; end < n_ends; end++) {
        const float target = end == 0 ? (float) qmin : (float) qmax;
        const float dir = target < 0 ? -1.0f : 1.0f;
        // Long ranges: one end, coarser steps reaching further towards larger scales (measured on
        // Q6_K: the same error as two ends at 0.1 in 40% of the time).
        const int lo = n_ends == 1 ? -8 : -SYM_STEPS, hi = n_ends == 1 ? 2 : SYM_STEPS / 2;
        const float st = n_ends == 1 ? 0.2f : 0.1f;
        for (int step = lo; step <= hi; step++) {
            const float iscale = (target + st * step * dir) / max;
            double sxl, sll;
            sym_round(n, x, w, iscale, qmin, qmax, cand, &sxl, &sll);
            if (sll <= 0.0) continue;
            const double gain = sxl * sxl / sll;
            if (gain > best_gain) {
                best_gain = gain;
                best_iscale = iscale;
            }
        }
    }
    if (best_gain < 0.0) {
        memset(L, 0, n);
        return 0.0f;
    }
    double sxl, sll;
    sym_round(n, x, w, best_iscale, qmin, qmax, L, &sxl, &sll);
    float s = (float) (sxl / sll);
    // Re-round under the fitted scale: keep it if it explains more.
    if (s != 0.0f) {
        double sxl2, sll2;
        sym_round(n, x, w, 1.0f / s, qmin, qmax, cand, &sxl2, &sll2);
        if (sll2 > 0.0 && sxl2 * sxl2 / sll2 > sxl * sxl / sll) {
            memcpy(L, cand, n);
            s = (float) (sxl2 / sll2);
        }
    }
    return s;
}

double quant_round_error(int n, const float * x, const float * w, float s, float m, int qmax, uint8_t * L) {
    f8 e = {};
    const i8v zero = {}, top = zero + qmax;
    for (int i = 0; i < n; i += 8) {
        const f8 xv = load8(x + i);
        f8 l = {};
        if (s > 0.0f) {
            const f8 v = (xv + m) / s;
            // quant_round: half away from zero, then truncation; clamped first so that the
            // conversion stays in range.
            const f8 r = clamp8(v >= 0.0f ? v + 0.5f : v - 0.5f, -1.0f, (float) qmax + 1.0f);
            i8v q = __builtin_convertvector(r, i8v);
            q = q < zero ? zero : q;
            q = q > top ? top : q;
            l = __builtin_convertvector(q, f8);
            for (int k = 0; k < 8; k++) L[i + k] = (uint8_t) q[k];
        } else {
            memset(L + i, 0, 8);
        }
        const f8 d = xv - (s * l - m);
        e += load8(w + i) * d * d;
    }
    return sum8(e);
}

double quant_round_error_sym(int n, const float * x, const float * w, float s, int qmin, int qmax, int8_t * L) {
    f8 e = {};
    const i8v lo = i8v{} + qmin, hi = i8v{} + qmax;
    for (int i = 0; i < n; i += 8) {
        const f8 xv = load8(x + i);
        f8 l = {};
        if (s != 0.0f) {
            const f8 v = xv / s;
            const f8 r = clamp8(v >= 0.0f ? v + 0.5f : v - 0.5f, (float) qmin - 1.0f, (float) qmax + 1.0f);
            i8v q = __builtin_convertvector(r, i8v);
            q = q < lo ? lo : q;
            q = q > hi ? hi : q;
            l = __builtin_convertvector(q, f8);
            for (int k = 0; k < 8; k++) L[i + k] = (int8_t) q[k];
        } else {
            memset(L + i, 0, 8);
        }
        const f8 d = xv - s * l;
        e += load8(w + i) * d * d;
    }
    return sum8(e);
}

// ---- asymmetric: x ~ s * q - m, q in [0, qmax] ---------------------------------------------
static const int ASYM_STEPS = 8;

struct ls_sums { double sw, sx, sxx, sl, sll, sxl; };

// Rounds (x - xmin) * iscale to levels 0..qmax and accumulates the least-squares sums (8 partial
// sums by position, as in sym_round; n a multiple of 8).
static inline ls_sums asym_round(int n, const float * x, const float * w, float xmin, float iscale, int qmax, uint8_t * L) {
    f8 sl = {}, sll = {}, sxl = {};
    for (int i = 0; i < n; i += 8) {
        const f8 xv = load8(x + i), wv = load8(w + i);
        const f8 l = clamp8(round_even8(iscale * (xv - xmin)), 0.0f, (float) qmax);
        const i8v li = __builtin_convertvector(l, i8v);
        for (int k = 0; k < 8; k++) L[i + k] = (uint8_t) li[k];
        sl += wv * l;
        sll += wv * l * l;
        sxl += wv * xv * l;
    }
    ls_sums r = {};
    r.sl = sum8(sl);
    r.sll = sum8(sll);
    r.sxl = sum8(sxl);
    return r;
}

// Best s >= 0 and m for x ~ s * L - m given the sums; m >= 0 unless any_sign. Returns the error.
static double solve_scale_min(const ls_sums & t, bool any_sign, float * s_out, float * m_out) {
    const double det = t.sw * t.sll - t.sl * t.sl;
    double s = 0, off = 0;  // x ~ s * L + off
    if (det > 0) {
        const double inv = 1.0 / det;  // one division: this runs for every candidate scale
        s = (t.sw * t.sxl - t.sl * t.sx) * inv;
        off = (t.sll * t.sx - t.sl * t.sxl) * inv;
    }
    if (det <= 0 || (off > 0 && !any_sign) || s < 0) {
        off = 0;  // the format cannot add a positive offset: fit the scale alone
        s = t.sll > 0 ? t.sxl / t.sll : 0;
        if (s < 0) s = 0;
    }
    *s_out = (float) s;
    *m_out = (float) -off;
    // sum w (x - s L - off)^2 expanded in the sums.
    const double err = t.sxx - 2 * s * t.sxl - 2 * off * t.sx + s * s * t.sll + 2 * s * off * t.sl + off * off * t.sw;
    return err > 0 ? err : 0;
}

static float fit_scale_min(int n, const float * x, const float * w, int qmax, bool any_sign, uint8_t * L, float * m_out) {
    float xmin = x[0], xmax = x[0];
    double sw = 0, sx = 0, sxx = 0;
    for (int i = 0; i < n; i++) {
        xmin = x[i] < xmin ? x[i] : xmin;  // not fminf: that is a libm call without -ffast-math
        xmax = x[i] > xmax ? x[i] : xmax;
        sw += w[i];
        sx += (double) w[i] * x[i];
        sxx += (double) w[i] * x[i] * x[i];
    }
    if (xmin > 0.0f && !any_sign) xmin = 0.0f;  // the min can only be subtracted
    if (xmax <= xmin) {
        memset(L, 0, n);
        *m_out = -xmin;
        return 0.0f;
    }
    uint8_t cand[256];
    double best_err = INFINITY;
    float best_iscale = 0.0f;
    for (int step = -ASYM_STEPS; step <= ASYM_STEPS; step++) {
        const float iscale = (qmax + 0.1f * step * qmax / 7.5f) / (xmax - xmin);
        if (iscale <= 0.0f) continue;
        ls_sums t = asym_round(n, x, w, xmin, iscale, qmax, cand);
        t.sw = sw; t.sx = sx; t.sxx = sxx;
        float s, m;
        const double err = solve_scale_min(t, any_sign, &s, &m);
        if (err < best_err) {
            best_err = err;
            best_iscale = iscale;
        }
    }
    ls_sums t = asym_round(n, x, w, xmin, best_iscale, qmax, L);
    t.sw = sw; t.sx = sx; t.sxx = sxx;
    float s, m;
    double err = solve_scale_min(t, any_sign, &s, &m);
    // Re-round under the fitted scale and min, refit, keep if better.
    if (s > 0.0f) {
        ls_sums t2 = asym_round(n, x, w, -m, 1.0f / s, qmax, cand);
        t2.sw = sw; t2.sx = sx; t2.sxx = sxx;
        float s2, m2;
        const double err2 = solve_scale_min(t2, any_sign, &s2, &m2);
        if (err2 < err) {
            memcpy(L, cand, n);
            s = s2;
            m = m2;
            err = err2;
        }
    }
    *m_out = m;
    return s;
}

float quant_fit_scale_min(int n, const float * x, const float * w, int qmax, uint8_t * L, float * m) {
    return fit_scale_min(n, x, w, qmax, false, L, m);
}
float quant_fit_scale_offset(int n, const float * x, const float * w, int qmax, uint8_t * L, float * m) {
    return fit_scale_min(n, x, w, qmax, true, L, m);
}

// ---- non-uniform levels --------------------------------------------------------------------
static const int LEV_STEPS = 7;

// Index of the level nearest to v: the number of midpoints between neighbouring levels below v.
static inline int nearest_level(float v, const float * mid, int nmid) {
    int k = 0;
    for (int j = 0; j < nmid; j++) k += v > mid[j];
    return k;
}

// nearest_level for integer levels as one lookup: the midpoints are multiples of 1/2, so the
// count of those below v is the count of those <= h / 2 with h = floor(2 v), or <= (h - 1) / 2
// when 2 v is h exactly (v on a midpoint). Built once per thread for the last levels asked for
// (the callers quantize whole rows with one level set); the same index as nearest_level.
namespace {
struct level_index {
    const int8_t * levels = nullptr;
    int nlev = 0;
    uint8_t below_or_at[513];  // count of midpoints <= h / 2, h = -256 .. 256

    void build(const int8_t * lv, int n, const float * mid) {
        levels = lv;
        nlev = n;
        for (int h = -256; h <= 256; h++) {
            int k = 0;
            for (int j = 0; j + 1 < n; j++) k += mid[j] <= 0.5f * (float) h;
            below_or_at[h + 256] = (uint8_t) k;
        }
    }
    int operator()(float v) const {
        if (!(v > -128.0f)) return 0;      // below every midpoint (and NaN, as nearest_level)
        if (!(v < 128.0f)) return nlev - 1;
        const float v2 = 2.0f * v;
        const int h = (int) floorf(v2);
        return below_or_at[(v2 == (float) h ? h - 1 : h) + 256];
    }
};
thread_local level_index t_level_index;
}  // namespace

float quant_fit_levels(int n, const float * x, const float * w, const int8_t * levels, int nlev, uint8_t * L) {
    float mid[32];
    for (int j = 0; j + 1 < nlev; j++) mid[j] = 0.5f * (levels[j] + levels[j + 1]);
    level_index & index = t_level_index;
    if (index.levels != levels || index.nlev != nlev) index.build(levels, nlev, mid);
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    }
    if (amax < 1e-30f) {
        memset(L, nearest_level(0.0f, mid, nlev - 1), n);
        return 0.0f;
    }
    // The extreme value maps near either end of the levels (the scale's sign follows): with
    // asymmetric levels (IQ4_NL's -127 .. 113) the longer end can fit better.
    uint8_t cand[256];
    double best_gain = -1.0;
    float best_s = 0.0f;
    for (int end = 0; end < 2; end++) {
        const float lev = (float) (end == 0 ? levels[0] : levels[nlev - 1]);
        for (int step = -LEV_STEPS; step <= LEV_STEPS; step++) {
            const float iscale = lev * (1.0f + 0.025f * step) / max;
            float sxl = 0.0f, sll = 0.0f;
            for (int i = 0; i < n; i++) {
                cand[i] = (uint8_t) index(iscale * x[i]);
                const float l = levels[cand[i]];
                sxl += w[i] * x[i] * l;
                sll += w[i] * l * l;
            }
            if (sll <= 0.0f) continue;
            const double gain = (double) sxl * sxl / sll;
            if (gain > best_gain) {
                best_gain = gain;
                best_s = sxl / sll;
                memcpy(L, cand, n);
            }
        }
    }
    return best_s;
}

void quant_imatrix_weights(int n, const float * x, const float * qw, float sigma_mult, float * w) {
    float s2 = 0.0f;
    for (int i = 0; i < n; i++) s2 += x[i] * x[i];
    s2 = sigma_mult * s2 / (float) n;
    for (int i = 0; i < n; i++) w[i] = (qw[i] > 0.0f ? qw[i] : 1e-9f) * sqrtf(s2 + x[i] * x[i]);
}

void quant_plain_weights(int n, const float * x, enum quant_plain_weighting kind, float * w) {
    switch (kind) {
        case QUANT_PLAIN_ONE:
            for (int i = 0; i < n; i++) w[i] = 1.0f;
            break;
        case QUANT_PLAIN_RMS_ABS:
            for (int j = 0; j < n; j += 32) {
                const int m = n - j < 32 ? n - j : 32;
                float s2 = 0.0f;
                for (int l = 0; l < m; l++) s2 += x[j + l] * x[j + l];
                const float rms = sqrtf(s2 / (float) m);
                for (int l = 0; l < m; l++) w[j + l] = rms + fabsf(x[j + l]);
            }
            break;
    }
    // A zero weight would let a value take any level; a tiny one only breaks ties.
    for (int i = 0; i < n; i++) w[i] = w[i] > 1e-30f ? w[i] : 1e-30f;
}

float quant_unshrink_factor(int n, const float * x, const float * xhat, const float * qw) {
    double sxx = 0.0, sxr = 0.0;
    for (int i = 0; i < n; i++) {
        const double q = qw ? (qw[i] > 0.0f ? qw[i] : 1e-9f) : 1.0;
        sxx += q * x[i] * x[i];
        sxr += q * x[i] * xhat[i];
    }
    if (!(sxr > 0.0) || !(sxx > 0.0)) return 1.0f;
    const double f = sxx / sxr;
    return (float) (f < 0.5 ? 0.5 : f > 2.0 ? 2.0 : f);
}

ggml_fp16_t quant_scale_fp16(ggml_fp16_t d, float f) {
    const float v = GGML_FP16_TO_FP32(d) * f;
    return GGML_FP32_TO_FP16(v > 65504.0f ? 65504.0f : v < -65504.0f ? -65504.0f : v);
}
