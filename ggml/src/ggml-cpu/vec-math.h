// vec-math.h - the vectorized exp of the ops (exp, silu, sigmoid, gelu rows: ops-unary.cpp,
// softmax), written once over a vector type V (simd.h: the operations every instruction set's
// vector type has); `scalar` below, one lane, is the reference (exp_scalar, eval_scalar).
//
// exp(x) = 2^n * e^r with n = round(x / ln2), r = x - n ln2 (Cody-Waite split of ln2, so r is
// exact), e^r = 1 + r + r^2 q(r) with q a degree-4 fit on Chebyshev nodes of [-ln2/2, ln2/2]
// (relative error 1e-8 before rounding), evaluated by Horner's rule. 2^n is applied as
// 2^(n/2) * 2^(n - n/2) (AVX512: scalef, arch/x86/simd-avx512.h) so that results down to the
// subnormal range and up to overflow come out right without branches. Every set runs these
// steps; vector tails are padded, so an element's value never depends on where it sits in a row.
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

// One lane: the reference the SIMD sets are tested against (fused multiply-adds where the build
// has them). max / min as x86's maxps / minps (the second operand when either is NaN), so that
// the clamps let NaN through as every set's do.
struct scalar {
    typedef float   f;
    typedef int32_t i;
    typedef bool    m;
    static constexpr int N = 1;
    static f load(const float * p) { return *p; }
    static void store(float * p, f v) { *p = v; }
    static f load_part(const float * p, int64_t) { return *p; }
    static void store_part(float * p, f v, int64_t) { *p = v; }
    static f set1(float x) { return x; }
    static f zero() { return 0.0f; }
    static f add(f a, f b) { return a + b; }
    static f sub(f a, f b) { return a - b; }
    static f mul(f a, f b) { return a * b; }
    static f div(f a, f b) { return a / b; }
    static f fma(f a, f b, f c) { return fma_f32(a, b, c); }    // a b + c
    static f fnma(f a, f b, f c) { return fma_f32(a, -b, c); }  // c - a b
    static f max(f a, f b) { return a > b ? a : b; }
    static f min(f a, f b) { return a < b ? a : b; }
    static f abs(f a) { return fabsf(a); }
    static f neg(f a) { return -a; }
    static m ge(f a, f b) { return a >= b; }
    static f select(m c, f a, f b) { return c ? a : b; }
    static i bits(f a) { return f32_to_bits(a); }
    static f from_bits(i a) { return bits_to_f32((uint32_t) a); }
    static i iset1(int32_t x) { return x; }
    static i iadd(i a, i b) { return a + b; }
    static i isub(i a, i b) { return a - b; }
    template <int K> static i sra(i a) { return a >> K; }
    template <int K> static i shl(i a) { return (int32_t) ((uint32_t) a << K); }
};

// e^r from n and x, r = x - n ln2 in two steps (the part of exp every set shares).
template <class V> inline typename V::f exp_poly(typename V::f n, typename V::f x) {
    typename V::f r = V::fnma(n, V::set1(EXP_LN2_HI), x);
    r = V::fnma(n, V::set1(EXP_LN2_LO), r);
    typename V::f q = V::fma(V::set1(EXP_C6), r, V::set1(EXP_C5));
    q = V::fma(q, r, V::set1(EXP_C4));
    q = V::fma(q, r, V::set1(EXP_C3));
    q = V::fma(q, r, V::set1(EXP_C2));
    q = V::fma(q, r, V::set1(1.0f));
    return V::fma(q, r, V::set1(1.0f));
}

// n from the shifted sum's low mantissa bits, 2^n as two exponent-field products.
template <class V> inline typename V::f exp(typename V::f x) {
    x = V::max(V::set1(EXP_X_MIN), x);  // NaN passes the clamps
    x = V::min(V::set1(EXP_X_MAX), x);
    const typename V::f shift = V::set1(EXP_SHIFT);
    const typename V::f t = V::fma(x, V::set1(EXP_LOG2E), shift);
    const typename V::f p = exp_poly<V>(V::sub(t, shift), x);
    const typename V::i ni = V::isub(V::bits(t), V::bits(shift));
    const typename V::i n1 = V::template sra<1>(ni);
    const typename V::i n2 = V::isub(ni, n1);
    const typename V::f s1 = V::from_bits(V::template shl<23>(V::iadd(n1, V::iset1(127))));
    const typename V::f s2 = V::from_bits(V::template shl<23>(V::iadd(n2, V::iset1(127))));
    return V::mul(V::mul(p, s1), s2);
}

// v * sigmoid(w), as v / (1 + e) for w >= 0 and v e / (1 + e) for w < 0 with e = exp(-|w|):
// e never overflows, so tiny results (silu(-95) ~ -5e-40) keep their relative accuracy.
template <class V> inline typename V::f mul_sigmoid(typename V::f v, typename V::f w) {
    const typename V::f e = exp<V>(V::neg(V::abs(w)));
    const typename V::f num = V::select(V::ge(w, V::zero()), v, V::mul(v, e));
    return V::div(num, V::add(V::set1(1.0f), e));
}

template <ExpKind K, class V> inline typename V::f eval(typename V::f x) {
    if constexpr (K == ExpKind::exp)     return exp<V>(x);
    if constexpr (K == ExpKind::silu)    return mul_sigmoid<V>(x, x);
    if constexpr (K == ExpKind::sigmoid) return mul_sigmoid<V>(V::set1(1.0f), x);
    if constexpr (K == ExpKind::gelu) {
        const typename V::f a = V::fma(V::set1(GELU_B), V::mul(x, x), V::set1(GELU_A));
        return mul_sigmoid<V>(x, V::neg(V::mul(x, a)));
    }
}

inline float exp_scalar(float x) { return exp<scalar>(x); }
template <ExpKind K> inline float eval_scalar(float x) { return eval<K, scalar>(x); }

}  // namespace ggml_vec_math
