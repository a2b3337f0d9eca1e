// quants-iq-search.cpp - the quantizers of the grid IQ types: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
// IQ3_S, IQ1_S, IQ1_M. Each codes a group of 8 values (IQ3: 4) as one point of a grid, a subset
// of the lattice of level numbers (quants-iq-grids.h), times a sub-block scale; the searches
// below look for the codes with the least weighted squared error. Weights: the importance
// matrix's entry of the value's column; without one, the super-block's mean square plus the
// value's square (large values count more, as in other GGUF writers' quantizers; the plain error
// still comes out well below theirs).
//
// For a given scale the error of a group separates by coordinate, so rounding each coordinate to
// its nearest level gives the best lattice point, whatever the weights; when that point is on
// the grid it is the best grid point too. When it is not, the scale searches look among its
// precomputed neighbours (a list per lattice point, built once), and the final fit at the stored
// scales finds the best grid point of all (fit_exact: per-half error tables and pruned buckets).
//
// Per super-block: the signs (the IQ2 / IQ3 types code magnitudes apart; a 7-bit sign code
// forces one value of an odd group to the wrong sign), then per sub-block the float scale with
// the least error (a scan of scales around the largest magnitude's, each refitted by least
// squares, the best iterated; IQ1 starts from the exact best scale without the grid), then the
// F16 super-scale that rounds the sub-block scales to integer scales with the least cost (each
// sub-block's error grows with the square of its scale's move, weighted by its curvature), and
// finally each sub-block at the integer scales either side of its float scale, fitted exactly
// (for odd sign groups: which of the cheapest values to flip; for IQ1: which delta sign), the
// better kept. Last, the super-scale moves so that the block's error is orthogonal to its values
// (quant_unshrink_factor: the searches' least-squares fits shrink these coarse types by 5-15%).
//
// This file is compiled with -ffp-contract=off and sums in a fixed order (vector lanes by
// position, then a fixed tree), so every ISA picks the same codes: the same bytes everywhere.
// Rows are independent and the grids' tables are built once (std::call_once) and then only read:
// the same bytes whatever the threads.
#include "quants-iq.h"
#include "quants-iq-grids.h"
#include "quants-search.h"

#include <limits.h>
#include <math.h>
#include <string.h>

#include <algorithm>
#include <mutex>
#include <vector>

