// simd.h - which SIMD kernels this build compiles in (chosen at build time by the compiler flags
// CMake passes; GGML_FORCE_SCALAR builds the scalar reference only).
#pragma once

#if !defined(GGML_FORCE_SCALAR)
#  if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__) && defined(__FMA__) && defined(__F16C__)
#    define GGML_SIMD_AVX512 1
#    define GGML_SIMD_AVX2   1  // AVX512 builds also have the AVX2 kernels (used for tails, tested)
#  elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#    define GGML_SIMD_AVX2   1
#  elif defined(__ARM_NEON) && defined(__aarch64__)
#    define GGML_SIMD_NEON   1
#  endif
#endif

#if defined(GGML_SIMD_AVX2) || defined(GGML_SIMD_AVX512)
#  include <immintrin.h>
#endif
#if defined(GGML_SIMD_NEON)
#  include <arm_neon.h>
#endif
