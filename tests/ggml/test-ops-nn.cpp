// test-ops-nn.cpp - the neural-network op kernels (norm, rms_norm, diag_mask_inf, soft_max, rope,
// cross_entropy_loss) against naive double-precision references: random data, odd sizes,
// non-contiguous inputs, masks with broadcasting, ALiBi, YaRN, and 1/2/3 threads bit-identical.
#include "test-ref.h"

#include <algorithm>

namespace {

using namespace tu;  // test-util.h and test-ref.h: Shape, Values, Layout, new_input, references

// ============================================================================================
// norm, rms_norm

ggml_tensor * build_norm(ggml_context * ctx, ggml_tensor * x, float eps, bool rms, bool inplace) {
    if (rms) return inplace ? ggml_rms_norm_inplace(ctx, x, eps) : ggml_rms_norm(ctx, x, eps);
    return inplace ? ggml_norm_inplace(ctx, x, eps) : ggml_norm(ctx, x, eps);
}

TEST(Norm, ShapesLayoutsAndEps) {
    const Shape shapes[] = {{1, 1, 1, 1}, {2, 3, 1, 1}, {7, 3, 1, 1}, {37, 5, 3, 2}, {64, 2, 2, 1}, {4099, 3, 1, 1}};
    const Layout layouts[] = {Layout::Contiguous, Layout::Padded, Layout::Permuted12, Layout::Transposed};
    std::mt19937 rng(11);
    for (bool rms : {false, true}) {
        for (const Shape & ne : shapes) {
            for (Layout layout : layouts) {
                for (float eps : {1e-5f, 1e-2f}) {
                    tu::Ctx ctx;
                    ggml_tensor * x = new_input(ctx, GGML_TYPE_F32, ne, layout);
                    tu::fill_uniform(x, rng, -2.0f, 3.0f);
                    const Values xv = tu::to_double(x);
                    ggml_tensor * y = build_norm(ctx, x, eps, rms, false);
                    const Values got = tu::compute_all_threads(ctx, y);
                    const std::string what = std::string(rms ? "rms_norm " : "norm ") + shape_str(ne) + " " +
                                             layout_name(layout) + " eps " + std::to_string(eps);
                    tu::expect_close(got, tu::ref_norm(xv, ne, eps, rms), 1e-5, 1e-6, what);
                }
            }
        }
    }
}

TEST(Norm, InPlace) {
    std::mt19937 rng(12);
    for (bool rms : {false, true}) {
        for (Layout layout : {Layout::Contiguous, Layout::Padded, Layout::Transposed}) {
            const Shape ne = {33, 4, 3, 1};
            tu::Ctx ctx;
            ggml_tensor * x = new_input(ctx, GGML_TYPE_F32, ne, layout);
            tu::fill_uniform(x, rng, -1.0f, 1.0f);
            const Values xv = tu::to_double(x);
            ggml_tensor * y = build_norm(ctx, x, 1e-6f, rms, true);
            const Values got = compute_inplace_all_threads(ctx, y, x, xv);
            tu::expect_close(got, tu::ref_norm(xv, ne, 1e-6, rms), 1e-5, 1e-6, rms ? "rms_norm in place" : "norm in place");
        }
    }
}

// A large common offset: float sums of x or a float mean would lose the deviations.
TEST(Norm, LargeMeanSmallSpread) {
    std::mt19937 rng(13);
    const Shape ne = {1537, 3, 1, 1};
    tu::Ctx ctx;
    ggml_tensor * x = new_tensor(ctx, GGML_TYPE_F32, ne);
    tu::fill_uniform(x, rng, 1000.0f, 1000.5f);
    const Values xv = tu::to_double(x);
    const Values got = tu::compute_all_threads(ctx, ggml_norm(ctx, x, 1e-9f));
    tu::expect_close(got, tu::ref_norm(xv, ne, 1e-9, false), 1e-5, 1e-5, "norm with mean 1000");
    const Values got_rms = tu::compute_all_threads(ctx, ggml_rms_norm(ctx, x, 1e-9f));
    tu::expect_close(got_rms, tu::ref_norm(xv, ne, 1e-9, true), 1e-5, 1e-6, "rms_norm with mean 1000");
}

// ============================================================================================
// diag_mask_inf

TEST(DiagMaskInf, CausalMaskAnyNPast) {
    const Shape shapes[] = {{1, 1, 1, 1}, {7, 5, 3, 1}, {13, 13, 2, 2}, {5, 9, 1, 1}};
    std::mt19937 rng(21);
    for (const Shape & ne : shapes) {
        for (int n_past : {0, 2, -1, -3, 20}) {
            for (Layout layout : {Layout::Contiguous, Layout::Padded, Layout::Transposed}) {
                for (bool inplace : {false, true}) {
                    tu::Ctx ctx;
                    ggml_tensor * x = new_input(ctx, GGML_TYPE_F32, ne, layout);
                    tu::fill_uniform(x, rng);
                    const Values xv = tu::to_double(x);
                    ggml_tensor * y = inplace ? ggml_diag_mask_inf_inplace(ctx, x, n_past) : ggml_diag_mask_inf(ctx, x, n_past);
                    const Values got = inplace ? compute_inplace_all_threads(ctx, y, x, xv) : tu::compute_all_threads(ctx, y);
                    Values ref = xv;
                    tu::for_each(x, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                        if (i0 > n_past + i1) ref[flat_index(ne, i0, i1, i2, i3)] = -kInf;
                    });
                    tu::expect_close(got, ref, 0.0, 0.0,
                                     "diag_mask_inf " + shape_str(ne) + " n_past " + std::to_string(n_past) + " " +
                                     layout_name(layout) + (inplace ? " in place" : ""));
                }
            }
        }
    }
}

