// Repacked weights (quant-repack.h): the layout round-trips; this build's kernel equals the
// scalar reference bit for bit; mul_mat with a repacked a equals the reference dot per output,
// whatever the number of columns or threads; readers of a repacked tensor other than mul_mat and
// out_prod (as src0, test-out-prod.cpp) are refused.
// On builds without a SIMD kernel the reference kernel is forced, so the path is tested anyway.
#include "test-util.h"

#include "ggml-cpu/quant-dot.h"
#include "ggml-cpu/kernels.h"
#include "ggml-cpu/quant-repack.h"

namespace {

struct ForceRepack {
    int saved = ggml_repack_force;
    ForceRepack() { ggml_repack_force = 1; }
    ~ForceRepack() { ggml_repack_force = saved; }
};

// The types with a repacked layout (with the reference kernel where this build has no other).
std::vector<ggml_type> repack_types() {
    ForceRepack force;
    std::vector<ggml_type> types;
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        if (ggml_repack_get_traits((ggml_type) t)) types.push_back((ggml_type) t);
    }
    return types;
}

void fill_quantized(ggml_tensor * t, std::mt19937 & rng) {
    std::normal_distribution<float> d;
    std::vector<float> row((size_t) t->ne[0]);
    for (int64_t r = 0; r < ggml_nrows(t); r++) {
        for (auto & v : row) v = d(rng);
        ggml_quantize_chunk(t->type, row.data(), (char *) t->data + r * t->nb[1], 0, 1, t->ne[0], nullptr);
    }
}

// A kernel set's entries for a type (NULL: the set does not repack it).
ggml_repack_gemm_fn set_kernel(const ggml_repack_kernels & rk, ggml_type type) {
    switch (type) {
        case GGML_TYPE_Q4_0: return rk.q4_0;
        case GGML_TYPE_Q8_0: return rk.q8_0;
        case GGML_TYPE_Q4_K: return rk.q4_K;
        case GGML_TYPE_Q5_K: return rk.q5_K;
        case GGML_TYPE_Q6_K: return rk.q6_K;
        case GGML_TYPE_IQ4_XS: return rk.iq4_xs;
        default: return nullptr;
    }
}
ggml_repack_gemm_x16_fn set_kernel_x16(const ggml_repack_kernels & rk, ggml_type type) {
    switch (type) {
        case GGML_TYPE_Q4_0: return rk.q4_0_x16;
        case GGML_TYPE_Q8_0: return rk.q8_0_x16;
        case GGML_TYPE_Q4_K: return rk.q4_K_x16;
        case GGML_TYPE_Q5_K: return rk.q5_K_x16;
        case GGML_TYPE_Q6_K: return rk.q6_K_x16;
        default: return nullptr;
    }
}

std::vector<uint8_t> raw(const ggml_tensor * t) {
    return std::vector<uint8_t>((const uint8_t *) t->data, (const uint8_t *) t->data + ggml_nbytes(t));
}

