// llama-context.cpp - contexts, batches, llama_decode (split into micro-batches of at most
// n_batch tokens, each one graph), logits, the KV cache API and the timings.
#include "llama-context.h"
#include "llama-graph.h"
#include "llama-impl.h"
#include "llama-model.h"

#include "ggml-cpu.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <thread>

#include <unistd.h>

namespace {

int32_t default_n_threads() {
    const unsigned hc = std::thread::hardware_concurrency();
    return hc == 0 ? 4 : (int32_t) std::min(hc, 8u);
}

// Threads beyond the cores only wait on each other at every node's barrier (hundreds of times
// slower with a spinning barrier): warn and use the cores.
int32_t usable_threads(int32_t n_threads) {
    const unsigned hw = std::thread::hardware_concurrency();
    if (n_threads <= 0) return default_n_threads();
    if (hw > 0 && (unsigned) n_threads > hw) {
        LLAMA_LOG_WARN("llama: %d threads asked for on %u cores: using %u\n", n_threads, hw, hw);
        return (int32_t) hw;
    }
    return n_threads;
}

// Bytes of physical memory (0 when unknown).
double physical_memory() {
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (double) pages * (double) page : 0.0;
#else
    return 0.0;
#endif
}

// A no_alloc context over the context's graph memory (where a kept graph lives: it goes).
ggml_context * graph_context(llama_context & lctx) {
    lctx.reuse.valid = false;
    ggml_init_params ip = { lctx.graph_meta.size(), lctx.graph_meta.data(), true };
    return ggml_init(ip);
}

// Computes an allocated graph on the context's backends (the CPU with n_threads).
ggml_status compute_graph(llama_context & lctx, ggml_cgraph * gf, int32_t n_threads) {
    ggml_backend_cpu_set_n_threads(lctx.backend_cpu, n_threads);
    ggml_backend_cpu_set_abort_callback(lctx.backend_cpu, lctx.abort_callback, lctx.abort_callback_data);
    const ggml_status st = ggml_backend_sched_graph_compute(lctx.sched, gf);
    if (st != GGML_STATUS_SUCCESS && st != GGML_STATUS_ABORTED) {
        LLAMA_LOG_ERROR("llama_decode: graph compute failed (status %d)\n", (int) st);
    }
    return st;
}

// Assigns the graph's nodes to backends and places its tensors (the previous graph's are gone).
bool alloc_graph(llama_context & lctx, ggml_cgraph * gf) {
    lctx.reuse.valid = false;
    ggml_backend_sched_reset(lctx.sched);
    return ggml_backend_sched_alloc_graph(lctx.sched, gf);
}

// Re-rotates the cached keys whose positions moved (llama_kv_self_seq_add / _div).
bool apply_k_shift(llama_context & lctx) {
    llama_kv_cache & kv = lctx.kv;
    const uint32_t n_cells = kv.cells_end();
    if (n_cells == 0) {
        kv.shift_applied();
        return true;
    }
    ggml_context * ctx = graph_context(lctx);
    if (!ctx) return false;
    ggml_tensor * deltas = nullptr;
    ggml_cgraph * gf = llm_build_k_shift(ctx, lctx.model, kv, n_cells, &deltas, &lctx.rope);
    bool ok = alloc_graph(lctx, gf);
    if (ok) {
        ggml_backend_tensor_set(deltas, kv.delta.data(), 0, n_cells * sizeof(int32_t));
        ok = compute_graph(lctx, gf, lctx.n_threads_batch) == GGML_STATUS_SUCCESS;
    }
    ggml_free(ctx);
    if (ok) kv.shift_applied();
    return ok;
}

// Pending K shift, then a requested defragmentation (llama_kv_self_update, and before a decode).
bool update_cache(llama_context & lctx) {
    if (lctx.kv.has_shift && !apply_k_shift(lctx)) return false;
    if (lctx.kv.do_defrag) {
        lctx.kv.defrag();
        lctx.reuse.valid = false;  // a kept graph's cells are not where they were
    }
    return true;
}

// Cells a generated token's graph attends to are a multiple of this (the rest masked): a graph
// serves the next 32 tokens at most 31 masked cells more. With the cache in a GPU's memory, 256:
// there masked cells cost next to nothing, and a graph seen again is replayed as a CUDA graph.
constexpr uint32_t GRAPH_REUSE_PAD = 32;
constexpr uint32_t GRAPH_REUSE_PAD_DEVICE = 256;

bool kv_on_device(const llama_kv_cache & kv) {
    for (const ggml_tensor * t : kv.k_l) {
        if (t->buffer && !ggml_backend_buffer_is_host(t->buffer)) return true;
    }
    return false;
}

bool same_loras(const std::vector<llm_lora_entry> & a, const std::vector<llm_lora_entry> & b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); i++) {
        if (a[i].adapter != b[i].adapter || a[i].scale != b[i].scale) return false;
    }
    return true;
}

