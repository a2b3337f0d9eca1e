// vec-scalar.cpp - the scalar reference kernels of matmul: plain loops, one sequential float sum
// per output. The SIMD kernels are tested against these; GGML_SCALAR builds run on them. Also
// the scalar instruction set's table (kernels.h), with the reference kernels of the other files.
#include "kernels.h"
#include "simd.h"

#include <math.h>

#include <string.h>

namespace {

using ggml_simd::ExpKind;
typedef ggml_vec_math::scalar V;  // one lane: the rows of simd.h as the reference runs them

inline float load_f32(const float * p, int64_t i) { return p[i]; }
inline float load_f32(const ggml_fp16_t * p, int64_t i) { return GGML_FP16_TO_FP32(p[i]); }
inline float load_f32(const ggml_bf16_t * p, int64_t i) { return GGML_BF16_TO_FP32(p[i]); }

template <typename T>
void dot_tile(int64_t k, int nr, int nc, const void * a, size_t lda, const void * b, size_t ldb,
              float * s, size_t lds) {
    for (int c = 0; c < nc; c++) {
        const T * bc = (const T *) ((const char *) b + c * ldb);
        for (int r = 0; r < nr; r++) {
            const T * ar = (const T *) ((const char *) a + r * lda);
            float sum = 0.0f;
            for (int64_t i = 0; i < k; i++) sum += load_f32(ar, i) * load_f32(bc, i);
            s[c * lds + r] = sum;
        }
    }
}

void fp32_to_fp16(const float * x, void * y, int64_t n) {
    ggml_fp16_t * out = (ggml_fp16_t *) y;
    for (int64_t i = 0; i < n; i++) out[i] = GGML_FP32_TO_FP16(x[i]);
}

void fp32_to_bf16(const float * x, void * y, int64_t n) {
    ggml_bf16_t * out = (ggml_bf16_t *) y;
    for (int64_t i = 0; i < n; i++) out[i] = GGML_FP32_TO_BF16(x[i]);
}

void fp16_to_fp32(const void * x, float * y, int64_t n) {
    const ggml_fp16_t * in = (const ggml_fp16_t *) x;
    for (int64_t i = 0; i < n; i++) y[i] = GGML_FP16_TO_FP32(in[i]);
}

void bf16_to_fp32(const void * x, float * y, int64_t n) {
    const ggml_bf16_t * in = (const ggml_bf16_t *) x;
    for (int64_t i = 0; i < n; i++) y[i] = GGML_BF16_TO_FP32(in[i]);
}

// Panels of f32 units (k_unit 1), converted from T.
template <typename T>
void pack(const void * src, size_t ld, int rows, int width, int64_t k0, int64_t nk, void * dst) {
    float * out = (float *) dst;
    for (int i = 0; i < width; i++) {
        if (i < rows) {
            const T * row = (const T *) ((const char *) src + i * ld) + k0;
            for (int64_t u = 0; u < nk; u++) out[u * width + i] = load_f32(row, u);
        } else {
            for (int64_t u = 0; u < nk; u++) out[u * width + i] = 0.0f;
        }
    }
}

constexpr int MR = 8, NR = 4;

void axpy(int64_t n, int nx, const float * s, const float * const * x, float * y) {
    for (int64_t i = 0; i < n; i++) {
        float v = y[i];
        for (int j = 0; j < nx; j++) v += s[j] * x[j][i];
        y[i] = v;
    }
}

// BF16 pairs (opt-in products): the reference for the SIMD kernels' rounding and order.
void bf16_pairs(const float * x0, const float * x1, int64_t n, void * out) {
    uint32_t * o = (uint32_t *) out;
    for (int64_t i = 0; i < n; i++) {
        const uint32_t hi = x1 ? GGML_FP32_TO_BF16(x1[i]).bits : 0;
        o[i] = (uint32_t) GGML_FP32_TO_BF16(x0[i]).bits | hi << 16;
    }
}

inline float bf16_half(uint32_t u, int half) {
    const uint32_t bits = half ? u & 0xffff0000u : u << 16;
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

// One unit of the micro-kernel into an accumulator: an f32 (one product), or a pair of bf16 (the
// product of the high halves, then of the low ones, as vdpbf16ps; exact products, one rounding each).
inline float madd_unit(float acc, float a, float b) { return acc + a * b; }
inline float madd_unit(float acc, uint32_t a, uint32_t b) {
    acc += bf16_half(a, 1) * bf16_half(b, 1);
    return acc + bf16_half(a, 0) * bf16_half(b, 0);
}

template <typename U>
void micro(int64_t nu, const void * a, const void * b, float * c, size_t ldc, bool accumulate) {
    const U * ap = (const U *) a;
    const U * bp = (const U *) b;
    float acc[NR][MR];
    for (int j = 0; j < NR; j++)
        for (int i = 0; i < MR; i++) acc[j][i] = accumulate ? c[j * ldc + i] : 0.0f;
    for (int64_t u = 0; u < nu; u++) {
        for (int j = 0; j < NR; j++) {
            const U bj = bp[u * NR + j];
            for (int i = 0; i < MR; i++) acc[j][i] = madd_unit(acc[j][i], ap[u * MR + i], bj);
        }
    }
    for (int j = 0; j < NR; j++)
        for (int i = 0; i < MR; i++) c[j * ldc + i] = acc[j][i];
}

const ggml_gemm_kernel gemm_f32  = { MR, NR, 1, 256, 64, 8, pack<float>, pack<float>, micro<float> };
const ggml_gemm_kernel gemm_bf16_pairs = { MR, NR, 2, 128, 64, 8, nullptr, nullptr, micro<uint32_t> };
const ggml_gemm_kernel gemm_f16  = { MR, NR, 1, 256, 64, 8, pack<ggml_fp16_t>, pack<ggml_fp16_t>, micro<float> };
const ggml_gemm_kernel gemm_bf16 = { MR, NR, 1, 256, 64, 8, pack<ggml_bf16_t>, pack<ggml_bf16_t>, micro<float> };

const ggml_mm_type_kernels mm_f32  = { GGML_TYPE_F32,  nullptr,      dot_tile<float>,       &gemm_f32 };
const ggml_mm_type_kernels mm_f16  = { GGML_TYPE_F16,  fp32_to_fp16, dot_tile<ggml_fp16_t>, &gemm_f16 };
const ggml_mm_type_kernels mm_bf16 = { GGML_TYPE_BF16, fp32_to_bf16, dot_tile<ggml_bf16_t>, &gemm_bf16 };

const ggml_mm_type_kernels * mm_type(ggml_type type) { return ggml_simd::mm_type<&mm_f32, &mm_f16, &mm_bf16>(type); }

ggml_quant_dot_rows_fn no_dot_rows(ggml_type) { return nullptr; }
ggml_quant_dot_cols_fn no_dot_cols(ggml_type) { return nullptr; }

// ---- float rows of the ops ----------------------------------------------------------------
float row_max(const float * w, int64_t n) {
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++) m = w[i] > m ? w[i] : m;
    return m;
}

void add_mask_f16(float * w, const ggml_fp16_t * mask, int64_t n, float slope) {
    for (int64_t i = 0; i < n; i++) w[i] += slope * GGML_FP16_TO_FP32(mask[i]);
}

void f16_to_f32_row(const ggml_fp16_t * x, float * y, int64_t n) { fp16_to_fp32(x, y, n); }
void f32_to_f16_row(const float * x, ggml_fp16_t * y, int64_t n) { fp32_to_fp16(x, y, n); }

}  // namespace

