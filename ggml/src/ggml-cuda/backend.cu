// backend.cu - the CUDA backend behind ggml-backend.h: one device per GPU, its memory as a
// buffer type (cudaMalloc), page-locked host memory as a second one, and a backend object per
// device computing graphs on its own stream with its own cuBLAS handle.
//
// Memory traffic: buffer calls (set / get / memset / clear) use the synchronous runtime calls on
// the legacy default stream, and the backend's stream is a blocking stream, so every buffer call
// is ordered after the kernels enqueued before it and before the ones enqueued after it: a
// tensor set between two graph computes is seen by the second, as the interface requires.
//
// CUDA graphs: generation computes the same graph (same nodes, shapes, addresses) token after
// token, and a graph of a few hundred small kernels is bound by launch overhead. When a graph
// comes a second time unchanged, its kernels are captured into a CUDA graph, and from then on
// it is re-launched with one call. A few graphs are kept (the scheduler may give the backend
// several splits per token); another shape or other addresses is another graph, run kernel by
// kernel the first time. GGML_CUDA_DISABLE_GRAPHS=1 turns this off; GGML_CUDA_SYNC_NODES=1 (for
// debugging) waits for every node and names the one whose kernel failed; GGML_CUDA_DISABLE_FUSION=1
// runs each node as its own kernel (ggml_cuda_compute_nodes fuses some pairs); GGML_CUDA_PROFILE=1
// times every launch by class and prints the table when the backend is freed (backend-profile.cuh).
#include "ggml-cuda.h"
#include "ggml-backend-impl.h"
#include "ggml-graph-key.h"
#include "ggml-cpu.h"
#include "ops.cuh"
#include "backend-profile.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memory>
#include <string>
#include <vector>

// ---- scratch ---------------------------------------------------------------------------------
void * ggml_cuda_ctx::scratch(size_t bytes) {
    scratch_uses++;
    if (bytes <= scratch_size) return scratch_ptr;
    if (capturing) {  // nothing runs while capturing: the capture is thrown away and run again plainly
        capture_broken = true;
        return scratch_ptr;
    }
    CUDA_CHECK(cudaStreamSynchronize(stream));  // kernels in flight may use the old buffer
    if (scratch_ptr) CUDA_CHECK(cudaFree(scratch_ptr));
    const size_t size = (bytes + bytes / 4 + 4095) & ~(size_t) 4095;  // some headroom: fewer regrowths
    scratch_ptr = nullptr;
    scratch_size = 0;
    CUDA_CHECK(cudaMalloc(&scratch_ptr, size));
    scratch_size = size;
    scratch_gen++;  // graphs captured with the old buffer are stale
    return scratch_ptr;
}

