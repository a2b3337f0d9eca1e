// common.cpp - the programs' shared helpers (see common.h).
#include "common.h"

#include <strings.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <random>
#include <thread>

void string_process_escapes(std::string & s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); i++) {
        if (s[i] != '\\' || i + 1 >= s.size()) {
            out += s[i];
            continue;
        }
        const char c = s[++i];
        switch (c) {
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case '\'': out += '\''; break;
            case '"': out += '"'; break;
            case '\\': out += '\\'; break;
            case 'x':
                if (i + 2 < s.size() && isxdigit((unsigned char) s[i + 1]) && isxdigit((unsigned char) s[i + 2])) {
                    out += (char) strtol(s.substr(i + 1, 2).c_str(), nullptr, 16);
                    i += 2;
                    break;
                }
                out += '\\';
                out += c;
                break;
            default:
                out += '\\';
                out += c;
                break;
        }
    }
    s = out;
}

// The cache types are the type table's (its kv_cache field), by ggml's names.
bool common_parse_cache_type(const std::string & s, ggml_type * out) {
    for (int i = 0; i < GGML_TYPE_COUNT; i++) {
        if (!ggml_type_is_valid(i) || !ggml_get_type_traits((ggml_type) i)->kv_cache) continue;
        if (s == ggml_type_name((ggml_type) i)) {
            *out = (ggml_type) i;
            return true;
        }
    }
    return false;
}

bool common_parse_kv_override(const std::string & spec, llama_model_kv_override & out, std::string & err) {
    out = {};
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq >= sizeof(out.key)) {
        err = "'" + spec + "' is not KEY=TYPE:VALUE";
        return false;
    }
    memcpy(out.key, spec.data(), eq);
    const std::string rest = spec.substr(eq + 1);
    auto value_of = [&](const char * prefix) -> const char * {
        const size_t n = strlen(prefix);
        return rest.compare(0, n, prefix) == 0 ? rest.c_str() + n : nullptr;
    };
    char * end = nullptr;
    if (const char * v = value_of("int:")) {
        errno = 0;
        out.tag = LLAMA_KV_OVERRIDE_TYPE_INT;
        out.val_i64 = strtoll(v, &end, 10);
        if (!*v || *end || errno == ERANGE) {
            err = "'" + spec + "': not an integer";
            return false;
        }
    } else if (const char * v = value_of("float:")) {
        out.tag = LLAMA_KV_OVERRIDE_TYPE_FLOAT;
        out.val_f64 = strtod(v, &end);
        if (!*v || *end) {
            err = "'" + spec + "': not a number";
            return false;
        }
    } else if (const char * v = value_of("bool:")) {
        out.tag = LLAMA_KV_OVERRIDE_TYPE_BOOL;
        if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0) {
            err = "'" + spec + "': not true or false";
            return false;
        }
        out.val_bool = strcmp(v, "true") == 0;
    } else if (const char * v = value_of("str:")) {
        out.tag = LLAMA_KV_OVERRIDE_TYPE_STR;
        if (strlen(v) >= sizeof(out.val_str)) {
            err = "'" + spec + "': strings are at most 127 bytes (as llama.cpp)";
            return false;
        }
        strcpy(out.val_str, v);
    } else {
        err = "'" + spec + "': TYPE must be int, float, bool or str";
        return false;
    }
    return true;
}

std::string common_cache_type_names() {
    std::string names;
    for (int i = 0; i < GGML_TYPE_COUNT; i++) {
        if (!ggml_type_is_valid(i) || !ggml_get_type_traits((ggml_type) i)->kv_cache) continue;
        names += (names.empty() ? "" : ", ") + std::string(ggml_type_name((ggml_type) i));
    }
    return names;
}

namespace {
// a type weights may be quantized to (a weight target with a quantizer)
bool weight_type_ok(ggml_type t) {
    if (!ggml_type_is_valid(t)) return false;
    const ggml_type_traits * tr = ggml_get_type_traits(t);
    return tr->weight_target && tr->quantize_row;
}
}  // namespace

