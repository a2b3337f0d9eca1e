// test-ops-basic.cpp - the elementwise, unary, reduction and copy kernels against naive
// double-precision references: random data, odd sizes, non-contiguous (padded, transposed,
// permuted) operands, every broadcast pattern, F32/F16/BF16, in-place variants, and 1/2/3
// threads bit-identical.
#include "test-ref.h"

#include "ggml-cpu/kernels.h"
#include "ggml-cpu/ops-common.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

namespace {

using namespace tu;  // test-util.h and test-ref.h: Shape, Values, Layout, new_input, references

const ggml_type kFloatTypes[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16};
const Shape kShapes[] = {{7, 5, 3, 2}, {33, 1, 4, 1}, {1, 1, 1, 1}, {16, 3, 2, 1}, {300, 2, 1, 3}};
const Layout kLayouts[] = {Layout::Contiguous, Layout::Padded, Layout::Transposed, Layout::PermutedAll};

// Fills t with uniform values in [lo, hi) and returns them as stored (rounded to t's type).
Values fill(ggml_tensor * t, std::mt19937 & rng, float lo = -1.0f, float hi = 1.0f) {
    tu::fill_uniform(t, rng, lo, hi);
    return tu::to_double(t);
}

Values round_all(ggml_type type, Values v) {
    for (double & x : v) x = round_to(type, x);
    return v;
}

// ==== binary elementwise ======================================================================
enum class BinOp { Add, Sub, Mul, Div };
const BinOp kBinOps[] = {BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div};

const char * binop_name(BinOp op) {
    switch (op) {
        case BinOp::Add: return "add";
        case BinOp::Sub: return "sub";
        case BinOp::Mul: return "mul";
        case BinOp::Div: return "div";
    }
    return "?";
}

double binop_ref(BinOp op, double a, double b) {
    switch (op) {
        case BinOp::Add: return a + b;
        case BinOp::Sub: return a - b;
        case BinOp::Mul: return a * b;
        case BinOp::Div: return a / b;
    }
    return 0;
}

ggml_tensor * build_binop(ggml_context * ctx, BinOp op, ggml_tensor * a, ggml_tensor * b, bool inplace) {
    switch (op) {
        case BinOp::Add: return inplace ? ggml_add_inplace(ctx, a, b) : ggml_add(ctx, a, b);
        case BinOp::Sub: return inplace ? ggml_sub_inplace(ctx, a, b) : ggml_sub(ctx, a, b);
        case BinOp::Mul: return inplace ? ggml_mul_inplace(ctx, a, b) : ggml_mul(ctx, a, b);
        case BinOp::Div: return inplace ? ggml_div_inplace(ctx, a, b) : ggml_div(ctx, a, b);
    }
    return nullptr;
}

// ref[i] = a[i] op b[i mod ne1] in double.
Values binop_reference(BinOp op, const Shape & ne0, const Values & a, const Shape & ne1, const Values & b) {
    Values ref(a.size());
    for (int64_t i3 = 0; i3 < ne0[3]; i3++)
        for (int64_t i2 = 0; i2 < ne0[2]; i2++)
            for (int64_t i1 = 0; i1 < ne0[1]; i1++)
                for (int64_t i0 = 0; i0 < ne0[0]; i0++) {
                    const int64_t k = flat_index(ne0, i0, i1, i2, i3);
                    const int64_t kb = flat_index(ne1, i0 % ne1[0], i1 % ne1[1], i2 % ne1[2], i3 % ne1[3]);
                    ref[k] = binop_ref(op, a[k], b[kb]);
                }
    return ref;
}

struct BinCase {
    BinOp op;
    ggml_type t0, t1;
    Shape ne0, ne1;
    Layout l0 = Layout::Contiguous, l1 = Layout::Contiguous;
    bool inplace = false;
};

void run_binop(const BinCase & c, std::mt19937 & rng) {
    SCOPED_TRACE(std::string(binop_name(c.op)) + " " + ggml_type_name(c.t0) + shape_str(c.ne0) + " " + layout_name(c.l0) +
                 " by " + ggml_type_name(c.t1) + shape_str(c.ne1) + " " + layout_name(c.l1) + (c.inplace ? " in place" : ""));
    tu::Ctx ctx(16u << 20);
    ggml_tensor * a = new_input(ctx, c.t0, c.ne0, c.l0);
    ggml_tensor * b = new_input(ctx, c.t1, c.ne1, c.l1);
    const Values av = fill(a, rng, -2.0f, 2.0f);
    // divisors kept away from zero
    const Values bv = c.op == BinOp::Div ? fill(b, rng, 0.5f, 2.0f) : fill(b, rng, -2.0f, 2.0f);
    ggml_tensor * out = build_binop(ctx, c.op, a, b, c.inplace);
    ASSERT_EQ(out->type, c.t0);
    const Values got = c.inplace ? compute_inplace_all_threads(ctx, out, a, av) : tu::compute_all_threads(ctx, out);
    if (c.inplace) {
        EXPECT_EQ(out->data, a->data);
    }
    tu::expect_close(got, binop_reference(c.op, c.ne0, av, c.ne1, bv), tu::type_rtol(c.t0), 1e-6);
}

// F32 and src0's own type are the usual src1 types; the kernels take any float type.
std::vector<ggml_type> src1_types(ggml_type) {
    return {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16};
}

TEST(Binary, EveryBroadcastPatternAndType) {
    std::mt19937 rng(1);
    for (BinOp op : kBinOps)
        for (ggml_type t0 : kFloatTypes)
            for (ggml_type t1 : src1_types(t0))
                for (const Shape & ne0 : kShapes)
                    for (int mask = 0; mask < 16; mask++) {
                        Shape ne1 = ne0;
                        for (int d = 0; d < 4; d++) if (mask & (1 << d)) ne1[d] = 1;
                        run_binop({op, t0, t1, ne0, ne1}, rng);
                    }
}

// src1 dims that divide src0's without being 1 (partial row repeats included).
TEST(Binary, PartialBroadcast) {
    std::mt19937 rng(2);
    const std::pair<Shape, Shape> cases[] = {
        {{12, 6, 4, 2}, {3, 2, 1, 2}}, {{12, 6, 4, 2}, {4, 3, 2, 1}}, {{12, 6, 4, 2}, {6, 1, 4, 1}},
        {{300, 4, 1, 1}, {100, 2, 1, 1}}, {{9, 9, 1, 1}, {3, 9, 1, 1}},
    };
    for (BinOp op : kBinOps)
        for (ggml_type t0 : kFloatTypes)
            for (const auto & c : cases) run_binop({op, t0, GGML_TYPE_F32, c.first, c.second}, rng);
}

TEST(Binary, NonContiguousOperands) {
    std::mt19937 rng(3);
    const Shape ne0 = {7, 5, 3, 2};
    for (BinOp op : kBinOps)
        for (ggml_type t0 : kFloatTypes)
            for (ggml_type t1 : src1_types(t0))
                for (Layout l0 : kLayouts)
                    for (Layout l1 : kLayouts)
                        for (int mask : {0, 1, 6, 15}) {
                            Shape ne1 = ne0;
                            for (int d = 0; d < 4; d++) if (mask & (1 << d)) ne1[d] = 1;
                            run_binop({op, t0, t1, ne0, ne1, l0, l1}, rng);
                        }
}

TEST(Binary, InPlace) {
    std::mt19937 rng(4);
    for (BinOp op : kBinOps)
        for (ggml_type t0 : kFloatTypes)
            for (Layout l0 : kLayouts)
                for (const Shape & ne1 : {Shape{7, 5, 3, 2}, Shape{7, 1, 3, 1}, Shape{1, 5, 1, 2}}) {
                    run_binop({op, t0, GGML_TYPE_F32, {7, 5, 3, 2}, ne1, l0, Layout::Contiguous, true}, rng);
                }
}

// Long rows exercise the vectorized loops (and their tails) of the all-F32 path.
TEST(Binary, LongRows) {
    std::mt19937 rng(5);
    for (BinOp op : kBinOps)
        for (ggml_type t0 : kFloatTypes) {
            run_binop({op, t0, GGML_TYPE_F32, {4099, 7, 1, 1}, {4099, 1, 1, 1}}, rng);
            run_binop({op, t0, t0, {1031, 3, 2, 1}, {1031, 3, 2, 1}}, rng);
            run_binop({op, t0, GGML_TYPE_F32, {1031, 3, 2, 1}, {1, 3, 1, 1}}, rng);
        }
}

TEST(Binary, SameTensorBothOperands) {
    std::mt19937 rng(6);
    tu::Ctx ctx(16u << 20);
    ggml_tensor * a = new_tensor(ctx, GGML_TYPE_F32, {37, 4, 1, 1});
    const Values av = fill(a, rng);
    const Values got = compute_inplace_all_threads(ctx, ggml_add_inplace(ctx, a, a), a, av);
    Values ref = av;
    for (double & x : ref) x *= 2;
    tu::expect_close(got, ref, 0, 0);
}

TEST(Binary, Add1) {
    std::mt19937 rng(7);
    for (ggml_type t0 : kFloatTypes)
        for (ggml_type t1 : src1_types(t0))
            for (Layout l0 : kLayouts)
                for (bool inplace : {false, true}) {
                    SCOPED_TRACE(std::string(ggml_type_name(t0)) + " + " + ggml_type_name(t1) + " " + layout_name(l0) +
                                 (inplace ? " in place" : ""));
                    tu::Ctx ctx(16u << 20);
                    ggml_tensor * a = new_input(ctx, t0, {7, 5, 3, 2}, l0);
                    ggml_tensor * b = ggml_new_tensor_1d(ctx, t1, 1);
                    const Values av = fill(a, rng);
                    const Values bv = fill(b, rng);
                    ggml_tensor * out = inplace ? ggml_add1_inplace(ctx, a, b) : ggml_add1(ctx, a, b);
                    const Values got = inplace ? compute_inplace_all_threads(ctx, out, a, av) : tu::compute_all_threads(ctx, out);
                    Values ref = av;
                    for (double & x : ref) x += bv[0];
                    tu::expect_close(got, ref, tu::type_rtol(t0), 1e-6);
                }
}

// ==== per-element ops: scale, sqr, sqrt, log, and the unary ops ==============================
struct ElemOp {
    const char * name;
    std::function<ggml_tensor *(ggml_context *, ggml_tensor *, bool)> build;
    std::function<double(double)> ref;
    float lo, hi;   // input range
    double rtol;    // for F32 (F16/BF16 use tu::type_rtol)
    double atol;
};

double gelu_ref(double x) {
    // x sigmoid(2u): the same function as 0.5 x (1 + tanh(u)) without its cancellation for x < 0
    const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    return x / (1.0 + std::exp(-2.0 * u));
}

ElemOp unary(const char * name, ggml_unary_op op, std::function<double(double)> ref, float lo, float hi, double rtol, double atol = 1e-7) {
    return {name,
            [op](ggml_context * ctx, ggml_tensor * a, bool inplace) { return inplace ? ggml_unary_inplace(ctx, a, op) : ggml_unary(ctx, a, op); },
            ref, lo, hi, rtol, atol};
}

std::vector<ElemOp> elem_ops() {
    const float s = -1.75f;
    return {
        {"scale", [s](ggml_context * ctx, ggml_tensor * a, bool ip) { return ip ? ggml_scale_inplace(ctx, a, s) : ggml_scale(ctx, a, s); },
         [s](double x) { return x * s; }, -3, 3, 1e-6, 0},
        {"sqr", [](ggml_context * ctx, ggml_tensor * a, bool ip) { return ip ? ggml_sqr_inplace(ctx, a) : ggml_sqr(ctx, a); },
         [](double x) { return x * x; }, -3, 3, 1e-6, 0},
        {"sqrt", [](ggml_context * ctx, ggml_tensor * a, bool ip) { return ip ? ggml_sqrt_inplace(ctx, a) : ggml_sqrt(ctx, a); },
         [](double x) { return std::sqrt(x); }, 0, 5, 1e-6, 0},
        {"log", [](ggml_context * ctx, ggml_tensor * a, bool ip) { return ip ? ggml_log_inplace(ctx, a) : ggml_log(ctx, a); },
         [](double x) { return std::log(x); }, 0.05f, 5, 1e-6, 1e-7},
        unary("abs", GGML_UNARY_OP_ABS, [](double x) { return std::fabs(x); }, -3, 3, 0, 0),
        unary("sgn", GGML_UNARY_OP_SGN, [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }, -3, 3, 0, 0),
        unary("neg", GGML_UNARY_OP_NEG, [](double x) { return -x; }, -3, 3, 0, 0),
        unary("step", GGML_UNARY_OP_STEP, [](double x) { return x > 0 ? 1.0 : 0.0; }, -3, 3, 0, 0),
        unary("tanh", GGML_UNARY_OP_TANH, [](double x) { return std::tanh(x); }, -4, 4, 1e-6),
        unary("relu", GGML_UNARY_OP_RELU, [](double x) { return x > 0 ? x : 0.0; }, -3, 3, 0, 0),
        unary("sigmoid", GGML_UNARY_OP_SIGMOID, [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, -12, 12, 1e-6),
        unary("gelu", GGML_UNARY_OP_GELU, gelu_ref, -5, 5, 1e-5),
        unary("silu", GGML_UNARY_OP_SILU, [](double x) { return x / (1.0 + std::exp(-x)); }, -12, 12, 1e-6),
        unary("exp", GGML_UNARY_OP_EXP, [](double x) { return std::exp(x); }, -20, 20, 1e-6, 0),
        unary("gelu_erf", GGML_UNARY_OP_GELU_ERF, [](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }, -8, 8, 1e-6),
    };
}

void run_elem(const ElemOp & op, ggml_type type, const Shape & ne, Layout layout, bool inplace, std::mt19937 & rng) {
    SCOPED_TRACE(std::string(op.name) + " " + ggml_type_name(type) + shape_str(ne) + " " + layout_name(layout) +
                 (inplace ? " in place" : ""));
    tu::Ctx ctx(16u << 20);
    ggml_tensor * a = new_input(ctx, type, ne, layout);
    const Values av = fill(a, rng, op.lo, op.hi);
    ggml_tensor * out = op.build(ctx, a, inplace);
    ASSERT_EQ(out->type, type);
    const Values got = inplace ? compute_inplace_all_threads(ctx, out, a, av) : tu::compute_all_threads(ctx, out);
    if (inplace) {
        EXPECT_EQ(out->data, a->data);
    }
    Values ref(av.size());
    for (size_t i = 0; i < av.size(); i++) ref[i] = op.ref(av[i]);
    // exact ops stay exact in every type; the rest are held to the output type's precision
    const double rtol = op.rtol == 0 ? 0 : (type == GGML_TYPE_F32 ? op.rtol : tu::type_rtol(type));
    const double atol = type == GGML_TYPE_F32 ? op.atol : std::max(op.atol, 1e-6);
    tu::expect_close(got, round_all(type, ref), rtol, atol);  // exp(20) is inf in F16
}

TEST(Elementwise, EveryOpTypeShapeLayout) {
    std::mt19937 rng(10);
    for (const ElemOp & op : elem_ops())
        for (ggml_type type : kFloatTypes)
            for (const Shape & ne : kShapes)
                for (Layout layout : kLayouts) run_elem(op, type, ne, layout, false, rng);
}

TEST(Elementwise, InPlace) {
    std::mt19937 rng(11);
    for (const ElemOp & op : elem_ops())
        for (ggml_type type : kFloatTypes)
            for (Layout layout : kLayouts) run_elem(op, type, {7, 5, 3, 2}, layout, true, rng);
}

TEST(Elementwise, LongRows) {
    std::mt19937 rng(12);
    for (const ElemOp & op : elem_ops())
        for (ggml_type type : kFloatTypes) run_elem(op, type, {4099, 3, 1, 1}, Layout::Contiguous, false, rng);
}

// exp, silu, sigmoid and gelu at the ends of the float range: no NaN, right limits, tiny
// results kept (relative accuracy wherever the output is a normal float).
TEST(Unary, ExtremeInputs) {
    const float xs[] = {-1000.0f, -200.0f, -104.0f, -103.5f, -100.0f, -95.0f, -89.5f, -88.0f, -87.4f, -80.0f, -50.0f,
                        -20.0f,   -1e-3f,  -1e-30f, -0.0f,   0.0f,    1e-30f, 1e-3f,  20.0f,  50.0f,  80.0f,  88.0f,
                        88.72f,   88.73f,  89.5f,   100.0f,  200.0f,  1000.0f};
    const int n = (int) (sizeof(xs) / sizeof(xs[0]));
    struct Case { ggml_unary_op op; std::function<double(double)> ref; };
    const Case cases[] = {
        {GGML_UNARY_OP_EXP, [](double x) { return std::exp(x); }},
        {GGML_UNARY_OP_SILU, [](double x) { return x > 0 ? x / (1 + std::exp(-x)) : x * std::exp(x) / (1 + std::exp(x)); }},
        {GGML_UNARY_OP_SIGMOID, [](double x) { return x > 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x)); }},
        {GGML_UNARY_OP_GELU, gelu_ref},
    };
    for (const Case & c : cases) {
        SCOPED_TRACE(ggml_unary_op_name(c.op));
        tu::Ctx ctx(1u << 20);
        ggml_tensor * a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
        memcpy(a->data, xs, sizeof(xs));
        ggml_tensor * out = ggml_unary(ctx, a, c.op);
        const Values got = tu::compute_all_threads(ctx, out);
        for (int i = 0; i < n; i++) {
            const double ref = (float) c.ref(xs[i]);  // rounded to float: exp(100) is inf
            EXPECT_FALSE(std::isnan(got[i])) << "x = " << xs[i];
            if (std::isinf(ref) || std::fabs(ref) >= 1e-36) {
                // gelu's inner polynomial amplifies the input's rounding: looser there
                const double rtol = c.op == GGML_UNARY_OP_GELU ? 1e-5 : 1e-6;
                EXPECT_TRUE(got[i] == ref || std::fabs(got[i] - ref) <= rtol * std::fabs(ref))
                    << "x = " << xs[i] << ": got " << got[i] << ", expected " << ref;
            } else {
                EXPECT_LE(std::fabs(got[i] - ref), 1e-36) << "x = " << xs[i];
            }
        }
    }
}

