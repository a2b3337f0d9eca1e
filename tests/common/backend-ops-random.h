// backend-ops-random.h - op cases of random shapes, strides, types and parameters (seeded, so a
// run is repeatable): the odd sizes, broadcasts, views and partial tiles that the fixed cases of
// backend-ops-cases.h name one by one, drawn many at a time. Tolerances are the fixed cases'.
#pragma once

#include "backend-ops-cases.h"

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace bocases {
namespace {

// The cases of the seed and count that RANDOM_CASES_SEED and RANDOM_CASES_N set (default 1, 300).
std::vector<Case> make_random_cases(uint32_t seed, int n_cases);
std::vector<Case> make_random_cases() {
    const char * s = getenv("RANDOM_CASES_SEED"), * n = getenv("RANDOM_CASES_N");
    return make_random_cases(s ? (uint32_t) strtoul(s, nullptr, 10) : 1u, n ? atoi(n) : 300);
}

std::vector<Case> make_random_cases(uint32_t seed, int n_cases) {
    std::vector<Case> cs;
    std::mt19937 rng(seed);
    auto pick = [&](int lo, int hi) { return (int64_t) std::uniform_int_distribution<int>(lo, hi)(rng); };
    auto coin = [&](double p) { return std::uniform_real_distribution<double>(0.0, 1.0)(rng) < p; };
    auto same = [](ggml_tensor * t) { return Built{ t, t }; };
    auto dims = [](const std::vector<int64_t> & ne) {
        std::string s;
        for (int64_t d : ne) s += (s.empty() ? "" : "x") + std::to_string(d);
        return s;
    };
    const ggml_type float_types[] = { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16 };
    enum Kind { BINARY, UNARY, NORM, SOFTMAX, ROPE, GET_ROWS, CONT, MUL_MAT, OUT_PROD, REDUCE, CONCAT, SET_ROWS, FLASH_ATTN,
                // training's: backward ops, loss, optimizer step; the quantized KV cache's writes
                BACKWARD, FLASH_ATTN_BACK, LOSS, ADAMW, QUANT_ROWS, N_KINDS };
    const ggml_type cache_types[] = { GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_IQ4_NL };

    for (int i = 0; i < n_cases; i++) {
        const Kind kind = (Kind) pick(0, N_KINDS - 1);
        const std::string id = "random " + std::to_string(i) + ": ";
        switch (kind) {
            case BINARY: {  // a (maybe a transposed view) op b broadcast over any dims
                const std::vector<int64_t> ne = { pick(1, 130), pick(1, 9), pick(1, 4), pick(1, 3) };
                std::vector<int64_t> nb = ne;
                for (int64_t & d : nb) d = coin(0.35) ? 1 : d;
                const int op = (int) pick(0, 3);
                const ggml_type t = float_types[pick(0, 2)];
                const bool transposed = t == GGML_TYPE_F32 && coin(0.3);
                const char * names[] = { "add", "sub", "mul", "div" };
                cs.push_back({ id + names[op] + " " + ggml_type_name(t) + " " + dims(ne) + " by " + dims(nb) + (transposed ? " a transposed" : ""),
                               [=](Maker & m) {
                                   ggml_tensor * a = transposed ? ggml_transpose(m.ctx, m.in(t, { ne[1], ne[0], ne[2], ne[3] }))
                                                                : m.in(t, ne);
                                   ggml_tensor * b = m.in(GGML_TYPE_F32, nb, op == 3 ? uniform(0.5f, 2.0f) : Fill());
                                   ggml_tensor * r = op == 0 ? ggml_add(m.ctx, a, b) : op == 1 ? ggml_sub(m.ctx, a, b)
                                                   : op == 2 ? ggml_mul(m.ctx, a, b) : ggml_div(m.ctx, a, b);
                                   return same(r);
                               },
                               t == GGML_TYPE_F32 ? 1e-10 : 1e-5 });
                break;
            }
            case UNARY: {
                const ggml_unary_op op = (ggml_unary_op) pick(0, GGML_UNARY_OP_COUNT - 1);
                const std::vector<int64_t> ne = { pick(1, 300), pick(1, 7), pick(1, 3), 1 };
                const bool scale = coin(0.2);
                const float s = (float) pick(-30, 30) / 7.0f;
                cs.push_back({ id + (scale ? std::string("scale") : std::string("unary ") + ggml_unary_op_name(op)) + " " + dims(ne),
                               [=](Maker & m) {
                                   ggml_tensor * x = m.in(GGML_TYPE_F32, ne, uniform(-6.0f, 6.0f));
                                   return same(scale ? ggml_scale(m.ctx, x, s) : ggml_unary(m.ctx, x, op));
                               },
                               1e-10 });
                break;
            }
            case NORM: {  // rows of any length, maybe a permuted view
                const bool rms = coin(0.6), permuted = coin(0.4);
                const std::vector<int64_t> ne = { pick(1, 1100), pick(1, 6), pick(1, 3), 1 };
                const float eps = coin(0.5) ? 1e-5f : 1e-6f;
                cs.push_back({ id + (rms ? "rms_norm " : "norm ") + dims(ne) + (permuted ? " permuted" : ""),
                               [=](Maker & m) {
                                   ggml_tensor * x = permuted ? ggml_permute(m.ctx, m.in(GGML_TYPE_F32, { ne[0], ne[2], ne[1], 1 }, uniform(-2.0f, 3.0f)), 0, 2, 1, 3)
                                                              : m.in(GGML_TYPE_F32, ne, uniform(-2.0f, 3.0f));
                                   return same(rms ? ggml_rms_norm(m.ctx, x, eps) : ggml_norm(m.ctx, x, eps));
                               },
                               1e-10 });
                break;
            }
            case SOFTMAX: {  // with or without a mask (broadcast over heads), ALiBi
                const std::vector<int64_t> ne = { pick(1, 1100), pick(1, 9), pick(1, 4), pick(1, 2) };
                const int mask = (int) pick(0, 2);  // none, F32, F16
                const int64_t mask_rows = ne[1] + pick(0, 3);
                const int32_t n_past = (int32_t) pick(-2, (int) ne[0]);
                const float max_bias = mask && coin(0.3) ? 8.0f : 0.0f;
                const float scale = (float) pick(1, 16) / 8.0f;
                cs.push_back({ id + "soft_max " + dims(ne) + (mask ? (mask == 1 ? " f32 mask" : " f16 mask") : "") + (max_bias > 0 ? " alibi" : ""),
                               [=](Maker & m) {
                                   ggml_tensor * x = m.in(GGML_TYPE_F32, ne, uniform(-4.0f, 4.0f));
                                   ggml_tensor * mk = mask ? m.in(mask == 1 ? GGML_TYPE_F32 : GGML_TYPE_F16, { ne[0], mask_rows }, causal(n_past)) : nullptr;
                                   return same(ggml_soft_max_ext(m.ctx, x, mk, scale, max_bias));
                               },
                               1e-10 });
                break;
            }
            case ROPE: {
                const int64_t head = 2 * pick(4, 64), n_head = pick(1, 8), n_tok = pick(1, 12);
                const int64_t n_dims = coin(0.3) ? 2 * pick(1, (int) head / 2) : head;
                const int mode = coin(0.5) ? GGML_ROPE_TYPE_NEOX : GGML_ROPE_TYPE_NORMAL;
                const ggml_type t = coin(0.3) ? GGML_TYPE_F16 : GGML_TYPE_F32;
                const bool back = coin(0.2);
                cs.push_back({ id + (back ? "rope_back " : "rope ") + ggml_type_name(t) + (mode ? " neox " : " normal ") + dims({ head, n_head, n_tok }) +
                                   " n_dims " + std::to_string(n_dims),
                               [=](Maker & m) {
                                   ggml_tensor * x = m.in(t, { head, n_head, n_tok }, uniform(-2.0f, 2.0f));
                                   ggml_tensor * pos = m.in(GGML_TYPE_I32, { n_tok }, indices(100000));
                                   auto fn = back ? ggml_rope_ext_back : ggml_rope_ext;
                                   return same(fn(m.ctx, x, pos, nullptr, (int) n_dims, mode, 4096, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f));
                               },
                               t == GGML_TYPE_F32 ? 1e-10 : 1e-5 });
                break;
            }
            case GET_ROWS: {
                const ggml_type t = kWeightTypes[pick(0, (int) (sizeof(kWeightTypes) / sizeof(kWeightTypes[0])) - 1)];
                const int64_t ne0 = ggml_blck_size(t) * pick(1, ggml_blck_size(t) > 1 ? 5 : 200), rows = pick(1, 40), n = pick(1, 20);
                cs.push_back({ id + "get_rows " + ggml_type_name(t) + " " + dims({ ne0, rows }) + " n " + std::to_string(n),
                               [=](Maker & m) {
                                   return same(ggml_get_rows(m.ctx, m.in(t, { ne0, rows }), m.in(GGML_TYPE_I32, { n }, indices((int32_t) rows))));
                               },
                               1e-12 });
                break;
            }
            case CONT: {  // a permutation made contiguous, maybe converted
                const std::vector<int64_t> ne = { pick(1, 40), pick(1, 9), pick(1, 5), pick(1, 3) };
                int perm[4] = { 0, 1, 2, 3 };
                std::shuffle(perm, perm + 4, rng);
                const ggml_type from = coin(0.3) ? GGML_TYPE_F16 : GGML_TYPE_F32;
                const ggml_type to = from == GGML_TYPE_F16 || coin(0.5) ? GGML_TYPE_F32 : GGML_TYPE_F16;
                cs.push_back({ id + "cpy permuted " + ggml_type_name(from) + " -> " + ggml_type_name(to) + " " + dims(ne) + " perm " +
                                   std::to_string(perm[0]) + std::to_string(perm[1]) + std::to_string(perm[2]) + std::to_string(perm[3]),
                               [=](Maker & m) {
                                   ggml_tensor * p = ggml_permute(m.ctx, m.in(from, ne), perm[0], perm[1], perm[2], perm[3]);
                                   return same(to == from ? ggml_cont(m.ctx, p) : ggml_cpy(m.ctx, p, ggml_new_tensor(m.ctx, to, 4, p->ne)));
                               },
                               0.0 });
                break;
            }
            case MUL_MAT: {  // weights of any type, any number of columns, broadcast planes
                const ggml_type t = kWeightTypes[pick(0, (int) (sizeof(kWeightTypes) / sizeof(kWeightTypes[0])) - 1)];
                const int64_t K = ggml_blck_size(t) > 1 ? ggml_blck_size(t) * pick(1, ggml_blck_size(t) >= 256 ? 3 : 12) : pick(1, 300);
                const int64_t M = pick(1, 70), N = coin(0.5) ? pick(1, 9) : pick(10, 40);
                const int64_t a2 = pick(1, 2), r2 = pick(1, 3), a3 = coin(0.2) ? 2 : 1;
                cs.push_back({ id + "mul_mat " + ggml_type_name(t) + " " + dims({ K, M, a2, a3 }) + " x " + dims({ K, N, a2 * r2, a3 }),
                               [=](Maker & m) {
                                   return same(ggml_mul_mat(m.ctx, m.in(t, { K, M, a2, a3 }), m.in(GGML_TYPE_F32, { K, N, a2 * r2, a3 })));
                               },
                               mm_tol(t, N) });
                break;
            }
            case OUT_PROD: {
                const ggml_type t = kWeightTypes[pick(0, (int) (sizeof(kWeightTypes) / sizeof(kWeightTypes[0])) - 1)];
                const int64_t K = ggml_blck_size(t) > 1 ? ggml_blck_size(t) * pick(1, 4) : pick(1, 200);
                const int64_t M = pick(1, 60), N = pick(1, 24);
                const bool transposed = coin(0.5);
                cs.push_back({ id + "out_prod " + ggml_type_name(t) + " " + dims({ K, M }) + " N " + std::to_string(N) + (transposed ? " b transposed" : ""),
                               [=](Maker & m) {
                                   ggml_tensor * b = transposed ? ggml_transpose(m.ctx, m.in(GGML_TYPE_F32, { M, N })) : m.in(GGML_TYPE_F32, { N, M });
                                   return same(ggml_out_prod(m.ctx, m.in(t, { K, M }), b));
                               },
                               1e-9 });
                break;
            }
            case REDUCE: {
                const std::vector<int64_t> ne = { pick(1, 2100), pick(1, 6), pick(1, 3), 1 };
                const int op = (int) pick(0, 2);
                const char * names[] = { "sum_rows", "mean", "argmax" };
                cs.push_back({ id + names[op] + " " + dims(ne),
                               [=](Maker & m) {
                                   ggml_tensor * x = m.in(GGML_TYPE_F32, op == 2 ? std::vector<int64_t>{ ne[0], ne[1] } : ne);
                                   return same(op == 0 ? ggml_sum_rows(m.ctx, x) : op == 1 ? ggml_mean(m.ctx, x) : ggml_argmax(m.ctx, x));
                               },
                               op == 2 ? 0.0 : 1e-10 });
                break;
            }
            case CONCAT: {
                const int dim = (int) pick(0, 3);
                const std::vector<int64_t> na = { pick(1, 20), pick(1, 6), pick(1, 4), pick(1, 3) };
                std::vector<int64_t> nb = na;
                nb[dim] = pick(1, 20);
                cs.push_back({ id + "concat dim " + std::to_string(dim) + " " + dims(na) + " + " + dims(nb),
                               [=](Maker & m) { return same(ggml_concat(m.ctx, m.in(GGML_TYPE_F32, na), m.in(GGML_TYPE_F32, nb), dim)); }, 0.0 });
                break;
            }
            case SET_ROWS: {  // rows into distinct cells of an F32 or F16 cache (I32 or I64 indices)
                const int64_t ne0 = pick(1, 300), cells = pick(1, 50), n = pick(1, (int) cells);
                const ggml_type ct = coin(0.5) ? GGML_TYPE_F16 : GGML_TYPE_F32;
                const bool i64 = coin(0.5);
                std::vector<float> cell((size_t) cells);
                std::iota(cell.begin(), cell.end(), 0.0f);
                std::shuffle(cell.begin(), cell.end(), rng);
                cell.resize((size_t) n);
                cs.push_back({ id + "set_rows " + ggml_type_name(ct) + " cache " + dims({ ne0, cells }) + " n " + std::to_string(n) + (i64 ? " i64" : ""),
                               [=](Maker & m) {
                                   ggml_tensor * cache = m.in(ct, { ne0, cells });
                                   ggml_tensor * r = ggml_set_rows(m.ctx, cache, m.in(GGML_TYPE_F32, { ne0, n }), m.in(i64 ? GGML_TYPE_I64 : GGML_TYPE_I32, { n }, values(cell)));
                                   return Built{ r, cache };
                               },
                               0.0 });
                break;
            }
            case FLASH_ATTN: {  // any number of queries and keys, grouped heads, F16 / F32 caches
                const int64_t D = coin(0.5) ? 64 : 128, n_q = coin(0.5) ? pick(1, 4) : pick(5, 70), n_kv = pick(1, 300);
                const int64_t Hkv = pick(1, 2), H = Hkv * pick(1, 3);
                const ggml_type kt = coin(0.7) ? GGML_TYPE_F16 : GGML_TYPE_F32;
                const int mask = (int) pick(0, 2);
                const int32_t n_past = (int32_t) pick(-3, (int) n_kv);
                cs.push_back({ id + "flash_attn_ext " + ggml_type_name(kt) + " D " + std::to_string(D) + " n_q " + std::to_string(n_q) + " n_kv " +
                                   std::to_string(n_kv) + " heads " + std::to_string(H) + "/" + std::to_string(Hkv) + (mask ? (mask == 1 ? " f32 mask" : " f16 mask") : ""),
                               [=](Maker & m) {
                                   ggml_tensor * q = ggml_permute(m.ctx, m.in(GGML_TYPE_F32, { D, H, n_q }), 0, 2, 1, 3);
                                   ggml_tensor * mk = mask ? m.in(mask == 1 ? GGML_TYPE_F32 : GGML_TYPE_F16, { n_kv, n_q }, causal(n_past)) : nullptr;
                                   return same(ggml_flash_attn_ext(m.ctx, q, m.in(kt, { D, n_kv, Hkv }), m.in(kt, { D, n_kv, Hkv }), mk, 0.125f, 0.0f, 0.0f));
                               },
                               kt == GGML_TYPE_F32 ? 1e-9 : 1e-7 });  // F32: prompts' tensor cores take BF16 hi + lo pairs (~2e-11)
                break;
            }
            case BACKWARD: {  // unary_back, rms_norm_back / norm_back, soft_max_back, get_rows_back, repeat_back
                const int op = (int) pick(0, 4);
                const std::vector<int64_t> ne = { pick(1, 700), pick(1, 6), pick(1, 3), 1 };
                const ggml_unary_op uop = (ggml_unary_op) pick(0, GGML_UNARY_OP_COUNT - 1);
                const int64_t rows = pick(1, 12), n_idx = pick(1, 16);
                const char * names[] = { "unary_back", "norm_back", "soft_max_back", "get_rows_back", "repeat_back" };
                cs.push_back({ id + names[op] + (op == 0 ? std::string(" ") + ggml_unary_op_name(uop) : std::string()) + " " + dims(ne),
                               [=](Maker & m) {
                                   switch (op) {
                                       case 0: return same(ggml_unary_back(m.ctx, m.in(GGML_TYPE_F32, ne), m.in(GGML_TYPE_F32, ne, uniform(-6.0f, 6.0f)), uop));
                                       case 1: {
                                           ggml_tensor * g = m.in(GGML_TYPE_F32, ne), * x = m.in(GGML_TYPE_F32, ne, uniform(-2.0f, 3.0f));
                                           return same(ne[0] % 2 ? ggml_rms_norm_back(m.ctx, g, x, 1e-5f) : ggml_norm_back(m.ctx, g, x, 1e-5f));
                                       }
                                       case 2: return same(ggml_soft_max_ext_back(m.ctx, m.in(GGML_TYPE_F32, ne), m.in(GGML_TYPE_F32, ne, uniform(0.0f, 0.1f)), 0.5f, 0.0f));
                                       case 3: return same(ggml_get_rows_back(m.ctx, m.in(GGML_TYPE_F32, { ne[0], n_idx }), m.in(GGML_TYPE_I32, { n_idx }, indices((int32_t) rows)),
                                                                              m.in(GGML_TYPE_F32, { ne[0], rows })));
                                       default: return same(ggml_repeat_back(m.ctx, m.in(GGML_TYPE_F32, { ne[0] * 2, ne[1], ne[2] * 2, 2 }), m.in(GGML_TYPE_F32, ne)));
                                   }
                               },
                               1e-10 });
                break;
            }
            case FLASH_ATTN_BACK: {  // few and many query rows (the tiled kernels), heads of any size to 128, often 64 or 128 (tensor cores)
                const int64_t D = coin(0.4) ? 64 * pick(1, 2) : 16 * pick(2, 8), Dv = coin(0.7) ? D : 16 * pick(2, 8), n_q = coin(0.4) ? pick(1, 15) : pick(16, 70);
                const int64_t n_kv = pick(1, 120), Hkv = pick(1, 2), H = Hkv * pick(1, 2);
                const ggml_type kt = float_types[pick(0, 2)];
                const int mask = (int) pick(0, 2);
                const int32_t n_past = (int32_t) pick(-3, (int) n_kv);
                cs.push_back({ id + "flash_attn_back " + ggml_type_name(kt) + " D " + std::to_string(D) + " Dv " + std::to_string(Dv) + " n_q " +
                                   std::to_string(n_q) + " n_kv " + std::to_string(n_kv) + " heads " + std::to_string(H) + "/" + std::to_string(Hkv) +
                                   (mask ? (mask == 1 ? " f32 mask" : " f16 mask") : ""),
                               [=](Maker & m) {
                                   ggml_tensor * q = ggml_permute(m.ctx, m.in(GGML_TYPE_F32, { D, H, n_q }), 0, 2, 1, 3);
                                   ggml_tensor * mk = mask ? m.in(mask == 1 ? GGML_TYPE_F32 : GGML_TYPE_F16, { n_kv, n_q }, causal(n_past)) : nullptr;
                                   return same(ggml_flash_attn_back(m.ctx, q, m.in(kt, { D, n_kv, Hkv }), m.in(kt, { Dv, n_kv, Hkv }), mk,
                                                                    m.in(GGML_TYPE_F32, { Dv, H, n_q }), 0.125f, 0.0f, 0.0f));
                               },
                               1e-8 });
                break;
            }
            case LOSS: {
                const int64_t n_class = pick(1, 1200), n = pick(1, 9);
                const bool back = coin(0.5);
                cs.push_back({ id + (back ? "cross_entropy_loss_back " : "cross_entropy_loss ") + dims({ n_class, n }),
                               [=](Maker & m) {
                                   ggml_tensor * logits = m.in(GGML_TYPE_F32, { n_class, n }, uniform(-5.0f, 5.0f));
                                   ggml_tensor * labels = m.in(GGML_TYPE_F32, { n_class, n }, uniform(0.0f, 2.0f / (float) n_class));
                                   return same(back ? ggml_cross_entropy_loss_back(m.ctx, m.in(GGML_TYPE_F32, { 1 }, values({ 0.7f })), logits, labels)
                                                    : ggml_cross_entropy_loss(m.ctx, logits, labels));
                               },
                               1e-10 });
                break;
            }
            case ADAMW: {
                const std::vector<int64_t> ne = { pick(1, 300), pick(1, 7), 1, 1 };
                const float lr = (float) pick(1, 100) * 1e-4f, wd = coin(0.5) ? 0.0f : 0.1f;
                const float it = (float) pick(1, 1000);
                cs.push_back({ id + "opt_step_adamw " + dims(ne),
                               [=](Maker & m) {
                                   ggml_tensor * w = m.in(GGML_TYPE_F32, ne);
                                   const float b1 = 0.9f, b2 = 0.999f;
                                   ggml_tensor * node = ggml_opt_step_adamw(m.ctx, w, m.in(GGML_TYPE_F32, ne), m.in(GGML_TYPE_F32, ne),
                                                                            m.in(GGML_TYPE_F32, ne, uniform(0.0f, 1.0f)),
                                                                            m.in(GGML_TYPE_F32, { 7 }, values({ lr, b1, b2, 1e-8f, wd,
                                                                                 1.0f / (1.0f - std::pow(b1, it)), 1.0f / (1.0f - std::pow(b2, it)) })));
                                   return Built{ node, w };
                               },
                               1e-12 });
                break;
            }
            case QUANT_ROWS: {  // F32 rows into a quantized cache: a copy into a view, or set_rows
                const ggml_type t = cache_types[pick(0, 5)];
                const int64_t ne0 = 32 * pick(1, 8), cells = pick(2, 30), n = pick(1, (int) cells - 1), at = pick(0, (int) (cells - n));
                const bool set = coin(0.5);
                std::vector<float> cell((size_t) cells);
                std::iota(cell.begin(), cell.end(), 0.0f);
                std::shuffle(cell.begin(), cell.end(), rng);
                cell.resize((size_t) n);
                cs.push_back({ id + (set ? "set_rows f32 -> " : "cpy f32 -> ") + ggml_type_name(t) + " cache " + dims({ ne0, cells }) + " n " + std::to_string(n),
                               [=](Maker & m) {
                                   ggml_tensor * cache = m.in(t, { ne0, cells }, uniform(0.0f, 0.0f));
                                   ggml_tensor * rows = m.in(GGML_TYPE_F32, { ne0, n });
                                   if (set) return Built{ ggml_set_rows(m.ctx, cache, rows, m.in(GGML_TYPE_I32, { n }, values(cell))), cache };
                                   ggml_tensor * dst = ggml_view_2d(m.ctx, cache, ne0, n, cache->nb[1], (size_t) at * cache->nb[1]);
                                   return Built{ ggml_cpy(m.ctx, rows, dst), cache };
                               },
                               1e-4 });
                break;
            }
            default: break;
        }
    }
    return cs;
}

}  // namespace
}  // namespace bocases
