// test-cuda-emu.cpp - the CUDA backend's kernels, built for the host with cuda-emu.h and run by
// its coroutine emulator, on every case of test-backend-ops against the CPU backend: the
// kernels' indexing, reductions, online softmax, block decoders and cuBLAS arguments are checked
// without a GPU. Each node goes through the backend's own dispatch (ggml_cuda_compute_nodes, with
// its fused pairs) and
// support check (ggml_cuda_supports_op), on tensors in host memory. Built where the CUDA
// Toolkit's headers are installed, in builds without the real CUDA backend.
#include "cuda-emu.h"

#include <gtest/gtest.h>

#include "ggml.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-impl.h"
#include "ggml-cuda/ops.cuh"
#include "ggml-cuda/mma.cuh"
#include "cuda-emu-graph.h"

#include "backend-ops-cases.h"
#include "backend-ops-random.h"

#include <stdlib.h>

namespace {

using namespace bocases;

int n_fused = 0;  // kernels the dispatch ran for two or three nodes

// Runs case c with its tensors in CPU memory: on the CPU backend (emulate false), or node by node
// through the CUDA kernels (true). false: some node is not supported by the CUDA backend.
bool run(const Case & c, bool emulate, ggml_backend_t cpu, ggml_cuda_ctx & cctx, std::vector<float> & out, std::string & why) {
    CaseGraph g = build_graph(c);
    ggml_cgraph * gf = g.gf;
    if (emulate) {
        why = first_unsupported(gf, [](const ggml_tensor * n) { return ggml_cuda_supports_op(n); });
        if (!why.empty()) {
            ggml_free(g.ctx);
            return false;
        }
    }
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(g.ctx, cpu);
    if (emulate && emu::scrambled()) ggml_backend_buffer_clear(buf, 0xff);  // results nothing wrote: NaN
    set_inputs(g.mk, 1234);
    if (emulate) {
        EXPECT_EQ(emu::compute_graph(cctx, gf, &n_fused), GGML_STATUS_SUCCESS) << c.name;
    } else {
        EXPECT_EQ(ggml_backend_graph_compute(cpu, gf), GGML_STATUS_SUCCESS) << c.name;
    }
    out = decode(g.b.out);
    ggml_backend_buffer_free(buf);
    ggml_free(g.ctx);
    return true;
}

// Runs every case on the CPU and through the kernels: the cases that match, that the kernels do
// not support, and the failures (each with its error, printed).
struct CaseTally {
    int ok = 0, unsupported = 0, failed = 0;
};

CaseTally run_cases(const std::vector<Case> & cases, ggml_backend_t cpu, ggml_cuda_ctx & cctx, bool quiet_unsupported) {
    CaseTally tally;
    const char * filter = getenv("CUDA_EMU_FILTER");  // a substring of the case names to run
    for (const Case & c : cases) {
        if (filter && c.name.find(filter) == std::string::npos) continue;
        std::vector<float> ref, got;
        std::string why;
        if (getenv("CUDA_EMU_TRACE")) fprintf(stderr, "[ emu ] running %s\n", c.name.c_str());  // names the case an abort ends
        run(c, false, cpu, cctx, ref, why);
        if (!run(c, true, cpu, cctx, got, why)) {
            tally.unsupported++;
            if (!quiet_unsupported) printf("[ emu ] %-44s not supported: %s\n", c.name.c_str(), why.c_str());
            continue;
        }
        EXPECT_EQ(got.size(), ref.size()) << c.name;
        if (got.size() != ref.size()) {
            tally.failed++;
            continue;
        }
        size_t bad = 0;
        const double err = nmse(got, ref, &bad);
        EXPECT_EQ(bad, 0u) << c.name << ": non-finite values differ";
        EXPECT_LE(err, c.tol) << c.name;
        if (getenv("CUDA_EMU_VERBOSE")) printf("[ emu ] %-60s nmse %.3g\n", c.name.c_str(), err);
        if (err > c.tol || bad > 0) {
            tally.failed++;
            if (getenv("CUDA_EMU_VERBOSE")) {
                for (size_t i = 0; i < got.size() && i < 16; i++) printf("  %zu: got %g ref %g\n", i, got[i], ref[i]);
            }
        } else {
            tally.ok++;
        }
    }
    return tally;
}

TEST(CudaEmu, KernelsMatchCpu) {
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(cpu, 2);
    ggml_cuda_ctx & cctx = emu::cuda_ctx();
    const CaseTally t = run_cases(make_cases(), cpu, cctx, false);
    printf("[ emu ] %d cases match the CPU, %d not supported, %d fused kernels, %d products found their activations converted (%d "
           "in F16), %d activations converted by their producer\n", t.ok, t.unsupported, n_fused, (int) cctx.n_act_reused,
           (int) cctx.n_act_f16, (int) cctx.n_act_produced);
    if (!getenv("CUDA_EMU_FILTER")) {
        EXPECT_GE(n_fused, 6) << "the fused cases were not fused";
        EXPECT_GE(cctx.n_act_reused, 4u) << "the shared-b cases quantized b for every product";
        EXPECT_GE(cctx.n_act_produced, 7u) << "no norm (silu, attention) quantized the activations of the product after it";
        EXPECT_GE(cctx.n_act_f16, 8u) << "the cuBLAS products did not find their F16 activations written by the producer or an "
                                         "earlier product";
    }
    ggml_backend_free(cpu);
}

// Cases of random shapes, views, types and parameters (backend-ops-random.h; RANDOM_CASES_SEED
// and RANDOM_CASES_N choose others and more).
TEST(CudaEmu, RandomCasesMatchCpu) {
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(cpu, 2);
    const std::vector<Case> cases = make_random_cases();
    const CaseTally t = run_cases(cases, cpu, emu::cuda_ctx(), true);
    printf("[ emu ] %d random cases match the CPU, %d not supported\n", t.ok, t.unsupported);
    EXPECT_GE(t.ok, (int) cases.size() * 3 / 4) << "most random cases should run on the kernels";
    ggml_backend_free(cpu);
}

// common.cuh's division by a size (fast_div, as unravel uses it) against plain division: divisors
// 1 to 2^31 - 1 (powers of two and their neighbours among them), numerators up to 2^31 - 1.
TEST(CudaEmu, FastDivisionMatchesDivision) {
    std::vector<int64_t> ds;
    for (int64_t d = 1; d < 3000; d++) ds.push_back(d);
    for (int s = 12; s < 31; s++) {
        for (int64_t e : { -1, 0, 1 }) ds.push_back(((int64_t) 1 << s) + e);
    }
    for (int64_t d : { 5632, 32000, 151936, 1000003, 123456789, 2147483647 }) ds.push_back(d);
    uint64_t x = 88172645463325252ull;
    for (int64_t d : ds) {
        const fastdiv_t f = make_fastdiv(d);
        for (int j = 0; j < 400; j++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint32_t n = (uint32_t) (x % ((uint64_t) 1 << 31));
            if (j < 6) n = j < 3 ? (uint32_t) (2147483647 - j) : (uint32_t) (d * (j - 2) - 1) & 0x7fffffffu;
            ASSERT_EQ(fast_div(n, f), n / (uint32_t) d) << n << " / " << d;
        }
    }
}

// mma.cuh's m16n8k16 products (F16 and BF16; the emulator's own and mma.cuh's shuffle fallback)
// on fragments laid out as the PTX ISA states it, written out independently of both: groupID =
// lane / 4, threadID_in_group = lane % 4; A element i (0..7) at row groupID (+8 for i in 2, 3, 6,
// 7), column 2 threadID_in_group + (i & 1) (+8 for i >= 4); B element i (0..3) at row
// 2 threadID_in_group + (i & 1) (+8 for i >= 2), column groupID; C element i at row groupID (+8
// for i >= 2), column 2 threadID_in_group + (i & 1). mode: 0 mma_16x8x16, 1 mma_16x8x16_bf16,
// 2 and 3 the shuffle fallback of each.
__global__ void k_mma_check(const uint16_t * A, const uint16_t * B, float * D, int mode) {
    const int lane = threadIdx.x, gid = lane / 4, tig = lane % 4;
    uint16_t ae[8], be[4];
    for (int i = 0; i < 8; i++) ae[i] = A[(gid + ((i % 4) >= 2 ? 8 : 0)) * 16 + 2 * tig + (i & 1) + (i >= 4 ? 8 : 0)];
    for (int i = 0; i < 4; i++) be[i] = B[(2 * tig + (i & 1) + (i >= 2 ? 8 : 0)) * 8 + gid];
    uint32_t a[4], b[2];
    for (int r = 0; r < 4; r++) a[r] = (uint32_t) ae[2 * r] | ((uint32_t) ae[2 * r + 1] << 16);
    for (int r = 0; r < 2; r++) b[r] = (uint32_t) be[2 * r] | ((uint32_t) be[2 * r + 1] << 16);
    float d[4] = { 0.5f, 0.5f, 0.5f, 0.5f };  // accumulates onto C = 0.5
    switch (mode) {
        case 0: mma_16x8x16(d, a, b); break;
        case 1: mma_16x8x16_bf16(d, a, b); break;
        case 2: mma_16x8x16_shuffled<false>(d, a, b); break;
        default: mma_16x8x16_shuffled<true>(d, a, b); break;
    }
    for (int i = 0; i < 4; i++) D[(gid + (i >= 2 ? 8 : 0)) * 8 + 2 * tig + (i & 1)] = d[i];
}

TEST(CudaEmu, MmaFragmentsFollowThePtxLayout) {
    for (int mode = 0; mode < 4; mode++) {
        const bool bf16 = mode % 2 == 1;
        auto enc = [&](float x) { return bf16 ? f2bf(x) : f2h(x); };
        auto dec = [&](uint16_t h) { return bf16 ? bf2f(h) : h2f(h); };
        std::vector<uint16_t> A(16 * 16), B(16 * 8);
        for (size_t i = 0; i < A.size(); i++) A[i] = enc((float) ((i * 7919) % 61) / 16.0f - 1.8f);
        for (size_t i = 0; i < B.size(); i++) B[i] = enc((float) ((i * 104729) % 53) / 32.0f - 0.7f);
        std::vector<float> D(16 * 8, -1.0f);
        GGML_CUDA_LAUNCH(k_mma_check, 1, 32, 0, 0)(A.data(), B.data(), D.data(), mode);
        for (int m = 0; m < 16; m++) {
            for (int n = 0; n < 8; n++) {
                double ref = 0.5;
                for (int k = 0; k < 16; k++) ref += (double) dec(A[m * 16 + k]) * dec(B[k * 8 + n]);
                EXPECT_NEAR(D[m * 8 + n], ref, 1e-5 * (1.0 + fabs(ref))) << "mode " << mode << " D[" << m << "][" << n << "]";
            }
        }
    }
}

// A launch past 48 KiB of dynamic shared memory without its kernel's opt-in is refused, as on a
// GPU; with it, it runs.
__global__ void k_smem_fill(float * out, int n) {
    GGML_CUDA_DYN_SMEM(float, sm);
    for (int i = threadIdx.x; i < n; i += blockDim.x) sm[i] = (float) i;
    __syncthreads();
    if (threadIdx.x == 0) *out = sm[n - 1];
}

TEST(CudaEmu, SharedMemoryPast48KiBNeedsTheOptIn) {
    const int n = 20000;  // 80000 bytes
    float out = 0.0f;
    EXPECT_DEATH(GGML_CUDA_LAUNCH(k_smem_fill, 1, 32, n * sizeof(float), 0)(&out, n), "no GGML_CUDA_SMEM_OPT_IN");
    GGML_CUDA_SMEM_OPT_IN(&k_smem_fill, n * sizeof(float));
    GGML_CUDA_LAUNCH(k_smem_fill, 1, 32, n * sizeof(float), 0)(&out, n);
    EXPECT_EQ(out, (float) (n - 1));
}

}  // namespace
