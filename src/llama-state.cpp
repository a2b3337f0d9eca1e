// llama-state.cpp - saved state (llama_state_*): the last batch's outputs and the KV cache cells,
// in llama.cpp's layout (build 4747, session file version 9, sequence file version 2), so that
// states and session files move between this runtime and llama.cpp's.
//
// The state, all integers little-endian as in memory:
//   u32 n, n bytes            the architecture name (general.architecture)
//   u32 n_outputs, i32 x n    for each output row, the batch index whose logits it holds
//   u64 n, f32 x n            the logits (n_outputs rows of n_vocab; none with embeddings on)
//   u64 n, f32 x n            the embeddings (n_outputs rows of n_embd at most; none with them
//                             off; the pooled rows of llama_get_embeddings_seq are not saved)
//   the cache:
//   u32 cell_count
//   per cell: i32 pos, u32 n_seq, i32 x n_seq its sequences (a sequence's state: n_seq = 0)
//   u32 v_trans, u32 n_layer
//   per layer: i32 K type, u64 K row size, the cells' K rows
//   V as K (v_trans 0), or per layer: i32 V type, u32 element size, u32 n_embd_v_gqa, then for
//   each of the n_embd_v_gqa dimensions the cells' elements (v_trans 1).
// A session file is u32 'ggsn', u32 9, u32 n_tokens, i32 x n_tokens, the state; a sequence file
// 'ggsq', 2, then the same with a sequence's state.
//
// Setting a state reads it twice: once to check all of it (model, types, sizes, sequence ids, room
// in the cache, that every byte is there) without changing anything, then to apply it. Files are
// written to a temporary file in the same folder, renamed over the target once complete.
#include "llama.h"
#include "llama-context.h"
#include "llama-impl.h"
#include "llama-kv-cache.h"
#include "llama-model.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#ifndef _WIN32
#include <unistd.h>
#endif

