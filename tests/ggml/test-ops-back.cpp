// test-ops-back.cpp - the kernels of the backward pass (acc, repeat_back, get_rows_back,
// unary_back, norm_back, rms_norm_back, diag_mask_zero, soft_max_back, rope_back,
// cross_entropy_loss_back) and of the optimizer steps (AdamW, SGD) against naive
// double-precision references: random data, odd sizes, non-contiguous inputs, broadcasting,
// repeated indices, 1/2/3 threads bit-identical. Where a formula stands for a derivative, it is
// also checked against central finite differences of the forward op in double.
#include "test-ref.h"

#include "ggml-impl.h"  // ggml_set_op_params: builds the ACC node without a base (autodiff's form)
#include "ggml-alloc.h"
#include "ggml-cpu.h"

#include <algorithm>

namespace {

using namespace tu;  // test-util.h and test-ref.h: Shape, Values, Layout, new_input, references

const Layout kAllLayouts[] = {Layout::Contiguous, Layout::Padded, Layout::Permuted12, Layout::Transposed};

// Central difference of f at x[j] (double).
template <typename F>
double central_diff(F f, Values x, size_t j, double h) {
    const double x0 = x[j];
    x[j] = x0 + h;
    const double fp = f(x);
    x[j] = x0 - h;
    const double fm = f(x);
    return (fp - fm) / (2.0 * h);
}

// ============================================================================================
// acc

struct AccView {
    Shape b_ne;
    size_t nb1, nb2, nb3, offset;  // in elements of dst (converted to bytes below)
    const char * what;
};

// dst = base (or zeros), then b added into the view in b's row order (so overlapping views
// accumulate in that order, as the kernel does).
Values ref_acc(const Values & base, const Values & b, const AccView & v) {
    Values r = base;
    const Shape & ne = v.b_ne;
    for (int64_t i3 = 0; i3 < ne[3]; i3++)
        for (int64_t i2 = 0; i2 < ne[2]; i2++)
            for (int64_t i1 = 0; i1 < ne[1]; i1++)
                for (int64_t i0 = 0; i0 < ne[0]; i0++) {
                    const size_t at = v.offset + i0 + i1 * v.nb1 + i2 * v.nb2 + i3 * v.nb3;
                    r[at] += b[flat_index(ne, i0, i1, i2, i3)];
                }
    return r;
}

// An ACC node without src[0]: the base is zeros (the form autodiff emits for a view's gradient).
ggml_tensor * acc_zero_based(ggml_context * ctx, const Shape & ne, ggml_tensor * b, const size_t p[4]) {
    ggml_tensor * r = new_tensor(ctx, GGML_TYPE_F32, ne);
    ggml_set_op_params(r, p, 4 * sizeof(size_t));
    r->op = GGML_OP_ACC;
    r->src[1] = b;
    return r;
}

TEST(Acc, ViewsLayoutsBaseAndInPlace) {
    const Shape a_ne = {13, 7, 3, 2};
    const size_t r1 = 13, r2 = 13 * 7, r3 = 13 * 7 * 3;  // a's strides in elements
    const AccView views[] = {
        {{5, 3, 2, 1}, r1, r2, r3, 2 + 1 * r1 + 1 * r2, "sub-block"},
        {{13, 7, 3, 2}, r1, r2, r3, 0, "whole"},
        {{1, 1, 1, 1}, r1, r2, r3, 13 * 7 * 3 * 2 - 1, "last element"},
        {{20, 4, 1, 1}, 23, r2, r3, 5, "rows spanning a's rows"},
        {{4, 3, 2, 2}, 2 * r1, 3, r3, 1, "odd strides"},
        {{3, 5, 2, 1}, 2, r2, r3, 7, "overlapping rows"},
        {{6, 4, 1, 1}, 0, 0, 0, 9, "all rows on one"},
    };
    std::mt19937 rng(1);
    uint32_t seed = 2;
    for (const AccView & v : views) {
        for (Layout b_layout : {Layout::Contiguous, Layout::Padded, Layout::Transposed}) {
            for (int base : {0, 1, 2}) {  // 0: a, 1: zeros (no src[0]), 2: in place over a
                std::mt19937 r(seed++);
                tu::Ctx ctx;
                ggml_tensor * a = new_tensor(ctx, GGML_TYPE_F32, a_ne);
                tu::fill_uniform(a, r, -2.0f, 2.0f);
                ggml_tensor * b = new_input(ctx, GGML_TYPE_F32, v.b_ne, b_layout);
                tu::fill_uniform(b, r, -1.0f, 1.0f);
                const Values av = tu::to_double(a), bv = tu::to_double(b);
                const size_t p[4] = {v.nb1 * 4, v.nb2 * 4, v.nb3 * 4, v.offset * 4};
                const std::string what = std::string("acc ") + v.what + " b " + layout_name(b_layout) +
                                         (base == 0 ? " base a" : base == 1 ? " zero base" : " in place");
                Values got;
                if (base == 0) {
                    got = tu::compute_all_threads(ctx, ggml_acc(ctx, a, b, p[0], p[1], p[2], p[3]));
                    EXPECT_TRUE(tu::to_double(a) == av) << what << ": a was modified";
                } else if (base == 1) {
                    got = tu::compute_all_threads(ctx, acc_zero_based(ctx, a_ne, b, p));
                } else {
                    ggml_tensor * y = ggml_acc_inplace(ctx, a, b, p[0], p[1], p[2], p[3]);
                    ASSERT_EQ(y->data, a->data);
                    got = compute_inplace_all_threads(ctx, y, a, av);
                }
                const Values base_vals = base == 1 ? Values(av.size(), 0.0) : av;
                tu::expect_close(got, ref_acc(base_vals, bv, v), 1e-6, 1e-6, what);
            }
        }
    }
}

// ============================================================================================
// repeat_back

// dst[i] = sum of src over every tile that ggml_repeat(dst shape -> src shape) would copy i to.
Values ref_repeat_back(const Values & src, const Shape & src_ne, const Shape & ne) {
    Values r((size_t) tu::n_elements(ne), 0.0);
    for (int64_t i3 = 0; i3 < src_ne[3]; i3++)
        for (int64_t i2 = 0; i2 < src_ne[2]; i2++)
            for (int64_t i1 = 0; i1 < src_ne[1]; i1++)
                for (int64_t i0 = 0; i0 < src_ne[0]; i0++) {
                    r[flat_index(ne, i0 % ne[0], i1 % ne[1], i2 % ne[2], i3 % ne[3])] +=
                        src[flat_index(src_ne, i0, i1, i2, i3)];
                }
    return r;
}

TEST(RepeatBack, TilesInEveryDimLayoutsAndTypes) {
    struct Case { Shape ne; Shape tiles; };
    const Case cases[] = {
        {{3, 2, 1, 1}, {2, 3, 4, 1}},
        {{5, 3, 2, 1}, {3, 2, 2, 2}},   // tiles in every dim at once
        {{1, 1, 1, 1}, {7, 3, 2, 2}},   // everything summed into one element
        {{4, 3, 2, 2}, {1, 1, 1, 1}},   // no tiling: a copy
        {{7, 5, 3, 1}, {3, 1, 1, 1}},   // dim 0 only
        {{6, 1, 3, 2}, {1, 5, 1, 1}},   // dim 1 only
        {{2, 3, 1, 2}, {1, 1, 5, 1}},   // dim 2 only
        {{9, 2, 2, 1}, {1, 1, 1, 3}},   // dim 3 only
        {{300, 2, 1, 1}, {2, 1, 3, 1}}, // long rows
    };
    uint32_t seed = 10;
    for (const Case & c : cases) {
        const Shape src_ne = {c.ne[0] * c.tiles[0], c.ne[1] * c.tiles[1], c.ne[2] * c.tiles[2], c.ne[3] * c.tiles[3]};
        for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16}) {
            for (Layout layout : kAllLayouts) {
                std::mt19937 rng(seed++);
                tu::Ctx ctx;
                ggml_tensor * src = new_input(ctx, type, src_ne, layout);
                tu::fill_uniform(src, rng, -1.0f, 1.0f);
                ggml_tensor * shape = new_tensor(ctx, GGML_TYPE_F32, c.ne);
                ggml_tensor * y = ggml_repeat_back(ctx, src, shape);
                ASSERT_EQ(shape_of(y), c.ne);
                const Values got = tu::compute_all_threads(ctx, y);
                const int64_t n_tiles = c.tiles[0] * c.tiles[1] * c.tiles[2] * c.tiles[3];
                tu::expect_close(got, ref_repeat_back(tu::to_double(src), src_ne, c.ne), 1e-6, 2e-7 * (double) n_tiles,
                                 "repeat_back " + shape_str(src_ne) + " -> " + shape_str(c.ne) + " " +
                                 ggml_type_name(type) + " " + layout_name(layout));
            }
        }
    }
}