bool common_type_is_merge_target(ggml_type t) {
    return weight_type_ok(t) && !ggml_get_type_traits(t)->requires_imatrix;  // a merge has no importance matrix
}

ggml_type common_parse_weight_type(const std::string & s) {
    for (int i = 0; i < GGML_TYPE_COUNT; i++) {
        if (weight_type_ok((ggml_type) i) && strcasecmp(ggml_type_name((ggml_type) i), s.c_str()) == 0) return (ggml_type) i;
    }
    return GGML_TYPE_COUNT;
}

ggml_type common_parse_merge_type(const std::string & s) {
    for (int i = 0; i < GGML_TYPE_COUNT; i++) {
        if (common_type_is_merge_target((ggml_type) i) && strcasecmp(s.c_str(), ggml_type_name((ggml_type) i)) == 0) return (ggml_type) i;
    }
    return GGML_TYPE_COUNT;
}

std::string common_merge_type_names() {
    std::string names;
    for (int i = 0; i < GGML_TYPE_COUNT; i++) {
        if (!common_type_is_merge_target((ggml_type) i)) continue;
        std::string n = ggml_type_name((ggml_type) i);
        for (char & c : n) c = (char) tolower((unsigned char) c);
        names += (names.empty() ? "" : ", ") + n;
    }
    return names;
}

std::vector<llama_token> common_tokenize(const llama_vocab * vocab, const std::string & text, bool add_special, bool parse_special) {
    // at most one token per byte, and BOS / EOS
    std::vector<llama_token> out(text.size() + 2 * (add_special ? 1 : 0));
    int32_t n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), out.data(), (int32_t) out.size(), add_special, parse_special);
    if (n < 0) {
        out.resize((size_t) -n);
        n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), out.data(), (int32_t) out.size(), add_special, parse_special);
    }
    out.resize(n > 0 ? (size_t) n : 0);
    return out;
}

std::string common_token_to_piece(const llama_vocab * vocab, llama_token token, bool special) {
    std::string piece(16, '\0');
    int32_t n = llama_token_to_piece(vocab, token, &piece[0], (int32_t) piece.size(), 0, special);
    if (n < 0) {
        piece.resize((size_t) -n);
        n = llama_token_to_piece(vocab, token, &piece[0], (int32_t) piece.size(), 0, special);
    }
    piece.resize(n > 0 ? (size_t) n : 0);
    return piece;
}

void common_batch_clear(llama_batch & batch) { batch.n_tokens = 0; }

void common_batch_add(llama_batch & batch, llama_token id, llama_pos pos, const std::vector<llama_seq_id> & seq_ids, bool logits) {
    const int32_t i = batch.n_tokens;
    batch.token[i] = id;
    batch.pos[i] = pos;
    batch.n_seq_id[i] = (int32_t) seq_ids.size();
    for (size_t s = 0; s < seq_ids.size(); s++) batch.seq_id[i][s] = seq_ids[s];
    batch.logits[i] = logits;
    batch.n_tokens++;
}

int32_t common_default_threads() { return (int32_t) std::max(1u, std::thread::hardware_concurrency()); }

llama_model_params common_model_params_to_llama(const common_params & params) {
    llama_model_params mp = llama_model_default_params();
    mp.use_mmap = params.use_mmap;
    mp.use_mlock = params.use_mlock;
    mp.use_repack = params.use_repack;
    mp.n_gpu_layers = params.n_gpu_layers;
    mp.split_mode = params.split_mode;
    mp.main_gpu = params.main_gpu;
    mp.check_tensors = params.check_tensors;
    mp.kv_overrides = params.kv_overrides.empty() ? nullptr : params.kv_overrides.data();
    return mp;
}

