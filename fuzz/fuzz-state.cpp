// fuzz-state: saved states (llama_state_set_data, llama_state_seq_set_data) of arbitrary bytes, on
// two contexts of the tiny llama of fuzz/corpus/fuzz-model (n_ctx 16, 4 sequences, F16 cache with
// V transposed, and with flash attention, V as K), each holding a baseline (three tokens in
// sequence 0, one shared by sequences 1 and 2) before every input.
// Input: byte 0 selects the context (bit 0), what is set (bits 1-2: the whole state, a sequence's
// state into sequence bits 3-4, the cache alone through llama_state_seq_set_data(-1)) and whether
// the rest is the state itself (bit 7) or edits of the baseline's own state: u16 cut (0: none,
// else the length kept, modulo the size), u8 n, n x (u16 offset, u8 byte), then bytes appended.
// A state refused must leave the context exactly as it was (its saved state byte for byte); one
// taken must save and load again to the same bytes, and decoding after it must not crash.
#include "fuzz-common.h"

#include <vector>

namespace {

struct fixture {
    llama_model * model = nullptr;
    llama_context * ctx[2] = { nullptr, nullptr };
    std::vector<uint8_t> base[2][3];  // per context: the whole state, sequence 1's, the cache alone
};

std::vector<uint8_t> whole_state(llama_context * ctx) {
    std::vector<uint8_t> s(llama_state_get_size(ctx));
    FUZZ_CHECK(llama_state_get_data(ctx, s.data(), s.size()) == s.size());
    return s;
}

std::vector<uint8_t> seq_state(llama_context * ctx, llama_seq_id id) {
    std::vector<uint8_t> s(llama_state_seq_get_size(ctx, id));
    FUZZ_CHECK(llama_state_seq_get_data(ctx, s.data(), s.size(), id) == s.size());
    return s;
}

int32_t decode_one(llama_context * ctx, llama_token t, llama_pos pos, llama_seq_id s1, llama_seq_id s2) {
    llama_batch b = llama_batch_init(1, 0, 2);
    b.token[0] = t;
    b.pos[0] = pos;
    b.n_seq_id[0] = s2 < 0 ? 1 : 2;
    b.seq_id[0][0] = s1;
    b.seq_id[0][1] = s2;
    b.logits[0] = 1;
    b.n_tokens = 1;
    const int32_t rc = llama_decode(ctx, b);
    llama_batch_free(b);
    return rc;
}

const fixture & get() {
    static fixture f;
    static const bool made = [] {
        fuzz::quiet();
        llama_model_params mp = llama_model_default_params();
        mp.use_repack = false;
        const std::string path = std::string(FUZZ_SOURCE_DIR) + "/corpus/fuzz-model/tiny-llama-spm.gguf";
        f.model = llama_model_load_from_file(path.c_str(), mp);
        FUZZ_CHECK(f.model != nullptr);
        for (int i = 0; i < 2; i++) {
            llama_context_params cp = llama_context_default_params();
            cp.n_ctx = 16;
            cp.n_batch = 16;
            cp.n_ubatch = 16;
            cp.n_seq_max = 4;
            cp.n_threads = cp.n_threads_batch = 1;
            cp.flash_attn = i == 1;
            f.ctx[i] = llama_init_from_model(f.model, cp);
            FUZZ_CHECK(f.ctx[i] != nullptr);
            FUZZ_CHECK(decode_one(f.ctx[i], 1, 0, 0, -1) == 0);
            FUZZ_CHECK(decode_one(f.ctx[i], 5, 1, 0, -1) == 0);
            FUZZ_CHECK(decode_one(f.ctx[i], 9, 0, 1, 2) == 0);
            FUZZ_CHECK(decode_one(f.ctx[i], 6, 2, 0, -1) == 0);
            f.base[i][0] = whole_state(f.ctx[i]);
            f.base[i][1] = seq_state(f.ctx[i], 1);
            f.base[i][2] = seq_state(f.ctx[i], -1);
        }
        return true;
    }();
    (void) made;
    return f;
}

}  // namespace

#ifndef LLVMFuzzerTestOneInput  // a fuzzer (test-fuzz-regressions renames the entry and calls it itself)
extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    get();
    return 0;
}
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    const fixture & f = get();
    fuzz::reader in{ data, size };
    const uint8_t sel = in.u8();
    const int ci = sel & 1;
    const int kind = (sel >> 1) & 3;
    const llama_seq_id dest = (sel >> 3) & 3;
    llama_context * ctx = f.ctx[ci];
    const std::vector<uint8_t> & base = f.base[ci][0];

    // The baseline, again.
    FUZZ_CHECK(llama_state_set_data(ctx, base.data(), base.size()) == base.size());

    std::vector<uint8_t> bytes;
    if (sel & 0x80) {
        const std::string rest = in.rest();
        bytes.assign(rest.begin(), rest.end());
    } else {
        bytes = f.base[ci][kind == 1 ? 1 : kind == 2 ? 2 : 0];
        const uint16_t cut = (uint16_t) (in.u8() | (in.u8() << 8));
        if (cut) bytes.resize(cut % (bytes.size() + 1));
        for (int n = in.u8(); n > 0 && !bytes.empty(); n--) {
            const uint16_t off = (uint16_t) (in.u8() | (in.u8() << 8));
            bytes[off % bytes.size()] = in.u8();
        }
        const std::string rest = in.rest();
        bytes.insert(bytes.end(), rest.begin(), rest.end());
    }

    const size_t n = kind == 1 ? llama_state_seq_set_data(ctx, bytes.data(), bytes.size(), dest)
                   : kind == 2 ? llama_state_seq_set_data(ctx, bytes.data(), bytes.size(), -1)
                               : llama_state_set_data(ctx, bytes.data(), bytes.size());
    FUZZ_CHECK(n <= bytes.size());
    const std::vector<uint8_t> now = whole_state(ctx);
    if (n == 0) {
        FUZZ_CHECK(now == base);  // refused: the context as it was
        return 0;
    }
    // Taken: a consistent state, saved and loaded again to the same bytes.
    FUZZ_CHECK(llama_state_set_data(ctx, now.data(), now.size()) == now.size());
    FUZZ_CHECK(whole_state(ctx) == now);
    for (llama_seq_id s = 0; s < 4; s++) {
        const std::vector<uint8_t> ss = seq_state(ctx, s);
        (void) fuzz::touch(ss.data(), ss.size());
    }
    // Decoding goes on (or says why not).
    const llama_seq_id s = kind == 1 ? dest : 0;
    const llama_pos last = llama_kv_self_seq_pos_max(ctx, s);
    if (last < (1 << 30)) {
        const int32_t rc = decode_one(ctx, 3, last + 1, s, -1);
        if (rc == 0) {
            const float * l = llama_get_logits_ith(ctx, -1);
            FUZZ_CHECK(l != nullptr);
            (void) fuzz::touch(l, sizeof(float) * (size_t) llama_vocab_n_tokens(llama_model_get_vocab(f.model)));
        }
    }
    return 0;
}
