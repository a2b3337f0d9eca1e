// ggml-backend.h - devices behind one interface: buffer types, buffers, backends, a scheduler.
//
// A buffer type says where memory comes from (host memory, a device's memory, the CPU's repacked
// weights); a buffer is one allocation of it and moves tensor data in and out; a backend computes
// graphs whose tensors live in buffers it can read. The scheduler splits one graph between
// several backends: each node runs where its weights live (or where the previous work ran), and
// tensors crossing from one backend to another are copied at the seams. The names and meanings
// are ggml's.
#pragma once

#include "ggml.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ggml_backend_buffer_type * ggml_backend_buffer_type_t;
typedef struct ggml_backend_buffer      * ggml_backend_buffer_t;
typedef struct ggml_backend             * ggml_backend_t;
typedef struct ggml_backend_device      * ggml_backend_dev_t;
typedef struct ggml_backend_sched       * ggml_backend_sched_t;
typedef struct ggml_backend_reg         * ggml_backend_reg_t;

// Called for graph nodes as the scheduler evaluates them (ask: whether the caller wants to see
// this node's data). llama_context_params.cb_eval has this type.
typedef bool (*ggml_backend_sched_eval_callback)(struct ggml_tensor * t, bool ask, void * user_data);


// ---- buffer types --------------------------------------------------------------------------
const char *          ggml_backend_buft_name(ggml_backend_buffer_type_t buft);
// NULL when the memory is not available (logged).
ggml_backend_buffer_t ggml_backend_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size);
size_t                ggml_backend_buft_get_alignment(ggml_backend_buffer_type_t buft);
size_t                ggml_backend_buft_get_max_size(ggml_backend_buffer_type_t buft);
size_t                ggml_backend_buft_get_alloc_size(ggml_backend_buffer_type_t buft, const struct ggml_tensor * tensor);
bool                  ggml_backend_buft_is_host(ggml_backend_buffer_type_t buft);  // data pointers are host memory
ggml_backend_dev_t    ggml_backend_buft_get_device(ggml_backend_buffer_type_t buft);

// ---- buffers -------------------------------------------------------------------------------
enum ggml_backend_buffer_usage {
    GGML_BACKEND_BUFFER_USAGE_ANY = 0,
    GGML_BACKEND_BUFFER_USAGE_WEIGHTS = 1,
    GGML_BACKEND_BUFFER_USAGE_COMPUTE = 2,
};

const char *               ggml_backend_buffer_name(ggml_backend_buffer_t buffer);
void                       ggml_backend_buffer_free(ggml_backend_buffer_t buffer);
void *                     ggml_backend_buffer_get_base(ggml_backend_buffer_t buffer);
size_t                     ggml_backend_buffer_get_size(ggml_backend_buffer_t buffer);
enum ggml_status           ggml_backend_buffer_init_tensor(ggml_backend_buffer_t buffer, struct ggml_tensor * tensor);
size_t                     ggml_backend_buffer_get_alignment(ggml_backend_buffer_t buffer);
size_t                     ggml_backend_buffer_get_max_size(ggml_backend_buffer_t buffer);
size_t                     ggml_backend_buffer_get_alloc_size(ggml_backend_buffer_t buffer, const struct ggml_tensor * tensor);
void                       ggml_backend_buffer_clear(ggml_backend_buffer_t buffer, uint8_t value);
bool                       ggml_backend_buffer_is_host(ggml_backend_buffer_t buffer);
void                       ggml_backend_buffer_set_usage(ggml_backend_buffer_t buffer, enum ggml_backend_buffer_usage usage);
enum ggml_backend_buffer_usage ggml_backend_buffer_get_usage(ggml_backend_buffer_t buffer);
ggml_backend_buffer_type_t ggml_backend_buffer_get_type(ggml_backend_buffer_t buffer);
void                       ggml_backend_buffer_reset(ggml_backend_buffer_t buffer);

