// llama-adapter-peft.cpp - LoRA adapters as PEFT directories: adapter_config.json (r, lora_alpha,
// target_modules, ...) and adapter_model.safetensors with tensors named
// base_model.model.<HF module>.lora_A.weight (r, n_in) and .lora_B.weight (n_out, r).
// PEFT adapters are relative to the Hugging Face model, whose Q and K rows are in rotate-half
// order: lora_B of q_proj / k_proj is permuted to the GGUF order on reading, and back on writing.
#include "llama-adapter.h"
#include "llama-hf.h"
#include "llama-json.h"
#include "llama-model.h"
#include "llama-safetensors.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <sys/stat.h>

namespace {

// The base weight a PEFT module path names (nullptr if none), with the projection and layer.
const ggml_tensor * find_module(const llama_model & model, const std::string & module, const llama_hf_proj ** proj) {
    for (const auto & p : llama_hf_projections(model.arch)) {
        const int n = p.per_layer ? (int) model.hparams.n_layer : 1;
        for (int il = 0; il < n; il++) {
            if (llama_hf_name(p.hf, il) != module) continue;
            *proj = &p;
            return model.ctx_w ? ggml_get_tensor(model.ctx_w, llama_hf_name(p.gguf, il).c_str()) : nullptr;
        }
    }
    return nullptr;
}

// Heads whose rows a projection's lora_B permutes (0: none). Only llama GGUF files have their
// Q/K rows permuted at conversion; qwen2 (NEOX RoPE) keeps Hugging Face's order.
int64_t qk_heads(const llama_model & model, const llama_hf_proj & p) {
    if (model.arch != LLM_ARCH_LLAMA) return 0;
    if (p.target == "q") return model.hparams.n_head;
    if (p.target == "k") return model.hparams.n_head_kv;
    return 0;
}

double num(const json_value & cfg, const char * key, double def) {
    const json_value * v = cfg.get(key);
    return v && v->is_number() ? v->num : def;
}

}  // namespace

