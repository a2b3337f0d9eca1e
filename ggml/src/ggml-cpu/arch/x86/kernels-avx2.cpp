// kernels-avx2.cpp - the AVX2 (+ FMA + F16C) table (kernels.h). AVX512 builds compile it too:
// it is the AVX512 table's base.
#include "kernels-x86.h"

#if defined(GGML_SIMD_AVX2)

#include "simd-avx2.h"

namespace {

using ggml_simd::ExpKind;
typedef ggml_simd::avx2 V;

}  // namespace

extern "C" const ggml_cpu_kernels ggml_cpu_kernels_avx2 = {
    /* isa            */ "AVX2",
    /* base           */ &ggml_cpu_kernels_scalar,
    /* features       */ GGML_CPU_FEAT_AVX2,
    /* mm_type        */ ggml_cpu_avx2::mm_type,
    /* axpy           */ ggml_simd::axpy<V>,
    /* fp16_to_fp32   */ ggml_simd::fp16_to_fp32<V>,
    /* bf16_to_fp32   */ ggml_simd::bf16_to_fp32<V>,
    /* bf16_pairs     */ nullptr,
    /* gemm_bf16_pairs*/ nullptr,
    /* tiles_bf16 ... */ nullptr, nullptr, nullptr,
    /* dequant        */ ggml_dequant_ref,
    /* quant_dot      */ ggml_quant_dot_or_base<ggml_cpu_avx2::quant_dot, ggml_cpu_kernels_scalar>,
    /* quant_dot_rows */ ggml_cpu_avx2::quant_dot_rows,
    /* quant_dot_cols */ ggml_cpu_avx2::quant_dot_cols_iq,
    /* repack         */ { ggml_cpu_avx2::repack_gemm_q4_0, nullptr, ggml_cpu_avx2::repack_gemm_q4_K,
                           ggml_cpu_avx2::repack_gemm_q5_K, ggml_cpu_avx2::repack_gemm_q6_K, ggml_cpu_avx2::repack_gemm_iq4_xs,
                           ggml_repack_quantize_q8_0x16_ref, ggml_repack_q4_0x16_to_q8_0x16t_ref, nullptr, nullptr, nullptr, nullptr, nullptr,
                           ggml_quantize_row_q8_0x_ref, ggml_repack_quantize_q8_K_ref },
    /* vec_exp ...    */ ggml_simd::vec_apply<V, ExpKind::exp>, ggml_simd::vec_apply<V, ExpKind::silu>,
                         ggml_simd::vec_apply<V, ExpKind::sigmoid>, ggml_simd::vec_apply<V, ExpKind::gelu>,
    /* row_max        */ ggml_simd::row_max<V>,
    /* add_mask_f16   */ ggml_simd::add_mask_f16<V>,
    /* f16_to_f32_row */ ggml_simd::f16_to_f32_row<V>,
    /* f32_to_f16_row */ ggml_simd::f32_to_f16_row<V>,
    /* exp_sub_max_sum */ nullptr,
    /* soft_max_logits */ nullptr,
};

#endif  // GGML_SIMD_AVX2