TEST(Repack, LayoutRoundTrips) {
    ForceRepack force;
    tu::Ctx ctx(16u << 20);
    std::mt19937 rng(1);
    const std::vector<ggml_type> types = repack_types();
    ASSERT_GE(types.size(), 3u);
    for (ggml_type type : types) {
        SCOPED_TRACE(ggml_type_name(type));
        ggml_tensor * a = ggml_new_tensor_3d(ctx, type, 3 * ggml_blck_size(type), 48, 2);
        fill_quantized(a, rng);
        const std::vector<uint8_t> before = raw(a);
        ASSERT_TRUE(ggml_cpu_can_repack(a));
        ASSERT_TRUE(ggml_cpu_repack(a));
        EXPECT_TRUE(a->flags & GGML_TENSOR_FLAG_REPACKED);
        EXPECT_FALSE(ggml_cpu_can_repack(a)) << "a tensor is repacked once";
        EXPECT_FALSE(ggml_cpu_repack(a));
        EXPECT_NE(raw(a), before);
        std::vector<uint8_t> back(before.size());
        ggml_repack_unpack(a->type, a->data, back.data(), ggml_nrows(a), a->ne[0]);
        EXPECT_EQ(back, before);

        // Row 17's block 2 lies in group 1, block 2, lane 1.
        if (type == GGML_TYPE_Q4_0) {
            const block_q4_0 * rows = (const block_q4_0 *) before.data();
            const block_q4_0x16 * g = (const block_q4_0x16 *) a->data + 1 * 3 + 2;
            EXPECT_EQ(g->d[1], rows[17 * 3 + 2].d);
            EXPECT_EQ(0, memcmp(g->qs + 2 * 64 + 1 * 4, rows[17 * 3 + 2].qs + 8, 4));
        } else if (type == GGML_TYPE_Q8_0) {
            const block_q8_0 * rows = (const block_q8_0 *) before.data();
            const block_q8_0x16 * g = (const block_q8_0x16 *) a->data + 1 * 3 + 2;
            EXPECT_EQ(g->d[1], rows[17 * 3 + 2].d);
            for (int k = 0; k < 4; k++) EXPECT_EQ(g->qs[5 * 64 + 1 * 4 + k], (uint8_t) (rows[17 * 3 + 2].qs[20 + k] + 128));
        } else if (type == GGML_TYPE_IQ4_XS) {
            const block_iq4_xs & row = ((const block_iq4_xs *) before.data())[17 * 3 + 2];
            const block_iq4_xsx16 * g = (const block_iq4_xsx16 *) a->data + 1 * 3 + 2;
            EXPECT_EQ(g->d[1], row.d);
            EXPECT_EQ(g->scales_h[0][1] | g->scales_h[1][1] << 8, row.scales_h);
            for (int k = 0; k < 4; k++) EXPECT_EQ(g->scales_l[k][1], row.scales_l[k]);
            EXPECT_EQ(0, memcmp(g->qs[5][1], row.qs + 20, 4));
        }
    }
}

TEST(Repack, OnlyWhereItApplies) {
    ForceRepack force;
    tu::Ctx ctx(16u << 20);
    EXPECT_FALSE(ggml_cpu_can_repack(ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, 64, 24))) << "rows not a multiple of 16";
    EXPECT_FALSE(ggml_cpu_can_repack(ggml_new_tensor_2d(ctx, GGML_TYPE_IQ4_XS, 256, 24))) << "rows not a multiple of 16";
    EXPECT_TRUE(ggml_cpu_can_repack(ggml_new_tensor_2d(ctx, GGML_TYPE_IQ4_XS, 256, 32)));
    EXPECT_FALSE(ggml_cpu_can_repack(ggml_new_tensor_2d(ctx, GGML_TYPE_Q5_0, 64, 32))) << "no layout for q5_0";
    EXPECT_FALSE(ggml_cpu_can_repack(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 64, 32)));
    ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, 64, 64);
    EXPECT_FALSE(ggml_cpu_can_repack(ggml_view_2d(ctx, a, 64, 32, a->nb[1], 0))) << "a view";
    EXPECT_FALSE(ggml_cpu_can_repack(nullptr));
    ggml_tensor * c = ggml_new_tensor_2d(ctx, GGML_TYPE_Q5_0, 64, 32);
    const std::vector<uint8_t> before = raw(c);
    EXPECT_FALSE(ggml_cpu_repack(c));
    EXPECT_EQ(c->flags & GGML_TENSOR_FLAG_REPACKED, 0);
    EXPECT_EQ(raw(c), before);
}

// Random activations in the kernel's format: nc columns of k values, ldb bytes apart.
std::vector<uint8_t> activations(const ggml_repack_traits * tr, int64_t k, int nc, size_t * ldb, std::mt19937 & rng) {
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    std::vector<float> x((size_t) k);
    *ldb = (size_t) (k / tr->act_blck) * tr->act_size;
    std::vector<uint8_t> y(*ldb * nc);
    for (int c = 0; c < nc; c++) {
        for (auto & v : x) v = u(rng);
        tr->act_from_float(x.data(), y.data() + c * *ldb, k);
    }
    return y;
}

