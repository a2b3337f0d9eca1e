// threadpool.h - a persistent pool of worker threads that run one job on n threads at a time,
// with a spinning barrier for synchronisation inside the job.
#pragma once

#include "ggml.h"

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

    // Items [0, n) of one stretch of a job between two barriers (one such loop per stretch),
    // shared out with stealing: each thread starts on its own contiguous share (as
    // ggml_cpu_split_rows cuts it) and takes from its front, so it streams memory in order; one
    // that runs out takes the back half of the largest share left. A core that gets less memory
    // bandwidth than the other then leaves it part of its work instead of keeping it waiting.
    // Sets [*first, *end) to thread ith's next items; false when none is left. n <= MAX_SHARED_ITEMS.
    static constexpr int64_t MAX_SHARED_ITEMS = 0xFFFF;
    static constexpr int MAX_SHARES = 256;  // threads
    bool next_items(int ith, int nth, int64_t n, int64_t * first, int64_t * end);

    ggml_threadpool() = default;
    // A pool of ggml_threadpool_new: at most params.n_threads threads a compute, workers placed
    // and prioritised as the parameters say, polling for `poll`'s share of the usual time.
    explicit ggml_threadpool(const ggml_threadpool_params & params);
    ~ggml_threadpool();

    // The most threads a compute may use (0: any number, the global and backends' own pools).
    static constexpr int SPIN_BEFORE_SLEEP_DEFAULT = 200000;  // threadpool.cpp says why
    int n_threads_max = 0;
    // Paused: idle workers sleep at once instead of polling; the next run resumes.
    void pause();
    void resume();
    bool is_paused() const { return paused.load(std::memory_order_relaxed); }

    std::mutex compute_mutex;  // held by the graph computing on this pool
    // What runs at each node of the graph computing on this pool (compute.cpp), kept with the
    // pool so its capacity persists and computing allocates nothing; guarded by compute_mutex.
    std::vector<uint8_t> node_plan;
    // The last node reading each tensor of that graph (compute.cpp's last_read_build), likewise:
    // open addressing; an entry counts only when its stamp is the current graph's (no clearing).
    struct last_read_entry { const void * key; int node; uint32_t stamp; };
    std::vector<last_read_entry> last_read;
    uint32_t last_read_stamp = 0;

private:
    void worker_loop(int ith);
    void ensure_workers(int n);

    std::vector<std::thread> workers;  // worker i runs as thread ith = i + 1

    std::mutex mutex;                  // guards the fields below for sleeping workers
    std::condition_variable wake;
    const std::function<void(int, int)> * job = nullptr;
    bool stopping = false;
    uint64_t wake_gen = 0;               // bumped by resume: sleeping workers go back to polling

    std::atomic<bool> paused{false};
    int spin_before_sleep = SPIN_BEFORE_SLEEP_DEFAULT;  // poll iterations before an idle worker sleeps
    bool placed = false;                 // params says where and how the workers run
    ggml_threadpool_params params{};
    void place_worker(int ith);          // applies params (or the NUMA strategy) to worker ith

    std::atomic<int>  n_active{0};       // threads of the current job
    std::atomic<uint64_t> job_gen{0};    // bumped for each job; workers wait for a new value
    std::atomic<int>  n_finished{0};

    alignas(64) std::atomic<int> barrier_count{0};
    alignas(64) std::atomic<int> barrier_phase{0};

    // Thread i's share of next_items' items: (barrier phase it belongs to << 32) | first << 16 | end.
    // A share of an older phase is stale: the first to look at it (owner or thief) sets it anew.
    struct alignas(64) share { std::atomic<uint64_t> v{0}; };
    share shares[MAX_SHARES];
    uint64_t share_of(int t, int nth, int64_t n, uint32_t phase);
};

// The process-wide pool used by ggml_graph_compute when the plan names none.
ggml_threadpool & ggml_threadpool_global();
