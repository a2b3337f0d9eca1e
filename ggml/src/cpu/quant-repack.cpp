// quant-repack.cpp - the repacked weight layouts (quant-repack.h): rearranging a tensor in place,
// the way back, the activation format, the scalar reference kernel and the public entry points.
#include "quant-repack.h"
#include "quant-dot.h"

#include <math.h>
#include <string.h>

#include <vector>

#if defined(GGML_SIMD_AVX512)
// GCC 12 reports false "may be used uninitialized" warnings inside its own AVX512 headers.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#endif

int ggml_repack_force = 0;

// ---- activations ---------------------------------------------------------------------------
void ggml_quantize_row_q8_0x(const float * x, void * vy, int64_t n) {
    block_q8_0x * y = (block_q8_0x *) vy;
    for (int64_t b = 0; b < n / QK8_0; b++, x += QK8_0) {
        const ggml_fp16_t d = ggml_quantize_act_block_q8_0(x, y[b].qs);
        int32_t sum = 0;
        for (int j = 0; j < QK8_0; j++) sum += y[b].qs[j];
        y[b].d = GGML_FP16_TO_FP32(d);
        y[b].neg8sum = -8 * sum;
    }
}

// Transposed F32 (32 values of m of 16 rows) straight to a Q8_0 x16 block: per row, the max of
// |x| as ggml_quantize_act_block_q8_0 takes it (a NaN never wins), d = amax / 127, values
// rint(x / d) + 128 at [j][row][4] for m = 4j + (0..3).
void ggml_repack_quantize_q8_0x16_ref(const float * x, int64_t ldx, void * vout) {
    block_q8_0x16 * out = (block_q8_0x16 *) vout;
    for (int r = 0; r < GGML_REPACK_ROWS; r++) {
        float amax = 0.0f;
        for (int m = 0; m < QK8_0; m++) {
            const float a = fabsf(x[m * ldx + r]);
            amax = a > amax ? a : amax;
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        out->d[r] = GGML_FP32_TO_FP16(d);
        for (int m = 0; m < QK8_0; m++) {
            out->qs[(m / 4) * 64 + r * 4 + m % 4] = (uint8_t) ((int8_t) rintf(ggml_q8_clamp(x[m * ldx + r] * id)) ^ 0x80);
        }
    }
}

#if defined(GGML_SIMD_AVX512)
// Lane r is row r: 32 loads of 16 rows, the max, then 4 values of m of each row into one dword.
void ggml_repack_quantize_q8_0x16(const float * x, int64_t ldx, void * vout) {
    block_q8_0x16 * out = (block_q8_0x16 *) vout;
    const __m512 sign = _mm512_set1_ps(-0.0f);
    __m512 amax = _mm512_setzero_ps();
    for (int m = 0; m < QK8_0; m++) {
        amax = _mm512_max_ps(_mm512_andnot_ps(sign, _mm512_loadu_ps(x + m * ldx)), amax);  // a > max ? a : max
    }
    const __m512 d = _mm512_div_ps(amax, _mm512_set1_ps(127.0f));
    const __m512 id = _mm512_maskz_div_ps(_mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_NEQ_UQ), _mm512_set1_ps(1.0f), d);
    _mm256_storeu_si256((__m256i *) out->d, _mm512_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m512i lo8 = _mm512_set1_epi32(0xFF);
    for (int j = 0; j < QK8_0 / 4; j++) {
        const float * xj = x + 4 * j * ldx;
        const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xj), id));
        const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xj + ldx), id));
        const __m512i q2 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xj + 2 * ldx), id));
        const __m512i q3 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xj + 3 * ldx), id));
        __m512i v = _mm512_and_si512(q0, lo8);
        v = _mm512_or_si512(v, _mm512_slli_epi32(_mm512_and_si512(q1, lo8), 8));
        v = _mm512_or_si512(v, _mm512_slli_epi32(_mm512_and_si512(q2, lo8), 16));
        v = _mm512_or_si512(v, _mm512_slli_epi32(q3, 24));
        _mm512_storeu_si512((void *) (out->qs + j * 64), _mm512_xor_si512(v, _mm512_set1_epi32((int) 0x80808080u)));
    }
}
#else
void ggml_repack_quantize_q8_0x16(const float * x, int64_t ldx, void * out) { ggml_repack_quantize_q8_0x16_ref(x, ldx, out); }
#endif