namespace {

constexpr uint32_t SESSION_MAGIC = 0x6767736eu;    // 'ggsn'
constexpr uint32_t SESSION_VERSION = 9;
constexpr uint32_t STATE_SEQ_MAGIC = 0x67677371u;  // 'ggsq'
constexpr uint32_t STATE_SEQ_VERSION = 2;

// ---- writing -------------------------------------------------------------------------------

struct state_writer {
    size_t written = 0;
    virtual ~state_writer() = default;
    // False when the destination is full or failed.
    virtual bool write(const void * src, size_t n) = 0;
    virtual bool write_tensor(const ggml_tensor * t, size_t offset, size_t n) = 0;
};

struct size_writer : state_writer {
    bool write(const void *, size_t n) override { written += n; return true; }
    bool write_tensor(const ggml_tensor *, size_t, size_t n) override { written += n; return true; }
};

struct buffer_writer : state_writer {
    uint8_t * dst;
    size_t cap;
    buffer_writer(uint8_t * d, size_t c) : dst(d), cap(c) {}
    bool room(size_t n) const { return n <= cap - written; }
    bool write(const void * src, size_t n) override {
        if (!room(n)) return false;
        if (n) memcpy(dst + written, src, n);
        written += n;
        return true;
    }
    bool write_tensor(const ggml_tensor * t, size_t offset, size_t n) override {
        if (!room(n)) return false;
        if (n) ggml_backend_tensor_get(t, dst + written, offset, n);
        written += n;
        return true;
    }
};

struct file_writer : state_writer {
    FILE * f;
    std::vector<uint8_t> tmp;
    explicit file_writer(FILE * file) : f(file) {}
    bool write(const void * src, size_t n) override {
        if (n && fwrite(src, 1, n, f) != n) return false;
        written += n;
        return true;
    }
    bool write_tensor(const ggml_tensor * t, size_t offset, size_t n) override {
        tmp.resize(n);
        if (n) ggml_backend_tensor_get(t, tmp.data(), offset, n);
        return write(tmp.data(), n);
    }
};

template <typename T> bool put(state_writer & w, T v) { return w.write(&v, sizeof(v)); }

// Runs of consecutive cells [first, second).
using cell_runs = std::vector<std::pair<uint32_t, uint32_t>>;

cell_runs runs_of(const std::vector<uint32_t> & cells) {
    cell_runs runs;
    for (uint32_t c : cells) {
        if (!runs.empty() && runs.back().second == c) {
            runs.back().second++;
        } else {
            runs.emplace_back(c, c + 1);
        }
    }
    return runs;
}

// The cache cells of sequence s (s < 0: every cell in use), with their sequences when whole.
bool write_cache(llama_context * ctx, state_writer & w, llama_seq_id s) {
    const llama_kv_cache & kv = ctx->kv;
    std::vector<uint32_t> cells;
    for (uint32_t i = 0; i < kv.size; i++) {
        if (kv.empty(i)) continue;
        if (s < 0 || kv.seq[i].test((size_t) s)) cells.push_back(i);
    }
    bool ok = put(w, (uint32_t) cells.size());
    for (uint32_t c : cells) {
        ok = ok && put(w, (llama_pos) kv.pos[c]);
        if (s >= 0) {
            ok = ok && put(w, (uint32_t) 0);
            continue;
        }
        ok = ok && put(w, (uint32_t) kv.seq[c].count());
        for (uint32_t q = 0; q < LLAMA_MAX_SEQ; q++) {
            if (kv.seq[c].test(q)) ok = ok && put(w, (llama_seq_id) q);
        }
    }
    const cell_runs runs = runs_of(cells);
    const uint32_t n_layer = (uint32_t) kv.k_l.size();
    ok = ok && put(w, (uint32_t) (kv.v_trans ? 1 : 0)) && put(w, n_layer);
    const size_t k_row = ggml_row_size(kv.type_k, kv.n_embd_k_gqa);
    for (uint32_t il = 0; il < n_layer && ok; il++) {
        ok = put(w, (int32_t) kv.type_k) && put(w, (uint64_t) k_row);
        for (const auto & r : runs) ok = ok && w.write_tensor(kv.k_l[il], r.first * k_row, (r.second - r.first) * k_row);
    }
    if (!kv.v_trans) {
        const size_t v_row = ggml_row_size(kv.type_v, kv.n_embd_v_gqa);
        for (uint32_t il = 0; il < n_layer && ok; il++) {
            ok = put(w, (int32_t) kv.type_v) && put(w, (uint64_t) v_row);
            for (const auto & r : runs) ok = ok && w.write_tensor(kv.v_l[il], r.first * v_row, (r.second - r.first) * v_row);
        }
    } else {
        const size_t el = ggml_type_size(kv.type_v);
        for (uint32_t il = 0; il < n_layer && ok; il++) {
            const ggml_tensor * v = kv.v_l[il];
            ok = put(w, (int32_t) kv.type_v) && put(w, (uint32_t) el) && put(w, (uint32_t) kv.n_embd_v_gqa);
            for (uint32_t d = 0; d < kv.n_embd_v_gqa && ok; d++) {
                for (const auto & r : runs) {
                    ok = ok && w.write_tensor(v, d * v->nb[1] + r.first * el, (r.second - r.first) * el);
                }
            }
        }
    }
    return ok;
}

bool usable(llama_context * ctx, const char * fn) {
    if (!ctx) {
        LLAMA_LOG_ERROR("%s: no context\n", fn);
        return false;
    }
    if (ctx->model.vocab_only || ctx->kv.k_l.empty()) {
        LLAMA_LOG_ERROR("%s: the context has no KV cache (vocab_only model)\n", fn);
        return false;
    }
    return true;
}

// A K shift still to apply would be lost (the layout has no per-cell shift): apply it first.
void settle(llama_context * ctx) {
    if (ctx->kv.has_shift) llama_kv_self_update(ctx);
}

bool write_state(llama_context * ctx, state_writer & w) {
    const std::string & arch = ctx->model.arch_name;
    bool ok = put(w, (uint32_t) arch.size()) && w.write(arch.data(), arch.size());

    // Output rows: the batch index of each.
    const uint32_t n_outputs = ctx->n_outputs > 0 ? (uint32_t) ctx->n_outputs : 0;
    std::vector<int32_t> out_pos(n_outputs, 0);
    for (size_t i = 0; i < ctx->output_rows.size(); i++) {
        const int32_t row = ctx->output_rows[i];
        if (row >= 0 && (uint32_t) row < n_outputs) out_pos[row] = (int32_t) i;
    }
    ok = ok && put(w, n_outputs) && w.write(out_pos.data(), out_pos.size() * sizeof(int32_t));

    // The rows hold logits, or with embeddings on the hidden states (llama.cpp's layout has both).
    const uint64_t n_logits = ctx->embeddings ? 0 : (uint64_t) n_outputs * ctx->model.hparams.n_vocab;
    ok = ok && put(w, n_logits) && w.write(n_logits ? ctx->logits.data() : nullptr, n_logits * sizeof(float));

    const uint64_t n_embd = ctx->embeddings ? std::min<uint64_t>(ctx->embd.size(), (uint64_t) n_outputs * ctx->model.hparams.n_embd) : 0;
    ok = ok && put(w, n_embd) && w.write(ctx->embd.data(), n_embd * sizeof(float));

    return ok && write_cache(ctx, w, -1);
}

// ---- reading -------------------------------------------------------------------------------

struct state_reader {
    size_t off = 0;   // bytes read from the start of the state
    size_t size = 0;  // bytes the state may have
    virtual ~state_reader() = default;
    size_t left() const { return size - off; }
    // n bytes (valid until the next call), or nullptr past the end or on an error.
    virtual const uint8_t * data(size_t n) = 0;
    // Goes back to offset o (the second pass).
    virtual bool seek(size_t o) = 0;
    bool read(void * dst, size_t n) {
        const uint8_t * p = data(n);
        if (!p) return false;
        if (n) memcpy(dst, p, n);
        return true;
    }
    bool skip(size_t n) {
        if (n > left()) return false;
        return seek(off + n);
    }
};

struct buffer_reader : state_reader {
    const uint8_t * src;
    buffer_reader(const uint8_t * s, size_t n) : src(s) { size = n; }
    const uint8_t * data(size_t n) override {
        if (n > left()) return nullptr;
        const uint8_t * p = src + off;
        off += n;
        return p;
    }
    bool seek(size_t o) override {
        if (o > size) return false;
        off = o;
        return true;
    }
};

bool file_seek(FILE * f, uint64_t o) {
#ifdef _WIN32
    return _fseeki64(f, (__int64) o, SEEK_SET) == 0;
#else
    return fseeko(f, (off_t) o, SEEK_SET) == 0;
#endif
}

// The state from byte base of a file to its end.
struct file_reader : state_reader {
    FILE * f;
    uint64_t base;
    std::vector<uint8_t> tmp;
    file_reader(FILE * file, uint64_t b, size_t n) : f(file), base(b) { size = n; }
    const uint8_t * data(size_t n) override {
        if (n > left()) return nullptr;
        tmp.resize(n);
        if (n && fread(tmp.data(), 1, n, f) != n) return nullptr;
        off += n;
        return tmp.data();
    }
    bool seek(size_t o) override {
        if (o > size || !file_seek(f, base + o)) return false;
        off = o;
        return true;
    }
};

template <typename T> bool get(state_reader & r, T & v) { return r.read(&v, sizeof(v)); }

// What a state holds, checked; the bulk data stay in the source and are read when applied.
struct cache_plan {
    std::vector<llama_pos> pos;
    std::vector<llama_kv_cache::seq_set> seqs;
    size_t data_off = 0;  // the K and V data (after v_trans and n_layer)
    bool v_trans = false;  // the state's V layout (the cache's may differ: converted on loading)
};

struct state_plan {
    std::vector<int32_t> out_pos;  // batch index of each output row
    size_t logits_off = 0;
    uint64_t n_logits = 0;
    size_t embd_off = 0;
    uint64_t n_embd = 0;
    cache_plan cache;
};

// Reads and checks a cache section for sequence s (s < 0: the whole cache); nothing is changed.
// err says what is wrong.
bool check_cache(llama_context * ctx, state_reader & r, llama_seq_id s, cache_plan & plan, std::string & err) {
    const llama_kv_cache & kv = ctx->kv;
    const auto trunc = [&](const char * what) {
        err = std::string("the state ends early (in ") + what + ")";
        return false;
    };
    uint32_t cell_count = 0;
    if (!get(r, cell_count)) return trunc("the cell count");
    if ((uint64_t) cell_count * 8 > r.left()) return trunc("the cells");
    // Room: the whole state replaces every cell; a sequence replaces its own cells (those only in
    // it become free) and takes free ones.
    uint32_t room = kv.size;
    if (s >= 0) {
        room = kv.n_free();
        for (uint32_t i = 0; i < kv.size; i++) {
            if (!kv.empty(i) && kv.seq[i].test((size_t) s) && kv.seq[i].count() == 1) room++;
        }
    }
    if (cell_count > room) {
        err = "the state has " + std::to_string(cell_count) + " cells and " +
              (s >= 0 ? "only " + std::to_string(room) + " cells of the cache are free for sequence " + std::to_string(s)
                      : "the cache only " + std::to_string(kv.size));
        return false;
    }
    plan.pos.assign(cell_count, 0);
    plan.seqs.assign(cell_count, llama_kv_cache::seq_set());
    for (uint32_t i = 0; i < cell_count; i++) {
        llama_pos p = 0;
        uint32_t n_seq = 0;
        if (!get(r, p) || !get(r, n_seq)) return trunc("the cells");
        if (p < 0) {
            err = "cell " + std::to_string(i) + " has negative position " + std::to_string(p);
            return false;
        }
        plan.pos[i] = p;
        if (s >= 0) {
            if (n_seq != 0) {
                err = "cell " + std::to_string(i) + " names sequences: not a single sequence's state";
                return false;
            }
            plan.seqs[i].set((size_t) s);
            continue;
        }
        if (n_seq == 0) {
            err = "cell " + std::to_string(i) + " belongs to no sequence";
            return false;
        }
        if ((uint64_t) n_seq * 4 > r.left()) return trunc("the cells' sequences");
        for (uint32_t j = 0; j < n_seq; j++) {
            llama_seq_id q = 0;
            if (!get(r, q)) return trunc("the cells' sequences");
            if (q < 0 || (uint32_t) q >= ctx->n_seq_max) {
                err = "cell " + std::to_string(i) + " has sequence id " + std::to_string(q) + ", out of range [0, " +
                      std::to_string(ctx->n_seq_max) + ") (n_seq_max)";
                return false;
            }
            plan.seqs[i].set((size_t) q);
        }
    }

    uint32_t v_trans = 0, n_layer = 0;
    if (!get(r, v_trans) || !get(r, n_layer)) return trunc("the cache header");
    if (n_layer != kv.k_l.size()) {
        err = "the state has " + std::to_string(n_layer) + " layers, the model " + std::to_string(kv.k_l.size());
        return false;
    }
    // A transposed V (F32 / F16) loads into a cache that stores rows (flash attention, several
    // sequences) and the other way round: the elements are the same, only their order differs.
    if (v_trans > 1) {
        err = "the state's V cache is of unknown layout (" + std::to_string(v_trans) + ")";
        return false;
    }
    plan.v_trans = v_trans == 1;
    plan.data_off = r.off;
    const auto type_name = [](int32_t t) {
        return t >= 0 && t < GGML_TYPE_COUNT && ggml_type_is_valid((ggml_type) t) ? std::string(ggml_type_name((ggml_type) t))
                                                                                   : "type " + std::to_string(t);
    };
    const auto check_type = [&](const char * which, int32_t t, ggml_type want, uint32_t il) {
        if (t == (int32_t) want) return true;
        err = std::string("layer ") + std::to_string(il) + "'s " + which + " cache is " + type_name(t) + ", this context's " +
              ggml_type_name(want);
        return false;
    };
    const auto check_size = [&](const char * what, uint64_t got, uint64_t want, uint32_t il) {
        if (got == want) return true;
        err = std::string("layer ") + std::to_string(il) + "'s " + what + " is " + std::to_string(got) + " bytes, this model's " +
              std::to_string(want) + " (another model)";
        return false;
    };
    const uint64_t k_row = ggml_row_size(kv.type_k, kv.n_embd_k_gqa);
    for (uint32_t il = 0; il < n_layer; il++) {
        int32_t t = 0;
        uint64_t row = 0;
        if (!get(r, t) || !get(r, row)) return trunc("a K header");
        if (!check_type("K", t, kv.type_k, il) || !check_size("K row", row, k_row, il)) return false;
        if (!r.skip(cell_count * k_row)) return trunc("the K data");
    }
    if (!plan.v_trans) {
        const uint64_t v_row = ggml_row_size(kv.type_v, kv.n_embd_v_gqa);
        for (uint32_t il = 0; il < n_layer; il++) {
            int32_t t = 0;
            uint64_t row = 0;
            if (!get(r, t) || !get(r, row)) return trunc("a V header");
            if (!check_type("V", t, kv.type_v, il) || !check_size("V row", row, v_row, il)) return false;
            if (!r.skip(cell_count * v_row)) return trunc("the V data");
        }
    } else {
        const uint64_t el = ggml_type_size(kv.type_v);
        for (uint32_t il = 0; il < n_layer; il++) {
            int32_t t = 0;
            uint32_t el_ref = 0, n_embd_v = 0;
            if (!get(r, t) || !get(r, el_ref) || !get(r, n_embd_v)) return trunc("a V header");
            if (!check_type("V", t, kv.type_v, il) || !check_size("V element", el_ref, el, il)) return false;
            if (n_embd_v != kv.n_embd_v_gqa) {
                err = "layer " + std::to_string(il) + "'s V has " + std::to_string(n_embd_v) + " dimensions, this model's " +
                      std::to_string(kv.n_embd_v_gqa) + " (another model)";
                return false;
            }
            if (!r.skip((uint64_t) cell_count * n_embd_v * el)) return trunc("the V data");
        }
    }
    return true;
}

// Writes a checked cache section (r at plan.data_off) into the cache; s as in check_cache. False
// only when the source fails to read again (a file changed underneath): the cells are then freed.
bool apply_cache(llama_context * ctx, state_reader & r, llama_seq_id s, const cache_plan & plan) {
    llama_kv_cache & kv = ctx->kv;
    const uint32_t n = (uint32_t) plan.pos.size();
    std::vector<uint32_t> cells(n);
    if (s < 0) {
        kv.clear();
        for (uint32_t i = 0; i < n; i++) {
            kv.pos[i] = plan.pos[i];
            kv.seq[i] = plan.seqs[i];
            cells[i] = i;
        }
        kv.used = n;
    } else {
        kv.seq_rm(s, -1, -1);
        std::vector<int32_t> placed;
        kv.place(plan.pos.data(), plan.seqs.data(), n, placed);
        for (uint32_t i = 0; i < n; i++) cells[i] = (uint32_t) placed[i];
    }
    ctx->reuse.valid = false;  // the cells a kept graph attends to may have changed

    const cell_runs runs = runs_of(cells);
    const auto fail = [&]() {
        if (s < 0) {
            kv.clear();
        } else {
            kv.seq_rm(s, -1, -1);
        }
        return false;
    };
    if (!r.seek(plan.data_off)) return fail();
    const uint32_t n_layer = (uint32_t) kv.k_l.size();
    // The data of n cells (row bytes each) go to the runs of cells, row bytes apart from base.
    const auto scatter = [&](ggml_tensor * t, const uint8_t * src, size_t base, size_t row) {
        size_t done = 0;
        for (const auto & run : runs) {
            const size_t len = (size_t) (run.second - run.first) * row;
            ggml_backend_tensor_set(t, src + done, base + run.first * row, len);
            done += len;
        }
    };
    const size_t k_row = ggml_row_size(kv.type_k, kv.n_embd_k_gqa);
    for (uint32_t il = 0; il < n_layer; il++) {
        if (!r.skip(sizeof(int32_t) + sizeof(uint64_t))) return fail();
        const uint8_t * src = r.data((size_t) n * k_row);
        if (!src) return fail();
        if (n) scatter(kv.k_l[il], src, 0, k_row);
    }
    // V as the state holds it (rows of cells, or per dimension the cells' elements), written in
    // the cache's layout: a layout that differs (a state of another number of sequences, or of
    // flash attention on against off) is transposed here first.
    const size_t el = ggml_type_size(kv.type_v);
    const size_t n_embd_v = kv.n_embd_v_gqa;
    std::vector<uint8_t> turned(plan.v_trans != kv.v_trans ? (size_t) n * n_embd_v * el : 0);
    const auto transpose = [&](const uint8_t * src, size_t rows, size_t cols) {  // src [rows][cols] of el bytes
        for (size_t i = 0; i < rows; i++) {
            for (size_t j = 0; j < cols; j++) memcpy(turned.data() + (j * rows + i) * el, src + (i * cols + j) * el, el);
        }
        return (const uint8_t *) turned.data();
    };
    const size_t v_row = ggml_row_size(kv.type_v, kv.n_embd_v_gqa);
    for (uint32_t il = 0; il < n_layer; il++) {
        if (!r.skip(plan.v_trans ? sizeof(int32_t) + 2 * sizeof(uint32_t) : sizeof(int32_t) + sizeof(uint64_t))) return fail();
        ggml_tensor * v = kv.v_l[il];
        const uint8_t * src = r.data(plan.v_trans ? (size_t) n * n_embd_v * el : (size_t) n * v_row);
        if (!src) return fail();
        if (!n) continue;
        if (plan.v_trans != kv.v_trans) src = plan.v_trans ? transpose(src, n_embd_v, n) : transpose(src, n, n_embd_v);
        if (!kv.v_trans) {
            scatter(v, src, 0, v_row);
        } else {
            for (size_t d = 0; d < n_embd_v; d++) scatter(v, src + d * n * el, d * v->nb[1], el);
        }
    }
    return true;
}

bool check_state(llama_context * ctx, state_reader & r, state_plan & plan, std::string & err) {
    const auto trunc = [&](const char * what) {
        err = std::string("the state ends early (in ") + what + ")";
        return false;
    };
    const llama_hparams & hp = ctx->model.hparams;
    uint32_t n_arch = 0;
    if (!get(r, n_arch)) return trunc("the model architecture");
    if (n_arch > r.left()) return trunc("the model architecture");
    const uint8_t * a = r.data(n_arch);
    if (!a) return trunc("the model architecture");
    const std::string arch((const char *) a, n_arch);
    if (arch != ctx->model.arch_name) {
        err = "the state is of a '" + arch.substr(0, 64) + "' model, this one is '" + ctx->model.arch_name + "'";
        return false;
    }

    uint32_t n_outputs = 0;
    if (!get(r, n_outputs)) return trunc("the outputs");
    if (n_outputs > ctx->n_batch) {
        err = "the state has " + std::to_string(n_outputs) + " outputs, more than n_batch " + std::to_string(ctx->n_batch);
        return false;
    }
    plan.out_pos.assign(n_outputs, 0);
    if (!r.read(plan.out_pos.data(), n_outputs * sizeof(int32_t))) return trunc("the outputs");
    std::vector<bool> seen(ctx->n_batch, false);
    for (uint32_t i = 0; i < n_outputs; i++) {
        const int32_t id = plan.out_pos[i];
        if (id < 0 || (uint32_t) id >= ctx->n_batch || seen[id]) {
            err = "output " + std::to_string(i) + " is of batch index " + std::to_string(id) +
                  (id >= 0 && (uint32_t) id < ctx->n_batch ? " twice" : ", out of range [0, n_batch " + std::to_string(ctx->n_batch) + ")");
            return false;
        }
        seen[id] = true;
    }

    if (!get(r, plan.n_logits)) return trunc("the logits");
    if (plan.n_logits != 0 && plan.n_logits != (uint64_t) n_outputs * hp.n_vocab) {
        err = "the state has " + std::to_string(plan.n_logits) + " logits for " + std::to_string(n_outputs) +
              " outputs: not rows of this model's " + std::to_string(hp.n_vocab) + " tokens (another model)";
        return false;
    }
    plan.logits_off = r.off;
    if (plan.n_logits > r.left() / sizeof(float) || !r.skip(plan.n_logits * sizeof(float))) return trunc("the logits");

    if (!get(r, plan.n_embd)) return trunc("the embeddings");
    if (plan.n_embd > (uint64_t) n_outputs * hp.n_embd || plan.n_embd % hp.n_embd != 0) {
        err = "the state has " + std::to_string(plan.n_embd) + " embedding values for " + std::to_string(n_outputs) +
              " outputs: not rows of this model's " + std::to_string(hp.n_embd) + " (another model)";
        return false;
    }
    plan.embd_off = r.off;
    if (plan.n_embd > r.left() / sizeof(float) || !r.skip(plan.n_embd * sizeof(float))) return trunc("the embeddings");

    return check_cache(ctx, r, -1, plan.cache, err);
}

bool apply_state(llama_context * ctx, state_reader & r, const state_plan & plan) {
    const uint32_t n_vocab = ctx->model.hparams.n_vocab;
    const uint32_t n_outputs = (uint32_t) plan.out_pos.size();
    int32_t last = -1;
    for (int32_t id : plan.out_pos) last = std::max(last, id);
    ctx->output_rows.assign((size_t) (last + 1), -1);
    for (uint32_t i = 0; i < n_outputs; i++) ctx->output_rows[plan.out_pos[i]] = (int32_t) i;
    ctx->n_outputs = (int32_t) n_outputs;
    ctx->logits.resize((size_t) n_outputs * n_vocab);
    bool ok = true;
    if (plan.n_logits) {
        ok = r.seek(plan.logits_off) && r.read(ctx->logits.data(), plan.n_logits * sizeof(float));
    } else if (n_outputs) {
        memset(ctx->logits.data(), 0, (size_t) n_outputs * n_vocab * sizeof(float));  // a state without logits
    }
    // A state without the rows of the context's mode gives zeros (never rows out of bounds).
    const size_t n_embd_rows = ctx->embeddings ? (size_t) n_outputs * ctx->model.hparams.n_embd : 0;
    ctx->embd.assign(std::max<size_t>(plan.n_embd, n_embd_rows), 0.0f);
    if (ok && plan.n_embd) ok = r.seek(plan.embd_off) && r.read(ctx->embd.data(), plan.n_embd * sizeof(float));
    ctx->embd_seq.clear();  // not part of the state (llama.cpp's layout has no pooled rows)
    if (!ok) {
        ctx->n_outputs = 0;
        ctx->output_rows.clear();
        return false;
    }
    return apply_cache(ctx, r, -1, plan.cache);
}

// Checks the whole state then applies it; the bytes read, 0 with a message on an error.
size_t set_state(llama_context * ctx, state_reader & r, const char * fn, bool whole) {
    state_plan plan;
    std::string err;
    const size_t start = r.off;
    if (!check_state(ctx, r, plan, err)) {
        LLAMA_LOG_ERROR("%s: %s; the context is unchanged\n", fn, err.c_str());
        return 0;
    }
    const size_t end = r.off;
    if (whole && end != r.size) {
        LLAMA_LOG_ERROR("%s: %zu bytes after the state; the context is unchanged\n", fn, r.size - end);
        return 0;
    }
    if (!r.seek(start) || !apply_state(ctx, r, plan)) {
        LLAMA_LOG_ERROR("%s: the state could not be read again; the KV cache was cleared\n", fn);
        return 0;
    }
    return end - start;
}

size_t set_seq_state(llama_context * ctx, state_reader & r, llama_seq_id s, const char * fn) {
    cache_plan plan;
    std::string err;
    const size_t start = r.off;
    if (!check_cache(ctx, r, s, plan, err)) {
        if (s >= 0) {
            LLAMA_LOG_ERROR("%s: sequence %d: %s; the context is unchanged\n", fn, s, err.c_str());
        } else {
            LLAMA_LOG_ERROR("%s: %s; the context is unchanged\n", fn, err.c_str());
        }
        return 0;
    }
    const size_t end = r.off;
    if (!apply_cache(ctx, r, s, plan)) {
        LLAMA_LOG_ERROR("%s: the state could not be read again; sequence %d was removed\n", fn, s);
        return 0;
    }
    return end - start;
}

bool seq_ok(llama_context * ctx, llama_seq_id s, const char * fn) {
    // -1: every sequence (llama.cpp's reading of a negative id here).
    if (s == -1 || (s >= 0 && (uint32_t) s < ctx->n_seq_max)) return true;
    LLAMA_LOG_ERROR("%s: sequence id %d is out of range [0, %u) (n_seq_max)\n", fn, s, ctx->n_seq_max);
    return false;
}

// ---- files ---------------------------------------------------------------------------------

// A file written whole or not at all: a temporary file beside the target, renamed over it.
struct atomic_file {
    std::string path, tmp;
    FILE * f = nullptr;
    explicit atomic_file(const char * p) : path(p) {
        static std::atomic<unsigned> counter{0};
#ifdef _WIN32
        const unsigned long pid = 0;
#else
        const unsigned long pid = (unsigned long) getpid();
#endif
        tmp = path + ".tmp." + std::to_string(pid) + "." + std::to_string(counter++);
        f = fopen(tmp.c_str(), "wb");
    }
    ~atomic_file() {
        if (f) {
            fclose(f);
            std::remove(tmp.c_str());
        }
    }
    // Closes and renames; false (the temporary removed) on any error.
    bool commit() {
        const bool flushed = fflush(f) == 0 && !ferror(f);
        const bool closed = fclose(f) == 0;
        f = nullptr;
        std::error_code ec;
        if (flushed && closed) std::filesystem::rename(tmp, path, ec);
        if (!flushed || !closed || ec) {
            std::remove(tmp.c_str());
            return false;
        }
        return true;
    }
};

uint64_t file_size(FILE * f) {
#ifdef _WIN32
    if (_fseeki64(f, 0, SEEK_END) != 0) return 0;
    const int64_t n = _ftelli64(f);
#else
    if (fseeko(f, 0, SEEK_END) != 0) return 0;
    const int64_t n = (int64_t) ftello(f);
#endif
    return n < 0 ? 0 : (uint64_t) n;
}

// Opens a session or sequence file and reads its header and tokens; the state follows at *base.
FILE * open_with_tokens(const char * path, uint32_t magic, uint32_t version, const char * kind, std::vector<llama_token> & tokens,
                        size_t n_token_capacity, uint64_t & size, uint64_t & base, const char * fn) {
    FILE * f = path ? fopen(path, "rb") : nullptr;
    if (!f) {
        LLAMA_LOG_ERROR("%s: cannot open %s file '%s'\n", fn, kind, path ? path : "(null)");
        return nullptr;
    }
    size = file_size(f);
    uint32_t hdr[3] = { 0, 0, 0 };
    if (!file_seek(f, 0) || size < sizeof(hdr) || fread(hdr, 1, sizeof(hdr), f) != sizeof(hdr)) {
        LLAMA_LOG_ERROR("%s: '%s' is too short for a %s file\n", fn, path, kind);
        fclose(f);
        return nullptr;
    }
    if (hdr[0] != magic || hdr[1] != version) {
        LLAMA_LOG_ERROR("%s: '%s' is not a %s file of version %u: magic %08x, version %u (want %08x)\n", fn, path, kind, version,
                        hdr[0], hdr[1], magic);
        fclose(f);
        return nullptr;
    }
    const uint32_t n_tokens = hdr[2];
    if (n_tokens > n_token_capacity) {
        LLAMA_LOG_ERROR("%s: '%s' has %u tokens, more than the %zu the caller has room for\n", fn, path, n_tokens, n_token_capacity);
        fclose(f);
        return nullptr;
    }
    if ((uint64_t) n_tokens * sizeof(llama_token) > size - sizeof(hdr)) {
        LLAMA_LOG_ERROR("%s: '%s' ends early (in the tokens)\n", fn, path);
        fclose(f);
        return nullptr;
    }
    tokens.resize(n_tokens);
    if (n_tokens && fread(tokens.data(), sizeof(llama_token), n_tokens, f) != n_tokens) {
        LLAMA_LOG_ERROR("%s: cannot read '%s'\n", fn, path);
        fclose(f);
        return nullptr;
    }
    base = sizeof(hdr) + (uint64_t) n_tokens * sizeof(llama_token);
    return f;
}

bool write_with_tokens(llama_context * ctx, const char * path, uint32_t magic, uint32_t version, const llama_token * tokens,
                       size_t n_tokens, llama_seq_id s, bool seq_file, size_t & total, const char * fn) {
    if (!path) {
        LLAMA_LOG_ERROR("%s: no file name\n", fn);
        return false;
    }
    if (n_tokens > UINT32_MAX || (n_tokens && !tokens)) {
        LLAMA_LOG_ERROR("%s: bad token list (%zu tokens)\n", fn, n_tokens);
        return false;
    }
    atomic_file out(path);
    if (!out.f) {
        LLAMA_LOG_ERROR("%s: cannot create '%s' (written there, then renamed to '%s')\n", fn, out.tmp.c_str(), path);
        return false;
    }
    file_writer w(out.f);
    bool ok = put(w, magic) && put(w, version) && put(w, (uint32_t) n_tokens) &&
              w.write(tokens, n_tokens * sizeof(llama_token));
    ok = ok && (seq_file ? write_cache(ctx, w, s) : write_state(ctx, w));
    if (!ok || !out.commit()) {
        LLAMA_LOG_ERROR("%s: cannot write '%s'\n", fn, path);
        return false;
    }
    total = w.written;
    return true;
}

}  // namespace

