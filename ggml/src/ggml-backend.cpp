// ggml-backend.cpp - the calls of ggml-backend.h that dispatch to a backend's function tables,
// tensor data movement between buffers, and the list of the build's devices.
#include "ggml-backend-impl.h"
#include "ggml-impl.h"

#include <stdint.h>
#include <string.h>

#include <strings.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <string>
#include <vector>

#include "ggml-cpu.h"

// ---- buffer types --------------------------------------------------------------------------
const char * ggml_backend_buft_name(ggml_backend_buffer_type_t buft) { return buft->iface.get_name(buft); }

ggml_backend_buffer_t ggml_backend_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size) {
    return buft->iface.alloc_buffer(buft, size);
}

size_t ggml_backend_buft_get_alignment(ggml_backend_buffer_type_t buft) { return buft->iface.get_alignment(buft); }

size_t ggml_backend_buft_get_max_size(ggml_backend_buffer_type_t buft) {
    return buft->iface.get_max_size ? buft->iface.get_max_size(buft) : SIZE_MAX;
}

size_t ggml_backend_buft_get_alloc_size(ggml_backend_buffer_type_t buft, const struct ggml_tensor * tensor) {
    return buft->iface.get_alloc_size ? buft->iface.get_alloc_size(buft, tensor) : ggml_nbytes(tensor);
}

bool ggml_backend_buft_is_host(ggml_backend_buffer_type_t buft) { return buft->iface.is_host && buft->iface.is_host(buft); }

ggml_backend_dev_t ggml_backend_buft_get_device(ggml_backend_buffer_type_t buft) { return buft->device; }

// ---- buffers -------------------------------------------------------------------------------
ggml_backend_buffer_t ggml_backend_buffer_init(ggml_backend_buffer_type_t buft, struct ggml_backend_buffer_i iface,
                                               void * context, size_t size) {
    return new ggml_backend_buffer{ iface, buft, context, size, GGML_BACKEND_BUFFER_USAGE_ANY };
}

const char * ggml_backend_buffer_name(ggml_backend_buffer_t buffer) { return ggml_backend_buft_name(buffer->buft); }

void ggml_backend_buffer_free(ggml_backend_buffer_t buffer) {
    if (!buffer) return;
    if (buffer->iface.free_buffer) buffer->iface.free_buffer(buffer);
    delete buffer;
}

void * ggml_backend_buffer_get_base(ggml_backend_buffer_t buffer) {
    return buffer->size == 0 ? nullptr : buffer->iface.get_base(buffer);
}

size_t ggml_backend_buffer_get_size(ggml_backend_buffer_t buffer) { return buffer->size; }

enum ggml_status ggml_backend_buffer_init_tensor(ggml_backend_buffer_t buffer, struct ggml_tensor * tensor) {
    return buffer->iface.init_tensor ? buffer->iface.init_tensor(buffer, tensor) : GGML_STATUS_SUCCESS;
}

size_t ggml_backend_buffer_get_alignment(ggml_backend_buffer_t buffer) { return ggml_backend_buft_get_alignment(buffer->buft); }
size_t ggml_backend_buffer_get_max_size(ggml_backend_buffer_t buffer) { return ggml_backend_buft_get_max_size(buffer->buft); }

size_t ggml_backend_buffer_get_alloc_size(ggml_backend_buffer_t buffer, const struct ggml_tensor * tensor) {
    return ggml_backend_buft_get_alloc_size(buffer->buft, tensor);
}

void ggml_backend_buffer_clear(ggml_backend_buffer_t buffer, uint8_t value) {
    if (buffer->size > 0) buffer->iface.clear(buffer, value);
}

bool ggml_backend_buffer_is_host(ggml_backend_buffer_t buffer) { return ggml_backend_buft_is_host(buffer->buft); }

void ggml_backend_buffer_set_usage(ggml_backend_buffer_t buffer, enum ggml_backend_buffer_usage usage) { buffer->usage = usage; }
enum ggml_backend_buffer_usage ggml_backend_buffer_get_usage(ggml_backend_buffer_t buffer) { return buffer->usage; }
ggml_backend_buffer_type_t ggml_backend_buffer_get_type(ggml_backend_buffer_t buffer) { return buffer->buft; }

void ggml_backend_buffer_reset(ggml_backend_buffer_t buffer) {
    if (buffer->iface.reset) buffer->iface.reset(buffer);
}

// ---- tensor data ---------------------------------------------------------------------------
static ggml_backend_buffer_t buffer_of(const ggml_tensor * t) {
    return t->view_src && t->view_src->buffer ? t->view_src->buffer : t->buffer;
}

