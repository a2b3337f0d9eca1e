// finetune-checkpoint.cpp - checkpoint files (see finetune-checkpoint.h). The file is also a
// valid GGUF LoRA adapter header-wise (general.type "adapter"), so gguf tools can inspect it.
#include "finetune-checkpoint.h"

#include "llama-adapter.h"
#include "llama-model.h"

#include "ggml-backend.h"
#include "gguf.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

namespace {

constexpr uint32_t kVersion = 1;

using gguf_ptr = std::unique_ptr<gguf_context, void (*)(gguf_context *)>;
using ggml_ptr = std::unique_ptr<ggml_context, void (*)(ggml_context *)>;

void set_f32_arr(gguf_context * g, const char * key, const std::vector<float> & v) {
    gguf_set_arr_data(g, key, GGUF_TYPE_FLOAT32, v.data(), v.size());
}

bool get_f32_arr(const gguf_context * g, const char * key, std::vector<float> & v) {
    const int64_t id = gguf_find_key(g, key);
    if (id < 0 || gguf_get_kv_type(g, id) != GGUF_TYPE_ARRAY || gguf_get_arr_type(g, id) != GGUF_TYPE_FLOAT32) return false;
    const size_t n = gguf_get_arr_n(g, id);
    v.resize(n);
    if (n) memcpy(v.data(), gguf_get_arr_data(g, id), n * sizeof(float));
    return true;
}

bool get_i64(const gguf_context * g, const char * key, int64_t & v) {
    const int64_t id = gguf_find_key(g, key);
    if (id < 0 || gguf_get_kv_type(g, id) != GGUF_TYPE_INT64) return false;
    v = gguf_get_val_i64(g, id);
    return true;
}

// The A and B tensors of the adapter in a fixed order (the model's, as map order is by address).
std::vector<ggml_tensor *> adapter_tensors(const llama_adapter_lora & ad) {
    std::vector<ggml_tensor *> out;
    for (const auto & kv : ad.weights) {
        out.push_back(kv.second.a);
        out.push_back(kv.second.b);
    }
    return out;
}

}  // namespace

bool ft_checkpoint_save(const std::string & path, const llama_model & model, const llama_adapter_lora & ad,
                        ggml_opt_context_t opt, const ft_checkpoint_state & st, std::string & err) {
    gguf_ptr g(gguf_init_empty(), gguf_free);
    gguf_set_val_str(g.get(), "general.architecture", model.arch_name.c_str());
    gguf_set_val_str(g.get(), "general.type", "adapter");
    gguf_set_val_str(g.get(), "adapter.type", "lora");
    gguf_set_val_f32(g.get(), "adapter.lora.alpha", ad.alpha);
    gguf_set_val_u32(g.get(), "finetune.checkpoint.version", kVersion);
    gguf_set_val_i64(g.get(), "finetune.step", st.step);
    gguf_set_val_i64(g.get(), "finetune.seq_pos", st.seq_pos);
    gguf_set_val_str(g.get(), "finetune.config", st.config.c_str());
    set_f32_arr(g.get(), "finetune.history.loss", st.history.loss);
    set_f32_arr(g.get(), "finetune.history.lr", st.history.lr);
    set_f32_arr(g.get(), "finetune.history.tokens_per_s", st.history.tokens_per_s);
    set_f32_arr(g.get(), "finetune.history.val_loss", st.history.val_loss);
    gguf_set_arr_data(g.get(), "finetune.history.val_step", GGUF_TYPE_INT64, st.history.val_step.data(), st.history.val_step.size());

    const std::vector<ggml_tensor *> ts = adapter_tensors(ad);
    // Host copies of the adapter and of the moments (named here: the optimizer's own names are
    // not stable file names); either may live in a GPU's memory.
    ggml_ptr meta(ggml_init({3 * ts.size() * ggml_tensor_overhead() + 1024, nullptr, true}), ggml_free);
    std::vector<std::vector<uint8_t>> host;
    host.reserve(3 * ts.size());
    auto add = [&](const ggml_tensor * src, const std::string & name) {
        ggml_tensor * h = ggml_new_tensor(meta.get(), src->type, GGML_MAX_DIMS, src->ne);
        ggml_set_name(h, name.c_str());
        host.emplace_back(ggml_nbytes(src));
        ggml_backend_tensor_get(src, host.back().data(), 0, host.back().size());
        h->data = host.back().data();
        gguf_add_tensor(g.get(), h);
    };
    for (ggml_tensor * t : ts) add(t, t->name);
    for (int i = 0; i < 2 && opt; i++) {
        for (ggml_tensor * t : ts) {
            ggml_tensor * m = ggml_opt_optimizer_state(opt, t, i);
            if (m) add(m, std::string("opt.") + (i == 0 ? "m." : "v.") + t->name);
        }
    }
    if (!gguf_write_to_file(g.get(), path.c_str(), false)) {
        err = "cannot write checkpoint '" + path + "'";
        return false;
    }
    return true;
}

