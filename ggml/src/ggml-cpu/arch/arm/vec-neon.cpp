// vec-neon.cpp - NEON matmul kernels (aarch64): 4-lane dot tiles with FMLA (F16 converted with
// FCVTL, BF16 by shifting), transposing packers, and a 16 x 6 GEMM micro-kernel (24 q-register
// accumulators, b by lane).
#include "kernels-arm.h"

#if defined(GGML_SIMD_NEON)

#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <string.h>

namespace ggml_cpu_neon {
namespace {

inline float32x4_t bf16x4_to_f32(uint16x4_t h) { return vreinterpretq_f32_u32(vshll_n_u16(h, 16)); }

template <typename T>
inline void copy_part(T * buf, const T * p, int64_t n) {
    memset(buf, 0, 4 * sizeof(T));
    memcpy(buf, p, n * sizeof(T));
}

// ---- element loaders: 4 elements of a row from element i (or the first n < 4, zeros after) --
struct LoadF32 {
    static float32x4_t load(const char * p, int64_t i) { return vld1q_f32((const float *) p + i); }
    static float32x4_t part(const char * p, int64_t i, int64_t n) {
        float buf[4];
        copy_part(buf, (const float *) p + i, n);
        return vld1q_f32(buf);
    }
};

struct LoadF16 {
    static float32x4_t load(const char * p, int64_t i) {
        return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *) p + i)));
    }
    static float32x4_t part(const char * p, int64_t i, int64_t n) {
        uint16_t buf[4];
        copy_part(buf, (const uint16_t *) p + i, n);
        return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(buf)));
    }
};

struct LoadBF16 {
    static float32x4_t load(const char * p, int64_t i) { return bf16x4_to_f32(vld1_u16((const uint16_t *) p + i)); }
    static float32x4_t part(const char * p, int64_t i, int64_t n) {
        uint16_t buf[4];
        copy_part(buf, (const uint16_t *) p + i, n);
        return bf16x4_to_f32(vld1_u16(buf));
    }
};

// ---- dot tiles -----------------------------------------------------------------------------
// One accumulator per output (lanes sum k = lane mod 4), then a fixed pairwise sum.
template <typename L, int R, int C>
void dot_tile_rc(int64_t k, const char * a, size_t lda, const char * b, size_t ldb, float * s, size_t lds) {
    float32x4_t acc[R][C];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 4 <= k; i += 4) {
        float32x4_t av[R];
        for (int r = 0; r < R; r++) av[r] = L::load(a + r * lda, i);
        for (int c = 0; c < C; c++) {
            const float32x4_t bv = L::load(b + c * ldb, i);
            for (int r = 0; r < R; r++) acc[r][c] = vfmaq_f32(acc[r][c], av[r], bv);
        }
    }
    if (i < k) {
        const int64_t n = k - i;
        float32x4_t av[R];
        for (int r = 0; r < R; r++) av[r] = L::part(a + r * lda, i, n);
        for (int c = 0; c < C; c++) {
            const float32x4_t bv = L::part(b + c * ldb, i, n);
            for (int r = 0; r < R; r++) acc[r][c] = vfmaq_f32(acc[r][c], av[r], bv);
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) s[c * lds + r] = vaddvq_f32(acc[r][c]);
}

typedef void (*tile_rc_fn)(int64_t, const char *, size_t, const char *, size_t, float *, size_t);

template <typename L>
void dot_tile(int64_t k, int nr, int nc, const void * a, size_t lda, const void * b, size_t ldb, float * s, size_t lds) {
    static const tile_rc_fn fns[4][4] = {
        { dot_tile_rc<L, 1, 1>, dot_tile_rc<L, 1, 2>, dot_tile_rc<L, 1, 3>, dot_tile_rc<L, 1, 4> },
        { dot_tile_rc<L, 2, 1>, dot_tile_rc<L, 2, 2>, dot_tile_rc<L, 2, 3>, dot_tile_rc<L, 2, 4> },
        { dot_tile_rc<L, 3, 1>, dot_tile_rc<L, 3, 2>, dot_tile_rc<L, 3, 3>, dot_tile_rc<L, 3, 4> },
        { dot_tile_rc<L, 4, 1>, dot_tile_rc<L, 4, 2>, dot_tile_rc<L, 4, 3>, dot_tile_rc<L, 4, 4> },
    };
    fns[nr - 1][nc - 1](k, (const char *) a, lda, (const char *) b, ldb, s, lds);
}

