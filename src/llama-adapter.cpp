// llama-adapter.cpp - LoRA adapters: creation, GGUF reading and writing, checks against the base
// model, and the C API (llama_adapter_lora_init, llama_set_adapter_lora, ...).
#include "llama-adapter.h"
#include "llama-context.h"
#include "llama-hf.h"
#include "llama-impl.h"
#include "llama-model.h"

#include "gguf.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>
#include <sys/stat.h>

namespace {

// Room for n A/B pairs of rank r on the given weights (tensor structs and F32 data).
size_t pairs_mem(const std::vector<std::pair<const ggml_tensor *, int32_t>> & ws) {
    size_t mem = 2 * ws.size() * ggml_tensor_overhead() + 1024;
    for (const auto & w : ws) {
        mem += ((size_t) w.second * (size_t) (w.first->ne[0] + w.first->ne[1])) * sizeof(float) + 4 * GGML_MEM_ALIGN;
    }
    return mem;
}

std::string shape_str(const ggml_tensor * t) {
    return "[" + std::to_string(t->ne[0]) + ", " + std::to_string(t->ne[1]) + "]";
}

}  // namespace

llama_adapter_lora::llama_adapter_lora() = default;
llama_adapter_lora::~llama_adapter_lora() {
    on_device.reset();
    ggml_free(ctx);
}

llama_adapter_device_copy::~llama_adapter_device_copy() {
    for (ggml_backend_buffer_t b : bufs) ggml_backend_buffer_free(b);
    for (ggml_context * c : ctxs) ggml_free(c);
}

