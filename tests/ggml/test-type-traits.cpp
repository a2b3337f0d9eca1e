// The type table (ggml-type-table.cpp): every ggml_type id has a complete, consistent row, the
// converters it names round-trip, and what the runtime, the cache flags and the quantizer accept
// comes from it (and from the backends' supports_op), not from lists of their own.
#include "test-util.h"

#include "common.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "llama-kv-cache.h"
#include "llama-model.h"
#include "llama-quant-mix.h"
#include "quants.h"

#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace {

std::vector<ggml_type> valid_types() {
    std::vector<ggml_type> v;
    for (int i = 0; i < GGML_TYPE_COUNT; i++) {
        if (ggml_type_is_valid(i)) v.push_back((ggml_type) i);
    }
    return v;
}

const ggml_type_traits & tr(ggml_type t) { return *ggml_get_type_traits(t); }

// Whether dev runs op on a weight of type t ([k, 32] matrix; MUL_MAT by one F32 column, or
// GET_ROWS of one row), built as the loader asks it.
bool dev_supports(ggml_backend_dev_t dev, ggml_type t, ggml_op op, int64_t k = 256) {
    ggml_init_params ip = { 4 * ggml_tensor_overhead(), nullptr, true };
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * a = ggml_new_tensor_2d(ctx, t, k, 32);
    ggml_tensor * node = op == GGML_OP_MUL_MAT ? ggml_mul_mat(ctx, a, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, 1))
                                               : ggml_get_rows(ctx, a, ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 1));
    const bool ok = ggml_backend_dev_supports_op(dev, node);
    ggml_free(ctx);
    return ok;
}

}  // namespace

// Ids without a type have empty rows; every type has a unique name, a block and bytes, and
// block types (and only they) have blocks of more than one value.
TEST(TypeTraits, EveryIdHasACompleteRow) {
    std::set<std::string> names;
    for (int i = 0; i < GGML_TYPE_COUNT; i++) {
        const ggml_type_traits & t = tr((ggml_type) i);
        if (!ggml_type_is_valid(i)) {
            EXPECT_EQ(t.type_name, nullptr) << i;
            EXPECT_EQ(t.to_float, nullptr) << i;
            EXPECT_EQ(t.from_float_ref, nullptr) << i;
            EXPECT_EQ(t.quantize_row, nullptr) << i;
            EXPECT_FALSE(t.weight_target || t.kv_cache || t.requires_imatrix) << i;
            continue;
        }
        ASSERT_NE(t.type_name, nullptr) << i;
        EXPECT_TRUE(names.insert(t.type_name).second) << "duplicate name " << t.type_name;
        EXPECT_GT(t.blck_size, 0) << t.type_name;
        EXPECT_GT(t.type_size, 0u) << t.type_name;
        EXPECT_EQ(t.is_quantized, t.blck_size > 1) << t.type_name;
    }
    EXPECT_EQ(names.size(), valid_types().size());
}

// The rows' sizes are those of the block structs the converters and kernels read.
TEST(TypeTraits, SizesMatchTheBlockStructs) {
    struct layout { ggml_type t; int64_t blck; size_t size; };
    const layout layouts[] = {
        { GGML_TYPE_Q4_0, QK4_0, sizeof(block_q4_0) }, { GGML_TYPE_Q4_1, QK4_1, sizeof(block_q4_1) },
        { GGML_TYPE_Q5_0, QK5_0, sizeof(block_q5_0) }, { GGML_TYPE_Q5_1, QK5_1, sizeof(block_q5_1) },
        { GGML_TYPE_Q8_0, QK8_0, sizeof(block_q8_0) }, { GGML_TYPE_Q8_1, QK8_1, sizeof(block_q8_1) },
        { GGML_TYPE_Q2_K, QK_K, sizeof(block_q2_K) },  { GGML_TYPE_Q3_K, QK_K, sizeof(block_q3_K) },
        { GGML_TYPE_Q4_K, QK_K, sizeof(block_q4_K) },  { GGML_TYPE_Q5_K, QK_K, sizeof(block_q5_K) },
        { GGML_TYPE_Q6_K, QK_K, sizeof(block_q6_K) },  { GGML_TYPE_Q8_K, QK_K, sizeof(block_q8_K) },
        { GGML_TYPE_IQ4_NL, QK4_NL, sizeof(block_iq4_nl) },
        { GGML_TYPE_IQ2_XXS, QK_K, sizeof(block_iq2_xxs) }, { GGML_TYPE_IQ2_XS, QK_K, sizeof(block_iq2_xs) },
        { GGML_TYPE_IQ2_S, QK_K, sizeof(block_iq2_s) },     { GGML_TYPE_IQ3_XXS, QK_K, sizeof(block_iq3_xxs) },
        { GGML_TYPE_IQ3_S, QK_K, sizeof(block_iq3_s) },     { GGML_TYPE_IQ1_S, QK_K, sizeof(block_iq1_s) },
        { GGML_TYPE_IQ1_M, QK_K, sizeof(block_iq1_m) },     { GGML_TYPE_IQ4_XS, QK_K, sizeof(block_iq4_xs) },
        { GGML_TYPE_TQ1_0, QK_K, sizeof(block_tq1_0) },     { GGML_TYPE_TQ2_0, QK_K, sizeof(block_tq2_0) },
        { GGML_TYPE_F32, 1, sizeof(float) }, { GGML_TYPE_F16, 1, sizeof(ggml_fp16_t) }, { GGML_TYPE_BF16, 1, sizeof(ggml_bf16_t) },
    };
    for (const layout & l : layouts) {
        EXPECT_EQ(tr(l.t).blck_size, l.blck) << ggml_type_name(l.t);
        EXPECT_EQ(tr(l.t).type_size, l.size) << ggml_type_name(l.t);
    }
    // Every type with converters is one of these: a new type's row comes with its struct here.
    for (ggml_type t : valid_types()) {
        if (!tr(t).to_float) continue;
        bool listed = false;
        for (const layout & l : layouts) listed = listed || l.t == t;
        EXPECT_TRUE(listed) << ggml_type_name(t) << " has converters: add its block struct to this test";
    }
}

