// ggml-graph.cpp - computation graphs: a topologically ordered list of nodes built by a
// depth-first walk from the outputs, with a hash set so each tensor is visited once.
#include "ggml-impl.h"

#include <stdio.h>
#include <stdlib.h>

void * ggml_new_graph_object(struct ggml_context * ctx, size_t nbytes);

// ---- hash set ------------------------------------------------------------------------------
size_t ggml_hash_size(size_t min_sz) {
    // A prime at least min_sz keeps linear probing short for pointer keys.
    static const size_t primes[] = {
        2, 3, 5, 11, 17, 37, 67, 131, 257, 521, 1031, 2053, 4099, 8209, 16411, 32771, 65537,
        131101, 262147, 524309, 1048583, 2097169, 4194319, 8388617, 16777259, 33554467,
        67108879, 134217757, 268435459, 536870923, 1073741827, 2147483659ull,
    };
    const size_t n = sizeof(primes) / sizeof(primes[0]);
    for (size_t i = 0; i < n; i++) {
        if (primes[i] >= min_sz) return primes[i];
    }
    return min_sz | 1;
}

size_t ggml_bitset_size(size_t n) { return (n + 31) / 32; }

static inline size_t hash_of(const ggml_tensor * p) { return (size_t) (uintptr_t) p >> 4; }
static inline bool bit_get(const uint32_t * bits, size_t i) { return (bits[i >> 5] >> (i & 31)) & 1u; }
static inline void bit_set(uint32_t * bits, size_t i) { bits[i >> 5] |= 1u << (i & 31); }

size_t ggml_hash_find(const struct ggml_hash_set * set, const struct ggml_tensor * key) {
    size_t h = hash_of(key) % set->size;
    size_t i = h;
    while (bit_get(set->used, i) && set->keys[i] != key) {
        i = (i + 1) % set->size;
        if (i == h) return GGML_HASHSET_FULL;
    }
    return i;
}

bool ggml_hash_contains(const struct ggml_hash_set * set, const struct ggml_tensor * key) {
    const size_t i = ggml_hash_find(set, key);
    return i != GGML_HASHSET_FULL && bit_get(set->used, i);
}

size_t ggml_hash_insert(struct ggml_hash_set * set, struct ggml_tensor * key) {
    const size_t i = ggml_hash_find(set, key);
    if (i == GGML_HASHSET_FULL) return GGML_HASHSET_FULL;
    if (bit_get(set->used, i)) return GGML_HASHSET_ALREADY_EXISTS;
    bit_set(set->used, i);
    set->keys[i] = key;
    return i;
}

// ---- graph allocation ----------------------------------------------------------------------
static size_t graph_nbytes(size_t size, bool grads) {
    const size_t hash_size = ggml_hash_size(size * 2);
    size_t n = sizeof(ggml_cgraph);
    n += sizeof(ggml_tensor *) * size;                 // nodes
    n += sizeof(ggml_tensor *) * size;                 // leafs
    n += sizeof(ggml_tensor *) * hash_size;            // hash keys
    if (grads) n += 2 * sizeof(ggml_tensor *) * hash_size;  // grads, grad_accs (indexed by hash slot)
    n += sizeof(uint32_t) * ggml_bitset_size(hash_size);
    return n;
}

size_t ggml_graph_overhead_custom(size_t size, bool grads) {
    return GGML_MEM_ALIGN + (graph_nbytes(size, grads) + GGML_MEM_ALIGN - 1) / GGML_MEM_ALIGN * GGML_MEM_ALIGN;
}
size_t ggml_graph_overhead(void) { return ggml_graph_overhead_custom(GGML_DEFAULT_GRAPH_SIZE, false); }