llama_context_params common_context_params_to_llama(const common_params & params) {
    llama_context_params cp = llama_context_default_params();
    if (params.n_ctx > 0) cp.n_ctx = (uint32_t) params.n_ctx;
    if (params.n_batch > 0) cp.n_batch = (uint32_t) params.n_batch;
    cp.n_ubatch = (uint32_t) params.n_ubatch;
    cp.n_threads = params.n_threads > 0 ? params.n_threads : common_default_threads();
    cp.n_threads_batch = params.n_threads_batch > 0 ? params.n_threads_batch : cp.n_threads;
    cp.type_k = params.cache_type_k;
    cp.type_v = params.cache_type_v;
    cp.flash_attn = params.flash_attn;
    cp.offload_kqv = !params.no_kv_offload;
    cp.no_perf = params.no_perf;
    cp.n_seq_max = (uint32_t) std::max(1, params.n_parallel);
    cp.embeddings = params.embedding;
    cp.pooling_type = params.pooling_type;
    cp.attention_type = params.attention_type;
    cp.rope_scaling_type = params.rope_scaling_type;
    cp.rope_freq_base = params.rope_freq_base;
    cp.rope_freq_scale = params.rope_freq_scale;
    cp.yarn_ext_factor = params.yarn_ext_factor;
    cp.yarn_attn_factor = params.yarn_attn_factor;
    cp.yarn_beta_fast = params.yarn_beta_fast;
    cp.yarn_beta_slow = params.yarn_beta_slow;
    cp.yarn_orig_ctx = (uint32_t) params.yarn_orig_ctx;
    return cp;
}

std::string common_gpu_flags_warning(const common_params & params, const char * program) {
    if (params.gpu_flags_given.empty() || llama_supports_gpu_offload()) return "";
    std::string flags;
    for (const auto & f : params.gpu_flags_given) flags += (flags.empty() ? "" : ", ") + f;
    return std::string(program) + ": no usable GPU (none in this build or on this machine): " + flags +
           " ignored, everything runs on the CPU\n";
}

bool common_adapters_load(llama_model * model, const common_params & params, std::vector<llama_adapter_lora *> & out, std::string & err) {
    for (const auto & l : params.lora_adapters) {
        llama_adapter_lora * ad = llama_adapter_lora_init(model, l.path.c_str());
        if (!ad) {
            err = "cannot load LoRA adapter '" + l.path + "'";
            return false;
        }
        out.push_back(ad);
    }
    return true;
}

bool common_adapters_apply(llama_context * ctx, const common_params & params, const std::vector<llama_adapter_lora *> & adapters) {
    for (size_t i = 0; i < adapters.size(); i++) {
        if (llama_set_adapter_lora(ctx, adapters[i], params.lora_adapters[i].scale) != 0) return false;
    }
    return true;
}

