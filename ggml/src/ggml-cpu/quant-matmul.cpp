// quant-matmul.cpp - the mul_mat table entries of the quantized weight types: b's rows are
// quantized once to the type's activation format (Q8_0 / Q8_1 / Q8_K), then each output is one
// quantized dot product (quant-dot.h), so results do not depend on tiling or thread count.
#include "quant-dot.h"
#include "kernels.h"

#include <math.h>

namespace {

// One type's dot kernels in one kernel set.
struct tile_dots {
    ggml_quant_dot_fn dot;
    ggml_quant_dot_rows_fn rows;
    ggml_quant_dot_cols_fn cols;
    static tile_dots of(const ggml_cpu_kernels * set, ggml_type type) {
        return { set->quant_dot(type), set->quant_dot_rows(type), set->quant_dot_cols(type) };
    }
};

// A tile of dot products of nr rows of a with nc rows of b through one type's dot kernel.
// Where the type has a multi-row kernel, the rows of the tile share each activation block
// (same results as the single-row dot, see quant-dot.h).
template <int T>
void quant_dot_tile(int64_t k, int nr, int nc, const void * a, size_t lda, const void * b, size_t ldb, float * s, size_t lds) {
    // The build's kernels are looked up once; a thread that holds another set
    // (ggml_cpu_kernels_override: the scalar reference of the op tests) gets that set's each call.
    static const tile_dots build = tile_dots::of(&GGML_CPU_KERNELS_BEST, (ggml_type) T);
    const ggml_cpu_kernels * held = ggml_cpu_kernels_override;
    const tile_dots kern = held ? tile_dots::of(held, (ggml_type) T) : build;
    const ggml_quant_dot_fn dot = kern.dot;
    const ggml_quant_dot_rows_fn dot_rows = kern.rows;
    const ggml_quant_dot_cols_fn dot_cols = kern.cols;
    if (dot_cols && nc > 1) {
        for (int r = 0; r < nr; r++) dot_cols(k, (const char *) a + r * lda, b, ldb, nc, s + r, lds);
        return;
    }
    for (int c = 0; c < nc; c++) {
        const char * bc = (const char *) b + c * ldb;
        if (dot_rows && nr <= 4) {
            dot_rows(k, a, lda, nr, bc, s + c * lds);
            continue;
        }
        for (int r = 0; r < nr; r++) s[c * lds + r] = dot(k, (const char *) a + r * lda, bc);
    }
}

void quantize_act_q8_0(const float * x, void * vy, int64_t n) {
    block_q8_0 * y = (block_q8_0 *) vy;
    for (int64_t b = 0; b < n / QK8_0; b++, x += QK8_0) y[b].d = ggml_quantize_act_block_q8_0(x, y[b].qs);
}

}  // namespace

// Activations to Q8_0, once per row of b per mul_mat: as the reference but rounding to nearest
// even (rintf, inlined) instead of roundf (a libm call), and with a max the compiler vectorizes.
// Activations need no byte-exactness with other writers' files, only the format.
ggml_fp16_t ggml_quantize_act_block_q8_0(const float * x, int8_t * qs) {
    float m[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int j = 0; j < QK8_0; j += 8) {
        for (int k = 0; k < 8; k++) {
            const float a = fabsf(x[j + k]);
            m[k] = a > m[k] ? a : m[k];
        }
    }
    float amax = m[0];
    for (int k = 1; k < 8; k++) amax = m[k] > amax ? m[k] : amax;
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < QK8_0; j++) qs[j] = (int8_t) rintf(ggml_q8_clamp(x[j] * id));
    return GGML_FP32_TO_FP16(d);
}

namespace {

template <int T>
ggml_mm_type_kernels make_entry() {
    const ggml_type vdt = ggml_quant_vec_dot_type((ggml_type) T);
    const ggml_from_float_t conv = vdt == GGML_TYPE_Q8_0 ? quantize_act_q8_0 : ggml_get_type_traits(vdt)->from_float_ref;
    return { vdt, conv, quant_dot_tile<T>, nullptr };
}

// One entry per type (built on first use); the CPU's product kernels for the block types.
template <int T>
const ggml_mm_type_kernels * entry() {
    static const ggml_mm_type_kernels k = make_entry<T>();
    return &k;
}

}  // namespace

// The kernel table of the quantized products: the one place that names the block types the CPU
// multiplies (the backend's supports_op and the runtime ask it, NULL: no kernel for the type).
const ggml_mm_type_kernels * ggml_quant_mm_kernels(enum ggml_type type);
const ggml_mm_type_kernels * ggml_quant_mm_kernels(enum ggml_type type) {
    switch (type) {
        case GGML_TYPE_Q4_0:   return entry<GGML_TYPE_Q4_0>();
        case GGML_TYPE_Q4_1:   return entry<GGML_TYPE_Q4_1>();
        case GGML_TYPE_Q5_0:   return entry<GGML_TYPE_Q5_0>();
        case GGML_TYPE_Q5_1:   return entry<GGML_TYPE_Q5_1>();
        case GGML_TYPE_Q8_0:   return entry<GGML_TYPE_Q8_0>();
        case GGML_TYPE_IQ4_NL: return entry<GGML_TYPE_IQ4_NL>();
        case GGML_TYPE_Q2_K:   return entry<GGML_TYPE_Q2_K>();
        case GGML_TYPE_Q3_K:   return entry<GGML_TYPE_Q3_K>();
        case GGML_TYPE_Q4_K:   return entry<GGML_TYPE_Q4_K>();
        case GGML_TYPE_Q5_K:   return entry<GGML_TYPE_Q5_K>();
        case GGML_TYPE_Q6_K:   return entry<GGML_TYPE_Q6_K>();
        case GGML_TYPE_IQ2_XXS: return entry<GGML_TYPE_IQ2_XXS>();
        case GGML_TYPE_IQ2_XS: return entry<GGML_TYPE_IQ2_XS>();
        case GGML_TYPE_IQ2_S:  return entry<GGML_TYPE_IQ2_S>();
        case GGML_TYPE_IQ3_XXS: return entry<GGML_TYPE_IQ3_XXS>();
        case GGML_TYPE_IQ3_S:  return entry<GGML_TYPE_IQ3_S>();
        case GGML_TYPE_IQ1_S:  return entry<GGML_TYPE_IQ1_S>();
        case GGML_TYPE_IQ1_M:  return entry<GGML_TYPE_IQ1_M>();
        case GGML_TYPE_IQ4_XS: return entry<GGML_TYPE_IQ4_XS>();
        case GGML_TYPE_TQ1_0:  return entry<GGML_TYPE_TQ1_0>();
        case GGML_TYPE_TQ2_0:  return entry<GGML_TYPE_TQ2_0>();
        default:               return nullptr;
    }
}