// The facts imply one another: a type written as weights or into a cache is read back and
// produced by ggml; a quantizer comes with both converters; only block types need an imatrix,
// and a merge (no imatrix) is never written in one that does.
TEST(TypeTraits, FactsAreConsistent) {
    for (ggml_type t : valid_types()) {
        const ggml_type_traits & r = tr(t);
        const char * n = r.type_name;
        EXPECT_EQ(r.quantize_row != nullptr, r.from_float_ref != nullptr) << n;
        if (r.from_float_ref) { EXPECT_NE(r.to_float, nullptr) << n; }
        EXPECT_EQ(ggml_quantize_supported(t), r.quantize_row != nullptr) << n;
        EXPECT_EQ(ggml_quantize_requires_imatrix(t), r.requires_imatrix) << n;
        if (r.requires_imatrix) { EXPECT_TRUE(r.is_quantized) << n; }
        if (r.weight_target) {
            EXPECT_TRUE(r.quantize_row && r.to_float) << n;
            // llama-quantize writes it with an importance matrix where its quantizer needs one;
            // llama-export-lora, which has none, does not offer it.
            EXPECT_EQ(common_type_is_merge_target(t), !r.requires_imatrix) << n;
        }
        if (r.kv_cache) {
            EXPECT_TRUE(r.weight_target) << n;
            EXPECT_LE(r.blck_size, 32) << n << ": a cache row is cut per head (64 values and more)";
        }
        if (r.ftype != GGML_FTYPE_UNKNOWN) { EXPECT_EQ(ggml_ftype_to_ggml_type(r.ftype), t) << n; }
    }
    EXPECT_EQ(ggml_ftype_to_ggml_type(GGML_FTYPE_UNKNOWN), GGML_TYPE_COUNT);
}

// Every quantizer round-trips random rows within its bits' precision; without importance
// weights it writes from_float_ref's bytes, and ggml_quantize_chunk writes the rows' bytes.
TEST(TypeTraits, ConvertersRoundTrip) {
    const int64_t n = 512, nrows = 3;  // a multiple of every block size
    std::mt19937 rng(42);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> x((size_t) (n * nrows)), w((size_t) n), y((size_t) n);
    for (float & v : x) v = dist(rng);
    for (float & v : w) v = 0.5f + std::fabs(dist(rng));
    for (ggml_type t : valid_types()) {
        const ggml_type_traits & r = tr(t);
        if (!r.from_float_ref) continue;
        SCOPED_TRACE(r.type_name);
        const size_t row = ggml_row_size(t, n);
        std::vector<uint8_t> q(row * nrows), q_row(row), q_w(row);
        ASSERT_EQ(ggml_quantize_chunk(t, x.data(), q.data(), 0, nrows, n, nullptr), row * nrows);
        const double bits = 8.0 * (double) r.type_size / (double) r.blck_size;
        // Relative RMS error bound: exact for F32, a few units of the last mantissa bit for F16
        // (10 bits) and BF16 (7); for block types (scales included in the bits) about 8 times
        // a uniform grid's, which garbage or a misread layout exceeds by far.
        const double bound = t == GGML_TYPE_F32 ? 0.0 : t == GGML_TYPE_F16 ? std::ldexp(1.0, -10)
                           : t == GGML_TYPE_BF16 ? std::ldexp(1.0, -7) : std::pow(2.0, 3.0 - bits);
        for (int64_t i = 0; i < nrows; i++) {
            const float * xi = x.data() + i * n;
            r.from_float_ref(xi, q_row.data(), n);
            EXPECT_EQ(memcmp(q_row.data(), q.data() + i * row, row), 0) << "row " << i;
            r.quantize_row(xi, q_w.data(), n, nullptr);
            EXPECT_EQ(memcmp(q_row.data(), q_w.data(), row), 0) << "row " << i;
            for (const uint8_t * bytes : { q_row.data(), q_w.data() }) {
                r.to_float(bytes, y.data(), n);
                double err = 0, ref = 0;
                for (int64_t j = 0; j < n; j++) {
                    err += (double) (y[j] - xi[j]) * (y[j] - xi[j]);
                    ref += (double) xi[j] * xi[j];
                }
                EXPECT_LE(std::sqrt(err / ref), bound) << "row " << i;
                r.quantize_row(xi, q_w.data(), n, w.data());  // the second pass reads the weighted bytes
            }
        }
    }
}

