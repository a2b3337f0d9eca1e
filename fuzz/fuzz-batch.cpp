// fuzz-batch: random batches and sequence operations on a small context of the tiny seed llama
// (n_ctx 16, 3 sequences, micro-batches of 4), each checked against a plain model of the cache:
// which batches llama_decode must refuse (-1: a token id, sequence id or position out of range, a
// position going back within a sequence, a token in no sequence), which do not fit (1), the cells
// in use and each sequence's first and last position after every operation, finite logits for
// every output. Input: a stream of operations, one byte each, then their arguments.
#include "fuzz-common.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

namespace {

constexpr int N_CTX = 16, N_SEQ = 3;

llama_model * g_model = nullptr;

struct cell {
    llama_pos pos;
    std::set<int> seqs;
};

llama_pos pos_max(const std::vector<cell> & cells, int s) {
    llama_pos m = -1;
    for (const cell & c : cells) {
        if (s < 0 || c.seqs.count(s)) m = std::max(m, c.pos);
    }
    return m;
}

llama_pos pos_min(const std::vector<cell> & cells, int s) {
    llama_pos m = -1;
    for (const cell & c : cells) {
        if (s < 0 || c.seqs.count(s)) m = m < 0 ? c.pos : std::min(m, c.pos);
    }
    return m;
}

// The model, loaded once (kept for the process).
llama_model * model() {
    if (!g_model) {
        fuzz::quiet();
        llama_model_params mp = llama_model_default_params();
        mp.use_repack = false;
        const std::string path = std::string(FUZZ_SOURCE_DIR) + "/corpus/fuzz-model/tiny-llama-spm.gguf";
        g_model = llama_model_load_from_file(path.c_str(), mp);
        FUZZ_CHECK(g_model != nullptr);
    }
    return g_model;
}

}  // namespace

