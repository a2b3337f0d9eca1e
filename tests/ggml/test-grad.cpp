// test-grad.cpp - every op's backward rule against central finite differences.
//
// For each case the test builds f(inputs) with the library, a scalar loss L = sum(f * R) with a
// fixed random R (every output element gets its own weight, so a gradient that lands on the
// wrong element is caught), and asks the library for dL/dx of every parameter (ggml_set_param,
// ggml_build_backward_expand). The numeric gradient (L(x + h) - L(x - h)) / 2h is taken of a
// naive double-precision reimplementation of the op written here, never of the library: with a
// double reference h can be small (1e-4), so truncation (~h^2) and rounding (~1e-16 / h) errors
// are both below 1e-8 and the check is as sharp as the library's float arithmetic allows.
//
// Every case also checks the library's forward values against the reference (so the reference
// is known to describe the op), that each parameter gets an F32 gradient of its shape, and that
// 1, 2 and 3 threads give bit-identical gradients.
//
// Tolerances (see Tol): analytic g against numeric n, per element,
//   |g - n| <= rel * |n| + abs * max_j |n_j|      (max over the parameter's gradient)
// with rel = abs = 1e-4 where the backward pass is F32 arithmetic. Float rounding of the
// analytic gradient stays below ~1e-6 of the gradient's scale in every case here (row lengths
// of at most a few hundred), so this leaves a margin of about 50x, while a wrong rule (a missing
// factor 2, a gradient sent to the wrong broadcast slot, a dropped contribution) is off by
// 10% or more of the scale and fails. Cases whose forward rounds to F16 / BF16 or quantizes
// the activations say so where they loosen the forward check; the gradient tolerance stays.
#include "test-ref.h"

#include <algorithm>
#include <fcntl.h>

namespace {

using namespace tu;  // test-util.h and test-ref.h: Shape, Values, Layout, new_input, references

// A tensor's values in logical order (i0 fastest), in double.
struct Arr {
    Shape ne{{1, 1, 1, 1}};
    Values v;
    Arr() = default;
    explicit Arr(const Shape & s) : ne(s), v((size_t) tu::n_elements(s), 0.0) {}
    Arr(const Shape & s, Values vals) : ne(s), v(std::move(vals)) {}
    int64_t size() const { return (int64_t) v.size(); }
    int64_t idx(int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) const {
        return i0 + ne[0] * (i1 + ne[1] * (i2 + ne[2] * i3));
    }
    double operator()(int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) const { return v[idx(i0, i1, i2, i3)]; }
    double & operator()(int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) { return v[idx(i0, i1, i2, i3)]; }
    template <typename F> void each(F f) const {
        for (int64_t i3 = 0; i3 < ne[3]; i3++)
            for (int64_t i2 = 0; i2 < ne[2]; i2++)
                for (int64_t i1 = 0; i1 < ne[1]; i1++)
                    for (int64_t i0 = 0; i0 < ne[0]; i0++) f(i0, i1, i2, i3);
    }
    // Elementwise map.
    template <typename F> Arr map(F f) const {
        Arr r(ne);
        for (size_t i = 0; i < v.size(); i++) r.v[i] = f(v[i]);
        return r;
    }
};

using Ref = std::function<Arr(const std::vector<Arr> & in)>;

// Random values for inputs.
struct Dist {
    double lo = -1.0, hi = 1.0;
    bool random_sign = false;  // +-[lo, hi): keeps |x| >= lo (away from the kinks of abs, relu)
    double draw(std::mt19937 & rng) const {
        std::uniform_real_distribution<double> d(lo, hi);
        const double x = d(rng);
        if (!random_sign) return x;
        return (rng() & 1) ? x : -x;
    }
};
constexpr Dist kUniform{-1.0, 1.0, false};
constexpr Dist kPositive{0.3, 2.0, false};
constexpr Dist kAwayFromZero{0.05, 1.5, true};

// Tolerances of one case (see the top of the file).
struct Tol {
    double rel = 1e-4;   // gradient: relative to the element
    double abs = 1e-4;   // gradient: relative to the largest |numeric| of the parameter
    double fwd = 1e-5;   // forward against the reference: |lib - ref| <= fwd * (|ref| + max|ref|)
    double h = 1e-4;     // finite-difference step
};

// Worst error / tolerance ratio seen (printed with GRAD_VERBOSE=1, to keep the margins honest).
bool verbose() {
    const char * e = std::getenv("GRAD_VERBOSE");
    return e && *e && *e != '0';
}

class GradCheck {
  public:
    explicit GradCheck(uint32_t seed, size_t mem = 256u << 20) : ctx_(mem), rng_(seed) {}
    ggml_context * ctx() const { return ctx_; }
    std::mt19937 & rng() { return rng_; }

    // An input of logical shape ne (F32, F16 or BF16) that the op reads through `layout` (a view
    // of a contiguous base tensor; Padded's padding must get zero gradient); the base is a
    // parameter unless param is false (then it is a constant of the loss).
    ggml_tensor * input(const Shape & ne, Layout layout = Layout::Contiguous, ggml_type type = GGML_TYPE_F32,
                        const Dist & dist = kUniform, bool param = true) {
        ggml_tensor * view = tu::new_input(ctx_, type, ne, layout);
        ggml_tensor * base = view->view_src ? view->view_src : view;
        ggml_format_name(base, "in%zu", ins_.size());
        tu::for_each(base, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) { tu::set(base, dist.draw(rng_), i0, i1, i2, i3); });
        if (param) ggml_set_param(base);
        add_input(base, view, tu::to_double(base), param);
        return view;
    }

    // A constant with given values (F32 or F16), e.g. a mask or target probabilities.
    ggml_tensor * constant(const Arr & a, ggml_type type = GGML_TYPE_F32) {
        ggml_tensor * t = ggml_new_tensor_4d(ctx_, type, a.ne[0], a.ne[1], a.ne[2], a.ne[3]);
        a.each([&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) { tu::set(t, a(i0, i1, i2, i3), i0, i1, i2, i3); });
        add_input(t, t, tu::to_double(t), false);
        return t;
    }

    // A constant of a quantized type: random rows quantized; the reference sees the dequantized values.
    ggml_tensor * quantized(const Shape & ne, ggml_type type) {
        ggml_tensor * t = ggml_new_tensor_4d(ctx_, type, ne[0], ne[1], ne[2], ne[3]);
        const int64_t nrows = ne[1] * ne[2] * ne[3];
        std::vector<float> src((size_t) (ne[0] * nrows));
        std::uniform_real_distribution<float> d(-1.0f, 1.0f);
        for (float & x : src) x = d(rng_);
        ggml_quantize_chunk(type, src.data(), t->data, 0, nrows, ne[0], nullptr);
        std::vector<float> deq(src.size());
        const ggml_type_traits * tt = ggml_get_type_traits(type);
        EXPECT_TRUE(tt->to_float != nullptr);
        for (int64_t r = 0; r < nrows; r++) tt->to_float((const char *) t->data + r * t->nb[1], deq.data() + r * ne[0], ne[0]);
        add_input(t, t, Values(deq.begin(), deq.end()), false);
        return t;
    }

    // I32 indices or positions.
    ggml_tensor * ints(const Shape & ne, const std::vector<int32_t> & vals) {
        ggml_tensor * t = ggml_new_tensor_4d(ctx_, GGML_TYPE_I32, ne[0], ne[1], ne[2], ne[3]);
        EXPECT_EQ((size_t) ggml_nelements(t), vals.size());
        memcpy(t->data, vals.data(), vals.size() * sizeof(int32_t));
        return t;
    }