// Attention by groups (llm_attn_groups) for a micro-batch of n tokens: each group is the tokens
// that attend as one sequence, and its cells that sequence's (those after the group's last
// position left out under causal attention). Chosen where V is stored as rows (a context of
// several sequences, no flash attention) and the groups score fewer cells than the ordinary
// path would (n tokens against n_kv cells) and gather at most twice the cache's cells; a
// generated token's cells are padded like n_kv so that its graph serves the next tokens.
void plan_groups(const llama_context & lctx, const llama_pos * pos, const llama_seq_id * seq_first, uint32_t n,
                 uint32_t n_kv, uint32_t pad, bool generation, llama_group_plan & gp) {
    const llama_kv_cache & kv = lctx.kv;
    gp.sizes = llm_attn_groups();
    if (kv.v_trans || kv.flash_attn || lctx.n_seq_max == 1) return;
    std::vector<int32_t> group_of(LLAMA_MAX_SEQ, -1);
    std::vector<llama_pos> last;  // each group's last position
    gp.tokens.clear();
    gp.cells.clear();
    for (uint32_t t = 0; t < n; t++) {
        int32_t & g = group_of[(size_t) seq_first[t]];
        if (g < 0) {
            g = (int32_t) gp.tokens.size();
            gp.tokens.emplace_back();
            last.push_back(pos[t]);
        }
        gp.tokens[(size_t) g].push_back(t);
        last[(size_t) g] = std::max(last[(size_t) g], pos[t]);
    }
    const uint32_t n_g = (uint32_t) gp.tokens.size();
    gp.cells.assign(n_g, {});
    const uint32_t end = kv.cells_end();
    for (uint32_t c = 0; c < end; c++) {
        if (kv.pos[c] < 0) continue;
        for (uint32_t g = 0; g < n_g; g++) {
            const llama_seq_id s = seq_first[gp.tokens[g][0]];
            if (kv.seq[c].test((size_t) s) && (!lctx.causal_attn || kv.pos[c] <= last[g])) gp.cells[g].push_back(c);
        }
    }
    uint32_t n_tq = 0, n_kc = 0;
    for (uint32_t g = 0; g < n_g; g++) {
        n_tq = std::max(n_tq, (uint32_t) gp.tokens[g].size());
        n_kc = std::max(n_kc, (uint32_t) gp.cells[g].size());
    }
    if (generation) n_kc = std::min(kv.size, (n_kc + pad - 1) / pad * pad);
    // The gathered rows are bounded by twice the cache (what the graph memory is planned for:
    // sequences sharing a long prompt each gather it).
    if (n_kc == 0 || (uint64_t) n_g * n_tq * n_kc >= (uint64_t) n * n_kv || (uint64_t) n_g * n_kc > 2ull * kv.size) return;
    gp.sizes.n_groups = n_g;
    gp.sizes.n_tq = n_tq;
    gp.sizes.n_kc = n_kc;

    // The inputs. A padding row sees its group's first cell only (a row of -inf would be NaN).
    const float neg_inf = -std::numeric_limits<float>::infinity();
    const bool swa = lctx.model.hparams.n_swa > 0;
    gp.q_rows.assign((size_t) n_tq * n_g, 0);
    gp.kv_rows.assign((size_t) n_kc * n_g, 0);
    gp.out_rows.assign(n, 0);
    gp.mask.assign((size_t) n_kc * n_tq * n_g, neg_inf);
    gp.mask_swa.assign(swa ? gp.mask.size() : 0, neg_inf);
    std::vector<int32_t> cell_pos(n_kc);
    for (uint32_t g = 0; g < n_g; g++) {
        const std::vector<uint32_t> & cells = gp.cells[g];
        for (uint32_t i = 0; i < n_kc; i++) {
            const uint32_t c = i < cells.size() ? cells[i] : cells[0];
            gp.kv_rows[(size_t) g * n_kc + i] = (int32_t) c;
            cell_pos[i] = kv.pos[c];
        }
        for (uint32_t j = 0; j < n_tq; j++) {
            const size_t r = (size_t) g * n_tq + j;
            float * row = gp.mask.data() + r * n_kc;
            if (j >= gp.tokens[g].size()) {
                row[0] = 0.0f;
                if (swa) gp.mask_swa[r * n_kc] = 0.0f;
                continue;
            }
            const uint32_t t = gp.tokens[g][j];
            gp.q_rows[r] = (int32_t) t;
            gp.out_rows[t] = (int32_t) r;
            const llama_pos p_max = lctx.causal_attn ? pos[t] : std::numeric_limits<llama_pos>::max();
            for (uint32_t i = 0; i < cells.size(); i++) row[i] = cell_pos[i] <= p_max ? 0.0f : neg_inf;
            if (swa) {
                float * row_swa = gp.mask_swa.data() + r * n_kc;
                memcpy(row_swa, row, n_kc * sizeof(float));
                llm_mask_window(lctx.model, row_swa, cell_pos.data(), (uint32_t) cells.size(), pos[t]);
            }
        }
    }
}

// Fills the group inputs of a built graph (host or device memory alike).
// Those the graph reads: a one-layer model's batch without outputs reads none.
void set_group_inputs(const llm_attn_groups & g, const llama_group_plan & gp) {
    const auto set = [](ggml_tensor * t, const void * data, size_t bytes) {
        if (t && t->data) ggml_backend_tensor_set(t, data, 0, bytes);
    };
    set(g.q_rows, gp.q_rows.data(), gp.q_rows.size() * sizeof(int32_t));
    set(g.kv_rows, gp.kv_rows.data(), gp.kv_rows.size() * sizeof(int32_t));
    set(g.out_rows, gp.out_rows.data(), gp.out_rows.size() * sizeof(int32_t));
    set(g.mask, gp.mask.data(), gp.mask.size() * sizeof(float));
    set(g.mask_swa, gp.mask_swa.data(), gp.mask_swa.size() * sizeof(float));
}

// One micro-batch: tokens [0, n) with positions pos and sequences seqs, whose outputs are the
// batch-local indices out_ids; their rows (logits of n_vocab, or in embeddings mode hidden states of
// n_embd) go to dst. The cells the tokens
// take are appended to cells (for the caller to release if the batch fails).
ggml_status decode_ubatch(llama_context & lctx, const llama_token * tokens, const llama_pos * pos,
                          const llama_kv_cache::seq_set * seqs, const llama_seq_id * seq_first, uint32_t n,
                          const std::vector<int32_t> & out_ids, float * dst, std::vector<int32_t> & cells) {
    llama_kv_cache & kv = lctx.kv;
    const uint32_t n_out = (uint32_t) out_ids.size();
    kv.place(pos, seqs, n, lctx.inp_kv_idxs);
    cells.insert(cells.end(), lctx.inp_kv_idxs.begin(), lctx.inp_kv_idxs.end());
    // A generated token attends to the cells padded up (the padding masked), so that the next
    // tokens can reuse its graph; a batch attends to exactly the cells in use.
    const bool generation = n == 1 && n_out == 1;
    const uint32_t pad = kv_on_device(kv) ? GRAPH_REUSE_PAD_DEVICE : GRAPH_REUSE_PAD;
    const uint32_t end = kv.cells_end();
    const uint32_t n_kv = generation ? std::min(kv.size, (end + pad - 1) / pad * pad) : end;
    llama_group_plan & gp = lctx.groups;
    plan_groups(lctx, pos, seq_first, n, n_kv, pad, generation, gp);

    llama_context::reused_graph & reuse = lctx.reuse;
    const bool reusable = generation && !lctx.reuse_disabled && reuse.valid && reuse.n_kv == n_kv &&
                          reuse.io.groups.n_groups == gp.sizes.n_groups && reuse.io.groups.n_kc == gp.sizes.n_kc &&
                          reuse.io.want_embd == lctx.embeddings && same_loras(reuse.loras, lctx.loras.entries);
    ggml_cgraph * gf = nullptr;
    llm_graph_io io_batch;  // a batch's; a generated token's graph is built into reuse.io
    llm_graph_io & io = generation ? reuse.io : io_batch;
    if (reusable) {
        gf = reuse.gf;
        lctx.n_graphs_reused++;
    } else {
        // Adapters add nodes: grow the graph memory when they need more than planned.
        const size_t max_nodes = llm_graph_max_nodes(lctx.model, lctx.loras.entries.size());
        const size_t meta = ggml_tensor_overhead() * max_nodes * 2 + ggml_graph_overhead_custom(max_nodes, false);
        if (meta > lctx.graph_meta.size()) lctx.graph_meta.resize(meta);
        ggml_context * ctx = graph_context(lctx);
        if (!ctx) return GGML_STATUS_ALLOC_FAILED;
        io.want_embd = lctx.embeddings;
        io.groups = gp.sizes;
        gf = llm_build_forward(ctx, lctx.model, kv, n, n_kv, n_out, io, &lctx.loras, &lctx.rope);
        ggml_free(ctx);  // the tensors stay in graph_meta until the next graph is built there
        if (!alloc_graph(lctx, gf)) return GGML_STATUS_ALLOC_FAILED;
        if (generation) {
            reuse.gf = gf;
            reuse.n_kv = n_kv;
            reuse.loras = lctx.loras.entries;
            reuse.valid = true;
        }
    }

    ggml_backend_tensor_set(io.tokens, tokens, 0, n * sizeof(int32_t));
    ggml_backend_tensor_set(io.pos, pos, 0, n * sizeof(int32_t));
    ggml_backend_tensor_set(io.kv_idxs, lctx.inp_kv_idxs.data(), 0, n * sizeof(int32_t));
    // Mask: token t sees cell c when the cell belongs to the token's (first) sequence and its
    // position is not after the token's (llama.cpp's rule: a token in several sequences attends
    // as one of the first); without causal attention, every cell of that sequence. Written in
    // place when the mask is in host memory, else staged. (A one-layer model's batch without
    // outputs reads no mask: the graph then only writes the keys and values.)
    const bool swa_used = io.kq_mask_swa && io.kq_mask_swa->data;
    const bool mask_used = io.kq_mask->data != nullptr || swa_used;
    const bool mask_host = io.kq_mask->buffer && ggml_backend_buffer_is_host(io.kq_mask->buffer);
    if (!mask_host) lctx.inp_mask.resize((size_t) n * n_kv);
    float * mask = mask_host ? (float *) io.kq_mask->data : lctx.inp_mask.data();
    const float neg_inf = -std::numeric_limits<float>::infinity();
    for (uint32_t t = 0; t < n && mask_used; t++) {
        float * row = mask + (size_t) t * n_kv;
        const size_t s = (size_t) seq_first[t];
        const uint32_t lim = std::min(n_kv, end);
        const llama_pos p_max = lctx.causal_attn ? pos[t] : std::numeric_limits<llama_pos>::max();
        for (uint32_t c = 0; c < lim; c++) row[c] = kv.pos[c] >= 0 && kv.pos[c] <= p_max && kv.seq[c].test(s) ? 0.0f : neg_inf;
        for (uint32_t c = lim; c < n_kv; c++) row[c] = neg_inf;
    }
    if (!mask_host && io.kq_mask->data) ggml_backend_tensor_set(io.kq_mask, mask, 0, (size_t) n * n_kv * sizeof(float));
    // Sliding-window layers' mask: the same, less the cells the window leaves behind.
    if (swa_used) {
        const bool swa_host = io.kq_mask_swa->buffer && ggml_backend_buffer_is_host(io.kq_mask_swa->buffer);
        std::vector<float> staged;
        float * swa = swa_host ? (float *) io.kq_mask_swa->data : (staged.resize((size_t) n * n_kv), staged.data());
        const uint32_t lim = std::min(n_kv, end);
        for (uint32_t t = 0; t < n; t++) {
            float * row = swa + (size_t) t * n_kv;
            memcpy(row, mask + (size_t) t * n_kv, n_kv * sizeof(float));
            llm_mask_window(lctx.model, row, kv.pos.data(), lim, pos[t]);
        }
        if (!swa_host) ggml_backend_tensor_set(io.kq_mask_swa, swa, 0, (size_t) n * n_kv * sizeof(float));
    }
    if (io.out_ids) ggml_backend_tensor_set(io.out_ids, out_ids.data(), 0, n_out * sizeof(int32_t));
    if (io.groups.n_groups > 0) set_group_inputs(io.groups, gp);

    const ggml_status st = compute_graph(lctx, gf, n == 1 ? lctx.n_threads : lctx.n_threads_batch);
    if (st == GGML_STATUS_SUCCESS && n_out > 0) {
        ggml_tensor * out = lctx.embeddings ? io.embd : io.logits;
        ggml_backend_tensor_get(out, dst, 0, ggml_nbytes(out));
    }
    return st;
}

