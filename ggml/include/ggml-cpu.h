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
