// alloc.cpp - the graph memory planner: a best-fit allocator over one virtual buffer, driven by
// how many readers each tensor still has as the nodes are walked in execution order.
#include "ggml-alloc.h"
#include "ggml-impl.h"
#include "ptr-map.h"

#include <stdlib.h>

#include <algorithm>
#include <vector>

static const size_t ALIGN = GGML_MEM_ALIGN;

static size_t align_up(size_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }

// ---- best-fit allocator over offsets --------------------------------------------------------
namespace {

struct free_block { size_t offset, size; };

class offset_allocator {
public:
    size_t alloc(size_t size) {
        size = align_up(size);
        size_t best = SIZE_MAX;
        for (size_t i = 0; i < blocks.size(); i++) {
            if (blocks[i].size >= size && (best == SIZE_MAX || blocks[i].size < blocks[best].size)) best = i;
        }
        if (best != SIZE_MAX) {
            const size_t off = blocks[best].offset;
            blocks[best].offset += size;
            blocks[best].size -= size;
            if (blocks[best].size == 0) blocks.erase(blocks.begin() + best);
            return off;
        }
        // Grow at the end, absorbing a free block that touches the end.
        if (!blocks.empty() && blocks.back().offset + blocks.back().size == end) {
            const size_t off = blocks.back().offset;
            blocks.pop_back();
            end = off + size;
            high_water = std::max(high_water, end);
            return off;
        }
        const size_t off = end;
        end += size;
        high_water = std::max(high_water, end);
        return off;
    }

    void release(size_t offset, size_t size) {
        size = align_up(size);
        auto it = std::lower_bound(blocks.begin(), blocks.end(), offset,
                                   [](const free_block & b, size_t off) { return b.offset < off; });
        it = blocks.insert(it, { offset, size });
        // Merge with the next, then the previous neighbour.
        if (it + 1 != blocks.end() && it->offset + it->size == (it + 1)->offset) {
            it->size += (it + 1)->size;
            blocks.erase(it + 1);
        }
        if (it != blocks.begin() && (it - 1)->offset + (it - 1)->size == it->offset) {
            (it - 1)->size += it->size;
            blocks.erase(it);
        }
    }

    size_t max_size() const { return high_water; }

private:
    std::vector<free_block> blocks;  // sorted by offset
    size_t end = 0;
    size_t high_water = 0;
};

struct tensor_plan {
    int    readers = 0;       // nodes still to run that read this tensor's memory
    bool   planned = false;   // placed by this planner (so it may be released)
    bool   keep = false;      // input, output, leaf: never released
    bool   handed_over = false; // its memory now belongs to an in-place result
    int    buf = 0;           // which of the allocator's buffers
    size_t offset = 0;
    size_t size = 0;
};

}  // namespace

struct graph_plan_result {
    ggml_ptr_map<tensor_plan> plans;
    std::vector<size_t> buffer_sizes;
};

// Which buffer each tensor of the graph goes to: node_ids / leaf_ids (NULL: all in buffer 0).
struct buffer_assignment {
    ggml_ptr_map<int> ids;
    int of(const ggml_tensor * t) const {
        const int * b = ids.find(t);
        return b ? *b : 0;
    }
};

// The maps live with the allocator so their slots are reused by the next graph (a graph a token).
struct gallocr_scratch {
    buffer_assignment assign;
    graph_plan_result res;
};

struct ggml_gallocr {
    std::vector<ggml_backend_buffer_type_t> bufts;
    std::vector<ggml_backend_buffer_t> buffers;  // one per buffer type, grown as graphs need
    gallocr_scratch * scratch = nullptr;          // the planner's maps, kept between graphs
};

ggml_gallocr_t ggml_gallocr_new_n(ggml_backend_buffer_type_t * bufts, int n_bufs) {
    if (!bufts || n_bufs <= 0) return nullptr;
    ggml_gallocr * g = new ggml_gallocr();
    g->bufts.assign(bufts, bufts + n_bufs);
    g->buffers.assign(n_bufs, nullptr);
    return g;
}

