// ggml-graph-key.h - what a recorded replay of a graph (a CUDA graph) depends on: per node its op,
// parameters, type, shape, strides and addresses, and the same of its sources. Two graphs with
// equal keys launch the same kernels on the same memory; only the contents of their inputs may
// differ. Views and empty nodes compute nothing and are left out.
#pragma once

#include "ggml.h"
#include "ggml-impl.h"

#include <stdint.h>
#include <string.h>

#include <vector>

inline bool ggml_graph_key_skips(const ggml_tensor * n) { return ggml_op_is_view(n->op) || n->op == GGML_OP_NONE || ggml_is_empty(n); }

inline void ggml_graph_key(const ggml_cgraph * g, std::vector<uint64_t> & key) {
    key.clear();
    auto put_tensor = [&](const ggml_tensor * t) {
        key.push_back((uint64_t) t->type);
        key.push_back((uint64_t) (uintptr_t) t->data);
        for (int d = 0; d < GGML_MAX_DIMS; d++) {
            key.push_back((uint64_t) t->ne[d]);
            key.push_back((uint64_t) t->nb[d]);
        }
    };
    for (int i = 0; i < g->n_nodes; i++) {
        const ggml_tensor * n = g->nodes[i];
        if (ggml_graph_key_skips(n)) continue;
        key.push_back((uint64_t) n->op);
        uint64_t p[GGML_MAX_OP_PARAMS / sizeof(uint64_t)];
        memcpy(p, n->op_params, sizeof(p));  // op_params is only 4-byte aligned
        key.insert(key.end(), p, p + GGML_MAX_OP_PARAMS / sizeof(uint64_t));
        put_tensor(n);
        for (int j = 0; j < GGML_MAX_SRC; j++) {
            if (!n->src[j]) continue;
            key.push_back(0xFFFF0000u + (uint64_t) j);
            put_tensor(n->src[j]);
        }
    }
}
