// SIMD dot products of the quantized types against the scalar reference (quant-dot.cpp), on
// random blocks including extreme values, several row lengths.
#include "random-blocks.h"
#include "test-util.h"

#include "ggml-cpu/kernels.h"
#include "ggml-cpu/quant-dot.h"

namespace {

const ggml_type dot_types[] = {
    GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q8_0, GGML_TYPE_IQ4_NL,
    GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K,
    GGML_TYPE_IQ4_XS, GGML_TYPE_TQ1_0, GGML_TYPE_TQ2_0,  // (the IQ types with a quantizer; all ten below)
};

// The IQ and ternary types: most have no quantizer here, so their rows are random bytes with a
// sane scale (every bit pattern is a valid block) and llama.cpp's quantizations (iq-reference).
const ggml_type iq_types[] = {
    GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS, GGML_TYPE_IQ2_S, GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ3_S,
    GGML_TYPE_IQ1_S, GGML_TYPE_IQ1_M, GGML_TYPE_IQ4_XS, GGML_TYPE_TQ1_0, GGML_TYPE_TQ2_0,
};

// Weights: Gaussian, with a few outliers so every level (and scale extreme) is used.
std::vector<float> test_row(int64_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d;
    std::vector<float> v((size_t) n);
    for (auto & x : v) x = d(rng);
    for (int64_t i = 0; i < n; i += 37) v[(size_t) i] *= 8.0f;
    return v;
}

// Blocks of an IQ / ternary type: fill 0 random bytes (random-blocks.h), 1 all bits set (the
// largest indices, scales and levels, all signs negative), 2 all clear; every block with a
// small F16 scale where the type keeps it.
std::vector<uint8_t> iq_row(ggml_type t, int64_t n, unsigned seed, int fill) {
    const size_t ts = ggml_type_size(t);
    std::vector<uint8_t> row(ggml_row_size(t, n), fill == 1 ? 0xFF : 0x00);
    if (fill == 0) {
        random_iq_blocks(t, row.data(), n / QK_K, seed);
        return row;
    }
    for (size_t off = 0; off < row.size(); off += ts) set_iq_block_scale(t, row.data() + off, ggml_fp32_to_fp16(0.01f));
    return row;
}

// A Q8_K row: kind 0 Gaussian, 1 / 2 constant (every value +127 / -127 after quantization).
std::vector<uint8_t> q8_K_row(int64_t n, unsigned seed, int kind) {
    std::vector<float> x = test_row(n, seed);
    if (kind > 0) std::fill(x.begin(), x.end(), kind == 1 ? -1.0f : 1.0f);
    std::vector<uint8_t> q(ggml_row_size(GGML_TYPE_Q8_K, n));
    ggml_get_type_traits(GGML_TYPE_Q8_K)->from_float_ref(x.data(), q.data(), n);
    return q;
}

// Sum of |w_i a_i| over the dequantized rows: the scale of the float rounding in a dot.
double abs_terms(ggml_type t, const void * w, const void * a, int64_t n) {
    std::vector<float> x((size_t) n), y((size_t) n);
    ggml_get_type_traits(t)->to_float(w, x.data(), n);
    ggml_get_type_traits(GGML_TYPE_Q8_K)->to_float(a, y.data(), n);
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += std::fabs((double) x[(size_t) i] * y[(size_t) i]);
    return s;
}

// llama.cpp's quantized rows of tests/data/iq-reference/<type>.iqref (the layout of
// test-quants-iq.cpp: header, random blocks and their decoding, x, imatrix, then these) and x.
bool iqref_rows(ggml_type t, std::vector<uint8_t> & blocks, std::vector<float> & x, int & rows, int & cols) {
    FILE * f = fopen((std::string(LLAMA_TEST_DATA_DIR) + "/iq-reference/" + ggml_type_name(t) + ".iqref").c_str(), "rb");
    if (!f) return false;
    std::vector<uint8_t> d;
    uint8_t buf[65536];
    for (size_t k; (k = fread(buf, 1, sizeof(buf), f)) > 0;) d.insert(d.end(), buf, buf + k);
    fclose(f);
    int32_t h[4];
    if (d.size() < 20 || memcmp(d.data(), "IQRF", 4) != 0) return false;
    memcpy(h, d.data() + 4, sizeof(h));
    if (h[0] != (int32_t) t) return false;
    rows = h[2], cols = h[3];
    const size_t rs = ggml_row_size(t, cols);
    size_t off = 20 + (size_t) h[1] * (ggml_type_size(t) + QK_K * sizeof(float));
    const size_t nx = (size_t) rows * cols;
    if (off + nx * sizeof(float) + cols * sizeof(float) + rows * rs > d.size()) return false;
    x.resize(nx);
    memcpy(x.data(), d.data() + off, nx * sizeof(float));
    off += nx * sizeof(float) + cols * sizeof(float);
    blocks.assign(d.data() + off, d.data() + off + rows * rs);
    return true;
}

}  // namespace