#ifndef LLVMFuzzerTestOneInput  // a fuzzer (test-fuzz-regressions renames the entry and calls it itself)
extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    model();
    return 0;
}
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    llama_model * g = model();
    fuzz::reader in{ data, size };
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = N_CTX;
    cp.n_batch = N_CTX;
    cp.n_ubatch = 4;
    cp.n_seq_max = N_SEQ;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.flash_attn = (in.u8() & 1) != 0;
    llama_context * ctx = llama_init_from_model(g, cp);
    FUZZ_CHECK(ctx != nullptr);
    const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(g));
    std::vector<cell> cells;  // the model: the cells in use

    for (int step = 0; step < 64 && in.n > 0; step++) {
        const uint8_t op = in.u8() % 8;
        const int s = (int) (in.u8() % (N_SEQ + 3)) - 1;  // -1 .. N_SEQ + 1: some out of range
        const llama_pos p0 = (llama_pos) (in.u8() % 24) - 2;
        const llama_pos p1 = (llama_pos) (in.u8() % 24) - 2;
        auto in_range = [&](llama_pos p) { return p >= std::max(0, p0) && (p1 < 0 || p < p1); };
        const bool s_ok = s >= 0 && s < N_SEQ;
        if (op <= 2) {
            // A batch of 1..8 tokens; positions given, or NULL (each follows its first sequence).
            const int n = 1 + in.u8() % 8;
            const bool auto_pos = in.u8() % 4 == 0;
            llama_batch b = llama_batch_init(n, 0, 2);
            b.n_tokens = n;
            bool valid = true;
            std::map<int, llama_pos> last;  // each sequence's last position, as decode sees it
            for (int t = 0; t < N_SEQ; t++) last[t] = pos_max(cells, t);
            std::vector<cell> added;
            std::vector<llama_pos> pos(n);
            for (int i = 0; i < n; i++) {
                const uint8_t tb = in.u8();
                b.token[i] = tb < 250 ? tb % n_vocab : n_vocab + (tb - 250) - 2;  // a few out of range (-2, -1, n_vocab, ...)
                b.n_seq_id[i] = (int32_t) (in.u8() % 3);  // 0: no sequence (refused)
                for (int j = 0; j < b.n_seq_id[i]; j++) b.seq_id[i][j] = (llama_seq_id) (in.u8() % (N_SEQ + 1));
                b.pos[i] = (llama_pos) (in.u8() % 20) - 1;
                b.logits[i] = (int8_t) (in.u8() & 1);
                valid = valid && b.token[i] >= 0 && b.token[i] < n_vocab && b.n_seq_id[i] > 0;
                for (int j = 0; j < b.n_seq_id[i]; j++) valid = valid && b.seq_id[i][j] < N_SEQ;
            }
            if (valid) {
                for (int i = 0; i < n; i++) {
                    pos[i] = auto_pos ? last[b.seq_id[i][0]] + 1 : b.pos[i];
                    valid = valid && pos[i] >= 0;
                    std::set<int> seqs(b.seq_id[i], b.seq_id[i] + b.n_seq_id[i]);
                    for (int t : seqs) {
                        valid = valid && pos[i] >= last[t];
                        last[t] = pos[i];
                    }
                    added.push_back({pos[i], seqs});
                }
            }
            llama_batch call = b;
            if (auto_pos) call.pos = nullptr;
            const int32_t rc = llama_decode(ctx, call);
            const int32_t want = !valid ? -1 : cells.size() + n > (size_t) N_CTX ? 1 : 0;
            FUZZ_CHECK(rc == want);
            if (rc == 0) {
                cells.insert(cells.end(), added.begin(), added.end());
                const int32_t n_vocab_out = llama_model_n_vocab(g);
                for (int i = 0; i < n; i++) {
                    const float * row = llama_get_logits_ith(ctx, i);
                    FUZZ_CHECK((row != nullptr) == (b.logits[i] != 0));
                    for (int32_t k = 0; row && k < n_vocab_out; k++) FUZZ_CHECK(std::isfinite(row[k]));
                }
            }
            llama_batch_free(b);
        } else if (op == 3) {
            const bool ok = llama_kv_self_seq_rm(ctx, s, p0, p1);
            FUZZ_CHECK(ok == (s < N_SEQ));
            if (ok) {
                for (cell & c : cells) {
                    if ((s < 0 || c.seqs.count(s)) && in_range(c.pos)) {
                        if (s < 0) c.seqs.clear();
                        else c.seqs.erase(s);
                    }
                }
            }
        } else if (op == 4) {
            const int d = (int) (in.u8() % N_SEQ);
            llama_kv_self_seq_cp(ctx, s, d, p0, p1);
            if (s_ok && s != d) {
                for (cell & c : cells) {
                    if (c.seqs.count(s) && in_range(c.pos)) c.seqs.insert(d);
                }
            }
        } else if (op == 5) {
            llama_kv_self_seq_keep(ctx, s);
            if (s_ok) {
                for (cell & c : cells) {
                    if (c.seqs.count(s)) c.seqs = {s};
                    else c.seqs.clear();
                }
            }
        } else if (op == 6) {
            const llama_pos d = (llama_pos) (in.u8() % 9) - 4;
            llama_kv_self_seq_add(ctx, s, p0, p1, d);
            if (s < N_SEQ && d != 0) {
                for (cell & c : cells) {
                    if ((s < 0 || c.seqs.count(s)) && in_range(c.pos)) {
                        c.pos += d;
                        if (c.pos < 0) c.seqs.clear();
                    }
                }
            }
        } else {
            const uint8_t what = in.u8() % 4;
            if (what == 0) {
                llama_kv_self_defrag(ctx);
            } else if (what == 1) {
                llama_kv_self_update(ctx);
            } else if (what == 2) {
                const int d = 1 + in.u8() % 3;
                llama_kv_self_seq_div(ctx, s, p0, p1, d);
                if (s < N_SEQ && d > 1) {
                    for (cell & c : cells) {
                        if ((s < 0 || c.seqs.count(s)) && in_range(c.pos)) c.pos /= d;
                    }
                }
            } else {
                llama_kv_self_clear(ctx);
                cells.clear();
            }
        }
        cells.erase(std::remove_if(cells.begin(), cells.end(), [](const cell & c) { return c.seqs.empty(); }), cells.end());
        FUZZ_CHECK(llama_kv_self_used_cells(ctx) == (int32_t) cells.size());
        for (int t = -1; t < N_SEQ; t++) {
            FUZZ_CHECK(llama_kv_self_seq_pos_max(ctx, t) == pos_max(cells, t));
            FUZZ_CHECK(llama_kv_self_seq_pos_min(ctx, t) == pos_min(cells, t));
        }
    }
    llama_free(ctx);
    return 0;
}