llama_sampler * common_sampler_chain(const llama_model * model, const common_params_sampling & sp, int32_t n_ctx, uint32_t * seed_out,
                                     std::string * desc_out) {
    const llama_vocab * vocab = llama_model_get_vocab(model);
    uint32_t seed = (uint32_t) sp.seed;
    if (sp.seed < 0 || seed == LLAMA_DEFAULT_SEED) seed = std::random_device()();
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    llama_sampler * smpl = llama_sampler_chain_init(llama_sampler_chain_default_params());
    std::string desc = "logits";
    auto add = [&](llama_sampler * s) {
        llama_sampler_chain_add(smpl, s);
        desc += std::string(" -> ") + llama_sampler_name(s);
    };
    // The grammar (--grammar, --grammar-file, -j) before the rest: llama.cpp applies it first when the
    // chain's pick does not fit it (common_sampler_sample); here it always goes first. NULL when the
    // grammar does not parse (logged).
    if (!sp.grammar.empty()) {
        llama_sampler * g = llama_sampler_init_grammar(vocab, sp.grammar.c_str(), "root");
        if (!g) {
            llama_sampler_free(smpl);
            return nullptr;
        }
        add(g);
    }
    // -l's biases, then --ignore-eos's (llama.cpp appends them to the same list).
    std::vector<llama_logit_bias> biases = sp.logit_bias;
    size_t n_eog = 0;
    if (sp.ignore_eos) {
        for (llama_token t = 0; t < n_vocab; t++) {
            if (llama_vocab_is_eog(vocab, t)) biases.push_back({t, -INFINITY}), n_eog++;
        }
    }
    if (!biases.empty()) {
        add(llama_sampler_init_logit_bias(n_vocab, (int32_t) biases.size(), biases.data()));
        desc += " (";
        if (!sp.logit_bias.empty()) desc += std::to_string(sp.logit_bias.size()) + " from --logit-bias" + (n_eog ? ", " : "");
        if (n_eog) desc += std::to_string(n_eog) + " end-of-generation tokens at -inf";
        desc += ")";
    }
    if (sp.mirostat == 0 && sp.top_n_sigma >= 0.0f) {
        // llama.cpp's --top-nsigma replaces the list.
        add(llama_sampler_init_top_k(sp.top_k));
        add(llama_sampler_init_temp(sp.temp));
        add(llama_sampler_init_top_n_sigma(sp.top_n_sigma));
        add(llama_sampler_init_dist(seed));
    } else if (sp.mirostat == 0) {
        const int32_t last_n = sp.penalty_last_n < 0 ? n_ctx : sp.penalty_last_n;
        const int32_t dry_last_n = sp.dry_penalty_last_n < 0 ? n_ctx : sp.dry_penalty_last_n;
        // Temperature 0 keeps only the most likely token, and nothing after it in the list can
        // change that: the chain ends there with greedy, which picks the same token as llama.cpp's
        // temperature 0 and dist. Samplers that are off (they return at once in llama.cpp too)
        // are left out, and so are top-k, top-p and min-p (they keep the most likely token) when
        // no penalty follows them before the temperature.
        const bool greedy = sp.temp <= 0.0f && sp.dynatemp_range <= 0.0f &&
                            std::find(sp.samplers.begin(), sp.samplers.end(), COMMON_SAMPLER_TYPE_TEMPERATURE) != sp.samplers.end();
        auto penalty_follows = [&](size_t i) {
            for (size_t j = i + 1; j < sp.samplers.size() && sp.samplers[j] != COMMON_SAMPLER_TYPE_TEMPERATURE; j++) {
                if (sp.samplers[j] == COMMON_SAMPLER_TYPE_PENALTIES || sp.samplers[j] == COMMON_SAMPLER_TYPE_DRY) return true;
            }
            return false;
        };
        bool ended = false;
        for (size_t i = 0; i < sp.samplers.size() && !ended; i++) {
            switch (sp.samplers[i]) {
                case COMMON_SAMPLER_TYPE_PENALTIES:
                    add(llama_sampler_init_penalties(last_n, sp.penalty_repeat, sp.penalty_freq, sp.penalty_present));
                    break;
                case COMMON_SAMPLER_TYPE_DRY:
                    if (sp.dry_multiplier != 0.0f && sp.dry_base >= 1.0f && dry_last_n != 0) {
                        std::vector<const char *> br;
                        for (const auto & b : sp.dry_sequence_breakers) br.push_back(b.c_str());
                        add(llama_sampler_init_dry(vocab, llama_model_n_ctx_train(model), sp.dry_multiplier, sp.dry_base,
                                                   sp.dry_allowed_length, dry_last_n, br.data(), br.size()));
                    }
                    break;
                case COMMON_SAMPLER_TYPE_TOP_K:
                    if (!greedy || penalty_follows(i)) add(llama_sampler_init_top_k(sp.top_k));
                    break;
                case COMMON_SAMPLER_TYPE_TOP_P:
                    if (!greedy || penalty_follows(i)) add(llama_sampler_init_top_p(sp.top_p, (size_t) std::max(sp.min_keep, 0)));
                    break;
                case COMMON_SAMPLER_TYPE_MIN_P:
                    if (!greedy || penalty_follows(i)) add(llama_sampler_init_min_p(sp.min_p, (size_t) std::max(sp.min_keep, 0)));
                    break;
                case COMMON_SAMPLER_TYPE_TYPICAL_P:
                    if (sp.typ_p < 1.0f) add(llama_sampler_init_typical(sp.typ_p, (size_t) std::max(sp.min_keep, 0)));
                    break;
                case COMMON_SAMPLER_TYPE_XTC:
                    if (sp.xtc_probability > 0.0f && sp.xtc_threshold <= 0.5f) {
                        add(llama_sampler_init_xtc(sp.xtc_probability, sp.xtc_threshold, (size_t) std::max(sp.min_keep, 0), seed));
                    }
                    break;
                case COMMON_SAMPLER_TYPE_TEMPERATURE:
                    if (greedy) {
                        add(llama_sampler_init_greedy());
                        ended = true;
                    } else if (sp.dynatemp_range > 0.0f) {
                        add(llama_sampler_init_temp_ext(sp.temp, sp.dynatemp_range, sp.dynatemp_exponent));
                    } else {
                        add(llama_sampler_init_temp(sp.temp));
                    }
                    break;
                case COMMON_SAMPLER_TYPE_INFILL:
                    add(llama_sampler_init_infill(vocab));
                    break;
                default:
                    break;
            }
        }
        if (!ended) add(llama_sampler_init_dist(seed));
    } else {
        add(llama_sampler_init_temp(sp.temp));
        if (sp.mirostat == 1) {
            add(llama_sampler_init_mirostat(n_vocab, seed, sp.mirostat_tau, sp.mirostat_eta, 100));
        } else {
            add(llama_sampler_init_mirostat_v2(seed, sp.mirostat_tau, sp.mirostat_eta));
        }
    }
    if (seed_out) *seed_out = seed;
    if (desc_out) *desc_out = desc;
    return smpl;
}

