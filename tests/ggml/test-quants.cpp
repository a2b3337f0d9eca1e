// Quantized types: round-trip error per type, reference dot products, decoding of files
// quantized by llama.cpp, and our quantizer's error against llama.cpp's on the same tensors.
#include "test-util.h"

#include "ggml-cpu/quant-dot.h"
#include "gguf.h"
#include "quants.h"

#include <map>

namespace {

struct type_bound {
    ggml_type type;
    double max_rel_rmse;  // on Gaussian data, with margin over what the format achieves
};

// Relative RMSE a correct quantizer stays below on N(0, 1) rows (measured values ~15% lower).
const type_bound bounds[] = {
    {GGML_TYPE_Q4_0, 0.095}, {GGML_TYPE_Q4_1, 0.085}, {GGML_TYPE_Q5_0, 0.048}, {GGML_TYPE_Q5_1, 0.042},
    {GGML_TYPE_Q8_0, 0.0065}, {GGML_TYPE_Q2_K, 0.29}, {GGML_TYPE_Q3_K, 0.16}, {GGML_TYPE_Q4_K, 0.078},
    {GGML_TYPE_Q5_K, 0.039}, {GGML_TYPE_Q6_K, 0.020}, {GGML_TYPE_IQ4_NL, 0.082}, {GGML_TYPE_Q8_K, 0.0065},
    {GGML_TYPE_Q8_1, 0.0065},
};

double bound_of(ggml_type t) {
    for (const auto & b : bounds) if (b.type == t) return b.max_rel_rmse;
    return 0;
}

double rel_rmse(const float * x, const float * ref, size_t n) {
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        e += (double) (x[i] - ref[i]) * (x[i] - ref[i]);
        s += (double) ref[i] * ref[i];
    }
    return s > 0 ? std::sqrt(e / s) : std::sqrt(e);
}

std::vector<float> gaussian(size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d;
    std::vector<float> v(n);
    for (float & x : v) x = d(rng);
    return v;
}

std::vector<float> quant_round_trip(ggml_type t, const std::vector<float> & x, int64_t n_per_row, const float * imatrix = nullptr) {
    const int64_t nrows = (int64_t) x.size() / n_per_row;
    std::vector<uint8_t> q(ggml_row_size(t, n_per_row) * nrows);
    const size_t written = ggml_quantize_chunk(t, x.data(), q.data(), 0, nrows, n_per_row, imatrix);
    EXPECT_EQ(written, q.size());
    std::vector<float> y(x.size());
    ggml_get_type_traits(t)->to_float(q.data(), y.data(), (int64_t) x.size());
    return y;
}

}  // namespace

TEST(Quants, RoundTripErrorWithinTypeBound) {
    const int64_t n_per_row = 512;
    const std::vector<float> x = gaussian(n_per_row * 33, 7);
    for (const auto & b : bounds) {
        if (b.type == GGML_TYPE_Q8_K || b.type == GGML_TYPE_Q8_1) continue;
        const std::vector<float> y = quant_round_trip(b.type, x, n_per_row);
        const double e = rel_rmse(y.data(), x.data(), x.size());
        EXPECT_LT(e, b.max_rel_rmse) << ggml_type_name(b.type);
        EXPECT_GT(e, 0.0) << ggml_type_name(b.type);
    }
}

TEST(Quants, ActivationTypesRoundTrip) {
    const std::vector<float> x = gaussian(256 * 8, 8);
    for (ggml_type t : {GGML_TYPE_Q8_K, GGML_TYPE_Q8_1, GGML_TYPE_Q8_0}) {
        std::vector<uint8_t> q(ggml_row_size(t, (int64_t) x.size()));
        ggml_get_type_traits(t)->from_float_ref(x.data(), q.data(), (int64_t) x.size());
        std::vector<float> y(x.size());
        ggml_get_type_traits(t)->to_float(q.data(), y.data(), (int64_t) x.size());
        EXPECT_LT(rel_rmse(y.data(), x.data(), x.size()), bound_of(t)) << ggml_type_name(t);
    }
    // Q8_K's block sums match its values.
    std::vector<block_q8_K> q(8);
    quantize_row_q8_K_ref(x.data(), q.data(), (int64_t) x.size());
    for (const auto & b : q) {
        for (int j = 0; j < 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += b.qs[16 * j + l];
            EXPECT_EQ(b.bsums[j], s);
        }
    }
}