bool ft_checkpoint_read_state(const std::string & path, ft_checkpoint_state & st, std::string & err) {
    gguf_ptr g(gguf_init_from_file(path.c_str(), {true, nullptr, false}), gguf_free);
    if (!g) {
        err = "cannot read checkpoint '" + path + "' (missing, truncated or not GGUF)";
        return false;
    }
    const int64_t vid = gguf_find_key(g.get(), "finetune.checkpoint.version");
    if (vid < 0 || gguf_get_kv_type(g.get(), vid) != GGUF_TYPE_UINT32) {
        err = "'" + path + "' is not a llama-finetune checkpoint";
        return false;
    }
    if (gguf_get_val_u32(g.get(), vid) != kVersion) {
        err = "'" + path + "' is a checkpoint of another version";
        return false;
    }
    const int64_t cid = gguf_find_key(g.get(), "finetune.config");
    if (!get_i64(g.get(), "finetune.step", st.step) || !get_i64(g.get(), "finetune.seq_pos", st.seq_pos) || cid < 0 ||
        gguf_get_kv_type(g.get(), cid) != GGUF_TYPE_STRING || !get_f32_arr(g.get(), "finetune.history.loss", st.history.loss) ||
        !get_f32_arr(g.get(), "finetune.history.lr", st.history.lr) ||
        !get_f32_arr(g.get(), "finetune.history.tokens_per_s", st.history.tokens_per_s) ||
        !get_f32_arr(g.get(), "finetune.history.val_loss", st.history.val_loss)) {
        err = "checkpoint '" + path + "' lacks its state (corrupt?)";
        return false;
    }
    st.config = gguf_get_val_str(g.get(), cid);
    const int64_t aid = gguf_find_key(g.get(), "general.architecture");
    const int64_t lid = gguf_find_key(g.get(), "adapter.lora.alpha");
    if (aid < 0 || gguf_get_kv_type(g.get(), aid) != GGUF_TYPE_STRING || lid < 0 || gguf_get_kv_type(g.get(), lid) != GGUF_TYPE_FLOAT32) {
        err = "checkpoint '" + path + "' lacks general.architecture or adapter.lora.alpha (corrupt?)";
        return false;
    }
    st.arch = gguf_get_val_str(g.get(), aid);
    st.alpha = gguf_get_val_f32(g.get(), lid);
    const int64_t vs = gguf_find_key(g.get(), "finetune.history.val_step");
    st.history.val_step.clear();
    if (vs >= 0 && gguf_get_kv_type(g.get(), vs) == GGUF_TYPE_ARRAY && gguf_get_arr_type(g.get(), vs) == GGUF_TYPE_INT64) {
        const size_t n = gguf_get_arr_n(g.get(), vs);
        st.history.val_step.resize(n);
        if (n) memcpy(st.history.val_step.data(), gguf_get_arr_data(g.get(), vs), n * sizeof(int64_t));
    }
    const size_t rows = st.history.loss.size();
    std::string bad;
    if (st.step < 0) bad = "finetune.step is negative";
    else if (st.seq_pos < 0) bad = "finetune.seq_pos is negative";
    else if (rows != (size_t) st.step || st.history.lr.size() != rows || st.history.tokens_per_s.size() != rows) {
        bad = "finetune.history has " + std::to_string(rows) + " loss, " + std::to_string(st.history.lr.size()) + " lr and " +
              std::to_string(st.history.tokens_per_s.size()) + " tokens_per_s rows for finetune.step " + std::to_string(st.step);
    } else if (st.history.val_step.size() != st.history.val_loss.size()) {
        bad = "finetune.history.val_step and val_loss differ in length";
    }
    if (!bad.empty()) {
        err = "checkpoint '" + path + "' has an inconsistent state: " + bad + " (corrupt?)";
        return false;
    }
    return true;
}

