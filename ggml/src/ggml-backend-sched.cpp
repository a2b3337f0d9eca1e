// ggml-backend-sched.cpp - one graph over several backends.
//
// Every node gets a backend: the one it is pinned to; else the one holding the memory it writes
// into (a cache view) or the weights it reads; else, spreading from assigned neighbours, the
// first backend that supports it. Consecutive nodes of one backend form a split. A split reads
// tensors that live on another backend through copies made just before it runs: the copies are
// nodes of op NONE in the allocated graph whose src[0] is the original, so the graph allocator
// keeps the original alive until the copy and places the copy in the reading backend's buffer.
#include "ggml-alloc.h"
#include "ggml-backend-impl.h"
#include "ggml-cpu.h"
#include "ggml-impl.h"
#include "ptr-map.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

struct sched_split {
    int backend;
    int first, last;  // nodes [first, last) of the allocated graph run on the backend
    std::vector<ggml_tensor *> copies;  // src[0] of each is copied into it before the split runs
    ggml_cgraph view;                    // the split's nodes, for ggml_backend_graph_compute
};

}  // namespace

struct ggml_backend_sched {
    std::vector<ggml_backend_t> backends;
    std::vector<ggml_backend_buffer_type_t> bufts;
    ggml_gallocr_t galloc = nullptr;
    size_t graph_size = 0;

    std::unordered_map<const ggml_tensor *, int> pinned;    // ggml_backend_sched_set_tensor_backend
    ggml_ptr_map<int> assigned;  // the last graph's nodes and leafs (slots kept between graphs)
    std::vector<sched_split> splits;
    int n_copies = 0;

    ggml_backend_sched_eval_callback callback_eval = nullptr;  // ggml_backend_sched_set_eval_callback
    void * callback_eval_user_data = nullptr;

    ggml_context * ctx = nullptr;  // the copies and the allocated graph
    std::vector<uint8_t> ctx_mem;  // ctx's memory, kept between graphs (no allocation per token)
    ggml_cgraph * graph = nullptr;

    int backend_of_buft(ggml_backend_buffer_type_t buft) const {
        for (size_t i = 0; i < backends.size(); i++) {
            if (bufts[i] == buft) return (int) i;
        }
        for (size_t i = 0; i < backends.size(); i++) {
            if (ggml_backend_supports_buft(backends[i], buft)) return (int) i;
        }
        return -1;
    }

    // The backend whose memory holds t's data: from its buffer, or its (owner's) assignment.
    int location(const ggml_tensor * t) const {
        const ggml_tensor * o = t->view_src ? t->view_src : t;
        if (o->buffer) return backend_of_buft(ggml_backend_buffer_get_type(o->buffer));
        if (o->data) return backend_of_buft(ggml_backend_cpu_buffer_type());  // host memory of a plain context
        const int * b = assigned.find(o);
        return b ? *b : -1;
    }
};

static bool is_view_op(const ggml_tensor * t) { return ggml_op_is_view(t->op); }

ggml_backend_sched_t ggml_backend_sched_new(ggml_backend_t * backends, ggml_backend_buffer_type_t * bufts, int n_backends,
                                            size_t graph_size, bool parallel, bool op_offload) {
    (void) parallel;
    (void) op_offload;
    if (!backends || n_backends <= 0) return nullptr;
    ggml_backend_sched * s = new ggml_backend_sched();
    for (int i = 0; i < n_backends; i++) {
        s->backends.push_back(backends[i]);
        s->bufts.push_back(bufts && bufts[i] ? bufts[i] : ggml_backend_get_default_buffer_type(backends[i]));
    }
    s->galloc = ggml_gallocr_new_n(s->bufts.data(), n_backends);
    s->graph_size = graph_size > 0 ? graph_size : GGML_DEFAULT_GRAPH_SIZE;
    return s;
}

void ggml_backend_sched_free(ggml_backend_sched_t sched) {
    if (!sched) return;
    ggml_gallocr_free(sched->galloc);
    if (sched->ctx) ggml_free(sched->ctx);
    delete sched;
}

int ggml_backend_sched_get_n_backends(ggml_backend_sched_t sched) { return (int) sched->backends.size(); }

ggml_backend_t ggml_backend_sched_get_backend(ggml_backend_sched_t sched, int i) {
    return i >= 0 && i < (int) sched->backends.size() ? sched->backends[i] : nullptr;
}

int ggml_backend_sched_get_n_splits(ggml_backend_sched_t sched) { return (int) sched->splits.size(); }
int ggml_backend_sched_get_n_copies(ggml_backend_sched_t sched) { return sched->n_copies; }

