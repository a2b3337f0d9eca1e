// llama-vocab.cpp - the vocabulary and tokenizers: loading tokenizer.ggml.* from GGUF metadata,
// SentencePiece-style BPE over scores ("llama"), byte-level BPE over merge ranks ("gpt2") with
// the model's pre-tokenizer, WordPiece ("bert": greedy longest match over a vocabulary whose
// word-initial pieces start with U+2581, as llama.cpp's converter writes BERT's), special-token
// splitting, detokenization, and the C API.
#include "llama-vocab.h"

#include "gguf.h"
#include "llama-unicode.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <memory>
#include <string_view>
#include <unordered_map>

namespace {

enum token_type : int32_t {
    TOKEN_TYPE_UNDEFINED    = 0,
    TOKEN_TYPE_NORMAL       = 1,
    TOKEN_TYPE_UNKNOWN      = 2,
    TOKEN_TYPE_CONTROL      = 3,
    TOKEN_TYPE_USER_DEFINED = 4,
    TOKEN_TYPE_UNUSED       = 5,
    TOKEN_TYPE_BYTE         = 6,
};

const char * const SPM_SPACE = "\xe2\x96\x81";  // U+2581, SentencePiece's visible space

// Texts of end-of-turn tokens, looked up when the file names no tokenizer.ggml.eot_token_id.
const char * const EOT_TEXTS[] = { "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endofturn|>", "<EOT>" };
// Further texts that end generation when they are special tokens of the vocabulary.
const char * const EOG_TEXTS[] = { "<|eom_id|>", "<|endoftext|>", "<|end_of_text|>" };

// "<0xXX>" -> XX, or -1.
int parse_byte_token(const std::string & text) {
    if (text.size() != 6 || text.compare(0, 3, "<0x") != 0 || text[5] != '>') return -1;
    int v = 0;
    for (int k = 3; k < 5; k++) {
        const char c = text[k];
        const int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

// ---- reading metadata ----------------------------------------------------------------------
bool is_integer_type(enum gguf_type t) {
    switch (t) {
        case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16:
        case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64:
            return true;
        default:
            return false;
    }
}

// Element i of a packed integer array (or a single value's raw bytes) of type t.
int64_t read_integer(const void * data, enum gguf_type t, size_t i) {
    switch (t) {
        case GGUF_TYPE_UINT8:  return ((const uint8_t  *) data)[i];
        case GGUF_TYPE_INT8:   return ((const int8_t   *) data)[i];
        case GGUF_TYPE_UINT16: return ((const uint16_t *) data)[i];
        case GGUF_TYPE_INT16:  return ((const int16_t  *) data)[i];
        case GGUF_TYPE_UINT32: return ((const uint32_t *) data)[i];
        case GGUF_TYPE_INT32:  return ((const int32_t  *) data)[i];
        case GGUF_TYPE_UINT64: return (int64_t) std::min<uint64_t>(((const uint64_t *) data)[i], INT64_MAX);
        case GGUF_TYPE_INT64:  return ((const int64_t  *) data)[i];
        default:               return 0;
    }
}

// Typed access to the tokenizer keys; every getter checks the stored type first (the gguf
// getters abort on a mismatch) and reports a wrong type as an error.
struct meta_reader {
    const gguf_context * meta;
    std::string & err;

    int64_t find(const char * key) const { return gguf_find_key(meta, key); }

    bool type_error(const char * key, const char * expected) const {
        err = std::string("tokenizer key ") + key + ": expected " + expected;
        return false;
    }

    // false on a wrong type; *present tells whether the key exists.
    bool get_string(const char * key, std::string & out, bool * present) const {
        const int64_t id = find(key);
        *present = id >= 0;
        if (id < 0) return true;
        if (gguf_get_kv_type(meta, id) != GGUF_TYPE_STRING) return type_error(key, "a string");
        out = gguf_get_val_str(meta, id);
        return true;
    }

    bool get_integer(const char * key, int64_t & out, bool * present) const {
        const int64_t id = find(key);
        *present = id >= 0;
        if (id < 0) return true;
        const enum gguf_type t = gguf_get_kv_type(meta, id);
        if (!is_integer_type(t)) return type_error(key, "an integer");
        out = read_integer(gguf_get_val_data(meta, id), t, 0);
        return true;
    }

    bool get_bool(const char * key, bool & out) const {
        const int64_t id = find(key);
        if (id < 0) return true;
        const enum gguf_type t = gguf_get_kv_type(meta, id);
        if (t == GGUF_TYPE_BOOL) { out = gguf_get_val_bool(meta, id); return true; }
        if (!is_integer_type(t)) return type_error(key, "a boolean");
        out = read_integer(gguf_get_val_data(meta, id), t, 0) != 0;
        return true;
    }

    // An array key: its id (-1 when absent) after checking the element type and the count.
    bool get_array(const char * key, bool want_string, size_t n_expected, int64_t & id_out) const {
        id_out = find(key);
        if (id_out < 0) return true;
        if (gguf_get_kv_type(meta, id_out) != GGUF_TYPE_ARRAY) return type_error(key, "an array");
        const enum gguf_type et = gguf_get_arr_type(meta, id_out);
        if (want_string && et != GGUF_TYPE_STRING) return type_error(key, "an array of strings");
        if (n_expected != SIZE_MAX && gguf_get_arr_n(meta, id_out) != n_expected) {
            err = std::string("tokenizer key ") + key + ": " + std::to_string(gguf_get_arr_n(meta, id_out)) +
                  " elements for " + std::to_string(n_expected) + " tokens";
            return false;
        }
        return true;
    }
};

// ---- special-token matching ----------------------------------------------------------------
// A byte trie of the special tokens' texts, for leftmost-longest matching in one pass.
struct special_trie {
    struct node {
        llama_token token = LLAMA_TOKEN_NULL;
        std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    };
    std::vector<node> nodes{1};

    int32_t child(int32_t n, unsigned char c) const {
        const auto & ch = nodes[n].children;
        auto it = std::lower_bound(ch.begin(), ch.end(), c, [](const std::pair<unsigned char, int32_t> & e, unsigned char b) { return e.first < b; });
        return (it != ch.end() && it->first == c) ? it->second : -1;
    }

    void insert(const std::string & text, llama_token id) {
        int32_t n = 0;
        for (unsigned char c : text) {
            int32_t next = child(n, c);
            if (next < 0) {
                next = (int32_t) nodes.size();
                nodes.emplace_back();
                auto & ch = nodes[n].children;
                auto it = std::lower_bound(ch.begin(), ch.end(), c, [](const std::pair<unsigned char, int32_t> & e, unsigned char b) { return e.first < b; });
                ch.insert(it, { c, next });
            }
            n = next;
        }
        if (nodes[n].token == LLAMA_TOKEN_NULL) nodes[n].token = id;  // first of equal texts wins
    }
};

// A piece of the input: raw text [begin, end) or one special token.
struct fragment {
    size_t begin, end;
    llama_token token;  // LLAMA_TOKEN_NULL for raw text
};

// Merge candidates of both BPE flavours, ordered best first: higher `priority`, then leftmost.
struct merge_candidate {
    float   priority;  // SPM: the merged token's score; BPE: minus the merge rank
    int32_t left;      // index of the left symbol
    int32_t length;    // bytes of the two symbols together (detects stale candidates)
};

struct candidate_worse {
    bool operator()(const merge_candidate & a, const merge_candidate & b) const {
        return a.priority < b.priority || (a.priority == b.priority && a.left > b.left);
    }
};

struct symbol {
    int32_t begin, length;  // bytes in the text being encoded; length 0 once merged away
    int32_t prev, next;     // neighbours (-1 at the ends)
    llama_token token;      // BPE: the symbol's token
};

struct bpe_merge {
    int32_t rank;
    llama_token result;
};

uint64_t pair_key(llama_token a, llama_token b) { return ((uint64_t) (uint32_t) a << 32) | (uint32_t) b; }

}  // namespace

struct llama_vocab::impl {
    enum llama_vocab_type type = LLAMA_VOCAB_TYPE_NONE;
    llama_pretok pretok = llama_pretok::GPT2;
    bool ignore_merges = false;  // BPE: a pre-token that is a whole token is taken as it is (Llama 3)

    std::vector<std::string> texts;
    std::vector<float>       scores;
    std::vector<int32_t>     types;
    std::vector<std::string> pieces;        // what each token renders to
    std::vector<uint8_t>     piece_special; // rendered only when special rendering is asked for
    std::unordered_map<std::string_view, llama_token> text_to_id;  // views into texts

    llama_token bos = LLAMA_TOKEN_NULL, eos = LLAMA_TOKEN_NULL, eot = LLAMA_TOKEN_NULL;
    llama_token unk = LLAMA_TOKEN_NULL, pad = LLAMA_TOKEN_NULL, sep = LLAMA_TOKEN_NULL;
    llama_token fim[LLAMA_VOCAB_FIM_COUNT] = { LLAMA_TOKEN_NULL, LLAMA_TOKEN_NULL, LLAMA_TOKEN_NULL,
                                               LLAMA_TOKEN_NULL, LLAMA_TOKEN_NULL, LLAMA_TOKEN_NULL };
    bool add_bos = false, add_eos = false, add_space_prefix = false;
    std::vector<llama_token> eog;

    size_t max_token_len = 0;     // WPM: the longest token text, in bytes
    llama_token byte_token[256];  // SPM: the <0xXX> tokens; BPE: the token of each byte's character
    std::unordered_map<uint64_t, bpe_merge> merges;
    special_trie specials;

    int32_t n_tokens() const { return (int32_t) texts.size(); }
    bool valid(llama_token id) const { return id >= 0 && id < n_tokens(); }

    bool load(const gguf_context * meta, std::string & err);
    bool load_merges(const meta_reader & r, std::string & err);
    void build_pieces();
    llama_token find(std::string_view text) const {
        auto it = text_to_id.find(text);
        return it == text_to_id.end() ? LLAMA_TOKEN_NULL : it->second;
    }

    void split_special(const std::string & text, bool parse_special, std::vector<fragment> & out) const;
    void encode_spm(const std::string & escaped, std::vector<llama_token> & out) const;
    void encode_bpe(const char * text, size_t len, std::vector<llama_token> & out) const;
    void encode_wpm(const char * text, size_t len, std::vector<llama_token> & out) const;
    void encode_bpe_piece(const char * text, size_t len, std::vector<symbol> & syms,
                          std::vector<merge_candidate> & heap, std::string & scratch, std::vector<llama_token> & out) const;
};

// ---- loading -------------------------------------------------------------------------------
bool llama_vocab::impl::load(const gguf_context * meta, std::string & err) {
    if (!meta) { err = "no metadata"; return false; }
    meta_reader r{ meta, err };
    bool present = false;

    std::string model;
    if (!r.get_string("tokenizer.ggml.model", model, &present)) return false;
    if (!present) { err = "missing tokenizer.ggml.model"; return false; }
    if (model == "llama") {
        type = LLAMA_VOCAB_TYPE_SPM;
    } else if (model == "gpt2") {
        type = LLAMA_VOCAB_TYPE_BPE;
    } else if (model == "bert") {
        type = LLAMA_VOCAB_TYPE_WPM;
    } else if (model == "none" || model == "no_vocab") {
        type = LLAMA_VOCAB_TYPE_NONE;
        return true;
    } else {
        err = "unsupported tokenizer model '" + model + "' (supported: llama, gpt2, bert)";
        return false;
    }

    if (type == LLAMA_VOCAB_TYPE_BPE) {
        std::string pre = "default";
        if (!r.get_string("tokenizer.ggml.pre", pre, &present)) return false;
        if (pre == "default" || pre == "gpt-2" || pre == "gpt2" || pre == "mpt" || pre == "olmo") {
            pretok = llama_pretok::GPT2;
        } else if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") {
            pretok = llama_pretok::LLAMA3;
            ignore_merges = true;
        } else if (pre == "qwen2") {
            pretok = llama_pretok::QWEN2;
        } else if (pre == "smollm" || pre == "starcoder") {
            pretok = llama_pretok::SMOLLM;
        } else {
            err = "unsupported pre-tokenizer '" + pre + "' (supported: default, gpt-2, llama-bpe, qwen2, smollm)";
            return false;
        }
    }

    // Tokens, scores, types.
    int64_t id_tokens;
    if (!r.get_array("tokenizer.ggml.tokens", true, SIZE_MAX, id_tokens)) return false;
    if (id_tokens < 0) { err = "missing tokenizer.ggml.tokens"; return false; }
    const size_t n = gguf_get_arr_n(meta, id_tokens);
    if (n == 0 || n > (size_t) INT32_MAX) { err = "tokenizer.ggml.tokens: bad token count " + std::to_string(n); return false; }
    texts.resize(n);
    for (size_t i = 0; i < n; i++) texts[i] = gguf_get_arr_str(meta, id_tokens, i);

    int64_t id_scores, id_types;
    if (!r.get_array("tokenizer.ggml.scores", false, n, id_scores)) return false;
    if (!r.get_array("tokenizer.ggml.token_type", false, n, id_types)) return false;
    scores.assign(n, 0.0f);
    if (id_scores >= 0) {
        if (gguf_get_arr_type(meta, id_scores) != GGUF_TYPE_FLOAT32) return r.type_error("tokenizer.ggml.scores", "an array of f32");
        memcpy(scores.data(), gguf_get_arr_data(meta, id_scores), n * sizeof(float));
        for (float & sc : scores) if (std::isnan(sc)) sc = -INFINITY;  // NaN would break the merge order
    }
    types.assign(n, TOKEN_TYPE_NORMAL);
    if (id_types >= 0) {
        const enum gguf_type et = gguf_get_arr_type(meta, id_types);
        if (!is_integer_type(et)) return r.type_error("tokenizer.ggml.token_type", "an array of integers");
        const void * data = gguf_get_arr_data(meta, id_types);
        for (size_t i = 0; i < n; i++) {
            const int64_t t = read_integer(data, et, i);
            types[i] = (t >= TOKEN_TYPE_NORMAL && t <= TOKEN_TYPE_BYTE) ? (int32_t) t : TOKEN_TYPE_NORMAL;
        }
    } else if (type == LLAMA_VOCAB_TYPE_SPM) {
        for (size_t i = 0; i < n; i++) if (parse_byte_token(texts[i]) >= 0) types[i] = TOKEN_TYPE_BYTE;
    }

    text_to_id.reserve(n);
    for (size_t i = 0; i < n; i++) {
        text_to_id.emplace(std::string_view(texts[i]), (llama_token) i);  // first wins
        max_token_len = std::max(max_token_len, texts[i].size());
    }

    // Byte tokens.
    std::fill(std::begin(byte_token), std::end(byte_token), LLAMA_TOKEN_NULL);
    if (type == LLAMA_VOCAB_TYPE_SPM) {
        for (size_t i = 0; i < n; i++) {
            const int b = types[i] == TOKEN_TYPE_BYTE ? parse_byte_token(texts[i]) : -1;
            if (b >= 0 && byte_token[b] == LLAMA_TOKEN_NULL) byte_token[b] = (llama_token) i;
        }
    } else if (type == LLAMA_VOCAB_TYPE_BPE) {
        for (int b = 0; b < 256; b++) {
            std::string ch;
            llama_utf8_append(ch, llama_byte_to_unicode((uint8_t) b));
            byte_token[b] = find(ch);
        }
    }

    // Special ids and flags; ids outside the vocabulary (like u32 -1) mean "none".
    const bool spm = type == LLAMA_VOCAB_TYPE_SPM, wpm = type == LLAMA_VOCAB_TYPE_WPM;
    if (spm) { bos = 1; eos = 2; unk = 0; }  // SentencePiece's defaults, for files that omit them
    if (wpm) { bos = 101; unk = 100; sep = 102; pad = 0; }  // BERT's [CLS], [UNK], [SEP], [PAD]
    struct { const char * key; llama_token * id; } ids[] = {
        { "tokenizer.ggml.bos_token_id", &bos }, { "tokenizer.ggml.eos_token_id", &eos },
        { "tokenizer.ggml.eot_token_id", &eot }, { "tokenizer.ggml.unknown_token_id", &unk },
        { "tokenizer.ggml.padding_token_id", &pad },
        { "tokenizer.ggml.seperator_token_id", &sep },  // sic, as llama.cpp spells the key
        { "tokenizer.ggml.fim_pre_token_id", &fim[LLAMA_VOCAB_FIM_PRE] },
        { "tokenizer.ggml.fim_suf_token_id", &fim[LLAMA_VOCAB_FIM_SUF] },
        { "tokenizer.ggml.fim_mid_token_id", &fim[LLAMA_VOCAB_FIM_MID] },
        { "tokenizer.ggml.fim_pad_token_id", &fim[LLAMA_VOCAB_FIM_PAD] },
        { "tokenizer.ggml.fim_rep_token_id", &fim[LLAMA_VOCAB_FIM_REP] },
        { "tokenizer.ggml.fim_sep_token_id", &fim[LLAMA_VOCAB_FIM_SEP] },
    };
    bool eot_given = false;
    for (auto & k : ids) {
        int64_t v = 0;
        if (!r.get_integer(k.key, v, &present)) return false;
        if (present) *k.id = (v >= 0 && v < (int64_t) n) ? (llama_token) v : LLAMA_TOKEN_NULL;
        if (present && k.id == &eot) eot_given = true;
    }
    if (wpm && gguf_find_key(meta, "tokenizer.ggml.bos_token_id") < 0) {
        // llama.cpp's converter writes BERT's [CLS] as the cls token: it opens the text as a BOS.
        int64_t v = 0;
        if (!r.get_integer("tokenizer.ggml.cls_token_id", v, &present)) return false;
        if (present) bos = (v >= 0 && v < (int64_t) n) ? (llama_token) v : LLAMA_TOKEN_NULL;
    }
    for (llama_token * id : { &bos, &eos, &unk, &sep, &pad }) if (!valid(*id)) *id = LLAMA_TOKEN_NULL;

    // WordPiece: [CLS] text [SEP] (the [SEP] comes with add_bos, as in llama.cpp).
    add_bos = spm || wpm || pretok == llama_pretok::LLAMA3;
    add_eos = false;
    add_space_prefix = spm;
    if (!r.get_bool("tokenizer.ggml.add_bos_token", add_bos)) return false;
    if (!r.get_bool("tokenizer.ggml.add_eos_token", add_eos)) return false;
    if (!r.get_bool("tokenizer.ggml.add_space_prefix", add_space_prefix)) return false;

    // End-of-turn and end-of-generation tokens are found by their texts whatever their type, and
    // become control tokens as llama.cpp makes them (a Gemma file's user-defined <end_of_turn> is
    // then not matched in plain text, and is not printed unless special tokens are).
    if (!eot_given) {
        for (const char * t : EOT_TEXTS) {
            const llama_token id = find(t);
            if (id != LLAMA_TOKEN_NULL) { eot = id; break; }
        }
    }
    auto add_eog = [&](llama_token id) {
        if (id != LLAMA_TOKEN_NULL && std::find(eog.begin(), eog.end(), id) == eog.end()) eog.push_back(id);
    };
    add_eog(eos);
    add_eog(eot);
    auto add_eog_text = [&](const char * t) {
        const llama_token id = find(t);
        if (id == LLAMA_TOKEN_NULL) return;
        types[id] = TOKEN_TYPE_CONTROL;
        add_eog(id);
    };
    for (const char * t : EOT_TEXTS) add_eog_text(t);
    for (const char * t : EOG_TEXTS) add_eog_text(t);

    // Texts split out of the input before tokenizing: control, user-defined and unknown tokens.
    for (size_t i = 0; i < n; i++) {
        const int32_t t = types[i];
        if ((t == TOKEN_TYPE_CONTROL || t == TOKEN_TYPE_USER_DEFINED || t == TOKEN_TYPE_UNKNOWN) && !texts[i].empty()) {
            specials.insert(texts[i], (llama_token) i);
        }
    }

    if (type == LLAMA_VOCAB_TYPE_BPE && !load_merges(r, err)) return false;
    build_pieces();
    return true;
}

bool llama_vocab::impl::load_merges(const meta_reader & r, std::string & err) {
    int64_t id;
    if (!r.get_array("tokenizer.ggml.merges", true, SIZE_MAX, id)) return false;
    if (id < 0) { err = "missing tokenizer.ggml.merges (required by the gpt2 tokenizer)"; return false; }
    const size_t n = gguf_get_arr_n(r.meta, id);
    merges.reserve(n);
    for (size_t i = 0; i < n; i++) {
        const std::string_view m = gguf_get_arr_str(r.meta, id, i);
        const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
        if (sp == std::string_view::npos) {
            err = "tokenizer.ggml.merges[" + std::to_string(i) + "]: not two tokens separated by a space";
            return false;
        }
        const std::string_view a = m.substr(0, sp), b = m.substr(sp + 1);
        const llama_token ta = find(a), tb = find(b);
        const llama_token tr = find(std::string(a) + std::string(b));
        // A merge whose parts or result are not tokens can never apply: skip it.
        if (ta == LLAMA_TOKEN_NULL || tb == LLAMA_TOKEN_NULL || tr == LLAMA_TOKEN_NULL) continue;
        merges.emplace(pair_key(ta, tb), bpe_merge{ (int32_t) i, tr });  // the lower rank wins
    }
    return true;
}

void llama_vocab::impl::build_pieces() {
    const size_t n = texts.size();
    pieces.resize(n);
    piece_special.assign(n, 0);
    const bool spm = type == LLAMA_VOCAB_TYPE_SPM;
    const bool space_marker = spm || type == LLAMA_VOCAB_TYPE_WPM;  // U+2581 renders as a space
    for (size_t i = 0; i < n; i++) {
        const std::string & t = texts[i];
        std::string & p = pieces[i];
        switch (types[i]) {
            case TOKEN_TYPE_BYTE: {
                const int b = parse_byte_token(t);
                p = b >= 0 ? std::string(1, (char) b) : t;
                break;
            }
            case TOKEN_TYPE_CONTROL:
            case TOKEN_TYPE_UNUSED:
                p = t;
                piece_special[i] = 1;
                break;
            case TOKEN_TYPE_UNKNOWN:
                if (spm) {
                    p = " \xe2\x81\x87 ";  // SentencePiece renders unknown pieces as " U+2047 "
                } else {
                    p = t;
                    piece_special[i] = 1;
                }
                break;
            case TOKEN_TYPE_USER_DEFINED:
                if (!spm) { p = t; break; }  // added tokens of BPE models hold raw text
                [[fallthrough]];
            default:
                if (space_marker) {
                    // U+2581 -> space
                    for (size_t k = 0; k < t.size();) {
                        if (t.compare(k, 3, SPM_SPACE) == 0) { p += ' '; k += 3; } else { p += t[k++]; }
                    }
                } else {
                    // Back through the byte alphabet; characters outside it stay as they are.
                    for (size_t k = 0; k < t.size();) {
                        uint32_t cp;
                        const size_t len = llama_utf8_decode(t.data(), t.size(), k, &cp);
                        const int b = llama_unicode_to_byte(cp);
                        if (b >= 0) p += (char) b; else p.append(t, k, len);
                        k += len;
                    }
                }
                break;
        }
    }
}

// ---- tokenizing ----------------------------------------------------------------------------
void llama_vocab::impl::split_special(const std::string & text, bool parse_special, std::vector<fragment> & out) const {
    // Leftmost-longest matches. User-defined tokens are always matched (as added tokens are by
    // Hugging Face tokenizers and SentencePiece); control and unknown ones only with parse_special.
    const size_t len = text.size();
    size_t raw_begin = 0;
    for (size_t i = 0; i < len;) {
        llama_token best = LLAMA_TOKEN_NULL;
        size_t best_end = i;
        int32_t node = 0;
        for (size_t k = i; k < len; k++) {
            node = specials.child(node, (unsigned char) text[k]);
            if (node < 0) break;
            const llama_token t = specials.nodes[node].token;
            if (t != LLAMA_TOKEN_NULL && (parse_special || types[t] == TOKEN_TYPE_USER_DEFINED)) {
                best = t;
                best_end = k + 1;
            }
        }
        if (best == LLAMA_TOKEN_NULL) { i++; continue; }
        if (raw_begin < i) out.push_back({ raw_begin, i, LLAMA_TOKEN_NULL });
        out.push_back({ i, best_end, best });
        i = raw_begin = best_end;
    }
    if (raw_begin < len) out.push_back({ raw_begin, len, LLAMA_TOKEN_NULL });
}

// SentencePiece BPE: start from characters, repeatedly merge the adjacent pair whose
// concatenation is the best-scoring token (leftmost on ties); leftovers fall back to bytes.
void llama_vocab::impl::encode_spm(const std::string & text, std::vector<llama_token> & out) const {
    std::vector<symbol> syms;
    syms.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        uint32_t cp;
        const size_t len = llama_utf8_decode(text.data(), text.size(), i, &cp);
        const int32_t k = (int32_t) syms.size();
        syms.push_back({ (int32_t) i, (int32_t) len, k - 1, -1, LLAMA_TOKEN_NULL });
        if (k > 0) syms[k - 1].next = k;
        i += len;
    }