    // Checks f's forward values and every parameter's gradient; ref gets the inputs' logical
    // values in the order they were created (parameters and constants alike).
    void run(ggml_tensor * f, const Ref & ref, const std::string & what, const Tol & tol = Tol()) {
        SCOPED_TRACE(what);
        ggml_context * c = ctx_;
        ASSERT_EQ(f->type, GGML_TYPE_F32) << "cast f to F32 in the case";
        const Shape fne = shape_of(f);
        Arr r(fne);
        std::uniform_real_distribution<double> d(-1.0, 1.0);
        for (double & x : r.v) x = d(rng_);
        ggml_tensor * R = ggml_new_tensor_4d(c, GGML_TYPE_F32, fne[0], fne[1], fne[2], fne[3]);
        r.each([&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) { tu::set(R, r(i0, i1, i2, i3), i0, i1, i2, i3); });
        r.v = tu::to_double(R);
        ggml_tensor * loss = ggml_sum(c, ggml_mul(c, f, R));
        ggml_set_loss(loss);

        ggml_cgraph * gb = ggml_new_graph_custom(c, 8192, true);
        ggml_build_forward_expand(gb, loss);
        ggml_build_backward_expand(c, gb, nullptr);

        std::vector<ggml_tensor *> grads;
        for (const In & in : ins_) {
            if (!in.param) continue;
            ggml_tensor * g = ggml_graph_get_grad(gb, in.base);
            ASSERT_NE(g, nullptr) << "no gradient for " << in.base->name;
            ASSERT_EQ(g->type, GGML_TYPE_F32) << in.base->name;
            ASSERT_TRUE(ggml_are_same_shape(g, in.base)) << in.base->name;
            grads.push_back(g);
        }

        // 1, 2 and 3 threads: bit-identical gradients.
        std::vector<std::vector<uint8_t>> first;
        Values fwd;
        for (int nt = 1; nt <= 3; nt++) {
            ggml_graph_reset(gb);
            ASSERT_EQ(ggml_graph_compute_with_ctx(c, gb, nt), GGML_STATUS_SUCCESS);
            for (size_t k = 0; k < grads.size(); k++) {
                if (nt == 1) {
                    first.push_back(tu::bytes_of(grads[k]));
                } else {
                    EXPECT_TRUE(tu::bytes_of(grads[k]) == first[k])
                        << "gradient of " << grads[k]->name << " with " << nt << " threads differs from 1 thread";
                }
            }
            if (nt == 1) fwd = tu::to_double(f);
        }

        // Forward against the reference.
        std::vector<Arr> in_vals;
        for (const In & in : ins_) in_vals.push_back(gather(in, in.base_vals));
        const Arr ref_f = ref(in_vals);
        ASSERT_EQ(ref_f.size(), (int64_t) fwd.size()) << "reference output size";
        double fmax = 0.0;
        for (double x : ref_f.v) if (std::isfinite(x)) fmax = std::max(fmax, std::fabs(x));
        tu::expect_close(fwd, ref_f.v, tol.fwd, tol.fwd * fmax, what + ": forward");

        auto loss_of = [&](const std::vector<Arr> & vals) {
            const Arr y = ref(vals);
            double s = 0.0;
            for (size_t i = 0; i < y.v.size(); i++) s += y.v[i] * r.v[i];
            return s;
        };

        // Numeric gradient of each parameter's base, element by element.
        size_t k = 0;
        for (size_t p = 0; p < ins_.size(); p++) {
            const In & in = ins_[p];
            if (!in.param) continue;
            const Values analytic = tu::to_double(grads[k++]);
            Values numeric(in.base_vals.size());
            std::vector<Arr> vals = in_vals;
            Values bv = in.base_vals;
            for (size_t e = 0; e < bv.size(); e++) {
                const double x0 = bv[e];
                bv[e] = x0 + tol.h;
                vals[p] = gather(in, bv);
                const double lp = loss_of(vals);
                bv[e] = x0 - tol.h;
                vals[p] = gather(in, bv);
                const double lm = loss_of(vals);
                bv[e] = x0;
                numeric[e] = (lp - lm) / (2.0 * tol.h);
            }
            double nmax = 0.0;
            for (double x : numeric) nmax = std::max(nmax, std::fabs(x));
            EXPECT_GT(nmax, 0.0) << "the loss does not depend on " << in.base->name << ": a useless case";
            double worst = 0.0;
            for (size_t e = 0; e < numeric.size(); e++) {
                const double t = tol.rel * std::fabs(numeric[e]) + tol.abs * nmax;
                worst = std::max(worst, std::fabs(analytic[e] - numeric[e]) / t);
            }
            if (verbose()) printf("  %-60s %-6s max|grad| %.3g  worst err/tol %.3g\n", what.c_str(), in.base->name, nmax, worst);
            tu::expect_close(analytic, numeric, tol.rel, tol.abs * nmax, what + ": gradient of " + in.base->name);
        }
    }

  private:
    struct In {
        ggml_tensor * base;
        ggml_tensor * view;
        bool param;
        Values base_vals;           // the base's values in its logical order
        std::vector<int64_t> map;   // view element (logical order) -> base element
    };

    void add_input(ggml_tensor * base, ggml_tensor * view, Values base_vals, bool param) {
        GGML_ASSERT(ggml_is_contiguous(base));
        In in{base, view, param, std::move(base_vals), {}};
        const size_t es = ggml_type_size(base->type);
        if (view == base) {
            in.map.resize((size_t) ggml_nelements(base));
            for (size_t i = 0; i < in.map.size(); i++) in.map[i] = (int64_t) i;
        } else {
            tu::for_each(view, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                const size_t off = (size_t) ((const char *) view->data - (const char *) base->data) + tu::elem_offset(view, i0, i1, i2, i3);
                in.map.push_back((int64_t) (off / es));
            });
        }
        ins_.push_back(std::move(in));
    }

    static Arr gather(const In & in, const Values & base_vals) {
        Arr a(shape_of(in.view));
        for (size_t i = 0; i < in.map.size(); i++) a.v[i] = base_vals[(size_t) in.map[i]];
        return a;
    }

    tu::Ctx ctx_;
    std::mt19937 rng_;
    std::vector<In> ins_;
};

// Index into b when b broadcasts over a's shape (ggml_can_repeat).
double bcast(const Arr & b, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return b(i0 % b.ne[0], i1 % b.ne[1], i2 % b.ne[2], i3 % b.ne[3]);
}

Arr binary_ref(const Arr & a, const Arr & b, const std::function<double(double, double)> & op) {
    Arr r(a.ne);
    a.each([&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) { r(i0, i1, i2, i3) = op(a(i0, i1, i2, i3), bcast(b, i0, i1, i2, i3)); });
    return r;
}

// ============================================================================================
// elementwise

TEST(Grad, BinaryBroadcast) {
    const Shape a_ne = {7, 5, 3, 2};
    const Shape b_shapes[] = {{7, 5, 3, 2}, {7, 1, 3, 1}, {1, 5, 1, 2}, {7, 5, 1, 1}, {1, 1, 1, 1}, {7, 1, 1, 2}};
    struct Op {
        const char * name;
        ggml_tensor * (*build)(ggml_context *, ggml_tensor *, ggml_tensor *);
        double (*f)(double, double);
    };
    const Op ops[] = {
        {"add", ggml_add, [](double x, double y) { return x + y; }},
        {"sub", ggml_sub, [](double x, double y) { return x - y; }},
        {"mul", ggml_mul, [](double x, double y) { return x * y; }},
        {"div", ggml_div, [](double x, double y) { return x / y; }},
    };
    uint32_t seed = 100;
    for (const Op & op : ops) {
        for (const Shape & b_ne : b_shapes) {
            for (Layout la : {Layout::Contiguous, Layout::Transposed, Layout::Padded}) {
                GradCheck g(seed++);
                ggml_tensor * a = g.input(a_ne, la);
                const bool div = std::string(op.name) == "div";
                ggml_tensor * b = g.input(b_ne, la == Layout::Padded ? Layout::Permuted12 : Layout::Contiguous, GGML_TYPE_F32,
                                          div ? Dist{0.5, 1.5, true} : kUniform);
                ggml_tensor * f = op.build(g.ctx(), a, b);
                g.run(f, [&](const std::vector<Arr> & in) { return binary_ref(in[0], in[1], op.f); },
                      std::string(op.name) + " a " + shape_str(a_ne) + " " + layout_name(la) + " b " + shape_str(b_ne));
            }
        }
    }
}

TEST(Grad, Add1AndScale) {
    {
        GradCheck g(200);
        ggml_tensor * a = g.input({6, 4, 3, 1}, Layout::Transposed);
        ggml_tensor * b = g.input({1, 1, 1, 1});
        g.run(ggml_add1(g.ctx(), a, b), [](const std::vector<Arr> & in) { return in[0].map([&](double x) { return x + in[1].v[0]; }); },
              "add1");
    }
    {
        GradCheck g(201);
        ggml_tensor * a = g.input({9, 4, 2, 1}, Layout::Permuted12);
        g.run(ggml_scale(g.ctx(), a, -0.7f), [](const std::vector<Arr> & in) { return in[0].map([](double x) { return x * (double) -0.7f; }); },
              "scale");
    }
}