namespace {

constexpr size_t kAlignment = 256;             // cudaMalloc's alignment; views of tensors keep 16-byte loads aligned
constexpr size_t kCublasWorkspace = 32u << 20;  // cuBLAS's recommendation for Hopper

// ---- devices ---------------------------------------------------------------------------------
struct cuda_device {
    int id;
    std::string name, description;
    ggml_backend_buffer_type buft;
    ggml_backend_device dev;
};

std::vector<std::unique_ptr<cuda_device>> & cuda_devices();

cuda_device * device_of_buft(ggml_backend_buffer_type_t buft) { return (cuda_device *) buft->context; }

// ---- device buffers ----------------------------------------------------------------------------
struct cuda_buffer {
    int device;
    void * ptr;
};

void set_device(int device) { CUDA_CHECK(cudaSetDevice(device)); }

void cuda_buffer_free(ggml_backend_buffer_t b) {
    cuda_buffer * cb = (cuda_buffer *) b->context;
    set_device(cb->device);
    CUDA_CHECK(cudaFree(cb->ptr));
    delete cb;
}

void * cuda_buffer_base(ggml_backend_buffer_t b) { return ((cuda_buffer *) b->context)->ptr; }

void cuda_buffer_memset_tensor(ggml_backend_buffer_t b, ggml_tensor * t, uint8_t value, size_t offset, size_t size) {
    set_device(((cuda_buffer *) b->context)->device);
    CUDA_CHECK(cudaMemset((char *) t->data + offset, value, size));
}

void cuda_buffer_set_tensor(ggml_backend_buffer_t b, ggml_tensor * t, const void * data, size_t offset, size_t size) {
    set_device(((cuda_buffer *) b->context)->device);
    CUDA_CHECK(cudaMemcpy((char *) t->data + offset, data, size, cudaMemcpyHostToDevice));
}

void cuda_buffer_get_tensor(ggml_backend_buffer_t b, const ggml_tensor * t, void * data, size_t offset, size_t size) {
    set_device(((cuda_buffer *) b->context)->device);
    CUDA_CHECK(cudaMemcpy(data, (const char *) t->data + offset, size, cudaMemcpyDeviceToHost));
}

bool is_cuda_buffer(ggml_backend_buffer_t b);

// Device to device (any of this build's GPUs: unified addressing finds the way).
bool cuda_buffer_cpy_tensor(ggml_backend_buffer_t b, const ggml_tensor * src, ggml_tensor * dst) {
    ggml_backend_buffer_t sb = src->view_src && src->view_src->buffer ? src->view_src->buffer : src->buffer;
    if (!sb || !is_cuda_buffer(sb)) return false;
    set_device(((cuda_buffer *) b->context)->device);
    CUDA_CHECK(cudaMemcpy(dst->data, src->data, ggml_nbytes(src), cudaMemcpyDefault));
    return true;
}

void cuda_buffer_clear(ggml_backend_buffer_t b, uint8_t value) {
    cuda_buffer * cb = (cuda_buffer *) b->context;
    set_device(cb->device);
    CUDA_CHECK(cudaMemset(cb->ptr, value, b->size));
}

const ggml_backend_buffer_i cuda_buffer_iface = {
    cuda_buffer_free, cuda_buffer_base, nullptr, cuda_buffer_memset_tensor, cuda_buffer_set_tensor,
    cuda_buffer_get_tensor, cuda_buffer_cpy_tensor, cuda_buffer_clear, nullptr,
};

bool is_cuda_buffer(ggml_backend_buffer_t b) { return b->iface.free_buffer == cuda_buffer_free; }

const char * cuda_buft_name(ggml_backend_buffer_type_t buft) { return device_of_buft(buft)->name.c_str(); }

ggml_backend_buffer_t cuda_buft_alloc(ggml_backend_buffer_type_t buft, size_t size) {
    const cuda_device * d = device_of_buft(buft);
    set_device(d->id);
    void * p = nullptr;
    const cudaError_t err = cudaMalloc(&p, size > 0 ? size : 1);
    if (err != cudaSuccess) {
        cudaGetLastError();  // clear the sticky-free error so later calls work
        ggml_log_error("ggml_backend_cuda: cannot allocate %.1f MiB on %s: %s\n", size / 1048576.0, d->name.c_str(),
                       cudaGetErrorString(err));
        return nullptr;
    }
    return ggml_backend_buffer_init(buft, cuda_buffer_iface, new cuda_buffer{ d->id, p }, size);
}

size_t cuda_buft_alignment(ggml_backend_buffer_type_t) { return kAlignment; }

// ---- pinned host buffers -------------------------------------------------------------------------
void host_free(ggml_backend_buffer_t b) { CUDA_CHECK(cudaFreeHost(b->context)); }
void * host_base(ggml_backend_buffer_t b) { return b->context; }
void host_memset(ggml_backend_buffer_t, ggml_tensor * t, uint8_t v, size_t off, size_t size) { memset((char *) t->data + off, v, size); }
void host_set(ggml_backend_buffer_t, ggml_tensor * t, const void * data, size_t off, size_t size) { memcpy((char *) t->data + off, data, size); }
void host_get(ggml_backend_buffer_t, const ggml_tensor * t, void * data, size_t off, size_t size) { memcpy(data, (const char *) t->data + off, size); }
bool host_cpy(ggml_backend_buffer_t, const ggml_tensor * src, ggml_tensor * dst) {
    if (src->buffer && !ggml_backend_buffer_is_host(src->buffer)) return false;
    memcpy(dst->data, src->data, ggml_nbytes(src));
    return true;
}
void host_clear(ggml_backend_buffer_t b, uint8_t v) { memset(b->context, v, b->size); }

const ggml_backend_buffer_i host_buffer_iface = {
    host_free, host_base, nullptr, host_memset, host_set, host_get, host_cpy, host_clear, nullptr,
};

const char * host_buft_name(ggml_backend_buffer_type_t) { return "CUDA_Host"; }

ggml_backend_buffer_t host_buft_alloc(ggml_backend_buffer_type_t buft, size_t size) {
    void * p = nullptr;
    const cudaError_t err = cudaMallocHost(&p, size > 0 ? size : 1);
    if (err != cudaSuccess) {
        cudaGetLastError();
        ggml_log_error("ggml_backend_cuda: cannot allocate %.1f MiB of pinned host memory: %s\n", size / 1048576.0, cudaGetErrorString(err));
        return nullptr;
    }
    return ggml_backend_buffer_init(buft, host_buffer_iface, p, size);
}

size_t host_buft_alignment(ggml_backend_buffer_type_t) { return GGML_MEM_ALIGN; }
bool host_buft_is_host(ggml_backend_buffer_type_t) { return true; }

ggml_backend_buffer_type host_buft = {
    { host_buft_name, host_buft_alloc, host_buft_alignment, nullptr, nullptr, host_buft_is_host }, nullptr, nullptr,
};

// ---- the backend -------------------------------------------------------------------------------
// A captured graph: the key (ggml_graph_key) of the ggml graph it replays, how often that graph
// came, and the scratch buffer generation it was captured with (a grown scratch buffer moves).
struct graph_entry {
    std::vector<uint64_t> key;
    int n_seen = 0;
    bool failed = false;  // capture or instantiation failed: runs kernel by kernel
    uint64_t used = 0;    // last use (eviction of the least recently used)
    uint64_t scratch_gen = 0;
    cudaGraphExec_t exec = nullptr;

