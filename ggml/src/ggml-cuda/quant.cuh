// quant.cuh - the GGUF block types read on the GPU, straight from the file's bytes (layouts in
// quants.h): one value at a time (get_rows, copies, dequantizing for cuBLAS) and 32 values at
// a time (the matrix-vector products of generation).
#pragma once

#include "common.cuh"

// The block types the kernels read: rows of these may be weights of any op that reads weights.
static inline bool cuda_quant_supported(ggml_type t) {
    switch (t) {
        case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1:
        case GGML_TYPE_Q8_0: case GGML_TYPE_IQ4_NL:
        case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K:
        case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ3_XXS: case GGML_TYPE_IQ3_S:
        case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ1_M: case GGML_TYPE_IQ4_XS: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0:
            return true;
        default:
            return false;
    }
}

// Types with a value-by-value reader: the plain float types and the block types above.
static inline bool cuda_readable_type(ggml_type t) { return is_float_type(t) || cuda_quant_supported(t); }

__constant__ static const int8_t d_kvalues_iq4nl[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };

// Level q of IQ4_NL (the table in constant memory on the device, quants-ref.cpp's on the host).
GGML_CUDA_HD int iq4nl_value(int q) {
#ifdef __CUDA_ARCH__
    return d_kvalues_iq4nl[q];
#else
    return kvalues_iq4nl[q];
#endif
}

// Blocks are not 4-byte aligned in general (18, 34, 210 bytes): read fields as bytes / halves.
GGML_CUDA_HD float load_h(const void * p) { return h2f(*(const uint16_t *) p); }
GGML_CUDA_HD uint32_t load_u32_bytes(const uint8_t * p) {
    return (uint32_t) p[0] | ((uint32_t) p[1] << 8) | ((uint32_t) p[2] << 16) | ((uint32_t) p[3] << 24);
}

// a . b of four signed bytes each, plus c.
GGML_CUDA_HD int dp4a(int a, int b, int c) {
#ifdef __CUDA_ARCH__
    return __dp4a(a, b, c);
#else
    for (int t = 0; t < 4; t++) c += (int) (int8_t) (a >> (8 * t)) * (int) (int8_t) (b >> (8 * t));
    return c;
#endif
}

// Each byte (0..255 unsigned, at least `bias`) minus bias, as signed bytes; no borrow between bytes.
GGML_CUDA_HD int sub_bias4(uint32_t x, uint32_t bias) { return (int) (((x | 0x80808080u) - bias * 0x01010101u) ^ 0x80808080u); }

// 4 bytes at a 2-byte aligned address (blocks of 18, 22, 34, 110, 210 bytes).
GGML_CUDA_HD uint32_t load_u32_a2(const uint8_t * p) {
    const uint16_t * h = (const uint16_t *) p;
    return (uint32_t) h[0] | ((uint32_t) h[1] << 16);
}

// Bits 0..3 of h to bit 4 of bytes 0..3.
GGML_CUDA_HD uint32_t spread4_bit4(uint32_t h) {
    return ((h & 1u) << 4) | ((h & 2u) << 11) | ((h & 4u) << 18) | ((h & 8u) << 25);
}

// The IQ and ternary super-block types' readers (on the loaders above).
#include "quant-iq.cuh"