namespace {

typedef float f8 __attribute__((vector_size(32)));
typedef float f4 __attribute__((vector_size(16)));

inline float h2f(ggml_fp16_t h) { return GGML_FP16_TO_FP32(h); }
inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

// ---- lattices ---------------------------------------------------------------------------------
// One grid over its lattice: nlev levels per coordinate, dim coordinates. A lattice point is
// numbered by its level numbers in base nlev, coordinate 0 lowest.
struct lattice {
    int dim = 0, nlev = 0, n = 0;
    float lev[8] = {}, mid[7] = {};       // level values and the midpoints between neighbours
    std::vector<float> gv;                // n * dim: each grid point's level values
    int nhalf = 0;                        // nlev^(dim/2): the values of a half of the coordinates
    std::vector<uint16_t> bucket;         // nhalf + 1 offsets: the grid points by their second half
    std::vector<uint8_t> bucket_lo;       // ... their first halves
    std::vector<uint16_t> bucket_idx;     // ... their grid indices
    std::vector<int32_t> map;             // lattice point: its grid index (>= 0) or -1 - offset of its list
    std::vector<uint16_t> lists;          // per off-grid point: a count, then the grid indices
};

// Neighbour lists: the grid points within squared level-number distance dmin + margin of an
// off-grid lattice point (dmin: its nearest), nearest first, at most cap of them. Wider lists cost
// time in every scale search; they only need to hold the usual winners, the final fit is exact.
void build_lattice(lattice & L, const uint16_t * packed, int n, int dim, int bits, const int8_t * levels, int nlev,
                   int margin, int cap) {
    L.dim = dim, L.nlev = nlev, L.n = n;
    for (int l = 0; l < nlev; l++) L.lev[l] = levels[l];
    for (int l = 0; l + 1 < nlev; l++) L.mid[l] = 0.5f * (L.lev[l] + L.lev[l + 1]);
    int npts = 1, nhalf = 1;
    for (int j = 0; j < dim; j++) npts *= nlev;
    for (int j = 0; j < dim / 2; j++) nhalf *= nlev;
    std::vector<uint8_t> code((size_t) n * dim);
    L.gv.resize((size_t) n * dim);
    L.nhalf = nhalf;
    std::vector<int> pts(n);
    L.map.assign(npts, INT32_MIN);
    for (int i = 0; i < n; i++) {
        int p = 0;
        for (int j = dim - 1; j >= 0; j--) {
            const int c = (packed[i] >> (bits * j)) & ((1 << bits) - 1);
            code[(size_t) i * dim + j] = (uint8_t) c;
            L.gv[(size_t) i * dim + j] = levels[c];
            p = p * nlev + c;
        }
        pts[i] = p;
        L.map[p] = i;
    }
    L.bucket.assign(nhalf + 1, 0);
    for (int i = 0; i < n; i++) L.bucket[pts[i] / nhalf + 1]++;
    for (int h = 0; h < nhalf; h++) L.bucket[h + 1] += L.bucket[h];
    L.bucket_lo.resize(n);
    L.bucket_idx.resize(n);
    std::vector<uint16_t> fill(L.bucket.begin(), L.bucket.end() - 1);
    for (int i = 0; i < n; i++) {
        const int k = fill[pts[i] / nhalf]++;
        L.bucket_lo[k] = (uint8_t) (pts[i] % nhalf);
        L.bucket_idx[k] = (uint16_t) i;
    }
    std::vector<int> dist(n);
    std::vector<std::pair<int, int>> near;
    int c[8];
    for (int p = 0; p < npts; p++) {
        if (L.map[p] >= 0) continue;
        for (int j = 0, q = p; j < dim; j++, q /= nlev) c[j] = q % nlev;
        int dmin = INT_MAX;
        for (int i = 0; i < n; i++) {
            int d = 0;
            for (int j = 0; j < dim; j++) d += (c[j] - code[(size_t) i * dim + j]) * (c[j] - code[(size_t) i * dim + j]);
            dist[i] = d;
            dmin = std::min(dmin, d);
        }
        near.clear();
        for (int i = 0; i < n; i++) {
            if (dist[i] <= dmin + margin) near.emplace_back(dist[i], i);
        }
        std::sort(near.begin(), near.end());
        if ((int) near.size() > cap) near.resize(cap);
        L.map[p] = -1 - (int) L.lists.size();
        L.lists.push_back((uint16_t) near.size());
        for (const auto & e : near) L.lists.push_back((uint16_t) e.second);
    }
}

enum lattice_id { LAT_IQ2XXS, LAT_IQ2XS, LAT_IQ2S, LAT_IQ3XXS, LAT_IQ3S, LAT_IQ1S, LAT_COUNT };

const lattice & get_lattice(lattice_id id) {
    static lattice lat[LAT_COUNT];
    static std::once_flag once[LAT_COUNT];
    std::call_once(once[id], [id]() {
        using namespace ggml_iq;
        lattice & L = lat[id];
        switch (id) {
            case LAT_IQ2XXS: build_lattice(L, iq2xxs_packed, 256, 8, 2, levels_iq2, 3, 1, 32); break;
            case LAT_IQ2XS: build_lattice(L, iq2xs_packed, 512, 8, 2, levels_iq2, 3, 1, 32); break;
            case LAT_IQ2S: build_lattice(L, iq2s_packed, 1024, 8, 2, levels_iq2, 3, 1, 32); break;
            case LAT_IQ3XXS: build_lattice(L, iq3xxs_packed, 256, 4, 3, levels_iq3xxs, 8, 2, 32); break;
            case LAT_IQ3S: build_lattice(L, iq3s_packed, 512, 4, 3, levels_iq3s, 8, 2, 32); break;
            case LAT_IQ1S: build_lattice(L, iq1s_packed, 2048, 8, 2, levels_iq1, 3, 0, 32); break;
            default: break;
        }
    });
    return lat[id];
}

// ---- fitting one group to the grid -------------------------------------------------------------
// Targets a (DIM values), weights w, scale s > 0, level offset off (IQ1's delta; 0 elsewhere): the
// group decodes as s * (level + off). Each returns the grid index and its error in *err.

// Indices sorted by key, ascending, ties kept in their order (n is small: an insertion sort, no
// allocation).
template <typename K> void sort_by(int * idx, int n, K key) {
    for (int i = 1; i < n; i++) {
        const int v = idx[i];
        int j = i;
        for (; j > 0 && key(v) < key(idx[j - 1]); j--) idx[j] = idx[j - 1];
        idx[j] = v;
    }
}

template <int DIM> struct vec_of;
template <> struct vec_of<8> { typedef f8 type; };
template <> struct vec_of<4> { typedef f4 type; };

template <int DIM> inline typename vec_of<DIM>::type loadv(const float * p) {
    typename vec_of<DIM>::type v;
    memcpy(&v, p, sizeof(v));
    return v;
}
inline float hsum(f8 v) { return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7])); }
inline float hsum(f4 v) { return (v[0] + v[1]) + (v[2] + v[3]); }

template <int DIM> inline float point_error(const float * a, const float * w, const float * g, float s, float off) {
    const auto d = loadv<DIM>(a) - s * (loadv<DIM>(g) + off);
    return hsum(loadv<DIM>(w) * d * d);
}

// The best grid point among the rounded lattice point's neighbours (itself when on the grid).
template <int DIM> inline int fit_near(const lattice & L, const float * a, const float * w, float s, float off, float * err) {
    const float is = 1.0f / s;
    int p = 0;
    for (int j = DIM - 1; j >= 0; j--) {
        const float t = a[j] * is - off;
        int c = 0;
        for (int m = 0; m + 1 < L.nlev; m++) c += t > L.mid[m];
        p = p * L.nlev + c;
    }
    const int m = L.map[p];
    if (m >= 0) {
        *err = point_error<DIM>(a, w, &L.gv[(size_t) m * DIM], s, off);
        return m;
    }
    const uint16_t * list = &L.lists[-1 - m];
    int best = list[1];
    float best_err = INFINITY;
    for (int k = 1; k <= list[0]; k++) {
        const float e = point_error<DIM>(a, w, &L.gv[(size_t) list[k] * DIM], s, off);
        if (e < best_err) {
            best_err = e;
            best = list[k];
        }
    }
    *err = best_err;
    return best;
}