TEST(Quants, ChunksAndOddRowCountsMatchWholeRows) {
    const int64_t n_per_row = 256;
    const int64_t nrows = 7;
    const std::vector<float> x = gaussian(n_per_row * nrows, 9);
    for (const auto & b : bounds) {
        if (b.type == GGML_TYPE_Q8_K || b.type == GGML_TYPE_Q8_1) continue;
        const size_t rs = ggml_row_size(b.type, n_per_row);
        std::vector<uint8_t> whole(rs * nrows), parts(rs * nrows, 0xAB);
        ggml_quantize_chunk(b.type, x.data(), whole.data(), 0, nrows, n_per_row, nullptr);
        // Rows 0..2, then 3, then 4..6, as threads would split them.
        ggml_quantize_chunk(b.type, x.data(), parts.data(), 0, 3, n_per_row, nullptr);
        ggml_quantize_chunk(b.type, x.data(), parts.data(), 3 * n_per_row, 1, n_per_row, nullptr);
        ggml_quantize_chunk(b.type, x.data(), parts.data(), 4 * n_per_row, 3, n_per_row, nullptr);
        EXPECT_EQ(whole, parts) << ggml_type_name(b.type);
    }
}

TEST(Quants, ZeroAndConstantRows) {
    for (const auto & b : bounds) {
        if (b.type == GGML_TYPE_Q8_K || b.type == GGML_TYPE_Q8_1) continue;
        for (float v : {0.0f, 1.5f, -3.0f}) {
            std::vector<float> x(256, v);
            const std::vector<float> y = quant_round_trip(b.type, x, 256);
            for (float f : y) {
                ASSERT_TRUE(std::isfinite(f)) << ggml_type_name(b.type);
                EXPECT_NEAR(f, v, std::fabs(v) * 0.02 + 1e-6) << ggml_type_name(b.type) << " constant " << v;
            }
        }
    }
}

TEST(Quants, ImportanceWeightsSteerTheError) {
    // Columns with large importance should come out more accurate than with uniform weights.
    const int64_t n_per_row = 256;
    const std::vector<float> x = gaussian(n_per_row * 16, 10);
    std::vector<float> imatrix(n_per_row, 0.01f);
    for (int i = 0; i < n_per_row; i += 8) imatrix[i] = 100.0f;
    for (ggml_type t : {GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q3_K,
                        GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ4_NL}) {
        const std::vector<float> plain = quant_round_trip(t, x, n_per_row);
        const std::vector<float> weighted = quant_round_trip(t, x, n_per_row, imatrix.data());
        double ep = 0, ew = 0;
        for (size_t i = 0; i < x.size(); i++) {
            const double w = imatrix[i % n_per_row];
            ep += w * (plain[i] - x[i]) * (plain[i] - x[i]);
            ew += w * (weighted[i] - x[i]) * (weighted[i] - x[i]);
        }
        EXPECT_LT(ew, 0.8 * ep) << ggml_type_name(t);
    }
}

TEST(Quants, ReferenceDotEqualsDequantizedDot) {
    const int64_t n = 1024;
    const std::vector<float> x = gaussian(n, 11), a = gaussian(n, 12);
    for (const auto & b : bounds) {
        const ggml_type t = b.type;
        const ggml_type vt = ggml_quant_vec_dot_type(t);
        if (vt == GGML_TYPE_COUNT || t == GGML_TYPE_Q8_K) continue;
        std::vector<uint8_t> q(ggml_row_size(t, n)), qa(ggml_row_size(vt, n));
        ggml_quantize_chunk(t, x.data(), q.data(), 0, 1, n, nullptr);
        ggml_get_type_traits(vt)->from_float_ref(a.data(), qa.data(), n);
        std::vector<float> dx(n), da(n);
        ggml_get_type_traits(t)->to_float(q.data(), dx.data(), n);
        ggml_get_type_traits(vt)->to_float(qa.data(), da.data(), n);
        double ref = 0, norm = 0;
        for (int64_t i = 0; i < n; i++) {
            ref += (double) dx[i] * da[i];
            norm += std::fabs((double) dx[i] * da[i]);
        }
        const float got = ggml_quant_dot_ref(t)(n, q.data(), qa.data());
        // Q4_1 / Q5_1 use Q8_1's F16 block sum, which rounds: allow for it.
        const double tol = (vt == GGML_TYPE_Q8_1 ? 2e-3 : 1e-5) * norm;
        EXPECT_NEAR(got, ref, tol) << ggml_type_name(t);
    }
}