// repeat_back is the adjoint of repeat: <repeat(x), y> == <x, repeat_back(y)>.
TEST(RepeatBack, AdjointOfRepeat) {
    std::mt19937 rng(20);
    const Shape ne = {3, 4, 2, 1}, big = {9, 8, 2, 3};
    tu::Ctx ctx;
    ggml_tensor * x = new_tensor(ctx, GGML_TYPE_F32, ne);
    ggml_tensor * y = new_tensor(ctx, GGML_TYPE_F32, big);
    tu::fill_uniform(x, rng);
    tu::fill_uniform(y, rng);
    ggml_tensor * rx = ggml_repeat(ctx, x, y);
    ggml_tensor * by = ggml_repeat_back(ctx, y, x);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, rx);
    ggml_build_forward_expand(gf, by);
    ASSERT_EQ(ggml_graph_compute_with_ctx(ctx, gf, 2), GGML_STATUS_SUCCESS);
    const Values rxv = tu::to_double(rx), yv = tu::to_double(y), xv = tu::to_double(x), byv = tu::to_double(by);
    double lhs = 0.0, rhs = 0.0;
    for (size_t i = 0; i < rxv.size(); i++) lhs += rxv[i] * yv[i];
    for (size_t i = 0; i < xv.size(); i++) rhs += xv[i] * byv[i];
    EXPECT_NEAR(lhs, rhs, 1e-5);
}

// ============================================================================================
// get_rows_back

Values ref_get_rows_back(const Values & grad, const Shape & g_ne, const std::vector<int32_t> & idx, int64_t rows) {
    const Shape ne = {g_ne[0], rows, g_ne[2], g_ne[3]};
    Values r((size_t) tu::n_elements(ne), 0.0);
    for (int64_t i3 = 0; i3 < g_ne[3]; i3++)
        for (int64_t i2 = 0; i2 < g_ne[2]; i2++)
            for (int64_t j = 0; j < g_ne[1]; j++) {
                const int32_t k = idx[flat_index({g_ne[1], g_ne[2], g_ne[3], 1}, j, i2, i3, 0)];
                for (int64_t i0 = 0; i0 < g_ne[0]; i0++) {
                    r[flat_index(ne, i0, k, i2, i3)] += grad[flat_index(g_ne, i0, j, i2, i3)];
                }
            }
    return r;
}

struct GetRowsBackCase {
    int64_t ne0, n, rows, a2, a3;
};

// Indices [n, a2, a3] (a padded I32 view when padded) with repeats, values from rng.
ggml_tensor * new_indices(ggml_context * ctx, const GetRowsBackCase & c, bool padded, std::mt19937 & rng,
                          std::vector<int32_t> & vals) {
    const Shape ne = {c.n, c.a2, c.a3, 1};
    ggml_tensor * idx = padded ? tu::new_padded_view(ctx, GGML_TYPE_I32, ne.data(), 2) : new_tensor(ctx, GGML_TYPE_I32, ne);
    std::uniform_int_distribution<int32_t> d(0, (int32_t) c.rows - 1);
    vals.assign((size_t) (c.n * c.a2 * c.a3), 0);
    for (int32_t & v : vals) v = d(rng);
    if (c.n >= 3) vals[1] = vals[2] = vals[0];  // a repeated index for sure
    set_values(idx, Values(vals.begin(), vals.end()));
    return idx;
}

TEST(GetRowsBack, RepeatedIndicesPlanesAndLayouts) {
    const GetRowsBackCase cases[] = {
        {7, 11, 5, 3, 2},
        {1, 1, 1, 1, 1},
        {33, 40, 3, 1, 1},    // many repeats
        {5, 3, 10, 2, 1},     // most rows stay zero
        {300, 9, 4, 1, 2},    // long rows
        {4, 6, 2, 5, 1},      // fewer rows per plane than threads
    };
    uint32_t seed = 30;
    for (const GetRowsBackCase & c : cases) {
        for (Layout layout : kAllLayouts) {
            for (bool padded_idx : {false, true}) {
                std::mt19937 rng(seed++);
                tu::Ctx ctx;
                const Shape g_ne = {c.ne0, c.n, c.a2, c.a3};
                ggml_tensor * grad = new_input(ctx, GGML_TYPE_F32, g_ne, layout);
                tu::fill_uniform(grad, rng);
                std::vector<int32_t> iv;
                ggml_tensor * idx = new_indices(ctx, c, padded_idx, rng, iv);
                ggml_tensor * like = new_tensor(ctx, GGML_TYPE_F16, {c.ne0, c.rows, c.a2, c.a3});  // only the shape counts
                ggml_tensor * y = ggml_get_rows_back(ctx, grad, idx, like);
                ASSERT_EQ(y->type, GGML_TYPE_F32);
                const Values got = tu::compute_all_threads(ctx, y);
                tu::expect_close(got, ref_get_rows_back(tu::to_double(grad), g_ne, iv, c.rows), 1e-6, 1e-6 * (double) c.n,
                                 "get_rows_back ne0 " + std::to_string(c.ne0) + " n " + std::to_string(c.n) + " rows " +
                                 std::to_string(c.rows) + " " + layout_name(layout) + (padded_idx ? " padded indices" : ""));
            }
        }
    }
}

