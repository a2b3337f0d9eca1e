// kernels.h - the CPU kernels of one instruction set, as one table, and the one place that
// chooses the table this build runs on.
//
// Every entry point whose code depends on the instruction set is a field of ggml_cpu_kernels:
// the matmul kernels of the float types (vec.h), the quantized dot products (quant-dot.h), the
// repacked-weight GEMMs (quant-repack.h) and the float-row helpers of the ops (exp, silu,
// sigmoid, gelu, softmax's row max and mask, F16 rows). Each instruction set defines its table
// once: ggml_cpu_kernels_scalar (vec-scalar.cpp: the reference, in every build) and
// ggml_cpu_kernels_avx2 / _avx512 (arch/x86/kernels-*.cpp) or _neon (arch/arm/kernels-neon.cpp),
// which gather the entry points their arch/ files export. A table is complete: where a
// set has no kernel of its own it holds those of the set it builds on (`base`: AVX512 on AVX2,
// AVX2 and NEON on scalar), so callers never fall back themselves.
//
// One vector layer: the element-wise and row kernels every set runs the same way (exp, silu,
// sigmoid, gelu, row max, the F16 mask, F16 / BF16 <-> F32 rows, axpy, the float dot tiles and
// GEMM packing) are written once, as templates over a vector type V: vec-math.h (the element
// math) and simd.h (the rows and loops; it documents what V has). Each set implements V in one
// header under arch/ (arch/x86/simd-avx2.h, simd-avx512.h, arch/arm/simd-neon.h; vec-math.h's
// `scalar`, one lane, is the reference) and its table instantiates the templates with it, so the
// operations, their order and their rounding are the same on every set. What stays per set is
// where the instructions differ: GEMM micro-kernels, quantized dots, repacked GEMMs, AMX tiles,
// AVX512's own softmax rows. SIMD intrinsics live only under arch/; the rest of the CPU code
// calls through ggml_cpu(), a constant table chosen below at compile time (no call through it is
// in an innermost loop: a call does a row, a tile or a group of rows).
#pragma once

#include "../ggml-impl.h"
#include "quant-dot.h"
#include "quant-repack.h"
#include "vec.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#include <type_traits>
#endif

// ---- the build's instruction set: the one #if chain ---------------------------------------
// From the compiler flags CMake passes (GGML_FORCE_SCALAR: the scalar reference only). The
// GGML_SIMD_* macros say which sets are compiled in (the guards of the files under arch/):
// AVX512 builds also compile the AVX2 set (its table is the AVX512 one's base, and is tested);
// AMX builds (AVX512 with AMX-INT8, VNNI and GFNI, on Linux) add the AMX set over AVX512.
#if defined(GGML_FORCE_SCALAR)
#  define GGML_CPU_KERNELS_BEST ggml_cpu_kernels_scalar
#elif defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__) && defined(__FMA__) && defined(__F16C__)
#  define GGML_SIMD_AVX512 1
#  define GGML_SIMD_AVX2   1
#  if (defined(__AMX_TILE__) || defined(__AMXTILE__)) && (defined(__AMX_INT8__) || defined(__AMXINT8__)) && \
      defined(__AVX512VNNI__) && defined(__GFNI__) && defined(__linux__)  /* GCC's spelling, then clang's */
#    define GGML_SIMD_AMX  1
#    define GGML_CPU_KERNELS_BEST ggml_cpu_kernels_amx
#  else
#    define GGML_CPU_KERNELS_BEST ggml_cpu_kernels_avx512
#  endif
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#  define GGML_SIMD_AVX2   1
#  define GGML_CPU_KERNELS_BEST ggml_cpu_kernels_avx2
#elif defined(__ARM_NEON) && defined(__aarch64__)
#  define GGML_SIMD_NEON   1
#  define GGML_CPU_KERNELS_BEST ggml_cpu_kernels_neon
#else
#  define GGML_CPU_KERNELS_BEST ggml_cpu_kernels_scalar
#endif

// ---- the table ------------------------------------------------------------------------------
// Build facts (ggml_cpu_has_*): the extensions a table's kernels use.
enum {
    GGML_CPU_FEAT_AVX2        = 1 << 0,
    GGML_CPU_FEAT_AVX512      = 1 << 1,
    GGML_CPU_FEAT_AVX512_VNNI = 1 << 2,
    GGML_CPU_FEAT_NEON        = 1 << 3,
    GGML_CPU_FEAT_DOTPROD     = 1 << 4,
    GGML_CPU_FEAT_AMX_INT8    = 1 << 5,
};