    void drop() {
        if (exec) CUDA_CHECK(cudaGraphExecDestroy(exec));
        exec = nullptr;
    }
};

struct cuda_backend : ggml_cuda_ctx {
    std::string name;
    bool graphs_enabled = true;
    bool sync_nodes = false;  // GGML_CUDA_SYNC_NODES=1: wait for each node (finds the node of a kernel fault)
    std::unique_ptr<ggml_cuda_profiler> profiler;  // GGML_CUDA_PROFILE=1
    // A few graphs: the scheduler may give this backend several splits per token.
    static constexpr size_t kMaxGraphs = 4;
    std::vector<graph_entry> graphs;
    uint64_t n_computes = 0;
    std::vector<uint64_t> key;  // the graph being computed's key, its capacity kept from graph to graph
};

const char * cuda_backend_name(ggml_backend_t b) { return ((cuda_backend *) b->context)->name.c_str(); }

void cuda_backend_free(ggml_backend_t b) {
    cuda_backend * cb = (cuda_backend *) b->context;
    set_device(cb->device);
    CUDA_CHECK(cudaStreamSynchronize(cb->stream));
    if (cb->profiler) cb->profiler->report(cb->name.c_str());
    cb->profiler.reset();
    for (graph_entry & e : cb->graphs) e.drop();
    CUBLAS_CHECK(cublasDestroy(cb->cublas));
    if (cb->cublas_ws) CUDA_CHECK(cudaFree(cb->cublas_ws));
    if (cb->group_done) CUDA_CHECK(cudaFree(cb->group_done));
    if (cb->scratch_ptr) CUDA_CHECK(cudaFree(cb->scratch_ptr));
    CUDA_CHECK(cudaStreamDestroy(cb->stream));
    delete cb;
    delete b;
}

// Async copies for tensors in this backend's memory; others go through their own buffer.
void cuda_set_tensor_async(ggml_backend_t b, ggml_tensor * t, const void * data, size_t offset, size_t size) {
    ggml_backend_buffer_t buf = t->view_src && t->view_src->buffer ? t->view_src->buffer : t->buffer;
    if (!buf || !is_cuda_buffer(buf)) {
        ggml_backend_tensor_set(t, data, offset, size);
        return;
    }
    cuda_backend * cb = (cuda_backend *) b->context;
    set_device(cb->device);
    CUDA_CHECK(cudaMemcpyAsync((char *) t->data + offset, data, size, cudaMemcpyHostToDevice, cb->stream));
}

void cuda_get_tensor_async(ggml_backend_t b, const ggml_tensor * t, void * data, size_t offset, size_t size) {
    ggml_backend_buffer_t buf = t->view_src && t->view_src->buffer ? t->view_src->buffer : t->buffer;
    if (!buf || !is_cuda_buffer(buf)) {
        ggml_backend_tensor_get(t, data, offset, size);
        return;
    }
    cuda_backend * cb = (cuda_backend *) b->context;
    set_device(cb->device);
    CUDA_CHECK(cudaMemcpyAsync(data, (const char *) t->data + offset, size, cudaMemcpyDeviceToHost, cb->stream));
}

void cuda_synchronize(ggml_backend_t b) {
    cuda_backend * cb = (cuda_backend *) b->context;
    set_device(cb->device);
    CUDA_CHECK(cudaStreamSynchronize(cb->stream));
}

ggml_status run_nodes(cuda_backend * cb, ggml_cgraph * g) {
    cb->act = ggml_cuda_ctx::quantized_act();
    ggml_cuda_profiler * prof = cb->profiler.get();
    if (prof) prof->graph_begin(cb->stream);
    for (int i = 0; i < g->n_nodes; i++) {
        ggml_tensor * n = g->nodes[i];
        if (ggml_graph_key_skips(n)) continue;
        if (prof) prof->launch_begin(cb->stream);
        const int done = ggml_cuda_compute_nodes(*cb, g, i);  // 2: fused with the next node
        if (prof && done > 0) prof->launch_end(cb->stream, g, i, done);
        if (done == 0) {
            ggml_log_error("ggml_backend_cuda: no kernel for node '%s' (%s)\n", n->name, ggml_op_desc(n));
            return GGML_STATUS_FAILED;
        }
        i += done - 1;
        if (cb->sync_nodes) {  // debugging: a kernel fault is reported at the node that caused it
            const cudaError_t err = cudaStreamSynchronize(cb->stream);
            if (err != cudaSuccess) {
                ggml_abort(__FILE__, __LINE__, "ggml_backend_cuda: node %d '%s' (%s, %s): %s", i, n->name, ggml_op_desc(n),
                           ggml_type_name(n->type), cudaGetErrorString(err));
            }
        }
    }
    if (prof) prof->graph_end(cb->stream);
    return GGML_STATUS_SUCCESS;
}

ggml_status cuda_graph_compute(ggml_backend_t b, ggml_cgraph * g) {
    cuda_backend * cb = (cuda_backend *) b->context;
    set_device(cb->device);
    if (!cb->graphs_enabled) return run_nodes(cb, g);

    std::vector<uint64_t> & key = cb->key;  // about 50 words a node: no reallocation a token
    ggml_graph_key(g, key);
    cb->n_computes++;
    // A launch of the graph may still be running: let it end before its exec goes.
    auto drop = [cb](graph_entry & x) {
        if (!x.exec) return;
        CUDA_CHECK(cudaStreamSynchronize(cb->stream));
        x.drop();
    };
    graph_entry * e = nullptr;
    for (graph_entry & x : cb->graphs) {
        if (x.key == key) e = &x;
    }
    if (!e) {
        if (cb->graphs.size() < cuda_backend::kMaxGraphs) {
            cb->graphs.emplace_back();
            e = &cb->graphs.back();
        } else {
            e = &cb->graphs[0];
            for (graph_entry & x : cb->graphs) {
                if (x.used < e->used) e = &x;
            }
            drop(*e);
            *e = graph_entry();
        }
        e->key.swap(key);
    }
    e->used = cb->n_computes;
    e->n_seen++;
    if (e->exec && e->scratch_gen != cb->scratch_gen) drop(*e);  // it points into a freed scratch buffer
    if (e->exec) {
        CUDA_CHECK(cudaGraphLaunch(e->exec, cb->stream));
        return GGML_STATUS_SUCCESS;
    }
    // First time: plain run (it also sizes the scratch buffer, so the capture allocates nothing).
    if (e->n_seen < 2 || e->failed) return run_nodes(cb, g);

    cudaGraph_t graph = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(cb->stream, cudaStreamCaptureModeRelaxed));
    cb->capturing = true;
    cb->capture_broken = false;
    const ggml_status st = run_nodes(cb, g);
    cb->capturing = false;
    const cudaError_t err = cudaStreamEndCapture(cb->stream, &graph);
    cudaError_t ierr = cudaErrorUnknown;
    if (err == cudaSuccess && st == GGML_STATUS_SUCCESS && !cb->capture_broken) {
        ierr = cudaGraphInstantiate(&e->exec, graph, 0);
    }
    if (graph) CUDA_CHECK(cudaGraphDestroy(graph));
    if (ierr != cudaSuccess) {
        cudaGetLastError();
        e->exec = nullptr;
        if (cb->capture_broken) {
            e->n_seen = 1;  // the scratch buffer was too small: it grows on this plain run, capture next time
        } else {
            e->failed = true;
        }
        return st != GGML_STATUS_SUCCESS ? st : run_nodes(cb, g);
    }
    e->scratch_gen = cb->scratch_gen;
    CUDA_CHECK(cudaGraphLaunch(e->exec, cb->stream));
    return GGML_STATUS_SUCCESS;
}

