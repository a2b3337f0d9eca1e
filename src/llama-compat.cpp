// llama-compat.cpp - the parts of llama.cpp's C API (build 4747) that programs written on its
// common/ library call and that the rest of the runtime does not already provide: NUMA
// initialisation, attaching thread pools, the KV cache view, the encoder entry point, control
// vectors, split model files and quantization parameters. Where this runtime lacks the feature
// the call fails with llama.cpp's failure value and says so in the log.
#include "llama.h"
#include "llama-context.h"
#include "llama-impl.h"
#include "llama-model.h"

#include "ggml-cpu.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

// ---- backend, NUMA, thread pools ---------------------------------------------------------------
void llama_numa_init(enum ggml_numa_strategy numa) {
    if (numa != GGML_NUMA_STRATEGY_DISABLED) ggml_numa_init(numa);
}

// The context's CPU backend computes on the pool (with at most its thread count); the batch pool
// when one is given, since the context keeps one pool for every batch.
void llama_attach_threadpool(struct llama_context * ctx, ggml_threadpool_t threadpool, ggml_threadpool_t threadpool_batch) {
    if (!ctx || !ctx->backend_cpu) return;
    ggml_threadpool_t pool = threadpool_batch ? threadpool_batch : threadpool;
    ggml_backend_cpu_set_threadpool(ctx->backend_cpu, pool);
    if (pool && threadpool && threadpool != pool) ggml_threadpool_pause(threadpool);  // unused: its workers sleep
}

void llama_detach_threadpool(struct llama_context * ctx) {
    if (ctx && ctx->backend_cpu) ggml_backend_cpu_set_threadpool(ctx->backend_cpu, nullptr);
}

// ---- models --------------------------------------------------------------------------------
struct llama_model * llama_model_load_from_splits(const char ** paths, size_t n_paths, struct llama_model_params params) {
    if (!paths || n_paths == 0) {
        LLAMA_LOG_ERROR("llama_model_load_from_splits: the list of files is empty\n");
        return nullptr;
    }
    if (n_paths > 1) {
        LLAMA_LOG_ERROR("llama_model_load_from_splits: models split into several files (%zu given) are not supported\n", n_paths);
        return nullptr;
    }
    return llama_model_load_from_file(paths[0], params);
}

// ---- adapters ------------------------------------------------------------------------------
int32_t llama_apply_adapter_cvec(struct llama_context * ctx, const float * data, size_t len, int32_t n_embd, int32_t il_start,
                                 int32_t il_end) {
    (void) ctx;
    (void) len;
    (void) n_embd;
    (void) il_start;
    (void) il_end;
    if (data == nullptr) return 0;  // clearing: no control vector is ever applied
    LLAMA_LOG_ERROR("llama_apply_adapter_cvec: control vectors are not supported\n");
    return -1;
}

// ---- the KV cache view -----------------------------------------------------------------------
struct llama_kv_cache_view llama_kv_cache_view_init(const struct llama_context * ctx, int32_t n_seq_max) {
    (void) ctx;
    llama_kv_cache_view view;
    memset(&view, 0, sizeof(view));
    view.n_seq_max = std::max<int32_t>(n_seq_max, 0);
    view.max_contiguous_idx = -1;
    return view;
}

void llama_kv_cache_view_free(struct llama_kv_cache_view * view) {
    if (!view) return;
    free(view->cells);
    free(view->cells_sequences);
    view->cells = nullptr;
    view->cells_sequences = nullptr;
    view->n_cells = 0;
}

void llama_kv_cache_view_update(const struct llama_context * ctx, struct llama_kv_cache_view * view) {
    if (!ctx || !view) return;
    const llama_kv_cache & kv = ctx->kv;
    const int32_t n = (int32_t) kv.size;
    if (view->n_cells != n || !view->cells) {
        llama_kv_cache_view_free(view);
        view->cells = (llama_kv_cache_view_cell *) calloc(std::max(n, 1), sizeof(llama_kv_cache_view_cell));
        view->cells_sequences = (llama_seq_id *) calloc((size_t) std::max(n, 1) * std::max(view->n_seq_max, 1), sizeof(llama_seq_id));
        GGML_ASSERT(view->cells && view->cells_sequences);
        view->n_cells = n;
    }
    int32_t tokens = 0, used = 0, run = 0, best = 0, best_idx = -1;
    for (int32_t i = 0; i < n; i++) {
        const bool empty = kv.pos[i] < 0 || kv.seq[i].none();
        view->cells[i].pos = empty ? -1 : kv.pos[i];
        llama_seq_id * seqs = view->cells_sequences + (size_t) i * view->n_seq_max;
        int32_t k = 0;
        if (!empty) {
            used++;
            for (size_t s = 0; s < kv.seq[i].size(); s++) {
                if (!kv.seq[i].test(s)) continue;
                tokens++;
                if (k < view->n_seq_max) seqs[k++] = (llama_seq_id) s;
            }
        }
        for (; k < view->n_seq_max; k++) seqs[k] = -1;
        if (empty) {
            if (++run > best) {
                best = run;
                best_idx = i - run + 1;
            }
        } else {
            run = 0;
        }
    }
    view->token_count = tokens;
    view->used_cells = used;
    view->max_contiguous = best;
    view->max_contiguous_idx = best_idx;
}

// ---- the encoder -----------------------------------------------------------------------------
int32_t llama_encode(struct llama_context * ctx, struct llama_batch batch) {
    (void) batch;
    if (ctx && !llama_model_has_encoder(&ctx->model)) {
        LLAMA_LOG_ERROR("llama_encode: the model has no encoder (a decoder-only model: use llama_decode)\n");
    }
    return -1;
}
