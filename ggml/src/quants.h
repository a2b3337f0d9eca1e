// quants.h - the block layouts of the GGUF quantized types (fixed by the file format: every
// field, its order and its size are part of the format) and their scalar reference routines.
//
// A row of n values is n / QK blocks. 32-value blocks: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1,
// IQ4_NL. 256-value super-blocks (sub-blocks with their own scales): the K types Q2_K .. Q6_K,
// Q8_K, the IQ types IQ2_XXS .. IQ4_XS and the ternary TQ1_0, TQ2_0.
#pragma once

#include "ggml-impl.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK4_NL 32
#define QK_K 256
#define K_SCALE_SIZE 12

// x = d * (q - 8); q in the low nibbles for values 0..15, the high nibbles for 16..31.
typedef struct { ggml_fp16_t d; uint8_t qs[QK4_0 / 2]; } block_q4_0;
// x = d * q + m
typedef struct { ggml_fp16_t d; ggml_fp16_t m; uint8_t qs[QK4_1 / 2]; } block_q4_1;
// x = d * (q - 16); bit 4 of value j in bit j of qh (little-endian u32).
typedef struct { ggml_fp16_t d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; } block_q5_0;
// x = d * q + m
typedef struct { ggml_fp16_t d; ggml_fp16_t m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; } block_q5_1;
// x = d * q
typedef struct { ggml_fp16_t d; int8_t qs[QK8_0]; } block_q8_0;
// x = d * q; s = d * sum(q) (used by the dot products with Q4_1 / Q5_1)
typedef struct { ggml_fp16_t d; ggml_fp16_t s; int8_t qs[QK8_1]; } block_q8_1;
// x = d * kvalues_iq4nl[q]; nibble layout as Q4_0.
typedef struct { ggml_fp16_t d; uint8_t qs[QK4_NL / 2]; } block_iq4_nl;

// 16 sub-blocks of 16: x = d * (scales & 15) * q - dmin * (scales >> 4), q 2-bit.
typedef struct {
    uint8_t scales[QK_K / 16];
    uint8_t qs[QK_K / 4];
    ggml_fp16_t d;
    ggml_fp16_t dmin;
} block_q2_K;
// 16 sub-blocks of 16: x = d * (scale - 32) * (q - 4 * !hbit), 6-bit scales packed in 12 bytes.
typedef struct {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12];
    ggml_fp16_t d;
} block_q3_K;
// 8 sub-blocks of 32: x = d * sc * q - dmin * m, 6-bit sc and m packed in 12 bytes, q 4-bit.
typedef struct {
    ggml_fp16_t d;
    ggml_fp16_t dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qs[QK_K / 2];
} block_q4_K;
// As Q4_K with a fifth bit per value in qh.
typedef struct {
    ggml_fp16_t d;
    ggml_fp16_t dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} block_q5_K;
// 16 sub-blocks of 16: x = d * scale * (q - 32), q 6-bit (low 4 bits in ql, high 2 in qh).
typedef struct {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t  scales[QK_K / 16];
    ggml_fp16_t d;
} block_q6_K;
// The activation type the K-quants are multiplied with: x = d * q, bsums = sums of 16 q's.
typedef struct {
    float   d;
    int8_t  qs[QK_K];
    int16_t bsums[QK_K / 16];
} block_q8_K;

// ---- the IQ and ternary super-blocks (256 values) --------------------------------------------
// The IQ2 / IQ3 / IQ1 types code groups of 8 (IQ3: 4) magnitudes as an index into a grid of
// lattice points (ggml_iq*_grid below), with the signs apart; a scale per 32 (IQ1_M: 16) values.
// sign bytes: bit j set = value j negative; the 7-bit sign codes of IQ2_XXS / IQ2_XS / IQ3_XXS
// leave out bit 7, which makes the number of negatives even (ggml_iq2_signs).

