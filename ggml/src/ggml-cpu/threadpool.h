// threadpool.h - a persistent pool of worker threads that run one job on n threads at a time,
// with a spinning barrier for synchronisation inside the job.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

struct ggml_threadpool {
    // Runs job(ith, nth) on threads 0..nth-1 (the calling thread is thread 0) and returns when
    // all have finished. Workers are created on first use and kept for later jobs.
    void run(int nth, const std::function<void(int ith, int nth)> & job);

    // All nth threads of the running job must call it equally often.
    void barrier();

    ~ggml_threadpool();

    std::mutex compute_mutex;  // held by the graph computing on this pool

private:
    void worker_loop(int ith);
    void ensure_workers(int n);

    std::vector<std::thread> workers;  // worker i runs as thread ith = i + 1

    std::mutex mutex;                  // guards the fields below for sleeping workers
    std::condition_variable wake;
    const std::function<void(int, int)> * job = nullptr;
    bool stopping = false;

    std::atomic<int>  n_active{0};       // threads of the current job
    std::atomic<uint64_t> job_gen{0};    // bumped for each job; workers wait for a new value
    std::atomic<int>  n_finished{0};

    alignas(64) std::atomic<int> barrier_count{0};
    alignas(64) std::atomic<int> barrier_phase{0};
};

// The process-wide pool used by ggml_graph_compute when the plan names none.
ggml_threadpool & ggml_threadpool_global();