TEST(Grad, DupSqrSqrtLog) {
    struct Op {
        const char * name;
        ggml_tensor * (*build)(ggml_context *, ggml_tensor *);
        double (*f)(double);
        Dist dist;
    };
    const Op ops[] = {
        {"dup", ggml_dup, [](double x) { return x; }, kUniform},
        {"sqr", ggml_sqr, [](double x) { return x * x; }, kUniform},
        {"sqrt", ggml_sqrt, [](double x) { return std::sqrt(x); }, kPositive},
        {"log", ggml_log, [](double x) { return std::log(x); }, kPositive},
    };
    uint32_t seed = 300;
    for (const Op & op : ops) {
        for (Layout l : {Layout::Contiguous, Layout::Transposed, Layout::Padded}) {
            GradCheck g(seed++);
            ggml_tensor * x = g.input({11, 4, 3, 1}, l, GGML_TYPE_F32, op.dist);
            g.run(op.build(g.ctx(), x), [&](const std::vector<Arr> & in) { return in[0].map(op.f); },
                  std::string(op.name) + " " + layout_name(l));
        }
    }
}

TEST(Grad, Unary) {
    struct Op {
        ggml_unary_op op;
        double (*f)(double);
    };
    const Op ops[] = {
        {GGML_UNARY_OP_ABS, [](double x) { return std::fabs(x); }},
        {GGML_UNARY_OP_NEG, [](double x) { return -x; }},
        {GGML_UNARY_OP_RELU, [](double x) { return x > 0 ? x : 0.0; }},
        {GGML_UNARY_OP_GELU, [](double x) {  // the tanh approximation
             return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
         }},
        {GGML_UNARY_OP_SILU, [](double x) { return x / (1.0 + std::exp(-x)); }},
        {GGML_UNARY_OP_SIGMOID, [](double x) { return 1.0 / (1.0 + std::exp(-x)); }},
        {GGML_UNARY_OP_TANH, [](double x) { return std::tanh(x); }},
        {GGML_UNARY_OP_EXP, [](double x) { return std::exp(x); }},
        {GGML_UNARY_OP_GELU_ERF, [](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }},
    };
    uint32_t seed = 400;
    for (const Op & op : ops) {
        for (Layout l : {Layout::Contiguous, Layout::Transposed}) {
            GradCheck g(seed++);
            // Inputs keep |x| >= 0.05, away from the kinks of abs and relu; up to 3 in magnitude
            // so that gelu, silu, sigmoid and tanh are seen in their curved parts.
            ggml_tensor * x = g.input({13, 5, 2, 1}, l, GGML_TYPE_F32, Dist{0.05, 3.0, true});
            g.run(ggml_unary(g.ctx(), x, op.op), [&](const std::vector<Arr> & in) { return in[0].map(op.f); },
                  std::string(ggml_unary_op_name(op.op)) + " " + layout_name(l));
        }
    }
}

// ============================================================================================
// reductions and shapes

TEST(Grad, Reductions) {
    uint32_t seed = 500;
    for (Layout l : {Layout::Contiguous, Layout::Permuted12, Layout::Transposed}) {
        const Shape ne = {5, 4, 3, 2};
        {
            GradCheck g(seed++);
            ggml_tensor * x = g.input(ne, l);
            g.run(ggml_sum(g.ctx(), x), [](const std::vector<Arr> & in) {
                Arr r(Shape{1, 1, 1, 1});
                for (double v : in[0].v) r.v[0] += v;
                return r;
            }, std::string("sum ") + layout_name(l));
        }
        for (bool mean : {false, true}) {
            GradCheck g(seed++);
            ggml_tensor * x = g.input(ne, l);
            ggml_tensor * f = mean ? ggml_mean(g.ctx(), x) : ggml_sum_rows(g.ctx(), x);
            g.run(f, [mean](const std::vector<Arr> & in) {
                const Arr & a = in[0];
                Arr r(Shape{1, a.ne[1], a.ne[2], a.ne[3]});
                a.each([&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) { r(0, i1, i2, i3) += a(i0, i1, i2, i3); });
                if (mean) for (double & v : r.v) v /= (double) a.ne[0];
                return r;
            }, std::string(mean ? "mean " : "sum_rows ") + layout_name(l));
        }
    }
}

TEST(Grad, RepeatAndRepeatBack) {
    const Shape small[] = {{3, 1, 2, 1}, {1, 1, 1, 1}, {6, 4, 1, 3}, {1, 2, 2, 1}};
    const Shape big = {6, 4, 2, 3};
    uint32_t seed = 600;
    for (const Shape & s : small) {
        {
            GradCheck g(seed++);
            ggml_tensor * a = g.input(s, s[0] > 1 && s[1] > 1 ? Layout::Transposed : Layout::Contiguous);
            ggml_tensor * like = ggml_new_tensor_4d(g.ctx(), GGML_TYPE_F32, big[0], big[1], big[2], big[3]);
            g.run(ggml_repeat(g.ctx(), a, like), [&](const std::vector<Arr> & in) {
                Arr r(big);
                r.each([&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) { r(i0, i1, i2, i3) = bcast(in[0], i0, i1, i2, i3); });
                return r;
            }, "repeat " + shape_str(s) + " -> " + shape_str(big));
        }
        {
            GradCheck g(seed++);
            ggml_tensor * a = g.input(big, Layout::Contiguous);
            ggml_tensor * like = ggml_new_tensor_4d(g.ctx(), GGML_TYPE_F32, s[0], s[1], s[2], s[3]);
            g.run(ggml_repeat_back(g.ctx(), a, like), [&](const std::vector<Arr> & in) {
                Arr r(s);
                in[0].each([&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                    r(i0 % s[0], i1 % s[1], i2 % s[2], i3 % s[3]) += in[0](i0, i1, i2, i3);
                });
                return r;
            }, "repeat_back " + shape_str(big) + " -> " + shape_str(s));
        }
    }
}

TEST(Grad, Concat) {
    uint32_t seed = 700;
    for (int dim = 0; dim < 4; dim++) {
        Shape a_ne = {4, 3, 2, 2}, b_ne = a_ne;
        b_ne[dim] = dim + 1;
        GradCheck g(seed++);
        ggml_tensor * a = g.input(a_ne, dim == 1 ? Layout::Transposed : Layout::Contiguous);
        ggml_tensor * b = g.input(b_ne, Layout::Contiguous);
        g.run(ggml_concat(g.ctx(), a, b, dim), [&](const std::vector<Arr> & in) {
            Shape ne = a_ne;
            ne[dim] += b_ne[dim];
            Arr r(ne);
            r.each([&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                int64_t i[4] = {i0, i1, i2, i3};
                if (i[dim] < a_ne[dim]) {
                    r(i0, i1, i2, i3) = in[0](i0, i1, i2, i3);
                } else {
                    i[dim] -= a_ne[dim];
                    r(i0, i1, i2, i3) = in[1](i[0], i[1], i[2], i[3]);
                }
            });
            return r;
        }, "concat dim " + std::to_string(dim));
    }
}

// ============================================================================================
// normalization

TEST(Grad, NormAndRmsNorm) {
    uint32_t seed = 800;
    for (bool rms : {false, true}) {
        for (float eps : {1e-5f, 1e-2f}) {
            for (Layout l : {Layout::Contiguous, Layout::Transposed}) {
                GradCheck g(seed++);
                ggml_tensor * x = g.input({13, 4, 3, 1}, l, GGML_TYPE_F32, Dist{-1.0, 2.0, false});
                ggml_tensor * f = rms ? ggml_rms_norm(g.ctx(), x, eps) : ggml_norm(g.ctx(), x, eps);
                g.run(f, [&](const std::vector<Arr> & in) { return Arr(in[0].ne, tu::ref_norm(in[0].v, in[0].ne, eps, rms)); },
                      std::string(rms ? "rms_norm" : "norm") + " eps " + std::to_string(eps) + " " + layout_name(l));
            }
        }
    }
}

// ============================================================================================
// matrix products