bool llama_adapter_lora_to_devices(llama_adapter_lora & ad, llama_adapter_device_copy & dc, bool keep_host, std::string & err) {
    std::map<ggml_backend_buffer_type_t, ggml_context *> ctx_of;
    std::map<ggml_tensor *, ggml_tensor *> dev_of;  // host tensor -> its copy
    llama_adapter_device_copy fresh;                // dc's additions, until all succeeded
    for (auto & kv : ad.weights) {
        const ggml_tensor * base = kv.first->view_src ? kv.first->view_src : kv.first;
        if (!base->buffer || ggml_backend_buffer_is_host(base->buffer)) continue;
        ggml_context *& c = ctx_of[ggml_backend_buffer_get_type(base->buffer)];
        if (!c) {
            c = ggml_init({2 * ad.weights.size() * ggml_tensor_overhead(), nullptr, true});
            if (!c) {
                err = "cannot allocate the adapter's tensor headers";
                return false;
            }
            fresh.ctxs.push_back(c);
        }
        for (ggml_tensor * h : {kv.second.a, kv.second.b}) {
            dev_of[h] = ggml_dup_tensor(c, h);
            ggml_set_name(dev_of[h], h->name);
        }
    }
    if (dev_of.empty()) return true;
    for (auto & [buft, c] : ctx_of) {
        ggml_backend_buffer_t b = ggml_backend_alloc_ctx_tensors_from_buft(c, buft);
        if (!b) {
            err = std::string("cannot allocate the adapter in ") + ggml_backend_buft_name(buft);
            return false;
        }
        ggml_backend_buffer_set_usage(b, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        fresh.bufs.push_back(b);
    }
    for (auto & [h, d] : dev_of) ggml_backend_tensor_set(d, h->data, 0, ggml_nbytes(h));

    // The pairs left in host memory, into a context of their own size (the moved ones' host
    // values go with the old one).
    ggml_context * host_ctx = nullptr;
    std::map<ggml_tensor *, ggml_tensor *> host_copy;
    if (!keep_host) {
        std::vector<std::pair<const ggml_tensor *, int32_t>> ws;
        for (auto & kv : ad.weights) {
            if (!dev_of.count(kv.second.a)) ws.push_back({kv.first, (int32_t) kv.second.a->ne[1]});
        }
        host_ctx = ggml_init({pairs_mem(ws), nullptr, false});
        if (!host_ctx) {
            err = "cannot allocate the adapter's host memory";
            return false;
        }
        for (auto & kv : ad.weights) {
            if (dev_of.count(kv.second.a)) continue;
            for (ggml_tensor * h : {kv.second.a, kv.second.b}) {
                ggml_tensor * t = ggml_dup_tensor(host_ctx, h);
                ggml_set_name(t, h->name);
                memcpy(t->data, h->data, ggml_nbytes(h));
                host_copy[h] = t;
            }
        }
    } else {
        for (auto & [h, d] : dev_of) fresh.host_of[d] = h;
    }
    for (auto & kv : ad.weights) {
        for (ggml_tensor ** t : {&kv.second.a, &kv.second.b}) {
            if (dev_of.count(*t)) *t = dev_of[*t];
            else if (host_copy.count(*t)) *t = host_copy[*t];
        }
    }
    if (host_ctx) {
        ggml_free(ad.ctx);
        ad.ctx = host_ctx;
    }
    dc.ctxs.insert(dc.ctxs.end(), fresh.ctxs.begin(), fresh.ctxs.end());
    dc.bufs.insert(dc.bufs.end(), fresh.bufs.begin(), fresh.bufs.end());
    dc.host_of.insert(fresh.host_of.begin(), fresh.host_of.end());
    fresh.ctxs.clear();
    fresh.bufs.clear();
    return true;
}

int32_t llama_adapter_lora::rank() const { return weights.empty() ? 0 : (int32_t) weights.begin()->second.a->ne[1]; }

float llama_adapter_lora::effective_scale(const llama_adapter_lora_weight & w, float scale) const {
    return alpha != 0.0f ? scale * alpha / (float) w.a->ne[1] : scale;
}

const ggml_tensor * llama_adapter_base_tensor(const llama_model & model, const std::string & name) {
    // Only the projections the graph multiplies through lora_mm can be adapted (not token_embd).
    for (const auto & p : llama_hf_projections(model.arch)) {
        const int n = p.per_layer ? (int) model.hparams.n_layer : 1;
        for (int il = 0; il < n; il++) {
            if (llama_hf_name(p.gguf, il) == name) return model.ctx_w ? ggml_get_tensor(model.ctx_w, name.c_str()) : nullptr;
        }
    }
    return nullptr;
}

std::string llama_adapter_rank_error(const ggml_tensor * w, int64_t r) {
    if (r >= 1 && r <= 65536 && r <= w->ne[0] && r <= w->ne[1]) return "";
    return "LoRA rank " + std::to_string(r) + " does not fit " + w->name + " " + shape_str(w) + " (1 to min(65536, " +
           std::to_string(std::min(w->ne[0], w->ne[1])) + "))";
}

std::string llama_adapter_non_finite_error(const float * v, size_t n, const std::string & what) {
    for (size_t i = 0; i < n; i++) {
        if (!std::isfinite(v[i])) {
            char b[64];
            snprintf(b, sizeof(b), "%g", (double) v[i]);
            return "tensor " + what + " holds a non-finite value (" + b + " at element " + std::to_string(i) + ")";
        }
    }
    return "";
}

bool llama_adapter_lora_add(llama_adapter_lora & ad, const ggml_tensor * w, int32_t r, std::string & err) {
    if (ad.weights.count(w)) {
        err = std::string("two adapter entries for ") + w->name;
        return false;
    }
    if (!ad.ctx) {  // ggml_init failed
        err = "cannot allocate the adapter's memory";
        return false;
    }
    if (r < 1) {  // B A would be zero with an infinite scale alpha / r
        err = std::string("the LoRA pair of ") + w->name + " has rank " + std::to_string(r) + " (empty A and B)";
        return false;
    }
    ggml_tensor * a = ggml_new_tensor_2d(ad.ctx, GGML_TYPE_F32, w->ne[0], r);
    ggml_tensor * b = ggml_new_tensor_2d(ad.ctx, GGML_TYPE_F32, r, w->ne[1]);
    if (!a || !b) {
        err = "out of adapter memory";
        return false;
    }
    ggml_format_name(a, "%s.lora_a", w->name);
    ggml_format_name(b, "%s.lora_b", w->name);
    memset(a->data, 0, ggml_nbytes(a));
    memset(b->data, 0, ggml_nbytes(b));
    ad.weights[w] = {a, b};
    return true;
}

bool llama_adapter_lora_create(llama_adapter_lora & ad, const llama_model & model, const std::vector<std::string> & targets,
                               int32_t r, float alpha, std::string & err) {
    if (r <= 0 || r > 65536) {
        err = "LoRA rank " + std::to_string(r) + " is out of range (1..65536)";
        return false;
    }
    if (!std::isfinite(alpha)) {
        err = "LoRA alpha is not a finite number";
        return false;
    }
    if (targets.empty()) {
        err = "no LoRA targets";
        return false;
    }
    std::vector<std::pair<const ggml_tensor *, int32_t>> ws;
    ad.targets.clear();
    for (const std::string & t : targets) {
        const llama_hf_proj * p = llama_hf_find_target(model.arch, t);
        const std::vector<const llama_hf_proj *> sharers = llama_hf_module_sharers(model.arch, t);
        if (!p && !sharers.empty()) {
            std::string which;
            for (const llama_hf_proj * q : sharers) which += (which.empty() ? "" : ", ") + q->target + " (" + llama_hf_name(q->hf, 0) + ")";
            err = "LoRA target '" + t + "' is ambiguous in " + model.arch_name + ": it is the module name of " + which +
                  "; name the projection";
            return false;
        }
        if (!p) {
            std::string have;
            for (const auto & q : llama_hf_projections(model.arch)) have += (have.empty() ? "" : ", ") + q.target;
            err = (llama_hf_is_target(t) ? "LoRA target '" + t + "' is not a projection of " + model.arch_name
                                         : "unknown LoRA target '" + t + "'") + " (" + have + ")";
            return false;
        }
        const int n = p->per_layer ? (int) model.hparams.n_layer : 1;
        for (int il = 0; il < n; il++) {
            const std::string name = llama_hf_name(p->gguf, il);
            const ggml_tensor * w = llama_adapter_base_tensor(model, name);
            if (!w) {
                err = "the model has no tensor " + name + " for LoRA target '" + t + "'";
                return false;
            }
            err = llama_adapter_rank_error(w, r);
            if (!err.empty()) return false;
            ws.push_back({w, r});
        }
        ad.targets.push_back(p->target);
    }
    ggml_free(ad.ctx);
    ad.ctx = ggml_init({pairs_mem(ws), nullptr, false});
    if (!ad.ctx) {
        err = "cannot allocate the adapter";
        return false;
    }
    ad.weights.clear();
    for (const auto & w : ws) {
        if (!llama_adapter_lora_add(ad, w.first, w.second, err)) return false;
    }
    ad.arch = model.arch_name;
    ad.alpha = alpha;
    return true;
}

namespace {

// Converts a tensor of any type with a row converter to F32 values.
bool to_f32(const ggml_tensor * t, float * dst, std::string & err) {
    const int64_t n = ggml_nelements(t);
    if (t->type == GGML_TYPE_F32) {
        memcpy(dst, t->data, (size_t) n * sizeof(float));
        return true;
    }
    const ggml_type_traits * tr = ggml_get_type_traits(t->type);
    if (!tr || !tr->to_float || t->ne[0] % tr->blck_size != 0) {
        err = std::string("adapter tensor ") + t->name + " has unsupported type " + ggml_type_name(t->type);
        return false;
    }
    const int64_t rows = n / t->ne[0];
    for (int64_t i = 0; i < rows; i++) tr->to_float((const char *) t->data + i * t->nb[1], dst + i * t->ne[0], t->ne[0]);
    return true;
}

std::string meta_str(const gguf_context * g, const char * key) {
    const int64_t id = gguf_find_key(g, key);
    if (id < 0 || gguf_get_kv_type(g, id) != GGUF_TYPE_STRING) return "";
    return gguf_get_val_str(g, id);
}

bool load_gguf(llama_adapter_lora & ad, const llama_model & model, const std::string & path, std::string & err) {
    ggml_context * ctx_file = nullptr;
    gguf_context * g = gguf_init_from_file(path.c_str(), {false, &ctx_file, false});
    if (!g) {
        err = "cannot read '" + path + "' as a GGUF file (truncated or corrupt)";
        return false;
    }
    std::unique_ptr<gguf_context, void (*)(gguf_context *)> gg(g, gguf_free);
    std::unique_ptr<ggml_context, void (*)(ggml_context *)> gc(ctx_file, ggml_free);
    const std::string gtype = meta_str(g, "general.type"), atype = meta_str(g, "adapter.type");
    if (gtype != "adapter" || atype != "lora") {
        err = "'" + path + "' is not a LoRA adapter (general.type '" + gtype + "', adapter.type '" + atype + "')";
        return false;
    }
    ad.arch = meta_str(g, "general.architecture");
    if (ad.arch != model.arch_name) {
        err = "'" + path + "' is an adapter for architecture '" + ad.arch + "', the model is '" + model.arch_name + "'";
        return false;
    }
    ad.alpha = 0.0f;
    const int64_t ka = gguf_find_key(g, "adapter.lora.alpha");
    if (ka >= 0) {
        if (gguf_get_kv_type(g, ka) == GGUF_TYPE_FLOAT32) ad.alpha = gguf_get_val_f32(g, ka);
        else if (gguf_get_kv_type(g, ka) == GGUF_TYPE_FLOAT64) ad.alpha = (float) gguf_get_val_f64(g, ka);
        else {
            err = "'" + path + "': adapter.lora.alpha is not a float";
            return false;
        }
        if (!std::isfinite(ad.alpha)) {
            err = "'" + path + "': adapter.lora.alpha is not a finite number (" + std::to_string(ad.alpha) + ")";
            return false;
        }
    }
    // Pair up <base>.lora_a / <base>.lora_b.
    std::map<std::string, std::pair<ggml_tensor *, ggml_tensor *>> pairs;
    for (ggml_tensor * t = ggml_get_first_tensor(ctx_file); t; t = ggml_get_next_tensor(ctx_file, t)) {
        const std::string n = t->name;
        const bool is_a = n.size() > 7 && n.compare(n.size() - 7, 7, ".lora_a") == 0;
        const bool is_b = n.size() > 7 && n.compare(n.size() - 7, 7, ".lora_b") == 0;
        if (!is_a && !is_b) {
            LLAMA_LOG_WARN("%s: ignoring tensor '%s' (not a .lora_a / .lora_b tensor)\n", path.c_str(), n.c_str());
            continue;
        }
        auto & p = pairs[n.substr(0, n.size() - 7)];
        (is_a ? p.first : p.second) = t;
    }
    if (pairs.empty()) {
        err = "'" + path + "' holds no LoRA tensors";
        return false;
    }
    std::vector<std::pair<const ggml_tensor *, int32_t>> ws;
    for (const auto & kv : pairs) {
        const ggml_tensor * a = kv.second.first, * b = kv.second.second;
        if (!a || !b) {
            err = "'" + path + "': " + kv.first + " has lora_" + (a ? "a" : "b") + " but no lora_" + (a ? "b" : "a");
            return false;
        }
        const ggml_tensor * w = llama_adapter_base_tensor(model, kv.first);
        if (!w) {
            err = "'" + path + "' adapts " + kv.first + ", which the model does not have";
            return false;
        }
        if (ggml_n_dims(a) > 2 || ggml_n_dims(b) > 2 || a->ne[0] != w->ne[0] || b->ne[1] != w->ne[1] || a->ne[1] != b->ne[0]) {
            err = "'" + path + "': " + kv.first + " " + shape_str(w) + " does not fit lora_a " + shape_str(a) + " and lora_b " +
                  shape_str(b) + " (expected [n_in, r] and [r, n_out])";
            return false;
        }
        const std::string rank_err = llama_adapter_rank_error(w, a->ne[1]);
        if (!rank_err.empty()) {
            err = "'" + path + "': " + rank_err;
            return false;
        }
        ws.push_back({w, (int32_t) a->ne[1]});
    }
    ggml_free(ad.ctx);
    ad.ctx = ggml_init({pairs_mem(ws), nullptr, false});
    ad.weights.clear();
    size_t i = 0;
    for (const auto & kv : pairs) {
        const ggml_tensor * w = ws[i++].first;
        if (!llama_adapter_lora_add(ad, w, (int32_t) kv.second.first->ne[1], err)) return false;
        const llama_adapter_lora_weight & lw = ad.weights[w];
        for (const auto & [src, dst] : {std::pair{kv.second.first, lw.a}, std::pair{kv.second.second, lw.b}}) {
            if (!to_f32(src, (float *) dst->data, err)) return false;
            err = llama_adapter_non_finite_error((const float *) dst->data, (size_t) ggml_nelements(dst), src->name);
            if (!err.empty()) {
                err = "'" + path + "': " + err;
                return false;
            }
        }
    }
    llama_adapter_lora_list_targets(ad, model);
    return true;
}

}  // namespace

void llama_adapter_lora_list_targets(llama_adapter_lora & ad, const llama_model & model) {
    ad.targets.clear();
    for (const auto & p : llama_hf_projections(model.arch)) {
        const int n = p.per_layer ? (int) model.hparams.n_layer : 1;
        for (int il = 0; il < n; il++) {
            const ggml_tensor * w = llama_adapter_base_tensor(model, llama_hf_name(p.gguf, il));
            if (w && ad.get(w)) {
                ad.targets.push_back(p.target);
                break;
            }
        }
    }
}

bool llama_adapter_lora_load(llama_adapter_lora & ad, const llama_model & model, const std::string & path, std::string & err) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
        err = "cannot open '" + path + "': " + strerror(errno);
        return false;
    }
    if (S_ISDIR(st.st_mode)) return llama_adapter_lora_load_peft(ad, model, path, err);
    return load_gguf(ad, model, path, err);
}