static void check_range(const ggml_tensor * t, size_t offset, size_t size, const char * what) {
    GGML_ASSERT(t->data != nullptr && "the tensor has no data (not allocated)");
    if (offset + size < offset || offset + size > ggml_nbytes(t)) {
        ggml_abort(__FILE__, __LINE__, "%s: bytes [%zu, %zu) are outside tensor '%s' (%zu bytes)", what, offset,
                   offset + size, t->name, ggml_nbytes(t));
    }
}

void ggml_backend_tensor_set(struct ggml_tensor * tensor, const void * data, size_t offset, size_t size) {
    if (size == 0) return;
    check_range(tensor, offset, size, "ggml_backend_tensor_set");
    ggml_backend_buffer_t buf = buffer_of(tensor);
    if (!buf) {
        memcpy((char *) tensor->data + offset, data, size);
        return;
    }
    buf->iface.set_tensor(buf, tensor, data, offset, size);
}

void ggml_backend_tensor_get(const struct ggml_tensor * tensor, void * data, size_t offset, size_t size) {
    if (size == 0) return;
    check_range(tensor, offset, size, "ggml_backend_tensor_get");
    ggml_backend_buffer_t buf = buffer_of(tensor);
    if (!buf) {
        memcpy(data, (const char *) tensor->data + offset, size);
        return;
    }
    buf->iface.get_tensor(buf, tensor, data, offset, size);
}

void ggml_backend_tensor_memset(struct ggml_tensor * tensor, uint8_t value, size_t offset, size_t size) {
    if (size == 0) return;
    check_range(tensor, offset, size, "ggml_backend_tensor_memset");
    ggml_backend_buffer_t buf = buffer_of(tensor);
    if (!buf) {
        memset((char *) tensor->data + offset, value, size);
        return;
    }
    buf->iface.memset_tensor(buf, tensor, value, offset, size);
}

void ggml_backend_tensor_copy(struct ggml_tensor * src, struct ggml_tensor * dst) {
    GGML_ASSERT(ggml_nbytes(src) == ggml_nbytes(dst) && "ggml_backend_tensor_copy: the tensors differ in size");
    if (src == dst) return;
    const size_t n = ggml_nbytes(src);
    ggml_backend_buffer_t sb = buffer_of(src), db = buffer_of(dst);
    const bool src_host = !sb || ggml_backend_buffer_is_host(sb);
    const bool dst_host = !db || ggml_backend_buffer_is_host(db);
    if (src_host) {
        ggml_backend_tensor_set(dst, src->data, 0, n);
    } else if (dst_host) {
        ggml_backend_tensor_get(src, dst->data, 0, n);
    } else if (!(db->iface.cpy_tensor && db->iface.cpy_tensor(db, src, dst))) {
        std::vector<uint8_t> staging(n);  // device to another device through host memory
        ggml_backend_tensor_get(src, staging.data(), 0, n);
        ggml_backend_tensor_set(dst, staging.data(), 0, n);
    }
}

enum ggml_status ggml_backend_tensor_alloc(ggml_backend_buffer_t buffer, struct ggml_tensor * tensor, void * addr) {
    GGML_ASSERT(tensor->data == nullptr && tensor->view_src == nullptr);  // a stale buffer (data reset) is replaced
    const char * base = (const char *) ggml_backend_buffer_get_base(buffer);
    GGML_ASSERT((const char *) addr >= base &&
                (const char *) addr + ggml_backend_buffer_get_alloc_size(buffer, tensor) <= base + buffer->size);
    tensor->buffer = buffer;
    tensor->data = addr;
    return ggml_backend_buffer_init_tensor(buffer, tensor);
}

enum ggml_status ggml_backend_view_init(struct ggml_tensor * tensor) {
    GGML_ASSERT(tensor->view_src != nullptr && tensor->view_src->data != nullptr);
    tensor->buffer = tensor->view_src->buffer;
    tensor->data = (char *) tensor->view_src->data + tensor->view_offs;
    return tensor->buffer ? ggml_backend_buffer_init_tensor(tensor->buffer, tensor) : GGML_STATUS_SUCCESS;
}

