// ops-norm.cpp - normalization over rows (dim 0): norm (zero mean, unit variance) and rms_norm,
// and their gradients norm_back and rms_norm_back (src0 the output's gradient, src1 the input).
//
// F32 in and out, any strides (rows contiguous in dim 0 take the fast path). Sums are taken in
// double with a fixed number of interleaved partial sums, so a row gives the same bits
// whichever thread computes it, and the compiler can still vectorize the loops.
#include "cpu-ops.h"
#include "ops-common.h"

#include <math.h>

namespace {

constexpr int kLanes = 16;  // interleaved partial sums per reduction (fixed: part of the result)

// A row of floats: contiguous, or with a byte stride.
struct ContigRow {
    const float * x;
    float operator[](int64_t i) const { return x[i]; }
};
struct StridedRow {
    const char * x;
    size_t stride;
    float operator[](int64_t i) const { return *(const float *) (x + i * stride); }
};
struct ContigOut {
    float * y;
    float & operator[](int64_t i) const { return y[i]; }
};
struct StridedOut {
    char * y;
    size_t stride;
    float & operator[](int64_t i) const { return *(float *) (y + i * stride); }
};

// Sum of term(i) for i in [0, n), over kLanes interleaved double partial sums.
template <typename Term>
double lane_sum(int64_t n, Term term) {
    double acc[kLanes] = {0};
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        for (int k = 0; k < kLanes; k++) acc[k] += term(i + k);
    }
    for (int k = 0; i + k < n; k++) acc[k] += term(i + k);
    double s = 0.0;
    for (int k = 0; k < kLanes; k++) s += acc[k];
    return s;
}

// Sum of (x[i] - center)^p for p = 1 or 2.
template <int Power, typename Row>
double sum_dev_pow(Row x, int64_t n, double center) {
    return lane_sum(n, [&](int64_t i) {
        const double d = (double) x[i] - center;
        return Power == 1 ? d : d * d;
    });
}

// y = (x - mean) * scale, mean given as float hi + lo: x - hi is exact for x near the mean, so
// the deviations keep nearly double accuracy even when the mean is large, at float speed.
// Each x[i] is read before y[i] is written, so in-place works.
template <typename Row, typename Out>
void norm_row(Row x, Out y, int64_t n, double eps) {
    const double mean = sum_dev_pow<1>(x, n, 0.0) / (double) n;
    const double var = sum_dev_pow<2>(x, n, mean) / (double) n;
    const float scale = (float) (1.0 / sqrt(var + eps));
    const float mean_hi = (float) mean;
    const float mean_lo = (float) (mean - (double) mean_hi);
    for (int64_t i = 0; i < n; i++) y[i] = ((x[i] - mean_hi) - mean_lo) * scale;
}

template <typename Row, typename Out>
void rms_norm_row(Row x, Out y, int64_t n, double eps) {
    const double mean_sq = sum_dev_pow<2>(x, n, 0.0) / (double) n;
    const float scale = (float) (1.0 / sqrt(mean_sq + eps));
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale;
}

template <bool Rms>
void forward_norm_rows(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    GGML_ASSERT(src != nullptr);
    GGML_ASSERT(src->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F32);
    GGML_ASSERT(ggml_are_same_shape(src, dst));

    const double eps = (double) ggml_get_op_params_f32(dst, 0);
    const int64_t n = dst->ne[0];
    const bool contig = src->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float);

    ggml_cpu_for_own_rows(params, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
        const char * x = ggml_cpu_elem_ptr(src, 0, i1, i2, i3);
        char * y = ggml_cpu_elem_ptr(dst, 0, i1, i2, i3);
        if (contig) {
            const ContigRow xr{(const float *) x};
            const ContigOut yr{(float *) y};
            if (Rms) rms_norm_row(xr, yr, n, eps); else norm_row(xr, yr, n, eps);
        } else {
            const StridedRow xr{x, src->nb[0]};
            const StridedOut yr{y, dst->nb[0]};
            if (Rms) rms_norm_row(xr, yr, n, eps); else norm_row(xr, yr, n, eps);
        }
    });
}

}  // namespace

extern "C" void ggml_cpu_forward_norm(const ggml_compute_params * params, ggml_tensor * dst) {
    forward_norm_rows<false>(params, dst);
}

extern "C" void ggml_cpu_forward_rms_norm(const ggml_compute_params * params, ggml_tensor * dst) {
    forward_norm_rows<true>(params, dst);
}

// ---- backward --------------------------------------------------------------------------------
namespace {

// norm: y = (x - mean) r with r = 1/sqrt(var + eps);
//   dx = r (g - mean(g) - y mean(g y)),  mean(g y) = r sum(g (x - mean)) / n.
// rms_norm: y = x r with r = 1/sqrt(mean(x^2) + eps);
//   dx = r (g - y mean(g y)),  mean(g y) = r sum(g x) / n.
// Sums in double (lanes), each output in double rounded once.
template <bool Rms, typename Row, typename Out>
void norm_back_row(Row g, Row x, Out dx, int64_t n, double eps) {
    const double mean = Rms ? 0.0 : lane_sum(n, [&](int64_t i) { return (double) x[i]; }) / (double) n;
    const double var = lane_sum(n, [&](int64_t i) { const double d = (double) x[i] - mean; return d * d; }) / (double) n;
    const double r = 1.0 / sqrt(var + eps);
    const double mean_g = Rms ? 0.0 : lane_sum(n, [&](int64_t i) { return (double) g[i]; }) / (double) n;
    const double mean_gy = r * lane_sum(n, [&](int64_t i) { return (double) g[i] * ((double) x[i] - mean); }) / (double) n;
    for (int64_t i = 0; i < n; i++) {
        const double y = ((double) x[i] - mean) * r;
        dx[i] = (float) (r * ((double) g[i] - mean_g - y * mean_gy));
    }
}

template <bool Rms>
void backward_norm_rows(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * grad = dst->src[0];
    const ggml_tensor * src = dst->src[1];
    GGML_ASSERT(grad != nullptr && src != nullptr);
    GGML_ASSERT(grad->type == GGML_TYPE_F32 && src->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F32);
    GGML_ASSERT(ggml_are_same_shape(grad, dst) && ggml_are_same_shape(src, dst));

    const double eps = (double) ggml_get_op_params_f32(dst, 0);
    const int64_t n = dst->ne[0];
    const bool contig = grad->nb[0] == sizeof(float) && src->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float);

    ggml_cpu_for_own_rows(params, dst, [&](int64_t i1, int64_t i2, int64_t i3) {
        const char * g = ggml_cpu_elem_ptr(grad, 0, i1, i2, i3);
        const char * x = ggml_cpu_elem_ptr(src, 0, i1, i2, i3);
        char * y = ggml_cpu_elem_ptr(dst, 0, i1, i2, i3);
        if (contig) {
            norm_back_row<Rms>(ContigRow{(const float *) g}, ContigRow{(const float *) x}, ContigOut{(float *) y}, n, eps);
        } else {
            norm_back_row<Rms>(StridedRow{g, grad->nb[0]}, StridedRow{x, src->nb[0]}, StridedOut{y, dst->nb[0]}, n, eps);
        }
    });
}

}  // namespace

extern "C" void ggml_cpu_forward_norm_back(const ggml_compute_params * params, ggml_tensor * dst) {
    backward_norm_rows<false>(params, dst);
}

extern "C" void ggml_cpu_forward_rms_norm_back(const ggml_compute_params * params, ggml_tensor * dst) {
    backward_norm_rows<true>(params, dst);
}
