// threadpool.cpp - persistent workers: they spin briefly for the next job (graphs are often
// computed back to back, one per token), then sleep on a condition variable.
#include "threadpool.h"

#include <algorithm>
#include <cstdlib>

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
// How long (in spin iterations, a yield every 64) an idle worker polls for a new job before it
// sleeps: longer than llama's gap between two tokens' graphs (building and placing the next one,
// ~0.5 ms), so generation does not wake sleeping workers each token (tg64 Q4_K_M: the first
// node took 69 us a token with 20000 spins, 17 us with 200000).
static const int SPIN_BEFORE_SLEEP = 200000;

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
    barrier_phase.fetch_add(1, std::memory_order_relaxed);  // a new stretch: next_items' shares of the last job are stale
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

static inline uint64_t share_pack(uint32_t phase, int64_t lo, int64_t hi) {
    return (uint64_t) phase << 32 | (uint64_t) lo << 16 | (uint64_t) hi;
}

uint64_t ggml_threadpool::share_of(int t, int nth, int64_t n, uint32_t phase) {
    uint64_t v = shares[t].v.load(std::memory_order_acquire);
    while ((uint32_t) (v >> 32) != phase) {
        const int64_t per = (n + nth - 1) / nth;
        const int64_t lo = std::min<int64_t>(n, per * t), hi = std::min<int64_t>(n, lo + per);
        const uint64_t fresh = share_pack(phase, lo, hi);
        if (shares[t].v.compare_exchange_weak(v, fresh, std::memory_order_acq_rel, std::memory_order_acquire)) return fresh;
    }
    return v;
}

bool ggml_threadpool::next_items(int ith, int nth, int64_t n, int64_t * first, int64_t * end) {
    if (nth > MAX_SHARES || n > MAX_SHARED_ITEMS) abort();  // the caller checks
    const uint32_t phase = (uint32_t) barrier_phase.load(std::memory_order_relaxed);
    for (;;) {
        uint64_t v = share_of(ith, nth, n, phase);
        const int64_t lo = (int64_t) (v >> 16 & 0xFFFF), hi = (int64_t) (v & 0xFFFF);
        if (lo < hi) {
            // An eighth of what is left at a time: few locked instructions (each one stalls the
            // loads in flight), small pieces at the end where another thread may want some.
            const int64_t take = std::max<int64_t>(1, (hi - lo) / 8);
            if (shares[ith].v.compare_exchange_weak(v, share_pack(phase, lo + take, hi), std::memory_order_acq_rel)) {
                *first = lo;
                *end = lo + take;
                return true;
            }
            continue;  // a thief took from the back meanwhile
        }
        // Own share done: the back half of the largest share left (of at least 2 items).
        int victim = -1;
        uint64_t vv = 0;
        int64_t most = 1;
        for (int t = 0; t < nth; t++) {
            if (t == ith) continue;
            const uint64_t w = share_of(t, nth, n, phase);
            const int64_t left = (int64_t) (w & 0xFFFF) - (int64_t) (w >> 16 & 0xFFFF);
            if (left > most) { most = left; victim = t; vv = w; }
        }
        if (victim < 0) return false;
        const int64_t vlo = (int64_t) (vv >> 16 & 0xFFFF), vhi = (int64_t) (vv & 0xFFFF), cut = vhi - most / 2;
        if (shares[victim].v.compare_exchange_strong(vv, share_pack(phase, vlo, cut), std::memory_order_acq_rel)) {
            // Nobody else writes an empty share, so the stolen items become this thread's own.
            shares[ith].v.store(share_pack(phase, cut, vhi), std::memory_order_release);
        }
    }
}
