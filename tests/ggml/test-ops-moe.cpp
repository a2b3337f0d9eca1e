// test-ops-moe: the ops of a mixture of experts on the CPU. argsort / top_k against a stable
// sort (ties by index), both orders, strided inputs; mul_mat_id against a double-precision
// reference for F32, F16, BF16 and quantized experts, on the dot path (a few columns per expert)
// and the packed GEMM path (a prompt's many), b shared by the slots or one row per slot; 1, 2
// and 3 threads bit-identical; experts no token chose are never read. (Gradients: test-grad.)
#include "test-util.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace {

TEST(Moe, ArgsortAndTopK) {
    for (ggml_sort_order order : {GGML_SORT_ORDER_ASC, GGML_SORT_ORDER_DESC}) {
        tu::Ctx c;
        std::mt19937 rng(7 + order);
        // [13, 5, 3] with ties (values on a coarse grid), read through a padded view.
        const int64_t ne[4] = {13, 5, 3, 1};
        ggml_tensor * a = tu::new_padded_view(c.ctx, GGML_TYPE_F32, ne);
        std::vector<float> vals;
        tu::for_each(a, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
            const float v = (float) (int) (rng() % 7) - 3.0f;
            vals.push_back(v);
            tu::set(a, v, i0, i1, i2, i3);
        });
        ggml_tensor * s = ggml_argsort(c.ctx, a, order);
        const std::vector<double> got = tu::compute_all_threads(c.ctx, s);
        for (int64_t r = 0; r < 15; r++) {
            std::vector<int32_t> idx(13);
            std::iota(idx.begin(), idx.end(), 0);
            const float * row = vals.data() + r * 13;
            std::stable_sort(idx.begin(), idx.end(), [&](int32_t x, int32_t y) {
                return order == GGML_SORT_ORDER_DESC ? row[x] > row[y] : row[x] < row[y];
            });
            for (int64_t k = 0; k < 13; k++) EXPECT_EQ(got[(size_t) (r * 13 + k)], idx[(size_t) k]) << "row " << r << " pos " << k;
        }
    }
    tu::Ctx c;
    ggml_tensor * a = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, 6, 2);
    const float v[12] = {0.1f, 0.7f, 0.3f, 0.7f, -1.0f, 0.5f, 3, 2, 1, 0, 5, 4};
    memcpy(a->data, v, sizeof(v));
    ggml_tensor * k = ggml_cont(c.ctx, ggml_top_k(c.ctx, a, 3));
    tu::compute(c.ctx, k, 2);
    const int32_t * t = (const int32_t *) k->data;
    EXPECT_EQ(std::vector<int32_t>(t, t + 6), (std::vector<int32_t>{1, 3, 5, 4, 5, 0}));
}

// Reference: column (i, t) = sum_k as[k, n, ids[i, t]] b[k, i % n_b, t] in double over the
// dequantized experts.
struct MoeCase {
    ggml_type type;
    int64_t K, N, n_as, n_used, n_tokens, n_b;
    double tol;
    bool repack = false;  // the experts in the CPU's repacked layout (as the loader stores them)
};