TEST(QuantDot, BestKernelMatchesReference) {
    printf("  quant dot kernels of this build: %s\n", ggml_cpu_isa_name());
    for (ggml_type t : dot_types) {
        const ggml_type vt = ggml_quant_vec_dot_type(t);
        ASSERT_NE(vt, GGML_TYPE_COUNT);
        ggml_quant_dot_fn ref = ggml_quant_dot_ref(t);
        ggml_quant_dot_fn best = ggml_quant_dot_best(t);
        ASSERT_NE(ref, nullptr);
        ASSERT_NE(best, nullptr);
        for (int64_t n : {256, 512, 1280, 4096}) {
            for (unsigned seed = 1; seed <= 3; seed++) {
                const std::vector<float> w = test_row(n, seed), a = test_row(n, seed + 100);
                std::vector<uint8_t> qw(ggml_row_size(t, n)), qa(ggml_row_size(vt, n));
                ggml_quantize_chunk(t, w.data(), qw.data(), 0, 1, n, nullptr);
                ggml_get_type_traits(vt)->from_float_ref(a.data(), qa.data(), n);
                const float r = ref(n, qw.data(), qa.data());
                const float b = best(n, qw.data(), qa.data());
                // Integer sums are exact; only the order of the float block sums may differ.
                EXPECT_NEAR(b, r, 1e-5f * (std::fabs(r) + 1.0f) + 1e-4f) << ggml_type_name(t) << " n=" << n << " seed=" << seed;
            }
        }
    }
}

TEST(QuantDot, ExtremeBlocks) {
    // All-maximum and all-minimum levels, zero blocks: no overflow in the integer paths.
    for (ggml_type t : dot_types) {
        const ggml_type vt = ggml_quant_vec_dot_type(t);
        const int64_t n = 512;
        for (float wv : {100.0f, -100.0f, 0.0f}) {
            for (float av : {127.0f, -127.0f}) {
                std::vector<float> w((size_t) n, wv), a((size_t) n, av);
                w[3] = -wv * 0.5f;  // not quite constant, so scales and mins both act
                std::vector<uint8_t> qw(ggml_row_size(t, n)), qa(ggml_row_size(vt, n));
                ggml_quantize_chunk(t, w.data(), qw.data(), 0, 1, n, nullptr);
                ggml_get_type_traits(vt)->from_float_ref(a.data(), qa.data(), n);
                const float r = ggml_quant_dot_ref(t)(n, qw.data(), qa.data());
                const float b = ggml_quant_dot_best(t)(n, qw.data(), qa.data());
                EXPECT_NEAR(b, r, 1e-5f * std::fabs(r) + 1e-3f) << ggml_type_name(t) << " w=" << wv << " a=" << av;
            }
        }
    }
}