// get_rows_back is the adjoint of get_rows: <get_rows(a, idx), g> == <a, get_rows_back(g, idx)>.
TEST(GetRowsBack, AdjointOfGetRows) {
    std::mt19937 rng(40);
    const GetRowsBackCase c = {6, 14, 5, 2, 1};
    tu::Ctx ctx;
    ggml_tensor * a = new_tensor(ctx, GGML_TYPE_F32, {c.ne0, c.rows, c.a2, c.a3});
    tu::fill_uniform(a, rng);
    std::vector<int32_t> iv;
    ggml_tensor * idx = new_indices(ctx, c, false, rng, iv);
    ggml_tensor * fwd = ggml_get_rows(ctx, a, idx);
    ggml_tensor * g = ggml_dup_tensor(ctx, fwd);
    tu::fill_uniform(g, rng);
    ggml_tensor * back = ggml_get_rows_back(ctx, g, idx, a);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, fwd);
    ggml_build_forward_expand(gf, back);
    ASSERT_EQ(ggml_graph_compute_with_ctx(ctx, gf, 3), GGML_STATUS_SUCCESS);
    const Values fv = tu::to_double(fwd), gv = tu::to_double(g), av = tu::to_double(a), bv = tu::to_double(back);
    double lhs = 0.0, rhs = 0.0;
    for (size_t i = 0; i < fv.size(); i++) lhs += fv[i] * gv[i];
    for (size_t i = 0; i < av.size(); i++) rhs += av[i] * bv[i];
    EXPECT_NEAR(lhs, rhs, 1e-5);
}

void compute_get_rows_back_with_index(int32_t bad, int n_threads) {
    tu::Ctx ctx;
    ggml_tensor * grad = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 6);
    ggml_set_f32(grad, 1.0f);
    ggml_tensor * idx = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 6);
    for (int i = 0; i < 6; i++) ggml_set_i32_1d(idx, i, i % 3);
    ggml_set_i32_1d(idx, 4, bad);
    ggml_tensor * like = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 3);
    tu::compute(ctx, ggml_get_rows_back(ctx, grad, idx, like), n_threads);
}

TEST(GetRowsBackDeathTest, IndexOutOfRangeAborts) {
    GTEST_FLAG_SET(death_test_style, "fast");  // forks without exec, which also works under qemu-user
    for (int nt : {1, 3}) {
        EXPECT_DEATH(compute_get_rows_back_with_index(3, nt), "get_rows_back: index 3 .*out of range \\[0, 3\\)");
        EXPECT_DEATH(compute_get_rows_back_with_index(-1, nt), "get_rows_back: index -1 .*out of range");
        EXPECT_DEATH(compute_get_rows_back_with_index(1 << 30, nt), "get_rows_back: index .*out of range");
    }
}

// ============================================================================================
// unary_back

const ggml_unary_op kAllUnaryOps[] = {
    GGML_UNARY_OP_ABS,  GGML_UNARY_OP_SGN,     GGML_UNARY_OP_NEG,  GGML_UNARY_OP_STEP, GGML_UNARY_OP_TANH,
    GGML_UNARY_OP_RELU, GGML_UNARY_OP_SIGMOID, GGML_UNARY_OP_GELU, GGML_UNARY_OP_SILU, GGML_UNARY_OP_EXP,
    GGML_UNARY_OP_GELU_ERF,
};
static_assert(sizeof(kAllUnaryOps) / sizeof(kAllUnaryOps[0]) == GGML_UNARY_OP_COUNT, "every unary op is tested");

double sigmoid_d(double x) { return 1.0 / (1.0 + std::exp(-x)); }

constexpr double kGeluC = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kGeluK = 0.044715;

// The forward ops in double (gelu: ggml's tanh approximation).
double unary_forward_d(ggml_unary_op op, double x) {
    switch (op) {
        case GGML_UNARY_OP_ABS:     return std::fabs(x);
        case GGML_UNARY_OP_SGN:     return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0);
        case GGML_UNARY_OP_NEG:     return -x;
        case GGML_UNARY_OP_STEP:    return x > 0 ? 1.0 : 0.0;
        case GGML_UNARY_OP_TANH:    return std::tanh(x);
        case GGML_UNARY_OP_RELU:    return x > 0 ? x : 0.0;
        case GGML_UNARY_OP_SIGMOID: return sigmoid_d(x);
        case GGML_UNARY_OP_GELU:    return 0.5 * x * (1.0 + std::tanh(kGeluC * (x + kGeluK * x * x * x)));
        case GGML_UNARY_OP_SILU:    return x * sigmoid_d(x);
        case GGML_UNARY_OP_EXP:     return std::exp(x);
        case GGML_UNARY_OP_GELU_ERF: return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
        default: ADD_FAILURE() << "unknown unary op"; return 0.0;
    }
}

// f'(x) in closed form (0 at the kinks of abs and relu).
double unary_derivative_d(ggml_unary_op op, double x) {
    switch (op) {
        case GGML_UNARY_OP_ABS:     return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0);
        case GGML_UNARY_OP_SGN:     return 0.0;
        case GGML_UNARY_OP_NEG:     return -1.0;
        case GGML_UNARY_OP_STEP:    return 0.0;
        case GGML_UNARY_OP_TANH:    { const double t = std::tanh(x); return 1.0 - t * t; }
        case GGML_UNARY_OP_RELU:    return x > 0 ? 1.0 : 0.0;
        case GGML_UNARY_OP_SIGMOID: { const double s = sigmoid_d(x); return s * (1.0 - s); }
        case GGML_UNARY_OP_GELU: {
            const double t = std::tanh(kGeluC * (x + kGeluK * x * x * x));
            return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kGeluC * (1.0 + 3.0 * kGeluK * x * x);
        }
        case GGML_UNARY_OP_SILU:    { const double s = sigmoid_d(x); return s * (1.0 + x * (1.0 - s)); }
        case GGML_UNARY_OP_EXP:     return std::exp(x);
        case GGML_UNARY_OP_GELU_ERF: return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
        default: ADD_FAILURE() << "unknown unary op"; return 0.0;
    }
}

TEST(UnaryBack, EveryOpTypesAndLayouts) {
    const Shape shapes[] = {{37, 5, 3, 1}, {300, 2, 1, 2}, {1, 1, 1, 1}};
    uint32_t seed = 50;
    for (ggml_unary_op op : kAllUnaryOps) {
        for (const Shape & ne : shapes) {
            for (ggml_type x_type : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16}) {
                for (Layout layout : {Layout::Contiguous, Layout::Padded, Layout::Transposed}) {
                    std::mt19937 rng(seed++);
                    tu::Ctx ctx;
                    ggml_tensor * x = new_input(ctx, x_type, ne, layout);
                    tu::fill_uniform(x, rng, -4.0f, 4.0f);
                    if (tu::n_elements(ne) > 4) tu::set(x, 0.0, 3);  // the kinks of abs / relu / step
                    // grad in the other layout (and F16 once in a while)
                    const ggml_type g_type = x_type == GGML_TYPE_BF16 ? GGML_TYPE_F16 : GGML_TYPE_F32;
                    ggml_tensor * g = new_input(ctx, g_type, ne, layout == Layout::Contiguous ? Layout::Transposed : Layout::Contiguous);
                    tu::fill_uniform(g, rng, -2.0f, 2.0f);
                    ggml_tensor * y = ggml_unary_back(ctx, g, x, op);
                    ASSERT_EQ(y->type, GGML_TYPE_F32);
                    const Values got = tu::compute_all_threads(ctx, y);
                    const Values xv = tu::to_double(x), gv = tu::to_double(g);
                    Values ref(xv.size());
                    for (size_t i = 0; i < xv.size(); i++) ref[i] = gv[i] * unary_derivative_d(op, xv[i]);
                    tu::expect_close(got, ref, 2e-5, 2e-6,
                                     std::string("unary_back ") + ggml_unary_op_name(op) + " " + shape_str(ne) + " x " +
                                     ggml_type_name(x_type) + " " + layout_name(layout));
                }
            }
        }
    }
}