// ---- files quantized by llama.cpp ----------------------------------------------------------
namespace {

struct loaded_model {
    gguf_context * g = nullptr;
    ggml_context * ctx = nullptr;
    explicit loaded_model(const std::string & path) {
        gguf_init_params p = {};
        p.no_alloc = false;
        p.ctx = &ctx;
        g = gguf_init_from_file(path.c_str(), p);
    }
    ~loaded_model() {
        gguf_free(g);
        ggml_free(ctx);
    }
    std::vector<float> floats(const ggml_tensor * t) const {
        std::vector<float> v((size_t) ggml_nelements(t));
        ggml_get_type_traits(t->type)->to_float(t->data, v.data(), (int64_t) v.size());
        return v;
    }
};

std::string ktest(const char * type) { return tu::models_dir() + "/ktest/ktest-" + type + ".gguf"; }

}  // namespace

TEST(QuantFiles, LlamaCppFilesDecodeCloseToF32) {
    TU_REQUIRE_FILE(ktest("F32"));
    loaded_model f32(ktest("F32"));
    ASSERT_NE(f32.g, nullptr);
    for (const char * name : {"Q8_0", "Q4_0", "Q4_K_M", "Q6_K", "F16"}) {
        TU_REQUIRE_FILE(ktest(name));
        loaded_model q(ktest(name));
        ASSERT_NE(q.g, nullptr) << name;
        int n_checked = 0;
        for (ggml_tensor * t = ggml_get_first_tensor(q.ctx); t; t = ggml_get_next_tensor(q.ctx, t)) {
            ggml_tensor * r = ggml_get_tensor(f32.ctx, t->name);
            ASSERT_NE(r, nullptr) << t->name;
            ASSERT_TRUE(ggml_are_same_shape(t, r)) << t->name;
            const std::vector<float> a = q.floats(t), b = f32.floats(r);
            const double e = rel_rmse(a.data(), b.data(), a.size());
            const double bound = t->type == GGML_TYPE_F32 ? 0.0 : t->type == GGML_TYPE_F16 ? 1e-3 : bound_of(t->type);
            EXPECT_LE(e, bound) << name << " " << t->name << " (" << ggml_type_name(t->type) << ")";
            n_checked++;
        }
        EXPECT_GT(n_checked, 30) << name;
    }
}

// Our quantizer on ktest-F32 against llama.cpp's file of the same type, tensor by tensor.
TEST(QuantFiles, OurQuantizerIsNoWorseThanLlamaCpp) {
    TU_REQUIRE_FILE(ktest("F32"));
    loaded_model f32(ktest("F32"));
    ASSERT_NE(f32.g, nullptr);
    std::map<ggml_type, std::pair<double, double>> totals;  // type -> (ours, theirs) summed squared errors
    for (const char * name : {"Q8_0", "Q4_0", "Q4_K_M", "Q6_K"}) {
        TU_REQUIRE_FILE(ktest(name));
        loaded_model q(ktest(name));
        ASSERT_NE(q.g, nullptr);
        for (ggml_tensor * t = ggml_get_first_tensor(q.ctx); t; t = ggml_get_next_tensor(q.ctx, t)) {
            if (!ggml_is_quantized(t->type)) continue;
            ggml_tensor * r = ggml_get_tensor(f32.ctx, t->name);
            const std::vector<float> theirs = q.floats(t), ref = f32.floats(r);
            const std::vector<float> ours = quant_round_trip(t->type, ref, r->ne[0]);
            const double e_ours = rel_rmse(ours.data(), ref.data(), ref.size());
            const double e_theirs = rel_rmse(theirs.data(), ref.data(), ref.size());
            EXPECT_LE(e_ours, e_theirs * 1.0001) << name << " " << t->name << " " << ggml_type_name(t->type);
            totals[t->type].first += e_ours;
            totals[t->type].second += e_theirs;
            if (t->type == GGML_TYPE_Q4_0 || t->type == GGML_TYPE_Q8_0) {
                // The one-scale types use the same reference rounding: the very same bytes.
                std::vector<uint8_t> bytes(ggml_nbytes(t));
                ggml_quantize_chunk(t->type, ref.data(), bytes.data(), 0, ggml_nrows(r), r->ne[0], nullptr);
                EXPECT_EQ(memcmp(bytes.data(), t->data, bytes.size()), 0) << t->name;
            }
        }
    }
    for (const auto & kv : totals) {
        printf("  %-5s relative RMSE summed over tensors: ours %.5f, llama.cpp %.5f\n", ggml_type_name(kv.first), kv.second.first, kv.second.second);
    }
}