struct ggml_cgraph * ggml_new_graph_custom(struct ggml_context * ctx, size_t size, bool grads) {
    char * mem = (char *) ggml_new_graph_object(ctx, graph_nbytes(size, grads));
    if (!mem) GGML_ABORT("ggml_new_graph: context memory exhausted");
    const size_t hash_size = ggml_hash_size(size * 2);
    ggml_cgraph * g = (ggml_cgraph *) mem;
    char * p = mem + sizeof(ggml_cgraph);
    g->size = (int) size;
    g->n_nodes = 0;
    g->n_leafs = 0;
    g->nodes = (ggml_tensor **) p; p += sizeof(ggml_tensor *) * size;
    g->leafs = (ggml_tensor **) p; p += sizeof(ggml_tensor *) * size;
    g->visited_hash_set.size = hash_size;
    g->visited_hash_set.keys = (ggml_tensor **) p; p += sizeof(ggml_tensor *) * hash_size;
    g->grads = nullptr;
    g->grad_accs = nullptr;
    if (grads) {
        g->grads = (ggml_tensor **) p; p += sizeof(ggml_tensor *) * hash_size;
        g->grad_accs = (ggml_tensor **) p; p += sizeof(ggml_tensor *) * hash_size;
        memset(g->grads, 0, sizeof(ggml_tensor *) * hash_size * 2);
    }
    g->visited_hash_set.used = (uint32_t *) p;
    memset(g->visited_hash_set.used, 0, sizeof(uint32_t) * ggml_bitset_size(hash_size));
    return g;
}

struct ggml_cgraph * ggml_new_graph(struct ggml_context * ctx) {
    return ggml_new_graph_custom(ctx, GGML_DEFAULT_GRAPH_SIZE, false);
}

void ggml_graph_clear(struct ggml_cgraph * g) {
    g->n_nodes = 0;
    g->n_leafs = 0;
    memset(g->visited_hash_set.used, 0, sizeof(uint32_t) * ggml_bitset_size(g->visited_hash_set.size));
}

// ---- building ------------------------------------------------------------------------------
// Post-order walk: sources before the tensor that reads them. Iterative, so very deep graphs
// (long chains of ops) cannot overflow the stack.
static void visit(ggml_cgraph * g, ggml_tensor * root) {
    struct frame { ggml_tensor * t; int next_src; };
    frame stack_small[256];
    frame * stack = stack_small;
    int cap = 256, top = 0;
    frame * heap = nullptr;

    if (ggml_hash_insert(&g->visited_hash_set, root) == GGML_HASHSET_ALREADY_EXISTS) return;
    stack[top++] = { root, 0 };
    while (top > 0) {
        frame & f = stack[top - 1];
        if (f.next_src < GGML_MAX_SRC) {
            ggml_tensor * s = f.t->src[f.next_src++];
            if (!s) continue;
            const size_t r = ggml_hash_insert(&g->visited_hash_set, s);
            if (r == GGML_HASHSET_ALREADY_EXISTS) continue;
            GGML_ASSERT(r != GGML_HASHSET_FULL && "graph size exceeded");
            if (top == cap) {
                frame * bigger = (frame *) malloc(sizeof(frame) * cap * 2);  // building, not computing
                GGML_ASSERT(bigger);
                memcpy(bigger, stack, sizeof(frame) * cap);
                free(heap);
                heap = bigger;
                stack = bigger;
                cap *= 2;
            }
            stack[top++] = { s, 0 };
            continue;
        }
        ggml_tensor * t = f.t;
        top--;
        if (t->op == GGML_OP_NONE && !(t->flags & GGML_TENSOR_FLAG_PARAM)) {
            GGML_ASSERT(g->n_leafs < g->size && "graph size exceeded (leafs)");
            if (t->name[0] == '\0') ggml_format_name(t, "leaf_%d", g->n_leafs);
            g->leafs[g->n_leafs++] = t;
        } else {
            GGML_ASSERT(g->n_nodes < g->size && "graph size exceeded (nodes)");
            if (t->name[0] == '\0') ggml_format_name(t, "node_%d", g->n_nodes);
            g->nodes[g->n_nodes++] = t;
        }
    }
    free(heap);
}

void ggml_build_forward_expand(struct ggml_cgraph * g, struct ggml_tensor * tensor) {
    visit(g, tensor);
}

int ggml_graph_size(struct ggml_cgraph * g) { return g->size; }
int ggml_graph_n_nodes(struct ggml_cgraph * g) { return g->n_nodes; }
int ggml_graph_n_leafs(struct ggml_cgraph * g) { return g->n_leafs; }
struct ggml_tensor ** ggml_graph_nodes(struct ggml_cgraph * g) { return g->nodes; }

