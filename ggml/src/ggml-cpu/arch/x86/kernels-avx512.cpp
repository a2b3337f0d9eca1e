// kernels-avx512.cpp - the AVX512 (F, BW, VL, DQ; VNNI and BF16 where the build has them) table
// (kernels.h), and the AMX one over it. Where AVX512 has no kernel of its own, the AVX2 one (its
// base) serves.
#include "kernels-x86.h"

#if defined(GGML_SIMD_AVX512)

#include "simd-avx512.h"

namespace {

using ggml_simd::ExpKind;
typedef ggml_simd::avx512 V;

#if defined(__AVX512VNNI__)
#if defined(__AVX512VBMI__)
#define QUANT_DOT_COLS ggml_cpu_avx512::quant_dot_cols_iq  // IQ2_XXS, IQ3_XXS; the AVX2 set's for the others
#else
#define QUANT_DOT_COLS ggml_cpu_avx2::quant_dot_cols_iq
#endif
#define QUANT_DOT ggml_quant_dot_or_base<ggml_cpu_avx512::quant_dot, ggml_cpu_kernels_avx2>, \
                  ggml_quant_dot_rows_or_base<ggml_cpu_avx512::quant_dot_rows, ggml_cpu_kernels_avx2>, \
                  QUANT_DOT_COLS
#define REPACK_KERNELS ggml_cpu_avx512::repack_gemm_q4_0, ggml_cpu_avx512::repack_gemm_q8_0, ggml_cpu_avx512::repack_gemm_q4_K, \
                       ggml_cpu_avx512::repack_gemm_q5_K, ggml_cpu_avx512::repack_gemm_q6_K, \
                       ggml_cpu_avx512::repack_gemm_iq4_xs
#define VNNI GGML_CPU_FEAT_AVX512_VNNI
#else
#define QUANT_DOT ggml_quant_dot_or_base<ggml_cpu_avx2::quant_dot, ggml_cpu_kernels_scalar>, ggml_cpu_avx2::quant_dot_rows, \
                  ggml_cpu_avx2::quant_dot_cols_iq  // the AVX2 set's
#define REPACK_KERNELS ggml_cpu_avx2::repack_gemm_q4_0, nullptr, ggml_cpu_avx2::repack_gemm_q4_K, \
                       ggml_cpu_avx2::repack_gemm_q5_K, ggml_cpu_avx2::repack_gemm_q6_K, ggml_cpu_avx2::repack_gemm_iq4_xs
#define VNNI 0
#endif

#if defined(__AVX512BF16__)
#define BF16_PAIRS ggml_cpu_avx512::bf16_pairs, &ggml_cpu_avx512::gemm_bf16_pairs
#else
#define BF16_PAIRS nullptr, nullptr
#endif

}  // namespace

#define NO_TILES_BF16 nullptr, nullptr, nullptr
#define NO_GEMM_X16 nullptr, nullptr, nullptr, nullptr, nullptr