// silu_back / gelu_back are the named forms of unary_back.
TEST(UnaryBack, NamedBuilders) {
    tu::Ctx ctx;
    ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    ggml_tensor * g = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    EXPECT_EQ(ggml_get_op_params_i32(ggml_silu_back(ctx, g, x), 0), GGML_UNARY_OP_SILU);
    EXPECT_EQ(ggml_get_op_params_i32(ggml_gelu_back(ctx, g, x), 0), GGML_UNARY_OP_GELU);
}

// Far from 0 the derivatives of tanh, sigmoid, silu and gelu are tiny or large: relative
// accuracy must hold there too (1 - tanh^2 or s (1 - s) in float would flush to 0).
TEST(UnaryBack, WideRangeRelativeAccuracy) {
    std::mt19937 rng(60);
    std::uniform_real_distribution<float> mag(5.0f, 40.0f);
    for (ggml_unary_op op : {GGML_UNARY_OP_TANH, GGML_UNARY_OP_SIGMOID, GGML_UNARY_OP_SILU, GGML_UNARY_OP_GELU,
                             GGML_UNARY_OP_EXP}) {
        tu::Ctx ctx;
        const int64_t n = 203;
        ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
        ggml_tensor * g = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
        for (int64_t i = 0; i < n; i++) {
            float v = mag(rng);
            if (op == GGML_UNARY_OP_GELU) v = std::min(v, 12.0f);  // gelu' underflows double's exp beyond
            tu::set(x, i % 2 ? v : -v, i);
            tu::set(g, 1.0, i);
        }
        const Values got = tu::compute_all_threads(ctx, ggml_unary_back(ctx, g, x, op));
        const Values xv = tu::to_double(x);
        Values ref(xv.size());
        for (size_t i = 0; i < xv.size(); i++) {
            ref[i] = unary_derivative_d(op, xv[i]);
            if (op == GGML_UNARY_OP_TANH) ref[i] = 1.0 / (std::cosh(xv[i]) * std::cosh(xv[i]));  // no cancellation
            if (op == GGML_UNARY_OP_SIGMOID) ref[i] = std::exp(-std::fabs(xv[i])) / std::pow(1.0 + std::exp(-std::fabs(xv[i])), 2);
            if (op == GGML_UNARY_OP_GELU) {
                // 0.5 (1 + tanh u) cancels in double for x << 0: the same derivative as
                // s(w) (1 + x (1 - s(w)) w') with w = 2u and s(w), 1 - s(w) from exp(-|w|)
                const double x0 = xv[i], w = 2.0 * kGeluC * (x0 + kGeluK * x0 * x0 * x0);
                const double wp = 2.0 * kGeluC * (1.0 + 3.0 * kGeluK * x0 * x0), e = std::exp(-std::fabs(w));
                const double s = (w >= 0 ? 1.0 : e) / (1.0 + e), sm = (w >= 0 ? e : 1.0) / (1.0 + e);
                ref[i] = s * (1.0 + x0 * sm * wp);
            }
        }
        tu::expect_close(got, ref, 2e-5, 1e-37, std::string("unary_back wide range ") + ggml_unary_op_name(op));
    }
}

// Each derivative against central differences of the forward op in double; and the double
// forward against ggml's forward kernel, so the differences are those of the op ggml computes.
TEST(UnaryBack, MatchesFiniteDifferencesOfForward) {
    std::mt19937 rng(70);
    std::uniform_real_distribution<float> d(-5.0f, 5.0f);
    const int64_t n = 257;
    for (ggml_unary_op op : kAllUnaryOps) {
        tu::Ctx ctx;
        ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
        ggml_tensor * g = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
        for (int64_t i = 0; i < n; i++) {
            float v = d(rng);
            if (std::fabs(v) < 0.01f) v = 0.5f;  // away from the kinks, where differences jump
            tu::set(x, v, i);
            tu::set(g, 1.0, i);
        }
        ggml_tensor * fwd = ggml_unary(ctx, x, op);
        ggml_tensor * back = ggml_unary_back(ctx, g, x, op);
        ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, fwd);
        ggml_build_forward_expand(gf, back);
        ASSERT_EQ(ggml_graph_compute_with_ctx(ctx, gf, 2), GGML_STATUS_SUCCESS);
        const Values xv = tu::to_double(x);
        Values fd(xv.size()), fref(xv.size());
        for (size_t i = 0; i < xv.size(); i++) {
            fd[i] = central_diff([&](const Values & v) { return unary_forward_d(op, v[i]); }, xv, i, 1e-5);
            fref[i] = unary_forward_d(op, xv[i]);
        }
        const std::string name = ggml_unary_op_name(op);
        tu::expect_close(tu::to_double(fwd), fref, 1e-5, 1e-6, "forward " + name + " against its double form");
        tu::expect_close(tu::to_double(back), fd, 2e-5, 2e-6, "unary_back " + name + " against finite differences");
    }
}

// ============================================================================================
// norm_back, rms_norm_back

// dx = r (g - mean(g) - y mean(g y)) (norm), r (g - y mean(g y)) (rms_norm).
Values ref_norm_back(const Values & g, const Values & x, const Shape & ne, double eps, bool rms) {
    Values dx(x.size());
    const int64_t n = ne[0];
    const Values y = tu::ref_norm(x, ne, eps, rms);
    for (int64_t row = 0; row < rows_of(ne); row++) {
        const double * gr = g.data() + row * n;
        const double * yr = y.data() + row * n;
        double mean;
        const double r = tu::ref_norm_scale(x.data() + row * n, n, eps, rms, &mean);
        double mg = 0.0, mgy = 0.0;
        for (int64_t i = 0; i < n; i++) {
            mg += gr[i];
            mgy += gr[i] * yr[i];
        }
        mg = rms ? 0.0 : mg / (double) n;
        mgy /= (double) n;
        for (int64_t i = 0; i < n; i++) dx[row * n + i] = r * (gr[i] - mg - yr[i] * mgy);
    }
    return dx;
}

TEST(NormBack, ShapesLayoutsAndEps) {
    const Shape shapes[] = {{1, 1, 1, 1}, {2, 3, 1, 1}, {7, 3, 1, 1}, {37, 5, 3, 2}, {4099, 3, 1, 1}};
    uint32_t seed = 80;
    for (bool rms : {false, true}) {
        for (const Shape & ne : shapes) {
            for (Layout x_layout : kAllLayouts) {
                for (float eps : {1e-5f, 1e-2f}) {
                    std::mt19937 rng(seed++);
                    tu::Ctx ctx;
                    ggml_tensor * x = new_input(ctx, GGML_TYPE_F32, ne, x_layout);
                    tu::fill_uniform(x, rng, -2.0f, 3.0f);
                    const Layout g_layout = x_layout == Layout::Padded ? Layout::Contiguous : Layout::Padded;
                    ggml_tensor * g = new_input(ctx, GGML_TYPE_F32, ne, g_layout);
                    tu::fill_uniform(g, rng, -1.0f, 1.0f);
                    ggml_tensor * y = rms ? ggml_rms_norm_back(ctx, g, x, eps) : ggml_norm_back(ctx, g, x, eps);
                    const Values got = tu::compute_all_threads(ctx, y);
                    tu::expect_close(got, ref_norm_back(tu::to_double(g), tu::to_double(x), ne, eps, rms), 1e-5, 1e-6,
                                     std::string(rms ? "rms_norm_back " : "norm_back ") + shape_str(ne) + " x " +
                                     layout_name(x_layout) + " eps " + std::to_string(eps));
                }
            }
        }
    }
}