    std::vector<merge_candidate> heap;
    auto try_pair = [&](int32_t left) {
        if (left < 0 || syms[left].next < 0) return;
        const symbol & a = syms[left];
        const int32_t length = a.length + syms[a.next].length;
        const llama_token t = find(std::string_view(text.data() + a.begin, (size_t) length));
        if (t == LLAMA_TOKEN_NULL || types[t] != TOKEN_TYPE_NORMAL) return;
        heap.push_back({ scores[t], left, length });
        std::push_heap(heap.begin(), heap.end(), candidate_worse());
    };
    for (int32_t k = 0; k + 1 < (int32_t) syms.size(); k++) try_pair(k);

    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), candidate_worse());
        const merge_candidate c = heap.back();
        heap.pop_back();
        symbol & a = syms[c.left];
        // Symbols only grow, so a candidate is stale exactly when its length no longer matches.
        if (a.length == 0 || a.next < 0 || a.length + syms[a.next].length != c.length) continue;
        symbol & b = syms[a.next];
        a.length = c.length;
        a.next = b.next;
        if (b.next >= 0) syms[b.next].prev = c.left;
        b.length = 0;
        try_pair(a.prev);
        try_pair(c.left);
    }

    bool after_unk = false;  // consecutive unknown pieces give one unknown token, as in SentencePiece
    for (int32_t k = syms.empty() ? -1 : 0; k >= 0; k = syms[k].next) {
        const symbol & s = syms[k];
        const std::string_view piece(text.data() + s.begin, (size_t) s.length);
        const llama_token t = find(piece);
        const bool known = t != LLAMA_TOKEN_NULL && types[t] == TOKEN_TYPE_NORMAL;
        bool all_bytes = !known;
        for (size_t i = 0; all_bytes && i < piece.size(); i++) all_bytes = byte_token[(unsigned char) piece[i]] != LLAMA_TOKEN_NULL;
        if (known) {
            out.push_back(t);
        } else if (all_bytes) {
            for (unsigned char c : piece) out.push_back(byte_token[c]);
        } else if (unk != LLAMA_TOKEN_NULL && !after_unk) {
            out.push_back(unk);
        }
        after_unk = !known && !all_bytes;
    }
}