// The best grid point of all. The rounded lattice point is it when on the grid; else the error
// of a point is the sum of its coordinates' errors, tabled per half of the coordinates (nlev^(DIM/2)
// sums each), and the points are visited by their second half: a whole bucket is passed over when
// its half's sum plus the least first-half sum cannot beat the best so far (float additions are
// monotonic, so the pruning never loses the best), which leaves few buckets to look into.
template <int DIM> inline int fit_exact(const lattice & L, const float * a, const float * w, float s, float off, float * err) {
    const int nl = L.nlev, nh = L.nhalf;
    const float is = 1.0f / s;
    int p = 0;
    for (int j = DIM - 1; j >= 0; j--) {
        const float t = a[j] * is - off;
        int c = 0;
        for (int m = 0; m + 1 < nl; m++) c += t > L.mid[m];
        p = p * nl + c;
    }
    if (L.map[p] >= 0) {
        *err = point_error<DIM>(a, w, &L.gv[(size_t) L.map[p] * DIM], s, off);
        return L.map[p];
    }
    float c[DIM][8];
    for (int j = 0; j < DIM; j++) {
        for (int l = 0; l < nl; l++) {
            const float d = a[j] - s * (L.lev[l] + off);
            c[j][l] = w[j] * d * d;
        }
    }
    float t[2][81];
    for (int h = 0; h < 2; h++) {
        t[h][0] = 0.0f;
        int size = 1;
        for (int j = h * DIM / 2; j < (h + 1) * DIM / 2; j++) {
            // extend by coordinate j: entries i + size * l (the higher coordinate more significant)
            for (int l = nl - 1; l >= 0; l--) {
                for (int i = 0; i < size; i++) t[h][i + size * l] = t[h][i] + c[j][l];
            }
            size *= nl;
        }
    }
    // the least first-half sum: the per-coordinate least errors added in the tables' order
    float min_lo = 0.0f;
    for (int j = 0; j < DIM / 2; j++) min_lo += *std::min_element(c[j], c[j] + nl);
    int best = 0;
    float best_err = INFINITY;
    // the rounded point's own bucket first: its points are likely close, a tight bound early
    const int h0 = p / nh;
    for (int hh = -1; hh < nh; hh++) {
        const int h = hh < 0 ? h0 : hh;
        if ((hh >= 0 && h == h0) || !(t[1][h] + min_lo < best_err)) continue;
        for (int k = L.bucket[h]; k < L.bucket[h + 1]; k++) {
            const float e = t[1][h] + t[0][L.bucket_lo[k]];
            if (e < best_err) {
                best_err = e;
                best = L.bucket_idx[k];
            }
        }
    }
    *err = best_err;
    return best;
}

// Sums of the least-squares scale of grid point g: sum w a v and sum w v^2 (v = level + off).
template <int DIM> inline void point_sums(const float * a, const float * w, const float * g, float off, float * sav, float * svv) {
    const auto v = loadv<DIM>(g) + off;
    const auto wv = loadv<DIM>(w) * v;
    *sav = hsum(wv * loadv<DIM>(a));
    *svv = hsum(wv * v);
}

// ---- the super-scale ---------------------------------------------------------------------------
// Sub-block scales as the decoders compute them from d and the integer scale ls.
enum scale_kind { SC_IQ2, SC_IQ3XXS, SC_ODD };

inline float sub_scale(scale_kind k, float d, int ls) {
    switch (k) {
        case SC_IQ2: return d * (0.5f + (float) ls) * 0.25f;
        case SC_IQ3XXS: return d * (0.5f + (float) ls) * 0.5f;
        default: return d * (float) (1 + 2 * ls);  // IQ3_S, IQ1_S, IQ1_M
    }
}
// The scale as d * kmul * (ls + 0.5): the kmul of each kind.
inline float scale_mul(scale_kind k) { return k == SC_IQ2 ? 0.25f : k == SC_IQ3XXS ? 0.5f : 2.0f; }

const int kSuperSteps = 20;
const float kSuperStep = 0.01f;

// The F16 super-scale from the sub-blocks' float scales sb and the curvatures cb of their errors
// there (sum w v^2 of their points: moving a sub-block's scale by t costs about cb t^2 while its
// points stay, and the final fit can only do better). Candidates: factors around the super-scale
// that gives the largest sub-block the top integer scale (below it that sub-block clips, above
// it the steps coarsen); each sub-block takes the cheaper integer scale either side of its own.
ggml_fp16_t fit_super_scale(scale_kind k, int lsmax, int nsub, const float * sb, const float * cb) {
    float smax = 0.0f;
    for (int b = 0; b < nsub; b++) smax = std::max(smax, sb[b]);
    if (!(smax > 0.0f)) return GGML_FP32_TO_FP16(0.0f);
    const float kmul = scale_mul(k);
    const float d0 = smax / (kmul * ((float) lsmax + 0.5f));
    double best_cost = INFINITY;
    ggml_fp16_t best = 0x0001;  // (all candidates below F16's range: its least positive value)
    for (int step = -kSuperSteps; step <= kSuperSteps; step++) {
        // (at most F16's largest: larger values than the format holds clip rather than decode as inf)
        const ggml_fp16_t dh = GGML_FP32_TO_FP16(std::min(d0 * (1.0f + kSuperStep * (float) step), 65504.0f));
        const float d = h2f(dh);
        if (!(d > 0.0f)) continue;
        double cost = 0.0;
        for (int b = 0; b < nsub; b++) {
            const int l0 = clampi((int) floorf(sb[b] / (d * kmul) - 0.5f), 0, lsmax), l1 = std::min(l0 + 1, lsmax);
            const float e0 = sub_scale(k, d, l0) - sb[b], e1 = sub_scale(k, d, l1) - sb[b];
            cost += (double) cb[b] * std::min(e0 * e0, e1 * e1);
        }
        if (cost < best_cost) {
            best_cost = cost;
            best = dh;
        }
    }
    return best;
}

