// llama-model-weights.cpp - where a loaded model's weights live: the last n_gpu_layers layers (and
// the output layer when n_gpu_layers > n_layer) in GPU devices' buffers, the CPU's matrices
// repacked for its kernels in a CPU_REPACK buffer, the rest in a CPU buffer over the file's
// mapping (or the memory gguf read them into). Every weight ends with a buffer of usage WEIGHTS,
// so the scheduler runs each layer where its weights are.
#include "llama-model.h"
#include "llama-impl.h"

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>
#include <sys/mman.h>
#include <unistd.h>

namespace {

// One weight to move into a buffer, with where its bytes are now.
struct weight_move {
    ggml_tensor * t;
    const void * src;
    bool keep_src = false;  // the source is still read in place (tied embeddings' input rows)
};

// The GPU devices the model may use: params.devices (a NULL-terminated list) or every GPU of the
// build; with split mode NONE only main_gpu.
std::vector<ggml_backend_dev_t> choose_gpus(const llama_model_params & params) {
    std::vector<ggml_backend_dev_t> all;
    if (params.devices) {
        for (ggml_backend_dev_t * d = params.devices; *d; d++) {
            if (ggml_backend_dev_type(*d) != GGML_BACKEND_DEVICE_TYPE_CPU) all.push_back(*d);
        }
    } else {
        for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
            ggml_backend_dev_t d = ggml_backend_dev_get(i);
            if (ggml_backend_dev_type(d) != GGML_BACKEND_DEVICE_TYPE_CPU) all.push_back(d);
        }
    }
    if (params.split_mode == LLAMA_SPLIT_MODE_NONE && !all.empty()) {
        const int mg = params.main_gpu >= 0 && params.main_gpu < (int) all.size() ? params.main_gpu : 0;
        return { all[(size_t) mg] };
    }
    return all;
}

// Each of n offloaded units (layers, then the output layer) goes to a device in proportion to
// tensor_split (when given) or to the devices' free memory, in device order as in llama.cpp.
std::vector<size_t> split_units(const std::vector<ggml_backend_dev_t> & gpus, const float * tensor_split, int n) {
    std::vector<double> w(gpus.size(), 0.0);
    double sum = 0.0;
    for (size_t i = 0; i < gpus.size(); i++) {
        if (tensor_split) {
            w[i] = std::max(0.0f, tensor_split[i]);
        } else {
            size_t free_mem = 0, total = 0;
            ggml_backend_dev_memory(gpus[i], &free_mem, &total);
            w[i] = (double) free_mem;
        }
        sum += w[i];
    }
    if (sum <= 0.0) {
        std::fill(w.begin(), w.end(), 1.0);
        sum = (double) w.size();
    }
    std::vector<size_t> dev((size_t) n, 0);
    double acc = 0.0;
    size_t d = 0;
    for (int u = 0; u < n; u++) {
        const double pos = (u + 0.5) / n * sum;
        while (d + 1 < gpus.size() && pos >= acc + w[d]) acc += w[d++];
        dev[(size_t) u] = d;
    }
    return dev;
}

// Drops the file pages wholly inside [p, p + n) from a private mapping (the data lives elsewhere
// now; neighbours may share the edge pages).
void drop_file_pages(const void * p, size_t n) {
    const uintptr_t page = (uintptr_t) sysconf(_SC_PAGESIZE);
    const uintptr_t lo = ((uintptr_t) p + page - 1) & ~(page - 1);
    const uintptr_t hi = ((uintptr_t) p + n) & ~(page - 1);
    if (hi > lo) madvise((void *) lo, hi - lo, MADV_DONTNEED);
}

// Maps the file's pages of [p, p + n) now (read from the page cache, or the disk), so that the
// tensors left in the mapping (the token embeddings, the norms) take no page fault as a token
// first reads them: each costs 15-25 us in a VM, and generation reads a new embedding row (page)
// per token (tg64 Q4_K_M: the first node of the graph, get_rows, took 55 us a token). Kernels
// without MADV_POPULATE_READ (before 5.14) keep faulting pages in on first use.
void populate_mapping(const void * p, size_t n) {
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
    const uintptr_t page = (uintptr_t) sysconf(_SC_PAGESIZE);
    const uintptr_t lo = (uintptr_t) p & ~(page - 1), hi = ((uintptr_t) p + n + page - 1) & ~(page - 1);
    if (hi > lo) (void) madvise((void *) lo, hi - lo, MADV_POPULATE_READ);
}