// Byte-level BPE of one pre-token: start from its bytes' characters, repeatedly apply the
// lowest-ranked merge among adjacent pairs (leftmost on ties).
void llama_vocab::impl::encode_bpe_piece(const char * text, size_t len, std::vector<symbol> & syms,
                                         std::vector<merge_candidate> & heap, std::string & scratch,
                                         std::vector<llama_token> & out) const {
    if (ignore_merges) {
        scratch.clear();
        for (size_t i = 0; i < len; i++) llama_utf8_append(scratch, llama_byte_to_unicode((uint8_t) text[i]));
        const llama_token t = find(scratch);
        if (t != LLAMA_TOKEN_NULL) { out.push_back(t); return; }
    }
    syms.clear();
    heap.clear();
    for (size_t i = 0; i < len; i++) {
        syms.push_back({ (int32_t) i, 1, (int32_t) i - 1, i + 1 < len ? (int32_t) i + 1 : -1, byte_token[(uint8_t) text[i]] });
    }
    auto try_pair = [&](int32_t left) {
        if (left < 0 || syms[left].next < 0) return;
        const symbol & a = syms[left];
        const symbol & b = syms[a.next];
        if (a.token == LLAMA_TOKEN_NULL || b.token == LLAMA_TOKEN_NULL) return;
        auto it = merges.find(pair_key(a.token, b.token));
        if (it == merges.end()) return;
        heap.push_back({ -(float) it->second.rank, left, a.length + b.length });
        std::push_heap(heap.begin(), heap.end(), candidate_worse());
    };
    for (int32_t k = 0; k + 1 < (int32_t) len; k++) try_pair(k);

    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), candidate_worse());
        const merge_candidate c = heap.back();
        heap.pop_back();
        symbol & a = syms[c.left];
        if (a.length == 0 || a.next < 0 || a.length + syms[a.next].length != c.length) continue;
        symbol & b = syms[a.next];
        a.token = merges.find(pair_key(a.token, b.token))->second.result;
        a.length = c.length;
        a.next = b.next;
        if (b.next >= 0) syms[b.next].prev = c.left;
        b.length = 0;
        try_pair(a.prev);
        try_pair(c.left);
    }

    for (int32_t k = len ? 0 : -1; k >= 0; k = syms[k].next) {
        const llama_token t = syms[k].token;
        if (t != LLAMA_TOKEN_NULL) out.push_back(t);
        else if (unk != LLAMA_TOKEN_NULL) out.push_back(unk);  // a byte without a token: lost
    }
}