// ---- layouts ------------------------------------------------------------------------------
// One group: 16 GGUF rows of nb blocks (row stride nb blocks) <-> nb repacked blocks. Both types
// store the 16 scales, then each row's quant bytes cut in 4-byte columns, column-major.
template <typename Row, typename Group, int NCOL, uint8_t XOR>
static void pack_group(const void * vrows, int64_t nb, void * vout) {
    const Row * rows = (const Row *) vrows;
    Group * out = (Group *) vout;
    for (int64_t i = 0; i < nb; i++) {
        for (int r = 0; r < GGML_REPACK_ROWS; r++) {
            const Row & src = rows[r * nb + i];
            out[i].d[r] = src.d;
            for (int j = 0; j < NCOL; j++) {  // 4 bytes at a time (XOR in each)
                uint32_t w;
                memcpy(&w, src.qs + j * 4, 4);
                w ^= XOR * 0x01010101u;
                memcpy(out[i].qs + j * 64 + r * 4, &w, 4);
            }
        }
    }
}

template <typename Row, typename Group, int NCOL, uint8_t XOR>
static void unpack_group(const void * vin, int64_t nb, void * vrows) {
    const Group * in = (const Group *) vin;
    Row * rows = (Row *) vrows;
    for (int64_t i = 0; i < nb; i++) {
        for (int r = 0; r < GGML_REPACK_ROWS; r++) {
            Row & dst = rows[r * nb + i];
            dst.d = in[i].d[r];
            for (int j = 0; j < NCOL; j++) {
                uint32_t w;
                memcpy(&w, in[i].qs + j * 64 + r * 4, 4);
                w ^= XOR * 0x01010101u;
                memcpy(dst.qs + j * 4, &w, 4);
            }
        }
    }
}

// ---- reference kernels ---------------------------------------------------------------------
void ggml_repack_gemm_q4_0x16_ref(int64_t nb, const void * va, const void * vb, size_t ldb, int nc, float * s, size_t lds) {
    const block_q4_0x16 * a = (const block_q4_0x16 *) va;
    for (int c = 0; c < nc; c++) {
        const block_q8_0x * y = (const block_q8_0x *) ((const char *) vb + c * ldb);
        for (int r = 0; r < GGML_REPACK_ROWS; r++) {
            float acc = 0.0f;
            for (int64_t i = 0; i < nb; i++) {
                int32_t isum = y[i].neg8sum;
                for (int j = 0; j < 4; j++) {
                    for (int k = 0; k < 4; k++) {
                        const uint8_t q = a[i].qs[j * 64 + r * 4 + k];
                        isum += (q & 0x0F) * y[i].qs[4 * j + k] + (q >> 4) * y[i].qs[16 + 4 * j + k];
                    }
                }
                acc = fmaf((float) isum, GGML_FP16_TO_FP32(a[i].d[r]) * y[i].d, acc);
            }
            s[c * lds + r] = acc;
        }
    }
}

// The stored bytes are values + 128: sum(u * y) - 128 * sum(y) is the signed dot.
void ggml_repack_gemm_q8_0x16_ref(int64_t nb, const void * va, const void * vb, size_t ldb, int nc, float * s, size_t lds) {
    const block_q8_0x16 * a = (const block_q8_0x16 *) va;
    for (int c = 0; c < nc; c++) {
        const block_q8_0x * y = (const block_q8_0x *) ((const char *) vb + c * ldb);
        for (int r = 0; r < GGML_REPACK_ROWS; r++) {
            float acc = 0.0f;
            for (int64_t i = 0; i < nb; i++) {
                int32_t isum = 16 * y[i].neg8sum;
                for (int j = 0; j < 8; j++) {
                    for (int k = 0; k < 4; k++) isum += a[i].qs[j * 64 + r * 4 + k] * y[i].qs[4 * j + k];
                }
                acc = fmaf((float) isum, GGML_FP16_TO_FP32(a[i].d[r]) * y[i].d, acc);
            }
            s[c * lds + r] = acc;
        }
    }
}

// ---- traits --------------------------------------------------------------------------------
#if defined(GGML_SIMD_AVX512) && defined(__AVX512VNNI__)
#define Q4_0_KERNEL ggml_repack_gemm_q4_0x16_avx512
#define Q8_0_KERNEL ggml_repack_gemm_q8_0x16_avx512
#elif defined(GGML_SIMD_AVX2)
#define Q4_0_KERNEL ggml_repack_gemm_q4_0x16_avx2
#elif defined(GGML_SIMD_NEON) && defined(__ARM_FEATURE_DOTPROD)
#define Q4_0_KERNEL ggml_repack_gemm_q4_0x16_neon
#define Q8_0_KERNEL ggml_repack_gemm_q8_0x16_neon
#endif
#ifndef Q4_0_KERNEL
#define Q4_0_KERNEL nullptr
#endif
#ifndef Q8_0_KERNEL
#define Q8_0_KERNEL nullptr
#endif