// One embedding per sequence of the batch from its tokens' rows in lctx.embd (every token is an
// output): their mean, the first one's (CLS) or the last one's.
void pool_embeddings(llama_context & lctx, const llama_seq_id * seq_first, int32_t n) {
    const size_t n_embd = lctx.model.hparams.n_embd;
    lctx.embd_seq.clear();
    std::map<llama_seq_id, int32_t> count;
    for (int32_t i = 0; i < n; i++) {
        const llama_seq_id s = seq_first[i];
        const float * row = lctx.embd.data() + (size_t) lctx.output_rows[i] * n_embd;
        std::vector<float> & e = lctx.embd_seq[s];
        const bool first = count[s]++ == 0;
        if (first) e.assign(n_embd, 0.0f);
        switch (lctx.pooling) {
            case LLAMA_POOLING_TYPE_MEAN:
                for (size_t k = 0; k < n_embd; k++) e[k] += row[k];
                break;
            case LLAMA_POOLING_TYPE_CLS:
                if (first) e.assign(row, row + n_embd);
                break;
            default:  // LAST
                e.assign(row, row + n_embd);
                break;
        }
    }
    if (lctx.pooling == LLAMA_POOLING_TYPE_MEAN) {
        for (auto & kv : lctx.embd_seq) {
            for (float & v : kv.second) v /= (float) count[kv.first];
        }
    }
}

// A sequence id that names one of the context's sequences (any < 0 where any_ok); a message for
// the API function fn otherwise.
bool seq_id_ok(const llama_context * ctx, llama_seq_id s, const char * fn, bool any_ok) {
    if ((s < 0 && any_ok) || (s >= 0 && (uint32_t) s < ctx->n_seq_max)) return true;
    LLAMA_LOG_ERROR("%s: sequence id %d is out of range [0, %u) (n_seq_max)\n", fn, s, ctx->n_seq_max);
    return false;
}

}  // namespace

void llama_host_floats::resize(size_t n) {
    if (!buft) {
        plain.resize(n);
        return;
    }
    if (buf && ggml_backend_buffer_get_size(buf) >= n * sizeof(float)) return;
    ggml_backend_buffer_free(buf);
    buf = ggml_backend_buft_alloc_buffer(buft, std::max<size_t>(n, 1) * sizeof(float));
    if (!buf) {  // no page-locked memory to be had: plain memory does as well, only slower
        LLAMA_LOG_WARN("llama_context: %zu floats of %s memory not allocated, using plain memory\n", n, ggml_backend_buft_name(buft));
        buft = nullptr;
        plain.resize(n);
    }
}

llama_context::~llama_context() {
    ggml_backend_sched_free(sched);
    for (ggml_backend_t b : backends) ggml_backend_free(b);
}

// ---- creation ------------------------------------------------------------------------------
llama_context_params llama_context_default_params(void) {
    llama_context_params p;
    p.n_ctx = 2048;
    p.n_batch = 2048;
    p.n_ubatch = 512;
    p.n_seq_max = 1;
    p.n_threads = default_n_threads();
    p.n_threads_batch = p.n_threads;
    p.rope_scaling_type = LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED;
    p.pooling_type = LLAMA_POOLING_TYPE_UNSPECIFIED;
    p.attention_type = LLAMA_ATTENTION_TYPE_UNSPECIFIED;
    p.rope_freq_base = 0.0f;
    p.rope_freq_scale = 0.0f;
    p.yarn_ext_factor = -1.0f;
    p.yarn_attn_factor = 1.0f;
    p.yarn_beta_fast = 32.0f;
    p.yarn_beta_slow = 1.0f;
    p.yarn_orig_ctx = 0;
    p.defrag_thold = -1.0f;
    p.cb_eval = nullptr;
    p.cb_eval_user_data = nullptr;
    p.type_k = GGML_TYPE_F16;
    p.type_v = GGML_TYPE_F16;
    p.logits_all = false;
    p.embeddings = false;
    p.offload_kqv = true;
    p.flash_attn = false;
    p.no_perf = true;
    p.abort_callback = nullptr;
    p.abort_callback_data = nullptr;
    return p;
}