static int index_of(ggml_backend_sched_t sched, ggml_backend_t backend) {
    for (size_t i = 0; i < sched->backends.size(); i++) {
        if (sched->backends[i] == backend) return (int) i;
    }
    return -1;
}

ggml_backend_buffer_type_t ggml_backend_sched_get_buffer_type(ggml_backend_sched_t sched, ggml_backend_t backend) {
    const int i = index_of(sched, backend);
    return i < 0 ? nullptr : sched->bufts[i];
}

size_t ggml_backend_sched_get_buffer_size(ggml_backend_sched_t sched, ggml_backend_t backend) {
    const int i = index_of(sched, backend);
    return i < 0 ? 0 : ggml_gallocr_get_buffer_size(sched->galloc, i);
}

void ggml_backend_sched_set_tensor_backend(ggml_backend_sched_t sched, struct ggml_tensor * node, ggml_backend_t backend) {
    const int i = index_of(sched, backend);
    GGML_ASSERT(i >= 0 && "ggml_backend_sched_set_tensor_backend: the backend is not one of the scheduler's");
    sched->pinned[node] = i;
}

ggml_backend_t ggml_backend_sched_get_tensor_backend(ggml_backend_sched_t sched, struct ggml_tensor * node) {
    if (const int * b = sched->assigned.find(node)) return sched->backends[*b];
    auto p = sched->pinned.find(node);
    return p == sched->pinned.end() ? nullptr : sched->backends[p->second];
}

void ggml_backend_sched_reset(ggml_backend_sched_t sched) {
    sched->assigned.clear();
    sched->pinned.clear();
    sched->splits.clear();
    sched->n_copies = 0;
    sched->graph = nullptr;
    if (sched->ctx) ggml_free(sched->ctx);
    sched->ctx = nullptr;
}

// ---- assigning backends --------------------------------------------------------------------
static bool assign_backends(ggml_backend_sched_t s, ggml_cgraph * g) {
    const int n_backends = (int) s->backends.size();
    auto & a = s->assigned;
    a.clear();
    a.reserve((size_t) (g->n_nodes + g->n_leafs));
    auto supports = [&](int b, const ggml_tensor * n) { return b >= 0 && ggml_backend_supports_op(s->backends[b], n); };

    // Pass 1: pinned nodes, nodes writing into existing memory, views, nodes reading weights.
    for (int i = 0; i < g->n_nodes; i++) {
        ggml_tensor * n = g->nodes[i];
        auto p = s->pinned.find(n);
        if (p != s->pinned.end()) {
            a[n] = p->second;
            continue;
        }
        const ggml_tensor * o = n->view_src ? n->view_src : n;
        if (o->data != nullptr || o->buffer != nullptr) {  // writes into a cache or a weight
            const int b = s->location(n);
            if (b < 0) {
                ggml_log_error("ggml_backend_sched: no backend can use the memory of '%s'\n", n->name);
                return false;
            }
            a[n] = b;
            continue;
        }
        if (is_view_op(n)) {
            const int b = s->location(n);
            if (b >= 0) a[n] = b;
            continue;
        }
        for (int j = 0; j < GGML_MAX_SRC; j++) {
            const ggml_tensor * src = n->src[j];
            if (!src) continue;
            const ggml_tensor * so = src->view_src ? src->view_src : src;
            if (so->buffer && ggml_backend_buffer_get_usage(so->buffer) == GGML_BACKEND_BUFFER_USAGE_WEIGHTS) {
                const int b = s->location(so);
                if (supports(b, n)) {
                    a[n] = b;
                    break;
                }
            }
        }
    }
    // Passes 2 and 3: backends other than the last (the CPU, the fallback) spread to neighbours
    // without weights, downwards then upwards; pass 4 spreads any backend downwards.
    auto spread = [&](bool down, bool any) {
        int cur = -1;
        for (int k = 0; k < g->n_nodes; k++) {
            ggml_tensor * n = g->nodes[down ? k : g->n_nodes - 1 - k];
            if (is_view_op(n)) continue;
            if (const int * b = a.find(n)) {
                cur = (any || *b < n_backends - 1) ? *b : -1;
            } else if (cur >= 0 && supports(cur, n)) {
                a[n] = cur;
            }
        }
    };
    if (n_backends > 1) {
        spread(true, false);
        spread(false, false);
    }
    spread(true, true);
    // Whatever is left: the first backend that supports it. Views: their source's backend.
    for (int i = 0; i < g->n_nodes; i++) {
        ggml_tensor * n = g->nodes[i];
        if (a.contains(n)) continue;
        if (is_view_op(n)) {
            a[n] = s->location(n) >= 0 ? s->location(n) : n_backends - 1;
            continue;
        }
        for (int b = 0; b < n_backends && !a.contains(n); b++) {
            if (supports(b, n)) a[n] = b;
        }
        if (!a.contains(n)) {
            ggml_log_error("ggml_backend_sched: no backend supports node '%s' (%s)\n", n->name, ggml_op_desc(n));
            return false;
        }
    }
    // A node whose backend cannot run it (pinned or spread wrongly) moves to one that can. One
    // that writes into existing memory (a cache, a weight) moves only to a backend that can
    // use that memory: another would write to addresses it cannot reach.
    for (int i = 0; i < g->n_nodes; i++) {
        ggml_tensor * n = g->nodes[i];
        if (is_view_op(n) || supports(a[n], n)) continue;
        const ggml_tensor * o = n->view_src ? n->view_src : n;
        const bool in_place = o->buffer != nullptr;
        bool moved = false;
        for (int b = 0; b < n_backends && !moved; b++) {
            if (supports(b, n) && (!in_place || ggml_backend_supports_buft(s->backends[b], ggml_backend_buffer_get_type(o->buffer)))) {
                a[n] = b;
                moved = true;
            }
        }
        if (!moved && in_place) {
            ggml_log_error("ggml_backend_sched: %s cannot compute node '%s' (%s) into its memory (%s), and no backend that "
                           "can reach that memory supports it\n", ggml_backend_name(s->backends[a[n]]), n->name, ggml_op_desc(n),
                           ggml_backend_buffer_name(o->buffer));
            return false;
        }
        if (!moved) {
            ggml_log_error("ggml_backend_sched: no backend supports node '%s' (%s)\n", n->name, ggml_op_desc(n));
            return false;
        }
    }
    // Leafs without memory (inputs) live where their first reader runs.
    for (int i = 0; i < g->n_nodes; i++) {
        ggml_tensor * n = g->nodes[i];
        for (int j = 0; j < GGML_MAX_SRC; j++) {
            ggml_tensor * src = n->src[j];
            if (src && !src->data && !src->view_src && !src->buffer && !a.contains(src)) {
                const int b = a[n];  // read before the insertion, which may move the slots
                a[src] = b;
            }
        }
    }
    for (int i = 0; i < g->n_leafs; i++) {
        ggml_tensor * l = g->leafs[i];
        if (!a.contains(l)) {
            const int b = l->data || l->buffer ? std::max(s->location(l), 0) : n_backends - 1;
            a[l] = b;
        }
    }
    return true;
}

