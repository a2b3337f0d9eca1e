// simd.h - the float rows and loops that every instruction set runs the same way, written once
// over a vector type V that each set implements in one header under arch/ (simd-avx2.h,
// simd-avx512.h: arch/x86/; simd-neon.h: arch/arm/; vec-math.h's `scalar` is the one-lane
// reference). The sets' tables (kernels.h) take these templates instantiated with their V, so the
// algorithm, its order of operations and its rounding are the same on every set: only the width
// and the instructions differ. Dot products, GEMM micro-kernels and the quantized kernels stay
// per set where the instructions (and so the code) differ.
//
// What V has (all static members, inline; a template asks only for what it uses):
//  - types f (N floats), i (N int32), m (a lane mask); N; MASKED: true where partial vectors are
//    masked loads and stores (no copies), so loops end in one rather than in a scalar tail;
//  - load / store of N floats, also from and to F16 and from BF16 (converting), and load_part /
//    store_part of the first n (0 < n <= N; zeros after on load);
//  - set1, zero, add, sub, mul, div, fma (a b + c) and fnma (c - a b) each with one rounding,
//    max / min (the clamps let NaN through), abs, neg, ge (a mask), select;
//  - the int32 steps of exp and of the BF16 rounding: bits, from_bits, iset1, iadd, isub, iand,
//    ior, sra<k>, srl<k>, shl<k>, igt (a mask), iselect, store_u16 (32-bit lanes narrowed);
//  - hmax (exact), hsum (a fixed order of additions), transpose (an N x N block in registers).
// This header has no intrinsics: the per-set headers under arch/ include it (and vec-scalar.cpp,
// for the reference).
#pragma once

#include "../ggml-impl.h"
#include "vec-math.h"
#include "vec.h"

#include <algorithm>
#include <cmath>
#include <stddef.h>
#include <stdint.h>

