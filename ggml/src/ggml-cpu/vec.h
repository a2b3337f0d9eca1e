// vec.h - the kinds of matmul kernels of the float types (F32, F16, BF16) that each instruction
// set's table (kernels.h) holds: matmul.cpp uses the build's, the tests hold every compiled-in
// set to the scalar reference.
//
// Two ways to compute mul_mat, both per type of a (the weights):
//  - the dot path (small N, e.g. token generation): dot products of rows of a with rows of b
//    already converted to the type's vec_dot_type, a few rows at a time (a "dot tile");
//  - the packed GEMM path (large N): rows of a and of b are converted and transposed into
//    k-major panels, and a register-tiled micro-kernel computes an mr x nr block of outputs by
//    outer products. Every output is one sequential FMA chain over k, so the result does not
//    depend on blocking, tile position or thread count.
#pragma once

#include "../ggml-impl.h"

#include <stddef.h>
#include <stdint.h>

// ---- dot path ------------------------------------------------------------------------------
// s[c * lds + r] = sum_k a_r[k] * b_c[k] for r < nr, c < nc, where a_r = a + r * lda bytes (a's
// type) and b_c = b + c * ldb bytes (vec_dot_type). Each output is computed the same way
// whatever nr and nc are, so tiles of any shape give bit-identical results.
#define GGML_DOT_TILE_MAX 4
typedef void (*ggml_dot_tile_fn)(int64_t k, int nr, int nc, const void * a, size_t lda,
                                 const void * b, size_t ldb, float * s, size_t lds);

// ---- packed GEMM path ----------------------------------------------------------------------
// Packs elements [k0, k0 + nk) of `rows` rows (src + i * ld bytes) into dst as 32-bit units,
// k-major: dst[u * width + i] for u < ceil(nk / k_unit), i < width; rows >= `rows` are zero,
// and so is the missing half of a last bf16 pair when nk is odd.
typedef void (*ggml_gemm_pack_fn)(const void * src, size_t ld, int rows, int width, int64_t k0,
                                  int64_t nk, void * dst);
// c[j * ldc + i] (+)= sum_u a[u * mr + i] * b[u * nr + j] for i < mr, j < nr over nu units;
// accumulate false starts from zero.
typedef void (*ggml_gemm_micro_fn)(int64_t nu, const void * a, const void * b, float * c,
                                   size_t ldc, bool accumulate);

struct ggml_gemm_kernel {
    int mr, nr;               // micro-tile: mr rows of a (the vector dimension) x nr rows of b
    int k_unit;               // elements of k per packed unit: 1 (an f32) or 2 (a bf16 pair)
    int kc;                   // units of k per cache block (the b micro-panel stays in L1)
    int mc;                   // rows of a per packed block (stays in L2), a multiple of mr
    int min_n;                // rows of b from which this beats the dot path (packing a costs)
    ggml_gemm_pack_fn pack_a; // rows of a (its type) -> units
    ggml_gemm_pack_fn pack_b; // rows of b (already in vec_dot_type) -> units
    ggml_gemm_micro_fn micro;
    // 0: the packed layout above. Else the kernel's own layout (the AMX tiles'): k goes in groups
    // of k_group units, laid out for the tile loads, then a last partial group in the plain
    // layout; kc is a multiple of k_group, so that the units [u0, u0 + nu) of a panel packed from
    // k = 0 are the panel packed from u0 (micro sees the same bytes either way).
    int k_group = 0;
};

// What mul_mat needs for one type of a on one instruction set. A new (e.g. quantized) type is
// a new entry: its vec_dot_type, the conversion of b's rows, a dot tile, optionally a GEMM.
struct ggml_mm_type_kernels {
    enum ggml_type vec_dot_type;      // b's rows are converted to this type once per mul_mat
    ggml_from_float_t from_float;     // F32 row -> vec_dot_type row (NULL when that is F32)
    ggml_dot_tile_fn dot_tile;
    const struct ggml_gemm_kernel * gemm;  // NULL: the dot path serves every N
};

// y[i] += s[0] * x[0][i], then += s[1] * x[1][i], ... (one FMA per term, in order of j).
typedef void (*ggml_axpy_fn)(int64_t n, int nx, const float * s, const float * const * x, float * y);

// ---- BF16 products (opt-in, out_prod with GGML_PREC_BF16) ----------------------------------
// Packed units are pairs of bf16 (k_unit 2): out[i] = bf16(x0[i]) | bf16(x1[i]) << 16 for i < n,
// rounded to nearest even (x1 NULL: zero high halves). The GEMM kernel of this kind has no
// pack_a / pack_b: its caller packs through this function. Its micro-kernel adds, per unit, the
// product of the high halves, then that of the low halves (as vdpbf16ps does), accumulating in
// F32; bf16 products are exact in F32, so only the additions round.
typedef void (*ggml_bf16_pairs_fn)(const float * x0, const float * x1, int64_t n, void * out);

// The kernels of an instruction set are fields of its table, ggml_cpu_kernels (kernels.h).

#ifdef __cplusplus
extern "C" {
#endif

ggml_to_float_t ggml_dequant_ref(enum ggml_type type);  // the type's to_float

// When > 0, mul_mat takes the packed GEMM path from this many rows of b on (instead of the
// kernel's min_n). Tests and benchmarks set it to exercise either path; results never depend
// on the thread count, only on the path.
extern int ggml_mm_gemm_min_n;
// The same for out_prod (out-prod.cpp): the packed GEMM from this many rows of dst on (> 0).
extern int ggml_out_prod_gemm_min_n;

#ifdef __cplusplus
}
#endif

#ifdef __cplusplus
// Work-buffer arithmetic shared by the matrix kernels (matmul.cpp, out-prod.cpp, matmul-id.cpp):
// slices of the work buffer start on cache lines.
namespace ggml_mm_buf {
constexpr size_t ALIGN = 64;
inline size_t align_up(size_t x) { return (x + ALIGN - 1) & ~(ALIGN - 1); }
inline char * align_ptr(void * p) { return (char *) (((uintptr_t) p + ALIGN - 1) & ~(uintptr_t) (ALIGN - 1)); }
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace ggml_mm_buf
#endif

#include "kernels.h"  // the tables, and the older names of their matmul part
