// ggml-cuda.h - the CUDA backend (builds with -DGGML_CUDA=ON): one device per visible GPU, its
// memory as a buffer type, and a backend object per device that computes graphs on its own
// stream. Devices are also listed by ggml_backend_dev_count / ggml_backend_dev_get, before the
// CPU; ops the kernels do not cover are left to the CPU by the scheduler (supports_op).
#pragma once

#include "ggml-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GGML_CUDA_NAME "CUDA"

// GPUs the CUDA runtime shows (0 without a driver or a device).
int                        ggml_backend_cuda_get_device_count(void);
void                       ggml_backend_cuda_get_device_description(int device, char * description, size_t size);
void                       ggml_backend_cuda_get_device_memory(int device, size_t * free, size_t * total);
// A backend on GPU `device` (NULL when there is no such device).
ggml_backend_t             ggml_backend_cuda_init(int device);
bool                       ggml_backend_is_cuda(ggml_backend_t backend);
// Device memory of GPU `device` (NULL when there is no such device).
ggml_backend_buffer_type_t ggml_backend_cuda_buffer_type(int device);
// Page-locked host memory: faster copies to and from the GPU; the CPU reads it as any host buffer.
ggml_backend_buffer_type_t ggml_backend_cuda_host_buffer_type(void);

#ifdef __cplusplus
}
#endif