// A large common offset: the mean must be taken in double for the deviations to survive.
TEST(NormBack, LargeMeanSmallSpread) {
    std::mt19937 rng(85);
    const Shape ne = {1537, 3, 1, 1};
    tu::Ctx ctx;
    ggml_tensor * x = new_tensor(ctx, GGML_TYPE_F32, ne);
    tu::fill_uniform(x, rng, 1000.0f, 1000.5f);
    ggml_tensor * g = new_tensor(ctx, GGML_TYPE_F32, ne);
    tu::fill_uniform(g, rng);
    const Values xv = tu::to_double(x), gv = tu::to_double(g);
    // the gradient scales with 1/std (~7 here)
    tu::expect_close(tu::compute_all_threads(ctx, ggml_norm_back(ctx, g, x, 1e-9f)), ref_norm_back(gv, xv, ne, 1e-9, false),
                     1e-5, 1e-5, "norm_back with mean 1000");
    tu::expect_close(tu::compute_all_threads(ctx, ggml_rms_norm_back(ctx, g, x, 1e-9f)), ref_norm_back(gv, xv, ne, 1e-9, true),
                     1e-5, 1e-8, "rms_norm_back with mean 1000");
}

// The formulas are the gradients of sum(g * norm(x)): central differences of the forward.
TEST(NormBack, MatchesFiniteDifferencesOfForward) {
    std::mt19937 rng(86);
    for (bool rms : {false, true}) {
        const Shape ne = {9, 2, 1, 1};
        tu::Ctx ctx;
        ggml_tensor * x = new_tensor(ctx, GGML_TYPE_F32, ne);
        ggml_tensor * g = new_tensor(ctx, GGML_TYPE_F32, ne);
        tu::fill_uniform(x, rng, -2.0f, 2.0f);
        tu::fill_uniform(g, rng);
        const double eps = 1e-3;
        const Values got = tu::compute_all_threads(ctx, rms ? ggml_rms_norm_back(ctx, g, x, (float) eps)
                                                            : ggml_norm_back(ctx, g, x, (float) eps));
        const Values xv = tu::to_double(x), gv = tu::to_double(g);
        Values fd(xv.size());
        for (size_t j = 0; j < xv.size(); j++) {
            fd[j] = central_diff([&](const Values & v) {
                const Values y = tu::ref_norm(v, ne, eps, rms);
                double loss = 0.0;
                for (size_t i = 0; i < y.size(); i++) loss += gv[i] * y[i];
                return loss;
            }, xv, j, 1e-6);
        }
        tu::expect_close(got, fd, 1e-5, 1e-6, rms ? "rms_norm_back vs finite differences" : "norm_back vs finite differences");
    }
}

// ============================================================================================
// diag_mask_zero

TEST(DiagMaskZero, AnyNPastLayoutsAndInPlace) {
    const Shape shapes[] = {{1, 1, 1, 1}, {7, 5, 3, 1}, {13, 13, 2, 2}, {5, 9, 1, 1}};
    uint32_t seed = 90;
    for (const Shape & ne : shapes) {
        for (int n_past : {0, 2, -1, -3, 20}) {
            for (Layout layout : {Layout::Contiguous, Layout::Padded, Layout::Transposed}) {
                for (bool inplace : {false, true}) {
                    std::mt19937 rng(seed++);
                    tu::Ctx ctx;
                    ggml_tensor * x = new_input(ctx, GGML_TYPE_F32, ne, layout);
                    tu::fill_uniform(x, rng);
                    const Values xv = tu::to_double(x);
                    ggml_tensor * y;
                    if (inplace) {
                        // dst over src, as the planner may place it (the op is IN_PLACE)
                        y = ggml_diag_mask_inf_inplace(ctx, x, n_past);
                        y->op = GGML_OP_DIAG_MASK_ZERO;
                    } else {
                        y = ggml_diag_mask_zero(ctx, x, n_past);
                    }
                    const Values got = inplace ? compute_inplace_all_threads(ctx, y, x, xv) : tu::compute_all_threads(ctx, y);
                    Values ref = xv;
                    tu::for_each(x, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                        if (i0 > n_past + i1) ref[flat_index(ne, i0, i1, i2, i3)] = 0.0;
                    });
                    tu::expect_close(got, ref, 0.0, 0.0,
                                     "diag_mask_zero " + shape_str(ne) + " n_past " + std::to_string(n_past) + " " +
                                     layout_name(layout) + (inplace ? " in place" : ""));
                }
            }
        }
    }
}

// Through the graph planner, which puts the result over its intermediate source t (the op is
// IN_PLACE): the kept columns are then left where they are.
TEST(DiagMaskZero, PlannedGraph) {
    const Shape ne = {11, 11, 3, 1};
    std::mt19937 rng(95);
    tu::Ctx ctx(16u << 20, true);
    ggml_tensor * x = new_tensor(ctx, GGML_TYPE_F32, ne);
    ggml_set_input(x);
    ggml_tensor * t = ggml_scale(ctx, x, 2.0f);
    ggml_tensor * y = ggml_diag_mask_zero(ctx, t, 1);
    ggml_set_output(y);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, y);
    ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    ASSERT_TRUE(ggml_gallocr_alloc_graph(galloc, gf));
    tu::fill_uniform(x, rng);
    const Values xv = tu::to_double(x);
    for (int nt = 1; nt <= 3; nt++) {
        ASSERT_EQ(ggml_graph_compute_with_ctx(ctx, gf, nt), GGML_STATUS_SUCCESS);
        Values ref = xv;
        tu::for_each(x, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
            double & r = ref[flat_index(ne, i0, i1, i2, i3)];
            r = i0 > 1 + i1 ? 0.0 : 2.0 * r;
        });
        tu::expect_close(tu::to_double(y), ref, 0.0, 0.0, "diag_mask_zero in a planned graph");
    }
    ggml_gallocr_free(galloc);
}

// ============================================================================================
// soft_max_back

Values ref_soft_max_back(const Values & g, const Values & y, const Shape & ne, double scale) {
    Values dx(y.size());
    for (int64_t row = 0; row < rows_of(ne); row++) {
        double dot = 0.0;
        for (int64_t i = 0; i < ne[0]; i++) dot += g[row * ne[0] + i] * y[row * ne[0] + i];
        for (int64_t i = 0; i < ne[0]; i++) {
            dx[row * ne[0] + i] = scale * y[row * ne[0] + i] * (g[row * ne[0] + i] - dot);
        }
    }
    return dx;
}