// ---- tensor data, through the tensor's buffer (host or device) ------------------------------
// offset and size are bytes within the tensor's data; the tensor must have a buffer (or, for
// tensors of plain host memory without one, data).
void ggml_backend_tensor_set(struct ggml_tensor * tensor, const void * data, size_t offset, size_t size);
void ggml_backend_tensor_get(const struct ggml_tensor * tensor, void * data, size_t offset, size_t size);
void ggml_backend_tensor_memset(struct ggml_tensor * tensor, uint8_t value, size_t offset, size_t size);
// Copies src's data into dst (same layout), between any two buffers.
void ggml_backend_tensor_copy(struct ggml_tensor * src, struct ggml_tensor * dst);
// Places tensor at addr inside buffer (addr from ggml_backend_buffer_get_base + offset).
enum ggml_status ggml_backend_tensor_alloc(ggml_backend_buffer_t buffer, struct ggml_tensor * tensor, void * addr);
// Gives a view the data pointer and buffer of its view_src.
enum ggml_status ggml_backend_view_init(struct ggml_tensor * tensor);

// Allocates one buffer of buft for every tensor of ctx without data (views point into their
// sources) and returns it, or NULL when there is nothing to allocate or no memory.
ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors_from_buft(struct ggml_context * ctx, ggml_backend_buffer_type_t buft);
ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors(struct ggml_context * ctx, ggml_backend_t backend);

// ---- devices -------------------------------------------------------------------------------
enum ggml_backend_dev_type {
    GGML_BACKEND_DEVICE_TYPE_CPU,
    GGML_BACKEND_DEVICE_TYPE_GPU,
    GGML_BACKEND_DEVICE_TYPE_ACCEL,
};

// The devices of this build: the GPUs the build has and the machine shows, then those registered
// with ggml_backend_device_register, the CPU last (always present).
size_t                     ggml_backend_dev_count(void);
ggml_backend_dev_t         ggml_backend_dev_get(size_t index);
ggml_backend_dev_t         ggml_backend_dev_by_type(enum ggml_backend_dev_type type);  // the first one
const char *               ggml_backend_dev_name(ggml_backend_dev_t device);
const char *               ggml_backend_dev_description(ggml_backend_dev_t device);
void                       ggml_backend_dev_memory(ggml_backend_dev_t device, size_t * free, size_t * total);
enum ggml_backend_dev_type ggml_backend_dev_type(ggml_backend_dev_t device);
ggml_backend_t             ggml_backend_dev_init(ggml_backend_dev_t device, const char * params);
ggml_backend_buffer_type_t ggml_backend_dev_buffer_type(ggml_backend_dev_t device);
// Host memory the device copies to and from fastest (a GPU's page-locked memory), for the CPU's
// buffers that feed it; NULL where the device has none.
ggml_backend_buffer_type_t ggml_backend_dev_host_buffer_type(ggml_backend_dev_t device);
bool                       ggml_backend_dev_supports_op(ggml_backend_dev_t device, const struct ggml_tensor * op);
bool                       ggml_backend_dev_supports_buft(ggml_backend_dev_t device, ggml_backend_buffer_type_t buft);
// Adds a device (a backend linked into the program, or a test's simulated one) before the CPU.
void                       ggml_backend_device_register(ggml_backend_dev_t device);
// The first device of the type, initialised (NULL if there is none).
ggml_backend_t             ggml_backend_init_by_type(enum ggml_backend_dev_type type, const char * params);

// What ggml_backend_dev_get_props reports of a device.
struct ggml_backend_dev_caps {
    bool async;                 // set/get_tensor_async and compute_async may return before the work ends
    bool host_buffer;           // ggml_backend_dev_host_buffer_type gives one
    bool buffer_from_host_ptr;  // ggml_backend_dev_buffer_from_host_ptr works
    bool events;                // events (none in this build)
};

struct ggml_backend_dev_props {
    const char * name;
    const char * description;
    size_t memory_free;
    size_t memory_total;
    enum ggml_backend_dev_type type;
    struct ggml_backend_dev_caps caps;
};

