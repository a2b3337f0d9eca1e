// fuzz-checkpoint: llama-finetune's checkpoint reader (examples/finetune/finetune-checkpoint.h).
// The input is a checkpoint file: ft_checkpoint_read_state, then, when it reads,
// ft_checkpoint_check_state against a fixed run (llama, fuzz::CHECKPOINT_CONFIG, alpha 16, 12
// steps of 2 sequences, a constant learning rate of 1e-3, no validation), then, when that holds,
// ft_checkpoint_restore (no optimizer) into a rank-4 adapter on q and v of the tiny llama.
// Malformed or foreign checkpoints must be refused with a message. What read_state accepts has a
// consistent history; what check_state accepts is this run's; what restore accepts filled every
// A and B with the file's finite values of exactly their shape.
#include "fuzz-common.h"

#include "finetune-checkpoint.h"
#include "llama-adapter.h"

#include "gguf.h"

#include <cmath>

namespace {

const ft_run_expect & run() {
    static const ft_run_expect r = [] {
        ft_run_expect e;
        e.arch = "llama";
        e.config = fuzz::CHECKPOINT_CONFIG;
        e.alpha = 16.0f;
        e.total_steps = 12;
        e.seqs_per_step = 2;
        e.lr_at = [](int64_t) { return 1e-3f; };
        e.validates_after = nullptr;
        return e;
    }();
    return r;
}

// The adapter a run of that configuration trains (created once).
llama_adapter_lora & adapter() {
    static llama_adapter_lora ad;
    static const bool made = [] {
        std::string err;
        if (!llama_adapter_lora_create(ad, fuzz::tiny_llama(), { "q", "v" }, 4, 16.0f, err)) {
            fprintf(stderr, "fuzz-checkpoint: cannot create the adapter: %s\n", err.c_str());
            abort();
        }
        return true;
    }();
    (void) made;
    return ad;
}

void check_read(const ft_checkpoint_state & st) {
    const ft_history & h = st.history;
    FUZZ_CHECK(st.step >= 0 && st.seq_pos >= 0);
    FUZZ_CHECK(h.lr.size() == h.loss.size() && h.tokens_per_s.size() == h.loss.size());
    FUZZ_CHECK(h.val_step.size() == h.val_loss.size());
}

// Every field as this run has it.
void check_accepted(const ft_checkpoint_state & st) {
    const ft_run_expect & r = run();
    const ft_history & h = st.history;
    FUZZ_CHECK(st.arch == r.arch && st.config == r.config && st.alpha == r.alpha);
    FUZZ_CHECK(st.step >= 0 && st.step <= r.total_steps);
    FUZZ_CHECK(st.seq_pos == st.step * r.seqs_per_step);
    FUZZ_CHECK(h.loss.size() == (size_t) st.step);
    for (size_t i = 0; i < h.loss.size(); i++) {
        FUZZ_CHECK(std::isfinite(h.loss[i]));
        FUZZ_CHECK(h.lr[i] == 1e-3f);
        FUZZ_CHECK(std::isfinite(h.tokens_per_s[i]) && h.tokens_per_s[i] >= 0);
    }
    FUZZ_CHECK(h.val_step.empty() && h.val_loss.empty());  // the run validates nothing
}

// A and B hold the file's tensors of their names, of the same shape, finite; the file holds no
// other tensors than these and optimizer moments (opt.*).
void check_restored(const std::string & path, const llama_adapter_lora & ad) {
    ggml_context * ctx = nullptr;
    gguf_context * g = gguf_init_from_file(path.c_str(), { false, &ctx, false });
    FUZZ_CHECK(g != nullptr && ctx != nullptr);  // restore read it
    size_t n_ab = 0;
    for (const auto & kv : ad.weights) {
        for (const ggml_tensor * t : { kv.second.a, kv.second.b }) {
            const ggml_tensor * src = ggml_get_tensor(ctx, t->name);
            FUZZ_CHECK(src != nullptr && src->type == GGML_TYPE_F32 && ggml_are_same_shape(src, t));
            FUZZ_CHECK(memcmp(src->data, t->data, ggml_nbytes(t)) == 0);
            const float * v = (const float *) t->data;
            for (int64_t i = 0; i < ggml_nelements(t); i++) FUZZ_CHECK(std::isfinite(v[i]));
            n_ab++;
        }
    }
    size_t n_other = 0;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); i++) n_other += strncmp(gguf_get_tensor_name(g, i), "opt.", 4) != 0;
    FUZZ_CHECK(n_other == n_ab);
    gguf_free(g);
    ggml_free(ctx);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    fuzz::quiet();
    llama_adapter_lora & ad = adapter();
    fuzz::mem_file f(data, size);
    std::string err;

    ft_checkpoint_state st;
    if (!ft_checkpoint_read_state(f.path, st, err)) {
        fuzz::refused(err);
        return 0;
    }
    check_read(st);
    if (!ft_checkpoint_check_state(st, run(), err)) {
        fuzz::refused(err);
        return 0;
    }
    check_accepted(st);

    // Zero first, so that what the check sees was written by this restore.
    for (auto & kv : ad.weights) {
        memset(kv.second.a->data, 0, ggml_nbytes(kv.second.a));
        memset(kv.second.b->data, 0, ggml_nbytes(kv.second.b));
    }
    if (!ft_checkpoint_restore(f.path, ad, nullptr, err)) {
        fuzz::refused(err);
        return 0;
    }
    check_restored(f.path, ad);
    return 0;
}