// ---- IQ2 / IQ3: magnitudes on the grid, signs apart -------------------------------------------
struct sg_spec {
    lattice_id lat;
    int dim;          // values per grid point: 8 (IQ2), 4 (IQ3)
    int sub;          // values per integer scale: 32, or 16 (IQ2_XS, IQ2_S)
    bool parity;      // 7-bit sign codes: an even number of negatives per 8 values
    scale_kind kind;  // how d and the 4-bit integer scale give a sub-block's scale
};

struct sg_block {
    ggml_fp16_t d;
    uint8_t ls[QK_K / 16];     // per sub-block
    uint16_t idx[QK_K / 4];    // per grid point
    uint8_t signs[QK_K / 8];   // per 8 values: bit j set = value j negative (even count with parity)
};

// Scan and refinement of the float scale of one sub-block: factors of the scale that puts the
// largest magnitude on the top level (the levels are few: the best often clips it).
const float kScanFactors[] = { 0.68f, 0.76f, 0.84f, 0.92f, 1.0f, 1.09f, 1.2f };
const int kRefine = 3;

// Error of n targets (n / DIM grid points) at scale s with neighbour-list fits, and the sums of
// the least-squares scale of the points found.
template <int DIM>
float fit_sub_near(const lattice & L, const float * a, const float * w, int n, float s, float off, float * sav, float * svv) {
    float err = 0.0f, sa = 0.0f, sv = 0.0f;
    for (int i = 0; i < n; i += DIM) {
        float e, pa, pv;
        const int g = fit_near<DIM>(L, a + i, w + i, s, off, &e);
        point_sums<DIM>(a + i, w + i, &L.gv[(size_t) g * DIM], off, &pa, &pv);
        err += e, sa += pa, sv += pv;
    }
    *sav = sa, *svv = sv;
    return err;
}

template <int DIM> float search_sub_scale(const lattice & L, const float * a, const float * w, int n, float * curv) {
    float amax = 0.0f;
    for (int i = 0; i < n; i++) amax = std::max(amax, a[i]);
    *curv = 0.0f;
    if (!(amax > 1e-30f)) return 0.0f;
    const float s0 = amax / L.lev[L.nlev - 1];
    double best_gain = 0.0;  // the least-squares fit removes sav^2 / svv from the error
    float best_s = 0.0f;
    // the scan, then (three levels: IQ2) the largest magnitude on each lower level: for sub-blocks
    // of about equal magnitudes, which the top level's neighbourhood misses
    const int nscan = (int) (sizeof(kScanFactors) / sizeof(kScanFactors[0]));
    for (int k = 0; k < nscan + (L.nlev == 3 ? L.nlev - 1 : 0); k++) {
        const float s = k < nscan ? s0 * kScanFactors[k] : amax / L.lev[k - nscan];
        float sav, svv;
        fit_sub_near<DIM>(L, a, w, n, s, 0.0f, &sav, &svv);
        if (sav > 0.0f && svv > 0.0f && (double) sav * sav / svv > best_gain) {
            best_gain = (double) sav * sav / svv;
            best_s = sav / svv;
            *curv = svv;
        }
    }
    for (int it = 0; it < kRefine && best_s > 0.0f; it++) {
        float sav, svv;
        fit_sub_near<DIM>(L, a, w, n, best_s, 0.0f, &sav, &svv);
        if (!(sav > 0.0f && svv > 0.0f && (double) sav * sav / svv > best_gain * (1.0 + 1e-6))) break;
        best_gain = (double) sav * sav / svv;
        best_s = sav / svv;
        *curv = svv;
    }
    return best_s;
}

// Flip candidates of an odd sign group: its values by the cost of a wrong sign (w |x|), cheapest
// first. Only the few cheapest can win: a wrong sign costs 4 s w |x| level.
const int kFlipTries = 2;

