// ggml-alloc.h - memory planning for graphs built in no_alloc contexts.
//
// The graph allocator places every intermediate tensor of a graph in one buffer, reusing the
// memory of a tensor once its last reader has run (and computing some elementwise ops in place
// of a source that is read for the last time). Leafs without data (inputs) get memory that is
// never reused; tensors flagged with ggml_set_output, and the graph's last node, are never
// overwritten. Tensors that already have data (weights) are left alone. All planning and
// allocation happens before compute: computing the graph allocates nothing.
#pragma once

#include "ggml.h"
#include "ggml-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ggml_gallocr * ggml_gallocr_t;

// The buffer(s) come from buft (ggml_backend_cpu_buffer_type() for host memory); with several
// buffer types, each node and leaf is placed in the buffer its id names.
ggml_gallocr_t ggml_gallocr_new(ggml_backend_buffer_type_t buft);
ggml_gallocr_t ggml_gallocr_new_n(ggml_backend_buffer_type_t * bufts, int n_bufs);
void           ggml_gallocr_free(ggml_gallocr_t galloc);

// Plans the graph and makes the buffer at least as large as it needs (call with the largest
// graph you will compute, e.g. a full batch, so later graphs never reallocate). False on failure.
bool   ggml_gallocr_reserve(ggml_gallocr_t galloc, struct ggml_cgraph * graph);
// Plans the graph and sets the data pointer of every tensor that needs one. The buffer grows if
// this graph needs more than any reserved before (the old buffer's tensors become invalid).
bool   ggml_gallocr_alloc_graph(ggml_gallocr_t galloc, struct ggml_cgraph * graph);
size_t ggml_gallocr_get_buffer_size(ggml_gallocr_t galloc, int buffer_id);
// The same with a buffer index per node (node_buffer_ids[i] for graph node i) and per leaf.
bool   ggml_gallocr_reserve_n(ggml_gallocr_t galloc, struct ggml_cgraph * graph, const int * node_buffer_ids, const int * leaf_buffer_ids);
bool   ggml_gallocr_alloc_graph_n(ggml_gallocr_t galloc, struct ggml_cgraph * graph, const int * node_buffer_ids, const int * leaf_buffer_ids);

// Allocates one buffer for every tensor of ctx that has no data yet (and is not a view), sets
// their data pointers and returns the buffer (free it with ggml_aligned_free after the tensors'
// last use), or NULL when there was nothing to allocate or no memory (then *size is 0).
void * ggml_alloc_ctx_tensors(struct ggml_context * ctx, size_t * size);
void   ggml_aligned_free(void * ptr);

#ifdef __cplusplus
}
#endif
