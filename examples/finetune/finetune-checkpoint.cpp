// finetune-checkpoint.cpp - checkpoint files (see finetune-checkpoint.h). The file is also a
// valid GGUF LoRA adapter header-wise (general.type "adapter"), so gguf tools can inspect it.
#include "finetune-checkpoint.h"

#include "llama-adapter.h"
#include "llama-model.h"

#include "ggml-backend.h"
#include "gguf.h"

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
    const int64_t vs = gguf_find_key(g.get(), "finetune.history.val_step");
    st.history.val_step.clear();
    if (vs >= 0 && gguf_get_kv_type(g.get(), vs) == GGUF_TYPE_ARRAY && gguf_get_arr_type(g.get(), vs) == GGUF_TYPE_INT64) {
        const size_t n = gguf_get_arr_n(g.get(), vs);
        st.history.val_step.resize(n);
        if (n) memcpy(st.history.val_step.data(), gguf_get_arr_data(g.get(), vs), n * sizeof(int64_t));
    }
    const size_t rows = st.history.loss.size();
    if (st.step < 0 || st.seq_pos < 0 || rows != (size_t) st.step || st.history.lr.size() != rows ||
        st.history.tokens_per_s.size() != rows || st.history.val_step.size() != st.history.val_loss.size()) {
        err = "checkpoint '" + path + "' has an inconsistent state (corrupt?)";
        return false;
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
    auto copy = [&](const std::string & name, ggml_tensor * dst) {
        const ggml_tensor * src = ggml_get_tensor(ctx, name.c_str());
        if (!src || src->type != GGML_TYPE_F32 || ggml_nelements(src) != ggml_nelements(dst)) {
            err = "checkpoint '" + path + "': tensor " + name + " is missing or has the wrong shape";
            return false;
        }
        ggml_backend_tensor_set(dst, src->data, 0, ggml_nbytes(dst));  // host or a GPU's memory
        return true;
    };
    for (ggml_tensor * t : adapter_tensors(ad)) {
        if (!copy(t->name, t)) return false;
        for (int i = 0; i < 2 && opt; i++) {
            ggml_tensor * m = ggml_opt_optimizer_state(opt, t, i);
            if (m && !copy(std::string("opt.") + (i == 0 ? "m." : "v.") + t->name, m)) return false;
        }
    }
    if (opt) ggml_opt_set_n_steps(opt, step);
    return true;
}
