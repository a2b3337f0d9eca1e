// threadpool.cpp - persistent workers: they spin briefly for the next job (graphs are often
// computed back to back, one per token), then sleep on a condition variable.
#include "threadpool.h"

#if defined(__x86_64__) || defined(__i386__)
static inline void cpu_relax() { __asm__ __volatile__("pause"); }
#elif defined(__aarch64__)
static inline void cpu_relax() { __asm__ __volatile__("yield"); }
#else
static inline void cpu_relax() {}
#endif

// Spins this many times before yielding the core: with more threads than cores, a spinning
// waiter would otherwise keep the thread it waits for off the CPU.
static const int SPIN_BEFORE_YIELD = 2000;
// How long (in spin iterations) an idle worker polls for a new job before it sleeps.
static const int SPIN_BEFORE_SLEEP = 20000;

ggml_threadpool & ggml_threadpool_global() {
    static ggml_threadpool pool;
    return pool;
}

ggml_threadpool::~ggml_threadpool() {
    {
        std::lock_guard<std::mutex> lock(mutex);
        stopping = true;
        job_gen.fetch_add(1, std::memory_order_release);
    }
    wake.notify_all();
    for (auto & t : workers) t.join();
}

void ggml_threadpool::ensure_workers(int n) {
    while ((int) workers.size() < n) {
        const int ith = (int) workers.size() + 1;
        workers.emplace_back([this, ith] { worker_loop(ith); });
    }
}

void ggml_threadpool::run(int nth, const std::function<void(int, int)> & fn) {
    if (nth <= 1) {
        n_active.store(1, std::memory_order_relaxed);
        fn(0, 1);
        return;
    }
    ensure_workers(nth - 1);
    n_finished.store(0, std::memory_order_relaxed);
    barrier_count.store(0, std::memory_order_relaxed);
    {
        std::lock_guard<std::mutex> lock(mutex);
        job = &fn;
        n_active.store(nth, std::memory_order_relaxed);
        job_gen.fetch_add(1, std::memory_order_release);
    }
    wake.notify_all();

    fn(0, nth);

    // Wait for the workers of this job to finish before the job object goes away.
    int spins = 0;
    while (n_finished.load(std::memory_order_acquire) < nth - 1) {
        if (++spins < SPIN_BEFORE_YIELD) cpu_relax(); else std::this_thread::yield();
    }
}

void ggml_threadpool::worker_loop(int ith) {
    uint64_t seen = 0;
    for (;;) {
        // Poll for a new job, then sleep.
        int spins = 0;
        while (job_gen.load(std::memory_order_acquire) == seen && spins < SPIN_BEFORE_SLEEP) {
            if (++spins % 64 == 0) std::this_thread::yield(); else cpu_relax();
        }
        const std::function<void(int, int)> * fn;
        int nth;
        {
            std::unique_lock<std::mutex> lock(mutex);
            wake.wait(lock, [&] { return stopping || job_gen.load(std::memory_order_acquire) != seen; });
            if (stopping) return;
            seen = job_gen.load(std::memory_order_acquire);
            fn = job;
            nth = n_active.load(std::memory_order_relaxed);
        }
        if (ith < nth) {
            (*fn)(ith, nth);
            n_finished.fetch_add(1, std::memory_order_acq_rel);
        }
    }
}

void ggml_threadpool::barrier() {
    const int nth = n_active.load(std::memory_order_relaxed);
    if (nth <= 1) return;
    const int phase = barrier_phase.load(std::memory_order_relaxed);
    if (barrier_count.fetch_add(1, std::memory_order_acq_rel) == nth - 1) {
        barrier_count.store(0, std::memory_order_relaxed);
        barrier_phase.fetch_add(1, std::memory_order_acq_rel);
        return;
    }
    int spins = 0;
    while (barrier_phase.load(std::memory_order_acquire) == phase) {
        if (++spins < SPIN_BEFORE_YIELD) cpu_relax(); else std::this_thread::yield();
    }
}