namespace {

// RoPE as llama.cpp's context sets it: a base or scale of 0 keeps the model's; a scaling type
// (unless unspecified) replaces the file's, NONE never scales; a negative YaRN extrapolation
// factor means 1 for YaRN and 0 otherwise; the attention factor is the context's times the file's.
llm_rope_params context_rope(const llama_model & model, const llama_context_params & p, uint32_t n_ctx_seq) {
    const llama_hparams & hp = model.hparams;
    llm_rope_params r = llm_rope_from_model(model, n_ctx_seq);
    r.freq_base = p.rope_freq_base != 0.0f ? p.rope_freq_base : hp.rope_freq_base;
    r.freq_scale = p.rope_freq_scale != 0.0f ? p.rope_freq_scale : hp.rope_freq_scale;
    const llama_rope_scaling_type type =
        p.rope_scaling_type == LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED ? hp.rope_scaling : p.rope_scaling_type;
    if (type == LLAMA_ROPE_SCALING_TYPE_NONE) r.freq_scale = 1.0f;
    r.ext_factor = p.yarn_ext_factor >= 0.0f ? p.yarn_ext_factor : type == LLAMA_ROPE_SCALING_TYPE_YARN ? 1.0f : 0.0f;
    r.attn_factor = p.yarn_attn_factor * hp.rope_attn_factor;
    r.beta_fast = p.yarn_beta_fast;
    r.beta_slow = p.yarn_beta_slow;
    r.n_ctx_orig = p.yarn_orig_ctx != 0 ? p.yarn_orig_ctx : hp.rope_n_ctx_orig != 0 ? hp.rope_n_ctx_orig : hp.n_ctx_train;
    return r;
}

}  // namespace

