// hf.cpp - Hugging Face checkpoint directories -> GGUF model of the family the architecture table
// names for config.json's class (Llama, Qwen2, Qwen3, Gemma 2, Gemma 3 text, Phi-3, the mixtures
// of experts, BERT with its sentence-transformers pooling and WordPiece vocabulary): config.json
// for the hyperparameters, safetensors for the weights by the table's tensors and their HF names
// (llama-hf.cpp; llama's Q and K rows permuted from HF's rotate-half layout to the interleaved
// one of GGUF llama files, Gemma's norms stored as 1 + w), tokenizer.json / tokenizer_config.json
// / generation_config.json for the vocabulary, special tokens and chat template.
#include "convert.h"

#include <algorithm>
#include "llama-hf.h"
#include "llama-model.h"
#include "llama-json.h"
#include "llama-safetensors.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <sys/stat.h>

namespace {

bool file_exists(const std::string & p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0;
}

json_value load_json(const std::string & path, bool required) {
    json_value j;
    if (!required && !file_exists(path)) return j;
    std::string err;
    if (!json_parse_file(path, j, err)) throw convert_error(err);
    return j;
}

int64_t get_int(const json_value & cfg, const char * key, int64_t def, bool required = false) {
    const json_value * v = cfg.get(key);
    if (!v || v->is_null()) {
        if (required) throw convert_error(std::string("config.json has no '") + key + "'");
        return def;
    }
    // A range NaN fails, checked before converting: a float-to-integer conversion out of range is undefined.
    if (!v->is_number() || !(v->num >= 0 && v->num < 9.0e18) || v->num != std::floor(v->num)) {
        throw convert_error(std::string("config.json: '") + key + "' is not a non-negative integer");
    }
    return (int64_t) v->num;
}

double get_num(const json_value & cfg, const char * key, double def) {
    const json_value * v = cfg.get(key);
    if (!v || v->is_null()) return def;
    if (!v->is_number()) throw convert_error(std::string("config.json: '") + key + "' is not a number");
    return v->num;
}

// A special token in tokenizer_config.json: a string or {"content": ...}.
std::string token_text(const json_value * v) {
    if (!v) return "";
    if (v->is_string()) return v->str;
    if (const json_value * c = v->get("content")) return c->is_string() ? c->str : "";
    return "";
}

void write_tokenizer(gguf_context * g, const std::string & dir, int64_t n_vocab_cfg, const json_value & cfg) {
    const json_value tj = load_json(dir + "/tokenizer.json", true);
    const json_value tc = load_json(dir + "/tokenizer_config.json", false);
    const json_value gc = load_json(dir + "/generation_config.json", false);
    const json_value * model = tj.get("model");
    if (!model || !model->is_object()) throw convert_error("tokenizer.json has no model");
    const json_value * mtype = model->get("type");
    const bool wordpiece = mtype && mtype->is_string() && mtype->str == "WordPiece";
    if (!mtype || !mtype->is_string() || (mtype->str != "BPE" && !wordpiece)) {
        throw convert_error("tokenizer.json: model type '" + (mtype && mtype->is_string() ? mtype->str : std::string("?")) +
                            "' is not supported (BPE, WordPiece)");
    }
    const json_value * vocab = model->get("vocab");
    if (!vocab || !vocab->is_object()) throw convert_error("tokenizer.json has no model.vocab");

    std::map<int64_t, std::string> by_id;
    std::map<std::string, int64_t> id_of;
    for (const auto & kv : vocab->obj) {
        if (!kv.second.is_number() || !(kv.second.num >= 0 && kv.second.num < (1 << 24))) throw convert_error("tokenizer.json: bad id for '" + kv.first + "'");
        by_id[(int64_t) kv.second.num] = kv.first;
        id_of[kv.first] = (int64_t) kv.second.num;
    }
    std::map<int64_t, bool> added;  // id -> special
    if (const json_value * at = tj.get("added_tokens")) {
        for (const auto & t : at->arr) {
            const json_value * id = t.get("id");
            const json_value * content = t.get("content");
            if (!id || !id->is_number() || !(id->num >= 0 && id->num < (1 << 24)) || !content || !content->is_string()) {
                throw convert_error("tokenizer.json: malformed added token");
            }
            const json_value * sp = t.get("special");
            by_id[(int64_t) id->num] = content->str;
            id_of[content->str] = (int64_t) id->num;
            added[(int64_t) id->num] = sp && sp->kind == json_value::BOOL && sp->b;
        }
    }
    int64_t n_vocab = n_vocab_cfg;
    if (!by_id.empty()) n_vocab = std::max(n_vocab, by_id.rbegin()->first + 1);

    // SentencePiece-style BPE (byte fallback, "▁" for spaces) maps to the `llama` tokenizer.
    const std::string text = [&] {
        std::string s;
        for (const char * k : {"normalizer", "pre_tokenizer", "decoder"}) {
            const json_value * v = tj.get(k);
            if (!v) continue;
            // A cheap look for the markers: the type names appear as strings in these objects.
            std::vector<const json_value *> stack = {v};
            while (!stack.empty()) {
                const json_value * x = stack.back();
                stack.pop_back();
                if (x->is_string()) s += x->str + "\n";
                for (const auto & e : x->arr) stack.push_back(&e);
                for (const auto & e : x->obj) stack.push_back(&e.second);
            }
        }
        return s;
    }();
    const json_value * bf = model->get("byte_fallback");
    const bool spm = !wordpiece && ((bf && bf->kind == json_value::BOOL && bf->b) || text.find("Metaspace") != std::string::npos ||
                                    text.find("\xE2\x96\x81") != std::string::npos);

    // Merges: "a b" strings or ["a", "b"] pairs.
    std::vector<std::string> merges;
    if (const json_value * m = model->get("merges")) {
        for (const auto & e : m->arr) {
            if (e.is_string()) merges.push_back(e.str);
            else if (e.is_array() && e.arr.size() == 2 && e.arr[0].is_string() && e.arr[1].is_string()) merges.push_back(e.arr[0].str + " " + e.arr[1].str);
            else throw convert_error("tokenizer.json: malformed merge");
        }
    }

    std::vector<std::string> tokens((size_t) n_vocab);
    std::vector<float> scores((size_t) n_vocab, 0.0f);
    std::vector<int32_t> types((size_t) n_vocab, 1);
    for (int64_t i = 0; i < n_vocab; i++) {
        auto it = by_id.find(i);
        if (it == by_id.end()) {
            tokens[i] = "[PAD" + std::to_string(i) + "]";
            types[i] = 5;  // unused
            continue;
        }
        tokens[i] = it->second;
        if (tokens[i].find('\0') != std::string::npos) throw convert_error("tokenizer.json: token " + std::to_string(i) + " contains a NUL byte");
        auto ad = added.find(i);
        const std::string & t = tokens[i];
        if (ad != added.end()) types[i] = ad->second ? 3 : 4;
        else if (spm && t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') types[i] = 6;
    }
    if (spm) {
        // Every token scores -1000, as llama.cpp's converter writes for a BPE vocabulary turned
        // into a `llama` one: files, and so tokenizations, then agree with GGUF files in the
        // wild. (Scoring by merge rank would follow Hugging Face's merge order more closely; the
        // two differ on a few texts, see test-convert.)
        std::fill(scores.begin(), scores.end(), -1000.0f);
    }

    if (wordpiece) {
        // As llama.cpp's converter writes BERT's vocabulary: word-initial pieces get U+2581, the
        // continuations lose their prefix ("##"), [BRACKETED] specials stay as they are.
        const json_value * pfx = model->get("continuing_subword_prefix");
        const std::string cont = pfx && pfx->is_string() ? pfx->str : "##";
        for (int64_t i = 0; i < n_vocab; i++) {
            std::string & t = tokens[(size_t) i];
            if (types[(size_t) i] == 5 || (t.size() >= 2 && t.front() == '[' && t.back() == ']')) continue;
            if (!cont.empty() && t.compare(0, cont.size(), cont) == 0 && t.size() > cont.size()) t = t.substr(cont.size());
            else t = "\xE2\x96\x81" + t;
        }
        if (const json_value * lc = tj.get("normalizer") ? tj.get("normalizer")->get("lowercase") : nullptr;
            lc && lc->kind == json_value::BOOL && !lc->b) {
            // The runtime lowercases as llama.cpp does; a cased vocabulary would lose its capitals.
            throw convert_error("tokenizer.json: a cased WordPiece vocabulary (normalizer.lowercase false) is not supported");
        }
    }
    std::vector<const char *> ptrs;
    for (const auto & t : tokens) ptrs.push_back(t.c_str());
    gguf_set_val_str(g, "tokenizer.ggml.model", wordpiece ? "bert" : spm ? "llama" : "gpt2");
    if (wordpiece) {
        gguf_set_val_str(g, "tokenizer.ggml.pre", "default");
    } else if (spm) {
        gguf_set_val_str(g, "tokenizer.ggml.pre", "default");
    } else {
        // Pre-tokenizer name: the Llama 3 split regex, GPT-2's byte-level one, or the default.
        const bool llama3 = text.find("(?i:'s|'t|'re|'ve|'m|'ll|'d)") != std::string::npos;
        const char * pre = llama3 ? "llama-bpe" : "gpt-2";
        fprintf(stderr, "llama-convert: BPE pre-tokenizer: %s\n", pre);
        gguf_set_val_str(g, "tokenizer.ggml.pre", pre);
    }
    gguf_set_arr_str(g, "tokenizer.ggml.tokens", ptrs.data(), ptrs.size());
    if (spm) gguf_set_arr_data(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores.data(), scores.size());
    gguf_set_arr_data(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types.data(), types.size());
    if (!spm && !wordpiece) {
        std::vector<const char *> mp;
        for (const auto & m : merges) mp.push_back(m.c_str());
        gguf_set_arr_str(g, "tokenizer.ggml.merges", mp.data(), mp.size());
    }

    // Special tokens: tokenizer_config.json names them; generation_config / config give ids.
    auto set_id = [&](const char * gguf_key, const char * cfg_key, const char * id_key) {
        const std::string t = token_text(tc.get(cfg_key));
        if (!t.empty()) {
            auto it = id_of.find(t);
            if (it == id_of.end()) throw convert_error(std::string("tokenizer_config.json: ") + cfg_key + " '" + t + "' is not in the vocabulary");
            gguf_set_val_u32(g, gguf_key, (uint32_t) it->second);
            return;
        }
        for (const json_value * src : {&gc, &cfg}) {
            const json_value * v = src->get(id_key);
            if (v && v->is_array() && !v->arr.empty()) v = &v->arr[0];
            if (v && v->is_number() && v->num >= 0 && v->num < n_vocab) {
                gguf_set_val_u32(g, gguf_key, (uint32_t) v->num);
                return;
            }
        }
    };
    set_id("tokenizer.ggml.bos_token_id", "bos_token", "bos_token_id");
    set_id("tokenizer.ggml.eos_token_id", "eos_token", "eos_token_id");
    set_id("tokenizer.ggml.unknown_token_id", "unk_token", "unk_token_id");
    set_id("tokenizer.ggml.padding_token_id", "pad_token", "pad_token_id");
    if (wordpiece) {
        // BERT's [CLS] opens a text (the runtime's BOS), its [SEP] closes it.
        set_id("tokenizer.ggml.bos_token_id", "cls_token", "cls_token_id");
        set_id("tokenizer.ggml.seperator_token_id", "sep_token", "sep_token_id");
        set_id("tokenizer.ggml.mask_token_id", "mask_token", "mask_token_id");
    }
    for (const char * k : {"add_bos_token", "add_eos_token"}) {
        const json_value * v = tc.get(k);
        if (v && v->kind == json_value::BOOL) gguf_set_val_bool(g, (std::string("tokenizer.ggml.") + k).c_str(), v->b);
    }
    if (const json_value * ct = tc.get("chat_template")) {
        if (ct->is_string()) {
            gguf_set_val_str(g, "tokenizer.chat_template", ct->str.c_str());
        } else if (ct->is_array()) {
            for (const auto & e : ct->arr) {
                const json_value * name = e.get("name");
                const json_value * tmpl = e.get("template");
                if (name && tmpl && name->is_string() && tmpl->is_string()) {
                    const std::string key = name->str == "default" ? "tokenizer.chat_template" : "tokenizer.chat_template." + name->str;
                    gguf_set_val_str(g, key.c_str(), tmpl->str.c_str());
                }
            }
        }
    }
}


// The family of config.json's "architectures" entry (the table's Hugging Face classes).
llm_arch hf_family(const json_value & cfg, std::string & name) {
    name = "?";
    if (const json_value * a = cfg.get("architectures")) {
        for (const auto & e : a->arr) {
            if (!e.is_string()) continue;
            name = e.str;
            const llm_arch a = llama_hf_arch_of_class(e.str);
            if (a != LLM_ARCH_UNKNOWN) return a;
        }
    } else if (const json_value * mt = cfg.get("model_type"); mt && mt->is_string()) {
        name = mt->str;
        return llm_arch_from_name(mt->str == "gemma3_text" ? "gemma3" : mt->str);
    }
    return LLM_ARCH_UNKNOWN;
}

std::string hf_classes() {
    std::string s;
    for (int i = 0; i < LLM_ARCH_UNKNOWN; i++) s += std::string(s.empty() ? "" : ", ") + llm_arch_get((llm_arch) i).hf_class;
    return s;
}

// Values of a float array in config.json (LongRoPE's factors).
std::vector<float> get_floats(const json_value & obj, const char * key, size_t n) {
    const json_value * v = obj.get(key);
    if (!v || v->kind != json_value::ARRAY || v->arr.size() != n) {
        throw convert_error(std::string("config.json: rope_scaling.") + key + " must be an array of " + std::to_string(n) + " numbers");
    }
    std::vector<float> out;
    for (const auto & e : v->arr) {
        if (!e.is_number() || !(e.num > 0)) throw convert_error(std::string("config.json: rope_scaling.") + key + " has a value that is not a positive number");
        out.push_back((float) e.num);
    }
    return out;
}

}  // namespace

model_plan load_hf(const std::string & dir) {
    const json_value cfg = load_json(dir + "/config.json", true);
    if (!cfg.is_object()) throw convert_error("config.json is not an object");
    std::string arch_name;
    const llm_arch arch = hf_family(cfg, arch_name);
    if (arch == LLM_ARCH_UNKNOWN) {
        throw convert_error("unknown architecture '" + arch_name + "' in config.json (supported: " + hf_classes() + ")");
    }
    const llm_arch_info & info = llm_arch_get(arch);
    const std::string p = std::string(info.name) + ".";

    // nomic-bert's config.json is GPT-2's (NomicBertConfig): its names for the same sizes.
    const bool nomic = arch == LLM_ARCH_NOMIC_BERT;
    auto key = [nomic](const char * k) -> const char * {
        static const std::pair<const char *, const char *> gpt2[] = {
            {"hidden_size", "n_embd"}, {"intermediate_size", "n_inner"}, {"num_hidden_layers", "n_layer"},
            {"num_attention_heads", "n_head"}, {"layer_norm_eps", "layer_norm_epsilon"}, {"rope_theta", "rotary_emb_base"}};
        for (const auto & a : gpt2) {
            if (nomic && strcmp(a.first, k) == 0) return a.second;
        }
        return k;
    };
    const int64_t n_embd = get_int(cfg, key("hidden_size"), 0, true);
    const int64_t n_ff = get_int(cfg, key("intermediate_size"), 0, true);
    const int64_t n_layer = get_int(cfg, key("num_hidden_layers"), 0, true);
    const int64_t n_head = get_int(cfg, key("num_attention_heads"), 0, true);
    const int64_t n_head_kv = get_int(cfg, "num_key_value_heads", n_head);
    const int64_t n_vocab = get_int(cfg, "vocab_size", 0, true);
    // (nomic-embed-text claims 8192 positions through a RoPE scaling it does not describe; llama.cpp
    // writes 2048.)
    const int64_t n_ctx = nomic ? 2048 : get_int(cfg, "max_position_embeddings", info.encoder ? 512 : 2048);
    if (n_embd == 0 || n_ff == 0 || n_layer == 0 || n_head == 0 || n_head_kv == 0 || n_vocab == 0 || n_head % n_head_kv != 0) {
        throw convert_error("config.json: inconsistent sizes (hidden_size, intermediate_size, layers, heads, vocab_size)");
    }
    const int64_t head_dim = get_int(cfg, "head_dim", n_embd % n_head == 0 ? n_embd / n_head : 0);
    if (head_dim == 0 || head_dim % 2 != 0) throw convert_error("config.json: head size is not an even integer");
    const bool tied = [&] {
        const json_value * t = cfg.get("tie_word_embeddings");
        // Gemma ties by default.
        if (!t || t->kind != json_value::BOOL) return arch == LLM_ARCH_GEMMA2 || arch == LLM_ARCH_GEMMA3;
        return t->b;
    }();
    const bool biases = arch == LLM_ARCH_QWEN2;
    if (!biases) {
        if (const json_value * b = cfg.get("attention_bias"); b && b->kind == json_value::BOOL && b->b) {
            throw convert_error("config.json: attention_bias is not supported for " + arch_name);
        }
    }

    // Mixtures of experts: Mixtral (llama with num_local_experts, experts of intermediate_size),
    // Qwen2-MoE (plus a shared expert) and Qwen3-MoE (experts of moe_intermediate_size).
    const bool qwen_moe = arch == LLM_ARCH_QWEN2MOE || arch == LLM_ARCH_QWEN3MOE;
    const int64_t n_expert = get_int(cfg, qwen_moe ? "num_experts" : "num_local_experts", 0, qwen_moe);
    int64_t n_expert_used = 0, n_ff_exp = n_ff, n_ff_shexp = 0;
    if (n_expert > 0) {
        n_expert_used = get_int(cfg, "num_experts_per_tok", 0, true);
        if (n_expert_used < 1 || n_expert_used > n_expert) {
            throw convert_error("config.json: num_experts_per_tok " + std::to_string(n_expert_used) + " is not between 1 and the " +
                                std::to_string(n_expert) + " experts");
        }
        if (qwen_moe) n_ff_exp = get_int(cfg, "moe_intermediate_size", 0, true);
        if (arch == LLM_ARCH_QWEN2MOE) n_ff_shexp = get_int(cfg, "shared_expert_intermediate_size", 0, true);
        if (n_ff_exp <= 0 || (arch == LLM_ARCH_QWEN2MOE && n_ff_shexp <= 0)) throw convert_error("config.json: an expert's FFN size is not positive");
        // The runtime renormalises the chosen experts' weights in Mixtral and Qwen3-MoE, not in
        // Qwen2-MoE (as llama.cpp): a checkpoint that says otherwise would be converted wrongly.
        const json_value * ntp = cfg.get("norm_topk_prob");
        const bool renorm = arch != LLM_ARCH_QWEN2MOE;
        if (qwen_moe && ntp && ntp->kind == json_value::BOOL && ntp->b != renorm) {
            throw convert_error(std::string("config.json: norm_topk_prob ") + (ntp->b ? "true" : "false") + " is not supported for " + arch_name);
        }
        if (qwen_moe && (get_int(cfg, "decoder_sparse_step", 1) != 1 ||
                         (cfg.get("mlp_only_layers") && cfg.get("mlp_only_layers")->is_array() && !cfg.get("mlp_only_layers")->arr.empty()))) {
            throw convert_error("config.json: dense layers among the experts' (decoder_sparse_step, mlp_only_layers) are not supported");
        }
    }

    // BERT: learned absolute positions, exact GELU, post-LayerNorms (what the runtime computes).
    int64_t n_token_types = 0;
    if (nomic) {
        // What the runtime computes: SwiGLU, post-LayerNorms, RoPE on whole heads in halves, no
        // biases. A checkpoint that says otherwise would be converted wrongly.
        auto expect = [&](const char * k, const char * want, bool ok) {
            if (!ok) throw convert_error(std::string("config.json: ") + k + " other than " + want + " is not supported for " + arch_name);
        };
        auto is = [&](const char * k, bool b) { const json_value * v = cfg.get(k); return !v || (v->kind == json_value::BOOL && v->b == b); };
        const json_value * act = cfg.get("activation_function");
        expect("activation_function", "swiglu", !act || (act->is_string() && act->str == "swiglu"));
        for (const char * k : {"causal", "qkv_proj_bias", "mlp_fc1_bias", "mlp_fc2_bias", "prenorm", "rotary_emb_interleaved"}) {
            expect(k, "false", is(k, false));
        }
        expect("rotary_emb_fraction", "1.0", get_num(cfg, "rotary_emb_fraction", 1.0) == 1.0);
        const json_value * sb = cfg.get("rotary_emb_scale_base");
        expect("rotary_emb_scale_base", "null", !sb || sb->is_null());
    } else if (info.encoder) {
        const json_value * act = cfg.get("hidden_act");
        if (act && (!act->is_string() || act->str != "gelu")) {
            throw convert_error("config.json: hidden_act '" + (act->is_string() ? act->str : std::string("?")) +
                                "' is not supported for " + arch_name + " (gelu)");
        }
        const json_value * pe = cfg.get("position_embedding_type");
        if (pe && (!pe->is_string() || pe->str != "absolute")) {
            throw convert_error("config.json: position_embedding_type '" + (pe->is_string() ? pe->str : std::string("?")) +
                                "' is not supported (absolute)");
        }
    }
    if (info.encoder) {
        if (n_head_kv != n_head) throw convert_error("config.json: num_key_value_heads is not supported for " + arch_name);
        n_token_types = get_int(cfg, "type_vocab_size", 2);
        if (n_token_types == 0) throw convert_error("config.json: type_vocab_size must be positive");
    }

    model_plan plan;
    gguf_context * g = gguf_init_empty();
    plan.meta = g;
    gguf_set_val_str(g, "general.architecture", info.name);
    {
        std::string name = dir;
        while (name.size() > 1 && name.back() == '/') name.pop_back();
        name = name.substr(name.rfind('/') == std::string::npos ? 0 : name.rfind('/') + 1);
        gguf_set_val_str(g, "general.name", name.c_str());
    }
    auto u32 = [&](const char * key, int64_t v) { gguf_set_val_u32(g, (p + key).c_str(), (uint32_t) v); };
    auto f32 = [&](const char * key, double v) { gguf_set_val_f32(g, (p + key).c_str(), (float) v); };
    u32("block_count", n_layer);
    u32("context_length", n_ctx);
    u32("embedding_length", n_embd);
    u32("feed_forward_length", n_ff);
    u32("attention.head_count", n_head);
    u32("attention.head_count_kv", n_head_kv);
    if (info.encoder) {
        f32("attention.layer_norm_epsilon", get_num(cfg, key("layer_norm_eps"), 1e-12));
        if (nomic) f32("rope.freq_base", get_num(cfg, key("rope_theta"), 1000.0));
        gguf_set_val_bool(g, (p + "attention.causal").c_str(), false);
        gguf_set_val_u32(g, "tokenizer.ggml.token_type_count", (uint32_t) n_token_types);
        // The pooling of a sentence-transformers model: modules.json names its Pooling module.
        const json_value modules = load_json(dir + "/modules.json", false);
        for (const json_value & m : modules.arr) {
            const json_value * type = m.get("type"), * path = m.get("path");
            if (!type || !type->is_string() || type->str != "sentence_transformers.models.Pooling" || !path || !path->is_string()) continue;
            const json_value pc = load_json(dir + "/" + path->str + "/config.json", true);
            auto on = [&](const char * k) { const json_value * v = pc.get(k); return v && v->kind == json_value::BOOL && v->b; };
            if (on("pooling_mode_mean_tokens")) u32("pooling_type", LLAMA_POOLING_TYPE_MEAN);
            else if (on("pooling_mode_cls_token")) u32("pooling_type", LLAMA_POOLING_TYPE_CLS);
            else if (on("pooling_mode_lasttoken")) u32("pooling_type", LLAMA_POOLING_TYPE_LAST);
            else throw convert_error(path->str + "/config.json: only mean, CLS and last-token pooling are supported");
        }
    } else {
        f32("rope.freq_base", get_num(cfg, "rope_theta", arch == LLM_ARCH_GEMMA3 ? 1e6 : 10000.0));
        f32("attention.layer_norm_rms_epsilon", get_num(cfg, "rms_norm_eps", 1e-6));
    }
    u32("vocab_size", n_vocab);
    if (n_expert > 0) {
        u32("expert_count", n_expert);
        u32("expert_used_count", n_expert_used);
        if (qwen_moe) u32("expert_feed_forward_length", n_ff_exp);
        if (n_ff_shexp > 0) u32("expert_shared_feed_forward_length", n_ff_shexp);
    }
    // Phi-3 may rotate part of each head.
    const int64_t n_rot = (int64_t) std::lround((double) head_dim * get_num(cfg, "partial_rotary_factor", 1.0));
    if (!info.encoder) u32("rope.dimension_count", n_rot);
    if (head_dim * n_head != n_embd || cfg.get("head_dim")) {
        u32("attention.key_length", head_dim);
        u32("attention.value_length", head_dim);
    }
    if (arch == LLM_ARCH_GEMMA2 || arch == LLM_ARCH_GEMMA3 || arch == LLM_ARCH_PHI3) {
        const int64_t window = get_int(cfg, "sliding_window", 0);
        if (window > 0) u32("attention.sliding_window", window);
        else if (arch == LLM_ARCH_PHI3 && cfg.get("sliding_window") && !cfg.get("sliding_window")->is_null()) u32("attention.sliding_window", 0);
    }
    if (arch == LLM_ARCH_GEMMA2) {
        f32("attn_logit_softcapping", get_num(cfg, "attn_logit_softcapping", 50.0));
        f32("final_logit_softcapping", get_num(cfg, "final_logit_softcapping", 30.0));
    }
    if (arch == LLM_ARCH_GEMMA2 || arch == LLM_ARCH_GEMMA3) {
        // The runtime takes the query scale from the head size (n_embd / n_head in the 27B models,
        // as llama.cpp): a checkpoint that says otherwise would be converted wrongly.
        const double qs = get_num(cfg, "query_pre_attn_scalar", (double) head_dim);
        const double want = (arch == LLM_ARCH_GEMMA2 && n_layer == 46) || (arch == LLM_ARCH_GEMMA3 && n_layer == 62)
                                ? (double) (n_embd / n_head) : (double) head_dim;
        if (qs != want) throw convert_error("config.json: query_pre_attn_scalar " + std::to_string(qs) + " is not supported (the runtime uses " + std::to_string(want) + ")");
    }
    std::vector<float> rope_long, rope_short;
    if (const json_value * rs = cfg.get("rope_scaling"); rs && rs->is_object()) {
        const json_value * t = rs->get("rope_type");
        if (!t) t = rs->get("type");
        const std::string type = t && t->is_string() ? t->str : "";
        const double factor = get_num(*rs, "factor", 1.0);
        if (type == "linear" || type == "yarn") {
            gguf_set_val_str(g, (p + "rope.scaling.type").c_str(), type.c_str());
            f32("rope.scaling.factor", factor);
            if (type == "yarn") u32("rope.scaling.original_context_length", get_int(*rs, "original_max_position_embeddings", n_ctx));
        } else if ((type == "longrope" || type == "su") && arch == LLM_ARCH_PHI3) {
            // LongRoPE: factor tensors, the original context and the magnitude factor.
            const int64_t orig = get_int(cfg, "original_max_position_embeddings", 0, true);
            if (orig == 0) throw convert_error("config.json: original_max_position_embeddings must be positive");
            rope_long = get_floats(*rs, "long_factor", (size_t) n_rot / 2);
            rope_short = get_floats(*rs, "short_factor", (size_t) n_rot / 2);
            const double scale = (double) n_ctx / (double) orig;
            u32("rope.scaling.original_context_length", orig);
            f32("rope.scaling.attn_factor", scale > 1.0 ? std::sqrt(1.0 + std::log(scale) / std::log((double) orig)) : 1.0);
        } else if (!type.empty() && type != "default") {
            throw convert_error("config.json: rope_scaling type '" + type + "' is not supported for " + arch_name + " (linear, yarn" +
                                (arch == LLM_ARCH_PHI3 ? ", longrope)" : ")"));
        }
    }

    write_tokenizer(g, dir, n_vocab, cfg);

    auto st = std::make_shared<std::map<std::string, st_tensor>>(safetensors_load_dir(dir));
    std::map<std::string, bool> used;
    // BertForMaskedLM and the like save the encoder under "bert.": the names without it.
    if (info.encoder && !st->count("embeddings.word_embeddings.weight") && st->count("bert.embeddings.word_embeddings.weight")) {
        std::map<std::string, st_tensor> renamed;
        for (auto & kv : *st) renamed[kv.first.compare(0, 5, "bert.") == 0 ? kv.first.substr(5) : kv.first] = kv.second;
        st->swap(renamed);
    }
    // Adds GGUF tensor `name` from HF tensor `hf` whose stored shape must be {rows, cols}
    // (or {cols} for vectors); permute_heads > 0 applies the Q/K row permutation; plus_one stores
    // 1 + w in F32 (Gemma's norms).
    auto add = [&](const std::string & name, const std::string & hf, std::vector<int64_t> shape, int64_t permute_heads, bool plus_one) {
        auto it = st->find(hf);
        if (it == st->end()) throw convert_error("tensor '" + hf + "' is missing from the safetensors files");
        used[hf] = true;
        if (it->second.shape != shape) {
            std::string want, got;
            for (int64_t x : shape) want += (want.empty() ? "" : ", ") + std::to_string(x);
            for (int64_t x : it->second.shape) got += (got.empty() ? "" : ", ") + std::to_string(x);
            throw convert_error("tensor '" + hf + "' has shape [" + got + "], config.json implies [" + want + "]");
        }
        const st_tensor * t = &it->second;
        std::vector<int64_t> ne(shape.rbegin(), shape.rend());
        if (plus_one) {
            plan.tensors.push_back({name, ne, GGML_TYPE_F32, [st, t](std::vector<uint8_t> & out) {
                                        std::vector<float> v = safetensors_to_f32(*t);
                                        for (float & x : v) x += 1.0f;
                                        out.assign((const uint8_t *) v.data(), (const uint8_t *) (v.data() + v.size()));
                                    }});
            return;
        }
        plan.tensors.push_back({name, ne, t->type, [st, t, shape, permute_heads](std::vector<uint8_t> & out) {
                                    out.assign(t->data, t->data + t->nbytes);
                                    release_pages(t->data, t->nbytes);
                                    if (permute_heads > 0) permute_qk_rows(out, shape[0], t->nbytes / (size_t) shape[0], permute_heads);
                                }});
    };
    // Shapes come from the architecture table (GGUF order, reversed for safetensors).
    llama_hparams hp;
    hp.n_embd = (uint32_t) n_embd;
    hp.n_ff = (uint32_t) n_ff;
    hp.n_head = (uint32_t) n_head;
    hp.n_head_kv = (uint32_t) n_head_kv;
    hp.n_vocab = (uint32_t) n_vocab;
    hp.n_embd_head_k = hp.n_embd_head_v = (uint32_t) head_dim;
    hp.n_rot = (uint32_t) n_rot;
    hp.n_expert = (uint32_t) n_expert;
    hp.n_expert_used = (uint32_t) n_expert_used;
    hp.n_ff_exp = (uint32_t) n_ff_exp;
    hp.n_ff_shexp = (uint32_t) n_ff_shexp;
    hp.n_ctx_train = (uint32_t) n_ctx;
    hp.n_token_types = (uint32_t) n_token_types;
    const bool permute = info.rope_type == GGML_ROPE_TYPE_NORMAL;  // llama: GGUF's interleaved Q/K rows
    // The experts of a layer: one HF matrix per expert, stacked into one GGUF tensor.
    auto add_experts = [&](llm_tensor id, int il, const char * hf_fmt) {
        const llm_tensor_info & ti = llm_tensor_get(id);
        const int64_t cols = llm_dim_size(ti.ne[0], hp), rows = llm_dim_size(ti.ne[1], hp);
        std::vector<const st_tensor *> parts;
        for (int64_t e = 0; e < n_expert; e++) {
            const std::string hf = llama_hf_name(llama_hf_name(hf_fmt, il), (int) e);
            auto it = st->find(hf);
            if (it == st->end()) throw convert_error("tensor '" + hf + "' is missing from the safetensors files");
            if (it->second.shape != std::vector<int64_t>{rows, cols}) {
                throw convert_error("tensor '" + hf + "' does not have the shape [" + std::to_string(rows) + ", " + std::to_string(cols) +
                                    "] config.json implies");
            }
            if (!parts.empty() && it->second.type != parts[0]->type) throw convert_error("tensor '" + hf + "' has another type than expert 0's");
            used[hf] = true;
            parts.push_back(&it->second);
        }
        plan.tensors.push_back({llm_tensor_name(id, il), {cols, rows, n_expert}, parts[0]->type, [st, parts](std::vector<uint8_t> & out) {
                                    out.clear();
                                    for (const st_tensor * t : parts) {
                                        out.insert(out.end(), t->data, t->data + t->nbytes);
                                        release_pages(t->data, t->nbytes);
                                    }
                                }});
    };
    auto add_kind = [&](llm_tensor id, int il) {
        const llm_tensor_info & ti = llm_tensor_get(id);
        if (const char * expert_fmt = llama_hf_expert_name(arch, id)) return add_experts(id, il, expert_fmt);
        const char * hf_fmt = llama_hf_tensor_name(arch, id);
        if (!hf_fmt) return;
        std::vector<int64_t> shape = {llm_dim_size(ti.ne[1], hp), llm_dim_size(ti.ne[0], hp)};
        if (ti.ne[1] == llm_dim::one) shape = {llm_dim_size(ti.ne[0], hp)};
        if (id == LLM_TENSOR_FFN_GATE_INP_SHEXP) shape = {1, n_embd};  // a Linear(n_embd, 1)
        const int64_t heads = !permute ? 0 : id == LLM_TENSOR_ATTN_Q ? n_head : id == LLM_TENSOR_ATTN_K ? n_head_kv : 0;
        add(llm_tensor_name(id, il), llama_hf_name(hf_fmt, il), shape, heads, llama_hf_norm_plus_one(arch, id));
    };
    for (const llm_arch_tensor & at : info.tensors) {
        const llm_tensor_info & ti = llm_tensor_get(at.id);
        if (ti.layer_field) continue;
        if (at.id == LLM_TENSOR_TOKEN_EMBD && info.encoder) {
            add_kind(at.id, -1);
        } else if (at.id == LLM_TENSOR_TOKEN_EMBD) {
            // Tied weights may be saved once, under either name.
            const bool has_embed = st->count("model.embed_tokens.weight") > 0;
            add("token_embd.weight", has_embed || !tied ? "model.embed_tokens.weight" : "lm_head.weight", {n_vocab, n_embd}, 0, false);
        } else if (at.id == LLM_TENSOR_OUTPUT) {
            if (!tied) add_kind(at.id, -1);
            else used["lm_head.weight"] = true;
        } else if (at.required(hp) || at.id == LLM_TENSOR_ROPE_FREQS) {
            if (at.required(hp)) add_kind(at.id, -1);
        }
    }
    for (int64_t l = 0; l < n_layer; l++) {
        for (const llm_arch_tensor & at : info.tensors) {
            if (!llm_tensor_get(at.id).layer_field) continue;
            if (at.required(hp) || (biases && strstr(llm_tensor_get(at.id).name, ".bias"))) add_kind(at.id, (int) l);
        }
    }
    // LongRoPE factors: from config.json, as F32 vectors.
    for (auto * f : {&rope_long, &rope_short}) {
        if (f->empty()) continue;
        const std::vector<float> v = *f;
        plan.tensors.push_back({f == &rope_long ? "rope_factors_long.weight" : "rope_factors_short.weight", {(int64_t) v.size()},
                                GGML_TYPE_F32, [v](std::vector<uint8_t> & out) {
                                    out.assign((const uint8_t *) v.data(), (const uint8_t *) (v.data() + v.size()));
                                }});
    }
    for (const auto & kv : *st) {
        // (BERT's position ids, pooler and pre-training heads are not part of the encoder.)
        const bool bert_extra = info.encoder && (kv.first == "embeddings.position_ids" || kv.first.compare(0, 7, "pooler.") == 0 ||
                                                 kv.first.compare(0, 4, "cls.") == 0);
        if (!used.count(kv.first) && !bert_extra && kv.first.find("rotary_emb.inv_freq") == std::string::npos) {
            fprintf(stderr, "llama-convert: warning: ignoring tensor '%s'\n", kv.first.c_str());
        }
    }
    return plan;
}