static size_t align_to(size_t x, size_t a) { return (x + a - 1) / a * a; }

ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors_from_buft(struct ggml_context * ctx, ggml_backend_buffer_type_t buft) {
    const size_t align = ggml_backend_buft_get_alignment(buft);
    size_t total = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (t->data == nullptr && t->view_src == nullptr) total += align_to(ggml_backend_buft_get_alloc_size(buft, t), align);
    }
    if (total == 0) return nullptr;
    ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(buft, total);
    if (!buf) return nullptr;
    char * base = (char *) ggml_backend_buffer_get_base(buf);
    size_t off = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (t->data != nullptr || t->view_src != nullptr) continue;
        ggml_backend_tensor_alloc(buf, t, base + off);
        off += align_to(ggml_backend_buft_get_alloc_size(buft, t), align);
    }
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (t->view_src && t->data == nullptr && t->view_src->data) ggml_backend_view_init(t);
    }
    return buf;
}

ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors(struct ggml_context * ctx, ggml_backend_t backend) {
    return ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_get_default_buffer_type(backend));
}

// ---- devices -------------------------------------------------------------------------------
// The GPUs of this build first (in the order the machine shows them), devices registered at run
// time after them, the CPU last: the order of preference of the runtime's layer placement.
static std::vector<ggml_backend_dev_t> & devices() {
    static std::vector<ggml_backend_dev_t> list = [] {
        std::vector<ggml_backend_dev_t> v;
#ifdef GGML_USE_CUDA
        for (size_t i = 0; i < ggml_backend_cuda_device_count(); i++) v.push_back(ggml_backend_cuda_device(i));
#endif
        v.push_back(ggml_backend_cpu_device());
        return v;
    }();
    return list;
}

// ---- the registry ----------------------------------------------------------------------------
// An entry per backend: CUDA's (when built with it), those of devices registered at run time (one
// each, named as the device), the CPU's last, in the order of devices().
namespace {
struct single_device_reg {
    std::string name;
    ggml_backend_dev_t device;
};
const char * single_reg_name(ggml_backend_reg_t reg) { return ((single_device_reg *) reg->context)->name.c_str(); }
size_t single_reg_device_count(ggml_backend_reg_t) { return 1; }
ggml_backend_dev_t single_reg_device(ggml_backend_reg_t reg, size_t index) {
    return index == 0 ? ((single_device_reg *) reg->context)->device : nullptr;
}

#ifdef GGML_USE_CUDA
const char * cuda_reg_name(ggml_backend_reg_t) { return "CUDA"; }
size_t cuda_reg_device_count(ggml_backend_reg_t) { return ggml_backend_cuda_device_count(); }
ggml_backend_dev_t cuda_reg_device(ggml_backend_reg_t, size_t index) {
    return index < ggml_backend_cuda_device_count() ? ggml_backend_cuda_device(index) : nullptr;
}
ggml_backend_reg cuda_reg = { { cuda_reg_name, cuda_reg_device_count, cuda_reg_device, nullptr }, nullptr };
#endif
}  // namespace

static std::vector<ggml_backend_reg_t> & registry() {
    static std::vector<ggml_backend_reg_t> list = [] {
        std::vector<ggml_backend_reg_t> v;
#ifdef GGML_USE_CUDA
        v.push_back(&cuda_reg);
#endif
        v.push_back(ggml_backend_cpu_reg());
        return v;
    }();
    return list;
}

void ggml_backend_device_register(ggml_backend_dev_t device) {
    std::vector<ggml_backend_dev_t> & v = devices();
    if (!device || std::find(v.begin(), v.end(), device) != v.end()) return;
    v.insert(v.end() - 1, device);  // before the CPU
    static std::deque<single_device_reg> contexts;  // entries live as long as the program
    static std::deque<ggml_backend_reg> regs;
    contexts.push_back({ ggml_backend_dev_name(device), device });
    regs.push_back({ { single_reg_name, single_reg_device_count, single_reg_device, nullptr }, &contexts.back() });
    std::vector<ggml_backend_reg_t> & r = registry();
    r.insert(r.end() - 1, &regs.back());
}

size_t ggml_backend_reg_count(void) { return registry().size(); }
ggml_backend_reg_t ggml_backend_reg_get(size_t index) { return index < registry().size() ? registry()[index] : nullptr; }

ggml_backend_reg_t ggml_backend_reg_by_name(const char * name) {
    for (ggml_backend_reg_t r : registry()) {
        if (name && strcasecmp(ggml_backend_reg_name(r), name) == 0) return r;
    }
    return nullptr;
}

const char * ggml_backend_reg_name(ggml_backend_reg_t reg) { return reg->iface.get_name(reg); }
size_t ggml_backend_reg_dev_count(ggml_backend_reg_t reg) { return reg->iface.get_device_count(reg); }
ggml_backend_dev_t ggml_backend_reg_dev_get(ggml_backend_reg_t reg, size_t index) { return reg->iface.get_device(reg, index); }