// Allocates one buffer of buft for the weights and copies each in through the buffer (which
// repacks for CPU_REPACK, uploads for a device), tensors shared out between threads.
bool move_weights(llama_model & model, ggml_backend_buffer_type_t buft, const std::vector<weight_move> & ws, bool mapped,
                  size_t & bytes, std::string & err) {
    bytes = 0;
    if (ws.empty()) return true;
    const size_t align = ggml_backend_buft_get_alignment(buft);
    std::vector<size_t> offs;
    size_t total = 0;
    for (const weight_move & w : ws) {
        offs.push_back(total);
        total += (ggml_backend_buft_get_alloc_size(buft, w.t) + align - 1) / align * align;
    }
    ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(buft, total);
    if (!buf) {
        err = std::string("cannot allocate ") + std::to_string(total >> 20) + " MiB of " + ggml_backend_buft_name(buft) +
              " memory for the weights";
        return false;
    }
    ggml_backend_buffer_set_usage(buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    model.bufs.push_back(buf);
    char * base = (char *) ggml_backend_buffer_get_base(buf);
    for (size_t i = 0; i < ws.size(); i++) {
        ws[i].t->data = nullptr;
        ws[i].t->buffer = nullptr;
        if (ggml_backend_tensor_alloc(buf, ws[i].t, base + offs[i]) != GGML_STATUS_SUCCESS) {
            err = std::string("cannot place '") + ws[i].t->name + "' in its buffer";
            return false;
        }
    }
    auto work = [&](size_t first, size_t step) {
        for (size_t i = first; i < ws.size(); i += step) {
            const size_t n = ggml_nbytes(ws[i].t);
            ggml_backend_tensor_set(ws[i].t, ws[i].src, 0, n);
            if (mapped && !ws[i].keep_src) drop_file_pages(ws[i].src, n);
        }
    };
    const size_t n_threads = std::min<size_t>({ std::max(1u, std::thread::hardware_concurrency()), 8, ws.size() });
    std::vector<std::thread> threads;
    for (size_t k = 1; k < n_threads; k++) threads.emplace_back(work, k, n_threads);
    work(0, n_threads);
    for (std::thread & th : threads) th.join();
    bytes = total;
    return true;
}

}  // namespace

std::vector<ggml_tensor *> llama_layer_tensors(const llama_layer & l) {
    std::vector<ggml_tensor *> v;
    for (int k = 0; k < LLM_TENSOR_COUNT; k++) {
        const llm_tensor_info & ti = llm_tensor_get((llm_tensor) k);
        if (ti.layer_field && l.*ti.layer_field) v.push_back(l.*ti.layer_field);
    }
    return v;
}