const ggml_backend_i cuda_backend_iface = {
    cuda_backend_name, cuda_backend_free, cuda_set_tensor_async, cuda_get_tensor_async, cuda_synchronize, cuda_graph_compute,
};

// ---- the device iface ----------------------------------------------------------------------------
cuda_device * dev_of(ggml_backend_dev_t d) { return (cuda_device *) d->context; }

const char * dev_name(ggml_backend_dev_t d) { return dev_of(d)->name.c_str(); }
const char * dev_description(ggml_backend_dev_t d) { return dev_of(d)->description.c_str(); }

void dev_memory(ggml_backend_dev_t d, size_t * free_mem, size_t * total) {
    set_device(dev_of(d)->id);
    CUDA_CHECK(cudaMemGetInfo(free_mem, total));
}

enum ggml_backend_dev_type dev_type(ggml_backend_dev_t) { return GGML_BACKEND_DEVICE_TYPE_GPU; }
ggml_backend_t dev_init(ggml_backend_dev_t d, const char *) { return ggml_backend_cuda_init(dev_of(d)->id); }
ggml_backend_buffer_type_t dev_buft(ggml_backend_dev_t d) { return &dev_of(d)->buft; }
bool dev_supports_op(ggml_backend_dev_t, const ggml_tensor * op) { return ggml_cuda_supports_op(op); }
// Only its own memory: host tensors reach the GPU through the scheduler's copies.
bool dev_supports_buft(ggml_backend_dev_t d, ggml_backend_buffer_type_t buft) { return buft == &dev_of(d)->buft; }
ggml_backend_buffer_type_t dev_host_buft(ggml_backend_dev_t) { return ggml_backend_cuda_host_buffer_type(); }