bool llama_adapter_lora_load_peft(llama_adapter_lora & ad, const llama_model & model, const std::string & dir,
                                  std::string & err) {
    json_value cfg;
    if (!json_parse_file(dir + "/adapter_config.json", cfg, err)) {
        err = "'" + dir + "' is not a PEFT adapter directory: " + err;
        return false;
    }
    if (!cfg.is_object()) {
        err = dir + "/adapter_config.json is not a JSON object";
        return false;
    }
    if (const json_value * pt = cfg.get("peft_type")) {
        if (!pt->is_string() || pt->str != "LORA") {
            err = dir + "/adapter_config.json: peft_type is not LORA";
            return false;
        }
    }
    if (const json_value * f = cfg.get("fan_in_fan_out")) {
        if (f->kind == json_value::BOOL && f->b) {
            err = dir + "/adapter_config.json: fan_in_fan_out adapters (GPT-2 style Conv1D) are not supported";
            return false;
        }
    }
    if (const json_value * ap = cfg.get("alpha_pattern")) {
        if (ap->is_object() && !ap->obj.empty()) {
            err = dir + "/adapter_config.json: per-module alpha_pattern is not supported";
            return false;
        }
    }
    const double r_cfg = num(cfg, "r", 0), alpha_cfg = num(cfg, "lora_alpha", 0);
    if (!(r_cfg >= 1) || !std::isfinite(alpha_cfg)) {
        err = dir + "/adapter_config.json: r or lora_alpha missing or invalid";
        return false;
    }
    const json_value * rp = cfg.get("rank_pattern");
    const bool rank_pattern = rp && rp->is_object() && !rp->obj.empty();
    const json_value * rs = cfg.get("use_rslora");
    const bool rslora = rs && rs->kind == json_value::BOOL && rs->b;
    if (rslora && rank_pattern) {
        err = dir + "/adapter_config.json: use_rslora with a per-module rank_pattern is not supported";
        return false;
    }
    // rsLoRA scales by alpha / sqrt(r): the same as alpha * sqrt(r) / r.
    ad.alpha = (float) (rslora ? alpha_cfg * std::sqrt(r_cfg) : alpha_cfg);
    ad.dropout = (float) num(cfg, "lora_dropout", 0.0);
    if (!(ad.dropout >= 0.0f && ad.dropout < 1.0f)) {
        err = dir + "/adapter_config.json: lora_dropout is not a probability below 1";
        return false;
    }
    if (const json_value * b = cfg.get("base_model_name_or_path")) {
        if (b->is_string()) ad.base_name = b->str;
    }
    ad.arch = model.arch_name;

    const std::string st_path = dir + "/adapter_model.safetensors";
    struct stat sb;
    if (stat(st_path.c_str(), &sb) != 0) {
        const bool bin = stat((dir + "/adapter_model.bin").c_str(), &sb) == 0;
        err = "'" + dir + "' has no adapter_model.safetensors" +
              (bin ? " (adapter_model.bin, a pickle, is not read: save with safe_serialization=True)" : "");
        return false;
    }
    std::map<std::string, st_tensor> ts;
    try {
        safetensors_load_file(st_path, ts);
    } catch (const std::exception & e) {
        err = e.what();
        return false;
    }

    // Pair the tensors by module.
    struct pair_t {
        const st_tensor * a = nullptr, * b = nullptr;
    };
    std::map<std::string, pair_t> pairs;
    for (const auto & kv : ts) {
        std::string n = kv.first;
        const std::string prefix = "base_model.model.";
        if (n.compare(0, prefix.size(), prefix) == 0) n = n.substr(prefix.size());
        size_t pos = n.find(".lora_A.");
        const bool is_a = pos != std::string::npos;
        if (!is_a) pos = n.find(".lora_B.");
        if (pos == std::string::npos) {
            err = st_path + ": tensor '" + kv.first + "' is not a LoRA A or B matrix (embedding LoRA, DoRA and trained " +
                  "biases are not supported)";
            return false;
        }
        pair_t & p = pairs[n.substr(0, pos)];
        (is_a ? p.a : p.b) = &kv.second;
    }
    if (pairs.empty()) {
        err = st_path + " holds no tensors";
        return false;
    }
    std::vector<std::pair<const ggml_tensor *, const llama_hf_proj *>> bases;
    size_t mem = 1024;
    for (const auto & kv : pairs) {
        const llama_hf_proj * proj = nullptr;
        const ggml_tensor * w = find_module(model, kv.first, &proj);
        if (!w) {
            err = st_path + ": module '" + kv.first + "' is not a projection of this model";
            return false;
        }
        const st_tensor * a = kv.second.a, * b = kv.second.b;
        if (!a || !b) {
            err = st_path + ": module '" + kv.first + "' lacks lora_" + (a ? "B" : "A");
            return false;
        }
        if (a->shape.size() != 2 || b->shape.size() != 2 || a->shape[1] != w->ne[0] || b->shape[0] != w->ne[1] ||
            a->shape[0] != b->shape[1]) {
            err = st_path + ": module '" + kv.first + "' (" + std::to_string(w->ne[1]) + " x " + std::to_string(w->ne[0]) +
                  ") does not fit its lora_A / lora_B shapes: an adapter for another model?";
            return false;
        }
        const std::string rank_err = llama_adapter_rank_error(w, a->shape[0]);
        if (!rank_err.empty()) {
            err = st_path + ": module '" + kv.first + "': " + rank_err;
            return false;
        }
        if (!rank_pattern && (double) a->shape[0] != r_cfg) {
            err = st_path + ": module '" + kv.first + "' has rank " + std::to_string(a->shape[0]) + ", the config's r is " +
                  std::to_string((int64_t) r_cfg);
            return false;
        }
        bases.push_back({w, proj});
        mem += 2 * ggml_tensor_overhead() + (size_t) (a->nbytes / ggml_type_size(a->type) + b->nbytes / ggml_type_size(b->type)) * 4 +
               4 * GGML_MEM_ALIGN;
    }
    ggml_free(ad.ctx);
    ad.ctx = ggml_init({mem, nullptr, false});
    ad.weights.clear();
    size_t i = 0;
    std::vector<float> va, vb;
    for (const auto & kv : pairs) {
        const ggml_tensor * w = bases[i].first;
        const llama_hf_proj * proj = bases[i++].second;
        const st_tensor * a = kv.second.a, * b = kv.second.b;
        if (!llama_adapter_lora_add(ad, w, (int32_t) a->shape[0], err)) return false;
        va = safetensors_to_f32(*a);
        vb = safetensors_to_f32(*b);
        for (const auto & [t, v] : {std::pair{a, &va}, std::pair{b, &vb}}) {
            err = llama_adapter_non_finite_error(v->data(), v->size(), t->name);
            if (!err.empty()) {
                err = st_path + ": " + err;
                return false;
            }
        }
        const int64_t heads = qk_heads(model, *proj);
        if (heads > 0) {
            std::vector<uint8_t> bytes((const uint8_t *) vb.data(), (const uint8_t *) (vb.data() + vb.size()));
            try {
                permute_qk_rows(bytes, b->shape[0], (size_t) b->shape[1] * sizeof(float), heads);
            } catch (const std::exception & e) {
                err = st_path + ": " + e.what();
                return false;
            }
            memcpy(vb.data(), bytes.data(), bytes.size());
        }
        const llama_adapter_lora_weight & lw = ad.weights[w];
        memcpy(lw.a->data, va.data(), ggml_nbytes(lw.a));
        memcpy(lw.b->data, vb.data(), ggml_nbytes(lw.b));
    }
    llama_adapter_lora_list_targets(ad, model);
    return true;
}