// float "ulps" between a and the double b (b rounded to float first).
double ulp_distance(float a, double b) {
    const float bf = (float) b;
    if (a == bf) return 0;
    const float ulp = std::nextafter(std::fabs(bf), std::numeric_limits<float>::infinity()) - std::fabs(bf);
    return std::fabs((double) a - b) / ulp;
}

// The vectorized exp over its whole finite range, against exp in double: at most 2 ulp.
TEST(Unary, ExpAccuracyDense) {
    const int n = 200003;
    std::vector<float> x(n), y(n);
    for (int i = 0; i < n; i++) x[i] = -103.0f + 191.7f * (float) i / (float) (n - 1);
    ggml_cpu_vec_exp_f32(y.data(), x.data(), n);
    double worst = 0;
    float worst_x = 0;
    for (int i = 0; i < n; i++) {
        const double ref = std::exp((double) x[i]);
        if (ref < std::numeric_limits<float>::min()) {
            EXPECT_LE(std::fabs(y[i] - ref), 2 * std::numeric_limits<float>::denorm_min()) << "x = " << x[i];
            continue;
        }
        const double d = ulp_distance(y[i], ref);
        if (d > worst) { worst = d; worst_x = x[i]; }
    }
    EXPECT_LE(worst, 2.0) << "at x = " << worst_x;
}