// The final fit of one sub-block at scale s: every grid point exact, and for each odd sign group
// the flip among its cheapest values that errs least. Writes indices and sign bytes.
template <int DIM>
double fit_sub_final(const sg_spec & S, const lattice & L, const float * x, const float * w, float s, uint16_t * idx, uint8_t * signs) {
    double total = 0.0;
    for (int g = 0; g < S.sub / 8; g++) {
        const float * xg = x + 8 * g;
        const float * wg = w + 8 * g;
        float a[8];
        uint8_t nat = 0;
        for (int j = 0; j < 8; j++) {
            a[j] = fabsf(xg[j]);
            nat |= (uint8_t) ((xg[j] < 0.0f) << j);
        }
        const int npts = 8 / DIM;
        if (!S.parity || (__builtin_popcount(nat) & 1) == 0) {
            for (int p = 0; p < npts; p++) {
                float e;
                idx[g * npts + p] = (uint16_t) fit_exact<DIM>(L, a + p * DIM, wg + p * DIM, s, 0.0f, &e);
                total += e;
            }
            signs[g] = nat;
            continue;
        }
        // the points' fits without a flip, then each candidate flip refits its own point
        float e_nat[2] = { 0.0f, 0.0f };
        int i_nat[2] = { 0, 0 };
        for (int p = 0; npts > 1 && p < npts; p++) i_nat[p] = fit_exact<DIM>(L, a + p * DIM, wg + p * DIM, s, 0.0f, &e_nat[p]);
        int order[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
        sort_by(order, 8, [&](int i) { return wg[i] * a[i]; });
        float best = INFINITY;
        for (int t = 0; t < kFlipTries; t++) {
            const int k = order[t], p = k / DIM;
            float af[8];
            memcpy(af, a, sizeof(af));
            af[k] = -af[k];
            float e;
            const int ik = fit_exact<DIM>(L, af + p * DIM, wg + p * DIM, s, 0.0f, &e);
            float sum = e;
            for (int q = 0; q < npts; q++) sum += q == p ? 0.0f : e_nat[q];
            if (sum < best) {
                best = sum;
                for (int q = 0; q < npts; q++) idx[g * npts + q] = (uint16_t) (q == p ? ik : i_nat[q]);
                signs[g] = (uint8_t) (nat ^ (1 << k));
            }
        }
        total += best;
    }
    return total;
}

// The error of coding every value as 0.
double zero_error(const float * x, const float * w) {
    double e = 0.0;
    for (int i = 0; i < QK_K; i++) e += (double) w[i] * x[i] * x[i];
    return e;
}

// Every sub-block at the integer scales either side of its float scale under super-scale dh, fitted
// exactly; the better kept. Returns the total error.
template <int DIM>
double final_fit(const sg_spec & S, const lattice & L, const float * x, const float * w, const float * sb, ggml_fp16_t dh, sg_block & out) {
    const float d = h2f(dh), kmul = scale_mul(S.kind);
    uint16_t idx[QK_K / 4];
    uint8_t signs[QK_K / 8];
    out.d = dh;
    double total = 0.0;
    for (int b = 0; b < QK_K / S.sub; b++) {
        const int l0 = clampi((int) floorf(sb[b] / (d * kmul) - 0.5f), 0, 15);
        double best = INFINITY;
        for (int ls = l0; ls <= std::min(15, l0 + 1); ls++) {
            const double e = fit_sub_final<DIM>(S, L, x + b * S.sub, w + b * S.sub, sub_scale(S.kind, d, ls), idx, signs);
            if (e < best) {
                best = e;
                out.ls[b] = (uint8_t) ls;
                memcpy(out.idx + b * S.sub / DIM, idx, S.sub / DIM * sizeof(uint16_t));
                memcpy(out.signs + b * S.sub / 8, signs, S.sub / 8);
            }
        }
        total += best;
    }
    return total;
}

template <int DIM> void quantize_signed_grid(const sg_spec & S, const float * x, const float * w, sg_block & out) {
    const lattice & L = get_lattice(S.lat);
    const int nsub = QK_K / S.sub;
    // Targets of the scale searches: the magnitudes, one per odd sign group negated (its cheapest
    // w |x|: the final fit tries others).
    float a[QK_K];
    for (int g = 0; g < QK_K / 8; g++) {
        int nneg = 0, k = 0;
        for (int j = 0; j < 8; j++) {
            const int i = 8 * g + j;
            a[i] = fabsf(x[i]);
            nneg += x[i] < 0.0f;
            if (w[i] * a[i] < w[8 * g + k] * a[8 * g + k]) k = j;
        }
        if (S.parity && (nneg & 1)) a[8 * g + k] = -a[8 * g + k];
    }
    float sb[QK_K / 16], cb[QK_K / 16];
    for (int b = 0; b < nsub; b++) sb[b] = search_sub_scale<DIM>(L, a + b * S.sub, w + b * S.sub, S.sub, &cb[b]);
    const ggml_fp16_t dh = fit_super_scale(S.kind, 15, nsub, sb, cb);
    if (!(h2f(dh) > 0.0f)) {  // nothing to code: every value 0 (d = 0 decodes so whatever the codes)
        memset(&out, 0, sizeof(out));
        return;
    }
    // (coding zeros, d = 0, can be better: values below what an F16 super-scale reaches)
    if (final_fit<DIM>(S, L, x, w, sb, dh, out) > zero_error(x, w)) memset(&out, 0, sizeof(out));
}

// Per-value weights of one super-block: the importance matrix slice (non-positive entries: almost
// nothing), or without one the block's mean square plus the value's square.
// sigma_mult: llama.cpp's for the type (1 for IQ2_XXS and IQ2_XS, 2 for the others).
void block_weights(const float * qw, const float * x, float * w, float sigma_mult) {
    if (qw) {
        quant_imatrix_weights(QK_K, x, qw, sigma_mult, w);
        return;
    }
    float s2 = 0.0f;
    for (int i = 0; i < QK_K; i++) s2 += x[i] * x[i];
    s2 = s2 / QK_K + 1e-30f;
    for (int i = 0; i < QK_K; i++) w[i] = s2 + x[i] * x[i];
}

const sg_spec kIQ2XXS = { LAT_IQ2XXS, 8, 32, true, SC_IQ2 };
const sg_spec kIQ2XS = { LAT_IQ2XS, 8, 16, true, SC_IQ2 };
const sg_spec kIQ2S = { LAT_IQ2S, 8, 16, false, SC_IQ2 };
const sg_spec kIQ3XXS = { LAT_IQ3XXS, 4, 32, true, SC_IQ3XXS };
const sg_spec kIQ3S = { LAT_IQ3S, 4, 32, false, SC_ODD };

// ---- IQ1: levels -1, 0, 1 plus a delta, signs in the levels -------------------------------------
// A sub-block (its integer scale: 32 values IQ1_S, 16 IQ1_M) holds units of the delta's sign (32
// values IQ1_S, 8 IQ1_M); each unit tries both signs.
struct iq1_spec {
    int sub, unit;
    float delta;
};

struct iq1_block {
    ggml_fp16_t d;
    uint8_t ls[QK_K / 16];
    uint16_t idx[QK_K / 8];
    uint8_t neg[QK_K / 8];  // per unit: the delta negative
};

// Error of a unit's groups at scale s with the delta's sign sigma (+1 / -1), near or exact fits.
template <bool EXACT>
float fit_unit(const lattice & L, const float * x, const float * w, int n, float s, float off, uint16_t * idx, float * sav, float * svv) {
    float err = 0.0f, sa = 0.0f, sv = 0.0f;
    for (int i = 0; i < n; i += 8) {
        float e, pa, pv;
        const int g = EXACT ? fit_exact<8>(L, x + i, w + i, s, off, &e) : fit_near<8>(L, x + i, w + i, s, off, &e);
        if (idx) idx[i / 8] = (uint16_t) g;
        point_sums<8>(x + i, w + i, &L.gv[(size_t) g * 8], off, &pa, &pv);
        err += e, sa += pa, sv += pv;
    }
    *sav = sa, *svv = sv;
    return err;
}

// A sub-block at scale s, each unit with its better delta sign (only_sign: 0 / 1 for the
// positive / negative delta alone, -1 both); the sums of the least-squares scale of the points
// found, the indices and signs when asked.
template <bool EXACT>
float fit_iq1_sub(const iq1_spec & S, const lattice & L, const float * x, const float * w, float s, float * sav, float * svv,
                  uint16_t * idx, uint8_t * neg, int only_sign = -1) {
    float err = 0.0f, sa = 0.0f, sv = 0.0f;
    uint16_t ib[2][4];
    for (int u = 0; u < S.sub / S.unit; u++) {
        float e[2] = { INFINITY, INFINITY }, a[2] = { 0.0f, 0.0f }, v[2] = { 0.0f, 0.0f };
        for (int sg = 0; sg < 2; sg++) {
            if (only_sign >= 0 && sg != only_sign) continue;
            e[sg] = fit_unit<EXACT>(L, x + u * S.unit, w + u * S.unit, S.unit, s, sg ? -S.delta : S.delta, idx ? ib[sg] : nullptr,
                                    &a[sg], &v[sg]);
        }
        const int sg = e[1] < e[0];
        err += e[sg], sa += a[sg], sv += v[sg];
        if (idx) {
            memcpy(idx + u * S.unit / 8, ib[sg], S.unit / 8 * sizeof(uint16_t));
            neg[u] = (uint8_t) sg;
        }
    }
    *sav = sa, *svv = sv;
    return err;
}

// The best scale of n values on the levels {-1, 0, 1} + off, the grid aside, and *gain, the error
// it removes. The best assignment is the nearest-level one at its own least-squares scale s, and
// as s falls from infinity (everything on the middle level) each value moves once, to the top
// level below s = x / (1/2 + off) when positive, to the bottom one below s = -x / (1/2 - off)
// when negative: the n assignments in that order hold the best, each from the last by one update.
// pos / neg: the positive and negative values' indices by magnitude, largest first (the order
// within each is the same for either delta; the two merge by their keys).
float iq1_free_scale(const float * x, const float * w, int n, const int * pos, int npos, const int * neg, int nneg, float off,
                     double * gain) {
    const double v0 = -1.0 + off, v1 = off, v2 = 1.0 + off;
    const float rp = 1.0f / (0.5f + off), rn = 1.0f / (0.5f - off);
    double xv = 0.0, vv = 0.0;
    for (int i = 0; i < n; i++) {
        xv += v1 * w[i] * x[i];
        vv += v1 * v1 * w[i];
    }
    double best = 0.0, best_s = 0.0;
    if (xv > 0.0 && vv > 0.0) best = xv * xv / vv, best_s = xv / vv;
    for (int ip = 0, in = 0; ip < npos || in < nneg;) {
        const bool up = in == nneg || (ip < npos && x[pos[ip]] * rp >= -x[neg[in]] * rn);
        const int i = up ? pos[ip++] : neg[in++];
        const double v = up ? v2 : v0;
        xv += (v - v1) * w[i] * x[i];
        vv += (v * v - v1 * v1) * w[i];
        if (xv > 0.0 && xv * xv > best * vv) {
            best = xv * xv / vv;
            best_s = xv / vv;
        }
    }
    *gain = best;
    return (float) best_s;
}

const float kIQ1Factors[] = { 0.9f, 1.0f, 1.1f };

float iq1_sub_scale(const iq1_spec & S, const lattice & L, const float * x, const float * w, float * curv) {
    int pos[32], neg[32], npos = 0, nneg = 0;
    for (int i = 0; i < S.sub; i++) {
        if (x[i] > 0.0f) pos[npos++] = i;
        if (x[i] < 0.0f) neg[nneg++] = i;
    }
    sort_by(pos, npos, [&](int i) { return -x[i]; });
    sort_by(neg, nneg, [&](int i) { return x[i]; });
    double g0, g1;
    const float s0 = iq1_free_scale(x, w, S.sub, pos, npos, neg, nneg, S.delta, &g0);
    const float s1 = iq1_free_scale(x, w, S.sub, pos, npos, neg, nneg, -S.delta, &g1);
    const float su = g1 > g0 ? s1 : s0;
    // IQ1_S: one delta sign for the sub-block, the free fit's (the final fit tries both)
    const int only_sign = S.unit == S.sub ? g1 > g0 : -1;
    *curv = 0.0f;
    if (!(su > 0.0f)) return 0.0f;
    double best_gain = 0.0;
    float best_s = 0.0f;
    for (float f : kIQ1Factors) {
        float sav, svv;
        fit_iq1_sub<false>(S, L, x, w, su * f, &sav, &svv, nullptr, nullptr, only_sign);
        if (sav > 0.0f && svv > 0.0f && (double) sav * sav / svv > best_gain) {
            best_gain = (double) sav * sav / svv;
            best_s = sav / svv;
            *curv = svv;
        }
    }
    for (int it = 0; it < kRefine && best_s > 0.0f; it++) {
        float sav, svv;
        fit_iq1_sub<false>(S, L, x, w, best_s, &sav, &svv, nullptr, nullptr, only_sign);
        if (!(sav > 0.0f && svv > 0.0f && (double) sav * sav / svv > best_gain * (1.0 + 1e-6))) break;
        best_gain = (double) sav * sav / svv;
        best_s = sav / svv;
        *curv = svv;
    }
    return best_s;
}

void quantize_iq1(const iq1_spec & S, const float * x, const float * w, iq1_block & out) {
    const lattice & L = get_lattice(LAT_IQ1S);
    const int nsub = QK_K / S.sub, units = S.sub / S.unit;
    float sb[QK_K / 16], cb[QK_K / 16];
    for (int b = 0; b < nsub; b++) sb[b] = iq1_sub_scale(S, L, x + b * S.sub, w + b * S.sub, &cb[b]);
    const ggml_fp16_t dh = fit_super_scale(SC_ODD, 7, nsub, sb, cb);
    memset(&out, 0, sizeof(out));
    out.d = dh;
    const float d = h2f(dh);
    if (!(d > 0.0f)) return;
    uint16_t idx[QK_K / 8];
    uint8_t neg[QK_K / 8];
    double total = 0.0;
    for (int b = 0; b < nsub; b++) {
        const int l0 = clampi((int) floorf(sb[b] / (2.0f * d) - 0.5f), 0, 7);
        double best = INFINITY;
        for (int ls = l0; ls <= std::min(7, l0 + 1); ls++) {
            float sav, svv;
            const double e = fit_iq1_sub<true>(S, L, x + b * S.sub, w + b * S.sub, sub_scale(SC_ODD, d, ls), &sav, &svv, idx, neg);
            if (e < best) {
                best = e;
                out.ls[b] = (uint8_t) ls;
                memcpy(out.idx + b * S.sub / 8, idx, S.sub / 8 * sizeof(uint16_t));
                memcpy(out.neg + b * units, neg, units);
            }
        }
        total += best;
    }
    if (total > zero_error(x, w)) memset(&out, 0, sizeof(out));
}

}  // namespace