// ---- the API -------------------------------------------------------------------------------

size_t llama_state_get_size(llama_context * ctx) {
    if (!usable(ctx, __func__)) return 0;
    settle(ctx);
    size_writer w;
    write_state(ctx, w);
    return w.written;
}

size_t llama_state_get_data(llama_context * ctx, uint8_t * dst, size_t size) {
    if (!usable(ctx, __func__)) return 0;
    settle(ctx);
    buffer_writer w(dst, dst ? size : 0);
    if (!write_state(ctx, w)) {
        LLAMA_LOG_ERROR("%s: the buffer of %zu bytes is too small for the state (llama_state_get_size: %zu)\n", __func__, size,
                        llama_state_get_size(ctx));
        return 0;
    }
    return w.written;
}

size_t llama_state_set_data(llama_context * ctx, const uint8_t * src, size_t size) {
    if (!usable(ctx, __func__)) return 0;
    if (!src) {
        LLAMA_LOG_ERROR("%s: no data\n", __func__);
        return 0;
    }
    buffer_reader r(src, size);
    return set_state(ctx, r, __func__, false);
}

bool llama_state_load_file(llama_context * ctx, const char * path_session, llama_token * tokens_out, size_t n_token_capacity,
                           size_t * n_token_count_out) {
    if (!usable(ctx, __func__)) return false;
    std::vector<llama_token> tokens;
    uint64_t size = 0, base = 0;
    FILE * f = open_with_tokens(path_session, SESSION_MAGIC, SESSION_VERSION, "session", tokens, tokens_out ? n_token_capacity : 0,
                                size, base, __func__);
    if (!f) return false;
    file_reader r(f, base, (size_t) (size - base));
    const size_t n = set_state(ctx, r, __func__, true);
    fclose(f);
    if (!n) return false;
    if (!tokens.empty()) memcpy(tokens_out, tokens.data(), tokens.size() * sizeof(llama_token));
    if (n_token_count_out) *n_token_count_out = tokens.size();
    return true;
}