struct ggml_tensor * ggml_graph_node(struct ggml_cgraph * g, int i) {
    if (i < 0) {
        GGML_ASSERT(g->n_nodes + i >= 0);
        return g->nodes[g->n_nodes + i];
    }
    GGML_ASSERT(i < g->n_nodes);
    return g->nodes[i];
}

struct ggml_tensor * ggml_graph_leaf(struct ggml_cgraph * g, int i) {
    GGML_ASSERT(i >= 0 && i < g->n_leafs);
    return g->leafs[i];
}

struct ggml_tensor * ggml_graph_get_tensor(const struct ggml_cgraph * g, const char * name) {
    for (int i = 0; i < g->n_leafs; i++) {
        if (strcmp(g->leafs[i]->name, name) == 0) return g->leafs[i];
    }
    for (int i = 0; i < g->n_nodes; i++) {
        if (strcmp(g->nodes[i]->name, name) == 0) return g->nodes[i];
    }
    return nullptr;
}

void ggml_graph_print(const struct ggml_cgraph * g) {
    fprintf(stderr, "graph: %d nodes, %d leafs\n", g->n_nodes, g->n_leafs);
    for (int i = 0; i < g->n_nodes; i++) {
        const ggml_tensor * t = g->nodes[i];
        fprintf(stderr, "  node %4d [%5lld %5lld %5lld %5lld] %-14s %-5s %s\n", i, (long long) t->ne[0],
                (long long) t->ne[1], (long long) t->ne[2], (long long) t->ne[3], ggml_op_desc(t),
                ggml_type_name(t->type), t->name);
    }
    for (int i = 0; i < g->n_leafs; i++) {
        const ggml_tensor * t = g->leafs[i];
        fprintf(stderr, "  leaf %4d [%5lld %5lld %5lld %5lld] %-5s %s\n", i, (long long) t->ne[0],
                (long long) t->ne[1], (long long) t->ne[2], (long long) t->ne[3], ggml_type_name(t->type), t->name);
    }
}

void ggml_graph_add_node(struct ggml_cgraph * g, struct ggml_tensor * tensor) {
    GGML_ASSERT(g->n_nodes < g->size && "graph size exceeded (nodes)");
    const size_t r = ggml_hash_insert(&g->visited_hash_set, tensor);
    GGML_ASSERT(r != GGML_HASHSET_FULL);
    g->nodes[g->n_nodes++] = tensor;
}

void ggml_graph_cpy(struct ggml_cgraph * src, struct ggml_cgraph * dst) {
    GGML_ASSERT(dst->size >= src->n_leafs && dst->size >= src->n_nodes);
    GGML_ASSERT(dst->visited_hash_set.size >= src->visited_hash_set.size);
    ggml_graph_clear(dst);
    if (dst->grads) {
        memset(dst->grads, 0, sizeof(ggml_tensor *) * dst->visited_hash_set.size);
        memset(dst->grad_accs, 0, sizeof(ggml_tensor *) * dst->visited_hash_set.size);
    }
    dst->n_leafs = src->n_leafs;
    dst->n_nodes = src->n_nodes;
    memcpy(dst->leafs, src->leafs, sizeof(ggml_tensor *) * src->n_leafs);
    memcpy(dst->nodes, src->nodes, sizeof(ggml_tensor *) * src->n_nodes);
    // Every visited tensor (sources included), with its gradient where both graphs keep them.
    for (size_t i = 0; i < src->visited_hash_set.size; i++) {
        if (!bit_get(src->visited_hash_set.used, i)) continue;
        ggml_tensor * t = src->visited_hash_set.keys[i];
        const size_t j = ggml_hash_insert(&dst->visited_hash_set, t);
        GGML_ASSERT(j != GGML_HASHSET_FULL && j != GGML_HASHSET_ALREADY_EXISTS);
        if (src->grads && dst->grads) {
            dst->grads[j] = src->grads[i];
            dst->grad_accs[j] = src->grad_accs[i];
        }
    }
}

struct ggml_cgraph * ggml_graph_dup(struct ggml_context * ctx, struct ggml_cgraph * g, bool force_grads) {
    ggml_cgraph * r = ggml_new_graph_custom(ctx, g->size, g->grads != nullptr || force_grads);
    ggml_graph_cpy(g, r);
    return r;
}