// ---- the rows ---------------------------------------------------------------------------------
void quantize_row_iq2_xxs(const float * x, block_iq2_xxs * y, int64_t n, const float * qw) {
    float w[QK_K];
    sg_block q;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, qw = qw ? qw + QK_K : nullptr) {
        block_weights(qw, x, w, 1.0f);
        quantize_signed_grid<8>(kIQ2XXS, x, w, q);
        y[b].d = q.d;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            uint8_t idx[4];
            uint32_t aux = (uint32_t) q.ls[ib] << 28;
            for (int l = 0; l < 4; l++) {
                idx[l] = (uint8_t) q.idx[4 * ib + l];
                aux |= (uint32_t) (q.signs[4 * ib + l] & 127) << (7 * l);
            }
            memcpy(y[b].qs + 4 * ib, idx, 4);
            memcpy(y[b].qs + 4 * ib + 2, &aux, 4);
        }
        quant_unshrink_block<block_iq2_xxs, dequantize_row_iq2_xxs>(y[b], x, qw, QK_K, &y[b].d);
    }
}

void quantize_row_iq2_xs(const float * x, block_iq2_xs * y, int64_t n, const float * qw) {
    float w[QK_K];
    sg_block q;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, qw = qw ? qw + QK_K : nullptr) {
        block_weights(qw, x, w, 1.0f);
        quantize_signed_grid<8>(kIQ2XS, x, w, q);
        y[b].d = q.d;
        for (int i = 0; i < QK_K / 8; i++) y[b].qs[i] = (uint16_t) (q.idx[i] | ((q.signs[i] & 127) << 9));
        for (int ib = 0; ib < QK_K / 32; ib++) y[b].scales[ib] = (uint8_t) (q.ls[2 * ib] | (q.ls[2 * ib + 1] << 4));
        quant_unshrink_block<block_iq2_xs, dequantize_row_iq2_xs>(y[b], x, qw, QK_K, &y[b].d);
    }
}

