// mul_mat with quantized weights: against a double reference computed from the dequantized
// weights and the activations rounded through the type's activation format; thread counts 1-3
// bit-identical; broadcasting over dims 2 and 3; non-contiguous activations.
#include "random-blocks.h"
#include "test-util.h"

#include "ggml-cpu/kernels.h"
#include "ggml-cpu/quant-dot.h"

namespace {

const ggml_type mm_types[] = {
    GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q8_0, GGML_TYPE_IQ4_NL,
    GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K,
    GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS, GGML_TYPE_IQ2_S, GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ3_S,
    GGML_TYPE_IQ1_S, GGML_TYPE_IQ1_M, GGML_TYPE_IQ4_XS, GGML_TYPE_TQ1_0, GGML_TYPE_TQ2_0,
};

// Quantized Gaussian rows; random blocks (random-blocks.h) where the type has no quantizer
// usable without an importance matrix.
void fill_quantized(ggml_tensor * t, std::mt19937 & rng) {
    std::normal_distribution<float> d;
    const int64_t n = t->ne[0];
    const bool plain = ggml_get_type_traits(t->type)->quantize_row && !ggml_quantize_requires_imatrix(t->type);
    std::vector<float> row((size_t) n);
    for (int64_t r = 0; r < ggml_nrows(t); r++) {
        char * p = (char *) t->data + r * t->nb[1];
        if (!plain) {
            random_iq_blocks(t->type, (uint8_t *) p, n / QK_K, (uint32_t) rng());
            continue;
        }
        for (auto & v : row) v = d(rng);
        ggml_quantize_chunk(t->type, row.data(), p, 0, 1, n, nullptr);
    }
}

// Row i1 of plane (i2, i3) of a contiguous quantized tensor, dequantized.
std::vector<float> dequant_row(const ggml_tensor * t, int64_t i1, int64_t i2, int64_t i3) {
    std::vector<float> v((size_t) t->ne[0]);
    const char * p = (const char *) t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
    ggml_get_type_traits(t->type)->to_float(p, v.data(), t->ne[0]);
    return v;
}

// b's row rounded through the activation type, as the kernel sees it.
std::vector<float> activation_row(ggml_type vt, const ggml_tensor * b, int64_t i1, int64_t i2, int64_t i3) {
    const int64_t k = b->ne[0];
    std::vector<float> f((size_t) k), out((size_t) k);
    for (int64_t i = 0; i < k; i++) f[(size_t) i] = (float) tu::get(b, i, i1, i2, i3);
    std::vector<uint8_t> q(ggml_row_size(vt, k));
    ggml_get_type_traits(vt)->from_float_ref(f.data(), q.data(), k);
    ggml_get_type_traits(vt)->to_float(q.data(), out.data(), k);
    return out;
}

void check_mul_mat(ggml_type type, int64_t K, int64_t M, int64_t N, int64_t A2, int64_t A3, int64_t B2, int64_t B3, bool padded_b) {
    tu::Ctx ctx(256u << 20);
    std::mt19937 rng(42);
    ggml_tensor * a = ggml_new_tensor_4d(ctx, type, K, M, A2, A3);
    fill_quantized(a, rng);
    const int64_t neb[4] = {K, N, B2, B3};
    ggml_tensor * b = padded_b ? tu::new_padded_view(ctx, GGML_TYPE_F32, neb) : ggml_new_tensor_4d(ctx, GGML_TYPE_F32, K, N, B2, B3);
    tu::fill_uniform(b, rng);
    ggml_tensor * c = ggml_mul_mat(ctx, a, b);
    const std::vector<double> got = tu::compute_all_threads(ctx, c);

    const ggml_type vt = ggml_quant_vec_dot_type(type);
    std::vector<double> ref;
    std::vector<double> tol;
    for (int64_t i3 = 0; i3 < B3; i3++)
        for (int64_t i2 = 0; i2 < B2; i2++)
            for (int64_t n = 0; n < N; n++) {
                const std::vector<float> y = activation_row(vt, b, n, i2, i3);
                for (int64_t m = 0; m < M; m++) {
                    const std::vector<float> w = dequant_row(a, m, i2 / (B2 / A2), i3 / (B3 / A3));
                    double s = 0, sa = 0;
                    for (int64_t k = 0; k < K; k++) {
                        s += (double) w[(size_t) k] * y[(size_t) k];
                        sa += std::fabs((double) w[(size_t) k] * y[(size_t) k]);
                    }
                    ref.push_back(s);
                    // Q4_1 / Q5_1 fold the min through Q8_1's F16 block sum: allow its rounding.
                    tol.push_back((vt == GGML_TYPE_Q8_1 ? 2e-3 : 2e-6) * sa + 1e-5);
                }
            }
    ASSERT_EQ(got.size(), ref.size());
    int bad = 0;
    for (size_t i = 0; i < got.size(); i++) {
        if (std::fabs(got[i] - ref[i]) > tol[i] && bad++ < 3) {
            ADD_FAILURE() << ggml_type_name(type) << " K=" << K << " M=" << M << " N=" << N << " element " << i
                          << ": got " << got[i] << ", expected " << ref[i];
        }
    }
    EXPECT_EQ(bad, 0) << ggml_type_name(type);
}

}  // namespace