// ---- splitting -----------------------------------------------------------------------------
// Builds the allocated graph: per split, its copies (op NONE, src[0] the original), then its
// nodes with the sources that live elsewhere replaced by the copies.
static bool split_graph(ggml_backend_sched_t s, ggml_cgraph * g) {
    if (!assign_backends(s, g)) return false;
    auto & a = s->assigned;
    s->splits.clear();
    s->n_copies = 0;

    // Split boundaries first (views join the split they are in), then the copies each needs.
    struct pending { int backend; int first, last; };
    std::vector<pending> parts;
    // Views compute nothing: they join the split around them (before the first compute node,
    // the split of that node).
    int next_backend = -1;
    for (int i = 0; i < g->n_nodes && next_backend < 0; i++) {
        if (!is_view_op(g->nodes[i])) next_backend = a[g->nodes[i]];
    }
    for (int i = 0; i < g->n_nodes; i++) {
        ggml_tensor * n = g->nodes[i];
        const int b = is_view_op(n) ? (parts.empty() ? std::max(next_backend, 0) : parts.back().backend) : a[n];
        if (parts.empty() || parts.back().backend != b) parts.push_back({ b, i, i });
        parts.back().last = i + 1;
    }

    size_t n_copy_max = 0;
    for (const pending & p : parts) {
        for (int i = p.first; i < p.last; i++) {
            for (int j = 0; j < GGML_MAX_SRC; j++) n_copy_max += g->nodes[i]->src[j] != nullptr;
        }
    }
    if (s->ctx) ggml_free(s->ctx);
    const size_t graph_nodes = (size_t) g->n_nodes + n_copy_max + 16;
    const size_t mem = ggml_tensor_overhead() * (n_copy_max + 1) + ggml_graph_overhead_custom(graph_nodes, false);
    if (s->ctx_mem.size() < mem) s->ctx_mem.resize(mem);
    ggml_init_params ip = { s->ctx_mem.size(), s->ctx_mem.data(), true };
    s->ctx = ggml_init(ip);
    if (!s->ctx) return false;
    s->graph = ggml_new_graph_custom(s->ctx, graph_nodes, false);
    ggml_cgraph * out = s->graph;

    for (const pending & p : parts) {
        sched_split sp;
        sp.backend = p.backend;
        std::unordered_map<const ggml_tensor *, ggml_tensor *> copy_of;  // per split
        for (int i = p.first; i < p.last; i++) {
            ggml_tensor * n = g->nodes[i];
            if (is_view_op(n)) continue;  // a view reads nothing; its reader copies what it needs
            for (int j = 0; j < GGML_MAX_SRC; j++) {
                ggml_tensor * src = n->src[j];
                if (!src || ggml_is_empty(src)) continue;
                const int loc = s->location(src);
                if (loc == p.backend || loc < 0) continue;
                auto it = copy_of.find(src);
                ggml_tensor * c;
                if (it != copy_of.end()) {
                    c = it->second;
                } else {
                    c = ggml_new_tensor(s->ctx, src->type, GGML_MAX_DIMS, src->ne);
                    for (int d = 0; d < GGML_MAX_DIMS; d++) c->nb[d] = src->nb[d];  // same layout: a byte copy
                    std::string name = std::string(src->name) + "#" + ggml_backend_name(s->backends[p.backend]);
                    ggml_set_name(c, name.c_str());
                    c->src[0] = src;
                    copy_of[src] = c;
                    a[c] = p.backend;
                    sp.copies.push_back(c);
                    ggml_graph_add_node(out, c);
                }
                n->src[j] = c;
            }
        }
        sp.first = ggml_graph_n_nodes(out);
        for (int i = p.first; i < p.last; i++) ggml_graph_add_node(out, g->nodes[i]);
        sp.last = ggml_graph_n_nodes(out);
        s->n_copies += (int) sp.copies.size();
        s->splits.push_back(sp);
    }
    for (int i = 0; i < g->n_leafs; i++) {
        if (out->n_leafs < out->size) out->leafs[out->n_leafs++] = g->leafs[i];
    }
    for (sched_split & sp : s->splits) {
        memset(&sp.view, 0, sizeof(sp.view));
        sp.view.size = sp.last - sp.first;
        sp.view.n_nodes = sp.last - sp.first;
        sp.view.nodes = out->nodes + sp.first;
    }
    return true;
}