// Scale and min j (0..7) of a Q4_K / Q5_K block's 12 packed bytes.
GGML_CUDA_HD void scale_min_k4(int j, const uint8_t * q, int & sc, int & m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// Scale j (0..15) of a Q3_K block.
GGML_CUDA_HD int q3k_scale(const uint8_t * s, int j) {
    const int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
    const int hi = (s[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
    return (lo | (hi << 4)) - 32;
}

// Value j of a row of a block type (row: the row's first block).
GGML_CUDA_HD float dequant1(const char * row, int64_t j, int type) {
    switch (type) {
        case GGML_TYPE_Q4_0: {
            const block_q4_0 * b = (const block_q4_0 *) row + j / QK4_0;
            const int l = (int) (j % QK4_0);
            const int q = l < 16 ? (b->qs[l] & 0xF) : (b->qs[l - 16] >> 4);
            return load_h(&b->d) * (q - 8);
        }
        case GGML_TYPE_Q4_1: {
            const block_q4_1 * b = (const block_q4_1 *) row + j / QK4_1;
            const int l = (int) (j % QK4_1);
            const int q = l < 16 ? (b->qs[l] & 0xF) : (b->qs[l - 16] >> 4);
            return load_h(&b->d) * q + load_h(&b->m);
        }
        case GGML_TYPE_Q5_0: {
            const block_q5_0 * b = (const block_q5_0 *) row + j / QK5_0;
            const int l = (int) (j % QK5_0);
            const int lo = l < 16 ? (b->qs[l] & 0xF) : (b->qs[l - 16] >> 4);
            const int hb = (load_u32_bytes(b->qh) >> l) & 1;  // bit l: value l's fifth bit, both halves
            return load_h(&b->d) * ((lo | (hb << 4)) - 16);
        }
        case GGML_TYPE_Q5_1: {
            const block_q5_1 * b = (const block_q5_1 *) row + j / QK5_1;
            const int l = (int) (j % QK5_1);
            const int lo = l < 16 ? (b->qs[l] & 0xF) : (b->qs[l - 16] >> 4);
            const int hb = (load_u32_bytes(b->qh) >> l) & 1;
            return load_h(&b->d) * (lo | (hb << 4)) + load_h(&b->m);
        }
        case GGML_TYPE_Q8_0: {
            const block_q8_0 * b = (const block_q8_0 *) row + j / QK8_0;
            return load_h(&b->d) * b->qs[j % QK8_0];
        }
        case GGML_TYPE_IQ4_NL: {
            const block_iq4_nl * b = (const block_iq4_nl *) row + j / QK4_NL;
            const int l = (int) (j % QK4_NL);
            const int q = l < 16 ? (b->qs[l] & 0xF) : (b->qs[l - 16] >> 4);
            return load_h(&b->d) * iq4nl_value(q);
        }
        case GGML_TYPE_Q2_K: {
            // value 128 h + 32 s + 16 p + l: bits 2s of qs[32 h + 16 p + l], scale 8 h + 2 s + p
            const block_q2_K * b = (const block_q2_K *) row + j / QK_K;
            const int v = (int) (j % QK_K), h = v / 128, s = (v % 128) / 32, t = v % 32;
            const int q = (b->qs[32 * h + t] >> (2 * s)) & 3;
            const int sc = b->scales[8 * h + 2 * s + t / 16];
            return load_h(&b->d) * (sc & 0xF) * q - load_h(&b->dmin) * (sc >> 4);
        }
        case GGML_TYPE_Q3_K: {
            const block_q3_K * b = (const block_q3_K *) row + j / QK_K;
            const int v = (int) (j % QK_K), h = v / 128, s = (v % 128) / 32, t = v % 32;
            const int m = 1 << (4 * h + s);
            const int q = ((b->qs[32 * h + t] >> (2 * s)) & 3) - ((b->hmask[t] & m) ? 0 : 4);
            return load_h(&b->d) * q3k_scale(b->scales, 8 * h + 2 * s + t / 16) * q;
        }
        case GGML_TYPE_Q4_K: {
            // chunk c of 64 values: qs[32 c + l], low nibbles sub-block 2c, high nibbles 2c + 1
            const block_q4_K * b = (const block_q4_K *) row + j / QK_K;
            const int v = (int) (j % QK_K), c = v / 64, hi = (v % 64) / 32, l = v % 32;
            int sc, m;
            scale_min_k4(2 * c + hi, b->scales, sc, m);
            const int q = hi ? (b->qs[32 * c + l] >> 4) : (b->qs[32 * c + l] & 0xF);
            return load_h(&b->d) * sc * q - load_h(&b->dmin) * m;
        }
        case GGML_TYPE_Q5_K: {
            const block_q5_K * b = (const block_q5_K *) row + j / QK_K;
            const int v = (int) (j % QK_K), c = v / 64, hi = (v % 64) / 32, l = v % 32, sub = 2 * c + hi;
            int sc, m;
            scale_min_k4(sub, b->scales, sc, m);
            const int q = (hi ? (b->qs[32 * c + l] >> 4) : (b->qs[32 * c + l] & 0xF)) + (((b->qh[l] >> sub) & 1) << 4);
            return load_h(&b->d) * sc * q - load_h(&b->dmin) * m;
        }
        case GGML_TYPE_Q6_K: {
            // half h of 128 values: ql[64 h ..], qh[32 h ..], scales[8 h ..]; value 32 s + l
            const block_q6_K * b = (const block_q6_K *) row + j / QK_K;
            const int v = (int) (j % QK_K), h = v / 128, s = (v % 128) / 32, l = v % 32;
            const uint8_t ql = b->ql[64 * h + l + (s & 1) * 32];
            const int lo = s < 2 ? (ql & 0xF) : (ql >> 4);
            const int q = (lo | (((b->qh[32 * h + l] >> (2 * s)) & 3) << 4)) - 32;
            return load_h(&b->d) * b->scales[8 * h + l / 16 + 2 * s] * q;
        }
        default:
            return iq_dequant1(row, j, type);  // the IQ and ternary types (quant-iq.cuh); 0 for others
    }
}

// Value j of a row of any readable type (a plain float row with element stride es).
GGML_CUDA_HD float load_any(const char * row, int64_t j, int type, int64_t es) {
    if (type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16) return load_f(row + j * es, type);
    return dequant1(row, j, type);
}

// ---- writing blocks: a KV cache of a block type -------------------------------------------
// The 32-value types a copy can write (quants-ref.cpp's reference quantizers, same rounding).
static inline bool cuda_quantizable_type(ggml_type t) {
    return t == GGML_TYPE_Q8_0 || t == GGML_TYPE_Q4_0 || t == GGML_TYPE_Q4_1 || t == GGML_TYPE_Q5_0 || t == GGML_TYPE_Q5_1 ||
           t == GGML_TYPE_IQ4_NL;
}

// The value of largest magnitude with its sign (the first one on ties), as the reference.
GGML_CUDA_HD float signed_absmax(const float * x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

GGML_CUDA_HD float q8_clamp(float v) {
    return v >= -127.0f && v <= 127.0f ? v : v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : 0.0f;
}

// The reference quantizer's IQ4_NL block (quants-k.cpp, quant_fit_levels without importance
// weights): of 15 scales around each of the two that map the value of largest magnitude onto
// an end of the levels (-127 or 113), the one whose levels fit best by least squares; then each value
// rounded again, to the nearest level under the scale as stored (F16). A value's nearest level
// is the count of midpoints between neighbouring levels below it.
GGML_CUDA_HD void iq4nl_quantize_block(block_iq4_nl * y, const float * x) {
    float mid[15];
    for (int j = 0; j < 15; j++) mid[j] = 0.5f * (float) (iq4nl_value(j) + iq4nl_value(j + 1));
    auto nearest = [&](float v) {
        int k = 0;
        for (int j = 0; j < 15; j++) k += v > mid[j];
        return k;
    };
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < 32; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    }
    uint8_t L[32];
    float s = 0.0f;
    if (amax < 1e-30f) {
        for (int i = 0; i < 32; i++) L[i] = (uint8_t) nearest(0.0f);
    } else {
        double best_gain = -1.0;
        uint8_t cand[32];
        for (int t = 0; t < 30; t++) {  // either end of the levels (0: -127, 1: 113), 15 steps each
            const int step = t % 15 - 7;
            const float lev = (float) (t < 15 ? iq4nl_value(0) : iq4nl_value(15));
            const float iscale = lev * (1.0f + 0.025f * step) / max;
            float sxl = 0.0f, sll = 0.0f;
            for (int i = 0; i < 32; i++) {
                cand[i] = (uint8_t) nearest(iscale * x[i]);
                const float l = (float) iq4nl_value(cand[i]);
                sxl += x[i] * l;
                sll += l * l;
            }
            if (sll <= 0.0f) continue;
            const double gain = (double) sxl * sxl / sll;
            if (gain > best_gain) {
                best_gain = gain;
                s = sxl / sll;
                for (int i = 0; i < 32; i++) L[i] = cand[i];
            }
        }
    }
    const uint16_t h = f2h(s);
    *(uint16_t *) &y->d = h;
    const float d = h2f(h);
    if (d != 0.0f) {
        for (int i = 0; i < 32; i++) {
            const float v = x[i] / d;
            int best = 0;
            for (int k = 1; k < 16; k++) {
                if (fabsf(v - (float) iq4nl_value(k)) < fabsf(v - (float) iq4nl_value(best))) best = k;
            }
            L[i] = (uint8_t) best;
        }
    }
    for (int j = 0; j < 16; j++) y->qs[j] = (uint8_t) (L[j] | (L[j + 16] << 4));
}

// One 32-value block of dst (quantized as quants-ref.cpp does) from 32 floats.
GGML_CUDA_HD void quantize_block(char * out, const float * x, int type) {
    switch (type) {
        case GGML_TYPE_Q8_0: {
            block_q8_0 * y = (block_q8_0 *) out;
            float amax = 0.0f;
            for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
            const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            *(uint16_t *) &y->d = f2h(d);
            for (int j = 0; j < 32; j++) y->qs[j] = (int8_t) roundf(q8_clamp(x[j] * id));
            break;
        }
        case GGML_TYPE_Q4_0: {
            block_q4_0 * y = (block_q4_0 *) out;
            const float d = signed_absmax(x, 32) / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            *(uint16_t *) &y->d = f2h(d);
            for (int j = 0; j < 16; j++) {
                const int q0 = (int) fminf(15.0f, x[j] * id + 8.5f), q1 = (int) fminf(15.0f, x[j + 16] * id + 8.5f);
                y->qs[j] = (uint8_t) (q0 | (q1 << 4));
            }
            break;
        }
        case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_1: {
            float mn = x[0], mx = x[0];
            for (int j = 1; j < 32; j++) {
                mn = x[j] < mn ? x[j] : mn;
                mx = x[j] > mx ? x[j] : mx;
            }
            const bool q5 = type == GGML_TYPE_Q5_1;
            const float levels = q5 ? 31.0f : 15.0f;
            const float d = (mx - mn) / levels, id = d != 0.0f ? 1.0f / d : 0.0f;
            uint32_t qh = 0;
            uint8_t * qs = q5 ? ((block_q5_1 *) out)->qs : ((block_q4_1 *) out)->qs;
            *(uint16_t *) out = f2h(d);        // d, then m: the first fields of both blocks
            *((uint16_t *) out + 1) = f2h(mn);
            for (int j = 0; j < 16; j++) {
                const int q0 = (int) fminf(levels, (x[j] - mn) * id + 0.5f);
                const int q1 = (int) fminf(levels, (x[j + 16] - mn) * id + 0.5f);
                qs[j] = (uint8_t) ((q0 & 0xF) | ((q1 & 0xF) << 4));
                qh |= (uint32_t) ((q0 >> 4) & 1) << j;
                qh |= (uint32_t) ((q1 >> 4) & 1) << (j + 16);
            }
            if (q5) {
                uint8_t * h = ((block_q5_1 *) out)->qh;
                for (int k = 0; k < 4; k++) h[k] = (uint8_t) (qh >> (8 * k));
            }
            break;
        }
        case GGML_TYPE_Q5_0: {
            block_q5_0 * y = (block_q5_0 *) out;
            const float d = signed_absmax(x, 32) / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            *(uint16_t *) &y->d = f2h(d);
            uint32_t qh = 0;
            for (int j = 0; j < 16; j++) {
                const int q0 = (int) fminf(31.0f, x[j] * id + 16.5f), q1 = (int) fminf(31.0f, x[j + 16] * id + 16.5f);
                y->qs[j] = (uint8_t) ((q0 & 0xF) | ((q1 & 0xF) << 4));
                qh |= (uint32_t) ((q0 >> 4) & 1) << j;
                qh |= (uint32_t) ((q1 >> 4) & 1) << (j + 16);
            }
            for (int k = 0; k < 4; k++) y->qh[k] = (uint8_t) (qh >> (8 * k));
            break;
        }
        case GGML_TYPE_IQ4_NL:
            iq4nl_quantize_block((block_iq4_nl *) out, x);
            break;
        default:
            break;
    }
}

// Sub-block u % 8 (32 values) of Q4_K / Q5_K block u / 8 of a row: the block, the sub-block's
// index, its scale d * sc and its minimum dmin * m.
template <typename block>
GGML_CUDA_HD const block * k4_sub_block(const char * row, int64_t u, int & sub, float & d, float & mn) {
    const block * b = (const block *) row + u / 8;
    sub = (int) (u % 8);
    int sc, m;
    scale_min_k4(sub, b->scales, sc, m);
    d = load_h(&b->d) * sc;
    mn = load_h(&b->dmin) * m;
    return b;
}

// ---- 32 values at once: unit u of a row (values [32 u, 32 u + 32)) -------------------------
// Q4_0, Q8_0: a unit is a block. Q4_K, Q5_K: a unit is a sub-block with its own scale and min.
// Q6_K: a unit is 32 values sharing a ql half and a qh bit pair (two scales of 16). The IQ and
// ternary types: a sub-block (quant-iq.cuh).
template <int T>
GGML_CUDA_HD void dequant_unit(const char * row, int64_t u, float * v) {
    if constexpr (T == GGML_TYPE_Q4_0) {
        const block_q4_0 * b = (const block_q4_0 *) row + u;
        const float d = load_h(&b->d);
        const uint16_t * qs = (const uint16_t *) b->qs;  // 2-byte aligned in the 18-byte block
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const uint16_t q = qs[k];
            v[2 * k] = d * ((q & 0xF) - 8);
            v[2 * k + 1] = d * (((q >> 8) & 0xF) - 8);
            v[2 * k + 16] = d * (((q >> 4) & 0xF) - 8);
            v[2 * k + 17] = d * ((q >> 12) - 8);
        }
    } else if constexpr (T == GGML_TYPE_Q8_0) {
        const block_q8_0 * b = (const block_q8_0 *) row + u;
        const float d = load_h(&b->d);
        const uint16_t * qs = (const uint16_t *) b->qs;
#pragma unroll
        for (int k = 0; k < 16; k++) {
            const uint16_t q = qs[k];
            v[2 * k] = d * (float) (int8_t) (q & 0xFF);
            v[2 * k + 1] = d * (float) (int8_t) (q >> 8);
        }
    } else if constexpr (T == GGML_TYPE_Q4_K || T == GGML_TYPE_Q5_K) {
        using block = typename std::conditional<T == GGML_TYPE_Q4_K, block_q4_K, block_q5_K>::type;
        int sub;
        float d, mn;
        const block * b = k4_sub_block<block>(row, u, sub, d, mn);
        const int c = sub / 2, hi = sub & 1;
        const uint32_t * qs = (const uint32_t *) (b->qs + 32 * c);  // 4-byte aligned (144 / 176-byte blocks)
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const uint32_t q = hi ? (qs[k] >> 4) & 0x0F0F0F0Fu : qs[k] & 0x0F0F0F0Fu;
            uint32_t hb = 0;
            if constexpr (T == GGML_TYPE_Q5_K) {
                const uint32_t h = ((const uint32_t *) ((const block_q5_K *) b)->qh)[k];
                hb = ((h >> sub) & 0x01010101u) << 4;
            }
            const uint32_t qq = q | hb;
#pragma unroll
            for (int t = 0; t < 4; t++) v[4 * k + t] = d * (float) ((qq >> (8 * t)) & 0xFF) - mn;
        }
    } else if constexpr (T == GGML_TYPE_Q6_K) {
        const block_q6_K * b = (const block_q6_K *) row + u / 8;
        const int w = (int) (u % 8), h = w / 4, s = w % 4;
        const float d = load_h(&b->d);
        const float d0 = d * b->scales[8 * h + 2 * s], d1 = d * b->scales[8 * h + 2 * s + 1];
        const uint16_t * ql = (const uint16_t *) (b->ql + 64 * h + (s & 1) * 32);  // 2-byte aligned (210-byte blocks)
        const uint16_t * qh = (const uint16_t *) (b->qh + 32 * h);
#pragma unroll
        for (int k = 0; k < 16; k++) {
            const uint16_t l2 = ql[k], h2 = qh[k];
#pragma unroll
            for (int t = 0; t < 2; t++) {
                const int lb = (l2 >> (8 * t)) & 0xFF, hbyte = (h2 >> (8 * t)) & 0xFF;
                const int lo = s < 2 ? (lb & 0xF) : (lb >> 4);
                const int q = (lo | (((hbyte >> (2 * s)) & 3) << 4)) - 32;
                const int l = 2 * k + t;
                v[l] = (l < 16 ? d0 : d1) * q;
            }
        }
    } else if constexpr (iq_type(T)) {
        iq_dequant_unit<T>(row, u, v);
    } else if constexpr (T == GGML_TYPE_F16) {
        const uint16_t * p = (const uint16_t *) row + 32 * u;
#pragma unroll
        for (int l = 0; l < 32; l++) v[l] = h2f(p[l]);
    } else if constexpr (T == GGML_TYPE_BF16) {
        const uint16_t * p = (const uint16_t *) row + 32 * u;
#pragma unroll
        for (int l = 0; l < 32; l++) v[l] = bf2f(p[l]);
    } else if constexpr (T == GGML_TYPE_F32) {
        const float * p = (const float *) row + 32 * u;
#pragma unroll
        for (int l = 0; l < 32; l++) v[l] = p[l];
    } else {
        // the other block types, value by value
#pragma unroll
        for (int l = 0; l < 32; l++) v[l] = dequant1(row, 32 * u + l, T);
    }
}

// ---- 32 values as bytes: the integer products of quantized weights and 8-bit activations ------
// Activations are quantized as the CPU quantizes b for these weights (its vec_dot_type): 32-value
// blocks with an F16 scale (Q8_0) for the 32-value weight types, 256-value blocks with an F32
// scale (Q8_K) for the K-quants and the IQ / ternary super-block types, so both sides multiply
// the same 8-bit values and the results differ only in the order of the float additions. A unit
// of weights is decoded to 32 signed bytes q (words q[0..3]: values 0..15, q[4..7]: values
// 16..31) with value l = D * q_l + M
// (D0, M0 for values 0..15, D1, M1 for 16..31), so that its dot with activations d_b * a_l is
//   d_b * (D0 * dot(q, a)[0..15] + D1 * dot(q, a)[16..31]) + M0 * d_b * sum(a[0..15]) + M1 * d_b * sum(a[16..31])
// (Q4_1, Q5_1: M0 times Q8_1's F16 sum term instead, as the CPU).
struct int_unit_t {
    int q[8];
    float D0, D1, M0, M1;
};

// The 8-bit activation format of a weight type: 32 (Q8_0) or 256 (Q8_K) values per scale.
GGML_CUDA_HD constexpr int act_block_size(int type) {
    switch (type) {
        case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K:
        case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ3_XXS: case GGML_TYPE_IQ3_S:
        case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ1_M: case GGML_TYPE_IQ4_XS: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0:
            return 256;
        default:
            return 32;
    }
}

template <int T>
GGML_CUDA_HD void int_unit(const char * row, int64_t u, int_unit_t & r) {
    r.M0 = r.M1 = 0.0f;
    if constexpr (T == GGML_TYPE_Q4_0 || T == GGML_TYPE_IQ4_NL) {
        const block_q4_0 * b = (const block_q4_0 *) row + u;  // same layout as block_iq4_nl
        r.D0 = r.D1 = load_h(&b->d);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t w = load_u32_a2(b->qs + 4 * i);
            if constexpr (T == GGML_TYPE_Q4_0) {
                r.q[i] = sub_bias4(w & 0x0F0F0F0Fu, 8);
                r.q[4 + i] = sub_bias4((w >> 4) & 0x0F0F0F0Fu, 8);
            } else {
                uint32_t lo = 0, hi = 0;
#pragma unroll
                for (int t = 0; t < 4; t++) {
                    lo |= (uint32_t) (uint8_t) iq4nl_value((w >> (8 * t)) & 0xF) << (8 * t);
                    hi |= (uint32_t) (uint8_t) iq4nl_value((w >> (8 * t + 4)) & 0xF) << (8 * t);
                }
                r.q[i] = (int) lo;
                r.q[4 + i] = (int) hi;
            }
        }
    } else if constexpr (T == GGML_TYPE_Q4_1) {
        const block_q4_1 * b = (const block_q4_1 *) row + u;  // 20 bytes: 4-byte aligned
        r.D0 = r.D1 = load_h(&b->d);
        r.M0 = r.M1 = load_h(&b->m);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t w = ((const uint32_t *) b->qs)[i];
            r.q[i] = (int) (w & 0x0F0F0F0Fu);
            r.q[4 + i] = (int) ((w >> 4) & 0x0F0F0F0Fu);
        }
    } else if constexpr (T == GGML_TYPE_Q5_0 || T == GGML_TYPE_Q5_1) {
        using block = typename std::conditional<T == GGML_TYPE_Q5_0, block_q5_0, block_q5_1>::type;
        const block * b = (const block *) row + u;
        uint32_t qh;
        if constexpr (T == GGML_TYPE_Q5_0) {
            r.D0 = r.D1 = load_h(&b->d);
            qh = load_u32_a2(b->qh);
        } else {
            r.D0 = r.D1 = load_h(&((const block_q5_1 *) b)->d);
            r.M0 = r.M1 = load_h(&((const block_q5_1 *) b)->m);
            qh = *(const uint32_t *) b->qh;
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t w = T == GGML_TYPE_Q5_0 ? load_u32_a2(b->qs + 4 * i) : ((const uint32_t *) b->qs)[i];
            const uint32_t lo = (w & 0x0F0F0F0Fu) | spread4_bit4(qh >> (4 * i));
            const uint32_t hi = ((w >> 4) & 0x0F0F0F0Fu) | spread4_bit4(qh >> (16 + 4 * i));
            r.q[i] = T == GGML_TYPE_Q5_0 ? sub_bias4(lo, 16) : (int) lo;
            r.q[4 + i] = T == GGML_TYPE_Q5_0 ? sub_bias4(hi, 16) : (int) hi;
        }
    } else if constexpr (T == GGML_TYPE_Q8_0) {
        const block_q8_0 * b = (const block_q8_0 *) row + u;
        r.D0 = r.D1 = load_h(&b->d);
#pragma unroll
        for (int i = 0; i < 8; i++) r.q[i] = (int) load_u32_a2((const uint8_t *) b->qs + 4 * i);
    } else if constexpr (T == GGML_TYPE_Q2_K) {
        // unit (h, s): bits 2s of qs[32 h + t], scales 8 h + 2 s (+1): d * (sc & 15) * q - dmin * (sc >> 4)
        const block_q2_K * b = (const block_q2_K *) row + u / 8;
        const int w = (int) (u % 8), h = w / 4, s = w % 4;
        const float d = load_h(&b->d), dmin = load_h(&b->dmin);
        const int sc0 = b->scales[8 * h + 2 * s], sc1 = b->scales[8 * h + 2 * s + 1];
        r.D0 = d * (sc0 & 0xF);
        r.D1 = d * (sc1 & 0xF);
        r.M0 = -dmin * (sc0 >> 4);
        r.M1 = -dmin * (sc1 >> 4);
#pragma unroll
        for (int i = 0; i < 8; i++) r.q[i] = (int) ((((const uint32_t *) (b->qs + 32 * h))[i] >> (2 * s)) & 0x03030303u);
    } else if constexpr (T == GGML_TYPE_Q3_K) {
        // unit (h, s): bits 2s of qs[32 h + t], minus 4 where bit 4 h + s of hmask[t] is clear
        const block_q3_K * b = (const block_q3_K *) row + u / 8;
        const int w = (int) (u % 8), h = w / 4, s = w % 4;
        const float d = load_h(&b->d);
        r.D0 = d * q3k_scale(b->scales, 8 * h + 2 * s);
        r.D1 = d * q3k_scale(b->scales, 8 * h + 2 * s + 1);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const uint32_t lo = (load_u32_a2(b->qs + 32 * h + 4 * i) >> (2 * s)) & 0x03030303u;
            const uint32_t hb = (load_u32_a2(b->hmask + 4 * i) >> (4 * h + s)) & 0x01010101u;
            r.q[i] = sub_bias4(lo | (hb << 2), 4);
        }
    } else if constexpr (T == GGML_TYPE_Q4_K || T == GGML_TYPE_Q5_K) {
        using block = typename std::conditional<T == GGML_TYPE_Q4_K, block_q4_K, block_q5_K>::type;
        int sub;
        float d, mn;
        const block * b = k4_sub_block<block>(row, u, sub, d, mn);
        const int c = sub / 2, hi = sub & 1;
        r.D0 = r.D1 = d;
        r.M0 = r.M1 = -mn;
        const uint32_t * qs = (const uint32_t *) (b->qs + 32 * c);  // 4-byte aligned (144 / 176-byte blocks)
#pragma unroll
        for (int i = 0; i < 8; i++) {
            uint32_t q = hi ? (qs[i] >> 4) & 0x0F0F0F0Fu : qs[i] & 0x0F0F0F0Fu;
            if constexpr (T == GGML_TYPE_Q5_K) q |= ((((const uint32_t *) ((const block_q5_K *) b)->qh)[i] >> sub) & 0x01010101u) << 4;
            r.q[i] = (int) q;
        }
    } else if constexpr (T == GGML_TYPE_Q6_K) {
        const block_q6_K * b = (const block_q6_K *) row + u / 8;
        const int w = (int) (u % 8), h = w / 4, s = w % 4;
        const float d = load_h(&b->d);
        r.D0 = d * b->scales[8 * h + 2 * s];
        r.D1 = d * b->scales[8 * h + 2 * s + 1];
        const uint8_t * ql = b->ql + 64 * h + (s & 1) * 32;  // 2-byte aligned (210-byte blocks)
        const uint8_t * qh = b->qh + 32 * h;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const uint32_t lo = (load_u32_a2(ql + 4 * i) >> (s < 2 ? 0 : 4)) & 0x0F0F0F0Fu;
            const uint32_t hb = (load_u32_a2(qh + 4 * i) >> (2 * s)) & 0x03030303u;
            r.q[i] = sub_bias4(lo | (hb << 4), 32);
        }
    } else if constexpr (iq_type(T)) {
        iq_unit<T>(row, u, r.q, r.D0, r.D1);
    }
}

