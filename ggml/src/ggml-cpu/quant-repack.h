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

#ifdef __cplusplus
extern "C" {
#endif

#define GGML_REPACK_ROWS 16

typedef struct {
    ggml_fp16_t d[GGML_REPACK_ROWS];            // scales of the 16 rows
    uint8_t qs[GGML_REPACK_ROWS * QK4_0 / 2];   // [j][row][4]: bytes 4j..4j+3 of each row's qs
} block_q4_0x16;
static_assert(sizeof(block_q4_0x16) == GGML_REPACK_ROWS * sizeof(block_q4_0), "wrong q4_0x16 size");

// Q8_0 x16: as Q4_0 x16 with 8 byte columns, each value stored plus 128 (as unsigned bytes, the
// operand vpdpbusd wants unsigned); the kernel takes 128 * sum(activations) back out.
typedef struct {
    ggml_fp16_t d[GGML_REPACK_ROWS];
    uint8_t qs[GGML_REPACK_ROWS * QK8_0];       // [j][row][4]: bytes 4j..4j+3 of each row, + 128
} block_q8_0x16;
static_assert(sizeof(block_q8_0x16) == GGML_REPACK_ROWS * sizeof(block_q8_0), "wrong q8_0x16 size");

// Q4_K x16 (K-quant super-blocks of 256, activations Q8_K): per super-block of the 16 rows, their
// scales d and dmin, the 6-bit sub-block scales sc and mins m of sub-block j (0..7) as
// sm[j][row] = sc | (m >> 4) << 6 and mlo[j / 2][row] = low 4 bits of m (j even: low nibble),
// then the quant bytes in 4-byte columns as Q4_0 x16 (column k = bytes 4k..4k+3 of each row).
typedef struct {
    ggml_fp16_t d[GGML_REPACK_ROWS];
    ggml_fp16_t dmin[GGML_REPACK_ROWS];
    uint8_t sm[8][GGML_REPACK_ROWS];
    uint8_t mlo[4][GGML_REPACK_ROWS];
    uint8_t qs[QK_K / 8][GGML_REPACK_ROWS][4];
} block_q4_Kx16;
static_assert(sizeof(block_q4_Kx16) == GGML_REPACK_ROWS * sizeof(block_q4_K), "wrong q4_Kx16 size");

// Q5_K x16: as Q4_K x16, with each row's 32 high-bit bytes (qh) in 4-byte columns before qs.
typedef struct {
    ggml_fp16_t d[GGML_REPACK_ROWS];
    ggml_fp16_t dmin[GGML_REPACK_ROWS];
    uint8_t sm[8][GGML_REPACK_ROWS];
    uint8_t mlo[4][GGML_REPACK_ROWS];
    uint8_t qh[QK_K / 32][GGML_REPACK_ROWS][4];
    uint8_t qs[QK_K / 8][GGML_REPACK_ROWS][4];
} block_q5_Kx16;
static_assert(sizeof(block_q5_Kx16) == GGML_REPACK_ROWS * sizeof(block_q5_K), "wrong q5_Kx16 size");

// Q6_K x16: the 16 rows' d, their 16 sub-block scales as scales[j][row], then the 32 ql and 16
// qh 4-byte columns (ql column c = bytes 4c..4c+3 of each row's ql, qh column c likewise) in the
// order the kernels first read them: per half h (values 128h..) and group gg of 16 values l, for
// k < 4 qh column 8h + 4gg + k then ql column 16h + 4gg + k (quarters 0, 2), then for k < 4 ql
// column 16h + 8 + 4gg + k (quarters 1, 3); see quant-repack-k.cpp for the bits.
// Reading a block front to back is what lets the hardware prefetcher stream it: with all ql
// columns before all qh ones (two ascending streams 2 KiB apart), the AVX512 kernel streamed at
// 10 GB/s in one thread (Zen 4), whatever the software prefetch; read in order, 26 GB/s.
typedef struct {
    ggml_fp16_t d[GGML_REPACK_ROWS];
    int8_t scales[QK_K / 16][GGML_REPACK_ROWS];
    uint8_t q[QK_K / 8 + QK_K / 16][GGML_REPACK_ROWS][4];  // placed by ggml_q6_Kx16_ql / _qh
} block_q6_Kx16;
static_assert(sizeof(block_q6_Kx16) == GGML_REPACK_ROWS * sizeof(block_q6_K), "wrong q6_Kx16 size");

// IQ4_XS x16 (activations Q8_K): the 16 rows' d, their sub-block scales as GGUF stores them, byte
// for byte (scales_h[k][row] = byte k of the row's scales_h: the high 2 bits of sub-blocks 4k..4k+3;
// scales_l[k][row]: the low 4 bits of sub-blocks 2k, 2k + 1 in its nibbles), then the quant bytes
// in 4-byte columns as Q4_K x16. Sub-block j (32 values) is columns 4j..4j+3: their low nibbles
// are values 0..15 of it, their high nibbles values 16..31. The scales stay packed because the
// group must keep its 16 rows' bytes (6 a row); the kernels unpack them once per super-block.
typedef struct {
    ggml_fp16_t d[GGML_REPACK_ROWS];
    uint8_t scales_h[2][GGML_REPACK_ROWS];
    uint8_t scales_l[QK_K / 64][GGML_REPACK_ROWS];
    uint8_t qs[QK_K / 8][GGML_REPACK_ROWS][4];
} block_iq4_xsx16;
static_assert(sizeof(block_iq4_xsx16) == GGML_REPACK_ROWS * sizeof(block_iq4_xs), "wrong iq4_xsx16 size");

// Index in q of ql column c (0..31) and of qh column c (0..15).
static inline int ggml_q6_Kx16_ql(int c) {
    const int unit = 2 * (c / 16) + c / 4 % 2, k = c % 4;
    return 12 * unit + (c / 8 % 2 ? 8 + k : 2 * k + 1);
}
static inline int ggml_q6_Kx16_qh(int c) { return 12 * (c / 4) + 2 * (c % 4); }

// The activation block the repacked kernels read: Q8_0's values with the scale as a float (the
// same F16-rounded value) and -8 * sum(qs), which takes out Q4_0's offset of 8 in one add
// (and, times 16, Q8_0 x16's offset of 128).
typedef struct {
    float d;
    int32_t neg8sum;
    int8_t qs[QK8_0];
} block_q8_0x;
static_assert(sizeof(block_q8_0x) == 40, "wrong q8_0x size");

// The K-quants' activation block the repacked kernels read: Q8_K's fields (the same values), the
// 256 values at offset 64, so that in rows starting on 64 bytes each block's values do too (the
// AMX kernels load them as tile rows, and a row across two cache lines costs a third of their
// time).
// bsums32[j] = bsums[2j] + bsums[2j + 1], the sums of the 32 values of sub-block j (Q4_K's and
// Q5_K's mins, and IQ4_XS's offset, meet two sub-blocks per pair of 16-bit products).
typedef struct {
    float d;
    int16_t bsums[QK_K / 16];
    int16_t bsums32[QK_K / 32];
    uint8_t pad[12];
    int8_t qs[QK_K];
} block_q8_Kx;
static_assert(sizeof(block_q8_Kx) == 320 && offsetof(block_q8_Kx, qs) == 64, "wrong q8_Kx layout");

// 16 rows of one group (nb blocks) against nc columns (b + c * ldb, nb blocks each):
// s[c * lds + r] for r < 16, c < nc (nc <= GGML_REPACK_MAX_COLS).
#define GGML_REPACK_MAX_COLS 8
typedef void (*ggml_repack_gemm_fn)(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
// The same for 16 * n16 columns (the AMX kernels: tiles of 16 columns' activations).
typedef void (*ggml_repack_gemm_x16_fn)(int64_t nb, const void * a, const void * b, size_t ldb, int n16, float * s, size_t lds);

// What the repacked path needs for one weight type.
struct ggml_repack_traits {
    enum ggml_type type;
    int64_t blck;                  // weights per block of the type
    // 16 GGUF rows of nb blocks (row after row) <-> nb repacked blocks of the group.
    void (*pack_group)(const void * rows, int64_t nb, void * out);
    void (*unpack_group)(const void * in, int64_t nb, void * rows);
    // Activations: F32 row -> act blocks of act_blck values, act_size bytes each.
    ggml_from_float_t act_from_float;
    int64_t act_blck;
    size_t act_size;
    ggml_repack_gemm_fn gemm_ref;  // the scalar reference
    ggml_repack_gemm_fn gemm;      // this build's kernel (NULL: the type is not repacked here)
    ggml_repack_gemm_x16_fn gemm_x16;  // this build's kernel for columns 16 at a time (NULL: none)
};

// Columns per block of a repacked product's n activation rows (act_row bytes each): as many as
// stay in L2 while every group of a thread's range passes over them, a multiple of 16, the
// blocks of about equal size. The tile kernels (gemm_x16) are fast enough that re-reading the
// weights for another block of columns costs more: they take 1 MiB of activations (L2 is 2 MiB
// where there is AMX), the others 256 KiB.
int64_t ggml_repack_col_block(const struct ggml_repack_traits * t, size_t act_row, int64_t n);

// Any number of columns nc through the traits' kernels: 16 at a time where there is a kernel
// for them, the rest at most 8 at a time (each output's value does not depend on the split).
void ggml_repack_gemm_cols(const struct ggml_repack_traits * t, int64_t nb, const void * a, const void * b, size_t ldb,
                           int64_t nc, float * s, size_t lds);

// The K-quant layouts and IQ4_XS's (quant-repack-k.cpp): 16 GGUF rows of nb blocks <-> nb groups, and their
// activations, Q8_K values in block_q8_Kx rows.
void ggml_repack_pack_group_q4_K(const void * rows, int64_t nb, void * out);
void ggml_repack_unpack_group_q4_K(const void * in, int64_t nb, void * rows);
void ggml_repack_pack_group_q5_K(const void * rows, int64_t nb, void * out);
void ggml_repack_unpack_group_q5_K(const void * in, int64_t nb, void * rows);
void ggml_repack_pack_group_q6_K(const void * rows, int64_t nb, void * out);
void ggml_repack_unpack_group_q6_K(const void * in, int64_t nb, void * rows);
void ggml_repack_pack_group_iq4_xs(const void * rows, int64_t nb, void * out);
void ggml_repack_unpack_group_iq4_xs(const void * in, int64_t nb, void * rows);
// (block_q8_Kx; the bytes of the padding are zero.)
void ggml_repack_act_q8_K(const float * x, void * y, int64_t n);      // this build's fastest
void ggml_repack_act_q8_K_ref(const float * x, void * y, int64_t n);  // quantize_row_q8_K_ref (the same values)
// Q8_K blocks (block_q8_K): quantize_row_q8_K_ref, the reference of the sets' quantize_row_q8_K.
void ggml_repack_quantize_q8_K_ref(const float * x, void * y, int64_t n);

// The traits of a type this build repacks (with ggml_repack_force, for tests, also the types it
// has only the reference kernel for, which then serves as gemm); NULL otherwise.
const struct ggml_repack_traits * ggml_repack_get_traits(enum ggml_type type);

// Tests set this to repack (with the reference kernel) on builds without a SIMD kernel.
extern int ggml_repack_force;

// Activations: F32 row of n values (n % 32 == 0) to block_q8_0x: this build's fastest, and the
// scalar reference (the same bytes).
void ggml_quantize_row_q8_0x(const float * x, void * y, int64_t n);
void ggml_quantize_row_q8_0x_ref(const float * x, void * y, int64_t n);

// One Q8_0 x16 block straight from F32: 32 values of m of 16 rows, x[m * ldx + r] (r < 16), each
// row's 32 values quantized as ggml_quantize_act_block_q8_0 does and stored as pack_group lays
// out Q8_0 x16 (values + 128). The scalar reference, and this build's fastest (the same bytes).
void ggml_repack_quantize_q8_0x16_ref(const float * x, int64_t ldx, void * out);
void ggml_repack_quantize_q8_0x16(const float * x, int64_t ldx, void * out);

// The Q8_0 x16 block of 16 values of k of 32 rows m of a repacked Q4_0 matrix, without a pass
// through F32 rows: g0 and g1 are block i of the groups of rows m0 and m0 + 16, half 0 takes
// values 32i..32i+15 of k (the low nibbles), half 1 the next 16. The same bytes as dequantizing
// the 32 rows and ggml_repack_quantize_q8_0x16 on values [16 half, 16 half + 16) of k.
void ggml_repack_q4_0x16_to_q8_0x16t_ref(const void * g0, const void * g1, int half, void * out);
void ggml_repack_q4_0x16_to_q8_0x16t(const void * g0, const void * g1, int half, void * out);

// The reference kernels; the SIMD ones are entries of the instruction sets' tables (kernels.h).
void ggml_repack_gemm_q4_0x16_ref(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
void ggml_repack_gemm_q8_0x16_ref(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
void ggml_repack_gemm_q4_Kx16_ref(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
void ggml_repack_gemm_q5_Kx16_ref(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
void ggml_repack_gemm_q6_Kx16_ref(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);
void ggml_repack_gemm_iq4_xsx16_ref(int64_t nb, const void * a, const void * b, size_t ldb, int nc, float * s, size_t lds);

// A repacked tensor's data (n_rows rows of k values) back to the GGUF layout (tests, debugging).
void ggml_repack_unpack(enum ggml_type type, const void * src, void * dst, int64_t n_rows, int64_t k);

#ifdef __cplusplus
}
#endif
