// test-backend.cpp - the backend interface: the CPU backend's buffers and graph compute, the
// graph allocator on buffer types, and the scheduler splitting a graph between the CPU and a
// second device. That device is simulated here: its memory has addresses the CPU cannot read
// (any CPU kernel touching it without a copy crashes the test) and it supports only a few ops.
#include <gtest/gtest.h>

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-opt.h"
#include "fake-gpu.h"
#include "ggml-backend.h"
#include "ggml-backend-impl.h"
#include "ggml-impl.h"
#include "ggml-cpu.h"
#include "ggml-cpu/cpu-ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <vector>

namespace {

std::vector<float> random_values(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float & x : v) x = d(rng);
    return v;
}

TEST(Backend, CpuBufferSetGetClearAndCompute) {
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ASSERT_NE(cpu, nullptr);
    EXPECT_TRUE(ggml_backend_is_cpu(cpu));
    EXPECT_STREQ(ggml_backend_name(cpu), "CPU");
    ggml_backend_buffer_type_t buft = ggml_backend_get_default_buffer_type(cpu);
    EXPECT_TRUE(ggml_backend_buft_is_host(buft));
    EXPECT_GE(ggml_backend_buft_get_alignment(buft), 32u);
    EXPECT_EQ(ggml_backend_dev_type(ggml_backend_get_device(cpu)), GGML_BACKEND_DEVICE_TYPE_CPU);
    EXPECT_GE(ggml_backend_dev_count(), 1u);

    ggml_init_params ip = { 16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true };
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 40, 7);
    ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 40, 5);
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors(ctx, cpu);
    ASSERT_NE(wbuf, nullptr);
    EXPECT_EQ(a->buffer, wbuf);
    const std::vector<float> av = random_values(40 * 7, 1), bv = random_values(40 * 5, 2);
    ggml_backend_tensor_set(a, av.data(), 0, av.size() * sizeof(float));
    ggml_backend_tensor_set(b, bv.data(), 0, bv.size() * sizeof(float));
    std::vector<float> back(av.size());
    ggml_backend_tensor_get(a, back.data(), 0, back.size() * sizeof(float));
    EXPECT_EQ(back, av);
    // Partial writes land at their offset.
    const float v = 42.0f;
    ggml_backend_tensor_set(a, &v, 3 * sizeof(float), sizeof(float));
    float got = 0;
    ggml_backend_tensor_get(a, &got, 3 * sizeof(float), sizeof(float));
    EXPECT_EQ(got, 42.0f);
    ggml_backend_tensor_set(a, av.data(), 0, av.size() * sizeof(float));

    ggml_tensor * c = ggml_mul_mat(ctx, a, b);  // [7, 5]
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, c);
    ggml_gallocr_t ga = ggml_gallocr_new(buft);
    ASSERT_TRUE(ggml_gallocr_alloc_graph(ga, gf));
    EXPECT_NE(c->buffer, nullptr);
    ggml_backend_cpu_set_n_threads(cpu, 2);
    ASSERT_EQ(ggml_backend_graph_compute(cpu, gf), GGML_STATUS_SUCCESS);
    std::vector<float> out(7 * 5);
    ggml_backend_tensor_get(c, out.data(), 0, out.size() * sizeof(float));
    for (int j = 0; j < 5; j++) {
        for (int i = 0; i < 7; i++) {
            double ref = 0;
            for (int k = 0; k < 40; k++) ref += (double) av[i * 40 + k] * bv[j * 40 + k];
            EXPECT_NEAR(out[j * 7 + i], ref, 1e-5) << i << "," << j;
        }
    }
    ggml_backend_buffer_clear(wbuf, 0);
    ggml_backend_tensor_get(a, back.data(), 0, back.size() * sizeof(float));
    EXPECT_EQ(back, std::vector<float>(back.size(), 0.0f));

    ggml_gallocr_free(ga);
    ggml_backend_buffer_free(wbuf);
    ggml_free(ctx);
    ggml_backend_free(cpu);
}

// ---- a simulated device (fake-gpu.h) --------------------------------------------------------
// It supports only MUL_MAT, ADD and views here.
ggml_backend_t fake_backend_init() {
    fake_gpu::set_supports([](const ggml_tensor * op) {
        return op->op == GGML_OP_MUL_MAT || op->op == GGML_OP_ADD || ggml_op_is_view(op->op) || op->op == GGML_OP_NONE;
    });
    return fake_gpu::init();
}

// Two layers, y = gelu(W1 x + b1), out = W2 y + softmax(W1 x): W1 and b1 live on the device,
// W2 on the CPU. The device runs the products and additions it holds the weights of; gelu and
// softmax are CPU only; the result must equal the same graph computed on the CPU alone.
struct two_layer {
    ggml_context * wctx = nullptr;
    ggml_tensor * w1, * b1, * w2;
    std::vector<float> w1v, b1v, w2v, xv;
    ggml_backend_buffer_t dev_buf = nullptr, cpu_buf = nullptr;