ggml_gallocr_t ggml_gallocr_new(ggml_backend_buffer_type_t buft) { return ggml_gallocr_new_n(&buft, 1); }

void ggml_gallocr_free(ggml_gallocr_t galloc) {
    if (!galloc) return;
    for (ggml_backend_buffer_t b : galloc->buffers) ggml_backend_buffer_free(b);
    delete galloc->scratch;
    delete galloc;
}

size_t ggml_gallocr_get_buffer_size(ggml_gallocr_t galloc, int buffer_id) {
    GGML_ASSERT(buffer_id >= 0 && buffer_id < (int) galloc->buffers.size());
    return galloc->buffers[buffer_id] ? ggml_backend_buffer_get_size(galloc->buffers[buffer_id]) : 0;
}

void ggml_aligned_free(void * ptr) { free(ptr); }

// The tensor that owns t's memory.
static ggml_tensor * owner_of(ggml_tensor * t) { return t->view_src ? t->view_src : t; }

static bool needs_memory(const ggml_tensor * t) {
    return t->data == nullptr && t->view_src == nullptr && !ggml_is_empty(t);
}

// Ops whose kernels read element i of src[0] before writing element i of dst, with the same
// layout, so dst may take over src[0]'s memory (the op table's IN_PLACE flag).
static bool op_can_run_in_place(ggml_op op) {
    return (ggml_op_get_info(op)->flags & GGML_OP_FLAG_IN_PLACE) != 0;
}

static const buffer_assignment & assign_buffers(gallocr_scratch & sc, ggml_cgraph * g, const int * node_ids, const int * leaf_ids) {
    buffer_assignment & a = sc.assign;
    a.ids.clear();
    a.ids.reserve((size_t) (g->n_nodes + g->n_leafs));
    if (node_ids) for (int i = 0; i < g->n_nodes; i++) a.ids[g->nodes[i]] = node_ids[i];
    if (leaf_ids) for (int i = 0; i < g->n_leafs; i++) a.ids[g->leafs[i]] = leaf_ids[i];
    return a;
}

