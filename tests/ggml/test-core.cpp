// Core: contexts, the type table, tensor creation and strides, views, element access, F16/BF16
// conversion, graph building, the thread pool and the graph memory planner.
#include "test-util.h"

#include "ggml-alloc.h"
#include "ggml-cpu.h"
#include "ggml-impl.h"
#include "ggml-cpu/threadpool.h"

#include <cstring>
#include <thread>
#include <chrono>
#include <atomic>
#include <set>

// ---- type table ----------------------------------------------------------------------------
TEST(Types, GgufIdsAndBlockLayouts) {
    struct row { ggml_type t; int id; const char * name; int64_t blck; size_t size; bool quant; };
    const row rows[] = {
        {GGML_TYPE_F32, 0, "f32", 1, 4, false},     {GGML_TYPE_F16, 1, "f16", 1, 2, false},
        {GGML_TYPE_Q4_0, 2, "q4_0", 32, 18, true},  {GGML_TYPE_Q4_1, 3, "q4_1", 32, 20, true},
        {GGML_TYPE_Q5_0, 6, "q5_0", 32, 22, true},  {GGML_TYPE_Q5_1, 7, "q5_1", 32, 24, true},
        {GGML_TYPE_Q8_0, 8, "q8_0", 32, 34, true},  {GGML_TYPE_Q8_1, 9, "q8_1", 32, 36, true},
        {GGML_TYPE_Q2_K, 10, "q2_K", 256, 84, true}, {GGML_TYPE_Q3_K, 11, "q3_K", 256, 110, true},
        {GGML_TYPE_Q4_K, 12, "q4_K", 256, 144, true}, {GGML_TYPE_Q5_K, 13, "q5_K", 256, 176, true},
        {GGML_TYPE_Q6_K, 14, "q6_K", 256, 210, true}, {GGML_TYPE_Q8_K, 15, "q8_K", 256, 292, true},
        {GGML_TYPE_IQ4_NL, 20, "iq4_nl", 32, 18, true}, {GGML_TYPE_I8, 24, "i8", 1, 1, false},
        {GGML_TYPE_I16, 25, "i16", 1, 2, false},    {GGML_TYPE_I32, 26, "i32", 1, 4, false},
        {GGML_TYPE_I64, 27, "i64", 1, 8, false},    {GGML_TYPE_F64, 28, "f64", 1, 8, false},
        {GGML_TYPE_BF16, 30, "bf16", 1, 2, false},
    };
    for (const row & r : rows) {
        EXPECT_EQ((int) r.t, r.id);
        EXPECT_STREQ(ggml_type_name(r.t), r.name);
        EXPECT_EQ(ggml_blck_size(r.t), r.blck) << r.name;
        EXPECT_EQ(ggml_type_size(r.t), r.size) << r.name;
        EXPECT_EQ(ggml_is_quantized(r.t), r.quant) << r.name;
        const ggml_type_traits * tr = ggml_get_type_traits(r.t);
        EXPECT_EQ(tr->blck_size, r.blck);
        EXPECT_EQ(tr->type_size, r.size);
    }
    for (int id : {4, 5, 31, 32, 33, 36, 37, 38, 39, -1, 1000}) EXPECT_FALSE(ggml_type_is_valid(id)) << id;
    EXPECT_EQ(ggml_type_name((ggml_type) 4), nullptr);
    EXPECT_EQ(ggml_row_size(GGML_TYPE_Q4_K, 512), 288u);
    EXPECT_EQ(ggml_row_size(GGML_TYPE_Q8_0, 64), 68u);
}

// ---- F16 / BF16 ----------------------------------------------------------------------------
TEST(Convert, Fp16RoundTripsEveryValue) {
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = ggml_fp16_to_fp32((ggml_fp16_t) h);
        if (std::isnan(f)) {
            EXPECT_TRUE(std::isnan(ggml_fp16_to_fp32(ggml_fp32_to_fp16(f))));
            continue;
        }
        ASSERT_EQ(ggml_fp32_to_fp16(f), (ggml_fp16_t) h) << "half bits " << h;
    }
}

