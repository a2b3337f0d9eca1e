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
#include "cuda-emu-graph.h"

#include "backend-ops-cases.h"

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

TEST(CudaEmu, KernelsMatchCpu) {
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(cpu, 2);
    ggml_cuda_ctx & cctx = emu::cuda_ctx();
    int n_ok = 0, n_unsupported = 0;
    const char * filter = getenv("CUDA_EMU_FILTER");  // a substring of the case names to run
    for (const Case & c : make_cases()) {
        if (filter && c.name.find(filter) == std::string::npos) continue;
        std::vector<float> ref, got;
        std::string why;
        run(c, false, cpu, cctx, ref, why);
        if (!run(c, true, cpu, cctx, got, why)) {
            n_unsupported++;
            printf("[ emu ] %-44s not supported: %s\n", c.name.c_str(), why.c_str());
            continue;
        }
        ASSERT_EQ(got.size(), ref.size()) << c.name;
        size_t bad = 0;
        const double err = nmse(got, ref, &bad);
        EXPECT_EQ(bad, 0u) << c.name << ": non-finite values differ";
        EXPECT_LE(err, c.tol) << c.name;
        if (err > c.tol && getenv("CUDA_EMU_VERBOSE")) {
            for (size_t i = 0; i < got.size() && i < 16; i++) printf("  %zu: got %g ref %g\n", i, got[i], ref[i]);
        }
        n_ok++;
    }
    printf("[ emu ] %d cases match the CPU, %d not supported, %d fused kernels, %d products on quantized activations\n", n_ok,
           n_unsupported, n_fused, (int) cctx.n_act_reused);
    if (!filter) {
        EXPECT_GE(n_fused, 6) << "the fused cases were not fused";
        EXPECT_GE(cctx.n_act_reused, 4u) << "the shared-b cases quantized b for every product";
    }
    ggml_backend_free(cpu);
}

}  // namespace