// Walks the graph in execution order and assigns a buffer and an offset to every tensor that
// needs memory.
static const graph_plan_result & plan_graph(ggml_gallocr_t galloc, gallocr_scratch & sc, ggml_cgraph * g, const buffer_assignment & assign) {
    graph_plan_result & res = sc.res;
    auto & plans = res.plans;
    plans.clear();
    res.buffer_sizes.clear();
    plans.reserve((size_t) (g->n_nodes + g->n_leafs) * 2);  // sources outside the graph's lists too
    const int n_bufs = (int) galloc->bufts.size();
    std::vector<offset_allocator> allocs(n_bufs);
    auto place_new = [&](ggml_tensor * t, tensor_plan & p) {
        p.buf = std::min(std::max(assign.of(t), 0), n_bufs - 1);
        p.size = ggml_backend_buft_get_alloc_size(galloc->bufts[p.buf], t);
        p.planned = true;
        p.offset = allocs[p.buf].alloc(p.size);
    };

    // Count readers per memory owner (a reader of a view reads its owner).
    for (int i = 0; i < g->n_nodes; i++) {
        ggml_tensor * node = g->nodes[i];
        if (ggml_op_is_view(node->op)) continue;  // views read nothing themselves
        for (int j = 0; j < GGML_MAX_SRC; j++) {
            ggml_tensor * s = node->src[j];
            if (!s) continue;
            ggml_tensor * o = owner_of(s);
            if (o == owner_of(node)) continue;  // cpy into a view of s, cast's self-reference
            plans[o].readers++;
        }
    }
    for (int i = 0; i < g->n_nodes; i++) {
        ggml_tensor * node = g->nodes[i];
        if (node->flags & GGML_TENSOR_FLAG_OUTPUT) plans[owner_of(node)].keep = true;
    }
    if (g->n_nodes > 0) plans[owner_of(g->nodes[g->n_nodes - 1])].keep = true;

    // Leafs first (inputs first among them): they live for the whole graph.
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < g->n_leafs; i++) {
            ggml_tensor * leaf = g->leafs[i];
            const bool is_input = (leaf->flags & GGML_TENSOR_FLAG_INPUT) != 0;
            if ((pass == 0) != is_input || !needs_memory(leaf)) continue;
            tensor_plan & p = plans[leaf];
            p.keep = true;
            place_new(leaf, p);
        }
    }

    for (int i = 0; i < g->n_nodes; i++) {
        ggml_tensor * node = g->nodes[i];
        // Sources that are themselves leafs/params without data: give them lasting memory.
        for (int j = 0; j < GGML_MAX_SRC; j++) {
            ggml_tensor * s = node->src[j];
            if (s && needs_memory(s) && !plans[s].planned) {
                tensor_plan & p = plans[s];
                p.keep = true;
                place_new(s, p);
            }
        }
        if (needs_memory(node) && !plans[node].planned) {
            tensor_plan & p = plans[node];
            if (node->flags & (GGML_TENSOR_FLAG_INPUT | GGML_TENSOR_FLAG_PARAM) || node->op == GGML_OP_NONE) p.keep = true;
            // Take over src[0]'s memory when this node is its last reader (in the same buffer).
            ggml_tensor * s0 = node->src[0];
            const int buf = std::min(std::max(assign.of(node), 0), n_bufs - 1);
            bool in_place = false;
            if (op_can_run_in_place(node->op) && s0 && s0->view_src == nullptr && s0->type == node->type &&
                ggml_are_same_shape(s0, node) && ggml_are_same_stride(s0, node)) {
                tensor_plan * it = plans.find(s0);
                if (it && it->planned && !it->keep && !it->handed_over && it->readers == 1 && it->buf == buf) {
                    in_place = true;
                    for (int j = 1; j < GGML_MAX_SRC; j++) {
                        if (node->src[j] && owner_of(node->src[j]) == s0) in_place = false;
                    }
                    if (in_place) {
                        it->handed_over = true;
                        p.buf = buf;
                        p.planned = true;
                        p.offset = it->offset;
                        p.size = it->size;
                    }
                }
            }
            if (!in_place) place_new(node, p);
        }
        if (ggml_op_is_view(node->op)) continue;
        // Release sources read for the last time.
        for (int j = 0; j < GGML_MAX_SRC; j++) {
            ggml_tensor * s = node->src[j];
            if (!s) continue;
            ggml_tensor * o = owner_of(s);
            if (o == owner_of(node)) continue;
            tensor_plan & p = plans[o];  // counted once per appearance, released once per appearance
            p.readers--;
            if (p.readers == 0 && p.planned && !p.keep && !p.handed_over) allocs[p.buf].release(p.offset, p.size);
        }
        // A node nobody reads (and not kept) is released right after it runs.
        tensor_plan & np = plans[owner_of(node)];
        if (np.readers == 0 && np.planned && !np.keep && !np.handed_over && owner_of(node) == node) {
            allocs[np.buf].release(np.offset, np.size);
        }
    }
    for (const offset_allocator & a : allocs) res.buffer_sizes.push_back(a.max_size());
    return res;
}

static gallocr_scratch & scratch_of(ggml_gallocr_t galloc) {
    if (!galloc->scratch) galloc->scratch = new gallocr_scratch();
    return *galloc->scratch;
}