    two_layer(ggml_backend_buffer_type_t dev_buft, ggml_backend_buffer_type_t cpu_buft) {
        ggml_init_params ip = { 8 * ggml_tensor_overhead(), nullptr, true };
        wctx = ggml_init(ip);
        w1 = ggml_new_tensor_2d(wctx, GGML_TYPE_F32, 32, 24);
        b1 = ggml_new_tensor_1d(wctx, GGML_TYPE_F32, 24);
        ggml_init_params ip2 = { 8 * ggml_tensor_overhead(), nullptr, true };
        ggml_context * c2 = ggml_init(ip2);
        w2 = ggml_new_tensor_2d(c2, GGML_TYPE_F32, 24, 24);
        dev_buf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, dev_buft);
        cpu_buf = ggml_backend_alloc_ctx_tensors_from_buft(c2, cpu_buft);
        ggml_backend_buffer_set_usage(dev_buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        ggml_backend_buffer_set_usage(cpu_buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        w1v = random_values(32 * 24, 3);
        b1v = random_values(24, 4);
        w2v = random_values(24 * 24, 5);
        xv = random_values(32 * 3, 6);
        ggml_backend_tensor_set(w1, w1v.data(), 0, w1v.size() * 4);
        ggml_backend_tensor_set(b1, b1v.data(), 0, b1v.size() * 4);
        ggml_backend_tensor_set(w2, w2v.data(), 0, w2v.size() * 4);
        ctx2 = c2;
    }
    ~two_layer() {
        ggml_backend_buffer_free(dev_buf);
        ggml_backend_buffer_free(cpu_buf);
        ggml_free(wctx);
        ggml_free(ctx2);
    }
    ggml_context * ctx2 = nullptr;

    ggml_cgraph * build(ggml_context * ctx, ggml_tensor ** x, ggml_tensor ** out) {
        *x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 32, 3);
        ggml_set_input(*x);
        ggml_tensor * h = ggml_add(ctx, ggml_mul_mat(ctx, w1, *x), b1);
        ggml_tensor * y = ggml_gelu(ctx, h);
        ggml_tensor * o = ggml_add(ctx, ggml_mul_mat(ctx, w2, y), ggml_soft_max(ctx, h));
        ggml_set_output(o);
        *out = o;
        ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, o);
        return gf;
    }
};

std::vector<float> reference_two_layer(const two_layer & m) {
    ggml_init_params ip = { 64u << 20, nullptr, false };
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * w1 = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 32, 24);
    ggml_tensor * b1 = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 24);
    ggml_tensor * w2 = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 24, 24);
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 32, 3);
    memcpy(w1->data, m.w1v.data(), m.w1v.size() * 4);
    memcpy(b1->data, m.b1v.data(), m.b1v.size() * 4);
    memcpy(w2->data, m.w2v.data(), m.w2v.size() * 4);
    memcpy(x->data, m.xv.data(), m.xv.size() * 4);
    ggml_tensor * h = ggml_add(ctx, ggml_mul_mat(ctx, w1, x), b1);
    ggml_tensor * o = ggml_add(ctx, ggml_mul_mat(ctx, w2, ggml_gelu(ctx, h)), ggml_soft_max(ctx, h));
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, o);
    EXPECT_EQ(ggml_graph_compute_with_ctx(ctx, gf, 1), GGML_STATUS_SUCCESS);
    std::vector<float> r((float *) o->data, (float *) o->data + ggml_nelements(o));
    ggml_free(ctx);
    return r;
}

TEST(Backend, SchedulerSplitsBetweenDevicesAndCopiesAtTheSeams) {
    ggml_backend_t dev = fake_backend_init();
    ggml_backend_t cpu = ggml_backend_cpu_init();
    two_layer m(fake_gpu::buffer_type(), ggml_backend_cpu_buffer_type());
    const std::vector<float> ref = reference_two_layer(m);

    ggml_backend_t backends[2] = { dev, cpu };
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, nullptr, 2, 256, false, false);
    ASSERT_NE(sched, nullptr);
    std::vector<uint8_t> meta(64 * ggml_tensor_overhead() + ggml_graph_overhead());
    for (int rep = 0; rep < 3; rep++) {
        SCOPED_TRACE(rep);
        if (rep == 0) {  // reserve with a measure graph first, as the runtime does
            ggml_init_params ip = { meta.size(), meta.data(), true };
            ggml_context * ctx = ggml_init(ip);
            ggml_tensor * x, * out;
            ASSERT_TRUE(ggml_backend_sched_reserve(sched, m.build(ctx, &x, &out)));
            ggml_free(ctx);
        }
        ggml_init_params ip = { meta.size(), meta.data(), true };
        ggml_context * ctx = ggml_init(ip);
        ggml_tensor * x, * out;
        ggml_cgraph * gf = m.build(ctx, &x, &out);
        ggml_backend_sched_reset(sched);
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(sched, gf));
        // mul_mat(W1) and add(b1) on the device; gelu, soft_max, mul_mat(W2) and the last add
        // (which reads the CPU's results) on the CPU.
        EXPECT_EQ(ggml_backend_sched_get_n_splits(sched), 2);
        // x is placed on the device (its first reader's); h goes back once for both CPU readers.
        EXPECT_EQ(ggml_backend_sched_get_n_copies(sched), 1);
        EXPECT_EQ(ggml_backend_sched_get_tensor_backend(sched, out), cpu);
        ggml_backend_tensor_set(x, m.xv.data(), 0, m.xv.size() * 4);
        fake_gpu::ran().clear();
        ASSERT_EQ(ggml_backend_sched_graph_compute(sched, gf), GGML_STATUS_SUCCESS);
        EXPECT_EQ(fake_gpu::ran(), (std::vector<ggml_op>{ GGML_OP_MUL_MAT, GGML_OP_ADD }));
        std::vector<float> got(ref.size());
        ggml_backend_tensor_get(out, got.data(), 0, got.size() * 4);
        for (size_t i = 0; i < ref.size(); i++) EXPECT_NEAR(got[i], ref[i], 1e-5) << i;
        EXPECT_GT(ggml_backend_sched_get_buffer_size(sched, dev), 0u);
        EXPECT_GT(ggml_backend_sched_get_buffer_size(sched, cpu), 0u);
        ggml_free(ctx);
    }
    ggml_backend_sched_free(sched);
    ggml_backend_free(cpu);
    ggml_backend_free(dev);
}