llama_context * llama_init_from_model(llama_model * model, llama_context_params params) {
    if (!model) {
        LLAMA_LOG_ERROR("llama_init_from_model: no model\n");
        return nullptr;
    }
    const llama_hparams & hp = model->hparams;
    llama_context * lctx = new llama_context(*model);
    lctx->t_start_us = llama_time_us();
    lctx->n_ctx = params.n_ctx ? params.n_ctx : hp.n_ctx_train;
    if (model->vocab_only && lctx->n_ctx == 0) lctx->n_ctx = 512;  // a vocabulary file may have no training context
    if (lctx->n_ctx > (1u << 24)) {
        LLAMA_LOG_ERROR("llama_init_from_model: n_ctx %u is too large\n", lctx->n_ctx);
        delete lctx;
        return nullptr;
    }
    if (lctx->n_ctx > hp.n_ctx_train && !model->vocab_only) {
        LLAMA_LOG_WARN("llama_init_from_model: n_ctx %u is larger than the training context %u\n", lctx->n_ctx,
                       hp.n_ctx_train);
    }
    lctx->n_batch = std::min(params.n_batch ? params.n_batch : 2048u, lctx->n_ctx);
    lctx->n_ubatch = std::min(params.n_ubatch ? params.n_ubatch : lctx->n_batch, lctx->n_batch);
    lctx->n_threads = usable_threads(params.n_threads);
    lctx->n_threads_batch = params.n_threads_batch > 0 ? usable_threads(params.n_threads_batch) : lctx->n_threads;
    lctx->logits_all = params.logits_all;
    lctx->n_seq_max = std::max(1u, params.n_seq_max);
    lctx->embeddings = params.embeddings;
    lctx->causal_attn = params.attention_type == LLAMA_ATTENTION_TYPE_UNSPECIFIED ? hp.causal_attn
                                                                                  : params.attention_type == LLAMA_ATTENTION_TYPE_CAUSAL;
    lctx->pooling = params.pooling_type == LLAMA_POOLING_TYPE_UNSPECIFIED ? hp.pooling_type : params.pooling_type;
    if (lctx->pooling < LLAMA_POOLING_TYPE_NONE || lctx->pooling > LLAMA_POOLING_TYPE_LAST) {
        LLAMA_LOG_ERROR("llama_init_from_model: pooling type %d is not supported (none, mean, cls, last; rank needs a "
                        "classifier head)\n", (int) lctx->pooling);
        delete lctx;
        return nullptr;
    }
    if (lctx->n_seq_max > LLAMA_MAX_SEQ) {
        LLAMA_LOG_ERROR("llama_init_from_model: n_seq_max %u is more than the %u sequences a context can hold\n", params.n_seq_max,
                        LLAMA_MAX_SEQ);
        delete lctx;
        return nullptr;
    }
    lctx->no_perf = params.no_perf;
    lctx->abort_callback = params.abort_callback;
    lctx->abort_callback_data = params.abort_callback_data;
    lctx->rope = context_rope(*model, params, lctx->n_ctx / lctx->n_seq_max);
    if (!(lctx->rope.freq_base > 0.0f) || !(lctx->rope.freq_scale > 0.0f) || !std::isfinite(lctx->rope.ext_factor) ||
        !std::isfinite(lctx->rope.attn_factor) || !std::isfinite(lctx->rope.beta_fast) || !std::isfinite(lctx->rope.beta_slow)) {
        LLAMA_LOG_ERROR("llama_init_from_model: invalid RoPE parameters (freq_base %g, freq_scale %g)\n",
                        lctx->rope.freq_base, lctx->rope.freq_scale);
        delete lctx;
        return nullptr;
    }
    if (model->vocab_only) {
        // As llama.cpp: a context on a vocabulary-only model (a tokenizer's programs make one), with
        // no cache, backends or graphs; llama_decode refuses it.
        LLAMA_LOG_INFO("llama_init_from_model: a vocabulary-only model: a context for tokenizing, without a KV cache\n");
        return lctx;
    }

    // A cache that cannot fit in memory is refused before anything is allocated.
    // (Unknown types are reported by the cache's own check below.)
    auto bytes_per_value = [](ggml_type t) { return ggml_type_name(t) ? (double) ggml_type_size(t) / (double) ggml_blck_size(t) : 0.0; };
    const double kv_bytes = (double) lctx->n_ctx * hp.n_layer *
                            (bytes_per_value(params.type_k) * hp.n_embd_k_gqa() + bytes_per_value(params.type_v) * hp.n_embd_v_gqa());
    const double mem = physical_memory();
    if (mem > 0 && kv_bytes > mem) {
        LLAMA_LOG_ERROR("llama_init_from_model: a context of %u tokens needs a %.1f GiB KV cache, more than this machine's "
                        "%.1f GiB of memory (the model was trained on %u tokens)\n",
                        lctx->n_ctx, kv_bytes / (1024.0 * 1024 * 1024), mem / (1024.0 * 1024 * 1024), hp.n_ctx_train);
        delete lctx;
        return nullptr;
    }

    std::string err;
    // The backends: one per GPU device holding layers (in the model's order of preference),
    // then the CPU, which runs whatever the others do not.
    for (ggml_backend_dev_t d : model->devices) {
        ggml_backend_t b = ggml_backend_dev_init(d, nullptr);
        if (!b) {
            LLAMA_LOG_ERROR("llama_init_from_model: cannot initialise device %s\n", ggml_backend_dev_name(d));
            delete lctx;
            return nullptr;
        }
        lctx->backends.push_back(b);
    }
    lctx->backend_cpu = ggml_backend_cpu_init();
    lctx->backends.push_back(lctx->backend_cpu);
    ggml_backend_cpu_set_n_threads(lctx->backend_cpu, lctx->n_threads_batch);

    // Each layer's cache next to its weights (offload_kqv), else in host memory.
    std::vector<ggml_backend_buffer_type_t> kv_buft(hp.n_layer, ggml_backend_get_default_buffer_type(lctx->backend_cpu));
    if (params.offload_kqv) {
        for (uint32_t il = 0; il < hp.n_layer && il < model->layer_dev.size(); il++) {
            if (model->layer_dev[il]) kv_buft[il] = ggml_backend_dev_buffer_type(model->layer_dev[il]);
        }
    }
    if (!lctx->kv.init(hp, lctx->n_ctx, params.type_k, params.type_v, params.flash_attn, kv_buft, err, lctx->n_seq_max)) {
        LLAMA_LOG_ERROR("llama_init_from_model: %s\n", err.c_str());
        delete lctx;
        return nullptr;
    }

    // Plan the graph memory once for the largest graph: n_ubatch tokens, all with logits,
    // attending to the full context.
    lctx->reuse_disabled = getenv("LLAMA_GRAPH_REUSE_DISABLE") != nullptr;
    const size_t max_nodes = llm_graph_max_nodes(*model);
    lctx->graph_meta.resize(ggml_tensor_overhead() * max_nodes * 2 + ggml_graph_overhead_custom(max_nodes, false));
    // With layers on a GPU, the CPU's compute buffer and the logits in that GPU's page-locked host
    // memory (as llama.cpp): the embeddings go to the GPU and the logits come back by DMA.
    std::vector<ggml_backend_buffer_type_t> bufts;
    for (ggml_backend_t b : lctx->backends) bufts.push_back(ggml_backend_get_default_buffer_type(b));
    if (ggml_backend_buffer_type_t host = model->devices.empty() ? nullptr : ggml_backend_dev_host_buffer_type(model->devices[0])) {
        bufts.back() = host;
        lctx->logits.buft = host;
    }
    lctx->sched = ggml_backend_sched_new(lctx->backends.data(), bufts.data(), (int) lctx->backends.size(), max_nodes, false, false);
    // cb_eval sees the nodes as they are computed (llama.cpp's eval-callback and imatrix use it).
    if (lctx->sched && params.cb_eval) ggml_backend_sched_set_eval_callback(lctx->sched, params.cb_eval, params.cb_eval_user_data);
    ggml_context * ctx = graph_context(*lctx);
    bool ok = lctx->sched && ctx;
    if (ok) {
        llm_graph_io io;
        ggml_cgraph * gf = llm_build_forward(ctx, *model, lctx->kv, lctx->n_ubatch, lctx->n_ctx, lctx->n_ubatch, io, nullptr, &lctx->rope);
        ok = ggml_backend_sched_reserve(lctx->sched, gf);
    }
    ggml_free(ctx);
    // And for attention by groups (several sequences, V as rows): one group of all the tokens,
    // and two of half of them, each gathering the whole cache (plan_groups' bounds: as many
    // scores as the graph above, twice the cache's rows).
    for (uint32_t n_groups = 1; ok && n_groups <= 2 && !lctx->kv.v_trans && !lctx->kv.flash_attn && lctx->n_seq_max > 1; n_groups++) {
        ctx = graph_context(*lctx);
        ok = ctx != nullptr;
        if (ok) {
            llm_graph_io io;
            io.groups.n_groups = n_groups;
            io.groups.n_tq = (lctx->n_ubatch + n_groups - 1) / n_groups;
            io.groups.n_kc = lctx->n_ctx;
            ggml_cgraph * gf = llm_build_forward(ctx, *model, lctx->kv, lctx->n_ubatch, lctx->n_ctx, lctx->n_ubatch, io, nullptr, &lctx->rope);
            ok = ggml_backend_sched_reserve(lctx->sched, gf);
        }
        ggml_free(ctx);
    }
    if (!ok) {
        LLAMA_LOG_ERROR("llama_init_from_model: cannot allocate the compute buffers\n");
        delete lctx;
        return nullptr;
    }

    std::string compute;
    for (ggml_backend_t b : lctx->backends) {
        char part[96];
        snprintf(part, sizeof(part), "%s%.2f MiB (%s)", compute.empty() ? "" : ", ",
                 ggml_backend_sched_get_buffer_size(lctx->sched, b) / (1024.0 * 1024.0), ggml_backend_name(b));
        compute += part;
    }
    LLAMA_LOG_INFO("llama_init_from_model: n_ctx %u, n_batch %u, n_ubatch %u, n_threads %d/%d, KV cache %.2f MiB (K %s, V %s), "
                   "flash_attn %d, compute buffer %s\n",
                   lctx->n_ctx, lctx->n_batch, lctx->n_ubatch, lctx->n_threads, lctx->n_threads_batch,
                   lctx->kv.total_size() / (1024.0 * 1024.0),
                   ggml_type_name(params.type_k), ggml_type_name(params.type_v), (int) params.flash_attn, compute.c_str());
    return lctx;
}

llama_context * llama_new_context_with_model(llama_model * model, llama_context_params params) {
    return llama_init_from_model(model, params);
}

void llama_free(llama_context * ctx) { delete ctx; }

uint32_t llama_n_ctx(const llama_context * ctx) { return ctx->n_ctx; }
uint32_t llama_n_batch(const llama_context * ctx) { return ctx->n_batch; }
uint32_t llama_n_ubatch(const llama_context * ctx) { return ctx->n_ubatch; }
uint32_t llama_n_seq_max(const llama_context * ctx) { return ctx->n_seq_max; }
const llama_model * llama_get_model(const llama_context * ctx) { return &ctx->model; }
enum llama_pooling_type llama_pooling_type(const llama_context * ctx) { return ctx->pooling; }

void llama_set_n_threads(llama_context * ctx, int32_t n_threads, int32_t n_threads_batch) {
    ctx->n_threads = usable_threads(n_threads);
    ctx->n_threads_batch = usable_threads(n_threads_batch);
}
int32_t llama_n_threads(llama_context * ctx) { return ctx->n_threads; }
int32_t llama_n_threads_batch(llama_context * ctx) { return ctx->n_threads_batch; }

void llama_set_abort_callback(llama_context * ctx, ggml_abort_callback abort_callback, void * abort_callback_data) {
    ctx->abort_callback = abort_callback;
    ctx->abort_callback_data = abort_callback_data;
}

void llama_synchronize(llama_context * ctx) { (void) ctx; }

// ---- batches -------------------------------------------------------------------------------
llama_batch llama_batch_get_one(llama_token * tokens, int32_t n_tokens) {
    llama_batch b = {};
    b.n_tokens = n_tokens;
    b.token = tokens;
    return b;
}

