// quant-repack.cpp - the repacked weight layouts (quant-repack.h): rearranging a tensor in place,
// the way back, the activation format, the scalar reference kernel and the public entry points.
#include "quant-repack.h"
#include "kernels.h"
#include "quant-dot.h"

#include <math.h>
#include <string.h>

#include <vector>

int ggml_repack_force = 0;

// ---- activations ---------------------------------------------------------------------------
void ggml_quantize_row_q8_0x(const float * x, void * y, int64_t n) { ggml_cpu()->repack.quantize_row_q8_0x(x, y, n); }

void ggml_quantize_row_q8_0x_ref(const float * x, void * vy, int64_t n) {
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

// This build's fastest (the same bytes).
void ggml_repack_quantize_q8_0x16(const float * x, int64_t ldx, void * out) { ggml_cpu()->repack.quantize_q8_0x16(x, ldx, out); }

// Row m's value 16 half + r of k is nibble `half` of byte r of its qs, stored at [r / 4][m][r % 4].
void ggml_repack_q4_0x16_to_q8_0x16t_ref(const void * g0, const void * g1, int half, void * out) {
    float x[QK8_0 * GGML_REPACK_ROWS];  // x[m * 16 + r]
    for (int m = 0; m < QK8_0; m++) {
        const block_q4_0x16 * g = (const block_q4_0x16 *) (m < GGML_REPACK_ROWS ? g0 : g1);
        const int row = m % GGML_REPACK_ROWS;
        const float d = GGML_FP16_TO_FP32(g->d[row]);
        for (int r = 0; r < GGML_REPACK_ROWS; r++) {
            const uint8_t b = g->qs[(r / 4) * 64 + row * 4 + r % 4];
            x[m * GGML_REPACK_ROWS + r] = d * (((half ? b >> 4 : b) & 0xF) - 8);
        }
    }
    ggml_repack_quantize_q8_0x16_ref(x, GGML_REPACK_ROWS, out);
}

void ggml_repack_q4_0x16_to_q8_0x16t(const void * g0, const void * g1, int half, void * out) {
    ggml_cpu()->repack.q4_0x16_to_q8_0x16t(g0, g1, half, out);
}

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
namespace {

// Per type: the layout, the activations, the reference kernel and the table entry of its kernel
// (the block size comes from the type table). This is the CPU kernels' repack table: a type is
// repacked for a kernel set where that set's entry is not NULL (ggml_repack_get_traits).
struct Layout {
    ggml_type type;
    void (*pack_group)(const void *, int64_t, void *);
    void (*unpack_group)(const void *, int64_t, void *);
    ggml_from_float_t act_from_float;
    int64_t act_blck;
    size_t act_size;
    ggml_repack_gemm_fn gemm_ref;
    ggml_repack_gemm_fn ggml_repack_kernels::*kernel;
    ggml_repack_gemm_x16_fn ggml_repack_kernels::*kernel_x16;  // NULL: no 16-column entry
};

const Layout layouts[] = {
    { GGML_TYPE_Q4_0, pack_group<block_q4_0, block_q4_0x16, 4, 0>, unpack_group<block_q4_0, block_q4_0x16, 4, 0>,
      ggml_quantize_row_q8_0x, QK8_0, sizeof(block_q8_0x), ggml_repack_gemm_q4_0x16_ref, &ggml_repack_kernels::q4_0, &ggml_repack_kernels::q4_0_x16 },
    { GGML_TYPE_Q8_0, pack_group<block_q8_0, block_q8_0x16, 8, 0x80>, unpack_group<block_q8_0, block_q8_0x16, 8, 0x80>,
      ggml_quantize_row_q8_0x, QK8_0, sizeof(block_q8_0x), ggml_repack_gemm_q8_0x16_ref, &ggml_repack_kernels::q8_0, &ggml_repack_kernels::q8_0_x16 },
    { GGML_TYPE_Q4_K, ggml_repack_pack_group_q4_K, ggml_repack_unpack_group_q4_K,
      ggml_repack_act_q8_K, QK_K, sizeof(block_q8_Kx), ggml_repack_gemm_q4_Kx16_ref, &ggml_repack_kernels::q4_K, &ggml_repack_kernels::q4_K_x16 },
    { GGML_TYPE_Q5_K, ggml_repack_pack_group_q5_K, ggml_repack_unpack_group_q5_K,
      ggml_repack_act_q8_K, QK_K, sizeof(block_q8_Kx), ggml_repack_gemm_q5_Kx16_ref, &ggml_repack_kernels::q5_K, &ggml_repack_kernels::q5_K_x16 },
    { GGML_TYPE_Q6_K, ggml_repack_pack_group_q6_K, ggml_repack_unpack_group_q6_K,
      ggml_repack_act_q8_K, QK_K, sizeof(block_q8_Kx), ggml_repack_gemm_q6_Kx16_ref, &ggml_repack_kernels::q6_K, &ggml_repack_kernels::q6_K_x16 },
    { GGML_TYPE_IQ4_XS, ggml_repack_pack_group_iq4_xs, ggml_repack_unpack_group_iq4_xs,
      ggml_repack_act_q8_K, QK_K, sizeof(block_q8_Kx), ggml_repack_gemm_iq4_xsx16_ref, &ggml_repack_kernels::iq4_xs, nullptr },
};
constexpr int N_LAYOUTS = sizeof(layouts) / sizeof(layouts[0]);

// The traits of every layout, gemm being this build's kernel or, where it has none, the
// reference (offered only when forced).
struct AllTraits {
    ggml_repack_traits t[N_LAYOUTS];
    bool has_kernel[N_LAYOUTS];
    AllTraits() {
        for (int i = 0; i < N_LAYOUTS; i++) {
            const Layout & l = layouts[i];
            const ggml_repack_gemm_fn kernel = ggml_cpu()->repack.*l.kernel;
            const ggml_repack_gemm_x16_fn kernel_x16 = kernel && l.kernel_x16 ? ggml_cpu()->repack.*l.kernel_x16 : nullptr;
            t[i] = { l.type, ggml_blck_size(l.type), l.pack_group, l.unpack_group, l.act_from_float, l.act_blck, l.act_size, l.gemm_ref,
                     kernel ? kernel : l.gemm_ref, kernel_x16 };
            has_kernel[i] = kernel != nullptr;
        }
    }
};

}  // namespace

const struct ggml_repack_traits * ggml_repack_get_traits(enum ggml_type type) {
    static const AllTraits all;
    for (int i = 0; i < N_LAYOUTS; i++) {
        if (all.t[i].type == type) return all.has_kernel[i] || ggml_repack_force ? &all.t[i] : nullptr;
    }
    return nullptr;
}

int64_t ggml_repack_col_block(const struct ggml_repack_traits * t, size_t act_row, int64_t n) {
    const int64_t budget = t->gemm_x16 ? 1024 * 1024 : 256 * 1024;
    using ggml_mm_buf::ceil_div;
    int64_t cols = budget / (int64_t) (act_row > 0 ? act_row : 1) / 16 * 16;
    cols = cols > 16 ? cols : 16;
    if (n <= cols) return cols;
    const int64_t even = ceil_div(ceil_div(n, ceil_div(n, cols)), 16) * 16;  // equal blocks (n = 512, 400 columns: 2 x 256)
    return even < cols ? even : cols;
}

void ggml_repack_gemm_cols(const struct ggml_repack_traits * t, int64_t nb, const void * a, const void * b, size_t ldb,
                           int64_t nc, float * s, size_t lds) {
    const int W = GGML_REPACK_MAX_COLS;
    int64_t c = 0;
    if (t->gemm_x16 && nc >= 16) {
        c = nc / 16 * 16;
        t->gemm_x16(nb, a, b, ldb, (int) (nc / 16), s, lds);
    }
    for (; c < nc; c += W) {
        const int n = (int) (nc - c < W ? nc - c : W);
        t->gemm(nb, a, (const char *) b + c * ldb, ldb, n, s + c * lds, lds);
    }
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
