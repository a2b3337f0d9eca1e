// quants-search.cpp - least-squares scale searches for the quantizers.
//
// For a fixed assignment of levels, the best scale (and offset) has a closed form (weighted
// least squares). The search walks candidate inverse scales around the "range / levels" guess,
// rounds the values to levels under each candidate, solves for the best scale for those levels
// and keeps the assignment with the least error.
#include "quants-search.h"

#include <math.h>
#include <string.h>

static const int SEARCH_STEPS = 12;  // candidates on each side of the initial guess

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

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
    float best_s = 0.0f;
    double best_err = INFINITY;
    // The extreme value goes to either end of the range (qmin is the larger magnitude for
    // asymmetric ranges like -4..3), scaled by a factor around 1.
    for (int end = 0; end < 2; end++) {
        const float target = end == 0 ? (float) qmin : (float) qmax;
        for (int step = -SEARCH_STEPS; step <= SEARCH_STEPS / 2; step++) {
            const float iscale = (target + 0.1f * step * (target < 0 ? -1.0f : 1.0f)) / max;
            double sxl = 0.0, sll = 0.0;
            for (int i = 0; i < n; i++) {
                const int l = clampi(quant_round(iscale * x[i]), qmin, qmax);
                cand[i] = (int8_t) l;
                sxl += (double) w[i] * x[i] * l;
                sll += (double) w[i] * l * l;
            }
            if (sll <= 0.0) continue;
            const float s = (float) (sxl / sll);
            double err = 0.0;
            for (int i = 0; i < n; i++) {
                const double d = x[i] - (double) s * cand[i];
                err += w[i] * d * d;
            }
            if (err < best_err) {
                best_err = err;
                best_s = s;
                memcpy(L, cand, n);
            }
        }
    }
    if (best_err == INFINITY) {
        memset(L, 0, n);
        return 0.0f;
    }
    // Final pass: levels rounded under the chosen scale (it can only keep or lower the error).
    if (best_s != 0.0f) {
        const float is = 1.0f / best_s;
        double sxl = 0.0, sll = 0.0;
        for (int i = 0; i < n; i++) {
            cand[i] = (int8_t) clampi(quant_round(is * x[i]), qmin, qmax);
            sxl += (double) w[i] * x[i] * cand[i];
            sll += (double) w[i] * cand[i] * cand[i];
        }
        if (sll > 0.0) {
            const float s = (float) (sxl / sll);
            double err = 0.0;
            for (int i = 0; i < n; i++) {
                const double d = x[i] - (double) s * cand[i];
                err += w[i] * d * d;
            }
            if (err < best_err) {
                best_s = s;
                memcpy(L, cand, n);
            }
        }
    }
    return best_s;
}

double quant_error(int n, const float * x, const float * w, float s, float m, const uint8_t * L) {
    double err = 0.0;
    for (int i = 0; i < n; i++) {
        const double d = x[i] - ((double) s * L[i] - m);
        err += w[i] * d * d;
    }
    return err;
}

// Best s >= 0, m >= 0 for x ~ s * L - m with the levels fixed (2x2 weighted least squares, with
// the constraints applied by falling back to the one-parameter fits).
static void solve_scale_min(int n, const float * x, const float * w, const uint8_t * L, bool any_sign, float * s_out, float * m_out) {
    double sw = 0, sx = 0, sl = 0, sll = 0, sxl = 0;
    for (int i = 0; i < n; i++) {
        sw += w[i];
        sx += (double) w[i] * x[i];
        sl += (double) w[i] * L[i];
        sll += (double) w[i] * L[i] * L[i];
        sxl += (double) w[i] * x[i] * L[i];
    }
    const double det = sw * sll - sl * sl;
    double s = 0, off = 0;  // x ~ s * L + off
    if (det > 0) {
        s = (sw * sxl - sl * sx) / det;
        off = (sll * sx - sl * sxl) / det;
    }
    if (det <= 0 || (off > 0 && !any_sign) || s < 0) {
        // Offset pinned to 0 (the format cannot add a positive offset).
        off = 0;
        s = sll > 0 ? sxl / sll : 0;
        if (s < 0) s = 0;
    }
    *s_out = (float) s;
    *m_out = (float) -off;
}