// y[m, n, i2, i3] = sum_k a[k, m, i2 / r2, i3 / r3] b[k, n, i2, i3]
Arr mul_mat_ref(const Arr & a, const Arr & b) {
    Arr r(Shape{a.ne[1], b.ne[1], b.ne[2], b.ne[3]});
    const int64_t r2 = b.ne[2] / a.ne[2], r3 = b.ne[3] / a.ne[3];
    r.each([&](int64_t m, int64_t n, int64_t i2, int64_t i3) {
        double s = 0.0;
        for (int64_t k = 0; k < a.ne[0]; k++) s += a(k, m, i2 / r2, i3 / r3) * b(k, n, i2, i3);
        r(m, n, i2, i3) = s;
    });
    return r;
}

TEST(Grad, MulMat) {
    struct Case {
        Shape a, b;
        Layout la, lb;
    };
    const Case cases[] = {
        {{33, 7, 1, 1}, {33, 5, 1, 1}, Layout::Contiguous, Layout::Contiguous},
        {{33, 7, 1, 1}, {33, 5, 1, 1}, Layout::Padded, Layout::Transposed},
        {{17, 4, 2, 3}, {17, 6, 2, 3}, Layout::Contiguous, Layout::Permuted12},
        // Grouped-query attention: a's planes (KV heads, permuted like the keys) broadcast over
        // b's (query heads, permuted like the queries); 3 query heads per KV head.
        {{16, 6, 2, 1}, {16, 5, 6, 1}, Layout::Permuted12, Layout::Permuted12},
        // Broadcast over dims 2 and 3 together.
        {{16, 4, 2, 1}, {16, 3, 4, 3}, Layout::Contiguous, Layout::Contiguous},
        {{8, 3, 1, 2}, {8, 5, 3, 4}, Layout::Contiguous, Layout::Transposed},
    };
    uint32_t seed = 900;
    for (const Case & c : cases) {
        GradCheck g(seed++);
        ggml_tensor * a = g.input(c.a, c.la);
        ggml_tensor * b = g.input(c.b, c.lb);
        g.run(ggml_mul_mat(g.ctx(), a, b), [](const std::vector<Arr> & in) { return mul_mat_ref(in[0], in[1]); },
              "mul_mat a " + shape_str(c.a) + " " + layout_name(c.la) + " b " + shape_str(c.b) + " " + layout_name(c.lb));
    }
}

// mul_mat with weights a of another type than F32: the gradient with respect to the
// activations b (out_prod reads a's exact values, dequantized for block types; the reference
// multiplies with the same values), and with respect to F16 / BF16 weights too.
void mul_mat_weight_type_cases(ggml_type type, int64_t K, uint32_t seed) {
    const bool a_param = !ggml_is_quantized(type);
    for (bool gqa : {false, true}) {
        GradCheck g(seed++);
        const Shape a_ne = {K, 5, gqa ? 2 : 1, 1}, b_ne = {K, 3, gqa ? 4 : 1, 1};
        ggml_tensor * a = a_param ? g.input(a_ne, Layout::Contiguous, type) : g.quantized(a_ne, type);
        ggml_tensor * b = g.input(b_ne, gqa ? Layout::Permuted12 : Layout::Contiguous);
        Tol tol;
        // mul_mat converts b to the weights' dot type (F16, BF16, Q8_0 or Q8_K) before the
        // products: the forward is as close to the reference as that rounding allows. The
        // gradient tolerance is unchanged.
        tol.fwd = type == GGML_TYPE_F16 ? 2e-3 : type == GGML_TYPE_BF16 ? 1e-2 : 2e-2;
        g.run(ggml_mul_mat(g.ctx(), a, b), [](const std::vector<Arr> & in) { return mul_mat_ref(in[0], in[1]); },
              std::string("mul_mat weights ") + ggml_type_name(type) + (gqa ? " gqa" : ""), tol);
    }
}

TEST(Grad, MulMatHalfWeights) {
    mul_mat_weight_type_cases(GGML_TYPE_F16, 40, 1000);
    mul_mat_weight_type_cases(GGML_TYPE_BF16, 40, 1010);
}

// Whether this build's out_prod reads a matrix of this type (out_prod for block types comes
// with the quantized out_prod work; without it the kernel aborts). Tried in a child process,
// its stderr silenced.
bool out_prod_reads(ggml_type type) {
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    if (pid == 0) {
        const int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) dup2(fd, 2);
        ggml_init_params ip = { 16u << 20, nullptr, false };
        ggml_context * ctx = ggml_init(ip);
        ggml_tensor * a = ggml_new_tensor_2d(ctx, type, ggml_blck_size(type), 2);
        memset(a->data, 0, ggml_nbytes(a));
        ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2);
        ggml_set_zero(b);
        ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, ggml_out_prod(ctx, a, b));
        _exit(ggml_graph_compute_with_ctx(ctx, gf, 1) == GGML_STATUS_SUCCESS ? 0 : 1);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return false;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

TEST(Grad, MulMatQuantizedWeights) {
    struct Case {
        ggml_type type;
        int64_t K;
    };
    std::string missing;
    uint32_t seed = 1020;
    for (const Case & c : {Case{GGML_TYPE_Q8_0, 64}, Case{GGML_TYPE_Q4_0, 64}, Case{GGML_TYPE_Q4_K, 256}}) {
        seed += 10;
        if (!out_prod_reads(c.type)) {
            missing += std::string(missing.empty() ? "" : ", ") + ggml_type_name(c.type);
            continue;
        }
        mul_mat_weight_type_cases(c.type, c.K, seed);
    }
    if (!missing.empty()) GTEST_SKIP() << "out_prod of this build cannot read " << missing << " weights (not yet merged)";
}

// mul_mat_id: the gradient reaches b (the experts are frozen constants): F32 and quantized
// experts, b shared by the slots (n_b 1) or one row per slot; the router's choice (ids) repeats
// experts across tokens.
TEST(Grad, MulMatId) {
    uint32_t seed = 1040;
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_Q8_0}) {
        for (int64_t n_b : {int64_t(1), int64_t(2)}) {
            GradCheck g(seed++);
            const int64_t K = 32, N = 6, n_as = 4, n_used = 2, T = 3;
            ggml_tensor * as;
            if (type == GGML_TYPE_F32) {
                Arr a(Shape{K, N, n_as, 1});
                std::uniform_real_distribution<double> d(-1.0, 1.0);
                for (double & x : a.v) x = d(g.rng());
                as = g.constant(a);
            } else {
                as = g.quantized({K, N, n_as, 1}, type);
            }
            ggml_tensor * b = g.input({K, n_b, T, 1});
            const std::vector<int32_t> ids = {2, 0, 1, 2, 2, 3};
            ggml_tensor * id = g.ints({n_used, T, 1, 1}, ids);
            Tol tol;
            if (type != GGML_TYPE_F32) tol.fwd = 2e-2;  // b is rounded to q8 for the product
            g.run(ggml_mul_mat_id(g.ctx(), as, b, id), [&](const std::vector<Arr> & in) {
                Arr r(Shape{N, n_used, T, 1});
                r.each([&](int64_t n, int64_t i, int64_t t, int64_t) {
                    double acc = 0;
                    for (int64_t k = 0; k < K; k++) acc += in[0](k, n, ids[(size_t) (i + n_used * t)]) * in[1](k, i % n_b, t);
                    r(n, i, t) = acc;
                });
                return r;
            }, std::string("mul_mat_id ") + ggml_type_name(type) + " n_b " + std::to_string(n_b), tol);
        }
    }
}

// y[m, n, i2, i3] = sum_k a[m, k, i2, i3] b[n, k, i2, i3]
TEST(Grad, OutProd) {
    struct Case {
        Shape a, b;
        Layout la, lb;
        ggml_type ta;
    };
    const Case cases[] = {
        {{7, 9, 1, 1}, {5, 9, 1, 1}, Layout::Contiguous, Layout::Contiguous, GGML_TYPE_F32},
        {{7, 9, 2, 3}, {5, 9, 2, 3}, Layout::Transposed, Layout::Permuted12, GGML_TYPE_F32},
        {{6, 11, 1, 1}, {4, 11, 1, 1}, Layout::Contiguous, Layout::Transposed, GGML_TYPE_F16},
    };
    uint32_t seed = 1100;
    for (const Case & c : cases) {
        GradCheck g(seed++);
        ggml_tensor * a = g.input(c.a, c.la, c.ta);
        ggml_tensor * b = g.input(c.b, c.lb);
        g.run(ggml_out_prod(g.ctx(), a, b), [](const std::vector<Arr> & in) {
            const Arr & a = in[0], & b = in[1];
            Arr r(Shape{a.ne[0], b.ne[0], b.ne[2], b.ne[3]});
            r.each([&](int64_t m, int64_t n, int64_t i2, int64_t i3) {
                double s = 0.0;
                for (int64_t k = 0; k < a.ne[1]; k++) s += a(m, k, i2, i3) * b(n, k, i2, i3);
                r(m, n, i2, i3) = s;
            });
            return r;
        }, "out_prod a " + shape_str(c.a) + " " + layout_name(c.la) + " " + ggml_type_name(c.ta) + " b " + shape_str(c.b) + " " +
               layout_name(c.lb));
    }
}