bool llama_adapter_lora_save_gguf(const llama_adapter_lora & ad, const llama_model & model, const std::string & path,
                                  ggml_type type, std::string & err) {
    if (type != GGML_TYPE_F32 && type != GGML_TYPE_F16 && type != GGML_TYPE_BF16) {
        err = std::string("adapters are written as F32, F16 or BF16, not ") + ggml_type_name(type);
        return false;
    }
    gguf_context * g = gguf_init_empty();
    std::unique_ptr<gguf_context, void (*)(gguf_context *)> gg(g, gguf_free);
    gguf_set_val_str(g, "general.architecture", model.arch_name.c_str());
    gguf_set_val_str(g, "general.type", "adapter");
    gguf_set_val_str(g, "adapter.type", "lora");
    gguf_set_val_f32(g, "adapter.lora.alpha", ad.alpha);
    // Tensors in the model's order (layer by layer), A before B, as llama.cpp's converter writes them.
    std::vector<const llama_adapter_lora_weight *> order;
    for (ggml_tensor * w = ggml_get_first_tensor(model.ctx_w); w; w = ggml_get_next_tensor(model.ctx_w, w)) {
        if (const llama_adapter_lora_weight * lw = ad.get(w)) order.push_back(lw);
    }
    std::vector<std::vector<uint8_t>> bufs;
    for (const llama_adapter_lora_weight * lw : order) {
        for (const ggml_tensor * t : {lw->a, lw->b}) {
            gguf_add_tensor(g, t);
            if (type == GGML_TYPE_F32) continue;
            gguf_set_tensor_type(g, t->name, type);
            bufs.emplace_back(ggml_row_size(type, ggml_nelements(t)));
            ggml_get_type_traits(type)->from_float_ref((const float *) t->data, bufs.back().data(), ggml_nelements(t));
        }
    }
    if (type != GGML_TYPE_F32) {
        size_t i = 0;
        for (const llama_adapter_lora_weight * lw : order) {
            for (const ggml_tensor * t : {lw->a, lw->b}) gguf_set_tensor_data(g, t->name, bufs[i++].data());
        }
    }
    if (!gguf_write_to_file(g, path.c_str(), false)) {
        err = "cannot write '" + path + "'";
        return false;
    }
    return true;
}

