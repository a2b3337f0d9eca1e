// gemm-block.h - one thread's F32 matrix product over blocks that fit the caches, for kernels
// that compute their own products (the fused attention): C[n][m] (+)= sum_k A(m, k) B(n, k),
// with the build's packed GEMM micro-kernel (vec.h). Each operand is given by rows (element
// (i, k) at p[i * ld + k]) or by columns (at p[k * ld + i]), so no caller transposes anything.
// Each output is one sequential chain of FMAs over k (from C when accumulating), as in mul_mat:
// the blocking never changes a result.
#pragma once

#include <stddef.h>
#include <stdint.h>

struct ggml_gemm_operand {
    const float * p;
    int64_t ld;    // floats between rows (by rows) or between columns of k (by columns)
    bool by_cols;  // element (i, k) at p[k * ld + i]
};

// Bytes of scratch ggml_gemm_block needs for products of at most M x N x K.
size_t ggml_gemm_block_scratch(int64_t M, int64_t N, int64_t K);

void ggml_gemm_block(int64_t M, int64_t N, int64_t K, struct ggml_gemm_operand a, struct ggml_gemm_operand b,
                     float * c, int64_t ldc, bool accumulate, void * scratch);
