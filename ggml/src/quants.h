// quants.h - the block layouts of the GGUF quantized types (fixed by the file format: every
// field, its order and its size are part of the format) and their scalar reference routines.
//
// A row of n values is n / QK blocks. 32-value blocks: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1,
// IQ4_NL. 256-value "K" super-blocks: Q2_K .. Q6_K, Q8_K (sub-blocks with their own scales).
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

// ---- reference quantize of the simple types (round to nearest, one scale per block) ----------
void quantize_row_q4_0_ref(const float * x, block_q4_0 * y, int64_t n);
void quantize_row_q4_1_ref(const float * x, block_q4_1 * y, int64_t n);
void quantize_row_q5_0_ref(const float * x, block_q5_0 * y, int64_t n);
void quantize_row_q5_1_ref(const float * x, block_q5_1 * y, int64_t n);
void quantize_row_q8_0_ref(const float * x, block_q8_0 * y, int64_t n);
void quantize_row_q8_1_ref(const float * x, block_q8_1 * y, int64_t n);
void quantize_row_q8_K_ref(const float * x, block_q8_K * y, int64_t n);

#ifdef __cplusplus
}
#endif