// One group of 16 random rows of k values of the type, repacked (NULL if it could not be).
ggml_tensor * repacked_group(ggml_context * ctx, ggml_type type, int64_t k, std::mt19937 & rng) {
    ggml_tensor * a = ggml_new_tensor_2d(ctx, type, k, 16);
    fill_quantized(a, rng);
    return ggml_cpu_repack(a) ? a : nullptr;
}

// One column of the kernel's activations as the type's scalar dot reads them (block_q8_0x ->
// block_q8_0, block_q8_Kx -> block_q8_K).
std::vector<uint8_t> as_dot_activation(const ggml_repack_traits * tr, const uint8_t * y, int64_t k) {
    if (tr->act_size == sizeof(block_q8_Kx)) {
        std::vector<uint8_t> out((size_t) (k / QK_K) * sizeof(block_q8_K));
        for (int64_t i = 0; i < k / QK_K; i++) {
            const block_q8_Kx * b = (const block_q8_Kx *) y + i;
            block_q8_K * q = (block_q8_K *) out.data() + i;
            q->d = b->d;
            memcpy(q->qs, b->qs, QK_K);
            memcpy(q->bsums, b->bsums, sizeof(q->bsums));
        }
        return out;
    }
    std::vector<uint8_t> out((size_t) (k / QK8_0) * sizeof(block_q8_0));
    for (int64_t i = 0; i < k / QK8_0; i++) {
        const block_q8_0x * b = (const block_q8_0x *) y + i;
        block_q8_0 * q = (block_q8_0 *) out.data() + i;
        q->d = GGML_FP32_TO_FP16(b->d);
        memcpy(q->qs, b->qs, QK8_0);
    }
    return out;
}

TEST(Repack, ActivationFormatMatchesQ8_0) {
    std::mt19937 rng(2);
    std::uniform_real_distribution<float> u(-3.0f, 3.0f);
    std::vector<float> x(256);
    for (auto & v : x) v = u(rng);
    x[40] = 0;  // a block with a zero
    for (int i = 64; i < 96; i++) x[i] = 0;  // and an all-zero block (scale 0)
    std::vector<block_q8_0x> y(8);
    std::vector<block_q8_0> q(8);
    ggml_quantize_row_q8_0x(x.data(), y.data(), 256);
    ggml_get_type_traits(GGML_TYPE_Q8_0)->from_float_ref(x.data(), q.data(), 256);
    for (int b = 0; b < 8; b++) {
        EXPECT_EQ(y[b].d, GGML_FP16_TO_FP32(q[b].d));
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            EXPECT_NEAR(y[b].qs[j], q[b].qs[j], 1) << "block " << b;  // rint vs round at .5
            sum += y[b].qs[j];
        }
        EXPECT_EQ(y[b].neg8sum, -8 * sum);
    }
}