// ---- 8-bit activations, as the CPU quantizes b (quants-ref.cpp: Q8_0, Q8_1, Q8_K) --------------
// Per unit of 32 values: 32 signed bytes, and {d, d * sum(q[0..15]), d * sum(q[16..31]), s} with
// d the scale the CPU's dot products use (Q8_0: its F16 value; Q8_K: the F32 scale of 256
// values) and s Q8_1's F16 sum term (d before rounding times sum(q), rounded to F16), which the
// CPU's Q4_1 / Q5_1 products use for their minimum.

// Q8_0 / Q8_1: one 32-value block; returns its scale before rounding to F16.
GGML_CUDA_HD float act_q8_0_unit(const float * x, int8_t * q) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++) q[j] = (int8_t) roundf(q8_clamp(x[j] * id));
    return d;
}

// Q8_K: 32 values of a 256-value block whose value of largest magnitude is max (with its sign).
GGML_CUDA_HD void act_q8_K_unit(const float * x, float max, int8_t * q) {
    const float iscale = max != 0.0f ? -127.0f / max : 0.0f;
    for (int j = 0; j < 32; j++) {
#ifdef __CUDA_ARCH__
        const int v = __float2int_rn(iscale * x[j]);
#else
        const int v = (int) lrintf(iscale * x[j]);
#endif
        q[j] = (int8_t) (v > 127 ? 127 : v < -127 ? -127 : v);
    }
}