static void buffer_ids(ggml_backend_sched_t s, std::vector<int> & node_ids, std::vector<int> & leaf_ids) {
    ggml_cgraph * out = s->graph;
    node_ids.resize(out->n_nodes);
    leaf_ids.resize(out->n_leafs);
    for (int i = 0; i < out->n_nodes; i++) node_ids[i] = s->assigned[out->nodes[i]];
    for (int i = 0; i < out->n_leafs; i++) {
        const int * b = s->assigned.find(out->leafs[i]);
        leaf_ids[i] = b ? *b : 0;
    }
}

bool ggml_backend_sched_reserve(ggml_backend_sched_t sched, struct ggml_cgraph * measure_graph) {
    // The measure graph's sources are put back afterwards: it may be built again or reused.
    std::vector<std::vector<ggml_tensor *>> srcs(measure_graph->n_nodes);
    for (int i = 0; i < measure_graph->n_nodes; i++) {
        srcs[i].assign(measure_graph->nodes[i]->src, measure_graph->nodes[i]->src + GGML_MAX_SRC);
    }
    bool ok = split_graph(sched, measure_graph);
    if (ok) {
        std::vector<int> node_ids, leaf_ids;
        buffer_ids(sched, node_ids, leaf_ids);
        ok = ggml_gallocr_reserve_n(sched->galloc, sched->graph, node_ids.data(), leaf_ids.data());
    }
    for (int i = 0; i < measure_graph->n_nodes; i++) {
        memcpy(measure_graph->nodes[i]->src, srcs[i].data(), sizeof(ggml_tensor *) * GGML_MAX_SRC);
    }
    ggml_backend_sched_reset(sched);
    return ok;
}

// GGML_SCHED_DEBUG=1 prints each split (its backend, node count and copies in), =2 its nodes too:
// where a graph leaves a device for the CPU, and what it copies at each seam.
static int sched_debug_level() {
    static const int level = [] {
        const char * v = getenv("GGML_SCHED_DEBUG");
        return v ? atoi(v) : 0;
    }();
    return level;
}