// Exact reference: the nearest half (ties to even) found by search over all halves.
static ggml_fp16_t nearest_half(float x) {
    static std::vector<std::pair<double, uint16_t>> finite;
    if (finite.empty()) {
        for (uint32_t h = 0; h < 0x7c00; h++) finite.push_back({ggml_fp16_to_fp32((ggml_fp16_t) h), (uint16_t) h});
    }
    const double ax = std::fabs((double) x);
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    if (ax >= 65520.0) return sign | 0x7c00;
    auto it = std::lower_bound(finite.begin(), finite.end(), std::make_pair(ax, (uint16_t) 0));
    if (it == finite.end()) return sign | 0x7bff;
    if (it->first == ax || it == finite.begin()) return sign | it->second;
    auto lo = it - 1;
    const double dlo = ax - lo->first, dhi = it->first - ax;
    if (dlo < dhi) return sign | lo->second;
    if (dhi < dlo) return sign | it->second;
    return sign | ((lo->second & 1) ? it->second : lo->second);
}

TEST(Convert, Fp32ToFp16RoundsToNearestEven) {
    std::mt19937 rng(1);
    std::uniform_int_distribution<uint32_t> bits;
    int checked = 0;
    while (checked < 200000) {
        uint32_t u = bits(rng);
        // Concentrate on the half range (exponents 100..145) where rounding matters.
        u = (u & 0x807fffffu) | ((100u + (u >> 23) % 46u) << 23);
        float f;
        memcpy(&f, &u, 4);
        ASSERT_EQ(ggml_fp32_to_fp16(f), nearest_half(f)) << "float " << f;
        checked++;
    }
    EXPECT_EQ(ggml_fp32_to_fp16(65504.0f), 0x7bff);
    EXPECT_EQ(ggml_fp32_to_fp16(65520.0f), 0x7c00);
    EXPECT_EQ(ggml_fp32_to_fp16(1e-8f), 0);
    EXPECT_EQ(ggml_fp32_to_fp16(-INFINITY), 0xfc00);
}

TEST(Convert, Bf16) {
    EXPECT_EQ(ggml_fp32_to_bf16(1.0f).bits, 0x3f80);
    EXPECT_EQ(ggml_bf16_to_fp32(ggml_fp32_to_bf16(3.140625f)), 3.140625f);
    // Ties to even: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7.
    EXPECT_EQ(ggml_bf16_to_fp32(ggml_fp32_to_bf16(1.0f + 0x1p-8f)), 1.0f);
    EXPECT_EQ(ggml_bf16_to_fp32(ggml_fp32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f)), 1.0f + 0x1p-7f);
    EXPECT_TRUE(std::isnan(ggml_bf16_to_fp32(ggml_fp32_to_bf16(NAN))));
    for (uint32_t b = 0; b < 65536; b++) {
        ggml_bf16_t h = { (uint16_t) b };
        const float f = ggml_bf16_to_fp32(h);
        if (!std::isnan(f)) {
            ASSERT_EQ(ggml_fp32_to_bf16(f).bits, b);
        }
    }
}

// ---- contexts and tensors ------------------------------------------------------------------
TEST(Context, TensorsStridesAndIteration) {
    tu::Ctx ctx(1 << 20);
    ASSERT_NE(ctx.ctx, nullptr);
    EXPECT_EQ(ggml_used_mem(ctx), 0u);
    ggml_tensor * a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 5, 4, 3);
    ggml_set_name(a, "a");
    EXPECT_EQ(a->nb[0], 4u);
    EXPECT_EQ(a->nb[1], 20u);
    EXPECT_EQ(a->nb[2], 80u);
    EXPECT_EQ(a->nb[3], 240u);
    EXPECT_EQ(ggml_nelements(a), 60);
    EXPECT_EQ(ggml_nrows(a), 12);
    EXPECT_EQ(ggml_nbytes(a), 240u);
    EXPECT_EQ(ggml_n_dims(a), 3);
    EXPECT_TRUE(ggml_is_contiguous(a));
    EXPECT_EQ((uintptr_t) a->data % GGML_MEM_ALIGN, 0u);
    EXPECT_GT(ggml_used_mem(ctx), 240u);

    ggml_tensor * q = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, 64, 3);
    ggml_set_name(q, "q");
    EXPECT_EQ(q->nb[0], 18u);
    EXPECT_EQ(q->nb[1], 36u);
    EXPECT_EQ(ggml_nbytes(q), 108u);

    ggml_tensor * b = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 7);
    ggml_set_name(b, "b");
    EXPECT_EQ(ggml_get_tensor(ctx, "q"), q);
    EXPECT_EQ(ggml_get_tensor(ctx, "nope"), nullptr);
    std::vector<ggml_tensor *> seen;
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) seen.push_back(t);
    EXPECT_EQ(seen, (std::vector<ggml_tensor *>{a, q, b}));

    // A name longer than the field is cut, not overflowed.
    std::string longname(200, 'x');
    ggml_set_name(b, longname.c_str());
    EXPECT_EQ(strlen(ggml_get_name(b)), (size_t) GGML_MAX_NAME - 1);
}