llama_batch llama_batch_init(int32_t n_tokens, int32_t embd, int32_t n_seq_max) {
    llama_batch b = {};
    const size_t n = n_tokens > 0 ? (size_t) n_tokens : 1;
    const size_t n_seq = n_seq_max > 0 ? (size_t) n_seq_max : 1;
    if (embd > 0) {
        b.embd = (float *) calloc(n * (size_t) embd, sizeof(float));
    } else {
        b.token = (llama_token *) calloc(n, sizeof(llama_token));
    }
    b.pos = (llama_pos *) calloc(n, sizeof(llama_pos));
    b.n_seq_id = (int32_t *) calloc(n, sizeof(int32_t));
    b.seq_id = (llama_seq_id **) calloc(n + 1, sizeof(llama_seq_id *));  // NULL-terminated
    for (size_t i = 0; i < n; i++) {
        b.n_seq_id[i] = 1;
        b.seq_id[i] = (llama_seq_id *) calloc(n_seq, sizeof(llama_seq_id));
    }
    b.logits = (int8_t *) calloc(n, sizeof(int8_t));
    return b;
}

void llama_batch_free(llama_batch batch) {
    free(batch.token);
    free(batch.embd);
    free(batch.pos);
    free(batch.n_seq_id);
    if (batch.seq_id) {
        for (size_t i = 0; batch.seq_id[i]; i++) free(batch.seq_id[i]);
        free(batch.seq_id);
    }
    free(batch.logits);
}

// ---- evaluation ----------------------------------------------------------------------------
int32_t llama_decode(llama_context * ctx, llama_batch batch) {
    if (ctx->model.vocab_only) {
        LLAMA_LOG_ERROR("llama_decode: the model was loaded with vocab_only (no weights): nothing to evaluate\n");
        return -1;
    }
    llama_kv_cache & kv = ctx->kv;
    const int32_t n_vocab = (int32_t) ctx->model.hparams.n_vocab;
    const int32_t n = batch.n_tokens;
    if (!batch.token && batch.embd) {
        LLAMA_LOG_ERROR("llama_decode: embeddings input (batch.embd) is not supported: give token ids\n");
        return -1;
    }
    if (n <= 0 || !batch.token) {
        LLAMA_LOG_ERROR("llama_decode: empty batch\n");
        return -1;
    }
    if ((uint32_t) n > ctx->n_batch) {
        LLAMA_LOG_ERROR("llama_decode: a batch of %d tokens is more than n_batch %u\n", n, ctx->n_batch);
        return -1;
    }
    for (int32_t i = 0; i < n; i++) {
        if (batch.token[i] < 0 || batch.token[i] >= n_vocab) {
            LLAMA_LOG_ERROR("llama_decode: token %d at batch index %d is out of range [0, %d)\n", batch.token[i], i, n_vocab);
            return -1;
        }
    }
    if (!ctx->model.output && !ctx->embeddings) {
        LLAMA_LOG_ERROR("llama_decode: %s is an embedding model (no output head, no logits): turn embeddings on "
                        "(llama_context_params.embeddings, llama_set_embeddings)\n", ctx->model.arch_name.c_str());
        return -1;
    }
    if (!ctx->causal_attn && (uint32_t) n > ctx->n_ubatch) {
        LLAMA_LOG_ERROR("llama_decode: without causal attention a batch must fit one micro-batch: %d tokens, n_ubatch %u\n", n,
                        ctx->n_ubatch);
        return -1;
    }
    // The sequences of each token (sequence 0 where the batch names none).
    std::vector<llama_kv_cache::seq_set> & seqs = ctx->inp_seqs;
    std::vector<llama_seq_id> & seq_first = ctx->inp_seq_first;
    seqs.assign((size_t) n, llama_kv_cache::seq_set());
    seq_first.assign((size_t) n, 0);
    for (int32_t i = 0; i < n; i++) {
        if (!batch.seq_id) {
            seqs[i].set(0);
            continue;
        }
        const int32_t n_seq = batch.n_seq_id ? batch.n_seq_id[i] : 1;
        if (n_seq <= 0 || !batch.seq_id[i]) {
            LLAMA_LOG_ERROR("llama_decode: batch token %d belongs to no sequence (n_seq_id %d)\n", i, n_seq);
            return -1;
        }
        for (int32_t j = 0; j < n_seq; j++) {
            const llama_seq_id s = batch.seq_id[i][j];
            if (s < 0 || (uint32_t) s >= ctx->n_seq_max) {
                LLAMA_LOG_ERROR("llama_decode: batch token %d has sequence id %d, out of range [0, %u) (n_seq_max)\n", i, s,
                                ctx->n_seq_max);
                return -1;
            }
            seqs[i].set((size_t) s);
        }
        seq_first[i] = batch.seq_id[i][0];
    }
    // Where each sequence ends in the cache: a batch continues its sequences (positions given or
    // following the last of the token's first sequence), never going back inside one (equal
    // positions are allowed: llama_kv_self_seq_div makes them, and llama.cpp takes them).
    // (One pass over the cells, looking only at the batch's sequences.)
    std::vector<llama_pos> & last = ctx->inp_seq_last;
    last.assign(ctx->n_seq_max, -1);
    llama_kv_cache::seq_set in_batch;
    for (int32_t i = 0; i < n; i++) in_batch |= seqs[i];
    std::vector<uint32_t> batch_seqs;
    for (uint32_t s = 0; s < ctx->n_seq_max; s++) {
        if (in_batch.test(s)) batch_seqs.push_back(s);
    }
    for (uint32_t c = 0; c < kv.size; c++) {
        if (kv.empty(c) || (kv.seq[c] & in_batch).none()) continue;
        for (uint32_t s : batch_seqs) {
            if (kv.seq[c].test(s) && kv.pos[c] > last[s]) last[s] = kv.pos[c];
        }
    }
    std::vector<llama_pos> & pos = ctx->inp_pos;
    pos.resize((size_t) n);
    for (int32_t i = 0; i < n; i++) {
        if (batch.pos) {
            pos[i] = batch.pos[i];
            if (pos[i] < 0) {
                LLAMA_LOG_ERROR("llama_decode: negative position %d at batch index %d\n", pos[i], i);
                return -1;
            }
        } else {
            if (last[seq_first[i]] == std::numeric_limits<llama_pos>::max()) {
                LLAMA_LOG_ERROR("llama_decode: positions overflow\n");
                return -1;
            }
            pos[i] = last[seq_first[i]] + 1;
        }
        for (uint32_t s : batch_seqs) {
            if (!seqs[i].test(s)) continue;
            if (pos[i] < last[s]) {
                LLAMA_LOG_ERROR("llama_decode: batch token %d has position %d in sequence %u, which already reaches position %d "
                                "(positions cannot go back within a sequence: remove the later ones first, llama_kv_self_seq_rm)\n",
                                i, pos[i], s, last[s]);
                return -1;
            }
            last[s] = pos[i];
        }
        // Learned positions (BERT) exist only up to the training context.
        if (ctx->model.pos_embd && pos[i] >= (llama_pos) ctx->model.hparams.n_ctx_train) {
            LLAMA_LOG_ERROR("llama_decode: batch token %d has position %d, but %s learned positions only up to %u "
                            "(its context_length)\n", i, pos[i], ctx->model.arch_name.c_str(), ctx->model.hparams.n_ctx_train - 1);
            return -1;
        }
    }

    const int64_t t0 = ctx->no_perf ? 0 : llama_time_us();
    if (!update_cache(*ctx)) return -2;
    if ((uint32_t) n > kv.n_free()) {
        LLAMA_LOG_WARN("llama_decode: no room for %d tokens in the KV cache (%u of %u cells free)\n", n, kv.n_free(), kv.size);
        return 1;  // the caller makes room (removes or shifts tokens, or clears)
    }

    // Which tokens keep logits (or embeddings), and their rows. Pooled embeddings need every token.
    const bool pooled = ctx->embeddings && ctx->pooling != LLAMA_POOLING_TYPE_NONE;
    ctx->output_rows.assign((size_t) n, -1);
    int32_t n_outputs = 0;
    for (int32_t i = 0; i < n; i++) {
        const bool keep = pooled || (batch.logits ? batch.logits[i] != 0 : (ctx->logits_all || i == n - 1));
        if (keep) ctx->output_rows[i] = n_outputs++;
    }
    ctx->n_outputs = n_outputs;
    const size_t row_size = ctx->embeddings ? ctx->model.hparams.n_embd : (size_t) n_vocab;
    float * rows = nullptr;
    if (ctx->embeddings) {
        ctx->embd.resize((size_t) n_outputs * row_size);
        rows = ctx->embd.data();
    } else {
        ctx->logits.resize((size_t) n_outputs * row_size);
        rows = ctx->logits.data();
    }

    std::vector<int32_t> cells;  // taken by this batch (released if it fails)
    std::vector<int32_t> & out_ids = ctx->inp_out_ids;
    for (int32_t start = 0; start < n; start += (int32_t) ctx->n_ubatch) {
        const int32_t n_ub = std::min<int32_t>((int32_t) ctx->n_ubatch, n - start);
        out_ids.clear();
        for (int32_t i = 0; i < n_ub; i++) {
            if (ctx->output_rows[start + i] >= 0) out_ids.push_back(i);
        }
        float * dst = out_ids.empty() ? nullptr : rows + (size_t) ctx->output_rows[start + out_ids[0]] * row_size;
        const ggml_status st = decode_ubatch(*ctx, batch.token + start, pos.data() + start, seqs.data() + start,
                                             seq_first.data() + start, (uint32_t) n_ub, out_ids, dst, cells);
        if (st != GGML_STATUS_SUCCESS) {
            kv.release(cells);
            ctx->n_outputs = 0;
            ctx->output_rows.assign((size_t) n, -1);
            ctx->embd_seq.clear();
            return st == GGML_STATUS_ABORTED ? 2 : -2;
        }
    }
    if (pooled) pool_embeddings(*ctx, seq_first.data(), n);

    const int64_t dt = ctx->no_perf ? 0 : llama_time_us() - t0;
    if (n > 1) {
        ctx->t_p_eval_us += dt;
        ctx->n_p_eval += n;
    } else {
        ctx->t_eval_us += dt;
        ctx->n_eval += 1;
    }
    return 0;
}