void llama_vocab::impl::encode_bpe(const char * text, size_t len, std::vector<llama_token> & out) const {
    std::vector<size_t> ends;
    llama_pretokenize(pretok, text, len, ends);
    std::vector<symbol> syms;
    std::vector<merge_candidate> heap;
    std::string scratch;
    size_t begin = 0;
    for (size_t end : ends) {
        encode_bpe_piece(text + begin, end - begin, syms, heap, scratch, out);
        begin = end;
    }
}

// Code points that make a word of their own: CJK ideographs (the blocks BERT's tokenizer lists).
static bool is_cjk_ideograph(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// WordPiece as llama.cpp runs it: each character reduced to the first code point of its NFD
// (accents dropped) and lowercased; whitespace ends a word; control and format characters, NUL and
// U+FFFD vanish; punctuation, ASCII symbols and CJK ideographs are words of one character. Each
// word, prefixed with U+2581, is cut into the longest tokens from the left; a word with a piece no
// token matches becomes one unknown token.
void llama_vocab::impl::encode_wpm(const char * text, size_t len, std::vector<llama_token> & out) const {
    std::vector<std::string> words(1);
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += llama_utf8_decode(text, len, i, &cp);
        if (cp >= LLAMA_UNICODE_INVALID_BASE) continue;  // a byte outside UTF-8: dropped, as U+FFFD is
        cp = llama_unicode_nfd_base(cp);
        if (llama_unicode_flags(cp) & LLAMA_UFLAG_SPACE) {
            if (!words.back().empty()) words.emplace_back();
            continue;
        }
        const enum llama_unicode_category cat = llama_unicode_category_of(cp);
        if (cp == 0 || cp == 0xFFFD || cat == LLAMA_UCAT_CC || cat == LLAMA_UCAT_CF || cat == LLAMA_UCAT_CO ||
            cat == LLAMA_UCAT_CS) {
            continue;
        }
        const bool punct = cat >= LLAMA_UCAT_PC && cat <= LLAMA_UCAT_PO;
        const bool symbol = cat >= LLAMA_UCAT_SM && cat <= LLAMA_UCAT_SO;
        if (punct || (cp < 0x7F && symbol) || is_cjk_ideograph(cp)) {
            if (!words.back().empty()) words.emplace_back();
            llama_utf8_append(words.back(), llama_unicode_tolower(cp));
            words.emplace_back();
        } else {
            llama_utf8_append(words.back(), llama_unicode_tolower(cp));
        }
    }
    std::string word;
    for (const std::string & w : words) {
        if (w.empty()) continue;
        word = SPM_SPACE + w;
        const size_t n = word.size(), first = out.size();
        bool ok = true;
        for (size_t i = 0; i < n && ok;) {
            ok = false;
            for (size_t j = std::min(n, i + max_token_len); j > i; j--) {
                const llama_token t = find(std::string_view(word.data() + i, j - i));
                if (t == LLAMA_TOKEN_NULL) continue;
                out.push_back(t);
                i = j;
                ok = true;
                break;
            }
        }
        if (!ok) out.resize(first);
        if (out.size() == first && unk != LLAMA_TOKEN_NULL) out.push_back(unk);
    }
}

