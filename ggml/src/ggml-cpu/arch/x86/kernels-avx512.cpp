// kernels-avx512.cpp - the AVX512 (F, BW, VL, DQ; VNNI and BF16 where the build has them) table
// (kernels.h). Where AVX512 has no kernel of its own, the AVX2 one (its base) serves.
#include "kernels-x86.h"

#if defined(GGML_SIMD_AVX512)

namespace {

const ggml_cpu_kernels & avx2 = ggml_cpu_kernels_avx2;

#if defined(__AVX512VNNI__)
ggml_quant_dot_fn quant_dot(ggml_type type) {
    const ggml_quant_dot_fn f = ggml_cpu_avx512::quant_dot(type);
    return f ? f : avx2.quant_dot(type);
}

ggml_quant_dot_rows_fn quant_dot_rows(ggml_type type) {
    const ggml_quant_dot_rows_fn f = ggml_cpu_avx512::quant_dot_rows(type);
    return f ? f : avx2.quant_dot_rows(type);
}

#define REPACK_KERNELS ggml_cpu_avx512::repack_gemm_q4_0, ggml_cpu_avx512::repack_gemm_q8_0, ggml_cpu_avx512::repack_gemm_q4_K, \
                       ggml_cpu_avx512::repack_gemm_q5_K, ggml_cpu_avx512::repack_gemm_q6_K
#define VNNI GGML_CPU_FEAT_AVX512_VNNI
#else
ggml_quant_dot_fn quant_dot(ggml_type type) { return avx2.quant_dot(type); }
ggml_quant_dot_rows_fn quant_dot_rows(ggml_type type) { return avx2.quant_dot_rows(type); }
#define REPACK_KERNELS ggml_cpu_avx2::repack_gemm_q4_0, nullptr, ggml_cpu_avx2::repack_gemm_q4_K, \
                       ggml_cpu_avx2::repack_gemm_q5_K, ggml_cpu_avx2::repack_gemm_q6_K
#define VNNI 0
#endif

#if defined(__AVX512BF16__)
#define BF16_PAIRS ggml_cpu_avx512::bf16_pairs, &ggml_cpu_avx512::gemm_bf16_pairs
#else
#define BF16_PAIRS nullptr, nullptr
#endif

}  // namespace

extern "C" const ggml_cpu_kernels ggml_cpu_kernels_avx512 = {
    /* isa            */ "AVX512",
    /* base           */ &ggml_cpu_kernels_avx2,
    /* features       */ GGML_CPU_FEAT_AVX2 | GGML_CPU_FEAT_AVX512 | VNNI,
    /* mm_type        */ ggml_cpu_avx512::mm_type,
    /* axpy           */ ggml_cpu_avx512::axpy,
    /* fp16_to_fp32   */ ggml_cpu_avx512::fp16_to_fp32,
    /* bf16_to_fp32   */ ggml_cpu_avx512::bf16_to_fp32,
    /* bf16_pairs,
       gemm_bf16_pairs*/ BF16_PAIRS,
    /* dequant        */ ggml_cpu_avx512::dequant,
    /* quant_dot      */ quant_dot,
    /* quant_dot_rows */ quant_dot_rows,
    /* repack         */ { REPACK_KERNELS, ggml_cpu_avx512::repack_quantize_q8_0x16,
                         ggml_cpu_avx512::repack_q4_0x16_to_q8_0x16t },
    /* vec_exp ...    */ ggml_cpu_avx512::vec_exp, ggml_cpu_avx512::vec_silu, ggml_cpu_avx512::vec_sigmoid, ggml_cpu_avx512::vec_gelu,
    /* row_max        */ ggml_cpu_avx512::row_max,
    /* add_mask_f16   */ ggml_cpu_avx2::add_mask_f16,
    /* f16_to_f32_row */ ggml_cpu_avx512::f16_to_f32_row,
    /* f32_to_f16_row */ ggml_cpu_avx512::f32_to_f16_row,
};

#endif  // GGML_SIMD_AVX512
