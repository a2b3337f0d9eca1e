// simd.h - (transitional) the build's instruction set (kernels.h) and its intrinsics.
#pragma once

#include "kernels.h"

#if defined(GGML_SIMD_AVX2) || defined(GGML_SIMD_AVX512)
#  include <immintrin.h>
#endif
#if defined(GGML_SIMD_NEON)
#  include <arm_neon.h>
#endif