// llama.cpp's clean_up_tokenization_spaces for WordPiece output, three passes over the text in
// place: no space before ? ! . , ; a lone apostrophe between spaces loses both (and the character
// after it no longer counts as following a space); no space before 's 'm 're 've.
static std::string clean_spaces(std::string t) {
    size_t n = t.size(), w = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        const char x = t[i];
        if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) w--;
        t[w++] = x;
    }
    n = w;
    w = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        const char x = t[i];
        if (x == '\'' && i + 1 < n && t[i - 1] == ' ' && t[i + 1] == ' ') {
            w--;
            t[++i] = '\0';
        }
        t[w++] = x;
    }
    n = w;
    w = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        const char x = t[i];
        if (t[i - 1] == ' ' && x == '\'' && i + 1 < n) {
            const char x1 = t[i + 1], x2 = i + 2 < n ? t[i + 2] : '\0';
            if (x1 == 's' || x1 == 'm' || (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) w--;
        }
        t[w++] = x;
    }
    t.resize(w);
    return t;
}

// ---- llama_vocab ---------------------------------------------------------------------------
static const std::string empty_string;

llama_vocab::llama_vocab(llama_vocab && other) noexcept : pimpl(other.pimpl) { other.pimpl = nullptr; }

llama_vocab & llama_vocab::operator=(llama_vocab && other) noexcept {
    if (this != &other) {
        delete pimpl;
        pimpl = other.pimpl;
        other.pimpl = nullptr;
    }
    return *this;
}

