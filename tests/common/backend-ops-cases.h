// backend-ops-cases.h - the op cases of test-backend-ops (and of the CUDA kernels' host
// emulator test): small graphs of every op on the shapes and types the op tests use, their
// inputs (fixed random data), and the normalized error they are compared with.
#pragma once

#include <gtest/gtest.h>

#include "ggml.h"
#include "ggml-backend.h"
#include "random-blocks.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace bocases {
namespace {

// ---- inputs ---------------------------------------------------------------------------------
struct Fill {
    enum Kind { Uniform, Indices, Causal, Values } kind = Uniform;
    float lo = -1.0f, hi = 1.0f;  // Uniform
    int32_t n = 1;                // Indices: in [0, n); Causal: the mask's n_past
    std::vector<float> values;    // Values (repeated to fill)
};

Fill uniform(float lo, float hi) { Fill f; f.lo = lo; f.hi = hi; return f; }
Fill indices(int32_t n) { Fill f; f.kind = Fill::Indices; f.n = n; return f; }
Fill causal(int32_t n_past) { Fill f; f.kind = Fill::Causal; f.n = n_past; return f; }
Fill values(std::vector<float> v) { Fill f; f.kind = Fill::Values; f.values = std::move(v); return f; }

// What a case's builder uses to make its inputs (contiguous leafs, filled after allocation).
struct Maker {
    ggml_context * ctx;
    std::vector<std::pair<ggml_tensor *, Fill>> inputs;

    ggml_tensor * in(ggml_type type, std::vector<int64_t> ne, Fill fill = Fill()) {
        while (ne.size() < 4) ne.push_back(1);
        ggml_tensor * t = ggml_new_tensor(ctx, type, 4, ne.data());
        inputs.push_back({ t, fill });
        return t;
    }
};

struct Built {
    ggml_tensor * node;  // what the graph computes
    ggml_tensor * out;   // what is compared (a contiguous tensor: node, or the tensor it writes into)
    std::vector<ggml_tensor *> first = {};  // expanded into the graph before node, in this order (a graph order to keep)
};

struct Case {
    std::string name;
    std::function<Built(Maker &)> build;
    double tol;  // largest normalized squared error: sum (x - ref)^2 / sum ref^2
};

std::vector<float> input_values(const ggml_tensor * t, const Fill & f, uint32_t seed) {
    const int64_t n = ggml_nelements(t);
    std::vector<float> v((size_t) n);
    std::mt19937 rng(seed);
    switch (f.kind) {
        case Fill::Uniform: {
            std::uniform_real_distribution<float> d(f.lo, f.hi);
            for (float & x : v) x = d(rng);
            break;
        }
        case Fill::Indices: {
            std::uniform_int_distribution<int32_t> d(0, f.n - 1);
            for (float & x : v) x = (float) d(rng);
            break;
        }
        case Fill::Causal: {  // [n_kv, n_q, ...]: key j hidden from query i when j > n_past + i
            for (int64_t i = 0; i < n; i++) {
                const int64_t j = i % t->ne[0], q = (i / t->ne[0]) % t->ne[1];
                v[(size_t) i] = j > f.n + q ? -INFINITY : 0.0f;
            }
            break;
        }
        case Fill::Values:
            for (int64_t i = 0; i < n; i++) v[(size_t) i] = f.values[(size_t) i % f.values.size()];
            break;
    }
    return v;
}

// The bytes of t (contiguous) holding the values v.
std::vector<uint8_t> encode(const ggml_tensor * t, const std::vector<float> & v) {
    std::vector<uint8_t> bytes(ggml_nbytes(t));
    const int64_t n = (int64_t) v.size();
    switch (t->type) {
        case GGML_TYPE_F32: memcpy(bytes.data(), v.data(), bytes.size()); break;
        case GGML_TYPE_F16: ggml_fp32_to_fp16_row(v.data(), (ggml_fp16_t *) bytes.data(), n); break;
        case GGML_TYPE_BF16: ggml_fp32_to_bf16_row(v.data(), (ggml_bf16_t *) bytes.data(), n); break;
        case GGML_TYPE_I32:
            for (int64_t i = 0; i < n; i++) ((int32_t *) bytes.data())[i] = (int32_t) v[(size_t) i];
            break;
        case GGML_TYPE_I64:
            for (int64_t i = 0; i < n; i++) ((int64_t *) bytes.data())[i] = (int64_t) v[(size_t) i];
            break;
        default:
            if (ggml_quantize_supported(t->type) && !ggml_quantize_requires_imatrix(t->type)) {
                ggml_quantize_chunk(t->type, v.data(), bytes.data(), 0, ggml_nrows(t), t->ne[0], nullptr);
            } else {
                // IQ types without a quantizer here (or with one that needs an importance matrix):
                // random blocks, seeded by the values so that a case's inputs stay fixed
                uint32_t seed = 2166136261u;  // FNV-1a of the values' bits
                for (const float x : v) {
                    uint32_t bits;
                    memcpy(&bits, &x, 4);
                    seed = (seed ^ bits) * 16777619u;
                }
                random_iq_blocks(t->type, bytes.data(), (int64_t) (bytes.size() / ggml_type_size(t->type)), seed);
            }
            break;
    }
    return bytes;
}

// t's values as floats (t contiguous, any type with a conversion).
std::vector<float> decode(const ggml_tensor * t) {
    std::vector<uint8_t> bytes(ggml_nbytes(t));
    ggml_backend_tensor_get(t, bytes.data(), 0, bytes.size());
    const int64_t n = ggml_nelements(t);
    std::vector<float> v((size_t) n);
    if (t->type == GGML_TYPE_F32) {
        memcpy(v.data(), bytes.data(), bytes.size());
    } else if (t->type == GGML_TYPE_I32) {
        for (int64_t i = 0; i < n; i++) v[(size_t) i] = (float) ((const int32_t *) bytes.data())[i];
    } else {
        ggml_get_type_traits(t->type)->to_float(bytes.data(), v.data(), n);
    }
    return v;
}

// ---- a case's graph -------------------------------------------------------------------------
// The case built in a no-alloc context of its own (ggml_free(g.ctx) frees it all).
struct CaseGraph {
    ggml_context * ctx = nullptr;
    Maker mk{ nullptr, {} };
    Built b{};
    ggml_cgraph * gf = nullptr;
};

CaseGraph build_graph(const Case & c) {
    CaseGraph g;
    ggml_init_params ip = { 256 * ggml_tensor_overhead() + ggml_graph_overhead_custom(256, false), nullptr, true };
    g.ctx = ggml_init(ip);
    g.mk.ctx = g.ctx;
    g.b = c.build(g.mk);
    g.gf = ggml_new_graph_custom(g.ctx, 256, false);
    for (ggml_tensor * t : g.b.first) ggml_build_forward_expand(g.gf, t);
    ggml_build_forward_expand(g.gf, g.b.node);
    return g;
}

// The first node that supported() refuses, as "op (type)"; empty when it takes them all.
std::string first_unsupported(ggml_cgraph * gf, const std::function<bool(const ggml_tensor *)> & supported) {
    for (int i = 0; i < ggml_graph_n_nodes(gf); i++) {
        const ggml_tensor * n = ggml_graph_node(gf, i);
        if (!supported(n)) return std::string(ggml_op_desc(n)) + " (" + ggml_type_name(n->type) + ")";
    }
    return std::string();
}

// Writes every input of an allocated case from its fill, with seeds seed, seed + 1, ...
void set_inputs(const Maker & mk, uint32_t seed) {
    for (const auto & in : mk.inputs) {
        const std::vector<uint8_t> bytes = encode(in.first, input_values(in.first, in.second, seed++));
        ggml_backend_tensor_set(in.first, bytes.data(), 0, bytes.size());
    }
}

// sum (x - ref)^2 / sum ref^2, with NaN / inf where they differ counted as a mismatch.
double nmse(const std::vector<float> & x, const std::vector<float> & ref, size_t * bad) {
    double num = 0.0, den = 0.0;
    *bad = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        const bool fx = std::isfinite(x[i]), fr = std::isfinite(ref[i]);
        if (!fx || !fr) {
            if (!(std::isnan(x[i]) && std::isnan(ref[i])) && x[i] != ref[i]) (*bad)++;
            continue;
        }
        num += ((double) x[i] - ref[i]) * ((double) x[i] - ref[i]);
        den += (double) ref[i] * ref[i];
    }
    return den > 0.0 ? num / den : num;
}

// ---- the cases ------------------------------------------------------------------------------
const ggml_type kWeightTypes[] = {
    GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q8_0,
    GGML_TYPE_IQ4_NL, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K,
    GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS, GGML_TYPE_IQ2_S, GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ3_S, GGML_TYPE_IQ1_S, GGML_TYPE_IQ1_M,
    GGML_TYPE_IQ4_XS, GGML_TYPE_TQ1_0, GGML_TYPE_TQ2_0,
};

// mul_mat tolerance (normalized mean squared error) for n columns: the CPU multiplies quantized
// weights with 8-bit activations, and so does the GPU up to MMV_MAX_COLS (8) columns (the same
// bytes: only the order of additions differs), with F16 activations beyond; F16 / BF16 weights
// with activations rounded to F16 / BF16.
double mm_tol(ggml_type t, int64_t n = 1) {
    if (t == GGML_TYPE_F32) return 1e-9;
    if (t == GGML_TYPE_F16) return 1e-6;
    if (t == GGML_TYPE_BF16) return 1e-4;
    return n <= 8 ? 1e-9 : 2e-4;
}