// ============================================================================================
// soft_max

TEST(SoftMax, PlainOddShapes) {
    const Shape shapes[] = {{1, 1, 1, 1}, {5, 3, 1, 1}, {37, 4, 3, 2}, {1003, 3, 1, 1}, {4099, 2, 1, 1}};
    std::mt19937 rng(31);
    for (const Shape & ne : shapes) {
        tu::Ctx ctx;
        ggml_tensor * x = new_tensor(ctx, GGML_TYPE_F32, ne);
        tu::fill_uniform(x, rng, -6.0f, 6.0f);
        const Values xv = tu::to_double(x);
        const Values got = tu::compute_all_threads(ctx, ggml_soft_max(ctx, x));
        tu::expect_close(got, tu::ref_soft_max(xv, ne), 1e-5, 1e-12, "soft_max " + shape_str(ne));
    }
}

// Every row length up to a few vector widths: the SIMD body, the padded tail, and both.
TEST(SoftMax, AllShortRowLengths) {
    std::mt19937 rng(32);
    for (int64_t ne0 = 1; ne0 <= 40; ne0++) {
        const Shape ne = {ne0, 3, 1, 1};
        tu::Ctx ctx;
        ggml_tensor * x = new_tensor(ctx, GGML_TYPE_F32, ne);
        tu::fill_uniform(x, rng, -10.0f, 10.0f);
        const Values xv = tu::to_double(x);
        const Values got = tu::compute_all_threads(ctx, ggml_soft_max(ctx, x));
        tu::expect_close(got, tu::ref_soft_max(xv, ne), 1e-5, 1e-12, "soft_max " + shape_str(ne));
    }
}

TEST(SoftMax, InPlace) {
    std::mt19937 rng(33);
    const Shape ne = {45, 7, 2, 1};
    tu::Ctx ctx;
    ggml_tensor * x = new_tensor(ctx, GGML_TYPE_F32, ne);
    tu::fill_uniform(x, rng, -4.0f, 4.0f);
    const Values xv = tu::to_double(x);
    const Values got = compute_inplace_all_threads(ctx, ggml_soft_max_inplace(ctx, x), x, xv);
    tu::expect_close(got, tu::ref_soft_max(xv, ne), 1e-5, 1e-12, "soft_max in place");
}

// Arguments of exp over a wide range: large positive and negative logits, results that
// underflow to subnormals and to zero.
TEST(SoftMax, WideRangeExp) {
    std::mt19937 rng(34);
    const Shape ne = {301, 5, 1, 1};
    tu::Ctx ctx;
    ggml_tensor * x = new_tensor(ctx, GGML_TYPE_F32, ne);
    tu::fill_uniform(x, rng, -60.0f, 60.0f);
    const Values xv = tu::to_double(x);
    const float scale = 1.5f;
    const Values got = tu::compute_all_threads(ctx, ggml_soft_max_ext(ctx, x, nullptr, scale, 0.0f));
    // |x*scale - max| up to 180: the float rounding of the argument alone is ~1e-5 relative.
    tu::expect_close(got, tu::ref_soft_max(xv, ne, scale), 5e-5, 1e-37, "soft_max wide range");
}

// Mask values: random, with a causal -inf pattern and a fully masked row (row 0 of plane 0).
void fill_mask(ggml_tensor * mask, std::mt19937 & rng, bool alibi_like) {
    std::uniform_real_distribution<float> d(-3.0f, 1.0f);
    tu::for_each(mask, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        double v = alibi_like ? -std::fabs((double) i0 - (double) i1) : d(rng);
        if (i0 > i1 + 2) v = -kInf;
        if (i1 == 0 && i2 == 0 && i3 == 0) v = -kInf;
        tu::set(mask, v, i0, i1, i2, i3);
    });
}