bool llama_state_save_file(llama_context * ctx, const char * path_session, const llama_token * tokens, size_t n_token_count) {
    if (!usable(ctx, __func__)) return false;
    settle(ctx);
    size_t total = 0;
    return write_with_tokens(ctx, path_session, SESSION_MAGIC, SESSION_VERSION, tokens, n_token_count, -1, false, total, __func__);
}

size_t llama_state_seq_get_size(llama_context * ctx, llama_seq_id seq_id) {
    if (!usable(ctx, __func__) || !seq_ok(ctx, seq_id, __func__)) return 0;
    settle(ctx);
    size_writer w;
    write_cache(ctx, w, seq_id);
    return w.written;
}

size_t llama_state_seq_get_data(llama_context * ctx, uint8_t * dst, size_t size, llama_seq_id seq_id) {
    if (!usable(ctx, __func__) || !seq_ok(ctx, seq_id, __func__)) return 0;
    settle(ctx);
    buffer_writer w(dst, dst ? size : 0);
    if (!write_cache(ctx, w, seq_id)) {
        LLAMA_LOG_ERROR("%s: the buffer of %zu bytes is too small for sequence %d's state (llama_state_seq_get_size: %zu)\n",
                        __func__, size, seq_id, llama_state_seq_get_size(ctx, seq_id));
        return 0;
    }
    return w.written;
}