static float fit_scale_min(int n, const float * x, const float * w, int qmax, bool any_sign, uint8_t * L, float * m_out) {
    float xmin = x[0], xmax = x[0];
    for (int i = 1; i < n; i++) {
        xmin = fminf(xmin, x[i]);
        xmax = fmaxf(xmax, x[i]);
    }
    if (xmin > 0.0f && !any_sign) xmin = 0.0f;  // the min can only be subtracted
    if (xmax <= xmin) {
        memset(L, 0, n);
        *m_out = -xmin;
        return 0.0f;
    }
    uint8_t cand[256];
    double best_err = INFINITY;
    float best_s = 0.0f, best_m = 0.0f;
    for (int step = -SEARCH_STEPS; step <= SEARCH_STEPS; step++) {
        const float iscale = (qmax + 0.05f * step * qmax / 4.0f) / (xmax - xmin);
        if (iscale <= 0.0f) continue;
        for (int i = 0; i < n; i++) cand[i] = (uint8_t) clampi(quant_round(iscale * (x[i] - xmin)), 0, qmax);
        float s, m;
        solve_scale_min(n, x, w, cand, any_sign, &s, &m);
        // Re-round under the fitted scale and min, then refit once.
        if (s > 0.0f) {
            const float is = 1.0f / s;
            for (int i = 0; i < n; i++) cand[i] = (uint8_t) clampi(quant_round((x[i] + m) * is), 0, qmax);
            solve_scale_min(n, x, w, cand, any_sign, &s, &m);
        }
        const double err = quant_error(n, x, w, s, m, cand);
        if (err < best_err) {
            best_err = err;
            best_s = s;
            best_m = m;
            memcpy(L, cand, n);
        }
    }
    *m_out = best_m;
    return best_s;
}

float quant_fit_scale_min(int n, const float * x, const float * w, int qmax, uint8_t * L, float * m) {
    return fit_scale_min(n, x, w, qmax, false, L, m);
}
float quant_fit_scale_offset(int n, const float * x, const float * w, int qmax, uint8_t * L, float * m) {
    return fit_scale_min(n, x, w, qmax, true, L, m);
}

// Index of the level nearest to v (levels sorted ascending).
static int nearest_level(float v, const int8_t * levels, int nlev) {
    if (v <= levels[0]) return 0;
    if (v >= levels[nlev - 1]) return nlev - 1;
    int lo = 0, hi = nlev - 1;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (v < levels[mid]) hi = mid; else lo = mid;
    }
    return (v - levels[lo] <= levels[hi] - v) ? lo : hi;
}

float quant_fit_levels(int n, const float * x, const float * w, const int8_t * levels, int nlev, uint8_t * L) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    }
    // Which end the extreme value maps to: the level of largest magnitude with max's sign.
    const int extreme = max < 0 ? 0 : nlev - 1;
    if (amax < 1e-30f) {
        const int z = nearest_level(0.0f, levels, nlev);
        memset(L, z, n);
        return 0.0f;
    }
    uint8_t cand[256];
    double best_err = INFINITY;
    float best_s = 0.0f;
    for (int end = 0; end < 2; end++) {
        const float lev = (float) levels[end == 0 ? extreme : (nlev - 1 - extreme)];
        for (int step = -SEARCH_STEPS; step <= SEARCH_STEPS; step++) {
            const float iscale = (lev * (1.0f + 0.02f * step)) / max;
            double sxl = 0.0, sll = 0.0;
            for (int i = 0; i < n; i++) {
                cand[i] = (uint8_t) nearest_level(iscale * x[i], levels, nlev);
                const float l = levels[cand[i]];
                sxl += (double) w[i] * x[i] * l;
                sll += (double) w[i] * l * l;
            }
            if (sll <= 0.0) continue;
            const float s = (float) (sxl / sll);
            double err = 0.0;
            for (int i = 0; i < n; i++) {
                const double d = x[i] - (double) s * levels[cand[i]];
                err += w[i] * d * d;
            }
            if (err < best_err) {
                best_err = err;
                best_s = s;
                memcpy(L, cand, n);
            }
        }
    }
    return best_s;
}