float * llama_get_logits(llama_context * ctx) { return ctx->n_outputs > 0 && !ctx->embeddings ? ctx->logits.data() : nullptr; }

// The output row of batch token i (negative: from the end), -1 with a message for fn.
static int32_t output_row(const llama_context * ctx, int32_t i, const char * fn) {
    const int32_t n = (int32_t) ctx->output_rows.size();
    const int32_t j = i < 0 ? i + n : i;
    if (j < 0 || j >= n) {
        LLAMA_LOG_ERROR("%s: index %d is out of range for the last batch of %d tokens\n", fn, i, n);
        return -1;
    }
    if (ctx->output_rows[j] < 0) LLAMA_LOG_ERROR("%s: the outputs of batch token %d were not kept\n", fn, j);
    return ctx->output_rows[j];
}

float * llama_get_embeddings(llama_context * ctx) {
    return ctx->embeddings && ctx->pooling == LLAMA_POOLING_TYPE_NONE && ctx->n_outputs > 0 ? ctx->embd.data() : nullptr;
}

float * llama_get_embeddings_ith(llama_context * ctx, int32_t i) {
    if (!ctx->embeddings || ctx->pooling != LLAMA_POOLING_TYPE_NONE) {
        LLAMA_LOG_ERROR("llama_get_embeddings_ith: no per-token embeddings (%s)\n",
                        ctx->embeddings ? "pooled: llama_get_embeddings_seq" : "embeddings are off: llama_set_embeddings");
        return nullptr;
    }
    const int32_t row = output_row(ctx, i, "llama_get_embeddings_ith");
    return row < 0 ? nullptr : ctx->embd.data() + (size_t) row * ctx->model.hparams.n_embd;
}

float * llama_get_embeddings_seq(llama_context * ctx, llama_seq_id seq_id) {
    auto it = ctx->embd_seq.find(seq_id);
    return it == ctx->embd_seq.end() ? nullptr : it->second.data();
}

void llama_set_embeddings(llama_context * ctx, bool embeddings) {
    if (ctx->embeddings != embeddings) ctx->n_outputs = 0;  // the last batch's rows are the other kind
    ctx->embeddings = embeddings;
}

void llama_set_causal_attn(llama_context * ctx, bool causal_attn) { ctx->causal_attn = causal_attn; }

float * llama_get_logits_ith(llama_context * ctx, int32_t i) {
    if (ctx->embeddings) {
        LLAMA_LOG_ERROR("llama_get_logits_ith: embeddings mode keeps no logits\n");
        return nullptr;
    }
    const int32_t n = (int32_t) ctx->output_rows.size();
    const int32_t j = i < 0 ? i + n : i;
    if (j < 0 || j >= n) {
        LLAMA_LOG_ERROR("llama_get_logits_ith: index %d is out of range for the last batch of %d tokens\n", i, n);
        return nullptr;
    }
    const int32_t row = ctx->output_rows[j];
    if (row < 0) {
        LLAMA_LOG_ERROR("llama_get_logits_ith: the logits of batch token %d were not kept\n", j);
        return nullptr;
    }
    return ctx->logits.data() + (size_t) row * ctx->model.hparams.n_vocab;
}

// ---- KV cache ------------------------------------------------------------------------------
// llama.cpp's two sets of names: llama_kv_cache_* (build 4747) and llama_kv_self_* (later).
int32_t llama_kv_self_n_tokens(const llama_context * ctx) {
    // Tokens as sequences see them: a cell shared by k sequences counts k times (as llama.cpp).
    int32_t n = 0;
    for (uint32_t i = 0; i < ctx->kv.size; i++) n += (int32_t) ctx->kv.seq[i].count();
    return n;
}
int32_t llama_kv_self_used_cells(const llama_context * ctx) { return (int32_t) ctx->kv.used; }

void llama_kv_self_clear(llama_context * ctx) { ctx->kv.clear(); }