// The AVX512 table and the AMX one over it differ only in these arguments.
#define AVX512_TABLE(ISA, BASE, FEATURES, MM_TYPE, REPACK, GEMM_X16, TILES_BF16) { \
    /* isa            */ ISA, \
    /* base           */ BASE, \
    /* features       */ FEATURES, \
    /* mm_type        */ MM_TYPE, \
    /* axpy           */ ggml_simd::axpy<V>, \
    /* fp16_to_fp32   */ ggml_simd::fp16_to_fp32<V>, \
    /* bf16_to_fp32   */ ggml_simd::bf16_to_fp32<V>, \
    /* bf16_pairs, \
       gemm_bf16_pairs*/ BF16_PAIRS, \
    /* tiles_bf16, f32_to_bf16_row, \
       q4_0x16_to_bf16_pairs */ TILES_BF16, \
    /* dequant        */ ggml_cpu_avx512::dequant, \
    /* quant_dot, \
       quant_dot_rows, \
       quant_dot_cols */ QUANT_DOT, \
    /* repack         */ { REPACK, ggml_cpu_avx512::repack_quantize_q8_0x16, \
                           ggml_cpu_avx512::repack_q4_0x16_to_q8_0x16t, GEMM_X16, \
                           ggml_cpu_avx512::quantize_row_q8_0x, ggml_cpu_avx512::quantize_row_q8_K }, \
    /* vec_exp ...    */ ggml_simd::vec_apply<V, ExpKind::exp>, ggml_simd::vec_apply<V, ExpKind::silu>, \
                         ggml_simd::vec_apply<V, ExpKind::sigmoid>, ggml_simd::vec_apply<V, ExpKind::gelu>, \
    /* row_max        */ ggml_simd::row_max<V>, \
    /* add_mask_f16   */ ggml_simd::add_mask_f16<V>, \
    /* f16_to_f32_row */ ggml_simd::f16_to_f32_row<V>, \
    /* f32_to_f16_row */ ggml_simd::f32_to_f16_row<V>, \
    /* exp_sub_max_sum */ ggml_cpu_avx512::exp_sub_max_sum, \
    /* soft_max_logits */ ggml_cpu_avx512::soft_max_logits, \
}

extern "C" const ggml_cpu_kernels ggml_cpu_kernels_avx512 =
    AVX512_TABLE("AVX512", &ggml_cpu_kernels_avx2, GGML_CPU_FEAT_AVX2 | GGML_CPU_FEAT_AVX512 | VNNI, ggml_cpu_avx512::mm_type, REPACK_KERNELS, NO_GEMM_X16,
                 NO_TILES_BF16);

#if defined(GGML_SIMD_AMX)
#if (defined(__AMX_BF16__) || defined(__AMXBF16__)) && defined(__AVX512BF16__)
#define AMX_TILES_BF16 ggml_cpu_amx::tiles_bf16, ggml_cpu_amx::f32_to_bf16_row, ggml_cpu_amx::q4_0x16_to_bf16_pairs
#define AMX_MM_TYPE ggml_cpu_amx::mm_type
#else
#define AMX_TILES_BF16 NO_TILES_BF16
#define AMX_MM_TYPE ggml_cpu_avx512::mm_type_pf
#endif
// Token generation: the Q4_0 / Q8_0 kernels that prefetch for one column too, and the float
// types' rows streamed one by one prefetched (on Xeons).
#define AMX_REPACK_KERNELS ggml_cpu_avx512::repack_gemm_q4_0_pf, ggml_cpu_avx512::repack_gemm_q8_0_pf, ggml_cpu_avx512::repack_gemm_q4_K_pf, \
                           ggml_cpu_avx512::repack_gemm_q5_K_pf, ggml_cpu_avx512::repack_gemm_q6_K_pf, \
                           ggml_cpu_avx512::repack_gemm_iq4_xs_pf
#define AMX_GEMM_X16 ggml_cpu_amx::repack_gemm_x16_q4_0, ggml_cpu_amx::repack_gemm_x16_q8_0, ggml_cpu_amx::repack_gemm_x16_q4_K, \
                     ggml_cpu_amx::repack_gemm_x16_q5_K, ggml_cpu_amx::repack_gemm_x16_q6_K
// AMX: the AVX512 kernels, with tile products for the repacked Q4_0 / Q8_0 and K-quant weights' prompts, the
// F16 / BF16 weights' GEMM and out_prod in bf16.
extern "C" const ggml_cpu_kernels ggml_cpu_kernels_amx =
    AVX512_TABLE("AMX", &ggml_cpu_kernels_avx512, GGML_CPU_FEAT_AVX2 | GGML_CPU_FEAT_AVX512 | VNNI | GGML_CPU_FEAT_AMX_INT8,
                 AMX_MM_TYPE, AMX_REPACK_KERNELS, AMX_GEMM_X16, AMX_TILES_BF16);
#endif

#endif  // GGML_SIMD_AVX512