llama_vocab::~llama_vocab() { delete pimpl; }

bool llama_vocab::load(const gguf_context * meta, std::string & err) {
    delete pimpl;
    pimpl = nullptr;
    std::unique_ptr<impl> p(new impl);
    if (!p->load(meta, err)) return false;
    pimpl = p.release();
    return true;
}

enum llama_vocab_type llama_vocab::type() const { return pimpl ? pimpl->type : LLAMA_VOCAB_TYPE_NONE; }
int32_t llama_vocab::n_tokens() const { return pimpl ? pimpl->n_tokens() : 0; }

const std::string & llama_vocab::text(llama_token id) const {
    return pimpl && pimpl->valid(id) ? pimpl->texts[id] : empty_string;
}

float llama_vocab::score(llama_token id) const { return pimpl && pimpl->valid(id) ? pimpl->scores[id] : 0.0f; }
llama_token llama_vocab::bos() const { return pimpl ? pimpl->bos : LLAMA_TOKEN_NULL; }
llama_token llama_vocab::eos() const { return pimpl ? pimpl->eos : LLAMA_TOKEN_NULL; }
llama_token llama_vocab::eot() const { return pimpl ? pimpl->eot : LLAMA_TOKEN_NULL; }
llama_token llama_vocab::unk() const { return pimpl ? pimpl->unk : LLAMA_TOKEN_NULL; }
llama_token llama_vocab::pad() const { return pimpl ? pimpl->pad : LLAMA_TOKEN_NULL; }
llama_token llama_vocab::sep() const { return pimpl ? pimpl->sep : LLAMA_TOKEN_NULL; }
llama_token llama_vocab::nl() const { return pimpl && pimpl->type != LLAMA_VOCAB_TYPE_NONE ? pimpl->byte_token[(uint8_t) '\n'] : LLAMA_TOKEN_NULL; }
llama_token llama_vocab::fim(llama_vocab_fim which) const { return pimpl ? pimpl->fim[which] : LLAMA_TOKEN_NULL; }
bool llama_vocab::add_bos() const { return pimpl && pimpl->add_bos && pimpl->bos != LLAMA_TOKEN_NULL; }
bool llama_vocab::add_eos() const { return pimpl && pimpl->add_eos && pimpl->eos != LLAMA_TOKEN_NULL; }

bool llama_vocab::is_eog(llama_token id) const {
    return pimpl && id != LLAMA_TOKEN_NULL && std::find(pimpl->eog.begin(), pimpl->eog.end(), id) != pimpl->eog.end();
}