// Every kernel of every compiled-in set (kernels.h) against the scalar reference: same bits, for every column count.
TEST(Repack, KernelEqualsReference) {
    ForceRepack force;
    for (ggml_type type : repack_types()) {
        SCOPED_TRACE(ggml_type_name(type));
        const ggml_repack_traits * tr = ggml_repack_get_traits(type);
        std::vector<std::pair<const char *, ggml_repack_gemm_fn>> kernels = { { "best", tr->gemm } };
        const ggml_cpu_kernels * sets[4];
        const int n_sets = ggml_cpu_kernel_sets(sets);
        for (int i = 0; i < n_sets; i++) {
            const ggml_repack_gemm_fn k = set_kernel(sets[i]->repack, type);
            if (k) kernels.push_back({ sets[i]->isa, k });
        }
        std::mt19937 rng(3);
        for (int64_t nb : {1, 2, 7, 22}) {
            const int64_t k = nb * tr->blck;
            tu::Ctx ctx(16u << 20);
            ggml_tensor * a = repacked_group(ctx, type, k, rng);
            ASSERT_NE(a, nullptr);
            size_t ldb = 0;
            const std::vector<uint8_t> y = activations(tr, k, GGML_REPACK_MAX_COLS, &ldb, rng);
            for (int nc = 1; nc <= GGML_REPACK_MAX_COLS; nc++) {
                const size_t lds = 19;  // a stride wider than a tile, as in a real dst
                std::vector<float> ref(nc * lds, -1.0f);
                tr->gemm_ref(nb, a->data, y.data(), ldb, nc, ref.data(), lds);
                for (const auto & kern : kernels) {
                    std::vector<float> got(nc * lds, -1.0f);
                    kern.second(nb, a->data, y.data(), ldb, nc, got.data(), lds);
                    EXPECT_EQ(0, memcmp(got.data(), ref.data(), got.size() * sizeof(float))) << kern.first << " nb=" << nb << " nc=" << nc;
                }
            }
        }
    }
}

// IQ4_XS at its extremes, every set's kernel against the reference (same bits) and the reference
// against the plain dot: blocks of random bytes (every sub-block scale -32 .. 31, every level),
// then rows of the largest level (113: 241 unsigned) with scale 31 and of the smallest (-127)
// with -32, against activations all 127 or -127 (the largest sums of the kernels' integer steps).
TEST(Repack, IQ4_XSExtremesEqualReference) {
    ForceRepack force;
    const ggml_repack_traits * tr = ggml_repack_get_traits(GGML_TYPE_IQ4_XS);
    ASSERT_NE(tr, nullptr);
    std::vector<std::pair<const char *, ggml_repack_gemm_fn>> kernels = { { "best", tr->gemm } };
    const ggml_cpu_kernels * sets[4];
    const int n_sets = ggml_cpu_kernel_sets(sets);
    for (int i = 0; i < n_sets; i++) {
        if (const ggml_repack_gemm_fn k = set_kernel(sets[i]->repack, GGML_TYPE_IQ4_XS)) kernels.push_back({ sets[i]->isa, k });
    }
    const int64_t nb = 3, k = nb * QK_K;
    std::mt19937 rng(7);
    std::vector<block_iq4_xs> rows(16 * nb);
    for (auto & b : rows) {
        uint8_t * p = (uint8_t *) &b;
        for (size_t i = 0; i < sizeof(b); i++) p[i] = (uint8_t) rng();
        b.d = GGML_FP32_TO_FP16(0.01f);
    }
    for (int r = 0; r < 4; r++) {  // rows 0, 1: level 113, scale 31; rows 2, 3: level -127, scale -32
        for (int64_t i = 0; i < nb; i++) {
            block_iq4_xs & b = rows[r * nb + i];
            const bool top = r < 2;
            b.scales_h = top ? 0xFFFF : 0;
            memset(b.scales_l, top ? 0xFF : 0, sizeof(b.scales_l));
            memset(b.qs, top ? 0xFF : 0, sizeof(b.qs));
        }
    }
    std::vector<block_iq4_xsx16> g(nb);
    tr->pack_group(rows.data(), nb, g.data());
    const size_t ldb = nb * sizeof(block_q8_Kx);
    std::vector<uint8_t> y(ldb * GGML_REPACK_MAX_COLS);
    std::vector<float> x(k);
    for (int c = 0; c < GGML_REPACK_MAX_COLS; c++) {
        for (int64_t i = 0; i < k; i++) x[i] = c == 0 ? 1.0f : c == 1 ? -1.0f : std::uniform_real_distribution<float>(-1, 1)(rng);
        tr->act_from_float(x.data(), y.data() + c * ldb, k);
    }
    for (int nc = 1; nc <= GGML_REPACK_MAX_COLS; nc++) {
        std::vector<float> ref(nc * 16);
        tr->gemm_ref(nb, g.data(), y.data(), ldb, nc, ref.data(), 16);
        for (const auto & kern : kernels) {
            std::vector<float> got(nc * 16, -1.0f);
            kern.second(nb, g.data(), y.data(), ldb, nc, got.data(), 16);
            EXPECT_EQ(0, memcmp(got.data(), ref.data(), got.size() * sizeof(float))) << kern.first << " nc=" << nc;
        }
        if (nc < GGML_REPACK_MAX_COLS) continue;
        for (int c = 0; c < nc; c++) {
            const std::vector<uint8_t> yd = as_dot_activation(tr, y.data() + c * ldb, k);
            for (int r = 0; r < 16; r++) {
                const float want = ggml_quant_dot_ref(GGML_TYPE_IQ4_XS)(k, rows.data() + r * nb, yd.data());
                EXPECT_NEAR(ref[c * 16 + r], want, 1e-5f * (1.0f + fabsf(want))) << "row " << r << " column " << c;
            }
        }
    }
}

