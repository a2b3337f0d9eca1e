// cuda-emu-graph.h - a graph through the CUDA backend's kernels, emulated on the host
// (cuda-emu.h): node by node through its dispatch, fused runs included, as the backend's
// graph_compute launches them. Tensors point at host memory.
#pragma once

#include "ggml.h"

struct ggml_cuda_ctx;

namespace emu {

// One context for the tests of a process (its scratch buffer lives as long as the process).
ggml_cuda_ctx & cuda_ctx();

// The CUDA backend's support check (ggml_cuda_supports_op).
bool supports_op(const ggml_tensor * op);

// GGML_STATUS_FAILED where a node has no kernel. fused (if not NULL) counts the kernels that
// computed two or three nodes.
ggml_status compute_graph(ggml_cuda_ctx & ctx, ggml_cgraph * g, int * fused = nullptr);

// Launches so far (kernels, cuBLAS calls, device copies and sets): what a GPU would have run.
uint64_t launches();

// Flash attention nodes cuda_ctx() has run on its tensor-core kernels (forward or gradient).
uint64_t mma_attention_nodes();

}  // namespace emu