TEST(QuantDot, MultiRowKernelsEqualSingleRowBitForBit) {
    for (ggml_type t : dot_types) {
        ggml_quant_dot_rows_fn rows = ggml_quant_dot_rows_best(t);
        if (!rows) continue;
        const ggml_type vt = ggml_quant_vec_dot_type(t);
        const int64_t n = 1024;
        const size_t rs = ggml_row_size(t, n);
        std::vector<uint8_t> qw(rs * 4), qa(ggml_row_size(vt, n));
        for (int r = 0; r < 4; r++) {
            const std::vector<float> w = test_row(n, 10 + r);
            ggml_quantize_chunk(t, w.data(), qw.data() + r * rs, 0, 1, n, nullptr);
        }
        const std::vector<float> a = test_row(n, 99);
        ggml_get_type_traits(vt)->from_float_ref(a.data(), qa.data(), n);
        for (int nr = 1; nr <= 4; nr++) {
            float s[4];
            rows(n, qw.data(), rs, nr, qa.data(), s);
            for (int r = 0; r < nr; r++) {
                const float single = ggml_quant_dot_best(t)(n, qw.data() + r * rs, qa.data());
                EXPECT_EQ(s[r], single) << ggml_type_name(t) << " nr=" << nr << " row " << r;
                EXPECT_NEAR(s[r], ggml_quant_dot_ref(t)(n, qw.data() + r * rs, qa.data()), 1e-3f * (1 + std::fabs(single)));
            }
        }
    }
}

// Every compiled-in instruction set's dots (kernels.h), not only the build's: near the reference,
// and each set's multi-row dot equal to its single-row one bit for bit.
TEST(QuantDot, EveryKernelSetMatchesReference) {
    const ggml_cpu_kernels * sets[4];
    const int n_sets = ggml_cpu_kernel_sets(sets);
    for (int si = 0; si < n_sets; si++) {
        const ggml_cpu_kernels * k = sets[si];
        SCOPED_TRACE(k->isa);
        for (ggml_type t : dot_types) {
            const ggml_type vt = ggml_quant_vec_dot_type(t);
            const ggml_quant_dot_fn dot = k->quant_dot(t);
            ASSERT_NE(dot, nullptr) << ggml_type_name(t);
            const ggml_quant_dot_rows_fn rows = k->quant_dot_rows(t);
            const int64_t n = 1280;
            const size_t rs = ggml_row_size(t, n);
            std::vector<uint8_t> qw(rs * 4), qa(ggml_row_size(vt, n));
            for (int r = 0; r < 4; r++) {
                const std::vector<float> w = test_row(n, 20 + r);
                ggml_quantize_chunk(t, w.data(), qw.data() + r * rs, 0, 1, n, nullptr);
            }
            const std::vector<float> a = test_row(n, 98);
            ggml_get_type_traits(vt)->from_float_ref(a.data(), qa.data(), n);
            for (int r = 0; r < 4; r++) {
                const float ref = ggml_quant_dot_ref(t)(n, qw.data() + r * rs, qa.data());
                const float got = dot(n, qw.data() + r * rs, qa.data());
                EXPECT_NEAR(got, ref, 1e-5f * (std::fabs(ref) + 1.0f) + 1e-4f) << ggml_type_name(t) << " row " << r;
            }
            if (!rows) continue;
            float s[4];
            rows(n, qw.data(), rs, 4, qa.data(), s);
            for (int r = 0; r < 4; r++) EXPECT_EQ(s[r], dot(n, qw.data() + r * rs, qa.data())) << ggml_type_name(t) << " row " << r;
        }
    }
}