// Every compiled-in set's activation quantizer (block_q8_0x) gives the reference's bytes: random
// rows of several scales, and blocks with zeros, NaN, infinities, subnormals and huge values.
TEST(Repack, ActivationQuantizerEqualsReference) {
    const ggml_cpu_kernels * sets[4];
    const int n_sets = ggml_cpu_kernel_sets(sets);
    std::mt19937 rng(6);
    std::normal_distribution<float> nd;
    const int64_t n = 32 * 40;
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; i++) x[i] = nd(rng) * std::pow(10.0f, (float) (i / 32 % 9) - 4.0f);
    const float inf = INFINITY, nan = NAN;
    const float specials[] = { 0.0f, -0.0f, nan, inf, -inf, 1e-40f, -3e-39f, 1e-45f, 3e38f, -3.4e38f, 127.5f, -0.5f, 0.5f, 1.5f, 2.5f };
    for (int64_t b = 30; b < 40; b++) {  // the last blocks: specials mixed with normal values
        for (int j = 0; j < 32; j++) {
            if ((j + b) % 3 == 0) x[b * 32 + j] = specials[(j * 7 + b) % (sizeof(specials) / sizeof(specials[0]))];
        }
    }
    for (int j = 0; j < 32; j++) x[39 * 32 + j] = 1e-40f * (float) (j - 16);  // a block of subnormals alone
    std::vector<uint8_t> ref(n / 32 * sizeof(block_q8_0x)), got(ref.size());
    ggml_quantize_row_q8_0x_ref(x.data(), ref.data(), n);
    for (int i = 0; i < n_sets; i++) {
        std::fill(got.begin(), got.end(), 0xAB);
        sets[i]->repack.quantize_row_q8_0x(x.data(), got.data(), n);
        for (int64_t b = 0; b < n / 32; b++) {
            EXPECT_EQ(0, memcmp(got.data() + b * sizeof(block_q8_0x), ref.data() + b * sizeof(block_q8_0x), sizeof(block_q8_0x)))
                << sets[i]->isa << " block " << b;
        }
    }
    // Q8_K (blocks of 256) over the same values: the blocks with specials, a subnormal-only one
    // (an infinite scale), ties of magnitude with both signs, an all-zero block.
    std::vector<float> xk(x);
    xk.resize(256 * 7, 0.0f);
    for (int j = 0; j < 256; j++) xk[4 * 256 + j] = (j % 2 ? -1.0f : 1.0f) * (float) (j % 7);  // +6 first, then -6...
    for (int j = 0; j < 256; j++) xk[5 * 256 + j] = 1e-45f * (float) (j % 3);
    std::vector<uint8_t> refk(7 * sizeof(block_q8_K)), gotk(refk.size());
    quantize_row_q8_K_ref(xk.data(), (block_q8_K *) refk.data(), 7 * 256);
    for (int i = 0; i < n_sets; i++) {
        std::fill(gotk.begin(), gotk.end(), 0xAB);
        sets[i]->repack.quantize_row_q8_K(xk.data(), gotk.data(), 7 * 256);
        for (int b = 0; b < 7; b++) {
            EXPECT_EQ(0, memcmp(gotk.data() + b * sizeof(block_q8_K), refk.data() + b * sizeof(block_q8_K), sizeof(block_q8_K)))
                << sets[i]->isa << " Q8_K block " << b;
        }
    }
    // The repacked kernels' layout of the same values (block_q8_Kx, padding zero).
    std::vector<uint8_t> refx(7 * sizeof(block_q8_Kx), 0xAB), gotx(refx.size(), 0xCD);
    ggml_repack_act_q8_K_ref(xk.data(), refx.data(), 7 * 256);
    ggml_repack_act_q8_K(xk.data(), gotx.data(), 7 * 256);
    EXPECT_EQ(refx, gotx);
    for (int b = 0; b < 7; b++) {
        const block_q8_Kx * x = (const block_q8_Kx *) refx.data() + b;
        const block_q8_K * q = (const block_q8_K *) refk.data() + b;
        EXPECT_EQ(0, memcmp(&x->d, &q->d, sizeof(float)));
        EXPECT_EQ(0, memcmp(x->qs, q->qs, QK_K));
        EXPECT_EQ(0, memcmp(x->bsums, q->bsums, sizeof(q->bsums)));
        for (uint8_t z : x->pad) EXPECT_EQ(z, 0);
    }
}