void run_soft_max_mask_case(const Shape & ne, ggml_type mask_type, int64_t m2, int64_t m3, bool mask_padded,
                            float scale, float max_bias, uint32_t seed) {
    std::mt19937 rng(seed);
    tu::Ctx ctx;
    ggml_tensor * x = new_tensor(ctx, GGML_TYPE_F32, ne);
    tu::fill_uniform(x, rng, -5.0f, 5.0f);
    const Shape mask_ne = {ne[0], ne[1] + 3, m2, m3};
    ggml_tensor * mask = new_input(ctx, mask_type, mask_ne, mask_padded ? Layout::Padded : Layout::Contiguous);
    fill_mask(mask, rng, max_bias > 0.0f);

    const Values mask_vals = tu::to_double(mask);
    const Values xv = tu::to_double(x);
    const Values got = tu::compute_all_threads(ctx, ggml_soft_max_ext(ctx, x, mask, scale, max_bias));
    const Values ref = tu::ref_soft_max(xv, ne, scale, &mask_vals, mask_ne, max_bias);
    const std::string what = "soft_max_ext " + shape_str(ne) + " mask " + ggml_type_name(mask_type) + " " +
                             shape_str(mask_ne) + (mask_padded ? " padded" : "") + " scale " + std::to_string(scale) +
                             " max_bias " + std::to_string(max_bias);
    tu::expect_close(got, ref, 2e-5, 1e-12, what);
    // Masked entries are exactly 0, and so is every entry of a fully masked row.
    int nonzero_masked = 0;
    for (size_t i = 0; i < ref.size(); i++) nonzero_masked += ref[i] == 0.0 && got[i] != 0.0;
    EXPECT_EQ(nonzero_masked, 0) << what;
}

TEST(SoftMax, MaskF32F16Broadcast) {
    const Shape ne = {19, 6, 6, 2};
    uint32_t seed = 40;
    for (ggml_type mt : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        const int64_t bcast[][2] = {{1, 1}, {6, 1}, {1, 2}, {6, 2}, {3, 1}, {2, 2}};
        for (const auto & b : bcast) {
            for (bool padded : {false, true}) {
                run_soft_max_mask_case(ne, mt, b[0], b[1], padded, 0.37f, 0.0f, seed++);
            }
        }
        run_soft_max_mask_case({1031, 3, 2, 1}, mt, 1, 1, false, 1.0f, 0.0f, seed++);
        run_soft_max_mask_case({8, 1, 4, 1}, mt, 4, 1, true, 2.5f, 0.0f, seed++);
    }
}

// ALiBi: with 6 heads n_head_log2 = 4, so heads 4 and 5 take the m1 branch; 8 heads use m0 only.
TEST(SoftMax, Alibi) {
    uint32_t seed = 60;
    for (ggml_type mt : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        for (int64_t n_head : {1, 6, 8, 12}) {
            for (float max_bias : {8.0f, 1.5f}) {
                run_soft_max_mask_case({23, 5, n_head, 1}, mt, 1, 1, false, 0.125f, max_bias, seed++);
            }
        }
        run_soft_max_mask_case({17, 4, 6, 2}, mt, 3, 2, true, 0.7f, 8.0f, seed++);
    }
}

TEST(SoftMax, FullyMaskedRowsAreZero) {
    tu::Ctx ctx;
    const Shape ne = {9, 3, 1, 1};
    ggml_tensor * x = new_tensor(ctx, GGML_TYPE_F32, ne);
    std::mt19937 rng(70);
    tu::fill_uniform(x, rng);
    ggml_tensor * mask = new_tensor(ctx, GGML_TYPE_F32, ne);
    ggml_set_f32(mask, 0.0f);
    for (int64_t i0 = 0; i0 < ne[0]; i0++) tu::set(mask, -kInf, i0, 1);  // row 1 fully masked
    const Values got = tu::compute_all_threads(ctx, ggml_soft_max_ext(ctx, x, mask, 1.0f, 0.0f));
    for (int64_t i0 = 0; i0 < ne[0]; i0++) {
        EXPECT_EQ(got[flat_index(ne, i0, 1, 0, 0)], 0.0) << "element " << i0;
    }
    for (int64_t i1 : {0, 2}) {
        double sum = 0.0;
        for (int64_t i0 = 0; i0 < ne[0]; i0++) sum += got[flat_index(ne, i0, i1, 0, 0)];
        EXPECT_NEAR(sum, 1.0, 1e-6) << "row " << i1;
    }
}

// ============================================================================================
// rope

struct RopeRun {
    Shape ne;
    ggml_type type = GGML_TYPE_F32;
    Layout layout = Layout::Contiguous;
    bool inplace = false;
    bool simple_builder = false;  // ggml_rope (defaults) instead of ggml_rope_ext
};