TEST(Context, NoAllocAndOverhead) {
    const int n = 10;
    tu::Ctx ctx(n * ggml_tensor_overhead(), true);
    for (int i = 0; i < n; i++) {
        ggml_tensor * t = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4096, 4096);
        EXPECT_EQ(t->data, nullptr);
    }
    EXPECT_LE(ggml_used_mem(ctx), n * ggml_tensor_overhead());
}

TEST(Context, UserBufferAndReset) {
    std::vector<uint8_t> mem(1 << 16);
    ggml_init_params p = { mem.size(), mem.data(), false };
    ggml_context * ctx = ggml_init(p);
    ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 16);
    EXPECT_GE((uint8_t *) t->data, mem.data());
    EXPECT_LT((uint8_t *) t->data, mem.data() + mem.size());
    ggml_reset(ctx);
    EXPECT_EQ(ggml_used_mem(ctx), 0u);
    EXPECT_EQ(ggml_get_first_tensor(ctx), nullptr);
    ggml_free(ctx);
}

TEST(Context, ElementAccess) {
    tu::Ctx ctx(1 << 20);
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_I32}) {
        ggml_tensor * t = ggml_new_tensor_2d(ctx, type, 3, 2);
        ggml_set_f32(t, 2.0f);
        EXPECT_EQ(ggml_get_f32_1d(t, 5), 2.0f);
        ggml_set_f32_1d(t, 4, 7.0f);
        EXPECT_EQ(ggml_get_f32_nd(t, 1, 1, 0, 0), 7.0f);
        ggml_set_i32_nd(t, 2, 0, 0, 0, -3);
        EXPECT_EQ(ggml_get_i32_1d(t, 2), -3);
    }
    // 1-d access of a transposed view follows logical order.
    ggml_tensor * m = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2);
    for (int i = 0; i < 6; i++) ggml_set_f32_1d(m, i, (float) i);
    ggml_tensor * mt = ggml_transpose(ctx, m);
    EXPECT_EQ(ggml_get_f32_1d(mt, 1), 3.0f);  // mt[1, 0] = m[0, 1]
}

// ---- views ---------------------------------------------------------------------------------
TEST(Views, PermuteTransposeViewReshape) {
    tu::Ctx ctx(1 << 20);
    ggml_tensor * a = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 2, 3, 4, 5);
    ggml_tensor * p = ggml_permute(ctx, a, 2, 0, 1, 3);  // dim0 -> 2, dim1 -> 0, dim2 -> 1
    EXPECT_EQ(p->ne[0], 3); EXPECT_EQ(p->ne[1], 4); EXPECT_EQ(p->ne[2], 2); EXPECT_EQ(p->ne[3], 5);
    EXPECT_EQ(p->nb[0], a->nb[1]); EXPECT_EQ(p->nb[1], a->nb[2]); EXPECT_EQ(p->nb[2], a->nb[0]);
    EXPECT_EQ(p->data, a->data);
    EXPECT_TRUE(ggml_is_permuted(p));
    EXPECT_FALSE(ggml_is_contiguous(p));

    ggml_tensor * t = ggml_transpose(ctx, a);
    EXPECT_EQ(t->ne[0], 3); EXPECT_EQ(t->ne[1], 2);
    EXPECT_TRUE(ggml_is_transposed(t));

    ggml_tensor * v = ggml_view_2d(ctx, a, 2, 3, a->nb[1], a->nb[2]);
    EXPECT_EQ((char *) v->data, (char *) a->data + a->nb[2]);
    EXPECT_EQ(v->view_src, a);
    ggml_tensor * vv = ggml_view_1d(ctx, v, 2, v->nb[1]);  // a view of a view points at the owner
    EXPECT_EQ(vv->view_src, a);
    EXPECT_EQ(vv->view_offs, a->nb[2] + a->nb[1]);

    ggml_tensor * r = ggml_reshape_2d(ctx, a, 6, 20);
    EXPECT_EQ(r->nb[1], 24u);
    EXPECT_TRUE(ggml_is_contiguous(r));

    ggml_tensor * padded = ggml_view_2d(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 4), 5, 4, 32, 0);
    EXPECT_FALSE(ggml_is_contiguous(padded));
    EXPECT_TRUE(ggml_is_contiguous_rows(padded));
    EXPECT_TRUE(ggml_is_contiguous_1(padded));
}

