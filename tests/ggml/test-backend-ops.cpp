// test-backend-ops.cpp - every op on every backend of the build against the CPU backend.
//
// Each case builds a small graph (the shapes and types the op tests use: odd sizes, broadcast,
// permuted and transposed views, every weight type) from inputs filled with fixed random data.
// The graph runs on each backend that is not the CPU (its inputs in that backend's buffer, set
// with ggml_backend_tensor_set) and on the CPU backend; the results must agree within a
// normalized error per case. A case whose graph has a node the backend does not support
// (supports_op false) is skipped there: the scheduler would leave it to the CPU. Without a GPU
// backend the comparison test skips with a message; the cases still run on the CPU once, so the
// graphs themselves stay valid in every build. The CPU's own kernel tables (AVX512, AVX2,
// NEON) are held to its scalar one on the same cases.
#include <gtest/gtest.h>

#include "ggml.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include "backend-ops-cases.h"
#include "backend-ops-random.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace bocases;

// ---- running a case on a backend ------------------------------------------------------------
enum class Outcome { ok, unsupported, failed };

Outcome run_case(const Case & c, ggml_backend_t backend, std::vector<float> & out, std::string & why) {
    CaseGraph g = build_graph(c);
    why = first_unsupported(g.gf, [&](const ggml_tensor * n) { return ggml_backend_supports_op(backend, n); });
    if (!why.empty()) {
        ggml_free(g.ctx);
        return Outcome::unsupported;
    }
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(g.ctx, backend);
    if (!buf) {
        why = "no memory";
        ggml_free(g.ctx);
        return Outcome::failed;
    }
    set_inputs(g.mk, 1234);
    const ggml_status st = ggml_backend_graph_compute(backend, g.gf);
    Outcome r = Outcome::ok;
    if (st != GGML_STATUS_SUCCESS) {
        why = "graph compute failed";
        r = Outcome::failed;
    } else {
        out = decode(g.b.out);
    }
    ggml_backend_buffer_free(buf);
    ggml_free(g.ctx);
    return r;
}

std::vector<ggml_backend_dev_t> other_devices() {
    std::vector<ggml_backend_dev_t> v;
    for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
        ggml_backend_dev_t d = ggml_backend_dev_get(i);
        if (ggml_backend_dev_type(d) != GGML_BACKEND_DEVICE_TYPE_CPU) v.push_back(d);
    }
    return v;
}

// The graphs are valid and run on the CPU (in every build, so the cases cannot rot).
TEST(BackendOps, CasesRunOnCpu) {
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ASSERT_NE(cpu, nullptr);
    ggml_backend_cpu_set_n_threads(cpu, 2);
    for (const Case & c : make_cases()) {
        std::vector<float> out;
        std::string why;
        EXPECT_EQ(run_case(c, cpu, out, why), Outcome::ok) << c.name << ": " << why;
        EXPECT_FALSE(out.empty()) << c.name;
    }
    ggml_backend_free(cpu);
}

// The CPU against its scalar reference: every case on a CPU backend running each compiled-in
// kernel table (AVX512, AVX2, NEON) and on one running the scalar table.
TEST(BackendOps, CpuMatchesItsScalarReference) {
    const int n_sets = ggml_backend_cpu_n_kernel_sets();
    if (n_sets < 2) GTEST_SKIP() << "this build has only the scalar kernels";
    ggml_backend_t scalar = ggml_backend_cpu_init();
    ASSERT_TRUE(ggml_backend_cpu_set_kernels(scalar, "scalar"));
    ggml_backend_cpu_set_n_threads(scalar, 2);
    for (int k = 0; k + 1 < n_sets; k++) {
        const char * isa = ggml_backend_cpu_kernel_set_name(k);
        ggml_backend_t cpu = ggml_backend_cpu_init();
        ASSERT_TRUE(ggml_backend_cpu_set_kernels(cpu, isa));
        ggml_backend_cpu_set_n_threads(cpu, 2);
        int n_ok = 0;
        std::vector<Case> cases = make_cases();
        const std::vector<Case> random = make_random_cases();
        cases.insert(cases.end(), random.begin(), random.end());
        for (const Case & c : cases) {
            std::vector<float> ref, got;
            std::string why;
            ASSERT_EQ(run_case(c, scalar, ref, why), Outcome::ok) << "scalar " << c.name << ": " << why;
            ASSERT_EQ(run_case(c, cpu, got, why), Outcome::ok) << isa << " " << c.name << ": " << why;
            ASSERT_EQ(got.size(), ref.size()) << c.name;
            size_t bad = 0;
            EXPECT_LE(nmse(got, ref, &bad), c.tol) << isa << " " << c.name;
            EXPECT_EQ(bad, 0u) << isa << " " << c.name << ": non-finite values differ";
            n_ok++;
        }
        printf("[ CPU %s ] %d cases match the scalar kernels\n", isa, n_ok);
        ggml_backend_free(cpu);
    }
    ggml_backend_free(scalar);
}