void run_rope_case(const RopeRun & run, const RopeCase & c, uint32_t seed, double rtol, double atol) {
    std::mt19937 rng(seed);
    tu::Ctx ctx;
    ggml_tensor * x = new_input(ctx, run.type, run.ne, run.layout);
    tu::fill_uniform(x, rng, -1.0f, 1.0f);
    const Values xv = tu::to_double(x);
    const tu::RopeInputs in = tu::make_rope_inputs(ctx, c, run.ne[2], rng);

    ggml_tensor * y;
    if (run.simple_builder) {
        y = run.inplace ? ggml_rope_inplace(ctx, x, in.pos, c.n_dims, c.mode) : ggml_rope(ctx, x, in.pos, c.n_dims, c.mode);
    } else if (run.inplace) {
        y = ggml_rope_ext_inplace(ctx, x, in.pos, in.ff, c.n_dims, c.mode, c.n_ctx_orig, c.freq_base, c.freq_scale,
                                  c.ext_factor, c.attn_factor, c.beta_fast, c.beta_slow);
    } else {
        y = ggml_rope_ext(ctx, x, in.pos, in.ff, c.n_dims, c.mode, c.n_ctx_orig, c.freq_base, c.freq_scale, c.ext_factor,
                          c.attn_factor, c.beta_fast, c.beta_slow);
    }
    ASSERT_EQ(y->type, run.type);
    const Values got = run.inplace ? compute_inplace_all_threads(ctx, y, x, xv) : tu::compute_all_threads(ctx, y);
    const std::string what = "rope " + rope_case_str(c) + " " + shape_str(run.ne) + " " + ggml_type_name(run.type) +
                             " " + layout_name(run.layout) + (run.inplace ? " in place" : "");
    tu::expect_close(got, tu::ref_rope(xv, run.ne, in.pos_vals, in.stored), rtol, atol, what);
}

// The ext_factor == 0 path over every combination of mode, n_dims < or == head_dim, base,
// freq_scale, attn_factor and freq factors.
TEST(Rope, LinearScalingAllCombinations) {
    const int dims[][2] = {{8, 8}, {20, 12}, {64, 64}, {130, 34}, {6, 2}};
    std::mt19937 rng(80);
    uint32_t seed = 81;
    for (int mode : {GGML_ROPE_TYPE_NORMAL, GGML_ROPE_TYPE_NEOX}) {
        for (const auto & d : dims) {
            for (float base : {10000.0f, 500000.0f}) {
                for (float freq_scale : {1.0f, 0.25f}) {
                    for (float attn_factor : {1.0f, 0.75f}) {
                        for (bool with_ff : {false, true}) {
                            RopeCase c;
                            c.mode = mode;
                            c.n_dims = d[1];
                            c.freq_base = base;
                            c.freq_scale = freq_scale;
                            c.attn_factor = attn_factor;
                            if (with_ff) c.freq_factors = random_freq_factors(c.n_dims, rng);
                            RopeRun run;
                            run.ne = {d[0], 3, 7, 1};
                            run_rope_case(run, c, seed++, 1e-5, 2e-6);
                        }
                    }
                }
            }
        }
    }
}

TEST(Rope, SimpleBuilder) {
    uint32_t seed = 90;
    for (int mode : {GGML_ROPE_TYPE_NORMAL, GGML_ROPE_TYPE_NEOX}) {
        for (bool inplace : {false, true}) {
            RopeCase c;
            c.mode = mode;
            c.n_dims = 16;
            RopeRun run;
            run.ne = {24, 4, 5, 1};
            run.simple_builder = true;
            run.inplace = inplace;
            run_rope_case(run, c, seed++, 1e-5, 2e-6);
        }
    }
}

TEST(Rope, LayoutsTypesAndInPlace) {
    uint32_t seed = 100;
    std::mt19937 rng(99);
    for (int mode : {GGML_ROPE_TYPE_NORMAL, GGML_ROPE_TYPE_NEOX}) {
        for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16}) {
            for (Layout layout : {Layout::Contiguous, Layout::Padded, Layout::Permuted12, Layout::Transposed}) {
                for (bool inplace : {false, true}) {
                    RopeCase c;
                    c.mode = mode;
                    c.n_dims = 10;
                    c.freq_scale = 0.5f;
                    c.freq_factors = random_freq_factors(c.n_dims, rng);
                    RopeRun run;
                    run.ne = {14, 3, 6, 2};
                    run.type = type;
                    run.layout = layout;
                    run.inplace = inplace;
                    // F16/BF16: the output is rounded to the type (inputs are read exactly).
                    const double rtol = type == GGML_TYPE_F32 ? 1e-5 : tu::type_rtol(type);
                    const double atol = type == GGML_TYPE_F32 ? 2e-6 : tu::type_rtol(type) * 0.5;
                    run_rope_case(run, c, seed++, rtol, atol);
                }
            }
        }
    }
}

