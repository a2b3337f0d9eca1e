// backend.cpp - the CPU behind ggml-backend.h: its buffer types (host memory, repacked weights),
// its device and its backend object, which owns a thread pool and a work buffer.
#include "ggml-cpu.h"
#include "ggml-backend-impl.h"
#include "ggml-impl.h"
#include "kernels.h"
#include "quant-repack.h"
#include "threadpool.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <memory>
#include <thread>
#include <vector>

const ggml_mm_type_kernels * ggml_quant_mm_kernels(enum ggml_type type);  // quant-matmul.cpp

namespace {

// ---- host buffers --------------------------------------------------------------------------
struct host_buffer {
    void * base;
    size_t size;
    enum { OWNED_MALLOC, OWNED_MMAP, BORROWED } kind;
};

void * host_get_base(ggml_backend_buffer_t b) { return ((host_buffer *) b->context)->base; }

void host_free(ggml_backend_buffer_t b) {
    host_buffer * hb = (host_buffer *) b->context;
    if (hb->kind == host_buffer::OWNED_MALLOC) free(hb->base);
    if (hb->kind == host_buffer::OWNED_MMAP) munmap(hb->base, hb->size);
    delete hb;
}

void host_memset_tensor(ggml_backend_buffer_t, ggml_tensor * t, uint8_t value, size_t offset, size_t size) {
    memset((char *) t->data + offset, value, size);
}

void host_set_tensor(ggml_backend_buffer_t, ggml_tensor * t, const void * data, size_t offset, size_t size) {
    memcpy((char *) t->data + offset, data, size);
}

void host_get_tensor(ggml_backend_buffer_t, const ggml_tensor * t, void * data, size_t offset, size_t size) {
    memcpy(data, (const char *) t->data + offset, size);
}

bool host_cpy_tensor(ggml_backend_buffer_t, const ggml_tensor * src, ggml_tensor * dst) {
    if (src->buffer && !ggml_backend_buffer_is_host(src->buffer)) return false;
    memcpy(dst->data, src->data, ggml_nbytes(src));
    return true;
}

void host_clear(ggml_backend_buffer_t b, uint8_t value) { memset(host_get_base(b), value, b->size); }

const ggml_backend_buffer_i host_buffer_iface = {
    host_free, host_get_base, nullptr, host_memset_tensor, host_set_tensor, host_get_tensor, host_cpy_tensor, host_clear, nullptr,
};

// Repacked weights: a whole matrix written at once is stored in the layout of this build's
// matrix-product kernels; reading it back is refused (the bytes are not the file's any more).
void repack_set_tensor(ggml_backend_buffer_t, ggml_tensor * t, const void * data, size_t offset, size_t size) {
    memcpy((char *) t->data + offset, data, size);
    if (offset == 0 && size == ggml_nbytes(t) && t->view_src == nullptr && ggml_cpu_can_repack(t)) ggml_cpu_repack(t);
}

void repack_get_tensor(ggml_backend_buffer_t, const ggml_tensor * t, void * data, size_t offset, size_t size) {
    if (t->flags & GGML_TENSOR_FLAG_REPACKED) {
        GGML_ABORT("ggml_backend_tensor_get: tensor '%s' is stored repacked for the CPU's matrix products", t->name);
    }
    memcpy(data, (const char *) t->data + offset, size);
}

const ggml_backend_buffer_i repack_buffer_iface = {
    host_free, host_get_base, nullptr, host_memset_tensor, repack_set_tensor, repack_get_tensor, nullptr, host_clear, nullptr,
};

size_t host_alignment(ggml_backend_buffer_type_t) { return GGML_MEM_ALIGN; }
bool   host_is_host(ggml_backend_buffer_type_t) { return true; }

const char * cpu_buft_name(ggml_backend_buffer_type_t) { return "CPU"; }

ggml_backend_buffer_t cpu_buft_alloc(ggml_backend_buffer_type_t buft, size_t size) {
    const size_t rounded = (size + GGML_MEM_ALIGN - 1) / GGML_MEM_ALIGN * GGML_MEM_ALIGN;
    void * p = aligned_alloc(GGML_MEM_ALIGN, rounded > 0 ? rounded : GGML_MEM_ALIGN);
    if (!p) {
        ggml_log_error("ggml_backend_cpu: cannot allocate a buffer of %.1f MiB\n", size / 1048576.0);
        return nullptr;
    }
    return ggml_backend_buffer_init(buft, host_buffer_iface, new host_buffer{ p, size, host_buffer::OWNED_MALLOC }, size);
}

const char * repack_buft_name(ggml_backend_buffer_type_t) { return "CPU_REPACK"; }

// Anonymous memory on huge pages where the kernel allows: fewer page faults and TLB misses
// while the weights stream through the matrix-vector products of generation.
ggml_backend_buffer_t repack_buft_alloc(ggml_backend_buffer_type_t buft, size_t size) {
    const size_t huge = 2u << 20;
    const size_t mapped = (std::max<size_t>(size, 1) + huge - 1) & ~(huge - 1);
    void * p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        ggml_log_error("ggml_backend_cpu: cannot map %.1f MiB for repacked weights\n", size / 1048576.0);
        return nullptr;
    }
    madvise(p, mapped, MADV_HUGEPAGE);  // advice only: fine if refused
    return ggml_backend_buffer_init(buft, repack_buffer_iface, new host_buffer{ p, mapped, host_buffer::OWNED_MMAP }, size);
}