TEST(BackendOps, EveryBackendMatchesCpu) {
    const std::vector<ggml_backend_dev_t> devs = other_devices();
    if (devs.empty()) GTEST_SKIP() << "no GPU backend: this build has no device besides the CPU, or the machine shows none";
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(cpu, 2);
    std::vector<Case> cases = make_cases();
    const std::vector<Case> random = make_random_cases();  // as test-cuda-emu runs them
    cases.insert(cases.end(), random.begin(), random.end());
    for (ggml_backend_dev_t dev : devs) {
        ggml_backend_t be = ggml_backend_dev_init(dev, nullptr);
        ASSERT_NE(be, nullptr) << ggml_backend_dev_name(dev);
        int n_ok = 0, n_unsupported = 0;
        for (const Case & c : cases) {
            std::vector<float> ref, got;
            std::string why;
            ASSERT_EQ(run_case(c, cpu, ref, why), Outcome::ok) << c.name << ": " << why;
            const Outcome r = run_case(c, be, got, why);
            if (r == Outcome::unsupported) {
                n_unsupported++;
                printf("[ %s ] %-44s not supported: %s\n", ggml_backend_name(be), c.name.c_str(), why.c_str());
                continue;
            }
            ASSERT_EQ(r, Outcome::ok) << ggml_backend_name(be) << " " << c.name << ": " << why;
            ASSERT_EQ(got.size(), ref.size()) << c.name;
            size_t bad = 0;
            const double err = nmse(got, ref, &bad);
            EXPECT_EQ(bad, 0u) << ggml_backend_name(be) << " " << c.name << ": non-finite values differ";
            EXPECT_LE(err, c.tol) << ggml_backend_name(be) << " " << c.name;
            n_ok++;
        }
        printf("[ %s ] %d cases match the CPU, %d not supported (left to the CPU)\n", ggml_backend_name(be), n_ok, n_unsupported);
        ggml_backend_free(be);
    }
    ggml_backend_free(cpu);
}

// One graph computed again and again with new inputs (generation): a backend that replays
// recorded work (CUDA graphs) must still see each call's inputs.
struct Prepared {
    CaseGraph g;
    ggml_backend_buffer_t buf = nullptr;

    Prepared(const Case & c, ggml_backend_t backend) : g(build_graph(c)) { buf = ggml_backend_alloc_ctx_tensors(g.ctx, backend); }
    ~Prepared() {
        ggml_backend_buffer_free(buf);
        ggml_free(g.ctx);
    }
    std::vector<float> compute(ggml_backend_t backend, uint32_t seed) {
        set_inputs(g.mk, seed);
        EXPECT_EQ(ggml_backend_graph_compute(backend, g.gf), GGML_STATUS_SUCCESS);
        return decode(g.b.out);
    }
};