// A generated token's rope nodes share the angles and cos/sin each thread keeps from the last
// node: the same graph recomputed with new positions, then new freq factor values (same
// parameters, same tensors), and a rope_back in between, must not see stale ones.
TEST(Rope, RecomputedWithNewPositionsAndFreqFactors) {
    std::mt19937 rng(130);
    tu::Ctx ctx;
    RopeCase c;
    c.mode = GGML_ROPE_TYPE_NEOX;
    c.n_dims = 16;
    c.freq_factors = random_freq_factors(c.n_dims, rng);
    const Shape ne = {16, 4, 1, 1};  // one token, as in generation
    ggml_tensor * x = new_tensor(ctx, GGML_TYPE_F32, ne);
    tu::fill_uniform(x, rng, -1.0f, 1.0f);
    const Values xv = tu::to_double(x);
    tu::RopeInputs in = tu::make_rope_inputs(ctx, c, 1, rng);
    auto rope = [&](ggml_tensor * t) {
        return ggml_rope_ext(ctx, t, in.pos, in.ff, c.n_dims, c.mode, c.n_ctx_orig, c.freq_base, c.freq_scale, c.ext_factor,
                             c.attn_factor, c.beta_fast, c.beta_slow);
    };
    ggml_tensor * y1 = rope(x), * y2 = rope(ggml_scale(ctx, x, 2.0f));
    ggml_tensor * back = ggml_rope_ext_back(ctx, x, in.pos, in.ff, c.n_dims, c.mode, c.n_ctx_orig, c.freq_base, c.freq_scale,
                                            c.ext_factor, c.attn_factor, c.beta_fast, c.beta_slow);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, y1);
    ggml_build_forward_expand(gf, back);
    ggml_build_forward_expand(gf, y2);
    Values x2 = xv;
    for (double & v : x2) v *= 2.0;
    for (int step = 0; step < 4; step++) {
        if (step > 0) {
            in.pos_vals[0] = 1000 * step + 17;
            tu::set(in.pos, in.pos_vals[0], 0);
        }
        if (step == 3) {  // new values in the same freq factor tensor
            for (size_t i = 0; i < c.freq_factors.size(); i++) tu::set(in.ff, 0.5 + 0.25 * (double) i, (int64_t) i);
            in.stored.freq_factors = tu::to_double(in.ff);
        }
        for (int nt : {1, 2, 3}) {
            ASSERT_EQ(ggml_graph_compute_with_ctx(ctx, gf, nt), GGML_STATUS_SUCCESS);
            const std::string what = "step " + std::to_string(step) + ", " + std::to_string(nt) + " threads";
            tu::expect_close(tu::to_double(y1), tu::ref_rope(xv, ne, in.pos_vals, in.stored), 1e-5, 2e-6, what);
            tu::expect_close(tu::to_double(y2), tu::ref_rope(x2, ne, in.pos_vals, in.stored), 1e-5, 4e-6, what);
            tu::expect_close(tu::to_double(back), tu::ref_rope(xv, ne, in.pos_vals, in.stored, true), 1e-5, 2e-6, what + " (back)");
        }
    }
}

// YaRN against a double implementation of the same formulas.
TEST(Rope, Yarn) {
    uint32_t seed = 120;
    std::mt19937 rng(119);
    for (int mode : {GGML_ROPE_TYPE_NORMAL, GGML_ROPE_TYPE_NEOX}) {
        for (float ext_factor : {1.0f, 0.5f}) {
            for (int n_ctx_orig : {64, 4096}) {
                for (float freq_scale : {0.25f, 0.125f}) {
                    for (bool with_ff : {false, true}) {
                        RopeCase c;
                        c.mode = mode;
                        c.n_dims = 64;
                        c.n_ctx_orig = n_ctx_orig;
                        c.freq_scale = freq_scale;
                        c.ext_factor = ext_factor;
                        c.attn_factor = 0.8f;
                        c.beta_fast = 32.0f;
                        c.beta_slow = 1.0f;
                        if (with_ff) c.freq_factors = random_freq_factors(c.n_dims, rng);
                        RopeRun run;
                        run.ne = {80, 2, 9, 1};
                        run_rope_case(run, c, seed++, 1e-5, 3e-6);
                    }
                }
            }
        }
    }
}

// ============================================================================================
// cross_entropy_loss

double ref_cross_entropy(const Values & a, const Values & b, const Shape & ne) {
    double total = 0.0;
    for (int64_t r = 0; r < rows_of(ne); r++) {
        const double * ar = a.data() + r * ne[0];
        const double * br = b.data() + r * ne[0];
        double max = -kInf;
        for (int64_t c = 0; c < ne[0]; c++) max = std::max(max, ar[c]);
        double sum = 0.0;
        for (int64_t c = 0; c < ne[0]; c++) sum += std::exp(ar[c] - max);
        const double log_norm = max + std::log(sum);
        for (int64_t c = 0; c < ne[0]; c++) {
            if (br[c] != 0.0) total -= br[c] * (ar[c] - log_norm);
        }
    }
    return total / (double) rows_of(ne);
}