TEST(MulMatQuant, VectorAndSmallBatch) {
    for (ggml_type t : mm_types) {
        check_mul_mat(t, 512, 13, 1, 1, 1, 1, 1, false);
        check_mul_mat(t, 256, 9, 7, 1, 1, 1, 1, false);
    }
}

TEST(MulMatQuant, BroadcastAndStridedActivations) {
    for (ggml_type t : mm_types) {
        check_mul_mat(t, 256, 5, 3, 2, 1, 4, 3, false);
        check_mul_mat(t, 256, 6, 5, 1, 1, 1, 1, true);
    }
}

TEST(MulMatQuant, GetRowsAndCopyDequantize) {
    tu::Ctx ctx(64u << 20);
    std::mt19937 rng(3);
    for (ggml_type t : mm_types) {
        ggml_tensor * a = ggml_new_tensor_2d(ctx, t, 256, 6);
        fill_quantized(a, rng);
        ggml_tensor * idx = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 4);
        const int rows[4] = {5, 0, 5, 2};
        for (int i = 0; i < 4; i++) ggml_set_i32_1d(idx, i, rows[i]);
        ggml_tensor * g = ggml_get_rows(ctx, a, idx);
        ggml_tensor * f = ggml_cpy(ctx, a, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 256, 6));
        ggml_tensor * both = ggml_add(ctx, ggml_sum(ctx, g), ggml_sum(ctx, f));
        tu::compute(ctx, both, 2);
        for (int i = 0; i < 4; i++) {
            const std::vector<float> w = dequant_row(a, rows[i], 0, 0);
            for (int k = 0; k < 256; k++) ASSERT_EQ(tu::get(g, k, i), w[(size_t) k]) << ggml_type_name(t);
        }
        for (int r = 0; r < 6; r++) {
            const std::vector<float> w = dequant_row(a, r, 0, 0);
            for (int k = 0; k < 256; k++) ASSERT_EQ(tu::get(f, k, r), w[(size_t) k]) << ggml_type_name(t);
        }
    }
}

// A thread that holds another kernel set (ggml_cpu_kernels_override: the scalar reference of
// the op tests, a CPU backend set to another ISA) multiplies with that set's dot products, even
// after the build's set has run the same type: each output equals the held set's dot of the
// weight row and the activation row, bit for bit (one column: the single or multi-row dot; three:
// the multi-column dot, which equals the single dot).
TEST(MulMatQuant, TheThreadsKernelSetReachesTheProduct) {
    const ggml_cpu_kernels * sets[4];
    const int n_sets = ggml_cpu_kernel_sets(sets);
    const int64_t K = 512, M = 6;
    for (ggml_type t : {GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ3_S, GGML_TYPE_Q4_K}) {
        for (int64_t N : {1, 3}) {
            tu::Ctx ctx(16u << 20);
            std::mt19937 rng(7);
            ggml_tensor * a = ggml_new_tensor_2d(ctx, t, K, M);
            fill_quantized(a, rng);
            ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);
            tu::fill_uniform(b, rng);
            ggml_tensor * c = ggml_mul_mat(ctx, a, b);
            ASSERT_EQ(ggml_quant_vec_dot_type(t), GGML_TYPE_Q8_K);
            std::vector<uint8_t> bq(ggml_row_size(GGML_TYPE_Q8_K, K) * N);
            ggml_get_type_traits(GGML_TYPE_Q8_K)->from_float_ref((const float *) b->data, bq.data(), K * N);
            tu::compute(ctx, c, 2);  // the build's set first
            for (int si = n_sets - 1; si >= 0; si--) {
                SCOPED_TRACE(std::string(ggml_type_name(t)) + " N=" + std::to_string(N) + " set " + sets[si]->isa);
                const ggml_quant_dot_fn dot = sets[si]->quant_dot(t);
                ggml_cpu_kernels_override = sets[si];
                tu::compute(ctx, c, 2);
                ggml_cpu_kernels_override = nullptr;
                for (int64_t n = 0; n < N; n++) {
                    for (int64_t m = 0; m < M; m++) {
                        const float want = dot(K, (const char *) a->data + m * a->nb[1], bq.data() + n * ggml_row_size(GGML_TYPE_Q8_K, K));
                        EXPECT_EQ(((const float *) c->data)[n * M + m], want) << "row " << m << " column " << n;
                    }
                }
            }
        }
    }
}
