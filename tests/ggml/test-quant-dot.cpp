// SIMD dot products of the quantized types against the scalar reference (quant-dot.cpp), on
// random blocks including extreme values, several row lengths.
#include "test-util.h"

#include "ggml-cpu/kernels.h"
#include "ggml-cpu/quant-dot.h"

namespace {

const ggml_type dot_types[] = {
    GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q8_0, GGML_TYPE_IQ4_NL,
    GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K,
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