std::vector<std::unique_ptr<cuda_device>> & cuda_devices() {
    static std::vector<std::unique_ptr<cuda_device>> list = [] {
        std::vector<std::unique_ptr<cuda_device>> v;
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess) {  // no driver or no GPU: no devices
            cudaGetLastError();
            n = 0;
        }
        for (int i = 0; i < n; i++) {
            std::unique_ptr<cuda_device> d(new cuda_device());
            d->id = i;
            d->name = std::string(GGML_CUDA_NAME) + std::to_string(i);
            cudaDeviceProp prop;
            d->description = cudaGetDeviceProperties(&prop, i) == cudaSuccess ? std::string(prop.name) : d->name;
            d->buft = { { cuda_buft_name, cuda_buft_alloc, cuda_buft_alignment, nullptr, nullptr, nullptr }, &d->dev, d.get() };
            d->dev = { { dev_name, dev_description, dev_memory, dev_type, dev_init, dev_buft, dev_supports_op, dev_supports_buft, nullptr, dev_host_buft },
                       d.get() };
            v.push_back(std::move(d));
        }
        return v;
    }();
    return list;
}

}  // namespace

// ---- the public calls ------------------------------------------------------------------------------
size_t ggml_backend_cuda_device_count(void) { return cuda_devices().size(); }