ggml_backend_buffer_type cpu_buft = {
    { cpu_buft_name, cpu_buft_alloc, host_alignment, nullptr, nullptr, host_is_host }, nullptr, nullptr,
};
ggml_backend_buffer_type repack_buft = {
    { repack_buft_name, repack_buft_alloc, host_alignment, nullptr, nullptr, host_is_host }, nullptr, nullptr,
};

// ---- the backend ---------------------------------------------------------------------------
struct cpu_backend {
    int n_threads = (int) std::max(1u, std::thread::hardware_concurrency());
    ggml_threadpool pool;  // this backend's workers: two backends compute side by side
    ggml_threadpool * attached = nullptr;  // ggml_backend_cpu_set_threadpool's pool, used instead
    uint8_t * work = nullptr;
    size_t work_size = 0;
    ggml_abort_callback abort_callback = nullptr;
    void * abort_callback_data = nullptr;
    const ggml_cpu_kernels * kernels = nullptr;  // NULL: the build's table
    ~cpu_backend() { free(work); }
};

const char * cpu_backend_name(ggml_backend_t) { return "CPU"; }

void cpu_backend_free(ggml_backend_t b) {
    delete (cpu_backend *) b->context;
    delete b;
}

// The work buffer grows to the largest plan seen, then stays: later graphs allocate nothing.
ggml_status cpu_graph_compute(ggml_backend_t b, ggml_cgraph * cgraph) {
    cpu_backend * cb = (cpu_backend *) b->context;
    // The backend's kernel table for the plan and the compute (the workers take the caller's).
    struct kernels_scope {
        const ggml_cpu_kernels * saved = ggml_cpu_kernels_override;
        explicit kernels_scope(const ggml_cpu_kernels * k) { ggml_cpu_kernels_override = k; }
        ~kernels_scope() { ggml_cpu_kernels_override = saved; }
    } scope(cb->kernels);
    // An attached pool computes with at most its own thread count.
    ggml_threadpool * pool = cb->attached ? cb->attached : &cb->pool;
    const int n_threads = pool->n_threads_max > 0 ? std::min(cb->n_threads, pool->n_threads_max) : cb->n_threads;
    ggml_cplan plan = ggml_graph_plan(cgraph, n_threads);
    if (plan.work_size > cb->work_size) {
        const size_t size = (plan.work_size + GGML_MEM_ALIGN - 1) / GGML_MEM_ALIGN * GGML_MEM_ALIGN;
        uint8_t * w = (uint8_t *) aligned_alloc(GGML_MEM_ALIGN, size);
        if (!w) {
            ggml_log_error("ggml_backend_cpu: cannot allocate a %zu-byte work buffer\n", plan.work_size);
            return GGML_STATUS_ALLOC_FAILED;
        }
        free(cb->work);
        cb->work = w;
        cb->work_size = plan.work_size;
    }
    plan.work_data = plan.work_size > 0 ? cb->work : nullptr;
    plan.abort_callback = cb->abort_callback;
    plan.abort_callback_data = cb->abort_callback_data;
    plan.threadpool = pool;
    return ggml_graph_compute(cgraph, &plan);
}

const ggml_backend_i cpu_backend_iface = {
    cpu_backend_name, cpu_backend_free, nullptr, nullptr, nullptr, cpu_graph_compute,
};

// ---- the device ----------------------------------------------------------------------------
const char * cpu_dev_name(ggml_backend_dev_t) { return "CPU"; }

const char * cpu_dev_description(ggml_backend_dev_t) {
    static const std::string desc = std::string("CPU (") + ggml_cpu_isa_name() + " kernels)";
    return desc.c_str();
}

void cpu_dev_memory(ggml_backend_dev_t, size_t * free_mem, size_t * total) {
    const long pages = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    *total = pages > 0 && page > 0 ? (size_t) pages * (size_t) page : 0;
    *free_mem = avail > 0 && page > 0 ? (size_t) avail * (size_t) page : *total;
}

