// kernels-arm.h - the entry points of the Arm instruction sets, which their table
// (kernels-neon.cpp) gathers; nothing else calls them by name.
#pragma once

#include "ggml-cpu/kernels.h"

namespace ggml_cpu_neon {
// vec-neon.cpp
const ggml_mm_type_kernels * mm_type(ggml_type type);
void axpy(int64_t n, int nx, const float * s, const float * const * x, float * y);
void fp16_to_fp32(const void * x, float * y, int64_t n);
void bf16_to_fp32(const void * x, float * y, int64_t n);
// quant-dot-neon.cpp (NULL: no kernel for the type)
ggml_quant_dot_fn quant_dot(ggml_type type);
// quant-repack-neon.cpp, quant-repack-k-neon.cpp (with the dot product extension)
void repack_gemm_q4_0(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
void repack_gemm_q8_0(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
void repack_gemm_q4_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
void repack_gemm_q5_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
void repack_gemm_q6_K(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
// ops-neon.cpp
void vec_exp(float * y, const float * x, int64_t n);
void vec_silu(float * y, const float * x, int64_t n);
void vec_sigmoid(float * y, const float * x, int64_t n);
void vec_gelu(float * y, const float * x, int64_t n);
float row_max(const float * w, int64_t n);
void add_mask_f16(float * w, const ggml_fp16_t * mask, int64_t n, float slope);
void f16_to_f32_row(const ggml_fp16_t * x, float * y, int64_t n);
void f32_to_f16_row(const float * x, ggml_fp16_t * y, int64_t n);
}  // namespace ggml_cpu_neon