ggml_backend_dev_t ggml_backend_cuda_device(size_t index) {
    return index < cuda_devices().size() ? &cuda_devices()[index]->dev : nullptr;
}

int ggml_backend_cuda_get_device_count(void) { return (int) cuda_devices().size(); }

void ggml_backend_cuda_get_device_description(int device, char * description, size_t size) {
    if (size == 0) return;
    const char * d = device >= 0 && device < (int) cuda_devices().size() ? cuda_devices()[device]->description.c_str() : "";
    snprintf(description, size, "%s", d);
}

void ggml_backend_cuda_get_device_memory(int device, size_t * free_mem, size_t * total) {
    *free_mem = *total = 0;
    if (device >= 0 && device < (int) cuda_devices().size()) dev_memory(&cuda_devices()[device]->dev, free_mem, total);
}

ggml_backend_t ggml_backend_cuda_init(int device) {
    if (device < 0 || device >= (int) cuda_devices().size()) return nullptr;
    cuda_device * d = cuda_devices()[device].get();
    set_device(d->id);
    cuda_backend * cb = new cuda_backend();
    cb->device = d->id;
    cb->name = d->name;
    CUDA_CHECK(cudaDeviceGetAttribute(&cb->n_sm, cudaDevAttrMultiProcessorCount, d->id));
    int cc_major = 0, cc_minor = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, d->id));
    CUDA_CHECK(cudaDeviceGetAttribute(&cc_minor, cudaDevAttrComputeCapabilityMinor, d->id));
    cb->cc = 10 * cc_major + cc_minor;
    const char * env = getenv("GGML_CUDA_DISABLE_GRAPHS");
    const char * sync_env = getenv("GGML_CUDA_SYNC_NODES");
    cb->sync_nodes = sync_env && atoi(sync_env) != 0;
    const char * fusion_env = getenv("GGML_CUDA_DISABLE_FUSION");
    cb->no_fusion = fusion_env && atoi(fusion_env) != 0;
    const char * mma_fa_env = getenv("GGML_CUDA_DISABLE_MMA_FA");
    cb->no_mma_fa = mma_fa_env && atoi(mma_fa_env) != 0;
    const char * profile_env = getenv("GGML_CUDA_PROFILE");
    if (profile_env && atoi(profile_env) != 0) cb->profiler.reset(new ggml_cuda_profiler());
    cb->graphs_enabled = !(env && atoi(env) != 0) && !cb->sync_nodes && !cb->profiler;
    CUDA_CHECK(cudaStreamCreateWithFlags(&cb->stream, cudaStreamDefault));  // blocking: ordered with the buffer calls
    CUBLAS_CHECK(cublasCreate(&cb->cublas));
    CUBLAS_CHECK(cublasSetStream(cb->cublas, cb->stream));  // before the workspace: setting the stream resets it
    CUDA_CHECK(cudaMalloc(&cb->cublas_ws, kCublasWorkspace));
    CUDA_CHECK(cudaMalloc(&cb->group_done, ggml_cuda_ctx::kGroupCounters * sizeof(int)));
    CUDA_CHECK(cudaMemset(cb->group_done, 0, ggml_cuda_ctx::kGroupCounters * sizeof(int)));
    cb->cublas_ws_size = kCublasWorkspace;
    CUBLAS_CHECK(cublasSetWorkspace(cb->cublas, cb->cublas_ws, cb->cublas_ws_size));
    return new ggml_backend{ cuda_backend_iface, &d->dev, cb };
}

bool ggml_backend_is_cuda(ggml_backend_t backend) { return backend && backend->iface.get_name == cuda_backend_name; }

ggml_backend_buffer_type_t ggml_backend_cuda_buffer_type(int device) {
    return device >= 0 && device < (int) cuda_devices().size() ? &cuda_devices()[device]->buft : nullptr;
}

ggml_backend_buffer_type_t ggml_backend_cuda_host_buffer_type(void) {
    host_buft.device = ggml_backend_cpu_device();
    return &host_buft;
}