void quantize_row_iq2_s(const float * x, block_iq2_s * y, int64_t n, const float * qw) {
    float w[QK_K];
    sg_block q;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, qw = qw ? qw + QK_K : nullptr) {
        block_weights(qw, x, w, 2.0f);
        quantize_signed_grid<8>(kIQ2S, x, w, q);
        y[b].d = q.d;
        memset(y[b].qh, 0, sizeof(y[b].qh));
        for (int i = 0; i < QK_K / 8; i++) {
            y[b].qs[i] = (uint8_t) q.idx[i];
            y[b].qh[i / 4] |= (uint8_t) ((q.idx[i] >> 8) << (2 * (i % 4)));
            y[b].qs[QK_K / 8 + i] = q.signs[i];
        }
        for (int ib = 0; ib < QK_K / 32; ib++) y[b].scales[ib] = (uint8_t) (q.ls[2 * ib] | (q.ls[2 * ib + 1] << 4));
        quant_unshrink_block<block_iq2_s, dequantize_row_iq2_s>(y[b], x, qw, QK_K, &y[b].d);
    }
}

void quantize_row_iq3_xxs(const float * x, block_iq3_xxs * y, int64_t n, const float * qw) {
    float w[QK_K];
    sg_block q;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, qw = qw ? qw + QK_K : nullptr) {
        block_weights(qw, x, w, 2.0f);
        quantize_signed_grid<4>(kIQ3XXS, x, w, q);
        y[b].d = q.d;
        for (int i = 0; i < QK_K / 4; i++) y[b].qs[i] = (uint8_t) q.idx[i];
        for (int ib = 0; ib < QK_K / 32; ib++) {
            uint32_t aux = (uint32_t) q.ls[ib] << 28;
            for (int l = 0; l < 4; l++) aux |= (uint32_t) (q.signs[4 * ib + l] & 127) << (7 * l);
            memcpy(y[b].qs + QK_K / 4 + 4 * ib, &aux, 4);
        }
        quant_unshrink_block<block_iq3_xxs, dequantize_row_iq3_xxs>(y[b], x, qw, QK_K, &y[b].d);
    }
}