// The 16-column kernels (AMX) of every compiled-in set, and ggml_repack_gemm_cols over any
// number of columns (16 at a time, then up to 8), against the scalar reference: same bits.
TEST(Repack, SixteenColumnKernelsEqualReference) {
    ForceRepack force;
    int tested = 0;
    for (ggml_type type : repack_types()) {
        SCOPED_TRACE(ggml_type_name(type));
        const ggml_repack_traits * tr = ggml_repack_get_traits(type);
        std::vector<std::pair<const char *, ggml_repack_gemm_x16_fn>> kernels;
        const ggml_cpu_kernels * sets[4];
        const int n_sets = ggml_cpu_kernel_sets(sets);
        for (int i = 0; i < n_sets; i++) {
            const ggml_repack_gemm_x16_fn k = set_kernel_x16(sets[i]->repack, type);
            if (k) kernels.push_back({ sets[i]->isa, k });
        }
        std::mt19937 rng(5);
        for (int64_t nb : {1, 2, 3, 4, 5, 6, 7, 8, 9, 22, 37, 70, 176}) {
            const int64_t k = nb * tr->blck;
            tu::Ctx ctx(16u << 20);
            ggml_tensor * a = repacked_group(ctx, type, k, rng);
            ASSERT_NE(a, nullptr);
            size_t ldb = 0;
            const int max_nc = 41;
            const std::vector<uint8_t> y = activations(tr, k, max_nc, &ldb, rng);
            const size_t lds = 19;
            std::vector<float> ref(max_nc * lds, -1.0f);
            tr->gemm_ref(nb, a->data, y.data(), ldb, max_nc, ref.data(), lds);
            for (const auto & kern : kernels) {
                for (int n16 : {1, 2}) {
                    for (int c0 : {0, 5, 41 - 16 * n16}) {  // columns [c0, c0 + 16 n16)
                        std::vector<float> got(16 * n16 * lds, -1.0f);
                        kern.second(nb, a->data, y.data() + c0 * ldb, ldb, n16, got.data(), lds);
                        for (int c = 0; c < 16 * n16; c++) {
                            EXPECT_EQ(0, memcmp(got.data() + c * lds, ref.data() + (c0 + c) * lds, 16 * sizeof(float)))
                                << kern.first << " nb=" << nb << " n16=" << n16 << " column " << c0 + c;
                        }
                        tested++;
                    }
                }
            }
            for (int nc : {1, 8, 15, 16, 17, 24, 33, 41}) {
                std::vector<float> got(nc * lds, -1.0f);
                ggml_repack_gemm_cols(tr, nb, a->data, y.data(), ldb, nc, got.data(), lds);
                for (int c = 0; c < nc; c++) {
                    EXPECT_EQ(0, memcmp(got.data() + c * lds, ref.data() + c * lds, 16 * sizeof(float))) << "nb=" << nb << " nc=" << nc << " column " << c;
                }
            }
        }
    }
    if (ggml_cpu_has_amx_int8()) {
        EXPECT_GT(tested, 0) << "an AMX build tests its tile kernels";
    }
}