size_t llama_state_seq_set_data(llama_context * ctx, const uint8_t * src, size_t size, llama_seq_id dest_seq_id) {
    if (!usable(ctx, __func__) || !seq_ok(ctx, dest_seq_id, __func__)) return 0;
    if (!src) {
        LLAMA_LOG_ERROR("%s: no data\n", __func__);
        return 0;
    }
    buffer_reader r(src, size);
    return set_seq_state(ctx, r, dest_seq_id, __func__);
}

size_t llama_state_seq_save_file(llama_context * ctx, const char * filepath, llama_seq_id seq_id, const llama_token * tokens,
                                 size_t n_token_count) {
    if (!usable(ctx, __func__) || !seq_ok(ctx, seq_id, __func__)) return 0;
    settle(ctx);
    size_t total = 0;
    if (!write_with_tokens(ctx, filepath, STATE_SEQ_MAGIC, STATE_SEQ_VERSION, tokens, n_token_count, seq_id, true, total, __func__)) {
        return 0;
    }
    return total;
}

size_t llama_state_seq_load_file(llama_context * ctx, const char * filepath, llama_seq_id dest_seq_id, llama_token * tokens_out,
                                 size_t n_token_capacity, size_t * n_token_count_out) {
    if (!usable(ctx, __func__) || !seq_ok(ctx, dest_seq_id, __func__)) return 0;
    std::vector<llama_token> tokens;
    uint64_t size = 0, base = 0;
    FILE * f = open_with_tokens(filepath, STATE_SEQ_MAGIC, STATE_SEQ_VERSION, "sequence state", tokens,
                                tokens_out ? n_token_capacity : 0, size, base, __func__);
    if (!f) return 0;
    file_reader r(f, base, (size_t) (size - base));
    const size_t n = set_seq_state(ctx, r, dest_seq_id, __func__);
    fclose(f);
    if (!n) return 0;
    if (!tokens.empty()) memcpy(tokens_out, tokens.data(), tokens.size() * sizeof(llama_token));
    if (n_token_count_out) *n_token_count_out = tokens.size();
    return (size_t) base + n;
}

size_t llama_get_state_size(llama_context * ctx) { return llama_state_get_size(ctx); }
size_t llama_copy_state_data(llama_context * ctx, uint8_t * dst) { return llama_state_get_data(ctx, dst, SIZE_MAX); }
size_t llama_set_state_data(llama_context * ctx, const uint8_t * src) { return llama_state_set_data(ctx, src, SIZE_MAX); }
bool llama_load_session_file(llama_context * ctx, const char * path_session, llama_token * tokens_out, size_t n_token_capacity,
                             size_t * n_token_count_out) {
    return llama_state_load_file(ctx, path_session, tokens_out, n_token_capacity, n_token_count_out);
}
bool llama_save_session_file(llama_context * ctx, const char * path_session, const llama_token * tokens, size_t n_token_count) {
    return llama_state_save_file(ctx, path_session, tokens, n_token_count);
}