void check_mul_mat_id(const MoeCase & m, uint32_t seed) {
    SCOPED_TRACE(std::string(ggml_type_name(m.type)) + " K " + std::to_string(m.K) + " tokens " + std::to_string(m.n_tokens) +
                 " n_b " + std::to_string(m.n_b) + (m.repack ? " repacked" : ""));
    tu::Ctx c(256u << 20);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    ggml_tensor * as = ggml_new_tensor_3d(c.ctx, m.type, m.K, m.N, m.n_as);
    std::vector<float> w((size_t) (m.K * m.N * m.n_as));
    for (float & x : w) x = d(rng);
    const int64_t rows = m.N * m.n_as;
    if (m.type == GGML_TYPE_F32) memcpy(as->data, w.data(), w.size() * sizeof(float));
    else ggml_quantize_chunk(m.type, w.data(), as->data, 0, rows, m.K, nullptr);
    std::vector<float> wq(w.size());
    const ggml_type_traits * tt = ggml_get_type_traits(m.type);
    for (int64_t r = 0; r < rows; r++) {
        if (m.type == GGML_TYPE_F32) memcpy(wq.data() + r * m.K, w.data() + r * m.K, m.K * sizeof(float));
        else tt->to_float((const char *) as->data + r * as->nb[1], wq.data() + r * m.K, m.K);
    }
    if (m.repack && !ggml_cpu_repack(as)) return;  // no repacked kernels for the type in this build (scalar)
    ggml_tensor * b = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, m.K, m.n_b, m.n_tokens);
    for (int64_t i = 0; i < ggml_nelements(b); i++) ((float *) b->data)[i] = d(rng);
    // Each token picks n_used distinct experts; the last expert is never picked (its rows are
    // NaN: reading them would show).
    ggml_tensor * ids = ggml_new_tensor_2d(c.ctx, GGML_TYPE_I32, m.n_used, m.n_tokens);
    for (int64_t t = 0; t < m.n_tokens; t++) {
        std::vector<int32_t> e((size_t) (m.n_as - 1));
        std::iota(e.begin(), e.end(), 0);
        std::shuffle(e.begin(), e.end(), rng);
        for (int64_t i = 0; i < m.n_used; i++) ((int32_t *) ids->data)[t * m.n_used + i] = e[(size_t) i];
    }
    if (m.type == GGML_TYPE_F32) {
        for (int64_t r = (m.n_as - 1) * m.N; r < rows; r++) ((float *) as->data)[r * m.K] = NAN;
    }
    ggml_tensor * y = ggml_mul_mat_id(c.ctx, as, b, ids);
    ASSERT_EQ(y->ne[0], m.N);
    ASSERT_EQ(y->ne[1], m.n_used);
    ASSERT_EQ(y->ne[2], m.n_tokens);
    const std::vector<double> got = tu::compute_all_threads(c.ctx, y);
    std::vector<double> ref(got.size());
    double mx = 0;
    for (int64_t t = 0; t < m.n_tokens; t++) {
        for (int64_t i = 0; i < m.n_used; i++) {
            const int32_t e = ((const int32_t *) ids->data)[t * m.n_used + i];
            const float * bc = (const float *) b->data + ((i % m.n_b) + m.n_b * t) * m.K;
            for (int64_t n = 0; n < m.N; n++) {
                double s = 0;
                for (int64_t k = 0; k < m.K; k++) s += (double) wq[(size_t) ((e * m.N + n) * m.K + k)] * bc[k];
                ref[(size_t) (n + m.N * (i + m.n_used * t))] = s;
                mx = std::max(mx, std::fabs(s));
            }
        }
    }
    tu::expect_close(got, ref, 0.0, m.tol * mx, "mul_mat_id");
}

TEST(Moe, MulMatIdMatchesReference) {
    uint32_t seed = 100;
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_K}) {
        const int64_t K = type == GGML_TYPE_Q4_K ? 256 : 96;
        const double tol = type == GGML_TYPE_F32 ? 1e-5 : type == GGML_TYPE_F16 ? 2e-3 : type == GGML_TYPE_BF16 ? 1e-2 : 2e-2;
        for (int64_t n_tokens : {1, 3, 40}) {  // generation; a few columns per expert; a prompt (GEMM)
            for (int64_t n_b : {int64_t(1), int64_t(2)}) {
                check_mul_mat_id({type, K, 48, 5, 2, n_tokens, n_b, tol}, seed++);
            }
        }
    }
    // Experts repacked for the quantized kernels, as the loader stores them: generation, a prompt.
    // (1 and 3 tokens: the few-columns path; 40: expert by expert.)
    for (ggml_type type : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_K}) {
        const int64_t K = type == GGML_TYPE_Q4_K ? 256 : 96;
        for (int64_t n_tokens : {1, 3, 40}) {
            for (int64_t n_b : {int64_t(1), int64_t(2)}) check_mul_mat_id({type, K, 48, 5, 2, n_tokens, n_b, 2e-2, true}, seed++);
        }
    }
}