bool ft_checkpoint_check_state(const ft_checkpoint_state & st, const ft_run_expect & run, std::string & err) {
    auto bad = [&](const std::string & what) {
        err = "the checkpoint's " + what;
        return false;
    };
    if (st.arch != run.arch) return bad("general.architecture is '" + st.arch + "', the base model's '" + run.arch + "'");
    if (st.config != run.config) {
        return bad("finetune.config differs: it was made with other options or data:\n--- checkpoint\n" + st.config + "--- this run\n" +
                   run.config);
    }
    // bitwise: both are the float the run computes (a NaN never equals)
    if (memcmp(&st.alpha, &run.alpha, sizeof(float)) != 0) {
        return bad("adapter.lora.alpha is " + std::to_string(st.alpha) + ", this run's " + std::to_string(run.alpha));
    }
    if (st.step < 0 || st.step > run.total_steps) {
        return bad("finetune.step is " + std::to_string(st.step) + ", outside this run's 0 to " + std::to_string(run.total_steps));
    }
    int64_t pos = 0;
    if (__builtin_mul_overflow(st.step, run.seqs_per_step, &pos) || st.seq_pos != pos) {
        return bad("finetune.seq_pos is " + std::to_string(st.seq_pos) + ", but " + std::to_string(st.step) + " steps of " +
                   std::to_string(run.seqs_per_step) + " sequences consume " +
                   (pos == 0 && st.step > 0 ? std::string("more than 2^63") : std::to_string(pos)));
    }
    const ft_history & h = st.history;
    if (h.loss.size() != (size_t) st.step || h.lr.size() != (size_t) st.step || h.tokens_per_s.size() != (size_t) st.step) {
        return bad("finetune.history has " + std::to_string(h.loss.size()) + " rows for " + std::to_string(st.step) + " steps");
    }
    for (int64_t s = 0; s < st.step; s++) {
        if (!std::isfinite(h.loss[(size_t) s])) return bad("finetune.history.loss is not finite at step " + std::to_string(s + 1));
        if (!(std::isfinite(h.tokens_per_s[(size_t) s]) && h.tokens_per_s[(size_t) s] >= 0)) {
            return bad("finetune.history.tokens_per_s is not a rate at step " + std::to_string(s + 1));
        }
        const float lr = run.lr_at ? run.lr_at(s) : h.lr[(size_t) s];
        if (memcmp(&lr, &h.lr[(size_t) s], sizeof(float)) != 0) {
            return bad("finetune.history.lr of step " + std::to_string(s + 1) + " is " + std::to_string(h.lr[(size_t) s]) +
                       ", this run's schedule gives " + std::to_string(lr));
        }
    }
    // The validation rows this run would have written by then: step 0, then the steps it validates after.
    std::vector<int64_t> val_steps;
    if (run.validates_after) {
        val_steps.push_back(0);
        for (int64_t s = 1; s <= st.step; s++) {
            if (run.validates_after(s)) val_steps.push_back(s);
        }
    }
    if (h.val_step != val_steps || h.val_loss.size() != val_steps.size()) {
        return bad("validation history (finetune.history.val_step: " + std::to_string(h.val_step.size()) + " rows) is not " +
                   (run.validates_after ? "the " + std::to_string(val_steps.size()) + " rows this run would have by step " +
                                              std::to_string(st.step)
                                        : std::string("empty, as this run validates nothing (no --val-split)")));
    }
    for (size_t i = 0; i < h.val_loss.size(); i++) {
        if (!std::isfinite(h.val_loss[i])) return bad("finetune.history.val_loss is not finite at step " + std::to_string(h.val_step[i]));
    }
    return true;
}

