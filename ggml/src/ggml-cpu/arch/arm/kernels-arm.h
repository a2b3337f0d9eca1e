// kernels-arm.h - the entry points of the Arm instruction sets, which their table
// (kernels-neon.cpp) gathers; nothing else calls them by name. The rows that every set runs the
// same way (simd.h over simd-neon.h) the table instantiates itself.
#pragma once

#include "ggml-cpu/kernels.h"

namespace ggml_cpu_neon {
// vec-neon.cpp
const ggml_mm_type_kernels * mm_type(ggml_type type);
// quant-dot-neon.cpp (NULL: no kernel for the type)
ggml_quant_dot_fn quant_dot(ggml_type type);
// quant-dot-iq-neon.cpp: the IQ and ternary types (NULL for the others)
ggml_quant_dot_fn quant_dot_iq(ggml_type type);
// quant-repack-neon.cpp, quant-repack-k-neon.cpp (with the dot product extension)
ggml_repack_gemm_t repack_gemm_q4_0, repack_gemm_q8_0, repack_gemm_q4_K, repack_gemm_q5_K, repack_gemm_q6_K, repack_gemm_iq4_xs;
}  // namespace ggml_cpu_neon