enum ggml_backend_dev_type cpu_dev_type(ggml_backend_dev_t) { return GGML_BACKEND_DEVICE_TYPE_CPU; }
ggml_backend_t cpu_dev_init(ggml_backend_dev_t, const char *) { return ggml_backend_cpu_init(); }
ggml_backend_buffer_type_t cpu_dev_buft(ggml_backend_dev_t) { return &cpu_buft; }

// Every op has a CPU kernel (the op table guarantees it), on every type the kernels can read and
// write: a block type is read through the type table's to_float and written through its
// from_float_ref, and mul_mat needs a product kernel for its a (the build's table, or a's
// repacked form). The runtime asks this (ggml_backend_dev_supports_op) instead of keeping lists
// of the types the CPU computes on.
bool cpu_reads(const ggml_tensor * t) {
    return !t || !ggml_is_quantized(t->type) || (t->flags & GGML_TENSOR_FLAG_REPACKED) ||
           ggml_get_type_traits(t->type)->to_float != nullptr;
}

bool cpu_dev_supports_op(ggml_backend_dev_t, const ggml_tensor * op) {
    switch (op->op) {
        case GGML_OP_NONE: case GGML_OP_VIEW: case GGML_OP_RESHAPE: case GGML_OP_PERMUTE: case GGML_OP_TRANSPOSE:
            return true;  // no data is touched
        case GGML_OP_MUL_MAT: {
            const ggml_tensor * a = op->src[0];
            if (a->flags & GGML_TENSOR_FLAG_REPACKED) return ggml_repack_get_traits(a->type) != nullptr;
            return ggml_is_quantized(a->type) ? ggml_quant_mm_kernels(a->type) != nullptr : ggml_cpu()->mm_type(a->type) != nullptr;
        }
        case GGML_OP_MUL_MAT_ID: {
            const ggml_tensor * a = op->src[0];
            if (a->flags & GGML_TENSOR_FLAG_REPACKED) return ggml_repack_get_traits(a->type) != nullptr;
            return ggml_is_quantized(a->type) ? ggml_quant_mm_kernels(a->type) != nullptr : ggml_cpu()->mm_type(a->type) != nullptr;
        }
        case GGML_OP_CPY: case GGML_OP_DUP: case GGML_OP_CONT:
            if (op->src[0] && op->src[0]->type == op->type) return true;  // blocks copied as they are
            break;
        default:
            break;
    }
    for (const ggml_tensor * s : op->src) {
        if (!cpu_reads(s)) return false;
    }
    return !ggml_is_quantized(op->type) || ggml_get_type_traits(op->type)->from_float_ref != nullptr;
}
bool cpu_dev_supports_buft(ggml_backend_dev_t, ggml_backend_buffer_type_t buft) { return ggml_backend_buft_is_host(buft); }

ggml_backend_device cpu_device = {
    { cpu_dev_name, cpu_dev_description, cpu_dev_memory, cpu_dev_type, cpu_dev_init, cpu_dev_buft, cpu_dev_supports_op,
      cpu_dev_supports_buft, nullptr, nullptr },
    nullptr,
};

}  // namespace

ggml_backend_dev_t ggml_backend_cpu_device(void) {
    cpu_buft.device = &cpu_device;
    repack_buft.device = &cpu_device;
    return &cpu_device;
}

ggml_backend_t ggml_backend_cpu_init(void) {
    return new ggml_backend{ cpu_backend_iface, ggml_backend_cpu_device(), new cpu_backend() };
}

bool ggml_backend_is_cpu(ggml_backend_t backend) { return backend && backend->iface.get_name == cpu_backend_name; }

void ggml_backend_cpu_set_n_threads(ggml_backend_t backend_cpu, int n_threads) {
    GGML_ASSERT(ggml_backend_is_cpu(backend_cpu));
    ((cpu_backend *) backend_cpu->context)->n_threads = n_threads > 0 ? n_threads : 1;
}

void ggml_backend_cpu_set_abort_callback(ggml_backend_t backend_cpu, ggml_abort_callback abort_callback, void * data) {
    GGML_ASSERT(ggml_backend_is_cpu(backend_cpu));
    cpu_backend * cb = (cpu_backend *) backend_cpu->context;
    cb->abort_callback = abort_callback;
    cb->abort_callback_data = data;
}

void ggml_backend_cpu_set_threadpool(ggml_backend_t backend_cpu, ggml_threadpool_t threadpool) {
    GGML_ASSERT(ggml_backend_is_cpu(backend_cpu));
    cpu_backend * cb = (cpu_backend *) backend_cpu->context;
    if (cb->attached && cb->attached != threadpool) cb->attached->pause();  // as ggml: the pool left idles
    cb->attached = threadpool;
}