// ---- C API ---------------------------------------------------------------------------------

llama_adapter_lora * llama_adapter_lora_init(llama_model * model, const char * path_lora) {
    if (!model || !path_lora) return nullptr;
    auto * ad = new llama_adapter_lora();
    std::string err;
    if (!llama_adapter_lora_load(*ad, *model, path_lora, err)) {
        LLAMA_LOG_ERROR("llama_adapter_lora_init: %s\n", err.c_str());
        delete ad;
        return nullptr;
    }
    ad->on_device = std::make_unique<llama_adapter_device_copy>();
    if (!llama_adapter_lora_to_devices(*ad, *ad->on_device, false, err)) {
        LLAMA_LOG_ERROR("llama_adapter_lora_init: %s\n", err.c_str());
        delete ad;
        return nullptr;
    }
    size_t n_moved = 0;
    for (const auto & kv : ad->weights) n_moved += kv.second.a->buffer && !ggml_backend_buffer_is_host(kv.second.a->buffer);
    LLAMA_LOG_INFO("llama_adapter_lora_init: loaded %zu LoRA pairs (rank %d, alpha %g) from %s, %zu of them in a device's memory\n",
                   ad->weights.size(), ad->rank(), ad->alpha, path_lora, n_moved);
    return ad;
}

void llama_adapter_lora_free(llama_adapter_lora * adapter) { delete adapter; }

int32_t llama_set_adapter_lora(llama_context * ctx, llama_adapter_lora * adapter, float scale) {
    if (!ctx || !adapter) return -1;
    if (!std::isfinite(scale)) {  // every logit would be NaN
        LLAMA_LOG_ERROR("llama_set_adapter_lora: the scale %g is not a finite number\n", (double) scale);
        return -1;
    }
    for (auto & e : ctx->loras.entries) {
        if (e.adapter == adapter) {
            e.scale = scale;
            return 0;
        }
    }
    ctx->loras.entries.push_back({adapter, scale});
    return 0;
}

int32_t llama_rm_adapter_lora(llama_context * ctx, llama_adapter_lora * adapter) {
    if (!ctx) return -1;
    auto & es = ctx->loras.entries;
    for (size_t i = 0; i < es.size(); i++) {
        if (es[i].adapter == adapter) {
            es.erase(es.begin() + (long) i);
            return 0;
        }
    }
    return -1;
}

void llama_clear_adapter_lora(llama_context * ctx) {
    if (ctx) ctx->loras.entries.clear();
}