TEST(SoftMaxBack, ShapesLayoutsAndScale) {
    const Shape shapes[] = {{1, 1, 1, 1}, {7, 3, 1, 1}, {37, 5, 3, 2}, {1000, 3, 1, 1}};
    uint32_t seed = 100;
    for (const Shape & ne : shapes) {
        for (Layout g_layout : kAllLayouts) {
            for (float scale : {1.0f, 0.35f}) {
                for (float max_bias : {0.0f, 8.0f}) {
                    std::mt19937 rng(seed++);
                    tu::Ctx ctx;
                    ggml_tensor * g = new_input(ctx, GGML_TYPE_F32, ne, g_layout);
                    tu::fill_uniform(g, rng, -1.0f, 1.0f);
                    const Layout y_layout = g_layout == Layout::Transposed ? Layout::Padded : Layout::Transposed;
                    ggml_tensor * y = new_input(ctx, GGML_TYPE_F32, ne, y_layout);
                    Values logits((size_t) tu::n_elements(ne));
                    std::uniform_real_distribution<double> d(-4.0, 4.0);
                    for (double & v : logits) v = d(rng);
                    set_values(y, tu::ref_soft_max(logits, ne));
                    ggml_tensor * out = ggml_soft_max_ext_back(ctx, g, y, scale, max_bias);
                    const Values got = tu::compute_all_threads(ctx, out);
                    tu::expect_close(got, ref_soft_max_back(tu::to_double(g), tu::to_double(y), ne, scale), 1e-5, 2e-7,
                                     "soft_max_back " + shape_str(ne) + " g " + layout_name(g_layout) + " scale " +
                                     std::to_string(scale) + " max_bias " + std::to_string(max_bias));
                }
            }
        }
    }
}

// The formula is the gradient of sum(g * softmax(x * scale + slope * mask)) with respect to x,
// whatever the mask and slope: central differences of the forward.
TEST(SoftMaxBack, MatchesFiniteDifferencesOfForward) {
    std::mt19937 rng(110);
    const Shape ne = {8, 3, 1, 1};
    const double scale = 0.6, slope = 0.7;
    tu::Ctx ctx;
    Values x((size_t) tu::n_elements(ne)), mask((size_t) tu::n_elements(ne));
    std::uniform_real_distribution<double> d(-2.0, 2.0);
    for (double & v : x) v = d(rng);
    for (double & v : mask) v = d(rng);
    Values slope_mask = mask;  // slope * mask: what the softmax adds to x * scale
    for (double & v : slope_mask) v *= slope;
    ggml_tensor * g = new_tensor(ctx, GGML_TYPE_F32, ne);
    ggml_tensor * y = new_tensor(ctx, GGML_TYPE_F32, ne);
    tu::fill_uniform(g, rng);
    set_values(y, tu::ref_soft_max(x, ne, scale, &slope_mask, ne));
    const Values got = tu::compute_all_threads(ctx, ggml_soft_max_ext_back(ctx, g, y, (float) scale, 0.0f));
    const Values gv = tu::to_double(g);
    Values fd(x.size());
    for (size_t j = 0; j < x.size(); j++) {
        fd[j] = central_diff([&](const Values & v) {
            const Values s = tu::ref_soft_max(v, ne, scale, &slope_mask, ne);
            double loss = 0.0;
            for (size_t i = 0; i < s.size(); i++) loss += gv[i] * s[i];
            return loss;
        }, x, j, 1e-6);
    }
    tu::expect_close(got, fd, 1e-5, 1e-6, "soft_max_back vs finite differences");
}

// ============================================================================================
// flash_attn_back

struct AttnBackCase {
    int64_t D, Dv, n_q, n_kv, H, Hkv, B3;
    ggml_type kv_type;
    bool causal, q_permuted;
    float max_bias, softcap;
};

// Gradients of q, k and v against the analytic double reference (test-ref.h), with several
// query blocks and groups, grouped heads, a queries-after-cache causal mask and F16 keys.
TEST(FlashAttnBack, ShapesMasksAndHeads) {
    const AttnBackCase cases[] = {
        {8, 8, 5, 5, 4, 2, 1, GGML_TYPE_F32, true, true, 0, 0},
        {64, 64, 300, 300, 4, 2, 1, GGML_TYPE_F32, true, true, 0, 0},
        {32, 48, 130, 170, 6, 3, 2, GGML_TYPE_F16, true, false, 0, 0},
        {24, 24, 70, 50, 2, 2, 1, GGML_TYPE_F32, false, false, 0, 0},
        {16, 16, 66, 66, 4, 1, 1, GGML_TYPE_F32, true, false, 4.0f, 0},
        {16, 16, 67, 67, 2, 1, 1, GGML_TYPE_F32, true, true, 0, 3.0f},
    };
    uint32_t seed = 500;
    for (const AttnBackCase & c : cases) {
        std::mt19937 rng(seed++);
        tu::Ctx ctx;
        const Shape qne = {c.D, c.n_q, c.H, c.B3}, kne = {c.D, c.n_kv, c.Hkv, c.B3}, vne = {c.Dv, c.n_kv, c.Hkv, c.B3};
        const Shape one = {c.Dv, c.H, c.n_q, c.B3}, mne = {c.n_kv, c.n_q, 1, 1};
        ggml_tensor * q = new_input(ctx, GGML_TYPE_F32, qne, c.q_permuted ? Layout::Permuted12 : Layout::Contiguous);
        ggml_tensor * k = new_tensor(ctx, c.kv_type, kne);
        ggml_tensor * v = new_tensor(ctx, c.kv_type, vne);
        ggml_tensor * g = new_tensor(ctx, GGML_TYPE_F32, one);
        for (ggml_tensor * t : {q, k, v, g}) tu::fill_uniform(t, rng);
        ggml_tensor * mask = nullptr;
        Values mv;
        if (c.causal) {
            mask = new_tensor(ctx, GGML_TYPE_F32, mne);
            tu::for_each(mask, [&](int64_t j, int64_t i, int64_t, int64_t) {
                const int64_t past = c.n_kv - c.n_q;
                tu::set(mask, j > i + past ? -kInf : (c.max_bias > 0 ? -(double) (i + past - j) : 0.0), j, i);
            });
            mv = tu::to_double(mask);
        }
        const float scale = 1.0f / std::sqrt((float) c.D);
        ggml_tensor * out = ggml_flash_attn_back(ctx, q, k, v, mask, g, scale, c.max_bias, c.softcap);
        const Values got = tu::compute_all_threads(ctx, out);
        Values dq, dk, dv;
        const Values gv = tu::to_double(g);
        ref_flash_attn(tu::to_double(q), qne, tu::to_double(k), kne, tu::to_double(v), vne, mask ? &mv : nullptr, mne, scale,
                       c.max_bias, c.softcap, &gv, &dq, &dk, &dv);
        Values ref = dq;
        ref.insert(ref.end(), dk.begin(), dk.end());
        ref.insert(ref.end(), dv.begin(), dv.end());
        const std::string what = "flash_attn_back D " + std::to_string(c.D) + " n_q " + std::to_string(c.n_q) + " n_kv " +
                                 std::to_string(c.n_kv) + " H " + std::to_string(c.H) + "/" + std::to_string(c.Hkv) + " " +
                                 ggml_type_name(c.kv_type) + (c.causal ? " causal" : "") + " max_bias " +
                                 std::to_string(c.max_bias) + " softcap " + std::to_string(c.softcap);
        tu::expect_close(got, ref, 1e-4, 1e-5, what);
    }
}

// ============================================================================================
// rope_back

