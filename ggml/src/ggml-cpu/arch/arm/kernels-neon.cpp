// kernels-neon.cpp - the NEON table (kernels.h): AArch64 Advanced SIMD with FP16 conversions;
// the repacked layouts' kernels need the dot product extension.
#include "kernels-arm.h"

#if defined(GGML_SIMD_NEON)

namespace {

// The NEON dot where there is one, else the reference.
ggml_quant_dot_fn quant_dot(ggml_type type) {
    const ggml_quant_dot_fn f = ggml_cpu_neon::quant_dot(type);
    return f ? f : ggml_cpu_kernels_scalar.quant_dot(type);
}

ggml_quant_dot_rows_fn no_dot_rows(ggml_type) { return nullptr; }

#if defined(__ARM_FEATURE_DOTPROD)
#define REPACK_KERNELS ggml_cpu_neon::repack_gemm_q4_0, ggml_cpu_neon::repack_gemm_q8_0, ggml_cpu_neon::repack_gemm_q4_K, \
                       ggml_cpu_neon::repack_gemm_q5_K, ggml_cpu_neon::repack_gemm_q6_K
#define DOTPROD GGML_CPU_FEAT_DOTPROD
#else
#define REPACK_KERNELS nullptr, nullptr, nullptr, nullptr, nullptr
#define DOTPROD 0
#endif

}  // namespace

extern "C" const ggml_cpu_kernels ggml_cpu_kernels_neon = {
    /* isa            */ "NEON",
    /* base           */ &ggml_cpu_kernels_scalar,
    /* features       */ GGML_CPU_FEAT_NEON | DOTPROD,
    /* mm_type        */ ggml_cpu_neon::mm_type,
    /* axpy           */ ggml_cpu_neon::axpy,
    /* fp16_to_fp32   */ ggml_cpu_neon::fp16_to_fp32,
    /* bf16_to_fp32   */ ggml_cpu_neon::bf16_to_fp32,
    /* bf16_pairs     */ nullptr,
    /* gemm_bf16_pairs*/ nullptr,
    /* tiles_bf16 ... */ nullptr, nullptr, nullptr,
    /* dequant        */ ggml_dequant_ref,
    /* quant_dot      */ quant_dot,
    /* quant_dot_rows */ no_dot_rows,
    /* repack         */ { REPACK_KERNELS, ggml_repack_quantize_q8_0x16_ref, ggml_repack_q4_0x16_to_q8_0x16t_ref, nullptr, nullptr, nullptr, nullptr, nullptr,
                         ggml_quantize_row_q8_0x_ref, ggml_repack_quantize_q8_K_ref },
    /* vec_exp ...    */ ggml_cpu_neon::vec_exp, ggml_cpu_neon::vec_silu, ggml_cpu_neon::vec_sigmoid, ggml_cpu_neon::vec_gelu,
    /* row_max        */ ggml_cpu_neon::row_max,
    /* add_mask_f16   */ ggml_cpu_neon::add_mask_f16,
    /* f16_to_f32_row */ ggml_cpu_neon::f16_to_f32_row,
    /* f32_to_f16_row */ ggml_cpu_neon::f32_to_f16_row,
    /* exp_sub_max_sum */ nullptr,
    /* soft_max_logits */ nullptr,
};

#endif  // GGML_SIMD_NEON