void                       ggml_backend_dev_get_props(ggml_backend_dev_t device, struct ggml_backend_dev_props * props);
ggml_backend_reg_t         ggml_backend_dev_backend_reg(ggml_backend_dev_t device);
// A buffer over host memory the caller owns (the CPU only; NULL elsewhere).
ggml_backend_buffer_t      ggml_backend_dev_buffer_from_host_ptr(ggml_backend_dev_t device, void * ptr, size_t size, size_t max_tensor_size);
bool                       ggml_backend_dev_offload_op(ggml_backend_dev_t device, const struct ggml_tensor * op);

// ---- the backend registry ------------------------------------------------------------------
// One entry per backend of the build ("CUDA" when built with it and a GPU is present, then
// "CPU"; a device added with ggml_backend_device_register gets an entry of its own, named as the
// device), each with its devices and its extra functions by name (get_proc_address: NULL for a
// name it does not have). Every backend is linked in: loading backends from dynamic libraries is
// not supported (ggml_backend_load returns NULL with a message, ggml_backend_load_all and
// _from_path have nothing to do).
const char *       ggml_backend_reg_name(ggml_backend_reg_t reg);
size_t             ggml_backend_reg_dev_count(ggml_backend_reg_t reg);
ggml_backend_dev_t ggml_backend_reg_dev_get(ggml_backend_reg_t reg, size_t index);
void *             ggml_backend_reg_get_proc_address(ggml_backend_reg_t reg, const char * name);

// The types of the functions a registry entry may give by name.
typedef ggml_backend_buffer_type_t   (*ggml_backend_split_buffer_type_t)(int main_device, const float * tensor_split);
typedef void                         (*ggml_backend_set_n_threads_t)(ggml_backend_t backend, int n_threads);
typedef ggml_backend_buffer_type_t * (*ggml_backend_dev_get_extra_bufts_t)(ggml_backend_dev_t device);  // NULL-terminated
typedef void                         (*ggml_backend_set_abort_callback_t)(ggml_backend_t backend, ggml_abort_callback abort_callback, void * abort_callback_data);
struct ggml_backend_feature {
    const char * name;
    const char * value;
};
typedef struct ggml_backend_feature * (*ggml_backend_get_features_t)(ggml_backend_reg_t reg);  // ends with {NULL, NULL}

size_t             ggml_backend_reg_count(void);
ggml_backend_reg_t ggml_backend_reg_get(size_t index);
ggml_backend_reg_t ggml_backend_reg_by_name(const char * name);  // case-insensitive; NULL if absent

ggml_backend_dev_t ggml_backend_dev_by_name(const char * name);  // case-insensitive; NULL if absent
// = ggml_backend_dev_init(ggml_backend_dev_by_name(name), params), NULL if there is no such device
ggml_backend_t     ggml_backend_init_by_name(const char * name, const char * params);
// The first GPU, else the CPU.
ggml_backend_t     ggml_backend_init_best(void);

ggml_backend_reg_t ggml_backend_load(const char * path);
void               ggml_backend_unload(ggml_backend_reg_t reg);
void               ggml_backend_load_all(void);
void               ggml_backend_load_all_from_path(const char * dir_path);

// ---- backends ------------------------------------------------------------------------------
const char *               ggml_backend_name(ggml_backend_t backend);
void                       ggml_backend_free(ggml_backend_t backend);
ggml_backend_dev_t         ggml_backend_get_device(ggml_backend_t backend);
ggml_backend_buffer_type_t ggml_backend_get_default_buffer_type(ggml_backend_t backend);
ggml_backend_buffer_t      ggml_backend_alloc_buffer(ggml_backend_t backend, size_t size);
size_t                     ggml_backend_get_alignment(ggml_backend_t backend);
size_t                     ggml_backend_get_max_size(ggml_backend_t backend);

