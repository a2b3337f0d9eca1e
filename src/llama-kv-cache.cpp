// llama-kv-cache.cpp - allocation, bookkeeping and compaction of the KV cache.
#include "llama-kv-cache.h"
#include "llama-impl.h"
#include "llama-model.h"

#include "ggml-alloc.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

llama_kv_cache::~llama_kv_cache() {
    for (ggml_backend_buffer_t b : bufs) ggml_backend_buffer_free(b);
    for (ggml_context * c : ctxs) ggml_free(c);
}

bool llama_kv_cache::init(const llama_hparams & hp, uint32_t n_ctx, ggml_type tk, ggml_type tv, bool fa,
                          const std::vector<ggml_backend_buffer_type_t> & layer_buft, std::string & err, uint32_t n_seq_max) {
    // The cache types are the type table's (kv_cache: llama.cpp's cache types). Rows are cut per
    // head (K multiplied per head), so each head must hold whole blocks. Whether the devices
    // write and read the type is theirs to answer (supports_op), asked by the scheduler when the
    // context reserves its graph: a SET_ROWS into memory no backend that reaches it can write is
    // an error naming the node there.
    auto check_type = [&](ggml_type t, const char * which, uint32_t head_dim) {
        if (!ggml_type_is_valid(t) || !ggml_get_type_traits(t)->kv_cache) {
            std::string names;
            for (int i = 0; i < GGML_TYPE_COUNT; i++) {
                if (!ggml_type_is_valid(i) || !ggml_get_type_traits((ggml_type) i)->kv_cache) continue;
                names += std::string(names.empty() ? "" : ", ") + ggml_type_name((ggml_type) i);
            }
            const char * name = ggml_type_is_valid(t) ? ggml_type_name(t) : nullptr;
            err = std::string("unsupported ") + which + " cache type " + (name ? name : std::to_string((int) t)) +
                  " (supported: " + names + ")";
            return false;
        }
        if (head_dim % ggml_blck_size(t) != 0) {
            err = std::string("a ") + ggml_type_name(t) + " " + which + " cache needs a head size that is a multiple of " +
                  std::to_string(ggml_blck_size(t)) + " (this model's is " + std::to_string(head_dim) + ")";
            return false;
        }
        return true;
    };
    if (!check_type(tk, "K", hp.n_embd_head_k) || !check_type(tv, "V", hp.n_embd_head_v)) return false;

    type_k = tk;
    type_v = tv;
    size = n_ctx;
    n_embd_k_gqa = hp.n_embd_k_gqa();
    n_embd_v_gqa = hp.n_embd_v_gqa();
    flash_attn = fa;
    // Transposed only for one sequence: with several, attention gathers each sequence's cells
    // (rows of K and V) and reads those alone (llm_attn_groups).
    v_trans = !ggml_is_quantized(tv) && !fa && n_seq_max == 1;

    // One context and one buffer per buffer type (each layer's cache lives with its weights).
    std::vector<ggml_backend_buffer_type_t> bufts;
    for (uint32_t il = 0; il < hp.n_layer; il++) {
        ggml_backend_buffer_type_t buft = layer_buft.at(il);
        size_t b = 0;
        while (b < bufts.size() && bufts[b] != buft) b++;
        if (b == bufts.size()) {
            bufts.push_back(buft);
            ggml_init_params ip = { 2 * hp.n_layer * ggml_tensor_overhead() + 1024, nullptr, true };
            ctxs.push_back(ggml_init(ip));
            if (!ctxs.back()) {
                err = "cannot create the KV cache context";
                return false;
            }
        }
        ggml_tensor * k = ggml_new_tensor_2d(ctxs[b], type_k, n_embd_k_gqa, size);
        ggml_tensor * v = v_trans ? ggml_new_tensor_2d(ctxs[b], type_v, size, n_embd_v_gqa)
                                  : ggml_new_tensor_2d(ctxs[b], type_v, n_embd_v_gqa, size);
        ggml_format_name(k, "cache_k_l%u", il);
        ggml_format_name(v, "cache_v_l%u", il);
        k_l.push_back(k);
        v_l.push_back(v);
    }
    buf_size = 0;
    for (size_t b = 0; b < bufts.size(); b++) {
        ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(ctxs[b], bufts[b]);
        if (!buf) {
            err = std::string("cannot allocate the KV cache in ") + ggml_backend_buft_name(bufts[b]) + " memory";
            return false;
        }
        bufs.push_back(buf);
        buf_size += ggml_backend_buffer_get_size(buf);
        // Unused cells are never read unmasked, but zeros keep every read defined.
        ggml_backend_buffer_clear(buf, 0);
    }
    pos.assign(size, -1);
    delta.assign(size, 0);
    seq.assign(size, seq_set());
    used = 0;
    has_shift = false;
    return true;
}

uint32_t llama_kv_cache::cells_end() const {
    uint32_t end = size;
    while (end > 0 && empty(end - 1)) end--;
    return end;
}

void llama_kv_cache::clear() {
    std::fill(pos.begin(), pos.end(), -1);
    std::fill(delta.begin(), delta.end(), 0);
    std::fill(seq.begin(), seq.end(), seq_set());
    used = 0;
    has_shift = false;
}

llama_pos llama_kv_cache::seq_pos_min(llama_seq_id s) const {
    llama_pos m = -1;
    for (uint32_t i = 0; i < size; i++) {
        if (empty(i) || (s >= 0 && !seq[i].test((size_t) s))) continue;
        m = m < 0 || pos[i] < m ? pos[i] : m;
    }
    return m;
}