// ---- row conversions -----------------------------------------------------------------------
void fp32_to_fp16(const float * x, void * y, int64_t n) {
    uint16_t * out = (uint16_t *) y;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(out + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    for (; i < n; i++) out[i] = GGML_FP32_TO_FP16(x[i]);
}

// Round to nearest even; NaN stays a quiet NaN (as GGML_FP32_TO_BF16).
void fp32_to_bf16(const float * x, void * y, int64_t n) {
    uint16_t * out = (uint16_t *) y;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const uint32x4_t u = vreinterpretq_u32_f32(vld1q_f32(x + i));
        const uint32x4_t lsb = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
        const uint32x4_t rounded = vshrq_n_u32(vaddq_u32(u, vaddq_u32(lsb, vdupq_n_u32(0x7fff))), 16);
        const uint32x4_t quiet = vorrq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(64));
        const uint32x4_t nan = vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7fffffff)), vdupq_n_u32(0x7f800000));
        vst1_u16(out + i, vmovn_u32(vbslq_u32(nan, quiet, rounded)));
    }
    for (; i < n; i++) ((ggml_bf16_t *) y)[i] = GGML_FP32_TO_BF16(x[i]);
}

// ---- packing -------------------------------------------------------------------------------
inline void transpose4(float32x4_t r[4]) {
    const float32x4_t t0 = vtrn1q_f32(r[0], r[1]), t1 = vtrn2q_f32(r[0], r[1]);
    const float32x4_t t2 = vtrn1q_f32(r[2], r[3]), t3 = vtrn2q_f32(r[2], r[3]);
    r[0] = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
    r[1] = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
    r[2] = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
    r[3] = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
}

template <typename L, typename T>
void pack(const void * src, size_t ld, int rows, int width, int64_t k0, int64_t nk, void * dst) {
    float * out = (float *) dst;
    for (int i0 = 0; i0 < width; i0 += 4) {
        const int lanes = std::min(4, width - i0);
        const int nrows = std::max(0, std::min(4, rows - i0));
        const char * row0 = (const char *) src + i0 * ld + k0 * sizeof(T);
        for (int64_t u = 0; u < nk; u += 4) {
            float32x4_t r[4];
            for (int i = 0; i < 4; i++) {
                if (i >= nrows) r[i] = vdupq_n_f32(0.0f);
                else r[i] = nk - u >= 4 ? L::load(row0 + i * ld, u) : L::part(row0 + i * ld, u, nk - u);
            }
            transpose4(r);
            const int nt = (int) std::min<int64_t>(4, nk - u);
            for (int t = 0; t < nt; t++) {
                float * o = out + (u + t) * width + i0;
                if (lanes == 4) {
                    vst1q_f32(o, r[t]);
                } else {
                    float buf[4];
                    vst1q_f32(buf, r[t]);
                    memcpy(o, buf, lanes * sizeof(float));
                }
            }
        }
    }
}

// ---- GEMM micro-kernel ---------------------------------------------------------------------
constexpr int MR = 16, NR = 6;

