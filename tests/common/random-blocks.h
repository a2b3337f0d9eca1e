// random-blocks.h - test data for the IQ and ternary super-block types where there is no
// quantizer to make it (or only one that needs an importance matrix): random bytes, which are a
// valid block of these types whatever they are, with a finite F16 super-scale put where the type
// keeps it (tools/iq-reference/gen.c's set_scale), so that every value is finite.
#pragma once

#include "ggml.h"

#include <stdint.h>
#include <string.h>

#include <random>

// The F16 super-scale d of an IQ / ternary block of `type`: IQ1_M's in the top nibbles of its last
// four u16 (it has no d field), TQ1_0's and TQ2_0's in their last two bytes, the others' in
// their first two.
inline void set_iq_block_scale(ggml_type type, uint8_t * block, ggml_fp16_t d) {
    const size_t ts = ggml_type_size(type);
    if (type == GGML_TYPE_IQ1_M) {
        uint16_t sc[4];
        memcpy(sc, block + ts - 8, 8);
        for (int k = 0; k < 4; k++) sc[k] = (uint16_t) ((sc[k] & 0x0FFF) | (((d >> (4 * k)) & 0xF) << 12));
        memcpy(block + ts - 8, sc, 8);
    } else if (type == GGML_TYPE_TQ1_0 || type == GGML_TYPE_TQ2_0) {
        memcpy(block + ts - 2, &d, 2);
    } else {
        memcpy(block, &d, 2);
    }
}

// n_blocks random blocks of an IQ / ternary type into out, each with a super-scale of random
// sign and a magnitude in [0.001, 0.011) (gen.c's range), from seed.
inline void random_iq_blocks(ggml_type type, uint8_t * out, int64_t n_blocks, uint32_t seed) {
    std::mt19937 rng(seed);
    const size_t ts = ggml_type_size(type);
    for (size_t i = 0; i < (size_t) n_blocks * ts; i++) out[i] = (uint8_t) (rng() >> 24);
    std::uniform_real_distribution<float> mag(0.001f, 0.011f);
    for (int64_t b = 0; b < n_blocks; b++) {
        const float d = (rng() & 1 ? -1.0f : 1.0f) * mag(rng);
        set_iq_block_scale(type, out + b * ts, ggml_fp32_to_fp16(d));
    }
}
