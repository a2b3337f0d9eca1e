// vec-math.h - the vectorized exp of the ops (exp, silu, sigmoid, gelu rows: ops-unary.cpp,
// softmax) as every instruction set computes it: the constants and the scalar steps, which each
// set's row functions (kernels.h: vec_exp, vec_silu, vec_sigmoid, vec_gelu) run lane by lane.
//
// exp(x) = 2^n * e^r with n = round(x / ln2), r = x - n ln2 (Cody-Waite split of ln2, so r is
// exact), e^r = 1 + r + r^2 q(r) with q a degree-4 fit on Chebyshev nodes of [-ln2/2, ln2/2]
// (relative error 1e-8 before rounding), evaluated by Horner's rule. 2^n is applied as
// 2^(n/2) * 2^(n - n/2) (AVX512: scalef) so that results down to the subnormal range and up
// to overflow come out right without branches. The SIMD and scalar paths run the same steps;
// vector tails are padded, so an element's value never depends on where it sits in a row.
#pragma once

#include <math.h>
#include <stdint.h>
#include <string.h>

namespace ggml_vec_math {

// Cody-Waite: LN2_HI has few significant bits so n * LN2_HI is exact for |n| < 2^10.
constexpr float EXP_LOG2E  = 0x1.715476p+0f;
constexpr float EXP_LN2_HI = 0x1.62e400p-1f;
constexpr float EXP_LN2_LO = 0x1.7f7d1cp-20f;
constexpr float EXP_SHIFT  = 0x1.8p23f;        // adding it rounds to an integer kept in the low mantissa bits
constexpr float EXP_X_MIN  = -104.0f;          // exp below rounds to 0
constexpr float EXP_X_MAX  =   89.0f;          // exp above overflows to inf
constexpr float EXP_C2 = 0x1.000000p-1f;
constexpr float EXP_C3 = 0x1.5554dcp-3f;
constexpr float EXP_C4 = 0x1.55551ap-5f;
constexpr float EXP_C5 = 0x1.120b90p-7f;
constexpr float EXP_C6 = 0x1.6d112cp-10f;

// gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), equals x sigmoid(2u):
// the sigmoid form has no cancellation for negative x. GELU_A + GELU_B x^2 = -2u / x.
constexpr float GELU_A = -1.5957691216057308f;            // -2 sqrt(2/pi)
constexpr float GELU_B = -0.07135481627260025f;           // -2 sqrt(2/pi) 0.044715

enum class ExpKind { exp, silu, sigmoid, gelu };

#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
inline float fma_f32(float a, float b, float c) { return fmaf(a, b, c); }
#else
inline float fma_f32(float a, float b, float c) { return a * b + c; }
#endif

inline float bits_to_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
inline int32_t f32_to_bits(float f) { int32_t u; memcpy(&u, &f, 4); return u; }

inline float exp_scalar(float x) {
    // written so NaN passes the clamps
    x = x < EXP_X_MIN ? EXP_X_MIN : x;
    x = x > EXP_X_MAX ? EXP_X_MAX : x;
    const float t = fma_f32(x, EXP_LOG2E, EXP_SHIFT);
    const float n = t - EXP_SHIFT;
    float r = fma_f32(n, -EXP_LN2_HI, x);
    r = fma_f32(n, -EXP_LN2_LO, r);
    float q = fma_f32(EXP_C6, r, EXP_C5);
    q = fma_f32(q, r, EXP_C4);
    q = fma_f32(q, r, EXP_C3);
    q = fma_f32(q, r, EXP_C2);
    q = fma_f32(q, r, 1.0f);
    const float p = fma_f32(q, r, 1.0f);
    const int32_t ni = f32_to_bits(t) - f32_to_bits(EXP_SHIFT);
    const int32_t n1 = ni >> 1, n2 = ni - n1;
    return p * bits_to_f32((uint32_t) (n1 + 127) << 23) * bits_to_f32((uint32_t) (n2 + 127) << 23);
}

// v * sigmoid(w), as v / (1 + e) for w >= 0 and v e / (1 + e) for w < 0 with e = exp(-|w|):
// e never overflows, so tiny results (silu(-95) ~ -5e-40) keep their relative accuracy.
inline float mul_sigmoid_scalar(float v, float w) {
    const float e = exp_scalar(-fabsf(w));
    return (w >= 0.0f ? v : v * e) / (1.0f + e);
}

template <ExpKind K> inline float eval_scalar(float x) {
    if constexpr (K == ExpKind::exp)     return exp_scalar(x);
    if constexpr (K == ExpKind::silu)    return mul_sigmoid_scalar(x, x);
    if constexpr (K == ExpKind::sigmoid) return mul_sigmoid_scalar(1.0f, x);
    if constexpr (K == ExpKind::gelu)    return mul_sigmoid_scalar(x, -x * fma_f32(GELU_B, x * x, GELU_A));
}

}  // namespace ggml_vec_math