void * ggml_backend_reg_get_proc_address(ggml_backend_reg_t reg, const char * name) {
    return reg && reg->iface.get_proc_address ? reg->iface.get_proc_address(reg, name) : nullptr;
}

ggml_backend_reg_t ggml_backend_dev_backend_reg(ggml_backend_dev_t device) {
    for (ggml_backend_reg_t r : registry()) {
        for (size_t i = 0; i < ggml_backend_reg_dev_count(r); i++) {
            if (ggml_backend_reg_dev_get(r, i) == device) return r;
        }
    }
    return nullptr;
}

ggml_backend_reg_t ggml_backend_load(const char * path) {
    ggml_log_error("ggml_backend_load: %s: loading backends from dynamic libraries is not supported (this build's backends are linked in)\n",
                   path ? path : "(null)");
    return nullptr;
}

void ggml_backend_unload(ggml_backend_reg_t reg) {
    ggml_log_error("ggml_backend_unload: %s is linked in, not loaded: not unloaded\n", reg ? ggml_backend_reg_name(reg) : "(null)");
}

// Every backend of the build is linked in and registered: nothing to load.
void ggml_backend_load_all(void) {}
void ggml_backend_load_all_from_path(const char * dir_path) { (void) dir_path; }

size_t ggml_backend_dev_count(void) { return devices().size(); }

ggml_backend_dev_t ggml_backend_dev_get(size_t index) { return index < devices().size() ? devices()[index] : nullptr; }

ggml_backend_dev_t ggml_backend_dev_by_type(enum ggml_backend_dev_type type) {
    for (ggml_backend_dev_t d : devices()) {
        if (ggml_backend_dev_type(d) == type) return d;
    }
    return nullptr;
}

const char * ggml_backend_dev_name(ggml_backend_dev_t device) { return device->iface.get_name(device); }
const char * ggml_backend_dev_description(ggml_backend_dev_t device) { return device->iface.get_description(device); }
void ggml_backend_dev_memory(ggml_backend_dev_t device, size_t * free, size_t * total) { device->iface.get_memory(device, free, total); }
enum ggml_backend_dev_type ggml_backend_dev_type(ggml_backend_dev_t device) { return device->iface.get_type(device); }
ggml_backend_t ggml_backend_dev_init(ggml_backend_dev_t device, const char * params) { return device->iface.init_backend(device, params); }
ggml_backend_buffer_type_t ggml_backend_dev_buffer_type(ggml_backend_dev_t device) { return device->iface.get_buffer_type(device); }
ggml_backend_buffer_type_t ggml_backend_dev_host_buffer_type(ggml_backend_dev_t device) {
    return device && device->iface.get_host_buffer_type ? device->iface.get_host_buffer_type(device) : nullptr;
}
bool ggml_backend_dev_supports_op(ggml_backend_dev_t device, const struct ggml_tensor * op) { return device->iface.supports_op(device, op); }
bool ggml_backend_dev_supports_buft(ggml_backend_dev_t device, ggml_backend_buffer_type_t buft) {
    return device->iface.supports_buft(device, buft);
}

ggml_backend_dev_t ggml_backend_dev_by_name(const char * name) {
    for (ggml_backend_dev_t d : devices()) {
        if (name && strcasecmp(ggml_backend_dev_name(d), name) == 0) return d;
    }
    return nullptr;
}

void ggml_backend_dev_get_props(ggml_backend_dev_t device, struct ggml_backend_dev_props * props) {
    memset(props, 0, sizeof(*props));
    props->name = ggml_backend_dev_name(device);
    props->description = ggml_backend_dev_description(device);
    ggml_backend_dev_memory(device, &props->memory_free, &props->memory_total);
    props->type = ggml_backend_dev_type(device);
    const bool cpu = device == ggml_backend_cpu_device();
    props->caps.async = !cpu && props->type == GGML_BACKEND_DEVICE_TYPE_GPU;  // a GPU's copies and computes run on its stream
    props->caps.host_buffer = ggml_backend_dev_host_buffer_type(device) != nullptr;
    props->caps.buffer_from_host_ptr = cpu;
    props->caps.events = false;
}

ggml_backend_buffer_t ggml_backend_dev_buffer_from_host_ptr(ggml_backend_dev_t device, void * ptr, size_t size, size_t max_tensor_size) {
    (void) max_tensor_size;
    if (device != ggml_backend_cpu_device()) {
        ggml_log_error("ggml_backend_dev_buffer_from_host_ptr: %s cannot use host memory as its buffer (not supported)\n",
                       ggml_backend_dev_name(device));
        return nullptr;
    }
    return ggml_backend_cpu_buffer_from_ptr(ptr, size);
}

