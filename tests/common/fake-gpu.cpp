// fake-gpu.cpp - the simulated GPU device of fake-gpu.h.
#include "fake-gpu.h"

#include "ggml-backend-impl.h"
#include "ggml-cpu.h"
#include "ggml-impl.h"
#include "ggml-graph-key.h"

#include <gtest/gtest.h>

#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

namespace fake_gpu {
namespace {

constexpr uintptr_t FAKE_BASE = (uintptr_t) 1 << 46;

struct buffer {
    std::vector<uint8_t> mem;
    uintptr_t base;
};

std::mutex mu;  // buffers may be allocated and freed from several threads
std::map<uintptr_t, buffer *> & buffers() {
    static std::map<uintptr_t, buffer *> m;
    return m;
}
uintptr_t next_base = FAKE_BASE;
std::function<bool(const ggml_tensor *)> supports_fn;
std::function<bool(const ggml_tensor *)> kernels_supports_fn;
std::function<ggml_status(ggml_cgraph *)> kernels_fn;
std::vector<ggml_op> ran_ops;
int n_graphs = 0;
std::vector<std::vector<uint64_t>> keys;

void * to_real(void * p) {
    std::lock_guard<std::mutex> lock(mu);
    const uintptr_t a = (uintptr_t) p;
    auto it = buffers().upper_bound(a);
    if (it == buffers().begin()) return p;
    --it;
    if (a <= it->first + it->second->mem.size()) return it->second->mem.data() + (a - it->first);
    return p;
}

void * to_fake(void * p) {
    std::lock_guard<std::mutex> lock(mu);
    const uintptr_t a = (uintptr_t) p;
    for (auto & kv : buffers()) {
        const uintptr_t r = (uintptr_t) kv.second->mem.data();
        if (a >= r && a <= r + kv.second->mem.size()) return (void *) (kv.first + (a - r));
    }
    return p;
}

void buf_free(ggml_backend_buffer_t b) {
    buffer * fb = (buffer *) b->context;
    {
        std::lock_guard<std::mutex> lock(mu);
        buffers().erase(fb->base);
    }
    delete fb;
}
void * buf_base(ggml_backend_buffer_t b) { return (void *) ((buffer *) b->context)->base; }
void buf_memset(ggml_backend_buffer_t, ggml_tensor * t, uint8_t v, size_t off, size_t n) { memset((char *) to_real(t->data) + off, v, n); }
void buf_set(ggml_backend_buffer_t, ggml_tensor * t, const void * d, size_t off, size_t n) { memcpy((char *) to_real(t->data) + off, d, n); }
void buf_get(ggml_backend_buffer_t, const ggml_tensor * t, void * d, size_t off, size_t n) { memcpy(d, (const char *) to_real(t->data) + off, n); }
void buf_clear(ggml_backend_buffer_t b, uint8_t v) {
    buffer * fb = (buffer *) b->context;
    memset(fb->mem.data(), v, fb->mem.size());
}
const ggml_backend_buffer_i buffer_iface = { buf_free, buf_base, nullptr, buf_memset, buf_set, buf_get, nullptr, buf_clear, nullptr };

const char * buft_name(ggml_backend_buffer_type_t) { return "FAKE"; }
ggml_backend_buffer_t buft_alloc(ggml_backend_buffer_type_t buft, size_t size) {
    buffer * fb = new buffer();
    // A GPU's fresh memory holds whatever was there: with the CUDA emulator's scrambled schedules
    // (CUDA_EMU_SCHEDULE=reverse|shuffle) 0xff bytes (NaN floats), so that reading memory
    // nothing wrote shows.
    static const bool poison = [] {
        const char * v = getenv("CUDA_EMU_SCHEDULE");
        return v && (strcmp(v, "reverse") == 0 || strcmp(v, "shuffle") == 0);
    }();
    fb->mem.assign(size, poison ? 0xff : 0);
    {
        std::lock_guard<std::mutex> lock(mu);
        fb->base = next_base;
        next_base += (size + 4095) / 4096 * 4096 + 4096;
        buffers()[fb->base] = fb;
    }
    return ggml_backend_buffer_init(buft, buffer_iface, fb, size);
}
size_t buft_align(ggml_backend_buffer_type_t) { return 64; }
ggml_backend_buffer_type buft = { { buft_name, buft_alloc, buft_align, nullptr, nullptr, nullptr }, nullptr, nullptr };

ggml_status compute(ggml_backend_t, ggml_cgraph * g) {
    n_graphs++;
    keys.emplace_back();
    ggml_graph_key(g, keys.back());
    // Translate every pointer the graph touches, run the kernels (the CPU's or set_kernels'), translate back.
    std::set<ggml_tensor *> ts;
    const int n = ggml_graph_n_nodes(g);
    std::set<ggml_tensor *> touched;  // by the nodes that compute (views only name memory)
    for (int i = 0; i < n; i++) {
        ggml_tensor * t = ggml_graph_node(g, i);
        EXPECT_TRUE(supports(t)) << "the device was given " << ggml_op_desc(t);
        ran_ops.push_back(t->op);
        ts.insert(t);
        const bool computes = !ggml_op_is_view(t->op) && t->op != GGML_OP_NONE;
        if (computes) touched.insert(t);
        for (int j = 0; j < GGML_MAX_SRC; j++) {
            if (!t->src[j]) continue;
            ts.insert(t->src[j]);
            if (computes) touched.insert(t->src[j]);
        }
    }
    for (ggml_tensor * t : touched) {
        ggml_tensor * o = t->view_src ? t->view_src : t;
        EXPECT_TRUE(o->buffer && o->buffer->buft == &buft) << "the device read '" << t->name << "' from another device's memory";
    }
    for (ggml_tensor * t : ts) t->data = to_real(t->data);
    ggml_status st;
    if (kernels_fn) {
        st = kernels_fn(g);
    } else {
        ggml_cplan plan = ggml_graph_plan(g, 1);
        std::vector<uint8_t> work(plan.work_size + 64);
        plan.work_data = work.data();
        st = ggml_graph_compute(g, &plan);
    }
    for (ggml_tensor * t : ts) t->data = to_fake(t->data);
    return st;
}

// Its "page-locked" host memory (ggml_backend_dev_host_buffer_type): plain memory of a type of its
// own, so that a test sees which buffers went there.
void host_free(ggml_backend_buffer_t b) { free(b->context); }
void * host_base(ggml_backend_buffer_t b) { return b->context; }
void host_memset(ggml_backend_buffer_t, ggml_tensor * t, uint8_t v, size_t off, size_t n) { memset((char *) t->data + off, v, n); }
void host_set(ggml_backend_buffer_t, ggml_tensor * t, const void * d, size_t off, size_t n) { memcpy((char *) t->data + off, d, n); }
void host_get(ggml_backend_buffer_t, const ggml_tensor * t, void * d, size_t off, size_t n) { memcpy(d, (const char *) t->data + off, n); }
void host_clear(ggml_backend_buffer_t b, uint8_t v) { memset(b->context, v, b->size); }
const ggml_backend_buffer_i host_iface = { host_free, host_base, nullptr, host_memset, host_set, host_get, nullptr, host_clear, nullptr };
const char * host_buft_name(ggml_backend_buffer_type_t) { return "FAKE_Host"; }
ggml_backend_buffer_t host_buft_alloc(ggml_backend_buffer_type_t b, size_t size) {
    void * p = aligned_alloc(64, (std::max<size_t>(size, 1) + 63) / 64 * 64);
    return p ? ggml_backend_buffer_init(b, host_iface, p, size) : nullptr;
}
bool host_buft_is_host(ggml_backend_buffer_type_t) { return true; }
ggml_backend_buffer_type host_buft = { { host_buft_name, host_buft_alloc, buft_align, nullptr, nullptr, host_buft_is_host }, nullptr, nullptr };
ggml_backend_buffer_type_t dev_host_buft(ggml_backend_dev_t) { return &host_buft; }

const char * dev_name(ggml_backend_dev_t) { return "FAKE"; }
const char * dev_desc(ggml_backend_dev_t) { return "simulated GPU (tests)"; }
void dev_mem(ggml_backend_dev_t, size_t * f, size_t * t) { *f = *t = (size_t) 1 << 32; }
enum ggml_backend_dev_type dev_type(ggml_backend_dev_t) { return GGML_BACKEND_DEVICE_TYPE_GPU; }
ggml_backend_buffer_type_t dev_buft(ggml_backend_dev_t) { return &buft; }
bool dev_supports(ggml_backend_dev_t, const ggml_tensor * op) { return supports(op); }
bool dev_supports_buft(ggml_backend_dev_t, ggml_backend_buffer_type_t b) { return b == &buft; }
const char * backend_name(ggml_backend_t) { return "FAKE"; }
void backend_free(ggml_backend_t b) { delete b; }
ggml_backend_t dev_init(ggml_backend_dev_t, const char *) { return init(); }

ggml_backend_device dev = {
    { dev_name, dev_desc, dev_mem, dev_type, dev_init, dev_buft, dev_supports, dev_supports_buft, nullptr, dev_host_buft }, nullptr,
};

}  // namespace

ggml_backend_dev_t device() {
    buft.device = &dev;
    host_buft.device = ggml_backend_cpu_device();
    return &dev;
}

ggml_backend_buffer_type_t buffer_type() {
    device();
    return &buft;
}

ggml_backend_t init() {
    const ggml_backend_i iface = { backend_name, backend_free, nullptr, nullptr, nullptr, compute };
    return new ggml_backend{ iface, device(), nullptr };
}

void set_supports(std::function<bool(const ggml_tensor *)> f) { supports_fn = std::move(f); }
bool supports(const ggml_tensor * op) {
    return (!kernels_supports_fn || kernels_supports_fn(op)) && (!supports_fn || supports_fn(op));
}
void set_kernels(std::function<ggml_status(ggml_cgraph *)> compute, std::function<bool(const ggml_tensor *)> kernels_supports) {
    kernels_fn = std::move(compute);
    kernels_supports_fn = std::move(kernels_supports);
}
std::vector<ggml_op> & ran() { return ran_ops; }
int graphs_computed() { return n_graphs; }
std::vector<std::vector<uint64_t>> & graph_keys() { return keys; }

}  // namespace fake_gpu