ggml_to_float_t ggml_dequant_ref(enum ggml_type type) { return ggml_get_type_traits(type)->to_float; }

// ---- the scalar set -----------------------------------------------------------------------
extern "C" const ggml_cpu_kernels ggml_cpu_kernels_scalar = {
    /* isa            */ "scalar",
    /* base           */ nullptr,
    /* features       */ 0,
    /* mm_type        */ mm_type,
    /* axpy           */ axpy,
    /* fp16_to_fp32   */ fp16_to_fp32,
    /* bf16_to_fp32   */ bf16_to_fp32,
    /* bf16_pairs     */ bf16_pairs,
    /* gemm_bf16_pairs*/ &gemm_bf16_pairs,
    /* tiles_bf16 ... */ nullptr, nullptr, nullptr,
    /* dequant        */ ggml_dequant_ref,
    /* quant_dot      */ ggml_quant_dot_ref,
    /* quant_dot_rows */ no_dot_rows,
    /* quant_dot_cols */ no_dot_cols,
    /* repack         */ { nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, ggml_repack_quantize_q8_0x16_ref,
                           ggml_repack_q4_0x16_to_q8_0x16t_ref, nullptr, nullptr, nullptr, nullptr, nullptr,
                           ggml_quantize_row_q8_0x_ref, ggml_repack_quantize_q8_K_ref },
    /* vec_exp ...    */ ggml_simd::vec_apply<V, ExpKind::exp>, ggml_simd::vec_apply<V, ExpKind::silu>,
                         ggml_simd::vec_apply<V, ExpKind::sigmoid>, ggml_simd::vec_apply<V, ExpKind::gelu>,
    /* row_max        */ row_max,
    /* add_mask_f16   */ add_mask_f16,
    /* f16_to_f32_row */ f16_to_f32_row,
    /* f32_to_f16_row */ f32_to_f16_row,
    /* exp_sub_max_sum */ nullptr,
    /* soft_max_logits */ nullptr,
};