// The SIMD rows agree with the scalar algorithm (ggml_cpu_exp_f32) and give every element the
// same value whatever the row length (tails are not computed differently).
TEST(Unary, VectorExpMatchesScalarAtEveryLength) {
    std::mt19937 rng(13);
    std::uniform_real_distribution<float> d(-90.0f, 90.0f);
    std::vector<float> x(67), y_full(67), y(67);
    for (float & v : x) v = d(rng);
    ggml_cpu_vec_exp_f32(y_full.data(), x.data(), (int64_t) x.size());
    for (int64_t len = 0; len <= (int64_t) x.size(); len++) {
        std::fill(y.begin(), y.end(), -1.0f);
        ggml_cpu_vec_exp_f32(y.data(), x.data(), len);
        for (int64_t i = 0; i < (int64_t) x.size(); i++) {
            if (i < len) {
                EXPECT_EQ(y[i], y_full[i]) << "len " << len << " i " << i;
            } else {
                EXPECT_EQ(y[i], -1.0f) << "wrote past the end: len " << len;
            }
        }
    }
    for (size_t i = 0; i < x.size(); i++) {
        EXPECT_LE(ulp_distance(y_full[i], ggml_cpu_exp_f32(x[i])), 1.0) << "x = " << x[i];
    }
    // silu and sigmoid rows too, in place
    std::vector<float> s = x, g = x;
    ggml_cpu_vec_silu_f32(s.data(), s.data(), (int64_t) s.size());
    ggml_cpu_vec_sigmoid_f32(g.data(), g.data(), (int64_t) g.size());
    for (size_t i = 0; i < x.size(); i++) {
        const double xd = x[i];
        const double sig = xd > 0 ? 1 / (1 + std::exp(-xd)) : std::exp(xd) / (1 + std::exp(xd));
        EXPECT_NEAR(g[i], sig, 1e-6 * sig + 1e-38);
        EXPECT_NEAR(s[i], xd * sig, 1e-6 * std::fabs(xd * sig) + 1e-36);
    }
}

