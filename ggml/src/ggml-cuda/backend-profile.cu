// backend-profile.cu - see backend-profile.cuh.
#include "backend-profile.cuh"

#include <stdio.h>

#include <algorithm>

namespace {

// A launch's class: its op(s), and what decides which kernel runs and how long it takes.
std::string launch_class(const ggml_cgraph * g, int first, int n) {
    const ggml_tensor * t = ggml_graph_node((ggml_cgraph *) g, first);
    std::string c = ggml_op_desc(t);
    for (int j = 1; j < n; j++) c += std::string("+") + ggml_op_desc(ggml_graph_node((ggml_cgraph *) g, first + j));
    const ggml_tensor * a = t->src[0], * b = t->src[1];
    if ((t->op == GGML_OP_MUL_MAT || t->op == GGML_OP_OUT_PROD) && a && b) {
        const int64_t cols = t->op == GGML_OP_MUL_MAT ? b->ne[1] : t->ne[1];
        c += std::string(" ") + ggml_type_name(a->type) + (cols == 1 ? " 1 col" : cols <= 8 ? " <=8 cols" : " >8 cols");
    } else if ((t->op == GGML_OP_FLASH_ATTN_EXT || t->op == GGML_OP_FLASH_ATTN_BACK) && t->src[1]) {
        c += std::string(" ") + ggml_type_name(t->src[1]->type) + (a && a->ne[1] == 1 ? " 1 query" : " batch");
    } else if (t->op == GGML_OP_CPY || t->op == GGML_OP_SET_ROWS || t->op == GGML_OP_GET_ROWS) {
        const ggml_tensor * s = t->op == GGML_OP_GET_ROWS ? a : (t->op == GGML_OP_SET_ROWS ? t->src[2] : b);
        c += std::string(" ") + (a ? ggml_type_name(a->type) : "?") + "->" + (s ? ggml_type_name(s->type) : ggml_type_name(t->type));
    }
    return c;
}

}  // namespace

ggml_cuda_profiler::~ggml_cuda_profiler() {
    for (cudaEvent_t e : events) cudaEventDestroy(e);
}

cudaEvent_t ggml_cuda_profiler::event(size_t i) {
    while (events.size() <= i) {
        cudaEvent_t e;
        CUDA_CHECK(cudaEventCreate(&e));
        events.push_back(e);
    }
    return events[i];
}

void ggml_cuda_profiler::graph_begin(cudaStream_t) {
    const auto now = std::chrono::steady_clock::now();
    if (have_last) host_ms += std::chrono::duration<double, std::milli>(now - last_start).count();
    last_start = now;
    have_last = true;
    n_events = 0;
    launches.clear();
}

void ggml_cuda_profiler::launch_begin(cudaStream_t stream) {
    CUDA_CHECK(cudaEventRecord(event(n_events), stream));
}

void ggml_cuda_profiler::launch_end(cudaStream_t stream, const ggml_cgraph * g, int first, int n) {
    CUDA_CHECK(cudaEventRecord(event(n_events + 1), stream));
    launches.push_back({ launch_class(g, first, n), n_events });
    n_events += 2;
}

void ggml_cuda_profiler::graph_end(cudaStream_t stream) {
    CUDA_CHECK(cudaStreamSynchronize(stream));
    n_graphs++;
    if (launches.empty()) return;
    for (const launch & l : launches) {
        float ms = 0.0f;
        CUDA_CHECK(cudaEventElapsedTime(&ms, events[l.ev], events[l.ev + 1]));
        stat & s = by_class[l.cls];
        s.calls++;
        s.ms += ms;
        busy_ms += ms;
        n_launches++;
    }
    float span = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&span, events[launches.front().ev], events[launches.back().ev + 1]));
    gpu_ms += span;
}

void ggml_cuda_profiler::report(const char * name) const {
    if (n_graphs == 0) return;
    fprintf(stderr, "\nggml_cuda profile (%s): %lld graphs, %.1f launches a graph; a graph: %.3f ms on the GPU (%.3f ms in launches), "
                    "%.3f ms between graph starts\n",
            name, (long long) n_graphs, (double) n_launches / n_graphs, gpu_ms / n_graphs, busy_ms / n_graphs,
            n_graphs > 1 ? host_ms / (n_graphs - 1) : 0.0);
    std::vector<std::pair<std::string, stat>> rows(by_class.begin(), by_class.end());
    std::sort(rows.begin(), rows.end(), [](const auto & x, const auto & y) { return x.second.ms > y.second.ms; });
    fprintf(stderr, "%7s %10s %9s %9s  %s\n", "time %", "total ms", "calls", "us/call", "launch");
    for (const auto & r : rows) {
        fprintf(stderr, "%7.2f %10.3f %9lld %9.2f  %s\n", busy_ms > 0 ? 100.0 * r.second.ms / busy_ms : 0.0, r.second.ms,
                (long long) r.second.calls, 1000.0 * r.second.ms / (double) r.second.calls, r.first.c_str());
    }
}