// d_raw: the scale before rounding (Q8_1's sum term); d: the scale products use.
GGML_CUDA_HD float4 act_sums(const int8_t * q, float d, float d_raw) {
    int lo = 0, hi = 0;
    for (int j = 0; j < 16; j++) {
        lo += q[j];
        hi += q[16 + j];
    }
    return make_float4(d, d * (float) lo, d * (float) hi, h2f(f2h(d_raw * (float) (lo + hi))));
}

// Weight types multiplied with Q8_1 (their minimum times Q8_1's F16 sum term).
GGML_CUDA_HD constexpr bool act_uses_q8_1(int type) { return type == GGML_TYPE_Q4_1 || type == GGML_TYPE_Q5_1; }

// A unit's product with its activations from the integer sums lo (values 0..15) and hi (16..31)
// and the activations' scales ds (act_sums): the formula of int_unit_t.
template <int T>
GGML_CUDA_HD float unit_dot(const int_unit_t & w, int lo, int hi, const float4 & ds) {
    if constexpr (act_uses_q8_1(T)) return ds.x * (w.D0 * (float) (lo + hi)) + w.M0 * ds.w;
    return ds.x * (w.D0 * (float) lo + w.D1 * (float) hi) + w.M0 * ds.y + w.M1 * ds.z;
}