// Every compiled-in instruction set's float rows (kernels.h), not only the build's: exp within
// 1 ulp of the scalar algorithm at every row length, silu / sigmoid / gelu near their formulas,
// the exact row max, the F16 mask and F16 <-> F32 rows as the scalar conversions.
TEST(Unary, EveryKernelSetsRows) {
    const ggml_cpu_kernels * sets[4];
    const int n_sets = ggml_cpu_kernel_sets(sets);
    std::mt19937 rng(29);
    std::uniform_real_distribution<float> d(-90.0f, 90.0f);
    std::vector<float> x(67);
    for (float & v : x) v = d(rng);
    for (int si = 0; si < n_sets; si++) {
        const ggml_cpu_kernels * k = sets[si];
        SCOPED_TRACE(k->isa);
        std::vector<float> full(x.size()), y(x.size());
        k->vec_exp(full.data(), x.data(), (int64_t) x.size());
        for (int64_t len : {0, 1, 5, 8, 15, 16, 17, 33, 66}) {
            k->vec_exp(y.data(), x.data(), len);
            for (int64_t i = 0; i < len; i++) EXPECT_EQ(y[i], full[i]) << "len " << len << " i " << i;
        }
        for (size_t i = 0; i < x.size(); i++) EXPECT_LE(ulp_distance(full[i], ggml_cpu_exp_f32(x[i])), 1.0) << "x = " << x[i];
        std::vector<float> s(x.size()), g(x.size()), ge(x.size());
        k->vec_silu(s.data(), x.data(), (int64_t) x.size());
        k->vec_sigmoid(g.data(), x.data(), (int64_t) x.size());
        k->vec_gelu(ge.data(), x.data(), (int64_t) x.size());
        for (size_t i = 0; i < x.size(); i++) {
            const double xd = x[i];
            const double sig = xd > 0 ? 1 / (1 + std::exp(-xd)) : std::exp(xd) / (1 + std::exp(xd));
            EXPECT_NEAR(g[i], sig, 1e-6 * sig + 1e-38);
            EXPECT_NEAR(s[i], xd * sig, 1e-6 * std::fabs(xd * sig) + 1e-36);
            const double gl = xd / (1 + std::exp(-2 * std::sqrt(2 / M_PI) * (xd + 0.044715 * xd * xd * xd)));  // 0.5 x (1 + tanh u)
            EXPECT_NEAR(ge[i], gl, 1e-5 * std::fabs(gl) + 1e-30);
        }
        for (int64_t len : {1, 7, 16, 31, 67}) {
            const float want = *std::max_element(x.begin(), x.begin() + len);
            EXPECT_EQ(k->row_max(x.data(), len), want) << "len " << len;
        }
        std::vector<ggml_fp16_t> h(x.size()), h_ref(x.size());
        std::vector<float> back(x.size());
        k->f32_to_f16_row(x.data(), h.data(), (int64_t) x.size());
        k->f16_to_f32_row(h.data(), back.data(), (int64_t) x.size());
        for (size_t i = 0; i < x.size(); i++) {
            EXPECT_EQ(h[i], GGML_FP32_TO_FP16(x[i])) << "i " << i;
            EXPECT_EQ(back[i], GGML_FP16_TO_FP32(h[i])) << "i " << i;
        }
        std::vector<float> w(x.begin(), x.end());
        k->add_mask_f16(w.data(), h.data(), (int64_t) w.size(), 0.5f);
        for (size_t i = 0; i < x.size(); i++) EXPECT_NEAR(w[i], x[i] + 0.5f * GGML_FP16_TO_FP32(h[i]), 1e-5 * (1 + std::fabs(x[i])));
    }
}

// The one-pass softmax row kernels (where a set has them) give the bits of the steps one by one:
// x * scale, one fma with the F16 or F32 mask (slope 1 and an ALiBi slope), the exact max; then
// exp(w - max) and the double sum in row_sum's order. Lengths around the vector widths, rows
// with -inf (masked) entries, a row masked whole.
TEST(Vec, SoftmaxRowKernelsGiveTheStepsBits) {
    const ggml_cpu_kernels * sets[4];
    const int n_sets = ggml_cpu_kernel_sets(sets);
    std::mt19937 rng(31);
    std::uniform_real_distribution<float> d(-30.0f, 30.0f);
    const int64_t n_max = 83;
    std::vector<float> x(n_max), mf(n_max);
    std::vector<ggml_fp16_t> mh(n_max);
    for (int64_t i = 0; i < n_max; i++) {
        x[i] = d(rng);
        mf[i] = i % 7 == 3 ? -INFINITY : d(rng) * 0.1f;
        mh[i] = GGML_FP32_TO_FP16(mf[i]);
    }
    auto bits = [](const std::vector<float> & v) {
        std::vector<uint32_t> b(v.size());
        if (!v.empty()) memcpy(b.data(), v.data(), v.size() * sizeof(float));
        return b;
    };
    int tried = 0;
    for (int si = 0; si < n_sets; si++) {
        const ggml_cpu_kernels * k = sets[si];
        if (!k->soft_max_logits && !k->exp_sub_max_sum) continue;
        ASSERT_TRUE(k->soft_max_logits && k->exp_sub_max_sum) << k->isa;
        SCOPED_TRACE(k->isa);
        tried++;
        for (int64_t n : {0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 64, 83}) {
            for (int mask_kind = 0; mask_kind < 4; mask_kind++) {  // none, F32, F16, all -inf (F32)
                for (float slope : {1.0f, 0.3535f}) {
                    const std::vector<float> all_inf(n_max, -INFINITY);
                    const void * mask = mask_kind == 0 ? nullptr : mask_kind == 1 ? (const void *) mf.data() : mask_kind == 2 ? (const void *) mh.data() : (const void *) all_inf.data();
                    const bool f16 = mask_kind == 2;
                    const float scale = 0.125f;
                    std::vector<float> want(n), got(n, 7.0f);
                    for (int64_t i = 0; i < n; i++) {
                        want[i] = x[i] * scale;
                        if (mask) want[i] = std::fma(slope, f16 ? GGML_FP16_TO_FP32(mh[i]) : ((const float *) mask)[i], want[i]);
                    }
                    float want_max = -INFINITY;
                    for (float v : want) want_max = std::max(want_max, v);
                    const float got_max = k->soft_max_logits(got.data(), x.data(), mask, f16, scale, slope, n);
                    ASSERT_EQ(bits(got), bits(want)) << "n " << n << " mask " << mask_kind << " slope " << slope;
                    ASSERT_EQ(got_max, want_max) << "n " << n << " mask " << mask_kind;
                    if (want_max == -INFINITY) continue;
                    // The steps: subtract, the set's exp, then row_sum's order.
                    std::vector<float> e(n);
                    for (int64_t i = 0; i < n; i++) e[i] = want[i] - want_max;
                    k->vec_exp(e.data(), e.data(), n);
                    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                    for (int64_t i = 0; i < n; i++) acc[i % 8] += (double) e[i];
                    const double want_sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
                    const double got_sum = k->exp_sub_max_sum(got.data(), n, want_max);
                    ASSERT_EQ(bits(got), bits(e)) << "n " << n << " mask " << mask_kind;
                    ASSERT_EQ(got_sum, want_sum) << "n " << n << " mask " << mask_kind;
                }
            }
        }
    }
    if (tried == 0) GTEST_SKIP() << "no set of this build has the one-pass softmax kernels";
}

// ==== reductions ===============================================================================
Values row_sums(const Shape & ne, const Values & v, bool mean) {
    Values r;
    for (int64_t row = 0; row < ne[1] * ne[2] * ne[3]; row++) {
        double s = 0;
        for (int64_t i = 0; i < ne[0]; i++) s += v[row * ne[0] + i];
        r.push_back(mean ? s / ne[0] : s);
    }
    return r;
}

