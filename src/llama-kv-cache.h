// llama-kv-cache.h - the keys and values of the evaluated tokens, one sequence.
//
// Layout per layer: K is [n_embd_k_gqa, size] (one row per cell, RoPE already applied). V is
// stored transposed, [size, n_embd_v_gqa], for F32/F16 so that attention multiplies it without
// a copy; a block type (Q8_0) cannot be written one element per row, so V is then stored like
// K and converted for attention. With flash attention V is always stored like K: the fused op
// reads rows of both as they are.
//
// The used cells are always [0, used): removing tokens compacts the remaining cells (moving
// their data), so a batch is appended at `used` as one contiguous range. Causality comes from
// the positions (a token sees the cells whose position is <= its own), not from cell order.
#pragma once

#include "llama.h"
#include "ggml-backend.h"

#include <cstdint>
#include <string>
#include <vector>

struct llama_hparams;

struct llama_kv_cache {
    ggml_type type_k = GGML_TYPE_F16;
    ggml_type type_v = GGML_TYPE_F16;
    uint32_t size = 0;          // cells (n_ctx)
    uint32_t n_embd_k_gqa = 0;
    uint32_t n_embd_v_gqa = 0;
    bool v_trans = true;        // V stored transposed (F32, F16 without flash attention)
    bool flash_attn = false;    // attention through ggml_flash_attn_ext (V stored like K)

    std::vector<ggml_tensor *> k_l;  // per layer
    std::vector<ggml_tensor *> v_l;

    std::vector<llama_pos> pos;    // position of each used cell
    std::vector<llama_pos> delta;  // RoPE shift not yet applied to each cell's key
    uint32_t used = 0;
    bool has_shift = false;

    llama_kv_cache() = default;
    ~llama_kv_cache();
    llama_kv_cache(const llama_kv_cache &) = delete;
    llama_kv_cache & operator=(const llama_kv_cache &) = delete;

    // Allocates (and zeroes) the cache, layer il's K and V in memory of layer_buft[il]; false with
    // a message in err.
    bool init(const llama_hparams & hp, uint32_t n_ctx, ggml_type type_k, ggml_type type_v, bool flash_attn,
              const std::vector<ggml_backend_buffer_type_t> & layer_buft, std::string & err);
    size_t total_size() const { return buf_size; }

    void clear();
    llama_pos pos_max() const;  // -1 when empty
    uint32_t n_free() const { return size - used; }

    // Cells [used, used + n) hold the given positions (their data is written by the graph).
    void append(const llama_pos * positions, uint32_t n);
    // Drops the last n cells again (a failed evaluation).
    void drop_tail(uint32_t n);

    // Removes the cells with positions in [p0, p1); p1 < 0 means no upper bound.
    void seq_rm(llama_pos p0, llama_pos p1);
    // Adds delta to the positions in [p0, p1); cells whose position becomes negative are removed.
    void seq_add(llama_pos p0, llama_pos p1, llama_pos delta);
    // Divides the positions in [p0, p1) by d > 1.
    void seq_div(llama_pos p0, llama_pos p1, int d);
    // After the K shift graph ran.
    void shift_applied();

private:
    // Keeps the cells with keep[i], moving them (data included) to the front in order.
    void compact(const std::vector<bool> & keep);

    std::vector<ggml_context *> ctxs;          // one per buffer type
    std::vector<ggml_backend_buffer_t> bufs;   // the layers' K and V, one buffer per buffer type
    size_t buf_size = 0;
};