// ---- graphs --------------------------------------------------------------------------------
TEST(Graph, TopologicalOrderAndDedup) {
    tu::Ctx ctx(16 << 20);
    ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    ggml_tensor * y = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    ggml_tensor * s = ggml_add(ctx, x, y);
    ggml_tensor * m = ggml_mul(ctx, s, s);       // s used twice
    ggml_tensor * out = ggml_sub(ctx, m, x);     // x used twice
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ggml_build_forward_expand(gf, out);          // expanding twice adds nothing
    EXPECT_EQ(ggml_graph_n_nodes(gf), 3);
    EXPECT_EQ(ggml_graph_n_leafs(gf), 2);
    EXPECT_EQ(ggml_graph_node(gf, 0), s);
    EXPECT_EQ(ggml_graph_node(gf, 1), m);
    EXPECT_EQ(ggml_graph_node(gf, -1), out);
    ggml_set_name(m, "m");
    EXPECT_EQ(ggml_graph_get_tensor(gf, "m"), m);

    ggml_set_f32(x, 1.0f);
    ggml_set_f32(y, 2.0f);
    ASSERT_EQ(ggml_graph_compute_with_ctx(ctx, gf, 2), GGML_STATUS_SUCCESS);
    for (int i = 0; i < 4; i++) EXPECT_EQ(ggml_get_f32_1d(out, i), 8.0f);
}

TEST(Graph, LongChainCustomSize) {
    const int n = 20000;
    tu::Ctx ctx(ggml_graph_overhead_custom(n + 10, false) + (size_t) (n + 10) * (ggml_tensor_overhead() + 64));
    ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1);
    ggml_set_f32(x, 0.0f);
    ggml_tensor * one = ggml_new_f32(ctx, 1.0f);
    ggml_tensor * cur = x;
    for (int i = 0; i < n; i++) cur = ggml_add1(ctx, cur, one);
    ggml_cgraph * gf = ggml_new_graph_custom(ctx, n + 10, false);
    ggml_build_forward_expand(gf, cur);
    EXPECT_EQ(ggml_graph_n_nodes(gf), n);
    ggml_cplan plan = ggml_graph_plan(gf, 2);
    ASSERT_EQ(plan.work_size, 0u);
    ASSERT_EQ(ggml_graph_compute(gf, &plan), GGML_STATUS_SUCCESS);
    EXPECT_EQ(ggml_get_f32_1d(cur, 0), (float) n);
}

static bool abort_after_first(void * data) { return ++*(int *) data >= 1; }

TEST(Graph, AbortCallbackStopsBetweenNodes) {
    tu::Ctx ctx(16 << 20);
    ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
    ggml_set_f32(x, 1.0f);
    ggml_tensor * a = ggml_scale(ctx, x, 2.0f);
    ggml_tensor * b = ggml_scale(ctx, a, 2.0f);
    ggml_set_f32(b, -1.0f);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, b);
    for (int nt = 1; nt <= 3; nt++) {
        int calls = 0;
        ggml_cplan plan = ggml_graph_plan(gf, nt);
        plan.abort_callback = abort_after_first;
        plan.abort_callback_data = &calls;
        EXPECT_EQ(ggml_graph_compute(gf, &plan), GGML_STATUS_ABORTED);
        EXPECT_EQ(ggml_get_f32_1d(a, 0), 2.0f);
        EXPECT_EQ(ggml_get_f32_1d(b, 0), -1.0f);  // never computed
    }
}

TEST(Graph, MissingDataIsAnErrorNotACrash) {
    tu::Ctx ctx(1 << 20, true);
    ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
    ggml_tensor * y = ggml_scale(ctx, x, 2.0f);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, y);
    ggml_cplan plan = ggml_graph_plan(gf, 1);
    EXPECT_EQ(ggml_graph_compute(gf, &plan), GGML_STATUS_FAILED);
}

TEST(ThreadPool, ManyGraphsManyThreadCounts) {
    tu::Ctx ctx(64 << 20);
    std::mt19937 rng(5);
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 37, 29);
    tu::fill_uniform(x, rng);
    ggml_tensor * y = ggml_silu(ctx, ggml_add(ctx, ggml_scale(ctx, x, 0.5f), x));
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, y);
    std::vector<uint8_t> ref;
    for (int iter = 0; iter < 300; iter++) {
        const int nt = 1 + iter % 4;
        ggml_cplan plan = ggml_graph_plan(gf, nt);
        ASSERT_EQ(ggml_graph_compute(gf, &plan), GGML_STATUS_SUCCESS);
        if (iter == 0) ref = tu::bytes_of(y);
        else ASSERT_EQ(tu::bytes_of(y), ref) << "iteration " << iter << " threads " << nt;
    }
}