// What the CPU backend computes on a type follows from the table and its kernels: every weight
// target is multiplied and its rows read (so every type llama-quantize writes loads), and a type
// with no converters is refused rather than aborting in a kernel.
TEST(TypeTraits, CpuSupportsOpFollowsTheTable) {
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    ASSERT_NE(cpu, nullptr);
    for (ggml_type t : valid_types()) {
        const ggml_type_traits & r = tr(t);
        if (r.type_size > 8 && !r.is_quantized) continue;
        if (!r.is_quantized && r.to_float == nullptr) continue;  // integer types: not weights
        const int64_t k = 256;
        EXPECT_EQ(dev_supports(cpu, t, GGML_OP_GET_ROWS, k), r.to_float != nullptr) << r.type_name;
        if (r.weight_target) { EXPECT_TRUE(dev_supports(cpu, t, GGML_OP_MUL_MAT, k)) << r.type_name; }
        if (!r.to_float) { EXPECT_FALSE(dev_supports(cpu, t, GGML_OP_MUL_MAT, k)) << r.type_name; }
    }
    // The activation formats are not weights: no product kernel takes them as a.
    EXPECT_FALSE(dev_supports(cpu, GGML_TYPE_Q8_1, GGML_OP_MUL_MAT, 256));
    EXPECT_FALSE(dev_supports(cpu, GGML_TYPE_Q8_K, GGML_OP_MUL_MAT, 256));
}

// The cache flags (common_parse_cache_type: -ctk / -ctv of llama-cli, llama-perplexity,
// llama-bench) and the KV cache take exactly the table's cache types.
TEST(TypeTraits, CacheTypesComeFromTheTable) {
    llama_hparams hp;
    hp.n_embd = 256;
    hp.n_layer = 1;
    hp.n_head = 4;
    hp.n_head_kv = 4;
    hp.n_embd_head_k = hp.n_embd_head_v = 64;  // heads of 64 values: whole blocks of every 32-value type
    const std::vector<ggml_backend_buffer_type_t> bufts = { ggml_backend_cpu_buffer_type() };
    int n_cache_types = 0;
    for (ggml_type t : valid_types()) {
        const bool want = tr(t).kv_cache;
        n_cache_types += want;
        ggml_type parsed = GGML_TYPE_COUNT;
        EXPECT_EQ(common_parse_cache_type(ggml_type_name(t), &parsed), want) << ggml_type_name(t);
        if (want) { EXPECT_EQ(parsed, t); }
        llama_kv_cache kv;
        std::string err;
        EXPECT_EQ(kv.init(hp, 8, t, t, false, bufts, err), want) << ggml_type_name(t) << ": " << err;
        if (!want) { EXPECT_NE(err.find("unsupported K cache type"), std::string::npos) << err; }
    }
    EXPECT_EQ(n_cache_types, 9);  // llama.cpp's: f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1
}

// llama-quantize's --output-tensor-type / --token-embedding-type names are the table's weight
// targets, and every mix's base type is one.
TEST(TypeTraits, QuantizerTypesComeFromTheTable) {
    for (ggml_type t : valid_types()) {
        const bool want = tr(t).weight_target;
        EXPECT_EQ(common_parse_weight_type(ggml_type_name(t)) == t, want) << ggml_type_name(t);
    }
    for (const quant_target * q = quant_targets(); q->name; q++) {
        if (q->base == GGML_TYPE_COUNT) continue;  // COPY
        EXPECT_TRUE(tr(q->base).weight_target) << q->name;
    }
}