namespace ggml_simd {

using ggml_vec_math::ExpKind;

// ---- float rows of the ops (kernels.h) -----------------------------------------------------
// y[i] = K(x[i]); y may equal x. The tail is padded with zeros to a whole vector, so every
// element gets the same instructions wherever it sits.
template <class V, ExpKind K> void vec_apply(float * y, const float * x, int64_t n) {
    int64_t i = 0;
    for (; i + V::N <= n; i += V::N) V::store(y + i, ggml_vec_math::eval<K, V>(V::load(x + i)));
    if (i < n) V::store_part(y + i, ggml_vec_math::eval<K, V>(V::load_part(x + i, n - i)), n - i);
}

// Largest element of w[0..n) (-inf for an all -inf row). Max is exact, so any order gives the
// same value.
template <class V> float row_max(const float * w, int64_t n) {
    int64_t i = 0;
    typename V::f vm = V::set1(-INFINITY);
    for (; i + V::N <= n; i += V::N) vm = V::max(vm, V::load(w + i));
    float m = V::hmax(vm);
    for (; i < n; i++) m = w[i] > m ? w[i] : m;
    return m;
}

// w[i] += slope * f16 mask[i], one fused multiply-add each (the tail too).
template <class V> void add_mask_f16(float * w, const ggml_fp16_t * mask, int64_t n, float slope) {
    int64_t i = 0;
    const typename V::f vs = V::set1(slope);
    for (; i + V::N <= n; i += V::N) V::store(w + i, V::fma(vs, V::load(mask + i), V::load(w + i)));
    for (; i < n; i++) w[i] = fmaf(slope, GGML_FP16_TO_FP32(mask[i]), w[i]);
}

// Row conversions between F32 and the half types, y[i] = x[i] (to F16 rounding to nearest even):
// V::load / V::store of the half types convert. The hardware conversions and the scalar ones
// agree except in NaN payloads, so each entry keeps the tail it has always had: the scalar one,
// or (MASKED_TAIL) one masked vector.
inline void cvt(float & y, ggml_fp16_t x) { y = GGML_FP16_TO_FP32(x); }
inline void cvt(float & y, ggml_bf16_t x) { y = GGML_BF16_TO_FP32(x); }
inline void cvt(ggml_fp16_t & y, float x) { y = GGML_FP32_TO_FP16(x); }

template <class V, bool MASKED_TAIL, typename S, typename D> void convert_row(const S * x, D * y, int64_t n) {
    int64_t i = 0;
    for (; i + V::N <= n; i += V::N) V::store(y + i, V::load(x + i));
    if constexpr (MASKED_TAIL) {
        if (i < n) V::store_part(y + i, V::load_part(x + i, n - i), n - i);
    } else {
        for (; i < n; i++) cvt(y[i], x[i]);
    }
}

// The ops' F16 rows (kernels.h: scalar tails), and the tables' row converters (ggml_to_float_t,
// ggml_from_float_t: masked tails where V has them; BF16 -> F32 is a shift, the same bits either way).
template <class V> void f16_to_f32_row(const ggml_fp16_t * x, float * y, int64_t n) { convert_row<V, false>(x, y, n); }
template <class V> void f32_to_f16_row(const float * x, ggml_fp16_t * y, int64_t n) { convert_row<V, false>(x, y, n); }
template <class V> void fp16_to_fp32(const void * x, float * y, int64_t n) { convert_row<V, V::MASKED>((const ggml_fp16_t *) x, y, n); }
template <class V> void fp32_to_fp16(const float * x, void * y, int64_t n) { convert_row<V, V::MASKED>(x, (ggml_fp16_t *) y, n); }
template <class V> void bf16_to_fp32(const void * x, float * y, int64_t n) { convert_row<V, V::MASKED>((const ggml_bf16_t *) x, y, n); }

// F32 -> BF16 rounding to nearest even, NaN kept quiet (as GGML_FP32_TO_BF16), on the bits: the
// sets without a conversion instruction (V::store_u16 narrows 32-bit lanes holding 16 bits).
template <class V> void fp32_to_bf16(const float * x, void * y, int64_t n) {
    typedef typename V::i I;
    ggml_bf16_t * out = (ggml_bf16_t *) y;
    int64_t i = 0;
    for (; i + V::N <= n; i += V::N) {
        const I u = V::bits(V::load(x + i));
        const I lsb = V::iand(V::template srl<16>(u), V::iset1(1));
        const I rounded = V::template srl<16>(V::iadd(u, V::iadd(lsb, V::iset1(0x7fff))));
        const I quiet = V::ior(V::template srl<16>(u), V::iset1(64));
        const auto nan = V::igt(V::iand(u, V::iset1(0x7fffffff)), V::iset1(0x7f800000));  // both >= 0
        V::store_u16((uint16_t *) (out + i), V::iselect(nan, quiet, rounded));
    }
    for (; i < n; i++) out[i] = GGML_FP32_TO_BF16(x[i]);
}

// ---- axpy (out_prod, flash attention) ------------------------------------------------------
// y[i] += s[0] * x[0][i], then += s[1] * x[1][i], ...: one fused multiply-add per term, in order
// of j, 4 vectors of y at a time (whatever the tail, each element gets the same chain).
template <class V> void axpy(int64_t n, int nx, const float * s, const float * const * x, float * y) {
    constexpr int N = V::N;
    int64_t i = 0;
    for (; i + 4 * N <= n; i += 4 * N) {
        typename V::f y0 = V::load(y + i), y1 = V::load(y + i + N), y2 = V::load(y + i + 2 * N), y3 = V::load(y + i + 3 * N);
        for (int j = 0; j < nx; j++) {
            const typename V::f sj = V::set1(s[j]);
            const float * xj = x[j] + i;
            y0 = V::fma(sj, V::load(xj), y0);
            y1 = V::fma(sj, V::load(xj + N), y1);
            y2 = V::fma(sj, V::load(xj + 2 * N), y2);
            y3 = V::fma(sj, V::load(xj + 3 * N), y3);
        }
        V::store(y + i, y0);
        V::store(y + i + N, y1);
        V::store(y + i + 2 * N, y2);
        V::store(y + i + 3 * N, y3);
    }
    if constexpr (V::MASKED) {
        for (; i < n; i += N) {
            const int64_t m = std::min<int64_t>(N, n - i);
            typename V::f yv = V::load_part(y + i, m);
            for (int j = 0; j < nx; j++) yv = V::fma(V::set1(s[j]), V::load_part(x[j] + i, m), yv);
            V::store_part(y + i, yv, m);
        }
    } else {
        for (; i < n; i++) {
            float v = y[i];
            for (int j = 0; j < nx; j++) v = std::fma(s[j], x[j][i], v);
            y[i] = v;
        }
    }
}

// ---- the float types' matmul (vec.h) ---------------------------------------------------------
// Element loader of rows of T: W elements (as F32) from element i of the row at bytes p, or the
// first n < W, zeros after; madd(acc, a, b) = acc + a b, one rounding.
template <class V, typename E> struct load_row {
    static constexpr int W = V::N;
    static constexpr size_t BYTES = sizeof(E);
    typedef typename V::f T;
    static T load(const char * p, int64_t i) { return V::load((const E *) p + i); }
    static T part(const char * p, int64_t i, int64_t n) { return V::load_part((const E *) p + i, n); }
    static typename V::f madd(typename V::f acc, T a, T b) { return V::fma(a, b, acc); }
};

// Dot tile of R rows of a by C rows of b: one accumulator per output, lanes summing k = lane
// (mod W), then V::hsum: the same instruction sequence for an output whatever R and C are.
// PF > 0: a's rows are prefetched PF bytes ahead into L2 (rows streamed from memory one by one).
template <class V, class L, int R, int C, int PF = 0>
void dot_tile_rc(int64_t k, const char * a, size_t lda, const char * b, size_t ldb, float * s, size_t lds) {
    typename V::f acc[R][C];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = V::zero();
    int64_t i = 0;
    for (; i + L::W <= k; i += L::W) {
        if constexpr (PF > 0) {
            for (int r = 0; r < R; r++) __builtin_prefetch(a + r * lda + i * L::BYTES + PF, 0, 2);
        }
        typename L::T av[R];
        for (int r = 0; r < R; r++) av[r] = L::load(a + r * lda, i);
        for (int c = 0; c < C; c++) {
            const typename L::T bv = L::load(b + c * ldb, i);
            for (int r = 0; r < R; r++) acc[r][c] = L::madd(acc[r][c], av[r], bv);
        }
    }
    if (i < k) {
        const int64_t n = k - i;
        typename L::T av[R];
        for (int r = 0; r < R; r++) av[r] = L::part(a + r * lda, i, n);
        for (int c = 0; c < C; c++) {
            const typename L::T bv = L::part(b + c * ldb, i, n);
            for (int r = 0; r < R; r++) acc[r][c] = L::madd(acc[r][c], av[r], bv);
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) s[c * lds + r] = V::hsum(acc[r][c]);
}

typedef void (*dot_tile_rc_fn)(int64_t, const char *, size_t, const char *, size_t, float *, size_t);

template <class V, class L, int R, int C, int CMAX> constexpr dot_tile_rc_fn dot_tile_fn() {
    if constexpr (C <= CMAX) return dot_tile_rc<V, L, R, C>;
    else return nullptr;
}

// The dot_tile of vec.h (nr, nc <= GGML_DOT_TILE_MAX): at most CMAX columns a call (the set's
// registers hold 4 x CMAX accumulators), wider tiles CMAX columns at a time.
template <class V, class L, int CMAX>
void dot_tile(int64_t k, int nr, int nc, const void * a, size_t lda, const void * b, size_t ldb, float * s, size_t lds) {
    static const dot_tile_rc_fn fns[4][4] = {
        { dot_tile_fn<V, L, 1, 1, CMAX>(), dot_tile_fn<V, L, 1, 2, CMAX>(), dot_tile_fn<V, L, 1, 3, CMAX>(), dot_tile_fn<V, L, 1, 4, CMAX>() },
        { dot_tile_fn<V, L, 2, 1, CMAX>(), dot_tile_fn<V, L, 2, 2, CMAX>(), dot_tile_fn<V, L, 2, 3, CMAX>(), dot_tile_fn<V, L, 2, 4, CMAX>() },
        { dot_tile_fn<V, L, 3, 1, CMAX>(), dot_tile_fn<V, L, 3, 2, CMAX>(), dot_tile_fn<V, L, 3, 3, CMAX>(), dot_tile_fn<V, L, 3, 4, CMAX>() },
        { dot_tile_fn<V, L, 4, 1, CMAX>(), dot_tile_fn<V, L, 4, 2, CMAX>(), dot_tile_fn<V, L, 4, 3, CMAX>(), dot_tile_fn<V, L, 4, 4, CMAX>() },
    };
    for (int c0 = 0; c0 < nc; c0 += CMAX) {
        const int cn = std::min(CMAX, nc - c0);
        fns[nr - 1][cn - 1](k, (const char *) a, lda, (const char *) b + c0 * ldb, ldb, s + c0 * lds, lds);
    }
}

// Panels of f32 units (k_unit 1, vec.h) from rows of T read by L: N rows x N k at a time through
// V::transpose (an N x N block in registers).
template <class V, class L, typename T>
void pack(const void * src, size_t ld, int rows, int width, int64_t k0, int64_t nk, void * dst) {
    constexpr int N = V::N;
    float * out = (float *) dst;
    for (int i0 = 0; i0 < width; i0 += N) {
        const int lanes = std::min(N, width - i0);
        const int nrows = std::max(0, std::min(N, rows - i0));
        const char * row0 = (const char *) src + i0 * ld + k0 * sizeof(T);
        for (int64_t u = 0; u < nk; u += N) {
            typename V::f r[N];
            for (int i = 0; i < N; i++) {
                if (i >= nrows) r[i] = V::zero();
                else r[i] = nk - u >= N ? L::load(row0 + i * ld, u) : L::part(row0 + i * ld, u, nk - u);
            }
            V::transpose(r);
            const int nt = (int) std::min<int64_t>(N, nk - u);
            for (int t = 0; t < nt; t++) {
                if (lanes == N) V::store(out + (u + t) * width + i0, r[t]);
                else V::store_part(out + (u + t) * width + i0, r[t], lanes);
            }
        }
    }
}

// The mm_type entry of a set's tables (vec.h).
template <const ggml_mm_type_kernels * F32, const ggml_mm_type_kernels * F16, const ggml_mm_type_kernels * BF16>
const ggml_mm_type_kernels * mm_type(ggml_type type) {
    switch (type) {
        case GGML_TYPE_F32:  return F32;
        case GGML_TYPE_F16:  return F16;
        case GGML_TYPE_BF16: return BF16;
        default:             return nullptr;
    }
}

// A set's kernels of the float types (vec.h) from its micro-kernel: dot tiles of at most CMAX
// columns, the packed GEMM (MICRO: MR x NR, blocks of KC units and MC rows of a, from MIN_N_F32 /
// MIN_N_F16 rows of b on), b's rows converted to F16 here and to BF16 by TO_BF16.
template <class V, int CMAX, ggml_gemm_micro_fn MICRO, int MR, int NR, int KC, int MC, int MIN_N_F32, int MIN_N_F16,
          ggml_from_float_t TO_BF16>
struct float_mm {
    typedef load_row<V, float> F32;
    typedef load_row<V, ggml_fp16_t> F16;
    typedef load_row<V, ggml_bf16_t> BF16;
    static constexpr ggml_gemm_kernel gemm_f32 = { MR, NR, 1, KC, MC, MIN_N_F32, pack<V, F32, float>, pack<V, F32, float>, MICRO };
    static constexpr ggml_gemm_kernel gemm_f16 = { MR, NR, 1, KC, MC, MIN_N_F16, pack<V, F16, ggml_fp16_t>, pack<V, F16, ggml_fp16_t>, MICRO };
    static constexpr ggml_gemm_kernel gemm_bf16 = { MR, NR, 1, KC, MC, MIN_N_F16, pack<V, BF16, ggml_bf16_t>, pack<V, BF16, ggml_bf16_t>, MICRO };
    static constexpr ggml_mm_type_kernels mm_f32 = { GGML_TYPE_F32, nullptr, dot_tile<V, F32, CMAX>, &gemm_f32 };
    static constexpr ggml_mm_type_kernels mm_f16 = { GGML_TYPE_F16, fp32_to_fp16<V>, dot_tile<V, F16, CMAX>, &gemm_f16 };
    static constexpr ggml_mm_type_kernels mm_bf16 = { GGML_TYPE_BF16, TO_BF16, dot_tile<V, BF16, CMAX>, &gemm_bf16 };
    static const ggml_mm_type_kernels * type(ggml_type t) { return mm_type<&mm_f32, &mm_f16, &mm_bf16>(t); }
};

}  // namespace ggml_simd