bool ggml_backend_dev_offload_op(ggml_backend_dev_t device, const struct ggml_tensor * op) {
    return device->iface.offload_op && device->iface.offload_op(device, op);
}

ggml_backend_t ggml_backend_init_by_name(const char * name, const char * params) {
    ggml_backend_dev_t d = ggml_backend_dev_by_name(name);
    return d ? ggml_backend_dev_init(d, params) : nullptr;
}

ggml_backend_t ggml_backend_init_best(void) {
    ggml_backend_dev_t d = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_GPU);
    if (!d) d = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    return d ? ggml_backend_dev_init(d, nullptr) : nullptr;
}

ggml_backend_t ggml_backend_init_by_type(enum ggml_backend_dev_type type, const char * params) {
    ggml_backend_dev_t d = ggml_backend_dev_by_type(type);
    return d ? ggml_backend_dev_init(d, params) : nullptr;
}

// ---- backends ------------------------------------------------------------------------------
const char * ggml_backend_name(ggml_backend_t backend) { return backend->iface.get_name(backend); }

void ggml_backend_free(ggml_backend_t backend) {
    if (backend) backend->iface.free(backend);
}

ggml_backend_dev_t ggml_backend_get_device(ggml_backend_t backend) { return backend->device; }

ggml_backend_buffer_type_t ggml_backend_get_default_buffer_type(ggml_backend_t backend) {
    return ggml_backend_dev_buffer_type(backend->device);
}

ggml_backend_buffer_t ggml_backend_alloc_buffer(ggml_backend_t backend, size_t size) {
    return ggml_backend_buft_alloc_buffer(ggml_backend_get_default_buffer_type(backend), size);
}

size_t ggml_backend_get_alignment(ggml_backend_t backend) { return ggml_backend_buft_get_alignment(ggml_backend_get_default_buffer_type(backend)); }
size_t ggml_backend_get_max_size(ggml_backend_t backend) { return ggml_backend_buft_get_max_size(ggml_backend_get_default_buffer_type(backend)); }

void ggml_backend_tensor_set_async(ggml_backend_t backend, struct ggml_tensor * tensor, const void * data, size_t offset, size_t size) {
    if (backend->iface.set_tensor_async) {
        check_range(tensor, offset, size, "ggml_backend_tensor_set_async");
        backend->iface.set_tensor_async(backend, tensor, data, offset, size);
    } else {
        ggml_backend_tensor_set(tensor, data, offset, size);
    }
}

void ggml_backend_tensor_get_async(ggml_backend_t backend, const struct ggml_tensor * tensor, void * data, size_t offset, size_t size) {
    if (backend->iface.get_tensor_async) {
        check_range(tensor, offset, size, "ggml_backend_tensor_get_async");
        backend->iface.get_tensor_async(backend, tensor, data, offset, size);
    } else {
        ggml_backend_tensor_get(tensor, data, offset, size);
    }
}

void ggml_backend_synchronize(ggml_backend_t backend) {
    if (backend->iface.synchronize) backend->iface.synchronize(backend);
}

enum ggml_status ggml_backend_graph_compute_async(ggml_backend_t backend, struct ggml_cgraph * cgraph) {
    return backend->iface.graph_compute(backend, cgraph);
}

enum ggml_status ggml_backend_graph_compute(ggml_backend_t backend, struct ggml_cgraph * cgraph) {
    const enum ggml_status st = ggml_backend_graph_compute_async(backend, cgraph);
    ggml_backend_synchronize(backend);
    return st;
}

bool ggml_backend_supports_op(ggml_backend_t backend, const struct ggml_tensor * op) {
    return ggml_backend_dev_supports_op(backend->device, op);
}

bool ggml_backend_supports_buft(ggml_backend_t backend, ggml_backend_buffer_type_t buft) {
    return ggml_backend_dev_supports_buft(backend->device, buft);
}

bool ggml_backend_offload_op(ggml_backend_t backend, const struct ggml_tensor * op) {
    return backend->device->iface.offload_op && backend->device->iface.offload_op(backend->device, op);
}

// ---- the clock -----------------------------------------------------------------------------
void ggml_time_init(void) {}

int64_t ggml_time_us(void) {
    using namespace std::chrono;
    return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}

int64_t ggml_time_ms(void) { return ggml_time_us() / 1000; }
