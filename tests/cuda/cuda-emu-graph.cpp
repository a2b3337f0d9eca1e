// cuda-emu-graph.cpp - see cuda-emu-graph.h. Built like the kernel files (cuda-emu.h first).
#include "cuda-emu-graph.h"

#include "ggml-impl.h"
#include "ggml-cuda/ops.cuh"

#include <stdio.h>
#include <stdlib.h>

// backend.cu is not emulated: the scratch buffer in host memory.
void * ggml_cuda_ctx::scratch(size_t bytes) {
    scratch_uses++;
    if (bytes > scratch_size) {
        free(scratch_ptr);
        scratch_ptr = malloc(bytes);
        scratch_size = bytes;
        scratch_gen++;
    }
    return scratch_ptr;
}

namespace emu {

ggml_cuda_ctx & cuda_ctx() {
    static ggml_cuda_ctx ctx = [] {
        ggml_cuda_ctx c;
        c.n_sm = 132;  // an H100's: the split-KV attention path is taken for generation-sized graphs
        c.cc = 90;     // and its tensor-core kernels (their mma.sync emulated: cuda-emu.h)
        const char * no_mma = getenv("GGML_CUDA_DISABLE_MMA_FA");  // as the backend reads it
        c.no_mma_fa = no_mma && atoi(no_mma) != 0;
        // The scratch buffer at the size a GPU's reaches after a graph's first run: a product then
        // finds the activations its producer converted, in every case whatever ran before.
        c.scratch(64u << 20);
        static std::vector<int> counters((size_t) ggml_cuda_ctx::kGroupCounters, 0);
        c.group_done = counters.data();
        return c;
    }();
    return ctx;
}

bool supports_op(const ggml_tensor * op) { return ggml_cuda_supports_op(op); }

uint64_t mma_attention_nodes() { return cuda_ctx().n_mma_attn; }

ggml_status compute_graph(ggml_cuda_ctx & ctx, ggml_cgraph * g, int * fused) {
    ctx.act = ggml_cuda_ctx::quantized_act();  // as the backend does where a graph starts
    if (scrambled() && ctx.scratch_ptr) memset(ctx.scratch_ptr, 0xff, ctx.scratch_size);  // nothing carries over
    static const bool trace = getenv("CUDA_EMU_LAUNCHES") != nullptr;  // each kernel run: its nodes, its launches
    for (int i = 0; i < ggml_graph_n_nodes(g); i++) {
        ggml_tensor * n = ggml_graph_node(g, i);
        if (ggml_op_is_view(n->op) || n->op == GGML_OP_NONE || ggml_is_empty(n)) continue;
        const uint64_t before = g_launches;
        const int done = ggml_cuda_compute_nodes(ctx, g, i);
        if (trace) {
            fprintf(stderr, "cuda-emu: %d launches:", (int) (g_launches - before));
            for (int k = i; k < i + done; k++) fprintf(stderr, " %s(%s)", ggml_op_desc(ggml_graph_node(g, k)), ggml_graph_node(g, k)->name);
            fprintf(stderr, "\n");
        }
        if (done < 1) {
            fprintf(stderr, "cuda-emu: no CUDA kernel for %s (%s)\n", ggml_op_desc(n), n->name);
            return GGML_STATUS_FAILED;
        }
        if (done > 1 && fused) (*fused)++;
        i += done - 1;
    }
    return GGML_STATUS_SUCCESS;
}

uint64_t launches() { return g_launches; }

}  // namespace emu