// ============================================================================================
// copies and layout

Arr identity_ref(const std::vector<Arr> & in) { return in[0]; }

// The same values in a new shape (logical order kept).
Arr reshaped(const Arr & a, const Shape & ne) {
    Arr r(ne);
    r.v = a.v;
    return r;
}

TEST(Grad, CpyAndCast) {
    {
        // F32 -> F16 -> F32: the reference is the identity (the rounding has derivative 1 in
        // the straight-through sense the rule implements); the forward is held to F16 rounding.
        GradCheck g(1200);
        ggml_tensor * x = g.input({6, 5, 2, 1}, Layout::Transposed);
        ggml_tensor * dst = ggml_new_tensor_4d(g.ctx(), GGML_TYPE_F16, 6, 5, 2, 1);
        ggml_tensor * f = ggml_cast(g.ctx(), ggml_cpy(g.ctx(), x, dst), GGML_TYPE_F32);
        Tol tol;
        tol.fwd = 1e-3;
        g.run(f, identity_ref, "cpy f32 -> f16 -> cast f32", tol);
    }
    {
        // Into a transposed destination of another shape: a copy in logical order.
        GradCheck g(1201);
        ggml_tensor * x = g.input({6, 5, 1, 1});
        ggml_tensor * dst = ggml_transpose(g.ctx(), ggml_new_tensor_2d(g.ctx(), GGML_TYPE_F32, 3, 10));
        g.run(ggml_cpy(g.ctx(), x, dst), [](const std::vector<Arr> & in) { return reshaped(in[0], Shape{10, 3, 1, 1}); },
              "cpy into a transposed view of another shape");
    }
    {
        GradCheck g(1202);
        ggml_tensor * x = g.input({7, 3, 2, 1}, Layout::Permuted12, GGML_TYPE_F16);
        ggml_tensor * dst = ggml_new_tensor_1d(g.ctx(), GGML_TYPE_F32, 42);
        g.run(ggml_cpy(g.ctx(), x, dst), [](const std::vector<Arr> & in) { return reshaped(in[0], Shape{42, 1, 1, 1}); },
              "cpy f16 (permuted) -> f32 1d");
    }
}

TEST(Grad, ContReshapePermuteTranspose) {
    uint32_t seed = 1300;
    {
        GradCheck g(seed++);
        ggml_tensor * x = g.input({5, 7, 2, 1});
        g.run(ggml_cont(g.ctx(), ggml_transpose(g.ctx(), x)), [](const std::vector<Arr> & in) {
            Arr r(Shape{7, 5, 2, 1});
            r.each([&](int64_t i0, int64_t i1, int64_t i2, int64_t) { r(i0, i1, i2) = in[0](i1, i0, i2); });
            return r;
        }, "cont(transpose)");
    }
    {
        GradCheck g(seed++);
        ggml_tensor * x = g.input({4, 6, 3, 1}, Layout::Padded);
        g.run(ggml_cont_2d(g.ctx(), x, 12, 6), [](const std::vector<Arr> & in) { return reshaped(in[0], Shape{12, 6, 1, 1}); },
              "cont_2d of a padded view");
    }
    {
        GradCheck g(seed++);
        ggml_tensor * x = g.input({12, 5, 1, 1});
        g.run(ggml_reshape_3d(g.ctx(), x, 3, 4, 5), [](const std::vector<Arr> & in) { return reshaped(in[0], Shape{3, 4, 5, 1}); },
              "reshape_3d");
    }
    {
        GradCheck g(seed++);
        ggml_tensor * x = g.input({6, 5, 1, 1}, Layout::Transposed);
        g.run(ggml_reshape_4d(g.ctx(), ggml_cont(g.ctx(), x), 2, 3, 5, 1),
              [](const std::vector<Arr> & in) { return reshaped(in[0], Shape{2, 3, 5, 1}); }, "reshape_4d(cont(transposed))");
    }
    const int perms[][4] = {{1, 0, 2, 3}, {0, 2, 1, 3}, {2, 0, 3, 1}, {3, 2, 1, 0}, {1, 2, 0, 3}};
    for (const auto & p : perms) {
        GradCheck g(seed++);
        const Shape ne = {3, 4, 5, 2};
        ggml_tensor * x = g.input(ne);
        g.run(ggml_permute(g.ctx(), x, p[0], p[1], p[2], p[3]), [&](const std::vector<Arr> & in) {
            Shape rn;
            for (int i = 0; i < 4; i++) rn[p[i]] = ne[i];
            Arr r(rn);
            in[0].each([&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                const int64_t i[4] = {i0, i1, i2, i3};
                int64_t j[4];
                for (int d = 0; d < 4; d++) j[p[d]] = i[d];
                r(j[0], j[1], j[2], j[3]) = in[0](i0, i1, i2, i3);
            });
            return r;
        }, "permute " + std::to_string(p[0]) + std::to_string(p[1]) + std::to_string(p[2]) + std::to_string(p[3]));
    }
    {
        GradCheck g(seed++);
        ggml_tensor * x = g.input({5, 7, 2, 1}, Layout::Permuted12);
        g.run(ggml_transpose(g.ctx(), x), [](const std::vector<Arr> & in) {
            Arr r(Shape{7, 5, 2, 1});
            r.each([&](int64_t i0, int64_t i1, int64_t i2, int64_t) { r(i0, i1, i2) = in[0](i1, i0, i2); });
            return r;
        }, "transpose");
    }
}

// Views with offsets: the gradient lands in the viewed elements, zeros elsewhere; overlapping
// rows (a row stride shorter than the row) get the sum of both contributions.
TEST(Grad, Views) {
    const Shape xne = {10, 6, 4, 3};
    uint32_t seed = 1400;
    // One view: its shape, its strides in elements of x, its offset in elements of x.
    struct View {
        const char * name;
        int n_dims;
        Shape ne;
        int64_t s1, s2, s3, off;
    };
    const View views[] = {
        {"view_1d", 1, {17, 1, 1, 1}, 0, 0, 0, 5},
        {"view_2d", 2, {4, 3, 1, 1}, 10, 0, 0, 2 + 10},
        {"view_2d overlapping rows", 2, {6, 5, 1, 1}, 3, 0, 0, 7},
        {"view_3d", 3, {5, 3, 2, 1}, 10, 60, 0, 1 + 20 + 60},
        {"view_3d strided planes", 3, {3, 2, 4, 1}, 20, 130, 0, 4},
        {"view_4d", 4, {3, 2, 2, 2}, 10, 60, 240, 3 + 10 + 60 + 240},
    };
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        for (const View & v : views) {
            GradCheck g(seed++);
            ggml_tensor * x = g.input(xne, Layout::Contiguous, type);
            const size_t es = ggml_type_size(type);
            ggml_tensor * f = nullptr;
            switch (v.n_dims) {
                case 1: f = ggml_view_1d(g.ctx(), x, v.ne[0], v.off * es); break;
                case 2: f = ggml_view_2d(g.ctx(), x, v.ne[0], v.ne[1], v.s1 * es, v.off * es); break;
                case 3: f = ggml_view_3d(g.ctx(), x, v.ne[0], v.ne[1], v.ne[2], v.s1 * es, v.s2 * es, v.off * es); break;
                case 4: f = ggml_view_4d(g.ctx(), x, v.ne[0], v.ne[1], v.ne[2], v.ne[3], v.s1 * es, v.s2 * es, v.s3 * es, v.off * es); break;
            }
            if (type != GGML_TYPE_F32) f = ggml_cast(g.ctx(), f, GGML_TYPE_F32);
            g.run(f, [&](const std::vector<Arr> & in) {
                Arr r(v.ne);
                r.each([&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                    r(i0, i1, i2, i3) = in[0].v[(size_t) (v.off + i0 + i1 * v.s1 + i2 * v.s2 + i3 * v.s3)];
                });
                return r;
            }, std::string(v.name) + " of " + ggml_type_name(type));
        }
    }
}