// Per 32 values, 8 bytes: 4 grid indices (bytes 0..3), then a u32 of four 7-bit sign codes
// (bits 0..27) and a 4-bit scale ls (bits 28..31): x = d * (0.5 + ls) / 4 * grid * sign.
typedef struct { ggml_fp16_t d; uint16_t qs[QK_K / 8]; } block_iq2_xxs;
// qs: per 8 values a 9-bit grid index and a 7-bit sign code; scales: per 32 values two 4-bit
// scales (low nibble: the first 16 values): x = d * (0.5 + ls) / 4 * grid * sign.
typedef struct { ggml_fp16_t d; uint16_t qs[QK_K / 8]; uint8_t scales[QK_K / 32]; } block_iq2_xs;
// qs[0..31]: low 8 bits of the 10-bit grid indices, qs[32..63]: sign bytes (no parity rule);
// qh: per 32 values the indices' 2 high bits; scales as IQ2_XS.
typedef struct { ggml_fp16_t d; uint8_t qs[QK_K / 4]; uint8_t qh[QK_K / 32]; uint8_t scales[QK_K / 32]; } block_iq2_s;
// qs[0..63]: grid indices (4 values each); qs[64..95]: per 32 values a u32 of four 7-bit sign
// codes and a 4-bit scale, as IQ2_XXS: x = d * (0.5 + ls) / 2 * grid * sign.
typedef struct { ggml_fp16_t d; uint8_t qs[3 * QK_K / 8]; } block_iq3_xxs;
// qs: low 8 bits of the 9-bit grid indices (4 values each), qh: their high bits (per 32 values),
// signs: sign bytes, scales: per 64 values two 4-bit scales: x = d * (1 + 2 ls) * grid * sign.
typedef struct { ggml_fp16_t d; uint8_t qs[QK_K / 4]; uint8_t qh[QK_K / 32]; uint8_t signs[QK_K / 8]; uint8_t scales[QK_K / 64]; } block_iq3_s;
// qs: low 8 bits of the 11-bit grid indices (8 values each, levels -1, 0, 1); qh per 32 values:
// the indices' high 3 bits (bits 3l..3l+2), a 3-bit scale (bits 12..14), the delta's sign (bit
// 15): x = d * (2 ls + 1) * (grid + delta), delta = +-IQ1S_DELTA.
typedef struct { ggml_fp16_t d; uint8_t qs[QK_K / 8]; uint16_t qh[QK_K / 32]; } block_iq1_s;
// No d field: the F16 scale's 16 bits are the top nibbles of the four u16 of scales. qh per 8
// values: a nibble of 3 high index bits and the delta's sign (bit 3); scales per 16 values: 3
// bits (the u16 words' bits 0..11): x = d * (2 ls + 1) * (grid + delta).
typedef struct { uint8_t qs[QK_K / 8]; uint8_t qh[QK_K / 16]; uint8_t scales[QK_K / 32]; } block_iq1_m;
// IQ4_NL's levels with 6-bit scales per 32 values (low 4 bits in scales_l, high 2 in scales_h):
// x = d * (ls - 32) * kvalues_iq4nl[q]; per 32 values 16 bytes, nibble layout as IQ4_NL.
typedef struct { ggml_fp16_t d; uint16_t scales_h; uint8_t scales_l[QK_K / 64]; uint8_t qs[QK_K / 2]; } block_iq4_xs;
// Ternary, 1.6875 bits: five values per byte as base-3 digits stored as the fraction q / 243
// scaled to a byte (qs: 240 values, then qh: 16 values four per byte): x = d * (t - 1).
typedef struct { uint8_t qs[(QK_K - 4 * QK_K / 64) / 5]; uint8_t qh[QK_K / 64]; ggml_fp16_t d; } block_tq1_0;
// Ternary, 2.0625 bits: 2 bits per value (q in 0..2): x = d * (q - 1).
typedef struct { uint8_t qs[QK_K / 4]; ggml_fp16_t d; } block_tq2_0;

#define IQ1S_DELTA 0.125f
#define IQ1M_DELTA 0.125f

static_assert(sizeof(block_iq2_xxs) == 66, "block_iq2_xxs layout");
static_assert(sizeof(block_iq2_xs) == 74, "block_iq2_xs layout");
static_assert(sizeof(block_iq2_s) == 82, "block_iq2_s layout");
static_assert(sizeof(block_iq3_xxs) == 98, "block_iq3_xxs layout");
static_assert(sizeof(block_iq3_s) == 110, "block_iq3_s layout");
static_assert(sizeof(block_iq1_s) == 50, "block_iq1_s layout");
static_assert(sizeof(block_iq1_m) == 56, "block_iq1_m layout");
static_assert(sizeof(block_iq4_xs) == 136, "block_iq4_xs layout");
static_assert(sizeof(block_tq1_0) == 54, "block_tq1_0 layout");
static_assert(sizeof(block_tq2_0) == 66, "block_tq2_0 layout");

// The grids of lattice points: quants-iq-grids.h.
// A 7-bit sign code to its sign byte: bit 7 makes the number of set bits even.
static inline uint8_t ggml_iq2_signs(int code) { return (uint8_t) (code | ((__builtin_popcount(code) & 1) << 7)); }

static_assert(sizeof(block_q4_0) == 18, "block_q4_0 layout");
static_assert(sizeof(block_q4_1) == 20, "block_q4_1 layout");
static_assert(sizeof(block_q5_0) == 22, "block_q5_0 layout");
static_assert(sizeof(block_q5_1) == 24, "block_q5_1 layout");
static_assert(sizeof(block_q8_0) == 34, "block_q8_0 layout");
static_assert(sizeof(block_q8_1) == 36, "block_q8_1 layout");
static_assert(sizeof(block_iq4_nl) == 18, "block_iq4_nl layout");
static_assert(sizeof(block_q2_K) == 84, "block_q2_K layout");
static_assert(sizeof(block_q3_K) == 110, "block_q3_K layout");
static_assert(sizeof(block_q4_K) == 144, "block_q4_K layout");
static_assert(sizeof(block_q5_K) == 176, "block_q5_K layout");
static_assert(sizeof(block_q6_K) == 210, "block_q6_K layout");
static_assert(sizeof(block_q8_K) == 292, "block_q8_K layout");