std::vector<Case> make_cases() {
    std::vector<Case> cs;
    auto add = [&](std::string name, std::function<Built(Maker &)> f, double tol = 1e-9) { cs.push_back({ std::move(name), std::move(f), tol }); };
    auto same = [](ggml_tensor * t) { return Built{ t, t }; };

    // elementwise, with broadcasting and F16 / BF16
    for (ggml_type t : { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16 }) {
        const std::string ts = ggml_type_name(t);
        const double tol = t == GGML_TYPE_F32 ? 1e-10 : 1e-5;
        add("add " + ts, [=](Maker & m) { return same(ggml_add(m.ctx, m.in(t, {37, 5, 3, 2}), m.in(GGML_TYPE_F32, {37, 1, 3, 1}))); }, tol);
        add("sub " + ts, [=](Maker & m) { return same(ggml_sub(m.ctx, m.in(t, {37, 5, 3, 2}), m.in(t, {1, 5, 1, 1}))); }, tol);
        add("mul " + ts, [=](Maker & m) { return same(ggml_mul(m.ctx, m.in(t, {37, 5, 3, 2}), m.in(GGML_TYPE_F32, {37, 5, 3, 2}))); }, tol);
        add("div " + ts, [=](Maker & m) { return same(ggml_div(m.ctx, m.in(t, {37, 5, 3, 2}), m.in(GGML_TYPE_F32, {37, 1, 1, 1}, uniform(0.5f, 2.0f)))); }, tol);
    }
    add("add1", [=](Maker & m) { return same(ggml_add1(m.ctx, m.in(GGML_TYPE_F32, {33, 4}), m.in(GGML_TYPE_F32, {1}))); });
    add("add permuted", [=](Maker & m) {
        ggml_tensor * a = ggml_permute(m.ctx, m.in(GGML_TYPE_F32, {7, 5, 3}), 1, 0, 2, 3);
        return same(ggml_add(m.ctx, a, m.in(GGML_TYPE_F32, {5, 7, 3})));
    });
    add("add inplace", [=](Maker & m) {
        ggml_tensor * a = m.in(GGML_TYPE_F32, {40, 6});
        return Built{ ggml_add_inplace(m.ctx, a, m.in(GGML_TYPE_F32, {40, 1})), a };
    });
    add("scale", [=](Maker & m) { return same(ggml_scale(m.ctx, m.in(GGML_TYPE_F32, {33, 4, 3}), 0.37f)); });
    add("sqr", [=](Maker & m) { return same(ggml_sqr(m.ctx, m.in(GGML_TYPE_F32, {33, 4, 3}))); });
    add("sqrt", [=](Maker & m) { return same(ggml_sqrt(m.ctx, m.in(GGML_TYPE_F32, {33, 4, 3}, uniform(0.01f, 4.0f)))); });
    add("log", [=](Maker & m) { return same(ggml_log(m.ctx, m.in(GGML_TYPE_F32, {33, 4, 3}, uniform(0.01f, 4.0f)))); });
    for (int u = 0; u < GGML_UNARY_OP_COUNT; u++) {
        const ggml_unary_op op = (ggml_unary_op) u;
        add(std::string("unary ") + ggml_unary_op_name(op), [=](Maker & m) {
            return same(ggml_unary(m.ctx, m.in(GGML_TYPE_F32, {33, 4, 3}, uniform(-6.0f, 6.0f)), op));
        }, 1e-10);
        add(std::string("unary_back ") + ggml_unary_op_name(op), [=](Maker & m) {
            return same(ggml_unary_back(m.ctx, m.in(GGML_TYPE_F32, {33, 4, 3}), m.in(GGML_TYPE_F32, {33, 4, 3}, uniform(-6.0f, 6.0f)), op));
        }, 1e-10);
    }
    add("unary silu f16", [=](Maker & m) { return same(ggml_silu(m.ctx, m.in(GGML_TYPE_F16, {64, 3}, uniform(-6.0f, 6.0f)))); }, 1e-6);

    // reductions
    add("sum", [=](Maker & m) { return same(ggml_sum(m.ctx, m.in(GGML_TYPE_F32, {37, 5, 3, 2}))); });
    add("sum_rows", [=](Maker & m) { return same(ggml_sum_rows(m.ctx, m.in(GGML_TYPE_F32, {1031, 5, 3}))); });
    add("mean", [=](Maker & m) { return same(ggml_mean(m.ctx, m.in(GGML_TYPE_F32, {37, 5, 3}))); });
    add("argmax", [=](Maker & m) { return same(ggml_argmax(m.ctx, m.in(GGML_TYPE_F32, {1000, 7}))); }, 0.0);
    add("repeat", [=](Maker & m) { return same(ggml_repeat(m.ctx, m.in(GGML_TYPE_F32, {5, 1, 3}), m.in(GGML_TYPE_F32, {10, 4, 3, 2}))); }, 0.0);
    for (int dim = 0; dim < 4; dim++) {
        add("concat dim " + std::to_string(dim), [=](Maker & m) {
            std::vector<int64_t> na = {4, 3, 2, 2}, nb = na;
            nb[dim] = 5;
            return same(ggml_concat(m.ctx, m.in(GGML_TYPE_F32, na), m.in(GGML_TYPE_F32, nb), dim));
        }, 0.0);
    }

    // normalization, softmax, rope
    for (bool rms : { false, true }) {
        add(rms ? "rms_norm" : "norm", [=](Maker & m) {
            ggml_tensor * x = ggml_permute(m.ctx, m.in(GGML_TYPE_F32, {67, 3, 4}, uniform(-2.0f, 3.0f)), 0, 2, 1, 3);
            return same(rms ? ggml_rms_norm(m.ctx, x, 1e-5f) : ggml_norm(m.ctx, x, 1e-5f));
        }, 1e-10);
        add(rms ? "rms_norm_back" : "norm_back", [=](Maker & m) {
            ggml_tensor * g = m.in(GGML_TYPE_F32, {67, 5}), * x = m.in(GGML_TYPE_F32, {67, 5}, uniform(-2.0f, 3.0f));
            return same(rms ? ggml_rms_norm_back(m.ctx, g, x, 1e-5f) : ggml_norm_back(m.ctx, g, x, 1e-5f));
        }, 1e-10);
    }
    add("diag_mask_inf", [=](Maker & m) { return same(ggml_diag_mask_inf(m.ctx, m.in(GGML_TYPE_F32, {9, 7, 2}), 2)); }, 0.0);
    add("diag_mask_zero", [=](Maker & m) { return same(ggml_diag_mask_zero(m.ctx, m.in(GGML_TYPE_F32, {9, 7, 2}), 2)); }, 0.0);
    add("soft_max", [=](Maker & m) { return same(ggml_soft_max(m.ctx, m.in(GGML_TYPE_F32, {1027, 3, 2}, uniform(-8.0f, 8.0f)))); }, 1e-10);
    for (ggml_type mt : { GGML_TYPE_F32, GGML_TYPE_F16 }) {
        for (float max_bias : { 0.0f, 8.0f }) {
            add(std::string("soft_max_ext mask ") + ggml_type_name(mt) + " max_bias " + std::to_string((int) max_bias), [=](Maker & m) {
                ggml_tensor * x = m.in(GGML_TYPE_F32, {35, 6, 5, 2}, uniform(-4.0f, 4.0f));
                ggml_tensor * mask = m.in(mt, {35, 8}, causal(25));  // rows 0..: fully masked rows never (n_past 25)
                return same(ggml_soft_max_ext(m.ctx, x, mask, 0.125f, max_bias));
            }, 1e-10);
        }
    }
    add("soft_max fully masked rows", [=](Maker & m) {
        return same(ggml_soft_max_ext(m.ctx, m.in(GGML_TYPE_F32, {35, 6, 2}), m.in(GGML_TYPE_F32, {35, 6}, causal(-3)), 1.0f, 0.0f));
    }, 1e-10);
    add("sum_rows f16", [=](Maker & m) { return same(ggml_sum_rows(m.ctx, m.in(GGML_TYPE_F16, {300, 5}))); }, 1e-10);
    // the cache shift: rope in place on an F16 cache viewed [head_dim, n_head_kv, n_cells]
    add("rope inplace f16 cache view", [=](Maker & m) {
        ggml_tensor * cache = m.in(GGML_TYPE_F16, {64 * 2, 9}, uniform(-2.0f, 2.0f));
        ggml_tensor * k = ggml_view_3d(m.ctx, cache, 64, 2, 9, ggml_row_size(GGML_TYPE_F16, 64), cache->nb[1], 0);
        ggml_tensor * d = m.in(GGML_TYPE_I32, {9}, indices(50));
        return Built{ ggml_rope_ext_inplace(m.ctx, k, d, nullptr, 64, GGML_ROPE_TYPE_NORMAL, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f),
                      cache };
    }, 1e-5);
    add("soft_max_back", [=](Maker & m) {
        return same(ggml_soft_max_ext_back(m.ctx, m.in(GGML_TYPE_F32, {35, 6}), m.in(GGML_TYPE_F32, {35, 6}, uniform(0.0f, 0.1f)), 0.5f, 0.0f));
    }, 1e-10);
    for (ggml_type t : { GGML_TYPE_F32, GGML_TYPE_F16 }) {
        for (int mode : { GGML_ROPE_TYPE_NORMAL, GGML_ROPE_TYPE_NEOX }) {
            for (bool yarn : { false, true }) {
                for (bool back : { false, true }) {
                    const std::string name = std::string(back ? "rope_back " : "rope ") + ggml_type_name(t) + (mode ? " neox" : " normal") +
                                             (yarn ? " yarn+ff" : "");
                    add(name, [=](Maker & m) {
                        ggml_tensor * x = m.in(t, {64, 4, 7}, uniform(-2.0f, 2.0f));
                        ggml_tensor * pos = m.in(GGML_TYPE_I32, {7}, indices(100000));
                        ggml_tensor * ff = yarn ? m.in(GGML_TYPE_F32, {24}, uniform(1.0f, 4.0f)) : nullptr;
                        const int n_dims = yarn ? 48 : 64;
                        const float ext = yarn ? 1.0f : 0.0f, fscale = yarn ? 0.25f : 1.0f;
                        auto fn = back ? ggml_rope_ext_back : ggml_rope_ext;
                        return same(fn(m.ctx, x, pos, ff, n_dims, mode, 4096, 10000.0f, fscale, ext, 1.0f, 32.0f, 1.0f));
                    }, t == GGML_TYPE_F32 ? 1e-10 : 1e-5);
                }
            }
        }
    }

    // the keys rotated then written into the cache, the values written by the same index, the
    // queries rotated (a GPU may do all of it in one kernel, as generation's graph orders it): F16
    // and F32 caches (F32: the values' a view of every other row), partial rotation (dims past
    // n_dims copied), I32 / I64 indices, a transposed values' cache (without flash attention: a
    // cell of each dimension is a row of one value); the ropes' results are read again
    for (int variant = 0; variant < 3; variant++) {
        const ggml_type ct = variant == 1 ? GGML_TYPE_F32 : GGML_TYPE_F16;
        const bool vt = variant == 2;
        add(std::string("rope then set_rows k v, rope q ") + ggml_type_name(ct) + " cache" + (vt ? " v transposed" : ""), [=](Maker & m) {
            const bool f16 = ct == GGML_TYPE_F16;
            ggml_tensor * pos = m.in(GGML_TYPE_I32, {3}, values({ 5, 9, 1000 }));
            auto rope = [&](ggml_tensor * x) {
                return ggml_rope_ext(m.ctx, x, pos, nullptr, f16 ? 48 : 64, f16 ? GGML_ROPE_TYPE_NEOX : GGML_ROPE_TYPE_NORMAL, 4096,
                                     10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
            };
            ggml_tensor * rows = ggml_reshape_2d(m.ctx, rope(m.in(GGML_TYPE_F32, {64, 4, 3}, uniform(-2.0f, 2.0f))), 256, 3);
            ggml_tensor * cache = m.in(ct, {256, 10}, uniform(-1.0f, 1.0f));
            ggml_tensor * idx = f16 ? m.in(GGML_TYPE_I32, {3}, values({ 7, 2, 9 })) : m.in(GGML_TYPE_I64, {3}, values({ 0, 9, 4 }));
            ggml_tensor * sr = ggml_set_rows(m.ctx, cache, rows, idx);
            ggml_tensor * vcache = vt ? m.in(ct, {10, 96}, uniform(-1.0f, 1.0f)) : m.in(ct, {96, f16 ? 10 : 20}, uniform(-1.0f, 1.0f));
            ggml_tensor * vdst = vt ? ggml_view_3d(m.ctx, vcache, 1, 10, 96, ggml_element_size(vcache), vcache->nb[1], 0)
                               : f16 ? vcache : ggml_view_2d(m.ctx, vcache, 96, 10, 2 * vcache->nb[1], 0);
            ggml_tensor * v = m.in(GGML_TYPE_F32, {96, 3});
            ggml_tensor * vrows = vt ? ggml_view_3d(m.ctx, v, 1, 3, 96, v->nb[1], sizeof(float), 0) : v;
            ggml_tensor * vr = ggml_set_rows(m.ctx, vdst, vrows, idx);
            ggml_tensor * rq = rope(m.in(GGML_TYPE_F32, {64, 8, 3}, uniform(-2.0f, 2.0f)));
            ggml_tensor * kv = vt ? ggml_concat(m.ctx, ggml_reshape_1d(m.ctx, sr, ggml_nelements(sr)),
                                                ggml_reshape_1d(m.ctx, ggml_cont(m.ctx, vr), ggml_nelements(vr)), 0)
                                  : ggml_concat(m.ctx, sr, vr, 0);
            if (f16) kv = ggml_cast(m.ctx, kv, GGML_TYPE_F32);
            auto flat = [&](ggml_tensor * t) { return ggml_reshape_1d(m.ctx, t, ggml_nelements(t)); };
            Built b = same(ggml_concat(m.ctx, ggml_concat(m.ctx, flat(kv), flat(rows), 0), flat(rq), 0));
            b.first = { sr, vr, rq };
            return b;
        }, 1e-10);
    }

    // the same in a prompt without flash attention, the scores product after the queries' rope
    // (reading them permuted, 8 query heads on 4 kv heads): a GPU's rope may write the queries'
    // F16 copy for cuBLAS in the product's order; the rope's own result is read again
    for (int n_q : { 12, 20 }) {
        add("rope then set_rows k v, rope q, then mul_mat scores f16 cache n " + std::to_string(n_q), [=](Maker & m) {
            ggml_tensor * pos = m.in(GGML_TYPE_I32, {n_q}, indices(3000));
            auto rope = [&](ggml_tensor * x) {
                return ggml_rope_ext(m.ctx, x, pos, nullptr, 64, GGML_ROPE_TYPE_NEOX, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
            };
            const int64_t n_kv = 32;
            ggml_tensor * rows = ggml_reshape_2d(m.ctx, rope(m.in(GGML_TYPE_F32, {64, 4, n_q}, uniform(-2.0f, 2.0f))), 256, n_q);
            ggml_tensor * cache = m.in(GGML_TYPE_F16, {256, n_kv}, uniform(-1.0f, 1.0f));
            std::vector<float> cells;
            for (int i = 0; i < n_q; i++) cells.push_back((float) ((7 * i + 3) % n_kv));
            ggml_tensor * idx = m.in(GGML_TYPE_I32, {n_q}, values(cells));
            ggml_tensor * sr = ggml_set_rows(m.ctx, cache, rows, idx);
            ggml_tensor * vr = ggml_set_rows(m.ctx, m.in(GGML_TYPE_F16, {256, n_kv}, uniform(-1.0f, 1.0f)), m.in(GGML_TYPE_F32, {256, n_q}), idx);
            ggml_tensor * rq = rope(m.in(GGML_TYPE_F32, {64, 8, n_q}, uniform(-2.0f, 2.0f)));
            ggml_tensor * k = ggml_view_3d(m.ctx, sr, 64, n_kv, 4, sr->nb[1], ggml_row_size(GGML_TYPE_F16, 64), 0);
            ggml_tensor * kq = ggml_mul_mat(m.ctx, k, ggml_permute(m.ctx, rq, 0, 2, 1, 3));
            auto flat = [&](ggml_tensor * t) { return ggml_reshape_1d(m.ctx, t, ggml_nelements(t)); };
            Built b = same(ggml_concat(m.ctx, ggml_concat(m.ctx, flat(kq), flat(rq), 0), ggml_cast(m.ctx, flat(vr), GGML_TYPE_F32), 0));
            b.first = { sr, vr, rq };
            return b;
        }, 1e-6);  // the GPU's product rounds the queries to F16
    }

    // matrix products: every weight type, generation (few columns) and batches, broadcast planes
    for (ggml_type t : kWeightTypes) {
        for (int64_t n : { 1, 3, 8, 9, 32 }) {
            add(std::string("mul_mat ") + ggml_type_name(t) + " n " + std::to_string(n), [=](Maker & m) {
                return same(ggml_mul_mat(m.ctx, m.in(t, {256, 33}), m.in(GGML_TYPE_F32, {256, n})));
            }, mm_tol(t, n));
        }
        for (int64_t n : { 1, 5, 12 }) {
            add(std::string("mul_mat ") + ggml_type_name(t) + " planes n " + std::to_string(n), [=](Maker & m) {
                return same(ggml_mul_mat(m.ctx, m.in(t, {512, 17, 2, 1}), m.in(GGML_TYPE_F32, {512, n, 4, 3})));
            }, mm_tol(t, n));
        }
        add(std::string("out_prod ") + ggml_type_name(t), [=](Maker & m) {
            return same(ggml_out_prod(m.ctx, m.in(t, {256, 12}), m.in(GGML_TYPE_F32, {7, 12})));
        }, 1e-9);
        add(std::string("get_rows ") + ggml_type_name(t), [=](Maker & m) {
            return same(ggml_get_rows(m.ctx, m.in(t, {256, 20}), m.in(GGML_TYPE_I32, {9}, indices(20))));
        }, 1e-12);  // block scales times levels: a fused multiply-add may round differently
    }
    // a mixture's experts: 6 experts, 2 used per token; b one column per token (gate, up) or one
    // per slot (down); generation, and batches by expert (an expert's planes kGroupCols to a
    // group: 9 tokens one group per expert, 40 tokens two or more)
    for (ggml_type t : kWeightTypes) {
        for (int64_t n_tok : { 1, 9, 40 }) {
            for (int64_t n_b1 : { 1, 2 }) {
                add(std::string("mul_mat_id ") + ggml_type_name(t) + " tokens " + std::to_string(n_tok) + " b cols " + std::to_string(n_b1),
                    [=](Maker & m) {
                        return same(ggml_mul_mat_id(m.ctx, m.in(t, {256, 33, 6}), m.in(GGML_TYPE_F32, {256, n_b1, n_tok}),
                                                    m.in(GGML_TYPE_I32, {2, n_tok}, indices(6))));
                    }, mm_tol(t));
            }
        }
    }
    // the router's choice: argsort both ways, rows with ties (integer values: the stable order),
    // top-k of a softmax
    for (ggml_sort_order o : { GGML_SORT_ORDER_ASC, GGML_SORT_ORDER_DESC }) {
        const std::string os = o == GGML_SORT_ORDER_ASC ? " asc" : " desc";
        add("argsort" + os, [=](Maker & m) { return same(ggml_argsort(m.ctx, m.in(GGML_TYPE_F32, {60, 7, 2}), o)); }, 0.0);
        add("argsort ties" + os, [=](Maker & m) { return same(ggml_argsort(m.ctx, m.in(GGML_TYPE_F32, {37, 4}, indices(5)), o)); }, 0.0);
        add("argsort long rows" + os, [=](Maker & m) { return same(ggml_argsort(m.ctx, m.in(GGML_TYPE_F32, {1000, 3}), o)); }, 0.0);
    }
    add("top_k of soft_max", [=](Maker & m) {
        return same(ggml_cont(m.ctx, ggml_top_k(m.ctx, ggml_soft_max(m.ctx, m.in(GGML_TYPE_F32, {8, 5}, uniform(-4.0f, 4.0f))), 2)));
    }, 0.0);
    // a weight matrix of a million values and more, one column: the GPU takes another path
    for (ggml_type t : { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16 }) {
        add(std::string("mul_mat big weight ") + ggml_type_name(t), [=](Maker & m) {
            return same(ggml_mul_mat(m.ctx, m.in(t, {1024, 1040}), m.in(GGML_TYPE_F32, {1024, 1})));
        }, mm_tol(t));
    }
    for (ggml_type t : { GGML_TYPE_F32, GGML_TYPE_F16 }) {
        const std::string ts = ggml_type_name(t);
        add("mul_mat odd k " + ts, [=](Maker & m) { return same(ggml_mul_mat(m.ctx, m.in(t, {67, 13}), m.in(GGML_TYPE_F32, {67, 2}))); }, mm_tol(t));
        add("mul_mat odd k batch " + ts, [=](Maker & m) { return same(ggml_mul_mat(m.ctx, m.in(t, {67, 13}), m.in(GGML_TYPE_F32, {67, 20}))); }, mm_tol(t));
        // attention's products: keys of a cache view, queries permuted, grouped heads
        add("mul_mat kq " + ts, [=](Maker & m) {
            ggml_tensor * cache = m.in(t, {64 * 2, 40});
            ggml_tensor * k = ggml_view_3d(m.ctx, cache, 64, 40, 2, cache->nb[1], ggml_row_size(t, 64), 0);
            ggml_tensor * q = ggml_permute(m.ctx, m.in(GGML_TYPE_F32, {64, 4, 6}), 0, 2, 1, 3);  // [64, 6 tokens, 4 heads]
            return same(ggml_mul_mat(m.ctx, k, q));
        }, mm_tol(t));
        add("mul_mat kq gen " + ts, [=](Maker & m) {
            ggml_tensor * cache = m.in(t, {64 * 2, 40});
            ggml_tensor * k = ggml_view_3d(m.ctx, cache, 64, 40, 2, cache->nb[1], ggml_row_size(t, 64), 0);
            ggml_tensor * q = ggml_permute(m.ctx, m.in(GGML_TYPE_F32, {64, 4, 1}), 0, 2, 1, 3);
            return same(ggml_mul_mat(m.ctx, k, q));
        }, mm_tol(t));
    }
    // prompt-sized attention products: keys of an F16 cache view against 20 queries of grouped
    // heads, and the values of the transposed V cache against the probabilities
    add("mul_mat kq batch f16", [=](Maker & m) {
        ggml_tensor * cache = m.in(GGML_TYPE_F16, {64 * 2, 40});
        ggml_tensor * k = ggml_view_3d(m.ctx, cache, 64, 40, 2, cache->nb[1], ggml_row_size(GGML_TYPE_F16, 64), 0);
        ggml_tensor * q = ggml_permute(m.ctx, m.in(GGML_TYPE_F32, {64, 4, 20}), 0, 2, 1, 3);
        return same(ggml_mul_mat(m.ctx, k, q));
    }, 1e-6);
    for (int64_t n : { 1, 20 }) {
        add("mul_mat kqv f16 n " + std::to_string(n), [=](Maker & m) {
            ggml_tensor * vcache = m.in(GGML_TYPE_F16, {48, 64 * 2});  // [n_ctx cells, n_embd_v]: transposed
            ggml_tensor * v = ggml_view_3d(m.ctx, vcache, 40, 64, 2, vcache->nb[1], vcache->nb[1] * 64, 0);  // [n_kv, hd, Hkv]
            ggml_tensor * kq = m.in(GGML_TYPE_F32, {40, n, 4}, uniform(0.0f, 0.05f));
            return same(ggml_mul_mat(m.ctx, v, kq));
        }, 1e-6);
    }
    add("out_prod q4_K transposed b", [=](Maker & m) {
        return same(ggml_out_prod(m.ctx, m.in(GGML_TYPE_Q4_K, {256, 12}), ggml_transpose(m.ctx, m.in(GGML_TYPE_F32, {12, 7}))));
    }, 1e-9);
    add("mul_mat transposed b", [=](Maker & m) {
        return same(ggml_mul_mat(m.ctx, m.in(GGML_TYPE_F32, {24, 10}), ggml_transpose(m.ctx, m.in(GGML_TYPE_F32, {12, 24}))));
    });
    add("out_prod transposed b", [=](Maker & m) {
        return same(ggml_out_prod(m.ctx, m.in(GGML_TYPE_F32, {33, 12}), ggml_transpose(m.ctx, m.in(GGML_TYPE_F32, {12, 7}))));
    });
    add("out_prod planes", [=](Maker & m) {
        return same(ggml_out_prod(m.ctx, m.in(GGML_TYPE_F32, {16, 12, 2}), m.in(GGML_TYPE_F32, {7, 12, 4})));
    });
    // GGML_PREC_BF16 (llama-finetune's backward products through quantized weights): operands
    // rounded to BF16 where a backend has fast BF16 products (a GPU's tensor cores), F32 elsewhere
    // (the CPU without AVX512-BF16): ~2e-3 relative apart, a normalized squared error near 1e-5.
    auto out_prod_bf16 = [](ggml_tensor * t) {
        ggml_out_prod_set_prec(t, GGML_PREC_BF16);
        return Built{ t, t };
    };
    for (ggml_type t : { GGML_TYPE_Q4_0, GGML_TYPE_Q6_K, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_F32 }) {
        add(std::string("out_prod prec bf16 ") + ggml_type_name(t) + " transposed b", [=](Maker & m) {
            return out_prod_bf16(ggml_out_prod(m.ctx, m.in(t, {256, 64}), ggml_transpose(m.ctx, m.in(GGML_TYPE_F32, {64, 20}))));
        }, 1e-4);
    }
    add("out_prod prec bf16 planes", [=](Maker & m) {
        return out_prod_bf16(ggml_out_prod(m.ctx, m.in(GGML_TYPE_F32, {16, 48, 2}), m.in(GGML_TYPE_F32, {7, 48, 4})));
    }, 1e-4);
    add("get_rows i32", [=](Maker & m) { return same(ggml_get_rows(m.ctx, m.in(GGML_TYPE_I32, {5, 20}, indices(1000)), m.in(GGML_TYPE_I32, {9}, indices(20)))); }, 0.0);
    add("get_rows 3d", [=](Maker & m) {
        return same(ggml_get_rows(m.ctx, m.in(GGML_TYPE_F32, {16, 10, 3}), m.in(GGML_TYPE_I32, {4, 3}, indices(10))));
    }, 0.0);
    add("get_rows_back", [=](Maker & m) {
        return same(ggml_get_rows_back(m.ctx, m.in(GGML_TYPE_F32, {16, 12}), m.in(GGML_TYPE_I32, {12}, indices(5)), m.in(GGML_TYPE_F32, {16, 5})));
    }, 1e-10);

    // copies: KV cache writes (F16, quantized, transposed V), casts, cont of permuted views
    const ggml_type kCopyTypes[] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1,
                                     GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_IQ4_NL };
    for (ggml_type t : kCopyTypes) {
        const std::string ts = ggml_type_name(t);
        add("cpy f32 -> " + ts + " cache rows", [=](Maker & m) {
            ggml_tensor * cache = m.in(t, {128, 16}, uniform(0.0f, 0.0f));
            ggml_tensor * dst = ggml_view_2d(m.ctx, cache, 128, 5, cache->nb[1], 3 * cache->nb[1]);
            return Built{ ggml_cpy(m.ctx, m.in(GGML_TYPE_F32, {128, 5}), dst), cache };
        }, ggml_is_quantized(t) ? 1e-4 : 0.0);
        add("cast " + ts + " -> f32", [=](Maker & m) { return same(ggml_cast(m.ctx, m.in(t, {256, 3}), GGML_TYPE_F32)); }, 1e-12);
        add("set_rows f32 -> " + ts + " cache", [=](Maker & m) {  // distinct cells, out of order
            ggml_tensor * cache = m.in(t, {128, 16}, uniform(0.0f, 0.0f));
            ggml_tensor * idx = m.in(GGML_TYPE_I32, {5}, values({ 3, 11, 0, 7, 15 }));
            return Built{ ggml_set_rows(m.ctx, cache, m.in(GGML_TYPE_F32, {128, 5}), idx), cache };
        }, ggml_is_quantized(t) ? 1e-4 : 0.0);
    }
    add("set_rows i64 indices", [=](Maker & m) {
        ggml_tensor * cache = m.in(GGML_TYPE_F16, {64, 9}, uniform(-1.0f, 1.0f));
        ggml_tensor * idx = m.in(GGML_TYPE_I64, {3}, values({ 8, 2, 5 }));
        return Built{ ggml_set_rows(m.ctx, cache, m.in(GGML_TYPE_F32, {64, 3}), idx), cache };
    }, 0.0);
    add("set_rows broadcast indices", [=](Maker & m) {  // one index row for the 3 planes of dim 2
        ggml_tensor * dst = m.in(GGML_TYPE_F32, {16, 10, 3, 2});
        ggml_tensor * idx = m.in(GGML_TYPE_I32, {4, 1, 2}, values({ 1, 7, 2, 9, 0, 3, 6, 4 }));
        return Built{ ggml_set_rows(m.ctx, dst, m.in(GGML_TYPE_F32, {16, 4, 3, 2}), idx), dst };
    }, 0.0);
    add("set_rows transposed v -> f16 cache", [=](Maker & m) {  // a cell of each channel is a row of one value
        ggml_tensor * cache = m.in(GGML_TYPE_F16, {32, 24}, uniform(0.0f, 0.0f));  // [n_ctx cells, n_embd_v]
        const size_t es = ggml_element_size(cache);
        ggml_tensor * dst = ggml_view_3d(m.ctx, cache, 1, 32, 24, es, cache->nb[1], 0);
        ggml_tensor * v = m.in(GGML_TYPE_F32, {24, 5});
        ggml_tensor * rows = ggml_view_3d(m.ctx, v, 1, 5, 24, v->nb[1], sizeof(float), 0);
        return Built{ ggml_set_rows(m.ctx, dst, rows, m.in(GGML_TYPE_I32, {5}, values({ 7, 8, 9, 10, 11 }))), cache };
    }, 0.0);
    add("cast q4_K -> f32", [=](Maker & m) { return same(ggml_cast(m.ctx, m.in(GGML_TYPE_Q4_K, {256, 3}), GGML_TYPE_F32)); }, 1e-12);
    add("cast q6_K -> f16", [=](Maker & m) { return same(ggml_cast(m.ctx, m.in(GGML_TYPE_Q6_K, {256, 3}), GGML_TYPE_F16)); }, 1e-12);
    add("cpy transposed v -> f16 cache", [=](Maker & m) {
        ggml_tensor * cache = m.in(GGML_TYPE_F16, {32, 24}, uniform(0.0f, 0.0f));  // [n_ctx cells, n_embd_v]
        ggml_tensor * dst = ggml_view_2d(m.ctx, cache, 5, 24, cache->nb[1], 7 * ggml_element_size(cache));
        return Built{ ggml_cpy(m.ctx, ggml_transpose(m.ctx, m.in(GGML_TYPE_F32, {24, 5})), dst), cache };
    }, 0.0);
    add("cont permuted", [=](Maker & m) { return same(ggml_cont(m.ctx, ggml_permute(m.ctx, m.in(GGML_TYPE_F32, {6, 5, 4, 3}), 2, 0, 3, 1))); }, 0.0);
    add("cont permuted f16", [=](Maker & m) { return same(ggml_cont(m.ctx, ggml_permute(m.ctx, m.in(GGML_TYPE_F16, {6, 5, 4}), 1, 2, 0, 3))); }, 0.0);
    add("cont i32", [=](Maker & m) { return same(ggml_cont(m.ctx, ggml_transpose(m.ctx, m.in(GGML_TYPE_I32, {6, 5}, indices(1 << 24))))); }, 0.0);
    add("dup", [=](Maker & m) { return same(ggml_dup(m.ctx, m.in(GGML_TYPE_F32, {6, 5}))); }, 0.0);

    // fused attention: grouped heads, causal masks (F32, F16), F16 / F32 keys, softcap, ALiBi
    for (ggml_type kt : { GGML_TYPE_F16, GGML_TYPE_F32, GGML_TYPE_BF16 }) {
        for (int64_t n_q : { 1, 7 }) {
            for (int variant = 0; variant < 3; variant++) {
                const std::string name = std::string("flash_attn_ext ") + ggml_type_name(kt) + " n_q " + std::to_string(n_q) +
                                         (variant == 1 ? " f16 mask softcap" : variant == 2 ? " alibi" : "");
                add(name, [=](Maker & m) {
                    const int64_t D = 64, n_kv = 77, H = 4, Hkv = 2;
                    ggml_tensor * q = ggml_permute(m.ctx, m.in(GGML_TYPE_F32, {D, H, n_q}), 0, 2, 1, 3);  // [D, n_q, H]
                    ggml_tensor * k = m.in(kt, {D, n_kv, Hkv});
                    ggml_tensor * v = m.in(kt, {D, n_kv, Hkv});
                    ggml_tensor * mask = m.in(variant == 1 ? GGML_TYPE_F16 : GGML_TYPE_F32, {n_kv, n_q}, causal(n_kv - n_q - 3));
                    return same(ggml_flash_attn_ext(m.ctx, q, k, v, mask, 0.125f, variant == 2 ? 8.0f : 0.0f, variant == 1 ? 5.0f : 0.0f));
                }, kt == GGML_TYPE_F32 ? 1e-10 : 1e-7);
            }
        }
    }
    // long caches with few queries (generation): a backend may split the keys between blocks
    for (int64_t n_q : { 1, 2 }) {
        add("flash_attn_ext long kv n_q " + std::to_string(n_q), [=](Maker & m) {
            const int64_t D = 128, n_kv = 1500, H = 8, Hkv = 2;
            ggml_tensor * q = ggml_permute(m.ctx, m.in(GGML_TYPE_F32, {D, H, n_q}), 0, 2, 1, 3);
            ggml_tensor * mask = m.in(GGML_TYPE_F32, {n_kv, n_q}, causal(n_kv - 700));  // the last 700 keys hidden
            return same(ggml_flash_attn_ext(m.ctx, q, m.in(GGML_TYPE_F16, {D, n_kv, Hkv}), m.in(GGML_TYPE_F16, {D, n_kv, Hkv}), mask,
                                            0.088f, 0.0f, 0.0f));
        }, 1e-7);
    }
    // prompts (many queries): a backend may tile queries and keys; partial tiles of both, two
    // batches, grouped heads, D 64 and 128, Dv != D, masks F32 / F16, softcap, ALiBi, no mask,
    // queries that see no key; F16 caches with D = Dv (tensor-core kernels) in each of these, F32 and BF16 ones too
    struct FaPrompt { ggml_type kt; int64_t D, Dv, n_q, n_kv, H, Hkv, B; int variant; };  // 1 f16 mask + softcap, 2 alibi, 3 no mask, 4 rows that see nothing
    for (const FaPrompt & c : { FaPrompt{ GGML_TYPE_F16, 64, 64, 40, 77, 4, 2, 2, 0 }, FaPrompt{ GGML_TYPE_F32, 64, 64, 40, 77, 4, 2, 1, 0 },
                                FaPrompt{ GGML_TYPE_Q8_0, 64, 64, 33, 50, 2, 1, 1, 0 }, FaPrompt{ GGML_TYPE_F16, 128, 128, 33, 50, 4, 2, 1, 1 },
                                FaPrompt{ GGML_TYPE_IQ4_NL, 64, 64, 33, 50, 2, 1, 1, 0 }, FaPrompt{ GGML_TYPE_Q4_1, 128, 128, 24, 40, 2, 2, 1, 2 },
                                FaPrompt{ GGML_TYPE_F16, 64, 64, 20, 45, 8, 2, 1, 2 }, FaPrompt{ GGML_TYPE_F16, 64, 32, 17, 30, 2, 2, 1, 3 },
                                FaPrompt{ GGML_TYPE_BF16, 32, 32, 20, 20, 2, 2, 1, 4 }, FaPrompt{ GGML_TYPE_F16, 64, 64, 20, 20, 2, 2, 1, 4 },
                                FaPrompt{ GGML_TYPE_F16, 128, 128, 70, 150, 4, 1, 1, 0 }, FaPrompt{ GGML_TYPE_F16, 64, 64, 40, 77, 2, 2, 1, 3 },
                                // F32 and BF16 caches (training's) on tensor cores
                                FaPrompt{ GGML_TYPE_BF16, 64, 64, 70, 90, 4, 2, 2, 2 }, FaPrompt{ GGML_TYPE_F32, 128, 128, 33, 60, 4, 2, 1, 1 },
                                FaPrompt{ GGML_TYPE_F32, 64, 64, 20, 20, 2, 2, 1, 4 } }) {
        const std::string name = std::string("flash_attn_ext prompt ") + ggml_type_name(c.kt) + " D " + std::to_string(c.D) + " Dv " +
                                 std::to_string(c.Dv) + " n_q " + std::to_string(c.n_q) +
                                 (c.variant == 1 ? " f16 mask softcap" : c.variant == 2 ? " alibi" : c.variant == 3 ? " no mask" : c.variant == 4 ? " unseeing rows" : "");
        add(name, [=](Maker & m) {
            ggml_tensor * q = ggml_permute(m.ctx, m.in(GGML_TYPE_F32, {c.D, c.H, c.n_q, c.B}), 0, 2, 1, 3);  // [D, n_q, H, B]
            ggml_tensor * mask = c.variant == 3 ? nullptr
                                                : m.in(c.variant == 1 ? GGML_TYPE_F16 : GGML_TYPE_F32, {c.n_kv, c.n_q},
                                                       causal(c.variant == 4 ? -3 : (int32_t) (c.n_kv - c.n_q - 3)));
            return same(ggml_flash_attn_ext(m.ctx, q, m.in(c.kt, {c.D, c.n_kv, c.Hkv, c.B}), m.in(c.kt, {c.Dv, c.n_kv, c.Hkv, c.B}), mask,
                                            0.125f, c.variant == 2 ? 8.0f : 0.0f, c.variant == 1 ? 5.0f : 0.0f));
        }, c.kt == GGML_TYPE_F32 || c.kt == GGML_TYPE_F16 ? 1e-9 : 1e-7);  // F16 keys and values are exact: F32 accuracy (not
                                                                         // F16's 4e-8); F32 on tensor cores in BF16 hi + lo pairs: ~2e-11
    }
    // quantized caches (-ctk / -ctv q8_0 ...), read as stored
    for (ggml_type kt : { GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_IQ4_NL }) {
        for (int64_t n_q : { 1, 5 }) {
            add(std::string("flash_attn_ext ") + ggml_type_name(kt) + " n_q " + std::to_string(n_q), [=](Maker & m) {
                ggml_tensor * q = ggml_permute(m.ctx, m.in(GGML_TYPE_F32, {64, 4, n_q}), 0, 2, 1, 3);
                ggml_tensor * mask = m.in(GGML_TYPE_F16, {600, n_q}, causal(600 - n_q - 40));
                return same(ggml_flash_attn_ext(m.ctx, q, m.in(kt, {64, 600, 2}), m.in(kt, {64, 600, 2}), mask, 0.125f, 0.0f, 0.0f));
            }, 1e-7);
        }
    }
    add("flash_attn_ext fully masked queries", [=](Maker & m) {
        ggml_tensor * q = ggml_permute(m.ctx, m.in(GGML_TYPE_F32, {64, 2, 6}), 0, 2, 1, 3);
        return same(ggml_flash_attn_ext(m.ctx, q, m.in(GGML_TYPE_F16, {64, 40, 1}), m.in(GGML_TYPE_F16, {64, 40, 1}),
                                        m.in(GGML_TYPE_F16, {40, 6}, causal(-3)), 0.125f, 0.0f, 0.0f));
    }, 1e-7);
    add("flash_attn_ext no mask", [=](Maker & m) {
        ggml_tensor * q = m.in(GGML_TYPE_F32, {128, 3, 8});
        return same(ggml_flash_attn_ext(m.ctx, q, m.in(GGML_TYPE_F16, {128, 300, 8}), m.in(GGML_TYPE_F16, {128, 300, 8}), nullptr, 0.088f, 0.0f, 0.0f));
    }, 1e-7);
    // its gradient (training): grouped heads, two batches, Dv != D, causal masks (F32, F16),
    // softcap, ALiBi, no mask, more queries than a CPU block (64), queries that see no key
    struct FaBack { ggml_type kt; int64_t n_q, H, B; int variant; };  // variant: 1 f16 mask + softcap, 2 alibi, 3 no mask
    for (const FaBack & c : { FaBack{ GGML_TYPE_F32, 5, 4, 2, 0 }, FaBack{ GGML_TYPE_F16, 5, 4, 2, 1 }, FaBack{ GGML_TYPE_F16, 4, 4, 1, 2 },
                              FaBack{ GGML_TYPE_F32, 3, 4, 1, 3 }, FaBack{ GGML_TYPE_F16, 67, 2, 1, 0 } }) {
        const std::string name = std::string("flash_attn_back ") + ggml_type_name(c.kt) + " n_q " + std::to_string(c.n_q) +
                                 (c.variant == 1 ? " f16 mask softcap" : c.variant == 2 ? " alibi" : c.variant == 3 ? " no mask" : "");
        add(name, [=](Maker & m) {
            const int64_t D = 64, Dv = c.variant == 3 ? 32 : 64, n_kv = c.n_q + 9, Hkv = c.H / 2;
            ggml_tensor * q = ggml_permute(m.ctx, m.in(GGML_TYPE_F32, {D, c.H, c.n_q, c.B}), 0, 2, 1, 3);  // [D, n_q, H, B]
            ggml_tensor * mask = c.variant == 3 ? nullptr
                                                : m.in(c.variant == 1 ? GGML_TYPE_F16 : GGML_TYPE_F32, {n_kv, c.n_q}, causal(n_kv - c.n_q - 2));
            ggml_tensor * dO = m.in(GGML_TYPE_F32, {Dv, c.H, c.n_q, c.B});
            return same(ggml_flash_attn_back(m.ctx, q, m.in(c.kt, {D, n_kv, Hkv, c.B}), m.in(c.kt, {Dv, n_kv, Hkv, c.B}), mask, dO,
                                             0.125f, c.variant == 2 ? 8.0f : 0.0f, c.variant == 1 ? 5.0f : 0.0f));
        }, 1e-8);
    }
    // many query rows (the CUDA backend's tiled kernels): heads of 128 and of 96 / 80 (not powers
    // of two), F32 / F16 / BF16 caches, grouped heads, two batches, softcap, ALiBi, rows that see
    // no key, more keys than rows, tiles that one row sees through one key (n_q 33, n_kv 37)
    struct FaBackTiled { ggml_type kt; int64_t D, Dv, n_q, n_kv, H, Hkv, B; int variant; };  // variants as above
    for (const FaBackTiled & c : { FaBackTiled{ GGML_TYPE_F16, 128, 128, 40, 50, 4, 2, 2, 0 },
                                   FaBackTiled{ GGML_TYPE_F32, 64, 64, 33, 70, 2, 1, 1, 1 },
                                   FaBackTiled{ GGML_TYPE_BF16, 96, 80, 20, 45, 3, 1, 1, 2 },
                                   FaBackTiled{ GGML_TYPE_F16, 64, 32, 17, 17, 2, 2, 1, 3 },
                                   FaBackTiled{ GGML_TYPE_F16, 64, 64, 24, 21, 2, 1, 1, 0 },
                                   FaBackTiled{ GGML_TYPE_F32, 64, 64, 33, 37, 2, 2, 1, 0 },  // tiles seen through one element
                                   // heads of 64 and 128 over F32 (the tensor-core kernels): several blocks of rows and of
                                   // keys, tiles skipped, grouped heads summed, ALiBi, no mask, two batches, softcap, rows that
                                   // see nothing
                                   FaBackTiled{ GGML_TYPE_F32, 64, 64, 130, 131, 4, 1, 1, 0 },
                                   FaBackTiled{ GGML_TYPE_F32, 64, 64, 70, 100, 2, 2, 1, 2 },
                                   FaBackTiled{ GGML_TYPE_F32, 128, 128, 40, 75, 8, 2, 1, 3 },
                                   FaBackTiled{ GGML_TYPE_F32, 128, 128, 66, 66, 2, 1, 2, 1 } }) {
        const std::string name = std::string("flash_attn_back tiles ") + ggml_type_name(c.kt) + " D " + std::to_string(c.D) + " Dv " +
                                 std::to_string(c.Dv) + " n_q " + std::to_string(c.n_q) + " n_kv " + std::to_string(c.n_kv) +
                                 (c.variant == 1 ? " f16 mask softcap" : c.variant == 2 ? " alibi" : c.variant == 3 ? " no mask" : "");
        add(name, [=](Maker & m) {
            ggml_tensor * q = ggml_permute(m.ctx, m.in(GGML_TYPE_F32, {c.D, c.H, c.n_q, c.B}), 0, 2, 1, 3);  // [D, n_q, H, B]
            // causal, with the first rows seeing nothing where n_kv - n_q < 3
            ggml_tensor * mask = c.variant == 3 ? nullptr
                                                : m.in(c.variant == 1 ? GGML_TYPE_F16 : GGML_TYPE_F32, {c.n_kv, c.n_q}, causal(c.n_kv - c.n_q - 3));
            ggml_tensor * dO = m.in(GGML_TYPE_F32, {c.Dv, c.H, c.n_q, c.B});
            return same(ggml_flash_attn_back(m.ctx, q, m.in(c.kt, {c.D, c.n_kv, c.Hkv, c.B}), m.in(c.kt, {c.Dv, c.n_kv, c.Hkv, c.B}), mask,
                                             dO, c.variant == 1 ? 0.088f : 0.125f, c.variant == 2 ? 8.0f : 0.0f,
                                             c.variant == 1 ? 5.0f : 0.0f));
        }, 1e-8);
    }
    add("flash_attn_back fully masked queries", [=](Maker & m) {
        ggml_tensor * q = ggml_permute(m.ctx, m.in(GGML_TYPE_F32, {64, 2, 6}), 0, 2, 1, 3);
        return same(ggml_flash_attn_back(m.ctx, q, m.in(GGML_TYPE_F16, {64, 40, 1}), m.in(GGML_TYPE_F16, {64, 40, 1}),
                                         m.in(GGML_TYPE_F16, {40, 6}, causal(-3)), m.in(GGML_TYPE_F32, {64, 2, 6}), 0.125f, 0.0f, 0.0f));
    }, 1e-8);

    // training: loss, accumulation, optimizer steps
    add("cross_entropy_loss", [=](Maker & m) {
        return same(ggml_cross_entropy_loss(m.ctx, m.in(GGML_TYPE_F32, {500, 6}, uniform(-5.0f, 5.0f)), m.in(GGML_TYPE_F32, {500, 6}, uniform(0.0f, 0.004f))));
    }, 1e-10);
    add("cross_entropy_loss_back", [=](Maker & m) {
        return same(ggml_cross_entropy_loss_back(m.ctx, m.in(GGML_TYPE_F32, {1}, values({ 0.7f })), m.in(GGML_TYPE_F32, {500, 6}, uniform(-5.0f, 5.0f)),
                                                 m.in(GGML_TYPE_F32, {500, 6}, uniform(0.0f, 0.004f))));
    }, 1e-10);
    add("acc", [=](Maker & m) {
        ggml_tensor * a = m.in(GGML_TYPE_F32, {10, 6, 2});
        ggml_tensor * b = m.in(GGML_TYPE_F32, {4, 3, 2});
        return same(ggml_acc(m.ctx, a, b, a->nb[1], a->nb[2], a->nb[3], 2 * sizeof(float) + a->nb[1]));
    }, 1e-10);
    add("repeat_back", [=](Maker & m) { return same(ggml_repeat_back(m.ctx, m.in(GGML_TYPE_F32, {10, 4, 3, 2}), m.in(GGML_TYPE_F32, {5, 1, 3}))); }, 1e-10);
    add("opt_step_adamw", [=](Maker & m) {
        ggml_tensor * w = m.in(GGML_TYPE_F32, {33, 5});
        ggml_tensor * node = ggml_opt_step_adamw(m.ctx, w, m.in(GGML_TYPE_F32, {33, 5}), m.in(GGML_TYPE_F32, {33, 5}),
                                                 m.in(GGML_TYPE_F32, {33, 5}, uniform(0.0f, 1.0f)),
                                                 m.in(GGML_TYPE_F32, {7}, values({ 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 10.0f, 1000.0f })));
        return Built{ node, w };
    }, 1e-12);
    add("opt_step_sgd", [=](Maker & m) {
        ggml_tensor * w = m.in(GGML_TYPE_F32, {33, 5});
        return Built{ ggml_opt_step_sgd(m.ctx, w, m.in(GGML_TYPE_F32, {33, 5}), m.in(GGML_TYPE_F32, {2}, values({ 1e-2f, 0.1f }))), w };
    }, 1e-12);

    // pairs the CUDA backend runs as one kernel (rms_norm then its weight, silu / gelu then up);
    // the first result is read again, so both must be written
    for (bool norm_first : { true, false }) {
        add(std::string("fused rms_norm mul") + (norm_first ? "" : " swapped"), [=](Maker & m) {
            ggml_tensor * n = ggml_rms_norm(m.ctx, m.in(GGML_TYPE_F32, {96, 5, 2}, uniform(-2.0f, 3.0f)), 1e-5f);
            ggml_tensor * w = m.in(GGML_TYPE_F32, norm_first ? std::vector<int64_t>{96, 1, 2} : std::vector<int64_t>{96, 5, 2});
            ggml_tensor * y = norm_first ? ggml_mul(m.ctx, n, w) : ggml_mul(m.ctx, w, n);
            return same(ggml_concat(m.ctx, y, n, 1));
        }, 1e-10);
    }
    for (bool bcast : { false, true }) {  // the residual's add before them
        add(std::string("fused add rms_norm mul") + (bcast ? " broadcast" : ""), [=](Maker & m) {
            ggml_tensor * h = ggml_add(m.ctx, m.in(GGML_TYPE_F32, {96, 5}, uniform(-2.0f, 3.0f)),
                                       m.in(GGML_TYPE_F32, bcast ? std::vector<int64_t>{96, 1} : std::vector<int64_t>{96, 5}));
            ggml_tensor * y = ggml_mul(m.ctx, ggml_rms_norm(m.ctx, h, 1e-5f), m.in(GGML_TYPE_F32, {96}));
            return same(ggml_concat(m.ctx, y, h, 1));
        }, 1e-10);
    }
    for (ggml_unary_op op : { GGML_UNARY_OP_SILU, GGML_UNARY_OP_GELU }) {
        add(std::string("fused ") + ggml_unary_op_name(op) + " mul", [=](Maker & m) {
            ggml_tensor * g = ggml_unary(m.ctx, m.in(GGML_TYPE_F32, {70, 6}, uniform(-6.0f, 6.0f)), op);
            ggml_tensor * up = m.in(GGML_TYPE_F32, {70, 6});
            return same(ggml_concat(m.ctx, ggml_mul(m.ctx, g, up), g, 1));
        }, 1e-10);
    }

    // products of one b after another (k, v, q; gate, up): the GPU quantizes b once for the
    // weight types with the same activation blocks; b overwritten in place in between, or
    // another block size, quantizes again. Prompt-sized b: the cuBLAS products round b to F16 once
    // for the F16 and block-typed weights after one another (a BF16 product in between converts
    // again).
    struct SharedB { int64_t n; ggml_type t[5]; };
    for (const SharedB & c : { SharedB{ 1, { GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q6_K } },
                               SharedB{ 3, { GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q6_K } },
                               SharedB{ 20, { GGML_TYPE_Q4_0, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q4_K, GGML_TYPE_F16 } } }) {
        add("mul_mat shared b n " + std::to_string(c.n), [=](Maker & m) {
            ggml_tensor * x = m.in(GGML_TYPE_F32, {256, c.n});
            ggml_tensor * p0 = ggml_mul_mat(m.ctx, m.in(c.t[0], {256, 40}), x);
            ggml_tensor * p1 = ggml_mul_mat(m.ctx, m.in(c.t[1], {256, 24}), x);
            ggml_tensor * p2 = ggml_mul_mat(m.ctx, m.in(c.t[2], {256, 16}), x);
            ggml_tensor * p3 = ggml_mul_mat(m.ctx, m.in(c.t[3], {256, 8}), x);
            ggml_tensor * x2 = ggml_scale_inplace(m.ctx, x, -0.5f);  // after the products above
            ggml_tensor * p4 = ggml_mul_mat(m.ctx, m.in(c.t[4], {256, 8}), x2);
            ggml_tensor * out = ggml_concat(m.ctx, ggml_concat(m.ctx, ggml_concat(m.ctx, p0, p1, 0), ggml_concat(m.ctx, p2, p3, 0), 0), p4, 0);
            return same(out);
        }, c.n > 8 ? mm_tol(GGML_TYPE_BF16, c.n) : mm_tol(GGML_TYPE_Q4_0, c.n));
    }

    // a norm's product read next by integer products (generation): a GPU may quantize the
    // activations in the norm's kernel; Q8_0 (32) and Q8_K (256) blocks, one and two columns, the
    // residual's add first, a second product of the same activations
    struct NormProduct { ggml_type t, t2; int64_t n; bool add; };
    // (prompts: products in F16, for which the kernel may round the activations to F16)
    for (const NormProduct & c : { NormProduct{ GGML_TYPE_Q4_0, GGML_TYPE_COUNT, 1, false }, NormProduct{ GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, 1, true },
                                   NormProduct{ GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, 2, true }, NormProduct{ GGML_TYPE_Q4_K, GGML_TYPE_F16, 20, true },
                                   NormProduct{ GGML_TYPE_F16, GGML_TYPE_COUNT, 12, false } }) {
        add(std::string("rms_norm mul then mul_mat ") + ggml_type_name(c.t) + (c.t2 != GGML_TYPE_COUNT ? std::string(" ") + ggml_type_name(c.t2) : "") +
                " n " + std::to_string(c.n) + (c.add ? " add" : ""),
            [=](Maker & m) {
                ggml_tensor * h = m.in(GGML_TYPE_F32, {512, c.n}, uniform(-2.0f, 3.0f));
                if (c.add) h = ggml_add(m.ctx, h, m.in(GGML_TYPE_F32, {512, c.n}));
                ggml_tensor * y = ggml_mul(m.ctx, ggml_rms_norm(m.ctx, h, 1e-5f), m.in(GGML_TYPE_F32, {512}));
                ggml_tensor * out = ggml_mul_mat(m.ctx, m.in(c.t, {512, 40}), y);
                if (c.t2 != GGML_TYPE_COUNT) out = ggml_concat(m.ctx, out, ggml_mul_mat(m.ctx, m.in(c.t2, {512, 24}), y), 0);
                return same(ggml_concat(m.ctx, out, ggml_scale(m.ctx, y, 1e-3f), 0));  // y read again after: written too
            }, mm_tol(c.t, c.n));
    }

    // the norm's rows regrouped (a reshape to longer rows) before the product: the columns of the
    // product are not the kernel's rows
    add("rms_norm mul reshaped then mul_mat q4_0", [=](Maker & m) {
        ggml_tensor * y = ggml_mul(m.ctx, ggml_rms_norm(m.ctx, m.in(GGML_TYPE_F32, {128, 8}, uniform(-2.0f, 3.0f)), 1e-5f),
                                   m.in(GGML_TYPE_F32, {128}));
        ggml_tensor * out = ggml_mul_mat(m.ctx, m.in(GGML_TYPE_Q4_0, {512, 40}), ggml_reshape_2d(m.ctx, y, 512, 2));
        return same(out);
    }, mm_tol(GGML_TYPE_Q4_0, 2));
    // generation's attention output as rows of one head (not a token's heads) for the product
    add("flash_attn_ext reshaped then mul_mat q8_0", [=](Maker & m) {
        ggml_tensor * q = ggml_permute(m.ctx, m.in(GGML_TYPE_F32, {64, 4, 2}), 0, 2, 1, 3);
        ggml_tensor * o = ggml_flash_attn_ext(m.ctx, q, m.in(GGML_TYPE_F16, {64, 50, 1}), m.in(GGML_TYPE_F16, {64, 50, 1}), nullptr,
                                              0.1f, 0.0f, 0.0f);
        return same(ggml_mul_mat(m.ctx, m.in(GGML_TYPE_Q8_0, {64, 40}), ggml_reshape_2d(m.ctx, o, 64, 8)));
    }, mm_tol(GGML_TYPE_Q8_0, 8));

    // silu / gelu times up read next by an integer product (generation's down projection)
    struct UnaryProduct { ggml_unary_op op; ggml_type t; int64_t n; };
    for (const UnaryProduct & c : { UnaryProduct{ GGML_UNARY_OP_SILU, GGML_TYPE_Q4_K, 1 }, UnaryProduct{ GGML_UNARY_OP_GELU, GGML_TYPE_Q8_0, 3 },
                                    UnaryProduct{ GGML_UNARY_OP_SILU, GGML_TYPE_Q6_K, 20 }, UnaryProduct{ GGML_UNARY_OP_SILU, GGML_TYPE_F16, 9 } }) {
        add(std::string(ggml_unary_op_name(c.op)) + " mul then mul_mat " + ggml_type_name(c.t) + " n " + std::to_string(c.n), [=](Maker & m) {
            ggml_tensor * g = ggml_unary(m.ctx, m.in(GGML_TYPE_F32, {512, c.n}, uniform(-6.0f, 6.0f)), c.op);
            ggml_tensor * y = ggml_mul(m.ctx, g, m.in(GGML_TYPE_F32, {512, c.n}));
            ggml_tensor * out = ggml_mul_mat(m.ctx, m.in(c.t, {512, 40}), y);
            return same(ggml_concat(m.ctx, out, ggml_scale(m.ctx, ggml_add(m.ctx, y, g), 1e-3f), 0));
        }, mm_tol(c.t, c.n));
    }

    // generation's attention read next by the output projection's integer products: a GPU may
    // quantize the rows in the attention kernel (32-value blocks; 256-value blocks of several heads
    // by the block finishing the group's last head), with the keys in one range or split between
    // blocks (long cache, the combining kernel quantizing then). Prompts (the
    // tensor-core kernel for D 64, query tiles for D 32) and an F16 weight of a million values
    // (cuBLAS in generation) may write the rows as F16 for the product.
    struct FaProduct { ggml_type t; int64_t D, H, n_q, n_kv, rows = 40; };
    for (const FaProduct & c : { FaProduct{ GGML_TYPE_Q4_0, 64, 4, 1, 77 }, FaProduct{ GGML_TYPE_Q8_0, 128, 2, 2, 1500 },
                                 FaProduct{ GGML_TYPE_Q4_K, 64, 4, 1, 77 }, FaProduct{ GGML_TYPE_Q4_0, 64, 4, 20, 77 },
                                 FaProduct{ GGML_TYPE_F16, 32, 4, 24, 90 }, FaProduct{ GGML_TYPE_F16, 64, 4, 1, 600, 4096 },
                                 FaProduct{ GGML_TYPE_Q6_K, 64, 8, 2, 1500 }, FaProduct{ GGML_TYPE_Q5_K, 128, 4, 1, 77 } }) {
        add(std::string("flash_attn_ext then mul_mat ") + ggml_type_name(c.t) + " D " + std::to_string(c.D) + " n_q " + std::to_string(c.n_q) +
                " n_kv " + std::to_string(c.n_kv), [=](Maker & m) {
            ggml_tensor * q = ggml_permute(m.ctx, m.in(GGML_TYPE_F32, {c.D, c.H, c.n_q}), 0, 2, 1, 3);
            ggml_tensor * mask = m.in(GGML_TYPE_F16, {c.n_kv, c.n_q}, causal(c.n_kv - c.n_q - 5));
            ggml_tensor * o = ggml_flash_attn_ext(m.ctx, q, m.in(GGML_TYPE_F16, {c.D, c.n_kv, 1}), m.in(GGML_TYPE_F16, {c.D, c.n_kv, 1}), mask,
                                                  0.1f, 0.0f, 0.0f);
            ggml_tensor * x = ggml_reshape_2d(m.ctx, o, c.D * c.H, c.n_q);
            ggml_tensor * y = ggml_mul_mat(m.ctx, m.in(c.t, {c.D * c.H, c.rows}), x);
            auto flat = [&](ggml_tensor * t) { return ggml_reshape_1d(m.ctx, t, ggml_nelements(t)); };
            return same(ggml_concat(m.ctx, flat(y), flat(ggml_scale(m.ctx, x, 0.01f)), 0));
        }, mm_tol(c.t, c.n_q));
    }

    // attention without flash attention in a prompt: the probabilities' product with the values
    // (F16 cache, grouped heads), which a GPU may hand F16 probabilities from the softmax's kernel
    // (keys of any number: 44 is not a multiple of 32)
    for (int64_t n_q : { 20, 9 }) {
        for (int64_t n_kv : { 96, 44 }) {
            add("soft_max then mul_mat values n_q " + std::to_string(n_q) + " n_kv " + std::to_string(n_kv), [=](Maker & m) {
                ggml_tensor * q = ggml_permute(m.ctx, m.in(GGML_TYPE_F32, {64, 4, n_q}), 0, 2, 1, 3);  // [64, n_q, 4 heads]
                ggml_tensor * kq = ggml_mul_mat(m.ctx, m.in(GGML_TYPE_F16, {64, n_kv, 2}), q);          // [n_kv keys, n_q, 4]
                kq = ggml_soft_max_ext(m.ctx, kq, m.in(GGML_TYPE_F16, {n_kv, n_q}, causal(n_kv - n_q)), 0.125f, 0.0f);
                ggml_tensor * kqv = ggml_mul_mat(m.ctx, m.in(GGML_TYPE_F16, {n_kv, 64, 2}), kq);        // [64, n_q, 4]
                ggml_tensor * p = ggml_cont(m.ctx, ggml_view_3d(m.ctx, kq, 32, n_q, 4, kq->nb[1], kq->nb[2], 0));
                return same(ggml_concat(m.ctx, ggml_reshape_1d(m.ctx, kqv, ggml_nelements(kqv)), ggml_reshape_1d(m.ctx, ggml_scale(m.ctx, p, 0.1f), ggml_nelements(p)), 0));
            }, 1e-6);
        }
    }

    // attention without flash attention: the heads of a token made one row (cont) for the output
    // projection, which a GPU may convert in the copy's kernel (8-bit blocks of 32 and 256, F16)
    struct ContProduct { ggml_type t; int64_t n; };
    for (const ContProduct & c : { ContProduct{ GGML_TYPE_Q4_0, 1 }, ContProduct{ GGML_TYPE_Q4_K, 2 }, ContProduct{ GGML_TYPE_Q8_0, 20 },
                                   ContProduct{ GGML_TYPE_F16, 12 } }) {
        add(std::string("cont then mul_mat ") + ggml_type_name(c.t) + " n " + std::to_string(c.n), [=](Maker & m) {
            ggml_tensor * kqv = ggml_permute(m.ctx, m.in(GGML_TYPE_F32, {64, c.n, 4}), 0, 2, 1, 3);  // [64, 4 heads, n]
            ggml_tensor * x = ggml_cont_2d(m.ctx, kqv, 256, c.n);
            ggml_tensor * y = ggml_mul_mat(m.ctx, m.in(c.t, {256, 40}), x);
            return same(ggml_concat(m.ctx, y, ggml_scale(m.ctx, x, 0.01f), 0));
        }, mm_tol(c.t, c.n));
    }

    // generation's products of one activation with weights of one type, one after another in the
    // graph (q, k, v; gate, up): a GPU may run them as one launch; short rows, odd row counts.
    // Prompts (n 20): it may dequantize the weights in one launch.
    struct OneB { ggml_type t; int64_t K; std::vector<int64_t> rows; int64_t n = 1; };
    for (const OneB & c : { OneB{ GGML_TYPE_Q4_K, 256, { 40, 24, 72 } }, OneB{ GGML_TYPE_Q4_0, 64, { 30, 9 } },
                            OneB{ GGML_TYPE_Q6_K, 512, { 17, 33, 5 } }, OneB{ GGML_TYPE_Q8_0, 96, { 11, 64 } },
                            OneB{ GGML_TYPE_Q8_0, 96, { 40, 24, 24 }, 20 }, OneB{ GGML_TYPE_Q4_K, 256, { 16, 33 }, 20 } }) {
        add(std::string("mul_mat one b ") + std::to_string(c.rows.size()) + " weights " + ggml_type_name(c.t) + " K " + std::to_string(c.K) +
                (c.n > 1 ? " n " + std::to_string(c.n) : ""),
            [=](Maker & m) {
                ggml_tensor * x = m.in(GGML_TYPE_F32, {c.K, c.n});
                std::vector<ggml_tensor *> p;
                for (int64_t r : c.rows) p.push_back(ggml_mul_mat(m.ctx, m.in(c.t, {c.K, r}), x));
                // concat(p0, concat(p1, p2)): the products are consecutive nodes
                ggml_tensor * tail = p.back();
                for (size_t i = p.size() - 1; i-- > 1;) tail = ggml_concat(m.ctx, p[i], tail, 0);
                return same(ggml_concat(m.ctx, p[0], tail, 0));
            }, mm_tol(c.t, c.n));
    }

    // the same with K-quants of different types (Q4_K_M: Q6_K values beside Q4_K queries and keys)
    add("mul_mat one b 3 weights q4_K q6_K q5_K", [=](Maker & m) {
        ggml_tensor * x = m.in(GGML_TYPE_F32, {512, 1});
        ggml_tensor * p0 = ggml_mul_mat(m.ctx, m.in(GGML_TYPE_Q4_K, {512, 40}), x);
        ggml_tensor * p1 = ggml_mul_mat(m.ctx, m.in(GGML_TYPE_Q6_K, {512, 17}), x);
        ggml_tensor * p2 = ggml_mul_mat(m.ctx, m.in(GGML_TYPE_Q5_K, {512, 24}), x);
        return same(ggml_concat(m.ctx, p0, ggml_concat(m.ctx, p1, p2, 0), 0));
    }, mm_tol(GGML_TYPE_Q4_K, 1));

    // a small chain of the llama block's ops in one graph; with quantized weights the CPU's 8-bit
    // activations make the error of each product add up
    for (bool quant : { false, true }) {
        add(quant ? "llama block" : "llama block f32", [=](Maker & m) {
            ggml_tensor * x = m.in(GGML_TYPE_F32, {64, 5});
            ggml_tensor * cur = ggml_mul(m.ctx, ggml_rms_norm(m.ctx, x, 1e-5f), m.in(GGML_TYPE_F32, {64}));
            ggml_tensor * gate = ggml_silu(m.ctx, ggml_mul_mat(m.ctx, m.in(quant ? GGML_TYPE_Q4_0 : GGML_TYPE_F32, {64, 96}), cur));
            ggml_tensor * up = ggml_mul_mat(m.ctx, m.in(quant ? GGML_TYPE_Q8_0 : GGML_TYPE_F32, {64, 96}), cur);
            ggml_tensor * down = ggml_mul_mat(m.ctx, m.in(quant ? GGML_TYPE_Q6_K : GGML_TYPE_F32, {256, 64}),
                                              ggml_concat(m.ctx, ggml_mul(m.ctx, gate, up), m.in(GGML_TYPE_F32, {160, 5}), 0));
            return same(ggml_add(m.ctx, down, x));
        }, quant ? 1e-3 : 1e-9);
    }
    return cs;
}

}  // namespace
}  // namespace bocases
