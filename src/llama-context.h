// llama-context.h - an evaluation context: the KV cache, the graph memory (planned once for the
// largest batch), the compute work buffer, the logits of the last batch and the timings.
#pragma once

#include "llama.h"
#include "llama-adapter.h"
#include "llama-graph.h"
#include "llama-kv-cache.h"

#include "ggml-backend.h"

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

struct llama_model;

// Floats in host memory of a buffer type (a GPU's page-locked memory, which copies from the device
// reach by DMA), grown as needed; plain memory where no type is set. Contents are not kept across
// a resize that grows.
class llama_host_floats {
public:
    ggml_backend_buffer_type_t buft = nullptr;
    llama_host_floats() = default;
    llama_host_floats(const llama_host_floats &) = delete;
    llama_host_floats & operator=(const llama_host_floats &) = delete;
    ~llama_host_floats() { ggml_backend_buffer_free(buf); }
    void resize(size_t n);
    float * data() { return buf ? (float *) ggml_backend_buffer_get_base(buf) : plain.data(); }
private:
    std::vector<float> plain;
    ggml_backend_buffer_t buf = nullptr;
};

// The groups of a micro-batch's attention and their inputs (llm_attn_groups; llama-context.cpp).
struct llama_group_plan {
    llm_attn_groups sizes;  // n_groups 0: the ordinary path
    std::vector<std::vector<uint32_t>> tokens, cells;
    std::vector<int32_t> q_rows, kv_rows, out_rows;
    std::vector<float> mask, mask_swa;
};

struct llama_context {
    const llama_model & model;

    uint32_t n_ctx = 0;
    uint32_t n_batch = 0;          // most tokens per llama_decode call
    uint32_t n_ubatch = 0;         // most tokens per graph
    uint32_t n_seq_max = 1;        // sequence ids are [0, n_seq_max)
    int32_t n_threads = 1;         // for single-token batches
    int32_t n_threads_batch = 1;   // for larger ones
    bool logits_all = false;       // keep every token's logits when the batch does not say
    bool no_perf = true;           // no timings
    ggml_abort_callback abort_callback = nullptr;
    void * abort_callback_data = nullptr;

    llm_rope_params rope;  // the model's RoPE with llama_context_params' overrides
    llama_kv_cache kv;
    llm_lora_set loras;  // adapters applied to every decode (llama_set_adapter_lora)

    // The backends (the CPU, last, runs what the others do not) and the scheduler that
    // allocates and computes each graph over them.
    ggml_backend_t backend_cpu = nullptr;
    std::vector<ggml_backend_t> backends;
    ggml_backend_sched_t sched = nullptr;
    std::vector<uint8_t> graph_meta;  // memory of the no_alloc graph contexts (tensor structs, graph)

    // Outputs of the last llama_decode: logits rows in batch order, and for each batch token the
    // row holding its logits (-1: not kept).
    llama_host_floats logits;  // in the first GPU's page-locked memory when the model uses one
    std::vector<int32_t> output_rows;
    int32_t n_outputs = 0;
    // With embeddings on: the hidden states of the output tokens (pooling NONE: rows of n_embd in
    // the order of logits' rows), or one pooled row per sequence of the last batch (embd_seq).
    bool embeddings = false;
    bool causal_attn = true;
    enum llama_pooling_type pooling = LLAMA_POOLING_TYPE_NONE;
    std::vector<float> embd;
    std::map<llama_seq_id, std::vector<float>> embd_seq;

    // A generated token's graph, kept for the next token (graph reuse, as llama.cpp): with the
    // cells attended to padded to a multiple of GRAPH_REUSE_PAD, successive tokens differ only in
    // their inputs (the cells their keys and values go to among them: io.kv_idxs). Building
    // or placing any other graph drops it (graph_context, alloc_graph); LLAMA_GRAPH_REUSE_DISABLE
    // in the environment turns it off.
    struct reused_graph {
        bool valid = false;
        ggml_cgraph * gf = nullptr;
        llm_graph_io io;
        uint32_t n_kv = 0;                     // cells attended to (padded)
        std::vector<llm_lora_entry> loras;     // the adapters it was built with
    } reuse;
    bool reuse_disabled = false;
    int64_t n_graphs_reused = 0;

    // Host-side staging of the graph inputs.
    std::vector<int32_t> inp_pos;
    std::vector<int32_t> inp_out_ids;
    std::vector<float> inp_mask;
    std::vector<int32_t> inp_kv_idxs;  // staging of the cells a batch is written to
    std::vector<llama_kv_cache::seq_set> inp_seqs;  // each batch token's sequences
    std::vector<llama_seq_id> inp_seq_first;        // and the first of them (whose cells it sees)
    std::vector<llama_pos> inp_seq_last;            // each sequence's last position (decode's checks)
    llama_group_plan groups;                        // attention by groups (several sequences)

    // Timings.
    int64_t t_start_us = 0;
    int64_t t_p_eval_us = 0;
    int64_t t_eval_us = 0;
    int32_t n_p_eval = 0;
    int32_t n_eval = 0;

    explicit llama_context(const llama_model & m) : model(m) {}
    ~llama_context();
    llama_context(const llama_context &) = delete;
    llama_context & operator=(const llama_context &) = delete;
};