// F32 rows: y[i] = f(x[i]) for i < n (y may equal x).
typedef void (*ggml_cpu_row_fn)(float * y, const float * x, int64_t n);

// The repacked layouts' kernels (quant-repack.h): NULL where the set does not repack the type.
struct ggml_repack_kernels {
    ggml_repack_gemm_fn q4_0, q8_0, q4_K, q5_K, q6_K, iq4_xs;
    // One Q8_0 x16 block straight from F32 (out_prod's conversion of a repacked Q8_0 a's rows).
    void (*quantize_q8_0x16)(const float * x, int64_t ldx, void * out);
    // The same straight from a repacked Q4_0 a (ggml_repack_q4_0x16_to_q8_0x16t, quant-repack.h).
    void (*q4_0x16_to_q8_0x16t)(const void * g0, const void * g1, int half, void * out);
    // Columns 16 at a time, where the set has a faster kernel for them (NULL: none).
    ggml_repack_gemm_x16_fn q4_0_x16, q8_0_x16, q4_K_x16, q5_K_x16, q6_K_x16;
    // The Q4_0 / Q8_0 layouts' activations (ggml_quantize_row_q8_0x) and the K-quants' (Q8_K,
    // ggml_repack_act_q8_K): the same bytes as the reference.
    void (*quantize_row_q8_0x)(const float * x, void * y, int64_t n);
    void (*quantize_row_q8_K)(const float * x, void * y, int64_t n);
};

struct ggml_cpu_kernels {
    const char * isa;                     // "scalar", "AVX2", "AVX512", "AMX", "NEON"
    const struct ggml_cpu_kernels * base; // the set this one builds on (NULL: the scalar one)
    unsigned features;                    // GGML_CPU_FEAT_*

    // ---- mul_mat / out_prod / flash_attn of the float types (vec.h) ----
    const struct ggml_mm_type_kernels * (*mm_type)(enum ggml_type type);  // F32, F16, BF16 (else NULL)
    ggml_axpy_fn axpy;
    ggml_to_float_t fp16_to_fp32;
    ggml_to_float_t bf16_to_fp32;
    ggml_bf16_pairs_fn bf16_pairs;
    const struct ggml_gemm_kernel * gemm_bf16_pairs;  // NULL: no fast BF16 products here
    // AMX-BF16 tile products (out_prod with GGML_PREC_BF16; NULL: none): 2 x 2 tiles of 16 x 16
    // F32 at c (tile (i, j) at c + 256 (2 i + j), rows n, columns k) += the sums over m < 32 nmc
    // of x_i[n][m] w_j[m][k]: x_i 16 rows of bf16 (ldx bytes apart, m in order), w_j per pair of
    // m 16 units (bf16(w[m][k]), bf16(w[m + 1][k])) (64 bytes, pairs in order).
    void (*tiles_bf16)(int64_t nmc, const void * x0, const void * x1, size_t ldx, const void * w0, const void * w1, float * c);
    // F32 to bf16, rounding to nearest even as bf16_pairs (with tiles_bf16).
    void (*f32_to_bf16_row)(const float * x, void * y, int64_t n);
    // A repacked Q4_0 block (16 rows m, 32 k) straight to tiles_bf16's pairs of m: 8 pairs of 16
    // units for k < 16 at out, for the next 16 k at out + sub_stride units (NULL: none).
    void (*q4_0x16_to_bf16_pairs)(const void * g, void * out, size_t sub_stride);
    // Rows of a quantized type to F32 (out_prod's conversion of a): the same values as the
    // type's reference to_float, which the entry returns where the set has no kernel.
    ggml_to_float_t (*dequant)(enum ggml_type type);

    // ---- quantized dot products (quant-dot.h) ----
    // The set's fastest dot for the type (its reference where it has no kernel; NULL: no dot).
    ggml_quant_dot_fn (*quant_dot)(enum ggml_type type);
    // The multi-row dot for the type, or NULL (then the single-row dot serves per row).
    ggml_quant_dot_rows_fn (*quant_dot_rows)(enum ggml_type type);
    // The multi-column dot for the type, or NULL (then the single-row dot serves per column).
    ggml_quant_dot_cols_fn (*quant_dot_cols)(enum ggml_type type);

    // ---- repacked weights (quant-repack.h) ----
    struct ggml_repack_kernels repack;