bool ft_checkpoint_restore(const std::string & path, const llama_adapter_lora & ad, ggml_opt_context_t opt, std::string & err) {
    ggml_context * ctx = nullptr;
    gguf_ptr g(gguf_init_from_file(path.c_str(), {false, &ctx, false}), gguf_free);
    if (!g) {
        err = "cannot read checkpoint '" + path + "'";
        return false;
    }
    ggml_ptr owner(ctx, ggml_free);
    int64_t step = 0;
    get_i64(g.get(), "finetune.step", step);
    size_t expected = 0;
    auto copy = [&](const std::string & name, ggml_tensor * dst, bool moment2) {
        const ggml_tensor * src = ggml_get_tensor(ctx, name.c_str());
        expected++;
        // The exact shape: A [n_in, r] and B [r, n_out] swapped or transposed have as many elements.
        if (!src || src->type != GGML_TYPE_F32 || !ggml_are_same_shape(src, dst)) {
            err = "checkpoint '" + path + "': tensor " + name + (src ? " has the wrong type or shape" : " is missing");
            if (src) {
                err += " [" + std::to_string(src->ne[0]) + ", " + std::to_string(src->ne[1]) + "] " + ggml_type_name(src->type) +
                       ", this run's is [" + std::to_string(dst->ne[0]) + ", " + std::to_string(dst->ne[1]) + "] f32";
            }
            return false;
        }
        const float * v = (const float *) src->data;
        for (int64_t i = 0; i < ggml_nelements(src); i++) {
            if (!std::isfinite(v[i]) || (moment2 && v[i] < 0)) {
                err = "checkpoint '" + path + "': tensor " + name + " holds " + (moment2 ? "a negative or " : "a ") +
                      "non-finite value at element " + std::to_string(i) + " (corrupt?)";
                return false;
            }
        }
        ggml_backend_tensor_set(dst, src->data, 0, ggml_nbytes(dst));  // host or a GPU's memory
        return true;
    };
    for (ggml_tensor * t : adapter_tensors(ad)) {
        if (!copy(t->name, t, false)) return false;
        for (int i = 0; i < 2 && opt; i++) {
            ggml_tensor * m = ggml_opt_optimizer_state(opt, t, i);
            if (m && !copy(std::string("opt.") + (i == 0 ? "m." : "v.") + t->name, m, i == 1)) return false;
        }
    }
    // opt NULL (no optimizer to fill): the moments the file holds are not this caller's to check
    size_t moments = 0;
    for (int64_t i = 0; !opt && i < gguf_get_n_tensors(g.get()); i++) moments += strncmp(gguf_get_tensor_name(g.get(), i), "opt.", 4) == 0;
    if ((size_t) gguf_get_n_tensors(g.get()) != expected + moments) {
        err = "checkpoint '" + path + "' holds " + std::to_string(gguf_get_n_tensors(g.get())) + " tensors, this run's adapter and optimizer " +
              std::to_string(expected) + " (other targets or optimizer?)";
        return false;
    }
    if (opt) ggml_opt_set_n_steps(opt, step);
    return true;
}
