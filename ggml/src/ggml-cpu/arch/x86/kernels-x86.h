// kernels-x86.h - the entry points of the x86 instruction sets, which their tables
// (kernels-avx2.cpp, kernels-avx512.cpp) gather; nothing else calls them by name.
#pragma once

#include "ggml-cpu/kernels.h"

// The repacked GEMMs (both instruction sets) prefetch weights in software only from this many
// columns (prompts): for one or two (token generation) the groups are read front to back, which
// the hardware prefetcher streams faster by itself (one thread, bench-quant, Zen 4: 6-29% by type).
constexpr int GGML_REPACK_PREFETCH_MIN_COLS = 4;

namespace ggml_cpu_avx2 {
// vec-avx2.cpp
const ggml_mm_type_kernels * mm_type(ggml_type type);
void axpy(int64_t n, int nx, const float * s, const float * const * x, float * y);
void fp16_to_fp32(const void * x, float * y, int64_t n);
void bf16_to_fp32(const void * x, float * y, int64_t n);
// quant-dot-avx2.cpp (NULL: no kernel for the type)
ggml_quant_dot_fn quant_dot(ggml_type type);
ggml_quant_dot_rows_fn quant_dot_rows(ggml_type type);
// quant-repack-avx2.cpp, quant-repack-k-avx2.cpp
void repack_gemm_q4_0(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
void repack_gemm_q4_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
void repack_gemm_q5_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
void repack_gemm_q6_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
// ops-avx2.cpp
void vec_exp(float * y, const float * x, int64_t n);
void vec_silu(float * y, const float * x, int64_t n);
void vec_sigmoid(float * y, const float * x, int64_t n);
void vec_gelu(float * y, const float * x, int64_t n);
float row_max(const float * w, int64_t n);
void add_mask_f16(float * w, const ggml_fp16_t * mask, int64_t n, float slope);
void f16_to_f32_row(const ggml_fp16_t * x, float * y, int64_t n);
void f32_to_f16_row(const float * x, ggml_fp16_t * y, int64_t n);
}  // namespace ggml_cpu_avx2

namespace ggml_cpu_avx512 {
// vec-avx512.cpp (mm_type_pf: rows streamed one by one are prefetched, for the AMX set)
const ggml_mm_type_kernels * mm_type(ggml_type type);
const ggml_mm_type_kernels * mm_type_pf(ggml_type type);
void axpy(int64_t n, int nx, const float * s, const float * const * x, float * y);
void fp16_to_fp32(const void * x, float * y, int64_t n);
void bf16_to_fp32(const void * x, float * y, int64_t n);
void bf16_pairs(const float * x0, const float * x1, int64_t n, void * out);  // with AVX512-BF16
extern const ggml_gemm_kernel gemm_bf16_pairs;                              // with AVX512-BF16
// dequant-avx512.cpp (the reference for the types without a kernel)
ggml_to_float_t dequant(ggml_type type);
// quant-dot-avx512.cpp (with VNNI; NULL: no kernel for the type)
ggml_quant_dot_fn quant_dot(ggml_type type);
ggml_quant_dot_rows_fn quant_dot_rows(ggml_type type);
// quant-repack-avx512.cpp, quant-repack-k-avx512.cpp (the kernels with VNNI)
void repack_gemm_q4_0(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
void repack_gemm_q8_0(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
// The same prefetching for one column too (the AMX set's, for Xeons: quant-repack-avx512.cpp)
void repack_gemm_q4_0_pf(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
void repack_gemm_q8_0_pf(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
void repack_gemm_q4_K_pf(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
void repack_gemm_q5_K_pf(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
void repack_gemm_q6_K_pf(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
void repack_gemm_q4_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
void repack_gemm_q5_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
void repack_gemm_q6_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
void repack_quantize_q8_0x16(const float * x, int64_t ldx, void * out);
void quantize_row_q8_0x(const float * x, void * y, int64_t n);
void quantize_row_q8_K(const float * x, void * y, int64_t n);
void repack_q4_0x16_to_q8_0x16t(const void * g0, const void * g1, int half, void * out);
// ops-avx512.cpp
void vec_exp(float * y, const float * x, int64_t n);
void vec_silu(float * y, const float * x, int64_t n);
void vec_sigmoid(float * y, const float * x, int64_t n);
void vec_gelu(float * y, const float * x, int64_t n);
float row_max(const float * w, int64_t n);
void f16_to_f32_row(const ggml_fp16_t * x, float * y, int64_t n);
void f32_to_f16_row(const float * x, ggml_fp16_t * y, int64_t n);
double exp_sub_max_sum(float * w, int64_t n, float max);
float soft_max_logits(float * w, const float * x, const void * mask, int mask_f16, float scale, float slope, int64_t n);
}  // namespace ggml_cpu_avx512

namespace ggml_cpu_amx {
// quant-repack-amx.cpp (columns 16 at a time; the VNNI kernels where the OS grants no tile state)
void repack_gemm_x16_q4_0(int64_t nb, const void * a, const void * b, size_t ldb, int n16, float * s, size_t lds);
void repack_gemm_x16_q8_0(int64_t nb, const void * a, const void * b, size_t ldb, int n16, float * s, size_t lds);
// quant-repack-k-amx.cpp (the same for Q4_K / Q5_K / Q6_K x16)
void repack_gemm_x16_q4_K(int64_t nb, const void * a, const void * b, size_t ldb, int n16, float * s, size_t lds);
void repack_gemm_x16_q5_K(int64_t nb, const void * a, const void * b, size_t ldb, int n16, float * s, size_t lds);
void repack_gemm_x16_q6_K(int64_t nb, const void * a, const void * b, size_t ldb, int n16, float * s, size_t lds);
// gemm-bf16-amx.cpp (with AMX-BF16; vdpbf16ps where the OS grants no tile state)
void tiles_bf16(int64_t nmc, const void * x0, const void * x1, size_t ldx, const void * w0, const void * w1, float * c);
void f32_to_bf16_row(const float * x, void * y, int64_t n);
void q4_0x16_to_bf16_pairs(const void * g, void * out, size_t sub_stride);
// gemm-float-amx.cpp (with AMX-BF16): the AVX512 set's mm_type_pf, with tile GEMMs for F16 / BF16
const ggml_mm_type_kernels * mm_type(ggml_type type);
}  // namespace ggml_cpu_amx