    // ---- float rows of the ops ----
    // exp, silu, sigmoid, gelu (ops-unary.cpp): every element the same whatever n or its place.
    ggml_cpu_row_fn vec_exp, vec_silu, vec_sigmoid, vec_gelu;
    // softmax (softmax-row.h): the largest element (exact), and w[i] += slope * mask[i].
    float (*row_max)(const float * w, int64_t n);
    void (*add_mask_f16)(float * w, const ggml_fp16_t * mask, int64_t n, float slope);
    // F16 <-> F32 rows of the copies and gathers (ops-common.h), rounding to nearest even.
    void (*f16_to_f32_row)(const ggml_fp16_t * x, float * y, int64_t n);
    void (*f32_to_f16_row)(const float * x, ggml_fp16_t * y, int64_t n);
    // softmax (softmax-row.h): w[i] = exp(w[i] - max) and their sum, row_sum's order, in one pass:
    // the bits of the steps one by one, which serve where this is NULL.
    double (*exp_sub_max_sum)(float * w, int64_t n, float max);
    // softmax's logits in one pass, returning their max: w[i] = x[i] * scale, then (mask not NULL)
    // fma(slope, mask[i], w[i]) with an F32 or (mask_f16) F16 mask. NULL: the steps one by one.
    float (*soft_max_logits)(float * w, const float * x, const void * mask, int mask_f16, float scale, float slope, int64_t n);
};

#ifdef __cplusplus
extern "C" {
#endif

// One table per instruction set; only those of the compiled-in sets are defined.
extern const struct ggml_cpu_kernels ggml_cpu_kernels_scalar;
extern const struct ggml_cpu_kernels ggml_cpu_kernels_avx2;
extern const struct ggml_cpu_kernels ggml_cpu_kernels_avx512;
extern const struct ggml_cpu_kernels ggml_cpu_kernels_amx;
extern const struct ggml_cpu_kernels ggml_cpu_kernels_neon;

#ifdef __cplusplus
}
#endif

// Another compiled-in table for the calling thread (NULL: the build's): a CPU backend set to
// another set (ggml_backend_cpu_set_kernels, tests holding the CPU to its scalar reference op by
// op) plans and computes its graphs with it; graph compute hands it to the worker threads.
// (__thread: plain TLS access, no C++ initialisation wrapper on every call.)
extern __thread const struct ggml_cpu_kernels * ggml_cpu_kernels_override;

// The table this build runs on (or the thread's override).
static inline const struct ggml_cpu_kernels * ggml_cpu(void) {
    const struct ggml_cpu_kernels * k = ggml_cpu_kernels_override;
    return k ? k : &GGML_CPU_KERNELS_BEST;
}

// Every compiled-in set, the build's first, then each one's base down to the scalar one (tests
// hold them all to the reference): out[0..n) with n <= 4, returns n.
static inline int ggml_cpu_kernel_sets(const struct ggml_cpu_kernels ** out) {
    int n = 0;
    for (const struct ggml_cpu_kernels * k = &GGML_CPU_KERNELS_BEST; k && n < 4; k = k->base) out[n++] = k;
    return n;
}

#ifdef __cplusplus
// The repacked GEMMs' function types (quant-repack.h), which the arch/ headers declare their
// kernels by.
typedef std::remove_pointer<ggml_repack_gemm_fn>::type ggml_repack_gemm_t;
typedef std::remove_pointer<ggml_repack_gemm_x16_fn>::type ggml_repack_gemm_x16_t;

// A table's quant_dot / quant_dot_rows entry: the set's own kernel for the type where it has one
// (OWN returns NULL where not), else its base set's.
template <ggml_quant_dot_fn (*OWN)(ggml_type), const ggml_cpu_kernels & BASE>
ggml_quant_dot_fn ggml_quant_dot_or_base(ggml_type type) {
    const ggml_quant_dot_fn f = OWN(type);
    return f ? f : BASE.quant_dot(type);
}

template <ggml_quant_dot_rows_fn (*OWN)(ggml_type), const ggml_cpu_kernels & BASE>
ggml_quant_dot_rows_fn ggml_quant_dot_rows_or_base(ggml_type type) {
    const ggml_quant_dot_rows_fn f = OWN(type);
    return f ? f : BASE.quant_dot_rows(type);
}
#endif

// Older names of the matmul part of the tables (the benchmarks under examples/ use them).
typedef struct ggml_cpu_kernels ggml_vec_kernels;
static inline const struct ggml_cpu_kernels * ggml_vec_best(void) { return ggml_cpu(); }
#ifdef __cplusplus
static const struct ggml_cpu_kernels & ggml_vec_scalar = ggml_cpu_kernels_scalar;
#endif