// Items shared with stealing: every item of a stretch is taken exactly once, each thread takes its
// own share front to back (items of it stolen and stolen back come later, still in order; under
// qemu a thread 0 descheduled for a while saw that: the old check wanted them consecutive), and
// a slow thread's share is finished by the others. Consecutive
// stretches (barriers) and jobs each start afresh.
TEST(ThreadPool, SharedItemsAreTakenOnceAndStolenFromASlowThread) {
    ggml_threadpool tp;
    for (int nth : { 2, 3, 4 }) {
        for (int64_t n : { 0, 1, 5, 64, 1000 }) {
            const int stretches = 3;
            std::vector<std::atomic<int>> taken_by((size_t) (n * stretches));
            for (auto & t : taken_by) t = -1;
            std::vector<int> bad_order(nth, 0);
            tp.run(nth, [&](int ith, int nth_) {
                for (int s = 0; s < stretches; s++) {
                    int64_t last_own = -1, first, end;
                    const int64_t per = (n + nth_ - 1) / nth_, own0 = std::min(n, per * ith), own1 = std::min(n, own0 + per);
                    while (tp.next_items(ith, nth_, n, &first, &end)) {
                        if (first >= end) bad_order[ith] += 100000;
                        for (int64_t it = first; it < end; it++) {
                            int expected = -1;
                            if (!taken_by[(size_t) (s * n + it)].compare_exchange_strong(expected, ith)) bad_order[ith] += 1000;
                            // Its own items front to back: the first is own0 (a thief takes only the back
                            // half of a share), then increasing; not always consecutive, since a thief's
                            // back half of this share may be stolen back once this thread's front is done.
                            if (it >= own0 && it < own1) {
                                if (last_own < 0 ? it != own0 : it <= last_own) bad_order[ith]++;
                                last_own = it;
                            }
                            if (ith == nth_ - 1) std::this_thread::sleep_for(std::chrono::microseconds(200));  // the slow one
                        }
                    }
                    tp.barrier();
                }
            });
            for (int t = 0; t < nth; t++) EXPECT_EQ(bad_order[t], 0) << "thread " << t << " nth " << nth << " n " << n;
            for (int64_t i = 0; i < n * stretches; i++) ASSERT_GE(taken_by[(size_t) i].load(), 0) << "item " << i % n << " never taken";
            // The slow thread's last item went to another thread: in every stretch where the
            // slow thread's share takes 50 ms (n 1000), in some stretch where it takes 3 ms (n 64:
            // a loaded machine, or qemu, may not run the others that soon).
            if (n >= 64) {
                int stolen = 0;
                for (int s = 0; s < stretches; s++) stolen += taken_by[(size_t) (s * n + n - 1)].load() != nth - 1;
                EXPECT_GE(stolen, n >= 1000 ? stretches : 1) << "nth " << nth << " n " << n;
            }
        }
    }
}

// ---- graph memory planner ------------------------------------------------------------------
// Builds the same computation in an allocating context (reference) and in a no_alloc context
// placed by the planner, and compares.
TEST(Planner, ReusesMemoryAndMatchesDirectCompute) {
    const int64_t n = 1000;
    const int depth = 50;
    std::mt19937 rng(3);
    std::vector<float> input(n);
    for (float & v : input) v = std::uniform_real_distribution<float>(-1, 1)(rng);

    auto build = [&](ggml_context * ctx, ggml_tensor ** in) {
        ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
        ggml_set_input(x);
        *in = x;
        ggml_tensor * cur = x;
        for (int i = 0; i < depth; i++) {
            ggml_tensor * t = ggml_scale(ctx, cur, 0.9f);
            cur = ggml_add(ctx, ggml_silu(ctx, t), cur);  // cur read twice: not reusable in place at once
        }
        return cur;
    };

    tu::Ctx ref_ctx(64 << 20);
    ggml_tensor * ref_in;
    ggml_tensor * ref_out = build(ref_ctx, &ref_in);
    memcpy(ref_in->data, input.data(), n * sizeof(float));
    tu::compute(ref_ctx, ref_out, 2);

    tu::Ctx ctx(ggml_graph_overhead() + 1000 * ggml_tensor_overhead(), true);
    ggml_tensor * in;
    ggml_tensor * out = build(ctx, &in);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    ASSERT_TRUE(ggml_gallocr_alloc_graph(ga, gf));
    const size_t used = ggml_gallocr_get_buffer_size(ga, 0);
    const size_t one = n * sizeof(float);
    // 3 * depth intermediate tensors, but only a handful alive at once.
    EXPECT_LE(used, 6 * one) << "planner did not reuse memory";
    EXPECT_GE(used, 2 * one);
    memcpy(in->data, input.data(), one);
    for (int nt = 1; nt <= 3; nt++) {
        ggml_cplan plan = ggml_graph_plan(gf, nt);
        std::vector<uint8_t> work(plan.work_size);
        plan.work_data = work.data();
        ASSERT_EQ(ggml_graph_compute(gf, &plan), GGML_STATUS_SUCCESS);
        EXPECT_EQ(memcmp(out->data, ref_out->data, one), 0);
        EXPECT_EQ(memcmp(in->data, input.data(), one), 0) << "input was overwritten";
    }
    ggml_gallocr_free(ga);
}