// A node pinned to the CPU runs there even though its weights are on the device; with the CPU
// alone, one split and no copies.
TEST(Backend, SchedulerPinsAndSingleBackend) {
    ggml_backend_t dev = fake_backend_init();
    ggml_backend_t cpu = ggml_backend_cpu_init();
    two_layer m(fake_gpu::buffer_type(), ggml_backend_cpu_buffer_type());
    const std::vector<float> ref = reference_two_layer(m);
    std::vector<uint8_t> meta(64 * ggml_tensor_overhead() + ggml_graph_overhead());
    {
        ggml_backend_t backends[2] = { dev, cpu };
        ggml_backend_sched_t sched = ggml_backend_sched_new(backends, nullptr, 2, 256, false, false);
        ggml_init_params ip = { meta.size(), meta.data(), true };
        ggml_context * ctx = ggml_init(ip);
        ggml_tensor * x, * out;
        ggml_cgraph * gf = m.build(ctx, &x, &out);
        ggml_tensor * first = ggml_graph_node(gf, 0);
        ASSERT_EQ(first->op, GGML_OP_MUL_MAT);
        ggml_backend_sched_set_tensor_backend(sched, first, cpu);
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(sched, gf));
        EXPECT_EQ(ggml_backend_sched_get_tensor_backend(sched, first), cpu);
        ggml_backend_tensor_set(x, m.xv.data(), 0, m.xv.size() * 4);
        fake_gpu::ran().clear();
        ASSERT_EQ(ggml_backend_sched_graph_compute(sched, gf), GGML_STATUS_SUCCESS);
        EXPECT_EQ(std::count(fake_gpu::ran().begin(), fake_gpu::ran().end(), GGML_OP_MUL_MAT), 0);
        std::vector<float> got(ref.size());
        ggml_backend_tensor_get(out, got.data(), 0, got.size() * 4);
        for (size_t i = 0; i < ref.size(); i++) EXPECT_NEAR(got[i], ref[i], 1e-5) << i;
        ggml_free(ctx);
        ggml_backend_sched_free(sched);
    }
    {
        two_layer mc(ggml_backend_cpu_buffer_type(), ggml_backend_cpu_buffer_type());
        const std::vector<float> refc = reference_two_layer(mc);
        ggml_backend_sched_t sched = ggml_backend_sched_new(&cpu, nullptr, 1, 256, false, false);
        ggml_init_params ip = { meta.size(), meta.data(), true };
        ggml_context * ctx = ggml_init(ip);
        ggml_tensor * x, * out;
        ggml_cgraph * gf = mc.build(ctx, &x, &out);
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(sched, gf));
        EXPECT_EQ(ggml_backend_sched_get_n_splits(sched), 1);
        EXPECT_EQ(ggml_backend_sched_get_n_copies(sched), 0);
        ggml_backend_tensor_set(x, mc.xv.data(), 0, mc.xv.size() * 4);
        ASSERT_EQ(ggml_backend_sched_graph_compute(sched, gf), GGML_STATUS_SUCCESS);
        std::vector<float> got(refc.size());
        ggml_backend_tensor_get(out, got.data(), 0, got.size() * 4);
        for (size_t i = 0; i < refc.size(); i++) EXPECT_EQ(got[i], refc[i]) << i;  // same kernels, same bits
        ggml_free(ctx);
        ggml_backend_sched_free(sched);
    }
    ggml_backend_free(cpu);
    ggml_backend_free(dev);
}