// The 16 non-uniform levels of IQ4_NL.
extern const int8_t kvalues_iq4nl[16];

// Scale and min j (0..7) of a Q4_K / Q5_K block's 12 packed bytes.
static inline void get_scale_min_k4(int j, const uint8_t * q, uint8_t * sc, uint8_t * m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// Scale j (0..15) of a Q3_K block: 4 low bits in bytes 0..7, 2 high bits in bytes 8..11.
static inline int q3_k_scale(const uint8_t * s, int j) {
    const int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
    const int hi = (s[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
    return (lo | (hi << 4)) - 32;
}

// v clamped to [-127, 127] for the 8-bit quantizers, NaN to 0: their scale bounds finite values
// already (results unchanged), but a NaN, an infinity or a subnormal block scale (1 / d = inf)
// reaches them from the activations of a model whose weights overflow, and converting such a
// float to an integer is undefined behaviour.
static inline float ggml_q8_clamp(float v) {
    return v >= -127.0f && v <= 127.0f ? v : v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : 0.0f;
}

// ---- reference dequantize (n a multiple of the block size) ---------------------------------
void dequantize_row_q4_0(const block_q4_0 * x, float * y, int64_t n);
void dequantize_row_q4_1(const block_q4_1 * x, float * y, int64_t n);
void dequantize_row_q5_0(const block_q5_0 * x, float * y, int64_t n);
void dequantize_row_q5_1(const block_q5_1 * x, float * y, int64_t n);
void dequantize_row_q8_0(const block_q8_0 * x, float * y, int64_t n);
void dequantize_row_q8_1(const block_q8_1 * x, float * y, int64_t n);
void dequantize_row_iq4_nl(const block_iq4_nl * x, float * y, int64_t n);
void dequantize_row_q2_K(const block_q2_K * x, float * y, int64_t n);
void dequantize_row_q3_K(const block_q3_K * x, float * y, int64_t n);
void dequantize_row_q4_K(const block_q4_K * x, float * y, int64_t n);
void dequantize_row_q5_K(const block_q5_K * x, float * y, int64_t n);
void dequantize_row_q6_K(const block_q6_K * x, float * y, int64_t n);
void dequantize_row_q8_K(const block_q8_K * x, float * y, int64_t n);
void dequantize_row_iq2_xxs(const block_iq2_xxs * x, float * y, int64_t n);
void dequantize_row_iq2_xs(const block_iq2_xs * x, float * y, int64_t n);
void dequantize_row_iq2_s(const block_iq2_s * x, float * y, int64_t n);
void dequantize_row_iq3_xxs(const block_iq3_xxs * x, float * y, int64_t n);
void dequantize_row_iq3_s(const block_iq3_s * x, float * y, int64_t n);
void dequantize_row_iq1_s(const block_iq1_s * x, float * y, int64_t n);
void dequantize_row_iq1_m(const block_iq1_m * x, float * y, int64_t n);
void dequantize_row_iq4_xs(const block_iq4_xs * x, float * y, int64_t n);
void dequantize_row_tq1_0(const block_tq1_0 * x, float * y, int64_t n);
void dequantize_row_tq2_0(const block_tq2_0 * x, float * y, int64_t n);

// ---- reference quantize of the simple types (round to nearest, one scale per block) ----------
void quantize_row_q4_0_ref(const float * x, block_q4_0 * y, int64_t n);
void quantize_row_q4_1_ref(const float * x, block_q4_1 * y, int64_t n);
void quantize_row_q5_0_ref(const float * x, block_q5_0 * y, int64_t n);
void quantize_row_q5_1_ref(const float * x, block_q5_1 * y, int64_t n);
void quantize_row_q8_0_ref(const float * x, block_q8_0 * y, int64_t n);
void quantize_row_q8_1_ref(const float * x, block_q8_1 * y, int64_t n);
void quantize_row_q8_K_ref(const float * x, block_q8_K * y, int64_t n);
// The ternary types: d = max |x|, x / d rounded to -1, 0, 1 (as llama.cpp's reference: files
// byte for byte the same).
void quantize_row_tq1_0_ref(const float * x, block_tq1_0 * y, int64_t n);
void quantize_row_tq2_0_ref(const float * x, block_tq2_0 * y, int64_t n);

#ifdef __cplusplus
}
#endif