void quantize_row_iq3_s(const float * x, block_iq3_s * y, int64_t n, const float * qw) {
    float w[QK_K];
    sg_block q;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, qw = qw ? qw + QK_K : nullptr) {
        block_weights(qw, x, w, 2.0f);
        quantize_signed_grid<4>(kIQ3S, x, w, q);
        y[b].d = q.d;
        memset(y[b].qh, 0, sizeof(y[b].qh));
        for (int i = 0; i < QK_K / 4; i++) {
            y[b].qs[i] = (uint8_t) q.idx[i];
            y[b].qh[i / 8] |= (uint8_t) ((q.idx[i] >> 8) << (i % 8));
        }
        memcpy(y[b].signs, q.signs, sizeof(y[b].signs));
        for (int ib = 0; ib < QK_K / 64; ib++) y[b].scales[ib] = (uint8_t) (q.ls[2 * ib] | (q.ls[2 * ib + 1] << 4));
        quant_unshrink_block<block_iq3_s, dequantize_row_iq3_s>(y[b], x, qw, QK_K, &y[b].d);
    }
}

void quantize_row_iq1_s(const float * x, block_iq1_s * y, int64_t n, const float * qw) {
    static const iq1_spec spec = { 32, 32, IQ1S_DELTA };
    float w[QK_K];
    iq1_block q;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, qw = qw ? qw + QK_K : nullptr) {
        block_weights(qw, x, w, 2.0f);
        quantize_iq1(spec, x, w, q);
        y[b].d = q.d;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            uint16_t h = (uint16_t) ((q.ls[ib] << 12) | (q.neg[ib] << 15));
            for (int l = 0; l < 4; l++) {
                y[b].qs[4 * ib + l] = (uint8_t) q.idx[4 * ib + l];
                h |= (uint16_t) ((q.idx[4 * ib + l] >> 8) << (3 * l));
            }
            y[b].qh[ib] = h;
        }
        quant_unshrink_block<block_iq1_s, dequantize_row_iq1_s>(y[b], x, qw, QK_K, &y[b].d);
    }
}

void quantize_row_iq1_m(const float * x, block_iq1_m * y, int64_t n, const float * qw) {
    static const iq1_spec spec = { 16, 8, IQ1M_DELTA };
    float w[QK_K];
    iq1_block q;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, qw = qw ? qw + QK_K : nullptr) {
        block_weights(qw, x, w, 2.0f);
        quantize_iq1(spec, x, w, q);
        // 16 values per integer scale (3 bits, four per u16 word), the F16 super-scale in the
        // words' top nibbles
        uint16_t sc[4] = { 0, 0, 0, 0 };
        for (int s = 0; s < QK_K / 16; s++) sc[s / 4] |= (uint16_t) (q.ls[s] << (3 * (s % 4)));
        for (int k = 0; k < 4; k++) sc[k] |= (uint16_t) (((q.d >> (4 * k)) & 0xF) << 12);
        memcpy(y[b].scales, sc, sizeof(sc));
        for (int i = 0; i < QK_K / 8; i++) {
            y[b].qs[i] = (uint8_t) q.idx[i];
            const uint8_t h = (uint8_t) ((q.idx[i] >> 8) | (q.neg[i] << 3));
            if (i % 2 == 0) y[b].qh[i / 2] = h;
            else y[b].qh[i / 2] |= (uint8_t) (h << 4);
        }
        // quant_unshrink_factor on the decoded block, the moved super-scale packed again
        float r[QK_K];
        dequantize_row_iq1_m(&y[b], r, QK_K);
        const ggml_fp16_t d2 = quant_scale_fp16(q.d, quant_unshrink_factor(QK_K, x, r, qw));
        for (int k = 0; k < 4; k++) sc[k] = (uint16_t) ((sc[k] & 0x0FFF) | (((d2 >> (4 * k)) & 0xF) << 12));
        memcpy(y[b].scales, sc, sizeof(sc));
    }
}