// Repacked weights: a whole matrix written to the repack buffer type is stored repacked (when
// this build repacks the type) and multiplies to the same result as the plain layout.
TEST(Backend, RepackBufferTypeRepacksWholeMatrices) {
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_init_params ip = { 16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true };
    ggml_context * wctx = ggml_init(ip);
    ggml_tensor * wq = ggml_new_tensor_2d(wctx, GGML_TYPE_Q8_0, 256, 64);
    ggml_context * pctx = ggml_init(ip);
    ggml_tensor * wp = ggml_new_tensor_2d(pctx, GGML_TYPE_Q8_0, 256, 64);
    ggml_backend_buffer_t rb = ggml_backend_alloc_ctx_tensors_from_buft(wctx, ggml_backend_cpu_repack_buffer_type());
    ggml_backend_buffer_t pb = ggml_backend_alloc_ctx_tensors_from_buft(pctx, ggml_backend_cpu_buffer_type());
    ASSERT_NE(rb, nullptr);
    const std::vector<float> wf = random_values(256 * 64, 7);
    std::vector<uint8_t> q(ggml_nbytes(wq));
    ggml_quantize_chunk(GGML_TYPE_Q8_0, wf.data(), q.data(), 0, 64, 256, nullptr);
    ggml_backend_tensor_set(wq, q.data(), 0, q.size());
    ggml_backend_tensor_set(wp, q.data(), 0, q.size());
    EXPECT_EQ((wq->flags & GGML_TENSOR_FLAG_REPACKED) != 0, ggml_cpu_can_repack(wp));

    std::vector<float> res[2];
    for (int k = 0; k < 2; k++) {
        ggml_context * ctx = ggml_init(ip);
        ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 256, 5);
        ggml_tensor * y = ggml_mul_mat(ctx, k == 0 ? wq : wp, x);
        ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, y);
        ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
        ASSERT_TRUE(ggml_gallocr_alloc_graph(ga, gf));
        const std::vector<float> xv = random_values(256 * 5, 8);
        ggml_backend_tensor_set(x, xv.data(), 0, xv.size() * 4);
        ASSERT_EQ(ggml_backend_graph_compute(cpu, gf), GGML_STATUS_SUCCESS);
        res[k].resize(64 * 5);
        ggml_backend_tensor_get(y, res[k].data(), 0, res[k].size() * 4);
        ggml_gallocr_free(ga);
        ggml_free(ctx);
    }
    // The repacked kernels quantize the activations like the plain ones; sums may be ordered
    // differently.
    for (size_t i = 0; i < res[0].size(); i++) EXPECT_NEAR(res[0][i], res[1][i], 1e-4f * (1.0f + std::fabs(res[1][i]))) << i;
    ggml_backend_buffer_free(rb);
    ggml_backend_buffer_free(pb);
    ggml_free(wctx);
    ggml_free(pctx);
    ggml_backend_free(cpu);
}



// The CPU backend runs any compiled-in kernel table: the workers compute with the backend's (the
// abort callback, polled on worker 0 between nodes, sees it), and every table's results are the
// scalar reference's within rounding.
TEST(Backend, CpuKernelTablesAreSelectable) {
    const int n_sets = ggml_backend_cpu_n_kernel_sets();
    ASSERT_GE(n_sets, 1);
    EXPECT_STREQ(ggml_backend_cpu_kernel_set_name(0), ggml_cpu_isa_name());
    EXPECT_STREQ(ggml_backend_cpu_kernel_set_name(n_sets - 1), "scalar");
    EXPECT_EQ(ggml_backend_cpu_kernel_set_name(n_sets), nullptr);

    ggml_init_params ip = { 16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true };
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, 256, 48);
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 256, 5);
    ggml_tensor * y = ggml_silu(ctx, ggml_soft_max(ctx, ggml_mul_mat(ctx, w, x)));
    ggml_backend_t cpu = ggml_backend_cpu_init();
    EXPECT_FALSE(ggml_backend_cpu_set_kernels(cpu, "no such set"));
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors(ctx, cpu);
    ASSERT_NE(wbuf, nullptr);
    std::vector<uint8_t> wq(ggml_nbytes(w));
    const std::vector<float> wf = random_values(256 * 48, 3), xf = random_values(256 * 5, 4);
    ggml_quantize_chunk(GGML_TYPE_Q4_0, wf.data(), wq.data(), 0, 48, 256, nullptr);
    ggml_backend_tensor_set(w, wq.data(), 0, wq.size());
    ggml_backend_tensor_set(x, xf.data(), 0, xf.size() * sizeof(float));
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, y);
    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    ASSERT_TRUE(ggml_gallocr_alloc_graph(ga, gf));

    static std::string seen;
    ggml_backend_cpu_set_abort_callback(cpu, [](void *) { seen = ggml_cpu_isa_name(); return false; }, nullptr);
    ggml_backend_cpu_set_n_threads(cpu, 2);
    auto run = [&](const char * isa) {
        EXPECT_TRUE(ggml_backend_cpu_set_kernels(cpu, isa));
        seen.clear();
        EXPECT_EQ(ggml_backend_graph_compute(cpu, gf), GGML_STATUS_SUCCESS);
        EXPECT_EQ(seen, isa);
        std::vector<float> out(48 * 5);
        ggml_backend_tensor_get(y, out.data(), 0, out.size() * sizeof(float));
        return out;
    };
    const std::vector<float> ref = run("scalar");
    for (int i = 0; i < n_sets; i++) {
        const char * isa = ggml_backend_cpu_kernel_set_name(i);
        SCOPED_TRACE(isa);
        const std::vector<float> got = run(isa);
        for (size_t k = 0; k < ref.size(); k++) EXPECT_NEAR(got[k], ref[k], 1e-5) << k;
    }
    EXPECT_STREQ(ggml_cpu_isa_name(), ggml_backend_cpu_kernel_set_name(0)) << "the caller's table is restored";

    ggml_gallocr_free(ga);
    ggml_backend_buffer_free(wbuf);
    ggml_backend_free(cpu);
    ggml_free(ctx);
}

}  // namespace

