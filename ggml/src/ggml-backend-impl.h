// ggml-backend-impl.h - what a backend implements: the function tables behind ggml-backend.h.
// Optional entries may be NULL; ggml-backend.cpp supplies the default behaviour.
#pragma once

#include "ggml-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ggml_backend_buffer_type_i {
    const char *          (*get_name)(ggml_backend_buffer_type_t buft);
    ggml_backend_buffer_t (*alloc_buffer)(ggml_backend_buffer_type_t buft, size_t size);
    size_t                (*get_alignment)(ggml_backend_buffer_type_t buft);
    size_t                (*get_max_size)(ggml_backend_buffer_type_t buft);                              // optional: SIZE_MAX
    size_t                (*get_alloc_size)(ggml_backend_buffer_type_t buft, const struct ggml_tensor * t); // optional: ggml_nbytes
    bool                  (*is_host)(ggml_backend_buffer_type_t buft);                                   // optional: false
};

struct ggml_backend_buffer_type {
    struct ggml_backend_buffer_type_i iface;
    ggml_backend_dev_t device;
    void * context;
};

struct ggml_backend_buffer_i {
    void   (*free_buffer)(ggml_backend_buffer_t buffer);                                   // optional
    void * (*get_base)(ggml_backend_buffer_t buffer);
    enum ggml_status (*init_tensor)(ggml_backend_buffer_t buffer, struct ggml_tensor * t);  // optional
    void   (*memset_tensor)(ggml_backend_buffer_t buffer, struct ggml_tensor * t, uint8_t value, size_t offset, size_t size);
    void   (*set_tensor)(ggml_backend_buffer_t buffer, struct ggml_tensor * t, const void * data, size_t offset, size_t size);
    void   (*get_tensor)(ggml_backend_buffer_t buffer, const struct ggml_tensor * t, void * data, size_t offset, size_t size);
    // Copies src (in any buffer) into dst (in this buffer); false: the caller goes through host memory.
    bool   (*cpy_tensor)(ggml_backend_buffer_t buffer, const struct ggml_tensor * src, struct ggml_tensor * dst);  // optional
    void   (*clear)(ggml_backend_buffer_t buffer, uint8_t value);
    void   (*reset)(ggml_backend_buffer_t buffer);  // optional: forget per-tensor state
};

struct ggml_backend_buffer {
    struct ggml_backend_buffer_i iface;
    ggml_backend_buffer_type_t buft;
    void * context;
    size_t size;
    enum ggml_backend_buffer_usage usage;
};

// For backends: a buffer over their context (freed by iface.free_buffer).
ggml_backend_buffer_t ggml_backend_buffer_init(ggml_backend_buffer_type_t buft, struct ggml_backend_buffer_i iface,
                                               void * context, size_t size);

struct ggml_backend_i {
    const char * (*get_name)(ggml_backend_t backend);
    void         (*free)(ggml_backend_t backend);
    void         (*set_tensor_async)(ggml_backend_t backend, struct ggml_tensor * t, const void * data, size_t offset, size_t size);  // optional
    void         (*get_tensor_async)(ggml_backend_t backend, const struct ggml_tensor * t, void * data, size_t offset, size_t size);  // optional
    void         (*synchronize)(ggml_backend_t backend);  // optional
    enum ggml_status (*graph_compute)(ggml_backend_t backend, struct ggml_cgraph * cgraph);
};

struct ggml_backend {
    struct ggml_backend_i iface;
    ggml_backend_dev_t device;
    void * context;
};

struct ggml_backend_device_i {
    const char * (*get_name)(ggml_backend_dev_t dev);
    const char * (*get_description)(ggml_backend_dev_t dev);
    void         (*get_memory)(ggml_backend_dev_t dev, size_t * free, size_t * total);
    enum ggml_backend_dev_type (*get_type)(ggml_backend_dev_t dev);
    ggml_backend_t (*init_backend)(ggml_backend_dev_t dev, const char * params);
    ggml_backend_buffer_type_t (*get_buffer_type)(ggml_backend_dev_t dev);
    bool (*supports_op)(ggml_backend_dev_t dev, const struct ggml_tensor * op);
    bool (*supports_buft)(ggml_backend_dev_t dev, ggml_backend_buffer_type_t buft);
    bool (*offload_op)(ggml_backend_dev_t dev, const struct ggml_tensor * op);  // optional
    // optional: host memory the device copies to and from fastest (a GPU's page-locked memory)
    ggml_backend_buffer_type_t (*get_host_buffer_type)(ggml_backend_dev_t dev);
};

struct ggml_backend_device {
    struct ggml_backend_device_i iface;
    void * context;
};

// A backend's registry entry: its name, its devices, its extra functions by name.
struct ggml_backend_reg_i {
    const char *       (*get_name)(ggml_backend_reg_t reg);
    size_t             (*get_device_count)(ggml_backend_reg_t reg);
    ggml_backend_dev_t (*get_device)(ggml_backend_reg_t reg, size_t index);
    void *             (*get_proc_address)(ggml_backend_reg_t reg, const char * name);  // optional: NULL
};

struct ggml_backend_reg {
    struct ggml_backend_reg_i iface;
    void * context;
};

// The devices each backend of the build contributes (ggml-backend-reg.cpp lists them).
ggml_backend_dev_t ggml_backend_cpu_device(void);
#ifdef GGML_USE_CUDA
size_t             ggml_backend_cuda_device_count(void);
ggml_backend_dev_t ggml_backend_cuda_device(size_t index);
#endif

#ifdef __cplusplus
}
#endif
