// backend-profile.cuh - GGML_CUDA_PROFILE=1: where a CUDA backend's time goes. Each launch (a
// node, or the nodes a fused kernel computes) is timed by CUDA events around it and added to
// its class (op, weight type and batch class for products, cache type for attention); each
// graph's GPU time and the host's time between graphs are added up too. The table is printed to
// stderr when the backend is freed. Graphs run node by node while profiling (no CUDA graphs) and
// each graph ends with a synchronization: the figures say where time goes, not how fast the
// backend runs.
#pragma once

#include "common.cuh"

#include <chrono>
#include <map>
#include <string>
#include <vector>

class ggml_cuda_profiler {
public:
    ~ggml_cuda_profiler();
    void graph_begin(cudaStream_t stream);
    void launch_begin(cudaStream_t stream);
    // nodes [first, first + n) of g were launched since launch_begin
    void launch_end(cudaStream_t stream, const ggml_cgraph * g, int first, int n);
    void graph_end(cudaStream_t stream);  // waits for the graph, adds its times
    void report(const char * backend_name) const;

private:
    struct stat {
        int64_t calls = 0;
        double ms = 0.0;
    };
    struct launch {
        std::string cls;
        size_t ev;  // events ev (before) and ev + 1 (after)
    };
    std::vector<cudaEvent_t> events;
    size_t n_events = 0;  // used in this graph
    std::vector<launch> launches;
    std::map<std::string, stat> by_class;
    int64_t n_graphs = 0, n_launches = 0;
    double gpu_ms = 0.0;   // first launch to last, summed over graphs
    double busy_ms = 0.0;  // the launches' own times
    double host_ms = 0.0;  // between the starts of consecutive graphs (the host's share included)
    bool have_last = false;
    std::chrono::steady_clock::time_point last_start;

    cudaEvent_t event(size_t i);
};