namespace {

// Attention without the fused op (KQ, soft_max, KQV) of n_tok queries over n_kv keys, computed
// node by node and by the executor's chain (compute.cpp) with 1-3 threads: the same bits. The
// mask's value for query t and key c: mask_at(t, c) (0 or -inf). reuse: the graph allocator must
// have handed soft_max's or KQV's output the memory of a dead input.
void check_attention_chain(ggml_backend_t cpu, int64_t hd, int64_t n_kv, int64_t n_tok, ggml_type mask_type,
                           const std::function<float(int64_t, int64_t)> & mask_at, bool reuse) {
    ggml_init_params ip = { 64 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true };
    const int64_t n_head = 8, n_head_kv = 2;
    std::vector<uint8_t> want;
    for (int chain : { 0, 1 }) {
        for (int nt : { 1, 2, 3 }) {
            ggml_context * ctx = ggml_init(ip);
            ggml_tensor * x = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, hd, n_head, n_tok);
            ggml_tensor * k = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, hd, n_kv, n_head_kv);
            ggml_tensor * v = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, n_kv, hd, n_head_kv);
            ggml_tensor * mask = ggml_new_tensor_2d(ctx, mask_type, n_kv, n_tok);
            for (ggml_tensor * t : { x, k, v, mask }) ggml_set_input(t);
            ggml_tensor * q = ggml_permute(ctx, ggml_scale(ctx, x, 0.5f), 0, 2, 1, 3);  // dies with KQ
            ggml_tensor * kq = ggml_mul_mat(ctx, k, q);
            ggml_tensor * sm = ggml_soft_max_ext(ctx, kq, mask, 0.25f, 0.0f);
            ggml_tensor * kqv = ggml_mul_mat(ctx, v, sm);
            ggml_tensor * out = ggml_scale(ctx, ggml_cont(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3)), 2.0f);
            ggml_set_output(out);
            ggml_cgraph * gf = ggml_new_graph(ctx);
            ggml_build_forward_expand(gf, out);
            ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
            ASSERT_TRUE(ggml_gallocr_alloc_graph(ga, gf));
            if (reuse) {
                const char * q0 = (const char *) q->data;
                const char * s0 = (const char *) sm->data;
                const bool sm_over_q = s0 < q0 + ggml_nbytes(q) && q0 < s0 + ggml_nbytes(sm);
                const char * k0 = (const char *) kq->data, * v0 = (const char *) kqv->data;
                const bool kqv_over_kq = v0 < k0 + ggml_nbytes(kq) && k0 < v0 + ggml_nbytes(kqv);
                const bool kqv_over_q = v0 < q0 + ggml_nbytes(q) && q0 < v0 + ggml_nbytes(kqv);
                EXPECT_TRUE(hd > n_kv ? sm_over_q : kqv_over_kq || kqv_over_q) << "the allocator reused no memory: the test checks nothing";
            }
            std::mt19937 rng(3);
            std::uniform_real_distribution<float> u(-1.0f, 1.0f);
            std::vector<float> xv(ggml_nelements(x));
            for (auto & f : xv) f = u(rng);
            ggml_backend_tensor_set(x, xv.data(), 0, ggml_nbytes(x));
            for (ggml_tensor * t : { k, v }) {
                std::vector<ggml_fp16_t> h(ggml_nelements(t));
                for (auto & f : h) f = ggml_fp32_to_fp16(u(rng));
                ggml_backend_tensor_set(t, h.data(), 0, ggml_nbytes(t));
            }
            std::vector<float> m(ggml_nelements(mask));
            for (int64_t t = 0; t < n_tok; t++) {
                for (int64_t c = 0; c < n_kv; c++) m[t * n_kv + c] = mask_at(t, c);
            }
            if (mask_type == GGML_TYPE_F16) {
                std::vector<ggml_fp16_t> h(m.size());
                for (size_t i = 0; i < m.size(); i++) h[i] = ggml_fp32_to_fp16(m[i]);
                ggml_backend_tensor_set(mask, h.data(), 0, ggml_nbytes(mask));
            } else {
                ggml_backend_tensor_set(mask, m.data(), 0, ggml_nbytes(mask));
            }
            ggml_cpu_attn_chain = chain;
            ggml_backend_cpu_set_n_threads(cpu, nt);
            const long runs = ggml_cpu_attn_chain_runs();
            ASSERT_EQ(ggml_backend_graph_compute(cpu, gf), GGML_STATUS_SUCCESS);
            EXPECT_EQ(ggml_cpu_attn_chain_runs() - runs, nt <= n_head ? chain : 0) << nt << " threads";
            std::vector<uint8_t> got(ggml_nbytes(out));
            ggml_backend_tensor_get(out, got.data(), 0, got.size());
            if (want.empty()) want = got;
            else EXPECT_TRUE(got == want) << "chain " << chain << ", " << nt << " threads";
            ggml_gallocr_free(ga);
            ggml_free(ctx);
        }
    }
    ggml_cpu_attn_chain = 1;
}

}  // namespace