// ---- the registry entry ----------------------------------------------------------------------
namespace {
const char * cpu_reg_name(ggml_backend_reg_t) { return "CPU"; }
size_t cpu_reg_device_count(ggml_backend_reg_t) { return 1; }
ggml_backend_dev_t cpu_reg_device(ggml_backend_reg_t, size_t index) { return index == 0 ? ggml_backend_cpu_device() : nullptr; }

ggml_backend_buffer_type_t * cpu_extra_bufts(ggml_backend_dev_t) {
    static ggml_backend_buffer_type_t list[2] = { ggml_backend_cpu_repack_buffer_type(), nullptr };
    return list;
}

ggml_backend_feature * cpu_features(ggml_backend_reg_t) {
    static std::vector<ggml_backend_feature> list = [] {
        std::vector<ggml_backend_feature> v;
        v.push_back({ "KERNELS", ggml_cpu_isa_name() });
        if (ggml_cpu_has_avx2()) v.push_back({ "AVX2", "1" });
        if (ggml_cpu_has_avx512()) v.push_back({ "AVX512", "1" });
        if (ggml_cpu_has_avx512_vnni()) v.push_back({ "AVX512_VNNI", "1" });
        if (ggml_cpu_has_amx_int8()) v.push_back({ "AMX_INT8", "1" });
        if (ggml_cpu_has_neon()) v.push_back({ "NEON", "1" });
        if (ggml_cpu_has_dotprod()) v.push_back({ "DOTPROD", "1" });
        v.push_back({ nullptr, nullptr });
        return v;
    }();
    return list.data();
}

void * cpu_reg_proc_address(ggml_backend_reg_t, const char * name) {
    struct entry { const char * name; void * fn; };
    static const entry table[] = {
        { "ggml_backend_set_n_threads", (void *) (ggml_backend_set_n_threads_t) ggml_backend_cpu_set_n_threads },
        { "ggml_backend_set_abort_callback", (void *) (ggml_backend_set_abort_callback_t) ggml_backend_cpu_set_abort_callback },
        { "ggml_backend_dev_get_extra_bufts", (void *) (ggml_backend_dev_get_extra_bufts_t) cpu_extra_bufts },
        { "ggml_backend_get_features", (void *) (ggml_backend_get_features_t) cpu_features },
        { "ggml_backend_cpu_numa_init", (void *) ggml_numa_init },
        { "ggml_backend_cpu_is_numa", (void *) ggml_is_numa },
        { "ggml_threadpool_new", (void *) ggml_threadpool_new },
        { "ggml_threadpool_free", (void *) ggml_threadpool_free },
        { "ggml_backend_cpu_set_threadpool", (void *) ggml_backend_cpu_set_threadpool },
    };
    for (const entry & e : table) {
        if (name && strcmp(name, e.name) == 0) return e.fn;
    }
    return nullptr;
}

ggml_backend_reg cpu_reg = { { cpu_reg_name, cpu_reg_device_count, cpu_reg_device, cpu_reg_proc_address }, nullptr };
}  // namespace

ggml_backend_reg_t ggml_backend_cpu_reg(void) { return &cpu_reg; }

int ggml_backend_cpu_n_kernel_sets(void) {
    const ggml_cpu_kernels * sets[4];
    return ggml_cpu_kernel_sets(sets);
}

const char * ggml_backend_cpu_kernel_set_name(int i) {
    const ggml_cpu_kernels * sets[4];
    const int n = ggml_cpu_kernel_sets(sets);
    return i >= 0 && i < n ? sets[i]->isa : nullptr;
}

bool ggml_backend_cpu_set_kernels(ggml_backend_t backend_cpu, const char * isa) {
    GGML_ASSERT(ggml_backend_is_cpu(backend_cpu));
    const ggml_cpu_kernels * sets[4];
    const int n = ggml_cpu_kernel_sets(sets);
    for (int i = 0; i < n; i++) {
        if (isa && strcmp(sets[i]->isa, isa) == 0) {
            ((cpu_backend *) backend_cpu->context)->kernels = i == 0 ? nullptr : sets[i];
            return true;
        }
    }
    return false;
}

ggml_backend_buffer_type_t ggml_backend_cpu_buffer_type(void) {
    ggml_backend_cpu_device();
    return &cpu_buft;
}

ggml_backend_buffer_type_t ggml_backend_cpu_repack_buffer_type(void) {
    ggml_backend_cpu_device();
    return &repack_buft;
}

ggml_backend_buffer_t ggml_backend_cpu_buffer_from_ptr(void * ptr, size_t size) {
    return ggml_backend_buffer_init(ggml_backend_cpu_buffer_type(), host_buffer_iface,
                                    new host_buffer{ ptr, size, host_buffer::BORROWED }, size);
}