TEST(Reduce, SumSumRowsMean) {
    std::mt19937 rng(20);
    const Shape shapes[] = {{7, 5, 3, 2}, {33, 1, 4, 1}, {1, 1, 1, 1}, {1000, 3, 1, 1}, {1, 6, 1, 1}};
    for (ggml_type type : kFloatTypes)
        for (const Shape & ne : shapes)
            for (Layout layout : kLayouts)
                for (int which = 0; which < 3; which++) {
                    const char * names[] = {"sum", "sum_rows", "mean"};
                    SCOPED_TRACE(std::string(names[which]) + " " + ggml_type_name(type) + shape_str(ne) + " " + layout_name(layout));
                    tu::Ctx ctx(16u << 20);
                    ggml_tensor * a = new_input(ctx, type, ne, layout);
                    const Values av = fill(a, rng);
                    ggml_tensor * out = which == 0 ? ggml_sum(ctx, a) : which == 1 ? ggml_sum_rows(ctx, a) : ggml_mean(ctx, a);
                    const Values got = tu::compute_all_threads(ctx, out);
                    Values ref;
                    if (which == 0) {
                        double s = 0;
                        for (double x : av) s += x;
                        ref = {s};
                        ASSERT_EQ(ggml_nelements(out), 1);
                    } else {
                        ref = row_sums(ne, av, which == 2);
                        ASSERT_EQ(shape_of(out), (Shape{1, ne[1], ne[2], ne[3]}));
                    }
                    // accumulated in double: only the final rounding to the output type remains
                    double abs_sum = 0;
                    for (double x : av) abs_sum += std::fabs(x);
                    tu::expect_close(got, ref, tu::type_rtol(out->type), 1e-6 * abs_sum / std::max<int64_t>(1, (int64_t) ref.size()));
                }
}

TEST(Reduce, ArgmaxFirstMaxWins) {
    std::mt19937 rng(21);
    const Shape shapes[] = {{7, 5, 1, 1}, {1, 9, 1, 1}, {300, 4, 1, 1}, {1, 1, 1, 1}, {33, 1, 1, 1}};
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16})
        for (const Shape & ne : shapes)
            for (Layout layout : {Layout::Contiguous, Layout::Padded, Layout::Transposed}) {
                SCOPED_TRACE(std::string(ggml_type_name(type)) + shape_str(ne) + " " + layout_name(layout));
                tu::Ctx ctx(16u << 20);
                ggml_tensor * a = new_input(ctx, type, ne, layout);
                // small integers: many ties, so "first max wins" is exercised
                std::uniform_int_distribution<int> d(-4, 4);
                Values av(n_elements(ne));
                for (double & x : av) x = d(rng);
                set_values(a, av);
                ggml_tensor * out = ggml_argmax(ctx, a);
                ASSERT_EQ(out->type, GGML_TYPE_I32);
                const Values got = tu::compute_all_threads(ctx, out);
                Values ref;
                for (int64_t r = 0; r < ne[1]; r++) {
                    int64_t best = 0;
                    for (int64_t i = 1; i < ne[0]; i++) if (av[r * ne[0] + i] > av[r * ne[0] + best]) best = i;
                    ref.push_back((double) best);
                }
                tu::expect_close(got, ref, 0, 0);
            }
}

TEST(Reduce, ArgmaxSpecialValues) {
    tu::Ctx ctx(1u << 20);
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    const float rows[4][4] = {{-inf, -inf, -inf, -inf}, {nan, 1.0f, 3.0f, 3.0f}, {-inf, nan, -5.0f, -5.0f}, {1.0f, inf, 2.0f, inf}};
    ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 4);
    memcpy(a->data, rows, sizeof(rows));
    const Values got = tu::compute_all_threads(ctx, ggml_argmax(ctx, a));
    tu::expect_close(got, {0, 2, 2, 1}, 0, 0);
}

// ==== dup / cpy / cont =========================================================================
const ggml_type kCopyTypes[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16};

// Values that exercise the conversions: random, plus exact ties for rounding and large ones.
Values fill_for_copy(ggml_tensor * t, std::mt19937 & rng) {
    if (t->type == GGML_TYPE_I32) {
        std::uniform_int_distribution<int32_t> d(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
        Values v(ggml_nelements(t));
        for (double & x : v) x = d(rng);
        set_values(t, v);
        return tu::to_double(t);
    }
    Values v = fill(t, rng, -3.0f, 3.0f);
    const double specials[] = {1.0 + 1.0 / 2048, 1.0 + 3.0 / 2048, 1.0 + 1.0 / 256, 65504.0, 70000.0, -1e-7, 3e38, 0.0};
    for (size_t i = 0; i < v.size() && i < 8; i++) v[i * 3 % v.size()] = round_to(t->type, specials[i]);
    set_values(t, v);
    return tu::to_double(t);
}

// src (of shape ne_src, layout ls) copied into dst (of shape ne_dst, layout ld), as cpy.
void run_cpy(ggml_type ts, ggml_type td, const Shape & ne_src, Layout ls, const Shape & ne_dst, Layout ld, std::mt19937 & rng) {
    SCOPED_TRACE(std::string("cpy ") + ggml_type_name(ts) + shape_str(ne_src) + " " + layout_name(ls) + " -> " + ggml_type_name(td) +
                 shape_str(ne_dst) + " " + layout_name(ld));
    tu::Ctx ctx(16u << 20);
    ggml_tensor * src = new_input(ctx, ts, ne_src, ls);
    ggml_tensor * dst = new_input(ctx, td, ne_dst, ld);
    const Values sv = fill_for_copy(src, rng);
    fill(dst, rng);  // garbage to overwrite
    ggml_tensor * out = ggml_cpy(ctx, src, dst);
    tu::compute_all_threads(ctx, out);
    // conversions are exact up to the destination's rounding (logical order, i0 fastest)
    tu::expect_close(tu::to_double(dst), round_all(td, sv), 0, 0);
}

TEST(Copy, CpyAllTypePairsAndLayouts) {
    std::mt19937 rng(30);
    for (ggml_type ts : kCopyTypes)
        for (ggml_type td : kCopyTypes)
            for (Layout ls : kLayouts)
                for (Layout ld : {Layout::Contiguous, Layout::Padded, Layout::Transposed, Layout::PermutedAll}) {
                    run_cpy(ts, td, {7, 5, 3, 2}, ls, {7, 5, 3, 2}, ld, rng);
                }
    for (Layout ls : kLayouts)
        for (Layout ld : kLayouts) run_cpy(GGML_TYPE_I32, GGML_TYPE_I32, {7, 5, 3, 2}, ls, {7, 5, 3, 2}, ld, rng);
    // Rows of one element (a token's values into the transposed V cache): runs along dimension
    // 1, split between threads mid-plane, longer than a conversion chunk.
    for (const Shape & ne : {Shape{1, 37, 3, 2}, Shape{1, 2500, 1, 1}})
        for (ggml_type ts : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_I32})
            for (ggml_type td : kCopyTypes)
                for (Layout ls : kLayouts)
                    for (Layout ld : {Layout::Contiguous, Layout::Padded, Layout::Transposed, Layout::PermutedAll}) {
                        if (ts == GGML_TYPE_I32 && td != GGML_TYPE_F32) continue;
                        run_cpy(ts, ts == GGML_TYPE_I32 ? GGML_TYPE_I32 : td, ne, ls, ne, ld, rng);
                    }
}

// Same element count, different shapes: elements go over in logical order.
TEST(Copy, CpyBetweenShapes) {
    std::mt19937 rng(31);
    const std::pair<Shape, Shape> shapes[] = {
        {{7, 5, 3, 2}, {210, 1, 1, 1}}, {{7, 5, 3, 2}, {10, 21, 1, 1}}, {{7, 5, 3, 2}, {2, 3, 5, 7}},
        {{7, 5, 3, 2}, {30, 7, 1, 1}},  {{1000, 3, 1, 1}, {600, 5, 1, 1}}, {{4, 4, 1, 1}, {1, 16, 1, 1}},
    };
    for (const auto & s : shapes)
        for (ggml_type ts : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_I32})
            for (ggml_type td : kCopyTypes)
                for (Layout ls : kLayouts)
                    for (Layout ld : {Layout::Contiguous, Layout::Padded, Layout::Transposed}) {
                        if (ts == GGML_TYPE_I32 && td != GGML_TYPE_F32) continue;  // I32 goes to I32 only, once
                        run_cpy(ts, ts == GGML_TYPE_I32 ? GGML_TYPE_I32 : td, s.first, ls, s.second, ld, rng);
                    }
}