TEST(Planner, OutputsAreKeptAndViewsResolved) {
    tu::Ctx ctx(ggml_graph_overhead() + 100 * ggml_tensor_overhead(), true);
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 4);
    ggml_set_input(x);
    ggml_tensor * a = ggml_scale(ctx, x, 2.0f);
    ggml_set_output(a);  // read by the user although later nodes follow
    ggml_tensor * row = ggml_view_1d(ctx, a, 8, a->nb[1]);
    ggml_tensor * b = ggml_scale(ctx, ggml_cont(ctx, ggml_transpose(ctx, a)), 3.0f);
    ggml_tensor * c = ggml_add(ctx, ggml_scale(ctx, row, 1.0f), ggml_view_1d(ctx, b, 8, 0));
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, c);
    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    ASSERT_TRUE(ggml_gallocr_alloc_graph(ga, gf));
    ASSERT_NE(row->data, nullptr);
    EXPECT_EQ((char *) row->data, (char *) a->data + a->nb[1]);
    for (int i = 0; i < 32; i++) ggml_set_f32_1d(x, i, (float) i);
    ggml_cplan plan = ggml_graph_plan(gf, 2);
    std::vector<uint8_t> work(plan.work_size);
    plan.work_data = work.data();
    ASSERT_EQ(ggml_graph_compute(gf, &plan), GGML_STATUS_SUCCESS);
    for (int i = 0; i < 32; i++) EXPECT_EQ(ggml_get_f32_1d(a, i), 2.0f * i);
    // c[i] = a[i, 1] + b_flat[i], b = 3 a^T laid out [4, 8]: b_flat[k] = 3 a[k / 4, k % 4]
    for (int i = 0; i < 8; i++) EXPECT_EQ(ggml_get_f32_1d(c, i), 2.0f * (8 + i) + 6.0f * (i / 4 + 8 * (i % 4)));
    ggml_gallocr_free(ga);
}

TEST(Planner, ReserveThenSmallerGraphDoesNotGrow) {
    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    size_t reserved = 0;
    for (int64_t n : {4096, 100}) {
        tu::Ctx ctx(ggml_graph_overhead() + 100 * ggml_tensor_overhead(), true);
        ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
        ggml_set_input(x);
        ggml_tensor * y = ggml_sqr(ctx, ggml_scale(ctx, x, 2.0f));
        ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, y);
        if (n == 4096) {
            ASSERT_TRUE(ggml_gallocr_reserve(ga, gf));
            reserved = ggml_gallocr_get_buffer_size(ga, 0);
        } else {
            ASSERT_TRUE(ggml_gallocr_alloc_graph(ga, gf));
            EXPECT_EQ(ggml_gallocr_get_buffer_size(ga, 0), reserved);
        }
    }
    ggml_gallocr_free(ga);
}

TEST(Planner, AllocCtxTensors) {
    tu::Ctx ctx(10 * ggml_tensor_overhead(), true);
    ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 33, 7);
    ggml_tensor * v = ggml_view_1d(ctx, w, 33, w->nb[1]);
    size_t size = 0;
    void * buf = ggml_alloc_ctx_tensors(ctx, &size);
    ASSERT_NE(buf, nullptr);
    EXPECT_GE(size, ggml_nbytes(w));
    EXPECT_EQ(w->data, buf);
    EXPECT_EQ((char *) v->data, (char *) buf + w->nb[1]);
    ggml_aligned_free(buf);
}