// Each row of b a probability distribution (one-hot when one_hot).
void fill_targets(ggml_tensor * b, std::mt19937 & rng, bool one_hot) {
    const Shape ne = shape_of(b);
    std::uniform_real_distribution<double> d(0.0, 1.0);
    std::uniform_int_distribution<int64_t> pick(0, ne[0] - 1);
    for (int64_t i3 = 0; i3 < ne[3]; i3++) {
        for (int64_t i2 = 0; i2 < ne[2]; i2++) {
            for (int64_t i1 = 0; i1 < ne[1]; i1++) {
                std::vector<double> p((size_t) ne[0]);
                double s = 0.0;
                const int64_t hot = pick(rng);
                for (int64_t c = 0; c < ne[0]; c++) s += p[c] = one_hot ? (c == hot) : d(rng);
                for (int64_t c = 0; c < ne[0]; c++) tu::set(b, p[c] / s, c, i1, i2, i3);
            }
        }
    }
}

TEST(CrossEntropyLoss, ShapesAndLayouts) {
    const Shape shapes[] = {{1, 1, 1, 1}, {7, 3, 1, 1}, {37, 4, 3, 2}, {1001, 5, 1, 1}, {3, 101, 1, 1}};
    uint32_t seed = 140;
    for (const Shape & ne : shapes) {
        for (Layout layout : {Layout::Contiguous, Layout::Padded, Layout::Transposed}) {
            for (bool one_hot : {false, true}) {
                std::mt19937 rng(seed++);
                tu::Ctx ctx;
                ggml_tensor * a = new_input(ctx, GGML_TYPE_F32, ne, layout);
                ggml_tensor * b = new_input(ctx, GGML_TYPE_F32, ne, layout == Layout::Padded ? Layout::Contiguous : layout);
                tu::fill_uniform(a, rng, -5.0f, 5.0f);
                fill_targets(b, rng, one_hot);
                const double ref = ref_cross_entropy(tu::to_double(a), tu::to_double(b), ne);
                ggml_tensor * loss = ggml_cross_entropy_loss(ctx, a, b);
                ASSERT_EQ(ggml_nelements(loss), 1);
                const Values got = tu::compute_all_threads(ctx, loss);
                tu::expect_close(got, {ref}, 1e-5, 1e-7,
                                 "cross_entropy_loss " + shape_str(ne) + " " + layout_name(layout) + (one_hot ? " one-hot" : ""));
            }
        }
    }
}

// A -inf logit where the target has no mass contributes nothing (not NaN).
TEST(CrossEntropyLoss, MinusInfLogitWithZeroTarget) {
    tu::Ctx ctx;
    const Shape ne = {6, 4, 1, 1};
    ggml_tensor * a = new_tensor(ctx, GGML_TYPE_F32, ne);
    ggml_tensor * b = new_tensor(ctx, GGML_TYPE_F32, ne);
    std::mt19937 rng(160);
    tu::fill_uniform(a, rng, -3.0f, 3.0f);
    fill_targets(b, rng, true);
    tu::for_each(a, [&](int64_t i0, int64_t i1, int64_t, int64_t) {
        if (tu::get(b, i0, i1) == 0.0 && (i0 + i1) % 2 == 0) tu::set(a, -kInf, i0, i1);
    });
    const double ref = ref_cross_entropy(tu::to_double(a), tu::to_double(b), ne);
    ASSERT_TRUE(std::isfinite(ref));
    const Values got = tu::compute_all_threads(ctx, ggml_cross_entropy_loss(ctx, a, b));
    tu::expect_close(got, {ref}, 1e-5, 1e-7, "cross_entropy_loss with -inf logits");
}

// Many rows: the per-row partial sums are added in row order whatever the thread split.
TEST(CrossEntropyLoss, ManyRowsBitIdentical) {
    tu::Ctx ctx;
    const Shape ne = {50, 257, 3, 1};
    ggml_tensor * a = new_tensor(ctx, GGML_TYPE_F32, ne);
    ggml_tensor * b = new_tensor(ctx, GGML_TYPE_F32, ne);
    std::mt19937 rng(170);
    tu::fill_uniform(a, rng, -8.0f, 8.0f);
    fill_targets(b, rng, false);
    const double ref = ref_cross_entropy(tu::to_double(a), tu::to_double(b), ne);
    const Values got = tu::compute_all_threads(ctx, ggml_cross_entropy_loss(ctx, a, b));
    tu::expect_close(got, {ref}, 1e-6, 0.0, "cross_entropy_loss many rows");
}

// ============================================================================================
// flash_attn_ext

enum class AttnMask { None, Causal, Random, Alibi, Sequences };