bool llama_vocab::is_control(llama_token id) const {
    return pimpl && pimpl->valid(id) && pimpl->types[id] == TOKEN_TYPE_CONTROL;
}

int32_t llama_vocab::token_type(llama_token id) const { return pimpl && pimpl->valid(id) ? pimpl->types[id] : 0; }

std::vector<llama_token> llama_vocab::tokenize(const std::string & text, bool add_special, bool parse_special) const {
    std::vector<llama_token> out;
    // Symbols index bytes with int32: longer texts are not tokenized.
    if (!pimpl || pimpl->type == LLAMA_VOCAB_TYPE_NONE || text.size() > (size_t) INT32_MAX / 4) return out;
    const impl & v = *pimpl;
    if (add_special && add_bos()) out.push_back(v.bos);

    std::vector<fragment> frags;
    v.split_special(text, parse_special, frags);
    bool after_special = true;  // SentencePiece adds its space before the text and after each special token
    std::string escaped;
    for (const fragment & f : frags) {
        if (f.token != LLAMA_TOKEN_NULL) {
            out.push_back(f.token);
            after_special = true;
            continue;
        }
        if (v.type == LLAMA_VOCAB_TYPE_SPM) {
            escaped.clear();
            if (v.add_space_prefix && after_special) escaped += SPM_SPACE;
            for (size_t i = f.begin; i < f.end; i++) {
                if (text[i] == ' ') escaped += SPM_SPACE; else escaped += text[i];
            }
            v.encode_spm(escaped, out);
        } else if (v.type == LLAMA_VOCAB_TYPE_WPM) {
            v.encode_wpm(text.data() + f.begin, f.end - f.begin, out);
        } else {
            v.encode_bpe(text.data() + f.begin, f.end - f.begin, out);
        }
        after_special = false;
    }

    if (add_special && add_eos()) out.push_back(v.eos);
    if (add_special && v.type == LLAMA_VOCAB_TYPE_WPM && add_bos() && v.sep != LLAMA_TOKEN_NULL) out.push_back(v.sep);
    return out;
}

std::string llama_vocab::token_to_piece(llama_token id, bool special) const {
    if (!pimpl || !pimpl->valid(id)) return std::string();
    if (pimpl->piece_special[id] && !special) return std::string();
    return pimpl->pieces[id];
}

std::string llama_vocab::detokenize(const std::vector<llama_token> & tokens, bool remove_special, bool unparse_special) const {
    std::string out;
    if (!pimpl) return out;
    const impl & v = *pimpl;
    // As llama.cpp: the first token's piece loses one leading space when the vocabulary adds one
    // (SentencePiece's prefix), unless a BOS was removed before it (remove_special): a text
    // tokenized without BOS comes back as it was. A BOS left in place is that first token.
    size_t begin = 0, end = tokens.size();
    bool strip_space = v.add_space_prefix;
    if (remove_special && v.add_bos && end > 0 && tokens[0] == v.bos) {
        begin = 1;
        strip_space = false;
    }
    if (remove_special && v.add_eos && end > begin && tokens[end - 1] == v.eos) end--;
    for (size_t i = begin; i < end; i++) {
        const llama_token t = tokens[i];
        const bool shown = v.valid(t) && !(v.piece_special[t] && !unparse_special);
        if (shown) {
            const std::string & p = v.pieces[t];
            out += strip_space && !p.empty() && p[0] == ' ' ? p.substr(1) : p;
        }
        strip_space = false;
    }
    return v.type == LLAMA_VOCAB_TYPE_WPM ? clean_spaces(out) : out;
}

// ---- C API ---------------------------------------------------------------------------------
enum llama_vocab_type llama_vocab_type(const struct llama_vocab * vocab) { return vocab ? vocab->type() : LLAMA_VOCAB_TYPE_NONE; }
int32_t llama_vocab_n_tokens(const struct llama_vocab * vocab) { return vocab ? vocab->n_tokens() : 0; }
const char * llama_vocab_get_text(const struct llama_vocab * vocab, llama_token token) {
    return vocab ? vocab->text(token).c_str() : "";
}
float llama_vocab_get_score(const struct llama_vocab * vocab, llama_token token) { return vocab ? vocab->score(token) : 0.0f; }
llama_token llama_vocab_bos(const struct llama_vocab * vocab) { return vocab ? vocab->bos() : LLAMA_TOKEN_NULL; }
llama_token llama_vocab_eos(const struct llama_vocab * vocab) { return vocab ? vocab->eos() : LLAMA_TOKEN_NULL; }
llama_token llama_vocab_eot(const struct llama_vocab * vocab) { return vocab ? vocab->eot() : LLAMA_TOKEN_NULL; }
bool llama_vocab_get_add_bos(const struct llama_vocab * vocab) { return vocab && vocab->add_bos(); }
bool llama_vocab_get_add_eos(const struct llama_vocab * vocab) { return vocab && vocab->add_eos(); }
bool llama_vocab_is_eog(const struct llama_vocab * vocab, llama_token token) { return vocab && vocab->is_eog(token); }
bool llama_vocab_is_control(const struct llama_vocab * vocab, llama_token token) { return vocab && vocab->is_control(token); }
llama_token llama_vocab_sep(const struct llama_vocab * vocab) { return vocab ? vocab->sep() : LLAMA_TOKEN_NULL; }
llama_token llama_vocab_nl(const struct llama_vocab * vocab) { return vocab ? vocab->nl() : LLAMA_TOKEN_NULL; }
llama_token llama_vocab_pad(const struct llama_vocab * vocab) { return vocab ? vocab->pad() : LLAMA_TOKEN_NULL; }
llama_token llama_vocab_fim_pre(const struct llama_vocab * vocab) { return vocab ? vocab->fim(LLAMA_VOCAB_FIM_PRE) : LLAMA_TOKEN_NULL; }
llama_token llama_vocab_fim_suf(const struct llama_vocab * vocab) { return vocab ? vocab->fim(LLAMA_VOCAB_FIM_SUF) : LLAMA_TOKEN_NULL; }
llama_token llama_vocab_fim_mid(const struct llama_vocab * vocab) { return vocab ? vocab->fim(LLAMA_VOCAB_FIM_MID) : LLAMA_TOKEN_NULL; }
llama_token llama_vocab_fim_pad(const struct llama_vocab * vocab) { return vocab ? vocab->fim(LLAMA_VOCAB_FIM_PAD) : LLAMA_TOKEN_NULL; }
llama_token llama_vocab_fim_rep(const struct llama_vocab * vocab) { return vocab ? vocab->fim(LLAMA_VOCAB_FIM_REP) : LLAMA_TOKEN_NULL; }
llama_token llama_vocab_fim_sep(const struct llama_vocab * vocab) { return vocab ? vocab->fim(LLAMA_VOCAB_FIM_SEP) : LLAMA_TOKEN_NULL; }