// ============================================================================================
// indexing, masks, softmax

TEST(Grad, GetRows) {
    uint32_t seed = 1500;
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        {
            // Repeated indices: their rows' gradients add up.
            GradCheck g(seed++);
            ggml_tensor * a = g.input({7, 10, 1, 1}, Layout::Contiguous, type);
            const std::vector<int32_t> idx = {3, 0, 9, 3, 3, 5, 0, 8, 2, 3, 7, 1};
            ggml_tensor * b = g.ints({12, 1, 1, 1}, idx);
            g.run(ggml_get_rows(g.ctx(), a, b), [&](const std::vector<Arr> & in) {
                Arr r(Shape{7, 12, 1, 1});
                r.each([&](int64_t i0, int64_t j, int64_t, int64_t) { r(i0, j) = in[0](i0, idx[(size_t) j]); });
                return r;
            }, std::string("get_rows ") + ggml_type_name(type));
        }
        {
            // Per-plane indices: a [5, 8, 3], b [6, 3].
            GradCheck g(seed++);
            ggml_tensor * a = g.input({5, 8, 3, 1}, Layout::Contiguous, type);
            std::vector<int32_t> idx(18);
            for (size_t i = 0; i < idx.size(); i++) idx[i] = (int32_t) ((i * 5 + i / 6) % 8);
            idx[1] = idx[0];
            ggml_tensor * b = g.ints({6, 3, 1, 1}, idx);
            g.run(ggml_get_rows(g.ctx(), a, b), [&](const std::vector<Arr> & in) {
                Arr r(Shape{5, 6, 3, 1});
                r.each([&](int64_t i0, int64_t j, int64_t i2, int64_t) { r(i0, j, i2) = in[0](i0, idx[(size_t) (j + 6 * i2)], i2); });
                return r;
            }, std::string("get_rows 3d ") + ggml_type_name(type));
        }
    }
}

// The rows set take b's values and pass their gradient to b; a's other rows pass theirs to a.
TEST(Grad, SetRows) {
    uint32_t seed = 1550;
    {
        GradCheck g(seed++);
        ggml_tensor * a = g.input({6, 9, 1, 1});
        ggml_tensor * b = g.input({6, 4, 1, 1});
        const std::vector<int32_t> idx = {7, 2, 0, 5};
        ggml_tensor * c = g.ints({4, 1, 1, 1}, idx);
        g.run(ggml_set_rows(g.ctx(), a, b, c), [&](const std::vector<Arr> & in) {
            Arr r = in[0];
            r.each([&](int64_t i0, int64_t j, int64_t, int64_t) {
                for (size_t k = 0; k < idx.size(); k++) {
                    if (idx[k] == j) r(i0, j) = in[1](i0, (int64_t) k);
                }
            });
            return r;
        }, "set_rows");
    }
    {
        // Per-plane indices: a [5, 7, 3], b [5, 2, 3], c [2, 3].
        GradCheck g(seed++);
        ggml_tensor * a = g.input({5, 7, 3, 1});
        ggml_tensor * b = g.input({5, 2, 3, 1});
        const std::vector<int32_t> idx = {6, 1, 0, 3, 4, 2};
        ggml_tensor * c = g.ints({2, 3, 1, 1}, idx);
        g.run(ggml_set_rows(g.ctx(), a, b, c), [&](const std::vector<Arr> & in) {
            Arr r = in[0];
            r.each([&](int64_t i0, int64_t j, int64_t i2, int64_t) {
                for (int64_t k = 0; k < 2; k++) {
                    if (idx[(size_t) (k + 2 * i2)] == j) r(i0, j, i2) = in[1](i0, k, i2);
                }
            });
            return r;
        }, "set_rows 3d");
    }
}

TEST(Grad, DiagMaskInf) {
    uint32_t seed = 1600;
    for (int n_past : {0, 2}) {
        {
            // exp turns the masked -inf into 0, so the loss stays finite.
            GradCheck g(seed++);
            ggml_tensor * x = g.input({6, 4, 3, 1});
            g.run(ggml_exp(g.ctx(), ggml_diag_mask_inf(g.ctx(), x, n_past)), [&](const std::vector<Arr> & in) {
                Arr r(in[0].ne);
                r.each([&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                    r(i0, i1, i2, i3) = i0 > n_past + i1 ? 0.0 : std::exp(in[0](i0, i1, i2, i3));
                });
                return r;
            }, "exp(diag_mask_inf) n_past " + std::to_string(n_past));
        }
        {
            GradCheck g(seed++);
            ggml_tensor * x = g.input({6, 4, 3, 1}, Layout::Contiguous, GGML_TYPE_F32, Dist{-2.0, 2.0, false});
            g.run(ggml_soft_max(g.ctx(), ggml_diag_mask_inf(g.ctx(), x, n_past)), [&](const std::vector<Arr> & in) {
                Arr m = in[0];
                m.each([&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) { if (i0 > n_past + i1) m(i0, i1, i2, i3) = -kInf; });
                return Arr(m.ne, tu::ref_soft_max(m.v, m.ne));
            }, "soft_max(diag_mask_inf) n_past " + std::to_string(n_past));
        }
    }
}

// softmax(x * scale + slope * mask) per row; slope from ALiBi (ggml's definition) when max_bias > 0.
Arr soft_max_ref(const Arr & x, const Arr * mask, double scale, double max_bias) {
    return Arr(x.ne, tu::ref_soft_max(x.v, x.ne, scale, mask ? &mask->v : nullptr, mask ? mask->ne : Shape{1, 1, 1, 1}, max_bias));
}

TEST(Grad, SoftMax) {
    uint32_t seed = 1700;
    for (Layout l : {Layout::Contiguous}) {
        GradCheck g(seed++);
        ggml_tensor * x = g.input({9, 5, 3, 1}, l, GGML_TYPE_F32, Dist{-2.0, 2.0, false});
        g.run(ggml_soft_max(g.ctx(), x), [](const std::vector<Arr> & in) { return soft_max_ref(in[0], nullptr, 1.0, 0.0); }, "soft_max");
    }
    struct Case {
        ggml_type mask_type;
        Shape mask_ne;
        float scale, max_bias;
        bool causal;
    };
    const Case cases[] = {
        {GGML_TYPE_F32, {9, 5, 1, 1}, 0.37f, 0.0f, false},
        {GGML_TYPE_F32, {9, 7, 3, 1}, 1.0f, 0.0f, true},   // more mask rows than x rows; per-head mask
        {GGML_TYPE_F16, {9, 5, 1, 2}, 0.5f, 0.0f, true},
        {GGML_TYPE_F32, {9, 5, 1, 1}, 0.8f, 8.0f, false},  // ALiBi
        {GGML_TYPE_F16, {9, 6, 1, 1}, 1.3f, 4.0f, true},   // ALiBi with a causal mask
    };
    for (const Case & c : cases) {
        GradCheck g(seed++);
        const Shape xne = {9, 5, 3, 2};
        ggml_tensor * x = g.input(xne, Layout::Contiguous, GGML_TYPE_F32, Dist{-2.0, 2.0, false});
        Arr m(c.mask_ne);
        std::uniform_real_distribution<double> d(-1.0, 1.0);
        m.each([&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
            m(i0, i1, i2, i3) = c.causal && i0 > i1 + 3 ? -kInf : d(g.rng());
        });
        // The mask is the second input: its values as stored (F16 rounding) reach the reference.
        ggml_tensor * mask = g.constant(m, c.mask_type);
        g.run(ggml_soft_max_ext(g.ctx(), x, mask, c.scale, c.max_bias), [&](const std::vector<Arr> & in) {
            return soft_max_ref(in[0], &in[1], c.scale, c.max_bias);
        }, std::string("soft_max_ext mask ") + ggml_type_name(c.mask_type) + " " + shape_str(c.mask_ne) + " scale " +
               std::to_string(c.scale) + " max_bias " + std::to_string(c.max_bias) + (c.causal ? " causal" : ""));
    }
}

// ============================================================================================
// rope

