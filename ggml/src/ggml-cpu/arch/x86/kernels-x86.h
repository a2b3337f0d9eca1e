// kernels-x86.h - the entry points of the x86 instruction sets, which their tables
// (kernels-avx2.cpp, kernels-avx512.cpp) gather; nothing else calls them by name. The rows that
// every set runs the same way (simd.h over simd-avx2.h / simd-avx512.h) the tables instantiate
// themselves.
#pragma once

#include "ggml-cpu/kernels.h"

// The repacked GEMMs (both instruction sets) prefetch weights in software only from this many
// columns (prompts): for one or two (token generation) the groups are read front to back, which
// the hardware prefetcher streams faster by itself (one thread, bench-quant, Zen 4: 6-29% by type).
constexpr int GGML_REPACK_PREFETCH_MIN_COLS = 4;

namespace ggml_cpu_avx2 {
// vec-avx2.cpp
const ggml_mm_type_kernels * mm_type(ggml_type type);
// quant-dot-avx2.cpp (NULL: no kernel for the type)
ggml_quant_dot_fn quant_dot(ggml_type type);
ggml_quant_dot_rows_fn quant_dot_rows(ggml_type type);
// quant-dot-iq-avx2.cpp: the IQ and ternary types (NULL for the others)
ggml_quant_dot_fn quant_dot_iq(ggml_type type);
ggml_quant_dot_cols_fn quant_dot_cols_iq(ggml_type type);
// quant-repack-avx2.cpp, quant-repack-k-avx2.cpp
ggml_repack_gemm_t repack_gemm_q4_0, repack_gemm_q4_K, repack_gemm_q5_K, repack_gemm_q6_K, repack_gemm_iq4_xs;
}  // namespace ggml_cpu_avx2

namespace ggml_cpu_avx512 {
// vec-avx512.cpp (mm_type_pf: rows streamed one by one are prefetched, for the AMX set)
const ggml_mm_type_kernels * mm_type(ggml_type type);
const ggml_mm_type_kernels * mm_type_pf(ggml_type type);
void bf16_pairs(const float * x0, const float * x1, int64_t n, void * out);  // with AVX512-BF16
extern const ggml_gemm_kernel gemm_bf16_pairs;                              // with AVX512-BF16
// dequant-avx512.cpp (the reference for the types without a kernel)
ggml_to_float_t dequant(ggml_type type);
// quant-dot-avx512.cpp (with VNNI; NULL: no kernel for the type)
ggml_quant_dot_fn quant_dot(ggml_type type);
ggml_quant_dot_rows_fn quant_dot_rows(ggml_type type);
// quant-dot-iq-avx512.cpp (with VBMI): IQ2_XXS, IQ3_XXS (quant_dot_cols_iq: the AVX2 set's for the others)
ggml_quant_dot_fn quant_dot_iq(ggml_type type);
ggml_quant_dot_cols_fn quant_dot_cols_iq(ggml_type type);
// quant-repack-avx512.cpp, quant-repack-k-avx512.cpp (the kernels with VNNI)
ggml_repack_gemm_t repack_gemm_q4_0, repack_gemm_q8_0, repack_gemm_q4_K, repack_gemm_q5_K, repack_gemm_q6_K, repack_gemm_iq4_xs;
// The same prefetching for one column too (the AMX set's, for Xeons: quant-repack-avx512.cpp)
ggml_repack_gemm_t repack_gemm_q4_0_pf, repack_gemm_q8_0_pf, repack_gemm_q4_K_pf, repack_gemm_q5_K_pf, repack_gemm_q6_K_pf,
                   repack_gemm_iq4_xs_pf;
void repack_quantize_q8_0x16(const float * x, int64_t ldx, void * out);
void quantize_row_q8_0x(const float * x, void * y, int64_t n);
void quantize_row_q8_K(const float * x, void * y, int64_t n);
void repack_q4_0x16_to_q8_0x16t(const void * g0, const void * g1, int half, void * out);
// ops-avx512.cpp
double exp_sub_max_sum(float * w, int64_t n, float max);
float soft_max_logits(float * w, const float * x, const void * mask, int mask_f16, float scale, float slope, int64_t n);
}  // namespace ggml_cpu_avx512

namespace ggml_cpu_amx {
// quant-repack-amx.cpp (columns 16 at a time; the VNNI kernels where the OS grants no tile state)
ggml_repack_gemm_x16_t repack_gemm_x16_q4_0, repack_gemm_x16_q8_0;
// quant-repack-k-amx.cpp (the same for Q4_K / Q5_K / Q6_K x16)
ggml_repack_gemm_x16_t repack_gemm_x16_q4_K, repack_gemm_x16_q5_K, repack_gemm_x16_q6_K;
// gemm-bf16-amx.cpp (with AMX-BF16; vdpbf16ps where the OS grants no tile state)
void tiles_bf16(int64_t nmc, const void * x0, const void * x1, size_t ldx, const void * w0, const void * w1, float * c);
void f32_to_bf16_row(const float * x, void * y, int64_t n);
void q4_0x16_to_bf16_pairs(const void * g, void * out, size_t sub_stride);
// gemm-float-amx.cpp (with AMX-BF16): the AVX512 set's mm_type_pf, with tile GEMMs for F16 / BF16
const ggml_mm_type_kernels * mm_type(ggml_type type);
}  // namespace ggml_cpu_amx