// Products of one activation one after the other (llama's q, k, v and gate, up): where the node
// before converted the same b the same way, the executor reuses its rows; the results are the
// bits of each product computed alone, repacked weights or not, whatever the types in between.
TEST(Backend, ConsecutiveProductsShareConvertedActivations) {
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ASSERT_NE(cpu, nullptr);
    const ggml_type types[] = { GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_F16, GGML_TYPE_Q4_0, GGML_TYPE_Q8_0 };
    const int n_w = (int) (sizeof(types) / sizeof(types[0]));
    const int64_t K = 512, M = 32;
    for (bool repack : { false, true }) {
        for (int64_t N : { 1, 7, 40 }) {
            SCOPED_TRACE(std::string(repack ? "repacked" : "plain") + ", N " + std::to_string(N));
            ggml_init_params ip = { 64 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true };
            ggml_context * wctx = ggml_init(ip);
            std::vector<ggml_tensor *> w;
            for (ggml_type t : types) w.push_back(ggml_new_tensor_2d(wctx, t, K, M));
            ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(
                wctx, repack ? ggml_backend_cpu_repack_buffer_type() : ggml_backend_cpu_buffer_type());
            ASSERT_NE(wbuf, nullptr);
            std::mt19937 rng(7);
            std::normal_distribution<float> nd;
            for (ggml_tensor * t : w) {
                std::vector<float> f((size_t) (K * M));
                for (auto & v : f) v = nd(rng);
                std::vector<uint8_t> q(ggml_nbytes(t));
                ggml_quantize_chunk(t->type, f.data(), q.data(), 0, M, K, nullptr);
                ggml_backend_tensor_set(t, q.data(), 0, q.size());
            }
            std::vector<float> xv((size_t) (K * N));
            for (auto & v : xv) v = nd(rng);
            // All products in one graph, then each alone.
            auto run = [&](const std::vector<int> & which) {
                ggml_context * ctx = ggml_init(ip);
                ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);
                ggml_set_input(x);
                ggml_cgraph * gf = ggml_new_graph(ctx);
                std::vector<ggml_tensor *> ys;
                for (int i : which) {
                    ys.push_back(ggml_mul_mat(ctx, w[(size_t) i], x));
                    ggml_set_output(ys.back());
                    ggml_build_forward_expand(gf, ys.back());
                }
                ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
                EXPECT_TRUE(ggml_gallocr_alloc_graph(ga, gf));
                ggml_backend_tensor_set(x, xv.data(), 0, ggml_nbytes(x));
                EXPECT_EQ(ggml_backend_graph_compute(cpu, gf), GGML_STATUS_SUCCESS);
                std::vector<std::vector<float>> out;
                for (ggml_tensor * y : ys) {
                    out.emplace_back((size_t) (M * N));
                    ggml_backend_tensor_get(y, out.back().data(), 0, ggml_nbytes(y));
                }
                ggml_gallocr_free(ga);
                ggml_free(ctx);
                return out;
            };
            std::vector<int> all;
            for (int i = 0; i < n_w; i++) all.push_back(i);
            const long before = ggml_cpu_mul_mat_b_reuses();
            const auto together = run(all);
            // Q8_0 after Q8_0 always; Q6_K after Q4_K and Q8_0 after Q4_0 where the build converts
            // for both the same way (on x86: Q8_K rows; Q8_0 rows, repacked or not).
            const long reuses = ggml_cpu_mul_mat_b_reuses() - before;
            EXPECT_GE(reuses, 1);
            EXPECT_LE(reuses, 3);
            for (int i = 0; i < n_w; i++) {
                SCOPED_TRACE(ggml_type_name(types[i]));
                const auto alone = run({ i });
                EXPECT_TRUE(alone[0] == together[(size_t) i]);
            }
            ggml_backend_buffer_free(wbuf);
            ggml_free(wctx);
        }
    }
    ggml_backend_free(cpu);
}

// silu(x) * u, as llama's feed-forward has it, run by the executor as one pass: the bits of the
// two nodes, in place over x or u or apart, either operand order, rows not a multiple of any
// vector or chunk; not fused where silu's output is read again.
TEST(Backend, SiluTimesProductFusedKeepsTheBits) {
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ASSERT_NE(cpu, nullptr);
    const int64_t ne0 = 700, ne1 = 5;
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 4.0f);
    std::vector<float> xv((size_t) (ne0 * ne1)), uv(xv.size());
    for (auto & v : xv) v = nd(rng);
    for (auto & v : uv) v = nd(rng);
    xv[3] = -INFINITY;
    xv[4] = 90.0f;
    for (int variant = 0; variant < 4; variant++) {
        SCOPED_TRACE("variant " + std::to_string(variant));
        std::vector<float> want;
        for (int fuse : { 0, 1 }) {
            for (int nt : { 1, 3 }) {
                ggml_init_params ip = { 16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true };
                ggml_context * ctx = ggml_init(ip);
                ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, ne0, ne1);
                ggml_tensor * u = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, ne0, ne1);
                ggml_set_input(x);
                ggml_set_input(u);
                // 2: silu of an input (the product cannot go in its place); 3: silu read again.
                ggml_tensor * g = ggml_silu(ctx, variant == 2 ? x : ggml_scale(ctx, x, 1.0f));
                ggml_tensor * h = ggml_scale(ctx, u, 1.0f);
                ggml_tensor * y = variant == 1 ? ggml_mul(ctx, h, g) : ggml_mul(ctx, g, h);
                ggml_tensor * out = variant == 3 ? ggml_add(ctx, y, g) : ggml_scale(ctx, y, 1.0f);
                ggml_set_output(out);
                ggml_cgraph * gf = ggml_new_graph(ctx);
                ggml_build_forward_expand(gf, h);  // then silu and the product, one after the other
                ggml_build_forward_expand(gf, out);
                ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
                ASSERT_TRUE(ggml_gallocr_alloc_graph(ga, gf));
                ggml_backend_tensor_set(x, xv.data(), 0, ggml_nbytes(x));
                ggml_backend_tensor_set(u, uv.data(), 0, ggml_nbytes(u));
                ggml_cpu_silu_mul_fusion = fuse;
                ggml_backend_cpu_set_n_threads(cpu, nt);
                const long runs = ggml_cpu_silu_mul_fusion_runs();
                ASSERT_EQ(ggml_backend_graph_compute(cpu, gf), GGML_STATUS_SUCCESS);
                EXPECT_EQ(ggml_cpu_silu_mul_fusion_runs() - runs, fuse && variant != 3 ? 1 : 0);
                std::vector<float> got((size_t) ggml_nelements(out));
                ggml_backend_tensor_get(out, got.data(), 0, ggml_nbytes(out));
                if (want.empty()) want = got;
                else EXPECT_EQ(0, memcmp(got.data(), want.data(), got.size() * sizeof(float))) << "fuse " << fuse << ", " << nt << " threads";
                ggml_gallocr_free(ga);
                ggml_free(ctx);
            }
        }
    }
    ggml_cpu_silu_mul_fusion = 1;
    ggml_backend_free(cpu);
}