TEST(Grad, Rope) {
    uint32_t seed = 1800;
    struct Case {
        int64_t head_dim;
        tu::RopeCase c;  // freq factors drawn below when with_ff
        bool with_ff;
        Layout layout;
    };
    std::vector<Case> cases;
    for (int mode : {GGML_ROPE_TYPE_NORMAL, GGML_ROPE_TYPE_NEOX}) {
        for (bool yarn : {false, true}) {
            for (bool ff : {false, true}) {
                Case k;
                k.head_dim = ff ? 10 : 8;
                k.c.mode = mode;
                k.c.n_dims = ff ? 6 : 8;  // with freq factors, a partial rotation too
                k.with_ff = ff;
                k.layout = yarn ? Layout::Permuted12 : Layout::Contiguous;
                if (yarn) {
                    k.c.ext_factor = 1.0f;
                    k.c.freq_scale = 0.25f;
                    k.c.n_ctx_orig = 64;
                    k.c.attn_factor = 0.8f;
                    k.c.freq_base = 500.0f;
                }
                cases.push_back(k);
            }
        }
    }
    for (const Case & k : cases) {
        GradCheck g(seed++);
        const int64_t n_head = 3, n_tokens = 5;
        ggml_tensor * x = g.input({k.head_dim, n_head, n_tokens, 1}, k.layout);
        const std::vector<int32_t> pos = {0, 7, 3, 250, 7};
        ggml_tensor * p = g.ints({n_tokens, 1, 1, 1}, pos);
        tu::RopeCase rc = k.c;
        ggml_tensor * c = nullptr;
        if (k.with_ff) {
            Arr fa(Shape{k.c.n_dims / 2, 1, 1, 1});
            std::uniform_real_distribution<double> d(0.5, 4.0);
            for (double & v : fa.v) v = d(g.rng());
            c = g.constant(fa);
            rc.freq_factors = tu::to_double(c);
        }
        ggml_tensor * f = ggml_rope_ext(g.ctx(), x, p, c, rc.n_dims, rc.mode, rc.n_ctx_orig, rc.freq_base, rc.freq_scale,
                                        rc.ext_factor, rc.attn_factor, rc.beta_fast, rc.beta_slow);
        g.run(f, [&](const std::vector<Arr> & in) { return Arr(in[0].ne, tu::ref_rope(in[0].v, in[0].ne, pos, rc)); },
              std::string("rope ") + (rc.mode == GGML_ROPE_TYPE_NEOX ? "neox" : "normal") + (rc.ext_factor != 0.0f ? " yarn" : "") +
                  (k.with_ff ? " freq factors, n_dims 6 of 10" : "") + " " + layout_name(k.layout));
    }
}

// ============================================================================================
// loss

TEST(Grad, CrossEntropyLoss) {
    uint32_t seed = 1900;
    for (bool one_hot : {false, true}) {
        for (Layout l : {Layout::Contiguous, Layout::Transposed}) {
            GradCheck g(seed++);
            const Shape ne = {11, 4, 2, 1};
            ggml_tensor * a = g.input(ne, l, GGML_TYPE_F32, Dist{-3.0, 3.0, false});
            Arr t(ne);
            std::uniform_real_distribution<double> d(-2.0, 2.0);
            for (int64_t row = 0; row < ne[1] * ne[2]; row++) {
                double s = 0.0;
                for (int64_t i = 0; i < ne[0]; i++) s += (t.v[row * ne[0] + i] = one_hot ? 0.0 : std::exp(d(g.rng())));
                if (one_hot) t.v[row * ne[0] + (int64_t) (g.rng()() % (uint32_t) ne[0])] = 1.0;
                else for (int64_t i = 0; i < ne[0]; i++) t.v[row * ne[0] + i] /= s;
            }
            ggml_tensor * b = g.constant(t);
            g.run(ggml_cross_entropy_loss(g.ctx(), a, b), [](const std::vector<Arr> & in) {
                const Arr & x = in[0], & p = in[1];
                const int64_t nr = x.ne[1] * x.ne[2] * x.ne[3];
                Arr r(Shape{1, 1, 1, 1});
                for (int64_t row = 0; row < nr; row++) {
                    const double * xr = x.v.data() + row * x.ne[0];
                    double mx = -kInf, s = 0.0;
                    for (int64_t i = 0; i < x.ne[0]; i++) mx = std::max(mx, xr[i]);
                    for (int64_t i = 0; i < x.ne[0]; i++) s += std::exp(xr[i] - mx);
                    for (int64_t i = 0; i < x.ne[0]; i++) {
                        const double pi = p.v[row * x.ne[0] + i];
                        if (pi != 0.0) r.v[0] -= pi * (xr[i] - mx - std::log(s));
                    }
                }
                r.v[0] /= (double) nr;
                return r;
            }, std::string("cross_entropy_loss ") + (one_hot ? "one-hot" : "soft") + " targets, logits " + layout_name(l));
        }
    }
}

// ============================================================================================
// backward-pass ops as ops

TEST(Grad, Acc) {
    uint32_t seed = 2000;
    struct Case {
        Shape b;
        int64_t s1, s2, s3, off;  // in elements of a [8, 6, 3, 2]
    };
    const Case cases[] = {
        {{3, 2, 2, 1}, 8, 48, 144, 1 + 2 * 8},
        {{5, 1, 1, 1}, 8, 48, 144, 40},
        {{2, 3, 2, 2}, 16, 48, 144, 3 + 48},
        {{4, 3, 1, 1}, 2, 48, 144, 5},  // overlapping rows: elements get b's values twice
    };
    for (const Case & c : cases) {
        GradCheck g(seed++);
        ggml_tensor * a = g.input({8, 6, 3, 2});
        ggml_tensor * b = g.input(c.b, c.b[1] > 1 ? Layout::Transposed : Layout::Contiguous);
        ggml_tensor * f = ggml_acc(g.ctx(), a, b, c.s1 * 4, c.s2 * 4, c.s3 * 4, c.off * 4);
        g.run(f, [&](const std::vector<Arr> & in) {
            Arr r = in[0];
            in[1].each([&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                r.v[(size_t) (c.off + i0 + i1 * c.s1 + i2 * c.s2 + i3 * c.s3)] += in[1](i0, i1, i2, i3);
            });
            return r;
        }, "acc b " + shape_str(c.b) + " offset " + std::to_string(c.off));
    }
}

// ============================================================================================
// compositions: shared inputs (contributions add up) and an attention block

TEST(Grad, SharedInputs) {
    GradCheck g(2100);
    ggml_context * c = g.ctx();
    ggml_tensor * x = g.input({6, 4, 1, 1});
    ggml_tensor * y = g.input({6, 4, 1, 1});
    ggml_tensor * w = g.input({6, 3, 1, 1});
    // x is read by mul, sqr and mul_mat: its gradient is the sum of three contributions.
    ggml_tensor * f = ggml_add(c, ggml_mul(c, x, y), ggml_sqr(c, x));
    ggml_tensor * h = ggml_mul_mat(c, w, x);                 // [3, 4]
    ggml_tensor * f2 = ggml_mul_mat(c, ggml_cont(c, ggml_transpose(c, h)), ggml_cont(c, ggml_transpose(c, f)));  // [4, 6]
    g.run(f2, [](const std::vector<Arr> & in) {
        const Arr & x = in[0], & y = in[1], & w = in[2];
        Arr f(x.ne);
        for (size_t i = 0; i < f.v.size(); i++) f.v[i] = x.v[i] * y.v[i] + x.v[i] * x.v[i];
        Arr h = mul_mat_ref(w, x);  // [3, 4]
        Arr ht(Shape{4, 3, 1, 1}), ft(Shape{4, 6, 1, 1});
        ht.each([&](int64_t i0, int64_t i1, int64_t, int64_t) { ht(i0, i1) = h(i1, i0); });
        ft.each([&](int64_t i0, int64_t i1, int64_t, int64_t) { ft(i0, i1) = f(i1, i0); });
        return mul_mat_ref(ht, ft);
    }, "x read by mul, sqr and mul_mat");
}