ggml_tensor * rope_back(ggml_context * ctx, ggml_tensor * g, const tu::RopeInputs & in, const RopeCase & c) {
    return ggml_rope_ext_back(ctx, g, in.pos, in.ff, c.n_dims, c.mode, c.n_ctx_orig, c.freq_base, c.freq_scale,
                              c.ext_factor, c.attn_factor, c.beta_fast, c.beta_slow);
}

TEST(RopeBack, ModesYarnFreqFactorsTypesAndLayouts) {
    std::mt19937 rng(120);
    uint32_t seed = 121;
    for (int mode : {GGML_ROPE_TYPE_NORMAL, GGML_ROPE_TYPE_NEOX}) {
        for (float ext_factor : {0.0f, 1.0f, 0.5f}) {
            for (bool with_ff : {false, true}) {
                for (int dims_case = 0; dims_case < 2; dims_case++) {
                    RopeCase c;
                    c.mode = mode;
                    c.n_dims = dims_case == 0 ? 64 : 10;
                    const int64_t head = dims_case == 0 ? 80 : 14;
                    c.n_ctx_orig = 256;
                    c.freq_scale = ext_factor != 0.0f ? 0.25f : 0.5f;
                    c.ext_factor = ext_factor;
                    c.attn_factor = 0.8f;
                    if (with_ff) c.freq_factors = random_freq_factors(c.n_dims, rng);
                    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16}) {
                        for (Layout layout : kAllLayouts) {
                            if (type != GGML_TYPE_F32 && (layout == Layout::Permuted12 || dims_case == 0)) continue;
                            std::mt19937 r(seed++);
                            tu::Ctx ctx;
                            const Shape ne = {head, 3, 7, 2};
                            ggml_tensor * g = new_input(ctx, type, ne, layout);
                            tu::fill_uniform(g, r, -1.0f, 1.0f);
                            const tu::RopeInputs in = tu::make_rope_inputs(ctx, c, ne[2], r);
                            ggml_tensor * y = rope_back(ctx, g, in, c);
                            ASSERT_EQ(y->type, type);
                            const Values got = tu::compute_all_threads(ctx, y);
                            const double rtol = type == GGML_TYPE_F32 ? 1e-5 : tu::type_rtol(type);
                            const double atol = type == GGML_TYPE_F32 ? 3e-6 : tu::type_rtol(type) * 0.5;
                            // dx = R(-theta) dy * mscale: the transpose of the forward rotation.
                            const Values ref = tu::ref_rope(tu::to_double(g), ne, in.pos_vals, in.stored, /*inverse=*/true);
                            tu::expect_close(got, ref, rtol, atol,
                                             "rope_back " + rope_case_str(c) + " " + ggml_type_name(type) + " " +
                                             layout_name(layout));
                        }
                    }
                }
            }
        }
    }
}

// rope_back(rope(x)) == x * mscale^2: the inverse rotation undoes the forward one (mscale 1
// without YaRN and with attn_factor 1).
TEST(RopeBack, UndoesRope) {
    std::mt19937 rng(130);
    uint32_t seed = 131;
    for (int mode : {GGML_ROPE_TYPE_NORMAL, GGML_ROPE_TYPE_NEOX}) {
        for (float ext_factor : {0.0f, 1.0f}) {
            for (bool with_ff : {false, true}) {
                RopeCase c;
                c.mode = mode;
                c.n_dims = 32;
                c.n_ctx_orig = 128;
                c.freq_scale = 0.25f;
                c.ext_factor = ext_factor;
                c.attn_factor = 1.0f;
                if (with_ff) c.freq_factors = random_freq_factors(c.n_dims, rng);
                std::mt19937 r(seed++);
                tu::Ctx ctx;
                const Shape ne = {40, 4, 9, 1};
                ggml_tensor * x = new_tensor(ctx, GGML_TYPE_F32, ne);
                tu::fill_uniform(x, r, -1.0f, 1.0f);
                const tu::RopeInputs in = tu::make_rope_inputs(ctx, c, ne[2], r);
                ggml_tensor * y = ggml_rope_ext(ctx, x, in.pos, in.ff, c.n_dims, c.mode, c.n_ctx_orig, c.freq_base,
                                                c.freq_scale, c.ext_factor, c.attn_factor, c.beta_fast, c.beta_slow);
                const Values got = tu::compute_all_threads(ctx, rope_back(ctx, y, in, c));
                double theta, mscale;
                tu::ref_rope_angle(in.stored, 0.0, 0, &theta, &mscale);
                Values ref = tu::to_double(x);
                for (size_t i = 0; i < ref.size(); i++) {
                    if ((int64_t) (i % ne[0]) < c.n_dims) ref[i] *= mscale * mscale;  // copied dims stay as they are
                }
                tu::expect_close(got, ref, 1e-5, 1e-6, "rope_back(rope(x)) " + rope_case_str(c));
            }
        }
    }
}

// ============================================================================================
// cross_entropy_loss_back

Values ref_cross_entropy_loss_back(const Values & a, const Values & b, const Shape & ne, double grad) {
    const Values s = tu::ref_soft_max(a, ne);
    Values d(a.size());
    const double k = grad / (double) rows_of(ne);
    for (size_t i = 0; i < a.size(); i++) d[i] = (s[i] - b[i]) * k;
    return d;
}

double ref_cross_entropy_loss(const Values & a, const Values & b, const Shape & ne) {
    const Values s = tu::ref_soft_max(a, ne);
    double loss = 0.0;
    for (size_t i = 0; i < a.size(); i++) loss -= b[i] * std::log(s[i]);
    return loss / (double) rows_of(ne);
}

// Random target probabilities: each row sums to 1.
Values random_targets(const Shape & ne, std::mt19937 & rng) {
    std::uniform_real_distribution<double> d(0.0, 1.0);
    Values b((size_t) tu::n_elements(ne));
    for (int64_t row = 0; row < rows_of(ne); row++) {
        double sum = 0.0;
        for (int64_t i = 0; i < ne[0]; i++) sum += (b[row * ne[0] + i] = d(rng));
        for (int64_t i = 0; i < ne[0]; i++) b[row * ne[0] + i] /= sum;
    }
    return b;
}

TEST(CrossEntropyLossBack, ShapesLayoutsAndGrad) {
    const Shape shapes[] = {{1, 1, 1, 1}, {7, 3, 1, 1}, {37, 5, 3, 2}, {1000, 4, 1, 1}};
    uint32_t seed = 140;
    for (const Shape & ne : shapes) {
        for (Layout layout : kAllLayouts) {
            for (float grad_val : {1.0f, 0.7f}) {
                for (float offset : {0.0f, 60.0f}) {
                    std::mt19937 rng(seed++);
                    tu::Ctx ctx;
                    ggml_tensor * a = new_input(ctx, GGML_TYPE_F32, ne, layout);
                    tu::fill_uniform(a, rng, -3.0f + offset, 3.0f + offset);
                    ggml_tensor * b = new_input(ctx, GGML_TYPE_F32, ne, layout == Layout::Padded ? Layout::Transposed : Layout::Padded);
                    set_values(b, random_targets(ne, rng));
                    ggml_tensor * grad = ggml_new_f32(ctx, grad_val);
                    const Values got = tu::compute_all_threads(ctx, ggml_cross_entropy_loss_back(ctx, grad, a, b));
                    const double k = grad_val / (double) rows_of(ne);
                    tu::expect_close(got, ref_cross_entropy_loss_back(tu::to_double(a), tu::to_double(b), ne, grad_val),
                                     1e-5, 2e-7 * k,
                                     "cross_entropy_loss_back " + shape_str(ne) + " " + layout_name(layout) + " grad " +
                                     std::to_string(grad_val) + " offset " + std::to_string(offset));
                }
            }
        }
    }
}