// The reference kernel computes what the type's scalar dot does, up to rounding: the integer
// sums are the same, the float steps may be ordered or fused otherwise.
TEST(Repack, ReferenceEqualsScalarDot) {
    ForceRepack force;
    std::mt19937 rng(4);
    for (ggml_type type : repack_types()) {
        SCOPED_TRACE(ggml_type_name(type));
        const ggml_repack_traits * tr = ggml_repack_get_traits(type);
        const int64_t k = 10 * tr->blck;
        tu::Ctx ctx(16u << 20);
        ggml_tensor * a = ggml_new_tensor_2d(ctx, type, k, 16);
        fill_quantized(a, rng);
        const std::vector<uint8_t> rows = raw(a);
        ASSERT_TRUE(ggml_cpu_repack(a));
        size_t ldb = 0;
        const std::vector<uint8_t> y = activations(tr, k, 1, &ldb, rng);
        const std::vector<uint8_t> yd = as_dot_activation(tr, y.data(), k);
        float s[16];
        tr->gemm_ref(k / tr->blck, a->data, y.data(), ldb, 1, s, 16);
        for (int r = 0; r < 16; r++) {
            const float want = ggml_quant_dot_ref(type)(k, rows.data() + r * a->nb[1], yd.data());
            EXPECT_NEAR(s[r], want, 1e-5f * (1.0f + fabsf(want))) << "row " << r;
        }
    }
}

