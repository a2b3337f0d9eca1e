// bench-membw.cpp - the memory-bandwidth ceiling measured inside llama-bench (--ceiling auto),
// so that tg's share of it is a ratio taken in one run: as the shared tools' bandwidth meter does, n threads
// each sum their slice of a buffer far larger than the caches, and the best pass counts.
#include "bench.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace {

// Sum of n words, four independent chains so that loads, not the adds, set the pace.
uint64_t sum_words(const uint64_t * p, size_t n) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += p[i];
        s1 += p[i + 1];
        s2 += p[i + 2];
        s3 += p[i + 3];
    }
    for (; i < n; i++) s0 += p[i];
    return s0 + s1 + s2 + s3;
}

// Runs f(t) on n_threads threads (t = 0 .. n_threads - 1) and waits for all of them.
template <typename F> void on_threads(int n_threads, F f) {
    std::vector<std::thread> ts;
    for (int t = 1; t < n_threads; t++) ts.emplace_back(f, t);
    f(0);
    for (std::thread & t : ts) t.join();
}

}  // namespace

bench_membw::bench_membw(int n_threads, size_t bytes) : n_threads_(std::max(1, n_threads)) {
    n_words_ = bytes / sizeof(uint64_t);
    words_.reset(new uint64_t[n_words_]);
    // Each thread first touches the slice it reads (pages local to it where that matters).
    on_threads(n_threads_, [&](int t) {
        const size_t lo = n_words_ * t / n_threads_, hi = n_words_ * (t + 1) / n_threads_;
        for (size_t i = lo; i < hi; i++) words_[i] = i;
    });
}

bench_membw::~bench_membw() = default;

double bench_membw::measure_gbps(int passes) {
    double best = 0;
    std::vector<uint64_t> sums((size_t) n_threads_ * 8);  // a cache line apart
    for (int pass = 0; pass < passes; pass++) {
        const auto t0 = std::chrono::steady_clock::now();
        on_threads(n_threads_, [&](int t) {
            const size_t lo = n_words_ * t / n_threads_, hi = n_words_ * (t + 1) / n_threads_;
            sums[(size_t) t * 8] = sum_words(words_.get() + lo, hi - lo);
        });
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        sink_ += sums[0];
        best = std::max(best, (double) (n_words_ * sizeof(uint64_t)) / s / 1e9);
    }
    return best;
}