void micro_f32(int64_t nu, const void * a, const void * b, float * c, size_t ldc, bool accumulate) {
    const float * A = (const float *) a;
    const float * B = (const float *) b;
    float32x4_t acc[NR][4];
    for (int j = 0; j < NR; j++)
        for (int i = 0; i < 4; i++) acc[j][i] = accumulate ? vld1q_f32(c + j * ldc + 4 * i) : vdupq_n_f32(0.0f);
    for (int64_t u = 0; u < nu; u++) {
        float32x4_t av[4];
        for (int i = 0; i < 4; i++) av[i] = vld1q_f32(A + 4 * i);
        const float32x4_t b0 = vld1q_f32(B);
        const float32x2_t b1 = vld1_f32(B + 4);
        for (int i = 0; i < 4; i++) {
            acc[0][i] = vfmaq_laneq_f32(acc[0][i], av[i], b0, 0);
            acc[1][i] = vfmaq_laneq_f32(acc[1][i], av[i], b0, 1);
            acc[2][i] = vfmaq_laneq_f32(acc[2][i], av[i], b0, 2);
            acc[3][i] = vfmaq_laneq_f32(acc[3][i], av[i], b0, 3);
            acc[4][i] = vfmaq_lane_f32(acc[4][i], av[i], b1, 0);
            acc[5][i] = vfmaq_lane_f32(acc[5][i], av[i], b1, 1);
        }
        A += MR;
        B += NR;
    }
    for (int j = 0; j < NR; j++)
        for (int i = 0; i < 4; i++) vst1q_f32(c + j * ldc + 4 * i, acc[j][i]);
}

// ---- tables --------------------------------------------------------------------------------
const ggml_gemm_kernel gemm_f32  = { MR, NR, 1, 256, 128, 64, pack<LoadF32, float>, pack<LoadF32, float>, micro_f32 };
const ggml_gemm_kernel gemm_f16  = { MR, NR, 1, 256, 128, 20, pack<LoadF16, ggml_fp16_t>, pack<LoadF16, ggml_fp16_t>, micro_f32 };
const ggml_gemm_kernel gemm_bf16 = { MR, NR, 1, 256, 128, 20, pack<LoadBF16, ggml_bf16_t>, pack<LoadBF16, ggml_bf16_t>, micro_f32 };

const ggml_mm_type_kernels mm_f32  = { GGML_TYPE_F32,  nullptr,      dot_tile<LoadF32>,  &gemm_f32 };
const ggml_mm_type_kernels mm_f16  = { GGML_TYPE_F16,  fp32_to_fp16, dot_tile<LoadF16>,  &gemm_f16 };
const ggml_mm_type_kernels mm_bf16 = { GGML_TYPE_BF16, fp32_to_bf16, dot_tile<LoadBF16>, &gemm_bf16 };

}  // namespace

void fp16_to_fp32(const void * x, float * y, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, LoadF16::load((const char *) x, i));
    for (; i < n; i++) y[i] = GGML_FP16_TO_FP32(((const ggml_fp16_t *) x)[i]);
}

void bf16_to_fp32(const void * x, float * y, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, LoadBF16::load((const char *) x, i));
    for (; i < n; i++) y[i] = GGML_BF16_TO_FP32(((const ggml_bf16_t *) x)[i]);
}

// ---- axpy ----------------------------------------------------------------------------------
void axpy(int64_t n, int nx, const float * s, const float * const * x, float * y) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        float32x4_t y0 = vld1q_f32(y + i), y1 = vld1q_f32(y + i + 4), y2 = vld1q_f32(y + i + 8), y3 = vld1q_f32(y + i + 12);
        for (int j = 0; j < nx; j++) {
            const float * xj = x[j] + i;
            y0 = vfmaq_n_f32(y0, vld1q_f32(xj), s[j]);
            y1 = vfmaq_n_f32(y1, vld1q_f32(xj + 4), s[j]);
            y2 = vfmaq_n_f32(y2, vld1q_f32(xj + 8), s[j]);
            y3 = vfmaq_n_f32(y3, vld1q_f32(xj + 12), s[j]);
        }
        vst1q_f32(y + i, y0);
        vst1q_f32(y + i + 4, y1);
        vst1q_f32(y + i + 8, y2);
        vst1q_f32(y + i + 12, y3);
    }
    for (; i < n; i++) {
        float v = y[i];
        for (int j = 0; j < nx; j++) v = std::fma(s[j], x[j][i], v);
        y[i] = v;
    }
}

const ggml_mm_type_kernels * mm_type(ggml_type type) {
    switch (type) {
        case GGML_TYPE_F32:  return &mm_f32;
        case GGML_TYPE_F16:  return &mm_f16;
        case GGML_TYPE_BF16: return &mm_bf16;
        default:             return nullptr;
    }
}

}  // namespace ggml_cpu_neon

#endif  // GGML_SIMD_NEON