// The allocator hands soft_max's output the memory of q and KQV's that of KQ once they are dead:
// the chain keeps those planes in scratch.
TEST(Backend, AttentionChainOverReusedMemory) {
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ASSERT_NE(cpu, nullptr);
    // head_dim > n_kv: soft_max's output fits where q was; head_dim < n_kv: KQV's where KQ or q was.
    for (int64_t hd : { 64, 16 }) {
        SCOPED_TRACE("head_dim " + std::to_string(hd));
        const int64_t n_kv = 40, n_tok = 24;
        check_attention_chain(cpu, hd, n_kv, n_tok, GGML_TYPE_F16,
                              [&](int64_t t, int64_t c) { return c <= n_kv - n_tok + t ? 0.0f : -INFINITY; }, true);
    }
    ggml_backend_free(cpu);
}

// Prompts long enough for the chain's blocks of queries and its limits (the scores past a query's
// last unmasked key are neither computed nor read, nor KQV's products with their zeros): causal
// masks in F16 and F32, a fully masked row, holes before the last unmasked key, n_kv and n_tok
// not multiples of any tile.
TEST(Backend, AttentionChainSkipsMaskedTails) {
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ASSERT_NE(cpu, nullptr);
    const int64_t n_kv = 300, n_tok = 201;
    auto causal = [&](int64_t t, int64_t c) { return c <= n_kv - n_tok + t ? 0.0f : -INFINITY; };
    for (ggml_type mt : { GGML_TYPE_F16, GGML_TYPE_F32 }) {
        SCOPED_TRACE(ggml_type_name(mt));
        check_attention_chain(cpu, 64, n_kv, n_tok, mt, causal, false);
    }
    check_attention_chain(cpu, 64, n_kv, n_tok, GGML_TYPE_F16, [&](int64_t t, int64_t c) {
        if (t == 70) return -INFINITY;                      // nothing to attend to
        if (c % 7 == 3 && c < t) return -INFINITY;          // holes
        return c <= (t * 37) % n_kv ? 0.0f : -INFINITY;     // ragged ends, not monotone
    }, false);
    check_attention_chain(cpu, 32, 520, 130, GGML_TYPE_F16, [&](int64_t t, int64_t c) { return c <= 390 + t ? 0.0f : -INFINITY; }, false);
    ggml_backend_free(cpu);
}

