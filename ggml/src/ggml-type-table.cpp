// ggml-type-table.cpp - one row per ggml_type: everything the rest of the code asks about a type
// (name, block size and bytes, row converters and quantizer, whether llama-quantize may write
// it, whether it may hold a KV cache, its file type). The runtime, the quantizer, the programs'
// flags and the backends' checks read these rows instead of keeping lists of types; what a
// backend can compute on a type it answers itself (ggml_backend_dev_supports_op). The
// compile-time check below fails when a row is missing or out of order.
#include "quants-iq.h"
#include "quants-k.h"

#include <string.h>

// quantize.cpp: the one-scale types' rows with optional importance weights (a weighted scale
// search with them, the reference rounding, byte for byte other GGUF writers', without).
void ggml_quantize_row_q4_0(const float * x, void * y, int64_t n, const float * qw);
void ggml_quantize_row_q4_1(const float * x, void * y, int64_t n, const float * qw);
void ggml_quantize_row_q5_0(const float * x, void * y, int64_t n, const float * qw);
void ggml_quantize_row_q5_1(const float * x, void * y, int64_t n, const float * qw);

namespace {

// ---- the row converters, adapted to the table's signatures --------------------------------
void to_float_f32(const void * x, float * y, int64_t k) { memcpy(y, x, (size_t) k * sizeof(float)); }
void from_float_f32(const float * x, void * y, int64_t k) { memcpy(y, x, (size_t) k * sizeof(float)); }
void to_float_f16(const void * x, float * y, int64_t k) { ggml_fp16_to_fp32_row((const ggml_fp16_t *) x, y, k); }
void from_float_f16(const float * x, void * y, int64_t k) { ggml_fp32_to_fp16_row(x, (ggml_fp16_t *) y, k); }
void to_float_bf16(const void * x, float * y, int64_t k) { ggml_bf16_to_fp32_row((const ggml_bf16_t *) x, y, k); }
void from_float_bf16(const float * x, void * y, int64_t k) { ggml_fp32_to_bf16_row(x, (ggml_bf16_t *) y, k); }

// A plain conversion as a quantizer: importance weights change nothing.
template <ggml_from_float_t F>
void quantize_plain(const float * x, void * y, int64_t k, const float *) { F(x, y, k); }

template <typename B, void (*F)(const B *, float *, int64_t)>
void dequantize(const void * x, float * y, int64_t k) { F((const B *) x, y, k); }

// Types with one rounding (the activation formats Q8_0, Q8_1, Q8_K): weights change nothing.
template <typename B, void (*F)(const float *, B *, int64_t)>
void round_ref(const float * x, void * y, int64_t k) { F(x, (B *) y, k); }
template <typename B, void (*F)(const float *, B *, int64_t)>
void round_ref_w(const float * x, void * y, int64_t k, const float *) { F(x, (B *) y, k); }

// The one-scale types: the reference rounding without weights, quantize.cpp's search with them.
template <void (*F)(const float *, void *, int64_t, const float *)>
void no_weights(const float * x, void * y, int64_t k) { F(x, y, k, nullptr); }

// The scale-searching quantizers (quants-k.cpp): their search without weights is the reference.
template <typename B, void (*F)(const float *, B *, int64_t, const float *)>
void search(const float * x, void * y, int64_t k) { F(x, (B *) y, k, nullptr); }
template <typename B, void (*F)(const float *, B *, int64_t, const float *)>
void search_w(const float * x, void * y, int64_t k, const float * qw) { F(x, (B *) y, k, qw); }

// ---- the table -----------------------------------------------------------------------------
enum : unsigned {
    QUANT = 1,    // a block type (is_quantized)
    WEIGHT = 2,   // weight_target: llama-quantize and export-lora may write it
    KV = 4,       // kv_cache: it may hold a KV cache
    IMATRIX = 8,  // requires_imatrix: its quantizer needs importance weights
};

struct type_row {
    int id;  // the ggml_type this row describes (checked against its index at compile time)
    ggml_type_traits traits;
};

constexpr type_row row(ggml_type t, const char * name, int64_t blck, size_t size, unsigned flags, ggml_ftype ftype,
                       ggml_to_float_t to_float = nullptr, ggml_from_float_t from_float_ref = nullptr,
                       ggml_quantize_row_t quantize_row = nullptr) {
    return { (int) t,
             { name, blck, size, (flags & QUANT) != 0, to_float, from_float_ref, quantize_row, (flags & IMATRIX) != 0,
               (flags & WEIGHT) != 0, (flags & KV) != 0, ftype } };
}

// An id the format does not define (removed types): no name, nothing else.
constexpr type_row gap(int id) {
    return { id, { nullptr, 0, 0, false, nullptr, nullptr, nullptr, false, false, false, GGML_FTYPE_UNKNOWN } };
}

#define DQ(T) dequantize<block_##T, dequantize_row_##T>
#define REF(T) round_ref<block_##T, quantize_row_##T##_ref>, round_ref_w<block_##T, quantize_row_##T##_ref>
#define ONE_SCALE(T) no_weights<ggml_quantize_row_##T>, ggml_quantize_row_##T
#define SEARCH(T) search<block_##T, quantize_row_##T>, search_w<block_##T, quantize_row_##T>
#define PLAIN(T) to_float_##T, from_float_##T, quantize_plain<from_float_##T>

constexpr ggml_ftype NO_FTYPE = GGML_FTYPE_UNKNOWN;

// Block sizes and bytes of the block types come from their structs (quants.h).
//    type                 name       blck    bytes                  flags               file type
constexpr type_row table[] = {
    row(GGML_TYPE_F32,     "f32",     1,      4,                     WEIGHT | KV,         GGML_FTYPE_ALL_F32,     PLAIN(f32)),
    row(GGML_TYPE_F16,     "f16",     1,      2,                     WEIGHT | KV,         GGML_FTYPE_MOSTLY_F16,  PLAIN(f16)),
    row(GGML_TYPE_Q4_0,    "q4_0",    QK4_0,  sizeof(block_q4_0),    QUANT | WEIGHT | KV, GGML_FTYPE_MOSTLY_Q4_0, DQ(q4_0), ONE_SCALE(q4_0)),
    row(GGML_TYPE_Q4_1,    "q4_1",    QK4_1,  sizeof(block_q4_1),    QUANT | WEIGHT | KV, GGML_FTYPE_MOSTLY_Q4_1, DQ(q4_1), ONE_SCALE(q4_1)),
    gap(4),  // Q4_2, removed from the format
    gap(5),  // Q4_3, removed from the format
    row(GGML_TYPE_Q5_0,    "q5_0",    QK5_0,  sizeof(block_q5_0),    QUANT | WEIGHT | KV, GGML_FTYPE_MOSTLY_Q5_0, DQ(q5_0), ONE_SCALE(q5_0)),
    row(GGML_TYPE_Q5_1,    "q5_1",    QK5_1,  sizeof(block_q5_1),    QUANT | WEIGHT | KV, GGML_FTYPE_MOSTLY_Q5_1, DQ(q5_1), ONE_SCALE(q5_1)),
    row(GGML_TYPE_Q8_0,    "q8_0",    QK8_0,  sizeof(block_q8_0),    QUANT | WEIGHT | KV, GGML_FTYPE_MOSTLY_Q8_0, DQ(q8_0), REF(q8_0)),
    row(GGML_TYPE_Q8_1,    "q8_1",    QK8_1,  sizeof(block_q8_1),    QUANT,               NO_FTYPE,               DQ(q8_1), REF(q8_1)),
    row(GGML_TYPE_Q2_K,    "q2_K",    QK_K,   sizeof(block_q2_K),    QUANT | WEIGHT,      GGML_FTYPE_MOSTLY_Q2_K, DQ(q2_K), SEARCH(q2_K)),
    row(GGML_TYPE_Q3_K,    "q3_K",    QK_K,   sizeof(block_q3_K),    QUANT | WEIGHT,      GGML_FTYPE_MOSTLY_Q3_K, DQ(q3_K), SEARCH(q3_K)),
    row(GGML_TYPE_Q4_K,    "q4_K",    QK_K,   sizeof(block_q4_K),    QUANT | WEIGHT,      GGML_FTYPE_MOSTLY_Q4_K, DQ(q4_K), SEARCH(q4_K)),
    row(GGML_TYPE_Q5_K,    "q5_K",    QK_K,   sizeof(block_q5_K),    QUANT | WEIGHT,      GGML_FTYPE_MOSTLY_Q5_K, DQ(q5_K), SEARCH(q5_K)),
    row(GGML_TYPE_Q6_K,    "q6_K",    QK_K,   sizeof(block_q6_K),    QUANT | WEIGHT,      GGML_FTYPE_MOSTLY_Q6_K, DQ(q6_K), SEARCH(q6_K)),
    row(GGML_TYPE_Q8_K,    "q8_K",    QK_K,   sizeof(block_q8_K),    QUANT,               NO_FTYPE,               DQ(q8_K), REF(q8_K)),
    row(GGML_TYPE_IQ2_XXS, "iq2_xxs", QK_K,   sizeof(block_iq2_xxs),       QUANT | WEIGHT | IMATRIX, NO_FTYPE,             DQ(iq2_xxs), SEARCH(iq2_xxs)),
    row(GGML_TYPE_IQ2_XS,  "iq2_xs",  QK_K,   sizeof(block_iq2_xs),        QUANT | WEIGHT | IMATRIX, NO_FTYPE,             DQ(iq2_xs), SEARCH(iq2_xs)),
    row(GGML_TYPE_IQ3_XXS, "iq3_xxs", QK_K,   sizeof(block_iq3_xxs),       QUANT | WEIGHT,     NO_FTYPE,              DQ(iq3_xxs), SEARCH(iq3_xxs)),
    row(GGML_TYPE_IQ1_S,   "iq1_s",   QK_K,   sizeof(block_iq1_s),         QUANT | WEIGHT | IMATRIX, NO_FTYPE,             DQ(iq1_s), SEARCH(iq1_s)),
    row(GGML_TYPE_IQ4_NL,  "iq4_nl",  QK4_NL, sizeof(block_iq4_nl),  QUANT | WEIGHT | KV, NO_FTYPE,               DQ(iq4_nl), SEARCH(iq4_nl)),
    row(GGML_TYPE_IQ3_S,   "iq3_s",   QK_K,   sizeof(block_iq3_s),         QUANT | WEIGHT,     NO_FTYPE,              DQ(iq3_s), SEARCH(iq3_s)),
    row(GGML_TYPE_IQ2_S,   "iq2_s",   QK_K,   sizeof(block_iq2_s),         QUANT | WEIGHT,     NO_FTYPE,              DQ(iq2_s), SEARCH(iq2_s)),
    row(GGML_TYPE_IQ4_XS,  "iq4_xs",  QK_K,   sizeof(block_iq4_xs),        QUANT | WEIGHT,     NO_FTYPE,              DQ(iq4_xs), SEARCH(iq4_xs)),
    row(GGML_TYPE_I8,      "i8",      1,      1,                     0,                   NO_FTYPE),
    row(GGML_TYPE_I16,     "i16",     1,      2,                     0,                   NO_FTYPE),
    row(GGML_TYPE_I32,     "i32",     1,      4,                     0,                   NO_FTYPE),
    row(GGML_TYPE_I64,     "i64",     1,      8,                     0,                   NO_FTYPE),
    row(GGML_TYPE_F64,     "f64",     1,      8,                     0,                   NO_FTYPE),
    row(GGML_TYPE_IQ1_M,   "iq1_m",   QK_K,   sizeof(block_iq1_m),         QUANT | WEIGHT | IMATRIX, NO_FTYPE,             DQ(iq1_m), SEARCH(iq1_m)),
    row(GGML_TYPE_BF16,    "bf16",    1,      2,                     WEIGHT | KV,         GGML_FTYPE_MOSTLY_BF16, PLAIN(bf16)),
    gap(31),  // Q4_0_4_4, removed from the format
    gap(32),  // Q4_0_4_8
    gap(33),  // Q4_0_8_8
    row(GGML_TYPE_TQ1_0,   "tq1_0",   QK_K,   sizeof(block_tq1_0),         QUANT | WEIGHT,     NO_FTYPE,              DQ(tq1_0), REF(tq1_0)),
    row(GGML_TYPE_TQ2_0,   "tq2_0",   QK_K,   sizeof(block_tq2_0),         QUANT | WEIGHT,     NO_FTYPE,              DQ(tq2_0), REF(tq2_0)),
    gap(36),  // IQ4_NL_4_4, removed from the format
    gap(37),  // IQ4_NL_4_8
    gap(38),  // IQ4_NL_8_8
};

#undef DQ
#undef REF
#undef ONE_SCALE
#undef SEARCH
#undef PLAIN

constexpr bool rows_in_order() {
    for (int i = 0; i < GGML_TYPE_COUNT; i++) {
        if (table[i].id != i) return false;
    }
    return true;
}
static_assert(sizeof(table) / sizeof(table[0]) == GGML_TYPE_COUNT, "one row per ggml_type id");
static_assert(rows_in_order(), "the rows of the type table must follow enum ggml_type");

}  // namespace