// Per type, the table this build uses and the one with the reference filling the gaps (forced).
#define REPACK_TRAITS(T, BLCK, ROW, GROUP, NCOL, XOR, REF, KERNEL)                                    \
    { T, BLCK, pack_group<ROW, GROUP, NCOL, XOR>, unpack_group<ROW, GROUP, NCOL, XOR>, ggml_quantize_row_q8_0x, \
      QK8_0, sizeof(block_q8_0x), REF, KERNEL }
#define ALL_TRAITS(PICK)                                                                                          \
    { REPACK_TRAITS(GGML_TYPE_Q4_0, QK4_0, block_q4_0, block_q4_0x16, 4, 0, ggml_repack_gemm_q4_0x16_ref,         \
                    PICK(Q4_0_KERNEL, ggml_repack_gemm_q4_0x16_ref)),                                              \
      REPACK_TRAITS(GGML_TYPE_Q8_0, QK8_0, block_q8_0, block_q8_0x16, 8, 0x80, ggml_repack_gemm_q8_0x16_ref,      \
                    PICK(Q8_0_KERNEL, ggml_repack_gemm_q8_0x16_ref)) }
#define NATIVE(k, ref) k
#define FORCED(k, ref) ggml_repack_kernel_or(k, ref)

static const ggml_repack_traits traits_native[] = ALL_TRAITS(NATIVE);
static const ggml_repack_traits traits_forced[] = ALL_TRAITS(FORCED);

const struct ggml_repack_traits * ggml_repack_get_traits(enum ggml_type type) {
    if (type == GGML_TYPE_Q4_K) return ggml_repack_traits_q4_K(ggml_repack_force);
    if (type == GGML_TYPE_Q5_K) return ggml_repack_traits_q5_K(ggml_repack_force);
    if (type == GGML_TYPE_Q6_K) return ggml_repack_traits_q6_K(ggml_repack_force);
    const ggml_repack_traits * table = ggml_repack_force ? traits_forced : traits_native;
    for (size_t i = 0; i < sizeof(traits_native) / sizeof(traits_native[0]); i++) {
        if (table[i].type == type) return table[i].gemm ? &table[i] : nullptr;
    }
    return nullptr;
}

void ggml_repack_unpack(enum ggml_type type, const void * src, void * dst, int64_t n_rows, int64_t k) {
    const ggml_repack_traits * t = ggml_repack_get_traits(type);
    GGML_ASSERT(t && "ggml_repack_unpack: not a repacked type");
    const int64_t nb = k / t->blck;
    const size_t group = GGML_REPACK_ROWS * ggml_row_size(type, k);
    for (int64_t g = 0; g < n_rows / GGML_REPACK_ROWS; g++) {
        t->unpack_group((const char *) src + g * group, nb, (char *) dst + g * group);
    }
}

// ---- public API ----------------------------------------------------------------------------
bool ggml_cpu_can_repack(const struct ggml_tensor * t) {
    if (!t) return false;
    const ggml_repack_traits * tr = ggml_repack_get_traits(t->type);
    return tr && t->view_src == nullptr && t->data != nullptr && !(t->flags & GGML_TENSOR_FLAG_REPACKED) &&
           ggml_is_contiguous(t) && t->ne[0] % tr->blck == 0 && t->ne[1] % GGML_REPACK_ROWS == 0 && t->ne[1] > 0;
}

bool ggml_cpu_repack(struct ggml_tensor * t) {
    if (!ggml_cpu_can_repack(t)) return false;
    // Groups never straddle planes (ne[1] % 16 == 0), so the tensor is a run of groups, each
    // rearranged within its own bytes.
    const ggml_repack_traits * tr = ggml_repack_get_traits(t->type);
    const int64_t nb = t->ne[0] / tr->blck;
    const size_t group = GGML_REPACK_ROWS * t->nb[1];
    std::vector<char> rows(group);
    for (int64_t g = 0; g < ggml_nrows(t) / GGML_REPACK_ROWS; g++) {
        char * dst = (char *) t->data + g * group;
        memcpy(rows.data(), dst, group);
        tr->pack_group(rows.data(), nb, dst);
    }
    t->flags |= GGML_TENSOR_FLAG_REPACKED;
    return true;
}