bool llama_model_place_weights(llama_model & model, const llama_model_params & params, std::string & err) {
    const int64_t t0 = llama_time_us();
    const int n_layer = (int) model.hparams.n_layer;
    const bool mapped = params.use_mmap;

    // ---- which layers go where ----
    const std::vector<ggml_backend_dev_t> gpus = choose_gpus(params);
    int n_gpu = params.n_gpu_layers < 0 ? n_layer + 1 : std::min(params.n_gpu_layers, n_layer + 1);
    if (gpus.empty()) n_gpu = 0;  // a build without GPUs runs every layer on the CPU
    model.layer_dev.assign((size_t) n_layer, nullptr);
    model.output_dev = nullptr;
    model.devices.clear();
    const int i_gpu_start = n_layer - std::min(n_gpu, n_layer);
    if (n_gpu > 0) {
        const std::vector<size_t> where = split_units(gpus, params.tensor_split, n_gpu);
        for (int il = i_gpu_start; il < n_layer; il++) model.layer_dev[(size_t) il] = gpus[where[(size_t) (il - i_gpu_start)]];
        if (n_gpu > n_layer) model.output_dev = gpus[where.back()];
        for (ggml_backend_dev_t d : gpus) {
            const bool used = d == model.output_dev || std::count(model.layer_dev.begin(), model.layer_dev.end(), d) > 0;
            if (used) model.devices.push_back(d);
        }
    }

    // ---- GPU weights: one buffer per device ----
    for (ggml_backend_dev_t d : model.devices) {
        std::vector<weight_move> ws;
        for (int il = 0; il < n_layer; il++) {
            if (model.layer_dev[(size_t) il] != d) continue;
            for (ggml_tensor * t : llama_layer_tensors(model.layers[(size_t) il])) ws.push_back({ t, t->data });
        }
        if (model.output_dev == d) {
            if (model.output_norm) ws.push_back({ model.output_norm, model.output_norm->data });
            if (model.output == model.tok_embd) {
                // Tied embeddings: the input rows stay on the CPU, the output matrix gets its own copy.
                ggml_init_params ip = { ggml_tensor_overhead(), nullptr, true };
                model.ctx_dup = ggml_init(ip);
                model.output = ggml_dup_tensor(model.ctx_dup, model.tok_embd);
                ggml_set_name(model.output, "output.weight");
                ws.push_back({ model.output, model.tok_embd->data, true });
            } else if (model.output) {
                ws.push_back({ model.output, model.output->data });
            }
        }
        size_t bytes = 0;
        if (!move_weights(model, ggml_backend_dev_buffer_type(d), ws, mapped, bytes, err)) return false;
        LLAMA_LOG_INFO("llama_model_load: %s model buffer %.2f MiB\n", ggml_backend_dev_name(d), bytes / 1048576.0);
    }

    // ---- CPU matrices repacked for this build's kernels ----
    // Only matrices read by nothing but mul_mat qualify (not tied embeddings). Mapped ones move to
    // a CPU_REPACK buffer (anonymous memory on huge pages); read ones are repacked where they are.
    // Mapped float matrices, which have no repacked layout, move there too: generation streams
    // them from the file's 4 KiB pages ~15% slower (F16 tg on a Xeon: 8.3 against 9.6 t/s).
    if (params.use_repack) {
        auto moves = [&](const ggml_tensor * t) {
            if (ggml_cpu_can_repack(t)) return true;
            const bool flt = t && (t->type == GGML_TYPE_F32 || t->type == GGML_TYPE_F16 || t->type == GGML_TYPE_BF16);
            return mapped && flt && t->data && t->view_src == nullptr && t->ne[1] > 1;
        };
        std::vector<weight_move> mats;
        for (int il = 0; il < n_layer; il++) {
            if (model.layer_dev[(size_t) il]) continue;
            const llama_layer & l = model.layers[(size_t) il];
            // The table's matrices, the stacked experts too (each expert a run of 16-row groups,
            // read by mul_mat_id through the same kernels).
            for (int k = 0; k < LLM_TENSOR_COUNT; k++) {
                const llm_tensor_info & ti = llm_tensor_get((llm_tensor) k);
                if (!ti.layer_field || ti.use != llm_tensor_use::matrix) continue;
                ggml_tensor * t = l.*ti.layer_field;
                if (t && t->ne[1] > 1 && moves(t)) mats.push_back({ t, t->data });
            }
        }
        if (!model.output_dev && model.output && model.output != model.tok_embd && moves(model.output)) {
            mats.push_back({ model.output, model.output->data });
        }
        if (!mats.empty()) {
            const int64_t tr = llama_time_us();
            size_t bytes = 0;
            if (mapped) {
                std::string rerr;
                if (!move_weights(model, ggml_backend_cpu_repack_buffer_type(), mats, true, bytes, rerr)) {
                    LLAMA_LOG_WARN("llama_model_load: %s: keeping the file's layout\n", rerr.c_str());
                    for (const weight_move & w : mats) {  // back to the mapping
                        w.t->data = const_cast<void *>(w.src);
                        w.t->buffer = nullptr;
                    }
                    bytes = 0;
                }
            } else {
                for (const weight_move & w : mats) {
                    ggml_cpu_repack(w.t);
                    bytes += ggml_nbytes(w.t);
                }
            }
            if (bytes > 0) {
                size_t n_repacked = 0;
                for (const weight_move & w : mats) n_repacked += (w.t->flags & GGML_TENSOR_FLAG_REPACKED) != 0;
                LLAMA_LOG_INFO("llama_model_load: %zu matrices (%.1f MiB) in own memory, %zu repacked for the %s kernels, in %.0f ms\n",
                               mats.size(), bytes / 1048576.0, n_repacked, ggml_cpu_isa_name(), (llama_time_us() - tr) / 1000.0);
            }
        }
    }

    // ---- everything else: a CPU buffer over the memory the weights are in ----
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(model.ctx_w); t; t = ggml_get_next_tensor(model.ctx_w, t)) {
        if (t->buffer || !t->data) continue;
        lo = std::min(lo, (uintptr_t) t->data);
        hi = std::max(hi, (uintptr_t) t->data + ggml_nbytes(t));
    }
    if (hi > lo) {
        ggml_backend_buffer_t buf = ggml_backend_cpu_buffer_from_ptr((void *) lo, hi - lo);
        ggml_backend_buffer_set_usage(buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        model.bufs.push_back(buf);
        for (ggml_tensor * t = ggml_get_first_tensor(model.ctx_w); t; t = ggml_get_next_tensor(model.ctx_w, t)) {
            if (t->buffer || !t->data) continue;
            t->buffer = buf;
            if (mapped) populate_mapping(t->data, ggml_nbytes(t));  // not the range between: moved matrices' pages are dropped
        }
    }

    if (!model.devices.empty()) {
        LLAMA_LOG_INFO("llama_model_load: offloaded %d/%d layers to %s%s in %.0f ms\n", n_gpu, n_layer + 1,
                       ggml_backend_dev_name(model.devices[0]), model.devices.size() > 1 ? " and others" : "",
                       (llama_time_us() - t0) / 1000.0);
    }
    return true;
}