static void print_splits(ggml_backend_sched_t s) {
    const int level = sched_debug_level();
    size_t copied = 0;
    for (const sched_split & sp : s->splits) {
        for (const ggml_tensor * c : sp.copies) copied += ggml_nbytes(c);
    }
    fprintf(stderr, "ggml_backend_sched: %d splits, %d copies (%.1f KiB)\n", (int) s->splits.size(), s->n_copies, copied / 1024.0);
    for (size_t k = 0; k < s->splits.size(); k++) {
        const sched_split & sp = s->splits[k];
        fprintf(stderr, "## split %d: %s, %d nodes", (int) k, ggml_backend_name(s->backends[sp.backend]), sp.last - sp.first);
        const char * sep = ", copies in: ";
        for (const ggml_tensor * c : sp.copies) {
            fprintf(stderr, "%s%s (%.1f KiB)", sep, c->src[0]->name, ggml_nbytes(c) / 1024.0);
            sep = ", ";
        }
        fprintf(stderr, "\n");
        for (int i = sp.first; level >= 2 && i < sp.last; i++) {
            const ggml_tensor * n = s->graph->nodes[i];
            fprintf(stderr, "   %-10s %-24s [%lld %lld %lld %lld]\n", ggml_op_desc(n), n->name, (long long) n->ne[0],
                    (long long) n->ne[1], (long long) n->ne[2], (long long) n->ne[3]);
        }
    }
}

bool ggml_backend_sched_alloc_graph(ggml_backend_sched_t sched, struct ggml_cgraph * graph) {
    if (!split_graph(sched, graph)) return false;
    if (sched_debug_level() > 0) print_splits(sched);
    std::vector<int> node_ids, leaf_ids;
    buffer_ids(sched, node_ids, leaf_ids);
    return ggml_gallocr_alloc_graph_n(sched->galloc, sched->graph, node_ids.data(), leaf_ids.data());
}

enum ggml_status ggml_backend_sched_graph_compute_async(ggml_backend_sched_t sched, struct ggml_cgraph * graph) {
    if (!sched->graph && !ggml_backend_sched_alloc_graph(sched, graph)) return GGML_STATUS_ALLOC_FAILED;
    for (sched_split & sp : sched->splits) {
        ggml_backend_t b = sched->backends[sp.backend];
        for (ggml_tensor * c : sp.copies) {
            const int from = sched->location(c->src[0]);
            if (from >= 0) ggml_backend_synchronize(sched->backends[from]);
            ggml_backend_tensor_copy(c->src[0], c);
        }
        if (sp.view.n_nodes == 0) continue;
        if (!sched->callback_eval) {
            const enum ggml_status st = ggml_backend_graph_compute_async(b, &sp.view);
            if (st != GGML_STATUS_SUCCESS) return st;
            continue;
        }
        // With an eval callback: the split in runs that end at each node the callback asks for.
        for (int j0 = 0; j0 < sp.view.n_nodes;) {
            int j1 = j0;
            bool want = sched->callback_eval(sp.view.nodes[j1], true, sched->callback_eval_user_data);
            while (!want && j1 + 1 < sp.view.n_nodes) {
                want = sched->callback_eval(sp.view.nodes[++j1], true, sched->callback_eval_user_data);
            }
            ggml_cgraph run = sp.view;
            run.nodes = sp.view.nodes + j0;
            run.n_nodes = run.size = j1 + 1 - j0;
            const enum ggml_status st = ggml_backend_graph_compute_async(b, &run);
            if (st != GGML_STATUS_SUCCESS) return st;
            ggml_backend_synchronize(b);
            if (want && !sched->callback_eval(sp.view.nodes[j1], false, sched->callback_eval_user_data)) return GGML_STATUS_ABORTED;
            j0 = j1 + 1;
        }
    }
    return GGML_STATUS_SUCCESS;
}

void ggml_backend_sched_set_eval_callback(ggml_backend_sched_t sched, ggml_backend_sched_eval_callback callback, void * user_data) {
    sched->callback_eval = callback;
    sched->callback_eval_user_data = user_data;
}

void ggml_backend_sched_synchronize(ggml_backend_sched_t sched) {
    for (ggml_backend_t b : sched->backends) ggml_backend_synchronize(b);
}

enum ggml_status ggml_backend_sched_graph_compute(ggml_backend_sched_t sched, struct ggml_cgraph * graph) {
    const enum ggml_status st = ggml_backend_sched_graph_compute_async(sched, graph);
    ggml_backend_sched_synchronize(sched);
    return st;
}
