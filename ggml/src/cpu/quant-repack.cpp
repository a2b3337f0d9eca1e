// quant-repack.cpp - the repacked weight layouts (quant-repack.h): rearranging a tensor in place,
// the way back, the activation format, the scalar reference kernel and the public entry points.
#include "quant-repack.h"
#include "quant-dot.h"

#include <math.h>
#include <string.h>

#include <vector>

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

// ---- layout --------------------------------------------------------------------------------
// One group: 16 GGUF rows of nb blocks (row stride nb blocks) <-> nb block_q4_0x16.
static void pack_group_q4_0(const block_q4_0 * rows, int64_t nb, block_q4_0x16 * out) {
    for (int64_t i = 0; i < nb; i++) {
        for (int r = 0; r < GGML_REPACK_ROWS; r++) {
            const block_q4_0 & src = rows[r * nb + i];
            out[i].d[r] = src.d;
            for (int j = 0; j < 4; j++) memcpy(out[i].qs + j * 64 + r * 4, src.qs + j * 4, 4);
        }
    }
}

static void unpack_group_q4_0(const block_q4_0x16 * in, int64_t nb, block_q4_0 * rows) {
    for (int64_t i = 0; i < nb; i++) {
        for (int r = 0; r < GGML_REPACK_ROWS; r++) {
            block_q4_0 & dst = rows[r * nb + i];
            dst.d = in[i].d[r];
            for (int j = 0; j < 4; j++) memcpy(dst.qs + j * 4, in[i].qs + j * 64 + r * 4, 4);
        }
    }
}

void ggml_unpack_q4_0x16(const void * src, void * dst, int64_t n_rows, int64_t k) {
    const int64_t nb = k / QK4_0;
    for (int64_t g = 0; g < n_rows / GGML_REPACK_ROWS; g++) {
        unpack_group_q4_0((const block_q4_0x16 *) src + g * nb, nb, (block_q4_0 *) dst + g * GGML_REPACK_ROWS * nb);
    }
}

// ---- reference kernel ----------------------------------------------------------------------
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

ggml_repack_gemm_fn ggml_repack_gemm_best(enum ggml_type type) {
    if (type != GGML_TYPE_Q4_0) return nullptr;
#if defined(GGML_SIMD_AVX512) && defined(__AVX512VNNI__)
    return ggml_repack_gemm_q4_0x16_avx512;
#elif defined(GGML_SIMD_AVX2)
    return ggml_repack_gemm_q4_0x16_avx2;
#elif defined(GGML_SIMD_NEON) && defined(__ARM_FEATURE_DOTPROD)
    return ggml_repack_gemm_q4_0x16_neon;
#else
    return ggml_repack_force ? ggml_repack_gemm_q4_0x16_ref : nullptr;
#endif
}

// ---- public API ----------------------------------------------------------------------------
bool ggml_cpu_can_repack(const struct ggml_tensor * t) {
    return t && t->type == GGML_TYPE_Q4_0 && ggml_repack_gemm_best(t->type) != nullptr && t->view_src == nullptr &&
           t->data != nullptr && !(t->flags & GGML_TENSOR_FLAG_REPACKED) && ggml_is_contiguous(t) &&
           t->ne[0] % QK4_0 == 0 && t->ne[1] % GGML_REPACK_ROWS == 0 && t->ne[1] > 0;
}

bool ggml_cpu_repack(struct ggml_tensor * t) {
    if (!ggml_cpu_can_repack(t)) return false;
    // Groups never straddle planes (ne[1] % 16 == 0), so the tensor is a run of groups, each
    // rearranged within its own bytes.
    const int64_t nb = t->ne[0] / QK4_0;
    const int64_t groups = ggml_nrows(t) / GGML_REPACK_ROWS;
    std::vector<block_q4_0> rows((size_t) (GGML_REPACK_ROWS * nb));
    for (int64_t g = 0; g < groups; g++) {
        block_q4_0x16 * dst = (block_q4_0x16 *) t->data + g * nb;
        memcpy(rows.data(), dst, rows.size() * sizeof(block_q4_0));
        pack_group_q4_0(rows.data(), nb, dst);
    }
    t->flags |= GGML_TENSOR_FLAG_REPACKED;
    return true;
}