// mul_mat with a repacked a: every output equals the scalar reference dot of its row and column
// (up to rounding), the same bits for 1-3 threads, and column n the same bits whether computed
// alone or among N columns. K is given in blocks of the type.
void check_mul_mat(int64_t K_blocks, int64_t M, int64_t N, int64_t A2, int64_t B2, bool transposed_b) {
    for (ggml_type type : repack_types()) {
        SCOPED_TRACE(ggml_type_name(type));
        ForceRepack force;
        const ggml_repack_traits * tr = ggml_repack_get_traits(type);
        const int64_t K = K_blocks * tr->blck;
        tu::Ctx ctx(64u << 20);
        std::mt19937 rng(5);
        ggml_tensor * a = ggml_new_tensor_3d(ctx, type, K, M, A2);
        fill_quantized(a, rng);
        const std::vector<uint8_t> rows = raw(a);
        ASSERT_TRUE(ggml_cpu_repack(a));
        const int64_t neb[4] = {K, N, B2, 1};
        ggml_tensor * b = transposed_b ? tu::new_transposed_view(ctx, GGML_TYPE_F32, neb) : ggml_new_tensor_3d(ctx, GGML_TYPE_F32, K, N, B2);
        tu::fill_uniform(b, rng);
        ggml_tensor * c = ggml_mul_mat(ctx, a, b);
        const std::vector<double> got = tu::compute_all_threads(ctx, c);

        std::vector<float> x((size_t) K);
        std::vector<uint8_t> act((size_t) (K / tr->act_blck) * tr->act_size);
        // Dequantized rows, for a tolerance that scales with the magnitude of the terms.
        std::vector<float> w((size_t) (K * M * A2));
        ggml_get_type_traits(type)->to_float(rows.data(), w.data(), K * M * A2);
        int bad = 0;
        for (int64_t i2 = 0; i2 < B2; i2++) {
            for (int64_t n = 0; n < N; n++) {
                for (int64_t k = 0; k < K; k++) x[(size_t) k] = (float) tu::get(b, k, n, i2);
                tr->act_from_float(x.data(), act.data(), K);
                const std::vector<uint8_t> yd = as_dot_activation(tr, act.data(), K);
                for (int64_t m = 0; m < M; m++) {
                    const char * row = (const char *) rows.data() + m * a->nb[1] + (i2 / (B2 / A2)) * a->nb[2];
                    const double want = ggml_quant_dot_ref(type)(K, row, yd.data());
                    const double g = got[(size_t) ((i2 * N + n) * M + m)];
                    const float * wr = w.data() + (m + (i2 / (B2 / A2)) * M) * K;
                    double mag = 0;
                    for (int64_t k = 0; k < K; k++) mag += std::fabs((double) wr[k] * x[(size_t) k]);
                    if (std::fabs(g - want) > 2e-6 * mag + 1e-6 && bad++ < 3) {
                        ADD_FAILURE() << "K=" << K << " M=" << M << " N=" << N << " [" << m << ", " << n << ", " << i2
                                      << "]: got " << g << ", expected " << want;
                    }
                }
            }
        }

        // Column n alone (a one-column b) gives the same bits as within the N-column product.
        for (int64_t n : {(int64_t) 0, N - 1}) {
            ggml_tensor * bn = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, K, 1, B2);
            for (int64_t i2 = 0; i2 < B2; i2++) {
                for (int64_t k = 0; k < K; k++) tu::set(bn, tu::get(b, k, n, i2), k, 0, i2);
            }
            ggml_tensor * cn = ggml_mul_mat(ctx, a, bn);
            tu::compute(ctx, cn, 2);
            for (int64_t i2 = 0; i2 < B2; i2++) {
                for (int64_t m = 0; m < M; m++) {
                    ASSERT_EQ(tu::get(cn, m, 0, i2), got[(size_t) ((i2 * N + n) * M + m)]) << "column " << n << " row " << m;
                }
            }
        }
    }
}

TEST(Repack, MulMatOneColumn) { check_mul_mat(8, 64, 1, 1, 1, false); }
TEST(Repack, MulMatFewColumns) {
    for (int64_t n : {2, 3, 5, 7, 8, 9}) check_mul_mat(4, 48, n, 1, 1, false);
}
TEST(Repack, MulMatManyColumns) { check_mul_mat(64, 32, 70, 1, 1, false); }  // several column blocks
TEST(Repack, MulMatBroadcastAndStridedB) { check_mul_mat(3, 32, 5, 2, 4, true); }

TEST(Repack, OtherReadersAreRefused) {
    ForceRepack force;
    tu::Ctx ctx(16u << 20);
    std::mt19937 rng(6);
    ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, 64, 32);
    fill_quantized(a, rng);
    ASSERT_TRUE(ggml_cpu_repack(a));
    ggml_tensor * ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 1);
    ((int32_t *) ids->data)[0] = 3;
    ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 64, 2);
    tu::fill_uniform(b, rng);
    ggml_tensor * bad[] = {
        ggml_get_rows(ctx, a, ids),
        ggml_mul_mat(ctx, ggml_view_2d(ctx, a, 64, 16, a->nb[1], 0), b),
        ggml_cpy(ctx, a, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 64, 32)),
        ggml_out_prod(ctx, ggml_view_2d(ctx, a, 64, 16, a->nb[1], 0), ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 16)),
    };
    for (ggml_tensor * t : bad) {
        ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, t);
        EXPECT_EQ(ggml_graph_compute_with_ctx(ctx, gf, 2), GGML_STATUS_FAILED) << ggml_op_desc(t);
    }
}

}  // namespace