namespace {
struct sampler_type_info {
    common_sampler_type type;
    const char * name;
    char chr;
};
// llama.cpp's names and letters (common/sampling.cpp)
const sampler_type_info SAMPLER_TYPES[] = {
    {COMMON_SAMPLER_TYPE_DRY, "dry", 'd'},           {COMMON_SAMPLER_TYPE_TOP_K, "top_k", 'k'},
    {COMMON_SAMPLER_TYPE_TYPICAL_P, "typ_p", 'y'},   {COMMON_SAMPLER_TYPE_TOP_P, "top_p", 'p'},
    {COMMON_SAMPLER_TYPE_MIN_P, "min_p", 'm'},       {COMMON_SAMPLER_TYPE_TEMPERATURE, "temperature", 't'},
    {COMMON_SAMPLER_TYPE_XTC, "xtc", 'x'},           {COMMON_SAMPLER_TYPE_INFILL, "infill", 'i'},
    {COMMON_SAMPLER_TYPE_PENALTIES, "penalties", 'e'},
};
// the other spellings --samplers takes, as llama.cpp's
const std::pair<const char *, common_sampler_type> SAMPLER_ALIASES[] = {
    {"top-k", COMMON_SAMPLER_TYPE_TOP_K},       {"top-p", COMMON_SAMPLER_TYPE_TOP_P},     {"nucleus", COMMON_SAMPLER_TYPE_TOP_P},
    {"typical-p", COMMON_SAMPLER_TYPE_TYPICAL_P}, {"typical", COMMON_SAMPLER_TYPE_TYPICAL_P}, {"typ-p", COMMON_SAMPLER_TYPE_TYPICAL_P},
    {"typ", COMMON_SAMPLER_TYPE_TYPICAL_P},     {"min-p", COMMON_SAMPLER_TYPE_MIN_P},     {"temp", COMMON_SAMPLER_TYPE_TEMPERATURE},
};
}  // namespace

const char * common_sampler_type_name(common_sampler_type t) {
    for (const auto & i : SAMPLER_TYPES) {
        if (i.type == t) return i.name;
    }
    return "";
}

char common_sampler_type_chr(common_sampler_type t) {
    for (const auto & i : SAMPLER_TYPES) {
        if (i.type == t) return i.chr;
    }
    return '?';
}

bool common_sampler_types_from_names(const std::string & list, std::vector<common_sampler_type> & out, std::string & err) {
    std::vector<common_sampler_type> types;
    size_t start = 0;
    for (;;) {
        const size_t end = list.find(';', start);
        const std::string name = list.substr(start, end == std::string::npos ? std::string::npos : end - start);
        bool found = false;
        for (const auto & i : SAMPLER_TYPES) {
            if (name == i.name) types.push_back(i.type), found = true;
        }
        for (const auto & a : SAMPLER_ALIASES) {
            if (!found && name == a.first) types.push_back(a.second), found = true;
        }
        // llama.cpp skips an unknown name (and the empty one of a trailing ';'); a misspelt name
        // is an error here rather than a sampler silently missing.
        if (!found && !name.empty()) {
            err = "unknown sampler '" + name + "'";
            return false;
        }
        if (end == std::string::npos) break;
        start = end + 1;
    }
    out = types;
    return true;
}