// Repacked experts: a token's columns come out with the same bits whether its batch is small (the
// few-columns path, every expert's groups shared out at once) or large (expert by expert through
// mul_mat), and whatever the thread count.
TEST(Moe, MulMatIdFewColumnsAreTheBatchsBits) {
    for (ggml_type type : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_K}) {
        SCOPED_TRACE(ggml_type_name(type));
        const int64_t K = type == GGML_TYPE_Q4_K ? 256 : 128, N = 64, n_as = 6, n_used = 2, n_big = 48, n_small = 2;
        tu::Ctx c(64u << 20);
        std::mt19937 rng(5);
        std::uniform_real_distribution<float> d(-1.0f, 1.0f);
        ggml_tensor * as = ggml_new_tensor_3d(c.ctx, type, K, N, n_as);
        std::vector<float> w((size_t) (K * N * n_as));
        for (float & x : w) x = d(rng);
        ggml_quantize_chunk(type, w.data(), as->data, 0, N * n_as, K, nullptr);
        if (!ggml_cpu_repack(as)) GTEST_SKIP() << "no repacked kernels in this build";
        ggml_tensor * b = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, K, 1, n_big);
        for (int64_t i = 0; i < ggml_nelements(b); i++) ((float *) b->data)[i] = d(rng);
        ggml_tensor * ids = ggml_new_tensor_2d(c.ctx, GGML_TYPE_I32, n_used, n_big);
        for (int64_t t = 0; t < n_big; t++) {
            ((int32_t *) ids->data)[t * n_used] = (int32_t) (rng() % n_as);
            ((int32_t *) ids->data)[t * n_used + 1] = (int32_t) ((((int32_t *) ids->data)[t * n_used] + 1 + rng() % (n_as - 1)) % n_as);
        }
        ggml_tensor * big = ggml_mul_mat_id(c.ctx, as, b, ids);  // 96 columns: expert by expert
        ggml_tensor * small = ggml_mul_mat_id(c.ctx, as, ggml_view_3d(c.ctx, b, K, 1, n_small, b->nb[1], b->nb[2], 0),
                                              ggml_view_2d(c.ctx, ids, n_used, n_small, ids->nb[1], 0));  // 4 columns
        const std::vector<double> all = tu::compute_all_threads(c.ctx, big);
        const std::vector<double> few = tu::compute_all_threads(c.ctx, small);
        ASSERT_EQ(few.size(), (size_t) (N * n_used * n_small));
        for (size_t i = 0; i < few.size(); i++) ASSERT_EQ(few[i], all[i]) << "value " << i;
    }
}

// The gradient for b reads repacked experts as it reads the file's layout: the same bits.
TEST(Moe, MulMatIdBackReadsRepackedExperts) {
    for (ggml_type type : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_K}) {
        SCOPED_TRACE(ggml_type_name(type));
        const int64_t K = type == GGML_TYPE_Q4_K ? 256 : 96, N = 48, n_as = 4, n_used = 2, n_tokens = 5;
        std::vector<double> results[2];
        for (bool repack : {false, true}) {
            tu::Ctx c(64u << 20);
            std::mt19937 rng(7);
            std::uniform_real_distribution<float> d(-1.0f, 1.0f);
            ggml_tensor * as = ggml_new_tensor_3d(c.ctx, type, K, N, n_as);
            std::vector<float> w((size_t) (K * N * n_as));
            for (float & x : w) x = d(rng);
            ggml_quantize_chunk(type, w.data(), as->data, 0, N * n_as, K, nullptr);
            if (repack && !ggml_cpu_repack(as)) return;  // no repacked kernels for the type in this build (scalar)
            ggml_tensor * b = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, K, 1, n_tokens);
            for (int64_t i = 0; i < ggml_nelements(b); i++) ((float *) b->data)[i] = d(rng);
            ggml_set_param(b);
            ggml_tensor * ids = ggml_new_tensor_2d(c.ctx, GGML_TYPE_I32, n_used, n_tokens);
            for (int64_t i = 0; i < n_used * n_tokens; i++) ((int32_t *) ids->data)[i] = (int32_t) ((i * 3 + i / n_used) % n_as);
            ggml_tensor * loss = ggml_sum(c.ctx, ggml_sqr(c.ctx, ggml_mul_mat_id(c.ctx, as, b, ids)));
            ggml_set_loss(loss);
            ggml_cgraph * gf = ggml_new_graph_custom(c.ctx, 64, true);
            ggml_build_forward_expand(gf, loss);
            ggml_build_backward_expand(c.ctx, gf, nullptr);
            ggml_graph_reset(gf);
            ASSERT_EQ(ggml_graph_compute_with_ctx(c.ctx, gf, 2), GGML_STATUS_SUCCESS);
            results[repack] = tu::to_double(ggml_graph_get_grad(gf, b));
        }
        // the forward products may sum in another order: close, not equal
        tu::expect_close(results[1], results[0], 1e-4, 1e-4, "gradient with repacked experts");
    }
}

}  // namespace
