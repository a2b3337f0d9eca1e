// simd-neon.h - the NEON (AArch64 Advanced SIMD, FP16 conversions) vector type of simd.h and
// vec-math.h: 4 floats in a float32x4_t.
#pragma once

#include "ggml-cpu/simd.h"

#include <arm_neon.h>

#include <string.h>

namespace ggml_simd {

struct neon {
    typedef float32x4_t f;
    typedef int32x4_t   i;
    typedef uint32x4_t  m;
    static constexpr int N = 4;
    static constexpr bool MASKED = false;  // no masked loads (partial vectors go through a copy): loops end in scalar tails

    // The first n (0 < n <= 4) of p in a zeroed copy (no masked loads).
    template <typename T> static void copy_part(T * buf, const T * p, int64_t n) {
        memset(buf, 0, 4 * sizeof(T));
        memcpy(buf, p, n * sizeof(T));
    }

    static f load(const float * p) { return vld1q_f32(p); }
    static void store(float * p, f v) { vst1q_f32(p, v); }
    static f load_part(const float * p, int64_t n) { float buf[4]; copy_part(buf, p, n); return vld1q_f32(buf); }
    static void store_part(float * p, f v, int64_t n) {
        float buf[4];
        vst1q_f32(buf, v);
        memcpy(p, buf, n * sizeof(float));
    }
    static f set1(float x) { return vdupq_n_f32(x); }
    static f zero() { return vdupq_n_f32(0.0f); }
    static f add(f a, f b) { return vaddq_f32(a, b); }
    static f sub(f a, f b) { return vsubq_f32(a, b); }
    static f mul(f a, f b) { return vmulq_f32(a, b); }
    static f div(f a, f b) { return vdivq_f32(a, b); }
    static f fma(f a, f b, f c) { return vfmaq_f32(c, a, b); }
    static f fnma(f a, f b, f c) { return vfmsq_f32(c, a, b); }
    static f max(f a, f b) { return vmaxq_f32(a, b); }  // NaN when either is NaN
    static f min(f a, f b) { return vminq_f32(a, b); }
    static f abs(f a) { return vabsq_f32(a); }
    static f neg(f a) { return vnegq_f32(a); }
    static m ge(f a, f b) { return vcgeq_f32(a, b); }
    static f select(m c, f a, f b) { return vbslq_f32(c, a, b); }
    static i bits(f a) { return vreinterpretq_s32_f32(a); }
    static f from_bits(i a) { return vreinterpretq_f32_s32(a); }
    static i iset1(int32_t x) { return vdupq_n_s32(x); }
    static i iadd(i a, i b) { return vaddq_s32(a, b); }
    static i isub(i a, i b) { return vsubq_s32(a, b); }
    template <int K> static i sra(i a) { return vshrq_n_s32(a, K); }
    template <int K> static i shl(i a) { return vshlq_n_s32(a, K); }
    template <int K> static i srl(i a) { return vreinterpretq_s32_u32(vshrq_n_u32(vreinterpretq_u32_s32(a), K)); }
    static i iand(i a, i b) { return vandq_s32(a, b); }
    static i ior(i a, i b) { return vorrq_s32(a, b); }
    static m igt(i a, i b) { return vcgtq_u32(vreinterpretq_u32_s32(a), vreinterpretq_u32_s32(b)); }
    static i iselect(m c, i a, i b) { return vbslq_s32(c, a, b); }
    static void store_u16(uint16_t * p, i v) { vst1_u16(p, vmovn_u32(vreinterpretq_u32_s32(v))); }

    static float hmax(f v) { return vmaxvq_f32(v); }
    static float hsum(f v) { return vaddvq_f32(v); }

    static f load(const ggml_fp16_t * p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
    static void store(ggml_fp16_t * p, f v) { vst1_u16(p, vreinterpret_u16_f16(vcvt_f16_f32(v))); }
    static f load(const ggml_bf16_t * p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *) p), 16)); }
    static f load_part(const ggml_fp16_t * p, int64_t n) { ggml_fp16_t buf[4]; copy_part(buf, p, n); return load(buf); }
    static f load_part(const ggml_bf16_t * p, int64_t n) { ggml_bf16_t buf[4]; copy_part(buf, p, n); return load(buf); }

    // In place: r[j][i] <- r[i][j] for a 4 x 4 block of floats.
    static void transpose(f r[4]) {
        const float32x4_t t0 = vtrn1q_f32(r[0], r[1]), t1 = vtrn2q_f32(r[0], r[1]);
        const float32x4_t t2 = vtrn1q_f32(r[2], r[3]), t3 = vtrn2q_f32(r[2], r[3]);
        r[0] = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
        r[1] = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
        r[2] = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
        r[3] = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
    }
};

}  // namespace ggml_simd