llama_pos llama_kv_cache::seq_pos_max(llama_seq_id s) const {
    llama_pos m = -1;
    for (uint32_t i = 0; i < size; i++) {
        if (empty(i) || (s >= 0 && !seq[i].test((size_t) s))) continue;
        m = pos[i] > m ? pos[i] : m;
    }
    return m;
}

void llama_kv_cache::place(const llama_pos * positions, const seq_set * seqs, uint32_t n, std::vector<int32_t> & cells) {
    cells.clear();
    for (uint32_t i = 0; i < size && cells.size() < n; i++) {
        if (!empty(i)) continue;
        const size_t t = cells.size();
        pos[i] = positions[t];
        delta[i] = 0;
        seq[i] = seqs[t];
        used++;
        cells.push_back((int32_t) i);
    }
}

void llama_kv_cache::free_cell(uint32_t i) {  // i is in use (its position may have gone negative)
    pos[i] = -1;
    delta[i] = 0;
    seq[i].reset();
    used--;
}

void llama_kv_cache::release(const std::vector<int32_t> & cells) {
    for (int32_t c : cells) free_cell((uint32_t) c);
}

bool llama_kv_cache::in_range(uint32_t i, llama_seq_id s, llama_pos p0, llama_pos p1) const {
    if (empty(i) || (s >= 0 && !seq[i].test((size_t) s))) return false;
    return pos[i] >= (p0 < 0 ? 0 : p0) && (p1 < 0 || pos[i] < p1);
}

void llama_kv_cache::seq_rm(llama_seq_id s, llama_pos p0, llama_pos p1) {
    for (uint32_t i = 0; i < size; i++) {
        if (!in_range(i, s, p0, p1)) continue;
        if (s >= 0) seq[i].reset((size_t) s);
        if (s < 0 || seq[i].none()) free_cell(i);
    }
}

void llama_kv_cache::seq_cp(llama_seq_id src, llama_seq_id dst, llama_pos p0, llama_pos p1) {
    if (src == dst) return;
    for (uint32_t i = 0; i < size; i++) {
        if (in_range(i, src, p0, p1)) seq[i].set((size_t) dst);
    }
}

void llama_kv_cache::seq_keep(llama_seq_id s) {
    for (uint32_t i = 0; i < size; i++) {
        if (empty(i)) continue;
        if (!seq[i].test((size_t) s)) {
            free_cell(i);
        } else {
            seq[i].reset();
            seq[i].set((size_t) s);
        }
    }
}

void llama_kv_cache::seq_add(llama_seq_id s, llama_pos p0, llama_pos p1, llama_pos d) {
    if (d == 0) return;
    for (uint32_t i = 0; i < size; i++) {
        if (!in_range(i, s, p0, p1)) continue;
        pos[i] += d;
        delta[i] += d;
        has_shift = true;
        if (pos[i] < 0) free_cell(i);
    }
}

void llama_kv_cache::seq_div(llama_seq_id s, llama_pos p0, llama_pos p1, int d) {
    if (d <= 1) return;
    for (uint32_t i = 0; i < size; i++) {
        if (!in_range(i, s, p0, p1)) continue;
        const llama_pos p = pos[i] / d;
        delta[i] += p - pos[i];
        has_shift = has_shift || p != pos[i];
        pos[i] = p;
    }
}

void llama_kv_cache::shift_applied() {
    std::fill(delta.begin(), delta.end(), 0);
    has_shift = false;
}

void llama_kv_cache::defrag() {
    do_defrag = false;
    // Cell i moves to j <= i; applying the moves in increasing i never overwrites a cell that
    // is still to be moved.
    std::vector<std::pair<uint32_t, uint32_t>> moves;  // (from, to)
    uint32_t j = 0;
    for (uint32_t i = 0; i < size; i++) {
        if (empty(i)) continue;
        if (j != i) {
            moves.emplace_back(i, j);
            pos[j] = pos[i];
            delta[j] = delta[i];
            seq[j] = seq[i];
            pos[i] = -1;
            delta[i] = 0;
            seq[i].reset();
        }
        j++;
    }
    if (moves.empty()) return;

    const size_t k_row = ggml_row_size(type_k, n_embd_k_gqa);
    const size_t v_row = ggml_row_size(type_v, n_embd_v_gqa);
    const size_t v_es = ggml_type_size(type_v);
    // Device memory is moved through a host copy of each layer's tensor.
    std::vector<char> staging;
    auto host_data = [&](ggml_tensor * t) {
        if (ggml_backend_buffer_is_host(t->buffer)) return (char *) t->data;
        staging.resize(ggml_nbytes(t));
        ggml_backend_tensor_get(t, staging.data(), 0, staging.size());
        return staging.data();
    };
    auto done = [&](ggml_tensor * t) {
        if (!ggml_backend_buffer_is_host(t->buffer)) ggml_backend_tensor_set(t, staging.data(), 0, staging.size());
    };
    for (size_t il = 0; il < k_l.size(); il++) {
        char * k = host_data(k_l[il]);
        for (const auto & m : moves) memcpy(k + m.second * k_row, k + m.first * k_row, k_row);
        done(k_l[il]);
        char * v = host_data(v_l[il]);
        if (v_trans) {
            // One row per dimension, one element per cell.
            for (uint32_t d = 0; d < n_embd_v_gqa; d++) {
                char * row = v + d * v_l[il]->nb[1];
                for (const auto & m : moves) memcpy(row + m.second * v_es, row + m.first * v_es, v_es);
            }
        } else {
            for (const auto & m : moves) memcpy(v + m.second * v_row, v + m.first * v_row, v_row);
        }
        done(v_l[il]);
    }
}
