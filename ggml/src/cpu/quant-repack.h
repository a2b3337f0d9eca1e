// quant-repack.h - weight matrices rearranged at load into the layout the mul_mat kernels read
// fastest (DESIGN: "weights may be repacked at load, as long as results stay the same").
//
// Q4_0 x16: every group of 16 consecutive rows is stored block column by block column. For each
// block index i of the rows: the 16 rows' F16 scales, then their nibbles interleaved by 4-byte
// column: bytes 4j..4j+3 of rows 0..15, for j = 0..3 (64 bytes each). A 512-bit register then
// holds one 4-byte column of 16 rows, so one vpdpbusd against 4 broadcast activation bytes gives
// 16 rows' partial sums side by side, and each lane ends the block holding one row's integer sum.
// A group takes exactly the bytes of its 16 rows, so repacking is a permutation within them.
//
// Each output is sum over blocks of fma(isum, d_w * d_a, acc), block by block: the same value as
// the scalar reference dot (quant-dot.h), whatever the number of columns or threads.
#pragma once

#include "../quants.h"
#include "cpu-ops.h"
#include "simd.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GGML_REPACK_ROWS 16

typedef struct {
    ggml_fp16_t d[GGML_REPACK_ROWS];            // scales of the 16 rows
    uint8_t qs[GGML_REPACK_ROWS * QK4_0 / 2];   // [j][row][4]: bytes 4j..4j+3 of each row's qs
} block_q4_0x16;
static_assert(sizeof(block_q4_0x16) == GGML_REPACK_ROWS * sizeof(block_q4_0), "wrong q4_0x16 size");

// The activation block the repacked kernels read: Q8_0's values with the scale as a float (the
// same F16-rounded value) and -8 * sum(qs), which takes out Q4_0's offset of 8 in one add.
typedef struct {
    float d;
    int32_t neg8sum;
    int8_t qs[QK8_0];
} block_q8_0x;
static_assert(sizeof(block_q8_0x) == 40, "wrong q8_0x size");

// 16 rows of one group (nb blocks) against nc columns (b + c * ldb, nb blocks each):
// s[c * lds + r] for r < 16, c < nc (nc <= GGML_REPACK_MAX_COLS).
#define GGML_REPACK_MAX_COLS 8
typedef void (*ggml_repack_gemm_fn)(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);

void ggml_repack_gemm_q4_0x16_ref(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
#if defined(GGML_SIMD_AVX512) && defined(__AVX512VNNI__)
void ggml_repack_gemm_q4_0x16_avx512(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
#endif
#if defined(GGML_SIMD_AVX2)
void ggml_repack_gemm_q4_0x16_avx2(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
#endif
#if defined(GGML_SIMD_NEON) && defined(__ARM_FEATURE_DOTPROD)
void ggml_repack_gemm_q4_0x16_neon(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
#endif

// The kernel this build uses for a repacked type: the SIMD one, else (with ggml_repack_force,
// for tests) the reference; NULL when the build does not repack the type.
ggml_repack_gemm_fn ggml_repack_gemm_best(enum ggml_type type);

// Tests set this to repack (with the reference kernel) on builds without a SIMD kernel.
extern int ggml_repack_force;

// Activations: F32 row of n values (n % 32 == 0) to block_q8_0x.
void ggml_quantize_row_q8_0x(const float * x, void * y, int64_t n);

// Repacked rows back to the GGUF layout (for tests and for reading a repacked tensor's values).
void ggml_unpack_q4_0x16(const void * src, void * dst, int64_t n_rows, int64_t k);

// mul_mat with a repacked src0 (matmul.cpp hands over when src0 has GGML_TENSOR_FLAG_REPACKED).
size_t ggml_cpu_mul_mat_repacked_work_size(const struct ggml_tensor * node, int n_threads);
void   ggml_cpu_forward_mul_mat_repacked(const struct ggml_compute_params * params, struct ggml_tensor * dst);

#ifdef __cplusplus
}
#endif