bool llama_adapter_lora_save_peft(const llama_adapter_lora & ad, const llama_model & model, const std::string & dir,
                                  std::string & err) {
    if (mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) {
        err = "cannot create '" + dir + "': " + strerror(errno);
        return false;
    }
    std::vector<st_out_tensor> out;
    std::vector<std::string> modules;
    int32_t r = 0;
    for (const auto & p : llama_hf_projections(model.arch)) {
        const int n = p.per_layer ? (int) model.hparams.n_layer : 1;
        std::vector<int> used;  // the layers adapted
        for (int il = 0; il < n; il++) {
            const ggml_tensor * w = ggml_get_tensor(model.ctx_w, llama_hf_name(p.gguf, il).c_str());
            const llama_adapter_lora_weight * lw = w ? ad.get(w) : nullptr;
            if (!lw) continue;
            used.push_back(il);
            if (r != 0 && r != (int32_t) lw->a->ne[1]) {
                // PEFT would need a rank_pattern; nothing writes such adapters here.
                err = "the adapter's ranks differ between weights: not written as PEFT";
                return false;
            }
            r = (int32_t) lw->a->ne[1];
            const std::string base = "base_model.model." + llama_hf_name(p.hf, il);
            st_out_tensor a{base + ".lora_A.weight", GGML_TYPE_F32, {lw->a->ne[1], lw->a->ne[0]}, {}};
            a.data.assign((const uint8_t *) lw->a->data, (const uint8_t *) lw->a->data + ggml_nbytes(lw->a));
            st_out_tensor b{base + ".lora_B.weight", GGML_TYPE_F32, {lw->b->ne[1], lw->b->ne[0]}, {}};
            b.data.assign((const uint8_t *) lw->b->data, (const uint8_t *) lw->b->data + ggml_nbytes(lw->b));
            const int64_t heads = qk_heads(model, p);
            if (heads > 0) unpermute_qk_rows(b.data, lw->b->ne[1], ggml_row_size(GGML_TYPE_F32, lw->b->ne[0]), heads);
            out.push_back(std::move(a));
            out.push_back(std::move(b));
        }
        if (used.empty()) continue;
        // A module name other projections share (BERT's "dense") would make PEFT adapt them too:
        // the adapted modules' full paths instead (PEFT matches a whole path as well).
        if (llama_hf_module_sharers(model.arch, p.module).empty()) {
            modules.push_back(p.module);
        } else {
            for (int il : used) modules.push_back(llama_hf_name(p.hf, il));
        }
    }
    if (out.empty()) {
        err = "the adapter has no tensors";
        return false;
    }
    std::string tm;
    for (const auto & m : modules) tm += (tm.empty() ? "\"" : ", \"") + m + "\"";
    char num[64];
    std::string cfg = "{\n";
    cfg += "  \"base_model_name_or_path\": " + json_string(ad.base_name) + ",\n";
    cfg += "  \"bias\": \"none\",\n  \"fan_in_fan_out\": false,\n  \"inference_mode\": true,\n";
    cfg += "  \"init_lora_weights\": true,\n  \"layers_pattern\": null,\n  \"layers_to_transform\": null,\n";
    // alpha 0 means no alpha (B A scaled by the scale alone, as alpha = r would); PEFT's 0 is none.
    snprintf(num, sizeof(num), "%.9g", ad.alpha != 0.0f ? (double) ad.alpha : (double) r);
    cfg += std::string("  \"lora_alpha\": ") + num + ",\n";
    snprintf(num, sizeof(num), "%.9g", (double) ad.dropout);
    cfg += std::string("  \"lora_dropout\": ") + num + ",\n";
    cfg += "  \"modules_to_save\": null,\n  \"peft_type\": \"LORA\",\n";
    cfg += "  \"r\": " + std::to_string(r) + ",\n  \"rank_pattern\": {},\n  \"alpha_pattern\": {},\n";
    cfg += "  \"revision\": null,\n  \"target_modules\": [" + tm + "],\n";
    cfg += "  \"task_type\": \"CAUSAL_LM\",\n  \"use_dora\": false,\n  \"use_rslora\": false\n}\n";
    try {
        safetensors_write(dir + "/adapter_model.safetensors", out, {{"format", "pt"}});
        write_file_atomic(dir + "/adapter_config.json", cfg);
    } catch (const std::exception & e) {
        err = e.what();
        return false;
    }
    return true;
}