// ---- accessors -----------------------------------------------------------------------------
const struct ggml_type_traits * ggml_get_type_traits(enum ggml_type type) {
    GGML_ASSERT(type >= 0 && type < GGML_TYPE_COUNT);
    return &table[type].traits;
}

bool ggml_type_is_valid(int type) {
    return type >= 0 && type < GGML_TYPE_COUNT && table[type].traits.type_name != nullptr;
}

const char * ggml_type_name(enum ggml_type type) {
    return ggml_type_is_valid(type) ? table[type].traits.type_name : nullptr;
}
int64_t ggml_blck_size(enum ggml_type type) { return ggml_get_type_traits(type)->blck_size; }
size_t  ggml_type_size(enum ggml_type type) { return ggml_get_type_traits(type)->type_size; }
bool    ggml_is_quantized(enum ggml_type type) { return ggml_get_type_traits(type)->is_quantized; }

size_t ggml_row_size(enum ggml_type type, int64_t ne) {
    GGML_ASSERT(ggml_type_is_valid(type));
    GGML_ASSERT(ne % ggml_blck_size(type) == 0);
    return ggml_type_size(type) * ne / ggml_blck_size(type);
}

enum ggml_type ggml_ftype_to_ggml_type(enum ggml_ftype ftype) {
    for (int i = 0; i < GGML_TYPE_COUNT; i++) {
        if (ftype != GGML_FTYPE_UNKNOWN && table[i].traits.ftype == ftype) return (ggml_type) i;
    }
    return GGML_TYPE_COUNT;
}

bool ggml_quantize_supported(enum ggml_type type) {
    return ggml_type_is_valid(type) && table[type].traits.quantize_row != nullptr;
}

bool ggml_quantize_requires_imatrix(enum ggml_type type) {
    return ggml_type_is_valid(type) && table[type].traits.requires_imatrix;
}