// ---- 8-bit activations (mmv.cu's integer products) ----------------------------------------
// b's columns (n, i12, i13), flattened as c = n + N * (i12 + ne12 * i13), quantized as the CPU
// quantizes them for a's type: qs[c][K] bytes, ds[c][K / 32]. One thread per unit of 32 values;
// for Q8_K the 8 units of a 256-value block are 8 neighbouring lanes, which share its largest value.
// The same columns as F16 values (kActF16: the form mul_mat.cu's cuBLAS products read, b
// rounded as the conversion before them would) go to qs as halves, qs[c][K] x 2 bytes, no ds.
constexpr int kActF16 = 16;

struct ActArgs {
    const char * b;
    int64_t b_nb1, b_nb2, b_nb3;
    int64_t K, N, ne12, n_units;  // n_units: columns x K / 32
    int8_t * qs;
    float4 * ds;
    char * extra;  // ggml_cuda_act_args' extra bytes of scratch, after the activations
    int form;      // 32, 256: 8-bit blocks of that many values; kActF16: halves
};

// Unit u (of its column) from its 32 values x: its bytes to q (16-byte aligned) and its scales to
// *ds. All 32 lanes of the warp call it together (Q8_K: the 8 lanes of a 256-value block share
// its largest value; units of a column are multiples of 8 there, so blocks never straddle).
template <int BS>
__device__ __forceinline__ void quantize_unit(const float * x, int64_t u, bool active, int8_t * q_out, float4 * ds) {
    int8_t q[32];
    float d, d_raw;
    if constexpr (BS == 32) {
        d_raw = act_q8_0_unit(x, q);
        d = h2f(f2h(d_raw));
    } else {
        // the first value of largest magnitude in the 256: by unit, then by position in the unit
        float max = signed_absmax(x, 32);
        int first = (int) (u % 8);
#pragma unroll
        for (int o = 1; o < 8; o <<= 1) {
            const float om = __shfl_xor_sync(0xffffffffu, max, o);
            const int of = __shfl_xor_sync(0xffffffffu, first, o);
            if (fabsf(om) > fabsf(max) || (fabsf(om) == fabsf(max) && of < first)) {
                max = om;
                first = of;
            }
        }
        act_q8_K_unit(x, max, q);
        d = d_raw = max != 0.0f ? 1.0f / (-127.0f / max) : 0.0f;
    }
    if (!active) return;
    int w[8];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        w[i] = (int) ((uint32_t) (uint8_t) q[4 * i] | ((uint32_t) (uint8_t) q[4 * i + 1] << 8) |
                      ((uint32_t) (uint8_t) q[4 * i + 2] << 16) | ((uint32_t) (uint8_t) q[4 * i + 3] << 24));
    }
    ((int4 *) q_out)[0] = make_int4(w[0], w[1], w[2], w[3]);
    ((int4 *) q_out)[1] = make_int4(w[4], w[5], w[6], w[7]);
    *ds = act_sums(q, d, d_raw);
}

