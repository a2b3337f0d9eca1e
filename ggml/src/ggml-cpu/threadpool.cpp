// threadpool.cpp - persistent workers: they spin briefly for the next job (graphs are often
// computed back to back, one per token), then sleep on a condition variable.
#include "threadpool.h"
#include "ggml-cpu.h"
#include "ggml-impl.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

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
static const int SPIN_BEFORE_SLEEP = ggml_threadpool::SPIN_BEFORE_SLEEP_DEFAULT;

static bool numa_places_workers();

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
    paused.store(false, std::memory_order_relaxed);  // a compute resumes a paused pool
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
    if (placed || numa_places_workers()) place_worker(ith);
    uint64_t seen = 0;
    for (;;) {
        // Poll for a new job (not while paused), then sleep.
        int spins = 0;
        while (job_gen.load(std::memory_order_acquire) == seen && spins < spin_before_sleep &&
               !paused.load(std::memory_order_relaxed)) {
            if (++spins % 64 == 0) std::this_thread::yield(); else cpu_relax();
        }
        const std::function<void(int, int)> * fn;
        int nth;
        {
            std::unique_lock<std::mutex> lock(mutex);
            const uint64_t woken = wake_gen;
            wake.wait(lock, [&] { return stopping || job_gen.load(std::memory_order_acquire) != seen || wake_gen != woken; });
            if (stopping) return;
            if (job_gen.load(std::memory_order_acquire) == seen) continue;  // resumed: poll again
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

// ---- pools made to parameters (ggml_threadpool_new) -----------------------------------------
ggml_threadpool::ggml_threadpool(const ggml_threadpool_params & p) : n_threads_max(p.n_threads), params(p) {
    // poll 0: sleep at once; 50 (the default): the usual polling; 100: twice as long.
    spin_before_sleep = (int) std::min<uint64_t>((uint64_t) SPIN_BEFORE_SLEEP * p.poll / 50, 1u << 30);
    paused.store(p.paused, std::memory_order_relaxed);
    placed = p.prio != GGML_SCHED_PRIO_NORMAL || std::find(p.cpumask, p.cpumask + GGML_MAX_N_THREADS, true) != p.cpumask + GGML_MAX_N_THREADS;
}

void ggml_threadpool::pause() { paused.store(true, std::memory_order_relaxed); }

void ggml_threadpool::resume() {
    {
        std::lock_guard<std::mutex> lock(mutex);
        paused.store(false, std::memory_order_relaxed);
        wake_gen++;
    }
    wake.notify_all();
}

// ---- NUMA ------------------------------------------------------------------------------------
namespace {
struct numa_state {
    bool initialized = false;
    ggml_numa_strategy strategy = GGML_NUMA_STRATEGY_DISABLED;
    std::vector<std::vector<int>> node_cpus;  // the cores of each node
    int home_node = 0;                        // ISOLATE: the node of the thread that called ggml_numa_init
    cpu_set_t start_mask;                     // NUMACTL: the cores the process started with
};
numa_state & numa() {
    static numa_state st;
    return st;
}

std::vector<int> parse_cpu_list(const std::string & text) {  // "0-3,8,10-11"
    std::vector<int> cpus;
    size_t i = 0;
    while (i < text.size()) {
        char * end = nullptr;
        const long a = strtol(text.c_str() + i, &end, 10);
        if (end == text.c_str() + i) break;
        long b = a;
        i = end - text.c_str();
        if (i < text.size() && text[i] == '-') {
            b = strtol(text.c_str() + i + 1, &end, 10);
            i = end - text.c_str();
        }
        for (long c = a; c <= b; c++) cpus.push_back((int) c);
        if (i < text.size() && text[i] == ',') i++; else break;
    }
    return cpus;
}
}  // namespace

static bool numa_places_workers() {
    const numa_state & st = numa();
    return st.initialized && st.strategy != GGML_NUMA_STRATEGY_DISABLED && st.node_cpus.size() > 1;
}

void ggml_numa_init(enum ggml_numa_strategy strategy) {
    numa_state & st = numa();
    if (st.initialized) {
        ggml_log_debug("ggml_numa_init: NUMA already initialized\n");
        return;
    }
    st.initialized = true;
    if (strategy == GGML_NUMA_STRATEGY_MIRROR) {
        ggml_log_warn("ggml_numa_init: the MIRROR strategy is not supported: workers are not placed\n");
        strategy = GGML_NUMA_STRATEGY_DISABLED;
    }
    st.strategy = strategy;
    sched_getaffinity(0, sizeof(st.start_mask), &st.start_mask);
    for (int node = 0;; node++) {
        const std::string path = "/sys/devices/system/node/node" + std::to_string(node) + "/cpulist";
        FILE * f = fopen(path.c_str(), "r");
        if (!f) break;
        char buf[4096] = {0};
        const size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        st.node_cpus.push_back(parse_cpu_list(std::string(buf, n)));
    }
    const int cpu = sched_getcpu();
    for (size_t n = 0; n < st.node_cpus.size(); n++) {
        if (std::find(st.node_cpus[n].begin(), st.node_cpus[n].end(), cpu) != st.node_cpus[n].end()) st.home_node = (int) n;
    }
    ggml_log_debug("ggml_numa_init: %zu NUMA node(s), strategy %d\n", st.node_cpus.size(), (int) strategy);
}

bool ggml_is_numa(void) { return numa().node_cpus.size() > 1; }

// Worker ith's cores and priority: the pool's mask (strict: its ith set core, cycling; else all of
// them), else the NUMA strategy's cores. Refusals are logged once per pool; the worker runs anyway.
void ggml_threadpool::place_worker(int ith) {
    cpu_set_t set;
    CPU_ZERO(&set);
    int n_set = 0;
    if (placed) {
        std::vector<int> mask;
        for (int c = 0; c < GGML_MAX_N_THREADS; c++) {
            if (params.cpumask[c]) mask.push_back(c);
        }
        if (!mask.empty()) {
            if (params.strict_cpu) {
                CPU_SET(mask[ith % mask.size()], &set);
                n_set = 1;
            } else {
                for (int c : mask) CPU_SET(c, &set);
                n_set = (int) mask.size();
            }
        }
    }
    if (n_set == 0 && numa_places_workers()) {
        const numa_state & st = numa();
        if (st.strategy == GGML_NUMA_STRATEGY_NUMACTL) {
            set = st.start_mask;
            n_set = CPU_COUNT(&set);
        } else {
            const int node = st.strategy == GGML_NUMA_STRATEGY_ISOLATE ? st.home_node : ith % (int) st.node_cpus.size();
            for (int c : st.node_cpus[node]) CPU_SET(c, &set);
            n_set = (int) st.node_cpus[node].size();
        }
    }
    if (n_set > 0 && pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0) {
        ggml_log_warn("ggml_threadpool: cannot place worker %d on the asked cores\n", ith);
    }
    if (placed && params.prio != GGML_SCHED_PRIO_NORMAL) {
        bool ok;
        if (params.prio == GGML_SCHED_PRIO_REALTIME) {
            sched_param sp{};
            sp.sched_priority = sched_get_priority_min(SCHED_FIFO);
            ok = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0;
        } else {  // a lower nice value for this thread only
            const int nice_value = params.prio == GGML_SCHED_PRIO_HIGH ? -10 : -5;
            ok = setpriority(PRIO_PROCESS, (id_t) syscall(SYS_gettid), nice_value) == 0;
        }
        if (!ok) ggml_log_warn("ggml_threadpool: cannot set worker %d's priority %d (not permitted)\n", ith, (int) params.prio);
    }
}

// ---- the C API ------------------------------------------------------------------------------
void ggml_threadpool_params_init(struct ggml_threadpool_params * p, int n_threads) {
    memset(p, 0, sizeof(*p));
    p->n_threads = n_threads;
    p->prio = GGML_SCHED_PRIO_NORMAL;
    p->poll = 50;
    p->strict_cpu = false;
    p->paused = false;
}

struct ggml_threadpool_params ggml_threadpool_params_default(int n_threads) {
    ggml_threadpool_params p;
    ggml_threadpool_params_init(&p, n_threads);
    return p;
}

bool ggml_threadpool_params_match(const struct ggml_threadpool_params * p0, const struct ggml_threadpool_params * p1) {
    return p0->n_threads == p1->n_threads && p0->prio == p1->prio && p0->poll == p1->poll &&
           p0->strict_cpu == p1->strict_cpu && p0->paused == p1->paused &&
           memcmp(p0->cpumask, p1->cpumask, sizeof(p0->cpumask)) == 0;
}

struct ggml_threadpool * ggml_threadpool_new(struct ggml_threadpool_params * params) {
    if (!params || params->n_threads <= 0 || params->n_threads > ggml_threadpool::MAX_SHARES) {
        ggml_log_error("ggml_threadpool_new: n_threads must be in [1, %d]\n", ggml_threadpool::MAX_SHARES);
        return nullptr;
    }
    if (params->prio < GGML_SCHED_PRIO_NORMAL || params->prio > GGML_SCHED_PRIO_REALTIME || params->poll > 100) {
        ggml_log_error("ggml_threadpool_new: bad priority %d or poll %u (0..100)\n", (int) params->prio, params->poll);
        return nullptr;
    }
    return new ggml_threadpool(*params);
}

void ggml_threadpool_free(struct ggml_threadpool * threadpool) { delete threadpool; }

int ggml_threadpool_get_n_threads(struct ggml_threadpool * threadpool) { return threadpool->n_threads_max; }

void ggml_threadpool_pause(struct ggml_threadpool * threadpool) { threadpool->pause(); }

void ggml_threadpool_resume(struct ggml_threadpool * threadpool) { threadpool->resume(); }