void ggml_backend_tensor_set_async(ggml_backend_t backend, struct ggml_tensor * tensor, const void * data, size_t offset, size_t size);
void ggml_backend_tensor_get_async(ggml_backend_t backend, const struct ggml_tensor * tensor, void * data, size_t offset, size_t size);
void ggml_backend_synchronize(ggml_backend_t backend);

enum ggml_status ggml_backend_graph_compute(ggml_backend_t backend, struct ggml_cgraph * cgraph);        // waits
enum ggml_status ggml_backend_graph_compute_async(ggml_backend_t backend, struct ggml_cgraph * cgraph);  // may return before it ends
bool ggml_backend_supports_op(ggml_backend_t backend, const struct ggml_tensor * op);
bool ggml_backend_supports_buft(ggml_backend_t backend, ggml_backend_buffer_type_t buft);
// The backend would rather run op itself even when its weights live elsewhere (large batches).
bool ggml_backend_offload_op(ggml_backend_t backend, const struct ggml_tensor * op);

// ---- the scheduler -------------------------------------------------------------------------
// backends in order of preference, the CPU last (it runs whatever the others do not support).
// bufts: the compute buffer type per backend (NULL: each backend's default). graph_size: the
// most nodes a graph will have. parallel and op_offload are accepted for ggml's signature; the
// scheduler computes one graph at a time and does not move weights.
ggml_backend_sched_t ggml_backend_sched_new(ggml_backend_t * backends, ggml_backend_buffer_type_t * bufts, int n_backends,
                                            size_t graph_size, bool parallel, bool op_offload);
void                 ggml_backend_sched_free(ggml_backend_sched_t sched);
// Sizes the compute buffers for the largest graph that will be computed (optional).
bool                 ggml_backend_sched_reserve(ggml_backend_sched_t sched, struct ggml_cgraph * measure_graph);
int                  ggml_backend_sched_get_n_backends(ggml_backend_sched_t sched);
ggml_backend_t       ggml_backend_sched_get_backend(ggml_backend_sched_t sched, int i);
int                  ggml_backend_sched_get_n_splits(ggml_backend_sched_t sched);  // of the last graph
int                  ggml_backend_sched_get_n_copies(ggml_backend_sched_t sched);  // tensors copied at seams
ggml_backend_buffer_type_t ggml_backend_sched_get_buffer_type(ggml_backend_sched_t sched, ggml_backend_t backend);
size_t               ggml_backend_sched_get_buffer_size(ggml_backend_sched_t sched, ggml_backend_t backend);
// Pins a node to a backend (before ggml_backend_sched_alloc_graph).
void                 ggml_backend_sched_set_tensor_backend(ggml_backend_sched_t sched, struct ggml_tensor * node, ggml_backend_t backend);
ggml_backend_t       ggml_backend_sched_get_tensor_backend(ggml_backend_sched_t sched, struct ggml_tensor * node);
// Assigns every node a backend, splits the graph and allocates it (inputs can be set after).
bool                 ggml_backend_sched_alloc_graph(ggml_backend_sched_t sched, struct ggml_cgraph * graph);
enum ggml_status     ggml_backend_sched_graph_compute(ggml_backend_sched_t sched, struct ggml_cgraph * graph);
enum ggml_status     ggml_backend_sched_graph_compute_async(ggml_backend_sched_t sched, struct ggml_cgraph * graph);
void                 ggml_backend_sched_synchronize(ggml_backend_sched_t sched);
// Forgets the last graph's assignments (the next graph may differ).
void                 ggml_backend_sched_reset(ggml_backend_sched_t sched);
// Calls callback for each node as the graph is computed: first (ask true) whether the caller
// wants to see it; the nodes up to the first wanted one are computed, then the callback gets that
// node again (ask false) with its data ready (the backend synchronized); returning false then
// cancels the rest of the graph (ggml_backend_sched_graph_compute returns GGML_STATUS_ABORTED).
// NULL: none (the default).
void                 ggml_backend_sched_set_eval_callback(ggml_backend_sched_t sched, ggml_backend_sched_eval_callback callback,
                                                          void * user_data);

#ifdef __cplusplus
}
#endif