// The IQ and ternary types, every kernel set: random blocks (also all bits set / clear) against
// Gaussian and constant +-127 activations, several lengths, and llama.cpp's quantized rows. The
// integer sums are exact; the float scaling per super-block and the order of the sums differ
// from the reference, so the bound is relative to the sum of the terms' magnitudes.
TEST(QuantDot, IQTypesEveryKernelSetMatchesReference) {
    const ggml_cpu_kernels * sets[4];
    const int n_sets = ggml_cpu_kernel_sets(sets);
    for (int si = 0; si < n_sets; si++) {
        const ggml_cpu_kernels * k = sets[si];
        SCOPED_TRACE(k->isa);
        for (ggml_type t : iq_types) {
            ASSERT_EQ(ggml_quant_vec_dot_type(t), GGML_TYPE_Q8_K);
            const ggml_quant_dot_fn dot = k->quant_dot(t), ref = ggml_quant_dot_ref(t);
            ASSERT_NE(dot, nullptr) << ggml_type_name(t);
            // Every SIMD set has its own kernel (not the reference inherited from scalar).
            if (strcmp(k->isa, "scalar") != 0) {
                EXPECT_NE(dot, ref) << ggml_type_name(t);
            }
            auto check = [&](const std::vector<uint8_t> & w, const std::vector<uint8_t> & a, int64_t n, const char * what) {
                const float r = ref(n, w.data(), a.data()), got = dot(n, w.data(), a.data());
                const double tol = 1e-5 * abs_terms(t, w.data(), a.data(), n) + 1e-30;
                EXPECT_NEAR(got, r, tol) << ggml_type_name(t) << " " << what << " n=" << n;
            };
            for (int64_t n : {256, 512, 1280, 4096}) {
                for (unsigned seed = 1; seed <= 3; seed++) {
                    check(iq_row(t, n, seed, 0), q8_K_row(n, seed + 100, 0), n, "random");
                }
            }
            for (int fill = 0; fill < 3; fill++) {
                for (int kind = 0; kind < 3; kind++) check(iq_row(t, 512, 7, fill), q8_K_row(512, 8, kind), 512, "extreme");
            }
            std::vector<uint8_t> blocks;
            std::vector<float> x;
            int rows = 0, cols = 0;
            ASSERT_TRUE(iqref_rows(t, blocks, x, rows, cols)) << ggml_type_name(t);
            const size_t rs = ggml_row_size(t, cols);
            for (int r = 0; r < rows; r++) {
                const std::vector<uint8_t> w(blocks.begin() + r * rs, blocks.begin() + (r + 1) * rs);
                std::vector<uint8_t> a(ggml_row_size(GGML_TYPE_Q8_K, cols));
                ggml_get_type_traits(GGML_TYPE_Q8_K)->from_float_ref(x.data() + (size_t) ((r + 1) % rows) * cols, a.data(), cols);
                check(w, a, cols, "llama.cpp's");
            }
        }
    }
}

// Every set's multi-column dot (one weight row, 1..7 activation rows at a padded stride): each
// column bit for bit its single dot, so a mul_mat's result does not depend on the tile's width.
TEST(QuantDot, MultiColumnKernelsEqualSingleDotBitForBit) {
    const ggml_cpu_kernels * sets[4];
    const int n_sets = ggml_cpu_kernel_sets(sets);
    int n_checked = 0;
    for (int si = 0; si < n_sets; si++) {
        const ggml_cpu_kernels * k = sets[si];
        SCOPED_TRACE(k->isa);
        for (ggml_type t : iq_types) {
            const ggml_quant_dot_cols_fn cols = k->quant_dot_cols(t);
            if (!cols) continue;
            const ggml_quant_dot_fn dot = k->quant_dot(t);
            for (int64_t n : {256, 1280}) {
                const std::vector<uint8_t> w = iq_row(t, n, 3, 0);
                const size_t ldb = ggml_row_size(GGML_TYPE_Q8_K, n) + 64;
                std::vector<uint8_t> b(ldb * 7);
                for (int c = 0; c < 7; c++) {
                    const std::vector<uint8_t> a = q8_K_row(n, 50 + c, 0);
                    memcpy(b.data() + c * ldb, a.data(), a.size());
                }
                for (int nc = 1; nc <= 7; nc++) {
                    float s[7 * 3];
                    cols(n, w.data(), b.data(), ldb, nc, s, 3);
                    for (int c = 0; c < nc; c++) {
                        EXPECT_EQ(s[3 * c], dot(n, w.data(), b.data() + c * ldb)) << ggml_type_name(t) << " n=" << n << " nc=" << nc << " column " << c;
                    }
                    n_checked++;
                }
            }
        }
    }
    if (ggml_cpu_has_avx2()) {
        EXPECT_GT(n_checked, 0) << "the AVX2 set has column kernels for the grid types";
    }
}