enum llama_token_attr llama_vocab_get_attr(const struct llama_vocab * vocab, llama_token token) {
    switch (vocab ? vocab->token_type(token) : TOKEN_TYPE_UNDEFINED) {
        case TOKEN_TYPE_NORMAL:       return LLAMA_TOKEN_ATTR_NORMAL;
        case TOKEN_TYPE_UNKNOWN:      return LLAMA_TOKEN_ATTR_UNKNOWN;
        case TOKEN_TYPE_CONTROL:      return LLAMA_TOKEN_ATTR_CONTROL;
        case TOKEN_TYPE_USER_DEFINED: return LLAMA_TOKEN_ATTR_USER_DEFINED;
        case TOKEN_TYPE_UNUSED:       return LLAMA_TOKEN_ATTR_UNUSED;
        case TOKEN_TYPE_BYTE:         return LLAMA_TOKEN_ATTR_BYTE;
        default:                      return LLAMA_TOKEN_ATTR_UNDEFINED;
    }
}

// The deprecated names of the above, as llama.cpp keeps them.
int32_t llama_n_vocab(const struct llama_vocab * vocab) { return llama_vocab_n_tokens(vocab); }
const char * llama_token_get_text(const struct llama_vocab * vocab, llama_token token) { return llama_vocab_get_text(vocab, token); }
float llama_token_get_score(const struct llama_vocab * vocab, llama_token token) { return llama_vocab_get_score(vocab, token); }
enum llama_token_attr llama_token_get_attr(const struct llama_vocab * vocab, llama_token token) { return llama_vocab_get_attr(vocab, token); }
bool llama_token_is_eog(const struct llama_vocab * vocab, llama_token token) { return llama_vocab_is_eog(vocab, token); }
bool llama_token_is_control(const struct llama_vocab * vocab, llama_token token) { return llama_vocab_is_control(vocab, token); }
llama_token llama_token_bos(const struct llama_vocab * vocab) { return llama_vocab_bos(vocab); }
llama_token llama_token_eos(const struct llama_vocab * vocab) { return llama_vocab_eos(vocab); }
llama_token llama_token_eot(const struct llama_vocab * vocab) { return llama_vocab_eot(vocab); }
llama_token llama_token_cls(const struct llama_vocab * vocab) { return llama_vocab_bos(vocab); }
llama_token llama_vocab_cls(const struct llama_vocab * vocab) { return llama_vocab_bos(vocab); }
llama_token llama_token_sep(const struct llama_vocab * vocab) { return llama_vocab_sep(vocab); }
llama_token llama_token_nl(const struct llama_vocab * vocab) { return llama_vocab_nl(vocab); }
llama_token llama_token_pad(const struct llama_vocab * vocab) { return llama_vocab_pad(vocab); }
bool llama_add_bos_token(const struct llama_vocab * vocab) { return llama_vocab_get_add_bos(vocab); }
bool llama_add_eos_token(const struct llama_vocab * vocab) { return llama_vocab_get_add_eos(vocab); }
llama_token llama_token_fim_pre(const struct llama_vocab * vocab) { return llama_vocab_fim_pre(vocab); }
llama_token llama_token_fim_suf(const struct llama_vocab * vocab) { return llama_vocab_fim_suf(vocab); }
llama_token llama_token_fim_mid(const struct llama_vocab * vocab) { return llama_vocab_fim_mid(vocab); }
llama_token llama_token_fim_pad(const struct llama_vocab * vocab) { return llama_vocab_fim_pad(vocab); }
llama_token llama_token_fim_rep(const struct llama_vocab * vocab) { return llama_vocab_fim_rep(vocab); }
llama_token llama_token_fim_sep(const struct llama_vocab * vocab) { return llama_vocab_fim_sep(vocab); }

// Copies s into buf when it fits; returns its length, or minus it when it does not.
static int32_t copy_out(const std::string & s, char * buf, int32_t size) {
    if (s.size() > (size_t) INT32_MAX) return INT32_MIN;
    const int32_t n = (int32_t) s.size();
    if (!buf || size < n) return -n;
    if (n > 0) memcpy(buf, s.data(), (size_t) n);
    return n;
}

int32_t llama_tokenize(const struct llama_vocab * vocab, const char * text, int32_t text_len, llama_token * tokens,
                       int32_t n_tokens_max, bool add_special, bool parse_special) {
    if (!vocab || text_len < 0 || (!text && text_len > 0)) return INT32_MIN;
    const std::vector<llama_token> out = vocab->tokenize(std::string(text ? text : "", (size_t) text_len), add_special, parse_special);
    if (out.size() > (size_t) INT32_MAX) return INT32_MIN;
    const int32_t n = (int32_t) out.size();
    if (!tokens || n_tokens_max < n) return -n;
    std::copy(out.begin(), out.end(), tokens);
    return n;
}

int32_t llama_token_to_piece(const struct llama_vocab * vocab, llama_token token, char * buf, int32_t length,
                             int32_t lstrip, bool special) {
    if (!vocab) return 0;
    std::string piece = vocab->token_to_piece(token, special);
    size_t skip = 0;
    while (lstrip > 0 && skip < piece.size() && piece[skip] == ' ') { skip++; lstrip--; }
    piece.erase(0, skip);
    return copy_out(piece, buf, length);
}

int32_t llama_detokenize(const struct llama_vocab * vocab, const llama_token * tokens, int32_t n_tokens, char * text,
                         int32_t text_len_max, bool remove_special, bool unparse_special) {
    if (!vocab || n_tokens < 0 || (!tokens && n_tokens > 0)) return INT32_MIN;
    const std::vector<llama_token> list(tokens, tokens + n_tokens);
    return copy_out(vocab->detokenize(list, remove_special, unparse_special), text, text_len_max);
}