struct AttnCase {
    int64_t D, Dv, n_q, n_kv, H, Hkv, B3;
    ggml_type kv_type, mask_type;
    AttnMask mask;
    int64_t m2;  // mask planes: 1 (shared by the heads) or H
    bool q_permuted;
    float scale, max_bias, softcap;
};

std::string attn_case_str(const AttnCase & c) {
    const char * masks[] = {"none", "causal", "random", "alibi", "sequences"};
    return "flash_attn D " + std::to_string(c.D) + " Dv " + std::to_string(c.Dv) + " n_q " + std::to_string(c.n_q) +
           " n_kv " + std::to_string(c.n_kv) + " H " + std::to_string(c.H) + "/" + std::to_string(c.Hkv) + " B3 " +
           std::to_string(c.B3) + " kv " + ggml_type_name(c.kv_type) + " mask " + masks[(int) c.mask] + " " +
           ggml_type_name(c.mask_type) + " m2 " + std::to_string(c.m2) + (c.q_permuted ? " q permuted" : "") +
           " scale " + std::to_string(c.scale) + " max_bias " + std::to_string(c.max_bias) + " softcap " + std::to_string(c.softcap);
}

// Causal with the queries at the end of the keys (a batch after a cache), one random plane
// hiding a few extra keys, and query 1 of plane 0 hiding every key.
void fill_attn_mask(ggml_tensor * m, AttnMask kind, int64_t n_q, std::mt19937 & rng) {
    std::uniform_real_distribution<float> d(-2.0f, 0.5f);
    const int64_t n_kv = m->ne[0];
    tu::for_each(m, [&](int64_t j, int64_t i, int64_t i2, int64_t i3) {
        double v = 0.0;
        const bool causal_hidden = j > i + (n_kv - n_q);
        switch (kind) {
            case AttnMask::None:   break;
            case AttnMask::Causal: v = causal_hidden ? -kInf : 0.0; break;
            case AttnMask::Alibi:  v = causal_hidden ? -kInf : -(double) (i + n_kv - n_q - j); break;
            case AttnMask::Random: v = causal_hidden || (j * 7 + i2) % 11 == 3 ? -kInf : d(rng); break;
            // five sequences with interleaved cells (a llama cache of several sequences): query i
            // sees the keys of its sequence i % 5 up to its position, with bias values
            case AttnMask::Sequences: v = causal_hidden || j % 5 != i % 5 ? -kInf : d(rng); break;
        }
        if (kind == AttnMask::Random && i == 1 && i2 == 0 && i3 == 0) v = -kInf;
        tu::set(m, v, j, i, i2, i3);
    });
}

Values run_flash_attn_case(const AttnCase & c, uint32_t seed) {
    std::mt19937 rng(seed);
    tu::Ctx ctx;
    const Shape qne = {c.D, c.n_q, c.H, c.B3}, kne = {c.D, c.n_kv, c.Hkv, c.B3}, vne = {c.Dv, c.n_kv, c.Hkv, c.B3};
    ggml_tensor * q = new_input(ctx, GGML_TYPE_F32, qne, c.q_permuted ? Layout::Permuted12 : Layout::Contiguous);
    ggml_tensor * k = new_tensor(ctx, c.kv_type, kne);
    ggml_tensor * v = new_tensor(ctx, c.kv_type, vne);
    tu::fill_uniform(q, rng);
    tu::fill_uniform(k, rng);
    tu::fill_uniform(v, rng);
    ggml_tensor * mask = nullptr;
    const Shape mne = {c.n_kv, c.n_q + 2, c.m2, 1};
    Values mv;
    if (c.mask != AttnMask::None) {
        mask = new_tensor(ctx, c.mask_type, mne);
        fill_attn_mask(mask, c.mask, c.n_q, rng);
        mv = tu::to_double(mask);
    }
    ggml_tensor * out = ggml_flash_attn_ext(ctx, q, k, v, mask, c.scale, c.max_bias, c.softcap);
    EXPECT_EQ(shape_of(out), (Shape{c.Dv, c.H, c.n_q, c.B3}));
    const Values got = tu::compute_all_threads(ctx, out);
    const Values ref = ref_flash_attn(tu::to_double(q), qne, tu::to_double(k), kne, tu::to_double(v), vne, mask ? &mv : nullptr,
                                      mne, c.scale, c.max_bias, c.softcap);
    tu::expect_close(got, ref, 2e-5, 2e-6, attn_case_str(c));
    return got;
}

