// ggml-cpu.h - the CPU backend: host buffers, its own thread pool, the build's SIMD kernels.
// (ggml_graph_plan / ggml_graph_compute, the CPU's graph calls without a backend object, and
// ggml_cpu_repack are declared in ggml.h.)
#pragma once

#include "ggml-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

ggml_backend_t ggml_backend_cpu_init(void);
bool           ggml_backend_is_cpu(ggml_backend_t backend);
void           ggml_backend_cpu_set_n_threads(ggml_backend_t backend_cpu, int n_threads);
void           ggml_backend_cpu_set_abort_callback(ggml_backend_t backend_cpu, ggml_abort_callback abort_callback, void * abort_callback_data);

// A thread pool made to the given parameters (ggml.h: ggml_threadpool_params): n_threads at
// most per compute, workers placed on the mask's cores and run at the given priority where the
// system allows it (a refusal is logged, the pool still works), idle workers polling for the
// next compute as long as `poll` says before they sleep. NULL on bad parameters.
struct ggml_threadpool * ggml_threadpool_new          (struct ggml_threadpool_params * params);
void                     ggml_threadpool_free         (struct ggml_threadpool * threadpool);  // NULL is allowed
int                      ggml_threadpool_get_n_threads(struct ggml_threadpool * threadpool);
// A paused pool's workers sleep instead of polling; resume (or the next compute on it) wakes them.
void                     ggml_threadpool_pause        (struct ggml_threadpool * threadpool);
void                     ggml_threadpool_resume       (struct ggml_threadpool * threadpool);
// The backend computes on the given pool (with at most its n_threads threads) instead of its
// own; NULL: its own again. The pool must outlive its use by the backend.
void                     ggml_backend_cpu_set_threadpool(ggml_backend_t backend_cpu, ggml_threadpool_t threadpool);

// NUMA: ggml_numa_init reads the machine's nodes (/sys/devices/system/node) once; with more than
// one, the pools' workers are placed by the strategy: DISTRIBUTE spreads them over the nodes
// (worker i on node i % nodes), ISOLATE keeps them on the node of the thread that called
// ggml_numa_init, NUMACTL on the cores the process was started with (numactl's). MIRROR is not
// supported (logged; treated as DISABLED). ggml_is_numa: more than one node was found.
enum ggml_numa_strategy {
    GGML_NUMA_STRATEGY_DISABLED   = 0,
    GGML_NUMA_STRATEGY_DISTRIBUTE = 1,
    GGML_NUMA_STRATEGY_ISOLATE    = 2,
    GGML_NUMA_STRATEGY_NUMACTL    = 3,
    GGML_NUMA_STRATEGY_MIRROR     = 4,
    GGML_NUMA_STRATEGY_COUNT
};
void ggml_numa_init(enum ggml_numa_strategy numa);
bool ggml_is_numa(void);

// The CPU's backend registry entry (ggml-backend.h); its proc addresses are ggml's:
// ggml_backend_set_n_threads, ggml_backend_set_abort_callback, ggml_backend_dev_get_extra_bufts,
// ggml_backend_get_features, ggml_backend_cpu_numa_init, ggml_backend_cpu_is_numa,
// ggml_threadpool_new, ggml_threadpool_free, ggml_backend_cpu_set_threadpool.
ggml_backend_reg_t ggml_backend_cpu_reg(void);

// The kernel tables compiled into this build: 0 is the one it runs ("AVX512", "AVX2", "NEON"),
// then each one's base down to "scalar", the reference. A backend set to another table plans
// and computes with it (tests hold the CPU to its scalar reference op by op); false: no such
// table here. Weights repacked for the build's table are read by its kernels only.
int            ggml_backend_cpu_n_kernel_sets(void);
const char *   ggml_backend_cpu_kernel_set_name(int i);
bool           ggml_backend_cpu_set_kernels(ggml_backend_t backend_cpu, const char * isa);

// Host memory, aligned for the SIMD kernels.
ggml_backend_buffer_type_t ggml_backend_cpu_buffer_type(void);
// A buffer over memory the caller owns (a mapped file, an arena); freeing it frees nothing.
ggml_backend_buffer_t      ggml_backend_cpu_buffer_from_ptr(void * ptr, size_t size);
// Weights for the matrix products in the CPU's repacked layout: a whole-tensor
// ggml_backend_tensor_set of a matrix that ggml_cpu_can_repack stores it repacked (on huge pages
// where the kernel allows); such a tensor can then only be read by mul_mat and out_prod.
ggml_backend_buffer_type_t ggml_backend_cpu_repack_buffer_type(void);

#ifdef __cplusplus
}
#endif
