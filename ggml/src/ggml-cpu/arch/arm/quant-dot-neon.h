// quant-dot-neon.h - the pieces the NEON dot products share (quant-dot-neon.cpp,
// quant-dot-iq-neon.cpp): scalar F16 and u32 reads, and the 16-byte integer dot.
#pragma once

#include "ggml.h"

#include <arm_neon.h>

#include <stdint.h>
#include <string.h>

namespace ggml_cpu_neon {

// Scalar F16 -> F32 (a single FCVT; __fp16 is a storage type on every aarch64 target).
inline float h2f(ggml_fp16_t h) {
    __fp16 f;
    memcpy(&f, &h, sizeof(f));
    return (float) f;
}

inline uint32_t load_u32(const void * p) {
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

inline int8x16_t s8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }

// acc + the products w[i] * y[i] of 16 signed bytes, summed into the 4 s32 lanes (which lane
// gets which product differs between the two paths; callers only use whole-vector sums).
// Any s8 values: without SDOT each s16 holds a single product (at most 128 * 128).
inline int32x4_t dot16(int32x4_t acc, int8x16_t w, int8x16_t y) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, w, y);
#else
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(w), vget_low_s8(y)));
    return vpadalq_s16(acc, vmull_high_s8(w, y));
#endif
}

}  // namespace ggml_cpu_neon