TEST(FlashAttn, ShapesMasksAndHeads) {
    const float s = 0.35f;
    const AttnCase cases[] = {
        // D, Dv, n_q, n_kv, H, Hkv, B3, kv type, mask type, mask, m2, q permuted, scale, max_bias, softcap
        {8, 8, 5, 5, 4, 2, 1, GGML_TYPE_F32, GGML_TYPE_F32, AttnMask::Causal, 1, true, s, 0, 0},
        {64, 64, 130, 130, 4, 1, 1, GGML_TYPE_F32, GGML_TYPE_F32, AttnMask::Causal, 1, true, 0.125f, 0, 0},
        {64, 64, 70, 200, 8, 2, 1, GGML_TYPE_F16, GGML_TYPE_F16, AttnMask::Causal, 1, false, 0.125f, 0, 0},
        {40, 24, 67, 90, 3, 3, 2, GGML_TYPE_F32, GGML_TYPE_F32, AttnMask::None, 1, false, s, 0, 0},
        {17, 33, 66, 71, 6, 2, 1, GGML_TYPE_F32, GGML_TYPE_F16, AttnMask::Random, 6, true, s, 0, 0},
        {16, 16, 9, 300, 6, 3, 1, GGML_TYPE_F16, GGML_TYPE_F32, AttnMask::Alibi, 1, false, s, 8.0f, 0},
        {32, 32, 65, 65, 2, 1, 1, GGML_TYPE_F32, GGML_TYPE_F32, AttnMask::Causal, 1, false, s, 0, 5.0f},
        // a few queries (token generation): the dot-product path
        {80, 80, 1, 513, 4, 4, 1, GGML_TYPE_F16, GGML_TYPE_F16, AttnMask::Causal, 1, false, 0.11f, 0, 0},
        {24, 40, 3, 37, 6, 2, 2, GGML_TYPE_F32, GGML_TYPE_F32, AttnMask::Random, 6, true, s, 0, 0},
        {16, 16, 4, 70, 4, 2, 1, GGML_TYPE_F16, GGML_TYPE_F16, AttnMask::Alibi, 1, false, s, 4.0f, 3.0f},
        // one query, grouped heads: their scores from shared dot tiles (4, 3, 5 heads per kv head)
        {64, 64, 1, 200, 8, 2, 1, GGML_TYPE_F16, GGML_TYPE_F16, AttnMask::Causal, 1, false, 0.125f, 0, 0},
        {24, 40, 1, 37, 6, 2, 2, GGML_TYPE_F32, GGML_TYPE_F32, AttnMask::Random, 6, true, s, 0, 0},
        {16, 16, 1, 70, 12, 4, 1, GGML_TYPE_F16, GGML_TYPE_F32, AttnMask::Alibi, 1, false, s, 4.0f, 3.0f},
        {32, 32, 1, 45, 10, 2, 1, GGML_TYPE_F32, GGML_TYPE_F16, AttnMask::None, 1, true, s, 0, 0},
        // queries of several sequences that each see a fifth of the keys: only those are multiplied
        {64, 64, 8, 400, 8, 2, 1, GGML_TYPE_F16, GGML_TYPE_F16, AttnMask::Sequences, 1, false, 0.125f, 0, 0},
        {24, 40, 70, 150, 6, 3, 2, GGML_TYPE_F32, GGML_TYPE_F32, AttnMask::Sequences, 1, true, s, 4.0f, 0},
        {16, 16, 5, 90, 4, 4, 1, GGML_TYPE_F16, GGML_TYPE_F16, AttnMask::Sequences, 1, false, s, 0, 0},
    };
    uint32_t seed = 300;
    for (const AttnCase & c : cases) run_flash_attn_case(c, seed++);
}

// The fused op equals what soft_max_ext composes (within float rounding).
TEST(FlashAttn, MatchesSoftMaxComposition) {
    std::mt19937 rng(320);
    tu::Ctx ctx;
    const int64_t D = 32, T = 77, H = 4, Hkv = 2;
    ggml_tensor * q = new_tensor(ctx, GGML_TYPE_F32, {D, T, H, 1});
    ggml_tensor * k = new_tensor(ctx, GGML_TYPE_F32, {D, T, Hkv, 1});
    ggml_tensor * v = new_tensor(ctx, GGML_TYPE_F32, {D, T, Hkv, 1});
    ggml_tensor * mask = new_tensor(ctx, GGML_TYPE_F32, {T, T, 1, 1});
    for (ggml_tensor * t : {q, k, v}) tu::fill_uniform(t, rng);
    fill_attn_mask(mask, AttnMask::Causal, T, rng);
    const float scale = 0.2f;
    ggml_tensor * fused = ggml_flash_attn_ext(ctx, q, k, v, mask, scale, 0.0f, 0.0f);  // [D, H, T]
    ggml_tensor * kq = ggml_soft_max_ext(ctx, ggml_mul_mat(ctx, k, q), mask, scale, 0.0f);
    ggml_tensor * kqv = ggml_mul_mat(ctx, ggml_cont(ctx, ggml_transpose(ctx, v)), kq);  // [D, T, H]
    ggml_tensor * composed = ggml_cont(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3));          // [D, H, T]
    tu::expect_close(tu::compute_all_threads(ctx, fused), tu::compute_all_threads(ctx, composed), 1e-5, 1e-6, "fused vs composed");
}

}  // namespace