// ---- training through the scheduler ------------------------------------------------------------
namespace {

// An MLP (16 -> 32 tanh -> 4) trained with AdamW for 4 steps of 2 micro-batches (cross entropy),
// its parameters in buft; with a scheduler over backends (nullptr: the CPU path of ggml_opt).
// Returns each step's loss and the final parameters.
struct TrainRun {
    std::vector<float> losses;
    std::vector<std::vector<float>> params;
};

TrainRun train_mlp(ggml_backend_buffer_type_t buft, ggml_backend_sched_t sched) {
    ggml_context * cp = ggml_init({ 16 * ggml_tensor_overhead(), nullptr, true });
    ggml_context * cc = ggml_init({ 64 * ggml_tensor_overhead(), nullptr, true });
    const int n_in = 16, n_hidden = 32, n_cls = 4, n_batch = 8;
    ggml_tensor * w1 = ggml_new_tensor_2d(cp, GGML_TYPE_F32, n_in, n_hidden);
    ggml_tensor * b1 = ggml_new_tensor_1d(cp, GGML_TYPE_F32, n_hidden);
    ggml_tensor * w2 = ggml_new_tensor_2d(cp, GGML_TYPE_F32, n_hidden, n_cls);
    std::vector<ggml_tensor *> ps = { w1, b1, w2 };
    ggml_backend_buffer_t pbuf = ggml_backend_alloc_ctx_tensors_from_buft(cp, buft);
    std::mt19937 rng(5);
    for (ggml_tensor * p : ps) {
        ggml_set_param(p);
        std::vector<float> v((size_t) ggml_nelements(p));
        std::uniform_real_distribution<float> d(-0.4f, 0.4f);
        for (float & x : v) x = d(rng);
        ggml_backend_tensor_set(p, v.data(), 0, ggml_nbytes(p));
    }
    ggml_tensor * x = ggml_new_tensor_2d(cc, GGML_TYPE_F32, n_in, n_batch);
    ggml_tensor * h = ggml_tanh(cc, ggml_add(cc, ggml_mul_mat(cc, w1, x), b1));
    ggml_tensor * out = ggml_mul_mat(cc, w2, h);

    ggml_opt_dataset_t ds = ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, n_in, n_cls, 64, 1);
    float * data = (float *) ggml_opt_dataset_data(ds)->data, * labels = (float *) ggml_opt_dataset_labels(ds)->data;
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int j = 0; j < 64; j++) {
        for (int i = 0; i < n_in; i++) data[j * n_in + i] = u(rng);
        const int cls = (int) (std::max_element(data + j * n_in, data + j * n_in + n_cls) - (data + j * n_in));
        for (int c = 0; c < n_cls; c++) labels[j * n_cls + c] = c == cls ? 1.0f : 0.0f;  // learnable
    }

    ggml_opt_params op = ggml_opt_default_params(cc, x, out, GGML_OPT_LOSS_TYPE_CROSS_ENTROPY);
    op.opt_period = 2;
    op.n_threads = 1;
    op.backend_sched = sched;
    op.grad_clip = 0.5f;  // the accumulators read and written back
    ggml_opt_optimizer_params pars = ggml_opt_get_default_optimizer_params(nullptr);
    pars.adamw.alpha = 0.05f;
    op.get_opt_pars = ggml_opt_get_constant_optimizer_params;
    op.get_opt_pars_ud = &pars;
    ggml_opt_context_t oc = ggml_opt_init(op);
    EXPECT_TRUE(oc);
    TrainRun r;
    for (int64_t ib = 0; ib < 8 && oc; ib++) {
        ggml_opt_alloc(oc, true);
        ggml_opt_dataset_get_batch(ds, x, ggml_opt_labels(oc), ib);
        ggml_opt_eval(oc, nullptr);
        float loss;
        ggml_backend_tensor_get(ggml_opt_loss(oc), &loss, 0, sizeof(loss));
        r.losses.push_back(loss);
    }
    EXPECT_EQ(ggml_opt_n_steps(oc), 4);
    for (ggml_tensor * p : ps) {
        r.params.emplace_back((size_t) ggml_nelements(p));
        ggml_backend_tensor_get(p, r.params.back().data(), 0, ggml_nbytes(p));
    }
    ggml_opt_free(oc);
    ggml_opt_dataset_free(ds);
    ggml_backend_buffer_free(pbuf);
    ggml_free(cc);
    ggml_free(cp);
    return r;
}

}  // namespace

// ggml_opt with a backend scheduler: the parameters, their accumulators and moments in the
// simulated GPU's memory, forward, backward and AdamW steps run there: the same losses and
// parameters, step by step, as the CPU path.
TEST(Backend, OptTrainsWithParametersOnTheDevice) {
    const TrainRun cpu = train_mlp(ggml_backend_cpu_buffer_type(), nullptr);

    ggml_backend_t dev = fake_gpu::init();
    ggml_backend_t host = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(host, 1);
    ggml_backend_t backends[2] = { dev, host };
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, nullptr, 2, 2048, false, false);
    fake_gpu::set_supports(nullptr);
    fake_gpu::ran().clear();
    const TrainRun gpu = train_mlp(fake_gpu::buffer_type(), sched);
    const std::vector<ggml_op> & ran = fake_gpu::ran();
    for (ggml_op op : { GGML_OP_MUL_MAT, GGML_OP_OUT_PROD, GGML_OP_CROSS_ENTROPY_LOSS_BACK, GGML_OP_OPT_STEP_ADAMW }) {
        EXPECT_NE(std::find(ran.begin(), ran.end(), op), ran.end()) << "the device never ran " << ggml_op_name(op);
    }
    ggml_backend_sched_free(sched);
    ggml_backend_free(host);
    ggml_backend_free(dev);

    ASSERT_EQ(gpu.losses.size(), cpu.losses.size());
    for (size_t i = 0; i < cpu.losses.size(); i++) EXPECT_NEAR(gpu.losses[i], cpu.losses[i], 1e-6f * std::fabs(cpu.losses[i])) << "micro-batch " << i;
    EXPECT_LT(cpu.losses[6] + cpu.losses[7], cpu.losses[0] + cpu.losses[1]) << "no learning: the test compares little";
    ASSERT_EQ(gpu.params.size(), cpu.params.size());
    for (size_t k = 0; k < cpu.params.size(); k++) {
        for (size_t i = 0; i < cpu.params[k].size(); i++) ASSERT_NEAR(gpu.params[k][i], cpu.params[k][i], 1e-6f) << "param " << k << " value " << i;
    }
}