// The formula is grad times the gradient of the mean cross entropy: central differences of the
// forward in double; and ggml's forward kernel agrees with that double forward.
TEST(CrossEntropyLossBack, MatchesFiniteDifferencesOfForward) {
    std::mt19937 rng(150);
    const Shape ne = {6, 4, 1, 1};
    tu::Ctx ctx;
    ggml_tensor * a = new_tensor(ctx, GGML_TYPE_F32, ne);
    tu::fill_uniform(a, rng, -2.0f, 2.0f);
    ggml_tensor * b = new_tensor(ctx, GGML_TYPE_F32, ne);
    set_values(b, random_targets(ne, rng));
    ggml_tensor * loss = ggml_cross_entropy_loss(ctx, a, b);
    ggml_tensor * back = ggml_cross_entropy_loss_back(ctx, ggml_new_f32(ctx, 1.5f), a, b);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, loss);
    ggml_build_forward_expand(gf, back);
    ASSERT_EQ(ggml_graph_compute_with_ctx(ctx, gf, 3), GGML_STATUS_SUCCESS);
    const Values av = tu::to_double(a), bv = tu::to_double(b);
    EXPECT_NEAR(tu::get(loss, 0), ref_cross_entropy_loss(av, bv, ne), 1e-6);
    Values fd(av.size());
    for (size_t j = 0; j < av.size(); j++) {
        fd[j] = 1.5 * central_diff([&](const Values & v) { return ref_cross_entropy_loss(v, bv, ne); }, av, j, 1e-6);
    }
    tu::expect_close(tu::to_double(back), fd, 1e-5, 1e-7, "cross_entropy_loss_back vs finite differences");
}

// ============================================================================================
// optimizer steps

struct AdamW {
    double alpha = 1e-2, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, wd = 0.1;
};

// Runs `steps` AdamW (or SGD) steps through one graph with n_threads, new gradients each step;
// checks every step against the formulas of ggml.h in double. Returns the final a, m, v bytes.
std::vector<uint8_t> run_optimizer(bool adamw, const Shape & ne, int steps, int n_threads) {
    const AdamW h;
    const double sgd_alpha = 0.1, sgd_wd = 0.01;
    std::mt19937 rng(160);  // the same data for every thread count
    tu::Ctx ctx;
    ggml_tensor * a = new_tensor(ctx, GGML_TYPE_F32, ne);
    ggml_tensor * g = new_tensor(ctx, GGML_TYPE_F32, ne);
    ggml_tensor * m = new_tensor(ctx, GGML_TYPE_F32, ne);
    ggml_tensor * v = new_tensor(ctx, GGML_TYPE_F32, ne);
    ggml_tensor * p = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, adamw ? 7 : 2);
    tu::fill_uniform(a, rng, -1.0f, 1.0f);
    ggml_set_zero(m);
    ggml_set_zero(v);
    ggml_tensor * out = adamw ? ggml_opt_step_adamw(ctx, a, g, m, v, p) : ggml_opt_step_sgd(ctx, a, g, p);
    EXPECT_EQ(out->data, a->data);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);

    Values ar = tu::to_double(a), mr(ar.size(), 0.0), vr(ar.size(), 0.0);
    for (int t = 1; t <= steps; t++) {
        tu::fill_uniform(g, rng, -1.0f, 1.0f);
        if (t == 3) tu::set(g, 0.0, 0);  // a zero gradient: v stays tiny, eps matters
        const Values gv = tu::to_double(g);
        if (adamw) {
            const double beta1h = 1.0 / (1.0 - std::pow(h.beta1, t)), beta2h = 1.0 / (1.0 - std::pow(h.beta2, t));
            const double pv[7] = {h.alpha, h.beta1, h.beta2, h.eps, h.wd, beta1h, beta2h};
            for (int i = 0; i < 7; i++) tu::set(p, pv[i], i);
        } else {
            tu::set(p, sgd_alpha, 0);
            tu::set(p, sgd_wd, 1);
        }
        const Values pv = tu::to_double(p);  // as stored (float)
        EXPECT_EQ(ggml_graph_compute_with_ctx(ctx, gf, n_threads), GGML_STATUS_SUCCESS);
        for (size_t i = 0; i < ar.size(); i++) {
            if (adamw) {
                mr[i] = pv[1] * mr[i] + (1.0 - pv[1]) * gv[i];
                vr[i] = pv[2] * vr[i] + (1.0 - pv[2]) * gv[i] * gv[i];
                const double mh = mr[i] * pv[5], vh = std::sqrt(vr[i] * pv[6]) + pv[3];
                ar[i] = ar[i] * (1.0 - pv[0] * pv[4]) - pv[0] * mh / vh;
            } else {
                ar[i] = ar[i] * (1.0 - pv[0] * pv[1]) - pv[0] * gv[i];
            }
        }
        const std::string what = std::string(adamw ? "adamw" : "sgd") + " step " + std::to_string(t) + " " +
                                 shape_str(ne) + " threads " + std::to_string(n_threads);
        tu::expect_close(tu::to_double(a), ar, 1e-5, 1e-6, what + " parameter");
        if (adamw) {
            // m = beta1 m + (1 - beta1) g cancels when m and g differ in sign: float's error is
            // relative to the terms (|m|, |g| <= 1), not to the result
            tu::expect_close(tu::to_double(m), mr, 1e-5, 1e-7, what + " m");
            tu::expect_close(tu::to_double(v), vr, 1e-5, 1e-12, what + " v");
        }
    }
    std::vector<uint8_t> bytes = tu::bytes_of(a);
    if (adamw) {
        const std::vector<uint8_t> mb = tu::bytes_of(m), vb = tu::bytes_of(v);
        bytes.insert(bytes.end(), mb.begin(), mb.end());
        bytes.insert(bytes.end(), vb.begin(), vb.end());
    }
    return bytes;
}

TEST(OptStep, AdamWSeveralStepsAndThreads) {
    for (const Shape & ne : {Shape{37, 5, 3, 1}, Shape{1, 1, 1, 1}, Shape{4099, 1, 1, 1}}) {
        const std::vector<uint8_t> first = run_optimizer(true, ne, 6, 1);
        for (int nt : {2, 3}) {
            EXPECT_TRUE(run_optimizer(true, ne, 6, nt) == first) << "adamw with " << nt << " threads differs from 1 thread";
        }
    }
}

TEST(OptStep, SgdSeveralStepsAndThreads) {
    for (const Shape & ne : {Shape{37, 5, 3, 1}, Shape{1, 1, 1, 1}, Shape{4099, 1, 1, 1}}) {
        const std::vector<uint8_t> first = run_optimizer(false, ne, 4, 1);
        for (int nt : {2, 3}) {
            EXPECT_TRUE(run_optimizer(false, ne, 4, nt) == first) << "sgd with " << nt << " threads differs from 1 thread";
        }
    }
}

}  // namespace