TEST(Copy, DupAndCast) {
    std::mt19937 rng(32);
    for (ggml_type ts : kCopyTypes)
        for (Layout ls : kLayouts) {
            SCOPED_TRACE(std::string(ggml_type_name(ts)) + " " + layout_name(ls));
            tu::Ctx ctx(16u << 20);
            ggml_tensor * a = new_input(ctx, ts, {7, 5, 3, 2}, ls);
            const Values av = fill_for_copy(a, rng);
            ggml_tensor * d = ggml_dup(ctx, a);
            EXPECT_TRUE(ggml_is_contiguous(d));
            tu::expect_close(tu::compute_all_threads(ctx, d), av, 0, 0, "dup");
            for (ggml_type td : kCopyTypes) {
                ggml_tensor * c = ggml_cast(ctx, a, td);
                ASSERT_EQ(c->type, td);
                tu::expect_close(tu::compute_all_threads(ctx, c), round_all(td, av), 0, 0, std::string("cast to ") + ggml_type_name(td));
            }
        }
}

// Transposed planes large enough for the tiled copy (32 x 32 tiles, partial ones at the edges):
// a transpose, and attention's V (head_v, heads, cells) -> (cells, head_v, heads).
TEST(Copy, ContOfTransposedPlanesInTiles) {
    std::mt19937 rng(35);
    struct Case { int64_t ne[4]; int ax[4]; };
    const Case cases[] = { { {37, 45, 3, 2}, {1, 0, 2, 3} }, { {37, 5, 45, 2}, {1, 2, 0, 3} }, { {64, 33, 1, 1}, {1, 0, 2, 3} } };
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_I32})
        for (const Case & cs : cases) {
            SCOPED_TRACE(std::string(ggml_type_name(type)) + " " + std::to_string(cs.ne[0]) + "x" + std::to_string(cs.ne[1]) + "x" +
                         std::to_string(cs.ne[2]));
            tu::Ctx ctx(16u << 20);
            ggml_tensor * base = ggml_new_tensor_4d(ctx, type, cs.ne[0], cs.ne[1], cs.ne[2], cs.ne[3]);
            const Values bv = fill_for_copy(base, rng);
            ggml_tensor * p = ggml_permute(ctx, base, cs.ax[0], cs.ax[1], cs.ax[2], cs.ax[3]);
            ASSERT_EQ(p->nb[1], ggml_type_size(type));  // the tiled path's case
            ggml_tensor * c = ggml_cont(ctx, p);
            const Shape pne = shape_of(p);
            const Shape bne = {cs.ne[0], cs.ne[1], cs.ne[2], cs.ne[3]};
            Values ref(bv.size());
            tu::for_each(base, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                int64_t j[4];
                const int64_t i[4] = {i0, i1, i2, i3};
                for (int k = 0; k < 4; k++) j[cs.ax[k]] = i[k];
                ref[flat_index(pne, j[0], j[1], j[2], j[3])] = bv[flat_index(bne, i0, i1, i2, i3)];
            });
            tu::expect_close(tu::compute_all_threads(ctx, c), ref, 0, 0, "cont");
        }
}

TEST(Copy, ContOfPermutedAndReshaped) {
    std::mt19937 rng(33);
    const int axes[][4] = {{0, 1, 2, 3}, {1, 0, 2, 3}, {2, 0, 3, 1}, {3, 2, 1, 0}, {0, 2, 1, 3}, {1, 2, 3, 0}};
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_I32})
        for (const auto & ax : axes) {
            SCOPED_TRACE(std::string(ggml_type_name(type)) + " permute " + std::to_string(ax[0]) + std::to_string(ax[1]) +
                         std::to_string(ax[2]) + std::to_string(ax[3]));
            tu::Ctx ctx(16u << 20);
            ggml_tensor * base = ggml_new_tensor_4d(ctx, type, 7, 5, 3, 2);
            const Values bv = fill_for_copy(base, rng);
            ggml_tensor * p = ggml_permute(ctx, base, ax[0], ax[1], ax[2], ax[3]);
            ggml_tensor * c = ggml_cont(ctx, p);
            EXPECT_TRUE(ggml_is_contiguous(c));
            // expected: base[i] lands at position (i_ax) of the permuted shape
            const Shape pne = shape_of(p);
            Values ref(bv.size());
            const Shape bne = {7, 5, 3, 2};
            tu::for_each(base, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                int64_t j[4];
                const int64_t i[4] = {i0, i1, i2, i3};
                for (int k = 0; k < 4; k++) j[ax[k]] = i[k];
                ref[flat_index(pne, j[0], j[1], j[2], j[3])] = bv[flat_index(bne, i0, i1, i2, i3)];
            });
            tu::expect_close(tu::compute_all_threads(ctx, c), ref, 0, 0, "cont");

            // cont to another shape (a reshape of the permuted tensor), then reshape the result back
            ggml_tensor * c2 = ggml_cont_2d(ctx, p, 14, 15);
            tu::expect_close(tu::compute_all_threads(ctx, c2), ref, 0, 0, "cont_2d");
            ggml_tensor * r = ggml_reshape_4d(ctx, c2, 3, 5, 7, 2);
            ggml_tensor * c3 = ggml_cont(ctx, ggml_transpose(ctx, r));
            const Shape rne = {3, 5, 7, 2}, tne = {5, 3, 7, 2};
            Values tref(ref.size());
            for (int64_t i3 = 0; i3 < 2; i3++)
                for (int64_t i2 = 0; i2 < 7; i2++)
                    for (int64_t i1 = 0; i1 < 5; i1++)
                        for (int64_t i0 = 0; i0 < 3; i0++)
                            tref[flat_index(tne, i1, i0, i2, i3)] = ref[flat_index(rne, i0, i1, i2, i3)];
            tu::expect_close(tu::compute_all_threads(ctx, c3), tref, 0, 0, "reshape, transpose, cont");
        }
}

// ==== repeat / concat =========================================================================
TEST(Copy, Repeat) {
    std::mt19937 rng(40);
    const std::pair<Shape, Shape> shapes[] = {
        {{3, 1, 2, 1}, {6, 4, 2, 3}}, {{1, 1, 1, 1}, {5, 3, 2, 1}}, {{7, 5, 3, 2}, {7, 5, 3, 2}},
        {{7, 1, 3, 1}, {21, 2, 3, 2}}, {{1, 5, 1, 2}, {4, 5, 3, 2}},
    };
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_I32})
        for (const auto & s : shapes)
            for (Layout ls : kLayouts) {
                SCOPED_TRACE(std::string(ggml_type_name(type)) + shape_str(s.first) + " " + layout_name(ls) + " to " + shape_str(s.second));
                tu::Ctx ctx(16u << 20);
                ggml_tensor * a = new_input(ctx, type, s.first, ls);
                ggml_tensor * shape = new_tensor(ctx, type, s.second);
                const Values av = fill_for_copy(a, rng);
                ggml_tensor * out = ggml_repeat(ctx, a, shape);
                ASSERT_EQ(shape_of(out), s.second);
                const Values got = tu::compute_all_threads(ctx, out);
                const Shape & ne = s.second;
                const Shape & na = s.first;
                Values ref(got.size());
                for (int64_t i3 = 0; i3 < ne[3]; i3++)
                    for (int64_t i2 = 0; i2 < ne[2]; i2++)
                        for (int64_t i1 = 0; i1 < ne[1]; i1++)
                            for (int64_t i0 = 0; i0 < ne[0]; i0++)
                                ref[flat_index(ne, i0, i1, i2, i3)] = av[flat_index(na, i0 % na[0], i1 % na[1], i2 % na[2], i3 % na[3])];
                tu::expect_close(got, ref, 0, 0);
            }
}