// Grows each buffer to what the plan needs (the old buffer's tensors become invalid).
static bool ensure_buffers(ggml_gallocr_t galloc, const graph_plan_result & res) {
    for (size_t b = 0; b < galloc->bufts.size(); b++) {
        const size_t need = res.buffer_sizes[b];
        if (need == 0 || (galloc->buffers[b] && ggml_backend_buffer_get_size(galloc->buffers[b]) >= need)) continue;
        ggml_backend_buffer_t nb = ggml_backend_buft_alloc_buffer(galloc->bufts[b], need);
        if (!nb) {
            ggml_log_error("ggml_gallocr: cannot allocate a %zu-byte %s compute buffer\n", need, ggml_backend_buft_name(galloc->bufts[b]));
            return false;
        }
        ggml_backend_buffer_set_usage(nb, GGML_BACKEND_BUFFER_USAGE_COMPUTE);
        ggml_backend_buffer_free(galloc->buffers[b]);
        galloc->buffers[b] = nb;
    }
    return true;
}

bool ggml_gallocr_reserve_n(ggml_gallocr_t galloc, struct ggml_cgraph * graph, const int * node_buffer_ids, const int * leaf_buffer_ids) {
    gallocr_scratch & sc = scratch_of(galloc);
    return ensure_buffers(galloc, plan_graph(galloc, sc, graph, assign_buffers(sc, graph, node_buffer_ids, leaf_buffer_ids)));
}

bool ggml_gallocr_reserve(ggml_gallocr_t galloc, struct ggml_cgraph * graph) {
    return ggml_gallocr_reserve_n(galloc, graph, nullptr, nullptr);
}

bool ggml_gallocr_alloc_graph_n(ggml_gallocr_t galloc, struct ggml_cgraph * graph, const int * node_buffer_ids, const int * leaf_buffer_ids) {
    gallocr_scratch & sc = scratch_of(galloc);
    const graph_plan_result & res = plan_graph(galloc, sc, graph, assign_buffers(sc, graph, node_buffer_ids, leaf_buffer_ids));
    if (!ensure_buffers(galloc, res)) return false;
    // Owners first (leafs, then nodes in order), then views, which point into their owners.
    auto place = [&](ggml_tensor * t) {
        const tensor_plan * it = res.plans.find(t);
        if (it && it->planned && t->data == nullptr) {
            ggml_backend_buffer_t b = galloc->buffers[it->buf];
            ggml_backend_tensor_alloc(b, t, (char *) ggml_backend_buffer_get_base(b) + it->offset);
        }
    };
    for (int i = 0; i < graph->n_leafs; i++) place(graph->leafs[i]);
    for (int i = 0; i < graph->n_nodes; i++) {
        ggml_tensor * n = graph->nodes[i];
        for (int j = 0; j < GGML_MAX_SRC; j++) if (n->src[j]) place(n->src[j]);
        place(n);
    }
    auto place_view = [&](ggml_tensor * t) {
        if (t->view_src && t->data == nullptr && t->view_src->data) ggml_backend_view_init(t);
    };
    for (int i = 0; i < graph->n_leafs; i++) place_view(graph->leafs[i]);
    for (int i = 0; i < graph->n_nodes; i++) {
        ggml_tensor * n = graph->nodes[i];
        for (int j = 0; j < GGML_MAX_SRC; j++) if (n->src[j]) place_view(n->src[j]);
        place_view(n);
    }
    return true;
}

bool ggml_gallocr_alloc_graph(ggml_gallocr_t galloc, struct ggml_cgraph * graph) {
    return ggml_gallocr_alloc_graph_n(galloc, graph, nullptr, nullptr);
}

void * ggml_alloc_ctx_tensors(struct ggml_context * ctx, size_t * size) {
    size_t total = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (needs_memory(t)) total += align_up(ggml_nbytes(t));
    }
    if (size) *size = 0;
    if (total == 0) return nullptr;
    char * buf = (char *) aligned_alloc(ALIGN, total);
    if (!buf) {
        ggml_log_error("ggml_alloc_ctx_tensors: cannot allocate %zu bytes\n", total);
        return nullptr;
    }
    size_t off = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (!needs_memory(t)) continue;
        t->data = buf + off;
        off += align_up(ggml_nbytes(t));
    }
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (t->view_src && t->data == nullptr && t->view_src->data) t->data = (char *) t->view_src->data + t->view_offs;
    }
    if (size) *size = total;
    return buf;
}