TEST(BackendOps, RepeatedGraphsSeeNewInputs) {
    const std::vector<ggml_backend_dev_t> devs = other_devices();
    if (devs.empty()) GTEST_SKIP() << "no GPU backend: this build has no device besides the CPU, or the machine shows none";
    ggml_backend_t cpu = ggml_backend_cpu_init();
    for (const Case & c : make_cases()) {
        if (c.name != "llama block" && c.name != "flash_attn_ext long kv n_q 1" && c.name != "mul_mat q4_K n 1" &&
            c.name != "mul_mat kq gen f16") {
            continue;
        }
        for (ggml_backend_dev_t dev : devs) {
            ggml_backend_t be = ggml_backend_dev_init(dev, nullptr);
            {
                Prepared on_cpu(c, cpu), on_be(c, be);
                ASSERT_NE(on_be.buf, nullptr);
                for (uint32_t it = 0; it < 4; it++) {
                    const std::vector<float> ref = on_cpu.compute(cpu, 1000 * it + 7), got = on_be.compute(be, 1000 * it + 7);
                    size_t bad = 0;
                    EXPECT_LE(nmse(got, ref, &bad), c.tol) << ggml_backend_name(be) << " " << c.name << " call " << it;
                    EXPECT_EQ(bad, 0u);
                }
            }
            ggml_backend_free(be);
        }
    }
    ggml_backend_free(cpu);
}

// The scheduler splits a graph between the GPU and the CPU where the GPU lacks a kernel, and
// the result is the CPU's.
TEST(BackendOps, SchedulerSplitsAtUnsupportedOps) {
    const std::vector<ggml_backend_dev_t> devs = other_devices();
    if (devs.empty()) GTEST_SKIP() << "no GPU backend: this build has no device besides the CPU, or the machine shows none";
    ggml_backend_t gpu = ggml_backend_dev_init(devs[0], nullptr);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t backends[2] = { gpu, cpu };
    std::vector<float> results[2];
    for (int pass = 0; pass < 2; pass++) {  // 0: GPU + CPU, 1: CPU alone
        ggml_init_params ip = { 64 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true };
        ggml_context * wctx = ggml_init(ip);
        ggml_tensor * w = ggml_new_tensor_2d(wctx, GGML_TYPE_Q4_0, 64, 128);
        ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors(wctx, pass == 0 ? gpu : cpu);
        ggml_backend_buffer_set_usage(wbuf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        std::vector<float> wf(64 * 128);
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> d(-1.0f, 1.0f);
        for (float & x : wf) x = d(rng);
        std::vector<uint8_t> wq(ggml_nbytes(w));
        ggml_quantize_chunk(GGML_TYPE_Q4_0, wf.data(), wq.data(), 0, 128, 64, nullptr);
        ggml_backend_tensor_set(w, wq.data(), 0, wq.size());

        ggml_context * ctx = ggml_init(ip);
        ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 64, 4);
        ggml_set_input(x);
        ggml_tensor * y = ggml_mul_mat(ctx, w, x);                       // GPU
        // CPU only: heads of 512 exceed the CUDA attention kernels' 256
        ggml_tensor * y1 = ggml_reshape_3d(ctx, y, 512, 1, 1);
        ggml_tensor * f = ggml_flash_attn_back(ctx, y1, y1, y1, nullptr, ggml_reshape_4d(ctx, ggml_scale(ctx, y, 1.0f), 512, 1, 1, 1),
                                               0.05f, 0.0f, 0.0f);
        ggml_tensor * out = ggml_sum(ctx, ggml_sqr(ctx, f));             // GPU again
        ggml_set_output(out);
        ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, out);
        ggml_backend_sched_t sched = ggml_backend_sched_new(pass == 0 ? backends : backends + 1, nullptr, pass == 0 ? 2 : 1,
                                                            GGML_DEFAULT_GRAPH_SIZE, false, true);
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(sched, gf));
        std::vector<float> xv(64 * 4);
        for (float & v : xv) v = d(rng);
        ggml_backend_tensor_set(x, xv.data(), 0, xv.size() * sizeof(float));
        ASSERT_EQ(ggml_backend_sched_graph_compute(sched, gf), GGML_STATUS_SUCCESS);
        if (pass == 0) {
            EXPECT_GE(ggml_backend_sched_get_n_splits(sched), 2);
        }
        results[pass].resize(1);
        ggml_backend_tensor_get(out, results[pass].data(), 0, sizeof(float));
        ggml_backend_sched_free(sched);
        ggml_free(ctx);
        ggml_backend_buffer_free(wbuf);
        ggml_free(wctx);
    }
    EXPECT_NEAR(results[0][0], results[1][0], 1e-3 * std::fabs(results[1][0]) + 1e-6);
    ggml_backend_free(cpu);
    ggml_backend_free(gpu);
}

}  // namespace