TEST(Copy, ConcatAlongEachDim) {
    std::mt19937 rng(41);
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_I32})
        for (int dim = 0; dim < 4; dim++)
            for (Layout l0 : kLayouts)
                for (Layout l1 : {Layout::Contiguous, Layout::Padded, Layout::Transposed}) {
                    SCOPED_TRACE(std::string(ggml_type_name(type)) + " dim " + std::to_string(dim) + " " + layout_name(l0) + " + " + layout_name(l1));
                    tu::Ctx ctx(16u << 20);
                    Shape na = {7, 5, 3, 2}, nb = na;
                    nb[dim] = dim == 0 ? 4 : 1 + dim;  // a different extent along dim
                    ggml_tensor * a = new_input(ctx, type, na, l0);
                    ggml_tensor * b = new_input(ctx, type, nb, l1);
                    const Values av = fill_for_copy(a, rng);
                    const Values bv = fill_for_copy(b, rng);
                    ggml_tensor * out = ggml_concat(ctx, a, b, dim);
                    Shape ne = na;
                    ne[dim] += nb[dim];
                    ASSERT_EQ(shape_of(out), ne);
                    const Values got = tu::compute_all_threads(ctx, out);
                    Values ref(got.size());
                    for (int64_t i3 = 0; i3 < ne[3]; i3++)
                        for (int64_t i2 = 0; i2 < ne[2]; i2++)
                            for (int64_t i1 = 0; i1 < ne[1]; i1++)
                                for (int64_t i0 = 0; i0 < ne[0]; i0++) {
                                    int64_t i[4] = {i0, i1, i2, i3};
                                    double v;
                                    if (i[dim] < na[dim]) {
                                        v = av[flat_index(na, i[0], i[1], i[2], i[3])];
                                    } else {
                                        i[dim] -= na[dim];
                                        v = bv[flat_index(nb, i[0], i[1], i[2], i[3])];
                                    }
                                    ref[flat_index(ne, i0, i1, i2, i3)] = v;
                                }
                    tu::expect_close(got, ref, 0, 0);
                }
}

// ==== get_rows ================================================================================
void run_get_rows(ggml_type type, const Shape & ne_src, Layout ls, const std::vector<int32_t> & idx, const Shape & ne_idx,
                  std::mt19937 & rng) {
    SCOPED_TRACE(std::string("get_rows ") + ggml_type_name(type) + shape_str(ne_src) + " " + layout_name(ls) + " by " + shape_str(ne_idx));
    tu::Ctx ctx(16u << 20);
    ggml_tensor * a = new_input(ctx, type, ne_src, ls);
    const Values av = fill_for_copy(a, rng);
    ggml_tensor * b = ggml_new_tensor_3d(ctx, GGML_TYPE_I32, ne_idx[0], ne_idx[1], ne_idx[2]);
    ASSERT_EQ((size_t) ggml_nelements(b), idx.size());
    memcpy(b->data, idx.data(), idx.size() * sizeof(int32_t));
    ggml_tensor * out = ggml_get_rows(ctx, a, b);
    const Shape ne = {ne_src[0], ne_idx[0], ne_idx[1], ne_idx[2]};
    ASSERT_EQ(shape_of(out), ne);
    ASSERT_EQ(out->type, type == GGML_TYPE_I32 ? GGML_TYPE_I32 : GGML_TYPE_F32);
    const Values got = tu::compute_all_threads(ctx, out);
    Values ref(got.size());
    for (int64_t k = 0; k < ne[3]; k++)
        for (int64_t j = 0; j < ne[2]; j++)
            for (int64_t i = 0; i < ne[1]; i++) {
                const int32_t row = idx[flat_index(ne_idx, i, j, k, 0)];
                for (int64_t i0 = 0; i0 < ne[0]; i0++) ref[flat_index(ne, i0, i, j, k)] = av[flat_index(ne_src, i0, row, j, k)];
            }
    tu::expect_close(got, ref, 0, 0);  // F16/BF16 to F32 is exact
}

TEST(GetRows, RepeatedAndOutOfOrderIndices) {
    std::mt19937 rng(50);
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_I32})
        for (Layout ls : kLayouts) {
            run_get_rows(type, {7, 10, 1, 1}, ls, {3, 0, 9, 3, 3, 7, 1}, {7, 1, 1, 1}, rng);
            run_get_rows(type, {300, 4, 1, 1}, ls, {2}, {1, 1, 1, 1}, rng);
        }
}

TEST(GetRows, BatchedIndices) {
    std::mt19937 rng(51);
    const Shape ne_src = {6, 8, 3, 2}, ne_idx = {5, 3, 2, 1};
    std::uniform_int_distribution<int32_t> d(0, (int32_t) ne_src[1] - 1);
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_I32})
        for (Layout ls : kLayouts) {
            std::vector<int32_t> idx(n_elements(ne_idx));
            for (int32_t & v : idx) v = d(rng);
            run_get_rows(type, ne_src, ls, idx, ne_idx, rng);
        }
}

// ==== block (quantized) types through get_rows and cpy ========================================
const ggml_type kBlockTypes[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ4_NL};

bool has_converters(ggml_type type) {
    const ggml_type_traits * tt = ggml_get_type_traits(type);
    return tt->to_float != nullptr && tt->from_float_ref != nullptr;
}

std::vector<float> random_floats(int64_t n, std::mt19937 & rng) {
    std::uniform_real_distribution<float> d(-2.0f, 2.0f);
    std::vector<float> v((size_t) n);
    for (float & x : v) x = d(rng);
    return v;
}

// Raw bytes of a packed tensor (or packed view).
std::vector<uint8_t> raw_bytes(const ggml_tensor * t) {
    const uint8_t * p = (const uint8_t *) t->data;
    return std::vector<uint8_t>(p, p + ggml_nbytes(t));
}

// Computes out with 1, 2, 3 threads and checks the bytes of `watch` (packed) come out the same.
void compute_threads_same_bytes(ggml_context * ctx, ggml_tensor * out, const ggml_tensor * watch) {
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    std::vector<uint8_t> first;
    for (int nt = 1; nt <= 3; nt++) {
        ASSERT_EQ(ggml_graph_compute_with_ctx(ctx, gf, nt), GGML_STATUS_SUCCESS);
        if (nt == 1) first = raw_bytes(watch);
        else EXPECT_TRUE(raw_bytes(watch) == first) << nt << " threads differ from 1";
    }
}