// 32 floats from src (zeros where inactive).
__device__ __forceinline__ void load_unit(const float * src, bool active, float * x) {
#pragma unroll
    for (int j = 0; j < 32; j++) x[j] = active ? src[j] : 0.0f;
}

// Column c of b (its K values: row, contiguous F32) quantized by the threads of one block
// together, as k_quantize_act would (blockDim a multiple of 32; every thread of the block calls
// it): a kernel that produces b quantizes it for the integer products that read it next.
// Units u0 .. u0 + n - 1 of column c from their values src (the first unit's first value on),
// as 8-bit blocks of F (32 or 256 values) as the product reads them.
template <int F>
__device__ __forceinline__ void quantize_units(const ActArgs & p, const float * src, int64_t c, int64_t u0, int64_t n) {
    static_assert(F == 32 || F == 256, "8-bit forms only (halves: write_halves)");
    const int64_t upc = p.K / 32;
    for (int64_t base = 0; base < n; base += blockDim.x) {
        const int64_t ul = base + threadIdx.x, u = u0 + ul;
        const bool active = ul < n;
        float x[32];
        load_unit(active ? src + 32 * ul : nullptr, active, x);
        quantize_unit<F>(x, u, active, p.qs + c * p.K + 32 * u, p.ds + c * upc + u);
    }
}