// softmax(K^T Q * scale + causal mask) V with grouped-query heads, as the llama graph computes
// attention in training mode.
TEST(Grad, Attention) {
    GradCheck g(2200);
    ggml_context * c = g.ctx();
    const int64_t hd = 8, T = 5, n_head = 4, n_head_kv = 2;
    ggml_tensor * q = g.input({hd, T, n_head, 1}, Layout::Permuted12);      // [hd, T, n_head] from [hd, n_head, T]
    ggml_tensor * k = g.input({hd, T, n_head_kv, 1}, Layout::Permuted12);
    ggml_tensor * v = g.input({T, hd, n_head_kv, 1});
    Arr m(Shape{T, T, 1, 1});
    m.each([&](int64_t i0, int64_t i1, int64_t, int64_t) { m(i0, i1) = i0 > i1 ? -kInf : 0.0; });
    ggml_tensor * mask = g.constant(m);
    const float scale = 1.0f / std::sqrt((float) hd);
    ggml_tensor * kq = ggml_soft_max_ext(c, ggml_mul_mat(c, k, q), mask, scale, 0.0f);
    ggml_tensor * kqv = ggml_mul_mat(c, v, kq);  // [hd, T, n_head]
    ggml_tensor * out = ggml_cont_2d(c, ggml_permute(c, kqv, 0, 2, 1, 3), hd * n_head, T);
    g.run(out, [&](const std::vector<Arr> & in) {
        const Arr kq_ref = soft_max_ref(mul_mat_ref(in[1], in[0]), &in[3], scale, 0.0);
        const Arr o = mul_mat_ref(in[2], kq_ref);  // [hd, T, n_head]
        Arr r(Shape{hd * n_head, T, 1, 1});
        o.each([&](int64_t d, int64_t t, int64_t h, int64_t) { r(d + hd * h, t) = o(d, t, h); });
        return r;
    }, "attention (gqa, causal)");
}

// The fused op: gradients of q, k and v (grouped heads, causal mask, q and k permuted views as
// the llama graph passes them), plain, with ALiBi and with a softcap.
TEST(Grad, FlashAttention) {
    struct Case { float max_bias, softcap; const char * name; };
    for (const Case & cs : {Case{0.0f, 0.0f, "flash_attn_ext (gqa, causal)"}, Case{6.0f, 0.0f, "flash_attn_ext alibi"},
                            Case{0.0f, 2.0f, "flash_attn_ext softcap"}}) {
        GradCheck g(2210);
        ggml_context * c = g.ctx();
        const int64_t hd = 8, T = 5, n_head = 4, n_head_kv = 2;
        ggml_tensor * q = g.input({hd, T, n_head, 1}, Layout::Permuted12);
        ggml_tensor * k = g.input({hd, T, n_head_kv, 1}, Layout::Permuted12);
        ggml_tensor * v = g.input({hd, T, n_head_kv, 1});
        Arr m(Shape{T, T, 1, 1});
        m.each([&](int64_t i0, int64_t i1, int64_t, int64_t) { m(i0, i1) = i0 > i1 ? -kInf : -0.5 * (double) (i1 - i0); });
        ggml_tensor * mask = g.constant(m);
        const float scale = 1.0f / std::sqrt((float) hd);
        ggml_tensor * out = ggml_flash_attn_ext(c, q, k, v, mask, scale, cs.max_bias, cs.softcap);
        g.run(out, [&](const std::vector<Arr> & in) {
            Arr r(Shape{hd, n_head, T, 1});
            r.v = tu::ref_flash_attn(in[0].v, in[0].ne, in[1].v, in[1].ne, in[2].v, in[2].ne, &in[3].v, in[3].ne, scale,
                                     cs.max_bias, cs.softcap);
            return r;
        }, cs.name);
    }
}

// ============================================================================================
// the engine: accumulators

// With grad_accs, the gradient is added into the given tensors: two computes without a reset
// give twice the gradient, ggml_graph_reset zeroes them.
TEST(GradEngine, Accumulators) {
    tu::Ctx ctx;
    std::mt19937 rng(2300);
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 5, 3);
    ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 5, 4);
    tu::fill_uniform(x, rng);
    tu::fill_uniform(w, rng);
    ggml_set_param(w);
    ggml_tensor * loss = ggml_sum(ctx, ggml_sqr(ctx, ggml_mul_mat(ctx, w, x)));
    ggml_set_loss(loss);
    ggml_cgraph * gf = ggml_new_graph_custom(ctx, 1024, true);
    ggml_build_forward_expand(gf, loss);
    std::vector<ggml_tensor *> accs((size_t) ggml_graph_n_nodes(gf), nullptr);
    ggml_tensor * acc = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 5, 4);
    for (int i = 0; i < ggml_graph_n_nodes(gf); i++) {
        if (ggml_graph_node(gf, i) == w) accs[(size_t) i] = acc;
    }
    ggml_build_backward_expand(ctx, gf, accs.data());
    ASSERT_EQ(ggml_graph_get_grad_acc(gf, w), acc);

    // d/dw sum((w x)^2) = 2 (w x) x^T
    const Values xv = tu::to_double(x), wv = tu::to_double(w);
    Values ref(20, 0.0);
    for (int m = 0; m < 4; m++)
        for (int n = 0; n < 3; n++) {
            double y = 0.0;
            for (int k = 0; k < 5; k++) y += wv[(size_t) (k + 5 * m)] * xv[(size_t) (k + 5 * n)];
            for (int k = 0; k < 5; k++) ref[(size_t) (k + 5 * m)] += 2.0 * y * xv[(size_t) (k + 5 * n)];
        }
    ggml_graph_reset(gf);
    ASSERT_EQ(ggml_graph_compute_with_ctx(ctx, gf, 2), GGML_STATUS_SUCCESS);
    tu::expect_close(tu::to_double(acc), ref, 1e-5, 1e-6, "one step");
    ASSERT_EQ(ggml_graph_compute_with_ctx(ctx, gf, 2), GGML_STATUS_SUCCESS);
    Values twice = ref;
    for (double & v : twice) v *= 2.0;
    tu::expect_close(tu::to_double(acc), twice, 1e-5, 1e-6, "two steps accumulated");
    ggml_graph_reset(gf);
    for (double v : tu::to_double(acc)) EXPECT_EQ(v, 0.0);
}


// ggml_mul_mat_set_prec reaches the backward product: the gradient with respect to the
// activations of a Q4_0 layer with GGML_PREC_INT8 comes from an out_prod of that precision and
// stays close to the F32 one (int8 products of both operands: ~1e-2 relative).
TEST(GradEngine, MulMatPrecisionReachesTheBackwardProduct) {
    const int64_t K = 256, M = 64, N = 24;
    std::vector<float> dx[2];
    for (int with_prec = 0; with_prec < 2; with_prec++) {
        tu::Ctx ctx(64u << 20);
        std::mt19937 rng(7);
        ggml_tensor * wf = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, M);
        tu::fill_uniform(wf, rng);
        ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, K, M);
        ggml_quantize_chunk(GGML_TYPE_Q4_0, (const float *) wf->data, w->data, 0, M, K, nullptr);
        ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);
        tu::fill_uniform(x, rng);
        ggml_set_param(x);
        ggml_tensor * y = ggml_mul_mat(ctx, w, x);
        if (with_prec) ggml_mul_mat_set_prec(y, GGML_PREC_INT8);
        ggml_tensor * loss = ggml_sum(ctx, ggml_sqr(ctx, y));
        ggml_set_loss(loss);
        ggml_cgraph * g = ggml_new_graph_custom(ctx, 256, true);
        ggml_build_forward_expand(g, loss);
        ggml_build_backward_expand(ctx, g, nullptr);
        int n_out_prod = 0;
        for (int i = 0; i < ggml_graph_n_nodes(g); i++) {
            ggml_tensor * t = ggml_graph_node(g, i);
            if (t->op != GGML_OP_OUT_PROD) continue;
            n_out_prod++;
            EXPECT_EQ(t->op_params[0], with_prec ? (int32_t) GGML_PREC_INT8 : (int32_t) GGML_PREC_DEFAULT);
        }
        EXPECT_EQ(n_out_prod, 1);
        ggml_graph_reset(g);
        ASSERT_EQ(ggml_graph_compute_with_ctx(ctx, g, 2), GGML_STATUS_SUCCESS);
        ggml_tensor * gx = ggml_graph_get_grad(g, x);
        dx[with_prec].assign((const float *) gx->data, (const float *) gx->data + K * N);
    }
    double num = 0, den = 0;
    for (size_t i = 0; i < dx[0].size(); i++) {
        num += (dx[1][i] - dx[0][i]) * (double) (dx[1][i] - dx[0][i]);
        den += (double) dx[0][i] * dx[0][i];
    }
    EXPECT_LT(std::sqrt(num / den), 2e-2) << "int8 backward product too far from F32";
}

}  // namespace