TEST(GetRows, BlockTypeSource) {
    std::mt19937 rng(60);
    for (ggml_type type : kBlockTypes) {
        if (!has_converters(type)) continue;
        SCOPED_TRACE(ggml_type_name(type));
        const ggml_type_traits * tt = ggml_get_type_traits(type);
        tu::Ctx ctx(16u << 20);
        const int64_t ne0 = 512, rows = 6, ne2 = 2;
        ggml_tensor * a = ggml_new_tensor_3d(ctx, type, ne0, rows, ne2);
        const std::vector<float> src = random_floats(ne0 * rows * ne2, rng);
        tt->from_float_ref(src.data(), a->data, ne0 * rows * ne2);
        ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 4, ne2);
        const int32_t idx[8] = {5, 0, 5, 2, 1, 1, 4, 3};
        memcpy(b->data, idx, sizeof(idx));
        ggml_tensor * out = ggml_get_rows(ctx, a, b);
        ASSERT_EQ(out->type, GGML_TYPE_F32);
        const Values got = tu::compute_all_threads(ctx, out);
        Values ref;
        std::vector<float> row((size_t) ne0);
        for (int64_t j = 0; j < ne2; j++)
            for (int64_t i = 0; i < 4; i++) {
                tt->to_float((const char *) a->data + a->nb[1] * idx[j * 4 + i] + a->nb[2] * j, row.data(), ne0);
                ref.insert(ref.end(), row.begin(), row.end());
            }
        tu::expect_close(got, ref, 0, 0);
    }
}

// F32/F16 activations (non-contiguous, another shape) copied into a 1-D view of a block-typed
// tensor, as a quantized KV cache is written.
TEST(Copy, IntoBlockTypeView) {
    std::mt19937 rng(61);
    for (ggml_type type : kBlockTypes) {
        if (!has_converters(type)) continue;
        const ggml_type_traits * tt = ggml_get_type_traits(type);
        for (ggml_type ts : {GGML_TYPE_F32, GGML_TYPE_F16})
            for (Layout ls : kLayouts) {
                SCOPED_TRACE(std::string(ggml_type_name(ts)) + " " + layout_name(ls) + " -> " + ggml_type_name(type));
                tu::Ctx ctx(16u << 20);
                const Shape ne = {32, 8, 4, 2};  // 2048 elements, any row split of 32
                ggml_tensor * src = new_input(ctx, ts, ne, ls);
                const Values sv = fill(src, rng, -2.0f, 2.0f);
                const int64_t n = n_elements(ne), lead = 512;
                ggml_tensor * cache = ggml_new_tensor_1d(ctx, type, lead + n + 256);
                memset(cache->data, 0x5a, ggml_nbytes(cache));
                const std::vector<uint8_t> before = raw_bytes(cache);
                ggml_tensor * view = ggml_view_1d(ctx, cache, n, ggml_row_size(type, lead));
                compute_threads_same_bytes(ctx, ggml_cpy(ctx, src, view), cache);
                // expected: the logical-order values quantized by the type's reference function
                std::vector<float> flat(sv.begin(), sv.end());
                std::vector<uint8_t> expect(ggml_row_size(type, n));
                tt->from_float_ref(flat.data(), expect.data(), n);
                const std::vector<uint8_t> after = raw_bytes(cache);
                const size_t off = ggml_row_size(type, lead);
                EXPECT_TRUE(std::equal(expect.begin(), expect.end(), after.begin() + off)) << "quantized bytes differ";
                EXPECT_TRUE(std::equal(after.begin(), after.begin() + off, before.begin())) << "wrote before the view";
                EXPECT_TRUE(std::equal(after.begin() + off + expect.size(), after.end(), before.begin() + off + expect.size()))
                    << "wrote after the view";
            }
    }
}

// Block-typed rows to F32/F16 of another shape and layout, and to another block type.
TEST(Copy, FromBlockType) {
    std::mt19937 rng(62);
    for (ggml_type type : kBlockTypes) {
        if (!has_converters(type)) continue;
        const ggml_type_traits * tt = ggml_get_type_traits(type);
        const int64_t ne0 = 512, rows = 6;  // two chunks per row
        for (ggml_type td : {GGML_TYPE_F32, GGML_TYPE_F16})
            for (Layout ld : {Layout::Contiguous, Layout::Padded, Layout::Transposed}) {
                SCOPED_TRACE(std::string(ggml_type_name(type)) + " -> " + ggml_type_name(td) + " " + layout_name(ld));
                tu::Ctx ctx(16u << 20);
                ggml_tensor * a = ggml_new_tensor_2d(ctx, type, ne0, rows);
                const std::vector<float> src = random_floats(ne0 * rows, rng);
                tt->from_float_ref(src.data(), a->data, ne0 * rows);
                std::vector<float> deq((size_t) (ne0 * rows));
                tt->to_float(a->data, deq.data(), ne0 * rows);
                ggml_tensor * dst = new_input(ctx, td, {96, 32, 1, 1}, ld);
                tu::compute_all_threads(ctx, ggml_cpy(ctx, a, dst));
                tu::expect_close(tu::to_double(dst), round_all(td, Values(deq.begin(), deq.end())), 0, 0);
            }
        // cont of a permuted block-typed tensor (rows move, blocks stay whole)
        {
            SCOPED_TRACE(std::string(ggml_type_name(type)) + " cont of permuted");
            tu::Ctx ctx(16u << 20);
            ggml_tensor * a = ggml_new_tensor_3d(ctx, type, ne0, 3, 4);
            const std::vector<float> src = random_floats(ne0 * 12, rng);
            tt->from_float_ref(src.data(), a->data, ne0 * 12);
            ggml_tensor * c = ggml_cont(ctx, ggml_permute(ctx, a, 0, 2, 1, 3));
            compute_threads_same_bytes(ctx, c, c);
            const size_t rb = ggml_row_size(type, ne0);
            const std::vector<uint8_t> got = raw_bytes(c);
            for (int64_t i2 = 0; i2 < 3; i2++)
                for (int64_t i1 = 0; i1 < 4; i1++) {
                    const uint8_t * want = (const uint8_t *) a->data + i1 * a->nb[2] + i2 * a->nb[1];
                    EXPECT_TRUE(std::equal(want, want + rb, got.begin() + (i2 * 4 + i1) * rb)) << "row " << i1 << "," << i2;
                }
        }
        // to another block type: dequantize then quantize, row by row
        for (ggml_type td : kBlockTypes) {
            if (td == type || !has_converters(td)) continue;
            SCOPED_TRACE(std::string(ggml_type_name(type)) + " -> " + ggml_type_name(td));
            tu::Ctx ctx(16u << 20);
            ggml_tensor * a = ggml_new_tensor_2d(ctx, type, ne0, rows);
            const std::vector<float> src = random_floats(ne0 * rows, rng);
            tt->from_float_ref(src.data(), a->data, ne0 * rows);
            std::vector<float> deq((size_t) (ne0 * rows));
            tt->to_float(a->data, deq.data(), ne0 * rows);
            std::vector<uint8_t> expect(ggml_row_size(td, ne0 * rows));
            ggml_get_type_traits(td)->from_float_ref(deq.data(), expect.data(), ne0 * rows);
            ggml_tensor * c = ggml_cast(ctx, a, td);
            compute_threads_same_bytes(ctx, c, c);
            EXPECT_TRUE(raw_bytes(c) == expect);
        }
    }
}

TEST(GetRowsDeathTest, IndexOutOfRangeAsserts) {
    // the default "fast" style forks without exec, which also works under qemu-user
    for (int32_t bad : {10, -1}) {
        EXPECT_DEATH(
            {
                tu::Ctx ctx(1u << 20);
                ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 10);
                ggml_tensor * b = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 2);
                ((int32_t *) b->data)[0] = 1;
                ((int32_t *) b->data)[1] = bad;
                tu::compute(ctx, ggml_get_rows(ctx, a, b), 1);
            },
            "GGML_ASSERT");
    }
}

}  // namespace