// Values i0 .. i0 + n - 1 of column c from src as halves (kActF16), by the threads of one block,
// element by element (any K, any offset): the one F16 writer of the producing kernels.
__device__ __forceinline__ void write_halves(const ActArgs & p, const float * src, int64_t c, int64_t i0, int64_t n) {
    uint16_t * out = (uint16_t *) p.qs + c * p.K + i0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) out[i] = f2h(src[i]);
}

// The whole column c from its K values, in the form F (32, 256 or kActF16).
template <int F>
__device__ __forceinline__ void quantize_column(const ActArgs & p, const float * row, int64_t c) {
    if constexpr (F == kActF16) {
        write_halves(p, row, c, 0, p.K);
    } else {
        quantize_units<F>(p, row, c, 0, p.K / 32);
    }
}

// b's activations in the form `form` in the scratch buffer (8-bit: qs, then ds, the layout
// ggml_cuda_mmvq reads; kActF16: halves, what mul_mat.cu hands cuBLAS), as kernel arguments;
// extra_bytes more of scratch after them for the caller (q.extra).
ActArgs ggml_cuda_act_args(ggml_cuda_ctx & ctx, const ggml_tensor * b, int form, size_t extra_bytes = 0);
// Records in act that b's activations in the form `form` are in the scratch buffer, as handed
// out at scratch_use.
void ggml_cuda_act_record(ggml_cuda_ctx::quantized_act & act, const ggml_tensor * b, int form, uint64_t scratch_use);
// The launch just made wrote b's activations in the form `form` (at the scratch handed out by
// ggml_cuda_act_args before it): pending for the product that reads b next.
inline void ggml_cuda_act_produced(ggml_cuda_ctx & ctx, const ggml_tensor * b, int form) {
    ggml_cuda_act_record(ctx.act_pending, b, form, ctx.scratch_uses);
    ctx.n_act_produced++;
}
// act holds b's activations in the form `form`, and the scratch buffer was not handed out since.
bool ggml_cuda_act_ready(const ggml_cuda_ctx & ctx, const ggml_tensor * b, int form);