bool llama_kv_self_seq_rm(llama_context * ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1) {
    if (!seq_id_ok(ctx, seq_id, "llama_kv_self_seq_rm", true)) return false;
    ctx->kv.seq_rm(seq_id, p0, p1);
    return true;
}

void llama_kv_self_seq_cp(llama_context * ctx, llama_seq_id seq_id_src, llama_seq_id seq_id_dst, llama_pos p0, llama_pos p1) {
    if (!seq_id_ok(ctx, seq_id_src, "llama_kv_self_seq_cp", false) || !seq_id_ok(ctx, seq_id_dst, "llama_kv_self_seq_cp", false)) return;
    ctx->kv.seq_cp(seq_id_src, seq_id_dst, p0, p1);
}

void llama_kv_self_seq_keep(llama_context * ctx, llama_seq_id seq_id) {
    if (!seq_id_ok(ctx, seq_id, "llama_kv_self_seq_keep", false)) return;
    ctx->kv.seq_keep(seq_id);
}

// Whether the cache's positions can move (llama_kv_self_can_shift), with a message for fn if not.
static bool can_shift(llama_context * ctx, const char * fn) {
    if (llama_kv_self_can_shift(ctx)) return true;
    LLAMA_LOG_ERROR("%s: %s has learned positions, not RoPE: cached tokens cannot change position (nothing done)\n", fn,
                    ctx->model.arch_name.c_str());
    return false;
}

void llama_kv_self_seq_add(llama_context * ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1, llama_pos delta) {
    if (!seq_id_ok(ctx, seq_id, "llama_kv_self_seq_add", true)) return;
    if (delta != 0 && !can_shift(ctx, "llama_kv_self_seq_add")) return;
    ctx->kv.seq_add(seq_id, p0, p1, delta);
}

void llama_kv_self_seq_div(llama_context * ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1, int d) {
    if (!seq_id_ok(ctx, seq_id, "llama_kv_self_seq_div", true)) return;
    if (d != 1 && !can_shift(ctx, "llama_kv_self_seq_div")) return;
    if (d <= 0) {
        LLAMA_LOG_ERROR("llama_kv_self_seq_div: divisor %d must be positive\n", d);
        return;
    }
    ctx->kv.seq_div(seq_id, p0, p1, d);
}

llama_pos llama_kv_self_seq_pos_min(const llama_context * ctx, llama_seq_id seq_id) {
    return seq_id_ok(ctx, seq_id, "llama_kv_self_seq_pos_min", true) ? ctx->kv.seq_pos_min(seq_id) : -1;
}

llama_pos llama_kv_self_seq_pos_max(const llama_context * ctx, llama_seq_id seq_id) {
    return seq_id_ok(ctx, seq_id, "llama_kv_self_seq_pos_max", true) ? ctx->kv.seq_pos_max(seq_id) : -1;
}

void llama_kv_self_defrag(llama_context * ctx) { ctx->kv.do_defrag = true; }

void llama_kv_self_update(llama_context * ctx) {
    if (!update_cache(*ctx)) LLAMA_LOG_ERROR("llama_kv_self_update: the K shift failed\n");
}

// Keys rotated by RoPE can move; learned positions (BERT) are in the hidden states and cannot.
bool llama_kv_self_can_shift(const llama_context * ctx) { return ctx && ctx->model.hparams.rope_type >= 0; }

int32_t llama_get_kv_cache_token_count(const llama_context * ctx) { return llama_kv_self_n_tokens(ctx); }
int32_t llama_get_kv_cache_used_cells(const llama_context * ctx) { return llama_kv_self_used_cells(ctx); }
void llama_kv_cache_clear(llama_context * ctx) { llama_kv_self_clear(ctx); }
bool llama_kv_cache_seq_rm(llama_context * ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1) {
    return llama_kv_self_seq_rm(ctx, seq_id, p0, p1);
}
void llama_kv_cache_seq_cp(llama_context * ctx, llama_seq_id seq_id_src, llama_seq_id seq_id_dst, llama_pos p0, llama_pos p1) {
    llama_kv_self_seq_cp(ctx, seq_id_src, seq_id_dst, p0, p1);
}
void llama_kv_cache_seq_keep(llama_context * ctx, llama_seq_id seq_id) { llama_kv_self_seq_keep(ctx, seq_id); }
void llama_kv_cache_seq_add(llama_context * ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1, llama_pos delta) {
    llama_kv_self_seq_add(ctx, seq_id, p0, p1, delta);
}
void llama_kv_cache_seq_div(llama_context * ctx, llama_seq_id seq_id, llama_pos p0, llama_pos p1, int d) {
    llama_kv_self_seq_div(ctx, seq_id, p0, p1, d);
}
llama_pos llama_kv_cache_seq_pos_max(llama_context * ctx, llama_seq_id seq_id) { return llama_kv_self_seq_pos_max(ctx, seq_id); }
void llama_kv_cache_defrag(llama_context * ctx) { llama_kv_self_defrag(ctx); }
void llama_kv_cache_update(llama_context * ctx) { llama_kv_self_update(ctx); }
bool llama_kv_cache_can_shift(llama_context * ctx) { return llama_kv_self_can_shift(ctx); }

// ---- timings -------------------------------------------------------------------------------
llama_perf_context_data llama_perf_context(const llama_context * ctx) {
    llama_perf_context_data d;
    d.t_start_ms = ctx->t_start_us / 1e3;
    d.t_load_ms = ctx->model.t_load_us / 1e3;
    d.t_p_eval_ms = ctx->t_p_eval_us / 1e3;
    d.t_eval_ms = ctx->t_eval_us / 1e3;
    d.n_p_eval = ctx->n_p_eval;
    d.n_eval = ctx->n_eval;
    return d;
}

void llama_perf_context_print(const llama_context * ctx) {
    const llama_perf_context_data d = llama_perf_context(ctx);
    auto per_token = [](double ms, int32_t n) { return n > 0 ? ms / n : 0.0; };
    auto per_second = [](double ms, int32_t n) { return ms > 0 ? 1e3 * n / ms : 0.0; };
    LLAMA_LOG_INFO("llama_perf_context_print:        load time = %10.2f ms\n", d.t_load_ms);
    LLAMA_LOG_INFO("llama_perf_context_print: prompt eval time = %10.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per second)\n",
                   d.t_p_eval_ms, d.n_p_eval, per_token(d.t_p_eval_ms, d.n_p_eval), per_second(d.t_p_eval_ms, d.n_p_eval));
    LLAMA_LOG_INFO("llama_perf_context_print:        eval time = %10.2f ms / %5d runs   (%8.2f ms per token, %8.2f tokens per second)\n",
                   d.t_eval_ms, d.n_eval, per_token(d.t_eval_ms, d.n_eval), per_second(d.t_eval_ms, d.n_eval));
    LLAMA_LOG_INFO("llama_perf_context_print:       total time = %10.2f ms\n", (llama_time_us() - ctx->t_start_us) / 1e3);
}

void llama_perf_context_reset(llama_context * ctx) {
    ctx->t_start_us = llama_time_us();
    ctx->t_p_eval_us = ctx->t_eval_us = 0;
    ctx->n_p_eval = ctx->n_eval = 0;
}
