// node-perf.cpp - GGML_PERF=1 in the environment: the executor times every node (thread 0, the
// barrier after it included, so the time is what the graph waited) and, at exit, prints to
// stderr the time per kind of node (op, and the operand types for the matrix products), with
// GFLOP/s for the products: where a graph's time goes, without a profiler.
#include "node-perf.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace {

struct kind_stats {
    uint64_t key = 0;  // 0: free slot
    int64_t  calls = 0;
    int64_t  ns = 0;
    double   flops = 0;
};

const int TABLE = 1024;  // distinct kinds seen in a process (a few dozen in practice)
kind_stats g_table[TABLE];
std::mutex g_mutex;

// op | sub-op (unary) | src0 type | src1 type, each in a byte; +1 keeps 0 free.
uint64_t node_key(const ggml_tensor * t) {
    const uint64_t op = (uint64_t) t->op;
    const uint64_t sub = t->op == GGML_OP_UNARY ? (uint64_t) ggml_get_unary_op(t) : 0;
    const uint64_t a = t->src[0] ? (uint64_t) t->src[0]->type : 255;
    const uint64_t b = t->src[1] ? (uint64_t) t->src[1]->type : 255;
    return 1 + (op | sub << 8 | a << 16 | b << 24);
}

// Multiply-adds x 2 of the matrix products; 0 for the other ops.
double node_flops(const ggml_tensor * t) {
    if (t->op == GGML_OP_MUL_MAT) return 2.0 * (double) t->src[0]->ne[0] * (double) ggml_nelements(t);
    if (t->op == GGML_OP_OUT_PROD) return 2.0 * (double) t->src[0]->ne[1] * (double) ggml_nelements(t);
    return 0;
}

void print_table() {
    std::lock_guard<std::mutex> lock(g_mutex);
    kind_stats rows[TABLE];
    int n = 0;
    int64_t total = 0;
    for (const kind_stats & s : g_table) {
        if (s.key) { rows[n++] = s; total += s.ns; }
    }
    if (n == 0) return;
    std::sort(rows, rows + n, [](const kind_stats & x, const kind_stats & y) { return x.ns > y.ns; });
    fprintf(stderr, "\nGGML_PERF: time per kind of node (thread 0, barriers included), %.3f s in all\n", total * 1e-9);
    fprintf(stderr, "%-28s %-10s %9s %10s %6s %9s\n", "op", "types", "calls", "ms", "%", "GFLOP/s");
    for (int i = 0; i < n; i++) {
        const kind_stats & s = rows[i];
        const uint64_t k = s.key - 1;
        const ggml_op op = (ggml_op) (k & 0xff);
        const char * name = op == GGML_OP_UNARY ? ggml_unary_op_name((ggml_unary_op) (k >> 8 & 0xff)) : ggml_op_name(op);
        const int a = (int) (k >> 16 & 0xff), b = (int) (k >> 24 & 0xff);
        char types[32];
        snprintf(types, sizeof(types), "%s%s%s", a == 255 ? "" : ggml_type_name((ggml_type) a), b == 255 ? "" : ",",
                 b == 255 ? "" : ggml_type_name((ggml_type) b));
        char gflops[16] = "";
        if (s.flops > 0 && s.ns > 0) snprintf(gflops, sizeof(gflops), "%.1f", s.flops / (double) s.ns);
        fprintf(stderr, "%-28s %-10s %9lld %10.1f %6.2f %9s\n", name, types, (long long) s.calls, s.ns * 1e-6,
                100.0 * (double) s.ns / (double) total, gflops);
    }
}

}  // namespace

bool ggml_node_perf_enabled(void) {
    static const bool on = [] {
        const char * v = getenv("GGML_PERF");
        const bool enabled = v && *v && strcmp(v, "0") != 0;
        if (enabled) atexit(print_table);
        return enabled;
    }();
    return on;
}

void ggml_node_perf_add(const struct ggml_tensor * node, int64_t ns) {
    const uint64_t key = node_key(node);
    std::lock_guard<std::mutex> lock(g_mutex);
    for (int i = 0, h = (int) (key * 0x9E3779B97F4A7C15ull >> 54) % TABLE; i < TABLE; i++, h = (h + 1) % TABLE) {
        kind_stats & s = g_table[h];
        if (s.key != key && s.key != 0) continue;
        s.key = key;
        s.calls += 1;
        s.ns += ns;
        s.flops += node_flops(node);
        return;
    }
}