// A kernel producing b a row per block (F32, contiguous) writes its row in the form the product
// that reads b next takes (QB: 32 or 256, its 8-bit activation block; kActF16; 0: no product).
template <int QB>
__device__ __forceinline__ void quantize_produced_row(const ActArgs & q, const float * row) {
    if constexpr (QB > 0) {
        __syncthreads();  // the row is in memory, written by every thread of the block
        quantize_column<QB>(q, row, blockIdx.x);
    }
}

// The form in which the mul_mat dst reads its activations b: 32 or 256 (8-bit blocks,
// ggml_cuda_mmvq), kActF16 (halves, cuBLAS), 0 (b as it is). mul_mat.cu.
int ggml_cuda_mul_mat_act_form(const ggml_tensor * dst);

// The forms a producing kernel can write (ggml_cuda_launch_quantizing's `forms`), and
// kFormAnyRows: the kernel writes the product's columns itself (K = ActArgs::K values each);
// without it its rows (produced's, one a block) must be those columns.
constexpr unsigned kFormQ32 = 1, kFormQ256 = 2, kFormF16 = 4, kFormsAll = 7, kFormAnyRows = 8;

// Launches a kernel producing `produced`, which `product` (the mul_mat reading it next, or
// nullptr) takes as its activations b (produced itself, or a view of all of it):
// launch(std::integral_constant<int, QB>, ActArgs) with QB the form the product reads them in
// (ggml_cuda_mul_mat_act_form), 0 where the kernel should not write them (b not F32 and
// contiguous, 8-bit rows not whole blocks, a form not in `forms`, the kernel's rows not the
// product's columns). The activations are recorded
// as pending for the product (ctx.act_pending).
// extra_bytes: scratch the kernel needs besides (ActArgs::extra; the activations come first,
// where the product looks for them).
template <typename L>
void ggml_cuda_launch_quantizing(ggml_cuda_ctx & ctx, const ggml_tensor * produced, const ggml_tensor * product, L launch,
                                 unsigned forms = kFormsAll, size_t extra_bytes = 0) {
    const ggml_tensor * b = product ? product->src[1] : nullptr;
    int qb = 0;
    if (b && !ctx.no_fusion && b->type == GGML_TYPE_F32 && ggml_is_contiguous(b) && ggml_is_contiguous(produced) &&
        b->data == produced->data && ggml_nelements(b) == ggml_nelements(produced)) {
        qb = ggml_cuda_mul_mat_act_form(product);
        const unsigned bit = qb == 32 ? kFormQ32 : qb == 256 ? kFormQ256 : qb == kActF16 ? kFormF16 : 0;
        const bool rows = (forms & kFormAnyRows) || b->ne[0] == produced->ne[0];
        // F16 columns of any length (write_halves goes element by element); 8-bit ones of whole blocks
        const int64_t unit = qb == 256 ? 256 : qb == kActF16 ? 1 : 32;
        if (b->ne[0] % unit != 0 || !(forms & bit) || !rows) qb = 0;
    }
    if (qb == 0) {
        ActArgs none = {};
        none.extra = extra_bytes > 0 ? (char *) ctx.scratch(extra_bytes) : nullptr;
        launch(std::integral_constant<int, 0>{}, none);
        return;
    }
    const ActArgs q = ggml_cuda_act_args(ctx, b, qb, extra_bytes);
    if (qb == 256) {
        launch(std::integral_constant<int, 256>{}, q);
    } else if (qb == kActF16) {
        launch(std::integral_constant<int, kActF16>{}, q);
    } else {
        launch(std::integral_constant<int, 32>{}, q);
    }
    ggml_cuda_act_produced(ctx, b, qb);
}