bool common_sampler_types_from_chars(const std::string & chars, std::vector<common_sampler_type> & out, std::string & err) {
    std::vector<common_sampler_type> types;
    for (char c : chars) {
        bool found = false;
        for (const auto & i : SAMPLER_TYPES) {
            if (c == i.chr) types.push_back(i.type), found = true;
        }
        if (!found) {
            err = std::string("unknown sampler letter '") + c + "'";
            return false;
        }
    }
    out = types;
    return true;
}

void common_embd_normalize(const float * inp, float * out, int n, int embd_norm) {
    double norm = 1.0;  // -1: none
    if (embd_norm == 0) {
        double m = 0.0;
        for (int i = 0; i < n; i++) m = std::max(m, (double) std::fabs(inp[i]));
        norm = m / 32760.0;  // the largest becomes 32760, inside int16
    } else if (embd_norm == 2) {
        double ss = 0.0;
        for (int i = 0; i < n; i++) ss += inp[i] * inp[i];  // float products summed in double, as llama.cpp
        norm = std::sqrt(ss);
    } else if (embd_norm > 0) {
        double sp = 0.0;
        for (int i = 0; i < n; i++) sp += std::pow(std::fabs((double) inp[i]), embd_norm);
        norm = std::pow(sp, 1.0 / embd_norm);
    }
    const float scale = norm > 0.0 ? (float) (1.0 / norm) : 0.0f;
    for (int i = 0; i < n; i++) out[i] = inp[i] * scale;
}

float common_embd_similarity_cos(const float * embd1, const float * embd2, int n) {
    double dot = 0.0, n1 = 0.0, n2 = 0.0;
    for (int i = 0; i < n; i++) {
        dot += embd1[i] * embd2[i];
        n1 += embd1[i] * embd1[i];
        n2 += embd2[i] * embd2[i];
    }
    if (n1 == 0.0 || n2 == 0.0) return n1 == 0.0 && n2 == 0.0 ? 1.0f : 0.0f;
    return (float) (dot / (std::sqrt(n1) * std::sqrt(n2)));
}

bool common_load_prompt(common_params & params, const char * program) {
    if (!params.prompt_file.empty()) {
        FILE * f = fopen(params.prompt_file.c_str(), "rb");
        if (!f) {
            fprintf(stderr, "%s: cannot read the prompt file '%s': %s\n", program, params.prompt_file.c_str(), strerror(errno));
            return false;
        }
        std::string text;
        char buf[1 << 16];
        size_t n;
        while ((n = fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
        const bool bad = ferror(f) != 0;
        fclose(f);
        if (bad) {
            fprintf(stderr, "%s: cannot read the prompt file '%s'\n", program, params.prompt_file.c_str());
            return false;
        }
        if (!params.prompt_binary && !text.empty() && text.back() == '\n') text.pop_back();
        params.prompt = std::move(text);
    }
    if (params.escape) string_process_escapes(params.prompt);
    return true;
}

namespace {
int g_log_verbosity = 1;

void common_log_callback(enum ggml_log_level level, const char * text, void *) {
    const int need = level == GGML_LOG_LEVEL_ERROR ? 0 : level == GGML_LOG_LEVEL_DEBUG ? 2 : 1;
    if (g_log_verbosity < need) return;
    fputs(text, stderr);
    fflush(stderr);
}
}  // namespace

void common_log_init(int verbosity) {
    g_log_verbosity = verbosity;
    llama_log_set(common_log_callback, nullptr);
}

int common_log_verbosity() { return g_log_verbosity; }

void common_log_at(int level, const char * fmt, ...) {
    if (g_log_verbosity < level) return;
    va_list args;
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fflush(stderr);
}
