// llama-kv-cache.h - the keys and values of the evaluated tokens, for up to LLAMA_MAX_SEQ
// sequences in one set of cells (llama.cpp's unified cache).
//
// Layout per layer: K is [n_embd_k_gqa, size] (one row per cell, RoPE already applied). V is
// stored transposed, [size, n_embd_v_gqa], for F32/F16 so that attention multiplies it without
// a copy; a block type (Q8_0) cannot be written one element per row, so V is then stored like
// K and converted for attention. With flash attention V is always stored like K: the fused op
// reads rows of both as they are. So it is too in a context of several sequences: attention then
// gathers the rows of each sequence's cells (llm_attn_groups in llama-graph.h), so that tokens of
// many sequences in one micro-batch do not each score every other sequence's cells.
//
// Each cell holds one token's key and value, its position and the set of sequences it belongs to
// (a prompt shared by several sequences is stored once; llama_kv_self_seq_cp adds a sequence to
// cells, it copies no data). An empty cell has no sequences. A batch's tokens go to any free cells
// (the graph writes rows by index, ggml_set_rows), lowest first, so removing tokens leaves holes
// that the next tokens fill; attention reads cells [0, cells_end()) and the mask hides the empty
// ones and those of other sequences. Defragmentation (defrag()) moves the used cells to the front,
// which only shortens what attention reads.
#pragma once

#include "llama.h"
#include "ggml-backend.h"

#include <bitset>
#include <cstdint>
#include <string>
#include <vector>

struct llama_hparams;

// Sequence ids a context takes: [0, LLAMA_MAX_SEQ) (n_seq_max at most this).
constexpr uint32_t LLAMA_MAX_SEQ = 256;

struct llama_kv_cache {
    using seq_set = std::bitset<LLAMA_MAX_SEQ>;

    ggml_type type_k = GGML_TYPE_F16;
    ggml_type type_v = GGML_TYPE_F16;
    uint32_t size = 0;          // cells (n_ctx)
    uint32_t n_embd_k_gqa = 0;
    uint32_t n_embd_v_gqa = 0;
    bool v_trans = true;        // V stored transposed (F32, F16 without flash attention, one sequence)
    bool flash_attn = false;    // attention through ggml_flash_attn_ext (V stored like K)

    std::vector<ggml_tensor *> k_l;  // per layer
    std::vector<ggml_tensor *> v_l;

    std::vector<llama_pos> pos;    // position of each cell (-1: empty)
    std::vector<llama_pos> delta;  // RoPE shift not yet applied to each cell's key
    std::vector<seq_set> seq;      // the sequences of each cell (none: empty)
    uint32_t used = 0;             // cells that are not empty
    bool has_shift = false;
    bool do_defrag = false;        // llama_kv_self_defrag asked for it (done at the next update)

    llama_kv_cache() = default;
    ~llama_kv_cache();
    llama_kv_cache(const llama_kv_cache &) = delete;
    llama_kv_cache & operator=(const llama_kv_cache &) = delete;

    // Allocates (and zeroes) the cache, layer il's K and V in memory of layer_buft[il]; false with
    // a message in err.
    bool init(const llama_hparams & hp, uint32_t n_ctx, ggml_type type_k, ggml_type type_v, bool flash_attn,
              const std::vector<ggml_backend_buffer_type_t> & layer_buft, std::string & err, uint32_t n_seq_max = 1);
    size_t total_size() const { return buf_size; }

    bool empty(uint32_t i) const { return pos[i] < 0; }
    // One past the last cell that is not empty (what attention must read).
    uint32_t cells_end() const;
    uint32_t n_free() const { return size - used; }

    void clear();
    // The lowest / highest position of sequence s (s < 0: any), -1 when it has no cells.
    llama_pos seq_pos_min(llama_seq_id s) const;
    llama_pos seq_pos_max(llama_seq_id s) const;

    // Takes the n lowest free cells for tokens with the given positions and sequences (the caller
    // checked n <= n_free()); their indices go to cells.
    void place(const llama_pos * positions, const seq_set * seqs, uint32_t n, std::vector<int32_t> & cells);
    // Empties the given cells again (a failed evaluation).
    void release(const std::vector<int32_t> & cells);

    // The sequence operations of llama.cpp's API; s < 0 means every sequence, [p0, p1) the
    // positions (p0 < 0: from 0, p1 < 0: to the end).
    // Takes s out of the cells in range (a cell left in no sequence is freed).
    void seq_rm(llama_seq_id s, llama_pos p0, llama_pos p1);
    // Adds dst to the cells of src in range (shared, not copied).
    void seq_cp(llama_seq_id src, llama_seq_id dst, llama_pos p0, llama_pos p1);
    // Frees every cell not in s and takes the others out of every other sequence.
    void seq_keep(llama_seq_id s);
    // Adds d to the positions of the cells of s in range (a cell shared with other sequences
    // moves for them too, as in llama.cpp); a cell whose position becomes negative is freed.
    void seq_add(llama_seq_id s, llama_pos p0, llama_pos p1, llama_pos d);
    // Divides the positions of the cells of s in range by d > 1.
    void seq_div(llama_seq_id s, llama_pos p0, llama_pos p1, int d);
    // After the K shift graph ran.
    void shift_applied();
    // Moves the used cells to the front in order (data included); the results of later
    // evaluations are unchanged (attention does not depend on where a cell is).
    void defrag();

private:
    bool in_range(uint32_t i, llama_seq_id s, llama_pos p0, llama_pos p1) const;
    void free_cell(uint32_t i);

    std::vector<ggml_context *> ctxs;          // one per buffer type
    std::vector<ggml_backend_buffer_t> bufs;   // the layers' K and V, one buffer per buffer type
    size_t buf_size = 0;
};
